//! The REST API component: every `/api/` route that no other component serves.

mod clients;
mod sfu;

use common::routing::{Auth, Route, route};
use common::spin::http::{Ctx, serve};
use common::ApiError;
use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;

/// Every endpoint this component serves.
#[derive(Debug, Clone, Copy)]
enum Endpoint {
    RegisterClient,
    SfuHealth,
    Providers,
}

/// The route table: method, path, the authentication it needs, endpoint.
const ROUTES: &[Route<Endpoint>] = &[
    route("POST", "/api/admin/sdk-clients", Auth::Admin, Endpoint::RegisterClient),
    route("GET", "/api/sfu/health", Auth::Public, Endpoint::SfuHealth),
    route("GET", "/api/streaming/providers", Auth::ApiKey, Endpoint::Providers),
];

fn dispatch(endpoint: Endpoint, ctx: &Ctx) -> Result<Response, ApiError> {
    match endpoint {
        Endpoint::RegisterClient => clients::register(ctx),
        Endpoint::SfuHealth => sfu::health(ctx),
        Endpoint::Providers => sfu::providers(ctx),
    }
}

#[http_component]
fn handle(req: Request) -> Response {
    serve(req, ROUTES, dispatch)
}
