//! The WebSocket chat relay.
//!
//! `GET /ws/streams/{id}/chat[?token=JWT]` upgrades to a WebSocket of JSON text frames:
//! the server sends `{"type":"history","messages":[...]}` on connect, then
//! `{"type":"message","message":{record}}`, `{"type":"deleted","id":...}` and
//! `{"type":"event","event":{...}}`; a client sends `{"type":"message","message":"text"}`
//! or `{"type":"delete","id":...}`. Each message is stored through the platform's chat API
//! before the stored record is fanned out; failures answer the sender
//! `{"type":"error","code":...,"message":...}` and nothing is fanned out.
//!
//! Also: `POST /internal/streams/{id}/events` (header `X-Relay-Secret`) fans an event out,
//! `GET /healthz`, and Prometheus text on `GET /metrics`. With a Redis URL, instances share
//! every frame over Redis pub/sub (see [`bus`]).
//!
//! [`Relay::handle`] serves one hyper request, so the relay runs alone ([`serve`]) or
//! inside another hyper server (edgehost routes `/ws/` and `/internal/` to it).

pub mod api;
pub mod bus;
pub mod hub;
pub mod metrics;
mod session;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue, SEC_WEBSOCKET_ACCEPT, UPGRADE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use api::{Caller, ChatApi};
use hub::Hub;
use metrics::{Metrics, inc};

/// The response body type (the same as edgehost's `WebSocketBody`).
pub type Body = BoxBody<Bytes, anyhow::Error>;

/// How the relay runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the platform's API is, e.g. `http://127.0.0.1:3000`.
    pub api_url: String,
    /// The HS256 secret of user tokens.
    pub jwt_secret: String,
    /// The secret shared with the API (`X-Relay-Secret`).
    pub relay_secret: String,
    /// Redis for scale-out; `None` runs alone.
    pub redis_url: Option<String>,
    /// Frames a socket may have queued before it is disconnected as too slow.
    pub queue_capacity: usize,
    /// How often the server pings each socket.
    pub ping_interval: Duration,
    /// A socket silent (no frame, no pong) for this long is closed.
    pub idle_timeout: Duration,
    /// Messages of history sent on connect.
    pub history_limit: u32,
}

impl Config {
    pub fn new(api_url: &str, jwt_secret: &str, relay_secret: &str) -> Config {
        Config {
            api_url: api_url.to_string(),
            jwt_secret: jwt_secret.to_string(),
            relay_secret: relay_secret.to_string(),
            redis_url: None,
            queue_capacity: 256,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            history_limit: 50,
        }
    }
}

/// A relay instance: its rooms, its API client, its Redis link. Cheap to clone.
#[derive(Clone)]
pub struct Relay(Arc<Inner>);

struct Inner {
    config: Config,
    api: ChatApi,
    hub: Arc<Hub>,
    metrics: Arc<Metrics>,
    bus: Option<Arc<bus::Bus>>,
    bus_task: Option<JoinHandle<()>>,
    closing: AtomicBool,
    instance: String,
    events: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = &self.bus_task {
            task.abort();
        }
    }
}

impl Relay {
    /// Creates the relay (and starts its Redis link); call inside a tokio runtime.
    pub fn new(config: Config) -> Relay {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let instance = format!(
            "{:x}-{:x}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let metrics = Arc::new(Metrics::default());
        let hub = Arc::new(Hub::new(config.queue_capacity, metrics.clone()));
        let bus = config
            .redis_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .map(|url| Arc::new(bus::Bus::new(url, &instance, metrics.clone())));
        let bus_task = bus.clone().map(|b| tokio::spawn(b.run(hub.clone())));
        Relay(Arc::new(Inner {
            api: ChatApi::new(&config.api_url, &config.relay_secret),
            config,
            hub,
            metrics,
            bus,
            bus_task,
            closing: AtomicBool::new(false),
            instance,
            events: AtomicU64::new(0),
        }))
    }

    pub fn config(&self) -> &Config {
        &self.0.config
    }

    /// The Prometheus text of `/metrics`.
    pub fn metrics_text(&self) -> String {
        self.0
            .metrics
            .render(self.0.hub.room_count(), self.0.bus.is_some())
    }

    /// "disabled", "connected" or "disconnected".
    pub fn redis_state(&self) -> &'static str {
        match &self.0.bus {
            None => "disabled",
            Some(b) if b.is_up() => "connected",
            Some(_) => "disconnected",
        }
    }

    /// Closes every socket and stops the Redis link.
    pub fn close(&self) {
        self.0.closing.store(true, Ordering::SeqCst);
        self.0.hub.close_all();
        if let Some(task) = &self.0.bus_task {
            task.abort();
        }
    }

    /// Sends `frame` to every socket of `stream`, on every instance: through Redis when
    /// the link is up (so all instances see one order), else to local sockets directly.
    /// `key` drops duplicates.
    pub async fn dispatch(&self, stream: &str, key: &str, frame: String) {
        if let Some(bus) = &self.0.bus
            && bus.is_up()
            && bus.publish(stream, key, &frame).await
        {
            return;
        }
        self.0.hub.fan_out(stream, Some(key), frame.into());
    }

