//! Music links: a user's link to an account on the external music platform, at most one
//! per user. The music account is set only by a verified flow ([`attach`]); the music
//! token is stored sealed (the caller seals and opens it) and goes with the row.

use super::{Db, Row};
use domain::ApiError;
use domain::ids;
use domain::time;

/// A link as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub id: String,
    pub music_user_id: Option<String>,
    /// The sealed music token.
    pub sealed_token: Option<String>,
    pub is_active: bool,
    pub linked_at: Option<String>,
}

fn from_row(row: &Row) -> Link {
    Link {
        id: row.text("id"),
        music_user_id: row.opt_text("music_user_id"),
        sealed_token: row.opt_text("music_token"),
        is_active: row.bool("is_active"),
        linked_at: row.opt_text("linked_at"),
    }
}

/// The user's link, if any.
pub fn load(db: &Db, client_id: &str, user_id: &str) -> Result<Option<Link>, ApiError> {
    Ok(db
        .query_one(
            "SELECT id, music_user_id, music_token, is_active, linked_at FROM music_links \
             WHERE client_id = ? AND user_id = ?",
            &[client_id.into(), user_id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// Creates the user's link without a music account (active or not), unless there is one.
pub fn create(
    db: &Db,
    client_id: &str,
    user_id: &str,
    is_active: bool,
    now: i64,
) -> Result<(), ApiError> {
    let at = time::format_rfc3339(now);
    db.execute(
        "INSERT INTO music_links (id, client_id, user_id, is_active, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (client_id, user_id) DO NOTHING",
        &[
            ids::uuid().into(),
            client_id.into(),
            user_id.into(),
            is_active.into(),
            at.clone().into(),
            at.into(),
        ],
    )
}

/// Links the user to `music_user_id` (active), creating the link when there is none. A
/// new sealed token replaces the stored one; without one, the stored token is kept only
/// when the music account stays the same. `linked_at` changes only with the account.
pub fn attach(
    db: &Db,
    client_id: &str,
    user_id: &str,
    music_user_id: &str,
    sealed_token: Option<&str>,
    now: i64,
) -> Result<Link, ApiError> {
    let at = time::format_rfc3339(now);
    db.execute(
        "INSERT INTO music_links (id, client_id, user_id, music_user_id, music_token, is_active, linked_at, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?) \
         ON CONFLICT (client_id, user_id) DO UPDATE SET \
           music_token = CASE WHEN excluded.music_token IS NOT NULL THEN excluded.music_token \
                              WHEN music_links.music_user_id = excluded.music_user_id THEN music_links.music_token \
                              ELSE NULL END, \
           linked_at = CASE WHEN music_links.music_user_id = excluded.music_user_id AND music_links.linked_at IS NOT NULL \
                            THEN music_links.linked_at ELSE excluded.linked_at END, \
           music_user_id = excluded.music_user_id, \
           is_active = 1, \
           updated_at = excluded.updated_at",
        &[
            ids::uuid().into(),
            client_id.into(),
            user_id.into(),
            music_user_id.into(),
            sealed_token.into(),
            at.clone().into(),
            at.clone().into(),
            at.into(),
        ],
    )?;
    load(db, client_id, user_id)?
        .ok_or_else(|| ApiError::internal("a stored music link is missing"))
}

/// Turns the user's link on or off.
pub fn set_active(
    db: &Db,
    client_id: &str,
    user_id: &str,
    is_active: bool,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE music_links SET is_active = ?, updated_at = ? WHERE client_id = ? AND user_id = ?",
        &[
            is_active.into(),
            time::format_rfc3339(now).into(),
            client_id.into(),
            user_id.into(),
        ],
    )
}

/// Replaces the user's sealed music token.
pub fn set_token(
    db: &Db,
    client_id: &str,
    user_id: &str,
    sealed_token: &str,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE music_links SET music_token = ?, updated_at = ? WHERE client_id = ? AND user_id = ?",
        &[
            sealed_token.into(),
            time::format_rfc3339(now).into(),
            client_id.into(),
            user_id.into(),
        ],
    )
}

/// Removes the user's link and its sealed token.
pub fn delete(db: &Db, client_id: &str, user_id: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM music_links WHERE client_id = ? AND user_id = ?",
        &[client_id.into(), user_id.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn a_user_has_one_link_per_tenant() {
        let db = testing::db();
        create(&db, "c1", "ada", false, 10).unwrap();
        create(&db, "c1", "ada", true, 11).unwrap();
        let link = load(&db, "c1", "ada").unwrap().unwrap();
        assert!(!link.is_active, "a second create changes nothing");
        assert_eq!((link.music_user_id, link.linked_at), (None, None));
        assert_eq!(load(&db, "c2", "ada").unwrap(), None);
        assert_eq!(load(&db, "c1", "bob").unwrap(), None);
        set_active(&db, "c1", "ada", true, 12).unwrap();
        assert!(load(&db, "c1", "ada").unwrap().unwrap().is_active);
        delete(&db, "c1", "ada").unwrap();
        assert_eq!(load(&db, "c1", "ada").unwrap(), None);
    }

    #[test]
    fn attaching_keeps_the_token_and_time_only_for_the_same_account() {
        let db = testing::db();
        create(&db, "c1", "ada", false, 10).unwrap();
        let first = attach(&db, "c1", "ada", "m1", Some("sealed-1"), 20).unwrap();
        assert!(first.is_active);
        assert_eq!(first.music_user_id.as_deref(), Some("m1"));
        assert_eq!(first.sealed_token.as_deref(), Some("sealed-1"));
        let linked = time::format_rfc3339(20);
        assert_eq!(first.linked_at.as_deref(), Some(linked.as_str()));
        // The same account without a token: the token and the link time stay.
        let same = attach(&db, "c1", "ada", "m1", None, 30).unwrap();
        assert_eq!(same.sealed_token.as_deref(), Some("sealed-1"));
        assert_eq!(same.linked_at.as_deref(), Some(linked.as_str()));
        assert_eq!(same.id, first.id);
        // A new token replaces the old one.
        let renewed = attach(&db, "c1", "ada", "m1", Some("sealed-2"), 40).unwrap();
        assert_eq!(renewed.sealed_token.as_deref(), Some("sealed-2"));
        // Another account without a token: the old account's token is dropped.
        let other = attach(&db, "c1", "ada", "m2", None, 50).unwrap();
        assert_eq!(other.music_user_id.as_deref(), Some("m2"));
        assert_eq!(other.sealed_token, None);
        let relinked = time::format_rfc3339(50);
        assert_eq!(other.linked_at.as_deref(), Some(relinked.as_str()));
        set_token(&db, "c1", "ada", "sealed-3", 60).unwrap();
        assert_eq!(
            load(&db, "c1", "ada")
                .unwrap()
                .unwrap()
                .sealed_token
                .as_deref(),
            Some("sealed-3")
        );
    }

    #[test]
    fn attaching_without_a_link_creates_an_active_one() {
        let db = testing::db();
        set_active(&db, "c1", "ada", false, 1).unwrap();
        let link = attach(&db, "c1", "ada", "m1", None, 2).unwrap();
        assert!(link.is_active);
        assert_eq!(link.sealed_token, None);
        attach(&db, "c2", "ada", "m9", None, 3).unwrap();
        assert_eq!(
            load(&db, "c1", "ada")
                .unwrap()
                .unwrap()
                .music_user_id
                .as_deref(),
            Some("m1")
        );
    }
}
