//! The request context and the dispatch loop every component's entry point uses.

use super::auth::{self, CurrentUser, Tenant};
use crate::problem::{ApiError, PROBLEM_CONTENT_TYPE};
use crate::routing::{self, Auth, Miss, Route};
use crate::validate::{self, JsonBody};
use serde::Serialize;
use spin_sdk::http::{Request, Response};

/// Everything a handler needs: the request, its path parameters and who is calling.
pub struct Ctx {
    pub req: Request,
    params: routing::Params,
    tenant: Option<Tenant>,
    user: Option<CurrentUser>,
}

impl Ctx {
    /// A path parameter of the matched route.
    pub fn param(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    pub fn query(&self) -> &str {
        self.req.query()
    }

    pub fn query_value(&self, key: &str) -> Option<String> {
        validate::query_value(self.req.query(), key)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.req.header(name).and_then(|v| v.as_str())
    }

    /// The calling tenant; routes declared with `Auth::ApiKey` or `Auth::User` always have one.
    pub fn tenant(&self) -> Result<&Tenant, ApiError> {
        self.tenant
            .as_ref()
            .ok_or_else(|| ApiError::unauthorized("missing_api_key", "X-API-Key is required"))
    }

    /// The signed-in user; routes declared with `Auth::User` always have one.
    pub fn user(&self) -> Result<&CurrentUser, ApiError> {
        self.user
            .as_ref()
            .ok_or_else(|| ApiError::unauthorized("missing_token", "a user token is required"))
    }

    /// The client's address as the host reports it.
    pub fn client_addr(&self) -> &str {
        self.header("spin-client-addr").unwrap_or("unknown")
    }

    /// The body as a JSON object; a declared non-JSON content type is a 415.
    pub fn json(&self) -> Result<JsonBody, ApiError> {
        if let Some(ct) = self.header("content-type") {
            let ct = ct.to_ascii_lowercase();
            if !ct.starts_with("application/json") && !ct.contains("+json") {
                return Err(ApiError::new(
                    415,
                    "unsupported_media_type",
                    "the request body must be application/json",
                ));
            }
        }
        JsonBody::parse(self.req.body())
    }
}

/// A JSON answer.
pub fn json<T: Serialize>(status: u16, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(body)
            .build(),
        Err(e) => problem(&ApiError::internal(format!(
            "could not encode the answer: {e}"
        ))),
    }
}

/// A problem+json answer; server errors are logged with their cause.
pub fn problem(err: &ApiError) -> Response {
    if err.status >= 500 {
        eprintln!("error: {err}");
    }
    let body = serde_json::to_vec(&err.to_json()).unwrap_or_default();
    let mut builder = Response::builder();
    builder
        .status(err.status)
        .header("content-type", PROBLEM_CONTENT_TYPE);
    for (name, value) in &err.headers {
        builder.header(name.as_str(), value.as_str());
    }
    builder.body(body).build()
}

/// Routes a request, authenticates it as its route demands, and runs the handler.
pub fn serve<E: Copy>(
    req: Request,
    routes: &'static [Route<E>],
    dispatch: impl FnOnce(E, &Ctx) -> Result<Response, ApiError>,
) -> Response {
    match route_and_run(req, routes, dispatch) {
        Ok(response) => response,
        Err(err) => problem(&err),
    }
}

fn route_and_run<E: Copy>(
    req: Request,
    routes: &'static [Route<E>],
    dispatch: impl FnOnce(E, &Ctx) -> Result<Response, ApiError>,
) -> Result<Response, ApiError> {
    let (endpoint, ctx) = prepare(req, routes, validate::MAX_JSON_BODY)?;
    dispatch(endpoint, &ctx)
}

/// Routes a request and authenticates it as its route demands, answering the endpoint and
/// the context its handler needs; for entry points that run some handlers themselves
/// (e.g. streamed uploads, whose body is read after authentication). A body longer than
/// `max_body` is a 413 unless the route is public.
pub fn prepare<E: Copy>(
    req: Request,
    routes: &'static [Route<E>],
    max_body: usize,
) -> Result<(E, Ctx), ApiError> {
    let method = req.method().to_string();
    let matched = match routing::find(routes, &method, req.path()) {
        Ok(m) => m,
        Err(Miss::NotFound) => return Err(ApiError::not_found("route")),
        Err(Miss::MethodNotAllowed(allowed)) => {
            return Err(ApiError::new(
                405,
                "method_not_allowed",
                format!("{method} is not allowed here"),
            )
            .with_header("allow", allowed.join(", ")));
        }
    };
    if req.body().len() > max_body && matched.route.auth != Auth::Public {
        return Err(ApiError::payload_too_large(max_body));
    }
    let caller = auth::authenticate(&req, matched.route.auth)?;
    let endpoint = matched.route.endpoint;
    let ctx = Ctx {
        req,
        params: matched.params,
        tenant: caller.tenant,
        user: caller.user,
    };
    Ok((endpoint, ctx))
}
