//! Co-hosting of a streaming session: the grid layout, joining by consent (a request the
//! host decides, an invite, or an open session), invites, managing co-hosts, SFU presence
//! from LiveKit webhooks, and metrics.

use crate::ApiRoute;
use crate::access::{self, Audience, Viewer};
use crate::broadcasts::{self, BroadcastView};
use crate::sfu_ack::SfuEventAck;
use ::store::app;
use ::store::broadcasts::{self as broadcast_store, Broadcast};
use ::store::cohosts::{self as store, CoHost, Joining};
use ::store::{Db, analytics};
use domain::broadcast::Status;
use domain::cohost::Layout;
use domain::cohost::{self as rules, Permissions};
use domain::request_body;
use domain::validate::JsonBody;
use domain::validate::body::{FieldKind, OptBool, OptInt, OptText, RequestBody, Text};
use domain::{ApiError, ids, time};
use edge::contract::{Operation, Schema};
use edge::endpoint;
use edge::realtime::{CohostAction, Event};
use edge::spin::endpoint::{Answer, Json, NoBody, OneOf, Raw};
use edge::spin::http::{ActorCtx, SfuCtx, UserCtx, json};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use spin_sdk::http::Response;

/// How long an invite token can be used.
const INVITE_TTL_SECS: i64 = 10 * 60;

/// A co-host of a session, as the co-host routes answer it, the session's sockets hear of
/// it and the `cohost.*` webhooks carry it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CoHost")]
pub struct CoHostView {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    #[schemars(extend("format" = "uuid"))]
    pub user_id: String,
    pub user_name: String,
    #[schemars(extend("const" = "co_host"))]
    pub role: &'static str,
    pub permissions: Permissions,
    #[schemars(extend("enum" = ["requested", "active", "declined", "removed"]))]
    pub status: String,
    /// Whether they are on the SFU now.
    pub connected: bool,
    #[schemars(extend("format" = "date-time"))]
    pub joined_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub removed_at: Option<String>,
}

fn view(c: &CoHost, connected: bool) -> CoHostView {
    CoHostView {
        id: c.id.clone(),
        user_id: c.user_id.clone(),
        user_name: c.user_name.clone(),
        role: "co_host",
        permissions: c.permissions,
        status: c.status.clone(),
        connected,
        joined_at: c.joined_at.clone(),
        removed_at: c.removed_at.clone(),
    }
}

/// The answer of a join: admitted, or asked and waiting for the host.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CoHostJoinAnswer")]
pub struct JoinAnswer {
    #[schemars(extend("const" = true))]
    success: bool,
    message: &'static str,
    co_host: CoHostView,
}

/// A co-host after a change (approved, permissions changed).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CoHostChanged")]
pub struct Changed {
    #[schemars(extend("const" = true))]
    success: bool,
    co_host: CoHostView,
}

impl Changed {
    fn answer(co_host: CoHostView) -> Json<Changed> {
        Json(Changed {
            success: true,
            co_host,
        })
    }
}

/// A single-use invite to co-host, shown this once.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CoHostInvite")]
pub struct InviteView {
    #[schemars(extend("const" = true))]
    success: bool,
    /// The token the invitee joins with (`inviteToken`).
    #[schemars(extend("pattern" = "^inv_"))]
    invite_token: String,
    #[schemars(extend("format" = "uuid"))]
    user_id: String,
    permissions: Permissions,
    #[schemars(extend("format" = "date-time"))]
    expires_at: String,
}

/// Who is on a session's stage and how it is laid out.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Multihost")]
pub struct MultihostView {
    session: BroadcastView,
    layout: Layout,
    /// The session's owner.
    host: Option<HostSeat>,
    co_hosts: Vec<CoHostView>,
    #[schemars(range(min = 0))]
    active_co_hosts: i64,
    free_slots: i64,
}

/// The owner's seat on the stage.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostSeat {
    user_id: String,
    #[schemars(extend("const" = "host"))]
    role: &'static str,
    connected: bool,
}

/// A session's co-host grid after a change.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "LayoutChanged")]
pub struct LayoutChanged {
    #[schemars(extend("const" = true))]
    success: bool,
    layout: Layout,
}

