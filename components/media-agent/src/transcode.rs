//! Each accepted publish's HLS writer: one ffmpeg that reads the stream back from nginx
//! (loopback RTMP) and writes its renditions ([`crate::ladder`]) into the stream's
//! directory, restarted while the publisher is live, stopped with it; and the master
//! playlist, rewritten as the segments are measured. The CPU [`Budget`] decides whether a
//! stream gets its scaled renditions: one beyond it plays as passthrough, and says so.

use crate::ladder::{self, Costs, Encoder, Plan, Segmenting, Source, Variant};
use crate::logging::redact_keys;
use crate::media_store::MediaStore;
use crate::replay::{Archive, RunRendition};
use crate::stat;
use domain::media::{
    Ladder, LadderReason, LatencyMode, LiveLadder, RenditionSample, rendition_health,
};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinHandle;

/// How long the stream's metadata (size, frame rate, audio) may take to reach `/stat`.
const METADATA_WAIT: Duration = Duration::from_secs(6);
/// How often the master playlist and the ladder's measurements are refreshed.
const MEASURE_EVERY: Duration = Duration::from_secs(1);
/// The media rate is measured over this much wall time.
const RATE_WINDOW: Duration = Duration::from_secs(4);
/// Pauses between restarts of an ffmpeg that exited while the stream is live.
const RESTART_PAUSES: [u64; 4] = [1, 2, 5, 10];
/// How long an ffmpeg whose publisher left reads on before it is asked to stop.
const DRAIN: Duration = Duration::from_secs(2);
/// How long an ffmpeg asked to stop (SIGINT: it writes its last segment) may take.
const STOP_WAIT: Duration = Duration::from_secs(3);

/// Cores the agent may spend on renditions; each stream reserves its ladder's estimate
/// for as long as it is live.
#[derive(Debug)]
pub struct Budget {
    total: f64,
    used: Mutex<f64>,
}

impl Budget {
    pub fn new(total: f64) -> Arc<Budget> {
        Arc::new(Budget {
            total,
            used: Mutex::new(0.0),
        })
    }

    /// Reserves `cores`, or none when fewer are left.
    pub fn reserve(self: &Arc<Budget>, cores: f64) -> Option<Reservation> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if *used + cores > self.total + 1e-9 {
            return None;
        }
        *used += cores;
        Some(Reservation {
            budget: self.clone(),
            cores,
        })
    }

    /// Cores reserved now.
    pub fn used(&self) -> f64 {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Cores held for a live stream, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    cores: f64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = (*used - self.cores).max(0.0);
    }
}

/// What every stream's transcoder shares.
#[derive(Debug, Clone)]
pub struct Context {
    pub ffmpeg: PathBuf,
    /// `rtmp://<loopback>:<port>/<ingest app>`: the stream is `<this>/<key>`.
    pub source_base: String,
    pub rtmp_app: String,
    /// nginx's `/stat`.
    pub stat_url: String,
    pub hls_dir: PathBuf,
    pub fragment_secs: u64,
    pub playlist_secs: u64,
    pub encoder: Encoder,
    pub preset: String,
    pub costs: Costs,
    pub budget: Arc<Budget>,
    /// Where the segments a replay keeps go.
    pub store: Arc<dyn MediaStore>,
}

/// A live stream's transcoder: stops its ffmpeg when dropped.
pub struct Transcoder {
    task: JoinHandle<()>,
    ladder: Arc<Mutex<Option<LiveLadder>>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Drop for Transcoder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Transcoder {
    /// Starts writing the HLS of the stream nginx knows as `key` (publisher `client_id`)
    /// into `hls/<key>/`; with an `archive`, every segment is kept for the replay.
    pub fn start(
        context: Arc<Context>,
        key: &str,
        client_id: u64,
        wanted: Ladder,
        latency: LatencyMode,
        archive: Option<Arc<Mutex<Archive>>>,
    ) -> Transcoder {
        let ladder: Arc<Mutex<Option<LiveLadder>>> = Arc::default();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run(
            context,
            key.to_string(),
            client_id,
            wanted,
            latency,
            ladder.clone(),
            archive,
            stopped,
        ));
        Transcoder { task, ladder, stop }
    }

