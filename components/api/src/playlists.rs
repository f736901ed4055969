//! Playlists: a user's named, ordered lists of tracks (an uploaded file or an external
//! URL each), with a poster image stored as a public file. Only the owner changes one.

use crate::files::{self, NewFile};
use crate::links::Links;
use crate::media;
use crate::{ApiRoute, Upload};
use domain::pagination::{self, Paged};
use domain::problem::FieldError;
use domain::request_body;
use domain::validate::body::{
    ClearableText, FieldKind, NameList, OptChoice, OptInt, OptNonEmptyText, OptText, RequestBody,
    Text,
};
use domain::validate::{self, JsonBody};
use domain::{ApiError, ids};
use edge::answers::Deleted;
use edge::contract::Schema;
use edge::documented_route;
use edge::endpoint;
use edge::spin::endpoint::{Created, Json, NoBody, Page};
use edge::spin::http::{Handler, UserCtx, json};
use edge::spin::incoming::{self, Source};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use spin_sdk::http::Response;
use std::collections::HashSet;
use store::Db;
use store::playlists::{self as stored, Appended, Fields, NewTrack, Playlist, Track};

/// The largest poster image.
pub const MAX_POSTER: u64 = 5 * 1024 * 1024;
/// Tracks one request may add.
pub const MAX_TRACKS_PER_REQUEST: usize = 100;
/// Tracks one playlist may hold.
pub const MAX_TRACKS: i64 = 1000;
const MAX_DESCRIPTION: usize = 2000;
const MAX_URL: usize = 2048;

/// Who sees a playlist.
pub struct PlaylistVisibilities;

impl NameList for PlaylistVisibilities {
    const NAMES: &'static [&'static str] = &["public", "unlisted", "private"];
}

request_body! {
    /// A new playlist: public unless its visibility says otherwise.
    pub struct NewPlaylistBody as "NewPlaylist" {
        "name" name: Text<{ validate::MAX_NAME }>,
        "description" description: OptText<MAX_DESCRIPTION>,
        "visibility" visibility: OptChoice<PlaylistVisibilities>,
    }
}

request_body! {
    /// Changes to a playlist: what is left out stays as it is.
    pub struct PlaylistChangesBody as "PlaylistChanges" {
        "name" name: OptNonEmptyText<{ validate::MAX_NAME }>,
        "description" description: ClearableText<MAX_DESCRIPTION>,
        "visibility" visibility: OptChoice<PlaylistVisibilities>,
    }
}

request_body! {
    /// A track to append: a file (`fileId`) or an http(s) URL (`url`), exactly one.
    pub struct NewTrackBody as "NewTrack" {
        "title" title: Text<{ validate::MAX_NAME }>,
        "artist" artist: OptText<{ validate::MAX_NAME }>,
        "durationSeconds" duration_seconds: OptInt<0, 86_400>,
        "fileId" file_id: OptText<64>,
        "url" url: OptText<MAX_URL>,
    }
}

/// A track's schema: its fields, and the rules [`parse_track`] checks once they are read.
fn track_schema() -> Value {
    let mut schema = NewTrackBody::schema();
    schema["properties"]["fileId"]["format"] = "uuid".into();
    schema["properties"]["url"]["pattern"] = "^[hH][tT][tT][pP][sS]?://".into();
    schema["oneOf"] = json!([
        {
            "required": ["fileId"],
            "properties": { "fileId": { "type": "string" }, "url": { "type": "null" } },
        },
        {
            "required": ["url"],
            "properties": { "url": { "type": "string" }, "fileId": { "type": "null" } },
        },
    ]);
    schema["description"] = "A track: a file of yours or a public one (fileId), or an http(s) \
                             URL; exactly one of the two"
        .into();
    schema
}

/// The tracks to append, in order: read as sent, then each read as a track by
/// [`add_tracks`] once the body is known to hold nothing else.
pub struct TrackList;

impl FieldKind for TrackList {
    type Value = Option<Value>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Value> {
        body.opt_value(name)
    }

    fn schema() -> Value {
        json!({
            "type": "array",
            "items": track_schema(),
            "minItems": 1,
            "maxItems": MAX_TRACKS_PER_REQUEST,
        })
    }
}

