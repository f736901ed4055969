//! The `broadcast.*` webhook events, each with the broadcast as its owner sees it. Record
//! them inside the transaction that makes the change.

use crate::access::Audience;
use crate::webhook_events;
use common::ApiError;
use common::domain::broadcast::Status;
use common::store::Db;
use common::store::broadcasts::Broadcast;
use common::store::outbox::{self, Subject};
use serde_json::Value;

/// `broadcast.*` with the broadcast as its owner (and the tenant's server) sees it;
/// `broadcast.ended` adds the analytics summary as `analytics`.
pub fn broadcast(db: &Db, event_type: &str, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    let mut data = super::view_one(db, b, Audience::Owner, now)?;
    if event_type == "broadcast.ended" {
        data["analytics"] = crate::analytics::summary(db, b, now)?;
    }
    webhook_events::record(db, &b.client_id, event_type, "broadcast", &b.id, data, now)
}

/// `broadcast.created` of a broadcast about to be stored, with `owner_view`, its view
/// for its owner; store it with `outbox::record_first` in the same transaction.
pub fn broadcast_created(b: &Broadcast, owner_view: Value, now: i64) -> outbox::Event {
    let subject = Subject {
        object_type: "broadcast",
        object_id: &b.id,
    };
    outbox::Event::first(&b.client_id, "broadcast.created", subject, owner_view, now)
}

/// The event of a broadcast that has just moved to its current status, if it has one.
pub fn status_reached(db: &Db, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    let event_type = match b.status {
        Status::Active => "broadcast.started",
        Status::Completed => "broadcast.ended",
        Status::Error => "broadcast.errored",
        Status::Pending => return Ok(()),
    };
    broadcast(db, event_type, b, now)
}
