//! Broadcast sessions: one record whichever endpoint created it (`/api/broadcasts`,
//! `/api/streaming/sessions`, or the SDK client's `/api/v1/sessions`).

use crate::links::Links;
use common::domain::broadcast::{self as rules, Status, StreamIdentity, Transition};
use common::pagination::{Page, Paged};
use common::spin::db::{self, Db, Row};
use common::spin::http::{Actor, ActorCtx, AppCtx, Caller, ServerCtx, UserCtx, json};
use common::spin::rate_limit;
use common::validate::JsonBody;
use common::{ApiError, ids, time};
use serde_json::{Map, Value, json};
use spin_sdk::http::Response;
use std::collections::HashMap;

const MAX_TAGS: usize = 20;
const MAX_TAG_LEN: usize = 50;
const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY_LEN: usize = 100;
const MAX_METADATA_VALUE_LEN: usize = 1024;
const MAX_VIEWERS: i64 = 100_000_000;

/// A stored broadcast.
#[derive(Debug, Clone)]
pub struct Broadcast {
    pub id: String,
    pub client_id: String,
    pub owner_id: Option<String>,
    /// streamId (the SFU room), streamKey and shortId.
    pub identity: StreamIdentity,
    pub title: String,
    pub visibility: String,
    pub tags: Value,
    pub metadata: Value,
    pub status: Status,
    pub device_width: Option<i64>,
    pub device_height: Option<i64>,
    pub device_type: Option<String>,
    pub operating_system: Option<String>,
    pub orientation: String,
    pub recording: Option<(i64, i64)>,
    pub max_participants: i64,
    pub viewer_count: i64,
    pub peak_viewers: i64,
    pub viewer_reports: i64,
    pub viewer_total: i64,
    pub created_at: String,
    pub updated_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub last_heartbeat: Option<i64>,
    /// How co-hosts join: `approval` (the host approves requests), `open` or `invite_only`.
    pub cohost_policy: String,
}

fn opt_int(row: &Row<'_>, column: &str) -> Option<i64> {
    row.get::<i64>(column)
}

fn from_row(row: &Row<'_>) -> Broadcast {
    let parse = |column: &str, empty: Value| {
        serde_json::from_str(&db::col_text(row, column)).unwrap_or(empty)
    };
    Broadcast {
        id: db::col_text(row, "id"),
        client_id: db::col_text(row, "client_id"),
        owner_id: db::col_opt_text(row, "owner_id"),
        identity: stream_identity_of(row),
        title: db::col_text(row, "title"),
        visibility: db::col_text(row, "visibility"),
        tags: parse("tags", json!([])),
        metadata: parse("metadata", json!({})),
        status: Status::parse(&db::col_text(row, "status")).unwrap_or(Status::Error),
        device_width: opt_int(row, "device_width"),
        device_height: opt_int(row, "device_height"),
        device_type: db::col_opt_text(row, "device_type"),
        operating_system: db::col_opt_text(row, "operating_system"),
        orientation: db::col_text(row, "orientation"),
        recording: opt_int(row, "recording_width").zip(opt_int(row, "recording_height")),
        max_participants: db::col_int(row, "max_participants"),
        viewer_count: db::col_int(row, "viewer_count"),
        peak_viewers: db::col_int(row, "peak_viewers"),
        viewer_reports: db::col_int(row, "viewer_reports"),
        viewer_total: db::col_int(row, "viewer_total"),
        created_at: db::col_text(row, "created_at"),
        updated_at: db::col_text(row, "updated_at"),
        started_at: db::col_opt_text(row, "started_at"),
        ended_at: db::col_opt_text(row, "ended_at"),
        last_heartbeat: opt_int(row, "last_heartbeat"),
        cohost_policy: db::col_text(row, "cohost_policy"),
    }
}

/// The stream identity columns every table with a stream shares.
pub fn stream_identity_of(row: &Row<'_>) -> StreamIdentity {
    StreamIdentity {
        stream_id: db::col_text(row, "stream_id"),
        stream_key: db::col_text(row, "stream_key"),
        short_id: db::col_text(row, "short_id"),
    }
}

/// Who is looking at a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Owner,
    Viewer,
}

