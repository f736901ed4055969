//! Resumable uploads, for files larger than a host lets one request carry (Fermyon Wasm
//! Functions: about 10 MiB): `POST /api/files/uploads` declares the file (name, size,
//! SHA-256, type), `PUT .../parts/{n}` sends each part (at most 8 MiB, any order, again on
//! failure), `GET` reports what arrived, `POST .../complete` checks size and SHA-256 and
//! makes the file `ready` (its id is the upload's), `DELETE` gives up. Each attempt at a
//! part writes under its own keys and becomes the part's bytes only if the upload is still
//! open when it is recorded (`store::uploads`), so a completion never reads bytes that
//! change under it. Expired uploads are removed by the prune job.

use crate::files::{self, ChunkWriter};
use crate::links::Links;
use crate::media;
use crate::{ApiRoute, Upload};
use domain::uploads::{
    self as rules, CHUNK_SIZE, MAX_OPEN_UPLOADS_PER_USER, MAX_PART_SIZE, PartPlan, PlanError,
    UPLOAD_TTL_SECS,
};
use domain::validate::body::{FieldKind, OptBool, OptInt, Text};
use domain::validate::{self, JsonBody};
use domain::{ApiError, ids, request_body};
use edge::answers::Deleted;
use edge::contract::Schema;
use edge::documented_route;
use edge::endpoint;
use edge::spin::endpoint::{Created, Json, NoBody};
use edge::spin::http::{Handler, UserCtx, json};
use edge::spin::incoming::{self, Source};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use spin_sdk::http::Response;
use store::Db;
use store::uploads::{self as stored, NewUpload, PartOutcome, UploadRow, WrittenPart};

/// The key prefix of one attempt's chunks (chunk `k` at `{prefix}:{k}`).
fn attempt_prefix(client_id: &str, upload_id: &str, attempt: &str) -> String {
    format!("upload:{client_id}:{upload_id}:{attempt}")
}

/// Removes an attempt's chunks (a part has at most `MAX_PART_SIZE / CHUNK_SIZE`).
fn remove_attempt_chunks(client_id: &str, upload_id: &str, attempt: &str) -> Result<(), ApiError> {
    let store = files::open_store()?;
    let prefix = attempt_prefix(client_id, upload_id, attempt);
    for k in 0..MAX_PART_SIZE / CHUNK_SIZE {
        store
            .delete(&format!("{prefix}:{k}"))
            .map_err(files::kv_error)?;
    }
    Ok(())
}

fn plan_of(upload: &UploadRow) -> PartPlan {
    PartPlan {
        size: upload.size,
        part_size: upload.part_size,
        part_count: upload.part_count,
    }
}

/// The status as the API names it.
fn status_name(status: &str) -> &str {
    match status {
        "sealed" => "completing",
        other => other,
    }
}

/// A resumable upload: the file declared, how it is cut, and the parts received so far.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Upload")]
pub struct UploadView {
    /// Also the file's id once complete.
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub filename: String,
    pub content_type: String,
    /// The file's length in bytes.
    pub size: u64,
    /// The file's SHA-256, in hex, as declared.
    #[schemars(extend("pattern" = "^[0-9a-f]{64}$"))]
    pub sha256: String,
    /// Whether the file is public once complete.
    pub public: bool,
    /// The length of every part but the last.
    #[schemars(range(min = 1))]
    pub part_size: u64,
    pub part_count: u64,
    #[schemars(extend("enum" = ["open", "completing", "complete"]))]
    pub status: String,
    /// The parts received, by number.
    pub parts: Vec<PartView>,
    /// The numbers of the parts still to send.
    pub missing: Vec<u64>,
    pub received_bytes: u64,
    /// When the upload is removed if not complete.
    #[schemars(extend("format" = "date-time"))]
    pub expires_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    /// The file's address once the upload is complete; null before.
    pub file: Option<String>,
}

/// A part received: its number (from 1), length and SHA-256.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "UploadPart")]
pub struct PartView {
    #[schemars(range(min = 1))]
    pub n: u64,
    pub size: u64,
    /// The SHA-256 of the part's bytes, in hex.
    #[schemars(extend("pattern" = "^[0-9a-f]{64}$"))]
    pub sha256: String,
}

/// A part just stored, and the upload it belongs to.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ReceivedPart")]
pub struct ReceivedPart {
    #[schemars(extend("format" = "uuid"))]
    pub upload_id: String,
    #[serde(flatten)]
    pub part: PartView,
}

