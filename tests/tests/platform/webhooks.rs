//! Outbound webhooks end to end: endpoints registered through signed server requests, the
//! `deliver-webhooks` job sending the outbox's events to a real receiver on loopback (the
//! tenant's backend is the external party), every event type arriving signed (checked
//! here from the specification and by the Standard Webhooks Python library), retries with
//! the same `webhook-id`, `Retry-After`, 410, five days of failures, rotation, recovery,
//! refused private addresses, tenant isolation, and no event for a rolled-back change.
//! Time passes through `Platform::advance_clock`, never by sleeping.

use base64::Engine;
use livekit_api::access_token::AccessToken;
use platform_tests::webhook_receiver::{Answer, Received, Receiver, signature_matches};
use platform_tests::{Exchange, Method, Platform, Tenant, User, workspace_root};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const SFU_KEY: &str = "APIwebhookskey";
const SFU_SECRET: &str = "webhooks-sfu-secret-long-enough-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(20);

async fn platform() -> Platform {
    Platform::start_with(&[
        ("webhook_allow_http", "true"),
        ("sfu_api_key", SFU_KEY),
        ("sfu_api_secret", SFU_SECRET),
    ])
    .await
}

/// Registers an endpoint at `url`; answers `(id, secret)`.
async fn register(p: &Platform, t: &Tenant, url: &str, events: Value) -> (String, String) {
    let (status, ep) = p
        .as_server(
            t,
            Method::POST,
            "/api/v1/webhooks",
            Some(&json!({"url": url, "events": events, "description": "backend"})),
        )
        .answer()
        .await;
    assert_eq!(status, 201, "{ep}");
    (
        ep["id"].as_str().unwrap().to_string(),
        ep["secret"].as_str().unwrap().to_string(),
    )
}

async fn server(
    p: &Platform,
    t: &Tenant,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let (status, answer) = p.as_server(t, method, path, body.as_ref()).answer().await;
    (status.as_u16(), answer)
}

/// Runs the delivery job until it reports nothing left (as the scheduler would).
async fn deliver(p: &Platform) -> Vec<Value> {
    let mut reports = Vec::new();
    for _ in 0..20 {
        let report = p.run_job("deliver-webhooks").await;
        let remaining = report["remaining"].as_i64().unwrap();
        reports.push(report);
        if remaining == 0 {
            break;
        }
    }
    reports
}

/// Checks every request's signature with `secret`, here and (for requests signed at the
/// real time: the library refuses timestamps 5 min away) with the Python library.
fn assert_signed(received: &[Received], secret: &str) {
    for r in received {
        // Sent with its length, not chunked (many receivers read a chunked body as empty).
        assert_eq!(
            r.header("content-length"),
            Some(r.body.len().to_string().as_str())
        );
        assert_eq!(r.header("transfer-encoding"), None);
        let (id, ts, sig) = (
            r.header("webhook-id").unwrap(),
            r.header("webhook-timestamp").unwrap(),
            r.header("webhook-signature").unwrap(),
        );
        assert!(
            signature_matches(secret, id, ts, &r.body, sig),
            "bad signature on {id}"
        );
        assert!(!signature_matches(
            "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            id,
            ts,
            &r.body,
            sig
        ));
    }
    let now = platform_tests::unix_now();
    let current: Vec<Received> = received
        .iter()
        .filter(|r| {
            let ts: i64 = r.header("webhook-timestamp").unwrap().parse().unwrap();
            (ts - now).abs() < 240
        })
        .cloned()
        .collect();
    assert!(!current.is_empty(), "nothing for the Python verifier");
    let verdicts = python_verify(&current, secret);
    assert!(
        verdicts.iter().all(|v| v == "ok"),
        "standardwebhooks: {verdicts:?}"
    );
}

