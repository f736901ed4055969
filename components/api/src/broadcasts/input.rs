//! The request bodies that create and change a broadcast: each field declared once, with
//! its kind (how it is read and what the document says of it), and the rules between
//! fields.

use crate::recordings::RecordingField;
use domain::ApiError;
use domain::broadcast::{Status, Visibility};
use domain::media::{Ladder, LatencyMode};
use domain::problem::FieldError;
use domain::recording::SettingsPatch;
use domain::request_body;
use domain::validate::JsonBody;
use domain::validate::body::{
    Choice, Choices, FieldKind, Int, NameList, OptChoice, OptInt, OptText, Text,
};
use serde_json::{Map, Value, json};
use store::broadcasts::NewBroadcast;

const MAX_TAGS: usize = 20;
const MAX_TAG_LEN: usize = 50;
pub const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY_LEN: usize = 100;
const MAX_METADATA_VALUE_LEN: usize = 1024;
/// The largest viewer count a report may carry.
pub const MAX_VIEWERS: i64 = 100_000_000;

request_body! {
    /// What creates a broadcast: `POST /api/broadcasts`, `POST /api/v1/sessions`, and with
    /// `maxParticipants` a streaming session.
    pub struct NewBroadcastBody as "NewBroadcast" checked by NewBroadcastBody::check {
        "title" title: Text<200>,
        "visibility" visibility: OptChoice<Visibility>,
        "tags" tags: Tags,
        "metadata" metadata: Metadata,
        "deviceWidth" device_width: OptInt<1, 16_384>,
        "deviceHeight" device_height: OptInt<1, 16_384>,
        "deviceType" device_type: OptText<50>,
        "operatingSystem" operating_system: OptText<50>,
        "orientation" orientation: OptChoice<Orientations>,
        "cohostPolicy" cohost_policy: OptChoice<CohostPolicies>,
        "recording" recording: RecordingField,
        "ladder" ladder: OptChoice<Ladder>,
        "latencyMode" latency_mode: OptChoice<LatencyMode>,
    }
}

request_body! {
    /// What changes a broadcast: `PATCH /api/broadcasts/{id}`. `ladder` and
    /// `latencyMode` apply from the next publish.
    pub struct BroadcastChangesBody as "BroadcastChanges" {
        "title" title: OptText<200>,
        "visibility" visibility: OptChoice<Visibility>,
        "tags" tags: Tags,
        "cohostPolicy" cohost_policy: OptChoice<CohostPolicies>,
        "recording" recording: RecordingField,
        "ladder" ladder: OptChoice<Ladder>,
        "latencyMode" latency_mode: OptChoice<LatencyMode>,
    }
}

request_body! {
    /// A tenant's media settings: `PATCH /api/v1/media-settings`.
    pub struct MediaSettingsBody as "MediaSettingsChanges" {
        "ladder" ladder: OptChoice<Ladder>,
    }
}

request_body! {
    /// What moves a broadcast along its states: `POST /api/broadcasts/{id}/status`.
    pub struct StatusChangeBody as "BroadcastStatusChange" {
        "status" status: Choice<RequestedStatuses>,
    }
}

request_body! {
    /// A viewer count report: `POST /api/broadcasts/{id}/viewer-count`.
    pub struct ViewerCountBody as "ViewerCountReport" {
        "viewerCount" viewer_count: Int<0, MAX_VIEWERS>,
    }
}

request_body! {
    /// What the tenant's server changes on a session: `PATCH /api/v1/sessions/{id}`.
    pub struct SessionPatchBody as "SessionPatch" checked by SessionPatchBody::check {
        "status" status: OptChoice<RequestedStatuses>,
        "metadata" metadata: MetadataPatch,
    }
}

request_body! {
    /// A reaction to a session: `POST /api/v1/sessions/{id}/reactions`.
    pub struct ReactionBody as "Reaction" {
        "reaction" reaction: Choice<Reactions>,
    }
}

/// A status a caller may ask for: active, completed or error.
pub struct RequestedStatuses;

impl Choices for RequestedStatuses {
    type Value = Status;

    fn names() -> Vec<&'static str> {
        [Status::Active, Status::Completed, Status::Error]
            .iter()
            .map(|s| s.as_str())
            .collect()
    }

    fn choose(name: &str) -> Option<Status> {
        Self::names()
            .contains(&name)
            .then(|| Status::parse(name))
            .flatten()
    }
}

/// The reactions a session counts.
pub struct Reactions;

impl NameList for Reactions {
    const NAMES: &'static [&'static str] = &domain::broadcast::REACTIONS;
}

/// `orientation`: how the stream is framed.
pub struct Orientations;

impl NameList for Orientations {
    const NAMES: &'static [&'static str] = &["portrait", "landscape"];
}

