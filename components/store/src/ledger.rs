//! The double-entry ledger: accounts (one per user and currency, plus the tenant's system
//! accounts) and immutable transfers between two accounts of one currency. An account's
//! balance is its stored balance plus its pending changes, and both change only here, in
//! the transaction that writes the transfers: debits of user accounts by guarded updates
//! (a user account never goes below zero unless the operation is a chargeback reversal,
//! after which the account cannot spend until its balance is back), everything else as
//! pending changes that are folded into the stored balance later (see [`post`]).

use super::{Db, Dialect, Row, Value};
use domain::pagination::Page;
use domain::{ApiError, ids};
use std::collections::BTreeMap;

/// The two currencies of every tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Currency {
    /// Bought by viewers, spent on gifts and subscriptions.
    Tokens,
    /// Earned by creators, paid out by the tenant.
    Diamonds,
}

impl Currency {
    pub fn as_str(self) -> &'static str {
        match self {
            Currency::Tokens => "tokens",
            Currency::Diamonds => "diamonds",
        }
    }

    pub fn parse(text: &str) -> Option<Currency> {
        match text {
            "tokens" => Some(Currency::Tokens),
            "diamonds" => Some(Currency::Diamonds),
            _ => None,
        }
    }
}

/// The tenant's system accounts (their owner names; system accounts may go negative).
pub mod system {
    /// Where purchased tokens come from (its balance is minus the tokens in circulation).
    pub const TOKENS_ISSUED: &str = "system:tokens_issued";
    /// Tokens spent on gifts and subscriptions.
    pub const TOKENS_EARNED: &str = "system:tokens_earned";
    /// Where creators' diamonds come from.
    pub const DIAMONDS_ISSUED: &str = "system:diamonds_issued";
    /// Diamonds of pending payouts.
    pub const DIAMONDS_HELD: &str = "system:diamonds_held";
    /// Diamonds the tenant has paid out.
    pub const DIAMONDS_PAID_OUT: &str = "system:diamonds_paid_out";
}

fn is_system(owner: &str) -> bool {
    owner.starts_with("system:")
}

/// One transfer to write: `amount` (> 0) of `currency` from `from`'s account to `to`'s
/// (owners: user ids or [`system`] names).
#[derive(Debug, Clone)]
pub struct Leg<'a> {
    pub currency: Currency,
    pub from: &'a str,
    pub to: &'a str,
    pub amount: i64,
    pub kind: &'a str,
    pub reference: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// The transfer this one reverses.
    pub reverses: Option<&'a str>,
}

impl<'a> Leg<'a> {
    pub fn new(currency: Currency, from: &'a str, to: &'a str, amount: i64, kind: &'a str) -> Self {
        Leg {
            currency,
            from,
            to,
            amount,
            kind,
            reference: None,
            reason: None,
            reverses: None,
        }
    }
}

/// A stored transfer, with the owners of its two accounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub id: String,
    pub currency: String,
    pub from: String,
    pub to: String,
    pub amount: i64,
    pub kind: String,
    pub reference: Option<String>,
    pub reason: Option<String>,
    pub reverses: Option<String>,
    pub operation_id: String,
    pub created_at: i64,
}

fn transfer_of(row: &Row) -> Transfer {
    Transfer {
        id: row.text("id"),
        currency: row.text("currency"),
        from: row.text("debit_owner"),
        to: row.text("credit_owner"),
        amount: row.int("amount"),
        kind: row.text("kind"),
        reference: row.opt_text("reference"),
        reason: row.opt_text("reason"),
        reverses: row.opt_text("reverses"),
        operation_id: row.text("operation_id"),
        created_at: row.int("created_at"),
    }
}

/// Whether an operation may leave a user account below zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overdraft {
    /// Every user account must stay at or above zero (everything but chargebacks).
    Refused,
    /// A chargeback reversal: the account may go negative and then cannot spend.
    Chargeback,
}

/// An account as [`post`] finds it.
#[derive(Debug, Clone)]
struct Found {
    id: String,
    /// Whether it had pending changes when it was read.
    has_pending: bool,
}

