//! Payouts: a creator asks for diamonds to be paid out (they are held at once); the
//! tenant's backend completes (paid) or rejects (returned) the request.

use crate::{rules, views};
use ::store::ledger::{self, Currency, Leg, Overdraft, system};
use ::store::outbox::{self, Subject};
use ::store::payouts::{self as store, Payout};
use ::store::{Db, monetization};
use domain::ApiError;
use domain::pagination::{Page, Paged};
use domain::request_body;
use domain::validate::body::{OptText, Text};
use edge::routing::Route;
use edge::spin::endpoint::{Created, Json, NoBody, Page as PageOf};
use edge::spin::http::{Handler, ServerCtx, UserCtx};
use edge::spin::idempotent::Committed;
use edge::{endpoint, idempotent_endpoint};
use serde_json::json;
use views::PayoutView;

fn announce(tx: &Db, client_id: &str, event: &str, p: &Payout, now: i64) -> Result<(), ApiError> {
    outbox::record(
        tx,
        client_id,
        event,
        Subject {
            object_type: "payout",
            object_id: &p.id,
        },
        &views::payout(p),
        now,
    )
    .map(|_| ())
}

request_body! {
    /// Diamonds a creator asks to be paid out.
    pub struct PayoutRequestBody as "PayoutRequest" {
        "diamonds" diamonds: rules::Amount,
    }
}

request_body! {
    /// A payout done by the tenant.
    pub struct PayoutCompletionBody as "PayoutCompletion" {
        /// The tenant's reference of the payment made.
        "externalReference" external_reference: Text<200>,
    }
}

request_body! {
    /// Why a payout is refused.
    pub struct PayoutRejectionBody as "PayoutRejection" {
        "reason" reason: OptText<500>,
    }
}

/// The payout routes: a creator's requests, the tenant's decisions.
pub const ROUTES: &[Route<Handler>] = &[
    idempotent_endpoint!(
        POST "/api/wallet/payouts",
        User(request),
        "Request (payouts)",
        |op| op
            .request_example(json!({ "diamonds": 1000 }))
            .link(
                "GET /api/wallet/payouts/{id}",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/v1/payouts/{id}/complete",
                &[("id", "$response.body#/id")],
            )
            .link(
                "POST /api/v1/payouts/{id}/reject",
                &[("id", "$response.body#/id")],
            )
            .errors(422, &["below_minimum_payout"])
            .errors(409, &["insufficient_funds"])
    ),
    endpoint!(
        GET "/api/wallet/payouts",
        User(list_own),
        "List own (payouts)",
        |op| op
            .link(
                "GET /api/wallet/payouts/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_query"])
    ),
    endpoint!(
        GET "/api/wallet/payouts/{id}",
        User(get_own),
        "Get own (payouts)",
        |op| op.errors(404, &["not_found"])
    ),
    endpoint!(
        GET "/api/v1/payouts",
        Server(list),
        "List (payouts)",
        |op| op.errors(400, &["invalid_query"])
    ),
    idempotent_endpoint!(
        POST "/api/v1/payouts/{id}/complete",
        Server(complete),
        "Complete (payouts)",
        |op| op
            .errors(404, &["not_found"])
            .errors(409, &["payout_decided"])
    ),
    idempotent_endpoint!(
        POST "/api/v1/payouts/{id}/reject",
        Server(reject),
        "Reject (payouts)",
        |op| op
            .errors(404, &["not_found"])
            .errors(409, &["payout_decided"])
    ),
];

/// At least the tenant's minimum, at most the wallet's diamonds.
fn request(
    ctx: &UserCtx,
    PayoutRequestBody { diamonds }: PayoutRequestBody,
    tx: &Db,
) -> Result<Committed<Created<PayoutView>>, ApiError> {
    let client_id = &ctx.tenant.client_id;
    let user_id = &ctx.user.id;
    let now = ctx.now();
    let min = monetization::get(tx, client_id)?.min_payout_diamonds;
    if diamonds < min {
        return Err(ApiError::new(
            422,
            "below_minimum_payout",
            format!("a payout is at least {min} diamonds"),
        )
        .with_extra("minPayoutDiamonds", min));
    }
    let payout = Payout {
        id: domain::ids::uuid(),
        user_id: user_id.clone(),
        diamonds,
        status: "pending".into(),
        external_reference: None,
        reason: None,
        requested_at: now,
        decided_at: None,
    };
    let hold = Leg::new(
        Currency::Diamonds,
        user_id,
        system::DIAMONDS_HELD,
        diamonds,
        "payout_hold",
    );
    let key = ctx.header("idempotency-key");
    ledger::post(
        tx,
        client_id,
        &payout.id,
        &[hold],
        Overdraft::Refused,
        key,
        now,
    )?;
    store::insert(tx, client_id, &payout)?;
    announce(tx, client_id, "payout.requested", &payout, now)?;
    Ok(Committed::new(Created(views::payout(&payout))))
}

