-- A chat message carries its sender's badge at the time it was sent (e.g. `subscriber`:
-- an active subscriber of the broadcast's host).
ALTER TABLE chat_messages ADD COLUMN sender_badge TEXT;
