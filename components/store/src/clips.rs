//! Clips of broadcasts (docs/replays.md#clips): one row per clip, scoped by tenant, from
//! `processing` (its HLS playlists, then its MP4, written by the media server) to `ready`
//! or `failed`, and `deleting` then `deleted` once deleted; and the tenants' viewer-clips
//! setting.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::pagination::Page;

/// A clip.
#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    pub id: String,
    pub client_id: String,
    pub broadcast_id: String,
    pub stream_id: String,
    pub title: Option<String>,
    /// Where it starts in the stream's media time, ms; none until a `lastSeconds` clip is
    /// placed by the media server.
    pub start_ms: Option<i64>,
    pub last_seconds: Option<i64>,
    /// Seconds, as asked.
    pub duration_s: i64,
    /// `processing`, `ready`, `failed`, `deleting` or `deleted`.
    pub state: String,
    pub hls_ready_at: Option<i64>,
    pub hls_duration_ms: Option<i64>,
    pub mp4_duration_ms: Option<i64>,
    pub mp4_bytes: Option<i64>,
    pub thumbnail: bool,
    pub error: Option<String>,
    /// The user who made it; none: the tenant's server.
    pub created_by: Option<String>,
    pub created_at: i64,
    pub ready_at: Option<i64>,
}

fn from_row(row: &Row) -> Clip {
    Clip {
        id: row.text("id"),
        client_id: row.text("client_id"),
        broadcast_id: row.text("broadcast_id"),
        stream_id: row.text("stream_id"),
        title: row.opt_text("title"),
        start_ms: row.opt_int("start_ms"),
        last_seconds: row.opt_int("last_seconds"),
        duration_s: row.int("duration_s"),
        state: row.text("state"),
        hls_ready_at: row.opt_int("hls_ready_at"),
        hls_duration_ms: row.opt_int("hls_duration_ms"),
        mp4_duration_ms: row.opt_int("mp4_duration_ms"),
        mp4_bytes: row.opt_int("mp4_bytes"),
        thumbnail: row.int("thumbnail") != 0,
        error: row.opt_text("error"),
        created_by: row.opt_text("created_by"),
        created_at: row.int("created_at"),
        ready_at: row.opt_int("ready_at"),
    }
}

/// A clip to store.
#[derive(Debug, Clone)]
pub struct NewClip<'a> {
    pub id: &'a str,
    pub client_id: &'a str,
    pub broadcast_id: &'a str,
    pub stream_id: &'a str,
    pub title: Option<&'a str>,
    pub start_ms: Option<i64>,
    pub last_seconds: Option<i64>,
    pub duration_s: i64,
    pub created_by: Option<&'a str>,
}

/// Stores a new `processing` clip.
pub fn create(db: &Db, clip: &NewClip<'_>, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO clips (id, client_id, broadcast_id, stream_id, title, start_ms, \
         last_seconds, duration_s, state, created_by, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'processing', ?, ?)",
        &[
            clip.id.into(),
            clip.client_id.into(),
            clip.broadcast_id.into(),
            clip.stream_id.into(),
            clip.title.into(),
            clip.start_ms.into(),
            clip.last_seconds.into(),
            Value::Int(clip.duration_s),
            clip.created_by.into(),
            Value::Int(now),
        ],
    )
}

/// The tenant's clip `id`, unless deleted.
pub fn get(db: &Db, client_id: &str, id: &str) -> Result<Option<Clip>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM clips WHERE client_id = ? AND id = ? \
             AND state NOT IN ('deleting', 'deleted')",
            &[client_id.into(), id.into()],
        )?
        .map(|row| from_row(&row)))
}

/// Clip `id` of any tenant, whatever its state (the media server's reports, the clip page).
pub fn by_id(db: &Db, id: &str) -> Result<Option<Clip>, ApiError> {
    Ok(db
        .query_one("SELECT * FROM clips WHERE id = ?", &[id.into()])?
        .map(|row| from_row(&row)))
}

