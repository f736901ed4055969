//! `fermyon:spin/sqlite@2.0.0` and `spin:sqlite/sqlite@3.0.0` over embedded SQLite files,
//! plus the start-up migrations of `sql/`.
//!
//! Each database has one writer connection and a pool of reader connections (WAL mode, so
//! readers never wait for the writer):
//!
//! - A statement outside a transaction that only reads (SQLite's `sqlite3_stmt_readonly`)
//!   runs on a reader. Any other statement waits its turn for the writer (a FIFO queue, not
//!   SQLite's busy-wait loop) and runs there, in its own implicit transaction.
//! - A guest's `BEGIN` (deferred, as guests send it) takes the writer for the whole
//!   transaction and runs as `BEGIN IMMEDIATE`; every statement of the transaction runs on
//!   the writer until it ends (`COMMIT`, `ROLLBACK`, or an error that rolls it back). So
//!   writers never fail with `SQLITE_BUSY` against each other, and nobody holds the write
//!   lock across a guest's awaits except inside that guest's own transaction.
//! - A guest that goes away mid-transaction (a trap, a dropped connection) has its
//!   transaction rolled back before the writer passes on.
//! - A transaction that wrote is answered once the WAL is on disk: the writer runs with
//!   `synchronous = NORMAL` and edgehost syncs the WAL for many commits at once and runs
//!   the checkpoints beside the writer (`sqlite/group_commit.rs`), so the writer never
//!   waits for the disk.
//! - Statements run in place on the async worker that runs the guest (reads and writes of
//!   the local file are short), not on the blocking pool.
//!
//! `last_insert_rowid` and `changes` are kept per guest connection, as if it had its own.
//! Connection-level state (a `PRAGMA` setting, a `TEMP` table) persists only within a
//! transaction: outside one, consecutive statements may run on different connections.

mod group_commit;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rusqlite::Connection;
use rusqlite::types::{Value as SqlValue, ValueRef};
use sha2::{Digest, Sha256};
use tokio::sync::OwnedMutexGuard;
use wasmtime::component::{HasData, Linker, Resource};

use crate::bindings::fermyon::spin::sqlite as v2;
use crate::bindings::spin::sqlite::sqlite as v3;
use crate::handles::Handles;

/// How many connections one instance may hold open at once (Spin's default capacity).
pub const MAX_OPEN_CONNECTIONS: usize = 256;
/// Idle reader connections kept per database.
const MAX_IDLE_READERS: usize = 8;
/// Largest query result handed to a guest.
const MAX_RESULT_BYTES: usize = 128 * 1024 * 1024;
/// How long a statement waits for a lock: SQLite's busy timeout (another process holding
/// the file), and the wait for this process's writer (after which the guest sees
/// SQLite's own "database is locked").
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Most lease timings kept while recording (about 30 MB).
const MAX_LEASE_TIMINGS: usize = 500_000;

/// The databases the host knows, by label.
#[derive(Default)]
pub struct Databases {
    dbs: HashMap<String, Arc<DbPool>>,
    timings: WriterTimings,
}

/// How one use of a database's writer went: how long the guest waited for it, how long
/// it held it, how much of that SQLite itself spent running statements (the rest is the
/// guest's own work between its statements).
#[derive(Debug, Clone, Copy)]
pub struct LeaseTiming {
    pub waited: Duration,
    pub held: Duration,
    pub in_sqlite: Duration,
    pub statements: u32,
}

/// What [`WriterTimings`] recorded: every writer lease, and for every commit how long
/// its guest then waited for the WAL sync that made it durable (see `group_commit.rs`).
#[derive(Debug, Clone, Default)]
pub struct WriterRecord {
    pub leases: Vec<LeaseTiming>,
    pub durable_waits: Vec<Duration>,
}

/// The writer leases of every database, recorded between [`WriterTimings::start`] and
/// [`WriterTimings::take`]: benchmarks read them to say where a write's time goes. Off
/// by default.
#[derive(Clone, Default)]
pub struct WriterTimings(Arc<Mutex<Option<WriterRecord>>>);

