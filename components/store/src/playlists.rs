//! Playlists: a user's named lists of tracks, kept in order by a position per track; each
//! track plays an uploaded file or an external URL. The poster is a public file.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::ids;
use domain::pagination::Page;
use domain::time;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Playlist {
    pub id: String,
    pub client_id: String,
    pub owner_id: String,
    pub name: String,
    pub description: Option<String>,
    pub visibility: String,
    pub poster_file_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

fn from_row(row: &Row) -> Playlist {
    Playlist {
        id: row.text("id"),
        client_id: row.text("client_id"),
        owner_id: row.text("owner_id"),
        name: row.text("name"),
        description: row.opt_text("description"),
        visibility: row.text("visibility"),
        poster_file_id: row.opt_text("poster_file_id"),
        created_at: row.text("created_at"),
        updated_at: row.text("updated_at"),
    }
}

/// A stored track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    pub id: String,
    pub position: i64,
    pub title: String,
    pub artist: Option<String>,
    pub duration_seconds: Option<i64>,
    pub file_id: Option<String>,
    pub url: Option<String>,
}

fn track_of(row: &Row) -> Track {
    Track {
        id: row.text("id"),
        position: row.int("position"),
        title: row.text("title"),
        artist: row.opt_text("artist"),
        duration_seconds: row.opt_int("duration_seconds"),
        file_id: row.opt_text("file_id"),
        url: row.opt_text("url"),
    }
}

/// The fields a playlist is made of (on creation) or set to (on update).
#[derive(Debug, Clone)]
pub struct Fields {
    pub name: String,
    pub description: Option<String>,
    pub visibility: String,
}

/// A track to append.
#[derive(Debug, Clone)]
pub struct NewTrack {
    pub title: String,
    pub artist: Option<String>,
    pub duration: Option<i64>,
    pub file_id: Option<String>,
    pub url: Option<String>,
}

/// Stores a new playlist of `owner_id` without tracks or poster.
pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    fields: &Fields,
    now: i64,
) -> Result<Playlist, ApiError> {
    let id = ids::uuid();
    let at = time::format_rfc3339(now);
    db.execute(
        "INSERT INTO playlists (id, client_id, owner_id, name, description, visibility, poster_file_id, \
           created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)",
        &[
            id.clone().into(),
            client_id.into(),
            owner_id.into(),
            fields.name.clone().into(),
            fields.description.clone().into(),
            fields.visibility.clone().into(),
            at.clone().into(),
            at.into(),
        ],
    )?;
    load(db, client_id, &id)?.ok_or_else(|| ApiError::internal("a stored playlist is missing"))
}

/// The tenant's playlist `id`, if any.
pub fn load(db: &Db, client_id: &str, id: &str) -> Result<Option<Playlist>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM playlists WHERE client_id = ? AND id = ?",
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// One page of `owner_id`'s playlists (only the public ones when `public_only`), newest
/// first, each with its number of tracks; and how many there are.
pub fn page_of_owner(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    public_only: bool,
    page: Page,
) -> Result<(Vec<(Playlist, i64)>, i64), ApiError> {
    let filter = if public_only {
        "client_id = ? AND owner_id = ? AND visibility = 'public'"
    } else {
        "client_id = ? AND owner_id = ?"
    };
    let scope: [Value; 2] = [client_id.into(), owner_id.into()];
    let total = db.count(
        &format!("SELECT COUNT(*) FROM playlists WHERE {filter}"),
        &scope,
    )?;
    let mut params = scope.to_vec();
    params.extend([
        Value::Int(page.limit.into()),
        Value::Int(page.offset.into()),
    ]);
    let rows = db.query(
        &format!(
            "SELECT p.*, (SELECT COUNT(*) FROM playlist_tracks t WHERE t.client_id = p.client_id \
               AND t.playlist_id = p.id) AS track_count \
             FROM playlists p WHERE {filter} ORDER BY created_at DESC, id LIMIT ? OFFSET ?"
        ),
        &params,
    )?;
    let items = rows
        .iter()
        .map(|row| (from_row(row), row.int("track_count")))
        .collect();
    Ok((items, total))
}

/// Sets the playlist's name, description and visibility.
pub fn update(db: &Db, playlist: &Playlist, fields: &Fields, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE playlists SET name = ?, description = ?, visibility = ?, updated_at = ? \
         WHERE client_id = ? AND id = ?",
        &[
            fields.name.clone().into(),
            fields.description.clone().into(),
            fields.visibility.clone().into(),
            time::format_rfc3339(now).into(),
            playlist.client_id.clone().into(),
            playlist.id.clone().into(),
        ],
    )
}

