//! `edgehost`: a Spin-compatible local host for `spin.toml` applications, on wasmtime.
//!
//! It reads a Spin manifest (version 2), serves its `[[trigger.http]]` routes with hyper,
//! instantiates a fresh component instance per request from pre-compiled, pre-linked
//! components, and implements the Spin host interfaces the SDK imports
//! (`fermyon:spin/{key-value,sqlite,variables}@2.0.0`, `spin:sqlite@3.0.0`,
//! `spin:postgres@3.0.0` and `@4.0.0`, `wasi:config/store`) on embedded SQLite, Redis
//! (key-value, through runtime config) and PostgreSQL, with outbound HTTP and PostgreSQL
//! connections limited to each component's `allowed_outbound_hosts`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let server = edgehost::Server::start(edgehost::Options {
//!     manifest: "spin.toml".into(),
//!     listen: "127.0.0.1:0".parse()?,
//!     ..Default::default()
//! })
//! .await?;
//! println!("listening on http://{}", server.local_addr());
//! server.shutdown().await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

mod admission;
mod bindings;
mod builder;
mod cache;
mod clock;
#[cfg(feature = "platform")]
mod embedded;
mod handles;
mod jobs;
mod kv;
mod limits;
mod linger;
mod manifest;
#[cfg(feature = "platform")]
mod media;
mod network_policy;
mod outbound;
mod outbound_pool;
mod pg;
mod production;
#[cfg(feature = "platform")]
mod relay;
mod routes;
mod runtime_config;
mod server;
mod sql_guard;
mod sqlite;
mod state;
mod variables;

pub use admission::Admission;
pub use builder::{build_components, component_interfaces};
pub use jobs::JobStats;
pub use limits::{
    DEFAULT_INSTANCE_MEMORY, DEFAULT_MAX_CONCURRENT_INSTANCES, DEFAULT_REQUEST_TIMEOUT,
    parse_bytes, parse_duration,
};
#[cfg(feature = "platform")]
pub use media::MediaServer;
#[cfg(feature = "platform")]
pub use relay::ChatRelay;
pub use server::Server;
#[doc(hidden)]
pub use server::{bench_instantiation, bench_request};
pub use sqlite::{LeaseTiming, WriterRecord, WriterTimings};

/// A warning on edgehost's standard error (a setting ignored, a background task that failed).
pub(crate) fn warn(msg: std::fmt::Arguments<'_>) {
    eprintln!("edgehost: warning: {msg}");
}

/// Re-exported: the crates in the [`WebSocketHandler`] signature, so that handlers use
/// the same versions.
pub use {bytes, http_body_util, hyper};

/// Response body of a [`WebSocketHandler`].
pub type WebSocketBody = http_body_util::combinators::BoxBody<bytes::Bytes, anyhow::Error>;

/// Handles requests whose path starts with `/ws/` (the embedded chat relay's sockets).
/// It receives the raw hyper request, with the client's TCP address as a
/// `std::net::SocketAddr` extension, and may take the connection over with
/// `hyper::upgrade::on` (the server serves connections with upgrades enabled).
pub type WebSocketHandler = Arc<
    dyn Fn(
            hyper::Request<hyper::body::Incoming>,
        ) -> Pin<Box<dyn Future<Output = hyper::Response<WebSocketBody>> + Send>>
        + Send
        + Sync,
>;

