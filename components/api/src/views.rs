//! The view beacon (`POST /api/views`): the player reports each HLS view, so that every
//! viewer counts (the broadcast's `viewerCount`, its analytics' sessions, watch time and
//! unique viewers) and the quality of experience reaches analytics. Public: the beacon
//! carries no credentials (sendBeacon cannot send headers); the broadcast names the tenant.
//! The rules are `domain::views`; what each beacon may change is bounded there, and here
//! per client address.

use crate::ApiRoute;
use crate::contact_form::client_ip;
use ::store::analytics::{self as counts, ViewCounts};
use ::store::app;
use ::store::views::{self as store, Latest, NewView};
use domain::media::{self, Playback};
use domain::request_body;
use domain::validate::body::{Checked, Choice, OptChecked, OptChoice, OptInt, OptText, Text};
use domain::views::{
    self as rules, Event, FailureReason, MAX_LIVE_PER_ADDRESS, MAX_REBUFFERS, MAX_STARTUP_MS,
    NEW_VIEWS_PER_MINUTE, OptExpiry, OptSeconds, Refused, Sent, ViewId,
};
use domain::{ApiError, problem::FieldError};
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::spin::config;
use edge::spin::endpoint::{BeaconJson, NoContent};
use edge::spin::http::PublicCtx;
use serde_json::json;

/// The largest beacon body.
const MAX_BEACON: usize = 2048;

/// New views one client address may open per minute.
const NEW_VIEWS: RateLimit = RateLimit {
    bucket: "views",
    max: NEW_VIEWS_PER_MINUTE,
    window_secs: 60,
    per: "client address",
    counts: Counts::Requests,
};

request_body! {
    /// One beacon of an HLS view (see the player guide, "Counting viewers"). Sent as
    /// `text/plain` by `navigator.sendBeacon`, or as JSON; at most 2 KiB.
    pub struct ViewBeaconBody as "ViewBeacon" {
        /// Random per tab session (kept in sessionStorage: a reload is the same view).
        "viewId" view_id: Checked<ViewId, 64>,
        /// Random per browser (kept in localStorage): a viewer is unique once per broadcast.
        "viewerId" viewer_id: OptChecked<ViewId, 64>,
        /// The broadcast's id or its short id (the last part of its watchUrl).
        "broadcast" broadcast: Text<64>,
        /// `start` when the page begins loading the stream (a reload too: its figures count
        /// from zero again), `heartbeat` every 10 s, `end` on pagehide.
        "event" event: Choice<Event>,
        /// From asking for the stream to its first frame (ms); null until then. A view's
        /// first is the one counted.
        "startupMs" startup_ms: OptInt<0, MAX_STARTUP_MS>,
        /// Cumulative seconds of video played in this page load.
        "playedSeconds" played: OptSeconds,
        /// Cumulative stalls after the first frame in this page load.
        "rebufferCount" rebuffer_count: OptInt<0, MAX_REBUFFERS>,
        /// Cumulative seconds stalled after the first frame in this page load.
        "rebufferSeconds" rebuffer: OptSeconds,
        /// The rendition playing now (its ladder name, e.g. `720p`, or `source`).
        "rendition" rendition: OptText<32>,
        /// The view's latest fatal playback failure, if any.
        "error" error: OptChoice<FailureReason>,
        /// For a private or subscribers-only broadcast: the `exp` and `sig` query
        /// parameters of the signed hlsUrl being played.
        "exp" exp: OptExpiry,
        "sig" sig: OptText<64>,
    }
}

/// The view beacon.
pub const ROUTES: &[ApiRoute] = &[endpoint!(
    POST "/api/views",
    Public(beacon),
    "Beacon (views)",
    |op| op
        .described(
            "The player's report of one HLS view: `start`, a `heartbeat` every 10 s, `end` \
             on pagehide. Counted in the broadcast's viewerCount while live (until its end \
             or 30 s after its last beacon), in its analytics' sessions, watch time and \
             unique viewers, and in its quality of experience (startup time, rebuffering, \
             failures, renditions). No credentials: send it with navigator.sendBeacon as \
             text/plain (no CORS preflight). An unknown broadcast, or a private or \
             subscribers-only one without a valid exp/sig of its signed hlsUrl, is 404. \
             Figures are cumulative per page load and clamped to the wall time since the \
             view's first beacon (plus 15 s); a lower figure than the last is 422; more \
             than one beacon per view in 5 s is 429 (an end excepted, once); an address \
             opens at most 30 new views a minute and holds at most 20 live views of one \
             broadcast (429 too_many_views).",
        )
        .request_example(json!({
            "viewId": "k3J9d2LmQx8Zr1Tb",
            "viewerId": "Vw2nP8sR4tY6uI0o",
            "broadcast": "Ab3dE5gH",
            "event": "heartbeat",
            "startupMs": 840,
            "playedSeconds": 42.5,
            "rebufferCount": 1,
            "rebufferSeconds": 0.8,
            "rendition": "720p",
        }))
        .errors(400, &["malformed_json"])
        .errors(404, &["not_found"])
        .errors(409, &["view_of_another_broadcast", "view_ended", "broadcast_ended"])
        .errors(413, &["payload_too_large"])
        .errors(415, &["unsupported_media_type"])
        .errors(422, &["validation_failed"])
        .errors(429, &["too_soon", "too_many_views"])
        .rate_limited(&NEW_VIEWS),
)];