    /// The publisher left: ffmpeg is asked to stop (it writes its last segment), and the
    /// segments it wrote are kept. Waits at most `limit`, then stops it outright.
    pub async fn finish(mut self, limit: Duration) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(limit, &mut self.task).await;
    }

    /// The ladder as last measured (none before the first segments).
    pub fn ladder(&self) -> Option<LiveLadder> {
        self.ladder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What nginx knows of the stream: its size and frame rate, and its audio.
#[derive(Debug, Clone, Default)]
struct Metadata {
    source: Option<Source>,
    has_audio: bool,
    audio_codec: Option<String>,
    video_codec: Option<String>,
}

async fn metadata(context: &Context, key: &str, client_id: u64) -> Metadata {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build();
    let deadline = Instant::now() + METADATA_WAIT;
    let mut last = Metadata::default();
    while let Ok(client) = &client {
        if let Ok(answer) = client.get(&context.stat_url).send().await
            && let Ok(text) = answer.text().await
            && let Ok(streams) = stat::parse(&text)
            && let Some(stream) = streams.iter().find(|s| {
                s.app == context.rtmp_app
                    && s.name == key
                    && s.clients.iter().any(|c| c.id == client_id && c.publishing)
            })
        {
            let video = stream.video.clone().unwrap_or_default();
            let audio = stream.audio.clone().unwrap_or_default();
            let size = video
                .width
                .zip(video.height)
                .filter(|(w, h)| *w > 0 && *h > 0);
            last = Metadata {
                source: size.map(|(w, h)| Source {
                    width: w as u32,
                    height: h as u32,
                    frame_rate: video.frame_rate.filter(|f| *f > 0.0).unwrap_or(30.0),
                }),
                has_audio: audio.codec.is_some(),
                audio_codec: audio.codec,
                video_codec: video.codec,
            };
            if last.source.is_some() {
                return last;
            }
        }
        if Instant::now() >= deadline {
            break;
        }
        // Often: the stream is read only once this is known, and whatever it sends
        // meanwhile is in neither the live stream nor the replay.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last
}

/// Makes the stream's directory (readable by nginx's workers) and clears what an earlier
/// publish under the key left, but its thumbnail.
fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name != "thumbnail.jpg" && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn run(
    context: Arc<Context>,
    key: String,
    client_id: u64,
    wanted: Ladder,
    latency: LatencyMode,
    shared: Arc<Mutex<Option<LiveLadder>>>,
    archive: Option<Arc<Mutex<Archive>>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let dir = context.hls_dir.join(&key);
    if let Err(e) = prepare_dir(&dir) {
        eprintln!("media-agent: cannot prepare a stream's HLS directory: {e}");
        return;
    }
    let meta = metadata(&context, &key, client_id).await;
    let mut plan = ladder::plan(wanted, meta.source);
    // Only H.264 is copied into MPEG-TS as the players expect it; nginx-rtmp carries
    // nothing else anyway.
    if meta.video_codec.as_deref().is_some_and(|c| c != "H264") {
        eprintln!("media-agent: the stream's video is not H.264; serving it as it is");
    }
    let mut reservation = None;
    if plan.mode == Ladder::Adaptive
        && let Some(source) = meta.source
    {
        let cores = ladder::cores(&plan, source, context.costs);
        reservation = context.budget.reserve(cores);
        if reservation.is_none() {
            eprintln!(
                "media-agent: no CPU left for a stream's renditions ({cores:.2} cores asked, \
                 {:.2} of {:.2} in use); serving it as passthrough",
                context.budget.used(),
                context.budget.total
            );
            plan = ladder::passthrough(plan.renditions, LadderReason::Capacity);
        }
    }
    let _reservation = reservation;
    let segmenting = Segmenting::of(latency, context.fragment_secs, context.playlist_secs);
    let source_url = format!("{}/{key}", context.source_base);
    let args = ladder::ffmpeg_args(&ladder::Job {
        source_url: &source_url,
        plan: &plan,
        segmenting,
        has_audio: meta.has_audio,
        audio_is_aac: meta.audio_codec.as_deref() == Some("AAC"),
        encoder: context.encoder,
        preset: &context.preset,
    });
    let frame_rate = meta.source.map_or(30.0, |s| s.frame_rate);
    let audio = ladder::audio_codec(meta.audio_codec.as_deref(), None);
    let mut pauses = RESTART_PAUSES.iter();
    let keeping = archive.map(|archive| Keeping {
        archive,
        renditions: plan
            .renditions
            .iter()
            .map(|r| RunRendition {
                name: r.name.clone(),
                width: r.width,
                height: r.height,
            })
            .collect(),
        frame_rate,
        audio: audio.map(str::to_string),
        run: 0,
    });
    let mut keeping = keeping;
    loop {
        if *stop.borrow() {
            return;
        }
        let started = Instant::now();
        if let Some(k) = &mut keeping {
            k.run = lock(&k.archive).next_run();
        }
        let why = run_ffmpeg(
            &context,
            &dir,
            &args,
            &plan,
            latency,
            (frame_rate, audio),
            &shared,
            keeping.as_ref(),
            &mut stop,
        )
        .await;
        if let Some(k) = &keeping {
            k.harvest(&context, &dir);
        }
        if *stop.borrow() {
            return;
        }
        if started.elapsed() > Duration::from_secs(60) {
            pauses = RESTART_PAUSES.iter();
        }
        let pause = pauses.next().copied().unwrap_or(10);
        // A publisher that leaves ends ffmpeg's stream first (nginx's idle_streams off),
        // and the agent's stop follows within the pause: that is no failure to report.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(pause)) => {}
            _ = stop.changed() => return,
        }
        eprintln!("media-agent: a stream's HLS writer stopped ({why}); restarted");
    }
}

/// What a stream whose replay is kept needs to keep its segments.
struct Keeping {
    archive: Arc<Mutex<Archive>>,
    renditions: Vec<RunRendition>,
    frame_rate: f64,
    audio: Option<String>,
    /// The run of ffmpeg writing now.
    run: u64,
}

impl Keeping {
    /// Keeps what the live playlists list now, and writes the replay's playlists so far
    /// (those that changed).
    fn harvest(&self, context: &Context, dir: &Path) {
        let mut archive = lock(&self.archive);
        archive.harvest(
            &*context.store,
            dir,
            self.run,
            &self.renditions,
            self.frame_rate,
            self.audio.as_deref(),
        );
        archive.publish_live(&*context.store);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs one ffmpeg until it exits, measuring its output meanwhile; answers why it
/// stopped, without the key.
#[allow(clippy::too_many_arguments)]
async fn run_ffmpeg(
    context: &Context,
    dir: &Path,
    args: &[String],
    plan: &Plan,
    latency: LatencyMode,
    (frame_rate, audio): (f64, Option<&str>),
    shared: &Mutex<Option<LiveLadder>>,
    keeping: Option<&Keeping>,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> String {
    let mut command = crate::child::command(&context.ffmpeg, libc::SIGKILL);
    command
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return format!("ffmpeg could not be started: {e}"),
    };
    let errors = crate::child::stderr_tail(&mut child, 5, redact_keys);
    // ffmpeg's progress: the media time written, once a second.
    let out_time: Arc<Mutex<VecDeque<(Instant, f64)>>> = Arc::default();
    let progress = child.stdout.take().map(|stdout| {
        let out_time = out_time.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(us) = line
                    .strip_prefix("out_time_us=")
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .filter(|us| *us >= 0)
                {
                    let mut samples = out_time.lock().unwrap_or_else(|e| e.into_inner());
                    samples.push_back((Instant::now(), us as f64 / 1e6));
                    while samples.len() > 16 {
                        samples.pop_front();
                    }
                }
            }
        })
    });
    let mut ticks = tokio::time::interval(MEASURE_EVERY);
    let exit = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = ticks.tick() => {
                let rate = media_rate(&out_time.lock().unwrap_or_else(|e| e.into_inner()));
                if let Some(live) = measure(dir, plan, latency, frame_rate, audio, rate).await {
                    *shared.lock().unwrap_or_else(|e| e.into_inner()) = Some(live);
                }
                if let Some(k) = keeping {
                    k.harvest(context, dir);
                }
            }
            changed = stop.changed() => {
                if changed.is_ok() && !*stop.borrow() {
                    continue;
                }
                // The publisher left, and nginx keeps an idle stream's players waiting
                // rather than ending them: ffmpeg first reads what nginx relayed last,
                // then is stopped so that it writes its last segment.
                break stop_gracefully(&mut child).await;
            }
        }
    };
    if let Some(progress) = progress {
        progress.abort();
    }
    let errors = errors.await.unwrap_or_default().join("; ");
    let status = exit.map_or_else(|e| e.to_string(), |s| s.to_string());
    if errors.is_empty() {
        format!("ffmpeg {status}")
    } else {
        format!("ffmpeg {status}: {errors}")
    }
}

