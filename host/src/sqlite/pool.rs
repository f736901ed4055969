//! Each database's connections: one writer, leased in turn, and a pool of readers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rusqlite::Connection;
use tokio::sync::OwnedMutexGuard;

use super::batch::{Membership, Writer};
use super::group_commit::GroupCommit;

/// Idle reader connections kept per database.
const MAX_IDLE_READERS: usize = 8;
/// How long a statement waits for a lock: SQLite's busy timeout (another process holding
/// the file), and the wait for this process's writer (after which the guest sees
/// SQLite's own "database is locked").
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
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

/// What [`WriterTimings`] recorded: every writer lease, and for every transaction that
/// wrote how long its guest then waited for it to be on disk: its batch's commit
/// (`batch.rs`) and the WAL sync that covered it (`group_commit.rs`).
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

    pub(super) fn record_durable_wait(&self, waited: Duration) {
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
    pub(super) label: String,
    path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    /// tokio's mutex queues waiters in order, so writers are served first come, first served.
    writer: Arc<tokio::sync::Mutex<Writer>>,
    /// How many are queued for the writer: a batch stays open for them (`batch.rs`).
    waiting: Arc<AtomicUsize>,
    /// Syncs the writer's commits to disk (`group_commit.rs`).
    pub(super) group_commit: Arc<GroupCommit>,
    pub(super) timings: WriterTimings,
}

impl DbPool {
    pub(super) fn open(label: &str, path: &Path, timings: &WriterTimings) -> Result<Arc<DbPool>> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let writer = connect(path, Role::Writer).with_context(|| {
            format!(
                "cannot open SQLite database `{label}` at {}",
                path.display()
            )
        })?;
        let writer = Arc::new(tokio::sync::Mutex::new(Writer::new(writer)));
        Ok(Arc::new(DbPool {
            label: label.to_string(),
            path: path.to_path_buf(),
            readers: Mutex::new(Vec::new()),
            group_commit: Arc::new(GroupCommit::new(path, writer.clone())),
            writer,
            waiting: Arc::default(),
            timings: timings.clone(),
        }))
    }

    /// A reader connection (idle or new); it returns to the pool when dropped.
    pub fn reader(self: &Arc<Self>) -> rusqlite::Result<ReaderConn> {
        let idle = self.readers.lock().ok().and_then(|mut v| v.pop());
        let conn = match idle {
            Some(c) => c,
            None => connect(&self.path, Role::Reader)?,
        };
        Ok(ReaderConn {
            pool: self.clone(),
            conn: Some(conn),
        })
    }

    /// The writer, once every earlier waiter has had it.
    pub(super) async fn writer(&self) -> Result<WriterLease, String> {
        let asked = Instant::now();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let turn = tokio::time::timeout(BUSY_TIMEOUT, self.writer.clone().lock_owned()).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        match turn {
            Ok(guard) => Ok(self.lease(guard, asked)),
            Err(_) => Err("database is locked".to_string()),
        }
    }

    /// The writer if nobody holds it (start-up work such as migrations), its batch
    /// committed.
    pub(super) fn try_writer(&self) -> Result<WriterLease> {
        match self.writer.clone().try_lock_owned() {
            Ok(guard) => {
                let mut lease = self.lease(guard, Instant::now());
                lease.close_batch();
                Ok(lease)
            }
            Err(_) => bail!("the writer of database `{}` is busy", self.label),
        }
    }

    /// Takes the writer's turn to commit its open batch, if it still has one.
    pub(super) async fn close_batch(&self) {
        if let Ok(mut lease) = self.writer().await {
            lease.close_batch();
        }
    }

    fn lease(&self, guard: OwnedMutexGuard<Writer>, asked: Instant) -> WriterLease {
        WriterLease {
            writer: guard,
            group: self.group_commit.clone(),
            waiting: self.waiting.clone(),
            transaction: Transaction::None,
            timings: self.timings.clone(),
            asked,
            acquired: Instant::now(),
            in_sqlite: Duration::ZERO,
            statements: 0,
            wrote: false,
        }
    }
}

