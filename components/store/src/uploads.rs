//! Resumable uploads (`uploads`) and the attempts at their parts (`upload_parts`). The
//! bytes live in the key-value store, under each attempt's own keys; this module records
//! which attempt holds a part's current bytes, so that concurrent and late writers never
//! change bytes a completion is reading (see migration 0070).
//!
//! An upload is `open` (parts accepted), `sealed` (a completion is checking and copying
//! it; no part accepted), then `complete` (its file is ready). An attempt is `writing`
//! (bytes being stored), `stored` (the part's current bytes) or `superseded`.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::time;

/// An upload's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadRow {
    pub id: String,
    pub client_id: String,
    pub owner_id: String,
    pub filename: String,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    pub part_size: u64,
    pub part_count: u64,
    pub is_public: bool,
    pub status: String,
    pub created_at: String,
    pub expires_at: i64,
}

fn unsigned(row: &Row, column: &str) -> u64 {
    u64::try_from(row.int(column)).unwrap_or(0)
}

fn bigint(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn from_row(row: &Row) -> UploadRow {
    UploadRow {
        id: row.text("id"),
        client_id: row.text("client_id"),
        owner_id: row.text("owner_id"),
        filename: row.text("filename"),
        content_type: row.text("content_type"),
        size: unsigned(row, "size"),
        sha256: row.text("sha256"),
        part_size: unsigned(row, "part_size"),
        part_count: unsigned(row, "part_count"),
        is_public: row.bool("is_public"),
        status: row.text("status"),
        created_at: row.text("created_at"),
        expires_at: row.int("expires_at"),
    }
}

/// A new upload: what the file will be and how it is cut.
#[derive(Debug, Clone)]
pub struct NewUpload {
    pub id: String,
    pub filename: String,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    pub part_size: u64,
    pub part_count: u64,
    pub is_public: bool,
    pub expires_at: i64,
}

/// Records a new `open` upload of `owner_id`.
/// Declares an upload unless its owner has `cap` open already (`None` then): counted and
/// inserted under the owner's row lock, so concurrent declarations cannot pass the cap.
pub fn insert_capped(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    new: &NewUpload,
    cap: i64,
    now: i64,
) -> Result<Option<UploadRow>, ApiError> {
    db.transaction(|tx| {
        super::users::lock(tx, client_id, owner_id)?;
        if open_count(tx, client_id, owner_id, now)? >= cap {
            return Ok(None);
        }
        insert(tx, client_id, owner_id, new, now).map(Some)
    })
}

pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    new: &NewUpload,
    now: i64,
) -> Result<UploadRow, ApiError> {
    let rows = db.query(
        "INSERT INTO uploads (id, client_id, owner_id, filename, content_type, size, sha256, \
           part_size, part_count, is_public, status, created_at, expires_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?) RETURNING *",
        &[
            new.id.clone().into(),
            client_id.into(),
            owner_id.into(),
            new.filename.clone().into(),
            new.content_type.clone().into(),
            bigint(new.size),
            new.sha256.clone().into(),
            bigint(new.part_size),
            bigint(new.part_count),
            new.is_public.into(),
            time::format_rfc3339(now).into(),
            Value::Int(new.expires_at),
        ],
    )?;
    rows.first()
        .map(from_row)
        .ok_or_else(|| ApiError::internal("the upload was not recorded"))
}

/// How many unexpired uploads `owner_id` has open (or being completed).
pub fn open_count(db: &Db, client_id: &str, owner_id: &str, now: i64) -> Result<i64, ApiError> {
    db.count(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM uploads WHERE client_id = ? AND owner_id = ? \
         AND status <> 'complete' AND expires_at > ?",
        &[client_id.into(), owner_id.into(), Value::Int(now)],
    )
}

/// The tenant's upload `id`, unless it has expired.
pub fn load(db: &Db, client_id: &str, id: &str, now: i64) -> Result<Option<UploadRow>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM uploads WHERE client_id = ? AND id = ? AND expires_at > ?",
            &[client_id.into(), id.into(), Value::Int(now)],
        )?
        .as_ref()
        .map(from_row))
}

/// A part's current bytes: which attempt holds them, how long and what hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPart {
    pub n: u64,
    pub attempt: String,
    pub size: u64,
    pub sha256: String,
}

/// The parts received so far, by number.
pub fn stored_parts(
    db: &Db,
    client_id: &str,
    upload_id: &str,
) -> Result<Vec<StoredPart>, ApiError> {
    let rows = db.query(
        "SELECT n, attempt, size, sha256 FROM upload_parts \
         WHERE client_id = ? AND upload_id = ? AND status = 'stored' ORDER BY n",
        &[client_id.into(), upload_id.into()],
    )?;
    Ok(rows
        .iter()
        .map(|row| StoredPart {
            n: unsigned(row, "n"),
            attempt: row.text("attempt"),
            size: unsigned(row, "size"),
            sha256: row.text("sha256"),
        })
        .collect())
}

