//! Streaming sessions (the SFU provider API). A streaming session is a broadcast: one
//! record and one id, whichever endpoint created it; this module adds the SFU view.

use crate::ApiRoute;
use crate::access::{self, Audience, Viewer};
use crate::broadcasts;
use crate::broadcasts::{BroadcastView, NewBroadcastBody};
use domain::ApiError;
use domain::request_body;
use domain::sfu::client_url;
use domain::validate::body::{OptInt, RequestBody};
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::UserCtx;
use edge::spin::sfu::SfuConfig;
use schemars::JsonSchema;
use serde::Serialize;
use store::Db;
use store::app;
use store::broadcasts::Broadcast;

/// Participants a session allows when the creator names no number, and the most it may.
pub const DEFAULT_MAX_PARTICIPANTS: i64 = 100;
pub const MAX_PARTICIPANTS: i64 = 1000;

request_body! {
    /// What creates a streaming session: a broadcast's fields and how many may join.
    pub struct NewSessionBody as "NewStreamingSession" {
        ..broadcast: NewBroadcastBody,
        "maxParticipants" max_participants: OptInt<1, { MAX_PARTICIPANTS }>,
    }
}

/// A broadcast with what an SFU client needs: its room and where the SFU is.
#[derive(Serialize)]
pub struct SessionView {
    #[serde(flatten)]
    broadcast: BroadcastView,
    #[serde(flatten)]
    sfu: SfuFields,
}

/// What a session adds to its broadcast.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline)]
struct SfuFields {
    room_name: String,
    #[schemars(extend("const" = "livekit"))]
    provider: &'static str,
    sfu_configured: bool,
    server_url: Option<String>,
}

/// The document says "a `Broadcast` and these fields" (`allOf`), as clients type it,
/// rather than the broadcast's fields all over again (what a derive makes of `flatten`).
impl JsonSchema for SessionView {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StreamingSession".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let broadcast = generator.subschema_for::<BroadcastView>();
        let fields = SfuFields::json_schema(generator);
        schemars::json_schema!({
            "description": "A broadcast with what an SFU client needs: its room and where the SFU is.",
            "allOf": [broadcast, fields],
        })
    }
}

fn session_view(
    db: &Db,
    b: &Broadcast,
    audience: Audience,
    now: i64,
) -> Result<SessionView, ApiError> {
    Ok(with_session_fields(
        broadcasts::view_one(db, b, audience, now)?,
        b,
    ))
}

fn with_session_fields(broadcast: BroadcastView, b: &Broadcast) -> SessionView {
    let sfu = SfuConfig::load();
    SessionView {
        broadcast,
        sfu: SfuFields {
            room_name: b.identity.stream_id.clone(),
            provider: "livekit",
            sfu_configured: sfu.is_configured(),
            server_url: sfu.server_url.as_deref().map(client_url),
        },
    }
}

/// The streaming session routes (its token is the sfu-token component's).
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/streaming/sessions",
        User(create),
        "Create (sessions)",
        // The handler reads its body: the broadcast's rules between fields need the body
        // to record their errors in (`NewBroadcastBody::into_new`).
        |op| op
            .takes(Schema::body::<NewSessionBody>())
            .link(
                "GET /api/streaming/sessions/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/streaming/sessions/{id}/multihost",
                &[("id", "$response.body#/id")],
            )
            .link(
                "PUT /api/streaming/sessions/{id}/layout",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/streaming/sessions/{id}/metrics",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/streaming/sessions/{id}/token",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/streams/{id}/chat",
                &[("id", "$response.body#/streamId")],
            )
            .link(
                "POST /api/streaming/sessions/{id}/invites",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/streaming/sessions/{id}/join-cohost",
                &[("id", "$response.body#/id")],
            ),
    ),
    endpoint!(
        GET "/api/streaming/sessions/{id}",
        User(get),
        "Get (sessions)",
    ),
];

/// `title`, `visibility`, `maxParticipants` (1..1000, default 100), and any other broadcast
/// creation field.
fn create(ctx: &UserCtx, _: NoBody) -> Result<Json<SessionView>, ApiError> {
    let mut body = ctx.json()?;
    let fields = NewSessionBody::read(&mut body);
    let (mut new, recording) = fields.broadcast.into_new(&mut body);
    new.max_participants = fields.max_participants.unwrap_or(DEFAULT_MAX_PARTICIPANTS);
    body.finish()?;
    let db = ctx.db()?;
    let (b, view) = broadcasts::insert(
        &db,
        &ctx.tenant.client_id,
        Some(&ctx.user.id),
        &new,
        recording.as_ref(),
        ctx.now(),
    )?;
    Ok(Json(with_session_fields(view, &b)))
}

/// A session the user may see.
fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<SessionView>, ApiError> {
    let db = ctx.db()?;
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    let audience = access::audience(&db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
    Ok(Json(session_view(&db, &b, audience, ctx.now())?))
}
