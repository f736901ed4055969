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
    routes.extend(flatten("money", &money::ROUTES));
    routes.extend(flatten("webhooks", webhooks::ROUTES));
    routes
}

/// What every component declares of its routes, by component.
pub fn operations() -> Vec<(&'static str, Operation)> {
    let mut operations = Vec::new();
    let mut add = |component: &'static str, declared: Vec<Operation>| {
        operations.extend(declared.into_iter().map(|op| (component, op)));
    };
    add("api", api::contract::operations());
    add("sfu-token", sfu_token::contract::operations());
    add("music", music::contract::operations());
    add("pages", pages::contract::operations());
    add("money", money::contract::operations());
    add("webhooks", webhooks::contract::operations());
    operations
}
