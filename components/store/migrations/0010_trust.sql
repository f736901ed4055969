-- The trust model: replay keys in SQL (one statement decides a replay), co-host consent,
-- and race-free rate limits.

CREATE TABLE IF NOT EXISTS seen_signatures (
    client_id TEXT NOT NULL,
    signature TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (client_id, signature)
);
CREATE INDEX IF NOT EXISTS seen_signatures_expiry ON seen_signatures (expires_at);

-- How co-hosts join a broadcast: approval (requests the host decides), open, invite_only.
ALTER TABLE broadcasts ADD COLUMN cohost_policy TEXT NOT NULL DEFAULT 'approval';

-- Each rate event gets an id, so a refused one can be taken back; the short-lived windows
-- kept so far are dropped.
DELETE FROM rate_events;
ALTER TABLE rate_events ADD COLUMN nonce TEXT;
CREATE INDEX IF NOT EXISTS rate_events_at ON rate_events (at);

CREATE INDEX IF NOT EXISTS refresh_tokens_expiry ON refresh_tokens (expires_at);
CREATE INDEX IF NOT EXISTS files_uploading ON files (status, created_at);
