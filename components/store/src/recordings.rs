//! Recordings: each broadcast's recording settings, the tenant's default, and the
//! recordings themselves (one row per egress run, moved through its states by guarded
//! updates, so two webhooks racing each other cannot both move it).

use super::broadcasts::Broadcast;
use super::{Db, Row, Value};
use domain::ApiError;
use domain::recording::{Output, Settings, Status};
use std::collections::HashMap;

fn settings_of(row: &Row) -> Settings {
    Settings {
        enabled: row.bool("enabled"),
        layout: row.text("layout"),
        output: Output::parse(&row.text("output")).unwrap_or(Output::Hls),
    }
}

/// The tenant's default for new broadcasts (off when never set).
pub fn tenant_default(db: &Db, client_id: &str) -> Result<Settings, ApiError> {
    Ok(db
        .query_one(
            "SELECT enabled, layout, output FROM recording_defaults WHERE client_id = ?",
            &[client_id.into()],
        )?
        .map(|row| settings_of(&row))
        .unwrap_or_default())
}

pub fn save_tenant_default(
    db: &Db,
    client_id: &str,
    s: &Settings,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO recording_defaults (client_id, enabled, layout, output, updated_at) VALUES (?, ?, ?, ?, ?) \
         ON CONFLICT (client_id) DO UPDATE SET enabled = excluded.enabled, layout = excluded.layout, \
           output = excluded.output, updated_at = excluded.updated_at",
        &[
            client_id.into(),
            s.enabled.into(),
            s.layout.clone().into(),
            s.output.as_str().into(),
            Value::Int(now),
        ],
    )
}

/// The broadcast's settings: its own, else the tenant's default.
pub fn settings(db: &Db, b: &Broadcast) -> Result<Settings, ApiError> {
    let own = db.query_one(
        "SELECT enabled, layout, output FROM recording_settings WHERE client_id = ? AND broadcast_id = ?",
        &[b.client_id.clone().into(), b.id.clone().into()],
    )?;
    match own {
        Some(row) => Ok(settings_of(&row)),
        None => tenant_default(db, &b.client_id),
    }
}

/// The settings of several broadcasts of one tenant (the default for those without).
pub fn settings_of_many(
    db: &Db,
    client_id: &str,
    broadcast_ids: &[&str],
) -> Result<HashMap<String, Settings>, ApiError> {
    let default = tenant_default(db, client_id)?;
    let mut found: HashMap<String, Settings> = broadcast_ids
        .iter()
        .map(|id| (id.to_string(), default.clone()))
        .collect();
    if broadcast_ids.is_empty() {
        return Ok(found);
    }
    let placeholders = vec!["?"; broadcast_ids.len()].join(", ");
    let mut params: Vec<Value> = vec![client_id.into()];
    params.extend(broadcast_ids.iter().map(|id| Value::from(*id)));
    let rows = db.query(
        &format!(
            "SELECT broadcast_id, enabled, layout, output FROM recording_settings \
             WHERE client_id = ? AND broadcast_id IN ({placeholders})"
        ),
        &params,
    )?;
    for row in rows {
        found.insert(row.text("broadcast_id"), settings_of(&row));
    }
    Ok(found)
}

pub fn save_settings(db: &Db, b: &Broadcast, s: &Settings, now: i64) -> Result<(), ApiError> {
    // An upsert of the broadcast's own row: only a fault fails it.
    db.insert_soon(
        "INSERT INTO recording_settings (broadcast_id, client_id, enabled, layout, output, updated_at) VALUES (?, ?, ?, ?, ?, ?) \
         ON CONFLICT (broadcast_id) DO UPDATE SET enabled = excluded.enabled, layout = excluded.layout, \
           output = excluded.output, updated_at = excluded.updated_at",
        &[
            b.id.clone().into(),
            b.client_id.clone().into(),
            s.enabled.into(),
            s.layout.clone().into(),
            s.output.as_str().into(),
            Value::Int(now),
        ],
    )
}

/// A stored recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub id: String,
    pub client_id: String,
    pub broadcast_id: String,
    pub egress_id: Option<String>,
    pub status: Status,
    pub layout: String,
    pub output: Output,
    pub object_key: String,
    pub attempts: i64,
    pub url: Option<String>,
    pub duration_ms: Option<i64>,
    pub size_bytes: Option<i64>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
}

