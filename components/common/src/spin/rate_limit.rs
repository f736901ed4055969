//! Sliding-window rate limits kept in SQL, so every instance of every component sees the
//! same counts.

use super::db::{self, Db};
use crate::ApiError;

/// Counts events of `bucket` in the last `window_secs`; without recording anything.
pub fn recent(db: &Db, bucket: &str, window_secs: i64, now: i64) -> Result<i64, ApiError> {
    db.count(
        "SELECT COUNT(*) FROM rate_events WHERE bucket = ? AND at > ?",
        &[db::text(bucket), db::int(now - window_secs)],
    )
}

/// Records one event of `bucket` at `now`.
pub fn record(db: &Db, bucket: &str, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO rate_events (bucket, at) VALUES (?, ?)",
        &[db::text(bucket), db::int(now)],
    )?;
    Ok(())
}

/// Removes the events of `bucket` (e.g. failed logins after a success).
pub fn clear(db: &Db, bucket: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM rate_events WHERE bucket = ?",
        &[db::text(bucket)],
    )?;
    Ok(())
}

/// Allows at most `max` events of `bucket` per `window_secs`: records this one, or answers
/// 429 with `Retry-After` (seconds until the oldest event in the window leaves it).
pub fn hit(db: &Db, bucket: &str, max: i64, window_secs: i64, now: i64) -> Result<(), ApiError> {
    // Old events of every bucket are dropped as we go; the table stays small.
    db.execute(
        "DELETE FROM rate_events WHERE at <= ?",
        &[db::int(now - 86_400)],
    )?;
    check(db, bucket, max, window_secs, now)?;
    record(db, bucket, now)
}

/// Answers 429 when `bucket` already has `max` events in the window.
pub fn check(db: &Db, bucket: &str, max: i64, window_secs: i64, now: i64) -> Result<(), ApiError> {
    if recent(db, bucket, window_secs, now)? < max {
        return Ok(());
    }
    let oldest = db.count(
        "SELECT MIN(at) FROM (SELECT at FROM rate_events WHERE bucket = ? AND at > ? ORDER BY at DESC LIMIT ?)",
        &[db::text(bucket), db::int(now - window_secs), db::int(max)],
    )?;
    let retry_after = (oldest + window_secs - now).max(1);
    Err(
        ApiError::new(429, "rate_limited", "too many requests; try again later")
            .with_header("retry-after", retry_after.to_string()),
    )
}
