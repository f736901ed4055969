//! Serving benchmark, on loopback:
//!
//! 1. a plain hyper "hello" handler (the floor: HTTP and the load generator alone),
//! 2. edgehost serving the host-probe component's `/hello` (a fresh instance per request),
//! 3. per-request instantiation without HTTP (`instantiate_pre` + handler call).
//!
//! Run: `cargo bench -p platform-tests --bench serve --profile host` (the `host` profile is the
//! one `cargo edgehost` uses; the default bench profile inherits the wasm-oriented release
//! profile with LTO, which is slow to build). The load generator shares the machine with
//! the server, so absolute numbers are pessimistic; compare the rows.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use platform_tests::load::{self, Plan, micros, percentile};

/// Iterations of the instantiation loop.
const INSTANTIATIONS: usize = 2_000;

fn main() -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> Result<()> {
    let manifest = platform_tests::workspace_root().join("tests/fixtures/host-probe/spin.toml");
    edgehost::build_components(&manifest)?;
    let state = std::env::temp_dir().join(format!("edgehost-bench-{}", std::process::id()));
    let plan = Plan::default();
    plan.describe();

    // One connection: each request waits for the previous answer, so the latency
    // difference is what edgehost adds per request.
    let one = Plan {
        connections: 1,
        ..Plan::default()
    };
    let plain = plain_hello_server().await?;
    load::run(plain, Plan::default(), 200, get("/hello"))
        .await?
        .report("plain hyper /hello");
    let plain_one = load::run(plain, one, 200, get("/hello")).await?;
    plain_one.report("plain hyper /hello, 1 conn");

    let opts = edgehost::Options {
        manifest: manifest.clone(),
        listen: "127.0.0.1:0".parse()?,
        state_dir: Some(state.clone()),
        ..Default::default()
    };
    let server = edgehost::Server::start(opts.clone()).await?;
    let warm_up = Plan {
        max_requests: 200,
        ..Plan::default()
    };
    load::run(server.local_addr(), warm_up, 200, get("/hello")).await?;
    load::run(server.local_addr(), Plan::default(), 200, get("/hello"))
        .await?
        .report("edgehost /hello");
    let edge_one = load::run(server.local_addr(), one, 200, get("/hello")).await?;
    edge_one.report("edgehost /hello, 1 conn");
    server.shutdown().await?;
    let p50 = |r: &load::LoadResult| percentile(&mut r.latencies.clone(), 50.0);
    println!(
        "added per request by edgehost (1 connection, p50): {}",
        micros(p50(&edge_one).saturating_sub(p50(&plain_one)))
    );

    let timings = edgehost::bench_instantiation(&opts, "probe", "/hello", INSTANTIATIONS).await?;
    let mut inst: Vec<Duration> = timings.iter().map(|t| t.0).collect();
    let mut total: Vec<Duration> = timings.iter().map(|t| t.1).collect();
    let sum: Duration = total.iter().sum();
    println!(
        "instantiate (no HTTP, {INSTANTIATIONS} sequential): instantiate p50 {} p99 {}; \
         instantiate+handle p50 {} p99 {} ({:.0}/s on one task)",
        micros(percentile(&mut inst, 50.0)),
        micros(percentile(&mut inst, 99.0)),
        micros(percentile(&mut total, 50.0)),
        micros(percentile(&mut total, 99.0)),
        INSTANTIATIONS as f64 / sum.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&state);
    Ok(())
}

fn get(path: &'static str) -> impl Fn(usize) -> hyper::Request<Full<Bytes>> {
    move |_| {
        hyper::Request::get(path)
            .body(Full::new(Bytes::new()))
            .expect("a valid request")
    }
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
