//! Scheduled events: a stream announced for a time, with its identity (streamId, key,
//! shortId) generated as a broadcast's is, an SFU room name, and optionally a media file
//! the egress player plays into the room.

use crate::links::Links;
use common::app::access::{Viewer, Watched, may_watch};
use common::pagination::{Page, Paged};
use common::spin::http::{UserCtx, json};
use common::store::Db;
use common::store::events::{self as stored, Event, NewEvent, Playback};
use common::validate::{self, JsonBody};
use common::{ApiError, ids, time};
use serde_json::{Value, json};
use spin_sdk::http::Response;

const MAX_TITLE: usize = 200;
const MAX_DESCRIPTION: usize = 2000;
const MAX_URL: usize = 2048;

/// The event as the API answers it at `now`; the owner also sees the ingest addresses.
fn view(event: &Event, links: &Links, owner: bool, now: i64) -> Value {
    let mut view = json!({
        "id": event.id,
        "title": event.title,
        "description": event.description,
        "visibility": event.visibility,
        "scheduledFor": time::format_rfc3339(event.scheduled_for),
        "ownerId": event.owner_id,
        "roomName": event.room_name,
        "createdAt": event.created_at,
        "playbackFile": null,
        "egressPlayerUrl": null,
    });
    if let Some(p) = &event.playback {
        view["playbackFile"] = json!({ "url": p.url, "type": p.kind });
        view["egressPlayerUrl"] = format!(
            "{}/egress-player?file={}&type={}",
            links.base_url(),
            validate::percent_encode(&p.url),
            p.kind
        )
        .into();
    }
    links.add_stream_addresses(&mut view, &event.identity, event.visibility, owner, now);
    view
}

/// Reads and checks a creation request; `now` decides what counts as the past.
pub fn parse_new(body: &mut JsonBody, now: i64) -> NewEvent {
    let title = body.string("title", MAX_TITLE);
    let description = body.opt_string("description", MAX_DESCRIPTION);
    let visibility = crate::broadcasts::visibility(body);
    let when = body.string("scheduledFor", 64);
    let scheduled_for = match time::parse_rfc3339(&when) {
        Some(t) if t > now => t,
        Some(_) => {
            body.error("scheduledFor", "must be in the future");
            0
        }
        None if when.is_empty() => 0, // already reported as missing
        None => {
            body.error("scheduledFor", "must be an RFC 3339 timestamp");
            0
        }
    };
    let url = body.opt_string("playbackUrl", MAX_URL);
    let kind = body.opt_string("playbackType", 10);
    if let Some(u) = &url
        && !validate::is_http_url(u)
    {
        body.error("playbackUrl", "must be an absolute http(s) URL");
    }
    let kind = match kind.as_deref() {
        None => "video".to_string(),
        Some(k @ ("audio" | "video")) => k.to_string(),
        Some(_) => {
            body.error("playbackType", "must be audio or video");
            String::new()
        }
    };
    if url.is_none() && body.has("playbackType") {
        body.error("playbackType", "needs a playbackUrl");
    }
    NewEvent {
        title,
        description,
        visibility,
        scheduled_for,
        playback: url.map(|url| Playback { url, kind }),
    }
}

fn load(db: &Db, client_id: &str, raw_id: &str) -> Result<Event, ApiError> {
    let id = ids::parse_uuid(raw_id)
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the event id must be a UUID"))?;
    stored::load(db, client_id, &id)?.ok_or_else(|| ApiError::not_found("event"))
}

/// Loads an event the user may watch ([`may_watch`]); one they may not is unknown (404).
fn load_visible(ctx: &UserCtx, db: &Db) -> Result<Event, ApiError> {
    let event = load(db, &ctx.tenant.client_id, ctx.param("id"))?;
    let watched = Watched::event(&event.client_id, &event.owner_id, event.visibility);
    if !may_watch(db, watched, Viewer::User(&ctx.user.id), ctx.now())? {
        return Err(ApiError::not_found("event"));
    }
    Ok(event)
}