/// A refused join: the spec's `{success: false, message}` body, with the refusal's code.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "CoHostJoinRefusal")]
pub struct JoinRefusal {
    #[schemars(extend("const" = false))]
    success: bool,
    message: &'static str,
    #[schemars(extend("enum" = [
        "invalid_invite",
        "invite_required",
        "removed",
        "declined",
        "is_owner",
        "not_live",
        "session_ended",
        "already_cohost",
        "session_full",
    ]))]
    code: &'static str,
}

/// A co-host removed from the session.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CoHostRemoved")]
pub struct Removed {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    id: String,
    #[schemars(extend("const" = "removed"))]
    status: &'static str,
    #[schemars(extend("format" = "date-time"))]
    removed_at: String,
}

/// A co-host request declined.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "CoHostDeclined")]
pub struct Declined {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    id: String,
    #[schemars(extend("const" = "declined"))]
    status: &'static str,
}

/// A session's co-host figures.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "CoHostMetrics")]
pub struct Metrics {
    #[schemars(extend("format" = "uuid"))]
    session_id: String,
    /// Co-hosts on the SFU now.
    #[schemars(range(min = 0))]
    current_co_hosts: i64,
    /// The most co-hosts on the SFU at once.
    peak_co_hosts: i64,
    joins: i64,
    leaves: i64,
    /// Minutes co-hosts spent on the SFU, those on it now counted to now.
    total_co_host_minutes: f64,
    /// Everyone on the SFU now, hosts and viewers.
    #[schemars(range(min = 0))]
    current_participants: i64,
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

fn actor_of(db: &Db, b: &Broadcast, user_id: &str) -> Result<Actor, ApiError> {
    if b.is_owned_by(user_id) {
        return Ok(Actor::Owner);
    }
    Ok(match store::of_user(db, b, user_id)? {
        Some(c) if c.is_active() => Actor::CoHost(c),
        _ => Actor::Other,
    })
}

/// The session the signed-in user may see (a private one is 404 to others).
fn load_session(ctx: &UserCtx, db: &Db) -> Result<(Broadcast, Audience), ApiError> {
    let b = app::broadcasts::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    let audience = access::audience(db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
    Ok((b, audience))
}

/// Permissions as a request sends them: a preset name or an object of booleans; may be
/// left out.
pub struct OptPermissions;

impl FieldKind for OptPermissions {
    type Value = Option<Permissions>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Permissions> {
        let value = body.opt_value(name)?;
        match Permissions::from_json(&value) {
            Ok(p) => Some(p),
            Err(message) => {
                body.error(name, message);
                None
            }
        }
    }

    fn schema() -> Value {
        let mut schema = Permissions::request_schema();
        if let Some(choices) = schema["anyOf"].as_array_mut() {
            choices.push(json!({ "type": "null" }));
        }
        schema
    }
}

/// Permissions as a request sends them, required.
pub struct RequiredPermissions;

impl FieldKind for RequiredPermissions {
    /// The default preset when missing or bad (the body then has an error).
    type Value = Permissions;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Permissions {
        let permissions = OptPermissions::read(body, name);
        if permissions.is_none() && !body.has_errors_for(&[name]) {
            body.error(name, "is required");
        }
        permissions.unwrap_or_default()
    }

    fn schema() -> Value {
        Permissions::request_schema()
    }
}

request_body! {
    /// A request to co-host a live session, or an invite's redemption.
    pub struct JoinBody as "CoHostJoin" {
        /// The name shown on the session's grid.
        "userName" user_name: Text<100>,
        /// The permissions asked for; what is granted may be less.
        "permissions" permissions: OptPermissions,
        /// An invite issued to this user: they join at once with its permissions.
        "inviteToken" invite_token: OptText<100>,
    }
}

request_body! {
    /// Whom to invite to co-host, and with what permissions (the default preset when
    /// left out; at most the inviter's own).
    pub struct InviteBody as "CoHostInviteRequest" {
        "userId" user_id: Text<64>,
        "permissions" permissions: OptPermissions,
    }
}

request_body! {
    /// An approval of a co-host request: the permissions granted (the default preset when
    /// left out; at most the approver's own).
    pub struct ApprovalBody as "CoHostApproval" {
        "permissions" permissions: OptPermissions,
    }
}

request_body! {
    /// A co-host's new permissions (at most the changer's own).
    pub struct PermissionsChangeBody as "CoHostPermissionsChange" {
        "permissions" permissions: RequiredPermissions,
    }
}

/// A refused join: the spec's body, answered with its status (403 for the invite or the
/// policy, 409 for the session's state).
pub struct Refused(u16, JoinRefusal);

impl Answer for Refused {
    fn respond(self) -> Response {
        json(self.0, &self.1)
    }

    fn document(op: Operation) -> Operation {
        op.answers(
            403,
            "Refused (the spec's body): invalid_invite, invite_required, removed, declined",
            Schema::view::<JoinRefusal>(),
        )
        .answers(
            409,
            "Refused (the spec's body): is_owner, not_live, session_ended, already_cohost, \
             session_full",
            Schema::view::<JoinRefusal>(),
        )
    }
}

/// What a join answers: refused, or admitted or waiting.
type JoinOutcome = OneOf<Refused, Json<JoinAnswer>>;

/// A refused join, answered with `status`.
fn refused(status: u16, code: &'static str, message: &'static str) -> JoinOutcome {
    OneOf::First(Refused(
        status,
        JoinRefusal {
            success: false,
            message,
            code,
        },
    ))
}

/// The co-host routes: the session's hosts manage the grid and the co-hosts, users ask or
/// are invited to join, and the SFU reports who is present.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/streaming/sessions/{id}/multihost",
        User(multihost),
        "Multihost (cohosts)",
    ),
    endpoint!(
        PUT "/api/streaming/sessions/{id}/layout",
        User(update_layout),
        "Update layout (cohosts)",
        |op| op
            .takes(Schema::body::<LayoutChangesBody>())
            .errors(403, &["forbidden"]),
    ),
    endpoint!(
        POST "/api/streaming/sessions/{id}/join-cohost",
        User(join),
        "Join (cohosts)",
        |op| op
            .link(
                "PUT /api/streaming/sessions/{id}/cohosts/{coHostId}",
                &[
                    ("id", "$request.path.id"),
                    ("coHostId", "$response.body#/coHost/id"),
                ],
            )
            .link(
                "DELETE /api/streaming/sessions/{id}/cohosts/{coHostId}",
                &[
                    ("id", "$request.path.id"),
                    ("coHostId", "$response.body#/coHost/id"),
                ],
            )
            .link(
                "POST /api/streaming/sessions/{id}/cohosts/{coHostId}/approve",
                &[
                    ("id", "$request.path.id"),
                    ("coHostId", "$response.body#/coHost/id"),
                ],
            )
            .link(
                "POST /api/streaming/sessions/{id}/cohosts/{coHostId}/decline",
                &[
                    ("id", "$request.path.id"),
                    ("coHostId", "$response.body#/coHost/id"),
                ],
            )
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended", "is_owner"]),
    ),
    endpoint!(
        POST "/api/streaming/sessions/{id}/invites",
        User(invite),
        "Invite (cohosts)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended", "is_owner"]),
    ),
    endpoint!(
        PUT "/api/streaming/sessions/{id}/cohosts/{coHostId}",
        User(update_cohost),
        "Update cohost (cohosts)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/streaming/sessions/{id}/cohosts/{coHostId}",
        User(remove_cohost),
        "Remove cohost (cohosts)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/streaming/sessions/{id}/cohosts/{coHostId}/approve",
        User(approve),
        "Approve (cohosts)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["not_live", "not_requested", "session_full"]),
    ),
    endpoint!(
        POST "/api/streaming/sessions/{id}/cohosts/{coHostId}/decline",
        User(decline),
        "Decline (cohosts)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["not_requested"]),
    ),
    endpoint!(
        POST "/api/streaming/sessions/{id}/participants/events",
        Sfu(participant_event),
        "Participant event (cohosts)",
        |op| op
            .takes_as(
                "application/webhook+json",
                Schema::written(json!({
                    "type": "object",
                    "description": "LiveKit webhook event (participant_joined, participant_left, ...)",
                })),
            )
            .answers(200, "OK", Schema::view::<SfuEventAck>())
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"])
            .errors(422, &["invalid_webhook"]),
    ),
    endpoint!(
        GET "/api/streaming/sessions/{id}/metrics",
        UserOrServer(metrics),
        "Metrics (cohosts)",
        |op| op.errors(403, &["forbidden"]),
    ),
];

