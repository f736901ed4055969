//! `edgehost up|build|inspect`: run a Spin application locally.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use std::time::Duration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "edgehost",
    version,
    about = "Run a Spin application locally on wasmtime"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the application (like `spin up`).
    Up(Box<UpArgs>),
    /// Run each component's build command (like `spin build`).
    Build {
        /// Path to spin.toml.
        #[arg(long = "from", short = 'f', default_value = "spin.toml")]
        from: PathBuf,
    },
    /// List each component's imports and exports.
    Inspect {
        /// Path to spin.toml.
        #[arg(long = "from", short = 'f', default_value = "spin.toml")]
        from: PathBuf,
    },
}

/// `edgehost up`'s options.
#[derive(Args)]
struct UpArgs {
    /// Build the components first (like `spin up --build`).
    #[arg(long)]
    build: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// Where state (key-value store, SQLite, generated secrets) lives
    /// [default: <manifest dir>/.spin].
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Path to spin.toml.
    #[arg(long = "from", short = 'f', default_value = "spin.toml")]
    from: PathBuf,
    /// Spin runtime config file (variables, key-value stores, SQLite databases).
    #[arg(long)]
    runtime_config_file: Option<PathBuf>,
    /// Memory limit of one component instance: bytes (as Spin takes it) or e.g. 128MiB
    /// [default: the runtime config's max_instance_memory, else 128MiB].
    #[arg(long, value_parser = parse_bytes)]
    max_instance_memory: Option<usize>,
    /// Deadline of one request, e.g. 30s or 500ms; a component still running then is
    /// interrupted and the request answers 504.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// Component instances that may run at once; beyond, requests answer 503.
    #[arg(long, default_value_t = edgehost::DEFAULT_MAX_CONCURRENT_INSTANCES)]
    max_concurrent_instances: usize,
    /// Connections one client (peer address) may hold open; 0 lifts the cap (behind a
    /// proxy every client has the proxy's address).
    #[arg(long, default_value_t = edgehost::Admission::default().connections_per_client)]
    max_connections_per_client: usize,
    /// Instance slots one client may hold at once; 0 lifts the cap.
    #[arg(long, default_value_t = edgehost::Admission::default().instances_per_client)]
    max_instances_per_client: usize,
    /// Do not run the periodic jobs of jobs.toml (start-up jobs still run).
    #[arg(long)]
    no_scheduler: bool,
    /// Refuse to start while local defaults are left in place (open registration,
    /// generated secrets, webhook_allow_http, loopback URLs), and list them.
    #[arg(long)]
    production: bool,
    /// Where the embedded chat relay's internal events endpoint listens (loopback);
    /// the app's `relay_url` defaults to it. Default 127.0.0.1:3101, or a free port
    /// when another edgehost holds that one.
    #[cfg(feature = "platform")]
    #[arg(long)]
    relay_internal_listen: Option<SocketAddr>,
    /// Do not run the media server (nginx-rtmp), even where rtmp_ingest_base and
    /// playback_hls_base point at this machine.
    #[cfg(feature = "platform")]
    #[arg(long)]
    no_media: bool,
    /// Serve only this component (repeatable; like `spin up --component-id`): the
    /// others' routes answer 404 and their jobs are not run. Default: all.
    #[arg(long = "component-id", short = 'c')]
    component_ids: Vec<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Build { from } => edgehost::build_components(&from),
        Cmd::Inspect { from } => inspect(&from).await,
        Cmd::Up(args) => up(*args).await,
    }
}

/// `edgehost inspect`: each component's imports and exports.
async fn inspect(from: &Path) -> Result<()> {
    for (id, imports, exports) in edgehost::component_interfaces(from).await? {
        println!("{id}");
        for i in imports {
            println!("  import {i}");
        }
        for e in exports {
            println!("  export {e}");
        }
    }
    Ok(())
}

/// `edgehost up`: serves the app until Ctrl-C.
async fn up(args: UpArgs) -> Result<()> {
    if args.build {
        edgehost::build_components(&args.from)?;
    }
    let server = edgehost::Server::start(options(args)?).await?;
    announce(&server);
    tokio::signal::ctrl_c().await?;
    eprintln!("edgehost: shutting down");
    server.shutdown().await
}

/// The server's options from the command line.
fn options(args: UpArgs) -> Result<edgehost::Options> {
    #[allow(unused_mut)]
    let mut options = edgehost::Options {
        manifest: args.from,
        listen: args.listen,
        state_dir: args.state_dir,
        runtime_config_file: args.runtime_config_file,
        log_requests: true,
        max_instance_memory: args.max_instance_memory,
        request_timeout: args.request_timeout,
        max_concurrent_instances: args.max_concurrent_instances,
        admission: edgehost::Admission {
            connections_per_client: args.max_connections_per_client,
            instances_per_client: args.max_instances_per_client,
            ..Default::default()
        },
        scheduler: !args.no_scheduler,
        mode: if args.production {
            edgehost::Mode::Production
        } else {
            edgehost::Mode::Local
        },
        components: args.component_ids,
        ..Default::default()
    };
    #[cfg(feature = "platform")]
    {
        options.chat_relay = Some(chat_relay(args.relay_internal_listen)?);
        // The media server (nginx-rtmp, through media-agent) where the ingest and HLS
        // variables point, when both are loopback; said and left off when it cannot start
        // (nginx or its RTMP module missing, a port taken).
        // Its replays go to the S3-compatible bucket MEDIA_STORE_* names, if any (as for
        // the standalone media-agent; docs/replays.md, "Object store").
        options.media = match args.no_media {
            true => None,
            false => {
                let mut media = edgehost::MediaServer::default();
                media.config.media_store =
                    media_agent::config::media_store_from_env(|name| std::env::var(name).ok())
                        .map_err(|e| anyhow::anyhow!("media server: {e}"))?;
                Some(media)
            }
        };
    }
    Ok(options)
}

