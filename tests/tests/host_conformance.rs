//! Conformance of `edgehost` with Spin's host behaviour, driven over real HTTP against the
//! `host-probe` component (tests/components/host-probe, manifest in
//! tests/fixtures/host-probe/spin.toml).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};

use platform_tests::backends::{APP_ROLE, PostgresCluster, RedisServer};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

fn fixture() -> PathBuf {
    workspace().join("tests/fixtures/host-probe/spin.toml")
}

fn probe_wasm() -> PathBuf {
    workspace().join("target/wasm32-wasip2/release/host_probe.wasm")
}

/// Environment this test binary sets once, before any server starts or client exists.
const ENV_VAR: (&str, &str) = ("SPIN_VARIABLE_FROM_ENV", "value from the environment");

/// Builds the probe once per process (through its manifest's build command, like
/// `spin build`) and sets the test environment.
async fn setup() {
    static ENV: Once = Once::new();
    ENV.call_once(|| {
        // SAFETY: runs once, before this process starts servers or HTTP clients (every
        // test calls `setup` first, and `Once` makes the others wait), so no thread reads
        // the environment concurrently.
        unsafe { std::env::set_var(ENV_VAR.0, ENV_VAR.1) };
    });
    static BUILT: Mutex<bool> = Mutex::new(false);
    tokio::task::spawn_blocking(|| {
        let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        if !*built {
            edgehost::build_components(&fixture()).expect("host-probe builds");
            *built = true;
        }
    })
    .await
    .expect("build task");
}

struct Probe {
    server: Option<edgehost::Server>,
    base: String,
    http: reqwest::Client,
}

impl Probe {
    async fn start(state: &Path, variables: &[(&str, &str)]) -> Probe {
        Self::try_start(opts(&fixture(), state, variables))
            .await
            .expect("edgehost starts")
    }

    /// The fixture in a fresh state directory, with `configure` applied to the options
    /// (it also gets the state directory, e.g. to write a runtime config there).
    async fn configured(
        variables: &[(&str, &str)],
        configure: impl FnOnce(&mut edgehost::Options, &Path),
    ) -> (tempfile::TempDir, Probe) {
        let state = tempfile::tempdir().expect("tempdir");
        let mut options = opts(&fixture(), state.path(), variables);
        configure(&mut options, state.path());
        let p = Self::try_start(options).await.expect("edgehost starts");
        (state, p)
    }

    async fn try_start(options: edgehost::Options) -> anyhow::Result<Probe> {
        let server = edgehost::Server::start(options).await?;
        Ok(Probe {
            base: format!("http://{}", server.local_addr()),
            server: Some(server),
            http: reqwest::Client::new(),
        })
    }

    async fn get(&self, path: &str) -> (StatusCode, String) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        (resp.status(), resp.text().await.expect("body"))
    }

    async fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// GETs every path at once; answers (path, status, body) in the order given.
    async fn get_concurrently(
        &self,
        paths: &[&'static str],
    ) -> Vec<(&'static str, StatusCode, String)> {
        let tasks: Vec<_> = paths
            .iter()
            .map(|&path| {
                let (http, base) = (self.http.clone(), self.base.clone());
                tokio::spawn(async move {
                    let r = http
                        .get(format!("{base}{path}"))
                        .send()
                        .await
                        .expect("request");
                    (path, r.status(), r.text().await.expect("body"))
                })
            })
            .collect();
        let mut answers = Vec::new();
        for t in tasks {
            answers.push(t.await.expect("task"));
        }
        answers
    }

    async fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await.expect("clean shutdown");
        }
    }
}

fn opts(manifest: &Path, state: &Path, variables: &[(&str, &str)]) -> edgehost::Options {
    edgehost::Options {
        manifest: manifest.to_path_buf(),
        listen: "127.0.0.1:0".parse().expect("address"),
        state_dir: Some(state.to_path_buf()),
        variables: variables
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn routes_and_spin_headers() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    let port = p.server.as_ref().expect("server").local_addr().port();

    let (status, body) = p.get("/hello").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "hello"));

    // Exact beats :param beats the wildcard.
    let h = &p.json("/routes/fixed").await["headers"];
    assert_eq!(h["spin-matched-route"], "/routes/fixed");
    assert_eq!(h["spin-path-info"], "");
    assert_eq!(h["spin-component-route"], "/routes/fixed");
    assert_eq!(h["spin-raw-component-route"], "/routes/fixed");
    assert_eq!(h["spin-base-path"], "/");

    let h = &p.json("/routes/42").await["headers"];
    assert_eq!(h["spin-matched-route"], "/routes/:id");
    assert_eq!(h["spin-path-match-id"], "42");
    assert_eq!(h["spin-path-info"], "");

    let v = p.json("/routes/7/posts/a/b?x=1&y=2").await;
    let h = &v["headers"];
    assert_eq!(h["spin-matched-route"], "/routes/:id/:tab/...");
    assert_eq!(h["spin-raw-component-route"], "/routes/:id/:tab/...");
    assert_eq!(h["spin-component-route"], "/routes/:id/:tab");
    assert_eq!(h["spin-path-match-id"], "7");
    assert_eq!(h["spin-path-match-tab"], "posts");
    assert_eq!(h["spin-path-info"], "/a/b");
    assert_eq!(
        h["spin-full-url"],
        format!("http://127.0.0.1:{port}/routes/7/posts/a/b?x=1&y=2")
    );
    let client = h["spin-client-addr"].as_str().expect("client addr");
    assert!(client.starts_with("127.0.0.1:"), "{client}");
    assert_eq!(v["path"], "/routes/7/posts/a/b");
    assert_eq!(v["query"], "x=1&y=2");

    let h = &p.json("/routes").await["headers"];
    assert_eq!(h["spin-matched-route"], "/routes/...");
    assert_eq!(h["spin-path-info"], "");
    assert_eq!(h["spin-component-route"], "/routes");
    let h = &p.json("/routes/1/2/3/").await["headers"];
    assert_eq!(h["spin-path-info"], "/3/");

    // Unrouted paths and /ws/ without a handler.
    assert_eq!(p.get("/nowhere").await.0, StatusCode::NOT_FOUND);
    assert_eq!(p.get("/hello/more").await.0, StatusCode::NOT_FOUND);
    assert_eq!(p.get("/ws/streams/1/chat").await.0, StatusCode::NOT_FOUND);
    // The same wasm under a second component id.
    assert_eq!(p.get("/restricted/hello").await.1, "hello");
    p.stop().await;
}

/// What `/probe/kv` answers on any back end.
fn kv_suite_answer() -> Value {
    json!({
            "set": "ok",
            "get": "alpha",
            "get_binary": [0, 1, 2, 255],
            "get_missing": null,
            "overwrite": "ok",
            "after_overwrite": "beta",
            "exists": true,
            "exists_missing": false,
            "keys": ["probe-a", "probe-b"],
            "delete": "ok",
            "exists_after_delete": false,
            "delete_missing": "ok",
            "undeclared": "access-denied",
            "declared_unknown": "no-such-store",
            // 256 stores per instance, like Spin; the probe already holds one.
            "table_full": { "after": 256, "error": "store-table-full" },
            "reopen_after_drop": "ok",
    })
}

#[tokio::test]
async fn key_value() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    assert_eq!(p.json("/probe/kv").await, kv_suite_answer());
    // A component without `key_value_stores` may open nothing.
    assert_eq!(
        p.json("/restricted/probe/kv").await,
        json!({ "open_default": "access-denied" })
    );
    p.stop().await;
}

