//! One WebSocket: a writer pumping the socket's outbox (and pinging), a reader persisting
//! what the client sends.

use futures_util::StreamExt;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::ReadHalf;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use crate::Relay;
use crate::api::{ApiFailure, Caller};
use crate::identity::{AuthChange, Identity, Mismatch, WriteRefusal};
use crate::limits::ConnectionSlot;
use crate::member::Member;
use crate::metrics::inc;
use crate::outbox::{Outbox, Pumped, Sent, ThroughOutbox};
use crate::protocol::{self, ClientFrame, Uuid};
use crate::{token, wire};

/// The socket as tungstenite reads it; what it writes goes through the outbox.
type Ws = WebSocketStream<ThroughOutbox<ReadHalf<TokioIo<Upgraded>>>>;

/// How long a socket that closes has to take its last frames.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What a socket was admitted with.
pub struct Socket {
    pub stream: Uuid,
    pub identity: Identity,
    pub member: Arc<Member>,
    pub history: Vec<Value>,
    pub slot: ConnectionSlot,
}

/// Runs the socket until either side ends it, then leaves the room and gives its
/// connection slot back.
pub async fn run(relay: Relay, upgraded: Upgraded, socket: Socket) {
    let Socket {
        stream,
        identity,
        member,
        history,
        slot,
    } = socket;
    let (read_half, write_half) = tokio::io::split(TokioIo::new(upgraded));
    // A small initial read buffer (tungstenite's default is 128 KiB per socket): client
    // frames are short, and the buffer grows when one is not. tungstenite writes only its
    // own control frames (pongs, the answer to a close), at once, into the outbox.
    let config = WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(64 * 1024))
        .max_frame_size(Some(64 * 1024));
    let through = ThroughOutbox {
        read: read_half,
        outbox: member.outbox.clone(),
    };
    let ws = WebSocketStream::from_raw_socket(through, Role::Server, Some(config)).await;
    let metrics = relay.0.metrics.clone();
    inc(&metrics.connections);
    inc(&metrics.connections_total);
    let started = Instant::now();
    let last_seen = Arc::new(AtomicU64::new(0));
    if let Identity::User(t, _) = &identity {
        member.acts_as(&t.user_id);
    }
    let seen = history
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    member.start(
        seen,
        wire::text(&protocol::history(&history).to_string()),
        Box::new(write_half),
    );

    let outbox = member.outbox.clone();
    let writer = write(relay.clone(), outbox.clone(), last_seen.clone(), started);
    let reader = read(
        relay.clone(),
        ws,
        stream.clone(),
        identity,
        member.clone(),
        last_seen,
        started,
    );
    // A kick (the outbox overflowed) drops the socket at once: a client that does not
    // read would not read a close frame either.
    tokio::select! {
        _ = outbox.kicked() => {}
        _ = writer => {}
        _ = reader => {}
    }
    relay.0.hub.leave(stream.as_str(), member.id);
    outbox.shut();
    metrics.connections.fetch_sub(1, Ordering::Relaxed);
    drop(slot);
}