request_body! {
    /// Tracks to append to a playlist.
    pub struct NewTracksBody as "NewTracks" {
        "tracks" tracks: TrackList,
    }
}

/// A playlist's track ids in a new order: read as sent, then checked by [`reorder`] once
/// the body is known to hold nothing else.
pub struct TrackIdList;

impl FieldKind for TrackIdList {
    type Value = Option<Value>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Value> {
        body.opt_value(name)
    }

    fn schema() -> Value {
        json!({ "type": "array", "items": { "type": "string", "format": "uuid" } })
    }
}

request_body! {
    /// A playlist's new order.
    pub struct TrackOrderBody as "TrackOrder" {
        /// Every track id of the playlist, each once, in the new order.
        "trackIds" track_ids: TrackIdList,
    }
}

/// A playlist (in lists, without its tracks).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Playlist")]
pub struct PlaylistView {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    #[schemars(schema_with = "visibility_schema")]
    pub visibility: String,
    #[schemars(extend("format" = "uuid"))]
    pub owner_id: String,
    /// The poster image's file, if it has one.
    #[schemars(extend("format" = "uuid"))]
    pub poster_file_id: Option<String>,
    /// The poster image's public address.
    pub poster_url: Option<String>,
    #[schemars(range(min = 0))]
    pub track_count: i64,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
}

fn visibility_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "enum": PlaylistVisibilities::NAMES })
}

/// A playlist with its tracks in order.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "PlaylistWithTracks")]
pub struct FullPlaylist {
    #[serde(flatten)]
    pub playlist: PlaylistView,
    pub tracks: Vec<TrackView>,
}

/// A track of a playlist.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "PlaylistTrack")]
pub struct TrackView {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub position: i64,
    pub title: String,
    pub artist: Option<String>,
    pub duration_seconds: Option<i64>,
    /// The track's file, when it is one.
    #[schemars(extend("format" = "uuid"))]
    pub file_id: Option<String>,
    /// Where it plays: its URL, or its file's public address.
    pub url: Option<String>,
}

fn view(playlist: &Playlist, links: &Links, track_count: i64) -> PlaylistView {
    PlaylistView {
        id: playlist.id.clone(),
        name: playlist.name.clone(),
        description: playlist.description.clone(),
        visibility: playlist.visibility.clone(),
        owner_id: playlist.owner_id.clone(),
        poster_file_id: playlist.poster_file_id.clone(),
        poster_url: playlist
            .poster_file_id
            .as_ref()
            .map(|f| files::public_url(links, f)),
        track_count,
        created_at: playlist.created_at.clone(),
        updated_at: playlist.updated_at.clone(),
    }
}

fn track_view(track: &Track, links: &Links) -> TrackView {
    let url = track
        .url
        .clone()
        .or_else(|| track.file_id.as_ref().map(|f| files::public_url(links, f)));
    TrackView {
        id: track.id.clone(),
        position: track.position,
        title: track.title.clone(),
        artist: track.artist.clone(),
        duration_seconds: track.duration_seconds,
        file_id: track.file_id.clone(),
        url,
    }
}

/// Checks a requested order against the current tracks: the complete set, each once.
pub fn check_order(current: &[String], requested: &[String]) -> Result<(), String> {
    let known: HashSet<&str> = current.iter().map(String::as_str).collect();
    let mut seen = HashSet::new();
    for id in requested {
        if !known.contains(id.as_str()) {
            return Err(format!("{id} is not a track of this playlist"));
        }
        if !seen.insert(id.as_str()) {
            return Err(format!("{id} appears more than once"));
        }
    }
    if requested.len() != current.len() {
        return Err(format!(
            "the new order must list all {} tracks; {} were sent",
            current.len(),
            requested.len()
        ));
    }
    Ok(())
}

fn bad_id(what: &str) -> ApiError {
    ApiError::bad_request("invalid_id", format!("the {what} id must be a UUID"))
}

