//! The guest's side: both SQLite interface versions on a view of the instance.

use std::collections::HashSet;

use rusqlite::types::Value as SqlValue;
use wasmtime::component::{HasData, Linker, Resource};

use super::pool::Databases;
use super::statements::{QueryOutput, SqliteConn, run_statement};
use crate::bindings::fermyon::spin::sqlite as v2;
use crate::bindings::spin::sqlite::sqlite as v3;
use crate::handles::Handles;

/// How many connections one instance may hold open at once (Spin's default capacity).
pub const MAX_OPEN_CONNECTIONS: usize = 256;

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
