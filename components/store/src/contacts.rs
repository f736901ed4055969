//! Contacts: a user's entry for each user they follow or are followed by, with a contact
//! id of its own and display fields that are the owner's notes (they never change the
//! other user's profile). Following links two users as contacts of each other; the two
//! entries go once neither follows the other.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::ids;
use domain::pagination::Page;
use domain::time;

/// A contact as its owner sees it: the other user's public fields, the owner's notes
/// (names fall back to the other user's own), and who follows whom.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Contact")]
pub struct Contact {
    /// The contact's own id.
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    /// The other user's id.
    #[schemars(extend("format" = "uuid"))]
    pub user_id: String,
    pub username: String,
    pub display_name: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<String>,
    pub phone_number: Option<String>,
    pub avatar_url: Option<String>,
    /// The owner follows the contact.
    pub following: bool,
    /// The contact follows the owner.
    pub followed_by: bool,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
}

const CONTACT_QUERY: &str = "SELECT c.id, c.contact_user_id, u.username, c.display_name, \
       COALESCE(c.first_name, u.first_name) AS first_name, COALESCE(c.last_name, u.last_name) AS last_name, \
       c.email, c.phone_number, u.avatar_url, c.created_at, c.updated_at, \
       CASE WHEN EXISTS (SELECT 1 FROM follows f WHERE f.client_id = c.client_id AND f.follower_id = c.owner_id AND f.followee_id = c.contact_user_id) THEN 1 ELSE 0 END AS following, \
       CASE WHEN EXISTS (SELECT 1 FROM follows f WHERE f.client_id = c.client_id AND f.follower_id = c.contact_user_id AND f.followee_id = c.owner_id) THEN 1 ELSE 0 END AS followed_by \
     FROM contacts c JOIN users u ON u.client_id = c.client_id AND u.id = c.contact_user_id \
     WHERE c.client_id = ? AND c.owner_id = ?";

fn from_row(row: &Row) -> Contact {
    Contact {
        id: row.text("id"),
        user_id: row.text("contact_user_id"),
        username: row.text("username"),
        display_name: row.opt_text("display_name"),
        first_name: row.opt_text("first_name"),
        last_name: row.opt_text("last_name"),
        email: row.opt_text("email"),
        phone_number: row.opt_text("phone_number"),
        avatar_url: row.opt_text("avatar_url"),
        following: row.bool("following"),
        followed_by: row.bool("followed_by"),
        created_at: row.text("created_at"),
        updated_at: row.text("updated_at"),
    }
}

/// Makes `a` and `b` contacts of each other (after one followed the other); entries that
/// exist are kept as they are.
pub fn link(db: &Db, client_id: &str, a: &str, b: &str, now: i64) -> Result<(), ApiError> {
    let at = time::format_rfc3339(now);
    for (owner, other) in [(a, b), (b, a)] {
        db.execute(
            "INSERT INTO contacts (id, client_id, owner_id, contact_user_id, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            &[
                ids::uuid().into(),
                client_id.into(),
                owner.into(),
                other.into(),
                at.clone().into(),
                at.clone().into(),
            ],
        )?;
    }
    Ok(())
}

/// Removes the two contact entries of `a` and `b` once neither follows the other.
pub fn unlink_if_unrelated(db: &Db, client_id: &str, a: &str, b: &str) -> Result<(), ApiError> {
    let pair: [Value; 3] = [client_id.into(), a.into(), b.into()];
    let remaining = db.count(
        "SELECT COUNT(*) FROM follows WHERE client_id = ?1 \
           AND ((follower_id = ?2 AND followee_id = ?3) OR (follower_id = ?3 AND followee_id = ?2))",
        &pair,
    )?;
    if remaining == 0 {
        db.execute(
            "DELETE FROM contacts WHERE client_id = ?1 \
               AND ((owner_id = ?2 AND contact_user_id = ?3) OR (owner_id = ?3 AND contact_user_id = ?2))",
            &pair,
        )?;
    }
    Ok(())
}