/// The chat relay: sockets on this port, its internal endpoint on its own loopback
/// listener. Its limits, origins and Redis come from the environment (ALLOWED_ORIGINS,
/// MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, TRUST_PROXY, QUEUE_CAPACITY, REDIS_URL), as for
/// the standalone relay.
#[cfg(feature = "platform")]
fn chat_relay(internal_listen: Option<SocketAddr>) -> Result<edgehost::ChatRelay> {
    let mut relay = edgehost::ChatRelay::default();
    match internal_listen {
        Some(addr) => relay.internal_listen = addr,
        None => relay.any_port_if_taken = true,
    }
    relay
        .config
        .read_env(|name| std::env::var(name).ok())
        .map_err(|e| anyhow::anyhow!("chat relay: {e}"))?;
    Ok(relay)
}

/// Says where the app, the relay and the media server listen, and the routes.
fn announce(server: &edgehost::Server) {
    let base = format!("http://{}", server.local_addr());
    println!("Serving {} on {base}", server.app_name());
    #[cfg(feature = "platform")]
    announce_platform(server);
    println!("Available Routes:");
    for (route, component) in server.routes() {
        println!("  {component}: {base}{route}");
    }
    // Last, where it is read: the routes list would push it out of sight.
    #[cfg(feature = "platform")]
    if let Some(why) = server.media_failure() {
        println!(
            "\nMEDIA SERVER OFF: RTMP ingest and HLS playback do not work. The API's \
             rtmpUrl ({}/<streamKey>) points where nothing listens; broadcasts show \
             ingest.server.state \"down\" with this reason:\n  {why}\n",
            server.variable("rtmp_ingest_base").unwrap_or_default(),
        );
    }
}

/// Where the embedded chat relay and media server listen.
#[cfg(feature = "platform")]
fn announce_platform(server: &edgehost::Server) {
    if let (Some(relay), Some(internal)) = (server.relay(), server.relay_internal_addr()) {
        let config = relay.config();
        println!(
            "Chat relay: ws://{}/ws/streams/:id/chat (internal http://{internal}; Redis {}; origins {})",
            server.local_addr(),
            if config.redis_url.is_some() {
                "on"
            } else {
                "off"
            },
            config.allowed_origins.describe(),
        );
        let relay_url = server.variable("relay_url").unwrap_or_default();
        if relay_url.trim_end_matches('/') != format!("http://{internal}") {
            println!("  relay_url is set to {relay_url}: the API pushes events there");
        }
    }
    if let Some(media) = server.media() {
        println!(
            "Media server: publish to {}/<streamKey> (RTMP on {}), HLS at {}/<streamId>/index.m3u8 (on {})",
            server.variable("rtmp_ingest_base").unwrap_or_default(),
            media.rtmp_addr(),
            server.variable("playback_hls_base").unwrap_or_default(),
            media.http_addr(),
        );
    }
}

fn parse_bytes(text: &str) -> Result<usize, String> {
    edgehost::parse_bytes(text).map_err(|e| format!("{e:#}"))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    edgehost::parse_duration(text).map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed_and_up_reads_its_flags() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "edgehost",
            "up",
            "--listen",
            "127.0.0.1:4000",
            "--no-scheduler",
            "-c",
            "api",
        ])
        .unwrap();
        let Cmd::Up(args) = cli.command else {
            panic!("not `up`");
        };
        let options = options(*args).unwrap();
        assert_eq!(options.listen, "127.0.0.1:4000".parse().unwrap());
        assert!(!options.scheduler);
        assert_eq!(options.components, ["api"]);
        assert_eq!(options.manifest, PathBuf::from("spin.toml"));
    }

    #[cfg(feature = "platform")]
    #[test]
    fn up_embeds_the_relay_and_the_media_server_unless_told_not_to() {
        let parse = |extra: &[&str]| {
            let cli = Cli::try_parse_from(["edgehost", "up"].iter().chain(extra)).unwrap();
            let Cmd::Up(args) = cli.command else {
                panic!("not `up`");
            };
            options(*args).unwrap()
        };
        let options = parse(&["--relay-internal-listen", "127.0.0.1:4101"]);
        let relay = options.chat_relay.expect("the relay is embedded");
        assert_eq!(relay.internal_listen, "127.0.0.1:4101".parse().unwrap());
        assert!(!relay.any_port_if_taken);
        assert!(options.media.is_some());
        let options = parse(&["--no-media"]);
        assert!(options.chat_relay.expect("the relay").any_port_if_taken);
        assert!(options.media.is_none());
    }
}
