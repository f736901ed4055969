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
    /// A moderator acted on the stream's chat; clients hide messages and show modes.
    Moderation {
        action: ModerationAction,
        /// The user acted on (timed out, banned, unbanned, whose messages went).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user_id: Option<String>,
        /// The message deleted, pinned or unpinned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The messages deleted at once (a user's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_ids: Option<Vec<String>>,
        /// `stream` or `channel` (a ban or timeout over all the creator's streams).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        /// When a timeout ends (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<String>,
        /// The modes now in force (mode changed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        settings: Option<Value>,
        /// The pinned message as the API answers it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Value>,
    },
}

/// What a moderator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModerationAction {
    MessageDeleted,
    MessagesDeleted,
    UserTimedOut,
    UserBanned,
    UserUnbanned,
    ModeChanged,
    ChatCleared,
    MessagePinned,
    MessageUnpinned,
}

impl ModerationAction {
    /// The wire name (also the moderation log's action).
    pub fn as_str(self) -> &'static str {
        match self {
            ModerationAction::MessageDeleted => "message_deleted",
            ModerationAction::MessagesDeleted => "messages_deleted",
            ModerationAction::UserTimedOut => "user_timed_out",
            ModerationAction::UserBanned => "user_banned",
            ModerationAction::UserUnbanned => "user_unbanned",
            ModerationAction::ModeChanged => "mode_changed",
            ModerationAction::ChatCleared => "chat_cleared",
            ModerationAction::MessagePinned => "message_pinned",
            ModerationAction::MessageUnpinned => "message_unpinned",
        }
    }
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
    /// A moderation event with only its action set; fill in the fields that apply.
    pub fn moderation(action: ModerationAction) -> Event {
        Event::Moderation {
            action,
            user_id: None,
            message_id: None,
            message_ids: None,
            scope: None,
            until: None,
            settings: None,
            message: None,
        }
    }

    /// A co-host change about `co_host` (the API's view of it).
    pub fn cohost(action: CohostAction, co_host: &impl Serialize) -> Event {
        Event::Cohost {
            action,
            co_host: serde_json::to_value(co_host).ok(),
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
            (
                Event::Moderation {
                    action: ModerationAction::UserTimedOut,
                    user_id: Some("u1".into()),
                    message_id: None,
                    message_ids: None,
                    scope: Some("stream".into()),
                    until: Some("2026-01-01T00:10:00Z".into()),
                    settings: None,
                    message: None,
                },
                json!({"kind": "moderation", "action": "user_timed_out", "userId": "u1",
                       "scope": "stream", "until": "2026-01-01T00:10:00Z"}),
            ),
            (
                Event::moderation(ModerationAction::ChatCleared),
                json!({"kind": "moderation", "action": "chat_cleared"}),
            ),
        ];
        for action in [
            ModerationAction::MessageDeleted,
            ModerationAction::MessagesDeleted,
            ModerationAction::UserBanned,
            ModerationAction::UserUnbanned,
            ModerationAction::ModeChanged,
            ModerationAction::MessagePinned,
            ModerationAction::MessageUnpinned,
        ] {
            let wire = serde_json::to_value(Event::moderation(action)).unwrap();
            assert_eq!(wire["action"], action.as_str());
        }
        for (event, wire) in cases {
            assert_eq!(serde_json::to_value(&event).unwrap(), wire);
            assert_eq!(serde_json::from_value::<Event>(wire).unwrap(), event);
        }
        assert!(serde_json::from_value::<Event>(json!({"kind": "unheard_of"})).is_err());
    }
}
