//! The store layer: every SQL statement of the platform lives in the modules below, one per
//! aggregate, as typed functions (typed rows out, the clock passed in). Handlers never hold
//! SQL text.
//!
//! Statements are written once, in SQL that SQLite and PostgreSQL both run unchanged, with
//! `?` placeholders (or `?N` for a parameter used twice); [`Db`] rewrites them to `$N` for
//! PostgreSQL. Integers are 64-bit everywhere (`BIGINT` columns), booleans are 0/1
//! integers, times are RFC 3339 text or epoch seconds. The back end is a [`Backend`]: Spin's
//! SQLite or PostgreSQL interface in the components (`edge::spin::store`), an embedded SQLite
//! in this crate's unit tests.
//!
//! [`app`] holds the application's rules that need the store, written once for every
//! component.

pub mod analytics;
pub mod app;
pub mod broadcasts;
pub mod chat;
pub mod clips;
pub mod cohosts;
pub mod contacts;
pub mod events;
pub mod files;
pub mod gifts;
pub mod idempotency;
pub mod ingests;
pub mod ledger;
pub mod migrate;
pub mod moderation;
pub mod monetization;
pub mod music_links;
pub mod outbox;
pub mod payouts;
pub mod player;
pub mod playlists;
pub mod rate_limits;
pub mod recordings;
pub mod replay;
pub mod replays;
pub mod restreams;
pub mod rooms;
pub mod sql;
pub mod subscriptions;
pub mod tenants;
pub mod uploads;
pub mod users;
pub mod views;
pub mod webhooks;

use domain::ApiError;
use domain::pagination::Page;
use serde::de::DeserializeOwned;
use std::rc::Rc;

/// The SQL dialect a back end speaks; statements are written for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A parameter or a column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_string())
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Text(s.clone())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Int(i64::from(b))
    }
}

impl From<domain::broadcast::Visibility> for Value {
    fn from(v: domain::broadcast::Visibility) -> Self {
        Value::Text(v.as_str().to_string())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// Builds a parameter list: `params![a, b, c]`.
#[macro_export]
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        &[$($crate::Value::from($value)),*][..]
    };
}

/// A result row, its values addressed by column name.
#[derive(Debug, Clone)]
pub struct Row {
    columns: Rc<[String]>,
    values: Vec<Value>,
}

impl Row {
    pub fn new(columns: Rc<[String]>, values: Vec<Value>) -> Row {
        Row { columns, values }
    }

    pub fn get(&self, column: &str) -> Option<&Value> {
        let at = self.columns.iter().position(|c| c == column)?;
        self.values.get(at)
    }

    /// The first column's value.
    pub fn first(&self) -> Option<&Value> {
        self.values.first()
    }

    /// A text column; NULL or absent is "".
    pub fn text(&self, column: &str) -> String {
        self.opt_text(column).unwrap_or_default()
    }

    pub fn opt_text(&self, column: &str) -> Option<String> {
        match self.get(column)? {
            Value::Text(s) => Some(s.clone()),
            Value::Int(n) => Some(n.to_string()),
            Value::Blob(b) => String::from_utf8(b.clone()).ok(),
            Value::Real(r) => Some(r.to_string()),
            Value::Null => None,
        }
    }

    /// An integer column; NULL or absent is 0.
    pub fn int(&self, column: &str) -> i64 {
        self.opt_int(column).unwrap_or_default()
    }

    pub fn opt_int(&self, column: &str) -> Option<i64> {
        self.get(column).and_then(Value::as_int)
    }

    /// A 0/1 column as a boolean.
    pub fn bool(&self, column: &str) -> bool {
        self.int(column) != 0
    }

    /// A JSON text column; unreadable or NULL is the type's default.
    pub fn json<T: DeserializeOwned + Default>(&self, column: &str) -> T {
        self.opt_text(column)
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default()
    }
}

impl Value {
    /// The value as an integer: integers, and numeric text (PostgreSQL answers `SUM` of
    /// integers as a decimal).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Text(s) => s
                .parse::<i64>()
                .ok()
                .or_else(|| s.strip_suffix(".0").and_then(|t| t.parse().ok())),
            Value::Real(r) if r.fract() == 0.0 => Some(*r as i64),
            _ => None,
        }
    }
}

