//! Files: uploads stored in the key-value store in 1 MiB chunks with their metadata in
//! the database (`store::files`), the public media endpoint (CORS, ETag, single byte
//! ranges, retries when the bytes are late), the owner's tenant's download and the user's
//! list.

use crate::links::Links;
use crate::media::{self, Chunker, RangeAsk};
use crate::{ApiRoute, Upload as Streamed};
use domain::pagination::{self, Paged};
use domain::{ApiError, ids};
use edge::answers::Deleted;
use edge::contract::Schema;
use edge::documented_route;
use edge::endpoint;
use edge::spin::config;
use edge::spin::endpoint::{Json, NoBody, Page, Raw};
use edge::spin::http::{Call, Handler, PublicCtx, UserCtx, json, problem};
use edge::spin::incoming::{self, BodyStream, Source};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use spin_sdk::http::{Request, Response};
use spin_sdk::key_value::Store;
use store::Db;
use store::files::{self as stored, Content, FileKey};

/// The default of the `max_upload_bytes` variable: 100 MiB.
pub const DEFAULT_MAX_UPLOAD: u64 = 100 * 1024 * 1024;
/// What a multipart body may carry beyond its file part (boundaries, headers, fields).
const MULTIPART_OVERHEAD: u64 = 64 * 1024;

/// The largest accepted upload, from the `max_upload_bytes` variable.
pub fn max_upload() -> u64 {
    config::var("max_upload_bytes")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_UPLOAD)
}

pub use store::files::{FileRow, NewFile};

pub fn public_url(links: &Links, id: &str) -> String {
    format!("{}/api/files/{id}/public", links.base_url())
}

/// A stored file's metadata.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "File")]
pub struct FileView {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub filename: String,
    pub content_type: String,
    /// Its length in bytes.
    pub size: u64,
    /// The SHA-256 of its bytes, in hex.
    #[schemars(extend("pattern" = "^[0-9a-f]{64}$"))]
    pub sha256: String,
    /// Whether anyone may fetch it, without signing in, at `publicUrl`.
    pub public: bool,
    /// Where anyone fetches a public file; null when it is not public.
    pub public_url: Option<String>,
    /// Where its owner downloads it.
    pub download_url: String,
    #[schemars(extend("format" = "uuid"))]
    pub owner_id: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

/// A file's metadata as the API answers it.
pub fn view(file: &FileRow, links: &Links) -> FileView {
    FileView {
        id: file.id.clone(),
        filename: file.filename.clone(),
        content_type: file.content_type.clone(),
        size: file.size,
        sha256: file.sha256.clone(),
        public: file.is_public,
        public_url: file.is_public.then(|| public_url(links, &file.id)),
        download_url: format!("{}/api/files/{}/download", links.base_url(), file.id),
        owner_id: file.owner_id.clone(),
        created_at: file.created_at.clone(),
    }
}

/// The key prefix of a file's chunks: chunk `n` is `{prefix}:{n}`.
pub fn chunk_prefix(client_id: &str, file_id: &str) -> String {
    format!("file:{client_id}:{file_id}")
}

pub fn chunk_key(client_id: &str, file_id: &str, n: u64) -> String {
    format!("{}:{n}", chunk_prefix(client_id, file_id))
}

pub fn open_store() -> Result<Store, ApiError> {
    Store::open_default().map_err(kv_error)
}

/// A key-value failure: the store unreachable or failing for now (`other`: e.g. its Redis
/// restarting) is 503 with `Retry-After`, so clients retry; the rest (a store this
/// component may not open) is the deployment's fault.
pub fn kv_error(e: spin_sdk::key_value::Error) -> ApiError {
    match e {
        spin_sdk::key_value::Error::Other(detail) => {
            eprintln!("files: key-value store unavailable: {detail}");
            ApiError::unavailable(
                "storage_unavailable",
                "file storage is unavailable for the moment: retry shortly",
            )
            .with_header(
                "retry-after",
                store::UNAVAILABLE_RETRY_AFTER_SECS.to_string(),
            )
        }
        e => ApiError::internal(format!("key-value store error: {e}")),
    }
}

pub fn bad_id() -> ApiError {
    ApiError::bad_request("invalid_id", "the file id must be a UUID")
}

/// Writes chunks to the key-value store as they fill (chunk `n` at `{prefix}:{n}`),
/// hashing as it goes.
pub struct ChunkWriter {
    store: Store,
    prefix: String,
    chunker: Chunker,
    hasher: Sha256,
    size: u64,
    written: u64,
    max: u64,
    /// What a body longer than `max` is refused with.
    too_long: fn(u64) -> ApiError,
}

impl ChunkWriter {
    /// A writer of at most `max` bytes under `prefix`; a longer body is `too_long(max)`.
    pub fn new(prefix: String, max: u64, too_long: fn(u64) -> ApiError) -> Result<Self, ApiError> {
        Ok(ChunkWriter {
            store: open_store()?,
            prefix,
            chunker: Chunker::default(),
            hasher: Sha256::new(),
            size: 0,
            written: 0,
            max,
            too_long,
        })
    }

