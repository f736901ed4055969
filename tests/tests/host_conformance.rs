//! Conformance of `edgehost` with Spin's host behaviour, driven over real HTTP against the
//! `host-probe` component (tests/components/host-probe, manifest in
//! tests/fixtures/host-probe/spin.toml).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};

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

#[tokio::test]
async fn key_value() {
    setup().await;
    let state = tempfile::tempdir().expect("tempdir");
    let p = Probe::start(state.path(), &[]).await;
    let kv = p.json("/probe/kv").await;
    assert_eq!(
        kv,
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
    );
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
