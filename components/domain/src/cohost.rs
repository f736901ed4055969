//! Co-hosting rules: permissions and their presets, the grid layout, and who may do what.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What a co-host may do besides publishing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "CoHostPermissions")]
pub struct Permissions {
    #[serde(default)]
    pub can_invite_others: bool,
    #[serde(default)]
    pub can_remove_others: bool,
    #[serde(default)]
    pub can_control_layout: bool,
    #[serde(default)]
    pub can_moderate_chat: bool,
    #[serde(default)]
    pub can_trigger_ads: bool,
    #[serde(default)]
    pub can_access_analytics: bool,
}

/// The permission names, in the spec's order.
pub const PERMISSION_NAMES: [&str; 6] = [
    "canInviteOthers",
    "canRemoveOthers",
    "canControlLayout",
    "canModerateChat",
    "canTriggerAds",
    "canAccessAnalytics",
];

impl Permissions {
    fn flags(self) -> [bool; 6] {
        [
            self.can_invite_others,
            self.can_remove_others,
            self.can_control_layout,
            self.can_moderate_chat,
            self.can_trigger_ads,
            self.can_access_analytics,
        ]
    }

    /// The `default` preset: nothing beyond publishing.
    pub const DEFAULT: Permissions = Permissions {
        can_invite_others: false,
        can_remove_others: false,
        can_control_layout: false,
        can_moderate_chat: false,
        can_trigger_ads: false,
        can_access_analytics: false,
    };

    /// The `moderator` preset: everything but ads.
    pub const MODERATOR: Permissions = Permissions {
        can_invite_others: true,
        can_remove_others: true,
        can_control_layout: true,
        can_moderate_chat: true,
        can_trigger_ads: false,
        can_access_analytics: true,
    };

    /// Every permission: what the session's owner holds.
    pub const ALL: Permissions = Permissions {
        can_invite_others: true,
        can_remove_others: true,
        can_control_layout: true,
        can_moderate_chat: true,
        can_trigger_ads: true,
        can_access_analytics: true,
    };

    /// The presets' names.
    pub const PRESETS: [&str; 2] = ["default", "moderator"];

    pub fn preset(name: &str) -> Option<Permissions> {
        match name {
            "default" => Some(Self::DEFAULT),
            "moderator" => Some(Self::MODERATOR),
            _ => None,
        }
    }

    /// Reads a preset name (`"moderator"`) or an object of the six booleans (missing ones
    /// are false). Unknown names and non-boolean values are errors, with a message.
    pub fn from_json(value: &Value) -> Result<Permissions, String> {
        match value {
            Value::String(name) => Self::preset(name)
                .ok_or_else(|| format!("unknown preset {name:?}: use default or moderator")),
            Value::Object(map) => {
                for (key, v) in map {
                    if !PERMISSION_NAMES.contains(&key.as_str()) {
                        return Err(format!("unknown permission {key:?}"));
                    }
                    if !v.is_boolean() {
                        return Err(format!("{key} must be true or false"));
                    }
                }
                serde_json::from_value(value.clone()).map_err(|e| e.to_string())
            }
            _ => Err("must be a preset name or an object of booleans".into()),
        }
    }

    /// The schema of what [`Permissions::from_json`] reads: a preset's name, or an object
    /// of some of the six booleans.
    pub fn request_schema() -> Value {
        let flags: serde_json::Map<String, Value> = PERMISSION_NAMES
            .iter()
            .map(|name| (name.to_string(), json!({ "type": "boolean" })))
            .collect();
        json!({
            "anyOf": [
                { "enum": Self::PRESETS },
                { "type": "object", "additionalProperties": false, "properties": flags },
            ],
            "description": "A preset (default, moderator) or an object of the six permissions \
                (missing ones are false)",
        })
    }

    /// Whether every permission of `self` is also in `other`.
    pub fn is_within(self, other: Permissions) -> bool {
        self.flags()
            .iter()
            .zip(other.flags())
            .all(|(mine, theirs)| !*mine || theirs)
    }

    /// Only the permissions both hold.
    pub fn intersect(self, other: Permissions) -> Permissions {
        let [a, b, c, d, e, f] = self.flags();
        let [g, h, i, j, k, l] = other.flags();
        Permissions {
            can_invite_others: a && g,
            can_remove_others: b && h,
            can_control_layout: c && i,
            can_moderate_chat: d && j,
            can_trigger_ads: e && k,
            can_access_analytics: f && l,
        }
    }
}

/// The grid the recording page lays hosts out in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Layout {
    pub max_hosts: i64,
    pub grid_columns: i64,
    pub grid_rows: i64,
    pub aspect_ratio: String,
    pub show_names: bool,
    pub show_controls: bool,
}

/// Most hosts (owner included) a session may show.
pub const MAX_HOSTS: i64 = 16;

