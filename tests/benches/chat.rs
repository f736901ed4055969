//! Fan-out through one chat relay: N WebSocket subscribers of one stream, R frames/s pushed
//! through the relay's internal events endpoint (the same fan-out path stored messages
//! take after persistence), delivery latency per (frame, subscriber), and the relay's RSS
//! per held connection (the relay's connection caps lifted to the socket count, since all
//! sockets come from loopback). The relay runs in a child process of its own (this binary
//! re-executed with `CHAT_BENCH_RELAY_FOR` set), so its memory is measured alone; the
//! platform and the clients run in this process.
//!
//! `cargo bench -p platform-tests --bench chat --profile host` (env: SOCKETS=1000,
//! RATE=100, SECONDS=5)

use futures_util::StreamExt;
use platform_tests::{Exchange, Method, Platform, env_or};
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const JWT: &str = "chat-bench-jwt-secret-0123456789abcdef";
const RELAY: &str = "chat-bench-relay-secret-0123456789";

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// The resident memory of process `pid` ("self" for this one), in KiB.
fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .map(|v| v.trim().trim_end_matches(" kB").parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

/// The child: a relay for the platform at `api_url`; prints its public and internal
/// addresses, serves until its standard input closes. Every bench socket comes from
/// loopback, so the per-address cap is lifted to the socket count.
async fn relay_child(api_url: &str) {
    let sockets = env_or::<usize>("SOCKETS", 1000);
    let mut config = chat_relay::Config::new(api_url, JWT, RELAY);
    config.max_connections_per_ip = sockets + 1;
    config.max_connections = config.max_connections.max(sockets + 1);
    let public = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let internal = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay = chat_relay::serve(chat_relay::Relay::new(config), public, internal).unwrap();
    println!("{} {}", relay.local_addr(), relay.internal_addr());
    let mut stdin = tokio::io::stdin();
    let _ = tokio::io::AsyncReadExt::read(&mut stdin, &mut [0u8; 1]).await;
    let metrics = relay.relay().metrics_text();
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("chat_relay_dropped") || l.starts_with("chat_relay_messages_out"))
    {
        eprintln!("{line}");
    }
    relay.shutdown().await;
}

#[tokio::main]
async fn main() {
    if let Ok(api_url) = std::env::var("CHAT_BENCH_RELAY_FOR") {
        return relay_child(&api_url).await;
    }
    let (sockets, rate, seconds) = (
        env_or("SOCKETS", 1000u64),
        env_or("RATE", 100u64),
        env_or("SECONDS", 5u64),
    );
    let p = Platform::start_with(&[("jwt_secret", JWT), ("relay_secret", RELAY)]).await;
    let t = p.register_client("Bench").await;
    let ada = p.signup(&t, "ada").await;
    let (_, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "bench"}))
        .await;
    let stream = b["streamId"].as_str().unwrap().to_string();
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("CHAT_BENCH_RELAY_FOR", &p.base)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the relay process starts");
    let relay_pid = child.id().expect("a running relay").to_string();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let addresses = lines
        .next_line()
        .await
        .unwrap()
        .expect("the relay's addresses");
    let (addr, internal) = addresses.split_once(' ').expect("two addresses");
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    let internal: std::net::SocketAddr = internal.parse().unwrap();

    let rss_before = rss_kib(&relay_pid);
    let url = format!("ws://{addr}/ws/streams/{stream}/chat?token={}", ada.token);
    let started = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u64>>();
    let expected = rate * seconds;
    for _ in 0..sockets {
        let (mut ws, _) = tokio_tungstenite::connect_async(&url)
            .await
            .expect("connect");
        let _history = ws.next().await;
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lat = Vec::with_capacity(expected as usize);
            while let Some(Ok(msg)) = ws.next().await {
                if let Ok(text) = msg.to_text()
                    && let Ok(v) = serde_json::from_str::<Value>(text)
                    && let Some(sent) = v["event"]["sent"].as_u64()
                {
                    lat.push(now_micros().saturating_sub(sent));
                    if lat.len() as u64 == expected {
                        break;
                    }
                }
            }
            let _ = tx.send(lat);
        });
    }
    drop(tx);
    let connect_time = started.elapsed();
    let rss_after = rss_kib(&relay_pid);

    let http = reqwest::Client::new();
    let events = format!("http://{internal}/internal/streams/{stream}/events");
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    let push_start = Instant::now();
    // Pushes are not awaited one by one, so the rate holds however long a push takes.
    let mut pushes = Vec::new();
    for n in 0..expected {
        tick.tick().await;
        let (http, events) = (http.clone(), events.clone());
        pushes.push(tokio::spawn(async move {
            let body = json!({"kind": "bench", "n": n, "sent": now_micros()});
            let status = http
                .post(&events)
                .header("x-relay-secret", RELAY)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status, 202);
        }));
    }
    let pushed_in = push_start.elapsed();
    for push in pushes {
        push.await.unwrap();
    }
    let mut all = Vec::new();
    let deadline = tokio::time::sleep(Duration::from_secs(30));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            got = rx.recv() => match got { Some(l) => all.extend(l), None => break },
            _ = &mut deadline => break,
        }
    }
    let elapsed = push_start.elapsed();
    all.sort_unstable();
    let pct = |q: f64| {
        all.get(((all.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    println!("chat fan-out: {sockets} sockets, {rate} frames/s for {seconds} s");
    println!(
        "  connect: {sockets} sockets in {:.1} s; relay RSS {} KiB, +{} KiB ({:.1} KiB per connection)",
        connect_time.as_secs_f64(),
        rss_after,
        rss_after.saturating_sub(rss_before),
        rss_after.saturating_sub(rss_before) as f64 / sockets as f64
    );
    println!(
        "  pushed {expected} frames in {:.1} s ({:.0} frames/s asked)",
        pushed_in.as_secs_f64(),
        expected as f64 / pushed_in.as_secs_f64()
    );
    println!(
        "  delivered {} of {} frames in {:.1} s ({:.0} frames/s fanned out)",
        all.len(),
        expected * sockets,
        elapsed.as_secs_f64(),
        all.len() as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  latency p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms",
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    // Closing the relay's standard input ends it; it prints its counters first.
    drop(child.stdin.take());
    let _ = child.wait().await;
}
