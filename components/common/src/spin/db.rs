//! The one data-access module: every SQL statement of every component goes through here.
//!
//! Statements are plain portable SQL with `?` placeholders and bound parameters, so a
//! PostgreSQL back end (Spin's `postgres` interface, `$n` placeholders) can be added here
//! without touching handlers.

use crate::ApiError;
use spin_sdk::sqlite::{Connection, QueryResult};

pub use spin_sdk::sqlite::{Row, Value};

pub struct Db {
    conn: Connection,
}

impl Db {
    /// Opens the `default` database.
    pub fn open() -> Result<Self, ApiError> {
        Connection::open_default()
            .map(|conn| Self { conn })
            .map_err(|e| ApiError::internal(format!("database unavailable: {e}")))
    }

    /// Runs one statement and answers its rows (if any).
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<QueryResult, ApiError> {
        self.conn
            .execute(sql, params)
            .map_err(|e| ApiError::internal(format!("database error: {e}")))
    }

    /// Maps every row of a query.
    pub fn query<T>(
        &self,
        sql: &str,
        params: &[Value],
        map: impl Fn(&Row<'_>) -> T,
    ) -> Result<Vec<T>, ApiError> {
        let result = self.execute(sql, params)?;
        Ok(result.rows().map(|row| map(&row)).collect())
    }

    /// Maps the first row of a query, if there is one.
    pub fn query_one<T>(
        &self,
        sql: &str,
        params: &[Value],
        map: impl Fn(&Row<'_>) -> T,
    ) -> Result<Option<T>, ApiError> {
        let result = self.execute(sql, params)?;
        let first = result.rows().next().map(|row| map(&row));
        Ok(first)
    }

    /// A single integer (e.g. `SELECT COUNT(*) ...`); 0 when there is no row.
    /// One page of `SELECT * FROM {table} WHERE {filter} ORDER BY {order}` (with the
    /// `scope` parameters of `filter`), and how many rows match in all.
    pub fn page<T>(
        &self,
        table: &str,
        filter: &str,
        scope: &[Value],
        order: &str,
        page: crate::pagination::Page,
        map: impl Fn(&Row<'_>) -> T,
    ) -> Result<(Vec<T>, i64), ApiError> {
        let total = self.count(
            &format!("SELECT COUNT(*) FROM {table} WHERE {filter}"),
            scope,
        )?;
        let mut params = scope.to_vec();
        params.extend([int(page.limit.into()), int(page.offset.into())]);
        let items = self.query(
            &format!("SELECT * FROM {table} WHERE {filter} ORDER BY {order} LIMIT ? OFFSET ?"),
            &params,
            map,
        )?;
        Ok((items, total))
    }

    pub fn count(&self, sql: &str, params: &[Value]) -> Result<i64, ApiError> {
        let result = self.execute(sql, params)?;
        Ok(result
            .rows
            .first()
            .and_then(|row| row.get::<i64>(0))
            .unwrap_or(0))
    }

    /// Runs `work` inside a transaction: committed when it succeeds, rolled back otherwise.
    pub fn transaction<T>(
        &self,
        work: impl FnOnce(&Db) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        self.execute("BEGIN", &[])?;
        match work(self) {
            Ok(value) => {
                self.execute("COMMIT", &[])?;
                Ok(value)
            }
            Err(err) => {
                let _ = self.execute("ROLLBACK", &[]);
                Err(err)
            }
        }
    }
}

/// A text parameter.
pub fn text(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

/// A text parameter, or NULL.
pub fn opt_text(s: Option<&str>) -> Value {
    s.map_or(Value::Null, |s| Value::Text(s.to_string()))
}

/// A NULL parameter.
pub fn null() -> Value {
    Value::Null
}

/// An integer parameter.
pub fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// A boolean stored as 0 or 1.
pub fn boolean(b: bool) -> Value {
    Value::Integer(i64::from(b))
}

/// Reads a text column; absent or NULL is "".
pub fn col_text(row: &Row<'_>, column: &str) -> String {
    row.get::<&str>(column).unwrap_or_default().to_string()
}

/// Reads a nullable text column.
pub fn col_opt_text(row: &Row<'_>, column: &str) -> Option<String> {
    row.get::<&str>(column).map(str::to_string)
}

/// Reads an integer column; absent or NULL is 0.
pub fn col_int(row: &Row<'_>, column: &str) -> i64 {
    row.get::<i64>(column).unwrap_or_default()
}

/// Reads a 0/1 column as a boolean.
pub fn col_bool(row: &Row<'_>, column: &str) -> bool {
    col_int(row, column) != 0
}
