//! Scheduled jobs. Periodic work of the application is an HTTP route,
//! `POST /api/jobs/{name}`, authenticated with the `jobs_token` variable; production calls
//! it from a cron service, and edgehost calls it itself, on its own listener over
//! loopback, on the schedule of `jobs.toml`:
//!
//! ```toml
//! [[job]]
//! name = "migrate"     # POST /api/jobs/migrate
//! at_start = true      # once, after the listener is bound, before start-up completes
//!
//! [[job]]
//! name = "prune"
//! every = "1h"         # 2s, 500ms, 5m, 1h ...
//! max_rounds = 20      # optional: calls per run while the job reports work remaining
//! ```
//!
//! A job answers JSON such as `{"done": n, "remaining": m}`; while `remaining > 0` (and
//! the call did some work) it is called again at once, up to `max_rounds` calls per run.
//! A job never overlaps itself: its runs follow one another, and a run that overruns the
//! interval delays the next instead of piling up. Failures are logged when they start or
//! change (a job route that does not exist yet, 404, once), not on every repetition; no
//! failure stops the schedule. Start-up jobs' failures are logged and not fatal.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::limits::parse_duration;

/// Calls per run while a job reports work remaining, unless the job sets `max_rounds`.
const DEFAULT_MAX_ROUNDS: u32 = 20;
/// Largest job answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The scheduler's `User-Agent` (its calls stay out of the request log).
pub const USER_AGENT: &str = "edgehost-scheduler";
/// Time to connect to our own listener.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One entry of `jobs.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub name: String,
    pub every: Option<Duration>,
    pub at_start: bool,
    pub max_rounds: u32,
}

impl JobSpec {
    /// The route the job calls.
    pub fn path(&self) -> String {
        job_path(&self.name)
    }
}

fn job_path(name: &str) -> String {
    format!("/api/jobs/{name}")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    job: Vec<RawJob>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: String,
    every: Option<String>,
    #[serde(default)]
    at_start: bool,
    max_rounds: Option<u32>,
}

/// Reads a jobs file.
pub fn load(path: &Path) -> Result<Vec<JobSpec>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read jobs file {}", path.display()))?;
    parse(&text).with_context(|| format!("invalid jobs file {}", path.display()))
}

pub fn parse(text: &str) -> Result<Vec<JobSpec>> {
    let raw: RawFile = toml::from_str(text)?;
    let mut jobs: Vec<JobSpec> = Vec::new();
    for j in raw.job {
        let valid_name = !j.name.is_empty()
            && j.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid_name {
            bail!(
                "job name {:?}: use lower-case letters, digits and '-'",
                j.name
            );
        }
        if jobs.iter().any(|other| other.name == j.name) {
            bail!("job `{}` is listed twice", j.name);
        }
        let every = j
            .every
            .as_deref()
            .map(parse_duration)
            .transpose()
            .with_context(|| format!("job `{}`", j.name))?;
        if every.is_some_and(|d| d.is_zero()) {
            bail!("job `{}`: `every` must be longer than zero", j.name);
        }
        if every.is_none() && !j.at_start {
            bail!("job `{}` has neither `every` nor `at_start = true`", j.name);
        }
        jobs.push(JobSpec {
            name: j.name,
            every,
            at_start: j.at_start,
            max_rounds: j.max_rounds.unwrap_or(DEFAULT_MAX_ROUNDS).max(1),
        });
    }
    Ok(jobs)
}

/// What one call of a job route gave.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// 2xx; `remaining` is 0 unless the answer said otherwise.
    Done { done: u64, remaining: u64 },
    /// 404: the route does not exist (yet).
    NotFound,
    /// Any other status.
    Status(u16),
    /// No answer (connection refused, timeout, bad response).
    Unreachable(String),
}

impl Outcome {
    fn is_failure(&self) -> bool {
        !matches!(self, Outcome::Done { .. })
    }
}

