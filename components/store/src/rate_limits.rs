//! Sliding-window rate limits kept in SQL, so every instance of every component sees the
//! same counts.
//!
//! Every check records first and counts after, so concurrent requests cannot all pass a
//! check that none of them has been counted in yet: of `n` racing requests, the one whose
//! event is stored `k`-th counts at least `k` events.

use super::{Db, Value};
use domain::ApiError;

/// How long events are kept at most (the longest window in use is shorter).
const KEEP_SECS: i64 = 86_400;

/// Counts events of `bucket` in the last `window_secs`; without recording anything.
pub fn recent(db: &Db, bucket: &str, window_secs: i64, now: i64) -> Result<i64, ApiError> {
    db.count(
        "SELECT COUNT(*) FROM rate_events WHERE bucket = ? AND at > ?",
        &[bucket.into(), Value::Int(now - window_secs)],
    )
}

/// Records one event of `bucket` at `now`; answers its id.
fn record(db: &Db, bucket: &str, now: i64) -> Result<String, ApiError> {
    let id = domain::ids::random_hex(12);
    db.execute(
        "INSERT INTO rate_events (bucket, at, nonce) VALUES (?, ?, ?)",
        &[bucket.into(), Value::Int(now), id.clone().into()],
    )?;
    Ok(id)
}

fn forget(db: &Db, bucket: &str, id: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM rate_events WHERE bucket = ? AND nonce = ?",
        &[bucket.into(), id.into()],
    )?;
    Ok(())
}

/// Removes the events of `bucket` (e.g. failed logins after a success).
pub fn clear(db: &Db, bucket: &str) -> Result<(), ApiError> {
    db.execute("DELETE FROM rate_events WHERE bucket = ?", &[bucket.into()])?;
    Ok(())
}

/// Removes events older than any window (the prune job's share); answers how many.
pub fn prune(db: &Db, now: i64, batch: i64) -> Result<i64, ApiError> {
    let removed = db.query(
        "DELETE FROM rate_events WHERE nonce IN \
           (SELECT nonce FROM rate_events WHERE at <= ? LIMIT ?) RETURNING nonce",
        &[Value::Int(now - KEEP_SECS), Value::Int(batch)],
    )?;
    Ok(removed.len() as i64)
}

/// Allows at most `max` events of `bucket` per `window_secs`: records this one, or answers
/// 429 with `Retry-After` (seconds until the oldest counted event leaves the window). A
/// refused event is not counted.
pub fn hit(db: &Db, bucket: &str, max: i64, window_secs: i64, now: i64) -> Result<(), ApiError> {
    let id = record(db, bucket, now)?;
    if recent(db, bucket, window_secs, now)? <= max {
        return Ok(());
    }
    forget(db, bucket, &id)?;
    Err(too_many(db, bucket, max, window_secs, now)?)
}

/// Counts an attempt of `bucket` (e.g. a login), refused or not: answers 429 once more than
/// `max` attempts were made in the window. [`clear`] forgets them after a success.
pub fn attempt(
    db: &Db,
    bucket: &str,
    max: i64,
    window_secs: i64,
    now: i64,
) -> Result<(), ApiError> {
    record(db, bucket, now)?;
    if recent(db, bucket, window_secs, now)? <= max {
        return Ok(());
    }
    Err(too_many(db, bucket, max, window_secs, now)?)
}

/// Answers 429 when `bucket` already has `max` events in the window (records nothing).
pub fn check(db: &Db, bucket: &str, max: i64, window_secs: i64, now: i64) -> Result<(), ApiError> {
    if recent(db, bucket, window_secs, now)? < max {
        return Ok(());
    }
    Err(too_many(db, bucket, max, window_secs, now)?)
}

fn too_many(
    db: &Db,
    bucket: &str,
    max: i64,
    window_secs: i64,
    now: i64,
) -> Result<ApiError, ApiError> {
    let oldest = db.count(
        "SELECT MIN(at) FROM (SELECT at FROM rate_events WHERE bucket = ? AND at > ? ORDER BY at DESC LIMIT ?) recent",
        &[bucket.into(), Value::Int(now - window_secs), Value::Int(max)],
    )?;
    let retry_after = (oldest + window_secs - now).max(1);
    Ok(
        ApiError::new(429, "rate_limited", "too many requests; try again later")
            .with_header("retry-after", retry_after.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn refused_hits_are_not_counted_and_attempts_are() {
        let db = testing::db();
        for t in 0..3 {
            hit(&db, "chat:u", 3, 10, 100 + t).unwrap();
        }
        let refused = hit(&db, "chat:u", 3, 10, 103).unwrap_err();
        assert_eq!(refused.status, 429);
        assert_eq!(recent(&db, "chat:u", 10, 103).unwrap(), 3);
        // The oldest counted event leaves the window at 110.
        assert!(
            refused
                .headers
                .contains(&("retry-after".into(), "7".into()))
        );
        assert!(hit(&db, "chat:u", 3, 10, 110).is_ok());

        for t in 0..2 {
            attempt(&db, "login:x", 2, 60, 200 + t).unwrap();
        }
        assert_eq!(attempt(&db, "login:x", 2, 60, 202).unwrap_err().status, 429);
        assert_eq!(recent(&db, "login:x", 60, 202).unwrap(), 3);
        clear(&db, "login:x").unwrap();
        assert!(attempt(&db, "login:x", 2, 60, 203).is_ok());
        assert_eq!(prune(&db, 200 + KEEP_SECS, 100).unwrap(), 4);
    }
}
