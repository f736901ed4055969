//! The media plane in the tests: edgehost's media server on free loopback ports (with
//! one-second segments and two-second updates, so that tests wait less), a test pattern
//! encoded once per machine, publishers (`ffmpeg` pushing it over RTMP in real time) and
//! `ffprobe`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The media server as the media suite and benchmarks run it.
pub fn server_options() -> edgehost::MediaServer {
    let mut options = edgehost::MediaServer::ephemeral();
    options.config.fragment_secs = 1;
    options.config.playlist_secs = 6;
    options.config.update_secs = 2;
    options.config.thumbnail_secs = 2;
    options
}

/// A tool of Debian's `ffmpeg` package, or a clear failure.
pub fn tool(name: &str) -> PathBuf {
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("{name} is required by the media tests (apt-get install -y ffmpeg; scripts/test does)");
}

#[rustfmt::skip]
/// How the test pattern is encoded: 640x360 at 30 fps, H.264 with a keyframe every
/// second, AAC stereo; ten seconds, looped by publishers.
const CLIP_ARGS: &[&str] = &[
    "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30",
    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100",
    "-t", "10", "-ac", "2",
    "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-pix_fmt", "yuv420p",
    "-g", "30", "-keyint_min", "30", "-sc_threshold", "0", "-b:v", "800k",
    "-c:a", "aac", "-b:a", "96k",
];

#[rustfmt::skip]
/// A 1280x720 test pattern (30 fps, a keyframe a second, AAC), four seconds, looped by
/// publishers: the source of the adaptive ladder's tests.
const CLIP_720P_ARGS: &[&str] = &[
    "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30",
    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100",
    "-t", "4", "-ac", "2",
    "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-pix_fmt", "yuv420p",
    "-g", "30", "-keyint_min", "30", "-sc_threshold", "0", "-b:v", "1500k",
    "-c:a", "aac", "-b:a", "96k",
];

/// The 720p test pattern, encoded on first use.
pub fn test_clip_720p() -> PathBuf {
    clip_of(CLIP_720P_ARGS, "clip-720p")
}

/// The test pattern as an FLV file, encoded on first use and kept under `target/` (its
/// name carries a digest of the encoding, so a change re-encodes it).
pub fn test_clip() -> PathBuf {
    clip_of(CLIP_ARGS, "clip")
}

/// A clip encoded with `args` (ffmpeg input and codec options), kept under `target/`.
pub fn clip_of(args: &[&str], name: &str) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let digest = crate::sign("clip", &args.join(" "));
    let dir = crate::workspace_root().join("target/media-fixtures");
    let path = dir.join(format!("{name}-{}.flv", &digest[..12]));
    if path.is_file() {
        return path;
    }
    std::fs::create_dir_all(&dir).expect("create target/media-fixtures");
    let partial = dir.join(format!("{name}.{}.partial.flv", std::process::id()));
    let status = std::process::Command::new(tool("ffmpeg"))
        .args(["-nostdin", "-hide_banner", "-loglevel", "error", "-y"])
        .args(args)
        .args(["-f", "flv"])
        .arg(&partial)
        .status()
        .expect("ffmpeg runs");
    assert!(status.success(), "encoding the test clip failed");
    std::fs::rename(&partial, &path).expect("keep the test clip");
    path
}

/// An encoder publishing a clip in real time, in a loop, until stopped or refused.
pub struct Publisher {
    child: tokio::process::Child,
}

impl Publisher {
    /// Publishes the test pattern to `rtmp_url` (`rtmpUrl` of a broadcast).
    pub fn start(rtmp_url: &str) -> Publisher {
        Self::start_clip(&test_clip(), rtmp_url, 1.0)
    }

    /// Publishes `clip` at `rate` times real time (below 1, an encoder that cannot keep
    /// up: its viewers starve).
    pub fn start_clip(clip: &Path, rtmp_url: &str, rate: f64) -> Publisher {
        let child = tokio::process::Command::new(tool("ffmpeg"))
            .args(["-nostdin", "-hide_banner", "-loglevel", "error"])
            .args(["-readrate", &rate.to_string()])
            .args(["-stream_loop", "-1", "-i"])
            .arg(clip)
            .args(["-c", "copy", "-f", "flv", rtmp_url])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("ffmpeg starts");
        Publisher { child }
    }

    /// Whether the encoder was disconnected (it exits) within `limit`.
    pub async fn exits_within(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.child.wait()).await.is_ok()
    }

    /// Stops publishing (the encoder goes away as OBS's "Stop streaming" does).
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SIGINT: ffmpeg closes the RTMP session cleanly.
            let _ = std::process::Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// Polls `check` every 200 ms until it answers `Some`, for at most `limit`; panics naming
