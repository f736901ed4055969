//! The lifecycle events the API records in the outbox for the tenant's webhooks, each
//! with `data` in the shape the REST API answers for its object. Call these inside the
//! transaction that makes the change (`db` is the transaction), so the event commits or
//! rolls back with it.

use crate::broadcasts::{self, Audience};
use common::ApiError;
use common::domain::broadcast::Status;
use common::store::Db;
use common::store::broadcasts::Broadcast;
use common::store::outbox::{self, Subject};
use serde_json::Value;

fn record(
    db: &Db,
    client_id: &str,
    event_type: &str,
    object_type: &str,
    object_id: &str,
    data: Value,
    now: i64,
) -> Result<(), ApiError> {
    let subject = Subject {
        object_type,
        object_id,
    };
    outbox::record(db, client_id, event_type, subject, data, now).map(|_| ())
}

/// `broadcast.*` with the broadcast as its owner (and the tenant's server) sees it;
/// `broadcast.ended` adds the analytics summary as `analytics`.
pub fn broadcast(db: &Db, event_type: &str, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    let mut data = broadcasts::view_one(db, b, Audience::Owner, now)?;
    if event_type == "broadcast.ended" {
        data["analytics"] = crate::analytics::summary(db, b, now)?;
    }
    record(db, &b.client_id, event_type, "broadcast", &b.id, data, now)
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

/// `user.*` with the user as `GET /api/v1/users` lists them.
pub fn user(
    db: &Db,
    event_type: &str,
    user: &crate::users::PublicUser,
    client_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let data = serde_json::to_value(user).map_err(|e| ApiError::internal(e.to_string()))?;
    record(db, client_id, event_type, "user", &user.id, data, now)
}

/// `cohost.*` with the co-host as the co-host routes answer it, and the session's id.
pub fn cohost(
    db: &Db,
    event_type: &str,
    b: &Broadcast,
    cohost_id: &str,
    mut view: Value,
    now: i64,
) -> Result<(), ApiError> {
    view["sessionId"] = b.id.clone().into();
    record(db, &b.client_id, event_type, "cohost", cohost_id, view, now)
}

/// `file.*` with the file's metadata as `GET /api/files/{id}` answers it.
pub fn file(
    db: &Db,
    event_type: &str,
    file: &crate::files::FileRow,
    now: i64,
) -> Result<(), ApiError> {
    let data = crate::files::view(file, &crate::links::Links::load());
    record(db, &file.client_id, event_type, "file", &file.id, data, now)
}

/// `chat.message_deleted` with the message's record as chat history shows a deleted one.
pub fn chat_message_deleted(
    db: &Db,
    client_id: &str,
    mut message: Value,
    now: i64,
) -> Result<(), ApiError> {
    let id = message["id"].as_str().unwrap_or_default().to_string();
    message["deleted"] = true.into();
    message["message"] = "".into();
    record(
        db,
        client_id,
        "chat.message_deleted",
        "chat_message",
        &id,
        message,
        now,
    )
}
