-- What a chat post's screening reads and writes, kept cheap.

-- A word list's patterns compiled when it is saved (`word_filter::compile`), so a post
-- does not prepare them again. NULL for lists saved before: they are compiled when read.
ALTER TABLE chat_word_lists ADD COLUMN compiled TEXT;

-- Slow mode: when each user's last message in a stream's chat was accepted. One guarded
-- upsert per post claims the next slot, inside the post's own transaction.
CREATE TABLE IF NOT EXISTS chat_slow_mode (
    client_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    last_ms BIGINT NOT NULL,
    PRIMARY KEY (client_id, stream_id, user_id)
);
CREATE INDEX IF NOT EXISTS chat_slow_mode_last ON chat_slow_mode (last_ms);
