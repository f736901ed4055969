//! Users of a tenant, their sessions (refresh tokens, rotated on use, revoked by family),
//! and follows.

use super::tenants::{Tenant, tenant_of};
use super::{Db, Row, Value};
use domain::ApiError;
use domain::pagination::Page;
use domain::time;

/// A stored user.
#[derive(Debug, Clone)]
pub struct User {
    pub id: String,
    pub client_id: String,
    pub username: String,
    pub email: String,
    pub password_hash: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub avatar_url: Option<String>,
    pub phone_number: Option<String>,
    pub token_version: i64,
    pub created_at: String,
    pub updated_at: String,
}

fn from_row(row: &Row) -> User {
    User {
        id: row.text("id"),
        client_id: row.text("client_id"),
        username: row.text("username"),
        email: row.text("email"),
        password_hash: row.text("password_hash"),
        first_name: row.opt_text("first_name"),
        last_name: row.opt_text("last_name"),
        avatar_url: row.opt_text("avatar_url"),
        phone_number: row.opt_text("phone_number"),
        token_version: row.int("token_version"),
        created_at: row.text("created_at"),
        updated_at: row.text("updated_at"),
    }
}

/// A user to create.
pub struct NewUser<'a> {
    pub id: &'a str,
    pub username: &'a str,
    pub email: &'a str,
    pub password_hash: &'a str,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
}

/// Stores a new user; `false` when the username or e-mail (compared case-insensitively) is
/// taken in the tenant, however close two sign-ups race.
pub fn insert(db: &Db, client_id: &str, new: &NewUser<'_>, now: i64) -> Result<bool, ApiError> {
    let at = time::format_rfc3339(now);
    let stored = db.query(
        "INSERT INTO users (id, client_id, username, username_key, email, email_key, password_hash, first_name, last_name, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
        &[
            new.id.into(),
            client_id.into(),
            new.username.into(),
            new.username.to_lowercase().into(),
            new.email.into(),
            new.email.to_lowercase().into(),
            new.password_hash.into(),
            new.first_name.into(),
            new.last_name.into(),
            at.clone().into(),
            at.into(),
        ],
    )?;
    Ok(!stored.is_empty())
}

/// Takes the user's row lock for the rest of the transaction (on SQLite the write lock is
/// already held), so that a per-user cap is counted and filled one request at a time.
pub fn lock(db: &Db, client_id: &str, id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE users SET id = id WHERE client_id = ? AND id = ?",
        &[client_id.into(), id.into()],
    )
}

/// The user `id` and whether its session `session` (a refresh-token family) was revoked,
/// in one query: what every authenticated request checks.
pub fn in_session(
    db: &Db,
    client_id: &str,
    id: &str,
    session: Option<&str>,
) -> Result<Option<InSession>, ApiError> {
    Ok(db
        .query_one(
            &format!(
                "SELECT u.*, {SESSION_REVOKED} FROM users u WHERE u.client_id = ? AND u.id = ?"
            ),
            &[session.unwrap_or("").into(), client_id.into(), id.into()],
        )?
        .as_ref()
        .map(|row| (from_row(row), row.int("session_revoked") > 0)))
}

/// Whether the session (refresh-token family) a token names was revoked: a column of a
/// user's row, its one parameter the family's id.
const SESSION_REVOKED: &str = "(SELECT COUNT(*) FROM refresh_tokens r WHERE r.family_id = ? AND r.revoked = 1) AS session_revoked";

/// A stored user, and whether the session a token names was revoked.
pub type InSession = (User, bool);

/// The client whose API key hashes to `api_key_hash`, and in it the user `id` as
/// [`in_session`] answers it (`None` when the client has no such user), in one statement:
/// what a user's request is authenticated by.
pub fn tenant_and_user_in_session(
    db: &Db,
    api_key_hash: &str,
    id: &str,
    session: Option<&str>,
) -> Result<Option<(Tenant, Option<InSession>)>, ApiError> {
    Ok(db
        .query_one(
            &format!(
                "SELECT c.client_id, c.name, c.secret_key, c.require_signature, c.suspended_at, u.*, \
                 {SESSION_REVOKED} \
                 FROM sdk_clients c LEFT JOIN users u ON u.client_id = c.client_id AND u.id = ? \
                 WHERE c.api_key_hash = ?"
            ),
            &[session.unwrap_or("").into(), id.into(), api_key_hash.into()],
        )?
        .as_ref()
        .map(|row| {
            let user = row
                .opt_text("id")
                .map(|_| (from_row(row), row.int("session_revoked") > 0));
            (tenant_of(row), user)
        }))
}

