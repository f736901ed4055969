//! The hostile suite: each test performs an attack against the real application in edgehost
//! over loopback and shows it refused, with nothing changed. The API key is public (every
//! app ships it), so every attack starts from it.
//!
//! Covered: the trust model's numbered attacks (token takeover with the API key, the
//! tenant's `/api/v1/` without a signature, co-hosting without consent, another user's
//! private file, the relay secret as a master key), and the wider classes of the OWASP API
//! Top 10 (2023): broken object level authorization (API1), broken authentication (API2),
//! unrestricted resource consumption (API4), broken function level authorization (API5).

use livekit_api::access_token::{AccessToken, VideoGrants};
use platform_tests::{Exchange, Method, Platform, Tenant, User, sign, unix_now};
use serde_json::{Value, json};
use std::time::Duration;

const SFU_KEY: &str = "APIattackkey";
const SFU_SECRET: &str = "attack-sfu-secret-long-enough-0123456789abcdef";
const RELAY_SECRET: &str = "relay-secret-for-the-hostile-suite-0123456789";
const JOBS_TOKEN: &str = "jobs-token-for-the-hostile-suite-0123456789";

async fn platform() -> Platform {
    Platform::start_with(&[
        ("sfu_api_key", SFU_KEY),
        ("sfu_api_secret", SFU_SECRET),
        ("relay_secret", RELAY_SECRET),
        ("jobs_token", JOBS_TOKEN),
    ])
    .await
}

/// A tenant with a host (ada) and another user (eve).
async fn cast(p: &Platform) -> (Tenant, User, User) {
    let t = p.register_client("Victim").await;
    let ada = p.signup(&t, "ada").await;
    let eve = p.signup(&t, "eve").await;
    (t, ada, eve)
}

/// A broadcast of `owner` with `visibility`, moved to `active`.
async fn live_broadcast(p: &Platform, owner: &User, visibility: &str) -> Value {
    p.live_broadcast(owner, visibility).await
}

async fn owner_view(p: &Platform, owner: &User, id: &str) -> Value {
    let (status, b) = p
        .as_user(owner, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

/// A server-tier route refuses the API key alone and a user's token (401), for each of
/// `methods`, with `body` sent.
async fn server_tier_only(
    p: &Platform,
    t: &Tenant,
    user: &User,
    methods: &[Method],
    path: &str,
    body: &Value,
) {
    for method in methods {
        let (status, answer) = p
            .request(method.clone(), path)
            .header("x-api-key", &t.api_key)
            .send_json(body)
            .await;
        assert_eq!(
            status, 401,
            "{method} {path} with the API key alone: {answer}"
        );
        let (status, answer) = p.as_user(user, method.clone(), path).send_json(body).await;
        assert_eq!(status, 401, "{method} {path} as a user: {answer}");
    }
}

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

/// Sends a token request built by `builder` with `body` (`None`: the builder holds it).
async fn token(builder: reqwest::RequestBuilder, body: Option<Value>) -> (u16, Value) {
    let (status, answer) = match body {
        Some(body) => builder.send_json(&body).await,
        None => builder.answer().await,
    };
    (status.as_u16(), answer)
}

fn token_path(id: &str) -> String {
    format!("/api/streaming/sessions/{id}/token")
}

/// Attack 1: publisher and private viewer tokens from the public API key alone, and a user
/// minting tokens for someone else's identity or broadcast.
#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_alone_mints_no_publisher_and_no_private_viewer() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let public = live_broadcast(&p, &ada, "public").await;
    let private = live_broadcast(&p, &ada, "private").await;
    let public_id = public["id"].as_str().unwrap();
    let private_id = private["id"].as_str().unwrap();

    // The API key and the owner's id: no publisher token.
    let (status, body) = token(
        p.as_client(&t, Method::POST, &token_path(public_id)),
        Some(json!({"userId": ada.id, "role": "publisher"})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (401, "publisher_requires_user"),
        "{body}"
    );

    // The API key: no viewer token for a private broadcast (as unknown as a missing one).
    for id in [
        private_id,
        private["streamId"].as_str().unwrap(),
        private["shortId"].as_str().unwrap(),
    ] {
        let (status, body) = token(
            p.as_client(&t, Method::POST, &token_path(id)),
            Some(json!({"userId": ada.id, "role": "subscriber"})),
        )
        .await;
        assert_eq!(status, 404, "{body}");
    }

    // A guest of a public broadcast gets a generated identity, whatever it names.
    let (status, body) = token(
        p.as_client(&t, Method::POST, &token_path(public_id)),
        Some(json!({"userId": ada.id, "role": "subscriber", "name": "Guest"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let identity = body["identity"].as_str().unwrap();
    assert!(
        identity.starts_with("guest-") && identity != ada.id,
        "{body}"
    );
    assert_eq!(body["role"], "subscriber");

    // Eve, signed in, cannot publish to Ada's broadcast, nor mint for Ada's identity.
    let (status, body) = token(
        p.as_user(&eve, Method::POST, &token_path(public_id)),
        Some(json!({"role": "publisher"})),
    )
    .await;
    assert_eq!((status, code(&body)), (403, "not_a_host"), "{body}");
    let (status, body) = token(
        p.as_user(&eve, Method::POST, &token_path(public_id)),
        Some(json!({"userId": ada.id, "role": "subscriber"})),
    )
    .await;
    assert_eq!((status, code(&body)), (403, "identity_mismatch"), "{body}");
    let (status, body) = token(
        p.as_user(&eve, Method::POST, &token_path(private_id)),
        Some(json!({"role": "subscriber"})),
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // The owner and the tenant's server still get what they may.
    let (status, body) = token(
        p.as_user(&ada, Method::POST, &token_path(private_id)),
        Some(json!({"role": "publisher"})),
    )
    .await;
    assert_eq!(
        (status, body["identity"].as_str()),
        (200, Some(ada.id.as_str())),
        "{body}"
    );
    let (status, body) = token(
        p.as_server(
            &t,
            Method::POST,
            &token_path(private_id),
            Some(&json!({"userId": "recorder-1", "role": "subscriber"})),
        ),
        None,
    )
    .await;
    assert_eq!(
        (status, body["identity"].as_str()),
        (200, Some("recorder-1")),
        "{body}"
    );
}

/// Attack 2: the tenant's `/api/v1/` with the API key alone (or with a user's token).
#[tokio::test(flavor = "multi_thread")]
async fn the_tenant_api_refuses_unsigned_calls_and_changes_nothing() {
    let p = platform().await;
    let (t, ada, _eve) = cast(&p).await;
    let live = live_broadcast(&p, &ada, "private").await;
    let id = live["id"].as_str().unwrap();

    for (method, path) in [
        (Method::GET, "/api/v1/sessions".to_string()),
        (Method::GET, "/api/v1/users".to_string()),
        (Method::POST, "/api/v1/sessions".to_string()),
        (Method::PATCH, format!("/api/v1/sessions/{id}")),
    ] {
        let body = json!({"status": "completed", "title": "Hijack"});
        let (status, answer) = p
            .as_client(&t, method.clone(), &path)
            .send_json(&body)
            .await;
        assert_eq!(
            (status.as_u16(), code(&answer)),
            (401, "signature_required"),
            "{method} {path}: {answer}"
        );
        // A user's token is no signature either.
        let (status, answer) = p
            .as_user(&ada, method.clone(), &path)
            .send_json(&body)
            .await;
        assert_eq!(
            (status.as_u16(), code(&answer)),
            (401, "signature_required"),
            "{method} {path}: {answer}"
        );
    }
    // A signature made with the public key, or a wrong secret, is refused.
    let ts = unix_now().to_string();
    let forged = sign(&t.api_key, &format!("GET/api/v1/users{ts}"));
    let (status, answer) = p
        .as_client(&t, Method::GET, "/api/v1/users")
        .header("x-timestamp", &ts)
        .header("x-signature", forged)
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), code(&answer)),
        (401, "signature_mismatch"),
        "{answer}"
    );

    // Nothing changed: still live, still titled as before, no session was created.
    let b = owner_view(&p, &ada, id).await;
    assert_eq!(
        (b["status"].as_str(), b["title"].as_str()),
        (Some("active"), Some("Show"))
    );
    let (status, list) = p
        .as_server(&t, Method::GET, "/api/v1/sessions", None)
        .answer()
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["total"], 1, "{list}");
}

/// Attack 3: joining someone's live broadcast as co-host without consent, then publishing.
#[tokio::test(flavor = "multi_thread")]
async fn a_cohost_needs_the_hosts_consent_before_publishing() {
    let p = platform().await;
    let (_t, ada, eve) = cast(&p).await;
    let live = live_broadcast(&p, &ada, "public").await;
    let id = live["id"].as_str().unwrap();
    let session = |tail: &str| format!("/api/streaming/sessions/{id}{tail}");

    let (status, joined) = p
        .as_user(&eve, Method::POST, &session("/join-cohost"))
        .send_json(&json!({"userName": "Eve", "permissions": "moderator"}))
        .await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["coHost"]["status"], "requested", "{joined}");
    assert_eq!(joined["success"], true);
    let request_id = joined["coHost"]["id"].as_str().unwrap().to_string();

    // Asking twice changes nothing; asking for a publisher token is refused.
    let (status, again) = p
        .as_user(&eve, Method::POST, &session("/join-cohost"))
        .send_json(&json!({"userName": "Eve"}))
        .await;
    assert_eq!(
        (status.as_u16(), again["coHost"]["id"].as_str()),
        (200, Some(request_id.as_str()))
    );
    let (status, body) = token(
        p.as_user(&eve, Method::POST, &token_path(id)),
        Some(json!({"role": "publisher"})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (403, "cohost_not_approved"),
        "{body}"
    );

    // She cannot approve herself, nor can she change the layout or remove anyone.
    let (status, body) = p
        .as_user(
            &eve,
            Method::POST,
            &session(&format!("/cohosts/{request_id}/approve")),
        )
        .send_json(&json!({"permissions": "moderator"}))
        .await;
    assert_eq!(status, 403, "{body}");
    let (status, multihost) = p
        .as_user(&ada, Method::GET, &session("/multihost"))
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(multihost["activeCoHosts"], 0, "{multihost}");

    // The host approves (with no more than the default preset): now she publishes.
    let (status, approved) = p
        .as_user(
            &ada,
            Method::POST,
            &session(&format!("/cohosts/{request_id}/approve")),
        )
        .send_json(&json!({}))
        .await;
    assert_eq!(
        (status.as_u16(), approved["coHost"]["status"].as_str()),
        (200, Some("active")),
        "{approved}"
    );
    assert_eq!(approved["coHost"]["permissions"]["canRemoveOthers"], false);
    let (status, body) = token(
        p.as_user(&eve, Method::POST, &token_path(id)),
        Some(json!({"role": "publisher"})),
    )
    .await;
    assert_eq!(
        (status, body["role"].as_str()),
        (200, Some("co_host")),
        "{body}"
    );
}

/// Attack 4 and API1 (object level authorization): another user's private objects.
#[tokio::test(flavor = "multi_thread")]
async fn another_users_objects_are_unknown_or_refused() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let other_tenant = p.register_client("Other").await;
    let mallory = p.signup(&other_tenant, "mallory").await;

    // A private file: its metadata and download are 404 to everyone but its owner.
    let (status, file) = p
        .as_user(&ada, Method::POST, "/api/files?filename=secret.txt")
        .header("content-type", "text/plain")
        .body("ada's secret")
        .answer()
        .await;
    assert_eq!(status, 201, "{file}");
    let file_id = file["id"].as_str().unwrap();
    for path in [
        format!("/api/files/{file_id}"),
        format!("/api/files/{file_id}/download"),
        format!("/api/files/{file_id}/public"),
    ] {
        for intruder in [&eve, &mallory] {
            let status = p.as_user(intruder, Method::GET, &path).status().await;
            assert_eq!(status, 404, "{path}");
        }
    }
    assert_eq!(
        p.as_user(&eve, Method::DELETE, &format!("/api/files/{file_id}"))
            .status()
            .await,
        404
    );
    let download = p
        .as_user(&ada, Method::GET, &format!("/api/files/{file_id}/download"))
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    assert_eq!(download.text().await.unwrap(), "ada's secret");

    // A public broadcast: Eve sees it but changes nothing of it.
    let live = live_broadcast(&p, &ada, "public").await;
    let id = live["id"].as_str().unwrap();
    for (method, path, body) in [
        (
            Method::POST,
            format!("/api/broadcasts/{id}/status"),
            json!({"status": "completed"}),
        ),
        (
            Method::PATCH,
            format!("/api/broadcasts/{id}"),
            json!({"title": "Owned"}),
        ),
        (
            Method::POST,
            format!("/api/sessions/{id}/heartbeat"),
            json!({}),
        ),
        (
            Method::POST,
            format!("/api/broadcasts/{id}/viewer-count"),
            json!({"viewerCount": 1}),
        ),
        (
            Method::POST,
            format!("/api/broadcasts/{id}/stream-key/reset"),
            json!({}),
        ),
        (
            Method::PUT,
            format!("/api/streaming/sessions/{id}/layout"),
            json!({"maxHosts": 1}),
        ),
    ] {
        let (status, answer) = p
            .as_user(&eve, method.clone(), &path)
            .send_json(&body)
            .await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        let (status, _) = p
            .as_user(&mallory, method.clone(), &path)
            .send_json(&body)
            .await;
        assert_eq!(status, 404, "{method} {path} across tenants");
    }
    let (status, answer) = p
        .as_user(
            &eve,
            Method::GET,
            &format!("/api/broadcasts/{id}/analytics"),
        )
        .answer()
        .await;
    assert_eq!(status, 403, "{answer}");
    let after = owner_view(&p, &ada, id).await;
    assert_eq!(
        (
            after["status"].as_str(),
            after["title"].as_str(),
            after["streamKey"].as_str()
        ),
        (Some("active"), Some("Show"), live["streamKey"].as_str())
    );
    let (status, seen) = p
        .as_user(&eve, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 200);
    assert!(
        seen.get("streamKey").is_none() && seen.get("rtmpUrl").is_none(),
        "{seen}"
    );

    // A private broadcast is unknown to Eve, whatever she tries.
    let private = live_broadcast(&p, &ada, "private").await;
    let pid = private["id"].as_str().unwrap();
    let stream = private["streamId"].as_str().unwrap();
    for path in [
        format!("/api/broadcasts/{pid}"),
        format!("/api/broadcasts/{pid}/chat"),
        format!("/api/streams/{stream}/chat"),
        format!("/api/streaming/sessions/{pid}/multihost"),
        format!("/api/broadcasts/{pid}/analytics"),
    ] {
        let (status, answer) = p.as_user(&eve, Method::GET, &path).answer().await;
        assert_eq!(status, 404, "{path}: {answer}");
    }
    let (status, _) = p
        .as_user(&eve, Method::POST, &format!("/api/streams/{stream}/chat"))
        .send_json(&json!({"message": "hi"}))
        .await;
    assert_eq!(status, 404);

    // Chat: Eve cannot delete Ada's message; a deleted message keeps no text.
    let (status, msg) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/chat"))
        .send_json(&json!({"message": "my words"}))
        .await;
    assert_eq!(status, 200, "{msg}");
    let stream_id = live["streamId"].as_str().unwrap();
    let msg_path = format!(
        "/api/streams/{stream_id}/chat/{}",
        msg["id"].as_str().unwrap()
    );
    assert_eq!(
        p.as_user(&eve, Method::DELETE, &msg_path).status().await,
        403
    );
    assert_eq!(
        p.as_user(&ada, Method::DELETE, &msg_path).status().await,
        200
    );
    let (_, history) = p
        .as_client(&t, Method::GET, &format!("/api/streams/{stream_id}/chat"))
        .answer()
        .await;
    let item = &history["items"][0];
    assert_eq!(
        (item["deleted"].as_bool(), item["message"].as_str()),
        (Some(true), Some("")),
        "{history}"
    );
    assert!(!history.to_string().contains("my words"));
}

/// Attack 5: the relay's secret is no master key.
#[tokio::test(flavor = "multi_thread")]
async fn the_relay_secret_counts_only_on_the_chat_routes() {
    let p = platform().await;
    let (t, ada, _eve) = cast(&p).await;
    let private = live_broadcast(&p, &ada, "private").await;
    let public = live_broadcast(&p, &ada, "public").await;
    let relay = |method: Method, path: &str| {
        p.request(method, path)
            .header("x-relay-secret", RELAY_SECRET)
            .header("x-tenant-id", &t.client_id)
    };

    // Elsewhere the header counts for nothing.
    for (method, path) in [
        (Method::GET, "/api/v1/sessions".to_string()),
        (Method::POST, "/api/v1/sessions".to_string()),
        (Method::GET, "/api/broadcasts/live".to_string()),
        (Method::GET, "/api/v1/users".to_string()),
        (Method::POST, token_path(public["id"].as_str().unwrap())),
    ] {
        let (status, answer) = relay(method.clone(), &path)
            .send_json(&json!({"title": "x", "role": "subscriber"}))
            .await;
        assert_eq!(
            (status.as_u16(), code(&answer)),
            (401, "missing_api_key"),
            "{method} {path}: {answer}"
        );
    }
    // On the chat routes: anonymous reads see public streams only, and writes need a user.
    let private_chat = format!(
        "/api/streams/{}/chat",
        private["streamId"].as_str().unwrap()
    );
    let public_chat = format!("/api/streams/{}/chat", public["streamId"].as_str().unwrap());
    assert_eq!(relay(Method::GET, &private_chat).status().await, 404);
    assert_eq!(relay(Method::GET, &public_chat).status().await, 200);
    let (status, answer) = relay(Method::POST, &public_chat)
        .send_json(&json!({"message": "spoof"}))
        .await;
    assert_eq!(
        (status.as_u16(), code(&answer)),
        (401, "missing_token"),
        "{answer}"
    );
    // With a wrong secret, nothing.
    let (status, _) = p
        .request(Method::GET, &public_chat)
        .header("x-relay-secret", "guess")
        .header("x-tenant-id", &t.client_id)
        .answer()
        .await;
    assert_eq!(status, 401);
    // Acting as a user, the relay is that user and no more.
    let (status, posted) = relay(Method::POST, &public_chat)
        .bearer_auth(&ada.token)
        .send_json(&json!({"message": "through the relay"}))
        .await;
    assert_eq!(
        (status.as_u16(), posted["senderId"].as_str()),
        (200, Some(ada.id.as_str())),
        "{posted}"
    );
}

/// API5: function level authorization: admin, jobs and SFU routes refuse other credentials.
#[tokio::test(flavor = "multi_thread")]
async fn operator_scheduler_and_sfu_routes_refuse_everyone_else() {
    let p = Platform::start_with(&[
        ("registration_mode", "admin"),
        ("admin_token", "admin-token-for-the-hostile-suite-0123"),
        ("jobs_token", JOBS_TOKEN),
        ("sfu_api_key", SFU_KEY),
        ("sfu_api_secret", SFU_SECRET),
    ])
    .await;
    let registration = json!({"name": "Acme", "contactEmail": "a@example.com", "agreeTerms": true, "agreeDataProcessing": true});
    let (status, _) = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .send_json(&registration)
        .await;
    assert_eq!(status, 401);
    let (status, _) = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .bearer_auth(JOBS_TOKEN)
        .send_json(&registration)
        .await;
    assert_eq!(status, 401);
    let (status, created) = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .bearer_auth("admin-token-for-the-hostile-suite-0123")
        .send_json(&registration)
        .await;
    assert_eq!(status, 200, "{created}");
    let t = Tenant {
        api_key: created["apiKey"].as_str().unwrap().into(),
        secret_key: created["secretKey"].as_str().unwrap().into(),
        client_id: created["clientId"].as_str().unwrap().into(),
    };
    let ada = p.signup(&t, "ada").await;

    // Jobs: only with the jobs token (header or query).
    for builder in [
        p.request(Method::POST, "/api/jobs/prune"),
        p.as_user(&ada, Method::POST, "/api/jobs/prune"),
        p.request(Method::POST, "/api/jobs/prune?token=wrong"),
        p.as_server(&t, Method::POST, "/api/jobs/prune", None),
    ] {
        assert_eq!(builder.status().await, 401);
    }
    let (status, pruned) = p
        .request(Method::POST, "/api/jobs/prune")
        .bearer_auth(JOBS_TOKEN)
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), pruned["job"].as_str()),
        (200, Some("prune")),
        "{pruned}"
    );
    let (status, _) = p
        .request(Method::POST, &format!("/api/jobs/prune?token={JOBS_TOKEN}"))
        .answer()
        .await;
    assert_eq!(status, 200);

    // SFU webhooks: unsigned, or signed with another secret, change nothing.
    let live = live_broadcast(&p, &ada, "public").await;
    let id = live["id"].as_str().unwrap();
    let body = json!({
        "id": "EV_forged", "event": "participant_joined",
        "room": {"name": live["streamId"]}, "participant": {"identity": "eve", "metadata": "{\"role\":\"co_host\"}"},
    })
    .to_string();
    let forged = AccessToken::with_api_key(SFU_KEY, "not-the-sfu-secret-0123456789abcdef")
        .to_jwt()
        .unwrap();
    for auth in [None, Some(forged)] {
        let mut builder = p
            .request(
                Method::POST,
                &format!("/api/streaming/sessions/{id}/participants/events"),
            )
            .header("content-type", "application/json")
            .body(body.clone());
        if let Some(auth) = auth {
            builder = builder.header("authorization", auth);
        }
        assert_eq!(builder.status().await, 401);
    }
    let (status, metrics) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/streaming/sessions/{id}/metrics"),
        )
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), metrics["currentParticipants"].as_u64()),
        (200, Some(0)),
        "{metrics}"
    );
}

