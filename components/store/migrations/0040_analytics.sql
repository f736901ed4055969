-- Analytics, counted as things happen: one row per broadcast and minute (an upsert per
-- event), the sets that make counts unique (viewers, chatters), and the daily rows the
-- `rollup-analytics` job folds finished broadcasts into. Reads touch these, never raw rows.
CREATE TABLE IF NOT EXISTS analytics_minutes (
    broadcast_id TEXT NOT NULL,
    minute BIGINT NOT NULL,
    client_id TEXT NOT NULL,
    viewer_reports BIGINT NOT NULL DEFAULT 0,
    viewer_sum BIGINT NOT NULL DEFAULT 0,
    viewer_min BIGINT,
    viewer_max BIGINT NOT NULL DEFAULT 0,
    joins BIGINT NOT NULL DEFAULT 0,
    join_time_sum BIGINT NOT NULL DEFAULT 0,
    leaves BIGINT NOT NULL DEFAULT 0,
    leave_time_sum BIGINT NOT NULL DEFAULT 0,
    new_viewers BIGINT NOT NULL DEFAULT 0,
    messages BIGINT NOT NULL DEFAULT 0,
    new_chatters BIGINT NOT NULL DEFAULT 0,
    reactions BIGINT NOT NULL DEFAULT 0,
    gifts BIGINT NOT NULL DEFAULT 0,
    gift_tokens BIGINT NOT NULL DEFAULT 0,
    follows BIGINT NOT NULL DEFAULT 0,
    subscriptions BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (broadcast_id, minute)
);
CREATE INDEX IF NOT EXISTS analytics_minutes_tenant ON analytics_minutes (client_id, minute);

-- Every viewer identity seen in a broadcast, and whether it has a session open now.
CREATE TABLE IF NOT EXISTS analytics_viewers (
    broadcast_id TEXT NOT NULL,
    identity TEXT NOT NULL,
    watching BIGINT NOT NULL,
    PRIMARY KEY (broadcast_id, identity)
);

-- Every user who chatted in a broadcast.
CREATE TABLE IF NOT EXISTS analytics_chatters (
    broadcast_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    PRIMARY KEY (broadcast_id, user_id)
);

-- Finished broadcasts already folded into the daily rows.
CREATE TABLE IF NOT EXISTS analytics_rolled_up (
    broadcast_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    rolled_at BIGINT NOT NULL
);

-- A creator's (or, with owner_id '', the tenant server's sessions') channel per UTC day.
CREATE TABLE IF NOT EXISTS analytics_creator_days (
    client_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    day BIGINT NOT NULL,
    broadcasts BIGINT NOT NULL DEFAULT 0,
    live_seconds BIGINT NOT NULL DEFAULT 0,
    watch_seconds BIGINT NOT NULL DEFAULT 0,
    peak_viewers BIGINT NOT NULL DEFAULT 0,
    unique_viewers BIGINT NOT NULL DEFAULT 0,
    messages BIGINT NOT NULL DEFAULT 0,
    chatters BIGINT NOT NULL DEFAULT 0,
    reactions BIGINT NOT NULL DEFAULT 0,
    gifts BIGINT NOT NULL DEFAULT 0,
    gift_tokens BIGINT NOT NULL DEFAULT 0,
    follows BIGINT NOT NULL DEFAULT 0,
    subscriptions BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (client_id, owner_id, day)
);

-- The tenant per UTC day: the same figures over all its broadcasts, plus its users.
CREATE TABLE IF NOT EXISTS analytics_tenant_days (
    client_id TEXT NOT NULL,
    day BIGINT NOT NULL,
    broadcasts BIGINT NOT NULL DEFAULT 0,
    live_seconds BIGINT NOT NULL DEFAULT 0,
    watch_seconds BIGINT NOT NULL DEFAULT 0,
    peak_viewers BIGINT NOT NULL DEFAULT 0,
    unique_viewers BIGINT NOT NULL DEFAULT 0,
    messages BIGINT NOT NULL DEFAULT 0,
    chatters BIGINT NOT NULL DEFAULT 0,
    reactions BIGINT NOT NULL DEFAULT 0,
    gifts BIGINT NOT NULL DEFAULT 0,
    gift_tokens BIGINT NOT NULL DEFAULT 0,
    follows BIGINT NOT NULL DEFAULT 0,
    subscriptions BIGINT NOT NULL DEFAULT 0,
    new_users BIGINT NOT NULL DEFAULT 0,
    active_users BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (client_id, day)
);

-- Read-only dashboard links (`POST /api/broadcasts/{id}/analytics/share`): the token's
-- hash, the one broadcast it opens, until when.
CREATE TABLE IF NOT EXISTS analytics_shares (
    token_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- Users active on a day (signed up, logged in or refreshed a session), for active_users.
CREATE TABLE IF NOT EXISTS analytics_active_users (
    client_id TEXT NOT NULL,
    day BIGINT NOT NULL,
    user_id TEXT NOT NULL,
    PRIMARY KEY (client_id, day, user_id)
);