/// One page of the broadcast's clips (not deleted), newest first; and how many there are.
pub fn page_of_broadcast(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    page: Page,
) -> Result<(Vec<Clip>, i64), ApiError> {
    let total = db.count(
        "SELECT COUNT(*) FROM clips WHERE client_id = ? AND broadcast_id = ? \
         AND state NOT IN ('deleting', 'deleted')",
        &[client_id.into(), broadcast_id.into()],
    )?;
    let rows = db.query(
        "SELECT * FROM clips WHERE client_id = ? AND broadcast_id = ? \
         AND state NOT IN ('deleting', 'deleted') ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
        &[
            client_id.into(),
            broadcast_id.into(),
            Value::Int(page.limit.into()),
            Value::Int(page.offset.into()),
        ],
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

/// Up to `limit` clips the media server is to make: those without their HLS first (due
/// within seconds, while MP4s may queue), oldest first.
pub fn to_make(db: &Db, limit: i64) -> Result<Vec<Clip>, ApiError> {
    Ok(db
        .query(
            "SELECT * FROM clips WHERE state = 'processing' \
             ORDER BY CASE WHEN hls_ready_at IS NULL THEN 0 ELSE 1 END, created_at, id LIMIT ?",
            &[Value::Int(limit)],
        )?
        .iter()
        .map(from_row)
        .collect())
}

/// Up to `limit` clips whose media the media server is to delete.
pub fn to_delete(db: &Db, limit: i64) -> Result<Vec<Clip>, ApiError> {
    Ok(db
        .query(
            "SELECT * FROM clips WHERE state = 'deleting' ORDER BY created_at, id LIMIT ?",
            &[Value::Int(limit)],
        )?
        .iter()
        .map(from_row)
        .collect())
}

/// A `processing` clip's HLS playlists are written: where it starts (a `lastSeconds`
/// clip's place is decided now) and how long they play. Answers whether it moved.
pub fn hls_ready(
    db: &Db,
    id: &str,
    start_ms: i64,
    duration_ms: i64,
    now: i64,
) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE clips SET hls_ready_at = ?, hls_duration_ms = ?, \
         start_ms = COALESCE(start_ms, ?) \
         WHERE id = ? AND state = 'processing' AND hls_ready_at IS NULL RETURNING id",
        &[
            Value::Int(now),
            Value::Int(duration_ms),
            Value::Int(start_ms),
            id.into(),
        ],
    )?;
    Ok(!moved.is_empty())
}

/// A `processing` clip whose HLS is written has its MP4: `ready`. Answers whether it moved.
pub fn ready(
    db: &Db,
    id: &str,
    duration_ms: i64,
    bytes: i64,
    thumbnail: bool,
    now: i64,
) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE clips SET state = 'ready', mp4_duration_ms = ?, mp4_bytes = ?, thumbnail = ?, \
         ready_at = ? WHERE id = ? AND state = 'processing' AND hls_ready_at IS NOT NULL \
         RETURNING id",
        &[
            Value::Int(duration_ms),
            Value::Int(bytes),
            Value::Int(i64::from(thumbnail)),
            Value::Int(now),
            id.into(),
        ],
    )?;
    Ok(!moved.is_empty())
}

/// A `processing` clip failed. Answers whether it moved.
pub fn failed(db: &Db, id: &str, error: &str) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE clips SET state = 'failed', error = ? WHERE id = ? AND state = 'processing' \
         RETURNING id",
        &[error.into(), id.into()],
    )?;
    Ok(!moved.is_empty())
}

/// Marks the clip for deletion (the media server deletes its media).
pub fn mark_deleting(db: &Db, id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE clips SET state = 'deleting' WHERE id = ? \
         AND state IN ('processing', 'ready', 'failed')",
        &[id.into()],
    )
}

/// Marks the clips of the broadcasts of `owner_id` for deletion (the user is deleted, and
/// their broadcasts with them).
pub fn mark_owner_deleting(db: &Db, client_id: &str, owner_id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE clips SET state = 'deleting' WHERE state IN ('processing', 'ready', 'failed') \
         AND client_id = ? AND broadcast_id IN \
           (SELECT id FROM broadcasts WHERE client_id = ? AND owner_id = ?)",
        &[client_id.into(), client_id.into(), owner_id.into()],
    )
}

