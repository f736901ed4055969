//! Music linking against a fake music platform: a real HTTP server on loopback that
//! implements the platform's endpoints and records every request it receives, so the
//! tests can assert what the music component forwarded and what it did not.

use bytes::Bytes;
use domain::jwt::MusicPlatformClaims;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use percent_encoding::percent_decode_str;
use platform_tests::{Exchange, Method, Platform, StatusCode, Tenant, User, json_of};
use serde_json::{Value, json};
use sha2::Sha256;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ---------------------------------------------------------------------------------------
// The fake music platform
// ---------------------------------------------------------------------------------------

/// The `music_service_secret` the platform and the fake music platform share.
const SERVICE_SECRET: &str = "music-service-secret-shared-with-the-music-platform";

/// One request as the fake platform received it.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    /// The path exactly as sent on the wire (still percent-encoded).
    path: String,
    query: Option<String>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn bearer(&self) -> Option<&str> {
        self.header("authorization")?.strip_prefix("Bearer ")
    }

    /// The service token's claims, verified as the music platform verifies them: the
    /// shared `music_service_secret`, HS256, unexpired, and its audience.
    fn service_claims(&self) -> Option<MusicPlatformClaims> {
        let claims: MusicPlatformClaims = domain::jwt::verify(
            SERVICE_SECRET.as_bytes(),
            self.bearer()?,
            domain::time::now(),
        )
        .ok()?;
        (claims.aud == domain::jwt::MUSIC_PLATFORM_AUDIENCE).then_some(claims)
    }

    /// Asserts that the request names `user` with a service token, not their own token.
    fn assert_names(&self, user: &User) {
        let claims = self
            .service_claims()
            .unwrap_or_else(|| panic!("not a service token: {:?}", self.bearer()));
        assert_eq!(claims.sub, user.id);
        assert_ne!(self.bearer(), Some(user.token.as_str()));
    }
}

#[derive(Debug, Clone)]
struct Account {
    id: String,
    email: String,
    nickname: Option<String>,
    activated: bool,
    password: String,
}

#[derive(Default)]
struct FakeState {
    accounts: Vec<Account>,
    /// Live music tokens and the account each belongs to.
    tokens: Vec<(String, String)>,
    received: Vec<Received>,
    issued: u32,
}

impl FakeState {
    fn issue(&mut self, account_id: &str) -> String {
        self.issued += 1;
        let token = format!("mtok-{}-{}", self.issued, "c0ffee");
        self.tokens.push((token.clone(), account_id.to_string()));
        token
    }

    fn account_json(a: &Account) -> Value {
        json!({"id": a.id, "email": a.email, "nickname": a.nickname, "activated": a.activated})
    }
}

/// The password of the account whose e-mail differs from every test user's.
const ZOE_PASSWORD: &str = "p@ss/w ord?#%&é";
/// How long `/slow` takes; well past the platform's `music_timeout_ms` in these tests.
const SLOW: Duration = Duration::from_secs(6);
const TIMEOUT_MS: &str = "1500";

pub(crate) struct FakeMusic {
    url: String,
    state: Arc<Mutex<FakeState>>,
}

