//! The webhooks component: the `deliver-webhooks` job, which fans the outbox's new events
//! out to the tenants' endpoints and sends the due deliveries, signed as Standard Webhooks
//! specifies. It is the only component whose outbound permission covers arbitrary hosts;
//! the endpoints' routes live in the API component.

mod deliver;

use edge::routing::Route;
use edge::spin::http::{Handler, handle_incoming};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

/// The route table: the delivery job, declared beside its handler.
pub const ROUTES: &[Route<Handler>] = deliver::ROUTES;

/// The component's entry point. Natively the crate is also a library of its route table
/// (the OpenAPI generator links every component into one binary), so the export is wasm's.
#[cfg_attr(target_arch = "wasm32", http_component)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    handle_incoming(req, out, ROUTES).await
}