impl Broadcast {
    /// The broadcast as `audience` sees it: the owner also gets the ingest credentials
    /// (from `links`), metadata and device details.
    pub fn view(&self, links: &Links, reactions: Value, audience: Audience) -> Value {
        let mut view = json!({
            "id": self.id,
            "title": self.title,
            "status": self.status.as_str(),
            "visibility": self.visibility,
            "tags": self.tags,
            "ownerId": self.owner_id,
            "viewerCount": self.viewer_count,
            "maxParticipants": self.max_participants,
            "orientation": self.orientation,
            "recordingWidth": self.recording.map(|r| r.0),
            "recordingHeight": self.recording.map(|r| r.1),
            "createdAt": self.created_at,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "reactions": reactions,
            "cohostPolicy": self.cohost_policy,
        });
        let owner = audience == Audience::Owner;
        links.add_stream_addresses(&mut view, &self.identity, owner);
        if owner {
            view["metadata"] = self.metadata.clone();
            view["deviceWidth"] = self.device_width.into();
            view["deviceHeight"] = self.device_height.into();
            view["deviceType"] = self.device_type.clone().into();
            view["operatingSystem"] = self.operating_system.clone().into();
            view["updatedAt"] = self.updated_at.clone().into();
        }
        view
    }

    pub fn is_owned_by(&self, user_id: &str) -> bool {
        self.owner_id.as_deref() == Some(user_id)
    }
}

/// A validated creation request.
#[derive(Debug, Default)]
pub struct NewBroadcast {
    pub title: String,
    pub visibility: String,
    pub tags: Vec<String>,
    pub metadata: Map<String, Value>,
    pub device: Option<(i64, i64)>,
    pub device_type: Option<String>,
    pub operating_system: Option<String>,
    pub orientation: String,
    pub max_participants: i64,
    pub cohost_policy: String,
}

/// The `visibility` field: public (the default), unlisted or private.
pub fn visibility(body: &mut JsonBody) -> String {
    match body.opt_string("visibility", 20).as_deref() {
        None => "public".into(),
        Some(v @ ("public" | "unlisted" | "private")) => v.into(),
        Some(_) => {
            body.error("visibility", "must be public, unlisted or private");
            "public".into()
        }
    }
}

/// The `cohostPolicy` field: approval (the default), open or invite_only.
pub fn cohost_policy(body: &mut JsonBody) -> Option<String> {
    match body.opt_string("cohostPolicy", 20).as_deref() {
        None => None,
        Some(p @ ("approval" | "open" | "invite_only")) => Some(p.into()),
        Some(_) => {
            body.error("cohostPolicy", "must be approval, open or invite_only");
            None
        }
    }
}

/// Checks metadata: an object of at most 50 string values of at most 1 KiB.
pub fn check_metadata(
    body: &mut JsonBody,
    value: Option<Value>,
    allow_null_values: bool,
) -> Map<String, Value> {
    let Some(value) = value else {
        return Map::new();
    };
    let Value::Object(map) = value else {
        body.error("metadata", "must be an object of strings");
        return Map::new();
    };
    if map.len() > MAX_METADATA_KEYS {
        body.error(
            "metadata",
            format!("may have at most {MAX_METADATA_KEYS} keys"),
        );
    }
    for (key, v) in &map {
        if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_LEN {
            body.error(
                "metadata",
                format!("keys must be 1 to {MAX_METADATA_KEY_LEN} characters"),
            );
        }
        match v {
            Value::String(s) if s.len() > MAX_METADATA_VALUE_LEN => {
                body.error(
                    &format!("metadata.{key}"),
                    format!("must be at most {MAX_METADATA_VALUE_LEN} bytes"),
                );
            }
            Value::String(_) => {}
            Value::Null if allow_null_values => {}
            _ => body.error(&format!("metadata.{key}"), "must be a string"),
        }
    }
    map
}

