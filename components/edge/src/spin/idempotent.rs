//! `Idempotency-Key` on every money-moving POST, applied by the dispatcher: the first
//! request with a key runs, and its answer (status and body) is kept 24 hours with a hash
//! of the request; the same key and request replays that answer (with
//! `Idempotent-Replayed: true`), the same key with another request is 422
//! `idempotency_key_reused`, and a duplicate that arrives while the first still runs waits
//! for it and replays its answer. Keys belong to the tenant and the caller (a user, or the
//! tenant's server: [`KeyScope`]), so nobody can replay another's answer.
//!
//! ```ignore
//! pub const ROUTES: &[Route<Handler>] = &[
//!     idempotent_endpoint!(POST "/api/v1/wallets/{userId}/credits", Server(credit),
//!         "Credit (wallet)", |op| op.errors(409, &["duplicate_reference"])),
//! ];
//!
//! fn credit(ctx: &ServerCtx, body: CreditBody, tx: &Db)
//!     -> Result<Committed<Created<TransferWithWallet>>, ApiError>
//! ```
//!
//! The handler runs inside the transaction that also stores its answer with the key, so
//! the money and the answer that reports it commit together, or neither does; the
//! real-time event it names is published after the commit. A handler may read what it
//! needs before the transaction (`Tier(prepare => handler)`): `prepare` takes the body and
//! the connection, and what it answers is what `handler` takes in the transaction.

use super::endpoint::{Accepted, Answer, Body, Context, Created, Json};
use super::http::{Call, Reply, ServerCtx, UserCtx};
use crate::contract::Operation;
use crate::realtime::Event;
use domain::ApiError;
use domain::problem::{PROBLEM_CONTENT_TYPE, json_value};
use serde::Serialize;
use serde_json::Value;
use spin_sdk::http::Response;
use store::Db;
use store::idempotency::{self, Earlier};

/// Whose keys a context's requests use: the tenant's, and within it the caller's.
pub trait KeyScope: Context {
    fn client_id(&self) -> &str;
    /// The caller within the tenant: a user's id, or `server` for the tenant's backend.
    fn caller(&self) -> &str;
}

impl KeyScope for UserCtx {
    fn client_id(&self) -> &str {
        &self.tenant.client_id
    }

    fn caller(&self) -> &str {
        &self.user.id
    }
}

impl KeyScope for ServerCtx {
    fn client_id(&self) -> &str {
        &self.tenant.client_id
    }

    fn caller(&self) -> &str {
        "server"
    }
}

/// What an idempotent handler answers once its work is done in the transaction: the
/// answer (kept with the key), and the real-time event to publish after the commit (best
/// effort).
pub struct Committed<A> {
    answer: A,
    event: Option<(String, Event)>,
}

impl<A> Committed<A> {
    pub fn new(answer: A) -> Self {
        Committed {
            answer,
            event: None,
        }
    }

    /// Publishes `event` to the sockets of `stream_id` once the transaction committed.
    pub fn publishing(mut self, stream_id: String, event: Event) -> Self {
        self.event = Some((stream_id, event));
        self
    }
}

/// An answer that can be kept with its key: its status and JSON body.
pub trait Kept: Answer {
    fn kept(self) -> Result<(u16, Value), ApiError>;
}

impl<T: Serialize + schemars::JsonSchema> Kept for Json<T> {
    fn kept(self) -> Result<(u16, Value), ApiError> {
        Ok((200, json_value(&self.0)?))
    }
}

impl<T: Serialize + schemars::JsonSchema> Kept for Created<T> {
    fn kept(self) -> Result<(u16, Value), ApiError> {
        Ok((201, json_value(&self.0)?))
    }
}

impl<T: Serialize + schemars::JsonSchema> Kept for Accepted<T> {
    fn kept(self) -> Result<(u16, Value), ApiError> {
        Ok((202, json_value(&self.0)?))
    }
}

