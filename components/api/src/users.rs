//! Users: sign-up, login, refresh tokens, profile, password change, follows.

use crate::{contacts, passwords};
use common::jwt::{self, USER_TOKEN_TTL_SECS};
use common::pagination::{Page, Paged};
use common::spin::config;
use common::spin::db::{self, Db, Row};
use common::spin::http::{AppCtx, ServerCtx, UserCtx, json};
use common::spin::rate_limit;
use common::validate;
use common::{ApiError, ids, time};
use serde::Serialize;
use serde_json::json;
use spin_sdk::http::Response;

/// Refresh tokens live 30 days.
const REFRESH_TTL_SECS: i64 = 30 * 86_400;
/// Failed logins allowed per account per window before 429.
const LOGIN_FAILURES_ALLOWED: i64 = 5;
const LOGIN_WINDOW_SECS: i64 = 15 * 60;

/// A user as other users see them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicUser {
    pub id: String,
    pub username: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub avatar_url: Option<String>,
    pub created_at: String,
}

/// A user as they see themselves.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub id: String,
    pub username: String,
    pub email: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub avatar_url: Option<String>,
    pub phone_number: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

pub const PUBLIC_COLUMNS: &str = "id, username, first_name, last_name, avatar_url, created_at";

pub fn public_user(row: &Row<'_>) -> PublicUser {
    PublicUser {
        id: db::col_text(row, "id"),
        username: db::col_text(row, "username"),
        first_name: db::col_opt_text(row, "first_name"),
        last_name: db::col_opt_text(row, "last_name"),
        avatar_url: db::col_opt_text(row, "avatar_url"),
        created_at: db::col_text(row, "created_at"),
    }
}

fn profile(row: &Row<'_>) -> Profile {
    Profile {
        id: db::col_text(row, "id"),
        username: db::col_text(row, "username"),
        email: db::col_text(row, "email"),
        first_name: db::col_opt_text(row, "first_name"),
        last_name: db::col_opt_text(row, "last_name"),
        avatar_url: db::col_opt_text(row, "avatar_url"),
        phone_number: db::col_opt_text(row, "phone_number"),
        created_at: db::col_text(row, "created_at"),
        updated_at: db::col_text(row, "updated_at"),
    }
}

/// Usernames: 3 to 32 letters, digits, `_`, `.` or `-`.
pub fn username_problem(name: &str) -> Option<&'static str> {
    let len = name.chars().count();
    if !(3..=32).contains(&len) {
        Some("must be 3 to 32 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        Some("may contain only letters, digits, '_', '.' and '-'")
    } else {
        None
    }
}

fn load_profile(db: &Db, client_id: &str, user_id: &str) -> Result<Profile, ApiError> {
    db.query_one(
        "SELECT * FROM users WHERE client_id = ? AND id = ?",
        &[db::text(client_id), db::text(user_id)],
        profile,
    )?
    .ok_or_else(|| ApiError::not_found("user"))
}

/// Answers 409 when `username` or `email` is taken in the tenant by someone other than `except`.
fn ensure_unique(
    db: &Db,
    client_id: &str,
    username: Option<&str>,
    email: Option<&str>,
    except: &str,
) -> Result<(), ApiError> {
    if let Some(username) = username {
        let taken = db.count(
            "SELECT COUNT(*) FROM users WHERE client_id = ? AND username_key = ? AND id <> ?",
            &[
                db::text(client_id),
                db::text(username.to_lowercase()),
                db::text(except),
            ],
        )?;
        if taken > 0 {
            return Err(
                ApiError::conflict("username_taken", "this username is already taken")
                    .with_extra("field", "username"),
            );
        }
    }
    if let Some(email) = email {
        let taken = db.count(
            "SELECT COUNT(*) FROM users WHERE client_id = ? AND email_key = ? AND id <> ?",
            &[
                db::text(client_id),
                db::text(email.to_lowercase()),
                db::text(except),
            ],
        )?;
        if taken > 0 {
            return Err(ApiError::conflict(
                "email_taken",
                "this e-mail address is already registered",
            )
            .with_extra("field", "email"));
        }
    }
    Ok(())
}

