-- A user's link to an account on the external music platform: at most one per user.
-- music_user_id is set only by a verified flow (authenticate or link-existing); the music
-- token is stored sealed with AES-256-GCM (key from the `music_token_key` variable), never
-- in clear, and is erased with the row on unlink.
CREATE TABLE IF NOT EXISTS music_links (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    music_user_id TEXT,
    music_token TEXT,
    is_active BIGINT NOT NULL DEFAULT 1,
    linked_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (client_id, user_id)
);
