//! The money component: the ledger and everything that moves value on it (token credits
//! and reversals, gifts that become diamonds, subscriptions, payouts), and its jobs.
//! Handlers are thin and typed by tier; the rules are plain functions (`rules`); all SQL
//! is in `store` (`ledger`, `gifts`, `subscriptions`, `payouts`, `monetization`,
//! `idempotency`).

mod gifts;
mod jobs;
mod payouts;
mod rules;
mod settings;
mod subscriptions;
mod views;
mod wallet;

use edge::routing::Route;
use edge::spin::http::{Handler, handle_incoming};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;
use std::sync::LazyLock;

/// The route table: each module's routes, declared beside their handlers (the handler's
/// variant is the route's tier): the viewer's wallet and payouts, gifts, subscriptions,
/// the tenant's settings, and the scheduled jobs.
pub static ROUTES: LazyLock<Vec<Route<Handler>>> = LazyLock::new(|| {
    [
        wallet::ROUTES,
        payouts::ROUTES,
        gifts::ROUTES,
        subscriptions::ROUTES,
        settings::ROUTES,
        jobs::ROUTES,
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
