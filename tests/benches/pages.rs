//! Pages benchmark, on loopback through edgehost (the real `spin.toml` application):
//! recording-page renders per second, 304 answers per second (a conditional request with
//! the page's ETag), and a content-hashed asset per second, gzip-encoded.
//!
//! Run: `cargo bench -p platform-tests --bench pages --profile host`. The load generator
//! (reqwest, keep-alive) shares the machine with the server, so absolute numbers are
//! pessimistic; compare the rows of one run.

use platform_tests::{Method, Platform};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Concurrent requests in flight.
const CONCURRENCY: usize = 16;
/// How long each run lasts at most...
const RUN_FOR: Duration = Duration::from_secs(5);
/// ... and how many requests it sends at most.
const MAX_REQUESTS: usize = 100_000;

const RECORD: &str =
    "/streams/0f8fad5b-d9cb-469f-a165-70867728950e/record?layout=grid3x3&width=1280&height=720";

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let p = Platform::start().await;
    println!(
        "loopback, {CONCURRENCY} concurrent keep-alive requests, up to {} s or {MAX_REQUESTS} requests per run, {} cores",
        RUN_FOR.as_secs(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let first = p
        .request(Method::GET, RECORD)
        .send()
        .await
        .expect("record page");
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().expect("etag").to_string();
    let html = first.text().await.expect("body");
    let asset = html
        .split("src=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|u| u.contains("/static/layout."))
        .expect("layout.js is referenced")
        .to_string();
    let p = Arc::new(p);

    load(&p, RECORD, &[], 200, 200).await; // warm-up
    let render = load(&p, RECORD, &[], 200, MAX_REQUESTS).await;
    report(&format!("record page 200 ({} B)", html.len()), &render);
    let conditional = load(&p, RECORD, &[("if-none-match", &etag)], 304, MAX_REQUESTS).await;
    report("record page 304", &conditional);
    let gz = load(
        &p,
        &asset,
        &[("accept-encoding", "gzip")],
        200,
        MAX_REQUESTS,
    )
    .await;
    report("layout.js asset (gzip)", &gz);
    println!(
        "304 / 200 throughput: {:.2}x",
        conditional.per_second() / render.per_second()
    );
}

struct Run {
    requests: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Run {
    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

fn report(name: &str, run: &Run) {
    let mut lat = run.latencies.clone();
    lat.sort_unstable();
    let pct = |p: f64| {
        let i = ((p / 100.0) * (lat.len().saturating_sub(1)) as f64).round() as usize;
        lat.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    println!(
        "{name:<28} {:>8.0} req/s  p50 {:>6.0}µs  p99 {:>6.0}µs  ({} requests in {:.1} s)",
        run.per_second(),
        pct(50.0),
        pct(99.0),
        run.requests,
        run.elapsed.as_secs_f64()
    );
}

/// `CONCURRENCY` tasks sending `GET path` until `max` requests or `RUN_FOR`; every answer
/// must have status `expect`.
async fn load(
    p: &Arc<Platform>,
    path: &str,
    headers: &[(&str, &str)],
    expect: u16,
    max: usize,
) -> Run {
    let sent = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + RUN_FOR;
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (p, sent) = (p.clone(), sent.clone());
        let path = path.to_string();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline && sent.fetch_add(1, Ordering::Relaxed) < max {
                let mut request = p.request(Method::GET, &path);
                for (k, v) in &headers {
                    request = request.header(k, v);
                }
                let began = Instant::now();
                let response = request.send().await.expect("request");
                assert_eq!(response.status().as_u16(), expect, "{path}");
                response.bytes().await.expect("body");
                latencies.push(began.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("load task"));
    }
    Run {
        requests: latencies.len(),
        elapsed: start.elapsed(),
        latencies,
    }
}
