//! The agent with the real nginx (and its RTMP module) and ffmpeg, against a fake
//! platform: publishes from ffmpeg, HLS and thumbnails over HTTP, signatures, updates and
//! their refusal, restreams to a second RTMP receiver, nginx's restart, and start-up
//! errors. Needs Debian's `nginx`, `libnginx-mod-rtmp` and `ffmpeg`: without them the
//! tests fail and say so.

use domain::media::{playback_key, signed_query};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use media_agent::{Config, MediaServer};
use serde_json::{Value, json};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

const SECRET: &str = "media-secret-for-tests";
const KEY: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OTHER_KEY: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// How long the test clip plays.
const CLIP_SECS: u64 = 10;
/// Its frame rate (a keyframe every second).
const CLIP_FPS: f64 = 25.0;

// ---------------------------------------------------------------------------------------
// The fake platform.

#[derive(Debug, Clone)]
struct Call {
    path: String,
    secret: Option<String>,
    body: Value,
}

type Rule = Arc<dyn Fn(&str, &Value) -> (u16, Value) + Send + Sync>;

struct Platform {
    url: String,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Platform {
    /// Answers each call with `rule(path, body)`, recording it.
    async fn start(rule: Rule) -> Platform {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let recorded = calls.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (rule, recorded) = (rule.clone(), recorded.clone());
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (rule, recorded) = (rule.clone(), recorded.clone());
                    async move {
                        let path = req.uri().path().to_string();
                        let secret = req
                            .headers()
                            .get("x-media-secret")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string);
                        let bytes = req.into_body().collect().await.unwrap().to_bytes();
                        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        let (status, answer) = rule(&path, &body);
                        recorded.lock().unwrap().push(Call { path, secret, body });
                        let mut response =
                            Response::new(Full::new(Bytes::from(answer.to_string())));
                        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        let kind = if status >= 400 {
                            "application/problem+json"
                        } else {
                            "application/json"
                        };
                        response
                            .headers_mut()
                            .insert("content-type", kind.parse().unwrap());
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Platform { url, calls }
    }

    fn calls(&self, path: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.path == path)
            .cloned()
            .collect()
    }
}

/// Accepts `KEY` as `stream_id` (with `playback` and `restreams`) on publish and
/// update; refuses other keys with a problem.
fn accepting(stream_id: &str, playback: &str, restreams: Value) -> Rule {
    let accepted = json!({"streamId": stream_id, "playback": playback, "restreams": restreams});
    Arc::new(move |path, body| match path {
        "/api/media/publish-done" => (204, Value::Null),
        "/api/media/server" => (200, body.clone()),
        _ if body["key"] == KEY => (200, accepted.clone()),
        _ => (
            403,
            json!({"type": "about:blank", "status": 403, "code": "unknown_stream_key"}),
        ),
    })
}

// ---------------------------------------------------------------------------------------
// Media: a clip encoded once per run, published in real time with stream copy.

/// Shared by every run: the clip is encoded once and kept; each test's files go.
fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join("media-agent-tests");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// Removes a test's files when the test ends, passed or not.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A test pattern with a tone: 320x240, 25 fps, a keyframe every second.
fn clip() -> &'static Path {
    static CLIP: OnceLock<PathBuf> = OnceLock::new();
    CLIP.get_or_init(|| {
        let path = work_dir().join(format!("clip-{CLIP_SECS}s-v1.flv"));
        if path.exists() {
            return path;
        }
        let partial = work_dir().join(format!("clip-{}.partial.flv", std::process::id()));
        let status = std::process::Command::new("ffmpeg")
            .args(["-nostdin", "-hide_banner", "-loglevel", "error", "-y"])
            .args(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25"])
            .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100"])
            .args(["-t", &CLIP_SECS.to_string()])
            .args([
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-g",
                "25",
                "-pix_fmt",
                "yuv420p",
            ])
            .args(["-c:a", "aac", "-b:a", "64k", "-f", "flv"])
            .arg(&partial)
            .status()
            .expect("ffmpeg is not installed: apt-get install nginx libnginx-mod-rtmp ffmpeg");
        assert!(status.success(), "ffmpeg could not encode the test clip");
        std::fs::rename(&partial, &path).unwrap();
        path
    })
}

