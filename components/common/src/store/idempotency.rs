//! Idempotency keys of money-moving requests: per tenant and caller, the hash of the first
//! request and, once it is done, its answer (status and body), kept for 24 hours.

use super::{Db, Value};
use crate::ApiError;

/// How long a key is remembered.
pub const TTL_SECS: i64 = 24 * 60 * 60;
/// How long a claim without an answer holds its key. A request that claimed a key and
/// then lost its database (or its instance) before it could release it leaves such a
/// claim; after this, far beyond any request's deadline, its work certainly did not
/// commit (the answer commits with it), so a retry takes the key over and runs.
pub const CLAIM_LEASE_SECS: i64 = 120;

/// What a key's first use found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is new: the request runs (and must be completed or released).
    Fresh,
    /// The same request was answered before: replay this.
    Replay { status: u16, body: String },
    /// The key was used for another request.
    Reused,
    /// The same request is running now.
    InProgress,
}

/// Claims `key` for a request hashing to `request_hash` (a committed write of its own, so
/// a concurrent duplicate sees it at once).
pub fn claim(
    db: &Db,
    client_id: &str,
    caller: &str,
    key: &str,
    request_hash: &str,
    now: i64,
) -> Result<Claim, ApiError> {
    let scope: [Value; 3] = [client_id.into(), caller.into(), key.into()];
    // A key older than the TTL, or an abandoned claim past its lease, is free again: the
    // upsert takes it over in the same write.
    let inserted = db.query(
        "INSERT INTO idempotency_keys (client_id, caller, idem_key, request_hash, created_at) \
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (client_id, caller, idem_key) DO UPDATE \
           SET request_hash = excluded.request_hash, created_at = excluded.created_at, status = NULL, body = NULL \
           WHERE idempotency_keys.created_at < ? \
              OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at < ?) \
         RETURNING idem_key",
        &[
            scope[0].clone(),
            scope[1].clone(),
            scope[2].clone(),
            request_hash.into(),
            Value::Int(now),
            Value::Int(now - TTL_SECS),
            Value::Int(now - CLAIM_LEASE_SECS),
        ],
    )?;
    if !inserted.is_empty() {
        return Ok(Claim::Fresh);
    }
    let Some(row) = db.query_one(
        "SELECT request_hash, status, body FROM idempotency_keys WHERE client_id = ? AND caller = ? AND idem_key = ?",
        &scope,
    )?
    else {
        // Released between our insert and read: the caller may simply retry.
        return Ok(Claim::InProgress);
    };
    if row.text("request_hash") != request_hash {
        return Ok(Claim::Reused);
    }
    Ok(match row.opt_int("status") {
        Some(status) => Claim::Replay {
            status: u16::try_from(status).unwrap_or(500),
            body: row.text("body"),
        },
        None => Claim::InProgress,
    })
}

/// Stores the answer of a claimed key (inside the request's transaction when it succeeded,
/// so the answer commits with the money it reports).
pub fn complete(
    db: &Db,
    client_id: &str,
    caller: &str,
    key: &str,
    status: u16,
    body: &str,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE idempotency_keys SET status = ?, body = ? WHERE client_id = ? AND caller = ? AND idem_key = ?",
        &[
            Value::Int(status.into()),
            body.into(),
            client_id.into(),
            caller.into(),
            key.into(),
        ],
    )
}

/// Forgets a claimed key whose request failed without an answer worth replaying.
pub fn release(db: &Db, client_id: &str, caller: &str, key: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM idempotency_keys WHERE client_id = ? AND caller = ? AND idem_key = ? AND status IS NULL",
        &[client_id.into(), caller.into(), key.into()],
    )
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
    use crate::store::testing;

    #[test]
    fn a_key_runs_once_replays_its_answer_and_refuses_another_request() {
        let db = testing::db();
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", 100).unwrap(),
            Claim::Fresh
        );
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", 101).unwrap(),
            Claim::InProgress
        );
        complete(&db, "c1", "u1", "k", 201, "{\"ok\":1}").unwrap();
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", 102).unwrap(),
            Claim::Replay {
                status: 201,
                body: "{\"ok\":1}".into()
            }
        );
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h2", 103).unwrap(),
            Claim::Reused
        );
        // Another caller's or tenant's key of the same name is its own.
        assert_eq!(
            claim(&db, "c1", "u2", "k", "h2", 104).unwrap(),
            Claim::Fresh
        );
        assert_eq!(
            claim(&db, "c2", "u1", "k", "h2", 104).unwrap(),
            Claim::Fresh
        );
        // After 24 hours the key is new again, and pruning removes what expired.
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h2", 100 + TTL_SECS + 1).unwrap(),
            Claim::Fresh
        );
        // ... and the old answer is gone with it.
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h2", 100 + TTL_SECS + 2).unwrap(),
            Claim::InProgress
        );
        assert_eq!(expired(&db, 104 + TTL_SECS + 1).unwrap(), 2);
        assert_eq!(prune(&db, 104 + TTL_SECS + 1, 1).unwrap(), 1);
        assert_eq!(prune(&db, 104 + TTL_SECS + 1, 10).unwrap(), 1);
        assert_eq!(expired(&db, 104 + TTL_SECS + 1).unwrap(), 0);
    }

    #[test]
    fn a_released_key_may_run_again() {
        let db = testing::db();
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", 100).unwrap(),
            Claim::Fresh
        );
        release(&db, "c1", "u1", "k").unwrap();
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", 101).unwrap(),
            Claim::Fresh
        );
    }

    #[test]
    fn an_abandoned_claim_holds_its_key_only_for_the_lease() {
        let db = testing::db();
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", 100).unwrap(),
            Claim::Fresh
        );
        // Never completed nor released (its request lost the database).
        let within = 100 + CLAIM_LEASE_SECS;
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", within).unwrap(),
            Claim::InProgress
        );
        assert_eq!(
            claim(&db, "c1", "u1", "k", "h1", within + 1).unwrap(),
            Claim::Fresh
        );
        // An answered key is kept for the whole TTL.
        complete(&db, "c1", "u1", "k", 201, "{}").unwrap();
        assert!(matches!(
            claim(&db, "c1", "u1", "k", "h1", within + 1000).unwrap(),
            Claim::Replay { status: 201, .. }
        ));
    }
}
