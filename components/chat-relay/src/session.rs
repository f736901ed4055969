//! One WebSocket: a writer draining the socket's bounded queue (and pinging), a reader
//! persisting what the client sends.

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::Relay;
use crate::api::{ApiFailure, Caller};
use crate::hub::{Membership, Outbound};
use crate::metrics::inc;

type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// Runs the socket until either side ends it, then leaves the room.
pub async fn run(
    relay: Relay,
    upgraded: Upgraded,
    stream: String,
    caller: Caller,
    can_send: bool,
    membership: Membership,
    history: Vec<Value>,
) {
    // A small initial read buffer (tungstenite's default is 128 KiB per socket): client
    // frames are short, and the buffer grows when one is not.
    let config = WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .max_message_size(Some(64 * 1024))
        .max_frame_size(Some(64 * 1024));
    let ws =
        WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
    let metrics = relay.0.metrics.clone();
    inc(&metrics.connections);
    inc(&metrics.connections_total);
    let started = Instant::now();
    let last_seen = Arc::new(AtomicU64::new(0));
    let (sink, source) = ws.split();
    let Membership { id, rx, tx, kick } = membership;

    let writer = write(relay.clone(), sink, rx, history, last_seen.clone(), started);
    let reader = read(
        relay.clone(),
        source,
        stream.clone(),
        caller,
        can_send,
        tx,
        last_seen,
        started,
    );
    // A kick (queue overflow, or the relay closing) drops the socket at once: a client
    // that does not read would not read a close frame either.
    tokio::select! {
        _ = kick.notified() => {}
        _ = writer => {}
        _ = reader => {}
    }
    relay.0.hub.leave(&stream, id);
    metrics.connections.fetch_sub(1, Ordering::Relaxed);
}

fn millis_since(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

#[allow(clippy::too_many_arguments)]
async fn write(
    relay: Relay,
    mut sink: futures_util::stream::SplitSink<Socket, Message>,
    mut rx: mpsc::Receiver<Outbound>,
    history: Vec<Value>,
    last_seen: Arc<AtomicU64>,
    started: Instant,
) {
    let seen: HashSet<String> = history
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    let first = json!({"type": "history", "messages": history}).to_string();
    if sink.send(Message::Text(first.into())).await.is_err() {
        return;
    }
    let config = relay.config().clone();
    let mut ping = tokio::time::interval(config.ping_interval);
    ping.tick().await;
    loop {
        tokio::select! {
            item = rx.recv() => {
                let Some(item) = item else {
                    // The hub let go of this socket: it was too slow, or the relay closes.
                    let (code, reason) = if relay.0.closing.load(Ordering::Relaxed) {
                        (CloseCode::Away, "the relay is restarting")
                    } else {
                        (CloseCode::Policy, "too slow: outbound queue overflowed")
                    };
                    let close = CloseFrame { code, reason: reason.into() };
                    let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(Message::Close(Some(close)))).await;
                    return;
                };
                if item.key.as_deref().is_some_and(|k| seen.contains(k)) {
                    continue;
                }
                if sink.send(Message::Text(item.text)).await.is_err() {
                    return;
                }
            }
            _ = ping.tick() => {
                let silent = millis_since(started).saturating_sub(last_seen.load(Ordering::Relaxed));
                if silent > config.idle_timeout.as_millis() as u64 {
                    inc(&relay.0.metrics.reaped_connections);
                    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
                    return;
                }
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn read(
    relay: Relay,
    mut source: futures_util::stream::SplitStream<Socket>,
    stream: String,
    caller: Caller,
    can_send: bool,
    tx: mpsc::Sender<Outbound>,
    last_seen: Arc<AtomicU64>,
    started: Instant,
) {
    // Answers go on the socket's own queue, behind what is already queued to it.
    let reply = |frame: Value| {
        let _ = tx.try_send(Outbound {
            key: None,
            text: Utf8Bytes::from(frame.to_string()),
        });
    };
    let metrics = relay.0.metrics.clone();
    while let Some(Ok(msg)) = source.next().await {
        last_seen.store(millis_since(started), Ordering::Relaxed);
        let text = match msg {
            Message::Text(t) => t,
            Message::Close(_) => return,
            Message::Binary(_) => {
                reply(error("bad_frame", "frames are JSON text", None));
                continue;
            }
            _ => continue,
        };
        let Ok(frame) = serde_json::from_str::<Value>(&text) else {
            reply(error(
                "bad_frame",
                "a frame is a JSON object with a `type`",
                None,
            ));
            continue;
        };
        match frame["type"].as_str() {
            Some("message") => {
                inc(&metrics.messages_in);
                let Some(message) = frame["message"].as_str() else {
                    reply(error("bad_frame", "`message` must be a string", None));
                    continue;
                };
                if !can_send {
                    reply(error(
                        "read_only",
                        "sign in to chat: this socket is read-only",
                        None,
                    ));
                    continue;
                }
                match relay.0.api.post(&stream, &caller, message).await {
                    Ok(record) => {
                        inc(&metrics.messages_stored);
                        let id = record["id"].as_str().unwrap_or_default().to_string();
                        let out = json!({"type": "message", "message": record}).to_string();
                        relay.dispatch(&stream, &id, out).await;
                    }
                    Err(f) => {
                        inc(&metrics.persistence_failures);
                        reply(failure(&f));
                    }
                }
            }
            Some("delete") => {
                let Some(id) = frame["id"].as_str() else {
                    reply(error("bad_frame", "`id` must be a string", None));
                    continue;
                };
                if !can_send {
                    reply(error(
                        "read_only",
                        "sign in to moderate: this socket is read-only",
                        None,
                    ));
                    continue;
                }
                match relay.0.api.delete(&stream, &caller, id).await {
                    Ok(()) => {
                        inc(&metrics.deletions);
                        let out = json!({"type": "deleted", "id": id}).to_string();
                        relay.dispatch(&stream, &format!("deleted:{id}"), out).await;
                    }
                    Err(f) => {
                        inc(&metrics.persistence_failures);
                        reply(failure(&f));
                    }
                }
            }
            Some("ping") => reply(json!({"type": "pong"})),
            _ => reply(error("bad_frame", "unknown frame type", None)),
        }
    }
}

fn error(code: &str, message: &str, status: Option<u16>) -> Value {
    let mut frame = json!({"type": "error", "code": code, "message": message});
    if let Some(s) = status {
        frame["status"] = s.into();
    }
    frame
}

fn failure(f: &ApiFailure) -> Value {
    let mut frame = error(&f.code, &f.detail, Some(f.status));
    if let Some(s) = f.retry_after {
        frame["retryAfter"] = s.into();
    }
    frame
}
