//! The start-up migrations of `sql/`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rusqlite::Connection;
use sha2::{Digest, Sha256};

use super::pool::DbPool;

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
    use crate::sqlite::pool::WriterTimings;

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
