//! Replays of RTMP broadcasts (docs/replays.md). The media server keeps every segment of
//! a broadcast whose tenant keeps replays from its first publish; once the publisher is
//! gone it asks here (`POST /api/media/replay`, media tier) whether the broadcast ended,
//! writes the replay when it has, and reports it ready (a `broadcast.replay_ready` event).
//! The tenant's server says whether replays are kept and for how long; the
//! `expire-replays` job marks the expired ones for deletion, and the media server, which
//! asks for them (`POST /api/media/replays/deletions`), deletes their media and says so.

use crate::ApiRoute;
use crate::access;
use crate::broadcasts::events;
use ::store::app;
use ::store::replays::{self as store, Replay};
use domain::ApiError;
use domain::media::protocol::{self, ReplayAction, ReplayAnswer, ReplayDeletions, ReplayReport};
use domain::request_body;
use domain::validate::body::{OptBool, OptInt};
use edge::answers::Deleted;
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::endpoint::{Json, NoBody, Read};
use edge::spin::http::{ActorCtx, JobsCtx, MediaCtx, ServerCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

/// The longest retention a tenant may set, in days (ten years).
pub const MAX_RETENTION_DAYS: i64 = 3650;

/// A tenant's replay settings.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ReplaySettings")]
pub struct ReplaySettings {
    /// Whether the media server keeps a replay of each RTMP broadcast (from the
    /// broadcast's next publish).
    enabled: bool,
    /// Days a replay is kept after it is ready; null: for ever.
    #[schemars(range(min = 1, max = 3650))]
    retention_days: Option<i64>,
    /// How many hours back viewers may rewind a live broadcast whose replay is kept (the
    /// broadcast's `dvr`), 1 to 24.
    #[schemars(range(min = 1, max = 24))]
    dvr_window_hours: i64,
    /// Whether viewers who may watch a broadcast may clip it (the owner and the
    /// tenant's server always may): docs/replays.md#clips.
    viewer_clips: bool,
}

/// The longest DVR window a tenant may set, in hours.
pub const MAX_DVR_WINDOW_HOURS: i64 = 24;

request_body! {
    /// The tenant's replay settings, replaced whole: `PUT /api/v1/replay-settings`.
    pub struct ReplaySettingsBody as "ReplaySettingsChanges" {
        /// Keep replays (absent: true).
        "enabled" enabled: OptBool,
        /// Days a ready replay is kept, 1 to 3650 (absent or null: for ever). Applies to
        /// replays that become ready from now on.
        "retentionDays" retention_days: OptInt<1, MAX_RETENTION_DAYS>,
        /// Hours back viewers may rewind a live broadcast, 1 to 24 (absent or null: 4).
        /// Applies to live broadcasts within seconds.
        "dvrWindowHours" dvr_window_hours: OptInt<1, MAX_DVR_WINDOW_HOURS>,
        /// Let viewers who may watch a broadcast clip it (absent: false).
        "viewerClips" viewer_clips: OptBool,
    }
}

/// What an `expire-replays` call did.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "ExpireReplaysJobReport")]
pub struct ExpireReport {
    #[schemars(extend("const" = "expire-replays"))]
    job: &'static str,
    #[serde(flatten)]
    progress: edge::answers::Progress,
}

pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/media/replay",
        Media(media_replay),
        "Replay (media server)",
        |op| op
            .described(
                "The media server says where a stream's replay stands: `waiting` (it holds \
                 the segments and its publisher is gone: is the broadcast over?), `ready` \
                 (written), `failed` or `deleted`. The answer says what it does next: wait, \
                 finish (write the replay), delete (no replay is kept), or nothing.",
            )
            .request_example(json!({
                "streamId": "0b4d9f7e-3c1a-4e8b-9d2f-6a5c4b3e2d1f",
                "state": "ready",
                "duration": 62.04,
                "renditions": 3,
            }))
            .answers(
                200,
                "What the media server does next",
                Schema::view::<ReplayAnswer>(),
            )
            .errors(400, &["malformed_json", "invalid_stream_id"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        POST "/api/media/replays/deletions",
        Media(deletions),
        "Replay deletions (media server)",
        |op| op.described(
            "The replays whose media the media server is to delete (expired, or deleted \
             with their broadcast); it reports each one `deleted` when it has.",
        ),
    ),
    endpoint!(
        GET "/api/v1/replay-settings",
        Server(settings),
        "Get (replay settings)",
        |op| op.described(
            "Whether the tenant's RTMP broadcasts keep a replay, for how long, and how far \
             back viewers may rewind them while live.",
        ),
    ),
    endpoint!(
        PUT "/api/v1/replay-settings",
        Server(replace_settings),
        "Replace (replay settings)",
        |op| op
            .described(
                "Sets whether the tenant's RTMP broadcasts keep a replay (from each \
                 broadcast's next publish), how many days a ready replay is kept (for \
                 replays ready from now on) and how many hours back viewers may rewind a \
                 live broadcast (its DVR window).",
            )
            .request_example(json!({"enabled": true, "retentionDays": 30, "dvrWindowHours": 4, "viewerClips": false}))
            .errors(400, &["malformed_json"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        DELETE "/api/broadcasts/{id}/replay",
        UserOrServer(delete),
        "Delete (replay)",
        |op| op
            .described(
                "The owner or the tenant's server deletes the broadcast's replay: it is no \
                 longer offered, and the media server deletes its media.",
            )
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["replay_processing"]),
    ),
    endpoint!(
        POST "/api/jobs/expire-replays",
        Jobs(expire),
        "Expire replays (jobs)",
        |op| op.described(
            "Marks the replays kept past their tenant's retention for deletion (the media \
             server then deletes their media).",
        ),
    ),
];

/// The tenant's replay settings.
fn settings(ctx: &ServerCtx, _: NoBody) -> Result<Json<ReplaySettings>, ApiError> {
    let db = ctx.db()?;
    let (enabled, retention_days) = store::settings(&db, &ctx.tenant.client_id)?;
    let viewer_clips = ::store::clips::viewer_clips(&db, &ctx.tenant.client_id)?;
    Ok(Json(ReplaySettings {
        enabled,
        retention_days,
        dvr_window_hours: store::dvr_window_hours(&db, &ctx.tenant.client_id)?,
        viewer_clips,
    }))
}

/// `{enabled?, retentionDays?, dvrWindowHours?, viewerClips?}`, replaced whole.
fn replace_settings(
    ctx: &ServerCtx,
    sent: ReplaySettingsBody,
) -> Result<Json<ReplaySettings>, ApiError> {
    let db = ctx.db()?;
    db.transaction(|tx| {
        store::set_settings(
            tx,
            &ctx.tenant.client_id,
            sent.enabled.unwrap_or(true),
            sent.retention_days,
        )?;
        store::set_dvr_window_hours(
            tx,
            &ctx.tenant.client_id,
            sent.dvr_window_hours
                .unwrap_or(store::DEFAULT_DVR_WINDOW_HOURS),
        )?;
        ::store::clips::set_viewer_clips(
            tx,
            &ctx.tenant.client_id,
            sent.viewer_clips.unwrap_or(false),
        )
    })?;
    settings(ctx, NoBody)
}

fn answer(action: ReplayAction) -> Json<ReplayAnswer> {
    Json(ReplayAnswer { action })
}

/// The media server's replay report within its contract: a duration of zero or more
/// seconds, 1 to 16 renditions, an error of at most 1,000 characters.
fn check_report(call: &protocol::Replay) -> Result<(), ApiError> {
    let field = |field: &str, message: &str| domain::problem::FieldError {
        field: field.into(),
        message: message.into(),
    };
    let mut errors = Vec::new();
    if call.duration.is_some_and(|d| !d.is_finite() || d < 0.0) {
        errors.push(field("duration", "zero or more seconds"));
    }
    if call.renditions.is_some_and(|r| !(1..=16).contains(&r)) {
        errors.push(field("renditions", "1 to 16"));
    }
    if call
        .error
        .as_ref()
        .is_some_and(|e| e.chars().count() > 1000)
    {
        errors.push(field("error", "at most 1000 characters"));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(errors))
    }
}

/// Where a stream's replay stands on the media server; answers what it does next.
fn media_replay(
    ctx: &MediaCtx,
    Read(call): Read<protocol::Replay>,
) -> Result<Json<ReplayAnswer>, ApiError> {
    let Some(stream_id) = domain::ids::parse_uuid(&call.stream_id) else {
        return Err(ApiError::bad_request(
            "invalid_stream_id",
            "streamId must be a UUID",
        ));
    };
    check_report(&call)?;
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load_by_stream_id(&db, &stream_id, now)?;
    let replay = store::by_stream(&db, &stream_id)?;
    match call.state {
        ReplayReport::Waiting => {
            let Some(b) = b else {
                // The broadcast is gone: so is its replay.
                return Ok(answer(ReplayAction::Delete));
            };
            if let Some(replay) = replay {
                return Ok(answer(match replay.state.as_str() {
                    // Asked again (the media server restarted its writing): write it.
                    "processing" => ReplayAction::Finish,
                    "deleting" | "deleted" => ReplayAction::Delete,
                    _ => ReplayAction::Done,
                }));
            }
            if !b.status.is_final() {
                return Ok(answer(ReplayAction::Wait));
            }
            let (enabled, _) = store::settings(&db, &b.client_id)?;
            if !enabled {
                return Ok(answer(ReplayAction::Delete));
            }
            store::start(&db, &b.id, &b.client_id, &stream_id, now)?;
            Ok(answer(ReplayAction::Finish))
        }
        ReplayReport::Ready => {
            let (Some(b), Some(replay)) = (b, replay) else {
                return Ok(answer(ReplayAction::Delete));
            };
            // Deleted while it was being written (its owner went): written for nothing.
            if replay.state == "deleting" || replay.state == "deleted" {
                return Ok(answer(ReplayAction::Delete));
            }
            let (Some(duration), Some(renditions)) = (call.duration, call.renditions) else {
                return Err(ApiError::invalid_fields(vec![
                    domain::problem::FieldError {
                        field: "duration".into(),
                        message: "a ready replay says its duration and renditions".into(),
                    },
                ]));
            };
            let (_, days) = store::settings(&db, &b.client_id)?;
            let expires_at = days.map(|d| now + d * 86_400);
            db.transaction(|tx| {
                let moved = store::ready(
                    tx,
                    &replay.broadcast_id,
                    (duration * 1000.0).round() as i64,
                    i64::from(renditions),
                    expires_at,
                    now,
                )?;
                if moved {
                    events::broadcast(tx, "broadcast.replay_ready", &b, now)?;
                }
                Ok(())
            })?;
            Ok(answer(ReplayAction::Done))
        }
        ReplayReport::Failed => {
            if let Some(replay) = replay {
                let error: String = call
                    .error
                    .as_deref()
                    .unwrap_or("the media server could not write the replay")
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(300)
                    .collect();
                store::failed(&db, &replay.broadcast_id, &error)?;
            }
            // What was kept of a failed replay is of no use: its media goes.
            Ok(answer(ReplayAction::Delete))
        }
        ReplayReport::Deleted => {
            if let Some(replay) = replay {
                store::deleted(&db, &replay.broadcast_id, now)?;
            }
            Ok(answer(ReplayAction::Done))
        }
    }
}

/// The replays whose media the media server is to delete.
fn deletions(ctx: &MediaCtx, _: NoBody) -> Result<Json<ReplayDeletions>, ApiError> {
    let db = ctx.db()?;
    Ok(Json(ReplayDeletions {
        stream_ids: store::to_delete(&db, 100)?,
    }))
}

/// The owner or the tenant's server deletes the broadcast's replay.
fn delete(ctx: &ActorCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let b = access::load_for_owner_or_server(ctx, &db, "deletes its replay")?;
    let replay = store::of_many(&db, &[b.id.as_str()])?
        .remove(&b.id)
        .filter(|r| r.state != "deleting" && r.state != "deleted")
        .ok_or_else(|| ApiError::not_found("replay"))?;
    if replay.state == "processing" {
        return Err(ApiError::conflict(
            "replay_processing",
            "the replay is being written: delete it once it is ready",
        ));
    }
    store::mark_deleting(&db, &b.id)?;
    Ok(Json(Deleted::of(b.id)))
}

/// Replays per `expire-replays` call.
const EXPIRE_BATCH: i64 = 100;

/// Marks the replays past their retention for deletion.
fn expire(ctx: &JobsCtx, _: NoBody) -> Result<Json<ExpireReport>, ApiError> {
    let db = ctx.db()?;
    let (done, remaining) = store::expire(&db, ctx.now(), EXPIRE_BATCH)?;
    Ok(Json(ExpireReport {
        job: "expire-replays",
        progress: edge::answers::Progress { done, remaining },
    }))
}

/// A broadcast's replay as its audience sees it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "BroadcastReplay")]
pub struct ReplayView {
    /// `processing` (the broadcast ended; the replay is being written, within seconds),
    /// `ready` or `failed`.
    pub state: ReplayState,
    /// Where it comes from: `ingest` (the media server kept the RTMP ingest) or
    /// `recording` (the broadcast's newest ready LiveKit Egress recording).
    pub source: ReplaySource,
    /// The VOD playlist (every rendition; MP4 for an `mp4` recording) once `ready`;
    /// signed and valid for `hls_url_ttl` (ask for the broadcast again for a fresh one).
    pub hls_url: Option<String>,
    /// Seconds, once `ready`.
    pub duration: Option<f64>,
    /// A picture from the replay, signed like `hlsUrl`, once `ready` (none for a
    /// recording).
    pub thumbnail_url: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub ready_at: Option<String>,
    /// When retention deletes it; null: kept.
    #[schemars(extend("format" = "date-time"))]
    pub expires_at: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum ReplayState {
    Processing,
    Ready,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum ReplaySource {
    Ingest,
    Recording,
}

/// The view of a ready LiveKit Egress recording, as a replay.
pub fn recording_view(r: &::store::recordings::Recording) -> ReplayView {
    ReplayView {
        state: ReplayState::Ready,
        source: ReplaySource::Recording,
        hls_url: r.url.clone(),
        duration: r.duration_ms.map(|ms| ms as f64 / 1000.0),
        thumbnail_url: None,
        ready_at: r.ended_at.map(domain::time::format_rfc3339),
        expires_at: None,
    }
}

/// The view of an ingest replay (none once deleted); `signed` signs an address of the
/// broadcast's stream.
pub fn view(replay: &Replay, signed: impl Fn(&str) -> String) -> Option<ReplayView> {
    let state = match replay.state.as_str() {
        "processing" => ReplayState::Processing,
        "ready" => ReplayState::Ready,
        "failed" => ReplayState::Failed,
        _ => return None,
    };
    let ready = state == ReplayState::Ready;
    Some(ReplayView {
        state,
        source: ReplaySource::Ingest,
        hls_url: ready.then(|| signed("replay/index.m3u8")),
        duration: replay
            .duration_ms
            .filter(|_| ready)
            .map(|ms| ms as f64 / 1000.0),
        thumbnail_url: ready.then(|| signed("replay/thumbnail.jpg")),
        ready_at: replay.ready_at.map(domain::time::format_rfc3339),
        expires_at: replay.expires_at.map(domain::time::format_rfc3339),
    })
}

/// How far back a live broadcast can be rewound (docs/replays.md, "Rewind while live").
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "BroadcastDvr")]
pub struct DvrView {
    /// The DVR master playlist: the broadcast from its start, every rendition; once it is
    /// longer than `windowSeconds`, its last `windowSeconds` (the oldest segments leave
    /// it as it goes on). Signed whatever the visibility, like a replay, valid for
    /// `hls_url_ttl`.
    pub hls_url: String,
    /// How far back the tenant lets viewers go (its `dvrWindowHours`).
    #[schemars(range(min = 0))]
    pub window_seconds: i64,
    /// How far back one can go now: the broadcast's length so far, up to the window.
    #[schemars(range(min = 0.0))]
    pub available_seconds: f64,
}

/// The DVR of a live broadcast whose media server reported `dvr_ms` of it, within a
/// window of `window_hours`; `signed` signs an address of the broadcast's stream.
pub fn dvr_view(dvr_ms: i64, window_hours: i64, signed: impl Fn(&str) -> String) -> DvrView {
    let window_seconds = window_hours.max(1) * 3600;
    DvrView {
        hls_url: signed("replay/dvr.m3u8"),
        window_seconds,
        available_seconds: (dvr_ms.max(0) as f64 / 1000.0).min(window_seconds as f64),
    }
}