/// API2: replayed signatures, even 64 at once, and password guessing, even 64 at once.
#[tokio::test(flavor = "multi_thread")]
async fn replays_and_guesses_in_parallel_are_counted() {
    let p = platform().await;
    let (t, ada, _eve) = cast(&p).await;

    // One signed request, sent 64 times at once: exactly one is accepted.
    let body = json!({"title": "Once"}).to_string();
    let ts = unix_now().to_string();
    let signature = sign(&t.secret_key, &format!("POST/api/v1/sessions{body}{ts}"));
    let sends = (0..64).map(|_| {
        p.as_client(&t, Method::POST, "/api/v1/sessions")
            .header("x-timestamp", &ts)
            .header("x-signature", &signature)
            .header("content-type", "application/json")
            .body(body.clone())
            .answer()
    });
    let answers = futures_util::future::join_all(sends).await;
    let accepted = answers.iter().filter(|(s, _)| *s == 200).count();
    let replayed = answers
        .iter()
        .filter(|(s, b)| *s == 401 && code(b) == "signature_replayed")
        .count();
    assert_eq!((accepted, replayed), (1, 63), "{answers:?}");
    let (_, list) = p
        .as_server(&t, Method::GET, "/api/v1/sessions", None)
        .answer()
        .await;
    assert_eq!(list["total"], 1, "{list}");

    // 64 wrong passwords at once, by e-mail and by username: at most 5 are even checked.
    let guesses = (0..64).map(|i| {
        let login = if i % 2 == 0 {
            json!({"email": "ADA@example.com"})
        } else {
            json!({"username": "ada"})
        };
        let mut body = login;
        body["password"] = json!(format!("guess number {i}"));
        p.as_client(&t, Method::POST, "/api/users/login")
            .json(&body)
            .answer()
    });
    let answers = futures_util::future::join_all(guesses).await;
    let checked = answers.iter().filter(|(s, _)| *s == 401).count();
    let limited = answers.iter().filter(|(s, _)| *s == 429).count();
    assert!(checked <= 5, "{checked} guesses were checked");
    assert_eq!(checked + limited, 64);
    // The account stays locked for the window, even with the right password.
    let (status, _) = p
        .as_client(&t, Method::POST, "/api/users/login")
        .send_json(&json!({"username": "Ada", "password": "correct horse battery"}))
        .await;
    assert_eq!(status, 429);
    // Ada's existing token still works: nothing else changed.
    assert_eq!(
        p.as_user(&ada, Method::GET, "/api/users/profile/full")
            .status()
            .await,
        200
    );
}

/// API4: unrestricted resource consumption: bodies far over the limit are refused before
/// they are read, and reactions are rate limited per user.
#[tokio::test(flavor = "multi_thread")]
async fn oversized_bodies_and_floods_are_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;

    // 100 MB declared on JSON routes of every component: 413 before a byte of it is sent.
    for path in [
        "/api/broadcasts",
        "/api/users/music/link",
        "/api/streaming/sessions/x/token",
    ] {
        let mut socket = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\nx-api-key: {}\r\nauthorization: Bearer {}\r\n\
             content-type: application/json\r\ncontent-length: 104857600\r\n\r\n",
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
        assert_eq!(&reply[9..12], b"413", "{path}");
    }
    // A chunked body with no declared length is cut off once it passes the limit, and the
    // answer says the connection ends (its unread body makes it useless), so a client
    // does not send its next request on it.
    let socket = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    let (mut reading, mut writing) = socket.into_split();
    let head = format!(
        "POST /api/broadcasts HTTP/1.1\r\nhost: {}\r\nx-api-key: {}\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        p.addr(),
        t.api_key,
        ada.token
    );
    let sending = tokio::spawn(async move {
        writing.write_all(head.as_bytes()).await?;
        let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
        for _ in 0..48 {
            writing.write_all(chunk.as_bytes()).await?;
        }
        writing.write_all(b"0\r\n\r\n").await
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), reading.read(&mut buf))
            .await
            .expect("the platform answers")
            .unwrap();
        assert!(n > 0, "the connection closed without an answer");
        answer.extend_from_slice(&buf[..n]);
    }
    let answer = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(answer.starts_with("http/1.1 413"), "{answer}");
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    sending.abort();
    let big = vec![b' '; 3 * 1024 * 1024];
    let stream = futures_util::stream::iter(
        big.chunks(64 * 1024)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let status = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(stream))
        .status()
        .await;
    assert_eq!(status, 413);
    let (_, mine) = p
        .as_user(&ada, Method::GET, "/api/broadcasts")
        .answer()
        .await;
    assert_eq!(mine["total"], 0);

    // Reactions: a viewer is limited; the tenant's server is not.
    let live = live_broadcast(&p, &ada, "public").await;
    let path = format!(
        "/api/v1/sessions/{}/reactions",
        live["id"].as_str().unwrap()
    );
    let mut statuses = Vec::new();
    for _ in 0..25 {
        statuses.push(
            p.as_user(&eve, Method::POST, &path)
                .send_json(&json!({"reaction": "heart"}))
                .await
                .0
                .as_u16(),
        );
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        20,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        5,
        "{statuses:?}"
    );
    let (status, counted) = p
        .as_server(&t, Method::POST, &path, Some(&json!({"reaction": "heart"})))
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), counted["count"].as_i64()),
        (200, Some(21)),
        "{counted}"
    );
    // A guest (API key alone) reacts not at all.
    let (status, _) = p
        .as_client(&t, Method::POST, &path)
        .send_json(&json!({"reaction": "heart"}))
        .await;
    assert_eq!(status, 401);
}

async fn record_page(p: &Platform, stream: &str, query: &str) -> reqwest::Response {
    let path = format!("/streams/{stream}/record{query}");
    p.request(Method::GET, &path).send().await.unwrap()
}

