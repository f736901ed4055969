//! A broadcast as the API answers it and as its `broadcast.*` webhooks carry it: one
//! type, from which the OpenAPI document's `Broadcast` and `Ingest` schemas are derived.

use crate::access::Audience;
use crate::links::{IngestCredentials, Links, StreamAddresses};
use crate::recordings::SettingsView;
use crate::replays::{self, DvrView, ReplayView};
use ::store::Db;
use ::store::broadcasts::{self as store, Broadcast, ERROR_REQUESTED, ERROR_STALE};
use ::store::ingests::{Ingest, Refusal, ServerReport};
use ::store::{ingests, recordings, replays as replay_store};
use domain::ApiError;
use domain::broadcast::{Status, Visibility};
use domain::media::SERVER_SILENT_AFTER_SECS;
use domain::media::{Health, HealthSample, Ladder, LatencyMode, LiveLadder};
use domain::time;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A broadcast as its audience sees it; the owner also gets the ingest credentials,
/// metadata and device details.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Broadcast")]
pub struct BroadcastView {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub title: String,
    pub status: Status,
    pub visibility: Visibility,
    #[schemars(with = "Vec<String>")]
    pub tags: Value,
    /// Null for a session the tenant's server created.
    pub owner_id: Option<String>,
    /// Concurrent viewers: the app's latest report (`viewer-count`), or the live HLS
    /// views (`POST /api/views`) plus the viewers in its SFU room, whichever is more.
    pub viewer_count: i64,
    pub max_participants: i64,
    /// `portrait` or `landscape`.
    pub orientation: String,
    pub recording_width: Option<i64>,
    pub recording_height: Option<i64>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub started_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub ended_at: Option<String>,
    /// Why the broadcast is in `error`: `stale` (no heartbeat for 90 s) or `requested`
    /// (set by its owner or the tenant's server); null in any other status.
    #[schemars(schema_with = "error_reason_schema")]
    pub error_reason: Option<String>,
    /// How many of each reaction it received; null before the first.
    #[schemars(with = "Option<BTreeMap<String, u64>>")]
    pub reactions: Option<Map<String, Value>>,
    /// How co-hosts join: `approval`, `open` or `invite_only`.
    pub cohost_policy: String,
    /// How close to the live edge its HLS plays: `standard` (2 s segments) or `low` (1 s
    /// segments, a short playlist; players hold near the edge).
    pub latency_mode: LatencyMode,
    #[serde(flatten)]
    pub addresses: StreamAddresses,
    /// What plays once the broadcast is over (docs/replays.md): the media server's replay
    /// of its RTMP ingest, else its newest ready recording; null when it has neither.
    pub replay: Option<ReplayView>,
    /// While it is live and its replay is kept: how far back viewers can rewind it, and
    /// the playlist that goes back so far (docs/replays.md); null otherwise.
    pub dvr: Option<DvrView>,
    #[serde(flatten)]
    pub owner: Option<OwnerDetails>,
}

/// What only the broadcast's owner (and the tenant's server) sees.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnerDetails {
    #[serde(flatten)]
    pub credentials: IngestCredentials,
    #[schemars(with = "BTreeMap<String, String>")]
    pub metadata: Value,
    pub device_width: Option<i64>,
    pub device_height: Option<i64>,
    pub device_type: Option<String>,
    pub operating_system: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    /// Whether its RTMP publishes are transcoded into renditions (`adaptive`) or served as
    /// sent (`passthrough`); null: as the tenant's media settings say.
    pub ladder: Option<Ladder>,
    /// Its recording settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "SettingsView")]
    pub recording: Option<SettingsView>,
    pub ingest: IngestView,
}

/// What the owner's view adds beyond the stored record.
pub struct OwnerExtras {
    /// Its recording settings, when it has any.
    pub recording: Option<SettingsView>,
    pub ingest: IngestView,
}

/// The broadcast's RTMP ingest, as its owner sees it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Ingest")]
pub struct IngestView {
    pub state: IngestState,
    #[schemars(extend("format" = "date-time"))]
    pub connected_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub last_seen_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub reconnect_deadline: Option<String>,
    #[schemars(extend("minimum" = 0))]
    pub publishes: i64,
    pub health: Option<Health>,
    #[schemars(extend("format" = "date-time"))]
    pub health_changed_at: Option<String>,
    pub stats: Option<HealthSample>,
    /// The renditions viewers are served while live: each with its bitrate and whether it
    /// keeps real time (a `starving` one makes the ingest `starving`); `mode` and
    /// `reason` say when the stream plays as passthrough, and why.
    pub ladder: Option<LiveLadder>,
    /// The last publish attempts the platform refused on this broadcast (or publishers it
    /// dropped), newest first, at most 10: why an encoder sees only `Input/output error`.
    /// An unknown key or a wrong application cannot be told apart from anyone's typo and
    /// names no broadcast: those are only in the media server's log.
    pub refusals: Vec<IngestRefusal>,
    /// Whether the media server that takes `rtmpUrl` runs, as it last reported.
    pub server: MediaServerView,
}

