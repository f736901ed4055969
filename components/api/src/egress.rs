//! LiveKit's Egress API over Twirp (`POST {sfu_api_url}/twirp/livekit.Egress/<Method>`,
//! JSON bodies), authorised by a short-lived token with the `roomRecord` grant signed with
//! the SFU API secret.

use domain::jwt;
use domain::recording::{EgressReport, Storage};
use edge::spin::config;
use edge::spin::outbound::{self, OutboundRequest};
use edge::spin::sfu::SfuConfig;
use serde::Serialize;
use serde_json::{Value, json};
use std::time::Duration;

/// How long the egress API token is valid: one call.
const TOKEN_TTL_SECS: i64 = 300;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecordGrant {
    room_record: bool,
}

#[derive(Serialize)]
struct EgressClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    nbf: i64,
    video: RecordGrant,
}

/// The SFU's egress API: where it is and the key pair.
pub struct Egress {
    api_url: String,
    api_key: String,
    api_secret: String,
}

impl Egress {
    /// The configured egress API, or why there is none (the SFU's key, secret, API URL).
    pub fn load() -> Result<Egress, String> {
        let sfu = SfuConfig::load();
        let api_url = sfu.api_url().map_err(|e| e.detail.clone())?.to_string();
        let credentials = sfu.credentials().map_err(|e| e.detail)?;
        Ok(Egress {
            api_url: api_url.trim_end_matches('/').to_string(),
            api_key: credentials.api_key,
            api_secret: credentials.api_secret,
        })
    }

    fn token(&self, now: i64) -> String {
        let claims = EgressClaims {
            iss: &self.api_key,
            sub: "platform",
            nbf: now,
            video: RecordGrant { room_record: true },
        };
        jwt::sign(self.api_secret.as_bytes(), claims, now, TOKEN_TTL_SECS)
    }

    /// Calls one Egress method; answers the `EgressInfo` it returns, or why not.
    fn call(&self, method: &str, body: &Value, now: i64) -> Result<EgressReport, String> {
        let url = format!("{}/twirp/livekit.Egress/{method}", self.api_url);
        let body = body.to_string();
        let request = OutboundRequest {
            method: "POST",
            url: &url,
            headers: vec![
                ("content-type".into(), b"application/json".to_vec()),
                (
                    "authorization".into(),
                    format!("Bearer {}", self.token(now)).into_bytes(),
                ),
            ],
            body: body.as_bytes(),
            timeout: Duration::from_secs(10),
            max_response_bytes: 256 * 1024,
        };
        let answer = outbound::send(&request).map_err(|e| format!("egress API: {e}"))?;
        let parsed: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        if answer.status != 200 {
            let why = parsed["msg"].as_str().unwrap_or("no message");
            return Err(format!("egress API answered {}: {why}", answer.status));
        }
        EgressReport::read(&parsed).ok_or_else(|| "egress API answered no egress".to_string())
    }

    /// `StartRoomCompositeEgress`: the new egress.
    pub fn start(&self, request: &Value, now: i64) -> Result<EgressReport, String> {
        self.call("StartRoomCompositeEgress", request, now)
    }

    /// `StopEgress`.
    pub fn stop(&self, egress_id: &str, now: i64) -> Result<EgressReport, String> {
        self.call("StopEgress", &json!({ "egress_id": egress_id }), now)
    }
}

/// The bucket the egress uploads to, from the `recording_s3_*` variables; `None` when no
/// bucket is set (the egress then uses its own configured storage).
pub fn storage() -> Option<Storage> {
    Some(Storage {
        bucket: config::var("recording_s3_bucket")?,
        region: config::var_or("recording_s3_region", ""),
        endpoint: config::var_or("recording_s3_endpoint", ""),
        access_key: config::var_or("recording_s3_access_key", ""),
        secret: config::var_or("recording_s3_secret", ""),
    })
}

/// Where viewers fetch the files (`recording_public_base`), "" when unset.
pub fn public_base() -> String {
    config::var_or("recording_public_base", "")
}
