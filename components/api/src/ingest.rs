//! RTMP ingest: the media server asks here (media tier, `media_secret`) on every publish,
//! reports every few seconds while it lasts (with the stream's health and its restream
//! targets' states), and says when it ends. The platform decides who may publish, and the
//! ingest moves the broadcast: a publish makes it `active`, updates count as heartbeats,
//! and a publisher that leaves has the reconnect window to come back before the broadcast
//! completes (the `settle-ingests` job completes it). A broadcast published into its SFU
//! room instead reaches the same ingest through the SFU feed (`sfu_feed`).

use crate::ApiRoute;
use crate::broadcasts;
use ::store::app;
use ::store::broadcasts::{self as broadcast_store, Broadcast};
use ::store::ingests::{self as store, Ingest};
use ::store::{Db, restreams, tenants};
use domain::ApiError;
use domain::broadcast::Status;
use domain::media::{self, Health, HealthSample, Playback, protocol};
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::config;
use edge::spin::endpoint::{Json, NoBody, Read};
use edge::spin::http::{JobsCtx, MediaCtx, ServerCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

/// A tenant's media settings.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "MediaSettings")]
pub struct MediaSettings {
    /// What its broadcasts' RTMP publishes get unless a broadcast says otherwise:
    /// `adaptive` (renditions at 720p, 480p and 360p below the source, for CPU on the
    /// media server) or `passthrough` (the source alone).
    ladder: media::Ladder,
}

/// The ingest routes: the tenant's media settings, the media server's calls, and the job
/// that settles the publishes that did not come back.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/media/publish",
        Media(publish),
        "Publish (media server)",
        |op| op
            .described(
                "The media server asks whether a publisher with this stream key may publish; \
                 an accepted publish makes the broadcast active.",
            )
            .request_example(json!({
                "key": "0123456789abcdef0123456789abcdef",
                "connection": "a1b2c3d4-1",
            }))
            // The 200 says what the media server does with it.
            .answers(
                200,
                "OK: publish under streamId",
                Schema::view::<protocol::Accepted>(),
            )
            .errors(400, &["malformed_json", "invalid_connection"])
            .errors(
                403,
                &[
                    "unknown_stream_key",
                    "stream_key_reset",
                    "broadcast_ended",
                    "client_suspended",
                ],
            )
            .errors(409, &["already_publishing"]),
    ),
    endpoint!(
        POST "/api/media/update",
        Media(update),
        "Update (media server)",
        |op| op
            .described(
                "A publisher is still live: its health, restream targets' states and how \
                 far back viewers can rewind it. Refused when the key was reset, the \
                 broadcast ended or its client was suspended (the media server drops the \
                 publisher).",
            )
            .answers(
                200,
                "OK: keep publishing",
                Schema::view::<protocol::Accepted>(),
            )
            .errors(400, &["malformed_json", "invalid_connection"])
            .errors(
                403,
                &["stream_key_reset", "broadcast_ended", "client_suspended"],
            )
            .errors(404, &["unknown_connection"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        POST "/api/media/publish-done",
        Media(publish_done),
        "Publish done (media server)",
        |op| op
            .described(
                "A publisher left; the broadcast completes unless it comes back within the \
                 reconnect window.",
            )
            .errors(400, &["malformed_json", "invalid_connection"]),
    ),
    endpoint!(
        POST "/api/media/server",
        Media(server),
        "Server report (media server)",
        |op| op
            .described(
                "The media server reports itself up (when it starts, then every minute) or \
                 down with why (it stopped, or its host could not start it); the owner's view \
                 of a broadcast shows it as ingest.server.",
            )
            .request_example(json!({
                "state": "down",
                "reason": "nginx with its RTMP module is not installed",
            }))
            .answers(
                200,
                "Recorded: the state broadcasts now show",
                Schema::view::<broadcasts::view::MediaServerView>(),
            )
            .errors(400, &["malformed_json", "reason_required"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        POST "/api/jobs/settle-ingests",
        Jobs(settle),
        "Settle ingests (jobs)",
        |op| op.described(
            "Completes the broadcasts whose RTMP publisher did not come back within the \
             reconnect window.",
        ),
    ),
    endpoint!(
        GET "/api/v1/media-settings",
        Server(settings),
        "Get (media settings)",
        |op| op.described(
            "Whether the tenant's broadcasts are transcoded into an adaptive ladder."
        ),
    ),
    endpoint!(
        PATCH "/api/v1/media-settings",
        Server(update_settings),
        "Update (media settings)",
        |op| op
            .described(
                "Sets the ladder of the tenant's broadcasts that do not choose one; it applies \
                 from each broadcast's next publish.",
            )
            .request_example(json!({"ladder": "passthrough"}))
            .errors(400, &["malformed_json"])
            .errors(422, &["validation_failed"]),
    ),
];

/// The tenant's media settings.
fn settings(ctx: &ServerCtx, _: NoBody) -> Result<Json<MediaSettings>, ApiError> {
    let db = ctx.db()?;
    let ladder = tenants::media_ladder(&db, &ctx.tenant.client_id)?;
    Ok(Json(MediaSettings { ladder }))
}

/// `{ladder?}`: applies from each broadcast's next publish.
fn update_settings(
    ctx: &ServerCtx,
    sent: broadcasts::MediaSettingsBody,
) -> Result<Json<MediaSettings>, ApiError> {
    let db = ctx.db()?;
    if let Some(ladder) = sent.ladder {
        tenants::set_media_ladder(&db, &ctx.tenant.client_id, ladder)?;
    }
    settings(ctx, NoBody)
}

/// Broadcasts the `settle-ingests` job completes per call.
const SETTLE_BATCH: i64 = 100;

/// The reconnect window (`ingest_reconnect_window`, seconds).
fn reconnect_window() -> i64 {
    config::var("ingest_reconnect_window")
        .and_then(|v| v.trim().parse().ok())
        .filter(|secs: &i64| *secs >= 0)
        .unwrap_or(media::DEFAULT_RECONNECT_WINDOW_SECS)
}

/// What a publish-done changed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "MediaReleased")]
pub struct Released {
    /// Whether the publish was still the live one.
    handled: bool,
    /// Seconds the publisher has to come back before the broadcast completes (absent when
    /// no live publish has the connection).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64", range(min = 0))]
    reconnect_window: Option<i64>,
}

/// What a settling call did.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "SettleIngestsJobReport")]
pub struct SettleReport {
    #[schemars(extend("const" = "settle-ingests"))]
    job: &'static str,
    #[serde(flatten)]
    progress: edge::answers::Progress,
}

/// The most seconds of a live stream the media server may say viewers can rewind: the
/// longest DVR window (24 hours).
const MAX_DVR_SECONDS: f64 = (crate::replays::MAX_DVR_WINDOW_HOURS * 3600) as f64;

/// A publish or update the platform refuses (the media server drops the publisher).
fn refused(code: &'static str, detail: &str) -> ApiError {
    ApiError::new(403, code, detail.to_string())
}

/// Checks what the media server names a publisher by: 1 to 100 of `[A-Za-z0-9._:-]`.
fn check_connection(connection: &str) -> Result<(), ApiError> {
    let valid = !connection.is_empty()
        && connection.len() <= 100
        && connection
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "invalid_connection",
            "connection must be 1 to 100 letters, digits, '.', '_', ':' or '-'",
        ))
    }
}