/// A fresh access token and a refresh token in `family` (a new family when `None`).
fn issue_session(
    db: &Db,
    client_id: &str,
    user_id: &str,
    token_version: i64,
    family: Option<&str>,
) -> Result<serde_json::Value, ApiError> {
    let secret = config::required("jwt_secret")?;
    let now = time::now();
    let token = jwt::issue_user_token(secret.as_bytes(), user_id, client_id, token_version, now);
    let refresh = format!("rt_{}", ids::random_base62(48));
    let family = family.map_or_else(ids::uuid, str::to_string);
    db.execute(
        "INSERT INTO refresh_tokens (token_hash, client_id, user_id, family_id, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        &[
            db::text(ids::sha256_hex(refresh.as_bytes())),
            db::text(client_id),
            db::text(user_id),
            db::text(family),
            db::int(now + REFRESH_TTL_SECS),
            db::text(time::now_rfc3339()),
        ],
    )?;
    let user = load_profile(db, client_id, user_id)?;
    Ok(json!({
        "token": token,
        "refreshToken": refresh,
        "expiresIn": USER_TOKEN_TTL_SECS,
        "tokenType": "Bearer",
        "user": user,
    }))
}

/// `POST /api/users/signup`
pub fn signup(ctx: &AppCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let mut body = ctx.json()?;
    let username = body.string("username", 32);
    let email = body.string("email", 254);
    let password = body.opt_raw_string("password", passwords::MAX_LENGTH + 1);
    let first_name = body.opt_string("firstName", validate::MAX_NAME);
    let last_name = body.opt_string("lastName", validate::MAX_NAME);
    if let Some(problem) = (!username.is_empty())
        .then(|| username_problem(&username))
        .flatten()
    {
        body.error("username", problem);
    }
    if !email.is_empty() && !validate::is_email(&email) {
        body.error("email", "must be an e-mail address");
    }
    match password.as_deref() {
        None => body.error("password", "is required"),
        Some(p) => {
            if let Some(problem) = passwords::weakness(p) {
                body.error("password", problem);
            }
        }
    }
    body.finish()?;
    let password = password.unwrap_or_default();

    let db = Db::open()?;
    ensure_unique(&db, &tenant.client_id, Some(&username), Some(&email), "")?;
    let id = ids::uuid();
    let now = time::now_rfc3339();
    let hash = passwords::hash(&password)?;
    db.execute(
        "INSERT INTO users (id, client_id, username, username_key, email, email_key, password_hash, first_name, last_name, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            db::text(&id),
            db::text(&tenant.client_id),
            db::text(&username),
            db::text(username.to_lowercase()),
            db::text(&email),
            db::text(email.to_lowercase()),
            db::text(hash),
            db::opt_text(first_name.as_deref()),
            db::opt_text(last_name.as_deref()),
            db::text(&now),
            db::text(&now),
        ],
    )
    // Two sign-ups racing for one name: the unique index decides.
    .map_err(|_| ApiError::conflict("username_or_email_taken", "this username or e-mail address is already registered"))?;
    Ok(json(
        200,
        &issue_session(&db, &tenant.client_id, &id, 0, None)?,
    ))
}