impl WriterTimings {
    /// Starts recording (again, from nothing).
    pub fn start(&self) {
        if let Ok(mut recorded) = self.0.lock() {
            *recorded = Some(WriterRecord::default());
        }
    }

    /// Stops recording; answers what was recorded.
    pub fn take(&self) -> WriterRecord {
        self.0
            .lock()
            .ok()
            .and_then(|mut recorded| recorded.take())
            .unwrap_or_default()
    }

    fn record_durable_wait(&self, waited: Duration) {
        if let Ok(mut recorded) = self.0.lock()
            && let Some(record) = recorded.as_mut()
            && record.durable_waits.len() < MAX_LEASE_TIMINGS
        {
            record.durable_waits.push(waited);
        }
    }

    fn record(&self, timing: LeaseTiming) {
        if let Ok(mut recorded) = self.0.lock()
            && let Some(record) = recorded.as_mut()
            && record.leases.len() < MAX_LEASE_TIMINGS
        {
            record.leases.push(timing);
        }
    }
}

impl Databases {
    /// Opens "default" at `default_path` (unless runtime config places it) plus the
    /// runtime-config databases.
    pub fn open(default_path: &Path, extra: &[(String, PathBuf)]) -> Result<Databases> {
        let timings = WriterTimings::default();
        let mut dbs = HashMap::new();
        if !extra.iter().any(|(label, _)| label == "default") {
            dbs.insert(
                "default".to_string(),
                DbPool::open("default", default_path, &timings)?,
            );
        }
        for (label, path) in extra {
            dbs.insert(label.clone(), DbPool::open(label, path, &timings)?);
        }
        Ok(Databases { dbs, timings })
    }

    /// The timings of every database's writer leases.
    pub fn writer_timings(&self) -> WriterTimings {
        self.timings.clone()
    }

    pub fn get(&self, label: &str) -> Option<&Arc<DbPool>> {
        self.dbs.get(label)
    }

    pub fn contains(&self, label: &str) -> bool {
        self.dbs.contains_key(label)
    }
}

/// A database file: its writer connection and its idle reader connections.
pub struct DbPool {
    label: String,
    path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    /// tokio's mutex queues waiters in order, so writers are served first come, first served.
    writer: Arc<tokio::sync::Mutex<Connection>>,
    /// Syncs the writer's commits to disk (`group_commit.rs`).
    group_commit: Arc<group_commit::GroupCommit>,
    timings: WriterTimings,
}

impl DbPool {
    fn open(label: &str, path: &Path, timings: &WriterTimings) -> Result<Arc<DbPool>> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let writer = connect(path).with_context(|| {
            format!(
                "cannot open SQLite database `{label}` at {}",
                path.display()
            )
        })?;
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        Ok(Arc::new(DbPool {
            label: label.to_string(),
            path: path.to_path_buf(),
            readers: Mutex::new(Vec::new()),
            group_commit: Arc::new(group_commit::GroupCommit::new(path, writer.clone())),
            writer,
            timings: timings.clone(),
        }))
    }

    /// A reader connection (idle or new); it returns to the pool when dropped.
    pub fn reader(self: &Arc<Self>) -> rusqlite::Result<ReaderConn> {
        let idle = self.readers.lock().ok().and_then(|mut v| v.pop());
        let conn = match idle {
            Some(c) => c,
            None => connect(&self.path)?,
        };
        Ok(ReaderConn {
            pool: self.clone(),
            conn: Some(conn),
        })
    }

    /// The writer, once every earlier waiter has had it.
    async fn writer(&self) -> Result<WriterLease, String> {
        let asked = Instant::now();
        match tokio::time::timeout(BUSY_TIMEOUT, self.writer.clone().lock_owned()).await {
            Ok(guard) => Ok(WriterLease::new(guard, &self.timings, asked)),
            Err(_) => Err("database is locked".to_string()),
        }
    }

    /// The writer if nobody holds it (start-up work such as migrations).
    fn try_writer(&self) -> Result<WriterLease> {
        match self.writer.clone().try_lock_owned() {
            Ok(guard) => Ok(WriterLease::new(guard, &self.timings, Instant::now())),
            Err(_) => bail!("the writer of database `{}` is busy", self.label),
        }
    }
}

