//! The money resources as the REST API answers them (and as webhook events carry them):
//! each a type, from which the document's schema is derived (`openapi/src/schemas.rs`).

use domain::time::{format_rfc3339, format_rfc3339_millis};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use store::gifts::{Gift, Standing};
use store::ledger::Transfer;
use store::payouts::Payout;
use store::subscriptions::{Plan, Subscription};

/// How long a subscription's period is.
const PERIOD_DAYS: u8 = 30;

/// A ledger transfer.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Transfer")]
pub struct TransferView {
    pub id: String,
    #[schemars(extend("enum" = ["tokens", "diamonds"]))]
    pub currency: String,
    pub amount: i64,
    pub kind: String,
    pub from: String,
    pub to: String,
    pub reference: Option<String>,
    pub reason: Option<String>,
    pub reverses: Option<String>,
    pub operation_id: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

pub fn transfer(t: &Transfer) -> TransferView {
    TransferView {
        id: t.id.clone(),
        currency: t.currency.clone(),
        amount: t.amount,
        kind: t.kind.clone(),
        from: t.from.clone(),
        to: t.to.clone(),
        reference: t.reference.clone(),
        reason: t.reason.clone(),
        reverses: t.reverses.clone(),
        operation_id: t.operation_id.clone(),
        created_at: format_rfc3339(t.created_at),
    }
}

/// A transfer as one of the wallet owner's transactions, signed from their side.
#[derive(Debug, Serialize)]
pub struct TransactionView {
    #[serde(flatten)]
    transfer: TransferView,
    #[serde(flatten)]
    side: Side,
}

/// Which way a transaction went for the wallet's owner.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(inline)]
struct Side {
    #[schemars(extend("enum" = ["in", "out"]))]
    direction: &'static str,
    /// The amount, negative when it left the wallet.
    change: i64,
}

/// "A `Transfer` and its side" (`allOf`), rather than the transfer's fields again.
impl JsonSchema for TransactionView {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Transaction".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let transfer = generator.subschema_for::<TransferView>();
        let side = Side::json_schema(generator);
        json_schema!({
            "description": "A transfer as one of the wallet owner's transactions, signed from their side.",
            "allOf": [transfer, side],
        })
    }
}

pub fn transaction(t: &Transfer, owner: &str) -> TransactionView {
    let incoming = t.to == owner;
    TransactionView {
        transfer: transfer(t),
        side: Side {
            direction: if incoming { "in" } else { "out" },
            change: if incoming { t.amount } else { -t.amount },
        },
    }
}

/// A gift of the tenant's catalog.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Gift")]
pub struct GiftView {
    pub id: String,
    pub name: String,
    pub price_tokens: i64,
    pub image_file_id: Option<String>,
    #[schemars(extend("enum" = ["small", "large", "fullscreen"]))]
    pub animation: String,
    pub active: bool,
    pub sort_order: i64,
}

pub fn gift(g: &Gift) -> GiftView {
    GiftView {
        id: g.id.clone(),
        name: g.name.clone(),
        price_tokens: g.price_tokens,
        image_file_id: g.image_file_id.clone(),
        animation: g.animation.clone(),
        active: g.active,
        sort_order: g.sort_order,
    }
}

/// A gifter's place on a leaderboard.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Supporter")]
pub struct SupporterView {
    #[schemars(extend("minimum" = 1))]
    pub rank: usize,
    pub user_id: String,
    pub username: String,
    pub tokens: i64,
    pub gifts: i64,
}

pub fn standing(rank: usize, s: &Standing) -> SupporterView {
    SupporterView {
        rank: rank + 1,
        user_id: s.user_id.clone(),
        username: s.username.clone(),
        tokens: s.tokens,
        gifts: s.gifts,
    }
}

/// A creator's request to be paid out.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Payout")]
pub struct PayoutView {
    pub id: String,
    pub user_id: String,
    pub diamonds: i64,
    #[schemars(extend("enum" = ["pending", "completed", "rejected"]))]
    pub status: String,
    pub external_reference: Option<String>,
    pub reason: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub requested_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub decided_at: Option<String>,
}

pub fn payout(p: &Payout) -> PayoutView {
    PayoutView {
        id: p.id.clone(),
        user_id: p.user_id.clone(),
        diamonds: p.diamonds,
        status: p.status.clone(),
        external_reference: p.external_reference.clone(),
        reason: p.reason.clone(),
        requested_at: format_rfc3339(p.requested_at),
        decided_at: p.decided_at.map(format_rfc3339),
    }
}

/// A creator's subscription plan.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SubscriptionPlan")]
pub struct PlanView {
    pub id: String,
    pub creator_id: String,
    pub name: String,
    pub price_tokens: i64,
    /// Every period is 30 days.
    #[schemars(extend("const" = PERIOD_DAYS))]
    pub period_days: u8,
    pub perks: Vec<String>,
    pub active: bool,
}

pub fn plan(p: &Plan) -> PlanView {
    PlanView {
        id: p.id.clone(),
        creator_id: p.creator_id.clone(),
        name: p.name.clone(),
        price_tokens: p.price_tokens,
        period_days: PERIOD_DAYS,
        perks: p.perks.clone(),
        active: p.active,
    }
}

/// A fan's subscription to a creator.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Subscription")]
pub struct SubscriptionView {
    pub id: String,
    pub creator_id: String,
    pub subscriber_id: String,
    pub plan_id: String,
    pub price_tokens: i64,
    #[schemars(extend("enum" = ["active", "lapsed"]))]
    pub status: String,
    pub cancel_at_period_end: bool,
    #[schemars(extend("format" = "date-time"))]
    pub current_period_start: String,
    #[schemars(extend("format" = "date-time"))]
    pub current_period_end: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

pub fn subscription(s: &Subscription) -> SubscriptionView {
    SubscriptionView {
        id: s.id.clone(),
        creator_id: s.creator_id.clone(),
        subscriber_id: s.subscriber_id.clone(),
        plan_id: s.plan_id.clone(),
        price_tokens: s.price_tokens,
        status: s.status.clone(),
        cancel_at_period_end: s.cancel_at_period_end,
        current_period_start: format_rfc3339(s.period_start),
        current_period_end: format_rfc3339(s.period_end),
        created_at: format_rfc3339(s.created_at),
    }
}

/// A time in epoch milliseconds, as RFC 3339.
pub fn millis(ms: i64) -> String {
    format_rfc3339_millis(ms)
}
