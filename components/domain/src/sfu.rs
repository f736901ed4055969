//! SFU (LiveKit) rules: who gets which grants, the access token's claims, the client
//! address, and time-limited TURN credentials.

use crate::jwt;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Serialize;

/// Lifetime of an SFU access token.
pub const TOKEN_TTL_SECS: i64 = 6 * 3600;
/// What prefixes every SFU access token we answer, so clients can tell it apart.
pub const TOKEN_PREFIX: &str = "sfu_";

/// The part a participant plays in a room. Callers ask for `publisher` or `subscriber`;
/// a publisher who is a session's co-host (not its owner) gets the `co_host` role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Publisher,
    CoHost,
    Subscriber,
}

impl Role {
    /// The roles a token request may name.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "publisher" => Some(Role::Publisher),
            "subscriber" => Some(Role::Subscriber),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Publisher => "publisher",
            Role::CoHost => "co_host",
            Role::Subscriber => "subscriber",
        }
    }

    pub fn publishes(self) -> bool {
        self != Role::Subscriber
    }
}

/// LiveKit's `video` grant. Publish rights are always written out: LiveKit treats an
/// absent `canPublish` as allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VideoGrant {
    pub room_join: bool,
    pub room: String,
    pub can_subscribe: bool,
    pub can_publish: bool,
    pub can_publish_data: bool,
}

impl VideoGrant {
    pub fn for_role(room: &str, role: Role) -> Self {
        let publishes = role.publishes();
        Self {
            room_join: true,
            room: room.to_string(),
            can_subscribe: true,
            can_publish: publishes,
            can_publish_data: publishes,
        }
    }
}

/// Room settings LiveKit applies when the token's holder creates the room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomConfig {
    pub name: String,
    pub max_participants: u32,
}

/// The claims of an SFU access token besides `iat` and `exp`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenClaims {
    /// The SFU API key.
    pub iss: String,
    /// The participant identity.
    pub sub: String,
    pub nbf: i64,
    pub jti: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// JSON text the SFU hands to other participants; carries the role.
    pub metadata: String,
    pub video: VideoGrant,
    pub room_config: RoomConfig,
}

/// What a token is minted for.
pub struct TokenRequest<'a> {
    pub api_key: &'a str,
    pub api_secret: &'a str,
    pub identity: &'a str,
    pub display_name: &'a str,
    pub room: &'a str,
    pub role: Role,
    pub max_participants: u32,
    pub jti: &'a str,
}

/// The claims of an access token for `request`, valid from `now` (no earlier).
pub fn token_claims(request: &TokenRequest<'_>, now: i64) -> TokenClaims {
    TokenClaims {
        iss: request.api_key.to_string(),
        sub: request.identity.to_string(),
        nbf: now,
        jti: request.jti.to_string(),
        name: request.display_name.to_string(),
        metadata: serde_json::json!({ "role": request.role.as_str() }).to_string(),
        video: VideoGrant::for_role(request.room, request.role),
        room_config: RoomConfig {
            name: request.room.to_string(),
            max_participants: request.max_participants,
        },
    }
}

/// A signed access token (HS256 with the API secret), with the `sfu_` prefix.
pub fn mint_token(request: &TokenRequest<'_>, now: i64) -> String {
    let claims = token_claims(request, now);
    let jwt = jwt::sign(request.api_secret.as_bytes(), claims, now, TOKEN_TTL_SECS);
    format!("{TOKEN_PREFIX}{jwt}")
}

/// The address the server calls (LiveKit's HTTP API, its health) when `sfu_api_url` is
/// unset, from the one clients connect to: `wss` → `https`, `ws` → `http`; an http(s)
/// URL is its own API address. `None` for any other scheme.
pub fn derived_api_url(server_url: &str) -> Option<String> {
    let (scheme, rest) = server_url.split_once("://")?;
    let api_scheme = match scheme.to_ascii_lowercase().as_str() {
        "wss" | "https" => "https",
        "ws" | "http" => "http",
        _ => return None,
    };
    (!rest.is_empty()).then(|| format!("{api_scheme}://{rest}"))
}

/// Whether a configured `sfu_api_url` is one the server may call: http or https only.
pub fn is_api_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    (lower.starts_with("https://") && lower.len() > 8)
        || (lower.starts_with("http://") && lower.len() > 7)
}

