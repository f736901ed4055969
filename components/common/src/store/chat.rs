//! Persisted chat messages of streams (a broadcast's or a scheduled event's streamId).

use super::broadcasts::Broadcast;
use super::{Db, Row, Value};
use crate::ApiError;
use crate::pagination::Page;
use crate::time;

/// A stored message. A deleted one keeps no text.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub stream_id: String,
    pub broadcast_id: Option<String>,
    pub sender_id: String,
    pub sender_name: String,
    pub message: String,
    pub created_at: String,
    pub deleted: bool,
}

fn from_row(row: &Row) -> Message {
    let deleted = row.bool("deleted");
    Message {
        id: row.text("id"),
        stream_id: row.text("stream_id"),
        broadcast_id: row.opt_text("broadcast_id"),
        sender_id: row.text("sender_id"),
        sender_name: row.text("sender_name"),
        message: if deleted {
            String::new()
        } else {
            row.text("message")
        },
        created_at: row.text("created_at"),
        deleted,
    }
}

/// Where a chat lives: a stream, and the broadcast behind it when there is one.
pub struct Target<'a> {
    pub client_id: &'a str,
    pub stream_id: &'a str,
    pub broadcast_id: Option<&'a str>,
}

/// A message to store.
pub struct NewMessage<'a> {
    pub id: &'a str,
    /// Set when the message was posted to the broadcast rather than its stream.
    pub broadcast_id: Option<&'a str>,
    pub sender_id: &'a str,
    pub sender_name: &'a str,
    pub text: &'a str,
}

/// Stores a message at `now_ms` (epoch milliseconds) and answers the stored record.
pub fn insert(
    db: &Db,
    target: &Target<'_>,
    new: &NewMessage<'_>,
    now_ms: i64,
) -> Result<Message, ApiError> {
    let rows = db.query(
        "INSERT INTO chat_messages (id, client_id, stream_id, broadcast_id, sender_id, sender_name, message, created_at, created_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
        &[
            new.id.into(),
            target.client_id.into(),
            target.stream_id.into(),
            new.broadcast_id.into(),
            new.sender_id.into(),
            new.sender_name.into(),
            new.text.into(),
            time::format_rfc3339_millis(now_ms).into(),
            Value::Int(now_ms),
        ],
    )?;
    rows.first()
        .map(from_row)
        .ok_or_else(|| ApiError::internal("the message was not stored"))
}

/// The newest `page.limit` messages of a target after skipping `page.offset` newest ones,
/// oldest first, and how many there are. A broadcast's history includes the messages
/// stored under its streamId, each once.
pub fn history(db: &Db, target: &Target<'_>, page: Page) -> Result<(Vec<Message>, i64), ApiError> {
    let (rows, total) = db.page(
        "chat_messages",
        "client_id = ? AND (stream_id = ? OR broadcast_id = ?)",
        &[
            target.client_id.into(),
            target.stream_id.into(),
            target.broadcast_id.into(),
        ],
        "created_ms DESC, id DESC",
        page,
    )?;
    let mut items: Vec<Message> = rows.iter().map(from_row).collect();
    items.reverse();
    Ok((items, total))
}

/// The sender of message `id` in the target's stream, if it is there.
pub fn sender_of(db: &Db, target: &Target<'_>, id: &str) -> Result<Option<String>, ApiError> {
    Ok(db
        .query_one(
            "SELECT sender_id FROM chat_messages WHERE client_id = ? AND stream_id = ? AND id = ?",
            &[target.client_id.into(), target.stream_id.into(), id.into()],
        )?
        .map(|row| row.text("sender_id")))
}

/// Marks a message deleted by `by`; its text is removed at once. Answers when it was
/// posted (epoch milliseconds) if this call deleted it, `None` if it was deleted before.
pub fn delete(
    db: &Db,
    client_id: &str,
    id: &str,
    by: &str,
    now: i64,
) -> Result<Option<i64>, ApiError> {
    let deleted = db.query(
        "UPDATE chat_messages SET deleted = 1, message = '', deleted_at = COALESCE(deleted_at, ?), \
           deleted_by = COALESCE(deleted_by, ?) WHERE client_id = ? AND id = ? AND deleted = 0 RETURNING created_ms",
        &[
            time::format_rfc3339(now).into(),
            by.into(),
            client_id.into(),
            id.into(),
        ],
    )?;
    Ok(deleted.first().map(|row| row.int("created_ms")))
}

/// The number of messages of a broadcast (its stream's and its own) that are not deleted.
pub fn count_for_broadcast(db: &Db, b: &Broadcast) -> Result<i64, ApiError> {
    db.count(
        "SELECT COUNT(*) FROM chat_messages WHERE client_id = ? AND (stream_id = ? OR broadcast_id = ?) AND deleted = 0",
        &[
            b.client_id.clone().into(),
            b.identity.stream_id.clone().into(),
            b.id.clone().into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[test]
    fn history_is_newest_page_oldest_first_and_deleted_text_is_gone() {
        let db = testing::db();
        let target = Target {
            client_id: "c1",
            stream_id: "s1",
            broadcast_id: Some("b1"),
        };
        for (i, (id, via_broadcast)) in [("m1", false), ("m2", true), ("m3", false)]
            .into_iter()
            .enumerate()
        {
            let new = NewMessage {
                id,
                broadcast_id: via_broadcast.then_some("b1"),
                sender_id: "ada",
                sender_name: "ada",
                text: id,
            };
            insert(&db, &target, &new, 1_000 + i as i64).unwrap();
        }
        let (items, total) = history(
            &db,
            &target,
            Page {
                limit: 2,
                offset: 0,
            },
        )
        .unwrap();
        let ids: Vec<&str> = items.iter().map(|m| m.id.as_str()).collect();
        assert_eq!((ids, total), (vec!["m2", "m3"], 3));
        delete(&db, "c1", "m2", "ada", 5).unwrap();
        let (items, _) = history(
            &db,
            &target,
            Page {
                limit: 2,
                offset: 0,
            },
        )
        .unwrap();
        assert!(items[0].deleted && items[0].message.is_empty());
        let stored = db
            .count(
                "SELECT COUNT(*) FROM chat_messages WHERE message = 'm2'",
                &[],
            )
            .unwrap();
        assert_eq!(stored, 0, "the text is gone from storage too");
        // Another tenant's stream of the same id shows nothing.
        let other = Target {
            client_id: "c2",
            ..target
        };
        assert_eq!(history(&db, &other, Page::default()).unwrap().1, 0);
    }
}
