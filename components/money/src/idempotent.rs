//! `Idempotency-Key` on every money-moving POST: the first request with a key runs, and
//! its answer (status and body) is kept 24 hours with a hash of the request; the same key
//! and request replays that answer, the same key with another request is 422
//! `idempotency_key_reused`, and a duplicate that arrives while the first still runs is
//! 409 `request_in_progress`. Keys belong to the tenant and the caller (a user, or the
//! tenant's server), so nobody can replay another's answer.

use common::ApiError;
use common::problem::PROBLEM_CONTENT_TYPE;
use common::realtime::Event;
use common::spin::http::{Call, Reply};
use common::store::Db;
use common::store::idempotency::{self, Claim};
use serde_json::Value as Json;
use spin_sdk::http::Response;

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
    common::ids::sha256_hex(&text)
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

/// Runs `work` once per key: inside one transaction that also stores the answer, so the
/// money and the answer that reports it commit together. A refusal (4xx) is kept and
/// replayed too; a server error releases the key so that a retry runs again.
pub fn run(
    call: &Call,
    client_id: &str,
    caller: &str,
    work: impl FnOnce(&Db) -> Result<Outcome, ApiError>,
) -> Reply {
    let key = key_of(call)?;
    let hash = request_hash(call);
    let db = common::spin::store::open()?;
    match idempotency::claim(&db, client_id, caller, &key, &hash, call.now())? {
        Claim::Replay { status, body } => return Ok(answer(status, body.into_bytes(), true)),
        Claim::Reused => {
            return Err(ApiError::new(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was used for another request",
            ));
        }
        Claim::InProgress => {
            return Err(ApiError::conflict(
                "request_in_progress",
                "a request with this Idempotency-Key is still running",
            )
            .with_header("retry-after", "1"));
        }
        Claim::Fresh => {}
    }
    let result = db.transaction(|tx| {
        let outcome = work(tx)?;
        let body = outcome.body.to_string();
        idempotency::complete(tx, client_id, caller, &key, outcome.status, &body)?;
        Ok((outcome, body))
    });
    match result {
        Ok((outcome, body)) => {
            if let Some((stream_id, event)) = outcome.event {
                common::spin::realtime::publish(&stream_id, event);
            }
            Ok(answer(outcome.status, body.into_bytes(), false))
        }
        // A refusal is the answer to replay, except a rate limit (429), which passes.
        Err(err) if err.status < 500 && err.status != 429 => {
            let body = err.to_json().to_string();
            idempotency::complete(&db, client_id, caller, &key, err.status, &body)?;
            Err(err)
        }
        Err(err) => {
            let _ = idempotency::release(&db, client_id, caller, &key);
            Err(err)
        }
    }
}
