//! The request contexts, one per tier, and the dispatch loop every component's entry point
//! uses.
//!
//! A route names its handler as a [`Handler`] variant, and each variant takes the context
//! of its tier: a handler written for [`UserCtx`] can only sit on a route that
//! authenticated a user, so asking for an identity the route did not prove does not
//! compile.

use super::auth::{self, CurrentUser, Tenant};
use super::incoming::{self, BodyStream};
use crate::routing::{self, Endpoint, Miss, Route, Tier};
use domain::problem::{ApiError, PROBLEM_CONTENT_TYPE};
use domain::validate::{self, JsonBody};
use serde::Serialize;
use spin_sdk::http::{IncomingRequest, Request, Response, ResponseOutparam};
use std::cell::OnceCell;
use std::ops::Deref;
use store::Db;
use store::app::access::{AsViewer, Viewer};

/// What a handler answers.
pub type Reply = Result<Response, ApiError>;

/// The request itself: what every tier's context holds.
pub struct Call {
    pub req: Request,
    params: routing::Params,
    request_id: String,
    now_ms: i64,
    /// The database, opened by the first handler step that asks for it.
    db: OnceCell<Db>,
}

impl Call {
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

    /// The client's address as the host reports it.
    pub fn client_addr(&self) -> &str {
        self.header("spin-client-addr").unwrap_or("unknown")
    }

    /// This request's id, as answered in error bodies and logged with their causes.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The time of this request (epoch seconds), read once when it arrived: every rule and
    /// store the handler calls gets this clock.
    pub fn now(&self) -> i64 {
        self.now_ms.div_euclid(1000)
    }

    /// The time of this request in epoch milliseconds (the same clock as [`Call::now`]).
    pub fn now_millis(&self) -> i64 {
        self.now_ms
    }

    /// The platform's database: the one connection of this request, opened on first use.
    pub fn db(&self) -> Result<Db, ApiError> {
        if let Some(db) = self.db.get() {
            return Ok(db.clone());
        }
        let db = super::store::open()?;
        Ok(self.db.get_or_init(|| db).clone())
    }

    /// The request's `Idempotency-Key`, or why it has none that counts (400).
    pub fn idempotency_key(&self) -> Result<String, ApiError> {
        idempotency_key(&self.req)
    }

    /// The body as a JSON object; a declared non-JSON content type is a 415.
    pub fn json(&self) -> Result<JsonBody, ApiError> {
        self.check_json_content_type()?;
        JsonBody::parse(self.req.body()).map(|body| body.at(self.now()))
    }

    /// The body as a `T` (unknown fields refused where `T` says so); JSON that is not a
    /// `T` is a 400 saying why.
    pub fn typed_json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        self.check_json_content_type()?;
        serde_json::from_slice(self.req.body()).map_err(|e| {
            ApiError::bad_request(
                "malformed_json",
                format!("the request body is not valid: {e}"),
            )
        })
    }

    fn check_json_content_type(&self) -> Result<(), ApiError> {
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
        Ok(())
    }
}

/// A public route's context: the request, nobody proven.
pub type PublicCtx = Call;

/// The operator, proven by the admin token (or open registration).
pub struct AdminCtx {
    call: Call,
}

/// The tenant named by its public API key; nothing else is proven.
pub struct AppCtx {
    call: Call,
    pub tenant: Tenant,
}

/// One signed-in user of the tenant.
pub struct UserCtx {
    call: Call,
    pub tenant: Tenant,
    pub user: CurrentUser,
}

/// The tenant's own backend, proven by an HMAC signature with the secret key.
pub struct ServerCtx {
    call: Call,
    pub tenant: Tenant,
}

/// A user or the tenant's server.
pub enum Actor {
    User(CurrentUser),
    Server,
}

impl AsViewer for Caller {
    /// The caller as a viewer of a broadcast or an event.
    fn as_viewer(&self) -> Viewer<'_> {
        match self {
            Caller::Guest => Viewer::Guest,
            Caller::User(user) => Viewer::User(&user.id),
            Caller::Server => Viewer::Server,
        }
    }
}

