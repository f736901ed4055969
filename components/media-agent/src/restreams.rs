//! Restreams: one ffmpeg per target, copying the live stream from the media server to the
//! target (no re-encoding). Each target reports its state to the platform with every
//! update; its error text is chosen from fixed sentences, because ffmpeg's own messages
//! quote its URLs: the target's, and with it the broadcaster's key on that service, and
//! the source's, which is the stream's key here (nginx knows the stream by its key).
//! Neither URL is ever logged.
//!
//! ffmpeg never connects to a target itself. The agent resolves the target's host once,
//! checks every address, and connects to the address it checked (a name that answers
//! otherwise a moment later, DNS rebinding, changes nothing); for `rtmps://` it makes the
//! TLS connection, verified against the system's roots and the target's name, before a
//! byte of the stream is sent. ffmpeg pushes plain RTMP into that connection through a
//! relay on loopback, with the target's own name in its `tcUrl`.

use crate::address::{self, Target as Destination};
use domain::media::RestreamState;
use domain::media::protocol::{RestreamReport, RestreamTarget};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How soon an errored target is tried again while the stream is live.
pub const RETRY: Duration = Duration::from_secs(10);
/// How soon a target that failed right away is tried again (the first few times): the
/// stream may not have reached the media server yet.
const EARLY_RETRY: Duration = Duration::from_secs(2);
/// A target that failed within this long of its start failed early.
const EARLY: Duration = Duration::from_secs(5);
/// How long a target's name may take to resolve, and its address to accept a connection
/// (TLS handshake included).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The sentences a target's error is one of (besides those of [`address::parse_target`]).
pub const UNRESOLVED: &str = "the target's host name could not be resolved";
pub const NOT_ALLOWED: &str = "the target's address is not allowed";
/// Whatever kept an RTMP server from answering: nothing listening, a filtered port, a
/// server of another protocol. One sentence for all, so that restreams tell nothing of
/// the ports of a host.
pub const UNREACHABLE: &str = "no RTMP server answered at the target's address and port";
pub const UNVERIFIED: &str =
    "the target's TLS certificate could not be verified for its host name; nothing was sent";
pub const TLS_FAILED: &str = "the secure connection to the target failed; nothing was sent";
pub const REFUSED: &str = "the target refused the stream (check its key)";
pub const CLOSED: &str = "the target closed the connection";
pub const SOURCE_FAILED: &str = "the stream could not be read from the media server";

type Io<'a, T> = Pin<Box<dyn Future<Output = std::io::Result<T>> + Send + 'a>>;

/// How restreams reach their targets: name resolution and TCP connections. The system's
/// by default; tests substitute their own (a resolver that answers differently each time,
/// a dialer that never leaves loopback).
pub trait Network: Send + Sync {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> Io<'a, Vec<IpAddr>>;
    fn connect(&self, addr: SocketAddr) -> Io<'static, TcpStream>;
}

/// The system's resolver and sockets.
pub struct SystemNetwork;

impl Network for SystemNetwork {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> Io<'a, Vec<IpAddr>> {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host, port))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    }

    fn connect(&self, addr: SocketAddr) -> Io<'static, TcpStream> {
        Box::pin(TcpStream::connect(addr))
    }
}

/// What every target of the agent shares.
#[derive(Clone)]
pub struct Context {
    pub ffmpeg: PathBuf,
    /// `rtmp://<loopback>:<port>/<ingest app>`: the stream is `<this>/<stream key>`.
    pub source_base: String,
    pub allow_private: bool,
    pub network: Arc<dyn Network>,
    /// Verifies `rtmps://` targets: the system's roots.
    pub tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("ffmpeg", &self.ffmpeg)
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

/// A TLS client trusting the system's certificate authorities (`/etc/ssl/certs`).
pub fn system_tls() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        eprintln!(
            "media-agent: no trusted certificate authorities found (install ca-certificates): \
             every rtmps:// restream will fail"
        );
    }
    tls_trusting(roots)
}

