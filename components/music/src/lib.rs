//! The music component: a user's link to an account on the external music platform at
//! `music_url`, search and link-existing against that platform, and the proxy to it.
//! Every route needs the tenant's `X-API-Key` and a user's Bearer JWT.

mod link_existing;
mod links;
mod platform;
pub mod proxy;
mod sealed;
mod search;

use edge::routing::Route;
use edge::spin::http::{Handler, handle_incoming};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;
use std::sync::LazyLock;

/// The route table: each module's routes, declared beside their handlers (the handler's
/// variant is the route's tier): every music route acts for one signed-in user.
pub static ROUTES: LazyLock<Vec<Route<Handler>>> = LazyLock::new(|| {
    [
        links::ROUTES,
        search::ROUTES,
        link_existing::ROUTES,
        proxy::ROUTES,
    ]
    .concat()
});

/// The component's entry point. Natively the crate is also a library of its route table
/// (the OpenAPI generator links every component into one binary), so the export is wasm's.
#[cfg_attr(target_arch = "wasm32", http_component)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    handle_incoming(req, out, &ROUTES).await
}
