//! The nginx configuration, rendered from `nginx.conf.template` (committed beside the
//! crate). Each substituted value is checked for its kind first, so that no setting can
//! end a directive or open a block: the file nginx reads is the template plus values that
//! are plain paths, names, addresses and numbers.

use std::net::SocketAddr;
use std::path::Path;

/// The template, `{{placeholder}}`s and all.
pub const TEMPLATE: &str = include_str!("../nginx.conf.template");

/// The values of one rendering.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    /// The RTMP module to load; empty when built in.
    pub rtmp_module: &'a Path,
    /// Absolute.
    pub state_dir: &'a Path,
    /// nginx's RTMP listener: loopback, behind the agent's ingress (`ingress.rs`).
    pub rtmp_listen: SocketAddr,
    pub rtmp_app: &'a str,
    /// The agent's hook listener (loopback).
    pub hook_addr: SocketAddr,
    /// The first path segment of every hook (hex): only nginx knows it, so that another
    /// process on the host cannot speak for nginx.
    pub hook_token: &'a str,
    pub update_secs: u64,
    pub http_listen: SocketAddr,
    /// The agent's statistics listener (loopback).
    pub stat_listen: SocketAddr,
    /// The first path segment of the statistics (hex): only the agent knows it.
    pub stat_token: &'a str,
    pub hls_prefix: &'a str,
    /// `domain::media::playback_key` of the media secret.
    pub playback_key: &'a str,
    /// Replays are read through the agent's loopback reader (`/<hook_token>/store/`, an
    /// S3-compatible store), not from `<state_dir>/media/` (the local store).
    pub media_from_reader: bool,
}

/// The configuration nginx reads, or why a value cannot go into it.
pub fn render(v: &Values) -> Result<String, String> {
    let state_dir = safe_path(v.state_dir, "the state directory")?;
    let load_module = if v.rtmp_module.as_os_str().is_empty() {
        "# The RTMP module is built into this nginx.".to_string()
    } else {
        format!(
            "load_module {};",
            safe_path(v.rtmp_module, "the RTMP module")?
        )
    };
    safe_name(v.rtmp_app, "the RTMP application")?;
    safe_prefix(v.hls_prefix)?;
    if v.playback_key.len() < 32 || !v.playback_key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the playback key is not hex".into());
    }
    if !v.hook_addr.ip().is_loopback()
        || !v.stat_listen.ip().is_loopback()
        || !v.rtmp_listen.ip().is_loopback()
    {
        return Err("the agent's own listeners must be on loopback".into());
    }
    for token in [v.hook_token, v.stat_token] {
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("the agent's tokens must be hex".into());
        }
    }
    // Each location sets `$object` (a name its own pattern checked) and reads it with
    // `media_read`.
    let (media_cache_path, media_cache, media_read) = if v.media_from_reader {
        (
            format!(
                "proxy_cache_path {state_dir}/tmp/media-cache levels=1:2 keys_zone=media:10m \
                 max_size=1g inactive=10m use_temp_path=off;"
            ),
            "proxy_cache media;\n            proxy_cache_key $object;\n            \
             proxy_cache_valid 200 10m;"
                .to_string(),
            format!(
                "proxy_set_header Accept-Encoding \"\";\n            \
                 proxy_pass http://{}/{}/store/$object;",
                v.hook_addr, v.hook_token
            ),
        )
    } else {
        (
            "# (the local media store: files, no cache)".to_string(),
            "# (files: no cache)".to_string(),
            format!("alias {state_dir}/media/$object;"),
        )
    };
    let values: [(&str, String); 14] = [
        ("load_module", load_module),
        ("state_dir", state_dir.to_string()),
        ("rtmp_listen", v.rtmp_listen.to_string()),
        ("rtmp_app", v.rtmp_app.to_string()),
        (
            "hook_url",
            format!("http://{}/{}", v.hook_addr, v.hook_token),
        ),
        ("update_secs", v.update_secs.to_string()),
        ("http_listen", v.http_listen.to_string()),
        ("stat_listen", v.stat_listen.to_string()),
        ("stat_token", v.stat_token.to_string()),
        ("hls_prefix", v.hls_prefix.to_string()),
        ("playback_key", v.playback_key.to_string()),
        ("media_cache_path", media_cache_path),
        ("media_cache", media_cache),
        ("media_read", media_read),
    ];
    substitute(TEMPLATE, &values)
}

