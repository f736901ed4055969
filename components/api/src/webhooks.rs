//! Outbound webhooks' endpoints (`/api/v1/webhooks...`, the tenant's server, signed):
//! register, list, change, delete, rotate the secret, send a test event, list deliveries,
//! retry one, recover a window. Delivery itself is the `webhooks` component's job.

use crate::ApiRoute;
use ::store::outbox::{self, Subject};
use ::store::webhooks::{self as store, Changes, Delivery, Endpoint, NewEndpoint};
use domain::pagination::{self, Paged};
use domain::request_body;
use domain::sealed::{Purpose, SealingKey};
use domain::validate::JsonBody;
use domain::validate::body::{
    Checked, ClearableText, FieldKind, OptBool, OptChecked, OptText, OptTimestamp, TextRule,
    Timestamp,
};
use domain::webhooks as rules;
use domain::{ApiError, time};
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::config;
use edge::spin::endpoint::{Accepted, Created, Json, NoBody, Page};
use edge::spin::http::ServerCtx;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use std::borrow::Cow;

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

/// A webhook endpoint (its secret is shown only on create and rotate).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "WebhookEndpoint")]
pub struct EndpointView {
    #[schemars(extend("pattern" = "^ep_"))]
    id: String,
    url: String,
    description: String,
    events: Vec<String>,
    enabled: bool,
    /// Why the platform disabled it, if it did.
    disabled_reason: Option<String>,
    /// While a rotated-out secret still signs (a second signature), until when.
    #[schemars(extend("format" = "date-time"))]
    previous_secret_expires_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
    #[schemars(extend("format" = "date-time"))]
    updated_at: String,
}

fn view(ep: &Endpoint, now: i64) -> EndpointView {
    let rotating = ep.previous_secret_until.filter(|until| *until > now);
    EndpointView {
        id: ep.id.clone(),
        url: ep.url.clone(),
        description: ep.description.clone(),
        events: ep.events.clone(),
        enabled: ep.enabled,
        disabled_reason: ep.disabled_reason.clone(),
        previous_secret_expires_at: rotating.map(time::format_rfc3339),
        created_at: time::format_rfc3339(ep.created_at),
        updated_at: time::format_rfc3339(ep.updated_at),
    }
}

/// A webhook endpoint with its signing secret, shown this once.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "WebhookEndpointWithSecret")]
pub struct EndpointWithSecret {
    #[serde(flatten)]
    endpoint: EndpointView,
    #[schemars(extend("pattern" = "^whsec_"))]
    secret: String,
}

/// One event's delivery to one endpoint.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "WebhookDelivery")]
pub struct DeliveryView {
    #[schemars(extend("pattern" = "^dlv_"))]
    id: String,
    #[schemars(extend("pattern" = "^evt_"))]
    event_id: String,
    event_type: String,
    #[schemars(extend("enum" = ["pending", "delivered", "failed"]))]
    state: String,
    #[schemars(range(min = 0))]
    attempts: i64,
    /// The receiver's HTTP status at the last attempt.
    last_status: Option<i64>,
    last_error: Option<String>,
    /// How long the last answered attempt took.
    latency_ms: Option<i64>,
    #[schemars(extend("format" = "date-time"))]
    last_attempt_at: Option<String>,
    /// When a pending delivery is tried next.
    #[schemars(extend("format" = "date-time"))]
    next_attempt_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
}

fn delivery_view(d: &Delivery) -> DeliveryView {
    DeliveryView {
        id: d.id.clone(),
        event_id: d.event_id.clone(),
        event_type: d.event_type.clone(),
        state: d.state.clone(),
        attempts: d.attempts,
        last_status: d.last_status,
        last_error: d.last_error.clone(),
        // Only for an answer: how long a failed connection took would tell a refused port
        // from a silent one.
        latency_ms: d.last_status.and(d.last_latency_ms),
        last_attempt_at: d.last_attempt_at.map(time::format_rfc3339),
        next_attempt_at: (d.state == "pending").then(|| time::format_rfc3339(d.next_attempt_at)),
        created_at: time::format_rfc3339(d.created_at),
    }
}

/// A deleted webhook endpoint.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "WebhookEndpointDeleted")]
pub struct EndpointDeleted {
    #[schemars(extend("const" = true))]
    deleted: bool,
    #[schemars(extend("pattern" = "^ep_"))]
    id: String,
}

