//! The renditions a live stream is served in, as plain functions: which ones a source
//! gets, what they cost, the ffmpeg command that writes them as HLS, and the master
//! playlist that lists them.
//!
//! One ffmpeg per accepted publish reads the stream back from nginx over loopback RTMP and
//! writes every rendition's media playlist and segments into the stream's HLS directory
//! (`hls/<key>/`): `v0.m3u8` and `v0_<n>.ts` for the source (copied, never re-encoded),
//! `v1`... for the scaled renditions. The agent writes the master playlist, `index.m3u8`
//! (the broadcast's `hlsUrl`), itself, with what it measured on the segments: ffmpeg's own
//! has neither `AVERAGE-BANDWIDTH` nor `FRAME-RATE`, nor `CODECS` for a copied stream.
//!
//! Keyframes follow the source (`-force_key_frames source`, no keyframe of x264's own), so
//! every rendition has its keyframes where the source has them and the HLS muxer cuts all
//! of them at the same instants: a player switches at any segment boundary without a
//! stall. Audio is copied into each rendition when it is AAC (not re-encoded per
//! rendition).

use domain::media::{Ladder, LadderReason, LatencyMode};

/// The scaled renditions a source larger than them gets: height and video bits per second.
pub const RUNGS: &[(u32, u32)] = &[(720, 2_500_000), (480, 1_000_000), (360, 600_000)];

/// The master playlist, at the broadcast's `hlsUrl`.
pub const MASTER: &str = "index.m3u8";

/// Segment seconds and playlist length of the `low` latency mode.
pub const LOW_SEGMENT_SECS: u64 = 1;
pub const LOW_LIST_SEGMENTS: u64 = 4;

/// Which H.264 encoder makes the renditions (`TRANSCODE_ENCODER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoder {
    /// x264, on the CPU.
    X264,
    /// NVIDIA's NVENC (`h264_nvenc`), on a GPU node.
    Nvenc,
}

impl Encoder {
    pub fn parse(text: &str) -> Option<Encoder> {
        match text {
            "libx264" | "x264" => Some(Encoder::X264),
            "h264_nvenc" | "nvenc" => Some(Encoder::Nvenc),
            _ => None,
        }
    }

    pub fn ffmpeg_name(self) -> &'static str {
        match self {
            Encoder::X264 => "libx264",
            Encoder::Nvenc => "h264_nvenc",
        }
    }
}

/// One rendition: `v<index>.m3u8` in the stream's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendition {
    /// `source`, or the height (`480p`).
    pub name: String,
    pub width: u32,
    pub height: u32,
    /// Video bits per second to encode at; `None` for the source (copied).
    pub video_bitrate: Option<u32>,
}

impl Rendition {
    pub fn transcoded(&self) -> bool {
        self.video_bitrate.is_some()
    }
}

/// What the source is, from nginx's statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Source {
    pub width: u32,
    pub height: u32,
    pub frame_rate: f64,
}

/// The renditions of a stream and why it has no scaled ones, if it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub mode: Ladder,
    pub reason: Option<LadderReason>,
    /// The source first.
    pub renditions: Vec<Rendition>,
}

/// The source, then every rung smaller than it (never upscaled); only the source when
/// `wanted` is passthrough or the source's size is unknown.
pub fn plan(wanted: Ladder, source: Option<Source>) -> Plan {
    let (width, height) = source.map_or((0, 0), |s| (s.width, s.height));
    let mut renditions = vec![Rendition {
        name: "source".into(),
        width,
        height,
        video_bitrate: None,
    }];
    if wanted == Ladder::Passthrough {
        return passthrough(renditions, LadderReason::Requested);
    }
    if width == 0 || height == 0 {
        return passthrough(renditions, LadderReason::Source);
    }
    for &(rung, bitrate) in RUNGS {
        if rung < height {
            renditions.push(Rendition {
                name: format!("{rung}p"),
                width: even(f64::from(width) * f64::from(rung) / f64::from(height)),
                height: rung,
                video_bitrate: Some(bitrate),
            });
        }
    }
    if renditions.len() == 1 {
        return passthrough(renditions, LadderReason::Source);
    }
    Plan {
        mode: Ladder::Adaptive,
        reason: None,
        renditions,
    }
}

