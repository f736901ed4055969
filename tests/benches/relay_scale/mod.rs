//! What the relay scale benches (`chat_scale`, `gift_screen`) share: a relay in a child
//! process of its own (this bench binary re-executed, so the relay's RSS and CPU time are
//! measured alone), cheap WebSocket clients spread over many loopback source addresses, a
//! latency histogram, and the open-file limit of the bench processes.
//!
//! A client does the WebSocket handshake (tungstenite), reads its history frame, and then
//! reads the bare TCP stream: it splits server frames by their headers, counts text
//! frames, answers pings, and hands the payload to an inspector only on sampled sockets.
//! Full frame parsing on every socket would cost the client more than the relay's fan-out.

#![allow(dead_code)]

use futures_util::StreamExt;
use platform_tests::env_or;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

pub const JWT: &str = "chat-scale-jwt-secret-0123456789abcdef";
pub const RELAY: &str = "chat-scale-relay-secret-0123456789";

/// Set in the relay child's environment: the platform's API URL.
const CHILD: &str = "CHAT_SCALE_RELAY_FOR";

pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// The 1, 5 and 15 minute load averages of the machine.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The machine's CPU time so far, all cores, in µs: (busy, total). Busy is everything but
/// idle and I/O wait (`/proc/stat`'s first line).
pub fn machine_cpu_micros() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    let micros = |t: u64| t * 1_000_000 / clock_ticks_per_second();
    (micros(total - idle), micros(total))
}

/// The CPU time (user and system) used so far by the process or thread at `/proc/{path}`
/// (`self`, a pid, `self/task/<tid>`), in µs.
pub fn process_cpu_micros(path: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{path}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses: utime and stime
    // are the 14th and 15th fields of the line.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    ticks * 1_000_000 / clock_ticks_per_second()
}

/// The CPU time this process's threads named `name` have used so far, in µs (threads that
/// ended are not counted).
pub fn threads_cpu_micros(name: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
        })
        .map(|task| {
            process_cpu_micros(&format!("self/task/{}", task.file_name().to_string_lossy()))
        })
        .sum()
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).max(1) as u64
}

/// Raises this process's open-file limit: the soft limit to the hard one, and both to
/// `want` when the hard limit is lower and the process may raise it (root). Answers the
/// soft limit in force.
pub fn raise_nofile(want: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_max < want {
            let raised = libc::rlimit {
                rlim_cur: want as libc::rlim_t,
                rlim_max: want as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return want;
            }
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        lim.rlim_cur
    }
}

/// When this process is a bench's relay child, runs the relay until its standard input
/// closes and answers true. Every bench socket comes from loopback, so the connection
/// caps are lifted to the socket count; everything else is the relay's default.
pub async fn relay_child() -> bool {
    let Ok(api_url) = std::env::var(CHILD) else {
        return false;
    };
    let sockets = env_or::<usize>("CHAT_SCALE_SOCKETS", 1000);
    raise_nofile(sockets as u64 + 1024);
    let mut config = chat_relay::Config::new(&api_url, JWT, RELAY);
    // The relay's own tuning as a deployment sets it (`BATCH_WINDOW_MS`, `QUEUE_CAPACITY`),
    // from the bench's environment.
    let tuning = |name: &str| {
        ["BATCH_WINDOW_MS", "QUEUE_CAPACITY"]
            .contains(&name)
            .then(|| std::env::var(name).ok())
            .flatten()
    };
    config.read_env(tuning).unwrap();
    config.max_connections_per_ip = sockets + 1;
    config.max_connections = config.max_connections.max(sockets + 1);
    config.redis_url = std::env::var("CHAT_SCALE_REDIS")
        .ok()
        .filter(|u| !u.is_empty());
    let internal_at = std::env::var("CHAT_SCALE_INTERNAL").unwrap_or_else(|_| "127.0.0.1:0".into());
    let public = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let internal = tokio::net::TcpListener::bind(&internal_at).await.unwrap();
    let redis = config.redis_url.is_some();
    let relay = chat_relay::serve(chat_relay::Relay::new(config), public, internal).unwrap();
    let started = Instant::now();
    while redis
        && relay.relay().redis_state() != "connected"
        && started.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("{} {}", relay.local_addr(), relay.internal_addr());
    let mut stdin = tokio::io::stdin();
    let _ = stdin.read(&mut [0u8; 1]).await;
    relay.shutdown().await;
    true
}

/// A relay running in a child process.
pub struct RelayProcess {
    child: tokio::process::Child,
    pub pid: u32,
    pub public: SocketAddr,
    pub internal: SocketAddr,
}