fn load(db: &Db, client_id: &str, raw_id: &str) -> Result<Playlist, ApiError> {
    let id = ids::parse_uuid(raw_id).ok_or_else(|| bad_id("playlist"))?;
    stored::load(db, client_id, &id)?.ok_or_else(|| ApiError::not_found("playlist"))
}

/// A playlist the user may see: their own, or another's that is not private.
fn load_visible(ctx: &UserCtx, db: &Db) -> Result<Playlist, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let playlist = load(db, &tenant.client_id, ctx.param("id"))?;
    if playlist.owner_id != user.id && playlist.visibility == "private" {
        return Err(ApiError::not_found("playlist"));
    }
    Ok(playlist)
}

/// A playlist the user owns: others' visible ones are 403, private ones 404.
fn load_owned(ctx: &UserCtx, db: &Db) -> Result<Playlist, ApiError> {
    let playlist = load_visible(ctx, db)?;
    if playlist.owner_id != ctx.user.id {
        return Err(ApiError::forbidden(
            "only the playlist's owner may change it",
        ));
    }
    Ok(playlist)
}

/// The playlist as the API answers it, with its tracks in order.
fn full_view(db: &Db, playlist: &Playlist) -> Result<FullPlaylist, ApiError> {
    let links = Links::load();
    let tracks: Vec<TrackView> = stored::tracks(db, playlist)?
        .iter()
        .map(|t| track_view(t, &links))
        .collect();
    Ok(FullPlaylist {
        playlist: view(playlist, &links, tracks.len() as i64),
        tracks,
    })
}

/// The playlist as stored now, as the API answers it.
fn fresh_view(db: &Db, playlist: &Playlist) -> Result<FullPlaylist, ApiError> {
    full_view(db, &load(db, &playlist.client_id, &playlist.id)?)
}

/// The playlist routes: the owner changes a playlist, others see the ones not private.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/playlists",
        User(list),
        "List (playlists)",
        |op| op
            .link(
                "GET /api/playlists/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_id", "invalid_query"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/playlists",
        User(create),
        "Create (playlists)",
        |op| op
            .request_example(json!({ "name": "Warm-up", "visibility": "public" }))
            .link("GET /api/playlists/{id}", &[("id", "$response.body#/id")])
            .link("PUT /api/playlists/{id}", &[("id", "$response.body#/id")])
            .link(
                "DELETE /api/playlists/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/playlists/{id}/tracks",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/playlists/{id}/poster",
                &[("id", "$response.body#/id")],
            )
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/playlists/{id}",
        User(get),
        "Get (playlists)",
        |op| op.errors(404, &["not_found"]),
    ),
    endpoint!(
        PUT "/api/playlists/{id}",
        User(update),
        "Update (playlists)",
        |op| op.errors(403, &["forbidden"]).errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/playlists/{id}",
        User(delete),
        "Delete (playlists)",
        |op| op.errors(403, &["forbidden"]).errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/playlists/{id}/tracks",
        User(add_tracks),
        "Add tracks (playlists)",
        |op| op
            .link(
                "DELETE /api/playlists/{id}/tracks/{trackId}",
                &[
                    ("id", "$response.body#/id"),
                    ("trackId", "$response.body#/tracks/0/id"),
                ],
            )
            .link(
                "PUT /api/playlists/{id}/tracks/reorder",
                &[("id", "$response.body#/id")],
            )
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["playlist_full"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        DELETE "/api/playlists/{id}/tracks/{trackId}",
        User(remove_track),
        "Remove track (playlists)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        PUT "/api/playlists/{id}/tracks/reorder",
        User(reorder),
        "Reorder (playlists)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(422, &["validation_failed"]),
    ),
    // The image is streamed into storage after authentication (see [`poster`]).
    documented_route!(
        "POST",
        "/api/playlists/{id}/poster",
        Handler::Upload(Upload::PlaylistPoster),
        "Poster (playlists)",
        |op| op
            .takes_as(
                "image/*",
                Schema::written(json!({ "type": "string", "contentMediaType": "image/*" })),
            )
            .answers(200, "OK", Schema::view::<FullPlaylist>())
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
];

/// Name, description, visibility (public by default).
fn create(ctx: &UserCtx, new: NewPlaylistBody) -> Result<Created<FullPlaylist>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let db = ctx.db()?;
    let fields = Fields {
        name: new.name,
        description: new.description,
        visibility: new.visibility.unwrap_or_else(|| "public".into()),
    };
    let playlist = stored::insert(&db, &tenant.client_id, &user.id, &fields, ctx.now())?;
    Ok(Created(full_view(&db, &playlist)?))
}