/// What the media server needs to serve and push a stream it may publish.
fn accepted(db: &Db, b: &Broadcast) -> Result<protocol::Accepted, ApiError> {
    let targets = restreams::of_broadcast(db, b)?;
    let restreams = if targets.is_empty() {
        Vec::new()
    } else {
        let key = crate::restreams::sealing_key()?;
        targets
            .iter()
            .filter_map(|t| {
                let url = key.open(&t.sealed_destination, &t.id);
                if url.is_none() {
                    eprintln!("restream target {}: its destination does not open", t.id);
                }
                Some(protocol::RestreamTarget {
                    id: t.id.clone(),
                    url: url?,
                })
            })
            .collect()
    };
    Ok(protocol::Accepted {
        stream_id: b.identity.stream_id.clone(),
        playback: Playback::of_visibility(b.visibility),
        restreams,
        ladder: match b.ladder {
            Some(ladder) => ladder,
            None => tenants::media_ladder(db, &b.client_id)?,
        },
        latency_mode: b.latency_mode,
        // Kept from the first publish when the tenant keeps replays.
        replay: ::store::replays::settings(db, &b.client_id)?.0,
        // The tenant's current window: an update carries a change to a live stream.
        dvr_window: ::store::replays::dvr_window_hours(db, &b.client_id)?.max(1) as u64 * 3600,
    })
}

