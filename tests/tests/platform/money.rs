//! Money on the ledger, end to end: credits, gifts under a race, idempotent retries,
//! chargebacks, payouts, subscriptions and their renewal job. Every test ends with the
//! ledger's invariant check (`POST /api/jobs/check-ledger`). (The suite runs on SQLite,
//! and on PostgreSQL when the test command selects it.)

use futures_util::future::join_all;
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::time::Duration;

const JOBS_TOKEN: &str = "jobs-token-for-the-money-suite-0123456789";

async fn platform() -> Platform {
    Platform::start_with(&[
        ("jobs_token", JOBS_TOKEN),
        ("sfu_api_key", "APImoney"),
        ("sfu_api_secret", "money-suite-sfu-secret-0123456789abcdef"),
    ])
    .await
}

/// `user` logged in again (a JWT lives one hour: after the clock moved past it).
async fn log_in_again(p: &Platform, user: &User, username: &str) -> User {
    let (status, body) = p
        .request(Method::POST, "/api/users/login")
        .header("x-api-key", &user.api_key)
        .send_json(&json!({"username": username, "password": "correct horse battery"}))
        .await;
    assert_eq!(status, 200, "{body}");
    User {
        token: body["token"].as_str().expect("token").to_string(),
        ..user.clone()
    }
}

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

/// Runs a job; answers its status and body.
async fn job(p: &Platform, name: &str) -> (u16, Value) {
    let (status, body) = p
        .request(Method::POST, &format!("/api/jobs/{name}"))
        .bearer_auth(JOBS_TOKEN)
        .answer()
        .await;
    (status.as_u16(), body)
}

/// The ledger's invariants hold: every balance is the sum of its transfers, every
/// currency sums to zero.
async fn assert_ledger_consistent(p: &Platform) {
    let (status, body) = job(p, "check-ledger").await;
    assert_eq!(status, 200, "the ledger is inconsistent: {body}");
    assert_eq!(body["ok"], true);
}

