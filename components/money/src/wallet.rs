//! Wallets: a user's balances and transactions, the tenant's credits (purchases its
//! backend verified) and reversals (refunds, chargebacks).

use crate::{rules, views};
use domain::ApiError;
use domain::pagination::{Page, Paged};
use domain::request_body;
use domain::validate::body::{OptText, Text};
use edge::routing::Route;
use edge::spin::endpoint::{Created, Json, NoBody, Page as PageOf};
use edge::spin::http::{Handler, ServerCtx, UserCtx};
use edge::spin::idempotent::Committed;
use edge::{endpoint, idempotent_endpoint};
use schemars::JsonSchema;
use serde::Serialize;
use store::ledger::{self, Currency, Leg, Overdraft, system};
use store::outbox::{self, Subject};
use store::{Db, payouts, users};

/// The most characters of a purchase reference or a reason.
const MAX_REFERENCE: usize = 200;
const MAX_REASON: usize = 500;

/// A user's balances; tokens below 0 (after a chargeback) block spending.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Wallet")]
pub struct WalletView {
    user_id: String,
    tokens: i64,
    diamonds: i64,
    /// Diamonds held for payouts not decided yet.
    #[schemars(range(min = 0))]
    diamonds_held: i64,
    spending_blocked: bool,
}

/// A transfer and the wallet it changed, after it: what a credit or a reversal answers
/// (and its `wallet.credited` or `transfer.reversed` webhook carries).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "TransferWithWallet")]
pub struct TransferWithWallet {
    #[serde(flatten)]
    transfer: views::TransferView,
    wallet: WalletView,
}

/// The wallet of `user_id`: balances, diamonds held for payouts, and whether a chargeback
/// blocks spending.
pub fn wallet_of(db: &Db, client_id: &str, user_id: &str) -> Result<WalletView, ApiError> {
    let tokens = ledger::balance(db, client_id, user_id, Currency::Tokens)?;
    let diamonds = ledger::balance(db, client_id, user_id, Currency::Diamonds)?;
    Ok(WalletView {
        user_id: user_id.to_string(),
        tokens,
        diamonds,
        diamonds_held: payouts::held(db, client_id, user_id)?,
        spending_blocked: tokens < 0,
    })
}

fn get(ctx: &UserCtx, _: NoBody) -> Result<Json<WalletView>, ApiError> {
    let db = ctx.db()?;
    Ok(Json(wallet_of(&db, &ctx.tenant.client_id, &ctx.user.id)?))
}

/// `?currency=tokens|diamonds&limit&offset`: newest first.
fn transactions(ctx: &UserCtx, _: NoBody) -> Result<PageOf<views::TransactionView>, ApiError> {
    let page = Page::from_query(ctx.query())?;
    let currency = match ctx.query_value("currency") {
        None => None,
        Some(text) => Some(Currency::parse(&text).ok_or_else(|| {
            ApiError::bad_request("invalid_query", "currency must be tokens or diamonds")
        })?),
    };
    let db = ctx.db()?;
    let owner = &ctx.user.id;
    let (items, total) = ledger::page_of_owner(&db, &ctx.tenant.client_id, owner, currency, page)?;
    let items = items.iter().map(|t| views::transaction(t, owner)).collect();
    Ok(PageOf(Paged::new(items, total, page)))
}

request_body! {
    /// Tokens the tenant was paid for, credited to a user's wallet.
    pub struct CreditBody as "Credit" {
        "tokens" tokens: rules::Amount,
        /// The tenant's own reference of the payment: a reference credits once.
        "reference" reference: Text<MAX_REFERENCE>,
        "reason" reason: OptText<MAX_REASON>,
    }
}

request_body! {
    /// Why a credit is reversed.
    pub struct ReversalBody as "Reversal" {
        "reason" reason: OptText<MAX_REASON>,
    }
}

/// The wallet routes: the user's balances and transactions, the tenant's credits and
/// reversals.
pub const ROUTES: &[Route<Handler>] = &[
    endpoint!(GET "/api/wallet", User(get), "Get (wallet)"),
    endpoint!(
        GET "/api/wallet/transactions",
        User(transactions),
        "Transactions (wallet)",
        |op| op
            .link(
                "GET /api/wallet/transactions/{id}",
                &[("id", "$response.body#/items/0/id")],
            )
            .errors(400, &["invalid_query"])
            .errors(404, &["not_found"])
    ),
    endpoint!(
        GET "/api/wallet/transactions/{id}",
        User(transaction),
        "Transaction (wallet)",
        |op| op.errors(404, &["not_found"])
    ),
    idempotent_endpoint!(
        POST "/api/v1/wallets/{userId}/credits",
        Server(credit),
        "Credit (wallet)",
        |op| op
            .link(
                "POST /api/v1/transfers/{id}/reverse",
                &[("id", "$response.body#/id")],
            )
            .errors(404, &["not_found"])
            .errors(409, &["duplicate_reference"])
    ),
    idempotent_endpoint!(
        POST "/api/v1/transfers/{id}/reverse",
        Server(reverse),
        "Reverse (wallet)",
        |op| op
            .errors(404, &["not_found"])
            .errors(409, &["already_reversed", "not_reversible"])
    ),
];

