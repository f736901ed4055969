//! Broadcasts: one record whichever endpoint created it (`/api/broadcasts`,
//! `/api/streaming/sessions`, or the tenant's server through `/api/v1/sessions`).

pub mod events;
mod input;
mod tenant_api;
pub(crate) mod view;

pub use input::{
    BroadcastChangesBody, MediaSettingsBody, NewBroadcastBody, StatusChangeBody, ViewerCountBody,
};
pub use tenant_api::ROUTES as TENANT_ROUTES;
pub use view::{BroadcastView, one as view_one};

use crate::ApiRoute;
use crate::access::{Audience, Viewer, audience, ensure_not_final, load_owned};
use ::store::app;
use ::store::broadcasts::{self as store, Broadcast, Changes};
use ::store::{Db, outbox};
use domain::broadcast::{self as rules, Status, Transition};
use domain::pagination::{Page, Paged};
use domain::recording::SettingsPatch;
use domain::{ApiError, time};
use edge::endpoint;
use edge::realtime::Event;
use edge::spin::endpoint::{Json, NoBody, Page as PageOf};
use edge::spin::http::{AppCtx, Call, UserCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

/// A heartbeat taken: the broadcast stays alive.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Heartbeat")]
pub struct Heartbeat {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    id: String,
    status: Status,
    #[schemars(extend("format" = "date-time"))]
    last_heartbeat: String,
}

/// A viewer count taken.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ViewerCountReported")]
pub struct ViewerCountReported {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    id: String,
    #[schemars(range(min = 0))]
    viewer_count: i64,
}

/// The broadcast routes of its owner (and the live list, for the app).
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/broadcasts",
        User(create),
        "Create (broadcasts)",
        |op| op
            .request_example(json!({
                "title": "Launch stream",
                "visibility": "public",
                "tags": ["launch"],
                "deviceWidth": 390,
                "deviceHeight": 844,
                "deviceType": "mobile",
                "operatingSystem": "iOS",
            }))
            .link("GET /api/broadcasts/{id}", &[("id", "$response.body#/id")])
            .link(
                "PATCH /api/broadcasts/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/broadcasts/{id}/status",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/broadcasts/{id}/chat",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/broadcasts/{id}/chat",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/broadcasts/{id}/viewer-count",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/sessions/{id}/heartbeat",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/broadcasts/{id}/stream-key/reset",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/broadcasts/{id}/recordings",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/streaming/sessions/{id}/multihost",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/streams/{id}/chat",
                &[("id", "$response.body#/streamId")],
            )
            .link(
                "POST /api/streams/{id}/chat",
                &[("id", "$response.body#/streamId")],
            )
            .link(
                "PUT /api/streams/{id}/chat/settings",
                &[("id", "$response.body#/streamId")],
            )
            .link(
                "POST /api/streams/{id}/chat/bans",
                &[("id", "$response.body#/streamId")],
            )
            .link(
                "POST /api/streams/{id}/chat/timeouts",
                &[("id", "$response.body#/streamId")],
            )
            .link(
                "POST /api/streams/{id}/chat/clear",
                &[("id", "$response.body#/streamId")],
            )
            .link(
                "POST /api/broadcasts/{id}/gifts",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/broadcasts/{id}/recordings/start",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/broadcasts/{id}/gifts/leaderboard",
                &[("id", "$response.body#/id")],
            ),
    ),
    endpoint!(
        GET "/api/broadcasts",
        User(list_own),
        "List own (broadcasts)",
        |op| op.errors(400, &["invalid_query"]),
    ),
    endpoint!(
        GET "/api/broadcasts/live",
        App(list_live),
        "List live (broadcasts)",
        |op| op.errors(400, &["invalid_query"]),
    ),
    endpoint!(
        GET "/api/broadcasts/{id}",
        User(get),
        "Get (broadcasts)",
        |op| op.errors(404, &["not_found"]),
    ),
    endpoint!(
        PATCH "/api/broadcasts/{id}",
        User(update),
        "Update (broadcasts)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended", "already_live"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/status",
        User(update_status),
        "Update status (broadcasts)",
        |op| op
            .request_example(json!({ "status": "active" }))
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["invalid_transition", "concurrent_update"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        POST "/api/sessions/{id}/heartbeat",
        User(heartbeat),
        "Heartbeat (broadcasts)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/viewer-count",
        User(viewer_count),
        "Viewer count (broadcasts)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/stream-key/reset",
        User(reset_stream_key),
        "Reset stream key (broadcasts)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended"]),
    ),
];

