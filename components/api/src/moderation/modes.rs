//! A stream chat's modes (slow, followers-only, subscribers-only, reactions-only), clearing
//! it, and its pinned message.

use super::{Moderator, UserId, log_action, moderated};
use crate::ApiRoute;
use crate::access::Viewer;
use crate::chat_target::{self, ChatTarget};
use crate::realtime;
use ::store::Db;
use ::store::chat::{self as chat_store, Message};
use ::store::moderation as store;
use domain::moderation::{MAX_FOLLOW_MINUTES, MAX_SLOW_MODE_SECS, Modes};
use domain::problem::FieldError;
use domain::validate::JsonBody;
use domain::validate::body::{FieldKind, OptBool, OptInt, Text};
use domain::{ApiError, ids, request_body};
use edge::endpoint;
use edge::realtime::{Event, ModerationAction};
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{ActorCtx, Call};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

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

/// The modes, clearing and pin routes of a stream's chat.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/streams/{id}/chat/settings",
        UserOrServer(get_settings),
        "Get settings (moderation)",
    ),
    endpoint!(
        PUT "/api/streams/{id}/chat/settings",
        UserOrServer(put_settings),
        "Put settings (moderation)",
        |op| op
            .errors(403, &["not_a_moderator"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        POST "/api/streams/{id}/chat/clear",
        UserOrServer(clear),
        "Clear (moderation)",
        |op| op.errors(403, &["not_a_moderator"]),
    ),
    endpoint!(
        PUT "/api/streams/{id}/chat/pin",
        UserOrServer(pin),
        "Pin (moderation)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["not_a_moderator"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/streams/{id}/chat/pin",
        UserOrServer(unpin),
        "Unpin (moderation)",
        |op| op.errors(403, &["not_a_moderator"]),
    ),
];

/// Anyone who may read the chat (clients show the modes).
fn get_settings(ctx: &ActorCtx, _: NoBody) -> Result<Json<SettingsView>, ApiError> {
    let db = ctx.db()?;
    let target = chat_target::stream_target(ctx, &ctx.tenant, Viewer::of_actor(&ctx.actor), &db)?;
    Ok(Json(settings_view(&db, &target)?))
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

/// The modes as a whole; a field left out is off.
fn put_settings(ctx: &ActorCtx, sent: ModesBody) -> Result<Json<SettingsView>, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
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
    Ok(Json(settings_view(&db, &target)?))
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

/// `{userId?}` (the body may be left out): deletes every message of the chat, or only that
/// user's.
fn clear(ctx: &ActorCtx, ClearBody { user_id }: ClearBody) -> Result<Json<Cleared>, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
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
    Ok(Json(Cleared {
        deleted: deleted.len() as i64,
        ids: deleted,
    }))
}

request_body! {
    /// The message to pin.
    pub struct PinBody as "ChatPin" {
        "messageId" message_id: Text<64>,
    }
}

/// `{messageId}`: a message shown in the chat.
fn pin(
    ctx: &ActorCtx,
    PinBody { message_id: raw }: PinBody,
) -> Result<Json<SettingsView>, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let message_id = ids::parse_uuid(&raw)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "messageId must be a UUID"))?;
    let message = chat_store::message(&db, &target.store(), &message_id)?
        .filter(|m| !m.deleted && !m.held)
        .ok_or_else(|| ApiError::not_found("message"))?;
    set_pin(ctx, &db, &target, &moderator, Some(&message))?;
    Ok(Json(settings_view(&db, &target)?))
}

/// No message is pinned any more.
fn unpin(ctx: &ActorCtx, _: NoBody) -> Result<Json<SettingsView>, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    set_pin(ctx, &db, &target, &moderator, None)?;
    Ok(Json(settings_view(&db, &target)?))
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
