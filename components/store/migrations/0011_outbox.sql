-- The outbox: every lifecycle event a tenant's backend may subscribe to, written in the same
-- transaction as the change it reports. The webhooks job fans events out to endpoints.

CREATE TABLE IF NOT EXISTS outbox_events (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    dispatched_at BIGINT
);
CREATE INDEX IF NOT EXISTS outbox_events_pending ON outbox_events (dispatched_at, created_at);

-- The last sequence number given to each object's events.
CREATE TABLE IF NOT EXISTS outbox_sequences (
    client_id TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id TEXT NOT NULL,
    last BIGINT NOT NULL,
    PRIMARY KEY (client_id, object_type, object_id)
);
