//! Reading broadcast fields from request bodies: every way of creating or changing a
//! broadcast checks its fields here.

use common::ApiError;
use common::domain::broadcast::{Status, Visibility};
use common::problem::FieldError;
use common::store::broadcasts::NewBroadcast;
use common::validate::JsonBody;
use serde_json::{Map, Value};

const MAX_TAGS: usize = 20;
const MAX_TAG_LEN: usize = 50;
pub const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY_LEN: usize = 100;
const MAX_METADATA_VALUE_LEN: usize = 1024;
/// The largest viewer count a report may carry.
pub const MAX_VIEWERS: i64 = 100_000_000;

/// The `visibility` field: public (the default), unlisted, private or subscribers (the
/// host's active subscribers, besides those who may watch a private one).
pub fn visibility(body: &mut JsonBody) -> Visibility {
    let Some(given) = body.opt_string("visibility", 20) else {
        return Visibility::default();
    };
    Visibility::parse(&given).unwrap_or_else(|| {
        body.error("visibility", Visibility::expected());
        Visibility::default()
    })
}

/// The `cohostPolicy` field: approval (the default), open or invite_only.
pub fn cohost_policy(body: &mut JsonBody) -> Option<String> {
    match body.opt_string("cohostPolicy", 20).as_deref() {
        None => None,
        Some(p @ ("approval" | "open" | "invite_only")) => Some(p.into()),
        Some(_) => {
            body.error("cohostPolicy", "must be approval, open or invite_only");
            None
        }
    }
}

/// Checks metadata: an object of at most 50 string values of at most 1 KiB (a merge patch
/// may also carry nulls, which remove keys).
pub fn metadata(
    body: &mut JsonBody,
    value: Option<Value>,
    allow_null_values: bool,
) -> Map<String, Value> {
    let Some(value) = value else {
        return Map::new();
    };
    let Value::Object(map) = value else {
        body.error("metadata", "must be an object of strings");
        return Map::new();
    };
    if map.len() > MAX_METADATA_KEYS {
        body.error(
            "metadata",
            format!("may have at most {MAX_METADATA_KEYS} keys"),
        );
    }
    for (key, v) in &map {
        if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_LEN {
            body.error(
                "metadata",
                format!("keys must be 1 to {MAX_METADATA_KEY_LEN} characters"),
            );
        }
        match v {
            Value::String(s) if s.len() > MAX_METADATA_VALUE_LEN => {
                body.error(
                    &format!("metadata.{key}"),
                    format!("must be at most {MAX_METADATA_VALUE_LEN} bytes"),
                );
            }
            Value::String(_) => {}
            Value::Null if allow_null_values => {}
            _ => body.error(&format!("metadata.{key}"), "must be a string"),
        }
    }
    map
}

/// Applies a metadata merge patch (a null value removes a key); 422 when the result has
/// too many keys.
pub fn merge_metadata(
    current: &Value,
    patch: Map<String, Value>,
) -> Result<Map<String, Value>, ApiError> {
    let mut merged = current.as_object().cloned().unwrap_or_default();
    for (key, value) in patch {
        if value.is_null() {
            merged.remove(&key);
        } else {
            merged.insert(key, value);
        }
    }
    if merged.len() > MAX_METADATA_KEYS {
        return Err(ApiError::invalid_fields(vec![FieldError {
            field: "metadata".into(),
            message: format!("may have at most {MAX_METADATA_KEYS} keys"),
        }]));
    }
    Ok(merged)
}

/// Checks `tags`: at most 20 strings of 1 to 50 characters (trimmed).
pub fn tags(body: &mut JsonBody, value: Value) -> Vec<String> {
    let Value::Array(items) = value else {
        body.error("tags", "must be an array of strings");
        return Vec::new();
    };
    if items.len() > MAX_TAGS {
        body.error("tags", format!("may have at most {MAX_TAGS} tags"));
    }
    let mut tags = Vec::new();
    for item in items {
        match item.as_str().map(str::trim) {
            Some(t) if !t.is_empty() && t.chars().count() <= MAX_TAG_LEN => {
                tags.push(t.to_string())
            }
            _ => body.error(
                "tags",
                format!("each tag must be a string of 1 to {MAX_TAG_LEN} characters"),
            ),
        }
    }
    tags
}

/// Reads the creation fields shared by every way of creating a broadcast.
pub fn new_broadcast(body: &mut JsonBody) -> NewBroadcast {
    let title = body.string("title", 200);
    let visibility = visibility(body);
    let tags = match body.opt_value("tags") {
        None => Vec::new(),
        Some(value) => tags(body, value),
    };
    let metadata_value = body.opt_value("metadata");
    let metadata = metadata(body, metadata_value, false);
    let width = body.opt_int("deviceWidth", 1..=16_384);
    let height = body.opt_int("deviceHeight", 1..=16_384);
    if width.is_some() != height.is_some() && !body.has_errors_for(&["deviceWidth", "deviceHeight"])
    {
        body.error("deviceWidth", "deviceWidth and deviceHeight go together");
    }
    let device = width.zip(height);
    let device_type = body.opt_string("deviceType", 50);
    let operating_system = body.opt_string("operatingSystem", 50);
    let orientation = match body.opt_string("orientation", 20).as_deref() {
        None => match device {
            Some((w, h)) if w > h => "landscape".to_string(),
            _ => "portrait".to_string(),
        },
        Some(o @ ("portrait" | "landscape")) => o.to_string(),
        Some(_) => {
            body.error("orientation", "must be portrait or landscape");
            "portrait".into()
        }
    };
    let cohost_policy = cohost_policy(body).unwrap_or_else(|| "approval".into());
    NewBroadcast {
        title,
        visibility,
        tags,
        metadata,
        device,
        device_type,
        operating_system,
        orientation,
        max_participants: 100,
        cohost_policy,
    }
}

/// A status a caller may ask for: active, completed or error (else 422).
pub fn requested_status(requested: &str) -> Result<Status, ApiError> {
    match requested {
        "active" | "completed" | "error" => Status::parse(requested),
        _ => None,
    }
    .ok_or_else(|| {
        ApiError::invalid_fields(vec![FieldError {
            field: "status".into(),
            message: "must be active, completed or error".into(),
        }])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_patches_merge_and_stay_bounded() {
        let current = json!({"a": "1", "b": "2"});
        let patch = json!({"a": null, "c": "3"}).as_object().unwrap().clone();
        assert_eq!(
            Value::Object(merge_metadata(&current, patch).unwrap()),
            json!({"b": "2", "c": "3"})
        );
        let many: Map<String, Value> = (0..MAX_METADATA_KEYS)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect();
        assert_eq!(merge_metadata(&current, many).unwrap_err().status, 422);
    }

    #[test]
    fn only_live_statuses_may_be_asked_for() {
        assert_eq!(requested_status("active").unwrap(), Status::Active);
        assert_eq!(requested_status("pending").unwrap_err().status, 422);
        assert_eq!(requested_status("created").unwrap_err().status, 422);
    }
}
