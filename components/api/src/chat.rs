//! Persisted chat of streams and broadcasts. The chat relay stores every WebSocket message
//! through `POST /api/streams/{id}/chat`, so these rules (and the moderation checks they
//! run, `crate::moderation::screen`) are the only ones.

use crate::ApiRoute;
use crate::access::Viewer;
use crate::chat_target::{ChatTarget, broadcast_target, is_moderator, stream_target};
use crate::moderation::{self, Screened};
use crate::realtime;
use crate::webhook_events::DeletedMessage;
use ::store::chat::{self as store, Message, NewMessage};
use ::store::{Db, analytics, users};
use domain::pagination::{Page, Paged};
use domain::validate::JsonBody;
use domain::validate::body::{FieldKind, OptText};
use domain::{ApiError, ids, jwt, request_body, time};
use edge::answers::Deleted;
use edge::contract::Schema;
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::realtime::Event;
use edge::spin::config;
use edge::spin::endpoint::{self, Accepted, Json, NoBody, OneOf};
use edge::spin::http::{Call, Caller, CallerCtx, UserCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

/// Longest message, in characters after trimming.
pub const MAX_MESSAGE_CHARS: usize = 2000;
/// Messages one user may send per window, across every stream.
const MESSAGES: RateLimit = RateLimit {
    bucket: "chat",
    max: 10,
    window_secs: 10,
    per: "user",
    counts: Counts::Requests,
};

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

/// A message's text as a post sends it: trimmed, 1 to 2000 characters.
pub struct MessageText;

impl FieldKind for MessageText {
    /// Empty when missing or bad (the body then has an error).
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        match body
            .opt_raw_string(name, MAX_MESSAGE_CHARS * 4 + 64)
            .map(|raw| clean_message(&raw))
        {
            Some(Ok(text)) => text,
            Some(Err(why)) => {
                body.error(name, why);
                String::new()
            }
            None => {
                if !body.has_errors_for(&[name]) {
                    body.error(name, "is required");
                }
                String::new()
            }
        }
    }

    fn schema() -> Value {
        json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_MESSAGE_CHARS * 4 + 64,
            "pattern": "\\S",
            "description": "1 to 2000 characters once the spaces at its ends are trimmed",
        })
    }
}

request_body! {
    /// A chat message to post.
    pub struct PostBody as "ChatPost" {
        "message" message: MessageText,
    }
}

request_body! {
    /// Whom a chat socket ticket is for.
    pub struct TicketBody as "ChatTicketRequest" {
        /// Only in a signed call: the user to mint for (a user may name only themselves)
        "userId" user_id: OptText<64>,
    }
}

/// A ticket that opens a stream's chat socket (`/ws/streams/{id}/chat?ticket=`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ChatTicket")]
pub struct TicketView {
    pub ticket: String,
    /// The stream as the socket's path names it (a broadcast's id or its streamId).
    #[schemars(extend("format" = "uuid"))]
    pub stream_id: String,
    /// The user the socket reads and posts as; null: read-only.
    #[schemars(extend("format" = "uuid"))]
    pub user_id: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub expires_at: String,
}

/// A message stored and shown (200), or held for a moderator's review (202).
type Posted = OneOf<Accepted<Message>, Json<Message>>;

/// What a held message's 202 says.
const HELD: &str = "Held for a moderator's review (a blocked word with the hold action): \
                    stored, not shown until approved";

