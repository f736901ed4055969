-- The media plane. Each broadcast's ingest (its current or last publisher, the key it
-- published with, its health, the SFU egress that feeds it), the deadline by which a
-- dropped publisher must come back before the broadcast completes, restream targets, a
-- health sample per broadcast and minute, and suspended tenants.
ALTER TABLE broadcasts ADD COLUMN ingest_deadline BIGINT;
ALTER TABLE sdk_clients ADD COLUMN suspended_at BIGINT;

CREATE TABLE IF NOT EXISTS media_ingests (
    broadcast_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    -- The live publisher's connection (the media server's name for it); NULL when none.
    connection TEXT UNIQUE,
    publish_key TEXT,
    started_at BIGINT,
    last_update BIGINT,
    ended_at BIGINT,
    publishes BIGINT NOT NULL DEFAULT 0,
    health TEXT,
    health_sample TEXT,
    health_changed_at BIGINT,
    sfu_egress_id TEXT,
    updated_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS restream_targets (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    name TEXT,
    -- The server URL as shown (no credentials, no query); the whole destination, key
    -- included, is only kept sealed.
    display_url TEXT NOT NULL,
    sealed_destination TEXT NOT NULL,
    key_hint TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'idle',
    error TEXT,
    created_at BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS restream_targets_broadcast ON restream_targets (broadcast_id, created_ms);

CREATE TABLE IF NOT EXISTS ingest_health_minutes (
    broadcast_id TEXT NOT NULL,
    minute BIGINT NOT NULL,
    client_id TEXT NOT NULL,
    health TEXT NOT NULL,
    sample TEXT NOT NULL,
    PRIMARY KEY (broadcast_id, minute)
);
