//! Persisted chat of streams and broadcasts. The chat relay stores every WebSocket message
//! through `POST /api/streams/{id}/chat`, so these rules are the only ones.

use crate::broadcasts::{self, Broadcast, Viewer};
use common::domain::cohost::Permissions;
use common::pagination::{Page, Paged};
use common::spin::auth::Tenant;
use common::spin::db::{self, Db, Row};
use common::spin::http::{Call, CallerCtx, UserCtx, json};
use common::spin::rate_limit;
use common::{ApiError, ids, time};
use serde_json::{Value, json};
use spin_sdk::http::Response;

/// Longest message, in characters after trimming.
pub const MAX_MESSAGE_CHARS: usize = 2000;
/// Messages one user may send per window, across every stream.
const RATE_MAX: i64 = 10;
const RATE_WINDOW_SECS: i64 = 10;

/// Trims a message and checks its length (1..2000 characters).
pub fn clean_message(raw: &str) -> Result<String, String> {
    let text = raw.trim();
    let chars = text.chars().count();
    if chars == 0 {
        Err("must not be empty".into())
    } else if chars > MAX_MESSAGE_CHARS {
        Err(format!("must be at most {MAX_MESSAGE_CHARS} characters"))
    } else {
        Ok(text.to_string())
    }
}

/// A message as every answer shows it: a deleted one keeps no text.
fn from_row(row: &Row<'_>) -> Value {
    let deleted = db::col_bool(row, "deleted");
    json!({
        "id": db::col_text(row, "id"),
        "streamId": db::col_text(row, "stream_id"),
        "broadcastId": db::col_opt_text(row, "broadcast_id"),
        "senderId": db::col_text(row, "sender_id"),
        "senderName": db::col_text(row, "sender_name"),
        "message": if deleted { String::new() } else { db::col_text(row, "message") },
        "createdAt": db::col_text(row, "created_at"),
        "deleted": deleted,
    })
}

/// Where a chat lives: a stream (a broadcast's or a scheduled event's streamId), and the
/// broadcast behind it when there is one.
struct ChatTarget {
    client_id: String,
    stream_id: String,
    broadcast: Option<Broadcast>,
}

/// The chat of `/api/streams/{id}`: the tenant's broadcast with that streamId, else its
/// scheduled event's stream. A private broadcast's chat is only for those who may watch it.
fn stream_target(
    call: &Call,
    tenant: &Tenant,
    viewer: Viewer<'_>,
    db: &Db,
) -> Result<ChatTarget, ApiError> {
    let stream_id = ids::parse_uuid(call.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the stream id must be a UUID"))?;
    if let Some(b) = broadcasts::load_by_stream(db, &tenant.client_id, &stream_id)? {
        broadcasts::check_can_watch(db, &b, viewer)?;
        return Ok(ChatTarget {
            client_id: tenant.client_id.clone(),
            stream_id,
            broadcast: Some(b),
        });
    }
    let event = db.count(
        "SELECT COUNT(*) FROM scheduled_events WHERE client_id = ? AND stream_id = ? AND visibility <> 'private'",
        &[db::text(&tenant.client_id), db::text(&stream_id)],
    )?;
    if event == 0 {
        return Err(ApiError::not_found("stream"));
    }
    Ok(ChatTarget {
        client_id: tenant.client_id.clone(),
        stream_id,
        broadcast: None,
    })
}

fn broadcast_target(ctx: &UserCtx, db: &Db) -> Result<ChatTarget, ApiError> {
    let tenant = &ctx.tenant;
    let b = broadcasts::load(db, &tenant.client_id, ctx.param("id"))?;
    broadcasts::check_can_watch(db, &b, Viewer::User(&ctx.user.id))?;
    Ok(ChatTarget {
        client_id: tenant.client_id.clone(),
        stream_id: b.identity.stream_id.clone(),
        broadcast: Some(b),
    })
}

/// Messages of a target, newest `limit` after skipping `offset` newest, oldest first.
fn history(ctx: &Call, db: &Db, target: &ChatTarget) -> Result<Response, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let broadcast_id = target.broadcast.as_ref().map(|b| b.id.clone());
    let filter = "client_id = ? AND (stream_id = ? OR broadcast_id = ?)";
    let scope = [
        db::text(&target.client_id),
        db::text(&target.stream_id),
        db::opt_text(broadcast_id.as_deref()),
    ];
    let (mut items, total) = db.page(
        "chat_messages",
        filter,
        &scope,
        "created_ms DESC, id DESC",
        page,
        from_row,
    )?;
    items.reverse();
    Ok(json(200, &Paged::new(items, total, page)))
}

