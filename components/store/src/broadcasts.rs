//! Broadcasts: one record whichever endpoint created it. The loaders return the stored
//! record and are for this crate only: components read broadcasts through
//! `app::broadcasts`, which applies the staleness rule.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::broadcast::{self as rules, Status, StreamIdentity, Visibility};
use domain::ids;
use domain::media::{Ladder, LatencyMode};
use domain::pagination::Page;
use domain::time;
use serde_json::{Map, Value as Json};
use std::collections::HashMap;

/// A stored broadcast.
#[derive(Debug, Clone, PartialEq)]
pub struct Broadcast {
    pub id: String,
    pub client_id: String,
    /// None for sessions the tenant's server created.
    pub owner_id: Option<String>,
    /// streamId (the SFU room), streamKey and shortId.
    pub identity: StreamIdentity,
    pub title: String,
    pub visibility: Visibility,
    pub tags: Json,
    pub metadata: Json,
    pub status: Status,
    pub device_width: Option<i64>,
    pub device_height: Option<i64>,
    pub device_type: Option<String>,
    pub operating_system: Option<String>,
    pub orientation: String,
    pub recording: Option<(i64, i64)>,
    pub max_participants: i64,
    pub viewer_count: i64,
    pub peak_viewers: i64,
    pub viewer_reports: i64,
    pub viewer_total: i64,
    pub created_at: String,
    pub updated_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// Why it is in `error` ([`ERROR_STALE`], [`ERROR_REQUESTED`]); none in any other status.
    pub error_reason: Option<String>,
    pub last_heartbeat: Option<i64>,
    /// While its RTMP publisher is away: the time by which it must come back before the
    /// broadcast completes (the reconnect window's end).
    pub ingest_deadline: Option<i64>,
    /// How co-hosts join: `approval`, `open` or `invite_only`.
    pub cohost_policy: String,
    /// Whether its RTMP publishes are transcoded into renditions; `None`: as its tenant's
    /// setting says.
    pub ladder: Option<Ladder>,
    pub latency_mode: LatencyMode,
}

impl Broadcast {
    pub fn is_owned_by(&self, user_id: &str) -> bool {
        self.owner_id.as_deref() == Some(user_id)
    }
}

/// The stream identity columns every table with a stream shares.
pub fn stream_identity_of(row: &Row) -> StreamIdentity {
    StreamIdentity {
        stream_id: row.text("stream_id"),
        stream_key: row.text("stream_key"),
        short_id: row.text("short_id"),
    }
}

fn from_row(row: &Row) -> Broadcast {
    let json = |column: &str, empty: Json| {
        row.opt_text(column)
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(empty)
    };
    Broadcast {
        id: row.text("id"),
        client_id: row.text("client_id"),
        owner_id: row.opt_text("owner_id"),
        identity: stream_identity_of(row),
        title: row.text("title"),
        visibility: Visibility::stored(&row.text("visibility")),
        tags: json("tags", Json::Array(Vec::new())),
        metadata: json("metadata", Json::Object(Map::new())),
        status: Status::parse(&row.text("status")).unwrap_or(Status::Error),
        device_width: row.opt_int("device_width"),
        device_height: row.opt_int("device_height"),
        device_type: row.opt_text("device_type"),
        operating_system: row.opt_text("operating_system"),
        orientation: row.text("orientation"),
        recording: row
            .opt_int("recording_width")
            .zip(row.opt_int("recording_height")),
        max_participants: row.int("max_participants"),
        viewer_count: row.int("viewer_count"),
        peak_viewers: row.int("peak_viewers"),
        viewer_reports: row.int("viewer_reports"),
        viewer_total: row.int("viewer_total"),
        created_at: row.text("created_at"),
        updated_at: row.text("updated_at"),
        started_at: row.opt_text("started_at"),
        ended_at: row.opt_text("ended_at"),
        error_reason: row.opt_text("error_reason"),
        last_heartbeat: row.opt_int("last_heartbeat"),
        ingest_deadline: row.opt_int("ingest_deadline"),
        cohost_policy: row.text("cohost_policy"),
        ladder: row.opt_text("ladder").and_then(|l| Ladder::parse(&l)),
        latency_mode: row
            .opt_text("latency_mode")
            .and_then(|l| LatencyMode::parse(&l))
            .unwrap_or_default(),
    }
}

