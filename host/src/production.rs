//! Local defaults, and the `--production` check that refuses to start while any is left.

use crate::variables::AppVariables;

/// What local mode sets where nothing else did (name, value).
pub const LOCAL_DEFAULTS: &[(&str, &str)] = &[("registration_mode", "open")];

/// Variables holding URLs that must not point at the local machine in production.
const PUBLIC_URL_VARIABLES: &[&str] = &[
    "base_url",
    "api_url",
    "relay_url",
    "sfu_server_url",
    "sfu_api_url",
    "rtmp_ingest_base",
    "playback_hls_base",
    "music_url",
];

/// Each local default still in place, as a sentence saying what to change; empty when
/// the configuration is fit for production. Only variables the manifest declares count.
pub fn local_defaults_left(vars: &AppVariables) -> Vec<String> {
    let values = &vars.values;
    let mut problems = Vec::new();
    if values.get("registration_mode").map(String::as_str) == Some("open") {
        problems.push(
            "registration_mode is \"open\": anyone may register an SDK client; set it to \"admin\""
                .to_string(),
        );
    }
    for name in &vars.generated {
        problems.push(format!(
            "{name} is a generated local secret; set SPIN_VARIABLE_{} (or a variables provider)",
            name.to_ascii_uppercase()
        ));
    }
    if values.get("webhook_allow_http").is_some_and(|v| is_set(v)) {
        problems.push(
            "webhook_allow_http is set: webhooks may be delivered over plain http; unset it"
                .to_string(),
        );
    }
    if values
        .get("restream_allow_private")
        .is_some_and(|v| is_set(v))
    {
        problems.push(
            "restream_allow_private is set: restreams may be pushed to private addresses; unset it"
                .to_string(),
        );
    }
    for name in PUBLIC_URL_VARIABLES {
        // The embedded relay's internal URL is loopback by design: the API calls the relay
        // in the same process.
        if vars.host_defaults.iter().any(|n| n == name) {
            continue;
        }
        if let Some(url) = values.get(*name)
            && points_at_this_machine(url)
        {
            problems.push(format!(
                "{name} = {url:?} points at this machine; set the public URL"
            ));
        }
    }
    problems
}

/// A flag variable counts as set unless empty or a spelling of "no".
fn is_set(value: &str) -> bool {
    !matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "false" | "0" | "no" | "off"
    )
}

/// Whether a URL's host is loopback, unspecified or `localhost`.
fn points_at_this_machine(url: &str) -> bool {
    let Some(host) = url_host(url) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
}

/// The host of `scheme://[userinfo@]host[:port][/...]`, without IPv6 brackets.
fn url_host(url: &str) -> Option<&str> {
    let (_, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split_once(']').map(|(h, _)| h);
    }
    Some(host_port.split(':').next().unwrap_or(host_port))
}

/// The start-up error listing every local default left in place.
pub fn refusal(problems: &[String]) -> anyhow::Error {
    let list: String = problems.iter().map(|p| format!("\n  - {p}")).collect();
    anyhow::anyhow!("--production: refusing to start with local defaults in place:{list}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Variables as (name, value) pairs for tests.
    fn vars(pairs: &[(&str, &str)], generated: &[&str]) -> AppVariables {
        AppVariables {
            values: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::HashMap<_, _>>(),
            generated: generated.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_production_configuration_passes() {
        let v = vars(
            &[
                ("registration_mode", "admin"),
                ("webhook_allow_http", "false"),
                ("base_url", "https://live.example.com"),
                ("api_url", "https://live.example.com"),
                ("relay_url", "http://relay.internal:8081"),
                ("sfu_server_url", "wss://my.livekit.cloud"),
                ("music_url", "https://music.example.com"),
                ("rtmp_ingest_base", "rtmp://ingest.example.com/live"),
                ("playback_hls_base", "https://cdn.example.com/hls"),
                ("restream_allow_private", "false"),
            ],
            &[],
        );
        assert!(
            local_defaults_left(&v).is_empty(),
            "{:?}",
            local_defaults_left(&v)
        );
    }

    #[test]
    fn each_local_default_is_listed() {
        let v = vars(
            &[
                ("registration_mode", "open"),
                ("webhook_allow_http", "true"),
                ("base_url", "http://127.0.0.1:3000"),
                ("api_url", "http://localhost:3000/"),
                ("relay_url", "http://[::1]:3000"),
                ("sfu_server_url", "ws://0.0.0.0:7880"),
                ("sfu_api_url", "https://sfu.example.com"),
                ("rtmp_ingest_base", "rtmp://127.0.0.1:1935/live"),
                ("playback_hls_base", "http://localhost:8080/hls"),
                ("music_url", "http://127.0.0.1:8090"),
                ("restream_allow_private", "true"),
            ],
            &["jwt_secret", "admin_token"],
        );
        let problems = local_defaults_left(&v);
        let text = problems.join("\n");
        assert_eq!(problems.len(), 12, "{text}");
        for needle in [
            "registration_mode",
            "jwt_secret",
            "SPIN_VARIABLE_ADMIN_TOKEN",
            "webhook_allow_http",
            "base_url",
            "api_url",
            "relay_url",
            "sfu_server_url",
            "rtmp_ingest_base",
            "playback_hls_base",
            "music_url",
            "restream_allow_private",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(!text.contains("sfu_api_url"), "{text}");
        let err = format!("{}", refusal(&problems));
        assert!(err.starts_with("--production"), "{err}");
    }

    #[test]
    fn url_hosts() {
        assert_eq!(url_host("http://a.b:80/x"), Some("a.b"));
        assert_eq!(url_host("https://user:pw@h/x"), Some("h"));
        assert_eq!(url_host("http://[::1]:3000"), Some("::1"));
        assert_eq!(url_host("no scheme"), None);
        assert!(points_at_this_machine("http://127.1.2.3"));
        assert!(points_at_this_machine("http://app.localhost:3000"));
        assert!(!points_at_this_machine("http://localhost.example.com"));
        assert!(!points_at_this_machine(""));
    }
}