/// Makes `file_id` the playlist's poster.
pub fn set_poster(db: &Db, playlist: &Playlist, file_id: &str, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE playlists SET poster_file_id = ?, updated_at = ? WHERE client_id = ? AND id = ?",
        &[
            file_id.into(),
            time::format_rfc3339(now).into(),
            playlist.client_id.clone().into(),
            playlist.id.clone().into(),
        ],
    )
}

/// Removes the playlist and its tracks (its poster file is the caller's to remove).
pub fn delete(db: &Db, playlist: &Playlist) -> Result<(), ApiError> {
    let scope: [Value; 2] = [
        playlist.client_id.clone().into(),
        playlist.id.clone().into(),
    ];
    db.transaction(|db| {
        db.execute(
            "DELETE FROM playlist_tracks WHERE client_id = ? AND playlist_id = ?",
            &scope,
        )?;
        db.execute(
            "DELETE FROM playlists WHERE client_id = ? AND id = ?",
            &scope,
        )
    })
}

/// Records a change to the playlist (its `updated_at`).
fn touch(db: &Db, playlist: &Playlist, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE playlists SET updated_at = ? WHERE client_id = ? AND id = ?",
        &[
            time::format_rfc3339(now).into(),
            playlist.client_id.clone().into(),
            playlist.id.clone().into(),
        ],
    )
}

/// Takes the playlist's row lock for the rest of the transaction (on SQLite the write lock
/// is already held), so changes to its tracks are decided one at a time on every back end.
fn lock(db: &Db, playlist: &Playlist) -> Result<(), ApiError> {
    db.execute(
        "UPDATE playlists SET updated_at = updated_at WHERE client_id = ? AND id = ?",
        &[
            playlist.client_id.clone().into(),
            playlist.id.clone().into(),
        ],
    )
}

/// The playlist's tracks in order.
pub fn tracks(db: &Db, playlist: &Playlist) -> Result<Vec<Track>, ApiError> {
    let rows = db.query(
        "SELECT * FROM playlist_tracks WHERE client_id = ? AND playlist_id = ? ORDER BY position, id",
        &[playlist.client_id.clone().into(), playlist.id.clone().into()],
    )?;
    Ok(rows.iter().map(track_of).collect())
}

/// The ids of the playlist's tracks in order.
pub fn track_ids(db: &Db, playlist: &Playlist) -> Result<Vec<String>, ApiError> {
    let rows = db.query(
        "SELECT id FROM playlist_tracks WHERE client_id = ? AND playlist_id = ? ORDER BY position, id",
        &[playlist.client_id.clone().into(), playlist.id.clone().into()],
    )?;
    Ok(rows.iter().map(|row| row.text("id")).collect())
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    Added,
    /// The playlist would hold more than the most allowed; nothing was added.
    Full,
}

/// Appends `new` after the playlist's last track, in order, unless the playlist would
/// then hold more than `max` tracks. Count and positions are decided under the playlist's
/// row lock, so concurrent appends neither overfill it nor share positions.
pub fn append_tracks(
    db: &Db,
    playlist: &Playlist,
    new: &[NewTrack],
    max: i64,
    now: i64,
) -> Result<Appended, ApiError> {
    let scope: [Value; 2] = [
        playlist.client_id.clone().into(),
        playlist.id.clone().into(),
    ];
    let at = time::format_rfc3339(now);
    db.transaction(|db| {
        lock(db, playlist)?;
        let count = db.count(
            "SELECT COUNT(*) FROM playlist_tracks WHERE client_id = ? AND playlist_id = ?",
            &scope,
        )?;
        if count + new.len() as i64 > max {
            return Ok(Appended::Full);
        }
        let next = db.count(
            "SELECT COALESCE(MAX(position) + 1, 0) FROM playlist_tracks WHERE client_id = ? AND playlist_id = ?",
            &scope,
        )?;
        for (offset, track) in new.iter().enumerate() {
            db.execute(
                "INSERT INTO playlist_tracks (id, client_id, playlist_id, position, title, artist, \
                   duration_seconds, file_id, url, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                &[
                    ids::uuid().into(),
                    playlist.client_id.clone().into(),
                    playlist.id.clone().into(),
                    Value::Int(next + offset as i64),
                    track.title.clone().into(),
                    track.artist.clone().into(),
                    track.duration.into(),
                    track.file_id.clone().into(),
                    track.url.clone().into(),
                    at.clone().into(),
                ],
            )?;
        }
        touch(db, playlist, now)?;
        Ok(Appended::Added)
    })
}