/// Records an attempt at part `n` before its bytes are written, so that its keys can be
/// found and removed even if the writer dies.
pub fn begin_attempt(
    db: &Db,
    client_id: &str,
    upload_id: &str,
    n: u64,
    attempt: &str,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO upload_parts (attempt, client_id, upload_id, n, status, size, sha256, created_at) \
         VALUES (?, ?, ?, ?, 'writing', 0, '', ?)",
        &[
            attempt.into(),
            client_id.into(),
            upload_id.into(),
            bigint(n),
            Value::Int(now),
        ],
    )
}

/// An attempt whose bytes are written: part `n` of `upload_id`, `size` bytes hashing to
/// `sha256`.
#[derive(Debug, Clone, Copy)]
pub struct WrittenPart<'a> {
    pub upload_id: &'a str,
    pub n: u64,
    pub attempt: &'a str,
    pub size: u64,
    pub sha256: &'a str,
}

/// What became of a written attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartOutcome {
    /// It holds the part's bytes now; the attempts it replaced are to be removed.
    Stored { superseded: Vec<String> },
    /// The upload was no longer open (sealed, complete, aborted or expired): the attempt
    /// is to be removed.
    Closed,
}

/// Makes a written attempt the part's current bytes, if the upload is still open: decided
/// under the upload's row lock, so a completion that sealed the upload first never sees
/// it, and two attempts at one part leave exactly one stored.
pub fn store_attempt(
    db: &Db,
    client_id: &str,
    part: &WrittenPart<'_>,
    now: i64,
) -> Result<PartOutcome, ApiError> {
    let WrittenPart {
        upload_id,
        n,
        attempt,
        size,
        sha256,
    } = *part;
    db.transaction(|tx| {
        let open = tx.query(
            "UPDATE uploads SET status = status WHERE client_id = ? AND id = ? \
             AND status = 'open' AND expires_at > ? RETURNING id",
            &[client_id.into(), upload_id.into(), Value::Int(now)],
        )?;
        if open.is_empty() {
            return Ok(PartOutcome::Closed);
        }
        let superseded = tx.query(
            "UPDATE upload_parts SET status = 'superseded' \
             WHERE client_id = ? AND upload_id = ? AND n = ? AND status = 'stored' RETURNING attempt",
            &[client_id.into(), upload_id.into(), bigint(n)],
        )?;
        tx.execute(
            "UPDATE upload_parts SET status = 'stored', size = ?, sha256 = ? \
             WHERE client_id = ? AND attempt = ?",
            &[bigint(size), sha256.into(), client_id.into(), attempt.into()],
        )?;
        Ok(PartOutcome::Stored {
            superseded: superseded.iter().map(|r| r.text("attempt")).collect(),
        })
    })
}

/// Forgets attempts whose keys have been removed.
pub fn forget_attempts(db: &Db, client_id: &str, attempts: &[String]) -> Result<(), ApiError> {
    for attempt in attempts {
        db.execute(
            "DELETE FROM upload_parts WHERE client_id = ? AND attempt = ? AND status <> 'stored'",
            &[client_id.into(), attempt.clone().into()],
        )?;
    }
    Ok(())
}

/// Closes an open upload to parts for its completion; true when it is sealed now (by this
/// call or an earlier completion that did not finish), false when it is neither.
pub fn seal(db: &Db, client_id: &str, id: &str, now: i64) -> Result<bool, ApiError> {
    let sealed = db.query(
        "UPDATE uploads SET status = 'sealed' WHERE client_id = ? AND id = ? \
         AND status IN ('open', 'sealed') AND expires_at > ? RETURNING id",
        &[client_id.into(), id.into(), Value::Int(now)],
    )?;
    Ok(!sealed.is_empty())
}

/// Opens a sealed upload to parts again (its bytes did not match the declared hash).
pub fn reopen(db: &Db, client_id: &str, id: &str) -> Result<(), ApiError> {
    db.execute(
        "UPDATE uploads SET status = 'open' WHERE client_id = ? AND id = ? AND status = 'sealed'",
        &[client_id.into(), id.into()],
    )
}

