//! Subscriptions: creators publish plans (a price in tokens per 30 days); viewers
//! subscribe (charged at once, the creator earns diamonds at the tenant's rate), list and
//! cancel theirs (at the period's end); the `renew-subscriptions` job charges the next
//! period or lets the subscription lapse.

use crate::idempotent::{self, Outcome};
use crate::{rules, views};
use ::store::ledger::{self, Currency, Leg, Overdraft, system};
use ::store::monetization;
use ::store::outbox::{self, Subject};
use ::store::subscriptions::{self as store, Plan, Subscription};
use ::store::{Db, users};
use domain::ApiError;
use domain::problem::json_value;
use domain::request_body;
use domain::validate::MAX_NAME;
use domain::validate::body::{OptBool, OptTextList, RequestBody, Text};
use edge::spin::http::{Reply, UserCtx, json};
use schemars::JsonSchema;
use serde::Serialize;
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

/// `PUT /api/users/me/subscription-plans/{planId}` `{name, priceTokens, perks?, active?}`.
pub fn put_plan(ctx: &UserCtx) -> Reply {
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
    Ok(json(200, &views::plan(&plan)))
}

/// A creator's subscription plans.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SubscriptionPlans")]
pub struct Plans {
    creator_id: String,
    items: Vec<PlanView>,
}

/// `GET /api/users/{id}/subscription-plans`: a creator's active plans (`me`: all of one's
/// own).
pub fn plans(ctx: &UserCtx) -> Reply {
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
    Ok(json(
        200,
        &Plans {
            creator_id: creator.to_string(),
            items,
        },
    ))
}

request_body! {
    /// The plan to subscribe to.
    pub struct SubscribeBody as "Subscribe" {
        "planId" plan_id: Text<64>,
    }
}

/// `POST /api/users/{id}/subscriptions` `{planId}` (Idempotency-Key): subscribes to a
/// creator, paying the first period now.
pub fn subscribe(ctx: &UserCtx) -> Reply {
    let mut body = ctx.json()?;
    let SubscribeBody { plan_id } = SubscribeBody::read(&mut body);
    body.finish()?;
    let client_id = &ctx.tenant.client_id;
    let subscriber = &ctx.user.id;
    let creator = ctx.param("id").to_string();
    let now = ctx.now();
    let db = ctx.db()?;
    idempotent::run(ctx, &db, client_id, subscriber, |tx| {
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
        let started = store::start(tx, client_id, &id, &creator, subscriber, &plan, now)?
            .ok_or_else(|| {
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
        Ok(Outcome::new(
            201,
            json_value(&views::subscription(&started))?,
        ))
    })
}

/// A user's own subscriptions.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "SubscriptionList")]
pub struct OwnSubscriptions {
    items: Vec<SubscriptionView>,
}

/// `GET /api/users/me/subscriptions`: the user's own subscriptions.
pub fn list_own(ctx: &UserCtx) -> Reply {
    let db = ctx.db()?;
    let items = store::of_subscriber(&db, &ctx.tenant.client_id, &ctx.user.id)?
        .iter()
        .map(views::subscription)
        .collect();
    Ok(json(200, &OwnSubscriptions { items }))
}

/// `DELETE /api/users/{id}/subscriptions`: cancels the user's subscription to creator
/// `{id}` at the end of the period already paid.
pub fn cancel(ctx: &UserCtx) -> Reply {
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let now = ctx.now();
    let canceled = db.transaction(|tx| {
        let s = store::cancel(tx, client_id, ctx.param("id"), &ctx.user.id, now)?
            .ok_or_else(|| ApiError::not_found("subscription"))?;
        announce(tx, client_id, "subscription.canceled", &s, now)?;
        Ok(s)
    })?;
    Ok(json(200, &views::subscription(&canceled)))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new(
            "PUT /api/users/me/subscription-plans/{planId}",
            "Put plan (subscriptions)",
        )
        .takes(Schema::body::<SubscriptionPlanBody>())
        .parameter(json!({
            "name": "planId",
            "in": "path",
            "required": true,
            "schema": { "type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$" },
        }))
        .answers(200, "OK", Schema::view::<PlanView>())
        .link(
            "GET /api/users/{id}/subscription-plans",
            &[("id", "$response.body#/creatorId")],
        )
        .link(
            "POST /api/users/{id}/subscriptions",
            &[("id", "$response.body#/creatorId")],
        )
        .errors(400, &["invalid_id"]),
        Operation::new(
            "GET /api/users/{id}/subscription-plans",
            "Plans (subscriptions)",
        )
        .answers(200, "OK", Schema::view::<Plans>())
        .errors(404, &["not_found"]),
        Operation::new(
            "GET /api/users/me/subscriptions",
            "List own (subscriptions)",
        )
        .answers(200, "OK", Schema::view::<OwnSubscriptions>()),
        Operation::new(
            "POST /api/users/{id}/subscriptions",
            "Subscribe (subscriptions)",
        )
        .takes(Schema::body::<SubscribeBody>())
        .answers(201, "Created", Schema::view::<SubscriptionView>())
        .link(
            "DELETE /api/users/{id}/subscriptions",
            &[("id", "$response.body#/creatorId")],
        )
        .errors(404, &["not_found"])
        .errors(409, &["already_subscribed"])
        .errors(422, &["cannot_subscribe_to_yourself"]),
        Operation::new(
            "DELETE /api/users/{id}/subscriptions",
            "Cancel (subscriptions)",
        )
        .answers(200, "OK", Schema::view::<SubscriptionView>())
        .errors(404, &["not_found"]),
    ]
}
