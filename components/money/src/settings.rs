//! `GET`/`PUT /api/v1/monetization`: the tenant's rate, payout minimum and spending caps.

use crate::rules;
use ::store::monetization::{self as store, Settings};
use domain::ApiError;
use domain::request_body;
use domain::validate::JsonBody;
use domain::validate::body::{FieldKind, OptInt};
use edge::endpoint;
use edge::routing::Route;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{Handler, ServerCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// The tenant's monetization settings.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "MonetizationSettings")]
pub struct SettingsView {
    /// Diamonds a creator earns per 100 tokens spent on them (rounded down).
    #[schemars(range(min = 0, max = 100))]
    diamonds_per_100_tokens: i64,
    /// The fewest diamonds a payout asks for.
    #[schemars(range(min = 1))]
    min_payout_diamonds: i64,
    spending_caps: SpendingCaps,
}

/// The most tokens a user may spend per hour, day and week; null for no cap.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(inline)]
struct SpendingCaps {
    hour: Option<i64>,
    day: Option<i64>,
    week: Option<i64>,
}

fn view(s: &Settings) -> SettingsView {
    SettingsView {
        diamonds_per_100_tokens: s.diamonds_per_100_tokens,
        min_payout_diamonds: s.min_payout_diamonds,
        spending_caps: SpendingCaps {
            hour: s.cap_hour,
            day: s.cap_day,
            week: s.cap_week,
        },
    }
}

/// Changes to the spending caps: a window sent as a number gets that cap, one sent as
/// null loses its cap (`Some(None)`), one left out keeps it (`None`).
#[derive(Debug, Clone, Default)]
pub struct CapChanges {
    pub hour: Option<Option<i64>>,
    pub day: Option<Option<i64>>,
    pub week: Option<Option<i64>>,
}

impl CapChanges {
    fn apply(&self, s: &mut Settings) {
        for (change, cap) in [
            (self.hour, &mut s.cap_hour),
            (self.day, &mut s.cap_day),
            (self.week, &mut s.cap_week),
        ] {
            if let Some(change) = change {
                *cap = change;
            }
        }
    }
}

/// An object of spending caps to change, by window (`hour`, `day`, `week`), each a
/// positive integer or null; may be left out.
pub struct SpendingCapChanges;

impl FieldKind for SpendingCapChanges {
    type Value = CapChanges;

    fn read(body: &mut JsonBody, name: &'static str) -> CapChanges {
        let mut changes = CapChanges::default();
        let Some(sent) = body.opt_value(name) else {
            return changes;
        };
        let Some(caps) = sent.as_object() else {
            body.error(name, "must be an object {hour, day, week}");
            return changes;
        };
        for (window, value) in caps {
            let slot = match window.as_str() {
                "hour" => &mut changes.hour,
                "day" => &mut changes.day,
                "week" => &mut changes.week,
                _ => {
                    body.error(name, format!("{window} is not hour, day or week"));
                    continue;
                }
            };
            match value {
                Value::Null => *slot = Some(None),
                v => match v.as_i64() {
                    Some(n) if (1..=rules::MAX_AMOUNT).contains(&n) => *slot = Some(Some(n)),
                    _ => body.error(name, format!("{window} must be null or a positive integer")),
                },
            }
        }
        changes
    }

    fn schema() -> Value {
        let cap = serde_json::json!({
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": rules::MAX_AMOUNT,
        });
        serde_json::json!({
            "type": ["object", "null"],
            "additionalProperties": false,
            "properties": { "hour": cap, "day": cap, "week": cap },
            "description": "Caps on tokens a user spends per window; null removes that cap, an absent one keeps it.",
        })
    }
}

request_body! {
    /// Changes to the tenant's monetization settings: the fields sent are replaced, the
    /// others keep their values.
    pub struct SettingsChangesBody as "MonetizationSettingsChanges" {
        "diamondsPer100Tokens" diamonds_per_100_tokens: OptInt<0, 100>,
        "minPayoutDiamonds" min_payout_diamonds: OptInt<1, { rules::MAX_AMOUNT }>,
        "spendingCaps" spending_caps: SpendingCapChanges,
    }
}

/// The tenant's monetization settings, read and changed by its backend.
pub const ROUTES: &[Route<Handler>] = &[
    endpoint!(GET "/api/v1/monetization", Server(get), "Get (settings)"),
    endpoint!(PUT "/api/v1/monetization", Server(put), "Put (settings)"),
];

fn get(ctx: &ServerCtx, _: NoBody) -> Result<Json<SettingsView>, ApiError> {
    let db = ctx.db()?;
    Ok(Json(view(&store::get(&db, &ctx.tenant.client_id)?)))
}

/// Replaces the fields sent; the others keep their values. `spendingCaps` members set to
/// null remove that cap.
fn put(ctx: &ServerCtx, changes: SettingsChangesBody) -> Result<Json<SettingsView>, ApiError> {
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let mut s = store::get(&db, client_id)?;
    if let Some(rate) = changes.diamonds_per_100_tokens {
        s.diamonds_per_100_tokens = rate;
    }
    if let Some(min) = changes.min_payout_diamonds {
        s.min_payout_diamonds = min;
    }
    changes.spending_caps.apply(&mut s);
    store::put(&db, client_id, &s, ctx.now())?;
    Ok(Json(view(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> (CapChanges, Vec<String>) {
        let mut body = JsonBody::parse(json.as_bytes()).unwrap();
        let changes = SpendingCapChanges::read(&mut body, "spendingCaps");
        let errors = match body.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e.fields.into_iter().map(|f| f.message).collect(),
        };
        (changes, errors)
    }

    #[test]
    fn a_cap_sent_is_set_a_null_one_removed_an_absent_one_kept() {
        let (changes, errors) = read(r#"{"spendingCaps": {"hour": 25, "day": null}}"#);
        assert!(errors.is_empty(), "{errors:?}");
        let mut s = Settings {
            cap_day: Some(100),
            cap_week: Some(1000),
            ..Settings::default()
        };
        changes.apply(&mut s);
        assert_eq!(
            (s.cap_hour, s.cap_day, s.cap_week),
            (Some(25), None, Some(1000))
        );
        let (changes, errors) = read(r#"{"spendingCaps": null}"#);
        assert!(errors.is_empty() && changes.hour.is_none() && changes.day.is_none());
    }

    #[test]
    fn each_bad_window_is_named() {
        assert_eq!(
            read(r#"{"spendingCaps": [1]}"#).1,
            ["must be an object {hour, day, week}"]
        );
        assert_eq!(
            read(r#"{"spendingCaps": {"week": 0, "month": 5, "day": "x"}}"#).1,
            [
                "day must be null or a positive integer",
                "month is not hour, day or week",
                "week must be null or a positive integer",
            ]
        );
    }
}