/// A database the store can talk to.
pub trait Backend {
    fn dialect(&self) -> Dialect;
    /// Runs one statement and answers its rows.
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, BackendError>;
    /// Runs one statement that answers no rows (DDL, transaction control, writes without
    /// `RETURNING`).
    fn execute(&self, sql: &str, params: &[Value]) -> Result<(), BackendError> {
        self.query(sql, params).map(|_| ())
    }
    /// Runs one statement that answers rows, with `held` (a [`sql::held_list`] of inserts)
    /// at the top of its `WITH`, in one round trip. Only a back end that inserts are held
    /// for (PostgreSQL) is given one.
    fn query_carrying(
        &self,
        held: &str,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<Row>, BackendError> {
        let _ = (held, sql, params);
        Err("this back end is never given held inserts"
            .to_string()
            .into())
    }
    /// Gives the connection back until the next statement, which takes one again: a
    /// request that waits on its client or on another party meanwhile holds none of a
    /// pool's connections. A no-op where a connection costs nothing to hold.
    fn set_aside(&self) {}
}

/// A statement the back end did not run.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendError {
    pub detail: String,
    /// The database could not take it for now (restarting, unreachable, out of
    /// connections or space): the same request may succeed later. Anything else is a fault
    /// of the statement or the schema.
    pub unavailable: bool,
}

impl From<String> for BackendError {
    fn from(detail: String) -> Self {
        BackendError {
            detail,
            unavailable: false,
        }
    }
}

impl BackendError {
    pub fn unavailable(detail: String) -> Self {
        BackendError {
            detail,
            unavailable: true,
        }
    }
}

/// How long a client should wait before retrying a request the database could not take.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u32 = 1;

/// The answer to a request the database could not take for now: 503 with `Retry-After`
/// (what failed is logged, not shown).
pub fn unavailable(detail: &str) -> ApiError {
    eprintln!("store: database unavailable: {detail}");
    ApiError::unavailable(
        "database_unavailable",
        "the database is unavailable for the moment: retry shortly",
    )
    .with_header("retry-after", UNAVAILABLE_RETRY_AFTER_SECS.to_string())
}

/// Whether a PostgreSQL failure, as Spin's `postgres@3.0.0` reports it (tokio-postgres's
/// error, debug-formatted), is the server being unavailable rather than the statement
/// failing: a lost or refused connection, or SQLSTATE class 08 (connection exception), 53
/// (insufficient resources: disk full, out of memory, too many connections), 57P01-57P03
/// (shutting down, crashed, starting up), or a serialization failure or deadlock (40001,
/// 40P01), which a retry resolves.
pub fn postgres_unavailable(text: &str) -> bool {
    const CONNECTION_KINDS: [&str; 3] = ["kind: Closed", "kind: Io", "kind: Connect"];
    const STATES: [&str; 6] = [
        "SqlState(E08",
        "SqlState(E53",
        "SqlState(E57P01)",
        "SqlState(E57P02)",
        "SqlState(E57P03)",
        "SqlState(E40",
    ];
    CONNECTION_KINDS.iter().any(|k| text.contains(k)) || STATES.iter().any(|s| text.contains(s))
}

/// Whether a SQLite failure (the host's I/O error text) is the database being unavailable
/// for now: its disk full, an I/O error, or its lock not free in time.
pub fn sqlite_unavailable(text: &str) -> bool {
    const TEXTS: [&str; 4] = [
        "database or disk is full",
        "disk I/O error",
        "database is locked",
        "unable to open database file",
    ];
    TEXTS.iter().any(|t| text.contains(t))
}

/// A connection to the platform's database; clones share it.
#[derive(Clone)]
pub struct Db {
    backend: Rc<dyn Backend>,
    /// Open transactions on this connection: a nested one is a savepoint.
    depth: Rc<std::cell::Cell<u32>>,
    /// Inserts held back to reach PostgreSQL as one statement ([`Db::insert_soon`]).
    held: Rc<std::cell::RefCell<Vec<Statement>>>,
}

/// A statement's text and its parameters.
pub type Statement = (String, Vec<Value>);

fn failed(e: BackendError) -> ApiError {
    if e.unavailable {
        unavailable(&e.detail)
    } else {
        ApiError::internal(format!("database error: {}", e.detail))
    }
}

