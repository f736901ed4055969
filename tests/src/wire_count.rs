//! A counting proxy for the platform's back ends. It stands between a host (edgehost or the
//! real Spin) and PostgreSQL or Redis on loopback, forwards every byte unchanged in both
//! directions, and counts what the host asks for:
//!
//! - PostgreSQL (plaintext only, as the suites' `sslmode=disable` URLs): new connections,
//!   simple-protocol queries by their text (Spin's pool sends its recycling batch, `CLOSE
//!   ALL; ... DISCARD SEQUENCES;`, as one, each time a guest opens a pooled connection),
//!   statements parsed (by their text), and round trips: each `Sync` or simple query is
//!   one exchange the host waits on, ended by the server's `ReadyForQuery`.
//! - Redis: commands by name, each one exchange ended by its reply.
//!
//! The time from each exchange's last message to its answer is summed per kind of
//! exchange: what the host waited on the back end, network and server together.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxied back end speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Postgres,
    Redis,
}

/// How many of each exchange, and the time waited on them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub count: u64,
    pub waited: Duration,
}

/// Everything counted since the proxy started (or the difference of two snapshots).
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Connections the host opened to the back end.
    pub connections: u64,
    /// Exchanges by kind: PostgreSQL `connect`, `simple` (a simple-protocol query),
    /// `prepare` (a `Sync` after a `Parse`), `execute` (after an `Execute`), `close` (a
    /// prepared statement closed: the client does not wait for its answer); Redis: the
    /// command's name.
    pub exchanges: BTreeMap<String, Tally>,
    /// PostgreSQL: the statements parsed and the simple queries, by their text.
    pub statements: BTreeMap<String, u64>,
}

impl Counts {
    /// What was counted after `before` was taken.
    pub fn since(&self, before: &Counts) -> Counts {
        let exchanges = self
            .exchanges
            .iter()
            .filter_map(|(kind, now)| {
                let then = before.exchanges.get(kind).cloned().unwrap_or_default();
                (now.count > then.count).then(|| {
                    let tally = Tally {
                        count: now.count - then.count,
                        waited: now.waited.saturating_sub(then.waited),
                    };
                    (kind.clone(), tally)
                })
            })
            .collect();
        let statements = self
            .statements
            .iter()
            .filter_map(|(text, n)| {
                let then = before.statements.get(text).copied().unwrap_or(0);
                (*n > then).then(|| (text.clone(), n - then))
            })
            .collect();
        Counts {
            connections: self.connections - before.connections,
            exchanges,
            statements,
        }
    }

    /// All exchanges but statements' closings (which the client does not wait on), and
    /// the time until their answers.
    pub fn waited(&self) -> Tally {
        self.exchanges
            .iter()
            .filter(|(kind, _)| kind.as_str() != "close")
            .fold(Tally::default(), |a, (_, t)| Tally {
                count: a.count + t.count,
                waited: a.waited + t.waited,
            })
    }

    /// The exchanges of `kind`.
    pub fn of(&self, kind: &str) -> Tally {
        self.exchanges.get(kind).cloned().unwrap_or_default()
    }
}

/// A running proxy; it stops with the test's runtime.
pub struct CountingProxy {
    pub addr: SocketAddr,
    counts: Arc<Mutex<Counts>>,
}

impl CountingProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(protocol: Protocol, upstream: SocketAddr) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("the proxy's address");
        let counts = Arc::new(Mutex::new(Counts::default()));
        let shared = counts.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counts = shared.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(protocol, client, server, counts).await;
                    }
                });
            }
        });
        CountingProxy { addr, counts }
    }

    /// A copy of what was counted so far.
    pub fn snapshot(&self) -> Counts {
        self.counts.lock().expect("the counts").clone()
    }

    /// `url` (a `postgres://` or `redis://` URL on loopback) with its port replaced by the
    /// proxy's.
    pub fn rewire(&self, url: &str) -> String {
        let port = self.addr.port();
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let host_start = rest.find('@').map_or(0, |at| at + 1);
        let after_host = rest[host_start..]
            .find(['/', '?'])
            .map_or(rest.len(), |i| host_start + i);
        let host = &rest[host_start..after_host];
        let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
        format!(
            "{scheme}://{}{name}:{port}{}",
            &rest[..host_start],
            &rest[after_host..]
        )
    }
}

/// An exchange sent and not yet answered: when its last message went out, and its kind.
type Pending = Arc<Mutex<VecDeque<(Instant, String)>>>;