/// A fresh Idempotency-Key.
fn key() -> String {
    format!("k-{}", uuid_like())
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        platform_tests::unix_now(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The tenant's server credits `tokens` to `user`.
async fn credit(p: &Platform, t: &Tenant, user: &User, tokens: i64, reference: &str) -> Value {
    let body = json!({"tokens": tokens, "reference": reference, "reason": "purchase"});
    let (status, answer) = p
        .as_server(
            t,
            Method::POST,
            &format!("/api/v1/wallets/{}/credits", user.id),
            Some(&body),
        )
        .header("idempotency-key", key())
        .answer()
        .await;
    assert_eq!(status, 201, "{answer}");
    answer
}

async fn wallet(p: &Platform, user: &User) -> Value {
    let (status, w) = p.as_user(user, Method::GET, "/api/wallet").answer().await;
    assert_eq!(status, 200, "{w}");
    w
}

async fn put_gift(p: &Platform, t: &Tenant, id: &str, price: i64) {
    let body = json!({"name": id, "priceTokens": price, "animation": "large"});
    let (status, answer) = p
        .as_server(t, Method::PUT, &format!("/api/v1/gifts/{id}"), Some(&body))
        .answer()
        .await;
    assert_eq!(status, 200, "{answer}");
}

/// A broadcast of `owner` with `visibility`, moved to `active`; answers its id.
async fn live_broadcast(p: &Platform, owner: &User, visibility: &str) -> String {
    let live = p.live_broadcast(owner, visibility).await;
    live["id"].as_str().unwrap().to_string()
}

fn gift_request(
    p: &Platform,
    sender: &User,
    broadcast: &str,
    key: &str,
    body: &Value,
) -> reqwest::RequestBuilder {
    p.as_user(
        sender,
        Method::POST,
        &format!("/api/broadcasts/{broadcast}/gifts"),
    )
    .header("idempotency-key", key)
    .json(body)
}

#[tokio::test(flavor = "multi_thread")]
async fn sixty_four_concurrent_gifts_from_a_wallet_for_forty_move_exactly_forty() {
    let p = platform().await;
    let t = p.register_client("Race").await;
    let (host, fan) = (p.signup(&t, "host").await, p.signup(&t, "fan").await);
    put_gift(&p, &t, "rose", 10).await;
    credit(&p, &t, &fan, 400, "receipt-1").await;
    let b = live_broadcast(&p, &host, "public").await;
    // Warm the server's database connections first (on PostgreSQL a burst of new
    // connections on a loaded machine can outlast the pool's connect timeout), so the race
    // measures the ledger and not connection set-up.
    join_all((0..64).map(|_| p.as_user(&fan, Method::GET, "/api/wallet").status())).await;
    let keys: Vec<String> = (0..64).map(|_| key()).collect();
    let body = json!({"giftId": "rose"});
    let answers = join_all(
        keys.iter()
            .map(|k| gift_request(&p, &fan, &b, k, &body).answer()),
    )
    .await;
    let accepted = answers.iter().filter(|(s, _)| *s == 201).count();
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s != 201).collect();
    assert_eq!(accepted, 40, "{refused:?}");
    for (status, body) in &refused {
        assert_eq!(
            (status.as_u16(), code(body)),
            (409, "insufficient_funds"),
            "{body}"
        );
    }
    for (_, body) in answers.iter().filter(|(s, _)| *s == 201) {
        assert!(body["balance"].as_i64().unwrap() >= 0, "{body}");
    }
    let fan_wallet = wallet(&p, &fan).await;
    assert_eq!(
        (
            fan_wallet["tokens"].as_i64(),
            fan_wallet["spendingBlocked"].as_bool()
        ),
        (Some(0), Some(false))
    );
    // The host earns 50 diamonds per 100 tokens (the default rate): 40 gifts of 10 tokens.
    assert_eq!(wallet(&p, &host).await["diamonds"], 200);
    let (_, txs) = p
        .as_user(
            &fan,
            Method::GET,
            "/api/wallet/transactions?currency=tokens&limit=200",
        )
        .answer()
        .await;
    assert_eq!(txs["total"], 41, "one credit and forty gifts");
    let (_, board) = p
        .as_user(
            &host,
            Method::GET,
            &format!("/api/broadcasts/{b}/gifts/leaderboard"),
        )
        .answer()
        .await;
    assert_eq!(board["items"][0]["tokens"], 400);
    assert_eq!(board["items"][0]["gifts"], 40);
    assert_ledger_consistent(&p).await;
}

/// A popular creator: 64 gifts from 16 fans at once all credit one account (as pending
/// changes that no gift waits for), and then 64 payout requests race for what arrived.
#[tokio::test(flavor = "multi_thread")]
async fn gifts_from_many_fans_at_once_all_reach_one_creator_whose_payouts_race_for_them() {
    let p = platform().await;
    let t = p.register_client("Crowd").await;
    let host = p.signup(&t, "host").await;
    put_gift(&p, &t, "rose", 10).await;
    let mut fans = Vec::new();
    for i in 0..16 {
        let fan = p.signup(&t, &format!("fan{i}")).await;
        credit(&p, &t, &fan, 40, &format!("receipt-{i}")).await;
        fans.push(fan);
    }
    let b = live_broadcast(&p, &host, "public").await;
    join_all((0..64).map(|_| p.as_user(&host, Method::GET, "/api/wallet").status())).await;
    let body = json!({"giftId": "rose"});
    let keys: Vec<String> = (0..64).map(|_| key()).collect();
    let answers = join_all(
        keys.iter()
            .enumerate()
            .map(|(n, k)| gift_request(&p, &fans[n % 16], &b, k, &body).answer()),
    )
    .await;
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s != 201).collect();
    assert!(refused.is_empty(), "{refused:?}");
    // 64 gifts of 10 tokens at 50 diamonds per 100 tokens.
    assert_eq!(wallet(&p, &host).await["diamonds"], 320);
    for fan in &fans {
        assert_eq!(wallet(&p, fan).await["tokens"], 0);
    }
    assert_ledger_consistent(&p).await;

    let payouts = join_all((0..64).map(|_| {
        p.as_user(&host, Method::POST, "/api/wallet/payouts")
            .header("idempotency-key", key())
            .json(&json!({"diamonds": 100}))
            .answer()
    }))
    .await;
    let held = payouts.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(held, 3, "320 diamonds hold three payouts of 100");
    for (status, body) in payouts.iter().filter(|(s, _)| *s != 201) {
        assert_eq!(
            (status.as_u16(), code(body)),
            (409, "insufficient_funds"),
            "{body}"
        );
    }
    let w = wallet(&p, &host).await;
    assert_eq!(
        (w["diamonds"].as_i64(), w["diamondsHeld"].as_i64()),
        (Some(20), Some(300))
    );
    assert_ledger_consistent(&p).await;
}
#[tokio::test(flavor = "multi_thread")]
async fn retries_with_the_same_key_move_money_once() {
    let p = platform().await;
    let t = p.register_client("Retry").await;
    let (host, fan) = (p.signup(&t, "host").await, p.signup(&t, "fan").await);
    put_gift(&p, &t, "rose", 10).await;
    let b = live_broadcast(&p, &host, "public").await;

    // A credit retried with its key credits once and replays the first answer.
    let credit_body = json!({"tokens": 100, "reference": "receipt-7"});
    let path = format!("/api/v1/wallets/{}/credits", fan.id);
    let first_key = key();
    let send = |k: &str| {
        p.as_server(&t, Method::POST, &path, Some(&credit_body))
            .header("idempotency-key", k.to_string())
    };
    let (s1, a1) = send(&first_key).answer().await;
    let replay = send(&first_key).send().await.unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let (s2, a2) = platform_tests::json_of(replay).await;
    assert_eq!((s1.as_u16(), s2.as_u16()), (201, 201));
    assert_eq!(a1, a2);
    // The same reference under another key is refused and names the first credit.
    let (s3, a3) = send(&key()).answer().await;
    assert_eq!((s3.as_u16(), code(&a3)), (409, "duplicate_reference"));
    assert_eq!(a3["transferId"], a1["id"]);
    assert_eq!(wallet(&p, &fan).await["tokens"], 100);

    // Sixteen copies of one gift request at once: one gift.
    let gift_key = key();
    let body = json!({"giftId": "rose", "quantity": 2});
    let answers =
        join_all((0..16).map(|_| gift_request(&p, &fan, &b, &gift_key, &body).answer())).await;
    let created: Vec<_> = answers.iter().filter(|(s, _)| *s == 201).collect();
    assert!(!created.is_empty());
    for (status, answer) in &answers {
        match status.as_u16() {
            201 => assert_eq!(
                answer["id"], created[0].1["id"],
                "a replay answers the first gift"
            ),
            409 => assert_eq!(code(answer), "request_in_progress"),
            other => panic!("{other}: {answer}"),
        }
    }
    // A later retry replays it; the same key with another body is refused.
    let (status, again) = gift_request(&p, &fan, &b, &gift_key, &body).answer().await;
    assert_eq!((status.as_u16(), &again["id"]), (201, &created[0].1["id"]));
    let (status, other) = gift_request(&p, &fan, &b, &gift_key, &json!({"giftId": "rose"}))
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), code(&other)),
        (422, "idempotency_key_reused")
    );
    assert_eq!(wallet(&p, &fan).await["tokens"], 80);
    // A key is the caller's own: another user's request with the same key runs.
    let fan2 = p.signup(&t, "fan2").await;
    credit(&p, &t, &fan2, 10, "receipt-8").await;
    let (status, _) = gift_request(&p, &fan2, &b, &gift_key, &body).answer().await;
    assert_eq!(status, 409, "fan2 holds 10 tokens, the request costs 20");
    // Without a key, nothing moves.
    let (status, missing) = p
        .as_user(&fan, Method::POST, &format!("/api/broadcasts/{b}/gifts"))
        .send_json(&body)
        .await;
    assert_eq!(
        (status.as_u16(), code(&missing)),
        (400, "idempotency_key_required")
    );
    assert_eq!(wallet(&p, &fan).await["tokens"], 80);
    // Once the broadcast has ended, a retry of the gift still replays its answer, and a
    // gift refused for it is refused again with the same answer.
    let (status, ended) = p
        .as_user(&host, Method::POST, &format!("/api/broadcasts/{b}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200, "{ended}");
    let replay = gift_request(&p, &fan, &b, &gift_key, &body)
        .send()
        .await
        .unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let (status, again) = platform_tests::json_of(replay).await;
    assert_eq!((status.as_u16(), &again["id"]), (201, &created[0].1["id"]));
    let late_key = key();
    let (status, late) = gift_request(&p, &fan, &b, &late_key, &body).answer().await;
    assert_eq!((status.as_u16(), code(&late)), (409, "broadcast_not_live"));
    let replay = gift_request(&p, &fan, &b, &late_key, &body)
        .send()
        .await
        .unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(wallet(&p, &fan).await["tokens"], 80);
    // A day later the key is forgotten (and pruned).
    p.advance_clock(Duration::from_secs(24 * 3600 + 60));
    let (status, pruned) = p
        .request(Method::POST, "/api/jobs/prune")
        .bearer_auth(JOBS_TOKEN)
        .answer()
        .await;
    assert_eq!(status, 200, "{pruned}");
    assert!(
        pruned["removed"]["idempotency_keys"].as_i64().unwrap() >= 3,
        "{pruned}"
    );
    assert_ledger_consistent(&p).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reversed_credit_that_was_spent_blocks_spending_until_settled() {
    let p = platform().await;
    let t = p.register_client("Chargeback").await;
    let (host, fan) = (p.signup(&t, "host").await, p.signup(&t, "fan").await);
    put_gift(&p, &t, "rose", 10).await;
    let b = live_broadcast(&p, &host, "public").await;
    let purchase = credit(&p, &t, &fan, 100, "receipt-1").await;
    let (status, _) = gift_request(
        &p,
        &fan,
        &b,
        &key(),
        &json!({"giftId": "rose", "quantity": 6}),
    )
    .answer()
    .await;
    assert_eq!(status, 201);
    let reverse = format!(
        "/api/v1/transfers/{}/reverse",
        purchase["id"].as_str().unwrap()
    );
    let (status, reversal) = p
        .as_server(
            &t,
            Method::POST,
            &reverse,
            Some(&json!({"reason": "chargeback"})),
        )
        .header("idempotency-key", key())
        .answer()
        .await;
    assert_eq!(status, 201, "{reversal}");
    assert_eq!(reversal["kind"], "chargeback");
    assert_eq!(reversal["reverses"], purchase["id"]);
    assert_eq!(reversal["amount"], 100);
    let w = wallet(&p, &fan).await;
    assert_eq!(
        (w["tokens"].as_i64(), w["spendingBlocked"].as_bool()),
        (Some(-60), Some(true))
    );
    let (status, blocked) = gift_request(&p, &fan, &b, &key(), &json!({"giftId": "rose"}))
        .answer()
        .await;
    assert_eq!((status.as_u16(), code(&blocked)), (409, "spending_blocked"));
    // A transfer is reversed once.
    let (status, twice) = p
        .as_server(&t, Method::POST, &reverse, Some(&json!({})))
        .header("idempotency-key", key())
        .answer()
        .await;
    assert_eq!((status.as_u16(), code(&twice)), (409, "already_reversed"));
    // The reversal is in the wallet's history.
    let (_, txs) = p
        .as_user(&fan, Method::GET, "/api/wallet/transactions")
        .answer()
        .await;
    let chargeback = txs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["kind"] == "chargeback")
        .expect("the chargeback is listed");
    assert_eq!(chargeback["change"], -100);
    assert_eq!(chargeback["direction"], "out");
    // A new purchase settles the debt; spending works again.
    credit(&p, &t, &fan, 100, "receipt-2").await;
    assert_eq!(wallet(&p, &fan).await["spendingBlocked"], false);
    let (status, _) = gift_request(&p, &fan, &b, &key(), &json!({"giftId": "rose"}))
        .answer()
        .await;
    assert_eq!(status, 201);
    assert_eq!(wallet(&p, &fan).await["tokens"], 30);
    // The host keeps the diamonds of the gifts (the platform bears the chargeback).
    assert_eq!(wallet(&p, &host).await["diamonds"], 35);
    assert_ledger_consistent(&p).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gifts_go_to_the_host_or_a_cohost_while_live_and_combo() {
    let p = platform().await;
    let t = p.register_client("Gifts").await;
    let (host, fan, other) = (
        p.signup(&t, "host").await,
        p.signup(&t, "fan").await,
        p.signup(&t, "other").await,
    );
    put_gift(&p, &t, "rose", 10).await;
    put_gift(&p, &t, "crown", 500).await;
    let (status, _) = p
        .as_server(
            &t,
            Method::PUT,
            "/api/v1/gifts/old",
            Some(&json!({"name": "Old", "priceTokens": 1, "active": false})),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    let (status, catalog) = p.as_client(&t, Method::GET, "/api/gifts").answer().await;
    assert_eq!(status, 200);
    let names: Vec<&str> = catalog["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["crown", "rose"], "only active gifts");
    credit(&p, &t, &fan, 1000, "r1").await;
    let (status, b) = p
        .as_user(&host, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Soon"}))
        .await;
    assert_eq!(status, 200);
    let pending = b["id"].as_str().unwrap();
    let rose = json!({"giftId": "rose"});
    let (status, answer) = gift_request(&p, &fan, pending, &key(), &rose)
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), code(&answer)),
        (409, "broadcast_not_live")
    );
    let live = live_broadcast(&p, &host, "public").await;
    for (body, expected, expected_code) in [
        (json!({"giftId": "old"}), 404, "not_found"),
        (
            json!({"giftId": "rose", "quantity": 0}),
            422,
            "validation_failed",
        ),
        (
            json!({"giftId": "rose", "recipientId": other.id}),
            422,
            "invalid_recipient",
        ),
        (
            json!({"giftId": "crown", "quantity": 3}),
            409,
            "insufficient_funds",
        ),
    ] {
        let (status, answer) = gift_request(&p, &fan, &live, &key(), &body).answer().await;
        assert_eq!(status.as_u16(), expected, "{body}: {answer}");
        if expected != 422 {
            assert_eq!(code(&answer), expected_code, "{answer}");
        }
    }
    let (status, answer) = gift_request(&p, &host, &live, &key(), &rose).answer().await;
    assert_eq!(
        (status.as_u16(), code(&answer)),
        (422, "cannot_gift_yourself")
    );
    // Repeats within 10 s count up a combo; an anonymous one hides its sender.
    let mut combos = Vec::new();
    for _ in 0..3 {
        let (status, sent) = gift_request(&p, &fan, &live, &key(), &rose).answer().await;
        assert_eq!(status, 201, "{sent}");
        combos.push(sent["combo"].as_i64().unwrap());
    }
    assert_eq!(combos, [1, 2, 3]);
    p.advance_clock(Duration::from_secs(11));
    let (_, sent) = gift_request(
        &p,
        &fan,
        &live,
        &key(),
        &json!({"giftId": "rose", "anonymous": true}),
    )
    .answer()
    .await;
    assert_eq!(
        (sent["combo"].as_i64(), sent["senderId"].is_null()),
        (Some(1), true)
    );
    let (_, board) = p
        .as_user(
            &other,
            Method::GET,
            &format!("/api/broadcasts/{live}/gifts/leaderboard"),
        )
        .answer()
        .await;
    assert_eq!(board["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        (
            board["items"][0]["userId"].as_str(),
            board["items"][0]["tokens"].as_i64()
        ),
        (Some(fan.id.as_str()), Some(30))
    );
    let (status, supporters) = p
        .as_user(
            &other,
            Method::GET,
            &format!("/api/users/{}/supporters?period=week", host.id),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(supporters["items"][0]["username"], "fan");
    let (status, _) = p
        .as_user(
            &other,
            Method::GET,
            &format!("/api/users/{}/supporters?period=year", host.id),
        )
        .answer()
        .await;
    assert_eq!(status, 400);
    // The tenant's rate decides the diamonds (rounded down).
    let (status, settings) = p
        .as_server(
            &t,
            Method::PUT,
            "/api/v1/monetization",
            Some(&json!({"diamondsPer100Tokens": 33})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{settings}");
    let before = wallet(&p, &host).await["diamonds"].as_i64().unwrap();
    gift_request(&p, &fan, &live, &key(), &rose).answer().await;
    assert_eq!(
        wallet(&p, &host).await["diamonds"].as_i64().unwrap() - before,
        3
    );
    assert_ledger_consistent(&p).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn spending_caps_refuse_beyond_the_window_and_pass_after_it() {
    let p = platform().await;
    let t = p.register_client("Caps").await;
    let (host, fan) = (p.signup(&t, "host").await, p.signup(&t, "fan").await);
    put_gift(&p, &t, "rose", 10).await;
    credit(&p, &t, &fan, 1000, "r1").await;
    let (status, s) = p
        .as_server(
            &t,
            Method::PUT,
            "/api/v1/monetization",
            Some(&json!({"spendingCaps": {"hour": 25, "day": null}})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["spendingCaps"]["hour"], 25);
    let live = live_broadcast(&p, &host, "public").await;
    let rose = json!({"giftId": "rose"});
    for expected in [201, 201, 429] {
        let (status, answer) = gift_request(&p, &fan, &live, &key(), &rose).answer().await;
        assert_eq!(status.as_u16(), expected, "{answer}");
    }
    assert_eq!(wallet(&p, &fan).await["tokens"], 980);
    p.advance_clock(Duration::from_secs(3601));
    // Tokens expired and the broadcast went stale while the clock moved.
    let (host, fan) = (
        log_in_again(&p, &host, "host").await,
        log_in_again(&p, &fan, "fan").await,
    );
    let live = live_broadcast(&p, &host, "public").await;
    let (status, _) = gift_request(&p, &fan, &live, &key(), &rose).answer().await;
    assert_eq!(status, 201);
    assert_ledger_consistent(&p).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn payouts_hold_diamonds_until_the_tenant_decides() {
    let p = platform().await;
    let t = p.register_client("Payouts").await;
    let (host, fan) = (p.signup(&t, "host").await, p.signup(&t, "fan").await);
    put_gift(&p, &t, "crown", 400).await;
    credit(&p, &t, &fan, 800, "r1").await;
    let live = live_broadcast(&p, &host, "public").await;
    let (status, _) = gift_request(
        &p,
        &fan,
        &live,
        &key(),
        &json!({"giftId": "crown", "quantity": 2}),
    )
    .answer()
    .await;
    assert_eq!(status, 201);
    assert_eq!(wallet(&p, &host).await["diamonds"], 400);
    let ask = |diamonds: i64| {
        p.as_user(&host, Method::POST, "/api/wallet/payouts")
            .header("idempotency-key", key())
            .json(&json!({"diamonds": diamonds}))
            .answer()
    };
    let (status, small) = ask(50).await;
    assert_eq!(
        (status.as_u16(), code(&small)),
        (422, "below_minimum_payout")
    );
    let (status, big) = ask(500).await;
    assert_eq!((status.as_u16(), code(&big)), (409, "insufficient_funds"));
    let (status, first) = ask(300).await;
    assert_eq!(status, 201, "{first}");
    let w = wallet(&p, &host).await;
    assert_eq!(
        (w["diamonds"].as_i64(), w["diamondsHeld"].as_i64()),
        (Some(100), Some(300))
    );
    let (status, second) = ask(100).await;
    assert_eq!(status, 201);
    let (_, pending) = p
        .as_server(&t, Method::GET, "/api/v1/payouts?status=pending", None)
        .answer()
        .await;
    assert_eq!(pending["total"], 2);
    let decide = |id: &Value, action: &str, body: Value| {
        let path = format!("/api/v1/payouts/{}/{action}", id.as_str().unwrap());
        p.as_server(&t, Method::POST, &path, Some(&body))
            .header("idempotency-key", key())
            .answer()
    };
    let (status, done) = decide(
        &first["id"],
        "complete",
        json!({"externalReference": "bank-42"}),
    )
    .await;
    assert_eq!(
        (status.as_u16(), done["status"].as_str()),
        (200, Some("completed"))
    );
    let (status, again) = decide(&first["id"], "reject", json!({})).await;
    assert_eq!((status.as_u16(), code(&again)), (409, "payout_decided"));
    let (status, rejected) = decide(&second["id"], "reject", json!({"reason": "KYC"})).await;
    assert_eq!(
        (status.as_u16(), rejected["status"].as_str()),
        (200, Some("rejected"))
    );
    let w = wallet(&p, &host).await;
    assert_eq!(
        (w["diamonds"].as_i64(), w["diamondsHeld"].as_i64()),
        (Some(100), Some(0))
    );
    let (_, own) = p
        .as_user(&host, Method::GET, "/api/wallet/payouts")
        .answer()
        .await;
    assert_eq!(own["total"], 2);
    assert_ledger_consistent(&p).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn subscriptions_charge_renew_lapse_and_open_subscriber_broadcasts() {
    let p = platform().await;
    let t = p.register_client("Subs").await;
    let (host, fan, poor, stranger) = (
        p.signup(&t, "host").await,
        p.signup(&t, "fan").await,
        p.signup(&t, "poor").await,
        p.signup(&t, "stranger").await,
    );
    let (status, plan) = p
        .as_user(&host, Method::PUT, "/api/users/me/subscription-plans/gold")
        .send_json(&json!({"name": "Gold", "priceTokens": 100, "perks": ["badge"]}))
        .await;
    assert_eq!(status, 200, "{plan}");
    let (_, plans) = p
        .as_user(
            &fan,
            Method::GET,
            &format!("/api/users/{}/subscription-plans", host.id),
        )
        .answer()
        .await;
    assert_eq!(plans["items"][0]["priceTokens"], 100);
    credit(&p, &t, &fan, 250, "r1").await;
    credit(&p, &t, &poor, 100, "r2").await;
    let subscribe = |who: &User| {
        p.as_user(
            who,
            Method::POST,
            &format!("/api/users/{}/subscriptions", host.id),
        )
        .header("idempotency-key", key())
        .json(&json!({"planId": "gold"}))
        .answer()
    };
    let (status, sub) = subscribe(&fan).await;
    assert_eq!(status, 201, "{sub}");
    assert_eq!(sub["status"], "active");
    let (status, twice) = subscribe(&fan).await;
    assert_eq!((status.as_u16(), code(&twice)), (409, "already_subscribed"));
    let (status, _) = subscribe(&poor).await;
    assert_eq!(status, 201);
    assert_eq!(wallet(&p, &fan).await["tokens"], 150);
    assert_eq!(wallet(&p, &host).await["diamonds"], 100);

    // A subscribers-only broadcast: the host's subscribers watch, strangers and guests do not.
    let live = live_broadcast(&p, &host, "subscribers").await;
    let path = format!("/api/broadcasts/{live}");
    assert_eq!(p.as_user(&fan, Method::GET, &path).status().await, 200);
    assert_eq!(p.as_user(&stranger, Method::GET, &path).status().await, 404);
    let token = format!("/api/streaming/sessions/{live}/token");
    let viewer = json!({"role": "subscriber"});
    assert_eq!(
        p.as_user(&fan, Method::POST, &token)
            .json(&viewer)
            .status()
            .await,
        200
    );
    assert_eq!(
        p.as_user(&stranger, Method::POST, &token)
            .json(&viewer)
            .status()
            .await,
        404
    );
    assert_eq!(
        p.as_client(&t, Method::POST, &token)
            .json(&viewer)
            .status()
            .await,
        404
    );

    // A subscribers-only scheduled event follows the same rule: its details and its room.
    let (status, event) = p
        .as_user(&host, Method::POST, "/api/events")
        .send_json(&json!({"title": "Members' Q&A", "scheduledFor": "2031-04-30T18:00:00Z", "visibility": "subscribers"}))
        .await;
    assert_eq!(status, 200, "{event}");
    let event_path = format!("/api/events/{}", event["id"].as_str().unwrap());
    let room_token = format!(
        "/api/streaming/sessions/{}/token",
        event["shortId"].as_str().unwrap()
    );
    for (who, expected) in [(&fan, 200), (&stranger, 404)] {
        assert_eq!(
            p.as_user(who, Method::GET, &event_path).status().await,
            expected
        );
        let status = p
            .as_user(who, Method::POST, &room_token)
            .json(&viewer)
            .status()
            .await;
        assert_eq!(status, expected, "{}: the event room's token", who.id);
    }

    // Chat messages carry the sender's subscriber badge.
    let chat = format!("/api/broadcasts/{live}/chat");
    let (status, said) = p
        .as_user(&fan, Method::POST, &chat)
        .send_json(&json!({"message": "hi"}))
        .await;
    assert_eq!(status, 200, "{said}");
    assert_eq!(said["senderBadge"], "subscriber");
    let (_, host_said) = p
        .as_user(&host, Method::POST, &chat)
        .send_json(&json!({"message": "welcome"}))
        .await;
    assert!(host_said.get("senderBadge").is_none(), "{host_said}");
    assert_eq!(
        p.as_user(&stranger, Method::POST, &chat)
            .json(&json!({"message": "x"}))
            .status()
            .await,
        404
    );

    // The fan cancels (at period end); poor cannot pay the next period: both lapse.
    let (status, canceled) = p
        .as_user(
            &fan,
            Method::DELETE,
            &format!("/api/users/{}/subscriptions", host.id),
        )
        .answer()
        .await;
    assert_eq!(
        (status.as_u16(), canceled["cancelAtPeriodEnd"].as_bool()),
        (200, Some(true))
    );
    assert_eq!(
        p.as_user(&fan, Method::GET, &path).status().await,
        200,
        "paid through the period"
    );
    let (_, mine) = p
        .as_user(&fan, Method::GET, "/api/users/me/subscriptions")
        .answer()
        .await;
    assert_eq!(mine["items"].as_array().unwrap().len(), 1);
    // A third subscriber renews.
    let rich = p.signup(&t, "rich").await;
    credit(&p, &t, &rich, 300, "r3").await;
    assert_eq!(subscribe(&rich).await.0, 201);
    let (_, nothing_due) = job(&p, "renew-subscriptions").await;
    assert_eq!(nothing_due["done"], 0);
    p.advance_clock(Duration::from_secs(30 * 86_400 + 10));
    let (status, run) = job(&p, "renew-subscriptions").await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(
        (
            run["renewed"].as_i64(),
            run["lapsed"].as_i64(),
            run["remaining"].as_i64()
        ),
        (Some(1), Some(2), Some(0))
    );
    let (_, again) = job(&p, "renew-subscriptions").await;
    assert_eq!(again["done"], 0, "a period is charged once");
    // A month later the users log in again (a JWT lives an hour).
    let rich = log_in_again(&p, &rich, "rich").await;
    let fan = log_in_again(&p, &fan, "fan").await;
    let poor = log_in_again(&p, &poor, "poor").await;
    assert_eq!(wallet(&p, &rich).await["tokens"], 100);
    assert_eq!(wallet(&p, &fan).await["tokens"], 150);
    assert_eq!(wallet(&p, &poor).await["tokens"], 0);
    let (_, mine) = p
        .as_user(&poor, Method::GET, "/api/users/me/subscriptions")
        .answer()
        .await;
    assert_eq!(mine["items"][0]["status"], "lapsed");
    let stale_or_live = p.as_user(&poor, Method::GET, &path).status().await;
    assert_eq!(stale_or_live, 404, "a lapsed subscriber no longer watches");
    assert_ledger_consistent(&p).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_users_wallet_transfers_payouts_and_plans_are_unknown() {
    let p = platform().await;
    let t = p.register_client("Mine").await;
    let (ada, eve) = (p.signup(&t, "ada").await, p.signup(&t, "eve").await);
    let purchase = credit(&p, &t, &ada, 500, "r1").await;
    put_gift(&p, &t, "rose", 10).await;
    let live = live_broadcast(&p, &eve, "public").await;
    gift_request(
        &p,
        &ada,
        &live,
        &key(),
        &json!({"giftId": "rose", "quantity": 30}),
    )
    .answer()
    .await;
    let (status, payout) = p
        .as_user(&eve, Method::POST, "/api/wallet/payouts")
        .header("idempotency-key", key())
        .json(&json!({"diamonds": 150}))
        .answer()
        .await;
    assert_eq!(status, 201, "{payout}");
    let (_, plan) = p
        .as_user(&eve, Method::PUT, "/api/users/me/subscription-plans/secret")
        .send_json(&json!({"name": "Hidden", "priceTokens": 5, "active": false}))
        .await;
    assert_eq!(plan["active"], false);
    let ada_transfer = format!(
        "/api/wallet/transactions/{}",
        purchase["id"].as_str().unwrap()
    );
    assert_eq!(
        p.as_user(&ada, Method::GET, &ada_transfer).status().await,
        200
    );
    assert_eq!(
        p.as_user(&eve, Method::GET, &ada_transfer).status().await,
        404
    );
    let eve_payout = format!("/api/wallet/payouts/{}", payout["id"].as_str().unwrap());
    assert_eq!(
        p.as_user(&eve, Method::GET, &eve_payout).status().await,
        200
    );
    assert_eq!(
        p.as_user(&ada, Method::GET, &eve_payout).status().await,
        404
    );
    let (_, plans) = p
        .as_user(
            &ada,
            Method::GET,
            &format!("/api/users/{}/subscription-plans", eve.id),
        )
        .answer()
        .await;
    assert_eq!(
        plans["items"].as_array().unwrap().len(),
        0,
        "inactive plans are the creator's own"
    );
    let (status, _) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/users/{}/subscriptions", eve.id),
        )
        .header("idempotency-key", key())
        .json(&json!({"planId": "secret"}))
        .answer()
        .await;
    assert_eq!(status, 404);
    // Each wallet shows its own balances only.
    assert_eq!(wallet(&p, &eve).await["tokens"], 0);
    assert_eq!(wallet(&p, &ada).await["diamonds"], 0);
    // Another tenant's server sees none of it.
    let other = p.register_client("Other").await;
    let (status, _) = p
        .as_server(
            &other,
            Method::POST,
            &format!(
                "/api/v1/transfers/{}/reverse",
                purchase["id"].as_str().unwrap()
            ),
            Some(&json!({})),
        )
        .header("idempotency-key", key())
        .answer()
        .await;
    assert_eq!(status, 404);
    let (_, theirs) = p
        .as_server(&other, Method::GET, "/api/v1/payouts", None)
        .answer()
        .await;
    assert_eq!(theirs["total"], 0);
    let (status, _) = p
        .as_server(
            &other,
            Method::POST,
            &format!("/api/v1/wallets/{}/credits", ada.id),
            Some(&json!({"tokens": 5, "reference": "x"})),
        )
        .header("idempotency-key", key())
        .answer()
        .await;
    assert_eq!(status, 404, "another tenant's user is unknown");
    assert_ledger_consistent(&p).await;
}
