//! Outbound webhooks with edgehost's scheduler running `deliver-webhooks` every 2 s (as
//! `edgehost up` does), receivers on loopback:
//!
//! 1. event to delivery latency at a healthy receiver: from the API's answer to a change
//!    (a broadcast created, its `broadcast.created` event committed with it) to the event's
//!    arrival at the receiver; the target is within 5 s;
//! 2. the API's latency (broadcast creates, 4 concurrent clients, for 8 s: four rounds of
//!    the job) with every event also going to a receiver that never answers (measured once
//!    a delivery to it is held open; each round waits out its 15 s timeout), against the
//!    same load with only a healthy receiver.
//!
//! Run: `cargo bench -p platform-tests --bench webhooks --profile host`.

use anyhow::{Result, ensure};
use platform_tests::backends::Backend;
use platform_tests::load::{micros, percentile};
use platform_tests::webhook_receiver::{Answer, Receiver};
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::json;
use std::time::{Duration, Instant};

const EVENTS: usize = 40;
const CLIENTS: usize = 4;
/// How long each load runs: several rounds of the 2-second job.
const LOAD_FOR: Duration = Duration::from_secs(8);

fn main() -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn register(p: &Platform, t: &Tenant, url: &str) -> Result<()> {
    let (status, answer) = p
        .as_server(
            t,
            Method::POST,
            "/api/v1/webhooks",
            Some(&json!({"url": url, "events": ["*"]})),
        )
        .answer()
        .await;
    ensure!(status == 201, "registration failed: {answer}");
    Ok(())
}

async fn create(p: &Platform, u: &User) -> Result<Duration> {
    let began = Instant::now();
    let status = p
        .as_user(u, Method::POST, "/api/broadcasts")
        .json(&json!({"title": "bench", "visibility": "public"}))
        .status()
        .await;
    ensure!(status == 200, "create answered {status}");
    Ok(began.elapsed())
}

/// Broadcast creates from `CLIENTS` concurrent clients for [`LOAD_FOR`]; answers every
/// latency.
async fn api_load(p: &Platform, users: &[User]) -> Result<Vec<Duration>> {
    let mut latencies = Vec::new();
    let began = Instant::now();
    let runs = users.iter().map(|u| async move {
        let mut mine = Vec::new();
        while began.elapsed() < LOAD_FOR {
            mine.push(create(p, u).await?);
        }
        Ok::<_, anyhow::Error>(mine)
    });
    for run in futures_util::future::join_all(runs).await {
        latencies.extend(run?);
    }
    Ok(latencies)
}

fn report(name: &str, latencies: &mut [Duration]) {
    println!(
        "{name:<44} p50 {:>9}  p99 {:>9}  max {:>9}  ({} requests)",
        micros(percentile(latencies, 50.0)),
        micros(percentile(latencies, 99.0)),
        micros(percentile(latencies, 100.0)),
        latencies.len()
    );
}

async fn run() -> Result<()> {
    let p =
        Platform::start_scheduled(Backend::Sqlite, &[("webhook_allow_http", "true")], true).await;
    let t = p.register_client("Bench").await;
    let healthy = Receiver::start().await;
    register(&p, &t, &healthy.url("/in")).await?;
    let mut users = Vec::new();
    for n in 0..CLIENTS {
        users.push(p.signup(&t, &format!("bench{n}")).await);
    }
    // Let the sign-ups' events go out first.
    healthy.wait_for(CLIENTS, Duration::from_secs(10)).await;

    // 1. Event to delivery, one event at a time.
    let mut latencies = Vec::new();
    for _ in 0..EVENTS {
        let before = healthy.received().len();
        create(&p, &users[0]).await?;
        let committed = Instant::now();
        let seen = healthy.wait_for(before + 1, Duration::from_secs(30)).await;
        ensure!(seen.len() > before, "the event did not arrive within 30 s");
        latencies.push(seen[before].at.saturating_duration_since(committed));
    }
    report("event -> delivery (healthy receiver)", &mut latencies);
    let max = percentile(&mut latencies, 100.0);
    ensure!(
        max <= Duration::from_secs(5),
        "an event took {max:?} to arrive"
    );

    // 2. The API with only the healthy receiver, then with a hanging one too.
    let mut alone = api_load(&p, &users).await?;
    report("broadcast create, healthy receiver", &mut alone);
    let hanging = Receiver::start().await;
    hanging.always(Answer::Hang);
    register(&p, &t, &hanging.url("/never")).await?;
    create(&p, &users[0]).await?;
    let held = hanging.wait_for(1, Duration::from_secs(10)).await;
    ensure!(
        !held.is_empty(),
        "no delivery reached the never-answering receiver"
    );
    let mut with_hang = api_load(&p, &users).await?;
    report(
        "broadcast create, + never-answering receiver",
        &mut with_hang,
    );
    println!(
        "never-answering receiver: {} requests held open meanwhile",
        hanging.received().len()
    );
    p.stop().await;
    Ok(())
}
