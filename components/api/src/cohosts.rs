//! Co-hosting of a streaming session: the grid layout, joining (capped permissions, or an
//! invite's), invites, managing co-hosts, SFU presence from LiveKit webhooks, and metrics.

use crate::broadcasts::{self, Audience, Broadcast, Viewer};
use common::domain::broadcast::Status;
use common::domain::cohost::{self as rules, Layout, Permissions};
use common::spin::db::{self, Db, Row};
use common::spin::http::{ActorCtx, SfuCtx, UserCtx, json};
use common::validate::JsonBody;
use common::{ApiError, ids, time};
use serde_json::{Value, json};
use spin_sdk::http::Response;

/// How long an invite token can be used.
const INVITE_TTL_SECS: i64 = 10 * 60;

/// A co-host of a session (active, or removed and kept for the record).
struct CoHost {
    id: String,
    user_id: String,
    user_name: String,
    permissions: Permissions,
    status: String,
    joined_at: String,
    removed_at: Option<String>,
}

impl CoHost {
    fn is_active(&self) -> bool {
        self.status == "active"
    }

    fn view(&self, connected: bool) -> Value {
        json!({
            "id": self.id,
            "userId": self.user_id,
            "userName": self.user_name,
            "role": "co_host",
            "permissions": self.permissions,
            "status": self.status,
            "connected": connected,
            "joinedAt": self.joined_at,
            "removedAt": self.removed_at,
        })
    }
}

fn cohost_from_row(row: &Row<'_>) -> CoHost {
    CoHost {
        id: db::col_text(row, "id"),
        user_id: db::col_text(row, "user_id"),
        user_name: db::col_text(row, "user_name"),
        permissions: serde_json::from_str(&db::col_text(row, "permissions")).unwrap_or_default(),
        status: db::col_text(row, "status"),
        joined_at: db::col_text(row, "joined_at"),
        removed_at: db::col_opt_text(row, "removed_at"),
    }
}

/// Who is acting on a session.
enum Actor {
    Owner,
    CoHost(CoHost),
    Other,
}

impl Actor {
    /// What the actor may do: everything for the owner, their grants for a co-host.
    fn permissions(&self) -> Permissions {
        match self {
            Actor::Owner => Permissions::ALL,
            Actor::CoHost(c) => c.permissions,
            Actor::Other => Permissions::DEFAULT,
        }
    }

    fn is_host(&self) -> bool {
        !matches!(self, Actor::Other)
    }
}

fn cohosts_of(db: &Db, b: &Broadcast) -> Result<Vec<CoHost>, ApiError> {
    db.query(
        "SELECT * FROM cohosts WHERE client_id = ? AND broadcast_id = ? ORDER BY joined_at, id",
        &[db::text(&b.client_id), db::text(&b.id)],
        cohost_from_row,
    )
}

/// How many co-hosts are on stage (active) now.
fn active_cohosts(db: &Db, b: &Broadcast) -> Result<i64, ApiError> {
    db.count(
        "SELECT COUNT(*) FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND status = 'active'",
        &[db::text(&b.client_id), db::text(&b.id)],
    )
}

fn cohost_of_user(db: &Db, b: &Broadcast, user_id: &str) -> Result<Option<CoHost>, ApiError> {
    db.query_one(
        "SELECT * FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND user_id = ?",
        &[db::text(&b.client_id), db::text(&b.id), db::text(user_id)],
        cohost_from_row,
    )
}

fn actor_of(db: &Db, b: &Broadcast, user_id: &str) -> Result<Actor, ApiError> {
    if b.owner_id.as_deref() == Some(user_id) {
        return Ok(Actor::Owner);
    }
    Ok(match cohost_of_user(db, b, user_id)? {
        Some(c) if c.is_active() => Actor::CoHost(c),
        _ => Actor::Other,
    })
}

/// The session the signed-in user may see (a private one is 404 to others).
fn load_session(ctx: &UserCtx, db: &Db) -> Result<(Broadcast, Audience), ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let b = broadcasts::load(db, &tenant.client_id, ctx.param("id"))?;
    let audience = broadcasts::audience(db, &b, Viewer::User(&user.id))?;
    Ok((b, audience))
}

