//! The server-rendered pages: the recording page for the SFU's web egress, the egress
//! player, the watch page and the SFU test page, plus their embedded static assets.
//!
//! Pages are public (no API key). Bad parameters are a short plain-text 400, never a
//! broken page. Every page sets a Content-Security-Policy without inline scripts; page
//! data reaches the scripts through auto-escaped `data-` attributes.

mod assets;
mod pages;
mod params;
mod render;
mod web;

use common::ApiError;
use common::routing::{Auth, Route, route};
use common::spin::http::{Ctx, serve};
use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;

#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Record,
    EgressPlayer,
    Watch,
    SfuTest,
    Asset,
    VendorAsset,
}

use Auth::Public;
use Endpoint::*;

/// The route table. `/static/...` holds content-hashed names only (see `assets`).
const ROUTES: &[Route<Endpoint>] = &[
    route("GET", "/streams/{id}/record", Public, Record),
    route("GET", "/egress-player", Public, EgressPlayer),
    route("GET", "/watch/{id}", Public, Watch),
    route("GET", "/sfu-test", Public, SfuTest),
    route("GET", "/static/{file}", Public, Asset),
    route("GET", "/static/vendor/{file}", Public, VendorAsset),
];

fn dispatch(endpoint: Endpoint, ctx: &Ctx) -> Result<Response, ApiError> {
    match endpoint {
        Record => Ok(pages::record(ctx)),
        EgressPlayer => Ok(pages::egress_player(ctx)),
        Watch => pages::watch(ctx),
        SfuTest => Ok(pages::sfu_test(ctx)),
        Asset => Ok(static_file(ctx, ctx.param("file").to_string())),
        VendorAsset => Ok(static_file(ctx, format!("vendor/{}", ctx.param("file")))),
    }
}

fn static_file(ctx: &Ctx, hashed: String) -> Response {
    assets::serve(
        &hashed,
        ctx.header("accept-encoding"),
        ctx.header("if-none-match"),
    )
}

#[http_component]
fn handle(req: Request) -> Response {
    serve(req, ROUTES, dispatch)
}
