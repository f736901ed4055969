//! Users: sign-up, login, refresh tokens, profile, password change, follows.

use crate::ApiRoute;
use crate::passwords::{self, NewPassword};
use ::store::analytics::{self, Gained};
use ::store::contacts;
use ::store::users::{self as store, Login, NewUser, ProfileChanges, Side};
use ::store::{Db, rate_limits};
use domain::jwt::{self, USER_TOKEN_TTL_SECS};
use domain::pagination::{Page, Paged};
use domain::validate::JsonBody;
use domain::validate::MAX_NAME;
use domain::validate::body::{
    Checked, EmailAddress, HttpUrl, OptChecked, OptText, PhoneNumber, Secret, Text, TextRule,
};
use domain::{ApiError, ids, request_body};
use edge::answers::Done;
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::spin::config;
use edge::spin::endpoint::{Json, NoBody, Page as PageOf};
use edge::spin::http::{AppCtx, ServerCtx, UserCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use std::borrow::Cow;

/// Refresh tokens live 30 days.
const REFRESH_TTL_SECS: i64 = 30 * 86_400;
/// Failed logins allowed per window before 429, counted per login name and per account
/// (the e-mail and the username of one account share its budget); a success forgets them.
const LOGIN_FAILURES: RateLimit = RateLimit {
    bucket: "login",
    max: 5,
    window_secs: 15 * 60,
    per: "login name, and account",
    counts: Counts::Failures,
};

/// A user as others see them.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "PublicUser")]
pub struct PublicUser {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub username: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub avatar_url: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

/// A user as they see themselves.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "UserProfile")]
pub struct Profile {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub username: String,
    pub email: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub avatar_url: Option<String>,
    pub phone_number: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
}

/// A user's own profile with how many follow them and whom they follow.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "FullUserProfile")]
pub struct FullProfile {
    #[serde(flatten)]
    pub profile: Profile,
    pub follower_count: i64,
    pub following_count: i64,
}

/// A signed-in session: an access token, the refresh token that renews it, and the user.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AuthSession")]
#[schemars(extend("examples" = [{
    "token": "eyJhbGciOiJIUzI1NiJ9...",
    "refreshToken": "rt_...",
    "expiresIn": 900,
    "tokenType": "Bearer",
    "user": {
        "id": "8988a0a4-7a52-4f15-a713-1492a6293725",
        "username": "alice",
        "email": "alice@example.com",
        "firstName": null,
        "lastName": null,
        "avatarUrl": null,
        "phoneNumber": null,
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z"
    }
}]))]
pub struct AuthSession {
    /// The user JWT (Bearer).
    pub token: String,
    /// Trades for a new pair once (`POST /api/users/refresh`).
    pub refresh_token: String,
    /// Seconds until `token` expires.
    #[schemars(range(min = 1))]
    pub expires_in: i64,
    #[schemars(extend("const" = "Bearer"))]
    pub token_type: &'static str,
    pub user: Profile,
}

/// What a follow answers: the user now followed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Followed")]
pub struct Followed {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("const" = true))]
    following: bool,
    #[schemars(extend("format" = "uuid"))]
    user_id: String,
}

impl Followed {
    fn user(user_id: String) -> Followed {
        Followed {
            success: true,
            following: true,
            user_id,
        }
    }
}

/// What an unfollow answers: the user no longer followed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Unfollowed")]
pub struct Unfollowed {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("const" = false))]
    following: bool,
    #[schemars(extend("format" = "uuid"))]
    user_id: String,
}

impl Unfollowed {
    pub fn user(user_id: String) -> Unfollowed {
        Unfollowed {
            success: true,
            following: false,
            user_id,
        }
    }
}

/// Usernames: 3 to 32 letters, digits, `_`, `.` or `-`.
pub struct Username;

impl TextRule for Username {
    const DESCRIPTION: &'static str = "3 to 32 letters, digits, `_`, `.` and `-`.";

    fn problem(text: &str) -> Option<Cow<'static, str>> {
        username_problem(text).map(Cow::Borrowed)
    }
}

