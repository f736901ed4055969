//! Attacks on clips: clipping another tenant's or another user's broadcast, a viewer
//! clipping where the tenant forbids it, floods of concurrent clips, ranges outside the
//! show, numbers out of bounds, oversized bodies, markup in titles, forged reports from
//! anyone but the media server, and clip media fetched without its signature.

use super::{JOBS_TOKEN, cast, code, live_broadcast, media_call, platform};
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;

async fn clip(p: &Platform, user: &User, id: &str, body: &Value) -> (u16, Value) {
    let (status, answer) = p
        .as_user(user, Method::POST, &format!("/api/broadcasts/{id}/clips"))
        .send_json(body)
        .await;
    (status.as_u16(), answer)
}

async fn server_clip(p: &Platform, t: &Tenant, id: &str, body: &Value) -> (u16, Value) {
    let (status, answer) = p
        .as_server(
            t,
            Method::POST,
            &format!("/api/broadcasts/{id}/clips"),
            Some(body),
        )
        .answer()
        .await;
    (status.as_u16(), answer)
}

async fn set_settings(p: &Platform, t: &Tenant, settings: &Value) {
    let (status, answer) = p
        .as_server(t, Method::PUT, "/api/v1/replay-settings", Some(settings))
        .answer()
        .await;
    assert_eq!(status, 200, "{answer}");
}

fn id(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("id in {v}"))
        .to_string()
}

/// Only the owner, the tenant's server and (where the tenant lets them) viewers who may
/// watch clip a broadcast; nobody of another tenant sees or clips it, and only the owner,
/// the server or a clip's maker deletes a clip.
#[tokio::test(flavor = "multi_thread")]
async fn a_broadcast_is_clipped_only_by_whom_its_tenant_lets() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let mallory = p.signup(&other, "mallory").await;
    let public = id(&live_broadcast(&p, &ada, "public").await);
    let private = id(&live_broadcast(&p, &ada, "private").await);
    let body = json!({"lastSeconds": 10});

    // The owner and the tenant's server may.
    let (status, mine) = clip(&p, &ada, &public, &body).await;
    assert_eq!(status, 201, "{mine}");
    let (status, served) = server_clip(&p, &t, &public, &body).await;
    assert_eq!(status, 201, "{served}");
    // A viewer may not while the tenant does not let viewers clip (the default).
    let (status, answer) = clip(&p, &eve, &public, &body).await;
    assert_eq!(
        (status, code(&answer)),
        (403, "viewer_clips_disabled"),
        "{answer}"
    );
    // Another tenant's server and users do not even find it; the API key alone is no one.
    let (status, _) = server_clip(&p, &other, &public, &body).await;
    assert_eq!(status, 404);
    assert_eq!(clip(&p, &mallory, &public, &body).await.0, 404);
    let (status, _) = p
        .as_client(&t, Method::POST, &format!("/api/broadcasts/{public}/clips"))
        .send_json(&body)
        .await;
    assert_eq!(status, 401);

    // The tenant lets viewers clip: those who may watch may; a private broadcast stays
    // unknown to them.
    set_settings(&p, &t, &json!({"viewerClips": true})).await;
    let (status, eves) = clip(&p, &eve, &public, &body).await;
    assert_eq!(status, 201, "{eves}");
    assert_eq!(eves["createdBy"], eve.id.as_str());
    assert_eq!(clip(&p, &eve, &private, &body).await.0, 404);
    assert_eq!(clip(&p, &mallory, &public, &body).await.0, 404);

    // Reading: another tenant's clip is unknown, to its server and its users alike.
    let path = format!("/api/clips/{}", id(&mine));
    let (status, _) = p.as_server(&other, Method::GET, &path, None).answer().await;
    assert_eq!(status, 404);
    let (status, _) = p.as_user(&mallory, Method::GET, &path).answer().await;
    assert_eq!(status, 404);
    let (status, _) = p
        .as_user(
            &mallory,
            Method::GET,
            &format!("/api/broadcasts/{public}/clips"),
        )
        .answer()
        .await;
    assert_eq!(status, 404);
    let (status, seen) = p.as_user(&eve, Method::GET, &path).answer().await;
    assert_eq!(
        (status.as_u16(), seen["id"].clone()),
        (200, mine["id"].clone())
    );
    // A private broadcast's clip is unknown to who may not watch it.
    let (status, hidden) = server_clip(&p, &t, &private, &body).await;
    assert_eq!(status, 201, "{hidden}");
    let hidden_path = format!("/api/clips/{}", id(&hidden));
    let (status, _) = p.as_user(&eve, Method::GET, &hidden_path).answer().await;
    assert_eq!(status, 404);
    let (status, _) = p.as_user(&eve, Method::DELETE, &hidden_path).answer().await;
    assert_eq!(status, 404);

    // Deleting: not another viewer's clip, nor another tenant's; one's own, yes.
    let (status, _) = p.as_user(&eve, Method::DELETE, &path).answer().await;
    assert_eq!(status, 403);
    let (status, _) = p
        .as_server(&other, Method::DELETE, &path, None)
        .answer()
        .await;
    assert_eq!(status, 404);
    let (status, _) = p.as_user(&mallory, Method::DELETE, &path).answer().await;
    assert_eq!(status, 404);
    let (status, _) = p.as_user(&ada, Method::GET, &path).answer().await;
    assert_eq!(status, 200, "still there");
    let eves_path = format!("/api/clips/{}", id(&eves));
    let (status, _) = p.as_user(&eve, Method::DELETE, &eves_path).answer().await;
    assert_eq!(status, 200);
    let (status, _) = p.as_user(&ada, Method::GET, &eves_path).answer().await;
    assert_eq!(status, 404);
    let (status, _) = p
        .as_server(
            &t,
            Method::DELETE,
            &format!("/api/clips/{}", id(&served)),
            None,
        )
        .answer()
        .await;
    assert_eq!(status, 200);

    // A broadcast that never went live has nothing to clip; a tenant keeping no replays
    // neither.
    let (status, pending) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Later", "visibility": "public"}))
        .await;
    assert_eq!(status, 200, "{pending}");
    let (status, answer) = clip(&p, &ada, &id(&pending), &body).await;
    assert_eq!((status, code(&answer)), (409, "not_started"), "{answer}");
    set_settings(&p, &t, &json!({"enabled": false})).await;
    let (status, answer) = clip(&p, &ada, &public, &body).await;
    assert_eq!(
        (status, code(&answer)),
        (409, "replays_disabled"),
        "{answer}"
    );
}