/// `what` when it never does.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The codecs of a media file's streams, as `ffprobe` reads them: `(codec_type,
/// codec_name)`, e.g. `("video", "h264")`.
pub fn probe_codecs(file: &Path) -> Vec<(String, String)> {
    let output = std::process::Command::new(tool("ffprobe"))
        .args([
            "-v",
            "error",
            "-show_entries",
            "stream=codec_type,codec_name",
        ])
        .args(["-of", "csv=p=0"])
        .arg(file)
        .output()
        .expect("ffprobe runs");
    assert!(
        output.status.success(),
        "ffprobe cannot read {}: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (name, kind) = line.trim().split_once(',')?;
            Some((kind.to_string(), name.to_string()))
        })
        .collect()
}

/// The segment URIs of an HLS media playlist, as written (relative to it).
pub fn playlist_segments(playlist: &str) -> Vec<String> {
    playlist
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// One `#EXT-X-STREAM-INF` of a master playlist: its attributes and URI.
#[derive(Debug, Clone)]
pub struct Variant {
    pub attributes: std::collections::HashMap<String, String>,
    pub uri: String,
}

impl Variant {
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name).map(String::as_str)
    }

    /// `RESOLUTION` as (width, height).
    pub fn resolution(&self) -> Option<(u32, u32)> {
        let (w, h) = self.attribute("RESOLUTION")?.split_once('x')?;
        Some((w.parse().ok()?, h.parse().ok()?))
    }

    pub fn bandwidth(&self) -> Option<u64> {
        self.attribute("BANDWIDTH")?.parse().ok()
    }
}

/// The variants of a master playlist, in order (none for a media playlist).
pub fn variants(master: &str) -> Vec<Variant> {
    let mut out = Vec::new();
    let mut lines = master.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(list) = line.strip_prefix("#EXT-X-STREAM-INF:") else {
            continue;
        };
        let mut attributes = std::collections::HashMap::new();
        // NAME=value pairs, a quoted value holding commas.
        let mut rest = list;
        while !rest.is_empty() {
            let Some((name, after)) = rest.split_once('=') else {
                break;
            };
            let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
                let end = quoted.find('"').unwrap_or(quoted.len());
                (&quoted[..end], quoted.get(end + 1..).unwrap_or(""))
            } else {
                after.split_once(',').map_or((after, ""), |(v, a)| (v, a))
            };
            attributes.insert(name.trim().to_string(), value.to_string());
            rest = after.trim_start_matches(',');
        }
        if let Some(uri) = lines
            .by_ref()
            .find(|l| !l.is_empty() && !l.starts_with('#'))
        {
            out.push(Variant {
                attributes,
                uri: uri.to_string(),
            });
        }
    }
    out
}

/// The `#EXT-X-MEDIA-SEQUENCE` of a media playlist.
pub fn media_sequence(playlist: &str) -> Option<u64> {
    playlist
        .lines()
        .find_map(|l| l.trim().strip_prefix("#EXT-X-MEDIA-SEQUENCE:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The `#EXTINF` durations of a media playlist, with the URI each one introduces.
pub fn durations(playlist: &str) -> Vec<(f64, String)> {
    let mut out = Vec::new();
    let mut duration = None;
    for line in playlist.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#EXTINF:") {
            duration = rest.split(',').next().and_then(|d| d.parse().ok());
        } else if !line.is_empty()
            && !line.starts_with('#')
            && let Some(d) = duration.take()
        {
            out.push((d, line.to_string()));
        }
    }
    out
}

/// The width and height of a media file's first video stream, as `ffprobe` decodes it.
pub fn probe_size(file: &Path) -> (u32, u32) {
    let output = std::process::Command::new(tool("ffprobe"))
        .args(["-v", "error", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=width,height", "-of", "csv=p=0"])
        .arg(file)
        .output()
        .expect("ffprobe runs");
    let text = String::from_utf8_lossy(&output.stdout);
    // A transport stream lists its streams under its program too: the first line.
    let (w, h) = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .trim_end_matches(',')
        .split_once(',')
        .unwrap_or_else(|| panic!("ffprobe cannot size {}: {text}", file.display()));
    (w.parse().unwrap(), h.parse().unwrap())
}

/// `uri` resolved against the playlist address `base` (which may carry a query).
pub fn resolve(base: &str, uri: &str) -> String {
    if uri.contains("://") {
        return uri.to_string();
    }
    let without_query = base.split('?').next().unwrap_or(base);
    let dir = &without_query[..without_query.rfind('/').map_or(0, |i| i + 1)];
    format!("{dir}{uri}")
}
