//! An endpoint, declared once: method, path, tier, the typed handler, and what the API
//! document adds to what the types say.
//!
//! ```ignore
//! pub const ROUTES: &[Route<Handler>] = &[
//!     endpoint!(POST "/api/broadcasts/{id}/restreams", UserOrServer(create), "Add (restreams)",
//!         |op| op.errors(409, &["too_many_restreams"])),
//! ];
//!
//! fn create(ctx: &ActorCtx, new: NewTargetBody) -> Result<Created<TargetView>, ApiError>
//! ```
//!
//! The handler takes its context (the tier's: a handler written for a user cannot sit on a
//! server's route) and its body, already read and checked, and returns a typed answer; the
//! dispatcher reads the body, finishes it (unknown fields and every field's error in one
//! 400), runs the handler and writes the answer with its status. The document's operation
//! takes its request schema from the body's type and its answers from the answer's type, so
//! a handler cannot answer what its route does not document.

use super::http::{Call, Reply, json};
use crate::contract::{Operation, Schema};
use domain::problem::ApiError;
use domain::validate::body::RequestBody;
use schemars::JsonSchema;
use serde::Serialize;
use spin_sdk::http::Response;
use std::ops::Deref;

/// What a handler takes as its request body.
pub trait Body: Sized {
    /// Reads it from the request; a body that is not one is the 4xx saying why.
    fn read(call: &Call) -> Result<Self, ApiError>;
    /// What the document says the route takes.
    fn document(op: Operation) -> Operation;
}

/// A route without a body (whatever is sent is not read).
pub struct NoBody;

impl Body for NoBody {
    fn read(_: &Call) -> Result<Self, ApiError> {
        Ok(NoBody)
    }

    fn document(op: Operation) -> Operation {
        op
    }
}

impl<T: RequestBody> Body for T {
    fn read(call: &Call) -> Result<Self, ApiError> {
        let mut body = call.json()?;
        let value = T::read(&mut body);
        value.check(&mut body);
        body.finish()?;
        Ok(value)
    }

    fn document(op: Operation) -> Operation {
        op.takes(Schema::body::<T>())
    }
}

/// A small JSON object sent by a browser's `navigator.sendBeacon` (or `fetch` with
/// `keepalive`): as `text/plain` (what sendBeacon sends for a string, which needs no CORS
/// preflight) or as JSON, at most `MAX` bytes (413 beyond); read and checked like any
/// declared body. Another content type is a 415.
pub struct BeaconJson<T, const MAX: usize>(pub T);

impl<T: RequestBody, const MAX: usize> Body for BeaconJson<T, MAX> {
    fn read(call: &Call) -> Result<Self, ApiError> {
        if call.req.body().len() > MAX {
            return Err(ApiError::payload_too_large(MAX));
        }
        if let Some(ct) = call.header("content-type") {
            let ct = ct.to_ascii_lowercase();
            if !ct.starts_with("application/json")
                && !ct.contains("+json")
                && !ct.starts_with("text/plain")
            {
                return Err(ApiError::new(
                    415,
                    "unsupported_media_type",
                    "the request body must be JSON, sent as text/plain or application/json",
                ));
            }
        }
        let mut body = domain::validate::JsonBody::parse(call.req.body())?.at(call.now());
        let value = T::read(&mut body);
        value.check(&mut body);
        body.finish()?;
        Ok(BeaconJson(value))
    }

    fn document(op: Operation) -> Operation {
        op.takes(Schema::body::<T>())
    }
}

/// A body of another service's protocol, read whole by serde (`T` says which fields may be
/// left out or are refused).
pub struct Read<T>(pub T);

impl<T: serde::de::DeserializeOwned + JsonSchema> Body for Read<T> {
    fn read(call: &Call) -> Result<Self, ApiError> {
        call.typed_json().map(Read)
    }

    fn document(op: Operation) -> Operation {
        op.takes(Schema::read::<T>())
    }
}

/// What a handler answers on success: the response, and what the document says of it.
pub trait Answer {
    fn respond(self) -> Response;
    fn document(op: Operation) -> Operation;
}

/// 200 with the view as JSON.
pub struct Json<T>(pub T);

/// 201 with the created object's view.
pub struct Created<T>(pub T);

/// 202 with the view of what was accepted (done later).
pub struct Accepted<T>(pub T);

