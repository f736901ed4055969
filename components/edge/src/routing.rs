//! A route table: method, path pattern, and the endpoint, which knows its tier (who may
//! call it).
//!
//! Components declare their routes as one `const` table so a reader can check every
//! endpoint's tier against the spec in one place. Patterns use `{name}`
//! segments; a literal segment is more specific than a parameter, so
//! `/api/broadcasts/live` wins over `/api/broadcasts/{id}`. A last segment `{*name}` takes
//! the rest of the path (one segment or more), and the method `*` takes any method; both
//! are for proxies.

/// Who may call a route: what the request must prove before its handler runs. The
/// design's trust model: the API key is public (every app ships it), so it names the
/// tenant and proves nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Nothing: the contact form, public files, SFU health, pages.
    Public,
    /// `Authorization: Bearer <admin_token>` (the operator), unless registration is open.
    Admin,
    /// `X-API-Key` alone: names the tenant.
    App,
    /// `X-API-Key` plus a user's Bearer JWT of that tenant: one user.
    User,
    /// `X-API-Key` plus a valid HMAC signature with the secret key: the tenant's backend.
    Server,
    /// A user or the tenant's server; the handler sees which.
    UserOrServer,
    /// The app, a user or the tenant's server; the handler sees which.
    Caller,
    /// A user, directly or through the chat relay (`X-Relay-Secret` plus the user's JWT).
    RelayUser,
    /// Any caller, or the chat relay (with the user's JWT, or naming the tenant with
    /// `X-Tenant-Id` for anonymous reads).
    RelayCaller,
    /// The SFU: a LiveKit webhook JWT signed with the SFU API secret over the body.
    Sfu,
    /// The scheduler: `Authorization: Bearer <jobs_token>` (or `?token=`).
    Jobs,
    /// The media server (nginx-rtmp, through its agent): `X-Media-Secret: <media_secret>`.
    Media,
}

impl Tier {
    /// Every tier, in the order the documentation lists them.
    pub const ALL: [Tier; 12] = [
        Tier::Public,
        Tier::Admin,
        Tier::App,
        Tier::User,
        Tier::Server,
        Tier::UserOrServer,
        Tier::Caller,
        Tier::RelayUser,
        Tier::RelayCaller,
        Tier::Sfu,
        Tier::Jobs,
        Tier::Media,
    ];

    /// The tier as the route tables in the documentation name it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Public => "public",
            Tier::Admin => "admin",
            Tier::App => "app",
            Tier::User => "user",
            Tier::Server => "server",
            Tier::UserOrServer => "user, server",
            Tier::Caller => "app, user, server",
            Tier::RelayUser => "user, relay",
            Tier::RelayCaller => "app, user, server, relay",
            Tier::Sfu => "sfu",
            Tier::Jobs => "jobs",
            Tier::Media => "media",
        }
    }

    /// Whether the tenant's `X-API-Key` names the tenant on this tier.
    pub fn needs_api_key(self) -> bool {
        !matches!(
            self,
            Tier::Public | Tier::Admin | Tier::Sfu | Tier::Jobs | Tier::Media
        )
    }
}

/// What a route table entry runs; it knows the tier its handler was written for.
pub trait Endpoint {
    fn tier(&self) -> Tier;
}

#[derive(Debug, Clone, Copy)]
pub struct Route<E: 'static> {
    pub method: &'static str,
    pub pattern: &'static str,
    pub endpoint: E,
    /// The request must carry a valid `Idempotency-Key` (money-moving calls): checked
    /// before any credential, so that a call refused for want of one spends nothing (a
    /// signed call's signature stays unused, and the same call with the key goes through).
    /// Set by `idempotent_endpoint!`, whose handler runs once per key
    /// (`spin::idempotent`).
    pub idempotent: bool,
    /// What the route takes and answers, for the API document: derived from its typed
    /// handler (`endpoint!`), or written out (`documented_route!`). Only the native build
    /// (the document's generator) has it: a component never serves its own description,
    /// and the schema code it would keep alive would grow every wasm component by a third.
    #[cfg(not(target_arch = "wasm32"))]
    pub operation: Option<fn() -> crate::contract::Operation>,
}

impl<E: Endpoint> Route<E> {
    /// The tier the route's handler needs.
    pub fn tier(&self) -> Tier {
        self.endpoint.tier()
    }
}

