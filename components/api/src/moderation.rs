//! Chat moderation: the checks every chat post passes (`screen`), and the moderators'
//! routes: timeouts, bans, modes, clearing, pins, reports, the log, blocked words.
//!
//! Moderators of a stream's chat are its creator, co-hosts with canModerateChat, and the
//! tenant's server; channel-wide forms (`/api/users/me/chat/...`) are the creator's own.
//! Every action is logged and pushed live as a `moderation` event after it commits.

use crate::access::Viewer;
use crate::chat_target::{self, ChatTarget};
use crate::realtime;
use common::domain::moderation::{
    self as rules, BlockedAction, MAX_REASON_CHARS, MAX_TIMEOUT_SECS, Modes, Poster, Refusal, Scope,
};
use common::domain::word_filter::{self, Blocklist};
use common::pagination::{Page, Paged};
use common::problem::FieldError;
use common::realtime::{Event, ModerationAction};
use common::spin::http::{ActorCtx, Call, ServerCtx, UserCtx, json};
use common::store::chat::{self as chat_store, Message};
use common::store::moderation::{
    self as store, NewLogEntry, NewReport, NewRestriction, ReportFilter, WordList,
};
use common::store::outbox::{self, Subject};
use common::store::{Db, broadcasts as broadcast_store, rate_limits, users};
use common::validate::JsonBody;
use common::{ApiError, ids, time};
use serde_json::{Value, json};
use spin_sdk::http::Response;

/// Reports one user may file per window.
const REPORT_MAX: i64 = 5;
const REPORT_WINDOW_SECS: i64 = 60;
/// How many open streams of a creator a channel-wide action is pushed to.
const CHANNEL_PUSH_LIMIT: i64 = 20;

/// What the checks decided about a message that may be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screened {
    Show,
    /// A blocked word matched and the creator holds such messages for review.
    Hold,
}

/// The checks' decision, and the slow mode the post must still claim a slot in (inside
/// its transaction, [`claim_slow_mode_slot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screening {
    pub screened: Screened,
    pub slow_mode_seconds: Option<i64>,
}

/// The checks of one chat post, in order: the poster's restriction (ban, timeout), then,
/// for everyone but moderators, the modes and blocked words; slow mode is claimed when the
/// post is stored. Answers the refusal as the API sends it.
pub fn screen(
    db: &Db,
    target: &ChatTarget,
    user_id: &str,
    message: &str,
    now_ms: i64,
) -> Result<Screening, ApiError> {
    let owner = target.owner_id.as_deref();
    let restrictions = store::restrictions_of(
        db,
        &target.client_id,
        &target.stream_id,
        owner,
        user_id,
        now_ms,
    )?;
    let restriction = rules::binding(&restrictions, now_ms);
    let is_moderator = restriction.is_none() && chat_target::is_moderator(db, target, user_id)?;
    let settings = if is_moderator {
        store::Settings::default()
    } else {
        store::settings(db, &target.client_id, &target.stream_id)?
    };
    let modes = &settings.modes;
    let poster = Poster {
        is_moderator,
        following_since_ms: match (owner, modes.followers_only_minutes, is_moderator) {
            (Some(owner), Some(_), false) => {
                store::following_since_ms(db, &target.client_id, user_id, owner)?
            }
            _ => None,
        },
        is_subscriber: match (owner, modes.subscribers_only, is_moderator) {
            (Some(owner), true, false) => common::store::subscriptions::is_subscriber(
                db,
                &target.client_id,
                owner,
                user_id,
                now_ms / 1000,
            )?,
            _ => false,
        },
    };
    rules::check_post(restriction, modes, &poster, message, now_ms)
        .map_err(|why| refusal(why, now_ms))?;
    if is_moderator {
        return Ok(Screening {
            screened: Screened::Show,
            slow_mode_seconds: None,
        });
    }
    let mut screened = Screened::Show;
    let (creator_list, tenant_list) = store::word_lists_for(db, &target.client_id, owner)?;
    let action = creator_list
        .as_ref()
        .or(tenant_list.as_ref())
        .map(|l| l.action)
        .unwrap_or_default();
    let blocklists = creator_list
        .iter()
        .chain(tenant_list.iter())
        .map(|l| Blocklist::parse(&l.compiled))
        .collect::<Option<Vec<_>>>()
        // Only `word_filter::compile` writes the stored form: failing closed beats
        // letting every word through.
        .ok_or_else(|| ApiError::internal("a stored blocked-word list is unreadable"))?;
    if word_filter::is_blocked(message, &blocklists) {
        match action {
            BlockedAction::Reject => {
                return Err(ApiError::new(
                    422,
                    "blocked_word",
                    "the message contains a word this chat does not allow",
                ));
            }
            BlockedAction::Hold => screened = Screened::Hold,
        }
    }
    Ok(Screening {
        screened,
        slow_mode_seconds: rules::slow_mode_for(modes, &poster),
    })
}