#[tokio::test]
async fn sqlite() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    let s = p.json("/probe/sqlite").await;
    let empty = json!({ "columns": [], "rows": [] });
    assert_eq!(s["create"], empty);
    assert_eq!(s["insert"], empty);
    assert_eq!(
        s["select"],
        json!({
            "columns": ["i", "r", "t", "b", "n"],
            "rows": [[
                { "integer": -9_007_199_254_740_993_i64 },
                { "real": 2.5 },
                { "text": "héllo ✓" },
                { "blob": [0, 1, 254, 255] },
                "null"
            ]]
        })
    );
    assert_eq!(
        s["params_echo"]["rows"],
        json!([[{ "integer": 42 }, { "real": -0.125 }, { "text": "x" }, { "blob": [] }, "null"]])
    );
    assert_eq!(
        s["typed"]["rows"],
        json!([[{ "text": "integer" }, { "text": "real" }, { "text": "text" }, { "text": "blob" }, { "text": "null" }]])
    );
    let err = s["sql_error"]["error"].as_str().expect("sql error");
    assert!(
        err.starts_with("io: ") && err.contains("syntax error"),
        "{err}"
    );
    let err = s["missing_table"]["error"].as_str().expect("sql error");
    assert!(err.contains("no such table"), "{err}");
    assert_eq!(s["inside_tx"]["rows"], json!([[{ "integer": 3 }]]));
    assert_eq!(s["after_rollback"]["rows"], json!([[{ "integer": 1 }]]));
    assert_eq!(s["after_commit"]["rows"], json!([[{ "integer": 2 }]]));
    assert_eq!(s["undeclared"], "access-denied");
    assert_eq!(s["declared_unknown"], "no-such-database");

    let v3 = p.json("/probe/sqlite3").await;
    assert_eq!(
        v3,
        json!({ "insert": "ok", "changes": 2, "rowid_is_max": true, "undeclared": "Error::AccessDenied" })
    );
    assert_eq!(
        p.json("/restricted/probe/sqlite").await,
        json!({ "open_default": "access-denied" })
    );
    p.stop().await;
}

#[tokio::test]
async fn variables() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[("who", "tests")]).await;
    let v = p.json("/probe/vars").await;
    assert_eq!(v["greeting"], json!({ "value": "hello from the manifest" }));
    // Options.variables override the manifest default.
    assert_eq!(
        v["mixed"],
        json!({ "value": "hello from the manifest, tests!" })
    );
    assert_eq!(v["from_env"], json!({ "value": ENV_VAR.1 }));
    let secret = v["secret"]["value"].as_str().expect("generated secret");
    assert_eq!(secret.len(), 64);
    assert!(secret.chars().all(|c| c.is_ascii_hexdigit()), "{secret}");
    let undeclared = v["undeclared"]["error"].as_str().expect("error");
    assert!(undeclared.starts_with("undefined: "), "{undeclared}");
    let invalid = v["invalid"]["error"].as_str().expect("error");
    assert!(invalid.starts_with("invalid-name: "), "{invalid}");

    // A component reads only the variables it declares.
    let r = p.json("/restricted/probe/vars").await;
    for name in ["greeting", "mixed", "secret", "from_env"] {
        let e = r[name]["error"].as_str().unwrap_or_default();
        assert!(e.starts_with("undefined: "), "{name}: {r}");
    }
    p.stop().await;
}

#[tokio::test]
async fn trap_answers_500_and_serving_continues() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    for _ in 0..3 {
        assert_eq!(
            p.get("/probe/trap").await.0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(p.get("/hello").await.1, "hello");
    }
    // Requests run concurrently, each in a fresh instance.
    let paths: Vec<&str> = (0..32)
        .map(|i| if i % 8 == 0 { "/probe/trap" } else { "/hello" })
        .collect();
    for (path, status, _) in p.get_concurrently(&paths).await {
        let want = if path == "/hello" {
            StatusCode::OK
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        assert_eq!(status, want, "{path}");
    }
    p.stop().await;
}

#[tokio::test]
async fn no_request_sees_the_memory_of_an_earlier_one() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    let fresh = json!({ "earlier_requests": 0, "static_marks": 0 });
    // Sequential requests reuse the same pooled slot; concurrent ones spread over several.
    for _ in 0..20 {
        assert_eq!(p.json("/probe/isolation").await, fresh);
    }
    for (_, status, body) in p.get_concurrently(&["/probe/isolation"; 32]).await {
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(serde_json::from_str::<Value>(&body).expect("json"), fresh);
    }
    assert_eq!(p.json("/probe/isolation").await, fresh);
    p.stop().await;
}

/// A minimal HTTP/1.1 server on loopback answering every request with `body`.
async fn upstream(body: &'static str) -> std::net::SocketAddr {
    upstream_raw(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ))
    .await
}

/// A loopback server answering every request with the raw HTTP response `response`.
async fn upstream_raw(response: String) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let response = response.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn outbound_http_is_limited_to_allowed_hosts() {
    setup().await;
    let allowed = upstream("from upstream").await;
    let other = upstream("must not be reached").await;
    let state = tempfile::tempdir().expect("tempdir");
    let upstream_url = format!("http://127.0.0.1:{}", allowed.port());
    let p = Probe::start(state.path(), &[("upstream", &upstream_url)]).await;

    let ok = p.json(&format!("/probe/outbound?{upstream_url}/x")).await;
    assert_eq!(ok, json!({ "status": 200, "body": "from upstream" }));

    for denied in [
        format!("http://127.0.0.1:{}/x", other.port()),
        format!("http://localhost:{}/x", allowed.port()),
        format!("https://127.0.0.1:{}/x", allowed.port()),
    ] {
        let r = p.json(&format!("/probe/outbound?{denied}")).await;
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.contains("HttpRequestDenied"), "{denied}: {r}");
    }
    // "http://self" lets a component call its own application.
    let own = p.json("/probe/outbound?http://self.alt/hello").await;
    assert_eq!(own, json!({ "status": 200, "body": "hello" }));
    let own = p.json("/probe/outbound?/hello").await;
    assert_eq!(own, json!({ "status": 200, "body": "hello" }));

    let r = p
        .json(&format!("/restricted/probe/outbound?{upstream_url}/x"))
        .await;
    assert!(
        r["error"]
            .as_str()
            .unwrap_or_default()
            .contains("HttpRequestDenied"),
        "{r}"
    );
    p.stop().await;
}

