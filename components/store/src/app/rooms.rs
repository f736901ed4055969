//! SFU rooms: what a room name, stream id or short id names, across broadcasts and
//! scheduled events.

use super::broadcasts;
use crate::Db;
use crate::broadcasts::Broadcast;
use crate::rooms::{self as store, EventRoom};
use domain::ApiError;

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
    Ok(store::event_room(db, client_id, id)?.map(Room::Event))
}

/// The room (of any tenant) whose SFU room name is `room`: a broadcast's streamId, or a
/// scheduled event's room name or streamId. For callers that prove something about the
/// room rather than the tenant (the recording page, the SFU).
pub fn by_room_name(db: &Db, room: &str, now: i64) -> Result<Option<Room>, ApiError> {
    if let Some(b) = broadcasts::load_by_room(db, room, now)? {
        return Ok(Some(Room::Broadcast(Box::new(b))));
    }
    Ok(store::event_room_by_name(db, room)?.map(Room::Event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broadcasts as broadcasts_store;
    use crate::events::{self, NewEvent};
    use crate::rooms::{has_visible_event_stream, visible_event_stream_owner};
    use crate::testing;
    use domain::broadcast::Visibility;

    #[test]
    fn rooms_are_found_by_every_name_within_the_tenant() {
        let db = testing::db();
        let b = broadcasts_store::insert(&db, "c1", Some("ada"), &testing::new_broadcast(), 10)
            .unwrap();
        let later = NewEvent {
            title: "Later".into(),
            description: None,
            visibility: Visibility::Private,
            scheduled_for: 99,
            playback: None,
        };
        let e = events::insert(&db, "c1", "ada", &later, 10).unwrap();
        assert!(matches!(
            find(&db, "c1", &b.identity.short_id, 10).unwrap(),
            Some(Room::Broadcast(_))
        ));
        for name in [&e.room_name, &e.identity.stream_id, &e.identity.short_id] {
            assert!(
                matches!(find(&db, "c1", name, 10).unwrap(), Some(Room::Event(found)) if found.id == e.id)
            );
            assert!(find(&db, "c2", name, 10).unwrap().is_none());
        }
        assert!(matches!(
            by_room_name(&db, &e.room_name, 10).unwrap(),
            Some(Room::Event(_))
        ));
        assert!(matches!(
            by_room_name(&db, &b.identity.stream_id, 10).unwrap(),
            Some(Room::Broadcast(_))
        ));
        assert!(
            by_room_name(&db, &e.identity.short_id, 10)
                .unwrap()
                .is_none(),
            "short ids are no room names"
        );
        let stream = &e.identity.stream_id;
        assert!(
            !has_visible_event_stream(&db, "c1", stream).unwrap(),
            "private"
        );
        assert_eq!(visible_event_stream_owner(&db, "c1", stream).unwrap(), None);
        assert_eq!(
            broadcasts_store::open_stream_ids_of_owner(&db, "c1", "ada", 10).unwrap(),
            vec![b.identity.stream_id.clone()]
        );
        assert!(
            broadcasts_store::open_stream_ids_of_owner(&db, "c2", "ada", 10)
                .unwrap()
                .is_empty()
        );
    }
}
