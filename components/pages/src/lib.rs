//! The server-rendered pages: the recording page for the SFU's web egress, the egress
//! player, the watch page, the embed player, the clip page, the analytics dashboard and the SFU test page,
//! plus their embedded static assets. The API reference (`/docs`) is the api-docs
//! component's, so that these pages do not carry its viewer.
//!
//! Pages are public (no API key). Bad parameters are a short plain-text 400, never a
//! broken page. Every page sets a Content-Security-Policy without inline scripts; page
//! data reaches the scripts through auto-escaped `data-` attributes.

mod assets;
mod dashboard;
mod pages;
mod params;
mod render;

/// The HTTP rules every page component shares.
pub(crate) use page_kit::web;

use domain::ApiError;
use edge::endpoint;
use edge::routing::Route;
use edge::spin::endpoint::{NoBody, Raw};
use edge::spin::http::{Handler, PublicCtx, handle_incoming};
use serde_json::json;
use spin_sdk::http::{IncomingRequest, Response, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

use page_kit::contract::{asset as asset_answers, page_with_parameters};

/// The route table: every page is public (a private broadcast's recording page checks the
/// SFU token egress sends). `/static/...` holds content-hashed names only (see `assets`).
/// Each answers its page as it built it (HTML, or a short plain-text error): the
/// declaration documents those answers.
pub const ROUTES: &[Route<Handler>] = &[
    endpoint!(
        GET "/streams/{id}/record",
        Public(record),
        "Recording page for the SFU's egress",
        page_with_parameters
    ),
    endpoint!(
        GET "/egress-player",
        Public(egress_player),
        "Egress player (a file in a loop)",
        page_with_parameters
    ),
    endpoint!(
        GET "/watch/{id}",
        Public(watch),
        "Watch page of a broadcast or event",
        page_with_parameters
    ),
    endpoint!(
        GET "/embed/{id}",
        Public(embed),
        "Embed player of a broadcast or event (framed by the tenant's embed origins)",
        |op| page_with_parameters(op)
            .query("autoplay", json!({"enum": ["0", "1"], "default": "0"}))
            .query("muted", json!({"enum": ["0", "1"], "default": "0"}))
            .query("controls", json!({"enum": ["0", "1"], "default": "1"}))
    ),
    endpoint!(
        GET "/clips/{id}",
        Public(clip),
        "Clip page (a clip of a public or unlisted broadcast; link-preview tags for a public one)",
        page_with_parameters
    ),
    endpoint!(
        GET "/analytics/broadcasts/{id}",
        Public(dashboard),
        "Analytics dashboard of a broadcast",
        page_with_parameters
    ),
    endpoint!(
        GET "/sfu-test",
        Public(sfu_test),
        "SFU test page (only with `SPIN_VARIABLE_ENABLE_DEV_PAGES=true`, else 404)",
        page_with_parameters
    ),
    endpoint!(
        GET "/static/{file}",
        Public(asset),
        "Page script or style",
        asset_answers
    ),
    endpoint!(
        GET "/static/vendor/{file}",
        Public(vendor_asset),
        "Vendored page library",
        asset_answers
    ),
];

fn dashboard(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    dashboard::dashboard(ctx).map(Raw)
}

fn record(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    pages::record(ctx).map(Raw)
}

fn watch(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    pages::watch(ctx).map(Raw)
}

fn embed(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    pages::embed(ctx).map(Raw)
}

fn clip(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    pages::clip(ctx).map(Raw)
}

fn egress_player(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    Ok(Raw(pages::egress_player(ctx)))
}

fn sfu_test(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    Ok(Raw(pages::sfu_test(ctx)))
}

fn asset(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    Ok(Raw(static_file(ctx, ctx.param("file").to_string())))
}

fn vendor_asset(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    Ok(Raw(static_file(
        ctx,
        format!("vendor/{}", ctx.param("file")),
    )))
}

fn static_file(ctx: &PublicCtx, hashed: String) -> Response {
    assets::ASSETS.serve(
        &hashed,
        ctx.header("accept-encoding"),
        ctx.header("if-none-match"),
    )
}

/// The component's entry point. Natively the crate is also a library of its route table
/// (the OpenAPI generator links every component into one binary), so the export is wasm's.
/// A `GET /static/...` naming an embedded asset is answered straight from its embedded
/// bytes (`page_kit::assets::send`); anything else, a miss included, goes through the
/// route table.
#[cfg_attr(target_arch = "wasm32", http_component)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    match assets::ASSETS.requested(&req) {
        Some(asset) => page_kit::assets::send(asset, &req, out),
        None => handle_incoming(req, out, ROUTES).await,
    }
}
