//! nginx as the agent's child: checked before it starts (binaries, module, ports, its
//! configuration), started in its own process group (so that its workers are stopped
//! with it), watched, and restarted with backoff when it exits on its own.

use crate::agent::Agent;
use crate::child;
use crate::config::Config;
use crate::logging::redact_keys;
use anyhow::{Context as _, Result, anyhow, bail};
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::watch;

/// What to install when something is missing.
pub const INSTALL_HINT: &str = "apt-get install nginx libnginx-mod-rtmp ffmpeg";
/// How long nginx may take to accept RTMP connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a graceful stop (SIGQUIT) may take before nginx is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(3);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run this long resets the backoff.
const STABLE_RUN: Duration = Duration::from_secs(60);
/// Directories searched besides `PATH`.
const SBIN: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/sbin"];

/// The programs the agent runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub nginx: PathBuf,
    pub ffmpeg: PathBuf,
}

/// Finds nginx, its RTMP module and ffmpeg, or says what to install.
pub fn preflight(config: &Config) -> Result<Binaries> {
    let missing = |what: String| {
        anyhow!("nginx with its RTMP module is not installed ({what}): {INSTALL_HINT}")
    };
    let nginx = child::find_binary(&config.nginx_bin, SBIN).ok_or_else(|| {
        missing(format!(
            "no {} on PATH or in /usr/sbin",
            config.nginx_bin.display()
        ))
    })?;
    if !config.rtmp_module.as_os_str().is_empty() && !config.rtmp_module.is_file() {
        return Err(missing(format!(
            "no module {}",
            config.rtmp_module.display()
        )));
    }
    let ffmpeg = child::find_binary(&config.ffmpeg_bin, &[]).ok_or_else(|| {
        anyhow!(
            "ffmpeg is not installed (no {} on PATH): {INSTALL_HINT}",
            config.ffmpeg_bin.display()
        )
    })?;
    Ok(Binaries { nginx, ffmpeg })
}

/// A port held open to find out that it is free (and which one port 0 is): dropped
/// just before nginx binds it.
pub struct Reserved {
    pub addr: SocketAddr,
    _listener: TcpListener,
}

impl Reserved {
    /// The listener itself, for a port the agent serves (the RTMP ingress).
    pub fn into_listener(self) -> TcpListener {
        self._listener
    }
}

/// Reserves `addr` for `what`; `setting` names the platform variable that moves it.
pub fn reserve(addr: SocketAddr, what: &str, setting: &str) -> Result<Reserved> {
    reserve_or_take(addr, what, setting, &mut Vec::new())
}

/// [`reserve`], taking the listener of `held` already bound to `addr` if there is one
/// (bound again, the port could be taken in between).
pub fn reserve_or_take(
    addr: SocketAddr,
    what: &str,
    setting: &str,
    held: &mut Vec<TcpListener>,
) -> Result<Reserved> {
    let bound_to_addr = |l: &TcpListener| l.local_addr().is_ok_and(|bound| bound == addr);
    if let Some(at) = held.iter().position(bound_to_addr) {
        let listener = held.swap_remove(at);
        return Ok(Reserved {
            addr,
            _listener: listener,
        });
    }
    // One held on the port at another address would be in the way.
    held.retain(|l| {
        l.local_addr()
            .is_ok_and(|bound| bound.port() != addr.port())
    });
    let listener = TcpListener::bind(addr).map_err(|e| {
        let reason = match e.kind() {
            std::io::ErrorKind::AddrInUse => "address in use".to_string(),
            std::io::ErrorKind::AddrNotAvailable => "no such address on this host".to_string(),
            std::io::ErrorKind::PermissionDenied => {
                "permission denied (ports below 1024 need privileges)".to_string()
            }
            _ => e.to_string(),
        };
        anyhow!("cannot listen on {addr} for {what}: {reason}; set {setting} to move it")
    })?;
    Ok(Reserved {
        addr: listener.local_addr()?,
        _listener: listener,
    })
}

/// Reserves a free loopback port (nginx's statistics server).
pub fn reserve_loopback() -> Result<Reserved> {
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .context("cannot listen on a loopback port")?;
    Ok(Reserved {
        addr: listener.local_addr()?,
        _listener: listener,
    })
}

/// The file in the state directory that names the working directory of a run whose nginx
/// works elsewhere ([`prepare_state_dir`]), so that the next run removes it if this one
/// could not.
pub const WORK_POINTER: &str = "work-dir";

/// The prefix of a working directory of its own under the temporary directory.
const WORK_PREFIX: &str = "media-agent-";

