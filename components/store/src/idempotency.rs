//! Idempotency keys of money-moving requests: per tenant and caller, the hash of the first
//! request and its answer (status and body), kept for 24 hours.

use super::{Db, Value};
use domain::ApiError;

/// How long a key is remembered.
pub const TTL_SECS: i64 = 24 * 60 * 60;
/// How long a key stored without an answer holds it. Keys are now stored with their
/// answer, in the transaction of the work they answer; rows without one were claims
/// written before the work by earlier versions, and are free after this lease.
pub const CLAIM_LEASE_SECS: i64 = 120;

/// What a key held when its request came again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Earlier {
    /// The same request was answered: replay this.
    Replay { status: u16, body: String },
    /// The key was used for another request.
    Reused,
    /// A claim without an answer, within its lease.
    InProgress,
}

/// Stores the answer to the first request with `key` (hashing to `request_hash`), inside
/// the transaction of the work it answers so that the two commit together. Answers false,
/// writing nothing, when the key already holds a live answer: the caller rolls back and
/// replays [`earlier`]. On PostgreSQL a concurrent duplicate's insert waits here until the
/// first transaction ends, so a key is answered once.
#[allow(clippy::too_many_arguments)]
pub fn remember(
    db: &Db,
    client_id: &str,
    caller: &str,
    key: &str,
    request_hash: &str,
    status: u16,
    body: &str,
    now: i64,
) -> Result<bool, ApiError> {
    // A key older than the TTL, or a claim without an answer past its lease, is free
    // again: the upsert takes it over in the same write.
    let stored = db.query(
        "INSERT INTO idempotency_keys (client_id, caller, idem_key, request_hash, created_at, status, body) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (client_id, caller, idem_key) DO UPDATE \
           SET request_hash = excluded.request_hash, created_at = excluded.created_at, \
               status = excluded.status, body = excluded.body \
           WHERE idempotency_keys.created_at < ?8 \
              OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at < ?9) \
         RETURNING idem_key",
        &[
            client_id.into(),
            caller.into(),
            key.into(),
            request_hash.into(),
            Value::Int(now),
            Value::Int(status.into()),
            body.into(),
            Value::Int(now - TTL_SECS),
            Value::Int(now - CLAIM_LEASE_SECS),
        ],
    )?;
    Ok(!stored.is_empty())
}

/// What `key` holds for a request hashing to `request_hash`: nothing (None) when it is
/// unknown or expired.
pub fn earlier(
    db: &Db,
    client_id: &str,
    caller: &str,
    key: &str,
    request_hash: &str,
    now: i64,
) -> Result<Option<Earlier>, ApiError> {
    let Some(row) = db.query_one(
        "SELECT request_hash, status, body, created_at FROM idempotency_keys \
         WHERE client_id = ? AND caller = ? AND idem_key = ?",
        &[client_id.into(), caller.into(), key.into()],
    )?
    else {
        return Ok(None);
    };
    let created_at = row.int("created_at");
    let status = row.opt_int("status");
    let live = match status {
        Some(_) => created_at >= now - TTL_SECS,
        None => created_at >= now - CLAIM_LEASE_SECS,
    };
    if !live {
        return Ok(None);
    }
    if row.text("request_hash") != request_hash {
        return Ok(Some(Earlier::Reused));
    }
    Ok(Some(match status {
        Some(status) => Earlier::Replay {
            status: u16::try_from(status).unwrap_or(500),
            body: row.text("body"),
        },
        None => Earlier::InProgress,
    }))
}

/// Removes up to `batch` keys older than the TTL; answers how many.
pub fn prune(db: &Db, now: i64, batch: i64) -> Result<i64, ApiError> {
    let removed = db.query(
        "DELETE FROM idempotency_keys WHERE (client_id, caller, idem_key) IN (\
           SELECT k.client_id, k.caller, k.idem_key FROM (\
             SELECT client_id, caller, idem_key FROM idempotency_keys WHERE created_at < ?1 LIMIT ?2) k) \
         RETURNING idem_key",
        &[Value::Int(now - TTL_SECS), Value::Int(batch)],
    )?;
    Ok(removed.len() as i64)
}

/// How many keys are older than the TTL.
pub fn expired(db: &Db, now: i64) -> Result<i64, ApiError> {
    db.count(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM idempotency_keys WHERE created_at < ?",
        &[Value::Int(now - TTL_SECS)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn store(db: &Db, caller: &str, hash: &str, status: u16, now: i64) -> bool {
        remember(db, "c1", caller, "k", hash, status, "{\"ok\":1}", now).unwrap()
    }

    #[test]
    fn a_key_is_answered_once_replays_its_answer_and_refuses_another_request() {
        let db = testing::db();
        assert_eq!(earlier(&db, "c1", "u1", "k", "h1", 100).unwrap(), None);
        assert!(store(&db, "u1", "h1", 201, 100));
        assert!(!store(&db, "u1", "h1", 201, 101), "a key is answered once");
        assert_eq!(
            earlier(&db, "c1", "u1", "k", "h1", 102).unwrap(),
            Some(Earlier::Replay {
                status: 201,
                body: "{\"ok\":1}".into()
            })
        );
        assert_eq!(
            earlier(&db, "c1", "u1", "k", "h2", 103).unwrap(),
            Some(Earlier::Reused)
        );
        // Another caller's or tenant's key of the same name is its own.
        assert!(store(&db, "u2", "h2", 201, 104));
        assert!(remember(&db, "c2", "u1", "k", "h2", 201, "{}", 104).unwrap());
        // After 24 hours the key is new again, and pruning removes what expired.
        assert_eq!(
            earlier(&db, "c1", "u1", "k", "h2", 100 + TTL_SECS + 1).unwrap(),
            None
        );
        assert!(store(&db, "u1", "h2", 409, 100 + TTL_SECS + 1));
        assert_eq!(
            earlier(&db, "c1", "u1", "k", "h2", 100 + TTL_SECS + 2).unwrap(),
            Some(Earlier::Replay {
                status: 409,
                body: "{\"ok\":1}".into()
            })
        );
        assert_eq!(expired(&db, 104 + TTL_SECS + 1).unwrap(), 2);
        assert_eq!(prune(&db, 104 + TTL_SECS + 1, 1).unwrap(), 1);
        assert_eq!(prune(&db, 104 + TTL_SECS + 1, 10).unwrap(), 1);
        assert_eq!(expired(&db, 104 + TTL_SECS + 1).unwrap(), 0);
    }

    #[test]
    fn a_claim_left_without_an_answer_holds_its_key_only_for_the_lease() {
        let db = testing::db();
        db.execute(
            "INSERT INTO idempotency_keys (client_id, caller, idem_key, request_hash, created_at) \
             VALUES ('c1', 'u1', 'k', 'h1', 100)",
            &[],
        )
        .unwrap();
        let within = 100 + CLAIM_LEASE_SECS;
        assert_eq!(
            earlier(&db, "c1", "u1", "k", "h1", within).unwrap(),
            Some(Earlier::InProgress)
        );
        assert!(!store(&db, "u1", "h1", 201, within));
        assert_eq!(
            earlier(&db, "c1", "u1", "k", "h1", within + 1).unwrap(),
            None
        );
        assert!(store(&db, "u1", "h1", 201, within + 1));
    }
}