/// A loopback HTTP/1.1 server that answers every request on a connection with `body`,
/// keeping the connection open unless `close_after_each`; answers the number of
/// connections it accepted so far.
async fn counting_upstream(
    body: &'static str,
    close_after_each: bool,
) -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.clear();
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() || close_after_each {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn outbound_connections_are_reused_and_a_closed_one_is_replaced() {
    use std::sync::atomic::Ordering;
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let (keeps, kept_connections) = counting_upstream("kept", false).await;
    let (closes, closed_connections) = counting_upstream("closed", true).await;
    // The probe may call both upstreams: `*` for the port.
    let p = Probe::start(state.path(), &[("upstream", "http://127.0.0.1:*")]).await;
    for _ in 0..5 {
        let r = p.json(&format!("/probe/outbound?http://{keeps}/x")).await;
        assert_eq!(r, json!({ "status": 200, "body": "kept" }));
    }
    // A server that keeps its connections open: one connection for the five requests.
    assert_eq!(kept_connections.load(Ordering::SeqCst), 1);
    // A server that closes each connection after its answer, without saying so in a
    // `Connection: close` header: every request still gets its answer, on a new one.
    for _ in 0..3 {
        let r = p.json(&format!("/probe/outbound?http://{closes}/x")).await;
        assert_eq!(r, json!({ "status": 200, "body": "closed" }));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(closed_connections.load(Ordering::SeqCst), 3);
    p.stop().await;
}

#[tokio::test]
async fn state_migrations_and_secrets_survive_restarts() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let rows = |names: &[&str]| {
        json!({
            "columns": ["name"],
            "rows": names.iter().map(|n| json!([{ "text": n }])).collect::<Vec<_>>(),
        })
    };
    let expected = json!({
        "seeded": rows(&["seed-1", "seed-2"]),
        "applied": rows(&["001_seed.sql", "002_more.sql"]),
    });

    let p = Probe::start(state.path(), &[]).await;
    assert_eq!(p.json("/probe/migrations").await, expected);
    assert_eq!(
        p.json("/probe/kv-set?persisted=yes").await,
        json!({ "set": "persisted" })
    );
    let secret = p.json("/probe/vars").await["secret"]["value"].clone();
    p.stop().await;

    let generated = std::fs::read_to_string(state.path().join("generated-variables.toml"))
        .expect("generated secrets are saved");
    assert!(generated.contains("probe_secret"), "{generated}");
    assert!(
        generated.contains(secret.as_str().expect("secret")),
        "{generated}"
    );

    // Same state dir: the (non-idempotent) migrations are not re-applied, the store kept
    // its data and the secret is the same.
    let p = Probe::start(state.path(), &[]).await;
    assert_eq!(p.json("/probe/migrations").await, expected);
    assert_eq!(
        p.json("/probe/kv-get?persisted").await,
        json!({ "value": "yes" })
    );
    assert_eq!(p.json("/probe/vars").await["secret"]["value"], secret);
    p.stop().await;

    // A fresh state dir gets a fresh secret.
    let other = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(other.path(), &[]).await;
    assert_ne!(p.json("/probe/vars").await["secret"]["value"], secret);
    p.stop().await;
}

#[tokio::test]
async fn large_bodies_stream_through() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    let body: Vec<u8> = (0..8 * 1024 * 1024u32)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &body {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let resp = p
        .http
        .post(format!("{}/probe/body", p.base))
        .body(body.clone())
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::OK);
    let v: Value = resp.json().await.expect("json");
    assert_eq!(
        v,
        json!({ "len": body.len(), "fnv1a": format!("{h:016x}") })
    );
    p.stop().await;
}

#[tokio::test]
async fn websocket_paths_go_to_the_handler() {
    use edgehost::http_body_util::{BodyExt, Empty, Full};
    use edgehost::hyper;
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    // Plain requests get "relay"; upgrade requests are taken over and answered "pong"
    // on the raw connection, as a WebSocket relay would.
    let handler: edgehost::WebSocketHandler = Arc::new(move |req| {
        seen2
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req.uri().path().to_string());
        Box::pin(async move {
            if !req.headers().contains_key(hyper::header::UPGRADE) {
                let body = Full::new(edgehost::bytes::Bytes::from_static(b"relay"))
                    .map_err(|never| match never {})
                    .boxed();
                return hyper::Response::new(body);
            }
            tokio::spawn(async move {
                let Ok(mut io) = hyper::upgrade::on(req).await else {
                    return;
                };
                let mut pong: &[u8] = b"pong";
                while !pong.is_empty() {
                    let written = std::future::poll_fn(|cx| {
                        hyper::rt::Write::poll_write(std::pin::Pin::new(&mut io), cx, pong)
                    })
                    .await;
                    match written {
                        Ok(n) if n > 0 => pong = &pong[n..],
                        _ => return,
                    }
                }
            });
            let mut resp =
                hyper::Response::new(Empty::new().map_err(|never| match never {}).boxed());
            *resp.status_mut() = hyper::StatusCode::SWITCHING_PROTOCOLS;
            let h = resp.headers_mut();
            h.insert(
                hyper::header::UPGRADE,
                hyper::header::HeaderValue::from_static("probe"),
            );
            h.insert(
                hyper::header::CONNECTION,
                hyper::header::HeaderValue::from_static("upgrade"),
            );
            resp
        })
    });
    let mut options = opts(&fixture(), state.path(), &[]);
    options.websocket = Some(handler);
    let p = Probe::try_start(options).await.expect("starts");
    assert_eq!(
        p.get("/ws/streams/9/chat").await,
        (StatusCode::OK, "relay".to_string())
    );
    assert_eq!(p.get("/hello").await.1, "hello");

    // A real upgrade: the handler owns the connection afterwards.
    let addr = p.server.as_ref().expect("server").local_addr();
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(
            b"GET /ws/up HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: probe\r\n\r\n",
        )
        .await
        .expect("write");
    let mut received = Vec::new();
    let mut chunk = [0u8; 256];
    while !received.ends_with(b"pong") {
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("upgrade answer in time")
            .expect("read");
        assert!(
            n > 0,
            "connection closed: {}",
            String::from_utf8_lossy(&received)
        );
        received.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 101"), "{text}");

    assert_eq!(
        *seen.lock().unwrap_or_else(|e| e.into_inner()),
        vec!["/ws/streams/9/chat", "/ws/up"]
    );
    p.stop().await;
}

/// Writes a one-component manifest (using the built probe) into a temporary directory.
fn temp_app(extra_variables: &str, route_component: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = format!(
        r#"spin_manifest_version = 2
[application]
name = "temp"
[variables]
{extra_variables}
[[trigger.http]]
route = "/..."
component = "{route_component}"
[component.probe]
source = "{}"
"#,
        probe_wasm().display()
    );
    std::fs::write(dir.path().join("spin.toml"), manifest).expect("write manifest");
    dir
}

#[tokio::test]
async fn a_taken_relay_address_is_named_or_replaced_by_a_free_one() {
    setup().await;
    // Another edgehost's relay endpoint, as it were.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = taken.local_addr().unwrap();
    let relay = |any_port_if_taken| edgehost::ChatRelay {
        internal_listen: addr,
        any_port_if_taken,
        ..Default::default()
    };
    let state = tempfile::tempdir().expect("tempdir");
    // Chosen with --relay-internal-listen: start-up fails, naming the address and the flag.
    let mut options = opts(&fixture(), state.path(), &[]);
    options.chat_relay = Some(relay(false));
    let err = Probe::try_start(options)
        .await
        .err()
        .expect("start-up fails");
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&addr.to_string()) && msg.contains("--relay-internal-listen"),
        "{msg}"
    );
    // Left to the default: the second instance listens on a free port beside the first.
    let mut options = opts(&fixture(), state.path(), &[]);
    options.chat_relay = Some(relay(true));
    let p = Probe::try_start(options)
        .await
        .expect("starts beside the other");
    let bound = p.server.as_ref().unwrap().relay_internal_addr().unwrap();
    assert_ne!(bound, addr);
    let health = reqwest::get(format!("http://{bound}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    p.stop().await;
}

#[tokio::test]
async fn start_up_errors_are_clear() {
    setup().await;
    // A required, non-secret variable without a value.
    let app = temp_app("needed_value = { required = true }", "probe");
    let manifest = app.path().join("spin.toml");
    let err = Probe::try_start(opts(&manifest, &app.path().join(".spin"), &[]))
        .await
        .err()
        .expect("start-up fails");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("needed_value") && msg.contains("SPIN_VARIABLE_NEEDED_VALUE"),
        "{msg}"
    );
    // ... and the same manifest starts once the variable is given.
    let p = Probe::try_start(opts(
        &manifest,
        &app.path().join(".spin"),
        &[("needed_value", "x")],
    ))
    .await
    .expect("starts with the variable set");
    assert_eq!(p.get("/hello").await.1, "hello");
    p.stop().await;

    // A trigger naming an undefined component.
    let app = temp_app("", "missing-one");
    let err = Probe::try_start(opts(
        &app.path().join("spin.toml"),
        &app.path().join(".spin"),
        &[],
    ))
    .await
    .err()
    .expect("start-up fails");
    let msg = format!("{err:#}");
    assert!(msg.contains("missing-one"), "{msg}");

    // A migration that fails names its file.
    let app = temp_app("", "probe");
    std::fs::create_dir(app.path().join("sql")).expect("sql dir");
    std::fs::write(app.path().join("sql/001_ok.sql"), "CREATE TABLE t (x);").expect("write");
    std::fs::write(app.path().join("sql/002_broken.sql"), "CREATE TABLE (;").expect("write");
    let err = Probe::try_start(opts(
        &app.path().join("spin.toml"),
        &app.path().join(".spin"),
        &[],
    ))
    .await
    .err()
    .expect("start-up fails");
    let msg = format!("{err:#}");
    assert!(msg.contains("002_broken.sql"), "{msg}");
}

