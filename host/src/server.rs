//! Start-up (manifest, variables, state, migrations, compilation) and the HTTP server:
//! hyper on tokio, one fresh component instance per request, as Spin does.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HOST, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use wasmtime::Store;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::bindings::{Proxy, ProxyPre};

use crate::admission::{self, Admission, BodyRefused, Clients, RateGuarded};
use crate::jobs::{JobClient, JobStats, Scheduler, StartupGate};
use crate::limits::{InstanceLimiter, RunLimits};
use crate::linger::Lingering;
use crate::manifest::{FileMount, Manifest};
use crate::network_policy::BlockedNetworks;
use crate::outbound::AllowedHosts;
use crate::routes::Router;
use crate::runtime_config::RuntimeConfig;
use crate::state::{ComponentEnv, InstanceState, Services};
use crate::warn;
use crate::{
    Mode, Options, WebSocketHandler, cache, jobs, kv, limits, production, sqlite, variables,
};

/// Response body type of the server.
type Body = UnsyncBoxBody<Bytes, anyhow::Error>;
/// A request body as a guest reads it: read whole by the host, or streamed at the
/// minimum rate ([`crate::admission`]).
type GuestBody = UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>;
/// An instance slot, and the client's share it counts against; held until the guest has
/// finished.
type Slot = (OwnedSemaphorePermit, admission::InstanceGuard);

/// How long `shutdown` waits for in-flight requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A running edgehost server. Dropping it without `shutdown` stops accepting connections.
pub struct Server {
    app_name: String,
    local_addr: SocketAddr,
    routes: Vec<(String, String)>,
    variables: HashMap<String, String>,
    /// The chat relay and the media server run beside the app.
    #[cfg(feature = "platform")]
    embedded: crate::embedded::Embedded,
    clock: crate::clock::GuestClock,
    writer_timings: sqlite::WriterTimings,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    scheduler: Option<Scheduler>,
}