/// Opens a connection to `path`: the one place edgehost opens SQLite databases for guests,
/// so every guest connection carries the SQL guard (`sql_guard.rs`).
fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // WAL: readers do not block the writer, nor the writer the readers.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // Commits reach the disk through the writer's group commit, which syncs the WAL and
    // runs the checkpoints.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    crate::sql_guard::restrict_guest_sql(&conn)?;
    Ok(conn)
}

/// A pooled reader connection.
pub struct ReaderConn {
    pool: Arc<DbPool>,
    conn: Option<Connection>,
}

impl std::ops::Deref for ReaderConn {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until dropped")
    }
}

impl Drop for ReaderConn {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if !conn.is_autocommit() && conn.execute_batch("ROLLBACK").is_err() {
            return; // do not pool a connection in an unknown state
        }
        if let Ok(mut idle) = self.pool.readers.lock()
            && idle.len() < MAX_IDLE_READERS
        {
            idle.push(conn);
        }
    }
}

/// Exclusive use of a database's writer connection. Dropping it rolls back a transaction
/// left open, then lets the next waiter in.
pub struct WriterLease {
    conn: OwnedMutexGuard<Connection>,
    timings: WriterTimings,
    asked: Instant,
    acquired: Instant,
    in_sqlite: Duration,
    statements: u32,
    /// Whether a statement of this lease changed the database.
    wrote: bool,
}

impl WriterLease {
    fn new(conn: OwnedMutexGuard<Connection>, timings: &WriterTimings, asked: Instant) -> Self {
        WriterLease {
            conn,
            timings: timings.clone(),
            asked,
            acquired: Instant::now(),
            in_sqlite: Duration::ZERO,
            statements: 0,
            wrote: false,
        }
    }

    /// Runs one statement on the writer, timing it.
    fn run(&mut self, sql: &str, params: Vec<SqlValue>) -> Ran {
        let started = Instant::now();
        let ran = run_query(&self.conn, sql, params, false);
        self.in_sqlite += started.elapsed();
        self.statements += 1;
        self.wrote |= matches!(ran, Ran::Done(Ok((_, false))));
        ran
    }
}

impl std::ops::Deref for WriterLease {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl Drop for WriterLease {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.timings.record(LeaseTiming {
            waited: self.acquired - self.asked,
            held: self.acquired.elapsed(),
            in_sqlite: self.in_sqlite,
            statements: self.statements,
        });
    }
}

/// What a guest's `connection` handle names (both interface versions).
pub struct SqliteConn {
    pool: Arc<DbPool>,
    session: Session,
}

/// What a guest connection carries between calls.
#[derive(Default)]
struct Session {
    /// Held from a `BEGIN` until the transaction ends.
    writer: Option<WriterLease>,
    /// This connection's own `last_insert_rowid()` and `changes()`.
    last_insert_rowid: i64,
    changes: u64,
}

/// Where a statement runs, judged from its text before it is prepared.
#[derive(Debug, PartialEq)]
enum Route {
    /// Starts a transaction: runs on the writer, which it keeps. The string is the
    /// statement to run (a deferred `BEGIN` becomes `BEGIN IMMEDIATE`).
    Begin(String),
    /// Changes the database: runs on the writer.
    Write,
    /// Probably reads only: tried on a reader, moved to the writer if SQLite says it writes.
    Read,
}

/// The first `n` keywords of `sql`, upper-cased, skipping whitespace and comments; and
/// the text after them.
fn leading_keywords(sql: &str, n: usize) -> (Vec<String>, &str) {
    let mut words = Vec::new();
    let mut rest = sql;
    while words.len() < n {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
            continue;
        }
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
            continue;
        }
        let end = rest
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        words.push(rest[..end].to_ascii_uppercase());
        rest = &rest[end..];
    }
    (words, rest)
}