/// Removes track `track_id` of the playlist; `false` when it has no such track.
pub fn remove_track(
    db: &Db,
    playlist: &Playlist,
    track_id: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let removed = db.query(
        "DELETE FROM playlist_tracks WHERE client_id = ? AND playlist_id = ? AND id = ? RETURNING id",
        &[
            playlist.client_id.clone().into(),
            playlist.id.clone().into(),
            track_id.into(),
        ],
    )?;
    if removed.is_empty() {
        return Ok(false);
    }
    touch(db, playlist, now)?;
    Ok(true)
}

/// Gives the tracks the positions of their order in `order` (checked by the caller to be
/// the playlist's complete set, each once).
pub fn reorder(db: &Db, playlist: &Playlist, order: &[String], now: i64) -> Result<(), ApiError> {
    db.transaction(|db| {
        touch(db, playlist, now)?;
        for (position, id) in order.iter().enumerate() {
            db.execute(
                "UPDATE playlist_tracks SET position = ? WHERE client_id = ? AND playlist_id = ? AND id = ?",
                &[
                    Value::Int(position as i64),
                    playlist.client_id.clone().into(),
                    playlist.id.clone().into(),
                    id.into(),
                ],
            )?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn fields(name: &str, visibility: &str) -> Fields {
        Fields {
            name: name.into(),
            description: None,
            visibility: visibility.into(),
        }
    }

    fn track(title: &str) -> NewTrack {
        NewTrack {
            title: title.into(),
            artist: None,
            duration: Some(60),
            file_id: None,
            url: Some(format!("https://cdn.example/{title}.mp3")),
        }
    }

    fn titles(db: &Db, p: &Playlist) -> Vec<String> {
        tracks(db, p)
            .unwrap()
            .into_iter()
            .map(|t| t.title)
            .collect()
    }

    #[test]
    fn playlists_belong_to_their_tenant() {
        let db = testing::db();
        let p = insert(&db, "c1", "ada", &fields("Mix", "public"), 100).unwrap();
        assert_eq!(p.created_at, time::format_rfc3339(100));
        assert_eq!(p.updated_at, p.created_at);
        assert_eq!(load(&db, "c2", &p.id).unwrap(), None);
        let changed = Fields {
            name: "Renamed".into(),
            description: Some("notes".into()),
            visibility: "private".into(),
        };
        update(&db, &p, &changed, 200).unwrap();
        let p2 = load(&db, "c1", &p.id).unwrap().unwrap();
        assert_eq!(
            (
                p2.name.as_str(),
                p2.description.as_deref(),
                p2.visibility.as_str()
            ),
            ("Renamed", Some("notes"), "private")
        );
        assert_eq!(p2.updated_at, time::format_rfc3339(200));
        set_poster(&db, &p2, "file-1", 300).unwrap();
        assert_eq!(
            load(&db, "c1", &p.id).unwrap().unwrap().poster_file_id,
            Some("file-1".into())
        );
    }

    #[test]
    fn tracks_append_in_order_up_to_the_limit() {
        let db = testing::db();
        let p = insert(&db, "c1", "ada", &fields("Mix", "public"), 1).unwrap();
        let other = insert(&db, "c1", "ada", &fields("Other", "public"), 1).unwrap();
        assert_eq!(
            append_tracks(&db, &p, &[track("a"), track("b")], 3, 2).unwrap(),
            Appended::Added
        );
        append_tracks(&db, &other, &[track("x")], 3, 2).unwrap();
        assert_eq!(
            append_tracks(&db, &p, &[track("c"), track("d")], 3, 3).unwrap(),
            Appended::Full
        );
        assert_eq!(titles(&db, &p), ["a", "b"]);
        // A refused append changes nothing, not even the playlist's updated_at.
        assert_eq!(
            load(&db, "c1", &p.id).unwrap().unwrap().updated_at,
            time::format_rfc3339(2)
        );
        assert_eq!(
            append_tracks(&db, &p, &[track("c")], 3, 4).unwrap(),
            Appended::Added
        );
        let stored = tracks(&db, &p).unwrap();
        let positions: Vec<i64> = stored.iter().map(|t| t.position).collect();
        assert_eq!(positions, [0, 1, 2]);
        assert_eq!(stored[0].duration_seconds, Some(60));
        assert_eq!(
            load(&db, "c1", &p.id).unwrap().unwrap().updated_at,
            time::format_rfc3339(4)
        );
    }

    #[test]
    fn positions_continue_after_the_last_even_after_removals() {
        let db = testing::db();
        let p = insert(&db, "c1", "ada", &fields("Mix", "public"), 1).unwrap();
        append_tracks(&db, &p, &[track("a"), track("b"), track("c")], 10, 1).unwrap();
        let first = tracks(&db, &p).unwrap()[0].id.clone();
        assert!(remove_track(&db, &p, &first, 2).unwrap());
        assert!(!remove_track(&db, &p, &first, 3).unwrap());
        append_tracks(&db, &p, &[track("d")], 10, 4).unwrap();
        let stored = tracks(&db, &p).unwrap();
        let order: Vec<(&str, i64)> = stored
            .iter()
            .map(|t| (t.title.as_str(), t.position))
            .collect();
        assert_eq!(order, [("b", 1), ("c", 2), ("d", 3)]);
    }

    #[test]
    fn a_track_of_another_playlist_is_not_removed() {
        let db = testing::db();
        let p = insert(&db, "c1", "ada", &fields("Mine", "public"), 1).unwrap();
        let q = insert(&db, "c1", "ada", &fields("Also mine", "public"), 1).unwrap();
        append_tracks(&db, &q, &[track("q")], 10, 1).unwrap();
        let q_track = track_ids(&db, &q).unwrap().remove(0);
        assert!(!remove_track(&db, &p, &q_track, 2).unwrap());
        assert_eq!(titles(&db, &q), ["q"]);
    }

    #[test]
    fn reordering_sets_positions() {
        let db = testing::db();
        let p = insert(&db, "c1", "ada", &fields("Mix", "public"), 1).unwrap();
        append_tracks(&db, &p, &[track("a"), track("b"), track("c")], 10, 1).unwrap();
        let mut order = track_ids(&db, &p).unwrap();
        order.reverse();
        reorder(&db, &p, &order, 5).unwrap();
        assert_eq!(titles(&db, &p), ["c", "b", "a"]);
        assert_eq!(track_ids(&db, &p).unwrap(), order);
        assert_eq!(
            load(&db, "c1", &p.id).unwrap().unwrap().updated_at,
            time::format_rfc3339(5)
        );
    }

    #[test]
    fn pages_count_tracks_and_hide_others_non_public_playlists() {
        let db = testing::db();
        let old = insert(&db, "c1", "ada", &fields("Old", "public"), 10).unwrap();
        let hidden = insert(&db, "c1", "ada", &fields("Hidden", "unlisted"), 20).unwrap();
        insert(&db, "c1", "bob", &fields("Bob's", "public"), 30).unwrap();
        insert(&db, "c2", "ada", &fields("Elsewhere", "public"), 40).unwrap();
        append_tracks(&db, &old, &[track("a"), track("b")], 10, 11).unwrap();
        let (all, total) = page_of_owner(&db, "c1", "ada", false, Page::default()).unwrap();
        assert_eq!(total, 2);
        let seen: Vec<(&str, i64)> = all.iter().map(|(p, n)| (p.name.as_str(), *n)).collect();
        assert_eq!(seen, [("Hidden", 0), ("Old", 2)]);
        let (public, total) = page_of_owner(&db, "c1", "ada", true, Page::default()).unwrap();
        assert_eq!((public.len(), total), (1, 1));
        assert_eq!(public[0].0.id, old.id);
        let second = Page {
            limit: 1,
            offset: 1,
        };
        let (page, total) = page_of_owner(&db, "c1", "ada", false, second).unwrap();
        assert_eq!((page[0].0.id.as_str(), total), (old.id.as_str(), 2));
        assert_ne!(hidden.id, old.id);
    }

    #[test]
    fn deleting_a_playlist_removes_its_tracks_only() {
        let db = testing::db();
        let p = insert(&db, "c1", "ada", &fields("Gone", "public"), 1).unwrap();
        let kept = insert(&db, "c1", "ada", &fields("Kept", "public"), 1).unwrap();
        append_tracks(&db, &p, &[track("a")], 10, 1).unwrap();
        append_tracks(&db, &kept, &[track("k")], 10, 1).unwrap();
        delete(&db, &p).unwrap();
        assert_eq!(load(&db, "c1", &p.id).unwrap(), None);
        assert!(tracks(&db, &p).unwrap().is_empty());
        assert_eq!(titles(&db, &kept), ["k"]);
    }
}