impl RelayProcess {
    /// Starts a relay for the platform at `api_url` holding up to `sockets` sockets, on
    /// `redis` when given, its internal endpoint on `internal` when given.
    pub async fn spawn(
        api_url: &str,
        sockets: usize,
        redis: Option<&str>,
        internal: Option<SocketAddr>,
    ) -> RelayProcess {
        let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
        command
            .env(CHILD, api_url)
            .env("CHAT_SCALE_SOCKETS", sockets.to_string())
            .env("CHAT_SCALE_REDIS", redis.unwrap_or(""))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(at) = internal {
            command.env("CHAT_SCALE_INTERNAL", at.to_string());
        }
        let mut child = command.spawn().expect("the relay process starts");
        let pid = child.id().expect("a running relay");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let addresses = lines
            .next_line()
            .await
            .unwrap()
            .expect("the relay's addresses");
        let (public, internal) = addresses.split_once(' ').expect("two addresses");
        RelayProcess {
            child,
            pid,
            public: public.parse().unwrap(),
            internal: internal.parse().unwrap(),
        }
    }

    /// Resident memory, KiB.
    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("VmRSS:")
                        .map(|v| v.trim().trim_end_matches(" kB").parse().unwrap_or(0))
                })
            })
            .unwrap_or(0)
    }

    /// User plus system CPU time the process has used, in microseconds.
    pub fn cpu_micros(&self) -> u64 {
        process_cpu_micros(&self.pid.to_string())
    }

    /// A counter of the relay's `/metrics`.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = reqwest::get(format!("http://{}/metrics", self.internal))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0) as u64
    }

    /// Closing its standard input shuts the relay down (every socket closes).
    pub async fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

/// Delivery latencies in 100 µs buckets up to 60 s.
pub struct Histogram {
    buckets: Vec<AtomicU64>,
    max: AtomicU64,
}

const BUCKET_MICROS: u64 = 100;

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            buckets: (0..600_000).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn record(&self, micros: u64) {
        let i = ((micros / BUCKET_MICROS) as usize).min(self.buckets.len() - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(micros, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The `q` quantile in milliseconds (the upper edge of its bucket).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let total = self.count();
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                return ((i as u64 + 1) * BUCKET_MICROS) as f64 / 1000.0;
            }
        }
        0.0
    }

    /// The non-empty buckets and the maximum, as one line of text.
    pub fn to_line(&self) -> String {
        let mut line = self.max.load(Ordering::Relaxed).to_string();
        for (i, b) in self.buckets.iter().enumerate() {
            let n = b.load(Ordering::Relaxed);
            if n > 0 {
                line.push_str(&format!(" {i}:{n}"));
            }
        }
        line
    }

    /// Adds what [`Histogram::to_line`] wrote.
    pub fn add_line(&self, line: &str) {
        let mut words = line.split_whitespace();
        let max = words.next().and_then(|m| m.parse().ok()).unwrap_or(0);
        self.max.fetch_max(max, Ordering::Relaxed);
        for word in words {
            if let Some((i, n)) = word.split_once(':')
                && let (Ok(i), Ok(n)) = (i.parse::<usize>(), n.parse::<u64>())
                && i < self.buckets.len()
            {
                self.buckets[i].fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    pub fn max_ms(&self) -> f64 {
        self.max.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// `p50 .. p99 .. max ..` in milliseconds.
    pub fn summary(&self) -> String {
        format!(
            "p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms ({} samples)",
            self.quantile_ms(0.5),
            self.quantile_ms(0.99),
            self.max_ms(),
            self.count()
        )
    }
}

/// What the client sockets of a run add up to.
#[derive(Default)]
pub struct Counters {
    /// Events received after the history frame (a batch frame's each count).
    pub frames: AtomicU64,
    /// WebSocket text frames those events came in.
    pub texts: AtomicU64,
    /// Sockets that received every frame they waited for.
    pub done: AtomicU64,
    /// Sockets the relay closed (a close frame, or the connection ended) before that.
    pub closed: AtomicU64,
    /// When the latest text frame arrived, µs since the epoch.
    pub last_frame_at: AtomicU64,
    /// Inspected frames whose events [`event_count`] counted otherwise than [`events_of`]
    /// found them (must stay 0 for the other sockets' counts to hold).
    pub miscounted: AtomicU64,
}

/// Looks at the payload of one text frame and the time it arrived (µs since the epoch).
pub type Inspector = Box<dyn FnMut(&[u8], u64) + Send>;

/// The loopback address client socket `i` connects from: `per_address` sockets on each
/// of 127.0.0.2, 127.0.0.3, ... so that no address runs out of ephemeral ports.
pub fn source_address(i: usize, per_address: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 2)) + (i / per_address.max(1)) as u32)
}

