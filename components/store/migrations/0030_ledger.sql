-- The money ledger (double entry): one account per user and currency, plus each tenant's
-- system accounts (owner `system:...`). Transfers are immutable; an account's cached
-- balance changes only in the transaction that writes a transfer touching it.
CREATE TABLE IF NOT EXISTS ledger_accounts (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    currency TEXT NOT NULL,
    balance BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    UNIQUE (client_id, owner, currency)
);

CREATE TABLE IF NOT EXISTS ledger_transfers (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    currency TEXT NOT NULL,
    debit_account TEXT NOT NULL,
    credit_account TEXT NOT NULL,
    amount BIGINT NOT NULL CHECK (amount > 0),
    kind TEXT NOT NULL,
    reference TEXT,
    reason TEXT,
    -- The transfer this one reverses (a transfer is reversed at most once).
    reverses TEXT UNIQUE,
    -- Ties the transfers of one operation (a gift's two legs, a payout's hold).
    operation_id TEXT NOT NULL,
    idempotency_key TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_transfers_debit ON ledger_transfers (debit_account, created_at);
CREATE INDEX IF NOT EXISTS ledger_transfers_credit ON ledger_transfers (credit_account, created_at);
CREATE INDEX IF NOT EXISTS ledger_transfers_operation ON ledger_transfers (operation_id);

-- A purchase reference (e.g. the store receipt id) credits a wallet once per tenant.
CREATE TABLE IF NOT EXISTS ledger_credit_references (
    client_id TEXT NOT NULL,
    reference TEXT NOT NULL,
    transfer_id TEXT NOT NULL,
    PRIMARY KEY (client_id, reference)
);

-- The tenant's monetization settings; a tenant without a row has the defaults.
CREATE TABLE IF NOT EXISTS monetization_settings (
    client_id TEXT PRIMARY KEY,
    diamonds_per_100_tokens BIGINT NOT NULL,
    min_payout_diamonds BIGINT NOT NULL,
    cap_hour BIGINT,
    cap_day BIGINT,
    cap_week BIGINT,
    updated_at BIGINT NOT NULL
);

-- Money-moving requests by Idempotency-Key: the request's hash and, once done, its answer.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    client_id TEXT NOT NULL,
    caller TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status BIGINT,
    body TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (client_id, caller, idem_key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_age ON idempotency_keys (created_at);
