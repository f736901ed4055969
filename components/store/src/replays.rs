//! Replays of broadcasts' RTMP ingest: one row per broadcast, from the end of the
//! broadcast (`processing`) to `ready` or `failed`, and `deleted` once its media is gone;
//! and the tenants' replay settings.

use super::{Db, Row, Value};
use domain::ApiError;
use std::collections::HashMap;

/// A broadcast's replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub broadcast_id: String,
    pub client_id: String,
    pub stream_id: String,
    /// `processing`, `ready`, `failed`, `deleting` (its media is to be deleted) or
    /// `deleted`.
    pub state: String,
    pub duration_ms: Option<i64>,
    pub renditions: Option<i64>,
    pub error: Option<String>,
    pub created_at: i64,
    pub ready_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub deleted_at: Option<i64>,
}

fn from_row(row: &Row) -> Replay {
    Replay {
        broadcast_id: row.text("broadcast_id"),
        client_id: row.text("client_id"),
        stream_id: row.text("stream_id"),
        state: row.text("state"),
        duration_ms: row.opt_int("duration_ms"),
        renditions: row.opt_int("renditions"),
        error: row.opt_text("error"),
        created_at: row.int("created_at"),
        ready_at: row.opt_int("ready_at"),
        expires_at: row.opt_int("expires_at"),
        deleted_at: row.opt_int("deleted_at"),
    }
}

/// The replay of the broadcast whose stream is `stream_id`, if one was started.
pub fn by_stream(db: &Db, stream_id: &str) -> Result<Option<Replay>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM replays WHERE stream_id = ?",
            &[stream_id.into()],
        )?
        .map(|row| from_row(&row)))
}

/// The replays of `broadcast_ids`, by broadcast.
pub fn of_many(db: &Db, broadcast_ids: &[&str]) -> Result<HashMap<String, Replay>, ApiError> {
    Ok(crate::rows_of_broadcasts(db, "replays", broadcast_ids)?
        .iter()
        .map(|row| {
            let replay = from_row(row);
            (replay.broadcast_id.clone(), replay)
        })
        .collect())
}

/// Records that the broadcast ended and its replay is being written; answers whether this
/// call started it (a second call finds it started).
pub fn start(
    db: &Db,
    broadcast_id: &str,
    client_id: &str,
    stream_id: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let inserted = db.query(
        "INSERT INTO replays (broadcast_id, client_id, stream_id, state, created_at) \
         VALUES (?, ?, ?, 'processing', ?) ON CONFLICT (broadcast_id) DO NOTHING \
         RETURNING broadcast_id",
        &[
            broadcast_id.into(),
            client_id.into(),
            stream_id.into(),
            Value::Int(now),
        ],
    )?;
    Ok(!inserted.is_empty())
}

/// A `processing` replay is ready: answers whether it moved (a repeated report does not).
pub fn ready(
    db: &Db,
    broadcast_id: &str,
    duration_ms: i64,
    renditions: i64,
    expires_at: Option<i64>,
    now: i64,
) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE replays SET state = 'ready', duration_ms = ?, renditions = ?, ready_at = ?, \
         expires_at = ? WHERE broadcast_id = ? AND state = 'processing' RETURNING broadcast_id",
        &[
            Value::Int(duration_ms),
            Value::Int(renditions),
            Value::Int(now),
            expires_at.map_or(Value::Null, Value::Int),
            broadcast_id.into(),
        ],
    )?;
    Ok(!moved.is_empty())
}

/// A `processing` replay failed; answers whether it moved.
pub fn failed(db: &Db, broadcast_id: &str, error: &str) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE replays SET state = 'failed', error = ? WHERE broadcast_id = ? \
         AND state = 'processing' RETURNING broadcast_id",
        &[error.into(), broadcast_id.into()],
    )?;
    Ok(!moved.is_empty())
}

/// The replay's media is gone: a replay marked for deletion is `deleted` (a failed one
/// stays `failed`, its partial media gone).
pub fn deleted(db: &Db, broadcast_id: &str, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE replays SET state = CASE WHEN state = 'failed' THEN 'failed' ELSE 'deleted' END, \
         deleted_at = ? WHERE broadcast_id = ? AND state IN ('deleting', 'failed')",
        &[Value::Int(now), broadcast_id.into()],
    )
}

