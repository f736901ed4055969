//! Input validation that reports every bad field at once, by name.
//!
//! Handlers read a JSON body through [`JsonBody`]: each accessor records a [`FieldError`]
//! instead of failing, and [`JsonBody::finish`] turns the collected errors into one 422.
//! Members the endpoint does not know are rejected too, so nothing a caller sends is
//! silently dropped.

use crate::problem::{ApiError, FieldError};
use serde_json::{Map, Value};

pub mod body;

/// Default cap for free-text string fields.
pub const MAX_TEXT: usize = 1000;
/// Cap for short names and labels.
pub const MAX_NAME: usize = 200;
/// Largest JSON body any endpoint accepts.
pub const MAX_JSON_BODY: usize = 1024 * 1024;

pub struct JsonBody {
    object: Map<String, Value>,
    known: Vec<&'static str>,
    errors: Vec<FieldError>,
    /// The request's time (epoch seconds), for rules about the past and the future.
    now: Option<i64>,
}

impl JsonBody {
    /// The body of a request that arrived at `now` (epoch seconds).
    pub fn at(mut self, now: i64) -> Self {
        self.now = Some(now);
        self
    }

    /// The request's time (epoch seconds): the one it was read at, else the clock.
    pub fn now(&self) -> i64 {
        self.now.unwrap_or_else(crate::time::now)
    }

    /// Parses a JSON object. Malformed JSON or a non-object is a 400; an empty body is `{}`.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        if body.len() > MAX_JSON_BODY {
            return Err(ApiError::payload_too_large(MAX_JSON_BODY));
        }
        let object = if body.iter().all(u8::is_ascii_whitespace) {
            Map::new()
        } else {
            match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    return Err(ApiError::bad_request(
                        "malformed_json",
                        "the request body must be a JSON object",
                    ));
                }
                Err(e) => {
                    return Err(ApiError::bad_request(
                        "malformed_json",
                        format!("the request body is not valid JSON: {e}"),
                    ));
                }
            }
        };
        // A NUL character is valid JSON but no text column stores it (PostgreSQL refuses
        // it), so no field may carry one.
        let with_nul: Vec<FieldError> = object
            .iter()
            .filter(|(key, value)| key.contains('\0') || holds_nul(value))
            .map(|(key, _)| FieldError {
                field: key.clone(),
                message: "must not contain NUL characters".into(),
            })
            .collect();
        if !with_nul.is_empty() {
            return Err(ApiError::invalid_fields(with_nul));
        }
        Ok(Self {
            object,
            known: Vec::new(),
            errors: Vec::new(),
            now: None,
        })
    }

    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(FieldError {
            field: field.to_string(),
            message: message.into(),
        });
    }

    /// Whether an error was already recorded for any of `fields`.
    pub fn has_errors_for(&self, fields: &[&str]) -> bool {
        self.errors
            .iter()
            .any(|e| fields.contains(&e.field.as_str()))
    }

    pub fn has(&self, field: &str) -> bool {
        self.object.get(field).is_some_and(|v| !v.is_null())
    }

    fn take(&mut self, field: &'static str) -> Option<Value> {
        self.known.push(field);
        match self.object.get(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.clone()),
        }
    }

    /// An optional string of at most `max` characters as sent, trimmed (an empty one counts
    /// as absent).
    pub fn opt_string(&mut self, field: &'static str, max: usize) -> Option<String> {
        match self.take(field)? {
            Value::String(s) => {
                // The length as sent, which the document's maxLength states (a long run of
                // spaces is refused, not trimmed away).
                let sent_length = s.chars().count();
                let s = s.trim();
                if sent_length > max {
                    self.error(field, format!("must be at most {max} characters"));
                    None
                } else if s.is_empty() {
                    None
                } else {
                    Some(s.to_string())
                }
            }
            _ => {
                self.error(field, "must be a string");
                None
            }
        }
    }

    /// A required non-empty string of at most `max` characters.
    pub fn string(&mut self, field: &'static str, max: usize) -> String {
        let present = self.has(field);
        match self.opt_string(field, max) {
            Some(s) => s,
            None => {
                if !present {
                    self.error(field, "is required");
                } else if !self.errors.iter().any(|e| e.field == field) {
                    self.error(field, "must not be empty");
                }
                String::new()
            }
        }
    }

    /// An optional string kept exactly as sent (passwords), at most `max` characters.
    pub fn opt_raw_string(&mut self, field: &'static str, max: usize) -> Option<String> {
        match self.take(field)? {
            Value::String(s) if s.chars().count() > max => {
                self.error(field, format!("must be at most {max} characters"));
                None
            }
            Value::String(s) => Some(s),
            _ => {
                self.error(field, "must be a string");
                None
            }
        }
    }

    pub fn opt_bool(&mut self, field: &'static str) -> Option<bool> {
        match self.take(field)? {
            Value::Bool(b) => Some(b),
            _ => {
                self.error(field, "must be a boolean");
                None
            }
        }
    }

    /// An optional integer within `range`.
    pub fn opt_int(
        &mut self,
        field: &'static str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<i64> {
        let value = self.take(field)?;
        match value.as_i64() {
            Some(n) if range.contains(&n) => Some(n),
            _ => {
                self.error(
                    field,
                    format!(
                        "must be an integer from {} to {}",
                        range.start(),
                        range.end()
                    ),
                );
                None
            }
        }
    }

    /// An optional value of any JSON type, for fields with their own validation.
    pub fn opt_value(&mut self, field: &'static str) -> Option<Value> {
        self.take(field)
    }

    /// Ends validation: unknown members and any recorded error make a 422.
    pub fn finish(mut self) -> Result<(), ApiError> {
        let unknown: Vec<String> = self
            .object
            .keys()
            .filter(|k| !self.known.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            self.error(&key, "is not a known field");
        }
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid_fields(self.errors))
        }
    }
}