/// Checks `tags`: at most 20 strings of 1 to 50 characters (trimmed).
fn parse_tags(body: &mut JsonBody, value: Value) -> Vec<String> {
    let Value::Array(items) = value else {
        body.error("tags", "must be an array of strings");
        return Vec::new();
    };
    if items.len() > MAX_TAGS {
        body.error("tags", format!("may have at most {MAX_TAGS} tags"));
    }
    let mut tags = Vec::new();
    for item in items {
        match item.as_str().map(str::trim) {
            Some(t) if !t.is_empty() && t.chars().count() <= MAX_TAG_LEN => {
                tags.push(t.to_string())
            }
            _ => body.error(
                "tags",
                format!("each tag must be a string of 1 to {MAX_TAG_LEN} characters"),
            ),
        }
    }
    tags
}

/// Reads the creation fields shared by every way of creating a broadcast.
pub fn parse_new(body: &mut JsonBody) -> NewBroadcast {
    let title = body.string("title", 200);
    let visibility = visibility(body);
    let tags = match body.opt_value("tags") {
        None => Vec::new(),
        Some(value) => parse_tags(body, value),
    };
    let metadata_value = body.opt_value("metadata");
    let metadata = check_metadata(body, metadata_value, false);
    let width = body.opt_int("deviceWidth", 1..=16_384);
    let height = body.opt_int("deviceHeight", 1..=16_384);
    if width.is_some() != height.is_some() && !body.has_errors_for(&["deviceWidth", "deviceHeight"])
    {
        body.error("deviceWidth", "deviceWidth and deviceHeight go together");
    }
    let device = width.zip(height);
    let device_type = body.opt_string("deviceType", 50);
    let operating_system = body.opt_string("operatingSystem", 50);
    let orientation = match body.opt_string("orientation", 20).as_deref() {
        None => match device {
            Some((w, h)) if w > h => "landscape".to_string(),
            _ => "portrait".to_string(),
        },
        Some(o @ ("portrait" | "landscape")) => o.to_string(),
        Some(_) => {
            body.error("orientation", "must be portrait or landscape");
            "portrait".into()
        }
    };
    let cohost_policy = cohost_policy(body).unwrap_or_else(|| "approval".into());
    NewBroadcast {
        cohost_policy,
        title,
        visibility,
        tags,
        metadata,
        device,
        device_type,
        operating_system,
        orientation,
        max_participants: 100,
    }
}

/// Stores a new pending broadcast with a fresh stream identity.
pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: Option<&str>,
    new: &NewBroadcast,
) -> Result<Broadcast, ApiError> {
    let identity = StreamIdentity::generate();
    let id = ids::uuid();
    let now = time::now_rfc3339();
    let recording = rules::recording_size(new.device, new.orientation == "portrait");
    db.execute(
        "INSERT INTO broadcasts (id, client_id, owner_id, short_id, stream_id, stream_key, title, visibility, tags, metadata, status, \
           device_width, device_height, device_type, operating_system, orientation, recording_width, recording_height, max_participants, created_at, updated_at, cohost_policy) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            db::text(&id),
            db::text(client_id),
            db::opt_text(owner_id),
            db::text(&identity.short_id),
            db::text(&identity.stream_id),
            db::text(&identity.stream_key),
            db::text(&new.title),
            db::text(&new.visibility),
            db::text(serde_json::to_string(&new.tags).unwrap_or_else(|_| "[]".into())),
            db::text(Value::Object(new.metadata.clone()).to_string()),
            db::text(Status::Pending.as_str()),
            new.device.map_or(db::null(), |d| db::int(d.0)),
            new.device.map_or(db::null(), |d| db::int(d.1)),
            db::opt_text(new.device_type.as_deref()),
            db::opt_text(new.operating_system.as_deref()),
            db::text(&new.orientation),
            recording.map_or(db::null(), |r| db::int(r.0)),
            recording.map_or(db::null(), |r| db::int(r.1)),
            db::int(new.max_participants),
            db::text(&now),
            db::text(&now),
            db::text(&new.cohost_policy),
        ],
    )?;
    load(db, client_id, &id)
}