pub fn by_id(db: &Db, client_id: &str, id: &str) -> Result<Option<User>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM users WHERE client_id = ? AND id = ?",
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(from_row))
}

pub fn exists(db: &Db, client_id: &str, id: &str) -> Result<bool, ApiError> {
    Ok(db.count(
        "SELECT COUNT(*) FROM users WHERE client_id = ? AND id = ?",
        &[client_id.into(), id.into()],
    )? > 0)
}

/// How a user logs in.
#[derive(Debug, Clone, Copy)]
pub enum Login<'a> {
    Email(&'a str),
    Username(&'a str),
}

/// The user a login names (case-insensitively).
pub fn by_login(db: &Db, client_id: &str, login: Login<'_>) -> Result<Option<User>, ApiError> {
    let (sql, key) = match login {
        Login::Email(e) => (
            "SELECT * FROM users WHERE client_id = ? AND email_key = ?",
            e,
        ),
        Login::Username(u) => (
            "SELECT * FROM users WHERE client_id = ? AND username_key = ?",
            u,
        ),
    };
    Ok(db
        .query_one(sql, &[client_id.into(), key.to_lowercase().into()])?
        .as_ref()
        .map(from_row))
}

/// Whether someone other than `except` uses the login (case-insensitively).
pub fn login_taken(
    db: &Db,
    client_id: &str,
    login: Login<'_>,
    except: &str,
) -> Result<bool, ApiError> {
    let (sql, key) = match login {
        Login::Email(e) => (
            "SELECT COUNT(*) FROM users WHERE client_id = ? AND email_key = ? AND id <> ?",
            e,
        ),
        Login::Username(u) => (
            "SELECT COUNT(*) FROM users WHERE client_id = ? AND username_key = ? AND id <> ?",
            u,
        ),
    };
    Ok(db.count(
        sql,
        &[client_id.into(), key.to_lowercase().into(), except.into()],
    )? > 0)
}

/// Profile fields to change; `None` keeps the stored value.
#[derive(Debug, Default)]
pub struct ProfileChanges<'a> {
    pub username: Option<&'a str>,
    pub email: Option<&'a str>,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
    pub avatar_url: Option<&'a str>,
    pub phone_number: Option<&'a str>,
}

/// Applies profile changes; `false` when a new username or e-mail was taken meanwhile.
pub fn update_profile(
    db: &Db,
    client_id: &str,
    id: &str,
    changes: &ProfileChanges<'_>,
    now: i64,
) -> Result<bool, ApiError> {
    let taken = changes
        .username
        .map(|u| login_taken(db, client_id, Login::Username(u), id))
        .transpose()?
        .unwrap_or(false)
        || changes
            .email
            .map(|e| login_taken(db, client_id, Login::Email(e), id))
            .transpose()?
            .unwrap_or(false);
    if taken {
        return Ok(false);
    }
    db.execute(
        "UPDATE users SET \
           username = COALESCE(?, username), username_key = COALESCE(?, username_key), \
           email = COALESCE(?, email), email_key = COALESCE(?, email_key), \
           first_name = COALESCE(?, first_name), last_name = COALESCE(?, last_name), \
           avatar_url = COALESCE(?, avatar_url), phone_number = COALESCE(?, phone_number), \
           updated_at = ? \
         WHERE client_id = ? AND id = ?",
        &[
            changes.username.into(),
            changes.username.map(str::to_lowercase).into(),
            changes.email.into(),
            changes.email.map(str::to_lowercase).into(),
            changes.first_name.into(),
            changes.last_name.into(),
            changes.avatar_url.into(),
            changes.phone_number.into(),
            time::format_rfc3339(now).into(),
            client_id.into(),
            id.into(),
        ],
    )?;
    Ok(true)
}

/// Sets a new password hash and token version (which revokes every older access token),
/// and revokes every refresh token of the user.
pub fn set_password(
    db: &Db,
    client_id: &str,
    id: &str,
    hash: &str,
    token_version: i64,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE users SET password_hash = ?, token_version = ?, updated_at = ? WHERE client_id = ? AND id = ?",
        &[
            hash.into(),
            Value::Int(token_version),
            time::format_rfc3339(now).into(),
            client_id.into(),
            id.into(),
        ],
    )?;
    db.execute(
        "UPDATE refresh_tokens SET revoked = 1 WHERE client_id = ? AND user_id = ?",
        &[client_id.into(), id.into()],
    )
}