/// Claims the poster's slot in a slow-mode chat, inside the post's transaction, or answers
/// 429 `slow_mode` with `Retry-After`.
pub fn claim_slow_mode_slot(
    db: &Db,
    target: &ChatTarget,
    user_id: &str,
    screening: Screening,
    now_ms: i64,
) -> Result<(), ApiError> {
    let Some(seconds) = screening.slow_mode_seconds else {
        return Ok(());
    };
    let wait_ms = store::claim_slow_mode_slot(
        db,
        &target.client_id,
        &target.stream_id,
        user_id,
        seconds,
        now_ms,
    )?;
    match wait_ms {
        None => Ok(()),
        Some(wait_ms) => Err(ApiError::new(
            429,
            "slow_mode",
            format!("slow mode: one message per {seconds} seconds"),
        )
        .with_extra("slowModeSeconds", seconds)
        .with_header("retry-after", (wait_ms + 999).div_euclid(1000).to_string())),
    }
}

/// The API's answer to a refused post at `now_ms`.
fn refusal(why: Refusal, now_ms: i64) -> ApiError {
    match why {
        Refusal::Banned(scope) => ApiError::new(403, "banned", "you are banned from this chat")
            .with_extra("scope", scope.as_str()),
        Refusal::TimedOut { until_ms } => {
            let wait_secs = (until_ms - now_ms + 999).div_euclid(1000).max(1);
            ApiError::new(403, "timed_out", "you are timed out in this chat")
                .with_extra("until", time::format_rfc3339_millis(until_ms))
                .with_header("retry-after", wait_secs.to_string())
        }
        Refusal::FollowersOnly { minutes } => ApiError::new(
            403,
            "followers_only",
            format!("this chat is for followers (of at least {minutes} minutes)"),
        )
        .with_extra("followersOnlyMinutes", minutes),
        Refusal::SubscribersOnly => {
            ApiError::new(403, "subscribers_only", "this chat is for subscribers")
        }
        Refusal::ReactionsOnly => ApiError::new(
            403,
            "reactions_only",
            "this chat takes only emoji and :reaction: codes now",
        ),
    }
}

/// A banned user reads no more of the chat (a timed-out one still does).
pub fn check_not_banned(
    db: &Db,
    target: &ChatTarget,
    user_id: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    let restrictions = store::restrictions_of(
        db,
        &target.client_id,
        &target.stream_id,
        target.owner_id.as_deref(),
        user_id,
        now_ms,
    )?;
    match rules::binding(&restrictions, now_ms) {
        Some(r) if r.is_ban() => Err(refusal(Refusal::Banned(r.scope), now_ms)),
        _ => Ok(()),
    }
}