/// What a new broadcast is made of.
#[derive(Debug, Default)]
pub struct NewBroadcast {
    pub title: String,
    pub visibility: Visibility,
    pub tags: Vec<String>,
    pub metadata: Map<String, Json>,
    pub device: Option<(i64, i64)>,
    pub device_type: Option<String>,
    pub operating_system: Option<String>,
    pub orientation: String,
    pub max_participants: i64,
    pub cohost_policy: String,
    pub ladder: Option<Ladder>,
    pub latency_mode: LatencyMode,
}

/// A new pending broadcast with a fresh stream identity, as [`insert_record`] stores it
/// (the schema's defaults included). Built before the transaction that stores it, so the
/// transaction only runs statements.
pub fn new_record(
    client_id: &str,
    owner_id: Option<&str>,
    new: &NewBroadcast,
    now: i64,
) -> Broadcast {
    let at = time::format_rfc3339(now);
    Broadcast {
        id: ids::uuid(),
        client_id: client_id.to_string(),
        owner_id: owner_id.map(str::to_string),
        identity: StreamIdentity::generate(),
        title: new.title.clone(),
        visibility: new.visibility,
        tags: Json::from(new.tags.clone()),
        metadata: Json::Object(new.metadata.clone()),
        status: Status::Pending,
        device_width: new.device.map(|d| d.0),
        device_height: new.device.map(|d| d.1),
        device_type: new.device_type.clone(),
        operating_system: new.operating_system.clone(),
        orientation: new.orientation.clone(),
        recording: rules::recording_size(new.device, new.orientation == "portrait"),
        max_participants: new.max_participants,
        viewer_count: 0,
        peak_viewers: 0,
        viewer_reports: 0,
        viewer_total: 0,
        created_at: at.clone(),
        updated_at: at,
        started_at: None,
        ended_at: None,
        error_reason: None,
        last_heartbeat: None,
        ingest_deadline: None,
        cohost_policy: new.cohost_policy.clone(),
        ladder: new.ladder,
        latency_mode: new.latency_mode,
    }
}

/// Stores a record made by [`new_record`].
pub fn insert_record(db: &Db, b: &Broadcast) -> Result<(), ApiError> {
    // Its ids are fresh and random: only a fault fails it, so it may go with the
    // transaction's next statement.
    db.insert_soon(
        "INSERT INTO broadcasts (id, client_id, owner_id, short_id, stream_id, stream_key, title, visibility, tags, metadata, status, \
           device_width, device_height, device_type, operating_system, orientation, recording_width, recording_height, max_participants, \
           created_at, updated_at, cohost_policy, ladder, latency_mode) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            b.id.clone().into(),
            b.client_id.clone().into(),
            b.owner_id.clone().into(),
            b.identity.short_id.clone().into(),
            b.identity.stream_id.clone().into(),
            b.identity.stream_key.clone().into(),
            b.title.clone().into(),
            b.visibility.into(),
            b.tags.to_string().into(),
            b.metadata.to_string().into(),
            b.status.as_str().into(),
            b.device_width.into(),
            b.device_height.into(),
            b.device_type.clone().into(),
            b.operating_system.clone().into(),
            b.orientation.clone().into(),
            b.recording.map(|r| r.0).into(),
            b.recording.map(|r| r.1).into(),
            Value::Int(b.max_participants),
            b.created_at.clone().into(),
            b.updated_at.clone().into(),
            b.cohost_policy.clone().into(),
            b.ladder.map(|l| l.as_str().to_string()).into(),
            b.latency_mode.as_str().into(),
        ],
    )
}

/// Stores a new pending broadcast with a fresh stream identity.
pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: Option<&str>,
    new: &NewBroadcast,
    now: i64,
) -> Result<Broadcast, ApiError> {
    let b = new_record(client_id, owner_id, new, now);
    insert_record(db, &b)?;
    Ok(b)
}