/// The session with its grid, its host and co-hosts (who is connected), and its free slots.
fn multihost(ctx: &UserCtx, _: NoBody) -> Result<Json<MultihostView>, ApiError> {
    let db = ctx.db()?;
    let (b, audience) = load_session(ctx, &db)?;
    let layout = store::layout(&db, &b)?;
    let connected = store::connected(&db, &b)?;
    let cohosts = store::list(&db, &b)?;
    let active = cohosts.iter().filter(|c| c.is_active()).count() as i64;
    let co_hosts: Vec<CoHostView> = cohosts
        .iter()
        .map(|c| view(c, connected.contains(&c.user_id)))
        .collect();
    let host = b.owner_id.as_ref().map(|owner| HostSeat {
        user_id: owner.clone(),
        role: "host",
        connected: connected.contains(owner),
    });
    Ok(Json(MultihostView {
        session: broadcasts::view_one(&db, &b, audience, ctx.now())?,
        free_slots: rules::free_slots(&layout, active),
        layout,
        host,
        co_hosts,
        active_co_hosts: active,
    }))
}

request_body! {
    /// What changes a session's co-host grid: any of its fields (none changes nothing).
    pub struct LayoutChangesBody as "LayoutChanges" {
        "maxHosts" max_hosts: OptInt<1, { rules::MAX_HOSTS }>,
        "gridColumns" grid_columns: OptInt<1, { rules::MAX_HOSTS }>,
        "gridRows" grid_rows: OptInt<1, { rules::MAX_HOSTS }>,
        "aspectRatio" aspect_ratio: OptText<9>,
        "showNames" show_names: OptBool,
        "showControls" show_controls: OptBool,
    }
}

