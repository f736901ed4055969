-- Recording with the SFU's egress: each broadcast's settings, the tenant's default, and
-- one row per recording (an egress run) with its state, output and result.
CREATE TABLE IF NOT EXISTS recording_settings (
    broadcast_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    enabled BIGINT NOT NULL DEFAULT 0,
    layout TEXT NOT NULL DEFAULT 'default',
    output TEXT NOT NULL DEFAULT 'hls',
    updated_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS recording_defaults (
    client_id TEXT PRIMARY KEY,
    enabled BIGINT NOT NULL DEFAULT 0,
    layout TEXT NOT NULL DEFAULT 'default',
    output TEXT NOT NULL DEFAULT 'hls',
    updated_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS recordings (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    egress_id TEXT UNIQUE,
    status TEXT NOT NULL,
    layout TEXT NOT NULL,
    output TEXT NOT NULL,
    object_key TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 1,
    url TEXT,
    duration_ms BIGINT,
    size_bytes BIGINT,
    error TEXT,
    created_at BIGINT NOT NULL,
    -- Orders a broadcast's recordings (several may start within one second).
    created_ms BIGINT NOT NULL,
    started_at BIGINT,
    ended_at BIGINT,
    updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS recordings_broadcast ON recordings (broadcast_id, created_ms);