/// A plausible e-mail address: one `@`, a non-empty local part, a dotted domain, no spaces.
pub fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A phone number: digits with spaces and `+ - ( ) .` only.
pub fn is_phone(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_digit() || matches!(c, ' ' | '+' | '-' | '(' | ')' | '.'))
        && s.chars().any(|c| c.is_ascii_digit())
}

/// An absolute `http` or `https` URL with a host.
pub fn is_http_url(s: &str) -> bool {
    let rest = if let Some(r) = s.strip_prefix("https://") {
        r
    } else if let Some(r) = s.strip_prefix("http://") {
        r
    } else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    !host.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Decodes `%XX` escapes and `+` (as a space) in a query component.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match (hex_value(bytes[i + 1]), hex_value(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push(h * 16 + l);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Encodes everything but RFC 3986's unreserved characters, for a query or path component.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The `key=value` pairs of a query string, percent-decoded.
pub fn query_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k), percent_decode(v))
    })
}

/// The first value of `key` in a query string.
pub fn query_value(query: &str, key: &str) -> Option<String> {
    query_pairs(query).find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Whether any string in `value` (keys included) holds a NUL character.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

/// An `Idempotency-Key`: 1 to 255 visible ASCII characters.
pub fn valid_idempotency_key(key: &str) -> bool {
    (1..=255).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys() {
        assert!(valid_idempotency_key("4f1c-ab"));
        assert!(!valid_idempotency_key(""));
        assert!(!valid_idempotency_key("has space"));
        assert!(!valid_idempotency_key(&"k".repeat(256)));
    }

    #[test]
    fn percent_encoding_round_trips() {
        let raw = "https://cdn.example/a b.mp4?x=1&y=é";
        let encoded = percent_encode(raw);
        assert_eq!(
            encoded,
            "https%3A%2F%2Fcdn.example%2Fa%20b.mp4%3Fx%3D1%26y%3D%C3%A9"
        );
        assert_eq!(percent_decode(&encoded), raw);
    }

    #[test]
    fn collects_every_field_error() {
        let mut body =
            JsonBody::parse(br#"{"name": 5, "email": "x", "extra": true, "long": "abcdef"}"#)
                .unwrap();
        let _ = body.string("name", 10);
        let _ = body.string("missing", 10);
        let _ = body.opt_string("long", 3);
        let _ = body.opt_string("email", 100);
        let err = body.finish().unwrap_err();
        assert_eq!(err.status, 422);
        let fields: Vec<_> = err.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["name", "missing", "long", "extra"]);
        assert_eq!(err.fields[0].message, "must be a string");
        assert_eq!(err.fields[1].message, "is required");
    }

    #[test]
    fn a_text_is_measured_as_sent_and_kept_trimmed() {
        let mut body =
            JsonBody::parse(br#"{"short": "  abc  ", "padded": "abc         "}"#).unwrap();
        assert_eq!(body.opt_string("short", 7).as_deref(), Some("abc"));
        assert_eq!(body.opt_string("padded", 7), None);
        let err = body.finish().unwrap_err();
        assert_eq!(err.fields[0].field, "padded");
        assert_eq!(err.fields[0].message, "must be at most 7 characters");
    }

    #[test]
    fn malformed_and_non_object_bodies_are_400() {
        assert_eq!(JsonBody::parse(b"{nope").err().unwrap().status, 400);
        assert_eq!(JsonBody::parse(b"[1]").err().unwrap().status, 400);
        assert!(JsonBody::parse(b"").is_ok());
    }

    #[test]
    fn blank_required_string_is_reported_once() {
        let mut body = JsonBody::parse(br#"{"name": "   "}"#).unwrap();
        assert_eq!(body.string("name", 10), "");
        let err = body.finish().unwrap_err();
        assert_eq!(err.fields.len(), 1);
        assert_eq!(err.fields[0].message, "must not be empty");
    }

    #[test]
    fn emails_and_urls() {
        assert!(is_email("a.b@example.com"));
        assert!(!is_email("a@b"));
        assert!(!is_email("a b@example.com"));
        assert!(!is_email("@example.com"));
        assert!(is_http_url("https://example.com/x"));
        assert!(!is_http_url("javascript:alert(1)"));
        assert!(!is_http_url("https://"));
        assert!(!is_http_url("ftp://example.com"));
    }

    #[test]
    fn query_decoding() {
        let pairs: Vec<_> = query_pairs("a=1&b=hello%20world&c=x+y&d=%zz&e").collect();
        assert_eq!(pairs[1], ("b".into(), "hello world".into()));
        assert_eq!(pairs[2], ("c".into(), "x y".into()));
        assert_eq!(pairs[3], ("d".into(), "%zz".into()));
        assert_eq!(pairs[4], ("e".into(), "".into()));
        assert_eq!(query_value("x=1&y=%2F", "y").as_deref(), Some("/"));
        assert_eq!(query_value("x=%4", "x").as_deref(), Some("%4"));
    }

    #[test]
    fn a_nul_character_anywhere_in_the_body_is_refused() {
        for body in [
            r#"{"name": "a\u0000b"}"#,
            r#"{"tags": ["ok", "x\u0000"]}"#,
            r#"{"meta": {"k\u0000": "v"}}"#,
        ] {
            let err = JsonBody::parse(body.as_bytes()).err().expect("refused");
            assert_eq!((err.status, err.code), (422, "validation_failed"), "{body}");
        }
        assert!(JsonBody::parse(br#"{"name": "fine"}"#).is_ok());
    }
}