/// Files a held message in the review queue (inside the post's transaction).
pub fn hold(db: &Db, target: &ChatTarget, message: &Message, now_ms: i64) -> Result<(), ApiError> {
    store::add_report(
        db,
        &NewReport {
            client_id: &target.client_id,
            stream_id: &target.stream_id,
            message_id: &message.id,
            reporter_id: None,
            reason: "blocked_word",
        },
        now_ms,
    )?;
    Ok(())
}

/// A moderator deletes another user's message: deleted and logged together.
pub fn delete_as_moderator(
    call: &Call,
    db: &Db,
    target: &ChatTarget,
    message_id: &str,
    sender: &str,
    actor: &str,
    deleted_event: &dyn Fn(&Db) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    db.transaction(|tx| {
        let posted_ms = chat_store::delete(tx, &target.client_id, message_id, actor, call.now())?;
        if let (Some(b), Some(ms)) = (&target.broadcast, posted_ms) {
            common::store::analytics::chat_message_deleted(tx, b, ms.div_euclid(1000))?;
        }
        deleted_event(tx)?;
        log_action(
            tx,
            target,
            actor,
            ModerationAction::MessageDeleted.as_str(),
            Some(sender),
            Some(message_id),
            "",
            json!({}),
            call.now_millis(),
        )
    })?;
    let mut event = Event::moderation(ModerationAction::MessageDeleted);
    if let Event::Moderation {
        user_id,
        message_id: id,
        ..
    } = &mut event
    {
        *user_id = Some(sender.to_string());
        *id = Some(message_id.to_string());
    }
    realtime::publish(&target.stream_id, event);
    Ok(())
}

// ---- Who acts ----

/// The moderator acting: a user id, or `server`.
struct Moderator {
    actor: String,
    /// The creator or the server (channel-wide actions are theirs alone).
    is_creator: bool,
}

/// The chat of the path's stream, if the caller moderates it (403 otherwise; 404 when the
/// caller may not even see it).
fn moderated(ctx: &ActorCtx, db: &Db) -> Result<(ChatTarget, Moderator), ApiError> {
    let target = chat_target::stream_target(ctx, &ctx.tenant, Viewer::of_actor(&ctx.actor), db)?;
    let moderator = match ctx.user() {
        None => Moderator {
            actor: "server".into(),
            is_creator: true,
        },
        Some(user) if chat_target::is_moderator(db, &target, &user.id)? => Moderator {
            actor: user.id.clone(),
            is_creator: target.owner_id.as_deref() == Some(user.id.as_str()),
        },
        Some(_) => {
            return Err(ApiError::new(
                403,
                "not_a_moderator",
                "only the creator, a co-host with canModerateChat or the tenant's server moderates this chat",
            ));
        }
    };
    Ok((target, moderator))
}

#[allow(clippy::too_many_arguments)]
fn log_action(
    db: &Db,
    target: &ChatTarget,
    actor: &str,
    action: &str,
    target_user: Option<&str>,
    message_id: Option<&str>,
    reason: &str,
    detail: Value,
    now_ms: i64,
) -> Result<(), ApiError> {
    store::log(
        db,
        &NewLogEntry {
            client_id: &target.client_id,
            scope: Scope::Stream,
            scope_id: &target.stream_id,
            actor,
            action,
            target_user_id: target_user,
            message_id,
            reason,
            detail,
        },
        now_ms,
    )
}

fn user_id_field(body: &mut JsonBody) -> String {
    let raw = body.string("userId", 64);
    match ids::parse_uuid(&raw) {
        Some(id) => id,
        None => {
            if !raw.is_empty() {
                body.error("userId", "must be a user id (a UUID)");
            }
            String::new()
        }
    }
}

fn reason_field(body: &mut JsonBody) -> String {
    body.opt_string("reason", MAX_REASON_CHARS)
        .unwrap_or_default()
}

fn scope_field(body: &mut JsonBody) -> Scope {
    match body.opt_string("scope", 16) {
        None => Scope::Stream,
        Some(s) => Scope::parse(&s).unwrap_or_else(|| {
            body.error("scope", "must be `stream` or `channel`");
            Scope::Stream
        }),
    }
}