/// A clip marked for deletion has no media left.
pub fn deleted(db: &Db, id: &str, now: i64) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE clips SET state = 'deleted', deleted_at = ? WHERE id = ? AND state = 'deleting' \
         RETURNING id",
        &[Value::Int(now), id.into()],
    )?;
    Ok(!moved.is_empty())
}

/// Whether the tenant lets viewers clip the broadcasts they may watch.
pub fn viewer_clips(db: &Db, client_id: &str) -> Result<bool, ApiError> {
    Ok(db
        .query_one(
            "SELECT replay_viewer_clips FROM sdk_clients WHERE client_id = ?",
            &[client_id.into()],
        )?
        .is_some_and(|row| row.int("replay_viewer_clips") != 0))
}

/// Sets whether the tenant lets viewers clip.
pub fn set_viewer_clips(db: &Db, client_id: &str, allowed: bool) -> Result<(), ApiError> {
    db.execute(
        "UPDATE sdk_clients SET replay_viewer_clips = ? WHERE client_id = ?",
        &[Value::Int(i64::from(allowed)), client_id.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn new<'a>(id: &'a str, client: &'a str) -> NewClip<'a> {
        NewClip {
            id,
            client_id: client,
            broadcast_id: "b1",
            stream_id: "s1",
            title: Some("a <b>clip</b>"),
            start_ms: None,
            last_seconds: Some(30),
            duration_s: 30,
            created_by: Some("u1"),
        }
    }

    #[test]
    fn a_clip_goes_from_hls_to_mp4_and_a_report_out_of_turn_changes_nothing() {
        let db = testing::db();
        create(&db, &new("c1", "t1"), 100).unwrap();
        assert_eq!(get(&db, "t2", "c1").unwrap(), None, "another tenant's");
        // The MP4 before the HLS, or a report of a clip never asked for: nothing moves.
        assert!(!ready(&db, "c1", 30_000, 1000, true, 101).unwrap());
        assert!(!hls_ready(&db, "nope", 0, 1, 101).unwrap());
        assert!(hls_ready(&db, "c1", 12_500, 30_100, 102).unwrap());
        assert!(!hls_ready(&db, "c1", 0, 1, 103).unwrap(), "once");
        assert_eq!(to_make(&db, 10).unwrap().len(), 1, "its MP4 is left");
        // A newer clip without its HLS comes before an older one whose MP4 is left.
        create(&db, &new("c0", "t1"), 105).unwrap();
        let due: Vec<String> = to_make(&db, 1).unwrap().into_iter().map(|c| c.id).collect();
        assert_eq!(due, ["c0"]);
        assert!(failed(&db, "c0", "no_media").unwrap());
        assert!(ready(&db, "c1", 30_020, 4_000_000, true, 110).unwrap());
        assert!(!failed(&db, "c1", "late").unwrap());
        let c = get(&db, "t1", "c1").unwrap().unwrap();
        assert_eq!(c.state, "ready");
        assert_eq!(c.start_ms, Some(12_500));
        assert_eq!((c.hls_ready_at, c.ready_at), (Some(102), Some(110)));
        assert!(to_make(&db, 10).unwrap().is_empty());
        // Listed newest first, a failed one too (with its error).
        let (items, total) = page_of_broadcast(&db, "t1", "b1", Page::default()).unwrap();
        let ids: Vec<&str> = items.iter().map(|c| c.id.as_str()).collect();
        assert_eq!((ids, total), (vec!["c0", "c1"], 2));
        mark_deleting(&db, "c1").unwrap();
        assert_eq!(get(&db, "t1", "c1").unwrap(), None);
        assert_eq!(to_delete(&db, 10).unwrap().len(), 1);
        assert!(deleted(&db, "c1", 120).unwrap());
        assert!(to_delete(&db, 10).unwrap().is_empty());
        assert_eq!(by_id(&db, "c1").unwrap().unwrap().state, "deleted");
    }
}
