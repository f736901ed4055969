//! The WebSocket chat (served by the chat relay, not an HTTP route of a component): its
//! path, its credentials and its frames, including the typed events
//! (`edge::realtime::Event`) the relay fans out. Documented under the document's
//! `x-websocket` member; the tests check the frames against the relay's parser and the
//! event enum.

use serde_json::{Value, json};

/// `x-websocket`: the socket's contract.
pub fn websocket() -> Value {
    json!({
        "path": "/ws/streams/{id}/chat",
        "description": "Upgrade with GET to a WebSocket of JSON text frames. A user connects with ?token=<JWT> (or Authorization: Bearer); a read-only guest with ?ticket=, ?clientId= or ?apiKey=. A client that requires signed calls opens every socket with a ?ticket= from POST /api/streams/{id}/chat/ticket (with the user's token, a ticket for that user). The Origin must be allowed. The first server frame is `history`; then `message`, `held`, `deleted`, `event`, `authenticated`, `pong` and `error` frames arrive as things happen. A client that opens the socket with ?batch=1 also reads `batch` frames: events of the stream that reach the socket together (within a few tens of milliseconds of each other), in order, each as it would have been sent alone; without it every frame carries one.",
        "parameters": [
            {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "token", "in": "query", "schema": {"type": "string"}, "description": "A user's JWT"},
            {"name": "clientId", "in": "query", "schema": {"type": "string"}, "description": "Read-only guest of this client"},
            {"name": "apiKey", "in": "query", "schema": {"type": "string"}, "description": "Read-only guest of the API key's client"},
            {"name": "ticket", "in": "query", "schema": {"type": "string"}, "description": "A socket ticket (POST /api/streams/{id}/chat/ticket), a minute old at most"},
            {"name": "batch", "in": "query", "schema": {"type": "string", "enum": ["1", "0"]}, "description": "1: the client reads `batch` frames (events that arrive together share one frame); 0 or absent: one event per frame"}
        ],
        "clientFrames": {"oneOf": [
            frame("message", &[("message", json!({"type": "string", "minLength": 1}))], json!({"type": "message", "message": "hello"})),
            frame("delete", &[("id", json!({"type": "string"}))], json!({"type": "delete", "id": "msg_1"})),
            auth_frame(),
            frame("ping", &[], json!({"type": "ping"}))
        ]},
        "serverFrames": {"oneOf": [
            frame("history", &[("messages", json!({"type": "array", "items": {"type": "object"}}))], json!({"type": "history", "messages": []})),
            frame("message", &[("message", json!({"type": "object"}))], json!({"type": "message", "message": {"id": "msg_1", "message": "hello"}})),
            frame("held", &[("message", json!({"type": "object"}))], json!({"type": "held", "message": {"id": "msg_2"}})),
            frame("deleted", &[("id", json!({"type": "string"}))], json!({"type": "deleted", "id": "msg_1"})),
            frame("event", &[("event", json!({"$ref": "#/x-websocket/event"}))], json!({"type": "event", "event": {"kind": "viewers", "viewerCount": 3}})),
            frame("authenticated", &[("userId", json!({"type": "string"})), ("expiresAt", json!({"type": "string", "format": "date-time"}))], json!({"type": "authenticated", "userId": "u_1", "expiresAt": "2026-01-01T00:00:00Z"})),
            frame("pong", &[], json!({"type": "pong"})),
            batch_frame(),
            {
                "type": "object", "required": ["type", "code", "message"],
                "properties": {"type": {"const": "error"}, "code": {"type": "string"}, "message": {"type": "string"}, "status": {"type": "integer"}},
                "examples": [{"type": "error", "code": "bad_frame", "message": "a frame is a JSON object with a `type`"}]
            }
        ]},
        "event": event_schema()
    })
}