/// `plan` without its scaled renditions, for `reason`.
pub fn passthrough(mut renditions: Vec<Rendition>, reason: LadderReason) -> Plan {
    renditions.truncate(1);
    Plan {
        mode: Ladder::Passthrough,
        reason: Some(reason),
        renditions,
    }
}

/// The nearest even number (H.264 in 4:2:0 needs even sizes), at least 2.
fn even(x: f64) -> u32 {
    ((x / 2.0).round() as u32 * 2).max(2)
}

/// What a rendition costs the CPU, in cores per million pixels a second: measured on
/// the reference machine (BENCHMARKS.md) and configurable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// Scaling and encoding one rendition.
    pub encode: f64,
    /// Decoding the source once (only when something is encoded).
    pub decode: f64,
}

/// The cores `plan` needs at `frame_rate`.
pub fn cores(plan: &Plan, source: Source, costs: Costs) -> f64 {
    let mpps = |w: u32, h: u32| f64::from(w) * f64::from(h) * source.frame_rate / 1e6;
    let encoded: f64 = plan
        .renditions
        .iter()
        .filter(|r| r.transcoded())
        .map(|r| mpps(r.width, r.height) * costs.encode)
        .sum();
    if encoded == 0.0 {
        return 0.0;
    }
    encoded + mpps(source.width, source.height) * costs.decode
}

/// How segments are cut and listed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segmenting {
    pub segment_secs: u64,
    pub list_segments: u64,
}

impl Segmenting {
    /// `standard` uses the agent's `fragment_secs` and `playlist_secs`; `low` one-second
    /// segments and a playlist of four.
    pub fn of(mode: LatencyMode, fragment_secs: u64, playlist_secs: u64) -> Segmenting {
        match mode {
            LatencyMode::Standard => Segmenting {
                segment_secs: fragment_secs,
                list_segments: (playlist_secs / fragment_secs.max(1)).max(3),
            },
            LatencyMode::Low => Segmenting {
                segment_secs: LOW_SEGMENT_SECS.min(fragment_secs),
                list_segments: LOW_LIST_SEGMENTS,
            },
        }
    }
}

/// What the ffmpeg command needs besides the plan.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// `rtmp://<loopback>/<app>/<key>`.
    pub source_url: &'a str,
    pub plan: &'a Plan,
    pub segmenting: Segmenting,
    pub has_audio: bool,
    /// Whether the source's audio is AAC (copied) or not (encoded to AAC).
    pub audio_is_aac: bool,
    pub encoder: Encoder,
    /// x264's preset (`veryfast`, `superfast`...).
    pub preset: &'a str,
}