impl Default for Layout {
    /// The spec's default preset: 4 hosts, 2x2, 16:9, names and controls shown.
    fn default() -> Self {
        Self {
            max_hosts: 4,
            grid_columns: 2,
            grid_rows: 2,
            aspect_ratio: "16:9".into(),
            show_names: true,
            show_controls: true,
        }
    }
}

impl Layout {
    /// Every problem with the layout as (field, message); empty when it is valid.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !(1..=MAX_HOSTS).contains(&self.max_hosts) {
            out.push(("maxHosts", format!("must be from 1 to {MAX_HOSTS}")));
        }
        for (field, n) in [
            ("gridColumns", self.grid_columns),
            ("gridRows", self.grid_rows),
        ] {
            if !(1..=MAX_HOSTS).contains(&n) {
                out.push((field, format!("must be from 1 to {MAX_HOSTS}")));
            }
        }
        if out.is_empty() && self.grid_columns * self.grid_rows < self.max_hosts {
            out.push((
                "maxHosts",
                format!(
                    "{} hosts do not fit a {}x{} grid",
                    self.max_hosts, self.grid_columns, self.grid_rows
                ),
            ));
        }
        if !is_aspect_ratio(&self.aspect_ratio) {
            out.push(("aspectRatio", "must look like 16:9".into()));
        }
        out
    }
}

/// `W:H` with positive integers of at most 4 digits.
pub fn is_aspect_ratio(s: &str) -> bool {
    let positive = |p: &str| {
        !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()) && p != "0"
    };
    s.split_once(':')
        .is_some_and(|(w, h)| positive(w) && positive(h))
}

/// Seats left for co-hosts: the layout's hosts minus the owner and the active co-hosts.
pub fn free_slots(layout: &Layout, active_cohosts: i64) -> i64 {
    (layout.max_hosts - 1 - active_cohosts).max(0)
}

/// Whether an SFU participant counts as a co-host: its metadata role is co_host or
/// publisher.
pub fn is_cohost_role(metadata: &str) -> bool {
    serde_json::from_str::<Value>(metadata)
        .ok()
        .and_then(|m| m.get("role").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|role| role == "co_host" || role == "publisher")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn presets_and_parsing() {
        assert_eq!(
            Permissions::from_json(&json!("default")),
            Ok(Permissions::DEFAULT)
        );
        assert_eq!(
            Permissions::from_json(&json!("moderator")),
            Ok(Permissions::MODERATOR)
        );
        let p = Permissions::from_json(&json!({"canModerateChat": true})).unwrap();
        assert!(p.can_moderate_chat && !p.can_invite_others);
        assert!(Permissions::from_json(&json!("admin")).is_err());
        assert!(Permissions::from_json(&json!({"canFly": true})).is_err());
        assert!(Permissions::from_json(&json!({"canModerateChat": "yes"})).is_err());
        assert!(Permissions::from_json(&json!(7)).is_err());
    }

    #[test]
    fn granting_is_capped_by_what_one_holds() {
        let chat = Permissions {
            can_moderate_chat: true,
            ..Permissions::DEFAULT
        };
        assert!(chat.is_within(Permissions::MODERATOR));
        assert!(!Permissions::MODERATOR.is_within(chat));
        assert!(Permissions::MODERATOR.is_within(Permissions::ALL));
        let ads = Permissions {
            can_trigger_ads: true,
            ..Permissions::DEFAULT
        };
        assert!(!ads.is_within(Permissions::MODERATOR));
        assert_eq!(
            Permissions::ALL.intersect(Permissions::DEFAULT),
            Permissions::DEFAULT
        );
        assert_eq!(ads.intersect(Permissions::ALL), ads);
    }

    #[test]
    fn layouts_must_fit() {
        assert!(Layout::default().problems().is_empty());
        let too_small = Layout {
            max_hosts: 5,
            ..Layout::default()
        };
        assert_eq!(too_small.problems()[0].0, "maxHosts");
        let too_many = Layout {
            max_hosts: 17,
            grid_columns: 5,
            grid_rows: 4,
            ..Layout::default()
        };
        assert_eq!(too_many.problems()[0].0, "maxHosts");
        let odd = Layout {
            aspect_ratio: "wide".into(),
            ..Layout::default()
        };
        assert_eq!(odd.problems()[0].0, "aspectRatio");
        assert!(is_aspect_ratio("9:16") && !is_aspect_ratio("0:9") && !is_aspect_ratio("16:"));
        assert_eq!(free_slots(&Layout::default(), 2), 1);
        assert_eq!(free_slots(&Layout::default(), 5), 0);
    }

    #[test]
    fn cohost_roles() {
        assert!(is_cohost_role(r#"{"role":"co_host"}"#));
        assert!(is_cohost_role(r#"{"role":"publisher"}"#));
        assert!(!is_cohost_role(r#"{"role":"subscriber"}"#));
        assert!(!is_cohost_role("not json"));
    }
}
