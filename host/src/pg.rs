//! `spin:postgres/postgres@4.0.0` and `@3.0.0` (Spin's PostgreSQL interface) over
//! tokio-postgres.
//!
//! - `open(address)`: the address (a `postgres://` URL or a `key=value` string) must name
//!   hosts the component's `allowed_outbound_hosts` allow for the `postgres` scheme, checked
//!   as Spin checks them: each `host` with the port at the same index (or the only port;
//!   none means 5432). Unix sockets are refused. edgehost also checks any `hostaddr`, which
//!   tokio-postgres would connect to instead of resolving `host`.
//! - TLS as Spin does it: `sslmode=disable` connects in plain text; `prefer` (the default)
//!   tries TLS and falls back to plain text when the server offers none; `require` insists
//!   on TLS. The server's certificate is verified (chain and host name) against the
//!   system's roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` replace them, as for Spin's OpenSSL),
//!   plus [`crate::Options::postgres_ca_file`]: Spin's native-tls verifies the same way.
//! - Each guest `connection` holds one real PostgreSQL connection from `open` until it is
//!   dropped, so `BEGIN` ... `COMMIT` across calls works. Connections are pooled per
//!   address across instances (at most 64 open per address); one that a guest used has its
//!   session state cleared before it is reused, as Spin's pool does (deadpool-postgres's
//!   `Clean` recycling). Like Spin, that does not end a transaction: a guest that trapped
//!   between `BEGIN` and `COMMIT` leaves it open, with its writes and locks, for the next
//!   instance to find (the platform's components roll such a connection back on open:
//!   `edge::spin::store::connect_postgres`). A connection whose reset fails (its
//!   transaction had failed) is closed.
//! - Statements are prepared once per pooled connection and reused.
//! - Values, errors and the columns of a result (taken from its first row) follow Spin's
//!   `factor-outbound-pg`.
//! - A `query` that returns no rows fails with [`NO_ROWS`]: Spin 4.0.0 to 4.0.2 never
//!   answer one (spinframework/spin#3671) and Spin 3.x answers it empty, so a guest that
//!   works on every Spin never sends one; the platform's components wrap every query so
//!   that it answers at least one row (`store::sql::never_empty`).

mod values;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;
use wasmtime::component::{HasData, Linker, Resource};

use crate::bindings::spin::postgres3_0_0::postgres as v3;
use crate::bindings::spin::postgres4_0_0::postgres as v4;
use crate::handles::Handles;
use crate::outbound::AllowedHosts;

/// How many PostgreSQL connections one instance may hold open at once.
pub const MAX_OPEN_CONNECTIONS: usize = 256;
/// Connections open at once per address, across instances (Spin's pool size).
const POOL_SIZE: usize = 64;
/// Idle connections kept per address.
const MAX_IDLE: usize = 16;
/// Addresses with a pool at once; the least recently used pool goes beyond that.
const MAX_POOLS: usize = 16;
/// Prepared statements kept per connection.
const MAX_CACHED_STATEMENTS: usize = 256;
/// Largest query result handed to a guest.
const MAX_RESULT_BYTES: usize = 128 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// New connections being made at once per address. A connection costs the server a
/// process and an authentication exchange (SCRAM's key derivation on both sides): a burst
/// of requests makes them a few at a time, and a request that waits may be handed a
/// connection another one just gave back instead.
const MAX_CONNECTING: usize = 4;
/// How long `open` waits for a connection being reset before making a new one.
const RESET_WAIT: Duration = Duration::from_millis(250);
/// How long `open` waits for a connection when the address's pool is exhausted.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Run on a connection a guest used, before the next guest gets it: clears what a session
/// can carry (the statements edgehost prepared stay), the statements Spin's pool runs. An
/// open transaction stays open, as on Spin.
const RESET: &str = "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; \
                     SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES";

/// The connection pools of an application, by address.
#[derive(Default)]
pub struct PgPools {
    pools: Mutex<HashMap<String, Arc<PgPool>>>,
    /// A PEM file of further roots for TLS (besides the system's).
    extra_roots: Option<std::path::PathBuf>,
    /// The TLS connector, made at the first connection that wants TLS.
    tls: std::sync::OnceLock<Result<MakeRustlsConnect, String>>,
}

