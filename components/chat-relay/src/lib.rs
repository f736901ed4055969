//! The WebSocket chat relay.
//!
//! Two listeners. The public one serves `GET /ws/streams/{id}/chat[?token=JWT]`, which
//! upgrades to a WebSocket of JSON text frames (see [`protocol`]): the server sends
//! `{"type":"history","messages":[...]}` on connect, then `message`, `deleted`, `event`
//! and answers; a client sends `message`, `delete`, `auth` (token refresh or sign-in) and
//! `ping`. Each message is stored through the platform's chat API before the stored record
//! is fanned out. Before the handshake the relay checks the `Origin` against an allow-list,
//! caps connections per process and per client address, validates the stream id and
//! authenticates.
//!
//! The internal listener (loopback by default) serves `POST /internal/streams/{id}/events`
//! (header `X-Relay-Secret`), `GET /metrics` (Prometheus text) and `GET /healthz`; the
//! public one never routes `/internal/`. With a Redis URL, instances share every frame over
//! Redis pub/sub (see [`bus`]).
//!
//! [`serve`] runs both listeners; [`Embedded`] runs the internal one and hands the public
//! routes to another hyper server (edgehost serves `/ws/` on its own port).

pub mod api;
pub mod bus;
pub mod config;
pub mod hub;
pub mod identity;
pub mod ingress;
pub mod limits;
mod member;
pub mod metrics;
mod outbox;
pub mod protocol;
mod session;
mod shard;
pub mod token;
mod wire;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{
    CONNECTION, CONTENT_TYPE, HeaderValue, ORIGIN, RETRY_AFTER, SEC_WEBSOCKET_ACCEPT, UPGRADE,
};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use api::{Caller, ChatApi};
use hub::Hub;
use identity::Identity;
use limits::{ConnectionLimits, Refusal};
use metrics::{Metrics, inc};
use protocol::Uuid;

pub use config::{
    AllowedOrigins, Config, DEFAULT_INTERNAL_LISTEN, DEFAULT_LISTEN, ENVIRONMENT,
    PUBLIC_PATH_PREFIX, is_environment_variable,
};

/// The response body type (the same as edgehost's `WebSocketBody`).
pub type Body = BoxBody<Bytes, anyhow::Error>;

