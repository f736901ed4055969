//! Media-plane rules, as plain functions: ingest keys, who may play a stream without a
//! signature, signed HLS addresses, and a live stream's health.
//!
//! The media server (nginx with its RTMP module, driven by `media-agent`) and the platform
//! both derive the playback signing key from the one secret they share (`media_secret`),
//! so the platform signs addresses that nginx's `secure_link` checks without either side
//! storing a second secret.

use super::broadcast::Visibility;
use base64::Engine;
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// A fresh ingest key: a random UUID (v4, from the CSPRNG) without its dashes. It is never
/// derived from anything public.
pub fn new_stream_key() -> String {
    crate::ids::uuid().replace('-', "")
}

/// Whether `key` has the shape of an ingest key (32 lowercase hex digits): anything else
/// is refused before a lookup.
pub fn is_stream_key(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The key that signs playback addresses: derived from `media_secret` for this purpose
/// only (HMAC-SHA256, hex), so that nginx's configuration never holds the secret that
/// authenticates the media server to the platform.
pub fn playback_key(media_secret: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(media_secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"hls-playback/v1");
    hex::encode(mac.finalize().into_bytes())
}

/// How a stream's HLS may be fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Playback {
    /// Anyone with the address (public and unlisted broadcasts).
    Open,
    /// Only with an unexpired signature (private and subscribers-only broadcasts).
    Signed,
}

impl Playback {
    /// Public and unlisted broadcasts play openly; a gated one (private, subscribers)
    /// needs a signature.
    pub fn of_visibility(visibility: Visibility) -> Playback {
        if visibility.is_gated() {
            Playback::Signed
        } else {
            Playback::Open
        }
    }
}

/// The signature nginx's `secure_link_md5 "$secure_link_expires$sid <key>"` expects for
/// stream `stream_id` until `expires` (epoch seconds): base64url of the MD5, unpadded.
/// It covers every file of the stream (playlist, segments, thumbnail).
pub fn playback_signature(key: &str, stream_id: &str, expires: i64) -> String {
    let digest = Md5::digest(format!("{expires}{stream_id} {key}").as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

/// The query string of a signed playback address: `exp=<expires>&sig=<signature>`.
pub fn signed_query(key: &str, stream_id: &str, expires: i64) -> String {
    format!(
        "exp={expires}&sig={}",
        playback_signature(key, stream_id, expires)
    )
}

/// Whether `exp` and `sig` (the query of a signed playback address) sign stream
/// `stream_id` with `key` and have not expired at `now`; compared in constant time.
pub fn playback_signed(key: &str, stream_id: &str, exp: i64, sig: &str, now: i64) -> bool {
    use subtle::ConstantTimeEq;
    exp > now
        && bool::from(
            playback_signature(key, stream_id, exp)
                .as_bytes()
                .ct_eq(sig.as_bytes()),
        )
}

/// How long a signed playback address is valid unless `hls_url_ttl` says otherwise.
pub const DEFAULT_SIGNED_TTL_SECS: i64 = 3600;

/// How long the platform waits for a publisher that dropped to come back before the
/// broadcast completes, unless `ingest_reconnect_window` says otherwise (Mux's default).
pub const DEFAULT_RECONNECT_WINDOW_SECS: i64 = 60;

/// A live ingest that sent no update for this long is gone (its media server died
/// without saying so): a new publisher on the key is then accepted.
pub const INGEST_SILENT_AFTER_SECS: i64 = 30;

/// How far back viewers may rewind a live broadcast unless its tenant says otherwise
/// (`dvrWindowHours`, 4).
pub const DEFAULT_DVR_WINDOW_SECS: u64 = 4 * 3600;

/// How often a running media server reports itself up (`POST /api/media/server`).
pub const SERVER_REPORT_EVERY_SECS: u64 = 60;

/// A media server last reported up longer ago than this is not known to run any more.
pub const SERVER_SILENT_AFTER_SECS: i64 = 180;

/// One sample of a live ingest, as the media server measures it. Every field is optional:
/// a stream that has not sent metadata yet has no codecs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = every_field_optional)]
pub struct HealthSample {
    pub video_codec: Option<String>,
    pub video_profile: Option<String>,
    pub width: Option<i64>,
    pub height: Option<i64>,
    /// Frames per second the encoder declared.
    pub frame_rate: Option<f64>,
    pub audio_codec: Option<String>,
    pub audio_channels: Option<i64>,
    pub audio_sample_rate: Option<i64>,
    /// Incoming bits per second over the last sampling interval.
    pub bitrate: Option<i64>,
    /// Media seconds received per wall-clock second over the last interval: 1.0 is real
    /// time, below it the encoder is not keeping up.
    pub media_rate: Option<f64>,
    /// Seconds between keyframes, measured on the stream's latest segments.
    pub keyframe_interval: Option<f64>,
    /// The renditions viewers are served, as the media server runs them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<LiveLadder>,
}

/// Whether the media server transcodes a stream into renditions (`adaptive`: the source
/// plus 720p, 480p and 360p where the source is larger) or serves the source alone
/// (`passthrough`: no re-encoding, no CPU cost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Ladder {
    #[default]
    Adaptive,
    Passthrough,
}

impl Ladder {
    pub fn as_str(self) -> &'static str {
        match self {
            Ladder::Adaptive => "adaptive",
            Ladder::Passthrough => "passthrough",
        }
    }

    pub fn parse(text: &str) -> Option<Ladder> {
        match text {
            "adaptive" => Some(Ladder::Adaptive),
            "passthrough" => Some(Ladder::Passthrough),
            _ => None,
        }
    }
}

