//! `POST /api/sfu/webhook`: the one address LiveKit sends all of a server's webhooks to
//! (verified like the per-session route). Participant events update presence as they do
//! on `/api/streaming/sessions/{id}/participants/events`; egress events move recordings;
//! the rest are acknowledged.

use crate::cohosts::{self, ParticipantEvent};
use crate::recordings::RecordingView;
use common::ApiError;
use common::spin::http::{SfuCtx, json};
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

pub fn receive(ctx: &SfuCtx) -> Result<Response, ApiError> {
    let kind = ctx.event["event"].as_str().unwrap_or_default();
    match kind {
        "participant_joined" | "participant_left" => {
            let event = ParticipantEvent::read(&ctx.event)?;
            cohosts::participant_presence(&ctx.db()?, &event, None, ctx.now())
        }
        "egress_started" | "egress_updated" | "egress_ended" => {
            let info = match &ctx.event["egressInfo"] {
                serde_json::Value::Null => &ctx.event["egress_info"],
                info => info,
            };
            let db = ctx.db()?;
            crate::recordings::on_egress_event(&db, info, ctx.now())
        }
        "" => Err(ApiError::new(
            422,
            "invalid_webhook",
            "the webhook needs an event",
        )),
        other => Ok(SfuEventAck::ignored(other).answer()),
    }
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<common::contract::Operation> {
    use common::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("POST /api/sfu/webhook", "Receive (SFU webhook)")
            .takes_as(
                "application/webhook+json",
                Schema::written(json!({
                    "type": "object",
                    "description": "LiveKit webhook event: participant_joined, participant_left, \
                        egress_started, egress_updated, egress_ended; others are acknowledged and \
                        ignored",
                })),
            )
            .answers(200, "OK", Schema::view::<SfuEventAck>())
            .errors(404, &["not_found"])
            .errors(422, &["invalid_webhook"]),
    ]
}
