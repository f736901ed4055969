//! The outbox: lifecycle events for the tenant's backend (webhooks), written in the same
//! transaction as the change they report, so no committed change is without its event and
//! no rolled-back one has one. Each event carries a per-object `sequence`, so receivers can
//! order what arrives out of order.

use super::{Db, Value};
use domain::{ApiError, ids, time};
use serde::Serialize;

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
    data: &impl Serialize,
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
    let event = Event::new(client_id, event_type, subject, sequence, data, now);
    insert(db, &event)?;
    Ok(event.id)
}

/// What an event's payload holds, serialized straight from the borrowed data (no copy
/// of the object's JSON); the fields in the order of the keys of a JSON object.
#[derive(serde::Serialize)]
struct Envelope<'a, T> {
    data: &'a T,
    id: &'a str,
    sequence: i64,
    timestamp: String,
    #[serde(rename = "type")]
    event_type: &'a str,
}

/// An event built and ready to store.
pub struct Event {
    pub id: String,
    client_id: String,
    event_type: String,
    object_type: String,
    object_id: String,
    sequence: i64,
    payload: String,
    created_at: i64,
}

impl Event {
    fn new(
        client_id: &str,
        event_type: &str,
        subject: Subject<'_>,
        sequence: i64,
        data: &impl Serialize,
        now: i64,
    ) -> Event {
        let id = format!("evt_{}", ids::ordered_base62(16));
        let payload = serde_json::to_string(&Envelope {
            data,
            id: &id,
            sequence,
            timestamp: time::format_rfc3339(now),
            event_type,
        })
        .expect("an event serializes");
        Event {
            id,
            client_id: client_id.to_string(),
            event_type: event_type.to_string(),
            object_type: subject.object_type.to_string(),
            object_id: subject.object_id.to_string(),
            sequence,
            payload,
            created_at: now,
        }
    }

    /// The first event of an object created in the same transaction (its `.created`):
    /// its sequence is 1, so it is built whole before the transaction begins, which then
    /// only stores it ([`record_first`]).
    pub fn first(
        client_id: &str,
        event_type: &str,
        subject: Subject<'_>,
        data: &impl Serialize,
        now: i64,
    ) -> Event {
        Event::new(client_id, event_type, subject, 1, data, now)
    }
}

/// Stores an object's first event ([`Event::first`]) and starts its sequence. Fails if the
/// object already has events (at the transaction's next statement on PostgreSQL, which
/// takes both inserts with the other held ones: see [`Db::insert_soon`]).
pub fn record_first(db: &Db, event: &Event) -> Result<(), ApiError> {
    db.insert_soon(
        "INSERT INTO outbox_sequences (client_id, object_type, object_id, last) VALUES (?, ?, ?, 1)",
        &[
            event.client_id.clone().into(),
            event.object_type.clone().into(),
            event.object_id.clone().into(),
        ],
    )?;
    db.insert_soon(INSERT_EVENT, &event_params(event))
}

const INSERT_EVENT: &str = "INSERT INTO outbox_events (id, client_id, event_type, object_type, object_id, \
     sequence, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";

fn event_params(event: &Event) -> Vec<Value> {
    vec![
        event.id.clone().into(),
        event.client_id.clone().into(),
        event.event_type.clone().into(),
        event.object_type.clone().into(),
        event.object_id.clone().into(),
        Value::Int(event.sequence),
        event.payload.clone().into(),
        Value::Int(event.created_at),
    ]
}

fn insert(db: &Db, event: &Event) -> Result<(), ApiError> {
    db.execute(INSERT_EVENT, &event_params(event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use serde_json::{Value as Json, json};

    #[test]
    fn events_are_numbered_per_object_and_roll_back_with_their_change() {
        let db = testing::db();
        let subject = |id| Subject {
            object_type: "broadcast",
            object_id: id,
        };
        let created = Event::first("c1", "broadcast.created", subject("b1"), &json!({}), 10);
        record_first(&db, &created).unwrap();
        record(
            &db,
            "c1",
            "broadcast.started",
            subject("b1"),
            &json!({}),
            11,
        )
        .unwrap();
        record(
            &db,
            "c1",
            "broadcast.created",
            subject("b2"),
            &json!({}),
            12,
        )
        .unwrap();
        let _ = db.transaction(|tx| {
            record(tx, "c1", "broadcast.ended", subject("b1"), &json!({}), 13)?;
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
        // Stored with its keys in order, as any JSON object of this codebase is written.
        assert_eq!(rows[1].text("payload"), payload.to_string());
        // A first event for an object that already has events is refused.
        let again = Event::first("c1", "broadcast.created", subject("b1"), &json!({}), 14);
        assert!(record_first(&db, &again).is_err());
    }
}