/// How long a client should wait before retrying a request that met a schema not applied
/// yet (the deployment's `migrate` takes seconds).
pub const SCHEMA_RETRY_AFTER_SECS: u32 = 5;

/// Whether a failed statement named a table or column the database lacks: SQLite's
/// `no such table` / `no such column`, PostgreSQL's SQLSTATE 42P01 (undefined table) and
/// 42703 (undefined column).
pub fn names_missing_schema(text: &str) -> bool {
    const TEXTS: [&str; 4] = [
        "no such table",
        "no such column",
        "SqlState(E42P01)",
        "SqlState(E42703)",
    ];
    TEXTS.iter().any(|t| text.contains(t))
}

/// The answer to a request that arrived before the schema was applied: 503 with
/// `Retry-After` (what failed is logged, not shown).
pub fn schema_not_applied(detail: &str) -> ApiError {
    eprintln!("store: the schema is not applied yet (POST /api/jobs/migrate): {detail}");
    ApiError::unavailable(
        "schema_not_applied",
        "the platform is starting: its database schema is not applied yet; retry shortly",
    )
    .with_header("retry-after", SCHEMA_RETRY_AFTER_SECS.to_string())
}

impl Db {
    pub fn new(backend: Box<dyn Backend>) -> Db {
        Db {
            backend: Rc::from(backend),
            depth: Rc::default(),
            held: Rc::default(),
        }
    }

    pub fn dialect(&self) -> Dialect {
        self.backend.dialect()
    }

    /// Gives the connection back while the request waits on something else (its client's
    /// body, an outbound call): the next statement takes one again. Inside a transaction
    /// (where inserts may be held back too) the connection is kept.
    pub fn set_aside(&self) {
        if self.depth.get() == 0 {
            self.backend.set_aside();
        }
    }

