//! The money component: the ledger and everything that moves value on it (token credits
//! and reversals, gifts that become diamonds, subscriptions, payouts), and its jobs.
//! Handlers are thin and typed by tier; the rules are plain functions (`rules`); all SQL
//! is in `store` (`ledger`, `gifts`, `subscriptions`, `payouts`, `monetization`,
//! `idempotency`).

mod gifts;
mod idempotent;
mod jobs;
mod payouts;
mod rules;
mod settings;
mod subscriptions;
mod views;
mod wallet;

/// What the routes take and answer: the API document's operations, declared beside their
/// handlers (`openapi-doc` builds the document from them and the route table).
pub mod contract {
    /// What every route takes and answers.
    pub fn operations() -> Vec<edge::contract::Operation> {
        [
            crate::wallet::operations(),
            crate::payouts::operations(),
            crate::gifts::operations(),
            crate::subscriptions::operations(),
            crate::settings::operations(),
            crate::jobs::operations(),
        ]
        .concat()
    }
}

use edge::routing::{Route, route};
use edge::spin::http::{Handler, handle_incoming};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

use Handler::{App, Jobs, Server, User};

/// The route table: method, path, and the handler, whose variant is the route's tier.
pub const ROUTES: &[Route<Handler>] = &[
    // The viewer's wallet
    route("GET", "/api/wallet", User(wallet::get)),
    route(
        "GET",
        "/api/wallet/transactions",
        User(wallet::transactions),
    ),
    route(
        "GET",
        "/api/wallet/transactions/{id}",
        User(wallet::transaction),
    ),
    route("POST", "/api/wallet/payouts", User(payouts::request)).idempotent(),
    route("GET", "/api/wallet/payouts", User(payouts::list_own)),
    route("GET", "/api/wallet/payouts/{id}", User(payouts::get_own)),
    // Gifts
    route("GET", "/api/gifts", App(gifts::catalog)),
    route("POST", "/api/broadcasts/{id}/gifts", User(gifts::send)).idempotent(),
    route(
        "GET",
        "/api/broadcasts/{id}/gifts/leaderboard",
        User(gifts::leaderboard),
    ),
    route("GET", "/api/users/{id}/supporters", User(gifts::supporters)),
    // Subscriptions
    route(
        "PUT",
        "/api/users/me/subscription-plans/{planId}",
        User(subscriptions::put_plan),
    ),
    route(
        "GET",
        "/api/users/{id}/subscription-plans",
        User(subscriptions::plans),
    ),
    route(
        "GET",
        "/api/users/me/subscriptions",
        User(subscriptions::list_own),
    ),
    route(
        "POST",
        "/api/users/{id}/subscriptions",
        User(subscriptions::subscribe),
    )
    .idempotent(),
    route(
        "DELETE",
        "/api/users/{id}/subscriptions",
        User(subscriptions::cancel),
    ),
    // The tenant's backend (signed requests)
    route(
        "POST",
        "/api/v1/wallets/{userId}/credits",
        Server(wallet::credit),
    )
    .idempotent(),
    route(
        "POST",
        "/api/v1/transfers/{id}/reverse",
        Server(wallet::reverse),
    )
    .idempotent(),
    route("GET", "/api/v1/gifts", Server(gifts::catalog_for_server)),
    route("PUT", "/api/v1/gifts/{giftId}", Server(gifts::put)),
    route("DELETE", "/api/v1/gifts/{giftId}", Server(gifts::delete)),
    route("GET", "/api/v1/monetization", Server(settings::get)),
    route("PUT", "/api/v1/monetization", Server(settings::put)),
    route("GET", "/api/v1/payouts", Server(payouts::list)),
    route(
        "POST",
        "/api/v1/payouts/{id}/complete",
        Server(payouts::complete),
    )
    .idempotent(),
    route(
        "POST",
        "/api/v1/payouts/{id}/reject",
        Server(payouts::reject),
    )
    .idempotent(),
    // Scheduled jobs
    route("POST", "/api/jobs/check-ledger", Jobs(jobs::check_ledger)),
    route(
        "POST",
        "/api/jobs/renew-subscriptions",
        Jobs(jobs::renew_subscriptions),
    ),
];

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
        let problems = edge::routing::undocumented(readme, "money", super::ROUTES);
        assert!(
            problems.is_empty(),
            "README, Who may call what: {problems:#?}"
        );
    }
}
