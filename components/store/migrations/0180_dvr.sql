-- Rewinding a live broadcast (docs/replays.md, "Rewind while live"): how far back a
-- tenant's viewers may go (`dvr_window_hours`, 1 to 24), and, on a live ingest, how many
-- milliseconds of it the media server offers now (`dvr_ms`, NULL: none, its replay is not
-- kept).
ALTER TABLE sdk_clients ADD COLUMN dvr_window_hours BIGINT NOT NULL DEFAULT 4;
ALTER TABLE media_ingests ADD COLUMN dvr_ms BIGINT;
