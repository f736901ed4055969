//! What guest SQL may not do, enforced by SQLite itself on every connection a guest uses:
//! an authorizer (consulted while each statement is prepared) refuses `ATTACH`, `DETACH`,
//! extension loading and `PRAGMA` writes, and the attached-database limit is 0, so
//! `VACUUM` (which attaches its target, a file for `VACUUM INTO`) cannot run either.
//! Reads of harmless pragmas stay allowed. The key-value store's SQLite files are the
//! host's own and open without this guard.

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;

/// Pragmas a guest may read (without a value): settings and counters that reveal
/// nothing outside the database and change nothing.
const READABLE_PRAGMAS: &[&str] = &[
    "application_id",
    "auto_vacuum",
    "busy_timeout",
    "cache_size",
    "collation_list",
    "data_version",
    "encoding",
    "foreign_keys",
    "freelist_count",
    "journal_mode",
    "max_page_count",
    "page_count",
    "page_size",
    "recursive_triggers",
    "schema_version",
    "synchronous",
    "table_list",
    "temp_store",
    "user_version",
];

/// Pragmas whose value is an argument (a table or index name, a row limit) rather than
/// a new setting: allowed with or without one.
const QUERY_PRAGMAS: &[&str] = &[
    "foreign_key_check",
    "foreign_key_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "quick_check",
    "table_info",
    "table_xinfo",
];

/// Installs the guard on a connection a guest is about to use.
pub fn restrict_guest_sql(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.authorizer(Some(authorize));
    Ok(())
}

fn authorize(ctx: AuthContext<'_>) -> Authorization {
    if is_allowed(&ctx.action) {
        Authorization::Allow
    } else {
        Authorization::Deny
    }
}

fn is_allowed(action: &AuthAction<'_>) -> bool {
    match action {
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => false,
        AuthAction::Function { function_name } => {
            !function_name.eq_ignore_ascii_case("load_extension")
        }
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            QUERY_PRAGMAS.contains(&name.as_str())
                || (pragma_value.is_none() && READABLE_PRAGMAS.contains(&name.as_str()))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guarded() -> (tempfile_dir::Dir, Connection) {
        let dir = tempfile_dir::Dir::new();
        let conn = Connection::open(dir.path.join("db.sqlite")).unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
        restrict_guest_sql(&conn).unwrap();
        (dir, conn)
    }

    /// A directory removed on drop (the host crate has no tempfile dependency).
    mod tempfile_dir {
        pub struct Dir {
            pub path: std::path::PathBuf,
        }
        impl Dir {
            pub fn new() -> Dir {
                static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let path = std::env::temp_dir()
                    .join(format!("edgehost-sqlguard-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).unwrap();
                Dir { path }
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                std::fs::remove_dir_all(&self.path).ok();
            }
        }
    }

    #[test]
    fn refused_statements_fail_and_change_nothing() {
        let (dir, conn) = guarded();
        let other = dir.path.join("other.db");
        let into = dir.path.join("copy.db");
        let refused = [
            format!("ATTACH DATABASE '{}' AS other", other.display()),
            "DETACH DATABASE main".to_string(),
            format!("VACUUM INTO '{}'", into.display()),
            "VACUUM".to_string(),
            "SELECT load_extension('libnothing')".to_string(),
            "PRAGMA user_version = 7".to_string(),
            "PRAGMA journal_mode = OFF".to_string(),
            "PRAGMA writable_schema = ON".to_string(),
            "PRAGMA main.user_version = 7".to_string(),
            "PRAGMA optimize".to_string(),
            "PRAGMA database_list".to_string(),
        ];
        for sql in &refused {
            let err = conn.execute_batch(sql).expect_err(sql);
            let msg = err.to_string();
            assert!(
                msg.contains("not authorized")
                    || msg.contains("authorization denied")
                    || msg.contains("too many attached"),
                "{sql}: {msg}"
            );
        }
        assert!(!other.exists() && !into.exists(), "no file was created");
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 0);
    }

    #[test]
    fn ordinary_sql_and_harmless_pragma_reads_work() {
        let (_dir, conn) = guarded();
        conn.execute_batch("INSERT INTO t VALUES (2); CREATE INDEX tx ON t (x);")
            .unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
        for sql in [
            "PRAGMA user_version",
            "PRAGMA table_info(t)",
            "PRAGMA index_list(t)",
            "PRAGMA foreign_keys",
            "SELECT name FROM pragma_table_info('t')",
        ] {
            conn.prepare(sql)
                .and_then(|mut s| s.query([]).map(|_| ()))
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
}