/// The accounts of `keys` (owner and currency), each created when missing.
fn accounts(
    db: &Db,
    client_id: &str,
    keys: &[(&str, Currency)],
    now: i64,
) -> Result<BTreeMap<(String, Currency), Found>, ApiError> {
    let mut owners: Vec<&str> = keys.iter().map(|(owner, _)| *owner).collect();
    owners.sort_unstable();
    owners.dedup();
    let find = |owners: &[&str]| -> Result<BTreeMap<(String, Currency), Found>, ApiError> {
        let mut params: Vec<Value> = vec![client_id.into()];
        params.extend(owners.iter().map(|o| Value::from(*o)));
        let rows = db.query(
            &format!(
                "SELECT a.id, a.owner, a.currency, \
                   CASE WHEN EXISTS (SELECT 1 FROM ledger_pending p WHERE p.account_id = a.id) \
                     THEN 1 ELSE 0 END AS has_pending \
                 FROM ledger_accounts a WHERE a.client_id = ? AND a.owner IN ({})",
                vec!["?"; owners.len()].join(", ")
            ),
            &params,
        )?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                let currency = Currency::parse(&row.text("currency"))?;
                let found = Found {
                    id: row.text("id"),
                    has_pending: row.int("has_pending") != 0,
                };
                Some(((row.text("owner"), currency), found))
            })
            .collect())
    };
    let mut found = find(&owners)?;
    let missing: Vec<(&str, Currency)> = keys
        .iter()
        .filter(|(owner, currency)| !found.contains_key(&(owner.to_string(), *currency)))
        .copied()
        .collect();
    if missing.is_empty() {
        return Ok(found);
    }
    for (owner, currency) in &missing {
        db.execute(
            "INSERT INTO ledger_accounts (id, client_id, owner, currency, balance, created_at) \
             VALUES (?, ?, ?, ?, 0, ?) ON CONFLICT (client_id, owner, currency) DO NOTHING",
            &[
                ids::uuid().into(),
                client_id.into(),
                (*owner).into(),
                currency.as_str().into(),
                Value::Int(now),
            ],
        )?;
    }
    let created: Vec<&str> = missing.iter().map(|(owner, _)| *owner).collect();
    found.extend(find(&created)?);
    if keys
        .iter()
        .any(|(owner, currency)| !found.contains_key(&(owner.to_string(), *currency)))
    {
        return Err(ApiError::internal(
            "a ledger account vanished after it was created",
        ));
    }
    Ok(found)
}

/// What [`post`] wrote: the transfers, and the new balance of each user account it
/// debited (by owner).
#[derive(Debug, Clone)]
pub struct Posted {
    pub transfers: Vec<Transfer>,
    pub debited: BTreeMap<String, i64>,
}

/// One in how many operations folds the pending changes of each account it defers into
/// the account's balance (see [`post`]): hot accounts keep about this many pending rows,
/// and a fold takes their row lock only this often.
const FOLD_ONE_IN: u8 = 32;

