//! Clips (docs/replays.md#clips): a range of 5 to 120 seconds of a broadcast's kept media,
//! asked for by its owner, the tenant's server, or a viewer where the tenant lets viewers
//! clip. The media server, which asks every second for the clips to make
//! (`POST /api/media/clips/pending`), writes each one's HLS playlists over the replay's
//! segments (nothing copied), then cuts its MP4, and reports each step
//! (`POST /api/media/clip`); the MP4 ready is a `clip.ready` event.

use crate::ApiRoute;
use crate::access::{self, Viewer};
use crate::links::Links;
use crate::webhook_events;
use ::store::app;
use ::store::broadcasts::Broadcast;
use ::store::clips::{self as store, Clip, NewClip};
use ::store::replays::{self as replays, Replay};
use ::store::{Db, app::access::AsViewer};
use domain::broadcast::Status;
use domain::clip::{self as rules, Asked};
use domain::media::protocol::{self, ClipAction, ClipAnswer, ClipDeletion, ClipReport};
use domain::pagination::{Page, Paged};
use domain::problem::FieldError;
use domain::validate::JsonBody;
use domain::validate::body::{OptInt, OptText};
use domain::{ApiError, request_body, time};
use edge::answers::Deleted;
use edge::contract::Schema;
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::spin::endpoint::{Created, Json, NoBody, Page as PageOf, Read};
use edge::spin::http::{ActorCtx, CallerCtx, MediaCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

/// Clips a signed-in user (owner or viewer) may ask for.
const CLIPS: RateLimit = RateLimit {
    bucket: "clips",
    max: 10,
    window_secs: 60,
    per: "user",
    counts: Counts::Requests,
};

/// Clips the media server is given per call.
const PENDING_BATCH: i64 = 50;

request_body! {
    /// A clip to make: `{startOffset, duration}` or `{lastSeconds}`, not both.
    pub struct NewClipBody as "NewClip" checked by NewClipBody::check {
        /// Where the clip starts, in whole seconds from the start of the broadcast's kept
        /// media (the replay's seek bar).
        "startOffset" start_offset: OptInt<0, { rules::MAX_START_OFFSET }>,
        /// Its length in whole seconds, 5 to 120 (with `startOffset`).
        "duration" duration: OptInt<{ rules::MIN_SECONDS }, { rules::MAX_SECONDS }>,
        /// "Clip that": the last 5 to 120 seconds kept when the media server makes it.
        "lastSeconds" last_seconds: OptInt<{ rules::MIN_SECONDS }, { rules::MAX_SECONDS }>,
        /// At most 200 characters.
        "title" title: OptText<{ rules::MAX_TITLE }>,
    }
}

impl NewClipBody {
    fn check(&self, body: &mut JsonBody) {
        if body.has_errors_for(&["startOffset", "duration", "lastSeconds"]) {
            return;
        }
        if let Err((field, message)) = self.asked() {
            body.error(field, message);
        }
    }

    fn asked(&self) -> Result<Asked, (&'static str, &'static str)> {
        rules::asked(self.start_offset, self.duration, self.last_seconds)
    }
}

/// A clip as whoever may see its broadcast sees it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Clip")]
pub struct ClipView {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    #[schemars(extend("format" = "uuid"))]
    pub broadcast_id: String,
    pub title: Option<String>,
    /// Seconds from the start of the broadcast's kept media; null for a `lastSeconds`
    /// clip until the media server places it (with its HLS).
    pub start_offset: Option<f64>,
    /// Seconds, as asked.
    pub duration: i64,
    /// `processing` (its HLS within seconds, then its MP4), `ready` (the MP4 too) or
    /// `failed` (`error` says why).
    pub state: ClipState,
    /// The clip's HLS playlist (the replay's own segments), signed, once written; null
    /// once the replay is deleted (the MP4 stays).
    pub hls_url: Option<String>,
    /// The MP4, signed, once `ready`.
    pub mp4_url: Option<String>,
    /// A picture of the clip, signed, once `ready`.
    pub thumbnail_url: Option<String>,
    /// Why it failed: `out_of_range` (the range is not all within the kept media),
    /// `no_media` (nothing kept to clip), `cut_failed`.
    pub error: Option<String>,
    /// The user who made it; null: the tenant's server.
    pub created_by: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// When its MP4 was ready.
    #[schemars(extend("format" = "date-time"))]
    pub ready_at: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum ClipState {
    Processing,
    Ready,
    Failed,
}

pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/broadcasts/{id}/clips",
        UserOrServer(create),
        "Create (clips)",
        |op| op
            .described(
                "Clips 5 to 120 seconds of the broadcast's kept media, live or over: \
                 `{startOffset, duration}` (seconds from the start of the show, as the \
                 replay's seek bar) or `{lastSeconds}` (\"clip that\" while live). The \
                 owner and the tenant's server may; a viewer who may watch the broadcast \
                 may when the tenant's replay settings have `viewerClips`. Its HLS is \
                 ready within seconds, its MP4 within a minute (`clip.ready`). A range \
                 outside a ready replay is 422 `out_of_range`; one the media server \
                 finds outside what it kept while live ends `failed` with `out_of_range`.",
            )
            .request_example(json!({"startOffset": 120, "duration": 30, "title": "The goal"}))
            .errors(400, &["malformed_json"])
            .errors(403, &["forbidden", "viewer_clips_disabled"])
            .errors(404, &["not_found"])
            .errors(
                409,
                &["replays_disabled", "not_started", "replay_gone"],
            )
            .errors(422, &["validation_failed", "out_of_range"])
            .rate_limited(&CLIPS),
    ),
    endpoint!(
        GET "/api/broadcasts/{id}/clips",
        Caller(list),
        "List (clips)",
        |op| op
            .described("The broadcast's clips, newest first, for whoever may watch it.")
            .errors(400, &["invalid_query"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/clips/{id}",
        Caller(get),
        "Get (clips)",
        |op| op
            .described("A clip, for whoever may watch its broadcast (its addresses signed).")
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/clips/{id}",
        UserOrServer(delete),
        "Delete (clips)",
        |op| op
            .described(
                "The broadcast's owner, the tenant's server or the clip's maker deletes \
                 it: it is no longer offered, and the media server deletes its media.",
            )
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/media/clips/pending",
        Media(pending),
        "Pending clips (media server)",
        |op| op.described(
            "The clips the media server is to make (HLS playlists, then MP4) and those \
             whose media it is to delete.",
        ),
    ),
    endpoint!(
        POST "/api/media/clip",
        Media(media_clip),
        "Clip (media server)",
        |op| op
            .described(
                "The media server says where a clip stands: `hls_ready` (`startOffset`, \
                 `duration`), `ready` (the MP4: `duration`, `size`, `thumbnail`), `failed` \
                 (`error`, a reason code) or `deleted`. A report of a clip never asked \
                 for changes nothing (the answer is `delete`).",
            )
            .request_example(json!({
                "id": "5f0c2d4e-8a1b-4c3d-9e2f-1a2b3c4d5e6f",
                "state": "ready",
                "duration": 30.02,
                "size": 4_180_000,
                "thumbnail": true,
            }))
            .answers(200, "What the media server does next", Schema::view::<ClipAnswer>())
            .errors(400, &["malformed_json", "invalid_clip_id"])
            .errors(422, &["validation_failed"]),
    ),
];

/// The view of `clip`; `replay` is its broadcast's replay (its HLS plays while the
/// replay's segments are there).
pub fn view(clip: &Clip, replay: Option<&Replay>, links: &Links, now: i64) -> ClipView {
    let state = match clip.state.as_str() {
        "ready" => ClipState::Ready,
        "failed" => ClipState::Failed,
        _ => ClipState::Processing,
    };
    let hls = rules::hls_plays(
        clip.hls_ready_at.is_some(),
        state == ClipState::Failed,
        replay.map(|r| r.state.as_str()),
    );
    let ready = state == ClipState::Ready;
    ClipView {
        id: clip.id.clone(),
        broadcast_id: clip.broadcast_id.clone(),
        title: clip.title.clone(),
        start_offset: clip.start_ms.map(|ms| ms as f64 / 1000.0),
        duration: clip.duration_s,
        state,
        hls_url: hls.then(|| {
            links.signed_stream_file(
                &clip.stream_id,
                &format!("replay/clips/{}/index.m3u8", clip.id),
                now,
            )
        }),
        mp4_url: ready.then(|| links.signed_clip_file(&clip.id, "clip.mp4", now)),
        thumbnail_url: (ready && clip.thumbnail)
            .then(|| links.signed_clip_file(&clip.id, "thumbnail.jpg", now)),
        error: clip.error.clone().filter(|_| state == ClipState::Failed),
        created_by: clip.created_by.clone(),
        created_at: time::format_rfc3339(clip.created_at),
        ready_at: clip.ready_at.map(time::format_rfc3339),
    }
}

fn view_of(db: &Db, clip: &Clip, now: i64) -> Result<ClipView, ApiError> {
    let replay = replays::by_stream(db, &clip.stream_id)?;
    Ok(view(clip, replay.as_ref(), &Links::load(), now))
}

fn out_of_range(kept: f64) -> ApiError {
    ApiError::new(
        422,
        "out_of_range",
        format!("the range is not within the broadcast's {kept:.3} seconds"),
    )
    .with_extra("keptSeconds", kept)
}

/// Clips the broadcast: its owner, the tenant's server, or a viewer the tenant lets clip.
fn create(ctx: &ActorCtx, sent: NewClipBody) -> Result<Created<ClipView>, ApiError> {
    let asked = sent
        .asked()
        .map_err(|(field, message)| ApiError::invalid_fields(vec![field_error(field, message)]))?;
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    if let Some(user) = ctx.user()
        && !b.is_owned_by(&user.id)
    {
        access::check_can_watch(&db, &b, Viewer::User(&user.id), now)?;
        if !store::viewer_clips(&db, &b.client_id)? {
            return Err(ApiError::new(
                403,
                "viewer_clips_disabled",
                "the broadcast's owner and the tenant's server may clip it; viewers may not",
            ));
        }
    }
    let (start_ms, last_seconds) = placed(&db, &b, asked)?;
    if let Some(user) = ctx.user() {
        CLIPS.hit(&db, &format!("{}:{}", b.client_id, user.id), now)?;
    }
    let id = domain::ids::uuid();
    store::create(
        &db,
        &NewClip {
            id: &id,
            client_id: &b.client_id,
            broadcast_id: &b.id,
            stream_id: &b.identity.stream_id,
            title: sent.title.as_deref(),
            start_ms,
            last_seconds,
            duration_s: asked.duration(),
            created_by: ctx.user().map(|u| u.id.as_str()),
        },
        now,
    )?;
    let clip = store::by_id(&db, &id)?.ok_or_else(|| ApiError::internal("the clip vanished"))?;
    Ok(Created(view_of(&db, &clip, now)?))
}

/// Where the clip starts (ms), or the `lastSeconds` the media server places; refuses a
/// broadcast with nothing to clip and a range outside a ready replay.
fn placed(db: &Db, b: &Broadcast, asked: Asked) -> Result<(Option<i64>, Option<i64>), ApiError> {
    let (enabled, _) = replays::settings(db, &b.client_id)?;
    let replay = replays::of_many(db, &[b.id.as_str()])?.remove(&b.id);
    if !enabled && replay.as_ref().is_none_or(|r| r.state != "ready") {
        return Err(ApiError::conflict(
            "replays_disabled",
            "the tenant keeps no replays, so there is nothing to clip",
        ));
    }
    match replay {
        Some(r) if r.state == "ready" => {
            let kept = r.duration_ms.unwrap_or(0) as f64 / 1000.0;
            let (start, _) = asked.place(kept).ok_or_else(|| out_of_range(kept))?;
            Ok((Some((start * 1000.0).round() as i64), None))
        }
        Some(r) if r.state != "processing" => Err(ApiError::conflict(
            "replay_gone",
            "the broadcast's replay is deleted or failed: there is nothing to clip",
        )),
        _ if b.status == Status::Pending && b.started_at.is_none() => Err(ApiError::conflict(
            "not_started",
            "the broadcast has not gone live: there is nothing to clip yet",
        )),
        // Live, or being written: the media server places it in what it kept.
        _ => Ok(match asked {
            Asked::Range { start, .. } => (Some(start * 1000), None),
            Asked::Last { seconds } => (None, Some(seconds)),
        }),
    }
}

fn field_error(field: &str, message: &str) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// The broadcast of the path's `id`, for a caller who may watch it.
fn watched(ctx: &CallerCtx, db: &Db, id: &str) -> Result<Broadcast, ApiError> {
    let b = app::broadcasts::load(db, &ctx.tenant.client_id, id, ctx.now())?;
    access::audience(db, &b, Viewer::of(&ctx.caller), ctx.now())?;
    Ok(b)
}

/// The broadcast's clips, newest first.
fn list(ctx: &CallerCtx, _: NoBody) -> Result<PageOf<ClipView>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let b = watched(ctx, &db, ctx.param("id"))?;
    let (items, total) = store::page_of_broadcast(&db, &b.client_id, &b.id, page)?;
    let replay = replays::by_stream(&db, &b.identity.stream_id)?;
    let links = Links::load();
    let items = items
        .iter()
        .map(|c| view(c, replay.as_ref(), &links, ctx.now()))
        .collect();
    Ok(PageOf(Paged::new(items, total, page)))
}

/// The tenant's clip of the path's `id` (404 for another tenant's, or a deleted one).
fn load(db: &Db, client_id: &str, id: &str) -> Result<Clip, ApiError> {
    let id = domain::ids::parse_uuid(id).ok_or_else(|| ApiError::not_found("clip"))?;
    store::get(db, client_id, &id)?.ok_or_else(|| ApiError::not_found("clip"))
}

/// A clip, for whoever may watch its broadcast.
fn get(ctx: &CallerCtx, _: NoBody) -> Result<Json<ClipView>, ApiError> {
    let db = ctx.db()?;
    let clip = load(&db, &ctx.tenant.client_id, ctx.param("id"))?;
    watched(ctx, &db, &clip.broadcast_id).map_err(|_| ApiError::not_found("clip"))?;
    Ok(Json(view_of(&db, &clip, ctx.now())?))
}

/// The owner, the tenant's server or the clip's maker deletes it.
fn delete(ctx: &ActorCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    let clip = load(&db, &ctx.tenant.client_id, ctx.param("id"))?;
    if let Some(user) = ctx.user() {
        let b = app::broadcasts::load(&db, &clip.client_id, &clip.broadcast_id, now)
            .map_err(|_| ApiError::not_found("clip"))?;
        let maker = clip.created_by.as_deref() == Some(user.id.as_str());
        if !b.is_owned_by(&user.id) && !maker {
            access::check_can_watch(&db, &b, ctx.actor.as_viewer(), now)
                .map_err(|_| ApiError::not_found("clip"))?;
            return Err(ApiError::forbidden(
                "only the broadcast's owner or the clip's maker deletes it",
            ));
        }
    }
    store::mark_deleting(&db, &clip.id)?;
    Ok(Json(Deleted::of(clip.id)))
}

/// The clips to make, and those whose media to delete.
fn pending(ctx: &MediaCtx, _: NoBody) -> Result<Json<protocol::PendingClips>, ApiError> {
    let db = ctx.db()?;
    let make = store::to_make(&db, PENDING_BATCH)?
        .into_iter()
        .map(|c| protocol::PendingClip {
            id: c.id,
            stream_id: c.stream_id,
            start_offset: c.start_ms.map(|ms| ms as f64 / 1000.0),
            // Placed (with its HLS): the MP4 cuts the same range.
            last_seconds: c.last_seconds.filter(|_| c.start_ms.is_none()),
            duration: c.duration_s,
            hls_ready: c.hls_ready_at.is_some(),
        })
        .collect();
    let delete = store::to_delete(&db, PENDING_BATCH)?
        .into_iter()
        .map(|c| ClipDeletion {
            id: c.id,
            stream_id: c.stream_id,
        })
        .collect();
    Ok(Json(protocol::PendingClips { make, delete }))
}

/// The media server's report within its contract: finite seconds, a size, a reason code
/// of `[a-z0-9_]`, and the fields its state needs.
fn check_report(call: &protocol::Clip) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    let seconds_ok = |s: f64, max: f64| s.is_finite() && (0.0..=max).contains(&s);
    if call
        .start_offset
        .is_some_and(|s| !seconds_ok(s, rules::MAX_START_OFFSET as f64))
    {
        errors.push(field_error("startOffset", "0 to 2678400 seconds"));
    }
    if call.duration.is_some_and(|d| !seconds_ok(d, 600.0)) {
        errors.push(field_error("duration", "0 to 600 seconds"));
    }
    if call.size.is_some_and(|s| s > 1 << 40) {
        errors.push(field_error("size", "at most 1 TiB"));
    }
    if call.error.as_ref().is_some_and(|e| {
        e.is_empty()
            || e.len() > 100
            || !e
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }) {
        errors.push(field_error("error", "a reason code of [a-z0-9_], 1 to 100"));
    }
    let needs: &[(&str, bool)] = match call.state {
        ClipReport::HlsReady => &[
            ("startOffset", call.start_offset.is_some()),
            ("duration", call.duration.is_some()),
        ],
        ClipReport::Ready => &[
            ("duration", call.duration.is_some()),
            ("size", call.size.is_some()),
        ],
        ClipReport::Failed => &[("error", call.error.is_some())],
        ClipReport::Deleted => &[],
    };
    for (field, present) in needs {
        if !present {
            errors.push(field_error(field, "is required in this state"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(errors))
    }
}

fn answer(action: ClipAction) -> Json<ClipAnswer> {
    Json(ClipAnswer { action })
}

/// Where a clip stands on the media server; answers what it does next.
fn media_clip(
    ctx: &MediaCtx,
    Read(call): Read<protocol::Clip>,
) -> Result<Json<ClipAnswer>, ApiError> {
    let Some(id) = domain::ids::parse_uuid(&call.id) else {
        return Err(ApiError::bad_request(
            "invalid_clip_id",
            "id must be a UUID",
        ));
    };
    check_report(&call)?;
    let db = ctx.db()?;
    let now = ctx.now();
    let Some(clip) = store::by_id(&db, &id)? else {
        return Ok(answer(ClipAction::Delete));
    };
    if clip.state == "deleting" || clip.state == "deleted" {
        if call.state == ClipReport::Deleted {
            store::deleted(&db, &id, now)?;
            return Ok(answer(ClipAction::Continue));
        }
        return Ok(answer(ClipAction::Delete));
    }
    let ms = |s: f64| (s * 1000.0).round() as i64;
    match call.state {
        ClipReport::HlsReady => {
            let (Some(start), Some(duration)) = (call.start_offset, call.duration) else {
                return Err(ApiError::internal("checked above"));
            };
            store::hls_ready(&db, &id, ms(start), ms(duration), now)?;
            Ok(answer(ClipAction::Continue))
        }
        ClipReport::Ready => {
            let (Some(duration), Some(size)) = (call.duration, call.size) else {
                return Err(ApiError::internal("checked above"));
            };
            db.transaction(|tx| {
                let moved = store::ready(
                    tx,
                    &id,
                    ms(duration),
                    i64::try_from(size).unwrap_or(i64::MAX),
                    call.thumbnail.unwrap_or(false),
                    now,
                )?;
                if moved && let Some(ready) = store::by_id(tx, &id)? {
                    let data = view_of(tx, &ready, now)?;
                    webhook_events::record(
                        tx,
                        &ready.client_id,
                        "clip.ready",
                        "clip",
                        &ready.id,
                        &data,
                        now,
                    )?;
                }
                Ok(())
            })?;
            Ok(answer(ClipAction::Continue))
        }
        ClipReport::Failed => {
            // What was made of a failed clip is of no use; a ready clip stays as it is.
            if store::failed(&db, &id, call.error.as_deref().unwrap_or("failed"))? {
                Ok(answer(ClipAction::Delete))
            } else {
                Ok(answer(ClipAction::Continue))
            }
        }
        ClipReport::Deleted => Ok(answer(ClipAction::Continue)),
    }
}
