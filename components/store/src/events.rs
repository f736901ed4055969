//! Scheduled events: a stream announced for a time, with a stream identity generated as a
//! broadcast's is, its SFU room (named by the streamId), and optionally a media file the
//! egress player plays into the room.

use super::broadcasts::stream_identity_of;
use super::{Db, Row, Value};
use domain::ApiError;
use domain::broadcast::{StreamIdentity, Visibility};
use domain::ids;
use domain::pagination::Page;
use domain::time;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: String,
    pub client_id: String,
    pub owner_id: String,
    pub title: String,
    pub description: Option<String>,
    pub visibility: Visibility,
    /// Epoch seconds.
    pub scheduled_for: i64,
    pub playback: Option<Playback>,
    pub identity: StreamIdentity,
    pub room_name: String,
    pub created_at: String,
}

impl Event {
    pub fn is_owned_by(&self, user_id: &str) -> bool {
        self.owner_id == user_id
    }
}

/// A media file the egress player streams into the event's room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Playback {
    pub url: String,
    /// `audio` or `video`.
    pub kind: String,
}

fn from_row(row: &Row) -> Event {
    let playback = row.opt_text("playback_url").map(|url| Playback {
        url,
        kind: row
            .opt_text("playback_type")
            .unwrap_or_else(|| "video".into()),
    });
    Event {
        id: row.text("id"),
        client_id: row.text("client_id"),
        owner_id: row.text("owner_id"),
        title: row.text("title"),
        description: row.opt_text("description"),
        visibility: Visibility::stored(&row.text("visibility")),
        scheduled_for: row.int("scheduled_for"),
        playback,
        identity: stream_identity_of(row),
        room_name: row.text("room_name"),
        created_at: row.text("created_at"),
    }
}

/// What a new event is made of.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub title: String,
    pub description: Option<String>,
    pub visibility: Visibility,
    pub scheduled_for: i64,
    pub playback: Option<Playback>,
}

/// Stores a new event of `owner_id` with a fresh stream identity; its SFU room is named
/// by the streamId, as a broadcast's is.
pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    new: &NewEvent,
    now: i64,
) -> Result<Event, ApiError> {
    let identity = StreamIdentity::generate();
    let id = ids::uuid();
    db.execute(
        "INSERT INTO scheduled_events (id, client_id, owner_id, title, description, visibility, scheduled_for, \
           playback_url, playback_type, short_id, stream_id, stream_key, room_name, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            id.clone().into(),
            client_id.into(),
            owner_id.into(),
            new.title.clone().into(),
            new.description.clone().into(),
            new.visibility.into(),
            Value::Int(new.scheduled_for),
            new.playback.as_ref().map(|p| p.url.clone()).into(),
            new.playback.as_ref().map(|p| p.kind.clone()).into(),
            identity.short_id.clone().into(),
            identity.stream_id.clone().into(),
            identity.stream_key.clone().into(),
            identity.stream_id.clone().into(),
            time::format_rfc3339(now).into(),
        ],
    )?;
    load(db, client_id, &id)?.ok_or_else(|| ApiError::internal("a stored event is missing"))
}

fn find(db: &Db, filter: &str, params: &[Value]) -> Result<Option<Event>, ApiError> {
    Ok(db
        .query_one(
            &format!("SELECT * FROM scheduled_events WHERE {filter}"),
            params,
        )?
        .as_ref()
        .map(from_row))
}

/// The tenant's event `id`, if any.
pub fn load(db: &Db, client_id: &str, id: &str) -> Result<Option<Event>, ApiError> {
    find(
        db,
        "client_id = ? AND id = ?",
        &[client_id.into(), id.into()],
    )
}

/// The tenant's event whose SFU room is `room_name`.
pub fn load_by_room(db: &Db, client_id: &str, room_name: &str) -> Result<Option<Event>, ApiError> {
    find(
        db,
        "client_id = ? AND room_name = ?",
        &[client_id.into(), room_name.into()],
    )
}

/// The tenant's event whose short id is `short_id`.
pub fn load_by_short_id(
    db: &Db,
    client_id: &str,
    short_id: &str,
) -> Result<Option<Event>, ApiError> {
    find(
        db,
        "client_id = ? AND short_id = ?",
        &[client_id.into(), short_id.into()],
    )
}

/// The event (of any tenant) whose short id is `short_id`: the public watch page is reached
/// by the short id alone, as a broadcast's is (short ids are unique in the table).
pub fn load_by_any_short_id(db: &Db, short_id: &str) -> Result<Option<Event>, ApiError> {
    find(db, "short_id = ?", &[short_id.into()])
}

/// The tenant's event whose streamId is `stream_id`.
pub fn load_by_stream(
    db: &Db,
    client_id: &str,
    stream_id: &str,
) -> Result<Option<Event>, ApiError> {
    find(
        db,
        "client_id = ? AND stream_id = ?",
        &[client_id.into(), stream_id.into()],
    )
}

