//! User tokens and socket tickets as the relay checks them: signature (HS256, the
//! platform's `jwt_secret`) and expiry, locally; revocation is the API's to check on every
//! call.

use crate::protocol::Uuid;
use domain::jwt::UserClaims;

/// A verified user token and what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserToken {
    /// The token itself, forwarded to the API as `Authorization: Bearer`.
    pub token: String,
    /// `sub`: the user.
    pub user_id: String,
    /// `tid`: the user's tenant.
    pub tenant_id: String,
    /// `exp`, in epoch seconds.
    pub expires_at: i64,
}

impl UserToken {
    pub fn is_expired(&self, now: i64) -> bool {
        now >= self.expires_at
    }
}

/// Why a token was not accepted: a stable `code` and a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenError {
    pub code: String,
    pub detail: String,
}

/// A verified socket ticket (minted by `POST /api/streams/{id}/chat/ticket`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketTicket {
    /// The ticket itself, forwarded to the API as `X-Relay-Ticket`.
    pub ticket: String,
    pub tenant_id: String,
    /// The user it opens the socket for; `None` for read-only.
    pub user_id: Option<String>,
}

impl SocketTicket {
    /// Whether the ticket was minted for `user` (of its tenant).
    pub fn is_for(&self, user: &UserToken) -> bool {
        self.tenant_id == user.tenant_id && self.user_id.as_deref() == Some(user.user_id.as_str())
    }
}

/// Verifies a socket ticket at `now` for the chat of `stream`.
pub fn verify_ticket(
    secret: &[u8],
    ticket: &str,
    stream: &Uuid,
    now: i64,
) -> Result<SocketTicket, TokenError> {
    let claims =
        domain::jwt::verify_socket_ticket(secret, ticket, Some(now)).map_err(|e| TokenError {
            code: if e.code == "token_expired" {
                "ticket_expired".into()
            } else {
                "invalid_ticket".into()
            },
            detail: e.detail.replace("token", "ticket"),
        })?;
    if claims.stream != stream.as_str() {
        return Err(TokenError {
            code: "invalid_ticket".into(),
            detail: "the ticket is for another stream".into(),
        });
    }
    Ok(SocketTicket {
        ticket: ticket.to_string(),
        tenant_id: claims.tid,
        user_id: claims.sub,
    })
}

/// Verifies `token` at `now` (epoch seconds).
pub fn verify(secret: &[u8], token: &str, now: i64) -> Result<UserToken, TokenError> {
    let claims = domain::jwt::verify_user(secret, token, now).map_err(|e| TokenError {
        code: e.code.to_string(),
        detail: e.detail.to_string(),
    })?;
    // The signature is verified above; this only reads the standard `exp` claim, which
    // `verify` checked but does not hand back.
    let expires_at = jwt_compact::UntrustedToken::new(token)
        .ok()
        .and_then(|t| t.deserialize_claims_unchecked::<UserClaims>().ok())
        .and_then(|c| c.expiration)
        .map(|exp| exp.timestamp())
        .ok_or_else(|| TokenError {
            code: "invalid_token".into(),
            detail: "the token is not valid: no expiry".into(),
        })?;
    if claims.sub.is_empty() || claims.tid.is_empty() {
        return Err(TokenError {
            code: "invalid_token".into(),
            detail: "the token is not valid: no user or tenant".into(),
        });
    }
    Ok(UserToken {
        token: token.to_string(),
        user_id: claims.sub,
        tenant_id: claims.tid,
        expires_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"token-test-secret-0123456789abcdef";

    fn claims(sub: &str, tid: &str) -> UserClaims {
        UserClaims {
            sub: sub.into(),
            tid: tid.into(),
            jti: "j".into(),
            tv: 0,
            sid: None,
            aud: None,
        }
    }

    #[test]
    fn a_valid_token_answers_its_user_tenant_and_expiry() {
        let now = 1_800_000_000;
        let token = domain::jwt::sign(SECRET, claims("u1", "t1"), now, 3600);
        let t = verify(SECRET, &token, now + 10).unwrap();
        assert_eq!(
            (t.user_id.as_str(), t.tenant_id.as_str(), t.expires_at),
            ("u1", "t1", now + 3600)
        );
        assert!(!t.is_expired(now + 3599));
        assert!(t.is_expired(now + 3600));
    }

    #[test]
    fn expired_forged_and_malformed_tokens_are_refused_with_their_code() {
        let now = 1_800_000_000;
        let expired = domain::jwt::sign(SECRET, claims("u1", "t1"), now - 7200, 3600);
        assert_eq!(
            verify(SECRET, &expired, now).unwrap_err().code,
            "token_expired"
        );
        let forged = domain::jwt::sign(b"another-secret-0123456789", claims("u1", "t1"), now, 60);
        assert_eq!(
            verify(SECRET, &forged, now).unwrap_err().code,
            "invalid_token"
        );
        assert_eq!(
            verify(SECRET, "x.y.z", now).unwrap_err().code,
            "invalid_token"
        );
        let anonymous = domain::jwt::sign(SECRET, claims("", "t1"), now, 60);
        assert_eq!(
            verify(SECRET, &anonymous, now).unwrap_err().code,
            "invalid_token"
        );
    }
}
