//! The webhooks component: the `deliver-webhooks` job, which fans the outbox's new events
//! out to the tenants' endpoints and sends the due deliveries, signed as Standard Webhooks
//! specifies. It is the only component whose outbound permission covers arbitrary hosts;
//! the endpoints' routes live in the API component.

mod deliver;

use common::routing::{Route, route};
use common::spin::http::{Handler, handle_incoming};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use spin_sdk::http_component;

/// The route table: the delivery job (jobs tier: the scheduler's `jobs_token`).
pub const ROUTES: &[Route<Handler>] = &[route(
    "POST",
    "/api/jobs/deliver-webhooks",
    Handler::Jobs(deliver::run),
)];

#[http_component]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    handle_incoming(req, out, ROUTES).await
}

#[cfg(test)]
mod route_table {
    #[test]
    fn the_readme_lists_every_route_with_its_tier() {
        let readme = include_str!("../../../README.md");
        let problems = common::routing::undocumented(readme, "webhooks", super::ROUTES);
        assert!(
            problems.is_empty(),
            "README, Who may call what: {problems:#?}"
        );
    }
}
