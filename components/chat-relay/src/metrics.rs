//! Counters and gauges, rendered in the Prometheus text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// The relay's counters. Gauges (`connections`, `redis_connected`) go up and down.
#[derive(Default)]
pub struct Metrics {
    pub connections: AtomicU64,
    pub connections_total: AtomicU64,
    pub messages_in: AtomicU64,
    pub messages_stored: AtomicU64,
    pub messages_out: AtomicU64,
    pub deliveries: AtomicU64,
    pub frames_out: AtomicU64,
    pub deletions: AtomicU64,
    pub events_in: AtomicU64,
    pub persistence_failures: AtomicU64,
    pub dropped_slow_clients: AtomicU64,
    pub reaped_connections: AtomicU64,
    pub rejected_upgrades: AtomicU64,
    pub refused_origin: AtomicU64,
    pub refused_capacity: AtomicU64,
    pub refused_per_ip: AtomicU64,
    pub auth_frames: AtomicU64,
    pub auth_refused: AtomicU64,
    pub redis_connected: AtomicU64,
    pub redis_reconnects: AtomicU64,
    pub redis_published: AtomicU64,
    pub redis_received: AtomicU64,
    pub redis_publish_failures: AtomicU64,
}

/// One metric as exposed: name (after `chat_relay_`), type, help text, value.
type Sample = (&'static str, &'static str, &'static str, u64);

/// A counter's or gauge's current value.
fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Adds one to a counter.
pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Metrics {
    /// The Prometheus exposition text; `rooms` and `redis` (0 disabled, 1 down, 2 up) are
    /// read by the caller.
    pub fn render(&self, rooms: usize, redis_enabled: bool) -> String {
        let mut out = String::new();
        let samples = self
            .traffic(rooms)
            .into_iter()
            .chain(self.failures_and_refusals())
            .chain(self.redis(redis_enabled));
        for (name, kind, help, value) in samples {
            let _ = writeln!(out, "# HELP chat_relay_{name} {help}");
            let _ = writeln!(out, "# TYPE chat_relay_{name} {kind}");
            let _ = writeln!(out, "chat_relay_{name} {value}");
        }
        out
    }

    /// Sockets, rooms, and the messages and events through them.
    fn traffic(&self, rooms: usize) -> Vec<Sample> {
        vec![
            (
                "connections",
                "gauge",
                "Open WebSocket connections.",
                get(&self.connections),
            ),
            (
                "connections_total",
                "counter",
                "WebSocket connections accepted.",
                get(&self.connections_total),
            ),
            (
                "rooms",
                "gauge",
                "Streams with at least one local socket.",
                rooms as u64,
            ),
            (
                "messages_in_total",
                "counter",
                "Chat messages received from clients.",
                get(&self.messages_in),
            ),
            (
                "messages_stored_total",
                "counter",
                "Chat messages persisted through the API by this relay.",
                get(&self.messages_stored),
            ),
            (
                "messages_out_total",
                "counter",
                "Events queued to sockets by fan-out (one per event per socket).",
                get(&self.messages_out),
            ),
            (
                "deliveries_total",
                "counter",
                "Deliveries queued to sockets: a room's events of one batch window, to one socket.",
                get(&self.deliveries),
            ),
            (
                "frames_out_total",
                "counter",
                "WebSocket text frames written to sockets (a batch frame carries several events).",
                get(&self.frames_out),
            ),
            (
                "deletions_total",
                "counter",
                "Deletions fanned out.",
                get(&self.deletions),
            ),
            (
                "events_in_total",
                "counter",
                "Events received on the internal endpoint.",
                get(&self.events_in),
            ),
        ]
    }

    /// What failed or was refused: stores, slow or silent sockets, upgrades, auth frames.
    fn failures_and_refusals(&self) -> Vec<Sample> {
        vec![
            (
                "persistence_failures_total",
                "counter",
                "Messages or deletions the API refused or failed to store.",
                get(&self.persistence_failures),
            ),
            (
                "dropped_slow_clients_total",
                "counter",
                "Sockets disconnected because their outbound queue overflowed.",
                get(&self.dropped_slow_clients),
            ),
            (
                "reaped_connections_total",
                "counter",
                "Sockets closed because they stopped answering pings.",
                get(&self.reaped_connections),
            ),
            (
                "rejected_upgrades_total",
                "counter",
                "WebSocket requests refused before the upgrade (any reason).",
                get(&self.rejected_upgrades),
            ),
            (
                "refused_origin_total",
                "counter",
                "Upgrades refused (403) because their Origin is not allowed.",
                get(&self.refused_origin),
            ),
            (
                "refused_capacity_total",
                "counter",
                "Upgrades refused (503) because the process holds MAX_CONNECTIONS sockets.",
                get(&self.refused_capacity),
            ),
            (
                "refused_per_ip_total",
                "counter",
                "Upgrades refused (429) because the client holds MAX_CONNECTIONS_PER_IP sockets.",
                get(&self.refused_per_ip),
            ),
            (
                "auth_frames_total",
                "counter",
                "Auth frames received (token refreshes and sign-ins).",
                get(&self.auth_frames),
            ),
            (
                "auth_refused_total",
                "counter",
                "Auth frames refused (the socket kept its credential).",
                get(&self.auth_refused),
            ),
        ]
    }

    /// The Redis link (scale-out across relays).
    fn redis(&self, redis_enabled: bool) -> Vec<Sample> {
        let redis_state = if !redis_enabled {
            0
        } else {
            1 + get(&self.redis_connected).min(1)
        };
        vec![
            (
                "redis_state",
                "gauge",
                "Redis link: 0 disabled, 1 disconnected, 2 connected.",
                redis_state,
            ),
            (
                "redis_reconnects_total",
                "counter",
                "Successful Redis (re)connections.",
                get(&self.redis_reconnects),
            ),
            (
                "redis_published_total",
                "counter",
                "Frames published to Redis.",
                get(&self.redis_published),
            ),
            (
                "redis_received_total",
                "counter",
                "Frames received from Redis.",
                get(&self.redis_received),
            ),
            (
                "redis_publish_failures_total",
                "counter",
                "Publishes that failed (delivered locally instead).",
                get(&self.redis_publish_failures),
            ),
        ]
    }
}
