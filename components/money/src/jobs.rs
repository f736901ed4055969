//! The money jobs: `check-ledger` (the invariants) and `renew-subscriptions`.

use crate::subscriptions::{announce, charge};
use common::ApiError;
use common::spin::http::{JobsCtx, Reply, json};
use common::store::{ledger, subscriptions};
use serde_json::json;

/// Subscriptions one call renews or lapses.
const BATCH: i64 = 100;
/// Violations one answer lists.
const MAX_LISTED: usize = 50;

/// `POST /api/jobs/check-ledger`: 200 when every invariant holds, otherwise 500
/// `ledger_inconsistent` listing what is broken.
pub fn check_ledger(ctx: &JobsCtx) -> Reply {
    let db = ctx.db()?;
    let report = ledger::check(&db)?;
    if report.violations.is_empty() {
        return Ok(json(
            200,
            &json!({
                "job": "check-ledger",
                "done": report.accounts,
                "remaining": 0,
                "ok": true,
                "accounts": report.accounts,
                "transfers": report.transfers,
            }),
        ));
    }
    let listed: Vec<_> = report.violations.iter().take(MAX_LISTED).cloned().collect();
    Err(ApiError::new(
        500,
        "ledger_inconsistent",
        format!("{} ledger invariants are broken", report.violations.len()),
    )
    .with_extra("violations", listed))
}

/// `POST /api/jobs/renew-subscriptions`: each active subscription whose period ended is
/// charged for the next one, or lapses (canceled, or the subscriber cannot pay).
pub fn renew_subscriptions(ctx: &JobsCtx) -> Reply {
    let db = ctx.db()?;
    let now = ctx.now();
    let (mut renewed, mut lapsed) = (0, 0);
    for (client_id, s) in subscriptions::due(&db, now, BATCH)? {
        let charged = if s.cancel_at_period_end {
            Err(ApiError::conflict("canceled", "canceled at period end"))
        } else {
            db.transaction(|tx| {
                let operation = common::ids::uuid();
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
    Ok(json(
        200,
        &json!({
            "job": "renew-subscriptions",
            "done": renewed + lapsed,
            "remaining": remaining,
            "renewed": renewed,
            "lapsed": lapsed,
        }),
    ))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<common::contract::Operation> {
    use common::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("POST /api/jobs/check-ledger", "Check ledger (jobs)")
            .answers(
                200,
                "OK",
                Schema::written(json!({
                    "type": "object",
                    "required": ["job", "done", "remaining", "ok", "accounts", "transfers"],
                    "properties": {
                        "job": { "const": "check-ledger" },
                        "done": { "type": "integer", "minimum": 0 },
                        "remaining": { "type": "integer", "minimum": 0 },
                        "ok": { "const": true },
                        "accounts": { "type": "integer", "minimum": 0 },
                        "transfers": { "type": "integer", "minimum": 0 },
                    },
                })),
            )
            .errors(500, &["ledger_inconsistent"]),
        Operation::new(
            "POST /api/jobs/renew-subscriptions",
            "Renew subscriptions (jobs)",
        )
        .answers(
            200,
            "OK",
            Schema::written(json!({
                "type": "object",
                "required": ["job", "done", "remaining", "renewed", "lapsed"],
                "properties": {
                    "job": { "const": "renew-subscriptions" },
                    "done": { "type": "integer", "minimum": 0 },
                    "remaining": { "type": "integer", "minimum": 0 },
                    "renewed": { "type": "integer", "minimum": 0 },
                    "lapsed": { "type": "integer", "minimum": 0 },
                },
            })),
        )
        .errors(409, &["canceled", "renewed"]),
    ]
}
