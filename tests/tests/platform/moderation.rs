//! Chat moderation end to end: timeouts (with the injected clock), bans, modes, blocked
//! words, reports and held messages, pins, clearing and the log over REST; and over real
//! WebSocket clients of the relay edgehost embeds: the same rules, the live `moderation`
//! events, a ban closing the banned user's socket and surviving a reconnect.

use futures_util::{SinkExt, StreamExt};
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

const JWT: &str = "moderation-test-jwt-secret-0123456789abcdef";
const RELAY: &str = "moderation-test-relay-secret-0123456789";
const WAIT: Duration = Duration::from_secs(10);

use platform_tests::ws::Ws;

/// A live co-hosted broadcast of ada: bob co-hosts as a moderator, carol as a plain
/// co-host; dave watches; eve trolls.
struct World {
    p: Platform,
    t: Tenant,
    ada: User,
    bob: User,
    carol: User,
    dave: User,
    eve: User,
    id: String,
    stream: String,
}

async fn world() -> World {
    let p = Platform::start_with(&[("jwt_secret", JWT), ("relay_secret", RELAY)]).await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let carol = p.signup(&t, "carol").await;
    let dave = p.signup(&t, "dave").await;
    let eve = p.signup(&t, "eve").await;
    let (status, created) = p
        .as_user(&ada, Method::POST, "/api/streaming/sessions")
        .send_json(&json!({"title": "Panel", "maxParticipants": 50}))
        .await;
    assert_eq!(status, 200, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let stream = created["streamId"].as_str().unwrap().to_string();
    let (status, _) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200);
    for (user, name, preset) in [(&bob, "Bob", "moderator"), (&carol, "Carol", "default")] {
        let session = format!("/api/streaming/sessions/{id}");
        let (status, invite) = p
            .as_user(&ada, Method::POST, &format!("{session}/invites"))
            .send_json(&json!({"userId": user.id, "permissions": preset}))
            .await;
        assert_eq!(status, 200, "{invite}");
        let (status, joined) = p
            .as_user(user, Method::POST, &format!("{session}/join-cohost"))
            .send_json(&json!({"userName": name, "inviteToken": invite["inviteToken"]}))
            .await;
        assert_eq!(status, 200, "{joined}");
        assert_eq!(
            joined["coHost"]["permissions"]["canModerateChat"],
            preset == "moderator"
        );
    }
    World {
        p,
        t,
        ada,
        bob,
        carol,
        dave,
        eve,
        id,
        stream,
    }
}

impl World {
    /// Lets `secs` pass on the components' clock, the host's heartbeat keeping the
    /// broadcast live (it goes stale after 90 s without one).
    async fn pass(&self, secs: u64) {
        let mut left = secs;
        while left > 0 {
            let step = left.min(60);
            self.p.advance_clock(Duration::from_secs(step));
            left -= step;
            let (status, body) = self
                .p
                .as_user(
                    &self.ada,
                    Method::POST,
                    &format!("/api/sessions/{}/heartbeat", self.id),
                )
                .answer()
                .await;
            assert_eq!(status, 200, "{body}");
        }
    }

    fn chat(&self, tail: &str) -> String {
        format!("/api/streams/{}/chat{tail}", self.stream)
    }

    async fn post(&self, who: &User, message: &str) -> (u16, Value) {
        let (status, body) = self
            .p
            .as_user(who, Method::POST, &self.chat(""))
            .send_json(&json!({ "message": message }))
            .await;
        (status.as_u16(), body)
    }

    /// Whether the API document lists `code` among the `status` answers of both routes that
    /// post a message (the contract a refused post is checked against).
    async fn documents_post_refusal(&self, status: u16, code: &str) -> bool {
        let (_, doc) = self
            .p
            .request(Method::GET, "/api/openapi.json")
            .answer()
            .await;
        ["/api/streams/{id}/chat", "/api/broadcasts/{id}/chat"]
            .iter()
            .all(|path| {
                let answer = &doc["paths"][path]["post"]["responses"][status.to_string()];
                answer["content"]["application/problem+json"]["schema"]["properties"]["code"]
                    ["enum"]
                    .as_array()
                    .is_some_and(|codes| codes.iter().any(|c| c == code))
            })
    }