/// Runs an idempotent handler: reads its body (a body refused is not the key's answer),
/// then runs it once per key (see [`transact`]).
pub fn run<C, B, A>(ctx: &C, handler: fn(&C, B, &Db) -> Result<Committed<A>, ApiError>) -> Reply
where
    C: KeyScope,
    B: Body,
    A: Kept,
{
    let body = B::read(ctx.as_call())?;
    let db = ctx.as_call().db()?;
    transact(ctx, &db, |tx| handler(ctx, body, tx))
}

/// Runs an idempotent handler that reads before its transaction: `prepare` takes the body
/// and the connection (so that, on SQLite, the transaction holds the writer only for what
/// it writes); its refusal is the key's answer as one in the transaction would be.
pub fn run_prepared<C, B, P, A>(
    ctx: &C,
    prepare: fn(&C, B, &Db) -> Result<P, ApiError>,
    handler: fn(&C, P, &Db) -> Result<Committed<A>, ApiError>,
) -> Reply
where
    C: KeyScope,
    B: Body,
    A: Kept,
{
    let body = B::read(ctx.as_call())?;
    let db = ctx.as_call().db()?;
    match prepare(ctx, body, &db) {
        Ok(prepared) => transact(ctx, &db, |tx| handler(ctx, prepared, tx)),
        Err(err) => refused(ctx, &db, err),
    }
}

/// The operation of an idempotent handler's route: its body's and its answer's schemas
/// (the `Idempotency-Key` header comes from the route being idempotent).
pub fn describe<C, B, A>(
    route: &'static str,
    summary: &'static str,
    _handler: fn(&C, B, &Db) -> Result<Committed<A>, ApiError>,
) -> Operation
where
    B: Body,
    A: Answer,
{
    A::document(B::document(Operation::new(route, summary)))
}

/// [`describe`] for a handler that reads before its transaction.
pub fn describe_prepared<C, B, P, A>(
    route: &'static str,
    summary: &'static str,
    _prepare: fn(&C, B, &Db) -> Result<P, ApiError>,
    _handler: fn(&C, P, &Db) -> Result<Committed<A>, ApiError>,
) -> Operation
where
    B: Body,
    A: Answer,
{
    A::document(B::document(Operation::new(route, summary)))
}

/// What identifies a request: method, path and body (not the query, which signed calls
/// vary with a nonce).
fn request_hash(call: &Call) -> String {
    let mut text = Vec::new();
    text.extend_from_slice(call.req.method().to_string().as_bytes());
    text.push(b'\n');
    text.extend_from_slice(call.req.path().as_bytes());
    text.push(b'\n');
    text.extend_from_slice(call.req.body());
    domain::ids::sha256_hex(&text)
}

fn answer(status: u16, body: Vec<u8>, replayed: bool) -> Response {
    let content_type = if status >= 400 {
        PROBLEM_CONTENT_TYPE
    } else {
        "application/json"
    };
    let mut builder = Response::builder();
    builder.status(status).header("content-type", content_type);
    if replayed {
        builder.header("idempotent-replayed", "true");
    }
    builder.body(body).build()
}

/// The error that rolls back a transaction whose key turned out to be answered already.
const ANSWERED_BEFORE: &str = "idempotency_key_answered";

/// Runs `work` once per key: inside one transaction that also stores the answer, so the
/// money and the answer that reports it commit together, or neither does. A request
/// whose key holds an answer already (a retry, or a duplicate that ran at the same time
/// and committed first) rolls back whatever its work did and replays that answer. A
/// refusal (4xx) is kept and replayed too; a server error stores nothing, so a retry runs
/// again.
fn transact<C: KeyScope, A: Kept>(
    ctx: &C,
    db: &Db,
    work: impl FnOnce(&Db) -> Result<Committed<A>, ApiError>,
) -> Reply {
    let call = ctx.as_call();
    let (client_id, caller) = (ctx.client_id(), ctx.caller());
    let key = call.idempotency_key()?;
    let hash = request_hash(call);
    let now = call.now();
    let result = db.transaction(|tx| {
        let Committed { answer, event } = work(tx)?;
        let (status, body) = answer.kept()?;
        let body = body.to_string();
        if !idempotency::remember(tx, client_id, caller, &key, &hash, status, &body, now)? {
            return Err(ApiError::conflict(ANSWERED_BEFORE, "answered before"));
        }
        Ok((status, body, event))
    });
    match result {
        Ok((status, body, event)) => {
            if let Some((stream_id, event)) = event {
                super::realtime::publish(&stream_id, event);
            }
            Ok(answer(status, body.into_bytes(), false))
        }
        Err(err) if err.code == ANSWERED_BEFORE => replay(db, client_id, caller, &key, &hash, now),
        Err(err) => refused(ctx, db, err),
    }
}

