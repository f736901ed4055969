//! Gifts: the tenant's catalog, sending a gift on a live broadcast (the sender's tokens to
//! the platform and new diamonds to the recipient, two transfers in one transaction), the
//! broadcast's leaderboard and a creator's top supporters.

use crate::{rules, views};
use ::store::app;
use ::store::app::access::{Viewer, Watched, may_watch};
use ::store::gifts::{self as store, Gift, Sent};
use ::store::ledger::{self, Currency, Leg, Overdraft, system};
use ::store::outbox::{self, Subject};
use ::store::{Db, broadcasts, cohosts, files, monetization, users};
use domain::ApiError;
use domain::broadcast::Status;
use domain::request_body;
use domain::validate::MAX_NAME;
use domain::validate::body::{NameList, OptBool, OptChoice, OptInt, OptText, RequestBody, Text};
use edge::contract::Schema;
use edge::realtime::Event;
use edge::routing::Route;
use edge::spin::auth::CurrentUser;
use edge::spin::endpoint::{Created, Json, NoBody};
use edge::spin::http::{AppCtx, Handler, ServerCtx, UserCtx};
use edge::spin::idempotent::Committed;
use edge::{endpoint, idempotent_endpoint};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use views::{GiftView, SupporterView};

/// Rows a leaderboard or supporters list answers.
const TOP: i64 = 50;

/// The tenant's gifts, in display order.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "GiftCatalog")]
pub struct Catalog {
    items: Vec<GiftView>,
}

fn catalog_of(db: &Db, client_id: &str, active_only: bool) -> Result<Catalog, ApiError> {
    let items = store::list(db, client_id, active_only)?
        .iter()
        .map(views::gift)
        .collect();
    Ok(Catalog { items })
}

/// The gift routes: the catalog (the app reads it, the tenant's backend edits it), sending
/// a gift, the leaderboard and a creator's supporters.
pub const ROUTES: &[Route<Handler>] = &[
    endpoint!(GET "/api/gifts", App(catalog), "Catalog (gifts)"),
    idempotent_endpoint!(
        POST "/api/broadcasts/{id}/gifts",
        User(prepare => send),
        "Send (gifts)",
        |op| op
            .request_example(json!({ "giftId": "rose", "quantity": 1 }))
            .errors(404, &["not_found"])
            .errors(409, &["broadcast_not_live"])
            .errors(
                422,
                &[
                    "amount_too_large",
                    "cannot_gift_yourself",
                    "invalid_recipient",
                ],
            )
    ),
    endpoint!(
        GET "/api/broadcasts/{id}/gifts/leaderboard",
        User(leaderboard),
        "Leaderboard (gifts)",
        |op| op.errors(404, &["not_found"])
    ),
    endpoint!(
        GET "/api/users/{id}/supporters",
        User(supporters),
        "Supporters (gifts)",
        |op| op
            .errors(400, &["invalid_query"])
            .errors(404, &["not_found"])
    ),
    endpoint!(
        GET "/api/v1/gifts",
        Server(catalog_for_server),
        "Catalog for server (gifts)"
    ),
    // It reads its body itself: the id is checked first, and the image against the
    // tenant's files before the body's errors are answered.
    endpoint!(
        PUT "/api/v1/gifts/{giftId}",
        Server(put),
        "Put (gifts)",
        |op| op
            .takes(Schema::body::<CatalogEntryBody>())
            .parameter(gift_id())
            .link(
                "DELETE /api/v1/gifts/{giftId}",
                &[("giftId", "$response.body#/id")],
            )
            .errors(400, &["invalid_id"])
    ),
    endpoint!(
        DELETE "/api/v1/gifts/{giftId}",
        Server(delete),
        "Delete (gifts)",
        |op| op
            .parameter(gift_id())
            .errors(404, &["not_found"])
            .errors(400, &["invalid_id"])
    ),
];

/// The `{giftId}` path parameter.
fn gift_id() -> Value {
    json!({
        "name": "giftId",
        "in": "path",
        "required": true,
        "schema": { "type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$" },
    })
}

/// The active catalog, in display order.
fn catalog(ctx: &AppCtx, _: NoBody) -> Result<Json<Catalog>, ApiError> {
    let db = ctx.db()?;
    Ok(Json(catalog_of(&db, &ctx.tenant.client_id, true)?))
}

/// The whole catalog, inactive entries too.
fn catalog_for_server(ctx: &ServerCtx, _: NoBody) -> Result<Json<Catalog>, ApiError> {
    let db = ctx.db()?;
    Ok(Json(catalog_of(&db, &ctx.tenant.client_id, false)?))
}

/// How a gift shows on screen.
pub struct Animations;

