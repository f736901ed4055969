//! What the platform stored, read (and, to stage a case, changed) beneath the API, on
//! whichever back end the platform runs: the SQLite files of its state directory, or its
//! PostgreSQL database and Redis database. SQL uses `?1`, `?2` placeholders on both.

use crate::Platform;
use crate::backends::{PostgresCluster, RedisServer, Resp};

impl Platform {
    /// The first column of each row `sql` answers, as text (`None` for NULL). Text
    /// parameters only; compare numbers with `CAST(... AS TEXT)` where needed.
    pub async fn db_texts(&self, sql: &str, params: &[&str]) -> Vec<Option<String>> {
        match &self.backends {
            None => {
                let db = self.sqlite_db();
                let mut statement = db.prepare(sql).expect("prepare");
                statement
                    .query_map(rusqlite::params_from_iter(params), |row| row.get(0))
                    .expect("query")
                    .collect::<Result<_, _>>()
                    .expect("rows")
            }
            Some(b) => {
                let client = PostgresCluster::shared().await.admin_of(&b.database).await;
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| p as _).collect();
                client
                    .query(&postgres_placeholders(sql), &params)
                    .await
                    .expect("query")
                    .iter()
                    .map(|row| row.get(0))
                    .collect()
            }
        }
    }

    /// The single integer `sql` answers (a `COUNT(*)`, a `SUM`).
    pub async fn db_number(&self, sql: &str, params: &[&str]) -> i64 {
        let wrapped = format!("SELECT CAST(({sql}) AS TEXT)");
        let texts = self.db_texts(&wrapped, params).await;
        texts[0]
            .as_deref()
            .unwrap_or("0")
            .parse()
            .expect("an integer")
    }

    /// Runs a statement that changes rows; answers how many it changed.
    pub async fn db_execute(&self, sql: &str, params: &[&str]) -> u64 {
        match &self.backends {
            None => self
                .sqlite_db()
                .execute(sql, rusqlite::params_from_iter(params))
                .expect("execute") as u64,
            Some(b) => {
                let client = PostgresCluster::shared().await.admin_of(&b.database).await;
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| p as _).collect();
                client
                    .execute(&postgres_placeholders(sql), &params)
                    .await
                    .expect("execute")
            }
        }
    }

    /// The keys of the key-value store `default` that start with `prefix`, sorted.
    pub async fn kv_keys(&self, prefix: &str) -> Vec<String> {
        let mut keys: Vec<String> = match &self.backends {
            None => {
                let kv = self.sqlite_kv();
                let mut statement = kv
                    .prepare("SELECT key FROM spin_key_value WHERE store = 'default'")
                    .expect("prepare");
                statement
                    .query_map([], |row| row.get::<_, String>(0))
                    .expect("query")
                    .collect::<Result<_, _>>()
                    .expect("rows")
            }
            Some(b) => match RedisServer::command(&b.redis_url, &[b"KEYS", b"*"]) {
                Resp::Array(keys) => keys
                    .into_iter()
                    .filter_map(|k| match k {
                        Resp::Bulk(Some(k)) => String::from_utf8(k).ok(),
                        _ => None,
                    })
                    .collect(),
                other => panic!("KEYS: {other:?}"),
            },
        };
        keys.retain(|k| k.starts_with(prefix));
        keys.sort();
        keys
    }

    /// Renames a key of the key-value store `default` (it must exist).
    pub async fn kv_rename(&self, from: &str, to: &str) {
        match &self.backends {
            None => {
                let n = self
                    .sqlite_kv()
                    .execute(
                        "UPDATE spin_key_value SET key = ?1 WHERE store = 'default' AND key = ?2",
                        [to, from],
                    )
                    .expect("rename");
                assert_eq!(n, 1, "no key {from:?}");
            }
            Some(b) => {
                let reply = RedisServer::command(
                    &b.redis_url,
                    &[b"RENAME", from.as_bytes(), to.as_bytes()],
                );
                assert_eq!(reply, Resp::Status("OK".into()), "RENAME {from:?}");
            }
        }
    }

    fn sqlite_db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.state_dir().join("sqlite_db.db")).expect("open database")
    }

    fn sqlite_kv(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.state_dir().join("sqlite_key_value.db"))
            .expect("open key-value store")
    }
}

/// `?N` placeholders as PostgreSQL's `$N`.
fn postgres_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}