impl AsViewer for Actor {
    fn as_viewer(&self) -> Viewer<'_> {
        match self {
            Actor::User(user) => Viewer::User(&user.id),
            Actor::Server => Viewer::Server,
        }
    }
}

pub struct ActorCtx {
    call: Call,
    pub tenant: Tenant,
    pub actor: Actor,
}

impl ActorCtx {
    /// The signed-in user, when the caller is one.
    pub fn user(&self) -> Option<&CurrentUser> {
        match &self.actor {
            Actor::User(user) => Some(user),
            Actor::Server => None,
        }
    }
}

/// Whoever may call with the tenant's API key: an anonymous app user (a guest), a
/// signed-in user, or the tenant's server.
pub enum Caller {
    Guest,
    User(CurrentUser),
    Server,
}

pub struct CallerCtx {
    call: Call,
    pub tenant: Tenant,
    pub caller: Caller,
}

impl CallerCtx {
    /// The signed-in user, when the caller is one.
    pub fn user(&self) -> Option<&CurrentUser> {
        match &self.caller {
            Caller::User(user) => Some(user),
            _ => None,
        }
    }
}

/// The SFU, proven by its webhook signature; `event` is the verified JSON body.
pub struct SfuCtx {
    call: Call,
    pub event: serde_json::Value,
}

/// The scheduler, proven by the jobs token.
pub struct JobsCtx {
    call: Call,
}

/// The media server, proven by `media_secret`.
pub struct MediaCtx {
    call: Call,
}

macro_rules! calls {
    ($($ctx:ty),*) => {$(
        impl Deref for $ctx {
            type Target = Call;
            fn deref(&self) -> &Call {
                &self.call
            }
        }
    )*};
}
calls!(
    AdminCtx, AppCtx, UserCtx, ServerCtx, ActorCtx, CallerCtx, SfuCtx, JobsCtx, MediaCtx
);

/// A route's handler, by tier. `Upload` routes (user tier) read their body themselves,
/// as a stream, after authentication; the component runs them with [`prepare_upload`].
#[derive(Clone, Copy)]
pub enum Handler<U: Copy + 'static = NoUploads> {
    Public(fn(&PublicCtx) -> Reply),
    Admin(fn(&AdminCtx) -> Reply),
    App(fn(&AppCtx) -> Reply),
    User(fn(&UserCtx) -> Reply),
    Server(fn(&ServerCtx) -> Reply),
    UserOrServer(fn(&ActorCtx) -> Reply),
    Caller(fn(&CallerCtx) -> Reply),
    RelayUser(fn(&UserCtx) -> Reply),
    RelayCaller(fn(&CallerCtx) -> Reply),
    Sfu(fn(&SfuCtx) -> Reply),
    Jobs(fn(&JobsCtx) -> Reply),
    Media(fn(&MediaCtx) -> Reply),
    Upload(U),
}

/// For components without streamed uploads.
#[derive(Debug, Clone, Copy)]
pub enum NoUploads {}

impl<U: Copy> Endpoint for Handler<U> {
    fn tier(&self) -> Tier {
        match self {
            Handler::Public(_) => Tier::Public,
            Handler::Admin(_) => Tier::Admin,
            Handler::App(_) => Tier::App,
            Handler::User(_) | Handler::Upload(_) => Tier::User,
            Handler::Server(_) => Tier::Server,
            Handler::UserOrServer(_) => Tier::UserOrServer,
            Handler::Caller(_) => Tier::Caller,
            Handler::RelayUser(_) => Tier::RelayUser,
            Handler::RelayCaller(_) => Tier::RelayCaller,
            Handler::Sfu(_) => Tier::Sfu,
            Handler::Jobs(_) => Tier::Jobs,
            Handler::Media(_) => Tier::Media,
        }
    }
}

impl<U: Copy> std::fmt::Debug for Handler<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Handler({})", self.tier().name())
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
        Err(e) => problem(
            &ApiError::internal(format!("could not encode the answer: {e}")),
            &domain::ids::random_hex(8),
        ),
    }
}