/// Why `b` (whose publisher used `key`) may not publish now, if it may not.
fn refusal(db: &Db, b: &Broadcast, key: &str) -> Result<Option<ApiError>, ApiError> {
    if b.identity.stream_key != key {
        return Ok(Some(refused(
            "stream_key_reset",
            "the stream key was reset: publish with the new one",
        )));
    }
    if b.status.is_final() {
        return Ok(Some(refused("broadcast_ended", "the broadcast has ended")));
    }
    let suspended = tenants::by_id(db, &b.client_id)?.is_none_or(|t| t.suspended);
    if suspended {
        return Ok(Some(refused(
            "client_suspended",
            "the broadcast's SDK client is suspended",
        )));
    }
    Ok(None)
}

/// A publisher connected with a key. Accepted when the key is a
/// broadcast's current key, the broadcast has not ended, its tenant is not suspended and
/// no other publisher is live on it; the broadcast then goes `active` (or, back inside its
/// reconnect window, simply continues). A refusal that names a broadcast (every one but an
/// unknown key) is recorded on it for its owner's view; a key that was reset names its
/// broadcast when a publisher had used it.
fn publish(
    ctx: &MediaCtx,
    Read(call): Read<protocol::Publish>,
) -> Result<Json<protocol::Accepted>, ApiError> {
    check_connection(&call.connection)?;
    let unknown = || refused("unknown_stream_key", "no broadcast has this stream key");
    if !media::is_stream_key(&call.key) {
        return Err(unknown());
    }
    let now = ctx.now();
    let db = ctx.db()?;
    let refuse = |b: &Broadcast, why: ApiError| -> ApiError {
        noted(&db, b, why, call.client_addr.as_deref(), ctx.now_millis())
    };
    let Some(b) = app::broadcasts::load_by_stream_key(&db, &call.key, now)? else {
        let previous = match store::by_publish_key(&db, &call.key)? {
            Some(ingest) => {
                app::broadcasts::load_by_any_id(&db, &ingest.client_id, &ingest.broadcast_id, now)?
            }
            None => None,
        };
        return Err(match previous {
            Some(b) => match refusal(&db, &b, &call.key)? {
                Some(why) => refuse(&b, why),
                None => unknown(),
            },
            None => unknown(),
        });
    };
    if let Some(why) = refusal(&db, &b, &call.key)? {
        return Err(refuse(&b, why));
    }
    // The claim and the move to `active` commit together: no reader sees a live ingest on
    // a pending broadcast.
    let claimed = db.transaction(|tx| {
        if !store::claim(tx, &b, &call.connection, &call.key, now)? {
            return Ok(None);
        }
        broadcast_store::set_ingest_deadline(tx, &b, None)?;
        broadcast_store::heartbeat(tx, &b, now)?;
        if b.status != Status::Pending {
            return Ok(Some((b.clone(), false)));
        }
        match broadcasts::move_stored(tx, &b, Status::Active, now) {
            Ok(Some(moved)) => Ok(Some((moved, true))),
            Ok(None) => Ok(Some((b.clone(), false))),
            // Moved meanwhile (ended by its owner, say): read it again and decide. An end
            // rolls the claim back with the refusal.
            Err(e) if e.status == 409 => {
                let again = app::broadcasts::load(tx, &b.client_id, &b.id, now)?;
                if again.status.is_final() {
                    return Err(refused("broadcast_ended", "the broadcast has ended"));
                }
                Ok(Some((again, false)))
            }
            Err(e) => Err(e),
        }
    });
    let (b, moved) = match claimed {
        Ok(Some(claimed)) => claimed,
        Ok(None) => {
            return Err(refuse(
                &b,
                ApiError::conflict(
                    "already_publishing",
                    "another encoder is publishing this broadcast",
                ),
            ));
        }
        Err(e) if e.code == "broadcast_ended" => return Err(refuse(&b, e)),
        Err(e) => return Err(e),
    };
    if moved {
        broadcasts::after_move(&db, &b, now);
    }
    Ok(Json(accepted(&db, &b)?))
}

