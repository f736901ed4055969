//! Reading broadcasts. Every reader of every component sees a broadcast through the
//! staleness rule: an active broadcast whose last heartbeat is older than 90 s is moved to
//! `error` when it is read, with its `broadcast.errored` event (recorded by the one reader
//! whose guarded update moved it). The store's own loaders return the stored record and
//! are not visible outside this crate, so no component can skip the rule.

use serde::Serialize;
use serde_json::Value as Json;

use crate::broadcasts::{self as store, Broadcast, ERROR_STALE};
use crate::{Db, outbox};
use domain::ApiError;
use domain::broadcast::{self as rules, Status, Visibility};
use domain::pagination::Page;
use domain::time;

/// The tenant's broadcast `id` (a UUID; 400 otherwise).
pub fn load(db: &Db, client_id: &str, raw_id: &str, now: i64) -> Result<Broadcast, ApiError> {
    expire_if_stale(db, store::load(db, client_id, raw_id)?, now)
}

/// The tenant's broadcast whose SFU room (streamId) is `stream_id`, if any.
pub fn load_by_stream(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    now: i64,
) -> Result<Option<Broadcast>, ApiError> {
    expire_found(db, store::load_by_stream(db, client_id, stream_id)?, now)
}

/// The tenant's broadcast named by its id or its streamId (a UUID), or by its shortId.
pub fn load_by_any_id(
    db: &Db,
    client_id: &str,
    id: &str,
    now: i64,
) -> Result<Option<Broadcast>, ApiError> {
    expire_found(db, store::load_by_any_id(db, client_id, id)?, now)
}

/// The broadcast (of any tenant) whose SFU room is `stream_id`: for callers that prove
/// something about the room rather than the tenant (the SFU, the recording page).
pub fn load_by_room(db: &Db, stream_id: &str, now: i64) -> Result<Option<Broadcast>, ApiError> {
    expire_found(db, store::load_by_room(db, stream_id)?, now)
}

/// The broadcast (of any tenant) whose ingest key is `key`: the media server asks with
/// nothing else.
pub fn load_by_stream_key(db: &Db, key: &str, now: i64) -> Result<Option<Broadcast>, ApiError> {
    expire_found(db, store::load_by_stream_key(db, key)?, now)
}

/// The broadcast (of any tenant) whose id or short id is `id`: the view beacon, which
/// names no tenant.
pub fn load_by_id_or_short(db: &Db, id: &str, now: i64) -> Result<Option<Broadcast>, ApiError> {
    expire_found(db, store::load_by_id_or_short(db, id)?, now)
}

/// The broadcast (of any tenant) whose stream is `stream_id`: the media server's calls.
pub fn load_by_stream_id(
    db: &Db,
    stream_id: &str,
    now: i64,
) -> Result<Option<Broadcast>, ApiError> {
    expire_found(db, store::load_by_stream_id(db, stream_id)?, now)
}

/// The broadcast (of any tenant) whose short id is `short_id`: the watch page.
pub fn load_by_short_id(db: &Db, short_id: &str, now: i64) -> Result<Option<Broadcast>, ApiError> {
    expire_found(db, store::load_by_short_id(db, short_id)?, now)
}

/// One page of the tenant's broadcasts (all, or one owner's), newest first; and how many
/// there are.
pub fn page_of_tenant(
    db: &Db,
    client_id: &str,
    owner_id: Option<&str>,
    page: Page,
    now: i64,
) -> Result<(Vec<Broadcast>, i64), ApiError> {
    let (stored, total) = store::page_of_tenant(db, client_id, owner_id, page)?;
    let items = stored
        .into_iter()
        .map(|b| expire_if_stale(db, b, now))
        .collect::<Result<_, _>>()?;
    Ok((items, total))
}

fn expire_found(
    db: &Db,
    found: Option<Broadcast>,
    now: i64,
) -> Result<Option<Broadcast>, ApiError> {
    found.map(|b| expire_if_stale(db, b, now)).transpose()
}

fn expire_if_stale(db: &Db, mut b: Broadcast, now: i64) -> Result<Broadcast, ApiError> {
    let last_heartbeat = b.last_heartbeat.unwrap_or(0);
    if !rules::is_stale(b.status, last_heartbeat, b.ingest_deadline, now) {
        return Ok(b);
    }
    let at = time::format_rfc3339(now);
    db.transaction(|tx| {
        let moved = store::mark_stale(tx, &b.id, &at)?;
        b.status = Status::Error;
        b.error_reason = Some(ERROR_STALE.to_string());
        b.ended_at = b.ended_at.clone().or(Some(at.clone()));
        b.updated_at = at.clone();
        if moved {
            let subject = outbox::Subject {
                object_type: "broadcast",
                object_id: &b.id,
            };
            let data = ErroredAsStale::of(&b);
            outbox::record(tx, &b.client_id, "broadcast.errored", subject, &data, now)?;
        }
        Ok(())
    })?;
    Ok(b)
}

