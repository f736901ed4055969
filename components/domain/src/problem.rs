//! Errors as `application/problem+json` (RFC 9457) with a stable machine `code`.

use serde::Serialize;
use serde_json::{Map, Value};

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// One invalid input field, reported in a 422 (or 400) answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// `value` as a JSON value (a payload to store or to embed). Only a bug fails, as a 500:
/// a map with keys that are not strings.
pub fn json_value(value: &impl Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(format!("cannot render JSON: {e}")))
}

/// An error answer: status, stable code, human detail and optional field errors.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub detail: String,
    pub fields: Vec<FieldError>,
    /// Extra members merged into the problem document (e.g. `allowed` next states).
    pub extra: Map<String, Value>,
    /// Extra response headers (e.g. `Retry-After`).
    pub headers: Vec<(String, String)>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            fields: Vec::new(),
            extra: Map::new(),
            headers: Vec::new(),
        }
    }

    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(400, code, detail)
    }
    pub fn unauthorized(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(401, code, detail)
    }
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(403, "forbidden", detail)
    }
    pub fn not_found(what: &str) -> Self {
        Self::new(404, "not_found", format!("{what} not found"))
    }
    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(409, code, detail)
    }
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "payload_too_large",
            format!("the request body exceeds {limit} bytes"),
        )
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(500, "internal_error", detail)
    }
    pub fn unavailable(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(503, code, detail)
    }

    /// A 422 naming every invalid field.
    pub fn invalid_fields(fields: Vec<FieldError>) -> Self {
        let detail = fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; ");
        Self {
            fields,
            ..Self::new(422, "validation_failed", detail)
        }
    }

    pub fn with_extra(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    pub fn title(&self) -> &'static str {
        status_title(self.status)
    }

    /// The problem document.
    pub fn to_json(&self) -> Value {
        let mut doc = Map::new();
        doc.insert("type".into(), "about:blank".into());
        doc.insert("title".into(), self.title().into());
        doc.insert("status".into(), self.status.into());
        doc.insert("detail".into(), self.detail.clone().into());
        doc.insert("code".into(), self.code.into());
        if !self.fields.is_empty() {
            doc.insert(
                "errors".into(),
                serde_json::to_value(&self.fields).unwrap_or(Value::Null),
            );
        }
        for (k, v) in &self.extra {
            doc.insert(k.clone(), v.clone());
        }
        Value::Object(doc)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.detail)
    }
}

impl std::error::Error for ApiError {}

fn status_title(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Internal Server Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_document_carries_code_fields_and_extras() {
        let err = ApiError::invalid_fields(vec![FieldError {
            field: "name".into(),
            message: "is required".into(),
        }])
        .with_extra("allowed", vec!["active"]);
        let doc = err.to_json();
        assert_eq!(doc["status"], 422);
        assert_eq!(doc["code"], "validation_failed");
        assert_eq!(doc["title"], "Unprocessable Content");
        assert_eq!(doc["errors"][0]["field"], "name");
        assert_eq!(doc["detail"], "name: is required");
        assert_eq!(doc["allowed"][0], "active");
    }
}