    /// Serves one request: `/ws/streams/{id}/chat`, `/internal/streams/{id}/events`,
    /// `/healthz`, `/metrics`; anything else 404.
    pub async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        match (req.method(), path.as_str()) {
            (&Method::GET, "/healthz") => json_response(
                StatusCode::OK,
                &json!({"status": "ok", "redis": self.redis_state()}),
            ),
            (&Method::GET, "/metrics") => response(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                self.metrics_text(),
            ),
            _ => {
                if let Some(stream) = stream_of(&path, "/ws/streams/", "/chat") {
                    if req.method() != Method::GET {
                        return problem(
                            StatusCode::METHOD_NOT_ALLOWED,
                            "method_not_allowed",
                            "use GET",
                        );
                    }
                    return self.upgrade(req, stream).await;
                }
                if let Some(stream) = stream_of(&path, "/internal/streams/", "/events") {
                    if req.method() != Method::POST {
                        return problem(
                            StatusCode::METHOD_NOT_ALLOWED,
                            "method_not_allowed",
                            "use POST",
                        );
                    }
                    return self.event(req, stream).await;
                }
                problem(StatusCode::NOT_FOUND, "not_found", "no such route")
            }
        }
    }

    /// Authenticates, loads history, and upgrades.
    async fn upgrade(&self, mut req: Request<Incoming>, stream: String) -> Response<Body> {
        let refuse = |status, code, detail: &str| {
            inc(&self.0.metrics.rejected_upgrades);
            problem(status, code, detail)
        };
        let is_ws =
            header_has(&req, UPGRADE, "websocket") && header_has(&req, CONNECTION, "upgrade");
        let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
            return refuse(
                StatusCode::UPGRADE_REQUIRED,
                "websocket_required",
                "a WebSocket upgrade is required",
            );
        };
        if !is_ws {
            return refuse(
                StatusCode::UPGRADE_REQUIRED,
                "websocket_required",
                "a WebSocket upgrade is required",
            );
        }
        let query: Vec<(String, String)> =
            url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
                .into_owned()
                .collect();
        let param = |name: &str| {
            query
                .iter()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        let bearer = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_string);
        let (caller, user) = if let Some(token) = param("token").or(bearer) {
            let now = common::time::now();
            match common::jwt::verify::<common::jwt::UserClaims>(
                self.0.config.jwt_secret.as_bytes(),
                &token,
                now,
            ) {
                Ok(claims) => (Caller::User { token }, Some(claims)),
                Err(e) => return refuse(StatusCode::UNAUTHORIZED, e.code, &e.detail),
            }
        } else if let Some(client_id) = param("clientId") {
            (Caller::Tenant { client_id }, None)
        } else if let Some(api_key) = param("apiKey") {
            (Caller::ApiKey { api_key }, None)
        } else {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "token_required",
                "connect with ?token=<JWT>, or read-only with ?clientId= or ?apiKey=",
            );
        };
        // Join before reading history so that nothing stored in between is missed; the
        // socket skips queued messages its history already holds.
        let membership = self.0.hub.join(&stream);
        let history = match self
            .0
            .api
            .history(&stream, &caller, self.0.config.history_limit)
            .await
        {
            Ok(h) => h,
            Err(f) => {
                self.0.hub.leave(&stream, membership.id);
                let status = match f.status {
                    401 | 403 | 404 => {
                        StatusCode::from_u16(f.status).unwrap_or(StatusCode::BAD_GATEWAY)
                    }
                    _ => StatusCode::BAD_GATEWAY,
                };
                return refuse(status, &f.code, &f.detail);
            }
        };
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        let on_upgrade = hyper::upgrade::on(&mut req);
        let relay = self.clone();
        tokio::spawn(async move {
            match on_upgrade.await {
                Ok(upgraded) => {
                    session::run(
                        relay,
                        upgraded,
                        stream,
                        caller,
                        user.is_some(),
                        membership,
                        history,
                    )
                    .await
                }
                Err(_) => relay.0.hub.leave(&stream, membership.id),
            }
        });
        let mut resp = Response::new(empty());
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let h = resp.headers_mut();
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        if let Ok(v) = HeaderValue::from_str(&accept) {
            h.insert(SEC_WEBSOCKET_ACCEPT, v);
        }
        resp
    }

    /// `POST /internal/streams/{id}/events`.
    async fn event(&self, req: Request<Incoming>, stream: String) -> Response<Body> {
        let given = req
            .headers()
            .get("x-relay-secret")
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default();
        let expected = self.0.config.relay_secret.as_bytes();
        if expected.is_empty() || !bool::from(given.as_slice().ct_eq(expected)) {
            return problem(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "X-Relay-Secret is missing or wrong",
            );
        }
        let body = match Limited::new(req.into_body(), 64 * 1024).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return problem(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    "events are at most 64 KiB",
                );
            }
        };
        let Ok(event) = serde_json::from_slice::<Value>(&body) else {
            return problem(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                "the body is not JSON",
            );
        };
        let Some(kind) = event.get("kind").and_then(Value::as_str) else {
            return problem(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_event",
                "an event is a JSON object with a string `kind`",
            );
        };
        inc(&self.0.metrics.events_in);
        let (key, frame) = match kind {
            // A message stored through REST: shown live like one sent over a socket.
            "chat_message" => match event["message"]["id"].as_str() {
                Some(id) => (
                    id.to_string(),
                    json!({"type": "message", "message": event["message"]}),
                ),
                None => {
                    return problem(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "invalid_event",
                        "`message.id` is required",
                    );
                }
            },
            // A message deleted through REST.
            "chat_deleted" => match event["id"].as_str() {
                Some(id) => {
                    inc(&self.0.metrics.deletions);
                    (
                        format!("deleted:{id}"),
                        json!({"type": "deleted", "id": id}),
                    )
                }
                None => {
                    return problem(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "invalid_event",
                        "`id` is required",
                    );
                }
            },
            _ => {
                let key = match event.get("id").and_then(Value::as_str) {
                    Some(id) => format!("event:{id}"),
                    None => format!(
                        "event:{}:{}",
                        self.0.instance,
                        self.0.events.fetch_add(1, Ordering::Relaxed)
                    ),
                };
                (key, json!({"type": "event", "event": event}))
            }
        };
        self.dispatch(&stream, &key, frame.to_string()).await;
        json_response(StatusCode::ACCEPTED, &json!({"accepted": true}))
    }
}

