//! The test harness: builds the wasm components once per test process, then runs the
//! real application (`spin.toml` at the workspace root) in `edgehost` on an ephemeral
//! loopback port with a fresh state directory, on the data back end `PLATFORM_BACKEND`
//! selects (see [`backends`]), with the chat relay embedded as `edgehost up` embeds it (its
//! internal endpoint on another ephemeral loopback port).

pub mod backends;
pub mod garage;
pub mod guide;
pub mod load;
pub mod media;
pub mod spin_host;
mod storage;
pub mod tls;
pub mod webhook_receiver;
pub mod wire_count;
pub mod ws;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use reqwest::{Client, Method, Response, StatusCode};

/// A setting of a bench or suite from the environment (`POSTS=400`, `CONTRACT_SEED=...`),
/// else `default`. A value that does not parse stops the run rather than being ignored.
/// The address of the content-hashed asset `name` (e.g. `/static/layout.`) that a page's
/// HTML loads with `src="..."`.
pub fn script_url(html: &str, name: &str) -> Option<String> {
    html.split("src=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|u| u.contains(name))
        .map(str::to_string)
}

pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a valid value")),
        Err(_) => default,
    }
}

/// The workspace root (where `spin.toml` lives).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits inside the workspace")
        .to_path_buf()
}

/// Runs the build commands of `manifest` once per process (later calls reuse the result).
pub fn build_once(manifest: &Path) {
    static BUILT: OnceLock<std::sync::Mutex<Vec<PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|m| m == manifest) {
        edgehost::build_components(manifest)
            .unwrap_or_else(|e| panic!("building {} failed: {e:#}", manifest.display()));
        built.push(manifest.to_path_buf());
    }
}

/// A running platform with its own state directory.
pub struct Platform {
    server: Option<edgehost::Server>,
    /// The real Spin running the app instead of edgehost (`PLATFORM_HOST=spin`).
    spin: Option<spin_host::SpinProcess>,
    state: tempfile::TempDir,
    variables: Vec<(String, String)>,
    /// The platform's PostgreSQL and Redis databases (`PLATFORM_BACKEND=postgres`).
    pub backends: Option<backends::ServerBackends>,
    pub base: String,
    pub http: Client,
    /// How far [`Platform::advance_clock`] moved the components' clock (seconds).
    clock_offset: std::sync::atomic::AtomicI64,
    /// What runs beside the app and where its key-value store is.
    setup: Setup,
}

/// What a platform runs beside the app, beyond its back end.
#[derive(Clone, Default)]
struct Setup {
    /// edgehost's scheduler runs the periodic jobs of `jobs.toml`.
    scheduler: bool,
    /// How edgehost runs the media server (nginx-rtmp) beside the app, if it does.
    media: Option<edgehost::MediaServer>,
    /// The key-value store on this Redis (else the back end's: SQLite in the state
    /// directory, or the PostgreSQL back end's Redis).
    kv_redis_url: Option<String>,
    /// Where edgehost listens (else a free loopback port).
    listen: Option<std::net::SocketAddr>,
    /// Run on the real Spin (`Some(true)`) or on edgehost (`Some(false)`) whatever
    /// `PLATFORM_HOST` says; `None` leaves the choice to it.
    on_spin: Option<bool>,
    /// Run no start-up job: the schema is not applied (as on the real Spin before the
    /// deployment calls `migrate`).
    unmigrated: bool,
}

impl Platform {
    /// The application with its default variables.
    pub async fn start() -> Platform {
        Self::start_with(&[]).await
    }

    /// The application with some variables overridden, on the back end `PLATFORM_BACKEND`
    /// selects.
    pub async fn start_with(variables: &[(&str, &str)]) -> Platform {
        Self::start_on(backends::Backend::selected(), variables).await
    }

    /// The application on the given back end (benchmarks compare both in one run).
    pub async fn start_on(backend: backends::Backend, variables: &[(&str, &str)]) -> Platform {
        Self::start_scheduled(backend, variables, false).await
    }

