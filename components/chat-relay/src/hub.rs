//! Rooms (one per stream) of local sockets, and the fan-out into them.
//!
//! A room does not hand each event to each socket on its own: events that arrive close
//! together are coalesced into one [`Delivery`], encoded once for the room (its WebSocket
//! frames built once, shared by every socket). The first event after a quiet spell goes
//! out at once; events that follow within the batch window wait for the window to close
//! (or for the pending bytes to reach [`MAX_BATCH_BYTES`]): a hot room makes at most one
//! delivery per window, and a quiet one adds no delay at all.
//!
//! A room's sockets are split in [`Shard`]s of a few hundred, each written by a task of
//! its own that takes the room's deliveries in order (so the room's order is every
//! socket's order) and writes to each socket without waking the socket's task (see
//! [`crate::outbox`]). The runtime's threads write several shards at once, and a shard
//! that fell behind catches up with the deliveries it missed merged into one frame.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::member::Member;
use crate::metrics::Metrics;
use crate::shard::{SHARD_SIZE, Shard};
use crate::{protocol, wire};

/// How many recent frame keys each room remembers to drop duplicates.
const DEDUPE_WINDOW: usize = 4096;

/// Pending bytes at which a room delivers without waiting for its window to close: a batch
/// frame stays small enough for any client to take in one read.
pub const MAX_BATCH_BYTES: usize = 32 * 1024;

/// One event of a room: its frame's JSON as sent alone, and its key (a message id,
/// `deleted:{id}`, an event's id) that lets a socket skip what its history already showed.
#[derive(Clone, Debug)]
pub struct Event {
    pub key: Option<Arc<str>>,
    pub text: Arc<str>,
}

/// Events of a room that reach its sockets together, in the room's order.
#[derive(Debug)]
pub struct Delivery {
    pub events: Vec<Event>,
    /// What a socket that reads batches gets: the lone event itself, or
    /// `{"type":"batch","frames":[...]}` of them all, as one WebSocket frame.
    pub batch_frame: bytes::Bytes,
    /// What a socket that reads one event a frame gets: a frame per event, back to back.
    pub each_frame: bytes::Bytes,
    /// Some event bans a user (whose sockets show it, then close).
    pub bans: bool,
}

impl Delivery {
    pub fn new(events: Vec<Event>) -> Delivery {
        let batch_frame = match events.as_slice() {
            [one] => wire::text(&one.text),
            many => wire::text(&protocol::batch(many.iter().map(|e| &*e.text))),
        };
        let each_frame = wire::texts(events.iter().map(|e| &*e.text));
        let bans = events.iter().any(|e| {
            e.key
                .as_deref()
                .and_then(protocol::banned_user_of_key)
                .is_some()
        });
        Delivery {
            events,
            batch_frame,
            each_frame,
            bans,
        }
    }

    /// The events' bytes.
    pub fn size(&self) -> usize {
        self.events.iter().map(|e| e.text.len()).sum()
    }
}

struct Room {
    /// Tells rooms of the same stream apart: a room that emptied and came back has a new
    /// writer, and the old one ends.
    generation: u64,
    /// Each socket's shard (an index in `shards`).
    members: HashMap<u64, usize>,
    shards: Vec<Arc<Shard>>,
    recent: VecDeque<Arc<str>>,
    recent_set: HashSet<Arc<str>>,
    /// Events waiting for the next delivery, and their bytes.
    pending: Vec<Event>,
    pending_bytes: usize,
    /// Wakes the room's writer.
    wake: Arc<Notify>,
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

    /// Ends the room's shards (their tasks finish what they hold, then stop).
    fn close(&self) {
        for shard in &self.shards {
            shard.close();
        }
        self.wake.notify_one();
    }
}

/// What a room's writer does next.
enum Next {
    /// The room is gone (it emptied, or the relay closes).
    Gone,
    /// Nothing pending.
    Idle,
    /// Events pending, due at this instant.
    At(Instant),
    /// Delivered to the room's shards.
    Delivered,
}

/// Every room of this relay instance.
pub struct Hub {
    rooms: Mutex<HashMap<String, Room>>,
    next_id: AtomicU64,
    queue: usize,
    window: Duration,
    metrics: Arc<Metrics>,
}