/// The arguments of the ffmpeg that writes every rendition into its working directory.
pub fn ffmpeg_args(job: &Job) -> Vec<String> {
    let mut args = strings(&[
        "-nostdin",
        "-hide_banner",
        "-loglevel",
        "error",
        "-progress",
        "pipe:1",
        "-stats_period",
        "1",
        "-rw_timeout",
        "15000000",
        // Long enough to see both of nginx's codec headers, whichever comes first.
        "-analyzeduration",
        "3000000",
        "-rtmp_live",
        "live",
        "-i",
        job.source_url,
    ]);
    args.extend(scale_graph(job));
    let (maps, stream_map) = stream_maps(job);
    args.extend(maps);
    for (index, r) in job.plan.renditions.iter().enumerate() {
        args.extend(video_codec(job, index, r));
    }
    if job.has_audio {
        if job.audio_is_aac {
            args.extend(strings(&["-c:a", "copy"]));
        } else {
            args.extend(strings(&["-c:a", "aac", "-b:a", "128k"]));
        }
    }
    args.extend(hls_output(job, &stream_map));
    args
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The filter graph of the transcoded renditions (none when all are copies): the source is
/// decoded once and split to each scaler, whose output `[o<index>]` the maps name.
fn scale_graph(job: &Job) -> Vec<String> {
    let scaled: Vec<(usize, &Rendition)> = job
        .plan
        .renditions
        .iter()
        .enumerate()
        .filter(|(_, r)| r.transcoded())
        .collect();
    if scaled.is_empty() {
        return Vec::new();
    }
    let labels: String = (1..=scaled.len()).map(|i| format!("[s{i}]")).collect();
    let mut graph = format!("[0:v]split={}{labels}", scaled.len());
    for (n, (index, r)) in scaled.iter().enumerate() {
        graph.push_str(&format!(
            ";[s{}]scale={}:{},format=yuv420p[o{index}]",
            n + 1,
            r.width,
            r.height
        ));
    }
    vec!["-filter_complex".into(), graph]
}

/// Each rendition's `-map`s (its video, scaled or the source's, and the source's audio),
/// and the HLS muxer's `-var_stream_map` that groups them into one variant each.
fn stream_maps(job: &Job) -> (Vec<String>, String) {
    let mut args = Vec::new();
    let mut map = Vec::new();
    for (index, r) in job.plan.renditions.iter().enumerate() {
        if r.transcoded() {
            args.extend(["-map".into(), format!("[o{index}]")]);
        } else {
            args.extend(["-map".into(), "0:v:0".into()]);
        }
        if job.has_audio {
            args.extend(["-map".into(), "0:a:0".into()]);
            map.push(format!("v:{index},a:{index}"));
        } else {
            map.push(format!("v:{index}"));
        }
    }
    (args, map.join(" "))
}

/// Rendition `index`'s video codec: a copy of the source, or the encoder at the
/// rendition's bitrate with keyframes where the source has them.
fn video_codec(job: &Job, index: usize, r: &Rendition) -> Vec<String> {
    let v = format!(":v:{index}");
    let Some(bitrate) = r.video_bitrate else {
        return vec![format!("-c{v}"), "copy".into()];
    };
    let mut args = vec![format!("-c{v}"), job.encoder.ffmpeg_name().into()];
    match job.encoder {
        Encoder::X264 => args.extend([
            format!("-preset{v}"),
            job.preset.into(),
            // No lookahead and no B-frames: the encoder holds no frame back.
            format!("-tune{v}"),
            "zerolatency".into(),
            format!("-profile{v}"),
            "main".into(),
            // Keyframes where the source has them, and nowhere else.
            format!("-sc_threshold{v}"),
            "0".into(),
        ]),
        Encoder::Nvenc => args.extend([
            format!("-preset{v}"),
            "p4".into(),
            format!("-tune{v}"),
            "ll".into(),
            format!("-profile{v}"),
            "main".into(),
            format!("-forced-idr{v}"),
            "1".into(),
        ]),
    }
    args.extend([
        format!("-g{v}"),
        "1000".into(),
        format!("-force_key_frames{v}"),
        "source".into(),
        format!("-b{v}"),
        bitrate.to_string(),
        format!("-maxrate{v}"),
        bitrate.to_string(),
        format!("-bufsize{v}"),
        bitrate.to_string(),
    ]);
    args
}

/// The HLS muxer's settings: one playlist per variant, segments numbered from the clock.
fn hls_output(job: &Job, stream_map: &str) -> Vec<String> {
    let s = job.segmenting;
    strings(&[
        "-f",
        "hls",
        "-hls_time",
        &s.segment_secs.to_string(),
        "-hls_list_size",
        &s.list_segments.to_string(),
        "-hls_delete_threshold",
        "3",
        // The live playlists never end: an encoder that drops may return within the
        // reconnect window (players say "reconnecting"), and the broadcast's end is the
        // platform's to say; the replay's VOD playlists carry the ENDLIST.
        "-hls_flags",
        "independent_segments+program_date_time+delete_segments+temp_file+omit_endlist",
        // Numbered from the clock: a restarted ffmpeg continues upwards, never over the
        // numbers players hold.
        "-hls_start_number_source",
        "epoch",
        "-hls_segment_filename",
        "v%v_%d.ts",
        "-var_stream_map",
        stream_map,
        "v%v.m3u8",
    ])
}

/// The media playlist of rendition `index`.
pub fn media_playlist(index: usize) -> String {
    format!("v{index}.m3u8")
}

/// A segment a media playlist lists: its name and seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub name: String,
    pub seconds: f64,
}