    pub fn push(&mut self, piece: &[u8]) -> Result<(), ApiError> {
        self.size += piece.len() as u64;
        if self.size > self.max {
            return Err((self.too_long)(self.max));
        }
        self.hasher.update(piece);
        for chunk in self.chunker.push(piece) {
            self.write(&chunk)?;
        }
        Ok(())
    }

    fn write(&mut self, chunk: &[u8]) -> Result<(), ApiError> {
        let key = format!("{}:{}", self.prefix, self.written);
        self.store.set(&key, chunk).map_err(kv_error)?;
        self.written += 1;
        Ok(())
    }

    /// Writes the last chunk and answers what was written.
    pub fn finish(&mut self) -> Result<Content, ApiError> {
        if let Some(last) = std::mem::take(&mut self.chunker).finish() {
            self.write(&last)?;
        }
        Ok(Content {
            size: self.size,
            sha256: hex_of(self.hasher.clone().finalize().as_slice()),
            chunk_count: self.written,
        })
    }

    /// Removes every chunk written so far.
    pub fn abort(&self) {
        for n in 0..self.written {
            let _ = self.store.delete(&format!("{}:{n}", self.prefix));
        }
    }
}

pub fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Stores an upload: the row is `uploading` while chunks are written and `ready` only once
/// all are stored; on any failure the chunks and the row are removed.
pub async fn store(
    ctx: &UserCtx,
    db: &Db,
    new: &NewFile,
    source: Source,
    max: u64,
) -> Result<FileRow, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let id = stored::insert(db, &tenant.client_id, &user.id, new, ctx.now())?;
    let mut writer = ChunkWriter::new(
        chunk_prefix(&tenant.client_id, &id),
        max,
        incoming::too_large,
    )?;
    let written = fill(&mut writer, source)
        .await
        .and_then(|()| writer.finish())
        .and_then(|content| {
            debug_assert_eq!(content.chunk_count, media::chunk_count(content.size));
            db.transaction(|tx| {
                stored::mark_ready(tx, &tenant.client_id, &id, &content)?;
                let file = load_ready(tx, &tenant.client_id, &id)?;
                record_event(tx, "file.ready", &file, ctx.now())
            })
        });
    if let Err(err) = written {
        writer.abort();
        let _ = stored::delete(db, &tenant.client_id, &id);
        return Err(err);
    }
    load_ready(db, &tenant.client_id, &id)
}

pub async fn fill(writer: &mut ChunkWriter, source: Source) -> Result<(), ApiError> {
    match source {
        Source::Bytes(bytes, range) => writer.push(bytes.get(range).unwrap_or_default()),
        Source::Stream(mut body) => {
            while let Some(piece) = body.next().await {
                writer.push(&piece.map_err(incoming::unreadable)?)?;
            }
            Ok(())
        }
    }
}

/// Loads a ready file of the tenant.
pub fn load_ready(db: &Db, client_id: &str, id: &str) -> Result<FileRow, ApiError> {
    stored::load_ready(db, client_id, id)?.ok_or_else(|| ApiError::not_found("file"))
}

/// Removes a file's chunks and its row.
pub fn remove(db: &Db, file: &FileRow) -> Result<(), ApiError> {
    let store = open_store()?;
    for n in 0..file.chunk_count {
        store
            .delete(&chunk_key(&file.client_id, &file.id, n))
            .map_err(kv_error)?;
    }
    stored::delete(db, &file.client_id, &file.id)
}