/// A problem+json answer. Server errors are logged with their cause and answered with the
/// request id only: no database or host text reaches the caller.
pub fn problem(err: &ApiError, request_id: &str) -> Response {
    let mut doc = err.to_json();
    if err.status >= 500 {
        eprintln!("error [{request_id}]: {err}");
        if err.code == "internal_error" {
            doc["detail"] = "internal error".into();
        }
        doc["requestId"] = request_id.into();
    }
    let body = serde_json::to_vec(&doc).unwrap_or_default();
    let mut builder = Response::builder();
    builder
        .status(err.status)
        .header("content-type", PROBLEM_CONTENT_TYPE)
        .header("x-request-id", request_id);
    for (name, value) in &err.headers {
        builder.header(name.as_str(), value.as_str());
    }
    builder.body(body).build()
}

/// The whole entry point of a component without uploads: reads the body (bounded), routes,
/// authenticates as the route's tier demands, runs the handler, and sends the answer.
pub async fn handle_incoming(
    req: IncomingRequest,
    out: ResponseOutparam,
    routes: &'static [Route<Handler>],
) {
    let request_id = domain::ids::random_hex(8);
    let head = incoming::head_of(&req);
    let body = incoming::body_stream(req);
    let response = match incoming::buffered(head, body).await {
        Ok(req) => serve(req, routes, &request_id),
        Err(e) => problem(&e, &request_id),
    };
    incoming::send(out, response).await;
}

/// Routes a buffered request, authenticates it as its route demands, and runs the handler.
pub fn serve<U: Copy>(
    req: Request,
    routes: &'static [Route<Handler<U>>],
    request_id: &str,
) -> Response {
    respond(
        prepare(req, routes, validate::MAX_JSON_BODY, request_id),
        request_id,
    )
}

/// Runs a prepared request's handler; a refusal on the way is its problem answer.
fn respond<U>(prepared: Result<Prepared<U>, ApiError>, request_id: &str) -> Response {
    prepared
        .and_then(|prepared| prepared.run())
        .unwrap_or_else(|err| problem(&err, request_id))
}

/// A request routed and authenticated, ready to run.
pub enum Prepared<U> {
    Public(fn(&PublicCtx) -> Reply, PublicCtx),
    Admin(fn(&AdminCtx) -> Reply, AdminCtx),
    App(fn(&AppCtx) -> Reply, AppCtx),
    User(fn(&UserCtx) -> Reply, UserCtx),
    Server(fn(&ServerCtx) -> Reply, ServerCtx),
    Actor(fn(&ActorCtx) -> Reply, ActorCtx),
    Caller(fn(&CallerCtx) -> Reply, CallerCtx),
    Sfu(fn(&SfuCtx) -> Reply, SfuCtx),
    Jobs(fn(&JobsCtx) -> Reply, JobsCtx),
    Media(fn(&MediaCtx) -> Reply, MediaCtx),
    Upload(U, UserCtx),
}

impl<U> Prepared<U> {
    /// The request.
    fn call(&self) -> &Call {
        match self {
            Prepared::Public(_, ctx) => ctx,
            Prepared::Admin(_, ctx) => ctx,
            Prepared::App(_, ctx) => ctx,
            Prepared::User(_, ctx) => ctx,
            Prepared::Server(_, ctx) => ctx,
            Prepared::Actor(_, ctx) => ctx,
            Prepared::Caller(_, ctx) => ctx,
            Prepared::Sfu(_, ctx) => ctx,
            Prepared::Jobs(_, ctx) => ctx,
            Prepared::Media(_, ctx) => ctx,
            Prepared::Upload(_, ctx) => ctx,
        }
    }

    /// Runs the handler. An upload is not run here (see [`prepare_upload`]).
    pub fn run(self) -> Reply {
        match self {
            Prepared::Public(f, ctx) => f(&ctx),
            Prepared::Admin(f, ctx) => f(&ctx),
            Prepared::App(f, ctx) => f(&ctx),
            Prepared::User(f, ctx) => f(&ctx),
            Prepared::Server(f, ctx) => f(&ctx),
            Prepared::Actor(f, ctx) => f(&ctx),
            Prepared::Caller(f, ctx) => f(&ctx),
            Prepared::Sfu(f, ctx) => f(&ctx),
            Prepared::Jobs(f, ctx) => f(&ctx),
            Prepared::Media(f, ctx) => f(&ctx),
            Prepared::Upload(..) => Err(ApiError::internal("an upload was run as a JSON call")),
        }
    }
}

