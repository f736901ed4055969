//! `POST /api/jobs/deliver-webhooks`: one bounded round of delivery. New outbox events are
//! fanned out to the subscribed endpoints, then up to a batch of due deliveries is claimed
//! and sent at once (their waits overlap), each attempt's result recorded: delivered on a
//! 2xx, the endpoint disabled on a 410 or after 5 days of failures, otherwise the next try
//! scheduled (`domain::webhooks::next_attempt`) until the schedule runs out.

use ::store::Db;
use ::store::webhooks::{self as store, Attempt, DueDelivery};
use domain::sealed::{Purpose, SealingKey};
use domain::webhooks::{self as rules, Verdict};
use domain::{ApiError, time};
use edge::endpoint;
use edge::routing::Route;
use edge::spin::config;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{Handler, JobsCtx};
use edge::spin::outbound::{self, OutboundError, OutboundRequest, Sent};
use schemars::JsonSchema;
use serde::Serialize;
use std::time::Duration;

/// Outbox events fanned out per call.
const DISPATCH_BATCH: i64 = 200;
/// Deliveries attempted per call (all at once).
const SEND_BATCH: i64 = 32;
/// How long a receiver has to answer.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The most of an answer that is read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// A claimed delivery whose attempt never reported (the job was stopped) is due again
/// after this long.
const LEASE_SECS: i64 = 60;
/// The longest error text kept on a delivery.
const MAX_ERROR_CHARS: usize = 300;

/// A round of `deliver-webhooks`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "WebhookDeliveryRun")]
pub struct Round {
    #[schemars(extend("const" = "deliver-webhooks"))]
    job: &'static str,
    /// Events fanned out and deliveries attempted.
    #[schemars(range(min = 0))]
    done: i64,
    /// Deliveries still due (one more while events may still wait to be fanned out).
    #[schemars(range(min = 0))]
    remaining: i64,
    /// New events fanned out to their endpoints.
    #[schemars(range(min = 0))]
    dispatched: i64,
    /// Deliveries sent.
    #[schemars(range(min = 0))]
    attempted: i64,
    /// Deliveries a receiver acknowledged (2xx).
    #[schemars(range(min = 0))]
    delivered: i64,
}

/// The delivery job (jobs tier: the scheduler's `jobs_token`).
pub const ROUTES: &[Route<Handler>] = &[endpoint!(
    POST "/api/jobs/deliver-webhooks",
    Jobs(run),
    "Run (deliver)"
)];

fn run(ctx: &JobsCtx, _: NoBody) -> Result<Json<Round>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    let dispatched = store::dispatch(&db, DISPATCH_BATCH, now)?;
    let key = SealingKey::derive(
        &config::required("platform_key")?,
        Purpose::WebhookSecret,
        "platform_key",
    )?;
    let allow_local = config::flag("webhook_allow_http");
    let mut claimed = Vec::new();
    for delivery in store::due(&db, now, SEND_BATCH)? {
        if store::claim(&db, &delivery.id, now, now + LEASE_SECS)? {
            claimed.push(delivery);
        }
    }
    let prepared: Vec<Prepared> = claimed
        .iter()
        .map(|d| prepare(d, &key, allow_local, now))
        .collect();
    let requests: Vec<OutboundRequest<'_>> = prepared
        .iter()
        .filter_map(|p| p.request.as_ref().map(|r| r.as_request(&p.url, &p.body)))
        .collect();
    let mut answers = outbound::send_all(&requests).into_iter();
    let mut delivered = 0;
    for (delivery, prepared) in claimed.iter().zip(prepared) {
        let sent = match prepared.request {
            Some(_) => answers.next(),
            None => None,
        };
        let outcome = match (sent, prepared.refusal) {
            (Some(sent), _) => outcome_of(sent, now),
            (None, refusal) => Outcome::failed(None, refusal.unwrap_or_default(), 0),
        };
        delivered += i64::from(outcome.verdict == Some(Verdict::Delivered));
        record(&db, delivery, &outcome, now)?;
    }
    let remaining = i64::from(dispatched == DISPATCH_BATCH) + store::due_count(&db, now)?;
    let attempted = claimed.len() as i64;
    Ok(Json(Round {
        job: "deliver-webhooks",
        done: dispatched + attempted,
        remaining,
        dispatched,
        attempted,
        delivered,
    }))
}

/// The headers of one attempt, or why it cannot be made.
struct Prepared {
    url: String,
    body: Vec<u8>,
    request: Option<Headers>,
    refusal: Option<String>,
}

struct Headers(Vec<(String, Vec<u8>)>);

impl Headers {
    fn as_request<'a>(&self, url: &'a str, body: &'a [u8]) -> OutboundRequest<'a> {
        OutboundRequest {
            method: "POST",
            url,
            headers: self.0.clone(),
            body,
            timeout: TIMEOUT,
            max_response_bytes: MAX_ANSWER_BYTES,
        }
    }
}