/// Removes up to `batch` uploads still `uploading` that were created before `cutoff`
/// (epoch seconds): abandoned by an instance that stopped mid-upload. Their chunk count
/// was never recorded, so chunks are deleted in order until one is missing.
pub fn remove_abandoned(db: &Db, cutoff: i64, batch: i64) -> Result<i64, ApiError> {
    let abandoned = stored::abandoned(db, cutoff, batch)?;
    let store = open_store()?;
    let max_chunks = media::chunk_count(max_upload()) + 1;
    for file in &abandoned {
        let FileKey { client_id, id } = file;
        for n in 0..max_chunks {
            let key = chunk_key(client_id, id, n);
            if !store.exists(&key).map_err(kv_error)? {
                break;
            }
            store.delete(&key).map_err(kv_error)?;
        }
        stored::delete_abandoned(db, file)?;
    }
    Ok(abandoned.len() as i64)
}

/// An upload's declared shape: raw body or `multipart/form-data`.
pub enum Upload {
    Raw { content_type: String },
    Multipart { boundary: String },
}

/// Reads the request's `Content-Type`: missing or malformed is a 415.
pub fn upload_kind(head: &Request) -> Result<Upload, ApiError> {
    let declared = head
        .header("content-type")
        .and_then(|v| v.as_str())
        .ok_or_else(|| unsupported("send the file's Content-Type (or multipart/form-data)"))?;
    if declared
        .trim()
        .to_ascii_lowercase()
        .starts_with("multipart/")
    {
        let boundary = media::multipart_boundary(declared).ok_or_else(|| {
            unsupported("multipart uploads must be multipart/form-data with a boundary")
        })?;
        return Ok(Upload::Multipart { boundary });
    }
    let content_type = media::check_content_type(declared)
        .ok_or_else(|| unsupported("the Content-Type is not a valid media type"))?;
    Ok(Upload::Raw { content_type })
}

pub fn unsupported(detail: &str) -> ApiError {
    ApiError::new(415, "unsupported_media_type", detail)
}

/// A read multipart body: the file part's bytes, declared type and name, and its fields.
pub struct FormUpload {
    pub bytes: Vec<u8>,
    pub data: std::ops::Range<usize>,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub fields: Vec<(String, String)>,
}

/// Reads and parses a multipart body whose file part may be `max` bytes.
pub async fn read_form(
    head: &Request,
    body: BodyStream,
    boundary: &str,
    max: u64,
) -> Result<FormUpload, ApiError> {
    let bytes = incoming::collect(head, body, max + MULTIPART_OVERHEAD).await?;
    let form = media::parse_form(&bytes, boundary)
        .map_err(|e| ApiError::bad_request("malformed_multipart", e))?;
    if form.file.data.len() as u64 > max {
        return Err(incoming::too_large(max));
    }
    Ok(FormUpload {
        data: form.file.data,
        filename: form.file.filename,
        content_type: form.file.content_type,
        fields: form.fields,
        bytes,
    })
}

pub fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::invalid_fields(vec![domain::problem::FieldError {
        field: field.into(),
        message: message.into(),
    }])
}

pub fn check_name(name: &str) -> Result<String, ApiError> {
    media::check_filename(name).map_err(|m| invalid("filename", m))
}

pub fn flag(value: Option<String>) -> Result<bool, ApiError> {
    match value {
        None => Ok(false),
        Some(v) => media::parse_flag(&v).ok_or_else(|| invalid("public", "must be true or false")),
    }
}