/// A request's `ladder` field.
impl crate::validate::body::Choices for Ladder {
    type Value = Ladder;

    fn names() -> Vec<&'static str> {
        vec!["adaptive", "passthrough"]
    }

    fn choose(name: &str) -> Option<Ladder> {
        Ladder::parse(name)
    }
}

/// A request's `latencyMode` field.
impl crate::validate::body::Choices for LatencyMode {
    type Value = LatencyMode;

    fn names() -> Vec<&'static str> {
        vec!["standard", "low"]
    }

    fn choose(name: &str) -> Option<LatencyMode> {
        LatencyMode::parse(name)
    }
}

/// How close to the live edge a broadcast plays: `standard` (2 s segments) or `low`
/// (1 s segments, a short playlist, the player held near the edge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum LatencyMode {
    #[default]
    Standard,
    Low,
}

impl LatencyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LatencyMode::Standard => "standard",
            LatencyMode::Low => "low",
        }
    }

    pub fn parse(text: &str) -> Option<LatencyMode> {
        match text {
            "standard" => Some(LatencyMode::Standard),
            "low" => Some(LatencyMode::Low),
            _ => None,
        }
    }
}

/// Why a stream asked to be adaptive plays as passthrough: its settings ask for it
/// (`requested`), the media server had no CPU left for its renditions (`capacity`), or
/// the source is no larger than the smallest rendition (`source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum LadderReason {
    Requested,
    Capacity,
    Source,
}

/// The ladder a live stream is served with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "LiveLadder")]
pub struct LiveLadder {
    pub mode: Ladder,
    /// Why the stream is passthrough (absent when adaptive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<LadderReason>,
    pub latency_mode: LatencyMode,
    pub renditions: Vec<RenditionSample>,
}

/// One rendition of a live stream, as measured on its segments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "LiveRendition")]
pub struct RenditionSample {
    /// `source` (the encoder's stream, not re-encoded) or the rendition's height (`480p`).
    pub name: String,
    pub width: i64,
    pub height: i64,
    /// Whether the media server encodes it (false: the source, copied).
    pub transcoded: bool,
    /// Average bits per second of its listed segments (audio included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<i64>,
    /// The highest segment's bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bitrate: Option<i64>,
    /// Media seconds produced per wall-clock second over the last interval (1.0: real
    /// time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_rate: Option<f64>,
    pub health: Health,
}

