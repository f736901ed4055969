//! The trust model's tiers as OpenAPI security schemes and requirements.

use edge::routing::Tier;
use serde_json::{Value, json};

/// The credentials, one scheme each. A requirement lists the schemes a request must
/// carry together; a tier with several ways in has several requirements.
pub fn schemes() -> Value {
    json!({
        "apiKey": {
            "type": "apiKey", "in": "header", "name": "X-API-Key",
            "description": "The tenant's public API key (from client registration). It names the tenant and proves nothing else."
        },
        "userJwt": {
            "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
            "description": "A user's access token from signup, login or refresh (HS256, short-lived)."
        },
        "signature": {
            "type": "apiKey", "in": "header", "name": "X-Signature",
            "description": "The tenant's server: lowercase hex HMAC-SHA256 with the secret key over METHOD + path-and-query + body + X-Timestamp. Each signature is accepted once."
        },
        "timestamp": {
            "type": "apiKey", "in": "header", "name": "X-Timestamp",
            "description": "Epoch seconds of a signed request; at most 300 s from the server's clock."
        },
        "adminToken": {
            "type": "http", "scheme": "bearer",
            "description": "The operator's admin_token (not needed while registration is open)."
        },
        "jobsToken": {
            "type": "http", "scheme": "bearer",
            "description": "The scheduler's jobs_token (also accepted as ?token=)."
        },
        "sfuWebhook": {
            "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
            "description": "LiveKit's webhook signature: a JWT signed with the SFU API secret whose sha256 claim is the body's digest."
        },
        "mediaSecret": {
            "type": "apiKey", "in": "header", "name": "X-Media-Secret",
            "description": "The media server's media_secret: only the ingest server (nginx-rtmp through media-agent) holds it."
        },
        "relaySecret": {
            "type": "apiKey", "in": "header", "name": "X-Relay-Secret",
            "description": "The chat relay's service credential, with the user's JWT it forwards (or X-Tenant-Id for anonymous reads)."
        },
        "relayTenant": {
            "type": "apiKey", "in": "header", "name": "X-Tenant-Id",
            "description": "The tenant an anonymous read through the chat relay is for."
        }
    })
}

fn all_of(schemes: &[&str]) -> Value {
    Value::Object(
        schemes
            .iter()
            .map(|s| ((*s).to_string(), json!([])))
            .collect(),
    )
}

/// The security requirements of a tier: any one of them admits the request.
pub fn requirements(tier: Tier) -> Value {
    let user = all_of(&["apiKey", "userJwt"]);
    let server = all_of(&["apiKey", "signature", "timestamp"]);
    let relay_user = all_of(&["relaySecret", "userJwt"]);
    match tier {
        Tier::Public => json!([]),
        Tier::Admin => json!([all_of(&["adminToken"])]),
        Tier::App => json!([all_of(&["apiKey"])]),
        Tier::User => json!([user]),
        Tier::Server => json!([server]),
        Tier::UserOrServer => json!([user, server]),
        Tier::Caller => json!([all_of(&["apiKey"]), user, server]),
        Tier::RelayUser => json!([user, relay_user]),
        Tier::RelayCaller => json!([
            all_of(&["apiKey"]),
            user,
            server,
            relay_user,
            all_of(&["relaySecret", "relayTenant"])
        ]),
        Tier::Sfu => json!([all_of(&["sfuWebhook"])]),
        Tier::Jobs => json!([all_of(&["jobsToken"])]),
        Tier::Media => json!([all_of(&["mediaSecret"])]),
    }
}

/// The `code` values a tier's credential check answers with 401 (before the handler runs).
pub fn unauthorized_codes(tier: Tier) -> Vec<&'static str> {
    const API_KEY: &[&str] = &["missing_api_key", "invalid_api_key"];
    const USER: &[&str] = &["missing_token", "invalid_token", "token_revoked"];
    const SIGNED: &[&str] = &[
        "signature_required",
        "incomplete_signature",
        "invalid_timestamp",
        "timestamp_out_of_window",
        "signature_mismatch",
        "invalid_signature_format",
        "signature_replayed",
    ];
    const RELAY: &[&str] = &[
        "invalid_relay_secret",
        "missing_tenant",
        "invalid_tenant",
        "tenant_mismatch",
    ];
    let parts: &[&[&str]] = match tier {
        Tier::Public => &[],
        Tier::Admin => &[&["missing_admin_token", "invalid_admin_token"]],
        Tier::App => &[API_KEY],
        Tier::User => &[API_KEY, USER],
        Tier::Server => &[API_KEY, SIGNED],
        Tier::UserOrServer | Tier::Caller => &[API_KEY, USER, SIGNED],
        Tier::RelayUser | Tier::RelayCaller => &[API_KEY, USER, SIGNED, RELAY],
        Tier::Sfu => &[&["invalid_webhook"]],
        Tier::Jobs => &[&["missing_jobs_token", "invalid_jobs_token"]],
        Tier::Media => &[&["missing_media_secret", "invalid_media_secret"]],
    };
    parts.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_a_requirement_names_is_defined() {
        let schemes = schemes();
        for tier in Tier::ALL {
            for requirement in requirements(tier).as_array().into_iter().flatten() {
                for name in requirement
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                {
                    assert!(schemes.get(name).is_some(), "{tier:?} names {name}");
                }
            }
        }
    }

    #[test]
    fn only_public_routes_need_no_credentials() {
        for tier in Tier::ALL {
            let none = requirements(tier).as_array().is_some_and(Vec::is_empty);
            assert_eq!(none, tier == Tier::Public, "{tier:?}");
            assert_eq!(unauthorized_codes(tier).is_empty(), tier == Tier::Public);
        }
    }
}
