//! Where a chat lives (a broadcast's or a scheduled event's stream), who may read it and
//! who moderates it: what the chat routes and the moderation routes both start from.

use crate::access::{self, Viewer};
use domain::ApiError;
use domain::cohost::Permissions;
use domain::ids;
use edge::spin::auth::Tenant;
use edge::spin::http::{Call, UserCtx};
use store::app;
use store::broadcasts::Broadcast;
use store::chat::Target;
use store::{Db, cohosts, rooms};

/// Where a chat lives: a stream (a broadcast's or a scheduled event's streamId), the
/// broadcast behind it when there is one, and its creator (whose channel-wide bans and
/// blocked words apply; None for a session the tenant's server made).
pub struct ChatTarget {
    pub client_id: String,
    pub stream_id: String,
    pub broadcast: Option<Broadcast>,
    pub owner_id: Option<String>,
}

impl ChatTarget {
    pub fn store(&self) -> Target<'_> {
        Target {
            client_id: &self.client_id,
            stream_id: &self.stream_id,
            broadcast_id: self.broadcast.as_ref().map(|b| b.id.as_str()),
        }
    }
}

/// The chat of `/api/streams/{id}`: the tenant's broadcast with that streamId (or that
/// id), else its scheduled event's stream. A private broadcast's chat is only for those
/// who may watch it.
pub fn stream_target(
    call: &Call,
    tenant: &Tenant,
    viewer: Viewer<'_>,
    db: &Db,
) -> Result<ChatTarget, ApiError> {
    let stream_id = ids::parse_uuid(call.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the stream id must be a UUID"))?;
    if let Some(b) = app::broadcasts::load_by_any_id(db, &tenant.client_id, &stream_id, call.now())?
    {
        access::check_can_watch(db, &b, viewer, call.now())?;
        return Ok(ChatTarget {
            client_id: tenant.client_id.clone(),
            stream_id: b.identity.stream_id.clone(),
            owner_id: b.owner_id.clone(),
            broadcast: Some(b),
        });
    }
    let Some(owner) = rooms::visible_event_stream_owner(db, &tenant.client_id, &stream_id)? else {
        return Err(ApiError::not_found("stream"));
    };
    Ok(ChatTarget {
        client_id: tenant.client_id.clone(),
        stream_id,
        broadcast: None,
        owner_id: Some(owner),
    })
}

pub fn broadcast_target(ctx: &UserCtx, db: &Db) -> Result<ChatTarget, ApiError> {
    let b = app::broadcasts::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    access::check_can_watch(db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
    Ok(ChatTarget {
        client_id: ctx.tenant.client_id.clone(),
        stream_id: b.identity.stream_id.clone(),
        owner_id: b.owner_id.clone(),
        broadcast: Some(b),
    })
}

/// Whether `user_id` moderates the chat of `target`: its creator, or an active co-host of
/// its broadcast with canModerateChat.
pub fn is_moderator(db: &Db, target: &ChatTarget, user_id: &str) -> Result<bool, ApiError> {
    if target.owner_id.as_deref() == Some(user_id) {
        return Ok(true);
    }
    let Some(b) = &target.broadcast else {
        return Ok(false);
    };
    let cohost = cohosts::of_user(db, b, user_id)?;
    Ok(moderates(
        target,
        user_id,
        cohost.as_ref().map(|c| (c.status.as_str(), &c.permissions)),
    ))
}

/// [`is_moderator`], given the user's co-host row in the target's broadcast (its status
/// and permissions), already read.
pub fn moderates(target: &ChatTarget, user_id: &str, cohost: Option<(&str, &Permissions)>) -> bool {
    target.owner_id.as_deref() == Some(user_id)
        || (target.broadcast.is_some()
            && cohost.is_some_and(|(status, p)| status == cohosts::ACTIVE && p.can_moderate_chat))
}