/// Stores a message from the signed-in user.
fn post(
    ctx: &UserCtx,
    db: &Db,
    target: &ChatTarget,
    via_broadcast: bool,
) -> Result<Response, ApiError> {
    let user = &ctx.user;
    let mut body = ctx.json()?;
    let raw = body.opt_raw_string("message", MAX_MESSAGE_CHARS * 4 + 64);
    let message = match raw.as_deref().map(clean_message) {
        Some(Ok(m)) => Some(m),
        Some(Err(why)) => {
            body.error("message", why);
            None
        }
        None => {
            if !body.has_errors_for(&["message"]) {
                body.error("message", "is required");
            }
            None
        }
    };
    body.finish()?;
    let message = message.unwrap_or_default();
    if let Some(b) = &target.broadcast
        && b.status.is_final()
    {
        return Err(ApiError::conflict(
            "broadcast_ended",
            format!("the broadcast is {}; its chat is closed", b.status.as_str()),
        ));
    }
    let now_ms = time::now_millis();
    rate_limit::hit(
        db,
        &format!("chat:{}:{}", target.client_id, user.id),
        RATE_MAX,
        RATE_WINDOW_SECS,
        now_ms / 1000,
    )?;
    let id = ids::uuid();
    let broadcast_id = target
        .broadcast
        .as_ref()
        .filter(|_| via_broadcast)
        .map(|b| b.id.clone());
    db.execute(
        "INSERT INTO chat_messages (id, client_id, stream_id, broadcast_id, sender_id, sender_name, message, created_at, created_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            db::text(&id),
            db::text(&target.client_id),
            db::text(&target.stream_id),
            db::opt_text(broadcast_id.as_deref()),
            db::text(&user.id),
            db::text(&user.username),
            db::text(&message),
            db::text(time::format_rfc3339_millis(now_ms)),
            db::int(now_ms),
        ],
    )?;
    let stored = db
        .query_one(
            "SELECT * FROM chat_messages WHERE id = ?",
            &[db::text(&id)],
            from_row,
        )?
        .ok_or_else(|| ApiError::internal("the message was not stored"))?;
    Ok(json(200, &stored))
}

/// `GET /api/streams/{id}/chat`: anyone who may watch the stream (the relay reads for its
/// sockets).
pub fn stream_history(ctx: &CallerCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::of(&ctx.caller), &db)?;
    history(ctx, &db, &target)
}

/// `POST /api/streams/{id}/chat`: as the signed-in user (the relay posts for its sockets).
pub fn stream_post(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::User(&ctx.user.id), &db)?;
    post(ctx, &db, &target, false)
}

/// `GET /api/broadcasts/{id}/chat`: includes messages stored under its streamId.
pub fn broadcast_history(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let target = broadcast_target(ctx, &db)?;
    history(ctx, &db, &target)
}

/// `POST /api/broadcasts/{id}/chat`
pub fn broadcast_post(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let target = broadcast_target(ctx, &db)?;
    post(ctx, &db, &target, true)
}

/// Whether `user_id` may delete a message of `sender_id` in `target`: the sender, the
/// broadcast's owner, or one of its co-hosts with canModerateChat.
fn may_delete(
    db: &Db,
    target: &ChatTarget,
    user_id: &str,
    sender_id: &str,
) -> Result<bool, ApiError> {
    if user_id == sender_id {
        return Ok(true);
    }
    let Some(b) = &target.broadcast else {
        return Ok(false);
    };
    if b.owner_id.as_deref() == Some(user_id) {
        return Ok(true);
    }
    let permissions = db.query_one(
        "SELECT permissions FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND user_id = ? AND status = 'active'",
        &[db::text(&target.client_id), db::text(&b.id), db::text(user_id)],
        |row| serde_json::from_str::<Permissions>(&db::col_text(row, "permissions")).unwrap_or_default(),
    )?;
    Ok(permissions.is_some_and(|p| p.can_moderate_chat))
}

/// `DELETE /api/streams/{id}/chat/{messageId}`: marks the message deleted (its record
/// stays, with `deleted: true`).
pub fn stream_delete(ctx: &UserCtx) -> Result<Response, ApiError> {
    let user = &ctx.user;
    let db = Db::open()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::User(&user.id), &db)?;
    let message_id = ids::parse_uuid(ctx.param("messageId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the message id must be a UUID"))?;
    let sender = db
        .query_one(
            "SELECT sender_id FROM chat_messages WHERE client_id = ? AND stream_id = ? AND id = ?",
            &[
                db::text(&target.client_id),
                db::text(&target.stream_id),
                db::text(&message_id),
            ],
            |row| db::col_text(row, "sender_id"),
        )?
        .ok_or_else(|| ApiError::not_found("message"))?;
    if !may_delete(&db, &target, &user.id, &sender)? {
        return Err(ApiError::forbidden(
            "only the sender, the owner or a co-host with canModerateChat deletes a message",
        ));
    }
    // The text goes at once: a deleted message keeps none, in storage or in any answer.
    db.execute(
        "UPDATE chat_messages SET deleted = 1, message = '', deleted_at = COALESCE(deleted_at, ?), deleted_by = COALESCE(deleted_by, ?) WHERE id = ?",
        &[db::text(time::now_rfc3339()), db::text(&user.id), db::text(&message_id)],
    )?;
    Ok(json(200, &json!({ "success": true, "id": message_id })))
}

/// The number of chat messages of a broadcast (its stream's and its own), for analytics.
pub fn count_for(db: &Db, b: &Broadcast) -> Result<i64, ApiError> {
    db.count(
        "SELECT COUNT(*) FROM chat_messages WHERE client_id = ? AND (stream_id = ? OR broadcast_id = ?) AND deleted = 0",
        &[db::text(&b.client_id), db::text(&b.identity.stream_id), db::text(&b.id)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_trimmed_and_bounded() {
        assert_eq!(clean_message("  hello \n"), Ok("hello".into()));
        assert!(clean_message("   ").is_err());
        assert!(clean_message(&"é".repeat(2000)).is_ok());
        assert!(clean_message(&"é".repeat(2001)).is_err());
    }
}