/// Stops an ffmpeg that reads a stream whose publisher left. nginx ends the stream's
/// players then (`idle_streams off`): ffmpeg reads the end, writes its last segment and
/// exits by itself. One that has not within [`DRAIN`] gets SIGINT (it ends as `q` does
/// once its read returns: a second signal would interrupt its own last writes, leaving
/// the playlist empty), then SIGKILL after [`STOP_WAIT`].
async fn stop_gracefully(
    child: &mut tokio::process::Child,
) -> std::io::Result<std::process::ExitStatus> {
    if let Ok(status) = tokio::time::timeout(DRAIN, child.wait()).await {
        return status;
    }
    if let Some(pid) = child.id() {
        crate::child::signal(pid, libc::SIGINT, false);
    }
    match tokio::time::timeout(STOP_WAIT, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            eprintln!("media-agent: a stream's HLS writer did not stop; killed");
            let _ = child.kill().await;
            child.wait().await
        }
    }
}

/// Media seconds written per wall second over the last [`RATE_WINDOW`] of progress.
fn media_rate(samples: &VecDeque<(Instant, f64)>) -> Option<f64> {
    let (newest_at, newest) = *samples.back()?;
    let (oldest_at, oldest) = *samples
        .iter()
        .find(|(at, _)| newest_at.duration_since(*at) <= RATE_WINDOW)?;
    let wall = newest_at.duration_since(oldest_at).as_secs_f64();
    // Only once ffmpeg has run a while: its first second reads what nginx buffered.
    (wall >= 2.0).then(|| ((newest - oldest) / wall * 1000.0).round() / 1000.0)
}

