-- The sites that may frame a tenant's embed player (`GET /embed/{id}`): its origins,
-- checked and normalised (`domain::player`), separated by single spaces, in the order
-- the tenant gave them; empty, none may. The embed page's `frame-ancestors` lists them.
ALTER TABLE sdk_clients ADD COLUMN player_embed_origins TEXT NOT NULL DEFAULT '';
