//! Who may see and change a broadcast, for every handler that reads or changes one (the
//! rule of who may watch is [`store::app::access::may_watch`]).

use domain::ApiError;
use edge::spin::http::{ActorCtx, UserCtx};
use store::Db;
use store::app;
pub use store::app::access::Viewer;
use store::app::access::{Watched, may_watch};
use store::broadcasts::Broadcast;

/// Who is looking at a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// The owner (or the tenant's server): sees the ingest credentials, metadata, devices.
    Owner,
    Viewer,
}

/// Whether `viewer` may watch `b` ([`may_watch`]), with a broadcast one may not watch as
/// unknown (404) as a missing one.
pub fn check_can_watch(
    db: &Db,
    b: &Broadcast,
    viewer: Viewer<'_>,
    now: i64,
) -> Result<(), ApiError> {
    if may_watch(db, Watched::broadcast(b), viewer, now)? {
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
    let b = app::broadcasts::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
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
    let b = app::broadcasts::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
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