/// Loads a broadcast of the tenant by id; moves a stale active one to `error` first.
pub fn load(db: &Db, client_id: &str, raw_id: &str) -> Result<Broadcast, ApiError> {
    let id = ids::parse_uuid(raw_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the broadcast id must be a UUID"))?;
    let broadcast = db
        .query_one(
            "SELECT * FROM broadcasts WHERE client_id = ? AND id = ?",
            &[db::text(client_id), db::text(&id)],
            from_row,
        )?
        .ok_or_else(|| ApiError::not_found("broadcast"))?;
    expire_if_stale(db, broadcast)
}

/// The tenant's broadcast whose SFU room (streamId) is `stream_id`, if any; a stale
/// active one is moved to `error` first, as [`load`] does.
pub fn load_by_stream(
    db: &Db,
    client_id: &str,
    stream_id: &str,
) -> Result<Option<Broadcast>, ApiError> {
    db.query_one(
        "SELECT * FROM broadcasts WHERE client_id = ? AND stream_id = ?",
        &[db::text(client_id), db::text(stream_id)],
        from_row,
    )?
    .map(|b| expire_if_stale(db, b))
    .transpose()
}

fn last_seen(b: &Broadcast) -> i64 {
    b.last_heartbeat.unwrap_or(0)
}

fn expire_if_stale(db: &Db, mut b: Broadcast) -> Result<Broadcast, ApiError> {
    if rules::is_stale(b.status, last_seen(&b), time::now()) {
        let now = time::now_rfc3339();
        db.execute(
            "UPDATE broadcasts SET status = 'error', ended_at = COALESCE(ended_at, ?), updated_at = ? WHERE id = ? AND status = 'active'",
            &[db::text(&now), db::text(&now), db::text(&b.id)],
        )?;
        b.status = Status::Error;
        b.ended_at = b.ended_at.or(Some(now));
    }
    Ok(b)
}

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

/// Whether `viewer` may watch `b`: anyone of the tenant for a public or unlisted broadcast;
/// a private one only its owner, its co-hosts (active or asking to join), users holding an
/// unexpired invite, and the tenant's server.
pub fn may_watch(db: &Db, b: &Broadcast, viewer: Viewer<'_>) -> Result<bool, ApiError> {
    if b.visibility != "private" {
        return Ok(true);
    }
    match viewer {
        Viewer::Server => Ok(true),
        Viewer::Guest => Ok(false),
        Viewer::User(id) if b.is_owned_by(id) => Ok(true),
        Viewer::User(id) => crate::cohosts::is_invited_or_host(db, b, id, time::now()),
    }
}

/// [`may_watch`], with a broadcast one may not watch as unknown (404) as a missing one.
pub fn check_can_watch(db: &Db, b: &Broadcast, viewer: Viewer<'_>) -> Result<(), ApiError> {
    if may_watch(db, b, viewer)? {
        Ok(())
    } else {
        Err(ApiError::not_found("broadcast"))
    }
}

/// How `viewer` sees the broadcast: the owner and the tenant's server see everything,
/// others who may watch see the public view; to the rest it is 404.
pub fn audience(db: &Db, b: &Broadcast, viewer: Viewer<'_>) -> Result<Audience, ApiError> {
    match viewer {
        Viewer::Server => Ok(Audience::Owner),
        Viewer::User(id) if b.is_owned_by(id) => Ok(Audience::Owner),
        _ => check_can_watch(db, b, viewer).map(|()| Audience::Viewer),
    }
}

/// Loads a broadcast the signed-in user owns (403 for another user's visible one).
pub fn load_owned(ctx: &UserCtx, db: &Db) -> Result<Broadcast, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let b = load(db, &tenant.client_id, ctx.param("id"))?;
    if !b.is_owned_by(&user.id) {
        check_can_watch(db, &b, Viewer::User(&user.id))?;
        return Err(ApiError::forbidden(
            "only the broadcast's owner may change it",
        ));
    }
    Ok(b)
}

/// Refuses to change a broadcast that has ended (completed or error).
fn ensure_not_final(b: &Broadcast) -> Result<(), ApiError> {
    if b.status.is_final() {
        return Err(ApiError::conflict(
            "broadcast_ended",
            format!("the broadcast is {}", b.status.as_str()),
        ));
    }
    Ok(())
}

