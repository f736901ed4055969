//! Gifts per second and their latency with 16 concurrent senders (`SENDERS`) to one
//! creator, each gift two ledger transfers, a guarded debit and an idempotency record in
//! one transaction; then the ledger's invariant check. SQLite, then PostgreSQL + Redis
//! (throwaway servers) in the same run.
//!
//! Run: `cargo bench -p platform-tests --bench gifts --profile host` (`BACKEND=sqlite` or
//! `BACKEND=postgres` for one of them).

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use platform_tests::backends::Backend;
use platform_tests::load::{self, Plan};
use platform_tests::{Exchange, Method, Platform};
use serde_json::json;

const JOBS_TOKEN: &str = "jobs-token-for-the-gift-benchmark-0123456789";

fn main() -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> Result<()> {
    // Senders, each on a keep-alive connection of its own (`SENDERS`, 16 by default).
    let senders = platform_tests::env_or("SENDERS", 16usize);
    let plan = Plan {
        connections: senders,
        ..Plan::default()
    };
    plan.describe();
    // `BACKEND=sqlite` or `BACKEND=postgres` runs one of them.
    let only = std::env::var("BACKEND").unwrap_or_default();
    for (backend, name, label) in [
        (Backend::Sqlite, "sqlite", "SQLite"),
        (Backend::Postgres, "postgres", "PostgreSQL"),
    ] {
        if !only.is_empty() && only != name {
            continue;
        }
        let p = Platform::start_on(backend, &[("jobs_token", JOBS_TOKEN)]).await;
        measure(&p, plan, label).await?;
        p.stop().await;
    }
    Ok(())
}

async fn measure(p: &Platform, plan: Plan, label: &str) -> Result<()> {
    let t = p.register_client("Bench").await;
    let host = p.signup(&t, "host").await;
    let body = json!({"name": "Rose", "priceTokens": 10});
    let (status, gift) = p
        .as_server(&t, Method::PUT, "/api/v1/gifts/rose", Some(&body))
        .answer()
        .await;
    anyhow::ensure!(status == 200, "gift: {gift}");
    let mut senders = Vec::new();
    for i in 0..plan.connections {
        let fan = p
            .signup_with_tokens(&t, &format!("fan{i}"), 1_000_000)
            .await;
        senders.push(format!("Bearer {}", fan.token));
    }
    let (status, b) = p
        .as_user(&host, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Bench"}))
        .await;
    anyhow::ensure!(status == 200, "broadcast: {b}");
    let id = b["id"].as_str().unwrap_or_default().to_string();
    let (status, live) = p
        .as_user(&host, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    anyhow::ensure!(status == 200, "live: {live}");
    let path = format!("/api/broadcasts/{id}/gifts");
    let api_key = t.api_key.clone();
    let gift_body = json!({"giftId": "rose"}).to_string();
    let run_label = label.to_string();
    // Request n is sender n mod 16's gift with its own key.
    let make = move |n: usize| {
        let key = format!("{run_label}-gift-{n}");
        hyper::Request::builder()
            .method("POST")
            .uri(path.as_str())
            .header("x-api-key", api_key.as_str())
            .header("authorization", senders[n % senders.len()].as_str())
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Full::new(Bytes::from(gift_body.clone())))
            .expect("a valid request")
    };
    let timings = p.sqlite_writer_timings().filter(|_| p.backends.is_none());
    if let Some(t) = &timings {
        t.start();
    }
    eprintln!("{label}: sending gifts");
    let result = load::run(p.addr(), plan, 201, make).await?;
    result.report(&format!("{label:<10} POST /api/broadcasts/{{id}}/gifts"));
    if let Some(t) = timings {
        load::report_writer(&t.take());
    }
    let (status, check) = p
        .request(Method::POST, "/api/jobs/check-ledger")
        .bearer_auth(JOBS_TOKEN)
        .answer()
        .await;
    anyhow::ensure!(status == 200 && check["ok"] == true, "ledger: {check}");
    let (_, w) = p.as_user(&host, Method::GET, "/api/wallet").answer().await;
    println!(
        "{label:<10} ledger consistent after the run: {} accounts, {} transfers; host diamonds {}",
        check["accounts"], check["transfers"], w["diamonds"]
    );
    Ok(())
}