/// The event (of any tenant) whose streamId or room name is `room`: for callers that prove
/// something about the room rather than the tenant (the recording page).
pub fn load_by_any_room(db: &Db, room: &str) -> Result<Option<Event>, ApiError> {
    find(db, "stream_id = ?1 OR room_name = ?1", &[room.into()])
}

/// One page of the tenant's events that `viewer_id` may see (their own and the public
/// ones) scheduled at or after `since`, soonest first; and how many there are.
pub fn page_visible_to(
    db: &Db,
    client_id: &str,
    viewer_id: &str,
    since: i64,
    page: Page,
) -> Result<(Vec<Event>, i64), ApiError> {
    let (rows, total) = db.page(
        "scheduled_events",
        "client_id = ? AND (owner_id = ? OR visibility = 'public') AND scheduled_for >= ?",
        &[client_id.into(), viewer_id.into(), Value::Int(since)],
        "scheduled_for, id",
        page,
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

/// Removes the event.
pub fn delete(db: &Db, event: &Event) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM scheduled_events WHERE client_id = ? AND id = ?",
        &[event.client_id.clone().into(), event.id.clone().into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn new(title: &str, visibility: &str, at: i64) -> NewEvent {
        NewEvent {
            title: title.into(),
            description: None,
            visibility: Visibility::stored(visibility),
            scheduled_for: at,
            playback: None,
        }
    }

    fn titles(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.title.as_str()).collect()
    }

    #[test]
    fn an_event_gets_its_own_identity_and_room() {
        let db = testing::db();
        let mut with_playback = new("Launch", "public", 2_000);
        with_playback.playback = Some(Playback {
            url: "https://cdn.example/intro.mp3".into(),
            kind: "audio".into(),
        });
        let e = insert(&db, "c1", "ada", &with_playback, 1_000).unwrap();
        let f = insert(&db, "c1", "ada", &new("Other", "public", 2_000), 1_000).unwrap();
        assert_eq!(e.room_name, e.identity.stream_id);
        assert_ne!(e.identity, f.identity);
        assert_eq!(e.playback, with_playback.playback);
        assert_eq!(f.playback, None);
        assert_eq!(e.created_at, time::format_rfc3339(1_000));
        assert_eq!(load(&db, "c2", &e.id).unwrap(), None);
        let by = |found: Option<Event>| found.map(|x| x.id);
        assert_eq!(
            by(load_by_room(&db, "c1", &e.room_name).unwrap()),
            Some(e.id.clone())
        );
        assert_eq!(
            by(load_by_short_id(&db, "c1", &e.identity.short_id).unwrap()),
            Some(e.id.clone())
        );
        assert_eq!(
            by(load_by_stream(&db, "c1", &e.identity.stream_id).unwrap()),
            Some(e.id.clone())
        );
        assert_eq!(load_by_room(&db, "c2", &e.room_name).unwrap(), None);
        assert_eq!(
            load_by_short_id(&db, "c2", &e.identity.short_id).unwrap(),
            None
        );
        assert_eq!(
            by(load_by_any_room(&db, &e.room_name).unwrap()),
            Some(e.id.clone())
        );
        delete(&db, &e).unwrap();
        assert_eq!(load(&db, "c1", &e.id).unwrap(), None);
        assert!(load(&db, "c1", &f.id).unwrap().is_some());
    }

    #[test]
    fn the_list_shows_own_and_public_events_soonest_first() {
        let db = testing::db();
        insert(&db, "c1", "ada", &new("Ada late", "public", 300), 1).unwrap();
        insert(&db, "c1", "ada", &new("Ada private", "private", 200), 1).unwrap();
        insert(&db, "c1", "bob", &new("Bob public", "public", 100), 1).unwrap();
        insert(&db, "c1", "bob", &new("Bob unlisted", "unlisted", 150), 1).unwrap();
        insert(&db, "c1", "bob", &new("Bob private", "private", 250), 1).unwrap();
        insert(&db, "c2", "ada", &new("Elsewhere", "public", 50), 1).unwrap();
        let (items, total) = page_visible_to(&db, "c1", "ada", i64::MIN, Page::default()).unwrap();
        assert_eq!(total, 3);
        assert_eq!(titles(&items), ["Bob public", "Ada private", "Ada late"]);
        let (items, total) = page_visible_to(&db, "c1", "bob", 150, Page::default()).unwrap();
        assert_eq!(total, 3);
        assert_eq!(titles(&items), ["Bob unlisted", "Bob private", "Ada late"]);
        let page = Page {
            limit: 1,
            offset: 2,
        };
        let (items, total) = page_visible_to(&db, "c1", "ada", i64::MIN, page).unwrap();
        assert_eq!((titles(&items), total), (vec!["Ada late"], 3));
    }
}