/// The user to restrict must be of the tenant and not a moderator of this chat.
fn check_restrictable(db: &Db, target: &ChatTarget, user_id: &str) -> Result<(), ApiError> {
    if !users::exists(db, &target.client_id, user_id)? {
        return Err(crate::users::unknown_user("userId"));
    }
    if chat_target::is_moderator(db, target, user_id)? {
        return Err(ApiError::conflict(
            "cannot_restrict_moderator",
            "the creator and the chat's moderators cannot be timed out or banned",
        ));
    }
    Ok(())
}

/// Where a restriction is stored: the stream, or the creator's channel.
fn scope_id<'t>(
    target: &'t ChatTarget,
    scope: Scope,
    moderator: &Moderator,
) -> Result<&'t str, ApiError> {
    match scope {
        Scope::Stream => Ok(&target.stream_id),
        Scope::Channel => {
            if !moderator.is_creator {
                return Err(ApiError::new(
                    403,
                    "not_the_creator",
                    "only the creator or the tenant's server restricts a user channel-wide",
                ));
            }
            target.owner_id.as_deref().ok_or_else(|| {
                ApiError::conflict(
                    "no_channel",
                    "this stream has no creator: restrict the user on the stream",
                )
            })
        }
    }
}

/// A restriction as the API answers it.
fn restriction_view(user_id: &str, scope: Scope, until_ms: Option<i64>, reason: &str) -> Value {
    json!({
        "userId": user_id,
        "scope": scope.as_str(),
        "kind": if until_ms.is_some() { "timeout" } else { "ban" },
        "until": until_ms.map(time::format_rfc3339_millis),
        "reason": reason,
    })
}

fn restriction_event(
    action: ModerationAction,
    user: &str,
    scope: Scope,
    until_ms: Option<i64>,
) -> Event {
    let mut event = Event::moderation(action);
    if let Event::Moderation {
        user_id,
        scope: s,
        until,
        ..
    } = &mut event
    {
        *user_id = Some(user.to_string());
        *s = Some(scope.as_str().to_string());
        *until = until_ms.map(time::format_rfc3339_millis);
    }
    event
}

/// Pushes a channel-wide event to every open stream of the creator.
fn publish_channel(db: &Db, client_id: &str, owner: &str, event: Event) -> Result<(), ApiError> {
    for stream in
        broadcast_store::open_stream_ids_of_owner(db, client_id, owner, CHANNEL_PUSH_LIMIT)?
    {
        realtime::publish(&stream, event.clone());
    }
    Ok(())
}

struct Restrict<'a> {
    target: Option<&'a ChatTarget>,
    client_id: &'a str,
    scope: Scope,
    scope_id: &'a str,
    user_id: &'a str,
    until_ms: Option<i64>,
    reason: &'a str,
    actor: &'a str,
    /// The creator, for channel-wide pushes.
    owner: Option<&'a str>,
}

