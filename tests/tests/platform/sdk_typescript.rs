//! The TypeScript SDK (`sdk/typescript`) against a running platform: its Node tests
//! (`node --test`) drive the app and server clients, the chat socket and webhook
//! verification over real HTTP and WebSockets, as an app and a tenant's backend would.
//!
//! This harness starts what they need and tells them where it is (environment):
//! - the platform, with the SFU's keys (publisher tokens) and local webhook receivers
//!   allowed (`PLATFORM_URL`, `JOBS_TOKEN`);
//! - a tenant (`API_KEY`, `SECRET_KEY`);
//! - a second platform without an SFU, as a deployment that takes RTMP alone runs it, and
//!   a tenant of it (`RTMP_ONLY_URL`, `RTMP_ONLY_API_KEY`);
//! - a standalone chat relay that the platform pushes its events to (`RELAY_URL`), which the
//!   tests stop and start again on the same ports through a control endpoint
//!   (`CONTROL_URL`: `POST /relay/stop`, `POST /relay/start`), and which also moves the
//!   platform's clock (`POST /clock/advance?seconds=N`) so that tokens expire.
//!
//! `scripts/test` installs the package's dependencies first (`npm ci`, which builds it
//! through the package's `prepare` script).

use bytes::Bytes;
use chat_relay::{Config, Relay, RelayServer};
use http_body_util::Full;
use hyper::service::service_fn;
use platform_tests::{Platform, workspace_root};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

const JWT: &str = "sdk-tests-jwt-secret-0123456789abcdef";
const RELAY: &str = "sdk-tests-relay-secret-0123456789abcdef";

/// The relay the tests restart: its two listeners' addresses, and the running server.
struct Relays {
    api_url: String,
    public: SocketAddr,
    internal: SocketAddr,
    running: Mutex<Option<RelayServer>>,
}

impl Relays {
    async fn start(&self) -> Result<(), String> {
        let mut running = self.running.lock().await;
        if running.is_some() {
            return Ok(());
        }
        let bind = |addr| async move {
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("bind {addr}: {e}"))
        };
        let (public, internal) = (bind(self.public).await?, bind(self.internal).await?);
        let relay = Relay::new(Config::new(&self.api_url, JWT, RELAY));
        *running = Some(chat_relay::serve(relay, public, internal).map_err(|e| e.to_string())?);
        Ok(())
    }

    async fn stop(&self) {
        if let Some(server) = self.running.lock().await.take() {
            server.shutdown().await;
        }
    }
}

/// Free loopback addresses for the relay's two listeners.
fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

/// The control endpoint the Node tests call.
async fn control(relays: Arc<Relays>, platform: Arc<Platform>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (relays, platform) = (relays.clone(), platform.clone());
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (relays, platform) = (relays.clone(), platform.clone());
                async move {
                    let path = req.uri().path().to_string();
                    let query = req.uri().query().unwrap_or_default().to_string();
                    let (status, body) = match path.as_str() {
                        "/relay/stop" => {
                            relays.stop().await;
                            (200, "stopped".to_string())
                        }
                        "/relay/start" => match relays.start().await {
                            Ok(()) => (200, "started".to_string()),
                            Err(e) => (500, e),
                        },
                        "/clock/advance" => {
                            let seconds = query
                                .strip_prefix("seconds=")
                                .and_then(|s| s.parse().ok())
                                .unwrap_or(0);
                            platform.advance_clock(Duration::from_secs(seconds));
                            (200, platform.now().to_string())
                        }
                        _ => (404, "no such control".to_string()),
                    };
                    Ok::<_, Infallible>(
                        hyper::Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::from(body)))
                            .unwrap(),
                    )
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_sdk_against_a_running_platform() {
    let package = workspace_root().join("sdk/typescript");
    assert!(
        package.join("dist/esm/index.js").is_file() && package.join("node_modules").is_dir(),
        "the SDK is not built: scripts/test runs `npm ci` (which builds it) in sdk/typescript"
    );
    let (public, internal) = (free_addr(), free_addr());
    let relay_url = format!("http://{internal}");
    let platform = Arc::new(
        Platform::start_with(&[
            ("jwt_secret", JWT),
            ("relay_secret", RELAY),
            ("relay_url", &relay_url),
            ("sfu_api_key", "devkey"),
            ("sfu_api_secret", "secret"),
            ("webhook_allow_http", "true"),
        ])
        .await,
    );
    let relays = Arc::new(Relays {
        api_url: platform.base.clone(),
        public,
        internal,
        running: Mutex::new(None),
    });
    relays.start().await.expect("the relay starts");
    let control_url = control(relays.clone(), platform.clone()).await;
    let tenant = platform.register_client("SDK tests").await;
    // No `sfu_api_key`/`sfu_api_secret`: token requests answer 503 `sfu_not_configured`.
    let rtmp_only = Platform::start_with(&[("jwt_secret", JWT)]).await;
    let rtmp_only_tenant = rtmp_only.register_client("SDK tests, RTMP only").await;

    let mut tests: Vec<String> = std::fs::read_dir(package.join("test"))
        .expect("sdk/typescript/test")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".test.mjs"))
        .map(|name| format!("test/{name}"))
        .collect();
    tests.sort();
    assert!(!tests.is_empty(), "no SDK tests found");
    // Node 22 has the WebSocket global; Node 20 has it behind a flag.
    let version = std::process::Command::new("node")
        .arg("--version")
        .output()
        .expect("node runs (scripts/test installs it)");
    let major: u32 = String::from_utf8_lossy(&version.stdout)
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let mut node = tokio::process::Command::new("node");
    if major < 22 {
        node.arg("--experimental-websocket");
    }
    let output = node
        // One file at a time: one of them moves the platform's clock.
        .args(["--test", "--test-concurrency=1"])
        .arg("--test-reporter=spec")
        .args(&tests)
        .current_dir(&package)
        .env("PLATFORM_URL", &platform.base)
        .env("RELAY_URL", format!("http://{public}"))
        .env("CONTROL_URL", &control_url)
        .env("API_KEY", &tenant.api_key)
        .env("SECRET_KEY", &tenant.secret_key)
        .env("JOBS_TOKEN", platform.variable("jobs_token").unwrap())
        .env("RTMP_ONLY_URL", &rtmp_only.base)
        .env("RTMP_ONLY_API_KEY", &rtmp_only_tenant.api_key)
        .output()
        .await
        .expect("node runs (scripts/test installs it)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{report}");
    assert!(output.status.success(), "the SDK's tests failed:\n{report}");
    relays.stop().await;
}
