//! The media plane end to end: edgehost runs the real media server (nginx with its RTMP
//! module, driven by media-agent) beside the app, and real `ffmpeg` encoders publish a
//! test pattern to a broadcast's `rtmpUrl`. The platform decides who may publish; the
//! ingest drives the broadcast's status; HLS plays under the `streamId` (never the key),
//! signed for private broadcasts; health, thumbnails and restreams follow the stream.

use crate::support::browser;
use crate::support::livekit_egress;

use browser::Browser;
use platform_tests::media::{Publisher, playlist_segments, probe_codecs, resolve, tool, wait_for};
use platform_tests::webhook_receiver::Receiver;
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A platform with its media server; a dropped publisher has `window` seconds to return.
async fn platform(window: u32) -> Platform {
    let window = window.to_string();
    Platform::start_with_media(&[
        ("webhook_allow_http", "true"),
        ("restream_allow_private", "true"),
        ("ingest_reconnect_window", &window),
    ])
    .await
}

async fn setup(p: &Platform) -> (Tenant, User) {
    let tenant = p.register_client("Media").await;
    let user = p.signup(&tenant, "caster").await;
    (tenant, user)
}

async fn create(p: &Platform, user: &User, visibility: &str) -> Value {
    let (status, b) = p
        .as_user(user, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Test pattern", "visibility": visibility}))
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

async fn get(p: &Platform, user: &User, id: &str) -> Value {
    let (status, b) = p
        .as_user(user, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

fn text(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
        .to_string()
}

/// Waits until the owner sees the broadcast's ingest in `state`; answers the broadcast.
async fn until_ingest(p: &Platform, user: &User, id: &str, state: &str) -> Value {
    wait_for(
        &format!("the ingest to be {state}"),
        Duration::from_secs(20),
        || async {
            let b = get(p, user, id).await;
            (b["ingest"]["state"] == state).then_some(b)
        },
    )
    .await
}

/// GET of a playback address: (status, body bytes, content type).
async fn fetch(url: &str) -> (u16, Vec<u8>, String) {
    let answer = reqwest::get(url).await.expect("the media server answers");
    let status = answer.status().as_u16();
    let kind = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, answer.bytes().await.expect("body").to_vec(), kind)
}

/// Waits for a playlist at `url` that lists segments; answers its text.
async fn until_playlist(url: &str) -> String {
    wait_for(
        "a playable HLS playlist",
        Duration::from_secs(20),
        || async {
            let (status, body, _) = fetch(url).await;
            let text = String::from_utf8_lossy(&body).to_string();
            (status == 200 && !playlist_segments(&text).is_empty()).then_some(text)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_published_test_pattern_goes_live_plays_as_hls_and_completes_after_the_window() {
    let p = platform(3).await;
    let (tenant, user) = setup(&p).await;
    let receiver = subscribe(&p, &tenant).await;
    let b = create(&p, &user, "public").await;
    let (id, stream_id, key) = (text(&b, "id"), text(&b, "streamId"), text(&b, "streamKey"));
    // The key is a secret of its own: nothing public derives it.
    assert_ne!(key, stream_id.replace('-', ""));
    assert_eq!(key.len(), 32);
    assert_eq!(
        text(&b, "rtmpUrl"),
        format!("{}/{key}", p.variable("rtmp_ingest_base").unwrap())
    );
    let hls_url = text(&b, "hlsUrl");
    assert!(
        hls_url.ends_with(&format!("/{stream_id}/index.m3u8")),
        "{hls_url}"
    );
    assert_eq!(b["ingest"]["state"], "idle");

    let started = Instant::now();
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    let live = until_ingest(&p, &user, &id, "live").await;
    assert_eq!(
        live["status"], "active",
        "a publish makes the broadcast active"
    );
    let playlist = until_playlist(&hls_url).await;
    println!("first playable playlist after {:?}", started.elapsed());
    assert!(
        !playlist.contains(&key),
        "the key is never in a viewer's address"
    );
    // The segments decode as H.264 and AAC.
    let segment = playlist_segments(&playlist).pop().unwrap();
    let (status, bytes, kind) = fetch(&resolve(&hls_url, &segment)).await;
    assert_eq!((status, kind.as_str()), (200, "video/mp2t"));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();
    let codecs = probe_codecs(file.path());
    assert!(
        codecs.contains(&("video".into(), "h264".into())),
        "{codecs:?}"
    );
    assert!(
        codecs.contains(&("audio".into(), "aac".into())),
        "{codecs:?}"
    );
    // Nothing is served under the key.
    let under_key = hls_url.replace(&stream_id, &key);
    assert_eq!(fetch(&under_key).await.0, 404);

    // Health, as the owner sees it: what the encoder sends, measured.
    let healthy = wait_for("a health sample", Duration::from_secs(20), || async {
        let b = get(&p, &user, &id).await;
        let stats = &b["ingest"]["stats"];
        (stats["keyframeInterval"].is_number() && stats["bitrate"].as_i64() > Some(0)).then_some(b)
    })
    .await;
    let stats = &healthy["ingest"]["stats"];
    assert_eq!(
        (stats["width"].as_i64(), stats["height"].as_i64()),
        (Some(640), Some(360))
    );
    assert_eq!(stats["videoCodec"], "H264");
    assert_eq!(stats["audioCodec"], "AAC");
    let keyframes = stats["keyframeInterval"].as_f64().unwrap();
    assert!(
        (0.8..=1.2).contains(&keyframes),
        "a keyframe a second: {keyframes}"
    );
    assert_eq!(healthy["ingest"]["health"], "healthy");
    // The same samples in the broadcast's analytics time series.
    let (status, analytics) = p
        .as_user(
            &user,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{analytics}");
    let sampled: Vec<&Value> = analytics["timeseries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|point| point["ingest"].is_object())
        .collect();
    assert!(!sampled.is_empty(), "{analytics}");
    assert_eq!(sampled[0]["ingest"]["width"], 640);
    assert_eq!(sampled[0]["ingest"]["health"], "healthy");
    // A thumbnail, on the live listing too.
    let thumbnail = text(&healthy, "thumbnailUrl");
    let jpeg = wait_for("a thumbnail", Duration::from_secs(20), || async {
        let (status, bytes, _) = fetch(&thumbnail).await;
        (status == 200).then_some(bytes)
    })
    .await;
    assert_eq!(&jpeg[..3], &[0xFF, 0xD8, 0xFF], "a JPEG");
    let (status, listing) = p
        .as_client(&tenant, Method::GET, "/api/broadcasts/live")
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(listing["items"][0]["id"], id.as_str());
    assert_eq!(listing["items"][0]["thumbnailUrl"], thumbnail.as_str());
    assert!(listing["items"][0].get("streamKey").is_none());

    // The encoder stops: the broadcast waits out the reconnect window, then completes.
    publisher.stop().await;
    let stopped = Instant::now();
    let waiting = until_ingest(&p, &user, &id, "reconnecting").await;
    assert_eq!(waiting["status"], "active");
    assert_eq!(
        p.run_job("settle-ingests").await["done"],
        0,
        "inside the window"
    );
    let ended = wait_for(
        "the broadcast to complete",
        Duration::from_secs(15),
        || async {
            p.run_job("settle-ingests").await;
            let b = get(&p, &user, &id).await;
            (b["status"] == "completed").then_some(b)
        },
    )
    .await;
    assert!(
        stopped.elapsed() >= Duration::from_secs(3),
        "not before the window ended"
    );
    assert_eq!(ended["ingest"]["state"], "idle");
    // The tenant heard of both moves.
    p.run_job("deliver-webhooks").await;
    let events: Vec<String> = receiver
        .wait_for(3, Duration::from_secs(10))
        .await
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap_or_default().to_string())
        .collect();
    for expected in ["broadcast.created", "broadcast.started", "broadcast.ended"] {
        assert!(
            events.iter().any(|e| e == expected),
            "{expected} in {events:?}"
        );
    }
}

/// A webhook receiver on loopback, subscribed to the tenant's broadcast events.
async fn subscribe(p: &Platform, tenant: &Tenant) -> Receiver {
    let receiver = Receiver::start().await;
    let (status, endpoint) = p
        .as_server(
            tenant,
            Method::POST,
            "/api/v1/webhooks",
            Some(&json!({"url": receiver.url("/hooks"), "events": [
                "broadcast.created", "broadcast.started", "broadcast.ended", "broadcast.health"
            ]})),
        )
        .answer()
        .await;
    assert_eq!(status, 201, "{endpoint}");
    receiver
}

#[tokio::test(flavor = "multi_thread")]
async fn an_encoder_below_real_time_starves_and_the_tenant_is_told() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let receiver = subscribe(&p, &tenant).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start_clip(
        &platform_tests::media::test_clip(),
        &text(&b, "rtmpUrl"),
        0.5,
    );
    let starving = wait_for("a starving ingest", Duration::from_secs(30), || async {
        let b = get(&p, &user, &id).await;
        (b["ingest"]["health"] == "starving").then_some(b)
    })
    .await;
    let rate = starving["ingest"]["stats"]["mediaRate"].as_f64().unwrap();
    assert!(rate < 0.8, "half of real time: {rate}");
    p.run_job("deliver-webhooks").await;
    let health = wait_for(
        "the broadcast.health event",
        Duration::from_secs(15),
        || async {
            p.run_job("deliver-webhooks").await;
            receiver
                .received()
                .iter()
                .map(|r| r.json())
                .find(|e| e["type"] == "broadcast.health")
        },
    )
    .await;
    assert_eq!(health["data"]["id"], id.as_str());
    assert_eq!(health["data"]["ingest"]["health"], "starving");
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_publisher_back_within_the_window_continues_the_broadcast() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    let live = until_ingest(&p, &user, &id, "live").await;
    publisher.stop().await;
    let away = until_ingest(&p, &user, &id, "reconnecting").await;
    assert!(away["ingest"]["reconnectDeadline"].is_string());
    let (again, back) = publish_again(&p, &user, &b, &live).await;
    assert!(back["ingest"]["reconnectDeadline"].is_null());
    again.stop().await;
}

/// The encoder of broadcast `b` reconnects (as OBS does) within the window: the same
/// broadcast that went `live` goes on, on its second publish. Answers the encoder and the
/// owner's view.
async fn publish_again(p: &Platform, user: &User, b: &Value, live: &Value) -> (Publisher, Value) {
    let again = Publisher::start(&text(b, "rtmpUrl"));
    let back = until_ingest(p, user, &text(b, "id"), "live").await;
    assert_eq!(back["status"], "active");
    assert_eq!(
        back["startedAt"], live["startedAt"],
        "the same broadcast goes on"
    );
    assert_eq!(back["ingest"]["publishes"], 2);
    (again, back)
}

/// The faults suite's media server fault: nginx killed under a live publish.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_media_server_is_restarted_and_the_broadcast_goes_on() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    let live = until_ingest(&p, &user, &id, "live").await;
    let killed = p.media().nginx_pid().expect("nginx runs");
    let kill = std::process::Command::new("kill")
        .args(["-KILL", &killed.to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success());
    // edgehost restarts it, and the broadcast waits for its encoder (nothing is lost:
    // it is still the same live broadcast, in its reconnect window).
    wait_for("nginx to be restarted", Duration::from_secs(15), || async {
        let media = p.media();
        (media.restarts() == 1 && media.nginx_pid().is_some_and(|pid| pid != killed)).then_some(())
    })
    .await;
    let away = until_ingest(&p, &user, &id, "reconnecting").await;
    assert_eq!(away["status"], "active");
    publisher.stop().await;
    // The encoder reconnects and the same broadcast plays again.
    let (again, _) = publish_again(&p, &user, &b, &live).await;
    let playlist = until_playlist(&text(&b, "hlsUrl")).await;
    assert!(!playlist_segments(&playlist).is_empty());
    again.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_reset_second_ended_and_suspended_publishers_are_refused() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let base = p.variable("rtmp_ingest_base").unwrap();
    let quickly = Duration::from_secs(8);

    // A key nobody has, and the key anyone could compute from the public streamId.
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    for key in [
        "0123456789abcdef0123456789abcdef".to_string(),
        text(&b, "streamId").replace('-', ""),
    ] {
        let mut refused = Publisher::start(&format!("{base}/{key}"));
        assert!(refused.exits_within(quickly).await, "{key} is refused");
    }
    let pending = get(&p, &user, &id).await;
    assert_eq!(pending["status"], "pending");
    // Unknown keys name no broadcast: nothing is recorded on this one.
    assert_eq!(pending["ingest"]["refusals"], json!([]), "{pending}");

    // One publisher at a time.
    let mut first = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    let mut second = Publisher::start(&text(&b, "rtmpUrl"));
    assert!(
        second.exits_within(quickly).await,
        "a second publisher is refused"
    );
    assert!(
        !first.exits_within(Duration::from_secs(1)).await,
        "the first goes on"
    );
    // Its owner sees why, when and from where.
    let refusal = &get(&p, &user, &id).await["ingest"]["refusals"][0];
    assert_eq!(refusal["reason"], "already_publishing", "{refusal}");
    assert_eq!(
        refusal["detail"],
        "another encoder is publishing this broadcast"
    );
    assert_eq!(refusal["clientAddr"], "127.0.0.1", "{refusal}");
    let at = common::time::parse_rfc3339(refusal["at"].as_str().unwrap()).unwrap();
    assert!((p.now() - at).abs() < 60, "{refusal}");

    // A reset key drops the live publisher at its next update, and stops working.
    let (status, reset) = p
        .as_user(
            &user,
            Method::POST,
            &format!("/api/broadcasts/{id}/stream-key/reset"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{reset}");
    assert_ne!(reset["streamKey"], b["streamKey"]);
    assert!(
        first.exits_within(Duration::from_secs(10)).await,
        "dropped after the reset"
    );
    // Dropped at its update, then refused when it publishes again with the old key: the
    // key it used names the broadcast.
    let reasons = refusal_reasons(&p, &user, &id).await;
    assert_eq!(
        reasons[..2],
        ["stream_key_reset", "already_publishing"],
        "{reasons:?}"
    );
    let mut old = Publisher::start(&text(&b, "rtmpUrl"));
    assert!(old.exits_within(quickly).await, "the old key is refused");
    let reasons = refusal_reasons(&p, &user, &id).await;
    assert_eq!(
        reasons[..2],
        ["stream_key_reset", "stream_key_reset"],
        "{reasons:?}"
    );
    let renewed = Publisher::start(&text(&reset, "rtmpUrl"));
    let back = until_ingest(&p, &user, &id, "live").await;
    assert_eq!(
        back["status"], "active",
        "the new key continues the broadcast"
    );

    // A suspended tenant's publisher is dropped, and may not publish again.
    let admin = p.variable("admin_token").unwrap();
    let status = p
        .request(
            Method::POST,
            &format!("/api/admin/sdk-clients/{}/suspend", tenant.client_id),
        )
        .bearer_auth(&admin)
        .status()
        .await;
    assert_eq!(status, 200);
    let mut renewed = renewed;
    assert!(
        renewed.exits_within(Duration::from_secs(10)).await,
        "dropped on suspension"
    );
    let mut again = Publisher::start(&text(&reset, "rtmpUrl"));
    assert!(
        again.exits_within(quickly).await,
        "a suspended tenant may not publish"
    );
    let status = p
        .request(
            Method::POST,
            &format!("/api/admin/sdk-clients/{}/reinstate", tenant.client_id),
        )
        .bearer_auth(&admin)
        .status()
        .await;
    assert_eq!(status, 200);
    // Dropped, then refused: read once the tenant is back (a suspended one reads nothing).
    let reasons = refusal_reasons(&p, &user, &id).await;
    assert_eq!(
        reasons[..2],
        ["client_suspended", "client_suspended"],
        "{reasons:?}"
    );

    // An ended broadcast takes no publisher.
    let status = p
        .as_user(&user, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .json(&json!({"status": "completed"}))
        .status()
        .await;
    assert_eq!(status, 200);
    let mut late = Publisher::start(&text(&reset, "rtmpUrl"));
    assert!(
        late.exits_within(quickly).await,
        "a completed broadcast is refused"
    );
    let reasons = refusal_reasons(&p, &user, &id).await;
    assert_eq!(reasons[0], "broadcast_ended", "{reasons:?}");
    // A second publisher, a dropped and a refused one for the reset key, the same for the
    // suspension, and the ended broadcast: the unknown keys are not among them.
    assert_eq!(reasons.len(), 6, "{reasons:?}");
}

/// The reasons of the refusals the owner sees on broadcast `id`, newest first.
async fn refusal_reasons(p: &Platform, user: &User, id: &str) -> Vec<String> {
    let b = get(p, user, id).await;
    b["ingest"]["refusals"]
        .as_array()
        .unwrap_or_else(|| panic!("ingest.refusals in {b}"))
        .iter()
        .map(|r| r["reason"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_state_dir_others_cannot_search_still_serves_hls() {
    // As in a clone under /root (mode 0700): the platform's state directory is closed to
    // others, and the media server's lives inside it. Run as root, nginx's workers
    // (nobody) cannot reach it.
    use std::os::unix::fs::PermissionsExt;
    let p = platform(3).await;
    std::fs::set_permissions(p.state_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let p = p.restart().await;
    let work = p.media().work_dir().to_path_buf();
    if unsafe_geteuid() == 0 {
        assert!(
            !work.starts_with(p.state_dir()),
            "{} is out of nobody's reach",
            work.display()
        );
        // Only the configuration stays in the state dir.
        assert!(p.state_dir().join("media/nginx.conf").is_file());
    }
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let _publisher = Publisher::start(&text(&b, "rtmpUrl"));
    let live = until_ingest(&p, &user, &id, "live").await;
    assert_eq!(live["ingest"]["server"]["state"], "up", "{live}");
    let playlist = until_playlist(&text(&b, "hlsUrl")).await;
    let segment = playlist_segments(&playlist).pop().unwrap();
    let (status, _, kind) = fetch(&resolve(&text(&b, "hlsUrl"), &segment)).await;
    assert_eq!((status, kind.as_str()), (200, "video/mp2t"));
    p.stop().await;
    assert!(!work.exists(), "{} is removed", work.display());
}

/// The effective user id (root runs nginx's workers as nobody).
fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_media_server_that_cannot_start_is_said_beside_every_rtmp_url() {
    let mut options = platform_tests::media::server_options();
    options.required = false;
    options.config.nginx_bin = "/nonexistent/nginx".into();
    let p = Platform::start_media_with(options, &[]).await;
    let why = p
        .media_failure()
        .expect("edgehost says why it runs no media server");
    assert!(
        why.contains("nginx with its RTMP module is not installed"),
        "{why}"
    );
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let server = wait_for(
        "the media server reported down",
        Duration::from_secs(20),
        || async {
            let b = get(&p, &user, &id).await;
            (b["ingest"]["server"]["state"] == "down").then(|| b["ingest"]["server"].clone())
        },
    )
    .await;
    assert!(
        server["reason"]
            .as_str()
            .is_some_and(|r| r.contains("nginx with its RTMP module is not installed")),
        "{server}"
    );
    assert!(server["reportedAt"].is_string(), "{server}");
}

#[tokio::test(flavor = "multi_thread")]
async fn private_playback_needs_an_unexpired_signature() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "private").await;
    let (id, stream_id) = (text(&b, "id"), text(&b, "streamId"));
    let signed = text(&b, "hlsUrl");
    assert!(
        signed.contains("?exp=") && signed.contains("&sig="),
        "{signed}"
    );
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    let playlist = until_playlist(&signed).await;
    // Each segment line carries the signature, so players keep it.
    let segments = playlist_segments(&playlist);
    assert!(segments.iter().all(|s| s.contains("sig=")), "{playlist}");
    let (status, _, _) = fetch(&resolve(&signed, &segments[0])).await;
    assert_eq!(status, 200);

    let bare = signed.split('?').next().unwrap().to_string();
    assert_eq!(fetch(&bare).await.0, 403, "no signature");
    let bare_segment = resolve(&bare, segments[0].split('?').next().unwrap());
    assert_eq!(
        fetch(&bare_segment).await.0,
        403,
        "no signature on a segment"
    );
    let thumbnail = text(&b, "thumbnailUrl");
    assert_eq!(fetch(thumbnail.split('?').next().unwrap()).await.0, 403);
    let key = common::domain::media::playback_key(&p.variable("media_secret").unwrap());
    let expired = common::domain::media::signed_query(&key, &stream_id, p.now() - 5);
    assert_eq!(fetch(&format!("{bare}?{expired}")).await.0, 410, "expired");
    let forged = signed.replace("sig=", "sig=A");
    assert_eq!(fetch(&forged).await.0, 403, "forged");
    let other_stream = common::domain::media::signed_query(&key, "another-stream", p.now() + 60);
    assert_eq!(
        fetch(&format!("{bare}?{other_stream}")).await.0,
        403,
        "another stream's"
    );

    // Made public while live: the bare address plays from the next update on.
    let status = p
        .as_user(&user, Method::PATCH, &format!("/api/broadcasts/{id}"))
        .json(&json!({"visibility": "public"}))
        .status()
        .await;
    assert_eq!(status, 200);
    until_playlist(&bare).await;
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn restream_targets_receive_the_live_stream() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    // A second RTMP server on loopback: ffmpeg listening, writing what it receives.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let received = tempfile::tempdir().unwrap();
    let out = received.path().join("received.flv");
    let mut receiver = tokio::process::Command::new(tool("ffmpeg"))
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
        .args([
            "-i",
            &format!("rtmp://127.0.0.1:{port}/live/target-key-0123456789"),
        ])
        .args(["-c", "copy", "-f", "flv"])
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let path = format!("/api/broadcasts/{id}/restreams");
    let (status, target) = p
        .as_user(&user, Method::POST, &path)
        .send_json(&json!({"url": format!("rtmp://127.0.0.1:{port}/live"), "streamKey": "target-key-0123456789", "name": "Mirror"}))
        .await;
    assert_eq!(status, 201, "{target}");
    assert_eq!(target["keyHint"], "…6789");
    assert_eq!(target["state"], "idle");
    assert!(
        !target.to_string().contains("target-key-0123456789"),
        "the key is never answered"
    );
    // Four more fit; a sixth does not.
    for n in 0..4 {
        let (status, _) = p
            .as_user(&user, Method::POST, &path)
            .send_json(&json!({"url": "rtmp://a.rtmp.youtube.com/live2", "streamKey": format!("spare-{n}")}))
            .await;
        assert_eq!(status, 201);
    }
    let (status, refused) = p
        .as_user(&user, Method::POST, &path)
        .send_json(&json!({"url": "rtmp://a.rtmp.youtube.com/live2", "streamKey": "sixth"}))
        .await;
    assert_eq!(
        (status.as_u16(), refused["code"].as_str()),
        (409, Some("too_many_restreams"))
    );
    // Leave only the loopback target (the others would be pushed to the internet).
    let (_, list) = p.as_user(&user, Method::GET, &path).answer().await;
    for t in list["items"].as_array().unwrap() {
        if t["id"] != target["id"] {
            let status = p
                .as_user(&user, Method::DELETE, &format!("{path}/{}", text(t, "id")))
                .status()
                .await;
            assert_eq!(status, 200);
        }
    }

    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    wait_for("the target to be live", Duration::from_secs(30), || async {
        let (_, list) = p.as_user(&user, Method::GET, &path).answer().await;
        (list["items"][0]["state"] == "live").then_some(())
    })
    .await;
    wait_for(
        "media at the second receiver",
        Duration::from_secs(20),
        || async {
            let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
            (size > 100_000).then_some(())
        },
    )
    .await;
    publisher.stop().await;
    let _ = tokio::time::timeout(Duration::from_secs(10), receiver.wait()).await;
    let codecs = probe_codecs(&out);
    assert!(
        codecs.contains(&("video".into(), "h264".into())),
        "{codecs:?}"
    );
    let idle = wait_for("the target to go idle", Duration::from_secs(15), || async {
        let (_, list) = p.as_user(&user, Method::GET, &path).answer().await;
        (list["items"][0]["state"] == "idle").then_some(list)
    })
    .await;
    assert_eq!(idle["total"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_watch_page_plays_the_live_test_pattern() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    until_playlist(&text(&b, "hlsUrl")).await;
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(
            &p.url(&format!("/watch/{}", text(&b, "shortId"))),
            1280,
            800,
        )
        .await;
    let first = browser
        .wait_for(
            &tab,
            "(function(){var v=document.getElementById('video');return v && v.currentTime > 1 ? v.currentTime : null;})()",
            Duration::from_secs(30),
        )
        .await
        .as_f64()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = browser
        .eval(&tab, "document.getElementById('video').currentTime")
        .await
        .as_f64()
        .unwrap();
    assert!(
        later > first + 1.0,
        "playback advances: {first} then {later}"
    );
    let poster = browser
        .eval(
            &tab,
            "document.getElementById('video').getAttribute('poster')",
        )
        .await;
    assert_eq!(
        poster, b["thumbnailUrl"],
        "the live thumbnail is the poster"
    );
    browser.assert_clean(&tab).await;
    browser.close().await;
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broadcast_published_in_the_sfu_room_is_fed_into_the_ingest() {
    use livekit_egress::{SFU_KEY, SFU_SECRET, StandInEgress};
    let (egress, egress_addr) = StandInEgress::start().await;
    let egress_url = format!("http://{egress_addr}");
    let p = Platform::start_with_media(&[
        ("sfu_api_key", SFU_KEY),
        ("sfu_api_secret", SFU_SECRET),
        ("sfu_api_url", &egress_url),
        ("sfu_server_url", "ws://127.0.0.1:7880"),
    ])
    .await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    // Published into the room: the SDK says so.
    let status = p
        .as_user(&user, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .json(&json!({"status": "active"}))
        .status()
        .await;
    assert_eq!(status, 200);
    assert_eq!(egress.refused(), Vec::<String>::new());
    let calls = egress.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].method, "StartRoomCompositeEgress");
    let request: livekit_protocol::RoomCompositeEgressRequest =
        serde_json::from_value(calls[0].body.clone()).unwrap();
    assert_eq!(request.room_name, text(&b, "streamId"));
    assert!(
        request
            .custom_base_url
            .contains(&format!("/streams/{}/record", text(&b, "streamId")))
    );
    assert_eq!(request.stream_outputs.len(), 1);
    assert_eq!(
        request.stream_outputs[0].protocol,
        livekit_protocol::StreamProtocol::Rtmp as i32
    );
    assert_eq!(request.stream_outputs[0].urls, [text(&b, "rtmpUrl")]);
    // The egress publishes with the broadcast's own key: the ingest accepts it and the
    // broadcast keeps going (here ffmpeg stands in for the egress's encoder).
    let feed = Publisher::start(&text(&b, "rtmpUrl"));
    let live = until_ingest(&p, &user, &id, "live").await;
    assert_eq!(live["status"], "active");
    // Ended: the egress is stopped.
    let status = p
        .as_user(&user, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .json(&json!({"status": "completed"}))
        .status()
        .await;
    assert_eq!(status, 200);
    let calls = egress.calls();
    assert_eq!(calls.last().unwrap().method, "StopEgress", "{calls:?}");
    feed.stop().await;
}