/// `cohostPolicy`: how co-hosts join (approval, the default, open or invite_only).
pub struct CohostPolicies;

impl NameList for CohostPolicies {
    const NAMES: &'static [&'static str] = &["approval", "open", "invite_only"];
}

/// `tags`: at most 20 strings of 1 to 50 characters (trimmed).
pub struct Tags;

impl FieldKind for Tags {
    type Value = Option<Vec<String>>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Vec<String>> {
        let value = body.opt_value(name)?;
        Some(tags(body, value))
    }

    fn schema() -> Value {
        json!({
            "type": ["array", "null"],
            "maxItems": MAX_TAGS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_LEN, "pattern": "\\S"},
            "description": format!("At most {MAX_TAGS} tags of 1 to {MAX_TAG_LEN} characters (trimmed)"),
        })
    }
}

/// `metadata`: at most 50 string values of at most 1 KiB, by keys of 1 to 100 characters.
pub struct Metadata;

impl FieldKind for Metadata {
    type Value = Map<String, Value>;

    fn read(body: &mut JsonBody, name: &'static str) -> Map<String, Value> {
        let value = body.opt_value(name);
        metadata(body, value, false)
    }

    fn schema() -> Value {
        json!({
            "type": ["object", "null"],
            "maxProperties": MAX_METADATA_KEYS,
            "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY_LEN},
            "additionalProperties": {"type": "string", "maxLength": MAX_METADATA_VALUE_LEN},
            "description": format!(
                "At most {MAX_METADATA_KEYS} keys of 1 to {MAX_METADATA_KEY_LEN} characters, string values of at most {MAX_METADATA_VALUE_LEN} bytes"
            ),
        })
    }
}

/// `metadata` as a JSON merge patch: a null value removes its key.
pub struct MetadataPatch;

impl FieldKind for MetadataPatch {
    /// None when the body has none.
    type Value = Option<Map<String, Value>>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Map<String, Value>> {
        let value = body.opt_value(name)?;
        Some(metadata(body, Some(value), true))
    }

    fn schema() -> Value {
        json!({
            "type": ["object", "null"],
            "maxProperties": MAX_METADATA_KEYS,
            "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY_LEN},
            "additionalProperties": {"type": ["string", "null"], "maxLength": MAX_METADATA_VALUE_LEN},
            "description": format!(
                "At most {MAX_METADATA_KEYS} keys of 1 to {MAX_METADATA_KEY_LEN} characters, string values of at most {MAX_METADATA_VALUE_LEN} bytes (a null value removes the key)"
            ),
        })
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

impl NewBroadcastBody {
    /// The rules between fields: `deviceWidth` and `deviceHeight` go together.
    pub fn check(&self, body: &mut JsonBody) {
        if self.device_width.is_some() != self.device_height.is_some()
            && !body.has_errors_for(&["deviceWidth", "deviceHeight"])
        {
            body.error("deviceWidth", "deviceWidth and deviceHeight go together");
        }
    }

    /// The broadcast these fields create, and its recording settings, once the rules
    /// between fields hold (a broken one is recorded in `body`).
    pub fn into_new(self, body: &mut JsonBody) -> (NewBroadcast, Option<SettingsPatch>) {
        self.check(body);
        self.into_parts()
    }

    /// The broadcast these checked fields create, and its recording settings.
    pub fn into_parts(self) -> (NewBroadcast, Option<SettingsPatch>) {
        let device = match (self.device_width, self.device_height) {
            (Some(w), Some(h)) => Some((w, h)),
            _ => None,
        };
        let orientation = self.orientation.unwrap_or_else(|| match device {
            Some((w, h)) if w > h => "landscape".to_string(),
            _ => "portrait".to_string(),
        });
        let new = NewBroadcast {
            title: self.title,
            visibility: self.visibility.unwrap_or_default(),
            tags: self.tags.unwrap_or_default(),
            metadata: self.metadata,
            device,
            device_type: self.device_type,
            operating_system: self.operating_system,
            orientation,
            max_participants: 100,
            cohost_policy: self.cohost_policy.unwrap_or_else(|| "approval".into()),
            ladder: self.ladder,
            latency_mode: self.latency_mode.unwrap_or_default(),
        };
        (new, self.recording)
    }
}

impl SessionPatchBody {
    /// Something to change: `status`, `metadata` or both.
    fn check(&self, body: &mut JsonBody) {
        let status_sent = self.status.is_some() || body.has_errors_for(&["status"]);
        if !status_sent && self.metadata.is_none() {
            body.error("status", "send status, metadata or both");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(RequestedStatuses::choose("active"), Some(Status::Active));
        assert_eq!(RequestedStatuses::choose("pending"), None);
        assert_eq!(RequestedStatuses::choose("created"), None);
    }
}
