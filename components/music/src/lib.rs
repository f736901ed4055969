//! The music component: a user's link to an account on the external music platform at
//! `music_url`, search and link-existing against that platform, and the proxy to it.
//! Every route needs the tenant's `X-API-Key` and a user's Bearer JWT.

mod link_existing;
mod links;
mod platform;
pub mod proxy;
mod sealed;
mod search;

use edge::routing::{ANY_METHOD, Route, route};
use edge::spin::http::{Handler, handle_incoming};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;

use Handler::User;

/// What the routes take and answer: the API document's operations, declared beside their
/// handlers (`openapi-doc` builds the document from them and the route table).
pub mod contract {
    /// What every route takes and answers.
    pub fn operations() -> Vec<edge::contract::Operation> {
        [
            crate::links::operations(),
            crate::search::operations(),
            crate::link_existing::operations(),
            crate::proxy::operations(),
        ]
        .concat()
    }
}

/// The route table: method, path, and the handler, whose variant is the route's tier:
/// every music route acts for one signed-in user.
pub const ROUTES: &[Route<Handler>] = &[
    route(
        "POST",
        "/api/users/music/authenticate",
        User(links::authenticate),
    ),
    route("GET", "/api/users/music/link", User(links::get)),
    route(
        "POST",
        "/api/users/music/link",
        User(links::create_or_update),
    ),
    route("PUT", "/api/users/music/link", User(links::update)),
    route("DELETE", "/api/users/music/link", User(links::delete)),
    route(
        "POST",
        "/api/users/music/refresh-token",
        User(links::refresh),
    ),
    route("GET", "/api/users/music/search", User(search::search)),
    route(
        "POST",
        "/api/users/music/link-existing",
        User(link_existing::link_existing),
    ),
    route(
        ANY_METHOD,
        "/api/users/music/proxy/{*path}",
        User(proxy::proxy),
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
        let problems = edge::routing::undocumented(readme, "music", super::ROUTES);
        assert!(
            problems.is_empty(),
            "README, Who may call what: {problems:#?}"
        );
    }
}