/// Numbers out of bounds, both forms or neither, bad types, long titles and unknown
/// fields are refused by field; a 100 MB body before it is read; a range outside a ready
/// replay with `out_of_range`; markup in a title is text on the clip page.
#[tokio::test(flavor = "multi_thread")]
async fn bad_numbers_ranges_outside_the_show_and_markup_are_refused_or_harmless() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let b = live_broadcast(&p, &ada, "public").await;
    let live = id(&b);
    for (bad, field) in [
        (json!({"startOffset": -1, "duration": 10}), "startOffset"),
        (json!({"startOffset": 1e12, "duration": 10}), "startOffset"),
        (json!({"startOffset": 1.5, "duration": 10}), "startOffset"),
        (json!({"startOffset": "10", "duration": 10}), "startOffset"),
        (json!({"startOffset": 0, "duration": 4}), "duration"),
        (json!({"startOffset": 0, "duration": 121}), "duration"),
        (json!({"startOffset": 0, "duration": -30}), "duration"),
        (json!({"startOffset": 0, "duration": 10.5}), "duration"),
        (json!({"startOffset": 0}), "duration"),
        (json!({"duration": 10}), "startOffset"),
        (json!({"lastSeconds": 0}), "lastSeconds"),
        (json!({"lastSeconds": 1e300}), "lastSeconds"),
        (
            json!({"lastSeconds": 30, "startOffset": 0, "duration": 10}),
            "lastSeconds",
        ),
        (json!({}), "startOffset"),
        (json!({"title": "x"}), "startOffset"),
        (
            json!({"lastSeconds": 10, "title": "x".repeat(201)}),
            "title",
        ),
        (json!({"lastSeconds": 10, "until": 5}), "until"),
    ] {
        let (status, answer) = clip(&p, &ada, &live, &bad).await;
        assert_eq!(status, 422, "{bad}: {answer}");
        let fields: Vec<&str> = answer["errors"]
            .as_array()
            .map(|e| e.iter().filter_map(|e| e["field"].as_str()).collect())
            .unwrap_or_default();
        assert!(fields.contains(&field), "{bad}: {answer}");
    }
    // A number past any integer type, as text.
    let (status, answer) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{live}/clips"))
        .header("content-type", "application/json")
        .body("{\"startOffset\": 99999999999999999999999999, \"duration\": 10}")
        .answer()
        .await;
    assert!(status == 400 || status == 422, "{status} {answer}");
    let (status, answer) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{live}/clips"))
        .header("content-type", "application/json")
        .body("{\"lastSeconds\": 10,")
        .answer()
        .await;
    assert_eq!(status, 400, "{answer}");
    // 100 MB declared: refused before a byte of it is sent.
    let mut socket = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    let head = format!(
        "POST /api/broadcasts/{live}/clips HTTP/1.1\r\nhost: {}\r\nx-api-key: {}\r\n\
         authorization: Bearer {}\r\ncontent-type: application/json\r\n\
         content-length: 104857600\r\n\r\n",
        p.addr(),
        t.api_key,
        ada.token
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut reply = vec![0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut reply))
        .await
        .expect("the platform answers before the body arrives")
        .unwrap();
    assert_eq!(&reply[9..12], b"413");
    let (_, list) = p
        .as_user(&ada, Method::GET, &format!("/api/broadcasts/{live}/clips"))
        .answer()
        .await;
    assert_eq!(list["total"], 0, "nothing was stored: {list}");

    // Markup in a title is the title, and text on the clip page.
    let title = "<script>alert(1)</script><meta property=\"og:title\" content=\"x\">";
    let (status, c) = clip(&p, &ada, &live, &json!({"lastSeconds": 10, "title": title})).await;
    assert_eq!(status, 201, "{c}");
    assert_eq!(c["title"], title);
    let r = p
        .request(Method::GET, &format!("/clips/{}", id(&c)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let html = r.text().await.unwrap();
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(
        !html.contains("<meta property=\"og:title\" content=\"x\">"),
        "{html}"
    );
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
        "{html}"
    );

    // Ended, its replay ready and 60 s long (as the media server reports it): a range
    // must lie within it.
    let secret = p.variable("media_secret").unwrap();
    let (status, _) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{live}/status"),
        )
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    let stream = b["streamId"].as_str().unwrap();
    let (_, answer) = media_call(
        &p,
        "/api/media/replay",
        Some(&secret),
        &json!({"streamId": stream, "state": "waiting"}),
    )
    .await;
    assert_eq!(answer["action"], "finish", "{answer}");
    let (status, _) = media_call(
        &p,
        "/api/media/replay",
        Some(&secret),
        &json!({"streamId": stream, "state": "ready", "duration": 60.0, "renditions": 1}),
    )
    .await;
    assert_eq!(status, 200);
    for outside in [
        json!({"startOffset": 56, "duration": 5}),
        json!({"startOffset": 60, "duration": 5}),
        json!({"startOffset": 2678400, "duration": 120}),
        json!({"lastSeconds": 61}),
    ] {
        let (status, answer) = clip(&p, &ada, &live, &outside).await;
        assert_eq!(
            (status, code(&answer)),
            (422, "out_of_range"),
            "{outside}: {answer}"
        );
        assert_eq!(answer["keptSeconds"], 60.0, "{answer}");
    }
    let (status, last) = clip(&p, &ada, &live, &json!({"startOffset": 55, "duration": 5})).await;
    assert_eq!(
        (status, last["startOffset"].as_f64()),
        (201, Some(55.0)),
        "{last}"
    );
    let (status, last) = clip(&p, &ada, &live, &json!({"lastSeconds": 20})).await;
    assert_eq!(
        (status, last["startOffset"].as_f64()),
        (201, Some(40.0)),
        "{last}"
    );
    // The replay deleted: nothing left to clip.
    let (status, _) = p
        .as_user(
            &ada,
            Method::DELETE,
            &format!("/api/broadcasts/{live}/replay"),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, answer) = clip(&p, &ada, &live, &json!({"startOffset": 0, "duration": 5})).await;
    assert_eq!((status, code(&answer)), (409, "replay_gone"), "{answer}");
}