    /// The application on the real Spin (`SPIN_BIN`) when `on_spin`, else on edgehost,
    /// whatever `PLATFORM_HOST` says: a benchmark compares both hosts in one run.
    pub async fn start_on_spin(
        on_spin: bool,
        backend: backends::Backend,
        variables: &[(&str, &str)],
    ) -> Platform {
        let state = tempfile::tempdir().expect("temporary state directory");
        let setup = Setup {
            on_spin: Some(on_spin),
            ..Setup::default()
        };
        Self::start_in(state, backend, variables, setup).await
    }

    /// The application on throwaway PostgreSQL and Redis (its key-value store) reached at
    /// the addresses `route` gives their URLs, on the real Spin when `on_spin`: a
    /// benchmark counts what the host sends them through a proxy.
    pub async fn start_on_postgres_routed(
        on_spin: bool,
        variables: &[(&str, &str)],
        route: impl Fn(&str) -> String,
    ) -> Platform {
        let variables = variables
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let state = tempfile::tempdir().expect("temporary state directory");
        let backends = backends::ServerBackends::fresh().await.routed(route);
        let setup = Setup {
            on_spin: Some(on_spin),
            ..Setup::default()
        };
        Self::launch(state, variables, Some(backends), setup).await
    }

    /// The application with the media server (nginx-rtmp through media-agent) on free
    /// loopback ports, as `edgehost up` runs it: `rtmp_ingest_base` and
    /// `playback_hls_base` point at it.
    pub async fn start_with_media(variables: &[(&str, &str)]) -> Platform {
        Self::start_media_with(media::server_options(), variables).await
    }

    /// The application with the media server run as `options` say (benchmarks run it
    /// with production segment lengths).
    pub async fn start_media_with(
        options: edgehost::MediaServer,
        variables: &[(&str, &str)],
    ) -> Platform {
        Self::start_full(
            backends::Backend::selected(),
            variables,
            false,
            Some(options),
        )
        .await
    }

    /// The application with edgehost's scheduler running the periodic jobs of `jobs.toml`
    /// when `scheduler` is set (as `edgehost up` does; the suites call jobs themselves).
    pub async fn start_scheduled(
        backend: backends::Backend,
        variables: &[(&str, &str)],
        scheduler: bool,
    ) -> Platform {
        Self::start_full(backend, variables, scheduler, None).await
    }

    async fn start_full(
        backend: backends::Backend,
        variables: &[(&str, &str)],
        scheduler: bool,
        media: Option<edgehost::MediaServer>,
    ) -> Platform {
        let state = tempfile::tempdir().expect("temporary state directory");
        let setup = Setup {
            scheduler,
            media,
            ..Setup::default()
        };
        Self::start_in(state, backend, variables, setup).await
    }

    /// The application on the selected back end with its state in `state` (the faults
    /// suite puts it on a small file system it can fill) and, when `kv_redis_url` is given,
    /// its key-value store on that Redis (whatever the back end).
    pub async fn start_for_faults(
        state: tempfile::TempDir,
        kv_redis_url: Option<String>,
        variables: &[(&str, &str)],
    ) -> Platform {
        let setup = Setup {
            kv_redis_url,
            ..Setup::default()
        };
        Self::start_in(state, backends::Backend::selected(), variables, setup).await
    }

    async fn start_in(
        state: tempfile::TempDir,
        backend: backends::Backend,
        variables: &[(&str, &str)],
        setup: Setup,
    ) -> Platform {
        let variables = variables
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let backends = match backend {
            backends::Backend::Sqlite => None,
            backends::Backend::Postgres => Some(backends::ServerBackends::fresh().await),
        };
        Self::launch(state, variables, backends, setup).await
    }

