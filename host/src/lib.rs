//! `edgehost`: a Spin-compatible local host for `spin.toml` applications, on wasmtime.
//!
//! It reads a Spin manifest (version 2), serves its `[[trigger.http]]` routes with hyper,
//! instantiates a fresh component instance per request from pre-compiled, pre-linked
//! components, and implements the Spin host interfaces the SDK imports
//! (`fermyon:spin/{key-value,sqlite,variables}@2.0.0`, `spin:sqlite@3.0.0`,
//! `wasi:config/store`) on embedded SQLite, with outbound HTTP limited to each
//! component's `allowed_outbound_hosts`.
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

mod bindings;
mod builder;
mod cache;
mod kv;
mod manifest;
mod outbound;
mod relay;
mod routes;
mod runtime_config;
mod server;
mod sqlite;
mod state;
mod variables;

pub use builder::{build_components, component_interfaces};
pub use relay::ChatRelay;
pub use server::Server;
#[doc(hidden)]
pub use server::bench_instantiation;

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
    /// `prefix`), `[key_value_store.NAME]` and `[sqlite_database.NAME]` of `type = "spin"`
    /// (with `path`, relative to the file), and the edgehost extension `[variables]`
    /// (`name = "value"`, which Spin itself does not accept).
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
    pub chat_relay: Option<ChatRelay>,
    /// Log one line per request to stderr.
    pub log_requests: bool,
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
            chat_relay: None,
            log_requests: false,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("manifest", &self.manifest)
            .field("listen", &self.listen)
            .field("state_dir", &self.state_dir)
            .field("runtime_config_file", &self.runtime_config_file)
            .field(
                "variables",
                &self.variables.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("websocket", &self.websocket.is_some())
            .field("chat_relay", &self.chat_relay)
            .field("log_requests", &self.log_requests)
            .finish()
    }
}
