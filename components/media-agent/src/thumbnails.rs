//! Each live stream's `thumbnail.jpg`, beside its playlist (served, and signed, like it):
//! the first frame of its newest segment, refreshed when a new segment appears. Decoding
//! costs CPU, so at most [`AT_ONCE`] ffmpeg runs at a time for the whole agent. It is
//! written into the directory nginx writes the stream's HLS to (`hls/<key>`), which the
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
/// viewer never reads a half-written file). ffmpeg runs in `dir` and is given names
/// within it only: `dir` holds a stream key, which neither its command line nor its
/// complaints (in the error) repeat.
pub async fn make(ffmpeg: &Path, dir: &Path, segment: &str) -> Result<(), String> {
    const TMP: &str = "thumbnail.tmp.jpg";
    if segment.contains('/') || segment.starts_with('-') {
        return Err("not a segment's name".into());
    }
    let tmp = dir.join(TMP);
    let mut command = crate::child::command(ffmpeg, libc::SIGKILL);
    command
        .current_dir(dir)
        .args(["-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-i"])
        .arg(segment)
        .args(["-frames:v", "1", "-update", "1"])
        .args([
            "-vf",
            "scale=w=480:h=480:force_original_aspect_ratio=decrease",
            "-q:v",
            "5",
        ])
        .arg(TMP)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(RUN_LIMIT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => {
            return Err(format!(
                "ffmpeg could not run in the stream's directory: {e}"
            ));
        }
        Err(_) => return Err("ffmpeg took too long".into()),
    };
    if !output.status.success() {
        let _ = tokio::fs::remove_file(&tmp).await;
        let text = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "ffmpeg failed ({}): {}",
            output.status,
            redact_keys(text.lines().last().unwrap_or(""))
        ));
    }
    // nginx's workers may run as another user (nobody, under root).
    use std::os::unix::fs::PermissionsExt;
    let _ = tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).await;
    tokio::fs::rename(&tmp, dir.join("thumbnail.jpg"))
        .await
        .map_err(|e| format!("cannot replace the thumbnail: {e}"))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
