//! The JSON shapes of the money resources, as the REST API answers them (and as webhook
//! events carry them).

use common::store::gifts::{Gift, Standing};
use common::store::ledger::Transfer;
use common::store::payouts::Payout;
use common::store::subscriptions::{Plan, Subscription};
use common::time::{format_rfc3339, format_rfc3339_millis};
use serde_json::{Value, json};

pub fn transfer(t: &Transfer) -> Value {
    json!({
        "id": t.id,
        "currency": t.currency,
        "amount": t.amount,
        "kind": t.kind,
        "from": t.from,
        "to": t.to,
        "reference": t.reference,
        "reason": t.reason,
        "reverses": t.reverses,
        "operationId": t.operation_id,
        "createdAt": format_rfc3339(t.created_at),
    })
}

/// A transfer as one of `owner`'s wallet transactions: signed from the owner's side.
pub fn transaction(t: &Transfer, owner: &str) -> Value {
    let mut v = transfer(t);
    let incoming = t.to == owner;
    v["direction"] = if incoming { "in" } else { "out" }.into();
    v["change"] = if incoming { t.amount } else { -t.amount }.into();
    v
}

pub fn gift(g: &Gift) -> Value {
    json!({
        "id": g.id,
        "name": g.name,
        "priceTokens": g.price_tokens,
        "imageFileId": g.image_file_id,
        "animation": g.animation,
        "active": g.active,
        "sortOrder": g.sort_order,
    })
}

pub fn standing(rank: usize, s: &Standing) -> Value {
    json!({
        "rank": rank + 1,
        "userId": s.user_id,
        "username": s.username,
        "tokens": s.tokens,
        "gifts": s.gifts,
    })
}

pub fn payout(p: &Payout) -> Value {
    json!({
        "id": p.id,
        "userId": p.user_id,
        "diamonds": p.diamonds,
        "status": p.status,
        "externalReference": p.external_reference,
        "reason": p.reason,
        "requestedAt": format_rfc3339(p.requested_at),
        "decidedAt": p.decided_at.map(format_rfc3339),
    })
}

pub fn plan(p: &Plan) -> Value {
    json!({
        "id": p.id,
        "creatorId": p.creator_id,
        "name": p.name,
        "priceTokens": p.price_tokens,
        "periodDays": 30,
        "perks": p.perks,
        "active": p.active,
    })
}

pub fn subscription(s: &Subscription) -> Value {
    json!({
        "id": s.id,
        "creatorId": s.creator_id,
        "subscriberId": s.subscriber_id,
        "planId": s.plan_id,
        "priceTokens": s.price_tokens,
        "status": s.status,
        "cancelAtPeriodEnd": s.cancel_at_period_end,
        "currentPeriodStart": format_rfc3339(s.period_start),
        "currentPeriodEnd": format_rfc3339(s.period_end),
        "createdAt": format_rfc3339(s.created_at),
    })
}

/// A time in epoch milliseconds, as RFC 3339.
pub fn millis(ms: i64) -> String {
    format_rfc3339_millis(ms)
}
