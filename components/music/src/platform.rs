//! The music platform at `{music_url}`: where it is, the calls this component makes to
//! it, how its answers are read, and how its failures become problem answers.
//!
//! Only `music_url`'s scheme and authority are ever contacted: every URL is built here
//! from them and a path this module encodes (or the proxy validated), and `spin.toml`
//! allows no other outbound host.
//!
//! The platform's endpoints used here:
//!
//! | call | request | answer |
//! |---|---|---|
//! | authenticate | `POST /auth/platform`, Bearer service token, JSON `userId`, `email`, `username` | `{"token", "user": account}` |
//! | refresh | `POST /auth/refresh`, Bearer music token | `{"token"}` |
//! | search | `GET /users/search?q=`, Bearer credential | `[account, ...]` |
//! | look-up | `GET /users/{id}`, Bearer credential | account, or 404 |
//! | password check | `POST /gettoken/{email}/{password}/` | `{"token"}` when the password is right |
//!
//! An account is `{"id", "email", "nickname"?, "activated"?}` (`id` a string or number).

use domain::ApiError;
use edge::spin::config;
use edge::spin::outbound::{self, OutboundError, OutboundRequest, OutboundResponse};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

pub const AUTHENTICATE_PATH: &str = "/auth/platform";
pub const REFRESH_PATH: &str = "/auth/refresh";

/// How long a call may wait for the platform, unless `music_timeout_ms` says otherwise.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=120_000;
/// Largest answer read from the platform.
pub const MAX_ANSWER_BYTES: usize = 10 * 1024 * 1024;

/// What a path segment keeps unescaped: RFC 3986 unreserved characters. Dots are kept
/// too, except in a segment made only of dots (see [`segment`]).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// One path segment, percent-encoded so that nothing in it (`/`, `?`, `#`, `%`, spaces,
/// non-ASCII) can change the path. A segment of only dots (`.`, `..`) would be read as
/// a relative step, so its dots are encoded as well.
pub fn segment(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b == b'.') {
        return "%2E".repeat(text.len());
    }
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// `/gettoken/{email}/{password}/`, both segments encoded.
pub fn gettoken_path(email: &str, password: &str) -> String {
    format!("/gettoken/{}/{}/", segment(email), segment(password))
}

/// `/users/{id}`, the id encoded.
pub fn user_path(id: &str) -> String {
    format!("/users/{}", segment(id))
}

/// `/users/search?q=...`, the query encoded.
pub fn search_path(q: &str) -> String {
    format!("/users/search?q={}", segment(q))
}

/// The music platform's address and the time a call may take.
#[derive(Debug, Clone)]
pub struct MusicPlatform {
    /// `scheme://authority`, e.g. `https://music.example.com`.
    origin: String,
    authority: String,
    /// A path prefix of `music_url` without its trailing slash ("" for none).
    base_path: String,
    timeout: Duration,
}

impl MusicPlatform {
    /// Reads `music_url` and `music_timeout_ms`.
    pub fn from_config() -> Result<Self, ApiError> {
        let url = config::required("music_url")?;
        let timeout = timeout_from(config::var("music_timeout_ms").as_deref());
        Self::new(&url, timeout)
    }

    /// A platform at `music_url`: an absolute http(s) URL without query or credentials.
    pub fn new(music_url: &str, timeout: Duration) -> Result<Self, ApiError> {
        let bad = || {
            ApiError::unavailable(
                "not_configured",
                "the server variable music_url must be an http(s) URL such as https://music.example.com",
            )
        };
        let (scheme, authority, path) = outbound::split_url(music_url.trim()).ok_or_else(bad)?;
        if path.contains(['?', '#']) {
            return Err(bad());
        }
        Ok(Self {
            origin: format!("{scheme}://{authority}"),
            authority: authority.to_string(),
            base_path: path.trim_end_matches('/').to_string(),
            timeout,
        })
    }