/// Records `why` (a publish refused, or a publisher dropped) on `b` for its owner's view,
/// and answers it: a refusal that cannot be recorded is still the answer.
fn noted(
    db: &Db,
    b: &Broadcast,
    why: ApiError,
    client_addr: Option<&str>,
    now_ms: i64,
) -> ApiError {
    let refusal = store::Refusal {
        at_ms: now_ms,
        reason: why.code.to_string(),
        detail: why.detail.clone(),
        client_addr: client_addr.map(|a| clip(a, 64)).filter(|a| !a.is_empty()),
    };
    if let Err(e) = store::record_refusal(db, b, &refusal) {
        eprintln!(
            "broadcast {}: the refusal {} is not recorded: {}",
            b.id, why.code, e.detail
        );
    }
    why
}

/// The publisher is still there. Counts as the broadcast's
/// heartbeat, records the stream's health (a change is a `broadcast.health` event) and the
/// restream targets' states. Refused (the media server then drops the publisher) when the
/// key was reset, the broadcast ended or its tenant was suspended meanwhile.
fn update(
    ctx: &MediaCtx,
    Read(call): Read<protocol::Update>,
) -> Result<Json<protocol::Accepted>, ApiError> {
    check_connection(&call.connection)?;
    if call
        .dvr_seconds
        .is_some_and(|s| !s.is_finite() || !(0.0..=MAX_DVR_SECONDS).contains(&s))
    {
        return Err(ApiError::invalid_fields(vec![
            domain::problem::FieldError {
                field: "dvrSeconds".into(),
                message: format!("0 to {MAX_DVR_SECONDS} seconds"),
            },
        ]));
    }
    let now = ctx.now();
    let db = ctx.db()?;
    let Some(ingest) = store::by_connection(&db, &call.connection)? else {
        return Err(ApiError::new(
            404,
            "unknown_connection",
            "no live publish has this connection",
        ));
    };
    let b = app::broadcasts::load(&db, &ingest.client_id, &ingest.broadcast_id, now)?;
    let key = ingest.publish_key.as_deref().unwrap_or_default();
    if let Some(why) = refusal(&db, &b, key)? {
        release(&db, &b, &call.connection, now)?;
        return Err(noted(&db, &b, why, None, ctx.now_millis()));
    }
    db.transaction(|tx| {
        store::touch(tx, &ingest, now)?;
        if let Some(seconds) = call.dvr_seconds {
            store::record_dvr(tx, &ingest, (seconds * 1000.0).round() as i64)?;
        }
        broadcast_store::heartbeat(tx, &b, now)?;
        for report in &call.restreams {
            let error = report.error.as_deref().map(|e| clip(e, 200));
            restreams::set_state(tx, &b, &report.id, report.state, error.as_deref(), now)?;
        }
        if let Some(sample) = &call.health
            && record_health(tx, &ingest, &clean(sample), now)?
        {
            // The event carries the broadcast with its new health.
            broadcasts::events::broadcast(tx, "broadcast.health", &b, now)?;
        }
        Ok(())
    })?;
    Ok(Json(accepted(&db, &b)?))
}

/// Stores a health sample; answers whether the health changed (a first sample changes it
/// only when it is not healthy).
fn record_health(
    db: &Db,
    ingest: &Ingest,
    sample: &HealthSample,
    now: i64,
) -> Result<bool, ApiError> {
    let health = media::health_of(sample);
    store::record_health(db, ingest, health, sample, now)?;
    Ok(ingest.health.unwrap_or(Health::Healthy) != health)
}

/// A sample as stored: text fields short and free of control characters.
fn clean(sample: &HealthSample) -> HealthSample {
    let text = |t: &Option<String>| t.as_deref().map(|t| clip(t, 32));
    let mut ladder = sample.ladder.clone();
    if let Some(ladder) = &mut ladder {
        // A ladder has a handful of renditions; nothing more is kept.
        ladder.renditions.truncate(8);
        for r in &mut ladder.renditions {
            r.name = clip(&r.name, 16);
        }
    }
    HealthSample {
        video_codec: text(&sample.video_codec),
        video_profile: text(&sample.video_profile),
        audio_codec: text(&sample.audio_codec),
        ladder,
        ..sample.clone()
    }
}

