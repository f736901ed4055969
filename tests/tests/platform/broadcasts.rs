//! Broadcasts, streaming sessions, scheduled events and SFU tokens, end to end: the
//! spec's recommended order, every id form of the token endpoint, and bad input.

use base64::Engine;
use livekit_api::access_token::{Claims, TokenVerifier};
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};

const SFU_KEY: &str = "APItestkey";
const SFU_SECRET: &str = "test-sfu-secret-that-is-long-enough-0123456789";

async fn platform_with_sfu() -> Platform {
    Platform::start_with(&[("sfu_api_key", SFU_KEY), ("sfu_api_secret", SFU_SECRET)]).await
}

/// Asks for a token for `session` as the tenant's server (which names any identity) and
/// answers `(status, body)`.
async fn token(p: &Platform, t: &Tenant, session: &str, user_id: &str, role: &str) -> (u16, Value) {
    let path = format!("/api/streaming/sessions/{session}/token");
    let body = json!({"userId": user_id, "role": role});
    let (status, body) = p
        .as_server(t, Method::POST, &path, Some(&body))
        .answer()
        .await;
    (status.as_u16(), body)
}

/// Asks for a token for `session` as the signed-in `user` (for its own identity).
async fn user_token(p: &Platform, user: &User, session: &str, role: &str) -> (u16, Value) {
    let path = format!("/api/streaming/sessions/{session}/token");
    let (status, body) = p
        .as_user(user, Method::POST, &path)
        .send_json(&json!({"role": role}))
        .await;
    (status.as_u16(), body)
}

/// Checks an answered token with LiveKit's own verifier and answers its claims.
fn verified(answer: &Value) -> Claims {
    let token = answer["token"].as_str().expect("token");
    let jwt = token.strip_prefix("sfu_").expect("the sfu_ prefix");
    TokenVerifier::with_api_key(SFU_KEY, SFU_SECRET)
        .verify(jwt)
        .expect("LiveKit accepts the token")
}