    async fn call(&self, who: &User, method: Method, tail: &str, body: Value) -> (u16, Value) {
        let builder = self.p.as_user(who, method, &self.chat(tail));
        let (status, body) = if body.is_null() {
            builder.answer().await
        } else {
            builder.send_json(&body).await
        };
        (status.as_u16(), body)
    }

    async fn settings(&self, who: &User, modes: Value) {
        let (status, body) = self.call(who, Method::PUT, "/settings", modes).await;
        assert_eq!(status, 200, "{body}");
    }

    async fn history_texts(&self) -> Vec<String> {
        let (status, page) = self
            .call(&self.ada, Method::GET, "?limit=200", Value::Null)
            .await;
        assert_eq!(status, 200, "{page}");
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["deleted"] == false)
            .map(|m| m["message"].as_str().unwrap().to_string())
            .collect()
    }

    fn ws_url(&self, query: &str) -> String {
        format!(
            "ws://{}/ws/streams/{}/chat?{query}",
            self.p.addr(),
            self.stream
        )
    }

    async fn socket(&self, who: &User) -> Ws {
        let (mut ws, _) =
            tokio_tungstenite::connect_async(self.ws_url(&format!("token={}", who.token)))
                .await
                .expect("the socket opens");
        assert_eq!(frame(&mut ws).await["type"], "history");
        ws
    }
}

/// The next JSON frame.
async fn frame(ws: &mut Ws) -> Value {
    platform_tests::ws::next_text_frame(ws, WAIT).await
}

async fn send(ws: &mut Ws, frame: Value) {
    ws.send(Message::Text(frame.to_string().into()))
        .await
        .expect("the frame is sent");
}

/// Proves nothing else is queued for the socket: a ping's pong is the next frame.
async fn nothing_queued(ws: &mut Ws) {
    send(ws, json!({"type": "ping"})).await;
    let next = frame(ws).await;
    assert_eq!(next["type"], "pong", "unexpected frame {next}");
}

