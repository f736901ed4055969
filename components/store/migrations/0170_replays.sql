-- A broadcast's replay of its RTMP ingest (docs/replays.md): kept by the media server from
-- its first publish, written when the broadcast ends. `state` is `processing` (ended, the
-- media server writes it), `ready`, `failed`, `deleting` (expired, deleted by its owner or
-- with its broadcast: the media server deletes its media) or `deleted` (`deleted_at` says
-- when). `expires_at` is when retention
-- deletes its media (NULL: kept). A tenant keeps replays (`replay_enabled`, 1) for
-- `replay_retention_days` days (NULL: for ever).
CREATE TABLE IF NOT EXISTS replays (
    broadcast_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    state TEXT NOT NULL,
    duration_ms BIGINT,
    renditions BIGINT,
    error TEXT,
    created_at BIGINT NOT NULL,
    ready_at BIGINT,
    expires_at BIGINT,
    deleted_at BIGINT
);
CREATE INDEX IF NOT EXISTS replays_stream ON replays (stream_id);
CREATE INDEX IF NOT EXISTS replays_expiry ON replays (state, expires_at);
ALTER TABLE sdk_clients ADD COLUMN replay_enabled BIGINT NOT NULL DEFAULT 1;
ALTER TABLE sdk_clients ADD COLUMN replay_retention_days BIGINT;
