-- Counts added to a broadcast's minute and not yet folded into its `analytics_minutes`
-- row (see store/analytics.rs `add`): every event of a broadcast (a gift, a reaction, a
-- chat message) is an insert here instead of an update of the minute's one row, which on
-- PostgreSQL each event's transaction would hold locked until it commits. Reads add these
-- to the minute rows.
CREATE TABLE IF NOT EXISTS analytics_pending (
    broadcast_id TEXT NOT NULL,
    minute BIGINT NOT NULL,
    client_id TEXT NOT NULL,
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
    subscriptions BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS analytics_pending_broadcast ON analytics_pending (broadcast_id, minute);
CREATE INDEX IF NOT EXISTS analytics_pending_tenant ON analytics_pending (client_id, minute);
