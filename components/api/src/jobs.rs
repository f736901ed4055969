//! Scheduled jobs (`POST /api/jobs/{name}`, jobs tier): periodic work is an HTTP route,
//! called by the platform's scheduler (edgehost's `jobs.toml`, `spin aka crons`, a
//! Kubernetes CronJob). Each call does a bounded batch and says how much is left, so the
//! scheduler calls again while `remaining` is above zero.

use crate::ApiRoute;
use domain::ApiError;
use edge::answers::Progress;
use edge::endpoint;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::JobsCtx;
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;
use store::{analytics, cohosts, idempotency, moderation, rate_limits, replay, users, webhooks};

/// Rows each kind of record may lose per call.
const BATCH: i64 = 500;
/// Expired resumable uploads removed per call (each removes up to 8 chunks per attempt).
const UPLOAD_BATCH: i64 = 50;
/// Seen SFU webhook ids are kept this long (LiveKit retries within minutes).
const SFU_EVENT_KEEP_SECS: i64 = 7 * 86_400;
/// Invites are kept this long after they expire.
const INVITE_KEEP_SECS: i64 = 86_400;
/// Who was active on a day only matters while that day is counted.
const ACTIVE_USER_MARK_KEEP_SECS: i64 = 2 * 86_400;
/// Outbox events and finished webhook deliveries are kept this long (a tenant may recover
/// failed deliveries of this window).
const WEBHOOK_KEEP_SECS: i64 = 30 * 86_400;
/// HLS views are kept this long after their last beacon once their broadcast is rolled up
/// (its figures are in the day rows; views by rendition cover this window).
const VIEW_KEEP_SECS: i64 = 90 * 86_400;
/// An upload still `uploading` after this long was abandoned.
const ABANDONED_UPLOAD_SECS: i64 = 86_400;

/// What a migration call did.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "MigrateJobReport")]
pub struct MigrateReport {
    #[schemars(extend("const" = "migrate"))]
    job: &'static str,
    #[serde(flatten)]
    progress: Progress,
    /// The migrations this call applied, in order.
    applied: Vec<&'static str>,
    /// How many were applied before.
    #[schemars(range(min = 0))]
    already_applied: i64,
}

/// What a pruning call removed.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "PruneJobReport")]
pub struct PruneReport {
    #[schemars(extend("const" = "prune"))]
    job: &'static str,
    #[serde(flatten)]
    progress: Progress,
    /// How many of each kind of record.
    #[schemars(with = "BTreeMap<String, u64>")]
    removed: BTreeMap<&'static str, i64>,
}

/// The schema migrations and the pruning of what has outlived its use.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(POST "/api/jobs/migrate", Jobs(migrate), "Migrate (jobs)"),
    endpoint!(POST "/api/jobs/prune", Jobs(prune), "Prune (jobs)"),
];

/// Applies the schema migrations not applied yet, on whichever back end `database` names.
/// Safe to run twice and concurrently.
fn migrate(ctx: &JobsCtx, _: NoBody) -> Result<Json<MigrateReport>, ApiError> {
    let db = ctx.db()?;
    let report = store::migrate::run(&db, ctx.now())?;
    let progress = Progress {
        done: report.applied.len() as i64,
        remaining: 0,
    };
    Ok(Json(MigrateReport {
        job: "migrate",
        progress,
        applied: report.applied,
        already_applied: report.already as i64,
    }))
}

/// Removes what has outlived its use: seen signatures (replay
/// keys), money requests' idempotency keys (after 24 h), expired refresh tokens, rate-limit
/// events and slow-mode slots, old SFU webhook ids, expired invites, outbox events and
/// webhook deliveries older than 30 days (pending ones stay), abandoned uploads (with their
/// chunks), expired resumable uploads (with their parts), and HLS views of rolled-up
/// broadcasts 90 days after their last beacon. Each kind loses at most a batch per call.
fn prune(ctx: &JobsCtx, _: NoBody) -> Result<Json<PruneReport>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    // (kind, removed, batch)
    let counts = [
        ("seen_signatures", replay::prune(&db, now, BATCH)?, BATCH),
        (
            "refresh_tokens",
            users::prune_refresh_tokens(&db, now, BATCH)?,
            BATCH,
        ),
        ("rate_events", rate_limits::prune(&db, now, BATCH)?, BATCH),
        (
            "chat_slow_mode",
            moderation::prune_slow_mode(&db, now * 1000, BATCH)?,
            BATCH,
        ),
        (
            "sfu_webhook_events",
            cohosts::prune_deliveries(&db, now - SFU_EVENT_KEEP_SECS, BATCH)?,
            BATCH,
        ),
        (
            "cohost_invites",
            cohosts::prune_invites(&db, now - INVITE_KEEP_SECS, BATCH)?,
            BATCH,
        ),
        (
            "idempotency_keys",
            idempotency::prune(&db, now, BATCH)?,
            BATCH,
        ),
        (
            "webhook_events",
            webhooks::prune(&db, now - WEBHOOK_KEEP_SECS, BATCH)?,
            BATCH,
        ),
        (
            "abandoned_uploads",
            crate::files::remove_abandoned(&db, now - ABANDONED_UPLOAD_SECS, BATCH)?,
            BATCH,
        ),
        (
            "expired_resumable_uploads",
            crate::uploads::remove_expired(&db, now, UPLOAD_BATCH)?,
            UPLOAD_BATCH,
        ),
        (
            "analytics_shares",
            analytics::prune_shares(&db, now, BATCH)?,
            BATCH,
        ),
        (
            "analytics_active_users",
            analytics::prune_active_users(&db, now - ACTIVE_USER_MARK_KEEP_SECS, BATCH)?,
            BATCH,
        ),
        (
            "hls_views",
            store::views::prune(&db, (now - VIEW_KEEP_SECS) * 1000, BATCH)?,
            BATCH,
        ),
    ];
    let progress = Progress {
        done: counts.iter().map(|(_, n, _)| n).sum(),
        // A kind that filled its batch may have more: the scheduler calls again.
        remaining: counts.iter().filter(|(_, n, batch)| n == batch).count() as i64,
    };
    let removed = counts.iter().map(|(kind, n, _)| (*kind, *n)).collect();
    Ok(Json(PruneReport {
        job: "prune",
        progress,
        removed,
    }))
}