/// Reaction counts per broadcast (every kind, zero when none), for many broadcasts in
/// one query.
fn reaction_counts(db: &Db, broadcast_ids: &[&str]) -> Result<HashMap<String, Value>, ApiError> {
    let mut counts: HashMap<String, Value> = HashMap::new();
    if broadcast_ids.is_empty() {
        return Ok(counts);
    }
    for id in broadcast_ids {
        let zeros: Map<String, Value> = rules::REACTIONS
            .iter()
            .map(|k| (k.to_string(), 0.into()))
            .collect();
        counts.insert(id.to_string(), Value::Object(zeros));
    }
    let placeholders = vec!["?"; broadcast_ids.len()].join(", ");
    let rows = db.query(
        &format!(
            "SELECT broadcast_id, kind, count FROM broadcast_reactions WHERE broadcast_id IN ({placeholders})"
        ),
        &broadcast_ids.iter().map(|id| db::text(*id)).collect::<Vec<_>>(),
        |row| {
            (
                db::col_text(row, "broadcast_id"),
                db::col_text(row, "kind"),
                db::col_int(row, "count"),
            )
        },
    )?;
    for (id, kind, count) in rows {
        if let Some(Value::Object(map)) = counts.get_mut(&id) {
            map.insert(kind, count.into());
        }
    }
    Ok(counts)
}

/// The views of `items` (each as `audience_for` decides), with their reaction counts.
pub fn views(
    db: &Db,
    items: &[Broadcast],
    audience_for: impl Fn(&Broadcast) -> Audience,
) -> Result<Vec<Value>, ApiError> {
    let links = Links::load();
    let ids: Vec<&str> = items.iter().map(|b| b.id.as_str()).collect();
    let mut counts = reaction_counts(db, &ids)?;
    Ok(items
        .iter()
        .map(|b| {
            let reactions = counts.remove(&b.id).unwrap_or(Value::Null);
            b.view(&links, reactions, audience_for(b))
        })
        .collect())
}

/// One broadcast's view, with its reaction counts.
pub fn view_one(db: &Db, b: &Broadcast, audience: Audience) -> Result<Value, ApiError> {
    let mut views = views(db, std::slice::from_ref(b), |_| audience)?;
    Ok(views.pop().unwrap_or(Value::Null))
}

/// `POST /api/broadcasts`
pub fn create(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let mut body = ctx.json()?;
    let new = parse_new(&mut body);
    body.finish()?;
    let db = Db::open()?;
    let b = insert(&db, &tenant.client_id, Some(&user.id), &new)?;
    Ok(json(200, &view_one(&db, &b, Audience::Owner)?))
}

/// `GET /api/broadcasts/{id}`
pub fn get(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = Db::open()?;
    let b = load(&db, &tenant.client_id, ctx.param("id"))?;
    let audience = audience(&db, &b, Viewer::User(&user.id))?;
    Ok(json(200, &view_one(&db, &b, audience)?))
}

/// `PATCH /api/broadcasts/{id}` (owner): any of `title`, `visibility`, `tags`,
/// `cohostPolicy`, until the broadcast has ended.
pub fn update(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let title = body.opt_string("title", 200);
    let visibility = body.has("visibility").then(|| visibility(&mut body));
    let tags = body
        .opt_value("tags")
        .map(|value| parse_tags(&mut body, value));
    let policy = cohost_policy(&mut body);
    if title.as_deref().is_some_and(|t| t.trim().is_empty()) {
        body.error("title", "must not be empty");
    }
    body.finish()?;
    let db = Db::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    db.execute(
        "UPDATE broadcasts SET title = COALESCE(?, title), visibility = COALESCE(?, visibility), \
           tags = COALESCE(?, tags), cohost_policy = COALESCE(?, cohost_policy), updated_at = ? \
         WHERE client_id = ? AND id = ?",
        &[
            db::opt_text(title.as_deref()),
            db::opt_text(visibility.as_deref()),
            tags.map_or(db::null(), |t| {
                db::text(serde_json::to_string(&t).unwrap_or_else(|_| "[]".into()))
            }),
            db::opt_text(policy.as_deref()),
            db::text(time::now_rfc3339()),
            db::text(&b.client_id),
            db::text(&b.id),
        ],
    )?;
    let b = load(&db, &b.client_id, &b.id)?;
    Ok(json(200, &view_one(&db, &b, Audience::Owner)?))
}

/// Moves the stale ones of freshly read broadcasts to `error`.
fn expire_stale(db: &Db, items: Vec<Broadcast>) -> Result<Vec<Broadcast>, ApiError> {
    items.into_iter().map(|b| expire_if_stale(db, b)).collect()
}

