//! Replays of RTMP broadcasts end to end: edgehost runs the real media server beside the
//! app, a real `ffmpeg` publishes a test pattern, and once the broadcast ends its replay
//! (every segment of every rendition, VOD playlists, a thumbnail) plays from the media
//! server, signed, and the tenant hears of it.

use crate::media::{create, get, platform, setup, text, until_ingest};
use crate::support::browser::Browser;
use platform_tests::media::{Publisher, durations, test_clip, test_clip_720p, variants, wait_for};
use platform_tests::webhook_receiver::Receiver;
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The broadcast as the tenant's server lists it.
async fn server_view(p: &Platform, tenant: &Tenant, id: &str) -> Value {
    let (status, list) = p
        .as_server(tenant, Method::GET, "/api/v1/sessions?limit=100", None)
        .answer()
        .await;
    assert_eq!(status, 200, "{list}");
    list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|b| b["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("{id} in {list}"))
}

/// GET: (status, body).
pub(crate) async fn fetch(url: &str) -> (u16, Vec<u8>) {
    let answer = reqwest::get(url).await.expect("the media server answers");
    let status = answer.status().as_u16();
    (status, answer.bytes().await.expect("body").to_vec())
}

pub(crate) async fn fetch_text(url: &str) -> (u16, String) {
    let (status, body) = fetch(url).await;
    (status, String::from_utf8_lossy(&body).to_string())
}

/// `uri` (relative, with its own query) against the playlist address `base`.
fn resolve(base: &str, uri: &str) -> String {
    platform_tests::media::resolve(base, uri)
}

/// Ends the broadcast as its owner does.
pub(crate) async fn end(p: &Platform, user: &User, id: &str) {
    let (status, body) = p
        .as_user(user, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{body}");
}

/// Waits until the broadcast's replay is `ready`; answers the view and how long it took.
pub(crate) async fn until_replay_ready(
    p: &Platform,
    user: &User,
    id: &str,
    limit: Duration,
) -> Value {
    wait_for("the replay to be ready", limit, || async {
        let b = get(p, user, id).await;
        assert_ne!(b["replay"]["state"], "failed", "{}", b["replay"]);
        (b["replay"]["state"] == "ready").then_some(b)
    })
    .await
}

/// The replay's master playlist and, per rendition, its media playlist's address and text.
pub(crate) async fn replay_playlists(hls_url: &str) -> (String, Vec<(String, String)>) {
    let (status, master) = fetch_text(hls_url).await;
    assert_eq!(status, 200, "{master}");
    let mut renditions = Vec::new();
    for v in variants(&master) {
        let url = resolve(hls_url, &v.uri);
        let (status, playlist) = fetch_text(&url).await;
        assert_eq!(status, 200, "{url}: {playlist}");
        renditions.push((url, playlist));
    }
    (master, renditions)
}

fn seconds(playlist: &str) -> f64 {
    durations(playlist).iter().map(|(d, _)| d).sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ended_broadcast_has_its_replay_within_ten_seconds_with_every_rendition() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let receiver = Receiver::start().await;
    let (status, endpoint) = p
        .as_server(
            &tenant,
            Method::POST,
            "/api/v1/webhooks",
            Some(&json!({"url": receiver.url("/hooks"), "events": ["broadcast.replay_ready"]})),
        )
        .answer()
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    assert!(b["replay"].is_null(), "no replay before the show: {b}");

    let publisher = Publisher::start_clip(&test_clip_720p(), &text(&b, "rtmpUrl"), 1.0);
    // What was published: from the platform's accepting it (as the owner sees it) to the
    // encoder's stop.
    until_ingest(&p, &user, &id, "live").await;
    let published = Instant::now();
    tokio::time::sleep(Duration::from_secs(12)).await;
    publisher.stop().await;
    let published = published.elapsed().as_secs_f64();
    // The owner ends the show; the replay is written from everything the media server kept.
    end(&p, &user, &id).await;
    let ended = Instant::now();
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(10)).await;
    let ready_after = ended.elapsed();
    println!("replay ready {ready_after:?} after the end");
    let replay = &b["replay"];
    assert_eq!(replay["source"], "ingest");
    let duration = replay["duration"].as_f64().unwrap();
    println!("published {published:.2} s, replay {duration:.2} s");

    assert!(
        (duration - published).abs() <= 2.0,
        "the replay is {duration} s of {published} s published"
    );

    // Every rendition of the ladder, each a VOD playlist that ends, as long as the replay.
    let hls_url = text(replay, "hlsUrl");
    assert!(hls_url.contains("/replay/index.m3u8?exp="), "{hls_url}");
    let (master, renditions) = replay_playlists(&hls_url).await;
    let sizes: Vec<_> = variants(&master)
        .iter()
        .map(|v| v.resolution().unwrap())
        .collect();
    assert_eq!(sizes, [(1280, 720), (854, 480), (640, 360)], "{master}");
    for (url, playlist) in &renditions {
        assert!(playlist.contains("#EXT-X-PLAYLIST-TYPE:VOD"), "{playlist}");
        assert!(
            playlist.trim_end().ends_with("#EXT-X-ENDLIST"),
            "{playlist}"
        );
        assert!(!playlist.contains("#EXT-X-DISCONTINUITY"), "{playlist}");
        let length = seconds(playlist);
        assert!((length - duration).abs() < 0.5, "{url}: {length} s");
        // The live window deleted its own segments long ago; the replay's are all there.
        for (_, segment) in durations(playlist) {
            let (status, bytes) = fetch(&resolve(url, &segment)).await;
            assert_eq!(status, 200, "{segment}");
            assert_eq!(bytes.first(), Some(&0x47), "MPEG-TS: {segment}");
        }
    }
    let thumbnail = text(replay, "thumbnailUrl");
    let (status, jpeg) = fetch(&thumbnail).await;
    assert_eq!(status, 200);
    assert_eq!(&jpeg[..3], &[0xFF, 0xD8, 0xFF], "a JPEG");

    // The tenant heard of it, with the replay in the broadcast.
    let event = wait_for(
        "the broadcast.replay_ready event",
        Duration::from_secs(15),
        || async {
            p.run_job("deliver-webhooks").await;
            receiver
                .received()
                .iter()
                .map(|r| r.json())
                .find(|e| e["type"] == "broadcast.replay_ready")
        },
    )
    .await;
    assert_eq!(event["data"]["id"], id.as_str());
    assert_eq!(event["data"]["replay"]["state"], "ready");

    // The watch page plays it from the start, as long as it is, and seeks.
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(
            &p.url(&format!("/watch/{}", text(&b, "shortId"))),
            1280,
            800,
        )
        .await;
    let length = browser
        .wait_for(
            &tab,
            "(function(){var v=document.getElementById('player').video;\
             return v && isFinite(v.duration) && v.duration > 0 && v.currentTime > 0.5 ? v.duration : null;})()",
            Duration::from_secs(30),
        )
        .await
        .as_f64()
        .unwrap();
    assert!((length - duration).abs() < 1.0, "the player's {length} s");
    let label = browser
        .eval(&tab, "document.querySelector('.badge').textContent")
        .await;
    assert_eq!(label, "Replay");
    let to = (duration * 0.75).floor();
    browser
        .eval(
            &tab,
            &format!("document.getElementById('player').video.currentTime = {to}"),
        )
        .await;
    let at = browser
        .wait_for(
            &tab,
            &format!(
                "(function(){{var v=document.getElementById('player').video;\
                 return v.currentTime > {to} + 0.5 ? v.currentTime : null;}})()"
            ),
            Duration::from_secs(15),
        )
        .await;
    println!("sought to {to} s, playing at {at}");
    browser.assert_clean(&tab).await;

    // The embed page starts the replay where `t` says.
    let start = (duration / 2.0).floor();
    let embed = browser
        .open(
            &p.url(&format!(
                "/embed/{}?autoplay=1&muted=1&t={start}",
                text(&b, "shortId")
            )),
            640,
            360,
        )
        .await;
    let first = browser
        .wait_for(
            &embed,
            "(function(){var v=document.getElementById('player').video;\
             return v && !v.paused && v.currentTime > 0 ? v.currentTime : null;})()",
            Duration::from_secs(30),
        )
        .await
        .as_f64()
        .unwrap();
    assert!(
        first >= start - 0.5 && first < start + 5.0,
        "the embed started at {first} s, asked {start} s"
    );
    browser.assert_clean(&embed).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drop_and_reconnect_within_the_window_is_one_replay_with_a_discontinuity() {
    let p = platform(30).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let mut published = 0.0;
    for _ in 0..2 {
        let publisher = Publisher::start_clip(&test_clip(), &text(&b, "rtmpUrl"), 1.0);
        until_ingest(&p, &user, &id, "live").await;
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(6)).await;
        publisher.stop().await;
        published += started.elapsed().as_secs_f64();
        let away = until_ingest(&p, &user, &id, "reconnecting").await;
        assert_eq!(away["status"], "active");
        assert!(away["replay"].is_null(), "no replay while it may go on");
    }
    end(&p, &user, &id).await;
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(10)).await;
    let duration = b["replay"]["duration"].as_f64().unwrap();
    println!("published {published:.2} s in two publishes, replay {duration:.2} s");
    let (_, renditions) = replay_playlists(&text(&b["replay"], "hlsUrl")).await;
    assert!(!renditions.is_empty());
    for (_, playlist) in &renditions {
        assert_eq!(
            playlist.matches("#EXT-X-DISCONTINUITY\n").count(),
            1,
            "one discontinuity, where the encoder came back: {playlist}"
        );
        assert!(playlist.trim_end().ends_with("#EXT-X-ENDLIST"));
    }
    // Each publish loses what it takes the media server to start reading it.
    assert!(
        (duration - published).abs() <= 3.0,
        "the replay is {duration} s of {published} s published"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_replay_plays_only_signed_and_a_deleted_one_is_gone() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let b = create(&p, &user, "private").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Ended while the encoder still publishes: the media server drops it at its next
    // update, and the replay follows.
    end(&p, &user, &id).await;
    let ended = Instant::now();
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(10)).await;
    println!(
        "replay ready {:?} after the end (encoder live)",
        ended.elapsed()
    );
    // The encoder was dropped when the show ended.
    publisher.stop().await;
    let signed = text(&b["replay"], "hlsUrl");
    let (status, _) = fetch_text(&signed).await;
    assert_eq!(status, 200);
    let (_, renditions) = replay_playlists(&signed).await;
    let (media_url, playlist) = &renditions[0];
    let segment = resolve(media_url, &durations(playlist)[0].1);
    assert_eq!(fetch(&segment).await.0, 200);
    // Without the signature, or with another stream's: refused.
    let bare = |url: &str| url.split('?').next().unwrap().to_string();
    for url in [&signed, media_url, &segment] {
        assert_eq!(fetch(&bare(url)).await.0, 403, "{url}");
    }
    let other = create(&p, &user, "private").await;
    let other_stream = text(&other, "streamId");
    let stream = text(&b, "streamId");
    let borrowed = text(&other, "hlsUrl").replace(&other_stream, &stream);
    let borrowed = borrowed.replace("/index.m3u8", "/replay/index.m3u8");
    assert_eq!(fetch(&borrowed).await.0, 403, "another stream's signature");

    // The tenant's retention: a replay ready from now on is kept a day.
    let (status, settings) = p
        .as_server(
            &tenant,
            Method::PUT,
            "/api/v1/replay-settings",
            Some(&json!({"enabled": true, "retentionDays": 1})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!(
        settings,
        json!({"enabled": true, "retentionDays": 1, "dvrWindowHours": 4, "viewerClips": false})
    );

    // The owner deletes the replay: it is offered no more, and its media goes.
    let (status, body) = p
        .as_user(
            &user,
            Method::DELETE,
            &format!("/api/broadcasts/{id}/replay"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(get(&p, &user, &id).await["replay"].is_null());
    wait_for(
        "the replay's media to be deleted",
        Duration::from_secs(15),
        || async { (fetch(&segment).await.0 == 404).then_some(()) },
    )
    .await;
    wait_for(
        "the master playlist to be gone",
        Duration::from_secs(3),
        || async { (fetch(&signed).await.0 == 404).then_some(()) },
    )
    .await;
    let dir = p.media().work_dir().join("media/replays").join(&stream);
    assert!(!dir.exists(), "{dir:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_retention_job_deletes_expired_replays_and_a_tenant_may_keep_none() {
    let p = platform(60).await;
    let (tenant, user) = setup(&p).await;
    let (status, settings) = p
        .as_server(
            &tenant,
            Method::PUT,
            "/api/v1/replay-settings",
            Some(&json!({"retentionDays": 2})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!(
        settings,
        json!({"enabled": true, "retentionDays": 2, "dvrWindowHours": 4, "viewerClips": false})
    );
    let b = create(&p, &user, "public").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    publisher.stop().await;
    end(&p, &user, &id).await;
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(10)).await;
    let expires = text(&b["replay"], "expiresAt");
    let hls_url = text(&b["replay"], "hlsUrl");
    assert_eq!(fetch(&hls_url).await.0, 200);
    let dir = p.media().work_dir().join("media/replays").join(&stream);
    assert!(dir.join("index.m3u8").is_file());

    // Not yet: a day later it is still there.
    p.advance_clock(Duration::from_secs(86_400));
    assert_eq!(p.run_job("expire-replays").await["done"], 0);
    // Two days and a minute later the job marks it, and the media server deletes it.
    p.advance_clock(Duration::from_secs(86_400 + 60));
    let report = p.run_job("expire-replays").await;
    assert_eq!(report["done"], 1, "{report} (expires {expires})");
    // (The user's token expired meanwhile: the tenant's server looks.)
    assert!(server_view(&p, &tenant, &id).await["replay"].is_null());
    wait_for(
        "the expired replay's media to be deleted",
        Duration::from_secs(15),
        || async { (!dir.exists()).then_some(()) },
    )
    .await;
    // nginx looks a file up again at most a second after it last did.
    wait_for("the replay to be gone", Duration::from_secs(3), || async {
        (fetch(&hls_url).await.0 == 404).then_some(())
    })
    .await;

    // A tenant that keeps no replays: the media server keeps nothing of its shows.
    let (status, _) = p
        .as_server(
            &tenant,
            Method::PUT,
            "/api/v1/replay-settings",
            Some(&json!({"enabled": false})),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    let user = p.signup(&tenant, "another").await;
    let b = create(&p, &user, "public").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    publisher.stop().await;
    end(&p, &user, &id).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(get(&p, &user, &id).await["replay"].is_null());
    let dir = p.media().work_dir().join("media/replays").join(&stream);
    assert!(!dir.exists(), "{dir:?}");
}

/// The segments a playlist lists, by name (without a signature's query).
fn segment_names(playlist: &str) -> Vec<String> {
    durations(playlist)
        .into_iter()
        .map(|(_, name)| name.split('?').next().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_broadcast_rewinds_to_its_start_signed_and_its_replay_follows() {
    let p = platform(30).await;
    let (tenant, user) = setup(&p).await;
    // The tenant's DVR window: 1 to 24 hours.
    for bad in [json!(0), json!(25), json!(-1), json!(2.5), json!("2")] {
        let (status, body) = p
            .as_server(
                &tenant,
                Method::PUT,
                "/api/v1/replay-settings",
                Some(&json!({"dvrWindowHours": bad})),
            )
            .answer()
            .await;
        assert_eq!(status, 422, "{bad}: {body}");
    }
    let (status, settings) = p
        .as_server(
            &tenant,
            Method::PUT,
            "/api/v1/replay-settings",
            Some(&json!({"dvrWindowHours": 2})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!(
        settings,
        json!({"enabled": true, "retentionDays": null, "dvrWindowHours": 2, "viewerClips": false})
    );
    let b = create(&p, &user, "private").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    assert!(b["dvr"].is_null(), "nothing to rewind before the show: {b}");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    // Longer than the live playlists' window (6 s): their first segments are gone from it.
    tokio::time::sleep(Duration::from_secs(14)).await;
    let b = wait_for(
        "the DVR to reach back 10 s",
        Duration::from_secs(10),
        || async {
            let b = get(&p, &user, &id).await;
            (b["dvr"]["availableSeconds"].as_f64().unwrap_or(0.0) >= 10.0).then_some(b)
        },
    )
    .await;
    let dvr = &b["dvr"];
    assert_eq!(dvr["windowSeconds"], 7200, "{dvr}");
    let available = dvr["availableSeconds"].as_f64().unwrap();
    assert!(available < 30.0, "{dvr}");
    assert!(b["replay"].is_null(), "no replay while live");
    let dvr_url = text(dvr, "hlsUrl");
    assert!(dvr_url.contains("/replay/dvr.m3u8?exp="), "{dvr_url}");

    // The DVR playlists list the show from its start, signed, while the live one moved on.
    let (master, renditions) = replay_playlists(&dvr_url).await;
    assert!(!renditions.is_empty(), "{master}");
    let (live_media, live_playlist) = {
        let live_url = text(&b, "hlsUrl");
        let (status, live_master) = fetch_text(&live_url).await;
        assert_eq!(status, 200, "{live_master}");
        let url = resolve(&live_url, &variants(&live_master)[0].uri);
        let (status, playlist) = fetch_text(&url).await;
        assert_eq!(status, 200);
        (url, playlist)
    };
    // The whole show fits the window: the DVR plays the EVENT playlists themselves.
    let (d0_url, d0) = &renditions[0];
    assert!(d0_url.contains("/replay/v0.m3u8?exp="), "{d0_url}");
    assert!(d0.contains("#EXT-X-PLAYLIST-TYPE:EVENT\n"), "{d0}");
    assert!(!d0.contains("#EXT-X-ENDLIST"), "still live: {d0}");
    assert!(d0.contains("#EXT-X-MEDIA-SEQUENCE:0\n"), "{d0}");
    // Players that take it get the (long) playlists compressed, the same text.
    let compressed = reqwest::Client::new()
        .get(d0_url)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(
        compressed
            .headers()
            .get("content-encoding")
            .map(|v| v.to_str().unwrap()),
        Some("gzip")
    );
    let compressed = compressed.bytes().await.unwrap();
    assert_eq!(&compressed[..2], &[0x1f, 0x8b]);
    let mut gunzip = std::process::Command::new("gzip")
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    gunzip.stdin.take().unwrap().write_all(&compressed).unwrap();
    let plain = String::from_utf8(gunzip.wait_with_output().unwrap().stdout).unwrap();
    assert_eq!(segment_names(&plain)[0], segment_names(d0)[0], "{plain}");
    let names = segment_names(d0);
    let first = &names[0];
    assert!(seconds(d0) >= 10.0, "{d0}");
    assert!(
        !segment_names(&live_playlist).contains(first),
        "the live window ({live_media}) no longer lists {first}: {live_playlist}"
    );
    let signed_first = &durations(d0)[0].1;
    assert!(
        signed_first.contains(".ts?exp="),
        "segment lines are signed: {d0}"
    );
    let start = resolve(d0_url, signed_first);
    let (status, bytes) = fetch(&start).await;
    assert_eq!(status, 200, "{start}");
    assert_eq!(bytes.first(), Some(&0x47), "MPEG-TS");
    // The kept playlists so far, in the store, as served.
    let event = std::fs::read_to_string(
        p.media()
            .work_dir()
            .join("media/replays")
            .join(&stream)
            .join("v0.m3u8"),
    )
    .unwrap();
    assert!(event.contains("#EXT-X-PLAYLIST-TYPE:EVENT"), "{event}");
    assert!(!event.contains("#EXT-X-ENDLIST"), "{event}");
    assert_eq!(&segment_names(&event)[0], first);

    // Unsigned, or with another stream's signature: refused.
    let bare = |url: &str| url.split('?').next().unwrap().to_string();
    for url in [&dvr_url, d0_url, &start] {
        assert_eq!(fetch(&bare(url)).await.0, 403, "{url}");
    }
    let other = create(&p, &user, "private").await;
    let other_stream = text(&other, "streamId");
    let borrowed = text(&other, "hlsUrl")
        .replace(&other_stream, &stream)
        .replace("/index.m3u8", "/replay/dvr.m3u8");
    assert_eq!(fetch(&borrowed).await.0, 403, "another stream's signature");

    // A viewer who may not see the private broadcast gets nothing of it, its DVR included.
    let stranger = p.signup(&tenant, "stranger").await;
    let (status, body) = p
        .as_user(&stranger, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert!(status == 403 || status == 404, "{status}: {body}");
    assert!(!body.to_string().contains("dvr.m3u8"), "{body}");

    // The end: the DVR goes, and the replay is as it always was.
    publisher.stop().await;
    end(&p, &user, &id).await;
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(10)).await;
    assert!(b["dvr"].is_null(), "{b}");
    // nginx looks a file up again at most a second after it last did: the EVENT playlist
    // read while live may be served that long.
    let hls_url = text(&b["replay"], "hlsUrl");
    let vod = wait_for("the VOD playlist", Duration::from_secs(3), || async {
        let (_, renditions) = replay_playlists(&hls_url).await;
        let (_, vod) = renditions.into_iter().next()?;
        vod.contains("#EXT-X-PLAYLIST-TYPE:VOD").then_some(vod)
    })
    .await;
    let vod = &vod;
    assert!(vod.trim_end().ends_with("#EXT-X-ENDLIST"), "{vod}");
    assert_eq!(&segment_names(vod)[0], first);
    assert!(segment_names(vod).len() >= names.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_live_listing_says_how_far_back_each_broadcast_goes() {
    let p = platform(30).await;
    let (tenant, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    let listed = wait_for("the listing's DVR", Duration::from_secs(20), || async {
        let (status, live) = p
            .as_client(&tenant, Method::GET, "/api/broadcasts/live")
            .answer()
            .await;
        assert_eq!(status, 200, "{live}");
        let item = live["items"]
            .as_array()?
            .iter()
            .find(|b| b["id"] == id.as_str())?
            .clone();
        (item["dvr"]["availableSeconds"].as_f64()? >= 4.0).then_some(item)
    })
    .await;
    // The default window, signed for anyone who may watch.
    assert_eq!(listed["dvr"]["windowSeconds"], 4 * 3600, "{listed}");
    let dvr_url = text(&listed["dvr"], "hlsUrl");
    assert_eq!(fetch(&dvr_url).await.0, 200, "{dvr_url}");
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_watch_page_rewinds_to_the_start_of_the_show_and_returns_live() {
    let p = platform(30).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let id = text(&b, "id");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    // Longer than the live playlists reach (6 s).
    tokio::time::sleep(Duration::from_secs(16)).await;
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(
            &p.url(&format!("/watch/{}", text(&b, "shortId"))),
            1280,
            800,
        )
        .await;
    let player = "document.getElementById('player')";
    browser
        .wait_for(
            &tab,
            &format!("{player}.state === 'live' && {player}.latency !== null"),
            Duration::from_secs(30),
        )
        .await;
    // A viewer who does not rewind plays the live playlist, as near the edge as ever.
    let live_latency = browser
        .eval(&tab, &format!("{player}.latency"))
        .await
        .as_f64()
        .unwrap();
    let source = browser
        .eval(&tab, &format!("{player}.getAttribute('src')"))
        .await;
    assert!(!source.as_str().unwrap().contains("/replay/"), "{source}");
    assert!(live_latency < 12.0, "live at {live_latency} s behind");
    let available = browser
        .wait_for(
            &tab,
            &format!(
                "(function(){{var p={player};var bar=p.shadowRoot.querySelector('[part=dvr]');\
                 return !bar.hidden && p.available() >= 14 ? p.available() : null;}})()"
            ),
            Duration::from_secs(10),
        )
        .await
        .as_f64()
        .unwrap();
    // The slider to its left end: the start of the show.
    browser
        .eval(
            &tab,
            &format!(
                "(function(){{var r={player}.shadowRoot.querySelector('[part=dvr-range]');\
                 r.value='0';r.dispatchEvent(new Event('change'));return true;}})()"
            ),
        )
        .await;
    let rewound = browser
        .wait_for(
            &tab,
            &format!(
                "(function(){{var p={player};var v=p.video;\
                 return p.rewound && !v.paused && v.currentTime > 0 && v.seekable.length \
                 && v.currentTime - v.seekable.start(0) < 4 && p.latency > {available} - 5 \
                 ? p.latency : null;}})()"
            ),
            Duration::from_secs(30),
        )
        .await
        .as_f64()
        .unwrap();
    println!("live {live_latency:.1} s behind; rewound to {rewound:.1} s behind of {available} s");
    let from_dvr = browser
        .eval(
            &tab,
            "performance.getEntriesByType('resource').some(function(e){return /\\/replay\\/dvr\\.m3u8\\?exp=/.test(e.name);})",
        )
        .await;
    assert_eq!(from_dvr, json!(true), "the DVR playlist played");
    // It plays on from there.
    let at = browser
        .eval(&tab, &format!("{player}.video.currentTime"))
        .await
        .as_f64()
        .unwrap();
    browser
        .wait_for(
            &tab,
            &format!("{player}.video.currentTime > {at} + 1.5"),
            Duration::from_secs(10),
        )
        .await;
    // LIVE, clicked: back to the live playlist at the edge.
    let button = browser
        .eval(
            &tab,
            &format!(
                "(function(){{var r={player}.shadowRoot.querySelector('[part=live-button]').getBoundingClientRect();\
                 return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)];}})()"
            ),
        )
        .await;
    let (x, y) = (
        button[0].as_u64().unwrap() as u32,
        button[1].as_u64().unwrap() as u32,
    );
    browser.click(&tab, x, y).await;
    let back = browser
        .wait_for(
            &tab,
            &format!(
                "(function(){{var p={player};\
                 return !p.rewound && p.state === 'live' && !p.video.paused && p.latency !== null \
                 && p.latency < 12 ? p.latency : null;}})()"
            ),
            Duration::from_secs(30),
        )
        .await;
    println!("back live at {back} s behind");
    browser.assert_clean(&tab).await;
    browser.close().await;
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_media_server_restarted_mid_show_continues_the_replay_from_its_stored_playlists() {
    let p = platform(60).await;
    let (_, user) = setup(&p).await;
    let b = create(&p, &user, "public").await;
    let (id, stream) = (text(&b, "id"), text(&b, "streamId"));
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(8)).await;
    publisher.stop().await;
    let mut published = started.elapsed().as_secs_f64();
    until_ingest(&p, &user, &id, "reconnecting").await;
    // What the first run kept, as it wrote it to the media store.
    let stored = |p: &Platform| {
        std::fs::read_to_string(
            p.media()
                .work_dir()
                .join("media/replays")
                .join(&stream)
                .join("v0.m3u8"),
        )
        .unwrap()
    };
    let before = stored(&p);
    assert!(before.contains("#EXT-X-PLAYLIST-TYPE:EVENT"), "{before}");
    let kept_before = segment_names(&before);
    assert!(!kept_before.is_empty());

    // The media server (and the platform) restart within the reconnect window; the
    // encoder comes back.
    let p = p.restart().await;
    let b = get(&p, &user, &id).await;
    assert_eq!(b["status"], "active", "{b}");
    let publisher = Publisher::start(&text(&b, "rtmpUrl"));
    until_ingest(&p, &user, &id, "live").await;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    publisher.stop().await;
    published += started.elapsed().as_secs_f64();
    end(&p, &user, &id).await;
    let b = until_replay_ready(&p, &user, &id, Duration::from_secs(15)).await;
    let duration = b["replay"]["duration"].as_f64().unwrap();
    println!("published {published:.2} s across a restart, replay {duration:.2} s");
    let (_, renditions) = replay_playlists(&text(&b["replay"], "hlsUrl")).await;
    let (_, vod) = &renditions[0];
    let names = segment_names(vod);
    // Everything the first run kept, then the second run after a discontinuity.
    assert_eq!(&names[..kept_before.len()], &kept_before[..], "{vod}");
    assert!(names.len() > kept_before.len(), "{vod}");
    assert!(vod.contains("#EXT-X-DISCONTINUITY\n"), "{vod}");
    assert!(
        (duration - published).abs() <= 4.0,
        "the replay is {duration} s of {published} s published"
    );
}