/// A sample's schema lists no field as required: the media server sends what it measured.
fn every_field_optional(schema: &mut schemars::Schema) {
    schema.remove("required");
}

/// Whether media arrives fast enough to play: `healthy`, or `starving` when the encoder
/// sends less than real time (or nothing) and viewers will buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Health {
    Healthy,
    Starving,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Starving => "starving",
        }
    }

    pub fn parse(text: &str) -> Option<Health> {
        match text {
            "healthy" => Some(Health::Healthy),
            "starving" => Some(Health::Starving),
            _ => None,
        }
    }
}

/// Below this share of real time an ingest (or a rendition) is starving.
pub const STARVING_MEDIA_RATE: f64 = 0.8;

/// The health of a rendition producing `media_rate` seconds of media per second.
pub fn rendition_health(media_rate: Option<f64>) -> Health {
    if media_rate.is_some_and(|r| r < STARVING_MEDIA_RATE) {
        Health::Starving
    } else {
        Health::Healthy
    }
}

/// The health a sample shows: starving when no bits arrived over the interval, or when
/// less than [`STARVING_MEDIA_RATE`] of real time did; healthy otherwise (a sample
/// without measurements yet is healthy).
pub fn health_of(sample: &HealthSample) -> Health {
    let silent = sample.bitrate.is_some_and(|b| b <= 0);
    let slow = sample.media_rate.is_some_and(|r| r < STARVING_MEDIA_RATE);
    // A rendition the media server cannot encode in real time starves its viewers too.
    let rendition_behind = sample
        .ladder
        .as_ref()
        .is_some_and(|l| l.renditions.iter().any(|r| r.health == Health::Starving));
    if silent || slow || rendition_behind {
        Health::Starving
    } else {
        Health::Healthy
    }
}

/// A restream target's state, as its owner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum RestreamState {
    /// The broadcast is not being published: nothing is pushed.
    Idle,
    /// The media server is connecting to the target.
    Connecting,
    /// Media is flowing to the target.
    Live,
    /// The last attempt failed; the media server retries while the broadcast is live.
    Errored,
}

impl RestreamState {
    pub fn as_str(self) -> &'static str {
        match self {
            RestreamState::Idle => "idle",
            RestreamState::Connecting => "connecting",
            RestreamState::Live => "live",
            RestreamState::Errored => "errored",
        }
    }

    pub fn parse(text: &str) -> Option<RestreamState> {
        match text {
            "idle" => Some(RestreamState::Idle),
            "connecting" => Some(RestreamState::Connecting),
            "live" => Some(RestreamState::Live),
            "errored" => Some(RestreamState::Errored),
            _ => None,
        }
    }
}

/// The most restream targets a broadcast may have.
pub const MAX_RESTREAM_TARGETS: i64 = 5;

/// The longest restream server URL and stream key accepted.
pub const MAX_RESTREAM_URL: usize = 1024;
pub const MAX_RESTREAM_KEY: usize = 512;