/// Any of the layout's fields; the result must fit (columns x rows hold maxHosts) and hold
/// the co-hosts already there. The body is read here, not by the dispatcher: whether its
/// fields fit depends on the stored grid and co-hosts, and is reported with the fields'
/// own errors, after the caller is known to control the layout.
fn update_layout(ctx: &UserCtx, _: NoBody) -> Result<Json<LayoutChanged>, ApiError> {
    let mut body = ctx.json()?;
    let db = ctx.db()?;
    let (b, _) = load_session(ctx, &db)?;
    let actor = actor_of(&db, &b, &ctx.user.id)?;
    if !actor.permissions().can_control_layout {
        return Err(ApiError::forbidden(
            "only the owner or a co-host with canControlLayout changes the layout",
        ));
    }
    let changes = LayoutChangesBody::read(&mut body);
    let mut layout = store::layout(&db, &b)?;
    layout.max_hosts = changes.max_hosts.unwrap_or(layout.max_hosts);
    layout.grid_columns = changes.grid_columns.unwrap_or(layout.grid_columns);
    layout.grid_rows = changes.grid_rows.unwrap_or(layout.grid_rows);
    layout.aspect_ratio = changes.aspect_ratio.unwrap_or(layout.aspect_ratio);
    layout.show_names = changes.show_names.unwrap_or(layout.show_names);
    layout.show_controls = changes.show_controls.unwrap_or(layout.show_controls);
    for (field, message) in layout.problems() {
        body.error(field, message);
    }
    let active = store::count_active(&db, &b)?;
    if layout.max_hosts < active + 1 && !body.has_errors_for(&["maxHosts"]) {
        body.error(
            "maxHosts",
            format!("the session already has {} hosts", active + 1),
        );
    }
    body.finish()?;
    store::save_layout(&db, &b, &layout, ctx.now())?;
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::Cohost {
            action: CohostAction::Layout,
            co_host: None,
            co_host_id: None,
            user_id: None,
            grid: serde_json::to_value(&layout).ok(),
        },
    );
    Ok(Json(LayoutChanged {
        success: true,
        layout,
    }))
}