/// The recording page of a private broadcast renders only for egress (a valid SFU token
/// for its room); unknown streams are 404.
#[tokio::test(flavor = "multi_thread")]
async fn private_recording_pages_need_the_egress_token() {
    let p = platform().await;
    let (_t, ada, _eve) = cast(&p).await;
    let private = live_broadcast(&p, &ada, "private").await;
    let public = live_broadcast(&p, &ada, "public").await;
    let room = private["streamId"].as_str().unwrap();
    let egress_token = |secret: &str, room: &str| {
        AccessToken::with_api_key(SFU_KEY, secret)
            .with_identity("EG_recorder")
            .with_grants(VideoGrants {
                room_join: true,
                room: room.to_string(),
                can_subscribe: Some(true),
                hidden: true,
                recorder: true,
                ..Default::default()
            })
            .to_jwt()
            .unwrap()
    };

    assert_eq!(
        record_page(&p, "00000000-0000-4000-8000-000000000000", "")
            .await
            .status(),
        404
    );
    assert_eq!(record_page(&p, room, "").await.status(), 404);
    assert_eq!(record_page(&p, room, "?token=garbage").await.status(), 404);
    let other_room = public["streamId"].as_str().unwrap();
    let wrong_room = egress_token(SFU_SECRET, other_room);
    assert_eq!(
        record_page(&p, room, &format!("?token={wrong_room}"))
            .await
            .status(),
        404
    );
    let wrong_secret = egress_token("another-sfu-secret-0123456789abcdef", room);
    assert_eq!(
        record_page(&p, room, &format!("?token={wrong_secret}"))
            .await
            .status(),
        404
    );

    let good = egress_token(SFU_SECRET, room);
    for token in [good.clone(), format!("sfu_{good}")] {
        let answer = record_page(&p, room, &format!("?token={token}&url=wss://sfu.example")).await;
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.headers()["cache-control"], "no-store");
    }
    let open = record_page(&p, other_room, "").await;
    assert_eq!(open.status(), 200);
}

/// Money: the API key or a user JWT cannot mint tokens, the money jobs are the
/// scheduler's, impossible amounts and private broadcasts are refused, and nothing moves.
#[tokio::test(flavor = "multi_thread")]
async fn money_cannot_be_minted_forged_or_overdrawn() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let credit_path = format!("/api/v1/wallets/{}/credits", eve.id);
    let credit = json!({"tokens": 1_000_000, "reference": "forged"});
    // Minting tokens needs the tenant's signature: the public API key and a user's own
    // JWT are refused.
    for attempt in [
        p.as_client(&t, Method::POST, &credit_path),
        p.as_user(&eve, Method::POST, &credit_path),
    ] {
        let (status, body) = attempt
            .header("idempotency-key", "forge-1")
            .send_json(&credit)
            .await;
        assert_eq!(status, 401, "{body}");
    }
    // The money jobs answer only the scheduler's token.
    for job in ["check-ledger", "renew-subscriptions"] {
        let path = format!("/api/jobs/{job}");
        assert_eq!(p.as_user(&eve, Method::POST, &path).status().await, 401);
        assert_eq!(p.request(Method::POST, &path).status().await, 401);
    }
    // Negative, zero and overflowing amounts are refused.
    for (tokens, quantity) in [(-5, 1), (0, 1), (i64::MAX, 1)] {
        let (status, _) = p
            .as_server(
                &t,
                Method::POST,
                &credit_path,
                Some(&json!({"tokens": tokens, "reference": format!("r{tokens}")})),
            )
            .header("idempotency-key", format!("neg-{tokens}-{quantity}"))
            .answer()
            .await;
        assert_eq!(status, 422);
    }
    let gift = json!({"name": "Huge", "priceTokens": 1_000_000_000});
    let (status, _) = p
        .as_server(&t, Method::PUT, "/api/v1/gifts/huge", Some(&gift))
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, _) = p
        .as_server(
            &t,
            Method::POST,
            &credit_path,
            Some(&json!({"tokens": 100, "reference": "real"})),
        )
        .header("idempotency-key", "real-1")
        .answer()
        .await;
    assert_eq!(status, 201);
    let public = live_broadcast(&p, &ada, "public").await;
    let public_id = public["id"].as_str().unwrap();
    let gifts = format!("/api/broadcasts/{public_id}/gifts");
    let (status, body) = p
        .as_user(&eve, Method::POST, &gifts)
        .header("idempotency-key", "overflow")
        .send_json(&json!({"giftId": "huge", "quantity": 9999}))
        .await;
    assert_eq!((status.as_u16(), code(&body)), (422, "amount_too_large"));
    // A private broadcast of another user is unknown, and gifting it moves nothing.
    let (status, _) = p
        .as_server(
            &t,
            Method::PUT,
            "/api/v1/gifts/rose",
            Some(&json!({"name": "Rose", "priceTokens": 1})),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    let private = live_broadcast(&p, &ada, "private").await;
    let private_gifts = format!("/api/broadcasts/{}/gifts", private["id"].as_str().unwrap());
    let (status, _) = p
        .as_user(&eve, Method::POST, &private_gifts)
        .header("idempotency-key", "private")
        .send_json(&json!({"giftId": "rose"}))
        .await;
    assert_eq!(status, 404);
    // A key replayed by another user answers that user's own request, never the first's.
    let (status, first) = p
        .as_user(&eve, Method::POST, &gifts)
        .header("idempotency-key", "shared")
        .send_json(&json!({"giftId": "rose"}))
        .await;
    assert_eq!(status, 201, "{first}");
    let (status, theirs) = p
        .as_user(&ada, Method::POST, &gifts)
        .header("idempotency-key", "shared")
        .send_json(&json!({"giftId": "rose"}))
        .await;
    assert_eq!(
        (status.as_u16(), code(&theirs)),
        (422, "cannot_gift_yourself")
    );
    let (_, wallet) = p.as_user(&eve, Method::GET, "/api/wallet").answer().await;
    assert_eq!(wallet["tokens"], 99, "one gift of 1 token, nothing else");
    let (status, check) = p
        .request(Method::POST, "/api/jobs/check-ledger")
        .bearer_auth(JOBS_TOKEN)
        .answer()
        .await;
    assert_eq!(status, 200, "{check}");
}

/// Declares a resumable upload of `size` bytes (hash `sha256`) as `user`; answers its id.
async fn declare_upload(p: &Platform, user: &User, size: usize, sha256: &str) -> String {
    let (status, upload) = p
        .as_user(user, Method::POST, "/api/files/uploads")
        .send_json(&json!({"filename": "x.bin", "size": size, "sha256": sha256,
                           "contentType": "application/octet-stream"}))
        .await;
    assert_eq!(status, 201, "{upload}");
    upload["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn resumable_uploads_are_their_owners_and_bounded() {
    use sha2::Digest;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let mallory = p.signup(&other, "mallory").await;
    const MIB: usize = 1024 * 1024;
    let bytes = vec![7u8; 9 * MIB];
    let sha = hex::encode(sha2::Sha256::digest(&bytes));
    let id = declare_upload(&p, &ada, bytes.len(), &sha).await;

    // Another user of the tenant, or of another tenant, finds nothing to read, feed,
    // complete or delete.
    for user in [&eve, &mallory] {
        for (method, path) in [
            (Method::GET, format!("/api/files/uploads/{id}")),
            (Method::POST, format!("/api/files/uploads/{id}/complete")),
            (Method::DELETE, format!("/api/files/uploads/{id}")),
        ] {
            let status = p.as_user(user, method.clone(), &path).status().await;
            assert_eq!(status, 404, "{} {method} {path}", user.id);
        }
        let status = p
            .as_user(
                user,
                Method::PUT,
                &format!("/api/files/uploads/{id}/parts/2"),
            )
            .body(vec![1u8; MIB])
            .status()
            .await;
        assert_eq!(status, 404, "{}", user.id);
    }
    // The API key alone is no user.
    let status = p
        .as_client(&t, Method::PUT, &format!("/api/files/uploads/{id}/parts/2"))
        .body(vec![1u8; MIB])
        .status()
        .await;
    assert_eq!(status, 401);

    // A part above 8 MiB: refused before its body when declared, and while read when not.
    let mut socket = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    let head = format!(
        "PUT /api/files/uploads/{id}/parts/1 HTTP/1.1\r\nhost: {}\r\nx-api-key: {}\r\n\
         authorization: Bearer {}\r\ncontent-length: {}\r\n\r\n",
        p.addr(),
        t.api_key,
        ada.token,
        8 * MIB + 1
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut reply = vec![0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut reply))
        .await
        .expect("the platform answers before the body arrives")
        .unwrap();
    assert_eq!(&reply[9..12], b"413");
    let stream =
        futures_util::stream::iter((0..40).map(|_| Ok::<_, std::io::Error>(vec![1u8; MIB / 4])));
    let (status, answer) = p
        .as_user(
            &ada,
            Method::PUT,
            &format!("/api/files/uploads/{id}/parts/1"),
        )
        .body(reqwest::Body::wrap_stream(stream))
        .answer()
        .await;
    assert_eq!(status, 413, "{answer}");
    let staged = p.kv_keys(&format!("upload:{}:{id}:", t.client_id)).await;
    assert!(
        staged.is_empty(),
        "nothing of a refused part is kept: {staged:?}"
    );

    // The total is bounded by max_upload_bytes (100 MiB here).
    let (status, answer) = p
        .as_user(&ada, Method::POST, "/api/files/uploads")
        .send_json(
            &json!({"filename": "huge.bin", "size": 100 * MIB + 1, "sha256": sha,
                           "contentType": "application/octet-stream"}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), answer["code"].as_str()),
        (413, Some("payload_too_large"))
    );

    // A tampered file (its bytes are not the declared hash) is never made ready.
    let mut tampered = bytes.clone();
    tampered[5] = 0;
    for (n, range) in [(1, 0..8 * MIB), (2, 8 * MIB..9 * MIB)] {
        let (status, answer) = p
            .as_user(
                &ada,
                Method::PUT,
                &format!("/api/files/uploads/{id}/parts/{n}"),
            )
            .body(tampered[range].to_vec())
            .answer()
            .await;
        assert_eq!(status, 200, "{answer}");
    }
    let (status, answer) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/files/uploads/{id}/complete"),
        )
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), answer["code"].as_str()),
        (422, Some("checksum_mismatch"))
    );
    for path in [
        format!("/api/files/{id}"),
        format!("/api/files/{id}/download"),
    ] {
        assert_eq!(
            p.as_user(&ada, Method::GET, &path).status().await,
            404,
            "{path}"
        );
    }
    assert_eq!(
        p.request(Method::GET, &format!("/api/files/{id}/public"))
            .status()
            .await,
        404
    );

    // One user may hold only so many open uploads.
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let (status, _) = p
            .as_user(&eve, Method::POST, "/api/files/uploads")
            .send_json(&json!({"filename": "f.bin", "size": 10, "sha256": sha,
                               "contentType": "application/octet-stream"}))
            .await;
        statuses.push(status.as_u16());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        20,
        "{statuses:?}"
    );
    let (status, answer) = p
        .as_user(&eve, Method::POST, "/api/files/uploads")
        .send_json(&json!({"filename": "f.bin", "size": 10, "sha256": sha,
                           "contentType": "application/octet-stream"}))
        .await;
    assert_eq!(
        (status.as_u16(), answer["code"].as_str()),
        (409, Some("too_many_uploads"))
    );
}

/// Chat moderation (broken function level authorization): a co-host without
/// canModerateChat, a plain viewer and another tenant's user and server can do none of it,
/// and nothing changes.
#[tokio::test(flavor = "multi_thread")]
async fn chat_moderation_is_for_moderators_only() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let carol = p.signup(&t, "carol").await;
    let live = live_broadcast(&p, &ada, "public").await;
    let id = live["id"].as_str().unwrap();
    let chat = format!("/api/streams/{}/chat", live["streamId"].as_str().unwrap());
    // Carol co-hosts with the default preset (no canModerateChat).
    let session = format!("/api/streaming/sessions/{id}");
    let (status, invite) = p
        .as_user(&ada, Method::POST, &format!("{session}/invites"))
        .send_json(&json!({"userId": carol.id, "permissions": "default"}))
        .await;
    assert_eq!(status, 200, "{invite}");
    let (status, joined) = p
        .as_user(&carol, Method::POST, &format!("{session}/join-cohost"))
        .send_json(&json!({"userName": "Carol", "inviteToken": invite["inviteToken"]}))
        .await;
    assert_eq!(status, 200, "{joined}");
    let (status, message) = p
        .as_user(&ada, Method::POST, &chat)
        .send_json(&json!({"message": "hello"}))
        .await;
    assert_eq!(status, 200);
    let message_id = message["id"].as_str().unwrap();
    let (status, report) = p
        .as_user(&eve, Method::POST, &format!("{chat}/{message_id}/report"))
        .send_json(&json!({"reason": "I dislike it"}))
        .await;
    assert_eq!(status, 201, "{report}");
    let report_id = report["id"].as_str().unwrap();

    let other = p.register_client("Attacker").await;
    let mallory = p.signup(&other, "mallory").await;
    let actions = [
        (
            Method::POST,
            format!("{chat}/timeouts"),
            json!({"userId": ada.id, "seconds": 60}),
        ),
        (
            Method::POST,
            format!("{chat}/timeouts"),
            json!({"userId": eve.id, "seconds": 60}),
        ),
        (
            Method::POST,
            format!("{chat}/bans"),
            json!({"userId": eve.id}),
        ),
        (
            Method::DELETE,
            format!("{chat}/bans/{}", eve.id),
            Value::Null,
        ),
        (
            Method::PUT,
            format!("{chat}/settings"),
            json!({"slowModeSeconds": 3600}),
        ),
        (Method::POST, format!("{chat}/clear"), Value::Null),
        (
            Method::PUT,
            format!("{chat}/pin"),
            json!({"messageId": message_id}),
        ),
        (Method::DELETE, format!("{chat}/pin"), Value::Null),
        (Method::GET, format!("{chat}/reports"), Value::Null),
        (
            Method::POST,
            format!("{chat}/reports/{report_id}/resolve"),
            json!({"action": "delete"}),
        ),
        (Method::GET, format!("{chat}/moderation-log"), Value::Null),
        (Method::DELETE, format!("{chat}/{message_id}"), Value::Null),
    ];
    for (method, path, body) in &actions {
        for (name, who, expected) in [
            ("carol", &carol, 403),
            ("eve", &eve, 403),
            ("mallory", &mallory, 404),
        ] {
            let builder = p.as_user(who, method.clone(), path);
            let (status, answer) = if body.is_null() {
                builder.answer().await
            } else {
                builder.send_json(body).await
            };
            assert_eq!(
                status.as_u16(),
                expected,
                "{name} {method} {path}: {answer}"
            );
        }
        // Another tenant's server names a stream it does not have.
        let signed = p.as_server(
            &other,
            method.clone(),
            path,
            (!body.is_null()).then_some(body),
        );
        // (Deleting a message is the user's and the relay's alone: 401 before any lookup.)
        let expected = if *method == Method::DELETE && path.ends_with(message_id) {
            401
        } else {
            404
        };
        assert_eq!(signed.answer().await.0, expected, "server {method} {path}");
    }
    // Another tenant's user cannot report either, nor ban channel-wide across tenants.
    let (status, _) = p
        .as_user(
            &mallory,
            Method::POST,
            &format!("{chat}/{message_id}/report"),
        )
        .send_json(&json!({"reason": "x"}))
        .await;
    assert_eq!(status, 404);
    let (status, refused) = p
        .as_user(&mallory, Method::POST, "/api/users/me/chat/bans")
        .send_json(&json!({"userId": eve.id}))
        .await;
    assert_eq!(
        (status.as_u16(), refused["errors"][0]["field"].as_str()),
        (422, Some("userId")),
        "another tenant's user is unknown here: {refused}"
    );

    // Nothing changed: eve still posts, the modes are off, the message and report stand.
    let (status, _) = p
        .as_user(&eve, Method::POST, &chat)
        .send_json(&json!({"message": "still here"}))
        .await;
    assert_eq!(status, 200);
    let (_, settings) = p
        .as_user(&ada, Method::GET, &format!("{chat}/settings"))
        .answer()
        .await;
    assert_eq!(
        (
            settings["slowModeSeconds"].clone(),
            settings["pinnedMessage"].clone()
        ),
        (json!(0), Value::Null)
    );
    let (_, history) = p.as_user(&ada, Method::GET, &chat).answer().await;
    assert_eq!(history["items"][0]["message"], "hello");
    let (_, queue) = p
        .as_user(&ada, Method::GET, &format!("{chat}/reports"))
        .answer()
        .await;
    assert_eq!(queue["total"], 1);
    let (_, log) = p
        .as_user(&ada, Method::GET, &format!("{chat}/moderation-log"))
        .answer()
        .await;
    assert_eq!(log["total"], 0);
}

