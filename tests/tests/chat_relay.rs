//! The chat relay end to end: real WebSocket clients, relay servers in-process pointing at
//! the real platform (edgehost running the wasm API), and a real `redis-server` for
//! scale-out.

use chat_relay::{Config, Relay, RelayServer};
use futures_util::{SinkExt, StreamExt};
use platform_tests::{Exchange, Method, Platform, Tenant, User};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const JWT: &str = "chat-relay-test-jwt-secret-0123456789abcdef";
const RELAY: &str = "chat-relay-test-relay-secret-0123456789";
const WAIT: Duration = Duration::from_secs(10);

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

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

async fn relay_with(config: Config) -> RelayServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    chat_relay::serve(Relay::new(config), listener).unwrap()
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

async fn connect_url(url: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("WebSocket connects");
    ws
}

/// The HTTP status a refused upgrade answered.
async fn refused(url: &str) -> u16 {
    match tokio_tungstenite::connect_async(url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Ok(_) => panic!("{url} was upgraded"),
        Err(e) => panic!("{url}: {e}"),
    }
}

/// The next JSON frame (pings are answered by the client library and skipped).
async fn frame(ws: &mut Ws) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next())
            .await
            .expect("a frame in time")
            .expect("the socket is open")
            .expect("a valid frame");
        if let Message::Text(t) = msg {
            return serde_json::from_str(&t).expect("JSON frame");
        }
    }
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
    let now = common::time::now();
    let claims = common::jwt::UserClaims {
        sub: w.ada.id.clone(),
        tid: w.t.client_id.clone(),
        jti: "j".into(),
        tv: 0,
    };
    let expired = common::jwt::sign(JWT.as_bytes(), &claims, now - 7200, 3600);
    let foreign = common::jwt::sign(b"another-secret-entirely-0123456789", &claims, now, 3600);
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
    let (_, metrics) = http_get(r.local_addr(), "/metrics").await;
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
    let (_, metrics) = http_get(r.local_addr(), "/metrics").await;
    assert_eq!(metric(&metrics, "chat_relay_persistence_failures_total"), 3);
    assert_eq!(metric(&metrics, "chat_relay_messages_stored_total"), 10);
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_sockets_get_history_and_messages_but_cannot_send() {
    let w = world().await;
    let r = relay(&w.p).await;
    let mut viewer = connect_url(&ws_url(
        &r,
        &w.stream,
        &format!("clientId={}", w.t.client_id),
    ))
    .await;
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
        post_event(r.local_addr(), &w.stream, None, &event).await,
        401
    );
    assert_eq!(
        post_event(r.local_addr(), &w.stream, Some("wrong"), &event).await,
        401
    );
    assert_eq!(
        post_event(
            r.local_addr(),
            &w.stream,
            Some(RELAY),
            &json!({"no": "kind"})
        )
        .await,
        422
    );
    assert_eq!(
        post_event(r.local_addr(), &w.stream, Some(RELAY), &event).await,
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
            r.local_addr(),
            &w.stream,
            Some(RELAY),
            &json!({"kind": "test", "n": sent, "pad": big}),
        )
        .await;
        assert_eq!(status, 202);
        sent += 1;
        if sent % 20 == 0 {
            metrics = http_get(r.local_addr(), "/metrics").await.1;
            if metric(&metrics, "chat_relay_dropped_slow_clients_total") == 1 {
                break;
            }
        }
    }
    let last = json!({"kind": "test", "n": sent, "last": true});
    assert_eq!(
        post_event(r.local_addr(), &w.stream, Some(RELAY), &last).await,
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

/// A `redis-server` of this test's own on a free port, without persistence.
struct Redis {
    port: u16,
    child: Option<std::process::Child>,
}

impl Redis {
    async fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = Redis { port, child: None };
        r.launch().await;
        r
    }

    async fn launch(&mut self) {
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", self.port)).await.is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
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
            a.local_addr(),
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
    let (_, metrics) = http_get(a.local_addr(), "/metrics").await;
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
async fn healthz_and_metrics() {
    let w = world().await;
    let r = relay(&w.p).await;
    let (status, health) = http_get(r.local_addr(), "/healthz").await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&health).unwrap(),
        json!({"status": "ok", "redis": "disabled"})
    );
    let mut ada = connect(&r, &w.stream, &w.ada).await;
    let mut bob = connect(&r, &w.stream, &w.bob).await;
    frame(&mut ada).await;
    frame(&mut bob).await;
    say(&mut ada, "count me").await;
    texts(&mut bob, 1).await;
    let (status, m) = http_get(r.local_addr(), "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(metric(&m, "chat_relay_connections"), 2);
    assert_eq!(metric(&m, "chat_relay_rooms"), 1);
    assert_eq!(metric(&m, "chat_relay_messages_in_total"), 1);
    assert_eq!(metric(&m, "chat_relay_messages_out_total"), 2);
    assert_eq!(metric(&m, "chat_relay_redis_state"), 0);
    assert!(m.contains("# TYPE chat_relay_dropped_slow_clients_total counter"));
    assert_eq!(http_get(r.local_addr(), "/nope").await.0, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn edgehost_embeds_the_relay_on_its_own_port() {
    let manifest = platform_tests::workspace_root().join("spin.toml");
    tokio::task::block_in_place(|| platform_tests::build_once(&manifest));
    let state = tempfile::tempdir().unwrap();
    let embedded = chat_relay::Embedded::new();
    let server = edgehost::Server::start(edgehost::Options {
        manifest,
        listen: "127.0.0.1:0".parse().unwrap(),
        state_dir: Some(state.path().to_path_buf()),
        websocket: Some(embedded.handler()),
        ..Default::default()
    })
    .await
    .unwrap();
    let base = format!("http://{}", server.local_addr());
    let var = |n: &str| server.variable(n).unwrap_or_default().to_string();
    embedded.start(Config::new(&base, &var("jwt_secret"), &var("relay_secret")));

    let client = reqwest::Client::new();
    let reg: Value = client
        .post(format!("{base}/api/admin/sdk-clients"))
        .json(&json!({"name": "Acme", "contactEmail": "dev@example.com", "agreeTerms": true, "agreeDataProcessing": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let api_key = reg["apiKey"].as_str().unwrap();
    let signup: Value = client
        .post(format!("{base}/api/users/signup"))
        .header("x-api-key", api_key)
        .json(&json!({"username": "ada", "email": "ada@example.com", "password": "correct horse battery"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = signup["token"].as_str().unwrap();
    let b: Value = client
        .post(format!("{base}/api/broadcasts"))
        .header("x-api-key", api_key)
        .bearer_auth(token)
        .json(&json!({"title": "Embedded"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stream = b["streamId"].as_str().unwrap();

    let mut ws = connect_url(&format!(
        "ws://{}/ws/streams/{stream}/chat?token={token}",
        server.local_addr()
    ))
    .await;
    assert_eq!(frame(&mut ws).await["type"], "history");
    say(&mut ws, "same port").await;
    assert_eq!(texts(&mut ws, 1).await, ["same port"]);
    let status = post_event(
        server.local_addr(),
        stream,
        Some(&var("relay_secret")),
        &json!({"kind": "layout"}),
    )
    .await;
    assert_eq!(status, 202);
    assert_eq!(frame(&mut ws).await["event"]["kind"], "layout");
    drop(ws);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn rest_changes_reach_the_sockets_as_events() {
    // The relay's address is known first, so the platform can be pointed at it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_url = format!("http://{}", listener.local_addr().unwrap());
    let p = Platform::start_with(&[
        ("jwt_secret", JWT),
        ("relay_secret", RELAY),
        ("relay_url", &relay_url),
    ])
    .await;
    let r = chat_relay::serve(Relay::new(config(&p)), listener).unwrap();
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