/// A publish attempt the platform refused, or a publisher it dropped.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "IngestRefusal")]
pub struct IngestRefusal {
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    /// `already_publishing` (another encoder is live on the broadcast), `stream_key_reset`
    /// (the key was replaced: publish with the new one), `broadcast_ended` or
    /// `client_suspended`.
    pub reason: String,
    /// The reason in words.
    pub detail: String,
    /// The encoder's address, as the media server saw it.
    pub client_addr: Option<String>,
}

/// Whether the media server runs: `up` (it reported so within the last 3 minutes), `down`
/// (it stopped, or could not start: `reason` says why; RTMP publishes to `rtmpUrl` fail)
/// or `unknown` (it never reported, or has been silent for 3 minutes).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "MediaServerStatus")]
pub struct MediaServerView {
    pub state: MediaServerState,
    pub reason: Option<String>,
    /// When it last reported.
    #[schemars(extend("format" = "date-time"))]
    pub reported_at: Option<String>,
}

/// See [`MediaServerView`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum MediaServerState {
    Up,
    Down,
    Unknown,
}

/// The media server's state at `now`, from its last report.
pub fn server_view(report: Option<&ServerReport>, now: i64) -> MediaServerView {
    let Some(report) = report else {
        return MediaServerView {
            state: MediaServerState::Unknown,
            reason: Some("the media server has never reported".into()),
            reported_at: None,
        };
    };
    let reported_at = Some(time::format_rfc3339(report.reported_at));
    match report.state.as_str() {
        "down" => MediaServerView {
            state: MediaServerState::Down,
            reason: report.reason.clone(),
            reported_at,
        },
        _ if now - report.reported_at > SERVER_SILENT_AFTER_SECS => MediaServerView {
            state: MediaServerState::Unknown,
            reason: Some("the media server has not reported for 3 minutes".into()),
            reported_at,
        },
        _ => MediaServerView {
            state: MediaServerState::Up,
            reason: None,
            reported_at,
        },
    }
}

/// Whether an encoder publishes (`live`), has dropped and may still come back
/// (`reconnecting`) or not (`idle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum IngestState {
    Live,
    Reconnecting,
    Idle,
}

fn error_reason_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "enum": [ERROR_STALE, ERROR_REQUESTED, null] })
}

/// The broadcast as `links` show it at `now`, with its reaction counts; `owner` is what
/// its owner's view adds (None for anyone else).
pub fn of(
    b: &Broadcast,
    links: &Links,
    reactions: Option<Map<String, Value>>,
    replay: Option<ReplayView>,
    owner: Option<OwnerExtras>,
    now: i64,
) -> BroadcastView {
    BroadcastView {
        id: b.id.clone(),
        title: b.title.clone(),
        status: b.status,
        visibility: b.visibility,
        tags: b.tags.clone(),
        owner_id: b.owner_id.clone(),
        viewer_count: b.viewer_count,
        max_participants: b.max_participants,
        orientation: b.orientation.clone(),
        recording_width: b.recording.map(|r| r.0),
        recording_height: b.recording.map(|r| r.1),
        created_at: b.created_at.clone(),
        started_at: b.started_at.clone(),
        ended_at: b.ended_at.clone(),
        error_reason: b.error_reason.clone(),
        reactions,
        cohost_policy: b.cohost_policy.clone(),
        latency_mode: b.latency_mode,
        addresses: links.stream_addresses(&b.identity, b.visibility, now),
        replay,
        dvr: None,
        owner: owner.map(|extras| OwnerDetails {
            credentials: links.ingest_credentials(&b.identity),
            metadata: b.metadata.clone(),
            device_width: b.device_width,
            device_height: b.device_height,
            device_type: b.device_type.clone(),
            operating_system: b.operating_system.clone(),
            updated_at: b.updated_at.clone(),
            ladder: b.ladder,
            recording: extras.recording,
            ingest: extras.ingest,
        }),
    }
}