/// Outbound webhooks as a weapon: an endpoint aimed at the platform's own network (SSRF),
/// the API key alone or a user's token registering one, another tenant reading or
/// redirecting one, and anyone but the scheduler running the delivery job.
#[tokio::test(flavor = "multi_thread")]
async fn webhooks_reach_no_private_address_and_no_other_tenant() {
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let other = p.register_client("Rival").await;
    for url in [
        "https://127.0.0.1/",
        "https://localhost:3000/api/jobs/prune",
        "https://169.254.169.254/latest/meta-data/iam/",
        "https://[fd00:ec2::254]/",
        "https://10.1.2.3/",
        "https://2130706433/",
        "http://hooks.example.com/",
        // IPv6 forms that carry a loopback or private IPv4 address: compatible,
        // translated, mapped, NAT64, 6to4.
        "https://[::127.0.0.1]/",
        "https://[::ffff:0:7f00:1]/",
        "https://[::ffff:10.0.0.1]/",
        "https://[64:ff9b::a9fe:a9fe]/",
        "https://[2002:7f00:1::]/",
    ] {
        let body = json!({"url": url, "events": ["*"]});
        let (status, answer) = p
            .as_server(&t, Method::POST, "/api/v1/webhooks", Some(&body))
            .answer()
            .await;
        assert_eq!(status, 422, "{url} -> {answer}");
    }
    let body = json!({"url": "https://hooks.example.com/in", "events": ["*"]});
    let (status, _) = p
        .as_client(&t, Method::POST, "/api/v1/webhooks")
        .json(&body)
        .answer()
        .await;
    assert_eq!(status, 401, "the API key alone");
    let (status, _) = p
        .as_user(&ada, Method::POST, "/api/v1/webhooks")
        .json(&body)
        .answer()
        .await;
    assert_eq!(status, 401, "a user's token");
    let (status, ep) = p
        .as_server(&t, Method::POST, "/api/v1/webhooks", Some(&body))
        .answer()
        .await;
    assert_eq!(status, 201, "{ep}");
    let id = ep["id"].as_str().unwrap();
    // The rival tenant can neither see, redirect nor replay it.
    let redirect = json!({"url": "https://rival.example.com/steal"});
    let (status, _) = p
        .as_server(
            &other,
            Method::PATCH,
            &format!("/api/v1/webhooks/{id}"),
            Some(&redirect),
        )
        .answer()
        .await;
    assert_eq!(status, 404);
    let (status, _) = p
        .as_server(
            &other,
            Method::POST,
            &format!("/api/v1/webhooks/{id}/rotate-secret"),
            None,
        )
        .answer()
        .await;
    assert_eq!(status, 404);
    let (_, mine) = p
        .as_server(&t, Method::GET, &format!("/api/v1/webhooks/{id}"), None)
        .answer()
        .await;
    assert_eq!(mine["url"], "https://hooks.example.com/in");
    assert!(
        mine.get("secret").is_none(),
        "the secret is shown once only"
    );
    // The delivery job is the scheduler's alone.
    let (status, _) = p
        .as_user(&ada, Method::POST, "/api/jobs/deliver-webhooks")
        .answer()
        .await;
    assert_eq!(status, 401);
}

/// API1/API2 on recordings: forged egress webhooks cannot plant a recording URL, and a
/// private broadcast's recordings are unknown to whoever may not watch it (in the tenant
/// or outside it). No egress answers here, so the recording ends `failed` after its retry.
#[tokio::test(flavor = "multi_thread")]
async fn recordings_are_moved_only_by_the_sfu_and_seen_only_by_watchers() {
    use base64::Engine as _;
    use sha2::Digest as _;
    let p = platform().await;
    let (_t, ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let mallory = p.signup(&other, "mallory").await;
    let (status, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(
            &json!({"title": "Secret", "visibility": "private", "recording": {"enabled": true}}),
        )
        .await;
    assert_eq!(status, 200, "{b}");
    let id = b["id"].as_str().unwrap();
    let stream_id = b["streamId"].as_str().unwrap();
    p.as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    let list = format!("/api/broadcasts/{id}/recordings");
    let (_, before) = p.as_user(&ada, Method::GET, &list).answer().await;
    assert_eq!(before["total"], 1, "{before}");

    // Egress reports with an attacker's playlist: unsigned, signed with another secret, or
    // a genuine signature over another body.
    let report = |egress_id: &str| {
        json!({"id": "EV_evil", "event": "egress_ended", "egressInfo": {
            "egressId": egress_id, "roomName": stream_id, "status": "EGRESS_COMPLETE",
            "segmentResults": [{"playlistLocation": "https://evil.example/owned.m3u8"}]}})
        .to_string()
    };
    let signed = |body: &str, secret: &str| {
        let digest = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body));
        AccessToken::with_api_key(SFU_KEY, secret)
            .with_sha256(&digest)
            .to_jwt()
            .unwrap()
    };
    let body = report("EG_1");
    let forged = signed(&body, "not-the-sfu-secret-0123456789abcdef");
    let swapped = signed(&report("EG_other"), SFU_SECRET);
    for auth in [None, Some(forged), Some(swapped)] {
        let mut builder = p
            .request(Method::POST, "/api/sfu/webhook")
            .header("content-type", "application/webhook+json")
            .body(body.clone());
        if let Some(auth) = auth {
            builder = builder.header("authorization", auth);
        }
        assert_eq!(builder.status().await, 401);
    }
    let (_, after) = p.as_user(&ada, Method::GET, &list).answer().await;
    assert_eq!(after["items"][0]["status"], before["items"][0]["status"]);
    assert!(!after.to_string().contains("evil.example"), "{after}");

    // Another user of the tenant and a user of another tenant: unknown, for every route.
    let rec = after["items"][0]["id"].as_str().unwrap();
    for user in [&eve, &mallory] {
        for (method, path) in [
            (Method::GET, list.clone()),
            (Method::POST, format!("{list}/start")),
            (Method::POST, format!("{list}/stop")),
            (Method::DELETE, format!("{list}/{rec}")),
        ] {
            let (status, answer) = p.as_user(user, method, &path).answer().await;
            assert_eq!(status.as_u16(), 404, "{path}: {answer}");
        }
    }
    let (_, still) = p.as_user(&ada, Method::GET, &list).answer().await;
    assert_eq!(still["total"], 1);
}

/// A NUL character in a JSON string (valid JSON, found by the API contract fuzzer) once
/// reached PostgreSQL, which refuses it: a 500. Every body field now refuses it with a 422
/// on both back ends, and nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_nul_character_in_a_body_is_refused_not_a_server_error() {
    let p = platform().await;
    let (_, ada, _) = cast(&p).await;
    for body in [
        json!({"name": "mix\u{0}tape"}),
        json!({"name": "ok", "description": "x\u{0}"}),
    ] {
        let (status, answer) = p
            .as_user(&ada, Method::POST, "/api/playlists")
            .send_json(&body)
            .await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["code"], "validation_failed");
    }
    let (status, list) = p
        .as_user(&ada, Method::GET, "/api/playlists")
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(list["total"], 0, "nothing was stored: {list}");
}

