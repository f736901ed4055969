//! A webhook receiver for the tests and benchmarks: a real HTTP server on loopback (the
//! tenant's backend is an external party), which records every request it gets and
//! answers from a script (`200` once the script is used up).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the webhook body is JSON")
    }
}

/// How the receiver answers one request.
#[derive(Debug, Clone)]
pub enum Answer {
    Status(u16),
    /// A status and one extra header (e.g. `Retry-After`).
    WithHeader(u16, &'static str, String),
    /// Never answers (holds the connection open).
    Hang,
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    script: VecDeque<Answer>,
    always: Option<Answer>,
}

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    arrived: Arc<Notify>,
}

impl Receiver {
    /// Starts a receiver answering 200 to everything.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback receiver");
        let addr = listener.local_addr().expect("receiver address");
        let receiver = Receiver {
            addr,
            state: Arc::default(),
            arrived: Arc::default(),
        };
        let shared = receiver.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = shared.clone();
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let shared = shared.clone();
                        async move { Ok::<_, std::convert::Infallible>(shared.answer(req).await) }
                    },
                );
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        receiver
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        let at = Instant::now();
        let path = req.uri().path().to_string();
        let headers = req
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let answer = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.received.push(Received {
                path,
                headers,
                body,
                at,
            });
            state
                .script
                .pop_front()
                .or_else(|| state.always.clone())
                .unwrap_or(Answer::Status(200))
        };
        self.arrived.notify_waiters();
        let (status, extra) = match answer {
            Answer::Status(s) => (s, None),
            Answer::WithHeader(s, name, value) => (s, Some((name, value))),
            Answer::Hang => {
                std::future::pending::<()>().await;
                unreachable!("a pending future never completes")
            }
        };
        let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"{}")));
        *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status");
        if let Some((name, value)) = extra {
            response
                .headers_mut()
                .insert(name, value.parse().expect("a valid header value"));
        }
        response
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The next requests are answered with `answers`, in order.
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .script
            .extend(answers);
    }

    /// Every request (after the script) is answered with `answer`.
    pub fn always(&self, answer: Answer) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).always = Some(answer);
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .received
            .clone()
    }

    /// Waits (at most `limit`) until `n` requests have arrived; answers them all.
    pub async fn wait_for(&self, n: usize, limit: Duration) -> Vec<Received> {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.arrived.notified();
            let seen = self.received();
            if seen.len() >= n || Instant::now() >= deadline {
                return seen;
            }
            let _ = tokio::time::timeout_at(deadline.into(), notified).await;
        }
    }
}

/// Checks a Standard Webhooks signature header against `secret` (`whsec_<base64>`): answers
/// whether one of its `v1,` signatures is the HMAC-SHA256 of `id.timestamp.body`.
/// Written from the specification, independently of the platform's code.
pub fn signature_matches(
    secret: &str,
    id: &str,
    timestamp: &str,
    body: &[u8],
    header: &str,
) -> bool {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let engine = base64::engine::general_purpose::STANDARD;
    let Some(key) = secret
        .strip_prefix("whsec_")
        .and_then(|k| engine.decode(k).ok())
    else {
        return false;
    };
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("HMAC takes any key");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let expected = engine.encode(mac.finalize().into_bytes());
    header
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|sig| sig == expected)
}