/// The job's answer body, as far as the scheduler cares.
#[derive(Deserialize, Default)]
struct Progress {
    #[serde(default)]
    done: u64,
    #[serde(default)]
    remaining: u64,
}

/// Counters of one job, for `Server::jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobStats {
    pub name: String,
    /// Runs started (a run is one or more calls).
    pub runs: u64,
    /// HTTP calls made.
    pub calls: u64,
    /// Calls that failed (no 2xx answer).
    pub failures: u64,
    /// Status of the last answer, if there was one.
    pub last_status: Option<u16>,
}

/// Calls job routes on the server's own listener.
#[derive(Clone)]
pub struct JobClient {
    addr: SocketAddr,
    token: Arc<str>,
    answer_timeout: Duration,
}

impl JobClient {
    /// `listen`: the server's address (an unspecified address is called on loopback);
    /// `request_timeout`: the server's per-request deadline.
    pub fn new(listen: SocketAddr, token: &str, request_timeout: Duration) -> JobClient {
        let ip = match listen.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        JobClient {
            addr: SocketAddr::new(ip, listen.port()),
            token: Arc::from(token),
            answer_timeout: request_timeout + CONNECT_TIMEOUT,
        }
    }

    async fn call(&self, name: &str) -> Outcome {
        match tokio::time::timeout(self.answer_timeout, self.post(name)).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => Outcome::Unreachable(format!("{e:#}")),
            Err(_) => Outcome::Unreachable(format!("no answer within {:?}", self.answer_timeout)),
        }
    }

    async fn post(&self, name: &str) -> Result<Outcome> {
        let stream =
            tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(self.addr))
                .await
                .context("connect timed out")??;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        let driver = tokio::spawn(conn);
        let request = hyper::Request::post(job_path(name))
            .header(hyper::header::HOST, self.addr.to_string())
            .header(
                hyper::header::AUTHORIZATION,
                format!("Bearer {}", self.token),
            )
            .header(hyper::header::CONTENT_LENGTH, "0")
            .header(hyper::header::USER_AGENT, USER_AGENT)
            .body(Empty::<Bytes>::new())?;
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
            .to_bytes();
        driver.abort();
        Ok(match status.as_u16() {
            200..=299 => {
                let progress: Progress = serde_json::from_slice(&body).unwrap_or_default();
                Outcome::Done {
                    done: progress.done,
                    remaining: progress.remaining,
                }
            }
            404 => Outcome::NotFound,
            code => Outcome::Status(code),
        })
    }
}

/// Per-job log state: the last outcome and how often it repeated.
#[derive(Default)]
struct LogState {
    last: Option<Outcome>,
    repeats: u64,
}

/// The line to log for `now`, given what came before; `None` keeps quiet. A failure is
/// logged when it starts or changes and after 10, 100, 1000 ... repetitions; a recovery
/// is logged once.
fn log_line(name: &str, periodic: bool, state: &LogState, now: &Outcome) -> Option<String> {
    let same = state.last.as_ref() == Some(now)
        || matches!(
            (&state.last, now),
            (Some(Outcome::Unreachable(_)), Outcome::Unreachable(_))
        );
    let route = format!("POST /api/jobs/{name}");
    if same && now.is_failure() {
        let n = state.repeats + 1;
        let power_of_ten = n >= 10 && 10u64.pow(n.ilog10()) == n;
        return (power_of_ten && !matches!(now, Outcome::NotFound))
            .then(|| format!("job `{name}`: {route} still failing ({n} times in a row)"));
    }
    match now {
        Outcome::Done { .. } => state
            .last
            .as_ref()
            .is_some_and(Outcome::is_failure)
            .then(|| format!("job `{name}`: {route} works again")),
        Outcome::NotFound => Some(format!(
            "job `{name}`: {route} answered 404 (no such route yet){}",
            if periodic {
                "; retried on schedule"
            } else {
                ""
            }
        )),
        Outcome::Status(code) => Some(format!("job `{name}`: {route} answered {code}")),
        Outcome::Unreachable(why) => Some(format!("job `{name}`: {route} failed: {why}")),
    }
}