/// `POST /api/users/login`: by `email` or `username`, with `password`.
pub fn login(ctx: &AppCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let mut body = ctx.json()?;
    let email = body.opt_string("email", 254);
    let username = body.opt_string("username", 254);
    let password = body.opt_raw_string("password", passwords::MAX_LENGTH + 1);
    if email.is_none() && username.is_none() {
        body.error("email", "email or username is required");
    }
    if password.is_none() {
        body.error("password", "is required");
    }
    body.finish()?;
    let (column, login) = match (&email, &username) {
        (Some(e), _) => ("email_key", e.to_lowercase()),
        (None, Some(u)) => ("username_key", u.to_lowercase()),
        (None, None) => unreachable!("checked above"),
    };
    let password = password.unwrap_or_default();

    let db = Db::open()?;
    let now = time::now();
    // Attempts count per login string and, once it names an account, per account too: the
    // e-mail and the username of one account share its budget.
    let bucket = format!("login:{}:{login}", tenant.client_id);
    rate_limit::attempt(&db, &bucket, LOGIN_FAILURES_ALLOWED, LOGIN_WINDOW_SECS, now)?;
    let found = db.query_one(
        &format!("SELECT id, password_hash, token_version FROM users WHERE client_id = ? AND {column} = ?"),
        &[db::text(&tenant.client_id), db::text(&login)],
        |row| (db::col_text(row, "id"), db::col_text(row, "password_hash"), db::col_int(row, "token_version")),
    )?;
    let account_bucket = found
        .as_ref()
        .map(|(id, _, _)| format!("login-account:{}:{id}", tenant.client_id));
    if let Some(account_bucket) = &account_bucket {
        rate_limit::attempt(
            &db,
            account_bucket,
            LOGIN_FAILURES_ALLOWED,
            LOGIN_WINDOW_SECS,
            now,
        )?;
    }
    let (hash, known) = match &found {
        Some((_, hash, _)) => (hash.as_str(), true),
        None => (passwords::decoy_hash(), false),
    };
    if !(passwords::verify(&password, hash) && known) {
        return Err(ApiError::unauthorized(
            "invalid_credentials",
            "the login or password is not correct",
        ));
    }
    rate_limit::clear(&db, &bucket)?;
    if let Some(account_bucket) = &account_bucket {
        rate_limit::clear(&db, account_bucket)?;
    }
    let (user_id, _, version) = found.unwrap_or_default();
    Ok(json(
        200,
        &issue_session(&db, &tenant.client_id, &user_id, version, None)?,
    ))
}

/// `POST /api/users/refresh`: trades a refresh token for a new pair. A token that was
/// already rotated is a sign of theft: its whole family is revoked.
pub fn refresh(ctx: &AppCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let mut body = ctx.json()?;
    let token = body.string("refreshToken", 200);
    body.finish()?;
    let invalid =
        || ApiError::unauthorized("invalid_refresh_token", "the refresh token is not valid");
    let db = Db::open()?;
    let hash = ids::sha256_hex(token.as_bytes());
    let row = db
        .query_one(
            "SELECT r.user_id, r.family_id, r.expires_at, r.rotated, r.revoked, u.token_version \
             FROM refresh_tokens r JOIN users u ON u.id = r.user_id AND u.client_id = r.client_id \
             WHERE r.token_hash = ? AND r.client_id = ?",
            &[db::text(&hash), db::text(&tenant.client_id)],
            |row| {
                (
                    db::col_text(row, "user_id"),
                    db::col_text(row, "family_id"),
                    db::col_int(row, "expires_at"),
                    db::col_bool(row, "rotated"),
                    db::col_bool(row, "revoked"),
                    db::col_int(row, "token_version"),
                )
            },
        )?
        .ok_or_else(invalid)?;
    let (user_id, family, expires_at, rotated, revoked, version) = row;
    if rotated {
        db.execute(
            "UPDATE refresh_tokens SET revoked = 1 WHERE family_id = ?",
            &[db::text(&family)],
        )?;
        return Err(ApiError::unauthorized(
            "refresh_token_reused",
            "this refresh token was already used; its session has been revoked",
        ));
    }
    if revoked || expires_at <= time::now() {
        return Err(invalid());
    }
    // Only one concurrent use may rotate the token.
    let claimed = db.execute(
        "UPDATE refresh_tokens SET rotated = 1 WHERE token_hash = ? AND rotated = 0 RETURNING token_hash",
        &[db::text(&hash)],
    )?;
    if claimed.rows.is_empty() {
        return Err(invalid());
    }
    Ok(json(
        200,
        &issue_session(&db, &tenant.client_id, &user_id, version, Some(&family))?,
    ))
}