/// Writes `legs` as one operation (call it inside a transaction) and moves each account's
/// balance by its net change:
///
/// - a user account's debit is applied at once, by a guarded update that refuses to go
///   below zero (409 `insufficient_funds`, or `spending_blocked` for an account in debt)
///   unless `overdraft` is a chargeback, after folding the account's pending changes (so
///   the guard sees all of its money);
/// - every other change (any credit, and any change to a system account, which has no
///   guard) is recorded as a pending change of the account, an insert that locks no
///   account row: a creator credited by many gifts at once, or a tenant's system
///   accounts, do not make those gifts wait for each other. An account's balance is its
///   stored balance plus its pending changes; one operation in [`FOLD_ONE_IN`] folds them
///   into the stored balance, skipping an account another transaction is folding.
///
/// Debited accounts are updated in account-id order, so concurrent operations lock rows
/// in the same order and never deadlock. A fold never waits for a row another transaction
/// holds, so it cannot join a cycle either. Answers the transfers written and the debited
/// accounts' new balances.
pub fn post(
    tx: &Db,
    client_id: &str,
    operation_id: &str,
    legs: &[Leg<'_>],
    overdraft: Overdraft,
    idempotency_key: Option<&str>,
    now: i64,
) -> Result<Posted, ApiError> {
    for leg in legs {
        if leg.amount <= 0 {
            return Err(ApiError::internal("a transfer's amount must be positive"));
        }
        if leg.from == leg.to {
            return Err(ApiError::internal("a transfer needs two accounts"));
        }
    }
    let keys: Vec<(&str, Currency)> = legs
        .iter()
        .flat_map(|leg| [(leg.from, leg.currency), (leg.to, leg.currency)])
        .collect();
    let found = accounts(tx, client_id, &keys, now)?;
    let id_of = |owner: &str, currency: Currency| found[&(owner.to_string(), currency)].id.clone();
    let had_pending: std::collections::BTreeSet<&str> = found
        .values()
        .filter(|a| a.has_pending)
        .map(|a| a.id.as_str())
        .collect();
    // Each account's net change, and its owner.
    let mut net: BTreeMap<String, (i64, &str)> = BTreeMap::new();
    let mut resolved = Vec::with_capacity(legs.len());
    for leg in legs {
        let debit = id_of(leg.from, leg.currency);
        let credit = id_of(leg.to, leg.currency);
        let out = net.entry(debit.clone()).or_insert((0, leg.from));
        out.0 = out.0.checked_sub(leg.amount).ok_or_else(overflow)?;
        let into = net.entry(credit.clone()).or_insert((0, leg.to));
        into.0 = into.0.checked_add(leg.amount).ok_or_else(overflow)?;
        resolved.push((leg, debit, credit));
    }
    let mut debited = BTreeMap::new();
    let mut deferred = Vec::new();
    for (account_id, (change, owner)) in &net {
        if *change < 0 && !is_system(owner) {
            // A user account's pending changes are credits: folding only those seen above
            // leaves the guard at or below the account's money, never above it.
            let folded = if had_pending.contains(account_id.as_str()) {
                take_pending(tx, account_id, Lock::Wait)?
            } else {
                0
            };
            let moved = folded.checked_add(*change).ok_or_else(overflow)?;
            let guard = if overdraft == Overdraft::Refused {
                " AND balance + ?1 >= 0"
            } else {
                ""
            };
            let row = tx.query_one(
                &format!(
                    "UPDATE ledger_accounts SET balance = balance + ?1 WHERE id = ?2{guard} RETURNING balance"
                ),
                &[Value::Int(moved), account_id.into()],
            )?;
            match row {
                Some(row) => debited.insert(owner.to_string(), row.int("balance")),
                None => {
                    // The folded changes stay in the balance even when the caller goes on
                    // after the refusal.
                    add_to_stored(tx, account_id, folded)?;
                    return Err(refusal(tx, account_id, -*change)?);
                }
            };
        } else if *change != 0 {
            deferred.push((account_id, *change));
        }
    }
    if !deferred.is_empty() {
        let mut params = Vec::with_capacity(deferred.len() * 5);
        for (account_id, change) in &deferred {
            params.extend([
                ids::ordered_uuid().into(),
                operation_id.into(),
                (*account_id).into(),
                Value::Int(*change),
                Value::Int(now),
            ]);
        }
        tx.insert_soon(
            &format!(
                "INSERT INTO ledger_pending (id, operation_id, account_id, amount, created_at) VALUES {}",
                vec!["(?, ?, ?, ?, ?)"; deferred.len()].join(", ")
            ),
            &params,
        )?;
    }
    let mut written = Vec::with_capacity(resolved.len());
    let mut params = Vec::with_capacity(resolved.len() * 13);
    for (leg, debit, credit) in resolved {
        let id = ids::ordered_uuid();
        params.extend([
            id.clone().into(),
            client_id.into(),
            leg.currency.as_str().into(),
            debit.into(),
            credit.into(),
            Value::Int(leg.amount),
            leg.kind.into(),
            leg.reference.into(),
            leg.reason.into(),
            leg.reverses.into(),
            operation_id.into(),
            idempotency_key.into(),
            Value::Int(now),
        ]);
        written.push(Transfer {
            id,
            currency: leg.currency.as_str().into(),
            from: leg.from.into(),
            to: leg.to.into(),
            amount: leg.amount,
            kind: leg.kind.into(),
            reference: leg.reference.map(str::to_string),
            reason: leg.reason.map(str::to_string),
            reverses: leg.reverses.map(str::to_string),
            operation_id: operation_id.into(),
            created_at: now,
        });
    }
    tx.insert_soon(
        &format!(
            "INSERT INTO ledger_transfers (id, client_id, currency, debit_account, credit_account, amount, kind, \
             reference, reason, reverses, operation_id, idempotency_key, created_at) VALUES {}",
            vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; written.len()].join(", ")
        ),
        &params,
    )?;
    for (account_id, _) in deferred {
        if ids::random_bytes(1)[0].is_multiple_of(FOLD_ONE_IN) {
            fold(tx, account_id, Lock::Skip)?;
        }
    }
    Ok(Posted {
        transfers: written,
        debited,
    })
}