/// `POST /api/events`
pub fn create(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let mut body = ctx.json()?;
    let new = parse_new(&mut body, ctx.now());
    body.finish()?;
    let db = ctx.db()?;
    let event = stored::insert(&db, &tenant.client_id, &user.id, &new, ctx.now())?;
    Ok(json(200, &view(&event, &Links::load(), true, ctx.now())))
}

/// `GET /api/events/{id}`
pub fn get(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let event = load_visible(ctx, &db)?;
    let owner = event.is_owned_by(&ctx.user.id);
    Ok(json(200, &view(&event, &Links::load(), owner, ctx.now())))
}

/// `GET /api/events`: the tenant's events the user may see (their own and public ones),
/// soonest first; `?upcoming=true` leaves out those whose time has passed.
pub fn list(ctx: &UserCtx) -> Result<Response, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let page = Page::from_query(ctx.query())?;
    let since = match ctx.query_value("upcoming").as_deref() {
        None | Some("false") => i64::MIN,
        Some("true") => ctx.now(),
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                "upcoming must be true or false",
            ));
        }
    };
    let db = ctx.db()?;
    let links = Links::load();
    let (events, total) = stored::page_visible_to(&db, &tenant.client_id, &user.id, since, page)?;
    let items = events
        .iter()
        .map(|e| view(e, &links, e.is_owned_by(&user.id), ctx.now()))
        .collect();
    Ok(json(200, &Paged::new(items, total, page)))
}

/// `DELETE /api/events/{id}` (owner only).
pub fn delete(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let event = load_visible(ctx, &db)?;
    if !event.is_owned_by(&ctx.user.id) {
        return Err(ApiError::forbidden("only the event's owner may delete it"));
    }
    stored::delete(&db, &event)?;
    Ok(json(200, &json!({ "success": true, "id": event.id })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::domain::broadcast::Visibility;

    fn parse(body: &str) -> Result<NewEvent, ApiError> {
        let mut body = JsonBody::parse(body.as_bytes())?;
        let new = parse_new(&mut body, 1_800_000_000);
        body.finish().map(|()| new)
    }

    #[test]
    fn a_valid_event() {
        let new = parse(
            r#"{"title":"Launch","scheduledFor":"2030-01-01T10:00:00Z","playbackUrl":"https://cdn.example/intro.mp3","playbackType":"audio"}"#,
        )
        .unwrap();
        assert_eq!(new.title, "Launch");
        assert_eq!(new.visibility, Visibility::Public);
        assert_eq!(new.scheduled_for, 1_893_492_000);
        let playback = new.playback.unwrap();
        assert_eq!(
            (playback.url.as_str(), playback.kind.as_str()),
            ("https://cdn.example/intro.mp3", "audio")
        );
    }

    #[test]
    fn bad_events_name_each_field() {
        let err = parse(
            r#"{"scheduledFor":"2020-01-01T00:00:00Z","playbackUrl":"javascript:alert(1)","playbackType":"gif","visibility":"secret"}"#,
        )
        .err()
        .unwrap();
        assert_eq!(err.status, 422);
        let fields: Vec<&str> = err.fields.iter().map(|f| f.field.as_str()).collect();
        for field in [
            "title",
            "scheduledFor",
            "playbackUrl",
            "playbackType",
            "visibility",
        ] {
            assert!(fields.contains(&field), "{field} missing from {fields:?}");
        }
        let err = parse(r#"{"title":"x","scheduledFor":"tomorrow"}"#)
            .err()
            .unwrap();
        assert_eq!(err.fields[0].message, "must be an RFC 3339 timestamp");
        let err =
            parse(r#"{"title":"x","scheduledFor":"2030-01-01T00:00:00Z","playbackType":"audio"}"#)
                .err()
                .unwrap();
        assert_eq!(err.fields[0].field, "playbackType");
    }
}