/// `{userId, permissions?}` → a single-use invite token for that user, valid for 10
/// minutes.
fn invite(ctx: &UserCtx, sent: InviteBody) -> Result<Json<InviteView>, ApiError> {
    let InviteBody {
        user_id: invitee,
        permissions,
    } = sent;
    let granted = permissions.unwrap_or(Permissions::DEFAULT);
    let db = ctx.db()?;
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
    if b.is_owned_by(&invitee) {
        return Err(ApiError::conflict(
            "is_owner",
            "the owner hosts the session already",
        ));
    }
    if !::store::users::exists(&db, &b.client_id, &invitee)? {
        return Err(crate::users::unknown_user("userId"));
    }
    let token = format!("inv_{}", ids::random_base62(32));
    let expires_at = ctx.now() + INVITE_TTL_SECS;
    let hash = ids::sha256_hex(token.as_bytes());
    store::add_invite(&db, &b, &hash, &invitee, granted, &ctx.user.id, expires_at)?;
    Ok(Json(InviteView {
        success: true,
        invite_token: token,
        user_id: invitee,
        permissions: granted,
        expires_at: time::format_rfc3339(expires_at),
    }))
}

/// Takes a valid invite for `user_id` to `b` (single use): its permissions, or why not.
fn redeem_invite(
    db: &Db,
    b: &Broadcast,
    user_id: &str,
    token: &str,
    now: i64,
) -> Result<Result<Permissions, &'static str>, ApiError> {
    let hash = ids::sha256_hex(token.as_bytes());
    let Some(invite) = store::invite(db, b, &hash)? else {
        return Ok(Err("the invite token is not valid for this session"));
    };
    if invite.user_id != user_id {
        return Ok(Err("the invite token was issued to another user"));
    }
    if invite.used {
        return Ok(Err("the invite token has already been used"));
    }
    if invite.expires_at <= now {
        return Ok(Err("the invite token has expired"));
    }
    if !store::take_invite(db, &hash, now)? {
        return Ok(Err("the invite token has already been used"));
    }
    Ok(Ok(invite.permissions))
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

/// `{userName, permissions?, inviteToken?}`. With a valid invite the user joins at once with the invite's permissions. Without one,
/// the broadcast's `cohostPolicy` decides: `approval` (the default) stores a request that
/// the host approves or declines, `open` joins at once with the default preset,
/// `invite_only` refuses.
fn join(ctx: &UserCtx, ask: JoinBody) -> Result<JoinOutcome, ApiError> {
    let db = ctx.db()?;
    let (b, _) = load_session(ctx, &db)?;
    if b.is_owned_by(&ctx.user.id) {
        return Ok(refused(409, "is_owner", "you host this session already"));
    }
    match b.status {
        Status::Active => {}
        Status::Pending => return Ok(refused(409, "not_live", "the session is not live yet")),
        Status::Completed | Status::Error => {
            return Ok(refused(409, "session_ended", "the session has ended"));
        }
    }
    // The event goes out after the commit, so no socket hears of a join that was undone.
    let (response, event) = db.transaction(|db| {
        broadcast_store::lock(db, &b)?;
        let existing = store::of_user(db, &b, &ctx.user.id)?;
        match admission(db, &b, ctx, &ask, existing.as_ref())? {
            Admission::Refused(status, code, why) => Ok((refused(status, code, why), None)),
            Admission::Waiting(waiting) => {
                let answer = JoinAnswer {
                    success: true,
                    message: "your request to co-host is waiting for the host",
                    co_host: view(&waiting, false),
                };
                Ok((OneOf::Second(Json(answer)), None))
            }
            Admission::Admitted { granted, status } => {
                let id = existing.map_or_else(ids::uuid, |c| c.id);
                let (answer, event) = enter(db, &b, ctx, &ask, &id, granted, status)?;
                Ok((OneOf::Second(Json(answer)), Some(event)))
            }
        }
    })?;
    if let Some(event) = event {
        crate::realtime::publish(&b.identity.stream_id, event);
    }
    Ok(response)
}