    /// The absolute URL of `path_and_query` (which starts with `/`) at the platform.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{}{}", self.origin, self.base_path, path_and_query)
    }

    /// Whether `url` is addressed to this platform's host (and nothing else).
    pub fn owns(&self, url: &str) -> bool {
        outbound::split_url(url).is_some_and(|(_, authority, _)| authority == self.authority)
    }

    /// Sends one request; failures to get an answer become 502/504 problems.
    pub fn send(
        &self,
        method: &str,
        path_and_query: &str,
        mut headers: Vec<(String, Vec<u8>)>,
        body: &[u8],
    ) -> Result<OutboundResponse, ApiError> {
        let url = self.url(path_and_query);
        if !self.owns(&url) {
            return Err(ApiError::bad_request(
                "invalid_music_path",
                "the path does not stay on the music platform",
            ));
        }
        if !body.is_empty() || !matches!(method, "GET" | "HEAD" | "DELETE" | "OPTIONS") {
            headers.push(("content-length".into(), body.len().to_string().into_bytes()));
        }
        let request = OutboundRequest {
            method,
            url: &url,
            headers,
            body,
            timeout: self.timeout,
            max_response_bytes: MAX_ANSWER_BYTES,
        };
        outbound::send(&request).map_err(failure)
    }

    /// A JSON call of this component's own, with an optional Bearer credential.
    pub fn call(
        &self,
        method: &str,
        path_and_query: &str,
        bearer: Option<&str>,
        body: Option<&Value>,
    ) -> Result<OutboundResponse, ApiError> {
        let mut headers = vec![("accept".to_string(), b"application/json".to_vec())];
        if let Some(token) = bearer {
            headers.push((
                "authorization".into(),
                format!("Bearer {token}").into_bytes(),
            ));
        }
        let body = match body {
            Some(value) => {
                headers.push(("content-type".into(), b"application/json".to_vec()));
                serde_json::to_vec(value)
                    .map_err(|e| ApiError::internal(format!("could not encode a request: {e}")))?
            }
            None => Vec::new(),
        };
        self.send(method, path_and_query, headers, &body)
    }
}

/// `music_timeout_ms` as a duration: the default when unset or not a number, else clamped.
pub fn timeout_from(value: Option<&str>) -> Duration {
    let ms = value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT_MS, |ms| {
            ms.clamp(*TIMEOUT_RANGE_MS.start(), *TIMEOUT_RANGE_MS.end())
        });
    Duration::from_millis(ms)
}

/// A failure to get an answer: 504 for a timeout, 502 for everything else on the way.
pub fn failure(err: OutboundError) -> ApiError {
    match err {
        OutboundError::Timeout => ApiError::new(
            504,
            "music_platform_timeout",
            "the music platform did not answer in time",
        ),
        OutboundError::Unreachable(why) => ApiError::new(
            502,
            "music_platform_unreachable",
            format!("the music platform could not be reached: {why}"),
        ),
        OutboundError::TooLarge => ApiError::new(
            502,
            "music_platform_answer_too_large",
            format!("the music platform's answer exceeds {MAX_ANSWER_BYTES} bytes"),
        ),
        OutboundError::Denied => ApiError::new(
            502,
            "music_platform_denied",
            "the music platform is not an allowed outbound host (check music_url)",
        ),
        OutboundError::Invalid(why) => ApiError::bad_request(
            "invalid_music_request",
            format!("the request could not be sent to the music platform: {why}"),
        ),
    }
}

/// What a call to the platform that got no usable answer is refused with (502), by code.
pub const FAILURES: &[&str] = &[
    "music_platform_unreachable",
    "music_platform_answer_too_large",
    "music_platform_denied",
    "music_platform_error",
    "music_platform_invalid_answer",
];

/// An answer that is not a success: 502 naming the status.
pub fn unexpected(status: u16, what: &str) -> ApiError {
    ApiError::new(
        502,
        "music_platform_error",
        format!("the music platform answered {status} to {what}"),
    )
    .with_extra("upstreamStatus", status)
}

/// A success answer that cannot be read.
pub fn unreadable(what: &str) -> ApiError {
    ApiError::new(
        502,
        "music_platform_invalid_answer",
        format!("the music platform's answer to {what} could not be read"),
    )
}

pub fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// An account on the music platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct MusicAccount {
    pub id: String,
    pub email: String,
    pub nickname: Option<String>,
    pub activated: bool,
}