    /// Runs one statement (placeholders rewritten for the back end) and answers its rows.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, ApiError> {
        if let Some((held, statement, params)) = self.carried_by(sql, params) {
            return self
                .backend
                .query_carrying(&held, &statement, &params)
                .map_err(|e| self.failed(e));
        }
        self.send_held()?;
        let statement = sql::for_dialect(sql, self.dialect());
        self.backend
            .query(&statement, params)
            .map_err(|e| self.failed(e))
    }

    /// Runs one statement that answers no rows (use [`Db::query`] for `RETURNING`).
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<(), ApiError> {
        if let Some((held, statement, params)) = self.carried_by(sql, params) {
            let statement = sql::carrying(&held, &statement);
            return self
                .backend
                .execute(&statement, &params)
                .map_err(|e| self.failed(e));
        }
        self.send_held()?;
        let statement = sql::for_dialect(sql, self.dialect());
        self.backend
            .execute(&statement, params)
            .map_err(|e| self.failed(e))
    }

    /// Why a statement failed, as the request's answer. One that names a table or column
    /// the database lacks while the migrations are not all applied met a schema that is
    /// not there yet: on the real Spin nothing keeps requests from arriving before the
    /// deployment's `migrate` ran, and they are answered 503 with `Retry-After`, not 500.
    /// (Inside a transaction the schema cannot be asked about: PostgreSQL refuses every
    /// statement after a failed one, so such a failure stays a 500.)
    fn failed(&self, e: BackendError) -> ApiError {
        if !e.unavailable
            && self.depth.get() == 0
            && names_missing_schema(&e.detail)
            && !self.schema_is_current()
        {
            return schema_not_applied(&e.detail);
        }
        failed(e)
    }

    /// Whether the last migration is recorded as applied (asked only after a statement
    /// failed for a missing table or column; a database without the record is not current).
    fn schema_is_current(&self) -> bool {
        let Some(last) = migrate::MIGRATIONS.last() else {
            return true;
        };
        let statement = sql::for_dialect(
            "SELECT version FROM schema_migrations WHERE version = ?",
            self.dialect(),
        );
        self.backend
            .query(&statement, &[last.version.into()])
            .is_ok_and(|rows| !rows.is_empty())
    }

    /// When `sql` may carry the held inserts ([`sql::can_carry`]): takes them, and answers
    /// them as a `WITH` list, `sql` numbered after them, and all the parameters in order.
    fn carried_by(&self, sql: &str, params: &[Value]) -> Option<(String, String, Vec<Value>)> {
        let mut held = self.held.borrow_mut();
        if held.is_empty() || !sql::can_carry(sql, &held) {
            return None;
        }
        let (list, mut all) = sql::held_list(&std::mem::take(&mut *held));
        let statement = sql::numbered_after(sql, all.len());
        all.extend_from_slice(params);
        Some((list, statement, all))
    }

    /// Runs an `INSERT` (without `RETURNING` or `WITH`) whose failure can only be a fault:
    /// at once, or, inside a transaction on PostgreSQL, together with the inserts held
    /// after it: carried by the transaction's next other statement when that statement
    /// names none of their tables ([`sql::can_carry`]), else as one statement just before
    /// it (or before the commit). A statement after it sees its row either way; what a
    /// held insert saves is a round trip to the server. A failure shows at that next
    /// statement.
    pub fn insert_soon(&self, sql: &str, params: &[Value]) -> Result<(), ApiError> {
        if self.dialect() == Dialect::Postgres && self.depth.get() > 0 {
            if !sql::is_plain_insert(sql) {
                return Err(ApiError::internal(
                    "only an INSERT without RETURNING or WITH can be held",
                ));
            }
            self.held
                .borrow_mut()
                .push((sql.to_string(), params.to_vec()));
            return Ok(());
        }
        self.execute(sql, params)
    }

    /// Sends the held inserts, if any, as one statement.
    fn send_held(&self) -> Result<(), ApiError> {
        let held = std::mem::take(&mut *self.held.borrow_mut());
        if held.is_empty() {
            return Ok(());
        }
        let (statement, params) = sql::together(&held);
        self.backend.execute(&statement, &params).map_err(failed)
    }

    /// The first row, if there is one.
    pub fn query_one(&self, sql: &str, params: &[Value]) -> Result<Option<Row>, ApiError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// A single integer (e.g. `SELECT COUNT(*) ...`); 0 when there is no row or it is NULL.
    pub fn count(&self, sql: &str, params: &[Value]) -> Result<i64, ApiError> {
        Ok(self
            .query_one(sql, params)?
            .and_then(|row| row.first().and_then(Value::as_int))
            .unwrap_or(0))
    }

    /// One page of `SELECT * FROM {table} WHERE {filter} ORDER BY {order}`, and how many
    /// rows match in all.
    pub fn page(
        &self,
        table: &str,
        filter: &str,
        scope: &[Value],
        order: &str,
        page: Page,
    ) -> Result<(Vec<Row>, i64), ApiError> {
        let total = self.count(
            &format!("SELECT COUNT(*) FROM {table} WHERE {filter}"),
            scope,
        )?;
        let mut params = scope.to_vec();
        params.extend([
            Value::Int(page.limit.into()),
            Value::Int(page.offset.into()),
        ]);
        let rows = self.query(
            &format!("SELECT * FROM {table} WHERE {filter} ORDER BY {order} LIMIT ? OFFSET ?"),
            &params,
        )?;
        Ok((rows, total))
    }

    /// Runs `work` inside a transaction: committed when it succeeds, rolled back otherwise.
    /// On SQLite the transaction takes the write lock at once (`BEGIN IMMEDIATE`), so two
    /// writers never deadlock upgrading a read lock. Inside another transaction it is a
    /// savepoint: its failure undoes only its own work, and the outer one decides.
    pub fn transaction<T>(
        &self,
        work: impl FnOnce(&Db) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let depth = self.depth.get();
        let (begin, commit, rollback) = if depth > 0 {
            (
                format!("SAVEPOINT nested_{depth}"),
                format!("RELEASE SAVEPOINT nested_{depth}"),
                format!("ROLLBACK TO SAVEPOINT nested_{depth}"),
            )
        } else {
            let begin = match self.dialect() {
                Dialect::Sqlite => "BEGIN IMMEDIATE",
                Dialect::Postgres => "BEGIN",
            };
            (
                begin.to_string(),
                "COMMIT".to_string(),
                "ROLLBACK".to_string(),
            )
        };
        self.execute(&begin, &[])?;
        self.depth.set(depth + 1);
        // The inserts held inside go with the commit, or not at all.
        let result = work(self).and_then(|value| self.send_held().map(|()| value));
        self.depth.set(depth);
        match result {
            Ok(value) => {
                self.execute(&commit, &[])?;
                Ok(value)
            }
            Err(err) => {
                self.held.borrow_mut().clear();
                let _ = self.execute(&rollback, &[]);
                if depth > 0 {
                    let _ = self.execute(&format!("RELEASE SAVEPOINT nested_{depth}"), &[]);
                }
                Err(err)
            }
        }
    }
}

