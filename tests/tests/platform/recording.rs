//! Recording end to end: a stand-in LiveKit Egress server on loopback (a real HTTP server)
//! checks the Twirp path, the bearer token's grant and signature (LiveKit's own verifier)
//! and that each body parses as LiveKit's request type (`livekit-protocol`); signed egress
//! webhooks then drive the recording to `ready` (or `failed`, after one retry), and the
//! watch page replays it in headless Chromium from an HLS fixture served on loopback.

use crate::support::browser;
use crate::support::livekit_egress;

use base64::Engine;
use browser::Browser;
use bytes::Bytes;
use http_body_util::Full;
use livekit_api::access_token::AccessToken;
use livekit_egress::{SFU_KEY, SFU_SECRET, StandInEgress, serve};
use platform_tests::webhook_receiver::Receiver;
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::time::Duration;

/// One MPEG-1 Layer III frame of digital silence (128 kbit/s, 44.1 kHz, mono): a valid
/// header, zero side information and zero main data.
fn silent_mp3_frame() -> Vec<u8> {
    let mut frame = vec![0u8; 417];
    frame[..4].copy_from_slice(&[0xFF, 0xFB, 0x90, 0xC4]);
    frame
}

/// An HLS recording as the egress would leave it in the bucket: a VOD playlist of two
/// 2-second MP3 segments, served with CORS on loopback (the files' public base).
async fn hls_fixture() -> SocketAddr {
    let segment: Bytes = silent_mp3_frame().repeat(77).into();
    serve(move |req| {
        let segment = segment.clone();
        async move {
            let path = req.uri().path();
            let (status, kind, body) = if path.ends_with("/index.m3u8") {
                let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n\
                    #EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n\
                    #EXTINF:2.0,\nsegment_00000.mp3\n#EXTINF:2.0,\nsegment_00001.mp3\n#EXT-X-ENDLIST\n";
                (200, "application/vnd.apple.mpegurl", Bytes::from(playlist))
            } else if path.ends_with(".mp3") {
                (200, "audio/mpeg", segment)
            } else {
                (404, "text/plain", Bytes::from("no such file"))
            };
            hyper::Response::builder()
                .status(status)
                .header("content-type", kind)
                .header("access-control-allow-origin", "*")
                .body(Full::new(body))
                .unwrap()
        }
    })
    .await
}

/// A LiveKit webhook body signed as LiveKit signs them (JWT with the body's SHA-256),
/// sent to `POST /api/sfu/webhook`; `secret` None sends it unsigned.
async fn webhook(p: &Platform, body: &Value, secret: Option<&str>) -> (u16, Value) {
    let body = body.to_string();
    let mut request = p
        .request(Method::POST, "/api/sfu/webhook")
        .header("content-type", "application/webhook+json");
    if let Some(secret) = secret {
        let digest =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(body.as_bytes()));
        let jwt = AccessToken::with_api_key(SFU_KEY, secret)
            .with_sha256(&digest)
            .to_jwt()
            .unwrap();
        request = request.header("authorization", jwt);
    }
    let (status, answer) = request.body(body).answer().await;
    (status.as_u16(), answer)
}

/// An egress event as LiveKit sends it (protojson: camelCase, int64 as strings).
fn egress_event(id: &str, event: &str, info: Value) -> Value {
    json!({"id": id, "event": event, "egressInfo": info, "createdAt": "1700000000"})
}

fn platform_vars<'a>(
    egress: &'a str,
    sfu_ws: &'a str,
    public_base: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("sfu_api_key", SFU_KEY),
        ("sfu_api_secret", SFU_SECRET),
        ("sfu_api_url", egress),
        ("sfu_server_url", sfu_ws),
        ("recording_s3_bucket", "replays"),
        ("recording_s3_region", "auto"),
        ("recording_s3_endpoint", "https://s3.example.test"),
        ("recording_s3_access_key", "AKIDEXAMPLE"),
        ("recording_s3_secret", "s3-secret"),
        ("recording_public_base", public_base),
        ("webhook_allow_http", "true"),
    ]
}

/// A webhook receiver on loopback, subscribed by the tenant's server to `events`.
async fn subscribe(p: &Platform, t: &Tenant, events: &[&str]) -> Receiver {
    let receiver = Receiver::start().await;
    let (status, endpoint) = p
        .as_server(
            t,
            Method::POST,
            "/api/v1/webhooks",
            Some(&json!({"url": receiver.url("/hooks"), "events": events})),
        )
        .answer()
        .await;
    assert_eq!(status.as_u16(), 201, "{endpoint}");
    receiver
}