/// The probe with PostgreSQL allowed, and the address of a fresh database for it.
async fn probe_on_postgres(state: &Path) -> (Probe, String) {
    let cluster = PostgresCluster::shared().await;
    let database = cluster.create_database().await;
    let p = Probe::start(state, &[("postgres_host", &cluster.host())]).await;
    (p, cluster.url(APP_ROLE, &database))
}

#[tokio::test]
async fn postgres_values_errors_and_transactions() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let (p, address) = probe_on_postgres(state.path()).await;
    let s = p.json(&format!("/probe/pg?{address}")).await;
    assert_eq!(s["create"], 0);
    assert_eq!(s["insert"], 1);
    assert_eq!(
        s["select"],
        json!({
            "columns": [
                ["id", "Int64"], ["b", "Boolean"], ["i2", "Int16"], ["i4", "Int32"],
                ["i8", "Int64"], ["f4", "Floating32"], ["f8", "Floating64"], ["t", "Str"],
                ["v", "Str"], ["c", "Str"], ["by", "Binary"], ["j", "Jsonb"],
                ["ts", "Datetime"], ["d", "Date"], ["tm", "Time"], ["u", "Uuid"],
                ["n", "Decimal"], ["ai", "ArrayInt32"], ["al", "ArrayInt64"],
                ["at", "ArrayStr"], ["iv", "Interval"], ["nul", "Str"]
            ],
            "rows": [[
                { "int64": 1 },
                { "boolean": true },
                { "int16": -2 },
                { "int32": -3 },
                { "int64": -9_007_199_254_740_993_i64 },
                { "floating32": 1.5 },
                { "floating64": -0.125 },
                { "str": "héllo ✓" },
                { "str": "vc" },
                // char(3) is blank-padded by PostgreSQL.
                { "str": "ab " },
                { "binary": [0, 1, 254, 255] },
                // jsonb comes back re-serialised, compact, as on Spin.
                { "jsonb": r#"{"a":"x","b":[1,2]}"# },
                { "datetime": [2024, 2, 29, 23, 59, 58, 123_456_000] },
                { "date": [1999, 12, 31] },
                { "time": [12, 34, 56, 789_000_000] },
                { "uuid": "0195c8a4-7b1e-7cc3-9f3c-1f2e3d4c5b6a" },
                { "decimal": "-12345.678" },
                { "array-int32": [1, null, -3] },
                { "array-int64": [i64::MAX] },
                { "array-str": ["a", null] },
                { "interval": [3_600_000_001_i64, 2, 14] },
                "null"
            ]]
        })
    );
    assert_eq!(
        s["params_echo"],
        json!({
            "columns": [["t", "Str"], ["n", "Int64"], ["d", "Decimal"]],
            "rows": [[{ "str": "x" }, { "int64": 42 }, { "decimal": "0.50" }]]
        })
    );
    // A query without rows never answers on Spin 4.0.0 to 4.0.2 (spinframework/spin#3671;
    // Spin 3.x answers it empty): edgehost refuses it, so that a guest relying on either
    // fails here rather than hanging in production.
    let empty = s["empty"]["error"]["other"].as_str().unwrap_or_default();
    assert!(empty.contains("spinframework/spin#3671"), "{s}");
    assert_eq!(s["updated"], 1);

    let syntax = &s["syntax_error"]["error"]["query-failed"];
    assert_eq!(syntax["code"], "42601", "{s}");
    assert_eq!(syntax["severity"], "ERROR");
    let as_text = syntax["as_text"].as_str().unwrap_or_default();
    assert!(as_text.contains("syntax error"), "{s}");
    let duplicate = &s["duplicate"]["error"]["query-failed"];
    assert_eq!(duplicate["code"], "23505", "{s}");
    assert_eq!(duplicate["extras"]["constraint"], "probe_values_pkey");
    assert_eq!(duplicate["extras"]["table"], "probe_values");
    // A parameter must have the column's type (text is not int8), as on Spin.
    let wrong_type = s["wrong_type"]["error"]["query-failed"]
        .as_str()
        .unwrap_or_default();
    assert!(
        wrong_type.contains("WrongType") && wrong_type.contains("Int8"),
        "{s}"
    );
    let bad_uuid = s["bad_uuid"]["error"]["bad-parameter"]
        .as_str()
        .unwrap_or_default();
    assert!(bad_uuid.contains("not-a-uuid"), "{s}");
    // timestamptz cannot be read through the interface (Spin reads it as timestamp too).
    assert!(s["timestamptz"]["error"]["query-failed"].is_string(), "{s}");

    assert_eq!(s["inside_tx"], 2);
    assert_eq!(
        s["outside_tx"], 0,
        "uncommitted rows are not visible elsewhere"
    );
    assert_eq!(s["after_rollback"], 0);
    assert_eq!(s["after_commit"], 1);

    let v3 = p.json(&format!("/probe/pg3?{address}")).await;
    assert_eq!(v3["create"], 0);
    assert_eq!(v3["insert"], 1);
    assert_eq!(
        v3["select"],
        json!({
            "columns": [["i", "Int32"], ["t", "Str"], ["ts", "Datetime"], ["j", "Other"]],
            "rows": [[
                { "int32": 7 }, { "str": "seven" },
                { "datetime": [2001, 2, 3, 4, 5, 6, 0] }, "unsupported"
            ]]
        })
    );
    let empty = v3["empty"]["other"].as_str().unwrap_or_default();
    assert!(empty.contains("spinframework/spin#3671"), "{v3}");
    let syntax = v3["syntax_error"]["query-failed"]
        .as_str()
        .unwrap_or_default();
    assert!(
        syntax.contains("42601") || syntax.contains("syntax"),
        "{v3}"
    );
    p.stop().await;
}

