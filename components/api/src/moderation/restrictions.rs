//! Timeouts and bans: on one stream's chat (its moderators) and channel-wide (the
//! creator's own, on every stream of theirs).

use super::{Moderator, OptScope, UserId, moderated, publish_channel};
use crate::ApiRoute;
use crate::chat_target::{self, ChatTarget};
use crate::realtime;
use ::store::moderation::{self as store, NewLogEntry, NewRestriction};
use ::store::outbox::{self, Subject};
use ::store::{Db, users};
use domain::moderation::{MAX_REASON_CHARS, MAX_TIMEOUT_SECS, Scope};
use domain::validate::body::{Int, OptText};
use domain::{ApiError, ids, request_body, time};
use edge::endpoint;
use edge::realtime::{Event, ModerationAction};
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{ActorCtx, Call, UserCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

request_body! {
    /// A timeout of a user in a stream's chat (or, with `scope: channel`, in every chat of
    /// its creator).
    pub struct TimeoutBody as "ChatTimeout" {
        "userId" user_id: UserId,
        /// How long, in seconds (at most two weeks).
        "seconds" seconds: Int<1, { MAX_TIMEOUT_SECS }>,
        "reason" reason: OptText<{ MAX_REASON_CHARS }>,
        "scope" scope: OptScope,
    }
}

request_body! {
    /// A ban of a user from every chat of the creator.
    pub struct ChannelBanBody as "ChatChannelBan" {
        "userId" user_id: UserId,
        "reason" reason: OptText<{ MAX_REASON_CHARS }>,
    }
}

request_body! {
    /// A ban of a user from a stream's chat (or, with `scope: channel`, from every chat of
    /// its creator).
    pub struct BanBody as "ChatBan" {
        ..ban: ChannelBanBody,
        "scope" scope: OptScope,
    }
}

/// A timeout or a ban of a user.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ChatRestriction")]
pub struct RestrictionView {
    #[schemars(extend("format" = "uuid"))]
    user_id: String,
    #[schemars(extend("enum" = ["stream", "channel"]))]
    scope: &'static str,
    #[schemars(extend("enum" = ["timeout", "ban"]))]
    kind: &'static str,
    /// When a timeout ends; null for a ban.
    #[schemars(extend("format" = "date-time"))]
    until: Option<String>,
    reason: String,
}

impl RestrictionView {
    fn of(user_id: &str, scope: Scope, until_ms: Option<i64>, reason: &str) -> Self {
        RestrictionView {
            user_id: user_id.to_string(),
            scope: scope.as_str(),
            kind: if until_ms.is_some() { "timeout" } else { "ban" },
            until: until_ms.map(time::format_rfc3339_millis),
            reason: reason.to_string(),
        }
    }
}

/// The data of a `chat.user_banned` webhook event: the ban, where, and by whom.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BanEvent<'a> {
    #[serde(flatten)]
    ban: &'a RestrictionView,
    /// None for a channel-wide ban from the creator's own route.
    stream_id: Option<&'a str>,
    creator_id: Option<&'a str>,
    banned_by: &'a str,
}

/// A lifted ban (and any timeout) of a user.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ChatRestrictionLifted")]
pub struct Lifted {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    user_id: String,
    #[schemars(extend("enum" = ["stream", "channel"]))]
    scope: &'static str,
}

