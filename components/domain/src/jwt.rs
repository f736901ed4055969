//! HS256 JSON Web Tokens: user access tokens, the tokens the music platform is handed in
//! their place, and the signing primitive SFU tokens use.
//!
//! The algorithm is pinned: a token whose header names anything but HS256 is rejected
//! before its signature is looked at.

use crate::ApiError;
use chrono::{DateTime, Duration, Utc};
use jwt_compact::alg::{Hs256, Hs256Key};
use jwt_compact::{AlgorithmExt, Claims, Header, TimeOptions, UntrustedToken};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// Lifetime of a user access token.
pub const USER_TOKEN_TTL_SECS: i64 = 3600;

/// The claims of a user access token (`iat` and `exp` are standard claims beside these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserClaims {
    /// The user's id.
    pub sub: String,
    /// The tenant (SDK client) id.
    pub tid: String,
    pub jti: String,
    /// The user's token version when issued; bumping it revokes older tokens.
    #[serde(default)]
    pub tv: i64,
    /// The session the token belongs to (its refresh-token family): revoking the family
    /// (a refresh token reused) revokes the access tokens issued in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    /// Never set on a user token: a token minted for another party names its audience,
    /// and `verify_user` refuses it even if it were signed with the user-token key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<String>,
}

/// The audience of the tokens the music platform is handed.
pub const MUSIC_PLATFORM_AUDIENCE: &str = "music-platform";

/// Lifetime of a music-platform token: one call's worth.
pub const MUSIC_PLATFORM_TOKEN_TTL_SECS: i64 = 300;

/// The claims of a token minted for the music platform: who the user is, for that
/// platform alone. It is signed with `music_service_secret`, which the music platform
/// verifies with; the API's user-token key never signs one, so the API refuses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MusicPlatformClaims {
    pub sub: String,
    pub tid: String,
    pub aud: String,
    pub email: String,
    pub username: String,
}

fn at(epoch_secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(epoch_secs, 0).unwrap_or_default()
}

/// Signs `custom` claims with `iat = now` and `exp = now + ttl`.
pub fn sign<T: Serialize>(secret: &[u8], custom: T, now: i64, ttl_secs: i64) -> String {
    let mut claims = Claims::new(custom);
    claims.issued_at = Some(at(now));
    claims.expiration = Some(at(now + ttl_secs));
    Hs256
        .token(
            &Header::empty().with_token_type("JWT"),
            &claims,
            &Hs256Key::new(secret),
        )
        .expect("HS256 signing of serialisable claims cannot fail")
}

/// Checks the signature (HS256 only) and expiry at `now`; answers the custom claims.
pub fn verify<T: DeserializeOwned + Clone>(
    secret: &[u8],
    token: &str,
    now: i64,
) -> Result<T, ApiError> {
    verify_until(secret, token, now).map(|(custom, _)| custom)
}

/// [`verify`], answering also when the token expires (epoch seconds).
pub fn verify_until<T: DeserializeOwned + Clone>(
    secret: &[u8],
    token: &str,
    now: i64,
) -> Result<(T, i64), ApiError> {
    let claims = signed_claims::<T>(secret, token)?;
    let expires = claims.expiration.map_or(0, |e| e.timestamp());
    let options = TimeOptions::new(Duration::zero(), move || at(now));
    claims
        .validate_expiration(&options)
        .map_err(|_| ApiError::unauthorized("token_expired", "the token has expired"))?;
    if claims.not_before.is_some() {
        claims
            .validate_maturity(&options)
            .map_err(|_| invalid("not valid yet"))?;
    }
    Ok((claims.custom, expires))
}

fn invalid(why: &str) -> ApiError {
    ApiError::unauthorized("invalid_token", format!("the token is not valid: {why}"))
}

/// Checks the signature (HS256 only) and that the token has an expiry; answers the
/// claims without looking at the time.
fn signed_claims<T: DeserializeOwned + Clone>(
    secret: &[u8],
    token: &str,
) -> Result<Claims<T>, ApiError> {
    let untrusted = UntrustedToken::new(token).map_err(|_| invalid("malformed"))?;
    if untrusted.algorithm() != "HS256" {
        return Err(invalid("unexpected algorithm"));
    }
    let token = Hs256
        .validator::<T>(&Hs256Key::new(secret))
        .validate(&untrusted)
        .map_err(|_| invalid("bad signature"))?;
    if token.claims().expiration.is_none() {
        return Err(invalid("no expiry"));
    }
    Ok(token.claims().clone())
}