#[tokio::test]
async fn postgres_trap_mid_transaction_leaves_it_open_and_the_platform_rolls_it_back() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let (p, address) = probe_on_postgres(state.path()).await;
    assert_eq!(
        p.json(&format!("/probe/pg-lock-setup?{address}")).await,
        json!({ "insert": 1 })
    );
    for round in 1..=3 {
        let (status, _) = p.get(&format!("/probe/pg-lock-trap?{address}")).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        // As on Spin, the pooled connection comes back with the trapped transaction still
        // open: a guest that opens it raw works inside it (its increment on top of the
        // trapped one, never committed); only the session settings were reset.
        let raw = p.json(&format!("/probe/pg-lock-bump?{address}")).await;
        assert_eq!(raw["bump"], 1, "round {round}: {raw}");
        assert_eq!(
            raw["counter"]["rows"],
            json!([[{ "int64": round + 1 }]]),
            "round {round}: {raw}"
        );
        assert_ne!(
            raw["application_name"]["rows"],
            json!([[{ "str": "left-behind" }]]),
            "{raw}"
        );
        // The platform's components open it out of that transaction: a read sees neither
        // uncommitted increment; both are gone, the row lock is free, and the setting
        // stays reset.
        let read = p.json(&format!("/probe/pg-app-read?{address}")).await;
        assert_eq!(
            read,
            json!({ "counter": (round - 1).to_string() }),
            "round {round}"
        );
        let app = p.json(&format!("/probe/pg-app-bump?{address}")).await;
        assert_eq!(
            app,
            json!({
                "bump": "ok",
                "counter": round.to_string(),
                "application_name": "",
            }),
            "round {round}"
        );
    }
    p.stop().await;
}

/// Transactions left open that hold nothing (they only read) or that failed: the
/// platform's first statement reads through them, and its writes are committed, not left
/// in them.
#[tokio::test]
async fn postgres_traps_in_a_reading_or_failed_transaction_leave_the_platform_writes_committed() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let (p, address) = probe_on_postgres(state.path()).await;
    let database = address
        .rsplit_once('/')
        .and_then(|(_, rest)| rest.split('?').next())
        .expect("the database's name");
    let outside = PostgresCluster::shared().await.admin_of(database).await;
    assert_eq!(
        p.json(&format!("/probe/pg-lock-setup?{address}")).await,
        json!({ "insert": 1 })
    );
    let mut expected = 0;
    for round in 1..=2 {
        for trap in ["pg-read-trap", "pg-failed-trap"] {
            let (status, _) = p.get(&format!("/probe/{trap}?{address}")).await;
            assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{trap}");
            expected += 1;
            let app = p.json(&format!("/probe/pg-app-bump?{address}")).await;
            assert_eq!(
                app,
                json!({
                    "bump": "ok",
                    "counter": expected.to_string(),
                    "application_name": "",
                }),
                "round {round}, after {trap}"
            );
            // Committed: a connection of its own sees the increment.
            let row = outside
                .query_one("SELECT n FROM probe_lock WHERE id = 1", &[])
                .await
                .expect("the counter");
            assert_eq!(
                row.get::<_, i64>(0),
                expected,
                "round {round}, after {trap}"
            );
        }
    }
    p.stop().await;
}

#[tokio::test]
async fn postgres_connections_are_limited_to_allowed_hosts() {
    setup().await;
    let cluster = PostgresCluster::shared().await;
    let database = cluster.create_database().await;
    let address = cluster.url(APP_ROLE, &database);
    let state = tempfile::tempdir().expect("tempdir");
    // postgres_host keeps its default (localhost:5432): this server is not allowed.
    let p = Probe::start(state.path(), &[]).await;
    let refused = format!("address postgres://{} is not permitted", cluster.host());
    for path in [
        format!("/probe/pg?{address}"),
        format!("/restricted/probe/pg?{address}"),
    ] {
        let r = p.json(&path).await;
        assert_eq!(
            r,
            json!({ "open": { "connection-failed": refused } }),
            "{path}"
        );
    }
    p.stop().await;

    let p = Probe::start(state.path(), &[("postgres_host", &cluster.host())]).await;
    let r = p.json(&format!("/restricted/probe/pg?{address}")).await;
    assert_eq!(r, json!({ "open": { "connection-failed": refused } }));
    // Another port of the same host is another host.
    let other_port = address.replace(&cluster.host(), "127.0.0.1:1");
    let r = p.json(&format!("/probe/pg?{other_port}")).await;
    assert_eq!(
        r,
        json!({ "open": { "connection-failed": "address postgres://127.0.0.1:1 is not permitted" } })
    );
    // TLS that requires a server this host cannot verify (its CA is the cluster's own) is
    // refused, not downgraded.
    let tls = address.replace("sslmode=disable", "sslmode=require");
    let r = p.json(&format!("/probe/pg?{tls}")).await;
    let e = r["open"]["connection-failed"].as_str().unwrap_or_default();
    assert!(e.to_lowercase().contains("certificate"), "{r}");
    // A wrong password fails at open.
    let wrong = format!(
        "postgres://{APP_ROLE}:wrong-password@{}/{database}?sslmode=disable",
        cluster.host()
    );
    let r = p.json(&format!("/probe/pg?{wrong}")).await;
    assert!(r["open"]["connection-failed"].is_string(), "{r}");
    p.stop().await;
}

/// `sslmode=require` connects over TLS and verifies the server, as Spin's native-tls does:
/// with the server's CA trusted (`Options::postgres_ca_file`; on the command line
/// `SSL_CERT_FILE`), the guest's session is encrypted, as PostgreSQL itself reports.
#[tokio::test]
async fn postgres_over_tls_verifies_the_server() {
    setup().await;
    let cluster = PostgresCluster::shared().await;
    let database = cluster.create_database().await;
    let address = cluster
        .url(APP_ROLE, &database)
        .replace("sslmode=disable", "sslmode=require");
    let (_state, p) = Probe::configured(&[("postgres_host", &cluster.host())], |o, _| {
        o.postgres_ca_file = Some(cluster.ca_file());
    })
    .await;
    let s = p.json(&format!("/probe/pg?{address}")).await;
    assert_eq!(s["insert"], 1, "{s}");
    let encrypted: i64 = cluster
        .admin()
        .await
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
             WHERE ssl AND datname = $1",
            &[&database],
        )
        .await
        .expect("read pg_stat_ssl")
        .get(0);
    assert!(encrypted >= 1, "the guest's connection is not encrypted");
    // The same address with plain text allowed (prefer) uses TLS too.
    let prefer = address.replace("sslmode=require", "sslmode=prefer");
    let s = p.json(&format!("/probe/pg?{prefer}")).await;
    assert!(s["open"].get("connection-failed").is_none(), "{s}");
    p.stop().await;
}

// --- Bounded instances -------------------------------------------------------------