/// Stores a timeout or ban with its log entry (and, for a ban, its `chat.user_banned`
/// webhook event) in one transaction, then pushes it live.
fn apply_restriction(call: &Call, db: &Db, r: &Restrict<'_>) -> Result<Value, ApiError> {
    let now_ms = call.now_millis();
    let action = if r.until_ms.is_some() {
        ModerationAction::UserTimedOut
    } else {
        ModerationAction::UserBanned
    };
    let stored = db.transaction(|tx| {
        let stored = store::restrict(
            tx,
            &NewRestriction {
                client_id: r.client_id,
                scope: r.scope,
                scope_id: r.scope_id,
                user_id: r.user_id,
                until_ms: r.until_ms,
                reason: r.reason,
                by: r.actor,
            },
            now_ms,
        )?;
        let view = restriction_view(r.user_id, r.scope, stored.until_ms, r.reason);
        store::log(
            tx,
            &NewLogEntry {
                client_id: r.client_id,
                scope: r.scope,
                scope_id: r.scope_id,
                actor: r.actor,
                action: action.as_str(),
                target_user_id: Some(r.user_id),
                message_id: None,
                reason: r.reason,
                detail: json!({"until": view["until"]}),
            },
            now_ms,
        )?;
        if stored.is_ban() && r.until_ms.is_none() {
            let mut data = view.clone();
            data["streamId"] = r.target.map(|t| t.stream_id.clone()).into();
            data["creatorId"] = r.owner.into();
            data["bannedBy"] = r.actor.into();
            outbox::record(
                tx,
                r.client_id,
                "chat.user_banned",
                Subject {
                    object_type: "user",
                    object_id: r.user_id,
                },
                data,
                call.now(),
            )?;
        }
        Ok((stored, view))
    })?;
    let (stored, view) = stored;
    let live_action = if stored.is_ban() {
        ModerationAction::UserBanned
    } else {
        action
    };
    let event = restriction_event(live_action, r.user_id, r.scope, stored.until_ms);
    match (r.scope, r.owner, r.target) {
        (Scope::Channel, Some(owner), _) => publish_channel(db, r.client_id, owner, event)?,
        (_, _, Some(target)) => realtime::publish(&target.stream_id, event),
        _ => {}
    }
    Ok(view)
}

// ---- Stream routes ----

/// `POST /api/streams/{id}/chat/timeouts` `{userId, seconds, reason?, scope?}`
pub fn timeout(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let mut body = ctx.json()?;
    let user_id = user_id_field(&mut body);
    let seconds = body.opt_int("seconds", 1..=MAX_TIMEOUT_SECS);
    if seconds.is_none() && !body.has_errors_for(&["seconds"]) {
        body.error("seconds", "is required");
    }
    let reason = reason_field(&mut body);
    let scope = scope_field(&mut body);
    body.finish()?;
    let seconds = seconds.unwrap_or(1);
    let scope_id = scope_id(&target, scope, &moderator)?;
    check_restrictable(&db, &target, &user_id)?;
    let view = apply_restriction(
        ctx,
        &db,
        &Restrict {
            target: Some(&target),
            client_id: &target.client_id,
            scope,
            scope_id,
            user_id: &user_id,
            until_ms: Some(ctx.now_millis() + seconds * 1000),
            reason: &reason,
            actor: &moderator.actor,
            owner: target.owner_id.as_deref(),
        },
    )?;
    Ok(json(200, &view))
}

/// `POST /api/streams/{id}/chat/bans` `{userId, reason?, scope?}`
pub fn ban(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let mut body = ctx.json()?;
    let user_id = user_id_field(&mut body);
    let reason = reason_field(&mut body);
    let scope = scope_field(&mut body);
    body.finish()?;
    let scope_id = scope_id(&target, scope, &moderator)?;
    check_restrictable(&db, &target, &user_id)?;
    let view = apply_restriction(
        ctx,
        &db,
        &Restrict {
            target: Some(&target),
            client_id: &target.client_id,
            scope,
            scope_id,
            user_id: &user_id,
            until_ms: None,
            reason: &reason,
            actor: &moderator.actor,
            owner: target.owner_id.as_deref(),
        },
    )?;
    Ok(json(200, &view))
}

/// Lifts a restriction with its log entry, then pushes `user_unbanned`.
fn lift(
    call: &Call,
    db: &Db,
    client_id: &str,
    scope: Scope,
    scope_id: &str,
    actor: &str,
) -> Result<String, ApiError> {
    let user_id = ids::parse_uuid(call.param("userId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the user id must be a UUID"))?;
    db.transaction(|tx| {
        if !store::lift(tx, client_id, scope, scope_id, &user_id)? {
            return Err(ApiError::not_found("ban"));
        }
        store::log(
            tx,
            &NewLogEntry {
                client_id,
                scope,
                scope_id,
                actor,
                action: ModerationAction::UserUnbanned.as_str(),
                target_user_id: Some(&user_id),
                message_id: None,
                reason: "",
                detail: json!({}),
            },
            call.now_millis(),
        )
    })?;
    Ok(user_id)
}