/// The segments of a media playlist, oldest first (each `#EXTINF` with the URI after it).
pub fn listed(playlist: &str) -> Vec<Listed> {
    let mut out = Vec::new();
    let mut seconds = None;
    for line in playlist.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#EXTINF:") {
            seconds = rest.split(',').next().and_then(|d| d.trim().parse().ok());
        } else if !line.is_empty()
            && !line.starts_with('#')
            && let Some(seconds) = seconds.take()
        {
            out.push(Listed {
                name: line.to_string(),
                seconds,
            });
        }
    }
    out
}

/// A rendition's measured bits per second: (average, peak), over segments of known size.
pub fn bandwidth(segments: &[(f64, u64)]) -> Option<(u64, u64)> {
    let usable: Vec<&(f64, u64)> = segments.iter().filter(|(s, _)| *s > 0.1).collect();
    if usable.is_empty() {
        return None;
    }
    let seconds: f64 = usable.iter().map(|(s, _)| s).sum();
    let bytes: u64 = usable.iter().map(|(_, b)| b).sum();
    let peak = usable
        .iter()
        .map(|(s, b)| (*b as f64 * 8.0 / s) as u64)
        .max()
        .unwrap_or(0);
    Some(((bytes as f64 * 8.0 / seconds) as u64, peak))
}

/// The `avc1.PPCCLL` codec of the first H.264 sequence parameter set in `data` (a TS
/// segment), as `CODECS` names it.
pub fn avc1_codec(data: &[u8]) -> Option<String> {
    data.windows(7).find_map(|w| {
        let header = w[3];
        let is_sps = w[..3] == [0, 0, 1] && header & 0x80 == 0 && header & 0x1f == 7;
        let (profile, constraints, level) = (w[4], w[5], w[6]);
        let known = matches!(profile, 66 | 77 | 88 | 100 | 110 | 122 | 244);
        (is_sps && known && (9..=62).contains(&level))
            .then(|| format!("avc1.{profile:02x}{constraints:02x}{level:02x}"))
    })
}

/// The `CODECS` name of the source's audio, from nginx's name for it.
pub fn audio_codec(codec: Option<&str>, profile: Option<&str>) -> Option<&'static str> {
    match (codec?, profile.unwrap_or("LC")) {
        ("AAC", "HE" | "HE-AAC" | "HE-AACv1") => Some("mp4a.40.5"),
        ("AAC", "HE-AACv2") => Some("mp4a.40.29"),
        ("AAC", _) => Some("mp4a.40.2"),
        ("MP3", _) => Some("mp4a.40.34"),
        _ => None,
    }
}

/// One rendition's line in the master playlist.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub uri: String,
    pub width: u32,
    pub height: u32,
    pub frame_rate: f64,
    pub average: u64,
    pub peak: u64,
    pub codecs: Vec<String>,
}

