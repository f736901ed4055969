//! A stream chat's modes (slow, followers-only, subscribers-only, reactions-only), clearing
//! it, and its pinned message.

use super::{Moderator, log_action, moderated, user_id_field};
use crate::access::Viewer;
use crate::chat_target::{self, ChatTarget};
use crate::realtime;
use common::domain::moderation::{self as rules, Modes};
use common::problem::FieldError;
use common::realtime::{Event, ModerationAction};
use common::spin::http::{ActorCtx, Call, json};
use common::store::Db;
use common::store::chat::{self as chat_store, Message};
use common::store::moderation as store;
use common::{ApiError, ids};
use serde_json::{Value, json};
use spin_sdk::http::Response;

fn settings_view(db: &Db, target: &ChatTarget) -> Result<Value, ApiError> {
    let settings = store::settings(db, &target.client_id, &target.stream_id)?;
    let pinned = match &settings.pinned_message_id {
        Some(id) => chat_store::message(db, &target.store(), id)?.filter(|m| !m.deleted && !m.held),
        None => None,
    };
    let mut view = serde_json::to_value(&settings.modes).unwrap_or_default();
    view["pinnedMessage"] = serde_json::to_value(pinned).unwrap_or_default();
    Ok(view)
}

/// `GET /api/streams/{id}/chat/settings`: anyone who may read the chat (clients show the
/// modes).
pub fn get_settings(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let target = chat_target::stream_target(ctx, &ctx.tenant, Viewer::of_actor(&ctx.actor), &db)?;
    Ok(json(200, &settings_view(&db, &target)?))
}

/// `PUT /api/streams/{id}/chat/settings`: the modes as a whole; a field left out is off.
pub fn put_settings(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let mut body = ctx.json()?;
    let modes = Modes {
        slow_mode_seconds: body
            .opt_int("slowModeSeconds", 0..=rules::MAX_SLOW_MODE_SECS)
            .unwrap_or(0),
        followers_only_minutes: body.opt_int("followersOnlyMinutes", 0..=rules::MAX_FOLLOW_MINUTES),
        subscribers_only: body.opt_bool("subscribersOnly").unwrap_or(false),
        reactions_only: body.opt_bool("reactionsOnly").unwrap_or(false),
    };
    body.finish()?;
    if let Err((field, why)) = modes.check() {
        return Err(ApiError::invalid_fields(vec![FieldError {
            field: field.into(),
            message: why,
        }]));
    }
    save_modes(ctx, &db, &target, &moderator, &modes)?;
    Ok(json(200, &settings_view(&db, &target)?))
}

fn save_modes(
    call: &Call,
    db: &Db,
    target: &ChatTarget,
    moderator: &Moderator,
    modes: &Modes,
) -> Result<(), ApiError> {
    let settings = serde_json::to_value(modes).unwrap_or_default();
    db.transaction(|tx| {
        store::save_modes(
            tx,
            &target.client_id,
            &target.stream_id,
            modes,
            call.now_millis(),
        )?;
        log_action(
            tx,
            target,
            &moderator.actor,
            ModerationAction::ModeChanged.as_str(),
            None,
            None,
            "",
            settings.clone(),
            call.now_millis(),
        )
    })?;
    let mut event = Event::moderation(ModerationAction::ModeChanged);
    if let Event::Moderation { settings: s, .. } = &mut event {
        *s = Some(settings);
    }
    realtime::publish(&target.stream_id, event);
    Ok(())
}

/// `POST /api/streams/{id}/chat/clear` `{userId?}`: deletes every message of the chat, or
/// only that user's.
pub fn clear(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let user_id = if ctx.req.body().is_empty() {
        None
    } else {
        let mut body = ctx.json()?;
        let user = body.has("userId").then(|| user_id_field(&mut body));
        body.finish()?;
        user
    };
    let (action, deleted) = db.transaction(|tx| {
        let deleted = chat_store::delete_many(
            tx,
            &target.store(),
            user_id.as_deref(),
            &moderator.actor,
            ctx.now(),
        )?;
        let action = if user_id.is_some() {
            ModerationAction::MessagesDeleted
        } else {
            ModerationAction::ChatCleared
        };
        log_action(
            tx,
            &target,
            &moderator.actor,
            action.as_str(),
            user_id.as_deref(),
            None,
            "",
            json!({"deleted": deleted.len()}),
            ctx.now_millis(),
        )?;
        Ok((action, deleted))
    })?;
    let mut event = Event::moderation(action);
    if let Event::Moderation {
        user_id: u,
        message_ids,
        ..
    } = &mut event
        && user_id.is_some()
    {
        *u = user_id.clone();
        *message_ids = Some(deleted.clone());
    }
    realtime::publish(&target.stream_id, event);
    Ok(json(
        200,
        &json!({"deleted": deleted.len(), "ids": deleted}),
    ))
}