    async fn launch(
        state: tempfile::TempDir,
        variables: Vec<(String, String)>,
        backends: Option<backends::ServerBackends>,
        setup: Setup,
    ) -> Platform {
        let Setup {
            scheduler,
            media,
            kv_redis_url,
            listen,
            on_spin,
            unmigrated,
        } = setup.clone();
        let manifest = workspace_root().join("spin.toml");
        tokio::task::block_in_place(|| build_once(&manifest));
        // The back end's variables first, so that a test's own values win.
        let mut all_variables = Vec::new();
        let mut runtime_config_file = None;
        if let Some(b) = &backends {
            all_variables.extend(b.variables());
        }
        let kv_redis_url = kv_redis_url.or(backends.as_ref().map(|b| b.redis_url.clone()));
        if let Some(url) = kv_redis_url {
            let path = state.path().join("runtime-config.toml");
            std::fs::write(&path, backends::kv_on_redis(&url)).expect("write the runtime config");
            runtime_config_file = Some(path);
        }
        all_variables.extend(variables.iter().cloned());
        if on_spin.unwrap_or_else(spin_host::selected) {
            assert!(
                media.is_none(),
                "the media server is edgehost's (PLATFORM_HOST=spin runs none)"
            );
            let spin = spin_host::SpinProcess::start(
                &manifest,
                state.path(),
                &all_variables,
                runtime_config_file.as_deref(),
            )
            .await;
            let platform = Platform {
                server: None,
                base: format!("http://{}", spin.addr),
                spin: Some(spin),
                state,
                variables,
                backends,
                http: Client::new(),
                clock_offset: Default::default(),
                setup,
            };
            // Spin runs no start-up job: the schema is applied as a deployment does.
            platform.run_job("migrate").await;
            return platform;
        }
        let options = edgehost::Options {
            manifest,
            listen: listen.unwrap_or_else(|| "127.0.0.1:0".parse().expect("loopback address")),
            state_dir: Some(state.path().to_path_buf()),
            runtime_config_file,
            variables: all_variables,
            chat_relay: Some(edgehost::ChatRelay::ephemeral()),
            media: media.clone(),
            log_requests: false,
            scheduler,
            jobs_file: unmigrated.then(|| {
                let path = state.path().join("no-jobs.toml");
                std::fs::write(&path, "").expect("write an empty jobs file");
                path
            }),
            ..Default::default()
        };
        let server = edgehost::Server::start(options)
            .await
            .expect("edgehost starts");
        let base = format!("http://{}", server.local_addr());
        if unmigrated {
            return Platform {
                server: Some(server),
                spin: None,
                state,
                variables,
                backends,
                base,
                http: Client::new(),
                clock_offset: Default::default(),
                setup,
            };
        }
        // The schema is the application's own: edgehost's start-up job `migrate`
        // (jobs.toml) applied it before `start` returned.
        let migrate = server
            .jobs()
            .into_iter()
            .find(|j| j.name == "migrate")
            .expect("jobs.toml has the migrate job");
        assert_eq!(
            (migrate.failures, migrate.last_status),
            (0, Some(200)),
            "the start-up migration failed"
        );
        Platform {
            server: Some(server),
            spin: None,
            state,
            variables,
            backends,
            base,
            http: Client::new(),
            clock_offset: Default::default(),
            setup,
        }
    }