/// A user access token for `user_id` in tenant `tenant_id`, of session `session` (its
/// refresh-token family).
pub fn issue_user_token(
    secret: &[u8],
    user_id: &str,
    tenant_id: &str,
    token_version: i64,
    session: &str,
    now: i64,
) -> String {
    let claims = UserClaims {
        sub: user_id.to_string(),
        tid: tenant_id.to_string(),
        jti: crate::ids::uuid(),
        tv: token_version,
        sid: Some(session.to_string()),
        aud: None,
    };
    sign(secret, claims, now, USER_TOKEN_TTL_SECS)
}

/// Verifies a user access token: `verify`, and no audience (a token minted for another
/// party is not a user token, whatever key signed it).
pub fn verify_user(secret: &[u8], token: &str, now: i64) -> Result<UserClaims, ApiError> {
    let claims: UserClaims = verify(secret, token, now)?;
    if claims.aud.is_some() {
        return Err(ApiError::unauthorized(
            "invalid_token",
            "the token is not valid: it was issued for another party",
        ));
    }
    Ok(claims)
}

/// The audience of chat socket tickets.
pub const CHAT_SOCKET_AUDIENCE: &str = "chat-socket";

/// How long a socket ticket opens a socket for: it is fetched just before connecting.
pub const SOCKET_TICKET_TTL_SECS: i64 = 60;

/// A chat socket ticket: minted by an API call (signed, for a client that requires
/// signatures), it lets one stream's chat socket be opened for a minute, as `sub` or, with
/// no `sub`, read-only. The relay forwards it with the socket's calls; the API asks for
/// it from the relay on behalf of clients that require signatures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketTicketClaims {
    pub aud: String,
    pub tid: String,
    /// The stream whose chat the socket may open.
    pub stream: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
}

/// A socket ticket for the chat of `stream` in tenant `tenant_id`, as `user` or read-only.
pub fn issue_socket_ticket(
    secret: &[u8],
    tenant_id: &str,
    stream: &str,
    user: Option<&str>,
    now: i64,
) -> String {
    let claims = SocketTicketClaims {
        aud: CHAT_SOCKET_AUDIENCE.to_string(),
        tid: tenant_id.to_string(),
        stream: stream.to_string(),
        sub: user.map(str::to_string),
    };
    sign(secret, claims, now, SOCKET_TICKET_TTL_SECS)
}

/// Verifies a socket ticket: its signature and audience, and at `now` (when a socket
/// opens) its expiry. Without `now`, the time is not looked at: the relay forwards the
/// ticket its socket opened with for as long as the socket lives.
pub fn verify_socket_ticket(
    secret: &[u8],
    ticket: &str,
    now: Option<i64>,
) -> Result<SocketTicketClaims, ApiError> {
    let claims: SocketTicketClaims = match now {
        Some(now) => verify(secret, ticket, now)?,
        None => signed_claims(secret, ticket)?.custom,
    };
    if claims.aud != CHAT_SOCKET_AUDIENCE {
        return Err(invalid("not a socket ticket"));
    }
    Ok(claims)
}

