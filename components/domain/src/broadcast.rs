//! Broadcast rules: the status machine, visibility, stream identity, recording size,
//! staleness.

use crate::ApiError;
use crate::ids;
use crate::validate::body::Choices;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pending,
    Active,
    Completed,
    Error,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Pending,
        Status::Active,
        Status::Completed,
        Status::Error,
    ];

    /// Parses a status; `created` is a synonym of `pending`.
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "pending" | "created" => Some(Status::Pending),
            "active" => Some(Status::Active),
            "completed" => Some(Status::Completed),
            "error" => Some(Status::Error),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Active => "active",
            Status::Completed => "completed",
            Status::Error => "error",
        }
    }

    /// Where a broadcast may go from here. Completed and error are final.
    pub fn next(self) -> &'static [Status] {
        match self {
            Status::Pending => &[Status::Active, Status::Completed, Status::Error],
            Status::Active => &[Status::Completed, Status::Error],
            Status::Completed | Status::Error => &[],
        }
    }

    pub fn is_final(self) -> bool {
        self.next().is_empty()
    }
}

/// Who may watch a broadcast or a scheduled event (`store::app::access::may_watch` holds
/// the rule). Stored and served by its name; public unless said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Visibility {
    /// Every user of the tenant and its guests; listed.
    #[default]
    Public,
    /// Everyone who knows its id; not listed.
    Unlisted,
    /// Its owner, co-hosts and invitees.
    Private,
    /// As private, and the owner's active subscribers.
    Subscribers,
}

impl Visibility {
    pub const ALL: [Visibility; 4] = [
        Visibility::Public,
        Visibility::Unlisted,
        Visibility::Private,
        Visibility::Subscribers,
    ];

    pub fn parse(s: &str) -> Option<Visibility> {
        Visibility::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// A stored value: one this code does not know reads as private, so it fails closed.
    pub fn stored(s: &str) -> Visibility {
        Visibility::parse(s).unwrap_or(Visibility::Private)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Unlisted => "unlisted",
            Visibility::Private => "private",
            Visibility::Subscribers => "subscribers",
        }
    }

    /// For some viewers only: guests never watch it, its page needs a token and its
    /// playback addresses are signed.
    pub fn is_gated(self) -> bool {
        matches!(self, Visibility::Private | Visibility::Subscribers)
    }
}

/// Status and visibility are strings in JSON, named by `as_str`, and inlined in the
/// OpenAPI schemas that use them.
macro_rules! named_in_json {
    ($($kind:ident),*) => {$(
        impl serde::Serialize for $kind {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl JsonSchema for $kind {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> Cow<'static, str> {
                stringify!($kind).into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let names: Vec<&str> = $kind::ALL.iter().map(|v| v.as_str()).collect();
                schemars::json_schema!({ "type": "string", "enum": names })
            }
        }
    )*};
}
named_in_json!(Status, Visibility);

/// A request's `visibility` field.
impl Choices for Visibility {
    type Value = Visibility;

    fn names() -> Vec<&'static str> {
        Visibility::ALL.iter().map(|v| v.as_str()).collect()
    }

    fn choose(name: &str) -> Option<Visibility> {
        Visibility::parse(name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The broadcast already has this status: nothing changes.
    Unchanged,
    Moved {
        from: Status,
        to: Status,
    },
}

/// Checks a requested move; an invalid one is a 409 listing the allowed next states.
pub fn transition(from: Status, to: Status) -> Result<Transition, ApiError> {
    if from == to {
        return Ok(Transition::Unchanged);
    }
    if from.next().contains(&to) {
        return Ok(Transition::Moved { from, to });
    }
    let allowed: Vec<&str> = from.next().iter().map(|s| s.as_str()).collect();
    Err(ApiError::conflict(
        "invalid_transition",
        format!(
            "a {} broadcast cannot become {}",
            from.as_str(),
            to.as_str()
        ),
    )
    .with_extra("currentStatus", from.as_str())
    .with_extra("allowed", allowed))
}

/// An active broadcast without a heartbeat for this long is stale.
pub const STALE_AFTER_SECS: i64 = 90;

/// Whether an active broadcast whose last sign of life was at `last_seen` is stale at
/// `now`. A broadcast whose publisher dropped is not stale while the publisher may still
/// come back (until `reconnect_deadline`): it completes then instead.
pub fn is_stale(status: Status, last_seen: i64, reconnect_deadline: Option<i64>, now: i64) -> bool {
    status == Status::Active
        && now - last_seen > STALE_AFTER_SECS
        && reconnect_deadline.is_none_or(|deadline| now > deadline)
}

/// The identity a new broadcast (or scheduled event) gets: its public streamId (the SFU
/// room, and where its HLS lives), its secret ingest key, and its short id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamIdentity {
    pub stream_id: String,
    pub stream_key: String,
    pub short_id: String,
}

/// Where the addresses are built from.
pub struct StreamBases<'a> {
    pub base_url: &'a str,
    pub rtmp_ingest_base: &'a str,
    pub playback_hls_base: &'a str,
}

impl StreamIdentity {
    /// A fresh identity: a UUID streamId, and an ingest key of its own (a second random
    /// UUID without dashes: the streamId is public, so nothing may be derived from it).
    pub fn generate() -> Self {
        Self {
            stream_id: ids::uuid(),
            stream_key: super::media::new_stream_key(),
            short_id: ids::random_base62(8),
        }
    }
}