/// Opens a WebSocket to `url` (on `relay`) from `source`, reads its history frame, and
/// answers the bare TCP stream.
pub async fn connect(relay: SocketAddr, source: Ipv4Addr, url: &str) -> anyhow::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    let stream = socket.connect(relay).await?;
    stream.set_nodelay(true)?;
    let config = WebSocketConfig::default().read_buffer_size(4096);
    let (mut ws, _) =
        tokio_tungstenite::client_async_with_config(url, stream, Some(config)).await?;
    match ws.next().await {
        Some(Ok(m)) if m.to_text().is_ok_and(|t| t.contains("\"history\"")) => {}
        other => anyhow::bail!("no history frame: {other:?}"),
    }
    Ok(ws.into_inner())
}

/// Opens sockets `range`, `concurrency` handshakes at a time: socket `i` to
/// `relays[i % relays.len()]` with `url(i)`, from [`source_address`]. A socket that
/// cannot connect is retried, then left out. Answers (index, stream) pairs.
pub async fn connect_all(
    relays: &[SocketAddr],
    range: std::ops::Range<usize>,
    per_address: usize,
    concurrency: usize,
    url: impl Fn(usize) -> String + Send + Sync + 'static,
) -> Vec<(usize, TcpStream)> {
    let n = range.end;
    let next = Arc::new(AtomicUsize::new(range.start));
    let opened = Arc::new(Mutex::new(Vec::with_capacity(range.len())));
    let url = Arc::new(url);
    let relays: Arc<[SocketAddr]> = relays.into();
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (next, opened, url, relays) =
            (next.clone(), opened.clone(), url.clone(), relays.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let (relay, source, url) = (
                    relays[i % relays.len()],
                    source_address(i, per_address),
                    url(i),
                );
                let mut last = None;
                for attempt in 0..5 {
                    match connect(relay, source, &url).await {
                        Ok(s) => {
                            opened.lock().unwrap().push((i, s));
                            last = None;
                            break;
                        }
                        Err(e) => {
                            last = Some(e);
                            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                        }
                    }
                }
                if let Some(e) = last {
                    eprintln!("socket {i} from {source} not connected: {e:#}");
                }
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let mut opened = std::mem::take(&mut *opened.lock().unwrap());
    opened.sort_by_key(|(i, _)| *i);
    opened
}

/// Reads server frames from `stream` until it ends: counts text frames, answers pings
/// (the relay reaps silent sockets), and hands each text payload to `inspect` when
/// given. Counts the socket done once `expected` text frames arrived, closed when the
/// relay ended it before that.
pub async fn read_frames(
    mut stream: TcpStream,
    expected: u64,
    counters: Arc<Counters>,
    mut inspect: Option<Inspector>,
) {
    let mut buf = vec![0u8; 2048];
    let (mut len, mut got) = (0usize, 0u64);
    loop {
        let n = match stream.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        len += n;
        let now = if inspect.is_some() { now_micros() } else { 0 };
        let (mut at, mut texts, mut frames, mut pongs) = (0usize, 0u64, 0u64, 0usize);
        while let Some((opcode, start, end)) = next_frame(&buf[at..len]) {
            match opcode {
                1 => {
                    frames += 1;
                    let payload = &buf[at + start..at + end];
                    match inspect.as_mut() {
                        Some(f) => {
                            let events = events_of(payload);
                            if events.len() as u64 != event_count(payload) {
                                counters.miscounted.fetch_add(1, Ordering::Relaxed);
                            }
                            for event in events {
                                texts += 1;
                                f(event, now);
                            }
                        }
                        None => texts += event_count(payload),
                    }
                }
                8 => {
                    if got + texts < expected {
                        counters.closed.fetch_add(1, Ordering::Relaxed);
                    }
                    counters.frames.fetch_add(texts, Ordering::Relaxed);
                    counters.texts.fetch_add(frames, Ordering::Relaxed);
                    return;
                }
                9 => pongs += 1,
                _ => {}
            }
            at += end;
        }
        buf.copy_within(at..len, 0);
        len -= at;
        if len == buf.len() {
            // A frame larger than the buffer.
            buf.resize(buf.len() * 2, 0);
        }
        for _ in 0..pongs {
            // An empty pong, masked as a client's frames must be (mask 0).
            if stream.write_all(&[0x8a, 0x80, 0, 0, 0, 0]).await.is_err() {
                break;
            }
        }
        if texts > 0 {
            counters.frames.fetch_add(texts, Ordering::Relaxed);
            counters.texts.fetch_add(frames, Ordering::Relaxed);
            let now = if now == 0 { now_micros() } else { now };
            counters.last_frame_at.fetch_max(now, Ordering::Relaxed);
            let before = got;
            got += texts;
            if before < expected && got >= expected {
                counters.done.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    if got < expected {
        counters.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// How many events one text frame's payload carries, without taking them apart: in a
/// batch, each frame ends with its `"type":"..."}` (the relay writes keys in order, and
/// `type` is the last key of every frame a batch holds), then `,` or `]`. The sockets whose
/// events are inspected take them apart with [`events_of`], and the two must agree
/// ([`Counters::miscounted`]).
pub fn event_count(payload: &[u8]) -> u64 {
    const BATCH: &[u8] = br#"{"type":"batch","#;
    const TYPES: [&[u8]; 4] = [b"event\"}", b"message\"}", b"deleted\"}", b"held\"}"];
    let Some(list) = payload.strip_prefix(BATCH) else {
        return 1;
    };
    // (One searcher for every frame: building it is most of the cost of a short search.)
    static TYPE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(br#""type":""#));
    TYPE.find_iter(list)
        .filter(|&at| {
            let rest = &list[at + 8..];
            TYPES.iter().any(|t| {
                rest.starts_with(t) && matches!(rest.get(t.len()), Some(b',') | Some(b']'))
            })
        })
        .count() as u64
}

/// The events of one text frame's payload: the frame itself, or each frame of a
/// `{"type":"batch","frames":[...]}`, found by a scan of its brackets and strings (the bench's
/// own CPU shares the machine with the relay, so nothing is parsed into values).
pub fn events_of(payload: &[u8]) -> Vec<&[u8]> {
    const BATCH: &[u8] = br#"{"type":"batch","frames":["#;
    let Some(list) = payload.strip_prefix(BATCH) else {
        return vec![payload];
    };
    let (mut events, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    let mut i = 0;
    while i < list.len() {
        let b = list[i];
        i += 1;
        match b {
            // A string: skip to its closing quote, past escaped characters.
            b'"' => loop {
                match memchr::memchr2(b'"', b'\\', &list[i..]) {
                    Some(at) if list[i + at] == b'\\' => i = (i + at + 2).min(list.len()),
                    Some(at) => {
                        i += at + 1;
                        break;
                    }
                    None => return events,
                }
            },
            b'{' | b'[' => {
                if depth == 0 {
                    start = i - 1;
                }
                depth += 1;
            }
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    events.push(&list[start..i]);
                }
            }
            _ => {}
        }
    }
    events
}

/// The first complete server frame of `buf`: (opcode, payload start, frame end).
fn next_frame(buf: &[u8]) -> Option<(u8, usize, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let (header, len) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (4, u16::from_be_bytes([buf[2], buf[3]]) as usize),
        127 if buf.len() >= 10 => (
            10,
            u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
        ),
        126 | 127 => return None,
        n => (2, n as usize),
    };
    let end = header + len;
    (buf.len() >= end).then_some((buf[0] & 0x0f, header, end))
}

/// The unsigned integer after `"name":` in a JSON payload.
pub fn json_number(payload: &[u8], name: &[u8]) -> Option<u64> {
    let digits = after_key(payload, name, b"\":")?;
    let end = digits
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// The string after `"name":"` in a JSON payload.
pub fn json_str<'a>(payload: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = after_key(payload, name, b"\":\"")?;
    let end = rest.iter().position(|b| *b == b'"')?;
    Some(&rest[..end])
}

/// What follows the first `"name` + `tail` in `payload`, found quote by quote.
fn after_key<'a>(payload: &'a [u8], name: &[u8], tail: &[u8]) -> Option<&'a [u8]> {
    memchr::memchr_iter(b'"', payload).find_map(|at| {
        let rest = payload[at + 1..].strip_prefix(name)?.strip_prefix(tail)?;
        Some(rest)
    })
}

/// Waits until every socket still open is done, nothing arrived for `stall`, or
/// `deadline` passed.
pub async fn wait_delivery(counters: &Counters, sockets: u64, stall: Duration, deadline: Duration) {
    let started = Instant::now();
    let (mut last, mut since) = (u64::MAX, Instant::now());
    loop {
        let done = counters.done.load(Ordering::Relaxed) + counters.closed.load(Ordering::Relaxed);
        if done >= sockets || started.elapsed() > deadline {
            return;
        }
        let frames = counters.frames.load(Ordering::Relaxed);
        if frames != last {
            (last, since) = (frames, Instant::now());
        } else if since.elapsed() > stall {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
