//! The SFU media provider: configuration, provider list and health.

use common::ApiError;
use common::spin::config;
use common::spin::http::{Ctx, json};
use common::spin::outbound::{self, OutboundRequest};
use serde::Serialize;
use spin_sdk::http::Response;
use std::time::Duration;

/// The SFU settings; configured when the server URL, API key and secret are all set.
pub struct SfuConfig {
    pub server_url: Option<String>,
    pub api_key: Option<String>,
    pub api_secret: Option<String>,
}

impl SfuConfig {
    pub fn load() -> Self {
        Self {
            server_url: config::var("sfu_server_url"),
            api_key: config::var("sfu_api_key"),
            api_secret: config::var("sfu_api_secret"),
        }
    }

    pub fn is_configured(&self) -> bool {
        self.server_url.is_some() && self.api_key.is_some() && self.api_secret.is_some()
    }
}

/// The WebSocket address clients connect to, from the SFU's HTTP base URL.
pub fn client_url(server_url: &str) -> String {
    if let Some(rest) = server_url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = server_url.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        server_url.to_string()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Provider {
    provider: &'static str,
    name: &'static str,
    is_configured: bool,
    is_default: bool,
    server_url: Option<String>,
}

/// `GET /api/streaming/providers`
pub fn providers(_ctx: &Ctx) -> Result<Response, ApiError> {
    let sfu = SfuConfig::load();
    let livekit = Provider {
        provider: "livekit",
        name: "LiveKit",
        is_configured: sfu.is_configured(),
        is_default: true,
        server_url: sfu.server_url.as_deref().map(client_url),
    };
    Ok(json(200, &serde_json::json!({ "providers": [livekit] })))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Health {
    status: &'static str,
    configured: bool,
    /// Whether the SFU answered; absent when there is no SFU to ask.
    reachable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `GET /api/sfu/health`: 200 when the SFU answers (or none is configured), else 503.
/// Without an API key and secret the SFU cannot be used, so it is not probed.
pub fn health(_ctx: &Ctx) -> Result<Response, ApiError> {
    let sfu = SfuConfig::load();
    let Some(url) = sfu.server_url.as_deref().filter(|_| sfu.is_configured()) else {
        return Ok(json(
            200,
            &Health {
                status: "unconfigured",
                configured: false,
                reachable: None,
                error: None,
            },
        ));
    };
    let probe = OutboundRequest {
        timeout: Duration::from_secs(3),
        max_response_bytes: 64 * 1024,
        ..OutboundRequest::get(url)
    };
    let (status, reachable, error) = match outbound::send(&probe) {
        Ok(answer) if answer.status < 500 => ("ok", true, None),
        Ok(answer) => (
            "unhealthy",
            false,
            Some(format!("the SFU answered {}", answer.status)),
        ),
        Err(e) => ("unreachable", false, Some(e.to_string())),
    };
    let code = if reachable { 200 } else { 503 };
    Ok(json(
        code,
        &Health {
            status,
            configured: sfu.is_configured(),
            reachable: Some(reachable),
            error,
        },
    ))
}
