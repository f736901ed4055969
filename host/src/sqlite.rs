//! `fermyon:spin/sqlite@2.0.0` and `spin:sqlite/sqlite@3.0.0` over embedded SQLite files,
//! plus the start-up migrations of `sql/`.
//!
//! A guest `connection` holds one real SQLite connection from first use until it is
//! dropped, so `BEGIN` ... `COMMIT` across `execute` calls behaves as on Spin. Connections
//! come from a small per-database pool; one returned with an open transaction (a guest
//! that trapped mid-transaction) is rolled back first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use rusqlite::Connection;
use rusqlite::types::{Value as SqlValue, ValueRef};
use sha2::{Digest, Sha256};
use wasmtime::component::Resource;

use crate::bindings::fermyon::spin::sqlite as v2;
use crate::bindings::spin::sqlite::sqlite as v3;
use crate::state::InstanceState;

/// How many connections one instance may hold open at once (Spin's default capacity).
pub const MAX_OPEN_CONNECTIONS: usize = 256;
/// Idle connections kept per database.
const MAX_IDLE: usize = 8;
/// Largest query result handed to a guest.
const MAX_RESULT_BYTES: usize = 128 * 1024 * 1024;

/// The databases the host knows, by label.
#[derive(Default)]
pub struct Databases {
    dbs: HashMap<String, Arc<DbPool>>,
}

impl Databases {
    /// Opens "default" at `default_path` (unless runtime config places it) plus the
    /// runtime-config databases.
    pub fn open(default_path: &Path, extra: &[(String, PathBuf)]) -> Result<Databases> {
        let mut dbs = HashMap::new();
        if !extra.iter().any(|(label, _)| label == "default") {
            dbs.insert(
                "default".to_string(),
                DbPool::open("default", default_path)?,
            );
        }
        for (label, path) in extra {
            dbs.insert(label.clone(), DbPool::open(label, path)?);
        }
        Ok(Databases { dbs })
    }

    pub fn get(&self, label: &str) -> Option<&Arc<DbPool>> {
        self.dbs.get(label)
    }

    pub fn contains(&self, label: &str) -> bool {
        self.dbs.contains_key(label)
    }
}

/// A database file and its idle connections.
pub struct DbPool {
    label: String,
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl DbPool {
    fn open(label: &str, path: &Path) -> Result<Arc<DbPool>> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let pool = Arc::new(DbPool {
            label: label.to_string(),
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
        });
        let conn = pool.connect().with_context(|| {
            format!(
                "cannot open SQLite database `{label}` at {}",
                path.display()
            )
        })?;
        // WAL: readers do not block the writer, which matters with concurrent requests.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        pool.release(conn);
        Ok(pool)
    }

    fn connect(&self) -> rusqlite::Result<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(conn)
    }

    pub fn acquire(&self) -> rusqlite::Result<Connection> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        match idle {
            Some(c) => Ok(c),
            None => self.connect(),
        }
    }

    pub fn release(&self, conn: Connection) {
        if !conn.is_autocommit() && conn.execute_batch("ROLLBACK").is_err() {
            return; // do not pool a connection in an unknown state
        }
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE
        {
            idle.push(conn);
        }
    }
}

/// The resource behind a guest's `connection` handle (both interface versions).
pub struct SqliteConn {
    pool: Arc<DbPool>,
    conn: Arc<Mutex<Option<Connection>>>,
}

impl SqliteConn {
    fn new(pool: Arc<DbPool>) -> SqliteConn {
        SqliteConn {
            pool,
            conn: Arc::new(Mutex::new(None)),
        }
    }
}

/// Runs `f` on a handle's connection (taken from the pool on first use), off the async
/// threads.
async fn with_conn<T: Send + 'static>(
    pool: Arc<DbPool>,
    slot: Arc<Mutex<Option<Connection>>>,
    f: impl FnOnce(&Connection) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(move || {
        let mut slot = slot
            .lock()
            .map_err(|_| "connection lock poisoned".to_string())?;
        let conn = match slot.take() {
            Some(c) => c,
            None => pool
                .acquire()
                .and_then(|c| crate::sql_guard::restrict_guest_sql(&c).map(|()| c))
                .map_err(|e| e.to_string())?,
        };
        let result = f(&conn);
        *slot = Some(conn);
        result
    })
    .await
    .map_err(|e| format!("sqlite task failed: {e}"))?
}

impl Drop for SqliteConn {
    fn drop(&mut self) {
        // `try_lock`: if a query still runs (its request was abandoned), the connection
        // is simply closed when that query finishes instead of returning to the pool.
        if let Ok(mut slot) = self.conn.try_lock()
            && let Some(conn) = slot.take()
        {
            self.pool.release(conn);
        }
    }
}

struct QueryOutput {
    columns: Vec<String>,
    rows: Vec<Vec<SqlValue>>,
}