pub const fn route<E>(method: &'static str, pattern: &'static str, endpoint: E) -> Route<E> {
    Route {
        method,
        pattern,
        endpoint,
        idempotent: false,
        #[cfg(not(target_arch = "wasm32"))]
        operation: None,
    }
}

/// Declares a route whose handler is not typed (an upload, whose body is streamed; a proxy,
/// which passes its body through): `"METHOD", "/path", handler, "Summary", |op| ...`, the
/// refinement saying what it takes and answers (see `endpoint!` for typed handlers).
#[macro_export]
macro_rules! documented_route {
    ($method:literal, $path:literal, $endpoint:expr, $summary:literal, $refine:expr $(,)?) => {{
        #[cfg(target_arch = "wasm32")]
        $crate::contract::unused_refinement($refine);
        $crate::routing::Route {
            method: $method,
            pattern: $path,
            endpoint: $endpoint,
            idempotent: false,
            #[cfg(not(target_arch = "wasm32"))]
            operation: Some(|| {
                $crate::contract::Operation::new(concat!($method, " ", $path), $summary)
                    .then($refine)
            }),
        }
    }};
}

/// The method of a route that accepts every method.
pub const ANY_METHOD: &str = "*";

/// Path parameters by name, in pattern order.
pub type Params = Vec<(&'static str, String)>;

/// A matched route and its path parameters.
#[derive(Debug)]
pub struct Matched<'a, E: 'static> {
    pub route: &'a Route<E>,
    pub params: Params,
}

impl<E> Matched<'_, E> {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    NotFound,
    /// The path exists but not with this method; carries the methods it has.
    MethodNotAllowed(Vec<&'static str>),
}

/// Finds the route for `method` and `path`. The most specific pattern that matches the path
/// names the resource: `/api/broadcasts/live` is its own resource, so `PATCH` on it is a 405
/// (with the methods of that resource), not a call of `/api/broadcasts/{id}` with the id
/// `live`. This is also how OpenAPI matches concrete paths before templated ones.
///
/// Every request runs this over the whole table: each pattern is first checked against the
/// path's beginning (most fail within a few bytes), matching allocates nothing, and only
/// the chosen route's parameters are copied out.
pub fn find<'a, E>(
    routes: &'a [Route<E>],
    method: &str,
    path: &str,
) -> Result<Matched<'a, E>, Miss> {
    let path = path.split('?').next().unwrap_or(path).trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    let matching: Vec<(Specificity, &'a Route<E>)> = routes
        .iter()
        .filter(|route| may_match(route.pattern, path))
        .filter_map(|route| match_pattern(route.pattern, &segments, |_, _| {}).map(|s| (s, route)))
        .collect();
    let Some(most_specific) = matching.iter().map(|(s, _)| *s).max() else {
        return Err(Miss::NotFound);
    };
    let mut other_methods = Vec::new();
    for (specificity, route) in matching {
        if specificity != most_specific {
            continue;
        }
        if route.method == ANY_METHOD || route.method.eq_ignore_ascii_case(method) {
            let mut params = Params::new();
            match_pattern(route.pattern, &segments, |name, value| {
                params.push((name, value.join("/")));
            });
            return Ok(Matched { route, params });
        }
        other_methods.push(route.method);
    }
    other_methods.sort_unstable();
    other_methods.dedup();
    Err(Miss::MethodNotAllowed(other_methods))
}

/// Whether `path` (without its query and trailing `/`) can match `pattern`: it begins with
/// the pattern's text up to its first parameter, or is the whole pattern if it has none.
/// Most of a table fails this within a few bytes, before any segment is looked at.
fn may_match(pattern: &str, path: &str) -> bool {
    let (pattern, path) = (pattern.trim_end_matches('/').as_bytes(), path.as_bytes());
    match pattern.iter().position(|&b| b == b'{') {
        Some(first_param) => path.starts_with(&pattern[..first_param]),
        None => path == pattern,
    }
}

/// How specific a matching pattern is: which of its segments are literal, first segment
/// highest (a literal beats a parameter at the first place they differ; patterns are far
/// shorter than the 64 segments this counts), then how many segments it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Specificity {
    literal: u64,
    segments: usize,
}