/// A `webhook.test` event queued for one endpoint.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "WebhookTestQueued")]
pub struct TestQueued {
    #[schemars(extend("pattern" = "^evt_"))]
    event_id: String,
    #[schemars(extend("pattern" = "^dlv_"))]
    delivery_id: String,
    #[serde(rename = "type")]
    #[schemars(extend("const" = "webhook.test"))]
    event_type: &'static str,
}

/// A `webhook.test` event's data: the endpoint it tests.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TestEvent<'a> {
    endpoint_id: &'a str,
    url: &'a str,
}

/// The failed deliveries of a window, due again.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "WebhookRecovered")]
pub struct Recovered {
    /// How many deliveries are due again.
    #[schemars(range(min = 0))]
    recovered: i64,
    #[schemars(extend("format" = "date-time"))]
    since: String,
    #[schemars(extend("format" = "date-time"))]
    until: String,
}

/// An endpoint's URL as the delivery rules allow it (`webhook_allow_http` lets plain http
/// and local hosts through).
pub struct DeliverableUrl;

impl TextRule for DeliverableUrl {
    const DESCRIPTION: &'static str = "https, to a public host (plain http and local hosts \
         only where the operator allows them).";

    fn problem(text: &str) -> Option<Cow<'static, str>> {
        rules::check_url(text, config::flag("webhook_allow_http"))
            .err()
            .map(Cow::Owned)
    }
}

/// Reads an event list, recording why not in `body`.
fn event_list(body: &mut JsonBody, name: &'static str, value: Value) -> Option<Vec<String>> {
    let list: Option<Vec<String>> = value.as_array().and_then(|items| {
        items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect()
    });
    let Some(list) = list.filter(|l| l.len() <= rules::EVENT_TYPES.len()) else {
        body.error(name, "must be a list of event type strings");
        return None;
    };
    match rules::check_events(&list) {
        Ok(()) => Some(list),
        Err(why) => {
            body.error(name, why);
            None
        }
    }
}

/// `["*"]`, or event types each listed once.
fn event_list_schema() -> Value {
    json!({
        "oneOf": [
            { "const": ["*"] },
            {
                "type": "array",
                "minItems": 1,
                "maxItems": rules::EVENT_TYPES.len(),
                "uniqueItems": true,
                "items": { "enum": rules::EVENT_TYPES },
            },
        ],
    })
}

/// The event types an endpoint gets, required.
pub struct EventTypes;

impl FieldKind for EventTypes {
    /// None when missing or refused (the body then has an error).
    type Value = Option<Vec<String>>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Vec<String>> {
        let Some(value) = body.opt_value(name) else {
            body.error(name, "is required: a list of event types, or [\"*\"]");
            return None;
        };
        event_list(body, name, value)
    }

    fn schema() -> Value {
        let mut schema = event_list_schema();
        schema["description"] = "Event types to deliver (each once), or [\"*\"] for all".into();
        schema
    }
}

/// The event types an endpoint gets, when they change.
pub struct OptEventTypes;

impl FieldKind for OptEventTypes {
    type Value = Option<Vec<String>>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Vec<String>> {
        let value = body.opt_value(name)?;
        event_list(body, name, value)
    }

    fn schema() -> Value {
        json!({
            "anyOf": [event_list_schema(), { "type": "null" }],
            "description": "Event types to deliver (each once), or [\"*\"] for all; null keeps them",
        })
    }
}

request_body! {
    /// A new webhook endpoint.
    pub struct NewEndpointBody as "NewWebhookEndpoint" {
        "url" url: Checked<DeliverableUrl, MAX_URL>,
        "events" events: EventTypes,
        "description" description: OptText<MAX_DESCRIPTION>,
    }
}

request_body! {
    /// Changes to a webhook endpoint: the fields sent change, the others stay. Enabling
    /// clears the reason the platform disabled it.
    pub struct EndpointChangesBody as "WebhookEndpointChanges" {
        "url" url: OptChecked<DeliverableUrl, MAX_URL>,
        "events" events: OptEventTypes,
        "description" description: ClearableText<MAX_DESCRIPTION>,
        "enabled" enabled: OptBool,
    }
}

request_body! {
    /// A window of failed deliveries to send again.
    pub struct RecoveryBody as "WebhookRecovery" checked by RecoveryBody::check {
        "since" since: Timestamp,
        /// Now when absent, null or blank; must be after since.
        "until" until: OptTimestamp,
    }
}

