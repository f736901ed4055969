//! Media benchmark: the real media server (nginx-rtmp through media-agent, in edgehost, with
//! production segments of 2 s) and real `ffmpeg` encoders on loopback.
//!
//! - publish to first playable segment: from the encoder's start until the playlist lists
//!   a segment that answers 200 (target: under 2 segment durations plus 1 s);
//! - transcoding cost: the CPU of each rendition (720p30, 480p30, 360p30 with x264
//!   `veryfast` and `superfast`) from a 720p and a 1080p source, of decoding the source,
//!   and of the whole ladder as the agent runs it (its own ffmpeg command), in cores at
//!   real time;
//! - `INGESTS` (20) concurrent 2 Mbit/s ingests as passthrough (copy, no transcoding) for
//!   `SECONDS`: the video frames each listed HLS segment holds against those its duration
//!   says it should, the media rate the media server measured, and the CPU;
//! - `LADDERS` ("2 4 6") concurrent 720p sources with the adaptive ladder, the budget out
//!   of the way: whether every rendition keeps real time;
//! - HLS to `VIEWERS` (1,000) concurrent keep-alive viewers: playlist and segment requests
//!   per second for an open stream, a signed one, and the same files served by a plain
//!   static nginx location, in one run.
//!
//! Run: `cargo bench -p platform-tests --bench media --profile host` (needs `wrk`:
//! `apt-get install -y wrk`). `wrk`, the encoders and the media server share the machine:
//! compare the rows of one run.

use platform_tests::media::{Publisher, clip_of, playlist_segments, tool, variants, wait_for};
use platform_tests::{Exchange, Method, Platform, User, env_or};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

#[rustfmt::skip]
/// 1280x720 at 30 fps, H.264 at 2 Mbit/s with a keyframe every 2 s, AAC: one ingest.
const INGEST_CLIP: &[&str] = &[
    "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30",
    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
    "-t", "20", "-ac", "2",
    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
    "-g", "60", "-keyint_min", "60", "-sc_threshold", "0",
    "-b:v", "2000k", "-minrate", "2000k", "-maxrate", "2000k", "-bufsize", "2000k",
    "-c:a", "aac", "-b:a", "128k",
];

#[rustfmt::skip]
/// 1920x1080 at 30 fps, H.264 at 4.5 Mbit/s with a keyframe every 2 s, AAC: a 1080p source.
const SOURCE_1080P: &[&str] = &[
    "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30",
    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
    "-t", "20", "-ac", "2",
    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
    "-g", "60", "-keyint_min", "60", "-sc_threshold", "0",
    "-b:v", "4500k", "-maxrate", "4500k", "-bufsize", "4500k",
    "-c:a", "aac", "-b:a", "128k",
];

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    // One part alone: ONLY=transcoding, ONLY=ladders (LADDERS="2 4 6 8") or ONLY=serving.
    match std::env::var("ONLY").as_deref() {
        Ok("transcoding") => return transcoding(),
        Ok("ladders") => {
            let clip = clip_of(INGEST_CLIP, "ingest-720p-2m");
            for n in ladder_counts() {
                ladders(&clip, n, env_or("SECONDS", 30)).await;
            }
            return;
        }
        _ => {}
    }
    let only_serving = std::env::var("ONLY").as_deref() == Ok("serving");
    let ingests: usize = env_or("INGESTS", 20);
    let seconds: u64 = env_or("SECONDS", 30);
    let viewers: usize = env_or("VIEWERS", 1000);
    let trials: usize = env_or("TRIALS", 5);
    let mut options = edgehost::MediaServer::ephemeral();
    // Every segment of the ingest run stays listed, so that its frames can be counted.
    options.config.playlist_secs = seconds + 30;
    // Every encoder publishes from loopback: one address, as many connections as ingests.
    options.config.rtmp_per_address = options.config.rtmp_per_address.max(ingests);
    let p = Platform::start_media_with(options, &[]).await;
    let tenant = p.register_client("Bench").await;
    let user = p.signup(&tenant, "caster").await;
    println!(
        "media server: nginx-rtmp through media-agent, 2 s segments; {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let clip = clip_of(INGEST_CLIP, "ingest-720p-2m");

    if only_serving {
        return serving(&p, &user, &clip, viewers).await;
    }
    transcoding();
    first_segment_latency(&p, &user, &clip, trials).await;
    concurrent_ingests(&p, &user, &clip, ingests, seconds).await;
    serving(&p, &user, &clip, viewers).await;
    drop(p);
    for n in ladder_counts() {
        ladders(&clip, n, seconds.min(30)).await;
    }
}

