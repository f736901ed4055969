//! Each live stream's `thumbnail.jpg`, beside its playlist (served, and signed, like it):
//! the first frame of its newest segment, refreshed when a new segment appears. Decoding
//! costs CPU, so at most [`AT_ONCE`] ffmpeg runs at a time for the whole agent. It is
//! written (see [`make`]: following no link) into the directory the stream's ffmpeg writes
//! its HLS to (`hls/<key>`), which the
//! stream's link (`hls/<stream id>`) names: resolved once per run, so that the segment is
//! read and the thumbnail written in one directory even when a reconnect under another
//! key moves the link meanwhile.

use crate::agent::Agent;
use crate::logging::redact_keys;
use crate::playlist;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// ffmpeg thumbnail runs at once.
pub const AT_ONCE: usize = 2;
/// One run longer than this is stopped.
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// Refreshes thumbnails every `thumbnail_secs` until the task is dropped.
pub async fn run(agent: Arc<Agent>) {
    let slots = Arc::new(Semaphore::new(AT_ONCE));
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut done: HashMap<String, (PathBuf, u64)> = HashMap::new();
    let mut ticks = tokio::time::interval(Duration::from_secs(agent.config.thumbnail_secs));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut runs = tokio::task::JoinSet::new();
    loop {
        ticks.tick().await;
        while runs.try_join_next().is_some() {}
        let live = agent.live();
        done.retain(|stream, _| live.iter().any(|l| &l.stream_id == stream));
        for stream in live {
            let Some(dir) = playlist::resolve(&agent.paths.hls, &stream.stream_id) else {
                continue;
            };
            let Some(newest) = playlist::read_in(&dir).await.pop() else {
                continue;
            };
            let this = (dir, newest.number);
            if done.get(&stream.stream_id) == Some(&this)
                || !lock(&busy).insert(stream.stream_id.clone())
            {
                continue;
            }
            let dir = this.0.clone();
            done.insert(stream.stream_id.clone(), this);
            let (agent, slots, busy) = (agent.clone(), slots.clone(), busy.clone());
            runs.spawn(async move {
                // The slot is held until ffmpeg is done.
                if let Ok(_slot) = slots.acquire().await
                    && let Err(e) = make(&agent.ffmpeg, &dir, &newest.name).await
                {
                    eprintln!(
                        "media-agent: no thumbnail for stream {}: {e}",
                        stream.stream_id
                    );
                }
                lock(&busy).remove(&stream.stream_id);
            });
        }
    }
}

/// Writes `dir/thumbnail.jpg` from `dir/segment`, replacing the old one at once (a
/// viewer never reads a half-written file). `dir` is the stream's HLS directory, which
/// nginx's workers (possibly another user than the agent) read: nothing in it is followed
/// if it is a link. The
/// directory and the segment are opened without following links, ffmpeg reads the
/// segment from its stdin and writes the image to its stdout (its command line names no
/// file, and no key), and the agent writes the image into a file it creates new (never an
/// existing one) and renames over `thumbnail.jpg` (a link there is replaced, not
/// followed).
pub async fn make(ffmpeg: &Path, dir: &Path, segment: &str) -> Result<(), String> {
    if segment.contains('/') || segment.starts_with(['-', '.']) {
        return Err("not a segment's name".into());
    }
    let dir_fd =
        at::open_dir(dir).map_err(|e| format!("cannot open the stream's directory: {e}"))?;
    let input = at::open_file(&dir_fd, segment)
        .map_err(|e| format!("cannot open the newest segment: {e}"))?;
    let jpeg = run_ffmpeg(ffmpeg, std::process::Stdio::from(input), None).await?;
    // nginx's workers may run as another user (nobody, under root): 0644.
    at::replace(&dir_fd, "thumbnail.jpg", &jpeg, 0o644)
        .map_err(|e| format!("cannot replace the thumbnail: {e}"))
}

/// A JPEG of the first frame of `segment` (an MPEG-TS segment's bytes), 480 px at most.
pub async fn picture(ffmpeg: &Path, segment: Vec<u8>) -> Result<Vec<u8>, String> {
    run_ffmpeg(ffmpeg, std::process::Stdio::piped(), Some(segment)).await
}