/// Whether a start-up job's run leaves the application ready: it succeeded, or the
/// application has no such job (404).
fn startup_done(outcome: Option<&Outcome>) -> bool {
    matches!(outcome, Some(Outcome::Done { .. } | Outcome::NotFound))
}

/// Runs the jobs of one server.
pub struct Scheduler {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    stats: Arc<Mutex<BTreeMap<String, JobStats>>>,
}

/// Shared by the runs of one job.
struct Runner {
    client: JobClient,
    stats: Arc<Mutex<BTreeMap<String, JobStats>>>,
    log: Mutex<BTreeMap<String, LogState>>,
}

impl Runner {
    /// One run: calls the job until it reports nothing remaining, makes no progress, fails,
    /// or `max_rounds` calls were made, or the scheduler stops.
    /// Answers the last call's outcome (`None`: stopped before any call).
    async fn run(&self, job: &JobSpec, stop: &watch::Receiver<bool>) -> Option<Outcome> {
        self.update(&job.name, |s| s.runs += 1);
        let mut last = None;
        for round in 1..=job.max_rounds {
            if *stop.borrow() {
                return last;
            }
            let outcome = self.client.call(&job.name).await;
            self.record(job, &outcome);
            match outcome {
                Outcome::Done { done, remaining } if remaining > 0 && done > 0 => {
                    if round == job.max_rounds {
                        crate::warn(format_args!(
                            "job `{}`: {remaining} still remaining after {round} calls; \
                             continues at its next run",
                            job.name
                        ));
                    }
                    last = Some(outcome);
                }
                outcome => return Some(outcome),
            }
        }
        last
    }

    fn record(&self, job: &JobSpec, outcome: &Outcome) {
        let name = job.name.as_str();
        self.update(name, |s| {
            s.calls += 1;
            if outcome.is_failure() {
                s.failures += 1;
            }
            s.last_status = match outcome {
                Outcome::Done { .. } => Some(200),
                Outcome::NotFound => Some(404),
                Outcome::Status(code) => Some(*code),
                Outcome::Unreachable(_) => None,
            };
        });
        let Ok(mut logs) = self.log.lock() else {
            return;
        };
        let state = logs.entry(name.to_string()).or_default();
        if let Some(line) = log_line(name, job.every.is_some(), state, outcome) {
            eprintln!("edgehost: {line}");
        }
        if state.last.as_ref() == Some(outcome) {
            state.repeats += 1;
        } else {
            state.last = Some(outcome.clone());
            state.repeats = 1;
        }
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut JobStats)) {
        if let Ok(mut stats) = self.stats.lock() {
            f(stats.entry(name.to_string()).or_insert_with(|| JobStats {
                name: name.to_string(),
                ..Default::default()
            }));
        }
    }
}

/// Whether the start-up jobs have done their work, so that the application may take
/// traffic: until then the server answers everyone else 503 with `Retry-After`.
#[derive(Clone)]
pub struct StartupGate {
    ready: Arc<std::sync::atomic::AtomicBool>,
    /// The start-up jobs' routes, and the `Authorization` the scheduler sends to them.
    paths: Arc<[String]>,
    authorization: Arc<str>,
}

impl StartupGate {
    /// A gate that holds traffic back until [`StartupGate::open`], letting through the
    /// scheduler's calls of the start-up `jobs` authenticated with `token`.
    pub fn closed(jobs: &[JobSpec], token: &str) -> StartupGate {
        StartupGate {
            ready: Arc::default(),
            paths: jobs
                .iter()
                .filter(|j| j.at_start)
                .map(JobSpec::path)
                .collect(),
            authorization: Arc::from(format!("Bearer {token}")),
        }
    }

