//! Subscriptions: creators publish plans (a price in tokens per 30 days); viewers
//! subscribe (charged at once, the creator earns diamonds at the tenant's rate), list and
//! cancel theirs (at the period's end); the `renew-subscriptions` job charges the next
//! period or lets the subscription lapse.

use crate::{rules, views};
use ::store::ledger::{self, Currency, Leg, Overdraft, system};
use ::store::monetization;
use ::store::outbox::{self, Subject};
use ::store::subscriptions::{self as store, Plan, Subscription};
use ::store::{Db, users};
use domain::ApiError;
use domain::request_body;
use domain::validate::MAX_NAME;
use domain::validate::body::{OptBool, OptTextList, RequestBody, Text};
use edge::contract::Schema;
use edge::routing::Route;
use edge::spin::endpoint::{Created, Json, NoBody};
use edge::spin::http::{Handler, UserCtx};
use edge::spin::idempotent::Committed;
use edge::{endpoint, idempotent_endpoint};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use views::{PlanView, SubscriptionView};

/// The most perks a plan lists, and the longest perk.
const MAX_PERKS: usize = 20;
const MAX_PERK: usize = 200;

pub fn announce(
    tx: &Db,
    client_id: &str,
    event: &str,
    s: &Subscription,
    now: i64,
) -> Result<(), ApiError> {
    outbox::record(
        tx,
        client_id,
        event,
        Subject {
            object_type: "subscription",
            object_id: &s.id,
        },
        &views::subscription(s),
        now,
    )
    .map(|_| ())
}

/// Charges one period of `price` from the subscriber to the platform, the creator earning
/// diamonds at the tenant's rate (inside the caller's transaction).
pub fn charge(
    tx: &Db,
    client_id: &str,
    subscriber: &str,
    creator: &str,
    price: i64,
    operation: &str,
    now: i64,
) -> Result<(), ApiError> {
    let rate = monetization::get(tx, client_id)?.diamonds_per_100_tokens;
    let diamonds = rules::diamonds_for(price, rate);
    let mut legs = vec![Leg::new(
        Currency::Tokens,
        subscriber,
        system::TOKENS_EARNED,
        price,
        "subscription",
    )];
    if diamonds > 0 {
        legs.push(Leg::new(
            Currency::Diamonds,
            system::DIAMONDS_ISSUED,
            creator,
            diamonds,
            "subscription",
        ));
    }
    ledger::post(
        tx,
        client_id,
        operation,
        &legs,
        Overdraft::Refused,
        None,
        now,
    )
    .map(|_| ())
}

request_body! {
    /// A subscription plan of the caller's.
    pub struct SubscriptionPlanBody as "SubscriptionPlanDefinition" {
        "name" name: Text<MAX_NAME>,
        "priceTokens" price_tokens: rules::Amount,
        /// What subscribers get, as the creator words it.
        "perks" perks: OptTextList<MAX_PERKS, MAX_PERK>,
        /// Whether fans may subscribe to it (true by default).
        "active" active: OptBool,
    }
}

/// The subscription routes: a creator's plans, subscribing, one's own subscriptions and
/// cancelling.
pub const ROUTES: &[Route<Handler>] = &[
    // It reads its body itself: the plan's id is checked first.
    endpoint!(
        PUT "/api/users/me/subscription-plans/{planId}",
        User(put_plan),
        "Put plan (subscriptions)",
        |op| op
            .takes(Schema::body::<SubscriptionPlanBody>())
            .parameter(json!({
                "name": "planId",
                "in": "path",
                "required": true,
                "schema": { "type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$" },
            }))
            .link(
                "GET /api/users/{id}/subscription-plans",
                &[("id", "$response.body#/creatorId")],
            )
            .link(
                "POST /api/users/{id}/subscriptions",
                &[("id", "$response.body#/creatorId")],
            )
            .errors(400, &["invalid_id"])
    ),
    endpoint!(
        GET "/api/users/{id}/subscription-plans",
        User(plans),
        "Plans (subscriptions)",
        |op| op.errors(404, &["not_found"])
    ),
    endpoint!(
        GET "/api/users/me/subscriptions",
        User(list_own),
        "List own (subscriptions)"
    ),
    idempotent_endpoint!(
        POST "/api/users/{id}/subscriptions",
        User(subscribe),
        "Subscribe (subscriptions)",
        |op| op
            .link(
                "DELETE /api/users/{id}/subscriptions",
                &[("id", "$response.body#/creatorId")],
            )
            .errors(404, &["not_found"])
            .errors(409, &["already_subscribed"])
            .errors(422, &["cannot_subscribe_to_yourself"])
    ),
    endpoint!(
        DELETE "/api/users/{id}/subscriptions",
        User(cancel),
        "Cancel (subscriptions)",
        |op| op.errors(404, &["not_found"])
    ),
];