/// Whether the server closed the socket (a close frame or the end of the stream).
async fn closed(ws: &mut Ws) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next()).await {
            Err(_) => return false,
            Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => return true,
            Ok(Some(Ok(_))) => continue,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn timeouts_end_on_the_clock_and_bans_hold_until_lifted() {
    let w = world().await;
    let (status, msg) = w.post(&w.eve, "first!").await;
    assert_eq!(status, 200, "{msg}");

    // A timeout refuses the troll's posts until it ends, then they are accepted.
    let (status, timed) = w
        .call(
            &w.ada,
            Method::POST,
            "/timeouts",
            json!({"userId": w.eve.id, "seconds": 60, "reason": "spam"}),
        )
        .await;
    assert_eq!(status, 200, "{timed}");
    assert_eq!(
        (timed["kind"].as_str(), timed["scope"].as_str()),
        (Some("timeout"), Some("stream"))
    );
    let refused =
        w.p.as_user(&w.eve, Method::POST, &w.chat(""))
            .json(&json!({"message": "let me talk"}))
            .send()
            .await
            .unwrap();
    assert_eq!(refused.status(), 403);
    let retry: i64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((59..=60).contains(&retry), "Retry-After {retry}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "timed_out");
    assert_eq!(body["until"], timed["until"]);
    assert!(w.documents_post_refusal(403, "timed_out").await);
    // A timed-out user still reads.
    let (status, _) = w.call(&w.eve, Method::GET, "", Value::Null).await;
    assert_eq!(status, 200);
    w.pass(59).await;
    assert_eq!(w.post(&w.eve, "now?").await.0, 403);
    w.pass(2).await;
    assert_eq!(w.post(&w.eve, "back").await.0, 200);

    // A moderating co-host bans; the ban refuses posts and reads until lifted.
    let (status, banned) = w
        .call(
            &w.bob,
            Method::POST,
            "/bans",
            json!({"userId": w.eve.id, "reason": "again"}),
        )
        .await;
    assert_eq!(status, 200, "{banned}");
    assert_eq!(banned["kind"], "ban");
    let (status, body) = w.post(&w.eve, "hello?").await;
    assert_eq!((status, body["code"].as_str()), (403, Some("banned")));
    let (status, body) = w.call(&w.eve, Method::GET, "", Value::Null).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("banned")));
    // A timeout does not shorten the ban; long after, it still holds.
    let (status, still) = w
        .call(
            &w.bob,
            Method::POST,
            "/timeouts",
            json!({"userId": w.eve.id, "seconds": 1}),
        )
        .await;
    assert_eq!((status, still["kind"].as_str()), (200, Some("ban")));
    w.pass(120).await;
    assert_eq!(w.post(&w.eve, "still?").await.0, 403);
    // Moderators cannot be restricted; nobody unknown either.
    let (status, body) = w
        .call(&w.ada, Method::POST, "/bans", json!({"userId": w.bob.id}))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("cannot_restrict_moderator"))
    );
    // An unknown user is a bad field of the body (the chat itself exists).
    let (status, refused) = w
        .call(
            &w.ada,
            Method::POST,
            "/bans",
            json!({"userId": "6f9619ff-8b86-d011-b42d-00c04fc964ff"}),
        )
        .await;
    assert_eq!(
        (status, refused["errors"][0]["field"].as_str()),
        (422, Some("userId")),
        "{refused}"
    );
    let (status, _) = w
        .call(
            &w.ada,
            Method::DELETE,
            &format!("/bans/{}", w.eve.id),
            Value::Null,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(w.post(&w.eve, "sorry").await.0, 200);
    let (status, _) = w
        .call(
            &w.ada,
            Method::DELETE,
            &format!("/bans/{}", w.eve.id),
            Value::Null,
        )
        .await;
    assert_eq!(status, 404, "nothing left to lift");

    // Channel-wide: the creator bans from all of her streams, including a new one.
    let (status, body) =
        w.p.as_user(&w.ada, Method::POST, "/api/users/me/chat/bans")
            .send_json(&json!({"userId": w.eve.id, "reason": "everywhere"}))
            .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "channel");
    assert_eq!(w.post(&w.eve, "here?").await.1["scope"], "channel");
    let (status, other) =
        w.p.as_user(&w.ada, Method::POST, "/api/broadcasts")
            .send_json(&json!({"title": "Another show"}))
            .await;
    assert_eq!(status, 200);
    let other_chat = format!("/api/streams/{}/chat", other["streamId"].as_str().unwrap());
    let (status, body) =
        w.p.as_user(&w.eve, Method::POST, &other_chat)
            .send_json(&json!({"message": "or here?"}))
            .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (403, Some("banned"))
    );
    // A co-host may not act channel-wide; the tenant's server may.
    let (status, body) = w
        .call(
            &w.bob,
            Method::POST,
            "/bans",
            json!({"userId": w.dave.id, "scope": "channel"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("not_the_creator"))
    );
    let (status, _) =
        w.p.as_user(
            &w.ada,
            Method::DELETE,
            &format!("/api/users/me/chat/bans/{}", w.eve.id),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(w.post(&w.eve, "thanks").await.0, 200);
    let (status, body) =
        w.p.as_server(
            &w.t,
            Method::POST,
            &w.chat("/timeouts"),
            Some(&json!({"userId": w.eve.id, "seconds": 30, "scope": "channel"})),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");

    // The log: who did what to whom, newest first, for moderators.
    let (status, log) = w
        .call(&w.bob, Method::GET, "/moderation-log", Value::Null)
        .await;
    assert_eq!(status, 200, "{log}");
    let entries: Vec<(String, String)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().into(),
                e["actor"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("user_timed_out", "server"),
        ("user_unbanned", w.ada.id.as_str()),
        ("user_banned", w.ada.id.as_str()),
        ("user_unbanned", w.ada.id.as_str()),
        ("user_timed_out", w.bob.id.as_str()),
        ("user_banned", w.bob.id.as_str()),
        ("user_timed_out", w.ada.id.as_str()),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(entries, expected);
    assert_eq!(log["items"][6]["targetUserId"], w.eve.id.as_str());
    assert_eq!(log["items"][6]["reason"], "spam");
}

/// Slow mode's slot is claimed inside the post's transaction: of simultaneous posts by one
/// viewer exactly one is stored, on SQLite and on PostgreSQL alike.
#[tokio::test(flavor = "multi_thread")]
async fn slow_mode_admits_one_of_simultaneous_posts() {
    let w = world().await;
    w.settings(&w.bob, json!({"slowModeSeconds": 60})).await;
    let posts = (0..16).map(|i| {
        let w = &w;
        async move { w.post(&w.dave, &format!("race {i}")).await }
    });
    let answers = futures_util::future::join_all(posts).await;
    let accepted = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(accepted, 1, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 200) {
        assert_eq!(*status, 429, "{body}");
        // The flood limit (10 per 10 s) may answer before slow mode does.
        let code = body["code"].as_str().unwrap_or_default();
        assert!(["slow_mode", "rate_limited"].contains(&code), "{body}");
    }
    let stored = w.history_texts().await;
    assert_eq!(
        stored.iter().filter(|t| t.starts_with("race ")).count(),
        1,
        "{stored:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn modes_refuse_viewers_and_spare_moderators() {
    let w = world().await;
    // Slow mode: a viewer's second message within N seconds is refused, a moderator's not.
    w.settings(&w.bob, json!({"slowModeSeconds": 30})).await;
    assert_eq!(w.post(&w.dave, "one").await.0, 200);
    let refused =
        w.p.as_user(&w.dave, Method::POST, &w.chat(""))
            .json(&json!({"message": "two"}))
            .send()
            .await
            .unwrap();
    assert_eq!(refused.status(), 429);
    let retry: i64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((29..=30).contains(&retry), "Retry-After {retry}");
    assert_eq!(refused.json::<Value>().await.unwrap()["code"], "slow_mode");
    assert!(w.documents_post_refusal(429, "slow_mode").await);
    for text in ["mod one", "mod two", "mod three"] {
        assert_eq!(w.post(&w.bob, text).await.0, 200, "moderators are exempt");
    }
    assert_eq!(w.post(&w.ada, "host one").await.0, 200);
    assert_eq!(w.post(&w.ada, "host two").await.0, 200);
    w.pass(30).await;
    assert_eq!(w.post(&w.dave, "two").await.0, 200);

    // Followers-only, after N minutes of following.
    w.settings(&w.ada, json!({"followersOnlyMinutes": 10}))
        .await;
    let (status, body) = w.post(&w.dave, "hi").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("followers_only"))
    );
    assert!(w.documents_post_refusal(403, "followers_only").await);
    let (status, _) =
        w.p.as_user(
            &w.dave,
            Method::POST,
            &format!("/api/users/follow/{}", w.ada.id),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(w.post(&w.dave, "hi").await.0, 403, "not ten minutes yet");
    assert_eq!(
        w.post(&w.carol, "co-hosts without the permission wait too")
            .await
            .0,
        403
    );
    w.pass(600).await;
    assert_eq!(w.post(&w.dave, "hi").await.0, 200);

    // Reactions-only, then subscribers-only (moderators and subscribers talk).
    w.settings(&w.ada, json!({"reactionsOnly": true})).await;
    let (status, body) = w.post(&w.dave, "words").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("reactions_only"))
    );
    assert_eq!(w.post(&w.dave, "🎉 :heart:").await.0, 200);
    assert_eq!(w.post(&w.bob, "words are fine for me").await.0, 200);
    w.settings(&w.ada, json!({"subscribersOnly": true})).await;
    let (status, body) = w.post(&w.dave, "🎉").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("subscribers_only"))
    );
    assert_eq!(w.post(&w.bob, "still here").await.0, 200);
    // Once dave subscribes to ada (a plan, tokens from the tenant's server), he talks too.
    let (status, plan) =
        w.p.as_user(&w.ada, Method::PUT, "/api/users/me/subscription-plans/fans")
            .send_json(&json!({"name": "Fans", "priceTokens": 10}))
            .await;
    assert_eq!(status, 200, "{plan}");
    let credit = json!({"tokens": 10, "reference": "dave-1", "reason": "purchase"});
    let (status, credited) =
        w.p.as_server(
            &w.t,
            Method::POST,
            &format!("/api/v1/wallets/{}/credits", w.dave.id),
            Some(&credit),
        )
        .header("idempotency-key", "moderation-credit-dave")
        .answer()
        .await;
    assert_eq!(status, 201, "{credited}");
    let (status, sub) =
        w.p.as_user(
            &w.dave,
            Method::POST,
            &format!("/api/users/{}/subscriptions", w.ada.id),
        )
        .header("idempotency-key", "moderation-subscribe-dave")
        .json(&json!({"planId": "fans"}))
        .answer()
        .await;
    assert_eq!(status, 201, "{sub}");
    assert_eq!(w.post(&w.dave, "🎉 subscribed").await.0, 200);

    // Anyone who reads the chat reads its modes; a PUT replaces them all.
    let (status, settings) = w.call(&w.dave, Method::GET, "/settings", Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(
        settings,
        json!({"slowModeSeconds": 0, "followersOnlyMinutes": null, "subscribersOnly": true,
               "reactionsOnly": false, "pinnedMessage": null})
    );
    let (status, bad) = w
        .call(
            &w.ada,
            Method::PUT,
            "/settings",
            json!({"slowModeSeconds": 99999}),
        )
        .await;
    assert_eq!(
        (status, bad["code"].as_str()),
        (422, Some("validation_failed")),
        "{bad}"
    );
    w.settings(&w.ada, json!({})).await;
    assert_eq!(w.post(&w.dave, "free again").await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn blocked_words_reports_pins_and_clearing() {
    let w = world().await;
    // The creator's list rejects a word whatever its disguise; similar clean words pass.
    let (status, list) =
        w.p.as_user(&w.ada, Method::PUT, "/api/users/me/chat/blocked-words")
            .send_json(&json!({"words": ["darn", "idiot*"], "action": "reject"}))
            .await;
    assert_eq!(status, 200, "{list}");
    for evasion in [
        "DARN",
        "d a r n it",
        "d4rrrn",
        "dаrn",
        "what an 1diots",
        "d.a.r.n",
    ] {
        let (status, body) = w.post(&w.dave, evasion).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("blocked_word")),
            "{evasion}"
        );
    }
    assert!(w.documents_post_refusal(422, "blocked_word").await);
    for clean in ["darning socks", "a darned good show", "ideal idea"] {
        assert_eq!(w.post(&w.dave, clean).await.0, 200, "{clean}");
    }
    assert_eq!(w.post(&w.ada, "darn, the host may").await.0, 200);
    // The tenant's default list applies to every creator's chat.
    let (status, _) =
        w.p.as_server(
            &w.t,
            Method::PUT,
            "/api/v1/chat/blocked-words",
            Some(&json!({"words": ["heck"]})),
        )
        .answer()
        .await;
    assert_eq!(status, 200);
    assert_eq!(w.post(&w.dave, "what the h3ck").await.0, 422);

    // Held for review: stored unseen, queued, shown once approved.
    let (status, _) =
        w.p.as_user(&w.ada, Method::PUT, "/api/users/me/chat/blocked-words")
            .send_json(&json!({"words": ["darn"], "action": "hold"}))
            .await;
    assert_eq!(status, 200);
    let (status, held) = w.post(&w.dave, "daaarn it").await;
    assert_eq!((status, held["held"].clone()), (202, json!(true)), "{held}");
    assert!(!w.history_texts().await.contains(&"daaarn it".to_string()));
    let (status, queue) = w.call(&w.bob, Method::GET, "/reports", Value::Null).await;
    assert_eq!(status, 200, "{queue}");
    let item = &queue["items"][0];
    assert_eq!(
        (item["kind"].as_str(), item["messageId"].clone()),
        (Some("held"), held["id"].clone())
    );
    let resolve = format!("/reports/{}/resolve", item["id"].as_str().unwrap());
    let (status, done) = w
        .call(&w.bob, Method::POST, &resolve, json!({"action": "approve"}))
        .await;
    assert_eq!(
        (status, done["resolution"].as_str()),
        (200, Some("approved")),
        "{done}"
    );
    assert!(w.history_texts().await.contains(&"daaarn it".to_string()));
    let (status, again) = w
        .call(&w.bob, Method::POST, &resolve, json!({"action": "dismiss"}))
        .await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("already_resolved"))
    );

    // Reports: any signed-in viewer, once per message, rate limited; resolved by deleting.
    let mut ids = Vec::new();
    for i in 0..7 {
        let (status, m) = w.post(&w.eve, &format!("troll {i}")).await;
        assert_eq!(status, 200);
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    let report = |id: &str| format!("/{id}/report");
    let (status, filed) = w
        .call(
            &w.dave,
            Method::POST,
            &report(&ids[0]),
            json!({"reason": "rude"}),
        )
        .await;
    assert_eq!(status, 201, "{filed}");
    let (status, body) = w
        .call(
            &w.dave,
            Method::POST,
            &report(&ids[0]),
            json!({"reason": "rude"}),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("already_reported"))
    );
    for id in &ids[1..5] {
        assert_eq!(
            w.call(&w.dave, Method::POST, &report(id), json!({"reason": "x"}))
                .await
                .0,
            201
        );
    }
    let (status, body) = w
        .call(
            &w.dave,
            Method::POST,
            &report(&ids[5]),
            json!({"reason": "x"}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (429, Some("rate_limited")));
    let (status, _) = w
        .call(
            &w.carol,
            Method::POST,
            &report(&ids[0]),
            json!({"reason": "me too"}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, queue) = w.call(&w.ada, Method::GET, "/reports", Value::Null).await;
    assert_eq!((status, queue["total"].clone()), (200, json!(6)));
    let first = queue["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["messageId"] == ids[0].as_str())
        .unwrap();
    let (status, _) = w
        .call(
            &w.ada,
            Method::POST,
            &format!("/reports/{}/resolve", first["id"].as_str().unwrap()),
            json!({"action": "delete", "note": "abusive"}),
        )
        .await;
    assert_eq!(status, 200);
    assert!(!w.history_texts().await.contains(&"troll 0".to_string()));
    let (_, queue) = w.call(&w.ada, Method::GET, "/reports", Value::Null).await;
    assert_eq!(
        queue["total"], 4,
        "both reports of the deleted message are settled"
    );

    // Pin and unpin.
    let (status, pinned) = w
        .call(&w.bob, Method::PUT, "/pin", json!({"messageId": ids[6]}))
        .await;
    assert_eq!(status, 200, "{pinned}");
    assert_eq!(pinned["pinnedMessage"]["id"], ids[6].as_str());
    let (_, settings) = w.call(&w.dave, Method::GET, "/settings", Value::Null).await;
    assert_eq!(settings["pinnedMessage"]["message"], "troll 6");
    let (status, unpinned) = w.call(&w.bob, Method::DELETE, "/pin", Value::Null).await;
    assert_eq!(
        (status, unpinned["pinnedMessage"].clone()),
        (200, Value::Null)
    );

    // Delete one user's messages, then clear the chat.
    let (status, cleared) = w
        .call(&w.bob, Method::POST, "/clear", json!({"userId": w.eve.id}))
        .await;
    assert_eq!(
        (status, cleared["deleted"].clone()),
        (200, json!(6)),
        "{cleared}"
    );
    assert!(
        w.history_texts()
            .await
            .iter()
            .all(|t| !t.starts_with("troll"))
    );
    assert!(!w.history_texts().await.is_empty());
    let (status, _) = w.call(&w.ada, Method::POST, "/clear", Value::Null).await;
    assert_eq!(status, 200);
    assert!(w.history_texts().await.is_empty());
    let (_, log) = w
        .call(&w.ada, Method::GET, "/moderation-log?limit=3", Value::Null)
        .await;
    let actions: Vec<&str> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["chat_cleared", "messages_deleted", "message_unpinned"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sockets_see_rest_changes_and_moderation_live_and_a_ban_holds_across_reconnects() {
    let w = world().await;
    let mut dave = w.socket(&w.dave).await;
    let mut eve = w.socket(&w.eve).await;

    // A REST post reaches the sockets; a socket's own post is delivered once.
    let (_, posted) = w.post(&w.ada, "welcome").await;
    let got = frame(&mut eve).await;
    assert_eq!(
        (got["type"].as_str(), got["message"]["id"].clone()),
        (Some("message"), posted["id"].clone())
    );
    assert_eq!(frame(&mut dave).await["message"]["id"], posted["id"]);
    send(&mut dave, json!({"type": "message", "message": "hi all"})).await;
    for ws in [&mut dave, &mut eve] {
        assert_eq!(frame(ws).await["message"]["message"], "hi all");
        nothing_queued(ws).await;
    }
    // A REST delete is pushed too.
    let (status, _) = w
        .call(
            &w.ada,
            Method::DELETE,
            &format!("/{}", posted["id"].as_str().unwrap()),
            Value::Null,
        )
        .await;
    assert_eq!(status, 200);
    for ws in [&mut dave, &mut eve] {
        let got = frame(ws).await;
        assert_eq!(
            (got["type"].as_str(), got["id"].clone()),
            (Some("deleted"), posted["id"].clone())
        );
    }

    // A timeout: everyone is told; the troll's writes are refused, its reads go on.
    let (status, _) = w
        .call(
            &w.ada,
            Method::POST,
            "/timeouts",
            json!({"userId": w.eve.id, "seconds": 300}),
        )
        .await;
    assert_eq!(status, 200);
    for ws in [&mut dave, &mut eve] {
        let got = frame(ws).await;
        assert_eq!(got["event"]["kind"], "moderation");
        assert_eq!(got["event"]["action"], "user_timed_out");
        assert_eq!(got["event"]["userId"], w.eve.id.as_str());
    }
    send(&mut eve, json!({"type": "message", "message": "unfair"})).await;
    let refused = frame(&mut eve).await;
    assert_eq!(
        (refused["type"].as_str(), refused["code"].as_str()),
        (Some("error"), Some("timed_out"))
    );
    nothing_queued(&mut dave).await;
    send(
        &mut dave,
        json!({"type": "message", "message": "still reading?"}),
    )
    .await;
    assert_eq!(
        frame(&mut eve).await["message"]["message"],
        "still reading?"
    );
    assert_eq!(
        frame(&mut dave).await["message"]["message"],
        "still reading?"
    );

    // A mode change is pushed live.
    w.settings(&w.ada, json!({"slowModeSeconds": 10})).await;
    for ws in [&mut dave, &mut eve] {
        let got = frame(ws).await;
        assert_eq!(got["event"]["action"], "mode_changed");
        assert_eq!(got["event"]["settings"]["slowModeSeconds"], 10);
    }
    w.settings(&w.ada, json!({})).await;
    for ws in [&mut dave, &mut eve] {
        assert_eq!(frame(ws).await["event"]["action"], "mode_changed");
    }

    // A held message: its sender alone hears of it.
    let (status, _) =
        w.p.as_user(&w.ada, Method::PUT, "/api/users/me/chat/blocked-words")
            .send_json(&json!({"words": ["darn"], "action": "hold"}))
            .await;
    assert_eq!(status, 200);
    send(&mut dave, json!({"type": "message", "message": "d a r n"})).await;
    let held = frame(&mut dave).await;
    assert_eq!(
        (held["type"].as_str(), held["message"]["held"].clone()),
        (Some("held"), json!(true))
    );
    nothing_queued(&mut eve).await;

    // A ban: the event goes out, the banned user's socket closes, the others stay.
    let (status, _) = w
        .call(&w.bob, Method::POST, "/bans", json!({"userId": w.eve.id}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(frame(&mut dave).await["event"]["action"], "user_banned");
    assert_eq!(frame(&mut eve).await["event"]["action"], "user_banned");
    assert!(closed(&mut eve).await, "the banned user's socket is closed");
    // Reconnecting does not help: the upgrade is refused.
    match tokio_tungstenite::connect_async(w.ws_url(&format!("token={}", w.eve.token))).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 403),
        other => panic!("the banned user reconnected: {:?}", other.map(|_| ())),
    }
    // Nor does signing a read-only socket in.
    let (mut anonymous, _) =
        tokio_tungstenite::connect_async(w.ws_url(&format!("clientId={}", w.t.client_id)))
            .await
            .expect("read-only sockets open");
    assert_eq!(frame(&mut anonymous).await["type"], "history");
    send(
        &mut anonymous,
        json!({"type": "auth", "token": w.eve.token}),
    )
    .await;
    let refused = frame(&mut anonymous).await;
    assert_eq!(
        (refused["type"].as_str(), refused["code"].as_str()),
        (Some("error"), Some("banned"))
    );
    send(
        &mut anonymous,
        json!({"type": "message", "message": "sneaky"}),
    )
    .await;
    assert_eq!(frame(&mut anonymous).await["code"], "read_only");
    // And the relay delivers no message of the banned user to anyone.
    assert_eq!(w.post(&w.eve, "over REST then").await.0, 403);
    nothing_queued(&mut dave).await;
    nothing_queued(&mut anonymous).await;
    assert!(
        w.history_texts()
            .await
            .iter()
            .all(|t| t != "over REST then" && t != "sneaky")
    );

    // Unbanned, the user connects again.
    let (status, _) = w
        .call(
            &w.ada,
            Method::DELETE,
            &format!("/bans/{}", w.eve.id),
            Value::Null,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(frame(&mut dave).await["event"]["action"], "user_unbanned");
    let mut eve = w.socket(&w.eve).await;
    nothing_queued(&mut eve).await;
}
