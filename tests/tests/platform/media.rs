//! The media plane end to end: edgehost runs the real media server (nginx with its RTMP
//! module, driven by media-agent) beside the app, and real `ffmpeg` encoders publish a
//! test pattern to a broadcast's `rtmpUrl`. The platform decides who may publish; the
//! ingest drives the broadcast's status; HLS plays under the `streamId` (never the key),
//! signed for private broadcasts; health, thumbnails and restreams follow the stream.

use crate::support::browser;
use crate::support::livekit_egress;

use browser::Browser;
use platform_tests::media::{
    Publisher, durations, media_sequence, playlist_segments, probe_codecs, probe_size, resolve,
    test_clip_720p, tool, variants, wait_for,
};
use platform_tests::webhook_receiver::Receiver;
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A platform with its media server; a dropped publisher has `window` seconds to return.
pub(crate) async fn platform(window: u32) -> Platform {
    let window = window.to_string();
    Platform::start_with_media(&[
        ("webhook_allow_http", "true"),
        ("restream_allow_private", "true"),
        ("ingest_reconnect_window", &window),
    ])
    .await
}

pub(crate) async fn setup(p: &Platform) -> (Tenant, User) {
    let tenant = p.register_client("Media").await;
    let user = p.signup(&tenant, "caster").await;
    (tenant, user)
}

