//! Where a restream may go. A target is whatever a broadcaster typed, and the media server
//! sits inside the platform's network: an address of that network (or of this host) would
//! let a broadcaster make the media server connect to internal services. Only public
//! unicast addresses are allowed, in every form an IPv6 address can carry an IPv4 one.

use std::net::Ipv6Addr;

/// The platform's one rule of which addresses a tenant may make it connect to.
pub use domain::network::is_forbidden;

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

/// A restream target, read once: where to connect, and what to tell the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `rtmps://`: TLS, verified against `host`.
    pub secure: bool,
    /// The host as typed (lowercase): a name, or an IP address (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    /// Everything after the authority: `/app/key?query`. It names the broadcaster's key on
    /// that service: never logged.
    pub rest: String,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, &'static str> {
        let (host, port) = parse_target(url)?;
        let secure = url.starts_with("rtmps://");
        let after_scheme = &url[if secure { 8 } else { 7 }..];
        let rest = after_scheme
            .find(['/', '?'])
            .map_or("", |at| &after_scheme[at..]);
        Ok(Target {
            secure,
            host,
            port,
            rest: rest.to_string(),
        })
    }

    /// The `tcUrl` ffmpeg would send had it connected to the URL itself
    /// (`rtmp[s]://host:port/<app>`, the app read the way ffmpeg reads it): the target
    /// sees its own name even though the media server connects to the address it checked.
    pub fn tc_url(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let scheme = if self.secure { "rtmps" } else { "rtmp" };
        format!("{scheme}://{host}:{}/{}", self.port, rtmp_app(&self.rest))
    }
}

/// The RTMP application of a URL's path, as ffmpeg's RTMP client reads it: the first
/// segment, or the first two when the stream name has a slash of its own
/// (`/app/instance/name`).
pub fn rtmp_app(rest: &str) -> String {
    let path = rest.split('?').next().unwrap_or("");
    let next = path.strip_prefix('/').unwrap_or(path);
    match next.find('/') {
        None => next.to_string(),
        Some(p) => {
            let after = &next[p + 1..];
            let colon = after.find(':');
            match after.find('/') {
                Some(f) if colon.is_none_or(|c| c > f) => next[..p + 1 + f].to_string(),
                _ => next[..p].to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_keeps_its_name_for_the_tc_url() {
        let t = Target::parse("rtmps://Live-API-s.facebook.com:443/rtmp/KEY?s=1").unwrap();
        assert!(t.secure);
        assert_eq!(t.host, "live-api-s.facebook.com");
        assert_eq!(t.rest, "/rtmp/KEY?s=1");
        assert_eq!(t.tc_url(), "rtmps://live-api-s.facebook.com:443/rtmp");
        let t = Target::parse("rtmp://a.rtmp.youtube.com/live2/abcd-efgh").unwrap();
        assert_eq!(t.tc_url(), "rtmp://a.rtmp.youtube.com:1935/live2");
        let t = Target::parse("rtmp://[2001:4860::1]:1936/app/inst/key").unwrap();
        assert_eq!(t.tc_url(), "rtmp://[2001:4860::1]:1936/app/inst");
        assert_eq!(t.rest, "/app/inst/key");
        assert_eq!(rtmp_app("/live"), "live");
        assert_eq!(rtmp_app("/app/mp4:file/x"), "app");
        assert_eq!(rtmp_app(""), "");
    }

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
