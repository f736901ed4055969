//! SFU rooms: what a room name, stream id or short id names, across broadcasts and
//! scheduled events. Read-only; each aggregate's own store writes its rows.

use super::broadcasts::{self, Broadcast};
use super::{Db, Row};
use crate::ApiError;
use crate::domain::broadcast::Visibility;

/// A scheduled event's room.
#[derive(Debug, Clone)]
pub struct EventRoom {
    pub id: String,
    pub client_id: String,
    pub owner_id: String,
    pub room_name: String,
    pub visibility: Visibility,
}

fn event_room(row: &Row) -> EventRoom {
    EventRoom {
        id: row.text("id"),
        client_id: row.text("client_id"),
        owner_id: row.text("owner_id"),
        room_name: row.text("room_name"),
        visibility: Visibility::stored(&row.text("visibility")),
    }
}

/// What a room id names.
#[derive(Debug, Clone)]
pub enum Room {
    Broadcast(Box<Broadcast>),
    Event(EventRoom),
}

/// The tenant's room named by `id`: a broadcast by its id, streamId or shortId, else a
/// scheduled event by its room name, streamId or shortId.
pub fn find(db: &Db, client_id: &str, id: &str, now: i64) -> Result<Option<Room>, ApiError> {
    if let Some(b) = broadcasts::load_by_any_id(db, client_id, id, now)? {
        return Ok(Some(Room::Broadcast(Box::new(b))));
    }
    Ok(db
        .query_one(
            "SELECT id, client_id, owner_id, room_name, visibility FROM scheduled_events \
             WHERE client_id = ?1 AND (room_name = ?2 OR stream_id = ?2 OR short_id = ?2)",
            &[client_id.into(), id.into()],
        )?
        .map(|row| Room::Event(event_room(&row))))
}

/// The room (of any tenant) whose SFU room name is `room`: a broadcast's streamId, or a
/// scheduled event's room name or streamId. For callers that prove something about the
/// room rather than the tenant (the recording page, the SFU).
pub fn by_room_name(db: &Db, room: &str, now: i64) -> Result<Option<Room>, ApiError> {
    if let Some(b) = broadcasts::load_by_room(db, room, now)? {
        return Ok(Some(Room::Broadcast(Box::new(b))));
    }
    Ok(db
        .query_one(
            "SELECT id, client_id, owner_id, room_name, visibility FROM scheduled_events \
             WHERE room_name = ?1 OR stream_id = ?1",
            &[room.into()],
        )?
        .map(|row| Room::Event(event_room(&row))))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::broadcasts::NewBroadcast;
    use crate::store::testing;

    #[test]
    fn rooms_are_found_by_every_name_within_the_tenant() {
        let db = testing::db();
        let new = NewBroadcast {
            title: "Show".into(),
            visibility: Visibility::Public,
            orientation: "portrait".into(),
            max_participants: 10,
            cohost_policy: "approval".into(),
            ..Default::default()
        };
        let b = broadcasts::insert(&db, "c1", Some("ada"), &new, 10).unwrap();
        db.execute(
            "INSERT INTO scheduled_events (id, client_id, owner_id, title, visibility, scheduled_for, short_id, stream_id, stream_key, room_name, created_at) \
             VALUES ('e1', 'c1', 'ada', 'Later', 'private', 99, 'ABCDEFGH', 'es1', 'ek1', 'room-e1', 'now')",
            &[],
        )
        .unwrap();
        assert!(matches!(
            find(&db, "c1", &b.identity.short_id, 10).unwrap(),
            Some(Room::Broadcast(_))
        ));
        for name in ["room-e1", "es1", "ABCDEFGH"] {
            assert!(
                matches!(find(&db, "c1", name, 10).unwrap(), Some(Room::Event(e)) if e.id == "e1")
            );
            assert!(find(&db, "c2", name, 10).unwrap().is_none());
        }
        assert!(matches!(
            by_room_name(&db, "room-e1", 10).unwrap(),
            Some(Room::Event(_))
        ));
        assert!(matches!(
            by_room_name(&db, &b.identity.stream_id, 10).unwrap(),
            Some(Room::Broadcast(_))
        ));
        assert!(
            by_room_name(&db, "ABCDEFGH", 10).unwrap().is_none(),
            "short ids are no room names"
        );
        assert!(
            !has_visible_event_stream(&db, "c1", "es1").unwrap(),
            "private"
        );
        assert_eq!(visible_event_stream_owner(&db, "c1", "es1").unwrap(), None);
        assert_eq!(
            broadcasts::open_stream_ids_of_owner(&db, "c1", "ada", 10).unwrap(),
            vec![b.identity.stream_id.clone()]
        );
        assert!(
            broadcasts::open_stream_ids_of_owner(&db, "c2", "ada", 10)
                .unwrap()
                .is_empty()
        );
    }
}