fn view(upload: &UploadRow, parts: &[stored::StoredPart], links: &Links) -> UploadView {
    let received: Vec<u64> = parts.iter().map(|p| p.n).collect();
    UploadView {
        id: upload.id.clone(),
        filename: upload.filename.clone(),
        content_type: upload.content_type.clone(),
        size: upload.size,
        sha256: upload.sha256.clone(),
        public: upload.is_public,
        part_size: upload.part_size,
        part_count: upload.part_count,
        status: status_name(&upload.status).to_string(),
        parts: parts
            .iter()
            .map(|p| PartView {
                n: p.n,
                size: p.size,
                sha256: p.sha256.clone(),
            })
            .collect(),
        missing: rules::missing_parts(upload.part_count, &received),
        received_bytes: parts.iter().map(|p| p.size).sum(),
        expires_at: domain::time::format_rfc3339(upload.expires_at),
        created_at: upload.created_at.clone(),
        file: (upload.status == "complete")
            .then(|| format!("{}/api/files/{}", links.base_url(), upload.id)),
    }
}

/// The caller's own unexpired upload named by the path: another user's (or tenant's) is
/// as unknown as a missing one.
fn load_own(ctx: &UserCtx, db: &Db) -> Result<UploadRow, ApiError> {
    let id = ids::parse_uuid(ctx.param("id")).ok_or_else(files::bad_id)?;
    let upload = stored::load(db, &ctx.tenant.client_id, &id, ctx.now())?
        .filter(|u| u.owner_id == ctx.user.id)
        .ok_or_else(|| ApiError::not_found("upload"))?;
    Ok(upload)
}

fn closed(upload: &UploadRow) -> ApiError {
    ApiError::conflict(
        "upload_closed",
        format!(
            "the upload is {} and takes no more parts",
            status_name(&upload.status)
        ),
    )
}

/// A file's declared length in bytes. Required: `create` reports it missing once the
/// body's other fields are read.
pub struct DeclaredSize;

impl FieldKind for DeclaredSize {
    type Value = Option<i64>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<i64> {
        body.opt_int(name, 0..=i64::MAX)
    }

    fn schema() -> Value {
        json!({ "type": "integer", "minimum": 1 })
    }
}

request_body! {
    /// A file to upload in parts: what it is, and how it is cut.
    pub struct NewUploadBody as "NewUpload" checked by NewUploadBody::check {
        /// Its name, without path separators or `..`.
        "filename" filename: Text<{ validate::MAX_NAME }>,
        /// Its media type, such as `video/mp4`.
        "contentType" content_type: Text<{ validate::MAX_NAME }>,
        /// The SHA-256 of its bytes, in hex (64 digits).
        "sha256" sha256: Text<64>,
        /// Its length in bytes: at least 1, at most the upload limit (413 beyond).
        "size" size: DeclaredSize,
        /// The length of each part: a whole number of MiB from 1 to 8 (8 MiB when left out).
        "partSize" part_size: OptInt<0, { i64::MAX }>,
        /// Whether the file is public once complete (not when left out).
        "public" public: OptBool,
    }
}

impl NewUploadBody {
    /// The rules over the fields once each is read: the size is required, the digest is
    /// hex, the name and the type are usable, and the size and part size cut into parts. Too
    /// large is not a field's error but a 413, answered by [`create`] once the body is
    /// otherwise well formed.
    fn check(&self, body: &mut JsonBody) {
        if !body.has_errors_for(&["size"]) && self.size.is_none() {
            body.error("size", "is required");
        }
        if !body.has_errors_for(&["sha256"])
            && !rules::is_sha256_hex(&self.sha256.to_ascii_lowercase())
        {
            body.error("sha256", "must be the file's SHA-256 in hex (64 digits)");
        }
        if let Err(message) = media::check_filename(&self.filename)
            && !body.has_errors_for(&["filename"])
        {
            body.error("filename", message);
        }
        if media::check_content_type(&self.content_type).is_none()
            && !body.has_errors_for(&["contentType"])
        {
            body.error("contentType", "must be a media type such as video/mp4");
        }
        if let Some(size) = self.size {
            match self.plan(size) {
                Err(PlanError::Size) if size as u64 > files::max_upload() => {}
                Err(PlanError::Size) => body.error(
                    "size",
                    "must be at least 1 (send empty files with POST /api/files)",
                ),
                Err(PlanError::PartSize) => body.error(
                    "partSize",
                    "must be a whole number of MiB from 1 to 8 (1048576 to 8388608)",
                ),
                Ok(_) => {}
            }
        }
    }