pub(crate) async fn create(p: &Platform, user: &User, visibility: &str) -> Value {
    let (status, b) = p
        .as_user(user, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Test pattern", "visibility": visibility}))
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

pub(crate) async fn get(p: &Platform, user: &User, id: &str) -> Value {
    let (status, b) = p
        .as_user(user, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

pub(crate) fn text(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
        .to_string()
}

/// Waits until the owner sees the broadcast's ingest in `state`; answers the broadcast.
pub(crate) async fn until_ingest(p: &Platform, user: &User, id: &str, state: &str) -> Value {
    wait_for(
        &format!("the ingest to be {state}"),
        Duration::from_secs(30),
        || async {
            let b = get(p, user, id).await;
            if b["ingest"]["state"] == "live" {
                // The publish and the move out of pending commit together.
                assert_ne!(b["status"], "pending", "{b}");
            }
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

/// Waits for the master playlist at `url` and its first rendition's media playlist to list
/// segments; answers the media playlist's address and text.
async fn until_playlist(url: &str) -> (String, String) {
    wait_for(
        "a playable HLS playlist",
        Duration::from_secs(20),
        || async {
            let (status, body, _) = fetch(url).await;
            let master = String::from_utf8_lossy(&body).to_string();
            let first = variants(&master).into_iter().next();
            if status != 200 || first.is_none() {
                return None;
            }
            let media_url = resolve(url, &first?.uri);
            let (status, body, _) = fetch(&media_url).await;
            let text = String::from_utf8_lossy(&body).to_string();
            (status == 200 && !playlist_segments(&text).is_empty()).then_some((media_url, text))
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
    let (media_url, playlist) = until_playlist(&hls_url).await;
    println!("first playable playlist after {:?}", started.elapsed());
    assert!(
        !playlist.contains(&key),
        "the key is never in a viewer's address"
    );
    // The segments decode as H.264 and AAC.
    let segment = playlist_segments(&playlist).pop().unwrap();
    let (status, bytes, kind) = fetch(&resolve(&media_url, &segment)).await;
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
    let (_, playlist) = until_playlist(&text(&b, "hlsUrl")).await;
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
    let at = domain::time::parse_rfc3339(refusal["at"].as_str().unwrap()).unwrap();
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
    let (media_url, playlist) = until_playlist(&text(&b, "hlsUrl")).await;
    let segment = playlist_segments(&playlist).pop().unwrap();
    let (status, _, kind) = fetch(&resolve(&media_url, &segment)).await;
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
    let (media_url, playlist) = until_playlist(&signed).await;
    // Each segment line carries the signature, so players keep it.
    let segments = playlist_segments(&playlist);
    assert!(segments.iter().all(|s| s.contains("sig=")), "{playlist}");
    let (status, _, _) = fetch(&resolve(&media_url, &segments[0])).await;
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
    let key = domain::media::playback_key(&p.variable("media_secret").unwrap());
    let expired = domain::media::signed_query(&key, &stream_id, p.now() - 5);
    assert_eq!(fetch(&format!("{bare}?{expired}")).await.0, 410, "expired");
    let forged = signed.replace("sig=", "sig=A");
    assert_eq!(fetch(&forged).await.0, 403, "forged");
    let other_stream = domain::media::signed_query(&key, "another-stream", p.now() + 60);
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

/// Fetches `url` (a playback address, signed or not) and answers its text, or panics.
async fn fetch_text(url: &str) -> String {
    let (status, body, _) = fetch(url).await;
    assert_eq!(status, 200, "{url}");
    String::from_utf8(body).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_720p_publish_plays_as_an_aligned_ladder_signed_on_every_rendition() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "private").await;
    let id = text(&b, "id");
    let signed = text(&b, "hlsUrl");
    let publisher = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    // The master playlist at the unchanged hlsUrl: the source and two smaller renditions.
    let master = wait_for("a master playlist", Duration::from_secs(30), || async {
        let (status, body, _) = fetch(&signed).await;
        let text = String::from_utf8_lossy(&body).to_string();
        (status == 200 && variants(&text).len() >= 3).then_some(text)
    })
    .await;
    let all = variants(&master);
    let sizes: Vec<_> = all.iter().map(|v| v.resolution().unwrap()).collect();
    assert_eq!(sizes, [(1280, 720), (854, 480), (640, 360)], "{master}");
    for v in &all {
        for attribute in ["BANDWIDTH", "AVERAGE-BANDWIDTH", "FRAME-RATE", "CODECS"] {
            assert!(v.attribute(attribute).is_some(), "{attribute} in {master}");
        }
        assert_eq!(v.attribute("FRAME-RATE"), Some("30.000"));
        let codecs = v.attribute("CODECS").unwrap();
        assert!(
            codecs.starts_with("avc1.") && codecs.ends_with(",mp4a.40.2"),
            "{codecs}"
        );
        // Each line carries the signature, so players keep it.
        assert!(v.uri.contains("sig="), "{master}");
    }
    // The smaller, the cheaper: a viewer on a narrow link has somewhere to go.
    let bandwidths: Vec<u64> = all.iter().map(|v| v.bandwidth().unwrap()).collect();
    assert!(
        bandwidths[1] < bandwidths[0] && bandwidths[2] < bandwidths[1],
        "{master}"
    );
    assert!(bandwidths[2] < 1_200_000, "{master}");

    // Every rendition: its media playlist and segments play signed only, decode at the
    // size the master declares, and is cut where the others are.
    let bare_master = signed.split('?').next().unwrap();
    let mut cuts = Vec::new();
    for (v, &(width, height)) in all.iter().zip(&sizes) {
        let media_url = resolve(&signed, &v.uri);
        let media = wait_for("three segments", Duration::from_secs(20), || async {
            let text = fetch_text(&media_url).await;
            (durations(&text).len() >= 3).then_some(text)
        })
        .await;
        let listed = durations(&media);
        assert!(
            listed.iter().all(|(_, uri)| uri.contains("sig=")),
            "{media}"
        );
        let stamped = media.matches("#EXT-X-PROGRAM-DATE-TIME:").count();
        assert_eq!(
            stamped,
            listed.len(),
            "the wall time of every segment: {media}"
        );
        let bare_media = resolve(bare_master, v.uri.split('?').next().unwrap());
        assert_eq!(fetch(&bare_media).await.0, 403, "{bare_media} unsigned");
        let (_, segment) = listed.last().unwrap();
        assert_eq!(
            fetch(&resolve(&media_url, segment.split('?').next().unwrap()))
                .await
                .0,
            403,
            "a segment unsigned"
        );
        let (status, bytes, kind) = fetch(&resolve(&media_url, segment)).await;
        assert_eq!((status, kind.as_str()), (200, "video/mp2t"));
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &bytes).unwrap();
        assert_eq!(probe_size(file.path()), (width, height), "{segment}");
        let codecs = probe_codecs(file.path());
        assert!(
            codecs.contains(&("audio".into(), "aac".into())),
            "{codecs:?}"
        );
        cuts.push((media_sequence(&media).unwrap(), listed));
    }
    // Aligned: the segment numbered n covers the same media in every rendition. (Fetched
    // one after the other, the playlists may have moved on by a segment.)
    let (source_sequence, source) = &cuts[0];
    for (sequence, listed) in &cuts[1..] {
        let offset = sequence - source_sequence;
        for (i, (duration, _)) in listed.iter().enumerate() {
            let Some((expected, _)) = source.get(i + offset as usize) else {
                continue;
            };
            assert!(
                (duration - expected).abs() < 0.1,
                "segment {} lasts {duration} s, {expected} s in the source: {cuts:?}",
                sequence + i as u64
            );
        }
        assert!(offset <= 2, "the renditions are numbered alike: {cuts:?}");
    }

    // The owner sees the ladder that is live, each rendition measured and keeping up.
    let ladder = wait_for("the live ladder", Duration::from_secs(20), || async {
        let b = get(&p, &user, &id).await;
        let ladder = b["ingest"]["ladder"].clone();
        (ladder["renditions"].as_array().map(Vec::len) == Some(3)).then_some(ladder)
    })
    .await;
    assert_eq!(ladder["mode"], "adaptive", "{ladder}");
    assert_eq!(ladder["latencyMode"], "standard", "{ladder}");
    assert!(
        ladder.get("reason").is_none() || ladder["reason"].is_null(),
        "{ladder}"
    );
    let renditions = ladder["renditions"].as_array().unwrap();
    assert_eq!(renditions[0]["name"], "source");
    assert_eq!(renditions[0]["transcoded"], false);
    assert_eq!(renditions[2]["name"], "360p");
    assert_eq!(renditions[2]["transcoded"], true);
    for r in renditions {
        assert!(r["bitrate"].as_i64() > Some(0), "{r}");
        assert_eq!(r["health"], "healthy", "{r}");
    }
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_that_asks_for_passthrough_gets_the_source_alone() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let settings = |body: Option<Value>| {
        let method = if body.is_some() {
            Method::PATCH
        } else {
            Method::GET
        };
        p.as_server(&tenant, method, "/api/v1/media-settings", body.as_ref())
    };
    let (status, answer) = settings(None).answer().await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"ladder": "adaptive"}));
    let (status, answer) = settings(Some(json!({"ladder": "hd"}))).answer().await;
    assert_eq!(status, 422, "{answer}");
    let (status, answer) = settings(Some(json!({"ladder": "passthrough"})))
        .answer()
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"ladder": "passthrough"}));

    // A broadcast that does not choose follows its tenant; one that does, itself.
    let b = create(&p, &user, "public").await;
    assert_eq!(b["ladder"], Value::Null);
    assert_eq!(b["latencyMode"], "standard");
    let (status, answer) = p
        .as_user(&user, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Bad", "latencyMode": "instant"}))
        .await;
    assert_eq!(status, 422, "{answer}");
    let other = create(&p, &user, "public").await;
    let (status, chosen) = p
        .as_user(
            &user,
            Method::PATCH,
            &format!("/api/broadcasts/{}", text(&other, "id")),
        )
        .send_json(&json!({"ladder": "adaptive", "latencyMode": "low"}))
        .await;
    assert_eq!(status, 200, "{chosen}");
    assert_eq!(
        (&chosen["ladder"], &chosen["latencyMode"]),
        (&json!("adaptive"), &json!("low"))
    );

    let id = text(&b, "id");
    let publisher = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    until_playlist(&text(&b, "hlsUrl")).await;
    let master = fetch_text(&text(&b, "hlsUrl")).await;
    assert_eq!(variants(&master).len(), 1, "{master}");
    let ladder = wait_for("the live ladder", Duration::from_secs(20), || async {
        let b = get(&p, &user, &id).await;
        let ladder = b["ingest"]["ladder"].clone();
        ladder["renditions"].is_array().then_some(ladder)
    })
    .await;
    assert_eq!(
        (&ladder["mode"], &ladder["reason"]),
        (&json!("passthrough"), &json!("requested")),
        "{ladder}"
    );
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_publish_beyond_the_cpu_budget_plays_as_passthrough_and_says_why() {
    let mut options = platform_tests::media::server_options();
    options.config.transcode_cores = 0.0;
    let p = Platform::start_media_with(options, &[]).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    let (_, media) = until_playlist(&text(&b, "hlsUrl")).await;
    assert!(!playlist_segments(&media).is_empty());
    // Accepted, never dropped: the source alone, and the owner told why.
    let master = fetch_text(&text(&b, "hlsUrl")).await;
    let all = variants(&master);
    assert_eq!(all.len(), 1, "{master}");
    assert_eq!(all[0].resolution(), Some((1280, 720)));
    let ladder = wait_for("the live ladder", Duration::from_secs(20), || async {
        let b = get(&p, &user, &id).await;
        let ladder = b["ingest"]["ladder"].clone();
        ladder["renditions"].is_array().then_some(ladder)
    })
    .await;
    assert_eq!(ladder["mode"], "passthrough", "{ladder}");
    assert_eq!(ladder["reason"], "capacity", "{ladder}");
    assert_eq!(ladder["renditions"].as_array().unwrap().len(), 1);
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
            "(function(){var v=document.getElementById('player').video;return v && v.currentTime > 1 ? v.currentTime : null;})()",
            Duration::from_secs(30),
        )
        .await
        .as_f64()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = browser
        .eval(&tab, "document.getElementById('player').video.currentTime")
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
            "document.getElementById('player').video.getAttribute('poster')",
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
async fn the_watch_page_steps_down_the_ladder_when_the_link_narrows_and_keeps_playing() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    wait_for("the ladder", Duration::from_secs(30), || async {
        let (_, body, _) = fetch(&text(&b, "hlsUrl")).await;
        (variants(&String::from_utf8_lossy(&body)).len() >= 3).then_some(())
    })
    .await;
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(
            &p.url(&format!("/watch/{}", text(&b, "shortId"))),
            1280,
            800,
        )
        .await;
    let playing = "(function(){var v=document.getElementById('player').video;return v && v.currentTime > 1 ? v.currentTime : null;})()";
    browser
        .wait_for(&tab, playing, Duration::from_secs(30))
        .await;
    // The quality menu: Auto, then every rendition, highest first; and the latency.
    let menu = browser
        .eval(
            &tab,
            "Array.from(document.getElementById('player').shadowRoot.querySelectorAll('select option')).map(function(o){return o.textContent;})",
        )
        .await;
    let menu: Vec<String> = serde_json::from_value(menu).unwrap();
    assert_eq!(menu.len(), 4, "{menu:?}");
    assert!(menu[0].starts_with("Auto"), "{menu:?}");
    assert!(
        menu[1].starts_with("720p") && menu[3].starts_with("360p"),
        "{menu:?}"
    );
    let behind = browser
        .wait_for(
            &tab,
            "(function(){var t=document.getElementById('player').shadowRoot.querySelector('[part=latency]').textContent;return /behind live/.test(t)?t:null;})()",
            Duration::from_secs(10),
        )
        .await;
    println!("the bar says {behind}");

    // On the open link, Auto climbs to a rendition above 1.2 Mbit/s.
    let wide = browser
        .wait_for(
            &tab,
            "(function(){var p=window.watchPage.player();return p && p.auto && p.bitrate > 1200000 ? p : null;})()",
            Duration::from_secs(30),
        )
        .await;
    println!("on the open link: {wide}");
    // The link narrows to 1.2 Mbit/s: within 20 s the player is on a rendition that fits,
    // and the picture keeps moving.
    let s = Some(tab.session.as_str());
    browser.call(s, "Network.enable", json!({})).await;
    browser
        .call(
            s,
            "Network.emulateNetworkConditions",
            json!({"offline": false, "latency": 40, "downloadThroughput": 1_200_000 / 8,
                   "uploadThroughput": 1_200_000 / 8}),
        )
        .await;
    let narrowed = Instant::now();
    let stepped = browser
        .wait_for(
            &tab,
            "(function(){var p=window.watchPage.player();return p && p.bitrate && p.bitrate < 1200000 ? p : null;})()",
            Duration::from_secs(20),
        )
        .await;
    println!("on {stepped} after {:?}", narrowed.elapsed());
    assert_eq!(stepped["auto"], true);
    let before = browser
        .eval(&tab, "document.getElementById('player').video.currentTime")
        .await
        .as_f64()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after = browser.eval(&tab, "window.watchPage.player()").await;
    let now = after["currentTime"].as_f64().unwrap();
    assert!(now > before + 3.0, "playback advances: {before} then {now}");
    assert!(after["bitrate"].as_f64().unwrap() < 1_200_000.0, "{after}");
    // A rendition chosen in the menu plays, and Auto hands the choice back.
    browser
        .eval(
            &tab,
            "(function(){var q=document.getElementById('player').shadowRoot.querySelector('select');q.value=q.options[q.options.length-1].value;q.dispatchEvent(new Event('change'));return q.value;})()",
        )
        .await;
    let pinned = browser
        .wait_for(
            &tab,
            "(function(){var p=window.watchPage.player();return p && !p.auto && p.height === 360 ? p : null;})()",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(pinned["height"], 360);
    browser.assert_clean(&tab).await;
    browser.close().await;
    publisher.stop().await;
}

/// An encoder whose picture carries its wall clock: 17 boxes, each white when its bit of
/// the current second (since the epoch, modulo 2^17) is set, drawn with `drawbox ...
/// enable=`; a keyframe a second.
fn clock_publisher(rtmp_url: &str) -> tokio::process::Child {
    const BITS: u32 = 17;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let offset = started % f64::from(1u32 << BITS);
    let boxes: Vec<String> = (0..BITS)
        .map(|bit| {
            format!(
                "drawbox=x={}:y=20:w=28:h=28:color=white:t=fill:enable='mod(floor((t+{offset:.3})/{}),2)'",
                8 + bit * 36,
                1u32 << bit
            )
        })
        .collect();
    tokio::process::Command::new(tool("ffmpeg"))
        .args(["-nostdin", "-hide_banner", "-loglevel", "error", "-re"])
        .args(["-f", "lavfi", "-i", "color=c=black:s=640x360:r=30"])
        .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100"])
        .args(["-vf", &boxes.join(",")])
        .args([
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-tune",
            "zerolatency",
        ])
        .args([
            "-pix_fmt",
            "yuv420p",
            "-g",
            "30",
            "-keyint_min",
            "30",
            "-sc_threshold",
            "0",
        ])
        .args([
            "-b:v", "600k", "-c:a", "aac", "-b:a", "64k", "-f", "flv", rtmp_url,
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("ffmpeg starts")
}

/// Reads the clock off the watch page's `<video>` (through a canvas) every 20 ms; each
/// time the second shown changes, the wall time since that second began is one sample of
/// glass to glass.
const READ_CLOCK: &str = r#"(function(){
  if (window.__clock) return true;
  var v = document.getElementById('player').video, c = document.createElement('canvas');
  c.width = 640; c.height = 360;
  var g = c.getContext('2d', {willReadFrequently: true});
  window.__clock = {samples: [], last: null};
  setInterval(function(){
    if (!v.videoWidth || v.paused) return;
    g.drawImage(v, 0, 0, 640, 360);
    var shown = 0;
    for (var bit = 0; bit < 17; bit++) {
      var px = g.getImageData(8 + bit * 36 + 14, 34, 1, 1).data;
      if (px[0] + px[1] + px[2] > 3 * 128) shown += Math.pow(2, bit);
    }
    var now = Date.now() / 1000, modulus = Math.pow(2, 17);
    var second = now - (now % modulus) + shown;
    if (second > now) second -= modulus;
    var clock = window.__clock;
    if (clock.last !== null && shown !== clock.last && now - second < 30) clock.samples.push(now - second);
    clock.last = shown;
  }, 20);
  return true;
})()"#;

/// The p-th percentile of `samples` (nearest rank).
fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Glass to glass of a broadcast in `latency_mode` on a media server run as `options`, read
/// off the watch page: (p50, p90, samples).
async fn glass_to_glass(
    options: edgehost::MediaServer,
    latency_mode: &str,
    seconds: u64,
) -> (f64, f64, usize) {
    let p = Platform::start_media_with(options, &[]).await;
    let (_, user) = setup(&p).await;
    let (status, b) = p
        .as_user(&user, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Clock", "visibility": "public", "latencyMode": latency_mode}))
        .await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(b["latencyMode"], latency_mode);
    let id = text(&b, "id");
    let mut encoder = clock_publisher(&text(&b, "rtmpUrl"));
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
    browser
        .wait_for(
            &tab,
            "(function(){var v=document.getElementById('player').video;return v && v.currentTime > 1;})()",
            Duration::from_secs(30),
        )
        .await;
    // The player settles at its distance from the edge first.
    tokio::time::sleep(Duration::from_secs(4)).await;
    browser.eval(&tab, READ_CLOCK).await;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let samples: Vec<f64> =
        serde_json::from_value(browser.eval(&tab, "window.__clock.samples").await).unwrap();
    browser.close().await;
    let _ = encoder.kill().await;
    assert!(
        samples.len() as u64 >= seconds / 2,
        "the clock is read off the picture: {samples:?}"
    );
    (
        percentile(&samples, 50.0),
        percentile(&samples, 90.0),
        samples.len(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_low_latency_broadcast_plays_within_four_seconds_glass_to_glass() {
    let options = platform_tests::media::server_options();
    let (p50, p90, n) = glass_to_glass(options, "low", 20).await;
    println!("glass to glass, low: p50 {p50:.2} s, p90 {p90:.2} s ({n} samples)");
    assert!(p50 <= 4.0, "p50 {p50:.2} s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standard_broadcast_plays_within_eight_seconds_glass_to_glass() {
    // Production's segments (2 s) and playlist (10 s), not the suite's shorter ones.
    let mut options = platform_tests::media::server_options();
    options.config.fragment_secs = 2;
    options.config.playlist_secs = 10;
    let (p50, p90, n) = glass_to_glass(options, "standard", 20).await;
    println!("glass to glass, standard: p50 {p50:.2} s, p90 {p90:.2} s ({n} samples)");
    assert!(p50 <= 8.0, "p50 {p50:.2} s");
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

/// The watch page's live state (`data-live` on `#watch`).
const LIVE_STATE: &str = "document.getElementById('watch').dataset.live || ''";

/// The encoder drops: within a few seconds the page says "Reconnecting…" instead of
/// showing the last frame as live; the encoder comes back inside the window and the page
/// plays again at the live edge by itself; the broadcast is ended and the page says so.
#[tokio::test(flavor = "multi_thread")]
async fn the_watch_page_says_reconnecting_when_the_encoder_drops_and_comes_back_live() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    let live = until_ingest(&p, &user, &id, "live").await;
    until_playlist(&text(&b, "hlsUrl")).await;
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(
            &p.url(&format!("/watch/{}", text(&b, "shortId"))),
            1280,
            800,
        )
        .await;
    let playing = "(function(){var v=document.getElementById('player').video;return v && v.currentTime > 1 && document.getElementById('watch').dataset.live === 'live' ? v.currentTime : null;})()";
    browser
        .wait_for(&tab, playing, Duration::from_secs(30))
        .await;

    publisher.stop().await;
    let stopped = Instant::now();
    browser
        .wait_for(
            &tab,
            &format!("({LIVE_STATE}) === 'reconnecting'"),
            Duration::from_secs(12),
        )
        .await;
    let noticed = stopped.elapsed();
    println!("reconnecting shown {noticed:?} after the encoder stopped");
    assert!(noticed < Duration::from_secs(10), "{noticed:?}");
    let shown = browser
        .eval(
            &tab,
            "(function(){var m=document.getElementById('player').shadowRoot.querySelector('[part=message]');return [document.getElementById('status').textContent, m.hidden, m.textContent];})()",
        )
        .await;
    assert_eq!(shown, json!(["Reconnecting…", false, "Reconnecting…"]));
    // It stays so while the source is away: no stale frame is called live again.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(browser.eval(&tab, LIVE_STATE).await, "reconnecting");

    let (again, _) = publish_again(&p, &user, &b, &live).await;
    let back = Instant::now();
    browser
        .wait_for(
            &tab,
            &format!("({LIVE_STATE}) === 'live'"),
            Duration::from_secs(30),
        )
        .await;
    let first = browser
        .wait_for(&tab, "(function(){var p=window.watchPage.player();return p && p.currentTime > 0 ? p : null;})()", Duration::from_secs(15))
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = browser.eval(&tab, "window.watchPage.player()").await;
    println!(
        "live again {:?} after the encoder came back: {later}",
        back.elapsed()
    );
    let (t0, t1) = (
        first["currentTime"].as_f64().unwrap(),
        later["currentTime"].as_f64().unwrap(),
    );
    assert!(t1 > t0 + 1.5, "playback advances: {t0} then {t1}");
    let behind = later["latency"].as_f64().expect("the latency is known");
    assert!(behind < 12.0, "at the live edge: {behind} s behind");
    let shown = browser
        .eval(
            &tab,
            "[document.getElementById('status').textContent, document.getElementById('player').shadowRoot.querySelector('[part=message]').hidden, document.getElementById('player-message').hidden]",
        )
        .await;
    assert_eq!(shown, json!(["Live", true, true]));

    // Ended by the API: the relay's status frame reaches the page.
    let (status, ended) = p
        .as_user(&user, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{ended}");
    browser
        .wait_for(
            &tab,
            &format!("({LIVE_STATE}) === 'ended' && document.getElementById('status').textContent === 'Ended'"),
            Duration::from_secs(10),
        )
        .await;
    browser.assert_clean(&tab).await;
    browser.close().await;
    again.stop().await;
}

/// A loopback HTTP server answering each path of `files` (path, content type, body), 404
/// otherwise: a tenant's own site.
async fn site(files: Vec<(&'static str, &'static str, Vec<u8>)>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let files = std::sync::Arc::new(files);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let files = files.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 2048];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).to_string();
                let path = text.split_whitespace().nth(1).unwrap_or("").to_string();
                let response = match files.iter().find(|(p, _, _)| *p == path) {
                    Some((_, kind, body)) => {
                        let mut out = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\
                             connection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        out.extend_from_slice(body);
                        out
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

/// The SDK's built `<live-player>` (`npm ci` in sdk/typescript builds it, as `scripts/test` does).
/// The platform's pages serve the same build without its comments (`static/live-player.js`).
fn built_player() -> Vec<u8> {
    let root = platform_tests::workspace_root();
    let read = |path: &str| {
        std::fs::read(root.join(path)).unwrap_or_else(|e| {
            panic!("{path}: {e}; build the SDK first (cd sdk/typescript && npm ci)")
        })
    };
    assert!(
        read("sdk/typescript/dist/asset/player/index.js") == read("static/live-player.js"),
        "static/live-player.js is not the SDK's build of the player"
    );
    read("sdk/typescript/dist/esm/player/index.js")
}

/// The events the page's `<live-player id=...>` elements dispatched, in order.
const PLAYER_EVENTS: &str = "JSON.stringify(window.events)";

/// The page's events of `id` named `kind`.
async fn player_events(
    browser: &mut Browser,
    tab: &browser::Tab,
    id: &str,
    kind: &str,
) -> Vec<Value> {
    let all: Vec<Value> =
        serde_json::from_str(browser.eval(tab, PLAYER_EVENTS).await.as_str().unwrap()).unwrap();
    all.into_iter()
        .filter(|e| e["id"] == id && e["type"] == kind)
        .collect()
}

/// `<live-player>` on a tenant's own page (another origin than the platform's): it plays the
/// live ladder, its quality menu pins a rendition, it says reconnecting and live again as
/// the encoder drops and returns, and ended once the source stays away past its window;
/// the page hears each step as DOM events. A stream that does not exist is an `error`.
#[tokio::test(flavor = "multi_thread")]
async fn the_live_player_component_plays_on_a_tenants_page_and_tells_it_what_happens() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let hls_url = text(&b, "hlsUrl");
    let publisher = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    let live = until_ingest(&p, &user, &id, "live").await;
    wait_for("the ladder", Duration::from_secs(30), || async {
        let (_, body, _) = fetch(&hls_url).await;
        (variants(&String::from_utf8_lossy(&body)).len() >= 3).then_some(())
    })
    .await;
    let missing = hls_url.replace(
        &text(&b, "streamId"),
        "00000000-0000-4000-8000-000000000000",
    );
    let html = format!(
        r#"<!doctype html><html><head><title>Shop</title>
<script src="/hls.js"></script><script type="module" src="/player.js"></script></head><body>
<script>window.events = [];
// Heard on their way down to the element (capture), from before any element exists.
['playing', 'waiting', 'qualitychange', 'statechange', 'ended', 'error'].forEach(function (t) {{
  document.addEventListener(t, function (e) {{
    if (e.target.localName === 'live-player')
      window.events.push({{ id: e.target.id, type: t, detail: e.detail, at: Date.now() }});
  }}, true);
}});</script>
<live-player id="show" src="{hls_url}" broadcast="{short}" base-url="{base}" autoplay muted controls
  style="width:640px"></live-player>
<live-player id="gone" src="{missing}" muted style="width:320px"></live-player>
</body></html>"#,
        short = text(&b, "shortId"),
        base = p.url(""),
    );
    let hls_js =
        std::fs::read(platform_tests::workspace_root().join("static/vendor/hls.light.min.js"))
            .unwrap();
    let origin = site(vec![
        ("/", "text/html; charset=utf-8", html.into_bytes()),
        ("/player.js", "text/javascript", built_player()),
        ("/hls.js", "text/javascript", hls_js),
    ])
    .await;
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser.open(&format!("{origin}/"), 1280, 800).await;
    let show = "document.getElementById('show')";
    browser
        .wait_for(
            &tab,
            &format!("{show}.state === 'live' && {show}.video.currentTime > 1"),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(
        player_events(&mut browser, &tab, "show", "statechange").await[0]["detail"],
        json!({"state": "live"})
    );
    let playing = player_events(&mut browser, &tab, "show", "playing").await;
    assert!(
        !playing.is_empty(),
        "no playing event among {}",
        browser.eval(&tab, PLAYER_EVENTS).await
    );
    // Its view beacon, sent from the tenant's origin, counts it.
    until_viewers(&p, &user, &id, 1, Duration::from_secs(15)).await;
    let first = player_events(&mut browser, &tab, "show", "qualitychange").await;
    assert!(first[0]["detail"]["rendition"].is_string(), "{first:?}");
    // The quality menu in the element: Auto, then the ladder, highest first.
    let menu = browser
        .eval(
            &tab,
            &format!("Array.from({show}.shadowRoot.querySelectorAll('select option')).map(function(o){{return o.textContent;}})"),
        )
        .await;
    let menu: Vec<String> = serde_json::from_value(menu).unwrap();
    assert_eq!(menu.len(), 4, "{menu:?}");
    assert!(
        menu[0].starts_with("Auto") && menu[1].starts_with("720p") && menu[3].starts_with("360p"),
        "{menu:?}"
    );
    browser
        .eval(
            &tab,
            &format!("(function(){{var q={show}.shadowRoot.querySelector('select');q.value=q.options[q.options.length-1].value;q.dispatchEvent(new Event('change'));}})()"),
        )
        .await;
    browser
        .wait_for(
            &tab,
            &format!("{show}.rendition === '360p' && JSON.parse({PLAYER_EVENTS}).some(function(e){{return e.id==='show' && e.type==='qualitychange' && e.detail.rendition==='360p';}})"),
            Duration::from_secs(15),
        )
        .await;
    // A stream that is not there: the page hears why.
    let gone = browser
        .wait_for(
            &tab,
            &format!("(function(){{var e=JSON.parse({PLAYER_EVENTS}).filter(function(e){{return e.id==='gone' && e.type==='error';}});return e.length ? e[0].detail : null;}})()"),
            Duration::from_secs(20),
        )
        .await;
    // The media server refuses a stream it does not serve (403).
    assert_eq!(gone, json!({"reason": "not_allowed"}));

    // The encoder drops: reconnecting within a few seconds, live again once it is back.
    publisher.stop().await;
    let stopped = Instant::now();
    browser
        .wait_for(
            &tab,
            &format!("{show}.state === 'reconnecting'"),
            Duration::from_secs(12),
        )
        .await;
    println!(
        "the component says reconnecting {:?} after the stop",
        stopped.elapsed()
    );
    assert!(stopped.elapsed() < Duration::from_secs(10));
    let again = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    publish_again_ingest(&p, &user, &id, &live).await;
    browser
        .wait_for(
            &tab,
            &format!("{show}.state === 'live'"),
            Duration::from_secs(30),
        )
        .await;
    let t0 = browser
        .wait_for(
            &tab,
            &format!("{show}.video.currentTime || null"),
            Duration::from_secs(15),
        )
        .await
        .as_f64()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t1 = browser
        .eval(&tab, &format!("{show}.video.currentTime"))
        .await
        .as_f64()
        .unwrap();
    assert!(t1 > t0 + 1.5, "playing again: {t0} then {t1}");

    // Away past the window: ended.
    browser
        .eval(
            &tab,
            &format!("{show}.setAttribute('reconnect-window', '3')"),
        )
        .await;
    again.stop().await;
    browser
        .wait_for(
            &tab,
            &format!("{show}.state === 'ended'"),
            Duration::from_secs(25),
        )
        .await;
    let states: Vec<Value> = player_events(&mut browser, &tab, "show", "statechange")
        .await
        .into_iter()
        .map(|e| e["detail"]["state"].clone())
        .collect();
    assert_eq!(
        states,
        vec![
            json!("live"),
            json!("reconnecting"),
            json!("live"),
            json!("reconnecting"),
            json!("ended")
        ]
    );
    assert_eq!(
        player_events(&mut browser, &tab, "show", "ended")
            .await
            .len(),
        1
    );
    browser.assert_clean(&tab).await;
    browser.close().await;
}

/// Waits for the broadcast's second publish to be live (the same broadcast going on).
async fn publish_again_ingest(p: &Platform, user: &User, id: &str, live: &Value) {
    let back = until_ingest(p, user, id, "live").await;
    assert_eq!(back["startedAt"], live["startedAt"]);
}

/// The owner's `viewerCount` of broadcast `id`.
async fn viewer_count(p: &Platform, user: &User, id: &str) -> i64 {
    get(p, user, id).await["viewerCount"].as_i64().unwrap_or(-1)
}

/// Waits until the broadcast's `viewerCount` is `n`; answers how long it took.
async fn until_viewers(p: &Platform, user: &User, id: &str, n: i64, limit: Duration) -> Duration {
    let from = Instant::now();
    wait_for(&format!("{n} viewers"), limit, || async {
        (viewer_count(p, user, id).await == n).then_some(())
    })
    .await;
    from.elapsed()
}

/// Two watch pages playing are two concurrent viewers (their view beacons); they leave
/// the count as soon as they go away (their `end` beacons), well before the 30 s a silent
/// view stays counted.
#[tokio::test(flavor = "multi_thread")]
async fn two_watch_pages_are_two_viewers_until_they_leave() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    until_playlist(&text(&b, "hlsUrl")).await;
    assert_eq!(viewer_count(&p, &user, &id).await, 0);
    // Two viewers, each in a browser of its own (a background tab's video is suspended).
    let watch = p.url(&format!("/watch/{}", text(&b, "shortId")));
    let playing = "(function(){var p=window.watchPage && window.watchPage.player();return p && p.currentTime > 1;})()";
    let mut viewers = Vec::new();
    for _ in 0..2 {
        let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
        let tab = browser.open(&watch, 960, 600).await;
        browser
            .wait_for(&tab, playing, Duration::from_secs(30))
            .await;
        viewers.push((browser, tab));
    }
    until_viewers(&p, &user, &id, 2, Duration::from_secs(15)).await;
    // The views report what played: a startup time, seconds played, the rendition; the
    // heartbeats carry it to the analytics.
    tokio::time::sleep(Duration::from_secs(11)).await;
    for (browser, tab) in &mut viewers {
        let report = browser.eval(tab, "window.watchPage.views()").await;
        assert!(report["startupMs"].as_i64().unwrap() > 0, "{report}");
        assert!(report["playedSeconds"].as_f64().unwrap() > 5.0, "{report}");
        assert_eq!(report["rendition"], "source", "{report}");
    }
    let (status, analytics) = p
        .as_user(
            &user,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{analytics}");
    let playback = &analytics["playback"];
    assert_eq!(playback["views"], 2, "{analytics}");
    assert!(
        playback["playedSeconds"].as_f64().unwrap() > 10.0,
        "{playback}"
    );
    assert!(
        playback["startupTimeP50Ms"].as_f64().unwrap() > 0.0,
        "{playback}"
    );
    assert_eq!(playback["viewsByRendition"]["source"], 2, "{playback}");
    // Both pages go away: their `end` beacons take them off the count at once.
    for (browser, tab) in &mut viewers {
        browser.assert_clean(tab).await;
        browser.navigate(tab, "about:blank").await;
    }
    let left = until_viewers(&p, &user, &id, 0, Duration::from_secs(12)).await;
    println!("no viewers {left:?} after the pages left");
    for (browser, _) in viewers {
        browser.close().await;
    }
    publisher.stop().await;
}

/// A viewer on a narrow link stalls; the stalls after the first frame reach the
/// broadcast's analytics through the page's heartbeats.
#[tokio::test(flavor = "multi_thread")]
async fn a_throttled_viewers_rebuffering_reaches_the_analytics() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    until_playlist(&text(&b, "hlsUrl")).await;
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(&p.url(&format!("/watch/{}", text(&b, "shortId"))), 960, 600)
        .await;
    let playing = "(function(){var p=window.watchPage && window.watchPage.player();return p && p.currentTime > 1;})()";
    browser
        .wait_for(&tab, playing, Duration::from_secs(30))
        .await;
    // The link narrows below the stream's bitrate (about 1 Mbit/s, the source alone).
    let s = Some(tab.session.as_str());
    browser.call(s, "Network.enable", json!({})).await;
    browser
        .call(
            s,
            "Network.emulateNetworkConditions",
            json!({"offline": false, "latency": 100, "downloadThroughput": 250_000 / 8,
                   "uploadThroughput": 250_000 / 8}),
        )
        .await;
    let stalled = browser
        .wait_for(
            &tab,
            "(function(){var r=window.watchPage.views();return r && r.rebufferCount > 0 && r.rebufferSeconds > 1 ? r : null;})()",
            Duration::from_secs(40),
        )
        .await;
    println!("the page stalled: {stalled}");
    let playback = wait_for(
        "the stalls in the analytics",
        Duration::from_secs(30),
        || async {
            let (status, analytics) = p
                .as_user(
                    &user,
                    Method::GET,
                    &format!("/api/broadcasts/{id}/analytics"),
                )
                .answer()
                .await;
            assert_eq!(status, 200, "{analytics}");
            let playback = analytics["playback"].clone();
            (playback["rebufferCount"].as_i64().unwrap_or(0) >= 1
                && playback["rebufferSeconds"].as_f64().unwrap_or(0.0) > 0.0)
                .then_some(playback)
        },
    )
    .await;
    println!("the analytics say {playback}");
    assert!(playback["rebufferPercentage"].as_f64().unwrap() > 0.0);
    browser.close().await;
    publisher.stop().await;
}
