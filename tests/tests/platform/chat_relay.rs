//! The chat relay end to end: real WebSocket clients, relay servers in-process pointing at
//! the real platform (edgehost running the wasm API), the relay embedded in edgehost as
//! `edgehost up` runs it, headless Chromium for the pages' sockets, and a real
//! `redis-server` for scale-out.

use crate::support::browser;

use chat_relay::{AllowedOrigins, Config, Relay, RelayServer};
use futures_util::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const JWT: &str = "chat-relay-test-jwt-secret-0123456789abcdef";
const RELAY: &str = "chat-relay-test-relay-secret-0123456789";
const WAIT: Duration = Duration::from_secs(10);

use platform_tests::backends::OwnRedis as Redis;
use platform_tests::ws::Ws;

/// A platform, a tenant with two users, and one broadcast's streamId.
struct World {
    p: Platform,
    t: Tenant,
    ada: User,
    bob: User,
    stream: String,
}

async fn world() -> World {
    let p = Platform::start_with(&[("jwt_secret", JWT), ("relay_secret", RELAY)]).await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let bob = p.signup(&t, "bob").await;
    let stream = new_stream(&p, &ada).await;
    World {
        p,
        t,
        ada,
        bob,
        stream,
    }
}

async fn new_stream(p: &Platform, owner: &User) -> String {
    let (status, b) = p
        .as_user(owner, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Chatty show"}))
        .await;
    assert_eq!(status, 200, "{b}");
    b["streamId"].as_str().expect("streamId").to_string()
}

fn config(p: &Platform) -> Config {
    Config::new(&p.base, JWT, RELAY)
}

async fn loopback_listener() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()
}

async fn relay_with(config: Config) -> RelayServer {
    let (public, internal) = (loopback_listener().await, loopback_listener().await);
    chat_relay::serve(Relay::new(config), public, internal).unwrap()
}

async fn relay(p: &Platform) -> RelayServer {
    relay_with(config(p)).await
}

fn ws_url(r: &RelayServer, stream: &str, query: &str) -> String {
    format!("ws://{}/ws/streams/{stream}/chat?{query}", r.local_addr())
}

async fn connect(r: &RelayServer, stream: &str, user: &User) -> Ws {
    connect_url(&ws_url(r, stream, &format!("token={}", user.token))).await
}

/// A read-only socket named by its tenant, as the pages open them.
async fn connect_read_only(r: &RelayServer, stream: &str, tenant: &Tenant) -> Ws {
    connect_url(&ws_url(
        r,
        stream,
        &format!("clientId={}", tenant.client_id),
    ))
    .await
}

async fn connect_url(url: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("WebSocket connects");
    ws
}

/// The HTTP status a refused upgrade answered.
async fn refused(url: &str) -> u16 {
    match try_connect(url, &[]).await {
        Err(status) => status,
        Ok(_) => panic!("{url} was upgraded"),
    }
}

/// Connects with extra request headers; a refused upgrade answers its HTTP status.
async fn try_connect(url: &str, headers: &[(&str, &str)]) -> Result<Ws, u16> {
    let mut request = url.into_client_request().expect("a WebSocket URL");
    for (name, value) in headers {
        request.headers_mut().insert(
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("{url}: {e}"),
    }
}

/// The next JSON frame (pings are answered by the client library and skipped).
async fn frame(ws: &mut Ws) -> Value {
    platform_tests::ws::next_text_frame(ws, WAIT).await
}

/// The next frame of `kind`, skipping others.
async fn frame_of(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let f = frame(ws).await;
        if f["type"] == kind {
            return f;
        }
    }
}

/// Asserts no text frame arrives for `d`.
async fn silent(ws: &mut Ws, d: Duration) {
    let deadline = Instant::now() + d;
    while let Ok(Some(Ok(msg))) = tokio::time::timeout(
        deadline.saturating_duration_since(Instant::now()),
        ws.next(),
    )
    .await
    {
        assert!(!msg.is_text(), "unexpected frame {msg}");
    }
}

async fn say(ws: &mut Ws, text: &str) {
    ws.send(Message::Text(
        json!({"type": "message", "message": text})
            .to_string()
            .into(),
    ))
    .await
    .expect("send");
}

