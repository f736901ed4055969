//! The public RTMP port is the agent's, not nginx's: every encoder connects here, and the
//! agent relays the connections it admits to nginx's RTMP listener on loopback. nginx runs
//! one worker for RTMP and HLS alike (nginx-rtmp keeps live streams in one worker's
//! memory), so connections it holds for RTMP are connections HLS viewers cannot have.
//! The ingress bounds them:
//!
//! - per address (an IPv4 address, or an IPv6 /64): at most `rtmp_per_address`
//!   connections; one more is closed as soon as it is accepted;
//! - in all: at most `rtmp_connections`, well below nginx's `worker_connections`, so that
//!   HLS keeps the rest of the worker whatever RTMP clients do;
//! - in time: the RTMP handshake (C0, C1 and C2: 3,073 bytes from the client) must be
//!   complete within `rtmp_handshake_secs` of the connection, however slowly it trickles,
//!   and a connection that sends nothing for `rtmp_idle_secs` is closed.
//!
//! Each admitted connection reaches nginx from an address of its own in 127.1.0.0/16, so
//! that nginx's `on_publish` names an address the agent maps back to the client's (the
//! platform sees the encoder's address), and nginx tells the relayed connections from the
//! agent's own restreams (127.0.0.1), which alone may play.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What a client sends in an RTMP handshake: C0 (1 byte), C1 and C2 (1,536 bytes each).
pub const HANDSHAKE_BYTES: u64 = 1 + 1536 + 1536;
/// The most connections one ingress can relay: the size of 127.1.0.0/16 less its ends.
pub const MAX_CONNECTIONS: usize = 65_000;
/// How long nginx may take to accept a relayed connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The ingress's bounds (from the agent's configuration).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_address: usize,
    pub total: usize,
    pub handshake: Duration,
    pub idle: Duration,
}

/// The key a client is counted under: its IPv4 address (also when written as an
/// IPv4-mapped IPv6 address), or the /64 of its IPv6 address (one subscriber's share).
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// The loopback address the relayed connection of `slot` comes from.
pub fn source_of(slot: usize) -> Ipv4Addr {
    let n = slot + 1;
    Ipv4Addr::new(127, 1, (n >> 8) as u8, (n & 0xff) as u8)
}

fn slot_of(source: Ipv4Addr) -> Option<usize> {
    let [a, b, c, d] = source.octets();
    let n = (usize::from(c) << 8) | usize::from(d);
    (a == 127 && b == 1 && n > 0).then(|| n - 1)
}

#[derive(Default)]
struct Table {
    per_key: HashMap<IpAddr, usize>,
    /// The client of each slot in use.
    slots: Vec<Option<IpAddr>>,
    free: Vec<usize>,
    in_use: usize,
}

/// Who holds which of the ingress's connections.
pub struct Ingress {
    limits: Limits,
    table: Mutex<Table>,
}

/// An admitted connection: released when dropped.
pub struct Admission {
    ingress: Arc<Ingress>,
    pub slot: usize,
    key: IpAddr,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut table = self.ingress.lock();
        if let Some(count) = table.per_key.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                table.per_key.remove(&self.key);
            }
        }
        table.slots[self.slot] = None;
        table.free.push(self.slot);
        table.in_use -= 1;
    }
}

impl Ingress {
    pub fn new(limits: Limits) -> Arc<Ingress> {
        Arc::new(Ingress {
            limits: Limits {
                total: limits.total.min(MAX_CONNECTIONS),
                ..limits
            },
            table: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `client`, or answers `None` when its address or the
    /// ingress is at its limit.
    pub fn admit(self: &Arc<Self>, client: IpAddr) -> Option<Admission> {
        let key = client_key(client);
        let mut table = self.lock();
        let held = table.per_key.get(&key).copied().unwrap_or(0);
        if held >= self.limits.per_address || table.in_use >= self.limits.total {
            return None;
        }
        let slot = match table.free.pop() {
            Some(slot) => slot,
            None => {
                table.slots.push(None);
                table.slots.len() - 1
            }
        };
        table.slots[slot] = Some(client);
        table.in_use += 1;
        *table.per_key.entry(key).or_default() += 1;
        Some(Admission {
            ingress: self.clone(),
            slot,
            key,
        })
    }

    /// The client whose connection nginx sees coming from `source` (`addr` of its
    /// notifications), while it is connected.
    pub fn client_of(&self, source: &str) -> Option<IpAddr> {
        let slot = slot_of(source.parse().ok()?)?;
        self.lock().slots.get(slot).copied().flatten()
    }

    /// Connections held now.
    pub fn connections(&self) -> usize {
        self.lock().in_use
    }
}

/// Accepts on `listener` until `stop` flips, relaying admitted connections to `upstream`
/// (nginx's RTMP listener).
pub fn serve(
    ingress: Arc<Ingress>,
    listener: TcpListener,
    upstream: SocketAddr,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = crate::supervisor::stopped(&mut stop) => break,
            };
            let (client, from) = match accepted {
                Ok(accepted) => accepted,
                // Out of descriptors, most likely: let some close.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Over a limit: closed at once (dropped), before anything is read.
            let Some(admission) = ingress.admit(from.ip()) else {
                continue;
            };
            let limits = ingress.limits;
            tokio::spawn(async move {
                relay(client, source_of(admission.slot), upstream, limits).await;
                drop(admission);
            });
        }
    })
}