/// `GET /api/users/profile/full`
pub fn full_profile(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = Db::open()?;
    let profile = load_profile(&db, &tenant.client_id, &user.id)?;
    let followers = db.count(
        "SELECT COUNT(*) FROM follows WHERE client_id = ? AND followee_id = ?",
        &[db::text(&tenant.client_id), db::text(&user.id)],
    )?;
    let following = db.count(
        "SELECT COUNT(*) FROM follows WHERE client_id = ? AND follower_id = ?",
        &[db::text(&tenant.client_id), db::text(&user.id)],
    )?;
    let mut doc = serde_json::to_value(profile).map_err(|e| ApiError::internal(e.to_string()))?;
    doc["followerCount"] = followers.into();
    doc["followingCount"] = following.into();
    Ok(json(200, &doc))
}

/// `PUT /api/users/profile`: changes the fields sent; others stay as they are.
pub fn update_profile(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let mut body = ctx.json()?;
    let username = body.opt_string("username", 32);
    let email = body.opt_string("email", 254);
    let first_name = body.opt_string("firstName", validate::MAX_NAME);
    let last_name = body.opt_string("lastName", validate::MAX_NAME);
    let avatar_url = body.opt_string("avatarUrl", 2048);
    let phone = body.opt_string("phoneNumber", 40);
    if let Some(problem) = username.as_deref().and_then(username_problem) {
        body.error("username", problem);
    }
    if email.as_deref().is_some_and(|e| !validate::is_email(e)) {
        body.error("email", "must be an e-mail address");
    }
    if avatar_url
        .as_deref()
        .is_some_and(|u| !validate::is_http_url(u))
    {
        body.error("avatarUrl", "must be an http or https URL");
    }
    if phone.as_deref().is_some_and(|p| !validate::is_phone(p)) {
        body.error(
            "phoneNumber",
            "may contain only digits, spaces and + - ( ) .",
        );
    }
    body.finish()?;
    let db = Db::open()?;
    ensure_unique(
        &db,
        &tenant.client_id,
        username.as_deref(),
        email.as_deref(),
        &user.id,
    )?;
    db.execute(
        "UPDATE users SET \
           username = COALESCE(?, username), username_key = COALESCE(?, username_key), \
           email = COALESCE(?, email), email_key = COALESCE(?, email_key), \
           first_name = COALESCE(?, first_name), last_name = COALESCE(?, last_name), \
           avatar_url = COALESCE(?, avatar_url), phone_number = COALESCE(?, phone_number), \
           updated_at = ? \
         WHERE client_id = ? AND id = ?",
        &[
            db::opt_text(username.as_deref()),
            db::opt_text(username.as_deref().map(str::to_lowercase).as_deref()),
            db::opt_text(email.as_deref()),
            db::opt_text(email.as_deref().map(str::to_lowercase).as_deref()),
            db::opt_text(first_name.as_deref()),
            db::opt_text(last_name.as_deref()),
            db::opt_text(avatar_url.as_deref()),
            db::opt_text(phone.as_deref()),
            db::text(time::now_rfc3339()),
            db::text(&tenant.client_id),
            db::text(&user.id),
        ],
    )
    .map_err(|_| {
        ApiError::conflict(
            "username_or_email_taken",
            "this username or e-mail address is already registered",
        )
    })?;
    Ok(json(200, &load_profile(&db, &tenant.client_id, &user.id)?))
}

