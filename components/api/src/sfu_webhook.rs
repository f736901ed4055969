//! `POST /api/sfu/webhook`: the one address LiveKit sends all of a server's webhooks to
//! (verified like the per-session route). Participant events update presence as they do
//! on `/api/streaming/sessions/{id}/participants/events`; egress events move recordings;
//! the rest are acknowledged.

use crate::cohosts::{self, ParticipantEvent};
use crate::recordings::{self, EgressOutcome};
use crate::sfu_ack::SfuEventAck;
use domain::ApiError;
use edge::spin::http::SfuCtx;
use spin_sdk::http::Response;

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
            let ack = match recordings::on_egress_event(&db, info, ctx.now())? {
                EgressOutcome::Moved(recording) => SfuEventAck::moved(*recording),
                EgressOutcome::Unrelated(why) => SfuEventAck::unrelated(why),
            };
            Ok(ack.answer())
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
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
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