/// A TLS client trusting `roots`.
pub fn tls_trusting(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Status {
    state: RestreamState,
    error: Option<String>,
}

struct Target {
    url: String,
    status: Arc<Mutex<Status>>,
    task: JoinHandle<()>,
}

impl Drop for Target {
    /// Stops the target: the task's ffmpeg is killed when the task is dropped.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The targets of one live stream. Dropping it stops them all.
pub struct RestreamSet {
    context: Arc<Context>,
    /// Where ffmpeg reads the stream: it names the stream key.
    source: String,
    targets: HashMap<String, Target>,
}

impl RestreamSet {
    /// The targets of the stream nginx knows as `key`.
    pub fn new(context: Arc<Context>, key: &str) -> RestreamSet {
        RestreamSet {
            source: format!("{}/{key}", context.source_base),
            context,
            targets: HashMap::new(),
        }
    }

    /// Makes the running targets those of `wanted`: starts the new ones (after `delay`),
    /// stops the removed ones, restarts one whose URL changed.
    pub fn reconcile(&mut self, wanted: &[RestreamTarget], delay: Duration) {
        self.targets
            .retain(|id, t| wanted.iter().any(|w| &w.id == id && w.url == t.url));
        for target in wanted {
            if self.targets.contains_key(&target.id) {
                continue;
            }
            let status = Arc::new(Mutex::new(Status {
                state: RestreamState::Connecting,
                error: None,
            }));
            let task = tokio::spawn(run(
                self.context.clone(),
                self.source.clone(),
                target.url.clone(),
                status.clone(),
                delay,
            ));
            self.targets.insert(
                target.id.clone(),
                Target {
                    url: target.url.clone(),
                    status,
                    task,
                },
            );
        }
    }

    /// Stops every target.
    pub fn stop_all(&mut self) {
        self.targets.clear();
    }

    /// Each target's state, for the platform.
    pub fn reports(&self) -> Vec<RestreamReport> {
        let mut reports: Vec<RestreamReport> = self
            .targets
            .iter()
            .map(|(id, t)| {
                let status = lock(&t.status).clone();
                RestreamReport {
                    id: id.clone(),
                    state: status.state,
                    error: status.error,
                }
            })
            .collect();
        reports.sort_by(|a, b| a.id.cmp(&b.id));
        reports
    }
}

fn lock(status: &Mutex<Status>) -> std::sync::MutexGuard<'_, Status> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

fn set(status: &Mutex<Status>, state: RestreamState, error: Option<String>) {
    *lock(status) = Status { state, error };
}

/// One target, until its task is dropped: check the address, run ffmpeg, report, retry.
async fn run(
    context: Arc<Context>,
    source: String,
    url: String,
    status: Arc<Mutex<Status>>,
    delay: Duration,
) {
    tokio::time::sleep(delay).await;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let started = Instant::now();
        match check_target(&context, &url).await {
            Err(why) => set(&status, RestreamState::Errored, Some(why.into())),
            Ok((target, addr)) => {
                set(&status, RestreamState::Connecting, None);
                let why = push(&context, &source, &target, addr, &status).await;
                set(&status, RestreamState::Errored, Some(why));
            }
        }
        let wait = if started.elapsed() < EARLY && attempts <= 3 {
            EARLY_RETRY
        } else {
            RETRY
        };
        tokio::time::sleep(wait).await;
    }
}

/// Whether the target may be connected to: an rtmp(s) URL whose host resolves only to
/// public addresses (unless private ones are allowed). Answers the address to connect
/// to: the one checked, never the name again.
pub async fn check_target(
    context: &Context,
    url: &str,
) -> Result<(Destination, SocketAddr), &'static str> {
    let target = Destination::parse(url)?;
    let addresses: Vec<IpAddr> = match target.host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => {
            let lookup = context.network.resolve(&target.host, target.port);
            match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                Ok(Ok(found)) => found,
                _ => return Err(UNRESOLVED),
            }
        }
    };
    let Some(first) = addresses.first() else {
        return Err(UNRESOLVED);
    };
    if !context.allow_private && addresses.iter().any(|ip| address::is_forbidden(*ip)) {
        return Err(NOT_ALLOWED);
    }
    let addr = SocketAddr::new(*first, target.port);
    Ok((target, addr))
}