/// The tenant's backend credits tokens it was paid for. A reference credits once per
/// tenant; a second credit with it is 409 naming the first.
fn credit(
    ctx: &ServerCtx,
    body: CreditBody,
    tx: &Db,
) -> Result<Committed<Created<TransferWithWallet>>, ApiError> {
    let CreditBody {
        tokens,
        reference,
        reason,
    } = body;
    let client_id = &ctx.tenant.client_id;
    let user_id = ctx.param("userId").to_string();
    let now = ctx.now();
    if !users::exists(tx, client_id, &user_id)? {
        return Err(ApiError::not_found("user"));
    }
    let operation = domain::ids::uuid();
    let mut leg = Leg::new(
        Currency::Tokens,
        system::TOKENS_ISSUED,
        &user_id,
        tokens,
        "credit",
    );
    leg.reference = Some(&reference);
    leg.reason = reason.as_deref();
    if let Some(first) = ledger::claim_reference(tx, client_id, &reference, &operation)? {
        return Err(ApiError::conflict(
            "duplicate_reference",
            format!("reference {reference} was credited already"),
        )
        .with_extra("transferId", first));
    }
    let key = ctx.header("idempotency-key");
    let transfer = ledger::post(
        tx,
        client_id,
        &operation,
        &[leg],
        Overdraft::Refused,
        key,
        now,
    )?
    .transfers
    .remove(0);
    ledger::name_reference(tx, client_id, &reference, &transfer.id)?;
    let data = TransferWithWallet {
        transfer: views::transfer(&transfer),
        wallet: wallet_of(tx, client_id, &user_id)?,
    };
    outbox::record(
        tx,
        client_id,
        "wallet.credited",
        Subject {
            object_type: "transfer",
            object_id: &transfer.id,
        },
        &data,
        now,
    )?;
    Ok(Committed::new(Created(data)))
}

/// A refund or chargeback of a credit, written as the reversing transfer. It may leave
/// the wallet in debt (the tokens were spent), which then blocks spending until later
/// credits settle it.
fn reverse(
    ctx: &ServerCtx,
    ReversalBody { reason }: ReversalBody,
    tx: &Db,
) -> Result<Committed<Created<TransferWithWallet>>, ApiError> {
    let client_id = &ctx.tenant.client_id;
    let transfer_id = ctx.param("id").to_string();
    let now = ctx.now();
    let original = ledger::transfer(tx, client_id, &transfer_id)?
        .ok_or_else(|| ApiError::not_found("transfer"))?;
    if original.kind != "credit" {
        return Err(ApiError::conflict(
            "not_reversible",
            "only credits are reversed (gifts and payouts have their own flows)",
        ));
    }
    if let Some(reversal) = ledger::reversal_of(tx, client_id, &original.id)? {
        return Err(
            ApiError::conflict("already_reversed", "this transfer was reversed already")
                .with_extra("reversalId", reversal.id),
        );
    }
    let mut leg = Leg::new(
        Currency::Tokens,
        &original.to,
        system::TOKENS_ISSUED,
        original.amount,
        "chargeback",
    );
    leg.reverses = Some(&original.id);
    leg.reason = reason.as_deref();
    let key = ctx.header("idempotency-key");
    let operation = domain::ids::uuid();
    let reversal = ledger::post(
        tx,
        client_id,
        &operation,
        &[leg],
        Overdraft::Chargeback,
        key,
        now,
    )?
    .transfers
    .remove(0);
    let data = TransferWithWallet {
        transfer: views::transfer(&reversal),
        wallet: wallet_of(tx, client_id, &original.to)?,
    };
    outbox::record(
        tx,
        client_id,
        "transfer.reversed",
        Subject {
            object_type: "transfer",
            object_id: &original.id,
        },
        &data,
        now,
    )?;
    Ok(Committed::new(Created(data)))
}

/// One of the user's own transfers (any other is 404).
fn transaction(ctx: &UserCtx, _: NoBody) -> Result<Json<views::TransactionView>, ApiError> {
    let db = ctx.db()?;
    let owner = &ctx.user.id;
    match ledger::transfer(&db, &ctx.tenant.client_id, ctx.param("id"))? {
        Some(t) if t.from == *owner || t.to == *owner => Ok(Json(views::transaction(&t, owner))),
        _ => Err(ApiError::not_found("transaction")),
    }
}
