//! One WebSocket: a writer draining the socket's bounded queue (and pinging), a reader
//! persisting what the client sends.

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::Relay;
use crate::api::{ApiFailure, Caller};
use crate::hub::{Delivery, Event, Membership, Outbound};
use crate::identity::{AuthChange, Identity, Mismatch, WriteRefusal};
use crate::limits::ConnectionSlot;
use crate::metrics::inc;
use crate::protocol::{self, ClientFrame, Uuid};
use crate::token;

type Ws = WebSocketStream<TokioIo<Upgraded>>;

/// The most queued items (replies and deliveries) one write to a socket carries, and the
/// bytes after which it carries no more: a socket that fell behind catches up in writes of
/// about this size, and its write buffer stays about this small.
const MAX_BATCH: usize = 32;
const WRITE_BUFFER: usize = 16 * 1024;

/// What a socket was admitted with.
pub struct Socket {
    pub stream: Uuid,
    pub identity: Identity,
    pub membership: Membership,
    pub history: Vec<Value>,
    pub slot: ConnectionSlot,
    /// The client reads `batch` frames (it said `?batch=1`).
    pub batches: bool,
}

/// Runs the socket until either side ends it, then leaves the room and gives its
/// connection slot back.
pub async fn run(relay: Relay, upgraded: Upgraded, socket: Socket) {
    let Socket {
        stream,
        identity,
        membership,
        history,
        slot,
        batches,
    } = socket;
    // A small initial read buffer (tungstenite's default is 128 KiB per socket): client
    // frames are short, and the buffer grows when one is not.
    // Writes go out once WRITE_BUFFER bytes are buffered (tungstenite's default is 128 KiB,
    // which a socket catching up on batch frames would keep allocated).
    let config = WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(WRITE_BUFFER)
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
    // The user the socket acts as, once it has one (it never changes after): a ban of
    // that user closes the socket.
    let user: Arc<OnceLock<String>> = Arc::default();
    if let Identity::User(t, _) = &identity {
        let _ = user.set(t.user_id.clone());
    }

    let writer = write(
        relay.clone(),
        sink,
        rx,
        history,
        RoomFilter::new(user.clone(), batches),
        last_seen.clone(),
        started,
    );
    let reader = read(
        relay.clone(),
        source,
        stream.clone(),
        identity,
        tx,
        last_seen,
        started,
        user,
    );
    // A kick (queue overflow, or the relay closing) drops the socket at once: a client
    // that does not read would not read a close frame either.
    tokio::select! {
        _ = kick.notified() => {}
        _ = writer => {}
        _ = reader => {}
    }
    relay.0.hub.leave(stream.as_str(), id);
    metrics.connections.fetch_sub(1, Ordering::Relaxed);
    drop(slot);
}

fn millis_since(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

/// How one socket takes its room's deliveries: without the messages its history already
/// showed, in batch frames or one event a frame as the client asked, and up to a ban of its
/// own user (which it shows, then closes).
struct RoomFilter {
    seen: HashSet<String>,
    user: Arc<OnceLock<String>>,
    batches: bool,
}

/// The frames a delivery puts on one socket, and whether the socket closes after them.
struct Frames {
    texts: Vec<Utf8Bytes>,
    banned: bool,
}

impl RoomFilter {
    fn new(user: Arc<OnceLock<String>>, batches: bool) -> RoomFilter {
        RoomFilter {
            seen: HashSet::new(),
            user,
            batches,
        }
    }

    fn bans_me(&self, event: &Event) -> bool {
        event
            .key
            .as_deref()
            .and_then(protocol::banned_user_of_key)
            .is_some_and(|banned| self.user.get().is_some_and(|me| me == banned))
    }

    fn shows(&self, event: &Event) -> bool {
        !event.key.as_deref().is_some_and(|k| self.seen.contains(k))
    }

    fn frames(&self, delivery: &Delivery) -> Frames {
        let ban = delivery.events.iter().position(|e| self.bans_me(e));
        let upto = ban.map_or(delivery.events.len(), |i| i + 1);
        let all_shown = self.seen.is_empty() || delivery.events.iter().all(|e| self.shows(e));
        let texts = if all_shown && upto == delivery.events.len() && self.batches {
            // The common case: the room's frame as built once for every socket.
            vec![delivery.frame.clone()]
        } else {
            let shown: Vec<&Event> = delivery.events[..upto]
                .iter()
                .filter(|e| self.shows(e))
                .collect();
            match shown.as_slice() {
                [] => Vec::new(),
                many if self.batches && many.len() > 1 => {
                    vec![protocol::batch(many.iter().map(|e| e.text.as_str())).into()]
                }
                each => each.iter().map(|e| e.text.clone()).collect(),
            }
        };
        Frames {
            texts,
            banned: ban.is_some(),
        }
    }
}

async fn write(
    relay: Relay,
    mut sink: futures_util::stream::SplitSink<Ws, Message>,
    mut rx: mpsc::Receiver<Outbound>,
    history: Vec<Value>,
    mut filter: RoomFilter,
    last_seen: Arc<AtomicU64>,
    started: Instant,
) {
    filter.seen = history
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    let first = protocol::history(&history).to_string();
    if sink.send(Message::Text(first.into())).await.is_err() {
        return;
    }
    let frames_out = &relay.0.metrics.frames_out;
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
                // What is queued behind this item goes out with it, in one write: a socket
                // that fell behind catches up in few system calls.
                let mut next = Some(item);
                let mut banned = false;
                let (mut items, mut bytes) = (0, 0);
                while let Some(item) = next.take() {
                    let frames = match item {
                        Outbound::Reply(text) => Frames { texts: vec![text], banned: false },
                        Outbound::Room(delivery) => filter.frames(&delivery),
                    };
                    banned = frames.banned;
                    for text in frames.texts {
                        bytes += text.len();
                        if sink.feed(Message::Text(text)).await.is_err() {
                            return;
                        }
                        inc(frames_out);
                    }
                    items += 1;
                    if banned || items >= MAX_BATCH || bytes >= WRITE_BUFFER {
                        break;
                    }
                    next = rx.try_recv().ok();
                }
                if sink.flush().await.is_err() {
                    return;
                }
                if banned {
                    // The ban event went out first, so the client knows why.
                    let close = CloseFrame {
                        code: CloseCode::Policy,
                        reason: "banned from this chat".into(),
                    };
                    let _ = tokio::time::timeout(
                        Duration::from_secs(1),
                        sink.send(Message::Close(Some(close))),
                    )
                    .await;
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
    mut source: futures_util::stream::SplitStream<Ws>,
    stream: Uuid,
    mut identity: Identity,
    tx: mpsc::Sender<Outbound>,
    last_seen: Arc<AtomicU64>,
    started: Instant,
    user: Arc<OnceLock<String>>,
) {
    // Answers go on the socket's own queue, behind what is already queued to it.
    let reply = |frame: Value| {
        let _ = tx.try_send(Outbound::Reply(Utf8Bytes::from(frame.to_string())));
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
                    let _ = user.set(t.user_id.clone());
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
