//! Persisted chat of streams and broadcasts. The chat relay stores every WebSocket message
//! through `POST /api/streams/{id}/chat`, so these rules are the only ones.

use crate::broadcasts::{self, Viewer};
use common::pagination::{Page, Paged};
use common::spin::auth::Tenant;
use common::spin::http::{Call, CallerCtx, UserCtx, json};
use common::store::broadcasts::{self as broadcast_store, Broadcast};
use common::store::chat::{self as store, NewMessage, Target};
use common::store::{Db, cohosts, rate_limits, rooms};
use common::{ApiError, ids};
use serde_json::json;
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

/// Where a chat lives: a stream (a broadcast's or a scheduled event's streamId), and the
/// broadcast behind it when there is one.
struct ChatTarget {
    client_id: String,
    stream_id: String,
    broadcast: Option<Broadcast>,
}

impl ChatTarget {
    fn store(&self) -> Target<'_> {
        Target {
            client_id: &self.client_id,
            stream_id: &self.stream_id,
            broadcast_id: self.broadcast.as_ref().map(|b| b.id.as_str()),
        }
    }
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
    if let Some(b) = broadcast_store::load_by_stream(db, &tenant.client_id, &stream_id, call.now())?
    {
        broadcasts::check_can_watch(db, &b, viewer, call.now())?;
        return Ok(ChatTarget {
            client_id: tenant.client_id.clone(),
            stream_id,
            broadcast: Some(b),
        });
    }
    if !rooms::has_visible_event_stream(db, &tenant.client_id, &stream_id)? {
        return Err(ApiError::not_found("stream"));
    }
    Ok(ChatTarget {
        client_id: tenant.client_id.clone(),
        stream_id,
        broadcast: None,
    })
}

fn broadcast_target(ctx: &UserCtx, db: &Db) -> Result<ChatTarget, ApiError> {
    let b = broadcast_store::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    broadcasts::check_can_watch(db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
    Ok(ChatTarget {
        client_id: ctx.tenant.client_id.clone(),
        stream_id: b.identity.stream_id.clone(),
        broadcast: Some(b),
    })
}

/// Messages of a target, newest `limit` after skipping `offset` newest, oldest first.
fn history(ctx: &Call, db: &Db, target: &ChatTarget) -> Result<Response, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let (items, total) = store::history(db, &target.store(), page)?;
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
    rate_limits::hit(
        db,
        &format!("chat:{}:{}", target.client_id, user.id),
        RATE_MAX,
        RATE_WINDOW_SECS,
        ctx.now(),
    )?;
    let id = ids::uuid();
    let broadcast_id = target
        .broadcast
        .as_ref()
        .filter(|_| via_broadcast)
        .map(|b| b.id.as_str());
    let new = NewMessage {
        id: &id,
        broadcast_id,
        sender_id: &user.id,
        sender_name: &user.username,
        text: &message,
    };
    let stored = store::insert(db, &target.store(), &new, ctx.now_millis())?;
    Ok(json(200, &stored))
}

/// `GET /api/streams/{id}/chat`: anyone who may watch the stream (the relay reads for its
/// sockets).
pub fn stream_history(ctx: &CallerCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::of(&ctx.caller), &db)?;
    history(ctx, &db, &target)
}

/// `POST /api/streams/{id}/chat`: as the signed-in user (the relay posts for its sockets).
pub fn stream_post(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::User(&ctx.user.id), &db)?;
    post(ctx, &db, &target, false)
}

/// `GET /api/broadcasts/{id}/chat`: includes messages stored under its streamId.
pub fn broadcast_history(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
    let target = broadcast_target(ctx, &db)?;
    history(ctx, &db, &target)
}

/// `POST /api/broadcasts/{id}/chat`
pub fn broadcast_post(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = common::spin::store::open()?;
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
    if b.is_owned_by(user_id) {
        return Ok(true);
    }
    Ok(cohosts::of_user(db, b, user_id)?
        .is_some_and(|c| c.is_active() && c.permissions.can_moderate_chat))
}

/// `DELETE /api/streams/{id}/chat/{messageId}`: marks the message deleted (its record
/// stays, with `deleted: true` and no text).
pub fn stream_delete(ctx: &UserCtx) -> Result<Response, ApiError> {
    let user = &ctx.user;
    let db = common::spin::store::open()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::User(&user.id), &db)?;
    let message_id = ids::parse_uuid(ctx.param("messageId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the message id must be a UUID"))?;
    let sender = store::sender_of(&db, &target.store(), &message_id)?
        .ok_or_else(|| ApiError::not_found("message"))?;
    if !may_delete(&db, &target, &user.id, &sender)? {
        return Err(ApiError::forbidden(
            "only the sender, the owner or a co-host with canModerateChat deletes a message",
        ));
    }
    db.transaction(|tx| {
        store::delete(tx, &target.client_id, &message_id, &user.id, ctx.now())?;
        let message = json!({
            "id": message_id,
            "streamId": target.stream_id,
            "broadcastId": target.broadcast.as_ref().map(|b| b.id.clone()),
            "senderId": sender,
            "deletedBy": user.id,
        });
        crate::webhook_events::chat_message_deleted(tx, &target.client_id, message, ctx.now())
    })?;
    Ok(json(200, &json!({ "success": true, "id": message_id })))
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