#[tokio::test]
async fn a_guest_past_its_memory_limit_fails_alone() {
    setup().await;
    let (_state, p) = Probe::configured(&[], |o, _| {
        o.max_instance_memory = Some(32 << 20);
    })
    .await;
    assert_eq!(
        p.json("/probe/grow?mib=8").await,
        json!({ "grown_mib": 8, "touched": 2048 })
    );
    assert_eq!(
        p.get("/probe/grow?mib=64").await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    // Concurrent requests: only the greedy ones fail.
    let paths: Vec<&str> = (0..12)
        .map(|i| {
            if i % 3 == 0 {
                "/probe/grow?mib=64"
            } else {
                "/hello"
            }
        })
        .collect();
    for (path, status, _) in p.get_concurrently(&paths).await {
        let want = if path == "/hello" {
            StatusCode::OK
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        assert_eq!(status, want, "{path}");
    }
    p.stop().await;

    // The default limit is 128 MiB.
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    assert_eq!(p.json("/probe/grow?mib=96").await["grown_mib"], 96);
    assert_eq!(
        p.get("/probe/grow?mib=160").await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(p.get("/hello").await.1, "hello");
    p.stop().await;
}

#[tokio::test]
async fn key_value_on_redis() {
    setup().await;
    let redis = RedisServer::shared().await;
    let (default_url, second_url) = (redis.fresh_database(), redis.fresh_database());
    let state = tempfile::tempdir().expect("tempdir");
    let config = state.path().join("runtime-config.toml");
    std::fs::write(
        &config,
        format!(
            "[key_value_store.default]\ntype = \"redis\"\nurl = \"{default_url}\"\n\
             [key_value_store.second]\ntype = \"redis\"\nurl = \"{second_url}\"\n"
        ),
    )
    .expect("write runtime config");
    let mut options = opts(&fixture(), state.path(), &[]);
    options.runtime_config_file = Some(config);
    let p = Probe::try_start(options).await.expect("edgehost starts");

    assert_eq!(p.json("/probe/kv").await, kv_suite_answer());

    // Keys and values are binary-safe.
    let every_byte = |i: u8| (0..=255u8).map(|b| b.wrapping_add(i)).collect::<Vec<u8>>();
    let mut keys = vec!["line\nbreak", "nul\0byte", "with space", "ключ 🔑"];
    keys.sort();
    assert_eq!(
        p.json("/probe/kv-binary?default").await,
        json!({
            "keys": keys,
            "values": [every_byte(0), every_byte(1), every_byte(2), every_byte(3)],
            "exists": true,
        })
    );

    // The store is the Redis database its URL names: the key is there, as written, and
    // not in the other store's database.
    p.json("/probe/kv-set?probe-raw=v1").await;
    assert_eq!(
        RedisServer::get(&default_url, b"probe-raw").as_deref(),
        Some(&b"v1"[..])
    );
    assert_eq!(RedisServer::get(&second_url, b"probe-raw"), None);
    assert_eq!(
        p.json("/probe/kv-keys?default").await,
        json!({ "keys": ["probe-raw"] })
    );
    assert_eq!(p.json("/probe/kv-keys?second").await, json!({ "keys": [] }));
    p.stop().await;
}

#[tokio::test]
async fn a_guest_running_past_its_deadline_is_interrupted() {
    setup().await;
    let (_state, p) = Probe::configured(&[], |o, _| {
        o.request_timeout = std::time::Duration::from_secs(1);
    })
    .await;

    // A guest computing forever, and one waiting longer than the deadline, are both cut
    // off with 504; requests served meanwhile are unaffected.
    let looping = {
        let (http, base) = (p.http.clone(), p.base.clone());
        tokio::spawn(async move {
            let r = http
                .get(format!("{base}/probe/loop"))
                .send()
                .await
                .expect("request");
            (r.status(), r.text().await.expect("body"))
        })
    };
    let waiting = {
        let (http, base) = (p.http.clone(), p.base.clone());
        tokio::spawn(async move {
            let r = http
                .get(format!("{base}/probe/sleep?ms=10000"))
                .send()
                .await
                .expect("request");
            r.status()
        })
    };
    for _ in 0..5 {
        assert_eq!(p.get("/hello").await, (StatusCode::OK, "hello".to_string()));
    }
    let (status, body) = looping.await.expect("task");
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert!(body.contains("did not finish within 1s"), "{body}");
    assert_eq!(waiting.await.expect("task"), StatusCode::GATEWAY_TIMEOUT);
    // Work within the deadline still completes.
    assert_eq!(
        p.json("/probe/sleep?ms=100").await,
        json!({ "slept_ms": 100 })
    );
    assert_eq!(p.get("/hello").await.1, "hello");
    p.stop().await;
}

#[tokio::test]
async fn requests_beyond_the_free_instance_slots_get_503_at_once() {
    setup().await;
    let (_state, p) = Probe::configured(&[], |o, _| {
        o.max_concurrent_instances = 2;
    })
    .await;
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let (http, base) = (p.http.clone(), p.base.clone());
            tokio::spawn(async move {
                let r = http
                    .get(format!("{base}/probe/sleep?ms=3000"))
                    .send()
                    .await
                    .expect("request");
                r.status()
            })
        })
        .collect();
    // Wait until both sleepers hold their slots.
    let mut refused = None;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let r = p
            .http
            .get(format!("{}/hello", p.base))
            .send()
            .await
            .expect("request");
        if r.status() == StatusCode::SERVICE_UNAVAILABLE {
            refused = Some(r);
            break;
        }
    }
    let refused = refused.expect("a request finds every slot busy");
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    // Answered while both sleepers still run: refused at once, not queued behind them.
    assert!(sleepers.iter().all(|s| !s.is_finished()));
    for s in sleepers {
        assert_eq!(s.await.expect("task"), StatusCode::OK);
    }
    assert_eq!(p.get("/hello").await.1, "hello");
    p.stop().await;
}

// --- Guest SQL ----------------------------------------------------------------------

#[tokio::test]
async fn guest_sql_cannot_attach_vacuum_load_extensions_or_write_pragmas() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    let dir = state.path().display().to_string();
    let r = p.json(&format!("/probe/sql-guard?{dir}")).await;
    let refused = r["refused"].as_object().expect("refused statements");
    assert_eq!(refused.len(), 7, "{r}");
    for (sql, outcome) in refused {
        let err = outcome["error"].as_str().unwrap_or_default();
        assert!(
            err.starts_with("io: ")
                && (err.contains("not authorized")
                    || err.contains("authorization denied")
                    || err.contains("too many attached")),
            "{sql}: {outcome}"
        );
    }
    // Nothing changed: no file was written, the pragmas kept their values, and
    // harmless pragma reads still work.
    for file in ["attached.db", "copy.db"] {
        assert!(!state.path().join(file).exists(), "{file}");
    }
    assert_eq!(r["user_version"]["ok"]["rows"], json!([[{ "integer": 0 }]]));
    assert_eq!(
        r["journal_mode"]["ok"]["rows"],
        json!([[{ "text": "wal" }]])
    );
    assert_eq!(
        r["table_info"]["ok"]["rows"][0][1],
        json!({ "text": "name" })
    );
    // The host's own SQL (the migrations) is not guest SQL.
    assert_eq!(
        p.json("/probe/migrations").await["seeded"]["rows"],
        json!([[{ "text": "seed-1" }], [{ "text": "seed-2" }]])
    );
    p.stop().await;
}

// --- Outbound network policy ---------------------------------------------------------

fn runtime_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("runtime-config.toml");
    std::fs::write(&path, text).expect("write runtime config");
    path
}

#[tokio::test]
async fn blocked_networks_are_refused_at_connect_time() {
    setup().await;
    let target = upstream("reached").await;
    let target_url = format!("http://127.0.0.1:{}", target.port());
    // Allowed by allowed_outbound_hosts, so only the network policy can refuse it.
    let allow_loopback = [("upstream", "http://*:*")];

    let (_state, p) = Probe::configured(&allow_loopback, |o, dir| {
        o.runtime_config_file = Some(runtime_config(
            dir,
            "[outbound_networking]\nblock_networks = [\"private\"]\n",
        ));
    })
    .await;
    for blocked in [
        format!("{target_url}/x"),
        // Resolved by name: the check runs on the resolved address.
        format!("http://localhost:{}/x", target.port()),
        format!("http://[::ffff:127.0.0.1]:{}/x", target.port()),
        // As in Spin, the app's own loopback listener counts too.
        "http://self.alt/hello".to_string(),
    ] {
        let r = p.json(&format!("/probe/outbound?{blocked}")).await;
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.contains("DestinationIpProhibited"), "{blocked}: {r}");
    }
    p.stop().await;

    // A policy that does not cover loopback lets the same request through.
    let (_state, p) = Probe::configured(&allow_loopback, |o, dir| {
        o.runtime_config_file = Some(runtime_config(
            dir,
            "[outbound_networking]\nblock_networks = [\"10.0.0.0/8\", \"169.254.169.254/32\"]\n",
        ));
    })
    .await;
    assert_eq!(
        p.json(&format!("/probe/outbound?{target_url}/x")).await,
        json!({ "status": 200, "body": "reached" })
    );
    for blocked in [
        "http://10.1.2.3/x",
        "http://169.254.169.254/latest/meta-data/",
    ] {
        let r = p.json(&format!("/probe/outbound?{blocked}")).await;
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.contains("DestinationIpProhibited"), "{blocked}: {r}");
    }
    p.stop().await;
}