request_body! {
    /// A new user of the app.
    pub struct SignupBody as "Signup" {
        "username" username: Checked<Username, 32>,
        "email" email: Checked<EmailAddress, 254>,
        "password" password: NewPassword,
        "firstName" first_name: OptText<MAX_NAME>,
        "lastName" last_name: OptText<MAX_NAME>,
    }
}

request_body! {
    /// A login: `email` or `username`, with the password.
    pub struct LoginBody as "Login" checked by LoginBody::check {
        "email" email: OptText<254>,
        "username" username: OptText<254>,
        "password" password: Secret<{ passwords::MAX_LENGTH }>,
    }
}

request_body! {
    /// A refresh token to trade for a new pair.
    pub struct RefreshBody as "RefreshRequest" {
        "refreshToken" refresh_token: Text<200>,
    }
}

request_body! {
    /// Changes to the caller's profile: the fields sent change, the others stay.
    pub struct ProfileChangesBody as "ProfileChanges" {
        "username" username: OptChecked<Username, 32>,
        "email" email: OptChecked<EmailAddress, 254>,
        "firstName" first_name: OptText<MAX_NAME>,
        "lastName" last_name: OptText<MAX_NAME>,
        "avatarUrl" avatar_url: OptChecked<HttpUrl, 2048>,
        "phoneNumber" phone_number: OptChecked<PhoneNumber, 40>,
    }
}

request_body! {
    /// A password change: the current password, and the new one.
    pub struct PasswordChangeBody as "PasswordChange" {
        "currentPassword" current_password: Secret<{ passwords::MAX_LENGTH }>,
        "newPassword" new_password: NewPassword,
    }
}

impl LoginBody {
    /// A login names its account: `email` or `username`.
    fn check(&self, body: &mut JsonBody) {
        if self.email.is_none() && self.username.is_none() {
            body.error("email", "email or username is required");
        }
    }
}

