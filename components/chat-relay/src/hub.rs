//! Rooms (one per stream) of local sockets, and the fan-out into their bounded queues.
//!
//! A room does not hand each event to each socket on its own: events that arrive close
//! together are coalesced into one [`Delivery`], built once for the room (its batch frame
//! serialised once) and queued once per socket, so a socket's writer wakes, and writes, once
//! per delivery rather than once per event. The first event after a quiet spell goes out at
//! once; events that follow within the batch window wait for the window to close (or for the
//! pending bytes to reach [`MAX_BATCH_BYTES`]), so a hot room sends at most one delivery per
//! window and a quiet one adds no delay at all.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Utf8Bytes;

use crate::metrics::{Metrics, inc};
use crate::protocol;

/// How many recent frame keys each room remembers to drop duplicates.
const DEDUPE_WINDOW: usize = 4096;

/// Pending bytes at which a room delivers without waiting for its window to close: a batch
/// frame stays small enough for any client to take in one read.
pub const MAX_BATCH_BYTES: usize = 32 * 1024;

/// One event of a room: its frame as sent alone, and its key (a message id, `deleted:{id}`,
/// an event's id) that lets a socket skip what its history already showed.
#[derive(Clone, Debug)]
pub struct Event {
    pub key: Option<Arc<str>>,
    pub text: Utf8Bytes,
}

/// Events of a room that reach its sockets together, in the room's order.
#[derive(Debug)]
pub struct Delivery {
    pub events: Vec<Event>,
    /// The frame a socket that reads batches gets: the lone event itself, or
    /// `{"type":"batch","frames":[...]}` of them all, built once for every socket.
    pub frame: Utf8Bytes,
}

impl Delivery {
    fn new(events: Vec<Event>) -> Delivery {
        let frame = match events.as_slice() {
            [one] => one.text.clone(),
            many => protocol::batch(many.iter().map(|e| e.text.as_str())).into(),
        };
        Delivery { events, frame }
    }
}

/// What a socket's queue holds: an answer to that socket alone, or a room's delivery.
#[derive(Clone, Debug)]
pub enum Outbound {
    Reply(Utf8Bytes),
    Room(Arc<Delivery>),
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
    /// Events waiting for the batch window to close, and their bytes.
    pending: Vec<Event>,
    pending_bytes: usize,
    /// When the room last delivered, and whether a delivery is already scheduled.
    last_delivery: Option<Instant>,
    scheduled: bool,
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

    /// Queues the pending events, as one delivery, to every socket. A socket whose queue is
    /// full is dropped from the room and told to close.
    fn deliver(&mut self, now: Instant, metrics: &Metrics) {
        self.last_delivery = Some(now);
        if self.pending.is_empty() {
            return;
        }
        self.pending_bytes = 0;
        let events = std::mem::take(&mut self.pending);
        let count = events.len() as u64;
        let delivery = Arc::new(Delivery::new(events));
        let mut delivered = 0u64;
        let mut gone = Vec::new();
        for (id, sub) in &self.sockets {
            match sub.tx.try_send(Outbound::Room(delivery.clone())) {
                Ok(()) => delivered += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    inc(&metrics.dropped_slow_clients);
                    sub.kick.notify_one();
                    gone.push(*id);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => gone.push(*id),
            }
        }
        for id in gone {
            self.sockets.remove(&id);
        }
        use std::sync::atomic::Ordering::Relaxed;
        metrics.messages_out.fetch_add(delivered * count, Relaxed);
        metrics.deliveries.fetch_add(delivered, Relaxed);
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
    window: Duration,
    metrics: Arc<Metrics>,
}

impl Hub {
    /// `queue`: deliveries a socket may have waiting before it is dropped as slow;
    /// `window`: how long events that follow a delivery wait to be coalesced (zero sends
    /// every event as it comes).
    pub fn new(queue: usize, window: Duration, metrics: Arc<Metrics>) -> Hub {
        Hub {
            rooms: Mutex::default(),
            next_id: 1.into(),
            queue: queue.max(1),
            window,
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

    /// Sends `text` to every socket of `stream`, once per `key`: at once when the room has
    /// been quiet for the batch window, else with the other events of the window. Answers
    /// false when there is no such room or the key was seen already.
    pub fn fan_out(self: &Arc<Self>, stream: &str, key: Option<&str>, text: Utf8Bytes) -> bool {
        let key: Option<Arc<str>> = key.map(Arc::from);
        let mut rooms = self.rooms();
        let Some(room) = rooms.get_mut(stream) else {
            return false;
        };
        if let Some(k) = &key
            && !room.first_sighting(k)
        {
            return false;
        }
        room.pending_bytes += text.len();
        room.pending.push(Event { key, text });
        let now = Instant::now();
        let due = room
            .last_delivery
            .map(|last| last + self.window)
            .filter(|due| *due > now);
        match due {
            Some(_) if room.scheduled && room.pending_bytes < MAX_BATCH_BYTES => {}
            Some(due) if room.pending_bytes < MAX_BATCH_BYTES => {
                room.scheduled = true;
                let (hub, stream) = (self.clone(), stream.to_string());
                tokio::spawn(async move {
                    tokio::time::sleep_until(due).await;
                    hub.deliver_due(&stream);
                });
            }
            // Quiet for a window, or a full batch: deliver now (a scheduled delivery finds
            // what has come since).
            _ => room.deliver(now, &self.metrics),
        }
        if room.sockets.is_empty() {
            rooms.remove(stream);
        }
        true
    }

    /// A scheduled delivery: what the room's window gathered.
    fn deliver_due(&self, stream: &str) {
        let mut rooms = self.rooms();
        let Some(room) = rooms.get_mut(stream) else {
            return;
        };
        room.scheduled = false;
        if room.pending.is_empty() {
            return;
        }
        room.deliver(Instant::now(), &self.metrics);
        if room.sockets.is_empty() {
            rooms.remove(stream);
        }
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