/// Matches one pattern against the path's segments; calls `param` with each parameter's
/// name and the segments it takes (one, or the rest of the path for `{*name}`).
fn match_pattern<'s>(
    pattern: &'static str,
    segments: &[&'s str],
    mut param: impl FnMut(&'static str, &[&'s str]),
) -> Option<Specificity> {
    let pattern = pattern.trim_end_matches('/');
    let count = pattern.split('/').count();
    let mut specificity = Specificity {
        literal: 0,
        segments: 0,
    };
    for (index, part) in pattern.split('/').enumerate() {
        specificity.segments = index + 1;
        let rest = (index + 1 == count)
            .then(|| part.strip_prefix("{*").and_then(|p| p.strip_suffix('}')))
            .flatten();
        if let Some(name) = rest {
            let tail = segments.get(index..).unwrap_or_default();
            if tail.is_empty() || tail == [""] {
                return None;
            }
            param(name, tail);
            return Some(specificity);
        }
        let segment = segments.get(index)?;
        if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            if segment.is_empty() {
                return None;
            }
            param(name, std::slice::from_ref(segment));
        } else if part == *segment {
            if let Some(bit) = 63usize.checked_sub(index) {
                specificity.literal |= 1 << bit;
            }
        } else {
            return None;
        }
    }
    (segments.len() == count).then_some(specificity)
}

/// The heading of the README section whose table lists every route with its tier.
pub const ROUTE_TABLE_HEADING: &str = "## Who may call what";

/// One row of the README's route table: `| component | method | path | tier | summary |`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentedRoute {
    pub component: String,
    pub method: String,
    pub path: String,
    pub tier: String,
}

/// The rows of the route table under [`ROUTE_TABLE_HEADING`] in `readme` (code spans and
/// surrounding spaces removed). A tier may carry a note in parentheses (a route that
/// answers only when a variable is set says so: `public (only with ...)`); the tier is
/// what comes before it.
pub fn documented_routes(readme: &str) -> Vec<DocumentedRoute> {
    let Some(start) = readme.find(ROUTE_TABLE_HEADING) else {
        return Vec::new();
    };
    let section = &readme[start + ROUTE_TABLE_HEADING.len()..];
    let section = section.find("\n## ").map_or(section, |end| &section[..end]);
    section
        .lines()
        .filter(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect();
            match cells.as_slice() {
                [component, method, path, tier, ..] if path.starts_with('/') => {
                    Some(DocumentedRoute {
                        component: component.clone(),
                        method: method.clone(),
                        path: path.clone(),
                        tier: tier
                            .split_once(" (")
                            .map_or(tier.as_str(), |(tier, _)| tier)
                            .to_string(),
                    })
                }
                _ => None,
            }
        })
        .collect()
}

