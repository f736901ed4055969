//! Analytics at size: a live broadcast with 12 hours of 5-second viewer reports (every one
//! sent through the API, the clock moved 5 s between them) and a million chat messages,
//! then its analytics read at each granularity. Reads touch the minute buckets (720 rows),
//! never the million raw messages, so they answer as fast as for a short broadcast.
//!
//! The million messages are written beneath the API in one statement (the API would take
//! most of an hour to accept them): the raw rows in `chat_messages`, spread over the 12
//! hours, and their counts added to each minute's bucket, as `chat::post` does one at a
//! time. The read must then report every one of them.
//!
//! Recording: what counting an event adds to the request that causes it. Chat posts to the
//! broadcast (the message's transaction also upserts its minute and its chatter) against
//! the same posts to a scheduled event's chat (no broadcast, nothing counted), alternated
//! in rounds; the difference is an upper bound of the recording's cost (the broadcast's
//! chat also loads the broadcast and checks the viewer may watch it).
//!
//! Run: `cargo bench -p platform-tests --bench analytics --profile host` (SQLite).

use anyhow::{Result, ensure};
use platform_tests::load::{micros, percentile};
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const HOURS: i64 = 12;
const REPORT_EVERY_SECS: u64 = 5;
const SEEDED_MESSAGES: i64 = 1_000_000;
const SEEDED_CHATTERS: i64 = 5_000;
const READS: usize = 200;
const POSTS: usize = 400;

fn main() -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

fn report(name: &str, samples: &mut [Duration]) -> Duration {
    let (p50, p99) = (percentile(samples, 50.0), percentile(samples, 99.0));
    println!(
        "{name:<52} p50 {:>8}  p99 {:>8}  ({} requests)",
        micros(p50),
        micros(p99),
        samples.len()
    );
    p99
}

/// `user` signed in again (`username`): a fresh access token, as an app refreshes it while
/// the clock runs through the hours.
async fn signed_in_again(p: &Platform, t: &Tenant, username: &str, user: &mut User) -> Result<()> {
    let (status, answer) = p
        .as_client(t, Method::POST, "/api/users/login")
        .json(&json!({"username": username, "password": "correct horse battery"}))
        .answer()
        .await;
    ensure!(status == 200, "login: {status} {answer}");
    user.token = answer["token"].as_str().unwrap_or_default().to_string();
    Ok(())
}

async fn post_json(p: &Platform, u: &User, path: &str, body: Value) -> Result<Value> {
    let (status, answer) = p.as_user(u, Method::POST, path).send_json(&body).await;
    ensure!(status == 200, "{path}: {status} {answer}");
    Ok(answer)
}

/// Keeps the broadcast live (the clock moves fast; a broadcast without a heartbeat for
/// 90 s goes stale).
async fn heartbeat(p: &Platform, owner: &User, id: &str) -> Result<()> {
    let path = format!("/api/sessions/{id}/heartbeat");
    let (status, answer) = p.as_user(owner, Method::POST, &path).answer().await;
    ensure!(status == 200, "heartbeat: {status} {answer}");
    Ok(())
}

/// One post by each of `users` to `path`; then the clock moves past the chat's rate
/// window. Answers each post's latency.
async fn chat_round(p: &Platform, users: &[User], path: &str) -> Result<Vec<Duration>> {
    let mut samples = Vec::new();
    for (i, u) in users.iter().enumerate() {
        let began = Instant::now();
        let (status, answer) = p
            .as_user(u, Method::POST, path)
            .send_json(&json!({"message": format!("hello number {i}, what a show")}))
            .await;
        samples.push(began.elapsed());
        ensure!(status == 200, "chat {path}: {status} {answer}");
    }
    p.advance_clock(Duration::from_secs(11));
    Ok(samples)
}