fn first_keyword(sql: &str) -> Option<String> {
    leading_keywords(sql, 1).0.into_iter().next()
}

fn route(sql: &str) -> Route {
    let (words, rest) = leading_keywords(sql, 4);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.first() {
        Some(&"BEGIN") => {
            let deferred = matches!(
                words.as_slice(),
                ["BEGIN"]
                    | ["BEGIN", "TRANSACTION"]
                    | ["BEGIN", "DEFERRED"]
                    | ["BEGIN", "DEFERRED", "TRANSACTION"]
            );
            if deferred && rest.trim().trim_end_matches(';').trim().is_empty() {
                Route::Begin("BEGIN IMMEDIATE".into())
            } else {
                Route::Begin(sql.to_string())
            }
        }
        Some(&"SAVEPOINT") => Route::Begin(sql.to_string()),
        Some(
            &("INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "CREATE" | "DROP" | "ALTER" | "REINDEX"
            | "VACUUM" | "ANALYZE"),
        ) => Route::Write,
        _ => Route::Read,
    }
}

/// Whether a statement sets SQLite's `changes()`: a top-level INSERT, UPDATE or DELETE.
fn counts_changes(sql: &str, readonly: bool) -> bool {
    !readonly
        && matches!(
            first_keyword(sql).as_deref(),
            Some("INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "WITH")
        )
}

/// Runs one guest statement: on a reader when it only reads and no transaction is open,
/// otherwise on the writer. Answers the session (to keep) and the result.
async fn run_statement(
    pool: Arc<DbPool>,
    mut session: Session,
    sql: String,
    params: Vec<SqlValue>,
) -> (Session, Result<QueryOutput, String>) {
    let in_transaction = session.writer.is_some();
    let (sql, params) = match (in_transaction, route(&sql)) {
        (true, _) => (sql, params),
        (false, Route::Begin(statement)) => (statement, params),
        (false, Route::Write) => (sql, params),
        (false, Route::Read) => {
            let reader_pool = pool.clone();
            let read = move || {
                let conn = match reader_pool.reader() {
                    Ok(c) => c,
                    Err(e) => return ReadOutcome::Answered(Err(e.to_string())),
                };
                match run_query(&conn, &sql, params, true) {
                    Ran::Done(result) => ReadOutcome::Answered(result.map(|(out, _)| out)),
                    Ran::Writes(params) => ReadOutcome::NeedsWriter(sql, params),
                }
            };
            // In place, like the writer's statements: a read of the local file is short,
            // and a hop to the blocking pool and back cost more than the read itself
            // (BENCHMARKS.md: token mints, which only read).
            match read() {
                ReadOutcome::NeedsWriter(sql, params) => (sql, params),
                ReadOutcome::Answered(result) => return (session, result),
            }
        }
    };
    let mut lease = match session.writer.take() {
        Some(lease) => lease,
        None => match pool.writer().await {
            Ok(lease) => lease,
            Err(e) => return (session, Err(e)),
        },
    };
    let step = move || {
        // This guest's own last_insert_rowid, as if the connection were its alone.
        // SAFETY: the handle belongs to the connection we hold exclusively here.
        unsafe {
            rusqlite::ffi::sqlite3_set_last_insert_rowid(lease.handle(), session.last_insert_rowid)
        };
        let result = match lease.run(&sql, params) {
            Ran::Done(result) => result,
            Ran::Writes(_) => Err("internal error: statement refused on the writer".into()),
        };
        if let Ok((_, readonly)) = &result {
            session.last_insert_rowid = lease.last_insert_rowid();
            if counts_changes(&sql, *readonly) {
                session.changes = lease.changes();
            }
        }
        // A finished transaction that wrote takes its place in the commit order before the
        // writer passes on.
        let commit = (lease.is_autocommit() && lease.wrote).then(|| pool.group_commit.committed());
        if !lease.is_autocommit() {
            session.writer = Some(lease);
        }
        (session, result.map(|(out, _)| out), pool, commit)
    };
    // Run in place, not on the blocking pool: the statement is short (no sync waits in it,
    // see `group_commit.rs`), and a hop to another thread and back would lengthen the
    // time the writer is held by a scheduling delay on a busy machine.
    match step() {
        (session, Ok(out), pool, Some(commit)) => {
            let asked = Instant::now();
            let durable = pool.group_commit.durable(commit).await;
            pool.timings.record_durable_wait(asked.elapsed());
            (session, durable.map(|()| out))
        }
        (session, result, _, _) => (session, result),
    }
}

impl SqliteConn {
    fn new(pool: Arc<DbPool>) -> SqliteConn {
        SqliteConn {
            pool,
            session: Session::default(),
        }
    }
}

struct QueryOutput {
    columns: Vec<String>,
    rows: Vec<Vec<SqlValue>>,
}

/// What running a statement on one connection gave.
enum Ran {
    /// The statement ran (or failed); with whether it was read-only.
    Done(Result<(QueryOutput, bool), String>),
    /// Only reads were allowed and the statement writes: it did not run.
    Writes(Vec<SqlValue>),
}

/// The outcome of trying a statement on a reader.
enum ReadOutcome {
    Answered(Result<QueryOutput, String>),
    NeedsWriter(String, Vec<SqlValue>),
}

fn run_query(conn: &Connection, sql: &str, params: Vec<SqlValue>, only_reads: bool) -> Ran {
    let mut stmt = match conn.prepare_cached(sql) {
        Ok(s) => s,
        Err(e) => return Ran::Done(Err(e.to_string())),
    };
    let readonly = stmt.readonly();
    if only_reads && !readonly {
        return Ran::Writes(params);
    }
    let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
    let result = collect_rows(&mut stmt, columns.len(), params)
        .map(|rows| (QueryOutput { columns, rows }, readonly));
    Ran::Done(result)
}

fn collect_rows(
    stmt: &mut rusqlite::CachedStatement<'_>,
    width: usize,
    params: Vec<SqlValue>,
) -> Result<Vec<Vec<SqlValue>>, String> {
    let mut rows_out = Vec::new();
    let mut bytes = 0usize;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(|e| e.to_string())?;
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            let v = match row.get_ref(i).map_err(|e| e.to_string())? {
                ValueRef::Null => SqlValue::Null,
                ValueRef::Integer(n) => SqlValue::Integer(n),
                ValueRef::Real(f) => SqlValue::Real(f),
                ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
            };
            bytes += match &v {
                SqlValue::Text(t) => t.len(),
                SqlValue::Blob(b) => b.len(),
                _ => 8,
            };
            values.push(v);
        }
        if bytes > MAX_RESULT_BYTES {
            return Err(format!(
                "query result exceeds limit of {MAX_RESULT_BYTES} bytes"
            ));
        }
        rows_out.push(values);
    }
    Ok(rows_out)
}