/// Records the finished file (`ready`, its id the upload's, `chunk_count` chunks already
/// written) and the upload `complete`, in one transaction; a second completion finds the
/// file there and changes nothing.
pub fn complete(db: &Db, upload: &UploadRow, chunk_count: u64, now: i64) -> Result<(), ApiError> {
    db.transaction(|tx| {
        tx.query(
            "INSERT INTO files (id, client_id, owner_id, filename, content_type, size, sha256, \
               chunk_count, is_public, status, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'ready', ?) ON CONFLICT (id) DO NOTHING RETURNING id",
            &[
                upload.id.clone().into(),
                upload.client_id.clone().into(),
                upload.owner_id.clone().into(),
                upload.filename.clone().into(),
                upload.content_type.clone().into(),
                bigint(upload.size),
                upload.sha256.clone().into(),
                bigint(chunk_count),
                upload.is_public.into(),
                time::format_rfc3339(now).into(),
            ],
        )?;
        tx.execute(
            "UPDATE uploads SET status = 'complete' WHERE client_id = ? AND id = ?",
            &[upload.client_id.clone().into(), upload.id.clone().into()],
        )
    })
}

/// Every attempt recorded for an upload, whatever its state (for removing their keys).
pub fn attempts(db: &Db, client_id: &str, upload_id: &str) -> Result<Vec<String>, ApiError> {
    let rows = db.query(
        "SELECT attempt FROM upload_parts WHERE client_id = ? AND upload_id = ?",
        &[client_id.into(), upload_id.into()],
    )?;
    Ok(rows.iter().map(|r| r.text("attempt")).collect())
}

/// Removes an upload's row and its attempts' rows (their keys are the caller's to remove
/// first); a completed upload's file stays.
pub fn delete(db: &Db, client_id: &str, id: &str) -> Result<(), ApiError> {
    db.transaction(|tx| {
        tx.execute(
            "DELETE FROM upload_parts WHERE client_id = ? AND upload_id = ?",
            &[client_id.into(), id.into()],
        )?;
        tx.execute(
            "DELETE FROM uploads WHERE client_id = ? AND id = ?",
            &[client_id.into(), id.into()],
        )
    })
}

/// An upload named by its tenant and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadKey {
    pub client_id: String,
    pub id: String,
}

