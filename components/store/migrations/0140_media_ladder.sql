-- The adaptive ladder and latency of RTMP broadcasts. A tenant's `media_ladder` is what its
-- broadcasts get unless one says otherwise (`broadcasts.ladder`, NULL: the tenant's);
-- `adaptive` transcodes each publish into renditions, `passthrough` serves the source
-- alone. `latency_mode` is `standard` (2 s segments) or `low` (1 s segments, a short
-- playlist). Both are read by the media server when a publish starts.
ALTER TABLE sdk_clients ADD COLUMN media_ladder TEXT NOT NULL DEFAULT 'adaptive';
ALTER TABLE broadcasts ADD COLUMN ladder TEXT;
ALTER TABLE broadcasts ADD COLUMN latency_mode TEXT NOT NULL DEFAULT 'standard';