/// `DELETE /api/streams/{id}/chat/bans/{userId}` (`?scope=channel` for a channel-wide one)
pub fn unban(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let scope = match ctx.query_value("scope").as_deref() {
        None | Some("stream") => Scope::Stream,
        Some("channel") => Scope::Channel,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_scope",
                "scope must be `stream` or `channel`",
            ));
        }
    };
    let scope_id = scope_id(&target, scope, &moderator)?;
    let user_id = lift(
        ctx,
        &db,
        &target.client_id,
        scope,
        scope_id,
        &moderator.actor,
    )?;
    let event = restriction_event(ModerationAction::UserUnbanned, &user_id, scope, None);
    match (scope, target.owner_id.as_deref()) {
        (Scope::Channel, Some(owner)) => publish_channel(&db, &target.client_id, owner, event)?,
        _ => realtime::publish(&target.stream_id, event),
    }
    Ok(json(
        200,
        &json!({"success": true, "userId": user_id, "scope": scope.as_str()}),
    ))
}

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

/// `POST /api/streams/{id}/chat/{messageId}/report` `{reason}`: any signed-in viewer who
/// may read the chat; rate limited; once per message and reporter.
pub fn report(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let target = chat_target::stream_target(ctx, &ctx.tenant, Viewer::User(&ctx.user.id), &db)?;
    let message_id = ids::parse_uuid(ctx.param("messageId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the message id must be a UUID"))?;
    let mut body = ctx.json()?;
    let reason = body.string("reason", MAX_REASON_CHARS);
    body.finish()?;
    let message = chat_store::message(&db, &target.store(), &message_id)?
        .filter(|m| !m.deleted && !m.held)
        .ok_or_else(|| ApiError::not_found("message"))?;
    let filed = db.transaction(|tx| {
        let Some(filed) = store::add_report(
            tx,
            &NewReport {
                client_id: &target.client_id,
                stream_id: &target.stream_id,
                message_id: &message.id,
                reporter_id: Some(&ctx.user.id),
                reason: &reason,
            },
            ctx.now_millis(),
        )?
        else {
            return Err(ApiError::conflict(
                "already_reported",
                "you reported this message already",
            ));
        };
        // Counted with the report itself: a duplicate or refused report is not counted.
        rate_limits::hit(
            tx,
            &format!("chat-report:{}:{}", target.client_id, ctx.user.id),
            REPORT_MAX,
            REPORT_WINDOW_SECS,
            ctx.now(),
        )?;
        let mut data = serde_json::to_value(&filed).unwrap_or_default();
        data["message"] = serde_json::to_value(&message).unwrap_or_default();
        outbox::record(
            tx,
            &target.client_id,
            "chat.message_reported",
            Subject {
                object_type: "chat_message",
                object_id: &message.id,
            },
            data,
            ctx.now(),
        )?;
        Ok(filed)
    })?;
    Ok(json(201, &filed))
}

/// `GET /api/streams/{id}/chat/reports?status=open|resolved|all`: the queue, oldest first.
pub fn reports(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, _) = moderated(ctx, &db)?;
    let filter = match ctx.query_value("status").as_deref() {
        None | Some("open") => ReportFilter::Open,
        Some("resolved") => ReportFilter::Resolved,
        Some("all") => ReportFilter::All,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_status",
                "status must be open, resolved or all",
            ));
        }
    };
    let page = Page::from_query(ctx.query())?;
    let (items, total) = store::reports(&db, &target.client_id, &target.stream_id, filter, page)?;
    Ok(json(200, &Paged::new(items, total, page)))
}

