//! The chat relay at scale: SOCKETS WebSocket subscribers of one stream on RELAYS relay
//! processes (two share frames through a throwaway redis-server), RATE frames/s pushed for
//! SECONDS through the first relay's internal events endpoint, and for each run: the
//! relays' RSS per socket, whether every frame reached every socket (else how many
//! sockets the relay dropped as slow), the delivery latency from before the push to the
//! receipt (on every SAMPLE-th socket), and the relays' CPU time per delivered frame.
//! SOCKETS takes a list (`1000,10000,19000`): one run per size, then the cost curve.
//!
//! The clients run in child processes of their own, at most PER_PROCESS sockets each:
//! a process may hold no more files than its hard RLIMIT_NOFILE, and so may a relay.
//!
//! `cargo bench -p platform-tests --bench chat_scale --profile host` (env: SOCKETS=19000,
//! RATE=100, SECONDS=10, RELAYS=1, SAMPLE=10, CONCURRENCY=32 handshakes at a time per
//! client process, PER_ADDRESS=10000 sockets per loopback source address,
//! PER_PROCESS=16000, PAD=0 bytes of padding in every event)

mod relay_scale;

use platform_tests::backends::OwnRedis;
use platform_tests::{Exchange, Method, Platform, env_or};
use relay_scale::{
    Counters, Histogram, JWT, RELAY, RelayProcess, connect_all, json_number, load_average,
    now_micros, raise_nofile, read_frames, relay_child, wait_delivery,
};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

struct Settings {
    rate: u64,
    seconds: u64,
    relays: usize,
    sample: usize,
    per_address: usize,
    per_process: usize,
    /// Bytes of padding in every pushed event (`PAD`): what the relay spends per byte
    /// against per frame.
    pad: usize,
}

/// One point of the cost curve.
struct Cost {
    sockets: usize,
    kib_per_socket: f64,
    micros_per_frame: f64,
    delivered: u64,
    expected: u64,
    p99_ms: f64,
}

#[tokio::main]
async fn main() {
    if relay_child().await || client_child().await {
        return;
    }
    let sizes: Vec<usize> = std::env::var("SOCKETS")
        .unwrap_or_else(|_| "50000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("SOCKETS is a list of numbers"))
        .collect();
    let s = Settings {
        rate: env_or("RATE", 100),
        seconds: env_or("SECONDS", 10),
        relays: env_or("RELAYS", 1usize).max(1),
        sample: env_or("SAMPLE", 10usize).max(1),
        per_address: env_or("PER_ADDRESS", 10_000),
        per_process: env_or("PER_PROCESS", 16_000usize).max(1),
        pad: env_or("PAD", 0usize),
    };
    let limit = raise_nofile(s.per_process as u64 + 1024);
    let most = sizes.iter().copied().max().unwrap_or(0);
    let per_relay = most.div_ceil(s.relays) as u64;
    if per_relay + 512 > limit || s.per_process as u64 + 512 > limit {
        eprintln!(
            "chat_scale: the open-file limit is {limit} (ulimit -Hn; raising it needs CAP_SYS_RESOURCE): \
             {per_relay} sockets per relay and {} per client process will not all connect",
            s.per_process
        );
    }
    let redis = if s.relays > 1 {
        Some(OwnRedis::start().await)
    } else {
        None
    };
    let p = Platform::start_with(&[("jwt_secret", JWT), ("relay_secret", RELAY)]).await;
    let t = p.register_client("Bench").await;
    let ada = p.signup(&t, "ada").await;
    let (_, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "bench"}))
        .await;
    let stream = b["streamId"].as_str().unwrap().to_string();
    let mut curve = Vec::new();
    for &sockets in &sizes {
        let redis_url = redis.as_ref().map(OwnRedis::url);
        curve.push(
            run(
                &p.base,
                &stream,
                &ada.token,
                sockets,
                &s,
                redis_url.as_deref(),
            )
            .await,
        );
    }
    if curve.len() > 1 {
        println!("cost curve ({} relay(s), {} frames/s):", s.relays, s.rate);
        println!("  sockets  RSS/socket  CPU/delivered frame  delivered          p99");
        for c in &curve {
            println!(
                "  {:>7}  {:>6.1} KiB  {:>10.2} µs  {:>10} of {:<10} {:>8.1} ms",
                c.sockets, c.kib_per_socket, c.micros_per_frame, c.delivered, c.expected, c.p99_ms
            );
        }
    }
    p.stop().await;
}

/// Set in a client child's environment: the range of socket indexes it opens.
const CLIENTS: &str = "CHAT_SCALE_CLIENTS";