/// How to run an application.
#[derive(Clone)]
pub struct Options {
    /// Path to `spin.toml`.
    pub manifest: PathBuf,
    /// Address to listen on; port 0 picks a free port (see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// Where the key-value store, SQLite database and generated secrets live;
    /// default `<manifest dir>/.spin`.
    pub state_dir: Option<PathBuf>,
    /// A Spin runtime config file. Read: `[[config_provider]] type = "env"` (with
    /// `prefix`), `[key_value_store.NAME]` of `type = "spin"` (with `path`, relative to the
    /// file) or `type = "redis"` (with `url`), `[sqlite_database.NAME]` of `type = "spin"`,
    /// and the edgehost extension `[variables]` (`name = "value"`, which Spin itself does
    /// not accept).
    pub runtime_config_file: Option<PathBuf>,
    /// Variable values with the highest precedence (name, value).
    pub variables: Vec<(String, String)>,
    /// Handler for `/ws/...` requests; `None` answers them 404. `/internal/...` is never
    /// handed to it: on the public port it is routed like any other path.
    pub websocket: Option<WebSocketHandler>,
    /// Embed the chat relay: `/ws/...` on this server's port (in place of `websocket`),
    /// its internal endpoint on its own loopback listener, whose URL becomes the app's
    /// `relay_url` unless the user set that variable (options, environment or runtime
    /// config). See [`Server::relay`].
    #[cfg(feature = "platform")]
    pub chat_relay: Option<ChatRelay>,
    /// Run the media server (nginx-rtmp through `media-agent`) where `rtmp_ingest_base` and
    /// `playback_hls_base` point, when both are loopback. See [`Server::media`].
    #[cfg(feature = "platform")]
    pub media: Option<MediaServer>,
    /// Log one line per request to stderr.
    pub log_requests: bool,
    /// Bytes of linear memory one instance may hold, all its memories together; a guest
    /// growing past it fails its request (500). `None`: the runtime config's
    /// `max_instance_memory`, else [`DEFAULT_INSTANCE_MEMORY`] (128 MiB).
    pub max_instance_memory: Option<usize>,
    /// Deadline of one request, from instantiation until its response body is written; an
    /// instance still running then is interrupted (504). Default 30 s.
    pub request_timeout: Duration,
    /// What one client (peer address) may hold, and how slowly a request may arrive: a
    /// header timeout, small bodies read before an instance is taken, a minimum body
    /// rate, and per-client caps on connections and instance slots ([`Admission`]).
    pub admission: Admission,
    /// Instances that may run at once; a request finding none free answers 503 with
    /// `Retry-After` at once. Default [`DEFAULT_MAX_CONCURRENT_INSTANCES`].
    pub max_concurrent_instances: usize,
    /// Run the periodic jobs of the jobs file (`edgehost up` does; off by default here).
    /// Start-up jobs (`at_start = true`) run in any case, before `Server::start` returns;
    /// until they have succeeded, every other request is answered 503 with `Retry-After`.
    pub scheduler: bool,
    /// The jobs file; `None`: `jobs.toml` next to the manifest, when it exists.
    pub jobs_file: Option<PathBuf>,
    /// Local development (the default) or production.
    pub mode: Mode,
    /// Serve only these components (Spin's `--component-id`, selective deployment): the
    /// others' routes are 404, and jobs whose route none of them serves are not run.
    /// Empty serves all.
    pub components: Vec<String>,
    /// A PEM file of certificate authorities that TLS connections to PostgreSQL trust
    /// besides the system's roots (which `SSL_CERT_FILE` replaces, as for Spin).
    pub postgres_ca_file: Option<PathBuf>,
}

/// Which defaults edgehost applies, and what it refuses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Local development: `registration_mode` is `open` unless something set it, and
    /// start-up says so; missing secrets are generated.
    #[default]
    Local,
    /// `edgehost up --production`: no local defaults; start-up fails, listing each, while
    /// local values are left in place (open registration, generated secrets,
    /// `webhook_allow_http`, loopback URLs).
    Production,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            manifest: PathBuf::from("spin.toml"),
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            state_dir: None,
            runtime_config_file: None,
            variables: Vec::new(),
            websocket: None,
            #[cfg(feature = "platform")]
            chat_relay: None,
            #[cfg(feature = "platform")]
            media: None,
            log_requests: false,
            max_instance_memory: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            admission: Admission::default(),
            max_concurrent_instances: DEFAULT_MAX_CONCURRENT_INSTANCES,
            scheduler: false,
            jobs_file: None,
            mode: Mode::Local,
            components: Vec::new(),
            postgres_ca_file: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("Options");
        s.field("manifest", &self.manifest)
            .field("listen", &self.listen)
            .field("state_dir", &self.state_dir)
            .field("runtime_config_file", &self.runtime_config_file)
            .field(
                "variables",
                &self.variables.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("websocket", &self.websocket.is_some());
        #[cfg(feature = "platform")]
        s.field("chat_relay", &self.chat_relay);
        s.field("log_requests", &self.log_requests)
            .field("max_instance_memory", &self.max_instance_memory)
            .field("request_timeout", &self.request_timeout)
            .field("max_concurrent_instances", &self.max_concurrent_instances)
            .field("scheduler", &self.scheduler)
            .field("jobs_file", &self.jobs_file)
            .field("mode", &self.mode)
            .field("components", &self.components)
            .field("postgres_ca_file", &self.postgres_ca_file)
            .finish()
    }
}
