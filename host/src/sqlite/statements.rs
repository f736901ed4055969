//! Where a guest's statement runs (a reader, or the writer it leases), and what it answers.

use std::sync::Arc;
use std::time::Instant;

use rusqlite::Connection;
use rusqlite::types::{Value as SqlValue, ValueRef};

use super::batch::Membership;
use super::pool::{DbPool, Transaction, WriterLease};

/// Largest query result handed to a guest.
const MAX_RESULT_BYTES: usize = 128 * 1024 * 1024;

/// What a guest's `connection` handle names (both interface versions).
pub struct SqliteConn {
    pub(super) pool: Arc<DbPool>,
    pub(super) session: Session,
}

/// What a guest connection carries between calls.
#[derive(Default)]
pub(super) struct Session {
    /// Held from a `BEGIN` until the transaction ends.
    writer: Option<WriterLease>,
    /// This connection's own `last_insert_rowid()` and `changes()`.
    pub(super) last_insert_rowid: i64,
    pub(super) changes: u64,
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

/// Whether what follows a statement's keywords is at most a closing `;`.
fn nothing_follows(rest: &str) -> bool {
    rest.trim().trim_end_matches(';').trim().is_empty()
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
            if deferred && nothing_follows(rest) {
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

/// How a statement ends a transaction, if it does.
#[derive(Debug, PartialEq)]
enum Ending {
    Commit,
    Rollback,
}

fn ending(sql: &str) -> Option<Ending> {
    let (words, rest) = leading_keywords(sql, 3);
    if !nothing_follows(rest) {
        return None;
    }
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["COMMIT" | "END"] | ["COMMIT" | "END", "TRANSACTION"] => Some(Ending::Commit),
        ["ROLLBACK"] | ["ROLLBACK", "TRANSACTION"] => Some(Ending::Rollback),
        _ => None,
    }
}

/// Whether a transaction starting with `begin` (as [`route`] gives it) joins the writer's
/// batch: `BEGIN` and `BEGIN IMMEDIATE` do; `BEGIN EXCLUSIVE` and a `SAVEPOINT` run alone.
fn batched_begin(begin: &str) -> bool {
    let (words, rest) = leading_keywords(begin, 3);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    nothing_follows(rest)
        && matches!(
            words.as_slice(),
            ["BEGIN", "IMMEDIATE"] | ["BEGIN", "IMMEDIATE", "TRANSACTION"]
        )
}

/// Whether a write outside a transaction may run as a batched transaction of its own:
/// anything SQLite runs inside a transaction (not `VACUUM`).
fn batched_write(sql: &str) -> bool {
    first_keyword(sql).as_deref() != Some("VACUUM")
}

fn no_rows() -> QueryOutput {
    QueryOutput {
        columns: Vec::new(),
        rows: Vec::new(),
    }
}

/// Runs one guest statement: on a reader when it only reads and no transaction is open,
/// otherwise on the writer. Answers the session (to keep) and the result.
pub(super) async fn run_statement(
    pool: Arc<DbPool>,
    mut session: Session,
    sql: String,
    params: Vec<SqlValue>,
) -> (Session, Result<QueryOutput, String>) {
    if let Some(lease) = session
        .writer
        .take_if(|l| l.transaction == Transaction::Batched)
    {
        match ending(&sql) {
            Some(end) => return (session, end_batched(&pool, lease, end).await),
            None => session.writer = Some(lease),
        }
    }
    let in_transaction = session.writer.is_some();
    let (sql, params, batched) = match dispatch(&pool, &mut session, sql, params).await {
        Dispatched::Answered(result) => return (session, result),
        Dispatched::ToWriter {
            sql,
            params,
            batched,
        } => (sql, params, batched),
    };
    let lease = match writer_lease(&pool, &mut session, batched).await {
        Ok(lease) => lease,
        Err(e) => return (session, Err(e)),
    };
    let result = finish(&pool, &mut session, lease, &sql, params, in_transaction).await;
    (session, result)
}

/// Where a statement went, outside a batched transaction's end.
enum Dispatched {
    /// Answered already: by a reader, or a batched `BEGIN` that took the writer.
    Answered(Result<QueryOutput, String>),
    /// For the writer; `batched`: a write outside a transaction, which runs as a batched
    /// transaction of its own.
    ToWriter {
        sql: String,
        params: Vec<SqlValue>,
        batched: bool,
    },
}

/// Routes a statement outside a transaction by its text (inside one, it stays on the
/// writer): a batched `BEGIN` leases the writer into `session`, a read runs on a reader
/// (moving to the writer when SQLite says it writes).
async fn dispatch(
    pool: &Arc<DbPool>,
    session: &mut Session,
    sql: String,
    params: Vec<SqlValue>,
) -> Dispatched {
    if session.writer.is_some() {
        return Dispatched::ToWriter {
            sql,
            params,
            batched: false,
        };
    }
    match route(&sql) {
        Route::Begin(statement) if batched_begin(&statement) => {
            let mut lease = match pool.writer().await {
                Ok(lease) => lease,
                Err(e) => return Dispatched::Answered(Err(e)),
            };
            Dispatched::Answered(match lease.begin_batched() {
                Ok(()) => {
                    session.writer = Some(lease);
                    Ok(no_rows())
                }
                Err(e) => Err(e.to_string()),
            })
        }
        Route::Begin(statement) => Dispatched::ToWriter {
            sql: statement,
            params,
            batched: false,
        },
        Route::Write => {
            let batched = batched_write(&sql);
            Dispatched::ToWriter {
                sql,
                params,
                batched,
            }
        }
        // In place, like the writer's statements: a read of the local file is short, and a
        // hop to the blocking pool and back cost more than the read itself (BENCHMARKS.md:
        // token mints, which only read).
        Route::Read => match read(pool, sql, params) {
            ReadOutcome::NeedsWriter(sql, params) => Dispatched::ToWriter {
                sql,
                params,
                batched: true,
            },
            ReadOutcome::Answered(result) => Dispatched::Answered(result),
        },
    }
}

/// Tries a statement on a reader.
fn read(pool: &Arc<DbPool>, sql: String, params: Vec<SqlValue>) -> ReadOutcome {
    let conn = match pool.reader() {
        Ok(c) => c,
        Err(e) => return ReadOutcome::Answered(Err(e.to_string())),
    };
    match run_query(&conn, &sql, params, true) {
        Ran::Done(result) => ReadOutcome::Answered(result.map(|(out, _)| out)),
        Ran::Writes(params) => ReadOutcome::NeedsWriter(sql, params),
    }
}

/// The writer: the session's own (in a transaction), else leased, a `batched` write
/// opening a batched transaction of its own.
async fn writer_lease(
    pool: &Arc<DbPool>,
    session: &mut Session,
    batched: bool,
) -> Result<WriterLease, String> {
    if let Some(lease) = session.writer.take() {
        return Ok(lease);
    }
    let mut lease = pool.writer().await?;
    if batched {
        // A write outside a transaction: a batched transaction of its own.
        lease.begin_batched().map_err(|e| e.to_string())?;
    } else {
        lease.close_batch();
    }
    Ok(lease)
}

/// Runs the statement on the writer, then either keeps the lease in the session (a
/// transaction still open) or lets it go once what the statement wrote is on disk.
async fn finish(
    pool: &Arc<DbPool>,
    session: &mut Session,
    mut lease: WriterLease,
    sql: &str,
    params: Vec<SqlValue>,
    in_transaction: bool,
) -> Result<QueryOutput, String> {
    let result = run_on_writer(session, &mut lease, sql, params);
    if lease.transaction == Transaction::Batched {
        if lease.lost_batch() {
            // SQLite rolled the whole transaction back: this guest's is over too.
            return result;
        }
        if !in_transaction {
            // The write ran as a transaction of its own: it ends here.
            let end = if result.is_ok() {
                Ending::Commit
            } else {
                Ending::Rollback
            };
            let ended = end_batched(pool, lease, end).await;
            return ended.and(result);
        }
        session.writer = Some(lease);
        return result;
    }
    // A finished transaction that wrote takes its place in the commit order before the
    // writer passes on.
    let commit = (lease.is_autocommit() && lease.wrote()).then(|| pool.group_commit.committed());
    if !lease.is_autocommit() {
        lease.transaction = Transaction::Own;
        session.writer = Some(lease);
    }
    match (result, commit) {
        (Ok(out), Some(commit)) => durable(pool, commit).await.map(|()| out),
        (result, _) => result,
    }
}

/// Runs the statement on the leased writer as this session's, with its own
/// `last_insert_rowid()` and `changes()`.
fn run_on_writer(
    session: &mut Session,
    lease: &mut WriterLease,
    sql: &str,
    params: Vec<SqlValue>,
) -> Result<QueryOutput, String> {
    // This guest's own last_insert_rowid, as if the connection were its alone.
    // SAFETY: the handle belongs to the connection we hold exclusively here.
    unsafe {
        rusqlite::ffi::sqlite3_set_last_insert_rowid(lease.handle(), session.last_insert_rowid)
    };
    // Run in place, not on the blocking pool: the statement is short (no sync waits in it,
    // see `group_commit.rs`), and a hop to another thread and back would lengthen the
    // time the writer is held by a scheduling delay on a busy machine.
    let result = match lease.run(|conn| {
        let ran = run_query(conn, sql, params, false);
        let wrote = matches!(ran, Ran::Done(Ok((_, false))));
        (ran, wrote)
    }) {
        Ran::Done(result) => result,
        Ran::Writes(_) => Err("internal error: statement refused on the writer".into()),
    };
    if let Ok((_, readonly)) = &result {
        session.last_insert_rowid = lease.last_insert_rowid();
        if counts_changes(sql, *readonly) {
            session.changes = lease.changes();
        }
    }
    result.map(|(out, _)| out)
}

/// Ends a batched transaction: a commit is answered once its batch is on disk.
async fn end_batched(
    pool: &Arc<DbPool>,
    mut lease: WriterLease,
    end: Ending,
) -> Result<QueryOutput, String> {
    let membership = match end {
        Ending::Commit => lease.commit_batched(),
        Ending::Rollback => lease.rollback_batched().map(|()| None),
    };
    // The writer passes on (committing the batch unless someone waits to join it).
    drop(lease);
    match membership.map_err(|e| e.to_string())? {
        Some(member) => committed(pool, member).await.map(|()| no_rows()),
        None => Ok(no_rows()),
    }
}

/// Waits until a batch member's batch has committed and is on disk.
async fn committed(pool: &Arc<DbPool>, member: Membership) -> Result<(), String> {
    timed_wait(pool, async {
        let batch = member.outcome(|| pool.close_batch()).await?;
        pool.group_commit.durable(batch).await
    })
    .await
}

/// Waits until commit `ticket` is on disk.
async fn durable(pool: &Arc<DbPool>, ticket: u64) -> Result<(), String> {
    timed_wait(pool, pool.group_commit.durable(ticket)).await
}

/// Awaits `wait`, a guest's wait for its transaction to be on disk, and records how long
/// it took.
async fn timed_wait(
    pool: &DbPool,
    wait: impl std::future::Future<Output = Result<(), String>>,
) -> Result<(), String> {
    let asked = Instant::now();
    let done = wait.await;
    pool.timings.record_durable_wait(asked.elapsed());
    done
}

impl SqliteConn {
    pub(super) fn new(pool: Arc<DbPool>) -> SqliteConn {
        SqliteConn {
            pool,
            session: Session::default(),
        }
    }
}

pub(super) struct QueryOutput {
    pub(super) columns: Vec<String>,
    pub(super) rows: Vec<Vec<SqlValue>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::pool::WriterTimings;
    use std::path::PathBuf;
    use std::time::Duration;

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

    /// Runs `sql` in `session`, which it answers with the statement's result.
    async fn run(pool: &Arc<DbPool>, session: Session, sql: &str) -> (Session, Result<(), String>) {
        let (session, result) = run_statement(pool.clone(), session, sql.into(), vec![]).await;
        (session, result.map(|_| ()))
    }

    /// A fresh database in a directory of its own (`name` and the process id), with a
    /// table `t (n INTEGER)`: the directory, the file and its pool.
    async fn database_with_a_table(name: &str) -> (PathBuf, PathBuf, Arc<DbPool>) {
        let dir = std::env::temp_dir().join(format!("edgehost-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("db.sqlite");
        let pool = DbPool::open("default", &file, &WriterTimings::default()).unwrap();
        run(&pool, Session::default(), "CREATE TABLE t (n INTEGER)")
            .await
            .1
            .unwrap();
        (dir, file, pool)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_keeps_its_commits_and_undoes_only_a_rollback_or_an_abandoned_transaction() {
        let (dir, file, pool) = database_with_a_table("batch").await;
        let before = pool.group_commit.latest();
        // The first transaction holds the writer while the two others queue for it.
        let (first, _) = run(&pool, Session::default(), "BEGIN").await;
        let (first, inserted) = run(&pool, first, "INSERT INTO t VALUES (1)").await;
        inserted.unwrap();
        let rolled_back = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let (s, _) = run(&pool, Session::default(), "BEGIN").await;
                let (s, _) = run(&pool, s, "INSERT INTO t VALUES (2)").await;
                run(&pool, s, "ROLLBACK").await.1
            })
        };
        let abandoned = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let (s, _) = run(&pool, Session::default(), "BEGIN").await;
                let (s, inserted) = run(&pool, s, "INSERT INTO t VALUES (3)").await;
                // The guest goes away without ending its transaction.
                drop(s);
                inserted
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, committed) = run(&pool, first, "COMMIT").await;
        committed.unwrap();
        // The commit was answered once on disk. (The abandoned transaction's batch may
        // still be closing, so the check is on this commit's own ticket.)
        let (durable, _, _) = pool.group_commit.counts();
        assert!(durable > before, "answered before its batch was on disk");
        rolled_back.await.unwrap().unwrap();
        abandoned.await.unwrap().unwrap();
        // Only the committed row is there.
        let other = Connection::open(&file).unwrap();
        let rows: Vec<i64> = other
            .prepare("SELECT n FROM t")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows, [1]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_commits_are_synced_and_checkpointed_beside_the_writer() {
        let (dir, file, pool) = database_with_a_table("commits").await;
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
        let commits = pool.group_commit.latest();
        assert_eq!(durable, commits, "every commit answered was synced");
        // The inserts that queued for the writer were committed in batches.
        assert!((2..=601).contains(&commits), "{commits} commits");
        assert!(syncs <= commits, "{syncs} syncs");
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
}