/// Finds the route of `method` and `path`, or the 404/405 answer.
pub fn find<'a, U: Copy>(
    routes: &'a [Route<Handler<U>>],
    method: &str,
    path: &str,
) -> Result<routing::Matched<'a, Handler<U>>, ApiError> {
    routing::find(routes, method, path).map_err(|miss| match miss {
        Miss::NotFound => ApiError::not_found("route"),
        Miss::MethodNotAllowed(allowed) => ApiError::new(
            405,
            "method_not_allowed",
            format!("{method} is not allowed here"),
        )
        .with_header("allow", allowed.join(", ")),
    })
}

/// Routes a request and authenticates it as its route's tier demands. A body longer than
/// `max_body` is a 413 (before any credential is looked at).
pub fn prepare<U: Copy>(
    req: Request,
    routes: &'static [Route<Handler<U>>],
    max_body: usize,
    request_id: &str,
) -> Result<Prepared<U>, ApiError> {
    let method = req.method().to_string();
    let matched = find(routes, &method, req.path())?;
    prepare_matched(req, matched, max_body, request_id)
}

/// [`prepare`] for a request already routed to `matched`.
fn prepare_matched<U: Copy>(
    req: Request,
    matched: routing::Matched<'_, Handler<U>>,
    max_body: usize,
    request_id: &str,
) -> Result<Prepared<U>, ApiError> {
    if req.body().len() > max_body {
        return Err(ApiError::payload_too_large(max_body));
    }
    let handler = matched.route.endpoint;
    let call = Call {
        req,
        params: matched.params,
        request_id: request_id.to_string(),
        now_ms: domain::time::now_millis(),
        db: OnceCell::new(),
    };
    // Credentials first: whoever may not call the route learns nothing of what a request
    // to it must look like. Then the route's own demands on the request's shape.
    auth::clear_recorded_signature();
    let prepared = authenticate(handler, call)?;
    if let Err(refused) = check_shape(matched.route, &prepared.call().req) {
        // The request is refused before it did anything: its signature stays unspent,
        // so the same signed call can be sent again once it is complete.
        auth::release_signature()?;
        return Err(refused);
    }
    Ok(prepared)
}

/// What a route demands of every request's shape before its handler runs (checked once
/// the caller is authenticated): a money-moving route needs an `Idempotency-Key`.
fn check_shape<E>(route: &Route<E>, req: &Request) -> Result<(), ApiError> {
    if route.idempotent {
        idempotency_key(req)?;
    }
    Ok(())
}

/// A request's `Idempotency-Key`, or the 400 that says what is wrong with it.
fn idempotency_key(req: &Request) -> Result<String, ApiError> {
    let key = req
        .header("idempotency-key")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .trim();
    if key.is_empty() {
        return Err(ApiError::bad_request(
            "idempotency_key_required",
            "money-moving requests need an Idempotency-Key header",
        ));
    }
    if !validate::valid_idempotency_key(key) {
        return Err(ApiError::bad_request(
            "invalid_idempotency_key",
            "the Idempotency-Key must be 1 to 255 visible ASCII characters",
        ));
    }
    Ok(key.to_string())
}

