//! Restreams: one ffmpeg per target, copying the live stream from the media server to the
//! target (no re-encoding). Each target reports its state to the platform with every
//! update; its error text is chosen from fixed sentences, because ffmpeg's own messages
//! quote its URLs: the target's, and with it the broadcaster's key on that service, and
//! the source's, which is the stream's key here (nginx knows the stream by its key).
//! Neither URL is ever logged.

use crate::address;
use common::domain::media::RestreamState;
use common::domain::media::protocol::{RestreamReport, RestreamTarget};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinHandle;

/// How soon an errored target is tried again while the stream is live.
pub const RETRY: Duration = Duration::from_secs(10);
/// How soon a target that failed right away is tried again (the first few times): the
/// stream may not have reached the media server yet.
const EARLY_RETRY: Duration = Duration::from_secs(2);
/// A target that failed within this long of its start failed early.
const EARLY: Duration = Duration::from_secs(5);

/// What every target of the agent shares.
#[derive(Debug, Clone)]
pub struct Context {
    pub ffmpeg: PathBuf,
    /// `rtmp://<loopback>:<port>/<ingest app>`: the stream is `<this>/<stream key>`.
    pub source_base: String,
    pub allow_private: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Status {
    state: RestreamState,
    error: Option<String>,
}

struct Target {
    url: String,
    status: Arc<Mutex<Status>>,
    task: JoinHandle<()>,
}

impl Drop for Target {
    /// Stops the target: the task's ffmpeg is killed when the task is dropped.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The targets of one live stream. Dropping it stops them all.
pub struct RestreamSet {
    context: Arc<Context>,
    /// Where ffmpeg reads the stream: it names the stream key.
    source: String,
    targets: HashMap<String, Target>,
}

impl RestreamSet {
    /// The targets of the stream nginx knows as `key`.
    pub fn new(context: Arc<Context>, key: &str) -> RestreamSet {
        RestreamSet {
            source: format!("{}/{key}", context.source_base),
            context,
            targets: HashMap::new(),
        }
    }

    /// Makes the running targets those of `wanted`: starts the new ones (after `delay`),
    /// stops the removed ones, restarts one whose URL changed.
    pub fn reconcile(&mut self, wanted: &[RestreamTarget], delay: Duration) {
        self.targets
            .retain(|id, t| wanted.iter().any(|w| &w.id == id && w.url == t.url));
        for target in wanted {
            if self.targets.contains_key(&target.id) {
                continue;
            }
            let status = Arc::new(Mutex::new(Status {
                state: RestreamState::Connecting,
                error: None,
            }));
            let task = tokio::spawn(run(
                self.context.clone(),
                self.source.clone(),
                target.url.clone(),
                status.clone(),
                delay,
            ));
            self.targets.insert(
                target.id.clone(),
                Target {
                    url: target.url.clone(),
                    status,
                    task,
                },
            );
        }
    }

    /// Stops every target.
    pub fn stop_all(&mut self) {
        self.targets.clear();
    }

    /// Each target's state, for the platform.
    pub fn reports(&self) -> Vec<RestreamReport> {
        let mut reports: Vec<RestreamReport> = self
            .targets
            .iter()
            .map(|(id, t)| {
                let status = lock(&t.status).clone();
                RestreamReport {
                    id: id.clone(),
                    state: status.state,
                    error: status.error,
                }
            })
            .collect();
        reports.sort_by(|a, b| a.id.cmp(&b.id));
        reports
    }
}

fn lock(status: &Mutex<Status>) -> std::sync::MutexGuard<'_, Status> {
    status.lock().unwrap_or_else(|e| e.into_inner())
}

fn set(status: &Mutex<Status>, state: RestreamState, error: Option<String>) {
    *lock(status) = Status { state, error };
}

/// One target, until its task is dropped: check the address, run ffmpeg, report, retry.
async fn run(
    context: Arc<Context>,
    source: String,
    url: String,
    status: Arc<Mutex<Status>>,
    delay: Duration,
) {
    tokio::time::sleep(delay).await;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let started = Instant::now();
        match check_target(&url, context.allow_private).await {
            Err(why) => set(&status, RestreamState::Errored, Some(why.into())),
            Ok(()) => {
                set(&status, RestreamState::Connecting, None);
                let why = push(&context, &source, &url, &status).await;
                set(&status, RestreamState::Errored, Some(why));
            }
        }
        let wait = if started.elapsed() < EARLY && attempts <= 3 {
            EARLY_RETRY
        } else {
            RETRY
        };
        tokio::time::sleep(wait).await;
    }
}

