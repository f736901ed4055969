//! The first vertical slice through the real application: SFU health, providers, SDK-client
//! registration, and state that survives a restart.

use platform_tests::{Exchange, Method, Platform, json_of};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn sfu_health_is_public_and_reports_an_unconfigured_sfu() {
    let p = Platform::start().await;
    let (status, body) = p.request(Method::GET, "/api/sfu/health").answer().await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "unconfigured");
    assert_eq!(body["configured"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn sfu_health_probes_a_configured_sfu() {
    let addr = stand_in_sfu().await;
    let (client_url, api_url) = (format!("ws://{addr}"), format!("http://{addr}"));
    let vars = [
        ("sfu_server_url", client_url.as_str()),
        ("sfu_api_url", api_url.as_str()),
        ("sfu_api_key", "APIkey"),
        ("sfu_api_secret", "secret"),
    ];
    let p = Platform::start_with(&vars).await;
    let (status, body) = p.request(Method::GET, "/api/sfu/health").answer().await;
    assert_eq!(
        (status.as_u16(), &body["status"]),
        (200, &json!("ok")),
        "{body}"
    );
    assert_eq!(body["reachable"], true);

    // Configured, but nothing listens there: 503 with the reason.
    let dead = [
        ("sfu_server_url", "ws://127.0.0.1:9"),
        ("sfu_api_url", "http://127.0.0.1:9"),
        ("sfu_api_key", "APIkey"),
        ("sfu_api_secret", "secret"),
    ];
    let p = Platform::start_with(&dead).await;
    let (status, body) = p.request(Method::GET, "/api/sfu/health").answer().await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["reachable"], false);
}

/// The LiveKit URL a user actually has is `wss://...`: clients get it as it is, the server
/// calls the http(s) `sfu_api_url`, and the platform starts (a ws/wss URL is no outbound
/// host).
#[tokio::test(flavor = "multi_thread")]
async fn a_wss_sfu_url_is_handed_to_clients_and_the_server_calls_the_api_url() {
    let addr = stand_in_sfu().await;
    let api_url = format!("http://{addr}");
    let vars = [
        ("sfu_server_url", "wss://my.livekit.cloud"),
        ("sfu_api_url", api_url.as_str()),
        ("sfu_api_key", "APIkey"),
        ("sfu_api_secret", "secret"),
    ];
    let p = Platform::start_with(&vars).await;
    let (status, body) = p.request(Method::GET, "/api/sfu/health").answer().await;
    assert_eq!(
        (status.as_u16(), &body["status"]),
        (200, &json!("ok")),
        "{body}"
    );

    let tenant = p.register_client("Acme").await;
    let (status, body) = p
        .request(Method::GET, "/api/streaming/providers")
        .header("x-api-key", &tenant.api_key)
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["providers"][0]["isConfigured"], true);
    assert_eq!(body["providers"][0]["serverUrl"], "wss://my.livekit.cloud");

    let ada = p.signup(&tenant, "ada").await;
    let (status, session) = p
        .as_user(&ada, Method::POST, "/api/streaming/sessions")
        .json(&json!({"title": "Launch"}))
        .answer()
        .await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["serverUrl"], "wss://my.livekit.cloud");
    let path = format!(
        "/api/streaming/sessions/{}/token",
        session["id"].as_str().unwrap()
    );
    let (status, token) = p
        .as_user(&ada, Method::POST, &path)
        .json(&json!({"role": "publisher"}))
        .answer()
        .await;
    assert_eq!(status, 200, "{token}");
    assert_eq!(token["serverUrl"], "wss://my.livekit.cloud");
    assert!(
        token["token"].as_str().unwrap().starts_with("sfu_"),
        "{token}"
    );
}

