//! The public addresses of a stream, built from the configured bases. Broadcasts and
//! scheduled events both get their stream identity from `StreamIdentity::generate` and
//! their addresses from here. A stream that does not play openly (private and
//! subscribers-only) gets signed playback addresses that expire.

use domain::broadcast::{self as rules, StreamBases, StreamIdentity, Visibility};
use domain::media::{self, Playback};
use edge::spin::config;
use schemars::JsonSchema;
use serde::Serialize;

/// The configured bases, read once per request.
pub struct Links {
    base_url: String,
    rtmp_ingest_base: String,
    playback_hls_base: String,
    /// The key signed playback addresses are made with (from `media_secret`); `None`
    /// when no media server is configured.
    playback_key: Option<String>,
    /// How long a signed playback address is valid (`hls_url_ttl`, seconds).
    signed_ttl: i64,
}

impl Links {
    pub fn load() -> Self {
        Self {
            base_url: config::var_or("base_url", "http://127.0.0.1:3000"),
            rtmp_ingest_base: config::var_or("rtmp_ingest_base", "rtmp://127.0.0.1:1935/live"),
            playback_hls_base: config::var_or("playback_hls_base", "http://127.0.0.1:8080/hls"),
            playback_key: config::var("media_secret").map(|s| media::playback_key(&s)),
            signed_ttl: config::var("hls_url_ttl")
                .and_then(|v| v.trim().parse().ok())
                .filter(|ttl: &i64| *ttl > 0)
                .unwrap_or(media::DEFAULT_SIGNED_TTL_SECS),
        }
    }

    fn bases(&self) -> StreamBases<'_> {
        StreamBases {
            base_url: &self.base_url,
            rtmp_ingest_base: &self.rtmp_ingest_base,
            playback_hls_base: &self.playback_hls_base,
        }
    }

    pub fn base_url(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }

    /// A playback address of the stream: as is when it plays openly, else with a
    /// signature valid for `hls_url_ttl` from `now`.
    fn playback(&self, url: String, stream_id: &str, playback: Playback, now: i64) -> String {
        match (playback, &self.playback_key) {
            (Playback::Signed, Some(key)) => {
                let query = media::signed_query(key, stream_id, now + self.signed_ttl);
                format!("{url}?{query}")
            }
            _ => url,
        }
    }

    /// Where the stream plays and is watched (playback addresses signed when
    /// `visibility` needs it).
    pub fn stream_addresses(
        &self,
        identity: &StreamIdentity,
        visibility: Visibility,
        now: i64,
    ) -> StreamAddresses {
        let bases = self.bases();
        let playback = Playback::of_visibility(visibility);
        let stream_id = &identity.stream_id;
        StreamAddresses {
            stream_id: stream_id.clone(),
            short_id: identity.short_id.clone(),
            watch_url: rules::watch_url(&bases, &identity.short_id),
            hls_url: self.playback(rules::hls_url(&bases, stream_id), stream_id, playback, now),
            thumbnail_url: self.playback(
                rules::thumbnail_url(&bases, stream_id),
                stream_id,
                playback,
                now,
            ),
        }
    }

    /// `file` under the stream's playback address, always signed (a replay: see
    /// docs/replays.md), valid for `hls_url_ttl` from `now`.
    pub fn signed_stream_file(&self, stream_id: &str, file: &str, now: i64) -> String {
        let url = format!(
            "{}/{stream_id}/{file}",
            self.playback_hls_base.trim_end_matches('/')
        );
        self.playback(url, stream_id, Playback::Signed, now)
    }

    /// `file` of clip `clip_id`'s own media (its MP4 and thumbnail, which outlive the
    /// replay: docs/replays.md#clips), signed by the clip's id, valid for `hls_url_ttl`
    /// from `now`.
    pub fn signed_clip_file(&self, clip_id: &str, file: &str, now: i64) -> String {
        let url = format!(
            "{}/clips/{clip_id}/{file}",
            self.playback_hls_base.trim_end_matches('/')
        );
        self.playback(url, clip_id, Playback::Signed, now)
    }

    /// What the owner's encoder publishes with.
    pub fn ingest_credentials(&self, identity: &StreamIdentity) -> IngestCredentials {
        IngestCredentials {
            stream_key: identity.stream_key.clone(),
            rtmp_url: rules::rtmp_url(&self.bases(), &identity.stream_key),
        }
    }
}

/// Where a stream plays and is watched.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamAddresses {
    /// The stream's SFU room.
    pub stream_id: String,
    pub short_id: String,
    /// Its watch page.
    pub watch_url: String,
    /// The HLS playlist; signed (exp, sig) and short-lived for private and
    /// subscribers-only streams.
    pub hls_url: String,
    /// A live stream's JPEG thumbnail, refreshed every few seconds (signed like hlsUrl).
    pub thumbnail_url: String,
}

/// What the owner's encoder publishes with: its RTMP address, and the key in it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestCredentials {
    pub stream_key: String,
    pub rtmp_url: String,
}