/// Whether taking an account's pending changes waits for another transaction that holds
/// them, or leaves the account alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lock {
    Wait,
    /// PostgreSQL's `SKIP LOCKED`; SQLite has one writer, so nothing is ever held.
    Skip,
}

/// Removes `account_id`'s pending changes and answers their sum (to be added to its
/// stored balance in the same transaction). A change inserted by a transaction that has
/// not committed yet is neither seen nor removed: it stays pending.
fn take_pending(tx: &Db, account_id: &str, lock: Lock) -> Result<i64, ApiError> {
    let rows = if lock == Lock::Skip && tx.dialect() == Dialect::Postgres {
        tx.query(
            "DELETE FROM ledger_pending WHERE id IN (\
               SELECT id FROM ledger_pending WHERE account_id = ? FOR UPDATE SKIP LOCKED) \
             RETURNING amount",
            &[account_id.into()],
        )?
    } else {
        tx.query(
            "DELETE FROM ledger_pending WHERE account_id = ? RETURNING amount",
            &[account_id.into()],
        )?
    };
    rows.iter()
        .try_fold(0i64, |sum, row| sum.checked_add(row.int("amount")))
        .ok_or_else(overflow)
}

/// Folds `account_id`'s pending changes into its stored balance. With [`Lock::Skip`] an
/// account whose row another transaction holds is left for a later fold.
fn fold(tx: &Db, account_id: &str, lock: Lock) -> Result<(), ApiError> {
    if lock == Lock::Skip
        && tx.dialect() == Dialect::Postgres
        && tx
            .query_one(
                "SELECT id FROM ledger_accounts WHERE id = ? FOR UPDATE SKIP LOCKED",
                &[account_id.into()],
            )?
            .is_none()
    {
        return Ok(());
    }
    let folded = take_pending(tx, account_id, lock)?;
    add_to_stored(tx, account_id, folded)
}

/// Adds `amount` (folded pending changes) to `account_id`'s stored balance.
fn add_to_stored(tx: &Db, account_id: &str, amount: i64) -> Result<(), ApiError> {
    if amount == 0 {
        return Ok(());
    }
    tx.execute(
        "UPDATE ledger_accounts SET balance = balance + ? WHERE id = ?",
        &[Value::Int(amount), account_id.into()],
    )
}

fn overflow() -> ApiError {
    ApiError::new(422, "amount_too_large", "the amount is too large")
}

/// Why a guarded debit moved nothing: an account in debt (after a chargeback) cannot
/// spend at all; otherwise it holds too little.
fn refusal(tx: &Db, account_id: &str, wanted: i64) -> Result<ApiError, ApiError> {
    let balance = tx.count(
        "SELECT balance FROM ledger_accounts WHERE id = ?",
        &[account_id.into()],
    )?;
    Ok(if balance < 0 {
        ApiError::conflict(
            "spending_blocked",
            "a chargeback left this wallet in debt: it cannot spend until the debt is settled",
        )
        .with_extra("balance", balance)
    } else {
        ApiError::conflict(
            "insufficient_funds",
            format!("the wallet holds {balance}, this needs {wanted}"),
        )
        .with_extra("balance", balance)
        .with_extra("required", wanted)
    })
}

/// Claims a purchase reference for `operation_id` (inside the credit's transaction).
/// Answers the transfer that credited it first, when one did.
pub fn claim_reference(
    tx: &Db,
    client_id: &str,
    reference: &str,
    operation_id: &str,
) -> Result<Option<String>, ApiError> {
    let claimed = tx.query(
        "INSERT INTO ledger_credit_references (client_id, reference, transfer_id) VALUES (?, ?, ?) \
         ON CONFLICT (client_id, reference) DO NOTHING RETURNING reference",
        &[client_id.into(), reference.into(), operation_id.into()],
    )?;
    if !claimed.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        tx.query_one(
            "SELECT transfer_id FROM ledger_credit_references WHERE client_id = ? AND reference = ?",
            &[client_id.into(), reference.into()],
        )?
        .map(|row| row.text("transfer_id"))
        .unwrap_or_default(),
    ))
}

