//! HTTP routing with Spin's semantics: Spin routes with the `routefinder` crate, so edgehost
//! does too (exact segments beat `:param` segments beat the trailing `/...` wildcard; among
//! equals the longer route wins), and computes the `spin-*` request headers the same way
//! as Spin's `trigger-http`.

use std::net::SocketAddr;

use anyhow::{Result, anyhow};

use crate::manifest::HttpTrigger;
use crate::warn;

/// A routing table: route pattern -> component.
#[derive(Debug)]
pub struct Router {
    inner: routefinder::Router<RouteEntry>,
    /// (raw route, component id) in manifest order, for printing.
    listing: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
struct RouteEntry {
    component: String,
    /// The route as routed on ("/" base prefixed, trailing slash removed), e.g. "/foo/...".
    based_route: String,
    /// The route as written in the manifest.
    raw_route: String,
    wildcard: bool,
}

/// The outcome of routing one path.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteMatch {
    pub component: String,
    pub based_route: String,
    pub raw_route: String,
    /// `:name` captures, in route order.
    pub params: Vec<(String, String)>,
    /// The part of the path after a `/...` route's prefix ("" for non-wildcard routes).
    pub path_info: String,
}

impl Router {
    pub fn build(triggers: &[HttpTrigger]) -> Result<Router> {
        let mut inner = routefinder::Router::new();
        let mut listing: Vec<(String, String)> = Vec::new();
        for t in triggers {
            let Some(raw) = &t.route else { continue };
            let based = based_route(raw);
            let (spec, wildcard) = match based.strip_suffix("/...") {
                Some(prefix) => (format!("{prefix}/*"), true),
                None => (based.clone(), based.ends_with("/*")),
            };
            if let Some(prev) = listing.iter_mut().find(|(r, _)| based_route(r) == based) {
                warn(format_args!(
                    "route {raw:?} of component `{}` duplicates the one of `{}`; the later one wins",
                    t.component, prev.1
                ));
                *prev = (raw.clone(), t.component.clone());
            } else {
                listing.push((raw.clone(), t.component.clone()));
            }
            let entry = RouteEntry {
                component: t.component.clone(),
                based_route: based.clone(),
                raw_route: raw.clone(),
                wildcard,
            };
            inner.add(spec.as_str(), entry).map_err(|e| {
                anyhow!("invalid route {raw:?} of component `{}`: {e}", t.component)
            })?;
        }
        Ok(Router { inner, listing })
    }

    /// Routes a request path (without query).
    pub fn route(&self, path: &str) -> Option<RouteMatch> {
        let m = self.inner.best_match(path)?;
        let entry = m.handler();
        let captures = m.captures();
        let params = captures
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // Spin's `trailing_wildcard`: keep a trailing slash of the request path.
        let path_info = match captures.wildcard() {
            Some(w) if entry.wildcard => match (w.is_empty(), path.ends_with('/')) {
                (true, false) => String::new(),
                (true, true) => "/".to_string(),
                (false, false) => format!("/{w}"),
                (false, true) => format!("/{w}/"),
            },
            _ => String::new(),
        };
        Some(RouteMatch {
            component: entry.component.clone(),
            based_route: entry.based_route.clone(),
            raw_route: entry.raw_route.clone(),
            params,
            path_info,
        })
    }

    /// (route as written, component id) pairs in manifest order.
    pub fn routes(&self) -> &[(String, String)] {
        &self.listing
    }
}

/// Spin prefixes routes with the base ("/") and strips one trailing slash.
fn based_route(raw: &str) -> String {
    let abs = if raw.starts_with('/') {
        raw.to_string()
    } else {
        format!("/{raw}")
    };
    abs.strip_suffix('/').map(str::to_string).unwrap_or(abs)
}

