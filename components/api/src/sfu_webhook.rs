//! `POST /api/sfu/webhook`: the one address LiveKit sends all of a server's webhooks to
//! (verified like the per-session route). Participant events update presence as they do
//! on `/api/streaming/sessions/{id}/participants/events`; egress events move recordings;
//! the rest are acknowledged.

use crate::ApiRoute;
use crate::cohosts::{self, ParticipantEvent};
use crate::recordings::{self, EgressOutcome};
use crate::sfu_ack::SfuEventAck;
use domain::ApiError;
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::endpoint::{NoBody, Raw};
use edge::spin::http::SfuCtx;
use serde_json::json;

/// The SFU's one webhook address. Its tier reads and verifies the body (the event), so the
/// handler takes none; its acknowledgement comes from the module that handled the event.
pub const ROUTES: &[ApiRoute] = &[endpoint!(
    POST "/api/sfu/webhook",
    Sfu(receive),
    "Receive (SFU webhook)",
    |op| op
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
)];

/// Participant events update presence, egress events move recordings, the rest are
/// acknowledged.
fn receive(ctx: &SfuCtx, _: NoBody) -> Result<Raw, ApiError> {
    receive_event(ctx).map(Raw)
}

fn receive_event(ctx: &SfuCtx) -> edge::spin::http::Reply {
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