fn from_row(row: &Row) -> Recording {
    Recording {
        id: row.text("id"),
        client_id: row.text("client_id"),
        broadcast_id: row.text("broadcast_id"),
        egress_id: row.opt_text("egress_id"),
        status: Status::parse(&row.text("status")).unwrap_or(Status::Failed),
        layout: row.text("layout"),
        output: Output::parse(&row.text("output")).unwrap_or(Output::Hls),
        object_key: row.text("object_key"),
        attempts: row.int("attempts"),
        url: row.opt_text("url"),
        duration_ms: row.opt_int("duration_ms"),
        size_bytes: row.opt_int("size_bytes"),
        error: row.opt_text("error"),
        created_at: row.int("created_at"),
        started_at: row.opt_int("started_at"),
        ended_at: row.opt_int("ended_at"),
    }
}

/// What a new recording is.
pub struct NewRecording<'a> {
    pub id: &'a str,
    pub layout: &'a str,
    pub output: Output,
    pub object_key: &'a str,
    /// The request's clock in milliseconds: orders the broadcast's recordings.
    pub created_ms: i64,
}

/// The broadcast's recording that has not finished (starting, active or ending), if any.
pub fn in_progress(db: &Db, b: &Broadcast) -> Result<Option<Recording>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM recordings WHERE client_id = ? AND broadcast_id = ? \
             AND status IN ('starting', 'active', 'ending') ORDER BY created_ms DESC LIMIT 1",
            &[b.client_id.clone().into(), b.id.clone().into()],
        )?
        .map(|row| from_row(&row)))
}

/// Stores a new `starting` recording, unless one is in progress already (`None` then).
/// Run it in a transaction that holds the broadcast's lock.
pub fn create(
    db: &Db,
    b: &Broadcast,
    new: &NewRecording<'_>,
    now: i64,
) -> Result<Option<Recording>, ApiError> {
    if in_progress(db, b)?.is_some() {
        return Ok(None);
    }
    db.execute(
        "INSERT INTO recordings (id, client_id, broadcast_id, status, layout, output, object_key, attempts, created_at, created_ms, updated_at) \
         VALUES (?, ?, ?, 'starting', ?, ?, ?, 1, ?, ?, ?)",
        &[
            new.id.into(),
            b.client_id.clone().into(),
            b.id.clone().into(),
            new.layout.into(),
            new.output.as_str().into(),
            new.object_key.into(),
            Value::Int(now),
            Value::Int(new.created_ms),
            Value::Int(now),
        ],
    )?;
    by_id(db, b, new.id)
}

/// The broadcast's recording `id`.
pub fn by_id(db: &Db, b: &Broadcast, id: &str) -> Result<Option<Recording>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM recordings WHERE client_id = ? AND broadcast_id = ? AND id = ?",
            &[b.client_id.clone().into(), b.id.clone().into(), id.into()],
        )?
        .map(|row| from_row(&row)))
}

/// The recording an egress runs for (of any tenant: the SFU's webhook names the egress).
pub fn by_egress(db: &Db, egress_id: &str) -> Result<Option<Recording>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM recordings WHERE egress_id = ?",
            &[egress_id.into()],
        )?
        .map(|row| from_row(&row)))
}

/// The broadcast's recordings, newest first; only the ready ones with `ready_only`.
pub fn list(db: &Db, b: &Broadcast, ready_only: bool) -> Result<Vec<Recording>, ApiError> {
    let filter = if ready_only {
        " AND status = 'ready'"
    } else {
        ""
    };
    let rows = db.query(
        &format!(
            "SELECT * FROM recordings WHERE client_id = ? AND broadcast_id = ?{filter} \
             ORDER BY created_ms DESC LIMIT 100"
        ),
        &[b.client_id.clone().into(), b.id.clone().into()],
    )?;
    Ok(rows.iter().map(from_row).collect())
}

/// The broadcast's newest ready recording.
pub fn latest_ready(db: &Db, b: &Broadcast) -> Result<Option<Recording>, ApiError> {
    Ok(list(db, b, true)?.into_iter().next())
}

