//! The store's back ends in a Spin component: Spin's SQLite interface, or its PostgreSQL
//! interface, chosen by the variable `database` (`sqlite`, the default, or `postgres` with
//! the connection string in `postgres_url`).

use super::config;
use domain::ApiError;
use store::{self, Backend, BackendError, Db, Dialect, Row, Value, sql};
// `spin:postgres@3.0.0`: the newest PostgreSQL interface every Spin 3.x and 4.x and Fermyon
// Wasm Functions accept (see docs/data.md).
use spin_sdk::pg3 as pg;
use spin_sdk::sqlite;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

thread_local! {
    /// The connection this instance opened. An instance serves one request, so every
    /// `open()` of a request shares one connection: a request holds one PostgreSQL
    /// connection from the host's pool, not one per store call.
    static OPENED: RefCell<Option<Db>> = const { RefCell::new(None) };
}

/// The platform's database: opened on the first call, shared by the later ones.
pub fn open() -> Result<Db, ApiError> {
    if let Some(db) = OPENED.with(|o| o.borrow().clone()) {
        return Ok(db);
    }
    let db = connect()?;
    OPENED.with(|o| *o.borrow_mut() = Some(db.clone()));
    Ok(db)
}

/// Gives this request's connection back to the pool until its next statement (see
/// [`Db::set_aside`]): for a request about to wait on its client or on another party.
pub fn set_aside() {
    OPENED.with(|o| {
        if let Some(db) = o.borrow().as_ref() {
            db.set_aside();
        }
    });
}

fn connect() -> Result<Db, ApiError> {
    match config::var_or("database", "sqlite").as_str() {
        "sqlite" => sqlite::Connection::open_default()
            .map(|conn| {
                Db::new(Box::new(SpinSqlite {
                    conn,
                    waits_itself: Cell::new(None),
                }))
            })
            .map_err(|e| store::unavailable(&format!("opening SQLite: {e}"))),
        "postgres" => connect_postgres(&config::required("postgres_url")?),
        other => Err(ApiError::unavailable(
            "not_configured",
            format!("the variable database is {other:?}: use sqlite or postgres"),
        )),
    }
}

/// Opens the PostgreSQL database at `url`. The connection is taken from the host's pool
/// at the first statement, and is checked there for a transaction an earlier request left
/// open ([`Leftover`]).
pub fn connect_postgres(url: &str) -> Result<Db, ApiError> {
    let conn = pg::Connection::open(url)
        .map_err(|e| store::unavailable(&format!("opening PostgreSQL: {e:?}")))?;
    Ok(Db::new(Box::new(SpinPostgres {
        url: url.to_string(),
        conn: RefCell::new(Some(Rc::new(conn))),
        leftover: Cell::new(Leftover::Unknown),
        in_own_transaction: Cell::new(false),
    })))
}

/// What is known of a transaction the connection's previous user may have left open.
///
/// Spin hands a pooled connection to the next instance as the last one left it: when a
/// guest trapped between `BEGIN` and `COMMIT`, the transaction is still open, with its
/// writes and locks (Spin's `Clean` recycling resets session settings, not transactions).
/// A statement sent into it would see that half-done work, and a `COMMIT` would commit it.
/// Checking costs a round trip, so it is fused into the request's first statement where it
/// can be, and the probe statement is sent only before a write that needs it:
///
/// - A first statement that only reads carries the check in its answer
///   ([`sql::never_empty_checking`]): whether the transaction it ran in has a transaction
///   id. A leftover that wrote, locked rows or took an advisory lock has one (the store's
///   advisory locks ask for one for this reason); the connection is then rolled back and
///   the statement run again. A leftover that had failed refuses the statement; the same.
/// - A leftover without a transaction id holds nothing and wrote nothing: reads inside it
///   see what reads outside it see (READ COMMITTED, a snapshot per statement; the platform
///   never raises the isolation level), and a `BEGIN` in it is a no-op whose `COMMIT` or
///   `ROLLBACK` ends it with only the request's own work. Only a write outside the
///   request's own transaction would stay uncommitted in it, so such a write is preceded
///   by the probe ([`OUTSIDE_A_TRANSACTION_PROBE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leftover {
    /// Nothing checked yet.
    Unknown,
    /// No leftover that wrote or holds locks; one that did nothing may still be open.
    NothingHeld,
    /// Outside any transaction but the request's own.
    None,
}