/// Removes every contact entry of `user_id` and every entry naming them (the account is
/// going away).
pub fn forget_user(db: &Db, client_id: &str, user_id: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM contacts WHERE client_id = ?1 AND (owner_id = ?2 OR contact_user_id = ?2)",
        &[client_id.into(), user_id.into()],
    )
}

/// `owner_id`'s contact `id`, if any.
pub fn load(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    id: &str,
) -> Result<Option<Contact>, ApiError> {
    Ok(db
        .query_one(
            &format!("{CONTACT_QUERY} AND c.id = ?"),
            &[client_id.into(), owner_id.into(), id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// One page of `owner_id`'s contacts by username; and how many there are.
pub fn page_of_owner(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    page: Page,
) -> Result<(Vec<Contact>, i64), ApiError> {
    let total = db.count(
        "SELECT COUNT(*) FROM contacts WHERE client_id = ? AND owner_id = ?",
        &[client_id.into(), owner_id.into()],
    )?;
    let rows = db.query(
        &format!("{CONTACT_QUERY} ORDER BY u.username_key, c.id LIMIT ? OFFSET ?"),
        &[
            client_id.into(),
            owner_id.into(),
            Value::Int(page.limit.into()),
            Value::Int(page.offset.into()),
        ],
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

/// The owner's notes on a contact; `None` keeps what is stored.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    pub display_name: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub email: Option<String>,
    pub phone_number: Option<String>,
}

/// Applies `notes` to `owner_id`'s contact `id`.
pub fn update(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    id: &str,
    notes: &Notes,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE contacts SET phone_number = COALESCE(?, phone_number), display_name = COALESCE(?, display_name), \
           first_name = COALESCE(?, first_name), last_name = COALESCE(?, last_name), email = COALESCE(?, email), updated_at = ? \
         WHERE client_id = ? AND owner_id = ? AND id = ?",
        &[
            notes.phone_number.clone().into(),
            notes.display_name.clone().into(),
            notes.first_name.clone().into(),
            notes.last_name.clone().into(),
            notes.email.clone().into(),
            time::format_rfc3339(now).into(),
            client_id.into(),
            owner_id.into(),
            id.into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn user(db: &Db, client: &str, id: &str, username: &str) {
        db.execute(
            "INSERT INTO users (id, client_id, username, username_key, email, email_key, password_hash, \
               first_name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'x', ?, 't', 't')",
            &[
                id.into(),
                client.into(),
                username.into(),
                username.to_lowercase().into(),
                format!("{id}@x.io").into(),
                format!("{id}@x.io").into(),
                format!("{username}'s first").into(),
            ],
        )
        .unwrap();
    }

    fn follow(db: &Db, client: &str, follower: &str, followee: &str) {
        db.execute(
            "INSERT INTO follows (client_id, follower_id, followee_id, created_at) VALUES (?, ?, ?, 't')",
            &[client.into(), follower.into(), followee.into()],
        )
        .unwrap();
    }

    fn unfollow(db: &Db, client: &str, follower: &str, followee: &str) {
        db.execute(
            "DELETE FROM follows WHERE client_id = ? AND follower_id = ? AND followee_id = ?",
            &[client.into(), follower.into(), followee.into()],
        )
        .unwrap();
    }

    fn setup() -> Db {
        let db = testing::db();
        user(&db, "c1", "ada", "Ada");
        user(&db, "c1", "bob", "bob");
        user(&db, "c1", "cy", "Cy");
        user(&db, "c2", "ada-elsewhere", "Ada");
        db
    }

    fn usernames(contacts: &[Contact]) -> Vec<&str> {
        contacts.iter().map(|c| c.username.as_str()).collect()
    }

    #[test]
    fn following_makes_both_users_contacts_until_neither_follows() {
        let db = setup();
        follow(&db, "c1", "ada", "bob");
        link(&db, "c1", "ada", "bob", 10).unwrap();
        let (mine, _) = page_of_owner(&db, "c1", "ada", Page::default()).unwrap();
        let (theirs, _) = page_of_owner(&db, "c1", "bob", Page::default()).unwrap();
        assert_eq!(usernames(&mine), ["bob"]);
        assert!(mine[0].following && !mine[0].followed_by);
        assert_eq!(usernames(&theirs), ["Ada"]);
        assert!(!theirs[0].following && theirs[0].followed_by);
        // Following back keeps the entries (and their ids).
        follow(&db, "c1", "bob", "ada");
        link(&db, "c1", "bob", "ada", 20).unwrap();
        let (again, total) = page_of_owner(&db, "c1", "ada", Page::default()).unwrap();
        assert_eq!((again[0].id.as_str(), total), (mine[0].id.as_str(), 1));
        assert!(again[0].following && again[0].followed_by);
        assert_eq!(again[0].created_at, time::format_rfc3339(10));
        // One unfollow: still related.
        unfollow(&db, "c1", "ada", "bob");
        unlink_if_unrelated(&db, "c1", "ada", "bob").unwrap();
        assert_eq!(
            page_of_owner(&db, "c1", "ada", Page::default()).unwrap().1,
            1
        );
        // Neither follows: both entries go.
        unfollow(&db, "c1", "bob", "ada");
        unlink_if_unrelated(&db, "c1", "bob", "ada").unwrap();
        assert_eq!(
            page_of_owner(&db, "c1", "ada", Page::default()).unwrap().1,
            0
        );
        assert_eq!(
            page_of_owner(&db, "c1", "bob", Page::default()).unwrap().1,
            0
        );
    }

    #[test]
    fn notes_are_the_owners_and_names_fall_back_to_the_users() {
        let db = setup();
        follow(&db, "c1", "ada", "bob");
        link(&db, "c1", "ada", "bob", 10).unwrap();
        let (mine, _) = page_of_owner(&db, "c1", "ada", Page::default()).unwrap();
        let id = mine[0].id.clone();
        assert_eq!(mine[0].first_name.as_deref(), Some("bob's first"));
        let notes = Notes {
            display_name: Some("Bobby".into()),
            first_name: Some("Robert".into()),
            phone_number: Some("+1 555".into()),
            ..Notes::default()
        };
        update(&db, "c1", "ada", &id, &notes, 30).unwrap();
        // Only the fields sent change.
        update(&db, "c1", "ada", &id, &Notes::default(), 40).unwrap();
        let c = load(&db, "c1", "ada", &id).unwrap().unwrap();
        assert_eq!(c.display_name.as_deref(), Some("Bobby"));
        assert_eq!(c.first_name.as_deref(), Some("Robert"));
        assert_eq!(c.phone_number.as_deref(), Some("+1 555"));
        assert_eq!(c.email, None);
        assert_eq!(c.updated_at, time::format_rfc3339(40));
        // Bob's entry for Ada and another owner's view are untouched.
        assert_eq!(load(&db, "c1", "bob", &id).unwrap(), None);
        let (theirs, _) = page_of_owner(&db, "c1", "bob", Page::default()).unwrap();
        assert_eq!(theirs[0].display_name, None);
        update(&db, "c1", "bob", &id, &notes, 50).unwrap();
        assert_eq!(
            load(&db, "c1", "ada", &id).unwrap().unwrap().updated_at,
            time::format_rfc3339(40)
        );
        assert_eq!(load(&db, "c2", "ada", &id).unwrap(), None);
    }

    #[test]
    fn contacts_page_by_username_ignoring_case() {
        let db = setup();
        for other in ["cy", "bob"] {
            follow(&db, "c1", "ada", other);
            link(&db, "c1", "ada", other, 10).unwrap();
        }
        let (all, total) = page_of_owner(&db, "c1", "ada", Page::default()).unwrap();
        assert_eq!((usernames(&all), total), (vec!["bob", "Cy"], 2));
        let second = Page {
            limit: 1,
            offset: 1,
        };
        let (page, total) = page_of_owner(&db, "c1", "ada", second).unwrap();
        assert_eq!((usernames(&page), total), (vec!["Cy"], 2));
        forget_user(&db, "c1", "bob").unwrap();
        let (left, _) = page_of_owner(&db, "c1", "ada", Page::default()).unwrap();
        assert_eq!(usernames(&left), ["Cy"]);
        assert_eq!(
            page_of_owner(&db, "c1", "bob", Page::default()).unwrap().1,
            0
        );
    }
}