/// Checks what `handler`'s tier demands and builds its context.
fn authenticate<U: Copy>(handler: Handler<U>, call: Call) -> Result<Prepared<U>, ApiError> {
    let req = &call.req;
    // A signature that is sent must verify on every route, also where the tier asks for
    // no tenant (public, operator, scheduler, media server, SFU): it names its client with
    // X-API-Key like any other. The tenant tiers check it with the tenant.
    let tenantless = matches!(
        handler,
        Handler::Public(_)
            | Handler::Admin(_)
            | Handler::Jobs(_)
            | Handler::Media(_)
            | Handler::Sfu(_)
    );
    if tenantless && signs(req) {
        auth::tenant(req)?;
    }
    Ok(match handler {
        Handler::Public(f) => Prepared::Public(f, call),
        Handler::Admin(f) => {
            auth::check_admin(req)?;
            Prepared::Admin(f, AdminCtx { call })
        }
        Handler::Jobs(f) => {
            auth::check_jobs_token(req)?;
            Prepared::Jobs(f, JobsCtx { call })
        }
        Handler::Media(f) => {
            auth::check_media_secret(req)?;
            Prepared::Media(f, MediaCtx { call })
        }
        Handler::Sfu(f) => {
            let event = auth::verified_sfu_webhook(req)?;
            Prepared::Sfu(f, SfuCtx { call, event })
        }
        Handler::App(f) => {
            let (tenant, _) = auth::tenant(req)?;
            Prepared::App(f, AppCtx { call, tenant })
        }
        Handler::User(f) => {
            let (tenant, user) = user_of(req)?;
            Prepared::User(f, UserCtx { call, tenant, user })
        }
        Handler::Upload(u) => {
            let (tenant, user) = user_of(req)?;
            Prepared::Upload(u, UserCtx { call, tenant, user })
        }
        Handler::Server(f) => {
            let tenant = server_of(req)?;
            Prepared::Server(f, ServerCtx { call, tenant })
        }
        Handler::UserOrServer(f) => {
            let (tenant, actor) = actor_of(req)?;
            Prepared::Actor(
                f,
                ActorCtx {
                    call,
                    tenant,
                    actor,
                },
            )
        }
        Handler::Caller(f) => {
            let (tenant, caller) = caller_of(req)?;
            Prepared::Caller(
                f,
                CallerCtx {
                    call,
                    tenant,
                    caller,
                },
            )
        }
        Handler::RelayUser(f) => {
            let (tenant, user) = match auth::relay_call(req)? {
                Some(relay) => {
                    let auth::RelayCall { tenant, user } = relay;
                    let user = user.ok_or_else(|| {
                        ApiError::unauthorized(
                            "missing_token",
                            "the relay writes as the user whose token it forwards",
                        )
                    })?;
                    (tenant, user)
                }
                None => user_of(req)?,
            };
            Prepared::User(f, UserCtx { call, tenant, user })
        }
        Handler::RelayCaller(f) => {
            let (tenant, caller) = match auth::relay_call(req)? {
                Some(auth::RelayCall { tenant, user }) => {
                    (tenant, user.map_or(Caller::Guest, Caller::User))
                }
                None => caller_of(req)?,
            };
            Prepared::Caller(
                f,
                CallerCtx {
                    call,
                    tenant,
                    caller,
                },
            )
        }
    })
}

/// The tenant and the user of its Bearer JWT.
fn user_of(req: &Request) -> Result<(Tenant, CurrentUser), ApiError> {
    let (tenant, _, user) = auth::tenant_and_user(req)?;
    Ok((tenant, user))
}

/// A signed call is the server; else the Bearer JWT's user, who must be valid.
fn actor_of(req: &Request) -> Result<(Tenant, Actor), ApiError> {
    if !signs(req) {
        let (tenant, user) = user_of(req)?;
        return Ok((tenant, Actor::User(user)));
    }
    Ok(match auth::tenant(req)? {
        (tenant, true) => (tenant, Actor::Server),
        (tenant, false) => {
            let user = auth::user_from_bearer(req, &tenant)?;
            (tenant, Actor::User(user))
        }
    })
}

/// Whether the request carries a signature (or half of one): its caller may be the
/// tenant's server.
fn signs(req: &Request) -> bool {
    req.header("x-signature").is_some() || req.header("x-timestamp").is_some()
}

/// The tenant, when the request carries its valid signature.
fn server_of(req: &Request) -> Result<Tenant, ApiError> {
    match auth::tenant(req)? {
        (tenant, true) => Ok(tenant),
        (_, false) => Err(ApiError::unauthorized(
            "signature_required",
            "this route is for the tenant's server: sign the request (X-Signature and X-Timestamp)",
        )),
    }
}

/// A signed call is the server; else a Bearer JWT (which must then be valid) is a user;
/// else a guest of the app.
fn caller_of(req: &Request) -> Result<(Tenant, Caller), ApiError> {
    if auth::bearer_token(req).is_some() && !signs(req) {
        let (tenant, user) = user_of(req)?;
        return Ok((tenant, Caller::User(user)));
    }
    let (tenant, signed) = auth::tenant(req)?;
    let caller = if signed {
        Caller::Server
    } else if auth::bearer_token(req).is_some() {
        Caller::User(auth::user_from_bearer(req, &tenant)?)
    } else {
        Caller::Guest
    };
    Ok((tenant, caller))
}