/// When this process is a client child, runs its share of the sockets and answers true.
/// It prints `connected N SECONDS` once its sockets are open; after `go` on its standard
/// input (the pushes start) it waits for delivery and prints `result FRAMES DONE CLOSED
/// FINISHED_AT_MICROS` and `latency HISTOGRAM`, then holds its sockets until its standard
/// input closes.
async fn client_child() -> bool {
    let Ok(range) = std::env::var(CLIENTS) else {
        return false;
    };
    let (from, to) = range
        .split_once(',')
        .map(|(a, b)| (a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()))
        .unwrap();
    raise_nofile((to - from) as u64 + 1024);
    let relays: Vec<std::net::SocketAddr> = std::env::var("CHAT_SCALE_RELAYS")
        .unwrap()
        .split(',')
        .map(|a| a.parse().unwrap())
        .collect();
    let tail = std::env::var("CHAT_SCALE_URL_TAIL").unwrap();
    let expected: u64 = env_or("CHAT_SCALE_EXPECTED", 0);
    let sample: usize = env_or("SAMPLE", 10usize).max(1);
    let started = Instant::now();
    let url = {
        let relays = relays.clone();
        move |i: usize| format!("ws://{}{tail}", relays[i % relays.len()])
    };
    let opened = connect_all(
        &relays,
        from..to,
        env_or("PER_ADDRESS", 10_000),
        env_or("CONCURRENCY", 32),
        url,
    )
    .await;
    let connected = opened.len() as u64;
    println!(
        "connected {connected} {:.3}",
        started.elapsed().as_secs_f64()
    );
    let counters = Arc::new(Counters::default());
    let latency = Arc::new(Histogram::default());
    for (i, stream) in opened {
        let inspect = (i % sample == 0).then(|| {
            let latency = latency.clone();
            Box::new(move |payload: &[u8], now: u64| {
                if let Some(sent) = json_number(payload, b"sent") {
                    latency.record(now.saturating_sub(sent));
                }
            }) as relay_scale::Inspector
        });
        tokio::spawn(read_frames(stream, expected, counters.clone(), inspect));
    }
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let _go = stdin.next_line().await;
    wait_delivery(
        &counters,
        connected,
        Duration::from_secs(5),
        Duration::from_secs(90),
    )
    .await;
    println!(
        "result {} {} {} {}",
        counters.frames.load(Ordering::Relaxed),
        counters.done.load(Ordering::Relaxed),
        counters.closed.load(Ordering::Relaxed),
        counters.last_frame_at.load(Ordering::Relaxed),
    );
    println!("latency {}", latency.to_line());
    let _ = stdin.next_line().await;
    true
}

/// A client child process.
struct Clients {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Clients {
    fn spawn(
        range: std::ops::Range<usize>,
        relays: &[RelayProcess],
        tail: &str,
        expected: u64,
    ) -> Clients {
        let addresses: Vec<String> = relays.iter().map(|r| r.public.to_string()).collect();
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .env(CLIENTS, format!("{},{}", range.start, range.end))
            .env("CHAT_SCALE_RELAYS", addresses.join(","))
            .env("CHAT_SCALE_URL_TAIL", tail)
            .env("CHAT_SCALE_EXPECTED", expected.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("a client process starts");
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        Clients { child, lines }
    }

    /// The next line the child prints after `word`.
    async fn expect(&mut self, word: &str) -> String {
        loop {
            let line = self
                .lines
                .next_line()
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("a client process ended before `{word}`"));
            if let Some(rest) = line.strip_prefix(word) {
                return rest.trim().to_string();
            }
        }
    }

    async fn tell(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
        let _ = stdin.flush().await;
    }