/// The media server's calls (`/api/media/...`).
async fn media_call(p: &Platform, path: &str, secret: Option<&str>, body: &Value) -> (u16, Value) {
    let mut builder = p.request(Method::POST, path);
    if let Some(secret) = secret {
        builder = builder.header("x-media-secret", secret);
    }
    let (status, answer) = builder.send_json(body).await;
    (status.as_u16(), answer)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_media_settings_are_its_servers_alone() {
    let p = platform().await;
    let (t, _ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let path = "/api/v1/media-settings";
    let passthrough = json!({"ladder": "passthrough"});
    // The API key alone, or a user's token, reads and changes nothing.
    server_tier_only(
        &p,
        &t,
        &eve,
        &[Method::GET, Method::PATCH],
        path,
        &passthrough,
    )
    .await;
    // One tenant's change, sent 64 times at once, is its own.
    let changes = (0..64).map(|_| {
        p.as_server(&t, Method::PATCH, path, Some(&passthrough))
            .answer()
    });
    let answers = futures_util::future::join_all(changes).await;
    assert!(answers.iter().all(|(s, _)| *s == 200), "{answers:?}");
    let (_, mine) = p.as_server(&t, Method::GET, path, None).answer().await;
    assert_eq!(mine, passthrough);
    let (_, theirs) = p.as_server(&other, Method::GET, path, None).answer().await;
    assert_eq!(
        theirs,
        json!({"ladder": "adaptive"}),
        "the other tenant is untouched"
    );
}

/// A broadcast's replay is the media server's to report and its tenant's to manage: a
/// forged report (no secret, a wrong one, a user's token, the tenant's signature, the
/// relay's or the scheduler's) makes no replay; the settings are the tenant's server's
/// alone and bounded; another tenant's user cannot see or delete a replay, nor a user who
/// does not own the broadcast delete it.
#[tokio::test(flavor = "multi_thread")]
async fn replays_are_reported_by_the_media_server_alone_and_managed_by_their_tenant() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let b = live_broadcast(&p, &ada, "public").await;
    let (id, stream) = (
        b["id"].as_str().unwrap().to_string(),
        b["streamId"].as_str().unwrap().to_string(),
    );
    let (status, ended) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{ended}");
    let secret = p.variable("media_secret").unwrap();
    let path = "/api/media/replay";
    let ready = json!({"streamId": stream, "state": "ready", "duration": 60.0, "renditions": 1});
    let waiting = json!({"streamId": stream, "state": "waiting"});
    for body in [&ready, &waiting] {
        assert_eq!(media_call(&p, path, None, body).await.0, 401);
        assert_eq!(media_call(&p, path, Some("guess"), body).await.0, 401);
        for builder in [
            p.as_user(&eve, Method::POST, path),
            p.as_server(&t, Method::POST, path, Some(body)),
            p.request(Method::POST, path)
                .header("x-relay-secret", RELAY_SECRET),
            p.request(Method::POST, path).bearer_auth(JOBS_TOKEN),
        ] {
            let (status, answer) = builder.send_json(body).await;
            assert_eq!(status, 401, "{answer}");
        }
    }
    assert!(owner_view(&p, &ada, &id).await["replay"].is_null());
    // Even the media server cannot report ready a replay it was never told to write.
    let (status, answer) = media_call(&p, path, Some(&secret), &ready).await;
    assert_eq!(
        (status, &answer["action"]),
        (200, &json!("delete")),
        "{answer}"
    );
    assert!(owner_view(&p, &ada, &id).await["replay"].is_null());
    let (status, answer) = media_call(
        &p,
        path,
        Some(&secret),
        &json!({"streamId": "../../etc", "state": "waiting"}),
    )
    .await;
    assert_eq!(
        (status, &answer["code"]),
        (400, &json!("invalid_stream_id"))
    );
    // Outside the contract: refused whole.
    for bad in [
        json!({"streamId": stream, "state": "ready", "duration": 5.0, "renditions": 0}),
        json!({"streamId": stream, "state": "ready", "duration": -1.0, "renditions": 1}),
        json!({"streamId": stream, "state": "failed", "error": "x".repeat(1001)}),
    ] {
        let (status, answer) = media_call(&p, path, Some(&secret), &bad).await;
        assert_eq!(status, 422, "{bad}: {answer}");
    }
    // The media server's own course: asked, it writes the replay, and reports it ready.
    let (_, answer) = media_call(&p, path, Some(&secret), &waiting).await;
    assert_eq!(answer["action"], "finish", "{answer}");
    assert_eq!(
        owner_view(&p, &ada, &id).await["replay"]["state"],
        "processing"
    );
    let (_, answer) = media_call(&p, path, Some(&secret), &ready).await;
    assert_eq!(answer["action"], "done", "{answer}");
    assert_eq!(owner_view(&p, &ada, &id).await["replay"]["state"], "ready");

    // Another tenant's user and server see no broadcast, so no replay to delete.
    let other = p.register_client("Other").await;
    let mallory = p.signup(&other, "mallory").await;
    let delete = format!("/api/broadcasts/{id}/replay");
    let (status, _) = p.as_user(&mallory, Method::DELETE, &delete).answer().await;
    assert_eq!(status, 404);
    let (status, _) = p
        .as_server(&other, Method::DELETE, &delete, None)
        .answer()
        .await;
    assert_eq!(status, 404);
    // A user of the tenant who is not the owner may watch it, not delete it.
    let (status, answer) = p.as_user(&eve, Method::DELETE, &delete).answer().await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(owner_view(&p, &ada, &id).await["replay"]["state"], "ready");
    let (status, deletions) = media_call(
        &p,
        "/api/media/replays/deletions",
        Some(&secret),
        &json!({}),
    )
    .await;
    assert_eq!((status, deletions), (200, json!({"streamIds": []})));
    let (status, _) = p.as_user(&ada, Method::DELETE, &delete).answer().await;
    assert_eq!(status, 200);
    let (_, deletions) = media_call(
        &p,
        "/api/media/replays/deletions",
        Some(&secret),
        &json!({}),
    )
    .await;
    assert_eq!(deletions, json!({"streamIds": [stream]}));
    assert_eq!(
        media_call(&p, "/api/media/replays/deletions", None, &json!({}))
            .await
            .0,
        401
    );

    // A user deleted while their broadcast's replay is being written: their broadcasts go,
    // and so does what the media server wrote meanwhile.
    let zed = p.signup(&t, "zed").await;
    let gone = live_broadcast(&p, &zed, "public").await;
    let (gone_id, gone_stream) = (
        gone["id"].as_str().unwrap().to_string(),
        gone["streamId"].as_str().unwrap().to_string(),
    );
    let (status, _) = p
        .as_user(
            &zed,
            Method::POST,
            &format!("/api/broadcasts/{gone_id}/status"),
        )
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    let (_, answer) = media_call(
        &p,
        path,
        Some(&secret),
        &json!({"streamId": gone_stream, "state": "waiting"}),
    )
    .await;
    assert_eq!(answer["action"], "finish", "{answer}");
    assert_eq!(
        p.as_user(&zed, Method::DELETE, "/api/users/profile")
            .status()
            .await,
        200
    );
    let (_, answer) = media_call(
        &p,
        path,
        Some(&secret),
        &json!({"streamId": gone_stream, "state": "ready", "duration": 5.0, "renditions": 1}),
    )
    .await;
    assert_eq!(answer["action"], "delete", "{answer}");
    let (_, deletions) = media_call(
        &p,
        "/api/media/replays/deletions",
        Some(&secret),
        &json!({}),
    )
    .await;
    let mut due: Vec<&str> = deletions["streamIds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    due.sort_unstable();
    let mut expected = [stream.as_str(), gone_stream.as_str()];
    expected.sort_unstable();
    assert_eq!(due, expected, "{deletions}");

    // The settings: the tenant's server's alone, bounded, and each tenant's own.
    let settings = "/api/v1/replay-settings";
    let none = json!({"enabled": false});
    server_tier_only(&p, &t, &ada, &[Method::GET, Method::PUT], settings, &none).await;
    for bad in [
        json!({"retentionDays": 0}),
        json!({"retentionDays": 3651}),
        json!({"retentionDays": "forever"}),
        json!({"enabled": "yes"}),
    ] {
        let (status, answer) = p
            .as_server(&t, Method::PUT, settings, Some(&bad))
            .answer()
            .await;
        assert_eq!(status, 422, "{bad}: {answer}");
    }
    let (status, _) = p
        .as_server(&other, Method::PUT, settings, Some(&none))
        .answer()
        .await;
    assert_eq!(status, 200);
    let (_, mine) = p.as_server(&t, Method::GET, settings, None).answer().await;
    assert_eq!(
        mine,
        json!({"enabled": true, "retentionDays": null, "dvrWindowHours": 4, "viewerClips": false})
    );
}

/// The short id in a broadcast's `watchUrl`, which its embed page takes too.
fn short_id(b: &Value) -> String {
    let url = b["watchUrl"].as_str().expect("watchUrl");
    url.rsplit('/').next().expect("short id").to_string()
}

/// The player setting is the tenant's server's alone: another tenant's server reads and
/// changes its own, the API key alone or a user's token nothing; an entry that is not an
/// origin exactly (a wildcard, a scheme other than https, a path, a policy break-out) or
/// a list too long is refused by its index and nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_embed_origins_are_its_servers_alone_and_only_origins() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let path = "/api/v1/player";
    let mine = json!({"embedOrigins": ["https://shop.example"]});
    let (status, answer) = p
        .as_server(&t, Method::PUT, path, Some(&mine))
        .answer()
        .await;
    assert_eq!((status.as_u16(), &answer), (200, &mine));
    server_tier_only(
        &p,
        &t,
        &eve,
        &[Method::GET, Method::PUT],
        path,
        &json!({"embedOrigins": ["https://evil.example"]}),
    )
    .await;
    // Another tenant's server sees and sets its own setting only.
    let (_, theirs) = p.as_server(&other, Method::GET, path, None).answer().await;
    assert_eq!(theirs, json!({"embedOrigins": []}));
    let evil = json!({"embedOrigins": ["https://evil.example"]});
    let (status, _) = p
        .as_server(&other, Method::PUT, path, Some(&evil))
        .answer()
        .await;
    assert_eq!(status, 200);
    let (_, still) = p.as_server(&t, Method::GET, path, None).answer().await;
    assert_eq!(still, mine, "the other tenant's change is its own");

    let many: Vec<String> = (0..10_000)
        .map(|i| format!("https://s{i}.example"))
        .collect();
    let hostile: Vec<(Value, &str)> = vec![
        (json!(["*"]), "embedOrigins[0]"),
        (
            json!(["https://ok.example", "https://*.x"]),
            "embedOrigins[1]",
        ),
        (json!(["javascript:alert(1)"]), "embedOrigins[0]"),
        (json!(["https://a.example/path"]), "embedOrigins[0]"),
        (
            json!(["https://a.example'; script-src *"]),
            "embedOrigins[0]",
        ),
        (
            json!(["https://a.example; script-src *"]),
            "embedOrigins[0]",
        ),
        (json!(["http://a.example"]), "embedOrigins[0]"),
        (json!(["'self'"]), "embedOrigins[0]"),
        (json!("https://a.example"), "embedOrigins"),
        (json!(many), "embedOrigins"),
    ];
    for (origins, field) in hostile {
        let sent = json!({"embedOrigins": origins});
        let (status, answer) = p
            .as_server(&t, Method::PUT, path, Some(&sent))
            .answer()
            .await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(code(&answer), "validation_failed", "{answer}");
        let fields: Vec<&str> = answer["errors"]
            .as_array()
            .map(|f| f.iter().filter_map(|e| e["field"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(fields, [field], "{answer}");
        let (_, stored) = p.as_server(&t, Method::GET, path, None).answer().await;
        assert_eq!(stored, mine, "nothing is stored after {origins:.80}");
    }
    // The page's policy lists the stored origins alone.
    let b = live_broadcast(&p, &ada, "public").await;
    let page = p
        .request(Method::GET, &format!("/embed/{}", short_id(&b)))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("frame-ancestors https://shop.example;")
            || csp.ends_with("frame-ancestors https://shop.example"),
        "{csp}"
    );
    assert!(!csp.contains("evil"), "{csp}");
}

/// A private or subscribers-only broadcast's embed page is as closed as its watch page:
/// no page, with or without a token for its room, and nothing of the stream shown.
#[tokio::test(flavor = "multi_thread")]
async fn a_private_broadcasts_embed_page_does_not_play() {
    let p = platform().await;
    let (t, ada, _eve) = cast(&p).await;
    let everyone = json!({"embedOrigins": ["http://127.0.0.1:9"]});
    let (status, _) = p
        .as_server(&t, Method::PUT, "/api/v1/player", Some(&everyone))
        .answer()
        .await;
    assert_eq!(status, 200);
    for visibility in ["private", "subscribers"] {
        let b = live_broadcast(&p, &ada, visibility).await;
        let room = b["streamId"].as_str().unwrap();
        let viewer = AccessToken::with_api_key(SFU_KEY, SFU_SECRET)
            .with_identity("viewer")
            .with_grants(VideoGrants {
                room_join: true,
                room: room.to_string(),
                can_subscribe: Some(true),
                ..Default::default()
            })
            .to_jwt()
            .unwrap();
        let short = short_id(&b);
        for query in [
            String::new(),
            "?autoplay=1&muted=1".to_string(),
            format!("?token={viewer}"),
        ] {
            for page in ["embed", "watch"] {
                let r = p
                    .request(Method::GET, &format!("/{page}/{short}{query}"))
                    .send()
                    .await
                    .unwrap();
                let status = r.status();
                let body = r.text().await.unwrap();
                assert!(
                    status == 404 || (page == "embed" && status == 400),
                    "{visibility} {page}{query}: {status}"
                );
                assert!(!body.contains(room), "{visibility} {page}{query}: {body}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_media_server_says_whether_it_runs() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let (status, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Show"}))
        .await;
    assert_eq!(status, 200, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    let secret = p.variable("media_secret").unwrap();
    let down = json!({"state": "down", "reason": "forged outage"});

    // Nobody but the media server may say it is down: no secret, a wrong one, a user's
    // token, the tenant's signature, the relay's or the scheduler's.
    assert_eq!(
        media_call(&p, "/api/media/server", None, &down).await.0,
        401
    );
    assert_eq!(
        media_call(&p, "/api/media/server", Some("guess"), &down)
            .await
            .0,
        401
    );
    for builder in [
        p.as_user(&eve, Method::POST, "/api/media/server"),
        p.as_server(&t, Method::POST, "/api/media/server", Some(&down)),
        p.request(Method::POST, "/api/media/server")
            .header("x-relay-secret", RELAY_SECRET),
        p.request(Method::POST, "/api/media/server")
            .bearer_auth(JOBS_TOKEN),
    ] {
        let (status, answer) = builder.send_json(&down).await;
        assert_eq!(status, 401, "{answer}");
    }
    assert_ne!(
        owner_view(&p, &ada, &id).await["ingest"]["server"]["reason"],
        "forged outage"
    );

    // A reason beyond the contract's bound is refused whole, not cut, in a report of
    // either state (counted in characters: 1,001 four-byte ones are over it too).
    for long in [
        json!({"state": "down", "reason": "x".repeat(1001)}),
        json!({"state": "up", "reason": "x".repeat(1001)}),
        json!({"state": "up", "reason": "\u{10ff32}".repeat(1001)}),
    ] {
        assert_eq!(
            media_call(&p, "/api/media/server", Some(&secret), &long)
                .await
                .0,
            422,
            "{long:.60}"
        );
    }

    // 64 reports at once, up and down alike: each is taken, and the last word stands.
    let calls = (0..64).map(|i| {
        let (p, secret) = (&p, secret.clone());
        let body = if i % 2 == 0 {
            json!({"state": "up"})
        } else {
            json!({"state": "down", "reason": format!("stopped {i}")})
        };
        async move {
            media_call(p, "/api/media/server", Some(&secret), &body)
                .await
                .0
        }
    });
    let statuses = futures_util::future::join_all(calls).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let (status, _) = media_call(
        &p,
        "/api/media/server",
        Some(&secret),
        &json!({"state": "up"}),
    )
    .await;
    assert_eq!(status, 200);
    let server = &owner_view(&p, &ada, &id).await["ingest"]["server"];
    assert_eq!(server["state"], "up", "{server}");
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_media_server_decides_who_publishes() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let (status, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Show"}))
        .await;
    assert_eq!(status, 200, "{b}");
    let key = b["streamKey"].as_str().unwrap().to_string();
    let stream_id = b["streamId"].as_str().unwrap().to_string();
    let secret = p.variable("media_secret").unwrap();
    let publish = |key: &str, connection: &str| json!({"key": key, "connection": connection});

    // No secret, a wrong one, the tenant's credentials, a user's, the relay's or the
    // scheduler's: nobody else may say a publish may start.
    let body = publish(&key, "attacker-1");
    assert_eq!(
        media_call(&p, "/api/media/publish", None, &body).await.0,
        401
    );
    assert_eq!(
        media_call(&p, "/api/media/publish", Some("guess"), &body)
            .await
            .0,
        401
    );
    for builder in [
        p.as_user(&eve, Method::POST, "/api/media/publish"),
        p.as_server(&t, Method::POST, "/api/media/publish", Some(&body)),
        p.request(Method::POST, "/api/media/publish")
            .header("x-relay-secret", RELAY_SECRET),
        p.request(Method::POST, "/api/media/publish")
            .bearer_auth(JOBS_TOKEN),
    ] {
        let (status, answer) = builder.send_json(&body).await;
        assert_eq!(status, 401, "{answer}");
    }
    // The media secret opens nothing else.
    let status = p
        .request(
            Method::GET,
            &format!("/api/broadcasts/{}", b["id"].as_str().unwrap()),
        )
        .header("x-media-secret", &secret)
        .status()
        .await;
    assert_eq!(status, 401);
    assert_eq!(
        owner_view(&p, &ada, b["id"].as_str().unwrap()).await["status"],
        "pending"
    );

    // The key anyone could compute from the public streamId is no key; nor is a guess.
    for guess in [
        stream_id.replace('-', ""),
        "0".repeat(32),
        "../../etc/passwd".into(),
    ] {
        let (status, answer) = media_call(
            &p,
            "/api/media/publish",
            Some(&secret),
            &publish(&guess, "c-1"),
        )
        .await;
        assert_eq!(
            (status, code(&answer)),
            (403, "unknown_stream_key"),
            "{guess}"
        );
    }
    // Malformed calls are 400, never 500.
    for bad in [
        json!({"key": key}),
        json!({"key": key, "connection": "has spaces"}),
        json!({"key": key, "connection": "c", "extra": 1}),
        json!({"key": key, "connection": "x".repeat(101)}),
    ] {
        let (status, _) = media_call(&p, "/api/media/publish", Some(&secret), &bad).await;
        assert_eq!(status, 400, "{bad}");
    }

    // 64 encoders race for one key: one publishes.
    let racers = (0..64).map(|n| {
        let body = publish(&key, &format!("racer-{n}"));
        let p = &p;
        let secret = secret.clone();
        async move { media_call(p, "/api/media/publish", Some(&secret), &body).await }
    });
    let answers = futures_util::future::join_all(racers).await;
    let accepted: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, a)| a)
        .collect();
    assert_eq!(accepted.len(), 1, "{answers:?}");
    assert_eq!(accepted[0]["streamId"], stream_id.as_str());
    assert!(
        answers
            .iter()
            .all(|(s, a)| *s == 200 || code(a) == "already_publishing")
    );
    let view = owner_view(&p, &ada, b["id"].as_str().unwrap()).await;
    assert_eq!(
        (
            view["status"].as_str(),
            view["ingest"]["publishes"].as_i64()
        ),
        (Some("active"), Some(1))
    );

    // Another connection cannot end or update the live publish.
    let (status, done) = media_call(
        &p,
        "/api/media/publish-done",
        Some(&secret),
        &json!({"connection": "racer-none", "key": key}),
    )
    .await;
    assert_eq!((status, done["handled"].as_bool()), (200, Some(false)));
    let (status, _) = media_call(
        &p,
        "/api/media/update",
        Some(&secret),
        &json!({"connection": "racer-none", "key": key}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        owner_view(&p, &ada, b["id"].as_str().unwrap()).await["ingest"]["state"],
        "live"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn how_far_back_a_live_broadcast_rewinds_is_the_media_servers_word_within_bounds() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let secret = p.variable("media_secret").unwrap();
    let (status, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Show", "visibility": "private"}))
        .await;
    assert_eq!(status, 200, "{b}");
    let (id, key) = (
        b["id"].as_str().unwrap().to_string(),
        b["streamKey"].as_str().unwrap().to_string(),
    );
    let (status, accepted) = media_call(
        &p,
        "/api/media/publish",
        Some(&secret),
        &json!({"key": key, "connection": "dvr-1"}),
    )
    .await;
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(
        accepted["dvrWindow"],
        4 * 3600,
        "the default window: {accepted}"
    );
    let update = |dvr: Value| json!({"connection": "dvr-1", "key": key, "dvrSeconds": dvr});
    // Negative, past the longest window, or not a number: refused, nothing recorded.
    for bad in [json!(-1), json!(86_401), json!(1e300)] {
        let (status, answer) =
            media_call(&p, "/api/media/update", Some(&secret), &update(bad.clone())).await;
        assert_eq!((status, code(&answer)), (422, "validation_failed"), "{bad}");
    }
    let (status, _) = media_call(&p, "/api/media/update", Some(&secret), &update(json!("1"))).await;
    assert_eq!(status, 400);
    assert!(owner_view(&p, &ada, &id).await["dvr"].is_null());
    // Someone else's call with the DVR: no media secret, no say.
    let (status, _) = media_call(&p, "/api/media/update", None, &update(json!(30))).await;
    assert_eq!(status, 401);
    assert!(owner_view(&p, &ada, &id).await["dvr"].is_null());
    let (status, _) =
        media_call(&p, "/api/media/update", Some(&secret), &update(json!(30.5))).await;
    assert_eq!(status, 200);
    let dvr = owner_view(&p, &ada, &id).await["dvr"].clone();
    assert_eq!(dvr["availableSeconds"], 30.5, "{dvr}");
    assert_eq!(dvr["windowSeconds"], 4 * 3600, "{dvr}");
    assert!(
        dvr["hlsUrl"]
            .as_str()
            .unwrap()
            .contains("/replay/dvr.m3u8?exp="),
        "{dvr}"
    );
    // A viewer who may not see the private broadcast gets nothing of it, nor the listing.
    let (status, body) = p
        .as_user(&eve, Method::GET, &format!("/api/broadcasts/{id}"))
        .answer()
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, live) = p
        .as_client(&t, Method::GET, "/api/broadcasts/live")
        .answer()
        .await;
    assert_eq!(status, 200);
    assert!(!live.to_string().contains("dvr.m3u8"), "{live}");
    // Another tenant's window is its own; the tenant's own reaches the live stream.
    for (tenant, hours) in [(&other, 1), (&t, 24)] {
        let (status, settings) = p
            .as_server(
                tenant,
                Method::PUT,
                "/api/v1/replay-settings",
                Some(&json!({"dvrWindowHours": hours})),
            )
            .answer()
            .await;
        assert_eq!(status, 200, "{settings}");
    }
    let (status, accepted) =
        media_call(&p, "/api/media/update", Some(&secret), &update(json!(40))).await;
    assert_eq!(status, 200);
    assert_eq!(accepted["dvrWindow"], 24 * 3600, "{accepted}");
    assert_eq!(
        owner_view(&p, &ada, &id).await["dvr"]["windowSeconds"],
        24 * 3600
    );
    // Other tenants' servers cannot read or set it, users neither.
    let (status, _) = p
        .as_user(&ada, Method::PUT, "/api/v1/replay-settings")
        .send_json(&json!({"dvrWindowHours": 1}))
        .await;
    assert_eq!(status, 401);
    let (status, settings) = p
        .as_server(&t, Method::GET, "/api/v1/replay-settings", None)
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), settings["dvrWindowHours"].as_i64()),
        (200, Some(24))
    );
    // Once the broadcast is over there is nothing to rewind.
    let (status, body) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(owner_view(&p, &ada, &id).await["dvr"].is_null());
}

#[tokio::test(flavor = "multi_thread")]
async fn restream_targets_are_their_owners_and_reach_no_private_address() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let other = p.register_client("Other").await;
    let (_, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Show", "visibility": "public"}))
        .await;
    let path = format!("/api/broadcasts/{}/restreams", b["id"].as_str().unwrap());
    // Loopback, private, metadata and look-alike addresses are refused (SSRF).
    for url in [
        "rtmp://127.0.0.1/live",
        "rtmp://localhost/live",
        "rtmp://10.1.2.3/live",
        "rtmp://169.254.169.254/live",
        "rtmp://[::1]/live",
        "rtmp://2130706433/live",
        "rtmp://user:pw@a.example/live",
        "http://a.example/live",
    ] {
        let (status, answer) = p
            .as_user(&ada, Method::POST, &path)
            .send_json(&json!({"url": url, "streamKey": "k"}))
            .await;
        assert_eq!(status, 422, "{url}: {answer}");
        // A local test learns which switch allows its own media server.
        if url.contains("127.0.0.1") || url.contains("localhost") {
            assert!(
                answer
                    .to_string()
                    .contains("SPIN_VARIABLE_RESTREAM_ALLOW_PRIVATE=true"),
                "{url}: {answer}"
            );
        }
    }
    // Another user of the tenant, and another tenant's server, see and change nothing.
    let add =
        json!({"url": "rtmp://a.rtmp.youtube.com/live2", "streamKey": "secret-key-0123456789"});
    let (status, target) = p.as_user(&ada, Method::POST, &path).send_json(&add).await;
    assert_eq!(status, 201, "{target}");
    let (status, _) = p.as_user(&eve, Method::POST, &path).send_json(&add).await;
    assert_eq!(status, 403);
    assert_eq!(p.as_user(&eve, Method::GET, &path).status().await, 403);
    let delete = format!("{path}/{}", target["id"].as_str().unwrap());
    assert_eq!(p.as_user(&eve, Method::DELETE, &delete).status().await, 403);
    assert_eq!(
        p.as_server(&other, Method::GET, &path, None).status().await,
        404
    );
    assert_eq!(
        p.as_server(&other, Method::DELETE, &delete, None)
            .status()
            .await,
        404
    );
    // The owner's own reads never carry the key.
    let (_, list) = p.as_server(&t, Method::GET, &path, None).answer().await;
    assert_eq!(list["total"], 1);
    assert!(!list.to_string().contains("secret-key-0123456789"));
    // 64 adds at once hold the cap of five.
    let adds = (0..64).map(|n| {
        let p = &p;
        let ada = &ada;
        let path = &path;
        async move {
            p.as_user(ada, Method::POST, path)
                .json(&json!({"url": "rtmp://a.rtmp.youtube.com/live2", "streamKey": format!("k-{n}")}))
                .status()
                .await
        }
    });
    let statuses = futures_util::future::join_all(adds).await;
    assert_eq!(
        statuses.iter().filter(|s| s.as_u16() == 201).count(),
        4,
        "{statuses:?}"
    );
    let (_, list) = p.as_user(&ada, Method::GET, &path).answer().await;
    assert_eq!(list["total"], 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_operator_suspends_and_a_suspended_tenant_is_refused_everywhere() {
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let other = p.register_client("Other").await;
    let suspend = format!("/api/admin/sdk-clients/{}/suspend", t.client_id);
    // Open registration (local mode) opens registration only: suspending needs the token.
    assert_eq!(p.request(Method::POST, &suspend).status().await, 401);
    assert_eq!(p.as_user(&ada, Method::POST, &suspend).status().await, 401);
    assert_eq!(
        p.as_server(&other, Method::POST, &suspend, None)
            .status()
            .await,
        401
    );
    assert_eq!(
        p.request(Method::POST, &suspend)
            .bearer_auth("guess")
            .status()
            .await,
        401
    );
    assert_eq!(
        p.as_user(&ada, Method::GET, "/api/users/profile/full")
            .status()
            .await,
        200
    );
    let admin = p.variable("admin_token").unwrap();
    let status = p
        .request(Method::POST, &suspend)
        .bearer_auth(&admin)
        .status()
        .await;
    assert_eq!(status, 200);
    // Its users, its app key and its server are refused; another tenant is not.
    let (status, answer) = p
        .as_user(&ada, Method::GET, "/api/users/profile/full")
        .answer()
        .await;
    assert_eq!((status.as_u16(), code(&answer)), (403, "client_suspended"));
    assert_eq!(
        p.as_client(&t, Method::GET, "/api/broadcasts/live")
            .status()
            .await,
        403
    );
    assert_eq!(
        p.as_server(&t, Method::GET, "/api/v1/users", None)
            .status()
            .await,
        403
    );
    assert_eq!(
        p.as_client(&other, Method::GET, "/api/broadcasts/live")
            .status()
            .await,
        200
    );
    let status = p
        .request(
            Method::POST,
            &format!("/api/admin/sdk-clients/{}/reinstate", t.client_id),
        )
        .bearer_auth(&admin)
        .status()
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        p.as_user(&ada, Method::GET, "/api/users/profile/full")
            .status()
            .await,
        200
    );
}

/// Connects to `addr` from `source` (a loopback address of its own) and sends `head`:
/// the connection, or none when it was refused or closed.
async fn send_head_from(
    addr: std::net::SocketAddr,
    source: &str,
    head: &str,
) -> Option<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind((source.parse::<std::net::IpAddr>().unwrap(), 0).into())
        .unwrap();
    let mut stream = socket.connect(addr).await.ok()?;
    stream.write_all(head.as_bytes()).await.ok()?;
    Some(stream)
}

/// Opens `n` connections from `source` (a loopback address of its own) that each send
/// `head` and then one byte of the body per second, until `for_how_long` has passed.
/// Answers how many connections were accepted (a refused one is closed at once) and the
/// status lines the server wrote back.
async fn trickle(
    addr: std::net::SocketAddr,
    source: &str,
    n: usize,
    head: String,
    for_how_long: Duration,
) -> (usize, Vec<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tasks = Vec::new();
    for _ in 0..n {
        let head = head.clone();
        let source = source.to_string();
        tasks.push(tokio::spawn(async move {
            let Some(mut stream) = send_head_from(addr, &source, &head).await else {
                return (false, String::new());
            };
            let until = tokio::time::Instant::now() + for_how_long;
            let mut answer = Vec::new();
            let mut buf = [0u8; 512];
            loop {
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(0) | Err(_) => break,
                        Ok(k) => answer.extend_from_slice(&buf[..k]),
                    },
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        if tokio::time::Instant::now() >= until || stream.write_all(b"x").await.is_err() {
                            break;
                        }
                    }
                }
            }
            let text = String::from_utf8_lossy(&answer).to_string();
            let accepted = !text.is_empty() || tokio::time::Instant::now() >= until;
            (accepted, text.lines().next().unwrap_or_default().to_string())
        }));
    }
    let mut accepted = 0;
    let mut statuses = Vec::new();
    for task in tasks {
        let (ok, status) = task.await.unwrap();
        accepted += usize::from(ok);
        statuses.push(status);
    }
    (accepted, statuses)
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_clients_from_one_address_do_not_starve_the_others() {
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let addr = p.addr();
    // 260 connections from one address, each declaring a 1000-byte body and sending a
    // byte a second (the attack that held every instance slot); and 200 uploads from
    // another address, declaring 10 MB, streamed into the guest a byte a second.
    let login = format!(
        "POST /api/users/login HTTP/1.1\r\nHost: x\r\nx-api-key: {}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{",
        t.api_key
    );
    let upload = format!(
        "POST /api/files HTTP/1.1\r\nHost: x\r\nx-api-key: {}\r\nauthorization: Bearer {}\r\ncontent-type: application/octet-stream\r\nx-file-name: slow.bin\r\ncontent-length: 10000000\r\n\r\nx",
        t.api_key, ada.token
    );
    let slow = tokio::spawn(trickle(
        addr,
        "127.0.0.2",
        260,
        login,
        Duration::from_secs(25),
    ));
    let uploads = tokio::spawn(trickle(
        addr,
        "127.0.0.3",
        200,
        upload,
        Duration::from_secs(25),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Meanwhile another client's requests answer as usual.
    let mut latencies = Vec::new();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(16) {
        let t0 = std::time::Instant::now();
        let status = p
            .as_client(&t, Method::GET, "/api/broadcasts/live")
            .status()
            .await;
        latencies.push(t0.elapsed());
        assert_eq!(status, 200, "request {} during the attack", latencies.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    println!(
        "{} requests during the attack: p50 {:?}, p99 {p99:?}",
        latencies.len(),
        latencies[latencies.len() / 2]
    );
    let (accepted, statuses) = slow.await.unwrap();
    // One address holds at most 256 connections, and no slow body reached an instance:
    // each was answered 408 once it fell behind.
    assert!(accepted <= 256, "{accepted} connections accepted");
    let timed_out = statuses.iter().filter(|s| s.contains(" 408 ")).count();
    assert!(timed_out >= 250, "{timed_out} answered 408: {statuses:?}");
    let (_, upload_statuses) = uploads.await.unwrap();
    // At most its share of instances went to the slow uploads; the rest were refused at
    // once, and those admitted were cut off at the minimum rate.
    let refused = upload_statuses
        .iter()
        .filter(|s| s.contains(" 503 "))
        .count();
    assert!(
        refused >= 200 - 128,
        "{refused} refused: {upload_statuses:?}"
    );
}

/// For 6 s, `user`'s requests that need the database are answered 200, not queued behind
/// the requests `beside` them for a connection (and refused 503 when none comes free, or
/// left waiting on Spin, whose pool has no time limit).
async fn database_requests_keep_answering(p: &Platform, user: &User, beside: &str) {
    let started = std::time::Instant::now();
    let mut answered = 0;
    while started.elapsed() < Duration::from_secs(6) {
        let (status, body) = p
            .as_user(user, Method::GET, "/api/users/profile/full")
            .answer()
            .await;
        assert_eq!(status, 200, "request {answered} beside {beside}: {body}");
        answered += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Opens `n` uploads from `source` that each declare a 10 MB body and send it at 16 KiB
/// a second (above the minimum rate, so the host never cuts them off), until aborted.
fn paced_uploads(
    addr: std::net::SocketAddr,
    source: &str,
    n: usize,
    head: &str,
) -> Vec<tokio::task::JoinHandle<()>> {
    use tokio::io::AsyncWriteExt;
    (0..n)
        .map(|_| {
            let (source, head) = (source.to_string(), head.to_string());
            tokio::spawn(async move {
                let Some(mut stream) = send_head_from(addr, &source, &head).await else {
                    return;
                };
                loop {
                    if stream.write_all(&[b'x'; 4096]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_uploads_hold_no_database_connection() {
    let p = platform().await;
    let (t, ada, bob) = cast(&p).await;
    let addr = p.addr();
    // More uploads than a pool has PostgreSQL connections (64 per address, as Spin's),
    // each authenticated and in its guest, sending slowly but fast enough to be kept.
    let head = format!(
        "POST /api/files HTTP/1.1\r\nHost: x\r\nx-api-key: {}\r\nauthorization: Bearer {}\r\ncontent-type: application/octet-stream\r\ncontent-length: 10000000\r\n\r\n",
        t.api_key, ada.token
    );
    let uploads = paced_uploads(addr, "127.0.0.3", 100, &head);
    tokio::time::sleep(Duration::from_secs(2)).await;
    database_requests_keep_answering(&p, &bob, "the uploads").await;
    // An upload that waited on its client between pieces takes a connection again to
    // finish: its file is stored whole.
    let piece = vec![b'y'; 512 * 1024];
    use futures_util::StreamExt;
    let pieces = futures_util::stream::iter(0..3).then(move |i| {
        let piece = piece.clone();
        async move {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Ok::<_, std::io::Error>(piece)
        }
    });
    let (status, file) = p
        .as_user(&bob, Method::POST, "/api/files?filename=paced.bin")
        .header("content-type", "application/octet-stream")
        .header("content-length", (3 * 512 * 1024).to_string())
        .body(reqwest::Body::wrap_stream(pieces))
        .answer()
        .await;
    assert_eq!(status, 201, "{file}");
    assert_eq!(file["size"], 3 * 512 * 1024, "{file}");
    for upload in uploads {
        upload.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_outbound_calls_hold_no_database_connection() {
    // The music platform takes 12 s to answer, within the platform's 15 s timeout.
    let music = crate::music::FakeMusic::start().await;
    let p = music.platform_waiting("15000").await;
    let (_, ada, bob) = cast(&p).await;
    // More proxied calls than a pool has PostgreSQL connections (64 per address), each
    // authenticated and waiting for the music platform.
    let calls: Vec<_> = (0..100)
        .map(|_| {
            let call = p
                .as_user(&ada, Method::GET, "/api/users/music/proxy/slow/12")
                .status();
            tokio::spawn(call)
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    database_requests_keep_answering(&p, &bob, "the calls").await;
    for call in calls {
        call.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stolen_session_ends_with_its_refresh_family() {
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let profile = |token: &str| {
        p.request(Method::GET, "/api/users/profile/full")
            .header("x-api-key", &t.api_key)
            .bearer_auth(token.to_string())
            .status()
    };
    // Signup opened a session (its access token and refresh token); the thief and the
    // owner both refresh from it.
    let refresh = |rt: String| {
        p.as_client(&t, Method::POST, "/api/users/refresh")
            .json(&json!({ "refreshToken": rt }))
            .answer()
    };
    let (status, rotated) = refresh(ada.refresh_token.clone()).await;
    assert_eq!(status, 200, "{rotated}");
    let newer = rotated["token"].as_str().unwrap().to_string();
    assert_eq!(profile(&ada.token).await, 200);
    assert_eq!(profile(&newer).await, 200);
    // The old refresh token again: theft. Its whole family is revoked, and with it every
    // access token issued in the session, not only the refresh tokens.
    let (status, reused) = refresh(ada.refresh_token.clone()).await;
    assert_eq!(status, 401, "{reused}");
    for token in [&ada.token, &newer] {
        let (status, body) = p
            .request(Method::GET, "/api/users/profile/full")
            .header("x-api-key", &t.api_key)
            .bearer_auth(token)
            .answer()
            .await;
        assert_eq!((status.as_u16(), code(&body)), (401, "token_revoked"));
    }
    // Another session of the same user is not touched.
    let (status, login) = p
        .as_client(&t, Method::POST, "/api/users/login")
        .send_json(&json!({"username": "ada", "password": "correct horse battery"}))
        .await;
    assert_eq!(status, 200, "{login}");
    assert_eq!(profile(login["token"].as_str().unwrap()).await, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn login_time_does_not_tell_a_known_account_from_an_unknown_one() {
    let p = platform().await;
    let (t, _, _) = cast(&p).await;
    let attempt = |login: String| {
        let p = &p;
        let t = &t;
        async move {
            let started = std::time::Instant::now();
            let status = p
                .as_client(t, Method::POST, "/api/users/login")
                .json(&json!({"username": login, "password": "wrong password!"}))
                .status()
                .await;
            assert_eq!(status, 401);
            started.elapsed()
        }
    };
    // Interleaved, each login string its own (the rate limit allows a few per login).
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for round in 0..12 {
        let name = if round % 2 == 0 { "ada" } else { "eve" };
        if round % 4 < 2 {
            known.push(attempt(name.to_string()).await);
        } else {
            unknown.push(attempt(format!("nobody{round}")).await);
        }
    }
    known.sort();
    unknown.sort();
    let ratio = unknown[unknown.len() / 2].as_secs_f64() / known[known.len() / 2].as_secs_f64();
    println!(
        "median login: known account {:?}, unknown {:?} ({ratio:.2}x)",
        known[known.len() / 2],
        unknown[unknown.len() / 2]
    );
    // A password hash check is most of a login's time: an unknown account that skipped
    // it would answer in a small fraction of a known one's time.
    assert!((0.5..2.0).contains(&ratio), "{ratio:.2}x");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_users_upload_never_runs_as_the_platforms_script() {
    let p = platform().await;
    let (_, ada, _) = cast(&p).await;
    // The pages allow `script-src 'self'`: an uploaded script served from this origin as
    // JavaScript would run for any injection. Active types are served as bytes to save.
    for (name, ct, body) in [
        ("steal.js", "text/javascript", "fetch('/api/wallet')"),
        ("steal.mjs", "application/javascript", "import('/x')"),
        ("look.css", "text/css", "body{background:url(/x)}"),
        ("page.html", "text/html", "<script>alert(1)</script>"),
        ("image.svg", "image/svg+xml", "<svg onload=alert(1)></svg>"),
    ] {
        let (status, file) = p
            .as_user(
                &ada,
                Method::POST,
                &format!("/api/files?filename={name}&public=true"),
            )
            .header("content-type", ct)
            .body(body)
            .answer()
            .await;
        assert_eq!(status, 201, "{file}");
        assert_eq!(file["contentType"], ct, "the stored type is kept");
        for path in ["public", "download"] {
            let builder = p.request(
                Method::GET,
                &format!("/api/files/{}/{path}", file["id"].as_str().unwrap()),
            );
            let builder = if path == "download" {
                builder
                    .header("x-api-key", &ada.api_key)
                    .bearer_auth(&ada.token)
            } else {
                builder
            };
            let r = builder.send().await.unwrap();
            let header = |n: &str| {
                r.headers()
                    .get(n)
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default()
            };
            assert_eq!(
                header("content-type"),
                "application/octet-stream",
                "{name} {path}"
            );
            assert!(
                header("content-disposition").starts_with("attachment"),
                "{name} {path}"
            );
            assert_eq!(header("x-content-type-options"), "nosniff");
            assert!(header("content-security-policy").contains("sandbox"));
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_refused_for_its_idempotency_key_spends_no_signature() {
    let p = platform().await;
    let (t, _, eve) = cast(&p).await;
    let path = format!("/api/v1/wallets/{}/credits?nonce=once", eve.id);
    let body = json!({"tokens": 10, "reference": "purchase-1"}).to_string();
    let timestamp = p.now().to_string();
    let signature = sign(&t.secret_key, &format!("POST{path}{body}{timestamp}"));
    let signed = |key: Option<&str>| {
        let mut builder = p
            .request(Method::POST, &path)
            .header("x-api-key", &t.api_key)
            .header("x-timestamp", &timestamp)
            .header("x-signature", &signature)
            .header("content-type", "application/json")
            .body(body.clone());
        if let Some(key) = key {
            builder = builder.header("idempotency-key", key);
        }
        builder.answer()
    };
    let (status, refused) = signed(None).await;
    assert_eq!(
        (status.as_u16(), code(&refused)),
        (400, "idempotency_key_required")
    );
    let (status, refused) = signed(Some("has space")).await;
    assert_eq!(
        (status.as_u16(), code(&refused)),
        (400, "invalid_idempotency_key")
    );
    // The same signed call, now with its key: the signature was not spent.
    let (status, credited) = signed(Some("purchase-1")).await;
    assert_eq!(status, 201, "{credited}");
    // And it is spent now: the replay is refused.
    let (status, replayed) = signed(Some("purchase-2")).await;
    assert_eq!(
        (status.as_u16(), code(&replayed)),
        (401, "signature_replayed")
    );
}

/// Credentials come before the request's shape: a caller who may not call a money route
/// is told so (401), not what a request to it would have to carry; the shape (its
/// `Idempotency-Key`) is checked once the caller is known.
#[tokio::test(flavor = "multi_thread")]
async fn a_money_call_without_credentials_is_refused_for_them_before_its_shape() {
    let p = platform().await;
    let (t, ada, eve) = cast(&p).await;
    let credit = format!("/api/v1/wallets/{}/credits", eve.id);
    let body = json!({"tokens": 10, "reference": "purchase-1"});
    let gift = "/api/broadcasts/0190a8b0-0000-7000-8000-000000000001/gifts";
    let stranger = p.register_client("Stranger").await;
    let timestamp = p.now().to_string();
    let forged = sign(
        &stranger.secret_key,
        &format!("POST{credit}{body}{timestamp}"),
    );
    let cases = [
        // The server tier, unsigned: the API key alone.
        (
            "unsigned credit",
            p.request(Method::POST, &credit)
                .header("x-api-key", &t.api_key),
            "signature_required",
        ),
        // Signed with another tenant's secret key.
        (
            "forged credit",
            p.request(Method::POST, &credit)
                .header("x-api-key", &t.api_key)
                .header("x-timestamp", &timestamp)
                .header("x-signature", &forged),
            "signature_mismatch",
        ),
        // No credentials at all.
        (
            "bare credit",
            p.request(Method::POST, &credit),
            "missing_api_key",
        ),
        // The user tier without the user's token.
        (
            "gift without a token",
            p.request(Method::POST, gift)
                .header("x-api-key", &t.api_key),
            "missing_token",
        ),
        // A user's token is no signature.
        (
            "payout request as a user of another tenant",
            p.request(Method::POST, "/api/wallet/payouts")
                .header("x-api-key", &stranger.api_key)
                .bearer_auth(&ada.token),
            "tenant_mismatch",
        ),
    ];
    for (name, builder, expected) in cases {
        let (status, refused) = builder
            .header("content-type", "application/json")
            .body(body.to_string())
            .answer()
            .await;
        assert_eq!(
            (status.as_u16(), code(&refused)),
            (401, expected),
            "{name}: {refused}"
        );
    }
    // Authenticated, the missing key is what is wrong.
    let (status, missing) = p
        .as_user(&ada, Method::POST, "/api/wallet/payouts")
        .send_json(&json!({"diamonds": 1}))
        .await;
    assert_eq!(
        (status.as_u16(), code(&missing)),
        (400, "idempotency_key_required"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_sending_an_oversized_part_whole_still_reads_the_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let p = platform().await;
    let (t, ada, _) = cast(&p).await;
    let (status, upload) = p
        .as_user(&ada, Method::POST, "/api/files/uploads")
        .send_json(
            &json!({"filename": "big.bin", "size": 20 << 20, "sha256": "0".repeat(64),
                           "contentType": "application/octet-stream"}),
        )
        .await;
    assert_eq!(status, 201, "{upload}");
    // A part over 8 MiB, sent whole by a client that does not wait for an early answer.
    let len = 9 << 20;
    let head = format!(
        "PUT /api/files/uploads/{}/parts/1 HTTP/1.1\r\nHost: x\r\nx-api-key: {}\r\nauthorization: Bearer {}\r\ncontent-type: application/octet-stream\r\ncontent-length: {len}\r\n\r\n",
        upload["id"].as_str().unwrap(),
        t.api_key,
        ada.token
    );
    let mut stream = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let sent = stream.write_all(&vec![7u8; len]).await;
    assert!(
        sent.is_ok(),
        "the server took the body instead of resetting: {sent:?}"
    );
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "read: {read:?} after {text}");
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
}

/// The music platform is an outside party: what it is handed to name a user must not be a
/// key to this API. It replays every Bearer it received against user routes of the API
/// (the wallet, the profile, the music routes themselves): all 401.
#[tokio::test(flavor = "multi_thread")]
async fn the_music_platform_cannot_replay_what_it_is_handed() {
    let music = platform_tests::webhook_receiver::Receiver::start().await;
    let p = Platform::start_with(&[("music_url", &music.url(""))]).await;
    let (t, ada, _) = cast(&p).await;
    for (method, path) in [
        (Method::POST, "/api/users/music/authenticate"),
        (Method::GET, "/api/users/music/proxy/me"),
        (Method::GET, "/api/users/music/search?q=zoe"),
    ] {
        p.as_user(&ada, method, path).status().await;
    }
    let handed = music.wait_for(3, Duration::from_secs(10)).await;
    assert_eq!(handed.len(), 3, "{handed:?}");
    for request in &handed {
        let bearer = request
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .expect("the music platform is handed a Bearer token");
        assert_ne!(bearer, ada.token, "{}", request.path);
        for (method, path) in [
            (Method::GET, "/api/wallet"),
            (Method::GET, "/api/users/profile/full"),
            (Method::GET, "/api/users/music/link"),
            (Method::POST, "/api/users/music/authenticate"),
        ] {
            let (status, body) = p
                .request(method, path)
                .header("x-api-key", &t.api_key)
                .bearer_auth(bearer)
                .answer()
                .await;
            assert_eq!(status, 401, "{path} with {}: {body}", request.path);
        }
    }
    assert_eq!(music.received().len(), 3, "no replay reached the platform");
    // The user's own token still opens the same routes.
    assert_eq!(
        p.as_user(&ada, Method::GET, "/api/wallet").status().await,
        200
    );
}

/// A client registered with `requireSignature`, the user `name` signed up by its server,
/// and a broadcast of theirs (its streamId).
async fn strict_tenant_with_stream(p: &Platform, name: &str) -> (Tenant, User, String) {
    let (status, reg) = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .send_json(&json!({"name": "Strict", "contactEmail": "s@example.com",
            "agreeTerms": true, "agreeDataProcessing": true, "requireSignature": true}))
        .await;
    assert_eq!(status, 200, "{reg}");
    let t = Tenant {
        api_key: reg["apiKey"].as_str().unwrap().to_string(),
        secret_key: reg["secretKey"].as_str().unwrap().to_string(),
        client_id: reg["clientId"].as_str().unwrap().to_string(),
    };
    let body = json!({"username": name, "email": format!("{name}@example.com"),
        "password": "correct horse battery"});
    let (status, signed_up) = p
        .as_server(&t, Method::POST, "/api/users/signup", Some(&body))
        .answer()
        .await;
    assert_eq!(status, 200, "{signed_up}");
    let user = User {
        id: signed_up["user"]["id"].as_str().unwrap().to_string(),
        token: signed_up["token"].as_str().unwrap().to_string(),
        refresh_token: signed_up["refreshToken"].as_str().unwrap().to_string(),
        api_key: t.api_key.clone(),
    };
    let body = json!({"title": "Signed show"});
    let (status, b) = p
        .as_server(&t, Method::POST, "/api/broadcasts", Some(&body))
        .bearer_auth(&user.token)
        .answer()
        .await;
    assert_eq!(status, 200, "{b}");
    (t, user, b["streamId"].as_str().unwrap().to_string())
}

/// The next frame of one of `kinds`, skipping others (history, presence).
async fn frame_among(ws: &mut platform_tests::ws::Ws, kinds: &[&str]) -> Value {
    loop {
        let frame = platform_tests::ws::next_text_frame(ws, Duration::from_secs(10)).await;
        if kinds.contains(&frame["type"].as_str().unwrap_or_default()) {
            return frame;
        }
    }
}

/// Opens a chat socket; a refused upgrade answers its HTTP status.
async fn open_socket(url: &str) -> Result<platform_tests::ws::Ws, u16> {
    match tokio_tungstenite::connect_async(url).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(answer)) => Err(answer.status().as_u16()),
        Err(e) => panic!("{url}: {e}"),
    }
}

/// Issue: a client requiring signed calls still took unsigned chat through the relay.
/// Its users' sockets (by token, read-only by clientId or apiKey) are refused without a ticket
/// that its server's signed call minted; a ticket does not stretch to another stream or
/// user; the relay's own calls without one are refused by the API.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_requiring_signatures_gets_no_unsigned_chat_through_the_relay() {
    use futures_util::SinkExt;
    let p = platform().await;
    let (t, ada, stream) = strict_tenant_with_stream(&p, "ada").await;
    let body =
        json!({"username": "bob", "email": "bob@example.com", "password": "correct horse battery"});
    let (_, bob) = p
        .as_server(&t, Method::POST, "/api/users/signup", Some(&body))
        .answer()
        .await;
    let jwt_secret = p.variable("jwt_secret").expect("the platform's jwt_secret");
    let relay = chat_relay::serve(
        chat_relay::Relay::new(chat_relay::Config::new(&p.base, &jwt_secret, RELAY_SECRET)),
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    )
    .unwrap();
    let url = |query: &str| {
        format!(
            "ws://{}/ws/streams/{stream}/chat?{query}",
            relay.local_addr()
        )
    };
    let ticket_path = format!("/api/streams/{stream}/chat/ticket");
    // The tenant's server mints tickets for its users (or read-only), signed.
    let mint = |user: Option<&str>| {
        let body = user.map(|id| json!({ "userId": id }));
        p.as_server(&t, Method::POST, &ticket_path, body.as_ref())
    };
    let (status, ticket) = mint(Some(&ada.id)).answer().await;
    assert_eq!(status, 200, "{ticket}");
    let ada_ticket = ticket["ticket"].as_str().unwrap().to_string();
    assert_eq!(ticket["userId"], ada.id.as_str());

    // The attacks: the user's token alone, the tenant's id alone, an unsigned mint, a
    // forged ticket, a ticket of another user, a ticket of another stream.
    assert_eq!(
        open_socket(&url(&format!("token={}", ada.token)))
            .await
            .err(),
        Some(401)
    );
    assert_eq!(
        open_socket(&url(&format!("apiKey={}", t.api_key)))
            .await
            .err(),
        Some(401)
    );
    assert_eq!(
        open_socket(&url(&format!("clientId={}", t.client_id)))
            .await
            .err(),
        Some(401)
    );
    let (status, unsigned) = p.as_user(&ada, Method::POST, &ticket_path).answer().await;
    assert_eq!(
        (status.as_u16(), code(&unsigned)),
        (401, "signature_required")
    );
    let forged = domain::jwt::issue_socket_ticket(
        b"not-the-platforms-secret-0123456789",
        &t.client_id,
        &stream,
        Some(&ada.id),
        unix_now(),
    );
    assert_eq!(
        open_socket(&url(&format!("token={}&ticket={forged}", ada.token)))
            .await
            .err(),
        Some(401)
    );
    let (_, bobs) = mint(bob["user"]["id"].as_str()).answer().await;
    let bobs = bobs["ticket"].as_str().unwrap().to_string();
    assert_eq!(
        open_socket(&url(&format!("token={}&ticket={bobs}", ada.token)))
            .await
            .err(),
        Some(403)
    );
    let other_stream = {
        let body = json!({"title": "Another"});
        let (_, b) = p
            .as_server(&t, Method::POST, "/api/broadcasts", Some(&body))
            .bearer_auth(&ada.token)
            .answer()
            .await;
        b["streamId"].as_str().unwrap().to_string()
    };
    let elsewhere =
        url(&format!("token={}&ticket={ada_ticket}", ada.token)).replace(&stream, &other_stream);
    assert_eq!(open_socket(&elsewhere).await.err(), Some(401));
    // The relay itself, calling without a ticket, is refused by the API.
    let (status, answer) = p
        .request(Method::POST, &format!("/api/streams/{stream}/chat"))
        .header("x-relay-secret", RELAY_SECRET)
        .bearer_auth(&ada.token)
        .send_json(&json!({"message": "no ticket"}))
        .await;
    assert_eq!(
        (status.as_u16(), code(&answer)),
        (401, "signature_required")
    );

    // With the ticket the server minted, ada chats; a read-only ticket reads.
    let mut socket = open_socket(&url(&format!("token={}&ticket={ada_ticket}", ada.token)))
        .await
        .expect("a ticketed socket opens");
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(
            json!({"type": "message", "message": "signed hello"}).to_string(),
        ))
        .await
        .unwrap();
    let seen = frame_among(&mut socket, &["message", "error"]).await;
    assert_eq!(seen["message"]["message"], "signed hello", "{seen}");
    let (status, read_only) = mint(None).answer().await;
    assert_eq!((status.as_u16(), &read_only["userId"]), (200, &Value::Null));
    let read_only = read_only["ticket"].as_str().unwrap().to_string();
    let mut viewer = open_socket(&url(&format!("ticket={read_only}")))
        .await
        .expect("a read-only ticket opens a read-only socket");
    // Signing that socket in takes a ticket for the user too.
    let auth = |ticket: Option<&str>| {
        let mut frame = json!({"type": "auth", "token": ada.token});
        if let Some(ticket) = ticket {
            frame["ticket"] = ticket.into();
        }
        tokio_tungstenite::tungstenite::Message::text(frame.to_string())
    };
    viewer.send(auth(None)).await.unwrap();
    let answer = frame_among(&mut viewer, &["authenticated", "error"]).await;
    assert_eq!(
        (answer["type"].as_str(), answer["status"].as_u64()),
        (Some("error"), Some(401)),
        "{answer}"
    );
    let (_, fresh) = mint(Some(&ada.id)).answer().await;
    viewer.send(auth(fresh["ticket"].as_str())).await.unwrap();
    let answer = frame_among(&mut viewer, &["authenticated", "error"]).await;
    assert_eq!(answer["type"], "authenticated", "{answer}");
    let (status, history) = p
        .as_server(
            &t,
            Method::GET,
            &format!("/api/streams/{stream}/chat"),
            None,
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{history}");
    let texts: Vec<&str> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["message"].as_str())
        .collect();
    assert_eq!(texts, ["signed hello"], "nothing unsigned was stored");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signature_sent_to_a_public_route_must_verify() {
    let p = platform().await;
    let (t, _, _) = cast(&p).await;
    let contact = json!({"name": "Eve", "email": "eve@example.com", "message": "Hello there"});
    for (method, path, body) in [
        (Method::POST, "/api/contact", Some(&contact)),
        (Method::GET, "/api/sfu/health", None),
        (Method::GET, "/api/openapi.json", None),
    ] {
        let forged = |with_key: bool| {
            let mut builder = p
                .request(method.clone(), path)
                .header("x-timestamp", unix_now().to_string())
                .header("x-signature", "00".repeat(32));
            if with_key {
                builder = builder.header("x-api-key", &t.api_key);
            }
            if let Some(body) = body {
                builder = builder.json(body);
            }
            builder
        };
        let (status, answer) = forged(true).answer().await;
        assert_eq!(
            (status.as_u16(), code(&answer)),
            (401, "signature_mismatch"),
            "{method} {path}: {answer}"
        );
        // Without the API key, nothing says whose secret it is signed with.
        let (status, answer) = forged(false).answer().await;
        assert_eq!(
            (status.as_u16(), code(&answer)),
            (401, "missing_api_key"),
            "{method} {path} unkeyed: {answer}"
        );
        // A valid signature is served as no signature at all is.
        let signed = p.as_server(&t, method.clone(), path, body).status().await;
        let mut plain = p.request(method.clone(), path);
        if let Some(body) = body {
            plain = plain.json(body);
        }
        let unsigned = plain.status().await;
        // (The SFU's health is 503 here: no SFU runs.)
        assert_ne!(unsigned.as_u16(), 401, "{method} {path} unsigned");
        assert_eq!(signed, unsigned, "{method} {path} signed");
    }
}

/// The media plane's attacks (RTMP ingest, HLS playback, restreams, the media server's
/// files), against the real nginx and ffmpeg the media server runs.
mod media_plane;

/// Embed tokens: the one way a private broadcast's embed page plays.
mod embed_tokens;

/// The view beacon's attacks: inflating viewers, watch time and quality figures with a
/// public route that takes no credentials.
mod views;

/// Clips: who may clip whose broadcast, floods, ranges and numbers, reports, signatures.
mod clips;
