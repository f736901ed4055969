//! `Idempotency-Key` on every money-moving POST: the first request with a key runs, and
//! its answer (status and body) is kept 24 hours with a hash of the request; the same key
//! and request replays that answer, the same key with another request is 422
//! `idempotency_key_reused`, and a duplicate that arrives while the first still runs
//! waits for it and replays its answer. Keys belong to the tenant and the caller (a user,
//! or the tenant's server), so nobody can replay another's answer.

use domain::ApiError;
use domain::problem::PROBLEM_CONTENT_TYPE;
use edge::realtime::Event;
use edge::spin::http::{Call, Reply};
use serde_json::Value as Json;
use spin_sdk::http::Response;
use store::Db;
use store::idempotency::{self, Earlier};

/// What a money operation answers once its transaction committed: the status and body,
/// and the real-time event to publish (best effort, after the commit).
pub struct Outcome {
    pub status: u16,
    pub body: Json,
    pub event: Option<(String, Event)>,
}

impl Outcome {
    pub fn new(status: u16, body: Json) -> Self {
        Outcome {
            status,
            body,
            event: None,
        }
    }
}

/// The request's key, or a 400 (the route table checks it first, before credentials).
fn key_of(call: &Call) -> Result<String, ApiError> {
    call.idempotency_key()
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
pub fn run(
    call: &Call,
    db: &Db,
    client_id: &str,
    caller: &str,
    work: impl FnOnce(&Db) -> Result<Outcome, ApiError>,
) -> Reply {
    let key = key_of(call)?;
    let hash = request_hash(call);
    let now = call.now();
    let remember = |db: &Db, status: u16, body: &str| {
        idempotency::remember(db, client_id, caller, &key, &hash, status, body, now)
    };
    let result = db.transaction(|tx| {
        let outcome = work(tx)?;
        let body = outcome.body.to_string();
        if !remember(tx, outcome.status, &body)? {
            return Err(ApiError::conflict(ANSWERED_BEFORE, "answered before"));
        }
        Ok((outcome, body))
    });
    match result {
        Ok((outcome, body)) => {
            if let Some((stream_id, event)) = outcome.event {
                edge::spin::realtime::publish(&stream_id, event);
            }
            Ok(answer(outcome.status, body.into_bytes(), false))
        }
        Err(err) if err.code == ANSWERED_BEFORE => replay(db, client_id, caller, &key, &hash, now),
        Err(err) => refused(call, db, client_id, caller, err),
    }
}

/// Answers a request whose work was refused, before or inside its transaction: a refusal
/// (4xx) is stored as the key's answer, except a rate limit (429), which passes; when the
/// key holds an answer already, that answer is replayed instead (a retry of a request that
/// succeeded is answered as it was, whatever changed since). A server error stores nothing.
pub fn refused(call: &Call, db: &Db, client_id: &str, caller: &str, err: ApiError) -> Reply {
    if err.status >= 500 || err.status == 429 {
        return Err(err);
    }
    let key = key_of(call)?;
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