fn millis_since(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

/// Writes what waits in the outbox as the connection takes it, pings, and closes a socket
/// that has been silent too long.
async fn write(relay: Relay, outbox: Arc<Outbox>, last_seen: Arc<AtomicU64>, started: Instant) {
    let config = relay.config().clone();
    let mut ping = tokio::time::interval(config.ping_interval);
    ping.tick().await;
    loop {
        tokio::select! {
            pumped = outbox.pump() => {
                // A ban, or the relay closing, queued a close frame: it goes out, briefly.
                if pumped == Pumped::Closing {
                    let _ = tokio::time::timeout(CLOSE_GRACE, outbox.drained()).await;
                }
                return;
            }
            _ = ping.tick() => {
                let silent = millis_since(started).saturating_sub(last_seen.load(Ordering::Relaxed));
                if silent > config.idle_timeout.as_millis() as u64 {
                    inc(&relay.0.metrics.reaped_connections);
                    outbox.send_last(None, wire::close_normal());
                    let _ = tokio::time::timeout(CLOSE_GRACE, outbox.drained()).await;
                    return;
                }
                match outbox.send(wire::ping()) {
                    Sent::Overflowed => inc(&relay.0.metrics.dropped_slow_clients),
                    Sent::Closed => return,
                    Sent::Written | Sent::Waiting => {}
                }
            }
        }
    }
}

async fn read(
    relay: Relay,
    mut source: Ws,
    stream: Uuid,
    mut identity: Identity,
    member: Arc<Member>,
    last_seen: Arc<AtomicU64>,
    started: Instant,
) {
    // Answers go in the socket's outbox, behind what is already waiting there.
    let reply = |frame: Value| match member.outbox.send(wire::text(&frame.to_string())) {
        Sent::Written | Sent::Waiting => inc(&relay.0.metrics.frames_out),
        Sent::Overflowed => inc(&relay.0.metrics.dropped_slow_clients),
        Sent::Closed => {}
    };
    let metrics = relay.0.metrics.clone();
    while let Some(Ok(msg)) = source.next().await {
        last_seen.store(millis_since(started), Ordering::Relaxed);
        let text = match msg {
            Message::Text(t) => t,
            Message::Close(_) => return,
            Message::Binary(_) => {
                reply(protocol::error("bad_frame", "frames are JSON text", None));
                continue;
            }
            _ => continue,
        };
        let frame = match protocol::parse_client_frame(&text) {
            Ok(frame) => frame,
            Err(answer) => {
                reply(answer);
                continue;
            }
        };
        let answer = match frame {
            ClientFrame::Message { message } => {
                inc(&metrics.messages_in);
                post(&relay, &stream, &identity, &message).await
            }
            ClientFrame::Delete { id } => delete(&relay, &stream, &identity, &id).await,
            ClientFrame::Auth { token, ticket } => {
                inc(&metrics.auth_frames);
                let answer =
                    authenticate(&relay, &stream, &mut identity, &token, ticket.as_deref()).await;
                if answer["type"] == "error" {
                    inc(&metrics.auth_refused);
                } else if let Identity::User(t, _) = &identity {
                    member.acts_as(&t.user_id);
                }
                Some(answer)
            }
            ClientFrame::Ping => Some(protocol::pong()),
        };
        if let Some(answer) = answer {
            reply(answer);
        }
    }
}

/// Stores a message sent over the socket and fans it out; the answer only the sender gets,
/// if any (a refusal, a failure, or that the message is held for review).
async fn post(relay: &Relay, stream: &Uuid, identity: &Identity, message: &str) -> Option<Value> {
    let caller = match identity.writer(domain::time::now()) {
        Ok(caller) => caller,
        Err(why) => return Some(refusal(why)),
    };
    let metrics = &relay.0.metrics;
    match relay.0.api.post(stream, &caller, message).await {
        // Held for review by a blocked word: only the sender hears of it.
        Ok(record) if record["held"] == true => Some(protocol::held(&record)),
        Ok(record) => {
            inc(&metrics.messages_stored);
            let id = record["id"].as_str().unwrap_or_default().to_string();
            let out = protocol::message(&record).to_string();
            relay.dispatch(stream.as_str(), &id, out).await;
            None
        }
        Err(f) => {
            inc(&metrics.persistence_failures);
            Some(failure(&f))
        }
    }
}

/// Deletes a message at the socket's request and fans the deletion out; the answer only
/// the sender gets, if any (a refusal or a failure).
async fn delete(relay: &Relay, stream: &Uuid, identity: &Identity, id: &str) -> Option<Value> {
    let Some(id) = Uuid::parse(id) else {
        return Some(protocol::error(
            "invalid_id",
            "`id` must be a message id (a UUID)",
            Some(400),
        ));
    };
    let caller = match identity.writer(domain::time::now()) {
        Ok(caller) => caller,
        Err(why) => return Some(refusal(why)),
    };
    let metrics = &relay.0.metrics;
    match relay.0.api.delete(stream, &caller, &id).await {
        Ok(()) => {
            inc(&metrics.deletions);
            let out = protocol::deleted(id.as_str()).to_string();
            relay
                .dispatch(stream.as_str(), &format!("deleted:{id}"), out)
                .await;
            None
        }
        Err(f) => {
            inc(&metrics.persistence_failures);
            Some(failure(&f))
        }
    }
}

/// An `auth` frame: verifies the token (and the ticket it brings, which must be for that
/// user) and, when it fits the socket, makes it the socket's credential; without a new
/// ticket the socket keeps the one it had. Answers the frame to send back; on any error
/// the socket keeps the credential it had.
async fn authenticate(
    relay: &Relay,
    stream: &Uuid,
    identity: &mut Identity,
    token: &str,
    ticket: Option<&str>,
) -> Value {
    let now = domain::time::now();
    let secret = relay.config().jwt_secret.as_bytes();
    let new = match token::verify(secret, token, now) {
        Ok(new) => new,
        Err(e) => return protocol::error(&e.code, &e.detail, Some(401)),
    };
    let ticket = match ticket {
        Some(raw) => match token::verify_ticket(secret, raw, stream, now) {
            Ok(t) if t.is_for(&new) => Some(t.ticket),
            Ok(_) => return ticket_mismatch(),
            Err(e) => return protocol::error(&e.code, &e.detail, Some(401)),
        },
        None => identity.ticket().map(str::to_string),
    };
    match identity.accepts(&new) {
        Err(Mismatch(why)) => protocol::error("token_mismatch", why, Some(403)),
        Ok(AuthChange::Refresh) => {
            let answer = protocol::authenticated(&new.user_id, new.expires_at);
            *identity = Identity::User(new, ticket);
            answer
        }
        Ok(AuthChange::SignIn) => {
            let as_user = Caller::User {
                token: new.token.clone(),
                ticket: ticket.clone(),
            };
            match relay.0.api.history(stream, &as_user, 1).await {
                Ok(_) => {
                    let answer = protocol::authenticated(&new.user_id, new.expires_at);
                    *identity = Identity::User(new, ticket);
                    answer
                }
                Err(f) => failure(&f),
            }
        }
    }
}

fn ticket_mismatch() -> Value {
    protocol::error(
        "ticket_mismatch",
        "the ticket is for another user or tenant",
        Some(403),
    )
}

fn refusal(why: WriteRefusal) -> Value {
    match why {
        WriteRefusal::ReadOnly => protocol::error(
            "read_only",
            "this socket is read-only: sign in with {\"type\":\"auth\",\"token\":...}",
            None,
        ),
        WriteRefusal::Expired => protocol::error(
            "token_expired",
            "the token has expired: send {\"type\":\"auth\",\"token\":...} with a fresh one",
            Some(401),
        ),
    }
}

fn failure(f: &ApiFailure) -> Value {
    let mut frame = protocol::error(&f.code, &f.detail, Some(f.status));
    if let Some(s) = f.retry_after {
        frame["retryAfter"] = s.into();
    }
    frame
}