async fn rest_history(w: &World, stream: &str) -> Vec<Value> {
    let (status, body) =
        w.p.as_user(
            &w.ada,
            Method::GET,
            &format!("/api/streams/{stream}/chat?limit=200"),
        )
        .answer()
        .await;
    assert_eq!(status, 200, "{body}");
    body["items"].as_array().cloned().unwrap_or_default()
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let resp = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The relay's Prometheus text (served on its internal listener).
async fn metrics_of(r: &RelayServer) -> String {
    let (status, text) = http_get(r.internal_addr(), "/metrics").await;
    assert_eq!(status, 200);
    text
}

/// A metric's value in Prometheus text.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_or_missing_tokens_are_refused_before_the_upgrade() {
    let w = world().await;
    let r = relay(&w.p).await;
    let now = domain::time::now();
    let claims = domain::jwt::UserClaims {
        sub: w.ada.id.clone(),
        tid: w.t.client_id.clone(),
        jti: "j".into(),
        tv: 0,
        sid: None,
        aud: None,
    };
    let expired = domain::jwt::sign(JWT.as_bytes(), &claims, now - 7200, 3600);
    let foreign = domain::jwt::sign(b"another-secret-entirely-0123456789", &claims, now, 3600);
    for query in [
        "",
        "token=not-a-jwt",
        &format!("token={expired}"),
        &format!("token={foreign}"),
    ] {
        assert_eq!(
            refused(&ws_url(&r, &w.stream, query)).await,
            401,
            "query {query}"
        );
    }
    // Unknown paths and plain GETs are not upgraded either.
    let (status, _) = http_get(
        r.local_addr(),
        &format!("/ws/streams/{}/chat?token={}", w.stream, w.ada.token),
    )
    .await;
    assert_eq!(status, 426);
    let metrics = metrics_of(&r).await;
    assert!(metric(&metrics, "chat_relay_rejected_upgrades_total") >= 5);
    assert_eq!(metric(&metrics, "chat_relay_connections"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn history_then_messages_are_stored_before_reaching_every_socket_of_the_stream_only() {
    let w = world().await;
    let other = new_stream(&w.p, &w.bob).await;
    let (status, stored) =
        w.p.as_user(
            &w.ada,
            Method::POST,
            &format!("/api/streams/{}/chat", w.stream),
        )
        .send_json(&json!({"message": "before anyone came"}))
        .await;
    assert_eq!(status, 200, "{stored}");
    let r = relay(&w.p).await;

    let mut ada = connect(&r, &w.stream, &w.ada).await;
    let mut bob = connect(&r, &w.stream, &w.bob).await;
    let mut elsewhere = connect(&r, &other, &w.bob).await;
    for ws in [&mut ada, &mut bob] {
        let h = frame(ws).await;
        assert_eq!(h["type"], "history", "{h}");
        let msgs = h["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 1, "{h}");
        assert_eq!(msgs[0]["message"], "before anyone came");
    }
    assert_eq!(frame(&mut elsewhere).await["messages"], json!([]));

    say(&mut ada, "  hello, room  ").await;
    let mine = frame_of(&mut ada, "message").await["message"].clone();
    let theirs = frame_of(&mut bob, "message").await["message"].clone();
    assert_eq!(mine, theirs, "everyone gets the same stored record");
    assert_eq!(mine["senderId"], w.ada.id.as_str());
    assert_eq!(mine["streamId"], w.stream.as_str());
    assert_eq!(mine["deleted"], false);
    assert!(
        mine["id"].as_str().is_some() && mine["createdAt"].as_str().is_some(),
        "{mine}"
    );
    silent(&mut elsewhere, Duration::from_millis(300)).await;

    let history = rest_history(&w, &w.stream).await;
    assert_eq!(history.len(), 2);
    assert_eq!(
        history[1]["id"], mine["id"],
        "what was fanned out is what is stored"
    );

    // Deleting over the socket reaches every socket and the store.
    let id = mine["id"].as_str().unwrap().to_string();
    ada.send(Message::Text(
        json!({"type": "delete", "id": id}).to_string().into(),
    ))
    .await
    .unwrap();
    for ws in [&mut ada, &mut bob] {
        assert_eq!(frame_of(ws, "deleted").await["id"], id.as_str());
    }
    let visible = rest_history(&w, &w.stream).await;
    assert!(
        visible
            .iter()
            .all(|m| m["id"] != id.as_str() || m["deleted"] == true),
        "{visible:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_the_api_refuses_is_an_error_to_its_sender_and_reaches_nobody() {
    let w = world().await;
    let r = relay(&w.p).await;
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    let mut bob = connect(&r, &w.stream, &w.bob).await;
    frame(&mut ada).await;
    frame(&mut bob).await;

    say(&mut ada, &"x".repeat(2001)).await;
    let err = frame(&mut ada).await;
    assert_eq!(err["type"], "error", "{err}");
    assert_eq!(err["status"], 422, "{err}");
    assert!(
        err["code"].as_str().is_some() && err["message"].as_str().is_some(),
        "{err}"
    );
    say(&mut ada, "   ").await;
    assert_eq!(frame(&mut ada).await["type"], "error");

    // The per-user rate limit: the 11th message within 10 s is refused.
    for i in 0..11 {
        say(&mut ada, &format!("burst {i}")).await;
    }
    let mut stored = 0;
    let mut limited = None;
    while stored + limited.iter().count() < 11 {
        let f = frame(&mut ada).await;
        match f["type"].as_str() {
            Some("message") => stored += 1,
            Some("error") => limited = Some(f),
            _ => {}
        }
    }
    let limited = limited.expect("one message was refused");
    assert_eq!(limited["status"], 429, "{limited}");
    assert_eq!(stored, 10);
    for _ in 0..10 {
        assert_eq!(frame(&mut bob).await["type"], "message");
    }
    silent(&mut bob, Duration::from_millis(300)).await;
    assert_eq!(rest_history(&w, &w.stream).await.len(), 10);
    let metrics = metrics_of(&r).await;
    assert_eq!(metric(&metrics, "chat_relay_persistence_failures_total"), 3);
    assert_eq!(metric(&metrics, "chat_relay_messages_stored_total"), 10);
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_sockets_get_history_and_messages_but_cannot_send() {
    let w = world().await;
    let r = relay(&w.p).await;
    let mut viewer = connect_read_only(&r, &w.stream, &w.t).await;
    assert_eq!(frame(&mut viewer).await["type"], "history");
    say(&mut viewer, "let me in").await;
    let err = frame(&mut viewer).await;
    assert_eq!(
        (err["type"].as_str(), err["code"].as_str()),
        (Some("error"), Some("read_only")),
        "{err}"
    );

    let mut ada = connect(&r, &w.stream, &w.ada).await;
    frame(&mut ada).await;
    say(&mut ada, "hello viewers").await;
    assert_eq!(
        frame_of(&mut viewer, "message").await["message"]["message"],
        "hello viewers"
    );
    assert_eq!(rest_history(&w, &w.stream).await.len(), 1);
}

async fn post_event(
    addr: std::net::SocketAddr,
    stream: &str,
    secret: Option<&str>,
    body: &Value,
) -> u16 {
    let mut req = reqwest::Client::new()
        .post(format!("http://{addr}/internal/streams/{stream}/events"))
        .json(body);
    if let Some(s) = secret {
        req = req.header("x-relay-secret", s);
    }
    req.status().await.as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_internal_events_endpoint_needs_the_secret_and_reaches_the_streams_sockets() {
    let w = world().await;
    let other = new_stream(&w.p, &w.ada).await;
    let r = relay(&w.p).await;
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    let mut elsewhere = connect(&r, &other, &w.bob).await;
    frame(&mut ada).await;
    frame(&mut elsewhere).await;

    let event = json!({"kind": "reaction", "emoji": "🎉"});
    assert_eq!(
        post_event(r.internal_addr(), &w.stream, None, &event).await,
        401
    );
    assert_eq!(
        post_event(r.internal_addr(), &w.stream, Some("wrong"), &event).await,
        401
    );
    assert_eq!(
        post_event(
            r.internal_addr(),
            &w.stream,
            Some(RELAY),
            &json!({"no": "kind"})
        )
        .await,
        422
    );
    assert_eq!(
        post_event(r.internal_addr(), &w.stream, Some(RELAY), &event).await,
        202
    );
    let got = frame(&mut ada).await;
    assert_eq!(got, json!({"type": "event", "event": event}));
    silent(&mut elsewhere, Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_client_is_disconnected_without_slowing_the_room() {
    let w = world().await;
    let mut cfg = config(&w.p);
    cfg.queue_capacity = 16;
    let r = relay_with(cfg).await;
    let mut fast = connect(&r, &w.stream, &w.ada).await;
    // The slow client never reads, with a small receive buffer so the kernel does not
    // absorb the backlog for it.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(r.local_addr()).await.unwrap();
    let url = ws_url(&r, &w.stream, &format!("token={}", w.bob.token));
    let (slow, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(tcp))
        .await
        .unwrap();
    frame(&mut fast).await;

    // Events go out until the relay drops the slow client (the kernel's socket buffers
    // absorb some megabytes first, so how many it takes varies); the fast client must get
    // every one, in order, meanwhile.
    let big = "y".repeat(60_000);
    const MAX_EVENTS: usize = 2000;
    let reader = tokio::spawn(async move {
        let mut n = 0;
        loop {
            let f = frame(&mut fast).await;
            assert_eq!(f["event"]["n"], n, "in order, none lost");
            if f["event"]["last"] == true {
                return n;
            }
            n += 1;
        }
    });
    let started = Instant::now();
    let mut sent = 0;
    let mut metrics = String::new();
    while sent < MAX_EVENTS {
        let status = post_event(
            r.internal_addr(),
            &w.stream,
            Some(RELAY),
            &json!({"kind": "test", "n": sent, "pad": big}),
        )
        .await;
        assert_eq!(status, 202);
        sent += 1;
        if sent % 20 == 0 {
            metrics = metrics_of(&r).await;
            if metric(&metrics, "chat_relay_dropped_slow_clients_total") == 1 {
                break;
            }
        }
    }
    let last = json!({"kind": "test", "n": sent, "last": true});
    assert_eq!(
        post_event(r.internal_addr(), &w.stream, Some(RELAY), &last).await,
        202
    );
    let received = tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .expect("the fast client keeps up")
        .unwrap();
    assert_eq!(received, sent, "the fast client got every event");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(
        metric(&metrics, "chat_relay_dropped_slow_clients_total"),
        1,
        "the slow client was dropped within {MAX_EVENTS} events: {metrics}"
    );
    assert_eq!(metric(&metrics, "chat_relay_connections"), 1);
    drop(slow);
}

#[tokio::test(flavor = "multi_thread")]
async fn events_that_arrive_together_share_a_frame_for_clients_that_read_batches() {
    let w = world().await;
    let mut cfg = config(&w.p);
    // A window wide enough that events posted one after another always share it.
    cfg.batch_window = Duration::from_millis(100);
    let r = relay_with(cfg).await;
    let token = format!("token={}", w.ada.token);
    assert_eq!(
        refused(&ws_url(&r, &w.stream, &format!("{token}&batch=yes"))).await,
        400
    );
    let mut batcher = connect_url(&ws_url(&r, &w.stream, &format!("{token}&batch=1"))).await;
    let mut plain = connect(&r, &w.stream, &w.bob).await;
    assert_eq!(frame(&mut batcher).await["type"], "history");
    assert_eq!(frame(&mut plain).await["type"], "history");

    const EVENTS: usize = 30;
    for n in 0..EVENTS {
        let status = post_event(
            r.internal_addr(),
            &w.stream,
            Some(RELAY),
            &json!({"kind": "test", "n": n}),
        )
        .await;
        assert_eq!(status, 202);
    }

    // The batching client: every event once, in order, several to a frame.
    let (mut events, mut frames, mut batches) = (Vec::new(), 0, 0);
    while events.len() < EVENTS {
        let f = frame(&mut batcher).await;
        frames += 1;
        match f["type"].as_str() {
            Some("batch") => {
                batches += 1;
                let inner = f["frames"].as_array().expect("frames").clone();
                assert!(inner.len() >= 2, "a batch holds several frames: {f}");
                events.extend(inner);
            }
            _ => events.push(f),
        }
    }
    let order: Vec<Value> = events.iter().map(|e| e["event"]["n"].clone()).collect();
    assert_eq!(order, (0..EVENTS).map(|n| json!(n)).collect::<Vec<_>>());
    assert!(events.iter().all(|e| e["type"] == "event"));
    assert!(
        batches >= 1 && frames < EVENTS,
        "{frames} frames, {batches} batches"
    );

    // The client that did not ask for batches: one event a frame, in the same order.
    for n in 0..EVENTS {
        let f = frame(&mut plain).await;
        assert_eq!(
            (f["type"].as_str(), &f["event"]["n"]),
            (Some("event"), &json!(n))
        );
    }
    silent(&mut batcher, Duration::from_millis(300)).await;
    silent(&mut plain, Duration::from_millis(300)).await;

    let metrics = metrics_of(&r).await;
    assert_eq!(
        metric(&metrics, "chat_relay_messages_out_total"),
        2 * EVENTS as u64
    );
    // Frames written after the history: one per event to the plain socket, and the
    // batcher's.
    assert_eq!(
        metric(&metrics, "chat_relay_frames_out_total"),
        (EVENTS + frames) as u64
    );
}

async fn relay_on_redis(p: &Platform, redis: &Redis) -> RelayServer {
    let mut cfg = config(p);
    cfg.redis_url = Some(redis.url());
    let r = relay_with(cfg).await;
    wait_redis(&r, "connected").await;
    r
}

async fn wait_redis(r: &RelayServer, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while r.relay().redis_state() != state {
        assert!(Instant::now() < deadline, "Redis never {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `message` texts of the next `n` message frames.
async fn texts(ws: &mut Ws, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        let f = frame_of(ws, "message").await;
        out.push(f["message"]["message"].as_str().unwrap().to_string());
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn two_instances_deliver_every_message_once_and_in_one_order() {
    let w = world().await;
    let redis = Redis::start().await;
    let (a, b) = (
        relay_on_redis(&w.p, &redis).await,
        relay_on_redis(&w.p, &redis).await,
    );
    let mut ada = connect(&a, &w.stream, &w.ada).await;
    let mut bob = connect(&b, &w.stream, &w.bob).await;
    let mut ada_on_b = connect(&b, &w.stream, &w.ada).await;
    for ws in [&mut ada, &mut bob, &mut ada_on_b] {
        frame(ws).await;
    }
    for i in 0..4 {
        say(&mut ada, &format!("ada {i}")).await;
        say(&mut bob, &format!("bob {i}")).await;
    }
    let seen_a = texts(&mut ada, 8).await;
    let seen_b = texts(&mut bob, 8).await;
    let seen_b2 = texts(&mut ada_on_b, 8).await;
    assert_eq!(seen_a, seen_b, "one order everywhere");
    assert_eq!(seen_a, seen_b2);
    for who in ["ada", "bob"] {
        let own: Vec<_> = seen_a
            .iter()
            .filter(|t| t.starts_with(who))
            .cloned()
            .collect();
        assert_eq!(
            own,
            (0..4).map(|i| format!("{who} {i}")).collect::<Vec<_>>(),
            "each sender's order kept"
        );
    }
    for ws in [&mut ada, &mut bob, &mut ada_on_b] {
        silent(ws, Duration::from_millis(300)).await;
    }
    let stored: Vec<_> = rest_history(&w, &w.stream)
        .await
        .iter()
        .map(|m| m["message"].as_str().unwrap().to_string())
        .collect();
    let mut sorted_seen = seen_a.clone();
    sorted_seen.sort();
    let mut sorted_stored = stored.clone();
    sorted_stored.sort();
    assert_eq!(
        sorted_seen, sorted_stored,
        "every message is readable afterwards over REST"
    );

    // Events posted to one instance reach the other's sockets.
    assert_eq!(
        post_event(
            a.internal_addr(),
            &w.stream,
            Some(RELAY),
            &json!({"kind": "viewers", "count": 3})
        )
        .await,
        202
    );
    assert_eq!(frame(&mut bob).await["event"]["count"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn relays_keep_serving_without_redis_and_reconnect_when_it_returns() {
    let w = world().await;
    let mut redis = Redis::start().await;
    let (a, b) = (
        relay_on_redis(&w.p, &redis).await,
        relay_on_redis(&w.p, &redis).await,
    );
    let mut ada = connect(&a, &w.stream, &w.ada).await;
    let mut bob = connect(&b, &w.stream, &w.bob).await;
    frame(&mut ada).await;
    frame(&mut bob).await;

    redis.stop();
    wait_redis(&a, "disconnected").await;
    say(&mut ada, "while redis is away").await;
    assert_eq!(
        texts(&mut ada, 1).await,
        ["while redis is away"],
        "local sockets still served"
    );
    let (_, health) = http_get(a.local_addr(), "/healthz").await;
    assert_eq!(
        serde_json::from_str::<Value>(&health).unwrap(),
        json!({"status": "ok", "redis": "disconnected"})
    );

    redis.launch().await;
    wait_redis(&a, "connected").await;
    wait_redis(&b, "connected").await;
    say(&mut ada, "redis is back").await;
    assert_eq!(texts(&mut bob, 1).await, ["redis is back"]);
    assert_eq!(texts(&mut ada, 1).await, ["redis is back"]);
    let metrics = metrics_of(&a).await;
    assert!(
        metric(&metrics, "chat_relay_redis_reconnects_total") >= 2,
        "{metrics}"
    );
    assert_eq!(metric(&metrics, "chat_relay_redis_state"), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relay_restart_loses_no_stored_message() {
    let w = world().await;
    let r = relay(&w.p).await;
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    frame(&mut ada).await;
    say(&mut ada, "before the restart").await;
    texts(&mut ada, 1).await;
    r.shutdown().await;
    // The socket ends with the relay.
    let end =
        tokio::time::timeout(WAIT, async { while let Some(Ok(_)) = ada.next().await {} }).await;
    assert!(end.is_ok(), "the socket closed");

    let r = relay(&w.p).await;
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    let h = frame(&mut ada).await;
    assert_eq!(h["messages"][0]["message"], "before the restart", "{h}");
}

#[tokio::test(flavor = "multi_thread")]
async fn healthz_on_both_listeners_metrics_and_events_only_on_the_internal_one() {
    let w = world().await;
    let r = relay(&w.p).await;
    for addr in [r.local_addr(), r.internal_addr()] {
        let (status, health) = http_get(addr, "/healthz").await;
        assert_eq!(status, 200);
        assert_eq!(
            serde_json::from_str::<Value>(&health).unwrap(),
            json!({"status": "ok", "redis": "disabled"})
        );
    }
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    let mut bob = connect(&r, &w.stream, &w.bob).await;
    frame(&mut ada).await;
    frame(&mut bob).await;
    say(&mut ada, "count me").await;
    texts(&mut bob, 1).await;
    texts(&mut ada, 1).await;
    let m = metrics_of(&r).await;
    assert_eq!(metric(&m, "chat_relay_connections"), 2);
    assert_eq!(metric(&m, "chat_relay_rooms"), 1);
    assert_eq!(metric(&m, "chat_relay_messages_in_total"), 1);
    assert_eq!(metric(&m, "chat_relay_messages_out_total"), 2);
    assert_eq!(metric(&m, "chat_relay_redis_state"), 0);
    assert!(m.contains("# TYPE chat_relay_dropped_slow_clients_total counter"));
    assert_eq!(r.relay().connections_held(), 2);

    // The public listener serves sockets and health only: no metrics, and no internal
    // endpoint even with the right secret.
    assert_eq!(http_get(r.local_addr(), "/metrics").await.0, 404);
    assert_eq!(http_get(r.local_addr(), "/nope").await.0, 404);
    let event = json!({"kind": "layout", "layout": "grid2x2"});
    assert_eq!(
        post_event(r.local_addr(), &w.stream, Some(RELAY), &event).await,
        404
    );
    silent(&mut ada, Duration::from_millis(300)).await;
    // The internal one serves no sockets.
    assert_eq!(
        http_get(
            r.internal_addr(),
            &format!("/ws/streams/{}/chat?token={}", w.stream, w.ada.token)
        )
        .await
        .0,
        404
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_events_endpoint_bounds_its_body_and_checks_the_stream_id() {
    let w = world().await;
    let r = relay(&w.p).await;
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    frame(&mut ada).await;
    let huge = json!({"kind": "test", "pad": "z".repeat(70 * 1024)});
    assert_eq!(
        post_event(r.internal_addr(), &w.stream, Some(RELAY), &huge).await,
        413
    );
    let event = json!({"kind": "test"});
    for bad in ["not-a-uuid", "..%2F..%2Fx", "1"] {
        assert_eq!(
            post_event(r.internal_addr(), bad, Some(RELAY), &event).await,
            400,
            "{bad}"
        );
    }
    // The secret is checked before anything else is looked at.
    assert_eq!(
        post_event(r.internal_addr(), "not-a-uuid", Some("wrong"), &huge).await,
        401
    );
    // Any UUID spelling the API accepts names the same stream.
    let upper = w.stream.to_uppercase();
    assert_eq!(
        post_event(r.internal_addr(), &upper, Some(RELAY), &event).await,
        202
    );
    assert_eq!(frame(&mut ada).await["event"]["kind"], "test");
    silent(&mut ada, Duration::from_millis(200)).await;
}

/// A forwarding proxy in front of the real platform that records every request the relay
/// makes: it shows which calls leave the relay, and which never do.
struct ApiRecorder {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl ApiRecorder {
    async fn start(target: &str) -> ApiRecorder {
        let listener = loopback_listener().await;
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (target, log) = (target.to_string(), seen.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (http, target, log) = (http.clone(), target.clone(), log.clone());
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (http, target, log) = (http.clone(), target.clone(), log.clone());
                        async move {
                            let path = req
                                .uri()
                                .path_and_query()
                                .map(|p| p.to_string())
                                .unwrap_or_default();
                            log.lock().unwrap().push(format!("{} {path}", req.method()));
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            let mut out = http.request(parts.method, format!("{target}{path}"));
                            for (name, value) in &parts.headers {
                                if name != "host" && name != "content-length" {
                                    out = out.header(name, value);
                                }
                            }
                            let answer = out.body(body).send().await.unwrap();
                            let status = answer.status();
                            let headers = answer.headers().clone();
                            let bytes = answer.bytes().await.unwrap();
                            let mut resp = hyper::Response::new(http_body_util::Full::new(bytes));
                            *resp.status_mut() = status;
                            for (name, value) in &headers {
                                if name != "content-length" && name != "transfer-encoding" {
                                    resp.headers_mut().append(name, value.clone());
                                }
                            }
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    },
                );
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        ApiRecorder { addr, seen }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests so far, as `METHOD /path?query`, and forgets them.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ids_from_paths_and_frames_are_checked_before_any_request_is_built() {
    let w = world().await;
    let api = ApiRecorder::start(&w.p.base).await;
    let r = relay_with(Config::new(&api.url(), JWT, RELAY)).await;

    // Stream ids in the path: anything but a UUID is refused before the handshake, and
    // no request leaves the relay.
    for bad in [
        "not-a-uuid",
        "..%2F..%2Fapi%2Fusers",
        "%2e%2e",
        "1",
        &format!("{}%3Flimit%3D200", w.stream),
    ] {
        let url = ws_url(&r, bad, &format!("token={}", w.ada.token));
        assert_eq!(refused(&url).await, 400, "{bad}");
    }
    // So is a clientId that is not a tenant id, and an apiKey that is not a key.
    assert_eq!(
        refused(&ws_url(&r, &w.stream, "clientId=..%2Fadmin")).await,
        400
    );
    assert_eq!(
        refused(&ws_url(&r, &w.stream, "apiKey=pk_x%0D%0AX-Evil%3A%201")).await,
        400
    );
    assert_eq!(
        api.take(),
        Vec::<String>::new(),
        "no request left the relay"
    );

    // Another spelling of the stream's UUID is the same stream, sent to the API as the
    // API spells it.
    let upper = w.stream.to_uppercase().replace('-', "");
    let mut ada = connect(&r, &upper, &w.ada).await;
    let mut bob = connect(&r, &w.stream, &w.bob).await;
    frame(&mut ada).await;
    frame(&mut bob).await;
    assert_eq!(
        api.take(),
        vec![format!("GET /api/streams/{}/chat?limit=50", w.stream); 2]
    );
    say(&mut ada, "same room").await;
    assert_eq!(texts(&mut bob, 1).await, ["same room"]);
    let stored = frame_of(&mut ada, "message").await["message"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    api.take();

    // Message ids in delete frames: anything but a UUID is an error frame, no request.
    for bad in [
        json!("../../users/me"),
        json!(format!("{stored}?x=1")),
        json!(format!("{stored}/..")),
        json!(""),
    ] {
        ada.send(Message::Text(
            json!({"type": "delete", "id": bad}).to_string().into(),
        ))
        .await
        .unwrap();
        let err = frame_of(&mut ada, "error").await;
        assert_eq!(
            (err["code"].as_str(), err["status"].as_i64()),
            (Some("invalid_id"), Some(400)),
            "{bad}: {err}"
        );
    }
    for bad in [json!(7), json!(null)] {
        ada.send(Message::Text(
            json!({"type": "delete", "id": bad}).to_string().into(),
        ))
        .await
        .unwrap();
        assert_eq!(frame_of(&mut ada, "error").await["code"], "bad_frame");
    }
    assert_eq!(
        api.take(),
        Vec::<String>::new(),
        "no request left the relay"
    );

    // A real id goes out in the API's spelling, and the deletion reaches the room.
    ada.send(Message::Text(
        json!({"type": "delete", "id": stored.to_uppercase()})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    assert_eq!(frame_of(&mut bob, "deleted").await["id"], stored.as_str());
    assert_eq!(
        api.take(),
        vec![format!("DELETE /api/streams/{}/chat/{stored}", w.stream)]
    );
}

fn mint(user: &User, tenant: &Tenant, now: i64, ttl: i64) -> String {
    let claims = domain::jwt::UserClaims {
        sub: user.id.clone(),
        tid: tenant.client_id.clone(),
        jti: format!("minted-{now}-{ttl}"),
        tv: 0,
        sid: None,
        aud: None,
    };
    domain::jwt::sign(JWT.as_bytes(), &claims, now, ttl)
}

async fn send_auth(ws: &mut Ws, token: &str) -> Value {
    ws.send(Message::Text(
        json!({"type": "auth", "token": token}).to_string().into(),
    ))
    .await
    .unwrap();
    loop {
        let f = frame(ws).await;
        if f["type"] == "authenticated" || f["type"] == "error" {
            return f;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_socket_refreshes_its_token_and_an_expired_one_reads_but_cannot_post() {
    let w = world().await;
    let r = relay(&w.p).await;
    let now = domain::time::now();
    // Ada's socket opens with a token that expires in two seconds.
    let short = mint(&w.ada, &w.t, now, 2);
    let mut ada = connect_url(&ws_url(&r, &w.stream, &format!("token={short}"))).await;
    let mut bob = connect(&r, &w.stream, &w.bob).await;
    frame(&mut ada).await;
    frame(&mut bob).await;
    say(&mut ada, "while fresh").await;
    let fresh_id = frame_of(&mut bob, "message").await["message"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    while domain::time::now() < now + 2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Expired: posting and deleting answer token_expired and store nothing...
    say(&mut ada, "after expiry").await;
    let err = frame_of(&mut ada, "error").await;
    assert_eq!(
        (err["code"].as_str(), err["status"].as_i64()),
        (Some("token_expired"), Some(401)),
        "{err}"
    );
    ada.send(Message::Text(
        json!({"type": "delete", "id": fresh_id}).to_string().into(),
    ))
    .await
    .unwrap();
    assert_eq!(frame_of(&mut ada, "error").await["code"], "token_expired");
    // ...but the socket keeps reading.
    say(&mut bob, "still reading?").await;
    assert_eq!(texts(&mut ada, 1).await, ["still reading?"]);
    assert_eq!(texts(&mut bob, 1).await, ["still reading?"]);
    assert_eq!(rest_history(&w, &w.stream).await.len(), 2);

    // Refusals keep the old credential: garbage, a foreign signature, an expired token,
    // another user's token, and a token of another tenant.
    let other_tenant = w.p.register_client("Other").await;
    let eve = w.p.signup(&other_tenant, "eve").await;
    let foreign = domain::jwt::sign(
        b"another-secret-entirely-0123456789",
        &domain::jwt::UserClaims {
            sub: w.ada.id.clone(),
            tid: w.t.client_id.clone(),
            jti: "f".into(),
            tv: 0,
            sid: None,
            aud: None,
        },
        now,
        3600,
    );
    for (token, code) in [
        ("not-a-jwt", "invalid_token"),
        (foreign.as_str(), "invalid_token"),
        (
            mint(&w.ada, &w.t, now - 7200, 3600).as_str(),
            "token_expired",
        ),
        (w.bob.token.as_str(), "token_mismatch"),
        (eve.token.as_str(), "token_mismatch"),
    ] {
        let answer = send_auth(&mut ada, token).await;
        assert_eq!(
            (answer["type"].as_str(), answer["code"].as_str()),
            (Some("error"), Some(code)),
            "{answer}"
        );
        say(&mut ada, "not yet").await;
        assert_eq!(frame_of(&mut ada, "error").await["code"], "token_expired");
    }

    // A fresh token of the same user, from the platform's own refresh endpoint.
    let (status, refreshed) =
        w.p.as_client(&w.t, Method::POST, "/api/users/refresh")
            .send_json(&json!({"refreshToken": w.ada.refresh_token}))
            .await;
    assert_eq!(status, 200, "{refreshed}");
    let fresh = refreshed["token"].as_str().unwrap();
    let answer = send_auth(&mut ada, fresh).await;
    assert_eq!(answer["type"], "authenticated", "{answer}");
    assert_eq!(answer["userId"], w.ada.id.as_str());
    assert!(answer["expiresAt"].as_str().unwrap().ends_with('Z'));
    say(&mut ada, "refreshed").await;
    let record = frame_of(&mut bob, "message").await["message"].clone();
    assert_eq!(
        (record["message"].as_str(), record["senderId"].as_str()),
        (Some("refreshed"), Some(w.ada.id.as_str()))
    );
    let metrics = metrics_of(&r).await;
    assert_eq!(metric(&metrics, "chat_relay_auth_frames_total"), 6);
    assert_eq!(metric(&metrics, "chat_relay_auth_refused_total"), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_socket_signs_in_with_a_token_of_its_tenant() {
    let w = world().await;
    let r = relay(&w.p).await;
    let mut viewer = connect_read_only(&r, &w.stream, &w.t).await;
    let mut by_key = connect_url(&ws_url(&r, &w.stream, &format!("apiKey={}", w.t.api_key))).await;
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    for ws in [&mut viewer, &mut by_key, &mut ada] {
        assert_eq!(frame(ws).await["type"], "history");
    }

    // A user of another tenant cannot sign in: refused locally for a tenant-named
    // socket, by the API for a key-named one; both stay read-only.
    let other = w.p.register_client("Other").await;
    let eve = w.p.signup(&other, "eve").await;
    let answer = send_auth(&mut viewer, &eve.token).await;
    assert_eq!(answer["code"], "token_mismatch", "{answer}");
    let answer = send_auth(&mut by_key, &eve.token).await;
    assert_eq!(
        (answer["type"].as_str(), answer["status"].as_i64()),
        (Some("error"), Some(404)),
        "{answer}"
    );
    for ws in [&mut viewer, &mut by_key] {
        say(ws, "let me in").await;
        assert_eq!(frame_of(ws, "error").await["code"], "read_only");
    }

    // Bob signs in on the tenant-named socket, and chats as himself.
    let answer = send_auth(&mut viewer, &w.bob.token).await;
    assert_eq!(
        (answer["type"].as_str(), answer["userId"].as_str()),
        (Some("authenticated"), Some(w.bob.id.as_str())),
        "{answer}"
    );
    say(&mut viewer, "signed in").await;
    let record = frame_of(&mut ada, "message").await["message"].clone();
    assert_eq!(
        (record["message"].as_str(), record["senderId"].as_str()),
        (Some("signed in"), Some(w.bob.id.as_str()))
    );
    assert_eq!(texts(&mut viewer, 1).await, ["signed in"]);
    // Once signed in, the socket is Bob's: Ada's token does not take it over.
    assert_eq!(
        send_auth(&mut viewer, &w.ada.token).await["code"],
        "token_mismatch"
    );
    // The key-named socket signs in too, as Ada.
    assert_eq!(
        send_auth(&mut by_key, &w.ada.token).await["type"],
        "authenticated"
    );
    say(&mut by_key, "me too").await;
    assert_eq!(texts(&mut viewer, 1).await, ["me too"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_are_capped_per_client_and_per_process_before_the_handshake() {
    let w = world().await;
    let api = ApiRecorder::start(&w.p.base).await;
    let mut cfg = Config::new(&api.url(), JWT, RELAY);
    cfg.max_connections_per_ip = 2;
    cfg.max_connections = 3;
    let r = relay_with(cfg).await;
    let url = ws_url(&r, &w.stream, &format!("token={}", w.ada.token));
    let mut first = connect_url(&url).await;
    let _second = connect_url(&url).await;
    frame(&mut first).await;
    api.take();
    // The third from the same address is refused with 429, before authentication (no
    // token needed to be refused) and without a request to the API.
    assert_eq!(try_connect(&url, &[]).await.err(), Some(429));
    assert_eq!(refused(&ws_url(&r, &w.stream, "")).await, 429);
    // A forwarded-for header is not believed unless configured.
    assert_eq!(
        try_connect(&url, &[("x-forwarded-for", "198.51.100.1")])
            .await
            .err(),
        Some(429)
    );
    assert_eq!(api.take(), Vec::<String>::new());
    // A closed socket gives its place back.
    first.close(None).await.unwrap();
    let deadline = Instant::now() + WAIT;
    while r.relay().connections_held() > 1 {
        assert!(Instant::now() < deadline, "the place was never given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _third = connect_url(&url).await;
    let metrics = metrics_of(&r).await;
    assert_eq!(metric(&metrics, "chat_relay_refused_per_ip_total"), 3);
    assert_eq!(metric(&metrics, "chat_relay_refused_capacity_total"), 0);

    // Behind a trusted proxy, clients are told apart by the last X-Forwarded-For hop;
    // the process cap holds across them (503).
    let mut cfg = config(&w.p);
    cfg.max_connections_per_ip = 2;
    cfg.max_connections = 3;
    cfg.trust_forwarded_for = true;
    let r = relay_with(cfg).await;
    let url = ws_url(&r, &w.stream, &format!("token={}", w.ada.token));
    let from = |ip: &'static str| [("x-forwarded-for", ip)];
    let mut held = Vec::new();
    for hops in ["203.0.113.1", "6.6.6.6, 203.0.113.1"] {
        held.push(try_connect(&url, &from(hops)).await.expect("upgraded"));
    }
    assert_eq!(
        try_connect(&url, &from("203.0.113.1")).await.err(),
        Some(429),
        "the last hop is the client"
    );
    held.push(
        try_connect(&url, &from("203.0.113.1, 203.0.113.2"))
            .await
            .expect("another client"),
    );
    assert_eq!(
        try_connect(&url, &from("203.0.113.3")).await.err(),
        Some(503),
        "the process is full"
    );
    let metrics = metrics_of(&r).await;
    assert_eq!(metric(&metrics, "chat_relay_refused_per_ip_total"), 1);
    assert_eq!(metric(&metrics, "chat_relay_refused_capacity_total"), 1);
    assert_eq!(r.relay().connections_held(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_allowed_origins_open_sockets() {
    let w = world().await;
    let api = ApiRecorder::start(&w.p.base).await;
    let mut cfg = Config::new(&api.url(), JWT, RELAY);
    cfg.allowed_origins
        .extend_from_list("https://live.example.com")
        .unwrap();
    let r = relay_with(cfg).await;
    let url = ws_url(&r, &w.stream, &format!("token={}", w.ada.token));
    for origin in [
        "https://evil.example",
        "http://live.example.com",
        "https://live.example.com.evil.example",
        "null",
    ] {
        assert_eq!(
            try_connect(&url, &[("origin", origin)]).await.err(),
            Some(403),
            "{origin}"
        );
    }
    assert_eq!(
        api.take(),
        Vec::<String>::new(),
        "refused before any request"
    );
    assert!(
        try_connect(&url, &[("origin", "https://live.example.com")])
            .await
            .is_ok()
    );
    assert!(
        try_connect(&url, &[]).await.is_ok(),
        "no Origin: not a browser"
    );
    let metrics = metrics_of(&r).await;
    assert_eq!(metric(&metrics, "chat_relay_refused_origin_total"), 4);

    // Without a list only clients without an Origin get in; `*` lets any in.
    let r = relay(&w.p).await;
    let url = ws_url(&r, &w.stream, &format!("token={}", w.ada.token));
    assert_eq!(
        try_connect(&url, &[("origin", "https://live.example.com")])
            .await
            .err(),
        Some(403)
    );
    let mut cfg = config(&w.p);
    cfg.allowed_origins = AllowedOrigins::any();
    let r = relay_with(cfg).await;
    let url = ws_url(&r, &w.stream, &format!("token={}", w.ada.token));
    assert!(
        try_connect(&url, &[("origin", "https://anywhere.example")])
            .await
            .is_ok()
    );
}

/// The platform with a tenant, Ada, and a broadcast (its id, short id and streamId),
/// started with `variables`.
struct Embedded {
    p: Platform,
    ada: User,
    id: String,
    short: String,
    stream: String,
}

async fn embedded_world(variables: &[(&str, &str)]) -> Embedded {
    let p = Platform::start_with(variables).await;
    let t = p.register_client("Acme").await;
    let ada = p.signup(&t, "ada").await;
    let (status, b) = p
        .as_user(&ada, Method::POST, "/api/broadcasts")
        .send_json(&json!({"title": "Embedded"}))
        .await;
    assert_eq!(status, 200, "{b}");
    let short = b["watchUrl"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    Embedded {
        id: b["id"].as_str().unwrap().to_string(),
        stream: b["streamId"].as_str().unwrap().to_string(),
        p,
        ada,
        short,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn edgehost_embeds_the_relay_with_its_internal_endpoint_on_its_own_loopback_port() {
    let Embedded {
        p, ada, id, stream, ..
    } = embedded_world(&[("base_url", "https://live.example.com")]).await;
    let internal = p.relay_internal_addr();
    assert!(internal.ip().is_loopback());
    assert_ne!(internal.port(), p.addr().port());
    assert_eq!(
        p.variable("relay_url").as_deref(),
        Some(format!("http://{internal}").as_str()),
        "relay_url defaults to the embedded relay's internal endpoint"
    );
    let secret = p.variable("relay_secret").unwrap();

    let ws_url = format!(
        "ws://{}/ws/streams/{stream}/chat?token={}",
        p.addr(),
        ada.token
    );
    let mut ws = connect_url(&ws_url).await;
    assert_eq!(frame(&mut ws).await["type"], "history");
    say(&mut ws, "same port").await;
    assert_eq!(texts(&mut ws, 1).await, ["same port"]);

    // The public port does not route /internal/, whatever the secret; the internal
    // listener does.
    let event = json!({"kind": "layout", "layout": "grid2x2"});
    assert_eq!(
        post_event(p.addr(), &stream, Some(&secret), &event).await,
        404
    );
    assert_eq!(
        post_event(internal, &stream, Some("wrong"), &event).await,
        401
    );
    assert_eq!(
        post_event(internal, &stream, Some(&secret), &event).await,
        202
    );
    assert_eq!(frame(&mut ws).await["event"]["kind"], "layout");
    assert_eq!(http_get(p.addr(), "/metrics").await.0, 404);
    assert_eq!(http_get(internal, "/metrics").await.0, 200);

    // The API reaches the relay at relay_url: a status change made over REST shows live.
    let (status, _) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    assert_eq!(status, 200);
    let e = frame_of(&mut ws, "event").await["event"].clone();
    assert_eq!(
        (e["kind"].as_str(), e["status"].as_str()),
        (Some("status"), Some("active"))
    );

    // Browsers: the app's base_url origin and edgehost's own address get in, others not.
    for origin in [
        "https://live.example.com".to_string(),
        format!("http://{}", p.addr()),
        format!("http://localhost:{}", p.addr().port()),
    ] {
        assert!(
            try_connect(&ws_url, &[("origin", &origin)]).await.is_ok(),
            "{origin}"
        );
    }
    assert_eq!(
        try_connect(&ws_url, &[("origin", "https://evil.example")])
            .await
            .err(),
        Some(403)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pages_read_only_sockets_work_from_the_platforms_own_origin() {
    let Embedded {
        p,
        ada,
        id,
        short,
        stream,
    } = embedded_world(&[]).await;
    let mut browser = browser::Browser::launch(&[]).await;
    let tab = browser
        .open(&p.url(&format!("/watch/{short}")), 1280, 720)
        .await;
    browser
        .wait_for(
            &tab,
            "document.getElementById('chat-state').textContent === 'Chat connected'",
            WAIT,
        )
        .await;
    // A message sent over a user socket reaches the page's read-only one...
    let mut ws = connect_url(&format!(
        "ws://{}/ws/streams/{stream}/chat?token={}",
        p.addr(),
        ada.token
    ))
    .await;
    frame(&mut ws).await;
    say(&mut ws, "hello, page").await;
    let shown = browser
        .wait_for(
            &tab,
            "Array.from(document.querySelectorAll('#chat li')).map(li => li.textContent).join('|')",
            WAIT,
        )
        .await;
    assert!(shown.as_str().unwrap().ends_with("hello, page"), "{shown}");
    // The page asks for batch frames: a burst of messages (pushed as the API pushes REST
    // posts) that shares a frame shows every message, in order. (The room batches what
    // arrives within its window; a burst is repeated until one did share a frame, which the
    // relay's counters tell: the user's socket takes one frame per event, the page fewer.)
    let metrics_url = "/metrics";
    let counts = |text: &str| {
        (
            metric(text, "chat_relay_messages_out_total"),
            metric(text, "chat_relay_frames_out_total"),
        )
    };
    let internal = p.relay_internal_addr();
    let secret = p.variable("relay_secret").unwrap();
    let mut batched = false;
    for round in 0..5 {
        let (_, before) = http_get(internal, metrics_url).await;
        let burst: Vec<String> = (0..6).map(|i| format!("burst {round}.{i}")).collect();
        for text in &burst {
            let record = json!({"id": domain::ids::uuid(), "message": text, "senderName": "ada"});
            let event = json!({"kind": "chat_message", "message": record});
            assert_eq!(
                post_event(internal, &stream, Some(&secret), &event).await,
                202
            );
        }
        for _ in &burst {
            frame_of(&mut ws, "message").await;
        }
        // The page's last lines are the burst's, in order (each line starts with its sender).
        browser
            .wait_for(
                &tab,
                &format!(
                    "(() => {{ const want = {}; \
                       const got = Array.from(document.querySelectorAll('#chat li')).map(li => li.textContent).slice(-want.length); \
                       return got.length === want.length && got.every((line, i) => line.endsWith(want[i])); }})()",
                    serde_json::to_string(&burst).unwrap()
                ),
                WAIT,
            )
            .await;
        let (_, after) = http_get(internal, metrics_url).await;
        let ((events0, frames0), (events1, frames1)) = (counts(&before), counts(&after));
        if frames1 - frames0 < events1 - events0 {
            batched = true;
            break;
        }
    }
    assert!(batched, "no burst ever shared a frame");
    // ...and so does a status change made over REST (through relay_url).
    let (status, _) = p
        .as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    browser
        .wait_for(
            &tab,
            "document.getElementById('watch').dataset.status === 'ended'",
            WAIT,
        )
        .await;
    browser.assert_clean(&tab).await;

    // The recording page subscribes the same way: a layout event re-flows it.
    let record = browser
        .open(&p.url(&format!("/streams/{stream}/record")), 1280, 720)
        .await;
    let layout = json!({"kind": "layout", "layout": "grid3x3"});
    // The socket opens asynchronously: push until the page has it.
    let deadline = Instant::now() + WAIT;
    loop {
        assert_eq!(
            post_event(internal, &stream, Some(&secret), &layout).await,
            202
        );
        let now = browser.eval(&record, "recordPage.report().layout").await;
        if now == "grid3x3" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the recording page never re-flowed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    browser.assert_clean(&record).await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rest_changes_reach_the_sockets_as_events() {
    // A standalone relay whose internal address is known first, so that the platform's
    // relay_url can name it: set explicitly, it wins over edgehost's embedded relay.
    let (public, internal) = (loopback_listener().await, loopback_listener().await);
    let relay_url = format!("http://{}", internal.local_addr().unwrap());
    let p = Platform::start_with(&[
        ("jwt_secret", JWT),
        ("relay_secret", RELAY),
        ("relay_url", &relay_url),
    ])
    .await;
    assert_eq!(p.variable("relay_url"), Some(relay_url.clone()));
    let r = chat_relay::serve(Relay::new(config(&p)), public, internal).unwrap();
    let t = p.register_client("Acme").await;
    let (ada, bob) = (p.signup(&t, "ada").await, p.signup(&t, "bob").await);
    let (_, b) = p
        .as_user(&ada, Method::POST, "/api/streaming/sessions")
        .send_json(&json!({"title": "Live"}))
        .await;
    let (id, stream) = (b["id"].as_str().unwrap(), b["streamId"].as_str().unwrap());
    let mut ws = connect(&r, stream, &bob).await;
    frame_of(&mut ws, "history").await;

    let expect_event = |f: Value| f["event"].clone();
    p.as_user(&ada, Method::POST, &format!("/api/broadcasts/{id}/status"))
        .send_json(&json!({"status": "active"}))
        .await;
    let e = expect_event(frame_of(&mut ws, "event").await);
    assert_eq!(
        (e["kind"].as_str(), e["status"].as_str()),
        (Some("status"), Some("active"))
    );

    p.as_user(
        &ada,
        Method::POST,
        &format!("/api/broadcasts/{id}/viewer-count"),
    )
    .send_json(&json!({"viewerCount": 12}))
    .await;
    let e = expect_event(frame_of(&mut ws, "event").await);
    assert_eq!(
        (e["kind"].as_str(), e["viewerCount"].as_i64()),
        (Some("viewers"), Some(12))
    );

    p.as_user(
        &bob,
        Method::POST,
        &format!("/api/v1/sessions/{id}/reactions"),
    )
    .send_json(&json!({"reaction": "heart"}))
    .await;
    let e = expect_event(frame_of(&mut ws, "event").await);
    assert_eq!(
        (e["kind"].as_str(), e["reaction"].as_str()),
        (Some("reaction"), Some("heart"))
    );

    let (status, joined) = p
        .as_user(
            &bob,
            Method::POST,
            &format!("/api/streaming/sessions/{id}/join-cohost"),
        )
        .send_json(&json!({"userName": "Bob"}))
        .await;
    assert_eq!(status, 200, "{joined}");
    let e = expect_event(frame_of(&mut ws, "event").await);
    assert_eq!(
        (e["kind"].as_str(), e["action"].as_str()),
        (Some("cohost"), Some("requested"))
    );
    assert_eq!(e["coHost"]["userId"], bob.id.as_str());
    let request = joined["coHost"]["id"].as_str().unwrap();
    let (status, approved) = p
        .as_user(
            &ada,
            Method::POST,
            &format!("/api/streaming/sessions/{id}/cohosts/{request}/approve"),
        )
        .send_json(&json!({}))
        .await;
    assert_eq!(status, 200, "{approved}");
    let e = expect_event(frame_of(&mut ws, "event").await);
    assert_eq!(
        (e["kind"].as_str(), e["action"].as_str()),
        (Some("cohost"), Some("approved"))
    );
    assert_eq!(e["coHost"]["status"], "active");
}

/// The platform behind TLS on loopback, as `https://localhost:PORT`, with a certificate
/// issued by a certificate authority of the test's own (its PEM in `dir/ca.pem`): what an
/// app served only over TLS (Fermyon Wasm Functions) looks like to the relay.
async fn behind_tls(
    app: std::net::SocketAddr,
    dir: &std::path::Path,
) -> (String, std::path::PathBuf) {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let ca = platform_tests::tls::TestCa::new("relay test CA", &["localhost"]);
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &ca.ca_pem).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![ca.cert_der.clone().into()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ca.key_der.clone())),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = loopback_listener().await;
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(app).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (format!("https://localhost:{port}"), ca_file)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_relay_talks_to_an_api_served_over_tls() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let (https, ca_file) = behind_tls(w.p.addr(), dir.path()).await;

    // Without the CA the relay refuses the certificate: the socket is refused with 502
    // (the API unreachable), not opened on an unverified connection.
    let r = relay_with(Config::new(&https, JWT, RELAY)).await;
    let url = ws_url(&r, &w.stream, &format!("token={}", w.ada.token));
    assert_eq!(refused(&url).await, 502);

    // Trusting it (API_CA_FILE), history, posts and their delivery work over TLS.
    let mut config = Config::new(&https, JWT, RELAY);
    let ca = ca_file.display().to_string();
    config
        .read_env(|name| (name == "API_CA_FILE").then(|| ca.clone()))
        .unwrap();
    let r = relay_with(config).await;
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    assert_eq!(frame(&mut ada).await["type"], "history");
    say(&mut ada, "over TLS").await;
    let mine = frame_of(&mut ada, "message").await;
    assert_eq!(mine["message"]["message"], "over TLS", "{mine}");
    let stored = rest_history(&w, &w.stream).await;
    assert_eq!(stored.last().unwrap()["message"], "over TLS");
}