/// The tenant's broadcast `id` (a UUID; 400 otherwise), as stored.
pub(crate) fn load(db: &Db, client_id: &str, raw_id: &str) -> Result<Broadcast, ApiError> {
    let id = ids::parse_uuid(raw_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the broadcast id must be a UUID"))?;
    find(
        db,
        "client_id = ? AND id = ?",
        &[client_id.into(), id.into()],
    )?
    .ok_or_else(|| ApiError::not_found("broadcast"))
}

/// The tenant's broadcast whose SFU room (streamId) is `stream_id`, if any.
pub(crate) fn load_by_stream(
    db: &Db,
    client_id: &str,
    stream_id: &str,
) -> Result<Option<Broadcast>, ApiError> {
    find(
        db,
        "client_id = ? AND stream_id = ?",
        &[client_id.into(), stream_id.into()],
    )
}

/// The tenant's broadcast named by its id or its streamId (a UUID), or by its shortId.
pub(crate) fn load_by_any_id(
    db: &Db,
    client_id: &str,
    id: &str,
) -> Result<Option<Broadcast>, ApiError> {
    find(
        db,
        "client_id = ?1 AND (id = ?2 OR stream_id = ?2 OR short_id = ?2)",
        &[client_id.into(), id.into()],
    )
}

/// The broadcast (of any tenant) whose id or short id is `id`.
pub(crate) fn load_by_id_or_short(db: &Db, id: &str) -> Result<Option<Broadcast>, ApiError> {
    find(db, "id = ?1 OR short_id = ?1", &[id.into()])
}

/// The broadcast (of any tenant) whose SFU room is `stream_id`.
pub(crate) fn load_by_room(db: &Db, stream_id: &str) -> Result<Option<Broadcast>, ApiError> {
    find(db, "stream_id = ?", &[stream_id.into()])
}

/// The broadcast (of any tenant) whose ingest key is `key`.
pub(crate) fn load_by_stream_key(db: &Db, key: &str) -> Result<Option<Broadcast>, ApiError> {
    find(db, "stream_key = ?", &[key.into()])
}

/// The broadcast (of any tenant) whose stream (SFU room, HLS name) is `stream_id`.
pub(crate) fn load_by_stream_id(db: &Db, stream_id: &str) -> Result<Option<Broadcast>, ApiError> {
    find(db, "stream_id = ?", &[stream_id.into()])
}

/// The broadcast (of any tenant) whose short id is `short_id`.
pub(crate) fn load_by_short_id(db: &Db, short_id: &str) -> Result<Option<Broadcast>, ApiError> {
    find(db, "short_id = ?", &[short_id.into()])
}

fn find(db: &Db, filter: &str, params: &[Value]) -> Result<Option<Broadcast>, ApiError> {
    Ok(db
        .query_one(&format!("SELECT * FROM broadcasts WHERE {filter}"), params)?
        .map(|row| from_row(&row)))
}

/// `error_reason` of a broadcast that went stale (no heartbeat for 90 s).
pub const ERROR_STALE: &str = "stale";
/// `error_reason` of a broadcast its owner or the tenant's server moved to `error`.
pub const ERROR_REQUESTED: &str = "requested";

/// Moves the broadcast, if still active, to `error` as stale at `at` (RFC 3339); whether
/// this call moved it.
pub(crate) fn mark_stale(db: &Db, id: &str, at: &str) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE broadcasts SET status = 'error', error_reason = 'stale', \
           ended_at = COALESCE(ended_at, ?), updated_at = ? \
         WHERE id = ? AND status = 'active' RETURNING id",
        &[at.into(), at.into(), id.into()],
    )?;
    Ok(!moved.is_empty())
}

/// One page of the tenant's broadcasts (all, or one owner's), newest first, as stored;
/// and how many there are.
pub(crate) fn page_of_tenant(
    db: &Db,
    client_id: &str,
    owner_id: Option<&str>,
    page: Page,
) -> Result<(Vec<Broadcast>, i64), ApiError> {
    let (rows, total) = match owner_id {
        Some(owner) => db.page(
            "broadcasts",
            "client_id = ? AND owner_id = ?",
            &[client_id.into(), owner.into()],
            "created_at DESC, id",
            page,
        )?,
        None => db.page(
            "broadcasts",
            "client_id = ?",
            &[client_id.into()],
            "created_at DESC, id",
            page,
        )?,
    };
    Ok((rows.iter().map(from_row).collect(), total))
}

