-- HLS views (`POST /api/views`, see store/src/views.rs): one row per view (a tab's
-- playback, named by the player's random viewId), bound to one broadcast. Its cumulative
-- figures as last accepted, and the baseline of the page load sending them now (a reload
-- keeps the viewId and counts from zero again). Live while `closed_at` is null and the
-- last beacon is recent; the live count is read through `views_live`.
CREATE TABLE IF NOT EXISTS hls_views (
    view_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    broadcast_id TEXT NOT NULL,
    viewer TEXT NOT NULL,
    client_addr TEXT NOT NULL,
    first_beacon_ms BIGINT NOT NULL,
    last_beacon_ms BIGINT NOT NULL,
    closed_at BIGINT,
    closed_by TEXT,
    played_ms BIGINT NOT NULL DEFAULT 0,
    rebuffer_ms BIGINT NOT NULL DEFAULT 0,
    rebuffers BIGINT NOT NULL DEFAULT 0,
    base_played_ms BIGINT NOT NULL DEFAULT 0,
    base_rebuffer_ms BIGINT NOT NULL DEFAULT 0,
    base_rebuffers BIGINT NOT NULL DEFAULT 0,
    startup_ms BIGINT,
    rendition TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS views_live ON hls_views (broadcast_id, closed_at, last_beacon_ms);
CREATE INDEX IF NOT EXISTS views_address ON hls_views (broadcast_id, client_addr, closed_at, last_beacon_ms);
CREATE INDEX IF NOT EXISTS views_silent ON hls_views (closed_at, last_beacon_ms);
CREATE INDEX IF NOT EXISTS views_tenant ON hls_views (client_id, first_beacon_ms);

-- Quality of experience, counted like every other figure: in the minute buckets (and their
-- pending counts) and, once a broadcast is rolled up, in the daily rows. Startup times are
-- a fixed histogram (domain::views::STARTUP_EDGES_MS) so that percentiles fold.

ALTER TABLE analytics_minutes ADD COLUMN views BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN played_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN rebuffer_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN rebuffers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startups BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_ms_sum BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h0 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h1 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h2 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h3 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h4 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h5 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h6 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h7 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h8 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h9 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h10 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h11 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN startup_h12 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN failures_network BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN failures_media BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN failures_manifest BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN failures_not_allowed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_minutes ADD COLUMN failures_other BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN views BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN played_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN rebuffer_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN rebuffers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startups BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_ms_sum BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h0 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h1 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h2 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h3 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h4 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h5 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h6 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h7 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h8 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h9 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h10 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h11 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN startup_h12 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN failures_network BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN failures_media BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN failures_manifest BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN failures_not_allowed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_pending ADD COLUMN failures_other BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN views BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN played_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN rebuffer_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN rebuffers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startups BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_ms_sum BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h0 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h1 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h2 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h3 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h4 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h5 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h6 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h7 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h8 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h9 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h10 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h11 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN startup_h12 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN failures_network BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN failures_media BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN failures_manifest BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN failures_not_allowed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_creator_days ADD COLUMN failures_other BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN views BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN played_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN rebuffer_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN rebuffers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startups BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_ms_sum BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h0 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h1 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h2 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h3 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h4 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h5 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h6 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h7 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h8 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h9 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h10 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h11 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN startup_h12 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN failures_network BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN failures_media BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN failures_manifest BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN failures_not_allowed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE analytics_tenant_days ADD COLUMN failures_other BIGINT NOT NULL DEFAULT 0;
