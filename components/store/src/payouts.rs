//! Creators' payout requests. The diamonds move to the held account when requested, and
//! from there to paid-out (completed) or back to the creator (rejected); the status moves
//! once, by a guarded update.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::pagination::Page;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payout {
    pub id: String,
    pub user_id: String,
    pub diamonds: i64,
    /// `pending`, `completed` or `rejected`.
    pub status: String,
    pub external_reference: Option<String>,
    pub reason: Option<String>,
    pub requested_at: i64,
    pub decided_at: Option<i64>,
}

fn payout_of(row: &Row) -> Payout {
    Payout {
        id: row.text("id"),
        user_id: row.text("user_id"),
        diamonds: row.int("diamonds"),
        status: row.text("status"),
        external_reference: row.opt_text("external_reference"),
        reason: row.opt_text("reason"),
        requested_at: row.int("requested_at"),
        decided_at: row.opt_int("decided_at"),
    }
}

pub fn insert(db: &Db, client_id: &str, p: &Payout) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO payouts (id, client_id, user_id, diamonds, status, requested_at) VALUES (?, ?, ?, ?, 'pending', ?)",
        &[
            (&p.id).into(),
            client_id.into(),
            (&p.user_id).into(),
            Value::Int(p.diamonds),
            Value::Int(p.requested_at),
        ],
    )
}

pub fn get(db: &Db, client_id: &str, id: &str) -> Result<Option<Payout>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM payouts WHERE client_id = ? AND id = ?",
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(payout_of))
}

/// Moves a pending payout to `status` (`completed` or `rejected`); answers the payout, or
/// None when it was no longer pending.
pub fn decide(
    db: &Db,
    client_id: &str,
    id: &str,
    status: &str,
    external_reference: Option<&str>,
    reason: Option<&str>,
    now: i64,
) -> Result<Option<Payout>, ApiError> {
    Ok(db
        .query_one(
            "UPDATE payouts SET status = ?, external_reference = ?, reason = ?, decided_at = ? \
             WHERE client_id = ? AND id = ? AND status = 'pending' RETURNING *",
            &[
                status.into(),
                external_reference.into(),
                reason.into(),
                Value::Int(now),
                client_id.into(),
                id.into(),
            ],
        )?
        .as_ref()
        .map(payout_of))
}

/// The diamonds of `user_id`'s pending payouts.
pub fn held(db: &Db, client_id: &str, user_id: &str) -> Result<i64, ApiError> {
    db.count(
        "SELECT CAST(COALESCE(SUM(diamonds), 0) AS BIGINT) FROM payouts WHERE client_id = ? AND user_id = ? AND status = 'pending'",
        &[client_id.into(), user_id.into()],
    )
}

/// A page of the tenant's payouts (of one status, or all), oldest first; or one user's.
pub fn page(
    db: &Db,
    client_id: &str,
    user_id: Option<&str>,
    status: Option<&str>,
    page: Page,
) -> Result<(Vec<Payout>, i64), ApiError> {
    let mut filter = String::from("client_id = ?");
    let mut scope: Vec<Value> = vec![client_id.into()];
    if let Some(user_id) = user_id {
        filter.push_str(" AND user_id = ?");
        scope.push(user_id.into());
    }
    if let Some(status) = status {
        filter.push_str(" AND status = ?");
        scope.push(status.into());
    }
    let (rows, total) = db.page("payouts", &filter, &scope, "requested_at, id", page)?;
    Ok((rows.iter().map(payout_of).collect(), total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn a_payout_is_decided_once_and_listed_per_tenant() {
        let db = testing::db();
        let p = Payout {
            id: "p1".into(),
            user_id: "ada".into(),
            diamonds: 500,
            status: "pending".into(),
            external_reference: None,
            reason: None,
            requested_at: 10,
            decided_at: None,
        };
        insert(&db, "c1", &p).unwrap();
        let (items, total) = page(&db, "c1", None, Some("pending"), Page::default()).unwrap();
        assert_eq!((items.len(), total), (1, 1));
        assert_eq!(held(&db, "c1", "ada").unwrap(), 500);
        assert_eq!(page(&db, "c2", None, None, Page::default()).unwrap().1, 0);
        assert_eq!(
            page(&db, "c1", Some("bob"), None, Page::default())
                .unwrap()
                .1,
            0
        );
        let done = decide(&db, "c1", "p1", "completed", Some("bank-1"), None, 20)
            .unwrap()
            .unwrap();
        assert_eq!(
            (done.status.as_str(), done.decided_at),
            ("completed", Some(20))
        );
        assert_eq!(held(&db, "c1", "ada").unwrap(), 0);
        assert!(
            decide(&db, "c1", "p1", "rejected", None, Some("late"), 21)
                .unwrap()
                .is_none()
        );
        assert!(get(&db, "c2", "p1").unwrap().is_none());
    }
}
