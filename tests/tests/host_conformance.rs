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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(resp.as_bytes()).await;
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
    // As on Spin, the columns of a result come from its first row.
    assert_eq!(s["empty"], json!({ "columns": [], "rows": [] }));
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
async fn postgres_trap_mid_transaction_rolls_back_before_reuse() {
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
        // The trapped transaction's row lock is gone and its increment undone; the
        // session setting it made does not reach the next guest.
        let bump = p.json(&format!("/probe/pg-lock-bump?{address}")).await;
        assert_eq!(bump["bump"], 1, "round {round}: {bump}");
        assert_eq!(
            bump["counter"]["rows"],
            json!([[{ "int64": round }]]),
            "round {round}: {bump}"
        );
        assert_ne!(
            bump["application_name"]["rows"],
            json!([[{ "str": "left-behind" }]]),
            "{bump}"
        );
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
    // No TLS in edgehost: a connection that requires it is refused, not downgraded.
    let tls = address.replace("sslmode=disable", "sslmode=require");
    let r = p.json(&format!("/probe/pg?{tls}")).await;
    let e = r["open"]["connection-failed"].as_str().unwrap_or_default();
    assert!(e.contains("TLS"), "{r}");
    // A wrong password fails at open.
    let wrong = format!(
        "postgres://{APP_ROLE}:wrong-password@{}/{database}?sslmode=disable",
        cluster.host()
    );
    let r = p.json(&format!("/probe/pg?{wrong}")).await;
    assert!(r["open"]["connection-failed"].is_string(), "{r}");
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
