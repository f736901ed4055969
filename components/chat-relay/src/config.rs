//! How the relay runs: its settings, read from the environment by `main` (and by an
//! embedding host such as edgehost), and the browser origins it accepts.

use std::collections::BTreeSet;
use std::time::Duration;

/// Default of `MAX_CONNECTIONS`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Default of `MAX_CONNECTIONS_PER_IP`.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 50;
/// Default of `BATCH_WINDOW_MS`: events that follow a delivery wait at most this long.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(25);
/// The longest batch window `BATCH_WINDOW_MS` may set: longer would be felt as lag.
pub const MAX_BATCH_WINDOW_MS: u64 = 100;
/// Default of `INTERNAL_LISTEN`, where the internal events endpoint listens.
pub const DEFAULT_INTERNAL_LISTEN: &str = "127.0.0.1:3101";
/// Default of `LISTEN`, the public listener (`/ws/...` and `/healthz`).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3001";
/// The path prefix of the public sockets: a proxy in front of the platform sends it to
/// the relay and everything else to the Spin application.
pub const PUBLIC_PATH_PREFIX: &str = "/ws/";

/// Every environment variable the `chat-relay` binary reads, and whether it is required.
/// Deployment manifests are checked against this list (`tests/tests/platform/deploy_manifests.rs`).
pub const ENVIRONMENT: &[(&str, bool)] = &[
    ("LISTEN", false),
    ("INTERNAL_LISTEN", false),
    ("API_URL", false),
    ("BASE_URL", false),
    ("JWT_SECRET", true),
    ("RELAY_SECRET", true),
    ("REDIS_URL", false),
    ("QUEUE_CAPACITY", false),
    ("BATCH_WINDOW_MS", false),
    ("MAX_CONNECTIONS", false),
    ("MAX_CONNECTIONS_PER_IP", false),
    ("TRUST_PROXY", false),
    ("ALLOWED_ORIGINS", false),
    ("API_CA_FILE", false),
];

/// Whether `name` is one of the relay's environment variables.
pub fn is_environment_variable(name: &str) -> bool {
    ENVIRONMENT.iter().any(|(known, _)| *known == name)
}

/// How the relay runs.
#[derive(Clone)]
pub struct Config {
    /// Where the platform's API is, e.g. `http://127.0.0.1:3000`.
    pub api_url: String,
    /// The HS256 secret of user tokens.
    pub jwt_secret: String,
    /// The secret shared with the API (`X-Relay-Secret`).
    pub relay_secret: String,
    /// Redis for scale-out; `None` runs alone.
    pub redis_url: Option<String>,
    /// Frames (a room's deliveries, each 32 KiB at most, answers and pings) a socket may
    /// have waiting, unwritten, before it is disconnected as too slow.
    pub queue_capacity: usize,
    /// How long a room gathers the events that follow a delivery before the next one
    /// (`BATCH_WINDOW_MS`, default 25 ms; 0 sends every event on its own).
    pub batch_window: Duration,
    /// How often the server pings each socket.
    pub ping_interval: Duration,
    /// A socket silent (no frame, no pong) for this long is closed.
    pub idle_timeout: Duration,
    /// Messages of history sent on connect.
    pub history_limit: u32,
    /// Sockets (open, or being upgraded) this process holds at most; more answer 503.
    pub max_connections: usize,
    /// Sockets one client address holds at most; more answer 429.
    pub max_connections_per_ip: usize,
    /// Take the client address from the last `X-Forwarded-For` hop instead of the TCP
    /// peer: only behind a proxy that appends it (and that clients cannot bypass).
    pub trust_forwarded_for: bool,
    /// The browser origins that may open sockets.
    pub allowed_origins: AllowedOrigins,
    /// Certificate authorities trusted for an `https://` API besides the public web's
    /// (a private CA in front of the app).
    pub api_roots: Vec<reqwest::Certificate>,
}

impl Config {
    pub fn new(api_url: &str, jwt_secret: &str, relay_secret: &str) -> Config {
        Config {
            api_url: api_url.to_string(),
            jwt_secret: jwt_secret.to_string(),
            relay_secret: relay_secret.to_string(),
            redis_url: None,
            queue_capacity: 256,
            batch_window: DEFAULT_BATCH_WINDOW,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            history_limit: 50,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            trust_forwarded_for: false,
            allowed_origins: AllowedOrigins::default(),
            api_roots: Vec::new(),
        }
    }

