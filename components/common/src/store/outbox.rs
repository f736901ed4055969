//! The outbox: lifecycle events for the tenant's backend (webhooks), written in the same
//! transaction as the change they report, so no committed change is without its event and
//! no rolled-back one has one. Each event carries a per-object `sequence`, so receivers can
//! order what arrives out of order.

use super::{Db, Value};
use crate::{ApiError, ids, time};
use serde_json::{Value as Json, json};

/// What an event is about: `("broadcast", id)`, `("user", id)`, ...
pub struct Subject<'a> {
    pub object_type: &'a str,
    pub object_id: &'a str,
}

/// Records `event_type` (e.g. `broadcast.started`) about `subject` with `data` (the object
/// as the REST API answers it). Call it inside the transaction that makes the change.
/// Answers the event id (`evt_...`), which deliveries send as `webhook-id`.
pub fn record(
    db: &Db,
    client_id: &str,
    event_type: &str,
    subject: Subject<'_>,
    data: Json,
    now: i64,
) -> Result<String, ApiError> {
    let sequence = db.count(
        "INSERT INTO outbox_sequences (client_id, object_type, object_id, last) VALUES (?, ?, ?, 1) \
         ON CONFLICT (client_id, object_type, object_id) DO UPDATE SET last = outbox_sequences.last + 1 \
         RETURNING last",
        &[
            client_id.into(),
            subject.object_type.into(),
            subject.object_id.into(),
        ],
    )?;
    let id = format!("evt_{}", ids::random_base62(24));
    let payload = json!({
        "type": event_type,
        "id": id,
        "timestamp": time::format_rfc3339(now),
        "sequence": sequence,
        "data": data,
    });
    db.execute(
        "INSERT INTO outbox_events (id, client_id, event_type, object_type, object_id, sequence, payload, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            id.clone().into(),
            client_id.into(),
            event_type.into(),
            subject.object_type.into(),
            subject.object_id.into(),
            Value::Int(sequence),
            payload.to_string().into(),
            Value::Int(now),
        ],
    )?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[test]
    fn events_are_numbered_per_object_and_roll_back_with_their_change() {
        let db = testing::db();
        let subject = |id| Subject {
            object_type: "broadcast",
            object_id: id,
        };
        record(&db, "c1", "broadcast.created", subject("b1"), json!({}), 10).unwrap();
        record(&db, "c1", "broadcast.started", subject("b1"), json!({}), 11).unwrap();
        record(&db, "c1", "broadcast.created", subject("b2"), json!({}), 12).unwrap();
        let _ = db.transaction(|tx| {
            record(tx, "c1", "broadcast.ended", subject("b1"), json!({}), 13)?;
            Err::<(), _>(ApiError::conflict("changed_mind", "rolled back"))
        });
        let rows = db
            .query(
                "SELECT object_id, sequence, payload FROM outbox_events ORDER BY created_at",
                &[],
            )
            .unwrap();
        let seen: Vec<(String, i64)> = rows
            .iter()
            .map(|r| (r.text("object_id"), r.int("sequence")))
            .collect();
        assert_eq!(seen, [("b1".into(), 1), ("b1".into(), 2), ("b2".into(), 1)]);
        let payload: Json = serde_json::from_str(&rows[1].text("payload")).unwrap();
        assert_eq!(payload["type"], "broadcast.started");
        assert_eq!(payload["sequence"], 2);
        assert!(payload["id"].as_str().unwrap().starts_with("evt_"));
    }
}
