//! Clips (docs/replays.md#clips): a range of a stream's kept media. The agent asks the
//! platform every second for the clips to make; for each one it writes HLS playlists over
//! the replay's own segments (`replays/<stream id>/clips/<clip id>/`, lines
//! `../../v<i>_<n>.ts`: nothing copied) and reports them within a second or so, then cuts
//! the MP4 of the source rendition with ffmpeg (`clips/<clip id>/clip.mp4`, with a
//! thumbnail) and reports it ready. The kept segments of a stream are read through one
//! function, [`kept_media`]: the in-memory [`Archive`] while the agent keeps one, else the
//! store's playlists (`replays/<stream id>/v<i>.m3u8`).

use crate::agent::Agent;
use crate::ladder::{self, Variant};
use crate::media_store::{MediaStore, replay_prefix};
use crate::platform::Answer;
use crate::replay::{self, Archive};
use domain::clip::{self as rules, Asked};
use domain::media::protocol::{Clip, ClipAction, ClipReport, PendingClip};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One kept segment, as a clip lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// `v<i>_<n>.ts`, under the replay's prefix.
    pub name: String,
    pub seconds: f64,
    /// A discontinuity before it (a new run of the HLS writer, or a gap).
    pub discontinuity: bool,
    pub at: Option<String>,
}

/// The kept media of one rendition.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// Its place in the ladder (`v<i>`).
    pub index: usize,
    pub segments: Vec<Segment>,
}

/// What is kept of a stream: its renditions and the master playlist over them (whose
/// lines name `v<i>.m3u8`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeptMedia {
    pub renditions: Vec<Kept>,
    pub master: String,
}

impl KeptMedia {
    /// The source rendition's segments' durations: the media time clips are placed in.
    pub fn source_seconds(&self) -> Vec<f64> {
        self.renditions
            .first()
            .map(|r| r.segments.iter().map(|s| s.seconds).collect())
            .unwrap_or_default()
    }

    pub fn duration(&self) -> f64 {
        self.source_seconds().iter().sum()
    }
}

/// The kept segments of `stream_id`, with their durations: from the agent's in-memory
/// archive while it keeps one (live, or in its reconnect window), else from the store's
/// playlists (a written replay; with durable playlists, any stream). None: nothing kept.
pub fn kept_media(
    archive: Option<&Archive>,
    store: &dyn MediaStore,
    stream_id: &str,
) -> Option<KeptMedia> {
    match archive {
        Some(archive) => from_archive(archive),
        None => from_store(store, stream_id),
    }
    .filter(|m| m.renditions.first().is_some_and(|r| !r.segments.is_empty()))
}

fn from_archive(archive: &Archive) -> Option<KeptMedia> {
    let mut renditions = Vec::new();
    let mut variants = Vec::new();
    for (index, r) in archive.renditions.iter().enumerate() {
        if r.kept.is_empty() {
            continue;
        }
        let mut kept = r.kept.clone();
        kept.sort_by_key(|k| k.number);
        let mut run = kept.first().map(|k| k.run);
        let segments = kept
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let discontinuity = i > 0 && (Some(k.run) != run || k.gap_before);
                run = Some(k.run);
                Segment {
                    name: k.name.clone(),
                    seconds: k.seconds,
                    discontinuity,
                    at: k.at.clone(),
                }
            })
            .collect();
        let sized: Vec<(f64, u64)> = kept.iter().map(|k| (k.seconds, k.bytes)).collect();
        let (average, peak) = ladder::bandwidth(&sized).unwrap_or((0, 0));
        variants.push(Variant {
            uri: ladder::media_playlist(index),
            width: r.width,
            height: r.height,
            frame_rate: r.frame_rate,
            average,
            peak,
            codecs: r.codecs.clone(),
        });
        renditions.push(Kept { index, segments });
    }
    let mut master = ladder::master(&variants);
    if variants.iter().any(|v| v.width == 0) {
        master = master.replace(",RESOLUTION=0x0", "");
    }
    Some(KeptMedia { renditions, master })
}

