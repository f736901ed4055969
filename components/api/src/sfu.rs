//! The SFU media provider: provider list, health, and the ICE servers for WebRTC clients.

use crate::ApiRoute;
use domain::ApiError;
use domain::sfu::{client_url, ice_urls, turn_credential};
use domain::time;
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::config;
use edge::spin::endpoint::{Json, NoBody, Raw};
use edge::spin::http::{AppCtx, PublicCtx, json};
use edge::spin::outbound::{self, OutboundRequest};
use edge::spin::sfu::SfuConfig;
use schemars::JsonSchema;
use serde::Serialize;
use std::time::Duration;

/// The SFU media providers a client may stream through.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "StreamingProviders")]
pub struct Providers {
    providers: Vec<Provider>,
}

/// An SFU media provider.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "StreamingProvider")]
pub struct Provider {
    #[schemars(extend("const" = "livekit"))]
    provider: &'static str,
    name: &'static str,
    is_configured: bool,
    is_default: bool,
    /// Where clients connect to it.
    server_url: Option<String>,
}

/// The SFU's health (public) and what its clients need (the app's).
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/sfu/health",
        Public(health),
        "Health (sfu)",
        |op| op
            .answers(200, "OK", Schema::view::<Health>())
            .answers(
                503,
                "The SFU answers 5xx or not at all",
                Schema::view::<Health>(),
            ),
    ),
    endpoint!(
        GET "/api/streaming/providers",
        App(providers),
        "Providers (sfu)",
    ),
    endpoint!(
        GET "/api/streaming/ice-config",
        App(ice_config),
        "Ice config (sfu)",
        |op| op.errors(503, &["ice_misconfigured"]),
    ),
];

/// The providers, LiveKit alone.
fn providers(_ctx: &AppCtx, _: NoBody) -> Result<Json<Providers>, ApiError> {
    let sfu = SfuConfig::load();
    let livekit = Provider {
        provider: "livekit",
        name: "LiveKit",
        is_configured: sfu.is_configured(),
        is_default: true,
        server_url: sfu.server_url.as_deref().map(client_url),
    };
    Ok(Json(Providers {
        providers: vec![livekit],
    }))
}

/// Whether the SFU answers: `ok`, or `unconfigured` when there is none to ask (200);
/// `unhealthy` or `unreachable` (503).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SfuHealth")]
pub struct Health {
    #[schemars(extend("enum" = ["ok", "unconfigured", "unhealthy", "unreachable"]))]
    status: &'static str,
    configured: bool,
    /// Whether the SFU answered; null when there is no SFU to ask.
    reachable: Option<bool>,
    /// What went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    error: Option<String>,
}

/// The ICE servers a WebRTC client uses.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "IceConfig")]
pub struct IceConfig {
    ice_servers: Vec<IceServer>,
    /// When the TURN credentials expire; null without TURN servers.
    #[schemars(extend("format" = "date-time"))]
    expires_at: Option<String>,
}

/// STUN servers, or TURN servers with their credentials.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "IceServer")]
pub struct IceServer {
    urls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    credential: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", extend("const" = "password"))]
    credential_type: Option<&'static str>,
}

/// 200 when the SFU answers (or none is configured), else 503 (both documented by the
/// route). Without an API key and secret the SFU cannot be used, so it is not probed; the
/// probe goes to `sfu_api_url` (http/https).
fn health(_ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    let sfu = SfuConfig::load();
    if !sfu.is_configured() {
        return Ok(Raw(json(
            200,
            &Health {
                status: "unconfigured",
                configured: false,
                reachable: None,
                error: None,
            },
        )));
    }
    // The server calls the SFU's HTTP address (`sfu_api_url`), never the ws/wss one.
    let url = sfu.api_url()?;
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
    Ok(Raw(json(
        code,
        &Health {
            status,
            configured: sfu.is_configured(),
            reachable: Some(reachable),
            error,
        },
    )))
}

/// Reads a list-of-URLs variable; a malformed entry is a configuration error (503), never
/// silently left out.
fn ice_variable(name: &str, schemes: &[&str]) -> Result<Vec<String>, ApiError> {
    ice_urls(&config::var_or(name, ""), schemes).map_err(|bad| {
        ApiError::unavailable(
            "ice_misconfigured",
            format!("the server variable {name} has an invalid entry: {bad}"),
        )
    })
}

/// STUN servers, and TURN servers with credentials that expire after
/// `turn_credential_ttl` seconds (when `turn_urls` and `turn_secret` are set).
fn ice_config(ctx: &AppCtx, _: NoBody) -> Result<Json<IceConfig>, ApiError> {
    let tenant = &ctx.tenant;
    let stun = ice_variable("stun_urls", &["stun", "stuns"])?;
    let turn = ice_variable("turn_urls", &["turn", "turns"])?;
    let mut servers = Vec::new();
    if !stun.is_empty() {
        servers.push(IceServer {
            urls: stun,
            username: None,
            credential: None,
            credential_type: None,
        });
    }
    let mut expires_at = None;
    if !turn.is_empty() {
        let secret = config::var("turn_secret").ok_or_else(|| {
            ApiError::unavailable(
                "ice_misconfigured",
                "turn_urls is set but turn_secret is not",
            )
        })?;
        let ttl = config::var_or("turn_credential_ttl", "86400")
            .parse::<i64>()
            .ok()
            .filter(|ttl| (60..=7 * 86400).contains(ttl))
            .ok_or_else(|| {
                ApiError::unavailable(
                    "ice_misconfigured",
                    "turn_credential_ttl must be 60 to 604800 seconds",
                )
            })?;
        let credential = turn_credential(&secret, &tenant.client_id, ctx.now(), ttl);
        expires_at = Some(time::format_rfc3339(credential.expires_at));
        servers.push(IceServer {
            urls: turn,
            username: Some(credential.username),
            credential: Some(credential.credential),
            credential_type: Some("password"),
        });
    }
    Ok(Json(IceConfig {
        ice_servers: servers,
        expires_at,
    }))
}
