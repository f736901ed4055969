//! Spin's outbound network policy, runtime config `[outbound_networking] block_networks`:
//! a list of CIDR blocks and the keyword `"private"`, which blocks every address that is
//! not globally routable (the `ip_network` crate's `is_global`, the definition Spin uses:
//! unspecified, loopback, RFC 1918 private, shared 100.64/10, link-local 169.254/16 with
//! the 169.254.169.254 metadata address, the 192.0.0/24 protocol block, documentation,
//! benchmarking and reserved ranges, broadcast; IPv6 loopback, unique-local fc00::/7,
//! link-local fe80::/10, documentation, and IPv4-mapped addresses of those).
//!
//! As in Spin, the check runs at connect time on the resolved addresses: blocked ones
//! are dropped, and when none is left the request fails with `destination-ip-prohibited`.
//! An IPv4-compatible or -mapped IPv6 address is checked as its IPv4 address too, so
//! `::ffff:127.0.0.1` cannot slip past a block of `127.0.0.0/8`. `"private"` also blocks
//! what the platform's own address rule forbids (`domain::network`): the
//! IPv4-translated, NAT64 and 6to4 forms of a private address, which `is_global` lets
//! through.

use std::net::{IpAddr, SocketAddr};

use anyhow::{Result, anyhow};
use ip_network::IpNetwork;

/// The blocked networks of an application (empty: nothing blocked).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockedNetworks {
    networks: Vec<IpNetwork>,
    /// Block every address that is not globally routable.
    block_private: bool,
}

impl BlockedNetworks {
    /// Parses `block_networks` entries: `"private"` or a CIDR block; host bits are
    /// truncated as in Spin (`8.8.8.8/16` blocks `8.8.0.0/16`); a single address is
    /// written as a /32 (or /128) block, as Spin requires.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<BlockedNetworks> {
        let mut blocked = BlockedNetworks::default();
        for entry in entries {
            let entry = entry.as_ref();
            if entry == "private" {
                blocked.block_private = true;
                continue;
            }
            let network = IpNetwork::from_str_truncate(entry).map_err(|e| {
                anyhow!(
                    "block_networks entry {entry:?} is neither an IP network in CIDR notation \
                     nor the keyword \"private\" ({e:?})"
                )
            })?;
            blocked.networks.push(network);
        }
        Ok(blocked)
    }

    /// True when nothing is blocked.
    pub fn is_empty(&self) -> bool {
        !self.block_private && self.networks.is_empty()
    }

    /// Whether a connection to `ip` is refused.
    pub fn is_blocked(&self, ip: IpAddr) -> bool {
        if self.block_private
            && (!IpNetwork::from(ip).is_global() || domain::network::is_forbidden(ip))
        {
            return true;
        }
        if self.networks.iter().any(|n| n.contains(ip)) {
            return true;
        }
        match ip {
            IpAddr::V6(v6) => v6
                .to_ipv4()
                .is_some_and(|v4| self.is_blocked(IpAddr::V4(v4))),
            IpAddr::V4(_) => false,
        }
    }

    /// Removes the blocked addresses from `addrs`; answers the removed ones.
    pub fn remove_blocked(&self, addrs: &mut Vec<SocketAddr>) -> Vec<SocketAddr> {
        if self.is_empty() {
            return Vec::new();
        }
        let (blocked, allowed) = std::mem::take(addrs)
            .into_iter()
            .partition(|a| self.is_blocked(a.ip()));
        *addrs = allowed;
        blocked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn private_covers_what_spin_blocks() {
        let b = BlockedNetworks::parse(&["private"]).unwrap();
        for private in [
            "0.0.0.0",
            "10.10.10.10",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.1.1",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.0.1",
            "169.254.169.254",
            "192.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:10.10.10.10",
            "::ffff:127.0.0.1",
            "fc00::f00d",
            "fd12:3456::1",
            "fe80::1",
            // IPv4-compatible, -translated, NAT64 and 6to4 forms of loopback.
            "::127.0.0.1",
            "::ffff:0:7f00:1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
        ] {
            assert!(b.is_blocked(ip(private)), "{private}");
        }
        for public in ["8.8.8.8", "123.123.123.123", "2600::beef", "2a00:1450::1"] {
            assert!(!b.is_blocked(ip(public)), "{public}");
        }
    }

    #[test]
    fn cidr_blocks_truncate_and_cover_mapped_addresses() {
        let b =
            BlockedNetworks::parse(&["123.123.0.0/16", "2001::/96", "8.8.8.8/16", "1.2.3.4/32"])
                .unwrap();
        assert!(b.is_blocked(ip("123.123.123.123")));
        assert!(b.is_blocked(ip("::ffff:123.123.1.1")));
        assert!(b.is_blocked(ip("2001::1000")));
        assert!(b.is_blocked(ip("8.8.4.4")));
        assert!(b.is_blocked(ip("1.2.3.4")));
        assert!(!b.is_blocked(ip("1.2.3.5")));
        assert!(!b.is_blocked(ip("123.100.100.100")));
        assert!(!b.is_blocked(ip("127.0.0.1")), "only what is listed");
        assert!(BlockedNetworks::parse(&["nonsense"]).is_err());
        assert!(BlockedNetworks::parse(&["10.0.0.0/33"]).is_err());
        assert!(
            BlockedNetworks::parse(&["1.2.3.4"]).is_err(),
            "Spin wants CIDR notation"
        );
        assert!(BlockedNetworks::parse::<&str>(&[]).unwrap().is_empty());
    }

    #[test]
    fn remove_blocked_keeps_the_allowed_addresses() {
        let b = BlockedNetworks::parse(&["private", "123.123.0.0/16"]).unwrap();
        let mut addrs: Vec<SocketAddr> = [
            "127.0.0.1:80",
            "123.200.0.1:443",
            "123.123.1.1:443",
            "[::1]:8080",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let removed = b.remove_blocked(&mut addrs);
        assert_eq!(
            addrs,
            vec!["123.200.0.1:443".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(removed.len(), 3);
        let mut untouched = vec!["127.0.0.1:80".parse().unwrap()];
        assert!(
            BlockedNetworks::default()
                .remove_blocked(&mut untouched)
                .is_empty()
        );
        assert_eq!(untouched.len(), 1);
    }
}
