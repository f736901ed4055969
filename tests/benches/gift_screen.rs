//! Gift to screen: VIEWERS WebSocket viewers of a live broadcast on one relay (a child
//! process, its internal endpoint the platform's `relay_url`), SENDERS fans sending RATE
//! gifts/s in all for SECONDS through `POST /api/broadcasts/{id}/gifts` (each with its own
//! Idempotency-Key; one fan's gifts one after another, as a fan taps). Measures the time
//! from before each POST to the `gift` event's arrival on every SAMPLE-th socket, checks
//! on those sockets that each fan's combo values arrive as 1, 2, 3... without gaps or
//! repeats, and counts the gift events on every socket. With CHAT_RATE > 0, chatters post
//! that many chat messages/s in all through `POST /api/streams/{id}/chat` at the same
//! time (each chatter under the chat's per-user limit), and every socket must get those too.
//! The sockets read batch frames (`?batch=1`) unless BATCH=0. The relay takes its
//! `BATCH_WINDOW_MS` and `QUEUE_CAPACITY` from the environment, as a deployed one does. The
//! viewers' sockets run on a runtime (two threads) of their own, apart from edgehost's.
//!
//! `cargo bench -p platform-tests --bench gift_screen --profile host` (env: VIEWERS=10000,
//! RATE=200, SECONDS=8, SENDERS=64, CHAT_RATE=0, BATCH=1, SAMPLE=10, CONCURRENCY=32,
//! PER_ADDRESS=10000)

mod relay_scale;

use platform_tests::{Exchange, Method, Platform, env_or};
use relay_scale::{
    Counters, Histogram, JWT, RELAY, RelayProcess, connect_all, json_number, json_str,
    load_average, machine_cpu_micros, now_micros, process_cpu_micros, raise_nofile, read_frames,
    relay_child, threads_cpu_micros, wait_delivery,
};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Default)]
struct ComboCheck {
    in_order: AtomicU64,
    gaps: AtomicU64,
    repeats: AtomicU64,
    unknown: AtomicU64,
}

/// The HTTP client of fan or chatter `n`, from an address of its own (127.0.1.1, ...): they
/// are different people's devices, each under edgehost's per-client caps, not one client.
fn sender_client(n: usize) -> reqwest::Client {
    let address =
        std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(127, 0, 1, 1)) + n as u32);
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::V4(address))
        .build()
        .unwrap()
}