impl NameList for Animations {
    const NAMES: &'static [&'static str] = &["small", "large", "fullscreen"];
}

request_body! {
    /// A gift of the tenant's catalog.
    pub struct CatalogEntryBody as "CatalogEntry" {
        "name" name: Text<MAX_NAME>,
        "priceTokens" price_tokens: rules::Amount,
        /// A ready file of the tenant: the gift's image.
        "imageFileId" image_file_id: OptText<64>,
        /// `small` by default.
        "animation" animation: OptChoice<Animations>,
        /// Whether fans may send it (true by default).
        "active" active: OptBool,
        /// Where it comes in the catalog, lowest first (0 by default).
        "sortOrder" sort_order: OptInt<0, 1_000_000>,
    }
}

/// `{name, priceTokens, imageFileId?, animation?, active?, sortOrder?}`: creates or
/// replaces a catalog entry.
fn put(ctx: &ServerCtx, _: NoBody) -> Result<Json<GiftView>, ApiError> {
    let id = ctx.param("giftId").to_string();
    rules::require_slug(&id, "gift")?;
    let mut body = ctx.json()?;
    let entry = CatalogEntryBody::read(&mut body);
    let image_file_id = entry.image_file_id;
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    if let Some(file) = &image_file_id
        && files::load_ready(&db, client_id, file)?.is_none()
    {
        body.error("imageFileId", "names no file of this tenant");
    }
    body.finish()?;
    let gift = Gift {
        id,
        name: entry.name,
        price_tokens: entry.price_tokens,
        image_file_id,
        animation: entry.animation.unwrap_or_else(|| "small".into()),
        active: entry.active.unwrap_or(true),
        sort_order: entry.sort_order.unwrap_or(0),
    };
    store::put(&db, client_id, &gift, ctx.now())?;
    Ok(Json(views::gift(&gift)))
}

/// What removing a catalog entry answers.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "GiftRemoved")]
pub struct Removed {
    #[schemars(extend("const" = true))]
    deleted: bool,
}

/// Removes a catalog entry (gifts sent keep their name).
fn delete(ctx: &ServerCtx, _: NoBody) -> Result<Json<Removed>, ApiError> {
    let db = ctx.db()?;
    if store::delete(&db, &ctx.tenant.client_id, ctx.param("giftId"))? {
        Ok(Json(Removed { deleted: true }))
    } else {
        Err(ApiError::not_found("gift"))
    }
}

request_body! {
    /// A gift to send on a live broadcast.
    pub struct GiftToSendBody as "GiftToSend" {
        /// The catalog entry's id.
        "giftId" gift_id: Text<64>,
        /// How many (1 by default).
        "quantity" quantity: OptInt<1, { rules::MAX_QUANTITY }>,
        /// The host (the default) or an active co-host.
        "recipientId" recipient_id: OptText<64>,
        /// Whether the gift's `gift` event and `gift.sent` webhook leave the sender out.
        "anonymous" anonymous: OptBool,
    }
}

/// What a gift request asks for, defaults applied.
struct Ask {
    gift_id: String,
    quantity: i64,
    recipient_id: Option<String>,
    anonymous: bool,
}

impl Ask {
    fn of(asked: GiftToSendBody) -> Ask {
        Ask {
            gift_id: asked.gift_id,
            quantity: asked.quantity.unwrap_or(1),
            recipient_id: asked.recipient_id,
            anonymous: asked.anonymous.unwrap_or(false),
        }
    }
}

/// Who receives a gift on `b`: the host unless an active co-host is named; never the
/// sender.
fn recipient_of(
    db: &Db,
    b: &broadcasts::Broadcast,
    ask: &Ask,
    sender: &str,
) -> Result<String, ApiError> {
    let recipient = match (&ask.recipient_id, &b.owner_id) {
        (Some(named), Some(owner)) if named == owner => owner.clone(),
        (Some(named), _) => match cohosts::of_user(db, b, named)? {
            Some(cohost) if cohost.is_active() => named.clone(),
            _ => {
                return Err(ApiError::new(
                    422,
                    "invalid_recipient",
                    "a gift goes to the host or an active co-host of the broadcast",
                ));
            }
        },
        (None, Some(owner)) => owner.clone(),
        (None, None) => {
            return Err(ApiError::new(
                422,
                "invalid_recipient",
                "this broadcast has no host user: name an active co-host as recipientId",
            ));
        }
    };
    if recipient == sender {
        return Err(ApiError::new(
            422,
            "cannot_gift_yourself",
            "a gift goes to someone else",
        ));
    }
    Ok(recipient)
}

