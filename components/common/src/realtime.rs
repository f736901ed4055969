//! The real-time events of a stream: what the API pushes to the chat relay (its internal
//! events endpoint) and the relay fans out to the stream's sockets as
//! `{"type": "event", "event": {...}}`. One typed protocol for the producers (the API),
//! the relay and the pages' tests: a kind nobody produces, or a producer without a kind,
//! does not compile.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A real-time event, tagged by `kind`; fields are camelCase on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// A viewer reacted; `count` is the broadcast's count of that reaction.
    Reaction { reaction: String, count: i64 },
    /// The broadcast's status moved.
    Status {
        status: String,
        broadcast_id: String,
    },
    /// The host reported a viewer count.
    Viewers { viewer_count: i64 },
    /// Co-hosting changed: a co-host asked, joined, was approved, declined, updated or
    /// removed, or the layout changed.
    Cohost {
        action: CohostAction,
        /// The co-host as the API answers it (asked, joined, approved, updated).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        co_host: Option<Value>,
        /// Who was declined or removed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        co_host_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user_id: Option<String>,
        /// The new layout.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grid: Option<Value>,
    },
    /// A chat message stored through REST: shown like one sent over a socket.
    ChatMessage { message: Value },
    /// A chat message deleted through REST.
    ChatDeleted { id: String },
    /// A viewer sent a gift. `combo` counts the same sender's same gift to the same
    /// recipient within 10 s (1 for the first); an anonymous gift names no sender.
    Gift {
        gift_id: String,
        name: String,
        /// `small`, `large` or `fullscreen`.
        animation: String,
        quantity: i64,
        combo: i64,
        recipient_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender_name: Option<String>,
    },
}

/// What happened to a co-host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CohostAction {
    Requested,
    Joined,
    Approved,
    Declined,
    Updated,
    Removed,
    Layout,
}

impl Event {
    /// A co-host change about `co_host` (the API's view of it).
    pub fn cohost(action: CohostAction, co_host: Value) -> Event {
        Event::Cohost {
            action,
            co_host: Some(co_host),
            co_host_id: None,
            user_id: None,
            grid: None,
        }
    }

    /// A co-host that left the stage (declined or removed).
    pub fn cohost_gone(action: CohostAction, co_host_id: &str, user_id: &str) -> Event {
        Event::Cohost {
            action,
            co_host: None,
            co_host_id: Some(co_host_id.to_string()),
            user_id: Some(user_id.to_string()),
            grid: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_have_the_wire_shape_the_pages_read() {
        let cases = [
            (
                Event::Reaction {
                    reaction: "heart".into(),
                    count: 3,
                },
                json!({"kind": "reaction", "reaction": "heart", "count": 3}),
            ),
            (
                Event::Status {
                    status: "active".into(),
                    broadcast_id: "b1".into(),
                },
                json!({"kind": "status", "status": "active", "broadcastId": "b1"}),
            ),
            (
                Event::Viewers { viewer_count: 12 },
                json!({"kind": "viewers", "viewerCount": 12}),
            ),
            (
                Event::cohost_gone(CohostAction::Removed, "h1", "u1"),
                json!({"kind": "cohost", "action": "removed", "coHostId": "h1", "userId": "u1"}),
            ),
            (
                Event::ChatDeleted { id: "m1".into() },
                json!({"kind": "chat_deleted", "id": "m1"}),
            ),
            (
                Event::Gift {
                    gift_id: "rose".into(),
                    name: "Rose".into(),
                    animation: "small".into(),
                    quantity: 2,
                    combo: 3,
                    recipient_id: "u2".into(),
                    sender_id: Some("u1".into()),
                    sender_name: Some("ada".into()),
                },
                json!({"kind": "gift", "giftId": "rose", "name": "Rose", "animation": "small",
                       "quantity": 2, "combo": 3, "recipientId": "u2",
                       "senderId": "u1", "senderName": "ada"}),
            ),
        ];
        for (event, wire) in cases {
            assert_eq!(serde_json::to_value(&event).unwrap(), wire);
            assert_eq!(serde_json::from_value::<Event>(wire).unwrap(), event);
        }
        assert!(serde_json::from_value::<Event>(json!({"kind": "unheard_of"})).is_err());
    }
}
