//! Outbound webhooks: the tenant's endpoints, and the deliveries of outbox events to them.
//!
//! The outbox records every event (`outbox::record`, in the change's transaction); the
//! delivery job fans each new event out to the enabled endpoints of its tenant subscribed
//! to its type ([`dispatch`]), then attempts the due deliveries ([`due`], [`claim`],
//! [`finish`]). Events and finished deliveries older than the retention are pruned.

use super::{Db, Row};
use crate::params;
use domain::pagination::Page;
use domain::webhooks as rules;
use domain::{ApiError, ids};

/// A tenant's webhook endpoint. The secrets are sealed (`domain::sealed`).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub id: String,
    pub client_id: String,
    pub url: String,
    pub description: String,
    pub events: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub secret_sealed: String,
    pub previous_secret_sealed: Option<String>,
    pub previous_secret_until: Option<i64>,
    pub failing_since: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

fn endpoint_of(row: &Row) -> Endpoint {
    Endpoint {
        id: row.text("id"),
        client_id: row.text("client_id"),
        url: row.text("url"),
        description: row.text("description"),
        events: row.json("events"),
        enabled: row.bool("enabled"),
        disabled_reason: row.opt_text("disabled_reason"),
        secret_sealed: row.text("secret_sealed"),
        previous_secret_sealed: row.opt_text("previous_secret_sealed"),
        previous_secret_until: row.opt_int("previous_secret_until"),
        failing_since: row.opt_int("failing_since"),
        created_at: row.int("created_at"),
        updated_at: row.int("updated_at"),
    }
}

/// The associated data that ties a sealed secret to its endpoint.
pub fn secret_context(client_id: &str, endpoint_id: &str) -> String {
    format!("webhook_endpoints:{client_id}:{endpoint_id}")
}

/// A new endpoint id (`ep_...`), chosen before sealing its secret to it.
pub fn new_endpoint_id() -> String {
    format!("ep_{}", ids::random_base62(24))
}

pub struct NewEndpoint<'a> {
    pub id: &'a str,
    pub url: &'a str,
    pub description: &'a str,
    pub events: &'a [String],
    pub secret_sealed: &'a str,
}

/// Adds an endpoint unless the tenant has `cap` already (`None` then): counted and
/// inserted under the tenant's row lock, so concurrent adds cannot pass the cap.
pub fn insert_capped(
    db: &Db,
    client_id: &str,
    new: &NewEndpoint<'_>,
    cap: i64,
    now: i64,
) -> Result<Option<Endpoint>, ApiError> {
    db.transaction(|tx| {
        super::tenants::lock(tx, client_id)?;
        let count = tx.count(
            "SELECT COUNT(*) FROM webhook_endpoints WHERE client_id = ?",
            params![client_id],
        )?;
        if count >= cap {
            return Ok(None);
        }
        insert(tx, client_id, new, now).map(Some)
    })
}

pub fn insert(
    db: &Db,
    client_id: &str,
    new: &NewEndpoint<'_>,
    now: i64,
) -> Result<Endpoint, ApiError> {
    db.execute(
        "INSERT INTO webhook_endpoints (id, client_id, url, description, events, enabled, secret_sealed, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)",
        params![
            new.id,
            client_id,
            new.url,
            new.description,
            events_json(new.events),
            new.secret_sealed,
            now,
            now
        ],
    )?;
    load(db, client_id, new.id)
}

fn events_json(events: &[String]) -> String {
    serde_json::to_string(events).unwrap_or_else(|_| "[]".into())
}

/// The tenant's endpoint `id`; 404 for another tenant's.
pub fn load(db: &Db, client_id: &str, id: &str) -> Result<Endpoint, ApiError> {
    db.query_one(
        "SELECT * FROM webhook_endpoints WHERE client_id = ? AND id = ?",
        params![client_id, id],
    )?
    .map(|row| endpoint_of(&row))
    .ok_or_else(|| ApiError::not_found("webhook endpoint"))
}

