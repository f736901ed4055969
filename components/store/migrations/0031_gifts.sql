-- The tenant's gift catalog, and every gift sent (for combos, leaderboards, supporters).
CREATE TABLE IF NOT EXISTS gift_catalog (
    client_id TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    price_tokens BIGINT NOT NULL,
    image_file_id TEXT,
    animation TEXT NOT NULL,
    active BIGINT NOT NULL,
    sort_order BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (client_id, id)
);

CREATE TABLE IF NOT EXISTS gifts_sent (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    recipient_id TEXT NOT NULL,
    gift_id TEXT NOT NULL,
    gift_name TEXT NOT NULL,
    animation TEXT NOT NULL,
    quantity BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    diamonds BIGINT NOT NULL,
    anonymous BIGINT NOT NULL,
    combo BIGINT NOT NULL,
    operation_id TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS gifts_sent_broadcast ON gifts_sent (client_id, broadcast_id);
CREATE INDEX IF NOT EXISTS gifts_sent_recipient ON gifts_sent (client_id, recipient_id, created_at_ms);
CREATE INDEX IF NOT EXISTS gifts_sent_combo ON gifts_sent (sender_id, broadcast_id, gift_id, created_at_ms);
