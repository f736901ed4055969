//! Outbound webhooks' endpoints (`/api/v1/webhooks...`, the tenant's server, signed):
//! register, list, change, delete, rotate the secret, send a test event, list deliveries,
//! retry one, recover a window. Delivery itself is the `webhooks` component's job.

use common::domain::webhooks as rules;
use common::pagination::{Page, Paged};
use common::sealed::{Purpose, SealingKey};
use common::spin::config;
use common::spin::http::{ServerCtx, json};
use common::store::outbox::{self, Subject};
use common::store::webhooks::{self as store, Changes, Delivery, Endpoint, NewEndpoint};
use common::validate::JsonBody;
use common::{ApiError, time};
use serde_json::{Value, json};
use spin_sdk::http::Response;

const MAX_DESCRIPTION: usize = 500;
const MAX_URL: usize = 2048;
/// Endpoints one tenant may have.
const MAX_ENDPOINTS: i64 = 20;

/// The key that seals signing secrets: the platform key (`platform_key`).
pub fn secret_key() -> Result<SealingKey, ApiError> {
    SealingKey::derive(
        &config::required("platform_key")?,
        Purpose::WebhookSecret,
        "platform_key",
    )
}

fn view(ep: &Endpoint, now: i64) -> Value {
    let rotating = ep.previous_secret_until.filter(|until| *until > now);
    json!({
        "id": ep.id,
        "url": ep.url,
        "description": ep.description,
        "events": ep.events,
        "enabled": ep.enabled,
        "disabledReason": ep.disabled_reason,
        "previousSecretExpiresAt": rotating.map(time::format_rfc3339),
        "createdAt": time::format_rfc3339(ep.created_at),
        "updatedAt": time::format_rfc3339(ep.updated_at),
    })
}

fn delivery_view(d: &Delivery) -> Value {
    json!({
        "id": d.id,
        "eventId": d.event_id,
        "eventType": d.event_type,
        "state": d.state,
        "attempts": d.attempts,
        "lastStatus": d.last_status,
        "lastError": d.last_error,
        // Only for an answer: how long a failed connection took would tell a refused port
        // from a silent one.
        "latencyMs": d.last_status.and(d.last_latency_ms),
        "lastAttemptAt": d.last_attempt_at.map(time::format_rfc3339),
        "nextAttemptAt": (d.state == "pending").then(|| time::format_rfc3339(d.next_attempt_at)),
        "createdAt": time::format_rfc3339(d.created_at),
    })
}

/// Reads `url` (checked against the delivery rules) into `body`'s errors.
fn url_field(body: &mut JsonBody, required: bool) -> Option<String> {
    let url = if required {
        Some(body.string("url", MAX_URL)).filter(|u| !u.is_empty())
    } else {
        body.opt_string("url", MAX_URL)
    };
    let url = url?;
    match rules::check_url(&url, config::flag("webhook_allow_http")) {
        Ok(()) => Some(url),
        Err(why) => {
            body.error("url", why);
            None
        }
    }
}

fn events_field(body: &mut JsonBody, required: bool) -> Option<Vec<String>> {
    let value = body.opt_value("events");
    let Some(value) = value else {
        if required {
            body.error("events", "is required: a list of event types, or [\"*\"]");
        }
        return None;
    };
    let list: Option<Vec<String>> = value.as_array().and_then(|items| {
        items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect()
    });
    let Some(list) = list.filter(|l| l.len() <= rules::EVENT_TYPES.len()) else {
        body.error("events", "must be a list of event type strings");
        return None;
    };
    match rules::check_events(&list) {
        Ok(()) => Some(list),
        Err(why) => {
            body.error("events", why);
            None
        }
    }
}

/// `POST /api/v1/webhooks` `{url, events, description?}`: the endpoint and its signing
/// secret, shown this once.
pub fn create(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let url = url_field(&mut body, true);
    let events = events_field(&mut body, true);
    let description = body.opt_string("description", MAX_DESCRIPTION);
    body.finish()?;
    let (Some(url), Some(events)) = (url, events) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    let key = secret_key()?;
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let id = store::new_endpoint_id();
    let secret = rules::new_secret();
    let sealed = key.seal(&secret, &store::secret_context(client_id, &id))?;
    let new = NewEndpoint {
        id: &id,
        url: &url,
        description: description.as_deref().unwrap_or(""),
        events: &events,
        secret_sealed: &sealed,
    };
    let Some(ep) = store::insert_capped(&db, client_id, &new, MAX_ENDPOINTS, ctx.now())? else {
        return Err(ApiError::conflict(
            "too_many_endpoints",
            format!("a tenant may have at most {MAX_ENDPOINTS} webhook endpoints"),
        ));
    };
    let mut answer = view(&ep, ctx.now());
    answer["secret"] = secret.into();
    Ok(json(201, &answer))
}

/// `GET /api/v1/webhooks`: the tenant's endpoints (no secrets).
pub fn list(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (endpoints, total) = store::list(&db, &ctx.tenant.client_id, page)?;
    let items = endpoints.iter().map(|ep| view(ep, ctx.now())).collect();
    Ok(json(200, &Paged::new(items, total, page)))
}