async fn relay(
    protocol: Protocol,
    client: TcpStream,
    server: TcpStream,
    counts: Arc<Mutex<Counts>>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    counts.lock().expect("the counts").connections += 1;
    let pending: Pending = Arc::default();
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = {
        let (pending, counts) = (pending.clone(), counts.clone());
        async move {
            let mut reader = Requests::new(protocol);
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = client_read.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                // Counted before forwarding, so that the answer never arrives first.
                reader.read(&buf[..n], &pending, &counts);
                if server_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = server_write.shutdown().await;
        }
    };
    let answers = async move {
        let mut reader = Answers::new(protocol);
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = server_read.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
            reader.read(&buf[..n], &pending, &counts);
        }
        let _ = client_write.shutdown().await;
    };
    tokio::join!(requests, answers);
}

/// Reads the host's side of a connection message by message.
struct Requests {
    protocol: Protocol,
    buf: Vec<u8>,
    /// PostgreSQL: the startup message is still to come (it has no type byte).
    before_startup: bool,
    /// PostgreSQL: what was sent since the last `Sync`: a `Parse`, an `Execute`, a `Close`.
    parsed: bool,
    executed: bool,
    closed: bool,
}

impl Requests {
    fn new(protocol: Protocol) -> Requests {
        Requests {
            protocol,
            buf: Vec::new(),
            before_startup: true,
            parsed: false,
            executed: false,
            closed: false,
        }
    }

    fn read(&mut self, bytes: &[u8], pending: &Pending, counts: &Mutex<Counts>) {
        self.buf.extend_from_slice(bytes);
        loop {
            let consumed = match self.protocol {
                Protocol::Postgres => self.postgres_message(pending, counts),
                Protocol::Redis => redis_command(&self.buf, pending, counts),
            };
            match consumed {
                Some(n) => {
                    self.buf.drain(..n);
                }
                None => break,
            }
        }
    }

    /// Counts one frontend message at the start of the buffer; answers its length, or
    /// `None` while it is incomplete.
    fn postgres_message(&mut self, pending: &Pending, counts: &Mutex<Counts>) -> Option<usize> {
        if self.before_startup {
            let len = u32::from_be_bytes(self.buf.get(..4)?.try_into().ok()?) as usize;
            if self.buf.len() < len {
                return None;
            }
            let code = u32::from_be_bytes(self.buf.get(4..8)?.try_into().ok()?);
            // SSLRequest and GSSENCRequest are answered by one byte, not a message.
            assert!(
                code != 80877103 && code != 80877104,
                "the counting proxy reads plaintext PostgreSQL only (sslmode=disable)"
            );
            self.before_startup = false;
            sent(pending, "connect");
            return Some(len);
        }
        let kind = *self.buf.first()?;
        let len = u32::from_be_bytes(self.buf.get(1..5)?.try_into().ok()?) as usize;
        if self.buf.len() < 1 + len {
            return None;
        }
        let body = &self.buf[5..1 + len];
        match kind {
            b'Q' => {
                let text = c_string(body);
                record_statement(counts, &text);
                sent(pending, "simple");
            }
            b'P' => {
                // The statement's name, then its text.
                let name_end = body.iter().position(|b| *b == 0).unwrap_or(0);
                record_statement(counts, &c_string(&body[name_end + 1..]));
                self.parsed = true;
            }
            b'E' => self.executed = true,
            b'C' => self.closed = true,
            b'S' => {
                let kind = match (self.parsed, self.executed, self.closed) {
                    (true, _, _) => "prepare",
                    (_, true, _) => "execute",
                    (_, _, true) => "close",
                    _ => "sync",
                };
                sent(pending, kind);
                (self.parsed, self.executed, self.closed) = (false, false, false);
            }
            _ => {}
        }
        Some(1 + len)
    }
}

/// Reads the back end's side of a connection and ends each exchange at its answer.
struct Answers {
    protocol: Protocol,
    buf: Vec<u8>,
}

impl Answers {
    fn new(protocol: Protocol) -> Answers {
        Answers {
            protocol,
            buf: Vec::new(),
        }
    }

    fn read(&mut self, bytes: &[u8], pending: &Pending, counts: &Mutex<Counts>) {
        self.buf.extend_from_slice(bytes);
        loop {
            let (len, ends_exchange) = match self.protocol {
                Protocol::Postgres => {
                    let Some(kind) = self.buf.first().copied() else {
                        break;
                    };
                    let Some(len) = self
                        .buf
                        .get(1..5)
                        .and_then(|b| b.try_into().ok())
                        .map(u32::from_be_bytes)
                    else {
                        break;
                    };
                    (1 + len as usize, kind == b'Z')
                }
                Protocol::Redis => match resp_len(&self.buf, 0) {
                    Some(len) => (len, true),
                    None => break,
                },
            };
            if self.buf.len() < len {
                break;
            }
            self.buf.drain(..len);
            if ends_exchange {
                answered(pending, counts);
            }
        }
    }
}