impl FakeMusic {
    pub(crate) async fn start() -> FakeMusic {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake music platform");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(FakeState {
            accounts: vec![
                Account {
                    id: "m-zoe".into(),
                    email: "Zoe.Tunes+1@music.example".into(),
                    nickname: Some("zoetunes".into()),
                    activated: true,
                    password: ZOE_PASSWORD.into(),
                },
                // The same e-mail as the test user `ada`, in other case.
                Account {
                    id: "m-ada".into(),
                    email: "ADA@Example.COM".into(),
                    nickname: Some("ada-music".into()),
                    activated: false,
                    password: "not needed".into(),
                },
                // Its password check answers 200 without a token.
                Account {
                    id: "m-quiet".into(),
                    email: "quiet@music.example".into(),
                    nickname: None,
                    activated: true,
                    password: "right".into(),
                },
            ],
            ..Default::default()
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(state.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FakeMusic { url, state }
    }

    fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    fn take_received(&self) -> Vec<Received> {
        std::mem::take(&mut self.state.lock().unwrap().received)
    }

    fn last(&self) -> Received {
        self.received()
            .pop()
            .expect("the fake platform received a request")
    }

    fn is_live(&self, token: &str) -> bool {
        self.state
            .lock()
            .unwrap()
            .tokens
            .iter()
            .any(|(t, _)| t == token)
    }

    fn revoke_all(&self) {
        self.state.lock().unwrap().tokens.clear();
    }

    /// The platform with this fake as `music_url` and a short timeout.
    async fn platform(&self) -> Platform {
        self.platform_waiting(TIMEOUT_MS).await
    }

    /// The platform with this fake as `music_url`, waiting `timeout_ms` for its answers.
    pub(crate) async fn platform_waiting(&self, timeout_ms: &str) -> Platform {
        Platform::start_with(&[
            ("music_url", &self.url),
            ("music_timeout_ms", timeout_ms),
            ("music_service_secret", SERVICE_SECRET),
        ])
        .await
    }
}

fn decode(segment: &str) -> String {
    percent_decode_str(segment).decode_utf8_lossy().into_owned()
}

fn reply(status: u16, body: Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

async fn handle(
    state: Arc<Mutex<FakeState>>,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let r = Received {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    state.lock().unwrap().received.push(r.clone());
    let segments: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
    if segments.first() == Some(&"slow") {
        // `/slow/<seconds>` takes that long; any other `/slow/...` takes `SLOW`.
        let seconds = segments.get(1).and_then(|s| s.parse().ok());
        tokio::time::sleep(seconds.map_or(SLOW, Duration::from_secs)).await;
        return Ok(reply(200, json!({"late": true})));
    }
    let mut s = state.lock().unwrap();
    let response = match (r.method.as_str(), segments.as_slice()) {
        ("POST", ["auth", "platform"]) => {
            let identity: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            let email = identity["email"].as_str().unwrap_or_default().to_string();
            if r.service_claims().is_none() || email.is_empty() {
                reply(
                    401,
                    json!({"detail": "a service token and an e-mail are required"}),
                )
            } else {
                let existing = s
                    .accounts
                    .iter()
                    .find(|a| a.email.eq_ignore_ascii_case(&email))
                    .cloned();
                let account = existing.unwrap_or_else(|| {
                    let created = Account {
                        id: format!("m-new-{}", s.accounts.len()),
                        email,
                        nickname: identity["username"].as_str().map(str::to_string),
                        activated: true,
                        password: String::new(),
                    };
                    s.accounts.push(created.clone());
                    created
                });
                let token = s.issue(&account.id);
                reply(
                    200,
                    json!({"token": token, "user": FakeState::account_json(&account)}),
                )
            }
        }
        ("POST", ["auth", "refresh"]) => {
            let presented = r.bearer().unwrap_or_default().to_string();
            match s.tokens.iter().position(|(t, _)| *t == presented) {
                Some(i) => {
                    let (_, account) = s.tokens.remove(i);
                    let token = s.issue(&account);
                    reply(200, json!({"token": token}))
                }
                None => reply(401, json!({"detail": "unknown token"})),
            }
        }
        ("GET", ["users", "search"]) => {
            let q = r
                .query
                .as_deref()
                .and_then(|q| q.strip_prefix("q="))
                .map(decode)
                .unwrap_or_default()
                .to_lowercase();
            let mut found: Vec<Value> = s
                .accounts
                .iter()
                .filter(|a| {
                    a.email.to_lowercase().contains(&q)
                        || a.nickname
                            .as_deref()
                            .is_some_and(|n| n.to_lowercase().contains(&q))
                })
                .map(FakeState::account_json)
                .collect();
            // An entry without an e-mail: the service leaves it out.
            found.push(json!({"id": "m-broken"}));
            reply(200, Value::Array(found))
        }
        ("GET", ["users", id]) => {
            let id = decode(id);
            match s.accounts.iter().find(|a| a.id == id) {
                Some(a) => reply(200, FakeState::account_json(a)),
                None => reply(404, json!({"detail": "no such user"})),
            }
        }
        ("POST", ["gettoken", email, password, ""]) => {
            let (email, password) = (decode(email), decode(password));
            let account = s
                .accounts
                .iter()
                .find(|a| a.email == email && a.password == password)
                .cloned();
            match account {
                Some(a) if a.id == "m-quiet" => reply(200, json!({"status": "checked"})),
                Some(a) => {
                    let token = s.issue(&a.id);
                    reply(200, json!({"token": token}))
                }
                None => reply(400, json!({"non_field_errors": ["unable to log in"]})),
            }
        }
        (_, ["bytes"]) => hyper::Response::builder()
            .status(201)
            .header("content-type", "application/octet-stream")
            .body(Full::new(Bytes::from((0..=255u8).collect::<Vec<_>>())))
            .unwrap(),
        _ => {
            // Echo, with a status of the caller's choice and some headers to filter.
            let status = match segments.as_slice() {
                ["status", code] => code.parse().unwrap_or(200),
                _ => 200,
            };
            hyper::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .header("x-music-echo", "yes")
                .header("vary", "accept")
                .header("vary", "origin")
                .header("set-cookie", "music_session=1; Path=/")
                .header("keep-alive", "timeout=5")
                .header("proxy-authenticate", "Basic")
                .header("connection", "x-fake-hop")
                .header("x-fake-hop", "1")
                .body(Full::new(Bytes::from(
                    json!({"echo": r.method, "path": r.path, "query": r.query}).to_string(),
                )))
                .unwrap()
        }
    };
    Ok(response)
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

const AUTHENTICATE: &str = "/api/users/music/authenticate";
const LINK: &str = "/api/users/music/link";
const REFRESH: &str = "/api/users/music/refresh-token";
const LINK_EXISTING: &str = "/api/users/music/link-existing";

async fn call(p: &Platform, user: &User, method: Method, path: &str) -> (StatusCode, Value) {
    p.as_user(user, method, path).answer().await
}

async fn call_json(
    p: &Platform,
    user: &User,
    method: Method,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    p.as_user(user, method, path).json(&body).answer().await
}

/// Asserts a problem+json answer with `status` and `code`.
async fn assert_problem(response: platform_tests::Response, status: u16, code: &str) {
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (got, body) = json_of(response).await;
    assert_eq!(got.as_u16(), status, "{body}");
    assert_eq!(content_type, "application/problem+json", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["status"], status, "{body}");
}

/// Sends `request` and asserts a problem+json answer with `status` and `code`.
async fn expect_problem(request: reqwest::RequestBuilder, status: u16, code: &str) {
    assert_problem(request.send().await.unwrap(), status, code).await;
}

async fn link_existing(p: &Platform, user: &User, body: Value) -> (StatusCode, Value) {
    call_json(p, user, Method::POST, LINK_EXISTING, body).await
}

/// Sets the caller's link active or inactive.
async fn set_active(p: &Platform, user: &User, active: bool) {
    let (status, body) = call_json(p, user, Method::PUT, LINK, json!({"isActive": active})).await;
    assert_eq!(status, 200, "{body}");
}

/// Sends a request with the exact request-target given (no client-side normalisation of
/// `..`, `\` or percent-escapes) and answers its status and body.
async fn raw_request(p: &Platform, user: &User, method: &str, target: &str) -> (u16, String) {
    let addr = p.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nX-API-Key: {}\r\n\
         Authorization: Bearer {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        user.api_key, user.token
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("an answer in time")
        .unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A fake music platform, the platform pointing at it, and a user of a new tenant.
async fn setup(username: &str) -> (FakeMusic, Platform, Tenant, User) {
    let music = FakeMusic::start().await;
    let p = music.platform().await;
    let (tenant, user) = user_in(&p, "Acme", username).await;
    (music, p, tenant, user)
}

async fn user_in(p: &Platform, name: &str, username: &str) -> (Tenant, User) {
    let tenant = p.register_client(name).await;
    let user = p.signup(&tenant, username).await;
    (tenant, user)
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn every_route_needs_an_api_key_and_a_user_token() {
    let (music, p, tenant, ada) = setup("ada").await;
    let routes = [
        (Method::POST, AUTHENTICATE),
        (Method::GET, LINK),
        (Method::POST, LINK),
        (Method::PUT, LINK),
        (Method::DELETE, LINK),
        (Method::POST, REFRESH),
        (Method::GET, "/api/users/music/search?q=zoe"),
        (Method::POST, LINK_EXISTING),
        (Method::GET, "/api/users/music/proxy/tracks"),
    ];
    for (method, path) in routes {
        let no_key = p.request(method.clone(), path).bearer_auth(&ada.token);
        expect_problem(no_key, 401, "missing_api_key").await;
        let no_token = p.as_client(&tenant, method.clone(), path);
        expect_problem(no_token, 401, "missing_token").await;
        let bad_token = p.as_client(&tenant, method, path).bearer_auth("a.b.c");
        assert_eq!(bad_token.status().await, 401, "{path}");
    }
    assert!(music.received().is_empty(), "nothing reached the platform");
}

#[tokio::test(flavor = "multi_thread")]
async fn link_records_authenticate_and_unlink() {
    let (music, p, _, bob) = setup("bob").await;

    // No link yet: GET, PUT, DELETE and refresh-token are 404 problems.
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        expect_problem(p.as_user(&bob, method, LINK), 404, "not_found").await;
    }
    expect_problem(p.as_user(&bob, Method::POST, REFRESH), 404, "not_found").await;

    // POST creates a bare link (no music account yet); the client cannot name one.
    let (status, created) = call_json(&p, &bob, Method::POST, LINK, json!({})).await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["platformUserId"], bob.id.as_str());
    assert_eq!(created["platformUserEmail"], "bob@example.com");
    assert_eq!(created["platformMusicUserId"], Value::Null);
    assert_eq!(created["linkedAt"], Value::Null);
    assert_eq!(created["isActive"], true);
    let link_id = created["id"].as_str().unwrap().to_string();
    for body in [
        json!({"platformMusicUserId": "m-zoe"}),
        json!({"isActive": "yes"}),
        json!({"favourite": true}),
    ] {
        let (status, problem) = call_json(&p, &bob, Method::POST, LINK, body.clone()).await;
        assert_eq!(status, 422, "{body} {problem}");
        let (status, _) = call_json(&p, &bob, Method::PUT, LINK, body.clone()).await;
        assert_eq!(status, 422, "{body}");
    }

    // PUT updates the metadata.
    let (status, updated) =
        call_json(&p, &bob, Method::PUT, LINK, json!({"isActive": false})).await;
    assert_eq!(status, 200);
    assert_eq!(updated["isActive"], false);
    assert_eq!(updated["id"], link_id.as_str());

    // authenticate: a service token naming bob goes to the platform, which creates bob's
    // account.
    let (status, authed) = call(&p, &bob, Method::POST, AUTHENTICATE).await;
    assert_eq!(status, 200, "{authed}");
    let sent = music.last();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/auth/platform")
    );
    sent.assert_names(&bob);
    assert_eq!(sent.header("x-api-key"), None);
    assert_eq!(sent.header("cookie"), None);
    let identity: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        identity,
        json!({"userId": bob.id, "email": "bob@example.com", "username": "bob"})
    );
    let music_user = authed["platformMusicUserId"].as_str().unwrap().to_string();
    assert!(music_user.starts_with("m-new-"), "{authed}");
    assert_eq!(authed["id"], link_id.as_str(), "the same link is updated");
    assert_eq!(authed["isActive"], true);
    let linked_at = authed["linkedAt"].as_str().unwrap().to_string();
    assert!(
        linked_at.ends_with('Z') && linked_at.contains('T'),
        "{linked_at}"
    );
    // The token itself never appears in an answer.
    assert!(!authed.to_string().contains("mtok-"));

    // Authenticating again keeps the account and its linkedAt, with a new token.
    let (_, again) = call(&p, &bob, Method::POST, AUTHENTICATE).await;
    assert_eq!(again["platformMusicUserId"], music_user.as_str());
    assert_eq!(again["linkedAt"], linked_at.as_str());
    let (status, read) = call(&p, &bob, Method::GET, LINK).await;
    assert_eq!(status, 200);
    assert_eq!(read, again);

    // Unlink: gone, and the stored token is no longer used by the proxy.
    let (status, body) = call(&p, &bob, Method::DELETE, LINK).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);
    expect_problem(p.as_user(&bob, Method::GET, LINK), 404, "not_found").await;
    let (status, _) = call(&p, &bob, Method::GET, "/api/users/music/proxy/tracks").await;
    assert_eq!(status, 200);
    music.last().assert_names(&bob);
}

#[tokio::test(flavor = "multi_thread")]
async fn refresh_token_trades_the_stored_token_at_the_platform() {
    let (music, p, _, bob) = setup("bob").await;

    // A bare link has no token to refresh.
    call_json(&p, &bob, Method::POST, LINK, json!({})).await;
    expect_problem(
        p.as_user(&bob, Method::POST, REFRESH),
        409,
        "music_token_missing",
    )
    .await;

    call(&p, &bob, Method::POST, AUTHENTICATE).await;
    call(&p, &bob, Method::GET, "/api/users/music/proxy/me").await;
    let first = music.last().bearer().unwrap().to_string();
    assert!(first.starts_with("mtok-"), "the proxy uses the music token");

    let (status, record) = call(&p, &bob, Method::POST, REFRESH).await;
    assert_eq!(status, 200, "{record}");
    assert!(record["platformMusicUserId"].is_string());
    let sent = music.last();
    assert_eq!(sent.path, "/auth/refresh");
    assert_eq!(
        sent.bearer(),
        Some(first.as_str()),
        "the stored token is presented"
    );
    assert!(!music.is_live(&first));

    call(&p, &bob, Method::GET, "/api/users/music/proxy/me").await;
    let second = music.last().bearer().unwrap().to_string();
    assert_ne!(second, first);
    assert!(music.is_live(&second), "the new token is stored and used");

    // An inactive link is not refreshed.
    set_active(&p, &bob, false).await;
    expect_problem(
        p.as_user(&bob, Method::POST, REFRESH),
        409,
        "music_link_inactive",
    )
    .await;
    set_active(&p, &bob, true).await;

    // The platform refusing the stored token is a 401 asking to authenticate again.
    music.revoke_all();
    expect_problem(
        p.as_user(&bob, Method::POST, REFRESH),
        401,
        "music_token_rejected",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn search_validates_q_and_answers_search_results() {
    let (music, p, _, bob) = setup("bob").await;

    let too_long = "x".repeat(101);
    for path in [
        "/api/users/music/search".to_string(),
        "/api/users/music/search?q=".to_string(),
        "/api/users/music/search?q=z".to_string(),
        "/api/users/music/search?q=%20z%20".to_string(),
        format!("/api/users/music/search?q={too_long}"),
    ] {
        expect_problem(p.as_user(&bob, Method::GET, &path), 400, "invalid_query").await;
    }
    assert!(music.received().is_empty(), "invalid searches are not sent");

    // By nickname, then by e-mail; a 100-character q is accepted.
    let (status, found) = call(&p, &bob, Method::GET, "/api/users/music/search?q=ZOE").await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(
        found,
        json!([{"id": "m-zoe", "email": "Zoe.Tunes+1@music.example", "nickname": "zoetunes", "activated": true}])
    );
    let sent = music.last();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("GET", "/users/search")
    );
    assert_eq!(sent.query.as_deref(), Some("q=ZOE"));
    sent.assert_names(&bob); // no link: the service token
    assert_eq!(sent.header("x-api-key"), None);

    let (_, found) = call(
        &p,
        &bob,
        Method::GET,
        "/api/users/music/search?q=quiet%40music",
    )
    .await;
    assert_eq!(
        found,
        json!([{"id": "m-quiet", "email": "quiet@music.example", "nickname": null, "activated": true}])
    );
    assert_eq!(music.last().query.as_deref(), Some("q=quiet%40music"));

    let hundred = "y".repeat(100);
    let (status, found) = call(
        &p,
        &bob,
        Method::GET,
        &format!("/api/users/music/search?q={hundred}"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(found, json!([]));

    // With a link, the stored music token is the credential.
    call(&p, &bob, Method::POST, AUTHENTICATE).await;
    call(&p, &bob, Method::GET, "/api/users/music/search?q=ada").await;
    assert!(music.last().bearer().unwrap().starts_with("mtok-"));
}

#[tokio::test(flavor = "multi_thread")]
async fn link_existing_with_the_same_email_needs_no_password() {
    let (music, p, _, ada) = setup("ada").await;

    // ada@example.com and the platform's ADA@Example.COM are the same, ignoring case.
    let (status, record) = link_existing(
        &p,
        &ada,
        json!({"musicUserId": "m-ada", "musicUserEmail": "Ada@example.com"}),
    )
    .await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["platformMusicUserId"], "m-ada");
    assert_eq!(record["platformUserEmail"], "ada@example.com");
    assert_eq!(record["isActive"], true);
    assert!(record["linkedAt"].is_string());

    // The platform was asked for the account's e-mail; no password check was made.
    let sent = music.take_received();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (sent[0].method.as_str(), sent[0].path.as_str()),
        ("GET", "/users/m-ada")
    );
    sent[0].assert_names(&ada);

    let (status, read) = call(&p, &ada, Method::GET, LINK).await;
    assert_eq!(status, 200);
    assert_eq!(read, record);

    // A client-sent e-mail is only a hint: claiming ada's e-mail for zoe's account does
    // not skip the password.
    let (status, problem) = link_existing(
        &p,
        &ada,
        json!({"musicUserId": "m-zoe", "musicUserEmail": "ada@example.com"}),
    )
    .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "password");
    assert!(
        !music
            .received()
            .iter()
            .any(|r| r.path.starts_with("/gettoken")),
        "no password check without a password"
    );
    let (_, still) = call(&p, &ada, Method::GET, LINK).await;
    assert_eq!(
        still["platformMusicUserId"], "m-ada",
        "the link is unchanged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn link_existing_checks_the_password_at_gettoken() {
    let (music, p, _, bob) = setup("bob").await;

    // Malformed bodies.
    for body in [
        json!({}),
        json!({"musicUserId": ""}),
        json!({"musicUserId": "m-zoe", "musicUserEmail": "not-an-email"}),
        json!({"musicUserId": "m-zoe", "password": 5}),
        json!({"musicUserId": "m-zoe", "role": "admin"}),
    ] {
        let (status, _) = link_existing(&p, &bob, body.clone()).await;
        assert_eq!(status, 422, "{body}");
    }
    // The hint already says the e-mails differ: refused without contacting the platform.
    let (status, problem) = link_existing(
        &p,
        &bob,
        json!({"musicUserId": "m-zoe", "musicUserEmail": "zoe.tunes+1@music.example"}),
    )
    .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "password");
    assert!(music.take_received().is_empty());

    // Without a hint the platform is asked; the e-mails differ, so a password is needed.
    let (status, _) = link_existing(&p, &bob, json!({"musicUserId": "m-zoe"})).await;
    assert_eq!(status, 422);
    assert_eq!(music.take_received().len(), 1, "only the look-up");

    // An unknown account is 404.
    expect_problem(
        p.as_user(&bob, Method::POST, LINK_EXISTING)
            .json(&json!({"musicUserId": "m-nobody", "password": "x"})),
        404,
        "not_found",
    )
    .await;
    music.take_received();

    // A wrong password: 401, nothing stored.
    expect_problem(
        p.as_user(&bob, Method::POST, LINK_EXISTING)
            .json(&json!({"musicUserId": "m-zoe", "password": "wrong"})),
        401,
        "music_password_invalid",
    )
    .await;
    let check = music.take_received().pop().unwrap();
    assert_eq!(check.method, "POST");
    assert_eq!(check.path, "/gettoken/Zoe.Tunes%2B1%40music.example/wrong/");
    assert_eq!(
        check.header("authorization"),
        None,
        "no credential is sent along"
    );
    assert_eq!(check.header("x-api-key"), None);
    let (status, _) = call(&p, &bob, Method::GET, LINK).await;
    assert_eq!(status, 404, "no link after a failed check");

    // 200 without a token in the answer is a failure too.
    expect_problem(
        p.as_user(&bob, Method::POST, LINK_EXISTING)
            .json(&json!({"musicUserId": "m-quiet", "password": "right"})),
        401,
        "music_password_invalid",
    )
    .await;
    let (status, _) = call(&p, &bob, Method::GET, LINK).await;
    assert_eq!(status, 404);
    music.take_received();

    // The right password: both segments encoded exactly, the link stored with the token.
    let (status, record) = link_existing(&p, &bob, json!({"musicUserId": "m-zoe", "musicUserEmail": "Zoe.Tunes+1@music.example", "password": ZOE_PASSWORD}),
    )
    .await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["platformMusicUserId"], "m-zoe");
    assert_eq!(record["platformUserEmail"], "bob@example.com");
    let sent = music.take_received();
    let check = sent
        .iter()
        .find(|r| r.path.starts_with("/gettoken/"))
        .unwrap();
    assert_eq!(
        check.path,
        "/gettoken/Zoe.Tunes%2B1%40music.example/p%40ss%2Fw%20ord%3F%23%25%26%C3%A9/"
    );
    assert_eq!(check.query, None);
    // The token from the answer is what the proxy now presents.
    call(&p, &bob, Method::GET, "/api/users/music/proxy/me").await;
    let used = music.last().bearer().unwrap().to_string();
    assert!(used.starts_with("mtok-") && music.is_live(&used), "{used}");
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_password_failures_are_rate_limited() {
    let (music, p, _, bob) = setup("bob").await;
    let attempt = || {
        p.as_user(&bob, Method::POST, LINK_EXISTING)
            .json(&json!({"musicUserId": "m-zoe", "password": "guess"}))
            .send()
    };
    for _ in 0..10 {
        assert_eq!(attempt().await.unwrap().status(), 401);
    }
    music.take_received();
    let limited = attempt().await.unwrap();
    assert!(limited.headers().contains_key("retry-after"));
    assert_problem(limited, 429, "rate_limited").await;
    assert!(
        music.received().is_empty(),
        "a limited attempt reaches nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_proxy_passes_requests_through_and_filters_headers() {
    let (music, p, tenant, bob) = setup("bob").await;

    // Without a link a service token is the credential (rule 5). Method, path with a
    // trailing slash, query and body pass through; the caller's credentials do not.
    let response = p
        .as_user(
            &bob,
            Method::PATCH,
            "/api/users/music/proxy/playlists/7/tracks/?order=desc&x=%20y",
        )
        .header("content-type", "text/plain")
        .header("x-trace-id", "trace-1")
        .header("cookie", "session=secret")
        .header("keep-alive", "timeout=5")
        .header("x-forwarded-for", "10.9.8.7")
        .body("raw body, not JSON")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers.get("x-music-echo").unwrap(), "yes");
    assert_eq!(headers.get("vary").unwrap(), "accept, origin");
    // (Headers that a `Connection` header names are hop-by-hop too, but the host removes
    // `Connection` itself before the component sees it; the unit tests cover them.)
    for hidden in [
        "set-cookie",
        "keep-alive",
        "proxy-authenticate",
        "connection",
    ] {
        assert!(
            headers.get(hidden).is_none(),
            "{hidden} must not be returned"
        );
    }
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["echo"], "PATCH");

    let sent = music.last();
    assert_eq!(sent.method, "PATCH");
    assert_eq!(sent.path, "/playlists/7/tracks/");
    assert_eq!(sent.query.as_deref(), Some("order=desc&x=%20y"));
    assert_eq!(sent.body, b"raw body, not JSON");
    assert_eq!(sent.header("content-type"), Some("text/plain"));
    assert_eq!(sent.header("x-trace-id"), Some("trace-1"));
    sent.assert_names(&bob);
    for withheld in [
        "x-api-key",
        "cookie",
        "keep-alive",
        "x-forwarded-for",
        "x-signature",
        "x-timestamp",
        "spin-full-url",
        "spin-client-addr",
    ] {
        assert_eq!(
            sent.header(withheld),
            None,
            "{withheld} must not be forwarded"
        );
    }
    assert!(
        sent.headers.iter().all(|(n, _)| !n.starts_with("spin-")),
        "{:?}",
        sent.headers
    );

    // Status and binary body come back as the platform sent them.
    let response = p
        .as_user(&bob, Method::POST, "/api/users/music/proxy/bytes")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "application/octet-stream"
    );
    let bytes = response.bytes().await.unwrap();
    assert_eq!(bytes.to_vec(), (0..=255u8).collect::<Vec<_>>());
    for (method, status) in [
        (Method::GET, 404),
        (Method::DELETE, 418),
        (Method::PUT, 503),
    ] {
        let path = format!("/api/users/music/proxy/status/{status}");
        let response = p.as_user(&bob, method.clone(), &path).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(
            response.headers().get("content-type").unwrap(),
            "application/json",
            "the platform's own answer, not a problem"
        );
        assert_eq!(music.last().method, method.as_str());
    }
    // A signed request (X-Signature, X-Timestamp) is verified here and forwarded without
    // its signing headers.
    let target = "/api/users/music/proxy/signed?a=1";
    let body = r#"{"play":true}"#;
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(tenant.secret_key.as_bytes()).unwrap();
    mac.update(format!("POST{target}{body}{timestamp}").as_bytes());
    let signature = hex::encode(mac.finalize().into_bytes());
    let response = p
        .as_user(&bob, Method::POST, target)
        .header("content-type", "application/json")
        .header("x-signature", &signature)
        .header("x-timestamp", &timestamp)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sent = music.last();
    assert_eq!(
        (sent.path.as_str(), sent.query.as_deref()),
        ("/signed", Some("a=1"))
    );
    assert_eq!(sent.body, body.as_bytes());
    assert_eq!(sent.header("x-signature"), None);
    assert_eq!(sent.header("x-timestamp"), None);