    /// Reads the settings that do not depend on the platform's secrets from the
    /// environment (through `get`): `REDIS_URL`, `QUEUE_CAPACITY`, `BATCH_WINDOW_MS`, `MAX_CONNECTIONS`,
    /// `MAX_CONNECTIONS_PER_IP`, `TRUST_PROXY`, `ALLOWED_ORIGINS` and `API_CA_FILE` (a PEM
    /// file of certificate authorities to trust for the API). Unset or empty variables keep
    /// the current value.
    pub fn read_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), String> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let number = |name: &str| -> Result<Option<usize>, String> {
            get(name)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("{name} must be a positive whole number"))
                })
                .transpose()
        };
        if let Some(url) = get("REDIS_URL") {
            self.redis_url = Some(url);
        }
        if let Some(n) = number("QUEUE_CAPACITY")? {
            self.queue_capacity = n;
        }
        if let Some(v) = get("BATCH_WINDOW_MS") {
            let ms = v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms <= MAX_BATCH_WINDOW_MS)
                .ok_or_else(|| {
                    format!("BATCH_WINDOW_MS is a whole number of milliseconds, 0 to {MAX_BATCH_WINDOW_MS}")
                })?;
            self.batch_window = Duration::from_millis(ms);
        }
        if let Some(n) = number("MAX_CONNECTIONS")? {
            self.max_connections = n;
        }
        if let Some(n) = number("MAX_CONNECTIONS_PER_IP")? {
            self.max_connections_per_ip = n;
        }
        if let Some(v) = get("TRUST_PROXY") {
            self.trust_forwarded_for = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => return Err("TRUST_PROXY is true or false".into()),
            };
        }
        if let Some(list) = get("ALLOWED_ORIGINS") {
            self.allowed_origins.extend_from_list(&list)?;
        }
        if let Some(path) = get("API_CA_FILE") {
            let pem = std::fs::read(path.trim())
                .map_err(|e| format!("API_CA_FILE {path}: cannot read it: {e}"))?;
            let roots = reqwest::Certificate::from_pem_bundle(&pem)
                .ok()
                .filter(|roots| !roots.is_empty())
                .ok_or_else(|| format!("API_CA_FILE {path}: no PEM certificate in it"))?;
            self.api_roots.extend(roots);
        }
        Ok(())
    }
}

impl std::fmt::Debug for Config {
    /// Everything but the secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("api_url", &self.api_url)
            .field("redis_url", &self.redis_url.is_some())
            .field("queue_capacity", &self.queue_capacity)
            .field("batch_window", &self.batch_window)
            .field("ping_interval", &self.ping_interval)
            .field("idle_timeout", &self.idle_timeout)
            .field("history_limit", &self.history_limit)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_ip", &self.max_connections_per_ip)
            .field("trust_forwarded_for", &self.trust_forwarded_for)
            .field("allowed_origins", &self.allowed_origins)
            .field("api_roots", &self.api_roots.len())
            .finish_non_exhaustive()
    }
}

/// The browser origins allowed to open sockets. A request without an `Origin` header (not
/// a browser's) is always allowed: the check stops other sites' pages from using a
/// visitor's browser, it does not authenticate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedOrigins {
    any: bool,
    origins: BTreeSet<String>,
}

impl AllowedOrigins {
    /// Every origin.
    pub fn any() -> AllowedOrigins {
        AllowedOrigins {
            any: true,
            origins: BTreeSet::new(),
        }
    }

