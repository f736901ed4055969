//! `/docs`: the API reference, RapiDoc (vendored from npm under `static/vendor/`) reading the
//! OpenAPI document the api component serves at `/api/openapi.json`, with "try it" against
//! this origin.
//!
//! A component of its own so that the viewers' pages (the pages component) do not carry
//! RapiDoc (863 KB): it embeds RapiDoc and the pages' stylesheet, gzip-compressed and under
//! content-hashed names below `/docs/static/` (`page_kit::assets`). It needs no database.

use domain::ApiError;
use edge::endpoint;
use edge::routing::Route;
use edge::spin::endpoint::{NoBody, Raw};
use edge::spin::http::{Handler, PublicCtx, handle_incoming};
use page_kit::contract::{asset as asset_answers, page};
use page_kit::web;
use spin_sdk::http::{IncomingRequest, Response, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

page_kit::include_assets!();

/// The route table: the page and its files, all public. `/docs/static/...` holds
/// content-hashed names only.
pub const ROUTES: &[Route<Handler>] = &[
    endpoint!(GET "/docs", Public(reference), "API reference (this page)", page),
    endpoint!(
        GET "/docs/static/{file}",
        Public(asset),
        "API reference's style",
        asset_answers
    ),
    endpoint!(
        GET "/docs/static/vendor/{file}",
        Public(vendor_asset),
        "API reference's viewer (RapiDoc)",
        asset_answers
    ),
];

/// The page, with the public URLs of its files (generated at build time from file names
/// below `static/`, so they need no escaping).
const TEMPLATE: &str = include_str!("../templates/api_docs.html");

fn render(css: &str, rapidoc: &str) -> String {
    TEMPLATE.replace("{css}", css).replace("{rapidoc}", rapidoc)
}

/// The page's policy: the viewer fetches the document and tries requests on this origin
/// only; its components style themselves inline, so styles may be inline (scripts may not).
fn policy() -> String {
    web::csp(&["connect-src 'self'"])
        .replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
}

/// `GET /docs`
fn reference(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    let csp = policy();
    let tag = web::etag(&[ASSETS.build_id, "api-docs"]);
    let headers = web::PageHeaders {
        etag: &tag,
        cache_control: web::CACHE_NONE,
        csp: &csp,
    };
    Ok(Raw(web::conditional_html(
        ctx.header("if-none-match"),
        &headers,
        || {
            Ok(render(
                &ASSETS.url("pages.css"),
                &ASSETS.url("vendor/rapidoc-min.js"),
            ))
        },
    )))
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
    ASSETS.serve(
        &hashed,
        ctx.header("accept-encoding"),
        ctx.header("if-none-match"),
    )
}

/// The component's entry point (wasm's; natively the crate is a library of its route
/// table, for the OpenAPI generator). An embedded file is answered straight from its
/// embedded bytes; anything else, a miss included, goes through the route table.
#[cfg_attr(target_arch = "wasm32", http_component)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    match ASSETS.requested(&req) {
        Some(asset) => page_kit::assets::send(asset, &req, out),
        None => handle_incoming(req, out, ROUTES).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_inline_styles_and_no_inline_scripts() {
        let policy = policy();
        assert!(policy.contains("style-src 'self' 'unsafe-inline'"));
        assert!(policy.contains("script-src 'self';"));
        assert!(policy.contains("connect-src 'self'"));
        assert!(policy.contains("frame-ancestors 'none'"));
    }

    #[test]
    fn the_page_loads_the_vendored_viewer_on_the_document() {
        let html = render("/docs/static/p.css", "/docs/static/vendor/r.js");
        assert!(html.starts_with("<!doctype html>") && html.trim_end().ends_with("</html>"));
        assert!(html.contains(r#"spec-url="/api/openapi.json""#));
        assert!(html.contains(r#"<script src="/docs/static/vendor/r.js"></script>"#));
        assert!(html.contains(r#"<link rel="stylesheet" href="/docs/static/p.css">"#));
        assert!(html.contains(r#"allow-try="true""#));
        assert!(!html.contains('{'), "every placeholder is filled");
    }

    #[test]
    fn it_embeds_the_viewer_and_the_stylesheet_only() {
        let static_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../static");
        page_kit::assets::check_table(&ASSETS, &static_dir);
        let mut paths: Vec<_> = ASSETS.files.iter().map(|a| a.path).collect();
        paths.sort();
        assert_eq!(
            paths,
            [
                "pages.css",
                "vendor/rapidoc-min.js",
                "vendor/rapidoc.LICENSE.txt"
            ]
        );
        let viewer = ASSETS.url("vendor/rapidoc-min.js");
        assert!(viewer.starts_with("/docs/static/vendor/rapidoc-min.") && viewer.ends_with(".js"));
    }
}
