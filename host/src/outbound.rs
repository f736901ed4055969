//! Outbound HTTP: `allowed_outbound_hosts` with Spin's syntax and matching rules
//! (`scheme://host[:port]`; `*` for any scheme, any port, or as a `*.` subdomain prefix;
//! port ranges `a..b`; CIDR blocks; default ports 80/443; `self` for the app itself;
//! `{{ variable }}` templates), and the `wasi:http` hooks that enforce it together with
//! the runtime config's blocked networks (`network_policy.rs`).
//!
//! Requests are sent by edgehost itself rather than by wasmtime's default sender, so that
//! the address checked against the blocked networks is the address connected to: the
//! host name is resolved once, blocked addresses are dropped, and the TCP connection goes
//! to one of the remaining ones (no second lookup, so no DNS-rebinding window). One
//! request, one response: redirects are never followed, as `wasi:http` specifies.

use std::future::Ready;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use crate::network_policy::BlockedNetworks;
use crate::outbound_pool::{ConnectionPool, PoolKey};
use crate::variables::Template;

/// The hosts a component may call.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    hosts: Vec<AllowedHost>,
}

#[derive(Debug, Clone, PartialEq)]
struct AllowedHost {
    /// `None`: any scheme.
    scheme: Option<String>,
    host: HostPattern,
    port: PortPattern,
}

#[derive(Debug, Clone, PartialEq)]
enum HostPattern {
    Any,
    /// `*.example.com` is stored as ".example.com".
    Subdomain(String),
    Domain(String),
    Ip(IpAddr),
    Cidr(IpAddr, u8),
    ToSelf,
}

#[derive(Debug, Clone, PartialEq)]
enum PortPattern {
    Any,
    Port(u16),
    Range(u16, u16),
}

impl AllowedHosts {
    /// Parses a component's `allowed_outbound_hosts`, resolving templates against the
    /// application variables. Entries resolving to "", "http://" or "https://" are
    /// skipped, as in Spin.
    pub fn parse(
        entries: &[String],
        variables: &std::collections::HashMap<String, String>,
    ) -> Result<AllowedHosts> {
        ensure!(
            !(entries.len() == 1 && entries[0] == "insecure:allow-all"),
            "'insecure:allow-all' is not allowed - use '*://*:*' instead"
        );
        let mut hosts = Vec::new();
        for entry in entries {
            let template = Template::parse(entry)?;
            let resolved = template.resolve(variables)?;
            if !template.is_literal() && matches!(resolved.as_str(), "" | "http://" | "https://") {
                continue;
            }
            let host = AllowedHost::parse(&resolved).with_context(|| {
                if template.is_literal() {
                    format!("invalid allowed_outbound_hosts entry {entry:?}")
                } else {
                    format!("allowed_outbound_hosts entry {entry:?} resolves to {resolved:?}")
                }
            })?;
            hosts.push(host);
        }
        Ok(AllowedHosts { hosts })
    }

    /// Whether a request to `scheme://host[:port]` is allowed.
    pub fn allows(&self, scheme: &str, host: &str, port: Option<u16>) -> bool {
        self.hosts.iter().any(|h| h.allows(scheme, host, port))
    }

    /// Whether requests to the application itself (relative URLs, `self.alt`) are
    /// allowed: as in Spin, by an `http` or `https` entry for `self` (or `*`).
    pub fn allows_self(&self) -> bool {
        self.hosts.iter().any(|h| {
            h.scheme
                .as_deref()
                .is_none_or(|s| s == "http" || s == "https")
                && matches!(h.host, HostPattern::Any | HostPattern::ToSelf)
        })
    }
}

