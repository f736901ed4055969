//! `limit`/`offset` pagination: default 50, at most 200.

use crate::problem::{ApiError, FieldError};
use serde::Serialize;
use serde_json::{Value, json};

pub const DEFAULT_LIMIT: u32 = 50;
pub const MAX_LIMIT: u32 = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub limit: u32,
    pub offset: u32,
}

impl Default for Page {
    /// The first page of the default size.
    fn default() -> Self {
        Page {
            limit: DEFAULT_LIMIT,
            offset: 0,
        }
    }
}

impl Page {
    /// Reads `limit` and `offset` from a query string; a bad value is a 400 naming it.
    pub fn from_query(query: &str) -> Result<Self, ApiError> {
        let mut page = Page {
            limit: DEFAULT_LIMIT,
            offset: 0,
        };
        for (key, value) in crate::validate::query_pairs(query) {
            match key.as_str() {
                "limit" => page.limit = parse_count(&key, &value, 1, MAX_LIMIT)?,
                "offset" => page.offset = parse_count(&key, &value, 0, u32::MAX / 2)?,
                _ => {}
            }
        }
        Ok(page)
    }
}

/// The schema of every page (`Paged`), whatever its items.
pub fn page_schema() -> Value {
    json!({
        "type": "object",
        "description": "A page of a list",
        "required": ["items", "total", "limit", "offset"],
        "properties": {
            "items": { "type": "array" },
            "total": { "type": "integer", "minimum": 0 },
            "limit": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT },
            "offset": { "type": "integer", "minimum": 0 },
        },
    })
}

/// The schemas of the `limit` and `offset` query parameters.
pub fn query_schemas() -> (Value, Value) {
    (
        json!({ "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT }),
        json!({ "type": "integer", "minimum": 0, "default": 0 }),
    )
}

fn parse_count(key: &str, value: &str, min: u32, max: u32) -> Result<u32, ApiError> {
    match value.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ApiError {
            fields: vec![FieldError {
                field: key.into(),
                message: format!("must be an integer from {min} to {max}"),
            }],
            ..ApiError::bad_request(
                "invalid_query",
                format!("{key} must be an integer from {min} to {max}"),
            )
        }),
    }
}

/// The list answer: `{"items": [...], "total": N, "limit": L, "offset": O}`.
#[derive(Debug, Serialize)]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub limit: u32,
    pub offset: u32,
}

impl<T> Paged<T> {
    pub fn new(items: Vec<T>, total: i64, page: Page) -> Self {
        Self {
            items,
            total,
            limit: page.limit,
            offset: page.offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(
            Page::from_query("").unwrap(),
            Page {
                limit: 50,
                offset: 0
            }
        );
        assert_eq!(
            Page::from_query("limit=200&offset=7").unwrap(),
            Page {
                limit: 200,
                offset: 7
            }
        );
        assert_eq!(Page::from_query("limit=201").unwrap_err().status, 400);
        assert_eq!(Page::from_query("limit=0").unwrap_err().status, 400);
        assert_eq!(Page::from_query("offset=-1").unwrap_err().status, 400);
        assert_eq!(
            Page::from_query("limit=abc").unwrap_err().fields[0].field,
            "limit"
        );
    }
}
