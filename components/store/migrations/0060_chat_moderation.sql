-- Chat moderation: restrictions (timeouts and bans, per stream or channel-wide), each
-- stream's chat settings (modes, the pinned message), blocked-word lists (a creator's, and
-- the tenant's default under owner_id ''), reports and held messages, and the log.

-- One restriction per user and scope: scope 'stream' (scope_id a streamId) or 'channel'
-- (scope_id the creator's user id: all of the creator's streams). A ban has no end
-- (until_ms NULL); a timeout ends at until_ms.
CREATE TABLE IF NOT EXISTS chat_restrictions (
    client_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    until_ms BIGINT,
    reason TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (client_id, scope, scope_id, user_id)
);
CREATE INDEX IF NOT EXISTS chat_restrictions_user ON chat_restrictions (client_id, user_id);

CREATE TABLE IF NOT EXISTS chat_settings (
    client_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    slow_mode_seconds BIGINT NOT NULL DEFAULT 0,
    -- NULL: off; N: followers of at least N minutes may chat.
    followers_only_minutes BIGINT,
    subscribers_only BIGINT NOT NULL DEFAULT 0,
    reactions_only BIGINT NOT NULL DEFAULT 0,
    pinned_message_id TEXT,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (client_id, stream_id)
);

CREATE TABLE IF NOT EXISTS chat_word_lists (
    client_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    words TEXT NOT NULL,
    action TEXT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (client_id, owner_id)
);

-- A viewer's report of a message (kind 'report'), or a message held by a blocked word
-- (kind 'held', no reporter) awaiting a moderator.
CREATE TABLE IF NOT EXISTS chat_reports (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    reporter_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    resolution TEXT,
    resolved_by TEXT,
    resolved_ms BIGINT,
    created_ms BIGINT NOT NULL,
    UNIQUE (client_id, message_id, reporter_id)
);
CREATE INDEX IF NOT EXISTS chat_reports_queue ON chat_reports (client_id, stream_id, status, created_ms);

CREATE TABLE IF NOT EXISTS chat_moderation_log (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target_user_id TEXT,
    message_id TEXT,
    reason TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '{}',
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS chat_moderation_log_scope ON chat_moderation_log (client_id, scope, scope_id, created_ms);

-- A message held for review is stored but shown to nobody until a moderator approves it.
ALTER TABLE chat_messages ADD COLUMN held BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS chat_messages_sender ON chat_messages (client_id, stream_id, sender_id, created_ms);
