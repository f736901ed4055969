//! Scheduled jobs (`POST /api/jobs/{name}`, jobs tier): periodic work is an HTTP route,
//! called by the platform's scheduler (edgehost's `jobs.toml`, `spin aka crons`, a
//! Kubernetes CronJob). Each call does a bounded batch and says how much is left, so the
//! scheduler calls again while `remaining` is above zero.

use common::spin::db::{self, Db};
use common::spin::http::{JobsCtx, Reply, json};
use common::spin::rate_limit;
use common::{ApiError, time};
use serde_json::json;

/// Rows each kind of record may lose per call.
const BATCH: i64 = 500;
/// Seen SFU webhook ids are kept this long (LiveKit retries within minutes).
const SFU_EVENT_KEEP_SECS: i64 = 7 * 86_400;
/// Invites are kept this long after they expire.
const INVITE_KEEP_SECS: i64 = 86_400;
/// An upload still `uploading` after this long was abandoned.
const ABANDONED_UPLOAD_SECS: i64 = 86_400;

/// Deletes up to `BATCH` rows of `table` whose `key` is among those matching `filter`;
/// answers how many went.
fn delete_batch(
    db: &Db,
    table: &str,
    key: &str,
    filter: &str,
    params: &[db::Value],
) -> Result<i64, ApiError> {
    let mut params = params.to_vec();
    params.push(db::int(BATCH));
    let removed = db.execute(
        &format!(
            "DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} WHERE {filter} LIMIT ?) RETURNING {key}"
        ),
        &params,
    )?;
    Ok(removed.rows.len() as i64)
}

/// How many rows of `table` match `filter` (what a next call would still prune).
fn pending(db: &Db, table: &str, filter: &str, params: &[db::Value]) -> Result<i64, ApiError> {
    db.count(
        &format!("SELECT COUNT(*) FROM {table} WHERE {filter}"),
        params,
    )
}

/// `POST /api/jobs/migrate`: applies the schema migrations not applied yet, on whichever
/// back end `database` names. Safe to run twice and concurrently.
pub fn migrate(_ctx: &JobsCtx) -> Reply {
    let db = common::spin::store::open()?;
    let report = common::store::migrate::run(&db, time::now())?;
    Ok(json(
        200,
        &json!({
            "job": "migrate",
            "done": report.applied.len(),
            "remaining": 0,
            "applied": report.applied,
            "alreadyApplied": report.already,
        }),
    ))
}

/// `POST /api/jobs/prune`: removes what has outlived its use: seen signatures (replay
/// keys), expired refresh tokens, rate-limit events, old SFU webhook ids, expired invites,
/// and abandoned uploads (with their chunks).
pub fn prune(_ctx: &JobsCtx) -> Reply {
    let db = Db::open()?;
    let now = time::now();
    let tables: [(&str, &str, &str, Vec<db::Value>); 4] = [
        (
            "seen_signatures",
            "signature",
            "expires_at <= ?",
            vec![db::int(now)],
        ),
        (
            "refresh_tokens",
            "token_hash",
            "expires_at <= ?",
            vec![db::int(now)],
        ),
        (
            "sfu_webhook_events",
            "id",
            "received_at <= ?",
            vec![db::int(now - SFU_EVENT_KEEP_SECS)],
        ),
        (
            "cohost_invites",
            "token_hash",
            "expires_at <= ?",
            vec![db::int(now - INVITE_KEEP_SECS)],
        ),
    ];
    let mut done = 0;
    let mut remaining = 0;
    let mut detail = serde_json::Map::new();
    for (table, key, filter, params) in &tables {
        let removed = delete_batch(&db, table, key, filter, params)?;
        done += removed;
        remaining += pending(&db, table, filter, params)?;
        detail.insert((*table).to_string(), removed.into());
    }
    let events = rate_limit::prune(&db, now, BATCH)?;
    done += events;
    detail.insert("rate_events".into(), events.into());
    let store = common::spin::store::open()?;
    let uploads = crate::files::remove_abandoned(&store, now - ABANDONED_UPLOAD_SECS, BATCH)?;
    done += uploads;
    detail.insert("abandoned_uploads".into(), uploads.into());
    Ok(json(
        200,
        &json!({ "job": "prune", "done": done, "remaining": remaining, "removed": detail }),
    ))
}
