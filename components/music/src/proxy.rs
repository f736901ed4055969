//! `/api/users/music/proxy/{path}`: any method, forwarded to `{music_url}/{path}`.
//!
//! - The path must stay under `music_url`: no `.`/`..` segments (also percent-encoded),
//!   no encoded `/` or `\`, no backslashes, no empty segments (so no `//host`), no scheme
//!   (`http:...`), no control characters. Anything else is 400 and nothing is sent.
//! - The query string and body are passed through unchanged; the request's headers too,
//!   except hop-by-hop ones and the caller's own credentials and host details
//!   (`Authorization`, `Cookie`, `X-API-Key`, `X-Signature`, `X-Timestamp`, `Host`,
//!   `Forwarded`/`X-Forwarded-*`, `spin-*`).
//! - `Authorization: Bearer` is the stored music token of an active link, or else the
//!   service token minted for the music platform (`links::service_token`).
//! - The platform's status, headers (less hop-by-hop ones, `Content-Length` and
//!   `Set-Cookie`) and body are answered as they came.

use crate::links;
use crate::platform::MusicPlatform;
use domain::ApiError;
use edge::contract::Schema;
use edge::documented_route;
use edge::routing::Route;
use edge::spin::http::{Handler, UserCtx};
use percent_encoding::percent_decode_str;
use spin_sdk::http::Response;

pub const PREFIX: &str = "/api/users/music/proxy/";

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus the
/// ones `wasi:http` refuses to carry.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "http2-settings",
];

/// Request headers never forwarded besides hop-by-hop ones: the caller's credentials for
/// this service, and what describes the hop to us.
const NOT_FORWARDED: &[&str] = &[
    "authorization",
    "cookie",
    "x-api-key",
    "x-signature",
    "x-timestamp",
    "host",
    "content-length",
    "expect",
    "forwarded",
    "x-real-ip",
];

/// Response headers never answered besides hop-by-hop ones: the length is the host's to
/// set, and the platform may not set cookies on this service's origin.
const NOT_RETURNED: &[&str] = &["content-length", "set-cookie", "set-cookie2"];

fn bad_path(detail: &str) -> ApiError {
    ApiError::bad_request("invalid_music_path", detail.to_string())
}

/// Checks the part of the request path after [`PREFIX`] (still percent-encoded, as
/// received) and answers the path to request at the platform, starting with `/`.
pub fn target_path(raw: &str) -> Result<String, ApiError> {
    if raw.is_empty() {
        return Err(bad_path("a path on the music platform is required"));
    }
    if raw
        .chars()
        .any(|c| c == '\\' || c == '#' || c.is_whitespace() || c.is_control())
    {
        return Err(bad_path(
            "the path must not contain backslashes, '#', spaces or control characters",
        ));
    }
    let segments: Vec<&str> = raw.split('/').collect();
    let last = segments.len() - 1;
    for (i, segment) in segments.iter().enumerate() {
        if segment.is_empty() && i != last {
            return Err(bad_path("the path must not contain empty segments ('//')"));
        }
        let decoded = decode_segment(segment)?;
        if decoded.iter().any(|&b| b == b'/' || b == b'\\') {
            return Err(bad_path(
                "the path must not contain encoded slashes or backslashes",
            ));
        }
        if decoded.iter().any(|b| b.is_ascii_control()) {
            return Err(bad_path("the path must not contain control characters"));
        }
        if decoded == b"." || decoded == b".." {
            return Err(bad_path("the path must not contain '.' or '..' segments"));
        }
        if i == 0 && decoded.contains(&b':') {
            return Err(bad_path(
                "the path must be relative to the music platform, not an absolute URL",
            ));
        }
    }
    Ok(format!("/{raw}"))
}

/// Percent-decodes one segment; a `%` not followed by two hex digits is refused.
fn decode_segment(segment: &str) -> Result<Vec<u8>, ApiError> {
    let bytes = segment.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
        {
            return Err(bad_path("the path has an invalid percent-escape"));
        }
    }
    Ok(percent_decode_str(segment).collect())
}

/// The query string, passed through as received; `?` plus it, or "" when there is none.
pub fn target_query(query: &str) -> Result<String, ApiError> {
    if query
        .chars()
        .any(|c| c == '#' || c.is_whitespace() || c.is_control())
    {
        return Err(ApiError::bad_request(
            "invalid_query",
            "the query string must not contain '#', spaces or control characters",
        ));
    }
    Ok(if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    })
}

/// Header names a `Connection` header lists (they are hop-by-hop too), lowercase.
fn connection_listed<'a>(headers: impl Iterator<Item = (&'a str, &'a [u8])>) -> Vec<String> {
    headers
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| {
            String::from_utf8_lossy(value)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn is_hop_by_hop(name: &str, listed: &[String]) -> bool {
    HOP_BY_HOP.contains(&name) || listed.iter().any(|l| l == name)
}

/// The caller's headers to forward (lowercase names), without the Authorization the
/// proxy sets itself.
pub fn request_headers(headers: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
    let listed = connection_listed(headers.iter().copied());
    headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), *value))
        .filter(|(name, _)| {
            !is_hop_by_hop(name, &listed)
                && !NOT_FORWARDED.contains(&name.as_str())
                && !name.starts_with("x-forwarded-")
                && !name.starts_with("spin-")
        })
        .map(|(name, value)| (name, value.to_vec()))
        .collect()
}

/// The platform's headers to answer (lowercase names); repeated ones are joined with
/// ", " as RFC 9110 allows, since a Spin response holds one value per name.
pub fn response_headers(headers: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
    let listed = connection_listed(headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        if is_hop_by_hop(&name, &listed) || NOT_RETURNED.contains(&name.as_str()) {
            continue;
        }
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, joined)) => {
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(value);
            }
            None => out.push((name, value.clone())),
        }
    }
    out
}

