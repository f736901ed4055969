//! The player's rules: which sites may frame a tenant's embed page (`embedOrigins`).
//!
//! An embed origin is an origin exactly as a browser names it: `https://host[:port]`, or
//! `http://` for `localhost` and `127.0.0.1` (development). It becomes a source of the
//! embed page's `frame-ancestors` directive, so nothing that could widen or break the
//! policy passes: no wildcard, path, query, fragment, credentials, quote, semicolon or
//! whitespace.
//!
//! An embed token lets the embed page play one private or subscribers-only broadcast: the
//! tenant's server mints it for a viewer it has let in, and the page checks it.

use crate::ApiError;
use crate::jwt;
use crate::validate::JsonBody;
use crate::validate::body::FieldKind;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;

/// At most this many origins per tenant.
pub const MAX_EMBED_ORIGINS: usize = 20;
/// The longest origin accepted (a host name is at most 253 characters).
pub const MAX_ORIGIN_LENGTH: usize = 300;

/// `origin` normalised (lowercase, a default port dropped), or why it is not an embed
/// origin.
pub fn embed_origin(origin: &str) -> Result<String, &'static str> {
    if origin.len() > MAX_ORIGIN_LENGTH {
        return Err("is too long for an origin");
    }
    let lower = origin.to_ascii_lowercase();
    let (scheme, rest) = match lower.split_once("://") {
        Some(("https", rest)) => ("https", rest),
        Some(("http", rest)) => ("http", rest),
        _ => return Err("must start with https:// (http:// only for localhost or 127.0.0.1)"),
    };
    if rest.is_empty() {
        return Err("has no host");
    }
    if let Some(c) = rest
        .chars()
        .find(|c| matches!(c, '/' | '?' | '#' | '@' | '*'))
    {
        return Err(match c {
            '*' => "must not hold a wildcard",
            '@' => "must not hold credentials",
            _ => "must be an origin alone: no path, query or fragment",
        });
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    if !is_host(host) {
        return Err("has no valid host name");
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && !p.starts_with('0') && p.bytes().all(|b| b.is_ascii_digit()) => {
                Some(n)
            }
            _ => return Err("has no valid port"),
        },
    };
    if scheme == "http" && !matches!(host, "localhost" | "127.0.0.1") {
        return Err("must use https:// (http:// only for localhost or 127.0.0.1)");
    }
    let default_port = if scheme == "https" { 443 } else { 80 };
    Ok(match port {
        Some(p) if p != default_port => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// A DNS name (letters, digits, hyphens, dot-separated labels of 1 to 63) or an IPv4
/// address: the hosts a `frame-ancestors` source takes without quoting.
fn is_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// Every entry of `sent` checked: the normalised list (each origin once, in the order
/// sent), or each bad entry's error as `(field, message)` with its index.
pub fn embed_origins(field: &str, sent: &[Value]) -> Result<Vec<String>, Vec<(String, String)>> {
    if sent.len() > MAX_EMBED_ORIGINS {
        return Err(vec![(
            field.to_string(),
            format!("at most {MAX_EMBED_ORIGINS} origins (got {})", sent.len()),
        )]);
    }
    let mut origins: Vec<String> = Vec::new();
    let mut errors = Vec::new();
    for (i, entry) in sent.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match entry.as_str().map(embed_origin) {
            Some(Ok(origin)) => {
                if !origins.contains(&origin) {
                    origins.push(origin);
                }
            }
            Some(Err(why)) => {
                let shown: String = entry
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(80)
                    .collect();
                errors.push((at, format!("{shown:?} {why}")));
            }
            None => errors.push((at, "must be a string".to_string())),
        }
    }
    if errors.is_empty() {
        Ok(origins)
    } else {
        Err(errors)
    }
}

/// The `frame-ancestors` directive of an embed page: exactly `origins`, or `'none'`.
pub fn frame_ancestors(origins: &[String]) -> String {
    if origins.is_empty() {
        "frame-ancestors 'none'".to_string()
    } else {
        format!("frame-ancestors {}", origins.join(" "))
    }
}

/// The body field `embedOrigins`: a required list of embed origins, normalised.
pub struct EmbedOrigins;

impl FieldKind for EmbedOrigins {
    type Value = Vec<String>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Vec<String> {
        let Some(value) = body.opt_value(name) else {
            body.error(name, "is required");
            return Vec::new();
        };
        let Value::Array(entries) = value else {
            body.error(name, "must be an array of origins");
            return Vec::new();
        };
        match embed_origins(name, &entries) {
            Ok(origins) => origins,
            Err(errors) => {
                for (field, message) in errors {
                    body.error(&field, message);
                }
                Vec::new()
            }
        }
    }

    fn schema() -> Value {
        json!({
            "type": "array",
            "maxItems": MAX_EMBED_ORIGINS,
            "items": {
                "type": "string",
                "maxLength": MAX_ORIGIN_LENGTH,
                "description": "An origin: https://host[:port] (http:// only for localhost \
                                or 127.0.0.1), no path, query, fragment or wildcard.",
                "pattern": "^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$",
            },
        })
    }
}

/// The audience of embed tokens: no other verifier accepts one.
pub const EMBED_TOKEN_AUDIENCE: &str = "embed-player";
/// How long an embed token plays unless the tenant's server asks otherwise.
pub const EMBED_TOKEN_DEFAULT_TTL_SECS: i64 = 3600;
/// The shortest and longest lifetimes the tenant's server may ask for.
pub const EMBED_TOKEN_MIN_TTL_SECS: i64 = 60;
pub const EMBED_TOKEN_MAX_TTL_SECS: i64 = 86_400;
/// The longest token the embed page reads (a minted one is about 250 characters).
pub const MAX_EMBED_TOKEN_LENGTH: usize = 1024;

/// What an embed token names: one broadcast of one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedTokenClaims {
    pub aud: String,
    /// The tenant (SDK client) id.
    pub tid: String,
    /// The broadcast's id.
    pub bid: String,
}