/// Creates the state directory and nginx's working directory with its parts, and clears
/// what a previous run left (its HLS, its markers). Answers both, absolute: (state, work).
///
/// nginx's workers run as `nobody` when the agent is root, and must reach the working
/// directory (the HLS they write and serve, the markers they read). That is the state
/// directory itself when every directory above it is searchable by others; otherwise (a
/// clone under `/root`, mode 0700) nginx works in a directory of this run's own under the
/// temporary directory (`TMPDIR`, else `/tmp`), mode 0711 and owned by root, which the
/// agent removes when it stops. The configuration, which holds the playback key, stays in
/// the state directory, read by nginx's master (root) only.
pub fn prepare_state_dir(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve the state directory {}", dir.display()))?;
    remove_previous_work_dir(&dir);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let work = match unreachable_ancestor(&dir)? {
        Some(closed) if root => {
            let work = own_work_dir(&dir, &closed)?;
            std::fs::write(dir.join(WORK_POINTER), work.as_os_str().as_encoded_bytes())
                .with_context(|| format!("cannot write {}", dir.join(WORK_POINTER).display()))?;
            eprintln!(
                "media server: nginx's workers (user nobody) cannot reach the state directory \
                 {} ({} is not searchable by others): they work in {} instead",
                dir.display(),
                closed.display(),
                work.display()
            );
            work
        }
        _ => dir.clone(),
    };
    for sub in ["hls", "open"] {
        let path = work.join(sub);
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("cannot clear {}", path.display()))?;
        }
    }
    for sub in ["hls", "open", "tmp"] {
        std::fs::create_dir_all(work.join(sub))
            .with_context(|| format!("cannot create {}", work.join(sub).display()))?;
    }
    // hls/ holds a directory named by each live stream's key, and the links that name it
    // from stream ids: nobody but the agent (whose ffmpeg writes it) and nginx's workers
    // may list it or follow them.
    std::fs::set_permissions(work.join("hls"), std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot restrict {}", work.join("hls").display()))?;
    // The markers are read by the workers (nginx gives them tmp/ itself).
    if root {
        let mode = if work == dir { 0o755 } else { 0o711 };
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(mode))?;
        std::fs::set_permissions(work.join("open"), std::fs::Permissions::from_mode(0o755))?;
        // The workers reach hls/ through its group (they may follow names in it, never
        // write: no link of theirs can lead the agent's writes elsewhere); other users
        // not at all.
        let hls = work.join("hls");
        let group = worker_group().context("nginx's workers have no group (nogroup, nobody)")?;
        std::os::unix::fs::chown(&hls, Some(0), Some(group))
            .with_context(|| format!("cannot give {} to nginx's workers", hls.display()))?;
        std::fs::set_permissions(&hls, std::fs::Permissions::from_mode(0o710))?;
    }
    Ok((dir, work))
}

/// The nearest directory above `dir` that others may not search, if any.
fn unreachable_ancestor(dir: &Path) -> Result<Option<PathBuf>> {
    use std::os::unix::fs::PermissionsExt;
    for ancestor in dir.ancestors().skip(1) {
        let mode = std::fs::metadata(ancestor)
            .with_context(|| format!("cannot read {}", ancestor.display()))?
            .permissions()
            .mode();
        if mode & 0o001 == 0 {
            return Ok(Some(ancestor.to_path_buf()));
        }
    }
    Ok(None)
}

/// A fresh working directory under the temporary directory, which nginx's workers reach.
fn own_work_dir(state: &Path, closed: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let tmp = std::env::temp_dir();
    let tmp = tmp.canonicalize().unwrap_or(tmp);
    let reachable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
    };
    if !reachable(&tmp) || unreachable_ancestor(&tmp).ok().flatten().is_some() {
        bail!(
            "nginx's workers (user nobody) can reach neither the state directory {} ({} is \
             not searchable by others) nor the temporary directory {}: choose a state \
             directory or a TMPDIR they can reach",
            state.display(),
            closed.display(),
            tmp.display()
        );
    }
    let work = tmp.join(format!("{WORK_PREFIX}{}", domain::ids::random_hex(8)));
    // A new name, created here (not a directory someone else made beforehand).
    std::fs::DirBuilder::new()
        .mode(0o711)
        .create(&work)
        .with_context(|| format!("cannot create {}", work.display()))?;
    Ok(work)
}

