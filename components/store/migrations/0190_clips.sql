-- Clips of a broadcast's kept media (docs/replays.md#clips), scoped by tenant. A clip is
-- `processing` (the media server writes its HLS playlists, `hls_ready_at` once they are,
-- then its MP4), `ready` (the MP4 too), `failed` (`error`: a reason code), `deleting` (its
-- media is to be deleted) or `deleted`. `start_ms` is where it starts in the media time
-- of the stream (NULL until the media server places a `last_seconds` clip); `created_by`
-- is the user who made it (NULL: the tenant's server).
CREATE TABLE IF NOT EXISTS clips (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    title TEXT,
    start_ms BIGINT,
    last_seconds BIGINT,
    duration_s BIGINT NOT NULL,
    state TEXT NOT NULL,
    hls_ready_at BIGINT,
    hls_duration_ms BIGINT,
    mp4_duration_ms BIGINT,
    mp4_bytes BIGINT,
    thumbnail BIGINT NOT NULL DEFAULT 0,
    error TEXT,
    created_by TEXT,
    created_at BIGINT NOT NULL,
    ready_at BIGINT,
    deleted_at BIGINT
);
CREATE INDEX IF NOT EXISTS clips_broadcast ON clips (client_id, broadcast_id, created_at);
CREATE INDEX IF NOT EXISTS clips_state ON clips (state, created_at);
-- Whether viewers (not only the owner and the tenant's server) may clip (1).
ALTER TABLE sdk_clients ADD COLUMN replay_viewer_clips BIGINT NOT NULL DEFAULT 0;
