//! The socket's frames: what clients send (typed), what the relay answers, and the ids
//! that frames and paths carry into API requests.

use serde::Deserialize;
use serde_json::{Value, json};

/// A frame a client sends.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ClientFrame {
    /// Send a chat message.
    Message {
        message: String,
    },
    /// Delete a message (its sender, the owner, or a moderating co-host).
    Delete {
        id: String,
    },
    /// Replace the socket's user token (refresh), or sign a read-only socket in; with a
    /// socket ticket for that user when the tenant requires signed calls.
    Auth {
        token: String,
        #[serde(default)]
        ticket: Option<String>,
    },
    Ping,
}

/// Reads a client frame; a malformed one answers an error frame to send back.
pub fn parse_client_frame(text: &str) -> Result<ClientFrame, Value> {
    let value: Value = serde_json::from_str(text)
        .map_err(|_| error("bad_frame", "a frame is a JSON object with a `type`", None))?;
    if !value.is_object() || !value["type"].is_string() {
        return Err(error(
            "bad_frame",
            "a frame is a JSON object with a `type`",
            None,
        ));
    }
    serde_json::from_value(value).map_err(|e| {
        let detail = e.to_string();
        if detail.starts_with("unknown variant") {
            error("bad_frame", "unknown frame type", None)
        } else {
            error("bad_frame", &format!("malformed frame: {detail}"), None)
        }
    })
}

/// A UUID as the API spells it (hyphenated, lowercase), from any form the API accepts.
/// Stream ids, message ids and tenant ids are all UUIDs. Only [`Uuid::parse`] makes one,
/// so every id the relay puts into an API path or header was checked first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Uuid(String);

impl Uuid {
    pub fn parse(text: &str) -> Option<Uuid> {
        domain::ids::parse_uuid(text).map(Uuid)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A public API key as the platform issues them (`pk_` and base62); anything else never
/// reaches a header.
pub fn api_key(text: &str) -> Option<String> {
    let ok = (8..=128).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then(|| text.to_string())
}

/// `{"type":"error","code":...,"message":...[,"status":...]}`.
pub fn error(code: &str, message: &str, status: Option<u16>) -> Value {
    let mut frame = json!({"type": "error", "code": code, "message": message});
    if let Some(s) = status {
        frame["status"] = s.into();
    }
    frame
}

/// `{"type":"history","messages":[...]}`, the first frame of every socket.
pub fn history(messages: &[Value]) -> Value {
    json!({"type": "history", "messages": messages})
}

/// `{"type":"batch","frames":[...]}`: frames that reach a socket together, in order, each
/// as it would be sent alone. Built from the frames' text, so nothing is parsed again.
pub fn batch<'a>(frames: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::from(r#"{"type":"batch","frames":["#);
    for (i, frame) in frames.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(frame);
    }
    out.push_str("]}");
    out
}

/// `{"type":"message","message":{record}}`.
pub fn message(record: &Value) -> Value {
    json!({"type": "message", "message": record})
}

/// `{"type":"held","message":{record}}`: the sender's message waits for a moderator
/// (a blocked word); nobody else sees it.
pub fn held(record: &Value) -> Value {
    json!({"type": "held", "message": record})
}

/// The fan-out key of a `moderation` event that bans `user_id`: every instance's sockets
/// of that user close once it is delivered. `unique` keeps keys of separate bans apart.
pub fn ban_key(user_id: &str, unique: &str) -> String {
    format!("ban:{user_id}:{unique}")
}

/// The banned user a fan-out key names, if it is a ban's.
pub fn banned_user_of_key(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("ban:")?;
    rest.split(':').next().filter(|u| !u.is_empty())
}

/// `{"type":"deleted","id":...}`.
pub fn deleted(id: &str) -> Value {
    json!({"type": "deleted", "id": id})
}

/// `{"type":"authenticated","userId":...,"expiresAt":...}`: the socket now acts as that
/// user until `expiresAt` (RFC 3339).
pub fn authenticated(user_id: &str, expires_at: i64) -> Value {
    json!({
        "type": "authenticated",
        "userId": user_id,
        "expiresAt": domain::time::format_rfc3339(expires_at),
    })
}

