//! Subscriptions: creators' plans and viewers' subscriptions to creators (one per viewer
//! and creator), paid per 30-day period. A `subscribers` broadcast's audience depends on
//! them ([`crate::app::access::may_watch`]).

use super::{Db, Row, Value};
use domain::ApiError;

/// A period's length.
pub const PERIOD_SECS: i64 = 30 * 24 * 60 * 60;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub id: String,
    pub creator_id: String,
    pub name: String,
    pub price_tokens: i64,
    pub perks: Vec<String>,
    pub active: bool,
}

fn plan_of(row: &Row) -> Plan {
    Plan {
        id: row.text("id"),
        creator_id: row.text("creator_id"),
        name: row.text("name"),
        price_tokens: row.int("price_tokens"),
        perks: row.json("perks"),
        active: row.bool("active"),
    }
}

pub fn put_plan(db: &Db, client_id: &str, plan: &Plan, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO subscription_plans (client_id, creator_id, id, name, price_tokens, perks, active, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (client_id, creator_id, id) DO UPDATE SET \
         name = ?4, price_tokens = ?5, perks = ?6, active = ?7, updated_at = ?8",
        &[
            client_id.into(),
            (&plan.creator_id).into(),
            (&plan.id).into(),
            (&plan.name).into(),
            Value::Int(plan.price_tokens),
            serde_json::to_string(&plan.perks).unwrap_or_else(|_| "[]".into()).into(),
            plan.active.into(),
            Value::Int(now),
        ],
    )
}

pub fn plan(
    db: &Db,
    client_id: &str,
    creator_id: &str,
    id: &str,
) -> Result<Option<Plan>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM subscription_plans WHERE client_id = ? AND creator_id = ? AND id = ?",
            &[client_id.into(), creator_id.into(), id.into()],
        )?
        .as_ref()
        .map(plan_of))
}

/// A creator's plans (only the active ones, or all).
pub fn plans(
    db: &Db,
    client_id: &str,
    creator_id: &str,
    active_only: bool,
) -> Result<Vec<Plan>, ApiError> {
    let sql = if active_only {
        "SELECT * FROM subscription_plans WHERE client_id = ? AND creator_id = ? AND active = 1 ORDER BY price_tokens, id"
    } else {
        "SELECT * FROM subscription_plans WHERE client_id = ? AND creator_id = ? ORDER BY price_tokens, id"
    };
    let rows = db.query(sql, &[client_id.into(), creator_id.into()])?;
    Ok(rows.iter().map(plan_of).collect())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub id: String,
    pub creator_id: String,
    pub subscriber_id: String,
    pub plan_id: String,
    pub price_tokens: i64,
    /// `active` (paid through `period_end`), `lapsed` (renewal failed or canceled and
    /// ended).
    pub status: String,
    pub cancel_at_period_end: bool,
    pub period_start: i64,
    pub period_end: i64,
    pub created_at: i64,
}

fn subscription_of(row: &Row) -> Subscription {
    Subscription {
        id: row.text("id"),
        creator_id: row.text("creator_id"),
        subscriber_id: row.text("subscriber_id"),
        plan_id: row.text("plan_id"),
        price_tokens: row.int("price_tokens"),
        status: row.text("status"),
        cancel_at_period_end: row.bool("cancel_at_period_end"),
        period_start: row.int("period_start"),
        period_end: row.int("period_end"),
        created_at: row.int("created_at"),
    }
}

pub fn of(
    db: &Db,
    client_id: &str,
    creator_id: &str,
    subscriber_id: &str,
) -> Result<Option<Subscription>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM subscriptions WHERE client_id = ? AND creator_id = ? AND subscriber_id = ?",
            &[client_id.into(), creator_id.into(), subscriber_id.into()],
        )?
        .as_ref()
        .map(subscription_of))
}

/// Starts (or restarts a lapsed) subscription for one period from `now`. Answers None when
/// the subscriber already has an active one to this creator.
pub fn start(
    db: &Db,
    client_id: &str,
    id: &str,
    creator_id: &str,
    subscriber_id: &str,
    plan: &Plan,
    now: i64,
) -> Result<Option<Subscription>, ApiError> {
    let row = db.query_one(
        "INSERT INTO subscriptions (id, client_id, creator_id, subscriber_id, plan_id, price_tokens, status, \
           cancel_at_period_end, period_start, period_end, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'active', 0, ?7, ?8, ?7, ?7) \
         ON CONFLICT (client_id, creator_id, subscriber_id) DO UPDATE SET \
           plan_id = ?5, price_tokens = ?6, status = 'active', cancel_at_period_end = 0, \
           period_start = ?7, period_end = ?8, updated_at = ?7 \
         WHERE subscriptions.status <> 'active' \
         RETURNING *",
        &[
            id.into(),
            client_id.into(),
            creator_id.into(),
            subscriber_id.into(),
            (&plan.id).into(),
            Value::Int(plan.price_tokens),
            Value::Int(now),
            Value::Int(now + PERIOD_SECS),
        ],
    )?;
    Ok(row.as_ref().map(subscription_of))
}

/// A subscriber's subscriptions, newest first.
pub fn of_subscriber(
    db: &Db,
    client_id: &str,
    subscriber_id: &str,
) -> Result<Vec<Subscription>, ApiError> {
    let rows = db.query(
        "SELECT * FROM subscriptions WHERE client_id = ? AND subscriber_id = ? ORDER BY created_at DESC, id",
        &[client_id.into(), subscriber_id.into()],
    )?;
    Ok(rows.iter().map(subscription_of).collect())
}