/// The user routes: the app signs users up and in, users manage themselves and follows,
/// the tenant's server lists them.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/users/signup",
        App(signup),
        "Signup (users)",
        |op| op
            .request_example(json!({
                "username": "alice",
                "email": "alice@example.com",
                "password": "correct horse battery",
            }))
            .errors(404, &["not_found"])
            .errors(
                409,
                &["username_or_email_taken", "username_taken", "email_taken"],
            ),
    ),
    endpoint!(
        POST "/api/users/login",
        App(login),
        "Login (users)",
        |op| op
            .request_example(json!({
                "email": "alice@example.com",
                "password": "correct horse battery",
            }))
            .errors(401, &["invalid_credentials"])
            .errors(404, &["not_found"])
            .rate_limited(&LOGIN_FAILURES),
    ),
    endpoint!(
        POST "/api/users/refresh",
        App(refresh),
        "Refresh (users)",
        |op| op
            .request_example(json!({ "refreshToken": "rt_..." }))
            .errors(401, &["invalid_refresh_token", "refresh_token_reused"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/users/profile/full",
        User(full_profile),
        "Full profile (users)",
        |op| op.errors(404, &["not_found"]),
    ),
    endpoint!(
        PUT "/api/users/profile",
        User(update_profile),
        "Update profile (users)",
        |op| op
            .errors(404, &["not_found"])
            .errors(
                409,
                &["username_or_email_taken", "username_taken", "email_taken"],
            ),
    ),
    endpoint!(
        DELETE "/api/users/profile",
        User(delete_profile),
        "Delete profile (users)",
        |op| op.errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/users/change-password",
        User(change_password),
        "Change password (users)",
        |op| op
            .errors(401, &["invalid_credentials"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/users/follow/{id}",
        User(follow),
        "Follow (users)",
        |op| op
            .link(
                "DELETE /api/users/follow/{id}",
                &[("id", "$response.body#/userId")],
            )
            .link(
                "GET /api/users/{id}/followers",
                &[("id", "$response.body#/userId")],
            )
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"])
            .errors(422, &["cannot_follow_self"]),
    ),
    endpoint!(
        DELETE "/api/users/follow/{id}",
        User(unfollow),
        "Unfollow (users)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/users/{id}/followers",
        User(followers),
        "Followers (users)",
        |op| op
            .errors(400, &["invalid_id", "invalid_query"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/users/{id}/following",
        User(following),
        "Following (users)",
        |op| op
            .errors(400, &["invalid_id", "invalid_query"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/v1/users",
        Server(list_for_client),
        "List for client (users)",
        |op| op.errors(400, &["invalid_query"]),
    ),
];

impl PublicUser {
    pub fn of(u: &store::User) -> Self {
        PublicUser {
            id: u.id.clone(),
            username: u.username.clone(),
            first_name: u.first_name.clone(),
            last_name: u.last_name.clone(),
            avatar_url: u.avatar_url.clone(),
            created_at: u.created_at.clone(),
        }
    }
}

impl Profile {
    fn of(u: &store::User) -> Self {
        Profile {
            id: u.id.clone(),
            username: u.username.clone(),
            email: u.email.clone(),
            first_name: u.first_name.clone(),
            last_name: u.last_name.clone(),
            avatar_url: u.avatar_url.clone(),
            phone_number: u.phone_number.clone(),
            created_at: u.created_at.clone(),
            updated_at: u.updated_at.clone(),
        }
    }
}

/// The answer when a body's `field` names no user of the tenant (another tenant's users
/// included): the request's own resource exists, the reference in it does not, so 422.
pub fn unknown_user(field: &str) -> ApiError {
    ApiError::invalid_fields(vec![domain::problem::FieldError {
        field: field.to_string(),
        message: "is not a user of this app".to_string(),
    }])
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
    store::by_id(db, client_id, user_id)?
        .map(|u| Profile::of(&u))
        .ok_or_else(|| ApiError::not_found("user"))
}

fn taken(field: &'static str) -> ApiError {
    let (code, message) = match field {
        "username" => ("username_taken", "this username is already taken"),
        _ => ("email_taken", "this e-mail address is already registered"),
    };
    ApiError::conflict(code, message).with_extra("field", field)
}

/// Answers 409 when `username` or `email` is taken in the tenant by someone other than `except`.
fn ensure_unique(
    db: &Db,
    client_id: &str,
    username: Option<&str>,
    email: Option<&str>,
    except: &str,
) -> Result<(), ApiError> {
    if let Some(username) = username
        && store::login_taken(db, client_id, Login::Username(username), except)?
    {
        return Err(taken("username"));
    }
    if let Some(email) = email
        && store::login_taken(db, client_id, Login::Email(email), except)?
    {
        return Err(taken("email"));
    }
    Ok(())
}

fn taken_meanwhile() -> ApiError {
    ApiError::conflict(
        "username_or_email_taken",
        "this username or e-mail address is already registered",
    )
}

/// A fresh access token and a refresh token in `family` (a new family when `None`).
fn issue_session(
    db: &Db,
    client_id: &str,
    user_id: &str,
    token_version: i64,
    family: Option<&str>,
    now: i64,
) -> Result<AuthSession, ApiError> {
    let secret = config::required("jwt_secret")?;
    let family = family.map_or_else(ids::uuid, str::to_string);
    let token = jwt::issue_user_token(
        secret.as_bytes(),
        user_id,
        client_id,
        token_version,
        &family,
        now,
    );
    let refresh = format!("rt_{}", ids::random_base62(48));
    analytics::user_active(db, client_id, user_id, now)?;
    store::add_refresh_token(
        db,
        client_id,
        user_id,
        &ids::sha256_hex(refresh.as_bytes()),
        &family,
        now + REFRESH_TTL_SECS,
        now,
    )?;
    Ok(AuthSession {
        token,
        refresh_token: refresh,
        expires_in: USER_TOKEN_TTL_SECS,
        token_type: "Bearer",
        user: load_profile(db, client_id, user_id)?,
    })
}

/// A new user of the app, signed in.
fn signup(ctx: &AppCtx, body: SignupBody) -> Result<Json<AuthSession>, ApiError> {
    let tenant = &ctx.tenant;
    let SignupBody {
        username,
        email,
        password,
        first_name,
        last_name,
    } = body;

    let db = ctx.db()?;
    ensure_unique(&db, &tenant.client_id, Some(&username), Some(&email), "")?;
    let id = ids::uuid();
    let hash = passwords::hash(&password)?;
    let new = NewUser {
        id: &id,
        username: &username,
        email: &email,
        password_hash: &hash,
        first_name: first_name.as_deref(),
        last_name: last_name.as_deref(),
    };
    // Two sign-ups racing for one name: the unique index decides.
    db.transaction(|tx| {
        if !store::insert(tx, &tenant.client_id, &new, ctx.now())? {
            return Err(taken_meanwhile());
        }
        analytics::user_signed_up(tx, &tenant.client_id, ctx.now())?;
        let user = store::by_id(tx, &tenant.client_id, &id)?
            .ok_or_else(|| ApiError::internal("the new user is missing"))?;
        record_event(
            tx,
            "user.created",
            &PublicUser::of(&user),
            &tenant.client_id,
            ctx.now(),
        )
    })?;
    Ok(Json(issue_session(
        &db,
        &tenant.client_id,
        &id,
        0,
        None,
        ctx.now(),
    )?))
}

/// By `email` or `username`, with `password`.
fn login(ctx: &AppCtx, body: LoginBody) -> Result<Json<AuthSession>, ApiError> {
    let tenant = &ctx.tenant;
    let LoginBody {
        email,
        username,
        password,
    } = body;
    let login = match &email {
        Some(e) => Login::Email(e),
        None => Login::Username(username.as_deref().unwrap_or_default()),
    };

    let db = ctx.db()?;
    let now = ctx.now();
    // Attempts count per login string and, once it names an account, per account too: the
    // e-mail and the username of one account share its budget.
    let key = match login {
        Login::Email(e) | Login::Username(e) => e.to_lowercase(),
    };
    let bucket = format!("login:{}:{key}", tenant.client_id);
    rate_limits::attempt(
        &db,
        &bucket,
        LOGIN_FAILURES.max,
        LOGIN_FAILURES.window_secs,
        now,
    )?;
    let found = store::by_login(&db, &tenant.client_id, login)?;
    // An unknown login does the same work as a known one (an account budget of its own, a
    // password check against a decoy hash), so the answer's timing tells them apart no
    // more than its body does.
    let account_bucket = match &found {
        Some(u) => format!("login-account:{}:{}", tenant.client_id, u.id),
        None => format!(
            "login-account:{}:~{}",
            tenant.client_id,
            ids::sha256_hex(key.as_bytes())
        ),
    };
    rate_limits::attempt(
        &db,
        &account_bucket,
        LOGIN_FAILURES.max,
        LOGIN_FAILURES.window_secs,
        now,
    )?;
    let hash = found
        .as_ref()
        .map_or(passwords::decoy_hash(), |u| u.password_hash.as_str());
    // Checked whether or not the login names an account.
    let valid = passwords::verify(&password, hash);
    let Some(user) = found.as_ref().filter(|_| valid) else {
        return Err(ApiError::unauthorized(
            "invalid_credentials",
            "the login or password is not correct",
        ));
    };
    rate_limits::clear(&db, &bucket)?;
    rate_limits::clear(&db, &account_bucket)?;
    Ok(Json(issue_session(
        &db,
        &tenant.client_id,
        &user.id,
        user.token_version,
        None,
        now,
    )?))
}

/// What a refresh came to.
enum Refreshed {
    Session(Box<AuthSession>),
    Reused,
}

/// Trades a refresh token for a new pair. A token used twice is a sign of theft: its whole
/// family is revoked, the pair the first use got included. Of concurrent uses exactly one
/// rotates the token; the others count as reuse.
fn refresh(ctx: &AppCtx, body: RefreshBody) -> Result<Json<AuthSession>, ApiError> {
    let tenant = &ctx.tenant;
    let token = body.refresh_token;
    let invalid =
        || ApiError::unauthorized("invalid_refresh_token", "the refresh token is not valid");
    let reused = || {
        ApiError::unauthorized(
            "refresh_token_reused",
            "this refresh token was already used; its session has been revoked",
        )
    };
    let now = ctx.now();
    let db = ctx.db()?;
    let hash = ids::sha256_hex(token.as_bytes());
    let found = store::refresh_token(&db, &tenant.client_id, &hash)?.ok_or_else(invalid)?;
    if found.rotated {
        store::revoke_family(&db, &found.family_id)?;
        return Err(reused());
    }
    if found.revoked || found.expires_at <= now {
        return Err(invalid());
    }
    // Rotation and the new token commit together, so a concurrent loser that revokes the
    // family after the winner's commit revokes the winner's new token too.
    let outcome = db.transaction(|tx| {
        if !store::rotate(tx, &hash)? {
            store::revoke_family(tx, &found.family_id)?;
            return Ok(Refreshed::Reused);
        }
        let session = issue_session(
            tx,
            &tenant.client_id,
            &found.user_id,
            found.token_version,
            Some(&found.family_id),
            now,
        )?;
        Ok(Refreshed::Session(Box::new(session)))
    })?;
    match outcome {
        Refreshed::Session(session) => Ok(Json(*session)),
        Refreshed::Reused => Err(reused()),
    }
}

/// The caller's profile with how many follow them and whom they follow.
fn full_profile(ctx: &UserCtx, _: NoBody) -> Result<Json<FullProfile>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let (row, followers, following) = store::with_follow_counts(&db, &tenant.client_id, &user.id)?
        .ok_or_else(|| ApiError::not_found("user"))?;
    Ok(Json(FullProfile {
        profile: Profile::of(&row),
        follower_count: followers,
        following_count: following,
    }))
}

/// Changes the fields sent; others stay as they are.
fn update_profile(ctx: &UserCtx, body: ProfileChangesBody) -> Result<Json<Profile>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let ProfileChangesBody {
        username,
        email,
        first_name,
        last_name,
        avatar_url,
        phone_number: phone,
    } = body;
    let db = ctx.db()?;
    ensure_unique(
        &db,
        &tenant.client_id,
        username.as_deref(),
        email.as_deref(),
        &user.id,
    )?;
    let changes = ProfileChanges {
        username: username.as_deref(),
        email: email.as_deref(),
        first_name: first_name.as_deref(),
        last_name: last_name.as_deref(),
        avatar_url: avatar_url.as_deref(),
        phone_number: phone.as_deref(),
    };
    let applied = store::update_profile(&db, &tenant.client_id, &user.id, &changes, ctx.now())
        .map_err(|_| taken_meanwhile())?;
    if !applied {
        return Err(taken_meanwhile());
    }
    Ok(Json(load_profile(&db, &tenant.client_id, &user.id)?))
}

/// Removes the user and everything that is theirs.
fn delete_profile(ctx: &UserCtx, _: NoBody) -> Result<Json<Done>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    db.transaction(|db| {
        let gone = store::by_id(db, &tenant.client_id, &user.id)?
            .ok_or_else(|| ApiError::not_found("user"))?;
        store::delete_account(db, &tenant.client_id, &user.id)?;
        record_event(
            db,
            "user.deleted",
            &PublicUser::of(&gone),
            &tenant.client_id,
            ctx.now(),
        )
    })?;
    Ok(Json(Done::saying("the account has been deleted")))
}

/// Checks the current password, revokes every other session, and answers a fresh token
/// pair.
fn change_password(ctx: &UserCtx, body: PasswordChangeBody) -> Result<Json<AuthSession>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let PasswordChangeBody {
        current_password: current,
        new_password: new,
    } = body;
    let db = ctx.db()?;
    let stored = store::by_id(&db, &tenant.client_id, &user.id)?
        .ok_or_else(|| ApiError::not_found("user"))?;
    if !passwords::verify(&current, &stored.password_hash) {
        return Err(ApiError::unauthorized(
            "invalid_credentials",
            "the current password is not correct",
        ));
    }
    let hash = passwords::hash(&new)?;
    let version = user.token_version + 1;
    store::set_password(&db, &tenant.client_id, &user.id, &hash, version, ctx.now())?;
    Ok(Json(issue_session(
        &db,
        &tenant.client_id,
        &user.id,
        version,
        None,
        ctx.now(),
    )?))
}

/// The id path parameter as a UUID of a user in the caller's tenant (404 otherwise).
fn other_user(db: &Db, client_id: &str, raw_id: &str) -> Result<String, ApiError> {
    let id = ids::parse_uuid(raw_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the user id must be a UUID"))?;
    if !store::exists(db, client_id, &id)? {
        return Err(ApiError::not_found("user"));
    }
    Ok(id)
}

/// Idempotent; following makes both users contacts.
fn follow(ctx: &UserCtx, _: NoBody) -> Result<Json<Followed>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let target = other_user(&db, &tenant.client_id, ctx.param("id"))?;
    if target == user.id {
        return Err(ApiError::new(
            422,
            "cannot_follow_self",
            "users cannot follow themselves",
        ));
    }
    db.transaction(|db| {
        if store::follow(db, &tenant.client_id, &user.id, &target, ctx.now())? {
            analytics::creator_gained(db, &tenant.client_id, &target, Gained::Follower, ctx.now())?;
        }
        contacts::link(db, &tenant.client_id, &user.id, &target, ctx.now())
    })?;
    Ok(Json(Followed::user(target)))
}

/// Idempotent.
fn unfollow(ctx: &UserCtx, _: NoBody) -> Result<Json<Unfollowed>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let target = other_user(&db, &tenant.client_id, ctx.param("id"))?;
    unfollow_user(&db, &tenant.client_id, &user.id, &target)?;
    Ok(Json(Unfollowed::user(target)))
}

/// Ends a follow; the two stay contacts while either still follows the other.
pub fn unfollow_user(
    db: &Db,
    client_id: &str,
    follower: &str,
    followee: &str,
) -> Result<(), ApiError> {
    db.transaction(|db| {
        store::unfollow(db, client_id, follower, followee)?;
        contacts::unlink_if_unrelated(db, client_id, follower, followee)
    })
}

/// Who follows the user.
fn followers(ctx: &UserCtx, _: NoBody) -> Result<PageOf<PublicUser>, ApiError> {
    follow_list(ctx, true)
}

/// Whom the user follows.
fn following(ctx: &UserCtx, _: NoBody) -> Result<PageOf<PublicUser>, ApiError> {
    follow_list(ctx, false)
}

fn follow_list(ctx: &UserCtx, followers: bool) -> Result<PageOf<PublicUser>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let id = ids::parse_uuid(ctx.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the user id must be a UUID"))?;
    if !store::exists(&db, &ctx.tenant.client_id, &id)? {
        return Err(ApiError::not_found("user"));
    }
    let side = if followers {
        Side::Followers
    } else {
        Side::Following
    };
    let (users, total) = store::follow_page(&db, &ctx.tenant.client_id, &id, side, page)?;
    let items: Vec<PublicUser> = users.iter().map(PublicUser::of).collect();
    Ok(PageOf(Paged::new(items, total, page)))
}

/// The tenant's users, for the tenant's server.
fn list_for_client(ctx: &ServerCtx, _: NoBody) -> Result<PageOf<PublicUser>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (users, total) = store::page_of_tenant(&db, &ctx.tenant.client_id, page)?;
    let items: Vec<PublicUser> = users.iter().map(PublicUser::of).collect();
    Ok(PageOf(Paged::new(items, total, page)))
}

/// `user.*` with the user as `GET /api/v1/users` lists them (in `db`'s transaction).
fn record_event(
    db: &Db,
    event_type: &str,
    user: &PublicUser,
    client_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    crate::webhook_events::record(db, client_id, event_type, "user", &user.id, user, now)
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
