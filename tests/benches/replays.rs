//! Replays and clips benchmark: the real media server (nginx-rtmp through media-agent, in
//! edgehost, production 2 s segments, the adaptive ladder) with a real `ffmpeg` publishing a
//! 720p source at 2.5 Mbit/s with a keyframe every 2 s (as OBS sends by default).
//!
//! - end to replay-ready: from the owner's ending the broadcast (its encoder stopped) to the
//!   broadcast's `replay.state` being `ready`, over `TRIALS` (3) shows of `SECONDS` (30);
//! - storage per hour of a full ladder: the bytes kept of each rendition, per hour of show;
//! - clips: a "clip that" (`lastSeconds`) while live, then `CLIPS` (4) clips of the replay
//!   asked at once: from the request to the clip's HLS and to its MP4.
//!
//! Run: `cargo bench -p platform-tests --bench replays --profile host`. The encoder, the
//! ladder and the media server share the machine: compare rows of one run.

use platform_tests::media::{Publisher, clip_of, wait_for};
use platform_tests::{Exchange, Method, Platform, User, env_or};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[rustfmt::skip]
/// 1280x720 at 30 fps, H.264 at 2.5 Mbit/s with a keyframe every 2 s, AAC 128k.
const SOURCE_720P: &[&str] = &[
    "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30",
    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
    "-t", "20", "-ac", "2",
    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
    "-g", "60", "-keyint_min", "60", "-sc_threshold", "0",
    "-b:v", "2500k", "-maxrate", "2500k", "-bufsize", "2500k",
    "-c:a", "aac", "-b:a", "128k",
];

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let trials: usize = env_or("TRIALS", 3);
    let seconds: u64 = env_or("SECONDS", 30);
    let clips: usize = env_or("CLIPS", 4);
    // The production settings: 2 s segments.
    let options = edgehost::MediaServer::ephemeral();
    let p = Platform::start_media_with(options, &[("ingest_reconnect_window", "60")]).await;
    let tenant = p.register_client("Bench").await;
    let user = p.signup(&tenant, "caster").await;
    let source = clip_of(SOURCE_720P, "replays-720p-2500k");
    println!(
        "media server: nginx-rtmp through media-agent, 2 s segments, the ladder; a 720p30 \
         source at 2.5 Mbit/s; {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    let mut ready_after = Vec::new();
    let mut last = None;
    for trial in 0..trials {
        let b = call(
            &p,
            &user,
            Method::POST,
            "/api/broadcasts",
            Some(json!({"title": "Bench", "visibility": "public"})),
        )
        .await;
        let id = text(&b, "id");
        let publisher = Publisher::start_clip(&source, &text(&b, "rtmpUrl"), 1.0);
        until(&p, &user, &id, "the ingest to be live", |b| {
            b["ingest"]["state"] == "live"
        })
        .await;
        tokio::time::sleep(Duration::from_secs(seconds.saturating_sub(10))).await;
        if trial == 0 {
            // "Clip that", 10 s before the end of the show.
            let asked = Instant::now();
            let made = clip(&p, &user, &id, json!({"lastSeconds": 10, "title": "Live"})).await;
            let (hls, mp4) = clip_times(&p, &user, &made, asked).await;
            println!("clip while live (lastSeconds 10): HLS {hls:.2} s, MP4 {mp4:.2} s");
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
        publisher.stop().await;
        call(
            &p,
            &user,
            Method::POST,
            &format!("/api/broadcasts/{id}/status"),
            Some(json!({"status": "completed"})),
        )
        .await;
        let ended = Instant::now();
        let b = until(&p, &user, &id, "the replay to be ready", |b| {
            assert_ne!(b["replay"]["state"], "failed", "{}", b["replay"]);
            b["replay"]["state"] == "ready"
        })
        .await;
        ready_after.push(ended.elapsed().as_secs_f64());
        last = Some(b);
    }
    println!(
        "end to replay-ready ({trials} shows of {seconds} s): {}",
        figures(&ready_after)
    );

    let b = last.expect("at least one trial");
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let duration = b["replay"]["duration"].as_f64().expect("duration");
    storage_per_hour(&p, &stream, duration);

    // Clips of the replay, asked at once, spread over the show.
    let asked = Instant::now();
    let mut made = Vec::new();
    for n in 0..clips {
        let start = (n as f64 * (duration - 12.0) / clips.max(1) as f64).floor() as u64;
        made.push(
            clip(
                &p,
                &user,
                &id,
                json!({"startOffset": start, "duration": 10, "title": format!("Clip {n}")}),
            )
            .await,
        );
    }
    let (mut hls, mut mp4) = (Vec::new(), Vec::new());
    for c in &made {
        let (h, m) = clip_times(&p, &user, c, asked).await;
        hls.push(h);
        mp4.push(m);
    }
    println!(
        "{clips} clips of 10 s asked at once: HLS {}; MP4 {}",
        figures(&hls),
        figures(&mp4)
    );
}

/// The bytes kept of each rendition of `stream`'s replay, per hour of show.
fn storage_per_hour(p: &Platform, stream: &str, seconds: f64) {
    let dir = p.media().work_dir().join("media/replays").join(stream);
    let mut per_rendition = std::collections::BTreeMap::<String, u64>::new();
    for entry in std::fs::read_dir(&dir).expect("the replay's directory") {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some((rendition, _)) = name.strip_suffix(".ts").and_then(|n| n.split_once('_')) {
            *per_rendition.entry(rendition.to_string()).or_default() +=
                entry.metadata().unwrap().len();
        }
    }
    let per_hour = |bytes: u64| bytes as f64 * 3600.0 / seconds / 1e9;
    let total: u64 = per_rendition.values().sum();
    let rows: Vec<String> = per_rendition
        .iter()
        .map(|(r, bytes)| format!("{r} {:.2}", per_hour(*bytes)))
        .collect();
    println!(
        "storage per hour of the full ladder ({seconds:.1} s kept): {:.2} GB ({} GB)",
        per_hour(total),
        rows.join(", ")
    );
}

/// Seconds from `asked` to the clip's HLS and to its MP4.
async fn clip_times(p: &Platform, user: &User, made: &Value, asked: Instant) -> (f64, f64) {
    let id = text(made, "id");
    let path = format!("/api/clips/{id}");
    let hls = std::cell::Cell::new(None);
    let mp4 = wait_for("the clip's MP4", Duration::from_secs(120), || async {
        let c = call(p, user, Method::GET, &path, None).await;
        assert_ne!(c["state"], "failed", "{c}");
        if hls.get().is_none() && c["hlsUrl"].is_string() {
            hls.set(Some(asked.elapsed().as_secs_f64()));
        }
        c["mp4Url"]
            .is_string()
            .then(|| asked.elapsed().as_secs_f64())
    })
    .await;
    (hls.get().unwrap_or(mp4), mp4)
}

async fn clip(p: &Platform, user: &User, id: &str, body: Value) -> Value {
    let path = format!("/api/broadcasts/{id}/clips");
    call(p, user, Method::POST, &path, Some(body)).await
}

/// Polls the broadcast every 50 ms until `done` says so.
async fn until(
    p: &Platform,
    user: &User,
    id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let path = format!("/api/broadcasts/{id}");
    wait_for(what, Duration::from_secs(60), || async {
        let b = call(p, user, Method::GET, &path, None).await;
        done(&b).then_some(b)
    })
    .await
}

async fn call(p: &Platform, user: &User, method: Method, path: &str, body: Option<Value>) -> Value {
    let exchange = p.as_user(user, method, path);
    let (status, answer) = match body {
        Some(body) => exchange.send_json(&body).await,
        None => exchange.answer().await,
    };
    assert!(status.is_success(), "{path}: {status} {answer}");
    answer
}

fn text(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
        .to_string()
}

/// min, median and max of `values`, in seconds.
fn figures(values: &[f64]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.as_slice() {
        [] => "none".into(),
        s => format!(
            "min {:.2} s, median {:.2} s, max {:.2} s",
            s[0],
            s[s.len() / 2],
            s[s.len() - 1]
        ),
    }
}