#[tokio::test]
async fn redirects_are_not_followed() {
    setup().await;
    let forbidden = upstream("must not be reached").await;
    let redirect = upstream_raw(format!(
        "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{}/secret\r\ncontent-length: 5\r\nconnection: close\r\n\r\nmoved",
        forbidden.port()
    ))
    .await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[("upstream", "http://127.0.0.1:*")]).await;
    let r = p
        .json(&format!(
            "/probe/outbound?http://127.0.0.1:{}/start",
            redirect.port()
        ))
        .await;
    assert_eq!(r, json!({ "status": 302, "body": "moved" }));
    p.stop().await;
}

// --- Scheduled jobs -----------------------------------------------------------------

fn jobs_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("jobs.toml");
    std::fs::write(&path, text).expect("write jobs file");
    path
}

/// Job counters straight from the probe's SQLite file (works with the server stopped).
fn job_calls(state: &Path) -> Value {
    let db = rusqlite::Connection::open(state.join("sqlite_db.db")).expect("open db");
    let mut stmt = db
        .prepare("SELECT name, calls, remaining, max_inflight FROM probe_jobs ORDER BY name")
        .expect("prepare");
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                json!({ "calls": r.get::<_, i64>(1)?, "remaining": r.get::<_, i64>(2)?, "max_inflight": r.get::<_, i64>(3)? }),
            ))
        })
        .expect("query")
        .collect::<Result<serde_json::Map<_, _>, _>>()
        .expect("rows");
    Value::Object(rows)
}

const JOBS: &str = r#"
[[job]]
name = "boot"
at_start = true

[[job]]
name = "drain-some"
at_start = true
max_rounds = 4

[[job]]
name = "drain-all"
at_start = true

[[job]]
name = "tick"
every = "200ms"

[[job]]
name = "slow"
every = "100ms"

[[job]]
name = "missing"
at_start = true
every = "150ms"
"#;

#[tokio::test]
async fn scheduled_jobs_run_on_schedule_never_overlap_and_stop_on_shutdown() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let mut options = opts(
        &fixture(),
        state.path(),
        &[("jobs_token", "test-jobs-token")],
    );
    options.jobs_file = Some(jobs_file(state.path(), JOBS));
    options.scheduler = true;
    let p = Probe::try_start(options).await.expect("starts");

    // Start-up jobs ran before start returned; a job reporting work remaining was called
    // again at once, up to its max_rounds.
    let first = p.json("/probe/jobs").await;
    assert_eq!(
        first["boot"],
        json!({ "calls": 1, "remaining": 0, "max_inflight": 1 })
    );
    assert_eq!(first["drain-some"]["calls"], 4);
    assert_eq!(first["drain-some"]["remaining"], 6);
    assert_eq!(first["drain-all"]["calls"], 10);
    assert_eq!(first["drain-all"]["remaining"], 0);

    // The route needs the token, as the platform's job routes do.
    let denied = p
        .http
        .post(format!("{}/api/jobs/boot", p.base))
        .send()
        .await
        .expect("request");
    assert_eq!(denied.status(), StatusCode::UNAUTHORIZED);
    let by_query = p
        .http
        .post(format!(
            "{}/api/jobs/by-query?token=test-jobs-token",
            p.base
        ))
        .send()
        .await
        .expect("request");
    assert_eq!(by_query.status(), StatusCode::OK);

    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let server = p.server.as_ref().expect("server");
    let stats = server.jobs();
    let missing = stats
        .iter()
        .find(|s| s.name == "missing")
        .expect("the missing job was called");
    // A 404 does not stop the schedule: it is retried.
    assert!(missing.calls >= 3, "{missing:?}");
    assert_eq!(missing.failures, missing.calls);
    assert_eq!(missing.last_status, Some(404));
    let boot = stats.iter().find(|s| s.name == "boot").expect("boot");
    assert_eq!((boot.runs, boot.calls, boot.failures), (1, 1, 0));

    p.stop().await;
    let stopped = job_calls(state.path());
    assert_eq!(stopped["boot"]["calls"], 1, "start-up jobs run once");
    let ticks = stopped["tick"]["calls"].as_i64().expect("tick ran");
    assert!(ticks >= 3, "{stopped}");
    // `slow` takes 300 ms and is due every 100 ms: its runs queue up, never overlap.
    let slow = &stopped["slow"];
    assert!(slow["calls"].as_i64().expect("slow ran") >= 2, "{stopped}");
    assert_eq!(slow["max_inflight"], 1, "{stopped}");
    assert_eq!(stopped["by-query"]["calls"], 1);

    // Nothing runs after shutdown.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(job_calls(state.path()), stopped);
}

