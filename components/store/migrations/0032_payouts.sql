-- Creators' payout requests: the diamonds are held until the tenant completes or rejects.
CREATE TABLE IF NOT EXISTS payouts (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    diamonds BIGINT NOT NULL,
    status TEXT NOT NULL,
    external_reference TEXT,
    reason TEXT,
    requested_at BIGINT NOT NULL,
    decided_at BIGINT
);
CREATE INDEX IF NOT EXISTS payouts_tenant ON payouts (client_id, status, requested_at);
CREATE INDEX IF NOT EXISTS payouts_user ON payouts (client_id, user_id, requested_at);