/// Runs ffmpeg on a segment from its stdin (`input`, or `bytes` written to it); answers
/// the JPEG it wrote to its stdout.
async fn run_ffmpeg(
    ffmpeg: &Path,
    input: std::process::Stdio,
    bytes: Option<Vec<u8>>,
) -> Result<Vec<u8>, String> {
    let mut command = crate::child::command(ffmpeg, libc::SIGKILL);
    command
        .args(["-nostdin", "-hide_banner", "-loglevel", "error"])
        .args(["-f", "mpegts", "-i", "pipe:0", "-frames:v", "1"])
        .args([
            "-vf",
            "scale=w=480:h=480:force_original_aspect_ratio=decrease",
            "-q:v",
            "5",
            "-f",
            "image2pipe",
            "-c:v",
            "mjpeg",
            "pipe:1",
        ])
        .stdin(input)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let run = async {
        let mut child = command.spawn()?;
        if let (Some(bytes), Some(mut stdin)) = (bytes, child.stdin.take()) {
            // ffmpeg may stop reading after the first frame: a closed pipe is no error.
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let _ = stdin.write_all(&bytes).await;
            });
        }
        child.wait_with_output().await
    };
    let output = match tokio::time::timeout(RUN_LIMIT, run).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(format!("ffmpeg could not run: {e}")),
        Err(_) => return Err("ffmpeg took too long".into()),
    };
    if !output.status.success() || output.stdout.is_empty() {
        let text = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "ffmpeg failed ({}): {}",
            output.status,
            redact_keys(text.lines().last().unwrap_or(""))
        ));
    }
    Ok(output.stdout)
}

/// File operations relative to a directory opened once, none of which follows a link.
pub mod at {
    use std::ffi::CString;
    use std::fs::File;
    use std::io::{self, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    fn c(text: &[u8]) -> io::Result<CString> {
        CString::new(text).map_err(|_| io::ErrorKind::InvalidInput.into())
    }

    fn fd(raw: libc::c_int) -> io::Result<OwnedFd> {
        if raw < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: a descriptor just returned by the kernel, owned by no one else.
            Ok(unsafe { OwnedFd::from_raw_fd(raw) })
        }
    }

    /// The directory `path`; a link in its place is refused (ELOOP/ENOTDIR).
    pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
        let path = c(path.as_os_str().as_bytes())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid C string; the result is checked.
        fd(unsafe { libc::open(path.as_ptr(), flags) })
    }

    /// The regular file `name` in `dir`, for reading; a link is refused.
    pub fn open_file(dir: &OwnedFd, name: &str) -> io::Result<File> {
        let name = c(name.as_bytes())?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: a valid descriptor and C string; the result is checked.
        let file = File::from(fd(unsafe {
            libc::openat(dir.as_raw_fd(), name.as_ptr(), flags)
        })?);
        if !file.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        Ok(file)
    }

    /// Writes `bytes` to `name` in `dir` through a file created new (`O_EXCL`: never one
    /// that exists, never through a link), renamed over `name`.
    pub fn replace(dir: &OwnedFd, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        let tmp = format!(".{name}.{}.tmp", domain::ids::random_hex(8));
        let (tmp_c, name_c) = (c(tmp.as_bytes())?, c(name.as_bytes())?);
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid descriptor and C string; the result is checked.
        let mut file = File::from(fd(unsafe {
            libc::openat(dir.as_raw_fd(), tmp_c.as_ptr(), flags, mode as libc::c_uint)
        })?);
        let written = file
            .write_all(bytes)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(mode))
            })
            .and_then(|()| {
                // SAFETY: valid descriptors and C strings; the result is checked.
                let renamed = unsafe {
                    libc::renameat(
                        dir.as_raw_fd(),
                        tmp_c.as_ptr(),
                        dir.as_raw_fd(),
                        name_c.as_ptr(),
                    )
                };
                if renamed == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        if written.is_err() {
            // SAFETY: as above.
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp_c.as_ptr(), 0) };
        }
        written
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn links_are_replaced_or_refused_never_followed() {
            let root = tempfile_dir();
            let dir = root.join("stream");
            std::fs::create_dir(&dir).unwrap();
            let victim = root.join("victim");
            std::fs::write(&victim, b"the agent's own").unwrap();
            std::os::unix::fs::symlink(&victim, dir.join("thumbnail.jpg")).unwrap();
            std::os::unix::fs::symlink(&victim, dir.join("1.ts")).unwrap();
            let fd = open_dir(&dir).unwrap();
            replace(&fd, "thumbnail.jpg", b"jpeg", 0o644).unwrap();
            assert_eq!(std::fs::read(&victim).unwrap(), b"the agent's own");
            assert_eq!(std::fs::read(dir.join("thumbnail.jpg")).unwrap(), b"jpeg");
            assert!(open_file(&fd, "1.ts").is_err(), "a linked segment");
            std::os::unix::fs::symlink(&root, root.join("linked")).unwrap();
            assert!(
                open_dir(&root.join("linked")).is_err(),
                "a linked directory"
            );
            assert_eq!(
                std::fs::read_dir(&dir).unwrap().count(),
                2,
                "no temporary left"
            );
            std::fs::remove_dir_all(&root).unwrap();
        }

        fn tempfile_dir() -> std::path::PathBuf {
            let dir =
                std::env::temp_dir().join(format!("media-agent-at-{}", domain::ids::random_hex(8)));
            std::fs::create_dir(&dir).unwrap();
            dir
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
