//! The answer to an SFU webhook event, on either route that takes them
//! (`/api/sfu/webhook`, `/api/streaming/sessions/{id}/participants/events`).

use crate::recordings::RecordingView;
use edge::spin::http::json;
use schemars::JsonSchema;
use serde::Serialize;
use spin_sdk::http::Response;

/// What the platform did with an SFU webhook event.
#[derive(Debug, Default, Serialize, JsonSchema)]
#[schemars(rename = "SfuEventAck")]
pub struct SfuEventAck {
    /// Whether the event changed anything.
    handled: bool,
    /// The event's type.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    event: Option<String>,
    /// Why it changed nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    reason: Option<&'static str>,
    /// The event was delivered before: the SFU sent it again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("const" = true))]
    duplicate: bool,
    /// The recording the event moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "RecordingView")]
    recording: Option<RecordingView>,
}

impl SfuEventAck {
    /// An event of type `event` that changed what it reports.
    pub fn handled(event: &str) -> Self {
        SfuEventAck {
            handled: true,
            event: Some(event.to_string()),
            ..Self::default()
        }
    }

    /// An event of type `event` the platform has no use for.
    pub fn ignored(event: &str) -> Self {
        SfuEventAck {
            event: Some(event.to_string()),
            ..Self::default()
        }
    }

    /// An event about nothing the platform follows, or that changes nothing, and why.
    pub fn unrelated(reason: &'static str) -> Self {
        SfuEventAck {
            reason: Some(reason),
            ..Self::default()
        }
    }

    /// Also why it changed nothing.
    pub fn because(self, reason: &'static str) -> Self {
        SfuEventAck {
            reason: Some(reason),
            ..self
        }
    }

    /// An event delivered before.
    pub fn duplicate() -> Self {
        SfuEventAck {
            duplicate: true,
            ..Self::default()
        }
    }

    /// An event that moved a recording.
    pub fn moved(recording: RecordingView) -> Self {
        SfuEventAck {
            handled: true,
            recording: Some(recording),
            ..Self::default()
        }
    }

    /// The 200 that acknowledges the event.
    pub fn answer(&self) -> Response {
        json(200, self)
    }
}