/// The files' routes: the owner's upload, list, metadata, download and delete, and the
/// public files' media endpoint.
pub const ROUTES: &[ApiRoute] = &[
    // The body is streamed into storage after authentication (see [`upload`]).
    documented_route!(
        "POST",
        "/api/files",
        Handler::Upload(Streamed::File),
        "Upload (files)",
        |op| op
            .described(
                "A multipart form with one `file` part, or the raw bytes with their own \
                 content type.",
            )
            .takes_as(
                "multipart/form-data",
                Schema::written(json!({
                    "type": "object",
                    "required": ["file"],
                    "additionalProperties": false,
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "The file part (a part with a filename)",
                        },
                        "public": { "type": "string", "enum": ["true", "false", "1", "0"] },
                    },
                })),
            )
            .query(
                "filename",
                json!({
                    "type": "string",
                    "minLength": 1,
                    "description": "At most 255 characters once trimmed",
                }),
            )
            .query(
                "public",
                json!({
                    "type": "string",
                    "enum": ["true", "false", "1", "0"],
                }),
            )
            .answers(201, "Created", Schema::view::<FileView>())
            .link("GET /api/files/{id}", &[("id", "$response.body#/id")])
            .link("DELETE /api/files/{id}", &[("id", "$response.body#/id")])
            .link(
                "GET /api/files/{id}/download",
                &[("id", "$response.body#/id")],
            )
            .errors(400, &["malformed_multipart"])
            .errors(404, &["not_found"])
            .errors(415, &["unsupported_media_type"])
            .errors(422, &["validation_failed"]),
    ),
    endpoint!(
        GET "/api/files",
        User(list),
        "List (files)",
        |op| op
            .link(
                "GET /api/files/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_query"]),
    ),
    endpoint!(
        GET "/api/files/{id}",
        User(get),
        "Get (files)",
        |op| op.errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/files/{id}",
        User(delete),
        "Delete (files)",
        |op| op.errors(404, &["not_found"]),
    ),
    endpoint!(
        GET "/api/files/{id}/public",
        Public(public),
        "Public (files)",
        |op| op
            .answers_as(
                200,
                "The file's bytes (with its content type)",
                "*/*",
                Schema::bytes(),
            )
            .answers_as(206, "The requested byte range", "*/*", Schema::bytes())
            .errors(404, &["file_unavailable", "not_found"])
            .errors(416, &["range_not_satisfiable"]),
    ),
    endpoint!(
        OPTIONS "/api/files/{id}/public",
        Public(preflight),
        "Preflight (files)",
        |op| op
            .parameter(json!({
                "name": "id",
                "in": "path",
                "required": true,
                "description": "Not read: the preflight answers the same for every file",
                "schema": { "type": "string", "minLength": 1 },
            }))
            .answers_empty(204, "CORS preflight answer"),
    ),
    endpoint!(
        GET "/api/files/{id}/download",
        User(download),
        "Download (files)",
        |op| op
            .answers_as(
                200,
                "The file's bytes (with its content type)",
                "*/*",
                Schema::bytes(),
            )
            .answers_as(206, "The requested byte range", "*/*", Schema::bytes())
            .errors(404, &["file_unavailable", "not_found"])
            .errors(416, &["range_not_satisfiable"]),
    ),
];

/// `POST /api/files`: a raw body (`Content-Type` the file's, `?filename=`) streamed into
/// chunks, or `multipart/form-data` with one file part; `public=true` in the query or a
/// form field makes it public.
pub async fn upload(ctx: &UserCtx, body: Source) -> Result<Response, ApiError> {
    let max = max_upload();
    let head = &ctx.req;
    if incoming::content_length(head).is_some_and(|n| n > max + MULTIPART_OVERHEAD) {
        return Err(incoming::too_large(max));
    }
    let query_public = ctx.query_value("public");
    let query_name = ctx.query_value("filename");
    let (new, source) = match upload_kind(head)? {
        Upload::Raw { content_type } => {
            if incoming::content_length(head).is_some_and(|n| n > max) {
                return Err(incoming::too_large(max));
            }
            let filename = check_name(query_name.as_deref().unwrap_or("upload"))?;
            let is_public = flag(query_public)?;
            let new = NewFile {
                filename,
                content_type,
                is_public,
            };
            (new, body)
        }
        Upload::Multipart { boundary } => {
            let form = match body {
                Source::Stream(stream) => read_form(head, stream, &boundary, max).await?,
                Source::Bytes(bytes, _) => {
                    let stream: BodyStream = Box::pin(futures::stream::iter([Ok(bytes)]));
                    read_form(head, stream, &boundary, max).await?
                }
            };
            // Like JSON bodies, a form names only known fields.
            if let Some((unknown, _)) = form.fields.iter().find(|(k, _)| k != "public") {
                return Err(invalid(unknown, "is not a known field"));
            }
            let field_public = form
                .fields
                .iter()
                .find(|(k, _)| k == "public")
                .map(|(_, v)| v.clone());
            // Both are checked (an invalid query value is refused even when the form sets
            // the flag); the form's wins.
            let from_query = flag(query_public.clone())?;
            let is_public = match field_public {
                Some(_) => flag(field_public)?,
                None => from_query,
            };
            let name = form.filename.clone().filter(|n| !n.is_empty());
            let filename = check_name(query_name.or(name).as_deref().unwrap_or("upload"))?;
            let content_type = match &form.content_type {
                None => "application/octet-stream".to_string(),
                Some(ct) => media::check_content_type(ct)
                    .ok_or_else(|| unsupported("the file part's Content-Type is not valid"))?,
            };
            let new = NewFile {
                filename,
                content_type,
                is_public,
            };
            (new, Source::Bytes(form.bytes, form.data))
        }
    };
    let db = ctx.db()?;
    let file = store(ctx, &db, &new, source, max).await?;
    Ok(json(201, &view(&file, &Links::load())))
}