/// The WebSocket address clients connect to, from `sfu_server_url` (ws/wss, or the SFU's
/// http(s) base URL, which older configurations give).
pub fn client_url(server_url: &str) -> String {
    if let Some(rest) = server_url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = server_url.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        server_url.to_string()
    }
}

/// TURN credentials in the usual time-limited scheme (the TURN REST API that coturn's
/// `use-auth-secret` implements): the username is `expiry:user`, the password the base64
/// HMAC-SHA1 of the username keyed with the shared secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCredential {
    pub username: String,
    pub credential: String,
    pub expires_at: i64,
}

pub fn turn_credential(secret: &str, user: &str, now: i64, ttl_secs: i64) -> TurnCredential {
    let expires_at = now + ttl_secs;
    let username = format!("{expires_at}:{user}");
    let mut mac =
        Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(username.as_bytes());
    let credential = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    TurnCredential {
        username,
        credential,
        expires_at,
    }
}

/// Parses a comma-separated list of ICE server URLs; every entry must use one of the
/// allowed schemes. Answers the first bad entry on failure.
pub fn ice_urls<'a>(list: &'a str, schemes: &[&str]) -> Result<Vec<String>, &'a str> {
    let mut urls = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let scheme_ok = entry
            .split_once(':')
            .is_some_and(|(scheme, rest)| schemes.contains(&scheme) && !rest.is_empty());
        if !scheme_ok {
            return Err(entry);
        }
        urls.push(entry.to_string());
    }
    Ok(urls)
}

/// The parts of an SFU access token that say which room it opens.
#[derive(Debug, Clone, serde::Deserialize)]
struct RoomTokenClaims {
    iss: String,
    video: RoomTokenGrant,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoomTokenGrant {
    #[serde(default)]
    room_join: bool,
    #[serde(default)]
    room: String,
}

/// Whether `token` (with or without our `sfu_` prefix) is a valid SFU access token for
/// `room`: signed with the SFU API secret, issued by its API key, current at `now` (`nbf`
/// and `exp`), and
/// granting `roomJoin` to exactly that room. LiveKit egress sends such a token to the
/// recording page.
pub fn is_token_for_room(
    api_key: &str,
    api_secret: &str,
    token: &str,
    room: &str,
    now: i64,
) -> bool {
    let token = token.strip_prefix(TOKEN_PREFIX).unwrap_or(token);
    let Ok(claims) = jwt::verify::<RoomTokenClaims>(api_secret.as_bytes(), token, now) else {
        return false;
    };
    claims.iss == api_key && claims.video.room_join && !room.is_empty() && claims.video.room == room
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(role: Role) -> TokenRequest<'static> {
        TokenRequest {
            api_key: "APIkey",
            api_secret: "secret-secret-secret-secret-secret",
            identity: "user-1",
            display_name: "",
            room: "0b5f6a9e-1d3c-4c1e-9a57-2f0a4c1b7e11",
            role,
            max_participants: 100,
            jti: "j1",
        }
    }

