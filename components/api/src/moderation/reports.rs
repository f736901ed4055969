//! Viewers' reports of messages, their resolution by moderators, and the moderation log.

use super::{log_action, moderated};
use crate::ApiRoute;
use crate::access::Viewer;
use crate::chat_target::{self};
use crate::realtime;
use ::store::chat::{self as chat_store, Message};
use ::store::moderation::{self as store, LogEntry, NewReport, Report, ReportFilter};
use ::store::outbox::{self, Subject};
use domain::moderation::MAX_REASON_CHARS;
use domain::pagination::{Page, Paged};
use domain::validate::body::{Choice, Choices, OptText, Text};
use domain::{ApiError, ids, request_body};
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::realtime::Event;
use edge::spin::endpoint::{self, Created, Json, NoBody};
use edge::spin::http::{ActorCtx, UserCtx};
use serde::Serialize;
use serde_json::json;

/// Reports one user may file per window (a refused or repeated report is not counted).
const REPORTS: RateLimit = RateLimit {
    bucket: "chat-report",
    max: 5,
    window_secs: 60,
    per: "user",
    counts: Counts::Requests,
};

request_body! {
    /// A viewer's report of a message.
    pub struct ReportBody as "ChatReportRequest" {
        /// Why the message is reported.
        "reason" reason: Text<{ MAX_REASON_CHARS }>,
    }
}

/// What a moderator decides of a report: dismiss it, delete the message, or show a held
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Dismiss,
    Delete,
    Approve,
}

impl Decision {
    /// The report's resolution.
    fn resolution(self) -> &'static str {
        match self {
            Decision::Dismiss => "dismissed",
            Decision::Delete => "deleted",
            Decision::Approve => "approved",
        }
    }
}

impl Choices for Decision {
    type Value = Decision;
    const MAX_LEN: usize = 16;

    fn names() -> Vec<&'static str> {
        vec!["dismiss", "delete", "approve"]
    }

    fn choose(name: &str) -> Option<Decision> {
        match name {
            "dismiss" => Some(Decision::Dismiss),
            "delete" => Some(Decision::Delete),
            "approve" => Some(Decision::Approve),
            _ => None,
        }
    }
}

request_body! {
    /// A moderator's resolution of a report.
    pub struct ResolutionBody as "ChatReportResolution" {
        /// `delete` deletes the message, `approve` shows a held one.
        "action" action: Choice<Decision>,
        /// Kept in the moderation log.
        "note" note: OptText<{ MAX_REASON_CHARS }>,
    }
}

/// The data of a `chat.message_reported` webhook event: the report and its message.
#[derive(Debug, Serialize)]
struct ReportedEvent<'a> {
    #[serde(flatten)]
    report: &'a Report,
    message: &'a Message,
}

/// The report, resolution and log routes of a stream's chat.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/streams/{id}/chat/{messageId}/report",
        User(report),
        "Report (moderation)",
        |op| op
            .link(
                "POST /api/streams/{id}/chat/reports/{reportId}/resolve",
                &[
                    ("id", "$request.path.id"),
                    ("reportId", "$response.body#/id"),
                ],
            )
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"])
            .errors(409, &["already_reported"])
            .rate_limited(&REPORTS),
    ),
    endpoint!(
        GET "/api/streams/{id}/chat/reports",
        UserOrServer(reports),
        "Reports (moderation)",
        |op| op
            .errors(400, &["invalid_query", "invalid_status"])
            .errors(403, &["not_a_moderator"]),
    ),
    endpoint!(
        POST "/api/streams/{id}/chat/reports/{reportId}/resolve",
        UserOrServer(resolve),
        "Resolve (moderation)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["not_a_moderator"])
            .errors(404, &["not_found"])
            .errors(409, &["already_reported", "already_resolved", "not_held"]),
    ),
    endpoint!(
        GET "/api/streams/{id}/chat/moderation-log",
        UserOrServer(moderation_log),
        "Moderation log (moderation)",
        |op| op
            .errors(400, &["invalid_query"])
            .errors(403, &["not_a_moderator"]),
    ),
];