/// How a join request is decided.
enum Admission {
    /// Not admitted: the status, code and message of the refusal.
    Refused(u16, &'static str, &'static str),
    /// Asked before, without an invite: the request is still waiting for the host.
    Waiting(CoHost),
    /// Admitted as `status` (`active`, or `requested` for the host to decide).
    Admitted {
        granted: Permissions,
        status: &'static str,
    },
}

/// Decides a join on the locked session: an invite admits with its permissions; without
/// one the session's policy decides; an active co-host needs a free slot.
fn admission(
    db: &Db,
    b: &Broadcast,
    ctx: &UserCtx,
    ask: &JoinBody,
    existing: Option<&CoHost>,
) -> Result<Admission, ApiError> {
    match existing {
        Some(c) if c.status == "active" => {
            return Ok(Admission::Refused(
                409,
                "already_cohost",
                "you are already a co-host of this session",
            ));
        }
        Some(c) if c.status == "requested" && ask.invite_token.is_none() => {
            return Ok(Admission::Waiting(c.clone()));
        }
        _ => {}
    }
    let (granted, status) = match ask.invite_token.as_deref() {
        Some(token) => match redeem_invite(db, b, &ctx.user.id, token, ctx.now())? {
            Ok(p) => (p, "active"),
            Err(why) => return Ok(Admission::Refused(403, "invalid_invite", why)),
        },
        None => {
            if let Some((code, why)) = uninvited_refusal(&b.cohost_policy, existing) {
                return Ok(Admission::Refused(403, code, why));
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
        let active = store::count_active(db, b)?;
        if rules::free_slots(&store::layout(db, b)?, active) == 0 {
            return Ok(Admission::Refused(
                409,
                "session_full",
                "the session has no free co-host slot",
            ));
        }
    }
    Ok(Admission::Admitted { granted, status })
}

/// Stores an admitted co-host (row `id`) and its `cohost.requested` webhook; answers the
/// joiner's answer and the event for the session's sockets.
fn enter(
    db: &Db,
    b: &Broadcast,
    ctx: &UserCtx,
    ask: &JoinBody,
    id: &str,
    granted: Permissions,
    status: &'static str,
) -> Result<(JoinAnswer, Event), ApiError> {
    let joining = Joining {
        id,
        user_id: &ctx.user.id,
        user_name: &ask.user_name,
        permissions: granted,
        status,
    };
    let cohost = store::upsert(db, b, &joining, ctx.now_millis())?;
    let capped = ask.permissions.is_some_and(|r| !r.is_within(granted));
    let message = match (status, capped) {
        ("requested", _) => "asked to co-host; the host approves or declines the request",
        (_, true) => {
            "joined as a co-host; the requested permissions were reduced to what you may hold"
        }
        _ => "joined as a co-host",
    };
    let view = view(&cohost, false);
    let action = if status == "active" {
        CohostAction::Joined
    } else {
        record_event(db, "cohost.requested", b, &view, ctx.now())?;
        CohostAction::Requested
    };
    let event = Event::cohost(action, &view);
    let answer = JoinAnswer {
        success: true,
        message,
        co_host: view,
    };
    Ok((answer, event))
}

/// Records `cohost.*` with the co-host as the co-host routes answer it, and the session's id.
fn record_event(
    db: &Db,
    event_type: &str,
    b: &Broadcast,
    co_host: &CoHostView,
    now: i64,
) -> Result<(), ApiError> {
    let data = CohostEvent {
        co_host,
        session_id: &b.id,
    };
    crate::webhook_events::record(
        db,
        &b.client_id,
        event_type,
        "cohost",
        &co_host.id,
        &data,
        now,
    )
}

/// A `cohost.*` event's data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CohostEvent<'a> {
    #[serde(flatten)]
    co_host: &'a CoHostView,
    session_id: &'a str,
}

/// The co-host row a path's `coHostId` names, in this session.
fn cohost_by_id(db: &Db, b: &Broadcast, raw_id: &str) -> Result<CoHost, ApiError> {
    let id = ids::parse_uuid(raw_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the co-host id must be a UUID"))?;
    store::by_id(db, b, &id)?.ok_or_else(|| ApiError::not_found("co-host"))
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

fn decided_meanwhile() -> ApiError {
    ApiError::conflict("not_requested", "the request was decided meanwhile")
}

/// `{permissions?}` (at most the approver's own; the default preset when omitted). Takes a
/// free slot.
fn approve(ctx: &UserCtx, sent: ApprovalBody) -> Result<Json<Changed>, ApiError> {
    let permissions = sent.permissions.unwrap_or(Permissions::DEFAULT);
    let db = ctx.db()?;
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
        // One decision at a time per session: of two approvals for the last slot, one wins.
        broadcast_store::lock(db, &b)?;
        let active = store::count_active(db, &b)?;
        if rules::free_slots(&store::layout(db, &b)?, active) == 0 {
            return Err(ApiError::conflict(
                "session_full",
                "the session has no free co-host slot",
            ));
        }
        if !store::approve(db, &b, &target.id, permissions, ctx.now_millis())? {
            return Err(decided_meanwhile());
        }
        store::by_id(db, &b, &target.id)?.ok_or_else(|| ApiError::not_found("co-host"))
    })?;
    let view = view(&approved, false);
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::cohost(CohostAction::Approved, &view),
    );
    Ok(Changed::answer(view))
}

