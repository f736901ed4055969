//! The player's tenant settings: which sites may frame the tenant's embed page
//! (`GET /embed/{id}`, served by the pages component, whose `frame-ancestors` lists them),
//! and the embed tokens that let the embed page play a private broadcast.

use crate::ApiRoute;
use crate::links::Links;
use ::store::app;
use ::store::player as store;
use domain::player::{self as rules, EmbedOrigins};
use domain::validate::body::OptInt;
use domain::{ApiError, request_body, time};
use edge::endpoint;
use edge::spin::config;
use edge::spin::endpoint::{Created, Json, NoBody};
use edge::spin::http::ServerCtx;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

/// A tenant's player settings.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "PlayerSettings")]
pub struct PlayerSettings {
    /// The origins whose pages may frame the embed page (`/embed/{id}`), normalised
    /// (lowercase, no default port), in the order given; none: no site may.
    embed_origins: Vec<String>,
}

request_body! {
    /// The tenant's player settings, replaced whole: `PUT /api/v1/player`.
    pub struct PlayerSettingsBody as "PlayerSettingsChanges" {
        /// At most 20 origins (`https://host[:port]`; `http://` only for localhost and
        /// 127.0.0.1) whose pages may frame the embed page; `[]`: none may.
        "embedOrigins" embed_origins: EmbedOrigins,
    }
}

request_body! {
    /// An embed token to mint: `POST /api/v1/sessions/{id}/embed-tokens`.
    pub struct EmbedTokenBody as "EmbedTokenRequest" {
        /// How long the token plays, in seconds (60 to 86400; default 3600).
        "ttlSeconds" ttl_seconds: OptInt<{ rules::EMBED_TOKEN_MIN_TTL_SECS }, { rules::EMBED_TOKEN_MAX_TTL_SECS }>,
    }
}

/// An embed token and the embed page's address that carries it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "EmbedToken")]
pub struct EmbedTokenView {
    /// Opens the embed page of this one broadcast until `expiresAt`.
    token: String,
    /// `{base_url}/embed/{shortId}?token=...`: the address to frame.
    #[schemars(extend("format" = "uri"))]
    embed_url: String,
    #[schemars(extend("format" = "date-time"))]
    expires_at: String,
}

/// The player's settings routes.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/v1/player",
        Server(settings),
        "Get (player settings)",
        |op| op.described("The origins whose pages may frame the tenant's embed player."),
    ),
    endpoint!(
        PUT "/api/v1/player",
        Server(replace_settings),
        "Replace (player settings)",
        |op| op
            .described(
                "Sets the origins whose pages may frame the tenant's embed player \
                 (`/embed/{id}`): its Content-Security-Policy's frame-ancestors lists \
                 exactly them. A bad entry is refused by its index and nothing is stored.",
            )
            .request_example(json!({"embedOrigins": ["https://shop.example"]}))
            .errors(400, &["malformed_json"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        POST "/api/v1/sessions/{id}/embed-tokens",
        Server(mint_embed_token),
        "Embed token (player)",
        |op| op
            .described(
                "A token that lets the embed page (`/embed/{shortId}?token=`) play this one \
                 broadcast, whatever its visibility, until it expires: the tenant's server \
                 mints it for a viewer it has let in. The page's playback addresses are \
                 signed until the token's expiry.",
            )
            .request_example(json!({"ttlSeconds": 3600}))
            .errors(404, &["not_found"])
            .errors(422, &["validation_failed"])
            .errors(503, &["not_configured"]),
    ),
];

/// The tenant's player settings.
fn settings(ctx: &ServerCtx, _: NoBody) -> Result<Json<PlayerSettings>, ApiError> {
    let db = ctx.db()?;
    let embed_origins = store::embed_origins(&db, &ctx.tenant.client_id)?;
    Ok(Json(PlayerSettings { embed_origins }))
}

/// `{embedOrigins}`: replaces the list (checked whole before this runs).
fn replace_settings(
    ctx: &ServerCtx,
    sent: PlayerSettingsBody,
) -> Result<Json<PlayerSettings>, ApiError> {
    let db = ctx.db()?;
    store::set_embed_origins(&db, &ctx.tenant.client_id, &sent.embed_origins)?;
    settings(ctx, NoBody)
}

/// An embed token for one of the tenant's broadcasts (any visibility, any state: the
/// page shows what the broadcast is at the time it is opened).
fn mint_embed_token(
    ctx: &ServerCtx,
    sent: EmbedTokenBody,
) -> Result<Created<EmbedTokenView>, ApiError> {
    let key = rules::embed_token_key(&config::required("media_secret")?);
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    let ttl = sent
        .ttl_seconds
        .unwrap_or(rules::EMBED_TOKEN_DEFAULT_TTL_SECS);
    let token = rules::issue_embed_token(&key, &b.client_id, &b.id, now, ttl);
    let embed_url = format!(
        "{}/embed/{}?token={token}",
        Links::load().base_url(),
        b.identity.short_id
    );
    Ok(Created(EmbedTokenView {
        token,
        embed_url,
        expires_at: time::format_rfc3339(now + ttl),
    }))
}