    /// Stops the server and drops its PostgreSQL database, waiting for both.
    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.expect("clean shutdown");
        }
        if let Some(spin) = self.spin.take() {
            spin.stop().await;
        }
        if let Some(backends) = self.backends.take() {
            backends.discard().await;
        }
    }

    /// Stops the server and starts a new one on the same state directory.
    pub async fn restart(mut self) -> Platform {
        if let Some(server) = self.server.take() {
            server.shutdown().await.expect("clean shutdown");
        }
        if let Some(spin) = self.spin.take() {
            spin.stop().await;
        }
        let state = std::mem::replace(&mut self.state, tempfile::tempdir().expect("tempdir"));
        let backends = self.backends.take();
        let variables = std::mem::take(&mut self.variables);
        let setup = Setup {
            scheduler: false,
            ..self.setup.clone()
        };
        Self::launch(state, variables, backends, setup).await
    }

    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    /// The loopback address the platform listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        if let Some(spin) = &self.spin {
            return spin.addr;
        }
        self.server
            .as_ref()
            .expect("the platform is running")
            .local_addr()
    }

    /// The resolved value of application variable `name` (on the real Spin: the values
    /// the harness set; the others keep `spin.toml`'s defaults).
    pub fn variable(&self, name: &str) -> Option<String> {
        if let Some(spin) = &self.spin {
            return spin.variables.get(name).cloned();
        }
        self.server.as_ref()?.variable(name).map(str::to_string)
    }

    /// The edgehost server, for what only edgehost has (the clock, the relay, the media
    /// server, the scheduler): a test asking for it on the real Spin fails saying so.
    fn edgehost(&self, what: &str) -> &edgehost::Server {
        self.server.as_ref().unwrap_or_else(|| {
            panic!("{what} is edgehost's: this test cannot run with PLATFORM_HOST=spin")
        })
    }

    /// The timings of the SQLite writer's leases (edgehost's `Server::sqlite_writer_timings`;
    /// off until started). Benchmarks say with them where a write's time goes.
    pub fn sqlite_writer_timings(&self) -> Option<edgehost::WriterTimings> {
        Some(self.server.as_ref()?.sqlite_writer_timings())
    }

    /// Moves the components' wall clock forward (edgehost's `Server::advance_clock`): what
    /// expires or falls due after `by` does so now.
    pub fn advance_clock(&self, by: std::time::Duration) {
        // The tenant's server signs with the platform's clock (see `as_server`).
        self.edgehost("moving the guests' clock").advance_clock(by);
        self.clock_offset.fetch_add(
            i64::try_from(by.as_secs()).unwrap_or(i64::MAX),
            std::sync::atomic::Ordering::SeqCst,
        );
    }

    /// The components' wall clock (epoch seconds): the system clock plus what
    /// [`Platform::advance_clock`] added. Signed requests are timestamped with it.
    pub fn now(&self) -> i64 {
        unix_now() + self.clock_offset.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Calls the scheduled job `name` once (`POST /api/jobs/{name}` with the jobs token), as
    /// the scheduler would; answers its JSON report.
    pub async fn run_job(&self, name: &str) -> Value {
        let token = self
            .variable("jobs_token")
            .expect("the jobs_token variable");
        let (status, body) = self
            .request(Method::POST, &format!("/api/jobs/{name}"))
            .bearer_auth(token)
            .answer()
            .await;
        assert_eq!(status, 200, "job {name} failed: {body}");
        body
    }

    /// The embedded media server, when the platform runs one.
    pub fn media(&self) -> &media_agent::MediaServer {
        self.edgehost("the media server")
            .media()
            .expect("the platform runs the media server (Platform::start_with_media)")
    }

    /// Why the embedded media server could not start, when it was not required and could
    /// not (edgehost's `Server::media_failure`).
    pub fn media_failure(&self) -> Option<String> {
        self.edgehost("the media server")
            .media_failure()
            .map(str::to_string)
    }

    /// The application as a reader of the guides runs it (`edgehost up`): the media server
    /// beside it, and listening where its `base_url` and `api_url` say, so that the
    /// addresses in its answers are the ones to call.
    pub async fn start_as_documented(variables: &[(&str, &str)]) -> Platform {
        let listen = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port");
        let base = format!("http://{listen}");
        let mut all = vec![("base_url", base.as_str()), ("api_url", base.as_str())];
        all.extend_from_slice(variables);
        let setup = Setup {
            media: Some(media::server_options()),
            listen: Some(listen),
            ..Setup::default()
        };
        let state = tempfile::tempdir().expect("temporary state directory");
        Self::start_in(state, backends::Backend::selected(), &all, setup).await
    }

    /// The application on edgehost listening on `listen` (a free loopback port the caller
    /// chose), so that a test can send requests from before the server accepts them.
    pub async fn start_listening_on(
        listen: std::net::SocketAddr,
        variables: &[(&str, &str)],
    ) -> Platform {
        let setup = Setup {
            listen: Some(listen),
            on_spin: Some(false),
            ..Setup::default()
        };
        let state = tempfile::tempdir().expect("temporary state directory");
        Self::start_in(state, backends::Backend::selected(), variables, setup).await
    }

    /// The application on edgehost without its start-up job: nothing has applied the
    /// schema, as on the real Spin until the deployment calls `POST /api/jobs/migrate`.
    pub async fn start_unmigrated(variables: &[(&str, &str)]) -> Platform {
        let setup = Setup {
            on_spin: Some(false),
            unmigrated: true,
            ..Setup::default()
        };
        let state = tempfile::tempdir().expect("temporary state directory");
        Self::start_in(state, backends::Backend::selected(), variables, setup).await
    }

    /// The embedded chat relay's internal address (`/internal/...`, `/metrics`).
    pub fn relay_internal_addr(&self) -> std::net::SocketAddr {
        self.edgehost("the embedded chat relay")
            .relay_internal_addr()
            .expect("the platform embeds the chat relay")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A request builder for `path`.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path))
    }

    /// Registers an SDK client (tenant) and answers its credentials.
    pub async fn register_client(&self, name: &str) -> Tenant {
        let answer = self
            .request(Method::POST, "/api/admin/sdk-clients")
            .json(&json!({
                "name": name,
                "contactEmail": "dev@example.com",
                "agreeTerms": true,
                "agreeDataProcessing": true,
            }))
            .send()
            .await
            .expect("registration request");
        assert_eq!(answer.status(), 200, "registration failed");
        let body: Value = answer.json().await.expect("registration JSON");
        Tenant {
            api_key: body["apiKey"].as_str().expect("apiKey").to_string(),
            secret_key: body["secretKey"].as_str().expect("secretKey").to_string(),
            client_id: body["clientId"].as_str().expect("clientId").to_string(),
        }
    }
}