/// Answers a request whose work was refused, before or inside its transaction: a refusal
/// (4xx) is stored as the key's answer, except a rate limit (429), which passes; when the
/// key holds an answer already, that answer is replayed instead (a retry of a request that
/// succeeded is answered as it was, whatever changed since). A server error stores nothing.
fn refused<C: KeyScope>(ctx: &C, db: &Db, err: ApiError) -> Reply {
    if err.status >= 500 || err.status == 429 {
        return Err(err);
    }
    let call = ctx.as_call();
    let (client_id, caller) = (ctx.client_id(), ctx.caller());
    let key = call.idempotency_key()?;
    let hash = request_hash(call);
    let now = call.now();
    let body = err.to_json().to_string();
    if idempotency::remember(db, client_id, caller, &key, &hash, err.status, &body, now)? {
        Err(err)
    } else {
        replay(db, client_id, caller, &key, &hash, now)
    }
}

/// The answer `key` holds for this request.
fn replay(db: &Db, client_id: &str, caller: &str, key: &str, hash: &str, now: i64) -> Reply {
    match idempotency::earlier(db, client_id, caller, key, hash, now)? {
        Some(Earlier::Replay { status, body }) => Ok(answer(status, body.into_bytes(), true)),
        Some(Earlier::Reused) => Err(ApiError::new(
            422,
            "idempotency_key_reused",
            "this Idempotency-Key was used for another request",
        )),
        // A claim left by an earlier version, or a key pruned meanwhile.
        Some(Earlier::InProgress) | None => Err(ApiError::conflict(
            "request_in_progress",
            "a request with this Idempotency-Key is still running",
        )
        .with_header("retry-after", "1")),
    }
}

/// Declares one money-moving endpoint: like [`endpoint!`](crate::endpoint), with the
/// route needing an `Idempotency-Key` and the handler run once per key in the transaction
/// that keeps its answer (see the module's documentation). `Tier(handler)` runs all of it
/// in the transaction; `Tier(prepare => handler)` reads before it.
#[macro_export]
macro_rules! idempotent_endpoint {
    ($method:ident $path:literal, $tier:ident($prepare:path => $handler:path), $summary:literal $(, $refine:expr)? $(,)?) => {{
        $(
            #[cfg(target_arch = "wasm32")]
            $crate::contract::unused_refinement($refine);
        )?
        $crate::routing::Route {
            method: stringify!($method),
            pattern: $path,
            endpoint: $crate::spin::http::Handler::$tier(|ctx| {
                $crate::spin::idempotent::run_prepared(ctx, $prepare, $handler)
            }),
            idempotent: true,
            #[cfg(not(target_arch = "wasm32"))]
            operation: Some(|| {
                $crate::spin::idempotent::describe_prepared(
                    concat!(stringify!($method), " ", $path),
                    $summary,
                    $prepare,
                    $handler,
                )
                $( .then($refine) )?
            }),
        }
    }};
    ($method:ident $path:literal, $tier:ident($handler:path), $summary:literal $(, $refine:expr)? $(,)?) => {{
        $(
            #[cfg(target_arch = "wasm32")]
            $crate::contract::unused_refinement($refine);
        )?
        $crate::routing::Route {
            method: stringify!($method),
            pattern: $path,
            endpoint: $crate::spin::http::Handler::$tier(|ctx| {
                $crate::spin::idempotent::run(ctx, $handler)
            }),
            idempotent: true,
            #[cfg(not(target_arch = "wasm32"))]
            operation: Some(|| {
                $crate::spin::idempotent::describe(
                    concat!(stringify!($method), " ", $path),
                    $summary,
                    $handler,
                )
                $( .then($refine) )?
            }),
        }
    }};
}