fn layout_of(db: &Db, b: &Broadcast) -> Result<Layout, ApiError> {
    Ok(db
        .query_one(
            "SELECT layout FROM session_layouts WHERE client_id = ? AND broadcast_id = ?",
            &[db::text(&b.client_id), db::text(&b.id)],
            |row| serde_json::from_str(&db::col_text(row, "layout")).ok(),
        )?
        .flatten()
        .unwrap_or_default())
}

/// The identities in the SFU room now.
fn connected_identities(db: &Db, b: &Broadcast) -> Result<Vec<String>, ApiError> {
    db.query(
        "SELECT identity FROM sfu_participants WHERE client_id = ? AND broadcast_id = ?",
        &[db::text(&b.client_id), db::text(&b.id)],
        |row| db::col_text(row, "identity"),
    )
}

/// A permissions field: a preset name or an object of booleans (422 otherwise).
fn permissions_field(body: &mut JsonBody, field: &'static str) -> Option<Permissions> {
    let value = body.opt_value(field)?;
    match Permissions::from_json(&value) {
        Ok(p) => Some(p),
        Err(message) => {
            body.error(field, message);
            None
        }
    }
}

/// A refused join: the spec's `{success: false, message}` body, with a status and code.
fn refused(status: u16, code: &str, message: impl Into<String>) -> Result<Response, ApiError> {
    Ok(json(
        status,
        &json!({ "success": false, "message": message.into(), "code": code }),
    ))
}

/// The parts of an SFU participant event the platform uses.
#[derive(Debug)]
struct ParticipantEvent {
    id: String,
    kind: String,
    room: String,
    identity: String,
    metadata: String,
}

impl ParticipantEvent {
    /// Reads a (verified) LiveKit webhook event.
    fn read(event: &Value) -> Result<Self, ApiError> {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let parsed = ParticipantEvent {
            id: text(&event["id"]),
            kind: text(&event["event"]),
            room: text(&event["room"]["name"]),
            identity: text(&event["participant"]["identity"]),
            metadata: text(&event["participant"]["metadata"]),
        };
        if parsed.id.is_empty() || parsed.kind.is_empty() {
            return Err(ApiError::new(
                422,
                "invalid_webhook",
                "the webhook needs an id and an event",
            ));
        }
        if parsed.kind.starts_with("participant_") && parsed.identity.is_empty() {
            return Err(ApiError::new(
                422,
                "invalid_webhook",
                "a participant event needs the participant's identity",
            ));
        }
        Ok(parsed)
    }
}

/// `GET /api/streaming/sessions/{id}/multihost`
pub fn multihost(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let (b, audience) = load_session(ctx, &db)?;
    let layout = layout_of(&db, &b)?;
    let connected = connected_identities(&db, &b)?;
    let cohosts = cohosts_of(&db, &b)?;
    let active = cohosts.iter().filter(|c| c.is_active()).count() as i64;
    let views: Vec<Value> = cohosts
        .iter()
        .map(|c| c.view(connected.contains(&c.user_id)))
        .collect();
    let host = b.owner_id.as_ref().map(
        |owner| json!({ "userId": owner, "role": "host", "connected": connected.contains(owner) }),
    );
    Ok(json(
        200,
        &json!({
            "session": broadcasts::view_one(&db, &b, audience)?,
            "layout": layout,
            "host": host,
            "coHosts": views,
            "activeCoHosts": active,
            "freeSlots": rules::free_slots(&layout, active),
        }),
    ))
}