impl AllowedHost {
    fn parse(url: &str) -> Result<AllowedHost> {
        let url = url.trim();
        let Some((scheme, rest)) = url.split_once("://") else {
            bail!(
                "{url:?} does not contain a scheme (e.g. 'http://' or '*://'); \
                 hosts must be in the form <scheme>://<host>[:<port>]"
            );
        };
        let scheme = match scheme {
            "*" => None,
            s if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic()) => {
                Some(s.to_ascii_lowercase())
            }
            s => bail!("invalid scheme {s:?}"),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = split_host_port(rest)?;
        if let Some(p) = port {
            ensure!(!p.contains('/'), "{url:?} has a path but is not allowed to");
        }
        let port = match port {
            None => match default_port(scheme.as_deref()) {
                Some(p) => PortPattern::Port(p),
                None => bail!(
                    "no port was provided and the scheme {scheme:?} has no known default port"
                ),
            },
            Some("*") => PortPattern::Any,
            Some(p) => match p.split_once("..") {
                Some((a, b)) => PortPattern::Range(
                    a.parse()
                        .with_context(|| format!("invalid port range {p:?}"))?,
                    b.parse()
                        .with_context(|| format!("invalid port range {p:?}"))?,
                ),
                None => {
                    PortPattern::Port(p.parse().with_context(|| format!("invalid port {p:?}"))?)
                }
            },
        };
        Ok(AllowedHost {
            scheme,
            host: HostPattern::parse(host)?,
            port,
        })
    }

    fn allows(&self, scheme: &str, host: &str, port: Option<u16>) -> bool {
        if self.scheme.as_deref().is_some_and(|s| s != scheme) {
            return false;
        }
        let port_ok = match self.port {
            PortPattern::Any => true,
            PortPattern::Port(p) => port.or(default_port(Some(scheme))) == Some(p),
            PortPattern::Range(a, b) => port
                .or(default_port(Some(scheme)))
                .is_some_and(|p| (a..b).contains(&p)),
        };
        port_ok && self.host.allows(host)
    }
}

fn split_host_port(s: &str) -> Result<(&str, Option<&str>)> {
    if let Some(v6) = s.strip_prefix('[') {
        let Some((addr, tail)) = v6.split_once(']') else {
            bail!("unterminated IPv6 address in {s:?}");
        };
        return match tail {
            "" => Ok((addr, None)),
            t => match t.strip_prefix(':') {
                Some(p) => Ok((addr, Some(p))),
                None => bail!("unexpected {t:?} after IPv6 address"),
            },
        };
    }
    Ok(match s.rsplit_once(':') {
        Some((h, p)) => (h, if p.is_empty() { None } else { Some(p) }),
        None => (s, None),
    })
}

impl HostPattern {
    fn parse(host: &str) -> Result<HostPattern> {
        let host = host.trim().to_ascii_lowercase();
        Ok(match host.as_str() {
            "*" => HostPattern::Any,
            "self" | "self.alt" => HostPattern::ToSelf,
            "" => bail!("empty host"),
            h => {
                if let Some(domain) = h.strip_prefix("*.") {
                    ensure!(
                        !domain.contains('*'),
                        "wildcards are allowed only as prefixes"
                    );
                    HostPattern::Subdomain(format!(".{domain}"))
                } else if h.contains('*') {
                    bail!("wildcards are allowed only as subdomains (`*.example.com`)")
                } else if let Ok(ip) = h.parse::<IpAddr>() {
                    HostPattern::Ip(ip)
                } else if let Some((net, bits)) = h.split_once('/') {
                    let net: IpAddr = net
                        .parse()
                        .map_err(|_| anyhow::anyhow!("must not include a path"))?;
                    let bits: u8 = bits.parse().context("invalid CIDR prefix length")?;
                    let max = if net.is_ipv4() { 32 } else { 128 };
                    ensure!(bits <= max, "invalid CIDR prefix length {bits}");
                    HostPattern::Cidr(net, bits)
                } else {
                    HostPattern::Domain(h.to_string())
                }
            }
        })
    }

