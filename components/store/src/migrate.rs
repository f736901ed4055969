//! Schema migrations for every back end, from one list: the files of
//! `components/store/migrations/`, applied in order, each in its own transaction, recorded
//! in `schema_migrations` with a checksum. Running twice applies nothing new; runners racing
//! each other take turns (a lock row that each transaction updates first), so each file is
//! applied once.

use super::{Db, Value, sql};
use domain::ApiError;
use domain::ids::sha256_hex;

/// Every migration, in the order it is applied.
/// One migration: a file of statements, and optionally a step in code that runs after them
/// in the same transaction (for changes SQL cannot make portably, such as drawing random
/// values from the CSPRNG).
pub struct Migration {
    pub version: &'static str,
    pub sql: &'static str,
    pub data: Option<DataStep>,
}

/// A migration's step in code; its name is part of the migration's checksum.
pub struct DataStep {
    pub name: &'static str,
    pub run: fn(&Db, i64) -> Result<(), ApiError>,
}

impl Migration {
    const fn sql(version: &'static str, sql: &'static str) -> Migration {
        Migration {
            version,
            sql,
            data: None,
        }
    }

    /// What a released migration must keep: its statements and its data step's name.
    fn checksum(&self) -> String {
        match &self.data {
            None => sha256_hex(self.sql.as_bytes()),
            Some(step) => {
                sha256_hex(format!("{}\n-- data step: {}", self.sql, step.name).as_bytes())
            }
        }
    }
}

/// Every migration, in the order it is applied.
pub const MIGRATIONS: &[Migration] = &[
    Migration::sql(
        "0001_sdk_clients",
        include_str!("../migrations/0001_sdk_clients.sql"),
    ),
    Migration::sql("0002_users", include_str!("../migrations/0002_users.sql")),
    Migration::sql(
        "0003_broadcasts",
        include_str!("../migrations/0003_broadcasts.sql"),
    ),
    Migration::sql("0004_events", include_str!("../migrations/0004_events.sql")),
    Migration::sql(
        "0005_music_links",
        include_str!("../migrations/0005_music_links.sql"),
    ),
    Migration::sql("0006_files", include_str!("../migrations/0006_files.sql")),
    Migration::sql(
        "0008_cohosts",
        include_str!("../migrations/0008_cohosts.sql"),
    ),
    Migration::sql("0009_chat", include_str!("../migrations/0009_chat.sql")),
    Migration::sql("0010_trust", include_str!("../migrations/0010_trust.sql")),
    Migration::sql("0011_outbox", include_str!("../migrations/0011_outbox.sql")),
    Migration::sql(
        "0020_webhooks",
        include_str!("../migrations/0020_webhooks.sql"),
    ),
    Migration::sql("0030_ledger", include_str!("../migrations/0030_ledger.sql")),
    Migration::sql("0031_gifts", include_str!("../migrations/0031_gifts.sql")),
    Migration::sql(
        "0032_payouts",
        include_str!("../migrations/0032_payouts.sql"),
    ),
    Migration::sql(
        "0033_subscriptions",
        include_str!("../migrations/0033_subscriptions.sql"),
    ),
    Migration::sql(
        "0034_chat_badges",
        include_str!("../migrations/0034_chat_badges.sql"),
    ),
    Migration::sql(
        "0040_analytics",
        include_str!("../migrations/0040_analytics.sql"),
    ),
    Migration::sql(
        "0050_recordings",
        include_str!("../migrations/0050_recordings.sql"),
    ),
    Migration::sql(
        "0060_chat_moderation",
        include_str!("../migrations/0060_chat_moderation.sql"),
    ),
    Migration::sql(
        "0070_resumable_uploads",
        include_str!("../migrations/0070_resumable_uploads.sql"),
    ),
    Migration::sql(
        "0080_chat_screening",
        include_str!("../migrations/0080_chat_screening.sql"),
    ),
    Migration {
        version: "0090_media",
        sql: include_str!("../migrations/0090_media.sql"),
        data: Some(DataStep {
            name: "replace stream keys derived from the public streamId",
            run: replace_derived_stream_keys,
        }),
    },
    Migration::sql(
        "0100_error_reason",
        include_str!("../migrations/0100_error_reason.sql"),
    ),
    Migration::sql(
        "0110_ledger_pending",
        include_str!("../migrations/0110_ledger_pending.sql"),
    ),
    Migration::sql(
        "0120_analytics_pending",
        include_str!("../migrations/0120_analytics_pending.sql"),
    ),
    Migration::sql(
        "0130_ingest_refusals",
        include_str!("../migrations/0130_ingest_refusals.sql"),
    ),
    Migration::sql(
        "0140_media_ladder",
        include_str!("../migrations/0140_media_ladder.sql"),
    ),
    Migration::sql(
        "0150_player_embed_origins",
        include_str!("../migrations/0150_player_embed_origins.sql"),
    ),
    Migration::sql("0160_views", include_str!("../migrations/0160_views.sql")),
    Migration::sql(
        "0170_replays",
        include_str!("../migrations/0170_replays.sql"),
    ),
    Migration::sql("0180_dvr", include_str!("../migrations/0180_dvr.sql")),
    Migration::sql("0190_clips", include_str!("../migrations/0190_clips.sql")),
];