impl Drop for Platform {
    fn drop(&mut self) {
        let (server, backends) = (self.server.take(), self.backends.take());
        // `spin up` is killed with its handle (kill_on_drop).
        drop(self.spin.take());
        // Shut down in the background (the test's runtime may already be ending), then
        // drop the platform's database.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Some(server) = server {
                    let _ = server.shutdown().await;
                }
                if let Some(backends) = backends {
                    backends.discard().await;
                }
            });
        }
    }
}

impl Platform {
    /// Signs a user up in `tenant` (password `correct horse battery`) and answers it.
    pub async fn signup(&self, tenant: &Tenant, username: &str) -> User {
        let answer = self
            .request(Method::POST, "/api/users/signup")
            .header("x-api-key", &tenant.api_key)
            .json(&json!({
                "username": username,
                "email": format!("{username}@example.com"),
                "password": "correct horse battery",
            }))
            .send()
            .await
            .expect("signup request");
        let (status, body) = json_of(answer).await;
        assert_eq!(status, 200, "signup failed: {body}");
        User {
            id: body["user"]["id"].as_str().expect("user id").to_string(),
            token: body["token"].as_str().expect("token").to_string(),
            refresh_token: body["refreshToken"]
                .as_str()
                .expect("refreshToken")
                .to_string(),
            api_key: tenant.api_key.clone(),
        }
    }

    /// A new user of `tenant` whose wallet the tenant's server credited with `tokens`
    /// (the purchase reference and the Idempotency-Key named after the user).
    pub async fn signup_with_tokens(&self, tenant: &Tenant, username: &str, tokens: i64) -> User {
        let user = self.signup(tenant, username).await;
        let credit = json!({"tokens": tokens, "reference": format!("purchase-{username}")});
        let (status, answer) = self
            .as_server(
                tenant,
                Method::POST,
                &format!("/api/v1/wallets/{}/credits", user.id),
                Some(&credit),
            )
            .header("idempotency-key", format!("credit-{username}"))
            .answer()
            .await;
        assert_eq!(status, 201, "credit: {answer}");
        user
    }

