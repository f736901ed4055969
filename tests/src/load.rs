//! A small HTTP/1 load generator for the benchmarks: keep-alive connections on loopback,
//! each sending requests back to back, with per-request latencies.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How a run is bounded.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Concurrent keep-alive connections.
    pub connections: usize,
    /// Requests sent at most...
    pub max_requests: usize,
    /// ... within at most this long.
    pub run_for: Duration,
    /// Requests per second, spread evenly: request `n` is due at `n / rate` seconds, and
    /// its latency counts from then, so time spent waiting for a free connection when the
    /// server falls behind is counted too. `None`: each connection sends as soon as its
    /// last answer came (as fast as the server goes).
    pub rate: Option<f64>,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            connections: 16,
            max_requests: 200_000,
            run_for: Duration::from_secs(5),
            rate: None,
        }
    }
}

impl Plan {
    /// Prints the plan and the machine's cores, the header of every benchmark.
    pub fn describe(&self) {
        println!(
            "loopback, {} keep-alive connections, up to {} s or {} requests per run, {} cores",
            self.connections,
            self.run_for.as_secs(),
            self.max_requests,
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    }
}

pub struct LoadResult {
    pub requests: usize,
    pub elapsed: Duration,
    pub latencies: Vec<Duration>,
    /// Keep-alive connections the server closed during the run.
    pub reconnects: usize,
}

impl LoadResult {
    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// Prints one line: throughput, p50, p99.
    pub fn report(&self, name: &str) {
        let mut lat = self.latencies.clone();
        println!(
            "{name:<28} {:>9.0} req/s  p50 {:>8}  p99 {:>8}  ({} requests in {:.1} s{})",
            self.per_second(),
            micros(percentile(&mut lat, 50.0)),
            micros(percentile(&mut lat, 99.0)),
            self.requests,
            self.elapsed.as_secs_f64(),
            match self.reconnects {
                0 => String::new(),
                n => format!(", {n} reconnects"),
            }
        );
    }
}

pub fn micros(d: Duration) -> String {
    format!("{:.0}µs", d.as_secs_f64() * 1e6)
}

/// The `p`th percentile of `v` (sorted in place).
pub fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Runs `plan` against `addr`; `make(n)` builds the n-th request. Every answer must be
/// `expect_status`, else the run fails.
pub async fn run<F>(
    addr: SocketAddr,
    plan: Plan,
    expect_status: u16,
    make: F,
) -> anyhow::Result<LoadResult>
where
    F: Fn(usize) -> hyper::Request<Full<Bytes>> + Send + Sync + 'static,
{
    let make = Arc::new(make);
    let sent = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + plan.run_for;
    let mut tasks = Vec::new();
    for _ in 0..plan.connections {
        let (sent, make) = (sent.clone(), make.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(addr).await?;
            let mut latencies = Vec::new();
            let mut reconnects = 0;
            loop {
                let n = sent.fetch_add(1, Ordering::Relaxed);
                let due = plan
                    .rate
                    .map(|rate| start + Duration::from_secs_f64(n as f64 / rate));
                if n >= plan.max_requests || due.unwrap_or_else(Instant::now) >= deadline {
                    break;
                }
                if let Some(due) = due {
                    tokio::time::sleep_until(due.into()).await;
                }
                // The server may close a keep-alive connection; count it and open another.
                if sender.ready().await.is_err() {
                    reconnects += 1;
                    sender = connect(addr).await?;
                }
                let mut req = make(n);
                req.headers_mut()
                    .insert(hyper::header::HOST, addr.to_string().parse()?);
                let t = due.unwrap_or_else(Instant::now);
                let resp = sender.send_request(req).await?;
                let status = resp.status();
                let body = resp.into_body().collect().await?.to_bytes();
                anyhow::ensure!(
                    status == expect_status,
                    "status {status}: {}",
                    String::from_utf8_lossy(&body)
                );
                latencies.push(t.elapsed());
            }
            anyhow::Ok((latencies, reconnects))
        }));
    }
    let (mut latencies, mut reconnects) = (Vec::new(), 0);
    for t in tasks {
        let (l, r) = t.await??;
        latencies.extend(l);
        reconnects += r;
    }
    Ok(LoadResult {
        requests: latencies.len(),
        elapsed: start.elapsed(),
        latencies,
        reconnects,
    })
}

async fn connect(
    addr: SocketAddr,
) -> anyhow::Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// Where the SQLite writer's time went during a run: the wait for it, how long each
/// lease held it, how much of that SQLite spent running statements, and how long each
/// commit then waited for the WAL sync that made it durable.
pub fn report_writer(record: &edgehost::WriterRecord) {
    let leases = &record.leases;
    if leases.is_empty() {
        return;
    }
    let column = |f: fn(&edgehost::LeaseTiming) -> Duration| {
        let mut v: Vec<_> = leases.iter().map(f).collect();
        let total: Duration = v.iter().sum();
        format!(
            "p50 {:>6} p99 {:>7} total {:>6.0} ms",
            micros(percentile(&mut v, 50.0)),
            micros(percentile(&mut v, 99.0)),
            total.as_secs_f64() * 1e3
        )
    };
    let statements: u64 = leases.iter().map(|l| u64::from(l.statements)).sum();
    println!(
        "  SQLite writer: {} leases, {:.1} statements each",
        leases.len(),
        statements as f64 / leases.len() as f64
    );
    println!("    waited for it   {}", column(|l| l.waited));
    println!("    held it         {}", column(|l| l.held));
    println!("    in SQLite       {}", column(|l| l.in_sqlite));
    let mut waits = record.durable_waits.clone();
    if !waits.is_empty() {
        let total: Duration = waits.iter().sum();
        println!(
            "    then on disk    p50 {:>6} p99 {:>7} total {:>6.0} ms  ({} transactions: its batch's commit and sync)",
            micros(percentile(&mut waits, 50.0)),
            micros(percentile(&mut waits, 99.0)),
            total.as_secs_f64() * 1e3,
            record.durable_waits.len()
        );
    }
}
