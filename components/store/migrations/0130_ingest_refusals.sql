-- Why encoders are refused, and whether the media server runs. The last publish attempts
-- the platform refused (or publishers it dropped) for each broadcast, with their reason,
-- for its owner's view: store/ingests.rs keeps the newest few per broadcast. The key a
-- publisher last used is looked up when a publish names a key that is no broadcast's
-- current one (a key that was reset). And the media server's last report of itself.
CREATE TABLE IF NOT EXISTS ingest_refusals (
    id TEXT PRIMARY KEY,
    broadcast_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    client_addr TEXT
);
CREATE INDEX IF NOT EXISTS ingest_refusals_broadcast ON ingest_refusals (broadcast_id, at_ms);
CREATE INDEX IF NOT EXISTS media_ingests_publish_key ON media_ingests (publish_key);

CREATE TABLE IF NOT EXISTS media_server_reports (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    reason TEXT,
    reported_at BIGINT NOT NULL
);
