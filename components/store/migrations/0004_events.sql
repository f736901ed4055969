-- Scheduled events: a broadcast announced ahead of time. An event gets its stream
-- identity from the same creation code as a broadcast; its room_name is the SFU room.
CREATE TABLE IF NOT EXISTS scheduled_events (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT,
    visibility TEXT NOT NULL,
    scheduled_for BIGINT NOT NULL,
    playback_url TEXT,
    playback_type TEXT,
    short_id TEXT NOT NULL UNIQUE,
    stream_id TEXT NOT NULL UNIQUE,
    stream_key TEXT NOT NULL UNIQUE,
    room_name TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS scheduled_events_time ON scheduled_events (client_id, scheduled_for);
