//! Mints SFU (LiveKit) access tokens: `POST /api/streaming/sessions/{id}/token`.
//!
//! `{id}` may be a broadcast session's UUID, its short id, or an SFU room name in UUID
//! form (a broadcast's streamId or a scheduled event's room name). Only the API key's
//! tenant is searched, so another tenant's session is as unknown as a missing one.

mod rooms;

use common::ApiError;
use common::domain::sfu::{self, Role, TokenRequest};
use common::routing::{Auth, Route, route};
use common::spin::db::Db;
use common::spin::http::{Ctx, json, serve};
use common::spin::sfu::SfuConfig;
use common::{ids, time};
use serde_json::json;
use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;

/// Longest participant identity and display name accepted.
const MAX_IDENTITY: usize = 128;
const MAX_DISPLAY_NAME: usize = 100;

#[derive(Debug, Clone, Copy)]
enum Endpoint {
    MintToken,
}

const ROUTES: &[Route<Endpoint>] = &[route(
    "POST",
    "/api/streaming/sessions/{id}/token",
    Auth::ApiKey,
    Endpoint::MintToken,
)];

fn dispatch(endpoint: Endpoint, ctx: &Ctx) -> Result<Response, ApiError> {
    match endpoint {
        Endpoint::MintToken => mint(ctx),
    }
}

/// `{userId, role, name?}` → `{token, serverUrl}`.
fn mint(ctx: &Ctx) -> Result<Response, ApiError> {
    let tenant = ctx.tenant()?;
    let mut body = ctx.json()?;
    let identity = body.string("userId", MAX_IDENTITY);
    let role_text = body.string("role", 20);
    let role = Role::parse(&role_text);
    if role.is_none() && !role_text.is_empty() {
        body.error("role", "must be publisher or subscriber");
    }
    let display_name = body
        .opt_string("name", MAX_DISPLAY_NAME)
        .unwrap_or_default();
    body.finish()?;
    let requested = role.unwrap_or(Role::Subscriber);

    let db = Db::open()?;
    let room = rooms::resolve(&db, &tenant.client_id, ctx.param("id"))?;
    let role = if requested.publishes() {
        room.ensure_publishable()?;
        let standing = rooms::cohost_standing(&db, &tenant.client_id, &room, &identity)?;
        room.publisher_role(&identity, standing)?
    } else {
        requested
    };
    let sfu = SfuConfig::load().credentials()?;
    let now = time::now();
    let token = sfu::mint_token(
        &TokenRequest {
            api_key: &sfu.api_key,
            api_secret: &sfu.api_secret,
            identity: &identity,
            display_name: &display_name,
            room: &room.name,
            role,
            max_participants: room.max_participants,
            jti: &ids::uuid(),
        },
        now,
    );
    Ok(json(
        200,
        &json!({
            "token": token,
            "serverUrl": sfu::client_url(&sfu.server_url),
            "room": room.name,
            "sessionId": room.session_id,
            "role": role.as_str(),
            "expiresAt": time::format_rfc3339(now + sfu::TOKEN_TTL_SECS),
        }),
    ))
}

#[http_component]
fn handle(req: Request) -> Response {
    serve(req, ROUTES, dispatch)
}