/// The tenant's endpoints, oldest first.
pub fn list(db: &Db, client_id: &str, page: Page) -> Result<(Vec<Endpoint>, i64), ApiError> {
    let (rows, total) = db.page(
        "webhook_endpoints",
        "client_id = ?",
        params![client_id],
        "created_at, id",
        page,
    )?;
    Ok((rows.iter().map(endpoint_of).collect(), total))
}

/// What a PATCH changes; `None` keeps the value.
#[derive(Debug, Default)]
pub struct Changes {
    pub url: Option<String>,
    pub description: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// Applies `changes`. Enabling clears the reason the platform disabled it and the failure
/// run; disabling by the tenant leaves no reason.
pub fn update(db: &Db, ep: &Endpoint, changes: &Changes, now: i64) -> Result<Endpoint, ApiError> {
    let enabled = changes.enabled.unwrap_or(ep.enabled);
    let (reason, failing_since) = match changes.enabled {
        Some(true) => (None, None),
        Some(false) => (None, ep.failing_since),
        None => (ep.disabled_reason.clone(), ep.failing_since),
    };
    db.execute(
        "UPDATE webhook_endpoints SET url = ?, description = ?, events = ?, enabled = ?, disabled_reason = ?, \
           failing_since = ?, updated_at = ? WHERE client_id = ? AND id = ?",
        params![
            changes.url.as_deref().unwrap_or(&ep.url),
            changes.description.as_deref().unwrap_or(&ep.description),
            events_json(changes.events.as_deref().unwrap_or(&ep.events)),
            enabled,
            reason,
            failing_since,
            now,
            ep.client_id.as_str(),
            ep.id.as_str()
        ],
    )?;
    load(db, &ep.client_id, &ep.id)
}

/// Removes an endpoint and its deliveries.
pub fn delete(db: &Db, ep: &Endpoint) -> Result<(), ApiError> {
    db.transaction(|tx| {
        tx.execute(
            "DELETE FROM webhook_deliveries WHERE endpoint_id = ?",
            params![ep.id.as_str()],
        )?;
        tx.execute(
            "DELETE FROM webhook_endpoints WHERE client_id = ? AND id = ?",
            params![ep.client_id.as_str(), ep.id.as_str()],
        )
    })
}

/// Replaces the secret; the current one becomes the previous, signing until `until`.
pub fn rotate_secret(
    db: &Db,
    ep: &Endpoint,
    new_sealed: &str,
    until: i64,
    now: i64,
) -> Result<Endpoint, ApiError> {
    db.execute(
        "UPDATE webhook_endpoints SET previous_secret_sealed = secret_sealed, previous_secret_until = ?, \
           secret_sealed = ?, updated_at = ? WHERE client_id = ? AND id = ?",
        params![until, new_sealed, now, ep.client_id.as_str(), ep.id.as_str()],
    )?;
    load(db, &ep.client_id, &ep.id)
}

/// The platform disables an endpoint, saying why.
pub fn disable(db: &Db, endpoint_id: &str, reason: &str, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE id = ?",
        params![reason, now, endpoint_id],
    )
}

/// Notes a failed attempt: answers when the endpoint's current run of failures began.
pub fn note_failure(db: &Db, endpoint_id: &str, now: i64) -> Result<i64, ApiError> {
    let rows = db.query(
        "UPDATE webhook_endpoints SET failing_since = CASE WHEN failing_since IS NULL THEN ? ELSE failing_since END \
         WHERE id = ? RETURNING failing_since",
        params![now, endpoint_id],
    )?;
    Ok(rows.first().map_or(now, |r| r.int("failing_since")))
}

/// Notes a delivered attempt: the run of failures is over.
pub fn note_success(db: &Db, endpoint_id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL",
        params![endpoint_id],
    )
}

