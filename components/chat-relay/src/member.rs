//! One socket's place in its room: how it takes the room's deliveries (batch frames or one
//! event a frame, without what its history already showed, up to a ban of its own user),
//! and its outbox.

use bytes::Bytes;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::hub::{Delivery, Event};
use crate::outbox::{Connection, Outbox, Sent};
use crate::{protocol, wire};

pub struct Member {
    pub id: u64,
    pub outbox: Arc<Outbox>,
    /// The client reads `batch` frames (it said `?batch=1`).
    batches: bool,
    /// The user the socket acts as, once it has one (it never changes after): a ban of
    /// that user closes the socket.
    user: OnceLock<String>,
    /// Message ids its history showed, skipped when the room delivers them (set once, when
    /// the socket starts).
    seen: OnceLock<HashSet<String>>,
    /// Deliveries that came between joining the room and the socket's start (its history
    /// was being read), written after the history.
    early: Mutex<Option<Vec<Arc<Delivery>>>>,
    started: AtomicBool,
}

/// What a delivery did to one socket.
pub struct Delivered {
    pub sent: Sent,
    pub frames: u64,
    /// The delivery banned the socket's user: it was shown the ban and closes.
    pub banned: bool,
}

impl Member {
    pub fn new(id: u64, batches: bool, capacity: usize) -> Member {
        Member {
            id,
            outbox: Arc::new(Outbox::new(capacity)),
            batches,
            user: OnceLock::new(),
            seen: OnceLock::new(),
            early: Mutex::new(Some(Vec::new())),
            started: AtomicBool::new(false),
        }
    }

    /// Sets the socket's user (once; a socket never changes user).
    pub fn acts_as(&self, user: &str) {
        let _ = self.user.set(user.to_string());
    }

    /// Starts writing to `connection`: `history` first, then what the room delivered
    /// meanwhile (without the messages `history` holds), then everything after.
    pub fn start(&self, seen: HashSet<String>, history: Bytes, connection: Connection) {
        let _ = self.seen.set(seen);
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        for delivery in early.take().unwrap_or_default() {
            if !self.deliver_live(&delivery).sent.accepted() {
                break;
            }
        }
        self.started.store(true, Ordering::Release);
        drop(early);
        self.outbox.open(connection, history);
    }

    /// Hands `delivery` to the socket.
    pub fn deliver(&self, delivery: &Arc<Delivery>) -> Delivered {
        if !self.started.load(Ordering::Acquire) {
            let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(list) = early.as_mut() {
                let sent = if list.len() >= self.outbox.capacity() {
                    self.outbox.overflow();
                    Sent::Overflowed
                } else {
                    list.push(delivery.clone());
                    Sent::Waiting
                };
                return Delivered {
                    sent,
                    frames: 0,
                    banned: false,
                };
            }
        }
        self.deliver_live(delivery)
    }