impl Hub {
    /// `queue`: frames a socket may have waiting before it is dropped as slow;
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

    /// Adds a socket to `stream`'s room (starting the room's writer, or a shard's, when
    /// one is new: this runs on the runtime that writes to the sockets).
    pub fn join(self: &Arc<Self>, stream: &str, batches: bool) -> Arc<Member> {
        let id = self.next_id.fetch_add(1, Relaxed);
        let member = Arc::new(Member::new(id, batches, self.queue));
        let mut rooms = self.rooms();
        let room = rooms.entry(stream.to_string()).or_insert_with(|| {
            let wake = Arc::new(Notify::new());
            tokio::spawn(
                self.clone()
                    .write_room(stream.to_string(), id, wake.clone()),
            );
            Room {
                generation: id,
                members: HashMap::new(),
                shards: Vec::new(),
                recent: VecDeque::new(),
                recent_set: HashSet::new(),
                pending: Vec::new(),
                pending_bytes: 0,
                wake,
            }
        });
        let index = match room.shards.iter().position(|s| s.len() < SHARD_SIZE) {
            Some(index) => index,
            None => {
                room.shards.push(Shard::start(self.metrics.clone()));
                room.shards.len() - 1
            }
        };
        room.shards[index].add(member.clone());
        room.members.insert(id, index);
        member
    }

    /// Removes a socket; the room goes when it is empty.
    pub fn leave(&self, stream: &str, id: u64) {
        let mut rooms = self.rooms();
        if let Some(room) = rooms.get_mut(stream)
            && let Some(index) = room.members.remove(&id)
        {
            room.shards[index].remove(id);
            if room.members.is_empty() {
                room.close();
                rooms.remove(stream);
            }
        }
    }

    /// Sends `text` to every socket of `stream`, once per `key`: at once when the room has
    /// been quiet for the batch window, else with the other events of the window. Answers
    /// false when there is no such room or the key was seen already.
    pub fn fan_out(&self, stream: &str, key: Option<&str>, text: String) -> bool {
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
        let was_empty = room.pending.is_empty();
        room.pending_bytes += text.len();
        room.pending.push(Event {
            key,
            text: text.into(),
        });
        // With events already pending the writer waits for the window to close, unless
        // the batch is now full.
        if was_empty || room.pending_bytes >= MAX_BATCH_BYTES {
            room.wake.notify_one();
        }
        true
    }

    /// The room's writer: turns what is pending into deliveries, one per window at most,
    /// and hands each to every shard.
    async fn write_room(self: Arc<Self>, stream: String, generation: u64, wake: Arc<Notify>) {
        let mut last: Option<Instant> = None;
        loop {
            match self.next_delivery(&stream, generation, &mut last) {
                Next::Gone => return,
                Next::Idle => wake.notified().await,
                Next::At(due) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(due) => {}
                        _ = wake.notified() => {}
                    }
                }
                Next::Delivered => {}
            }
        }
    }

    fn next_delivery(&self, stream: &str, generation: u64, last: &mut Option<Instant>) -> Next {
        let mut rooms = self.rooms();
        let Some(room) = rooms.get_mut(stream).filter(|r| r.generation == generation) else {
            return Next::Gone;
        };
        if room.pending.is_empty() {
            return Next::Idle;
        }
        let now = Instant::now();
        if let Some(due) = last.map(|l| l + self.window)
            && due > now
            && room.pending_bytes < MAX_BATCH_BYTES
        {
            return Next::At(due);
        }
        *last = Some(now);
        room.pending_bytes = 0;
        let delivery = Arc::new(Delivery::new(std::mem::take(&mut room.pending)));
        for shard in &room.shards {
            shard.push(delivery.clone());
        }
        Next::Delivered
    }

    /// Tells every socket to close (shutdown): each is sent a close frame, written before
    /// it goes, and the rooms end.
    pub fn close_all(&self) {
        let mut rooms = self.rooms();
        for room in rooms.values() {
            for shard in &room.shards {
                shard.close_sockets(wire::close(1001, "the relay is restarting"));
            }
            room.close();
        }
        rooms.clear();
    }
}