/// Fans out up to `batch` undispatched outbox events: one pending delivery, due now, per
/// enabled endpoint of the event's tenant subscribed to its type. Answers how many events
/// were dispatched; each event is dispatched once (its deliveries are unique per endpoint).
pub fn dispatch(db: &Db, batch: i64, now: i64) -> Result<i64, ApiError> {
    let events = db.query(
        "SELECT id, client_id, event_type FROM outbox_events WHERE dispatched_at IS NULL \
         ORDER BY created_at, id LIMIT ?",
        params![batch],
    )?;
    for event in &events {
        let (id, client_id, event_type) = (
            event.text("id"),
            event.text("client_id"),
            event.text("event_type"),
        );
        db.transaction(|tx| {
            let marked = tx.query(
                "UPDATE outbox_events SET dispatched_at = ? WHERE id = ? AND dispatched_at IS NULL RETURNING id",
                params![now, id.as_str()],
            )?;
            if marked.is_empty() {
                return Ok(()); // another run took it
            }
            let endpoints = tx.query(
                "SELECT id, events FROM webhook_endpoints WHERE client_id = ? AND enabled = 1",
                params![client_id.as_str()],
            )?;
            for ep in endpoints {
                if rules::subscribes(&ep.json::<Vec<String>>("events"), &event_type) {
                    insert_delivery(tx, &client_id, &ep.text("id"), &id, &event_type, now)?;
                }
            }
            Ok(())
        })?;
    }
    Ok(events.len() as i64)
}

fn insert_delivery(
    db: &Db,
    client_id: &str,
    endpoint_id: &str,
    event_id: &str,
    event_type: &str,
    now: i64,
) -> Result<String, ApiError> {
    let id = format!("dlv_{}", ids::random_base62(24));
    db.execute(
        "INSERT INTO webhook_deliveries (id, client_id, endpoint_id, event_id, event_type, state, attempts, schedule_step, \
           next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, 'pending', 0, 0, ?, ?) \
         ON CONFLICT (endpoint_id, event_id) DO NOTHING",
        params![id.as_str(), client_id, endpoint_id, event_id, event_type, now, now],
    )?;
    Ok(id)
}

/// Queues an event recorded for one endpoint only (`webhook.test`): marked dispatched, with
/// its single delivery. Call it in the transaction that recorded the event.
pub fn deliver_only_to(
    db: &Db,
    ep: &Endpoint,
    event_id: &str,
    event_type: &str,
    now: i64,
) -> Result<String, ApiError> {
    db.execute(
        "UPDATE outbox_events SET dispatched_at = ? WHERE id = ?",
        params![now, event_id],
    )?;
    insert_delivery(db, &ep.client_id, &ep.id, event_id, event_type, now)
}

/// A delivery due now, with what an attempt needs.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub id: String,
    pub event_id: String,
    pub schedule_step: i64,
    pub payload: String,
    pub endpoint: Endpoint,
}

/// Up to `limit` pending deliveries due at `now` to enabled endpoints, the longest due
/// first.
pub fn due(db: &Db, now: i64, limit: i64) -> Result<Vec<DueDelivery>, ApiError> {
    let rows = db.query(
        "SELECT d.id AS delivery_id, d.event_id, d.schedule_step, o.payload, e.* \
         FROM webhook_deliveries d \
         JOIN webhook_endpoints e ON e.id = d.endpoint_id \
         JOIN outbox_events o ON o.id = d.event_id \
         WHERE d.state = 'pending' AND d.next_attempt_at <= ? AND e.enabled = 1 \
         ORDER BY d.next_attempt_at, d.id LIMIT ?",
        params![now, limit],
    )?;
    Ok(rows
        .iter()
        .map(|row| DueDelivery {
            id: row.text("delivery_id"),
            event_id: row.text("event_id"),
            schedule_step: row.int("schedule_step"),
            payload: row.text("payload"),
            endpoint: endpoint_of(row),
        })
        .collect())
}