    async fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}

async fn run(
    api: &str,
    stream: &str,
    token: &str,
    sockets: usize,
    s: &Settings,
    redis: Option<&str>,
) -> Cost {
    let load_before = load_average();
    let mut relays = Vec::new();
    for _ in 0..s.relays {
        relays.push(RelayProcess::spawn(api, sockets.div_ceil(s.relays) + 1, redis, None).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_before: u64 = relays.iter().map(RelayProcess::rss_kib).sum();
    let expected = s.rate * s.seconds;
    let tail = format!("/ws/streams/{stream}/chat?token={token}");
    let started = Instant::now();
    let mut clients = Vec::new();
    for from in (0..sockets).step_by(s.per_process) {
        let to = (from + s.per_process).min(sockets);
        clients.push(Clients::spawn(from..to, &relays, &tail, expected));
    }
    let mut connected = 0u64;
    for c in &mut clients {
        let line = c.expect("connected").await;
        connected += line.split(' ').next().unwrap().parse::<u64>().unwrap();
    }
    let connect_time = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss: Vec<u64> = relays.iter().map(RelayProcess::rss_kib).collect();
    let rss_after: u64 = rss.iter().sum();

    let cpu_before: u64 = relays.iter().map(RelayProcess::cpu_micros).sum();
    for c in &mut clients {
        c.tell("go").await;
    }
    let http = reqwest::Client::new();
    let events = format!(
        "http://{}/internal/streams/{stream}/events",
        relays[0].internal
    );
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / s.rate.max(1)));
    let push_start = Instant::now();
    let push_start_micros = now_micros();
    // Pushes are not awaited one by one, so the rate holds however long a push takes.
    let mut pushes = Vec::new();
    let pad = "x".repeat(s.pad);
    for n in 0..expected {
        tick.tick().await;
        let (http, events, pad) = (http.clone(), events.clone(), pad.clone());
        pushes.push(tokio::spawn(async move {
            let body = json!({"kind": "bench", "n": n, "sent": now_micros(), "pad": pad});
            let answer = http
                .post(&events)
                .header("x-relay-secret", RELAY)
                .json(&body)
                .send()
                .await;
            matches!(answer, Ok(a) if a.status() == 202)
        }));
    }
    let pushed_in = push_start.elapsed();
    let mut accepted = 0;
    for push in pushes {
        accepted += u64::from(push.await.unwrap());
    }
    let latency = Histogram::default();
    let (mut delivered, mut done, mut closed, mut last_at) = (0u64, 0u64, 0u64, 0u64);
    for c in &mut clients {
        let result: Vec<u64> = c
            .expect("result")
            .await
            .split(' ')
            .map(|n| n.parse().unwrap())
            .collect();
        delivered += result[0];
        done += result[1];
        closed += result[2];
        last_at = last_at.max(result[3]);
        latency.add_line(&c.expect("latency").await);
    }
    // Until the last frame arrived: the clients' wait for stragglers is not counted.
    let elapsed = Duration::from_micros(last_at.saturating_sub(push_start_micros).max(1));
    let cpu = relays
        .iter()
        .map(RelayProcess::cpu_micros)
        .sum::<u64>()
        .saturating_sub(cpu_before);
    let (mut queued, mut dropped) = (0, 0);
    for r in &relays {
        queued += r.metric("chat_relay_messages_out_total").await;
        dropped += r.metric("chat_relay_dropped_slow_clients_total").await;
    }
    let load_after = load_average();
    let per_socket = rss_after.saturating_sub(rss_before) as f64 / connected.max(1) as f64;
    let micros_per_frame = cpu as f64 / delivered.max(1) as f64;

    println!(
        "chat at scale: {sockets} sockets on {} relay(s){}, {} frames/s for {} s, {} bytes of padding a frame",
        s.relays,
        if s.relays > 1 { " sharing Redis" } else { "" },
        s.rate,
        s.seconds,
        s.pad
    );
    println!("  load average {load_before} before, {load_after} after");
    println!(
        "  connect: {connected} of {sockets} sockets in {:.1} s ({} client processes, {} loopback source addresses); relay RSS {} KiB, +{} KiB ({per_socket:.1} KiB per connection)",
        connect_time.as_secs_f64(),
        clients.len(),
        sockets.div_ceil(s.per_address),
        rss.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" + "),
        rss_after.saturating_sub(rss_before),
    );
    println!(
        "  pushed {expected} frames into relay 1 in {:.1} s ({:.0} frames/s asked), {accepted} accepted",
        pushed_in.as_secs_f64(),
        expected as f64 / pushed_in.as_secs_f64()
    );
    let target = expected * connected;
    println!(
        "  delivered {delivered} of {target} frames in {:.1} s ({:.0} frames/s fanned out); sockets with every frame {done}, closed by the relay {closed}",
        elapsed.as_secs_f64(),
        delivered as f64 / elapsed.as_secs_f64(),
    );
    println!(
        "  latency (every {}th socket): {}",
        s.sample,
        latency.summary()
    );
    println!(
        "  relays: chat_relay_messages_out_total {queued}, chat_relay_dropped_slow_clients_total {dropped}"
    );
    println!(
        "  relay CPU {:.1} s over {:.1} s: {micros_per_frame:.2} µs per delivered frame",
        cpu as f64 / 1e6,
        elapsed.as_secs_f64()
    );
    for r in relays {
        r.stop().await;
    }
    for c in clients {
        c.stop().await;
    }
    Cost {
        sockets,
        kib_per_socket: per_socket,
        micros_per_frame,
        delivered,
        expected: target,
        p99_ms: latency.quantile_ms(0.99),
    }
}