impl PgPools {
    /// Pools whose TLS connections also trust the roots in `extra_roots` (PEM).
    pub fn with_extra_roots(extra_roots: Option<std::path::PathBuf>) -> PgPools {
        PgPools {
            extra_roots,
            ..PgPools::default()
        }
    }

    /// The TLS connector: the system's roots and the extra ones, on `ring`.
    fn tls(&self) -> Result<MakeRustlsConnect, String> {
        self.tls
            .get_or_init(|| tls_connector(self.extra_roots.as_deref()))
            .clone()
    }

    fn pool(&self, address: &str, config: Config) -> Result<Arc<PgPool>, String> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = pools.get(address) {
            pool.touch();
            return Ok(pool.clone());
        }
        // Decided once per address, when its pool is made.
        let tls = match config.get_ssl_mode() {
            SslMode::Disable => None,
            // TLS is optional here: without usable roots, plain text as the server allows.
            SslMode::Prefer => self.tls().ok(),
            _ => Some(self.tls()?),
        };
        if pools.len() >= MAX_POOLS {
            let oldest = pools
                .iter()
                .min_by_key(|(_, p)| p.last_used())
                .map(|(a, _)| a.clone());
            if let Some(oldest) = oldest {
                pools.remove(&oldest);
            }
        }
        let pool = Arc::new(PgPool {
            config,
            tls,
            idle: Mutex::new(Vec::new()),
            slots: Arc::new(Semaphore::new(POOL_SIZE)),
            connecting: Semaphore::new(MAX_CONNECTING),
            resetting: AtomicUsize::new(0),
            reset_done: Notify::new(),
            last_used: Mutex::new(Instant::now()),
        });
        pools.insert(address.to_string(), pool.clone());
        Ok(pool)
    }
}

/// A TLS connector for PostgreSQL that verifies the server against the system's roots
/// (`SSL_CERT_FILE` / `SSL_CERT_DIR` when set) and those in `extra_roots`.
fn tls_connector(extra_roots: Option<&std::path::Path>) -> Result<MakeRustlsConnect, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 && extra_roots.is_none() {
        return Err(format!(
            "no trusted roots for TLS to PostgreSQL (the system's could not be read: {:?})",
            native.errors
        ));
    }
    if let Some(path) = extra_roots {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("PostgreSQL CA file {}: {e}", path.display()))?;
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("PostgreSQL CA file {}: {e}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// An error with its causes ("error performing TLS handshake: invalid peer certificate:
/// UnknownIssuer").
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Connects, over TLS when `tls` is given (as `sslmode` says), and drives the connection
/// in the background until the client is dropped or the server goes away.
async fn connect(config: &Config, tls: Option<&MakeRustlsConnect>) -> Result<Client, String> {
    let failed = |e: tokio_postgres::Error| with_causes(&e);
    match tls {
        None => {
            let (client, connection) = config.connect(NoTls).await.map_err(failed)?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(client)
        }
        Some(tls) => {
            let (client, connection) = config.connect(tls.clone()).await.map_err(failed)?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(client)
        }
    }
}

/// The connections to one address.
struct PgPool {
    config: Config,
    /// TLS, unless the address says `sslmode=disable`.
    tls: Option<MakeRustlsConnect>,
    idle: Mutex<Vec<PgSession>>,
    slots: Arc<Semaphore>,
    /// Connections being made (`MAX_CONNECTING`).
    connecting: Semaphore,
    /// Connections a guest gave back that are being reset, and the signal that one was.
    resetting: AtomicUsize,
    reset_done: Notify,
    last_used: Mutex<Instant>,
}

impl PgPool {
    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A live idle connection, if there is one.
    fn take_idle(&self) -> Option<PgSession> {
        loop {
            let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match idle {
                Some(session) if !session.client.is_closed() => return Some(session),
                Some(_) => continue,
                None => return None,
            }
        }
    }

    /// An idle connection, or a new one once the pool has room.
    async fn acquire(&self) -> Result<PgSession, String> {
        if let Some(session) = self.take_idle() {
            return Ok(session);
        }
        // One being reset is idle within a round trip: the next guest gets it, as it would
        // on Spin (which resets at checkout), rather than a fresh connection beside it.
        if let Some(session) = self.after_a_reset().await {
            return Ok(session);
        }
        let deadline = tokio::time::Instant::now() + ACQUIRE_TIMEOUT;
        let permit = tokio::time::timeout_at(deadline, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| format!("no free connection: all {POOL_SIZE} are in use"))?
            .map_err(|e| e.to_string())?;
        let _connecting = tokio::time::timeout_at(deadline, self.connecting.acquire())
            .await
            .map_err(|_| "timed out waiting to connect".to_string())?
            .map_err(|e| e.to_string())?;
        if let Some(session) = self.take_idle() {
            return Ok(session);
        }
        let client =
            tokio::time::timeout(CONNECT_TIMEOUT, connect(&self.config, self.tls.as_ref()))
                .await
                .map_err(|_| "timed out connecting".to_string())??;
        Ok(PgSession {
            client,
            statements: HashMap::new(),
            used: false,
            _slot: permit,
        })
    }

    /// Waits (briefly) for a connection being reset, when there is one.
    async fn after_a_reset(&self) -> Option<PgSession> {
        let reset = self.reset_done.notified();
        tokio::pin!(reset);
        // Registered before the count is read, so a reset finishing in between is seen.
        reset.as_mut().enable();
        if self.resetting.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let _ = tokio::time::timeout(RESET_WAIT, reset).await;
        self.take_idle()
    }

    /// Takes a connection back: at once if unused, else after the reset (in the
    /// background, so the guest does not wait for it).
    fn release(self: &Arc<Self>, mut session: PgSession) {
        if session.client.is_closed() {
            return;
        }
        if !session.used {
            self.keep_idle(session);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime to reset it on: close it
        };
        let pool = self.clone();
        self.resetting.fetch_add(1, Ordering::SeqCst);
        runtime.spawn(async move {
            match session.client.batch_execute(RESET).await {
                Ok(()) => {
                    session.used = false;
                    pool.keep_idle(session);
                }
                // Closed instead of reused (e.g. its transaction had failed).
                Err(e) => eprintln!("edgehost: resetting a PostgreSQL connection failed: {e}"),
            }
            pool.resetting.fetch_sub(1, Ordering::SeqCst);
            pool.reset_done.notify_waiters();
        });
    }

    fn keep_idle(&self, session: PgSession) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(session);
        }
    }
}