/// 64 clips at once from one user: each is made once or refused by the rate limit (no
/// server error, no row lost or doubled); the tenant's server is not limited.
#[tokio::test(flavor = "multi_thread")]
async fn sixty_four_concurrent_clips_are_each_made_once_or_rate_limited() {
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let live = id(&live_broadcast(&p, &ada, "public").await);
    let body = json!({"lastSeconds": 30, "title": "flood"});
    let answers =
        futures_util::future::join_all((0..64).map(|_| clip(&p, &ada, &live, &body))).await;
    let mut made = HashSet::new();
    let mut limited = 0;
    for (status, answer) in &answers {
        match status {
            201 => assert!(made.insert(id(answer)), "one id once: {answer}"),
            429 => limited += 1,
            _ => panic!("{status}: {answer}"),
        }
    }
    assert_eq!(made.len() + limited, 64);
    assert!(
        !made.is_empty() && limited > 0,
        "{} made, {limited} limited",
        made.len()
    );
    let answers =
        futures_util::future::join_all((0..64).map(|_| server_clip(&p, &t, &live, &body))).await;
    for (status, answer) in &answers {
        assert_eq!(*status, 201, "{answer}");
        assert!(made.insert(id(answer)), "one id once: {answer}");
    }
    let mut listed = HashSet::new();
    for offset in [0, 100] {
        let (status, page) = p
            .as_user(
                &ada,
                Method::GET,
                &format!("/api/broadcasts/{live}/clips?limit=100&offset={offset}"),
            )
            .answer()
            .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["total"].as_u64(), Some(made.len() as u64), "{page}");
        for item in page["items"].as_array().unwrap() {
            assert!(listed.insert(id(item)), "listed once: {item}");
        }
    }
    assert_eq!(listed, made);
}