/// An embedded SQLite back end for this crate's unit tests: the stores run against a real
/// database, migrated like the platform's.
/// Every row of `table` whose `broadcast_id` is one of `broadcast_ids`, in one query (none
/// for none). `table` is one of the store's own table names, never input.
pub(crate) fn rows_of_broadcasts(
    db: &Db,
    table: &str,
    broadcast_ids: &[&str],
) -> Result<Vec<Row>, ApiError> {
    if broadcast_ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = vec!["?"; broadcast_ids.len()].join(", ");
    let params: Vec<Value> = broadcast_ids.iter().map(|id| (*id).into()).collect();
    db.query(
        &format!("SELECT * FROM {table} WHERE broadcast_id IN ({placeholders})"),
        &params,
    )
}

#[cfg(test)]
pub mod testing {
    use super::*;

    pub struct Embedded(rusqlite::Connection);

    impl Embedded {
        pub fn new(conn: rusqlite::Connection) -> Embedded {
            Embedded(conn)
        }
    }

    impl Backend for Embedded {
        fn dialect(&self) -> Dialect {
            Dialect::Sqlite
        }

        fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, BackendError> {
            use rusqlite::types::{Value as V, ValueRef};
            let mut statement = self.0.prepare(sql).map_err(|e| e.to_string())?;
            let columns: Rc<[String]> = statement
                .column_names()
                .into_iter()
                .map(str::to_string)
                .collect();
            let bound: Vec<V> = params
                .iter()
                .map(|p| match p {
                    Value::Null => V::Null,
                    Value::Int(n) => V::Integer(*n),
                    Value::Real(r) => V::Real(*r),
                    Value::Text(s) => V::Text(s.clone()),
                    Value::Blob(b) => V::Blob(b.clone()),
                })
                .collect();
            let mut rows = statement
                .query(rusqlite::params_from_iter(bound))
                .map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                let values = (0..columns.len())
                    .map(|i| match row.get_ref(i) {
                        Ok(ValueRef::Integer(n)) => Value::Int(n),
                        Ok(ValueRef::Real(r)) => Value::Real(r),
                        Ok(ValueRef::Text(t)) => Value::Text(String::from_utf8_lossy(t).into()),
                        Ok(ValueRef::Blob(b)) => Value::Blob(b.to_vec()),
                        _ => Value::Null,
                    })
                    .collect();
                out.push(Row::new(columns.clone(), values));
            }
            Ok(out)
        }
    }

    /// A public portrait broadcast titled "Show" for 100 participants, as the store tests
    /// create them.
    pub fn new_broadcast() -> super::broadcasts::NewBroadcast {
        super::broadcasts::NewBroadcast {
            title: "Show".into(),
            visibility: domain::broadcast::Visibility::Public,
            orientation: "portrait".into(),
            max_participants: 100,
            cohost_policy: "approval".into(),
            ..Default::default()
        }
    }

    /// The outbox events recorded about `object_id`, oldest first: (type, stored payload).
    pub fn outbox_events(db: &Db, object_id: &str) -> Vec<(String, serde_json::Value)> {
        db.query(
            "SELECT event_type, payload FROM outbox_events WHERE object_id = ? ORDER BY sequence",
            &[object_id.into()],
        )
        .expect("the outbox reads")
        .iter()
        .map(|row| {
            let payload = serde_json::from_str(&row.text("payload")).expect("stored JSON");
            (row.text("event_type"), payload)
        })
        .collect()
    }

    /// A fresh in-memory database without the schema (before `migrate`).
    pub fn unmigrated_db() -> Db {
        let conn = rusqlite::Connection::open_in_memory().expect("in-memory SQLite");
        Db::new(Box::new(Embedded(conn)))
    }

    /// A fresh in-memory database with every migration applied.
    pub fn db() -> Db {
        let conn = rusqlite::Connection::open_in_memory().expect("in-memory SQLite");
        let db = Db::new(Box::new(Embedded(conn)));
        migrate::run(&db, 0).expect("migrations apply");
        db
    }
}