    // With a linked account the stored music token replaces the service token.
    call(&p, &bob, Method::POST, AUTHENTICATE).await;
    call(&p, &bob, Method::GET, "/api/users/music/proxy/me").await;
    let token = music.last().bearer().unwrap().to_string();
    assert!(token.starts_with("mtok-") && music.is_live(&token));
    // An inactive link's token is not used.
    set_active(&p, &bob, false).await;
    call(&p, &bob, Method::GET, "/api/users/music/proxy/me").await;
    music.last().assert_names(&bob);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_proxy_refuses_paths_that_could_leave_the_platform() {
    let (music, p, _, bob) = setup("bob").await;
    let prefix = "/api/users/music/proxy/";
    for tail in [
        "..",
        "../link",
        "a/../../link",
        "a/./b",
        "%2e%2e/admin",
        ".%2E/admin",
        "a%2Fb",
        "a%2fb",
        "..%2f..%2fapi%2fusers",
        "a%5Cb",
        "a%5c..%5cb",
        "a\\b",
        "..\\..\\admin",
        "http://evil.example/x",
        "https:%2F%2Fevil.example",
        "http%3A%2F%2Fevil.example",
        "//evil.example/x",
        "/evil.example",
        "a//b",
        "a%00b",
        "a%zz",
    ] {
        let target = format!("{prefix}{tail}");
        let (status, answer) = raw_request(&p, &bob, "GET", &target).await;
        assert_eq!(status, 400, "{target}: {answer}");
    }
    // The answers came from the music component (problem+json with its code), except
    // where the HTTP server already refused the request line.
    let (_, answer) = raw_request(&p, &bob, "GET", &format!("{prefix}a%2Fb")).await;
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(answer.contains("invalid_music_path"), "{answer}");
    // A full URL as the request target names our own host, not another one.
    let (status, _) = raw_request(
        &p,
        &bob,
        "GET",
        &format!("{}{prefix}..%2F..%2Fadmin", p.base),
    )
    .await;
    assert_eq!(status, 400);
    // CONNECT and TRACE are not forwarded.
    let response = p
        .as_user(&bob, Method::TRACE, "/api/users/music/proxy/me")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);

