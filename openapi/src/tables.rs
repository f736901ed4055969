//! Every component's route table, flattened: component, method, path pattern, tier.

use edge::contract::Operation;
use edge::routing::{Endpoint, Route, Tier};

/// One route of one component's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRoute {
    pub component: &'static str,
    pub method: &'static str,
    pub pattern: &'static str,
    pub tier: Tier,
    /// It needs an `Idempotency-Key`.
    pub idempotent: bool,
}

fn flatten<E: Endpoint>(component: &'static str, routes: &[Route<E>]) -> Vec<TableRoute> {
    routes
        .iter()
        .map(|r| TableRoute {
            component,
            method: r.method,
            pattern: r.pattern,
            tier: r.tier(),
            idempotent: r.idempotent,
        })
        .collect()
}

/// The routes of every HTTP component of the application, in manifest order.
pub fn all() -> Vec<TableRoute> {
    let mut routes = flatten("api", &api::ROUTES);
    routes.extend(flatten("sfu-token", sfu_token::ROUTES));
    routes.extend(flatten("music", &music::ROUTES));
    routes.extend(flatten("pages", pages::ROUTES));
    routes.extend(flatten("api-docs", api_docs::ROUTES));
    routes.extend(flatten("money", &money::ROUTES));
    routes.extend(flatten("webhooks", webhooks::ROUTES));
    routes
}

/// What each route of `routes` takes and answers, from its declaration.
fn declared<E>(component: &'static str, routes: &[Route<E>]) -> Vec<(&'static str, Operation)> {
    routes
        .iter()
        .filter_map(|r| r.operation)
        .map(|op| (component, op()))
        .collect()
}

/// What every component declares of its routes, by component.
pub fn operations() -> Vec<(&'static str, Operation)> {
    [
        declared("api", &api::ROUTES),
        declared("sfu-token", sfu_token::ROUTES),
        declared("music", &music::ROUTES),
        declared("pages", pages::ROUTES),
        declared("api-docs", api_docs::ROUTES),
        declared("money", &money::ROUTES),
        declared("webhooks", webhooks::ROUTES),
    ]
    .concat()
}