/// A stand-in SFU: a real HTTP server on loopback that answers like LiveKit's root.
async fn stand_in_sfu() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 2048];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nOK",
                    )
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread")]
async fn providers_need_an_api_key_and_report_configuration() {
    let p = Platform::start().await;
    let (status, body) = p
        .request(Method::GET, "/api/streaming/providers")
        .answer()
        .await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "missing_api_key");

    let tenant = p.register_client("Acme").await;
    let (status, body) = p
        .request(Method::GET, "/api/streaming/providers")
        .header("x-api-key", &tenant.api_key)
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["providers"][0]["provider"], "livekit");
    assert_eq!(body["providers"][0]["isConfigured"], false);

    let configured = [("sfu_api_key", "k"), ("sfu_api_secret", "s")];
    let p = Platform::start_with(&configured).await;
    let tenant = p.register_client("Acme").await;
    let (_, body) = p
        .request(Method::GET, "/api/streaming/providers")
        .header("x-api-key", &tenant.api_key)
        .answer()
        .await;
    assert_eq!(body["providers"][0]["isConfigured"], true);
    assert_eq!(body["providers"][0]["serverUrl"], "ws://127.0.0.1:7880");
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_answers_credentials_and_validates_fields() {
    let p = Platform::start().await;
    let answer = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .json(&json!({
            "name": "Acme Live", "website": "https://acme.example", "description": "Live shopping",
            "contactName": "Ada", "contactTitle": "CTO", "contactEmail": "ada@acme.example",
            "contactPhone": "+44 20 7946 0000", "expectedApps": "1-5", "useCase": "shopping",
            "expectedUsers": "1000-10000", "agreeTerms": true, "agreeMarketing": false,
            "agreeDataProcessing": true
        }))
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(answer).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);
    assert!(body["apiKey"].as_str().unwrap().starts_with("pk_"));
    assert!(body["secretKey"].as_str().unwrap().len() >= 40);
    assert_eq!(body["clientId"].as_str().unwrap().len(), 36);
    assert!(body["message"].is_string());

    let (status, body) = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .json(&json!({"name": "", "contactEmail": "nope", "agreeTerms": "yes", "surprise": 1}))
        .answer()
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["code"], "validation_failed");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    for field in [
        "name",
        "contactEmail",
        "agreeTerms",
        "agreeDataProcessing",
        "surprise",
    ] {
        assert!(fields.contains(&field), "{field} missing from {fields:?}");
    }

    let (status, body) = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .header("content-type", "application/json")
        .body("{not json")
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (400, Some("malformed_json"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn closed_registration_needs_the_admin_token() {
    let p =
        Platform::start_with(&[("registration_mode", "admin"), ("admin_token", "let-me-in")]).await;
    let body = json!({"name": "X", "contactEmail": "x@example.com", "agreeTerms": true, "agreeDataProcessing": true});
    let status = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .json(&body)
        .status()
        .await;
    assert_eq!(status, 401);
    let status = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .bearer_auth("wrong")
        .json(&body)
        .status()
        .await;
    assert_eq!(status, 401);
    let status = p
        .request(Method::POST, "/api/admin/sdk-clients")
        .bearer_auth("let-me-in")
        .json(&body)
        .status()
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registered_client_survives_a_restart() {
    let p = Platform::start().await;
    let tenant = p.register_client("Durable").await;
    let p = p.restart().await;
    let status = p
        .request(Method::GET, "/api/streaming/providers")
        .header("x-api-key", &tenant.api_key)
        .status()
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_routes_and_methods() {
    let p = Platform::start().await;
    assert_eq!(p.request(Method::GET, "/nothing/here").status().await, 404);
    let (status, body) = p.request(Method::GET, "/api/nothing").answer().await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (404, Some("not_found"))
    );
    let answer = p
        .request(Method::DELETE, "/api/sfu/health")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 405);
    assert_eq!(answer.headers()["allow"], "GET");
}

/// `edgehost up` binds its port before its start-up job `migrate` has applied the schema:
/// requests sent from the first moment are answered 503 with `Retry-After` until it has,
/// never 500 by a component finding no table; then the application answers. Two routes
/// stand for all: `/docs` (a readiness probe's path, no database) and an API call whose
/// key is looked up in the database.
#[tokio::test(flavor = "multi_thread")]
async fn requests_sent_from_the_first_moment_wait_for_the_schema() {
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port");
    let http = platform_tests::Client::new();
    let senders: Vec<_> = (0..4)
        .map(|i| {
            let http = http.clone();
            let (path, ready) = if i % 2 == 0 {
                ("/docs", 200)
            } else {
                ("/api/gifts", 401)
            };
            tokio::spawn(async move {
                let url = format!("http://{listen}{path}");
                let mut answers = Vec::new();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
                let mut served = 0;
                while served < 20 && std::time::Instant::now() < deadline {
                    let sent = http.get(&url).header("x-api-key", "pk_nobody").send().await;
                    let Ok(r) = sent else {
                        // Not listening yet.
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                        continue;
                    };
                    let retry = r
                        .headers()
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap_or_default().to_string());
                    let status = r.status().as_u16();
                    let body = r.text().await.unwrap_or_default();
                    served += usize::from(status == ready);
                    answers.push((status, retry, body));
                }
                (path, ready, answers)
            })
        })
        .collect();
    let p = Platform::start_listening_on(listen, &[]).await;
    let mut held = 0;
    for sender in senders {
        let (path, ready, answers) = sender.await.unwrap();
        let first = answers
            .iter()
            .position(|a| a.0 == ready)
            .unwrap_or_else(|| panic!("{path} never answered {ready}: {:?}", answers.last()));
        for (status, retry, body) in &answers[..first] {
            assert_eq!(
                (*status, retry.as_deref()),
                (503, Some("1")),
                "{path} before the schema: {body}"
            );
        }
        for (status, _, body) in &answers[first..] {
            assert_eq!(*status, ready, "{path} once ready: {body}");
        }
        println!(
            "{path}: {first} answered 503 before the schema, then {} answered {ready}",
            answers.len() - first
        );
        held += first;
    }
    // The senders did run before the schema was there (else this test shows nothing).
    assert!(held > 0, "no request arrived before the schema was applied");
    p.stop().await;
}

/// On the real Spin nothing keeps requests from arriving before the deployment has called
/// `migrate`: the components themselves answer a request that meets a schema not applied
/// yet 503 `schema_not_applied` with `Retry-After`, not 500, and serve once it is.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_before_the_schema_is_applied_is_asked_to_retry() {
    let p = Platform::start_unmigrated(&[]).await;
    for (method, path) in [
        (Method::GET, "/api/gifts"),
        (Method::GET, "/api/streaming/providers"),
        (Method::GET, "/api/wallet"),
    ] {
        let response = p
            .request(method.clone(), path)
            .header("x-api-key", "pk_nobody")
            .send()
            .await
            .unwrap();
        let retry = response.headers().get("retry-after").cloned();
        let (status, body) = json_of(response).await;
        assert_eq!(
            (status.as_u16(), body["code"].as_str()),
            (503, Some("schema_not_applied")),
            "{method} {path}: {body}"
        );
        assert_eq!(retry.unwrap(), "5");
    }
    p.run_job("migrate").await;
    let (status, body) = p
        .request(Method::GET, "/api/gifts")
        .header("x-api-key", "pk_nobody")
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (401, Some("invalid_api_key"))
    );
    p.stop().await;
}