pub fn rtmp_url(bases: &StreamBases<'_>, stream_key: &str) -> String {
    format!(
        "{}/{}",
        bases.rtmp_ingest_base.trim_end_matches('/'),
        stream_key
    )
}

pub fn hls_url(bases: &StreamBases<'_>, stream_id: &str) -> String {
    format!(
        "{}/{}/index.m3u8",
        bases.playback_hls_base.trim_end_matches('/'),
        stream_id
    )
}

/// A live stream's thumbnail (a JPEG the media server refreshes every few seconds).
pub fn thumbnail_url(bases: &StreamBases<'_>, stream_id: &str) -> String {
    format!(
        "{}/{}/thumbnail.jpg",
        bases.playback_hls_base.trim_end_matches('/'),
        stream_id
    )
}

pub fn watch_url(bases: &StreamBases<'_>, short_id: &str) -> String {
    format!(
        "{}/watch/{}",
        bases.base_url.trim_end_matches('/'),
        short_id
    )
}

/// The default recording size of a portrait broadcast that sent no device size.
pub const DEFAULT_PORTRAIT_RECORDING: (i64, i64) = (390, 644);

/// The recording size: the device's when it sent one, else 390x644 for portrait.
pub fn recording_size(device: Option<(i64, i64)>, portrait: bool) -> Option<(i64, i64)> {
    match device {
        Some(size) => Some(size),
        None if portrait => Some(DEFAULT_PORTRAIT_RECORDING),
        None => None,
    }
}

/// The reactions viewers can send.
pub const REACTIONS: [&str; 4] = ["heart", "sparkle", "thumbs_up", "surprised"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_reads_back_what_it_stores_and_fails_closed() {
        for v in Visibility::ALL {
            assert_eq!(Visibility::parse(v.as_str()), Some(v));
            assert_eq!(Visibility::stored(v.as_str()), v);
        }
        assert_eq!(Visibility::parse("secret"), None);
        assert_eq!(
            crate::validate::body::must_be_one_of(&<Visibility as Choices>::names()),
            "must be public, unlisted, private or subscribers"
        );
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(Visibility::stored("secret"), Visibility::Private);
        let gated: Vec<_> = Visibility::ALL
            .into_iter()
            .filter(|v| v.is_gated())
            .collect();
        assert_eq!(gated, [Visibility::Private, Visibility::Subscribers]);
        assert_eq!(
            serde_json::to_value(Visibility::Subscribers).unwrap(),
            serde_json::json!("subscribers")
        );
    }

    #[test]
    fn created_is_pending() {
        assert_eq!(Status::parse("created"), Some(Status::Pending));
        assert_eq!(Status::parse("live"), None);
    }

    #[test]
    fn the_status_machine() {
        use Status::*;
        let all = [Pending, Active, Completed, Error];
        let allowed = [
            (Pending, Active),
            (Pending, Completed),
            (Pending, Error),
            (Active, Completed),
            (Active, Error),
        ];
        for from in all {
            for to in all {
                let result = transition(from, to);
                if from == to {
                    assert_eq!(result, Ok(Transition::Unchanged));
                } else if allowed.contains(&(from, to)) {
                    assert_eq!(result, Ok(Transition::Moved { from, to }));
                } else {
                    let err = result.unwrap_err();
                    assert_eq!((err.status, err.code), (409, "invalid_transition"));
                    let listed: Vec<_> = from.next().iter().map(|s| s.as_str()).collect();
                    assert_eq!(err.extra["allowed"], serde_json::json!(listed));
                }
            }
        }
        assert!(Completed.is_final() && Error.is_final());
    }

    #[test]
    fn identity_and_addresses() {
        let id = StreamIdentity::generate();
        assert_ne!(id.stream_key, id.stream_id.replace('-', ""));
        assert!(super::super::media::is_stream_key(&id.stream_key));
        assert_eq!(id.short_id.len(), 8);
        let bases = StreamBases {
            base_url: "https://live.example/",
            rtmp_ingest_base: "rtmp://ingest.example/live",
            playback_hls_base: "https://cdn.example/hls/",
        };
        assert_eq!(rtmp_url(&bases, "abc"), "rtmp://ingest.example/live/abc");
        assert_eq!(
            hls_url(&bases, "s1"),
            "https://cdn.example/hls/s1/index.m3u8"
        );
        assert_eq!(
            thumbnail_url(&bases, "s1"),
            "https://cdn.example/hls/s1/thumbnail.jpg"
        );
        assert_eq!(
            watch_url(&bases, "Ab3dEf9h"),
            "https://live.example/watch/Ab3dEf9h"
        );
    }

    #[test]
    fn recording_sizes_and_staleness() {
        assert_eq!(recording_size(None, true), Some((390, 644)));
        assert_eq!(recording_size(Some((1170, 2532)), true), Some((1170, 2532)));
        assert_eq!(recording_size(None, false), None);
        assert!(is_stale(Status::Active, 0, None, 91));
        assert!(!is_stale(Status::Active, 0, None, 90));
        assert!(!is_stale(Status::Pending, 0, None, 1000));
        // A dropped publisher's reconnect window keeps it from going stale.
        assert!(!is_stale(Status::Active, 0, Some(120), 100));
        assert!(is_stale(Status::Active, 0, Some(120), 121));
    }
}
