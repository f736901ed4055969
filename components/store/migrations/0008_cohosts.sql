-- Co-hosting of streaming sessions (broadcasts): the grid layout, co-hosts and their
-- permissions, single-use invites, SFU presence and the session's co-host metrics.
CREATE TABLE IF NOT EXISTS session_layouts (
    broadcast_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    layout TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS cohosts (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT NOT NULL,
    permissions TEXT NOT NULL,
    status TEXT NOT NULL,
    joined_at TEXT NOT NULL,
    removed_at TEXT,
    removed_by TEXT,
    UNIQUE (broadcast_id, user_id)
);

CREATE TABLE IF NOT EXISTS cohost_invites (
    token_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    permissions TEXT NOT NULL,
    invited_by TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);

-- Who is in the SFU room now, from the SFU's participant webhooks.
CREATE TABLE IF NOT EXISTS sfu_participants (
    broadcast_id TEXT NOT NULL,
    identity TEXT NOT NULL,
    client_id TEXT NOT NULL,
    is_cohost BIGINT NOT NULL,
    joined_at BIGINT NOT NULL,
    PRIMARY KEY (broadcast_id, identity)
);

CREATE TABLE IF NOT EXISTS session_metrics (
    broadcast_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    peak_cohosts BIGINT NOT NULL DEFAULT 0,
    joins BIGINT NOT NULL DEFAULT 0,
    leaves BIGINT NOT NULL DEFAULT 0,
    cohost_seconds BIGINT NOT NULL DEFAULT 0
);

-- Webhook deliveries already applied (the SFU retries).
CREATE TABLE IF NOT EXISTS sfu_webhook_events (
    id TEXT PRIMARY KEY,
    received_at BIGINT NOT NULL
);