/// `PUT /api/streaming/sessions/{id}/layout`: any of the layout's fields; the result must
/// fit (columns x rows hold maxHosts) and hold the co-hosts already there.
pub fn update_layout(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let db = Db::open()?;
    let (b, _) = load_session(ctx, &db)?;
    let actor = actor_of(&db, &b, &ctx.user.id)?;
    if !actor.permissions().can_control_layout {
        return Err(ApiError::forbidden(
            "only the owner or a co-host with canControlLayout changes the layout",
        ));
    }
    let mut layout = layout_of(&db, &b)?;
    for (field, target) in [
        ("maxHosts", &mut layout.max_hosts),
        ("gridColumns", &mut layout.grid_columns),
        ("gridRows", &mut layout.grid_rows),
    ] {
        if let Some(n) = body.opt_int(field, 1..=rules::MAX_HOSTS) {
            *target = n;
        }
    }
    if let Some(ratio) = body.opt_string("aspectRatio", 9) {
        layout.aspect_ratio = ratio;
    }
    for (field, target) in [
        ("showNames", &mut layout.show_names),
        ("showControls", &mut layout.show_controls),
    ] {
        if let Some(flag) = body.opt_bool(field) {
            *target = flag;
        }
    }
    for (field, message) in layout.problems() {
        body.error(field, message);
    }
    let active = active_cohosts(&db, &b)?;
    if layout.max_hosts < active + 1 && !body.has_errors_for(&["maxHosts"]) {
        body.error(
            "maxHosts",
            format!("the session already has {} hosts", active + 1),
        );
    }
    body.finish()?;
    db.execute(
        "INSERT INTO session_layouts (broadcast_id, client_id, layout, updated_at) VALUES (?, ?, ?, ?) \
         ON CONFLICT (broadcast_id) DO UPDATE SET layout = excluded.layout, updated_at = excluded.updated_at",
        &[
            db::text(&b.id),
            db::text(&b.client_id),
            db::text(serde_json::to_string(&layout).unwrap_or_default()),
            db::text(time::now_rfc3339()),
        ],
    )?;
    crate::realtime::publish(
        &b.identity.stream_id,
        json!({ "kind": "cohost", "action": "layout", "grid": layout }),
    );
    Ok(json(200, &json!({ "success": true, "layout": layout })))
}

/// `POST /api/streaming/sessions/{id}/invites`: `{userId, permissions?}` → a single-use
/// invite token for that user, valid for 10 minutes.
pub fn invite(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let invitee = body.string("userId", 64);
    let granted = permissions_field(&mut body, "permissions").unwrap_or(Permissions::DEFAULT);
    body.finish()?;
    let db = Db::open()?;
    let (b, _) = load_session(ctx, &db)?;
    let actor = actor_of(&db, &b, &ctx.user.id)?;
    if !actor.permissions().can_invite_others {
        return Err(ApiError::forbidden(
            "only the owner or a co-host with canInviteOthers invites",
        ));
    }
    if !granted.is_within(actor.permissions()) {
        return Err(ApiError::forbidden(
            "an invite cannot grant permissions the inviter does not hold",
        ));
    }
    if b.status.is_final() {
        return Err(ApiError::conflict(
            "broadcast_ended",
            "the session has ended",
        ));
    }
    if b.owner_id.as_deref() == Some(invitee.as_str()) {
        return Err(ApiError::conflict(
            "is_owner",
            "the owner hosts the session already",
        ));
    }
    let user_exists = db.count(
        "SELECT COUNT(*) FROM users WHERE client_id = ? AND id = ?",
        &[db::text(&b.client_id), db::text(&invitee)],
    )? > 0;
    if !user_exists {
        return Err(ApiError::not_found("user"));
    }
    let token = format!("inv_{}", ids::random_base62(32));
    let expires_at = time::now() + INVITE_TTL_SECS;
    db.execute(
        "INSERT INTO cohost_invites (token_hash, client_id, broadcast_id, user_id, permissions, invited_by, expires_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
        &[
            db::text(ids::sha256_hex(token.as_bytes())),
            db::text(&b.client_id),
            db::text(&b.id),
            db::text(&invitee),
            db::text(serde_json::to_string(&granted).unwrap_or_default()),
            db::text(&ctx.user.id),
            db::int(expires_at),
        ],
    )?;
    Ok(json(
        200,
        &json!({
            "success": true,
            "inviteToken": token,
            "userId": invitee,
            "permissions": granted,
            "expiresAt": time::format_rfc3339(expires_at),
        }),
    ))
}

/// Takes a valid invite for `user_id` to `b` (single use): its permissions, or why not.
fn redeem_invite(
    db: &Db,
    b: &Broadcast,
    user_id: &str,
    token: &str,
) -> Result<Result<Permissions, &'static str>, ApiError> {
    let hash = ids::sha256_hex(token.as_bytes());
    let invite = db.query_one(
        "SELECT user_id, permissions, expires_at, used_at FROM cohost_invites \
         WHERE token_hash = ? AND client_id = ? AND broadcast_id = ?",
        &[db::text(&hash), db::text(&b.client_id), db::text(&b.id)],
        |row| {
            (
                db::col_text(row, "user_id"),
                db::col_text(row, "permissions"),
                db::col_int(row, "expires_at"),
                row.get::<i64>("used_at"),
            )
        },
    )?;
    let Some((invitee, permissions, expires_at, used_at)) = invite else {
        return Ok(Err("the invite token is not valid for this session"));
    };
    if invitee != user_id {
        return Ok(Err("the invite token was issued to another user"));
    }
    if used_at.is_some() {
        return Ok(Err("the invite token has already been used"));
    }
    if expires_at <= time::now() {
        return Ok(Err("the invite token has expired"));
    }
    // The used_at condition makes a concurrent second use lose.
    let taken = db.execute(
        "UPDATE cohost_invites SET used_at = ? WHERE token_hash = ? AND used_at IS NULL RETURNING token_hash",
        &[db::int(time::now()), db::text(&hash)],
    )?;
    if taken.rows.is_empty() {
        return Ok(Err("the invite token has already been used"));
    }
    Ok(Ok(serde_json::from_str(&permissions).unwrap_or_default()))
}

