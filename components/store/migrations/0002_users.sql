-- Users of each tenant. Usernames and e-mails are unique per tenant, ignoring case.
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    username TEXT NOT NULL,
    username_key TEXT NOT NULL,
    email TEXT NOT NULL,
    email_key TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    first_name TEXT,
    last_name TEXT,
    avatar_url TEXT,
    phone_number TEXT,
    token_version BIGINT NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (client_id, username_key),
    UNIQUE (client_id, email_key)
);

-- Refresh tokens, stored as SHA-256. Each login starts a family; every use rotates the
-- token within it, and presenting a rotated token again revokes the whole family.
CREATE TABLE IF NOT EXISTS refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    family_id TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    rotated BIGINT NOT NULL DEFAULT 0,
    revoked BIGINT NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS refresh_tokens_user ON refresh_tokens (client_id, user_id);
CREATE INDEX IF NOT EXISTS refresh_tokens_family ON refresh_tokens (family_id);

CREATE TABLE IF NOT EXISTS follows (
    client_id TEXT NOT NULL,
    follower_id TEXT NOT NULL,
    followee_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (client_id, follower_id, followee_id)
);
CREATE INDEX IF NOT EXISTS follows_followee ON follows (client_id, followee_id);

-- A user's contact entry for another user they follow or who follows them; the display
-- fields are the owner's own notes and never change the other user's profile.
CREATE TABLE IF NOT EXISTS contacts (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    contact_user_id TEXT NOT NULL,
    display_name TEXT,
    first_name TEXT,
    last_name TEXT,
    email TEXT,
    phone_number TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (client_id, owner_id, contact_user_id)
);

-- Messages from the public contact form.
CREATE TABLE IF NOT EXISTS contact_messages (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    message TEXT NOT NULL,
    client_addr TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- Events counted by rate limits (login failures, contact form posts, chat messages).
CREATE TABLE IF NOT EXISTS rate_events (
    bucket TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS rate_events_bucket ON rate_events (bucket, at);