    /// How a file of `size` bytes is cut into parts.
    fn plan(&self, size: i64) -> Result<PartPlan, PlanError> {
        PartPlan::new(
            size as u64,
            self.part_size.map(|p| p as u64),
            files::max_upload(),
        )
    }
}

/// The resumable uploads' routes: the user's own uploads, each part streamed.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/files/uploads",
        User(create),
        "Create (uploads)",
        |op| op
            .request_example(json!({
                "filename": "clip.mp4",
                "contentType": "video/mp4",
                "size": 11,
                "sha256": "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
            }))
            .link(
                "GET /api/files/uploads/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "DELETE /api/files/uploads/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/files/uploads/{id}/complete",
                &[("id", "$response.body#/id")],
            )
            .errors(409, &["too_many_uploads"]),
    ),
    endpoint!(
        GET "/api/files/uploads/{id}",
        User(get),
        "Get (uploads)",
        |op| op.errors(404, &["not_found"]),
    ),
    endpoint!(
        DELETE "/api/files/uploads/{id}",
        User(abort),
        "Abort (uploads)",
        |op| op.errors(404, &["not_found"]),
    ),
    // The part is streamed into storage after authentication (see [`put_part`]).
    documented_route!(
        "PUT",
        "/api/files/uploads/{id}/parts/{n}",
        Handler::Upload(Upload::Part),
        "Put part (uploads)",
        |op| op
            .takes_as("application/octet-stream", Schema::bytes())
            .answers(200, "OK", Schema::view::<ReceivedPart>())
            .errors(404, &["no_such_part", "not_found"])
            .errors(409, &["upload_closed"])
            .errors(422, &["part_size_mismatch"]),
    ),
    endpoint!(
        POST "/api/files/uploads/{id}/complete",
        User(complete),
        "Complete (uploads)",
        |op| op
            .errors(404, &["not_found"])
            .errors(409, &["upload_incomplete"])
            .errors(422, &["checksum_mismatch", "size_mismatch"]),
    ),
];

/// Declares the file (`NewUpload`).
fn create(ctx: &UserCtx, new: NewUploadBody) -> Result<Created<UploadView>, ApiError> {
    let max = files::max_upload();
    let checked = || ApiError::internal("a checked upload refused");
    let size = new.size.ok_or_else(checked)?;
    let plan = match new.plan(size) {
        Ok(plan) => plan,
        Err(PlanError::Size) if size as u64 > max => return Err(incoming::too_large(max)),
        Err(_) => return Err(ApiError::internal("an upload without a plan")),
    };
    let filename = media::check_filename(&new.filename).map_err(|_| checked())?;
    let content_type = media::check_content_type(&new.content_type).ok_or_else(checked)?;
    let (tenant, user, now) = (&ctx.tenant, &ctx.user, ctx.now());
    let db = ctx.db()?;
    let new = NewUpload {
        id: ids::uuid(),
        filename,
        content_type,
        size: plan.size,
        sha256: new.sha256.to_ascii_lowercase(),
        part_size: plan.part_size,
        part_count: plan.part_count,
        is_public: new.public.unwrap_or(false),
        expires_at: now + UPLOAD_TTL_SECS,
    };
    let capped = stored::insert_capped(
        &db,
        &tenant.client_id,
        &user.id,
        &new,
        MAX_OPEN_UPLOADS_PER_USER,
        now,
    )?;
    let Some(upload) = capped else {
        return Err(ApiError::conflict(
            "too_many_uploads",
            format!(
                "at most {MAX_OPEN_UPLOADS_PER_USER} uploads may be open at once: complete or delete one"
            ),
        ));
    };
    Ok(Created(view(&upload, &[], &Links::load())))
}

/// The upload and the parts received.
fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<UploadView>, ApiError> {
    let db = ctx.db()?;
    let upload = load_own(ctx, &db)?;
    let parts = stored::stored_parts(&db, &upload.client_id, &upload.id)?;
    Ok(Json(view(&upload, &parts, &Links::load())))
}