/// Broadcasts and scheduled events made before ingest keys were random had the streamId
/// without dashes as their key, and the streamId is public: each such key is replaced by
/// a fresh one.
fn replace_derived_stream_keys(db: &Db, _now: i64) -> Result<(), ApiError> {
    for table in ["broadcasts", "scheduled_events"] {
        let rows = db.query(
            &format!("SELECT id FROM {table} WHERE stream_key = REPLACE(stream_id, '-', '')"),
            &[],
        )?;
        for row in rows {
            db.execute(
                &format!("UPDATE {table} SET stream_key = ? WHERE id = ?"),
                &[
                    domain::media::new_stream_key().into(),
                    row.text("id").into(),
                ],
            )?;
        }
    }
    Ok(())
}

/// The row that concurrent runners queue on.
const LOCK: &str = "~lock";

/// What a run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub applied: Vec<&'static str>,
    pub already: usize,
}

/// Applies every migration not applied yet.
pub fn run(db: &Db, now: i64) -> Result<Report, ApiError> {
    write_ahead_log(db);
    create_ledger(db)?;
    let mut report = Report::default();
    for migration in MIGRATIONS {
        let version = migration.version;
        let checksum = migration.checksum();
        let applied = db.transaction(|tx| {
            tx.execute(
                "UPDATE schema_migrations SET applied_at = ? WHERE version = ?",
                &[Value::Int(now), LOCK.into()],
            )?;
            let recorded = tx.query_one(
                "SELECT checksum FROM schema_migrations WHERE version = ?",
                &[version.into()],
            )?;
            if let Some(row) = recorded {
                let recorded = row.text("checksum");
                if recorded != checksum {
                    return Err(ApiError::internal(format!(
                        "migration {version} was applied with another content ({recorded}); migrations must not change once released"
                    )));
                }
                return Ok(false);
            }
            for statement in sql::statements(migration.sql) {
                tx.execute(&statement, &[]).map_err(|e| {
                    ApiError::internal(format!("migration {version}: {}", e.detail))
                })?;
            }
            if let Some(step) = &migration.data {
                (step.run)(tx, now).map_err(|e| {
                    ApiError::internal(format!("migration {version} ({}): {}", step.name, e.detail))
                })?;
            }
            tx.execute(
                "INSERT INTO schema_migrations (version, checksum, applied_at) VALUES (?, ?, ?)",
                &[version.into(), checksum.into(), Value::Int(now)],
            )?;
            Ok(true)
        })?;
        if applied {
            report.applied.push(version);
        } else {
            report.already += 1;
        }
    }
    Ok(report)
}

/// On SQLite, switches the database to write-ahead logging. The mode is kept in the
/// database file, so once is enough, and every connection opened on it afterwards uses it:
/// a host that opens a connection per request (the real Spin does) then commits with one
/// sync of the log instead of a rollback journal's several, and readers no longer wait for
/// a writer. It cannot be done inside a transaction, hence here, before the migrations. A
/// back end that refuses it (a remote libSQL, an in-memory database, which answers
/// `memory`) keeps its own mode: nothing depends on it but speed.
fn write_ahead_log(db: &Db) {
    if db.dialect() == super::Dialect::Sqlite {
        let _ = db.query("PRAGMA journal_mode = WAL", &[]);
    }
}