fn from_store(store: &dyn MediaStore, stream_id: &str) -> Option<KeptMedia> {
    let prefix = replay_prefix(stream_id);
    let master =
        String::from_utf8(store.get(&format!("{prefix}/{}", ladder::MASTER)).ok()?).ok()?;
    let mut renditions = Vec::new();
    for line in master.lines().map(str::trim) {
        let Some(index) = line
            .strip_prefix('v')
            .and_then(|rest| rest.strip_suffix(".m3u8"))
            .filter(|d| d.len() == 1)
            .and_then(|d| d.parse::<usize>().ok())
        else {
            continue;
        };
        let Ok(bytes) = store.get(&format!("{prefix}/{line}")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        renditions.push(Kept {
            index,
            segments: playlist_segments(&text, index),
        });
    }
    renditions.sort_by_key(|r| r.index);
    Some(KeptMedia { renditions, master })
}

/// The segments of a kept rendition's playlist (EVENT or VOD): only names
/// `v<index>_<n>.ts`, with their discontinuities and times.
pub fn playlist_segments(text: &str, index: usize) -> Vec<Segment> {
    let mut out = Vec::new();
    let (mut seconds, mut at, mut discontinuity) = (None, None, false);
    for line in text.lines().map(str::trim) {
        if line == "#EXT-X-DISCONTINUITY" {
            discontinuity = true;
        } else if let Some(rest) = line.strip_prefix("#EXT-X-PROGRAM-DATE-TIME:") {
            at = Some(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("#EXTINF:") {
            seconds = rest
                .split(',')
                .next()
                .and_then(|d| d.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0);
        } else if !line.is_empty() && !line.starts_with('#') {
            if let Some(s) = seconds.take()
                && replay::segment_number(line, index).is_some()
            {
                out.push(Segment {
                    name: line.to_string(),
                    seconds: s,
                    discontinuity: discontinuity && !out.is_empty(),
                    at: at.take(),
                });
                discontinuity = false;
            } else {
                // A line not taken is a hole: what follows it is a discontinuity.
                discontinuity = true;
                at = None;
            }
        }
    }
    out
}

/// A clip's VOD playlist over `segments`, each named from the clip's directory
/// (`replays/<stream id>/clips/<clip id>/`): `../../v<i>_<n>.ts`.
pub fn clip_playlist(segments: &[Segment]) -> String {
    let target = segments
        .iter()
        .map(|s| s.seconds)
        .fold(1.0_f64, f64::max)
        .ceil() as u64;
    let mut out = format!(
        "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-TARGETDURATION:{target}\n\
         #EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-INDEPENDENT-SEGMENTS\n"
    );
    for (i, s) in segments.iter().enumerate() {
        if i > 0 && s.discontinuity {
            out.push_str("#EXT-X-DISCONTINUITY\n");
        }
        if let Some(at) = &s.at {
            out.push_str(&format!("#EXT-X-PROGRAM-DATE-TIME:{at}\n"));
        }
        out.push_str(&format!("#EXTINF:{:.6},\n../../{}\n", s.seconds, s.name));
    }
    out.push_str("#EXT-X-ENDLIST\n");
    out
}

/// The store's prefix of a clip's HLS playlists.
pub fn hls_prefix(stream_id: &str, clip_id: &str) -> String {
    format!("{}/clips/{clip_id}", replay_prefix(stream_id))
}

/// The store's prefix of a clip's MP4 and thumbnail.
pub fn own_prefix(clip_id: &str) -> String {
    format!("clips/{clip_id}")
}

/// Why a clip cannot be made: the reason code the platform shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    OutOfRange,
    NoMedia,
    WriteFailed,
}

impl Refused {
    pub fn code(self) -> &'static str {
        match self {
            Refused::OutOfRange => "out_of_range",
            Refused::NoMedia => "no_media",
            Refused::WriteFailed => "write_failed",
        }
    }
}

/// A clip placed in its stream's kept media.
#[derive(Debug, Clone, Copy)]
pub struct Placed<'a> {
    pub stream_id: &'a str,
    pub clip_id: &'a str,
    /// Seconds of media time.
    pub start: f64,
    pub duration: f64,
}

/// Where a clip lies in `media`: its start and length, seconds.
pub fn place(media: &KeptMedia, asked: Asked) -> Result<(f64, f64), Refused> {
    asked.place(media.duration()).ok_or(Refused::OutOfRange)
}