fn sent(pending: &Pending, kind: &str) {
    pending
        .lock()
        .expect("the pending exchanges")
        .push_back((Instant::now(), kind.to_string()));
}

fn answered(pending: &Pending, counts: &Mutex<Counts>) {
    let Some((at, kind)) = pending.lock().expect("the pending exchanges").pop_front() else {
        return;
    };
    let mut counts = counts.lock().expect("the counts");
    let tally = counts.exchanges.entry(kind).or_default();
    tally.count += 1;
    tally.waited += at.elapsed();
}

fn record_statement(counts: &Mutex<Counts>, text: &str) {
    // Long statements are told apart by their opening.
    let key: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let key: String = key.chars().take(110).collect();
    *counts
        .lock()
        .expect("the counts")
        .statements
        .entry(key)
        .or_default() += 1;
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Counts one Redis command (an array of bulk strings) at the start of `buf`; answers its
/// length, or `None` while it is incomplete.
fn redis_command(buf: &[u8], pending: &Pending, counts: &Mutex<Counts>) -> Option<usize> {
    let len = resp_len(buf, 0)?;
    let name = first_bulk(buf).unwrap_or_else(|| "(inline)".to_string());
    record_statement(counts, &name);
    sent(pending, &name);
    Some(len)
}

/// The command name of a RESP array of bulk strings, upper case.
fn first_bulk(buf: &[u8]) -> Option<String> {
    let (_, after_header) = resp_line(buf, 0)?;
    let (line, start) = resp_line(buf, after_header)?;
    let len: usize = line.strip_prefix('$')?.parse().ok()?;
    Some(String::from_utf8_lossy(buf.get(start..start + len)?).to_uppercase())
}

/// The line at `at` (without its CRLF) and where the next one starts.
fn resp_line(buf: &[u8], at: usize) -> Option<(String, usize)> {
    let rest = buf.get(at..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((
        String::from_utf8_lossy(&rest[..end]).into_owned(),
        at + end + 2,
    ))
}

/// The length of one complete RESP2/RESP3 value starting at `at` (counted from 0), or
/// `None` while it is incomplete.
fn resp_len(buf: &[u8], at: usize) -> Option<usize> {
    let (line, mut next) = resp_line(buf, at)?;
    let (kind, rest) = line.split_at_checked(1)?;
    let n: i64 = rest.parse().unwrap_or(0);
    match kind {
        "$" | "=" | "!" => {
            if n < 0 {
                return Some(next);
            }
            let end = next + n as usize + 2;
            (buf.len() >= end).then_some(end)
        }
        "*" | "~" | ">" | "%" | "|" => {
            let items = if matches!(kind, "%" | "|") { 2 * n } else { n };
            for _ in 0..items.max(0) {
                next = resp_len(buf, next)?;
            }
            if kind == "|" {
                // An attribute precedes the value it describes.
                next = resp_len(buf, next)?;
            }
            Some(next)
        }
        _ => Some(next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp_values_are_measured_whole() {
        let reply = b"*2\r\n$3\r\nGET\r\n$-1\r\n+OK\r\n";
        assert_eq!(resp_len(reply, 0), Some(reply.len() - 5));
        assert_eq!(resp_len(b"*2\r\n$3\r\nGET\r\n$5\r\nab", 0), None);
        assert_eq!(resp_len(b"%1\r\n+a\r\n:1\r\n", 0), Some(12));
        assert_eq!(first_bulk(b"*1\r\n$4\r\nping\r\n").as_deref(), Some("PING"));
    }

    #[tokio::test]
    async fn urls_are_rewired_to_the_proxy() {
        let proxy = CountingProxy::start(Protocol::Redis, "127.0.0.1:9".parse().unwrap()).await;
        let port = proxy.addr.port();
        assert_eq!(
            proxy.rewire("postgres://u:p@127.0.0.1:5432/db?sslmode=disable"),
            format!("postgres://u:p@127.0.0.1:{port}/db?sslmode=disable")
        );
        assert_eq!(
            proxy.rewire("redis://127.0.0.1:6379/3"),
            format!("redis://127.0.0.1:{port}/3")
        );
    }
}
