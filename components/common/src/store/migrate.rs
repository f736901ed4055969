//! Schema migrations for every back end, from one list: the files of
//! `components/common/migrations/`, applied in order, each in its own transaction, recorded
//! in `schema_migrations` with a checksum. Running twice applies nothing new; runners racing
//! each other take turns (a lock row that each transaction updates first), so each file is
//! applied once.

use super::{Db, Value, sql};
use crate::ApiError;
use crate::ids::sha256_hex;

/// Every migration, in the order it is applied.
pub const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_sdk_clients",
        include_str!("../../migrations/0001_sdk_clients.sql"),
    ),
    (
        "0002_users",
        include_str!("../../migrations/0002_users.sql"),
    ),
    (
        "0003_broadcasts",
        include_str!("../../migrations/0003_broadcasts.sql"),
    ),
    (
        "0004_events",
        include_str!("../../migrations/0004_events.sql"),
    ),
    (
        "0005_music_links",
        include_str!("../../migrations/0005_music_links.sql"),
    ),
    (
        "0006_files",
        include_str!("../../migrations/0006_files.sql"),
    ),
    (
        "0008_cohosts",
        include_str!("../../migrations/0008_cohosts.sql"),
    ),
    ("0009_chat", include_str!("../../migrations/0009_chat.sql")),
    (
        "0010_trust",
        include_str!("../../migrations/0010_trust.sql"),
    ),
    (
        "0011_outbox",
        include_str!("../../migrations/0011_outbox.sql"),
    ),
    (
        "0020_webhooks",
        include_str!("../../migrations/0020_webhooks.sql"),
    ),
    (
        "0030_ledger",
        include_str!("../../migrations/0030_ledger.sql"),
    ),
    (
        "0031_gifts",
        include_str!("../../migrations/0031_gifts.sql"),
    ),
    (
        "0032_payouts",
        include_str!("../../migrations/0032_payouts.sql"),
    ),
    (
        "0033_subscriptions",
        include_str!("../../migrations/0033_subscriptions.sql"),
    ),
    (
        "0034_chat_badges",
        include_str!("../../migrations/0034_chat_badges.sql"),
    ),
    (
        "0040_analytics",
        include_str!("../../migrations/0040_analytics.sql"),
    ),
    (
        "0050_recordings",
        include_str!("../../migrations/0050_recordings.sql"),
    ),
    (
        "0060_chat_moderation",
        include_str!("../../migrations/0060_chat_moderation.sql"),
    ),
    (
        "0070_resumable_uploads",
        include_str!("../../migrations/0070_resumable_uploads.sql"),
    ),
    (
        "0080_chat_screening",
        include_str!("../../migrations/0080_chat_screening.sql"),
    ),
];

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
    create_ledger(db)?;
    let mut report = Report::default();
    for (version, text) in MIGRATIONS {
        let checksum = sha256_hex(text.as_bytes());
        let applied = db.transaction(|tx| {
            tx.execute(
                "UPDATE schema_migrations SET applied_at = ? WHERE version = ?",
                &[Value::Int(now), LOCK.into()],
            )?;
            let recorded = tx.query_one(
                "SELECT checksum FROM schema_migrations WHERE version = ?",
                &[(*version).into()],
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
            for statement in sql::statements(text) {
                tx.execute(&statement, &[]).map_err(|e| {
                    ApiError::internal(format!("migration {version}: {}", e.detail))
                })?;
            }
            tx.execute(
                "INSERT INTO schema_migrations (version, checksum, applied_at) VALUES (?, ?, ?)",
                &[(*version).into(), checksum.into(), Value::Int(now)],
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
    use crate::store::testing;

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
        let mut sorted: Vec<&str> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        sorted.sort_unstable();
        let listed: Vec<&str> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
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