    fn allows(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.to_ascii_lowercase();
        match self {
            HostPattern::Any => true,
            HostPattern::Subdomain(suffix) => host.ends_with(suffix.as_str()),
            HostPattern::Domain(d) => *d == host,
            HostPattern::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
            HostPattern::Cidr(net, bits) => host
                .parse::<IpAddr>()
                .is_ok_and(|h| in_cidr(h, *net, *bits)),
            HostPattern::ToSelf => false,
        }
    }
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(bits.min(32)))
                .unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(bits.min(128)))
                .unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

fn default_port(scheme: Option<&str>) -> Option<u16> {
    match scheme? {
        "http" => Some(80),
        "https" => Some(443),
        "postgres" => Some(5432),
        "mysql" => Some(3306),
        "redis" => Some(6379),
        "mqtt" => Some(1883),
        _ => None,
    }
}

/// Per-instance `wasi:http` hooks: enforce the component's allowed hosts and the blocked
/// networks, and send requests addressed to the app itself (no authority, or `self.alt`)
/// to our listener.
#[derive(Clone)]
pub struct OutboundHooks {
    pub component: Arc<str>,
    pub allowed: Arc<AllowedHosts>,
    pub self_addr: SocketAddr,
    pub blocked: Arc<BlockedNetworks>,
    /// The app's idle connections.
    pub pool: Arc<ConnectionPool>,
}