async fn call(p: &Platform, u: &User, method: Method, path: &str, body: Value) -> (u16, Value) {
    let builder = p.as_user(u, method, path);
    let (status, body) = if body.is_null() {
        builder.answer().await
    } else {
        builder.send_json(&body).await
    };
    (status.as_u16(), body)
}

async fn recordings(p: &Platform, u: &User, id: &str) -> Vec<Value> {
    let (status, body) = call(
        p,
        u,
        Method::GET,
        &format!("/api/broadcasts/{id}/recordings"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["items"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_broadcast_is_recorded_and_replayed() {
    let (egress, egress_addr) = StandInEgress::start().await;
    let files = hls_fixture().await;
    let egress_url = format!("http://{egress_addr}");
    let sfu_ws = format!("ws://{egress_addr}");
    let public_base = format!("http://{files}/");
    let p = Platform::start_with(&platform_vars(&egress_url, &sfu_ws, &public_base)).await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let receiver = subscribe(
        &p,
        &t,
        &["recording.started", "recording.ready", "recording.failed"],
    )
    .await;

    // Recording asked for at creation, changed before going live.
    let (status, b) = call(
        &p,
        &ada,
        Method::POST,
        "/api/broadcasts",
        json!({"title": "Concert", "orientation": "landscape", "recording": {"enabled": true, "output": "hls"}}),
    )
    .await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(
        b["recording"],
        json!({"enabled": true, "layout": "default", "output": "hls"})
    );
    let id = b["id"].as_str().unwrap().to_string();
    let stream_id = b["streamId"].as_str().unwrap().to_string();
    let short = b["shortId"].as_str().unwrap().to_string();
    let (status, bad) = call(
        &p,
        &ada,
        Method::PATCH,
        &format!("/api/broadcasts/{id}"),
        json!({"recording": {"layout": "mosaic"}}),
    )
    .await;
    assert_eq!(status, 422, "{bad}");
    let (status, patched) = call(
        &p,
        &ada,
        Method::PATCH,
        &format!("/api/broadcasts/{id}"),
        json!({"recording": {"layout": "grid3x3"}}),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["recording"]["layout"], "grid3x3");
    let (_, public_view) = call(
        &p,
        &bob,
        Method::GET,
        &format!("/api/broadcasts/{id}"),
        Value::Null,
    )
    .await;
    assert!(
        public_view.get("recording").is_none(),
        "settings are the owner's: {public_view}"
    );
    assert!(egress.recording_calls().is_empty());

    // Going live starts a room-composite web egress on our record page.
    let (status, live) = call(
        &p,
        &ada,
        Method::POST,
        &format!("/api/broadcasts/{id}/status"),
        json!({"status": "active"}),
    )
    .await;
    assert_eq!(status, 200, "{live}");
    assert_eq!(egress.refused(), Vec::<String>::new());
    let calls = egress.recording_calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].method, "StartRoomCompositeEgress");
    let start = &calls[0].body;
    assert_eq!(start["room_name"], stream_id.as_str());
    assert_eq!(start["layout"], "grid3x3");
    let page = start["custom_base_url"].as_str().unwrap();
    assert!(
        page.starts_with(&format!(
            "http://127.0.0.1:3000/streams/{stream_id}/record?"
        )) || page.contains(&format!("/streams/{stream_id}/record?")),
        "{page}"
    );
    assert!(
        page.contains("orientation=landscape")
            && page.contains("layout=grid3x3")
            && page.contains("width=1920&height=1080"),
        "{page}"
    );
    let segments = &start["segment_outputs"][0];
    assert_eq!(segments["s3"]["bucket"], "replays");
    assert_eq!(segments["s3"]["endpoint"], "https://s3.example.test");
    assert_eq!(segments["playlist_name"], "index.m3u8");
    let (status, late) = call(
        &p,
        &ada,
        Method::PATCH,
        &format!("/api/broadcasts/{id}"),
        json!({"recording": {"enabled": false}}),
    )
    .await;
    assert_eq!(
        (status, late["code"].as_str()),
        (409, Some("already_live")),
        "{late}"
    );

    let list = recordings(&p, &ada, &id).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["status"], "starting");
    let recording_id = list[0]["id"].as_str().unwrap().to_string();
    assert!(
        recordings(&p, &bob, &id).await.is_empty(),
        "viewers see ready ones only"
    );

    // Webhooks that LiveKit did not sign change nothing.
    let ended = egress_event(
        "EV_forged",
        "egress_ended",
        json!({"egressId": "EG_1", "roomName": stream_id, "status": "EGRESS_COMPLETE",
               "segmentResults": [{"playlistLocation": "https://evil.example/x.m3u8", "duration": "1000000000", "size": "1"}]}),
    );
    assert_eq!(webhook(&p, &ended, None).await.0, 401);
    assert_eq!(
        webhook(
            &p,
            &ended,
            Some("not-the-sfu-secret-but-long-enough-000000")
        )
        .await
        .0,
        401
    );
    assert_eq!(recordings(&p, &ada, &id).await[0]["status"], "starting");

    // The egress runs.
    let started = egress_event(
        "EV_1",
        "egress_started",
        json!({"egressId": "EG_1", "roomName": stream_id, "status": "EGRESS_STARTING"}),
    );
    let (status, answer) = webhook(&p, &started, Some(SFU_SECRET)).await;
    assert_eq!(
        (status, &answer["handled"]),
        (200, &json!(false)),
        "{answer}"
    );
    assert_eq!(recordings(&p, &ada, &id).await[0]["status"], "starting");
    let active = egress_event(
        "EV_1b",
        "egress_updated",
        json!({"egressId": "EG_1", "roomName": stream_id, "status": "EGRESS_ACTIVE", "startedAt": "1700000000000000000"}),
    );
    let (status, answer) = webhook(&p, &active, Some(SFU_SECRET)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(recordings(&p, &ada, &id).await[0]["status"], "active");
    // A participant event at the same address counts as on the per-session route.
    let joined = json!({"id": "EV_P1", "event": "participant_joined", "room": {"name": stream_id},
                        "participant": {"identity": bob.id, "metadata": "{\"role\":\"subscriber\"}"}});
    let (status, answer) = webhook(&p, &joined, Some(SFU_SECRET)).await;
    assert_eq!(
        (status, answer["handled"].as_bool()),
        (200, Some(true)),
        "{answer}"
    );

    // Completing the broadcast stops the egress; its end report makes the recording ready.
    let (status, _) = call(
        &p,
        &ada,
        Method::POST,
        &format!("/api/broadcasts/{id}/status"),
        json!({"status": "completed"}),
    )
    .await;
    assert_eq!(status, 200);
    let calls = egress.recording_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[1].method, "StopEgress");
    assert_eq!(calls[1].body["egress_id"], "EG_1");
    assert_eq!(recordings(&p, &ada, &id).await[0]["status"], "ending");
    let done = egress_event(
        "EV_2",
        "egress_ended",
        json!({"egressId": "EG_1", "roomName": stream_id, "status": "EGRESS_COMPLETE",
               "segmentResults": [{"playlistName": "index.m3u8", "playlistLocation": "s3://replays/x/index.m3u8",
                                   "duration": "61500000000", "size": "7340032", "segmentCount": "16"}]}),
    );
    let (status, answer) = webhook(&p, &done, Some(SFU_SECRET)).await;
    assert_eq!(status, 200, "{answer}");
    let ready = recordings(&p, &ada, &id).await;
    assert_eq!(ready[0]["status"], "ready", "{ready:?}");
    let url = format!("http://{files}/recordings/{stream_id}/{recording_id}/index.m3u8");
    assert_eq!(ready[0]["url"], url.as_str());
    assert_eq!(ready[0]["durationSeconds"], 61.5);
    assert_eq!(ready[0]["sizeBytes"], 7_340_032);
    // A repeated end report is old news.
    let (_, again) = webhook(&p, &done, Some(SFU_SECRET)).await;
    assert_eq!(again["handled"], false, "{again}");
    // Viewers of a public broadcast, and the app alone, see the ready recording.
    assert_eq!(recordings(&p, &bob, &id).await[0]["url"], url.as_str());
    let (status, guest) = p
        .as_client(&t, Method::GET, &format!("/api/broadcasts/{id}/recordings"))
        .answer()
        .await;
    assert_eq!(status.as_u16(), 200, "{guest}");
    assert_eq!(guest["items"][0]["status"], "ready");

    // The tenant's backend heard of it: started, then ready (with the URL).
    for _ in 0..10 {
        if p.run_job("deliver-webhooks").await["remaining"] == 0 {
            break;
        }
    }
    let events: Vec<Value> = receiver
        .wait_for(2, Duration::from_secs(20))
        .await
        .iter()
        .map(|r| r.json())
        .collect();
    // Deliveries may overlap; the sequence gives the order.
    let mut events = events;
    events.sort_by_key(|e| e["sequence"].as_i64());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["recording.started", "recording.ready"],
        "{events:?}"
    );
    assert_eq!(events[1]["data"]["url"], url.as_str());
    assert_eq!(events[1]["data"]["id"], recording_id.as_str());

    // The watch page replays it once the broadcast has ended.
    let mut browser = Browser::launch(&["--autoplay-policy=no-user-gesture-required"]).await;
    let tab = browser
        .open(&p.url(&format!("/watch/{short}")), 1280, 720)
        .await;
    let played = browser
        .wait_for(
            &tab,
            "(function(){var v = document.getElementById('player').video; var r = document.getElementById('watch').dataset;\
              return r.replay === 'true' && v.currentTime > 0.5 && !v.paused ? {t: v.currentTime, badge: document.getElementById('status').textContent} : null;})()",
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(played["badge"], "Replay", "{played}");
    browser
        .screenshot(
            &tab,
            &platform_tests::workspace_root().join("target/page-screenshots/watch-replay.png"),
        )
        .await;
    browser.assert_clean(&tab).await;
    browser.close().await;

    // Deleting: not for viewers; the owner removes the record.
    let path = format!("/api/broadcasts/{id}/recordings/{recording_id}");
    assert_eq!(
        call(&p, &bob, Method::DELETE, &path, Value::Null).await.0,
        403
    );
    let (status, deleted) = call(&p, &ada, Method::DELETE, &path, Value::Null).await;
    assert_eq!(status, 200, "{deleted}");
    assert!(recordings(&p, &ada, &id).await.is_empty());
    assert_eq!(
        call(&p, &ada, Method::DELETE, &path, Value::Null).await.0,
        404
    );
    assert_eq!(egress.refused(), Vec::<String>::new());
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_starts_manual_control_and_private_broadcasts() {
    let (egress, egress_addr) = StandInEgress::start().await;
    let egress_url = format!("http://{egress_addr}");
    let sfu_ws = format!("ws://{egress_addr}");
    let p = Platform::start_with(&platform_vars(&egress_url, &sfu_ws, "")).await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let receiver = subscribe(&p, &t, &["recording.failed"]).await;

    // The tenant turns recording on by default (MP4 files).
    let (status, defaults) = p
        .as_server(
            &t,
            Method::PUT,
            "/api/v1/recording-defaults",
            Some(&json!({"enabled": true, "output": "mp4"})),
        )
        .answer()
        .await;
    assert_eq!(status.as_u16(), 200, "{defaults}");
    let (status, b) = call(
        &p,
        &ada,
        Method::POST,
        "/api/broadcasts",
        json!({"title": "Private", "visibility": "private"}),
    )
    .await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(
        b["recording"],
        json!({"enabled": true, "layout": "default", "output": "mp4"})
    );
    let id = b["id"].as_str().unwrap().to_string();
    let stream_id = b["streamId"].as_str().unwrap().to_string();
    call(
        &p,
        &ada,
        Method::POST,
        &format!("/api/broadcasts/{id}/status"),
        json!({"status": "active"}),
    )
    .await;
    let calls = egress.recording_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].body["file_outputs"][0]["file_type"], "MP4");
    assert_eq!(calls[0].body["file_outputs"][0]["s3"]["bucket"], "replays");

    // "Start signal not received": one retry with a new egress, then failed with the reason.
    let failed = |n: u32, egress_id: &str| {
        egress_event(
            &format!("EV_F{n}"),
            "egress_ended",
            json!({"egressId": egress_id, "roomName": stream_id, "status": "EGRESS_FAILED", "error": "Start signal not received"}),
        )
    };
    let (status, answer) = webhook(&p, &failed(1, "EG_1"), Some(SFU_SECRET)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(egress.recording_calls().len(), 2, "retried");
    let list = recordings(&p, &ada, &id).await;
    assert_eq!(
        (list[0]["status"].as_str(), list[0]["attempts"].as_i64()),
        (Some("starting"), Some(2)),
        "{list:?}"
    );
    let (_, stale) = webhook(&p, &failed(2, "EG_1"), Some(SFU_SECRET)).await;
    assert_eq!(
        stale["handled"], false,
        "the first egress is forgotten: {stale}"
    );
    webhook(&p, &failed(3, "EG_2"), Some(SFU_SECRET)).await;
    let list = recordings(&p, &ada, &id).await;
    assert_eq!(list[0]["status"], "failed");
    assert_eq!(list[0]["error"], "Start signal not received");
    assert_eq!(egress.recording_calls().len(), 2, "no third start");
    // The tenant's backend hears of the failure once, with the reason.
    p.run_job("deliver-webhooks").await;
    let delivered = receiver.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(delivered.len(), 1, "one recording.failed delivery");
    let event = delivered[0].json();
    assert_eq!(event["type"], "recording.failed", "{event}");
    assert_eq!(event["data"]["id"], list[0]["id"], "{event}");
    assert_eq!(event["data"]["status"], "failed", "{event}");
    assert_eq!(
        event["data"]["error"], "Start signal not received",
        "{event}"
    );

    // Manual control: the owner starts and stops; others may not; a private broadcast's
    // recordings are unknown to those who may not watch it.
    let start = format!("/api/broadcasts/{id}/recordings/start");
    let stop = format!("/api/broadcasts/{id}/recordings/stop");
    assert_eq!(
        call(&p, &bob, Method::POST, &start, Value::Null).await.0,
        404
    );
    assert_eq!(
        call(
            &p,
            &bob,
            Method::GET,
            &format!("/api/broadcasts/{id}/recordings"),
            Value::Null
        )
        .await
        .0,
        404
    );
    let (status, manual) = call(&p, &ada, Method::POST, &start, Value::Null).await;
    assert_eq!(status, 201, "{manual}");
    assert_eq!(manual["status"], "starting");
    let (status, twice) = call(&p, &ada, Method::POST, &start, Value::Null).await;
    assert_eq!(
        (status, twice["code"].as_str()),
        (409, Some("recording_in_progress"))
    );
    let (status, stopped) = call(&p, &ada, Method::POST, &stop, Value::Null).await;
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["status"], "ending");
    let calls = egress.recording_calls();
    assert_eq!(calls.last().unwrap().method, "StopEgress");
    assert_eq!(calls.last().unwrap().body["egress_id"], "EG_3");
    // A co-host records with canControlLayout (the moderator preset has it), not without.
    let carol = p.signup(&t, "carol").await;
    let dave = p.signup(&t, "dave").await;
    for (who, permissions) in [(&carol, json!("moderator")), (&dave, json!("default"))] {
        let session = format!("/api/streaming/sessions/{id}");
        let (status, invite) = call(
            &p,
            &ada,
            Method::POST,
            &format!("{session}/invites"),
            json!({"userId": who.id, "permissions": permissions}),
        )
        .await;
        assert_eq!(status, 200, "{invite}");
        let (status, joined) = call(
            &p,
            who,
            Method::POST,
            &format!("{session}/join-cohost"),
            json!({"userName": "co", "inviteToken": invite["inviteToken"]}),
        )
        .await;
        assert_eq!(status, 200, "{joined}");
    }
    let complete = egress_event(
        "EV_C3",
        "egress_ended",
        json!({"egressId": "EG_3", "roomName": stream_id, "status": "EGRESS_COMPLETE",
               "fileResults": [{"filename": "x.mp4", "location": "https://bucket.example/x.mp4", "duration": "2000000000", "size": "100"}]}),
    );
    webhook(&p, &complete, Some(SFU_SECRET)).await;
    let ready = recordings(&p, &ada, &id).await;
    assert_eq!(ready[0]["status"], "ready");
    assert_eq!(
        ready[0]["url"], "https://bucket.example/x.mp4",
        "no public base: the egress's location"
    );
    assert_eq!(
        call(&p, &dave, Method::POST, &start, Value::Null).await.0,
        403
    );
    let (status, started) = call(&p, &carol, Method::POST, &start, Value::Null).await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(
        call(&p, &dave, Method::POST, &stop, Value::Null).await.0,
        403
    );
    assert_eq!(
        call(
            &p,
            &dave,
            Method::GET,
            &format!("/api/broadcasts/{id}/recordings"),
            Value::Null
        )
        .await
        .0,
        200
    );
    let (status, by_cohost) = call(&p, &carol, Method::POST, &stop, Value::Null).await;
    assert_eq!(
        (status, by_cohost["status"].as_str()),
        (200, Some("ending")),
        "{by_cohost}"
    );
    let last = egress.recording_calls().last().unwrap().clone();
    assert_eq!(
        (last.method.as_str(), &last.body["egress_id"]),
        ("StopEgress", &json!("EG_5"))
    );
    let stopped = by_cohost;
    // An in-progress recording is not deleted.
    let path = format!(
        "/api/broadcasts/{id}/recordings/{}",
        stopped["id"].as_str().unwrap()
    );
    assert_eq!(
        call(&p, &ada, Method::DELETE, &path, Value::Null).await.0,
        409
    );
    // The tenant's server sees them all.
    let (status, all) = p
        .as_server(
            &t,
            Method::GET,
            &format!("/api/broadcasts/{id}/recordings"),
            None,
        )
        .answer()
        .await;
    assert_eq!(status.as_u16(), 200, "{all}");
    assert_eq!(all["total"], 3);
    assert_eq!(egress.refused(), Vec::<String>::new());
    p.stop().await;
}