/// The newest ready recording of each of the tenant's `broadcast_ids` that has one.
pub fn latest_ready_of_many(
    db: &Db,
    client_id: &str,
    broadcast_ids: &[&str],
) -> Result<std::collections::HashMap<String, Recording>, ApiError> {
    let mut newest = std::collections::HashMap::new();
    if broadcast_ids.is_empty() {
        return Ok(newest);
    }
    let placeholders = vec!["?"; broadcast_ids.len()].join(", ");
    let mut params: Vec<Value> = vec![client_id.into()];
    params.extend(broadcast_ids.iter().map(|id| Value::from(*id)));
    let rows = db.query(
        &format!(
            "SELECT * FROM recordings WHERE client_id = ? AND broadcast_id IN ({placeholders}) \
             AND status = 'ready' ORDER BY created_ms DESC"
        ),
        &params,
    )?;
    for r in rows.iter().map(from_row) {
        newest.entry(r.broadcast_id.clone()).or_insert(r);
    }
    Ok(newest)
}

/// Records the egress a start answered with; `false` when the recording was meanwhile
/// failed or given another egress.
pub fn set_egress(db: &Db, r: &Recording, egress_id: &str, now: i64) -> Result<bool, ApiError> {
    let rows = db.query(
        "UPDATE recordings SET egress_id = ?, updated_at = ? \
         WHERE id = ? AND status = 'starting' AND egress_id IS NULL AND attempts = ? RETURNING id",
        &[
            egress_id.into(),
            Value::Int(now),
            r.id.clone().into(),
            Value::Int(r.attempts),
        ],
    )?;
    Ok(!rows.is_empty())
}

/// Gives a recording whose egress failed to start a second attempt: no egress, one more
/// attempt. `false` when something else moved it first.
pub fn begin_retry(db: &Db, r: &Recording, now: i64) -> Result<Option<Recording>, ApiError> {
    let rows = db.query(
        "UPDATE recordings SET egress_id = NULL, attempts = attempts + 1, updated_at = ? \
         WHERE id = ? AND status = 'starting' AND attempts = ? RETURNING *",
        &[Value::Int(now), r.id.clone().into(), Value::Int(r.attempts)],
    )?;
    Ok(rows.first().map(from_row))
}

/// What a move records besides the status.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub url: Option<String>,
    pub duration_ms: Option<i64>,
    pub size_bytes: Option<i64>,
    pub error: Option<String>,
}

/// Moves a recording from the status it was read in to `to` (with the outcome's fields
/// when given); answers the moved recording, or `None` when it had moved meanwhile.
pub fn advance(
    db: &Db,
    r: &Recording,
    to: Status,
    outcome: &Outcome,
    now: i64,
) -> Result<Option<Recording>, ApiError> {
    let started = (to == Status::Active).then_some(now);
    let ended = to.is_final().then_some(now);
    let rows = db.query(
        "UPDATE recordings SET status = ?, updated_at = ?, \
           started_at = COALESCE(started_at, ?), ended_at = COALESCE(?, ended_at), \
           url = COALESCE(?, url), duration_ms = COALESCE(?, duration_ms), \
           size_bytes = COALESCE(?, size_bytes), error = COALESCE(?, error) \
         WHERE id = ? AND status = ? AND attempts = ? RETURNING *",
        &[
            to.as_str().into(),
            Value::Int(now),
            started.into(),
            ended.into(),
            outcome.url.clone().into(),
            outcome.duration_ms.into(),
            outcome.size_bytes.into(),
            outcome.error.clone().into(),
            r.id.clone().into(),
            r.status.as_str().into(),
            Value::Int(r.attempts),
        ],
    )?;
    Ok(rows.first().map(from_row))
}