fn load(ctx: &ServerCtx) -> Result<(common::store::Db, Endpoint), ApiError> {
    let db = ctx.db()?;
    let ep = store::load(&db, &ctx.tenant.client_id, ctx.param("id"))?;
    Ok((db, ep))
}

/// `GET /api/v1/webhooks/{id}`: one endpoint, with why the platform disabled it.
pub fn get(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let (_, ep) = load(ctx)?;
    Ok(json(200, &view(&ep, ctx.now())))
}

/// `PATCH /api/v1/webhooks/{id}` `{url?, events?, description?, enabled?}` (an empty
/// description clears it; enabling clears the reason the platform disabled it).
pub fn update(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let changes = Changes {
        url: url_field(&mut body, false),
        events: events_field(&mut body, false),
        description: body
            .opt_raw_string("description", MAX_DESCRIPTION)
            .map(|d| d.trim().to_string()),
        enabled: body.opt_bool("enabled"),
    };
    body.finish()?;
    let (db, ep) = load(ctx)?;
    let ep = store::update(&db, &ep, &changes, ctx.now())?;
    Ok(json(200, &view(&ep, ctx.now())))
}

/// `DELETE /api/v1/webhooks/{id}`: the endpoint and its delivery log.
pub fn delete(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let (db, ep) = load(ctx)?;
    store::delete(&db, &ep)?;
    Ok(json(200, &json!({ "deleted": true, "id": ep.id })))
}

/// `POST /api/v1/webhooks/{id}/rotate-secret`: a new secret, shown once; the old one
/// keeps signing (a second signature) for 24 h.
pub fn rotate_secret(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let key = secret_key()?;
    let (db, ep) = load(ctx)?;
    let secret = rules::new_secret();
    let sealed = key.seal(&secret, &store::secret_context(&ep.client_id, &ep.id))?;
    let now = ctx.now();
    let ep = store::rotate_secret(&db, &ep, &sealed, now + rules::PREVIOUS_SECRET_SECS, now)?;
    let mut answer = view(&ep, now);
    answer["secret"] = secret.into();
    Ok(json(200, &answer))
}

/// `POST /api/v1/webhooks/{id}/test`: a `webhook.test` event for this endpoint only.
pub fn send_test(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let (db, ep) = load(ctx)?;
    let now = ctx.now();
    let data = json!({ "endpointId": ep.id, "url": ep.url });
    let (event_id, delivery_id) = db.transaction(|tx| {
        let subject = Subject {
            object_type: "webhook_endpoint",
            object_id: &ep.id,
        };
        let event_id = outbox::record(tx, &ep.client_id, "webhook.test", subject, data, now)?;
        let delivery_id = store::deliver_only_to(tx, &ep, &event_id, "webhook.test", now)?;
        Ok((event_id, delivery_id))
    })?;
    Ok(json(
        202,
        &json!({ "eventId": event_id, "deliveryId": delivery_id, "type": "webhook.test" }),
    ))
}

/// `GET /api/v1/webhooks/{id}/deliveries`: newest first, paginated.
pub fn deliveries(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let (db, ep) = load(ctx)?;
    let (items, total) = store::deliveries(&db, &ep, page)?;
    let items = items.iter().map(delivery_view).collect();
    Ok(json(200, &Paged::new(items, total, page)))
}

/// `POST /api/v1/webhooks/{id}/deliveries/{deliveryId}/retry`: due again now, with the
/// same `webhook-id`.
pub fn retry(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let (db, ep) = load(ctx)?;
    let delivery = store::retry(&db, &ep, ctx.param("deliveryId"), ctx.now())?;
    Ok(json(202, &delivery_view(&delivery)))
}

/// `POST /api/v1/webhooks/{id}/recover` `{since, until?}` (RFC 3339): every failed delivery
/// created in the window is sent again, with its original `webhook-id`.
pub fn recover(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let now = ctx.now();
    let instant = |body: &mut JsonBody, field: &'static str, required: bool| {
        let text = if required {
            Some(body.string(field, 64)).filter(|t| !t.is_empty())
        } else {
            body.opt_string(field, 64)
        }?;
        let parsed = time::parse_rfc3339(&text);
        if parsed.is_none() {
            body.error(field, "must be an RFC 3339 timestamp");
        }
        parsed
    };
    let since = instant(&mut body, "since", true);
    let until = instant(&mut body, "until", false).unwrap_or(now + 1);
    if since.is_some_and(|s| s >= until) {
        body.error("until", "must be after since");
    }
    body.finish()?;
    let since = since.ok_or_else(|| ApiError::internal("validated since missing"))?;
    let (db, ep) = load(ctx)?;
    let count = store::recover(&db, &ep, since, until, now)?;
    Ok(json(
        202,
        &json!({
            "recovered": count,
            "since": time::format_rfc3339(since),
            "until": time::format_rfc3339(until),
        }),
    ))
}