/// Deletes the user and everything that is theirs: sessions, follows both ways, contacts
/// both ways, broadcasts, the music link. Call it inside a transaction.
pub fn delete_account(db: &Db, client_id: &str, id: &str) -> Result<(), ApiError> {
    let own: [Value; 2] = [client_id.into(), id.into()];
    let either: [Value; 3] = [client_id.into(), id.into(), id.into()];
    db.execute(
        "DELETE FROM refresh_tokens WHERE client_id = ? AND user_id = ?",
        &own,
    )?;
    super::contacts::forget_user(db, client_id, id)?;
    db.execute(
        "DELETE FROM follows WHERE client_id = ? AND (follower_id = ? OR followee_id = ?)",
        &either,
    )?;
    // Their broadcasts' replays: the media server deletes the media.
    super::replays::mark_owner_deleting(db, client_id, id)?;
    super::clips::mark_owner_deleting(db, client_id, id)?;
    db.execute(
        "DELETE FROM broadcasts WHERE client_id = ? AND owner_id = ?",
        &own,
    )?;
    super::music_links::delete(db, client_id, id)?;
    db.execute("DELETE FROM users WHERE client_id = ? AND id = ?", &own)
}

/// One page of the tenant's users, oldest first, and how many there are.
pub fn page_of_tenant(db: &Db, client_id: &str, page: Page) -> Result<(Vec<User>, i64), ApiError> {
    let (rows, total) = db.page(
        "users",
        "client_id = ?",
        &[client_id.into()],
        "created_at, id",
        page,
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

// ---- Sessions: refresh tokens ----

/// A stored refresh token (by the hash of its text), with its user's token version.
#[derive(Debug, Clone)]
pub struct RefreshToken {
    pub user_id: String,
    pub family_id: String,
    pub expires_at: i64,
    pub rotated: bool,
    pub revoked: bool,
    pub token_version: i64,
}

/// Stores a refresh token of `family`.
pub fn add_refresh_token(
    db: &Db,
    client_id: &str,
    user_id: &str,
    token_hash: &str,
    family_id: &str,
    expires_at: i64,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO refresh_tokens (token_hash, client_id, user_id, family_id, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        &[
            token_hash.into(),
            client_id.into(),
            user_id.into(),
            family_id.into(),
            Value::Int(expires_at),
            time::format_rfc3339(now).into(),
        ],
    )
}

pub fn refresh_token(
    db: &Db,
    client_id: &str,
    token_hash: &str,
) -> Result<Option<RefreshToken>, ApiError> {
    Ok(db
        .query_one(
            "SELECT r.user_id, r.family_id, r.expires_at, r.rotated, r.revoked, u.token_version \
             FROM refresh_tokens r JOIN users u ON u.id = r.user_id AND u.client_id = r.client_id \
             WHERE r.token_hash = ? AND r.client_id = ?",
            &[token_hash.into(), client_id.into()],
        )?
        .map(|row| RefreshToken {
            user_id: row.text("user_id"),
            family_id: row.text("family_id"),
            expires_at: row.int("expires_at"),
            rotated: row.bool("rotated"),
            revoked: row.bool("revoked"),
            token_version: row.int("token_version"),
        }))
}

/// Marks a token used; `false` when it was used already (by a concurrent refresh too: the
/// guarded update lets exactly one through).
pub fn rotate(db: &Db, token_hash: &str) -> Result<bool, ApiError> {
    let claimed = db.query(
        "UPDATE refresh_tokens SET rotated = 1 WHERE token_hash = ? AND rotated = 0 AND revoked = 0 RETURNING token_hash",
        &[token_hash.into()],
    )?;
    Ok(!claimed.is_empty())
}

/// Revokes every token of a family (a reused token is a sign of theft).
pub fn revoke_family(db: &Db, family_id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE refresh_tokens SET revoked = 1 WHERE family_id = ?",
        &[family_id.into()],
    )
}

/// Removes up to `batch` refresh tokens that expired by `now`; answers how many.
pub fn prune_refresh_tokens(db: &Db, now: i64, batch: i64) -> Result<i64, ApiError> {
    let removed = db.query(
        "DELETE FROM refresh_tokens WHERE token_hash IN \
           (SELECT token_hash FROM refresh_tokens WHERE expires_at <= ? LIMIT ?) RETURNING token_hash",
        &[Value::Int(now), Value::Int(batch)],
    )?;
    Ok(removed.len() as i64)
}

// ---- Follows ----

/// Records that `follower` follows `followee` (again: nothing changes).
pub fn follow(
    db: &Db,
    client_id: &str,
    follower: &str,
    followee: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let fresh = db.query(
        "INSERT INTO follows (client_id, follower_id, followee_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING follower_id",
        &[
            client_id.into(),
            follower.into(),
            followee.into(),
            time::format_rfc3339(now).into(),
        ],
    )?;
    Ok(!fresh.is_empty())
}

pub fn unfollow(db: &Db, client_id: &str, follower: &str, followee: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM follows WHERE client_id = ? AND follower_id = ? AND followee_id = ?",
        &[client_id.into(), follower.into(), followee.into()],
    )
}