/// Removes a finished recording's record (not its files); `false` when there is no such
/// finished recording.
pub fn delete(db: &Db, b: &Broadcast, id: &str) -> Result<bool, ApiError> {
    let rows = db.query(
        "DELETE FROM recordings WHERE client_id = ? AND broadcast_id = ? AND id = ? \
         AND status IN ('ready', 'failed') RETURNING id",
        &[b.client_id.clone().into(), b.id.clone().into(), id.into()],
    )?;
    Ok(!rows.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broadcasts;
    use crate::testing;

    fn broadcast(db: &Db, client: &str) -> Broadcast {
        let new = testing::new_broadcast();
        broadcasts::insert(db, client, Some("u1"), &new, 1000).unwrap()
    }

    fn new(id: &str, created_ms: i64) -> NewRecording<'_> {
        NewRecording {
            id,
            layout: "default",
            output: Output::Hls,
            object_key: "recordings/x/index.m3u8",
            created_ms,
        }
    }

    #[test]
    fn settings_fall_back_to_the_tenant_default() {
        let db = testing::db();
        let b = broadcast(&db, "c1");
        assert_eq!(settings(&db, &b).unwrap(), Settings::default());
        let on = Settings {
            enabled: true,
            layout: "grid3x3".into(),
            output: Output::Mp4,
        };
        save_tenant_default(&db, "c1", &on, 5).unwrap();
        assert_eq!(settings(&db, &b).unwrap(), on);
        assert_eq!(tenant_default(&db, "c2").unwrap(), Settings::default());
        let off = Settings::default();
        save_settings(&db, &b, &off, 6).unwrap();
        assert_eq!(settings(&db, &b).unwrap(), off);
        let many = settings_of_many(&db, "c1", &[b.id.as_str(), "other"]).unwrap();
        assert_eq!(many[&b.id], off);
        assert_eq!(many["other"], on);
    }

    #[test]
    fn a_recording_moves_through_its_states_once() {
        let db = testing::db();
        let b = broadcast(&db, "c1");
        let r = create(&db, &b, &new("r1", 10_000), 10).unwrap().unwrap();
        assert!(
            create(&db, &b, &new("r2", 10_001), 10).unwrap().is_none(),
            "one at a time"
        );
        assert!(set_egress(&db, &r, "EG_1", 12).unwrap());
        assert!(!set_egress(&db, &r, "EG_X", 12).unwrap(), "already has one");
        let r = by_egress(&db, "EG_1").unwrap().unwrap();
        let active = advance(&db, &r, Status::Active, &Outcome::default(), 13)
            .unwrap()
            .unwrap();
        assert_eq!(active.started_at, Some(13));
        assert!(
            advance(&db, &r, Status::Active, &Outcome::default(), 14)
                .unwrap()
                .is_none(),
            "a stale read does not move it again"
        );
        let done = Outcome {
            url: Some("https://cdn/x".into()),
            duration_ms: Some(5000),
            size_bytes: Some(42),
            error: None,
        };
        let ready = advance(&db, &active, Status::Ready, &done, 20)
            .unwrap()
            .unwrap();
        assert_eq!(ready.url.as_deref(), Some("https://cdn/x"));
        assert_eq!(ready.ended_at, Some(20));
        assert_eq!(
            latest_ready(&db, &b).unwrap().map(|r| r.id),
            Some("r1".into())
        );
        assert!(in_progress(&db, &b).unwrap().is_none());
        assert!(create(&db, &b, &new("r2", 21_000), 21).unwrap().is_some());
        assert!(!delete(&db, &b, "r2").unwrap(), "in progress: kept");
        assert!(delete(&db, &b, "r1").unwrap());
        assert!(list(&db, &b, true).unwrap().is_empty());
    }

    #[test]
    fn a_retry_takes_a_fresh_egress() {
        let db = testing::db();
        let b = broadcast(&db, "c1");
        let r = create(&db, &b, &new("r1", 10_000), 10).unwrap().unwrap();
        assert!(set_egress(&db, &r, "EG_1", 11).unwrap());
        let r = by_egress(&db, "EG_1").unwrap().unwrap();
        let retried = begin_retry(&db, &r, 12).unwrap().unwrap();
        assert_eq!(retried.attempts, 2);
        assert!(begin_retry(&db, &r, 12).unwrap().is_none(), "once");
        assert!(!set_egress(&db, &r, "EG_2", 13).unwrap(), "old attempt");
        assert!(set_egress(&db, &retried, "EG_2", 13).unwrap());
        assert!(by_egress(&db, "EG_1").unwrap().is_none());
        let other = broadcast(&db, "c2");
        assert!(by_id(&db, &other, "r1").unwrap().is_none(), "per tenant");
    }
}
