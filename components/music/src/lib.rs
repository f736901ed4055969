//! The music component: a user's link to an account on the external music platform at
//! `music_url`, search and link-existing against that platform, and the proxy to it.
//! Every route needs the tenant's `X-API-Key` and a user's Bearer JWT.

mod link_existing;
mod links;
mod platform;
mod proxy;
mod sealed;
mod search;

use common::ApiError;
use common::routing::{ANY_METHOD, Auth::User, Route, route};
use common::spin::http::{Ctx, serve};
use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;

/// Every endpoint this component serves.
#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Authenticate,
    GetLink,
    CreateLink,
    UpdateLink,
    DeleteLink,
    RefreshToken,
    Search,
    LinkExisting,
    Proxy,
}

use Endpoint::*;

/// The route table: method, path, the authentication it needs, endpoint.
const ROUTES: &[Route<Endpoint>] = &[
    route("POST", "/api/users/music/authenticate", User, Authenticate),
    route("GET", "/api/users/music/link", User, GetLink),
    route("POST", "/api/users/music/link", User, CreateLink),
    route("PUT", "/api/users/music/link", User, UpdateLink),
    route("DELETE", "/api/users/music/link", User, DeleteLink),
    route("POST", "/api/users/music/refresh-token", User, RefreshToken),
    route("GET", "/api/users/music/search", User, Search),
    route("POST", "/api/users/music/link-existing", User, LinkExisting),
    route(ANY_METHOD, "/api/users/music/proxy/{*path}", User, Proxy),
];

fn dispatch(endpoint: Endpoint, ctx: &Ctx) -> Result<Response, ApiError> {
    match endpoint {
        Authenticate => links::authenticate(ctx),
        GetLink => links::get(ctx),
        CreateLink => links::create_or_update(ctx),
        UpdateLink => links::update(ctx),
        DeleteLink => links::delete(ctx),
        RefreshToken => links::refresh(ctx),
        Search => search::search(ctx),
        LinkExisting => link_existing::link_existing(ctx),
        Proxy => proxy::proxy(ctx),
    }
}

#[http_component]
fn handle(req: Request) -> Response {
    serve(req, ROUTES, dispatch)
}