/// The Standard Webhooks reference library's verdict on each request (`ok` or its error).
fn python_verify(received: &[Received], secret: &str) -> Vec<String> {
    use std::io::Write;
    let python = workspace_root().join("target/webhook-verifier/bin/python");
    assert!(
        python.exists(),
        "the standardwebhooks verifier is missing: scripts/test installs it into target/webhook-verifier"
    );
    let items: Vec<Value> = received
        .iter()
        .map(|r| {
            let headers: BTreeMap<&str, &str> =
                ["webhook-id", "webhook-timestamp", "webhook-signature"]
                    .into_iter()
                    .map(|h| (h, r.header(h).unwrap()))
                    .collect();
            json!({"secret": secret, "body": String::from_utf8_lossy(&r.body), "headers": headers})
        })
        .collect();
    let mut child = std::process::Command::new(python)
        .arg(workspace_root().join("tests/verify_webhooks.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run the Python verifier");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(items).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the Python verifier failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

async fn new_broadcast(p: &Platform, u: &User, extra: Value) -> Value {
    let mut body = json!({"title": "Show", "visibility": "public"});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    let (status, b) = p
        .as_user(u, Method::POST, "/api/streaming/sessions")
        .send_json(&body)
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

async fn set_status(p: &Platform, u: &User, id: &str, status: &str) -> (u16, Value) {
    let (code, body) = p
        .as_user(u, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": status}))
        .await;
    (code.as_u16(), body)
}

/// Sends a participant webhook signed as LiveKit signs them.
async fn sfu_event(p: &Platform, session: &Value, id: &str, event: &str, identity: &str) {
    let body = json!({
        "id": id,
        "event": event,
        "room": {"name": session["streamId"], "sid": "RM_1"},
        "participant": {"identity": identity, "sid": format!("PA_{identity}"), "metadata": json!({"role": "co_host"}).to_string()},
        "createdAt": "1700000000",
    })
    .to_string();
    let digest = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(body.as_bytes()));
    let jwt = AccessToken::with_api_key(SFU_KEY, SFU_SECRET)
        .with_sha256(&digest)
        .to_jwt()
        .unwrap();
    let (status, answer) = p
        .request(
            Method::POST,
            &format!(
                "/api/streaming/sessions/{}/participants/events",
                session["id"].as_str().unwrap()
            ),
        )
        .header("authorization", jwt)
        .header("content-type", "application/webhook+json")
        .body(body)
        .answer()
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["handled"], true, "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_event_type_arrives_signed_with_the_rest_shape_of_its_object() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    let t = p.register_client("Acme").await;
    let (_, secret) = register(&p, &t, &receiver.url("/hooks"), json!(["*"])).await;

    // user.created
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    // broadcast.created, .started, .stream_key_reset
    let session = new_broadcast(&p, &ada, json!({"cohostPolicy": "approval"})).await;
    let sid = session["id"].as_str().unwrap().to_string();
    assert_eq!(set_status(&p, &ada, &sid, "active").await.0, 200);
    let (status, _) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/broadcasts/{sid}/stream-key/reset"),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    // cohost.requested, then approved, on the SFU (joined, left), removed
    let (status, joined) = p
        .as_user(
            &bob,
            Method::POST,
            &format!("/api/streaming/sessions/{sid}/join-cohost"),
        )
        .send_json(&json!({"userName": "Bob"}))
        .await;
    assert_eq!(status, 200, "{joined}");
    let cohost_id = joined["coHost"]["id"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/streaming/sessions/{sid}/cohosts/{cohost_id}/approve"),
        )
        .send_json(&json!({}))
        .await;
    assert_eq!(status, 200);
    sfu_event(&p, &session, "EV_join", "participant_joined", &bob.id).await;
    sfu_event(&p, &session, "EV_left", "participant_left", &bob.id).await;
    let (status, _) = p
        .as_user(
            &ada,
            Method::DELETE,
            &format!("/api/streaming/sessions/{sid}/cohosts/{cohost_id}"),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    // chat.message_deleted (the owner moderates)
    let chat = format!(
        "/api/streams/{}/chat",
        session["streamId"].as_str().unwrap()
    );
    let (status, message) = p
        .as_user(&bob, Method::POST, &chat)
        .send_json(&json!({"message": "hi"}))
        .await;
    assert_eq!(status, 200, "{message}");
    let message_id = message["id"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(&ada, Method::DELETE, &format!("{chat}/{message_id}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    // file.ready, file.deleted
    let (status, file) = p
        .as_user(&ada, Method::POST, "/api/files?filename=notes.txt")
        .header("content-type", "text/plain")
        .body("hello webhooks")
        .answer()
        .await;
    assert_eq!(status, 201, "{file}");
    let file_id = file["id"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(&ada, Method::DELETE, &format!("/api/files/{file_id}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    // broadcast.ended with the analytics summary
    assert_eq!(set_status(&p, &ada, &sid, "completed").await.0, 200);
    // broadcast.errored: a live broadcast without heartbeats goes stale when read
    let stale = new_broadcast(&p, &ada, json!({})).await;
    let stale_id = stale["id"].as_str().unwrap().to_string();
    assert_eq!(set_status(&p, &ada, &stale_id, "active").await.0, 200);
    p.advance_clock(Duration::from_secs(91));
    let (_, read) = p
        .as_user(&ada, Method::GET, &format!("/api/broadcasts/{stale_id}"))
        .answer()
        .await;
    assert_eq!(read["status"], "error");
    // user.deleted
    let (status, _) = p
        .as_user(&bob, Method::DELETE, "/api/users/profile")
        .answer()
        .await;
    assert_eq!(status, 200);

    let expected = 17;
    deliver(&p).await;
    let received = receiver.wait_for(expected, WAIT).await;
    let events: Vec<Value> = received.iter().map(Received::json).collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let wanted: BTreeSet<&str> = [
        "user.created",
        "user.deleted",
        "broadcast.created",
        "broadcast.started",
        "broadcast.stream_key_reset",
        "broadcast.ended",
        "broadcast.errored",
        "cohost.requested",
        "cohost.joined",
        "cohost.left",
        "cohost.removed",
        "chat.message_deleted",
        "file.ready",
        "file.deleted",
    ]
    .into();
    assert_eq!(
        types.iter().copied().collect::<BTreeSet<_>>(),
        wanted,
        "{types:?}"
    );
    assert_eq!(received.len(), expected, "{types:?}");
    assert_signed(&received, &secret);
    for (r, e) in received.iter().zip(&events) {
        assert_eq!(r.path, "/hooks");
        assert_eq!(
            r.header("webhook-id"),
            e["id"].as_str(),
            "webhook-id is the event id"
        );
        assert!(e["id"].as_str().unwrap().starts_with("evt_"));
        assert!(e["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    let of = |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == kind).collect() };
    // `data` is the object as the REST API answers it.
    let created = of("user.created");
    assert_eq!(created.len(), 2);
    assert!(
        created
            .iter()
            .any(|e| e["data"]["id"] == ada.id.as_str() && e["data"]["username"] == "ada")
    );
    assert!(
        created
            .iter()
            .all(|e| e["data"].get("passwordHash").is_none() && e["data"].get("email").is_none())
    );
    assert_eq!(of("user.deleted")[0]["data"]["id"], bob.id.as_str());
    let started = of("broadcast.started");
    assert_eq!(started.len(), 2);
    let started = started
        .into_iter()
        .find(|e| e["data"]["id"] == sid.as_str())
        .unwrap();
    assert_eq!(started["data"]["status"], "active");
    assert_eq!(started["data"]["streamId"], session["streamId"]);
    let reset = of("broadcast.stream_key_reset")[0];
    assert_ne!(reset["data"]["streamKey"], session["streamKey"]);
    let ended = of("broadcast.ended")[0];
    assert_eq!(ended["data"]["status"], "completed");
    assert_eq!(ended["data"]["analytics"]["broadcastId"], sid.as_str());
    assert!(ended["data"]["analytics"]["durationSeconds"].is_i64());
    assert!(ended["data"]["analytics"]["chatMessages"].is_i64());
    let errored = of("broadcast.errored")[0];
    assert_eq!(errored["data"]["id"], stale_id.as_str());
    assert_eq!(errored["data"]["reason"], "stale");
    for kind in [
        "cohost.requested",
        "cohost.joined",
        "cohost.left",
        "cohost.removed",
    ] {
        let e = of(kind)[0];
        assert_eq!(e["data"]["id"], cohost_id.as_str(), "{kind}");
        assert_eq!(e["data"]["userId"], bob.id.as_str(), "{kind}");
        assert_eq!(e["data"]["sessionId"], sid.as_str(), "{kind}");
    }
    assert_eq!(of("cohost.requested")[0]["data"]["status"], "requested");
    assert_eq!(of("cohost.joined")[0]["data"]["connected"], true);
    assert_eq!(of("cohost.removed")[0]["data"]["status"], "removed");
    let deleted = of("chat.message_deleted")[0];
    assert_eq!(deleted["data"]["id"], message_id.as_str());
    assert_eq!(deleted["data"]["senderId"], bob.id.as_str());
    assert_eq!(deleted["data"]["deletedBy"], ada.id.as_str());
    assert_eq!(deleted["data"]["deleted"], true);
    assert_eq!(of("file.ready")[0]["data"]["id"], file_id.as_str());
    assert_eq!(of("file.ready")[0]["data"]["size"], 14);
    assert_eq!(of("file.deleted")[0]["data"]["id"], file_id.as_str());
    // Each object's events are numbered 1, 2, 3 ... in the order they happened.
    let mut sequences: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for e in &events {
        let object = e["data"]["id"].as_str().unwrap().to_string();
        sequences
            .entry(object)
            .or_default()
            .push(e["sequence"].as_i64().unwrap());
    }
    // Delivered concurrently, they may arrive in any order: `sequence` restores it.
    let mut session_events: Vec<(i64, &str)> = events
        .iter()
        .filter(|e| e["data"]["id"] == sid.as_str())
        .map(|e| (e["sequence"].as_i64().unwrap(), e["type"].as_str().unwrap()))
        .collect();
    session_events.sort();
    let session_events: Vec<&str> = session_events.into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        session_events,
        [
            "broadcast.created",
            "broadcast.started",
            "broadcast.stream_key_reset",
            "broadcast.ended"
        ]
    );
    for (object, mut seen) in sequences {
        seen.sort();
        assert_eq!(
            seen,
            (1..=seen.len() as i64).collect::<Vec<_>>(),
            "{object}"
        );
    }
    // Delivered once each: nothing is left and nothing is sent again.
    let report = p.run_job("deliver-webhooks").await;
    assert_eq!(
        (report["attempted"].as_i64(), report["remaining"].as_i64()),
        (Some(0), Some(0))
    );
    assert_eq!(receiver.received().len(), expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_attempts_are_retried_with_the_same_webhook_id() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    let t = p.register_client("Acme").await;
    let (ep, secret) = register(&p, &t, &receiver.url("/in"), json!(["user.created"])).await;

    // Fails twice, then succeeds: three attempts, one webhook-id.
    receiver.script([Answer::Status(500), Answer::Status(302)]);
    p.signup(&t, "ada").await;
    deliver(&p).await;
    assert_eq!(receiver.wait_for(1, WAIT).await.len(), 1);
    let (_, list) = server(
        &p,
        &t,
        Method::GET,
        &format!("/api/v1/webhooks/{ep}/deliveries"),
        None,
    )
    .await;
    let d = &list["items"][0];
    assert_eq!(
        (
            d["state"].as_str(),
            d["attempts"].as_i64(),
            d["lastStatus"].as_i64()
        ),
        (Some("pending"), Some(1), Some(500))
    );
    assert!(d["nextAttemptAt"].is_string());
    // Not due before its time (about 5 s) ...
    deliver(&p).await;
    assert_eq!(receiver.received().len(), 1);
    p.advance_clock(Duration::from_secs(6));
    deliver(&p).await;
    assert_eq!(receiver.wait_for(2, WAIT).await.len(), 2);
    // ... the second retry waits about 5 minutes (plus up to 10 % jitter).
    p.advance_clock(Duration::from_secs(120));
    deliver(&p).await;
    assert_eq!(receiver.received().len(), 2);
    p.advance_clock(Duration::from_secs(211));
    deliver(&p).await;
    let received = receiver.wait_for(3, WAIT).await;
    assert_eq!(received.len(), 3);
    let ids: BTreeSet<&str> = received
        .iter()
        .map(|r| r.header("webhook-id").unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "one webhook-id across retries");
    assert!(
        received.iter().all(|r| r.body == received[0].body),
        "the same body"
    );
    assert_signed(&received, &secret);
    let (_, list) = server(
        &p,
        &t,
        Method::GET,
        &format!("/api/v1/webhooks/{ep}/deliveries"),
        None,
    )
    .await;
    let d = &list["items"][0];
    assert_eq!(
        (
            d["state"].as_str(),
            d["attempts"].as_i64(),
            d["lastStatus"].as_i64()
        ),
        (Some("delivered"), Some(3), Some(200))
    );
    assert_eq!(d["eventType"], "user.created");
    assert!(d["latencyMs"].is_i64());
    assert!(d["nextAttemptAt"].is_null());

    // Retry-After replaces the scheduled wait.
    receiver.script([Answer::WithHeader(503, "retry-after", "120".into())]);
    p.signup(&t, "bob").await;
    deliver(&p).await;
    assert_eq!(receiver.wait_for(4, WAIT).await.len(), 4);
    p.advance_clock(Duration::from_secs(60));
    deliver(&p).await;
    assert_eq!(receiver.received().len(), 4, "not before Retry-After");
    p.advance_clock(Duration::from_secs(61));
    deliver(&p).await;
    assert_eq!(receiver.wait_for(5, WAIT).await.len(), 5);

    // A manual retry sends a delivered event again, same id.
    let first = list["items"][0]["id"].as_str().unwrap();
    let (status, retried) = server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/deliveries/{first}/retry"),
        None,
    )
    .await;
    assert_eq!(status, 202, "{retried}");
    deliver(&p).await;
    let received = receiver.wait_for(6, WAIT).await;
    assert_eq!(
        received[5].header("webhook-id"),
        received[0].header("webhook-id")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn exhausted_deliveries_fail_and_are_recovered_with_their_ids() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    receiver.always(Answer::Status(500));
    let t = p.register_client("Acme").await;
    let (ep, secret) = register(&p, &t, &receiver.url("/in"), json!(["*"])).await;
    let (status, test) = server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/test"),
        None,
    )
    .await;
    assert_eq!(status, 202, "{test}");
    // 1 attempt + 7 retries (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, each + <= 10 %).
    deliver(&p).await;
    for wait in [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000] {
        p.advance_clock(Duration::from_secs(wait + wait / 10 + 1));
        deliver(&p).await;
    }
    let received = receiver.wait_for(8, WAIT).await;
    assert_eq!(received.len(), 8);
    let (_, list) = server(
        &p,
        &t,
        Method::GET,
        &format!("/api/v1/webhooks/{ep}/deliveries"),
        None,
    )
    .await;
    let d = &list["items"][0];
    assert_eq!(
        (d["state"].as_str(), d["attempts"].as_i64()),
        (Some("failed"), Some(8))
    );
    assert_eq!(d["eventType"], "webhook.test");
    assert_eq!(d["eventId"], test["eventId"]);
    p.advance_clock(Duration::from_secs(36_000));
    deliver(&p).await;
    assert_eq!(receiver.received().len(), 8, "no attempt after the last");

    // The receiver is fixed; the tenant recovers the window.
    receiver.always(Answer::Status(204));
    let (status, bad) = server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/recover"),
        Some(json!({"since": "yesterday"})),
    )
    .await;
    assert_eq!(status, 422, "{bad}");
    // A window must end after it starts; an absent end is now, so a start to come is refused.
    for window in [
        json!({"since": "2001-01-01T00:00:00Z", "until": "2000-01-01T00:00:00Z"}),
        json!({"since": "2001-01-01T00:00:00Z", "until": "2001-01-01T00:00:00Z"}),
        json!({"since": "2999-01-01T00:00:00Z"}),
    ] {
        let (status, bad) = server(
            &p,
            &t,
            Method::POST,
            &format!("/api/v1/webhooks/{ep}/recover"),
            Some(window.clone()),
        )
        .await;
        assert_eq!(status, 422, "{window}: {bad}");
        assert_eq!(bad["errors"][0]["field"], "until", "{window}: {bad}");
    }
    let (status, recovered) = server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/recover"),
        Some(json!({"since": "2000-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(status, 202, "{recovered}");
    assert_eq!(recovered["recovered"], 1);
    deliver(&p).await;
    let received = receiver.wait_for(9, WAIT).await;
    assert_eq!(received.len(), 9);
    assert_eq!(received[8].header("webhook-id"), test["eventId"].as_str());
    assert_eq!(received[8].json()["type"], "webhook.test");
    let r = &received[8];
    let (id, ts, sig) = (
        r.header("webhook-id").unwrap(),
        r.header("webhook-timestamp").unwrap(),
        r.header("webhook-signature").unwrap(),
    );
    assert!(signature_matches(&secret, id, ts, &r.body, sig));
}

#[tokio::test(flavor = "multi_thread")]
async fn gone_or_failing_for_five_days_disables_the_endpoint() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    let t = p.register_client("Acme").await;
    let (gone, _) = register(&p, &t, &receiver.url("/gone"), json!(["*"])).await;
    receiver.script([Answer::Status(410)]);
    server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{gone}/test"),
        None,
    )
    .await;
    deliver(&p).await;
    receiver.wait_for(1, WAIT).await;
    let (_, ep) = server(
        &p,
        &t,
        Method::GET,
        &format!("/api/v1/webhooks/{gone}"),
        None,
    )
    .await;
    assert_eq!(ep["enabled"], false);
    assert!(
        ep["disabledReason"].as_str().unwrap().contains("410"),
        "{ep}"
    );
    // A disabled endpoint gets nothing until it is enabled again.
    p.signup(&t, "ada").await;
    deliver(&p).await;
    assert_eq!(receiver.received().len(), 1);
    let (status, ep) = server(
        &p,
        &t,
        Method::PATCH,
        &format!("/api/v1/webhooks/{gone}"),
        Some(json!({"enabled": true})),
    )
    .await;
    assert_eq!(status, 200, "{ep}");
    assert_eq!(
        (ep["enabled"].as_bool(), ep["disabledReason"].is_null()),
        (Some(true), true)
    );
    let (status, _) = server(
        &p,
        &t,
        Method::DELETE,
        &format!("/api/v1/webhooks/{gone}"),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // Every attempt failing for 5 days.
    receiver.always(Answer::Status(500));
    let (failing, _) = register(&p, &t, &receiver.url("/failing"), json!(["*"])).await;
    for day in 0..=5 {
        server(
            &p,
            &t,
            Method::POST,
            &format!("/api/v1/webhooks/{failing}/test"),
            None,
        )
        .await;
        deliver(&p).await;
        let (_, ep) = server(
            &p,
            &t,
            Method::GET,
            &format!("/api/v1/webhooks/{failing}"),
            None,
        )
        .await;
        assert_eq!(ep["enabled"], day < 5, "day {day}: {ep}");
        p.advance_clock(Duration::from_secs(86_400));
    }
    let (_, ep) = server(
        &p,
        &t,
        Method::GET,
        &format!("/api/v1/webhooks/{failing}"),
        None,
    )
    .await;
    assert!(
        ep["disabledReason"].as_str().unwrap().contains("5 days"),
        "{ep}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_secret_signs_alongside_the_new_one_for_a_day() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    let t = p.register_client("Acme").await;
    let (ep, old) = register(&p, &t, &receiver.url("/in"), json!(["*"])).await;
    let (status, rotated) = server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/rotate-secret"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["secret"].as_str().unwrap().to_string();
    assert!(new.starts_with("whsec_") && new != old);
    assert!(rotated["previousSecretExpiresAt"].is_string());
    server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/test"),
        None,
    )
    .await;
    deliver(&p).await;
    let received = receiver.wait_for(1, WAIT).await;
    assert_eq!(
        received[0]
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        2
    );
    assert_signed(&received, &old);
    assert_signed(&received, &new);
    // A day later only the new secret signs.
    p.advance_clock(Duration::from_secs(86_401));
    server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/test"),
        None,
    )
    .await;
    deliver(&p).await;
    let received = receiver.wait_for(2, WAIT).await;
    let last = &received[1..];
    assert_eq!(
        last[0]
            .header("webhook-signature")
            .unwrap()
            .split(' ')
            .count(),
        1
    );
    let (id, ts, sig) = (
        last[0].header("webhook-id").unwrap(),
        last[0].header("webhook-timestamp").unwrap(),
        last[0].header("webhook-signature").unwrap(),
    );
    assert!(signature_matches(&new, id, ts, &last[0].body, sig));
    assert!(!signature_matches(&old, id, ts, &last[0].body, sig));
    // The secret is never shown again.
    let (_, shown) = server(&p, &t, Method::GET, &format!("/api/v1/webhooks/{ep}"), None).await;
    assert!(shown.get("secret").is_none(), "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoints_are_validated_and_belong_to_their_tenant() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    let (t, other) = (
        p.register_client("Acme").await,
        p.register_client("Other").await,
    );
    let (ep, _) = register(&p, &t, &receiver.url("/in"), json!(["user.created"])).await;
    for bad in [
        json!({"url": "ftp://example.com/", "events": ["*"]}),
        json!({"url": "https://user:pw@example.com/", "events": ["*"]}),
        json!({"url": "https://example.com/", "events": []}),
        json!({"url": "https://example.com/", "events": ["broadcast.exploded"]}),
        json!({"url": "https://example.com/", "events": ["*", "user.created"]}),
        json!({"url": "https://example.com/"}),
        json!({"url": "https://example.com/", "events": ["*"], "surprise": 1}),
    ] {
        let (status, answer) =
            server(&p, &t, Method::POST, "/api/v1/webhooks", Some(bad.clone())).await;
        assert_eq!(status, 422, "{bad} -> {answer}");
        assert!(answer["code"].is_string(), "{answer}");
    }
    // Listed, changed, and only by their own tenant.
    let (_, list) = server(&p, &t, Method::GET, "/api/v1/webhooks", None).await;
    assert_eq!(list["total"], 1);
    let (_, list) = server(&p, &other, Method::GET, "/api/v1/webhooks", None).await;
    assert_eq!(list["total"], 0);
    for (method, tail) in [
        (Method::GET, ""),
        (Method::PATCH, ""),
        (Method::DELETE, ""),
        (Method::POST, "/test"),
        (Method::POST, "/rotate-secret"),
        (Method::GET, "/deliveries"),
    ] {
        let body = (method == Method::PATCH).then(|| json!({"enabled": false}));
        let (status, _) = server(
            &p,
            &other,
            method.clone(),
            &format!("/api/v1/webhooks/{ep}{tail}"),
            body,
        )
        .await;
        assert_eq!(status, 404, "{method} {tail}");
    }
    let (status, changed) = server(
        &p,
        &t,
        Method::PATCH,
        &format!("/api/v1/webhooks/{ep}"),
        Some(json!({"events": ["user.deleted"], "description": ""})),
    )
    .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["events"], json!(["user.deleted"]));
    assert_eq!(changed["description"], "");
    // The other tenant's users and this endpoint's unsubscribed types reach nothing.
    p.signup(&other, "stranger").await;
    p.signup(&t, "ada").await;
    deliver(&p).await;
    assert!(receiver.received().is_empty());
    // Unsigned calls are refused.
    let (status, _) = p
        .as_client(&t, Method::GET, "/api/v1/webhooks")
        .answer()
        .await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn private_addresses_are_refused_without_the_local_setting() {
    let p = Platform::start().await;
    let t = p.register_client("Acme").await;
    for url in [
        "http://example.com/hooks",
        "https://localhost/hooks",
        "https://127.0.0.1:8443/",
        "https://10.0.0.7/",
        "https://192.168.1.20/",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://0x7f000001/",
        "https://metadata.google.internal/",
    ] {
        let (status, answer) = server(
            &p,
            &t,
            Method::POST,
            "/api/v1/webhooks",
            Some(json!({"url": url, "events": ["*"]})),
        )
        .await;
        assert_eq!(status, 422, "{url} -> {answer}");
        assert_eq!(answer["errors"][0]["field"], "url", "{answer}");
    }
    let (status, answer) = server(
        &p,
        &t,
        Method::POST,
        "/api/v1/webhooks",
        Some(json!({"url": "https://hooks.example.com/in", "events": ["*"]})),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert!(answer["secret"].as_str().unwrap().starts_with("whsec_"));
}

#[tokio::test(flavor = "multi_thread")]
async fn rolled_back_changes_have_no_event() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    let t = p.register_client("Acme").await;
    register(&p, &t, &receiver.url("/in"), json!(["*"])).await;
    let ada = p.signup(&t, "ada").await;
    let session = new_broadcast(&p, &ada, json!({})).await;
    let sid = session["id"].as_str().unwrap().to_string();
    // Racing sign-ups for one name and racing moves to `active`: the losers' changes roll
    // back (the unique index, the guarded status update), and with them their events.
    let signups = (0..6).map(|n| {
        p.as_client(&t, Method::POST, "/api/users/signup")
            .json(&json!({
                "username": "racer",
                "email": format!("racer{n}@example.com"),
                "password": "correct horse battery",
            }))
    });
    let starts = (0..6).map(|_| {
        p.as_user(&ada, Method::POST, &format!("/api/broadcasts/{sid}/status"))
            .json(&json!({"status": "active"}))
    });
    let answers = futures_util::future::join_all(signups.chain(starts).map(|r| r.status())).await;
    let signed_up = answers[..6].iter().filter(|s| s.as_u16() == 200).count();
    assert_eq!(signed_up, 1, "{answers:?}");
    assert!(
        answers[6..]
            .iter()
            .all(|s| s.as_u16() == 200 || s.as_u16() == 409),
        "{answers:?}"
    );
    deliver(&p).await;
    // ada's user.created, broadcast.created, one racer's user.created, one broadcast.started.
    let received = receiver.wait_for(4, WAIT).await;
    let types: Vec<String> = received
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(received.len(), 4, "{types:?}");
    assert_eq!(
        types.iter().filter(|t| *t == "broadcast.started").count(),
        1,
        "{types:?}"
    );
    assert_eq!(
        types.iter().filter(|t| *t == "user.created").count(),
        2,
        "{types:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_that_never_answers_does_not_hold_up_the_api() {
    let p = platform().await;
    let receiver = Receiver::start().await;
    receiver.always(Answer::Hang);
    let t = p.register_client("Acme").await;
    let (ep, _) = register(&p, &t, &receiver.url("/in"), json!(["*"])).await;
    server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{ep}/test"),
        None,
    )
    .await;
    let job = {
        let token = p.variable("jobs_token").unwrap();
        let request = p
            .request(Method::POST, "/api/jobs/deliver-webhooks")
            .bearer_auth(token);
        tokio::spawn(async move { request.answer().await })
    };
    receiver.wait_for(1, WAIT).await;
    // While the delivery hangs, the API keeps answering.
    for n in 0..5 {
        p.signup(&t, &format!("user{n}")).await;
    }
    assert!(!job.is_finished(), "the hanging delivery is still waiting");
    let (status, report) = job.await.unwrap();
    assert_eq!(status, 200, "{report}");
    let (_, list) = server(
        &p,
        &t,
        Method::GET,
        &format!("/api/v1/webhooks/{ep}/deliveries"),
        None,
    )
    .await;
    let d = &list["items"][0];
    assert_eq!(d["state"], "pending");
    assert!(d["lastError"].as_str().unwrap().contains("15 s"), "{d}");
    // A port nothing listens on reads the same as the silent receiver, with no latency:
    // deliveries cannot be used to scan what the platform can reach.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (refused, _) = register(&p, &t, &format!("http://{closed}/in"), json!(["*"])).await;
    server(
        &p,
        &t,
        Method::POST,
        &format!("/api/v1/webhooks/{refused}/test"),
        None,
    )
    .await;
    p.run_job("deliver-webhooks").await;
    let (_, list) = server(
        &p,
        &t,
        Method::GET,
        &format!("/api/v1/webhooks/{refused}/deliveries"),
        None,
    )
    .await;
    let r = &list["items"][0];
    assert_eq!(r["lastError"], d["lastError"], "{r}");
    assert!(
        r["latencyMs"].is_null() && d["latencyMs"].is_null(),
        "{r} {d}"
    );
    assert!(!r.to_string().contains("ErrorCode"), "{r}");
}