/// `GET /api/broadcasts`: the user's own, newest first.
pub fn list_own(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let scope = [db::text(&tenant.client_id), db::text(&user.id)];
    owner_page(ctx, "client_id = ? AND owner_id = ?", &scope)
}

/// One page (from the query string) of the broadcasts matching `filter`, newest first,
/// stale ones expired, in the owner's view.
fn owner_page(
    ctx: &common::spin::http::Call,
    filter: &str,
    scope: &[db::Value],
) -> Result<Response, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = Db::open()?;
    let (items, total) = db.page(
        "broadcasts",
        filter,
        scope,
        "created_at DESC, id",
        page,
        from_row,
    )?;
    let items = expire_stale(&db, items)?;
    let items = views(&db, &items, |_| Audience::Owner)?;
    Ok(json(200, &Paged::new(items, total, page)))
}

/// `GET /api/broadcasts/live`: public, active, not stale, newest first.
pub fn list_live(ctx: &AppCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let page = Page::from_query(ctx.query())?;
    let db = Db::open()?;
    let fresh_since = time::now() - rules::STALE_AFTER_SECS;
    let filter =
        "client_id = ? AND status = 'active' AND visibility = 'public' AND last_heartbeat >= ?";
    let scope = [db::text(&tenant.client_id), db::int(fresh_since)];
    let (items, total) = db.page(
        "broadcasts",
        filter,
        &scope,
        "started_at DESC, id",
        page,
        from_row,
    )?;
    let items = views(&db, &items, |_| Audience::Viewer)?;
    Ok(json(200, &Paged::new(items, total, page)))
}

/// A status a caller may ask for: active, completed or error (else 422).
pub fn requested_status(requested: &str) -> Result<Status, ApiError> {
    match requested {
        "active" | "completed" | "error" => Status::parse(requested),
        _ => None,
    }
    .ok_or_else(|| {
        ApiError::invalid_fields(vec![common::problem::FieldError {
            field: "status".into(),
            message: "must be active, completed or error".into(),
        }])
    })
}

/// Applies a status change (the state machine decides) and answers the stored broadcast.
pub fn change_status(db: &Db, b: &Broadcast, to: Status) -> Result<Broadcast, ApiError> {
    match rules::transition(b.status, to)? {
        Transition::Unchanged => Ok(b.clone()),
        Transition::Moved { to, .. } => {
            let now = time::now_rfc3339();
            let (started, ended, heartbeat) = match to {
                Status::Active => (Some(now.clone()), None, Some(time::now())),
                _ => (None, Some(now.clone()), None),
            };
            // The status in the WHERE clause makes concurrent moves safe: only one wins.
            let moved = db.execute(
                "UPDATE broadcasts SET status = ?, started_at = COALESCE(started_at, ?), ended_at = COALESCE(?, ended_at), \
                   last_heartbeat = COALESCE(?, last_heartbeat), updated_at = ? \
                 WHERE id = ? AND status = ? RETURNING id",
                &[
                    db::text(to.as_str()),
                    db::opt_text(started.as_deref()),
                    db::opt_text(ended.as_deref()),
                    heartbeat.map_or(db::null(), db::int),
                    db::text(&now),
                    db::text(&b.id),
                    db::text(b.status.as_str()),
                ],
            )?;
            if moved.rows.is_empty() {
                return Err(ApiError::conflict(
                    "concurrent_update",
                    "the broadcast changed meanwhile; read it and retry",
                ));
            }
            crate::realtime::publish(
                &b.identity.stream_id,
                json!({ "kind": "status", "status": to.as_str(), "broadcastId": b.id }),
            );
            load(db, &b.client_id, &b.id)
        }
    }
}

fn status_field(ctx: &UserCtx) -> Result<Status, ApiError> {
    let mut body = ctx.json()?;
    let status = body.string("status", 20);
    body.finish()?;
    requested_status(&status)
}

/// `POST /api/broadcasts/{id}/status`
pub fn update_status(ctx: &UserCtx) -> Result<Response, ApiError> {
    let requested = status_field(ctx)?;
    let db = Db::open()?;
    let b = load_owned(ctx, &db)?;
    let b = change_status(&db, &b, requested)?;
    Ok(json(200, &view_one(&db, &b, Audience::Owner)?))
}