/// `{reason}`: any signed-in viewer who may read the chat; rate limited; once per message
/// and reporter.
fn report(ctx: &UserCtx, ReportBody { reason }: ReportBody) -> Result<Created<Report>, ApiError> {
    let db = ctx.db()?;
    let target = chat_target::stream_target(ctx, &ctx.tenant, Viewer::User(&ctx.user.id), &db)?;
    let message_id = ids::parse_uuid(ctx.param("messageId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the message id must be a UUID"))?;
    let message = chat_store::message(&db, &target.store(), &message_id)?
        .filter(|m| !m.deleted && !m.held)
        .ok_or_else(|| ApiError::not_found("message"))?;
    let filed = db.transaction(|tx| {
        let Some(filed) = store::add_report(
            tx,
            &NewReport {
                client_id: &target.client_id,
                stream_id: &target.stream_id,
                message_id: &message.id,
                reporter_id: Some(&ctx.user.id),
                reason: &reason,
            },
            ctx.now_millis(),
        )?
        else {
            return Err(ApiError::conflict(
                "already_reported",
                "you reported this message already",
            ));
        };
        // Counted with the report itself: a duplicate or refused report is not counted.
        REPORTS.hit(
            tx,
            &format!("{}:{}", target.client_id, ctx.user.id),
            ctx.now(),
        )?;
        outbox::record(
            tx,
            &target.client_id,
            "chat.message_reported",
            Subject {
                object_type: "chat_message",
                object_id: &message.id,
            },
            &ReportedEvent {
                report: &filed,
                message: &message,
            },
            ctx.now(),
        )?;
        Ok(filed)
    })?;
    Ok(Created(filed))
}

/// `?status=open|resolved|all`: the queue, oldest first.
fn reports(ctx: &ActorCtx, _: NoBody) -> Result<endpoint::Page<Report>, ApiError> {
    let db = ctx.db()?;
    let (target, _) = moderated(ctx, &db)?;
    let filter = match ctx.query_value("status").as_deref() {
        None | Some("open") => ReportFilter::Open,
        Some("resolved") => ReportFilter::Resolved,
        Some("all") => ReportFilter::All,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_status",
                "status must be open, resolved or all",
            ));
        }
    };
    let page = Page::from_query(ctx.query())?;
    let (items, total) = store::reports(&db, &target.client_id, &target.stream_id, filter, page)?;
    Ok(endpoint::Page(Paged::new(items, total, page)))
}

/// `{action: "dismiss" | "delete" | "approve", note?}`: `delete` deletes the message,
/// `approve` shows a held one. Every open report of that message is settled with it.
fn resolve(
    ctx: &ActorCtx,
    ResolutionBody { action, note }: ResolutionBody,
) -> Result<Json<Report>, ApiError> {
    let db = ctx.db()?;
    let (target, moderator) = moderated(ctx, &db)?;
    let report_id = ids::parse_uuid(ctx.param("reportId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the report id must be a UUID"))?;
    let action = action.unwrap_or(Decision::Dismiss);
    let note = note.unwrap_or_default();
    let report = store::report(&db, &target.client_id, &target.stream_id, &report_id)?
        .ok_or_else(|| ApiError::not_found("report"))?;
    if action == Decision::Approve && report.kind != "held" {
        return Err(ApiError::conflict(
            "not_held",
            "only a held message is approved; dismiss a report instead",
        ));
    }
    let resolution = action.resolution();
    let now_ms = ctx.now_millis();
    let (resolved, released) = db.transaction(|tx| {
        let Some(resolved) = store::resolve(
            tx,
            &target.client_id,
            &report_id,
            resolution,
            &moderator.actor,
            now_ms,
        )?
        else {
            return Err(ApiError::conflict(
                "already_resolved",
                "this report was resolved already",
            ));
        };
        store::resolve_all_of_message(
            tx,
            &target.client_id,
            &report.message_id,
            resolution,
            &moderator.actor,
            now_ms,
        )?;
        let released = match resolution {
            "deleted" => {
                chat_store::delete(
                    tx,
                    &target.client_id,
                    &report.message_id,
                    &moderator.actor,
                    ctx.now(),
                )?;
                None
            }
            "approved" => chat_store::release(tx, &target.client_id, &report.message_id)?,
            _ => None,
        };
        log_action(
            tx,
            &target,
            &moderator.actor,
            "report_resolved",
            None,
            Some(&report.message_id),
            &note,
            json!({"reportId": report_id, "resolution": resolution}),
            now_ms,
        )?;
        Ok((resolved, released))
    })?;
    match (resolution, released) {
        ("deleted", _) => realtime::publish(
            &target.stream_id,
            Event::ChatDeleted {
                id: report.message_id.clone(),
            },
        ),
        (_, Some(message)) => realtime::publish(
            &target.stream_id,
            Event::ChatMessage {
                message: serde_json::to_value(&message).unwrap_or_default(),
            },
        ),
        _ => {}
    }
    Ok(Json(resolved))
}

/// Newest first, with the creator's channel-wide actions.
fn moderation_log(ctx: &ActorCtx, _: NoBody) -> Result<endpoint::Page<LogEntry>, ApiError> {
    let db = ctx.db()?;
    let (target, _) = moderated(ctx, &db)?;
    let page = Page::from_query(ctx.query())?;
    let (items, total) = store::log_page(
        &db,
        &target.client_id,
        &target.stream_id,
        target.owner_id.as_deref(),
        page,
    )?;
    Ok(endpoint::Page(Paged::new(items, total, page)))
}
