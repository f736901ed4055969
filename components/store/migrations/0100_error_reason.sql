-- Why a broadcast ended in `error`: `stale` (no heartbeat for 90 s) or `requested` (its
-- owner or the tenant's server set the status). NULL for every other status.
ALTER TABLE broadcasts ADD COLUMN error_reason TEXT;
