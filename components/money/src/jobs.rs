//! The money jobs: `check-ledger` (the invariants) and `renew-subscriptions`.

use crate::subscriptions::{announce, charge};
use domain::ApiError;
use edge::endpoint;
use edge::routing::Route;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{Handler, JobsCtx};
use schemars::JsonSchema;
use serde::Serialize;
use store::{ledger, subscriptions};

/// Subscriptions one call renews or lapses.
const BATCH: i64 = 100;
/// Violations one answer lists.
const MAX_LISTED: usize = 50;

/// A run of `check-ledger` that found every invariant holding.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "LedgerCheckRun")]
pub struct LedgerChecked {
    #[schemars(extend("const" = "check-ledger"))]
    job: &'static str,
    /// The accounts checked.
    #[schemars(range(min = 0))]
    done: i64,
    #[schemars(extend("const" = 0))]
    remaining: i64,
    #[schemars(extend("const" = true))]
    ok: bool,
    #[schemars(range(min = 0))]
    accounts: i64,
    #[schemars(range(min = 0))]
    transfers: i64,
}

/// A run of `renew-subscriptions`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "SubscriptionRenewalRun")]
pub struct Renewed {
    #[schemars(extend("const" = "renew-subscriptions"))]
    job: &'static str,
    /// The subscriptions renewed or lapsed.
    #[schemars(range(min = 0))]
    done: i64,
    /// The subscriptions still due.
    #[schemars(range(min = 0))]
    remaining: i64,
    #[schemars(range(min = 0))]
    renewed: i64,
    #[schemars(range(min = 0))]
    lapsed: i64,
}

/// The money jobs the scheduler calls.
pub const ROUTES: &[Route<Handler>] = &[
    endpoint!(
        POST "/api/jobs/check-ledger",
        Jobs(check_ledger),
        "Check ledger (jobs)",
        |op| op.errors(500, &["ledger_inconsistent"])
    ),
    endpoint!(
        POST "/api/jobs/renew-subscriptions",
        Jobs(renew_subscriptions),
        "Renew subscriptions (jobs)",
        |op| op.errors(409, &["canceled", "renewed"])
    ),
];

/// 200 when every invariant holds, otherwise 500 `ledger_inconsistent` listing what is
/// broken.
fn check_ledger(ctx: &JobsCtx, _: NoBody) -> Result<Json<LedgerChecked>, ApiError> {
    let db = ctx.db()?;
    let report = ledger::check(&db)?;
    if report.violations.is_empty() {
        return Ok(Json(LedgerChecked {
            job: "check-ledger",
            done: report.accounts,
            remaining: 0,
            ok: true,
            accounts: report.accounts,
            transfers: report.transfers,
        }));
    }
    let listed: Vec<_> = report.violations.iter().take(MAX_LISTED).cloned().collect();
    Err(ApiError::new(
        500,
        "ledger_inconsistent",
        format!("{} ledger invariants are broken", report.violations.len()),
    )
    .with_extra("violations", listed))
}

/// Each active subscription whose period ended is charged for the next one, or lapses
/// (canceled, or the subscriber cannot pay).
fn renew_subscriptions(ctx: &JobsCtx, _: NoBody) -> Result<Json<Renewed>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    let (mut renewed, mut lapsed) = (0, 0);
    for (client_id, s) in subscriptions::due(&db, now, BATCH)? {
        let charged = if s.cancel_at_period_end {
            Err(ApiError::conflict("canceled", "canceled at period end"))
        } else {
            db.transaction(|tx| {
                let operation = domain::ids::uuid();
                charge(
                    tx,
                    &client_id,
                    &s.subscriber_id,
                    &s.creator_id,
                    s.price_tokens,
                    &operation,
                    now,
                )?;
                if !subscriptions::renew(tx, &s.id, s.period_end, now)? {
                    return Err(ApiError::conflict("renewed", "another run renewed it"));
                }
                if let Some(current) =
                    subscriptions::of(tx, &client_id, &s.creator_id, &s.subscriber_id)?
                {
                    announce(tx, &client_id, "subscription.renewed", &current, now)?;
                }
                Ok(())
            })
        };
        match charged {
            Ok(()) => renewed += 1,
            Err(e) if e.code == "renewed" => {}
            Err(e) if e.status >= 500 => return Err(e),
            Err(_) => {
                let moved = db.transaction(|tx| {
                    let moved = subscriptions::lapse(tx, &s.id, s.period_end, now)?;
                    if moved
                        && let Some(current) =
                            subscriptions::of(tx, &client_id, &s.creator_id, &s.subscriber_id)?
                    {
                        announce(tx, &client_id, "subscription.lapsed", &current, now)?;
                    }
                    Ok(moved)
                })?;
                lapsed += i64::from(moved);
            }
        }
    }
    let remaining = subscriptions::count_due(&db, now)?;
    Ok(Json(Renewed {
        job: "renew-subscriptions",
        done: renewed + lapsed,
        remaining,
        renewed,
        lapsed,
    }))
}