/// `POST /api/sessions/{id}/heartbeat`: keeps a pending or active broadcast alive.
pub fn heartbeat(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    let now = time::now();
    db.execute(
        "UPDATE broadcasts SET last_heartbeat = ? WHERE id = ?",
        &[db::int(now), db::text(&b.id)],
    )?;
    Ok(json(
        200,
        &json!({ "success": true, "id": b.id, "status": b.status.as_str(), "lastHeartbeat": time::format_rfc3339(now) }),
    ))
}

/// `POST /api/broadcasts/{id}/viewer-count`
pub fn viewer_count(ctx: &UserCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let count = body.opt_int("viewerCount", 0..=MAX_VIEWERS);
    if count.is_none() && !body.has_errors_for(&["viewerCount"]) {
        body.error("viewerCount", "is required");
    }
    body.finish()?;
    let count = count.unwrap_or_default();
    let db = Db::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    db.execute(
        "UPDATE broadcasts SET viewer_count = ?1, peak_viewers = MAX(peak_viewers, ?1), \
           viewer_reports = viewer_reports + 1, viewer_total = viewer_total + ?1 WHERE id = ?2",
        &[db::int(count), db::text(&b.id)],
    )?;
    crate::realtime::publish(
        &b.identity.stream_id,
        json!({ "kind": "viewers", "viewerCount": count }),
    );
    Ok(json(
        200,
        &json!({ "success": true, "id": b.id, "viewerCount": count }),
    ))
}

/// `POST /api/broadcasts/{id}/stream-key/reset`: a new ingest key; the old one stops working.
pub fn reset_stream_key(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let b = load_owned(ctx, &db)?;
    ensure_not_final(&b)?;
    let key = ids::random_hex(16);
    db.execute(
        "UPDATE broadcasts SET stream_key = ?, updated_at = ? WHERE id = ?",
        &[
            db::text(&key),
            db::text(time::now_rfc3339()),
            db::text(&b.id),
        ],
    )?;
    let b = load(&db, &b.client_id, &b.id)?;
    Ok(json(200, &view_one(&db, &b, Audience::Owner)?))
}

/// `GET /api/broadcasts/{id}/analytics`: the owner, co-hosts with canAccessAnalytics, and
/// the tenant's server.
pub fn analytics(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let db = Db::open()?;
    let b = load(&db, &ctx.tenant.client_id, ctx.param("id"))?;
    if let Actor::User(user) = &ctx.actor {
        let allowed = crate::cohosts::permissions_of(&db, &b, &user.id)?
            .is_some_and(|p| p.can_access_analytics);
        if !allowed {
            check_can_watch(&db, &b, Viewer::User(&user.id))?;
            return Err(ApiError::forbidden(
                "only the owner or a co-host with canAccessAnalytics sees analytics",
            ));
        }
    }
    let duration = match (&b.started_at, &b.ended_at) {
        (Some(s), Some(e)) => time::parse_rfc3339(e)
            .zip(time::parse_rfc3339(s))
            .map(|(e, s)| e - s),
        (Some(s), None) => time::parse_rfc3339(s).map(|s| time::now() - s),
        _ => None,
    };
    let average = (b.viewer_reports > 0).then(|| b.viewer_total as f64 / b.viewer_reports as f64);
    let reactions = reaction_counts(&db, &[&b.id])?
        .remove(&b.id)
        .unwrap_or(Value::Null);
    Ok(json(
        200,
        &json!({
            "broadcastId": b.id,
            "status": b.status.as_str(),
            "startedAt": b.started_at,
            "endedAt": b.ended_at,
            "durationSeconds": duration,
            "peakViewers": b.peak_viewers,
            "averageViewers": average,
            "viewerReports": b.viewer_reports,
            "chatMessages": crate::chat::count_for(&db, &b)?,
            "reactions": reactions,
        }),
    ))
}

// ---- The SDK client's view: /api/v1/sessions, authenticated by the API key alone ----