/// 200 with a page of views (`limit` and `offset` are the route's query parameters).
pub struct Page<T>(pub domain::pagination::Paged<T>);

/// 204 without a body.
pub struct NoContent;

/// A response the handler builds itself (a file, a page, a redirect): the declaration
/// documents its answers.
pub struct Raw(pub Response);

impl<T: Serialize + JsonSchema> Answer for Json<T> {
    fn respond(self) -> Response {
        json(200, &self.0)
    }

    fn document(op: Operation) -> Operation {
        op.answers(200, "OK", Schema::view::<T>())
    }
}

impl<T: Serialize + JsonSchema> Answer for Created<T> {
    fn respond(self) -> Response {
        json(201, &self.0)
    }

    fn document(op: Operation) -> Operation {
        op.answers(201, "Created", Schema::view::<T>())
    }
}

impl<T: Serialize + JsonSchema> Answer for Accepted<T> {
    fn respond(self) -> Response {
        json(202, &self.0)
    }

    fn document(op: Operation) -> Operation {
        op.answers(202, "Accepted", Schema::view::<T>())
    }
}

impl<T: Serialize + JsonSchema> Answer for Page<T> {
    fn respond(self) -> Response {
        json(200, &self.0)
    }

    fn document(op: Operation) -> Operation {
        op.paged().answers(200, "OK", Schema::page_of::<T>())
    }
}

impl Answer for NoContent {
    fn respond(self) -> Response {
        Response::builder().status(204).build()
    }

    fn document(op: Operation) -> Operation {
        op.answers_empty(204, "No Content")
    }
}

impl Answer for Raw {
    fn respond(self) -> Response {
        self.0
    }

    fn document(op: Operation) -> Operation {
        op
    }
}

/// One of two answers (e.g. 200 for a replayed create, 201 for a new one); both are
/// documented.
pub enum OneOf<A, B> {
    First(A),
    Second(B),
}

impl<A: Answer, B: Answer> Answer for OneOf<A, B> {
    fn respond(self) -> Response {
        match self {
            OneOf::First(a) => a.respond(),
            OneOf::Second(b) => b.respond(),
        }
    }

    fn document(op: Operation) -> Operation {
        B::document(A::document(op))
    }
}

/// What a typed handler takes as its context: a tier's context, or the bare call of a
/// public route (`PublicCtx` is the call itself).
pub trait Context {
    fn as_call(&self) -> &Call;
}

impl Context for Call {
    fn as_call(&self) -> &Call {
        self
    }
}

impl<C: Deref<Target = Call>> Context for C {
    fn as_call(&self) -> &Call {
        self
    }
}

/// Runs a typed handler: reads its body, calls it, and writes its answer.
pub fn run<C, B, A>(ctx: &C, handler: fn(&C, B) -> Result<A, ApiError>) -> Reply
where
    C: Context,
    B: Body,
    A: Answer,
{
    let body = B::read(ctx.as_call())?;
    handler(ctx, body).map(A::respond)
}

/// The operation of a typed handler's route: its body's and its answer's schemas.
pub fn describe<C, B, A>(
    route: &'static str,
    summary: &'static str,
    _handler: fn(&C, B) -> Result<A, ApiError>,
) -> Operation
where
    B: Body,
    A: Answer,
{
    A::document(B::document(Operation::new(route, summary)))
}

/// Declares one endpoint as a route: `METHOD "/path", Tier(handler), "Summary"`, and
/// optionally what the document adds (`|op| op.errors(...)`). The handler is typed (see the
/// module's documentation); the tier names the [`Handler`](super::http::Handler) variant.
#[macro_export]
macro_rules! endpoint {
    ($method:ident $path:literal, $tier:ident($handler:path), $summary:literal $(, $refine:expr)? $(,)?) => {{
        $(
            #[cfg(target_arch = "wasm32")]
            $crate::contract::unused_refinement($refine);
        )?
        $crate::routing::Route {
            method: stringify!($method),
            pattern: $path,
            endpoint: $crate::spin::http::Handler::$tier(|ctx| {
                $crate::spin::endpoint::run(ctx, $handler)
            }),
            idempotent: false,
            #[cfg(not(target_arch = "wasm32"))]
            operation: Some(|| {
                $crate::spin::endpoint::describe(
                    concat!(stringify!($method), " ", $path),
                    $summary,
                    $handler,
                )
                $( .then($refine) )?
            }),
        }
    }};
}
