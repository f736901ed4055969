//! Who may see and change a broadcast.

use common::ApiError;
use common::spin::http::{Actor, ActorCtx, Caller, UserCtx};
use common::store::broadcasts::{self as store, Broadcast};
use common::store::{Db, subscriptions};

/// Who is asking to watch (or read) a broadcast.
#[derive(Debug, Clone, Copy)]
pub enum Viewer<'a> {
    /// Someone with the app's public API key and nothing else.
    Guest,
    User(&'a str),
    /// The tenant's own backend.
    Server,
}

impl<'a> Viewer<'a> {
    pub fn of(caller: &'a Caller) -> Self {
        match caller {
            Caller::Guest => Viewer::Guest,
            Caller::User(user) => Viewer::User(&user.id),
            Caller::Server => Viewer::Server,
        }
    }

    pub fn of_actor(actor: &'a Actor) -> Self {
        match actor {
            Actor::User(user) => Viewer::User(&user.id),
            Actor::Server => Viewer::Server,
        }
    }
}

/// Who is looking at a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// The owner (or the tenant's server): sees the ingest credentials, metadata, devices.
    Owner,
    Viewer,
}

/// Whether `viewer` may watch `b`: anyone of the tenant for a public or unlisted broadcast;
/// a private one only its owner, its co-hosts (active or asking to join), users holding an
/// unexpired invite, and the tenant's server.
/// A `subscribers` broadcast is like a private one, and also for the host's active
/// subscribers.
pub fn may_watch(db: &Db, b: &Broadcast, viewer: Viewer<'_>, now: i64) -> Result<bool, ApiError> {
    if !subscriptions::is_gated(&b.visibility) {
        return Ok(true);
    }
    match viewer {
        Viewer::Server => Ok(true),
        Viewer::Guest => Ok(false),
        Viewer::User(id) => subscriptions::user_may_watch(db, b, id, now),
    }
}

/// [`may_watch`], with a broadcast one may not watch as unknown (404) as a missing one.
pub fn check_can_watch(
    db: &Db,
    b: &Broadcast,
    viewer: Viewer<'_>,
    now: i64,
) -> Result<(), ApiError> {
    if may_watch(db, b, viewer, now)? {
        Ok(())
    } else {
        Err(ApiError::not_found("broadcast"))
    }
}

/// How `viewer` sees the broadcast: the owner and the tenant's server see everything,
/// others who may watch see the public view; to the rest it is 404.
pub fn audience(
    db: &Db,
    b: &Broadcast,
    viewer: Viewer<'_>,
    now: i64,
) -> Result<Audience, ApiError> {
    match viewer {
        Viewer::Server => Ok(Audience::Owner),
        Viewer::User(id) if b.is_owned_by(id) => Ok(Audience::Owner),
        _ => check_can_watch(db, b, viewer, now).map(|()| Audience::Viewer),
    }
}

/// Loads the broadcast of the path's `id` that the signed-in user owns (403 for another
/// user's broadcast they may see, 404 for one they may not).
pub fn load_owned(ctx: &UserCtx, db: &Db) -> Result<Broadcast, ApiError> {
    let b = store::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    if !b.is_owned_by(&ctx.user.id) {
        check_can_watch(db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
        return Err(ApiError::forbidden(
            "only the broadcast's owner may change it",
        ));
    }
    Ok(b)
}

/// Loads the broadcast of the path's `id` for its owner or the tenant's server (`doing`
/// says what only they may do: 403 to another user who may see the broadcast, 404 to one
/// who may not).
pub fn load_for_owner_or_server(
    ctx: &ActorCtx,
    db: &Db,
    doing: &str,
) -> Result<Broadcast, ApiError> {
    let b = store::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    if let Some(user) = ctx.user()
        && !b.is_owned_by(&user.id)
    {
        check_can_watch(db, &b, Viewer::User(&user.id), ctx.now())?;
        return Err(ApiError::forbidden(format!(
            "only the broadcast's owner {doing}"
        )));
    }
    Ok(b)
}

/// Refuses to change a broadcast that has ended (completed or error).
pub fn ensure_not_final(b: &Broadcast) -> Result<(), ApiError> {
    if b.status.is_final() {
        return Err(ApiError::conflict(
            "broadcast_ended",
            format!("the broadcast is {}", b.status.as_str()),
        ));
    }
    Ok(())
}