/// The target's side of a push: connected (to the checked address) and, for `rtmps://`,
/// verified; or why not, in a sentence.
enum Upstream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

async fn connect_upstream(
    context: &Context,
    target: &Destination,
    addr: SocketAddr,
) -> Result<Upstream, &'static str> {
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, context.network.connect(addr)).await;
    let Ok(Ok(tcp)) = connected else {
        return Err(UNREACHABLE);
    };
    let _ = tcp.set_nodelay(true);
    if !target.secure {
        return Ok(Upstream::Plain(tcp));
    }
    let name =
        rustls::pki_types::ServerName::try_from(target.host.clone()).map_err(|_| UNVERIFIED)?;
    let connector = tokio_rustls::TlsConnector::from(context.tls.clone());
    match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp)).await {
        Ok(Ok(tls)) => Ok(Upstream::Tls(Box::new(tls))),
        Ok(Err(e)) => {
            let certificate = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|e| {
                    matches!(
                        e,
                        rustls::Error::InvalidCertificate(_)
                            | rustls::Error::NoCertificatesPresented
                    )
                });
            Err(if certificate { UNVERIFIED } else { TLS_FAILED })
        }
        Err(_) => Err(UNREACHABLE),
    }
}

/// Relays ffmpeg's one connection (to `listener`) to the target; what went wrong on the
/// target's side goes to `failure`.
async fn relay(
    context: Arc<Context>,
    listener: TcpListener,
    target: Destination,
    addr: SocketAddr,
    failure: Arc<Mutex<Option<&'static str>>>,
) {
    let Ok((mut ffmpeg, _)) = listener.accept().await else {
        return;
    };
    drop(listener);
    let _ = ffmpeg.set_nodelay(true);
    let outcome = match connect_upstream(&context, &target, addr).await {
        Ok(Upstream::Plain(mut tcp)) => tokio::io::copy_bidirectional(&mut ffmpeg, &mut tcp).await,
        Ok(Upstream::Tls(mut tls)) => {
            tokio::io::copy_bidirectional(&mut ffmpeg, tls.as_mut()).await
        }
        Err(why) => {
            *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            return;
        }
    };
    drop(outcome);
}

/// Runs ffmpeg until it exits; answers why, in words safe to show.
async fn push(
    context: &Arc<Context>,
    source: &str,
    target: &Destination,
    addr: SocketAddr,
    status: &Mutex<Status>,
) -> String {
    let Ok(listener) = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await else {
        return "the media server could not start the restream".into();
    };
    let Ok(relay_addr) = listener.local_addr() else {
        return "the media server could not start the restream".into();
    };
    let failure: Arc<Mutex<Option<&'static str>>> = Arc::default();
    let relaying = tokio::spawn(relay(
        context.clone(),
        listener,
        target.clone(),
        addr,
        failure.clone(),
    ));
    // Aborted with this future (a removed target), or once ffmpeg is done.
    struct AbortOnDrop(JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _relaying = AbortOnDrop(relaying);
    let into_relay = format!("rtmp://{relay_addr}{}", target.rest);
    let mut command = crate::child::command(&context.ffmpeg, libc::SIGKILL);
    command
        .args(["-nostdin", "-hide_banner", "-loglevel", "error"])
        .args(["-progress", "pipe:1", "-rw_timeout", "15000000"])
        .args(["-i", source, "-c", "copy", "-f", "flv"])
        .args(["-rtmp_tcurl", &target.tc_url()])
        .arg(&into_relay)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(_) => return "ffmpeg could not be started".into(),
    };
    let errors = crate::child::stderr_tail(&mut child, 20, str::to_string);
    let mut was_live = false;
    if let Some(stdout) = child.stdout.take() {
        let mut lines = BufReader::new(stdout).lines();
        let mut sent = 0u64;
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(size) = line
                .strip_prefix("total_size=")
                .and_then(|v| v.trim().parse::<u64>().ok())
            {
                if size > sent && sent > 0 && !was_live {
                    was_live = true;
                    set(status, RestreamState::Live, None);
                }
                sent = sent.max(size);
            }
        }
    }
    let _ = child.wait().await;
    let errors = errors.await.unwrap_or_default().join("\n");
    if let Some(why) = *failure.lock().unwrap_or_else(|e| e.into_inner()) {
        return why.into();
    }
    describe_failure(&errors, source, was_live)
}