/// Copies between the client and nginx until either side closes, the handshake is late
/// or the client goes quiet.
async fn relay(client: TcpStream, source: Ipv4Addr, upstream: SocketAddr, limits: Limits) {
    let started = tokio::time::Instant::now();
    let Ok(nginx) = connect_from(source, upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = nginx.set_nodelay(true);
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_nginx, mut to_nginx) = nginx.into_split();
    let inbound = async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut received = 0u64;
        loop {
            let until = if received < HANDSHAKE_BYTES {
                (started + limits.handshake).min(tokio::time::Instant::now() + limits.idle)
            } else {
                tokio::time::Instant::now() + limits.idle
            };
            match tokio::time::timeout_at(until, from_client.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {
                    received += n as u64;
                    if to_nginx.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            }
        }
    };
    let outbound = tokio::io::copy(&mut from_nginx, &mut to_client);
    // Either direction ending ends the connection: both sockets close when dropped.
    tokio::select! {
        _ = inbound => {}
        _ = outbound => {}
    }
}

async fn connect_from(source: Ipv4Addr, upstream: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source.into(), 0))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(upstream)).await {
        Ok(connected) => connected,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_address: usize, total: usize) -> Limits {
        Limits {
            per_address,
            total,
            handshake: Duration::from_millis(300),
            idle: Duration::from_millis(300),
        }
    }

    #[test]
    fn clients_are_counted_by_address_and_ipv6_by_its_64() {
        let ingress = Ingress::new(limits(2, 5));
        let a: IpAddr = "203.0.113.7".parse().unwrap();
        let first = ingress.admit(a).unwrap();
        let _second = ingress
            .admit("::ffff:203.0.113.7".parse().unwrap())
            .unwrap();
        assert!(ingress.admit(a).is_none(), "a third from one address");
        let _v6 = ingress.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        let _v6b = ingress
            .admit("2001:db8:1:2:ffff::9".parse().unwrap())
            .unwrap();
        assert!(
            ingress
                .admit("2001:db8:1:2:abcd::1".parse().unwrap())
                .is_none(),
            "a third from one /64"
        );
        let _other = ingress.admit("198.51.100.1".parse().unwrap()).unwrap();
        assert!(
            ingress.admit("198.51.100.2".parse().unwrap()).is_none(),
            "the total"
        );
        assert_eq!(ingress.connections(), 5);
        // The client behind each relayed connection's source address.
        let source = source_of(first.slot).to_string();
        assert_eq!(ingress.client_of(&source), Some(a));
        drop(first);
        assert_eq!(ingress.client_of(&source), None);
        assert!(ingress.admit(a).is_some(), "a slot freed is taken again");
        assert_eq!(ingress.client_of("127.0.0.1"), None);
        assert_eq!(ingress.client_of("garbage"), None);
    }

    #[test]
    fn sources_are_distinct_loopback_addresses_other_than_the_agents() {
        assert_eq!(source_of(0), Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(source_of(255), Ipv4Addr::new(127, 1, 1, 0));
        let last = source_of(MAX_CONNECTIONS - 1);
        assert!(last.is_loopback() && last != Ipv4Addr::LOCALHOST);
        for slot in [0, 1, 254, 255, 256, 40_000, MAX_CONNECTIONS - 1] {
            assert_eq!(slot_of(source_of(slot)), Some(slot));
        }
    }

    /// An upstream that echoes; answers its address.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
        let mut buf = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                Err(_) => return false,
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => {}
            }
        }
    }

    #[tokio::test]
    async fn a_trickled_handshake_is_cut_at_its_deadline_and_one_too_many_at_once() {
        let upstream = echo().await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ingress = Ingress::new(Limits {
            handshake: Duration::from_millis(800),
            idle: Duration::from_millis(500),
            ..limits(1, 10)
        });
        let (_stop, stop_rx) = watch::channel(false);
        serve(ingress.clone(), listener, upstream, stop_rx);

        let mut trickler = TcpStream::connect(addr).await.unwrap();
        trickler.write_all(&[3]).await.unwrap();
        let mut echoed = [0u8; 1];
        trickler.read_exact(&mut echoed).await.unwrap();
        assert_eq!(echoed, [3], "relayed");
        // One more from the address is closed at once.
        let mut second = TcpStream::connect(addr).await.unwrap();
        assert!(closed_within(&mut second, Duration::from_millis(300)).await);
        // A byte every 200 ms keeps no connection past the handshake's deadline.
        let cut = async {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if trickler.write_all(&[0]).await.is_err() {
                    return;
                }
                let mut buf = [0u8; 64];
                if let Ok(Ok(0)) =
                    tokio::time::timeout(Duration::from_millis(10), trickler.read(&mut buf)).await
                {
                    return;
                }
            }
        };
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(3), cut)
            .await
            .expect("the trickled handshake is cut");
        assert!(started.elapsed() < Duration::from_millis(1500));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(ingress.connections(), 0);

        // A complete handshake goes on; silence ends it.
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(&vec![0u8; HANDSHAKE_BYTES as usize])
            .await
            .unwrap();
        let mut back = vec![0u8; HANDSHAKE_BYTES as usize];
        client.read_exact(&mut back).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        client.write_all(&[1]).await.unwrap();
        client.read_exact(&mut echoed).await.unwrap();
        assert!(closed_within(&mut client, Duration::from_secs(2)).await);
    }
}