/// At most `max` characters of `text`, without control characters.
fn clip(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

/// The publisher left. The broadcast stays active for the
/// reconnect window; a publish with its key inside it continues the broadcast.
fn publish_done(
    ctx: &MediaCtx,
    Read(call): Read<protocol::PublishDone>,
) -> Result<Json<Released>, ApiError> {
    check_connection(&call.connection)?;
    let now = ctx.now();
    let db = ctx.db()?;
    let Some(ingest) = store::by_connection(&db, &call.connection)? else {
        let unknown = Released {
            handled: false,
            reconnect_window: None,
        };
        return Ok(Json(unknown));
    };
    let b = app::broadcasts::load(&db, &ingest.client_id, &ingest.broadcast_id, now)?;
    let handled = release(&db, &b, &call.connection, now)?;
    Ok(Json(Released {
        handled,
        reconnect_window: Some(reconnect_window()),
    }))
}

/// Ends `connection`'s publish on `b`: its restream targets go idle and, while the
/// broadcast is active, the reconnect window starts. Answers whether it was still live.
fn release(db: &Db, b: &Broadcast, connection: &str, now: i64) -> Result<bool, ApiError> {
    db.transaction(|tx| {
        let Some(ingest) = store::of_broadcast(tx, &b.id)? else {
            return Ok(false);
        };
        if !store::end(tx, &ingest, connection, now)? {
            return Ok(false);
        }
        restreams::all_idle(tx, b, now)?;
        if b.status == Status::Active {
            broadcast_store::set_ingest_deadline(tx, b, Some(now + reconnect_window()))?;
            broadcast_store::heartbeat(tx, b, now)?;
        }
        Ok(true)
    })
}

/// The media server reports itself up (when it starts, then
/// every minute) or down (with why: it stopped, or its host could not start it). The
/// owner's view of every broadcast shows it beside the ingest (`ingest.server`).
fn server(
    ctx: &MediaCtx,
    Read(call): Read<protocol::ServerReport>,
) -> Result<Json<broadcasts::view::MediaServerView>, ApiError> {
    let reason = call.reason.as_deref().map(str::trim).unwrap_or_default();
    // Bounded whatever the state: a report outside the contract is refused, not trimmed.
    if reason.chars().count() > protocol::MAX_SERVER_REASON {
        return Err(ApiError::invalid_fields(vec![
            domain::problem::FieldError {
                field: "reason".into(),
                message: format!("at most {} characters", protocol::MAX_SERVER_REASON),
            },
        ]));
    }
    let reason = match call.state {
        protocol::ServerState::Up => None,
        protocol::ServerState::Down if reason.is_empty() => {
            return Err(ApiError::bad_request(
                "reason_required",
                "a media server down says why",
            ));
        }
        protocol::ServerState::Down => Some(reason.to_string()),
    };
    let db = ctx.db()?;
    let report = store::ServerReport {
        state: call.state.as_str().to_string(),
        reason,
        reported_at: ctx.now(),
    };
    store::report_server(&db, &report)?;
    Ok(Json(broadcasts::view::server_view(
        Some(&report),
        ctx.now(),
    )))
}

/// Completes the broadcasts whose publisher did not come
/// back within the reconnect window (with their `broadcast.ended` events).
fn settle(ctx: &JobsCtx, _: NoBody) -> Result<Json<SettleReport>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    let (due, total) = broadcast_store::past_ingest_deadline(&db, now, SETTLE_BATCH)?;
    let mut completed = 0;
    for b in &due {
        match broadcasts::change_status(&db, b, Status::Completed, now) {
            Ok(_) => completed += 1,
            // Moved meanwhile: its new status stands.
            Err(e) if e.status == 409 => {}
            Err(e) => return Err(e),
        }
    }
    let progress = edge::answers::Progress {
        done: completed,
        remaining: (total - due.len() as i64).max(0),
    };
    Ok(Json(SettleReport {
        job: "settle-ingests",
        progress,
    }))
}