/// Writes the clip's HLS playlists (every rendition's, and the master) for
/// `[start, start + duration)`; answers the source playlist's length in seconds.
pub fn write_hls(
    store: &dyn MediaStore,
    media: &KeptMedia,
    placed: &Placed<'_>,
) -> Result<f64, Refused> {
    let Placed {
        stream_id,
        clip_id,
        start,
        duration,
    } = *placed;
    let prefix = hls_prefix(stream_id, clip_id);
    let mut source_seconds = None;
    for r in &media.renditions {
        let seconds: Vec<f64> = r.segments.iter().map(|s| s.seconds).collect();
        let Some(listed) = rules::listed(&seconds, start, duration) else {
            continue;
        };
        let segments = &r.segments[listed];
        store
            .put(
                &format!("{prefix}/{}", ladder::media_playlist(r.index)),
                clip_playlist(segments).as_bytes(),
            )
            .map_err(|_| Refused::WriteFailed)?;
        source_seconds.get_or_insert(segments.iter().map(|s| s.seconds).sum::<f64>());
    }
    let total = source_seconds.ok_or(Refused::OutOfRange)?;
    store
        .put(
            &format!("{prefix}/{}", ladder::MASTER),
            media.master.as_bytes(),
        )
        .map_err(|_| Refused::WriteFailed)?;
    Ok(total)
}

/// The longest an MP4 cut may take.
const CUT_LIMIT: Duration = Duration::from_secs(120);
/// How far from the range's start a stream copy may start (at a segment's start): further
/// than that, the MP4 is re-encoded.
const COPY_TOLERANCE: f64 = 1.0;

/// What an MP4 cut made.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    pub seconds: f64,
    pub bytes: u64,
    pub thumbnail: bool,
}

