//! Scheduled events' SFU rooms, read-only (`app::rooms` resolves a room id across
//! broadcasts and events); the events store writes their rows.

use super::{Db, Row};
use domain::ApiError;
use domain::broadcast::Visibility;

/// A scheduled event's room.
#[derive(Debug, Clone)]
pub struct EventRoom {
    pub id: String,
    pub client_id: String,
    pub owner_id: String,
    pub room_name: String,
    pub visibility: Visibility,
}

fn event_room_of(row: &Row) -> EventRoom {
    EventRoom {
        id: row.text("id"),
        client_id: row.text("client_id"),
        owner_id: row.text("owner_id"),
        room_name: row.text("room_name"),
        visibility: Visibility::stored(&row.text("visibility")),
    }
}

/// The tenant's scheduled event whose room name, streamId or shortId is `id`.
pub fn event_room(db: &Db, client_id: &str, id: &str) -> Result<Option<EventRoom>, ApiError> {
    Ok(db
        .query_one(
            "SELECT id, client_id, owner_id, room_name, visibility FROM scheduled_events \
             WHERE client_id = ?1 AND (room_name = ?2 OR stream_id = ?2 OR short_id = ?2)",
            &[client_id.into(), id.into()],
        )?
        .map(|row| event_room_of(&row)))
}

/// The scheduled event (of any tenant) whose room name or streamId is `room`.
pub fn event_room_by_name(db: &Db, room: &str) -> Result<Option<EventRoom>, ApiError> {
    Ok(db
        .query_one(
            "SELECT id, client_id, owner_id, room_name, visibility FROM scheduled_events \
             WHERE room_name = ?1 OR stream_id = ?1",
            &[room.into()],
        )?
        .map(|row| event_room_of(&row)))
}

/// Whether the tenant has a scheduled event, not private, whose stream is `stream_id`: its
/// chat is open to the tenant's users.
pub fn has_visible_event_stream(
    db: &Db,
    client_id: &str,
    stream_id: &str,
) -> Result<bool, ApiError> {
    Ok(db.count(
        "SELECT COUNT(*) FROM scheduled_events WHERE client_id = ? AND stream_id = ? AND visibility <> 'private'",
        &[client_id.into(), stream_id.into()],
    )? > 0)
}

/// The owner of the tenant's scheduled event streaming as `stream_id`, when that event is
/// not private.
pub fn visible_event_stream_owner(
    db: &Db,
    client_id: &str,
    stream_id: &str,
) -> Result<Option<String>, ApiError> {
    Ok(db
        .query_one(
            "SELECT owner_id FROM scheduled_events WHERE client_id = ? AND stream_id = ? AND visibility <> 'private'",
            &[client_id.into(), stream_id.into()],
        )?
        .map(|row| row.text("owner_id")))
}