/// Why a join without an invite cannot go ahead, by the broadcast's co-host policy and the
/// joiner's history; `None` when it may (as a request, or at once under `open`).
fn uninvited_refusal(
    policy: &str,
    existing: Option<&CoHost>,
) -> Option<(&'static str, &'static str)> {
    match existing.map(|c| c.status.as_str()) {
        Some("removed") => {
            return Some((
                "removed",
                "you were removed from this session; join again with a new invite",
            ));
        }
        Some("declined") => {
            return Some((
                "declined",
                "the host declined your request; join again with an invite",
            ));
        }
        _ => {}
    }
    (policy == "invite_only").then_some((
        "invite_required",
        "this session takes co-hosts by invite only",
    ))
}

/// Stores the joiner's co-host row (new, or the earlier one reused) with `status`.
fn upsert_cohost(
    db: &Db,
    b: &Broadcast,
    existing: Option<CoHost>,
    user_id: &str,
    user_name: &str,
    permissions: Permissions,
    status: &str,
) -> Result<CoHost, ApiError> {
    let now = time::now_rfc3339();
    let id = existing.map(|c| c.id).unwrap_or_else(ids::uuid);
    db.execute(
        "INSERT INTO cohosts (id, client_id, broadcast_id, user_id, user_name, permissions, status, joined_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (broadcast_id, user_id) DO UPDATE SET user_name = excluded.user_name, \
           permissions = excluded.permissions, status = excluded.status, joined_at = excluded.joined_at, \
           removed_at = NULL, removed_by = NULL",
        &[
            db::text(&id),
            db::text(&b.client_id),
            db::text(&b.id),
            db::text(user_id),
            db::text(user_name),
            db::text(serde_json::to_string(&permissions).unwrap_or_default()),
            db::text(status),
            db::text(&now),
        ],
    )?;
    cohost_of_user(db, b, user_id)?.ok_or_else(|| ApiError::internal("the co-host was not stored"))
}

/// Takes the broadcast's write lock for the rest of the transaction, so decisions that
/// count co-hosts (the last free slot) are made one at a time.
fn lock_session(db: &Db, b: &Broadcast) -> Result<(), ApiError> {
    db.execute(
        "UPDATE broadcasts SET updated_at = updated_at WHERE client_id = ? AND id = ?",
        &[db::text(&b.client_id), db::text(&b.id)],
    )?;
    Ok(())
}