    /// A broadcast of `owner` with `visibility`, moved to `active` by hand; answers its
    /// live view.
    pub async fn live_broadcast(&self, owner: &User, visibility: &str) -> Value {
        let (status, b) = self
            .as_user(owner, Method::POST, "/api/broadcasts")
            .send_json(&json!({"title": "Show", "visibility": visibility}))
            .await;
        assert_eq!(status, 200, "{b}");
        let id = b["id"].as_str().expect("the broadcast's id");
        let (status, live) = self
            .as_user(owner, Method::POST, &format!("/api/broadcasts/{id}/status"))
            .send_json(&json!({"status": "active"}))
            .await;
        assert_eq!(status, 200, "{live}");
        live
    }

    /// A view beacon (`POST /api/views`) as a browser's `navigator.sendBeacon` sends it: the
    /// JSON text as `text/plain;charset=UTF-8`, no credentials. Answers `(status, body)`.
    pub async fn beacon(&self, body: &Value) -> (StatusCode, Value) {
        self.beacon_raw(body.to_string()).await
    }

    /// [`Platform::beacon`] with a body of any text.
    pub async fn beacon_raw(&self, body: String) -> (StatusCode, Value) {
        self.request(Method::POST, "/api/views")
            .header("content-type", "text/plain;charset=UTF-8")
            .body(body)
            .answer()
            .await
    }

    /// A request as `user`: API key and Bearer token set.
    pub fn as_user(&self, user: &User, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.request(method, path)
            .header("x-api-key", &user.api_key)
            .bearer_auth(&user.token)
    }

    /// A request as the tenant's server: the API key and an HMAC signature (the secret key
    /// over method, path and query, body and timestamp). A `nonce` query parameter makes
    /// each call's signature unique, so identical calls within one second are not replays.
    pub fn as_server(
        &self,
        tenant: &Tenant,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> reqwest::RequestBuilder {
        static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nonce = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let separator = if path.contains('?') { '&' } else { '?' };
        let target = format!("{path}{separator}nonce={nonce}");
        let body_text = body.map(Value::to_string).unwrap_or_default();
        let timestamp = self.now().to_string();
        let signature = sign(
            &tenant.secret_key,
            &format!("{method}{target}{body_text}{timestamp}"),
        );
        let builder = self
            .request(method, &target)
            .header("x-api-key", &tenant.api_key)
            .header("x-timestamp", timestamp)
            .header("x-signature", signature);
        match body {
            Some(_) => builder
                .header("content-type", "application/json")
                .body(body_text),
            None => builder,
        }
    }

    /// A request with the tenant's API key only.
    pub fn as_client(
        &self,
        tenant: &Tenant,
        method: Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        self.request(method, path)
            .header("x-api-key", &tenant.api_key)
    }
}

/// The lowercase hex HMAC-SHA256 of `message` keyed with `secret`.
pub fn sign(secret: &str, message: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(message.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// A signed-up user and its tokens.
#[derive(Debug, Clone)]
pub struct User {
    pub id: String,
    pub token: String,
    pub refresh_token: String,
    pub api_key: String,
}

/// An SDK client's credentials.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub api_key: String,
    pub secret_key: String,
    pub client_id: String,
}

/// Sending a request and reading its answer as `(status, JSON body)`.
pub trait Exchange {
    /// Sends the request as built.
    fn answer(self) -> impl std::future::Future<Output = (StatusCode, Value)> + Send;
    /// Sends `body` as JSON.
    fn send_json(
        self,
        body: &Value,
    ) -> impl std::future::Future<Output = (StatusCode, Value)> + Send;
    /// Sends the request as built; answers only the status.
    fn status(self) -> impl std::future::Future<Output = StatusCode> + Send;
}

impl Exchange for reqwest::RequestBuilder {
    async fn answer(self) -> (StatusCode, Value) {
        json_of(self.send().await.expect("request reaches the platform")).await
    }

    async fn send_json(self, body: &Value) -> (StatusCode, Value) {
        self.json(body).answer().await
    }

    async fn status(self) -> StatusCode {
        self.send()
            .await
            .expect("request reaches the platform")
            .status()
    }
}

/// Answers `(status, JSON body)`; a non-JSON body is returned as a JSON string.
pub async fn json_of(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.expect("response body");
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}
