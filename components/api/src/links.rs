//! The public addresses of a stream, built from the configured bases. Broadcasts and
//! scheduled events both get their stream identity from `StreamIdentity::generate` and
//! their addresses from here.

use common::domain::broadcast::{self as rules, StreamBases, StreamIdentity};
use common::spin::config;
use serde_json::Value;

/// The configured bases, read once per request.
pub struct Links {
    base_url: String,
    rtmp_ingest_base: String,
    playback_hls_base: String,
}

impl Links {
    pub fn load() -> Self {
        Self {
            base_url: config::var_or("base_url", "http://127.0.0.1:3000"),
            rtmp_ingest_base: config::var_or("rtmp_ingest_base", "rtmp://127.0.0.1:1935/live"),
            playback_hls_base: config::var_or("playback_hls_base", "http://127.0.0.1:8080/hls"),
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

    /// Adds streamId, shortId, watchUrl and hlsUrl to `view`; for the owner also the
    /// ingest credentials, streamKey and rtmpUrl.
    pub fn add_stream_addresses(&self, view: &mut Value, identity: &StreamIdentity, owner: bool) {
        let bases = self.bases();
        view["streamId"] = identity.stream_id.clone().into();
        view["shortId"] = identity.short_id.clone().into();
        view["watchUrl"] = rules::watch_url(&bases, &identity.short_id).into();
        view["hlsUrl"] = rules::hls_url(&bases, &identity.stream_id).into();
        if owner {
            view["streamKey"] = identity.stream_key.clone().into();
            view["rtmpUrl"] = rules::rtmp_url(&bases, &identity.stream_key).into();
        }
    }
}