// The two interface versions have identical value and result shapes; convert both.
macro_rules! conversions {
    ($m:ident) => {
        impl From<$m::Value> for Param {
            fn from(v: $m::Value) -> Param {
                Param(match v {
                    $m::Value::Integer(n) => SqlValue::Integer(n),
                    $m::Value::Real(f) => SqlValue::Real(f),
                    $m::Value::Text(t) => SqlValue::Text(t),
                    $m::Value::Blob(b) => SqlValue::Blob(b),
                    $m::Value::Null => SqlValue::Null,
                })
            }
        }

        impl From<QueryOutput> for $m::QueryResult {
            fn from(out: QueryOutput) -> $m::QueryResult {
                $m::QueryResult {
                    columns: out.columns,
                    rows: out
                        .rows
                        .into_iter()
                        .map(|values| $m::RowResult {
                            values: values
                                .into_iter()
                                .map(|v| match v {
                                    SqlValue::Integer(n) => $m::Value::Integer(n),
                                    SqlValue::Real(f) => $m::Value::Real(f),
                                    SqlValue::Text(t) => $m::Value::Text(t),
                                    SqlValue::Blob(b) => $m::Value::Blob(b),
                                    SqlValue::Null => $m::Value::Null,
                                })
                                .collect(),
                        })
                        .collect(),
                }
            }
        }
    };
}

