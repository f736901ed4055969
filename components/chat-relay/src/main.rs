//! `chat-relay`: the WebSocket chat relay as its own process.
//!
//! Configuration (flags override the environment):
//! `--listen ADDR` / `LISTEN` (default `127.0.0.1:3001`), `--api-url URL` / `API_URL`
//! (default `http://127.0.0.1:3000`), `JWT_SECRET` and `RELAY_SECRET` (required),
//! `--redis-url URL` / `REDIS_URL` (optional), `QUEUE_CAPACITY` (default 256).

use anyhow::{Context, Result, bail};
use chat_relay::{Config, Relay, serve};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut listen = env("LISTEN").unwrap_or_else(|| "127.0.0.1:3001".into());
    let mut api_url = env("API_URL").unwrap_or_else(|| "http://127.0.0.1:3000".into());
    let mut redis_url = env("REDIS_URL");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value()?,
            "--api-url" => api_url = value()?,
            "--redis-url" => redis_url = Some(value()?),
            "-h" | "--help" => {
                println!(
                    "usage: chat-relay [--listen ADDR] [--api-url URL] [--redis-url URL]\n\
                     env: LISTEN, API_URL, JWT_SECRET (required), RELAY_SECRET (required), REDIS_URL, QUEUE_CAPACITY"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other} (see --help)"),
        }
    }
    let jwt_secret = env("JWT_SECRET").context("JWT_SECRET is required")?;
    let relay_secret = env("RELAY_SECRET").context("RELAY_SECRET is required")?;
    let mut config = Config::new(&api_url, &jwt_secret, &relay_secret);
    config.redis_url = redis_url;
    if let Some(q) = env("QUEUE_CAPACITY") {
        config.queue_capacity = q.parse().context("QUEUE_CAPACITY is a number")?;
    }
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let redis = config.redis_url.is_some();
    let server = serve(Relay::new(config), listener)?;
    println!(
        "chat-relay listening on http://{} (API {api_url}, Redis {})",
        server.local_addr(),
        if redis { "on" } else { "off" }
    );
    tokio::signal::ctrl_c().await?;
    eprintln!("chat-relay: shutting down");
    server.shutdown().await;
    Ok(())
}