/// `POST /api/streams/{id}/chat/reports/{reportId}/resolve`
/// `{action: "dismiss" | "delete" | "approve", note?}`: `delete` deletes the message,
/// `approve` shows a held one. Every open report of that message is settled with it.
pub fn resolve(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let report_id = ids::parse_uuid(ctx.param("reportId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the report id must be a UUID"))?;
    let mut body = ctx.json()?;
    let action = body.string("action", 16);
    let note = body
        .opt_string("note", MAX_REASON_CHARS)
        .unwrap_or_default();
    if !action.is_empty() && !matches!(action.as_str(), "dismiss" | "delete" | "approve") {
        body.error("action", "must be dismiss, delete or approve");
    }
    body.finish()?;
    let report = store::report(&db, &target.client_id, &target.stream_id, &report_id)?
        .ok_or_else(|| ApiError::not_found("report"))?;
    if action == "approve" && report.kind != "held" {
        return Err(ApiError::conflict(
            "not_held",
            "only a held message is approved; dismiss a report instead",
        ));
    }
    let resolution = match action.as_str() {
        "delete" => "deleted",
        "approve" => "approved",
        _ => "dismissed",
    };
    let now_ms = ctx.now_millis();
    let (resolved, released) = db.transaction(|tx| {
        let Some(resolved) = store::resolve(
            tx,
            &target.client_id,
            &report_id,
            resolution,
            &moderator.actor,
            now_ms,
        )?
        else {
            return Err(ApiError::conflict(
                "already_resolved",
                "this report was resolved already",
            ));
        };
        store::resolve_all_of_message(
            tx,
            &target.client_id,
            &report.message_id,
            resolution,
            &moderator.actor,
            now_ms,
        )?;
        let released = match resolution {
            "deleted" => {
                chat_store::delete(
                    tx,
                    &target.client_id,
                    &report.message_id,
                    &moderator.actor,
                    ctx.now(),
                )?;
                None
            }
            "approved" => chat_store::release(tx, &target.client_id, &report.message_id)?,
            _ => None,
        };
        log_action(
            tx,
            &target,
            &moderator.actor,
            "report_resolved",
            None,
            Some(&report.message_id),
            &note,
            json!({"reportId": report_id, "resolution": resolution}),
            now_ms,
        )?;
        Ok((resolved, released))
    })?;
    match (resolution, released) {
        ("deleted", _) => realtime::publish(
            &target.stream_id,
            Event::ChatDeleted {
                id: report.message_id.clone(),
            },
        ),
        (_, Some(message)) => realtime::publish(
            &target.stream_id,
            Event::ChatMessage {
                message: serde_json::to_value(&message).unwrap_or_default(),
            },
        ),
        _ => {}
    }
    Ok(json(200, &resolved))
}

/// `GET /api/streams/{id}/chat/moderation-log`: newest first, with the creator's
/// channel-wide actions.
pub fn moderation_log(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let (target, _) = moderated(ctx, &db)?;
    let page = Page::from_query(ctx.query())?;
    let (items, total) = store::log_page(
        &db,
        &target.client_id,
        &target.stream_id,
        target.owner_id.as_deref(),
        page,
    )?;
    Ok(json(200, &Paged::new(items, total, page)))
}

// ---- The creator's channel-wide routes ----

/// `POST /api/users/me/chat/bans` `{userId, reason?}`: banned from all the creator's
/// streams.
pub fn channel_ban(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let mut body = ctx.json()?;
    let user_id = user_id_field(&mut body);
    let reason = reason_field(&mut body);
    body.finish()?;
    let me = &ctx.user.id;
    if user_id == *me {
        return Err(ApiError::conflict(
            "cannot_restrict_moderator",
            "a creator cannot ban themself",
        ));
    }
    if !users::exists(&db, &ctx.tenant.client_id, &user_id)? {
        return Err(crate::users::unknown_user("userId"));
    }
    let view = apply_restriction(
        ctx,
        &db,
        &Restrict {
            target: None,
            client_id: &ctx.tenant.client_id,
            scope: Scope::Channel,
            scope_id: me,
            user_id: &user_id,
            until_ms: None,
            reason: &reason,
            actor: me,
            owner: Some(me),
        },
    )?;
    Ok(json(200, &view))
}

