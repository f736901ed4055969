//! Outbound HTTP/1.1 connections kept open for the next request to the same place, as
//! Spin's outbound HTTP keeps them (its `connection_pooling`, on by default).
//!
//! A connection goes back to the pool once its response has been read to the end (hyper's
//! `SendRequest::ready`); a response dropped half-read, or a `Connection: close` either
//! way, closes it instead. The pool is the app's, shared by its components as in Spin: a
//! connection was checked against the blocked networks when it was opened, and those are
//! app-wide; each request is still checked against its own component's
//! `allowed_outbound_hosts` before it may take one.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::client::conn::http1::SendRequest;
use wasmtime_wasi_http::WasiBody;

/// How long an idle connection is kept: below the keep-alive timeouts servers commonly
/// use (nginx 75 s), so that the pool rarely hands out a connection the server is
/// closing.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Most idle connections kept, over every destination: each one is an open file.
const MAX_IDLE: usize = 256;

/// Where a connection goes: a host name (or IP literal) and port, with TLS or not, or
/// the application's own listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PoolKey {
    Host { host: String, port: u16, tls: bool },
    Addr(SocketAddr),
}

struct IdleConnection {
    sender: SendRequest<WasiBody>,
    since: Instant,
}

impl IdleConnection {
    fn usable(&self) -> bool {
        self.since.elapsed() < IDLE_TIMEOUT && !self.sender.is_closed()
    }
}

/// The app's idle outbound connections.
#[derive(Default)]
pub struct ConnectionPool {
    idle: Mutex<HashMap<PoolKey, Vec<IdleConnection>>>,
}

impl ConnectionPool {
    /// An idle connection to `key` that is ready for a request, the most recently used
    /// first; expired or closed ones met on the way are dropped.
    pub fn take(&self, key: &PoolKey) -> Option<SendRequest<WasiBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let waiting = idle.get_mut(key)?;
        while let Some(connection) = waiting.pop() {
            if connection.usable() && connection.sender.is_ready() {
                return Some(connection.sender);
            }
        }
        idle.remove(key);
        None
    }

    /// Keeps `sender`'s connection once its current exchange has finished (the response
    /// read to its end), unless it closes first or the pool is full.
    pub fn give_back(self: &Arc<Self>, key: PoolKey, mut sender: SendRequest<WasiBody>) {
        let pool = self.clone();
        tokio::spawn(async move {
            if sender.ready().await.is_err() {
                return;
            }
            let mut idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|_, waiting| {
                waiting.retain(IdleConnection::usable);
                !waiting.is_empty()
            });
            if idle.values().map(Vec::len).sum::<usize>() < MAX_IDLE {
                idle.entry(key).or_default().push(IdleConnection {
                    sender,
                    since: Instant::now(),
                });
            }
        });
    }
}