/// One real connection, with the statements prepared on it.
struct PgSession {
    client: Client,
    statements: HashMap<String, Statement>,
    /// A guest ran something on it since it was last reset.
    used: bool,
    _slot: OwnedSemaphorePermit,
}

impl PgSession {
    async fn prepared(&mut self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let statement = self.client.prepare(sql).await?;
        if self.statements.len() >= MAX_CACHED_STATEMENTS {
            self.statements.clear();
        }
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    /// Prepares (or reuses) `sql` and runs it (as a query when `rows`). A prepared
    /// statement the server no longer accepts (dropped, or its plan outdated by a schema
    /// change) is prepared again and run once more, unless that happened inside a
    /// transaction (which the error aborted): then the guest gets the error.
    async fn run(
        &mut self,
        sql: &str,
        params: &[values::Param],
        rows: bool,
    ) -> Result<Outcome, tokio_postgres::Error> {
        self.used = true;
        let refs = param_refs(params);
        let statement = self.prepared(sql).await?;
        let first = match self.run_prepared(&statement, &refs, rows).await {
            Err(e) if is_stale_statement(&e) => e,
            done => return done,
        };
        self.statements.clear();
        let statement = self.prepared(sql).await?;
        match self.run_prepared(&statement, &refs, rows).await {
            Err(e) if e.code() == Some(&SqlState::IN_FAILED_SQL_TRANSACTION) => Err(first),
            done => done,
        }
    }

    async fn run_prepared(
        &self,
        statement: &Statement,
        refs: &[&(dyn ToSql + Sync)],
        rows: bool,
    ) -> Result<Outcome, tokio_postgres::Error> {
        if rows {
            let stream = self
                .client
                .query_raw(statement, refs.iter().copied())
                .await?;
            Ok(Outcome::Rows(stream))
        } else {
            Ok(Outcome::Count(self.client.execute(statement, refs).await?))
        }
    }

    async fn execute(&mut self, sql: &str, params: &[values::Param]) -> Result<u64, v4::Error> {
        match self.run(sql, params, false).await.map_err(query_failed)? {
            Outcome::Count(n) => Ok(n),
            Outcome::Rows(_) => Err(v4::Error::Other("internal error: rows from execute".into())),
        }
    }

    async fn query(
        &mut self,
        sql: &str,
        params: &[values::Param],
    ) -> Result<v4::RowSet, v4::Error> {
        let rows = match self.run(sql, params, true).await.map_err(query_failed)? {
            Outcome::Rows(rows) => rows,
            Outcome::Count(_) => {
                return Err(v4::Error::Other(
                    "internal error: no rows from query".into(),
                ));
            }
        };
        let mut rows = std::pin::pin!(rows);
        let mut columns = Vec::new();
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while let Some(row) = rows.try_next().await.map_err(query_failed)? {
            if out.is_empty() {
                columns = row
                    .columns()
                    .iter()
                    .map(|c| v4::Column {
                        name: c.name().to_string(),
                        data_type: values::data_type(c.type_()),
                    })
                    .collect();
            }
            let mut converted = Vec::with_capacity(row.len());
            for i in 0..row.len() {
                let value = values::db_value(&row, i)
                    .map_err(|e| v4::Error::QueryFailed(v4::QueryError::Text(format!("{e:?}"))))?;
                bytes += values::size_of(&value);
                converted.push(value);
            }
            if bytes > MAX_RESULT_BYTES {
                return Err(v4::Error::QueryFailed(v4::QueryError::Text(format!(
                    "query result exceeds limit of {MAX_RESULT_BYTES} bytes"
                ))));
            }
            out.push(converted);
        }
        if out.is_empty() {
            // Spin 4.0.0 to 4.0.2 never answer such a query (the guest waits until its
            // deadline); Spin 3.x answers no rows. Failing here shows a guest that relies
            // on either, in every test run, instead of in production.
            return Err(v4::Error::Other(NO_ROWS.into()));
        }
        Ok(v4::RowSet { columns, rows: out })
    }
}

/// What a `query` that returns no rows answers (see `PgSession::query`).
pub const NO_ROWS: &str = "the query returned no rows: Spin 4.0.0 to 4.0.2 never answer such \
     a query (spinframework/spin#3671), so edgehost refuses it; write the statement so that \
     it always answers a row";

/// What running a statement gave.
enum Outcome {
    Count(u64),
    Rows(tokio_postgres::RowStream),
}

fn param_refs(params: &[values::Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// The server no longer has the prepared statement, or cannot run its cached plan.
fn is_stale_statement(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        Some(db) if *db.code() == SqlState::INVALID_SQL_STATEMENT_NAME => true,
        Some(db) if *db.code() == SqlState::FEATURE_NOT_SUPPORTED => {
            db.message().contains("cached plan")
        }
        _ => false,
    }
}

/// A tokio-postgres error as Spin reports it.
fn query_failed(e: tokio_postgres::Error) -> v4::Error {
    let as_text = format!("{e:?}");
    v4::Error::QueryFailed(match e.as_db_error() {
        None => v4::QueryError::Text(as_text),
        Some(db) => {
            let mut extras = Vec::new();
            let mut extra = |name: &str, value: Option<String>| {
                if let Some(v) = value {
                    extras.push((name.to_string(), v));
                }
            };
            extra("column", db.column().map(str::to_string));
            extra("constraint", db.constraint().map(str::to_string));
            extra("routine", db.routine().map(str::to_string));
            extra("hint", db.hint().map(str::to_string));
            extra("table", db.table().map(str::to_string));
            extra("datatype", db.datatype().map(str::to_string));
            extra("schema", db.schema().map(str::to_string));
            extra("file", db.file().map(str::to_string));
            extra("line", db.line().map(|l| l.to_string()));
            extra("where_", db.where_().map(str::to_string));
            v4::QueryError::DbError(v4::DbError {
                as_text,
                severity: db.severity().to_string(),
                code: db.code().code().to_string(),
                message: db.message().to_string(),
                detail: db.detail().map(str::to_string),
                extras,
            })
        }
    })
}

/// Checks every host an address names against the allowed hosts, as Spin does; answers
/// the refusal message.
fn check_address(config: &Config, allowed: &AllowedHosts) -> Result<(), String> {
    let ports = config.get_ports();
    // The port at the host's index, or the only port given; none means the default.
    let port_for = |i: usize| {
        ports
            .get(i)
            .or(if ports.len() == 1 {
                ports.first()
            } else {
                None
            })
            .copied()
    };
    let refuse = |host: &str, port: Option<u16>| {
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        format!("address postgres://{host}{port} is not permitted")
    };
    for (i, host) in config.get_hosts().iter().enumerate() {
        match host {
            Host::Tcp(name) => {
                if !allowed.allows("postgres", name, port_for(i)) {
                    return Err(refuse(name, port_for(i)));
                }
            }
            #[cfg(unix)]
            Host::Unix(_) => return Err("Unix sockets are not supported on WebAssembly".into()),
        }
    }
    for (i, addr) in config.get_hostaddrs().iter().enumerate() {
        let addr = addr.to_string();
        if !allowed.allows("postgres", &addr, port_for(i)) {
            return Err(refuse(&addr, port_for(i)));
        }
    }
    Ok(())
}

/// What a guest's `connection` handle names (both interface versions).
pub struct PgConn {
    pool: Arc<PgPool>,
    session: Option<PgSession>,
}

impl Drop for PgConn {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            self.pool.release(session);
        }
    }
}