/// Whether the target may be connected to: an rtmp(s) URL whose host resolves only to
/// public addresses (unless private ones are allowed).
pub async fn check_target(url: &str, allow_private: bool) -> Result<(), &'static str> {
    let (host, port) = address::parse_target(url)?;
    let addresses: Vec<std::net::IpAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => {
            let lookup = tokio::net::lookup_host((host.as_str(), port));
            match tokio::time::timeout(Duration::from_secs(5), lookup).await {
                Ok(Ok(found)) => found.map(|a| a.ip()).collect(),
                _ => return Err("could not resolve the target's host"),
            }
        }
    };
    if addresses.is_empty() {
        return Err("could not resolve the target's host");
    }
    if !allow_private && addresses.iter().any(|ip| address::is_forbidden(*ip)) {
        return Err("the target's address is not allowed");
    }
    Ok(())
}

/// Runs ffmpeg until it exits; answers why, in words safe to show.
async fn push(context: &Context, source: &str, url: &str, status: &Mutex<Status>) -> String {
    let mut command = crate::child::command(&context.ffmpeg, libc::SIGKILL);
    command
        .args(["-nostdin", "-hide_banner", "-loglevel", "error"])
        .args(["-progress", "pipe:1", "-rw_timeout", "15000000"])
        .args(["-i", source, "-c", "copy", "-f", "flv", url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(_) => return "ffmpeg could not be started".into(),
    };
    let stderr = child.stderr.take();
    let errors = tokio::spawn(async move {
        let mut tail = VecDeque::new();
        if let Some(stderr) = stderr {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tail.len() == 20 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        Vec::from(tail).join("\n")
    });
    let mut was_live = false;
    if let Some(stdout) = child.stdout.take() {
        let mut lines = BufReader::new(stdout).lines();
        let mut sent = 0u64;
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(size) = line
                .strip_prefix("total_size=")
                .and_then(|v| v.trim().parse::<u64>().ok())
            {
                if size > sent && sent > 0 && !was_live {
                    was_live = true;
                    set(status, RestreamState::Live, None);
                }
                sent = sent.max(size);
            }
        }
    }
    let exit = child.wait().await.ok();
    let errors = errors.await.unwrap_or_default();
    let code = exit.and_then(|e| e.code());
    describe_failure(&errors, source, code, was_live)
}

/// Why ffmpeg stopped, in a fixed sentence: its output is read, never repeated. A
/// complaint naming `source` (ffmpeg names the input it failed on) is the media server's
/// side, whatever the words: the target was not even reached.
pub fn describe_failure(stderr: &str, source: &str, code: Option<i32>, was_live: bool) -> String {
    let text = stderr.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    let sentence = if !source.is_empty() && stderr.contains(source) {
        "the stream could not be read from the media server"
    } else if has(&[
        "authentication",
        "unauthorized",
        "badname",
        "publish.denied",
        "server error",
        "forbidden",
    ]) {
        "the target refused the stream (check its key)"
    } else if has(&["tls", "ssl", "certificate", "handshake"]) {
        "the secure connection to the target failed"
    } else if has(&[
        "connection refused",
        "no route to host",
        "network is unreachable",
        "timed out",
        "timeout",
        "cannot assign requested address",
        "failed to resolve",
        "name or service not known",
        "temporary failure in name resolution",
        "cannot open connection",
    ]) {
        "could not connect to the target"
    } else if was_live || has(&["broken pipe", "connection reset", "end of file"]) {
        "the target closed the connection"
    } else {
        return match code {
            Some(code) => format!("ffmpeg exited with status {code}"),
            None => "ffmpeg was stopped by a signal".into(),
        };
    };
    sentence.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "rtmp://a.rtmp.youtube.com/live2/abcd-efgh-ijkl-mnop";
    const SOURCE: &str = "rtmp://127.0.0.1:1935/live/0123456789abcdef0123456789abcdef";

    #[test]
    fn failures_are_described_without_the_target() {
        let cases = [
            (
                format!("{URL}: Connection refused"),
                false,
                "could not connect to the target",
            ),
            (
                format!(
                    "[tcp @ 0x55] Failed to resolve hostname a.rtmp.youtube.com: Name or service not known\n{URL}: Input/output error"
                ),
                false,
                "could not connect to the target",
            ),
            (
                format!(
                    "[rtmp @ 0x1] Server error: Authentication Failed.\n{URL}: Operation not permitted"
                ),
                false,
                "the target refused the stream (check its key)",
            ),
            (
                format!(
                    "[tls @ 0x2] error:0A000086:SSL routines::certificate verify failed\n{URL}: I/O error"
                ),
                false,
                "the secure connection to the target failed",
            ),
            (
                format!(
                    "av_interleaved_write_frame(): Broken pipe\nError writing trailer of {URL}: Broken pipe"
                ),
                true,
                "the target closed the connection",
            ),
            (
                "Conversion failed!".to_string(),
                true,
                "the target closed the connection",
            ),
        ];
        for (stderr, live, expected) in cases {
            let described = describe_failure(&stderr, SOURCE, Some(1), live);
            assert_eq!(described, expected, "{stderr}");
            assert!(!described.contains("youtube"));
            assert!(!described.contains("abcd"));
        }
        assert_eq!(
            describe_failure(&format!("{URL}: something new"), SOURCE, Some(8), false),
            "ffmpeg exited with status 8"
        );
        assert_eq!(
            describe_failure("", SOURCE, None, false),
            "ffmpeg was stopped by a signal"
        );
    }

    #[test]
    fn failures_of_the_source_are_described_without_its_key() {
        // ffmpeg 5.1's words when the media server is away, and when it stops mid-stream.
        for (stderr, live) in [
            (
                format!(
                    "[tcp @ 0x55] Connection to tcp://127.0.0.1:1935?tcp_nodelay=0 failed: \
                     Connection refused\n[rtmp @ 0x56] Cannot open connection \
                     tcp://127.0.0.1:1935?tcp_nodelay=0\n{SOURCE}: Connection refused"
                ),
                false,
            ),
            (format!("{SOURCE}: Input/output error"), true),
        ] {
            let described = describe_failure(&stderr, SOURCE, Some(1), live);
            assert_eq!(
                described, "the stream could not be read from the media server",
                "{stderr}"
            );
            assert!(!described.contains("0123"), "{described}");
        }
    }

    #[tokio::test]
    async fn targets_are_checked_before_any_connection() {
        assert_eq!(
            check_target("rtmp://127.0.0.1:1935/app/key", false).await,
            Err("the target's address is not allowed")
        );
        assert_eq!(
            check_target("rtmp://[::ffff:10.0.0.1]/app/key", false).await,
            Err("the target's address is not allowed")
        );
        // `localhost` resolves (from /etc/hosts) to loopback.
        assert_eq!(
            check_target("rtmp://localhost/app/key", false).await,
            Err("the target's address is not allowed")
        );
        assert_eq!(
            check_target("http://8.8.8.8/app", false).await,
            Err("only rtmp:// and rtmps:// targets are supported")
        );
        assert_eq!(check_target("rtmp://8.8.8.8/app/key", false).await, Ok(()));
        assert_eq!(check_target("rtmp://127.0.0.1/app/key", true).await, Ok(()));
    }

    #[tokio::test]
    async fn a_refused_target_reports_errored_and_removal_stops_it() {
        let context = Arc::new(Context {
            ffmpeg: PathBuf::from("/nonexistent/ffmpeg"),
            source_base: "rtmp://127.0.0.1:1/live".into(),
            allow_private: false,
        });
        let mut set = RestreamSet::new(context, "0123456789abcdef0123456789abcdef");
        let target = RestreamTarget {
            id: "t1".into(),
            url: "rtmp://10.0.0.1/app/secret-key".into(),
        };
        set.reconcile(std::slice::from_ref(&target), Duration::ZERO);
        assert_eq!(set.reports()[0].state, RestreamState::Connecting);
        let deadline = Instant::now() + Duration::from_secs(5);
        while set.reports()[0].state != RestreamState::Errored {
            assert!(Instant::now() < deadline, "{:?}", set.reports());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let report = &set.reports()[0];
        assert_eq!(
            report.error.as_deref(),
            Some("the target's address is not allowed")
        );
        // Same id and URL: kept; removed: stopped.
        set.reconcile(std::slice::from_ref(&target), Duration::ZERO);
        assert_eq!(set.reports()[0].state, RestreamState::Errored);
        set.reconcile(&[], Duration::ZERO);
        assert!(set.reports().is_empty());
    }
}
