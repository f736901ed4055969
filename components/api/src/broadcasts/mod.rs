//! Broadcasts: one record whichever endpoint created it (`/api/broadcasts`,
//! `/api/streaming/sessions`, or the tenant's server through `/api/v1/sessions`).

mod access;
mod input;
mod tenant_api;
mod view;

pub use access::{Audience, Viewer, audience, check_can_watch, ensure_not_final, load_owned};
pub use input::{new_broadcast, visibility};
pub use tenant_api::{react, v1_create, v1_list, v1_patch};
pub use view::one as view_one;

use common::domain::broadcast::{self as rules, Status, Transition};
use common::pagination::{Page, Paged};
use common::realtime::Event;
use common::spin::http::{Actor, ActorCtx, AppCtx, Call, UserCtx, json};
use common::store::broadcasts::{self as store, Broadcast, Changes};
use common::store::{Db, chat, cohosts};
use common::{ApiError, ids, time};
use serde_json::json;
use spin_sdk::http::Response;

/// `POST /api/broadcasts`
pub fn create(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let new = input::new_broadcast(&mut body);
    body.finish()?;
    let db = common::spin::store::open()?;
    let b = insert(
        &db,
        &ctx.tenant.client_id,
        Some(&ctx.user.id),
        &new,
        ctx.now(),
    )?;
    Ok(json(200, &view::one(&db, &b, Audience::Owner)?))
}

/// Stores a new broadcast with its `broadcast.created` event.
pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: Option<&str>,
    new: &store::NewBroadcast,
    now: i64,
) -> Result<Broadcast, ApiError> {
    db.transaction(|tx| {
        let b = store::insert(tx, client_id, owner_id, new, now)?;
        crate::webhook_events::broadcast(tx, "broadcast.created", &b, now)?;
        Ok(b)
    })
}

/// `GET /api/broadcasts/{id}`
pub fn get(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
    let b = store::load(&db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    let audience = audience(&db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
    Ok(json(200, &view::one(&db, &b, audience)?))
}

/// `PATCH /api/broadcasts/{id}` (owner): any of `title`, `visibility`, `tags`,
/// `cohostPolicy`, until the broadcast has ended.
pub fn update(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let title = body.opt_string("title", 200);
    let visibility = body.has("visibility").then(|| input::visibility(&mut body));
    let tags = body
        .opt_value("tags")
        .map(|value| input::tags(&mut body, value));
    let cohost_policy = input::cohost_policy(&mut body);
    body.finish()?;
    let db = common::spin::store::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    let changes = Changes {
        title,
        visibility,
        tags,
        cohost_policy,
        metadata: None,
    };
    store::update(&db, &b, &changes, ctx.now())?;
    let b = store::load(&db, &b.client_id, &b.id, ctx.now())?;
    Ok(json(200, &view::one(&db, &b, Audience::Owner)?))
}

/// `GET /api/broadcasts`: the user's own, newest first.
pub fn list_own(ctx: &UserCtx) -> Result<Response, ApiError> {
    owner_page(ctx, &ctx.tenant.client_id, Some(&ctx.user.id))
}

/// One page (from the query string) of the tenant's broadcasts (or one owner's), newest
/// first, in the owner's view.
pub fn owner_page(ctx: &Call, client_id: &str, owner: Option<&str>) -> Result<Response, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = common::spin::store::open()?;
    let (items, total) = store::page_of_tenant(&db, client_id, owner, page, ctx.now())?;
    let items = view::many(&db, &items, |_| Audience::Owner)?;
    Ok(json(200, &Paged::new(items, total, page)))
}

/// `GET /api/broadcasts/live`: public, active, not stale, newest first.
pub fn list_live(ctx: &AppCtx) -> Result<Response, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = common::spin::store::open()?;
    let (items, total) = store::page_of_live(&db, &ctx.tenant.client_id, page, ctx.now())?;
    let items = view::many(&db, &items, |_| Audience::Viewer)?;
    Ok(json(200, &Paged::new(items, total, page)))
}

/// Applies a status change (the state machine decides), tells the stream's sockets, and
/// answers the stored broadcast.
pub fn change_status(db: &Db, b: &Broadcast, to: Status, now: i64) -> Result<Broadcast, ApiError> {
    match rules::transition(b.status, to)? {
        Transition::Unchanged => Ok(b.clone()),
        Transition::Moved { to, .. } => {
            let moved = db.transaction(|tx| {
                if !store::move_status(tx, b, to, now)? {
                    return Err(ApiError::conflict(
                        "concurrent_update",
                        "the broadcast changed meanwhile; read it and retry",
                    ));
                }
                let moved = store::load(tx, &b.client_id, &b.id, now)?;
                crate::webhook_events::status_reached(tx, &moved, now)?;
                Ok(moved)
            })?;
            crate::realtime::publish(
                &b.identity.stream_id,
                Event::Status {
                    status: to.as_str().into(),
                    broadcast_id: b.id.clone(),
                },
            );
            Ok(moved)
        }
    }
}

