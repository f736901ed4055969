//! Serving benchmark, on loopback:
//!
//! 1. a plain hyper "hello" handler (the floor: HTTP and the load generator alone),
//! 2. edgehost serving the host-probe component's `/hello` (a fresh instance per request),
//! 3. per-request instantiation without HTTP (`instantiate_pre` + handler call).
//!
//! Run: `cargo bench -p edgehost --bench serve --profile host` (the `host` profile is the
//! one `cargo edgehost` uses; the default bench profile inherits the wasm-oriented release
//! profile with LTO, which is slow to build). The load generator shares the machine with
//! the server, so absolute numbers are pessimistic; compare the rows.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;

/// Concurrent keep-alive connections of the load generator.
const CONNECTIONS: usize = 16;
/// How long each load run lasts at most...
const RUN_FOR: Duration = Duration::from_secs(5);
/// ... and how many requests it sends at most.
const MAX_REQUESTS: usize = 200_000;
/// Iterations of the instantiation loop.
const INSTANTIATIONS: usize = 2_000;

fn main() -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> Result<()> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("host/ is inside the workspace")?;
    let manifest = workspace.join("tests/fixtures/host-probe/spin.toml");
    edgehost::build_components(&manifest)?;
    let state = std::env::temp_dir().join(format!("edgehost-bench-{}", std::process::id()));
    println!(
        "loopback, {CONNECTIONS} keep-alive connections, up to {} s or {MAX_REQUESTS} requests per run, {} cores",
        RUN_FOR.as_secs(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );

    let plain = plain_hello_server().await?;
    report("plain hyper /hello", &load(plain, "/hello").await?);

    let opts = edgehost::Options {
        manifest: manifest.clone(),
        listen: "127.0.0.1:0".parse()?,
        state_dir: Some(state.clone()),
        ..Default::default()
    };
    let server = edgehost::Server::start(opts.clone()).await?;
    load_n(server.local_addr(), "/hello", 200).await?; // warm-up
    report(
        "edgehost /hello",
        &load(server.local_addr(), "/hello").await?,
    );
    server.shutdown().await?;

    let timings = edgehost::bench_instantiation(&opts, "probe", "/hello", INSTANTIATIONS).await?;
    let mut inst: Vec<Duration> = timings.iter().map(|t| t.0).collect();
    let mut total: Vec<Duration> = timings.iter().map(|t| t.1).collect();
    let sum: Duration = total.iter().sum();
    println!(
        "instantiate (no HTTP, {INSTANTIATIONS} sequential): instantiate p50 {} p99 {}; \
         instantiate+handle p50 {} p99 {} ({:.0}/s on one task)",
        us(percentile(&mut inst, 50.0)),
        us(percentile(&mut inst, 99.0)),
        us(percentile(&mut total, 50.0)),
        us(percentile(&mut total, 99.0)),
        INSTANTIATIONS as f64 / sum.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&state);
    Ok(())
}

struct LoadResult {
    requests: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

fn report(name: &str, r: &LoadResult) {
    let mut lat = r.latencies.clone();
    println!(
        "{name:<22} {:>9.0} req/s  p50 {:>8}  p99 {:>8}  ({} requests in {:.1} s)",
        r.requests as f64 / r.elapsed.as_secs_f64(),
        us(percentile(&mut lat, 50.0)),
        us(percentile(&mut lat, 99.0)),
        r.requests,
        r.elapsed.as_secs_f64()
    );
}

fn us(d: Duration) -> String {
    format!("{:.0}µs", d.as_secs_f64() * 1e6)
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i.min(v.len() - 1)]
}

async fn load(addr: SocketAddr, path: &'static str) -> Result<LoadResult> {
    load_bounded(addr, path, MAX_REQUESTS, RUN_FOR).await
}

async fn load_n(addr: SocketAddr, path: &'static str, n: usize) -> Result<LoadResult> {
    load_bounded(addr, path, n, RUN_FOR).await
}

/// `CONNECTIONS` keep-alive connections sending `GET path` until `max` requests were sent
/// or `run_for` elapsed.
async fn load_bounded(
    addr: SocketAddr,
    path: &'static str,
    max: usize,
    run_for: Duration,
) -> Result<LoadResult> {
    let sent = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + run_for;
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let sent = sent.clone();
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut latencies = Vec::new();
            while Instant::now() < deadline && sent.fetch_add(1, Ordering::Relaxed) < max {
                let req = hyper::Request::get(path)
                    .header(hyper::header::HOST, addr.to_string())
                    .body(Empty::<Bytes>::new())?;
                let t = Instant::now();
                let resp = sender.send_request(req).await?;
                anyhow::ensure!(resp.status() == 200, "status {}", resp.status());
                resp.into_body().collect().await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    Ok(LoadResult {
        requests: latencies.len(),
        elapsed: start.elapsed(),
        latencies,
    })
}

/// A plain hyper HTTP/1 server answering "hello", for comparison.
async fn plain_hello_server() -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                        b"hello",
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}
