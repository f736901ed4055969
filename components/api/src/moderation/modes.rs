//! A stream chat's modes (slow, followers-only, subscribers-only, reactions-only), clearing
//! it, and its pinned message.

use super::{Moderator, UserId, log_action, moderated};
use crate::access::Viewer;
use crate::chat_target::{self, ChatTarget};
use crate::realtime;
use ::store::Db;
use ::store::chat::{self as chat_store, Message};
use ::store::moderation as store;
use domain::moderation::{MAX_FOLLOW_MINUTES, MAX_SLOW_MODE_SECS, Modes};
use domain::problem::FieldError;
use domain::validate::JsonBody;
use domain::validate::body::{FieldKind, OptBool, OptInt, RequestBody, Text};
use domain::{ApiError, ids, request_body};
use edge::realtime::{Event, ModerationAction};
use edge::spin::http::{ActorCtx, Call, json};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use spin_sdk::http::Response;

/// A stream's chat modes and its pinned message.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ChatSettings")]
pub struct SettingsView {
    /// One message per this many seconds per viewer; 0 is off.
    #[schemars(range(min = 0, max = MAX_SLOW_MODE_SECS))]
    slow_mode_seconds: i64,
    /// Only followers (of at least this many minutes) may chat; null is off.
    #[schemars(range(min = 0, max = MAX_FOLLOW_MINUTES))]
    followers_only_minutes: Option<i64>,
    subscribers_only: bool,
    /// Only emoji and `:reaction:` codes.
    reactions_only: bool,
    pinned_message: Option<Message>,
}

fn settings_view(db: &Db, target: &ChatTarget) -> Result<SettingsView, ApiError> {
    let settings = store::settings(db, &target.client_id, &target.stream_id)?;
    let pinned = match &settings.pinned_message_id {
        Some(id) => chat_store::message(db, &target.store(), id)?.filter(|m| !m.deleted && !m.held),
        None => None,
    };
    let Modes {
        slow_mode_seconds,
        followers_only_minutes,
        subscribers_only,
        reactions_only,
    } = settings.modes;
    Ok(SettingsView {
        slow_mode_seconds,
        followers_only_minutes,
        subscribers_only,
        reactions_only,
        pinned_message: pinned,
    })
}

/// `GET /api/streams/{id}/chat/settings`: anyone who may read the chat (clients show the
/// modes).
pub fn get_settings(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let target = chat_target::stream_target(ctx, &ctx.tenant, Viewer::of_actor(&ctx.actor), &db)?;
    Ok(json(200, &settings_view(&db, &target)?))
}

request_body! {
    /// A chat's modes, as a whole: a mode left out is off.
    pub struct ModesBody as "ChatModes" {
        /// One message per this many seconds per viewer; 0 is off.
        "slowModeSeconds" slow_mode_seconds: OptInt<0, { MAX_SLOW_MODE_SECS }>,
        /// Only followers (of at least this many minutes) may chat.
        "followersOnlyMinutes" followers_only_minutes: OptInt<0, { MAX_FOLLOW_MINUTES }>,
        "subscribersOnly" subscribers_only: OptBool,
        /// Only emoji and `:reaction:` codes.
        "reactionsOnly" reactions_only: OptBool,
    }
}

/// `PUT /api/streams/{id}/chat/settings`: the modes as a whole; a field left out is off.
pub fn put_settings(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let mut body = ctx.json()?;
    let sent = ModesBody::read(&mut body);
    body.finish()?;
    let modes = Modes {
        slow_mode_seconds: sent.slow_mode_seconds.unwrap_or(0),
        followers_only_minutes: sent.followers_only_minutes,
        subscribers_only: sent.subscribers_only.unwrap_or(false),
        reactions_only: sent.reactions_only.unwrap_or(false),
    };
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

/// The user whose messages a clearing deletes; left out, every message.
pub struct OptUserId;

impl FieldKind for OptUserId {
    type Value = Option<String>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<String> {
        body.has(name).then(|| UserId::read(body, name))
    }

    fn schema() -> Value {
        let mut schema = UserId::schema();
        schema["description"] = "Only this user's messages; left out: every message".into();
        schema
    }
}

request_body! {
    /// What a clearing deletes: every message of the chat, or one user's.
    pub struct ClearBody as "ChatClear" {
        "userId" user_id: OptUserId,
    }
}

/// What a clearing deleted.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "ChatCleared")]
pub struct Cleared {
    /// How many messages.
    #[schemars(range(min = 0))]
    deleted: i64,
    /// Their ids.
    #[schemars(extend("items" = { "type": "string", "format": "uuid" }))]
    ids: Vec<String>,
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
        let ClearBody { user_id } = ClearBody::read(&mut body);
        body.finish()?;
        user_id
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
        &Cleared {
            deleted: deleted.len() as i64,
            ids: deleted,
        },
    ))
}

request_body! {
    /// The message to pin.
    pub struct PinBody as "ChatPin" {
        "messageId" message_id: Text<64>,
    }
}

/// `PUT /api/streams/{id}/chat/pin` `{messageId}`
pub fn pin(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let mut body = ctx.json()?;
    let PinBody { message_id: raw } = PinBody::read(&mut body);
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
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
    vec![
        Operation::new(
            "GET /api/streams/{id}/chat/settings",
            "Get settings (moderation)",
        )
        .answers(200, "OK", Schema::view::<SettingsView>()),
        Operation::new(
            "PUT /api/streams/{id}/chat/settings",
            "Put settings (moderation)",
        )
        .takes(Schema::body::<ModesBody>())
        .answers(200, "OK", Schema::view::<SettingsView>())
        .errors(403, &["not_a_moderator"])
        .errors(422, &["validation_failed"]),
        Operation::new("POST /api/streams/{id}/chat/clear", "Clear (moderation)")
            .takes(Schema::body::<ClearBody>())
            .answers(200, "OK", Schema::view::<Cleared>())
            .errors(403, &["not_a_moderator"]),
        Operation::new("PUT /api/streams/{id}/chat/pin", "Pin (moderation)")
            .takes(Schema::body::<PinBody>())
            .answers(200, "OK", Schema::view::<SettingsView>())
            .errors(400, &["invalid_id"])
            .errors(403, &["not_a_moderator"])
            .errors(404, &["not_found"]),
        Operation::new("DELETE /api/streams/{id}/chat/pin", "Unpin (moderation)")
            .answers(200, "OK", Schema::view::<SettingsView>())
            .errors(403, &["not_a_moderator"]),
    ]
}