    /// Adds the entries of a comma-separated list: origins or URLs (their origin counts),
    /// or `*` for any origin.
    pub fn extend_from_list(&mut self, list: &str) -> Result<(), String> {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                self.any = true;
            } else {
                self.allow(entry)?;
            }
        }
        Ok(())
    }

    /// Allows the origin of `url` (e.g. the platform's `base_url`).
    pub fn allow(&mut self, url: &str) -> Result<(), String> {
        let origin =
            origin_of(url).ok_or_else(|| format!("{url:?} is not an http(s) origin or URL"))?;
        self.origins.insert(origin);
        Ok(())
    }

    /// Whether a request with this `Origin` header (None: no header) may open a socket.
    pub fn allows(&self, origin: Option<&str>) -> bool {
        match origin {
            None => true,
            Some(_) if self.any => true,
            Some(header) => origin_of(header).is_some_and(|o| self.origins.contains(&o)),
        }
    }

    /// The allowed origins, for start-up messages (`*` when any is).
    pub fn describe(&self) -> String {
        if self.any {
            return "*".into();
        }
        if self.origins.is_empty() {
            return "(none: only clients that send no Origin)".into();
        }
        self.origins.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// The ASCII origin (`scheme://host[:port]`, default port left out) of an http(s) URL or
/// origin; `None` for anything else (`null`, other schemes, garbage).
fn origin_of(text: &str) -> Option<String> {
    let url = url::Url::parse(text.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return None;
    }
    Some(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn every_variable_the_settings_read_is_listed() {
        let asked = std::cell::RefCell::new(Vec::new());
        let mut config = Config::new("http://127.0.0.1:3000", "j", "r");
        config
            .read_env(|name| {
                asked.borrow_mut().push(name.to_string());
                None
            })
            .unwrap();
        let asked = asked.into_inner();
        assert!(asked.len() >= 6, "{asked:?}");
        for name in asked {
            assert!(is_environment_variable(&name), "{name}");
        }
    }

    #[test]
    fn without_a_list_only_clients_without_origin_are_allowed() {
        let none = AllowedOrigins::default();
        assert!(none.allows(None));
        assert!(!none.allows(Some("https://evil.example")));
        assert!(!none.allows(Some("null")));
    }

    #[test]
    fn origins_compare_by_scheme_host_and_port() {
        let mut allowed = AllowedOrigins::default();
        allowed
            .allow("https://Live.Example.com/some/page?x=1")
            .unwrap();
        allowed.allow("http://127.0.0.1:3000").unwrap();
        assert!(allowed.allows(Some("https://live.example.com")));
        assert!(allowed.allows(Some("https://live.example.com:443")));
        assert!(allowed.allows(Some("http://127.0.0.1:3000")));
        assert!(!allowed.allows(Some("http://live.example.com")));
        assert!(!allowed.allows(Some("https://live.example.com:8443")));
        assert!(!allowed.allows(Some("https://live.example.com.evil.example")));
        assert!(!allowed.allows(Some("http://127.0.0.1:3001")));
        assert!(!allowed.allows(Some("null")));
        assert!(!allowed.allows(Some("")));
    }

    #[test]
    fn a_star_allows_any_origin() {
        let mut allowed = AllowedOrigins::default();
        allowed.extend_from_list("https://a.example, *").unwrap();
        assert!(allowed.allows(Some("https://anything.example")));
        assert!(allowed.allows(Some("null")));
        assert_eq!(allowed.describe(), "*");
        assert!(AllowedOrigins::any().allows(Some("https://x.example")));
    }

    #[test]
    fn entries_that_are_not_http_origins_are_refused() {
        let mut allowed = AllowedOrigins::default();
        assert!(allowed.extend_from_list("ftp://files.example").is_err());
        assert!(allowed.extend_from_list("not a url").is_err());
        assert!(allowed.extend_from_list("null").is_err());
    }

    #[test]
    fn the_environment_sets_limits_origins_and_the_proxy_choice() {
        let mut c = Config::new("http://api", "j", "r");
        assert_eq!(
            (c.max_connections, c.max_connections_per_ip),
            (DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_IP)
        );
        assert!(!c.trust_forwarded_for);
        c.read_env(env(&[
            ("MAX_CONNECTIONS", "20"),
            ("MAX_CONNECTIONS_PER_IP", " 3 "),
            ("TRUST_PROXY", "true"),
            (
                "ALLOWED_ORIGINS",
                "https://app.example,https://admin.example",
            ),
            ("QUEUE_CAPACITY", ""),
            ("BATCH_WINDOW_MS", "0"),
            ("REDIS_URL", "redis://127.0.0.1:6379/"),
        ]))
        .unwrap();
        assert_eq!((c.max_connections, c.max_connections_per_ip), (20, 3));
        assert_eq!(c.queue_capacity, 256, "empty keeps the default");
        assert_eq!(c.batch_window, Duration::ZERO);
        assert!(c.trust_forwarded_for);
        assert!(c.allowed_origins.allows(Some("https://admin.example")));
        assert!(!c.allowed_origins.allows(Some("https://other.example")));
        assert_eq!(c.redis_url.as_deref(), Some("redis://127.0.0.1:6379/"));
        for bad in [
            ("MAX_CONNECTIONS", "0"),
            ("MAX_CONNECTIONS_PER_IP", "-1"),
            ("TRUST_PROXY", "maybe"),
            ("BATCH_WINDOW_MS", "250"),
            ("BATCH_WINDOW_MS", "-5"),
            ("ALLOWED_ORIGINS", "javascript:alert(1)"),
        ] {
            assert!(c.read_env(env(&[bad])).is_err(), "{bad:?}");
        }
    }
}