    /// A gate that lets everything through (no start-up jobs).
    pub fn open_now() -> StartupGate {
        let gate = StartupGate::closed(&[], "");
        gate.open();
        gate
    }

    pub fn open(&self) {
        self.ready.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_open(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether a request may pass while the gate is closed: a start-up job's call with
    /// the jobs token (the job itself checks the token again).
    pub fn lets_through(&self, method: &hyper::Method, path: &str, authorization: &[u8]) -> bool {
        method == hyper::Method::POST
            && self.paths.iter().any(|p| p == path)
            && constant_time_eq(authorization, self.authorization.as_bytes())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// How long a failed start-up job waits before it is called again.
const STARTUP_RETRY: Duration = Duration::from_secs(2);

impl Scheduler {
    /// Runs the start-up jobs one after another (waiting for them) and opens `gate` once
    /// all have succeeded (a job route that does not exist, 404, counts as done). Start-up
    /// jobs that failed are called again every 2 s in the background until they succeed,
    /// the gate staying closed meanwhile: a database that was not reachable yet holds
    /// traffic back instead of failing it. Then, if `periodic`, starts one task per
    /// periodic job.
    pub async fn start(
        jobs: Vec<JobSpec>,
        client: JobClient,
        periodic: bool,
        gate: StartupGate,
    ) -> Scheduler {
        let stats = Arc::new(Mutex::new(BTreeMap::new()));
        let runner = Arc::new(Runner {
            client,
            stats: stats.clone(),
            log: Mutex::new(BTreeMap::new()),
        });
        let (stop, stop_rx) = watch::channel(false);
        let mut failed = Vec::new();
        for job in jobs.iter().filter(|j| j.at_start) {
            if !startup_done(runner.run(job, &stop_rx).await.as_ref()) {
                failed.push(job.clone());
            }
        }
        let mut tasks = Vec::new();
        if failed.is_empty() {
            gate.open();
        } else {
            crate::warn(format_args!(
                "start-up job{} {} failed: requests are answered 503 until {} succeed{} \
                 (retried every {STARTUP_RETRY:?})",
                if failed.len() > 1 { "s" } else { "" },
                failed
                    .iter()
                    .map(|j| format!("`{}`", j.name))
                    .collect::<Vec<_>>()
                    .join(", "),
                if failed.len() > 1 { "they" } else { "it" },
                if failed.len() > 1 { "" } else { "s" },
            ));
            let (runner, mut stop_rx) = (runner.clone(), stop_rx.clone());
            tasks.push(tokio::spawn(async move {
                while !failed.is_empty() {
                    tokio::select! {
                        _ = stop_rx.wait_for(|s| *s) => return,
                        _ = tokio::time::sleep(STARTUP_RETRY) => {}
                    }
                    let mut still = Vec::new();
                    for job in failed {
                        if !startup_done(runner.run(&job, &stop_rx).await.as_ref()) {
                            still.push(job);
                        }
                    }
                    failed = still;
                }
                eprintln!("edgehost: start-up jobs done: serving requests");
                gate.open();
            }));
        }
        if periodic {
            for job in jobs {
                let Some(every) = job.every else { continue };
                let (runner, mut stop_rx) = (runner.clone(), stop_rx.clone());
                tasks.push(tokio::spawn(async move {
                    let mut next = Instant::now() + every;
                    loop {
                        tokio::select! {
                            _ = stop_rx.wait_for(|s| *s) => return,
                            _ = tokio::time::sleep_until(next) => {}
                        }
                        runner.run(&job, &stop_rx).await;
                        // A run that overran the interval delays the next one (no overlap,
                        // no burst of missed runs).
                        next = (next + every).max(Instant::now());
                    }
                }));
            }
        }
        Scheduler { stop, tasks, stats }
    }

    /// Counters of every job called so far, in name order.
    pub fn stats(&self) -> Vec<JobStats> {
        self.stats
            .lock()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Stops scheduling; a call in flight may finish within `grace`, then it is dropped.
    pub async fn shutdown(self, grace: Duration) {
        let _ = self.stop.send(true);
        let deadline = Instant::now() + grace;
        for task in self.tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_jobs_file() {
        let jobs = parse(
            r#"
[[job]]
name = "migrate"
at_start = true
[[job]]
name = "deliver-webhooks"
every = "2s"
[[job]]
name = "prune"
every = "1h"
at_start = true
max_rounds = 3
"#,
        )
        .unwrap();
        assert_eq!(
            jobs,
            vec![
                JobSpec {
                    name: "migrate".into(),
                    every: None,
                    at_start: true,
                    max_rounds: DEFAULT_MAX_ROUNDS
                },
                JobSpec {
                    name: "deliver-webhooks".into(),
                    every: Some(Duration::from_secs(2)),
                    at_start: false,
                    max_rounds: DEFAULT_MAX_ROUNDS
                },
                JobSpec {
                    name: "prune".into(),
                    every: Some(Duration::from_secs(3600)),
                    at_start: true,
                    max_rounds: 3
                },
            ]
        );
        for bad in [
            "[[job]]\nname = \"x\"",
            "[[job]]\nname = \"Bad Name\"\nevery = \"1s\"",
            "[[job]]\nname = \"x\"\nevery = \"soon\"",
            "[[job]]\nname = \"x\"\nevery = \"0s\"",
            "[[job]]\nname = \"x\"\nevery = \"1s\"\ncron = \"* * * * *\"",
            "[[job]]\nname = \"x\"\nevery = \"1s\"\n[[job]]\nname = \"x\"\nevery = \"2s\"",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn the_repository_jobs_file_lists_the_platform_jobs() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../jobs.toml");
        let jobs = load(&path).unwrap();
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "migrate",
                "settle-ingests",
                "prune",
                "renew-subscriptions",
                "check-ledger",
                "rollup-analytics",
                "deliver-webhooks",
                "expire-replays"
            ]
        );
        assert!(jobs[0].at_start && jobs[0].every.is_none());
        assert_eq!(jobs[1].every, Some(Duration::from_secs(5)));
        assert_eq!(jobs[2].every, Some(Duration::from_secs(3600)));
        assert_eq!(jobs[3].every, Some(Duration::from_secs(600)));
        assert_eq!(jobs[4].every, Some(Duration::from_secs(3600)));
        assert_eq!(jobs[5].every, Some(Duration::from_secs(300)));
        assert_eq!(jobs[6].every, Some(Duration::from_secs(2)));
    }

    #[test]
    fn failures_are_logged_when_they_start_change_or_persist() {
        let mut state = LogState::default();
        let mut lines = Vec::new();
        let mut feed = |state: &mut LogState, o: Outcome| {
            lines.push(log_line("prune", true, state, &o));
            if state.last.as_ref() == Some(&o) {
                state.repeats += 1;
            } else {
                state.last = Some(o);
                state.repeats = 1;
            }
        };
        feed(
            &mut state,
            Outcome::Done {
                done: 1,
                remaining: 0,
            },
        );
        for _ in 0..12 {
            feed(&mut state, Outcome::NotFound);
        }
        for _ in 0..10 {
            feed(&mut state, Outcome::Status(500));
        }
        feed(
            &mut state,
            Outcome::Done {
                done: 0,
                remaining: 0,
            },
        );
        feed(
            &mut state,
            Outcome::Done {
                done: 0,
                remaining: 0,
            },
        );
        let logged: Vec<&String> = lines.iter().flatten().collect();
        assert_eq!(logged.len(), 4, "{logged:#?}");
        assert!(logged[0].contains("404") && logged[0].contains("retried on schedule"));
        assert!(logged[1].contains("answered 500"));
        assert!(logged[2].contains("10 times in a row"));
        assert!(logged[3].contains("works again"));
    }
}