/// Replaces every `{{name}}` of `template` with its value; an unknown or unclosed
/// placeholder is an error (a typo in the template must not reach nginx).
pub fn substitute(template: &str, values: &[(&str, String)]) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or("the template has an unclosed {{ placeholder")?;
        let name = &after[..end];
        let value = values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| format!("the template names an unknown value {{{{{name}}}}}"))?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// An absolute path of plain characters: nothing that nginx would read as the end of a
/// value (whitespace, `;`), a block (`{}`), a quote, a variable (`$`) or a comment (`#`).
pub fn safe_path<'a>(path: &'a Path, what: &str) -> Result<&'a str, String> {
    let text = path
        .to_str()
        .ok_or_else(|| format!("{what} ({}) is not UTF-8", path.display()))?;
    if !text.starts_with('/') {
        return Err(format!("{what} ({text}) must be an absolute path"));
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+@,=:".contains(c);
    if !text.chars().all(plain) || text.split('/').any(|s| s == "..") {
        return Err(format!(
            "{what} ({text}) may hold only letters, digits and / . _ - + @ , = :"
        ));
    }
    Ok(text)
}

/// An application name: `[A-Za-z0-9_-]`, 1 to 64 characters.
pub fn safe_name(name: &str, what: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} ({name:?}) may hold only letters, digits, _ and -"
        ))
    }
}