/// The key embed tokens are signed with: derived from `media_secret` for this purpose
/// only (HMAC-SHA256), so the pages component, which checks the tokens, holds no key
/// that signs user tokens.
pub fn embed_token_key(media_secret: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(media_secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"embed-token/v1");
    mac.finalize().into_bytes().to_vec()
}

/// An embed token for broadcast `broadcast_id` of tenant `tenant_id`, valid `ttl_secs`.
pub fn issue_embed_token(
    key: &[u8],
    tenant_id: &str,
    broadcast_id: &str,
    now: i64,
    ttl_secs: i64,
) -> String {
    let claims = EmbedTokenClaims {
        aud: EMBED_TOKEN_AUDIENCE.to_string(),
        tid: tenant_id.to_string(),
        bid: broadcast_id.to_string(),
    };
    jwt::sign(key, claims, now, ttl_secs)
}

/// The broadcast an embed token names and when it expires, if it is genuine, unexpired
/// at `now` and an embed token.
pub fn verify_embed_token(
    key: &[u8],
    token: &str,
    now: i64,
) -> Result<(EmbedTokenClaims, i64), ApiError> {
    let (claims, expires): (EmbedTokenClaims, i64) = jwt::verify_until(key, token, now)?;
    if claims.aud != EMBED_TOKEN_AUDIENCE {
        return Err(ApiError::unauthorized(
            "invalid_token",
            "the token is not valid: not an embed token",
        ));
    }
    Ok((claims, expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embed_tokens_name_one_broadcast_until_they_expire() {
        let key = embed_token_key("media-secret");
        let token = issue_embed_token(&key, "tenant", "b1", 1_000, 600);
        let (claims, expires) = verify_embed_token(&key, &token, 1_599).unwrap();
        assert_eq!((claims.tid.as_str(), claims.bid.as_str()), ("tenant", "b1"));
        assert_eq!(expires, 1_600);
        assert!(verify_embed_token(&key, &token, 1_601).is_err(), "expired");
        let other = embed_token_key("another-secret");
        assert!(
            verify_embed_token(&other, &token, 1_100).is_err(),
            "wrong key"
        );
        // A token of the same key for another audience is not an embed token.
        let ticket = jwt::issue_socket_ticket(&key, "tenant", "b1", None, 1_000);
        assert!(verify_embed_token(&key, &ticket, 1_010).is_err());
        // An embed token is not a user token, whatever key signed it.
        assert!(jwt::verify_user(&key, &token, 1_100).is_err());
    }

    #[test]
    fn origins_are_normalised() {
        assert_eq!(
            embed_origin("HTTPS://Shop.Example").unwrap(),
            "https://shop.example"
        );
        assert_eq!(
            embed_origin("https://shop.example:443").unwrap(),
            "https://shop.example"
        );
        assert_eq!(
            embed_origin("https://shop.example:8443").unwrap(),
            "https://shop.example:8443"
        );
        assert_eq!(
            embed_origin("http://127.0.0.1:5173").unwrap(),
            "http://127.0.0.1:5173"
        );
        assert_eq!(
            embed_origin("http://localhost").unwrap(),
            "http://localhost"
        );
    }

    #[test]
    fn anything_but_an_origin_is_refused() {
        for bad in [
            "*",
            "https://*",
            "https://*.x",
            "javascript:alert(1)",
            "https://a.example/",
            "https://a.example/path",
            "https://a.example?x",
            "https://a.example#x",
            "https://user:pw@a.example",
            "https://a.example'; script-src *",
            "https://a.example https://b.example",
            "http://shop.example",
            "ftp://a.example",
            "https://",
            "https://a.example:0",
            "https://a.example:65536",
            "https://a.example:80a",
            "https://a..example",
            "https://-a.example",
            "https://[::1]",
            "'self'",
            "data:",
            "",
        ] {
            assert!(embed_origin(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn a_list_names_each_bad_entry_and_keeps_its_order() {
        let sent = [
            json!("https://b.example"),
            json!("https://A.example"),
            json!("https://b.example"),
        ];
        assert_eq!(
            embed_origins("embedOrigins", &sent).unwrap(),
            ["https://b.example", "https://a.example"]
        );
        let errors = embed_origins(
            "embedOrigins",
            &[json!("https://ok.example"), json!("*"), json!(3)],
        )
        .unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].0, "embedOrigins[1]");
        assert!(errors[0].1.contains("\"*\""), "{errors:?}");
        assert_eq!(errors[1].0, "embedOrigins[2]");
        let many: Vec<Value> = (0..21)
            .map(|i| json!(format!("https://s{i}.example")))
            .collect();
        assert_eq!(
            embed_origins("embedOrigins", &many).unwrap_err()[0].0,
            "embedOrigins"
        );
    }

    #[test]
    fn frame_ancestors_lists_exactly_the_origins() {
        assert_eq!(frame_ancestors(&[]), "frame-ancestors 'none'");
        assert_eq!(
            frame_ancestors(&["https://a.example".into(), "http://127.0.0.1:9".into()]),
            "frame-ancestors https://a.example http://127.0.0.1:9"
        );
    }
}