/// The connections one instance has open, by handle (both interface versions).
pub type OpenConnections = Handles<PgConn>;

/// A new instance's (empty) table of open connections.
pub const fn open_connections() -> OpenConnections {
    Handles::new(MAX_OPEN_CONNECTIONS)
}

/// What the PostgreSQL interfaces see of one instance.
pub struct PgView<'a> {
    /// The component's id, for the log line of a refused address.
    pub component: &'a str,
    /// The component's `allowed_outbound_hosts`.
    pub allowed_hosts: &'a AllowedHosts,
    pub pools: &'a PgPools,
    pub open: &'a mut OpenConnections,
}

struct Postgres;

impl HasData for Postgres {
    type Data<'a> = PgView<'a>;
}

/// Links `spin:postgres/postgres@4.0.0` and `@3.0.0`, with `view` to find an instance's
/// part.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> PgView<'_>,
) -> wasmtime::Result<()> {
    v4::add_to_linker::<T, Postgres>(linker, view)?;
    v3::add_to_linker::<T, Postgres>(linker, view)
}

impl PgView<'_> {
    async fn connect<R: 'static>(
        &mut self,
        address: String,
    ) -> wasmtime::Result<Result<Resource<R>, v4::Error>> {
        let failed = |m: String| Ok(Err(v4::Error::ConnectionFailed(m)));
        let config = match address.parse::<Config>() {
            Ok(c) => c,
            Err(e) => return failed(e.to_string()),
        };
        if let Err(refusal) = check_address(&config, self.allowed_hosts) {
            eprintln!(
                "edgehost: component `{}`: PostgreSQL {refusal} by its allowed_outbound_hosts",
                self.component
            );
            return failed(refusal);
        }
        if self.open.is_full() {
            return failed("too many connections".into());
        }
        let pool = match self.pools.pool(&address, config) {
            Ok(pool) => pool,
            Err(e) => return failed(e),
        };
        let session = match pool.acquire().await {
            Ok(s) => s,
            Err(e) => return failed(e),
        };
        let conn = PgConn {
            pool,
            session: Some(session),
        };
        match self.open.push(conn) {
            Ok(handle) => Ok(Ok(handle)),
            Err(_) => failed("too many connections".into()),
        }
    }

    /// Takes the connection's session out for a call, with the call's parameters
    /// converted; [`PgView::end_call`] puts the session back.
    fn begin_call<R: 'static>(
        &mut self,
        conn: &Resource<R>,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<(PgSession, Vec<values::Param>), v4::Error>> {
        let params = match params
            .into_iter()
            .map(values::param)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(p) => p,
            Err(e) => return Ok(Err(v4::Error::BadParameter(e))),
        };
        match self.open.get_mut(conn)?.session.take() {
            Some(session) => Ok(Ok((session, params))),
            None => Ok(Err(v4::Error::ConnectionFailed(
                "no connection found".into(),
            ))),
        }
    }

    fn end_call<R: 'static>(
        &mut self,
        conn: &Resource<R>,
        session: PgSession,
    ) -> wasmtime::Result<()> {
        self.open.get_mut(conn)?.session = Some(session);
        Ok(())
    }

    async fn execute<R: 'static>(
        &mut self,
        conn: &Resource<R>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, v4::Error>> {
        let (mut session, params) = match self.begin_call(conn, params)? {
            Ok(call) => call,
            Err(e) => return Ok(Err(e)),
        };
        let result = session.execute(&statement, &params).await;
        self.end_call(conn, session)?;
        Ok(result)
    }

    async fn query<R: 'static>(
        &mut self,
        conn: &Resource<R>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<v4::RowSet, v4::Error>> {
        let (mut session, params) = match self.begin_call(conn, params)? {
            Ok(call) => call,
            Err(e) => return Ok(Err(e)),
        };
        let result = session.query(&statement, &params).await;
        self.end_call(conn, session)?;
        Ok(result)
    }
}

