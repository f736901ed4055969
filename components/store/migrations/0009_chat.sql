-- Persisted chat. Every message is stored under its stream (the streamId); one posted
-- through a broadcast's endpoint also names the broadcast.
CREATE TABLE IF NOT EXISTS chat_messages (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    broadcast_id TEXT,
    sender_id TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    deleted BIGINT NOT NULL DEFAULT 0,
    deleted_at TEXT,
    deleted_by TEXT
);
CREATE INDEX IF NOT EXISTS chat_messages_stream ON chat_messages (client_id, stream_id, created_ms);