    assert!(
        music.received().is_empty(),
        "the platform was never contacted: {:?}",
        music.received()
    );
    // A legitimate path still works.
    let (status, _) = raw_request(&p, &bob, "GET", &format!("{prefix}a..b/c.d")).await;
    assert_eq!(status, 200);
    assert_eq!(music.last().path, "/a..b/c.d");
}

#[tokio::test(flavor = "multi_thread")]
async fn timeouts_are_504_and_an_unreachable_platform_is_502() {
    let (_music, p, _, bob) = setup("bob").await;

    let started = Instant::now();
    expect_problem(
        p.as_user(&bob, Method::GET, "/api/users/music/proxy/slow/track"),
        504,
        "music_platform_timeout",
    )
    .await;
    assert!(started.elapsed() < SLOW, "answered before the platform did");

    // Nothing listens on this port.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let down =
        Platform::start_with(&[("music_url", &closed), ("music_timeout_ms", TIMEOUT_MS)]).await;
    let (_, eve) = user_in(&down, "Acme", "eve").await;
    for (method, path) in [
        (Method::GET, "/api/users/music/proxy/tracks"),
        (Method::POST, AUTHENTICATE),
        (Method::GET, "/api/users/music/search?q=zoe"),
    ] {
        expect_problem(
            down.as_user(&eve, method, path),
            502,
            "music_platform_unreachable",
        )
        .await;
    }
    expect_problem(
        down.as_user(&eve, Method::POST, LINK_EXISTING)
            .json(&json!({"musicUserId": "m-zoe", "password": "x"})),
        502,
        "music_platform_unreachable",
    )
    .await;
    let (status, _) = call(&down, &eve, Method::GET, LINK).await;
    assert_eq!(status, 404, "nothing was stored");
}