/// The methods the proxy forwards (as the API reference lists them); others are a 405.
pub const FORWARDED_METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// The proxy's route: any method; it forwards the body as it came, so it reads it itself.
pub const ROUTES: &[Route<Handler>] = &[documented_route!(
    "*",
    "/api/users/music/proxy/{*path}",
    Handler::User(proxy),
    "Proxy (proxy)",
    |op| op
        .answers(
            200,
            "OK",
            Schema::written(serde_json::json!({
                "description": "The music platform's answer, passed through as it is",
            })),
        )
        .errors(400, &["invalid_music_path", "invalid_query"])
        .errors(405, &["method_not_allowed"])
        .errors(
            502,
            &[
                "music_platform_unreachable",
                "music_platform_answer_too_large",
                "music_platform_denied",
            ],
        )
        .errors(504, &["music_platform_timeout"]),
)];

/// Forwards the request to the music platform and answers its answer.
pub fn proxy(ctx: &UserCtx) -> Result<Response, ApiError> {
    let method = ctx.req.method().to_string();
    if !FORWARDED_METHODS.contains(&method.as_str()) {
        return Err(ApiError::new(
            405,
            "method_not_allowed",
            format!("{method} is not forwarded to the music platform"),
        )
        .with_header("allow", FORWARDED_METHODS.join(", ")));
    }
    let raw = ctx.req.path().strip_prefix(PREFIX).unwrap_or_default();
    let target = format!("{}{}", target_path(raw)?, target_query(ctx.req.query())?);
    let music = MusicPlatform::from_config()?;
    let bearer = links::credential(ctx)?;
    let incoming: Vec<(&str, &[u8])> = ctx.req.headers().map(|(n, v)| (n, v.as_bytes())).collect();
    let mut headers = request_headers(&incoming);
    headers.push((
        "authorization".into(),
        format!("Bearer {bearer}").into_bytes(),
    ));
    let answer = music.send(&method, &target, headers, ctx.req.body())?;
    Ok(Response::builder()
        .status(answer.status)
        .headers(response_headers(&answer.headers))
        .body(answer.body)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_stay_on_the_platform_pass_unchanged() {
        for (raw, expected) in [
            ("tracks", "/tracks"),
            ("tracks/42/", "/tracks/42/"),
            ("gettoken/a%40b.io/p%20w/", "/gettoken/a%40b.io/p%20w/"),
            ("a/..b/c.", "/a/..b/c."),
            ("users/me:info", "/users/me:info"),
            ("search%3Fq%3D1", "/search%3Fq%3D1"),
        ] {
            assert_eq!(target_path(raw).unwrap(), expected, "{raw}");
        }
    }

    #[test]
    fn paths_that_could_escape_are_refused() {
        for raw in [
            "",
            "..",
            "a/../../admin",
            "a/./b",
            "%2e%2e/admin",
            ".%2E/admin",
            "a/%2E",
            "a%2Fb",
            "a%2fb",
            "..%2f..%2fadmin",
            "a%5Cb",
            "a%5cb",
            "a\\b",
            "..\\admin",
            "http://evil.example/x",
            "https:/evil.example",
            "http%3A%2F%2Fevil.example",
            "http%3a//evil.example",
            "/evil.example/x",
            "//evil.example",
            "a//b",
            "a%00b",
            "a%0Ab",
            "a%zz",
            "a%4",
            "a b",
            "a#b",
        ] {
            let err = target_path(raw).unwrap_err();
            assert_eq!(err.status, 400, "{raw}");
            assert_eq!(err.code, "invalid_music_path", "{raw}");
        }
    }

    #[test]
    fn queries_pass_through() {
        assert_eq!(target_query("").unwrap(), "");
        assert_eq!(target_query("a=1&b=%20x").unwrap(), "?a=1&b=%20x");
        assert!(target_query("a=1 2").is_err());
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn names(list: &[(String, Vec<u8>)]) -> Vec<&str> {
        list.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn caller_credentials_and_hop_by_hop_headers_are_not_forwarded() {
        let incoming = pairs(&[
            ("Content-Type", "application/json"),
            ("accept", "application/json"),
            ("x-trace-id", "t1"),
            ("authorization", "Bearer user-jwt"),
            ("cookie", "session=1"),
            ("x-api-key", "pk_1"),
            ("x-signature", "abc"),
            ("x-timestamp", "1"),
            ("host", "api.example.com"),
            ("content-length", "2"),
            ("connection", "keep-alive, X-Private-Hop"),
            ("x-private-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic x"),
            ("x-forwarded-for", "10.0.0.1"),
            ("forwarded", "for=10.0.0.1"),
            (
                "spin-full-url",
                "http://127.0.0.1:3000/api/users/music/proxy/x",
            ),
            ("spin-client-addr", "127.0.0.1:5555"),
        ]);
        let incoming: Vec<(&str, &[u8])> = incoming
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let forwarded = request_headers(&incoming);
        assert_eq!(names(&forwarded), ["content-type", "accept", "x-trace-id"]);
    }

    #[test]
    fn platform_headers_are_returned_less_hop_by_hop_ones() {
        let answer = pairs(&[
            ("content-type", "audio/mpeg"),
            ("x-music", "1"),
            ("vary", "accept"),
            ("Vary", "origin"),
            ("connection", "x-hop"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authenticate", "Basic"),
            ("transfer-encoding", "chunked"),
            ("content-length", "10"),
            ("set-cookie", "music=1"),
        ]);
        let returned = response_headers(&answer);
        assert_eq!(names(&returned), ["content-type", "x-music", "vary"]);
        assert_eq!(returned[2].1, b"accept, origin");
    }
}