impl WasiHttpHooks for OutboundHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                    ),
                    HttpError,
                >,
            > + Send,
    > {
        let uri = request.uri().clone();
        let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
        let host = uri.host().unwrap_or("");
        let is_self = host.is_empty() || host.eq_ignore_ascii_case("self.alt");
        let allowed = if is_self {
            self.allowed.allows_self()
        } else {
            self.allowed.allows(&scheme, host, uri.port_u16())
        };
        if !allowed {
            let target = if is_self {
                "self".to_string()
            } else {
                format!(
                    "{scheme}://{}",
                    uri.authority().map(|a| a.as_str()).unwrap_or("")
                )
            };
            eprintln!(
                "edgehost: component `{}` tried to call {target}, which is not in its \
                 allowed_outbound_hosts",
                self.component
            );
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        let destination = if is_self {
            Destination::Addr(self.self_addr)
        } else {
            match Destination::of(&uri, &scheme) {
                Ok(d) => d,
                Err(e) => return Box::new(async move { Err(e) }),
            }
        };
        if is_self {
            // The app itself: plain HTTP to our own listener.
            let addr = self.self_addr.to_string();
            let mut parts = uri.into_parts();
            parts.scheme = Some(http::uri::Scheme::HTTP);
            parts.authority = addr.parse().ok();
            if parts.path_and_query.is_none() {
                parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
            }
            match http::Uri::from_parts(parts) {
                Ok(u) => *request.uri_mut() = u,
                Err(_) => return Box::new(async { Err(HttpError::HttpRequestUriInvalid) }),
            }
            if let Ok(v) = http::HeaderValue::from_str(&addr) {
                request.headers_mut().insert(http::header::HOST, v);
            }
        }
        _ = fut;
        let hooks = self.clone();
        Box::new(async move {
            let (resp, io) = send(request, options, destination, &hooks).await?;
            Ok((resp, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

/// Where a request goes: a host name or IP literal and port (with TLS or not), or a fixed
/// address (the application itself).
enum Destination {
    Host { host: String, port: u16, tls: bool },
    Addr(SocketAddr),
}

impl Destination {
    fn pool_key(&self) -> PoolKey {
        match self {
            Destination::Host { host, port, tls } => PoolKey::Host {
                host: host.to_ascii_lowercase(),
                port: *port,
                tls: *tls,
            },
            Destination::Addr(addr) => PoolKey::Addr(*addr),
        }
    }

    fn of(uri: &http::Uri, scheme: &str) -> Result<Destination, HttpError> {
        let tls = match scheme {
            "https" => true,
            "http" => false,
            _ => return Err(HttpError::HttpProtocolError),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or(HttpError::HttpRequestUriInvalid)?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Destination::Host { host, port, tls })
    }
}

/// wasmtime's defaults for requests that set no timeouts.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Sends the request over HTTP/1.1 (TLS for https) on an idle pooled connection to the
/// same destination, or else on a new one: resolved, blocked addresses dropped, connected
/// to a remaining one.
async fn send(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    destination: Destination,
    hooks: &OutboundHooks,
) -> Result<(http::Response<WasiBody>, Ready<Result<(), HttpError>>), HttpError> {
    let option = |pick: fn(&RequestOptions) -> Option<Duration>| {
        options.as_ref().and_then(pick).unwrap_or(DEFAULT_TIMEOUT)
    };
    let connect_timeout = option(|o| o.connect_timeout);
    let first_byte_timeout = option(|o| o.first_byte_timeout);
    let between_bytes_timeout = option(|o| o.between_bytes_timeout);

    // The origin server gets the path and query only (absolute form is for proxies).
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| HttpError::HttpRequestUriInvalid)?;

    let key = destination.pool_key();
    let pool = &hooks.pool;
    let request = match pool.take(&key) {
        None => request,
        Some(mut sender) => {
            let sent = sender.try_send_request(request);
            match tokio::time::timeout(first_byte_timeout, sent).await {
                Err(_) => return Err(HttpError::ConnectionReadTimeout),
                Ok(Ok(response)) => {
                    pool.give_back(key, sender);
                    return Ok(answered(response, between_bytes_timeout));
                }
                // The server closed the idle connection before it took the request: it
                // goes out on a new one.
                Ok(Err(mut failed)) => failed
                    .take_message()
                    .ok_or_else(|| HttpError::from(failed.into_error()))?,
            }
        }
    };
    let connect = connect(&destination, &hooks.blocked, &hooks.component);
    let (mut sender, connection) = tokio::time::timeout(connect_timeout, connect)
        .await
        .map_err(|_| HttpError::ConnectionTimeout)??;
    // The connection runs in its own task as long as it stays open (in the pool too).
    tokio::spawn(connection);
    let response = tokio::time::timeout(first_byte_timeout, sender.send_request(request))
        .await
        .map_err(|_| HttpError::ConnectionReadTimeout)?
        .map_err(HttpError::from)?;
    pool.give_back(key, sender);
    Ok(answered(response, between_bytes_timeout))
}

/// The response, its body failing when no data arrives for `idle`, and the exchange's I/O
/// future, which has nothing to report: errors after the head reach the guest through
/// the body.
fn answered(
    response: http::Response<Incoming>,
    idle: Duration,
) -> (http::Response<WasiBody>, Ready<Result<(), HttpError>>) {
    let response = response.map(|incoming| {
        TimedBody {
            incoming,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
        }
        .boxed_unsync()
    });
    (response, std::future::ready(Ok(())))
}

/// Resolves the destination, drops blocked addresses, connects to a remaining one (with
/// TLS when asked) and starts HTTP/1.1 on the connection.
async fn connect(
    destination: &Destination,
    blocked: &BlockedNetworks,
    component: &str,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<WasiBody>,
        hyper::client::conn::http1::Connection<hyper_util::rt::TokioIo<Box<dyn Stream>>, WasiBody>,
    ),
    HttpError,
> {
    let (mut addrs, tls) = match destination {
        Destination::Addr(a) => (vec![*a], None),
        Destination::Host { host, port, tls } => {
            (resolve(host, *port).await?, tls.then_some(host.as_str()))
        }
    };
    let removed = blocked.remove_blocked(&mut addrs);
    if addrs.is_empty() && !removed.is_empty() {
        eprintln!(
            "edgehost: component `{component}`: every address of the destination is \
             blocked by the runtime config's block_networks ({removed:?})"
        );
        return Err(HttpError::DestinationIpProhibited);
    }
    let tcp = TcpStream::connect(&addrs[..])
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => HttpError::ConnectionRefused,
            _ => HttpError::Connect(e),
        })?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = match tls {
        None => Box::new(tcp),
        Some(host) => {
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|_| HttpError::HttpRequestUriInvalid)?;
            let config = TLS_CONFIG
                .clone()
                .map_err(|e| HttpError::InternalError(Some(e)))?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(HttpError::Tls)?;
            Box::new(tls)
        }
    };
    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(HttpError::from)
}

async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, HttpError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| dns_error())?
        .collect();
    if addrs.is_empty() {
        return Err(dns_error());
    }
    Ok(addrs)
}

