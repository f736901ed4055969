//! LiveKit's Egress API, stood in by a real HTTP server on loopback for the suites that
//! start egresses (recording, the SFU feed into the ingest): it checks what LiveKit
//! checks (the Twirp path, the token's grant and signature with LiveKit's own verifier, the
//! body as LiveKit's request type from `livekit-protocol`) and records the calls.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use livekit_api::access_token::TokenVerifier;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

pub const SFU_KEY: &str = "APIrecordkey";
pub const SFU_SECRET: &str = "record-sfu-secret-long-enough-0123456789abcdef";

/// One call the stand-in egress accepted.
#[derive(Debug, Clone)]
pub struct EgressCall {
    pub method: String,
    pub body: Value,
    /// Part of an SFU feed into the ingest (a stream output), not of a recording.
    pub feed: bool,
}

/// LiveKit's Egress API, as far as the platform uses it: `StartRoomCompositeEgress` and
/// `StopEgress` over Twirp with JSON. Anything that does not hold up is answered as LiveKit
/// would (401 for a bad token, 400 for a body that is not the request type) and not
/// recorded, so the tests see only calls a real server would have accepted.
#[derive(Clone, Default)]
pub struct StandInEgress {
    calls: Arc<Mutex<Vec<EgressCall>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

impl StandInEgress {
    pub async fn start() -> (StandInEgress, SocketAddr) {
        let egress = StandInEgress::default();
        let shared = egress.clone();
        let addr = serve(move |req| {
            let shared = shared.clone();
            async move { shared.answer(req).await }
        })
        .await;
        (egress, addr)
    }

    fn refuse(&self, why: String, status: u16) -> hyper::Response<Full<Bytes>> {
        self.refused.lock().unwrap().push(why.clone());
        let body = json!({"code": "invalid_argument", "msg": why}).to_string();
        hyper::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    }

    async fn answer(
        &self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        let token = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_string);
        let content_type = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let Some(method) = path.strip_prefix("/twirp/livekit.Egress/") else {
            return self.refuse(format!("not a Twirp Egress path: {path}"), 404);
        };
        if req_is_not_json(&content_type) {
            return self.refuse(format!("content-type {content_type}"), 415);
        }
        let Some(token) = token else {
            return self.refuse("no bearer token".into(), 401);
        };
        match TokenVerifier::with_api_key(SFU_KEY, SFU_SECRET).verify(&token) {
            Ok(claims) if claims.video.room_record => {}
            Ok(_) => return self.refuse("the token lacks roomRecord".into(), 401),
            Err(e) => return self.refuse(format!("bad token: {e}"), 401),
        }
        // Recording egresses are numbered by the recording calls before them and feeds
        // apart, so a suite that records sees the same ids whether or not the broadcast
        // is also fed into the ingest.
        let (recording_calls, feeds_started) = {
            let calls = self.calls.lock().unwrap();
            let feeds = calls
                .iter()
                .filter(|c| c.feed && c.method == "StartRoomCompositeEgress")
                .count();
            (calls.iter().filter(|c| !c.feed).count(), feeds)
        };
        let info = match method {
            "StartRoomCompositeEgress" => {
                let request: livekit_protocol::RoomCompositeEgressRequest =
                    match serde_json::from_slice(&body) {
                        Ok(r) => r,
                        Err(e) => {
                            return self
                                .refuse(format!("not a RoomCompositeEgressRequest: {e}"), 400);
                        }
                    };
                if request.room_name.is_empty() || request.custom_base_url.is_empty() {
                    return self.refuse("room_name and custom_base_url are required".into(), 400);
                }
                if request.file_outputs.is_empty()
                    && request.segment_outputs.is_empty()
                    && request.stream_outputs.is_empty()
                {
                    return self.refuse("no output".into(), 400);
                }
                let egress_id = if request.stream_outputs.is_empty() {
                    format!("EG_{}", recording_calls + 1)
                } else {
                    format!("EG_FEED_{}", feeds_started + 1)
                };
                livekit_protocol::EgressInfo {
                    egress_id,
                    room_name: request.room_name,
                    status: livekit_protocol::EgressStatus::EgressStarting as i32,
                    ..Default::default()
                }
            }
            "StopEgress" => {
                let request: livekit_protocol::StopEgressRequest =
                    match serde_json::from_slice(&body) {
                        Ok(r) => r,
                        Err(e) => return self.refuse(format!("not a StopEgressRequest: {e}"), 400),
                    };
                livekit_protocol::EgressInfo {
                    egress_id: request.egress_id,
                    status: livekit_protocol::EgressStatus::EgressEnding as i32,
                    ..Default::default()
                }
            }
            other => return self.refuse(format!("unexpected method {other}"), 404),
        };
        self.calls.lock().unwrap().push(EgressCall {
            method: method.to_string(),
            body: serde_json::from_slice(&body).unwrap(),
            feed: info.egress_id.starts_with("EG_FEED_"),
        });
        hyper::Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(&info).unwrap())))
            .unwrap()
    }

    pub fn calls(&self) -> Vec<EgressCall> {
        self.calls.lock().unwrap().clone()
    }

    /// The calls that start or stop recordings, without the SFU feed's.
    pub fn recording_calls(&self) -> Vec<EgressCall> {
        self.calls().into_iter().filter(|c| !c.feed).collect()
    }

    pub fn refused(&self) -> Vec<String> {
        self.refused.lock().unwrap().clone()
    }
}

fn req_is_not_json(content_type: &str) -> bool {
    !content_type.starts_with("application/json")
}

/// Serves HTTP/1.1 on a fresh loopback port, each request answered by `handle`.
pub async fn serve<F, Fut>(handle: F) -> SocketAddr
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = hyper::Response<Full<Bytes>>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handle = handle.clone();
            let service = hyper::service::service_fn(move |req| {
                let answer = handle(req);
                async move { Ok::<_, std::convert::Infallible>(answer.await) }
            });
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    addr
}