/// Reads bytes `start..=end` of a file, or `None` when a chunk is missing or short.
fn read_bytes(file: &FileRow, start: u64, end: u64) -> Result<Option<Vec<u8>>, ApiError> {
    let store = open_store()?;
    let chunk = media::CHUNK_SIZE as u64;
    let mut out = Vec::with_capacity(usize::try_from(end - start + 1).unwrap_or(0));
    for n in media::chunks_for(start, end) {
        let Some(bytes) = store
            .get(&chunk_key(&file.client_id, &file.id, n))
            .map_err(kv_error)?
        else {
            return Ok(None);
        };
        let base = n * chunk;
        let from = start.saturating_sub(base);
        let to = (end - base + 1).min(chunk);
        let Some(part) = usize::try_from(from)
            .ok()
            .zip(usize::try_from(to).ok())
            .and_then(|(f, t)| bytes.get(f..t))
        else {
            return Ok(None);
        };
        out.extend_from_slice(part);
    }
    Ok(Some(out))
}

/// Reads a range, retrying (100, 200, 300 ms) while the bytes are not there; then 404.
fn read_with_retries(file: &FileRow, start: u64, end: u64) -> Result<Vec<u8>, ApiError> {
    if let Some(bytes) = read_bytes(file, start, end)? {
        return Ok(bytes);
    }
    for delay in media::RETRY_DELAYS_MS {
        std::thread::sleep(std::time::Duration::from_millis(delay));
        if let Some(bytes) = read_bytes(file, start, end)? {
            return Ok(bytes);
        }
    }
    Err(ApiError::new(
        404,
        "file_unavailable",
        "the file's content is not available",
    ))
}

/// The body of a file answer (whole, one range, 304 or 416).
fn file_response(
    ctx: &Call,
    file: &FileRow,
    extra: &[(&str, String)],
) -> Result<Response, ApiError> {
    let etag = media::etag(&file.sha256);
    let (content_type, attachment) = media::served_type(&file.content_type);
    let mut builder = Response::builder();
    builder
        .header("etag", etag.as_str())
        .header("accept-ranges", "bytes")
        .header("x-content-type-options", "nosniff")
        .header("content-security-policy", "default-src 'none'; sandbox");
    let mut disposition_given = false;
    for (name, value) in extra {
        disposition_given |= *name == "content-disposition";
        builder.header(*name, value.as_str());
    }
    if attachment && !disposition_given {
        builder.header("content-disposition", "attachment");
    }
    if media::none_match(ctx.header("if-none-match"), &etag) {
        return Ok(builder.status(304).build());
    }
    let (status, start, end) = match media::parse_range(ctx.header("range"), file.size) {
        RangeAsk::Whole if file.size == 0 => {
            return Ok(builder
                .status(200)
                .header("content-type", content_type)
                .header("content-length", "0")
                .build());
        }
        RangeAsk::Whole => (200, 0, file.size - 1),
        RangeAsk::Part(start, end) => (206, start, end),
        RangeAsk::Unsatisfiable => {
            let err = ApiError::new(
                416,
                "range_not_satisfiable",
                format!("the file has {} bytes", file.size),
            )
            .with_header("content-range", format!("bytes */{}", file.size));
            let mut response = problem(&err, ctx.request_id());
            for (name, value) in extra {
                response.set_header(*name, value.as_str());
            }
            return Ok(response);
        }
    };
    let bytes = read_with_retries(file, start, end)?;
    if status == 206 {
        builder.header(
            "content-range",
            format!("bytes {start}-{end}/{}", file.size),
        );
    }
    Ok(builder
        .status(status)
        .header("content-type", content_type)
        .header("content-length", bytes.len().to_string())
        .body(bytes)
        .build())
}