impl Server {
    /// Loads the manifest, resolves variables, opens state, applies migrations, compiles
    /// the components (cached), binds and spawns the serve loop, runs the start-up jobs;
    /// returns once listening. Until the start-up jobs have succeeded (the schema is the
    /// `migrate` job's), every other request is answered 503 with `Retry-After`. With
    /// `Options.scheduler`, the periodic jobs start too. With the feature `platform`, the
    /// embedded chat relay and media server (`embedded.rs`) start beside the app.
    pub async fn start(#[allow(unused_mut)] mut opts: Options) -> Result<Server> {
        #[cfg(feature = "platform")]
        let (bound, defaults) = crate::embedded::bind(&mut opts).await?;
        #[cfg(not(feature = "platform"))]
        let defaults = Vec::new();
        let mut app = load_app(&opts, &defaults).await?;
        let local_addr = app.local_addr;
        #[cfg(feature = "platform")]
        let starting = bound
            .start(&opts, &app.variables, &app.state_dir, local_addr)
            .await?;
        let app_name = app.name.clone();
        let routes = app.router.routes().to_vec();
        let variables = app.variables.clone();
        let clock = app.services.clock.clone();
        let writer_timings = app.services.sqlite.writer_timings();
        let jobs = app.jobs.clone();
        let request_timeout = app.limits.timeout;
        let token = variables.get("jobs_token").filter(|_| !jobs.is_empty());
        if let Some(token) = token {
            // The listener is bound already (connections wait in its backlog): from the
            // serve loop's first accept, requests wait for the start-up jobs.
            app.gate = StartupGate::closed(&jobs, token);
        }
        let gate = app.gate.clone();
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(serve(app, stop_rx));
        let client = token.map(|token| JobClient::new(local_addr, token, request_timeout));
        let scheduler = start_jobs(jobs, client, opts.scheduler, gate).await;
        Ok(Server {
            app_name,
            local_addr,
            routes,
            variables,
            // The app's schema is there now: it can take the media server's reports.
            #[cfg(feature = "platform")]
            embedded: starting.report(),
            clock,
            writer_timings,
            stop,
            task: Some(task),
            scheduler,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The `[application] name` of the manifest.
    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    /// (route as written in the manifest, component id), in manifest order.
    pub fn routes(&self) -> &[(String, String)] {
        &self.routes
    }

    /// The resolved value of application variable `name` (after overrides, environment,
    /// runtime config, defaults and generated local secrets).
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables.get(name).map(String::as_str)
    }

    /// Moves the components' wall clock forward by `by` (their monotonic clock and
    /// edgehost's own timers keep real time): tests let hours pass without waiting.
    pub fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// The timings of the SQLite databases' writer leases (off until started).
    pub fn sqlite_writer_timings(&self) -> sqlite::WriterTimings {
        self.writer_timings.clone()
    }

    /// The embedded chat relay ([`Options::chat_relay`]), once started.
    #[cfg(feature = "platform")]
    pub fn relay(&self) -> Option<chat_relay::Relay> {
        self.embedded
            .relay
            .as_ref()
            .and_then(chat_relay::Embedded::relay)
    }

    /// The address of the embedded chat relay's internal endpoint.
    #[cfg(feature = "platform")]
    pub fn relay_internal_addr(&self) -> Option<SocketAddr> {
        self.embedded
            .relay
            .as_ref()
            .map(chat_relay::Embedded::internal_addr)
    }

    /// The embedded media server ([`Options::media`]), when it runs: its RTMP and HLS
    /// addresses, and how often its nginx was restarted.
    #[cfg(feature = "platform")]
    pub fn media(&self) -> Option<&media_agent::MediaServer> {
        self.embedded.media.as_ref()
    }

    /// Why the embedded media server could not start ([`MediaServer::required`] unset),
    /// when it could not: RTMP ingest and HLS playback are then off.
    ///
    /// [`MediaServer::required`]: crate::MediaServer::required
    #[cfg(feature = "platform")]
    pub fn media_failure(&self) -> Option<&str> {
        self.embedded.media_failure.as_deref()
    }

    /// Counters of each scheduled job called so far (empty without a jobs file).
    pub fn jobs(&self) -> Vec<JobStats> {
        self.scheduler
            .as_ref()
            .map(Scheduler::stats)
            .unwrap_or_default()
    }

    /// Stops the job scheduler, then stops accepting connections and waits (up to 10 s)
    /// for in-flight requests; closes the embedded relay's sockets and stops the media
    /// server.
    pub async fn shutdown(mut self) -> Result<()> {
        if let Some(scheduler) = self.scheduler.take() {
            scheduler.shutdown(SHUTDOWN_GRACE).await;
        }
        let _ = self.stop.send(true);
        #[cfg(feature = "platform")]
        self.embedded.shutdown().await;
        if let Some(task) = self.task.take() {
            task.await.context("server task failed")?;
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Runs the start-up jobs (and with `periodic`, starts the scheduler), calling the app
/// with `client`, which is `None` when the manifest declares no `jobs_token`.
async fn start_jobs(
    jobs: Vec<jobs::JobSpec>,
    client: Option<JobClient>,
    periodic: bool,
    gate: StartupGate,
) -> Option<Scheduler> {
    if jobs.is_empty() {
        return None;
    }
    let Some(client) = client else {
        warn(format_args!(
            "the jobs file lists jobs but the manifest declares no `jobs_token` \
             variable; jobs are not run"
        ));
        return None;
    };
    Some(Scheduler::start(jobs, client, periodic, gate).await)
}

struct App {
    name: String,
    /// Where the app's state lives (key-value store, SQLite, generated secrets); the
    /// embedded media server keeps its own under it.
    #[cfg(feature = "platform")]
    state_dir: PathBuf,
    router: Router,
    components: HashMap<String, LoadedComponent>,
    services: Arc<Services>,
    websocket: Option<WebSocketHandler>,
    variables: HashMap<String, String>,
    log_requests: bool,
    listener: Option<TcpListener>,
    local_addr: SocketAddr,
    limits: RunLimits,
    /// One permit per instance that may run at once.
    slots: Arc<Semaphore>,
    /// What one client may hold, and how slowly a request may arrive.
    admission: Admission,
    clients: Arc<Clients>,
    /// The jobs file's jobs (empty without one).
    jobs: Vec<jobs::JobSpec>,
    /// Closed while the start-up jobs have not succeeded yet.
    gate: StartupGate,
}

/// Why a request did not get its component's answer.
enum CallError {
    /// No free instance slot (503).
    Busy,
    /// The instance ran past its deadline (504).
    Timeout,
    /// Instantiation failed or the guest trapped (500).
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for CallError {
    fn from(e: anyhow::Error) -> Self {
        CallError::Failed(e)
    }
}

impl From<wasmtime::Error> for CallError {
    fn from(e: wasmtime::Error) -> Self {
        CallError::Failed(e.into())
    }
}

impl From<CallError> for anyhow::Error {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Busy => anyhow!("every instance slot is busy"),
            CallError::Timeout => anyhow!("the instance ran past its deadline"),
            CallError::Failed(e) => e,
        }
    }
}

struct LoadedComponent {
    env: Arc<ComponentEnv>,
    pre: ProxyPre<InstanceState>,
}

/// Loads the app: its manifest and runtime config, state, variables, jobs, stores (with
/// migrations), listener and compiled components. `defaults`: values that stand in for
/// manifest defaults (any explicit setting wins).
async fn load_app(opts: &Options, defaults: &[(String, String)]) -> Result<App> {
    let manifest_path = std::path::absolute(&opts.manifest)
        .with_context(|| format!("bad manifest path {}", opts.manifest.display()))?;
    let mut manifest = Manifest::load(&manifest_path)?;
    manifest.retain_components(&opts.components)?;
    let runtime = RuntimeConfig::load(opts.runtime_config_file.as_deref())?;
    let state_dir = match &opts.state_dir {
        Some(d) => std::path::absolute(d)?,
        None => manifest.dir.join(".spin"),
    };
    std::fs::create_dir_all(&state_dir)
        .with_context(|| format!("cannot create state dir {}", state_dir.display()))?;
    let vars = app_variables(opts, &manifest, &runtime, &state_dir, defaults)?;
    let jobs = load_jobs(opts, &manifest)?;
    let (kv, sqlite) = open_stores(&manifest, &runtime, &state_dir)?;

    let router = Router::build(&manifest.http_triggers)?;
    // With a selection of components, the jobs the others serve are theirs to run.
    let jobs: Vec<_> = jobs
        .into_iter()
        .filter(|job| opts.components.is_empty() || router.route(&job.path()).is_some())
        .collect();
    let listener = TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("cannot listen on {}", opts.listen))?;
    let local_addr = listener.local_addr()?;
    let components = load_components(&manifest, &router, &runtime, &vars, &kv, &sqlite).await?;

    let limits = RunLimits {
        memory: opts
            .max_instance_memory
            .or(runtime.max_instance_memory)
            .unwrap_or(limits::DEFAULT_INSTANCE_MEMORY),
        timeout: opts.request_timeout,
    };
    Ok(App {
        #[cfg(feature = "platform")]
        state_dir: state_dir.clone(),
        limits,
        slots: Arc::new(Semaphore::new(opts.max_concurrent_instances.max(1))),
        admission: opts.admission,
        clients: Arc::default(),
        jobs,
        gate: StartupGate::open_now(),
        name: manifest.application.name.clone(),
        router,
        components,
        services: Arc::new(Services {
            kv,
            sqlite,
            pg: crate::pg::PgPools::with_extra_roots(opts.postgres_ca_file.clone()),
            clock: Default::default(),
            outbound: Default::default(),
        }),
        websocket: opts.websocket.clone(),
        variables: vars.values.clone(),
        log_requests: opts.log_requests,
        listener: Some(listener),
        local_addr,
    })
}

/// The app's variables resolved, refused in production while local defaults remain, new
/// secrets saved, and the local values announced.
fn app_variables(
    opts: &Options,
    manifest: &Manifest,
    runtime: &RuntimeConfig,
    state_dir: &Path,
    defaults: &[(String, String)],
) -> Result<variables::AppVariables> {
    let local_defaults = match opts.mode {
        Mode::Local => production::LOCAL_DEFAULTS,
        Mode::Production => &[],
    };
    let vars = variables::resolve_app_variables(
        manifest,
        &opts.variables,
        runtime,
        state_dir,
        local_defaults,
        defaults,
    )?;
    if opts.mode == Mode::Production {
        let problems = production::local_defaults_left(&vars);
        if !problems.is_empty() {
            return Err(production::refusal(&problems));
        }
    }
    vars.save_new_secrets(state_dir)?;
    announce_local_values(&vars, state_dir);
    Ok(vars)
}

/// The jobs file's jobs: `Options.jobs_file`, else `jobs.toml` next to the manifest when
/// there is one.
fn load_jobs(opts: &Options, manifest: &Manifest) -> Result<Vec<jobs::JobSpec>> {
    let jobs_file = match &opts.jobs_file {
        Some(path) => Some(path.clone()),
        None => Some(manifest.dir.join("jobs.toml")).filter(|p| p.is_file()),
    };
    match jobs_file {
        Some(path) => jobs::load(&path),
        None => Ok(Vec::new()),
    }
}

/// Opens the key-value stores and SQLite databases under `state_dir` (and those of the
/// runtime config), and applies the `sql/` migrations to the default database.
fn open_stores(
    manifest: &Manifest,
    runtime: &RuntimeConfig,
    state_dir: &Path,
) -> Result<(kv::KvStores, sqlite::Databases)> {
    let kv_extra: Vec<_> = runtime.key_value_stores.clone().into_iter().collect();
    let kv = kv::KvStores::open(&state_dir.join("sqlite_key_value.db"), &kv_extra)?;
    let db_extra: Vec<_> = runtime.sqlite_databases.clone().into_iter().collect();
    let sqlite = sqlite::Databases::open(&state_dir.join("sqlite_db.db"), &db_extra)?;
    if let Some(default) = sqlite.get("default") {
        let applied = sqlite::apply_migrations(default, &manifest.dir.join("sql"))?;
        for name in applied {
            eprintln!("edgehost: applied migration {name}");
        }
    }
    Ok((kv, sqlite))
}

/// Compiles (or loads from the cache) and pre-links each component a route serves.
async fn load_components(
    manifest: &Manifest,
    router: &Router,
    runtime: &RuntimeConfig,
    vars: &variables::AppVariables,
    kv: &kv::KvStores,
    sqlite: &sqlite::Databases,
) -> Result<HashMap<String, LoadedComponent>> {
    let engine = cache::engine()?;
    let linker = crate::state::linker(engine)?;
    let used: BTreeSet<&str> = router.routes().iter().map(|(_, c)| c.as_str()).collect();
    let blocked_networks = Arc::new(runtime.blocked_networks.clone());
    let mut components = HashMap::new();
    for id in used {
        let mut env = component_env(manifest, id, vars, kv, sqlite)?;
        env.blocked_networks = blocked_networks.clone();
        let pre = pre_link(manifest, id, engine, &linker).await?;
        components.insert(
            id.to_string(),
            LoadedComponent {
                env: Arc::new(env),
                pre,
            },
        );
    }
    Ok(components)
}

/// Component `id` compiled and pre-linked against the host's interfaces.
async fn pre_link(
    manifest: &Manifest,
    id: &str,
    engine: &wasmtime::Engine,
    linker: &wasmtime::component::Linker<InstanceState>,
) -> Result<ProxyPre<InstanceState>> {
    let path = manifest
        .source_path(id)
        .ok_or_else(|| anyhow!("component `{id}` has no local source"))?;
    let component = cache::load_component(engine, &path, &manifest.dir)
        .await
        .with_context(|| {
            let hint = if manifest.components[id].build.is_some() {
                " (run with --build?)"
            } else {
                ""
            };
            format!("component `{id}`{hint}")
        })?;
    let pre = match linker.instantiate_pre(&component) {
        Ok(pre) => pre,
        Err(e) => {
            // Spin provides interfaces edgehost does not (llm, redis, mysql, ...):
            // let such a component run, trapping only if it calls one.
            warn(format_args!(
                "component `{id}`: {e:#}; unsupported imports will trap when called"
            ));
            let mut linker = linker.clone();
            linker.define_unknown_imports_as_traps(&component)?;
            linker.instantiate_pre(&component)?
        }
    };
    ProxyPre::new(pre)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("component `{id}` does not export wasi:http/incoming-handler"))
}

fn component_env(
    manifest: &Manifest,
    id: &str,
    vars: &variables::AppVariables,
    kv: &kv::KvStores,
    sqlite: &sqlite::Databases,
) -> Result<ComponentEnv> {
    let c = &manifest.components[id];
    // Spin refuses to start when a declared store or database is not configured; edgehost
    // warns and answers `no-such-store` / `no-such-database` at run time instead.
    for label in &c.key_value_stores {
        if !kv.contains(label) {
            warn(format_args!(
                "component `{id}`: key-value store `{label}` is not configured (Spin would refuse to start)"
            ));
        }
    }
    for label in &c.sqlite_databases {
        if !sqlite.contains(label) {
            warn(format_args!(
                "component `{id}`: SQLite database `{label}` is not configured (Spin would refuse to start)"
            ));
        }
    }
    let allowed = AllowedHosts::parse(&c.allowed_outbound_hosts, &vars.values)
        .with_context(|| format!("component `{id}`"))?;
    Ok(ComponentEnv {
        id: Arc::from(id),
        kv_allowed: c.key_value_stores.iter().cloned().collect::<HashSet<_>>(),
        sqlite_allowed: c.sqlite_databases.iter().cloned().collect::<HashSet<_>>(),
        variables: variables::component_variables(id, &c.variables, vars)?,
        allowed_hosts: Arc::new(allowed),
        environment: c.environment.clone().into_iter().collect(),
        mounts: file_mounts(&manifest.dir, id, &c.files)?,
        blocked_networks: Arc::new(BlockedNetworks::default()),
    })
}

/// Says which values are edgehost's local ones: secrets generated by this start (with
/// their values: shown this once), those kept from earlier starts (names only), and
/// local-mode defaults.
fn announce_local_values(vars: &variables::AppVariables, state_dir: &Path) {
    let file = state_dir.join(variables::GENERATED_FILE);
    for (name, value) in &vars.new_secrets {
        eprintln!(
            "edgehost: generated local secret `{name}` = {value} (shown once; kept in {}, mode 0600)",
            file.display()
        );
    }
    let kept: Vec<&str> = vars
        .generated
        .iter()
        .filter(|n| !vars.new_secrets.iter().any(|(new, _)| new == *n))
        .map(String::as_str)
        .collect();
    if !kept.is_empty() {
        eprintln!(
            "edgehost: using generated local secrets {} from {}",
            kept.join(", "),
            file.display()
        );
    }
    if vars.local_defaults.iter().any(|n| n == "registration_mode") {
        eprintln!(
            "edgehost: registration is open: local mode (set registration_mode, or start \
             with --production)"
        );
    }
}

/// Maps `files` to read-only directory mounts. Spin copies the matched files; edgehost
/// mounts directories: a `{ source, destination }` directory as given, and for a glob
/// such as `static/**/*` the directory before the first wildcard at the same path.
fn file_mounts(dir: &Path, id: &str, files: &[FileMount]) -> Result<Vec<(PathBuf, String)>> {
    let mut mounts = Vec::new();
    for f in files {
        let (host, guest) = match f {
            FileMount::Placement {
                source,
                destination,
            } => (dir.join(source), destination.clone()),
            FileMount::Pattern(p) => {
                let base: Vec<&str> = p
                    .split('/')
                    .take_while(|s| !s.contains(['*', '?', '[', '{']))
                    .collect();
                let base = base.join("/");
                (
                    dir.join(&base),
                    format!("/{}", base.trim_start_matches("./")),
                )
            }
        };
        if host.is_dir() {
            mounts.push((host, guest));
        } else {
            warn(format_args!(
                "component `{id}`: files entry {} is not a directory; not mounted",
                host.display()
            ));
        }
    }
    Ok(mounts)
}

/// The accept loop; ends when `stop` flips, then lets open connections finish their
/// current request (up to `SHUTDOWN_GRACE`).
async fn serve(mut app: App, mut stop: watch::Receiver<bool>) {
    let Some(listener) = app.listener.take() else {
        return;
    };
    let app = Arc::new(app);
    // Every connection task holds a sender; `recv` yields `None` once all are gone.
    let (alive, mut all_closed) = mpsc::channel::<()>(1);
    loop {
        let (stream, client) = tokio::select! {
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // e.g. too many open files: back off instead of spinning.
                    warn(format_args!("accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // A client at its cap of connections gets no more (the socket is closed).
        let Some(held) = app
            .clients
            .connect(client.ip(), app.admission.connections_per_client)
        else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let header_timeout = app.admission.header_timeout;
        let app = app.clone();
        let service = hyper::service::service_fn(move |req| {
            let app = app.clone();
            async move { Ok::<_, Infallible>(app.handle(req, client).await) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(Lingering::new(stream)), service)
            .with_upgrades();
        let (alive, mut stop) = (alive.clone(), stop.clone());
        tokio::spawn(async move {
            let _alive = alive;
            // Held while the connection is served (an upgraded socket leaves the count).
            let _held = held;
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stopped(&mut stop) => {}
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        });
    }
    drop(listener);
    drop(alive);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, all_closed.recv()).await;
}

/// Resolves once the stop flag is set (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

impl App {
    async fn handle(&self, req: Request<Incoming>, client: SocketAddr) -> Response<Body> {
        let start = Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        // The scheduler logs its own failures; its calls every few seconds would drown
        // the request log.
        let from_scheduler = req
            .headers()
            .get(hyper::header::USER_AGENT)
            .is_some_and(|ua| ua == jobs::USER_AGENT)
            && client.ip().is_loopback();
        let (target, response) = self.dispatch(req, client).await;
        if self.log_requests && !from_scheduler {
            eprintln!(
                "{method} {path} -> {target} {} {:.1}ms",
                response.status().as_u16(),
                start.elapsed().as_secs_f64() * 1000.0
            );
        }
        response
    }

    /// Returns (what handled it, for the log) and the response.
    async fn dispatch(
        &self,
        req: Request<Incoming>,
        client: SocketAddr,
    ) -> (String, Response<Body>) {
        if self.waits_for_startup(&req) {
            return ("-".into(), starting());
        }
        let path = req.uri().path();
        if path.starts_with("/ws/") {
            return self.websocket(req, client).await;
        }
        if path == "/.well-known/spin/health" {
            return ("-".into(), text(StatusCode::OK, "OK"));
        }
        let Some(route) = self.router.route(path) else {
            return ("-".into(), text(StatusCode::NOT_FOUND, "Not Found"));
        };
        let id = route.component.clone();
        let Some(component) = self.components.get(&id) else {
            return (
                id,
                text(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
            );
        };
        let req = match prepare_request(req, &route, client, self.local_addr) {
            Ok(r) => r,
            Err(e) => {
                return (
                    id,
                    text(StatusCode::BAD_REQUEST, &format!("Bad Request: {e}")),
                );
            }
        };
        let (parts, body) = req.into_parts();
        let (body, body_ended) = match self.guest_body(&parts.headers, body).await {
            Ok(guarded) => guarded,
            Err(refused) => return (id, refused),
        };
        let req = Request::from_parts(parts, body);
        // Refuse at once rather than queue without bound when every slot is taken, or
        // when this client holds its share of them.
        let Some(held) = self
            .clients
            .instance(client.ip(), self.admission.instances_per_client)
        else {
            return (id, busy());
        };
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return (id, busy());
        };
        let result = self.call(component, req, (slot, held)).await;
        let response = self.answer(&id, result, body_ended);
        (id, response)
    }

    /// Whether the request must wait for the start-up jobs (the schema): all do but the
    /// liveness check and those jobs' own calls.
    fn waits_for_startup(&self, req: &Request<Incoming>) -> bool {
        let path = req.uri().path();
        !self.gate.is_open()
            && path != "/.well-known/spin/health"
            && !self.gate.lets_through(
                req.method(),
                path,
                req.headers()
                    .get(hyper::header::AUTHORIZATION)
                    .map_or(&[][..], HeaderValue::as_bytes),
            )
    }

    /// A `/ws/...` request, handed to [`Options::websocket`] with the client's address.
    async fn websocket(
        &self,
        mut req: Request<Incoming>,
        client: SocketAddr,
    ) -> (String, Response<Body>) {
        match &self.websocket {
            Some(handler) => {
                req.extensions_mut().insert(client);
                let resp = handler(req).await;
                ("websocket".into(), resp.map(BodyExt::boxed_unsync))
            }
            None => ("-".into(), text(StatusCode::NOT_FOUND, "Not Found")),
        }
    }

    /// The request's body as the guest will read it, and (when it streams in) the flag
    /// that says it has been read to its end; or the answer that refuses it. A small body
    /// arrives whole before an instance is taken; a large one streams in, at the minimum
    /// rate.
    async fn guest_body(
        &self,
        headers: &hyper::HeaderMap,
        body: Incoming,
    ) -> Result<(GuestBody, Option<Arc<AtomicBool>>), Response<Body>> {
        let declared = headers
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        match declared {
            Some(len) if len <= self.admission.small_body => {
                let within = self.admission.small_body_deadline(len);
                match admission::read_small(body, within).await {
                    Ok(bytes) => Ok((
                        Full::new(bytes)
                            .map_err(|never| match never {})
                            .boxed_unsync(),
                        None,
                    )),
                    Err(BodyRefused::TooSlow) => Err(too_slow()),
                    Err(BodyRefused::Broken) => Err(text(StatusCode::BAD_REQUEST, "Bad Request")),
                }
            }
            // No body at all (a GET): nothing to guard, and no timer to set.
            None if hyper::body::Body::is_end_stream(&body) => Ok((
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
                None,
            )),
            _ => {
                let guarded = RateGuarded::new(body, &self.admission);
                let ended = guarded.ended();
                Ok((guarded.boxed_unsync(), Some(ended)))
            }
        }
    }

    /// The response to a call of component `id`: the guest's own, or the host's 503, 504
    /// or 500.
    fn answer(
        &self,
        id: &str,
        result: Result<Response<Body>, CallError>,
        body_ended: Option<Arc<AtomicBool>>,
    ) -> Response<Body> {
        match result {
            Ok(mut resp) => {
                // An answer given before the request's body was read (a 413, say) ends
                // the connection; saying so keeps the client from sending its next
                // request on it.
                if body_ended.is_some_and(|ended| !ended.load(Ordering::Relaxed)) {
                    resp.headers_mut()
                        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                }
                resp
            }
            Err(CallError::Busy) => busy(),
            Err(CallError::Timeout) => {
                eprintln!(
                    "edgehost: component `{id}` interrupted at its deadline ({:?})",
                    self.limits.timeout
                );
                deadline_passed(self.limits.timeout)
            }
            Err(CallError::Failed(e)) => {
                eprintln!("edgehost: component `{id}` failed: {e:#}");
                text(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
            }
        }
    }

    /// Instantiates the component and runs its `wasi:http/incoming-handler`; `slot` is
    /// held until the guest has finished.
    async fn call(
        &self,
        c: &LoadedComponent,
        req: Request<GuestBody>,
        slot: Slot,
    ) -> Result<Response<Body>, CallError> {
        let deadline = Instant::now() + self.limits.timeout;
        let (store, proxy) = self.instantiate(c, deadline).await?;
        run_handler(&c.env.id, store, proxy, req, deadline, slot).await
    }

    /// A fresh instance of `c` (from its pre-linked `ProxyPre`), under the memory limit
    /// and with its deadline armed.
    async fn instantiate(
        &self,
        c: &LoadedComponent,
        deadline: Instant,
    ) -> Result<(Store<InstanceState>, Proxy), CallError> {
        let mut state = InstanceState::new(c.env.clone(), self.services.clone(), self.local_addr)?;
        state.limits = InstanceLimiter::new(self.limits.memory);
        let mut store = Store::new(c.pre.engine(), state);
        store.limiter(|s| &mut s.limits);
        limits::arm_deadline(&mut store, deadline);
        match c.pre.instantiate_async(&mut store).await {
            Ok(proxy) => Ok((store, proxy)),
            Err(e) if limits::is_pool_exhausted(&e) => Err(CallError::Busy),
            Err(e) => Err(CallError::Failed(anyhow::Error::from(e))),
        }
    }
}

/// The guest's run, from the call to its end (the response body included); holds the
/// instance slot.
type GuestRun = Pin<Box<dyn Future<Output = Result<(), CallError>> + Send>>;

/// Calls an instance's `wasi:http/incoming-handler` and waits for the response head. The
/// guest, response body included, must finish by `deadline`: a guest computing past it
/// is interrupted at the next epoch tick, one waiting on I/O is dropped.
///
/// The guest runs on the connection's task until it sets its response head, then for as
/// long as it can go on without waiting. A guest that has finished by then (most answers:
/// the body written in one go) is answered with its whole body at once, which hyper sends
/// with a `Content-Length` in one write, and without a task or channel hand-off per
/// request. A guest still running (a streamed body, an outbound call after the head)
/// continues in its own task while its body streams, as Spin runs it.
async fn run_handler<B>(
    id: &Arc<str>,
    mut store: Store<InstanceState>,
    proxy: Proxy,
    req: Request<B>,
    deadline: Instant,
    slot: Slot,
) -> Result<Response<Body>, CallError>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<wasmtime_wasi_http::Error>,
{
    let incoming = store
        .data_mut()
        .http()
        .new_incoming_request(Scheme::Http, req)?;
    let (tx, mut rx) = oneshot::channel();
    let outparam = store.data_mut().http().new_response_outparam(tx)?;
    let guest: GuestRun = Box::pin(async move {
        let _slot = slot;
        let handle = proxy
            .wasi_http_incoming_handler()
            .call_handle(&mut store, incoming, outparam);
        match tokio::time::timeout_at(deadline.into(), handle).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if limits::is_deadline_trap(&e) => Err(CallError::Timeout),
            Ok(Err(e)) => Err(CallError::Failed(
                anyhow::Error::from(e).context("component trapped"),
            )),
            Err(_elapsed) => Err(CallError::Timeout),
        }
    });
    // Should this request's future be dropped (the client went away), the guest still
    // runs to its end in a task of its own, as it would on Spin.
    let mut guest = Detached::new(id.clone(), guest);
    let (head, finished) = tokio::select! {
        biased;
        head = &mut rx => (head.map_err(|_| ()), guest.poll_once().await),
        done = guest.run() => (rx.try_recv().map_err(|_| ()), Some(done)),
    };
    match (head, finished) {
        (Ok(Ok(resp)), Some(Ok(()))) => Ok(whole_body(resp).await),
        (Ok(Ok(resp)), Some(Err(e))) => {
            // The head was sent, so the answer stands; its body ends where the guest
            // stopped (the client sees it cut short).
            log_after_head(id, e);
            Ok(resp.map(|b| b.map_err(anyhow::Error::from).boxed_unsync()))
        }
        (Ok(Ok(resp)), None) => {
            guest.detach();
            Ok(resp.map(|b| b.map_err(anyhow::Error::from).boxed_unsync()))
        }
        (Ok(Err(code)), finished) => {
            if finished.is_none() {
                let _ = guest.run().await;
            }
            Err(anyhow!("component responded with error code {code:?}").into())
        }
        (Err(()), finished) => {
            // The guest dropped its response outparam unset: its outcome says why.
            let finished = match finished {
                Some(finished) => finished,
                None => guest.run().await,
            };
            match finished {
                Ok(()) => Err(anyhow!("component returned without setting a response").into()),
                Err(e) => Err(e),
            }
        }
    }
}

/// A guest's run that is not lost with the request's future: dropped unfinished, it is
/// spawned to finish on its own.
struct Detached {
    id: Arc<str>,
    run: Option<GuestRun>,
}

impl Detached {
    fn new(id: Arc<str>, run: GuestRun) -> Detached {
        Detached { id, run: Some(run) }
    }

    /// Runs the guest to its end.
    async fn run(&mut self) -> Result<(), CallError> {
        let run = self.run.as_mut().expect("the guest has not ended");
        let done = run.await;
        self.run = None;
        done
    }

    /// Lets the guest go on until it ends (its outcome) or waits (`None`).
    async fn poll_once(&mut self) -> Option<Result<(), CallError>> {
        let run = self.run.as_mut()?;
        let done = std::future::poll_fn(|cx| match run.as_mut().poll(cx) {
            Poll::Ready(done) => Poll::Ready(Some(done)),
            Poll::Pending => Poll::Ready(None),
        })
        .await;
        if done.is_some() {
            self.run = None;
        }
        done
    }

    /// Leaves the rest of the run to a task of its own, which logs how it ended.
    fn detach(&mut self) {
        if let Some(run) = self.run.take() {
            let id = self.id.clone();
            tokio::spawn(async move {
                if let Err(e) = run.await {
                    log_after_head(&id, e);
                }
            });
        }
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if self.run.is_some() && tokio::runtime::Handle::try_current().is_ok() {
            self.detach();
        }
    }
}

/// Logs a guest that failed once its response head was sent.
fn log_after_head(id: &str, e: CallError) {
    match e {
        CallError::Timeout => eprintln!(
            "edgehost: component `{id}` interrupted at its deadline while sending its response body"
        ),
        e => eprintln!(
            "edgehost: component `{id}` failed after sending its response head: {:#}",
            anyhow::Error::from(e)
        ),
    }
}

/// The response of a guest that has ended: its body is all in the channel already, and is
/// answered as one known-length body. A body that ends otherwise (trailers, an abort) is
/// answered as it was written, frame by frame.
async fn whole_body(
    resp: Response<wasmtime_wasi_http::p2::body::HyperOutgoingBody>,
) -> Response<Body> {
    let (parts, mut body) = resp.into_parts();
    let mut chunks = Vec::new();
    let mut size = 0u64;
    let rest = loop {
        match std::future::poll_fn(|cx| {
            Poll::Ready(hyper::body::Body::poll_frame(Pin::new(&mut body), cx))
        })
        .await
        {
            Poll::Ready(None) => break None,
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    size += data.len() as u64;
                    chunks.push(data);
                }
                Err(frame) => break Some(Some(Ok(frame))),
            },
            Poll::Ready(Some(Err(e))) => break Some(Some(Err(e))),
            Poll::Pending => break Some(None),
        }
    };
    let body = match rest {
        None if !parts.headers.contains_key(hyper::header::TRANSFER_ENCODING) => Written {
            chunks: chunks.into(),
            size,
        }
        .boxed_unsync(),
        rest => {
            // What was already read goes first, then the frame that stopped the read,
            // then whatever remains.
            let read = chunks.into_iter().map(|c| Ok(hyper::body::Frame::data(c)));
            let stopped = rest.flatten().into_iter();
            let head = futures_util::stream::iter(read.chain(stopped).collect::<Vec<_>>());
            let tail = http_body_util::BodyStream::new(body);
            http_body_util::StreamBody::new(futures_util::StreamExt::chain(head, tail))
                .map_err(anyhow::Error::from)
                .boxed_unsync()
        }
    };
    Response::from_parts(parts, body)
}

/// A response body written whole: its chunks and their total size.
struct Written {
    chunks: std::collections::VecDeque<Bytes>,
    size: u64,
}

impl hyper::body::Body for Written {
    type Data = Bytes;
    type Error = anyhow::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, anyhow::Error>>> {
        let chunk = self.chunks.pop_front();
        if let Some(c) = &chunk {
            self.size -= c.len() as u64;
        }
        Poll::Ready(chunk.map(|c| Ok(hyper::body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.size)
    }
}

/// Measures instantiation without HTTP, for `host/benches/serve.rs`: for each iteration,
/// (time to instantiate, time to instantiate + handle `GET path` + read the body).
#[doc(hidden)]
pub async fn bench_instantiation(
    opts: &Options,
    component: &str,
    path: &str,
    iterations: usize,
) -> Result<Vec<(Duration, Duration)>> {
    bench_request(opts, component, path, &[], iterations).await
}

/// [`bench_instantiation`] for a `GET path` with `headers` (the hosts bench splits an
/// asset request's time with it).
#[doc(hidden)]
pub async fn bench_request(
    opts: &Options,
    component: &str,
    path: &str,
    headers: &[(&str, &str)],
    iterations: usize,
) -> Result<Vec<(Duration, Duration)>> {
    let app = load_app(opts, &[]).await?;
    let c = app
        .components
        .get(component)
        .ok_or_else(|| anyhow!("no routed component `{component}`"))?;
    let mut out = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let slot = app.slots.clone().try_acquire_owned()?;
        let held = app
            .clients
            .instance(std::net::Ipv4Addr::LOCALHOST.into(), 0)
            .ok_or_else(|| anyhow!("no instance slot"))?;
        let (store, proxy) = app.instantiate(c, start + app.limits.timeout).await?;
        let instantiated = start.elapsed();
        let mut req = Request::builder().uri(format!("http://localhost{path}"));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(
            http_body_util::Empty::<Bytes>::new()
                .map_err(|never| -> wasmtime_wasi_http::Error { match never {} }),
        )?;
        let resp = run_handler(
            &c.env.id,
            store,
            proxy,
            req,
            start + app.limits.timeout,
            (slot, held),
        )
        .await?;
        resp.into_body().collect().await?;
        out.push((instantiated, start.elapsed()));
    }
    Ok(out)
}

/// Gives the request an absolute URI and the `spin-*` headers, as Spin does.
fn prepare_request(
    req: Request<Incoming>,
    route: &crate::routes::RouteMatch,
    client: SocketAddr,
    local: SocketAddr,
) -> Result<Request<Incoming>> {
    let (mut parts, body) = req.into_parts();
    let host = match parts.headers.get(HOST) {
        Some(h) => Some(
            h.to_str()
                .context("Host header is not valid UTF-8")?
                .to_string(),
        ),
        None => parts.uri.authority().map(|a| a.to_string()),
    };
    let authority: http::uri::Authority = match &host {
        Some(h) => h.parse().context("Host header is not a valid authority")?,
        None => local.to_string().parse()?,
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    parts.uri = http::Uri::builder()
        .scheme("http")
        .authority(authority)
        .path_and_query(path_and_query.as_str())
        .build()?;
    // Transport detail meaningful only to this hop (Spin strips it too).
    parts.headers.remove(hyper::header::CONNECTION);
    let host = host.unwrap_or_else(|| "localhost".into());
    for (name, value) in route.spin_headers("http", &host, &path_and_query, client) {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            parts.headers.insert(n, v);
        }
    }
    Ok(Request::from_parts(parts, body))
}

/// 408 for a request whose body did not arrive in time (the connection is closed).
fn too_slow() -> Response<Body> {
    let mut response = text(StatusCode::REQUEST_TIMEOUT, "Request Timeout");
    response
        .headers_mut()
        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// 503 for a request that found every instance slot busy.
fn busy() -> Response<Body> {
    let mut resp = text(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable: every instance slot is busy; retry shortly",
    );
    resp.headers_mut()
        .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// 503 for a request that arrived before the start-up jobs (the schema) were done.
fn starting() -> Response<Body> {
    let mut resp = text(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable: starting (the start-up jobs, such as the schema's migration, \
         have not finished); retry shortly",
    );
    resp.headers_mut()
        .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// 504 for a request whose instance ran past its deadline: the component, the "upstream"
/// behind edgehost, did not answer in time. (503 is kept for "busy, retry": a retry of a
/// request that timed out would most likely time out again.)
fn deadline_passed(timeout: Duration) -> Response<Body> {
    text(
        StatusCode::GATEWAY_TIMEOUT,
        &format!("Gateway Timeout: the component did not finish within {timeout:?}"),
    )
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