impl v4::Host for PgView<'_> {}

impl v4::HostConnection for PgView<'_> {
    async fn open(
        &mut self,
        address: String,
    ) -> wasmtime::Result<Result<Resource<v4::Connection>, v4::Error>> {
        self.connect(address).await
    }

    async fn query(
        &mut self,
        conn: Resource<v4::Connection>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<v4::RowSet, v4::Error>> {
        PgView::query(self, &conn, statement, params).await
    }

    async fn execute(
        &mut self,
        conn: Resource<v4::Connection>,
        statement: String,
        params: Vec<v4::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, v4::Error>> {
        PgView::execute(self, &conn, statement, params).await
    }

    async fn drop(&mut self, conn: Resource<v4::Connection>) -> wasmtime::Result<()> {
        self.open.remove(conn)?;
        Ok(())
    }
}

impl v3::Host for PgView<'_> {}

impl v3::HostConnection for PgView<'_> {
    async fn open(
        &mut self,
        address: String,
    ) -> wasmtime::Result<Result<Resource<v3::Connection>, v3::Error>> {
        Ok(self.connect(address).await?.map_err(Into::into))
    }

    async fn query(
        &mut self,
        conn: Resource<v3::Connection>,
        statement: String,
        params: Vec<v3::ParameterValue>,
    ) -> wasmtime::Result<Result<v3::RowSet, v3::Error>> {
        let params = params.into_iter().map(Into::into).collect();
        Ok(PgView::query(self, &conn, statement, params)
            .await?
            .map(Into::into)
            .map_err(Into::into))
    }

    async fn execute(
        &mut self,
        conn: Resource<v3::Connection>,
        statement: String,
        params: Vec<v3::ParameterValue>,
    ) -> wasmtime::Result<Result<u64, v3::Error>> {
        let params = params.into_iter().map(Into::into).collect();
        Ok(PgView::execute(self, &conn, statement, params)
            .await?
            .map_err(Into::into))
    }

    async fn drop(&mut self, conn: Resource<v3::Connection>) -> wasmtime::Result<()> {
        self.open.remove(conn)?;
        Ok(())
    }
}