pub fn pong() -> Value {
    json!({"type": "pong"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_frames_parse_into_their_kinds() {
        assert_eq!(
            parse_client_frame(r#"{"type":"message","message":"hi"}"#),
            Ok(ClientFrame::Message {
                message: "hi".into()
            })
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"delete","id":"x"}"#),
            Ok(ClientFrame::Delete { id: "x".into() })
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"auth","token":"t"}"#),
            Ok(ClientFrame::Auth {
                token: "t".into(),
                ticket: None
            })
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"auth","token":"t","ticket":"k"}"#),
            Ok(ClientFrame::Auth {
                token: "t".into(),
                ticket: Some("k".into())
            })
        );
        assert_eq!(
            parse_client_frame(r#"{"type":"ping"}"#),
            Ok(ClientFrame::Ping)
        );
    }

    #[test]
    fn malformed_frames_answer_bad_frame() {
        for text in [
            "not json",
            "[]",
            r#"{"message":"no type"}"#,
            r#"{"type":"shout","message":"x"}"#,
            r#"{"type":"message","message":7}"#,
            r#"{"type":"delete"}"#,
            r#"{"type":"auth","token":null}"#,
        ] {
            let err = parse_client_frame(text).unwrap_err();
            assert_eq!(
                (err["type"].as_str(), err["code"].as_str()),
                (Some("error"), Some("bad_frame")),
                "{text}: {err}"
            );
        }
        assert_eq!(
            parse_client_frame(r#"{"type":"shout"}"#).unwrap_err()["message"],
            "unknown frame type"
        );
    }

    #[test]
    fn ids_are_uuids_in_the_apis_spelling() {
        let spelled = |text: &str| Uuid::parse(text).map(|u| u.to_string());
        assert_eq!(
            spelled("6F9619FF-8B86-D011-B42D-00C04FC964FF").as_deref(),
            Some("6f9619ff-8b86-d011-b42d-00c04fc964ff")
        );
        assert_eq!(
            spelled("6f9619ff8b86d011b42d00c04fc964ff").as_deref(),
            Some("6f9619ff-8b86-d011-b42d-00c04fc964ff")
        );
        for bad in [
            "",
            "../../users",
            "6f9619ff-8b86-d011-b42d-00c04fc964ff/../x",
            "6f9619ff-8b86-d011-b42d-00c04fc964ff?x=1",
            "1",
            "%2e%2e",
            " 6f9619ff-8b86-d011-b42d-00c04fc964ff",
        ] {
            assert_eq!(Uuid::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn api_keys_are_plain_tokens() {
        assert!(api_key("pk_AbC123xyz0123456789").is_some());
        for bad in [
            "",
            "pk_short"[..3].as_ref(),
            "pk_a\r\nX-Evil: 1",
            "pk_ünïcode_key",
        ] {
            assert_eq!(api_key(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ban_keys_name_the_banned_user() {
        let key = ban_key("6f9619ff-8b86-d011-b42d-00c04fc964ff", "i1:7");
        assert_eq!(
            banned_user_of_key(&key),
            Some("6f9619ff-8b86-d011-b42d-00c04fc964ff")
        );
        assert_eq!(banned_user_of_key("event:x"), None);
        assert_eq!(banned_user_of_key("ban::x"), None);
        assert_eq!(held(&json!({"id": "m"}))["type"], "held");
    }

    #[test]
    fn a_batch_holds_its_frames_in_order_as_json() {
        let frames = [pong().to_string(), deleted("m1").to_string()];
        let batch: Value = serde_json::from_str(&batch(frames.iter().map(String::as_str))).unwrap();
        assert_eq!(
            batch,
            json!({"type": "batch", "frames": [{"type": "pong"}, {"type": "deleted", "id": "m1"}]})
        );
    }

    #[test]
    fn authenticated_frames_carry_an_rfc3339_expiry() {
        let f = authenticated("u1", 1_800_000_000);
        assert_eq!(f["type"], "authenticated");
        assert_eq!(f["expiresAt"], "2027-01-15T08:00:00Z");
    }
}