/// `DELETE /api/users/profile`: removes the user and everything that is theirs.
pub fn delete_profile(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = Db::open()?;
    let (c, u) = (db::text(&tenant.client_id), db::text(&user.id));
    db.transaction(|db| {
        let owner_and_user = [c.clone(), u.clone()];
        let either_side = [c.clone(), u.clone(), u.clone()];
        db.execute(
            "DELETE FROM refresh_tokens WHERE client_id = ? AND user_id = ?",
            &owner_and_user,
        )?;
        db.execute(
            "DELETE FROM contacts WHERE client_id = ? AND (owner_id = ? OR contact_user_id = ?)",
            &either_side,
        )?;
        db.execute(
            "DELETE FROM follows WHERE client_id = ? AND (follower_id = ? OR followee_id = ?)",
            &either_side,
        )?;
        db.execute(
            "DELETE FROM broadcasts WHERE client_id = ? AND owner_id = ?",
            &owner_and_user,
        )?;
        // The music link and its sealed token go with the account.
        db.execute(
            "DELETE FROM music_links WHERE client_id = ? AND user_id = ?",
            &owner_and_user,
        )?;
        db.execute(
            "DELETE FROM users WHERE client_id = ? AND id = ?",
            &owner_and_user,
        )?;
        Ok(())
    })?;
    Ok(json(
        200,
        &json!({ "success": true, "message": "the account has been deleted" }),
    ))
}

/// `POST /api/users/change-password`: checks the current password, revokes every other
/// session, and answers a fresh token pair.
pub fn change_password(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let mut body = ctx.json()?;
    let current = body.opt_raw_string("currentPassword", passwords::MAX_LENGTH + 1);
    let new = body.opt_raw_string("newPassword", passwords::MAX_LENGTH + 1);
    if current.is_none() {
        body.error("currentPassword", "is required");
    }
    match new.as_deref() {
        None => body.error("newPassword", "is required"),
        Some(p) => {
            if let Some(problem) = passwords::weakness(p) {
                body.error("newPassword", problem);
            }
        }
    }
    body.finish()?;
    let db = Db::open()?;
    let stored = db
        .query_one(
            "SELECT password_hash FROM users WHERE client_id = ? AND id = ?",
            &[db::text(&tenant.client_id), db::text(&user.id)],
            |row| db::col_text(row, "password_hash"),
        )?
        .ok_or_else(|| ApiError::not_found("user"))?;
    if !passwords::verify(&current.unwrap_or_default(), &stored) {
        return Err(ApiError::unauthorized(
            "invalid_credentials",
            "the current password is not correct",
        ));
    }
    let hash = passwords::hash(&new.unwrap_or_default())?;
    let version = user.token_version + 1;
    db.execute(
        "UPDATE users SET password_hash = ?, token_version = ?, updated_at = ? WHERE client_id = ? AND id = ?",
        &[db::text(hash), db::int(version), db::text(time::now_rfc3339()), db::text(&tenant.client_id), db::text(&user.id)],
    )?;
    db.execute(
        "UPDATE refresh_tokens SET revoked = 1 WHERE client_id = ? AND user_id = ?",
        &[db::text(&tenant.client_id), db::text(&user.id)],
    )?;
    Ok(json(
        200,
        &issue_session(&db, &tenant.client_id, &user.id, version, None)?,
    ))
}