/// Marks an active subscription to end at its period's end; answers it, or None when
/// there is no active one.
pub fn cancel(
    db: &Db,
    client_id: &str,
    creator_id: &str,
    subscriber_id: &str,
    now: i64,
) -> Result<Option<Subscription>, ApiError> {
    Ok(db
        .query_one(
            "UPDATE subscriptions SET cancel_at_period_end = 1, updated_at = ? \
             WHERE client_id = ? AND creator_id = ? AND subscriber_id = ? AND status = 'active' RETURNING *",
            &[Value::Int(now), client_id.into(), creator_id.into(), subscriber_id.into()],
        )?
        .as_ref()
        .map(subscription_of))
}

/// Active subscriptions whose period has ended by `now` (of every tenant), with their
/// tenant, oldest first.
pub fn due(db: &Db, now: i64, limit: i64) -> Result<Vec<(String, Subscription)>, ApiError> {
    let rows = db.query(
        "SELECT * FROM subscriptions WHERE status = 'active' AND period_end <= ? ORDER BY period_end, id LIMIT ?",
        &[Value::Int(now), Value::Int(limit)],
    )?;
    Ok(rows
        .iter()
        .map(|r| (r.text("client_id"), subscription_of(r)))
        .collect())
}

pub fn count_due(db: &Db, now: i64) -> Result<i64, ApiError> {
    db.count(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM subscriptions WHERE status = 'active' AND period_end <= ?",
        &[Value::Int(now)],
    )
}

/// Extends a due subscription by one period (guarded on the period it is due for, so two
/// runs renew it once). Answers whether it moved.
pub fn renew(db: &Db, id: &str, due_end: i64, now: i64) -> Result<bool, ApiError> {
    Ok(!db
        .query(
            "UPDATE subscriptions SET period_start = ?1, period_end = ?2, updated_at = ?3 \
             WHERE id = ?4 AND status = 'active' AND period_end = ?1 RETURNING id",
            &[
                Value::Int(due_end),
                Value::Int(due_end + PERIOD_SECS),
                Value::Int(now),
                id.into(),
            ],
        )?
        .is_empty())
}

/// Ends a due subscription (canceled, or its renewal could not be paid). Answers whether
/// it moved.
pub fn lapse(db: &Db, id: &str, due_end: i64, now: i64) -> Result<bool, ApiError> {
    Ok(!db
        .query(
            "UPDATE subscriptions SET status = 'lapsed', updated_at = ? \
             WHERE id = ? AND status = 'active' AND period_end = ? RETURNING id",
            &[Value::Int(now), id.into(), Value::Int(due_end)],
        )?
        .is_empty())
}

/// Whether `user_id` holds an active, paid-up subscription to `creator_id`.
pub fn is_subscriber(
    db: &Db,
    client_id: &str,
    creator_id: &str,
    user_id: &str,
    now: i64,
) -> Result<bool, ApiError> {
    Ok(db.count(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM subscriptions WHERE client_id = ? AND creator_id = ? \
           AND subscriber_id = ? AND status = 'active' AND period_end > ?",
        &[
            client_id.into(),
            creator_id.into(),
            user_id.into(),
            Value::Int(now),
        ],
    )? > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn gold(price: i64) -> Plan {
        Plan {
            id: "gold".into(),
            creator_id: "cat".into(),
            name: "Gold".into(),
            price_tokens: price,
            perks: vec!["badge".into()],
            active: true,
        }
    }

    #[test]
    fn a_subscription_starts_once_renews_once_per_period_and_lapses() {
        let db = testing::db();
        put_plan(&db, "c1", &gold(30), 1).unwrap();
        assert_eq!(
            plan(&db, "c1", "cat", "gold").unwrap().unwrap().perks,
            ["badge"]
        );
        assert!(plan(&db, "c2", "cat", "gold").unwrap().is_none());
        let plan = gold(30);
        let s = start(&db, "c1", "s1", "cat", "ada", &plan, 100)
            .unwrap()
            .unwrap();
        assert_eq!(s.period_end, 100 + PERIOD_SECS);
        assert!(
            start(&db, "c1", "s2", "cat", "ada", &plan, 101)
                .unwrap()
                .is_none()
        );
        assert!(is_subscriber(&db, "c1", "cat", "ada", 101).unwrap());
        assert!(!is_subscriber(&db, "c1", "cat", "bob", 101).unwrap());
        let end = 100 + PERIOD_SECS;
        assert!(due(&db, end - 1, 10).unwrap().is_empty());
        assert_eq!(count_due(&db, end).unwrap(), 1);
        assert!(renew(&db, "s1", end, end).unwrap());
        assert!(!renew(&db, "s1", end, end).unwrap());
        assert_eq!(
            of(&db, "c1", "cat", "ada").unwrap().unwrap().period_end,
            end + PERIOD_SECS
        );
        assert!(
            cancel(&db, "c1", "cat", "ada", end + 5)
                .unwrap()
                .unwrap()
                .cancel_at_period_end
        );
        assert!(lapse(&db, "s1", end + PERIOD_SECS, end + PERIOD_SECS).unwrap());
        assert!(!is_subscriber(&db, "c1", "cat", "ada", end + PERIOD_SECS).unwrap());
        // A lapsed subscription can start again.
        let again = start(&db, "c1", "s3", "cat", "ada", &plan, end + PERIOD_SECS + 1)
            .unwrap()
            .unwrap();
        assert_eq!((again.id.as_str(), again.status.as_str()), ("s1", "active"));
        assert_eq!(of_subscriber(&db, "c1", "ada").unwrap().len(), 1);
    }
}
