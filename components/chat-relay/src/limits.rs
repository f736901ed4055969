//! Connection caps: per process and per client address, taken before the handshake and
//! held until the socket ends.

use hyper::HeaderMap;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// Which cap a connection hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The process holds `max_connections` sockets.
    Process,
    /// The client address holds `max_connections_per_ip` sockets.
    PerClient,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// The open connections of one relay process.
pub struct ConnectionLimits {
    max_total: usize,
    max_per_client: usize,
    counts: Mutex<Counts>,
}

/// One counted connection; dropping it gives the place back.
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    client: IpAddr,
}

impl ConnectionLimits {
    pub fn new(max_total: usize, max_per_client: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_total,
            max_per_client,
            counts: Mutex::default(),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place for a connection from `client`, or says which cap is reached.
    pub fn acquire(self: &Arc<Self>, client: IpAddr) -> Result<ConnectionSlot, Refusal> {
        let client = client_key(client);
        let mut counts = self.counts();
        if counts.total >= self.max_total {
            return Err(Refusal::Process);
        }
        let mine = counts.per_client.entry(client).or_default();
        if *mine >= self.max_per_client {
            return Err(Refusal::PerClient);
        }
        *mine += 1;
        counts.total += 1;
        Ok(ConnectionSlot {
            limits: self.clone(),
            client,
        })
    }

    /// Connections held (open or being upgraded).
    pub fn total(&self) -> usize {
        self.counts().total
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.limits.counts();
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_client.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_client.remove(&self.client);
            }
        }
    }
}

/// What one client counts as: an IPv4 address, or an IPv6 /64 (one subscriber's usual
/// allocation, so that walking through it does not multiply the cap).
fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// The client's address: the TCP peer, or, when a proxy in front is trusted, the last
/// `X-Forwarded-For` hop (the address that proxy saw; earlier hops are the client's word).
pub fn client_ip(headers: &HeaderMap, peer: IpAddr, trust_forwarded_for: bool) -> IpAddr {
    if !trust_forwarded_for {
        return peer;
    }
    // Only the very last entry counts: when it is missing or malformed, the peer does,
    // never an earlier (client-written) hop.
    headers
        .get_all("x-forwarded-for")
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|hop| parse_hop(hop.trim()))
        .unwrap_or(peer)
}

/// `203.0.113.7`, `2001:db8::1`, `[2001:db8::1]:4711` or `203.0.113.7:4711`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<std::net::SocketAddr>().ok().map(|s| s.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn each_client_is_capped_and_places_come_back_when_dropped() {
        let limits = Arc::new(ConnectionLimits::new(10, 2));
        let a1 = limits.acquire(ip("10.0.0.1")).unwrap();
        let _a2 = limits.acquire(ip("10.0.0.1")).unwrap();
        assert_eq!(
            limits.acquire(ip("10.0.0.1")).err(),
            Some(Refusal::PerClient)
        );
        let _b = limits.acquire(ip("10.0.0.2")).unwrap();
        assert_eq!(limits.total(), 3);
        drop(a1);
        assert_eq!(limits.total(), 2);
        assert!(limits.acquire(ip("10.0.0.1")).is_ok());
    }

    #[test]
    fn the_process_cap_holds_across_clients() {
        let limits = Arc::new(ConnectionLimits::new(2, 5));
        let _a = limits.acquire(ip("10.0.0.1")).unwrap();
        let _b = limits.acquire(ip("10.0.0.2")).unwrap();
        assert_eq!(limits.acquire(ip("10.0.0.3")).err(), Some(Refusal::Process));
    }

    #[test]
    fn an_ipv6_64_is_one_client_and_mapped_ipv4_is_ipv4() {
        let limits = Arc::new(ConnectionLimits::new(10, 1));
        let _a = limits.acquire(ip("2001:db8:1:2::1")).unwrap();
        assert_eq!(
            limits.acquire(ip("2001:db8:1:2:ffff::9")).err(),
            Some(Refusal::PerClient)
        );
        assert!(limits.acquire(ip("2001:db8:1:3::1")).is_ok());
        let _v4 = limits.acquire(ip("192.0.2.1")).unwrap();
        assert_eq!(
            limits.acquire(ip("::ffff:192.0.2.1")).err(),
            Some(Refusal::PerClient)
        );
    }

    #[test]
    fn forwarded_for_counts_only_when_trusted_and_only_its_last_hop() {
        let peer = ip("127.0.0.1");
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            HeaderValue::from_static("1.1.1.1, 198.51.100.4"),
        );
        headers.append("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        assert_eq!(client_ip(&headers, peer, false), peer);
        assert_eq!(client_ip(&headers, peer, true), ip("203.0.113.9"));
        let mut bracketed = HeaderMap::new();
        bracketed.insert(
            "x-forwarded-for",
            HeaderValue::from_static("[2001:db8::7]:4711"),
        );
        assert_eq!(client_ip(&bracketed, peer, true), ip("2001:db8::7"));
        let mut junk = HeaderMap::new();
        junk.insert("x-forwarded-for", HeaderValue::from_static("unknown"));
        assert_eq!(client_ip(&junk, peer, true), peer);
        let mut trailing = HeaderMap::new();
        trailing.insert(
            "x-forwarded-for",
            HeaderValue::from_static("198.51.100.4, "),
        );
        assert_eq!(
            client_ip(&trailing, peer, true),
            peer,
            "no earlier hop counts"
        );
        assert_eq!(client_ip(&HeaderMap::new(), peer, true), peer);
    }
}