/// `prefix{id}suffix` → id, when id looks like a stream id.
fn stream_of(path: &str, prefix: &str, suffix: &str) -> Option<String> {
    let id = path.strip_prefix(prefix)?.strip_suffix(suffix)?;
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    ok.then(|| id.to_ascii_lowercase())
}

fn header_has(req: &Request<Incoming>, name: hyper::header::HeaderName, token: &str) -> bool {
    req.headers().get_all(name).iter().any(|v| {
        v.to_str()
            .map(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            .unwrap_or(false)
    })
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn response(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    response(status, "application/json", body.to_string())
}

fn problem(status: StatusCode, code: &str, detail: &str) -> Response<Body> {
    let body = json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "code": code,
        "detail": detail,
    });
    response(status, "application/problem+json", body.to_string())
}

/// A relay serving its own listener.
pub struct RelayServer {
    relay: Relay,
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl RelayServer {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn relay(&self) -> &Relay {
        &self.relay
    }

    /// Stops accepting, closes every socket and the Redis link.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        self.relay.close();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RelayServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        self.relay.close();
    }
}

/// Serves `relay` on `listener` (HTTP/1.1 with upgrades) until shut down.
pub fn serve(relay: Relay, listener: TcpListener) -> std::io::Result<RelayServer> {
    let local_addr = listener.local_addr()?;
    let (stop, mut stop_rx) = watch::channel(false);
    let r = relay.clone();
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop_rx.wait_for(|s| *s) => break,
            };
            let Ok((stream, _)) = accepted else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let _ = stream.set_nodelay(true);
            let r = r.clone();
            let service = hyper::service::service_fn(move |req| {
                let r = r.clone();
                async move { Ok::<_, std::convert::Infallible>(r.handle(req).await) }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    Ok(RelayServer {
        relay,
        local_addr,
        stop,
        task: Some(task),
    })
}

/// A request handler with the signature of edgehost's `WebSocketHandler`.
pub type Handler = Arc<
    dyn Fn(
            Request<Incoming>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>>
        + Send
        + Sync,
>;

/// A relay embedded in another server whose configuration is known only once that server
/// runs (its address, its resolved secrets): hand [`Embedded::handler`] to the server,
/// then [`Embedded::start`] the relay. Until then requests answer 503.
#[derive(Clone, Default)]
pub struct Embedded {
    cell: Arc<std::sync::OnceLock<Relay>>,
}

impl Embedded {
    pub fn new() -> Embedded {
        Embedded::default()
    }

    /// The handler to install (edgehost: `Options::websocket`).
    pub fn handler(&self) -> Handler {
        let cell = self.cell.clone();
        Arc::new(move |req| {
            let relay = cell.get().cloned();
            Box::pin(async move {
                match relay {
                    Some(relay) => relay.handle(req).await,
                    None => problem(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "relay_starting",
                        "the chat relay is starting",
                    ),
                }
            })
        })
    }

    /// Starts the relay with `config`; a second call answers the first relay.
    pub fn start(&self, config: Config) -> Relay {
        self.cell.get_or_init(|| Relay::new(config)).clone()
    }

    /// The running relay, if started.
    pub fn relay(&self) -> Option<Relay> {
        self.cell.get().cloned()
    }
}
