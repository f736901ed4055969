//! Restream targets: where the media server pushes a live broadcast besides its own HLS.
//! The destination (server URL and key) is stored sealed; the owner sees the server URL
//! and the key's last characters. The cap per broadcast is checked and the row inserted
//! under the broadcast's row lock, so concurrent adds cannot pass it.

use super::broadcasts::{self, Broadcast};
use super::{Db, Row, Value};
use domain::ApiError;
use domain::media::{MAX_RESTREAM_TARGETS, RestreamState};

/// A stored target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub id: String,
    pub client_id: String,
    pub broadcast_id: String,
    pub name: Option<String>,
    pub display_url: String,
    pub sealed_destination: String,
    pub key_hint: String,
    pub state: RestreamState,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

fn from_row(row: &Row) -> Target {
    Target {
        id: row.text("id"),
        client_id: row.text("client_id"),
        broadcast_id: row.text("broadcast_id"),
        name: row.opt_text("name"),
        display_url: row.text("display_url"),
        sealed_destination: row.text("sealed_destination"),
        key_hint: row.text("key_hint"),
        state: RestreamState::parse(&row.text("state")).unwrap_or(RestreamState::Idle),
        error: row.opt_text("error"),
        created_at: row.int("created_at"),
        updated_at: row.int("updated_at"),
    }
}

/// `b`'s targets, oldest first.
pub fn of_broadcast(db: &Db, b: &Broadcast) -> Result<Vec<Target>, ApiError> {
    Ok(db
        .query(
            "SELECT * FROM restream_targets WHERE client_id = ? AND broadcast_id = ? ORDER BY created_ms, id",
            &[b.client_id.clone().into(), b.id.clone().into()],
        )?
        .iter()
        .map(from_row)
        .collect())
}

/// Adds `target` to `b` unless it has [`MAX_RESTREAM_TARGETS`] already: answers whether
/// it was added. The count and the insert happen under `b`'s row lock.
pub fn insert_capped(
    db: &Db,
    b: &Broadcast,
    target: &Target,
    now_ms: i64,
) -> Result<bool, ApiError> {
    db.transaction(|tx| {
        broadcasts::lock(tx, b)?;
        let count = tx.count(
            "SELECT COUNT(*) FROM restream_targets WHERE broadcast_id = ?",
            &[b.id.clone().into()],
        )?;
        if count >= MAX_RESTREAM_TARGETS {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO restream_targets (id, client_id, broadcast_id, name, display_url, sealed_destination, key_hint, state, created_at, created_ms, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                target.id.clone().into(),
                b.client_id.clone().into(),
                b.id.clone().into(),
                target.name.clone().into(),
                target.display_url.clone().into(),
                target.sealed_destination.clone().into(),
                target.key_hint.clone().into(),
                target.state.as_str().into(),
                Value::Int(target.created_at),
                Value::Int(now_ms),
                Value::Int(target.updated_at),
            ],
        )?;
        Ok(true)
    })
}

/// Removes `b`'s target `id`: answers whether there was one.
pub fn delete(db: &Db, b: &Broadcast, id: &str) -> Result<bool, ApiError> {
    Ok(!db
        .query(
            "DELETE FROM restream_targets WHERE client_id = ? AND broadcast_id = ? AND id = ? RETURNING id",
            &[b.client_id.clone().into(), b.id.clone().into(), id.into()],
        )?
        .is_empty())
}

/// Records a target's state as the media server reports it (only `b`'s targets move).
pub fn set_state(
    db: &Db,
    b: &Broadcast,
    id: &str,
    state: RestreamState,
    error: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE restream_targets SET state = ?, error = ?, updated_at = ? WHERE client_id = ? AND broadcast_id = ? AND id = ?",
        &[
            state.as_str().into(),
            error.into(),
            Value::Int(now),
            b.client_id.clone().into(),
            b.id.clone().into(),
            id.into(),
        ],
    )
}

/// Every target of `b` goes idle (its publisher left); the last error stays.
pub fn all_idle(db: &Db, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE restream_targets SET state = 'idle', updated_at = ? WHERE client_id = ? AND broadcast_id = ? AND state <> 'idle'",
        &[
            Value::Int(now),
            b.client_id.clone().into(),
            b.id.clone().into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn target(id: &str) -> Target {
        Target {
            id: id.into(),
            client_id: String::new(),
            broadcast_id: String::new(),
            name: Some("YouTube".into()),
            display_url: "rtmp://a.example/live".into(),
            sealed_destination: "sealed".into(),
            key_hint: "…abcd".into(),
            state: RestreamState::Idle,
            error: None,
            created_at: 10,
            updated_at: 10,
        }
    }

    #[test]
    fn at_most_five_targets_each_broadcasts_own() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 10).unwrap();
        let other = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 10).unwrap();
        for n in 0..MAX_RESTREAM_TARGETS {
            assert!(insert_capped(&db, &b, &target(&format!("t{n}")), n).unwrap());
        }
        assert!(!insert_capped(&db, &b, &target("t9"), 9).unwrap());
        assert!(insert_capped(&db, &other, &target("o1"), 1).unwrap());
        let listed: Vec<String> = of_broadcast(&db, &b)
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(listed, ["t0", "t1", "t2", "t3", "t4"]);
        // Another broadcast's target is not this one's to move or remove.
        set_state(&db, &b, "o1", RestreamState::Live, None, 11).unwrap();
        assert_eq!(
            of_broadcast(&db, &other).unwrap()[0].state,
            RestreamState::Idle
        );
        assert!(!delete(&db, &b, "o1").unwrap());
        set_state(
            &db,
            &b,
            "t0",
            RestreamState::Errored,
            Some("could not connect"),
            12,
        )
        .unwrap();
        set_state(&db, &b, "t1", RestreamState::Live, None, 12).unwrap();
        all_idle(&db, &b, 13).unwrap();
        let after = of_broadcast(&db, &b).unwrap();
        assert!(after.iter().all(|t| t.state == RestreamState::Idle));
        assert_eq!(after[0].error.as_deref(), Some("could not connect"));
        assert!(delete(&db, &b, "t0").unwrap());
        assert!(insert_capped(&db, &b, &target("t5"), 20).unwrap());
    }
}
