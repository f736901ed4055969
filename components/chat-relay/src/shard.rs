//! A shard of a room: up to [`SHARD_SIZE`] of its sockets, and the task that writes the
//! room's deliveries to them, one after another in the room's order.
//!
//! The task writes to each socket itself (one write per socket and delivery, no socket's
//! task woken), outside the runtime's cooperative budget: each write polls a socket, which
//! would spend the task's budget, and a write refused for want of budget would hand the
//! socket to its own task, the wake-up this writer is there to save. When deliveries queue
//! up while it writes, it takes them together, merged into one delivery (one frame, one
//! write per socket) of at most [`MAX_BATCH_BYTES`].

use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

use crate::hub::{Delivery, MAX_BATCH_BYTES};
use crate::member::Member;
use crate::metrics::Metrics;
use crate::outbox::Sent;

/// Sockets in one shard: a shard's pass over its sockets stays short (a few ms), and a
/// big room's shards are written on all the runtime's threads.
pub const SHARD_SIZE: usize = 512;

pub struct Shard {
    state: Mutex<State>,
    wake: Notify,
}

struct State {
    members: Vec<Arc<Member>>,
    queue: VecDeque<Arc<Delivery>>,
    closed: bool,
}

/// What writing one delivery did to a shard's sockets.
#[derive(Default)]
struct Tally {
    delivered: u64,
    frames: u64,
    slow: u64,
    /// Sockets that no longer take deliveries: too slow, gone, or banned.
    leaving: Vec<u64>,
}

impl Shard {
    /// A new shard and its task (on the current runtime).
    pub fn start(metrics: Arc<Metrics>) -> Arc<Shard> {
        let shard = Arc::new(Shard {
            state: Mutex::new(State {
                members: Vec::new(),
                queue: VecDeque::new(),
                closed: false,
            }),
            wake: Notify::new(),
        });
        tokio::spawn(shard.clone().write(metrics));
        shard
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn len(&self) -> usize {
        self.state().members.len()
    }

    pub fn add(&self, member: Arc<Member>) {
        self.state().members.push(member);
    }

    pub fn remove(&self, id: u64) {
        let mut state = self.state();
        if let Some(i) = state.members.iter().position(|m| m.id == id) {
            state.members.swap_remove(i);
        }
    }

    /// Queues a delivery for the shard's sockets.
    pub fn push(&self, delivery: Arc<Delivery>) {
        self.state().queue.push_back(delivery);
        self.wake.notify_one();
    }

    /// Ends the shard: its task writes what is queued, then stops.
    pub fn close(&self) {
        self.state().closed = true;
        self.wake.notify_one();
    }

    /// Sends every socket of the shard `last` (a close frame) after what it has waiting.
    pub fn close_sockets(&self, last: Bytes) {
        for member in &self.state().members {
            member.outbox.send_last(None, last.clone());
        }
    }

    async fn write(self: Arc<Self>, metrics: Arc<Metrics>) {
        loop {
            let work = {
                let mut state = self.state();
                match take_merged(&mut state.queue) {
                    Some(delivery) => Some((delivery, state.members.clone())),
                    None if state.closed => return,
                    None => None,
                }
            };
            let Some((delivery, members)) = work else {
                self.wake.notified().await;
                continue;
            };
            let tally = tokio::task::unconstrained(async { write_all(&delivery, &members) }).await;
            let events = delivery.events.len() as u64;
            metrics
                .messages_out
                .fetch_add(tally.delivered * events, Relaxed);
            metrics.deliveries.fetch_add(tally.delivered, Relaxed);
            metrics.frames_out.fetch_add(tally.frames, Relaxed);
            metrics.dropped_slow_clients.fetch_add(tally.slow, Relaxed);
            if !tally.leaving.is_empty() {
                self.state()
                    .members
                    .retain(|m| !tally.leaving.contains(&m.id));
            }
            // Other tasks (and other shards) get the thread between passes.
            tokio::task::yield_now().await;
        }
    }
}

/// The first queued delivery, merged with those behind it while the merged one stays
/// within [`MAX_BATCH_BYTES`].
fn take_merged(queue: &mut VecDeque<Arc<Delivery>>) -> Option<Arc<Delivery>> {
    let first = queue.pop_front()?;
    let mut size = first.size();
    let mut merged: Option<Vec<_>> = None;
    while let Some(next) = queue.front() {
        let next_size = next.size();
        if size + next_size > MAX_BATCH_BYTES {
            break;
        }
        size += next_size;
        let events = merged.get_or_insert_with(|| first.events.clone());
        events.extend(next.events.iter().cloned());
        queue.pop_front();
    }
    Some(match merged {
        Some(events) => Arc::new(Delivery::new(events)),
        None => first,
    })
}

fn write_all(delivery: &Arc<Delivery>, members: &[Arc<Member>]) -> Tally {
    let mut tally = Tally::default();
    for member in members {
        let got = member.deliver(delivery);
        match got.sent {
            Sent::Written | Sent::Waiting => {
                tally.delivered += 1;
                tally.frames += got.frames;
                if got.banned {
                    tally.leaving.push(member.id);
                }
            }
            Sent::Overflowed => {
                tally.slow += 1;
                tally.leaving.push(member.id);
            }
            Sent::Closed => tally.leaving.push(member.id),
        }
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::Event;

    fn delivery(texts: &[&str]) -> Arc<Delivery> {
        let events = texts
            .iter()
            .map(|t| Event {
                key: None,
                text: Arc::from(*t),
            })
            .collect();
        Arc::new(Delivery::new(events))
    }

    #[test]
    fn queued_deliveries_merge_in_order_up_to_the_byte_bound() {
        let big = "x".repeat(MAX_BATCH_BYTES - 2);
        let mut queue: VecDeque<_> = [
            delivery(&["a", "b"]),
            delivery(&["c"]),
            delivery(&[&big]),
            delivery(&["d"]),
        ]
        .into();
        let texts = |d: &Delivery| {
            d.events
                .iter()
                .map(|e| e.text.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(&take_merged(&mut queue).unwrap()), ["a", "b", "c"]);
        assert_eq!(
            texts(&take_merged(&mut queue).unwrap()),
            [big.as_str(), "d"]
        );
        assert!(take_merged(&mut queue).is_none());
    }
}
