//! The `broadcast.*` webhook events, each with the broadcast as its owner sees it. Record
//! them inside the transaction that makes the change.

use super::BroadcastView;
use crate::access::Audience;
use crate::webhook_events;
use domain::ApiError;
use domain::broadcast::Status;
use serde::Serialize;
use store::Db;
use store::broadcasts::Broadcast;
use store::outbox::{self, Subject};

/// `broadcast.*` with the broadcast as its owner (and the tenant's server) sees it;
/// `broadcast.ended` adds the analytics summary as `analytics`.
pub fn broadcast(db: &Db, event_type: &str, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    let analytics = match event_type {
        "broadcast.ended" => Some(crate::analytics::summary(db, b, now)?),
        _ => None,
    };
    let data = BroadcastEvent {
        broadcast: super::view_one(db, b, Audience::Owner, now)?,
        analytics,
    };
    webhook_events::record(db, &b.client_id, event_type, "broadcast", &b.id, &data, now)
}

/// A `broadcast.*` event's data.
#[derive(Serialize)]
struct BroadcastEvent {
    #[serde(flatten)]
    broadcast: BroadcastView,
    /// `broadcast.ended`'s analytics summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    analytics: Option<crate::analytics::Summary>,
}

/// `broadcast.created` of a broadcast about to be stored, with `owner_view`, its view
/// for its owner; store it with `outbox::record_first` in the same transaction.
pub fn broadcast_created(b: &Broadcast, owner_view: &BroadcastView, now: i64) -> outbox::Event {
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
