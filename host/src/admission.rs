//! What one client may hold, and how slowly a request may arrive. A client is a peer IP
//! address (edgehost serves the connection itself; behind a proxy every client shares the
//! proxy's address, so raise or lift the caps there).
//!
//! - Headers must arrive within [`Admission::header_timeout`] (hyper's header read
//!   timeout).
//! - A body whose `Content-Length` is at most [`Admission::small_body`] is read into the
//!   host before an instance slot is taken, within a deadline that allows
//!   [`Admission::min_body_rate`]: a client trickling bytes holds a socket, never an
//!   instance, and is answered 408 when too slow.
//! - A larger or chunked body streams into the guest, and must keep the same minimum rate
//!   after a grace period, or the guest's read fails.
//! - A client holds at most [`Admission::connections_per_client`] connections and
//!   [`Admission::instances_per_client`] instance slots at once (0: no cap).

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

/// The limits on what a client may hold and how slowly its requests may arrive.
#[derive(Debug, Clone, Copy)]
pub struct Admission {
    /// Time to send a request's headers.
    pub header_timeout: Duration,
    /// Bodies up to this size (by their `Content-Length`) are read before an instance is
    /// taken.
    pub small_body: u64,
    /// Bytes per second a body must average once `body_grace` has passed.
    pub min_body_rate: u64,
    /// How long a body may arrive at any rate before the minimum applies.
    pub body_grace: Duration,
    /// Open connections per client (WebSockets, once upgraded, leave this count).
    pub connections_per_client: usize,
    /// Instance slots per client.
    pub instances_per_client: usize,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            header_timeout: Duration::from_secs(10),
            small_body: 1 << 20,
            min_body_rate: 8 * 1024,
            body_grace: Duration::from_secs(10),
            connections_per_client: 256,
            instances_per_client: 128,
        }
    }
}

impl Admission {
    /// How long a small body of `len` bytes may take: the grace, then the minimum rate.
    pub fn small_body_deadline(&self, len: u64) -> Duration {
        let at_rate = Duration::from_secs_f64(len as f64 / self.min_body_rate.max(1) as f64);
        self.body_grace + at_rate
    }
}

#[derive(Default, Debug, Clone, Copy)]
struct Held {
    connections: usize,
    instances: usize,
}

/// What each client holds now.
#[derive(Default)]
pub struct Clients {
    held: Mutex<HashMap<IpAddr, Held>>,
}

/// One connection of a client, given back when dropped.
pub struct ConnectionGuard {
    clients: Arc<Clients>,
    ip: IpAddr,
}

/// One instance slot of a client, given back when dropped.
pub struct InstanceGuard {
    clients: Arc<Clients>,
    ip: IpAddr,
}

impl Clients {
    fn take(
        self: &Arc<Self>,
        ip: IpAddr,
        cap: usize,
        count: impl Fn(&mut Held) -> &mut usize,
    ) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let entry = held.entry(ip).or_default();
        let n = count(entry);
        if cap > 0 && *n >= cap {
            return false;
        }
        *n += 1;
        true
    }

    fn give_back(&self, ip: IpAddr, count: impl Fn(&mut Held) -> &mut usize) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = held.get_mut(&ip) {
            let n = count(entry);
            *n = n.saturating_sub(1);
            if entry.connections == 0 && entry.instances == 0 {
                held.remove(&ip);
            }
        }
    }

    /// A connection for `ip`, unless it holds `cap` already.
    pub fn connect(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<ConnectionGuard> {
        self.take(ip, cap, |h| &mut h.connections)
            .then(|| ConnectionGuard {
                clients: self.clone(),
                ip,
            })
    }

    /// An instance slot for `ip`, unless it holds `cap` already.
    pub fn instance(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<InstanceGuard> {
        self.take(ip, cap, |h| &mut h.instances)
            .then(|| InstanceGuard {
                clients: self.clone(),
                ip,
            })
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.clients.give_back(self.ip, |h| &mut h.connections);
    }
}

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        self.clients.give_back(self.ip, |h| &mut h.instances);
    }
}