/// The `batch` frame (sockets opened with ?batch=1): server frames that arrive together, in
/// order; never `history` nor another batch.
fn batch_frame() -> Value {
    frame(
        "batch",
        &[(
            "frames",
            json!({"type": "array", "minItems": 2, "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}}),
        )],
        json!({"type": "batch", "frames": [
            {"type": "event", "event": {"kind": "viewers", "viewerCount": 3}},
            {"type": "message", "message": {"id": "msg_1", "message": "hello"}}
        ]}),
    )
}

/// The `auth` frame: a token, and optionally a socket ticket for that user.
fn auth_frame() -> Value {
    let mut auth = frame(
        "auth",
        &[("token", json!({"type": "string"}))],
        json!({"type": "auth", "token": "eyJ..."}),
    );
    auth["properties"]["ticket"] = json!({"type": "string", "description": "A socket ticket for the token's user (needed by clients that require signed calls)"});
    auth
}

fn frame(kind: &str, fields: &[(&str, Value)], example: Value) -> Value {
    let mut properties = serde_json::Map::new();
    properties.insert("type".into(), json!({"const": kind}));
    let mut required = vec![json!("type")];
    for (name, schema) in fields {
        properties.insert((*name).into(), schema.clone());
        required.push(json!(name));
    }
    json!({"type": "object", "required": required, "properties": properties, "examples": [example]})
}

/// One event kind: its required and optional fields (camelCase, as on the wire).
fn kind(name: &str, required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let mut properties = serde_json::Map::new();
    properties.insert("kind".into(), json!({"const": name}));
    let mut names = vec![json!("kind")];
    for (field, schema) in required {
        properties.insert((*field).into(), schema.clone());
        names.push(json!(field));
    }
    for (field, schema) in optional {
        properties.insert((*field).into(), schema.clone());
    }
    json!({"type": "object", "required": names, "properties": properties, "additionalProperties": false})
}

/// `edge::realtime::Event`, tagged by `kind`.
pub fn event_schema() -> Value {
    let s = || json!({"type": "string"});
    let i = || json!({"type": "integer"});
    let o = || json!({"type": "object"});
    json!({"oneOf": [
        kind("reaction", &[("reaction", s()), ("count", i())], &[]),
        kind("status", &[("status", s()), ("broadcastId", s())], &[]),
        kind("viewers", &[("viewerCount", i())], &[]),
        kind("cohost", &[("action", json!({"enum": ["requested", "joined", "approved", "declined", "updated", "removed", "layout"]}))],
            &[("coHost", o()), ("coHostId", s()), ("userId", s()), ("grid", o())]),
        kind("chat_message", &[("message", o())], &[]),
        kind("chat_deleted", &[("id", s())], &[]),
        kind("gift", &[("giftId", s()), ("name", s()), ("animation", json!({"enum": ["small", "large", "fullscreen"]})), ("quantity", i()), ("combo", i()), ("recipientId", s())],
            &[("senderId", s()), ("senderName", s())]),
        kind("moderation", &[("action", json!({"enum": ["message_deleted", "messages_deleted", "user_timed_out", "user_banned", "user_unbanned", "mode_changed", "chat_cleared", "message_pinned", "message_unpinned"]}))],
            &[("userId", s()), ("messageId", s()), ("messageIds", json!({"type": "array", "items": {"type": "string"}})), ("scope", json!({"enum": ["stream", "channel"]})), ("until", json!({"type": "string", "format": "date-time"})), ("settings", o()), ("message", o())]),
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge::realtime::{CohostAction, Event, ModerationAction};

    /// One event of every kind with every field set. The match makes a new variant a
    /// compile error here until it is documented.
    fn every_event() -> Vec<Event> {
        let all = vec![
            Event::Reaction {
                reaction: "heart".into(),
                count: 2,
            },
            Event::Status {
                status: "live".into(),
                broadcast_id: "b".into(),
            },
            Event::Viewers { viewer_count: 3 },
            Event::Cohost {
                action: CohostAction::Layout,
                co_host: Some(json!({})),
                co_host_id: Some("c".into()),
                user_id: Some("u".into()),
                grid: Some(json!({})),
            },
            Event::ChatMessage { message: json!({}) },
            Event::ChatDeleted { id: "m".into() },
            Event::Gift {
                gift_id: "g".into(),
                name: "Rose".into(),
                animation: "small".into(),
                quantity: 1,
                combo: 1,
                recipient_id: "u".into(),
                sender_id: Some("s".into()),
                sender_name: Some("S".into()),
            },
            Event::Moderation {
                action: ModerationAction::MessagePinned,
                user_id: Some("u".into()),
                message_id: Some("m".into()),
                message_ids: Some(vec!["m".into()]),
                scope: Some("stream".into()),
                until: Some("2026-01-01T00:00:00Z".into()),
                settings: Some(json!({})),
                message: Some(json!({})),
            },
        ];
        for event in &all {
            match event {
                Event::Reaction { .. }
                | Event::Status { .. }
                | Event::Viewers { .. }
                | Event::Cohost { .. }
                | Event::ChatMessage { .. }
                | Event::ChatDeleted { .. }
                | Event::Gift { .. }
                | Event::Moderation { .. } => {}
            }
        }
        all
    }

    #[test]
    fn every_event_kind_and_field_is_documented() {
        let schema = event_schema();
        let kinds = schema["oneOf"].as_array().cloned().unwrap_or_default();
        assert_eq!(kinds.len(), every_event().len(), "one schema per kind");
        for event in every_event() {
            let wire = serde_json::to_value(&event).expect("events serialize");
            let kind = wire["kind"].as_str().expect("tagged by kind");
            let doc = kinds
                .iter()
                .find(|k| k["properties"]["kind"]["const"] == kind)
                .unwrap_or_else(|| panic!("kind {kind} is not documented"));
            let object = wire.as_object().expect("an object");
            for field in object.keys() {
                assert!(doc["properties"].get(field).is_some(), "{kind}.{field}");
            }
            for field in doc["required"].as_array().into_iter().flatten() {
                let field = field.as_str().unwrap_or_default();
                assert!(object.contains_key(field), "{kind} lacks {field}");
            }
            for (field, value) in object {
                if let Some(values) = doc["properties"][field]["enum"].as_array() {
                    assert!(values.contains(value), "{kind}.{field} = {value}");
                }
            }
        }
    }

    #[test]
    fn the_documented_client_frames_are_what_the_relay_parses() {
        let doc = websocket();
        for frame in doc["clientFrames"]["oneOf"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let example = frame["examples"][0].to_string();
            assert!(
                chat_relay::protocol::parse_client_frame(&example).is_ok(),
                "the relay refuses {example}"
            );
        }
    }

    #[test]
    fn the_documented_batch_frame_is_what_the_relay_builds() {
        let doc = websocket();
        let batch = doc["serverFrames"]["oneOf"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["properties"]["type"]["const"] == "batch")
            .expect("the batch frame is documented");
        let example = &batch["examples"][0];
        let frames: Vec<String> = example["frames"]
            .as_array()
            .into_iter()
            .flatten()
            .map(Value::to_string)
            .collect();
        let built = chat_relay::protocol::batch(frames.iter().map(String::as_str));
        assert_eq!(&serde_json::from_str::<Value>(&built).unwrap(), example);
    }
}