/// The store is the only place with SQL: no other source file of any component holds a
/// statement.
#[cfg(test)]
mod schema_not_applied {
    use super::*;

    fn retry_after(e: &ApiError) -> Option<&str> {
        e.headers
            .iter()
            .find(|(name, _)| name == "retry-after")
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_request_before_the_migrations_is_told_to_retry_and_a_bad_statement_stays_a_fault() {
        // Before `migrate`: the first lookup of any request names a table not there yet.
        let db = testing::unmigrated_db();
        let e = tenants::by_api_key_hash(&db, "0").unwrap_err();
        assert_eq!((e.status, e.code), (503, "schema_not_applied"), "{e}");
        assert_eq!(retry_after(&e), Some("5"));
        // A migration half way (an older schema): a column a newer one adds is missing.
        let e = db
            .execute(
                "CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)",
                &[],
            )
            .and_then(|()| db.query("SELECT suspended_at FROM schema_migrations", &[]))
            .unwrap_err();
        assert_eq!((e.status, e.code), (503, "schema_not_applied"), "{e}");
        // Once the schema is applied, a statement naming what is not there is a fault.
        let db = testing::db();
        tenants::by_api_key_hash(&db, "0").expect("the lookup runs");
        let e = db
            .query("SELECT nothing FROM sdk_clients", &[])
            .unwrap_err();
        assert_eq!((e.status, e.code), (500, "internal_error"), "{e}");
        // PostgreSQL's undefined table and column.
        assert!(names_missing_schema(
            "Db error: SqlState(E42P01) relation does not exist"
        ));
        assert!(names_missing_schema("SqlState(E42703)"));
        assert!(!names_missing_schema("SqlState(E23505) duplicate key"));
    }
}

#[cfg(test)]
mod only_here {
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_sql_outside_the_store() {
        let components = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let store = components.join("store/src");
        // The application rules live beside the store but hold no SQL either.
        let app = store.join("app");
        let mut files = Vec::new();
        sources(&components, &mut files);
        let statement = [
            "\"SELECT ",
            "\"INSERT INTO",
            "\"DELETE FROM",
            "\"UPDATE ",
            "\"CREATE TABLE",
        ];
        let offenders: Vec<String> = files
            .iter()
            .filter(|f| {
                (!f.starts_with(&store) || f.starts_with(&app))
                    && !f.components().any(|c| c.as_os_str() == "target")
            })
            .filter(|f| {
                let text = std::fs::read_to_string(f).unwrap_or_default();
                statement.iter().any(|s| text.contains(s))
            })
            .map(|f| f.display().to_string())
            .collect();
        assert!(files.len() > 20, "the sources were found");
        assert!(
            offenders.is_empty(),
            "SQL outside the store: {offenders:#?}"
        );
    }
}

#[cfg(test)]
mod transaction_tests {
    use super::testing;
    use domain::ApiError;

    #[test]
    fn a_nested_transaction_is_a_savepoint() {
        let db = testing::db();
        let count = |db: &super::Db| {
            db.count("SELECT COUNT(*) FROM outbox_sequences", &[])
                .unwrap()
        };
        let insert = |db: &super::Db, id: &str| {
            db.execute(
                "INSERT INTO outbox_sequences (client_id, object_type, object_id, last) VALUES ('c', 't', ?, 1)",
                &[id.into()],
            )
        };
        db.transaction(|tx| {
            insert(tx, "kept")?;
            let inner = tx.transaction(|tx| {
                insert(tx, "undone")?;
                Err::<(), _>(ApiError::conflict("no", "inner fails"))
            });
            assert!(inner.is_err());
            tx.transaction(|tx| insert(tx, "also kept"))
        })
        .unwrap();
        assert_eq!(count(&db), 2);
        let outer: Result<(), ApiError> = db.transaction(|tx| {
            tx.transaction(|tx| insert(tx, "inner ok"))?;
            Err(ApiError::conflict("no", "outer fails"))
        });
        assert!(outer.is_err());
        assert_eq!(count(&db), 2, "the outer rollback undoes the inner work");
    }
}

#[cfg(test)]
mod unavailable_tests {
    use super::{postgres_unavailable, sqlite_unavailable};