/// The streamIds of `owner_id`'s broadcasts that are not over (pending or active): where
/// a channel-wide chat action is pushed live. At most `limit`, newest first.
pub fn open_stream_ids_of_owner(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    limit: i64,
) -> Result<Vec<String>, ApiError> {
    Ok(db
        .query(
            "SELECT stream_id FROM broadcasts WHERE client_id = ? AND owner_id = ? \
             AND status IN ('pending', 'active') ORDER BY created_at DESC LIMIT ?",
            &[client_id.into(), owner_id.into(), Value::Int(limit)],
        )?
        .iter()
        .map(|row| row.text("stream_id"))
        .collect())
}

/// One page of the tenant's live broadcasts: public, active and not stale (a publisher
/// inside its reconnect window counts as live), newest first.
pub fn page_of_live(
    db: &Db,
    client_id: &str,
    page: Page,
    now: i64,
) -> Result<(Vec<Broadcast>, i64), ApiError> {
    let (rows, total) = db.page(
        "broadcasts",
        "client_id = ? AND status = 'active' AND visibility = 'public' \
         AND (last_heartbeat >= ? OR ingest_deadline >= ?)",
        &[
            client_id.into(),
            Value::Int(now - rules::STALE_AFTER_SECS),
            Value::Int(now),
        ],
        "started_at DESC, id",
        page,
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

/// Moves `b` to `to` if it is still in the status it was read in; `false` when a
/// concurrent change won.
pub fn move_status(db: &Db, b: &Broadcast, to: Status, now: i64) -> Result<bool, ApiError> {
    let at = time::format_rfc3339(now);
    let (started, ended, heartbeat) = match to {
        Status::Active => (Some(at.clone()), None, Some(now)),
        _ => (None, Some(at.clone()), None),
    };
    let error_reason = (to == Status::Error).then_some(ERROR_REQUESTED);
    // The status in the WHERE clause makes concurrent moves safe: only one wins.
    let moved = db.query(
        "UPDATE broadcasts SET status = ?1, started_at = COALESCE(started_at, ?2), ended_at = COALESCE(?3, ended_at), \
           last_heartbeat = COALESCE(?4, last_heartbeat), updated_at = ?5, \
           ingest_deadline = CASE WHEN ?1 = 'active' THEN ingest_deadline ELSE NULL END, \
           error_reason = ?8 \
         WHERE id = ?6 AND status = ?7 RETURNING id",
        &[
            to.as_str().into(),
            started.into(),
            ended.into(),
            heartbeat.into(),
            at.into(),
            b.id.clone().into(),
            b.status.as_str().into(),
            error_reason.into(),
        ],
    )?;
    Ok(!moved.is_empty())
}

/// Records a heartbeat.
pub fn heartbeat(db: &Db, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE broadcasts SET last_heartbeat = ? WHERE id = ?",
        &[Value::Int(now), b.id.clone().into()],
    )
}

/// Records a viewer-count report: the current count, the peak, and the running sum and
/// number of reports the average comes from.
pub fn report_viewers(db: &Db, b: &Broadcast, count: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE broadcasts SET viewer_count = ?1, \
           peak_viewers = CASE WHEN peak_viewers > ?1 THEN peak_viewers ELSE ?1 END, \
           viewer_reports = viewer_reports + 1, viewer_total = viewer_total + ?1 WHERE id = ?2",
        &[Value::Int(count), b.id.clone().into()],
    )
}

/// Sets (or with `None` clears) the time by which `b`'s dropped publisher must be back.
pub fn set_ingest_deadline(db: &Db, b: &Broadcast, deadline: Option<i64>) -> Result<(), ApiError> {
    db.execute(
        "UPDATE broadcasts SET ingest_deadline = ? WHERE id = ?",
        &[deadline.into(), b.id.clone().into()],
    )
}

