//! Persisted chat messages of streams (a broadcast's or a scheduled event's streamId).

use super::{Db, Row, Value};
use domain::ApiError;
use domain::pagination::Page;
use domain::time;

/// A chat message. A deleted one keeps no text.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ChatMessage")]
pub struct Message {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub stream_id: String,
    /// Set when it was posted to the broadcast rather than its stream.
    #[schemars(extend("format" = "uuid"))]
    pub broadcast_id: Option<String>,
    #[schemars(extend("format" = "uuid"))]
    pub sender_id: String,
    pub sender_name: String,
    /// The sender's badge when it was sent, only when they had one: `subscriber` (of the
    /// broadcast's host).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", extend("const" = "subscriber"))]
    pub sender_badge: Option<String>,
    /// Its text; empty once deleted.
    pub message: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    pub deleted: bool,
    /// Held for review (a blocked word): stored, shown to nobody until approved. Sent
    /// only on a held message.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("const" = true))]
    pub held: bool,
}

fn from_row(row: &Row) -> Message {
    let deleted = row.bool("deleted");
    Message {
        id: row.text("id"),
        stream_id: row.text("stream_id"),
        broadcast_id: row.opt_text("broadcast_id"),
        sender_id: row.text("sender_id"),
        sender_name: row.text("sender_name"),
        sender_badge: row.opt_text("sender_badge"),
        message: if deleted {
            String::new()
        } else {
            row.text("message")
        },
        created_at: row.text("created_at"),
        deleted,
        held: row.bool("held"),
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
    pub sender_badge: Option<&'a str>,
    pub text: &'a str,
    /// Held for review rather than shown.
    pub held: bool,
}

/// Stores a message at `now_ms` (epoch milliseconds) and answers the stored record.
pub fn insert(
    db: &Db,
    target: &Target<'_>,
    new: &NewMessage<'_>,
    now_ms: i64,
) -> Result<Message, ApiError> {
    let rows = db.query(
        "INSERT INTO chat_messages (id, client_id, stream_id, broadcast_id, sender_id, sender_name, sender_badge, message, created_at, created_ms, held) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
        &[
            new.id.into(),
            target.client_id.into(),
            target.stream_id.into(),
            new.broadcast_id.into(),
            new.sender_id.into(),
            new.sender_name.into(),
            new.sender_badge.into(),
            new.text.into(),
            time::format_rfc3339_millis(now_ms).into(),
            Value::Int(now_ms),
            new.held.into(),
        ],
    )?;
    rows.first()
        .map(from_row)
        .ok_or_else(|| ApiError::internal("the message was not stored"))
}

/// The newest `page.limit` messages of a target after skipping `page.offset` newest ones,
/// oldest first, and how many there are. A broadcast's history includes the messages
/// stored under its streamId, each once. Held messages are not shown.
pub fn history(db: &Db, target: &Target<'_>, page: Page) -> Result<(Vec<Message>, i64), ApiError> {
    let (rows, total) = db.page(
        "chat_messages",
        "client_id = ? AND (stream_id = ? OR broadcast_id = ?) AND held = 0",
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

/// Message `id` of the target's stream, if it is there.
pub fn message(db: &Db, target: &Target<'_>, id: &str) -> Result<Option<Message>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM chat_messages WHERE client_id = ? AND stream_id = ? AND id = ?",
            &[target.client_id.into(), target.stream_id.into(), id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// Shows a held message; answers it, or None when it was not held (or is deleted).
pub fn release(db: &Db, client_id: &str, id: &str) -> Result<Option<Message>, ApiError> {
    let rows = db.query(
        "UPDATE chat_messages SET held = 0 WHERE client_id = ? AND id = ? AND held = 1 AND deleted = 0 \
         RETURNING *",
        &[client_id.into(), id.into()],
    )?;
    Ok(rows.first().map(from_row))
}

/// Marks deleted every shown message of the target's stream (or only `sender`'s);
/// answers their ids.
pub fn delete_many(
    db: &Db,
    target: &Target<'_>,
    sender: Option<&str>,
    by: &str,
    now: i64,
) -> Result<Vec<String>, ApiError> {
    let rows = db.query(
        "UPDATE chat_messages SET deleted = 1, message = '', deleted_at = ?, deleted_by = ? \
         WHERE client_id = ? AND (stream_id = ? OR broadcast_id = ?) AND deleted = 0 \
           AND (CAST(? AS TEXT) IS NULL OR sender_id = ?) RETURNING id",
        &[
            time::format_rfc3339(now).into(),
            by.into(),
            target.client_id.into(),
            target.stream_id.into(),
            target.broadcast_id.into(),
            sender.into(),
            sender.into(),
        ],
    )?;
    Ok(rows.iter().map(|row| row.text("id")).collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

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
                sender_badge: via_broadcast.then_some("subscriber"),
                text: id,
                held: false,
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
        let badges: Vec<Option<&str>> = items.iter().map(|m| m.sender_badge.as_deref()).collect();
        assert_eq!(badges, [Some("subscriber"), None]);
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

    #[test]
    fn held_messages_are_hidden_until_released_and_clearing_is_per_sender_or_all() {
        let db = testing::db();
        let target = Target {
            client_id: "c1",
            stream_id: "s1",
            broadcast_id: None,
        };
        for (i, (id, sender, held)) in [
            ("m1", "ada", false),
            ("m2", "bob", true),
            ("m3", "bob", false),
        ]
        .into_iter()
        .enumerate()
        {
            let new = NewMessage {
                id,
                broadcast_id: None,
                sender_id: sender,
                sender_name: sender,
                sender_badge: None,
                text: "hello",
                held,
            };
            insert(&db, &target, &new, 1_000 + i as i64).unwrap();
        }
        assert_eq!(history(&db, &target, Page::default()).unwrap().1, 2);
        assert!(message(&db, &target, "m2").unwrap().unwrap().held);
        assert!(release(&db, "c1", "m2").unwrap().is_some());
        assert!(release(&db, "c1", "m2").unwrap().is_none(), "released once");
        assert_eq!(history(&db, &target, Page::default()).unwrap().1, 3);
        let mut gone = delete_many(&db, &target, Some("bob"), "owner", 5).unwrap();
        gone.sort();
        assert_eq!(gone, ["m2", "m3"]);
        assert_eq!(delete_many(&db, &target, None, "owner", 6).unwrap(), ["m1"]);
        let other = Target {
            client_id: "c2",
            ..target
        };
        assert!(message(&db, &other, "m1").unwrap().is_none());
    }
}