/// What a gift reads before its transaction.
struct Prepared {
    ask: Ask,
    /// The live broadcast, which the sender may watch.
    broadcast: broadcasts::Broadcast,
    /// The active catalog entry.
    gift: Gift,
    recipient: String,
    /// What the gifts cost.
    tokens: i64,
    settings: monetization::Settings,
}

/// Reads what the gift needs, before its transaction: a refusal here is the key's answer
/// too, and a retry of a gift that was sent replays it even after the broadcast ended.
fn prepare(ctx: &UserCtx, asked: GiftToSendBody, db: &Db) -> Result<Prepared, ApiError> {
    let ask = Ask::of(asked);
    let client_id = &ctx.tenant.client_id;
    let sender = &ctx.user;
    let now = ctx.now();
    let b = app::broadcasts::load(db, client_id, ctx.param("id"), now)?;
    if !may_watch(db, Watched::broadcast(&b), Viewer::User(&sender.id), now)? {
        return Err(ApiError::not_found("broadcast"));
    }
    if b.status != Status::Active {
        return Err(ApiError::conflict(
            "broadcast_not_live",
            "gifts are sent while the broadcast is live",
        ));
    }
    let gift = store::get(db, client_id, &ask.gift_id)?
        .filter(|g| g.active)
        .ok_or_else(|| ApiError::not_found("gift"))?;
    let recipient = recipient_of(db, &b, &ask, &sender.id)?;
    let tokens = rules::gift_cost(gift.price_tokens, ask.quantity)
        .ok_or_else(|| ApiError::new(422, "amount_too_large", "that many gifts cost too much"))?;
    let settings = monetization::get(db, client_id)?;
    Ok(Prepared {
        ask,
        broadcast: b,
        gift,
        recipient,
        tokens,
        settings,
    })
}

/// Only while the broadcast is live, only by someone who may watch it.
///
/// What the gift reads (the broadcast, the catalog entry, the recipient, the tenant's
/// rates) is read before its transaction, by `prepare`, so that the transaction holds the database's
/// writer (SQLite) only for what it writes; the ledger keeps the money exact however the
/// reads race with an edit of the catalog.
fn send(
    ctx: &UserCtx,
    prepared: Prepared,
    tx: &Db,
) -> Result<Committed<Created<GiftAnswer>>, ApiError> {
    let client_id = &ctx.tenant.client_id;
    let (sent, balance) = give(tx, ctx, &prepared)?;
    let view = GiftSent::of(&sent);
    let subject = Subject {
        object_type: "gift",
        object_id: &sent.id,
    };
    outbox::record_first(
        tx,
        &outbox::Event::first(client_id, "gift.sent", subject, &view, ctx.now()),
    )?;
    ::store::analytics::gift(tx, &prepared.broadcast, sent.tokens, ctx.now())?;
    let answer = GiftAnswer {
        sent: view,
        balance,
    };
    Ok(Committed::new(Created(answer)).publishing(
        prepared.broadcast.identity.stream_id.clone(),
        on_screen(&sent, &ctx.user),
    ))
}

/// The gift's money and record, in the caller's transaction: the sender's tokens to the
/// platform and new diamonds to the recipient, under the sender's spending caps, and the
/// gift with its place in a combo. Answers the gift and the sender's balance after it.
fn give(tx: &Db, ctx: &UserCtx, prepared: &Prepared) -> Result<(Sent, i64), ApiError> {
    let client_id = &ctx.tenant.client_id;
    let sender = &ctx.user.id;
    let (now, now_ms) = (ctx.now(), ctx.now_millis());
    let Prepared {
        ask,
        broadcast: b,
        gift,
        recipient,
        tokens,
        settings,
    } = prepared;
    let diamonds = rules::diamonds_for(*tokens, settings.diamonds_per_100_tokens);
    let mut legs = vec![Leg::new(
        Currency::Tokens,
        sender,
        system::TOKENS_EARNED,
        *tokens,
        "gift",
    )];
    if diamonds > 0 {
        legs.push(Leg::new(
            Currency::Diamonds,
            system::DIAMONDS_ISSUED,
            recipient,
            diamonds,
            "gift",
        ));
    }
    let operation = domain::ids::ordered_uuid();
    let key = ctx.header("idempotency-key");
    let posted = ledger::post(
        tx,
        client_id,
        &operation,
        &legs,
        Overdraft::Refused,
        key,
        now,
    )?;
    // The debit above holds the sender's account row, so these sums see every earlier
    // gift of the sender.
    for (window, secs, cap) in rules::cap_windows(settings) {
        let spent = ledger::spent_since(tx, client_id, sender, now - secs + 1)?;
        rules::check_cap(window, cap, spent)?;
    }
    let combo = store::next_combo(tx, client_id, &b.id, sender, recipient, &gift.id, now_ms)?;
    let sent = Sent {
        id: domain::ids::ordered_uuid(),
        broadcast_id: b.id.clone(),
        sender_id: sender.clone(),
        recipient_id: recipient.clone(),
        gift_id: gift.id.clone(),
        gift_name: gift.name.clone(),
        animation: gift.animation.clone(),
        quantity: ask.quantity,
        tokens: *tokens,
        diamonds,
        anonymous: ask.anonymous,
        combo,
        operation_id: operation,
        created_at_ms: now_ms,
    };
    store::record(tx, client_id, &sent)?;
    let balance = posted.debited.get(sender).copied().unwrap_or(0);
    Ok((sent, balance))
}