/// Fails inside a transaction block, does nothing outside one: no index has this name.
/// `DROP INDEX CONCURRENTLY` refuses to run inside a transaction block and is a no-op
/// outside one, which tells the two apart in one statement, on every PostgreSQL and
/// through Spin's extended query protocol.
const OUTSIDE_A_TRANSACTION_PROBE: &str =
    r#"DROP INDEX CONCURRENTLY IF EXISTS "~ transaction probe: no such index""#;

/// What PostgreSQL answers a statement sent into a failed transaction.
const IN_A_FAILED_TRANSACTION: &str = "current transaction is aborted";

/// A SQLite connection that waits for the database's write lock itself.
///
/// Spin opens a fresh connection for each request, with SQLite's default busy handler: a
/// writer that finds the lock taken sleeps 1, 2, 5, 10, ... then 100 ms at a time, however
/// soon the lock comes free, so under concurrent writers a few requests wait a second or
/// more behind transactions that each hold the lock for about a millisecond. Before its
/// first write the connection turns that handler off (`busy_timeout = 0`) and retries a
/// refused statement after short pauses instead ([`BUSY_PAUSES`]). A host that queues
/// writers itself (edgehost) refuses the pragma and never answers "busy".
struct SpinSqlite {
    conn: sqlite::Connection,
    /// Whether the busy handler was turned off: `None` until the first write.
    waits_itself: Cell<Option<bool>>,
}

/// The pauses between tries of a statement refused for the write lock: doubling from a
/// quarter of a millisecond to 4 ms, then 4 ms each, for at most [`BUSY_WAIT`].
const BUSY_PAUSES: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_micros(250),
    std::time::Duration::from_millis(1),
);
/// How long a statement waits for the write lock before failing (SQLite's default
/// handler, as Spin configures it, waits 5 s).
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl SpinSqlite {
    fn execute(
        &self,
        sql: &str,
        params: &[sqlite::Value],
    ) -> Result<sqlite::QueryResult, sqlite::Error> {
        if self.waits_itself.get().is_none() && !sql::only_reads(sql) {
            let turned_off = self.conn.execute("PRAGMA busy_timeout = 0", &[]).is_ok();
            self.waits_itself.set(Some(turned_off));
        }
        let started = std::time::Instant::now();
        let mut pause = BUSY_PAUSES.0;
        loop {
            match self.conn.execute(sql, params) {
                Err(sqlite::Error::Io(text))
                    if text.contains("database is locked") && started.elapsed() < BUSY_WAIT =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(BUSY_PAUSES.1);
                }
                answer => return answer,
            }
        }
    }
}

impl Backend for SpinSqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, BackendError> {
        let params: Vec<sqlite::Value> = params
            .iter()
            .map(|p| match p {
                Value::Null => sqlite::Value::Null,
                Value::Int(n) => sqlite::Value::Integer(*n),
                Value::Real(r) => sqlite::Value::Real(*r),
                Value::Text(s) => sqlite::Value::Text(s.clone()),
                Value::Blob(b) => sqlite::Value::Blob(b.clone()),
            })
            .collect();
        let result = self.execute(sql, &params).map_err(sqlite_error)?;
        let columns: Rc<[String]> = result.columns.into();
        Ok(result
            .rows
            .into_iter()
            .map(|row| {
                let values = row
                    .values
                    .into_iter()
                    .map(|v| match v {
                        sqlite::Value::Null => Value::Null,
                        sqlite::Value::Integer(n) => Value::Int(n),
                        sqlite::Value::Real(r) => Value::Real(r),
                        sqlite::Value::Text(s) => Value::Text(s),
                        sqlite::Value::Blob(b) => Value::Blob(b),
                    })
                    .collect();
                Row::new(columns.clone(), values)
            })
            .collect())
    }
}

