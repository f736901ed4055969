//! Scheduled events: a stream announced for a time, with its identity (streamId, key,
//! shortId) generated as a broadcast's is, an SFU room name, and optionally a media file
//! the egress player plays into the room.

use crate::ApiRoute;
use crate::links::{IngestCredentials, Links, StreamAddresses};
use domain::broadcast::Visibility;
use domain::pagination::{Page, Paged};
use domain::request_body;
use domain::validate::body::{NameList, OptChoice, OptText, Text};
use domain::validate::{self, JsonBody};
use domain::{ApiError, ids, time};
use edge::answers::Deleted;
use edge::endpoint;
use edge::spin::endpoint::{self, Json, NoBody};
use edge::spin::http::UserCtx;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use store::Db;
use store::app::access::{Viewer, Watched, may_watch};
use store::events::{self as stored, Event, NewEvent, Playback};

const MAX_TITLE: usize = 200;
const MAX_DESCRIPTION: usize = 2000;
const MAX_URL: usize = 2048;

/// A scheduled event as the API answers it; the owner also gets its ingest credentials.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ScheduledEvent")]
pub struct EventView {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub title: String,
    pub description: Option<String>,
    pub visibility: Visibility,
    #[schemars(extend("format" = "date-time"))]
    pub scheduled_for: String,
    #[schemars(extend("format" = "uuid"))]
    pub owner_id: String,
    /// Its SFU room.
    pub room_name: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// The media file the egress player plays into the room, if any.
    pub playback_file: Option<PlaybackFile>,
    /// The page that plays it (what LiveKit egress opens).
    pub egress_player_url: Option<String>,
    #[serde(flatten)]
    pub addresses: StreamAddresses,
    #[serde(flatten)]
    pub credentials: Option<IngestCredentials>,
}

/// A scheduled event's media file.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(inline)]
pub struct PlaybackFile {
    pub url: String,
    #[serde(rename = "type")]
    #[schemars(schema_with = "playback_type_schema")]
    pub kind: String,
}

fn playback_type_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "enum": PlaybackTypes::NAMES })
}

/// The event as the API answers it at `now`; the owner also sees the ingest addresses.
fn view(event: &Event, links: &Links, owner: bool, now: i64) -> EventView {
    EventView {
        id: event.id.clone(),
        title: event.title.clone(),
        description: event.description.clone(),
        visibility: event.visibility,
        scheduled_for: time::format_rfc3339(event.scheduled_for),
        owner_id: event.owner_id.clone(),
        room_name: event.room_name.clone(),
        created_at: event.created_at.clone(),
        playback_file: event.playback.as_ref().map(|p| PlaybackFile {
            url: p.url.clone(),
            kind: p.kind.clone(),
        }),
        egress_player_url: event.playback.as_ref().map(|p| {
            format!(
                "{}/egress-player?file={}&type={}",
                links.base_url(),
                validate::percent_encode(&p.url),
                p.kind
            )
        }),
        addresses: links.stream_addresses(&event.identity, event.visibility, now),
        credentials: owner.then(|| links.ingest_credentials(&event.identity)),
    }
}

request_body! {
    /// What schedules an event: `POST /api/events`.
    pub struct NewEventBody as "NewEvent" checked by NewEventBody::check {
        "title" title: Text<MAX_TITLE>,
        "description" description: OptText<MAX_DESCRIPTION>,
        "visibility" visibility: OptChoice<Visibility>,
        "scheduledFor" scheduled_for: Text<64>,
        "playbackUrl" playback_url: OptText<MAX_URL>,
        "playbackType" playback_type: OptChoice<PlaybackTypes>,
    }
}

/// `playbackType`: what the file holds.
pub struct PlaybackTypes;

impl NameList for PlaybackTypes {
    const NAMES: &'static [&'static str] = &["audio", "video"];
    const MAX_LEN: usize = 10;
}

impl NewEventBody {
    /// The rules between fields, once every field is read; now is the past's end.
    fn check(&self, body: &mut JsonBody) {
        let now = body.now();
        self.check_at(body, now);
    }

    /// The rules between fields; `now` decides what counts as the past.
    fn check_at(&self, body: &mut JsonBody, now: i64) {
        let when = &self.scheduled_for;
        match time::parse_rfc3339(when) {
            Some(t) if t > now => {}
            Some(_) => body.error("scheduledFor", "must be in the future"),
            None if when.is_empty() => {} // already reported as missing
            None => body.error("scheduledFor", "must be an RFC 3339 timestamp"),
        }
        if let Some(u) = &self.playback_url
            && !validate::is_http_url(u)
        {
            body.error("playbackUrl", "must be an absolute http(s) URL");
        }
        if self.playback_url.is_none() && body.has("playbackType") {
            body.error("playbackType", "needs a playbackUrl");
        }
    }

    /// The event the (checked) fields schedule.
    fn into_new(self) -> NewEvent {
        let kind = self.playback_type.unwrap_or_else(|| "video".to_string());
        NewEvent {
            title: self.title,
            description: self.description,
            visibility: self.visibility.unwrap_or_default(),
            scheduled_for: time::parse_rfc3339(&self.scheduled_for).unwrap_or(0),
            playback: self.playback_url.map(|url| Playback { url, kind }),
        }
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

/// The scheduled event routes.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/events",
        User(create),
        "Create (events)",
        |op| op
            .request_example(json!({
                "title": "Launch",
                "scheduledFor": "2030-01-01T18:00:00Z",
            }))
            .link("GET /api/events/{id}", &[("id", "$response.body#/id")])
            .link("DELETE /api/events/{id}", &[("id", "$response.body#/id")])
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/events",
        User(list),
        "List (events)",
        |op| op
            .link(
                "GET /api/events/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_id", "invalid_query"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/events/{id}",
        User(get),
        "Get (events)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/events/{id}",
        User(delete),
        "Delete (events)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
];

/// Schedules an event of the user's.
fn create(ctx: &UserCtx, new: NewEventBody) -> Result<Json<EventView>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let new = new.into_new();
    let db = ctx.db()?;
    let event = stored::insert(&db, &tenant.client_id, &user.id, &new, ctx.now())?;
    Ok(Json(view(&event, &Links::load(), true, ctx.now())))
}

/// One the user may see.
fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<EventView>, ApiError> {
    let db = ctx.db()?;
    let event = load_visible(ctx, &db)?;
    let owner = event.is_owned_by(&ctx.user.id);
    Ok(Json(view(&event, &Links::load(), owner, ctx.now())))
}

/// The tenant's events the user may see (their own and public ones), soonest first;
/// `?upcoming=true` leaves out those whose time has passed.
fn list(ctx: &UserCtx, _: NoBody) -> Result<endpoint::Page<EventView>, ApiError> {
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
    Ok(endpoint::Page(Paged::new(items, total, page)))
}

/// The owner's only.
fn delete(ctx: &UserCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let event = load_visible(ctx, &db)?;
    if !event.is_owned_by(&ctx.user.id) {
        return Err(ApiError::forbidden("only the event's owner may delete it"));
    }
    stored::delete(&db, &event)?;
    Ok(Json(Deleted::of(event.id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::validate::body::RequestBody;

    /// The event as the dispatcher reads it (the fields, their rules, `finish`), at a fixed
    /// now.
    fn parse(body: &str) -> Result<NewEvent, ApiError> {
        let mut body = JsonBody::parse(body.as_bytes())?;
        let new = NewEventBody::read(&mut body);
        new.check_at(&mut body, 1_800_000_000);
        body.finish().map(|()| new.into_new())
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