    #[test]
    fn grants_follow_the_role() {
        let publisher = token_claims(&request(Role::Publisher), 1000);
        assert!(publisher.video.can_publish && publisher.video.can_publish_data);
        let cohost = token_claims(&request(Role::CoHost), 1000);
        assert!(cohost.video.can_publish && cohost.video.can_publish_data);
        assert_eq!(cohost.metadata, r#"{"role":"co_host"}"#);
        let subscriber = token_claims(&request(Role::Subscriber), 1000);
        assert!(!subscriber.video.can_publish && !subscriber.video.can_publish_data);
        assert!(subscriber.video.room_join && subscriber.video.can_subscribe);
        // Publish rights are explicit even when false.
        let json = serde_json::to_value(&subscriber).unwrap();
        assert_eq!(json["video"]["canPublish"], false);
        assert_eq!(json["metadata"], r#"{"role":"subscriber"}"#);
        assert!(json.get("name").is_none());
    }

    #[test]
    fn minted_tokens_carry_the_claims() {
        let token = mint_token(&request(Role::Publisher), 1_700_000_000);
        let jwt = token.strip_prefix(TOKEN_PREFIX).unwrap();
        let payload = jwt.split('.').nth(1).unwrap();
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        let claims: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(claims["iss"], "APIkey");
        assert_eq!(claims["sub"], "user-1");
        assert_eq!(claims["nbf"], 1_700_000_000);
        assert_eq!(claims["iat"], 1_700_000_000);
        assert_eq!(claims["exp"], 1_700_000_000 + TOKEN_TTL_SECS);
        assert_eq!(claims["video"]["room"], request(Role::Publisher).room);
        assert_eq!(claims["roomConfig"]["maxParticipants"], 100);
    }

    #[test]
    fn client_urls() {
        assert_eq!(client_url("https://sfu.example"), "wss://sfu.example");
        assert_eq!(client_url("http://127.0.0.1:7880"), "ws://127.0.0.1:7880");
        assert_eq!(client_url("wss://sfu.example"), "wss://sfu.example");
    }

    #[test]
    fn the_api_url_is_derived_from_the_client_url() {
        let derived = |url| derived_api_url(url);
        assert_eq!(
            derived("wss://my.livekit.cloud").as_deref(),
            Some("https://my.livekit.cloud")
        );
        assert_eq!(
            derived("ws://127.0.0.1:7880").as_deref(),
            Some("http://127.0.0.1:7880")
        );
        assert_eq!(
            derived("WSS://sfu.example:7443").as_deref(),
            Some("https://sfu.example:7443")
        );
        assert_eq!(
            derived("https://sfu.example").as_deref(),
            Some("https://sfu.example")
        );
        assert_eq!(
            derived("http://sfu.example").as_deref(),
            Some("http://sfu.example")
        );
        assert_eq!(derived("ftp://sfu.example"), None);
        assert_eq!(derived("sfu.example"), None);
        assert_eq!(derived("wss://"), None);
    }

    #[test]
    fn only_http_urls_are_api_urls() {
        assert!(is_api_url("https://sfu.example"));
        assert!(is_api_url("http://127.0.0.1:7880"));
        assert!(!is_api_url("wss://sfu.example"));
        assert!(!is_api_url("ws://sfu.example"));
        assert!(!is_api_url("https://"));
    }

    #[test]
    fn turn_credentials_use_the_rest_scheme() {
        // Reference value: printf '1100:alice' | openssl dgst -sha1 -hmac 's3cret' -binary | base64
        let c = turn_credential("s3cret", "alice", 1000, 100);
        assert_eq!(c.username, "1100:alice");
        assert_eq!(c.expires_at, 1100);
        assert_eq!(c.credential, "yScH+dy4TXINtJataMzIoiW142Y=");
    }

    #[test]
    fn ice_url_lists() {
        let stun = ["stun", "stuns"];
        assert_eq!(
            ice_urls(" stun:a.example:3478 , stuns:b.example ", &stun),
            Ok(vec!["stun:a.example:3478".into(), "stuns:b.example".into()])
        );
        assert_eq!(ice_urls("", &stun), Ok(vec![]));
        assert_eq!(ice_urls("stun:a,http://x", &stun), Err("http://x"));
        assert_eq!(ice_urls("turn:", &["turn"]), Err("turn:"));
    }

    #[test]
    fn room_tokens_open_only_their_room() {
        let (key, secret, now) = (
            "APIkey",
            "a-secret-long-enough-for-hs256-0123456789",
            1_700_000_000,
        );
        let request = |room| TokenRequest {
            api_key: key,
            api_secret: secret,
            identity: "egress",
            display_name: "",
            room,
            role: Role::Subscriber,
            max_participants: 10,
            jti: "j",
        };
        let token = mint_token(&request("room-a"), now);
        assert!(is_token_for_room(key, secret, &token, "room-a", now));
        let bare = token.strip_prefix(TOKEN_PREFIX).unwrap();
        assert!(is_token_for_room(key, secret, bare, "room-a", now));
        assert!(!is_token_for_room(key, secret, &token, "room-b", now));
        assert!(!is_token_for_room("other", secret, &token, "room-a", now));
        assert!(!is_token_for_room(
            key,
            "another-secret-long-enough-0123456789",
            &token,
            "room-a",
            now
        ));
        assert!(!is_token_for_room(
            key,
            secret,
            &token,
            "room-a",
            now + TOKEN_TTL_SECS + 1
        ));
        assert!(!is_token_for_room(key, secret, &token, "room-a", now - 10));
        assert!(!is_token_for_room(key, secret, "garbage", "room-a", now));
    }
}