impl RecoveryBody {
    /// The window must end after it starts (an absent end is now).
    fn check(&self, body: &mut JsonBody) {
        let until = self.until.unwrap_or(body.now() + 1);
        if self.since.is_some_and(|s| s >= until) {
            body.error("until", "must be after since");
        }
    }
}

/// The webhook routes: the tenant's server manages its endpoints.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/v1/webhooks",
        Server(create),
        "Create (webhooks)",
        |op| op
            .request_example(json!({
                "url": "https://backend.example.com/hooks",
                "events": ["broadcast.started"],
            }))
            .link("GET /api/v1/webhooks/{id}", &[("id", "$response.body#/id")])
            .link(
                "PATCH /api/v1/webhooks/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "DELETE /api/v1/webhooks/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "GET /api/v1/webhooks/{id}/deliveries",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/v1/webhooks/{id}/rotate-secret",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/v1/webhooks/{id}/test",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/v1/webhooks/{id}/recover",
                &[("id", "$response.body#/id")],
            )
            .errors(409, &["too_many_endpoints"]),
    ),
    endpoint!(
        GET "/api/v1/webhooks",
        Server(list),
        "List (webhooks)",
        |op| op
            .link(
                "GET /api/v1/webhooks/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_query"]),
    ),
    endpoint!(
        GET "/api/v1/webhooks/{id}",
        Server(get),
        "Get (webhooks)",
        |op| op.path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ"),
    ),
    endpoint!(
        PATCH "/api/v1/webhooks/{id}",
        Server(update),
        "Update (webhooks)",
        |op| op.path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ"),
    ),
    endpoint!(
        DELETE "/api/v1/webhooks/{id}",
        Server(delete),
        "Delete (webhooks)",
        |op| op.path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ"),
    ),
    endpoint!(
        POST "/api/v1/webhooks/{id}/rotate-secret",
        Server(rotate_secret),
        "Rotate secret (webhooks)",
        |op| op.path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ"),
    ),
    endpoint!(
        POST "/api/v1/webhooks/{id}/test",
        Server(send_test),
        "Send test (webhooks)",
        |op| op
            .path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ")
            .answers(
                202,
                "A webhook.test event is queued for the endpoint",
                Schema::view::<TestQueued>(),
            )
            .link(
                "POST /api/v1/webhooks/{id}/deliveries/{deliveryId}/retry",
                &[
                    ("id", "$request.path.id"),
                    ("deliveryId", "$response.body#/deliveryId"),
                ],
            ),
    ),
    endpoint!(
        GET "/api/v1/webhooks/{id}/deliveries",
        Server(deliveries),
        "Deliveries (webhooks)",
        |op| op
            .path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ")
            .errors(400, &["invalid_query"]),
    ),
    endpoint!(
        POST "/api/v1/webhooks/{id}/deliveries/{deliveryId}/retry",
        Server(retry),
        "Retry (webhooks)",
        |op| op
            .path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ")
            .path_id("deliveryId", "dlv_mXzfJK1jNinzAUbra0sITaRQ"),
    ),
    endpoint!(
        POST "/api/v1/webhooks/{id}/recover",
        Server(recover),
        "Recover (webhooks)",
        |op| op
            .path_id("id", "ep_mXzfJK1jNinzAUbra0sITaRQ")
            .answers(
                202,
                "The failed deliveries of the window are due again",
                Schema::view::<Recovered>(),
            ),
    ),
];