    fn deliver_live(&self, delivery: &Delivery) -> Delivered {
        let (frames, count, banned) = self.frames_of(delivery);
        let sent = match (banned, frames) {
            (false, None) => Sent::Written,
            (false, Some(frames)) => self.outbox.send(frames),
            (true, frames) => self
                .outbox
                .send_last(frames, wire::close(1008, "banned from this chat")),
        };
        Delivered {
            sent,
            frames: count,
            banned,
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
        let seen = self.seen.get();
        !event
            .key
            .as_deref()
            .is_some_and(|k| seen.is_some_and(|s| s.contains(k)))
    }

    /// The bytes `delivery` puts on this socket (none when its history showed all of it),
    /// how many frames they are, and whether it bans the socket's user (the ban is then the
    /// last event shown).
    fn frames_of(&self, delivery: &Delivery) -> (Option<Bytes>, u64, bool) {
        let events = &delivery.events;
        let ban = delivery
            .bans
            .then(|| events.iter().position(|e| self.bans_me(e)))
            .flatten();
        let upto = ban.map_or(events.len(), |i| i + 1);
        let all_shown =
            self.seen.get().is_none_or(HashSet::is_empty) || events.iter().all(|e| self.shows(e));
        if all_shown && upto == events.len() {
            // The common case: the room's bytes as encoded once for every socket.
            return if self.batches {
                (Some(delivery.batch_frame.clone()), 1, ban.is_some())
            } else {
                let each = delivery.each_frame.clone();
                (Some(each), events.len() as u64, ban.is_some())
            };
        }
        let shown: Vec<&str> = events[..upto]
            .iter()
            .filter(|e| self.shows(e))
            .map(|e| &*e.text)
            .collect();
        let (frames, count) = match shown.as_slice() {
            [] => (None, 0),
            many if self.batches && many.len() > 1 => {
                (Some(wire::text(&protocol::batch(many.iter().copied()))), 1)
            }
            each => (Some(wire::texts(each.iter().copied())), each.len() as u64),
        };
        (frames, count, ban.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::Event;
    use tokio::io::AsyncReadExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};

    fn event(key: &str, text: &str) -> Event {
        Event {
            key: Some(Arc::from(key)),
            text: Arc::from(text),
        }
    }

    fn delivery(events: Vec<Event>) -> Arc<Delivery> {
        Arc::new(Delivery::new(events))
    }

    /// A started member over one end of an in-memory connection, and the other end.
    fn started(batches: bool, seen: &[&str]) -> (Member, tokio::io::DuplexStream) {
        let member = Member::new(1, batches, 8);
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let seen = seen.iter().map(|s| s.to_string()).collect();
        member.start(seen, wire::text("history"), Box::new(ours));
        (member, theirs)
    }

    /// The text frames written so far, as a client parses them (a close ends them).
    async fn frames(theirs: &mut tokio::io::DuplexStream) -> Vec<String> {
        let mut bytes = vec![0; 64 * 1024];
        let n = theirs.read(&mut bytes).await.unwrap();
        let mut ws = WebSocket::from_raw_socket(
            std::io::Cursor::new(bytes[..n].to_vec()),
            Role::Client,
            None,
        );
        let mut out = Vec::new();
        while let Ok(m) = ws.read() {
            match m {
                Message::Text(t) => out.push(t.to_string()),
                Message::Close(Some(c)) => {
                    out.push(format!("close {} {}", u16::from(c.code), c.reason))
                }
                other => out.push(format!("{other:?}")),
            }
        }
        out
    }

    #[tokio::test]
    async fn batch_readers_get_one_frame_and_others_one_per_event() {
        let d = delivery(vec![event("e1", "1"), event("e2", "2")]);
        let (batcher, mut b) = started(true, &[]);
        let (plain, mut p) = started(false, &[]);
        assert_eq!(batcher.deliver(&d).frames, 1);
        assert_eq!(plain.deliver(&d).frames, 2);
        assert_eq!(
            frames(&mut b).await,
            ["history", r#"{"type":"batch","frames":[1,2]}"#]
        );
        assert_eq!(frames(&mut p).await, ["history", "1", "2"]);
    }

    #[tokio::test]
    async fn what_the_history_showed_is_skipped() {
        let (member, mut theirs) = started(true, &["m1"]);
        let d = delivery(vec![event("m1", "1"), event("m2", "2"), event("m3", "3")]);
        assert_eq!(member.deliver(&d).frames, 1);
        let only_seen = delivery(vec![event("m1", "1")]);
        assert_eq!(member.deliver(&only_seen).frames, 0);
        assert_eq!(
            frames(&mut theirs).await,
            ["history", r#"{"type":"batch","frames":[2,3]}"#]
        );
    }

    #[tokio::test]
    async fn a_ban_of_the_sockets_user_is_shown_last_then_closes_it() {
        let (member, mut theirs) = started(false, &[]);
        member.acts_as("u1");
        let (other, mut other_end) = started(false, &[]);
        other.acts_as("u2");
        let d = delivery(vec![
            event("e1", "1"),
            event("ban:u1:x", "ban"),
            event("e3", "3"),
        ]);
        let got = member.deliver(&d);
        assert!(got.banned);
        assert_eq!(got.frames, 2);
        assert_eq!(
            frames(&mut theirs).await,
            ["history", "1", "ban", "close 1008 banned from this chat"]
        );
        assert_eq!(member.outbox.send(wire::text("late")), Sent::Closed);
        assert!(!other.deliver(&d).banned);
        assert_eq!(frames(&mut other_end).await, ["history", "1", "ban", "3"]);
    }

    #[tokio::test]
    async fn deliveries_before_the_start_follow_the_history_and_overflow_past_capacity() {
        let member = Member::new(1, true, 2);
        let d1 = delivery(vec![event("m1", "1")]);
        let d2 = delivery(vec![event("m2", "2")]);
        assert_eq!(member.deliver(&d1).sent, Sent::Waiting);
        assert_eq!(member.deliver(&d2).sent, Sent::Waiting);
        let (ours, mut theirs) = tokio::io::duplex(1024);
        member.start(
            ["m1".to_string()].into(),
            wire::text("history"),
            Box::new(ours),
        );
        assert_eq!(frames(&mut theirs).await, ["history", "2"]);

        let slow = Member::new(2, true, 2);
        for _ in 0..2 {
            assert_eq!(slow.deliver(&d1).sent, Sent::Waiting);
        }
        assert_eq!(slow.deliver(&d1).sent, Sent::Overflowed);
    }
}