fn dns_error() -> HttpError {
    HttpError::DnsError {
        rcode: Some("address not available".into()),
        info_code: Some(0),
    }
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Stream for T {}

/// TLS with the webpki roots (what wasmtime's default sender trusts), on `ring`.
static TLS_CONFIG: LazyLock<Result<Arc<rustls::ClientConfig>, String>> = LazyLock::new(|| {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
        .map_err(|e| format!("TLS client configuration: {e}"))
});

/// A response body that fails when no data arrives for `idle`.
struct TimedBody {
    incoming: Incoming,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let next = tokio::time::Instant::now() + self.idle;
                self.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(HttpError::from(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn hosts(list: &[&str]) -> AllowedHosts {
        let vars = HashMap::from([
            (
                "music_url".to_string(),
                "https://music.example.com".to_string(),
            ),
            ("empty".to_string(), String::new()),
        ]);
        let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        AllowedHosts::parse(&list, &vars).unwrap()
    }

    #[test]
    fn matching_follows_spin() {
        let h = hosts(&[
            "https://*.example.com",
            "http://127.0.0.1:8080",
            "*://localhost:*",
        ]);
        assert!(h.allows("https", "api.example.com", None));
        assert!(h.allows("https", "api.example.com", Some(443)));
        assert!(!h.allows("https", "api.example.com", Some(8443)));
        assert!(!h.allows("https", "example.com", None));
        assert!(!h.allows("http", "api.example.com", None));
        assert!(h.allows("http", "127.0.0.1", Some(8080)));
        assert!(!h.allows("http", "127.0.0.1", Some(8081)));
        assert!(!h.allows("http", "127.0.0.1", None));
        assert!(h.allows("http", "localhost", Some(1234)));
        assert!(h.allows("https", "LOCALHOST", None));
        assert!(!h.allows("http", "127.0.0.2", Some(8080)));
    }

    #[test]
    fn templates_defaults_and_ranges() {
        let h = hosts(&[
            "{{ music_url }}",
            "{{ empty }}",
            "http://example.org",
            "*://*:8000..8002",
        ]);
        assert!(h.allows("https", "music.example.com", None));
        assert!(!h.allows("http", "music.example.com", None));
        assert!(h.allows("http", "example.org", Some(80)));
        assert!(!h.allows("https", "example.org", None));
        assert!(h.allows("http", "anything", Some(8001)));
        assert!(!h.allows("http", "anything", Some(8002)));
        assert!(hosts(&["http://self"]).allows_self());
        assert!(hosts(&["https://self"]).allows_self());
        assert!(!hosts(&["http://localhost"]).allows_self());
        assert!(hosts(&["*://*:*"]).allows("https", "x.y", Some(1)));
        assert!(hosts(&["http://[::1]:80"]).allows("http", "[::1]", None));
        let cidr = hosts(&["http://10.1.0.0/16:*"]);
        assert!(cidr.allows("http", "10.1.2.3", Some(5)));
        assert!(!cidr.allows("http", "10.2.0.1", Some(5)));
    }

    #[test]
    fn rejects_bad_entries() {
        let vars = HashMap::new();
        for bad in [
            "example.com",
            "*",
            "https://a.*.com",
            "https://x/path",
            "ftp://x",
        ] {
            assert!(
                AllowedHosts::parse(&[bad.to_string()], &vars).is_err(),
                "{bad}"
            );
        }
    }
}