/// A PostgreSQL connection that can be given back to the host's pool while the request
/// waits on something else ([`Backend::set_aside`]), and is taken again by the next
/// statement.
struct SpinPostgres {
    url: String,
    conn: RefCell<Option<Rc<pg::Connection>>>,
    /// What is known of the connection's previous user's transaction.
    leftover: Cell<Leftover>,
    /// Between this request's `BEGIN` and its `COMMIT` or `ROLLBACK`.
    in_own_transaction: Cell<bool>,
}

impl SpinPostgres {
    fn connection(&self) -> Result<Rc<pg::Connection>, BackendError> {
        if let Some(conn) = self.conn.borrow().as_ref() {
            return Ok(conn.clone());
        }
        let conn = pg::Connection::open(&self.url)
            .map_err(|e| BackendError::unavailable(format!("opening PostgreSQL: {e:?}")))?;
        let conn = Rc::new(conn);
        *self.conn.borrow_mut() = Some(conn.clone());
        self.leftover.set(Leftover::Unknown);
        Ok(conn)
    }

    /// Makes sure a write of the request's own does not land in a leftover transaction:
    /// probes, and rolls back what it finds.
    fn before_write(&self, conn: &pg::Connection) -> Result<(), BackendError> {
        if self.leftover.get() == Leftover::None || self.in_own_transaction.get() {
            return Ok(());
        }
        if let Err(e) = conn.execute(OUTSIDE_A_TRANSACTION_PROBE, &[]) {
            if pg_error(e).unavailable {
                return Err(BackendError::unavailable(
                    "the connection was lost".to_string(),
                ));
            }
            self.roll_back_leftover(conn)?;
        }
        self.leftover.set(Leftover::None);
        Ok(())
    }

    fn roll_back_leftover(&self, conn: &pg::Connection) -> Result<(), BackendError> {
        let unavailable =
            |what: &str, e: pg::PgError| BackendError::unavailable(format!("{what}: {e:?}"));
        eprintln!("store: the pooled PostgreSQL connection was left in a transaction: rolled back");
        conn.execute("ROLLBACK", &[])
            .map_err(|e| unavailable("rolling back", e))?;
        // The pool's `RESET ALL` ran inside the rolled-back transaction: run it again.
        conn.execute("RESET ALL", &[])
            .map_err(|e| unavailable("resetting", e))?;
        self.leftover.set(Leftover::None);
        Ok(())
    }

    /// Follows the request's own transaction by the statements that open and end it.
    fn track_own_transaction(&self, sql: &str) {
        match sql.trim() {
            "BEGIN" => self.in_own_transaction.set(true),
            "COMMIT" | "ROLLBACK" => {
                self.in_own_transaction.set(false);
                // Whatever was open before has ended with it.
                self.leftover.set(Leftover::None);
            }
            _ => {}
        }
    }

    /// The request's first statement, a read: checked as [`Leftover`] says.
    fn first_read(
        &self,
        conn: &pg::Connection,
        sql: &str,
        params: &[Value],
    ) -> Result<pg::RowSet, BackendError> {
        match conn.query(&sql::never_empty_checking(sql), &pg_params(params)) {
            Ok(set) => {
                let clean = !matches!(
                    set.rows.last().and_then(|row| row.first()),
                    Some(pg::DbValue::Boolean(false))
                );
                if clean {
                    self.leftover.set(Leftover::NothingHeld);
                    return Ok(set);
                }
            }
            Err(e) => {
                let detail = format!("{e:?}");
                if !detail.contains(IN_A_FAILED_TRANSACTION) {
                    return Err(pg_error(e));
                }
            }
        }
        self.roll_back_leftover(conn)?;
        conn.query(&sql::never_empty(sql), &pg_params(params))
            .map_err(pg_error)
    }
}

