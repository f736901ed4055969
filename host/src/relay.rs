//! The chat relay embedded in edgehost: its sockets (`/ws/...`) on edgehost's public port,
//! its internal events endpoint on a loopback listener of its own, which becomes the app's
//! `relay_url` unless the user set one.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::{Context, Result};

use crate::warn;

/// How edgehost embeds the chat relay (see [`crate::Options::chat_relay`]).
#[derive(Clone, Debug)]
pub struct ChatRelay {
    /// Where the relay's internal endpoint (`/internal/...`, `/metrics`, `/healthz`)
    /// listens: loopback; port 0 picks a free port. Default `127.0.0.1:3101`.
    pub internal_listen: SocketAddr,
    /// When `internal_listen` is taken (another edgehost on this machine), listen on a
    /// free port instead and say so: set when nobody chose the address.
    pub any_port_if_taken: bool,
    /// The relay's settings (limits, origins, Redis). edgehost fills in `api_url` (its
    /// own address), `jwt_secret` and `relay_secret` (the app's variables), and adds the
    /// app's `base_url` origin and its own address to `allowed_origins`.
    pub config: chat_relay::Config,
}

impl Default for ChatRelay {
    fn default() -> Self {
        ChatRelay {
            internal_listen: chat_relay::DEFAULT_INTERNAL_LISTEN
                .parse()
                .unwrap_or(SocketAddr::from((Ipv4Addr::LOCALHOST, 3101))),
            any_port_if_taken: false,
            config: chat_relay::Config::new("", "", ""),
        }
    }
}

impl ChatRelay {
    /// The relay with its internal endpoint on a free loopback port (tests).
    pub fn ephemeral() -> ChatRelay {
        ChatRelay {
            internal_listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            ..ChatRelay::default()
        }
    }
}

/// Binds the internal listener; its URL is the default of the app's `relay_url`.
pub(crate) async fn bind(opts: &ChatRelay) -> Result<chat_relay::Embedded> {
    if !opts.internal_listen.ip().is_loopback() {
        warn(format_args!(
            "the chat relay's internal endpoint listens on {}, not loopback",
            opts.internal_listen
        ));
    }
    match chat_relay::Embedded::bind(opts.internal_listen).await {
        Err(e) if opts.any_port_if_taken && e.kind() == std::io::ErrorKind::AddrInUse => {
            let any = SocketAddr::new(opts.internal_listen.ip(), 0);
            let embedded = chat_relay::Embedded::bind(any).await.with_context(|| {
                format!("cannot listen on {any} for the chat relay's internal endpoint")
            })?;
            warn(format_args!(
                "{} is taken (another edgehost?): the chat relay's internal endpoint listens \
                 on {} instead (choose one with --relay-internal-listen)",
                opts.internal_listen,
                embedded.internal_addr()
            ));
            Ok(embedded)
        }
        result => result.with_context(|| {
            format!(
                "cannot listen on {} for the chat relay's internal endpoint (another \
                 edgehost? choose another address with --relay-internal-listen)",
                opts.internal_listen
            )
        }),
    }
}

/// Starts the relay for the running app: it calls the API at edgehost's own address with
/// the app's secrets, and accepts sockets from the app's `base_url` origin and from
/// edgehost's own address.
pub(crate) fn start(
    embedded: &chat_relay::Embedded,
    opts: &ChatRelay,
    variables: &HashMap<String, String>,
    public: SocketAddr,
) {
    let var = |name: &str| variables.get(name).cloned().unwrap_or_default();
    let reachable = reachable(public);
    let mut config = opts.config.clone();
    config.api_url = format!("http://{reachable}");
    config.jwt_secret = var("jwt_secret");
    config.relay_secret = var("relay_secret");
    for origin in own_origins(public) {
        let _ = config.allowed_origins.allow(&origin);
    }
    let base_url = var("base_url");
    if !base_url.is_empty()
        && let Err(e) = config.allowed_origins.allow(&base_url)
    {
        warn(format_args!("chat relay: base_url is not an origin: {e}"));
    }
    embedded.start(config);
}

/// Where edgehost's own clients reach it: an unspecified listen address means loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port()))
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    }
}

/// The origins of pages edgehost serves itself: its address, and `localhost` on a
/// loopback (or any) address.
fn own_origins(public: SocketAddr) -> Vec<String> {
    let reachable = reachable(public);
    let mut origins = vec![format!("http://{reachable}")];
    if reachable.ip().is_loopback() {
        origins.push(format!("http://localhost:{}", public.port()));
    }
    origins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_origins_name_the_address_browsers_use() {
        assert_eq!(
            own_origins("127.0.0.1:3000".parse().unwrap()),
            ["http://127.0.0.1:3000", "http://localhost:3000"]
        );
        assert_eq!(
            own_origins("0.0.0.0:8080".parse().unwrap()),
            ["http://127.0.0.1:8080", "http://localhost:8080"]
        );
        assert_eq!(
            own_origins("192.0.2.10:3000".parse().unwrap()),
            ["http://192.0.2.10:3000"]
        );
        assert_eq!(
            own_origins("[::1]:3000".parse().unwrap()),
            ["http://[::1]:3000", "http://localhost:3000"]
        );
    }
}
