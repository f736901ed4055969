//! How the agent runs: its settings, read from the environment by `main` (and set by an
//! embedding host such as edgehost from the platform's variables).

use crate::ladder::{Costs, Encoder};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Cores per million pixels a second that scaling and encoding a rendition costs with
/// x264 `veryfast`, and decoding the source: the dearest rung measured on the reference
/// machine (360p30 scaled from 1080p, 0.0128; BENCHMARKS.md, "Transcoding"), so that the
/// budget errs towards admitting fewer ladders.
pub const DEFAULT_COSTS: Costs = Costs {
    encode: 0.013,
    decode: 0.001,
};

/// Default of `RTMP_LISTEN`.
pub const DEFAULT_RTMP_LISTEN: &str = "0.0.0.0:1935";
/// Default of `HTTP_LISTEN`.
pub const DEFAULT_HTTP_LISTEN: &str = "0.0.0.0:8080";
/// Default of `STATE_DIR`.
pub const DEFAULT_STATE_DIR: &str = "media-state";
/// Where Debian's `libnginx-mod-rtmp` installs the module.
pub const DEFAULT_RTMP_MODULE: &str = "/usr/lib/nginx/modules/ngx_rtmp_module.so";

/// Every environment variable the `media-agent` binary reads, and whether it is required.
/// Deployment manifests are checked against this list.
pub const ENVIRONMENT: &[(&str, bool)] = &[
    ("PLATFORM_URL", false),
    ("MEDIA_SECRET", true),
    ("RTMP_LISTEN", false),
    ("HTTP_LISTEN", false),
    ("RTMP_APP", false),
    ("HLS_PREFIX", false),
    ("STATE_DIR", false),
    ("NGINX_BIN", false),
    ("NGINX_RTMP_MODULE", false),
    ("FFMPEG_BIN", false),
    ("ALLOW_PRIVATE_RESTREAMS", false),
    ("TRANSCODE_CORES", false),
    ("TRANSCODE_PRESET", false),
    ("TRANSCODE_ENCODER", false),
    ("RTMP_CONNECTIONS_PER_ADDRESS", false),
    ("RTMP_CONNECTIONS", false),
    ("MEDIA_STORE_ENDPOINT", false),
    ("MEDIA_STORE_BUCKET", false),
    ("MEDIA_STORE_REGION", false),
    ("MEDIA_STORE_ACCESS_KEY_ID", false),
    ("MEDIA_STORE_SECRET_ACCESS_KEY", false),
];

/// The longest `update_secs`: a visibility change reaches playback at the stream's next
/// update, and nginx's file cache may hold the old answer for one more second
/// (`open_file_cache_valid 1s`): 3 + 1 s and the platform's answer keep the documented
/// bound of 5 s.
pub const MAX_UPDATE_SECS: u64 = 3;

/// The most RTMP connections the ingress may hold in all: half of nginx's single worker
/// (`worker_connections 4096` in the template), the other half is HLS's.
pub const MAX_RTMP_CONNECTIONS: usize = 2048;

/// Whether `name` is one of the agent's environment variables.
pub fn is_environment_variable(name: &str) -> bool {
    ENVIRONMENT.iter().any(|(known, _)| *known == name)
}