/// The HLS path prefix: empty (the root) or `/segment[/segment...]` of `[A-Za-z0-9_-]`;
/// it goes into a regular expression, where those characters are literal.
pub fn safe_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Ok(());
    }
    let ok = prefix.strip_prefix('/').is_some_and(|rest| {
        rest.split('/').all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the HLS prefix ({prefix:?}) must be a path like /hls (letters, digits, _ and -)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn values<'a>(state: &'a Path, module: &'a Path, key: &'a str) -> Values<'a> {
        Values {
            rtmp_module: module,
            state_dir: state,
            rtmp_listen: "127.0.0.1:40003".parse().unwrap(),
            rtmp_app: "live",
            hook_addr: "127.0.0.1:40001".parse().unwrap(),
            hook_token: "00ff",
            update_secs: 5,
            http_listen: "0.0.0.0:8080".parse().unwrap(),
            stat_listen: "127.0.0.1:40002".parse().unwrap(),
            stat_token: "0a0b",
            hls_prefix: "/hls",
            playback_key: key,
            media_from_reader: false,
        }
    }

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn renders_every_placeholder() {
        let state = PathBuf::from("/var/lib/media-agent");
        let module = PathBuf::from("/usr/lib/nginx/modules/ngx_rtmp_module.so");
        let conf = render(&values(&state, &module, KEY)).unwrap();
        assert!(!conf.contains("{{"), "{conf}");
        for expected in [
            "load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;",
            "pid /var/lib/media-agent/nginx.pid;",
            "listen 127.0.0.1:40003;",
            "application live {",
            "on_publish http://127.0.0.1:40001/00ff/on_publish;",
            "on_update http://127.0.0.1:40001/00ff/on_update;",
            "on_publish_done http://127.0.0.1:40001/00ff/on_publish_done;",
            "notify_update_timeout 5s;",
            "allow play 127.0.0.1;",
            "deny play all;",
            "listen 0.0.0.0:8080;",
            "location ~ \"^/hls/(?<sid>",
            &format!("secure_link_md5 \"$secure_link_expires$sid {KEY}\";"),
            "if (-f /var/lib/media-agent/open/$sid) {",
            "alias /var/lib/media-agent/hls/$sid/$file;",
            "listen 127.0.0.1:40002;",
            "location = /0a0b/stat {",
            "rtmp_stat all;",
        ] {
            assert!(conf.contains(expected), "missing {expected:?}");
        }
        // One application, which writes no HLS (the agent's ffmpeg does) and relays to
        // no second one.
        let applications: Vec<&str> = conf
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("application "))
            .collect();
        assert_eq!(applications, ["application live {"]);
        assert!(
            !conf.lines().any(|l| l.trim_start().starts_with("push ")),
            "{conf}"
        );
        let ingest = &conf[conf.find("application live {").unwrap()..];
        let ingest = &ingest[..ingest.find('}').unwrap()];
        assert!(ingest.contains("deny play all;"));
        assert!(ingest.contains("wait_key on;") && ingest.contains("wait_video on;"));
        assert!(!conf.contains("hls on;"), "{conf}");
        // Every playlist a viewer is served signed repeats the signature on its lines:
        // the master's media playlists and the media playlists' segments.
        let signed = &conf[conf.find("location ~ \"^/_signed/").unwrap()..];
        let signed = &signed[..signed.find("\n        }").unwrap()];
        assert!(
            signed.contains("(?<playlist>index|v[0-9])\\.m3u8$"),
            "{signed}"
        );
        assert!(signed.contains("sub_filter '.ts' '.ts?exp=$arg_exp&sig=$arg_sig';"));
        assert!(signed.contains("sub_filter '.m3u8' '.m3u8?exp=$arg_exp&sig=$arg_sig';"));
        assert!(signed.contains("alias /var/lib/media-agent/hls/$sid/$playlist.m3u8;"));
        assert!(conf.contains(
            "(?<file>index\\.m3u8|v[0-9]\\.m3u8|v[0-9]_[0-9]{1,12}\\.ts|thumbnail\\.jpg)$"
        ));
        // Viewers reach HLS by stream id only (never a key's directory), through the
        // agent's symlinks: nothing may stop nginx from following them.
        assert!(
            !conf
                .lines()
                .any(|l| l.trim_start().starts_with("disable_symlinks"))
        );
        // Live HLS through the links; replays and clips from the media store, which the
        // agent alone writes (a clip's own media by its id, a UUID, alone).
        for alias in conf.lines().filter(|l| l.contains("alias ")) {
            assert!(
                alias.contains("/hls/$sid/") || alias.contains("/media/$object;"),
                "{alias}"
            );
        }
        for location in conf.lines().filter(|l| l.contains("(?<cid>")) {
            assert!(
                location.contains("(?<cid>[0-9a-f]{8}-[0-9a-f]{4}-"),
                "{location}"
            );
        }
        let mp4 = &conf[conf.find("/hls/clips/(?<cid>").unwrap()..];
        let mp4 = &mp4[..mp4.find("\n        }").unwrap()];
        assert!(
            mp4.contains("(?<file>clip\\.mp4|thumbnail\\.jpg)$"),
            "{mp4}"
        );
        assert!(
            mp4.contains("secure_link_md5 \"$secure_link_expires$cid "),
            "{mp4}"
        );
        assert!(mp4.contains("video/mp4 mp4;"), "{mp4}");
        for location in conf.lines().filter(|l| l.contains("(?<sid>")) {
            assert!(
                location.contains("(?<sid>[0-9a-f]{8}-[0-9a-f]{4}-"),
                "{location}"
            );
        }
        // The statistics never reach the public server.
        let public = &conf[conf.find("listen 0.0.0.0:8080;").unwrap()..];
        let public = &public[..public.find("listen 127.0.0.1:40002;").unwrap()];
        assert!(!public.contains("rtmp_stat"));
        assert!(!public.contains("rtmp_control"));
    }

    #[test]
    fn replays_come_from_the_local_store_or_the_agents_reader() {
        let state = PathBuf::from("/var/lib/media-agent");
        let module = PathBuf::new();
        let mut v = values(&state, &module, KEY);
        let local = render(&v).unwrap();
        assert_eq!(
            local
                .matches("alias /var/lib/media-agent/media/$object;")
                .count(),
            4,
            "the replay's files, its signed playlists, a clip's playlists and its own media"
        );
        assert!(!local.contains("proxy_pass") && !local.contains("proxy_cache "));
        v.media_from_reader = true;
        let s3 = render(&v).unwrap();
        assert!(!s3.contains("/media/$object"), "{s3}");
        assert_eq!(
            s3.matches("proxy_pass http://127.0.0.1:40001/00ff/store/$object;")
                .count(),
            4
        );
        assert!(s3.contains(
            "proxy_cache_path /var/lib/media-agent/tmp/media-cache levels=1:2 keys_zone=media:10m"
        ));
        for conf in [&local, &s3] {
            // Every read names an object its location's pattern built, after the
            // signature is checked.
            let replay = &conf[conf.find("/replay/(?<file>").unwrap()..];
            let replay = &replay[..replay.find("\n        }").unwrap()];
            assert!(
                replay.contains("set $object replays/$sid/$file;"),
                "{replay}"
            );
            assert!(replay.find("secure_link_md5").unwrap() < replay.find("set $object").unwrap());
            let playlists = &conf[conf.find("location ~ \"^/_replay/").unwrap()..];
            let playlists = &playlists[..playlists.find("\n        }").unwrap()];
            assert!(playlists.contains("internal;"));
            assert!(playlists.contains("set $object replays/$sid/$playlist.m3u8;"));
            // Playlists change (a DVR playlist at every harvest): never cached.
            assert!(!playlists.contains("proxy_cache "), "{playlists}");
            assert!(playlists.contains("sub_filter '.ts' '.ts?exp=$arg_exp&sig=$arg_sig';"));
        }
        let s3_playlists = &s3[s3.find("location ~ \"^/_replay/").unwrap()..];
        assert!(s3_playlists.contains("proxy_set_header Accept-Encoding \"\";"));
    }

    #[test]
    fn a_built_in_module_is_not_loaded_and_the_prefix_may_be_the_root() {
        let state = PathBuf::from("/srv/media");
        let module = PathBuf::new();
        let mut v = values(&state, &module, KEY);
        v.hls_prefix = "";
        let conf = render(&v).unwrap();
        assert!(!conf.contains("load_module"));
        assert!(conf.contains("location ~ \"^/(?<sid>"));
    }

    #[test]
    fn refuses_values_that_could_inject_configuration() {
        let module = PathBuf::from("/m.so");
        for bad in [
            "/tmp/a b",
            "/tmp/a;b",
            "/tmp/a}",
            "/tmp/{a",
            "/tmp/'a",
            "/tmp/\"a",
            "/tmp/$a",
            "/tmp/#a",
            "/tmp/a\nb",
            "relative/dir",
            "/tmp/../etc",
        ] {
            let state = PathBuf::from(bad);
            assert!(render(&values(&state, &module, KEY)).is_err(), "{bad:?}");
            assert!(
                render(&values(Path::new("/ok"), &state, KEY)).is_err(),
                "module {bad:?}"
            );
        }
        let state = PathBuf::from("/srv/media");
        for app in ["", "a b", "a;", "a}", "a/b", "ä"] {
            let mut v = values(&state, &module, KEY);
            v.rtmp_app = app;
            assert!(render(&v).is_err(), "app {app:?}");
        }
        for prefix in ["hls", "/hls/", "/h s", "/h.s", "/(x)", "/a//b", "/a;", "/"] {
            let mut v = values(&state, &module, KEY);
            v.hls_prefix = prefix;
            assert!(render(&v).is_err(), "prefix {prefix:?}");
        }
        assert!(render(&values(&state, &module, "not hex; at all")).is_err());
        let mut v = values(&state, &module, KEY);
        v.hook_addr = "0.0.0.0:1".parse().unwrap();
        assert!(render(&v).is_err());
        let mut v = values(&state, &module, KEY);
        v.rtmp_listen = "0.0.0.0:1935".parse().unwrap();
        assert!(
            render(&v).is_err(),
            "nginx's RTMP listener is the ingress's alone"
        );
        let mut v = values(&state, &module, KEY);
        v.hook_token = "x;y";
        assert!(render(&v).is_err());
        let mut v = values(&state, &module, KEY);
        v.hls_prefix = "/live/hls-v2";
        assert!(render(&v).is_ok());
    }

    #[test]
    fn substitution_refuses_unknown_and_unclosed_placeholders() {
        let values = [("a", "1".to_string())];
        assert_eq!(substitute("x{{a}}y{{a}}", &values).unwrap(), "x1y1");
        assert!(substitute("{{b}}", &values).is_err());
        assert!(substitute("{{a", &values).is_err());
    }
}
