//! Every component's route table, flattened: component, method, path pattern, tier.

use common::routing::{Endpoint, Route, Tier};

/// One route of one component's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRoute {
    pub component: &'static str,
    pub method: &'static str,
    pub pattern: &'static str,
    pub tier: Tier,
}

fn flatten<E: Endpoint>(component: &'static str, routes: &[Route<E>]) -> Vec<TableRoute> {
    routes
        .iter()
        .map(|r| TableRoute {
            component,
            method: r.method,
            pattern: r.pattern,
            tier: r.tier(),
        })
        .collect()
}

/// The routes of every HTTP component of the application, in manifest order.
pub fn all() -> Vec<TableRoute> {
    let mut routes = flatten("api", api::ROUTES);
    routes.extend(flatten("sfu-token", sfu_token::ROUTES));
    routes.extend(flatten("music", music::ROUTES));
    routes.extend(flatten("pages", pages::ROUTES));
    routes.extend(flatten("money", money::ROUTES));
    routes.extend(flatten("webhooks", webhooks::ROUTES));
    routes
}

/// Each component's fragment (`components/<name>/openapi.json`): what its handlers take
/// and answer.
pub fn fragments() -> Vec<(&'static str, &'static str)> {
    vec![
        ("api", include_str!("../../components/api/openapi.json")),
        (
            "sfu-token",
            include_str!("../../components/sfu-token/openapi.json"),
        ),
        ("music", include_str!("../../components/music/openapi.json")),
        ("pages", include_str!("../../components/pages/openapi.json")),
        ("money", include_str!("../../components/money/openapi.json")),
        (
            "webhooks",
            include_str!("../../components/webhooks/openapi.json"),
        ),
    ]
}
