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

/// Adds one to a counter.
pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Metrics {
    /// The Prometheus exposition text; `rooms` and `redis` (0 disabled, 1 down, 2 up) are
    /// read by the caller.
    pub fn render(&self, rooms: usize, redis_enabled: bool) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP chat_relay_{name} {help}");
            let _ = writeln!(out, "# TYPE chat_relay_{name} {kind}");
            let _ = writeln!(out, "chat_relay_{name} {value}");
        };
        metric(
            "connections",
            "gauge",
            "Open WebSocket connections.",
            get(&self.connections),
        );
        metric(
            "connections_total",
            "counter",
            "WebSocket connections accepted.",
            get(&self.connections_total),
        );
        metric(
            "rooms",
            "gauge",
            "Streams with at least one local socket.",
            rooms as u64,
        );
        metric(
            "messages_in_total",
            "counter",
            "Chat messages received from clients.",
            get(&self.messages_in),
        );
        metric(
            "messages_stored_total",
            "counter",
            "Chat messages persisted through the API by this relay.",
            get(&self.messages_stored),
        );
        metric(
            "messages_out_total",
            "counter",
            "Events queued to sockets by fan-out (one per event per socket).",
            get(&self.messages_out),
        );
        metric(
            "deliveries_total",
            "counter",
            "Deliveries queued to sockets: a room's events of one batch window, to one socket.",
            get(&self.deliveries),
        );
        metric(
            "frames_out_total",
            "counter",
            "WebSocket text frames written to sockets (a batch frame carries several events).",
            get(&self.frames_out),
        );
        metric(
            "deletions_total",
            "counter",
            "Deletions fanned out.",
            get(&self.deletions),
        );
        metric(
            "events_in_total",
            "counter",
            "Events received on the internal endpoint.",
            get(&self.events_in),
        );
        metric(
            "persistence_failures_total",
            "counter",
            "Messages or deletions the API refused or failed to store.",
            get(&self.persistence_failures),
        );
        metric(
            "dropped_slow_clients_total",
            "counter",
            "Sockets disconnected because their outbound queue overflowed.",
            get(&self.dropped_slow_clients),
        );
        metric(
            "reaped_connections_total",
            "counter",
            "Sockets closed because they stopped answering pings.",
            get(&self.reaped_connections),
        );
        metric(
            "rejected_upgrades_total",
            "counter",
            "WebSocket requests refused before the upgrade (any reason).",
            get(&self.rejected_upgrades),
        );
        metric(
            "refused_origin_total",
            "counter",
            "Upgrades refused (403) because their Origin is not allowed.",
            get(&self.refused_origin),
        );
        metric(
            "refused_capacity_total",
            "counter",
            "Upgrades refused (503) because the process holds MAX_CONNECTIONS sockets.",
            get(&self.refused_capacity),
        );
        metric(
            "refused_per_ip_total",
            "counter",
            "Upgrades refused (429) because the client holds MAX_CONNECTIONS_PER_IP sockets.",
            get(&self.refused_per_ip),
        );
        metric(
            "auth_frames_total",
            "counter",
            "Auth frames received (token refreshes and sign-ins).",
            get(&self.auth_frames),
        );
        metric(
            "auth_refused_total",
            "counter",
            "Auth frames refused (the socket kept its credential).",
            get(&self.auth_refused),
        );
        let redis_state = if !redis_enabled {
            0
        } else {
            1 + get(&self.redis_connected).min(1)
        };
        metric(
            "redis_state",
            "gauge",
            "Redis link: 0 disabled, 1 disconnected, 2 connected.",
            redis_state,
        );
        metric(
            "redis_reconnects_total",
            "counter",
            "Successful Redis (re)connections.",
            get(&self.redis_reconnects),
        );
        metric(
            "redis_published_total",
            "counter",
            "Frames published to Redis.",
            get(&self.redis_published),
        );
        metric(
            "redis_received_total",
            "counter",
            "Frames received from Redis.",
            get(&self.redis_received),
        );
        metric(
            "redis_publish_failures_total",
            "counter",
            "Publishes that failed (delivered locally instead).",
            get(&self.redis_publish_failures),
        );
        out
    }
}
