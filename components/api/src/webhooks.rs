//! Verification of the SFU's (LiveKit's) webhooks: the `Authorization` header is a JWT
//! signed with the SFU API secret, issued by the API key, whose `sha256` claim is the
//! base64 SHA-256 of the exact body.

use base64::Engine;
use common::spin::auth::secure_eq;
use common::spin::http::Ctx;
use common::spin::sfu::SfuConfig;
use common::{ApiError, jwt, time};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Largest webhook body accepted.
const MAX_WEBHOOK_BODY: usize = 64 * 1024;

#[derive(Debug, Clone, Deserialize)]
struct WebhookClaims {
    iss: String,
    sha256: String,
}

/// The parts of a participant event the platform uses.
#[derive(Debug)]
pub struct ParticipantEvent {
    pub id: String,
    pub kind: String,
    pub room: String,
    pub identity: String,
    pub metadata: String,
}

fn unauthorized(why: &str) -> ApiError {
    ApiError::unauthorized(
        "invalid_webhook",
        format!("the webhook is not authentic: {why}"),
    )
}

/// Checks the signature and digest, then reads the event.
pub fn verified_event(ctx: &Ctx) -> Result<ParticipantEvent, ApiError> {
    let body = ctx.req.body();
    if body.len() > MAX_WEBHOOK_BODY {
        return Err(ApiError::payload_too_large(MAX_WEBHOOK_BODY));
    }
    let sfu = SfuConfig::load().credentials()?;
    let header = ctx
        .header("authorization")
        .ok_or_else(|| unauthorized("no Authorization header"))?;
    let token = header.strip_prefix("Bearer ").unwrap_or(header).trim();
    let claims: WebhookClaims = jwt::verify(sfu.api_secret.as_bytes(), token, time::now())
        .map_err(|_| unauthorized("bad signature or expired"))?;
    if !secure_eq(&claims.iss, &sfu.api_key) {
        return Err(unauthorized("issued by another API key"));
    }
    let digest = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(body));
    if !secure_eq(&claims.sha256, &digest) {
        return Err(unauthorized("the body does not match its digest"));
    }
    let event: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request("malformed_json", format!("the webhook is not JSON: {e}"))
    })?;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let parsed = ParticipantEvent {
        id: text(&event["id"]),
        kind: text(&event["event"]),
        room: text(&event["room"]["name"]),
        identity: text(&event["participant"]["identity"]),
        metadata: text(&event["participant"]["metadata"]),
    };
    if parsed.id.is_empty() || parsed.kind.is_empty() {
        return Err(ApiError::new(
            422,
            "invalid_webhook",
            "the webhook needs an id and an event",
        ));
    }
    if parsed.kind.starts_with("participant_") && parsed.identity.is_empty() {
        return Err(ApiError::new(
            422,
            "invalid_webhook",
            "a participant event needs the participant's identity",
        ));
    }
    Ok(parsed)
}