// spin:postgres@3.0.0 is @4.0.0 with fewer types: what @3 cannot carry becomes
// `unsupported` / `other`, as in Spin.

impl From<v3::ParameterValue> for v4::ParameterValue {
    fn from(v: v3::ParameterValue) -> v4::ParameterValue {
        use v3::ParameterValue as P3;
        use v4::ParameterValue as P4;
        match v {
            P3::Boolean(v) => P4::Boolean(v),
            P3::Int8(v) => P4::Int8(v),
            P3::Int16(v) => P4::Int16(v),
            P3::Int32(v) => P4::Int32(v),
            P3::Int64(v) => P4::Int64(v),
            P3::Floating32(v) => P4::Floating32(v),
            P3::Floating64(v) => P4::Floating64(v),
            P3::Str(v) => P4::Str(v),
            P3::Binary(v) => P4::Binary(v),
            P3::Date(v) => P4::Date(v),
            P3::Time(v) => P4::Time(v),
            P3::Datetime(v) => P4::Datetime(v),
            P3::Timestamp(v) => P4::Timestamp(v),
            P3::DbNull => P4::DbNull,
        }
    }
}

impl From<v4::DbValue> for v3::DbValue {
    fn from(v: v4::DbValue) -> v3::DbValue {
        use v3::DbValue as D3;
        use v4::DbValue as D4;
        match v {
            D4::Boolean(v) => D3::Boolean(v),
            D4::Int8(v) => D3::Int8(v),
            D4::Int16(v) => D3::Int16(v),
            D4::Int32(v) => D3::Int32(v),
            D4::Int64(v) => D3::Int64(v),
            D4::Floating32(v) => D3::Floating32(v),
            D4::Floating64(v) => D3::Floating64(v),
            D4::Str(v) => D3::Str(v),
            D4::Binary(v) => D3::Binary(v),
            D4::Date(v) => D3::Date(v),
            D4::Time(v) => D3::Time(v),
            D4::Datetime(v) => D3::Datetime(v),
            D4::Timestamp(v) => D3::Timestamp(v),
            D4::DbNull => D3::DbNull,
            _ => D3::Unsupported,
        }
    }
}