/// The raw JSON claims of a token (for those LiveKit's Claims type does not keep).
fn raw_claims(answer: &Value) -> Value {
    let token = answer["token"]
        .as_str()
        .unwrap()
        .strip_prefix("sfu_")
        .unwrap();
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn live_ids(p: &Platform, t: &Tenant) -> Vec<String> {
    let (status, live) = p
        .as_client(t, Method::GET, "/api/broadcasts/live")
        .answer()
        .await;
    assert_eq!(status, 200, "{live}");
    live["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect()
}

async fn post(p: &Platform, u: &User, path: &str, body: Value) -> (u16, Value) {
    let (status, body) = p.as_user(u, Method::POST, path).send_json(&body).await;
    (status.as_u16(), body)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_recommended_order_runs_end_to_end() {
    let p = platform_with_sfu().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;

    // 1. Create: everything needed to stream comes back at once.
    let (status, b) = post(
        &p,
        &ada,
        "/api/broadcasts",
        json!({"title": "Morning show", "tags": ["news"]}),
    )
    .await;
    assert_eq!(status, 200, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    let stream_id = b["streamId"].as_str().unwrap().to_string();
    assert_eq!(b["status"], "pending");
    // The key is a UUID of its own without dashes, never the public streamId's.
    let key = b["streamKey"].as_str().unwrap();
    assert!(domain::media::is_stream_key(key), "{key}");
    assert_ne!(key, stream_id.replace('-', ""));
    assert_eq!(b["rtmpUrl"], format!("rtmp://127.0.0.1:1935/live/{key}"));
    assert_eq!(
        b["hlsUrl"],
        format!("http://127.0.0.1:8080/hls/{stream_id}/index.m3u8")
    );
    let short_id = b["shortId"].as_str().unwrap();
    assert_eq!(
        b["watchUrl"],
        format!("http://127.0.0.1:3000/watch/{short_id}")
    );
    assert_eq!(
        (b["recordingWidth"].clone(), b["recordingHeight"].clone()),
        (json!(390), json!(644))
    );
    assert!(b["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(
        !live_ids(&p, &t).await.contains(&id),
        "pending is not discoverable"
    );

    // 2. Connect to the SFU room named by streamId and publish.
    let (status, answer) = user_token(&p, &ada, &id, "publisher").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["serverUrl"], "ws://127.0.0.1:7880");
    let claims = verified(&answer);
    assert_eq!(claims.iss, SFU_KEY);
    assert_eq!(claims.sub, ada.id);
    assert_eq!(claims.video.room, stream_id);
    assert!(claims.video.room_join);
    assert_eq!(claims.video.can_publish, Some(true));
    assert_eq!(claims.video.can_publish_data, Some(true));
    assert_eq!(claims.video.can_subscribe, Some(true));
    assert_eq!(claims.exp - claims.nbf, 6 * 3600);
    let raw = raw_claims(&answer);
    assert_eq!(raw["iat"], raw["nbf"]);
    assert!(raw["jti"].as_str().is_some_and(|j| !j.is_empty()));

    // 3. Active: now it is listed.
    let path = format!("/api/broadcasts/{id}/status");
    let (status, active) = post(&p, &ada, &path, json!({"status": "active"})).await;
    assert_eq!(status, 200, "{active}");
    assert_eq!(active["status"], "active");
    assert!(active["startedAt"].is_string());
    assert!(live_ids(&p, &t).await.contains(&id));

    // 4. Heartbeats and viewer counts.
    let (status, beat) = post(
        &p,
        &ada,
        &format!("/api/sessions/{id}/heartbeat"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{beat}");
    for count in [3, 7, 5] {
        let (status, body) = post(
            &p,
            &ada,
            &format!("/api/broadcasts/{id}/viewer-count"),
            json!({"viewerCount": count}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }

    // 5. Completed: out of the listings, analytics final, no more publishing.
    let (status, done) = post(&p, &ada, &path, json!({"status": "completed"})).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed");
    assert!(!live_ids(&p, &t).await.contains(&id));
    let (status, analytics) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{analytics}");
    assert_eq!(analytics["peakViewers"], 7);
    assert_eq!(analytics["averageViewers"], 5.0);
    assert_eq!(analytics["viewerReports"], 3);
    assert!(
        analytics["durationSeconds"]
            .as_i64()
            .is_some_and(|d| d >= 0)
    );
    assert!(analytics["endedAt"].is_string());

    let (status, refused) = token(&p, &t, &id, &ada.id, "publisher").await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("broadcast_ended"))
    );
    let (status, viewer) = token(&p, &t, &id, "viewer-1", "subscriber").await;
    assert_eq!(status, 200, "{viewer}");
    assert_eq!(verified(&viewer).video.can_publish, Some(false));

    // A final broadcast moves nowhere and takes no more reports.
    let (status, moved) = post(&p, &ada, &path, json!({"status": "active"})).await;
    assert_eq!(
        (status, moved["code"].as_str()),
        (409, Some("invalid_transition"))
    );
    assert_eq!(moved["allowed"], json!([]));
    let (status, _) = post(
        &p,
        &ada,
        &format!("/api/sessions/{id}/heartbeat"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 409);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_owner_changes_a_broadcast() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let (ada, bob) = (p.signup(&t, "ada").await, p.signup(&t, "bob").await);
    let (_, b) = post(&p, &ada, "/api/broadcasts", json!({"title": "Ada's"})).await;
    let id = b["id"].as_str().unwrap();
    for (path, body) in [
        (
            format!("/api/broadcasts/{id}/status"),
            json!({"status": "active"}),
        ),
        (format!("/api/sessions/{id}/heartbeat"), Value::Null),
        (
            format!("/api/broadcasts/{id}/viewer-count"),
            json!({"viewerCount": 1}),
        ),
        (
            format!("/api/broadcasts/{id}/stream-key/reset"),
            Value::Null,
        ),
    ] {
        let (status, body) = post(&p, &bob, &path, body).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    // Bob sees the public view: no ingest credentials.
    let (status, seen) = p
        .as_user(&bob, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    assert!(seen.get("streamKey").is_none() && seen.get("rtmpUrl").is_none());
    assert_eq!(seen["status"], "pending");

    // The owner's key reset invalidates the old key.
    let (status, reset) = post(
        &p,
        &ada,
        &format!("/api/broadcasts/{id}/stream-key/reset"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{reset}");
    assert_ne!(reset["streamKey"], b["streamKey"]);
    assert!(
        reset["rtmpUrl"]
            .as_str()
            .unwrap()
            .ends_with(reset["streamKey"].as_str().unwrap())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_and_nothing_is_stored() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let many_tags: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
    let many_keys: serde_json::Map<String, Value> =
        (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    for (body, field) in [
        (json!({"title": "x", "tags": many_tags}), "tags"),
        (json!({"title": "x", "metadata": many_keys}), "metadata"),
        (
            json!({"title": "x", "metadata": {"big": "x".repeat(1025)}}),
            "metadata.big",
        ),
        (json!({"title": "x", "metadata": {"n": 1}}), "metadata.n"),
        (
            json!({"title": "x", "visibility": "everyone"}),
            "visibility",
        ),
        (
            json!({"title": "x", "deviceWidth": -1, "deviceHeight": 10}),
            "deviceWidth",
        ),
        // The two dimensions go together.
        (json!({"title": "x", "deviceHeight": 844}), "deviceWidth"),
        (json!({"title": "x", "colour": "red"}), "colour"),
        (json!({}), "title"),
    ] {
        let (status, answer) = post(&p, &ada, "/api/broadcasts", body.clone()).await;
        assert_eq!(status, 422, "{body} -> {answer}");
        let fields: Vec<&str> = answer["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert!(fields.contains(&field), "{field} not in {answer}");
    }
    let (status, answer) = post(
        &p,
        &ada,
        "/api/streaming/sessions",
        json!({"title": "x", "maxParticipants": 1001}),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    let (status, answer) = post(
        &p,
        &ada,
        "/api/streaming/sessions",
        json!({"title": "x", "maxParticipants": 0}),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    let (_, mine) = p
        .as_user(&ada, Method::GET, "/api/broadcasts")
        .answer()
        .await;
    assert_eq!(mine["total"], 0, "nothing was stored: {mine}");

    let (_, b) = post(&p, &ada, "/api/broadcasts", json!({"title": "ok"})).await;
    let id = b["id"].as_str().unwrap();
    for (path, body, expected) in [
        (
            format!("/api/broadcasts/{id}/status"),
            json!({"status": "live"}),
            422,
        ),
        (
            format!("/api/broadcasts/{id}/status"),
            json!({"status": "pending"}),
            422,
        ),
        (
            format!("/api/broadcasts/{id}/viewer-count"),
            json!({"viewerCount": -1}),
            422,
        ),
        (
            format!("/api/broadcasts/{id}/viewer-count"),
            json!({"viewerCount": "3"}),
            422,
        ),
        (format!("/api/broadcasts/{id}/viewer-count"), json!({}), 422),
        (
            "/api/broadcasts/not-a-uuid/status".to_string(),
            json!({"status": "active"}),
            400,
        ),
        ("/api/sessions/123/heartbeat".to_string(), Value::Null, 400),
    ] {
        let (status, answer) = post(&p, &ada, &path, body).await;
        assert_eq!(status, expected, "{path}: {answer}");
        assert!(answer["code"].is_string(), "problem+json: {answer}");
    }
    let (_, again) = p
        .as_user(&ada, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(
        (again["status"].as_str(), again["viewerCount"].as_i64()),
        (Some("pending"), Some(0))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streaming_session_is_a_broadcast() {
    let p = platform_with_sfu().await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let (status, s) = post(
        &p,
        &ada,
        "/api/streaming/sessions",
        json!({"title": "Panel", "visibility": "public", "maxParticipants": 5}),
    )
    .await;
    assert_eq!(status, 200, "{s}");
    let id = s["id"].as_str().unwrap();
    assert_eq!(s["maxParticipants"], 5);
    assert_eq!(s["roomName"], s["streamId"]);
    assert_eq!(s["serverUrl"], "ws://127.0.0.1:7880");
    assert_eq!(s["sfuConfigured"], true);

    // The same record through the broadcast endpoints, and the reverse.
    let (status, b) = p
        .as_user(&ada, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (b["streamId"].clone(), b["maxParticipants"].clone()),
        (s["streamId"].clone(), json!(5))
    );
    let (_, default) = post(
        &p,
        &ada,
        "/api/streaming/sessions",
        json!({"title": "Default size"}),
    )
    .await;
    assert_eq!(default["maxParticipants"], 100);
    let (_, broadcast) = post(&p, &ada, "/api/broadcasts", json!({"title": "Plain"})).await;
    let (status, as_session) = p
        .as_user(
            &ada,
            Method::GET,
            &format!(
                "/api/streaming/sessions/{}",
                broadcast["id"].as_str().unwrap()
            ),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(as_session["roomName"], broadcast["streamId"]);

    // The room's size travels in the token, so the SFU enforces it.
    let (status, answer) = token(&p, &t, id, &ada.id, "publisher").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        verified(&answer).room_config.map(|c| c.max_participants),
        Some(5)
    );

    let (_, list) = p
        .as_user(&ada, Method::GET, "/api/broadcasts")
        .answer()
        .await;
    assert_eq!(list["total"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_events() {
    let p = platform_with_sfu().await;
    let t = p.register_client("Acme").await;
    let (ada, bob) = (p.signup(&t, "ada").await, p.signup(&t, "bob").await);
    let (status, e) = post(
        &p,
        &ada,
        "/api/events",
        json!({"title": "Launch", "scheduledFor": "2031-05-01T18:00:00Z", "playbackUrl": "https://cdn.example/intro%20video.mp4?x=1"}),
    )
    .await;
    assert_eq!(status, 200, "{e}");
    let id = e["id"].as_str().unwrap().to_string();
    assert_eq!(e["scheduledFor"], "2031-05-01T18:00:00Z");
    assert_eq!(e["roomName"], e["streamId"]);
    let stream_id = e["streamId"].as_str().unwrap();
    // The same identity rules as a broadcast.
    let key = e["streamKey"].as_str().unwrap();
    assert!(domain::media::is_stream_key(key), "{key}");
    assert_ne!(key, stream_id.replace('-', ""));
    assert_eq!(
        e["hlsUrl"],
        format!("http://127.0.0.1:8080/hls/{stream_id}/index.m3u8")
    );
    assert_eq!(e["shortId"].as_str().unwrap().len(), 8);
    assert_eq!(
        e["playbackFile"],
        json!({"url": "https://cdn.example/intro%20video.mp4?x=1", "type": "video"})
    );
    assert_eq!(
        e["egressPlayerUrl"],
        "http://127.0.0.1:3000/egress-player?file=https%3A%2F%2Fcdn.example%2Fintro%2520video.mp4%3Fx%3D1&type=video"
    );
    let (_, private) = post(&p, &ada, "/api/events", json!({"title": "Rehearsal", "scheduledFor": "2031-04-30T18:00:00Z", "visibility": "private"})).await;
    let private_id = private["id"].as_str().unwrap();

    // Ada sees both, soonest first; Bob only the public one, without the stream key.
    let (_, mine) = p.as_user(&ada, Method::GET, "/api/events").answer().await;
    let titles: Vec<&str> = mine["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Rehearsal", "Launch"]);
    let (_, bobs) = p
        .as_user(&bob, Method::GET, "/api/events?upcoming=true")
        .answer()
        .await;
    assert_eq!(bobs["total"], 1);
    assert!(bobs["items"][0].get("streamKey").is_none());
    let (status, _) = p
        .as_user(&bob, Method::GET, &format!("/api/events/{private_id}"))
        .answer()
        .await;
    assert_eq!(status, 404);

    // Tokens by the event's room name and short id.
    for form in [stream_id, e["shortId"].as_str().unwrap()] {
        let (status, answer) = token(&p, &t, form, &ada.id, "publisher").await;
        assert_eq!(status, 200, "{form}: {answer}");
        assert_eq!(verified(&answer).video.room, stream_id);
        assert_eq!(answer["sessionId"], id.as_str());
    }

    // Bad input stores nothing; only the owner deletes.
    for body in [
        json!({"title": "Past", "scheduledFor": "2001-01-01T00:00:00Z"}),
        json!({"title": "Bad", "scheduledFor": "soon"}),
        json!({"title": "Bad", "scheduledFor": "2031-01-01T00:00:00Z", "playbackUrl": "javascript:alert(1)"}),
        json!({"title": "Bad", "scheduledFor": "2031-01-01T00:00:00Z", "playbackUrl": "https://x.example/a.mp3", "playbackType": "midi"}),
    ] {
        let (status, answer) = post(&p, &ada, "/api/events", body).await;
        assert_eq!(status, 422, "{answer}");
    }
    let (status, _) = p
        .as_user(&bob, Method::DELETE, &format!("/api/events/{id}"))
        .answer()
        .await;
    assert_eq!(status, 403);
    let (status, _) = p
        .as_user(&ada, Method::DELETE, &format!("/api/events/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, _) = p
        .as_user(&ada, Method::GET, &format!("/api/events/{id}"))
        .answer()
        .await;
    assert_eq!(status, 404);
    let (status, _) = token(&p, &t, stream_id, &ada.id, "subscriber").await;
    assert_eq!(status, 404, "a deleted event's room is gone");
    let (_, left) = p.as_user(&ada, Method::GET, "/api/events").answer().await;
    assert_eq!(left["total"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn token_id_forms_tenancy_and_refusals() {
    let p = platform_with_sfu().await;
    let (acme, other) = (
        p.register_client("Acme").await,
        p.register_client("Other").await,
    );
    let ada = p.signup(&acme, "ada").await;
    let (_, b) = post(&p, &ada, "/api/broadcasts", json!({"title": "Show"})).await;
    let stream_id = b["streamId"].as_str().unwrap();
    for form in [
        b["id"].as_str().unwrap(),
        b["shortId"].as_str().unwrap(),
        stream_id,
    ] {
        let (status, answer) = token(&p, &acme, form, "guest", "subscriber").await;
        assert_eq!(status, 200, "{form}: {answer}");
        assert_eq!(verified(&answer).video.room, stream_id);
        assert_eq!(answer["sessionId"], b["id"]);
    }
    // Another tenant's session is unknown to this API key.
    for form in [
        b["id"].as_str().unwrap(),
        b["shortId"].as_str().unwrap(),
        stream_id,
    ] {
        let (status, answer) = token(&p, &other, form, "guest", "subscriber").await;
        assert_eq!(status, 404, "{answer}");
    }
    let (status, _) = token(
        &p,
        &acme,
        "00000000-0000-4000-8000-000000000000",
        "guest",
        "subscriber",
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = token(&p, &acme, "zzzzzzzz", "guest", "subscriber").await;
    assert_eq!(status, 404);
    let (status, _) = token(&p, &acme, "not..an;id", "guest", "subscriber").await;
    assert_eq!(status, 400);
    let (status, answer) = token(&p, &acme, stream_id, "guest", "admin").await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["errors"][0]["field"], "role");
    let (status, answer) = token(&p, &acme, stream_id, "", "subscriber").await;
    assert_eq!(status, 422, "{answer}");
    let (status, _) = p
        .request(
            Method::POST,
            &format!("/api/streaming/sessions/{stream_id}/token"),
        )
        .send_json(&json!({"userId": "guest", "role": "subscriber"}))
        .await;
    assert_eq!(status, 401, "the API key is required");

    // Without SFU credentials no token can be minted.
    let bare = Platform::start().await;
    let t = bare.register_client("Acme").await;
    let u = bare.signup(&t, "ada").await;
    let (_, b) = post(&bare, &u, "/api/broadcasts", json!({"title": "Show"})).await;
    let (status, answer) = token(&bare, &t, b["id"].as_str().unwrap(), &u.id, "publisher").await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (503, Some("sfu_not_configured"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ice_config_hands_out_time_limited_turn_credentials() {
    use hmac::{Hmac, Mac};
    let p = Platform::start_with(&[
        ("stun_urls", "stun:stun1.example:3478"),
        (
            "turn_urls",
            "turn:turn.example:3478?transport=udp, turns:turn.example:5349",
        ),
        ("turn_secret", "coturn-shared-secret"),
        ("turn_credential_ttl", "600"),
    ])
    .await;
    let t = p.register_client("Acme").await;
    let (status, ice) = p
        .as_client(&t, Method::GET, "/api/streaming/ice-config")
        .answer()
        .await;
    assert_eq!(status, 200, "{ice}");
    assert_eq!(
        ice["iceServers"][0],
        json!({"urls": ["stun:stun1.example:3478"]})
    );
    let turn = &ice["iceServers"][1];
    assert_eq!(
        turn["urls"],
        json!([
            "turn:turn.example:3478?transport=udp",
            "turns:turn.example:5349"
        ])
    );
    let username = turn["username"].as_str().unwrap();
    let (expiry, user) = username.split_once(':').unwrap();
    assert_eq!(user, t.client_id);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let expiry: i64 = expiry.parse().unwrap();
    assert!(
        (now + 590..=now + 610).contains(&expiry),
        "expires in 600 s: {expiry} vs {now}"
    );
    // The credential is what a TURN server with the same secret computes.
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(b"coturn-shared-secret").unwrap();
    mac.update(username.as_bytes());
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    assert_eq!(turn["credential"], expected);

    let (status, _) = p
        .request(Method::GET, "/api/streaming/ice-config")
        .answer()
        .await;
    assert_eq!(status, 401);

    // TURN servers without a secret are a configuration error, not a silent omission.
    let broken = Platform::start_with(&[("turn_urls", "turn:turn.example:3478")]).await;
    let t = broken.register_client("Acme").await;
    let (status, answer) = broken
        .as_client(&t, Method::GET, "/api/streaming/ice-config")
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), answer["code"].as_str()),
        (503, Some("ice_misconfigured"))
    );
}