/// What a connection is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Writer,
    Reader,
}

/// Opens a connection to `path`: the one place edgehost opens SQLite databases for guests,
/// so every guest connection carries the SQL guard (`sql_guard.rs`).
fn connect(path: &Path, role: Role) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    if role == Role::Writer {
        // A batched transaction's savepoint keeps the pages it changes in a sub-journal, to
        // undo them on its rollback: in memory, not in a temporary file (two writes per
        // page, for pages the WAL gets anyway).
        conn.pragma_update(None, "temp_store", "MEMORY")?;
    }
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

/// The guest transaction a lease of the writer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transaction {
    None,
    /// A savepoint in the writer's batch (`batch.rs`).
    Batched,
    /// A transaction of its own (one a guest started with `SAVEPOINT` or `BEGIN EXCLUSIVE`).
    Own,
}

/// Exclusive use of a database's writer connection. Dropping it rolls back a transaction
/// the guest left open, commits the writer's batch unless someone waits to add to it, then
/// lets the next waiter in.
pub struct WriterLease {
    writer: OwnedMutexGuard<Writer>,
    group: Arc<GroupCommit>,
    waiting: Arc<AtomicUsize>,
    pub(super) transaction: Transaction,
    timings: WriterTimings,
    asked: Instant,
    acquired: Instant,
    in_sqlite: Duration,
    statements: u32,
    /// Whether a statement of this lease changed the database.
    wrote: bool,
}

impl WriterLease {
    /// Runs one statement on the writer, timing it; `statement` says whether it changed
    /// the database.
    pub(super) fn run<T>(&mut self, statement: impl FnOnce(&Connection) -> (T, bool)) -> T {
        let started = Instant::now();
        let (out, wrote) = statement(&self.writer.conn);
        self.in_sqlite += started.elapsed();
        self.statements += 1;
        self.wrote |= wrote;
        out
    }

    /// Whether a statement of this lease changed the database.
    pub(super) fn wrote(&self) -> bool {
        self.wrote
    }

    /// Starts a batched guest transaction.
    pub(super) fn begin_batched(&mut self) -> rusqlite::Result<()> {
        self.writer.begin()?;
        self.transaction = Transaction::Batched;
        Ok(())
    }

    /// Ends the batched guest transaction as committed: what to wait for, if it wrote.
    pub(super) fn commit_batched(&mut self) -> rusqlite::Result<Option<Membership>> {
        self.transaction = Transaction::None;
        let wrote = self.wrote;
        self.writer.commit(wrote)
    }

    /// Undoes the batched guest transaction.
    pub(super) fn rollback_batched(&mut self) -> rusqlite::Result<()> {
        self.transaction = Transaction::None;
        self.writer.rollback()
    }

    /// After a statement of the batched transaction: whether SQLite rolled back the whole
    /// batch (the guest's transaction with it).
    pub(super) fn lost_batch(&mut self) -> bool {
        let lost = self.writer.lost_batch();
        if lost {
            self.transaction = Transaction::None;
        }
        lost
    }

    /// Commits the writer's open batch now (before work that runs outside batches).
    pub(super) fn close_batch(&mut self) {
        self.writer.close(&self.group);
    }
}

impl std::ops::Deref for WriterLease {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.writer.conn
    }
}

impl Drop for WriterLease {
    fn drop(&mut self) {
        match self.transaction {
            // The guest went away mid-transaction.
            Transaction::Batched => {
                let _ = self.writer.rollback();
                self.writer.lost_batch();
            }
            Transaction::Own | Transaction::None => {
                if !self.writer.in_batch() && !self.writer.conn.is_autocommit() {
                    let _ = self.writer.conn.execute_batch("ROLLBACK");
                }
            }
        }
        if self
            .writer
            .should_close(self.waiting.load(Ordering::SeqCst))
        {
            self.writer.close(&self.group);
        }
        self.timings.record(LeaseTiming {
            waited: self.acquired - self.asked,
            held: self.acquired.elapsed(),
            in_sqlite: self.in_sqlite,
            statements: self.statements,
        });
    }
}
