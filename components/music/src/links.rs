//! The stored link between a user and a music-platform account, and the endpoints that
//! read and change it: `/link`, `/authenticate` and `/refresh-token`.
//!
//! A link belongs to one user of one tenant. Its music account (`platformMusicUserId`)
//! is set only by a verified flow, authenticate or link-existing; `POST /link` and
//! `PUT /link` change nothing but `isActive`. The music token is kept sealed and is never
//! part of an answer. While a link is inactive its token is not used.

use crate::platform::{self, MusicPlatform};
use crate::sealed::{self, TokenKey};
use domain::jwt;
use domain::validate::JsonBody;
use domain::validate::body::OptBool;
use domain::{ApiError, request_body};
use edge::answers::Done;
use edge::endpoint;
use edge::routing::Route;
use edge::spin::auth::{CurrentUser, Tenant};
use edge::spin::config;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{Handler, UserCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use store::Db;
use store::music_links as stored;

pub use store::music_links::Link;

/// The caller's link to their music platform account.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "MusicLink")]
pub struct LinkRecord {
    #[schemars(extend("format" = "uuid"))]
    id: String,
    #[schemars(extend("format" = "uuid"))]
    platform_user_id: String,
    platform_user_email: String,
    /// The linked music account, once authenticate or link-existing verified it.
    platform_music_user_id: Option<String>,
    /// While false, the link's music token is not used.
    is_active: bool,
    /// When the current music account was linked.
    #[schemars(extend("format" = "date-time"))]
    linked_at: Option<String>,
}

impl LinkRecord {
    pub fn new(link: Link, user: &CurrentUser) -> Self {
        Self {
            id: link.id,
            platform_user_id: user.id.clone(),
            platform_user_email: user.email.clone(),
            platform_music_user_id: link.music_user_id,
            is_active: link.is_active,
            linked_at: link.linked_at,
        }
    }
}

/// The caller's link, if any.
pub fn load(db: &Db, tenant: &Tenant, user: &CurrentUser) -> Result<Option<Link>, ApiError> {
    stored::load(db, &tenant.client_id, &user.id)
}

fn load_existing(db: &Db, tenant: &Tenant, user: &CurrentUser) -> Result<Link, ApiError> {
    load(db, tenant, user)?.ok_or_else(|| ApiError::not_found("music link"))
}

/// Links the caller to `music_user_id` (active), creating the link when there is none.
/// A new token replaces the stored one; without one, the stored token is kept only when
/// the music account stays the same. `linkedAt` changes only with the account.
pub fn attach(
    db: &Db,
    ctx: &UserCtx,
    music_user_id: &str,
    sealed_token: Option<&str>,
) -> Result<Link, ApiError> {
    stored::attach(
        db,
        &ctx.tenant.client_id,
        &ctx.user.id,
        music_user_id,
        sealed_token,
        ctx.now(),
    )
}

/// The key that seals music tokens (`music_token_key`).
pub fn token_key() -> Result<TokenKey, ApiError> {
    sealed::token_key(&config::required("music_token_key")?)
}

/// The token that names the caller to the music platform: minted for it (its audience,
/// five minutes, signed with `music_service_secret`), never the caller's own token, which
/// the music platform could replay against this API.
pub fn service_token(ctx: &UserCtx) -> Result<String, ApiError> {
    let secret = config::required("music_service_secret")?;
    Ok(jwt::issue_music_platform_token(
        secret.as_bytes(),
        &ctx.tenant.client_id,
        &ctx.user.id,
        &ctx.user.email,
        &ctx.user.username,
        ctx.now(),
    ))
}

/// The caller's music token: the one stored with an active link, opened.
fn stored_token(
    link: &Link,
    tenant: &Tenant,
    user: &CurrentUser,
) -> Result<Option<String>, ApiError> {
    let Some(sealed) = link.sealed_token.as_deref().filter(|_| link.is_active) else {
        return Ok(None);
    };
    let opened = token_key()?.open(sealed, &sealed::row_context(&tenant.client_id, &user.id));
    if opened.is_none() {
        eprintln!(
            "warning: the music token of link {} does not open (was music_token_key changed?)",
            link.id
        );
    }
    Ok(opened)
}

/// What the caller's requests to the platform carry as Bearer: the stored music token of
/// an active link, else the service token (which the platform accepts, as in authenticate).
pub fn credential(ctx: &UserCtx) -> Result<String, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    match load(&db, tenant, user)? {
        Some(link) => match stored_token(&link, tenant, user)? {
            Some(token) => Ok(token),
            None => service_token(ctx),
        },
        None => service_token(ctx),
    }
}

/// The link routes: the caller's link, its verified creation by the platform and its
/// token's refresh.
pub const ROUTES: &[Route<Handler>] = &[
    endpoint!(
        POST "/api/users/music/authenticate",
        User(authenticate),
        "Authenticate (links)",
        |op| op
            .errors(401, &["missing_token"])
            .errors(502, platform::FAILURES)
            .errors(504, &["music_platform_timeout"])
    ),
    endpoint!(
        GET "/api/users/music/link",
        User(get),
        "Get (links)",
        |op| op.errors(404, &["not_found"])
    ),
    endpoint!(
        POST "/api/users/music/link",
        User(create_or_update),
        "Create or update (links)",
        |op| op.errors(404, &["not_found"])
    ),
    endpoint!(
        PUT "/api/users/music/link",
        User(update),
        "Update (links)",
        |op| op.errors(404, &["not_found"])
    ),
    endpoint!(
        DELETE "/api/users/music/link",
        User(delete),
        "Delete (links)",
        |op| op.errors(404, &["not_found"])
    ),
    endpoint!(
        POST "/api/users/music/refresh-token",
        User(refresh),
        "Refresh (links)",
        |op| op
            .errors(401, &["music_token_rejected"])
            .errors(404, &["not_found"])
            .errors(409, &["music_link_inactive", "music_token_missing"])
            .errors(502, platform::FAILURES)
            .errors(504, &["music_platform_timeout"])
    ),
];

