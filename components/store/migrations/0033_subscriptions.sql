-- Creators' subscription plans and viewers' subscriptions (30-day periods paid in tokens).
CREATE TABLE IF NOT EXISTS subscription_plans (
    client_id TEXT NOT NULL,
    creator_id TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    price_tokens BIGINT NOT NULL,
    perks TEXT NOT NULL,
    active BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (client_id, creator_id, id)
);

CREATE TABLE IF NOT EXISTS subscriptions (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    creator_id TEXT NOT NULL,
    subscriber_id TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    price_tokens BIGINT NOT NULL,
    status TEXT NOT NULL,
    cancel_at_period_end BIGINT NOT NULL,
    period_start BIGINT NOT NULL,
    period_end BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (client_id, creator_id, subscriber_id)
);
CREATE INDEX IF NOT EXISTS subscriptions_due ON subscriptions (status, period_end);
CREATE INDEX IF NOT EXISTS subscriptions_subscriber ON subscriptions (client_id, subscriber_id);