impl Lifted {
    fn answer(user_id: String, scope: Scope) -> Json<Lifted> {
        Json(Lifted {
            success: true,
            user_id,
            scope: scope.as_str(),
        })
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
fn apply_restriction(call: &Call, db: &Db, r: &Restrict<'_>) -> Result<RestrictionView, ApiError> {
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
        let view = RestrictionView::of(r.user_id, r.scope, stored.until_ms, r.reason);
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
                detail: json!({"until": view.until}),
            },
            now_ms,
        )?;
        if stored.is_ban() && r.until_ms.is_none() {
            let data = BanEvent {
                ban: &view,
                stream_id: r.target.map(|t| t.stream_id.as_str()),
                creator_id: r.owner,
                banned_by: r.actor,
            };
            outbox::record(
                tx,
                r.client_id,
                "chat.user_banned",
                Subject {
                    object_type: "user",
                    object_id: r.user_id,
                },
                &data,
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

/// The timeout and ban routes: a stream's moderators on its chat, the creator on every
/// chat of theirs.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/streams/{id}/chat/timeouts",
        UserOrServer(timeout),
        "Timeout (moderation)",
        |op| op
            .errors(403, &["not_a_moderator", "not_the_creator"])
            .errors(404, &["not_found"])
            .errors(409, &["cannot_restrict_moderator", "no_channel"]),
    ),
    endpoint!(
        POST "/api/streams/{id}/chat/bans",
        UserOrServer(ban),
        "Ban (moderation)",
        |op| op
            .link(
                "DELETE /api/streams/{id}/chat/bans/{userId}",
                &[
                    ("id", "$request.path.id"),
                    ("userId", "$response.body#/userId"),
                ],
            )
            .errors(403, &["not_a_moderator", "not_the_creator"])
            .errors(404, &["not_found"])
            .errors(409, &["cannot_restrict_moderator", "no_channel"]),
    ),
    endpoint!(
        DELETE "/api/streams/{id}/chat/bans/{userId}",
        UserOrServer(unban),
        "Unban (moderation)",
        |op| op
            .errors(400, &["invalid_id", "invalid_scope"])
            .errors(403, &["not_a_moderator", "not_the_creator"])
            .errors(404, &["not_found"])
            .errors(409, &["no_channel"]),
    ),
    endpoint!(
        POST "/api/users/me/chat/bans",
        User(channel_ban),
        "Channel ban (moderation)",
        |op| op
            .link(
                "DELETE /api/users/me/chat/bans/{userId}",
                &[("userId", "$response.body#/userId")],
            )
            .errors(409, &["cannot_restrict_moderator"]),
    ),
    endpoint!(
        DELETE "/api/users/me/chat/bans/{userId}",
        User(channel_unban),
        "Channel unban (moderation)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
];

// ---- Stream routes ----

/// `{userId, seconds, reason?, scope?}`
fn timeout(
    ctx: &ActorCtx,
    TimeoutBody {
        user_id,
        seconds,
        reason,
        scope,
    }: TimeoutBody,
) -> Result<Json<RestrictionView>, ApiError> {
    let db = ctx.db()?;
    let chat = moderated(ctx, &db)?;
    let until_ms = ctx.now_millis() + seconds * 1000;
    let reason = reason.unwrap_or_default();
    restrict_in_chat(ctx, &db, &chat, &user_id, &reason, scope, Some(until_ms))
}

/// `{userId, reason?, scope?}`
fn ban(
    ctx: &ActorCtx,
    BanBody {
        ban: ChannelBanBody { user_id, reason },
        scope,
    }: BanBody,
) -> Result<Json<RestrictionView>, ApiError> {
    let db = ctx.db()?;
    let chat = moderated(ctx, &db)?;
    let reason = reason.unwrap_or_default();
    restrict_in_chat(ctx, &db, &chat, &user_id, &reason, scope, None)
}

/// Restricts `user_id` in the moderated chat (or, by `scope`, its creator's channel) until
/// `until_ms`, or for good (a ban).
fn restrict_in_chat(
    ctx: &ActorCtx,
    db: &Db,
    (target, moderator): &(ChatTarget, Moderator),
    user_id: &str,
    reason: &str,
    scope: Scope,
    until_ms: Option<i64>,
) -> Result<Json<RestrictionView>, ApiError> {
    let scope_id = scope_id(target, scope, moderator)?;
    check_restrictable(db, target, user_id)?;
    let view = apply_restriction(
        ctx,
        db,
        &Restrict {
            target: Some(target),
            client_id: &target.client_id,
            scope,
            scope_id,
            user_id,
            until_ms,
            reason,
            actor: &moderator.actor,
            owner: target.owner_id.as_deref(),
        },
    )?;
    Ok(Json(view))
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

/// `?scope=channel` for a channel-wide one.
fn unban(ctx: &ActorCtx, _: NoBody) -> Result<Json<Lifted>, ApiError> {
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
    Ok(Lifted::answer(user_id, scope))
}

// ---- The creator's channel-wide routes ----

/// `{userId, reason?}`: banned from all the creator's streams.
fn channel_ban(
    ctx: &UserCtx,
    ChannelBanBody { user_id, reason }: ChannelBanBody,
) -> Result<Json<RestrictionView>, ApiError> {
    let db = ctx.db()?;
    let reason = reason.unwrap_or_default();
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
    Ok(Json(view))
}

/// Lifts the creator's channel-wide ban.
fn channel_unban(ctx: &UserCtx, _: NoBody) -> Result<Json<Lifted>, ApiError> {
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
    Ok(Lifted::answer(user_id, Scope::Channel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::validate::JsonBody;
    use domain::validate::body::RequestBody;

    fn errors(json: &str) -> Vec<String> {
        let mut body = JsonBody::parse(json.as_bytes()).unwrap();
        TimeoutBody::read(&mut body);
        match body.finish() {
            Ok(()) => Vec::new(),
            Err(e) => e
                .fields
                .into_iter()
                .map(|f| format!("{}: {}", f.field, f.message))
                .collect(),
        }
    }

    #[test]
    fn a_timeout_names_a_user_by_uuid_for_at_most_two_weeks() {
        let mut body = JsonBody::parse(
            br#"{"userId": " 8988A0A4-7A52-4F15-A713-1492A6293725 ", "seconds": 60, "scope": " "}"#,
        )
        .unwrap();
        let timeout = TimeoutBody::read(&mut body);
        assert!(body.finish().is_ok());
        assert_eq!(timeout.user_id, "8988a0a4-7a52-4f15-a713-1492a6293725");
        assert_eq!((timeout.seconds, timeout.scope), (60, Scope::Stream));
        assert_eq!(
            errors("{}"),
            ["userId: is required", "seconds: is required"]
        );
        assert_eq!(
            errors(r#"{"userId": "ada", "seconds": 0, "reason": 1, "scope": "world"}"#),
            [
                "userId: must be a user id (a UUID)",
                "seconds: must be an integer from 1 to 1209600",
                "reason: must be a string",
                "scope: must be `stream` or `channel`",
            ]
        );
    }
}