/// Takes a due delivery for one attempt: it is not due again before `lease_until` (when an
/// attempt that never reported is tried again). False when another run took it.
pub fn claim(db: &Db, id: &str, now: i64, lease_until: i64) -> Result<bool, ApiError> {
    let rows = db.query(
        "UPDATE webhook_deliveries SET next_attempt_at = ? \
         WHERE id = ? AND state = 'pending' AND next_attempt_at <= ? RETURNING id",
        params![lease_until, id, now],
    )?;
    Ok(!rows.is_empty())
}

/// Work the delivery job has left at `now`: due deliveries to enabled endpoints.
pub fn due_count(db: &Db, now: i64) -> Result<i64, ApiError> {
    db.count(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id \
         WHERE d.state = 'pending' AND d.next_attempt_at <= ? AND e.enabled = 1",
        params![now],
    )
}

/// The result of one attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub at: i64,
    pub status: Option<u16>,
    pub error: Option<String>,
    pub latency_ms: i64,
    /// `None`: final (`delivered` or `failed`); `Some(t)`: pending, due at `t`.
    pub next_attempt_at: Option<i64>,
    pub delivered: bool,
}

/// Records an attempt's result on its delivery.
pub fn finish(db: &Db, id: &str, attempt: &Attempt) -> Result<(), ApiError> {
    let state = match (attempt.delivered, attempt.next_attempt_at) {
        (true, _) => "delivered",
        (false, Some(_)) => "pending",
        (false, None) => "failed",
    };
    db.execute(
        "UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1, schedule_step = schedule_step + 1, \
           next_attempt_at = ?, last_attempt_at = ?, last_status = ?, last_error = ?, last_latency_ms = ? WHERE id = ?",
        params![
            state,
            attempt.next_attempt_at.unwrap_or(attempt.at),
            attempt.at,
            attempt.status.map(i64::from),
            attempt.error.as_deref(),
            attempt.latency_ms,
            id
        ],
    )
}

/// A delivery as the API shows it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: String,
    pub event_id: String,
    pub event_type: String,
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_attempt_at: Option<i64>,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub last_latency_ms: Option<i64>,
    pub created_at: i64,
}

fn delivery_of(row: &Row) -> Delivery {
    Delivery {
        id: row.text("id"),
        event_id: row.text("event_id"),
        event_type: row.text("event_type"),
        state: row.text("state"),
        attempts: row.int("attempts"),
        next_attempt_at: row.int("next_attempt_at"),
        last_attempt_at: row.opt_int("last_attempt_at"),
        last_status: row.opt_int("last_status"),
        last_error: row.opt_text("last_error"),
        last_latency_ms: row.opt_int("last_latency_ms"),
        created_at: row.int("created_at"),
    }
}

/// An endpoint's deliveries, newest first.
pub fn deliveries(db: &Db, ep: &Endpoint, page: Page) -> Result<(Vec<Delivery>, i64), ApiError> {
    let (rows, total) = db.page(
        "webhook_deliveries",
        "client_id = ? AND endpoint_id = ?",
        params![ep.client_id.as_str(), ep.id.as_str()],
        "created_at DESC, id DESC",
        page,
    )?;
    Ok((rows.iter().map(delivery_of).collect(), total))
}

/// Sends a delivery again now, whatever its state, with a fresh retry schedule.
pub fn retry(db: &Db, ep: &Endpoint, delivery_id: &str, now: i64) -> Result<Delivery, ApiError> {
    let rows = db.query(
        "UPDATE webhook_deliveries SET state = 'pending', schedule_step = 0, next_attempt_at = ? \
         WHERE client_id = ? AND endpoint_id = ? AND id = ? RETURNING *",
        params![now, ep.client_id.as_str(), ep.id.as_str(), delivery_id],
    )?;
    rows.first()
        .map(delivery_of)
        .ok_or_else(|| ApiError::not_found("delivery"))
}

