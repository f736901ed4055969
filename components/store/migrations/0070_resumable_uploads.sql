-- Resumable uploads: a file sent in numbered parts (at most 8 MiB each, any order), for
-- hosts that cap a request body (Fermyon Wasm Functions: about 10 MiB). Each attempt at a
-- part writes its bytes to the key-value store under its own keys
-- (`upload:{client_id}:{upload_id}:{attempt}:{k}`, 1 MiB chunks) and is recorded here
-- first as `writing`, then `stored` (the part's current bytes; an earlier stored attempt
-- becomes `superseded` and is removed). Completion seals the upload, checks the size and
-- SHA-256, copies the parts into the file's chunks and records the file `ready` (its id is
-- the upload's). Uploads expire; the prune job removes them and every attempt's bytes.
CREATE TABLE IF NOT EXISTS uploads (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    part_size BIGINT NOT NULL,
    part_count BIGINT NOT NULL,
    is_public BIGINT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS uploads_owner ON uploads (client_id, owner_id, status);
CREATE INDEX IF NOT EXISTS uploads_expiry ON uploads (expires_at);

CREATE TABLE IF NOT EXISTS upload_parts (
    attempt TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    upload_id TEXT NOT NULL,
    n BIGINT NOT NULL,
    status TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS upload_parts_upload ON upload_parts (upload_id, n, status);
