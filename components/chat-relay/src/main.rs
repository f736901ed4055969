//! `chat-relay`: the WebSocket chat relay as its own process.
//!
//! Configuration (flags override the environment):
//! `--listen ADDR` / `LISTEN` (public: `/ws/...`; default `127.0.0.1:3001`),
//! `--internal-listen ADDR` / `INTERNAL_LISTEN` (the internal events endpoint and
//! `/metrics`; default `127.0.0.1:3101`, keep it off the public network),
//! `--api-url URL` / `API_URL` (default `http://127.0.0.1:3000`), `--base-url URL` /
//! `BASE_URL` (the platform's public URL: its origin may open sockets),
//! `--redis-url URL` / `REDIS_URL`, `JWT_SECRET` and `RELAY_SECRET` (required),
//! `ALLOWED_ORIGINS`, `MAX_CONNECTIONS`, `MAX_CONNECTIONS_PER_IP`, `TRUST_PROXY`,
//! `QUEUE_CAPACITY`, `API_CA_FILE` (see `docs/chat.md`).

use anyhow::{Context, Result, anyhow, bail};
use chat_relay::{
    Config, DEFAULT_INTERNAL_LISTEN, DEFAULT_LISTEN, Relay, is_environment_variable, serve,
};

/// An environment variable; only those listed in `chat_relay::ENVIRONMENT` (which the
/// deployment manifests are checked against) may be read.
fn env(name: &str) -> Option<String> {
    assert!(
        is_environment_variable(name),
        "{name} is missing from chat_relay::ENVIRONMENT"
    );
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

const USAGE: &str = "usage: chat-relay [--listen ADDR] [--internal-listen ADDR] [--api-url URL] \
[--base-url URL] [--redis-url URL]\n\
env: LISTEN, INTERNAL_LISTEN, API_URL, BASE_URL, JWT_SECRET (required), RELAY_SECRET (required), \
REDIS_URL, ALLOWED_ORIGINS, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, TRUST_PROXY, QUEUE_CAPACITY, \
API_CA_FILE";

#[tokio::main]
async fn main() -> Result<()> {
    let mut listen = env("LISTEN").unwrap_or_else(|| DEFAULT_LISTEN.into());
    let mut internal_listen =
        env("INTERNAL_LISTEN").unwrap_or_else(|| DEFAULT_INTERNAL_LISTEN.into());
    let mut api_url = env("API_URL").unwrap_or_else(|| "http://127.0.0.1:3000".into());
    let mut base_url = env("BASE_URL");
    let mut redis_url = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value()?,
            "--internal-listen" => internal_listen = value()?,
            "--api-url" => api_url = value()?,
            "--base-url" => base_url = Some(value()?),
            "--redis-url" => redis_url = Some(value()?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other} (see --help)"),
        }
    }
    let jwt_secret = env("JWT_SECRET").context("JWT_SECRET is required")?;
    let relay_secret = env("RELAY_SECRET").context("RELAY_SECRET is required")?;
    let mut config = Config::new(&api_url, &jwt_secret, &relay_secret);
    config.read_env(env).map_err(|e| anyhow!(e))?;
    if redis_url.is_some() {
        config.redis_url = redis_url;
    }
    if let Some(base) = &base_url {
        config
            .allowed_origins
            .allow(base)
            .map_err(|e| anyhow!("BASE_URL: {e}"))?;
    }
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let internal = tokio::net::TcpListener::bind(&internal_listen)
        .await
        .with_context(|| format!("cannot listen on {internal_listen} (INTERNAL_LISTEN)"))?;
    if !internal.local_addr()?.ip().is_loopback() {
        eprintln!(
            "chat-relay: the internal endpoint listens on {internal_listen}, not loopback: \
             keep that address off the public network"
        );
    }
    let redis = config.redis_url.is_some();
    let origins = config.allowed_origins.describe();
    let server = serve(Relay::new(config), listener, internal)?;
    println!(
        "chat-relay listening on http://{} (internal http://{}; API {api_url}; Redis {}; origins {origins})",
        server.local_addr(),
        server.internal_addr(),
        if redis { "on" } else { "off" }
    );
    tokio::signal::ctrl_c().await?;
    eprintln!("chat-relay: shutting down");
    server.shutdown().await;
    Ok(())
}