/// Records which transfer a claimed reference credited.
pub fn name_reference(
    tx: &Db,
    client_id: &str,
    reference: &str,
    transfer_id: &str,
) -> Result<(), ApiError> {
    tx.execute(
        "UPDATE ledger_credit_references SET transfer_id = ? WHERE client_id = ? AND reference = ?",
        &[transfer_id.into(), client_id.into(), reference.into()],
    )
}

/// The sum of the pending changes of the account `a` (an SQL expression).
const PENDING: &str =
    "COALESCE((SELECT SUM(p.amount) FROM ledger_pending p WHERE p.account_id = a.id), 0)";

/// `owner`'s balance of `currency` (0 without an account): its stored balance and its
/// pending changes.
pub fn balance(db: &Db, client_id: &str, owner: &str, currency: Currency) -> Result<i64, ApiError> {
    db.count(
        &format!(
            "SELECT CAST(a.balance + {PENDING} AS BIGINT) FROM ledger_accounts a \
             WHERE a.client_id = ? AND a.owner = ? AND a.currency = ?"
        ),
        &[client_id.into(), owner.into(), currency.as_str().into()],
    )
}

const TRANSFER_COLUMNS: &str = "SELECT t.id, t.currency, t.amount, t.kind, t.reference, t.reason, t.reverses, \
     t.operation_id, t.created_at, d.owner AS debit_owner, c.owner AS credit_owner \
     FROM ledger_transfers t \
     JOIN ledger_accounts d ON d.id = t.debit_account \
     JOIN ledger_accounts c ON c.id = t.credit_account";