/// The persisted chat routes of streams and broadcasts.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/streams/{id}/chat",
        RelayCaller(stream_history),
        "Stream history (chat)",
        |op| op
            .errors(400, &["invalid_id", "invalid_query"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/streams/{id}/chat",
        RelayUser(stream_post),
        "Stream post (chat)",
        |op| op
            .link(
                "DELETE /api/streams/{id}/chat/{messageId}",
                &[
                    ("id", "$request.path.id"),
                    ("messageId", "$response.body#/id"),
                ],
            )
            .link(
                "POST /api/streams/{id}/chat/{messageId}/report",
                &[
                    ("id", "$request.path.id"),
                    ("messageId", "$response.body#/id"),
                ],
            )
            // The 202's own description (the type says only "Accepted").
            .answers(202, HELD, Schema::view::<Message>())
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended"])
            .rate_limited(&MESSAGES)
            .then(moderation::document_post_refusals),
    ),
    endpoint!(
        DELETE "/api/streams/{id}/chat/{messageId}",
        RelayUser(stream_delete),
        "Stream delete (chat)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/streams/{id}/chat/ticket",
        Caller(socket_ticket),
        "Chat socket ticket",
        |op| op
            .described(
                "A ticket that opens this stream's chat socket (`/ws/streams/{id}/chat?ticket=`) \
                 within a minute: for the user the tenant's server names in `userId` (a signed \
                 call), for the calling user, or read-only. A client registered with \
                 `requireSignature` needs one for every socket: the relay's calls for a socket \
                 opened without it are refused.",
            )
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden", "banned"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/broadcasts/{id}/chat",
        User(broadcast_history),
        "Broadcast history (chat)",
        |op| op.errors(400, &["invalid_query"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/chat",
        User(broadcast_post),
        "Broadcast post (chat)",
        |op| op
            .answers(202, HELD, Schema::view::<Message>())
            .errors(409, &["broadcast_ended"])
            .rate_limited(&MESSAGES)
            .then(moderation::document_post_refusals),
    ),
];

/// Messages of a target, newest `limit` after skipping `offset` newest, oldest first.
fn history(ctx: &Call, db: &Db, target: &ChatTarget) -> Result<endpoint::Page<Message>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let (items, total) = store::history(db, &target.store(), page)?;
    Ok(endpoint::Page(Paged::new(items, total, page)))
}

/// Stores a message from the signed-in user once the moderation checks let it through;
/// a message held for review is stored unseen and answered with 202.
fn post(
    ctx: &UserCtx,
    db: &Db,
    target: &ChatTarget,
    message: String,
    via_broadcast: bool,
) -> Result<Posted, ApiError> {
    let user = &ctx.user;
    if let Some(b) = &target.broadcast
        && b.status.is_final()
    {
        return Err(ApiError::conflict(
            "broadcast_ended",
            format!("the broadcast is {}; its chat is closed", b.status.as_str()),
        ));
    }
    let screening = moderation::screen(db, target, &user.id, &message, ctx.now_millis())?;
    MESSAGES.hit(db, &format!("{}:{}", target.client_id, user.id), ctx.now())?;
    let id = ids::uuid();
    let broadcast_id = target
        .broadcast
        .as_ref()
        .filter(|_| via_broadcast)
        .map(|b| b.id.as_str());
    // `subscriber` when the sender actively subscribes to the broadcast's host.
    let badge = (target.broadcast.is_some() && screening.subscribes).then_some("subscriber");
    let new = NewMessage {
        id: &id,
        broadcast_id,
        sender_id: &user.id,
        sender_name: &user.username,
        sender_badge: badge,
        text: &message,
        held: screening.screened == Screened::Hold,
    };
    if screening.screened == Screened::Hold {
        let stored = db.transaction(|tx| {
            moderation::claim_slow_mode_slot(tx, target, &user.id, screening, ctx.now_millis())?;
            let stored = store::insert(tx, &target.store(), &new, ctx.now_millis())?;
            moderation::hold(tx, target, &stored, ctx.now_millis())?;
            Ok(stored)
        })?;
        return Ok(OneOf::First(Accepted(stored)));
    }
    let stored = db.transaction(|db| {
        moderation::claim_slow_mode_slot(db, target, &user.id, screening, ctx.now_millis())?;
        let stored = store::insert(db, &target.store(), &new, ctx.now_millis())?;
        if let Some(b) = &target.broadcast {
            analytics::chat_message(db, b, &user.id, ctx.now())?;
        }
        Ok(stored)
    })?;
    // Sockets see REST posts too; the relay drops the copy of a post it made itself (the
    // same message id).
    realtime::publish(
        &target.stream_id,
        Event::ChatMessage {
            message: serde_json::to_value(&stored).unwrap_or_default(),
        },
    );
    Ok(OneOf::Second(Json(stored)))
}

/// Anyone who may watch the stream (the relay reads for its sockets).
fn stream_history(ctx: &CallerCtx, _: NoBody) -> Result<endpoint::Page<Message>, ApiError> {
    let db = ctx.db()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::of(&ctx.caller), &db)?;
    if let Some(user) = ctx.user() {
        moderation::check_not_banned(&db, &target, &user.id, ctx.now_millis())?;
    }
    history(ctx, &db, &target)
}