/// Active broadcasts (of every tenant) whose publisher's reconnect window ended before
/// `now`: at most `limit`, and how many there are.
pub fn past_ingest_deadline(
    db: &Db,
    now: i64,
    limit: i64,
) -> Result<(Vec<Broadcast>, i64), ApiError> {
    let total = db.count(
        "SELECT COUNT(*) FROM broadcasts WHERE status = 'active' AND ingest_deadline < ?",
        &[Value::Int(now)],
    )?;
    let rows = db.query(
        "SELECT * FROM broadcasts WHERE status = 'active' AND ingest_deadline < ? \
         ORDER BY ingest_deadline LIMIT ?",
        &[Value::Int(now), Value::Int(limit)],
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

/// Gives `b` a new ingest key.
pub fn reset_stream_key(db: &Db, b: &Broadcast, key: &str, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE broadcasts SET stream_key = ?, updated_at = ? WHERE id = ?",
        &[
            key.into(),
            time::format_rfc3339(now).into(),
            b.id.clone().into(),
        ],
    )
}

/// The fields an owner may change; `None` keeps the stored value.
#[derive(Debug, Default)]
pub struct Changes {
    pub title: Option<String>,
    pub visibility: Option<Visibility>,
    pub tags: Option<Vec<String>>,
    pub cohost_policy: Option<String>,
    pub metadata: Option<Map<String, Json>>,
    pub ladder: Option<Ladder>,
    pub latency_mode: Option<LatencyMode>,
}

/// Applies `changes` to `b`.
pub fn update(db: &Db, b: &Broadcast, changes: &Changes, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE broadcasts SET title = COALESCE(?, title), visibility = COALESCE(?, visibility), \
           tags = COALESCE(?, tags), cohost_policy = COALESCE(?, cohost_policy), \
           metadata = COALESCE(?, metadata), ladder = COALESCE(?, ladder), \
           latency_mode = COALESCE(?, latency_mode), updated_at = ? \
         WHERE client_id = ? AND id = ?",
        &[
            changes.title.clone().into(),
            changes.visibility.into(),
            changes
                .tags
                .as_ref()
                .map(|t| serde_json::to_string(t).unwrap_or_else(|_| "[]".into()))
                .into(),
            changes.cohost_policy.clone().into(),
            changes
                .metadata
                .as_ref()
                .map(|m| Json::Object(m.clone()).to_string())
                .into(),
            changes.ladder.map(|l| l.as_str().to_string()).into(),
            changes.latency_mode.map(|l| l.as_str().to_string()).into(),
            time::format_rfc3339(now).into(),
            b.client_id.clone().into(),
            b.id.clone().into(),
        ],
    )
}

/// Takes the broadcast's row lock for the rest of the transaction (on SQLite the write
/// lock is already held), so decisions that count (the last free co-host slot) are made
/// one at a time on every back end.
pub fn lock(db: &Db, b: &Broadcast) -> Result<(), ApiError> {
    db.execute(
        "UPDATE broadcasts SET updated_at = updated_at WHERE client_id = ? AND id = ?",
        &[b.client_id.clone().into(), b.id.clone().into()],
    )
}

/// Counts one reaction of `kind`; answers the new count.
pub fn add_reaction(db: &Db, b: &Broadcast, kind: &str) -> Result<i64, ApiError> {
    db.count(
        "INSERT INTO broadcast_reactions (client_id, broadcast_id, kind, count) VALUES (?, ?, ?, 1) \
         ON CONFLICT (broadcast_id, kind) DO UPDATE SET count = broadcast_reactions.count + 1 RETURNING count",
        &[b.client_id.clone().into(), b.id.clone().into(), kind.into()],
    )
}

