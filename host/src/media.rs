//! The media server embedded in edgehost (nginx with its RTMP module, driven by
//! `media-agent`), started beside the app as the chat relay is: it listens where the app's
//! `rtmp_ingest_base` and `playback_hls_base` point when both are loopback addresses (so
//! setting those two variables moves it), asks the app on every publish with its
//! `media_secret`, keeps its state and segments under the state dir, and stops with
//! edgehost.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};

/// How edgehost runs the media server (see [`crate::Options::media`]).
#[derive(Clone, Debug)]
pub struct MediaServer {
    /// Free loopback ports, with `rtmp_ingest_base` and `playback_hls_base` pointed at
    /// them unless the user set those (tests, and instances side by side).
    pub ephemeral: bool,
    /// A media server that cannot start fails edgehost's start (tests); otherwise edgehost
    /// says why and serves the app without it (`edgehost up`).
    pub required: bool,
    /// The agent's settings: tools, segment and update intervals. edgehost fills in the
    /// app's URL and `media_secret`, the listen addresses, the RTMP application, the HLS
    /// path, the state dir and `restream_allow_private`.
    pub config: media_agent::Config,
}

impl Default for MediaServer {
    fn default() -> Self {
        MediaServer {
            ephemeral: false,
            required: false,
            config: media_agent::Config::new("http://127.0.0.1:3000", "unset"),
        }
    }
}

impl MediaServer {
    /// On free loopback ports, and required (tests).
    pub fn ephemeral() -> MediaServer {
        MediaServer {
            ephemeral: true,
            required: true,
            ..MediaServer::default()
        }
    }
}

/// Free loopback ports held until the media server binds them: the application loads
/// (compiles, migrates) in between, and a port let go even briefly may be taken by anyone
/// (an outbound connection's source port included). [`start`] hands them to the media
/// server, which takes them over.
pub(crate) struct HeldPorts {
    listeners: Vec<std::net::TcpListener>,
}

/// With [`MediaServer::ephemeral`]: the two variables, pointed at free loopback ports
/// (edgehost's own defaults, which any value the user set replaces), and those ports held.
pub(crate) fn ephemeral_defaults() -> Result<(Vec<(String, String)>, HeldPorts)> {
    let rtmp = free_loopback_port()?;
    let http = free_loopback_port()?;
    let defaults = vec![
        (
            "rtmp_ingest_base".to_string(),
            format!("rtmp://127.0.0.1:{}/live", rtmp.local_addr()?.port()),
        ),
        (
            "playback_hls_base".to_string(),
            format!("http://127.0.0.1:{}/hls", http.local_addr()?.port()),
        ),
    ];
    Ok((
        defaults,
        HeldPorts {
            listeners: vec![rtmp, http],
        },
    ))
}

fn free_loopback_port() -> Result<std::net::TcpListener> {
    std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("cannot find a free loopback port")
}

/// Where the media server listens and what it serves, read from the app's variables:
/// `None` (with the reason) when they do not point at this machine.
fn plan(
    variables: &HashMap<String, String>,
    opts: &MediaServer,
    state_dir: &Path,
    app: SocketAddr,
) -> Result<std::result::Result<media_agent::Config, String>> {
    let var = |name: &str| variables.get(name).map(String::as_str).unwrap_or_default();
    let (_, rtmp_host, rtmp_port, rtmp_path) =
        split_url(var("rtmp_ingest_base"), &["rtmp", "rtmps"], 1935)
            .map_err(|e| anyhow!("rtmp_ingest_base: {e}"))?;
    let (http_scheme, http_host, http_port, http_path) =
        split_url(var("playback_hls_base"), &["http", "https"], 80)
            .map_err(|e| anyhow!("playback_hls_base: {e}"))?;
    let (Some(rtmp_ip), Some(http_ip)) = (loopback(&rtmp_host), loopback(&http_host)) else {
        return Ok(Err(format!(
            "rtmp_ingest_base ({}) and playback_hls_base ({}) are not both on this machine",
            var("rtmp_ingest_base"),
            var("playback_hls_base")
        )));
    };
    if http_scheme != "http" {
        bail!("playback_hls_base: the local media server serves plain http, not {http_scheme}");
    }
    let app_name = rtmp_path.trim_matches('/');
    if app_name.is_empty() || app_name.contains('/') {
        bail!(
            "rtmp_ingest_base must name one RTMP application as its path (rtmp://host:1935/live), not {:?}",
            rtmp_path
        );
    }
    let media_secret = variables
        .get("media_secret")
        .filter(|s| !s.is_empty())
        .context("the media server needs the app's media_secret variable")?;
    let mut config = opts.config.clone();
    config.platform_url = format!("http://{}", reachable(app));
    config.media_secret = media_secret.clone();
    config.rtmp_listen = SocketAddr::new(rtmp_ip, rtmp_port);
    config.http_listen = SocketAddr::new(http_ip, http_port);
    config.rtmp_app = app_name.to_string();
    config.hls_prefix = http_path.trim_end_matches('/').to_string();
    config.state_dir = state_dir.join("media");
    config.allow_private_restreams =
        matches!(var("restream_allow_private").trim(), "true" | "1" | "yes");
    Ok(Ok(config))
}

/// What became of the media server at start-up.
pub(crate) enum Started {
    Running(media_agent::MediaServer),
    /// The variables point elsewhere: another machine's media server takes the ingest.
    Elsewhere,
    /// It cannot start (and is not required): why, and the app to tell.
    Failed(String, media_agent::platform::Platform),
}