async fn run() -> Result<()> {
    let p = Platform::start().await;
    let t = p.register_client("Bench").await;
    let mut owner = p.signup(&t, "owner").await;
    let mut chatters = Vec::new();
    for i in 0..8 {
        chatters.push(p.signup(&t, &format!("chatter{i}")).await);
    }
    let b = post_json(
        &p,
        &owner,
        "/api/broadcasts",
        json!({"title": "Marathon", "visibility": "public"}),
    )
    .await?;
    let id = b["id"].as_str().unwrap_or_default().to_string();
    let stream_id = b["streamId"].as_str().unwrap_or_default().to_string();
    post_json(
        &p,
        &owner,
        &format!("/api/broadcasts/{id}/status"),
        json!({"status": "active"}),
    )
    .await?;
    let started = p.now();

    // 12 hours of 5-second reports through the API (heartbeats keep the broadcast live).
    let report_path = format!("/api/broadcasts/{id}/viewer-count");
    let reports = HOURS * 3600 / REPORT_EVERY_SECS as i64;
    let mut report_latency = Vec::new();
    for n in 0..reports {
        p.advance_clock(Duration::from_secs(REPORT_EVERY_SECS));
        let viewers = 100 + (n % 720) - (n % 7) * 3;
        let began = Instant::now();
        post_json(&p, &owner, &report_path, json!({"viewerCount": viewers})).await?;
        report_latency.push(began.elapsed());
        if n % 360 == 0 {
            signed_in_again(&p, &t, "owner", &mut owner).await?;
        }
        if n % 12 == 0 {
            heartbeat(&p, &owner, &id).await?;
        }
    }

    // A million messages beneath the API, spread evenly over the 12 hours, with their
    // counts in the minute buckets.
    let span_ms = HOURS * 3600 * 1000;
    let seeded = p
        .db_execute(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < CAST(?1 AS INTEGER)) \
             INSERT INTO chat_messages (id, client_id, stream_id, broadcast_id, sender_id, sender_name, message, created_at, created_ms) \
             SELECT 'seed-' || i, ?2, ?3, ?4, 'seed-user-' || (i % CAST(?5 AS INTEGER)), 'seeded', 'seeded message ' || i, \
               strftime('%Y-%m-%dT%H:%M:%SZ', (CAST(?6 AS INTEGER) * 1000 + i * CAST(?7 AS INTEGER) / CAST(?1 AS INTEGER)) / 1000, 'unixepoch'), \
               CAST(?6 AS INTEGER) * 1000 + i * CAST(?7 AS INTEGER) / CAST(?1 AS INTEGER) FROM n",
            &[
                &SEEDED_MESSAGES.to_string(),
                &t.client_id,
                &stream_id,
                &id,
                &SEEDED_CHATTERS.to_string(),
                &started.to_string(),
                &span_ms.to_string(),
            ],
        )
        .await;
    ensure!(seeded as i64 == SEEDED_MESSAGES, "seeded {seeded} messages");
    p.db_execute(
        "INSERT INTO analytics_minutes (broadcast_id, minute, client_id, messages) \
         SELECT ?1, per.minute, ?2, per.c FROM \
           (SELECT created_ms / 60000 * 60 AS minute, COUNT(*) AS c FROM chat_messages \
            WHERE client_id = ?2 AND stream_id = ?3 GROUP BY 1) AS per WHERE true \
         ON CONFLICT (broadcast_id, minute) DO UPDATE SET messages = analytics_minutes.messages + excluded.messages",
        &[&id, &t.client_id, &stream_id],
    )
    .await;
    p.db_execute(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < CAST(?2 AS INTEGER)) \
         INSERT INTO analytics_chatters (broadcast_id, user_id) SELECT ?1, 'seed-user-' || i FROM n",
        &[&id, &SEEDED_CHATTERS.to_string()],
    )
    .await;
    p.db_execute(
        "UPDATE analytics_minutes SET new_chatters = new_chatters + CAST(?2 AS INTEGER) \
         WHERE broadcast_id = ?1 AND minute = (SELECT MIN(minute) FROM analytics_minutes WHERE broadcast_id = ?1)",
        &[&id, &SEEDED_CHATTERS.to_string()],
    )
    .await;
    let bucketed = p
        .db_number(
            "SELECT SUM(messages) FROM analytics_minutes WHERE broadcast_id = ?1",
            &[&id],
        )
        .await;
    ensure!(
        bucketed == SEEDED_MESSAGES,
        "the buckets hold {bucketed} messages"
    );

    // Recording: chat posts to the broadcast against posts to a scheduled event's chat.
    signed_in_again(&p, &t, "owner", &mut owner).await?;
    for (i, chatter) in chatters.iter_mut().enumerate() {
        signed_in_again(&p, &t, &format!("chatter{i}"), chatter).await?;
    }
    let event = post_json(
        &p,
        &owner,
        "/api/events",
        json!({"title": "Next week", "scheduledFor": "2031-05-01T18:00:00Z"}),
    )
    .await?;
    let broadcast_chat = format!("/api/streams/{stream_id}/chat");
    let event_chat = format!(
        "/api/streams/{}/chat",
        event["streamId"].as_str().unwrap_or_default()
    );
    heartbeat(&p, &owner, &id).await?;
    chat_round(&p, &chatters, &broadcast_chat).await?;
    chat_round(&p, &chatters, &event_chat).await?;
    let (mut counted, mut uncounted) = (Vec::new(), Vec::new());
    while counted.len() < POSTS {
        heartbeat(&p, &owner, &id).await?;
        counted.extend(chat_round(&p, &chatters, &broadcast_chat).await?);
        uncounted.extend(chat_round(&p, &chatters, &event_chat).await?);
    }
    let posted = counted.len() as i64 + chatters.len() as i64;

    // Reads.
    let mut reads = Vec::new();
    for granularity in ["minute", "5m", "hour"] {
        let path = format!("/api/broadcasts/{id}/analytics?granularity={granularity}");
        let mut samples = Vec::new();
        let mut last = Value::Null;
        for _ in 0..READS {
            let began = Instant::now();
            let (status, answer) = p.as_user(&owner, Method::GET, &path).answer().await;
            samples.push(began.elapsed());
            ensure!(status == 200, "analytics: {status} {answer}");
            last = answer;
        }
        ensure!(
            last["messages"] == json!(SEEDED_MESSAGES + posted),
            "the analytics count {} messages",
            last["messages"]
        );
        let points = last["timeseries"].as_array().map_or(0, Vec::len);
        reads.push((granularity, samples, points));
    }

    println!(
        "a broadcast of {HOURS} h: {reports} viewer reports through the API, {SEEDED_MESSAGES} seeded + {posted} posted messages"
    );
    for (granularity, mut samples, points) in reads {
        report(
            &format!("GET .../analytics?granularity={granularity} ({points} points)"),
            &mut samples,
        );
    }
    report(
        "POST .../viewer-count (counts the minute)",
        &mut report_latency,
    );
    let with = report(
        "chat post to the broadcast (counts message, chatter)",
        &mut counted,
    );
    let without = report(
        "chat post to a scheduled event (nothing counted)",
        &mut uncounted,
    );
    let (with_p50, without_p50) = (
        percentile(&mut counted, 50.0),
        percentile(&mut uncounted, 50.0),
    );
    println!(
        "counting a chat message, at most: p50 {:.3} ms, p99 {:.3} ms",
        (with_p50.as_secs_f64() - without_p50.as_secs_f64()) * 1e3,
        (with.as_secs_f64() - without.as_secs_f64()) * 1e3
    );
    p.stop().await;
    Ok(())
}