/// With its tracks in order.
fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<FullPlaylist>, ApiError> {
    let db = ctx.db()?;
    let playlist = load_visible(ctx, &db)?;
    Ok(Json(full_view(&db, &playlist)?))
}

/// `?userId=`: a user's playlists (the caller's when no userId); all of
/// them for the owner, the public ones for anyone else. Newest first, paginated.
fn list(ctx: &UserCtx, _: NoBody) -> Result<Page<PlaylistView>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let page = pagination::Page::from_query(ctx.query())?;
    let owner = match ctx.query_value("userId") {
        None => user.id.clone(),
        Some(raw) => ids::parse_uuid(&raw).ok_or_else(|| {
            ApiError::bad_request("invalid_query", "userId must be a user id (UUID)")
        })?,
    };
    let public_only = owner != user.id;
    let db = ctx.db()?;
    let links = Links::load();
    let (playlists, total) =
        stored::page_of_owner(&db, &tenant.client_id, &owner, public_only, page)?;
    let items: Vec<PlaylistView> = playlists
        .iter()
        .map(|(p, track_count)| view(p, &links, *track_count))
        .collect();
    Ok(Page(Paged::new(items, total, page)))
}

/// Any of name, description, visibility.
fn update(ctx: &UserCtx, changes: PlaylistChangesBody) -> Result<Json<FullPlaylist>, ApiError> {
    let db = ctx.db()?;
    let playlist = load_owned(ctx, &db)?;
    let fields = Fields {
        name: changes.name.unwrap_or_else(|| playlist.name.clone()),
        description: changes
            .description
            .unwrap_or_else(|| playlist.description.clone()),
        visibility: changes
            .visibility
            .unwrap_or_else(|| playlist.visibility.clone()),
    };
    stored::update(&db, &playlist, &fields, ctx.now())?;
    Ok(Json(fresh_view(&db, &playlist)?))
}

/// The playlist, its tracks and its poster.
fn delete(ctx: &UserCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let playlist = load_owned(ctx, &db)?;
    stored::delete(&db, &playlist)?;
    remove_poster(&db, &playlist)?;
    Ok(Json(Deleted::of(playlist.id)))
}

fn remove_poster(db: &Db, playlist: &Playlist) -> Result<(), ApiError> {
    if let Some(file_id) = &playlist.poster_file_id
        && let Ok(file) = files::load_ready(db, &playlist.client_id, file_id)
    {
        files::remove(db, &file)?;
    }
    Ok(())
}

/// Reads one track object; field errors are named `tracks[i].field`.
fn parse_track(index: usize, value: &Value, errors: &mut Vec<FieldError>) -> Option<NewTrack> {
    let prefix = format!("tracks[{index}]");
    let Value::Object(_) = value else {
        errors.push(FieldError {
            field: prefix,
            message: "must be an object".into(),
        });
        return None;
    };
    let mut body = JsonBody::parse(value.to_string().as_bytes()).ok()?;
    let NewTrackBody {
        title,
        artist,
        duration_seconds: duration,
        file_id,
        url,
    } = NewTrackBody::read(&mut body);
    let file_id = match file_id {
        Some(raw) => match ids::parse_uuid(&raw) {
            Some(id) => Some(id),
            None => {
                body.error("fileId", "must be a file id (UUID)");
                None
            }
        },
        None => None,
    };
    if let Some(u) = &url
        && !validate::is_http_url(u)
    {
        body.error("url", "must be an absolute http(s) URL");
    }
    // A blank fileId or url names nothing: refused, not taken as absent.
    for (field, parsed) in [("fileId", file_id.is_some()), ("url", url.is_some())] {
        if body.has(field) && !parsed && !body.has_errors_for(&[field]) {
            body.error(field, "must not be empty");
        }
    }
    if body.has("fileId") == body.has("url") {
        body.error("fileId", "give either a fileId or a url");
    }
    match body.finish() {
        Ok(()) => Some(NewTrack {
            title,
            artist,
            duration,
            file_id,
            url,
        }),
        Err(err) => {
            errors.extend(err.fields.into_iter().map(|f| FieldError {
                field: format!("{prefix}.{}", f.field),
                message: f.message,
            }));
            None
        }
    }
}