/// `{name, priceTokens, perks?, active?}`.
fn put_plan(ctx: &UserCtx, _: NoBody) -> Result<Json<PlanView>, ApiError> {
    let id = ctx.param("planId").to_string();
    rules::require_slug(&id, "plan")?;
    let mut body = ctx.json()?;
    let asked = SubscriptionPlanBody::read(&mut body);
    body.finish()?;
    let plan = Plan {
        id,
        creator_id: ctx.user.id.clone(),
        name: asked.name,
        price_tokens: asked.price_tokens,
        perks: asked.perks.unwrap_or_default(),
        active: asked.active.unwrap_or(true),
    };
    let db = ctx.db()?;
    store::put_plan(&db, &ctx.tenant.client_id, &plan, ctx.now())?;
    Ok(Json(views::plan(&plan)))
}

/// A creator's subscription plans.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SubscriptionPlans")]
pub struct Plans {
    creator_id: String,
    items: Vec<PlanView>,
}

/// A creator's active plans (`me`: all of one's own).
fn plans(ctx: &UserCtx, _: NoBody) -> Result<Json<Plans>, ApiError> {
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let (creator, own) = match ctx.param("id") {
        "me" => (ctx.user.id.as_str(), true),
        id => (id, id == ctx.user.id),
    };
    if !own && !users::exists(&db, client_id, creator)? {
        return Err(ApiError::not_found("user"));
    }
    let items = store::plans(&db, client_id, creator, !own)?
        .iter()
        .map(views::plan)
        .collect();
    Ok(Json(Plans {
        creator_id: creator.to_string(),
        items,
    }))
}

request_body! {
    /// The plan to subscribe to.
    pub struct SubscribeBody as "Subscribe" {
        "planId" plan_id: Text<64>,
    }
}

/// Subscribes to a creator, paying the first period now.
fn subscribe(
    ctx: &UserCtx,
    SubscribeBody { plan_id }: SubscribeBody,
    tx: &Db,
) -> Result<Committed<Created<SubscriptionView>>, ApiError> {
    let client_id = &ctx.tenant.client_id;
    let subscriber = &ctx.user.id;
    let creator = ctx.param("id").to_string();
    let now = ctx.now();
    if creator == *subscriber {
        return Err(ApiError::new(
            422,
            "cannot_subscribe_to_yourself",
            "subscribe to someone else",
        ));
    }
    let plan = store::plan(tx, client_id, &creator, &plan_id)?
        .filter(|p| p.active)
        .ok_or_else(|| ApiError::not_found("plan"))?;
    let id = domain::ids::uuid();
    charge(
        tx,
        client_id,
        subscriber,
        &creator,
        plan.price_tokens,
        &id,
        now,
    )?;
    let settings = monetization::get(tx, client_id)?;
    for (window, secs, cap) in rules::cap_windows(&settings) {
        let spent = ledger::spent_since(tx, client_id, subscriber, now - secs + 1)?;
        rules::check_cap(window, cap, spent)?;
    }
    let started =
        store::start(tx, client_id, &id, &creator, subscriber, &plan, now)?.ok_or_else(|| {
            ApiError::conflict(
                "already_subscribed",
                "you already subscribe to this creator",
            )
        })?;
    ::store::analytics::creator_gained(
        tx,
        client_id,
        &creator,
        ::store::analytics::Gained::Subscriber,
        now,
    )?;
    announce(tx, client_id, "subscription.started", &started, now)?;
    Ok(Committed::new(Created(views::subscription(&started))))
}

/// A user's own subscriptions.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "SubscriptionList")]
pub struct OwnSubscriptions {
    items: Vec<SubscriptionView>,
}

/// The user's own subscriptions.
fn list_own(ctx: &UserCtx, _: NoBody) -> Result<Json<OwnSubscriptions>, ApiError> {
    let db = ctx.db()?;
    let items = store::of_subscriber(&db, &ctx.tenant.client_id, &ctx.user.id)?
        .iter()
        .map(views::subscription)
        .collect();
    Ok(Json(OwnSubscriptions { items }))
}

/// Cancels the user's subscription to creator `{id}` at the end of the period already
/// paid.
fn cancel(ctx: &UserCtx, _: NoBody) -> Result<Json<SubscriptionView>, ApiError> {
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let now = ctx.now();
    let canceled = db.transaction(|tx| {
        let s = store::cancel(tx, client_id, ctx.param("id"), &ctx.user.id, now)?
            .ok_or_else(|| ApiError::not_found("subscription"))?;
        announce(tx, client_id, "subscription.canceled", &s, now)?;
        Ok(s)
    })?;
    Ok(Json(views::subscription(&canceled)))
}
