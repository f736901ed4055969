//! Mints SFU (LiveKit) access tokens: `POST /api/streaming/sessions/{id}/token`.
//!
//! `{id}` may be a broadcast session's UUID, its short id, or an SFU room name in UUID
//! form (a broadcast's streamId or a scheduled event's room name). Only the API key's
//! tenant is searched, so another tenant's session is as unknown as a missing one.

mod rooms;

use domain::ApiError;
use domain::sfu::{self, Role, TokenRequest};
use domain::validate::body::{Choice, Choices, OptText};
use domain::{ids, request_body, time};
use edge::endpoint;
use edge::routing::Route;
use edge::spin::endpoint::Json;
use edge::spin::http::{Caller, CallerCtx, Handler, handle_incoming};
use edge::spin::sfu::SfuConfig;
use rooms::{CoHostStanding, Room};
use schemars::JsonSchema;
use serde::Serialize;
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
#[cfg(target_arch = "wasm32")]
use spin_sdk::http_component;
use store::Db;
use store::app::access::{Viewer, may_watch};

/// Longest participant identity and display name accepted.
const MAX_IDENTITY: usize = 128;
const MAX_DISPLAY_NAME: usize = 100;

/// The route table: one route, for any caller of the tenant (the token it gets depends on
/// what it proved; see [`mint`]).
pub const ROUTES: &[Route<Handler>] = &[endpoint!(
    POST "/api/streaming/sessions/{id}/token",
    Caller(mint),
    "Mint",
    |op| op
        .request_example(serde_json::json!({ "role": "subscriber" }))
        .errors(401, &["publisher_requires_user"])
        .errors(
            403,
            &[
                "identity_mismatch",
                "not_a_host",
                "cohost_not_approved",
                "cohost_removed",
            ],
        )
        .errors(404, &["not_found"])
        .errors(422, &["validation_failed"])
        .errors(409, &["broadcast_ended"])
        .errors(400, &["invalid_id"])
        .errors(503, &["sfu_not_configured"])
)];

/// The roles a token request may ask for.
pub struct AskedRole;

impl Choices for AskedRole {
    type Value = Role;

    fn names() -> Vec<&'static str> {
        vec!["publisher", "subscriber"]
    }

    fn choose(name: &str) -> Option<Role> {
        Role::parse(name)
    }
}

request_body! {
    /// A request for an SFU access token.
    pub struct TokenAsk as "SfuTokenRequest" {
        /// Required from the tenant's server; a user may only name itself.
        "userId" user_id: OptText<MAX_IDENTITY>,
        /// Publishing needs the host, an approved co-host or the tenant's server.
        "role" role: Choice<AskedRole>,
        /// The participant's display name.
        "name" name: OptText<MAX_DISPLAY_NAME>,
    }
}

/// What a token request asks for.
struct Ask {
    user_id: Option<String>,
    role: Role,
    display_name: String,
}

impl Ask {
    fn of(asked: TokenAsk) -> Ask {
        Ask {
            user_id: asked.user_id,
            role: asked.role.unwrap_or(Role::Subscriber),
            display_name: asked.name.unwrap_or_default(),
        }
    }
}

/// An SFU access token and where to use it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SfuToken")]
pub struct SfuToken {
    /// The LiveKit access token (a JWT).
    token: String,
    /// Where the SFU client connects.
    server_url: String,
    room: String,
    session_id: String,
    /// What the token grants: `co_host` for an approved co-host who asked to publish.
    #[schemars(extend("enum" = ["publisher", "co_host", "subscriber"]))]
    role: &'static str,
    /// The participant's identity in the room.
    identity: String,
    #[schemars(extend("format" = "date-time"))]
    expires_at: String,
}

/// The identity a token is minted for, from what the caller proved: the tenant's server
/// names any identity (`userId`, required); a user is its JWT's subject (a `userId` naming
/// someone else is 403); a guest gets a generated `guest-` identity and may only watch.
fn identity_of(ctx: &CallerCtx, ask: &Ask) -> Result<String, ApiError> {
    match &ctx.caller {
        Caller::Server => ask.user_id.clone().ok_or_else(|| {
            ApiError::invalid_fields(vec![domain::problem::FieldError {
                field: "userId".into(),
                message: "is required: the server names the participant".into(),
            }])
        }),
        Caller::User(user) => match &ask.user_id {
            Some(named) if *named != user.id => Err(ApiError::new(
                403,
                "identity_mismatch",
                "a user gets tokens for its own identity only",
            )),
            _ => Ok(user.id.clone()),
        },
        Caller::Guest if ask.role.publishes() => Err(ApiError::unauthorized(
            "publisher_requires_user",
            "publishing needs a signed-in host (Bearer token) or the tenant's server",
        )),
        Caller::Guest => Ok(format!("guest-{}", ids::random_base62(16))),
    }
}

/// The role the token grants in `room`, or why none: publishers are the owner and approved
/// co-hosts (any identity the server names); watchers of a private room are its owner,
/// co-hosts and invitees (and whoever the server names); anything the caller may not see
/// is 404.
fn grant(
    ctx: &CallerCtx,
    db: &Db,
    room: &Room,
    identity: &str,
    asked: Role,
) -> Result<Role, ApiError> {
    let client_id = &ctx.tenant.client_id;
    let viewer = Viewer::of(&ctx.caller);
    if !may_watch(db, room.watched(client_id), viewer, ctx.now())? {
        return Err(ApiError::not_found("session"));
    }
    if !asked.publishes() {
        return Ok(Role::Subscriber);
    }
    room.ensure_publishable()?;
    let standing = rooms::cohost_standing(db, client_id, room, identity)?;
    match &ctx.caller {
        Caller::Server if standing == CoHostStanding::Active => Ok(Role::CoHost),
        Caller::Server => Ok(Role::Publisher),
        Caller::User(_) => room.publisher_role(identity, standing),
        Caller::Guest => Err(ApiError::internal("a guest reached publishing")),
    }
}

/// `{userId?, role, name?}` → `{token, serverUrl, room, sessionId, role, identity, expiresAt}`.
fn mint(ctx: &CallerCtx, asked: TokenAsk) -> Result<Json<SfuToken>, ApiError> {
    let ask = Ask::of(asked);
    let identity = identity_of(ctx, &ask)?;
    let db = ctx.db()?;
    let room = rooms::resolve(&db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    let role = grant(ctx, &db, &room, &identity, ask.role)?;
    let sfu = SfuConfig::load().credentials()?;
    let now = ctx.now();
    let token = sfu::mint_token(
        &TokenRequest {
            api_key: &sfu.api_key,
            api_secret: &sfu.api_secret,
            identity: &identity,
            display_name: &ask.display_name,
            room: &room.name,
            role,
            max_participants: room.max_participants,
            jti: &ids::uuid(),
        },
        now,
    );
    Ok(Json(SfuToken {
        token,
        server_url: sfu::client_url(&sfu.server_url),
        room: room.name,
        session_id: room.session_id,
        role: role.as_str(),
        identity,
        expires_at: time::format_rfc3339(now + sfu::TOKEN_TTL_SECS),
    }))
}

/// The component's entry point. Natively the crate is also a library of its route table
/// (the OpenAPI generator links every component into one binary), so the export is wasm's.
#[cfg_attr(target_arch = "wasm32", http_component)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    handle_incoming(req, out, ROUTES).await
}