/// Which side of the follows a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Who follows the user.
    Followers,
    /// Whom the user follows.
    Following,
}

fn columns(side: Side) -> (&'static str, &'static str) {
    match side {
        Side::Followers => ("followee_id", "follower_id"),
        Side::Following => ("follower_id", "followee_id"),
    }
}

/// How many follow the user (or the user follows).
pub fn follow_count(db: &Db, client_id: &str, user_id: &str, side: Side) -> Result<i64, ApiError> {
    let (mine, _) = columns(side);
    db.count(
        &format!("SELECT COUNT(*) FROM follows WHERE client_id = ? AND {mine} = ?"),
        &[client_id.into(), user_id.into()],
    )
}

/// The user `id`, with how many follow them and how many they follow, in one statement.
pub fn with_follow_counts(
    db: &Db,
    client_id: &str,
    id: &str,
) -> Result<Option<(User, i64, i64)>, ApiError> {
    Ok(db
        .query_one(
            "SELECT u.*, \
             (SELECT COUNT(*) FROM follows f WHERE f.client_id = u.client_id AND f.followee_id = u.id) AS follower_count, \
             (SELECT COUNT(*) FROM follows f WHERE f.client_id = u.client_id AND f.follower_id = u.id) AS following_count \
             FROM users u WHERE u.client_id = ? AND u.id = ?",
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(|row| {
            let counts = (row.int("follower_count"), row.int("following_count"));
            (from_row(row), counts.0, counts.1)
        }))
}

/// One page of the users on `side` of `user_id`'s follows, newest follow first.
pub fn follow_page(
    db: &Db,
    client_id: &str,
    user_id: &str,
    side: Side,
    page: Page,
) -> Result<(Vec<User>, i64), ApiError> {
    let (mine, theirs) = columns(side);
    let total = follow_count(db, client_id, user_id, side)?;
    let rows = db.query(
        &format!(
            "SELECT u.* FROM follows f JOIN users u ON u.client_id = f.client_id AND u.id = f.{theirs} \
             WHERE f.client_id = ? AND f.{mine} = ? ORDER BY f.created_at DESC, u.id LIMIT ? OFFSET ?"
        ),
        &[
            client_id.into(),
            user_id.into(),
            Value::Int(page.limit.into()),
            Value::Int(page.offset.into()),
        ],
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn new<'a>(id: &'a str, username: &'a str, email: &'a str) -> NewUser<'a> {
        NewUser {
            id,
            username,
            email,
            password_hash: "h",
            first_name: None,
            last_name: None,
        }
    }

    #[test]
    fn logins_are_unique_per_tenant_whatever_their_case() {
        let db = testing::db();
        assert!(insert(&db, "c1", &new("u1", "Ada", "ada@example.com"), 1).unwrap());
        assert!(!insert(&db, "c1", &new("u2", "ADA", "other@example.com"), 1).unwrap());
        assert!(!insert(&db, "c1", &new("u3", "bob", "Ada@Example.com"), 1).unwrap());
        assert!(insert(&db, "c2", &new("u4", "ada", "ada@example.com"), 1).unwrap());
        let found = by_login(&db, "c1", Login::Username("aDa"))
            .unwrap()
            .unwrap();
        assert_eq!(found.id, "u1");
        assert!(
            by_login(&db, "c1", Login::Email("nobody@example.com"))
                .unwrap()
                .is_none()
        );
        assert!(insert(&db, "c1", &new("u5", "bob", "bob@example.com"), 1).unwrap());
        let changes = ProfileChanges {
            username: Some("ADA"),
            ..Default::default()
        };
        assert!(!update_profile(&db, "c1", "u5", &changes, 2).unwrap());
        assert_eq!(by_id(&db, "c1", "u5").unwrap().unwrap().username, "bob");
    }

    #[test]
    fn a_request_is_authenticated_by_one_statement() {
        let db = testing::db();
        let registration = crate::tenants::Registration {
            name: "Acme".into(),
            ..Default::default()
        };
        let credentials = crate::tenants::StoredCredentials {
            api_key_hash: "hash-of-the-key".into(),
            api_key_prefix: "pk_".into(),
            secret_key: "secret".into(),
        };
        let client = crate::tenants::insert(&db, &registration, &credentials, 1).unwrap();
        insert(&db, &client, &new("u1", "ada", "ada@example.com"), 1).unwrap();
        insert(&db, "other", &new("u2", "bob", "bob@example.com"), 1).unwrap();
        add_refresh_token(&db, &client, "u1", "t1", "f1", 100, 1).unwrap();

        let (tenant, user) = tenant_and_user_in_session(&db, "hash-of-the-key", "u1", Some("f1"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (tenant.client_id.as_str(), tenant.name.as_str()),
            (client.as_str(), "Acme")
        );
        let (user, revoked) = user.unwrap();
        assert_eq!(
            (user.username.as_str(), user.client_id.as_str(), revoked),
            ("ada", client.as_str(), false)
        );
        // Another client's user is not this client's.
        let (_, user) = tenant_and_user_in_session(&db, "hash-of-the-key", "u2", None)
            .unwrap()
            .unwrap();
        assert!(user.is_none());
        assert!(
            tenant_and_user_in_session(&db, "another-hash", "u1", None)
                .unwrap()
                .is_none()
        );
        revoke_family(&db, "f1").unwrap();
        let (_, user) = tenant_and_user_in_session(&db, "hash-of-the-key", "u1", Some("f1"))
            .unwrap()
            .unwrap();
        assert!(user.unwrap().1, "the session's refresh tokens are revoked");
    }

    #[test]
    fn a_refresh_token_rotates_once() {
        let db = testing::db();
        insert(&db, "c1", &new("u1", "ada", "ada@example.com"), 1).unwrap();
        add_refresh_token(&db, "c1", "u1", "t1", "f1", 100, 1).unwrap();
        assert!(rotate(&db, "t1").unwrap());
        assert!(!rotate(&db, "t1").unwrap());
        add_refresh_token(&db, "c1", "u1", "t2", "f1", 100, 1).unwrap();
        revoke_family(&db, "f1").unwrap();
        assert!(refresh_token(&db, "c1", "t2").unwrap().unwrap().revoked);
        assert!(
            !rotate(&db, "t2").unwrap(),
            "a revoked token does not rotate"
        );
        assert!(refresh_token(&db, "c2", "t2").unwrap().is_none());
        assert_eq!(prune_refresh_tokens(&db, 99, 10).unwrap(), 0);
        assert_eq!(prune_refresh_tokens(&db, 100, 10).unwrap(), 2);
    }

    #[test]
    fn follows_page_newest_first() {
        let db = testing::db();
        for (id, name) in [("a", "ann"), ("b", "ben"), ("c", "cat")] {
            insert(&db, "c1", &new(id, name, &format!("{name}@example.com")), 1).unwrap();
        }
        follow(&db, "c1", "b", "a", 10).unwrap();
        follow(&db, "c1", "c", "a", 20).unwrap();
        follow(&db, "c1", "c", "a", 30).unwrap();
        let (followers, total) =
            follow_page(&db, "c1", "a", Side::Followers, Page::default()).unwrap();
        let ids: Vec<&str> = followers.iter().map(|u| u.id.as_str()).collect();
        assert_eq!((ids, total), (vec!["c", "b"], 2));
        assert_eq!(follow_count(&db, "c1", "c", Side::Following).unwrap(), 1);
        unfollow(&db, "c1", "b", "a").unwrap();
        assert_eq!(follow_count(&db, "c1", "a", Side::Followers).unwrap(), 1);
        let (_, followers, following) = with_follow_counts(&db, "c1", "c").unwrap().unwrap();
        assert_eq!((followers, following), (0, 1));
        let (user, followers, following) = with_follow_counts(&db, "c1", "a").unwrap().unwrap();
        assert_eq!((user.id.as_str(), followers, following), ("a", 1, 0));
        assert!(with_follow_counts(&db, "c2", "a").unwrap().is_none());
    }
}