/// The request is declined; the user may come back only with an invite.
fn decline(ctx: &UserCtx, _: NoBody) -> Result<Json<Declined>, ApiError> {
    let db = ctx.db()?;
    let (b, _, target) = pending_request(ctx, &db)?;
    if !store::decline(&db, &b, &target.id, &ctx.user.id, ctx.now())? {
        return Err(decided_meanwhile());
    }
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::cohost_gone(CohostAction::Declined, &target.id, &target.user_id),
    );
    Ok(Json(Declined {
        success: true,
        id: target.id,
        status: "declined",
    }))
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

/// `{permissions}`. A co-host with canInviteOthers may change co-hosts who hold no more
/// than they do, and grant no more.
fn update_cohost(ctx: &UserCtx, sent: PermissionsChangeBody) -> Result<Json<Changed>, ApiError> {
    let permissions = sent.permissions;
    let db = ctx.db()?;
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
    store::set_permissions(&db, &b, &target.id, permissions)?;
    let updated =
        store::by_id(&db, &b, &target.id)?.ok_or_else(|| ApiError::not_found("co-host"))?;
    let connected = store::connected(&db, &b)?.contains(&updated.user_id);
    let view = view(&updated, connected);
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::cohost(CohostAction::Updated, &view),
    );
    Ok(Changed::answer(view))
}

/// The owner, or a co-host with canRemoveOthers, removes a co-host; the SFU token endpoint
/// stops giving them publisher tokens.
fn remove_cohost(ctx: &UserCtx, _: NoBody) -> Result<Json<Removed>, ApiError> {
    let db = ctx.db()?;
    let (b, _, target) = managed_cohost(ctx, &db, |p| p.can_remove_others, "remove")?;
    db.transaction(|tx| {
        store::remove(tx, &b, &target.id, &ctx.user.id, ctx.now())?;
        let removed = store::by_id(tx, &b, &target.id)?.unwrap_or(target.clone());
        record_event(tx, "cohost.removed", &b, &view(&removed, false), ctx.now())
    })?;
    crate::realtime::publish(
        &b.identity.stream_id,
        Event::cohost_gone(CohostAction::Removed, &target.id, &target.user_id),
    );
    Ok(Json(Removed {
        success: true,
        id: target.id,
        status: "removed",
        removed_at: time::format_rfc3339(ctx.now()),
    }))
}