/// Removes the working directory a previous run named in the state directory and left
/// behind (killed before it could remove it): only a directory of the agent's own kind,
/// owned by this user.
fn remove_previous_work_dir(state: &Path) {
    use std::os::unix::fs::MetadataExt;
    let pointer = state.join(WORK_POINTER);
    let Ok(text) = std::fs::read_to_string(&pointer) else {
        return;
    };
    let previous = PathBuf::from(text.trim());
    let ours = previous.is_absolute()
        && previous
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(WORK_PREFIX))
        && std::fs::symlink_metadata(&previous)
            // SAFETY: geteuid has no preconditions.
            .is_ok_and(|m| m.is_dir() && m.uid() == unsafe { libc::geteuid() });
    if ours {
        let _ = std::fs::remove_dir_all(&previous);
    }
    let _ = std::fs::remove_file(&pointer);
}

/// The group nginx's workers run as under a root master (nginx's default: `nogroup`, or
/// `nobody` where there is no such group).
fn worker_group() -> Option<u32> {
    ["nogroup", "nobody"].iter().find_map(|name| {
        let name = std::ffi::CString::new(*name).ok()?;
        // SAFETY: a NUL-terminated name; the entry is read before any other call.
        let entry = unsafe { libc::getgrnam(name.as_ptr()) };
        // SAFETY: a non-null entry of getgrnam.
        (!entry.is_null()).then(|| unsafe { (*entry).gr_gid })
    })
}

/// Runs `nginx -t` on the rendered configuration; its complaint is the error.
pub async fn test_config(nginx: &Path, state_dir: &Path, conf: &Path) -> Result<()> {
    let output = tokio::process::Command::new(nginx)
        .args(nginx_args(state_dir, conf))
        .arg("-t")
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {}", nginx.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stderr);
    let complaint: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("configuration file") || l.contains("failed"))
        .collect();
    bail!(
        "the media server's configuration ({}) is refused by nginx: {}",
        conf.display(),
        redact_keys(complaint.join("; ").trim())
    )
}

fn nginx_args(state_dir: &Path, conf: &Path) -> Vec<std::ffi::OsString> {
    let mut prefix = state_dir.as_os_str().to_owned();
    prefix.push("/");
    vec![
        "-e".into(),
        "stderr".into(),
        "-p".into(),
        prefix,
        "-c".into(),
        conf.as_os_str().to_owned(),
    ]
}

/// A running nginx master.
pub struct Nginx {
    child: Child,
    pid: u32,
    /// Its last lines on stderr, for an error at start.
    tail: Arc<Mutex<VecDeque<String>>>,
}

/// Starts nginx in its own process group, forwarding its stderr line by line.
pub fn spawn(nginx: &Path, state_dir: &Path, conf: &Path) -> Result<Nginx> {
    // SIGTERM when the agent dies: nginx's fast shutdown, which stops its workers too.
    let mut command = child::command(nginx, libc::SIGTERM);
    command
        .args(nginx_args(state_dir, conf))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {}", nginx.display()))?;
    let pid = child.id().context("nginx exited at once")?;
    let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
    if let Some(stderr) = child.stderr.take() {
        let tail = tail.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let line = redact_keys(&line);
                eprintln!("media server: {line}");
                let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                if tail.len() == 10 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
    }
    Ok(Nginx { child, pid, tail })
}

impl Nginx {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until nginx accepts TCP connections on `addr`.
    pub async fn wait_ready(&mut self, addr: SocketAddr, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                // Let the stderr forwarder catch up with nginx's last words.
                tokio::time::sleep(Duration::from_millis(100)).await;
                bail!("nginx exited at start ({status}): {}", self.last_words());
            }
            let connected = tokio::task::spawn_blocking(move || {
                TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            })
            .await
            .unwrap_or(false);
            if connected {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "nginx does not accept RTMP connections on {addr} after {limit:?}: {}",
                    self.last_words()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn last_words(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        if tail.is_empty() {
            "(it said nothing)".into()
        } else {
            Vec::from(tail.clone()).join("; ")
        }
    }

    /// Stops nginx: gracefully (SIGQUIT), then for good (SIGKILL to its whole group).
    pub async fn stop(mut self) {
        child::signal(self.pid, libc::SIGQUIT, false);
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            eprintln!("media server: nginx did not stop within {STOP_TIMEOUT:?}; killing it");
        }
        child::signal(self.pid, libc::SIGKILL, true);
        let _ = self.child.wait().await;
    }
}