impl From<v4::DbDataType> for v3::DbDataType {
    fn from(t: v4::DbDataType) -> v3::DbDataType {
        use v3::DbDataType as T3;
        use v4::DbDataType as T4;
        match t {
            T4::Boolean => T3::Boolean,
            T4::Int8 => T3::Int8,
            T4::Int16 => T3::Int16,
            T4::Int32 => T3::Int32,
            T4::Int64 => T3::Int64,
            T4::Floating32 => T3::Floating32,
            T4::Floating64 => T3::Floating64,
            T4::Str => T3::Str,
            T4::Binary => T3::Binary,
            T4::Date => T3::Date,
            T4::Time => T3::Time,
            T4::Datetime => T3::Datetime,
            T4::Timestamp => T3::Timestamp,
            _ => T3::Other,
        }
    }
}

impl From<v4::RowSet> for v3::RowSet {
    fn from(r: v4::RowSet) -> v3::RowSet {
        v3::RowSet {
            columns: r
                .columns
                .into_iter()
                .map(|c| v3::Column {
                    name: c.name,
                    data_type: c.data_type.into(),
                })
                .collect(),
            rows: r
                .rows
                .into_iter()
                .map(|row| row.into_iter().map(Into::into).collect())
                .collect(),
        }
    }
}

impl From<v4::Error> for v3::Error {
    fn from(e: v4::Error) -> v3::Error {
        match e {
            v4::Error::ConnectionFailed(m) => v3::Error::ConnectionFailed(m),
            v4::Error::BadParameter(m) => v3::Error::BadParameter(m),
            v4::Error::QueryFailed(v4::QueryError::Text(m)) => v3::Error::QueryFailed(m),
            v4::Error::QueryFailed(v4::QueryError::DbError(db)) => {
                v3::Error::QueryFailed(db.as_text)
            }
            v4::Error::ValueConversionFailed(m) => v3::Error::ValueConversionFailed(m),
            v4::Error::Other(m) => v3::Error::Other(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str]) -> AllowedHosts {
        let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        AllowedHosts::parse(&entries, &Default::default()).unwrap()
    }

    fn check(address: &str, entries: &[&str]) -> Result<(), String> {
        check_address(&address.parse().unwrap(), &allowed(entries))
    }

    #[test]
    fn addresses_are_checked_like_spin() {
        let db = &["postgres://db.example.com:5432"];
        assert_eq!(check("postgres://u:p@db.example.com/app", db), Ok(()));
        assert_eq!(check("postgres://db.example.com:5432/app", db), Ok(()));
        assert_eq!(check("host=db.example.com dbname=app user=u", db), Ok(()));
        assert_eq!(
            check("postgres://db.example.com:6543/app", db),
            Err("address postgres://db.example.com:6543 is not permitted".into())
        );
        assert_eq!(
            check("postgres://other.example.com/app", db),
            Err("address postgres://other.example.com:5432 is not permitted".into())
        );
        // Every host of a multi-host address, each with its own port.
        let two = &["postgres://a.example.com:1", "postgres://b.example.com:2"];
        assert_eq!(
            check("host=a.example.com,b.example.com port=1,2", two),
            Ok(())
        );
        assert!(check("host=a.example.com,b.example.com port=1,3", two).is_err());
        assert!(check("host=/var/run/postgresql dbname=x", &["*://*:*"]).is_err());
        // `hostaddr` is where tokio-postgres connects, so it is checked too.
        assert!(check("host=db.example.com hostaddr=10.0.0.5 dbname=x", db).is_err());
        assert_eq!(
            check(
                "host=db.example.com hostaddr=127.0.0.1",
                &["postgres://db.example.com", "postgres://127.0.0.1"]
            ),
            Ok(())
        );
        // The scheme must be postgres (or `*`).
        assert!(
            check(
                "postgres://db.example.com/app",
                &["mysql://db.example.com:5432"]
            )
            .is_err()
        );
        assert_eq!(
            check("postgres://127.0.0.1:9/x", &["*://127.0.0.1:*"]),
            Ok(())
        );
    }
}