/// Reads every rendition's playlist and segments; once each lists one, (re)writes the
/// master playlist. Answers the ladder as measured.
async fn measure(
    dir: &Path,
    plan: &Plan,
    latency: LatencyMode,
    frame_rate: f64,
    audio: Option<&str>,
    rate: Option<f64>,
) -> Option<LiveLadder> {
    let mut variants = Vec::new();
    let mut renditions = Vec::new();
    for (index, r) in plan.renditions.iter().enumerate() {
        let uri = ladder::media_playlist(index);
        let text = tokio::fs::read_to_string(dir.join(&uri)).await.ok()?;
        let listed = ladder::listed(&text);
        let mut sized = Vec::new();
        let mut codecs = Vec::new();
        for segment in &listed {
            if segment.name.contains('/') {
                continue;
            }
            let Ok(meta) = tokio::fs::metadata(dir.join(&segment.name)).await else {
                continue;
            };
            sized.push((segment.seconds, meta.len()));
            if codecs.is_empty()
                && let Ok(data) = tokio::fs::read(dir.join(&segment.name)).await
                && let Some(video) = ladder::avc1_codec(&data)
            {
                codecs.push(video);
                codecs.extend(audio.map(str::to_string));
            }
        }
        let (average, peak) = ladder::bandwidth(&sized)?;
        // The source's size when nginx did not know it: the segments will.
        let (width, height) = (r.width, r.height);
        variants.push(Variant {
            uri,
            width,
            height,
            frame_rate,
            average,
            peak,
            codecs,
        });
        renditions.push(RenditionSample {
            name: r.name.clone(),
            width: i64::from(width),
            height: i64::from(height),
            transcoded: r.transcoded(),
            bitrate: i64::try_from(average).ok(),
            peak_bitrate: i64::try_from(peak).ok(),
            media_rate: rate,
            health: rendition_health(rate),
        });
    }
    // A source of unknown size is listed without RESOLUTION rather than as 0x0.
    let mut text = ladder::master(&variants);
    if variants.iter().any(|v| v.width == 0) {
        text = text.replace(",RESOLUTION=0x0", "");
    }
    if let Err(e) = write_atomically(&dir.join(ladder::MASTER), &text).await {
        eprintln!("media-agent: cannot write a stream's master playlist: {e}");
    }
    Some(LiveLadder {
        mode: plan.mode,
        reason: plan.reason,
        latency_mode: latency,
        renditions,
    })
}

/// Writes `path` through a temporary file renamed over it: a viewer never reads half.
async fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("m3u8.tmp");
    tokio::fs::write(&tmp, text).await?;
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).await?;
    tokio::fs::rename(&tmp, path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_admits_until_full_and_frees_on_drop() {
        let budget = Budget::new(1.0);
        let a = budget.reserve(0.6).unwrap();
        assert!(budget.reserve(0.6).is_none());
        let b = budget.reserve(0.4).unwrap();
        assert!((budget.used() - 1.0).abs() < 1e-9);
        drop(a);
        assert!(budget.reserve(0.6).is_some());
        drop(b);
        assert_eq!(budget.used(), 0.0);
        assert!(Budget::new(0.0).reserve(0.01).is_none());
        assert!(Budget::new(0.0).reserve(0.0).is_some());
    }

    #[test]
    fn the_media_rate_is_measured_over_a_window() {
        let start = Instant::now();
        let at = |s: f64| start + Duration::from_secs_f64(s);
        let samples: VecDeque<_> = [(at(0.0), 0.0), (at(1.0), 1.0), (at(2.0), 2.0)].into();
        assert_eq!(media_rate(&samples), Some(1.0));
        let slow: VecDeque<_> = [(at(0.0), 0.0), (at(2.0), 1.0), (at(4.0), 2.0)].into();
        assert_eq!(media_rate(&slow), Some(0.5));
        let short: VecDeque<_> = [(at(0.0), 0.0), (at(1.0), 1.0)].into();
        assert_eq!(media_rate(&short), None);
        // Older samples than the window do not count.
        let window: VecDeque<_> = [(at(0.0), 0.0), (at(10.0), 0.5), (at(14.0), 4.5)].into();
        assert_eq!(media_rate(&window), Some(1.0));
    }
}