/// The ledger table and its lock row. Two runners creating the table at once can collide
/// on PostgreSQL's catalog, so a failed first try is tried once more.
fn create_ledger(db: &Db) -> Result<(), ApiError> {
    let create = || {
        db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, checksum TEXT NOT NULL, applied_at BIGINT NOT NULL)",
            &[],
        )
    };
    if create().is_err() {
        create()?;
    }
    db.execute(
        "INSERT INTO schema_migrations (version, checksum, applied_at) VALUES (?, '', 0) ON CONFLICT (version) DO NOTHING",
        &[LOCK.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn a_sqlite_database_file_is_switched_to_write_ahead_logging_once() {
        let path =
            std::env::temp_dir().join(format!("migrate-wal-{}.db", domain::ids::random_hex(8)));
        let journal_mode = |conn: &rusqlite::Connection| -> String {
            conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap()
        };
        let fresh = rusqlite::Connection::open(&path).unwrap();
        assert_eq!(journal_mode(&fresh), "delete", "SQLite's own default");
        let db = Db::new(Box::new(testing::Embedded::new(fresh)));
        run(&db, 1).unwrap();
        drop(db);
        // A connection opened afterwards (a later request's) finds the mode in the file.
        let later = rusqlite::Connection::open(&path).unwrap();
        assert_eq!(journal_mode(&later), "wal");
        drop(later);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[test]
    fn every_migration_applies_once() {
        let db = testing::db();
        let again = run(&db, 1).unwrap();
        assert_eq!(
            again,
            Report {
                applied: vec![],
                already: MIGRATIONS.len()
            }
        );
        let recorded = db
            .count(
                "SELECT COUNT(*) FROM schema_migrations WHERE version <> ?",
                &[LOCK.into()],
            )
            .unwrap();
        assert_eq!(recorded, MIGRATIONS.len() as i64);
    }

    #[test]
    fn keys_derived_from_the_stream_id_are_replaced() {
        let db = testing::db();
        let derived =
            super::super::broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 1)
                .unwrap();
        let own = super::super::broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 1)
            .unwrap();
        let old_key = derived.identity.stream_id.replace('-', "");
        db.execute(
            "UPDATE broadcasts SET stream_key = ? WHERE id = ?",
            &[old_key.clone().into(), derived.id.clone().into()],
        )
        .unwrap();
        db.execute(
            "INSERT INTO scheduled_events (id, client_id, owner_id, title, visibility, scheduled_for, short_id, stream_id, stream_key, room_name, created_at) \
             VALUES ('e1', 'c1', 'u1', 'Later', 'public', 10, 'Ev3ntId1', 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee', 'aaaaaaaabbbb4ccc8dddeeeeeeeeeeee', 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee', 'now')",
            &[],
        )
        .unwrap();
        replace_derived_stream_keys(&db, 2).unwrap();
        let key_of = |table: &str, id: &str| {
            db.query_one(
                &format!("SELECT stream_key FROM {table} WHERE id = ?"),
                &[id.into()],
            )
            .unwrap()
            .unwrap()
            .text("stream_key")
        };
        let replaced = key_of("broadcasts", &derived.id);
        assert_ne!(replaced, old_key);
        assert!(domain::media::is_stream_key(&replaced));
        let event_key = key_of("scheduled_events", "e1");
        assert_ne!(event_key, "aaaaaaaabbbb4ccc8dddeeeeeeeeeeee");
        assert!(domain::media::is_stream_key(&event_key));
        // A key of its own is kept.
        assert_eq!(key_of("broadcasts", &own.id), own.identity.stream_key);
    }

    #[test]
    fn a_changed_migration_is_refused() {
        let db = testing::db();
        db.execute(
            "UPDATE schema_migrations SET checksum = 'other' WHERE version = '0002_users'",
            &[],
        )
        .unwrap();
        let err = run(&db, 2).unwrap_err();
        assert!(err.detail.contains("0002_users"), "{err}");
    }

    #[test]
    fn migrations_are_in_order_and_named_like_their_files() {
        let mut sorted: Vec<&str> = MIGRATIONS.iter().map(|m| m.version).collect();
        sorted.sort_unstable();
        let listed: Vec<&str> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(sorted, listed);
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let expected: Vec<String> = listed.iter().map(|v| format!("{v}.sql")).collect();
        assert_eq!(files, expected, "every file is listed, and nothing else");
    }
}
