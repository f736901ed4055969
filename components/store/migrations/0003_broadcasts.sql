-- Broadcast sessions. One record whichever endpoint created it (broadcast API, streaming
-- sessions, or the SDK client's /api/v1/sessions, which leaves owner_id NULL).
CREATE TABLE IF NOT EXISTS broadcasts (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    owner_id TEXT,
    short_id TEXT NOT NULL UNIQUE,
    stream_id TEXT NOT NULL UNIQUE,
    stream_key TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    visibility TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    status TEXT NOT NULL,
    device_width BIGINT,
    device_height BIGINT,
    device_type TEXT,
    operating_system TEXT,
    orientation TEXT NOT NULL DEFAULT 'portrait',
    recording_width BIGINT,
    recording_height BIGINT,
    max_participants BIGINT NOT NULL DEFAULT 100,
    viewer_count BIGINT NOT NULL DEFAULT 0,
    peak_viewers BIGINT NOT NULL DEFAULT 0,
    viewer_reports BIGINT NOT NULL DEFAULT 0,
    viewer_total BIGINT NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    started_at TEXT,
    ended_at TEXT,
    last_heartbeat BIGINT
);
CREATE INDEX IF NOT EXISTS broadcasts_owner ON broadcasts (client_id, owner_id, created_at);
CREATE INDEX IF NOT EXISTS broadcasts_status ON broadcasts (client_id, status, created_at);

CREATE TABLE IF NOT EXISTS broadcast_reactions (
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    count BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (broadcast_id, kind)
);