/// For the owner, co-hosts with canAccessAnalytics, and the tenant's server.
fn metrics(ctx: &ActorCtx, _: NoBody) -> Result<Json<Metrics>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    if let Some(user) = ctx.user() {
        let actor = actor_of(&db, &b, &user.id)?;
        if !actor.is_host() || !actor.permissions().can_access_analytics {
            access::check_can_watch(&db, &b, Viewer::User(&user.id), now)?;
            return Err(ApiError::forbidden(
                "only the owner or a co-host with canAccessAnalytics sees metrics",
            ));
        }
    }
    let counters = store::counters(&db, &b)?;
    let present = store::present(&db, &b)?;
    let on_stage: Vec<i64> = present
        .iter()
        .filter(|p| p.is_cohost)
        .map(|p| p.since)
        .collect();
    let ongoing: i64 = on_stage.iter().map(|since| (now - since).max(0)).sum();
    Ok(Json(Metrics {
        session_id: b.id,
        current_co_hosts: on_stage.len() as i64,
        peak_co_hosts: counters.peak_cohosts,
        joins: counters.joins,
        leaves: counters.leaves,
        total_co_host_minutes: (counters.cohost_seconds + ongoing) as f64 / 60.0,
        current_participants: present.len() as i64,
    }))
}

/// The parts of an SFU participant event the platform uses.
#[derive(Debug)]
pub struct ParticipantEvent {
    id: String,
    kind: String,
    room: String,
    identity: String,
    metadata: String,
}

impl ParticipantEvent {
    /// Reads a (verified) LiveKit webhook event.
    pub fn read(event: &Value) -> Result<Self, ApiError> {
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

/// The SFU's webhook (LiveKit's JSON, signed as LiveKit signs webhooks, read and verified
/// by the tier). Joined and left participants update presence and the co-host metrics;
/// other events are acknowledged and ignored.
fn participant_event(ctx: &SfuCtx, _: NoBody) -> Result<Raw, ApiError> {
    let event = ParticipantEvent::read(&ctx.event)?;
    let id = ids::parse_uuid(ctx.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the session id must be a UUID"))?;
    participant_presence(&ctx.db()?, &event, Some(&id), ctx.now()).map(Raw)
}

/// Presence from a verified participant event, for the per-session route (`session` is
/// its id: the room must be that session's, else 404) and for `POST /api/sfu/webhook`
/// (any broadcast's room; another room is acknowledged and ignored).
pub fn participant_presence(
    db: &Db,
    event: &ParticipantEvent,
    session: Option<&str>,
    now: i64,
) -> Result<Response, ApiError> {
    // The webhook carries no API key: the SFU's signature is its credential, and the room
    // in the signed body must be this session's.
    let found = app::broadcasts::load_by_room(db, &event.room, now)?;
    let b = match (session, found) {
        (Some(id), found) => found
            .filter(|b| b.id == id)
            .ok_or_else(|| ApiError::not_found("session"))?,
        (None, Some(b)) => b,
        (None, None) => {
            return Ok(SfuEventAck::ignored(&event.kind)
                .because("unknown room")
                .answer());
        }
    };
    let kind = event.kind.as_str();
    if !matches!(kind, "participant_joined" | "participant_left") {
        return Ok(SfuEventAck::ignored(kind).answer());
    }
    db.transaction(|db| {
        if !store::first_delivery(db, &event.id, now)? {
            return Ok(SfuEventAck::duplicate().answer());
        }
        let joined = kind == "participant_joined";
        if joined {
            let cohost = rules::is_cohost_role(&event.metadata);
            store::participant_joined(db, &b.client_id, &b.id, &event.identity, cohost, now)?;
            if analytics::is_viewer(&b, &event.identity, cohost) {
                analytics::viewer_joined(db, &b, &event.identity, now)?;
            }
        } else {
            store::participant_left(db, &b.client_id, &b.id, &event.identity, now)?;
            analytics::viewer_left(db, &b, &event.identity, now)?;
        }
        // A co-host of the session arriving on or leaving the SFU.
        if let Some(c) = store::of_user(db, &b, &event.identity)?.filter(CoHost::is_active) {
            let event_type = if joined {
                "cohost.joined"
            } else {
                "cohost.left"
            };
            record_event(db, event_type, &b, &view(&c, joined), now)?;
        }
        Ok(SfuEventAck::handled(kind).answer())
    })
}