/// `POST /api/broadcasts/{id}/status`
pub fn update_status(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let status = body.string("status", 20);
    body.finish()?;
    let requested = input::requested_status(&status)?;
    let db = common::spin::store::open()?;
    let b = load_owned(ctx, &db)?;
    let b = change_status(&db, &b, requested, ctx.now())?;
    Ok(json(200, &view::one(&db, &b, Audience::Owner)?))
}

/// `POST /api/sessions/{id}/heartbeat`: keeps a pending or active broadcast alive.
pub fn heartbeat(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    store::heartbeat(&db, &b, ctx.now())?;
    Ok(json(
        200,
        &json!({ "success": true, "id": b.id, "status": b.status.as_str(), "lastHeartbeat": time::format_rfc3339(ctx.now()) }),
    ))
}

/// `POST /api/broadcasts/{id}/viewer-count`
pub fn viewer_count(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let count = body.opt_int("viewerCount", 0..=input::MAX_VIEWERS);
    if count.is_none() && !body.has_errors_for(&["viewerCount"]) {
        body.error("viewerCount", "is required");
    }
    body.finish()?;
    let count = count.unwrap_or_default();
    let db = common::spin::store::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    store::report_viewers(&db, &b, count)?;
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::Viewers {
            viewer_count: count,
        },
    );
    Ok(json(
        200,
        &json!({ "success": true, "id": b.id, "viewerCount": count }),
    ))
}

/// `POST /api/broadcasts/{id}/stream-key/reset`: a new ingest key; the old one stops working.
pub fn reset_stream_key(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    let b = db.transaction(|tx| {
        store::reset_stream_key(tx, &b, &ids::random_hex(16), ctx.now())?;
        let b = store::load(tx, &b.client_id, &b.id, ctx.now())?;
        crate::webhook_events::broadcast(tx, "broadcast.stream_key_reset", &b, ctx.now())?;
        Ok(b)
    })?;
    Ok(json(200, &view::one(&db, &b, Audience::Owner)?))
}

/// `GET /api/broadcasts/{id}/analytics`: the owner, co-hosts with canAccessAnalytics, and
/// the tenant's server.
pub fn analytics(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
    let now = ctx.now();
    let b = store::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    if let Actor::User(user) = &ctx.actor {
        let allowed = b.is_owned_by(&user.id)
            || cohosts::of_user(&db, &b, &user.id)?
                .is_some_and(|c| c.is_active() && c.permissions.can_access_analytics);
        if !allowed {
            check_can_watch(&db, &b, Viewer::User(&user.id), now)?;
            return Err(ApiError::forbidden(
                "only the owner or a co-host with canAccessAnalytics sees analytics",
            ));
        }
    }
    Ok(json(200, &analytics_summary(&db, &b, now)?))
}

/// A broadcast's analytics as `GET /api/broadcasts/{id}/analytics` answers them (and
/// `broadcast.ended` events carry them).
pub fn analytics_summary(db: &Db, b: &Broadcast, now: i64) -> Result<serde_json::Value, ApiError> {
    let duration = match (&b.started_at, &b.ended_at) {
        (Some(s), Some(e)) => time::parse_rfc3339(e)
            .zip(time::parse_rfc3339(s))
            .map(|(e, s)| e - s),
        (Some(s), None) => time::parse_rfc3339(s).map(|s| now - s),
        _ => None,
    };
    let average = (b.viewer_reports > 0).then(|| b.viewer_total as f64 / b.viewer_reports as f64);
    let reactions = store::reaction_counts(db, &[&b.id])?
        .remove(&b.id)
        .unwrap_or_default();
    Ok(json!({
        "broadcastId": b.id,
        "status": b.status.as_str(),
        "startedAt": b.started_at,
        "endedAt": b.ended_at,
        "durationSeconds": duration,
        "peakViewers": b.peak_viewers,
        "averageViewers": average,
        "viewerReports": b.viewer_reports,
        "chatMessages": chat::count_for_broadcast(db, b)?,
        "reactions": reactions,
    }))
}
