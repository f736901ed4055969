//! Files: the metadata of uploads whose bytes live in the key-value store. A row is
//! `uploading` while its chunks are written and becomes `ready` once all are stored; only
//! ready files are ever read back.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::ids;
use domain::pagination::Page;
use domain::time;

/// A stored file's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    pub id: String,
    pub client_id: String,
    pub owner_id: String,
    pub filename: String,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    pub chunk_count: u64,
    pub is_public: bool,
    pub created_at: String,
}

fn from_row(row: &Row) -> FileRow {
    FileRow {
        id: row.text("id"),
        client_id: row.text("client_id"),
        owner_id: row.text("owner_id"),
        filename: row.text("filename"),
        content_type: row.text("content_type"),
        size: u64::try_from(row.int("size")).unwrap_or(0),
        sha256: row.text("sha256"),
        chunk_count: u64::try_from(row.int("chunk_count")).unwrap_or(0),
        is_public: row.bool("is_public"),
        created_at: row.text("created_at"),
    }
}

/// What an upload is stored as.
#[derive(Debug, Clone)]
pub struct NewFile {
    pub filename: String,
    pub content_type: String,
    pub is_public: bool,
}

/// What the bytes turned out to be, once every chunk is written.
#[derive(Debug, Clone)]
pub struct Content {
    pub size: u64,
    pub sha256: String,
    pub chunk_count: u64,
}

fn bigint(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Records a new upload of `owner_id` as `uploading` (empty, not yet readable); answers
/// its id.
pub fn insert(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    new: &NewFile,
    now: i64,
) -> Result<String, ApiError> {
    let id = ids::uuid();
    db.execute(
        "INSERT INTO files (id, client_id, owner_id, filename, content_type, size, sha256, chunk_count, \
           is_public, status, created_at) VALUES (?, ?, ?, ?, ?, 0, '', 0, ?, 'uploading', ?)",
        &[
            id.clone().into(),
            client_id.into(),
            owner_id.into(),
            new.filename.clone().into(),
            new.content_type.clone().into(),
            new.is_public.into(),
            time::format_rfc3339(now).into(),
        ],
    )?;
    Ok(id)
}

/// Marks an upload `ready` with what its bytes are.
pub fn mark_ready(db: &Db, client_id: &str, id: &str, content: &Content) -> Result<(), ApiError> {
    db.execute(
        "UPDATE files SET size = ?, sha256 = ?, chunk_count = ?, status = 'ready' \
         WHERE client_id = ? AND id = ?",
        &[
            bigint(content.size),
            content.sha256.clone().into(),
            bigint(content.chunk_count),
            client_id.into(),
            id.into(),
        ],
    )
}

/// Removes a file's row (ready or not); its chunks are the caller's to remove.
pub fn delete(db: &Db, client_id: &str, id: &str) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM files WHERE client_id = ? AND id = ?",
        &[client_id.into(), id.into()],
    )
}

/// The tenant's ready file `id`, if any.
pub fn load_ready(db: &Db, client_id: &str, id: &str) -> Result<Option<FileRow>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM files WHERE client_id = ? AND id = ? AND status = 'ready'",
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// The ready public file `id` (of any tenant: public files are served without one).
pub fn load_public(db: &Db, id: &str) -> Result<Option<FileRow>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM files WHERE id = ? AND status = 'ready' AND is_public = 1",
            &[id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// One page of `owner_id`'s ready files, newest first; and how many there are.
pub fn page_of_owner(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    page: Page,
) -> Result<(Vec<FileRow>, i64), ApiError> {
    let (rows, total) = db.page(
        "files",
        "client_id = ? AND owner_id = ? AND status = 'ready'",
        &[client_id.into(), owner_id.into()],
        "created_at DESC, id",
        page,
    )?;
    Ok((rows.iter().map(from_row).collect(), total))
}

/// An upload named by its tenant and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileKey {
    pub client_id: String,
    pub id: String,
}

/// Up to `batch` uploads still `uploading` that were created before `before` (epoch
/// seconds): abandoned by an instance that stopped mid-upload.
pub fn abandoned(db: &Db, before: i64, batch: i64) -> Result<Vec<FileKey>, ApiError> {
    let rows = db.query(
        "SELECT client_id, id FROM files WHERE status = 'uploading' AND created_at < ? LIMIT ?",
        &[time::format_rfc3339(before).into(), Value::Int(batch)],
    )?;
    Ok(rows
        .iter()
        .map(|row| FileKey {
            client_id: row.text("client_id"),
            id: row.text("id"),
        })
        .collect())
}