#[tokio::test(flavor = "multi_thread")]
async fn tenants_do_not_see_each_others_links() {
    let (music, p, _, ada_a) = setup("ada").await;
    let (_, ada_z) = user_in(&p, "Zeta", "ada").await;

    let (status, linked) = call(&p, &ada_a, Method::POST, AUTHENTICATE).await;
    assert_eq!(status, 200, "{linked}");

    // The same username and e-mail in another tenant has no link and cannot touch it.
    let (status, _) = call(&p, &ada_z, Method::GET, LINK).await;
    assert_eq!(status, 404);
    let (status, _) = call(&p, &ada_z, Method::DELETE, LINK).await;
    assert_eq!(status, 404);
    let (status, _) = call_json(&p, &ada_z, Method::PUT, LINK, json!({"isActive": false})).await;
    assert_eq!(status, 404);
    let (status, _) = call(&p, &ada_z, Method::POST, REFRESH).await;
    assert_eq!(status, 404);
    // Its proxy calls name its own user, never carry the other tenant's music token.
    call(&p, &ada_z, Method::GET, "/api/users/music/proxy/me").await;
    music.last().assert_names(&ada_z);

    // A token of one tenant with the other tenant's API key is refused.
    expect_problem(
        p.request(Method::GET, LINK)
            .header("x-api-key", &ada_z.api_key)
            .bearer_auth(&ada_a.token),
        401,
        "tenant_mismatch",
    )
    .await;

    let (status, still) = call(&p, &ada_a, Method::GET, LINK).await;
    assert_eq!(status, 200);
    assert_eq!(still, linked);
}