/// How a route's method is written in the documentation (`ANY` for every method).
pub fn documented_method(method: &str) -> &str {
    if method == ANY_METHOD { "ANY" } else { method }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum E {
        Live,
        Get,
        Status,
        List,
    }

    const ROUTES: &[Route<E>] = &[
        route("GET", "/api/broadcasts/{id}", E::Get),
        route("GET", "/api/broadcasts/live", E::Live),
        route("POST", "/api/broadcasts/{id}/status", E::Status),
        route("GET", "/api/broadcasts", E::List),
    ];

    #[test]
    fn literal_beats_parameter() {
        let m = find(ROUTES, "GET", "/api/broadcasts/live").unwrap();
        assert_eq!(m.route.endpoint, E::Live);
        let m = find(ROUTES, "GET", "/api/broadcasts/abc").unwrap();
        assert_eq!(m.route.endpoint, E::Get);
        assert_eq!(m.param("id"), Some("abc"));
    }

    #[test]
    fn trailing_slash_and_query_are_ignored() {
        assert_eq!(
            find(ROUTES, "GET", "/api/broadcasts/")
                .unwrap()
                .route
                .endpoint,
            E::List
        );
        assert_eq!(
            find(ROUTES, "GET", "/api/broadcasts?limit=1")
                .unwrap()
                .route
                .endpoint,
            E::List
        );
    }

    #[derive(Debug, PartialEq)]
    enum P {
        Proxy,
        Link,
    }

    const PROXY_ROUTES: &[Route<P>] = &[
        route("GET", "/api/music/link", P::Link),
        route(ANY_METHOD, "/api/music/proxy/{*path}", P::Proxy),
    ];

    #[test]
    fn wildcard_tail_and_any_method() {
        for method in ["GET", "PATCH", "PROPFIND"] {
            let m = find(PROXY_ROUTES, method, "/api/music/proxy/a/b/c?x=1").unwrap();
            assert_eq!(m.route.endpoint, P::Proxy);
            assert_eq!(m.param("path"), Some("a/b/c"));
        }
        let m = find(PROXY_ROUTES, "GET", "/api/music/proxy/a").unwrap();
        assert_eq!(m.param("path"), Some("a"));
        assert_eq!(
            find(PROXY_ROUTES, "GET", "/api/music/proxy").unwrap_err(),
            Miss::NotFound
        );
        assert_eq!(
            find(PROXY_ROUTES, "GET", "/api/music/proxy/").unwrap_err(),
            Miss::NotFound
        );
        assert_eq!(
            find(PROXY_ROUTES, "POST", "/api/music/link").unwrap_err(),
            Miss::MethodNotAllowed(vec!["GET"])
        );
    }

    #[test]
    fn a_literal_route_beats_a_wildcard_tail() {
        const TAILS: &[Route<P>] = &[
            route("GET", "/api/music/{*path}", P::Proxy),
            route("GET", "/api/music/link/{id}", P::Link),
        ];
        let m = find(TAILS, "GET", "/api/music/link/7").unwrap();
        assert_eq!(
            (m.route.endpoint == P::Link, m.param("id")),
            (true, Some("7"))
        );
        let m = find(TAILS, "GET", "/api/music/link/7/x").unwrap();
        assert_eq!(m.param("path"), Some("link/7/x"));
    }

    #[test]
    fn the_prefix_check_never_turns_away_a_match() {
        let patterns = [
            "/",
            "/api/broadcasts",
            "/api/broadcasts/{id}",
            "/api/broadcasts/{id}/status",
            "/api/music/proxy/{*path}",
            "/streams/{id}/record",
        ];
        let paths = [
            "",
            "/api/broadcasts",
            "/api/broadcasts/b1",
            "/api/broadcasts/b1/status",
            "/api/broadcasts/status",
            "/api/music/proxy/a/b",
            "/api/music/proxy",
            "/streams/s1/record",
            "/streams//record",
            "/api",
        ];
        for pattern in patterns {
            for path in paths {
                let segments: Vec<&str> = path.split('/').collect();
                let matches = match_pattern(pattern, &segments, |_, _| {}).is_some();
                assert!(!matches || may_match(pattern, path), "{pattern} {path}");
            }
        }
        assert!(!may_match("/api/broadcasts/{id}", "/api/broadcasts"));
        assert!(!may_match("/api/broadcasts", "/api/broadcasts/live"));
    }

    #[test]
    fn a_literal_path_is_its_own_resource() {
        // PATCH exists for /api/broadcasts/{id}, but /api/broadcasts/live has only GET.
        const WITH_PATCH: &[Route<E>] = &[
            route("GET", "/api/broadcasts/live", E::Live),
            route("GET", "/api/broadcasts/{id}", E::Get),
            route("PATCH", "/api/broadcasts/{id}", E::Status),
        ];
        assert_eq!(
            find(WITH_PATCH, "PATCH", "/api/broadcasts/live").unwrap_err(),
            Miss::MethodNotAllowed(vec!["GET"])
        );
        assert_eq!(
            find(WITH_PATCH, "PATCH", "/api/broadcasts/abc")
                .unwrap()
                .route
                .endpoint,
            E::Status
        );
    }

    #[test]
    fn misses() {
        assert_eq!(
            find(ROUTES, "GET", "/api/nothing").unwrap_err(),
            Miss::NotFound
        );
        assert_eq!(
            find(ROUTES, "DELETE", "/api/broadcasts/x/status").unwrap_err(),
            Miss::MethodNotAllowed(vec!["POST"])
        );
        assert_eq!(
            find(ROUTES, "POST", "/api/broadcasts//status").unwrap_err(),
            Miss::NotFound
        );
    }

    impl Endpoint for E {
        fn tier(&self) -> Tier {
            match self {
                E::Live => Tier::App,
                _ => Tier::User,
            }
        }
    }
}