/// The master playlist listing `variants` (the source first).
pub fn master(variants: &[Variant]) -> String {
    let mut out = String::from("#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-INDEPENDENT-SEGMENTS\n");
    for v in variants {
        out.push_str(&format!(
            "#EXT-X-STREAM-INF:BANDWIDTH={},AVERAGE-BANDWIDTH={},RESOLUTION={}x{},FRAME-RATE={:.3}",
            v.peak.max(v.average),
            v.average,
            v.width,
            v.height,
            v.frame_rate
        ));
        if !v.codecs.is_empty() {
            out.push_str(&format!(",CODECS=\"{}\"", v.codecs.join(",")));
        }
        out.push('\n');
        out.push_str(&v.uri);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(width: u32, height: u32) -> Option<Source> {
        Some(Source {
            width,
            height,
            frame_rate: 30.0,
        })
    }

    fn names(plan: &Plan) -> Vec<(String, u32, u32)> {
        plan.renditions
            .iter()
            .map(|r| (r.name.clone(), r.width, r.height))
            .collect()
    }

    #[test]
    fn the_ladder_never_upscales() {
        let p = plan(Ladder::Adaptive, source(1920, 1080));
        assert_eq!(
            names(&p),
            [
                ("source".into(), 1920, 1080),
                ("720p".into(), 1280, 720),
                ("480p".into(), 854, 480),
                ("360p".into(), 640, 360)
            ]
        );
        assert_eq!((p.mode, p.reason), (Ladder::Adaptive, None));
        let p = plan(Ladder::Adaptive, source(1280, 720));
        assert_eq!(
            names(&p),
            [
                ("source".into(), 1280, 720),
                ("480p".into(), 854, 480),
                ("360p".into(), 640, 360)
            ]
        );
        // Portrait and odd sizes keep even dimensions.
        let p = plan(Ladder::Adaptive, source(720, 1281));
        assert!(p.renditions.iter().all(|r| r.width % 2 == 0));
        // Nothing smaller than the source to make: the source alone, and why.
        let p = plan(Ladder::Adaptive, source(640, 360));
        assert_eq!(names(&p), [("source".into(), 640, 360)]);
        assert_eq!(
            (p.mode, p.reason),
            (Ladder::Passthrough, Some(LadderReason::Source))
        );
        let p = plan(Ladder::Passthrough, source(1920, 1080));
        assert_eq!(p.renditions.len(), 1);
        assert_eq!(p.reason, Some(LadderReason::Requested));
        assert_eq!(
            plan(Ladder::Adaptive, None).reason,
            Some(LadderReason::Source)
        );
    }

    #[test]
    fn the_cost_counts_encoded_pixels_and_one_decode() {
        let costs = Costs {
            encode: 0.1,
            decode: 0.01,
        };
        let s = source(1280, 720).unwrap();
        let p = plan(Ladder::Adaptive, Some(s));
        let expected =
            (854.0 * 480.0 + 640.0 * 360.0) * 30.0 / 1e6 * 0.1 + 1280.0 * 720.0 * 30.0 / 1e6 * 0.01;
        assert!((cores(&p, s, costs) - expected).abs() < 1e-9);
        assert_eq!(cores(&plan(Ladder::Passthrough, Some(s)), s, costs), 0.0);
    }

    #[test]
    fn latency_modes_cut_segments() {
        assert_eq!(
            Segmenting::of(LatencyMode::Standard, 2, 10),
            Segmenting {
                segment_secs: 2,
                list_segments: 5
            }
        );
        assert_eq!(
            Segmenting::of(LatencyMode::Low, 2, 10),
            Segmenting {
                segment_secs: 1,
                list_segments: 4
            }
        );
    }

    #[test]
    fn one_ffmpeg_writes_every_rendition_with_source_keyframes() {
        let p = plan(Ladder::Adaptive, source(1280, 720));
        let args = ffmpeg_args(&Job {
            source_url: "rtmp://127.0.0.1:1935/live/k",
            plan: &p,
            segmenting: Segmenting::of(LatencyMode::Standard, 2, 10),
            has_audio: true,
            audio_is_aac: true,
            encoder: Encoder::X264,
            preset: "veryfast",
        });
        let line = args.join(" ");
        assert!(
            line.contains(
                "-filter_complex [0:v]split=2[s1][s2];[s1]scale=854:480,format=yuv420p[o1];\
                 [s2]scale=640:360,format=yuv420p[o2]"
            ),
            "{line}"
        );
        assert!(line.contains("-map 0:v:0 -map 0:a:0 -map [o1] -map 0:a:0 -map [o2] -map 0:a:0"));
        assert!(line.contains("-c:v:0 copy"));
        for v in [1, 2] {
            for option in [
                format!("-c:v:{v} libx264"),
                format!("-preset:v:{v} veryfast"),
                format!("-sc_threshold:v:{v} 0"),
                format!("-force_key_frames:v:{v} source"),
            ] {
                assert!(line.contains(&option), "{option} in {line}");
            }
        }
        assert!(line.contains("-b:v:1 1000000 -maxrate:v:1 1000000"));
        assert!(line.contains("-c:a copy"));
        assert!(!line.contains("-c:a aac"));
        assert!(line.contains("-var_stream_map v:0,a:0 v:1,a:1 v:2,a:2 v%v.m3u8"));
        assert!(line.contains("-hls_time 2 -hls_list_size 5"));
        assert!(line.contains("program_date_time"));
        // Passthrough: one copied rendition, no filter, no encoder.
        let p = plan(Ladder::Passthrough, source(1280, 720));
        let args = ffmpeg_args(&Job {
            source_url: "rtmp://127.0.0.1:1935/live/k",
            plan: &p,
            segmenting: Segmenting::of(LatencyMode::Low, 2, 10),
            has_audio: false,
            audio_is_aac: false,
            encoder: Encoder::X264,
            preset: "veryfast",
        });
        let line = args.join(" ");
        assert!(!line.contains("filter_complex") && !line.contains("libx264"));
        assert!(line.contains("-var_stream_map v:0 v%v.m3u8"), "{line}");
        assert!(line.contains("-hls_time 1 -hls_list_size 4"));
    }

    #[test]
    fn the_master_playlist_carries_every_attribute() {
        let text = master(&[
            Variant {
                uri: "v0.m3u8".into(),
                width: 1280,
                height: 720,
                frame_rate: 30.0,
                average: 2_600_000,
                peak: 2_900_000,
                codecs: vec!["avc1.64001f".into(), "mp4a.40.2".into()],
            },
            Variant {
                uri: "v1.m3u8".into(),
                width: 640,
                height: 360,
                frame_rate: 29.97,
                average: 700_000,
                peak: 650_000,
                codecs: vec![],
            },
        ]);
        assert_eq!(
            text,
            "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-INDEPENDENT-SEGMENTS\n\
             #EXT-X-STREAM-INF:BANDWIDTH=2900000,AVERAGE-BANDWIDTH=2600000,RESOLUTION=1280x720,\
             FRAME-RATE=30.000,CODECS=\"avc1.64001f,mp4a.40.2\"\nv0.m3u8\n\
             #EXT-X-STREAM-INF:BANDWIDTH=700000,AVERAGE-BANDWIDTH=700000,RESOLUTION=640x360,\
             FRAME-RATE=29.970\nv1.m3u8\n"
        );
    }

    #[test]
    fn media_playlists_and_bandwidth() {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.033333,\n\
                    #EXT-X-PROGRAM-DATE-TIME:2026-11-27T15:05:05.580+0000\nv1_17.ts\n\
                    #EXTINF:2.000000,\nv1_18.ts\n";
        let l = listed(text);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].name, "v1_17.ts");
        assert!((l[0].seconds - 2.033333).abs() < 1e-9);
        assert_eq!(
            bandwidth(&[(2.0, 250_000), (2.0, 500_000)]),
            Some((1_500_000, 2_000_000))
        );
        assert_eq!(bandwidth(&[]), None);
    }

    #[test]
    fn codecs_from_the_stream() {
        // A PES payload with an SPS of High profile, level 3.1.
        let data = [
            0x47, 0, 0, 0, 1, 0x09, 0xf0, 0, 0, 0, 1, 0x67, 0x64, 0x00, 0x1f, 0xac,
        ];
        assert_eq!(avc1_codec(&data).as_deref(), Some("avc1.64001f"));
        assert_eq!(avc1_codec(&[0, 0, 1, 0x67, 0x01, 0, 0x1f]), None);
        assert_eq!(audio_codec(Some("AAC"), None), Some("mp4a.40.2"));
        assert_eq!(audio_codec(Some("AAC"), Some("HE")), Some("mp4a.40.5"));
        assert_eq!(audio_codec(Some("Speex"), None), None);
        assert_eq!(audio_codec(None, None), None);
    }
}