/// What [`prepare_upload`] makes of a request.
pub enum Entry<U> {
    /// An upload to run with its context and its body.
    Upload(U, Box<UserCtx>, incoming::Source),
    /// Any other request, already answered.
    Answered(Response),
}

/// For components with streamed uploads: reads the request head, and for an `Upload`
/// route authenticates the user before any of the body is read (a signed upload is read
/// whole first, up to `max_signed_body`, since its signature covers the body). Other routes
/// are buffered (bounded) and served as usual. `max_signed_body` is asked only for a
/// signed upload (it may read a variable).
pub async fn prepare_upload<U: Copy>(
    req: IncomingRequest,
    routes: &'static [Route<Handler<U>>],
    max_signed_body: fn() -> u64,
    request_id: &str,
) -> Entry<U> {
    let head = incoming::head_of(&req);
    let body: BodyStream = incoming::body_stream(req);
    let method = head.method().to_string();
    // Routed once: an upload streams its body, anything else is buffered first.
    let matched = match find(routes, &method, head.path()) {
        Ok(matched) if matches!(matched.route.endpoint, Handler::Upload(_)) => matched,
        other => {
            let response = match incoming::buffered(head, body).await {
                Ok(req) => respond(
                    other.and_then(|matched| {
                        prepare_matched(req, matched, validate::MAX_JSON_BODY, request_id)
                    }),
                    request_id,
                ),
                Err(e) => problem(&e, request_id),
            };
            return Entry::Answered(response);
        }
    };
    let signed = head.header("x-signature").is_some();
    let prepared = if signed {
        let max_signed_body = max_signed_body();
        match incoming::collect(&head, body, max_signed_body).await {
            Ok(bytes) => {
                let mut req = head;
                *req.body_mut() = bytes;
                let max = usize::try_from(max_signed_body).unwrap_or(usize::MAX);
                prepare_matched(req, matched, max, request_id).map(|p| (p, None))
            }
            Err(e) => Err(e),
        }
    } else {
        prepare_matched(head, matched, 0, request_id)
            .map(|p| (p, Some(holding_no_connection(body))))
    };
    match prepared {
        Ok((Prepared::Upload(u, mut ctx), stream)) => {
            let source = match stream {
                Some(stream) => incoming::Source::Stream(stream),
                None => {
                    let bytes = std::mem::take(ctx.call.req.body_mut());
                    let len = bytes.len();
                    incoming::Source::Bytes(bytes, 0..len)
                }
            };
            Entry::Upload(u, Box::new(ctx), source)
        }
        Ok(_) => Entry::Answered(problem(
            &ApiError::internal("not an upload route"),
            request_id,
        )),
        Err(e) => Entry::Answered(problem(&e, request_id)),
    }
}

/// The upload's body, awaited without a database connection: a client that sends slowly
/// (or trickles on purpose) holds its instance, never one of the pool's connections. The
/// connection the authentication took is given back whenever the body makes the request
/// wait, and the next statement takes one again.
fn holding_no_connection(mut body: BodyStream) -> BodyStream {
    Box::pin(futures::stream::poll_fn(move |cx| {
        let next = body.as_mut().poll_next(cx);
        if next.is_pending() {
            super::store::set_aside();
        }
        next
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_name_the_request_and_hide_their_cause() {
        let response = problem(
            &ApiError::internal("database error: no such table: users"),
            "req-1",
        );
        assert_eq!(*response.status(), 500);
        let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(body["detail"], "internal error");
        assert_eq!(body["requestId"], "req-1");
        assert!(!String::from_utf8_lossy(response.body()).contains("no such table"));
        // Client errors keep their detail and carry no request id in the body.
        let response = problem(&ApiError::not_found("broadcast"), "req-2");
        let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(body["detail"], "broadcast not found");
        assert!(body.get("requestId").is_none());
    }
}