/// The largest body the events endpoint reads.
const MAX_EVENT_BYTES: usize = 64 * 1024;

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
    /// Where pushes and the Redis bus are taken in ([`ingress`]).
    lane: ingress::Lane,
    limits: Arc<ConnectionLimits>,
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
    /// Creates the relay, with its ingress lane (a thread), and starts its Redis link.
    pub fn new(config: Config) -> Relay {
        let lane = ingress::Lane::start().expect("the relay's ingress thread starts");
        Relay::on_lane(config, lane)
    }

    /// Creates the relay taking pushes and the Redis bus in on `lane`.
    pub fn on_lane(config: Config, lane: ingress::Lane) -> Relay {
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
        let hub = Arc::new(Hub::new(
            config.queue_capacity,
            config.batch_window,
            metrics.clone(),
        ));
        let bus = config
            .redis_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .map(|url| Arc::new(bus::Bus::new(url, &instance, metrics.clone())));
        let bus_task = bus.clone().map(|b| lane.handle().spawn(b.run(hub.clone())));
        Relay(Arc::new(Inner {
            api: ChatApi::new(&config.api_url, &config.relay_secret, &config.api_roots),
            limits: Arc::new(ConnectionLimits::new(
                config.max_connections,
                config.max_connections_per_ip,
            )),
            config,
            hub,
            metrics,
            bus,
            bus_task,
            lane,
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

    /// Closes every socket, stops the Redis link and the ingress lane.
    pub fn close(&self) {
        self.0.hub.close_all();
        if let Some(task) = &self.0.bus_task {
            task.abort();
        }
        self.0.lane.stop();
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
        self.0.hub.fan_out(stream, Some(key), frame);
    }

    /// Serves one request of the public listener: `GET /ws/streams/{id}/chat` and
    /// `GET /healthz`; anything else (`/internal/...` included) 404. The client's address
    /// is the request's `SocketAddr` extension (set by [`serve`], and by edgehost).
    pub async fn handle_public(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        if path == "/healthz" && req.method() == Method::GET {
            return self.health();
        }
        if let Some(stream) = segment_of(&path, "/ws/streams/", "/chat") {
            if req.method() != Method::GET {
                return problem(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    "use GET",
                );
            }
            return self.upgrade(req, stream).await;
        }
        problem(StatusCode::NOT_FOUND, "not_found", "no such route")
    }

    /// Serves one request of the internal listener: `POST /internal/streams/{id}/events`,
    /// `GET /metrics`, `GET /healthz`; anything else 404.
    pub async fn handle_internal(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        match (req.method(), path.as_str()) {
            (&Method::GET, "/healthz") => self.health(),
            (&Method::GET, "/metrics") => response(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                self.metrics_text(),
            ),
            _ => match segment_of(&path, "/internal/streams/", "/events") {
                Some(_) if req.method() != Method::POST => problem(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    "use POST",
                ),
                Some(stream) => self.event(req, stream).await,
                None => problem(StatusCode::NOT_FOUND, "not_found", "no such route"),
            },
        }
    }

    fn health(&self) -> Response<Body> {
        json_response(
            StatusCode::OK,
            &json!({"status": "ok", "redis": self.redis_state()}),
        )
    }

    /// Checks the request (WebSocket, origin, stream id, connection caps, credential),
    /// loads history, and upgrades. Nothing reaches the API before the checks pass.
    async fn upgrade(&self, req: Request<Incoming>, stream: &str) -> Response<Body> {
        let (key, stream) = match self.check_handshake(&req, stream) {
            Ok(checked) => checked,
            Err(refused) => return *refused,
        };
        let slot = match self.connection_slot(&req) {
            Ok(slot) => slot,
            Err(refused) => return *refused,
        };
        let identity = match self.identify(&req, &stream) {
            Ok(identity) => identity,
            Err((status, code, detail)) => return self.refuse(status, &code, &detail),
        };
        let Some(batches) = reads_batches(req.uri().query()) else {
            return self.refuse(
                StatusCode::BAD_REQUEST,
                "invalid_batch",
                "`batch` is 1 (the client reads batch frames) or 0",
            );
        };
        // Join before reading history so that nothing stored in between is missed; the
        // socket skips queued messages its history already holds.
        let member = self.0.hub.join(stream.as_str(), batches);
        let history = match self
            .0
            .api
            .history(&stream, &identity.caller(), self.0.config.history_limit)
            .await
        {
            Ok(h) => h,
            Err(f) => {
                self.0.hub.leave(stream.as_str(), member.id);
                let status = match f.status {
                    401 | 403 | 404 => {
                        StatusCode::from_u16(f.status).unwrap_or(StatusCode::BAD_GATEWAY)
                    }
                    _ => StatusCode::BAD_GATEWAY,
                };
                return self.refuse(status, &f.code, &f.detail);
            }
        };
        let socket = session::Socket {
            stream,
            identity,
            member,
            history,
            slot,
        };
        self.switch_protocols(req, &key, socket)
    }

    /// A refused upgrade, counted.
    fn refuse(&self, status: StatusCode, code: &str, detail: &str) -> Response<Body> {
        inc(&self.0.metrics.rejected_upgrades);
        problem(status, code, detail)
    }

    /// The handshake's `Sec-WebSocket-Key` and the stream: a WebSocket upgrade, from an
    /// allowed origin, to a stream named by a UUID.
    fn check_handshake(
        &self,
        req: &Request<Incoming>,
        stream: &str,
    ) -> Result<(HeaderValue, Uuid), Box<Response<Body>>> {
        let is_ws = header_has(req, UPGRADE, "websocket") && header_has(req, CONNECTION, "upgrade");
        let key = match req.headers().get("sec-websocket-key") {
            Some(key) if is_ws => key.clone(),
            _ => {
                return Err(self
                    .refuse(
                        StatusCode::UPGRADE_REQUIRED,
                        "websocket_required",
                        "a WebSocket upgrade is required",
                    )
                    .into());
            }
        };
        let origin = req.headers().get(ORIGIN).map(|o| o.to_str().unwrap_or(""));
        if !self.0.config.allowed_origins.allows(origin) {
            inc(&self.0.metrics.refused_origin);
            return Err(self
                .refuse(
                    StatusCode::FORBIDDEN,
                    "origin_not_allowed",
                    "this origin may not open chat sockets",
                )
                .into());
        }
        let Some(stream) = Uuid::parse(stream) else {
            return Err(self
                .refuse(
                    StatusCode::BAD_REQUEST,
                    "invalid_stream_id",
                    "the stream id must be a UUID",
                )
                .into());
        };
        Ok((key, stream))
    }

    /// A connection slot for the client, within the process's and the client's caps;
    /// refused with `Retry-After` when either is full.
    fn connection_slot(
        &self,
        req: &Request<Incoming>,
    ) -> Result<limits::ConnectionSlot, Box<Response<Body>>> {
        let peer = req
            .extensions()
            .get::<SocketAddr>()
            .map(SocketAddr::ip)
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let client = limits::client_ip(req.headers(), peer, self.0.config.trust_forwarded_for);
        self.0.limits.acquire(client).map_err(|cap| {
            let (counter, status, code, detail) = match cap {
                Refusal::Process => (
                    &self.0.metrics.refused_capacity,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too_many_connections",
                    "the relay is full: try again later",
                ),
                Refusal::PerClient => (
                    &self.0.metrics.refused_per_ip,
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_connections_from_client",
                    "this address holds too many chat sockets",
                ),
            };
            inc(counter);
            let mut resp = self.refuse(status, code, detail);
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("5"));
            Box::new(resp)
        })
    }

    /// Answers 101 and hands the upgraded connection to the socket's session (or, when
    /// the upgrade fails, leaves the room).
    fn switch_protocols(
        &self,
        mut req: Request<Incoming>,
        key: &HeaderValue,
        socket: session::Socket,
    ) -> Response<Body> {
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        let on_upgrade = hyper::upgrade::on(&mut req);
        let relay = self.clone();
        tokio::spawn(async move {
            match on_upgrade.await {
                Ok(upgraded) => session::run(relay, upgraded, socket).await,
                Err(_) => relay.0.hub.leave(socket.stream.as_str(), socket.member.id),
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

    /// Who the socket acts as: a user by `?token=` (or `Authorization: Bearer`), else
    /// read-only by `?ticket=`, `?clientId=` (the tenant) or `?apiKey=`. A `?ticket=`
    /// (from `POST /api/streams/{id}/chat/ticket`) is checked here and forwarded with the
    /// socket's calls; with a token it must be that user's.
    fn identify(
        &self,
        req: &Request<Incoming>,
        stream: &Uuid,
    ) -> Result<Identity, (StatusCode, String, String)> {
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
        let bad = |code: &str, detail: &str| {
            (
                StatusCode::BAD_REQUEST,
                code.to_string(),
                detail.to_string(),
            )
        };
        let secret = self.0.config.jwt_secret.as_bytes();
        let now = domain::time::now();
        let unauthorized = |e: token::TokenError| (StatusCode::UNAUTHORIZED, e.code, e.detail);
        let ticket = match param("ticket") {
            Some(raw) => {
                Some(token::verify_ticket(secret, &raw, stream, now).map_err(unauthorized)?)
            }
            None => None,
        };
        if let Some(token) = param("token").or(bearer) {
            let user = token::verify(secret, &token, now).map_err(unauthorized)?;
            if ticket.as_ref().is_some_and(|t| !t.is_for(&user)) {
                return Err((
                    StatusCode::FORBIDDEN,
                    "ticket_mismatch".into(),
                    "the ticket is for another user or tenant".into(),
                ));
            }
            return Ok(Identity::User(user, ticket.map(|t| t.ticket)));
        }
        if let Some(ticket) = ticket {
            let client_id = Uuid::parse(&ticket.tenant_id)
                .ok_or_else(|| bad("invalid_ticket", "the ticket names no tenant"))?;
            return Ok(Identity::ReadOnly(Caller::Tenant {
                client_id,
                ticket: Some(ticket.ticket),
            }));
        }
        if let Some(client_id) = param("clientId") {
            let client_id = Uuid::parse(&client_id)
                .ok_or_else(|| bad("invalid_client_id", "clientId must be a UUID"))?;
            return Ok(Identity::ReadOnly(Caller::Tenant {
                client_id,
                ticket: None,
            }));
        }
        if let Some(api_key) = param("apiKey") {
            let api_key = protocol::api_key(&api_key)
                .ok_or_else(|| bad("invalid_api_key", "apiKey is not an API key"))?;
            return Ok(Identity::ReadOnly(Caller::ApiKey { api_key }));
        }
        Err((
            StatusCode::UNAUTHORIZED,
            "token_required".into(),
            "connect with ?token=<JWT>, or read-only with ?ticket=, ?clientId= or ?apiKey=".into(),
        ))
    }

    /// `POST /internal/streams/{id}/events`.
    async fn event(&self, req: Request<Incoming>, stream: &str) -> Response<Body> {
        if !self.signed_by_the_api(&req) {
            return problem(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "X-Relay-Secret is missing or wrong",
            );
        }
        let Some(stream) = Uuid::parse(stream) else {
            return problem(
                StatusCode::BAD_REQUEST,
                "invalid_stream_id",
                "the stream id must be a UUID",
            );
        };
        let event = match read_event(req).await {
            Ok(event) => event,
            Err(refused) => return *refused,
        };
        inc(&self.0.metrics.events_in);
        let (key, frame) = match self.event_frame(event) {
            Ok(keyed) => keyed,
            Err(refused) => return *refused,
        };
        self.dispatch(stream.as_str(), &key, frame.to_string())
            .await;
        json_response(StatusCode::ACCEPTED, &json!({"accepted": true}))
    }

    /// Whether the request carries the relay secret the API signs its events with.
    fn signed_by_the_api(&self, req: &Request<Incoming>) -> bool {
        let given = req
            .headers()
            .get("x-relay-secret")
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default();
        let expected = self.0.config.relay_secret.as_bytes();
        !expected.is_empty() && bool::from(given.as_slice().ct_eq(expected))
    }

    /// The frame an event becomes, and its key (which drops duplicates across relays);
    /// or why the event is refused.
    fn event_frame(&self, event: Value) -> Result<(String, Value), Box<Response<Body>>> {
        let invalid = |detail| problem(StatusCode::UNPROCESSABLE_ENTITY, "invalid_event", detail);
        let kind = event
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(match kind {
            // A message stored through REST: shown live like one sent over a socket.
            "chat_message" => match event["message"]["id"].as_str() {
                Some(id) => (id.to_string(), protocol::message(&event["message"])),
                None => return Err(invalid("`message.id` is required").into()),
            },
            // A message deleted through REST.
            "chat_deleted" => match event["id"].as_str() {
                Some(id) => {
                    inc(&self.0.metrics.deletions);
                    (format!("deleted:{id}"), protocol::deleted(id))
                }
                None => return Err(invalid("`id` is required").into()),
            },
            // A ban closes the banned user's sockets once the event reaches them.
            "moderation"
                if event["action"] == "user_banned" && event["userId"].as_str().is_some() =>
            {
                let user = event["userId"].as_str().unwrap_or_default();
                (
                    protocol::ban_key(user, &self.unique_key()),
                    json!({"type": "event", "event": event}),
                )
            }
            _ => {
                let key = match event.get("id").and_then(Value::as_str) {
                    Some(id) => format!("event:{id}"),
                    None => format!("event:{}", self.unique_key()),
                };
                (key, json!({"type": "event", "event": event}))
            }
        })
    }

    /// A key no other event of any relay has: this instance's id and a sequence number.
    fn unique_key(&self) -> String {
        format!(
            "{}:{}",
            self.0.instance,
            self.0.events.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Sockets held (open, or being upgraded).
    pub fn connections_held(&self) -> usize {
        self.0.limits.total()
    }
}

/// An event's body: a JSON object with a string `kind`, of at most [`MAX_EVENT_BYTES`].
async fn read_event(req: Request<Incoming>) -> Result<Value, Box<Response<Body>>> {
    let body = match Limited::new(req.into_body(), MAX_EVENT_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Err(problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "events are at most 64 KiB",
            )
            .into());
        }
    };
    let Ok(event) = serde_json::from_slice::<Value>(&body) else {
        return Err(problem(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "the body is not JSON",
        )
        .into());
    };
    if event.get("kind").and_then(Value::as_str).is_none() {
        return Err(problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_event",
            "an event is a JSON object with a string `kind`",
        )
        .into());
    }
    Ok(event)
}

/// Whether the client announced that it reads `batch` frames (`?batch=1`); `None` for a
/// value that is neither 1 nor 0. Clients that do not say so get one event per frame.
fn reads_batches(query: Option<&str>) -> Option<bool> {
    let mut batches = false;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == "batch" {
            batches = match v.as_ref() {
                "1" | "true" => true,
                "0" | "false" => false,
                _ => return None,
            };
        }
    }
    Some(batches)
}

/// `prefix{segment}suffix` → segment (one non-empty path segment, not yet validated).
fn segment_of<'a>(path: &'a str, prefix: &str, suffix: &str) -> Option<&'a str> {
    let segment = path.strip_prefix(prefix)?.strip_suffix(suffix)?;
    (!segment.is_empty() && !segment.contains('/')).then_some(segment)
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

/// A relay serving its own two listeners.
pub struct RelayServer {
    relay: Relay,
    local_addr: SocketAddr,
    internal_addr: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RelayServer {
    /// The public listener's address (`/ws/...`).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The internal listener's address (`/internal/...`, `/metrics`).
    pub fn internal_addr(&self) -> SocketAddr {
        self.internal_addr
    }

    pub fn relay(&self) -> &Relay {
        &self.relay
    }

    /// Stops accepting, closes every socket and the Redis link.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        self.relay.close();
        for task in self.tasks.drain(..) {
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

/// Serves `relay`: its public routes on `public`, its internal ones on `internal`
/// (HTTP/1.1 with upgrades), until shut down.
pub fn serve(
    relay: Relay,
    public: TcpListener,
    internal: TcpListener,
) -> std::io::Result<RelayServer> {
    let local_addr = public.local_addr()?;
    let internal_addr = internal.local_addr()?;
    let (stop, stop_rx) = watch::channel(false);
    let r = relay.clone();
    let public_task = tokio::spawn(accept_loop(public, stop_rx.clone(), move |req| {
        let r = r.clone();
        async move { r.handle_public(req).await }
    }));
    let r = relay.clone();
    let internal_task = on_lane(&relay.0.lane, internal, stop_rx, move |req| {
        let r = r.clone();
        async move { r.handle_internal(req).await }
    })?;
    Ok(RelayServer {
        relay,
        local_addr,
        internal_addr,
        stop,
        tasks: vec![public_task, internal_task],
    })
}

/// Serves `listener` on `lane` (its connections, and what their requests spawn, run
/// there), as [`accept_loop`] does.
fn on_lane<F, Fut>(
    lane: &ingress::Lane,
    listener: TcpListener,
    stop: watch::Receiver<bool>,
    handle: F,
) -> std::io::Result<JoinHandle<()>>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Body>> + Send + 'static,
{
    // A listener is served by the reactor it was registered with: re-register it there.
    let listener = listener.into_std()?;
    Ok(lane.handle().spawn(async move {
        match TcpListener::from_std(listener) {
            Ok(listener) => accept_loop(listener, stop, handle).await,
            Err(e) => eprintln!("chat-relay: the internal listener failed: {e}"),
        }
    }))
}

/// Accepts connections on `listener` until `stop` flips, serving each request with
/// `handle`; every request carries its TCP peer as a `SocketAddr` extension.
async fn accept_loop<F, Fut>(listener: TcpListener, mut stop: watch::Receiver<bool>, handle: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Body>> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        let Ok((stream, peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let handle = handle.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(peer);
            let answer = handle(req);
            async move { Ok::<_, std::convert::Infallible>(answer.await) }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

/// A request handler with the signature of edgehost's `WebSocketHandler`.
pub type Handler = Arc<
    dyn Fn(
            Request<Incoming>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>>
        + Send
        + Sync,
>;

/// A relay embedded in another server (edgehost), whose configuration is known only once
/// that server runs (its address, its resolved secrets). [`Embedded::bind`] opens the
/// internal listener first (its address becomes the app's `relay_url`); hand
/// [`Embedded::handler`] (the public routes) to the server, then [`Embedded::start`] the
/// relay. Until then requests answer 503.
pub struct Embedded {
    cell: Arc<std::sync::OnceLock<Relay>>,
    /// The internal listener's lane, which the relay then takes its Redis bus in on too.
    lane: ingress::Lane,
    internal_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Embedded {
    /// Binds the internal listener on `internal_listen` (port 0 picks a free one) and
    /// serves it.
    pub async fn bind(internal_listen: SocketAddr) -> std::io::Result<Embedded> {
        let listener = TcpListener::bind(internal_listen).await?;
        let internal_addr = listener.local_addr()?;
        let cell: Arc<std::sync::OnceLock<Relay>> = Arc::default();
        let (stop, stop_rx) = watch::channel(false);
        let relay = cell.clone();
        let lane = ingress::Lane::start()?;
        let task = on_lane(&lane, listener, stop_rx, move |req| {
            let relay = relay.get().cloned();
            async move {
                match relay {
                    Some(relay) => relay.handle_internal(req).await,
                    None => starting(),
                }
            }
        })?;
        Ok(Embedded {
            cell,
            lane,
            internal_addr,
            stop,
            task: Some(task),
        })
    }

    /// The internal listener's address.
    pub fn internal_addr(&self) -> SocketAddr {
        self.internal_addr
    }

    /// `http://{internal address}`: what the platform's `relay_url` should be.
    pub fn internal_url(&self) -> String {
        format!("http://{}", self.internal_addr)
    }

    /// The public routes' handler to install (edgehost: `Options::websocket`).
    pub fn handler(&self) -> Handler {
        let cell = self.cell.clone();
        Arc::new(move |req| {
            let relay = cell.get().cloned();
            Box::pin(async move {
                match relay {
                    Some(relay) => relay.handle_public(req).await,
                    None => starting(),
                }
            })
        })
    }

    /// Starts the relay with `config`; a second call answers the first relay.
    pub fn start(&self, config: Config) -> Relay {
        self.cell
            .get_or_init(|| Relay::on_lane(config, self.lane.clone()))
            .clone()
    }

    /// The running relay, if started.
    pub fn relay(&self) -> Option<Relay> {
        self.cell.get().cloned()
    }

    /// Stops the internal listener and closes every socket.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(relay) = self.cell.get() {
            relay.close();
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(relay) = self.cell.get() {
            relay.close();
        }
        self.lane.stop();
    }
}

fn starting() -> Response<Body> {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "relay_starting",
        "the chat relay is starting",
    )
}