const CORS: [(&str, &str); 2] = [
    ("access-control-allow-origin", "*"),
    (
        "access-control-expose-headers",
        "Content-Length, Content-Range, Accept-Ranges, ETag",
    ),
];

fn cors_headers() -> Vec<(&'static str, String)> {
    CORS.iter().map(|(k, v)| (*k, (*v).to_string())).collect()
}

/// No authentication, public files only, CORS headers on
/// every answer (errors included).
fn public(ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    let mut headers = cors_headers();
    headers.push(("cache-control", "public, max-age=3600".into()));
    let answer = (|| {
        let id = ids::parse_uuid(ctx.param("id")).ok_or_else(bad_id)?;
        let db = ctx.db()?;
        let file = stored::load_public(&db, &id)?.ok_or_else(|| ApiError::not_found("file"))?;
        file_response(ctx, &file, &headers)
    })();
    Ok(Raw(answer.unwrap_or_else(|err| {
        let mut response = problem(&err, ctx.request_id());
        for (name, value) in cors_headers() {
            response.set_header(name, value);
        }
        response
    })))
}

/// The CORS preflight.
fn preflight(_ctx: &PublicCtx, _: NoBody) -> Result<Raw, ApiError> {
    let mut builder = Response::builder();
    builder.status(204);
    for (name, value) in CORS {
        builder.header(name, value);
    }
    Ok(Raw(builder
        .header("access-control-allow-methods", "GET, OPTIONS")
        .header(
            "access-control-allow-headers",
            "Range, If-None-Match, Content-Type",
        )
        .header("access-control-max-age", "86400")
        .build()))
}

/// The signed-in user's own file: another user's is as unknown (404) as a missing one,
/// public or not (public files are served by `/public`).
fn load_own(ctx: &UserCtx, db: &Db) -> Result<FileRow, ApiError> {
    let id = ids::parse_uuid(ctx.param("id")).ok_or_else(bad_id)?;
    let file = load_ready(db, &ctx.tenant.client_id, &id)?;
    if file.owner_id != ctx.user.id {
        return Err(ApiError::not_found("file"));
    }
    Ok(file)
}

/// The owner's download, as an attachment.
fn download(ctx: &UserCtx, _: NoBody) -> Result<Raw, ApiError> {
    let db = ctx.db()?;
    let file = load_own(ctx, &db)?;
    let disposition = format!(
        "attachment; filename=\"{}\"; filename*=UTF-8''{}",
        file.filename
            .replace(|c: char| !c.is_ascii() || c == '"', "_"),
        domain::validate::percent_encode(&file.filename)
    );
    file_response(
        ctx,
        &file,
        &[
            ("content-disposition", disposition),
            ("cache-control", "private, no-store".into()),
        ],
    )
    .map(Raw)
}

/// The metadata, for the owner.
fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<FileView>, ApiError> {
    let db = ctx.db()?;
    let file = load_own(ctx, &db)?;
    Ok(Json(view(&file, &Links::load())))
}

/// Owner only: chunks and row.
fn delete(ctx: &UserCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let file = load_own(ctx, &db)?;
    db.transaction(|tx| {
        record_event(tx, "file.deleted", &file, ctx.now())?;
        remove(tx, &file)
    })?;
    Ok(Json(Deleted::of(file.id)))
}

/// The user's files, newest first.
fn list(ctx: &UserCtx, _: NoBody) -> Result<Page<FileView>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    let page = pagination::Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let links = Links::load();
    let (files, total) = stored::page_of_owner(&db, &tenant.client_id, &user.id, page)?;
    let items: Vec<FileView> = files.iter().map(|f| view(f, &links)).collect();
    Ok(Page(Paged::new(items, total, page)))
}

/// `file.*` with the file's metadata as `GET /api/files/{id}` answers it (in `db`'s
/// transaction).
fn record_event(db: &Db, event_type: &str, file: &FileRow, now: i64) -> Result<(), ApiError> {
    let data = &view(file, &Links::load());
    crate::webhook_events::record(db, &file.client_id, event_type, "file", &file.id, data, now)
}