/// Reaction counts per broadcast, every kind (zero when none), for many broadcasts in one
/// query.
pub fn reaction_counts(
    db: &Db,
    broadcast_ids: &[&str],
) -> Result<HashMap<String, Map<String, Json>>, ApiError> {
    let mut counts: HashMap<String, Map<String, Json>> = broadcast_ids
        .iter()
        .map(|id| {
            let zeros = rules::REACTIONS
                .iter()
                .map(|k| (k.to_string(), 0.into()))
                .collect();
            (id.to_string(), zeros)
        })
        .collect();
    if broadcast_ids.is_empty() {
        return Ok(counts);
    }
    let placeholders = vec!["?"; broadcast_ids.len()].join(", ");
    let params: Vec<Value> = broadcast_ids.iter().map(|id| (*id).into()).collect();
    let rows = db.query(
        &format!(
            "SELECT broadcast_id, kind, count FROM broadcast_reactions WHERE broadcast_id IN ({placeholders})"
        ),
        &params,
    )?;
    for row in rows {
        if let Some(map) = counts.get_mut(&row.text("broadcast_id")) {
            map.insert(row.text("kind"), row.int("count").into());
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn new(title: &str) -> NewBroadcast {
        NewBroadcast {
            title: title.into(),
            visibility: Visibility::Public,
            orientation: "portrait".into(),
            max_participants: 100,
            cohost_policy: "approval".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_new_record_is_what_the_store_reads_back() {
        let db = testing::db();
        let mut full = new("Full");
        full.tags = vec!["music".into(), "live".into()];
        full.metadata.insert("game".into(), Json::from("chess"));
        full.device = Some((1170, 2532));
        full.device_type = Some("ios".into());
        full.operating_system = Some("iOS 18".into());
        full.ladder = Some(Ladder::Passthrough);
        full.latency_mode = LatencyMode::Low;
        for (owner, fields) in [(Some("ada"), full), (None, new("Bare"))] {
            let b = insert(&db, "c1", owner, &fields, 1_800_000_000).unwrap();
            // Built in the component, not read back: it must hold the schema's defaults.
            assert_eq!(load(&db, "c1", &b.id).unwrap(), b);
        }
    }

    #[test]
    fn the_ladder_and_latency_are_kept_until_changed() {
        let db = testing::db();
        let b = insert(&db, "c1", None, &new("Ladder"), 10).unwrap();
        assert_eq!((b.ladder, b.latency_mode), (None, LatencyMode::Standard));
        let changes = Changes {
            ladder: Some(Ladder::Passthrough),
            latency_mode: Some(LatencyMode::Low),
            ..Changes::default()
        };
        update(&db, &b, &changes, 11).unwrap();
        let b = load(&db, "c1", &b.id).unwrap();
        assert_eq!(
            (b.ladder, b.latency_mode),
            (Some(Ladder::Passthrough), LatencyMode::Low)
        );
        // Changing something else keeps them.
        let title = Changes {
            title: Some("Renamed".into()),
            ..Changes::default()
        };
        update(&db, &b, &title, 12).unwrap();
        let b = load(&db, "c1", &b.id).unwrap();
        assert_eq!(
            (b.ladder, b.latency_mode),
            (Some(Ladder::Passthrough), LatencyMode::Low)
        );
    }

    #[test]
    fn a_status_move_is_won_once() {
        let db = testing::db();
        let b = insert(&db, "c1", None, &new("Race"), 10).unwrap();
        assert!(move_status(&db, &b, Status::Active, 11).unwrap());
        // A second mover that read the same `pending` broadcast loses.
        assert!(!move_status(&db, &b, Status::Completed, 12).unwrap());
        assert_eq!(load(&db, "c1", &b.id).unwrap().status, Status::Active);
    }

    #[test]
    fn tenants_and_id_forms() {
        let db = testing::db();
        let b = insert(&db, "c1", Some("ada"), &new("Mine"), 10).unwrap();
        for id in [&b.id, &b.identity.stream_id, &b.identity.short_id] {
            assert_eq!(load_by_any_id(&db, "c1", id).unwrap().unwrap().id, b.id);
            assert!(load_by_any_id(&db, "c2", id).unwrap().is_none());
        }
        assert_eq!(load(&db, "c2", &b.id).unwrap_err().status, 404);
        assert_eq!(load(&db, "c1", "nope").unwrap_err().status, 400);
    }

    #[test]
    fn viewer_reports_keep_the_peak_and_the_average() {
        let db = testing::db();
        let b = insert(&db, "c1", Some("ada"), &new("Counted"), 10).unwrap();
        for count in [5, 12, 7] {
            report_viewers(&db, &b, count).unwrap();
        }
        let b = load(&db, "c1", &b.id).unwrap();
        assert_eq!(
            (
                b.viewer_count,
                b.peak_viewers,
                b.viewer_reports,
                b.viewer_total
            ),
            (7, 12, 3, 24)
        );
        assert_eq!(add_reaction(&db, &b, "heart").unwrap(), 1);
        assert_eq!(add_reaction(&db, &b, "heart").unwrap(), 2);
        let counts = reaction_counts(&db, &[&b.id]).unwrap();
        assert_eq!(counts[&b.id]["heart"], 2);
        assert_eq!(counts[&b.id]["sparkle"], 0);
    }
}