struct Param(SqlValue);
conversions!(v2);
conversions!(v3);

/// The connections one instance has open, by handle (both interface versions).
pub type OpenConnections = Handles<SqliteConn>;

/// A new instance's (empty) table of open connections, with Spin's capacity.
pub const fn open_connections() -> OpenConnections {
    Handles::new(MAX_OPEN_CONNECTIONS)
}

/// What the SQLite interfaces see of one instance.
pub struct SqliteView<'a> {
    /// The databases the component may open (its `sqlite_databases`).
    pub allowed: &'a HashSet<String>,
    pub databases: &'a Databases,
    pub open: &'a mut OpenConnections,
}

struct Sqlite;

impl HasData for Sqlite {
    type Data<'a> = SqliteView<'a>;
}

/// Links `fermyon:spin/sqlite@2.0.0` and `spin:sqlite/sqlite@3.0.0`, with `view` to find an
/// instance's part.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> SqliteView<'_>,
) -> wasmtime::Result<()> {
    v2::add_to_linker::<T, Sqlite>(linker, view)?;
    v3::add_to_linker::<T, Sqlite>(linker, view)
}

/// Why `open` failed, independent of the interface version.
enum OpenError {
    AccessDenied,
    NoSuchDatabase,
    TooMany,
}

impl SqliteView<'_> {
    fn open_database<R: 'static>(&mut self, database: &str) -> Result<Resource<R>, OpenError> {
        if !self.allowed.contains(database) {
            return Err(OpenError::AccessDenied);
        }
        let Some(pool) = self.databases.get(database).cloned() else {
            return Err(OpenError::NoSuchDatabase);
        };
        self.open
            .push(SqliteConn::new(pool))
            .map_err(|_| OpenError::TooMany)
    }

    async fn execute<R: 'static>(
        &mut self,
        conn: &Resource<R>,
        sql: String,
        params: Vec<SqlValue>,
    ) -> wasmtime::Result<Result<QueryOutput, String>> {
        let handle = self.open.get_mut(conn)?;
        let pool = handle.pool.clone();
        let session = std::mem::take(&mut handle.session);
        let (session, result) = run_statement(pool, session, sql, params).await;
        self.open.get_mut(conn)?.session = session;
        Ok(result)
    }
}

impl v2::Host for SqliteView<'_> {}

impl v2::HostConnection for SqliteView<'_> {
    async fn open(
        &mut self,
        database: String,
    ) -> wasmtime::Result<Result<Resource<v2::Connection>, v2::Error>> {
        Ok(self.open_database(&database).map_err(|e| match e {
            OpenError::AccessDenied => v2::Error::AccessDenied,
            OpenError::NoSuchDatabase => v2::Error::NoSuchDatabase,
            OpenError::TooMany => v2::Error::Io("too many connections opened".into()),
        }))
    }

    async fn execute(
        &mut self,
        conn: Resource<v2::Connection>,
        statement: String,
        parameters: Vec<v2::Value>,
    ) -> wasmtime::Result<Result<v2::QueryResult, v2::Error>> {
        let params = parameters.into_iter().map(|p| Param::from(p).0).collect();
        Ok(SqliteView::execute(self, &conn, statement, params)
            .await?
            .map(Into::into)
            .map_err(v2::Error::Io))
    }

    async fn drop(&mut self, conn: Resource<v2::Connection>) -> wasmtime::Result<()> {
        self.open.remove(conn)?;
        Ok(())
    }
}

impl v3::Host for SqliteView<'_> {}