/// Up to `batch` uploads that expired at or before `now`, completed or not.
pub fn expired(db: &Db, now: i64, batch: i64) -> Result<Vec<UploadKey>, ApiError> {
    let rows = db.query(
        "SELECT client_id, id FROM uploads WHERE expires_at <= ? ORDER BY expires_at LIMIT ?",
        &[Value::Int(now), Value::Int(batch)],
    )?;
    Ok(rows
        .iter()
        .map(|row| UploadKey {
            client_id: row.text("client_id"),
            id: row.text("id"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{files, testing};

    fn new(id: &str, expires_at: i64) -> NewUpload {
        NewUpload {
            id: id.into(),
            filename: "film.mp4".into(),
            content_type: "video/mp4".into(),
            size: 20,
            sha256: "ab".repeat(32),
            part_size: 8,
            part_count: 3,
            is_public: false,
            expires_at,
        }
    }

    fn write(db: &Db, upload: &str, n: u64, attempt: &str) -> PartOutcome {
        begin_attempt(db, "c1", upload, n, attempt, 10).unwrap();
        let sha256 = format!("hash-{attempt}");
        let part = WrittenPart {
            upload_id: upload,
            n,
            attempt,
            size: 8,
            sha256: &sha256,
        };
        store_attempt(db, "c1", &part, 10).unwrap()
    }

    #[test]
    fn an_upload_is_its_tenants_until_it_expires() {
        let db = testing::db();
        let row = insert(&db, "c1", "ada", &new("u1", 1_000), 10).unwrap();
        assert_eq!(
            (row.status.as_str(), row.part_count, row.size),
            ("open", 3, 20)
        );
        assert_eq!(load(&db, "c1", "u1", 999).unwrap(), Some(row));
        assert_eq!(load(&db, "c2", "u1", 999).unwrap(), None);
        assert_eq!(load(&db, "c1", "u1", 1_000).unwrap(), None);
        assert_eq!(open_count(&db, "c1", "ada", 999).unwrap(), 1);
        assert_eq!(open_count(&db, "c1", "ada", 1_000).unwrap(), 0);
        assert_eq!(open_count(&db, "c1", "bob", 999).unwrap(), 0);
    }

    #[test]
    fn a_retried_part_supersedes_the_earlier_attempt() {
        let db = testing::db();
        insert(&db, "c1", "ada", &new("u1", 1_000), 10).unwrap();
        assert_eq!(
            write(&db, "u1", 2, "a1"),
            PartOutcome::Stored { superseded: vec![] }
        );
        assert_eq!(
            write(&db, "u1", 1, "b1"),
            PartOutcome::Stored { superseded: vec![] }
        );
        assert_eq!(
            write(&db, "u1", 2, "a2"),
            PartOutcome::Stored {
                superseded: vec!["a1".into()]
            }
        );
        let parts = stored_parts(&db, "c1", "u1").unwrap();
        let seen: Vec<(u64, &str)> = parts.iter().map(|p| (p.n, p.attempt.as_str())).collect();
        assert_eq!(seen, [(1, "b1"), (2, "a2")]);
        assert_eq!(parts[1].sha256, "hash-a2");
        forget_attempts(&db, "c1", &["a1".into(), "a2".into()]).unwrap();
        // A stored attempt is never forgotten by mistake.
        assert_eq!(stored_parts(&db, "c1", "u1").unwrap().len(), 2);
        assert_eq!(attempts(&db, "c1", "u1").unwrap().len(), 2);
        // Another tenant's part never counts.
        assert!(stored_parts(&db, "c2", "u1").unwrap().is_empty());
    }

    #[test]
    fn a_sealed_upload_takes_no_part_and_reopens_on_a_mismatch() {
        let db = testing::db();
        insert(&db, "c1", "ada", &new("u1", 1_000), 10).unwrap();
        write(&db, "u1", 1, "a1");
        assert!(seal(&db, "c1", "u1", 10).unwrap());
        assert!(seal(&db, "c1", "u1", 10).unwrap(), "a retried completion");
        assert!(!seal(&db, "c2", "u1", 10).unwrap());
        begin_attempt(&db, "c1", "u1", 1, "late", 10).unwrap();
        let part = |n, attempt| WrittenPart {
            upload_id: "u1",
            n,
            attempt,
            size: 8,
            sha256: "x",
        };
        let late = store_attempt(&db, "c1", &part(1, "late"), 10).unwrap();
        assert_eq!(late, PartOutcome::Closed);
        assert_eq!(stored_parts(&db, "c1", "u1").unwrap()[0].attempt, "a1");
        reopen(&db, "c1", "u1").unwrap();
        assert!(matches!(
            write(&db, "u1", 1, "a2"),
            PartOutcome::Stored { .. }
        ));
        // Expired: closed to parts and to completion.
        assert!(!seal(&db, "c1", "u1", 1_000).unwrap());
        begin_attempt(&db, "c1", "u1", 2, "too-late", 1_000).unwrap();
        let expired = store_attempt(&db, "c1", &part(2, "too-late"), 1_000).unwrap();
        assert_eq!(expired, PartOutcome::Closed);
    }

    #[test]
    fn completion_records_the_ready_file_once() {
        let db = testing::db();
        let row = insert(&db, "c1", "ada", &new("u1", 1_000), 10).unwrap();
        assert!(seal(&db, "c1", "u1", 20).unwrap());
        complete(&db, &row, 1, 30).unwrap();
        complete(&db, &row, 1, 40).unwrap();
        let file = files::load_ready(&db, "c1", "u1").unwrap().unwrap();
        assert_eq!(
            (file.size, file.chunk_count, file.owner_id.as_str()),
            (20, 1, "ada")
        );
        assert_eq!(file.created_at, time::format_rfc3339(30));
        let upload = load(&db, "c1", "u1", 50).unwrap().unwrap();
        assert_eq!(upload.status, "complete");
        assert!(!seal(&db, "c1", "u1", 50).unwrap());
        assert_eq!(open_count(&db, "c1", "ada", 50).unwrap(), 0);
        // Removing the expired upload keeps the file.
        delete(&db, "c1", "u1").unwrap();
        assert!(files::load_ready(&db, "c1", "u1").unwrap().is_some());
    }

    #[test]
    fn expired_uploads_are_found_oldest_first_in_batches() {
        let db = testing::db();
        insert(&db, "c1", "ada", &new("late", 3_000), 10).unwrap();
        insert(&db, "c2", "bob", &new("early", 2_000), 10).unwrap();
        insert(&db, "c1", "ada", &new("fresh", 9_000), 10).unwrap();
        begin_attempt(&db, "c2", "early", 1, "w1", 10).unwrap();
        let found = expired(&db, 5_000, 10).unwrap();
        let ids: Vec<&str> = found.iter().map(|k| k.id.as_str()).collect();
        assert_eq!(ids, ["early", "late"]);
        assert_eq!(expired(&db, 5_000, 1).unwrap().len(), 1);
        assert_eq!(attempts(&db, "c2", "early").unwrap(), ["w1"]);
        delete(&db, "c2", "early").unwrap();
        assert!(attempts(&db, "c2", "early").unwrap().is_empty());
        assert_eq!(expired(&db, 5_000, 10).unwrap().len(), 1);
    }
}