#[tokio::main]
async fn main() {
    if relay_child().await {
        return;
    }
    let viewers = env_or("VIEWERS", 10_000usize);
    let rate = env_or("RATE", 200u64).max(1);
    let seconds = env_or("SECONDS", 8u64);
    let senders = env_or("SENDERS", 64usize).max(1);
    let sample = env_or("SAMPLE", 10usize).max(1);
    let chat_rate = env_or("CHAT_RATE", 0u64);
    let batch = env_or("BATCH", 1u8);
    // The chat allows a user 10 messages in 10 s: each chatter sends at most 0.8/s.
    let chatters = (chat_rate * 5).div_ceil(4) as usize;
    let limit = raise_nofile(viewers as u64 + 4096);
    if viewers as u64 + 512 > limit {
        eprintln!("gift_screen: the open-file limit is {limit}; {viewers} viewers will not fit");
    }
    let load_before = load_average();
    // The relay's internal address comes first: the platform's relay_url names it.
    let internal = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let relay_url = format!("http://{internal}");
    let p = Platform::start_with(&[
        ("jwt_secret", JWT),
        ("relay_secret", RELAY),
        ("relay_url", &relay_url),
    ])
    .await;
    let relay = RelayProcess::spawn(&p.base, viewers + 1, None, Some(internal)).await;

    let t = p.register_client("Bench").await;
    let host = p.signup(&t, "host").await;
    let (status, gift) = p
        .as_server(
            &t,
            Method::PUT,
            "/api/v1/gifts/rose",
            Some(&json!({"name": "Rose", "priceTokens": 10})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "gift: {gift}");
    let mut fans = Vec::new();
    for i in 0..senders {
        let fan = p
            .signup_with_tokens(&t, &format!("fan{i}"), 1_000_000)
            .await;
        fans.push(fan);
    }
    let mut talkers = Vec::new();
    for i in 0..chatters {
        talkers.push(p.signup(&t, &format!("chatter{i}")).await);
    }
    let (status, b) = p
        .as_user(&host, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Bench"}))
        .await;
    assert_eq!(status, 200, "broadcast: {b}");
    let id = b["id"].as_str().unwrap().to_string();
    let stream = b["streamId"].as_str().unwrap().to_string();
    let (status, live) = p
        .as_user(&host, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200, "live: {live}");

    let started = Instant::now();
    let url = {
        let (public, token) = (relay.public, host.token.clone());
        let stream = stream.clone();
        move |_| format!("ws://{public}/ws/streams/{stream}/chat?token={token}&batch={batch}")
    };
    // The viewers' sockets run on their own threads, as viewers on other machines would:
    // on the platform's runtime, 10,000 readers would stand in the queue of every request
    // edgehost serves (the bench runs edgehost in its own process).
    let viewers_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("viewer")
        .enable_all()
        .build()
        .unwrap();
    let public = [relay.public];
    let opened = viewers_runtime
        .spawn(async move {
            let (per_address, concurrency) =
                (env_or("PER_ADDRESS", 10_000), env_or("CONCURRENCY", 32));
            connect_all(&public, 0..viewers, per_address, concurrency, url).await
        })
        .await
        .unwrap();
    let connected = opened.len() as u64;
    let connect_time = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Gift k (from 1) of fan s is expected to carry combo k; its POST's start time is
    // kept at starts[s][k].
    let per_sender = (rate * seconds).div_ceil(senders as u64) as usize;
    let planned = per_sender * senders;
    let per_chatter = if chatters == 0 {
        0
    } else {
        (chat_rate * seconds).div_ceil(chatters as u64) as usize
    };
    let planned_chat = per_chatter * chatters;
    // Chat message n (from 0) of the run, "m<n>", was posted at chat_starts[n].
    let chat_starts: Arc<Vec<AtomicU64>> =
        Arc::new((0..planned_chat).map(|_| AtomicU64::new(0)).collect());
    let chat_latency = Arc::new(Histogram::default());
    let starts: Arc<Vec<Vec<AtomicU64>>> = Arc::new(
        (0..senders)
            .map(|_| (0..per_sender + 2).map(|_| AtomicU64::new(0)).collect())
            .collect(),
    );
    let index: Arc<HashMap<Vec<u8>, usize>> = Arc::new(
        fans.iter()
            .enumerate()
            .map(|(i, f)| (f.id.as_bytes().to_vec(), i))
            .collect(),
    );
    let counters = Arc::new(Counters::default());
    let latency = Arc::new(Histogram::default());
    let combos = Arc::new(ComboCheck::default());
    // The bytes of the gift events the timed sockets got (a frame's share of a batch).
    let gift_bytes = Arc::new(AtomicU64::new(0));
    for (i, socket) in opened {
        let inspect = (i % sample == 0).then(|| {
            let (latency, combos, starts, index, gift_bytes) = (
                latency.clone(),
                combos.clone(),
                starts.clone(),
                index.clone(),
                gift_bytes.clone(),
            );
            let (chat_latency, chat_starts) = (chat_latency.clone(), chat_starts.clone());
            let mut last = vec![0u64; senders];
            Box::new(move |payload: &[u8], now: u64| {
                // (The relay writes a frame's keys in order: `type` comes last.)
                if payload.ends_with(br#""type":"message"}"#) {
                    let n = json_str(payload, b"message")
                        .and_then(|m| m.strip_prefix(b"m"))
                        .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok());
                    if let Some(start) = n.and_then(|n| chat_starts.get(n)) {
                        let start = start.load(Ordering::Relaxed);
                        if start > 0 {
                            chat_latency.record(now.saturating_sub(start));
                        }
                    }
                    return;
                }
                if json_str(payload, b"kind") != Some(b"gift".as_slice()) {
                    return;
                }
                gift_bytes.fetch_add(payload.len() as u64, Ordering::Relaxed);
                let sender = json_str(payload, b"senderId").and_then(|s| index.get(s));
                let (Some(&s), Some(combo)) = (sender, json_number(payload, b"combo")) else {
                    combos.unknown.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                let verdict = if combo == last[s] + 1 {
                    &combos.in_order
                } else if combo <= last[s] {
                    &combos.repeats
                } else {
                    &combos.gaps
                };
                verdict.fetch_add(1, Ordering::Relaxed);
                last[s] = last[s].max(combo);
                if let Some(start) = starts[s].get(combo as usize) {
                    let start = start.load(Ordering::Relaxed);
                    if start > 0 {
                        latency.record(now.saturating_sub(start));
                    }
                }
            }) as relay_scale::Inspector
        });
        viewers_runtime.spawn(read_frames(
            socket,
            (planned + planned_chat) as u64,
            counters.clone(),
            inspect,
        ));
    }

    let cpu_before = relay.cpu_micros();
    let (machine_before, own_before) = (machine_cpu_micros(), process_cpu_micros("self"));
    let viewers_before = threads_cpu_micros("viewer");
    let post_latency = Arc::new(Histogram::default());
    let (created, refused, off_combo) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let send_start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for (s, fan) in fans.iter().enumerate() {
        let http = sender_client(s);
        let url = format!("{}/api/broadcasts/{id}/gifts", p.base);
        let (api_key, bearer) = (t.api_key.clone(), format!("Bearer {}", fan.token));
        let (starts, post_latency) = (starts.clone(), post_latency.clone());
        let (created, refused, off_combo) = (created.clone(), refused.clone(), off_combo.clone());
        tasks.push(tokio::spawn(async move {
            for k in 1..=per_sender {
                // Gift n of the whole run goes at n / RATE; fan s sends gifts s, s +
                // SENDERS, s + 2 SENDERS, ...
                let n = (k - 1) * senders + s;
                tokio::time::sleep_until(
                    send_start + Duration::from_micros(n as u64 * 1_000_000 / rate),
                )
                .await;
                let start = now_micros();
                starts[s][k].store(start, Ordering::Relaxed);
                let answer = http
                    .post(&url)
                    .header("x-api-key", &api_key)
                    .header("authorization", &bearer)
                    .header("idempotency-key", format!("screen-{s}-{k}"))
                    .json(&json!({"giftId": "rose"}))
                    .send()
                    .await;
                post_latency.record(now_micros().saturating_sub(start));
                match answer {
                    Ok(a) if a.status() == 201 => {
                        created.fetch_add(1, Ordering::Relaxed);
                        let body: serde_json::Value = a.json().await.unwrap_or_default();
                        if body["combo"].as_u64() != Some(k as u64) {
                            off_combo.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(a) => {
                        if refused.fetch_add(1, Ordering::Relaxed) < 3 {
                            let status = a.status();
                            eprintln!(
                                "gift refused: {status} {}",
                                a.text().await.unwrap_or_default()
                            );
                        }
                    }
                    Err(e) => {
                        if refused.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("gift failed: {e}");
                        }
                    }
                }
            }
        }));
    }
    let chat_failed = Arc::new(AtomicU64::new(0));
    for (c, talker) in talkers.iter().enumerate() {
        let http = sender_client(senders + c);
        let url = format!("{}/api/streams/{stream}/chat", p.base);
        let (api_key, bearer) = (t.api_key.clone(), format!("Bearer {}", talker.token));
        let (chat_starts, chat_failed) = (chat_starts.clone(), chat_failed.clone());
        tasks.push(tokio::spawn(async move {
            for k in 0..per_chatter {
                // Message n of the run goes at n / CHAT_RATE; chatter c sends c, c +
                // CHATTERS, ...
                let n = k * chatters + c;
                tokio::time::sleep_until(
                    send_start + Duration::from_micros(n as u64 * 1_000_000 / chat_rate.max(1)),
                )
                .await;
                chat_starts[n].store(now_micros(), Ordering::Relaxed);
                let answer = http
                    .post(&url)
                    .header("x-api-key", &api_key)
                    .header("authorization", &bearer)
                    .json(&json!({"message": format!("m{n}")}))
                    .send()
                    .await;
                match answer {
                    Ok(a) if a.status() == 200 => {}
                    Ok(a) => {
                        if chat_failed.fetch_add(1, Ordering::Relaxed) < 3 {
                            let status = a.status();
                            eprintln!(
                                "chat refused: {status} {}",
                                a.text().await.unwrap_or_default()
                            );
                        }
                    }
                    Err(e) => {
                        if chat_failed.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("chat failed: {e}");
                        }
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let sent_in = send_start.elapsed();
    wait_delivery(
        &counters,
        connected,
        Duration::from_secs(5),
        Duration::from_secs(60),
    )
    .await;
    let last_at = counters.last_frame_at.load(Ordering::Relaxed);
    let cpu = relay.cpu_micros().saturating_sub(cpu_before);
    let own = process_cpu_micros("self").saturating_sub(own_before);
    let viewers_cpu = threads_cpu_micros("viewer").saturating_sub(viewers_before);
    let machine = machine_cpu_micros();
    let (busy, total) = (
        machine.0.saturating_sub(machine_before.0),
        machine.1.saturating_sub(machine_before.1).max(1),
    );
    let delivered = counters.frames.load(Ordering::Relaxed);
    let texts = counters.texts.load(Ordering::Relaxed);
    let chat_sent = planned_chat as u64 - chat_failed.load(Ordering::Relaxed);
    let dropped = relay.metric("chat_relay_dropped_slow_clients_total").await;
    let created = created.load(Ordering::Relaxed);
    let load_after = load_average();

    let window = std::env::var("BATCH_WINDOW_MS").unwrap_or_else(|_| {
        let default = chat_relay::config::DEFAULT_BATCH_WINDOW.as_millis();
        format!("{default} (default)")
    });
    println!(
        "gift to screen: {connected} of {viewers} viewers on one relay, {senders} fans sending {rate} gifts/s for {seconds} s, {chatters} chatters sending {chat_rate} messages/s; batch frames: {}; batch window {window} ms",
        if batch == 1 { "yes" } else { "no" }
    );
    println!("  load average {load_before} before, {load_after} after");
    println!(
        "  connect: {connected} sockets in {:.1} s; relay RSS {} KiB",
        connect_time.as_secs_f64(),
        relay.rss_kib()
    );
    println!(
        "  POST /api/broadcasts/{{id}}/gifts: {created} created of {planned} in {:.1} s ({:.0} gifts/s), {} refused or failed; {}",
        sent_in.as_secs_f64(),
        created as f64 / sent_in.as_secs_f64(),
        refused.load(Ordering::Relaxed),
        post_latency.summary()
    );
    println!(
        "  events on the sockets: {delivered} of {} ({} sockets with every event, {} closed by the relay, chat_relay_dropped_slow_clients_total {dropped}), in {texts} frames ({:.2} events a frame), the last {:.1} s after the first POST",
        (created + chat_sent) * connected,
        counters.done.load(Ordering::Relaxed),
        counters.closed.load(Ordering::Relaxed),
        delivered as f64 / texts.max(1) as f64,
        last_at.saturating_sub(now_micros() - send_start.elapsed().as_micros() as u64) as f64 / 1e6,
    );
    println!(
        "  inspected frames whose counted events differ from the parsed ones: {}; a gift event is {} bytes (mean)",
        counters.miscounted.load(Ordering::Relaxed),
        gift_bytes.load(Ordering::Relaxed) / latency.count().max(1)
    );
    println!(
        "  POST to gift event on the socket (every {sample}th socket): {}",
        latency.summary()
    );
    if planned_chat > 0 {
        println!(
            "  chat: {chat_sent} of {planned_chat} messages posted; POST to message on the socket (every {sample}th socket): {}",
            chat_latency.summary()
        );
    }
    println!(
        "  combo values on those sockets: {} in order, {} gaps, {} repeats, {} unreadable; {} POST answers with a combo other than the fan's gift count",
        combos.in_order.load(Ordering::Relaxed),
        combos.gaps.load(Ordering::Relaxed),
        combos.repeats.load(Ordering::Relaxed),
        combos.unknown.load(Ordering::Relaxed),
        off_combo.load(Ordering::Relaxed)
    );
    println!(
        "  relay CPU {:.1} s: {:.2} µs per delivered event, {:.2} µs per frame",
        cpu as f64 / 1e6,
        cpu as f64 / delivered.max(1) as f64,
        cpu as f64 / texts.max(1) as f64
    );
    // Whether the machine had CPU to spare while the events went out: the cores' busy time
    // over the sending and the delivery that followed, and whose it was.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let share = |micros: u64| micros as f64 / total as f64 * cores;
    println!(
        "  machine CPU from the first POST to the last event: {:.2} of {cores:.0} cores busy: the relay {:.2}, the viewers' sockets {:.2}, edgehost and the fans {:.2}, the rest {:.2}",
        share(busy),
        share(cpu),
        share(viewers_cpu),
        share(own.saturating_sub(viewers_cpu)),
        share(busy.saturating_sub(cpu + own)),
    );
    relay.stop().await;
    p.stop().await;
    viewers_runtime.shutdown_background();
}
