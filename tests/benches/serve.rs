//! Serving benchmark, on loopback:
//!
//! 1. a plain hyper "hello" handler (the floor: HTTP and the load generator alone),
//! 2. edgehost serving the host-probe component's `/hello` (a fresh instance per request),
//! 3. per-request instantiation without HTTP (`instantiate_pre` + handler call).
//!
//! Each server runs in a child process of its own with a default multi-threaded tokio
//! runtime, as `edgehost up` does, so the load generator does not share its scheduler.
//! Both are measured with 16 connections (throughput) and with one connection, where each
//! request waits for the previous answer: the difference of the one-connection p50
//! latencies is what edgehost adds to a request.
//!
//! Run: `cargo bench -p platform-tests --bench serve --profile host` (the `host` profile is the
//! one `cargo edgehost` uses; the default bench profile inherits the wasm-oriented release
//! profile with LTO, which is slow to build). The load generator shares the machine with
//! the server, so absolute numbers are pessimistic; compare the rows.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use platform_tests::load::{self, LoadResult, Plan, micros, percentile};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

/// Iterations of the instantiation loop.
const INSTANTIATIONS: usize = 2_000;
/// Set in a child process: which server it runs (`plain` or `edgehost`).
const CHILD_VAR: &str = "SERVE_BENCH_SERVER";

fn main() -> Result<()> {
    if let Ok(kind) = std::env::var(CHILD_VAR) {
        return tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(server_child(&kind));
    }
    // The load generator needs one thread; the other core is the server's.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

fn probe_manifest() -> PathBuf {
    platform_tests::workspace_root().join("tests/fixtures/host-probe/spin.toml")
}

fn options(state: PathBuf) -> Result<edgehost::Options> {
    Ok(edgehost::Options {
        manifest: probe_manifest(),
        listen: "127.0.0.1:0".parse()?,
        state_dir: Some(state),
        ..Default::default()
    })
}

async fn run() -> Result<()> {
    edgehost::build_components(&probe_manifest())?;
    let state = std::env::temp_dir().join(format!("edgehost-bench-{}", std::process::id()));
    Plan::default().describe();

    let plain = measure("plain").await?;
    let edge = measure("edgehost").await?;
    plain.0.report("plain hyper /hello");
    plain.1.report("plain hyper /hello, 1 conn");
    edge.0.report("edgehost /hello");
    edge.1.report("edgehost /hello, 1 conn");
    let p50 = |r: &LoadResult| percentile(&mut r.latencies.clone(), 50.0);
    println!(
        "added per request by edgehost (1 connection, p50): {}",
        micros(p50(&edge.1).saturating_sub(p50(&plain.1)))
    );

    let timings =
        edgehost::bench_instantiation(&options(state.clone())?, "probe", "/hello", INSTANTIATIONS)
            .await?;
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

/// Starts the `kind` server in a child process; answers (16 connections, 1 connection).
async fn measure(kind: &str) -> Result<(LoadResult, LoadResult)> {
    let (mut child, addr) = spawn_server(kind).await?;
    let warm_up = Plan {
        max_requests: 2_000,
        ..Plan::default()
    };
    load::run(addr, warm_up, 200, get("/hello")).await?;
    let many = load::run(addr, Plan::default(), 200, get("/hello")).await?;
    let one = Plan {
        connections: 1,
        ..Plan::default()
    };
    let single = load::run(addr, one, 200, get("/hello")).await?;
    drop(child.stdin.take());
    child.wait().await?;
    Ok((many, single))
}

async fn spawn_server(kind: &str) -> Result<(Child, SocketAddr)> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(CHILD_VAR, kind)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("the server process starts")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let line = BufReader::new(stdout)
        .lines()
        .next_line()
        .await?
        .context("the server's address")?;
    Ok((child, line.parse()?))
}

/// The child: serves until its standard input closes.
async fn server_child(kind: &str) -> Result<()> {
    let state = std::env::temp_dir().join(format!("edgehost-bench-{}", std::process::id()));
    let mut edgehost_server = None;
    let addr = match kind {
        "plain" => plain_hello_server().await?,
        _ => {
            let server = edgehost::Server::start(options(state.clone())?).await?;
            let addr = server.local_addr();
            edgehost_server = Some(server);
            addr
        }
    };
    println!("{addr}");
    let _ = tokio::io::stdin().read(&mut [0u8; 1]).await;
    if let Some(server) = edgehost_server {
        server.shutdown().await?;
        let _ = std::fs::remove_dir_all(&state);
    }
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
