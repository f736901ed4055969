-- Balance changes recorded by a ledger operation and not yet folded into the account's
-- stored balance: credits, and changes to system accounts (see store/ledger.rs `post`).
-- An account's balance is its stored balance plus the sum of its rows here.
CREATE TABLE IF NOT EXISTS ledger_pending (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    amount BIGINT NOT NULL,
    -- The operation that made the change (its transfers carry the same operation_id).
    operation_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_pending_account ON ledger_pending (account_id);