/// A broadcast owned by the caller.
fn create(ctx: &UserCtx, body: NewBroadcastBody) -> Result<Json<BroadcastView>, ApiError> {
    let (new, recording) = body.into_parts();
    let db = ctx.db()?;
    let (_, view) = insert(
        &db,
        &ctx.tenant.client_id,
        Some(&ctx.user.id),
        &new,
        recording.as_ref(),
        ctx.now(),
    )?;
    Ok(Json(view))
}

/// Stores a new broadcast, its recording settings (the tenant's default with `recording`'s
/// changes) and its `broadcast.created` event; answers it with its owner's view. On
/// SQLite the transaction holds the database's writer, so everything is read and built
/// before it (the tenant's default; the record, its view and its event: a new broadcast
/// has no reactions to count) and the transaction only stores.
pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: Option<&str>,
    new: &store::NewBroadcast,
    recording: Option<&SettingsPatch>,
    now: i64,
) -> Result<(Broadcast, BroadcastView), ApiError> {
    let recording = crate::recordings::initial_settings(db, client_id, recording)?;
    let links = crate::links::Links::load();
    let b = store::new_record(client_id, owner_id, new, now);
    let owner = view::OwnerExtras {
        recording: Some(crate::recordings::SettingsView::from(&recording)),
        ingest: view::ingest_view(
            None,
            Vec::new(),
            ::store::ingests::server_report(db)?.as_ref(),
            &b,
            now,
        ),
    };
    let owner_view = view::of(&b, &links, None, None, Some(owner), now);
    let created = events::broadcast_created(&b, &owner_view, now);
    db.transaction(|tx| {
        store::insert_record(tx, &b)?;
        ::store::recordings::save_settings(tx, &b, &recording, now)?;
        outbox::record_first(tx, &created)
    })?;
    Ok((b, owner_view))
}

/// One broadcast as the caller may see it.
fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<BroadcastView>, ApiError> {
    let db = ctx.db()?;
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    let audience = audience(&db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
    Ok(Json(view::one(&db, &b, audience, ctx.now())?))
}

/// The owner changes any of `title`, `visibility`, `tags`, `cohostPolicy`, until the
/// broadcast has ended; `recording` until it goes live.
fn update(ctx: &UserCtx, fields: BroadcastChangesBody) -> Result<Json<BroadcastView>, ApiError> {
    let db = ctx.db()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    if let Some(patch) = &fields.recording {
        crate::recordings::update_settings(&db, &b, patch, ctx.now())?;
    }
    let changes = Changes {
        title: fields.title,
        visibility: fields.visibility,
        tags: fields.tags,
        cohost_policy: fields.cohost_policy,
        metadata: None,
        ladder: fields.ladder,
        latency_mode: fields.latency_mode,
    };
    store::update(&db, &b, &changes, ctx.now())?;
    let b = app::broadcasts::load(&db, &b.client_id, &b.id, ctx.now())?;
    Ok(Json(view::one(&db, &b, Audience::Owner, ctx.now())?))
}

/// The user's own, newest first.
fn list_own(ctx: &UserCtx, _: NoBody) -> Result<PageOf<BroadcastView>, ApiError> {
    owner_page(ctx, &ctx.tenant.client_id, Some(&ctx.user.id))
}

/// One page (from the query string) of the tenant's broadcasts (or one owner's), newest
/// first, in the owner's view.
fn owner_page(
    ctx: &Call,
    client_id: &str,
    owner: Option<&str>,
) -> Result<PageOf<BroadcastView>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (items, total) = app::broadcasts::page_of_tenant(&db, client_id, owner, page, ctx.now())?;
    let items = view::many(&db, &items, |_| Audience::Owner, ctx.now())?;
    Ok(PageOf(Paged::new(items, total, page)))
}

/// Public, active, not stale, newest first.
fn list_live(ctx: &AppCtx, _: NoBody) -> Result<PageOf<BroadcastView>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (items, total) = store::page_of_live(&db, &ctx.tenant.client_id, page, ctx.now())?;
    let items = view::many(&db, &items, |_| Audience::Viewer, ctx.now())?;
    Ok(PageOf(Paged::new(items, total, page)))
}