fn run_query(conn: &Connection, sql: &str, params: Vec<SqlValue>) -> Result<QueryOutput, String> {
    let mut stmt = conn.prepare_cached(sql).map_err(|e| e.to_string())?;
    let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
    let mut rows_out = Vec::new();
    let mut bytes = 0usize;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params))
        .map_err(|e| e.to_string())?;
    while let Some(row) = rows.next().map_err(|e| e.to_string())? {
        let mut values = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
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
    Ok(QueryOutput {
        columns,
        rows: rows_out,
    })
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

/// Why `open` failed, independent of the interface version.
enum OpenError {
    AccessDenied,
    NoSuchDatabase,
    TooMany,
}

impl InstanceState {
    fn sqlite_open(
        &mut self,
        database: &str,
    ) -> wasmtime::Result<Result<Resource<SqliteConn>, OpenError>> {
        if !self.env.sqlite_allowed.contains(database) {
            return Ok(Err(OpenError::AccessDenied));
        }
        let Some(pool) = self.services.sqlite.get(database).cloned() else {
            return Ok(Err(OpenError::NoSuchDatabase));
        };
        if self.open_connections >= MAX_OPEN_CONNECTIONS {
            return Ok(Err(OpenError::TooMany));
        }
        let handle = self.table.push(SqliteConn::new(pool))?;
        self.open_connections += 1;
        Ok(Ok(handle))
    }

    async fn sqlite_execute(
        &mut self,
        conn: &Resource<SqliteConn>,
        sql: String,
        params: Vec<SqlValue>,
    ) -> wasmtime::Result<Result<QueryOutput, String>> {
        let handle = self.table.get(conn)?;
        let (pool, slot) = (handle.pool.clone(), handle.conn.clone());
        Ok(with_conn(pool, slot, move |c| run_query(c, &sql, params)).await)
    }

    fn sqlite_drop(&mut self, conn: Resource<SqliteConn>) -> wasmtime::Result<()> {
        self.table.delete(conn)?;
        self.open_connections = self.open_connections.saturating_sub(1);
        Ok(())
    }
}

impl v2::Host for InstanceState {}

impl v2::HostConnection for InstanceState {
    async fn open(
        &mut self,
        database: String,
    ) -> wasmtime::Result<Result<Resource<SqliteConn>, v2::Error>> {
        Ok(self.sqlite_open(&database)?.map_err(|e| match e {
            OpenError::AccessDenied => v2::Error::AccessDenied,
            OpenError::NoSuchDatabase => v2::Error::NoSuchDatabase,
            OpenError::TooMany => v2::Error::Io("too many connections opened".into()),
        }))
    }

    async fn execute(
        &mut self,
        conn: Resource<SqliteConn>,
        statement: String,
        parameters: Vec<v2::Value>,
    ) -> wasmtime::Result<Result<v2::QueryResult, v2::Error>> {
        let params = parameters.into_iter().map(|p| Param::from(p).0).collect();
        Ok(self
            .sqlite_execute(&conn, statement, params)
            .await?
            .map(Into::into)
            .map_err(v2::Error::Io))
    }

    async fn drop(&mut self, conn: Resource<SqliteConn>) -> wasmtime::Result<()> {
        self.sqlite_drop(conn)
    }
}

impl v3::Host for InstanceState {}

impl v3::HostConnection for InstanceState {
    async fn open(
        &mut self,
        database: String,
    ) -> wasmtime::Result<Result<Resource<SqliteConn>, v3::Error>> {
        Ok(self.sqlite_open(&database)?.map_err(|e| match e {
            OpenError::AccessDenied => v3::Error::AccessDenied,
            OpenError::NoSuchDatabase => v3::Error::NoSuchDatabase,
            OpenError::TooMany => v3::Error::Io("too many connections opened".into()),
        }))
    }

    async fn execute(
        &mut self,
        conn: Resource<SqliteConn>,
        statement: String,
        parameters: Vec<v3::Value>,
    ) -> wasmtime::Result<Result<v3::QueryResult, v3::Error>> {
        let params = parameters.into_iter().map(|p| Param::from(p).0).collect();
        Ok(self
            .sqlite_execute(&conn, statement, params)
            .await?
            .map(Into::into)
            .map_err(v3::Error::Io))
    }

    async fn last_insert_rowid(&mut self, conn: Resource<SqliteConn>) -> wasmtime::Result<i64> {
        let handle = self.table.get(&conn)?;
        let slot = handle
            .conn
            .lock()
            .map_err(|_| wasmtime::format_err!("lock poisoned"))?;
        Ok(slot.as_ref().map(|c| c.last_insert_rowid()).unwrap_or(0))
    }

    async fn changes(&mut self, conn: Resource<SqliteConn>) -> wasmtime::Result<u64> {
        let handle = self.table.get(&conn)?;
        let slot = handle
            .conn
            .lock()
            .map_err(|_| wasmtime::format_err!("lock poisoned"))?;
        Ok(slot.as_ref().map(|c| c.changes()).unwrap_or(0))
    }

    async fn drop(&mut self, conn: Resource<SqliteConn>) -> wasmtime::Result<()> {
        self.sqlite_drop(conn)
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
    let conn = pool.acquire()?;
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
                crate::manifest::warn(format_args!(
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
    pool.release(conn);
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
        let pool = DbPool::open("default", &dir.join("db.sqlite")).unwrap();
        assert_eq!(
            apply_migrations(&pool, &sql).unwrap(),
            vec!["001_a.sql", "002_b.sql"]
        );
        assert!(apply_migrations(&pool, &sql).unwrap().is_empty());
        std::fs::write(sql.join("003_bad.sql"), "CREATE TABLE c (; ").unwrap();
        let err = format!("{:#}", apply_migrations(&pool, &sql).unwrap_err());
        assert!(err.contains("003_bad.sql"), "{err}");
        let c = pool.acquire().unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM a", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        std::fs::remove_dir_all(&dir).ok();
    }
}