/// The S3-compatible media store the `MEDIA_STORE_*` variables name (through `get`), or
/// `None` when `MEDIA_STORE_ENDPOINT` is unset or empty; a partial set is an error.
pub fn media_store_from_env(
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<crate::media_store::s3::S3Settings>, String> {
    let get = |name: &str| {
        get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let Some(endpoint) = get("MEDIA_STORE_ENDPOINT") else {
        if [
            "MEDIA_STORE_BUCKET",
            "MEDIA_STORE_ACCESS_KEY_ID",
            "MEDIA_STORE_SECRET_ACCESS_KEY",
        ]
        .iter()
        .any(|name| get(name).is_some())
        {
            return Err("the media store's settings need MEDIA_STORE_ENDPOINT".into());
        }
        return Ok(None);
    };
    let need =
        |name: &str| get(name).ok_or(format!("{name} is required with MEDIA_STORE_ENDPOINT"));
    let store = crate::media_store::s3::S3Settings {
        endpoint: endpoint.trim_end_matches('/').to_string(),
        bucket: need("MEDIA_STORE_BUCKET")?,
        region: get("MEDIA_STORE_REGION").unwrap_or_else(|| "us-east-1".into()),
        access_key_id: need("MEDIA_STORE_ACCESS_KEY_ID")?,
        secret_access_key: need("MEDIA_STORE_SECRET_ACCESS_KEY")?,
    };
    store.check()?;
    Ok(Some(store))
}

/// How the agent and its media server run.
#[derive(Clone)]
pub struct Config {
    /// Where the platform is, e.g. `http://127.0.0.1:3000` or `https://live.example.com`.
    pub platform_url: String,
    /// The platform's `media_secret`: authenticates the agent to the platform, and derives
    /// the key that signs playback addresses.
    pub media_secret: String,
    /// RTMP ingest (the host and port of the platform's `rtmp_ingest_base`); port 0
    /// picks a free one.
    pub rtmp_listen: SocketAddr,
    /// HLS playback (the host and port of `playback_hls_base`); port 0 picks a free one.
    pub http_listen: SocketAddr,
    /// The ingest application: the path of `rtmp_ingest_base` (`rtmp://host:1935/live`).
    pub rtmp_app: String,
    /// The URL path HLS is served under: the path of `playback_hls_base` (`/hls`; empty
    /// for the root), without a trailing `/`.
    pub hls_prefix: String,
    /// Everything the media server writes: its configuration, pid, temp files, `hls/`,
    /// and the `open/` markers of streams that play without a signature.
    pub state_dir: PathBuf,
    /// The nginx binary: a path, or a name looked up on `PATH` and in `/usr/sbin`.
    pub nginx_bin: PathBuf,
    /// The RTMP module to load; empty when nginx has it built in (no `load_module`).
    pub rtmp_module: PathBuf,
    /// The ffmpeg binary (thumbnails, restreams): a path, or a name looked up on `PATH`.
    pub ffmpeg_bin: PathBuf,
    /// Seconds of media per HLS segment.
    pub fragment_secs: u64,
    /// Seconds of media a live playlist lists.
    pub playlist_secs: u64,
    /// How often nginx reports each publisher (`notify_update_timeout`), which the agent
    /// forwards to the platform with the stream's health.
    pub update_secs: u64,
    /// How often a live stream's thumbnail is refreshed.
    pub thumbnail_secs: u64,
    /// Lets restreams go to loopback and private addresses (tests, a lab); never in
    /// production, where a target is whatever a broadcaster typed.
    pub allow_private_restreams: bool,
    /// Cores the renditions of all streams may use together (`TRANSCODE_CORES`; default
    /// the machine's): a publish whose ladder does not fit plays as passthrough.
    pub transcode_cores: f64,
    /// x264's preset for the renditions (`TRANSCODE_PRESET`: `veryfast`, `superfast`...).
    pub transcode_preset: String,
    /// `libx264` or `h264_nvenc` (`TRANSCODE_ENCODER`).
    pub transcode_encoder: Encoder,
    /// What a rendition costs, to admit streams by [`Config::transcode_cores`].
    pub transcode_costs: Costs,
    /// RTMP connections one client address (an IPv6 /64) may hold at once: an encoder
    /// needs one, a LiveKit egress host one per broadcast it feeds.
    pub rtmp_per_address: usize,
    /// RTMP connections held at once in all (at most [`MAX_RTMP_CONNECTIONS`]).
    pub rtmp_connections: usize,
    /// Seconds a client has to complete the RTMP handshake, however it trickles.
    pub rtmp_handshake_secs: u64,
    /// Seconds an RTMP client may send nothing before it is disconnected.
    pub rtmp_idle_secs: u64,
    /// Where replays (and clips) are kept: an S3-compatible bucket, written through a
    /// spool in the state directory (`MEDIA_STORE_*`); `None`, the default, keeps them in
    /// the media server's working directory (`media/`).
    pub media_store: Option<crate::media_store::s3::S3Settings>,
    /// How restreams resolve and connect: the system's when `None` (tests substitute
    /// their own).
    pub restream_network: Option<std::sync::Arc<dyn crate::restreams::Network>>,
}

impl Config {
    pub fn new(platform_url: &str, media_secret: &str) -> Config {
        Config {
            platform_url: platform_url.trim_end_matches('/').to_string(),
            media_secret: media_secret.to_string(),
            rtmp_listen: DEFAULT_RTMP_LISTEN
                .parse()
                .expect("a valid default address"),
            http_listen: DEFAULT_HTTP_LISTEN
                .parse()
                .expect("a valid default address"),
            rtmp_app: "live".into(),
            hls_prefix: "/hls".into(),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            nginx_bin: PathBuf::from("nginx"),
            rtmp_module: PathBuf::from(DEFAULT_RTMP_MODULE),
            ffmpeg_bin: PathBuf::from("ffmpeg"),
            fragment_secs: 2,
            playlist_secs: 10,
            update_secs: MAX_UPDATE_SECS,
            thumbnail_secs: 5,
            allow_private_restreams: false,
            transcode_cores: std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64),
            transcode_preset: "veryfast".into(),
            transcode_encoder: Encoder::X264,
            transcode_costs: DEFAULT_COSTS,
            rtmp_per_address: 32,
            rtmp_connections: 1024,
            rtmp_handshake_secs: 10,
            rtmp_idle_secs: 30,
            media_store: None,
            restream_network: None,
        }
    }

    /// Reads the settings besides the platform's URL and secret from the environment
    /// (through `get`): `RTMP_LISTEN`, `HTTP_LISTEN`, `RTMP_APP`, `HLS_PREFIX`,
    /// `STATE_DIR`, `NGINX_BIN`, `NGINX_RTMP_MODULE` (`none`: built in), `FFMPEG_BIN`,
    /// `ALLOW_PRIVATE_RESTREAMS`, `RTMP_CONNECTIONS_PER_ADDRESS`, `RTMP_CONNECTIONS`, and
    /// the S3-compatible media store: `MEDIA_STORE_ENDPOINT` (setting it chooses that
    /// store), `MEDIA_STORE_BUCKET`, `MEDIA_STORE_REGION` (default `us-east-1`),
    /// `MEDIA_STORE_ACCESS_KEY_ID`, `MEDIA_STORE_SECRET_ACCESS_KEY`. Unset or empty
    /// variables keep the current value.
    pub fn read_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), String> {
        let get = |name: &str| {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let addr = |name: &str| -> Result<Option<SocketAddr>, String> {
            get(name)
                .map(|v| {
                    v.parse::<SocketAddr>()
                        .map_err(|_| format!("{name} must be an address like 0.0.0.0:1935"))
                })
                .transpose()
        };
        if let Some(a) = addr("RTMP_LISTEN")? {
            self.rtmp_listen = a;
        }
        if let Some(a) = addr("HTTP_LISTEN")? {
            self.http_listen = a;
        }
        if let Some(app) = get("RTMP_APP") {
            self.rtmp_app = app.trim_matches('/').to_string();
        }
        if let Some(prefix) = get("HLS_PREFIX") {
            // `/hls/` is `/hls`, and `/` the root (an empty prefix).
            self.hls_prefix = prefix.trim_end_matches('/').to_string();
        }
        if let Some(dir) = get("STATE_DIR") {
            self.state_dir = PathBuf::from(dir);
        }
        if let Some(bin) = get("NGINX_BIN") {
            self.nginx_bin = PathBuf::from(bin);
        }
        if let Some(module) = get("NGINX_RTMP_MODULE") {
            self.rtmp_module = if module == "none" {
                PathBuf::new()
            } else {
                PathBuf::from(module)
            };
        }
        if let Some(bin) = get("FFMPEG_BIN") {
            self.ffmpeg_bin = PathBuf::from(bin);
        }
        if let Some(v) = get("ALLOW_PRIVATE_RESTREAMS") {
            self.allow_private_restreams = match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => return Err("ALLOW_PRIVATE_RESTREAMS is true or false".into()),
            };
        }
        if let Some(v) = get("TRANSCODE_CORES") {
            self.transcode_cores = v
                .parse::<f64>()
                .ok()
                .filter(|c| c.is_finite() && *c >= 0.0)
                .ok_or("TRANSCODE_CORES is a number of cores (0: no renditions)")?;
        }
        if let Some(v) = get("TRANSCODE_PRESET") {
            self.transcode_preset = v;
        }
        if let Some(v) = get("TRANSCODE_ENCODER") {
            self.transcode_encoder =
                Encoder::parse(&v).ok_or("TRANSCODE_ENCODER is libx264 or h264_nvenc")?;
        }
        for (name, field) in [
            ("RTMP_CONNECTIONS_PER_ADDRESS", &mut self.rtmp_per_address),
            ("RTMP_CONNECTIONS", &mut self.rtmp_connections),
        ] {
            if let Some(v) = get(name) {
                *field = v
                    .parse()
                    .map_err(|_| format!("{name} must be a number of connections"))?;
            }
        }
        if let Some(store) = media_store_from_env(get)? {
            self.media_store = Some(store);
        }
        self.check()
    }

    /// The settings' own consistency (the template checks each value's syntax).
    pub fn check(&self) -> Result<(), String> {
        if self.media_secret.is_empty() {
            return Err("the media secret is empty".into());
        }
        if !(self.platform_url.starts_with("http://") || self.platform_url.starts_with("https://"))
        {
            return Err(format!(
                "the platform URL {:?} is not an http(s) URL",
                self.platform_url
            ));
        }
        for (name, value) in [
            ("fragment_secs", self.fragment_secs),
            ("playlist_secs", self.playlist_secs),
            ("update_secs", self.update_secs),
            ("thumbnail_secs", self.thumbnail_secs),
        ] {
            if value == 0 || value > 3600 {
                return Err(format!("{name} must be between 1 and 3600"));
            }
        }
        const PRESETS: &[&str] = &[
            "ultrafast",
            "superfast",
            "veryfast",
            "faster",
            "fast",
            "medium",
        ];
        if !PRESETS.contains(&self.transcode_preset.as_str()) {
            return Err(format!(
                "the transcode preset must be one of {}",
                PRESETS.join(", ")
            ));
        }
        if self.rtmp_per_address == 0
            || self.rtmp_connections < self.rtmp_per_address
            || self.rtmp_connections > MAX_RTMP_CONNECTIONS
        {
            return Err(format!(
                "RTMP connections: at least 1 per address, and between that and \
                 {MAX_RTMP_CONNECTIONS} in all"
            ));
        }
        if !(1..=300).contains(&self.rtmp_handshake_secs)
            || !(1..=3600).contains(&self.rtmp_idle_secs)
        {
            return Err(
                "the RTMP handshake and idle times must be 1 to 300 and 1 to 3600 s".into(),
            );
        }
        if self.update_secs > MAX_UPDATE_SECS {
            return Err(format!(
                "update_secs must be at most {MAX_UPDATE_SECS}: a visibility change reaches \
                 playback at the next update, within 5 s"
            ));
        }
        if self.playlist_secs < self.fragment_secs {
            return Err("playlist_secs must be at least fragment_secs".into());
        }
        if let Some(store) = &self.media_store {
            store.check()?;
        }
        if self.rtmp_listen.port() != 0 && self.rtmp_listen.port() == self.http_listen.port() {
            return Err("RTMP and HTTP cannot listen on the same port".into());
        }
        Ok(())
    }
}