/// Removes an abandoned upload's row, unless it became ready meanwhile.
pub fn delete_abandoned(db: &Db, key: &FileKey) -> Result<(), ApiError> {
    db.execute(
        "DELETE FROM files WHERE client_id = ? AND id = ? AND status = 'uploading'",
        &[key.client_id.clone().into(), key.id.clone().into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn new(name: &str, is_public: bool) -> NewFile {
        NewFile {
            filename: name.into(),
            content_type: "text/plain".into(),
            is_public,
        }
    }

    fn ready(db: &Db, client: &str, owner: &str, name: &str, public: bool, now: i64) -> String {
        let id = insert(db, client, owner, &new(name, public), now).unwrap();
        let content = Content {
            size: 3,
            sha256: "abc".into(),
            chunk_count: 1,
        };
        mark_ready(db, client, &id, &content).unwrap();
        id
    }

    #[test]
    fn only_ready_files_of_the_tenant_are_read() {
        let db = testing::db();
        let id = insert(&db, "c1", "ada", &new("a.txt", true), 100).unwrap();
        assert_eq!(load_ready(&db, "c1", &id).unwrap(), None);
        assert_eq!(load_public(&db, &id).unwrap(), None);
        let content = Content {
            size: 5_000_000_000,
            sha256: "f00d".into(),
            chunk_count: 4769,
        };
        mark_ready(&db, "c1", &id, &content).unwrap();
        let file = load_ready(&db, "c1", &id).unwrap().unwrap();
        assert_eq!(
            (file.size, file.chunk_count, file.sha256.as_str()),
            (5_000_000_000, 4769, "f00d")
        );
        assert_eq!(file.created_at, time::format_rfc3339(100));
        assert!(file.is_public && file.owner_id == "ada");
        assert_eq!(load_ready(&db, "c2", &id).unwrap(), None);
        assert_eq!(load_public(&db, &id).unwrap(), Some(file));
        delete(&db, "c2", &id).unwrap();
        assert!(load_ready(&db, "c1", &id).unwrap().is_some());
        delete(&db, "c1", &id).unwrap();
        assert_eq!(load_ready(&db, "c1", &id).unwrap(), None);
    }

    #[test]
    fn private_files_are_not_public() {
        let db = testing::db();
        let id = ready(&db, "c1", "ada", "p.txt", false, 1);
        assert_eq!(load_public(&db, &id).unwrap(), None);
        assert!(load_ready(&db, "c1", &id).unwrap().is_some());
    }

    #[test]
    fn an_owners_page_is_newest_first_and_ready_only() {
        let db = testing::db();
        let old = ready(&db, "c1", "ada", "old", false, 10);
        let new_one = ready(&db, "c1", "ada", "new", true, 20);
        ready(&db, "c1", "bob", "bobs", false, 30);
        ready(&db, "c2", "ada", "other tenant", false, 40);
        insert(&db, "c1", "ada", &new("half", false), 50).unwrap();
        let (items, total) = page_of_owner(&db, "c1", "ada", Page::default()).unwrap();
        assert_eq!(total, 2);
        let ids: Vec<&str> = items.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, [new_one.as_str(), old.as_str()]);
        let second = Page {
            limit: 1,
            offset: 1,
        };
        let (items, total) = page_of_owner(&db, "c1", "ada", second).unwrap();
        assert_eq!((items.len(), total), (1, 2));
        assert_eq!(items[0].id, old);
    }

    #[test]
    fn abandoned_uploads_are_old_uploading_ones() {
        let db = testing::db();
        let stale = insert(&db, "c1", "ada", &new("stale", false), 1_000).unwrap();
        insert(&db, "c2", "bob", &new("fresh", false), 5_000).unwrap();
        let done = ready(&db, "c1", "ada", "done", false, 1_000);
        let found = abandoned(&db, 2_000, 10).unwrap();
        assert_eq!(
            found,
            [FileKey {
                client_id: "c1".into(),
                id: stale.clone()
            }]
        );
        assert_eq!(abandoned(&db, 10_000, 1).unwrap().len(), 1);
        assert_eq!(abandoned(&db, 10_000, 10).unwrap().len(), 2);
        // A ready file is never removed as abandoned.
        delete_abandoned(
            &db,
            &FileKey {
                client_id: "c1".into(),
                id: done.clone(),
            },
        )
        .unwrap();
        assert!(load_ready(&db, "c1", &done).unwrap().is_some());
        delete_abandoned(&db, &found[0]).unwrap();
        assert!(abandoned(&db, 2_000, 10).unwrap().is_empty());
    }
}