/// Sends again every failed delivery of the endpoint created in `[since, until)`; answers
/// how many.
pub fn recover(db: &Db, ep: &Endpoint, since: i64, until: i64, now: i64) -> Result<i64, ApiError> {
    let rows = db.query(
        "UPDATE webhook_deliveries SET state = 'pending', schedule_step = 0, next_attempt_at = ? \
         WHERE client_id = ? AND endpoint_id = ? AND state = 'failed' AND created_at >= ? AND created_at < ? \
         RETURNING id",
        params![now, ep.client_id.as_str(), ep.id.as_str(), since, until],
    )?;
    Ok(rows.len() as i64)
}

/// Removes up to `batch` finished deliveries and dispatched outbox events created before
/// `before` (pending deliveries and their events stay). Answers how many rows went.
pub fn prune(db: &Db, before: i64, batch: i64) -> Result<i64, ApiError> {
    let deliveries = db.query(
        "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries \
           WHERE state <> 'pending' AND created_at < ? LIMIT ?) RETURNING id",
        params![before, batch],
    )?;
    let events = db.query(
        "DELETE FROM outbox_events WHERE id IN (SELECT o.id FROM outbox_events o \
           WHERE o.dispatched_at IS NOT NULL AND o.created_at < ? \
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = o.id) LIMIT ?) RETURNING id",
        params![before, batch],
    )?;
    Ok((deliveries.len() + events.len()) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::{self, Subject};
    use crate::testing;
    use serde_json::json;

    fn endpoint(db: &Db, client: &str, events: &[&str]) -> Endpoint {
        let id = new_endpoint_id();
        let events: Vec<String> = events.iter().map(|e| e.to_string()).collect();
        let new = NewEndpoint {
            id: &id,
            url: "https://example.com/hook",
            description: "",
            events: &events,
            secret_sealed: "sealed",
        };
        insert(db, client, &new, 100).unwrap()
    }

    fn event(db: &Db, client: &str, event_type: &str, now: i64) -> String {
        let subject = Subject {
            object_type: "broadcast",
            object_id: "b1",
        };
        outbox::record(db, client, event_type, subject, &json!({"id": "b1"}), now).unwrap()
    }

    #[test]
    fn events_fan_out_to_the_tenants_subscribed_enabled_endpoints_once() {
        let db = testing::db();
        let all = endpoint(&db, "c1", &["*"]);
        let started = endpoint(&db, "c1", &["broadcast.started"]);
        let off = endpoint(&db, "c1", &["*"]);
        update(
            &db,
            &off,
            &Changes {
                enabled: Some(false),
                ..Changes::default()
            },
            101,
        )
        .unwrap();
        let other_tenant = endpoint(&db, "c2", &["*"]);
        event(&db, "c1", "broadcast.created", 110);
        event(&db, "c1", "broadcast.started", 111);
        assert_eq!(dispatch(&db, 100, 120).unwrap(), 2);
        assert_eq!(dispatch(&db, 100, 121).unwrap(), 0, "dispatched once");
        let count = |ep: &Endpoint| deliveries(&db, ep, Page::default()).unwrap().1;
        assert_eq!(count(&all), 2);
        assert_eq!(count(&started), 1);
        assert_eq!(count(&off), 0);
        assert_eq!(count(&other_tenant), 0);
        let due_now = due(&db, 120, 10).unwrap();
        assert_eq!(due_now.len(), 3);
        assert!(due_now[0].payload.contains("\"sequence\""));
    }

    #[test]
    fn an_attempt_is_claimed_once_and_its_result_schedules_the_next() {
        let db = testing::db();
        let ep = endpoint(&db, "c1", &["*"]);
        event(&db, "c1", "broadcast.created", 110);
        dispatch(&db, 10, 110).unwrap();
        let d = due(&db, 110, 10).unwrap().remove(0);
        assert!(claim(&db, &d.id, 110, 170).unwrap());
        assert!(!claim(&db, &d.id, 110, 170).unwrap(), "taken already");
        assert!(due(&db, 120, 10).unwrap().is_empty(), "leased");
        let failed = Attempt {
            at: 111,
            status: Some(500),
            error: None,
            latency_ms: 12,
            next_attempt_at: Some(116),
            delivered: false,
        };
        finish(&db, &d.id, &failed).unwrap();
        assert!(due(&db, 115, 10).unwrap().is_empty());
        let again = due(&db, 116, 10).unwrap().remove(0);
        assert_eq!((again.id.as_str(), again.schedule_step), (d.id.as_str(), 1));
        assert_eq!(again.event_id, d.event_id, "the same event (webhook-id)");
        finish(
            &db,
            &d.id,
            &Attempt {
                next_attempt_at: None,
                ..failed
            },
        )
        .unwrap();
        let (list, _) = deliveries(&db, &ep, Page::default()).unwrap();
        assert_eq!((list[0].state.as_str(), list[0].attempts), ("failed", 2));
        assert_eq!(list[0].last_status, Some(500));
        // Recover re-queues failed deliveries of the window; retry any one.
        assert_eq!(recover(&db, &ep, 0, 109, 200).unwrap(), 0);
        assert_eq!(recover(&db, &ep, 100, 300, 200).unwrap(), 1);
        assert_eq!(due(&db, 200, 10).unwrap()[0].schedule_step, 0);
        assert_eq!(retry(&db, &ep, &d.id, 210).unwrap().state, "pending");
        let other = endpoint(&db, "c2", &["*"]);
        assert!(
            retry(&db, &other, &d.id, 210).is_err(),
            "another tenant's delivery"
        );
    }

    #[test]
    fn failures_run_until_a_success_and_disabling_keeps_a_reason() {
        let db = testing::db();
        let ep = endpoint(&db, "c1", &["*"]);
        assert_eq!(note_failure(&db, &ep.id, 1000).unwrap(), 1000);
        assert_eq!(note_failure(&db, &ep.id, 2000).unwrap(), 1000);
        note_success(&db, &ep.id).unwrap();
        assert_eq!(note_failure(&db, &ep.id, 3000).unwrap(), 3000);
        disable(&db, &ep.id, "gone", 3001).unwrap();
        let off = load(&db, "c1", &ep.id).unwrap();
        assert_eq!(
            (off.enabled, off.disabled_reason.as_deref()),
            (false, Some("gone"))
        );
        let on = update(
            &db,
            &off,
            &Changes {
                enabled: Some(true),
                ..Changes::default()
            },
            4000,
        )
        .unwrap();
        assert_eq!(
            (on.enabled, on.disabled_reason.as_deref(), on.failing_since),
            (true, None, None)
        );
        assert!(load(&db, "c2", &ep.id).is_err(), "tenant isolation");
        let rotated = rotate_secret(&db, &on, "sealed-2", 9000, 4001).unwrap();
        assert_eq!(rotated.secret_sealed, "sealed-2");
        assert_eq!(rotated.previous_secret_sealed.as_deref(), Some("sealed"));
        assert_eq!(rotated.previous_secret_until, Some(9000));
    }

    #[test]
    fn pruning_keeps_pending_work() {
        let db = testing::db();
        let ep = endpoint(&db, "c1", &["*"]);
        event(&db, "c1", "broadcast.created", 110);
        event(&db, "c1", "broadcast.started", 111);
        dispatch(&db, 10, 112).unwrap();
        let first = due(&db, 112, 10).unwrap().remove(0);
        let done = Attempt {
            at: 113,
            status: Some(200),
            error: None,
            latency_ms: 1,
            next_attempt_at: None,
            delivered: true,
        };
        finish(&db, &first.id, &done).unwrap();
        // The delivered delivery and its event go; the pending one and its event stay.
        assert_eq!(prune(&db, 1000, 100).unwrap(), 2);
        assert_eq!(prune(&db, 1000, 100).unwrap(), 0);
        assert_eq!(deliveries(&db, &ep, Page::default()).unwrap().1, 1);
    }
}