/// A part longer than expected: 413 beyond the largest part, else 422.
fn part_too_long(expected: u64) -> ApiError {
    if expected >= MAX_PART_SIZE {
        incoming::too_large(MAX_PART_SIZE)
    } else {
        part_size_mismatch(expected)
    }
}

fn part_size_mismatch(expected: u64) -> ApiError {
    ApiError::new(
        422,
        "part_size_mismatch",
        format!("this part must be exactly {expected} bytes"),
    )
    .with_extra("expectedSize", expected)
}

/// The part's bytes as the body (any
/// `Content-Type`), read as a stream; exactly the part's length, at most 8 MiB.
pub async fn put_part(ctx: &UserCtx, body: Source) -> Result<Response, ApiError> {
    if incoming::content_length(&ctx.req).is_some_and(|n| n > MAX_PART_SIZE) {
        return Err(incoming::too_large(MAX_PART_SIZE));
    }
    let db = ctx.db()?;
    let upload = load_own(ctx, &db)?;
    let plan = plan_of(&upload);
    let n = ctx
        .param("n")
        .parse::<u64>()
        .ok()
        .filter(|n| plan.part_len(*n).is_some())
        .ok_or_else(|| {
            ApiError::new(
                404,
                "no_such_part",
                format!("parts are numbered 1 to {}", upload.part_count),
            )
        })?;
    let expected = plan.part_len(n).unwrap_or(0);
    if upload.status != "open" {
        return Err(closed(&upload));
    }
    if incoming::content_length(&ctx.req).is_some_and(|len| len != expected) {
        return Err(part_size_mismatch(expected));
    }
    let client_id = &upload.client_id;
    let attempt = ids::random_hex(16);
    stored::begin_attempt(&db, client_id, &upload.id, n, &attempt, ctx.now())?;
    let prefix = attempt_prefix(client_id, &upload.id, &attempt);
    let mut writer = ChunkWriter::new(prefix, expected, part_too_long)?;
    let written = files::fill(&mut writer, body)
        .await
        .and_then(|()| writer.finish());
    let content = match written {
        Ok(content) if content.size == expected => content,
        Ok(_) => {
            writer.abort();
            let _ = stored::forget_attempts(&db, client_id, &[attempt]);
            return Err(part_size_mismatch(expected));
        }
        Err(err) => {
            writer.abort();
            let _ = stored::forget_attempts(&db, client_id, &[attempt]);
            return Err(err);
        }
    };
    let part = WrittenPart {
        upload_id: &upload.id,
        n,
        attempt: &attempt,
        size: content.size,
        sha256: &content.sha256,
    };
    match stored::store_attempt(&db, client_id, &part, ctx.now())? {
        PartOutcome::Stored { superseded } => {
            for old in &superseded {
                remove_attempt_chunks(client_id, &upload.id, old)?;
            }
            stored::forget_attempts(&db, client_id, &superseded)?;
            let part = PartView {
                n,
                size: content.size,
                sha256: content.sha256,
            };
            Ok(json(
                200,
                &ReceivedPart {
                    upload_id: upload.id,
                    part,
                },
            ))
        }
        PartOutcome::Closed => {
            writer.abort();
            stored::forget_attempts(&db, client_id, std::slice::from_ref(&attempt))?;
            let now_closed = stored::load(&db, client_id, &upload.id, ctx.now())?;
            Err(now_closed
                .as_ref()
                .map_or_else(|| ApiError::not_found("upload"), closed))
        }
    }
}

/// Copies the stored parts into the file's chunks, in order, hashing them; answers the
/// SHA-256 and the number of file chunks, or an error when a part's bytes are missing.
fn assemble(upload: &UploadRow, parts: &[stored::StoredPart]) -> Result<(String, u64), ApiError> {
    let store = files::open_store()?;
    let plan = plan_of(upload);
    let mut hasher = Sha256::new();
    let mut chunks = 0;
    for part in parts {
        let prefix = attempt_prefix(&upload.client_id, &upload.id, &part.attempt);
        for k in 0..part.size.div_ceil(CHUNK_SIZE) {
            let bytes = store
                .get(&format!("{prefix}:{k}"))
                .map_err(files::kv_error)?
                .ok_or_else(|| {
                    ApiError::internal(format!("the bytes of part {} are missing", part.n))
                })?;
            hasher.update(&bytes);
            let key = files::chunk_key(&upload.client_id, &upload.id, plan.file_chunk(part.n, k));
            store.set(&key, &bytes).map_err(files::kv_error)?;
            chunks += 1;
        }
    }
    Ok((files::hex_of(hasher.finalize().as_slice()), chunks))
}