impl v3::HostConnection for SqliteView<'_> {
    async fn open(
        &mut self,
        database: String,
    ) -> wasmtime::Result<Result<Resource<v3::Connection>, v3::Error>> {
        Ok(self.open_database(&database).map_err(|e| match e {
            OpenError::AccessDenied => v3::Error::AccessDenied,
            OpenError::NoSuchDatabase => v3::Error::NoSuchDatabase,
            OpenError::TooMany => v3::Error::Io("too many connections opened".into()),
        }))
    }

    async fn execute(
        &mut self,
        conn: Resource<v3::Connection>,
        statement: String,
        parameters: Vec<v3::Value>,
    ) -> wasmtime::Result<Result<v3::QueryResult, v3::Error>> {
        let params = parameters.into_iter().map(|p| Param::from(p).0).collect();
        Ok(SqliteView::execute(self, &conn, statement, params)
            .await?
            .map(Into::into)
            .map_err(v3::Error::Io))
    }

    async fn last_insert_rowid(&mut self, conn: Resource<v3::Connection>) -> wasmtime::Result<i64> {
        Ok(self.open.get(&conn)?.session.last_insert_rowid)
    }

    async fn changes(&mut self, conn: Resource<v3::Connection>) -> wasmtime::Result<u64> {
        Ok(self.open.get(&conn)?.session.changes)
    }

    async fn drop(&mut self, conn: Resource<v3::Connection>) -> wasmtime::Result<()> {
        self.open.remove(conn)?;
        Ok(())
    }
}

/// Name of the table recording applied migrations.
pub const MIGRATIONS_TABLE: &str = "_edgehost_migrations";

/// Applies each `*.sql` file of `dir` (sorted by name) once, recording it with its
/// SHA-256. Returns the names applied now. A missing `dir` means nothing to do.
pub fn apply_migrations(pool: &DbPool, dir: &Path) -> Result<Vec<String>> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sql") && p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    files.sort();
    let conn = pool.try_writer()?;
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (
            name TEXT PRIMARY KEY,
            checksum TEXT NOT NULL,
            applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
        )"
    ))?;
    let mut applied = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let sql = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read migration {}", path.display()))?;
        let checksum = hex::encode(Sha256::digest(sql.as_bytes()));
        let recorded: Option<String> = conn
            .query_row(
                &format!("SELECT checksum FROM {MIGRATIONS_TABLE} WHERE name = ?1"),
                [&name],
                |r| r.get(0),
            )
            .ok();
        if let Some(old) = recorded {
            if old != checksum {
                crate::warn(format_args!(
                    "migration {name} changed since it was applied to `{}`; not re-applied \
                     (add a new file instead)",
                    pool.label
                ));
            }
            continue;
        }
        run_migration(&conn, &name, &sql, &checksum)
            .with_context(|| format!("migration {} failed", path.display()))?;
        applied.push(name);
    }
    pool.group_commit
        .sync_blocking()
        .map_err(anyhow::Error::msg)?;
    Ok(applied)
}