/// `POST /api/streaming/sessions/{id}/join-cohost`: `{userName, permissions?, inviteToken?}`.
/// With a valid invite the user joins at once with the invite's permissions. Without one,
/// the broadcast's `cohostPolicy` decides: `approval` (the default) stores a request that
/// the host approves or declines, `open` joins at once with the default preset,
/// `invite_only` refuses.
pub fn join(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let user_name = body.string("userName", 100);
    let requested = permissions_field(&mut body, "permissions");
    let invite_token = body.opt_string("inviteToken", 100);
    body.finish()?;
    let user = &ctx.user;
    let db = Db::open()?;
    let (b, _) = load_session(ctx, &db)?;
    if b.owner_id.as_deref() == Some(user.id.as_str()) {
        return refused(409, "is_owner", "you host this session already");
    }
    match b.status {
        Status::Active => {}
        Status::Pending => return refused(409, "not_live", "the session is not live yet"),
        Status::Completed | Status::Error => {
            return refused(409, "session_ended", "the session has ended");
        }
    }
    // The event goes out after the commit, so no socket hears of a join that was undone.
    let (response, event) = db.transaction(|db| {
        lock_session(db, &b)?;
        let existing = cohost_of_user(db, &b, &user.id)?;
        match existing.as_ref().map(|c| c.status.as_str()) {
            Some("active") => {
                return Ok((
                    refused(
                        409,
                        "already_cohost",
                        "you are already a co-host of this session",
                    )?,
                    None,
                ));
            }
            Some("requested") if invite_token.is_none() => {
                let view = existing.as_ref().map(|c| c.view(false));
                let message = "your request to co-host is waiting for the host";
                return Ok((
                    json(
                        200,
                        &json!({ "success": true, "message": message, "coHost": view }),
                    ),
                    None,
                ));
            }
            _ => {}
        }
        let (granted, status) = match invite_token.as_deref() {
            Some(token) => match redeem_invite(db, &b, &user.id, token)? {
                Ok(p) => (p, "active"),
                Err(why) => return Ok((refused(403, "invalid_invite", why)?, None)),
            },
            None => {
                if let Some((code, why)) = uninvited_refusal(&b.cohost_policy, existing.as_ref()) {
                    return Ok((refused(403, code, why)?, None));
                }
                let status = if b.cohost_policy == "open" {
                    "active"
                } else {
                    "requested"
                };
                (Permissions::DEFAULT, status)
            }
        };
        if status == "active" {
            let active = active_cohosts(db, &b)?;
            if rules::free_slots(&layout_of(db, &b)?, active) == 0 {
                return Ok((
                    refused(409, "session_full", "the session has no free co-host slot")?,
                    None,
                ));
            }
        }
        let capped = requested.is_some_and(|r| !r.is_within(granted));
        let cohost = upsert_cohost(db, &b, existing, &user.id, &user_name, granted, status)?;
        let message = match (status, capped) {
            ("requested", _) => "asked to co-host; the host approves or declines the request",
            (_, true) => {
                "joined as a co-host; the requested permissions were reduced to what you may hold"
            }
            _ => "joined as a co-host",
        };
        let view = cohost.view(false);
        let action = if status == "active" {
            "joined"
        } else {
            "requested"
        };
        let event = json!({ "kind": "cohost", "action": action, "coHost": view });
        Ok((
            json(
                200,
                &json!({ "success": true, "message": message, "coHost": view }),
            ),
            Some(event),
        ))
    })?;
    if let Some(event) = event {
        crate::realtime::publish(&b.identity.stream_id, event);
    }
    Ok(response)
}

/// The request a decision names, and whether the actor may decide it: the owner, or a
/// co-host with canInviteOthers.
fn pending_request(ctx: &UserCtx, db: &Db) -> Result<(Broadcast, Actor, CoHost), ApiError> {
    let (b, _) = load_session(ctx, db)?;
    let actor = actor_of(db, &b, &ctx.user.id)?;
    if !actor.permissions().can_invite_others {
        return Err(ApiError::forbidden(
            "only the owner or a co-host with canInviteOthers decides co-host requests",
        ));
    }
    let target = cohost_by_id(db, &b, ctx.param("coHostId"))?;
    if target.status != "requested" {
        return Err(ApiError::conflict(
            "not_requested",
            format!("this co-host is {}, not asking to join", target.status),
        ));
    }
    Ok((b, actor, target))
}

/// `POST /api/streaming/sessions/{id}/cohosts/{coHostId}/approve`: `{permissions?}` (at
/// most the approver's own; the default preset when omitted). Takes a free slot.
pub fn approve(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let permissions = permissions_field(&mut body, "permissions").unwrap_or(Permissions::DEFAULT);
    body.finish()?;
    let db = Db::open()?;
    let (b, actor, target) = pending_request(ctx, &db)?;
    if !permissions.is_within(actor.permissions()) {
        return Err(ApiError::forbidden(
            "you cannot grant permissions you do not hold",
        ));
    }
    if b.status != Status::Active {
        return Err(ApiError::conflict(
            "not_live",
            format!("the session is {}", b.status.as_str()),
        ));
    }
    let approved = db.transaction(|db| {
        lock_session(db, &b)?;
        let active = active_cohosts(db, &b)?;
        if rules::free_slots(&layout_of(db, &b)?, active) == 0 {
            return Err(ApiError::conflict(
                "session_full",
                "the session has no free co-host slot",
            ));
        }
        let moved = db.execute(
            "UPDATE cohosts SET status = 'active', permissions = ?, joined_at = ? \
             WHERE client_id = ? AND id = ? AND status = 'requested' RETURNING id",
            &[
                db::text(serde_json::to_string(&permissions).unwrap_or_default()),
                db::text(time::now_rfc3339()),
                db::text(&b.client_id),
                db::text(&target.id),
            ],
        )?;
        if moved.rows.is_empty() {
            return Err(ApiError::conflict(
                "not_requested",
                "the request was decided meanwhile",
            ));
        }
        cohost_of_user(db, &b, &target.user_id)?.ok_or_else(|| ApiError::not_found("co-host"))
    })?;
    let view = approved.view(false);
    crate::realtime::publish(
        &b.identity.stream_id,
        json!({ "kind": "cohost", "action": "approved", "coHost": view }),
    );
    Ok(json(200, &json!({ "success": true, "coHost": view })))
}