impl Started {
    /// Tells the app whether its media server runs, once the app can take it (after its
    /// start-up jobs): the media server's own reports from then on, or that it is down and
    /// why (its broadcasts then show it beside their `rtmpUrl`).
    pub(crate) fn report(&mut self) {
        match self {
            Started::Running(server) => server.report_running(),
            Started::Elsewhere => {}
            Started::Failed(why, platform) => {
                let (why, platform) = (why.clone(), platform.clone());
                tokio::spawn(async move {
                    media_agent::report_down(&platform, &why, 10).await;
                });
            }
        }
    }
}

/// Starts the media server for the running app at `app`. When the variables point
/// elsewhere it is not started; when it cannot start and is not required, edgehost says
/// why and serves the app without it ([`Started::report`] tells the app).
pub(crate) async fn start(
    opts: &MediaServer,
    variables: &HashMap<String, String>,
    state_dir: &Path,
    app: SocketAddr,
    held: Option<HeldPorts>,
) -> Result<Started> {
    let config = match plan(variables, opts, state_dir, app)? {
        Ok(config) => config,
        Err(elsewhere) => {
            eprintln!("edgehost: media server not started here: {elsewhere}");
            return Ok(Started::Elsewhere);
        }
    };
    let platform =
        media_agent::platform::Platform::new(&config.platform_url, &config.media_secret)?;
    let held = held.map(|h| h.listeners).unwrap_or_default();
    match media_agent::MediaServer::start_holding(config, held).await {
        Ok(server) => Ok(Started::Running(server)),
        Err(e) if !opts.required => {
            let why = format!("{e:#}");
            eprintln!(
                "edgehost: the media server cannot start, so RTMP ingest and HLS playback are off: {why}"
            );
            Ok(Started::Failed(why, platform))
        }
        Err(e) => Err(e.context("the media server cannot start")),
    }
}

/// `scheme://host[:port][/path]` (one of `schemes`) as (scheme, host, port, path), the
/// port defaulting to `port`.
fn split_url(
    url: &str,
    schemes: &[&str],
    port: u16,
) -> std::result::Result<(String, String, u16, String), String> {
    let (scheme, rest) = url
        .trim()
        .split_once("://")
        .filter(|(scheme, _)| schemes.contains(scheme))
        .ok_or_else(|| format!("{url:?} is not a {}:// URL", schemes.join(":// or ")))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let (host, port_text) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{url:?} has an unclosed IPv6 address"))?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((host, p)) => (host, Some(p)),
            None => (authority, None),
        },
    };
    let port = match port_text {
        Some(p) => p
            .parse()
            .map_err(|_| format!("{url:?} has an invalid port"))?,
        None => port,
    };
    Ok((
        scheme.to_string(),
        host.to_ascii_lowercase(),
        port,
        path.to_string(),
    ))
}

/// The loopback address a host names, if it names one.
fn loopback(host: &str) -> Option<IpAddr> {
    if host == "localhost" {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    host.parse::<IpAddr>().ok().filter(IpAddr::is_loopback)
}

/// Where edgehost's own clients reach it: an unspecified listen address means loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
    } else {
        addr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(rtmp: &str, hls: &str) -> HashMap<String, String> {
        [
            ("rtmp_ingest_base", rtmp),
            ("playback_hls_base", hls),
            ("media_secret", "s3cret"),
            ("restream_allow_private", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn it_listens_where_the_variables_point_when_they_are_loopback() {
        let app: SocketAddr = "0.0.0.0:3000".parse().unwrap();
        let config = plan(
            &vars("rtmp://127.0.0.1:1935/live", "http://localhost:8080/hls/"),
            &MediaServer::default(),
            Path::new("/state"),
            app,
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.rtmp_listen, "127.0.0.1:1935".parse().unwrap());
        assert_eq!(config.http_listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(
            (config.rtmp_app.as_str(), config.hls_prefix.as_str()),
            ("live", "/hls")
        );
        assert_eq!(config.platform_url, "http://127.0.0.1:3000");
        assert_eq!(config.media_secret, "s3cret");
        assert_eq!(config.state_dir, Path::new("/state/media"));
        assert!(config.allow_private_restreams);
        // Moved by the variables, default ports included.
        let config = plan(
            &vars("rtmp://[::1]/ingest", "http://127.0.0.1:9090/"),
            &MediaServer::default(),
            Path::new("/state"),
            app,
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.rtmp_listen, "[::1]:1935".parse().unwrap());
        assert_eq!(config.rtmp_app, "ingest");
        assert_eq!(config.hls_prefix, "");
    }

    #[test]
    fn elsewhere_it_is_not_started_and_a_bad_address_is_an_error() {
        let app: SocketAddr = "127.0.0.1:3000".parse().unwrap();
        let remote = plan(
            &vars("rtmp://ingest.example/live", "https://cdn.example/hls"),
            &MediaServer::default(),
            Path::new("/s"),
            app,
        )
        .unwrap();
        assert!(remote.is_err());
        for (rtmp, hls) in [
            ("http://127.0.0.1/live", "http://127.0.0.1:8080/hls"),
            ("rtmp://127.0.0.1:1935", "http://127.0.0.1:8080/hls"),
            ("rtmp://127.0.0.1:1935/a/b", "http://127.0.0.1:8080/hls"),
            ("rtmp://127.0.0.1:x/live", "http://127.0.0.1:8080/hls"),
        ] {
            assert!(
                plan(
                    &vars(rtmp, hls),
                    &MediaServer::default(),
                    Path::new("/s"),
                    app
                )
                .is_err(),
                "{rtmp}"
            );
        }
    }
}