/// How many concurrent ladders to run, in turn (`LADDERS`, default "2 4 6").
fn ladder_counts() -> Vec<usize> {
    std::env::var("LADDERS")
        .unwrap_or_else(|_| "2 4 6".into())
        .split_whitespace()
        .map(|n| n.parse().expect("LADDERS is a list of counts"))
        .collect()
}

/// ffmpeg's own account of a run (`-benchmark`): user plus system CPU seconds.
fn ffmpeg_cpu(args: &[String], dir: &Path) -> f64 {
    let out = std::process::Command::new(tool("ffmpeg"))
        // `bench: utime=...` is printed at the info level.
        .args([
            "-nostdin",
            "-hide_banner",
            "-nostats",
            "-loglevel",
            "info",
            "-benchmark",
            "-y",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("ffmpeg runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |name: &str| -> f64 {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.trim_end_matches('s').parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    field("utime=") + field("stime=")
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Cores at real time of each rendition, the decode and the whole ladder, from a 720p and
/// a 1080p source (20 s each, encoded as fast as the machine goes: CPU seconds over media
/// seconds).
fn transcoding() {
    use media_agent::ladder::{self, Encoder, Job, Segmenting, Source};
    let media_secs = 20.0;
    let work = tempfile::tempdir().unwrap();
    println!(
        "transcoding cost, cores at real time (CPU seconds per media second; {media_secs} s sources)"
    );
    for (name, clip, width, height) in [
        (
            "720p30 source",
            clip_of(INGEST_CLIP, "ingest-720p-2m"),
            1280u32,
            720u32,
        ),
        (
            "1080p30 source",
            clip_of(SOURCE_1080P, "source-1080p"),
            1920,
            1080,
        ),
    ] {
        let input = clip.to_str().unwrap().to_string();
        let decode = ffmpeg_cpu(
            &strings(&["-i", &input, "-map", "0:v", "-f", "null", "-"]),
            work.path(),
        ) / media_secs;
        println!("{name}: decode {decode:.3}");
        let source = Source {
            width,
            height,
            frame_rate: 30.0,
        };
        for preset in ["veryfast", "superfast"] {
            let mut row = Vec::new();
            for &(rung, bitrate) in ladder::RUNGS.iter().filter(|(h, _)| *h <= height) {
                let w = (f64::from(width) * f64::from(rung) / f64::from(height) / 2.0).round()
                    as u32
                    * 2;
                let total = ffmpeg_cpu(
                    &strings(&[
                        "-i",
                        &input,
                        "-map",
                        "0:v",
                        "-vf",
                        &format!("scale={w}:{rung},format=yuv420p"),
                        "-c:v",
                        "libx264",
                        "-preset",
                        preset,
                        "-tune",
                        "zerolatency",
                        "-profile:v",
                        "main",
                        "-b:v",
                        &bitrate.to_string(),
                        "-maxrate",
                        &bitrate.to_string(),
                        "-bufsize",
                        &bitrate.to_string(),
                        "-f",
                        "null",
                        "-",
                    ]),
                    work.path(),
                ) / media_secs;
                let cost = total - decode;
                let mpps = f64::from(w) * f64::from(rung) * 30.0 / 1e6;
                row.push(format!("{rung}p30 {cost:.3} ({:.4}/Mpx/s)", cost / mpps));
            }
            // The whole ladder, as the agent runs it (its command, from a file).
            let plan = ladder::plan(domain::media::Ladder::Adaptive, Some(source));
            let job = Job {
                source_url: &input,
                plan: &plan,
                segmenting: Segmenting::of(domain::media::LatencyMode::Standard, 2, 10),
                has_audio: true,
                audio_is_aac: true,
                encoder: Encoder::X264,
                preset,
            };
            let mut args = ladder::ffmpeg_args(&job);
            // Options of a live RTMP input, which a file does not take.
            for option in ["-rtmp_live", "-rw_timeout", "-progress", "-stats_period"] {
                if let Some(at) = args.iter().position(|a| a == option) {
                    args.drain(at..at + 2);
                }
            }
            args.retain(|a| !["-nostdin", "-hide_banner"].contains(&a.as_str()));
            let at = args.iter().position(|a| a == "-loglevel").unwrap();
            args.drain(at..at + 2);
            let whole = ffmpeg_cpu(&args, work.path()) / media_secs;
            let renditions: Vec<&str> = plan.renditions.iter().map(|r| r.name.as_str()).collect();
            println!(
                "  {preset}: {}; the ladder ({}) {whole:.3}",
                row.join(", "),
                renditions.join(" + ")
            );
        }
    }
}

/// `n` concurrent 720p sources with the adaptive ladder for `seconds`, the CPU budget out
/// of the way: every rendition's media rate, as the owner's view reports it.
async fn ladders(clip: &Path, n: usize, seconds: u64) {
    let mut options = edgehost::MediaServer::ephemeral();
    options.config.transcode_cores = 1000.0;
    let p = Platform::start_media_with(options, &[]).await;
    let tenant = p.register_client("Bench").await;
    let user = p.signup(&tenant, "caster").await;
    let mut streams = Vec::new();
    for _ in 0..n {
        streams.push(broadcast(&p, &user, "public").await);
    }
    let publishers: Vec<Publisher> = streams
        .iter()
        .map(|b| Publisher::start_clip(clip, &text(b, "rtmpUrl"), 1.0))
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let mut rates = Vec::new();
    let mut starving = 0;
    for b in &streams {
        let id = text(b, "id");
        let view = wait_for("the ladder", Duration::from_secs(20), || async {
            let (_, view) = p
                .as_user(&user, Method::GET, &format!("/api/broadcasts/{id}"))
                .answer()
                .await;
            view["ingest"]["ladder"]["renditions"][1]["mediaRate"]
                .is_number()
                .then_some(view)
        })
        .await;
        for r in view["ingest"]["ladder"]["renditions"].as_array().unwrap() {
            if r["transcoded"] == true {
                rates.push(r["mediaRate"].as_f64().unwrap());
                starving += usize::from(r["health"] == "starving");
            }
        }
    }
    for publisher in publishers {
        publisher.stop().await;
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "{n} concurrent 720p sources with the ladder (480p + 360p) for {seconds} s: rendition media rate \
         min {:.3} median {:.3}; {starving} of {} renditions starving",
        rates[0],
        rates[rates.len() / 2],
        rates.len()
    );
}

async fn broadcast(p: &Platform, user: &User, visibility: &str) -> Value {
    broadcast_with(p, user, json!({"title": "Bench", "visibility": visibility})).await
}

async fn broadcast_with(p: &Platform, user: &User, body: Value) -> Value {
    let (status, b) = p
        .as_user(user, Method::POST, "/api/broadcasts")
        .send_json(&body)
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

fn text(v: &Value, field: &str) -> String {
    v[field].as_str().expect(field).to_string()
}

/// The source's media playlist of the master playlist at `url`, if it answers.
async fn media_playlist(http: &reqwest::Client, url: &str) -> Option<String> {
    let answer = http.get(url).send().await.ok()?;
    if answer.status() != 200 {
        return None;
    }
    let master = answer.text().await.ok()?;
    let first = variants(&master).into_iter().next()?;
    Some(platform_tests::media::resolve(url, &first.uri))
}

/// The newest segment of the HLS at `url` (a master playlist) that answers 200, if any.
async fn playable(http: &reqwest::Client, url: &str) -> Option<String> {
    let url = &media_playlist(http, url).await?;
    let answer = http.get(url).send().await.ok()?;
    if answer.status() != 200 {
        return None;
    }
    let playlist = answer.text().await.ok()?;
    let segment = playlist_segments(&playlist).pop()?;
    let segment_url = platform_tests::media::resolve(url, &segment);
    let status = http.get(&segment_url).send().await.ok()?.status();
    (status == 200).then_some(segment_url)
}

async fn first_segment_latency(p: &Platform, user: &User, clip: &Path, trials: usize) {
    let http = reqwest::Client::new();
    let mut times = Vec::new();
    for _ in 0..trials {
        let b = broadcast(p, user, "public").await;
        let hls = text(&b, "hlsUrl");
        let started = Instant::now();
        let publisher = Publisher::start_clip(clip, &text(&b, "rtmpUrl"), 1.0);
        loop {
            if playable(&http, &hls).await.is_some() {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no segment");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        times.push(started.elapsed());
        publisher.stop().await;
    }
    times.sort();
    let ms = |d: &Duration| d.as_millis();
    println!(
        "publish to first playable segment ({} trials): min {} ms, median {} ms, max {} ms (target < 5000 ms: 2 segments + 1 s)",
        times.len(),
        ms(&times[0]),
        ms(&times[times.len() / 2]),
        ms(times.last().unwrap())
    );
}

/// CPU seconds (user + system) of every process in nginx's process group.
fn group_cpu_seconds(pgid: u32) -> f64 {
    let ticks = 100.0; // USER_HZ on Linux
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state ppid pgrp ... utime stime.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) {
            let utime: u64 = fields[11].parse().unwrap_or(0);
            let stime: u64 = fields[12].parse().unwrap_or(0);
            total += utime + stime;
        }
    }
    total as f64 / ticks
}

/// CPU seconds (user + system) of the agent's HLS writers (the ffmpeg processes whose
/// command line maps variant streams).
fn hls_writers_cpu_seconds() -> f64 {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains("-var_stream_map") {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        total += fields
            .get(11)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
            + fields
                .get(12)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
    }
    total as f64 / 100.0
}

/// This process's CPU seconds (edgehost and the agent run in it).
fn own_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

/// The listed segments of a stream's HLS: each one's seconds (its `#EXTINF`) and video
/// frames.
fn listed_segments(dir: &Path) -> Vec<(f64, u64)> {
    let playlist = std::fs::read_to_string(dir.join("v0.m3u8")).unwrap_or_default();
    let durations = playlist
        .lines()
        .filter_map(|l| l.strip_prefix("#EXTINF:"))
        .filter_map(|l| l.trim_end_matches(',').parse::<f64>().ok());
    durations
        .zip(playlist_segments(&playlist))
        .map(|(seconds, segment)| {
            let out = std::process::Command::new(tool("ffprobe"))
                .args(["-v", "error", "-select_streams", "v:0", "-count_packets"])
                .args(["-show_entries", "stream=nb_read_packets", "-of", "csv=p=0"])
                .arg(dir.join(&segment))
                .output()
                .expect("ffprobe");
            // ffprobe prints the count once per section it lists: the first is enough.
            let frames = String::from_utf8_lossy(&out.stdout)
                .lines()
                .find_map(|l| l.trim().parse::<u64>().ok())
                .unwrap_or(0);
            (seconds, frames)
        })
        .collect()
}

async fn concurrent_ingests(p: &Platform, user: &User, clip: &Path, n: usize, seconds: u64) {
    let media = p.media();
    let pgid = media.nginx_pid().expect("nginx runs");
    let mut streams = Vec::new();
    for _ in 0..n {
        let body = json!({"title": "Bench", "visibility": "public", "ladder": "passthrough"});
        streams.push(broadcast_with(p, user, body).await);
    }
    let nginx_before = group_cpu_seconds(pgid);
    let own_before = own_cpu_seconds();
    // The writers start with their streams: their CPU is counted from their start.
    let writers_before = 0.0;
    let started = Instant::now();
    let publishers: Vec<Publisher> = streams
        .iter()
        .map(|b| Publisher::start_clip(clip, &text(b, "rtmpUrl"), 1.0))
        .collect();
    // Midway: every ingest live, and its media rate as the media server measured it.
    tokio::time::sleep(Duration::from_secs(seconds / 2)).await;
    let mut rates = Vec::new();
    let mut bitrates = Vec::new();
    for b in &streams {
        let id = text(b, "id");
        let view = wait_for("a health sample", Duration::from_secs(20), || async {
            let (_, view) = p
                .as_user(user, Method::GET, &format!("/api/broadcasts/{id}"))
                .answer()
                .await;
            view["ingest"]["stats"]["mediaRate"]
                .is_number()
                .then_some(view)
        })
        .await;
        assert_eq!(view["ingest"]["state"], "live");
        rates.push(view["ingest"]["stats"]["mediaRate"].as_f64().unwrap());
        bitrates.push(view["ingest"]["stats"]["bitrate"].as_i64().unwrap_or(0));
    }
    let left = Duration::from_secs(seconds).saturating_sub(started.elapsed());
    tokio::time::sleep(left).await;
    // Still publishing: each listed segment holds the frames its duration says it should
    // (30 fps); a frame the media server dropped is missing here.
    let wall = started.elapsed().as_secs_f64();
    let nginx_cpu = group_cpu_seconds(pgid) - nginx_before;
    let own_cpu = own_cpu_seconds() - own_before;
    let writers_cpu = hls_writers_cpu_seconds() - writers_before;
    let (mut expected, mut held, mut media_seconds) = (0u64, 0u64, 0f64);
    let mut short_segments = 0;
    for b in &streams {
        let dir = media.work_dir().join("hls").join(text(b, "streamId"));
        for (secs, frames) in listed_segments(&dir) {
            let should = (secs * 30.0).round() as u64;
            expected += should;
            held += frames;
            media_seconds += secs;
            short_segments += usize::from(frames < should);
        }
    }
    for publisher in publishers {
        publisher.stop().await;
    }
    rates.sort_by(f64::total_cmp);
    bitrates.sort();
    println!(
        "{n} concurrent ingests at 2 Mbit/s for {seconds} s (copy): media rate min {:.3} median {:.3}; \
         bitrate median {:.2} Mbit/s",
        rates[0],
        rates[rates.len() / 2],
        bitrates[bitrates.len() / 2] as f64 / 1e6
    );
    println!(
        "  HLS written: {media_seconds:.0} s of media, {held} video frames of the {expected} they should hold at 30 fps \
         ({} missing; {short_segments} segments short)",
        expected.saturating_sub(held)
    );
    println!(
        "  CPU over {wall:.1} s: nginx {:.1}% of a core; the {n} HLS writers (ffmpeg, copy) {:.1}%; \
         this process (edgehost, the agent, the bench) {:.1}%",
        nginx_cpu / wall * 100.0,
        writers_cpu / wall * 100.0,
        own_cpu / wall * 100.0
    );
}

/// One `wrk` run (an external load generator, so that the figures are nginx's and not
/// this process's): `connections` keep-alive viewers for 5 s on 2 threads. Answers the
/// requests per second and the latency percentiles.
fn wrk(url: &str, connections: usize) -> (f64, String) {
    let out = std::process::Command::new(tool("wrk"))
        .args(["-t2", &format!("-c{connections}"), "-d5s", "--latency", url])
        .output()
        .expect("wrk runs (apt-get install -y wrk)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rate = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("wrk said: {text}"));
    assert!(!text.contains("Non-2xx"), "{url}: {text}");
    let percentile = |p: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(p).map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    (
        rate,
        format!("p50 {:>8}  p99 {:>8}", percentile("50%"), percentile("99%")),
    )
}

/// A plain static nginx on a free loopback port serving `root` at `/hls/` (with the media
/// server's open-file cache): the baseline.
fn static_nginx(root: &Path, work: &Path) -> (std::process::Child, std::net::SocketAddr) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = work.join("static.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off; master_process on; worker_processes 1; pid {w}/static.pid; error_log stderr warn;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ access_log off; sendfile on; tcp_nopush on; keepalive_timeout 65s;\n\
               open_file_cache max=10000 inactive=30s; open_file_cache_valid 1s; open_file_cache_errors on;\n\
               types {{ application/vnd.apple.mpegurl m3u8; video/mp2t ts; }}\n\
               client_body_temp_path {w}/b; proxy_temp_path {w}/p; fastcgi_temp_path {w}/f; uwsgi_temp_path {w}/u; scgi_temp_path {w}/s;\n\
               server {{ listen 127.0.0.1:{port}; location /hls/ {{ alias {r}/; }} }} }}\n",
            w = work.display(),
            r = root.display()
        ),
    )
    .unwrap();
    let child = std::process::Command::new("nginx")
        .args(["-e", "stderr", "-p"])
        .arg(work)
        .arg("-c")
        .arg(&conf)
        .spawn()
        .expect("nginx");
    (child, std::net::SocketAddr::from(([127, 0, 0, 1], port)))
}

async fn serving(p: &Platform, user: &User, clip: &Path, viewers: usize) {
    let open = broadcast(p, user, "public").await;
    let signed = broadcast(p, user, "private").await;
    let encoders = [
        Publisher::start_clip(clip, &text(&open, "rtmpUrl"), 1.0),
        Publisher::start_clip(clip, &text(&signed, "rtmpUrl"), 1.0),
    ];
    let http = reqwest::Client::new();
    for b in [&open, &signed] {
        let hls = text(b, "hlsUrl");
        wait_for("HLS", Duration::from_secs(30), || playable(&http, &hls)).await;
    }
    let media = p.media();
    let work = tempfile::tempdir().unwrap();
    let (mut baseline, static_addr) = static_nginx(&media.work_dir().join("hls"), work.path());
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "HLS to {viewers} concurrent keep-alive viewers (wrk, 2 threads, 5 s per row, same machine)"
    );
    let mut rows = Vec::new();
    for (name, b) in [("open", &open), ("signed", &signed)] {
        let hls = text(b, "hlsUrl");
        let segment = playable(&http, &hls).await.expect("a segment");
        let sid = text(b, "streamId");
        let file = segment
            .rsplit('/')
            .next()
            .unwrap()
            .split('?')
            .next()
            .unwrap();
        let mut ratio = Vec::new();
        let media_url = media_playlist(&http, &hls).await.expect("a media playlist");
        let media_file = media_url
            .rsplit('/')
            .next()
            .unwrap()
            .split('?')
            .next()
            .unwrap()
            .to_string();
        for (kind, served, plain) in [
            (
                "master playlist",
                hls.clone(),
                format!("http://{static_addr}/hls/{sid}/index.m3u8"),
            ),
            (
                "playlist",
                media_url.clone(),
                format!("http://{static_addr}/hls/{sid}/{media_file}"),
            ),
            (
                "segment",
                segment.clone(),
                format!("http://{static_addr}/hls/{sid}/{file}"),
            ),
        ] {
            let (rate, latency) = wrk(&served, viewers);
            println!(
                "{:<28} {rate:>9.0} req/s  {latency}",
                format!("{kind} ({name})")
            );
            let (plain_rate, plain_latency) = wrk(&plain, viewers);
            println!(
                "{:<28} {plain_rate:>9.0} req/s  {plain_latency}",
                format!("{kind} (plain static)")
            );
            ratio.push(rate / plain_rate);
        }
        rows.push((name, ratio[0], ratio[1], ratio[2]));
    }
    for (name, master, playlist, segment) in rows {
        println!(
            "{name} stream against plain static serving: master {master:.2}x, playlist {playlist:.2}x, segment {segment:.2}x"
        );
    }
    // SIGTERM: nginx's master stops its workers too (SIGKILL would leave them running).
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &baseline.id().to_string()])
        .status();
    let _ = baseline.wait();
    for encoder in encoders {
        encoder.stop().await;
    }
}