impl RouteMatch {
    /// The headers Spin adds to the request given to the component, lower-case names.
    /// `host` is the request's Host header (Spin uses "localhost" when absent).
    pub fn spin_headers(
        &self,
        scheme: &str,
        host: &str,
        path_and_query: &str,
        client: SocketAddr,
    ) -> Vec<(String, String)> {
        let component_route = self
            .raw_route
            .strip_suffix("/...")
            .unwrap_or(&self.raw_route)
            .to_string();
        let mut h = vec![
            ("spin-path-info".to_string(), self.path_info.clone()),
            (
                "spin-full-url".to_string(),
                format!("{scheme}://{host}{path_and_query}"),
            ),
            ("spin-matched-route".to_string(), self.based_route.clone()),
            ("spin-base-path".to_string(), "/".to_string()),
            (
                "spin-raw-component-route".to_string(),
                self.raw_route.clone(),
            ),
            ("spin-component-route".to_string(), component_route),
            ("spin-client-addr".to_string(), client.to_string()),
        ];
        for (name, value) in &self.params {
            h.push((
                format!("spin-path-match-{}", name.to_ascii_lowercase()),
                value.clone(),
            ));
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[(&str, &str)]) -> Router {
        let triggers: Vec<HttpTrigger> = routes
            .iter()
            .map(|(r, c)| HttpTrigger {
                route: Some(r.to_string()),
                component: c.to_string(),
            })
            .collect();
        Router::build(&triggers).unwrap()
    }

    #[test]
    fn most_specific_route_wins() {
        let r = router(&[
            ("/...", "root"),
            ("/api/...", "api"),
            ("/api/users/:id", "user"),
            ("/api/users/me", "me"),
            ("/api/users/:id/...", "user-sub"),
            ("/exact", "exact"),
        ]);
        let c = |p: &str| r.route(p).map(|m| m.component);
        assert_eq!(c("/api/users/me").as_deref(), Some("me"));
        assert_eq!(c("/api/users/42").as_deref(), Some("user"));
        assert_eq!(c("/api/users/42/x").as_deref(), Some("user-sub"));
        assert_eq!(c("/api/other").as_deref(), Some("api"));
        assert_eq!(c("/api").as_deref(), Some("api"));
        assert_eq!(c("/exact").as_deref(), Some("exact"));
        assert_eq!(c("/exact/more").as_deref(), Some("root"));
        assert_eq!(c("/").as_deref(), Some("root"));
    }

    #[test]
    fn unrouted_is_none() {
        let r = router(&[("/a", "a"), ("/b/...", "b")]);
        assert!(r.route("/c").is_none());
        assert!(r.route("/a/x").is_none());
    }

    #[test]
    fn wildcard_headers_match_spin() {
        let r = router(&[("/foo/...", "c"), ("/users/:id/:tab", "u"), ("/", "root")]);
        let m = r.route("/foo/bar/").unwrap();
        assert_eq!(m.path_info, "/bar/");
        let m = r.route("/foo").unwrap();
        assert_eq!(m.path_info, "");
        let m = r.route("/foo/bar").unwrap();
        assert_eq!(m.path_info, "/bar");
        let client: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let h = m.spin_headers("http", "h:1", "/foo/bar?q=1", client);
        let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("spin-full-url"), Some("http://h:1/foo/bar?q=1"));
        assert_eq!(get("spin-matched-route"), Some("/foo/..."));
        assert_eq!(get("spin-raw-component-route"), Some("/foo/..."));
        assert_eq!(get("spin-component-route"), Some("/foo"));
        assert_eq!(get("spin-base-path"), Some("/"));
        assert_eq!(get("spin-client-addr"), Some("127.0.0.1:9"));

        let m = r.route("/users/7/posts").unwrap();
        assert_eq!(
            m.params,
            vec![("id".into(), "7".into()), ("tab".into(), "posts".into())]
        );
        let h = m.spin_headers("http", "h", "/users/7/posts", client);
        let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("spin-path-match-id"), Some("7"));
        assert_eq!(get("spin-path-info"), Some(""));
        assert_eq!(r.route("/").unwrap().based_route, "");
    }
}