/// `PUT /api/streams/{id}/chat/pin` `{messageId}`
pub fn pin(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let mut body = ctx.json()?;
    let raw = body.string("messageId", 64);
    body.finish()?;
    let message_id = ids::parse_uuid(&raw)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "messageId must be a UUID"))?;
    let message = chat_store::message(&db, &target.store(), &message_id)?
        .filter(|m| !m.deleted && !m.held)
        .ok_or_else(|| ApiError::not_found("message"))?;
    set_pin(ctx, &db, &target, &moderator, Some(&message))?;
    Ok(json(200, &settings_view(&db, &target)?))
}

/// `DELETE /api/streams/{id}/chat/pin`
pub fn unpin(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    set_pin(ctx, &db, &target, &moderator, None)?;
    Ok(json(200, &settings_view(&db, &target)?))
}

fn set_pin(
    call: &Call,
    db: &Db,
    target: &ChatTarget,
    moderator: &Moderator,
    message: Option<&Message>,
) -> Result<(), ApiError> {
    let id = message.map(|m| m.id.as_str());
    let action = if message.is_some() {
        ModerationAction::MessagePinned
    } else {
        ModerationAction::MessageUnpinned
    };
    db.transaction(|tx| {
        store::set_pin(
            tx,
            &target.client_id,
            &target.stream_id,
            id,
            call.now_millis(),
        )?;
        log_action(
            tx,
            target,
            &moderator.actor,
            action.as_str(),
            message.map(|m| m.sender_id.as_str()),
            id,
            "",
            json!({}),
            call.now_millis(),
        )
    })?;
    let mut event = Event::moderation(action);
    if let Event::Moderation {
        message_id,
        message: m,
        ..
    } = &mut event
    {
        *message_id = id.map(str::to_string);
        *m = message.map(|m| serde_json::to_value(m).unwrap_or_default());
    }
    realtime::publish(&target.stream_id, event);
    Ok(())
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<common::contract::Operation> {
    use common::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new(
            "GET /api/streams/{id}/chat/settings",
            "Get settings (moderation)",
        )
        .answers(
            200,
            "OK",
            Schema::written(json!({
                "$ref": "#/components/schemas/ChatSettings",
            })),
        ),
        Operation::new(
            "PUT /api/streams/{id}/chat/settings",
            "Put settings (moderation)",
        )
        .takes(Schema::written(json!({
            "type": "object",
            "properties": {
                "slowModeSeconds": { "type": ["integer", "null"], "minimum": 0 },
                "followersOnlyMinutes": { "type": ["integer", "null"], "minimum": 0 },
                "subscribersOnly": { "type": ["boolean", "null"] },
                "reactionsOnly": { "type": ["boolean", "null"] },
            },
            "additionalProperties": false,
        })))
        .answers(
            200,
            "OK",
            Schema::written(json!({
                "$ref": "#/components/schemas/ChatSettings",
            })),
        )
        .errors(403, &["not_a_moderator"])
        .errors(422, &["validation_failed"]),
        Operation::new("POST /api/streams/{id}/chat/clear", "Clear (moderation)")
            .takes(Schema::written(json!({
                "type": "object",
                "properties": {
                    "userId": {
                        "type": ["string", "null"],
                        "maxLength": 64,
                        "minLength": 1,
                        "pattern": "\\S",
                        "description": "Only this user's messages; absent or null: every message",
                    },
                },
                "additionalProperties": false,
            })))
            .answers(
                200,
                "OK",
                Schema::written(json!({
                    "type": "object",
                    "required": ["deleted", "ids"],
                    "properties": {
                        "deleted": { "type": "integer", "minimum": 0 },
                        "ids": { "type": "array", "items": {"type": "string", "format": "uuid"} },
                    },
                })),
            )
            .errors(403, &["not_a_moderator"]),
        Operation::new("PUT /api/streams/{id}/chat/pin", "Pin (moderation)")
            .takes(Schema::written(json!({
                "type": "object",
                "properties": {
                    "messageId": {
                        "type": "string",
                        "maxLength": 64,
                        "minLength": 1,
                        "pattern": "\\S",
                    },
                },
                "additionalProperties": false,
                "required": ["messageId"],
            })))
            .answers(
                200,
                "OK",
                Schema::written(json!({
                    "$ref": "#/components/schemas/ChatSettings",
                })),
            )
            .errors(400, &["invalid_id"])
            .errors(403, &["not_a_moderator"])
            .errors(404, &["not_found"]),
        Operation::new("DELETE /api/streams/{id}/chat/pin", "Unpin (moderation)")
            .answers(
                200,
                "OK",
                Schema::written(json!({
                    "$ref": "#/components/schemas/ChatSettings",
                })),
            )
            .errors(403, &["not_a_moderator"]),
    ]
}