/// Whether the tenant keeps replays, and for how many days (None: for ever).
pub fn settings(db: &Db, client_id: &str) -> Result<(bool, Option<i64>), ApiError> {
    Ok(db
        .query_one(
            "SELECT replay_enabled, replay_retention_days FROM sdk_clients WHERE client_id = ?",
            &[client_id.into()],
        )?
        .map_or((false, None), |row| {
            (
                row.int("replay_enabled") != 0,
                row.opt_int("replay_retention_days"),
            )
        }))
}

/// Sets the tenant's replay settings.
pub fn set_settings(
    db: &Db,
    client_id: &str,
    enabled: bool,
    retention_days: Option<i64>,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE sdk_clients SET replay_enabled = ?, replay_retention_days = ? \
         WHERE client_id = ?",
        &[
            Value::Int(i64::from(enabled)),
            retention_days.map_or(Value::Null, Value::Int),
            client_id.into(),
        ],
    )
}

/// How many hours back the tenant's viewers may rewind a live broadcast.
pub fn dvr_window_hours(db: &Db, client_id: &str) -> Result<i64, ApiError> {
    Ok(db
        .query_one(
            "SELECT dvr_window_hours FROM sdk_clients WHERE client_id = ?",
            &[client_id.into()],
        )?
        .map_or(DEFAULT_DVR_WINDOW_HOURS, |row| row.int("dvr_window_hours")))
}

/// The DVR window of a tenant that never set one.
pub const DEFAULT_DVR_WINDOW_HOURS: i64 = 4;

/// Sets how many hours back the tenant's viewers may rewind a live broadcast.
pub fn set_dvr_window_hours(db: &Db, client_id: &str, hours: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE sdk_clients SET dvr_window_hours = ? WHERE client_id = ?",
        &[Value::Int(hours), client_id.into()],
    )
}

/// Marks the broadcast's replay for deletion (the media server deletes its media).
pub fn mark_deleting(db: &Db, broadcast_id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE replays SET state = 'deleting' WHERE broadcast_id = ? \
         AND state IN ('ready', 'failed', 'processing')",
        &[broadcast_id.into()],
    )
}

/// Marks the replays of the broadcasts of `owner_id` for deletion (the user is deleted,
/// and their broadcasts with them).
pub fn mark_owner_deleting(db: &Db, client_id: &str, owner_id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE replays SET state = 'deleting' WHERE state IN ('ready', 'failed', 'processing') \
         AND broadcast_id IN (SELECT id FROM broadcasts WHERE client_id = ? AND owner_id = ?)",
        &[client_id.into(), owner_id.into()],
    )
}

/// The stream ids of up to `limit` replays whose media is to be deleted.
pub fn to_delete(db: &Db, limit: i64) -> Result<Vec<String>, ApiError> {
    Ok(db
        .query(
            "SELECT stream_id FROM replays WHERE state = 'deleting' ORDER BY created_at LIMIT ?",
            &[Value::Int(limit)],
        )?
        .iter()
        .map(|row| row.text("stream_id"))
        .collect())
}

/// Marks up to `batch` replays kept past `expires_at` for deletion; answers how many, and
/// how many more are due.
pub fn expire(db: &Db, now: i64, batch: i64) -> Result<(i64, i64), ApiError> {
    let due = db.query(
        "SELECT broadcast_id FROM replays WHERE state = 'ready' AND expires_at <= ? \
         ORDER BY expires_at LIMIT ?",
        &[Value::Int(now), Value::Int(batch)],
    )?;
    let mut done = 0;
    for row in &due {
        db.execute(
            "UPDATE replays SET state = 'deleting' WHERE broadcast_id = ? AND state = 'ready'",
            &[row.text("broadcast_id").into()],
        )?;
        done += 1;
    }
    let remaining = db
        .query_one(
            "SELECT COUNT(*) AS n FROM replays WHERE state = 'ready' AND expires_at <= ?",
            &[Value::Int(now)],
        )?
        .map_or(0, |row| row.int("n"));
    Ok((done, remaining))
}