/// `POST /api/streaming/sessions/{id}/cohosts/{coHostId}/decline`: the request is declined;
/// the user may come back only with an invite.
pub fn decline(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let (b, _, target) = pending_request(ctx, &db)?;
    let moved = db.execute(
        "UPDATE cohosts SET status = 'declined', removed_at = ?, removed_by = ? \
         WHERE client_id = ? AND id = ? AND status = 'requested' RETURNING id",
        &[
            db::text(time::now_rfc3339()),
            db::text(&ctx.user.id),
            db::text(&b.client_id),
            db::text(&target.id),
        ],
    )?;
    if moved.rows.is_empty() {
        return Err(ApiError::conflict(
            "not_requested",
            "the request was decided meanwhile",
        ));
    }
    crate::realtime::publish(
        &b.identity.stream_id,
        json!({ "kind": "cohost", "action": "declined", "coHostId": target.id, "userId": target.user_id }),
    );
    Ok(json(
        200,
        &json!({ "success": true, "id": target.id, "status": "declined" }),
    ))
}

/// The co-host row a path's `coHostId` names, in this session.
fn cohost_by_id(db: &Db, b: &Broadcast, raw_id: &str) -> Result<CoHost, ApiError> {
    let id = ids::parse_uuid(raw_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the co-host id must be a UUID"))?;
    db.query_one(
        "SELECT * FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND id = ?",
        &[db::text(&b.client_id), db::text(&b.id), db::text(&id)],
        cohost_from_row,
    )?
    .ok_or_else(|| ApiError::not_found("co-host"))
}

/// What `user_id` may do in `b`: everything for the owner, an active co-host's grants;
/// `None` for anyone else.
pub fn permissions_of(
    db: &Db,
    b: &Broadcast,
    user_id: &str,
) -> Result<Option<Permissions>, ApiError> {
    Ok(match actor_of(db, b, user_id)? {
        Actor::Other => None,
        actor => Some(actor.permissions()),
    })
}

/// Whether `user_id` is a co-host of `b` (active, or asking to join) or holds an unexpired,
/// unused invite to it: who may watch a private broadcast besides its owner.
pub fn is_invited_or_host(
    db: &Db,
    b: &Broadcast,
    user_id: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let scope = [db::text(&b.client_id), db::text(&b.id), db::text(user_id)];
    let hosts = db.count(
        "SELECT COUNT(*) FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND user_id = ? \
         AND status IN ('active', 'requested')",
        &scope,
    )?;
    if hosts > 0 {
        return Ok(true);
    }
    let mut params = scope.to_vec();
    params.push(db::int(now));
    Ok(db.count(
        "SELECT COUNT(*) FROM cohost_invites WHERE client_id = ? AND broadcast_id = ? AND user_id = ? \
         AND used_at IS NULL AND expires_at > ?",
        &params,
    )? > 0)
}

/// Loads the co-host a management call names, checking the actor may act on them: the
/// owner, or a co-host holding `needed` and at least every permission of the target.
fn managed_cohost(
    ctx: &UserCtx,
    db: &Db,
    needed: fn(&Permissions) -> bool,
    what: &str,
) -> Result<(Broadcast, Actor, CoHost), ApiError> {
    let (b, _) = load_session(ctx, db)?;
    let actor = actor_of(db, &b, &ctx.user.id)?;
    let target = Some(cohost_by_id(db, &b, ctx.param("coHostId"))?)
        .filter(CoHost::is_active)
        .ok_or_else(|| ApiError::not_found("co-host"))?;
    let allowed = match &actor {
        Actor::Owner => true,
        Actor::CoHost(me) => {
            me.id != target.id
                && needed(&me.permissions)
                && target.permissions.is_within(me.permissions)
        }
        Actor::Other => false,
    };
    if !allowed {
        if matches!(&actor, Actor::CoHost(me) if me.id == target.id) {
            return Err(ApiError::forbidden(format!(
                "co-hosts cannot {what} themselves; the owner or another co-host can"
            )));
        }
        return Err(ApiError::forbidden(format!(
            "you may not {what} this co-host"
        )));
    }
    Ok((b, actor, target))
}

/// `PUT /api/streaming/sessions/{id}/cohosts/{coHostId}`: `{permissions}`. A co-host with
/// canInviteOthers may change co-hosts who hold no more than they do, and grant no more.
pub fn update_cohost(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let permissions = permissions_field(&mut body, "permissions");
    if permissions.is_none() && !body.has_errors_for(&["permissions"]) {
        body.error("permissions", "is required");
    }
    body.finish()?;
    let permissions = permissions.unwrap_or_default();
    let db = Db::open()?;
    let (b, actor, target) = managed_cohost(
        ctx,
        &db,
        |p| p.can_invite_others,
        "change the permissions of",
    )?;
    if !permissions.is_within(actor.permissions()) {
        return Err(ApiError::forbidden(
            "you cannot grant permissions you do not hold",
        ));
    }
    db.execute(
        "UPDATE cohosts SET permissions = ? WHERE client_id = ? AND id = ?",
        &[
            db::text(serde_json::to_string(&permissions).unwrap_or_default()),
            db::text(&b.client_id),
            db::text(&target.id),
        ],
    )?;
    let updated =
        cohost_of_user(&db, &b, &target.user_id)?.ok_or_else(|| ApiError::not_found("co-host"))?;
    let connected = connected_identities(&db, &b)?.contains(&updated.user_id);
    crate::realtime::publish(
        &b.identity.stream_id,
        json!({ "kind": "cohost", "action": "updated", "coHost": updated.view(connected) }),
    );
    Ok(json(
        200,
        &json!({ "success": true, "coHost": updated.view(connected) }),
    ))
}

/// `DELETE /api/streaming/sessions/{id}/cohosts/{coHostId}`: the owner, or a co-host with
/// canRemoveOthers, removes a co-host; the SFU token endpoint stops giving them publisher
/// tokens.
pub fn remove_cohost(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let (b, _, target) = managed_cohost(ctx, &db, |p| p.can_remove_others, "remove")?;
    let now = time::now_rfc3339();
    db.execute(
        "UPDATE cohosts SET status = 'removed', removed_at = ?, removed_by = ? WHERE client_id = ? AND id = ?",
        &[
            db::text(&now),
            db::text(&ctx.user.id),
            db::text(&b.client_id),
            db::text(&target.id),
        ],
    )?;
    crate::realtime::publish(
        &b.identity.stream_id,
        json!({ "kind": "cohost", "action": "removed", "coHostId": target.id, "userId": target.user_id }),
    );
    Ok(json(
        200,
        &json!({ "success": true, "id": target.id, "status": "removed", "removedAt": now }),
    ))
}

/// `GET /api/streaming/sessions/{id}/metrics`: for the owner and co-hosts with
/// canAccessAnalytics.
pub fn metrics(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let b = broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"))?;
    if let Some(user) = ctx.user() {
        let actor = actor_of(&db, &b, &user.id)?;
        if !actor.is_host() || !actor.permissions().can_access_analytics {
            broadcasts::check_can_watch(&db, &b, Viewer::User(&user.id))?;
            return Err(ApiError::forbidden(
                "only the owner or a co-host with canAccessAnalytics sees metrics",
            ));
        }
    }
    let scope = [db::text(&b.client_id), db::text(&b.id)];
    let (peak, joins, leaves, seconds) = db
        .query_one(
            "SELECT peak_cohosts, joins, leaves, cohost_seconds FROM session_metrics WHERE client_id = ? AND broadcast_id = ?",
            &scope,
            |row| {
                (
                    db::col_int(row, "peak_cohosts"),
                    db::col_int(row, "joins"),
                    db::col_int(row, "leaves"),
                    db::col_int(row, "cohost_seconds"),
                )
            },
        )?
        .unwrap_or_default();
    let now = time::now();
    let present = db.query(
        "SELECT is_cohost, joined_at FROM sfu_participants WHERE client_id = ? AND broadcast_id = ?",
        &scope,
        |row| (db::col_bool(row, "is_cohost"), db::col_int(row, "joined_at")),
    )?;
    let current: Vec<i64> = present
        .iter()
        .filter(|(cohost, _)| *cohost)
        .map(|(_, since)| *since)
        .collect();
    let ongoing: i64 = current.iter().map(|since| (now - since).max(0)).sum();
    Ok(json(
        200,
        &json!({
            "sessionId": b.id,
            "currentCoHosts": current.len(),
            "peakCoHosts": peak,
            "joins": joins,
            "leaves": leaves,
            "totalCoHostMinutes": (seconds + ongoing) as f64 / 60.0,
            "currentParticipants": present.len(),
        }),
    ))
}

/// `POST /api/streaming/sessions/{id}/participants/events`: the SFU's webhook (LiveKit's
/// JSON, signed as LiveKit signs webhooks). Joined and left participants update presence
/// and the co-host metrics; other events are acknowledged and ignored.
pub fn participant_event(ctx: &SfuCtx) -> Result<Response, ApiError> {
    let event = ParticipantEvent::read(&ctx.event)?;
    let id = ids::parse_uuid(ctx.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the session id must be a UUID"))?;
    let db = Db::open()?;
    // The webhook carries no API key: the SFU's signature is its credential.
    let b = db
        .query_one(
            "SELECT client_id, stream_id FROM broadcasts WHERE id = ?",
            &[db::text(&id)],
            |row| {
                (
                    db::col_text(row, "client_id"),
                    db::col_text(row, "stream_id"),
                )
            },
        )?
        .ok_or_else(|| ApiError::not_found("session"))?;
    let (client_id, stream_id) = b;
    if event.room != stream_id {
        return Err(ApiError::new(
            422,
            "room_mismatch",
            "the event is for another room",
        ));
    }
    let kind = event.kind.as_str();
    if !matches!(kind, "participant_joined" | "participant_left") {
        return Ok(json(200, &json!({ "handled": false, "event": kind })));
    }
    let now = time::now();
    db.transaction(|db| {
        let fresh = db.execute(
            "INSERT INTO sfu_webhook_events (id, received_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
            &[db::text(&event.id), db::int(now)],
        )?;
        if fresh.rows.is_empty() {
            return Ok(json(200, &json!({ "handled": false, "duplicate": true })));
        }
        db.execute(
            "INSERT INTO session_metrics (broadcast_id, client_id) VALUES (?, ?) ON CONFLICT (broadcast_id) DO NOTHING",
            &[db::text(&id), db::text(&client_id)],
        )?;
        let cohost = rules::is_cohost_role(&event.metadata);
        if kind == "participant_joined" {
            let joined = db.execute(
                "INSERT INTO sfu_participants (broadcast_id, identity, client_id, is_cohost, joined_at) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (broadcast_id, identity) DO NOTHING RETURNING identity",
                &[db::text(&id), db::text(&event.identity), db::text(&client_id), db::boolean(cohost), db::int(now)],
            )?;
            if cohost && !joined.rows.is_empty() {
                db.execute(
                    "UPDATE session_metrics SET joins = joins + 1, peak_cohosts = MAX(peak_cohosts, \
                       (SELECT COUNT(*) FROM sfu_participants WHERE broadcast_id = ?1 AND is_cohost = 1)) \
                     WHERE broadcast_id = ?1",
                    &[db::text(&id)],
                )?;
            }
        } else {
            let left = db.query(
                "DELETE FROM sfu_participants WHERE broadcast_id = ? AND identity = ? RETURNING is_cohost, joined_at",
                &[db::text(&id), db::text(&event.identity)],
                |row| (db::col_bool(row, "is_cohost"), db::col_int(row, "joined_at")),
            )?;
            if let Some((true, since)) = left.first().copied() {
                db.execute(
                    "UPDATE session_metrics SET leaves = leaves + 1, cohost_seconds = cohost_seconds + ? WHERE broadcast_id = ?",
                    &[db::int((now - since).max(0)), db::text(&id)],
                )?;
            }
        }
        Ok(json(200, &json!({ "handled": true, "event": kind })))
    })
}