/// Only the media server reports clips; a report within the contract of a clip never
/// asked for changes nothing, and a report out of it is refused by field.
#[tokio::test(flavor = "multi_thread")]
async fn clips_are_reported_by_the_media_server_alone_and_within_its_contract() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let live = id(&live_broadcast(&p, &ada, "public").await);
    let (status, c) = clip(&p, &ada, &live, &json!({"startOffset": 0, "duration": 10})).await;
    assert_eq!(status, 201, "{c}");
    let clip_id = id(&c);
    let secret = p.variable("media_secret").unwrap();
    let hls = json!({"id": clip_id, "state": "hls_ready", "startOffset": 0.0, "duration": 10.0});
    for path in ["/api/media/clip", "/api/media/clips/pending"] {
        assert_eq!(media_call(&p, path, None, &hls).await.0, 401, "{path}");
        assert_eq!(
            media_call(&p, path, Some("guess"), &hls).await.0,
            401,
            "{path}"
        );
        for builder in [
            p.as_user(&eve, Method::POST, path),
            p.as_user(&ada, Method::POST, path),
            p.as_server(&t, Method::POST, path, Some(&hls)),
            p.request(Method::POST, path).bearer_auth(JOBS_TOKEN),
        ] {
            let (status, _) = builder.send_json(&hls).await;
            assert_eq!(status, 401, "{path}");
        }
    }
    let (_, c) = p
        .as_user(&ada, Method::GET, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert!(c["hlsUrl"].is_null(), "nothing reported: {c}");

    // Out of the contract: refused by field, nothing changes.
    for (bad, status_code) in [
        (
            json!({"id": "not-a-uuid", "state": "hls_ready", "startOffset": 0.0, "duration": 1.0}),
            400,
        ),
        (
            json!({"id": clip_id, "state": "hls_ready", "duration": 10.0}),
            422,
        ),
        (
            json!({"id": clip_id, "state": "hls_ready", "startOffset": -1.0, "duration": 10.0}),
            422,
        ),
        (
            json!({"id": clip_id, "state": "hls_ready", "startOffset": 0.0, "duration": 1e9}),
            422,
        ),
        (
            json!({"id": clip_id, "state": "ready", "duration": 10.0}),
            422,
        ),
        (
            json!({"id": clip_id, "state": "ready", "duration": 10.0, "size": 1u64 << 50}),
            422,
        ),
        (
            json!({"id": clip_id, "state": "failed", "error": "<script>"}),
            422,
        ),
        (
            json!({"id": clip_id, "state": "failed", "error": "x".repeat(101)}),
            422,
        ),
        (json!({"id": clip_id, "state": "failed"}), 422),
        (json!({"id": clip_id, "state": "exploded"}), 422),
        (json!({"id": clip_id, "state": "deleted", "extra": 1}), 422),
    ] {
        let (status, answer) = media_call(&p, "/api/media/clip", Some(&secret), &bad).await;
        assert!(
            status == status_code || (status_code == 422 && status == 400),
            "{bad}: {status} {answer}"
        );
    }
    let (_, c) = p
        .as_user(&ada, Method::GET, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert_eq!(c["state"], "processing", "{c}");
    assert!(c["hlsUrl"].is_null(), "{c}");

    // A clip never asked for: the media server is told to delete it; nothing is made.
    let stranger = domain::ids::uuid();
    for state in [
        json!({"id": stranger, "state": "hls_ready", "startOffset": 0.0, "duration": 10.0}),
        json!({"id": stranger, "state": "ready", "duration": 10.0, "size": 1000}),
    ] {
        let (status, answer) = media_call(&p, "/api/media/clip", Some(&secret), &state).await;
        assert_eq!(
            (status, answer["action"].as_str()),
            (200, Some("delete")),
            "{answer}"
        );
    }
    let (status, _) = p
        .as_user(&ada, Method::GET, &format!("/api/clips/{stranger}"))
        .answer()
        .await;
    assert_eq!(status, 404);

    // The MP4 before the HLS moves nothing; in order, the clip is ready.
    let ready = json!({"id": clip_id, "state": "ready", "duration": 10.02, "size": 1_000_000, "thumbnail": true});
    let (_, pending) = media_call(&p, "/api/media/clips/pending", Some(&secret), &json!({})).await;
    assert!(
        pending["make"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == clip_id.as_str()),
        "{pending}"
    );
    media_call(&p, "/api/media/clip", Some(&secret), &ready).await;
    let (_, c) = p
        .as_user(&ada, Method::GET, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert_eq!(c["state"], "processing", "{c}");
    assert_eq!(
        media_call(&p, "/api/media/clip", Some(&secret), &hls)
            .await
            .0,
        200
    );
    assert_eq!(
        media_call(&p, "/api/media/clip", Some(&secret), &ready)
            .await
            .0,
        200
    );
    let (_, c) = p
        .as_user(&ada, Method::GET, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert_eq!(c["state"], "ready", "{c}");
    assert!(
        c["mp4Url"]
            .as_str()
            .is_some_and(|u| u.contains("/clips/") && u.contains("sig=")),
        "{c}"
    );
    // A late failure does not undo a ready clip.
    let (_, answer) = media_call(
        &p,
        "/api/media/clip",
        Some(&secret),
        &json!({"id": clip_id, "state": "failed", "error": "cut_failed"}),
    )
    .await;
    assert_eq!(answer["action"], "continue");
    let (_, c) = p
        .as_user(&ada, Method::GET, &format!("/api/clips/{clip_id}"))
        .answer()
        .await;
    assert_eq!(c["state"], "ready", "{c}");
}

/// A clip's addresses open only with their own signature: unsigned, forged, of another
/// clip or of the stream (for the MP4), or expired, nginx refuses them.
#[tokio::test(flavor = "multi_thread")]
async fn clip_media_is_served_signed_only() {
    let p = crate::media::platform(30).await;
    let secret = p.variable("media_secret").unwrap();
    let key = domain::media::playback_key(&secret);
    let base = p
        .variable("playback_hls_base")
        .unwrap_or_else(|| format!("http://{}/hls", p.media().http_addr()));
    let (clip_a, clip_b, stream) = (
        domain::ids::uuid(),
        domain::ids::uuid(),
        domain::ids::uuid(),
    );
    let now = platform_tests::unix_now();
    let status = |url: String| async move { reqwest::get(&url).await.unwrap().status().as_u16() };
    let mp4 = format!("{base}/clips/{clip_a}/clip.mp4");
    let playlist = format!("{base}/{stream}/replay/clips/{clip_a}/index.m3u8");
    assert_eq!(status(mp4.clone()).await, 403, "unsigned");
    assert_eq!(status(playlist.clone()).await, 403, "unsigned");
    assert_eq!(
        status(format!(
            "{mp4}?exp={}&sig=AAAAAAAAAAAAAAAAAAAAAA",
            now + 600
        ))
        .await,
        403
    );
    let of = |id: &str, exp: i64| domain::media::signed_query(&key, id, exp);
    assert_eq!(
        status(format!("{mp4}?{}", of(&clip_b, now + 600))).await,
        403,
        "another clip's"
    );
    assert_eq!(
        status(format!("{mp4}?{}", of(&stream, now + 600))).await,
        403,
        "the stream's"
    );
    assert_eq!(
        status(format!("{mp4}?{}", of(&clip_a, now - 10))).await,
        410,
        "expired"
    );
    assert_eq!(
        status(format!("{playlist}?{}", of(&clip_a, now + 600))).await,
        403,
        "the clip's, for the stream's playlist"
    );
    // Signed right, but nothing there: the signature is the only way in.
    assert_eq!(
        status(format!("{mp4}?{}", of(&clip_a, now + 600))).await,
        404
    );
    assert_eq!(
        status(format!("{playlist}?{}", of(&stream, now + 600))).await,
        404
    );
    // Names outside the strict patterns are not served at all.
    for odd in [
        format!(
            "{base}/clips/{clip_a}/clip.mp4.tmp?{}",
            of(&clip_a, now + 600)
        ),
        format!(
            "{base}/clips/{clip_a}/../../replays/{stream}/v0.m3u8?{}",
            of(&clip_a, now + 600)
        ),
        format!(
            "{base}/clips/{}/clip.mp4?{}",
            clip_a.to_uppercase(),
            of(&clip_a, now + 600)
        ),
    ] {
        assert_eq!(status(odd.clone()).await, 404, "{odd}");
    }
}
