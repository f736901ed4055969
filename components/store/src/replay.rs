//! Replay keys: signatures the server tier has accepted, each accepted once while its
//! timestamp could still be valid.

use super::{Db, Value};
use domain::ApiError;

/// Records `signature` of `client_id` as seen until `expires_at`; `false` when it was seen
/// and has not expired (a replay). One statement decides, so of two concurrent uses exactly
/// one is recorded.
pub fn first_use(
    db: &Db,
    client_id: &str,
    signature: &str,
    expires_at: i64,
    now: i64,
) -> Result<bool, ApiError> {
    let fresh = db.query(
        "INSERT INTO seen_signatures (client_id, signature, expires_at) VALUES (?, ?, ?) \
         ON CONFLICT (client_id, signature) DO UPDATE SET expires_at = excluded.expires_at \
         WHERE seen_signatures.expires_at <= ? RETURNING signature",
        &[
            client_id.into(),
            signature.into(),
            Value::Int(expires_at),
            Value::Int(now),
        ],
    )?;
    Ok(!fresh.is_empty())
}

/// Forgets `signature` of `client_id` (a request refused before it did anything).
pub fn forget(db: &Db, client_id: &str, signature: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM seen_signatures WHERE client_id = ? AND signature = ?",
        &[client_id.into(), signature.into()],
    )?;
    Ok(())
}

/// Removes up to `batch` replay keys that expired by `now`; answers how many.
pub fn prune(db: &Db, now: i64, batch: i64) -> Result<i64, ApiError> {
    let removed = db.query(
        "DELETE FROM seen_signatures WHERE expires_at <= ?1 AND signature IN \
           (SELECT signature FROM seen_signatures WHERE expires_at <= ?1 LIMIT ?2) RETURNING signature",
        &[Value::Int(now), Value::Int(batch)],
    )?;
    Ok(removed.len() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn a_signature_is_accepted_once_until_it_expires() {
        let db = testing::db();
        assert!(first_use(&db, "c1", "sig", 700, 100).unwrap());
        assert!(!first_use(&db, "c1", "sig", 701, 101).unwrap());
        assert!(first_use(&db, "c2", "sig", 701, 101).unwrap(), "per tenant");
        assert!(
            first_use(&db, "c1", "sig", 1300, 700).unwrap(),
            "expired: usable again"
        );
        assert_eq!(prune(&db, 701, 10).unwrap(), 1);
        forget(&db, "c2", "sig").unwrap();
        assert!(first_use(&db, "c2", "sig", 702, 102).unwrap(), "forgotten");
    }
}