/// A transfer of the tenant.
pub fn transfer(db: &Db, client_id: &str, id: &str) -> Result<Option<Transfer>, ApiError> {
    Ok(db
        .query_one(
            &format!("{TRANSFER_COLUMNS} WHERE t.client_id = ? AND t.id = ?"),
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(transfer_of))
}

/// The transfer that reversed `id`, if any.
pub fn reversal_of(db: &Db, client_id: &str, id: &str) -> Result<Option<Transfer>, ApiError> {
    Ok(db
        .query_one(
            &format!("{TRANSFER_COLUMNS} WHERE t.client_id = ? AND t.reverses = ?"),
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(transfer_of))
}

/// One page of the transfers touching `owner`'s accounts (of one currency, or both),
/// newest first, and how many there are.
pub fn page_of_owner(
    db: &Db,
    client_id: &str,
    owner: &str,
    currency: Option<Currency>,
    page: Page,
) -> Result<(Vec<Transfer>, i64), ApiError> {
    let currencies: Vec<Currency> = match currency {
        Some(c) => vec![c],
        None => vec![Currency::Tokens, Currency::Diamonds],
    };
    let mut accounts = Vec::new();
    for c in currencies {
        if let Some(row) = db.query_one(
            "SELECT id FROM ledger_accounts WHERE client_id = ? AND owner = ? AND currency = ?",
            &[client_id.into(), owner.into(), c.as_str().into()],
        )? {
            accounts.push(row.text("id"));
        }
    }
    if accounts.is_empty() {
        return Ok((Vec::new(), 0));
    }
    // Two accounts at most: `?1`/`?2` name them (the second repeats the first when alone).
    let first = accounts[0].clone();
    let second = accounts.get(1).cloned().unwrap_or_else(|| first.clone());
    let filter = "(t.debit_account IN (?1, ?2) OR t.credit_account IN (?1, ?2))";
    let total = db.count(
        &format!("SELECT COUNT(*) FROM ledger_transfers t WHERE {filter}"),
        &[first.clone().into(), second.clone().into()],
    )?;
    let rows = db.query(
        &format!(
            "{TRANSFER_COLUMNS} WHERE {filter} ORDER BY t.created_at DESC, t.id DESC LIMIT ?3 OFFSET ?4"
        ),
        &[
            first.into(),
            second.into(),
            Value::Int(page.limit.into()),
            Value::Int(page.offset.into()),
        ],
    )?;
    Ok((rows.iter().map(transfer_of).collect(), total))
}

/// Tokens `owner` spent (gifts and subscriptions) since `since`.
pub fn spent_since(db: &Db, client_id: &str, owner: &str, since: i64) -> Result<i64, ApiError> {
    db.count(
        "SELECT CAST(COALESCE(SUM(t.amount), 0) AS BIGINT) FROM ledger_transfers t \
         JOIN ledger_accounts a ON a.id = t.debit_account \
         WHERE a.client_id = ? AND a.owner = ? AND a.currency = 'tokens' \
           AND t.kind IN ('gift', 'subscription') AND t.created_at >= ?",
        &[client_id.into(), owner.into(), Value::Int(since)],
    )
}

/// What the invariant check found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Check {
    pub accounts: i64,
    pub transfers: i64,
    /// Each broken invariant, described.
    pub violations: Vec<String>,
}

/// Checks the ledger's invariants over every tenant: each account's balance (stored and
/// pending) equals
/// the sum of its transfers (credits minus debits), each tenant's accounts of a currency
/// sum to zero, every transfer joins two accounts of its own currency and tenant, and no
/// user account is below zero except after a chargeback reversal.
pub fn check(db: &Db) -> Result<Check, ApiError> {
    let mut report = Check {
        accounts: db.count("SELECT CAST(COUNT(*) AS BIGINT) FROM ledger_accounts", &[])?,
        transfers: db.count("SELECT CAST(COUNT(*) AS BIGINT) FROM ledger_transfers", &[])?,
        violations: Vec::new(),
    };
    let drifted = db.query(
        &format!("SELECT s.id, s.owner, s.balance, s.credits, s.debits FROM (\
           SELECT a.id, a.owner, CAST(a.balance + {PENDING} AS BIGINT) AS balance, \
             CAST(COALESCE((SELECT SUM(c.amount) FROM ledger_transfers c WHERE c.credit_account = a.id), 0) AS BIGINT) AS credits, \
             CAST(COALESCE((SELECT SUM(d.amount) FROM ledger_transfers d WHERE d.debit_account = a.id), 0) AS BIGINT) AS debits \
           FROM ledger_accounts a) s \
         WHERE s.balance <> s.credits - s.debits"),
        &[],
    )?;
    for row in drifted {
        report.violations.push(format!(
            "account {} ({}): balance {} but its transfers sum to {}",
            row.text("id"),
            row.text("owner"),
            row.int("balance"),
            row.int("credits") - row.int("debits")
        ));
    }
    let unbalanced = db.query(
        "SELECT client_id, currency, CAST(SUM(amount) AS BIGINT) AS total FROM (\
           SELECT client_id, currency, balance AS amount FROM ledger_accounts \
           UNION ALL SELECT a.client_id, a.currency, p.amount FROM ledger_pending p \
             JOIN ledger_accounts a ON a.id = p.account_id) s \
         GROUP BY client_id, currency HAVING SUM(amount) <> 0",
        &[],
    )?;
    for row in unbalanced {
        report.violations.push(format!(
            "tenant {}: its {} accounts sum to {}, not 0",
            row.text("client_id"),
            row.text("currency"),
            row.int("total")
        ));
    }
    let mismatched = db.query(
        "SELECT t.id FROM ledger_transfers t \
         JOIN ledger_accounts d ON d.id = t.debit_account \
         JOIN ledger_accounts c ON c.id = t.credit_account \
         WHERE d.currency <> t.currency OR c.currency <> t.currency \
            OR d.client_id <> t.client_id OR c.client_id <> t.client_id OR t.amount <= 0",
        &[],
    )?;
    for row in mismatched {
        report.violations.push(format!(
            "transfer {} joins accounts of another currency or tenant",
            row.text("id")
        ));
    }
    let orphans = db.count(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM ledger_transfers t \
         WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts a WHERE a.id = t.debit_account) \
            OR NOT EXISTS (SELECT 1 FROM ledger_accounts a WHERE a.id = t.credit_account)",
        &[],
    )?;
    if orphans > 0 {
        report
            .violations
            .push(format!("{orphans} transfers name a missing account"));
    }
    let stray = db.count(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM ledger_pending p \
         WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts a WHERE a.id = p.account_id)",
        &[],
    )?;
    if stray > 0 {
        report
            .violations
            .push(format!("{stray} pending changes name a missing account"));
    }
    let overdrawn = db.query(
        &format!("SELECT a.id, a.owner, CAST(a.balance + {PENDING} AS BIGINT) AS balance FROM ledger_accounts a \
         WHERE a.balance + {PENDING} < 0 AND a.owner NOT LIKE 'system:%' \
           AND NOT EXISTS (SELECT 1 FROM ledger_transfers t \
                           WHERE t.debit_account = a.id AND t.kind = 'chargeback')"),
        &[],
    )?;
    for row in overdrawn {
        report.violations.push(format!(
            "user account {} ({}) is at {} without a chargeback",
            row.text("id"),
            row.text("owner"),
            row.int("balance")
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn credit(db: &Db, user: &str, tokens: i64) -> Vec<Transfer> {
        db.transaction(|tx| {
            post(
                tx,
                "c1",
                &ids::uuid(),
                &[Leg::new(
                    Currency::Tokens,
                    system::TOKENS_ISSUED,
                    user,
                    tokens,
                    "credit",
                )],
                Overdraft::Refused,
                None,
                10,
            )
        })
        .unwrap()
        .transfers
    }

    fn spend(db: &Db, user: &str, tokens: i64) -> Result<Vec<Transfer>, ApiError> {
        db.transaction(|tx| {
            post(
                tx,
                "c1",
                &ids::uuid(),
                &[
                    Leg::new(
                        Currency::Tokens,
                        user,
                        system::TOKENS_EARNED,
                        tokens,
                        "gift",
                    ),
                    Leg::new(
                        Currency::Diamonds,
                        system::DIAMONDS_ISSUED,
                        "creator",
                        tokens / 2,
                        "gift",
                    ),
                ],
                Overdraft::Refused,
                None,
                20,
            )
        })
        .map(|posted| posted.transfers)
    }

    #[test]
    fn credits_wait_as_pending_changes_and_a_debit_folds_them_first() {
        let db = testing::db();
        credit(&db, "ada", 100);
        credit(&db, "ada", 20);
        // Two credits, each a pending change of the user's and the system account's
        // (folded by one operation in 32).
        assert_eq!(balance(&db, "c1", "ada", Currency::Tokens).unwrap(), 120);
        assert!(check(&db).unwrap().violations.is_empty());
        // The debit sees all 120 and folds the user's pending credits into the stored
        // balance; what it credits is pending again.
        spend(&db, "ada", 110).unwrap();
        let stored = db
            .count(
                "SELECT balance FROM ledger_accounts WHERE owner = 'ada' AND currency = 'tokens'",
                &[],
            )
            .unwrap();
        assert_eq!(stored, 10);
        assert_eq!(balance(&db, "c1", "ada", Currency::Tokens).unwrap(), 10);
        assert_eq!(
            balance(&db, "c1", "creator", Currency::Diamonds).unwrap(),
            55
        );
        assert_eq!(
            spend(&db, "ada", 11).unwrap_err().code,
            "insufficient_funds"
        );
        // A fold moves the pending changes into the stored balance and changes no balance.
        let creator = accounts(&db, "c1", &[("creator", Currency::Diamonds)], 30).unwrap()
            [&("creator".to_string(), Currency::Diamonds)]
            .clone();
        fold(&db, &creator.id, Lock::Skip).unwrap();
        assert_eq!(
            balance(&db, "c1", "creator", Currency::Diamonds).unwrap(),
            55
        );
        let stored = db
            .count(
                "SELECT balance FROM ledger_accounts WHERE id = ?",
                &[creator.id.clone().into()],
            )
            .unwrap();
        assert_eq!(stored, 55, "the fold moved every pending change");
        let report = check(&db).unwrap();
        assert_eq!(report.violations, Vec::<String>::new());
    }

    #[test]
    fn the_checker_counts_pending_changes_and_finds_one_that_drifted() {
        let db = testing::db();
        credit(&db, "ada", 100);
        // A pending change no transfer made (inserted, not edited: the credit's own change
        // may have been folded already, one operation in 32).
        let ada = accounts(&db, "c1", &[("ada", Currency::Tokens)], 10).unwrap()
            [&("ada".to_string(), Currency::Tokens)]
            .clone();
        db.execute(
            "INSERT INTO ledger_pending (id, account_id, amount, operation_id, created_at) \
             VALUES ('drift', ?, 1, 'no-operation', 10)",
            &[ada.id.into()],
        )
        .unwrap();
        let report = check(&db).unwrap();
        assert_eq!(report.violations.len(), 2, "{:?}", report.violations);
        assert!(report.violations[0].contains("balance 101 but its transfers sum to 100"));
    }

    #[test]
    fn transfers_move_balances_and_keep_the_invariants() {
        let db = testing::db();
        credit(&db, "ada", 100);
        spend(&db, "ada", 60).unwrap();
        assert_eq!(balance(&db, "c1", "ada", Currency::Tokens).unwrap(), 40);
        assert_eq!(
            balance(&db, "c1", "creator", Currency::Diamonds).unwrap(),
            30
        );
        assert_eq!(
            balance(&db, "c1", system::TOKENS_ISSUED, Currency::Tokens).unwrap(),
            -100
        );
        let report = check(&db).unwrap();
        assert_eq!(report.violations, Vec::<String>::new());
        assert_eq!((report.accounts, report.transfers), (5, 3));
    }

    #[test]
    fn a_guarded_debit_refuses_to_overdraw_and_writes_nothing() {
        let db = testing::db();
        credit(&db, "ada", 50);
        let err = spend(&db, "ada", 60).unwrap_err();
        assert_eq!((err.status, err.code), (409, "insufficient_funds"));
        assert_eq!(balance(&db, "c1", "ada", Currency::Tokens).unwrap(), 50);
        assert_eq!(
            balance(&db, "c1", "creator", Currency::Diamonds).unwrap(),
            0
        );
        assert!(check(&db).unwrap().violations.is_empty());
        let (items, total) = page_of_owner(&db, "c1", "ada", None, Page::default()).unwrap();
        assert_eq!((items.len(), total), (1, 1));
    }

    #[test]
    fn a_chargeback_may_overdraw_and_then_blocks_spending_until_settled() {
        let db = testing::db();
        let first = credit(&db, "ada", 100).remove(0);
        spend(&db, "ada", 80).unwrap();
        db.transaction(|tx| {
            let mut leg = Leg::new(
                Currency::Tokens,
                "ada",
                system::TOKENS_ISSUED,
                100,
                "chargeback",
            );
            leg.reverses = Some(&first.id);
            post(tx, "c1", "op", &[leg], Overdraft::Chargeback, None, 30)
        })
        .unwrap();
        assert_eq!(balance(&db, "c1", "ada", Currency::Tokens).unwrap(), -80);
        assert_eq!(spend(&db, "ada", 2).unwrap_err().code, "spending_blocked");
        assert!(check(&db).unwrap().violations.is_empty());
        assert_eq!(
            reversal_of(&db, "c1", &first.id).unwrap().unwrap().amount,
            100
        );
        // A transfer is reversed once.
        let again = db.transaction(|tx| {
            let mut leg = Leg::new(
                Currency::Tokens,
                "ada",
                system::TOKENS_ISSUED,
                100,
                "chargeback",
            );
            leg.reverses = Some(&first.id);
            post(tx, "c1", "op2", &[leg], Overdraft::Chargeback, None, 31)
        });
        assert!(again.is_err());
        credit(&db, "ada", 100);
        spend(&db, "ada", 20).unwrap();
        assert_eq!(balance(&db, "c1", "ada", Currency::Tokens).unwrap(), 0);
    }

    #[test]
    fn the_checker_finds_a_drifted_balance_and_an_unbalanced_currency() {
        let db = testing::db();
        credit(&db, "ada", 100);
        db.execute(
            "UPDATE ledger_accounts SET balance = balance + 5 WHERE owner = 'ada'",
            &[],
        )
        .unwrap();
        let report = check(&db).unwrap();
        assert_eq!(report.violations.len(), 2, "{:?}", report.violations);
        assert!(report.violations[0].contains("balance 105 but its transfers sum to 100"));
        assert!(report.violations[1].contains("sum to 5"));
    }

    #[test]
    fn spending_in_a_window_counts_gifts_only() {
        let db = testing::db();
        credit(&db, "ada", 100);
        spend(&db, "ada", 30).unwrap();
        assert_eq!(spent_since(&db, "c1", "ada", 0).unwrap(), 30);
        assert_eq!(spent_since(&db, "c1", "ada", 21).unwrap(), 0);
    }
}
