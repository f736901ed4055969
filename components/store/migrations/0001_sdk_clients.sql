-- SDK clients (tenants). The API key is stored only as its SHA-256; the signing secret is
-- kept because request signatures are verified with it.
CREATE TABLE IF NOT EXISTS sdk_clients (
    client_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    website TEXT,
    description TEXT,
    contact_name TEXT,
    contact_title TEXT,
    contact_email TEXT NOT NULL,
    contact_phone TEXT,
    expected_apps TEXT,
    use_case TEXT,
    expected_users TEXT,
    agree_terms BIGINT NOT NULL,
    agree_marketing BIGINT NOT NULL,
    agree_data_processing BIGINT NOT NULL,
    require_signature BIGINT NOT NULL DEFAULT 0,
    api_key_hash TEXT NOT NULL UNIQUE,
    api_key_prefix TEXT NOT NULL,
    secret_key TEXT NOT NULL,
    created_at TEXT NOT NULL
);