/// Why a body was not read.
#[derive(Debug)]
pub enum BodyRefused {
    /// It did not arrive in time.
    TooSlow,
    /// The connection failed or the body was malformed.
    Broken,
}

/// Reads a body of (declared) `len` bytes whole, within `within`.
pub async fn read_small<B>(body: B, within: Duration) -> Result<Bytes, BodyRefused>
where
    B: Body<Data = Bytes>,
{
    match tokio::time::timeout(within, body.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(_)) => Err(BodyRefused::Broken),
        Err(_) => Err(BodyRefused::TooSlow),
    }
}

/// A streamed body that fails once it falls below the minimum rate (after the grace), so
/// that a trickling client cannot hold an instance until its deadline.
pub struct RateGuarded<B> {
    inner: B,
    /// Set once the whole body has been read ([`RateGuarded::ended`]).
    ended: Arc<AtomicBool>,
    started: Instant,
    received: u64,
    min_rate: u64,
    grace: Duration,
    check: Pin<Box<tokio::time::Sleep>>,
}

impl<B: Body> RateGuarded<B> {
    pub fn new(inner: B, admission: &Admission) -> RateGuarded<B> {
        RateGuarded {
            ended: Arc::new(AtomicBool::new(inner.is_end_stream())),
            inner,
            started: Instant::now(),
            received: 0,
            min_rate: admission.min_body_rate,
            grace: admission.body_grace,
            check: Box::pin(tokio::time::sleep(admission.body_grace)),
        }
    }

    /// Whether the whole body has been read, to ask once the guest has answered: a
    /// connection whose request body was left unread cannot carry another request.
    pub fn ended(&self) -> Arc<AtomicBool> {
        self.ended.clone()
    }

    /// Whether the body has fallen behind: past the grace, less than the minimum rate
    /// averaged since it started.
    fn behind(&self) -> bool {
        let elapsed = self.started.elapsed();
        elapsed > self.grace
            && (self.received as f64) < self.min_rate as f64 * elapsed.as_secs_f64()
    }
}

impl<B> Body for RateGuarded<B>
where
    B: Body<Data = Bytes, Error = hyper::Error> + Unpin,
{
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received += data.len() as u64;
                }
                if self.behind() {
                    return Poll::Ready(Some(Err(
                        wasmtime_wasi_http::Error::ConnectionReadTimeout,
                    )));
                }
                if self.inner.is_end_stream() {
                    self.ended.store(true, Ordering::Relaxed);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => {
                self.ended.store(true, Ordering::Relaxed);
                Poll::Ready(None)
            }
            Poll::Pending => {
                // Wake up to check the rate while nothing arrives.
                while self.check.as_mut().poll(cx).is_ready() {
                    if self.behind() {
                        return Poll::Ready(Some(Err(
                            wasmtime_wasi_http::Error::ConnectionReadTimeout,
                        )));
                    }
                    let next = tokio::time::Instant::now() + Duration::from_secs(1);
                    self.check.as_mut().reset(next);
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_holds_at_most_its_caps() {
        let clients = Arc::new(Clients::default());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let held: Vec<_> = (0..3).map(|_| clients.connect(a, 3).unwrap()).collect();
        assert!(clients.connect(a, 3).is_none(), "a fourth connection of a");
        assert!(
            clients.connect(b, 3).is_some(),
            "another client is not affected"
        );
        let slot = clients.instance(a, 1).unwrap();
        assert!(clients.instance(a, 1).is_none());
        drop(slot);
        assert!(
            clients.instance(a, 1).is_some(),
            "a slot given back is free again"
        );
        drop(held);
        assert!(clients.connect(a, 3).is_some());
        // 0: no cap.
        let many: Vec<_> = (0..1000).map(|_| clients.connect(b, 0).unwrap()).collect();
        assert_eq!(many.len(), 1000);
    }

    #[test]
    fn a_small_body_may_take_the_grace_and_then_the_minimum_rate() {
        let admission = Admission::default();
        assert_eq!(admission.small_body_deadline(0), Duration::from_secs(10));
        assert_eq!(
            admission.small_body_deadline(8 * 1024 * 5),
            Duration::from_secs(15)
        );
    }
}