/// Reads an account object; `None` without an id or e-mail.
pub fn parse_account(value: &Value) -> Option<MusicAccount> {
    let id = match value.get("id")? {
        Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let email = value.get("email")?.as_str()?.trim();
    if email.is_empty() {
        return None;
    }
    let nickname = value
        .get("nickname")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    Some(MusicAccount {
        id,
        email: email.to_string(),
        nickname,
        activated: value
            .get("activated")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

fn parse_json(body: &[u8]) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

fn token_of(value: &Value) -> Option<String> {
    value
        .get("token")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// The token of a `{"token": "..."}` answer; `None` when there is none.
pub fn parse_token(body: &[u8]) -> Option<String> {
    token_of(&parse_json(body)?)
}

/// The music token and account of an authenticate answer.
pub fn parse_authenticated(body: &[u8]) -> Option<(String, MusicAccount)> {
    let value = parse_json(body)?;
    Some((token_of(&value)?, parse_account(value.get("user")?)?))
}

/// The accounts of a search answer (a JSON array); entries without an id or e-mail are
/// left out.
pub fn parse_search(body: &[u8]) -> Option<Vec<MusicAccount>> {
    match parse_json(body)? {
        Value::Array(items) => Some(items.iter().filter_map(parse_account).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn segments_escape_everything_that_could_move_the_path() {
        assert_eq!(segment("ada@example.com"), "ada%40example.com");
        assert_eq!(segment("Zoe.T+1@x.io"), "Zoe.T%2B1%40x.io");
        assert_eq!(segment("p@ss/w ord?#%"), "p%40ss%2Fw%20ord%3F%23%25");
        assert_eq!(segment("a\\b"), "a%5Cb");
        assert_eq!(segment("é"), "%C3%A9");
        assert_eq!(segment("-._~"), "-._~");
        assert_eq!(segment("."), "%2E");
        assert_eq!(segment(".."), "%2E%2E");
        assert_eq!(segment("..."), "%2E%2E%2E");
        assert_eq!(segment("a..b"), "a..b");
        assert_eq!(
            gettoken_path("a.b@example.com", "../x"),
            "/gettoken/a.b%40example.com/..%2Fx/"
        );
        assert_eq!(user_path("42/../admin"), "/users/42%2F..%2Fadmin");
        assert_eq!(
            search_path("ada lovelace&x=1"),
            "/users/search?q=ada%20lovelace%26x%3D1"
        );
    }

    #[test]
    fn urls_stay_on_the_platform() {
        let p = MusicPlatform::new("http://127.0.0.1:8090", Duration::from_secs(1)).unwrap();
        assert_eq!(p.url("/users/7"), "http://127.0.0.1:8090/users/7");
        assert!(p.owns(&p.url("/users/7")));
        assert!(!p.owns("http://evil.example/users/7"));
        assert!(!p.owns("http://127.0.0.1:8091/"));
        let prefixed =
            MusicPlatform::new("https://music.example.com/api/", Duration::from_secs(1)).unwrap();
        assert_eq!(
            prefixed.url("/gettoken/a/b/"),
            "https://music.example.com/api/gettoken/a/b/"
        );
        for bad in [
            "",
            "music.example.com",
            "ftp://music.example.com",
            "https://user@music.example.com",
            "https://music.example.com/?x=1",
        ] {
            assert!(
                MusicPlatform::new(bad, Duration::from_secs(1)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn timeouts_default_and_clamp() {
        assert_eq!(
            timeout_from(None),
            Duration::from_millis(DEFAULT_TIMEOUT_MS)
        );
        assert_eq!(
            timeout_from(Some("soon")),
            Duration::from_millis(DEFAULT_TIMEOUT_MS)
        );
        assert_eq!(timeout_from(Some(" 1500 ")), Duration::from_millis(1500));
        assert_eq!(timeout_from(Some("1")), Duration::from_millis(100));
        assert_eq!(
            timeout_from(Some("999999999")),
            Duration::from_millis(120_000)
        );
    }

    #[test]
    fn failures_map_to_gateway_statuses() {
        assert_eq!(failure(OutboundError::Timeout).status, 504);
        assert_eq!(
            failure(OutboundError::Unreachable("refused".into())).status,
            502
        );
        assert_eq!(failure(OutboundError::TooLarge).status, 502);
        assert_eq!(failure(OutboundError::Denied).status, 502);
        assert_eq!(failure(OutboundError::Invalid("header".into())).status, 400);
        assert_eq!(unexpected(500, "search").to_json()["upstreamStatus"], 500);
    }

    #[test]
    fn answers_are_read_strictly() {
        let account =
            parse_account(&json!({"id": 7, "email": " z@x.io ", "nickname": ""})).unwrap();
        assert_eq!(
            account,
            MusicAccount {
                id: "7".into(),
                email: "z@x.io".into(),
                nickname: None,
                activated: false
            }
        );
        assert!(parse_account(&json!({"id": "", "email": "z@x.io"})).is_none());
        assert!(parse_account(&json!({"id": "1"})).is_none());
        assert!(parse_account(&json!({"id": true, "email": "z@x.io"})).is_none());

        assert_eq!(parse_token(br#"{"token":"abc"}"#).as_deref(), Some("abc"));
        assert_eq!(parse_token(br#"{"token":""}"#), None);
        assert_eq!(parse_token(br#"{"error":"bad password"}"#), None);
        assert_eq!(parse_token(b"abc"), None);

        let (token, user) = parse_authenticated(
            br#"{"token":"t1","user":{"id":"m1","email":"a@x.io","nickname":"Ada","activated":true}}"#,
        )
        .unwrap();
        assert_eq!(token, "t1");
        assert_eq!(user.nickname.as_deref(), Some("Ada"));
        assert!(user.activated);
        assert!(parse_authenticated(br#"{"token":"t1"}"#).is_none());

        let found = parse_search(
            br#"[{"id":"1","email":"a@x.io"},{"id":"2"},{"id":"3","email":"c@x.io","activated":true}]"#,
        )
        .unwrap();
        assert_eq!(
            found.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["1", "3"]
        );
        assert!(parse_search(br#"{"items":[]}"#).is_none());
        let json = serde_json::to_value(&found[0]).unwrap();
        assert_eq!(
            json,
            json!({"id": "1", "email": "a@x.io", "nickname": null, "activated": false})
        );
    }
}