fn run_migration(conn: &Connection, name: &str, sql: &str, checksum: &str) -> Result<()> {
    let record = format!("INSERT INTO {MIGRATIONS_TABLE} (name, checksum) VALUES (?1, ?2)");
    // Atomic when possible; a file that manages its own transaction runs as written.
    conn.execute_batch("BEGIN")?;
    match conn.execute_batch(sql) {
        Ok(()) => {
            conn.execute(&record, [name, checksum])?;
            conn.execute_batch("COMMIT")?;
            Ok(())
        }
        Err(e) if e.to_string().contains("within a transaction") => {
            conn.execute_batch("ROLLBACK")?;
            conn.execute_batch(sql)?;
            if !conn.is_autocommit() {
                conn.execute_batch("ROLLBACK")?;
                bail!("the file leaves a transaction open");
            }
            conn.execute(&record, [name, checksum])?;
            Ok(())
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_routed_by_their_leading_keyword() {
        let immediate = Route::Begin("BEGIN IMMEDIATE".into());
        for deferred in [
            "BEGIN",
            "begin;",
            "  Begin Transaction ",
            "BEGIN DEFERRED",
            "-- a comment\nBEGIN DEFERRED TRANSACTION;",
            "/* c */ begin",
        ] {
            assert_eq!(route(deferred), immediate, "{deferred:?}");
        }
        for as_written in [
            "BEGIN EXCLUSIVE",
            "BEGIN IMMEDIATE TRANSACTION",
            "SAVEPOINT a",
        ] {
            assert_eq!(route(as_written), Route::Begin(as_written.into()));
        }
        for write in [
            "INSERT INTO t VALUES (1)",
            " update t set x = 1",
            "DELETE FROM t",
            "create table x (y)",
            "/* hi */ DROP TABLE x",
        ] {
            assert_eq!(route(write), Route::Write, "{write:?}");
        }
        for read in [
            "SELECT 1",
            "WITH a AS (SELECT 1) SELECT * FROM a",
            "COMMIT",
            "PRAGMA user_version",
            "",
        ] {
            assert_eq!(route(read), Route::Read, "{read:?}");
        }
        assert!(counts_changes(
            "WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a",
            false
        ));
        assert!(counts_changes("insert into t values (1)", false));
        assert!(!counts_changes("CREATE TABLE t (x)", false));
        assert!(!counts_changes(
            "WITH a AS (SELECT 1) SELECT * FROM a",
            true
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_commits_are_synced_and_checkpointed_beside_the_writer() {
        let dir = std::env::temp_dir().join(format!("edgehost-commits-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("db.sqlite");
        let pool = DbPool::open("default", &file, &WriterTimings::default()).unwrap();
        let create = "CREATE TABLE t (n INTEGER)".to_string();
        let (_, created) = run_statement(pool.clone(), Session::default(), create, vec![]).await;
        created.unwrap();
        let inserts: Vec<_> = (0..600)
            .map(|n| {
                let pool = pool.clone();
                let sql = "INSERT INTO t VALUES (?)".to_string();
                tokio::spawn(async move {
                    run_statement(pool, Session::default(), sql, vec![SqlValue::Integer(n)])
                        .await
                        .1
                })
            })
            .collect();
        for insert in inserts {
            insert.await.unwrap().unwrap();
        }
        let (durable, syncs, _) = pool.group_commit.counts();
        assert_eq!(durable, 601, "every commit answered was synced");
        assert!(syncs <= 601, "{syncs} syncs");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pool.group_commit.counts().2 == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(pool.group_commit.counts().2 > 0, "no checkpoint ran");
        let other = Connection::open(&file).unwrap();
        let rows: i64 = other
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 600);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn migrations_apply_once_and_fail_clearly() {
        let dir = std::env::temp_dir().join(format!("edgehost-mig-{}", std::process::id()));
        let sql = dir.join("sql");
        std::fs::create_dir_all(&sql).unwrap();
        std::fs::write(
            sql.join("001_a.sql"),
            "CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);",
        )
        .unwrap();
        std::fs::write(
            sql.join("002_b.sql"),
            "BEGIN; CREATE TABLE b (y TEXT); COMMIT;",
        )
        .unwrap();
        let pool =
            DbPool::open("default", &dir.join("db.sqlite"), &WriterTimings::default()).unwrap();
        assert_eq!(
            apply_migrations(&pool, &sql).unwrap(),
            vec!["001_a.sql", "002_b.sql"]
        );
        assert!(apply_migrations(&pool, &sql).unwrap().is_empty());
        std::fs::write(sql.join("003_bad.sql"), "CREATE TABLE c (; ").unwrap();
        let err = format!("{:#}", apply_migrations(&pool, &sql).unwrap_err());
        assert!(err.contains("003_bad.sql"), "{err}");
        let c = pool.reader().unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM a", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        std::fs::remove_dir_all(&dir).ok();
    }
}