/// Checks a restream target's server URL (`rtmp://` or `rtmps://` host, port and path, as
/// services such as YouTube and Twitch give it): no credentials, query or fragment, and,
/// unless `allow_private`, a public host (names are checked again once resolved, by the
/// media server, before it connects).
pub fn check_restream_url(url: &str, allow_private: bool) -> Result<(), String> {
    if url.len() > MAX_RESTREAM_URL {
        return Err(format!("at most {MAX_RESTREAM_URL} characters"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".into());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("must be an rtmp:// or rtmps:// URL".into());
    };
    if !matches!(scheme.to_ascii_lowercase().as_str(), "rtmp" | "rtmps") {
        return Err("must be an rtmp:// or rtmps:// URL".into());
    }
    if rest.contains(['?', '#']) {
        return Err("must not have a query or fragment (put the key in streamKey)".into());
    }
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    super::webhooks::check_authority(authority, allow_private, RESTREAM_SWITCH)
}

/// The variable that lets restreams go to loopback and private addresses.
pub const RESTREAM_SWITCH: &str = "restream_allow_private";

/// Checks a restream target's stream key: 1 to [`MAX_RESTREAM_KEY`] printable characters
/// without spaces.
pub fn check_restream_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_RESTREAM_KEY {
        return Err(format!("must be 1 to {MAX_RESTREAM_KEY} characters"));
    }
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".into());
    }
    Ok(())
}

/// Where the media server pushes a target: its server URL and key joined by one `/`.
pub fn restream_destination(url: &str, key: &str) -> String {
    format!(
        "{}/{}",
        url.trim_end_matches('/'),
        key.trim_start_matches('/')
    )
}

/// What a target's key looks like to its owner: its last four characters (none of a
/// short key).
pub fn key_hint(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() < 12 {
        return "…".into();
    }
    format!("…{}", chars[chars.len() - 4..].iter().collect::<String>())
}

/// The media server's calls to the platform (`/api/media/...`, media tier) and their
/// answers: one definition for both sides.
pub mod protocol {
    use super::{HealthSample, Ladder, LatencyMode, Playback, RestreamState};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The header that carries `media_secret`.
    pub const SECRET_HEADER: &str = "x-media-secret";

    /// What names a publisher connection: 1 to 100 of `[A-Za-z0-9._:-]`.
    pub const CONNECTION_PATTERN: &str = "^[A-Za-z0-9._:-]+$";

    /// `POST /api/media/publish`: a publisher connected with `key`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[schemars(rename = "MediaPublish")]
    pub struct Publish {
        /// The stream name the encoder sent: the ingest key.
        pub key: String,
        /// The media server's name for this publisher connection, unique while it runs.
        #[schemars(length(min = 1, max = 100), regex(pattern = CONNECTION_PATTERN))]
        pub connection: String,
        /// The publisher's address.
        #[serde(default)]
        pub client_addr: Option<String>,
    }

    /// What the media server needs to push a stream to one restream target. (Answers
    /// accept fields this side does not know, so the platform may add some.)
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaRestreamTarget")]
    pub struct RestreamTarget {
        #[schemars(extend("format" = "uuid"))]
        pub id: String,
        /// The full destination, key included.
        pub url: String,
    }

    /// The answer to an accepted publish or update: where the stream lives, how it plays,
    /// and where to push it.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaAccepted")]
    pub struct Accepted {
        /// The name the stream is published (and its HLS written) under.
        #[schemars(extend("format" = "uuid"))]
        pub stream_id: String,
        pub playback: Playback,
        pub restreams: Vec<RestreamTarget>,
        /// Whether to transcode the stream into renditions (read at publish; absent from
        /// a platform that predates it: adaptive).
        #[serde(default)]
        pub ladder: Ladder,
        /// Segment length and playlist size (read at publish; absent: standard).
        #[serde(default)]
        pub latency_mode: LatencyMode,
        /// Whether to keep every segment of every rendition for the broadcast's replay
        /// (read at publish; absent from a platform that predates it: no).
        #[serde(default)]
        pub replay: bool,
        /// How far back viewers may rewind the live stream of a kept replay, in seconds:
        /// the tenant's DVR window (absent from a platform that predates it:
        /// [`super::DEFAULT_DVR_WINDOW_SECS`]).
        #[serde(default = "default_dvr_window")]
        #[schemars(range(min = 1))]
        pub dvr_window: u64,
    }

    fn default_dvr_window() -> u64 {
        super::DEFAULT_DVR_WINDOW_SECS
    }