/// `{"tracks": [...]}` appended in order. A `fileId` must name a file of the tenant that
/// the user owns or that is public.
fn add_tracks(ctx: &UserCtx, sent: NewTracksBody) -> Result<Json<FullPlaylist>, ApiError> {
    let db = ctx.db()?;
    let playlist = load_owned(ctx, &db)?;
    let user = &ctx.user;
    let NewTracksBody { tracks } = sent;
    let Some(Value::Array(tracks)) = tracks else {
        return Err(invalid("tracks", "must be an array of tracks"));
    };
    if tracks.is_empty() || tracks.len() > MAX_TRACKS_PER_REQUEST {
        return Err(invalid(
            "tracks",
            &format!("must hold 1 to {MAX_TRACKS_PER_REQUEST} tracks"),
        ));
    }
    let mut errors = Vec::new();
    let parsed: Vec<Option<NewTrack>> = tracks
        .iter()
        .enumerate()
        .map(|(i, t)| parse_track(i, t, &mut errors))
        .collect();
    for (i, track) in parsed.iter().enumerate() {
        let Some(file_id) = track.as_ref().and_then(|t| t.file_id.as_ref()) else {
            continue;
        };
        let usable = files::load_ready(&db, &playlist.client_id, file_id)
            .is_ok_and(|f| f.owner_id == user.id || f.is_public);
        if !usable {
            errors.push(FieldError {
                field: format!("tracks[{i}].fileId"),
                message: "names no file of yours or public file".into(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid_fields(errors));
    }
    let new: Vec<NewTrack> = parsed.into_iter().flatten().collect();
    match stored::append_tracks(&db, &playlist, &new, MAX_TRACKS, ctx.now())? {
        Appended::Added => Ok(Json(fresh_view(&db, &playlist)?)),
        Appended::Full => Err(ApiError::conflict(
            "playlist_full",
            format!("a playlist holds at most {MAX_TRACKS} tracks"),
        )),
    }
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::invalid_fields(vec![FieldError {
        field: field.into(),
        message: message.into(),
    }])
}

/// The track leaves the playlist; the others keep their order.
fn remove_track(ctx: &UserCtx, _: NoBody) -> Result<Json<FullPlaylist>, ApiError> {
    let db = ctx.db()?;
    let playlist = load_owned(ctx, &db)?;
    let track_id = ids::parse_uuid(ctx.param("trackId")).ok_or_else(|| bad_id("track"))?;
    if !stored::remove_track(&db, &playlist, &track_id, ctx.now())? {
        return Err(ApiError::not_found("track"));
    }
    Ok(Json(fresh_view(&db, &playlist)?))
}

/// `{"trackIds": [...]}`, the complete new order; anything else is a 422 and the order
/// stays as it was.
fn reorder(ctx: &UserCtx, sent: TrackOrderBody) -> Result<Json<FullPlaylist>, ApiError> {
    let db = ctx.db()?;
    let playlist = load_owned(ctx, &db)?;
    let TrackOrderBody {
        track_ids: requested,
    } = sent;
    let Some(Value::Array(requested)) = requested else {
        return Err(invalid("trackIds", "must be an array of track ids"));
    };
    let requested: Vec<String> = requested
        .iter()
        .map(|v| v.as_str().and_then(ids::parse_uuid))
        .collect::<Option<_>>()
        .ok_or_else(|| invalid("trackIds", "must hold track ids (UUIDs)"))?;
    let current = stored::track_ids(&db, &playlist)?;
    check_order(&current, &requested).map_err(|m| invalid("trackIds", &m))?;
    stored::reorder(&db, &playlist, &requested, ctx.now())?;
    Ok(Json(fresh_view(&db, &playlist)?))
}

/// A PNG, JPEG or WebP image (raw body or multipart),
/// at most 5 MiB, recognised by its magic bytes; stored as a public file that replaces
/// the previous poster.
pub async fn poster(ctx: &UserCtx, body: Source) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let playlist = load_owned(ctx, &db)?;
    let head = &ctx.req;
    let stream: incoming::BodyStream = match body {
        Source::Stream(s) => s,
        Source::Bytes(bytes, _) => Box::pin(futures::stream::iter([Ok(bytes)])),
    };
    let (bytes, data, name) = match files::upload_kind(head)? {
        files::Upload::Raw { .. } => {
            let bytes = incoming::collect(head, stream, MAX_POSTER).await?;
            let len = bytes.len();
            (bytes, 0..len, None)
        }
        files::Upload::Multipart { boundary } => {
            let form = files::read_form(head, stream, &boundary, MAX_POSTER).await?;
            (form.bytes, form.data, form.filename)
        }
    };
    let image = bytes.get(data.clone()).unwrap_or_default();
    let content_type = media::sniff_image(image)
        .ok_or_else(|| files::unsupported("the poster must be a PNG, JPEG or WebP image"))?;
    let extension = content_type.trim_start_matches("image/");
    let filename = name
        .and_then(|n| media::check_filename(&n).ok())
        .unwrap_or_else(|| format!("poster.{extension}"));
    let new = NewFile {
        filename,
        content_type: content_type.to_string(),
        is_public: true,
    };
    let file = files::store(ctx, &db, &new, Source::Bytes(bytes, data), MAX_POSTER).await?;
    stored::set_poster(&db, &playlist, &file.id, ctx.now())?;
    remove_poster(&db, &playlist)?;
    Ok(json(200, &fresh_view(&db, &playlist)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_reorder_must_be_the_complete_set_once() {
        let current = ids(&["a", "b", "c"]);
        assert!(check_order(&current, &ids(&["c", "a", "b"])).is_ok());
        assert!(check_order(&current, &ids(&["a", "b"])).is_err());
        assert!(check_order(&current, &ids(&["a", "b", "b"])).is_err());
        assert!(check_order(&current, &ids(&["a", "b", "c", "a"])).is_err());
        assert!(check_order(&current, &ids(&["a", "b", "x"])).is_err());
        assert!(check_order(&[], &[]).is_ok());
    }

    #[test]
    fn tracks_name_their_bad_fields() {
        let mut errors = Vec::new();
        let ok = parse_track(
            0,
            &json!({"title": "A", "artist": "B", "durationSeconds": 180, "url": "https://x.example/a.mp3"}),
            &mut errors,
        );
        assert!(ok.is_some() && errors.is_empty());
        let bad = parse_track(
            2,
            &json!({"durationSeconds": -1, "url": "ftp://x", "fileId": "nope", "extra": 1}),
            &mut errors,
        );
        assert!(bad.is_none());
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        for f in [
            "tracks[2].title",
            "tracks[2].durationSeconds",
            "tracks[2].url",
            "tracks[2].extra",
        ] {
            assert!(fields.contains(&f), "{f} missing from {fields:?}");
        }
        let mut errors = Vec::new();
        assert!(parse_track(0, &json!({"title": "x"}), &mut errors).is_none());
        assert_eq!(errors[0].field, "tracks[0].fileId");
        assert!(parse_track(1, &json!("x"), &mut errors).is_none());
    }

    #[test]
    fn a_blank_source_is_refused_not_taken_as_absent() {
        for track in [
            json!({"title": "x", "url": ""}),
            json!({"title": "x", "fileId": "  "}),
            json!({"title": "x", "fileId": "", "url": "https://x.example/a.mp3"}),
        ] {
            let mut errors = Vec::new();
            assert!(parse_track(0, &track, &mut errors).is_none(), "{track}");
            assert!(
                errors.iter().any(|e| e.message == "must not be empty"),
                "{track}: {errors:?}"
            );
        }
    }
}