/// The user's own payout requests.
fn list_own(ctx: &UserCtx, _: NoBody) -> Result<PageOf<PayoutView>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let db = ctx.db()?;
    let (items, total) = store::page(&db, &ctx.tenant.client_id, Some(&ctx.user.id), None, page)?;
    let items = items.iter().map(views::payout).collect();
    Ok(PageOf(Paged::new(items, total, page)))
}

/// `?status=pending|completed|rejected`: the tenant's payouts.
fn list(ctx: &ServerCtx, _: NoBody) -> Result<PageOf<PayoutView>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let status = ctx.query_value("status");
    if let Some(s) = &status
        && !matches!(s.as_str(), "pending" | "completed" | "rejected")
    {
        return Err(ApiError::bad_request(
            "invalid_query",
            "status must be pending, completed or rejected",
        ));
    }
    let db = ctx.db()?;
    let (items, total) = store::page(&db, &ctx.tenant.client_id, None, status.as_deref(), page)?;
    let items = items.iter().map(views::payout).collect();
    Ok(PageOf(Paged::new(items, total, page)))
}

/// Completes or rejects a pending payout: the held diamonds go to paid-out, or back.
fn decide(
    ctx: &ServerCtx,
    completed: bool,
    external_reference: Option<String>,
    reason: Option<String>,
    tx: &Db,
) -> Result<Committed<Json<PayoutView>>, ApiError> {
    let client_id = &ctx.tenant.client_id;
    let id = ctx.param("id").to_string();
    let now = ctx.now();
    let current = store::get(tx, client_id, &id)?.ok_or_else(|| ApiError::not_found("payout"))?;
    let status = if completed { "completed" } else { "rejected" };
    let decided = store::decide(
        tx,
        client_id,
        &id,
        status,
        external_reference.as_deref(),
        reason.as_deref(),
        now,
    )?
    .ok_or_else(|| {
        ApiError::conflict(
            "payout_decided",
            format!("this payout is {} already", current.status),
        )
    })?;
    let leg = if completed {
        Leg::new(
            Currency::Diamonds,
            system::DIAMONDS_HELD,
            system::DIAMONDS_PAID_OUT,
            decided.diamonds,
            "payout",
        )
    } else {
        Leg::new(
            Currency::Diamonds,
            system::DIAMONDS_HELD,
            &decided.user_id,
            decided.diamonds,
            "payout_return",
        )
    };
    let key = ctx.header("idempotency-key");
    ledger::post(
        tx,
        client_id,
        &decided.id,
        &[leg],
        Overdraft::Refused,
        key,
        now,
    )?;
    let event = if completed {
        "payout.completed"
    } else {
        "payout.rejected"
    };
    announce(tx, client_id, event, &decided, now)?;
    Ok(Committed::new(Json(views::payout(&decided))))
}

fn complete(
    ctx: &ServerCtx,
    done: PayoutCompletionBody,
    tx: &Db,
) -> Result<Committed<Json<PayoutView>>, ApiError> {
    decide(ctx, true, Some(done.external_reference), None, tx)
}

fn reject(
    ctx: &ServerCtx,
    refused: PayoutRejectionBody,
    tx: &Db,
) -> Result<Committed<Json<PayoutView>>, ApiError> {
    decide(ctx, false, None, refused.reason, tx)
}

/// One of the user's own payouts (any other is 404).
fn get_own(ctx: &UserCtx, _: NoBody) -> Result<Json<PayoutView>, ApiError> {
    let db = ctx.db()?;
    match store::get(&db, &ctx.tenant.client_id, ctx.param("id"))? {
        Some(p) if p.user_id == ctx.user.id => Ok(Json(views::payout(&p))),
        _ => Err(ApiError::not_found("payout")),
    }
}