    /// One restream target's state, as the media server last saw it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[schemars(rename = "MediaRestreamReport")]
    pub struct RestreamReport {
        pub id: String,
        pub state: RestreamState,
        /// Why the last attempt failed (never the target's address or key).
        #[serde(default)]
        pub error: Option<String>,
    }

    /// `POST /api/media/update`: a publisher is still live (every few seconds).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[schemars(rename = "MediaUpdate")]
    pub struct Update {
        #[schemars(length(min = 1, max = 100), regex(pattern = CONNECTION_PATTERN))]
        pub connection: String,
        pub key: String,
        #[serde(default)]
        pub health: Option<HealthSample>,
        #[serde(default)]
        pub restreams: Vec<RestreamReport>,
        /// Seconds of the stream viewers can rewind now (its DVR playlists' span): sent
        /// while the media server keeps the stream's replay.
        #[serde(default)]
        #[schemars(range(min = 0.0))]
        pub dvr_seconds: Option<f64>,
    }

    /// Whether the media server runs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[schemars(rename = "MediaServerState")]
    pub enum ServerState {
        Up,
        Down,
    }

    impl ServerState {
        pub fn as_str(self) -> &'static str {
            match self {
                ServerState::Up => "up",
                ServerState::Down => "down",
            }
        }
    }

    /// `POST /api/media/server`: the media server's report of itself: `up` when it starts
    /// and every minute while it runs, `down` with why when it stops or cannot start (its
    /// host reports that).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[schemars(rename = "MediaServerReport")]
    pub struct ServerReport {
        pub state: ServerState,
        /// Why it is down.
        #[serde(default)]
        #[schemars(length(max = 1000))]
        pub reason: Option<String>,
    }

    /// The longest `reason` a report may carry, in characters.
    pub const MAX_SERVER_REASON: usize = 1000;

    impl ServerReport {
        pub fn up() -> ServerReport {
            ServerReport {
                state: ServerState::Up,
                reason: None,
            }
        }

        /// A report that the media server is down, its reason kept within
        /// [`MAX_SERVER_REASON`] characters (a start-up error may quote a long log).
        pub fn down(reason: &str) -> ServerReport {
            let reason = reason.trim();
            let reason = match reason.char_indices().nth(MAX_SERVER_REASON - 1) {
                Some((at, _)) => format!("{}…", &reason[..at]),
                None => reason.to_string(),
            };
            ServerReport {
                state: ServerState::Down,
                reason: Some(reason),
            }
        }
    }

    /// What the media server says of a stream's replay (`POST /api/media/replay`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[schemars(rename = "MediaReplayState")]
    pub enum ReplayReport {
        /// It holds the stream's segments, the publisher gone: has the broadcast ended?
        Waiting,
        /// It wrote the replay's VOD playlists and thumbnail.
        Ready,
        /// It could not write the replay.
        Failed,
        /// It deleted the replay's media (asked to by [`ReplayAction::Delete`]).
        Deleted,
    }

    /// `POST /api/media/replay`: where a stream's replay stands on the media server.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[schemars(rename = "MediaReplay")]
    pub struct Replay {
        #[schemars(extend("format" = "uuid"))]
        pub stream_id: String,
        pub state: ReplayReport,
        /// The replay's length in seconds (`ready`).
        #[serde(default)]
        #[schemars(range(min = 0.0))]
        pub duration: Option<f64>,
        /// How many renditions it has (`ready`).
        #[serde(default)]
        #[schemars(range(min = 1, max = 16))]
        pub renditions: Option<u32>,
        /// Why it failed (`failed`).
        #[serde(default)]
        #[schemars(length(max = 1000))]
        pub error: Option<String>,
    }

    /// What the media server does next with a stream's replay.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[schemars(rename = "MediaReplayAction")]
    pub enum ReplayAction {
        /// The broadcast may still go on (its reconnect window): ask again.
        Wait,
        /// The broadcast ended: write the replay, and report it.
        Finish,
        /// No replay is kept (the broadcast is gone, or its tenant keeps none): delete
        /// the media.
        Delete,
        /// Nothing more to do.
        Done,
    }

    /// The answer to [`Replay`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaReplayAnswer")]
    pub struct ReplayAnswer {
        pub action: ReplayAction,
    }

    /// The answer to `POST /api/media/replays/deletions`: the replays whose media the
    /// media server is to delete.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaReplayDeletions")]
    pub struct ReplayDeletions {
        /// Stream ids: the media server deletes each one's replay and reports it
        /// `deleted`.
        pub stream_ids: Vec<String>,
    }

    /// A clip the media server is to make (`POST /api/media/clips/pending`).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaPendingClip")]
    pub struct PendingClip {
        #[schemars(extend("format" = "uuid"))]
        pub id: String,
        #[schemars(extend("format" = "uuid"))]
        pub stream_id: String,
        /// Seconds from the start of the stream's kept media; none for a `lastSeconds`
        /// clip the media server has not placed yet.
        pub start_offset: Option<f64>,
        /// The last seconds kept when the media server first sees it (`lastSeconds`).
        pub last_seconds: Option<i64>,
        /// Seconds.
        pub duration: i64,
        /// Whether its HLS playlists were reported (only the MP4 is left to make).
        pub hls_ready: bool,
    }

    /// A clip whose media the media server is to delete.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaClipDeletion")]
    pub struct ClipDeletion {
        #[schemars(extend("format" = "uuid"))]
        pub id: String,
        #[schemars(extend("format" = "uuid"))]
        pub stream_id: String,
    }

    /// The answer to `POST /api/media/clips/pending`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaPendingClips")]
    pub struct PendingClips {
        /// Clips to make (their HLS playlists, then their MP4), oldest first.
        pub make: Vec<PendingClip>,
        /// Clips deleted: the media server deletes their media and reports each `deleted`.
        pub delete: Vec<ClipDeletion>,
    }

    /// What the media server says of a clip (`POST /api/media/clip`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[schemars(rename = "MediaClipState")]
    pub enum ClipReport {
        /// Its HLS playlists are written (`startOffset`, `duration`).
        HlsReady,
        /// Its MP4 is written (`duration`, `size`; `thumbnail` when it has one).
        Ready,
        /// It could not be made (`error`: `out_of_range`, `no_media`, `cut_failed`, ...).
        Failed,
        /// Its media is deleted.
        Deleted,
    }

    /// `POST /api/media/clip`: where a clip stands on the media server.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[schemars(rename = "MediaClip")]
    pub struct Clip {
        #[schemars(extend("format" = "uuid"))]
        pub id: String,
        pub state: ClipReport,
        /// Where the clip starts in the stream's kept media, seconds (`hls_ready`).
        #[serde(default)]
        #[schemars(range(min = 0.0))]
        pub start_offset: Option<f64>,
        /// Seconds: of its HLS playlists (`hls_ready`) or of its MP4 (`ready`).
        #[serde(default)]
        #[schemars(range(min = 0.0, max = 600.0))]
        pub duration: Option<f64>,
        /// The MP4's size in bytes (`ready`).
        #[serde(default)]
        pub size: Option<u64>,
        /// Whether it wrote the clip's thumbnail (`ready`).
        #[serde(default)]
        pub thumbnail: Option<bool>,
        /// Why it failed (`failed`): a short reason code.
        #[serde(default)]
        #[schemars(length(max = 100))]
        pub error: Option<String>,
    }

    /// What the media server does next with a clip.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[schemars(rename = "MediaClipAction")]
    pub enum ClipAction {
        /// Go on (make its MP4 after its HLS).
        Continue,
        /// The clip is not (or no longer) asked for: delete what was made of it.
        Delete,
    }

    /// The answer to [`Clip`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "MediaClipAnswer")]
    pub struct ClipAnswer {
        pub action: ClipAction,
    }

    /// `POST /api/media/publish-done`: a publisher went away.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[schemars(rename = "MediaPublishDone")]
    pub struct PublishDone {
        #[schemars(length(min = 1, max = 100), regex(pattern = CONNECTION_PATTERN))]
        pub connection: String,
        pub key: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_playback_query_proves_the_stream_until_it_expires() {
        let key = playback_key("secret");
        let sig = playback_signature(&key, "s1", 1000);
        assert!(playback_signed(&key, "s1", 1000, &sig, 999));
        assert!(!playback_signed(&key, "s1", 1000, &sig, 1000), "expired");
        assert!(
            !playback_signed(&key, "s2", 1000, &sig, 999),
            "another stream"
        );
        assert!(
            !playback_signed(&key, "s1", 1001, &sig, 999),
            "another expiry"
        );
        let other = playback_key("other");
        assert!(!playback_signed(&other, "s1", 1000, &sig, 999));
    }

    #[test]
    fn a_down_report_keeps_its_reason_within_the_bound() {
        let long = "é".repeat(3000);
        let report = protocol::ServerReport::down(&long);
        let reason = report.reason.unwrap();
        assert_eq!(reason.chars().count(), protocol::MAX_SERVER_REASON);
        assert!(reason.ends_with('…'));
        let short = protocol::ServerReport::down("  nginx is missing ");
        assert_eq!(short.reason.as_deref(), Some("nginx is missing"));
    }

    #[test]
    fn stream_keys_are_random_uuids_without_dashes() {
        let a = new_stream_key();
        let b = new_stream_key();
        assert_ne!(a, b);
        assert!(is_stream_key(&a), "{a}");
        // A v4 UUID: its version digit survives the dashes' removal.
        assert_eq!(&a[12..13], "4");
        assert!(!is_stream_key("ABCDEF0123456789abcdef0123456789"));
        assert!(!is_stream_key("../etc/passwd"));
        assert!(!is_stream_key(""));
    }

    #[test]
    fn playback_follows_visibility_and_fails_closed() {
        let of = |stored: &str| Playback::of_visibility(Visibility::stored(stored));
        assert_eq!(of("public"), Playback::Open);
        assert_eq!(of("unlisted"), Playback::Open);
        assert_eq!(of("private"), Playback::Signed);
        assert_eq!(of("subscribers"), Playback::Signed);
        assert_eq!(of("anything else"), Playback::Signed);
    }

    #[test]
    fn signatures_are_what_nginx_secure_link_computes() {
        // echo -n '2000000000a1b2 k' | openssl md5 -binary | base64 | tr +/ -_ | tr -d =
        assert_eq!(
            playback_signature("k", "a1b2", 2_000_000_000),
            "s1-scq8hg3N1vs7RrMwmzg"
        );
        let key = playback_key("secret");
        assert_eq!(key.len(), 64);
        assert_ne!(key, playback_key("other secret"));
        let query = signed_query(&key, "s1", 10);
        assert!(query.starts_with("exp=10&sig="), "{query}");
        assert_ne!(
            playback_signature(&key, "s1", 10),
            playback_signature(&key, "s2", 10)
        );
        assert_ne!(
            playback_signature(&key, "s1", 10),
            playback_signature(&key, "s1", 11)
        );
    }

    #[test]
    fn health_is_starving_below_real_time_or_without_bits() {
        let healthy = HealthSample {
            bitrate: Some(2_000_000),
            media_rate: Some(1.0),
            ..Default::default()
        };
        assert_eq!(health_of(&healthy), Health::Healthy);
        assert_eq!(health_of(&HealthSample::default()), Health::Healthy);
        let slow = HealthSample {
            media_rate: Some(0.5),
            ..healthy.clone()
        };
        assert_eq!(health_of(&slow), Health::Starving);
        let silent = HealthSample {
            bitrate: Some(0),
            ..healthy.clone()
        };
        assert_eq!(health_of(&silent), Health::Starving);
        // A rendition the media server cannot encode in real time starves its viewers.
        let rendition = |rate: f64| RenditionSample {
            name: "360p".into(),
            width: 640,
            height: 360,
            transcoded: true,
            bitrate: Some(700_000),
            peak_bitrate: Some(800_000),
            media_rate: Some(rate),
            health: rendition_health(Some(rate)),
        };
        let ladder = |rate: f64| LiveLadder {
            mode: Ladder::Adaptive,
            reason: None,
            latency_mode: LatencyMode::Standard,
            renditions: vec![rendition(1.0), rendition(rate)],
        };
        let keeping_up = HealthSample {
            ladder: Some(ladder(0.95)),
            ..healthy.clone()
        };
        assert_eq!(health_of(&keeping_up), Health::Healthy);
        let behind = HealthSample {
            ladder: Some(ladder(0.6)),
            ..healthy
        };
        assert_eq!(health_of(&behind), Health::Starving);
        // The ladder travels in the sample, and a sample without one still reads.
        let text = serde_json::to_string(&behind).unwrap();
        assert!(
            text.contains(r#""ladder":{"mode":"adaptive","latencyMode":"standard""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<HealthSample>(&text).unwrap(), behind);
        let old: HealthSample = serde_json::from_str(r#"{"width":640}"#).unwrap();
        assert_eq!(old.ladder, None);
    }

    #[test]
    fn restream_targets_are_public_rtmp_servers() {
        assert!(check_restream_url("rtmp://a.rtmp.youtube.com/live2", false).is_ok());
        assert!(check_restream_url("rtmps://live-api-s.facebook.com:443/rtmp/", false).is_ok());
        for bad in [
            "https://a.example/live",
            "rtmp://user:pw@a.example/live",
            "rtmp://a.example/live?key=1",
            "rtmp://127.0.0.1/live",
            "rtmp://[::1]/live",
            "rtmp://localhost/live",
            "rtmp://10.0.0.5:1935/live",
            "rtmp://a.example/li ve",
        ] {
            assert!(check_restream_url(bad, false).is_err(), "{bad}");
        }
        // Local use may push to a receiver on this machine.
        assert!(check_restream_url("rtmp://127.0.0.1:19350/live", true).is_ok());
        // The refusal of a local target says how a local test allows it.
        let why = check_restream_url("rtmp://127.0.0.1:19350/live", false).unwrap_err();
        assert!(
            why.contains("SPIN_VARIABLE_RESTREAM_ALLOW_PRIVATE=true"),
            "{why}"
        );
        assert!(check_restream_key("live_123?s_bl=1").is_ok());
        assert!(check_restream_key("").is_err());
        assert!(check_restream_key("a b").is_err());
        assert_eq!(
            restream_destination("rtmp://a.example/live/", "k1"),
            "rtmp://a.example/live/k1"
        );
        assert_eq!(key_hint("live_0123456789abcd"), "…abcd");
        assert_eq!(key_hint("short"), "…");
    }

    #[test]
    fn the_protocol_refuses_unknown_fields() {
        let publish: protocol::Publish =
            serde_json::from_str(r#"{"key":"k","connection":"c"}"#).unwrap();
        assert_eq!(publish.client_addr, None);
        assert!(
            serde_json::from_str::<protocol::Publish>(r#"{"key":"k","connection":"c","x":1}"#)
                .is_err()
        );
        let update: protocol::Update = serde_json::from_str(
            r#"{"connection":"c","key":"k","health":{"bitrate":5},"restreams":[{"id":"r","state":"live"}]}"#,
        )
        .unwrap();
        assert_eq!(update.health.unwrap().bitrate, Some(5));
        assert_eq!(update.restreams[0].state, RestreamState::Live);
    }
}