/// The `broadcast.errored` payload of a broadcast that went stale: the owner's view of
/// it without what only the API can build (watchUrl, hlsUrl, rtmpUrl from its
/// configuration, and the reaction counts); `reason` says why it errored.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ErroredAsStale<'a> {
    id: &'a str,
    title: &'a str,
    status: &'static str,
    visibility: Visibility,
    tags: &'a Json,
    owner_id: Option<&'a str>,
    viewer_count: i64,
    max_participants: i64,
    orientation: &'a str,
    recording_width: Option<i64>,
    recording_height: Option<i64>,
    created_at: &'a str,
    started_at: Option<&'a str>,
    ended_at: Option<&'a str>,
    cohost_policy: &'a str,
    stream_id: &'a str,
    short_id: &'a str,
    stream_key: &'a str,
    metadata: &'a Json,
    device_width: Option<i64>,
    device_height: Option<i64>,
    device_type: Option<&'a str>,
    operating_system: Option<&'a str>,
    updated_at: &'a str,
    error_reason: &'static str,
    reason: &'static str,
}

impl<'a> ErroredAsStale<'a> {
    fn of(b: &'a Broadcast) -> ErroredAsStale<'a> {
        ErroredAsStale {
            id: &b.id,
            title: &b.title,
            status: b.status.as_str(),
            visibility: b.visibility,
            tags: &b.tags,
            owner_id: b.owner_id.as_deref(),
            viewer_count: b.viewer_count,
            max_participants: b.max_participants,
            orientation: &b.orientation,
            recording_width: b.recording.map(|r| r.0),
            recording_height: b.recording.map(|r| r.1),
            created_at: &b.created_at,
            started_at: b.started_at.as_deref(),
            ended_at: b.ended_at.as_deref(),
            cohost_policy: &b.cohost_policy,
            stream_id: &b.identity.stream_id,
            short_id: &b.identity.short_id,
            stream_key: &b.identity.stream_key,
            metadata: &b.metadata,
            device_width: b.device_width,
            device_height: b.device_height,
            device_type: b.device_type.as_deref(),
            operating_system: b.operating_system.as_deref(),
            updated_at: &b.updated_at,
            error_reason: ERROR_STALE,
            reason: ERROR_STALE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broadcasts::{insert, move_status, page_of_live};
    use crate::testing;

    #[test]
    fn every_reader_expires_a_stale_broadcast() {
        let db = testing::db();
        let t0 = 1_800_000_000;
        let b = insert(&db, "c1", Some("ada"), &testing::new_broadcast(), t0).unwrap();
        assert!(move_status(&db, &b, Status::Active, t0).unwrap());
        let live = load(&db, "c1", &b.id, t0 + 60).unwrap();
        assert_eq!(live.status, Status::Active);
        assert_eq!(
            page_of_live(&db, "c1", Page::default(), t0 + 60).unwrap().1,
            1
        );
        // 91 s without a heartbeat: gone from the live list, and `error` when read, by
        // whichever reader comes first.
        assert_eq!(
            page_of_live(&db, "c1", Page::default(), t0 + 91).unwrap().1,
            0
        );
        let by_room = load_by_room(&db, &b.identity.stream_id, t0 + 91)
            .unwrap()
            .unwrap();
        assert_eq!(by_room.status, Status::Error);
        assert_eq!(
            by_room.ended_at.as_deref(),
            Some(time::format_rfc3339(t0 + 91).as_str())
        );
        assert_eq!(
            load(&db, "c1", &b.id, t0 + 200).unwrap().status,
            Status::Error
        );
        // One `broadcast.errored` event, from the reader that moved it, inside or outside
        // a transaction of its own.
        db.transaction(|tx| load(tx, "c1", &b.id, t0 + 300))
            .unwrap();
        let events = testing::outbox_events(&db, &b.id);
        assert_eq!(events.len(), 1);
        let (event_type, payload) = &events[0];
        assert_eq!(event_type, "broadcast.errored");
        assert_eq!(payload["data"]["status"], "error");
        assert_eq!(payload["data"]["reason"], "stale");
        assert_eq!(payload["data"]["id"], b.id.as_str());
        let keys: Vec<&str> = payload["data"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "cohostPolicy",
                "createdAt",
                "deviceHeight",
                "deviceType",
                "deviceWidth",
                "endedAt",
                "errorReason",
                "id",
                "maxParticipants",
                "metadata",
                "operatingSystem",
                "orientation",
                "ownerId",
                "reason",
                "recordingHeight",
                "recordingWidth",
                "shortId",
                "startedAt",
                "status",
                "streamId",
                "streamKey",
                "tags",
                "title",
                "updatedAt",
                "viewerCount",
                "visibility",
            ]
        );
    }
}
