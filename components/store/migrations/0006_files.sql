-- Uploaded files: metadata here, bytes in the key-value store in 1 MiB chunks under
-- `file:{client_id}:{id}:{n}`. A row is `uploading` while its chunks are written and
-- becomes `ready` only once every chunk is stored; only ready files are ever served.
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    chunk_count BIGINT NOT NULL,
    is_public BIGINT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS files_owner ON files (client_id, owner_id, created_at);

-- Playlists of a user, with ordered tracks; a track plays an uploaded file or an
-- external URL. The poster is a public file.
CREATE TABLE IF NOT EXISTS playlists (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    visibility TEXT NOT NULL,
    poster_file_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS playlists_owner ON playlists (client_id, owner_id, created_at);

CREATE TABLE IF NOT EXISTS playlist_tracks (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    playlist_id TEXT NOT NULL,
    position BIGINT NOT NULL,
    title TEXT NOT NULL,
    artist TEXT,
    duration_seconds BIGINT,
    file_id TEXT,
    url TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS playlist_tracks_order ON playlist_tracks (client_id, playlist_id, position);