/// The link, or 404.
fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<LinkRecord>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let link = load_existing(&ctx.db()?, tenant, user)?;
    Ok(Json(LinkRecord::new(link, user)))
}

request_body! {
    /// What a client may change of its music link.
    pub struct LinkChangesBody as "MusicLinkChanges" checked by LinkChangesBody::check {
        /// Whether the link's music token is used.
        "isActive" is_active: OptBool,
    }
}

impl LinkChangesBody {
    /// Only `isActive` may be set by the client; the music account only by a verified
    /// flow.
    fn check(&self, body: &mut JsonBody) {
        for field in ["platformMusicUserId", "platformUserId", "platformUserEmail"] {
            if body.has(field) {
                body.error(
                    field,
                    "cannot be set here: use POST /api/users/music/authenticate or /link-existing",
                );
            }
        }
    }
}

/// Applies an `isActive` change (if any) and answers the link record.
fn answer_with_active(
    db: &Db,
    ctx: &UserCtx,
    is_active: Option<bool>,
) -> Result<Json<LinkRecord>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    if let Some(active) = is_active {
        stored::set_active(db, &tenant.client_id, &user.id, active, ctx.now())?;
    }
    let link = load_existing(db, tenant, user)?;
    Ok(Json(LinkRecord::new(link, user)))
}

/// Creates the caller's link (with no music account yet) or updates it; body
/// `{"isActive"?: bool}`.
fn create_or_update(
    ctx: &UserCtx,
    LinkChangesBody { is_active }: LinkChangesBody,
) -> Result<Json<LinkRecord>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    stored::create(
        &db,
        &tenant.client_id,
        &user.id,
        is_active.unwrap_or(true),
        ctx.now(),
    )?;
    answer_with_active(&db, ctx, is_active)
}

/// Updates an existing link's metadata (`isActive`).
fn update(
    ctx: &UserCtx,
    LinkChangesBody { is_active }: LinkChangesBody,
) -> Result<Json<LinkRecord>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    load_existing(&db, tenant, user)?;
    answer_with_active(&db, ctx, is_active)
}

/// Unlinks; the row and its sealed token are deleted.
fn delete(ctx: &UserCtx, _: NoBody) -> Result<Json<Done>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    load_existing(&db, tenant, user)?;
    stored::delete(&db, &tenant.client_id, &user.id)?;
    Ok(Json(Done::saying("the music account has been unlinked")))
}

/// The platform takes the user's service token and answers its music account (creating
/// one when there is none) and a music token; the link is created or updated with them.
fn authenticate(ctx: &UserCtx, _: NoBody) -> Result<Json<LinkRecord>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let key = token_key()?;
    let token = service_token(ctx)?;
    let music = MusicPlatform::from_config()?;
    let identity = json!({ "userId": user.id, "email": user.email, "username": user.username });
    let answer = music.call(
        "POST",
        platform::AUTHENTICATE_PATH,
        Some(&token),
        Some(&identity),
    )?;
    if !platform::is_success(answer.status) {
        return Err(platform::unexpected(answer.status, "authenticate"));
    }
    let (token, account) = platform::parse_authenticated(&answer.body)
        .ok_or_else(|| platform::unreadable("authenticate"))?;
    let sealed = key.seal(&token, &sealed::row_context(&tenant.client_id, &user.id))?;
    let link = attach(&ctx.db()?, ctx, &account.id, Some(&sealed))?;
    Ok(Json(LinkRecord::new(link, user)))
}

/// Trades the stored music token for a new one.
fn refresh(ctx: &UserCtx, _: NoBody) -> Result<Json<LinkRecord>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let link = load_existing(&db, tenant, user)?;
    if !link.is_active {
        return Err(ApiError::conflict(
            "music_link_inactive",
            "the music link is inactive; activate it with PUT /api/users/music/link",
        ));
    }
    let current = stored_token(&link, tenant, user)?.ok_or_else(|| {
        ApiError::conflict(
            "music_token_missing",
            "the link has no usable music token; call POST /api/users/music/authenticate",
        )
    })?;
    let music = MusicPlatform::from_config()?;
    let answer = music.call("POST", platform::REFRESH_PATH, Some(&current), None)?;
    if matches!(answer.status, 401 | 403) {
        return Err(ApiError::unauthorized(
            "music_token_rejected",
            "the music platform refused the stored token; call POST /api/users/music/authenticate",
        ));
    }
    if !platform::is_success(answer.status) {
        return Err(platform::unexpected(answer.status, "refresh-token"));
    }
    let token =
        platform::parse_token(&answer.body).ok_or_else(|| platform::unreadable("refresh-token"))?;
    let sealed = token_key()?.seal(&token, &sealed::row_context(&tenant.client_id, &user.id))?;
    stored::set_token(&db, &tenant.client_id, &user.id, &sealed, ctx.now())?;
    Ok(Json(LinkRecord::new(
        load_existing(&db, tenant, user)?,
        user,
    )))
}
