//! Which addresses the platform may connect to on a tenant's behalf. A webhook URL or a
//! restream target is whatever a tenant typed, and the platform's components sit inside
//! its network: an address of that network (or of the host) would let a tenant reach
//! internal services. Only public unicast addresses are allowed, in every form an IPv6
//! address can carry an IPv4 one.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is a public unicast address (see [`is_forbidden`]).
pub fn is_public(ip: IpAddr) -> bool {
    !is_forbidden(ip)
}

/// Whether the platform may not connect to `ip` for a tenant (a webhook delivery, a
/// restream): loopback, private, link-local, unspecified, multicast, broadcast, shared
/// (CGNAT), reserved, documentation and benchmarking ranges, and the IPv6 forms of those
/// (IPv4-mapped, IPv4-compatible, NAT64, 6to4, unique local, site-local).
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_forbidden_v4(v4),
        IpAddr::V6(v6) => is_forbidden_v6(v6),
    }
}

fn is_forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0 // "this network", unspecified
        || a == 10 // private
        || a == 127 // loopback
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 169 && b == 254) // link-local
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 192 && b == 168) // private
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224 // multicast, reserved, broadcast
}

fn is_forbidden_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded_v4 =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if ip.is_unspecified() || ip.is_loopback() {
        return true;
    }
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated): the IPv4 inside.
    if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
        return is_forbidden_v4(embedded_v4(s[6], s[7]));
    }
    // 64:ff9b::a.b.c.d (NAT64, well known): the IPv4 the translator reaches.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_forbidden_v4(embedded_v4(s[6], s[7]));
    }
    // 2002:aabb:ccdd::/48 (6to4): the IPv4 it tunnels to.
    if s[0] == 0x2002 {
        return is_forbidden_v4(embedded_v4(s[1], s[2]));
    }
    let first = s[0];
    (first == 0x64 && s[1] == 0xff9b && s[2] == 1) // 64:ff9b:1::/48, local-use NAT64
        || first & 0xff00 == 0 // ::/8 (reserved, incl. the forms above and ::ffff:0:0:0/96)
        || first == 0x0100 && s[1..4] == [0; 3] // 100::/64, discard-only
        || first & 0xfe00 == 0x2000 && s[1] < 0x200 // 2001::/23, IETF assignments (Teredo, benchmarking, ORCHID)
        || first == 0x2001 && s[1] == 0x0db8 // documentation
        || first & 0xfff0 == 0x3ff0 // 3fff::/20, documentation
        || first & 0xfe00 == 0xfc00 // unique local
        || first & 0xffc0 == 0xfe80 // link-local
        || first & 0xffc0 == 0xfec0 // site-local (deprecated)
        || first & 0xff00 == 0xff00 // multicast
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forbidden(text: &str) -> bool {
        is_forbidden(text.parse().unwrap())
    }

    #[test]
    fn public_addresses_are_allowed() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.0.1",
            "172.32.0.1",
            "192.169.0.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:4860:4860::8888",
        ] {
            assert!(!forbidden(ip), "{ip} should be allowed");
        }
    }

    #[test]
    fn internal_and_special_addresses_are_forbidden() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.0.1",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
            "2002:a9fe:a9fe::",
            "fc00::1",
            "fd12:3456:789a::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "3fff::1",
            "2001::1",
            "2001:2::1",
            "100::1",
        ] {
            assert!(forbidden(ip), "{ip} should be forbidden");
        }
    }
}