    #[test]
    fn a_lost_or_refusing_server_is_unavailable_and_a_bad_statement_is_not() {
        for text in [
            "Error { kind: Closed, cause: None }",
            "Error { kind: Io, cause: Some(Os { code: 104, kind: ConnectionReset, message: \"Connection reset by peer\" }) }",
            "Error { kind: Db, cause: Some(DbError { severity: \"FATAL\", parsed_severity: Some(Fatal), code: SqlState(E57P01), message: \"terminating connection due to administrator command\" }) }",
            "Error { kind: Db, cause: Some(DbError { severity: \"FATAL\", code: SqlState(E57P03), message: \"the database system is starting up\" }) }",
            "Error { kind: Db, cause: Some(DbError { severity: \"FATAL\", code: SqlState(E53300), message: \"sorry, too many clients already\" }) }",
            "Error { kind: Db, cause: Some(DbError { severity: \"ERROR\", code: SqlState(E40P01), message: \"deadlock detected\" }) }",
        ] {
            assert!(postgres_unavailable(text), "{text}");
        }
        for text in [
            "Error { kind: Db, cause: Some(DbError { severity: \"ERROR\", code: SqlState(E23505), message: \"duplicate key value violates unique constraint\" }) }",
            "Error { kind: Db, cause: Some(DbError { severity: \"ERROR\", code: SqlState(E42601), message: \"syntax error at or near\" }) }",
            "Error { kind: ToSql(0), cause: Some(WrongType) }",
        ] {
            assert!(!postgres_unavailable(text), "{text}");
        }
    }

    #[test]
    fn a_full_disk_or_a_busy_lock_is_unavailable_on_sqlite() {
        assert!(sqlite_unavailable("database or disk is full"));
        assert!(sqlite_unavailable("disk I/O error"));
        assert!(sqlite_unavailable("database is locked"));
        assert!(!sqlite_unavailable("UNIQUE constraint failed: users.email"));
        assert!(!sqlite_unavailable("no such table: nope"));
    }
}

#[cfg(test)]
mod held_insert_tests {
    use super::*;
    use std::cell::RefCell;

    /// What a stand-in was sent: each statement and its number of parameters.
    type Log = Rc<RefCell<Vec<(String, usize)>>>;

    /// A PostgreSQL stand-in that records what it is sent and fails a statement that
    /// mentions `fails`.
    struct Recording(Log);

    impl Backend for Recording {
        fn dialect(&self) -> Dialect {
            Dialect::Postgres
        }

        fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, BackendError> {
            self.0.borrow_mut().push((sql.to_string(), params.len()));
            if sql.contains("fails") {
                return Err(BackendError::from("refused".to_string()));
            }
            Ok(Vec::new())
        }

        /// Recorded as the statement would be executed: the held list as its `WITH`.
        fn query_carrying(
            &self,
            held: &str,
            sql: &str,
            params: &[Value],
        ) -> Result<Vec<Row>, BackendError> {
            self.query(&sql::carrying(held, sql), params)
        }

        fn set_aside(&self) {
            self.0.borrow_mut().push(("~set aside".to_string(), 0));
        }
    }

    fn recording() -> (Db, Log) {
        let log = Rc::new(RefCell::new(Vec::new()));
        (Db::new(Box::new(Recording(log.clone()))), log)
    }

    #[test]
    fn held_inserts_reach_postgres_as_one_statement_before_the_next() {
        let (db, log) = recording();
        db.transaction(|tx| {
            tx.insert_soon("INSERT INTO a (x, y) VALUES (?, ?)", &[1.into(), 2.into()])?;
            tx.insert_soon("INSERT INTO b (z) VALUES (?1)", &["z".into()])?;
            tx.query("SELECT 1 FROM a WHERE x = ?", &[1.into()])?;
            tx.insert_soon("INSERT INTO c (w) VALUES (?)", &[3.into()])
        })
        .unwrap();
        let sent = log.borrow().clone();
        assert_eq!(
            sent,
            [
                ("BEGIN".to_string(), 0),
                (
                    "WITH \"~held0\" AS (INSERT INTO a (x, y) VALUES ($1, $2)) \
                     INSERT INTO b (z) VALUES ($3)"
                        .to_string(),
                    3
                ),
                ("SELECT 1 FROM a WHERE x = $1".to_string(), 1),
                // The last one alone, before the commit.
                ("INSERT INTO c (w) VALUES ($1)".to_string(), 1),
                ("COMMIT".to_string(), 0),
            ]
        );
    }

