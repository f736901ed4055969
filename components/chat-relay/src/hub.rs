//! Rooms (one per stream) of local sockets, and the fan-out into their bounded queues.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Utf8Bytes;

use crate::metrics::{Metrics, inc};

/// How many recent frame keys each room remembers to drop duplicates.
const DEDUPE_WINDOW: usize = 4096;

/// A frame on its way to a socket: `key` (a message id) lets the socket skip what its
/// history already showed.
#[derive(Clone, Debug)]
pub struct Outbound {
    pub key: Option<Arc<str>>,
    pub text: Utf8Bytes,
}

/// The hub's side of one socket.
struct Subscriber {
    tx: mpsc::Sender<Outbound>,
    kick: Arc<Notify>,
}

#[derive(Default)]
struct Room {
    sockets: HashMap<u64, Subscriber>,
    recent: VecDeque<Arc<str>>,
    recent_set: HashSet<Arc<str>>,
}

impl Room {
    /// Remembers `key`; false when it was seen already.
    fn first_sighting(&mut self, key: &Arc<str>) -> bool {
        if !self.recent_set.insert(key.clone()) {
            return false;
        }
        self.recent.push_back(key.clone());
        if self.recent.len() > DEDUPE_WINDOW
            && let Some(old) = self.recent.pop_front()
        {
            self.recent_set.remove(&old);
        }
        true
    }
}

/// What a socket holds: its queue and the signal that it was dropped for being slow.
pub struct Membership {
    pub id: u64,
    pub rx: mpsc::Receiver<Outbound>,
    pub tx: mpsc::Sender<Outbound>,
    pub kick: Arc<Notify>,
}

/// Every room of this relay instance.
pub struct Hub {
    rooms: Mutex<HashMap<String, Room>>,
    next_id: std::sync::atomic::AtomicU64,
    queue: usize,
    metrics: Arc<Metrics>,
}

impl Hub {
    pub fn new(queue: usize, metrics: Arc<Metrics>) -> Hub {
        Hub {
            rooms: Mutex::default(),
            next_id: 1.into(),
            queue: queue.max(1),
            metrics,
        }
    }

    fn rooms(&self) -> std::sync::MutexGuard<'_, HashMap<String, Room>> {
        self.rooms.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Streams with at least one socket.
    pub fn room_count(&self) -> usize {
        self.rooms().len()
    }

    /// Adds a socket to `stream`'s room.
    pub fn join(&self, stream: &str) -> Membership {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(self.queue);
        let kick = Arc::new(Notify::new());
        self.rooms()
            .entry(stream.to_string())
            .or_default()
            .sockets
            .insert(
                id,
                Subscriber {
                    tx: tx.clone(),
                    kick: kick.clone(),
                },
            );
        Membership { id, rx, tx, kick }
    }

    /// Removes a socket; the room goes when it is empty.
    pub fn leave(&self, stream: &str, id: u64) {
        let mut rooms = self.rooms();
        if let Some(room) = rooms.get_mut(stream) {
            room.sockets.remove(&id);
            if room.sockets.is_empty() {
                rooms.remove(stream);
            }
        }
    }

    /// Queues `text` to every socket of `stream`, once per `key`. A socket whose queue is
    /// full is dropped from the room and told to close. Answers how many were queued.
    pub fn fan_out(&self, stream: &str, key: Option<&str>, text: Utf8Bytes) -> usize {
        let key: Option<Arc<str>> = key.map(Arc::from);
        let mut rooms = self.rooms();
        let Some(room) = rooms.get_mut(stream) else {
            return 0;
        };
        if let Some(k) = &key
            && !room.first_sighting(k)
        {
            return 0;
        }
        let frame = Outbound { key, text };
        let mut delivered = 0;
        let mut gone = Vec::new();
        for (id, sub) in &room.sockets {
            match sub.tx.try_send(frame.clone()) {
                Ok(()) => delivered += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    inc(&self.metrics.dropped_slow_clients);
                    sub.kick.notify_one();
                    gone.push(*id);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => gone.push(*id),
            }
        }
        for id in gone {
            room.sockets.remove(&id);
        }
        if room.sockets.is_empty() {
            rooms.remove(stream);
        }
        self.metrics
            .messages_out
            .fetch_add(delivered as u64, std::sync::atomic::Ordering::Relaxed);
        delivered
    }

    /// Tells every socket to close (shutdown).
    pub fn close_all(&self) {
        let mut rooms = self.rooms();
        for room in rooms.values() {
            for sub in room.sockets.values() {
                sub.kick.notify_one();
            }
        }
        rooms.clear();
    }
}
