//! Restream targets (simulcast): up to five RTMP(S) destinations a broadcast is pushed to
//! while it is live, besides its own HLS. The owner or the tenant's server manages them;
//! the destination is sealed at rest and never answered whole (the server URL, and the
//! key's last characters). The media server reports each target's state.

use crate::access;
use common::domain::media::{self, MAX_RESTREAM_TARGETS, RestreamState};
use common::sealed::{Purpose, SealingKey};
use common::spin::config;
use common::spin::http::{ActorCtx, Reply, json};
use common::store::restreams::{self as store, Target};
use common::{ApiError, ids, time};
use serde_json::{Value, json};

/// The key that seals restream destinations (the media server's answers open them).
pub fn sealing_key() -> Result<SealingKey, ApiError> {
    SealingKey::derive(
        &config::required("platform_key")?,
        Purpose::RestreamDestination,
        "platform_key",
    )
}

fn view(t: &Target) -> Value {
    json!({
        "id": t.id,
        "name": t.name,
        "url": t.display_url,
        "keyHint": t.key_hint,
        "state": t.state.as_str(),
        "error": t.error,
        "createdAt": time::format_rfc3339(t.created_at),
        "updatedAt": time::format_rfc3339(t.updated_at),
    })
}

/// `GET /api/broadcasts/{id}/restreams`
pub fn list(ctx: &ActorCtx) -> Reply {
    let db = ctx.db()?;
    let b = access::load_for_owner_or_server(ctx, &db, "sees its restream targets")?;
    let items: Vec<Value> = store::of_broadcast(&db, &b)?.iter().map(view).collect();
    Ok(json(200, &json!({ "items": items, "total": items.len() })))
}

/// `POST /api/broadcasts/{id}/restreams`: `url` (rtmp:// or rtmps://), `streamKey`, and an
/// optional `name`. At most five per broadcast; a target added while the broadcast is live
/// starts at the media server's next update.
pub fn create(ctx: &ActorCtx) -> Reply {
    let mut body = ctx.json()?;
    let url = body.string("url", media::MAX_RESTREAM_URL);
    let key = body.string("streamKey", media::MAX_RESTREAM_KEY);
    let name = body.opt_string("name", 100);
    if !url.is_empty()
        && let Err(why) = media::check_restream_url(&url, config::flag("restream_allow_private"))
    {
        body.error("url", why);
    }
    if !key.is_empty()
        && let Err(why) = media::check_restream_key(&key)
    {
        body.error("streamKey", why);
    }
    body.finish()?;
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
        name,
        display_url: url.trim_end_matches('/').to_string(),
        sealed_destination: sealing.seal(&media::restream_destination(&url, &key), &id)?,
        key_hint: media::key_hint(&key),
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
    Ok(json(201, &view(&target)))
}

/// `DELETE /api/broadcasts/{id}/restreams/{targetId}`: the media server stops pushing to it
/// at its next update.
pub fn delete(ctx: &ActorCtx) -> Reply {
    let db = ctx.db()?;
    let b = access::load_for_owner_or_server(ctx, &db, "removes restream targets")?;
    let id = ids::parse_uuid(ctx.param("targetId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the target id must be a UUID"))?;
    if !store::delete(&db, &b, &id)? {
        return Err(ApiError::not_found("restream target"));
    }
    Ok(json(200, &json!({ "success": true, "id": id })))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<common::contract::Operation> {
    use common::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("GET /api/broadcasts/{id}/restreams", "List (restreams)")
            .answers(200, "OK", Schema::written(json!({
                "type": "object",
                "required": ["items", "total"],
                "properties": {
                    "items": {
                        "type": "array",
                        "items": { "$ref": "#/components/schemas/RestreamTarget" },
                    },
                    "total": { "type": "integer", "minimum": 0 },
                },
            })))
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
        Operation::new("POST /api/broadcasts/{id}/restreams", "Add (restreams)")
            .takes(Schema::written(json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["url", "streamKey"],
                "properties": {
                    "url": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 1024,
                        "pattern": "^rtmps?://",
                        "description": "rtmp:// or rtmps:// server URL of a public host, without credentials or query",
                    },
                    "streamKey": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 512,
                        "pattern": "^\\S+$",
                    },
                    "name": { "type": ["string", "null"] },
                },
            })))
            .request_example(json!({
                "url": "rtmp://a.rtmp.youtube.com/live2",
                "streamKey": "abcd-efgh-ijkl-mnop",
                "name": "YouTube",
            }))
            .answers(201, "Created", Schema::written(json!({
                "$ref": "#/components/schemas/RestreamTarget",
            })))
            .link("DELETE /api/broadcasts/{id}/restreams/{targetId}", &[("id", "$request.path.id"), ("targetId", "$response.body#/id")])
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_ended", "too_many_restreams"]),
        Operation::new("DELETE /api/broadcasts/{id}/restreams/{targetId}", "Remove (restreams)")
            .answers(200, "OK", Schema::written(json!({
                "type": "object",
                "required": ["success", "id"],
                "properties": {
                    "success": { "const": true },
                    "id": { "type": "string", "format": "uuid" },
                },
            })))
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ]
}
