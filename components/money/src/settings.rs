//! `GET`/`PUT /api/v1/monetization`: the tenant's rate, payout minimum and spending caps.

use crate::rules;
use common::spin::http::{Reply, ServerCtx, json};
use common::store::monetization::{self as store, Settings};
use serde_json::json;

fn view(s: &Settings) -> serde_json::Value {
    json!({
        "diamondsPer100Tokens": s.diamonds_per_100_tokens,
        "minPayoutDiamonds": s.min_payout_diamonds,
        "spendingCaps": { "hour": s.cap_hour, "day": s.cap_day, "week": s.cap_week },
    })
}

pub fn get(ctx: &ServerCtx) -> Reply {
    let db = ctx.db()?;
    Ok(json(200, &view(&store::get(&db, &ctx.tenant.client_id)?)))
}

/// Replaces the fields sent; the others keep their values. `spendingCaps` members set to
/// null remove that cap.
pub fn put(ctx: &ServerCtx) -> Reply {
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let mut s = store::get(&db, client_id)?;
    let mut body = ctx.json()?;
    if let Some(rate) = body.opt_int("diamondsPer100Tokens", 0..=100) {
        s.diamonds_per_100_tokens = rate;
    }
    if let Some(min) = body.opt_int("minPayoutDiamonds", 1..=rules::MAX_AMOUNT) {
        s.min_payout_diamonds = min;
    }
    if let Some(caps) = body.opt_value("spendingCaps") {
        match caps.as_object() {
            Some(caps) => {
                for (window, value) in caps {
                    let cap = match value {
                        serde_json::Value::Null => Ok(None),
                        v => match v.as_i64() {
                            Some(n) if (1..=rules::MAX_AMOUNT).contains(&n) => Ok(Some(n)),
                            _ => Err(()),
                        },
                    };
                    let slot = match window.as_str() {
                        "hour" => &mut s.cap_hour,
                        "day" => &mut s.cap_day,
                        "week" => &mut s.cap_week,
                        _ => {
                            body.error(
                                "spendingCaps",
                                format!("{window} is not hour, day or week"),
                            );
                            continue;
                        }
                    };
                    match cap {
                        Ok(cap) => *slot = cap,
                        Err(()) => body.error(
                            "spendingCaps",
                            format!("{window} must be null or a positive integer"),
                        ),
                    }
                }
            }
            None => body.error("spendingCaps", "must be an object {hour, day, week}"),
        }
    }
    body.finish()?;
    store::put(&db, client_id, &s, ctx.now())?;
    Ok(json(200, &view(&s)))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<common::contract::Operation> {
    use common::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("GET /api/v1/monetization", "Get (settings)")
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/MonetizationSettings",
            }))),
        Operation::new("PUT /api/v1/monetization", "Put (settings)")
            .takes(Schema::written(json!({
                "type": "object",
                "properties": {
                    "diamondsPer100Tokens": {
                        "type": ["integer", "null"],
                        "minimum": 0,
                        "maximum": 100,
                    },
                    "minPayoutDiamonds": { "type": ["integer", "null"], "minimum": 1 },
                    "spendingCaps": {
                        "type": ["object", "null"],
                        "additionalProperties": false,
                        "properties": {
                            "hour": {
                                "type": ["integer", "null"],
                                "minimum": 1,
                                "maximum": 1000000000,
                            },
                            "day": {
                                "type": ["integer", "null"],
                                "minimum": 1,
                                "maximum": 1000000000,
                            },
                            "week": {
                                "type": ["integer", "null"],
                                "minimum": 1,
                                "maximum": 1000000000,
                            },
                        },
                        "description": "Caps on tokens a user spends per window; null removes that cap, an absent one keeps it",
                    },
                },
                "additionalProperties": false,
            })))
            .body_optional()
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/MonetizationSettings",
            }))),
    ]
}