/// Publishes the clip to `rtmp://{addr}/live/{name}` in real time.
fn publish(addr: SocketAddr, name: &str) -> Child {
    Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-hide_banner",
            "-loglevel",
            "error",
            "-re",
            "-i",
        ])
        .arg(clip())
        .args(["-c", "copy", "-f", "flv"])
        .arg(format!("rtmp://{addr}/live/{name}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("ffmpeg")
}

/// A configuration for the tests: loopback, free ports, short intervals, its own state
/// directory (removed with the [`Scratch`]).
fn config(platform: &Platform) -> (Config, Scratch) {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let mut config = Config::new(&platform.url, SECRET);
    config.rtmp_listen = "127.0.0.1:0".parse().unwrap();
    config.http_listen = "127.0.0.1:0".parse().unwrap();
    config.state_dir = work_dir().join(format!(
        "state-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    config.fragment_secs = 1;
    config.playlist_secs = 6;
    config.update_secs = 2;
    config.thumbnail_secs = 1;
    let scratch = Scratch(config.state_dir.clone());
    (config, scratch)
}

async fn start(config: Config) -> MediaServer {
    MediaServer::start(config)
        .await
        .unwrap_or_else(|e| panic!("the media server did not start: {e:#}"))
}

/// Polls `check` every 200 ms until it answers, for at most `limit`.
async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = check().await {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, Bytes) {
    let response = http().get(url).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap())
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn segment_lines(playlist: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(playlist)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// `#EXT-X-MEDIA-SEQUENCE`: the number of the first segment listed.
fn media_sequence(playlist: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(playlist)
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MEDIA-SEQUENCE:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The first listed segment: its `#EXTINF` duration and its name.
fn first_segment(playlist: &[u8]) -> (f64, String) {
    let text = String::from_utf8_lossy(playlist);
    let mut duration = None;
    for line in text.lines().map(str::trim) {
        if let Some(value) = line.strip_prefix("#EXTINF:") {
            duration = value.split(',').next().and_then(|d| d.parse::<f64>().ok());
        } else if !line.is_empty() && !line.starts_with('#') {
            return (
                duration.expect("an #EXTINF before the segment"),
                line.into(),
            );
        }
    }
    panic!("no segment listed: {text}");
}

/// The video packets (frames) of an MPEG-TS segment, counted by ffprobe.
fn video_packets(segment: &[u8]) -> u64 {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let path = work_dir().join(format!(
        "segment-{}-{}.ts",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    let _scratch = Scratch(path.clone());
    std::fs::write(&path, segment).unwrap();
    let output = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-count_packets"])
        .args(["-show_entries", "stream=nb_read_packets", "-of", "csv=p=0"])
        .arg(&path)
        .output()
        .expect("ffprobe (from ffmpeg) is not installed");
    assert!(output.status.success(), "ffprobe failed: {output:?}");
    // The stream is listed twice: on its own and in its MPEG-TS program.
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("ffprobe answered {text:?}"))
}

/// The names in `dir`, sorted.
fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn sorted<const N: usize>(names: [&str; N]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    names.sort();
    names
}

fn is_running(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn an_open_stream_plays_by_id_and_reports_its_health() {
    let sid = "0b6e3f1c-8a53-4c1e-9f0e-2d7c3b9a4e51";
    let platform = Platform::start(accepting(sid, "open", json!([]))).await;
    let (config, _scratch) = config(&platform);
    let server = start(config).await;
    let base = format!("http://{}/hls", server.http_addr());
    let mut publisher = publish(server.rtmp_addr(), KEY);

    let started_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // The master playlist: a 320x240 source has no smaller rendition, so it lists the
    // source alone.
    let master_url = format!("{base}/{sid}/index.m3u8");
    let (headers, master) = eventually("the master playlist", Duration::from_secs(15), || async {
        let (status, headers, body) = get(&master_url).await;
        (status == 200).then_some((headers, body))
    })
    .await;
    assert_eq!(
        header(&headers, "content-type"),
        "application/vnd.apple.mpegurl"
    );
    let master_text = String::from_utf8_lossy(&master).to_string();
    assert!(
        master_text.contains("RESOLUTION=320x240,FRAME-RATE=25.000,CODECS=\"avc1."),
        "{master_text}"
    );
    assert_eq!(segment_lines(&master), vec!["v0.m3u8".to_string()]);
    let playlist_url = format!("{base}/{sid}/v0.m3u8");
    // Polled often: the broadcast's first segment is still listed when it appears.
    let (headers, playlist) = eventually("the playlist", Duration::from_secs(15), || async {
        let (status, headers, body) = get(&playlist_url).await;
        (status == 200 && !segment_lines(&body).is_empty()).then_some((headers, body))
    })
    .await;
    assert_eq!(
        header(&headers, "content-type"),
        "application/vnd.apple.mpegurl"
    );
    assert_eq!(header(&headers, "access-control-allow-origin"), "*");
    assert_eq!(header(&headers, "cache-control"), "no-cache");
    // An open playlist's segments carry no query.
    let segments = segment_lines(&playlist);
    assert!(segments.iter().all(|s| s.ends_with(".ts")), "{segments:?}");
    let (status, headers, segment) = get(&format!("{base}/{sid}/{}", segments[0])).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), "video/mp2t");
    assert_eq!(header(&headers, "cache-control"), "max-age=60");
    assert_eq!(header(&headers, "access-control-allow-origin"), "*");
    assert_eq!(segment.first(), Some(&0x47), "not MPEG-TS");

    // Segments are numbered from the clock; the broadcast's first segment holds its
    // first GOP: as many video frames as its duration says (the clip's frame rate), not a
    // keyframe interval fewer.
    let sequence = media_sequence(&playlist).unwrap();
    assert!(sequence + 5 >= started_at, "{sequence} from the clock");
    assert!(
        String::from_utf8_lossy(&playlist).contains("#EXT-X-PROGRAM-DATE-TIME:"),
        "the segments' wall time"
    );
    let (duration, first) = first_segment(&playlist);
    assert_eq!(first, segments[0]);
    let frames = video_packets(&segment);
    let expected = duration * CLIP_FPS;
    assert!(
        (frames as f64 - expected).abs() <= 1.0,
        "the first segment ({first}) claims {duration} s but holds {frames} frames at {CLIP_FPS} fps"
    );

    // The stream's ffmpeg writes under the key, which only the disk knows; viewers reach it
    // through the stream id's link.
    let hls_dir = server.work_dir().join("hls");
    assert!(hls_dir.join(KEY).join("index.m3u8").is_file());
    assert!(
        std::fs::symlink_metadata(hls_dir.join(sid))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_link(hls_dir.join(sid)).unwrap(),
        Path::new(KEY)
    );
    assert_eq!(dir_entries(&hls_dir), sorted([KEY, sid]));

    // Nothing is addressed by key, and nothing but HLS is served.
    for path in [
        format!("/hls/{KEY}/index.m3u8"),
        format!("/hls/{KEY}/0.ts"),
        format!("/hls/{KEY}/v0.m3u8"),
        format!("/hls/{KEY}/thumbnail.jpg"),
        format!("/_signed/{sid}/v0.m3u8"),
        format!("/_signed/{sid}/index.m3u8"),
        format!("/hls/{}/index.m3u8", sid.to_uppercase()),
        format!("/hls/{sid}/nginx.conf"),
        format!("/hls/{sid}/../../nginx.conf"),
        "/stat".into(),
        "/control/drop/publisher?app=live&name=x".into(),
        "/nginx.conf".into(),
        "/".into(),
    ] {
        let (status, _, _) = get(&format!("http://{}{path}", server.http_addr())).await;
        assert_eq!(status, 404, "{path}");
    }

    let (headers, jpeg) = eventually("the thumbnail", Duration::from_secs(10), || async {
        let (status, headers, body) = get(&format!("{base}/{sid}/thumbnail.jpg")).await;
        (status == 200).then_some((headers, body))
    })
    .await;
    assert_eq!(header(&headers, "content-type"), "image/jpeg");
    assert_eq!(jpeg.get(..3), Some(&[0xff, 0xd8, 0xff][..]), "not a JPEG");
    // Written into the key's directory, beside the segments; the link stays a link.
    assert!(hls_dir.join(KEY).join("thumbnail.jpg").is_file());
    assert_eq!(
        std::fs::read_link(hls_dir.join(sid)).unwrap(),
        Path::new(KEY)
    );

    // A key the platform refuses, and a name that is no key at all, cannot publish.
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        publish(server.rtmp_addr(), OTHER_KEY).wait(),
    )
    .await
    .expect("a refused publisher is dropped at once")
    .unwrap();
    assert!(!refused.success());
    let not_a_key = tokio::time::timeout(
        Duration::from_secs(5),
        publish(server.rtmp_addr(), "not-a-key").wait(),
    )
    .await
    .expect("a publisher without a key is dropped at once")
    .unwrap();
    assert!(!not_a_key.success());
    // Neither wrote HLS nor got a link.
    assert_eq!(dir_entries(&hls_dir), sorted([KEY, sid]));

    // The clip ends: the platform hears of it.
    let finished = tokio::time::timeout(Duration::from_secs(CLIP_SECS + 5), publisher.wait())
        .await
        .expect("the clip ends")
        .unwrap();
    assert!(
        finished.success(),
        "the accepted publisher failed: {finished}"
    );
    eventually("publish-done", Duration::from_secs(5), || async {
        (!platform.calls("/api/media/publish-done").is_empty()).then_some(())
    })
    .await;

    let publishes = platform.calls("/api/media/publish");
    let keys: Vec<&str> = publishes
        .iter()
        .filter_map(|c| c.body["key"].as_str())
        .collect();
    assert_eq!(
        keys,
        vec![KEY, OTHER_KEY],
        "the platform is asked for keys only"
    );
    assert!(
        publishes
            .iter()
            .all(|c| c.secret.as_deref() == Some(SECRET))
    );
    let connection = publishes[0].body["connection"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(publishes[0].body["clientAddr"], "127.0.0.1");
    assert_ne!(
        connection,
        publishes[1].body["connection"].as_str().unwrap()
    );

    let updates = platform.calls("/api/media/update");
    assert!(updates.len() >= 2, "{updates:?}");
    for update in &updates {
        assert_eq!(update.body["connection"], connection.as_str());
        assert_eq!(update.body["key"], KEY);
        assert_eq!(update.secret.as_deref(), Some(SECRET));
    }
    let measured = updates
        .iter()
        .map(|u| &u.body["health"])
        .find(|h| h["bitrate"].as_i64().is_some_and(|b| b > 0) && h["keyframeInterval"].is_number())
        .unwrap_or_else(|| {
            panic!("no update carried a bitrate and a keyframe interval: {updates:#?}")
        });
    assert_eq!(measured["width"], 320);
    assert_eq!(measured["height"], 240);
    assert_eq!(measured["videoCodec"], "H264");
    assert_eq!(measured["audioCodec"], "AAC");
    assert_eq!(measured["frameRate"], 25.0);
    let keyframes = measured["keyframeInterval"].as_f64().unwrap();
    assert!(
        (0.9..=1.1).contains(&keyframes),
        "keyframe interval {keyframes}"
    );
    let rate = measured["mediaRate"].as_f64().unwrap();
    assert!((0.7..=1.3).contains(&rate), "media rate {rate}");

    let done = &platform.calls("/api/media/publish-done")[0];
    assert_eq!(done.body, json!({"connection": connection, "key": KEY}));
    assert_eq!(done.secret.as_deref(), Some(SECRET));

    let pid = server.nginx_pid().expect("nginx runs");
    let rtmp = server.rtmp_addr();
    server.shutdown().await;
    assert!(!is_running(pid), "nginx outlived the shutdown");
    std::net::TcpListener::bind(rtmp).expect("the RTMP port is free again");
}

#[tokio::test]
async fn a_signed_stream_needs_a_valid_signature() {
    let sid = "5f0c2d9e-1b47-4a8f-b3c6-7e2a9d4f8c10";
    let platform = Platform::start(accepting(sid, "signed", json!([]))).await;
    let (config, _scratch) = config(&platform);
    let server = start(config).await;
    let _publisher = publish(server.rtmp_addr(), KEY);
    let playlist_file = server.work_dir().join("hls").join(sid).join("index.m3u8");
    eventually("the playlist file", Duration::from_secs(15), || async {
        std::fs::read(&playlist_file)
            .ok()
            .filter(|p| !segment_lines(p).is_empty())
    })
    .await;
    assert!(!server.work_dir().join("open").join(sid).exists());

    let url = format!("http://{}/hls/{sid}/index.m3u8", server.http_addr());
    let key = playback_key(SECRET);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (status, headers, _) = get(&url).await;
    assert_eq!(status, 403, "no signature");
    assert_eq!(header(&headers, "access-control-allow-origin"), "*");
    let (status, _, _) = get(&format!("{url}?{}", signed_query(&key, sid, now - 10))).await;
    assert_eq!(status, 410, "expired");
    let wrong = signed_query(&playback_key("another secret"), sid, now + 600);
    assert_eq!(get(&format!("{url}?{wrong}")).await.0, 403, "wrong key");
    let other_stream = signed_query(&key, "5f0c2d9e-1b47-4a8f-b3c6-7e2a9d4f8c11", now + 600);
    assert_eq!(
        get(&format!("{url}?{other_stream}")).await.0,
        403,
        "another stream's"
    );

    let query = signed_query(&key, sid, now + 600);
    let (status, headers, playlist) = get(&format!("{url}?{query}")).await;
    assert_eq!(status, 200, "valid signature");
    assert_eq!(
        header(&headers, "content-type"),
        "application/vnd.apple.mpegurl"
    );
    // The master playlist repeats the signature on its media playlists, and they on
    // their segments.
    let renditions = segment_lines(&playlist);
    assert_eq!(renditions, vec![format!("v0.m3u8?{query}")]);
    let media_url = format!("http://{}/hls/{sid}/{}", server.http_addr(), renditions[0]);
    let (status, _, playlist) = get(&media_url).await;
    assert_eq!(status, 200, "the master's own media playlist address");
    let bare_media = media_url.split('?').next().unwrap();
    assert_eq!(
        get(bare_media).await.0,
        403,
        "a media playlist without a signature"
    );
    let segments = segment_lines(&playlist);
    assert!(!segments.is_empty());
    for line in &segments {
        assert!(line.ends_with(&format!(".ts?{query}")), "{line}");
    }
    let segment_url = format!("http://{}/hls/{sid}/{}", server.http_addr(), segments[0]);
    let (status, headers, _) = get(&segment_url).await;
    assert_eq!(status, 200, "the playlist's own segment address");
    assert_eq!(header(&headers, "content-type"), "video/mp2t");
    let bare = segment_url.split('?').next().unwrap();
    assert_eq!(get(bare).await.0, 403, "a segment without a signature");
    server.shutdown().await;
}

#[tokio::test]
async fn a_refused_update_drops_the_publisher() {
    let sid = "9d1e7a3b-4c2f-4e8d-a6b5-3f9c0e2d7a18";
    let accepted = json!({"streamId": sid, "playback": "open", "restreams": []});
    let platform = Platform::start(Arc::new(move |path, _| match path {
        "/api/media/publish" => (200, accepted.clone()),
        "/api/media/update" => (
            403,
            json!({"type": "about:blank", "status": 403, "code": "broadcast_ended"}),
        ),
        _ => (204, Value::Null),
    }))
    .await;
    let (config, _scratch) = config(&platform);
    let server = start(config).await;
    let started = Instant::now();
    let exit = tokio::time::timeout(
        Duration::from_secs(8),
        publish(server.rtmp_addr(), KEY).wait(),
    )
    .await
    .expect("the publisher is dropped after the refused update")
    .unwrap();
    assert!(!exit.success());
    assert!(started.elapsed() < Duration::from_secs(CLIP_SECS - 2));
    assert!(!platform.calls("/api/media/update").is_empty());
    eventually("publish-done", Duration::from_secs(5), || async {
        (!platform.calls("/api/media/publish-done").is_empty()).then_some(())
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_restream_reaches_its_target_and_reports_live() {
    let sid = "3a8f5c1d-2e9b-4d7a-8c6f-1b0e9d2a7c43";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let received = work_dir().join(format!("received-{}-{port}.flv", std::process::id()));
    let _received = Scratch(received.clone());
    // The target: an RTMP server of its own (ffmpeg listening), writing what it gets.
    let mut receiver = Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-hide_banner",
            "-loglevel",
            "error",
            "-listen",
            "1",
            "-f",
            "flv",
        ])
        .args(["-i", &format!("rtmp://127.0.0.1:{port}/app/target-key")])
        .args(["-c", "copy", "-f", "flv", "-y"])
        .arg(&received)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let target = json!([{"id": "yt", "url": format!("rtmp://127.0.0.1:{port}/app/target-key")}]);
    let platform = Platform::start(accepting(sid, "open", target)).await;
    let (mut config, _scratch) = config(&platform);
    config.allow_private_restreams = true;
    let server = start(config).await;
    let _publisher = publish(server.rtmp_addr(), KEY);

    eventually(
        "an update reporting the restream live",
        Duration::from_secs(12),
        || async {
            platform
                .calls("/api/media/update")
                .iter()
                .any(|u| {
                    u.body["restreams"] == json!([{"id": "yt", "state": "live", "error": null}])
                })
                .then_some(())
        },
    )
    .await;
    // The receiver probes its input, then writes: give it a few seconds.
    eventually(
        "the target to receive the stream",
        Duration::from_secs(8),
        || async {
            let size = std::fs::metadata(&received).map(|m| m.len()).unwrap_or(0);
            (size > 10_000).then_some(())
        },
    )
    .await;
    // The first updates may say "connecting"; none says anything but the fixed words
    // (neither the target's key nor the source's, the stream key).
    for update in platform.calls("/api/media/update") {
        let text = update.body["restreams"].to_string();
        assert!(!text.contains("target-key"), "{text}");
        assert!(!text.contains(KEY), "{text}");
    }
    server.shutdown().await;
    let _ = receiver.kill().await;
}

#[tokio::test]
async fn nginx_is_restarted_when_it_dies_and_stopped_when_dropped() {
    let sid = "c4e2a9f1-7b3d-4f6e-9a8c-5d1b0e3f2a67";
    let platform = Platform::start(accepting(sid, "open", json!([]))).await;
    let (config, _scratch) = config(&platform);
    let server = start(config).await;
    let _publisher = publish(server.rtmp_addr(), KEY);
    eventually("the publish", Duration::from_secs(10), || async {
        (!platform.calls("/api/media/publish").is_empty()).then_some(())
    })
    .await;
    let first = server.nginx_pid().unwrap();
    // SAFETY: killing the nginx this test started.
    unsafe { libc::kill(first as libc::pid_t, libc::SIGKILL) };
    eventually("the restart", Duration::from_secs(10), || async {
        (server.restarts() == 1 && server.nginx_pid().is_some()).then_some(())
    })
    .await;
    let second = server.nginx_pid().unwrap();
    assert_ne!(first, second);
    // Its publisher's end reached the platform, and the new nginx takes connections.
    eventually("publish-done", Duration::from_secs(5), || async {
        (!platform.calls("/api/media/publish-done").is_empty()).then_some(())
    })
    .await;
    let rtmp = server.rtmp_addr();
    eventually("RTMP after the restart", Duration::from_secs(5), || async {
        std::net::TcpStream::connect(rtmp).ok().map(|_| ())
    })
    .await;
    drop(server);
    eventually("nginx to stop", Duration::from_secs(5), || async {
        (!is_running(second) || is_zombie(second)).then_some(())
    })
    .await;
    // Its workers are gone too: they held the port.
    eventually(
        "the RTMP port to be free",
        Duration::from_secs(5),
        || async { std::net::TcpListener::bind(rtmp).ok().map(|_| ()) },
    )
    .await;
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[tokio::test]
async fn start_says_what_is_missing() {
    let platform = Platform::start(accepting("x", "open", json!([]))).await;

    let (mut no_nginx, _a) = config(&platform);
    no_nginx.nginx_bin = PathBuf::from("/nonexistent/nginx");
    let err = MediaServer::start(no_nginx)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("nginx with its RTMP module is not installed")
            && err.contains("apt-get install nginx libnginx-mod-rtmp ffmpeg"),
        "{err}"
    );

    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (mut taken, _b) = config(&platform);
    taken.rtmp_listen = held.local_addr().unwrap();
    let err = MediaServer::start(taken).await.err().unwrap().to_string();
    assert_eq!(
        err,
        format!(
            "cannot listen on {} for RTMP ingest: address in use; set rtmp_ingest_base to move it",
            held.local_addr().unwrap()
        )
    );

    // Without the module nginx knows no `rtmp` block: `nginx -t` says so.
    let (mut no_module, _c) = config(&platform);
    no_module.rtmp_module = PathBuf::new();
    let err = MediaServer::start(no_module)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("refused by nginx"), "{err}");
    assert!(err.contains("unknown directive \"rtmp\""), "{err}");
}