/// Applies a status change (the state machine decides), tells the stream's sockets, and
/// answers the stored broadcast.
pub fn change_status(db: &Db, b: &Broadcast, to: Status, now: i64) -> Result<Broadcast, ApiError> {
    match db.transaction(|tx| move_stored(tx, b, to, now))? {
        None => Ok(b.clone()),
        Some(moved) => {
            after_move(db, &moved, now);
            Ok(moved)
        }
    }
}

/// The stored half of a status change, inside the caller's transaction: the moved
/// broadcast, or `None` when the state machine leaves it where it is. A 409 when it moved
/// meanwhile. The caller runs [`after_move`] once the transaction has committed.
pub(crate) fn move_stored(
    tx: &Db,
    b: &Broadcast,
    to: Status,
    now: i64,
) -> Result<Option<Broadcast>, ApiError> {
    match rules::transition(b.status, to)? {
        Transition::Unchanged => Ok(None),
        Transition::Moved { to, .. } => {
            if !store::move_status(tx, b, to, now)? {
                return Err(ApiError::conflict(
                    "concurrent_update",
                    "the broadcast changed meanwhile; read it and retry",
                ));
            }
            let moved = app::broadcasts::load(tx, &b.client_id, &b.id, now)?;
            events::status_reached(tx, &moved, now)?;
            Ok(Some(moved))
        }
    }
}

/// What follows a committed status change: the stream's sockets hear it, and recordings
/// and the SFU's feed follow it.
pub(crate) fn after_move(db: &Db, moved: &Broadcast, now: i64) {
    crate::realtime::publish(
        &moved.identity.stream_id,
        Event::Status {
            status: moved.status.as_str().into(),
            broadcast_id: moved.id.clone(),
        },
    );
    // The second's start in milliseconds: any later manual recording sorts after.
    crate::recordings::on_status_change(db, moved, now.saturating_mul(1000));
    crate::sfu_feed::on_status_change(db, moved, now);
}

/// Moves the broadcast along its states (the state machine decides).
fn update_status(ctx: &UserCtx, fields: StatusChangeBody) -> Result<Json<BroadcastView>, ApiError> {
    let requested = fields.status.ok_or_else(read_without_error)?;
    let db = ctx.db()?;
    let b = load_owned(ctx, &db)?;
    let b = change_status(&db, &b, requested, ctx.now())?;
    Ok(Json(view::one(&db, &b, Audience::Owner, ctx.now())?))
}

/// A required field that came back empty from a body that reported no error.
pub(crate) fn read_without_error() -> ApiError {
    ApiError::internal("a required body field was read without an error")
}

/// Keeps a pending or active broadcast alive.
fn heartbeat(ctx: &UserCtx, _: NoBody) -> Result<Json<Heartbeat>, ApiError> {
    let db = ctx.db()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    store::heartbeat(&db, &b, ctx.now())?;
    Ok(Json(Heartbeat {
        success: true,
        id: b.id,
        status: b.status,
        last_heartbeat: time::format_rfc3339(ctx.now()),
    }))
}

/// The owner reports how many watch; the minute's analytics count it.
fn viewer_count(
    ctx: &UserCtx,
    body: ViewerCountBody,
) -> Result<Json<ViewerCountReported>, ApiError> {
    let count = body.viewer_count;
    let db = ctx.db()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    // One commit for the broadcast's count and the minute's analytics.
    db.transaction(|tx| {
        store::report_viewers(tx, &b, count)?;
        ::store::analytics::record_viewers(tx, &b, count, ctx.now())
    })?;
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::Viewers {
            viewer_count: count,
        },
    );
    Ok(Json(ViewerCountReported {
        success: true,
        id: b.id,
        viewer_count: count,
    }))
}

/// A new ingest key; the old one stops working.
fn reset_stream_key(ctx: &UserCtx, _: NoBody) -> Result<Json<BroadcastView>, ApiError> {
    let db = ctx.db()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    let b = db.transaction(|tx| {
        store::reset_stream_key(tx, &b, &domain::media::new_stream_key(), ctx.now())?;
        let b = app::broadcasts::load(tx, &b.client_id, &b.id, ctx.now())?;
        events::broadcast(tx, "broadcast.stream_key_reset", &b, ctx.now())?;
        Ok(b)
    })?;
    Ok(Json(view::one(&db, &b, Audience::Owner, ctx.now())?))
}
