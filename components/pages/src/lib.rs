//! The server-rendered pages: the recording page for the SFU's web egress, the egress
//! player, the watch page and the SFU test page, plus their embedded static assets.
//!
//! Pages are public (no API key). Bad parameters are a short plain-text 400, never a
//! broken page. Every page sets a Content-Security-Policy without inline scripts; page
//! data reaches the scripts through auto-escaped `data-` attributes.

mod api_docs;
mod assets;
mod dashboard;
mod pages;
mod params;
mod render;
mod web;

use common::routing::{Route, route};
use common::spin::http::{Handler, PublicCtx, Reply, handle_incoming};
use spin_sdk::http::{IncomingRequest, Response, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

use Handler::Public;

/// The route table: every page is public (a private broadcast's recording page checks the
/// SFU token egress sends). `/static/...` holds content-hashed names only (see `assets`).
pub const ROUTES: &[Route<Handler>] = &[
    route("GET", "/streams/{id}/record", Public(pages::record)),
    route("GET", "/egress-player", Public(egress_player)),
    route("GET", "/watch/{id}", Public(pages::watch)),
    route(
        "GET",
        "/analytics/broadcasts/{id}",
        Public(dashboard::dashboard),
    ),
    route("GET", "/sfu-test", Public(sfu_test)),
    route("GET", "/docs", Public(api_docs)),
    route("GET", "/static/{file}", Public(asset)),
    route("GET", "/static/vendor/{file}", Public(vendor_asset)),
];

fn egress_player(ctx: &PublicCtx) -> Reply {
    Ok(pages::egress_player(ctx))
}

fn api_docs(ctx: &PublicCtx) -> Reply {
    Ok(api_docs::page(ctx))
}

fn sfu_test(ctx: &PublicCtx) -> Reply {
    Ok(pages::sfu_test(ctx))
}

fn asset(ctx: &PublicCtx) -> Reply {
    Ok(static_file(ctx, ctx.param("file").to_string()))
}

fn vendor_asset(ctx: &PublicCtx) -> Reply {
    Ok(static_file(ctx, format!("vendor/{}", ctx.param("file"))))
}

fn static_file(ctx: &PublicCtx, hashed: String) -> Response {
    assets::serve(
        &hashed,
        ctx.header("accept-encoding"),
        ctx.header("if-none-match"),
    )
}

/// The component's entry point. Natively the crate is also a library of its route table
/// (the OpenAPI generator links every component into one binary), so the export is wasm's.
#[cfg_attr(target_arch = "wasm32", http_component)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    handle_incoming(req, out, ROUTES).await
}

#[cfg(test)]
mod route_table {
    #[test]
    fn the_readme_lists_every_route_with_its_tier() {
        let readme = include_str!("../../../README.md");
        let problems = common::routing::undocumented(readme, "pages", super::ROUTES);
        assert!(
            problems.is_empty(),
            "README, Who may call what: {problems:#?}"
        );
    }
}