/// Cuts the clip's MP4 from the source rendition's segments covering
/// `[start, start + duration)` (read from the store into `work`, concatenated by ffmpeg)
/// as [`rules::cut`] plans it: the streams copied from the segment start (a keyframe)
/// nearest the start when it is at most [`COPY_TOLERANCE`] away, else re-encoded to the
/// frame; and its thumbnail; keeps both under `clips/<clip id>/`.
pub async fn cut_mp4(
    ffmpeg: &Path,
    store: &dyn MediaStore,
    work: &Path,
    media: &KeptMedia,
    placed: &Placed<'_>,
) -> Result<Cut, String> {
    let Placed {
        stream_id,
        clip_id,
        start,
        duration,
    } = *placed;
    let source = media.renditions.first().ok_or("nothing kept")?;
    let plan = rules::cut(&media.source_seconds(), start, duration, COPY_TOLERANCE)
        .ok_or("the range is not within the kept media")?;
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).map_err(|e| format!("cannot make the work directory: {e}"))?;
    let result = async {
        let mut list = String::new();
        for (i, s) in source.segments[plan.segments.clone()].iter().enumerate() {
            let bytes = store
                .get(&format!("{}/{}", replay_prefix(stream_id), s.name))
                .map_err(|e| format!("cannot read segment {}: {e}", s.name))?;
            let name = format!("s{i}.ts");
            std::fs::write(work.join(&name), &bytes).map_err(|e| e.to_string())?;
            list.push_str(&format!("file '{name}'\n"));
        }
        std::fs::write(work.join("list.txt"), list).map_err(|e| e.to_string())?;
        let seconds = run_cut(ffmpeg, work, &plan).await?;
        let thumbnail = match std::fs::read(work.join("s0.ts")) {
            Ok(first) => match crate::thumbnails::picture(ffmpeg, first).await {
                Ok(jpeg) => store
                    .put(&format!("{}/thumbnail.jpg", own_prefix(clip_id)), &jpeg)
                    .is_ok(),
                Err(_) => false,
            },
            Err(_) => false,
        };
        let bytes = store
            .keep_file(
                work,
                "clip.mp4",
                &format!("{}/clip.mp4", own_prefix(clip_id)),
            )
            .map_err(|e| format!("cannot keep the MP4: {e}"))?;
        Ok(Cut {
            seconds,
            bytes,
            thumbnail,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(work);
    result
}

/// Runs ffmpeg over `work/list.txt` into `work/clip.mp4`; answers its length in seconds.
async fn run_cut(ffmpeg: &Path, work: &Path, plan: &rules::Cut) -> Result<f64, String> {
    let mut command = crate::child::command(ffmpeg, libc::SIGKILL);
    command
        .current_dir(work)
        .args(["-nostdin", "-hide_banner", "-loglevel", "error", "-y"])
        .args(["-f", "concat", "-safe", "0", "-i", "list.txt"]);
    if plan.offset > 0.0 {
        // After the input: decoded and dropped up to the frame (a seek of the input would
        // land between keyframes).
        command.args(["-ss", &format!("{:.3}", plan.offset)]);
    }
    command.args(["-t", &format!("{:.3}", plan.length)]);
    if plan.encode {
        command.args([
            "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-c:a", "aac", "-b:a", "128k",
        ]);
    } else {
        command.args(["-c", "copy"]);
    }
    command
        .args(["-map", "0:v:0?", "-map", "0:a:0?"])
        .args(["-movflags", "+faststart", "-f", "mp4", "clip.mp4"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(CUT_LIMIT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(format!("ffmpeg could not run: {e}")),
        Err(_) => return Err("ffmpeg took too long".into()),
    };
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "ffmpeg failed ({}): {}",
            output.status,
            text.lines().last().unwrap_or("")
        ));
    }
    mp4_seconds(ffmpeg, &work.join("clip.mp4")).await
}

/// The length of a media file, as ffmpeg reads it (`Duration:` of its input report).
pub async fn mp4_seconds(ffmpeg: &Path, file: &Path) -> Result<f64, String> {
    let mut command = crate::child::command(ffmpeg, libc::SIGKILL);
    command
        .args(["-nostdin", "-hide_banner", "-i"])
        .arg(file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .map_err(|_| "ffmpeg took too long".to_string())?
        .map_err(|e| format!("ffmpeg could not run: {e}"))?;
    duration_of(&String::from_utf8_lossy(&output.stderr)).ok_or_else(|| "no duration".into())
}

/// `Duration: HH:MM:SS.xx` of ffmpeg's report, in seconds.
pub fn duration_of(report: &str) -> Option<f64> {
    let at = report.find("Duration: ")? + "Duration: ".len();
    let text = report[at..].split(',').next()?.trim();
    let mut parts = text.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

/// How long a clip whose stream has nothing kept (yet) is asked again before it fails:
/// a replay being written is briefly in neither place.
const NO_MEDIA_GRACE: Duration = Duration::from_secs(30);
/// MP4 cuts at once.
const CUTS_AT_ONCE: usize = 1;

/// The clips this agent is making.
pub struct Clips {
    /// Clip ids being made (their MP4 cut queued or running), so that one is made once.
    running: Mutex<HashMap<String, Instant>>,
    /// When each clip without media was first seen.
    waiting: Mutex<HashMap<String, Instant>>,
    cuts: Arc<tokio::sync::Semaphore>,
}

impl Default for Clips {
    fn default() -> Clips {
        Clips {
            running: Mutex::default(),
            waiting: Mutex::default(),
            cuts: Arc::new(tokio::sync::Semaphore::new(CUTS_AT_ONCE)),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks the platform for the clips to make and delete, and does it.
pub async fn sweep(agent: &Arc<Agent>) {
    let Answer::Ok(pending) = agent.platform.clips_pending().await else {
        return;
    };
    // A clip deleted while it waited for media is asked for no more: forget it.
    lock(&agent.clips.waiting).retain(|_, first| first.elapsed() < NO_MEDIA_GRACE * 10);
    for gone in pending.delete {
        if !crate::logging::is_stream_id(&gone.stream_id) || !crate::logging::is_stream_id(&gone.id)
        {
            continue;
        }
        let store = &*agent.store;
        let deleted = store
            .delete_prefix(&hls_prefix(&gone.stream_id, &gone.id))
            .and_then(|()| store.delete_prefix(&own_prefix(&gone.id)));
        match deleted {
            Ok(()) => {
                report(agent, &gone.id, ClipReport::Deleted, Fields::default()).await;
            }
            Err(e) => eprintln!("media-agent: cannot delete clip {}: {e}", gone.id),
        }
    }
    for clip in pending.make {
        if !crate::logging::is_stream_id(&clip.stream_id) || !crate::logging::is_stream_id(&clip.id)
        {
            continue;
        }
        if lock(&agent.clips.running).contains_key(&clip.id) {
            continue;
        }
        make(agent, clip).await;
    }
}

/// The optional fields of a report.
#[derive(Default)]
struct Fields {
    start_offset: Option<f64>,
    duration: Option<f64>,
    size: Option<u64>,
    thumbnail: Option<bool>,
    error: Option<String>,
}

/// Reports a clip's state; answers whether to go on.
async fn report(agent: &Agent, id: &str, state: ClipReport, fields: Fields) -> bool {
    let body = Clip {
        id: id.to_string(),
        state,
        start_offset: fields.start_offset.map(|s| (s * 1000.0).round() / 1000.0),
        duration: fields.duration.map(|s| (s * 1000.0).round() / 1000.0),
        size: fields.size,
        thumbnail: fields.thumbnail,
        error: fields.error,
    };
    match agent.platform.clip(&body).await {
        Answer::Ok(answer) => answer.action == ClipAction::Continue,
        Answer::Refused { status, code } => {
            eprintln!(
                "media-agent: the platform refused the report of clip {id} ({status}{})",
                code.map(|c| format!(" {c}")).unwrap_or_default()
            );
            false
        }
        Answer::Unavailable(_) => false,
    }
}

fn failed(error: &str) -> Fields {
    Fields {
        error: Some(error.to_string()),
        ..Fields::default()
    }
}

/// Makes one clip: its HLS now (unless reported), its MP4 in the background.
async fn make(agent: &Arc<Agent>, clip: PendingClip) {
    let media = {
        let archive = agent.archive(&clip.stream_id);
        let archive = archive.as_ref().map(|a| lock(a));
        kept_media(archive.as_deref(), &*agent.store, &clip.stream_id)
    };
    let Some(media) = media else {
        let first = *lock(&agent.clips.waiting)
            .entry(clip.id.clone())
            .or_insert_with(Instant::now);
        if first.elapsed() >= NO_MEDIA_GRACE {
            lock(&agent.clips.waiting).remove(&clip.id);
            report(agent, &clip.id, ClipReport::Failed, failed("no_media")).await;
        }
        return;
    };
    lock(&agent.clips.waiting).remove(&clip.id);
    let asked = match (clip.start_offset, clip.last_seconds) {
        (Some(start), _) => Ok((start, clip.duration as f64)),
        (None, Some(seconds)) => place(&media, Asked::Last { seconds }),
        (None, None) => Err(Refused::OutOfRange),
    }
    .and_then(|(start, duration)| {
        // A placed range must lie within what is kept.
        (start >= 0.0 && start + duration <= media.duration() + rules::END_SLACK)
            .then_some((start, duration))
            .ok_or(Refused::OutOfRange)
    });
    let (start, duration) = match asked {
        Ok(range) => range,
        Err(refused) => {
            report(agent, &clip.id, ClipReport::Failed, failed(refused.code())).await;
            return;
        }
    };
    if !clip.hls_ready {
        let placed = Placed {
            stream_id: &clip.stream_id,
            clip_id: &clip.id,
            start,
            duration,
        };
        match write_hls(&*agent.store, &media, &placed) {
            Ok(seconds) => {
                let fields = Fields {
                    start_offset: Some(start),
                    duration: Some(seconds),
                    ..Fields::default()
                };
                if !report(agent, &clip.id, ClipReport::HlsReady, fields).await {
                    return;
                }
            }
            Err(refused) => {
                report(agent, &clip.id, ClipReport::Failed, failed(refused.code())).await;
                return;
            }
        }
    }
    lock(&agent.clips.running).insert(clip.id.clone(), Instant::now());
    let cuts = agent.clips.cuts.clone();
    let this = Arc::downgrade(agent);
    agent.spawn_task(async move {
        let Ok(_permit) = cuts.acquire_owned().await else {
            return;
        };
        let Some(agent) = this.upgrade() else {
            return;
        };
        let work: PathBuf = agent
            .paths
            .work
            .join("tmp")
            .join(format!("clip-{}", clip.id));
        let placed = Placed {
            stream_id: &clip.stream_id,
            clip_id: &clip.id,
            start,
            duration,
        };
        let cut = cut_mp4(&agent.ffmpeg, &*agent.store, &work, &media, &placed).await;
        match cut {
            Ok(cut) => {
                let fields = Fields {
                    duration: Some(cut.seconds),
                    size: Some(cut.bytes),
                    thumbnail: Some(cut.thumbnail),
                    ..Fields::default()
                };
                report(&agent, &clip.id, ClipReport::Ready, fields).await;
            }
            Err(e) => {
                eprintln!("media-agent: the MP4 of clip {} failed: {e}", clip.id);
                report(&agent, &clip.id, ClipReport::Failed, failed("cut_failed")).await;
            }
        }
        lock(&agent.clips.running).remove(&clip.id);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media_store::LocalStore;

    fn segment(n: u64, seconds: f64) -> Segment {
        Segment {
            name: format!("v0_{n}.ts"),
            seconds,
            discontinuity: false,
            at: None,
        }
    }

    #[test]
    fn a_clip_playlist_names_the_replays_segments_and_ends() {
        let mut segments = vec![segment(10, 2.0), segment(11, 2.0), segment(40, 1.5)];
        segments[2].discontinuity = true;
        let text = clip_playlist(&segments);
        assert!(text.contains("#EXT-X-PLAYLIST-TYPE:VOD\n"));
        assert!(text.ends_with("#EXT-X-ENDLIST\n"));
        assert!(
            text.contains("#EXTINF:2.000000,\n../../v0_10.ts\n"),
            "{text}"
        );
        assert!(
            text.contains("../../v0_11.ts\n#EXT-X-DISCONTINUITY\n"),
            "{text}"
        );
        let total: f64 = ladder::listed(&text).iter().map(|l| l.seconds).sum();
        assert!((total - 5.5).abs() < 1e-9);
    }

    #[test]
    fn the_stores_playlists_are_read_with_only_their_own_names() {
        let text = "#EXTM3U\n#EXT-X-PLAYLIST-TYPE:EVENT\n#EXTINF:2.0,\nv1_5.ts\n\
#EXT-X-DISCONTINUITY\n#EXTINF:2.0,\n../../etc/passwd\n#EXTINF:2.5,\nv1_9.ts\n#EXTINF:2.0,\nv0_10.ts\n";
        let s = playlist_segments(text, 1);
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].name, "v1_9.ts");
        assert!(s[1].discontinuity);
        assert_eq!(
            duration_of("  Duration: 00:01:02.50, start: 0.0"),
            Some(62.5)
        );
        assert_eq!(duration_of("nothing"), None);
    }

    #[test]
    fn a_clip_is_placed_in_the_kept_media_and_written_as_playlists_over_it() {
        let root = std::env::temp_dir().join(format!("media-clip-{}", domain::ids::random_hex(8)));
        let store = LocalStore::new(root.join("media"));
        let sid = "0b4d9f7e-3c1a-4e8b-9d2f-6a5c4b3e2d1f";
        // A written replay: the store's playlists are the source.
        let mut vod = String::from("#EXTM3U\n#EXT-X-PLAYLIST-TYPE:VOD\n");
        for n in 0..30 {
            vod.push_str(&format!("#EXTINF:2.000000,\nv0_{}.ts\n", 100 + n));
        }
        vod.push_str("#EXT-X-ENDLIST\n");
        store
            .put(&format!("replays/{sid}/v0.m3u8"), vod.as_bytes())
            .unwrap();
        store
            .put(
                &format!("replays/{sid}/index.m3u8"),
                b"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\nv0.m3u8\n",
            )
            .unwrap();
        let media = kept_media(None, &store, sid).unwrap();
        assert_eq!(media.duration(), 60.0);
        assert_eq!(place(&media, Asked::Last { seconds: 10 }), Ok((50.0, 10.0)));
        assert_eq!(
            place(
                &media,
                Asked::Range {
                    start: 55,
                    duration: 10
                }
            ),
            Err(Refused::OutOfRange)
        );
        let placed = Placed {
            stream_id: sid,
            clip_id: "c1",
            start: 13.0,
            duration: 10.0,
        };
        let seconds = write_hls(&store, &media, &placed).unwrap();
        assert!((seconds - 10.0).abs() <= 2.0, "{seconds}");
        let text = String::from_utf8(
            store
                .get(&format!("replays/{sid}/clips/c1/v0.m3u8"))
                .unwrap(),
        )
        .unwrap();
        assert!(text.contains("../../v0_106.ts"), "{text}");
        assert!(store.exists(&format!("replays/{sid}/clips/c1/index.m3u8")));
        // Nothing kept: no media.
        assert!(kept_media(None, &store, "00000000-0000-0000-0000-000000000000").is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The video stream's length in a media file, as ffprobe reads it.
    fn video_seconds(file: &Path) -> f64 {
        let output = std::process::Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", "v:0"])
            .args(["-show_entries", "stream=duration", "-of", "csv=p=0"])
            .arg(file)
            .output()
            .expect("ffprobe is not installed: apt-get install ffmpeg");
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap()
    }

    /// Segments of a test pattern whose keyframes are 4 s apart (an encoder's long GOP): a
    /// copy starting between keyframes would have no video until the next one, so a range
    /// far from a segment start is re-encoded to the frame, and one near it copied from it.
    #[tokio::test]
    async fn an_mp4_is_cut_to_the_range_even_between_far_keyframes() {
        let root = std::env::temp_dir().join(format!("media-cut-{}", domain::ids::random_hex(8)));
        let hls = root.join("hls");
        std::fs::create_dir_all(&hls).unwrap();
        let status = std::process::Command::new("ffmpeg")
            .current_dir(&hls)
            .args(["-nostdin", "-hide_banner", "-loglevel", "error"])
            .args(["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30"])
            .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100"])
            .args([
                "-t",
                "16",
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-g",
                "120",
            ])
            .args(["-keyint_min", "120", "-sc_threshold", "0", "-c:a", "aac"])
            .args(["-f", "hls", "-hls_time", "4", "-hls_list_size", "0"])
            .args(["-hls_segment_filename", "v0_%d.ts", "v0.m3u8"])
            .status()
            .expect("ffmpeg is not installed: apt-get install ffmpeg");
        assert!(status.success());
        let store = LocalStore::new(root.join("media"));
        let sid = "0b4d9f7e-3c1a-4e8b-9d2f-6a5c4b3e2d1f";
        for entry in std::fs::read_dir(&hls).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            store
                .keep_file(&hls, &name, &format!("replays/{sid}/{name}"))
                .unwrap();
        }
        store
            .put(
                &format!("replays/{sid}/index.m3u8"),
                b"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=500000\nv0.m3u8\n",
            )
            .unwrap();
        let media = kept_media(None, &store, sid).unwrap();
        assert!(
            (media.duration() - 16.0).abs() < 0.5,
            "{}",
            media.duration()
        );
        // (start, duration, the MP4's length): 1.5 s from a keyframe, re-encoded to the
        // range; 0.5 s after one, copied from it (0.5 s longer).
        for (clip_id, start, duration, length) in [("c1", 5.5, 6.0, 6.0), ("c2", 4.5, 6.0, 6.5)] {
            let placed = Placed {
                stream_id: sid,
                clip_id,
                start,
                duration,
            };
            let work = root.join("work");
            let cut = cut_mp4(Path::new("ffmpeg"), &store, &work, &media, &placed)
                .await
                .unwrap();
            let kept = root.join(format!("media/clips/{clip_id}/clip.mp4"));
            let video = video_seconds(&kept);
            assert!(
                (cut.seconds - length).abs() <= 0.1,
                "{clip_id}: {} s",
                cut.seconds
            );
            assert!((video - length).abs() <= 0.1, "{clip_id}: video {video} s");
            assert!(cut.thumbnail && cut.bytes > 10_000);
            assert!(store.exists(&format!("clips/{clip_id}/thumbnail.jpg")));
            assert!(!work.exists(), "the work directory is removed");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