fn remove_file_chunks(upload: &UploadRow, count: u64) {
    if let Ok(store) = files::open_store() {
        for n in 0..count {
            let _ = store.delete(&files::chunk_key(&upload.client_id, &upload.id, n));
        }
    }
}

/// With every part received, checks the total size and the SHA-256 and answers the ready
/// file (as `POST /api/files` does). Safe to repeat. A mismatch is a 422 and the upload
/// stays open for corrected parts.
fn complete(ctx: &UserCtx, _: NoBody) -> Result<Json<files::FileView>, ApiError> {
    let db = ctx.db()?;
    let upload = load_own(ctx, &db)?;
    let client_id = &upload.client_id;
    if upload.status == "complete" {
        let file = files::load_ready(&db, client_id, &upload.id)?;
        return Ok(Json(files::view(&file, &Links::load())));
    }
    let received = |db: &Db| -> Result<Vec<stored::StoredPart>, ApiError> {
        let parts = stored::stored_parts(db, client_id, &upload.id)?;
        let numbers: Vec<u64> = parts.iter().map(|p| p.n).collect();
        let missing = rules::missing_parts(upload.part_count, &numbers);
        if missing.is_empty() {
            Ok(parts)
        } else {
            Err(ApiError::conflict(
                "upload_incomplete",
                format!(
                    "{} of {} parts are missing",
                    missing.len(),
                    upload.part_count
                ),
            )
            .with_extra("missing", missing))
        }
    };
    received(&db)?;
    if !stored::seal(&db, client_id, &upload.id, ctx.now())? {
        return Err(ApiError::not_found("upload"));
    }
    // Sealed: no part changes from here on; read the final set.
    let parts = received(&db)?;
    let total: u64 = parts.iter().map(|p| p.size).sum();
    let reopen = |err: ApiError| {
        let _ = stored::reopen(&db, client_id, &upload.id);
        err
    };
    if total != upload.size {
        return Err(reopen(ApiError::new(
            422,
            "size_mismatch",
            format!(
                "the parts hold {total} bytes, the upload declared {}",
                upload.size
            ),
        )));
    }
    let (sha256, chunks) = match assemble(&upload, &parts) {
        Ok(done) => done,
        Err(err) => {
            remove_file_chunks(&upload, media::chunk_count(upload.size));
            return Err(reopen(err));
        }
    };
    if sha256 != upload.sha256 {
        remove_file_chunks(&upload, chunks);
        return Err(reopen(
            ApiError::new(
                422,
                "checksum_mismatch",
                "the parts' SHA-256 differs from the upload's: send the parts whose sha256 \
                 (GET the upload) differs from yours again, then complete",
            )
            .with_extra("sha256", sha256),
        ));
    }
    stored::complete(&db, &upload, chunks, ctx.now())?;
    for part in &parts {
        // The parts' bytes are the file's now; their staging copies go (best effort: the
        // prune job removes what is left when the upload expires).
        let _ = remove_attempt_chunks(client_id, &upload.id, &part.attempt);
    }
    let file = files::load_ready(&db, client_id, &upload.id)?;
    Ok(Json(files::view(&file, &Links::load())))
}

/// Removes an upload's attempts (their bytes and rows) and its row; a completed upload's
/// file stays.
fn discard(db: &Db, client_id: &str, upload_id: &str) -> Result<(), ApiError> {
    for attempt in stored::attempts(db, client_id, upload_id)? {
        remove_attempt_chunks(client_id, upload_id, &attempt)?;
    }
    stored::delete(db, client_id, upload_id)
}

/// Gives up an upload and removes its parts.
fn abort(ctx: &UserCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let upload = load_own(ctx, &db)?;
    discard(&db, &upload.client_id, &upload.id)?;
    Ok(Json(Deleted::of(upload.id)))
}

/// Removes up to `batch` expired uploads with every attempt's bytes (the prune job).
pub fn remove_expired(db: &Db, now: i64, batch: i64) -> Result<i64, ApiError> {
    let expired = stored::expired(db, now, batch)?;
    for key in &expired {
        discard(db, &key.client_id, &key.id)?;
    }
    Ok(expired.len() as i64)
}
