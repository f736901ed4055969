//! The server-rendered pages: the recording page for the SFU's web egress, the egress
//! player, the watch page, the embed player and the SFU test page, plus their embedded static assets.
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

use domain::ApiError;
use edge::endpoint;
use edge::routing::Route;
use edge::spin::endpoint::{NoBody, Raw};
use edge::spin::http::{Handler, PublicCtx, handle_incoming};
use serde_json::json;
use spin_sdk::http::{IncomingRequest, Response, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

/// What the pages answer, for their routes' declarations.
pub mod contract {
    use edge::contract::{Operation, Schema};

    /// A page: it answers the page (HTML), or a short plain-text 404.
    pub(crate) fn page(op: Operation) -> Operation {
        op.answers_as(200, "The page", "text/html", Schema::text())
            .answers_as(
                404,
                "No such page or broadcast",
                "text/plain",
                Schema::text(),
            )
    }

    /// A page that reads parameters: a bad one is a short plain-text 400.
    pub(crate) fn page_with_parameters(op: Operation) -> Operation {
        page(op).answers_as(400, "Invalid page parameters", "text/plain", Schema::text())
    }

    /// An embedded static file, under its content-hashed name.
    pub(crate) fn asset(op: Operation) -> Operation {
        op.answers_as(
            200,
            "The content-hashed asset (immutable)",
            "*/*",
            Schema::text(),
        )
        .answers_empty(304, "Not modified (If-None-Match)")
        .answers_as(404, "No such asset", "text/plain", Schema::text())
    }
}

use contract::{asset as asset_answers, page, page_with_parameters};

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
    endpoint!(GET "/docs", Public(api_docs), "API reference (this page)", page),
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

fn egress_player(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    Ok(Raw(pages::egress_player(ctx)))
}

fn api_docs(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    Ok(Raw(api_docs::page(ctx)))
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
    match requested_asset(&req) {
        Some(asset) => send_asset(asset, &req, out),
        None => handle_incoming(req, out, ROUTES).await,
    }
}

/// The embedded asset a `GET /static/...` request names, if it names one. Such a request
/// is answered straight from the embedded bytes ([`send_asset`]): what the route table
/// would do (`asset`, `vendor_asset`), without buffering the request or copying the
/// asset first. Anything else, a miss included, goes through the route table.
fn requested_asset(req: &IncomingRequest) -> Option<&'static assets::Asset> {
    if !matches!(req.method(), spin_sdk::http::Method::Get) {
        return None;
    }
    let target = req.path_with_query()?;
    let path = target.split('?').next().unwrap_or_default();
    let hashed = path.strip_prefix("/static/")?;
    assets::by_hashed_name(hashed.trim_end_matches('/'))
}

/// Answers `asset` as [`assets::serve`] does, writing its bytes to the response body in as
/// few writes as the host accepts, with their `Content-Length`.
fn send_asset(asset: &'static assets::Asset, req: &IncomingRequest, out: ResponseOutparam) {
    // The last value of a repeated header, as the route table's requests keep it.
    let fields = req.headers();
    let header = |name: &str| {
        fields
            .get(name)
            .pop()
            .and_then(|v| String::from_utf8(v).ok())
    };
    let (accept_encoding, if_none_match) = (header("accept-encoding"), header("if-none-match"));
    let Some(answer) = assets::answer(asset, accept_encoding.as_deref(), if_none_match.as_deref())
    else {
        let response = web::server_error(&format!("embedded asset {} is corrupt", asset.path));
        return spin_sdk::http::run(edge::spin::incoming::send(out, response));
    };
    let body = answer.body.bytes();
    let length = body.len().to_string();
    let mut list: Vec<(String, Vec<u8>)> = answer
        .headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
        .collect();
    if answer.status == 200 {
        list.push(("content-length".into(), length.into_bytes()));
    }
    let written = (|| {
        let headers = spin_sdk::http::Fields::from_list(&list).ok()?;
        let response = spin_sdk::http::OutgoingResponse::new(headers);
        response.set_status_code(answer.status).ok()?;
        let outgoing = response.body().ok()?;
        out.set(response);
        let stream = outgoing.write().ok()?;
        let mut rest = body;
        while !rest.is_empty() {
            let room = stream.check_write().ok()?;
            if room == 0 {
                stream.subscribe().block();
                continue;
            }
            let n = rest.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            stream.write(&rest[..n]).ok()?;
            rest = &rest[n..];
        }
        stream.blocking_flush().ok()?;
        drop(stream);
        spin_sdk::http::OutgoingBody::finish(outgoing, None).ok()
    })();
    if written.is_none() {
        eprintln!("error: could not send {}", asset.path);
    }
}