/// Watches nginx until `stop` flips: an exit of its own is logged, its publishers are
/// ended on the platform, and it is restarted (backoff 1 s doubling to 30 s).
pub async fn supervise(
    agent: Arc<Agent>,
    mut nginx: Nginx,
    bins: Binaries,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        let status: std::io::Result<ExitStatus> = tokio::select! {
            status = nginx.child.wait() => status,
            _ = stopped(&mut stop) => {
                nginx.stop().await;
                agent.nginx_pid.store(0, Ordering::SeqCst);
                return;
            }
        };
        agent.nginx_pid.store(0, Ordering::SeqCst);
        // Workers left behind by a killed master still hold the ports.
        child::signal(nginx.pid, libc::SIGKILL, true);
        let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
        eprintln!("media server: nginx exited ({status}); restarting");
        agent.finish_all("the media server stopped");
        if started.elapsed() >= STABLE_RUN {
            backoff = FIRST_BACKOFF;
        }
        nginx = loop {
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stopped(&mut stop) => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            agent.new_boot();
            match spawn(&bins.nginx, &agent.paths.work, &agent.paths.conf) {
                Ok(next) => {
                    agent.restarts.fetch_add(1, Ordering::SeqCst);
                    agent.nginx_pid.store(next.pid(), Ordering::SeqCst);
                    break next;
                }
                Err(e) => {
                    eprintln!("media server: cannot restart nginx: {e:#}; retrying in {backoff:?}")
                }
            }
        };
    }
}

/// Returns once `stop` flips (or its sender is gone).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_listener_is_taken_over_not_bound_again() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut held = vec![other, listener];
        // Bound again, the port would be in use: taken over, it is reserved.
        let reserved = reserve_or_take(addr, "RTMP ingest", "rtmp_ingest_base", &mut held).unwrap();
        assert_eq!(reserved.addr, addr);
        assert_eq!(held.len(), 1);
        assert!(reserve(addr, "RTMP ingest", "rtmp_ingest_base").is_err());
    }

    #[test]
    fn a_port_in_use_is_reported_with_the_setting_that_moves_it() {
        let held = reserve(
            "127.0.0.1:0".parse().unwrap(),
            "RTMP ingest",
            "rtmp_ingest_base",
        )
        .unwrap();
        let err = reserve(held.addr, "RTMP ingest", "rtmp_ingest_base")
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            err,
            format!(
                "cannot listen on {} for RTMP ingest: address in use; set rtmp_ingest_base to move it",
                held.addr
            )
        );
    }

    #[test]
    fn a_state_dir_nobody_cannot_reach_gets_a_working_dir_of_its_own_under_root() {
        use std::os::unix::fs::PermissionsExt;
        // As a clone under /root: a directory of mode 0700 above the state directory.
        let home = std::env::temp_dir().join(format!(
            "closed-home-{}-{}",
            std::process::id(),
            domain::ids::random_hex(4)
        ));
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let state = home.join("clone/.spin/media");
        let (dir, work) = prepare_state_dir(&state).unwrap();
        assert_eq!(dir, state.canonicalize().unwrap());
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            // The workers are this user: the state directory is theirs.
            assert_eq!(work, dir);
        } else {
            assert!(!work.starts_with(&home), "{}", work.display());
            let mode = std::fs::metadata(&work).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o711);
            assert!(unreachable_ancestor(&work).unwrap().is_none());
            for sub in ["hls", "open", "tmp"] {
                assert!(work.join(sub).is_dir(), "{sub}");
            }
            assert_eq!(
                std::fs::read_to_string(dir.join(WORK_POINTER)).unwrap(),
                work.to_str().unwrap()
            );
            // A run killed before it removed its working directory: the next one does.
            let (_, next) = prepare_state_dir(&state).unwrap();
            assert!(!work.exists(), "{}", work.display());
            assert_ne!(next, work);
            std::fs::remove_dir_all(&next).unwrap();
        }
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn missing_programs_say_what_to_install() {
        let mut config = Config::new("http://127.0.0.1:3000", "s");
        config.nginx_bin = PathBuf::from("/nonexistent/nginx");
        let err = preflight(&config).unwrap_err().to_string();
        assert!(
            err.contains("nginx with its RTMP module is not installed"),
            "{err}"
        );
        assert!(err.contains(INSTALL_HINT), "{err}");
        let mut config = Config::new("http://127.0.0.1:3000", "s");
        config.rtmp_module = PathBuf::from("/nonexistent/ngx_rtmp_module.so");
        let err = preflight(&config).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ngx_rtmp_module.so"), "{err}");
        assert!(err.contains(INSTALL_HINT), "{err}");
        let mut config = Config::new("http://127.0.0.1:3000", "s");
        config.ffmpeg_bin = PathBuf::from("no-such-ffmpeg");
        let err = preflight(&config).unwrap_err().to_string();
        assert!(err.contains("ffmpeg is not installed"), "{err}");
    }
}
