//! The tenant's server's view of broadcasts (`/api/v1/sessions`, signed requests), and
//! reactions, which viewers send too.

use super::{change_status, input, owner_page, view};
use crate::access::{Audience, Viewer, check_can_watch, ensure_not_final};
use ::store::app;
use ::store::broadcasts::{self as store, Changes};
use ::store::rate_limits;
use domain::ApiError;
use domain::broadcast::{self as rules};
use domain::validate::body::RequestBody;
use edge::realtime::Event;
use edge::spin::http::{Actor, ActorCtx, ServerCtx, json};
use schemars::JsonSchema;
use serde::Serialize;
use spin_sdk::http::Response;

/// Reactions one user may send per window to one broadcast.
const REACTIONS_PER_WINDOW: i64 = 20;
const REACTION_WINDOW_SECS: i64 = 10;

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

/// `POST /api/v1/sessions`: a broadcast session owned by the tenant itself.
pub fn v1_create(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let (new, recording) = input::NewBroadcastBody::read(&mut body).into_new(&mut body);
    body.finish()?;
    let db = ctx.db()?;
    let (_, view) = super::insert(
        &db,
        &ctx.tenant.client_id,
        None,
        &new,
        recording.as_ref(),
        ctx.now(),
    )?;
    Ok(json(200, &view))
}

/// `GET /api/v1/sessions`: every session of the tenant, newest first.
pub fn v1_list(ctx: &ServerCtx) -> Result<Response, ApiError> {
    owner_page(ctx, &ctx.tenant.client_id, None)
}

/// `PATCH /api/v1/sessions/{id}`: `status` through the state machine, `metadata` as a JSON
/// merge patch (a null value removes a key).
pub fn v1_patch(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let fields = input::SessionPatchBody::read(&mut body);
    let status_sent = fields.status.is_some() || body.has_errors_for(&["status"]);
    if !status_sent && fields.metadata.is_none() {
        body.error("status", "send status, metadata or both");
    }
    body.finish()?;
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
    Ok(json(200, &view::one(&db, &b, Audience::Owner, ctx.now())?))
}

/// `POST /api/v1/sessions/{id}/reactions`: `{"reaction": "heart"}`; counted per session.
/// The tenant's server, or a user who may watch the broadcast (rate limited per user).
pub fn react(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let reaction = input::ReactionBody::read(&mut body).reaction;
    body.finish()?;
    let reaction = reaction.ok_or_else(super::read_without_error)?;
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    check_can_watch(&db, &b, Viewer::of_actor(&ctx.actor), now)?;
    ensure_not_final(&b)?;
    if let Actor::User(user) = &ctx.actor {
        rate_limits::hit(
            &db,
            &format!("react:{}:{}:{}", b.client_id, b.id, user.id),
            REACTIONS_PER_WINDOW,
            REACTION_WINDOW_SECS,
            now,
        )?;
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
    Ok(json(
        200,
        &ReactionCounted {
            success: true,
            session_id: b.id,
            reaction,
            count,
        },
    ))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
    vec![
        Operation::new("POST /api/v1/sessions", "V1 create (broadcasts)")
            .takes(Schema::body::<crate::broadcasts::NewBroadcastBody>())
            .answers(
                200,
                "OK",
                Schema::view::<crate::broadcasts::BroadcastView>(),
            )
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
        Operation::new("GET /api/v1/sessions", "V1 list (broadcasts)").answers(
            200,
            "OK",
            Schema::page_of::<crate::broadcasts::BroadcastView>(),
        ),
        Operation::new("PATCH /api/v1/sessions/{id}", "V1 patch (broadcasts)")
            .takes(Schema::body::<crate::broadcasts::SessionPatchBody>())
            .answers(
                200,
                "OK",
                Schema::view::<crate::broadcasts::BroadcastView>(),
            )
            .errors(403, &["forbidden"])
            .errors(
                409,
                &["invalid_transition", "broadcast_ended", "concurrent_update"],
            )
            .errors(422, &["validation_failed"]),
        Operation::new("POST /api/v1/sessions/{id}/reactions", "React (broadcasts)")
            .takes(Schema::body::<crate::broadcasts::ReactionBody>())
            .answers(200, "OK", Schema::view::<ReactionCounted>())
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended"])
            .errors(429, &["rate_limited"]),
    ]
}
