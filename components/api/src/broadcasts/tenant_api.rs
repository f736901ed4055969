//! The tenant's server's view of broadcasts (`/api/v1/sessions`, signed requests), and
//! reactions, which viewers send too.

use super::{BroadcastView, change_status, input, owner_page, view};
use crate::ApiRoute;
use crate::access::{Audience, Viewer, check_can_watch, ensure_not_final};
use ::store::app;
use ::store::broadcasts::{self as store, Changes};
use domain::ApiError;
use domain::broadcast::{self as rules};
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::realtime::Event;
use edge::spin::endpoint::{Json, NoBody, Page};
use edge::spin::http::{Actor, ActorCtx, ServerCtx};
use schemars::JsonSchema;
use serde::Serialize;

/// Reactions one user may send per window to one broadcast (the tenant's server is not
/// limited).
const REACTIONS: RateLimit = RateLimit {
    bucket: "react",
    max: 20,
    window_secs: 10,
    per: "user and broadcast",
    counts: Counts::Requests,
};

/// A reaction counted: the session's count of that reaction now.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ReactionCounted")]
pub struct ReactionCounted {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    session_id: String,
    #[schemars(extend("enum" = rules::REACTIONS))]
    reaction: String,
    #[schemars(range(min = 0))]
    count: i64,
}

/// The tenant's server's session routes, and reactions.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/v1/sessions",
        Server(v1_create),
        "V1 create (broadcasts)",
        |op| op
            .link(
                "PATCH /api/v1/sessions/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/v1/sessions/{id}/reactions",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/broadcasts/{id}/analytics",
                &[("id", "$response.body#/id")],
            ),
    ),
    endpoint!(
        GET "/api/v1/sessions",
        Server(v1_list),
        "V1 list (broadcasts)",
        |op| op.errors(400, &["invalid_query"]),
    ),
    endpoint!(
        PATCH "/api/v1/sessions/{id}",
        Server(v1_patch),
        "V1 patch (broadcasts)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(
                409,
                &["invalid_transition", "broadcast_ended", "concurrent_update"],
            )
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        POST "/api/v1/sessions/{id}/reactions",
        UserOrServer(react),
        "React (broadcasts)",
        |op| op
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended"])
            .rate_limited(&REACTIONS),
    ),
];

/// A broadcast session owned by the tenant itself.
fn v1_create(
    ctx: &ServerCtx,
    body: input::NewBroadcastBody,
) -> Result<Json<BroadcastView>, ApiError> {
    let (new, recording) = body.into_parts();
    let db = ctx.db()?;
    let (_, view) = super::insert(
        &db,
        &ctx.tenant.client_id,
        None,
        &new,
        recording.as_ref(),
        ctx.now(),
    )?;
    Ok(Json(view))
}

/// Every session of the tenant, newest first.
fn v1_list(ctx: &ServerCtx, _: NoBody) -> Result<Page<BroadcastView>, ApiError> {
    owner_page(ctx, &ctx.tenant.client_id, None)
}

/// `status` through the state machine, `metadata` as a JSON merge patch (a null value
/// removes a key).
fn v1_patch(
    ctx: &ServerCtx,
    fields: input::SessionPatchBody,
) -> Result<Json<BroadcastView>, ApiError> {
    let to = fields.status;
    let db = ctx.db()?;
    let now = ctx.now();
    let mut b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    // Check the move before writing anything, so a refused status changes nothing.
    if let Some(to) = to {
        rules::transition(b.status, to)?;
    }
    if let Some(patch) = fields.metadata {
        let merged = input::merge_metadata(&b.metadata, patch)?;
        let changes = Changes {
            metadata: Some(merged),
            ..Changes::default()
        };
        store::update(&db, &b, &changes, now)?;
        b = app::broadcasts::load(&db, &b.client_id, &b.id, now)?;
    }
    if let Some(to) = to {
        b = change_status(&db, &b, to, now)?;
    }
    Ok(Json(view::one(&db, &b, Audience::Owner, ctx.now())?))
}

/// `{"reaction": "heart"}`; counted per session. The tenant's server, or a user who may
/// watch the broadcast (rate limited per user).
fn react(ctx: &ActorCtx, body: input::ReactionBody) -> Result<Json<ReactionCounted>, ApiError> {
    let reaction = body.reaction.ok_or_else(super::read_without_error)?;
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    check_can_watch(&db, &b, Viewer::of_actor(&ctx.actor), now)?;
    ensure_not_final(&b)?;
    if let Actor::User(user) = &ctx.actor {
        REACTIONS.hit(&db, &format!("{}:{}:{}", b.client_id, b.id, user.id), now)?;
    }
    let count = db.transaction(|db| {
        ::store::analytics::reaction(db, &b, now)?;
        store::add_reaction(db, &b, &reaction)
    })?;
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::Reaction {
            reaction: reaction.clone(),
            count,
        },
    );
    Ok(Json(ReactionCounted {
        success: true,
        session_id: b.id,
        reaction,
        count,
    }))
}