/// `{url, events, description?}`: the endpoint and its signing secret, shown this once.
fn create(ctx: &ServerCtx, new: NewEndpointBody) -> Result<Created<EndpointWithSecret>, ApiError> {
    let NewEndpointBody {
        url,
        events,
        description,
    } = new;
    let Some(events) = events else {
        return Err(ApiError::internal("validated events missing"));
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
    Ok(Created(EndpointWithSecret {
        endpoint: view(&ep, ctx.now()),
        secret,
    }))
}

/// The tenant's endpoints (no secrets).
fn list(ctx: &ServerCtx, _: NoBody) -> Result<Page<EndpointView>, ApiError> {
    let page = pagination::Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (endpoints, total) = store::list(&db, &ctx.tenant.client_id, page)?;
    let items: Vec<EndpointView> = endpoints.iter().map(|ep| view(ep, ctx.now())).collect();
    Ok(Page(Paged::new(items, total, page)))
}

fn load(ctx: &ServerCtx) -> Result<(::store::Db, Endpoint), ApiError> {
    let db = ctx.db()?;
    let ep = store::load(&db, &ctx.tenant.client_id, ctx.param("id"))?;
    Ok((db, ep))
}

/// One endpoint, with why the platform disabled it.
fn get(ctx: &ServerCtx, _: NoBody) -> Result<Json<EndpointView>, ApiError> {
    let (_, ep) = load(ctx)?;
    Ok(Json(view(&ep, ctx.now())))
}

/// `{url?, events?, description?, enabled?}` (an empty description clears it; enabling
/// clears the reason the platform disabled it).
fn update(ctx: &ServerCtx, sent: EndpointChangesBody) -> Result<Json<EndpointView>, ApiError> {
    let changes = Changes {
        url: sent.url,
        events: sent.events,
        description: sent.description.map(Option::unwrap_or_default),
        enabled: sent.enabled,
    };
    let (db, ep) = load(ctx)?;
    let ep = store::update(&db, &ep, &changes, ctx.now())?;
    Ok(Json(view(&ep, ctx.now())))
}

/// The endpoint and its delivery log.
fn delete(ctx: &ServerCtx, _: NoBody) -> Result<Json<EndpointDeleted>, ApiError> {
    let (db, ep) = load(ctx)?;
    store::delete(&db, &ep)?;
    Ok(Json(EndpointDeleted {
        deleted: true,
        id: ep.id,
    }))
}

/// A new secret, shown once; the old one keeps signing (a second signature) for 24 h.
fn rotate_secret(ctx: &ServerCtx, _: NoBody) -> Result<Json<EndpointWithSecret>, ApiError> {
    let key = secret_key()?;
    let (db, ep) = load(ctx)?;
    let secret = rules::new_secret();
    let sealed = key.seal(&secret, &store::secret_context(&ep.client_id, &ep.id))?;
    let now = ctx.now();
    let ep = store::rotate_secret(&db, &ep, &sealed, now + rules::PREVIOUS_SECRET_SECS, now)?;
    Ok(Json(EndpointWithSecret {
        endpoint: view(&ep, now),
        secret,
    }))
}

/// A `webhook.test` event for this endpoint only.
fn send_test(ctx: &ServerCtx, _: NoBody) -> Result<Accepted<TestQueued>, ApiError> {
    let (db, ep) = load(ctx)?;
    let now = ctx.now();
    let data = TestEvent {
        endpoint_id: &ep.id,
        url: &ep.url,
    };
    let (event_id, delivery_id) = db.transaction(|tx| {
        let subject = Subject {
            object_type: "webhook_endpoint",
            object_id: &ep.id,
        };
        let event_id = outbox::record(tx, &ep.client_id, "webhook.test", subject, &data, now)?;
        let delivery_id = store::deliver_only_to(tx, &ep, &event_id, "webhook.test", now)?;
        Ok((event_id, delivery_id))
    })?;
    Ok(Accepted(TestQueued {
        event_id,
        delivery_id,
        event_type: "webhook.test",
    }))
}

/// Newest first, paginated.
fn deliveries(ctx: &ServerCtx, _: NoBody) -> Result<Page<DeliveryView>, ApiError> {
    let page = pagination::Page::from_query(ctx.query())?;
    let (db, ep) = load(ctx)?;
    let (items, total) = store::deliveries(&db, &ep, page)?;
    let items: Vec<DeliveryView> = items.iter().map(delivery_view).collect();
    Ok(Page(Paged::new(items, total, page)))
}

/// Due again now, with the same `webhook-id`.
fn retry(ctx: &ServerCtx, _: NoBody) -> Result<Accepted<DeliveryView>, ApiError> {
    let (db, ep) = load(ctx)?;
    let delivery = store::retry(&db, &ep, ctx.param("deliveryId"), ctx.now())?;
    Ok(Accepted(delivery_view(&delivery)))
}

/// `{since, until?}` (RFC 3339): every failed delivery created in the window is sent again,
/// with its original `webhook-id`.
fn recover(ctx: &ServerCtx, window: RecoveryBody) -> Result<Accepted<Recovered>, ApiError> {
    let now = ctx.now();
    let until = window.until.unwrap_or(now + 1);
    let since = window
        .since
        .ok_or_else(|| ApiError::internal("validated since missing"))?;
    let (db, ep) = load(ctx)?;
    let count = store::recover(&db, &ep, since, until, now)?;
    Ok(Accepted(Recovered {
        recovered: count,
        since: time::format_rfc3339(since),
        until: time::format_rfc3339(until),
    }))
}
