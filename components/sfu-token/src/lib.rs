//! The SFU token minting component. Its endpoints are not built yet: every route answers
//! 501 problem+json so callers get a clear, honest error.

use common::ApiError;
use common::routing::{Auth, Route, route};
use common::spin::http::{Ctx, serve};
use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;

#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Pending,
}

const ROUTES: &[Route<Endpoint>] = &[route(
    "POST",
    "/api/streaming/sessions/{id}/token",
    Auth::ApiKey,
    Endpoint::Pending,
)];

fn dispatch(endpoint: Endpoint, _ctx: &Ctx) -> Result<Response, ApiError> {
    match endpoint {
        Endpoint::Pending => Err(ApiError::new(
            501,
            "not_implemented",
            "this endpoint is not available yet",
        )),
    }
}

#[http_component]
fn handle(req: Request) -> Response {
    serve(req, ROUTES, dispatch)
}
