//! HTTP rules of the page components (pages, api-docs): ETags and `If-None-Match`, caching
//! headers, content-encoding negotiation, and the answers (HTML, 304, short plain-text
//! errors).

use sha2::{Digest, Sha256};
use spin_sdk::http::Response;

/// Edge-cacheable pages (recording page, egress player): browsers keep them a minute,
/// shared caches five.
pub const CACHE_PAGE: &str = "public, max-age=60, s-maxage=300";
/// Pages whose content follows live data (watch page): always revalidated.
pub const CACHE_REVALIDATE: &str = "no-cache";
/// Pages that must not be stored (the SFU test page).
pub const CACHE_NONE: &str = "no-store";
/// Content-hashed assets never change under their name.
pub const CACHE_IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// A strong ETag over `parts` (each one length-prefixed, so parts cannot run together).
pub fn etag(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Whether an `If-None-Match` header matches `etag` (RFC 9110 13.1.2: `*` matches, and the
/// comparison is weak, so `W/"x"` matches `"x"`).
pub fn none_match(header: &str, etag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    let wanted = bare(etag);
    header
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || (!tag.is_empty() && bare(tag) == wanted))
}

/// Whether `Accept-Encoding` accepts gzip (and does not refuse it with `q=0`).
pub fn accepts_gzip(header: &str) -> bool {
    header.split(',').any(|item| {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        if coding != "gzip" && coding != "x-gzip" && coding != "*" {
            return false;
        }
        !parts.any(|p| {
            let p = p.trim().replace(' ', "");
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        })
    })
}

/// The Content-Security-Policy every page starts from; `extra` adds directives.
pub fn csp(extra: &[&str]) -> String {
    let mut directives = vec![
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ];
    for directive in extra {
        // An extra directive with a default's name replaces it (a browser would only
        // read the first of two).
        let name = directive.split_whitespace().next().unwrap_or_default();
        match directives
            .iter()
            .position(|d| d.split_whitespace().next() == Some(name))
        {
            Some(at) => directives[at] = directive,
            None => directives.push(directive),
        }
    }
    directives.join("; ")
}

/// How a page is cached and which policy it runs under.
pub struct PageHeaders<'a> {
    pub etag: &'a str,
    pub cache_control: &'a str,
    pub csp: &'a str,
}

/// 304 when `if_none_match` matches, otherwise the page that `render` builds.
pub fn conditional_html(
    if_none_match: Option<&str>,
    headers: &PageHeaders<'_>,
    render: impl FnOnce() -> Result<String, String>,
) -> Response {
    let validated = !headers.etag.is_empty();
    if validated && if_none_match.is_some_and(|h| none_match(h, headers.etag)) {
        return Response::builder()
            .status(304)
            .header("etag", headers.etag)
            .header("cache-control", headers.cache_control)
            .body(Vec::new())
            .build();
    }
    match render() {
        Ok(html) => html_response(200, headers, html),
        Err(e) => server_error(&e),
    }
}

/// An HTML answer with its caching and security headers.
pub fn html_response(status: u16, headers: &PageHeaders<'_>, html: String) -> Response {
    let mut builder = Response::builder();
    builder
        .status(status)
        .header("content-type", "text/html; charset=utf-8")
        .header("cache-control", headers.cache_control)
        .header("content-security-policy", headers.csp)
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer");
    if !headers.etag.is_empty() {
        builder.header("etag", headers.etag);
    }
    builder.body(html).build()
}

/// A short plain-text answer (bad parameters, unknown pages).
pub fn text(status: u16, message: &str) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .header("cache-control", CACHE_NONE)
        .header("x-content-type-options", "nosniff")
        .body(format!("{message}\n"))
        .build()
}

/// What a 500 says.
pub const SERVER_ERROR_TEXT: &str = "the page could not be rendered\n";

/// A 500 whose cause is logged, not shown.
pub fn server_error(cause: &str) -> Response {
    eprintln!("error: {cause}");
    text(500, SERVER_ERROR_TEXT.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_are_strong_and_distinct() {
        let a = etag(&["record", "abc", "1080x1920"]);
        assert!(a.starts_with('"') && a.ends_with('"') && !a.starts_with("W/"));
        assert_eq!(a, etag(&["record", "abc", "1080x1920"]));
        assert_ne!(a, etag(&["record", "abc1", "080x1920"]));
    }

    #[test]
    fn if_none_match() {
        let tag = "\"abc\"";
        assert!(none_match("\"abc\"", tag));
        assert!(none_match("W/\"abc\"", tag));
        assert!(none_match("\"x\", \"abc\"", tag));
        assert!(none_match("*", tag));
        assert!(!none_match("\"abcd\"", tag));
        assert!(!none_match("", tag));
        assert!(!none_match("abc", tag));
    }

    #[test]
    fn gzip_negotiation() {
        assert!(accepts_gzip("gzip, deflate, br"));
        assert!(accepts_gzip("br;q=1.0, gzip;q=0.8"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip(""));
    }

    #[test]
    fn csp_has_no_inline_scripts() {
        let policy = csp(&["media-src https://cdn.example"]);
        assert!(policy.contains("script-src 'self'"));
        assert!(!policy.contains("unsafe-inline"));
        assert!(policy.ends_with("media-src https://cdn.example"));
        // A default's name replaces it rather than adding a second one.
        let policy = csp(&["img-src 'self' data: https://cdn.example"]);
        assert_eq!(policy.matches("img-src").count(), 1);
        assert!(policy.contains("img-src 'self' data: https://cdn.example"));
    }
}