/// Why ffmpeg stopped, in a fixed sentence: its output is read, never repeated. A
/// complaint naming `source` (ffmpeg names the input it failed on) is the media server's
/// side, whatever the words: the target was not even reached. Before the stream went
/// live, anything but the target's refusal is [`UNREACHABLE`]: what a port that is closed,
/// filtered or speaks another protocol does to ffmpeg is not told apart.
pub fn describe_failure(stderr: &str, source: &str, was_live: bool) -> String {
    let text = stderr.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    let sentence = if !source.is_empty() && stderr.contains(source) {
        SOURCE_FAILED
    } else if has(&[
        "authentication",
        "unauthorized",
        "badname",
        "publish.denied",
        "server error",
        "forbidden",
    ]) {
        REFUSED
    } else if was_live {
        CLOSED
    } else {
        UNREACHABLE
    };
    sentence.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "rtmp://a.rtmp.youtube.com/live2/abcd-efgh-ijkl-mnop";
    const SOURCE: &str = "rtmp://127.0.0.1:1935/live/0123456789abcdef0123456789abcdef";

    #[test]
    fn failures_are_described_without_the_target() {
        let cases = [
            (format!("{URL}: Connection refused"), false, UNREACHABLE),
            (
                format!(
                    "[tcp @ 0x55] Failed to resolve hostname a.rtmp.youtube.com: Name or service not known\n{URL}: Input/output error"
                ),
                false,
                UNREACHABLE,
            ),
            (
                format!(
                    "[rtmp @ 0x1] Server error: Authentication Failed.\n{URL}: Operation not permitted"
                ),
                false,
                "the target refused the stream (check its key)",
            ),
            (
                format!(
                    "av_interleaved_write_frame(): Broken pipe\nError writing trailer of {URL}: Broken pipe"
                ),
                true,
                "the target closed the connection",
            ),
            (
                "Conversion failed!".to_string(),
                true,
                "the target closed the connection",
            ),
        ];
        for (stderr, live, expected) in cases {
            let described = describe_failure(&stderr, SOURCE, live);
            assert_eq!(described, expected, "{stderr}");
            assert!(!described.contains("youtube"));
            assert!(!described.contains("abcd"));
        }
        // Whatever a port that is not an RTMP server does, one sentence.
        for stderr in [
            format!("{URL}: something new"),
            String::new(),
            format!("[rtmp @ 0x1] RTMP handshake failed\n{URL}: Invalid data found"),
            format!("{URL}: Connection reset by peer"),
            format!("{URL}: Connection timed out"),
        ] {
            assert_eq!(
                describe_failure(&stderr, SOURCE, false),
                UNREACHABLE,
                "{stderr}"
            );
        }
    }

    #[test]
    fn failures_of_the_source_are_described_without_its_key() {
        // ffmpeg 5.1's words when the media server is away, and when it stops mid-stream.
        for (stderr, live) in [
            (
                format!(
                    "[tcp @ 0x55] Connection to tcp://127.0.0.1:1935?tcp_nodelay=0 failed: \
                     Connection refused\n[rtmp @ 0x56] Cannot open connection \
                     tcp://127.0.0.1:1935?tcp_nodelay=0\n{SOURCE}: Connection refused"
                ),
                false,
            ),
            (format!("{SOURCE}: Input/output error"), true),
        ] {
            let described = describe_failure(&stderr, SOURCE, live);
            assert_eq!(
                described, "the stream could not be read from the media server",
                "{stderr}"
            );
            assert!(!described.contains("0123"), "{described}");
        }
    }

    fn context(allow_private: bool, network: Arc<dyn Network>) -> Context {
        Context {
            ffmpeg: PathBuf::from("/nonexistent/ffmpeg"),
            source_base: "rtmp://127.0.0.1:1/live".into(),
            allow_private,
            network,
            tls: tls_trusting(rustls::RootCertStore::empty()),
        }
    }

    /// A resolver that answers `first` once and loopback afterwards (DNS rebinding), and
    /// a dialer that reaches only `to` (loopback) whatever address it is given.
    struct Rebinding {
        first: IpAddr,
        resolved: Mutex<u32>,
        dialed: Mutex<Vec<SocketAddr>>,
        to: Option<SocketAddr>,
    }

    impl Network for Rebinding {
        fn resolve<'a>(&'a self, _host: &'a str, _port: u16) -> Io<'a, Vec<IpAddr>> {
            let mut n = self.resolved.lock().unwrap();
            *n += 1;
            let answer = if *n == 1 {
                self.first
            } else {
                IpAddr::from([127, 0, 0, 1])
            };
            Box::pin(async move { Ok(vec![answer]) })
        }

        fn connect(&self, addr: SocketAddr) -> Io<'static, TcpStream> {
            self.dialed.lock().unwrap().push(addr);
            let to = self.to;
            Box::pin(async move {
                match to {
                    Some(to) => TcpStream::connect(to).await,
                    None => Err(std::io::ErrorKind::ConnectionRefused.into()),
                }
            })
        }
    }

    fn rebinding(first: [u8; 4], to: Option<SocketAddr>) -> Arc<Rebinding> {
        Arc::new(Rebinding {
            first: IpAddr::from(first),
            resolved: Mutex::new(0),
            dialed: Mutex::default(),
            to,
        })
    }

    #[tokio::test]
    async fn targets_are_checked_before_any_connection() {
        let system = context(false, Arc::new(SystemNetwork));
        for (url, expected) in [
            ("rtmp://127.0.0.1:1935/app/key", NOT_ALLOWED),
            ("rtmp://[::ffff:10.0.0.1]/app/key", NOT_ALLOWED),
            // `localhost` resolves (from /etc/hosts) to loopback.
            ("rtmp://localhost/app/key", NOT_ALLOWED),
            (
                "http://8.8.8.8/app",
                "only rtmp:// and rtmps:// targets are supported",
            ),
        ] {
            assert_eq!(
                check_target(&system, url).await.err(),
                Some(expected),
                "{url}"
            );
        }
        let (target, addr) = check_target(&system, "rtmp://8.8.8.8/app/key")
            .await
            .unwrap();
        assert_eq!(addr, "8.8.8.8:1935".parse().unwrap());
        assert_eq!(target.tc_url(), "rtmp://8.8.8.8:1935/app");
        let lab = context(true, Arc::new(SystemNetwork));
        assert!(check_target(&lab, "rtmp://127.0.0.1/app/key").await.is_ok());
    }

    #[tokio::test]
    async fn a_name_that_rebinds_to_loopback_is_connected_at_the_address_checked() {
        // Checked, the name is public; asked again it would be loopback. The dialer
        // reaches nothing (8.8.8.8 is never contacted): it only records.
        let network = rebinding([8, 8, 8, 8], None);
        let ctx = context(false, network.clone());
        let (target, addr) = check_target(&ctx, "rtmp://rebind.example:1935/live/key")
            .await
            .unwrap();
        assert_eq!(addr, "8.8.8.8:1935".parse().unwrap());
        assert_eq!(
            connect_upstream(&ctx, &target, addr).await.err(),
            Some(UNREACHABLE)
        );
        assert_eq!(*network.resolved.lock().unwrap(), 1, "resolved once");
        assert_eq!(*network.dialed.lock().unwrap(), vec![addr]);
        // Had it resolved loopback at check time, it would not have been allowed.
        let ctx = context(false, rebinding([127, 0, 0, 1], None));
        assert_eq!(
            check_target(&ctx, "rtmp://rebind.example/live/key")
                .await
                .err(),
            Some(NOT_ALLOWED)
        );
    }

    /// A TLS server on loopback with a certificate for `name` signed by a CA of its own;
    /// answers its address, the CA, and what it received (decrypted) once closed.
    async fn tls_server(
        name: &str,
    ) -> (
        SocketAddr,
        rustls::pki_types::CertificateDer<'static>,
        tokio::sync::oneshot::Receiver<Vec<u8>>,
    ) {
        use tokio::io::AsyncReadExt;
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut received = Vec::new();
            if let Ok(mut tls) = acceptor.accept(tcp).await {
                let _ = tls.read_to_end(&mut received).await;
            }
            let _ = tx.send(received);
        });
        (addr, ca.der().clone(), rx)
    }

    #[tokio::test]
    async fn rtmps_targets_are_verified_against_the_roots_and_their_name() {
        use tokio::io::AsyncWriteExt;
        // Trusted roots without the server's CA (the system's): refused, nothing sent.
        let (server, _, received) = tls_server("target.example").await;
        let mut ctx = context(false, rebinding([8, 8, 8, 8], Some(server)));
        ctx.tls = system_tls();
        let (target, addr) = check_target(&ctx, "rtmps://target.example/app/key")
            .await
            .unwrap();
        assert_eq!(
            connect_upstream(&ctx, &target, addr).await.err(),
            Some(UNVERIFIED)
        );
        assert!(received.await.unwrap().is_empty());
        // Its CA trusted, but another name: refused.
        let (server, ca, _) = tls_server("other.example").await;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let mut ctx = context(false, rebinding([8, 8, 8, 8], Some(server)));
        ctx.tls = tls_trusting(roots);
        let (target, addr) = check_target(&ctx, "rtmps://target.example/app/key")
            .await
            .unwrap();
        assert_eq!(
            connect_upstream(&ctx, &target, addr).await.err(),
            Some(UNVERIFIED)
        );
        // Its CA trusted and its name: connected, and what is sent arrives.
        let (server, ca, received) = tls_server("target.example").await;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let mut ctx = context(false, rebinding([8, 8, 8, 8], Some(server)));
        ctx.tls = tls_trusting(roots);
        let (target, addr) = check_target(&ctx, "rtmps://target.example/app/key")
            .await
            .unwrap();
        let Ok(Upstream::Tls(mut tls)) = connect_upstream(&ctx, &target, addr).await else {
            panic!("a verified target connects");
        };
        tls.write_all(b"hello").await.unwrap();
        tls.shutdown().await.unwrap();
        drop(tls);
        assert_eq!(received.await.unwrap(), b"hello");
    }

    #[tokio::test]
    async fn a_refused_target_reports_errored_and_removal_stops_it() {
        let context = Arc::new(context(false, Arc::new(SystemNetwork)));
        let mut set = RestreamSet::new(context, "0123456789abcdef0123456789abcdef");
        let target = RestreamTarget {
            id: "t1".into(),
            url: "rtmp://10.0.0.1/app/secret-key".into(),
        };
        set.reconcile(std::slice::from_ref(&target), Duration::ZERO);
        assert_eq!(set.reports()[0].state, RestreamState::Connecting);
        let deadline = Instant::now() + Duration::from_secs(5);
        while set.reports()[0].state != RestreamState::Errored {
            assert!(Instant::now() < deadline, "{:?}", set.reports());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let report = &set.reports()[0];
        assert_eq!(report.error.as_deref(), Some(NOT_ALLOWED));
        // Same id and URL: kept; removed: stopped.
        set.reconcile(std::slice::from_ref(&target), Duration::ZERO);
        assert_eq!(set.reports()[0].state, RestreamState::Errored);
        set.reconcile(&[], Duration::ZERO);
        assert!(set.reports().is_empty());
    }
}