/// `DELETE /api/users/me/chat/bans/{userId}`
pub fn channel_unban(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let me = &ctx.user.id;
    let user_id = lift(ctx, &db, &ctx.tenant.client_id, Scope::Channel, me, me)?;
    let event = restriction_event(
        ModerationAction::UserUnbanned,
        &user_id,
        Scope::Channel,
        None,
    );
    publish_channel(&db, &ctx.tenant.client_id, me, event)?;
    Ok(json(
        200,
        &json!({"success": true, "userId": user_id, "scope": "channel"}),
    ))
}

fn word_list_view(list: Option<WordList>) -> Value {
    let list = list.unwrap_or_default();
    json!({"words": list.words, "action": list.action.as_str()})
}

fn read_word_list(call: &Call) -> Result<WordList, ApiError> {
    let mut body = call.json()?;
    let words: Option<Vec<String>> = match body.opt_value("words") {
        Some(Value::Array(items)) => {
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect();
            if strings.is_none() {
                body.error("words", "must be an array of strings");
            }
            strings
        }
        Some(_) => {
            body.error("words", "must be an array of strings");
            None
        }
        None => {
            body.error("words", "is required");
            None
        }
    };
    let action = match body.opt_string("action", 16) {
        None => BlockedAction::Reject,
        Some(a) => BlockedAction::parse(&a).unwrap_or_else(|| {
            body.error("action", "must be reject or hold");
            BlockedAction::Reject
        }),
    };
    let words = match words.map(|w| word_filter::clean_patterns(&w)) {
        Some(Ok(w)) => w,
        Some(Err(why)) => {
            body.error("words", why);
            Vec::new()
        }
        None => Vec::new(),
    };
    body.finish()?;
    Ok(WordList { words, action })
}

/// `GET /api/users/me/chat/blocked-words`
pub fn get_blocked_words(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = store::word_list(&db, &ctx.tenant.client_id, &ctx.user.id)?;
    Ok(json(200, &word_list_view(list)))
}

/// `PUT /api/users/me/chat/blocked-words` `{words, action}`
pub fn put_blocked_words(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = read_word_list(ctx)?;
    let me = &ctx.user.id;
    db.transaction(|tx| {
        store::save_word_list(tx, &ctx.tenant.client_id, me, &list, ctx.now_millis())?;
        store::log(
            tx,
            &NewLogEntry {
                client_id: &ctx.tenant.client_id,
                scope: Scope::Channel,
                scope_id: me,
                actor: me,
                action: "blocked_words_changed",
                target_user_id: None,
                message_id: None,
                reason: "",
                detail: json!({"count": list.words.len(), "action": list.action.as_str()}),
            },
            ctx.now_millis(),
        )
    })?;
    Ok(json(200, &word_list_view(Some(list))))
}

/// `GET /api/v1/chat/blocked-words`: the tenant's default list (every creator's chat).
pub fn get_tenant_blocked_words(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = store::word_list(&db, &ctx.tenant.client_id, store::TENANT_LIST)?;
    Ok(json(200, &word_list_view(list)))
}

/// `PUT /api/v1/chat/blocked-words` `{words, action}`
pub fn put_tenant_blocked_words(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = read_word_list(ctx)?;
    store::save_word_list(
        &db,
        &ctx.tenant.client_id,
        store::TENANT_LIST,
        &list,
        ctx.now_millis(),
    )?;
    Ok(json(200, &word_list_view(Some(list))))
}