fn pg_params(params: &[Value]) -> Vec<pg::ParameterValue> {
    params
        .iter()
        .map(|p| match p {
            Value::Null => pg::ParameterValue::DbNull,
            Value::Int(n) => pg::ParameterValue::Int64(*n),
            Value::Real(r) => pg::ParameterValue::Floating64(*r),
            Value::Text(s) => pg::ParameterValue::Str(s.clone()),
            Value::Blob(b) => pg::ParameterValue::Binary(b.clone()),
        })
        .collect()
}

fn pg_error(e: pg::PgError) -> BackendError {
    let detail = format!("{e:?}");
    match e {
        pg::PgError::ConnectionFailed(_) => BackendError::unavailable(detail),
        _ if store::postgres_unavailable(&detail) => BackendError::unavailable(detail),
        _ => detail.into(),
    }
}

fn sqlite_error(e: sqlite::Error) -> BackendError {
    let detail = e.to_string();
    match e {
        sqlite::Error::DatabaseFull => BackendError::unavailable(detail),
        sqlite::Error::Io(text) if store::sqlite_unavailable(&text) => {
            BackendError::unavailable(detail)
        }
        _ => detail.into(),
    }
}

impl Backend for SpinPostgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, BackendError> {
        self.query_carrying("", sql, params)
    }

    fn query_carrying(
        &self,
        held: &str,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<Row>, BackendError> {
        let conn = self.connection()?;
        // Spin 4.0.0 to 4.0.2 never answer a query without rows: every query answers at
        // least the sentinel row (see `sql::never_empty`).
        let reads = held.is_empty() && sql::only_reads(sql);
        let set = if reads && self.leftover.get() == Leftover::Unknown {
            self.first_read(&conn, sql, params)?
        } else {
            if !reads {
                self.before_write(&conn)?;
            }
            conn.query(&sql::never_empty_carrying(held, sql), &pg_params(params))
                .map_err(pg_error)?
        };
        let names = set.columns.into_iter().map(|c| c.name).collect();
        let (names, rows) =
            sql::without_sentinel(names, set.rows, |v| matches!(v, pg::DbValue::Boolean(true)))
                .ok_or_else(|| {
                    BackendError::from("the query's answer lacks its sentinel row".to_string())
                })?;
        let columns: Rc<[String]> = names.into();
        Ok(rows
            .into_iter()
            .map(|row| {
                let values = row
                    .into_iter()
                    .map(|v| match v {
                        pg::DbValue::Boolean(b) => Value::Int(i64::from(b)),
                        pg::DbValue::Int8(n) => Value::Int(n.into()),
                        pg::DbValue::Int16(n) => Value::Int(n.into()),
                        pg::DbValue::Int32(n) => Value::Int(n.into()),
                        pg::DbValue::Int64(n) => Value::Int(n),
                        pg::DbValue::Floating32(r) => Value::Real(r.into()),
                        pg::DbValue::Floating64(r) => Value::Real(r),
                        pg::DbValue::Str(s) => Value::Text(s),
                        pg::DbValue::Binary(b) => Value::Blob(b),
                        pg::DbValue::Timestamp(n) => Value::Int(n),
                        _ => Value::Null,
                    })
                    .collect();
                Row::new(columns.clone(), values)
            })
            .collect())
    }

    fn execute(&self, sql: &str, params: &[Value]) -> Result<(), BackendError> {
        let conn = self.connection()?;
        // A `BEGIN` is safe in a leftover that holds nothing (see `Leftover`), not in one
        // that may.
        let own_begin = sql.trim() == "BEGIN" && self.leftover.get() == Leftover::NothingHeld;
        if !own_begin {
            self.before_write(&conn)?;
        }
        let result = conn.execute(sql, &pg_params(params)).map(|_| ());
        // A `BEGIN` that failed opened nothing; a failed `COMMIT` ends the transaction.
        if result.is_ok() || sql.trim() != "BEGIN" {
            self.track_own_transaction(sql);
        }
        result.map_err(pg_error)
    }

    fn set_aside(&self) {
        self.conn.borrow_mut().take();
    }
}