/// Every file in the state directory, as bytes.
fn state_files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(state_files(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, bytes));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn music_tokens_are_encrypted_at_rest() {
    let (music, p, _, bob) = setup("bob").await;
    call(&p, &bob, Method::POST, AUTHENTICATE).await;
    call(&p, &bob, Method::GET, "/api/users/music/proxy/me").await;
    let token = music.last().bearer().unwrap().to_string();
    assert!(token.starts_with("mtok-"));

    // The stored value is sealed: AES-GCM text in its own format, not the token.
    let stored = p
        .db_texts(
            "SELECT music_token FROM music_links WHERE user_id = ?1",
            &[&bob.id],
        )
        .await;
    let stored = stored[0].clone().expect("a sealed token");
    assert!(stored.starts_with("v1."), "{stored}");
    assert_eq!(stored.split('.').count(), 3);
    assert!(!stored.contains(&token));
    // On SQLite, nowhere in the state directory (database, its journal, key-value store)
    // is the token in clear, while the link's other data is there.
    if p.backends.is_none() {
        let files = state_files(p.state_dir());
        assert!(files.iter().any(|(_, b)| contains(b, &bob.id)));
        for (path, bytes) in &files {
            assert!(
                !contains(bytes, &token),
                "{} holds the token",
                path.display()
            );
        }
    }

    // After a restart on the same state (and the same generated key) the token opens.
    let p = p.restart().await;
    let (status, _) = call(&p, &bob, Method::GET, "/api/users/music/proxy/me").await;
    assert_eq!(status, 200);
    assert_eq!(music.last().bearer(), Some(token.as_str()));

    // Deleting the account deletes its link and sealed token.
    let (status, _) = call(&p, &bob, Method::DELETE, "/api/users/profile").await;
    assert_eq!(status, 200);
    let remaining = p
        .db_number(
            "SELECT COUNT(*) FROM music_links WHERE user_id = ?1",
            &[&bob.id],
        )
        .await;
    assert_eq!(remaining, 0);
}