/// Signs the delivery with the endpoint's current secret (and the previous one while it
/// is still valid after a rotation).
fn prepare(d: &DueDelivery, key: &SealingKey, allow_local: bool, now: i64) -> Prepared {
    let refused = |why: &str| Prepared {
        url: d.endpoint.url.clone(),
        body: Vec::new(),
        request: None,
        refusal: Some(why.to_string()),
    };
    if let Err(why) = rules::check_url(&d.endpoint.url, allow_local) {
        return refused(&format!("the URL is not allowed: {why}"));
    }
    let context = store::secret_context(&d.endpoint.client_id, &d.endpoint.id);
    let Some(current) = key.open(&d.endpoint.secret_sealed, &context) else {
        return refused("the signing secret could not be opened (platform key changed?)");
    };
    let previous = d
        .endpoint
        .previous_secret_sealed
        .as_deref()
        .filter(|_| d.endpoint.previous_secret_until.is_some_and(|t| t > now))
        .and_then(|sealed| key.open(sealed, &context));
    let mut secrets = vec![current.as_str()];
    secrets.extend(previous.as_deref());
    let body = d.payload.as_bytes().to_vec();
    let signature = rules::signature_header(&secrets, &d.event_id, now, &body);
    let headers = [
        ("content-type", "application/json".to_string()),
        ("user-agent", "live-platform-webhooks/1".to_string()),
        ("webhook-id", d.event_id.clone()),
        ("webhook-timestamp", now.to_string()),
        ("webhook-signature", signature),
    ];
    Prepared {
        url: d.endpoint.url.clone(),
        body,
        request: Some(Headers(
            headers
                .into_iter()
                .map(|(name, value)| (name.to_string(), value.into_bytes()))
                .collect(),
        )),
        refusal: None,
    }
}

/// What one attempt came to.
#[derive(Debug, PartialEq)]
struct Outcome {
    status: Option<u16>,
    error: Option<String>,
    latency_ms: i64,
    /// `None` when there was no answer (timeout, refused connection).
    verdict: Option<Verdict>,
    retry_after: Option<i64>,
}

impl Outcome {
    fn failed(status: Option<u16>, error: String, latency_ms: i64) -> Self {
        Outcome {
            status,
            error: Some(error.chars().take(MAX_ERROR_CHARS).collect()),
            latency_ms,
            verdict: None,
            retry_after: None,
        }
    }
}

fn outcome_of(sent: Sent, now: i64) -> Outcome {
    let latency_ms = i64::try_from(sent.elapsed.as_millis()).unwrap_or(i64::MAX);
    match sent.result {
        Ok(answer) => {
            let verdict = rules::verdict(answer.status);
            let error = match verdict {
                Verdict::Delivered => None,
                Verdict::Gone => Some("the receiver answered 410 Gone".to_string()),
                Verdict::Retry => Some(format!("the receiver answered {}", answer.status)),
            };
            Outcome {
                status: Some(answer.status),
                error,
                latency_ms,
                verdict: Some(verdict),
                retry_after: answer
                    .header("retry-after")
                    .and_then(|v| rules::parse_retry_after(v, now)),
            }
        }
        Err(e) => {
            eprintln!("webhook delivery got no answer: {e}");
            Outcome::failed(None, describe(&e), latency_ms)
        }
    }
}

/// What the tenant is told of an attempt that got no answer. A refused connection, a
/// failed TLS handshake, a name that resolves to a blocked address and a silent host read
/// the same (and show no latency), so that endpoints cannot be used to scan what the
/// platform can reach; the cause goes to the log.
fn describe(e: &OutboundError) -> String {
    match e {
        OutboundError::Invalid(_) => "the endpoint's URL could not be used".into(),
        _ => format!(
            "no answer from the endpoint within {} s (it could not be reached or did not answer)",
            TIMEOUT.as_secs()
        ),
    }
}

/// Stores the attempt and its consequences for the delivery and the endpoint.
fn record(db: &Db, d: &DueDelivery, outcome: &Outcome, now: i64) -> Result<(), ApiError> {
    let ep = &d.endpoint;
    let delivered = outcome.verdict == Some(Verdict::Delivered);
    let next_attempt_at = match outcome.verdict {
        Some(Verdict::Delivered) | Some(Verdict::Gone) => None,
        _ => rules::next_attempt(now, d.schedule_step + 1, jitter(), outcome.retry_after),
    };
    let attempt = Attempt {
        at: now,
        status: outcome.status,
        error: outcome.error.clone(),
        latency_ms: outcome.latency_ms,
        next_attempt_at,
        delivered,
    };
    store::finish(db, &d.id, &attempt)?;
    if delivered {
        return store::note_success(db, &ep.id);
    }
    if outcome.verdict == Some(Verdict::Gone) {
        return store::disable(db, &ep.id, "the endpoint answered 410 Gone", now);
    }
    let failing_since = store::note_failure(db, &ep.id, now)?;
    if now - failing_since >= rules::DISABLE_AFTER_FAILING_SECS {
        let reason = format!(
            "every attempt has failed since {} (5 days)",
            time::format_rfc3339(failing_since)
        );
        store::disable(db, &ep.id, &reason, now)?;
    }
    Ok(())
}

/// A number in [0, 1) that spreads retries.
fn jitter() -> f64 {
    let bytes = domain::ids::random_bytes(2);
    f64::from(u16::from_le_bytes([bytes[0], bytes[1]])) / 65_536.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_without_an_answer_reads_the_same_whatever_the_cause() {
        let causes = [
            OutboundError::Timeout,
            OutboundError::Denied,
            OutboundError::Unreachable("ErrorCode::ConnectionRefused".into()),
            OutboundError::Unreachable("ErrorCode::TlsCertificateError".into()),
            OutboundError::Unreachable("ErrorCode::DnsError(DnsErrorPayload { .. })".into()),
        ];
        let texts: Vec<String> = causes.iter().map(describe).collect();
        assert!(texts.iter().all(|t| *t == texts[0]), "{texts:?}");
        assert!(!texts[0].contains("ErrorCode"));
    }
}
