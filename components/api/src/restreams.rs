//! Restream targets (simulcast): up to five RTMP(S) destinations a broadcast is pushed to
//! while it is live, besides its own HLS. The owner or the tenant's server manages them;
//! the destination is sealed at rest and never answered whole (the server URL, and the
//! key's last characters). The media server reports each target's state.

use crate::ApiRoute;
use crate::access;
use common::answers::Deleted;
use common::domain::media::{self, MAX_RESTREAM_TARGETS, RestreamState};
use common::request_body;
use common::sealed::{Purpose, SealingKey};
use common::spin::config;
use common::endpoint;
use common::spin::endpoint::{Created, Json, NoBody};
use common::spin::http::ActorCtx;
use common::store::restreams::{self as store, Target};
use common::validate::JsonBody;
use common::validate::body::{FieldKind, OptText};
use common::{ApiError, ids, time};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

/// The key that seals restream destinations (the media server's answers open them).
pub fn sealing_key() -> Result<SealingKey, ApiError> {
    SealingKey::derive(
        &config::required("platform_key")?,
        Purpose::RestreamDestination,
        "platform_key",
    )
}

/// A restream target as its owner sees it: where it goes, never its key.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "RestreamTarget")]
pub struct TargetView {
    #[schemars(extend("format" = "uuid"))]
    id: String,
    name: Option<String>,
    /// The server URL (the key is never answered).
    url: String,
    /// The key's last four characters.
    key_hint: String,
    state: RestreamState,
    /// Why the last attempt failed.
    error: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
    #[schemars(extend("format" = "date-time"))]
    updated_at: String,
}

fn view(t: &Target) -> TargetView {
    TargetView {
        id: t.id.clone(),
        name: t.name.clone(),
        url: t.display_url.clone(),
        key_hint: t.key_hint.clone(),
        state: t.state,
        error: t.error.clone(),
        created_at: time::format_rfc3339(t.created_at),
        updated_at: time::format_rfc3339(t.updated_at),
    }
}

/// A broadcast's restream targets, oldest first.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "RestreamTargetList")]
pub struct TargetList {
    items: Vec<TargetView>,
    #[schemars(range(min = 0))]
    total: i64,
}

request_body! {
    /// A restream target to add.
    pub struct NewTargetBody as "NewRestreamTarget" checked by NewTargetBody::check {
        "url" url: ServerUrl,
        "streamKey" stream_key: StreamKey,
        "name" name: OptText<100>,
    }
}

impl NewTargetBody {
    /// Checks the server URL and the key by the restream rules (once every field is read).
    fn check(&self, body: &mut JsonBody) {
        if !self.url.is_empty()
            && let Err(why) =
                media::check_restream_url(&self.url, config::flag("restream_allow_private"))
        {
            body.error("url", why);
        }
        if !self.stream_key.is_empty()
            && let Err(why) = media::check_restream_key(&self.stream_key)
        {
            body.error("streamKey", why);
        }
    }
}

/// A restream server URL, required; the restream rules check it once the body is read.
pub struct ServerUrl;

impl FieldKind for ServerUrl {
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        body.string(name, media::MAX_RESTREAM_URL)
    }

    fn schema() -> Value {
        json!({
            "type": "string",
            "minLength": 1,
            "maxLength": media::MAX_RESTREAM_URL,
            "pattern": "^rtmps?://",
            "description": "rtmp:// or rtmps:// server URL of a public host, without \
                credentials or query",
        })
    }
}

/// A restream stream key, required; the restream rules check it once the body is read.
pub struct StreamKey;

impl FieldKind for StreamKey {
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        body.string(name, media::MAX_RESTREAM_KEY)
    }

    fn schema() -> Value {
        json!({
            "type": "string",
            "minLength": 1,
            "maxLength": media::MAX_RESTREAM_KEY,
            "pattern": "^\\S+$",
        })
    }
}

/// The restream routes: the owner or the tenant's server manages a broadcast's targets.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/broadcasts/{id}/restreams",
        UserOrServer(list),
        "List (restreams)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/restreams",
        UserOrServer(create),
        "Add (restreams)",
        |op| op
            .request_example(json!({
                "url": "rtmp://a.rtmp.youtube.com/live2",
                "streamKey": "abcd-efgh-ijkl-mnop",
                "name": "YouTube",
            }))
            .link(
                "DELETE /api/broadcasts/{id}/restreams/{targetId}",
                &[
                    ("id", "$request.path.id"),
                    ("targetId", "$response.body#/id"),
                ],
            )
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended", "too_many_restreams"]),
    ),
    endpoint!(
        DELETE "/api/broadcasts/{id}/restreams/{targetId}",
        UserOrServer(delete),
        "Remove (restreams)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
];

/// A broadcast's targets, oldest first.
fn list(ctx: &ActorCtx, _: NoBody) -> Result<Json<TargetList>, ApiError> {
    let db = ctx.db()?;
    let b = access::load_for_owner_or_server(ctx, &db, "sees its restream targets")?;
    let items: Vec<TargetView> = store::of_broadcast(&db, &b)?.iter().map(view).collect();
    let total = items.len() as i64;
    Ok(Json(TargetList { items, total }))
}

/// `url` (rtmp:// or rtmps://), `streamKey`, and an optional `name`. At most five per
/// broadcast; a target added while the broadcast is live starts at the media server's next
/// update.
fn create(ctx: &ActorCtx, new: NewTargetBody) -> Result<Created<TargetView>, ApiError> {
    let sealing = sealing_key()?;
    let db = ctx.db()?;
    let b = access::load_for_owner_or_server(ctx, &db, "adds restream targets")?;
    access::ensure_not_final(&b)?;
    let id = ids::uuid();
    let now = ctx.now();
    let target = Target {
        id: id.clone(),
        client_id: b.client_id.clone(),
        broadcast_id: b.id.clone(),
        name: new.name,
        display_url: new.url.trim_end_matches('/').to_string(),
        sealed_destination: sealing
            .seal(&media::restream_destination(&new.url, &new.stream_key), &id)?,
        key_hint: media::key_hint(&new.stream_key),
        state: RestreamState::Idle,
        error: None,
        created_at: now,
        updated_at: now,
    };
    if !store::insert_capped(&db, &b, &target, ctx.now_millis())? {
        return Err(ApiError::conflict(
            "too_many_restreams",
            format!("a broadcast may have at most {MAX_RESTREAM_TARGETS} restream targets"),
        ));
    }
    Ok(Created(view(&target)))
}

/// The media server stops pushing to it at its next update.
fn delete(ctx: &ActorCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let b = access::load_for_owner_or_server(ctx, &db, "removes restream targets")?;
    let id = ids::parse_uuid(ctx.param("targetId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the target id must be a UUID"))?;
    if !store::delete(&db, &b, &id)? {
        return Err(ApiError::not_found("restream target"));
    }
    Ok(Json(Deleted::of(id)))
}
