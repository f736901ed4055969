//! Clips end to end: edgehost runs the real media server beside the app, a real `ffmpeg`
//! publishes a test pattern, and a clip asked for while the show is live ("clip that") and
//! one asked for after it ended play as HLS within seconds (the replay's own segments) and
//! download as an MP4 within a minute, signed; the tenant hears of each; the clip page
//! shows a public broadcast's clip with its link-preview tags, and no private one's.

use crate::media::{create, get, platform, setup, text, until_ingest};
use crate::support::browser::Browser;
use platform_tests::media::{
    Publisher, durations, resolve, test_clip_720p, tool, variants, wait_for,
};
use platform_tests::webhook_receiver::Receiver;
use platform_tests::{Exchange, Method, Platform, User};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn fetch(url: &str) -> (u16, Vec<u8>, String) {
    let answer = reqwest::get(url).await.expect("the media server answers");
    let status = answer.status().as_u16();
    let kind = answer
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    (status, answer.bytes().await.expect("body").to_vec(), kind)
}

async fn fetch_text(url: &str) -> (u16, String) {
    let (status, body, _) = fetch(url).await;
    (status, String::from_utf8_lossy(&body).to_string())
}

/// Lets the show go on for `seconds`, the owner looking at it every second (so that no
/// pooled connection sits idle up to the platform's 10 s keep-alive, and is reset as it
/// is used again).
async fn on_air(p: &Platform, user: &User, id: &str, seconds: u64) {
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        assert_eq!(get(p, user, id).await["status"], "active");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Clips the broadcast as `user`: (status, answer).
pub(crate) async fn clip(p: &Platform, user: &User, id: &str, body: &Value) -> (u16, Value) {
    let (status, answer) = p
        .as_user(user, Method::POST, &format!("/api/broadcasts/{id}/clips"))
        .send_json(body)
        .await;
    (status.as_u16(), answer)
}

async fn get_clip(p: &Platform, user: &User, id: &str) -> Value {
    let (status, c) = p
        .as_user(user, Method::GET, &format!("/api/clips/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200, "{c}");
    c
}

/// Waits until the clip's `field` is set (`hlsUrl`, `mp4Url`); answers the clip and how
/// long it took from `since`.
pub(crate) async fn until_clip(
    p: &Platform,
    user: &User,
    id: &str,
    field: &str,
    limit: Duration,
    since: Instant,
) -> (Value, Duration) {
    let c = wait_for(&format!("the clip's {field}"), limit, || async {
        let c = get_clip(p, user, id).await;
        assert_ne!(c["state"], "failed", "{c}");
        c[field].is_string().then_some(c)
    })
    .await;
    (c, since.elapsed())
}

/// The clip once its MP4 is ready (within a minute), and how long that took.
pub(crate) async fn until_mp4(p: &Platform, user: &User, id: &str) -> (Value, Duration) {
    until_clip(
        p,
        user,
        id,
        "mp4Url",
        Duration::from_secs(60),
        Instant::now(),
    )
    .await
}

/// The clip's HLS: every rendition's playlist a VOD over the replay's segments, within one
/// segment of `seconds` long; answers the source playlist's length.
async fn check_hls(hls_url: &str, seconds: f64) -> f64 {
    let (status, master) = fetch_text(hls_url).await;
    assert_eq!(status, 200, "{hls_url}: {master}");
    let renditions = variants(&master);
    assert!(!renditions.is_empty(), "{master}");
    let mut source = None;
    for v in renditions {
        let url = resolve(hls_url, &v.uri);
        let (status, playlist) = fetch_text(&url).await;
        assert_eq!(status, 200, "{url}: {playlist}");
        assert!(playlist.contains("#EXT-X-PLAYLIST-TYPE:VOD"), "{playlist}");
        assert!(
            playlist.trim_end().ends_with("#EXT-X-ENDLIST"),
            "{playlist}"
        );
        let segments = durations(&playlist);
        let longest = segments.iter().map(|(d, _)| *d).fold(0.0, f64::max);
        let length: f64 = segments.iter().map(|(d, _)| d).sum();
        assert!(
            (length - seconds).abs() <= longest + 0.01,
            "{url}: {length} s for {seconds} s (segments up to {longest} s)"
        );
        for (_, segment) in &segments {
            // The replay's own segment, signed by nginx's rewrite of the playlist.
            assert!(segment.starts_with("../../v"), "{segment}");
            assert!(segment.contains("sig="), "{segment}");
            let (status, bytes, _) = fetch(&resolve(&url, segment)).await;
            assert_eq!(status, 200, "{segment}");
            assert_eq!(bytes.first(), Some(&0x47), "MPEG-TS: {segment}");
        }
        source.get_or_insert(length);
    }
    source.unwrap()
}

/// The MP4's length as ffprobe reads it: its video's (a stream copy started between
/// keyframes would have seconds without video in a file as long as its audio).
async fn check_mp4(mp4_url: &str) -> f64 {
    let (status, bytes, kind) = fetch(mp4_url).await;
    assert_eq!(status, 200, "{mp4_url}");
    assert_eq!(kind, "video/mp4");
    let file = std::env::temp_dir().join(format!("clip-{}.mp4", domain::ids::random_hex(6)));
    std::fs::write(&file, &bytes).unwrap();
    let probe = |what: &[&str]| {
        let output = std::process::Command::new(tool("ffprobe"))
            .args(["-v", "error"])
            .args(what)
            .args(["-of", "csv=p=0"])
            .arg(&file)
            .output()
            .expect("ffprobe runs");
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse::<f64>()
            .expect("a duration")
    };
    let whole = probe(&["-show_entries", "format=duration"]);
    let video = probe(&["-select_streams", "v:0", "-show_entries", "stream=duration"]);
    let codecs = platform_tests::media::probe_codecs(&file);
    std::fs::remove_file(&file).ok();
    assert!(
        codecs.contains(&("video".into(), "h264".into())),
        "{codecs:?}"
    );
    assert!((whole - video).abs() < 0.2, "video {video} s of {whole} s");
    video
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clip_plays_as_hls_within_seconds_and_downloads_as_an_mp4_live_and_after_the_end() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let receiver = Receiver::start().await;
    let (status, endpoint) = p
        .as_server(
            &tenant,
            Method::POST,
            "/api/v1/webhooks",
            Some(&json!({"url": receiver.url("/hooks"), "events": ["clip.ready"]})),
        )
        .answer()
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    until_ingest(&p, &user, &id, "live").await;
    on_air(&p, &user, &id, 14).await;

    // "Clip that": the last 8 seconds, while live.
    let asked = Instant::now();
    let (status, live_clip) = clip(
        &p,
        &user,
        &id,
        &json!({"lastSeconds": 8, "title": "<b>That</b> & \"more\""}),
    )
    .await;
    assert_eq!(status, 201, "{live_clip}");
    assert_eq!(live_clip["state"], "processing");
    assert_eq!(live_clip["duration"], 8);
    assert_eq!(live_clip["createdBy"], user.id.as_str());
    let clip_id = text(&live_clip, "id");
    let (c, hls_after) =
        until_clip(&p, &user, &clip_id, "hlsUrl", Duration::from_secs(5), asked).await;
    println!("live clip: HLS ready {hls_after:?} after the request");
    let start = c["startOffset"].as_f64().expect("placed");
    assert!(start >= 4.0, "the last 8 s of at least 12 s: {start}");
    let hls_url = text(&c, "hlsUrl");
    let length = check_hls(&hls_url, 8.0).await;
    println!("live clip: HLS {length:.3} s for 8 s from {start:.3} s");
    // Unsigned, or signed for another stream: refused.
    let bare = hls_url.split('?').next().unwrap();
    assert_eq!(fetch(bare).await.0, 403);
    let (c, mp4_after) = until_clip(
        &p,
        &user,
        &clip_id,
        "mp4Url",
        Duration::from_secs(60),
        asked,
    )
    .await;
    assert_eq!(c["state"], "ready");
    let mp4_live = check_mp4(&text(&c, "mp4Url")).await;
    println!("live clip: MP4 ready {mp4_after:?} after the request, {mp4_live:.3} s for 8 s");
    assert!((mp4_live - 8.0).abs() <= 2.0, "the MP4 is {mp4_live} s");
    let (status, jpeg, kind) = fetch(&text(&c, "thumbnailUrl")).await;
    assert_eq!((status, kind.as_str()), (200, "image/jpeg"));
    assert_eq!(&jpeg[..3], &[0xFF, 0xD8, 0xFF]);
    assert_eq!(
        fetch(text(&c, "mp4Url").split('?').next().unwrap()).await.0,
        403
    );

    // After the end: a range of the replay.
    publisher.stop().await;
    let (status, _) = p
        .as_user(&user, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    let b = wait_for("the replay", Duration::from_secs(10), || async {
        let b = get(&p, &user, &id).await;
        (b["replay"]["state"] == "ready").then_some(b)
    })
    .await;
    let kept = b["replay"]["duration"].as_f64().unwrap();
    let asked = Instant::now();
    let (status, ended_clip) = clip(
        &p,
        &user,
        &id,
        &json!({"startOffset": 3, "duration": 6, "title": "The middle"}),
    )
    .await;
    assert_eq!(status, 201, "{ended_clip}");
    assert_eq!(ended_clip["startOffset"], 3.0);
    let ended_id = text(&ended_clip, "id");
    let (c, hls_after) = until_clip(
        &p,
        &user,
        &ended_id,
        "hlsUrl",
        Duration::from_secs(5),
        asked,
    )
    .await;
    let length = check_hls(&text(&c, "hlsUrl"), 6.0).await;
    let (c, mp4_after) = until_clip(
        &p,
        &user,
        &ended_id,
        "mp4Url",
        Duration::from_secs(60),
        asked,
    )
    .await;
    let mp4 = check_mp4(&text(&c, "mp4Url")).await;
    println!(
        "replay clip: HLS {hls_after:?} ({length:.3} s), MP4 {mp4_after:?} ({mp4:.3} s) for 6 s"
    );
    assert!((mp4 - 6.0).abs() <= 2.0, "the MP4 is {mp4} s");
    // A range past the end of the replay.
    let (status, body) = clip(
        &p,
        &user,
        &id,
        &json!({"startOffset": kept.ceil() as i64, "duration": 5}),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("out_of_range")),
        "{body}"
    );

    // The broadcast's clips, newest first.
    let (status, list) = p
        .as_user(&user, Method::GET, &format!("/api/broadcasts/{id}/clips"))
        .answer()
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["total"], 2);
    assert_eq!(list["items"][0]["id"], ended_id.as_str());
    assert_eq!(list["items"][1]["id"], clip_id.as_str());

    // The tenant heard of both.
    let events = wait_for("two clip.ready events", Duration::from_secs(15), || async {
        p.run_job("deliver-webhooks").await;
        let events: Vec<Value> = receiver
            .received()
            .iter()
            .map(|r| r.json())
            .filter(|e| e["type"] == "clip.ready")
            .collect();
        (events.len() >= 2).then_some(events)
    })
    .await;
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| e["data"]["id"].as_str())
        .collect();
    assert!(
        ids.contains(&clip_id.as_str()) && ids.contains(&ended_id.as_str()),
        "{ids:?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e["data"]["state"] == "ready" && e["data"]["mp4Url"].is_string())
    );

    // The clip page: the player and the link-preview tags, the title escaped.
    let r = p
        .request(Method::GET, &format!("/clips/{clip_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    let html = r.text().await.unwrap();
    for tag in [
        "og:type\" content=\"video.other\"",
        "og:title",
        "og:video\"",
        "og:image\"",
        "twitter:card",
    ] {
        assert!(html.contains(tag), "{tag} in {html}");
    }
    assert!(!html.contains("<b>That</b>"), "{html}");
    assert!(
        html.contains("&lt;b&gt;That&lt;&#x2f;b&gt; &amp; &quot;more&quot;"),
        "{html}"
    );
    assert!(html.contains("<live-player"), "{html}");
    assert!(html.contains("clip.mp4?exp="), "{html}");
    assert!(!csp.contains("'unsafe-inline'"), "{csp}");
    // It plays in a browser, under the page's policy, as long as the MP4 is.
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(&p.url(&format!("/clips/{clip_id}")), 1280, 800)
        .await;
    let played = browser
        .wait_for(
            &tab,
            "(function(){var v=document.getElementById('player').video;\
             if (v && v.paused) { v.muted = true; v.play().catch(function(){}); }\
             return v && isFinite(v.duration) && v.currentTime > 0.5 ? v.duration : null;})()",
            Duration::from_secs(30),
        )
        .await
        .as_f64()
        .unwrap();
    assert!((played - mp4_live).abs() < 0.5, "the page plays {played} s");
    browser.assert_clean(&tab).await;
    browser.close().await;

    // The replay deleted: the clip's HLS goes with it, its MP4 stays.
    let (status, _) = p
        .as_user(
            &user,
            Method::DELETE,
            &format!("/api/broadcasts/{id}/replay"),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    let c = get_clip(&p, &user, &clip_id).await;
    assert!(c["hlsUrl"].is_null(), "{c}");
    let mp4_url = text(&c, "mp4Url");
    let stream = text(&b, "streamId");
    let dir = p.media().work_dir().join("media/replays").join(&stream);
    wait_for(
        "the replay's media to be deleted",
        Duration::from_secs(15),
        || async { (!dir.exists()).then_some(()) },
    )
    .await;
    assert_eq!(fetch(&mp4_url).await.0, 200, "the MP4 outlives the replay");

    // The clip deleted: gone, and its media with it.
    let (status, _) = p
        .as_user(&user, Method::DELETE, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, _) = p
        .as_user(&user, Method::GET, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert_eq!(status, 404);
    wait_for(
        "the clip's MP4 to be deleted",
        Duration::from_secs(10),
        || async { (fetch(&mp4_url).await.0 == 404).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_broadcasts_clip_has_no_page_and_plays_only_signed() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let b = create(&p, &user, "private").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    on_air(&p, &user, &id, 10).await;
    // The tenant's server clips it.
    let (status, c) = p
        .as_server(
            &tenant,
            Method::POST,
            &format!("/api/broadcasts/{id}/clips"),
            Some(&json!({"lastSeconds": 5})),
        )
        .answer()
        .await;
    assert_eq!(status, 201, "{c}");
    assert!(c["createdBy"].is_null());
    let clip_id = text(&c, "id");
    // Eight more at once: each plays as HLS within seconds, while their MP4s queue.
    let asked = Instant::now();
    let more = futures_util::future::join_all((5..13).map(|seconds| {
        p.as_server(
            &tenant,
            Method::POST,
            &format!("/api/broadcasts/{id}/clips"),
            Some(&json!({"lastSeconds": seconds.min(6)})),
        )
        .answer()
    }))
    .await;
    let mut slowest_hls = Duration::ZERO;
    let mut ids = Vec::new();
    for (status, c) in &more {
        assert_eq!(*status, 201, "{c}");
        ids.push(text(c, "id"));
    }
    for more_id in &ids {
        let (_, took) =
            until_clip(&p, &user, more_id, "hlsUrl", Duration::from_secs(5), asked).await;
        slowest_hls = slowest_hls.max(took);
    }
    let mut slowest_mp4 = Duration::ZERO;
    for more_id in &ids {
        let (_, took) =
            until_clip(&p, &user, more_id, "mp4Url", Duration::from_secs(60), asked).await;
        slowest_mp4 = slowest_mp4.max(took);
    }
    println!("eight clips at once: the last HLS {slowest_hls:?}, the last MP4 {slowest_mp4:?}");
    let (c, _) = until_mp4(&p, &user, &clip_id).await;
    publisher.stop().await;
    let mp4 = check_mp4(&text(&c, "mp4Url")).await;
    assert!((mp4 - 5.0).abs() <= 2.0, "{mp4}");
    // No page, no tags: nothing of it shows without the API's signed addresses.
    let r = p
        .request(Method::GET, &format!("/clips/{clip_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let html = r.text().await.unwrap();
    assert!(!html.contains("og:") && !html.contains(&clip_id), "{html}");
    // Another user of the tenant, who may not watch it, does not see the clip.
    let eve = p.signup(&tenant, "eve").await;
    let (status, _) = p
        .as_user(&eve, Method::GET, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert_eq!(status, 404);
    let (status, _) = p
        .as_user(&eve, Method::GET, &format!("/api/broadcasts/{id}/clips"))
        .answer()
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_users_replays_and_clips_leave_the_media_store() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    on_air(&p, &user, &id, 8).await;
    let (status, c) = clip(&p, &user, &id, &json!({"lastSeconds": 5})).await;
    assert_eq!(status, 201, "{c}");
    let clip_id = text(&c, "id");
    let (c, _) = until_mp4(&p, &user, &clip_id).await;
    publisher.stop().await;
    crate::replays::end(&p, &user, &id).await;
    crate::replays::until_replay_ready(&p, &user, &id, Duration::from_secs(20)).await;
    let media = p.media().work_dir().join("media");
    let (replay_dir, clip_dir) = (
        media.join("replays").join(&stream),
        media.join("clips").join(&clip_id),
    );
    assert!(replay_dir.join("index.m3u8").is_file());
    assert!(clip_dir.join("clip.mp4").is_file());
    let mp4_url = text(&c, "mp4Url");
    assert_eq!(fetch(&mp4_url).await.0, 200);

    // The user leaves: their broadcast's replay and its clip go from the media store.
    let (status, body) = p
        .as_user(&user, Method::DELETE, "/api/users/profile")
        .answer()
        .await;
    assert!(status.is_success(), "{status} {body}");
    wait_for(
        "the replay and the clip to leave the store",
        Duration::from_secs(30),
        || async { (!replay_dir.exists() && !clip_dir.exists()).then_some(()) },
    )
    .await;
    // nginx looks at a file it has open again within a second (its open-file cache).
    wait_for("the MP4 to be gone", Duration::from_secs(5), || async {
        (fetch(&mp4_url).await.0 == 404).then_some(())
    })
    .await;
}
