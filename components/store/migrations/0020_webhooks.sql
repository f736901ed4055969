-- Outbound webhooks: the tenant's endpoints and the delivery of each outbox event to each
-- endpoint subscribed to its type. Times are epoch seconds.

CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    url TEXT NOT NULL,
    description TEXT NOT NULL,
    -- JSON array of event types, or ["*"].
    events TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    -- Why the platform disabled it (410 Gone, 5 days of failures); NULL when the tenant did.
    disabled_reason TEXT,
    -- Signing secrets, sealed with the platform key; the previous one signs too until
    -- previous_secret_until (24 h after a rotation).
    secret_sealed TEXT NOT NULL,
    previous_secret_sealed TEXT,
    previous_secret_until BIGINT,
    -- When the current run of failed attempts began (NULL after a success).
    failing_since BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_client ON webhook_endpoints (client_id, created_at);

CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    -- pending | delivered | failed
    state TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    -- Attempts since the last (re)start of the retry schedule (a manual retry, a recover).
    schedule_step BIGINT NOT NULL,
    -- When a pending delivery is due; while an attempt runs, when its claim lapses.
    next_attempt_at BIGINT NOT NULL,
    last_attempt_at BIGINT,
    last_status BIGINT,
    last_error TEXT,
    last_latency_ms BIGINT,
    created_at BIGINT NOT NULL,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at);
