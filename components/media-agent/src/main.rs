//! `media-agent`: the media server (nginx with its RTMP module) and its agent as one
//! process, beside the platform.
//!
//! Environment: `PLATFORM_URL` (default `http://127.0.0.1:3000`), `MEDIA_SECRET`
//! (required: the platform's `media_secret`), `RTMP_LISTEN` (default `0.0.0.0:1935`),
//! `HTTP_LISTEN` (HLS, default `0.0.0.0:8080`), `RTMP_APP` (default `live`), `HLS_PREFIX`
//! (default `/hls`), `STATE_DIR` (default `./media-state`), `NGINX_BIN`,
//! `NGINX_RTMP_MODULE` (`none` when built in), `FFMPEG_BIN`, `ALLOW_PRIVATE_RESTREAMS`.

use anyhow::{Context, Result, anyhow, bail};
use media_agent::{Config, MediaServer, is_environment_variable};
use tokio::signal::unix::{SignalKind, signal};

/// An environment variable; only those listed in `media_agent::ENVIRONMENT` (which the
/// deployment manifests are checked against) may be read.
fn env(name: &str) -> Option<String> {
    assert!(
        is_environment_variable(name),
        "{name} is missing from media_agent::ENVIRONMENT"
    );
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

const USAGE: &str = "usage: media-agent\n\
env: PLATFORM_URL, MEDIA_SECRET (required), RTMP_LISTEN, HTTP_LISTEN, RTMP_APP, HLS_PREFIX, \
STATE_DIR, NGINX_BIN, NGINX_RTMP_MODULE, FFMPEG_BIN, ALLOW_PRIVATE_RESTREAMS, TRANSCODE_CORES, \
TRANSCODE_PRESET, TRANSCODE_ENCODER";

#[tokio::main]
async fn main() -> Result<()> {
    if let Some(arg) = std::env::args().nth(1) {
        if arg == "-h" || arg == "--help" {
            println!("{USAGE}");
            return Ok(());
        }
        bail!("unknown argument {arg} (see --help)");
    }
    let platform_url = env("PLATFORM_URL").unwrap_or_else(|| "http://127.0.0.1:3000".into());
    let media_secret = env("MEDIA_SECRET").context("MEDIA_SECRET is required")?;
    let mut config = Config::new(&platform_url, &media_secret);
    config.read_env(env).map_err(|e| anyhow!(e))?;
    let app = config.rtmp_app.clone();
    let prefix = config.hls_prefix.clone();
    let mut server = MediaServer::start(config).await?;
    server.report_running();
    println!(
        "media-agent: RTMP ingest rtmp://{}/{app}/<stream key>, HLS http://{}{prefix}/<stream id>/index.m3u8, platform {platform_url}",
        server.rtmp_addr(),
        server.http_addr(),
    );
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("media-agent: shutting down");
    server.shutdown().await;
    Ok(())
}