    #[test]
    fn a_connection_is_set_aside_only_between_transactions() {
        let (db, log) = recording();
        db.set_aside();
        db.transaction(|tx| {
            // Kept in a transaction: another connection would not see its work.
            tx.set_aside();
            tx.execute("UPDATE c SET n = 1", &[])
        })
        .unwrap();
        db.query("SELECT n FROM c", &[]).unwrap();
        db.set_aside();
        let sent: Vec<String> = log.borrow().iter().map(|(s, _)| s.clone()).collect();
        assert_eq!(
            sent,
            [
                "~set aside",
                "BEGIN",
                "UPDATE c SET n = 1",
                "COMMIT",
                "SELECT n FROM c",
                "~set aside",
            ]
        );
    }

    #[test]
    fn the_next_statement_carries_held_inserts_when_it_names_none_of_their_tables() {
        let (db, log) = recording();
        db.transaction(|tx| {
            tx.insert_soon("INSERT INTO a (x) VALUES (?)", &[1.into()])?;
            tx.insert_soon("INSERT INTO b (y, z) VALUES (?, ?)", &[2.into(), 3.into()])?;
            tx.query("SELECT n FROM c WHERE k = ?", &[4.into()])?;
            tx.insert_soon("INSERT INTO a (x) VALUES (?)", &[5.into()])?;
            tx.execute("UPDATE c SET n = n + ? WHERE k = ?", &[6.into(), 7.into()])?;
            // A savepoint carries nothing: what is held is sent before it.
            tx.insert_soon("INSERT INTO a (x) VALUES (?)", &[8.into()])?;
            tx.transaction(|nested| nested.query("SELECT 1 FROM c", &[]))
        })
        .unwrap();
        let sent = log.borrow().clone();
        let expected = [
            ("BEGIN", 0),
            (
                "WITH \"~held0\" AS (INSERT INTO a (x) VALUES ($1)), \
                 \"~held1\" AS (INSERT INTO b (y, z) VALUES ($2, $3)) \
                 SELECT n FROM c WHERE k = $4",
                4,
            ),
            (
                "WITH \"~held0\" AS (INSERT INTO a (x) VALUES ($1)) \
                 UPDATE c SET n = n + $2 WHERE k = $3",
                3,
            ),
            ("INSERT INTO a (x) VALUES ($1)", 1),
            ("SAVEPOINT nested_1", 0),
            ("SELECT 1 FROM c", 0),
            ("RELEASE SAVEPOINT nested_1", 0),
            ("COMMIT", 0),
        ]
        .map(|(sql, n)| (sql.to_string(), n));
        assert_eq!(sent, expected);
    }

    #[test]
    fn held_inserts_of_a_failed_transaction_are_never_sent() {
        let (db, log) = recording();
        let failed: Result<(), ApiError> = db.transaction(|tx| {
            tx.insert_soon("INSERT INTO a (x) VALUES (?)", &[1.into()])?;
            Err(ApiError::conflict("no", "changed its mind"))
        });
        assert!(failed.is_err());
        assert_eq!(
            log.borrow()
                .iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>(),
            ["BEGIN", "ROLLBACK"]
        );
        // A held insert that fails fails the transaction, at its commit.
        log.borrow_mut().clear();
        let failed =
            db.transaction(|tx| tx.insert_soon("INSERT INTO fails (x) VALUES (?)", &[1.into()]));
        assert!(failed.is_err());
        assert_eq!(
            log.borrow()
                .iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>(),
            ["BEGIN", "INSERT INTO fails (x) VALUES ($1)", "ROLLBACK"]
        );
        // Outside a transaction, or anything but a plain insert: not held.
        log.borrow_mut().clear();
        db.insert_soon("INSERT INTO a (x) VALUES (?)", &[1.into()])
            .unwrap();
        assert_eq!(log.borrow().len(), 1);
        let refused = db.transaction(|tx| {
            tx.insert_soon("INSERT INTO a (x) VALUES (?) RETURNING x", &[1.into()])
        });
        assert!(refused.is_err());
    }
}