/// A token naming `user` of tenant `tenant_id` to the music platform, signed with
/// `secret` (the `music_service_secret`).
pub fn issue_music_platform_token(
    secret: &[u8],
    tenant_id: &str,
    user_id: &str,
    email: &str,
    username: &str,
    now: i64,
) -> String {
    let claims = MusicPlatformClaims {
        sub: user_id.to_string(),
        tid: tenant_id.to_string(),
        aud: MUSIC_PLATFORM_AUDIENCE.to_string(),
        email: email.to_string(),
        username: username.to_string(),
    };
    sign(secret, claims, now, MUSIC_PLATFORM_TOKEN_TTL_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64_test::b64url;

    mod base64_test {
        /// Minimal base64url (no padding) for building forged tokens in tests.
        pub fn b64url(data: &[u8]) -> String {
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let mut out = String::new();
            for chunk in data.chunks(3) {
                let n = chunk
                    .iter()
                    .enumerate()
                    .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
                for i in 0..=chunk.len() {
                    out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
            }
            out
        }
    }

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn round_trip_and_expiry() {
        let token = issue_user_token(b"secret", "u1", "t1", 3, "s1", NOW);
        let claims: UserClaims = verify(b"secret", &token, NOW + 10).unwrap();
        assert_eq!(
            (claims.sub.as_str(), claims.tid.as_str(), claims.tv),
            ("u1", "t1", 3)
        );
        assert_eq!(
            verify::<UserClaims>(b"secret", &token, NOW + 3601)
                .unwrap_err()
                .code,
            "token_expired"
        );
        assert_eq!(
            verify::<UserClaims>(b"other", &token, NOW)
                .unwrap_err()
                .code,
            "invalid_token"
        );
        assert_eq!(
            verify::<UserClaims>(b"secret", "a.b.c", NOW)
                .unwrap_err()
                .code,
            "invalid_token"
        );
    }

    #[test]
    fn alg_none_and_other_algorithms_are_rejected() {
        let claims = format!(
            r#"{{"sub":"u1","tid":"t1","jti":"x","tv":0,"exp":{}}}"#,
            NOW + 100
        );
        let none = format!(
            "{}.{}.",
            b64url(br#"{"alg":"none","typ":"JWT"}"#),
            b64url(claims.as_bytes())
        );
        assert!(verify::<UserClaims>(b"secret", &none, NOW).is_err());
        let hs512 = format!(
            "{}.{}.AAAA",
            b64url(br#"{"alg":"HS512"}"#),
            b64url(claims.as_bytes())
        );
        assert!(verify::<UserClaims>(b"secret", &hs512, NOW).is_err());
    }

    #[test]
    fn socket_tickets_open_a_socket_for_a_minute_and_are_not_user_tokens() {
        let ticket = issue_socket_ticket(b"secret", "t1", "s1", Some("u1"), NOW);
        let claims = verify_socket_ticket(b"secret", &ticket, Some(NOW + 59)).unwrap();
        assert_eq!(
            (
                claims.tid.as_str(),
                claims.stream.as_str(),
                claims.sub.as_deref()
            ),
            ("t1", "s1", Some("u1"))
        );
        assert_eq!(
            verify_socket_ticket(b"secret", &ticket, Some(NOW + 61))
                .unwrap_err()
                .code,
            "token_expired"
        );
        // Forwarded with a live socket: the signature still counts, the time does not.
        assert!(verify_socket_ticket(b"secret", &ticket, None).is_ok());
        assert!(verify_socket_ticket(b"other", &ticket, None).is_err());
        assert!(verify_user(b"secret", &ticket, NOW).is_err());
        // A user token is not a ticket.
        let user = issue_user_token(b"secret", "u1", "t1", 0, "s1", NOW);
        assert!(verify_socket_ticket(b"secret", &user, Some(NOW)).is_err());
        let music = issue_music_platform_token(b"secret", "t1", "u1", "a@x", "ada", NOW);
        assert!(verify_socket_ticket(b"secret", &music, Some(NOW)).is_err());
    }

    #[test]
    fn tokens_for_another_party_are_not_user_tokens() {
        let music = issue_music_platform_token(b"music", "t1", "u1", "a@x", "ada", NOW);
        let claims: MusicPlatformClaims = verify(b"music", &music, NOW + 10).unwrap();
        assert_eq!(claims.aud, MUSIC_PLATFORM_AUDIENCE);
        assert!(verify::<MusicPlatformClaims>(b"music", &music, NOW + 301).is_err());
        // Refused by the user-token key, and refused even when signed with it.
        assert!(verify_user(b"secret", &music, NOW).is_err());
        let same_key = issue_music_platform_token(b"secret", "t1", "u1", "a@x", "ada", NOW);
        assert!(verify_user(b"secret", &same_key, NOW).is_err());
        let with_audience = UserClaims {
            sub: "u1".into(),
            tid: "t1".into(),
            jti: "j".into(),
            tv: 0,
            sid: None,
            aud: Some(MUSIC_PLATFORM_AUDIENCE.into()),
        };
        let token = sign(b"secret", with_audience, NOW, 60);
        assert_eq!(
            verify_user(b"secret", &token, NOW).unwrap_err().code,
            "invalid_token"
        );
        let user = issue_user_token(b"secret", "u1", "t1", 0, "s1", NOW);
        assert_eq!(verify_user(b"secret", &user, NOW).unwrap().sub, "u1");
    }
}
