//! The player's tenant settings: which sites may frame the tenant's embed page
//! (`GET /embed/{id}`, served by the pages component, whose `frame-ancestors` lists them).

use crate::ApiRoute;
use ::store::player as store;
use domain::ApiError;
use domain::player::EmbedOrigins;
use domain::request_body;
use edge::endpoint;
use edge::spin::endpoint::{Json, NoBody};
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
