//! The lifecycle events the API records in the outbox for the tenant's webhooks, each
//! with `data` in the shape the REST API answers for its object. Call these inside the
//! transaction that makes the change (`db` is the transaction), so the event commits or
//! rolls back with it. A resource whose event carries its own view records it next to
//! that view (`broadcasts::events`, `users`, `files`, `cohosts`), through [`record`].

use domain::ApiError;
use serde::Serialize;
use store::Db;
use store::outbox::{self, Subject};

pub fn record(
    db: &Db,
    client_id: &str,
    event_type: &str,
    object_type: &str,
    object_id: &str,
    data: &impl Serialize,
    now: i64,
) -> Result<(), ApiError> {
    let subject = Subject {
        object_type,
        object_id,
    };
    outbox::record(db, client_id, event_type, subject, data, now).map(|_| ())
}

/// A deleted chat message as `chat.message_deleted` carries it: its record as chat history
/// shows a deleted one (no text), with who deleted it.
pub struct DeletedMessage<'a> {
    pub id: &'a str,
    pub stream_id: &'a str,
    pub broadcast_id: Option<&'a str>,
    pub sender_id: &'a str,
    pub deleted_by: &'a str,
}

/// `chat.message_deleted`'s data, its keys in the order of a JSON object's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeletedMessageEvent<'a> {
    broadcast_id: Option<&'a str>,
    deleted: bool,
    deleted_by: &'a str,
    id: &'a str,
    message: &'a str,
    sender_id: &'a str,
    stream_id: &'a str,
}

/// Records `chat.message_deleted`.
pub fn chat_message_deleted(
    db: &Db,
    client_id: &str,
    message: &DeletedMessage<'_>,
    now: i64,
) -> Result<(), ApiError> {
    let data = DeletedMessageEvent {
        broadcast_id: message.broadcast_id,
        deleted: true,
        deleted_by: message.deleted_by,
        id: message.id,
        message: "",
        sender_id: message.sender_id,
        stream_id: message.stream_id,
    };
    record(
        db,
        client_id,
        "chat.message_deleted",
        "chat_message",
        message.id,
        &data,
        now,
    )
}