#[tokio::test]
async fn without_the_scheduler_only_start_up_jobs_run() {
    setup().await;
    let (_state, p) = Probe::configured(&[], |o, dir| {
        o.jobs_file = Some(jobs_file(dir, JOBS));
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let calls = p.json("/probe/jobs").await;
    let names: Vec<&String> = calls.as_object().expect("object").keys().collect();
    assert_eq!(
        names,
        ["boot", "drain-all", "drain-some", "missing"],
        "{calls}"
    );
    // A start-up job whose route answers 404 is logged, not fatal.
    let stats = p.server.as_ref().expect("server").jobs();
    let missing = stats.iter().find(|s| s.name == "missing").expect("called");
    assert_eq!((missing.calls, missing.last_status), (1, Some(404)));
    p.stop().await;

    // Nor is a start-up job that fails otherwise (here 401: this component cannot read
    // the token); but until it succeeds the application is not ready (its schema is not
    // applied): requests are answered 503 with Retry-After, and the job is called again.
    // A manifest without `jobs_token` runs no jobs at all.
    let app = temp_app("jobs_token = { default = \"t\" }", "probe");
    let mut options = opts(
        &app.path().join("spin.toml"),
        &app.path().join(".spin"),
        &[],
    );
    let start_job = "[[job]]\nname = \"migrate\"\nat_start = true\n";
    options.jobs_file = Some(jobs_file(app.path(), start_job));
    let p = Probe::try_start(options).await.expect("starts");
    let stats = p.server.as_ref().expect("server").jobs();
    assert_eq!(stats.len(), 1);
    assert_eq!((stats[0].failures, stats[0].last_status), (1, Some(401)));
    let held = p
        .http
        .get(format!("{}/hello", p.base))
        .send()
        .await
        .expect("request");
    assert_eq!(held.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(held.headers()["retry-after"], "1");
    let (status, _) = p.get("/.well-known/spin/health").await;
    assert_eq!(status, StatusCode::OK, "the liveness check answers");
    let mut stats = p.server.as_ref().expect("server").jobs();
    for _ in 0..100 {
        if stats[0].runs >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        stats = p.server.as_ref().expect("server").jobs();
    }
    assert!(stats[0].runs >= 2, "retried: {stats:?}");
    assert_eq!(stats[0].failures, stats[0].calls, "{stats:?}");
    assert_eq!(p.get("/hello").await.0, StatusCode::SERVICE_UNAVAILABLE);
    p.stop().await;
    let app = temp_app("", "probe");
    let mut options = opts(
        &app.path().join("spin.toml"),
        &app.path().join(".spin"),
        &[],
    );
    options.jobs_file = Some(jobs_file(app.path(), start_job));
    let p = Probe::try_start(options)
        .await
        .expect("starts without a jobs_token");
    assert!(p.server.as_ref().expect("server").jobs().is_empty());
    p.stop().await;
}

#[tokio::test]
async fn requests_wait_for_the_start_up_jobs() {
    setup().await;
    // A start-up job that fails twice, then succeeds on its retry (2 s later): requests
    // sent from the first moment are answered 503 with Retry-After until then, and by the
    // application after; never by an application whose start-up work is not done.
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port");
    let state = tempfile::tempdir().expect("tempdir");
    let mut options = opts(&fixture(), state.path(), &[("jobs_token", "t")]);
    options.listen = listen;
    options.jobs_file = Some(jobs_file(
        state.path(),
        "[[job]]\nname = \"flaky-migrate\"\nat_start = true\nmax_rounds = 1\n",
    ));
    let http = reqwest::Client::new();
    let hammer = tokio::spawn(async move {
        let url = format!("http://{listen}/hello");
        let mut answers = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            match http.get(&url).send().await {
                Ok(r) => {
                    let retry = r.headers().get("retry-after").cloned();
                    let status = r.status();
                    let body = r.text().await.unwrap_or_default();
                    let served = status == StatusCode::OK;
                    answers.push((status, retry, body));
                    if served && answers.iter().filter(|a| a.0 == StatusCode::OK).count() >= 20 {
                        break;
                    }
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(2)).await,
            }
        }
        answers
    });
    let p = Probe::try_start(options).await.expect("starts");
    let answers = hammer.await.expect("hammer");
    let first_ok = answers
        .iter()
        .position(|a| a.0 == StatusCode::OK)
        .unwrap_or_else(|| panic!("never served: {:?}", answers.last()));
    assert!(
        first_ok > 0,
        "a request was answered before the start-up job ran"
    );
    for (status, retry, body) in &answers[..first_ok] {
        assert_eq!(*status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(retry.as_ref().map(|v| v.to_str().unwrap()), Some("1"));
    }
    for (status, _, body) in &answers[first_ok..] {
        assert_eq!((*status, body.as_str()), (StatusCode::OK, "hello"));
    }
    let calls = job_calls(state.path());
    assert_eq!(calls["flaky-migrate"]["calls"], 3, "{calls}");
    p.stop().await;
}

// --- Local mode, production, runtime config ------------------------------------------

#[tokio::test]
async fn local_mode_opens_registration_and_production_refuses_local_defaults() {
    setup().await;
    let vars = r#"
registration_mode = { default = "admin" }
api_secret = { required = true, secret = true }
base_url = { default = "http://127.0.0.1:3000" }
webhook_allow_http = { default = "false" }
"#;
    let app = temp_app(vars, "probe");
    let manifest = app.path().join("spin.toml");
    let state = app.path().join(".spin");

    let p = Probe::try_start(opts(&manifest, &state, &[]))
        .await
        .expect("local mode starts");
    let server = p.server.as_ref().expect("server");
    assert_eq!(server.variable("registration_mode"), Some("open"));
    p.stop().await;
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(state.join("generated-variables.toml"))
            .expect("generated secrets file")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    // Set explicitly, registration stays as set.
    let p = Probe::try_start(opts(&manifest, &state, &[("registration_mode", "admin")]))
        .await
        .expect("starts");
    assert_eq!(
        p.server
            .as_ref()
            .expect("server")
            .variable("registration_mode"),
        Some("admin")
    );
    p.stop().await;

    let production = |vars: &[(&str, &str)]| {
        let mut o = opts(&manifest, &state, vars);
        o.mode = edgehost::Mode::Production;
        o
    };
    let err = Probe::try_start(production(&[
        ("registration_mode", "open"),
        ("webhook_allow_http", "true"),
    ]))
    .await
    .err()
    .expect("production refuses local defaults");
    let msg = format!("{err:#}");
    for needle in [
        "--production",
        "registration_mode",
        "api_secret",
        "webhook_allow_http",
        "base_url",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    // Without local mode the manifest default (admin) stands; a generated secret left in
    // the state directory and the loopback URL are still listed.
    let msg = format!(
        "{:#}",
        Probe::try_start(production(&[]))
            .await
            .err()
            .expect("refused")
    );
    assert!(
        !msg.contains("registration_mode")
            && msg.contains("api_secret")
            && msg.contains("base_url"),
        "{msg}"
    );

    let p = Probe::try_start(production(&[
        ("api_secret", "a real secret"),
        ("base_url", "https://live.example.com"),
    ]))
    .await
    .expect("a production configuration starts");
    assert_eq!(
        p.server
            .as_ref()
            .expect("server")
            .variable("registration_mode"),
        Some("admin")
    );
    p.stop().await;
}

#[tokio::test]
async fn runtime_config_variable_providers_follow_spin() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let mut options = opts(&fixture(), state.path(), &[]);
    options.runtime_config_file = Some(runtime_config(
        state.path(),
        r#"
# Unknown keys are warned about, not fatal.
[something_new]
x = 1

[[variables_provider]]
type = "static"
values = { greeting = "from a static provider", from_env = "static beats the environment" }
"#,
    ));
    let p = Probe::try_start(options).await.expect("starts");
    let v = p.json("/probe/vars").await;
    assert_eq!(v["greeting"], json!({ "value": "from a static provider" }));
    // As in Spin, configured providers come before the default SPIN_VARIABLE_ environment.
    assert_eq!(
        v["from_env"],
        json!({ "value": "static beats the environment" })
    );
    p.stop().await;
}

#[tokio::test]
async fn production_check_lists_the_platform_local_defaults() {
    setup().await;
    // The check runs right after the variables are resolved, before any component is
    // loaded, so the real manifest needs no build here.
    let manifest = workspace().join("spin.toml");
    let state = tempfile::tempdir().expect("tempdir");
    let mut options = opts(&manifest, state.path(), &[]);
    options.mode = edgehost::Mode::Production;
    options.jobs_file = Some(jobs_file(state.path(), ""));
    let msg = format!(
        "{:#}",
        Probe::try_start(options).await.err().expect("refused")
    );
    for needle in [
        "jwt_secret",
        "admin_token",
        "relay_secret",
        "jobs_token",
        "base_url",
        "api_url",
        "relay_url",
        "sfu_server_url",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    // spin.toml itself defaults to admin registration.
    assert!(!msg.contains("registration_mode"), "{msg}");
    // A refused start keeps no secret it generated (it would never have been shown).
    assert!(!state.path().join("generated-variables.toml").exists());
}

#[tokio::test]
async fn https_requests_open_tls_with_the_host_name_and_check_the_certificate() {
    setup().await;
    // A loopback "server" that records the first bytes a client sends, then hangs up.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (first_bytes, received) = tokio::sync::oneshot::channel::<Vec<u8>>();
    tokio::spawn(async move {
        if let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let n = stream.read(&mut buf).await.unwrap_or(0);
            buf.truncate(n);
            let _ = first_bytes.send(buf);
        }
    });
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[("upstream", "https://localhost:*")]).await;
    let r = p
        .json(&format!("/probe/outbound?https://localhost:{port}/x"))
        .await;
    // No certificate came back, so the request fails; what was sent is a TLS ClientHello
    // (record type 22) naming the host (SNI).
    assert!(r["error"].is_string(), "{r}");
    let hello = received.await.expect("the client connected");
    assert_eq!(hello.first(), Some(&22), "{hello:?}");
    assert!(
        hello.windows(b"localhost".len()).any(|w| w == b"localhost"),
        "SNI names the host"
    );
    p.stop().await;
}