/// Counts one beacon of a view; 204.
fn beacon(
    ctx: &PublicCtx,
    BeaconJson(sent): BeaconJson<ViewBeaconBody, MAX_BEACON>,
) -> Result<NoContent, ApiError> {
    let db = ctx.db()?;
    let (now, now_ms) = (ctx.now(), ctx.now_millis());
    let b = app::broadcasts::load_by_id_or_short(&db, &sent.broadcast, now)?
        .filter(|b| may_play(b, &sent, now))
        .ok_or_else(|| ApiError::not_found("broadcast"))?;
    let existing = store::load(&db, &sent.view_id)?;
    if existing.as_ref().is_some_and(|v| v.broadcast_id != b.id) {
        return Err(ApiError::conflict(
            "view_of_another_broadcast",
            "this viewId is bound to another broadcast",
        ));
    }
    let stored = existing.as_ref().map(|v| &v.stored);
    let accepted = rules::accept(
        stored,
        &Sent {
            event: sent.event,
            played_ms: sent.played,
            rebuffer_ms: sent.rebuffer,
            rebuffers: sent.rebuffer_count,
            startup_ms: sent.startup_ms,
            error: sent.error.clone(),
        },
        now_ms,
    )
    .map_err(refused)?;
    let ip = client_ip(ctx.client_addr());
    if accepted.opens && b.status.is_final() {
        return Err(ApiError::conflict(
            "broadcast_ended",
            "the broadcast has ended: it takes no new views",
        ));
    }
    let viewer = sent.viewer_id.as_deref().unwrap_or(&sent.view_id);
    let latest = Latest {
        rendition: sent.rendition.as_deref(),
        error: sent.error.as_deref(),
    };
    db.transaction(|tx| {
        // The address's bounds are checked in the transaction that stores the view.
        if accepted.opens && store::live_on_address(tx, &b.id, ip, now_ms)? >= MAX_LIVE_PER_ADDRESS
        {
            return Err(ApiError::new(
                429,
                "too_many_views",
                format!(
                    "this address already holds {MAX_LIVE_PER_ADDRESS} live views of the broadcast"
                ),
            )
            .with_header("retry-after", "30"));
        }
        if stored.is_none() {
            NEW_VIEWS.hit(tx, ip, now)?;
        }
        let saved = match stored {
            None => store::insert(
                tx,
                &b,
                NewView {
                    view_id: &sent.view_id,
                    viewer,
                    client_addr: ip,
                },
                &accepted,
                &latest,
                now_ms,
            )?,
            Some(seen) => store::update(tx, &sent.view_id, seen, &accepted, &latest, now_ms)?,
        };
        if !saved {
            // Another beacon of the view was stored meanwhile.
            return Err(too_soon(rules::MIN_BEACON_GAP_MS));
        }
        let change = ViewCounts {
            new_view: stored.is_none().then_some(viewer),
            opens: accepted.opens,
            closes: accepted.closes.then_some(now),
            delta: accepted.delta,
            startup_ms: accepted.startup_ms,
            failure: accepted.failure.as_deref(),
        };
        counts::view_beacon(tx, &b, &change, now)
    })?;
    Ok(NoContent)
}

/// Whether the beacon may name `b`: anyone may play a public or unlisted broadcast; a
/// private or subscribers-only one only with its signed hlsUrl's unexpired `exp`/`sig`.
fn may_play(b: &::store::broadcasts::Broadcast, sent: &ViewBeaconBody, now: i64) -> bool {
    if Playback::of_visibility(b.visibility) == Playback::Open {
        return true;
    }
    let (Some(secret), Some(exp), Some(sig)) = (config::var("media_secret"), sent.exp, &sent.sig)
    else {
        return false;
    };
    media::playback_signed(
        &media::playback_key(&secret),
        &b.identity.stream_id,
        exp,
        sig,
        now,
    )
}

fn too_soon(retry_after_ms: i64) -> ApiError {
    let secs = (retry_after_ms + 999) / 1000;
    ApiError::new(
        429,
        "too_soon",
        "one beacon per view every 5 seconds; this one changed nothing",
    )
    .with_header("retry-after", secs.max(1).to_string())
}

fn refused(r: Refused) -> ApiError {
    match r {
        Refused::TooSoon { retry_after_ms } => too_soon(retry_after_ms),
        Refused::Ended => ApiError::conflict(
            "view_ended",
            "the view has ended; a new page load sends start",
        ),
        Refused::NotMonotone(field) => ApiError::invalid_fields(vec![FieldError {
            field: field.into(),
            message:
                "is cumulative: it must not be lower than in the last beacon of this page load"
                    .into(),
        }]),
    }
}
