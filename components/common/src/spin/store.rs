//! The store's back ends in a Spin component: Spin's SQLite interface, or its PostgreSQL
//! interface, chosen by the variable `database` (`sqlite`, the default, or `postgres` with
//! the connection string in `postgres_url`).

use super::config;
use crate::ApiError;
use crate::store::{Backend, Db, Dialect, Row, Value, sql};
// `spin:postgres@3.0.0`: the newest PostgreSQL interface every Spin 3.x and 4.x and Fermyon
// Wasm Functions accept (see docs/data.md).
use spin_sdk::pg3 as pg;
use spin_sdk::sqlite;
use std::rc::Rc;

thread_local! {
    /// The connection this instance opened. An instance serves one request, so every
    /// `open()` of a request shares one connection: a request holds one PostgreSQL
    /// connection from the host's pool, not one per store call.
    static OPENED: std::cell::RefCell<Option<Db>> = const { std::cell::RefCell::new(None) };
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

fn connect() -> Result<Db, ApiError> {
    match config::var_or("database", "sqlite").as_str() {
        "sqlite" => sqlite::Connection::open_default()
            .map(|conn| Db::new(Box::new(SpinSqlite(conn))))
            .map_err(|e| ApiError::internal(format!("database unavailable: {e}"))),
        "postgres" => {
            let url = config::required("postgres_url")?;
            pg::Connection::open(&url)
                .map(|conn| Db::new(Box::new(SpinPostgres(conn))))
                .map_err(|e| ApiError::internal(format!("database unavailable: {e:?}")))
        }
        other => Err(ApiError::unavailable(
            "not_configured",
            format!("the variable database is {other:?}: use sqlite or postgres"),
        )),
    }
}

struct SpinSqlite(sqlite::Connection);

impl Backend for SpinSqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, String> {
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
        let result = self.0.execute(sql, &params).map_err(|e| e.to_string())?;
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

struct SpinPostgres(pg::Connection);

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

fn pg_error(e: pg::PgError) -> String {
    format!("{e:?}")
}

impl Backend for SpinPostgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, String> {
        // Spin 4.0.0 to 4.0.2 never answer a query without rows: every query answers at
        // least the sentinel row (see `sql::never_empty`).
        let set = self
            .0
            .query(&sql::never_empty(sql), &pg_params(params))
            .map_err(pg_error)?;
        let names = set.columns.into_iter().map(|c| c.name).collect();
        let (names, rows) =
            sql::without_sentinel(names, set.rows, |v| matches!(v, pg::DbValue::Boolean(true)))
                .ok_or("the query's answer lacks its sentinel row")?;
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

    fn execute(&self, sql: &str, params: &[Value]) -> Result<(), String> {
        self.0
            .execute(sql, &pg_params(params))
            .map(|_| ())
            .map_err(pg_error)
    }
}
