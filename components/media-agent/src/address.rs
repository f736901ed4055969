//! Where a restream may go. A target is whatever a broadcaster typed, and the media server
//! sits inside the platform's network: an address of that network (or of this host) would
//! let a broadcaster make the media server connect to internal services. Only public
//! unicast addresses are allowed, in every form an IPv6 address can carry an IPv4 one.

use std::net::Ipv6Addr;

/// The platform's one rule of which addresses a tenant may make it connect to.
pub use common::domain::network::is_forbidden;

/// A restream target's host and port, from an `rtmp://` or `rtmps://` URL. The authority
/// is read the way ffmpeg reads it (up to the first `/`, `?` or `#`), and anything that
/// could make the two readings differ (user info, backslashes, odd characters) is refused.
pub fn parse_target(url: &str) -> Result<(String, u16), &'static str> {
    let (rest, default_port) = if let Some(rest) = url.strip_prefix("rtmp://") {
        (rest, 1935)
    } else if let Some(rest) = url.strip_prefix("rtmps://") {
        (rest, 443)
    } else {
        return Err("only rtmp:// and rtmps:// targets are supported");
    };
    const MALFORMED: &str = "the target's address is malformed";
    if url
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '#' || c == '\\')
    {
        return Err(MALFORMED);
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let plain = |c: char| c.is_ascii_alphanumeric() || ".-_:[]".contains(c);
    if authority.is_empty() || !authority.chars().all(plain) {
        return Err(MALFORMED);
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or(MALFORMED)?;
        host.parse::<Ipv6Addr>().map_err(|_| MALFORMED)?;
        match after {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':').ok_or(MALFORMED)?)),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.contains(['[', ']', ':']) && !authority.starts_with('[') {
        return Err(MALFORMED);
    }
    let port = match port {
        None => default_port,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or(MALFORMED)?,
    };
    Ok((host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_parsed_like_ffmpeg_reads_them() {
        assert_eq!(
            parse_target("rtmp://a.rtmp.youtube.com/live2/abcd-efgh"),
            Ok(("a.rtmp.youtube.com".into(), 1935))
        );
        assert_eq!(
            parse_target("rtmps://live-api-s.facebook.com:443/rtmp/KEY?s=1"),
            Ok(("live-api-s.facebook.com".into(), 443))
        );
        assert_eq!(
            parse_target("rtmps://Host.Example"),
            Ok(("host.example".into(), 443))
        );
        assert_eq!(
            parse_target("rtmp://[2001:4860::1]:1936/app/key"),
            Ok(("2001:4860::1".into(), 1936))
        );
        assert_eq!(
            parse_target("rtmp://127.0.0.1:1935/x"),
            Ok(("127.0.0.1".into(), 1935))
        );
        for bad in [
            "http://example.com/live",
            "rtmpt://example.com/live",
            "file:///etc/passwd",
            "rtmp://",
            "rtmp:///app",
            "rtmp://user:pass@example.com/app",
            "rtmp://public.example#@127.0.0.1/app",
            "rtmp://127.0.0.1\\@public.example/app",
            "rtmp://example.com:0/app",
            "rtmp://example.com:99999/app",
            "rtmp://example.com:x/app",
            "rtmp://[::1/app",
            "rtmp://[::1]x/app",
            "rtmp://::1/app",
            "rtmp://exa mple.com/app",
            "rtmp://example.com/app\n",
        ] {
            assert!(parse_target(bad).is_err(), "{bad:?}");
        }
    }
}