/// The views of `items` (each as `audience_for` decides) at `now`, with their reaction
/// counts; the owner also sees each one's recording settings and ingest.
pub fn many(
    db: &Db,
    items: &[Broadcast],
    audience_for: impl Fn(&Broadcast) -> Audience,
    now: i64,
) -> Result<Vec<BroadcastView>, ApiError> {
    let links = Links::load();
    let ids: Vec<&str> = items.iter().map(|b| b.id.as_str()).collect();
    let mut counts = store::reaction_counts(db, &ids)?;
    // What only the owner sees is read only for the broadcasts the caller owns.
    let owned: Vec<&str> = items
        .iter()
        .filter(|b| audience_for(b) == Audience::Owner)
        .map(|b| b.id.as_str())
        .collect();
    let mut recording = match items.first() {
        Some(first) if !owned.is_empty() => {
            recordings::settings_of_many(db, &first.client_id, &owned)?
        }
        _ => Default::default(),
    };
    // The ingest is the owner's, and tells how far back a live broadcast can be rewound.
    let ingested: Vec<&str> = items
        .iter()
        .filter(|b| b.status == Status::Active || owned.contains(&b.id.as_str()))
        .map(|b| b.id.as_str())
        .collect();
    let mut ingests = ingests::of_many(db, &ingested)?;
    let mut kept = replay_store::of_many(db, &ids)?;
    // A recording stands for the replay of an ended broadcast the media server kept none of.
    let ended: Vec<&str> = items
        .iter()
        .filter(|b| b.status.is_final())
        .filter(|b| {
            kept.get(&b.id)
                .is_none_or(|r| r.state == "deleting" || r.state == "deleted")
        })
        .map(|b| b.id.as_str())
        .collect();
    let mut recorded = match items.first() {
        Some(first) if !ended.is_empty() => {
            recordings::latest_ready_of_many(db, &first.client_id, &ended)?
        }
        _ => Default::default(),
    };
    let mut refusals = ingests::refusals_of_many(db, &owned)?;
    let live = ::store::views::live_counts(db, &ids, now.saturating_mul(1000))?;
    let server = if owned.is_empty() {
        None
    } else {
        ingests::server_report(db)?
    };
    // Rewinding: a live broadcast whose media server keeps its replay says how far back.
    let mut rewound: std::collections::HashMap<String, i64> = items
        .iter()
        .filter(|b| b.status == Status::Active)
        .filter_map(|b| Some((b.id.clone(), ingests.get(&b.id)?.dvr_ms?)))
        .collect();
    let dvr_window = match items.iter().find(|b| rewound.contains_key(&b.id)) {
        Some(first) => replay_store::dvr_window_hours(db, &first.client_id)?,
        None => replay_store::DEFAULT_DVR_WINDOW_HOURS,
    };
    Ok(items
        .iter()
        .map(|b| {
            let dvr = rewound.remove(&b.id).map(|ms| {
                replays::dvr_view(ms, dvr_window, |file| {
                    links.signed_stream_file(&b.identity.stream_id, file, now)
                })
            });
            // The recording settings and the ingest are the owner's business.
            let owner = (audience_for(b) == Audience::Owner).then(|| OwnerExtras {
                recording: recording.remove(&b.id).map(|s| SettingsView::from(&s)),
                ingest: ingest_view(
                    ingests.remove(&b.id).as_ref(),
                    refusals.remove(&b.id).unwrap_or_default(),
                    server.as_ref(),
                    b,
                    now,
                ),
            });
            let replay = kept
                .remove(&b.id)
                .and_then(|r| {
                    replays::view(&r, |file| {
                        links.signed_stream_file(&b.identity.stream_id, file, now)
                    })
                })
                .or_else(|| recorded.remove(&b.id).map(|r| replays::recording_view(&r)));
            let mut view = of(b, &links, counts.remove(&b.id), replay, owner, now);
            view.dvr = dvr;
            let (views, room) = live.get(&b.id).copied().unwrap_or_default();
            view.viewer_count = domain::views::viewer_count(b.viewer_count, views, room);
            view
        })
        .collect())
}

/// One broadcast's view at `now`, with its reaction counts.
pub fn one(
    db: &Db,
    b: &Broadcast,
    audience: Audience,
    now: i64,
) -> Result<BroadcastView, ApiError> {
    let mut views = many(db, std::slice::from_ref(b), |_| audience, now)?;
    views
        .pop()
        .ok_or_else(|| ApiError::internal("no view of the broadcast"))
}

/// The ingest as the broadcast's owner sees it at `now`: its state, the stream's health
/// with its last sample while it is live, its last refusals and the media server's state.
pub fn ingest_view(
    ingest: Option<&Ingest>,
    refusals: Vec<Refusal>,
    server: Option<&ServerReport>,
    b: &Broadcast,
    now: i64,
) -> IngestView {
    let live = ingest.is_some_and(|i| i.is_live(now));
    let state = if live {
        IngestState::Live
    } else if b.status == Status::Active && b.ingest_deadline.is_some_and(|d| d >= now) {
        IngestState::Reconnecting
    } else {
        IngestState::Idle
    };
    let at = |t: Option<i64>| t.map(time::format_rfc3339);
    // The ladder arrives inside the stream's sample; the owner reads it beside the stats.
    let mut stats = ingest
        .and_then(|i| i.health_sample.clone())
        .filter(|_| live);
    IngestView {
        state,
        connected_at: at(ingest.and_then(|i| i.started_at).filter(|_| live)),
        last_seen_at: at(ingest.and_then(|i| i.last_update)),
        reconnect_deadline: at(b
            .ingest_deadline
            .filter(|_| state == IngestState::Reconnecting)),
        publishes: ingest.map_or(0, |i| i.publishes),
        health: ingest.and_then(|i| i.health).filter(|_| live),
        health_changed_at: at(ingest.and_then(|i| i.health_changed_at).filter(|_| live)),
        ladder: stats.as_mut().and_then(|s| s.ladder.take()),
        stats,
        refusals: refusals
            .into_iter()
            .map(|r| IngestRefusal {
                at: time::format_rfc3339_millis(r.at_ms),
                reason: r.reason,
                detail: r.detail,
                client_addr: r.client_addr,
            })
            .collect(),
        server: server_view(server, now),
    }
}