impl std::fmt::Debug for Config {
    /// Everything but the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("platform_url", &self.platform_url)
            .field("rtmp_listen", &self.rtmp_listen)
            .field("http_listen", &self.http_listen)
            .field("rtmp_app", &self.rtmp_app)
            .field("hls_prefix", &self.hls_prefix)
            .field("state_dir", &self.state_dir)
            .field("nginx_bin", &self.nginx_bin)
            .field("rtmp_module", &self.rtmp_module)
            .field("ffmpeg_bin", &self.ffmpeg_bin)
            .field("fragment_secs", &self.fragment_secs)
            .field("playlist_secs", &self.playlist_secs)
            .field("update_secs", &self.update_secs)
            .field("thumbnail_secs", &self.thumbnail_secs)
            .field("allow_private_restreams", &self.allow_private_restreams)
            .field("transcode_cores", &self.transcode_cores)
            .field("transcode_preset", &self.transcode_preset)
            .field("transcode_encoder", &self.transcode_encoder)
            .field("transcode_costs", &self.transcode_costs)
            .field("rtmp_per_address", &self.rtmp_per_address)
            .field("rtmp_connections", &self.rtmp_connections)
            .field("rtmp_handshake_secs", &self.rtmp_handshake_secs)
            .field("rtmp_idle_secs", &self.rtmp_idle_secs)
            .field("media_store", &self.media_store)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            assert!(is_environment_variable(name), "{name} is not listed");
            map.get(name).cloned()
        }
    }

    #[test]
    fn defaults_and_environment() {
        let mut config = Config::new("http://127.0.0.1:3000/", "s");
        assert_eq!(config.platform_url, "http://127.0.0.1:3000");
        assert_eq!(config.rtmp_listen.to_string(), "0.0.0.0:1935");
        assert_eq!(config.http_listen.to_string(), "0.0.0.0:8080");
        config.read_env(env(&[])).unwrap();
        assert_eq!(config.rtmp_app, "live");
        config
            .read_env(env(&[
                ("RTMP_LISTEN", "127.0.0.1:0"),
                ("HTTP_LISTEN", " 127.0.0.1:8081 "),
                ("RTMP_APP", "/ingest"),
                ("HLS_PREFIX", "/video/"),
                ("STATE_DIR", "/var/lib/media"),
                ("NGINX_RTMP_MODULE", "none"),
                ("ALLOW_PRIVATE_RESTREAMS", "yes"),
                ("FFMPEG_BIN", ""),
                ("RTMP_CONNECTIONS_PER_ADDRESS", "4"),
                ("RTMP_CONNECTIONS", "100"),
            ]))
            .unwrap();
        assert_eq!((config.rtmp_per_address, config.rtmp_connections), (4, 100));
        assert_eq!(config.rtmp_listen.port(), 0);
        assert_eq!(config.http_listen.port(), 8081);
        assert_eq!(config.rtmp_app, "ingest");
        assert_eq!(config.hls_prefix, "/video");
        assert_eq!(config.state_dir, PathBuf::from("/var/lib/media"));
        assert_eq!(config.rtmp_module, PathBuf::new());
        assert_eq!(config.ffmpeg_bin, PathBuf::from("ffmpeg"));
        assert!(config.allow_private_restreams);
        config.read_env(env(&[("HLS_PREFIX", "/")])).unwrap();
        assert_eq!(config.hls_prefix, "");
        config
            .read_env(env(&[
                ("TRANSCODE_CORES", "1.5"),
                ("TRANSCODE_PRESET", "superfast"),
                ("TRANSCODE_ENCODER", "h264_nvenc"),
            ]))
            .unwrap();
        assert_eq!(config.transcode_cores, 1.5);
        assert_eq!(config.transcode_preset, "superfast");
        assert_eq!(config.transcode_encoder, Encoder::Nvenc);
    }

    #[test]
    fn the_media_store_is_local_unless_an_endpoint_is_set() {
        let mut config = Config::new("http://127.0.0.1:3000", "s");
        config.read_env(env(&[])).unwrap();
        assert!(config.media_store.is_none());
        config
            .read_env(env(&[
                ("MEDIA_STORE_ENDPOINT", "http://127.0.0.1:3900/"),
                ("MEDIA_STORE_BUCKET", "media"),
                ("MEDIA_STORE_ACCESS_KEY_ID", "GK31c2f218a2e44f485b94239e"),
                (
                    "MEDIA_STORE_SECRET_ACCESS_KEY",
                    "b892c0665f0ada8a4755dae98baa3b133590e11dae3bcc1f9d769d67f16c3835",
                ),
            ]))
            .unwrap();
        let store = config.media_store.clone().unwrap();
        assert_eq!(store.endpoint, "http://127.0.0.1:3900");
        assert_eq!(store.region, "us-east-1");
        let printed = format!("{config:?}");
        assert!(printed.contains("GK31c2f218a2e44f485b94239e"), "{printed}");
        assert!(
            !printed.contains("b892c0665f0ada8a"),
            "the secret is never printed"
        );
        for bad in [
            vec![("MEDIA_STORE_BUCKET", "media")],
            vec![("MEDIA_STORE_ENDPOINT", "http://127.0.0.1:3900")],
            vec![
                ("MEDIA_STORE_ENDPOINT", "http://127.0.0.1:3900/x"),
                ("MEDIA_STORE_BUCKET", "media"),
                ("MEDIA_STORE_ACCESS_KEY_ID", "k"),
                ("MEDIA_STORE_SECRET_ACCESS_KEY", "s"),
            ],
        ] {
            let mut config = Config::new("http://127.0.0.1:3000", "s");
            assert!(config.read_env(env(&bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn refuses_bad_settings() {
        let mut config = Config::new("http://127.0.0.1:3000", "s");
        assert!(config.read_env(env(&[("RTMP_LISTEN", "1935")])).is_err());
        assert!(
            config
                .read_env(env(&[("ALLOW_PRIVATE_RESTREAMS", "maybe")]))
                .is_err()
        );
        for (name, bad) in [
            ("TRANSCODE_CORES", "-1"),
            ("TRANSCODE_CORES", "lots"),
            ("TRANSCODE_PRESET", "placebo;rm"),
            ("TRANSCODE_ENCODER", "h265"),
        ] {
            let mut config = Config::new("http://127.0.0.1:3000", "s");
            assert!(
                config.read_env(env(&[(name, bad)])).is_err(),
                "{name}={bad}"
            );
        }
        for bad in [
            ("RTMP_CONNECTIONS_PER_ADDRESS", "0"),
            ("RTMP_CONNECTIONS", "5000"),
            ("RTMP_CONNECTIONS", "many"),
        ] {
            let mut config = Config::new("http://127.0.0.1:3000", "s");
            assert!(config.read_env(env(&[bad])).is_err(), "{bad:?}");
        }
        let mut config = Config::new("ftp://x", "s");
        assert!(config.check().is_err());
        config.platform_url = "https://live.example.com".into();
        config.check().unwrap();
        config.update_secs = 5;
        assert!(
            config.check().is_err(),
            "updates too rare for the visibility bound"
        );
        config.update_secs = 3;
        config.check().unwrap();
        config.playlist_secs = 1;
        assert!(config.check().is_err());
        assert!(Config::new("http://x", "").check().is_err());
    }

    #[test]
    fn debug_hides_the_secret() {
        let text = format!("{:?}", Config::new("http://x", "top-secret"));
        assert!(!text.contains("top-secret"), "{text}");
    }
}