/// `POST /api/v1/sessions`: a broadcast session owned by the client itself.
pub fn v1_create(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let mut body = ctx.json()?;
    let new = parse_new(&mut body);
    body.finish()?;
    let db = Db::open()?;
    let b = insert(&db, &tenant.client_id, None, &new)?;
    Ok(json(200, &view_one(&db, &b, Audience::Owner)?))
}

/// `GET /api/v1/sessions`: every session of the client, newest first.
pub fn v1_list(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    owner_page(ctx, "client_id = ?", &[db::text(&tenant.client_id)])
}

/// `PATCH /api/v1/sessions/{id}`: `status` through the state machine, `metadata` as a JSON
/// merge patch (a null value removes a key).
pub fn v1_patch(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let mut body = ctx.json()?;
    let status = body.opt_string("status", 20);
    let patch_value = body.opt_value("metadata");
    let patch = check_metadata(&mut body, patch_value.clone(), true);
    if status.is_none() && patch_value.is_none() {
        body.error("status", "send status, metadata or both");
    }
    body.finish()?;
    let to = status.as_deref().map(requested_status).transpose()?;
    let db = Db::open()?;
    let mut b = load(&db, &tenant.client_id, ctx.param("id"))?;
    // Check the move before writing anything, so a refused status changes nothing.
    if let Some(to) = to {
        rules::transition(b.status, to)?;
    }
    if patch_value.is_some() {
        let mut merged = b.metadata.as_object().cloned().unwrap_or_default();
        for (key, value) in patch {
            if value.is_null() {
                merged.remove(&key);
            } else {
                merged.insert(key, value);
            }
        }
        if merged.len() > MAX_METADATA_KEYS {
            return Err(ApiError::invalid_fields(vec![
                common::problem::FieldError {
                    field: "metadata".into(),
                    message: format!("may have at most {MAX_METADATA_KEYS} keys"),
                },
            ]));
        }
        db.execute(
            "UPDATE broadcasts SET metadata = ?, updated_at = ? WHERE id = ?",
            &[
                db::text(Value::Object(merged).to_string()),
                db::text(time::now_rfc3339()),
                db::text(&b.id),
            ],
        )?;
        b = load(&db, &tenant.client_id, &b.id)?;
    }
    if let Some(to) = to {
        b = change_status(&db, &b, to)?;
    }
    Ok(json(200, &view_one(&db, &b, Audience::Owner)?))
}

/// Reactions one user may send per window to one broadcast.
const REACTIONS_PER_WINDOW: i64 = 20;
const REACTION_WINDOW_SECS: i64 = 10;

/// `POST /api/v1/sessions/{id}/reactions`: `{"reaction": "heart"}`; counted per session.
/// The tenant's server, or a user who may watch the broadcast (rate limited per user).
pub fn react(ctx: &ActorCtx) -> Result<Response, ApiError> {
    let tenant = &ctx.tenant;
    let mut body = ctx.json()?;
    let reaction = body.string("reaction", 20);
    if !reaction.is_empty() && !rules::REACTIONS.contains(&reaction.as_str()) {
        body.error(
            "reaction",
            "must be one of heart, sparkle, thumbs_up, surprised",
        );
    }
    body.finish()?;
    let db = Db::open()?;
    let b = load(&db, &tenant.client_id, ctx.param("id"))?;
    check_can_watch(&db, &b, Viewer::of_actor(&ctx.actor))?;
    ensure_not_final(&b)?;
    if let Actor::User(user) = &ctx.actor {
        rate_limit::hit(
            &db,
            &format!("react:{}:{}:{}", tenant.client_id, b.id, user.id),
            REACTIONS_PER_WINDOW,
            REACTION_WINDOW_SECS,
            time::now(),
        )?;
    }
    let count = db.count(
        "INSERT INTO broadcast_reactions (client_id, broadcast_id, kind, count) VALUES (?, ?, ?, 1) \
         ON CONFLICT (broadcast_id, kind) DO UPDATE SET count = count + 1 RETURNING count",
        &[db::text(&tenant.client_id), db::text(&b.id), db::text(&reaction)],
    )?;
    crate::realtime::publish(
        &b.identity.stream_id,
        json!({ "kind": "reaction", "reaction": reaction, "count": count }),
    );
    Ok(json(
        200,
        &json!({ "success": true, "sessionId": b.id, "reaction": reaction, "count": count }),
    ))
}