/// The id path parameter as a UUID of a user in the caller's tenant (404 otherwise).
fn other_user(db: &Db, client_id: &str, raw_id: &str) -> Result<String, ApiError> {
    let id = ids::parse_uuid(raw_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the user id must be a UUID"))?;
    let exists = db.count(
        "SELECT COUNT(*) FROM users WHERE client_id = ? AND id = ?",
        &[db::text(client_id), db::text(&id)],
    )?;
    if exists == 0 {
        return Err(ApiError::not_found("user"));
    }
    Ok(id)
}

/// `POST /api/users/follow/{id}`: idempotent.
pub fn follow(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = Db::open()?;
    let target = other_user(&db, &tenant.client_id, ctx.param("id"))?;
    if target == user.id {
        return Err(ApiError::new(
            422,
            "cannot_follow_self",
            "users cannot follow themselves",
        ));
    }
    db.transaction(|db| {
        db.execute(
            "INSERT INTO follows (client_id, follower_id, followee_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            &[db::text(&tenant.client_id), db::text(&user.id), db::text(&target), db::text(time::now_rfc3339())],
        )?;
        contacts::link(db, &tenant.client_id, &user.id, &target)
    })?;
    Ok(json(
        200,
        &json!({ "success": true, "following": true, "userId": target }),
    ))
}

/// `DELETE /api/users/follow/{id}`: idempotent.
pub fn unfollow(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = Db::open()?;
    let target = other_user(&db, &tenant.client_id, ctx.param("id"))?;
    unfollow_user(&db, &tenant.client_id, &user.id, &target)?;
    Ok(json(
        200,
        &json!({ "success": true, "following": false, "userId": target }),
    ))
}

pub fn unfollow_user(
    db: &Db,
    client_id: &str,
    follower: &str,
    followee: &str,
) -> Result<(), ApiError> {
    db.transaction(|db| {
        db.execute(
            "DELETE FROM follows WHERE client_id = ? AND follower_id = ? AND followee_id = ?",
            &[db::text(client_id), db::text(follower), db::text(followee)],
        )?;
        contacts::unlink_if_unrelated(db, client_id, follower, followee)
    })
}

/// `GET /api/users/{id}/followers` and `/following`.
/// `GET /api/users/{id}/followers`
pub fn followers(ctx: &UserCtx) -> Result<Response, ApiError> {
    follow_list(ctx, true)
}

/// `GET /api/users/{id}/following`
pub fn following(ctx: &UserCtx) -> Result<Response, ApiError> {
    follow_list(ctx, false)
}

fn follow_list(ctx: &UserCtx, followers: bool) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let page = Page::from_query(ctx.query())?;
    let db = Db::open()?;
    let id = other_user(&db, &tenant.client_id, ctx.param("id"))?;
    let (mine, theirs) = if followers {
        ("followee_id", "follower_id")
    } else {
        ("follower_id", "followee_id")
    };
    let c = db::text(&tenant.client_id);
    let total = db.count(
        &format!("SELECT COUNT(*) FROM follows WHERE client_id = ? AND {mine} = ?"),
        &[c.clone(), db::text(&id)],
    )?;
    let items = db.query(
        &format!(
            "SELECT u.id, u.username, u.first_name, u.last_name, u.avatar_url, u.created_at \
             FROM follows f JOIN users u ON u.client_id = f.client_id AND u.id = f.{theirs} \
             WHERE f.client_id = ? AND f.{mine} = ? ORDER BY f.created_at DESC, u.id LIMIT ? OFFSET ?"
        ),
        &[c, db::text(&id), db::int(page.limit.into()), db::int(page.offset.into())],
        public_user,
    )?;
    Ok(json(200, &Paged::new(items, total, page)))
}

/// `GET /api/v1/users`: the tenant's users, for the SDK client's back end.
pub fn list_for_client(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let page = Page::from_query(ctx.query())?;
    let db = Db::open()?;
    let c = db::text(&tenant.client_id);
    let total = db.count(
        "SELECT COUNT(*) FROM users WHERE client_id = ?",
        std::slice::from_ref(&c),
    )?;
    let items = db.query(
        &format!("SELECT {PUBLIC_COLUMNS} FROM users WHERE client_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?"),
        &[c, db::int(page.limit.into()), db::int(page.offset.into())],
        public_user,
    )?;
    Ok(json(200, &Paged::new(items, total, page)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn username_rules() {
        assert!(username_problem("ada_l").is_none());
        assert!(username_problem("ab").is_some());
        assert!(username_problem("has space").is_some());
        assert!(username_problem(&"x".repeat(33)).is_some());
    }
}