/// A sent gift, as `gift.sent` webhooks carry it; an anonymous one without its sender.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SentGift")]
struct GiftSent {
    #[schemars(extend("format" = "uuid"))]
    id: String,
    #[schemars(extend("format" = "uuid"))]
    broadcast_id: String,
    gift_id: String,
    gift_name: String,
    #[schemars(range(min = 1))]
    quantity: i64,
    tokens: i64,
    diamonds: i64,
    recipient_id: String,
    sender_id: Option<String>,
    anonymous: bool,
    combo: i64,
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
}

impl GiftSent {
    fn of(sent: &Sent) -> GiftSent {
        GiftSent {
            id: sent.id.clone(),
            broadcast_id: sent.broadcast_id.clone(),
            gift_id: sent.gift_id.clone(),
            gift_name: sent.gift_name.clone(),
            quantity: sent.quantity,
            tokens: sent.tokens,
            diamonds: sent.diamonds,
            recipient_id: sent.recipient_id.clone(),
            sender_id: (!sent.anonymous).then(|| sent.sender_id.clone()),
            anonymous: sent.anonymous,
            combo: sent.combo,
            created_at: views::millis(sent.created_at_ms),
        }
    }
}

/// The sender's answer: the gift and their token balance after it.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "GiftReceipt")]
struct GiftAnswer {
    #[serde(flatten)]
    sent: GiftSent,
    balance: i64,
}

/// The `gift` event every viewer's socket gets.
fn on_screen(sent: &Sent, sender: &CurrentUser) -> Event {
    let named = !sent.anonymous;
    Event::Gift {
        gift_id: sent.gift_id.clone(),
        name: sent.gift_name.clone(),
        animation: sent.animation.clone(),
        quantity: sent.quantity,
        combo: sent.combo,
        recipient_id: sent.recipient_id.clone(),
        sender_id: named.then(|| sender.id.clone()),
        sender_name: named.then(|| sender.username.clone()),
    }
}

/// A broadcast's top gifters, most tokens first.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "GiftLeaderboard")]
pub struct Leaderboard {
    #[schemars(extend("format" = "uuid"))]
    broadcast_id: String,
    items: Vec<SupporterView>,
}

/// A creator's top gifters over a period, most tokens first.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "TopSupporters")]
pub struct Supporters {
    user_id: String,
    #[schemars(extend("enum" = ["week", "month", "all"]))]
    period: String,
    items: Vec<SupporterView>,
}

fn ranked(standings: &[store::Standing]) -> Vec<SupporterView> {
    standings
        .iter()
        .enumerate()
        .map(|(i, s)| views::standing(i, s))
        .collect()
}

/// The broadcast's top gifters.
fn leaderboard(ctx: &UserCtx, _: NoBody) -> Result<Json<Leaderboard>, ApiError> {
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let b = app::broadcasts::load(&db, client_id, ctx.param("id"), ctx.now())?;
    let viewer = Viewer::User(&ctx.user.id);
    if !may_watch(&db, Watched::broadcast(&b), viewer, ctx.now())? {
        return Err(ApiError::not_found("broadcast"));
    }
    let items = ranked(&store::leaderboard(&db, client_id, &b.id, TOP)?);
    Ok(Json(Leaderboard {
        broadcast_id: b.id,
        items,
    }))
}

/// `?period=week|month|all`: a creator's top gifters.
fn supporters(ctx: &UserCtx, _: NoBody) -> Result<Json<Supporters>, ApiError> {
    let period = ctx.query_value("period").unwrap_or_else(|| "all".into());
    let since = rules::period_start_ms(&period, ctx.now_millis()).ok_or_else(|| {
        ApiError::bad_request("invalid_query", "period must be week, month or all")
    })?;
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let creator = ctx.param("id");
    if !users::exists(&db, client_id, creator)? {
        return Err(ApiError::not_found("user"));
    }
    let items = ranked(&store::supporters(&db, client_id, creator, since, TOP)?);
    Ok(Json(Supporters {
        user_id: creator.to_string(),
        period,
        items,
    }))
}