/// A ticket that opens this stream's chat socket within a minute. The tenant's server (a
/// signed call) mints one for the user its body's `userId` names, or read-only without one;
/// a user mints their own; a guest a read-only one. A client that requires signed calls
/// needs a ticket for its sockets: the relay's calls for a socket opened without one are
/// refused.
fn socket_ticket(
    ctx: &CallerCtx,
    TicketBody { user_id: named }: TicketBody,
) -> Result<Json<TicketView>, ApiError> {
    let db = ctx.db()?;
    let user_id = match (&ctx.caller, named) {
        (Caller::Server, Some(named)) => Some(
            users::by_id(&db, &ctx.tenant.client_id, &named)?
                .ok_or_else(|| ApiError::not_found("user"))?
                .id,
        ),
        (Caller::User(user), None) => Some(user.id.clone()),
        (Caller::User(user), Some(named)) if named == user.id => Some(named),
        (Caller::Server | Caller::Guest, None) => None,
        (Caller::User(_) | Caller::Guest, Some(_)) => {
            return Err(ApiError::forbidden(
                "only the tenant's server mints tickets for another user",
            ));
        }
    };
    // As the socket will read: as its user, or as a guest.
    let viewer = match &user_id {
        Some(id) => Viewer::User(id),
        None => Viewer::Guest,
    };
    let target = stream_target(ctx, &ctx.tenant, viewer, &db)?;
    if let Some(id) = &user_id {
        moderation::check_not_banned(&db, &target, id, ctx.now_millis())?;
    }
    // The id as the socket's path names it (a broadcast's id or its streamId).
    let stream = ids::parse_uuid(ctx.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the stream id must be a UUID"))?;
    let secret = config::required("jwt_secret")?;
    let ticket = jwt::issue_socket_ticket(
        secret.as_bytes(),
        &ctx.tenant.client_id,
        &stream,
        user_id.as_deref(),
        ctx.now(),
    );
    Ok(Json(TicketView {
        ticket,
        stream_id: stream,
        user_id,
        expires_at: time::format_rfc3339(ctx.now() + jwt::SOCKET_TICKET_TTL_SECS),
    }))
}

/// As the signed-in user (the relay posts for its sockets). Addressed by the broadcast's
/// own id rather than its streamId, it is a post to the broadcast's chat, and stored as one.
fn stream_post(ctx: &UserCtx, PostBody { message }: PostBody) -> Result<Posted, ApiError> {
    let db = ctx.db()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::User(&ctx.user.id), &db)?;
    let by_broadcast_id = target
        .broadcast
        .as_ref()
        .is_some_and(|b| ids::parse_uuid(ctx.param("id")).as_deref() == Some(b.id.as_str()));
    post(ctx, &db, &target, message, by_broadcast_id)
}

/// Includes messages stored under its streamId.
fn broadcast_history(ctx: &UserCtx, _: NoBody) -> Result<endpoint::Page<Message>, ApiError> {
    let db = ctx.db()?;
    let target = broadcast_target(ctx, &db)?;
    moderation::check_not_banned(&db, &target, &ctx.user.id, ctx.now_millis())?;
    history(ctx, &db, &target)
}

/// A post to the broadcast's chat.
fn broadcast_post(ctx: &UserCtx, PostBody { message }: PostBody) -> Result<Posted, ApiError> {
    let db = ctx.db()?;
    let target = broadcast_target(ctx, &db)?;
    post(ctx, &db, &target, message, true)
}

/// Marks the message deleted (its record stays, with `deleted: true` and no text).
fn stream_delete(ctx: &UserCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let user = &ctx.user;
    let db = ctx.db()?;
    let target = stream_target(ctx, &ctx.tenant, Viewer::User(&user.id), &db)?;
    let message_id = ids::parse_uuid(ctx.param("messageId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the message id must be a UUID"))?;
    let sender = store::sender_of(&db, &target.store(), &message_id)?
        .ok_or_else(|| ApiError::not_found("message"))?;
    let own = sender == user.id;
    if !own && !is_moderator(&db, &target, &user.id)? {
        return Err(ApiError::forbidden(
            "only the sender, the owner or a co-host with canModerateChat deletes a message",
        ));
    }
    // The deletion, its minute in the analytics and its webhook event commit together.
    let deleted_event = |tx: &Db| {
        let message = DeletedMessage {
            id: &message_id,
            stream_id: &target.stream_id,
            broadcast_id: target.broadcast.as_ref().map(|b| b.id.as_str()),
            sender_id: &sender,
            deleted_by: &user.id,
        };
        crate::webhook_events::chat_message_deleted(tx, &target.client_id, &message, ctx.now())
    };
    if own {
        db.transaction(|tx| {
            let posted_ms = store::delete(tx, &target.client_id, &message_id, &user.id, ctx.now())?;
            if let (Some(b), Some(ms)) = (&target.broadcast, posted_ms) {
                analytics::chat_message_deleted(tx, b, ms.div_euclid(1000))?;
            }
            deleted_event(tx)
        })?;
    } else {
        moderation::delete_as_moderator(
            ctx,
            &db,
            &target,
            &message_id,
            &sender,
            &user.id,
            &deleted_event,
        )?;
    }
    realtime::publish(
        &target.stream_id,
        Event::ChatDeleted {
            id: message_id.clone(),
        },
    );
    Ok(Json(Deleted::of(message_id)))
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
