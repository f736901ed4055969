//! Recording with LiveKit Egress: a broadcast's recording settings, the egress request the
//! platform sends (LiveKit's `RoomCompositeEgressRequest`, field names as in its protocol),
//! what an egress webhook reports, and how a recording moves
//! `starting → active → ending → ready | failed`.

use serde_json::{Value, json};

/// The layouts the record page draws (`docs/pages.md`).
pub const LAYOUTS: [&str; 6] = [
    "default", "grid3x3", "grid4x4", "battle", "onebig", "active",
];

/// How many egress starts a recording gets: the first and one retry.
pub const MAX_ATTEMPTS: i64 = 2;

/// What the egress writes: one MP4 file, or an HLS playlist with its segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Mp4,
    Hls,
}

impl Output {
    pub const ALL: [Output; 2] = [Output::Mp4, Output::Hls];

    pub fn parse(s: &str) -> Option<Output> {
        match s {
            "mp4" => Some(Output::Mp4),
            "hls" => Some(Output::Hls),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Output::Mp4 => "mp4",
            Output::Hls => "hls",
        }
    }
}

/// A broadcast's recording settings (or a tenant's default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub enabled: bool,
    pub layout: String,
    pub output: Output,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: false,
            layout: "default".into(),
            output: Output::Hls,
        }
    }
}

/// A change to settings: any of the three fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsPatch {
    pub enabled: Option<bool>,
    pub layout: Option<String>,
    pub output: Option<Output>,
}

impl SettingsPatch {
    /// Reads `{enabled?, layout?, output?}`; answers the field errors (relative names).
    pub fn from_json(value: &Value) -> Result<SettingsPatch, Vec<(&'static str, String)>> {
        let Value::Object(map) = value else {
            return Err(vec![("", "must be an object".into())]);
        };
        let mut errors = Vec::new();
        let mut patch = SettingsPatch::default();
        for (key, v) in map {
            // As everywhere in the API, a null member is one left out.
            if v.is_null() && ["enabled", "layout", "output"].contains(&key.as_str()) {
                continue;
            }
            match key.as_str() {
                "enabled" => match v.as_bool() {
                    Some(b) => patch.enabled = Some(b),
                    None => errors.push(("enabled", "must be true or false".into())),
                },
                "layout" => match v.as_str().filter(|l| LAYOUTS.contains(l)) {
                    Some(l) => patch.layout = Some(l.to_string()),
                    None => {
                        errors.push(("layout", format!("must be one of {}", LAYOUTS.join(", "))))
                    }
                },
                "output" => match v.as_str().and_then(Output::parse) {
                    Some(o) => patch.output = Some(o),
                    None => errors.push(("output", "must be mp4 or hls".into())),
                },
                _ => errors.push(("", format!("unknown field {key}"))),
            }
        }
        if errors.is_empty() {
            Ok(patch)
        } else {
            Err(errors)
        }
    }

    pub fn applied_to(&self, base: &Settings) -> Settings {
        Settings {
            enabled: self.enabled.unwrap_or(base.enabled),
            layout: self.layout.clone().unwrap_or_else(|| base.layout.clone()),
            output: self.output.unwrap_or(base.output),
        }
    }
}

/// Where a recording is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Starting,
    Active,
    Ending,
    Ready,
    Failed,
}

impl Status {
    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "starting" => Status::Starting,
            "active" => Status::Active,
            "ending" => Status::Ending,
            "ready" => Status::Ready,
            "failed" => Status::Failed,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Starting => "starting",
            Status::Active => "active",
            Status::Ending => "ending",
            Status::Ready => "ready",
            Status::Failed => "failed",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(self, Status::Ready | Status::Failed)
    }
}

/// LiveKit's `EgressStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressStatus {
    Starting,
    Active,
    Ending,
    Complete,
    Failed,
    Aborted,
    LimitReached,
}

impl EgressStatus {
    /// From protojson: the enum's name, or its number.
    fn read(value: &Value) -> Option<EgressStatus> {
        let number = match value {
            Value::String(name) => match name.as_str() {
                "EGRESS_STARTING" => 0,
                "EGRESS_ACTIVE" => 1,
                "EGRESS_ENDING" => 2,
                "EGRESS_COMPLETE" => 3,
                "EGRESS_FAILED" => 4,
                "EGRESS_ABORTED" => 5,
                "EGRESS_LIMIT_REACHED" => 6,
                _ => return None,
            },
            Value::Number(n) => n.as_i64()?,
            Value::Null => 0,
            _ => return None,
        };
        Some(match number {
            0 => EgressStatus::Starting,
            1 => EgressStatus::Active,
            2 => EgressStatus::Ending,
            3 => EgressStatus::Complete,
            4 => EgressStatus::Failed,
            5 => EgressStatus::Aborted,
            6 => EgressStatus::LimitReached,
            _ => return None,
        })
    }
}

/// What an egress webhook (or a Twirp answer) says about one egress.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressReport {
    pub egress_id: String,
    pub room_name: String,
    pub status: EgressStatus,
    pub error: String,
    /// The file's or playlist's location as the egress reports it.
    pub location: Option<String>,
    pub duration_ms: Option<i64>,
    pub size_bytes: Option<i64>,
}

/// A protojson field by its JSON (camelCase) or proto (snake_case) name.
fn field<'a>(object: &'a Value, camel: &str, snake: &str) -> &'a Value {
    match &object[camel] {
        Value::Null => &object[snake],
        found => found,
    }
}

/// An int64 (protojson writes them as strings).
fn int64(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

impl EgressReport {
    /// Reads LiveKit's `EgressInfo`; `None` without an egress id or with an unknown status.
    pub fn read(info: &Value) -> Option<EgressReport> {
        let egress_id = field(info, "egressId", "egress_id").as_str()?.to_string();
        if egress_id.is_empty() {
            return None;
        }
        let status = EgressStatus::read(&info["status"])?;
        let file = field(info, "fileResults", "file_results")
            .get(0)
            .or_else(|| info.get("file"));
        let segments = field(info, "segmentResults", "segment_results")
            .get(0)
            .or_else(|| info.get("segments"));
        let (location, duration_ns, size) = if let Some(f) = file {
            (
                f["location"].as_str(),
                int64(&f["duration"]),
                int64(&f["size"]),
            )
        } else if let Some(s) = segments {
            (
                field(s, "playlistLocation", "playlist_location").as_str(),
                int64(&s["duration"]),
                int64(&s["size"]),
            )
        } else {
            (None, None, None)
        };
        Some(EgressReport {
            egress_id,
            room_name: field(info, "roomName", "room_name")
                .as_str()
                .unwrap_or_default()
                .to_string(),
            status,
            error: info["error"].as_str().unwrap_or_default().to_string(),
            location: location.filter(|l| !l.is_empty()).map(str::to_string),
            duration_ms: duration_ns.map(|ns| ns / 1_000_000),
            size_bytes: size,
        })
    }
}

/// What to do with a recording on an egress report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing: the report is old news or about a finished recording.
    Ignore,
    Move(Status),
    /// The egress failed before it ever ran: start another one.
    Retry,
}

/// The recording's next step, from its status and attempts and what the egress reports.
pub fn step(current: Status, attempts: i64, report: EgressStatus) -> Step {
    if current.is_final() {
        return Step::Ignore;
    }
    let to = match report {
        EgressStatus::Starting => return Step::Ignore,
        EgressStatus::Active => Status::Active,
        EgressStatus::Ending => Status::Ending,
        EgressStatus::Complete | EgressStatus::LimitReached => Status::Ready,
        EgressStatus::Failed | EgressStatus::Aborted => {
            if current == Status::Starting && attempts < MAX_ATTEMPTS {
                return Step::Retry;
            }
            Status::Failed
        }
    };
    let rank = |s: Status| match s {
        Status::Starting => 0,
        Status::Active => 1,
        Status::Ending => 2,
        Status::Ready | Status::Failed => 3,
    };
    if rank(to) <= rank(current) {
        Step::Ignore
    } else {
        Step::Move(to)
    }
}

/// An S3-compatible bucket the egress uploads to (LiveKit's `S3Upload`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    pub bucket: String,
    pub region: String,
    /// Empty for AWS itself; set for R2, MinIO, Spaces and the like (path-style then).
    pub endpoint: String,
    pub access_key: String,
    pub secret: String,
}

impl Storage {
    fn upload(&self) -> Value {
        let mut s3 = json!({
            "access_key": self.access_key,
            "secret": self.secret,
            "region": self.region,
            "bucket": self.bucket,
        });
        if !self.endpoint.is_empty() {
            s3["endpoint"] = self.endpoint.clone().into();
            s3["force_path_style"] = true.into();
        }
        s3
    }
}

/// The object key of a recording: the MP4 file, or the HLS playlist (its segments beside it).
pub fn object_key(stream_id: &str, recording_id: &str, output: Output) -> String {
    match output {
        Output::Mp4 => format!("recordings/{stream_id}/{recording_id}.mp4"),
        Output::Hls => format!("recordings/{stream_id}/{recording_id}/index.m3u8"),
    }
}

/// The record page the egress opens: the broadcast's size, orientation and layout. The
/// egress adds `url`, `token` and `layout` itself.
pub fn record_page_url(
    base_url: &str,
    stream_id: &str,
    size: (i64, i64),
    orientation: &str,
    layout: &str,
) -> String {
    format!(
        "{}/streams/{stream_id}/record?width={}&height={}&orientation={orientation}&layout={layout}",
        base_url.trim_end_matches('/'),
        size.0,
        size.1,
    )
}

/// The page size for a broadcast: its recording size when inside the record page's range,
/// else the page's defaults for the orientation.
pub fn page_size(recording: Option<(i64, i64)>, orientation: &str) -> (i64, i64) {
    let in_range = |n: i64| (64..=3840).contains(&n);
    match recording {
        Some((w, h)) if in_range(w) && in_range(h) => (w, h),
        _ if orientation == "landscape" => (1920, 1080),
        _ => (1080, 1920),
    }
}

/// What an egress is started for.
pub struct EgressPlan<'a> {
    pub room_name: &'a str,
    pub page_url: &'a str,
    pub layout: &'a str,
    pub size: (i64, i64),
    pub output: Output,
    pub object_key: &'a str,
    pub storage: Option<&'a Storage>,
}

/// LiveKit's `RoomCompositeEgressRequest` for `plan` (proto field names; Twirp's JSON
/// accepts them). Without storage the egress's own configured upload is used.
pub fn egress_request(plan: &EgressPlan<'_>) -> Value {
    let even = |n: i64| n - n % 2;
    let mut request = json!({
        "room_name": plan.room_name,
        "layout": plan.layout,
        "custom_base_url": plan.page_url,
        "advanced": { "width": even(plan.size.0), "height": even(plan.size.1), "framerate": 30 },
    });
    let s3 = plan.storage.map(Storage::upload);
    match plan.output {
        Output::Mp4 => {
            let mut file = json!({ "file_type": "MP4", "filepath": plan.object_key });
            if let Some(s3) = s3 {
                file["s3"] = s3;
            }
            request["file_outputs"] = json!([file]);
        }
        Output::Hls => {
            let (prefix, playlist) = plan
                .object_key
                .rsplit_once('/')
                .unwrap_or(("", plan.object_key));
            let mut segments = json!({
                "protocol": "HLS_PROTOCOL",
                "filename_prefix": format!("{prefix}/segment"),
                "playlist_name": playlist,
                "segment_duration": 4,
            });
            if let Some(s3) = s3 {
                segments["s3"] = s3;
            }
            request["segment_outputs"] = json!([segments]);
        }
    }
    request
}

/// LiveKit's `RoomCompositeEgressRequest` that publishes room `room_name`, as the record
/// page `page_url` renders it at `size`, to the RTMP address `rtmp_url` (the platform's
/// own ingest, so that a broadcast published into the room gets HLS like any other).
pub fn stream_egress_request(
    room_name: &str,
    page_url: &str,
    size: (i64, i64),
    rtmp_url: &str,
) -> Value {
    let even = |n: i64| n - n % 2;
    json!({
        "room_name": room_name,
        "layout": "default",
        "custom_base_url": page_url,
        "advanced": { "width": even(size.0), "height": even(size.1), "framerate": 30 },
        "stream_outputs": [{ "protocol": "RTMP", "urls": [rtmp_url] }],
    })
}

/// Where viewers fetch a recording: under the public base when one is set, else the
/// location the egress reported when it is an http(s) URL.
pub fn public_url(public_base: &str, object_key: &str, location: Option<&str>) -> Option<String> {
    let base = public_base.trim_end_matches('/');
    if !base.is_empty() {
        return Some(format!("{base}/{object_key}"));
    }
    location
        .filter(|l| l.starts_with("https://") || l.starts_with("http://"))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_patches_are_checked_and_applied() {
        let patch = SettingsPatch::from_json(&json!({"enabled": true, "output": "mp4"})).unwrap();
        let s = patch.applied_to(&Settings::default());
        assert_eq!(
            s,
            Settings {
                enabled: true,
                layout: "default".into(),
                output: Output::Mp4
            }
        );
        let errors =
            SettingsPatch::from_json(&json!({"layout": "x", "output": "avi", "y": 1})).unwrap_err();
        assert_eq!(errors.len(), 3);
        assert!(SettingsPatch::from_json(&json!(true)).is_err());
        // A null member is one left out.
        assert_eq!(
            SettingsPatch::from_json(&json!({"enabled": null, "output": null})).unwrap(),
            SettingsPatch::default()
        );
    }

    #[test]
    fn the_recording_moves_forward_only() {
        use EgressStatus as E;
        use Status as S;
        assert_eq!(step(S::Starting, 1, E::Active), Step::Move(S::Active));
        assert_eq!(step(S::Active, 1, E::Ending), Step::Move(S::Ending));
        assert_eq!(step(S::Ending, 1, E::Complete), Step::Move(S::Ready));
        assert_eq!(step(S::Active, 1, E::LimitReached), Step::Move(S::Ready));
        assert_eq!(step(S::Ending, 1, E::Active), Step::Ignore, "late update");
        assert_eq!(step(S::Ready, 1, E::Failed), Step::Ignore);
        assert_eq!(step(S::Starting, 1, E::Starting), Step::Ignore);
    }

    #[test]
    fn a_failed_start_is_retried_once() {
        assert_eq!(step(Status::Starting, 1, EgressStatus::Failed), Step::Retry);
        assert_eq!(
            step(Status::Starting, 2, EgressStatus::Failed),
            Step::Move(Status::Failed)
        );
        assert_eq!(
            step(Status::Active, 1, EgressStatus::Aborted),
            Step::Move(Status::Failed),
            "a recording that ran is not restarted"
        );
    }

    #[test]
    fn egress_info_reads_in_either_naming() {
        let camel = json!({
            "egressId": "EG_1", "roomName": "room", "status": "EGRESS_COMPLETE",
            "fileResults": [{"location": "s3://b/k.mp4", "duration": "61500000000", "size": "1234"}],
        });
        let r = EgressReport::read(&camel).unwrap();
        assert_eq!(r.status, EgressStatus::Complete);
        assert_eq!(r.duration_ms, Some(61_500));
        assert_eq!(r.size_bytes, Some(1234));
        let snake = json!({
            "egress_id": "EG_2", "room_name": "room", "status": 4, "error": "Start signal not received",
            "segment_results": [{"playlist_location": "https://cdn/p.m3u8", "duration": 5, "size": 9}],
        });
        let r = EgressReport::read(&snake).unwrap();
        assert_eq!(r.status, EgressStatus::Failed);
        assert_eq!(r.location.as_deref(), Some("https://cdn/p.m3u8"));
        assert!(EgressReport::read(&json!({"status": 1})).is_none());
        assert!(EgressReport::read(&json!({"egressId": "E", "status": "NOPE"})).is_none());
    }

    #[test]
    fn the_request_names_the_page_and_the_output() {
        let storage = Storage {
            bucket: "b".into(),
            region: "auto".into(),
            endpoint: "https://s3.example".into(),
            access_key: "ak".into(),
            secret: "sk".into(),
        };
        let page = record_page_url("https://app/", "room", (1081, 1920), "portrait", "grid3x3");
        assert_eq!(
            page,
            "https://app/streams/room/record?width=1081&height=1920&orientation=portrait&layout=grid3x3"
        );
        let key = object_key("room", "rec", Output::Hls);
        let plan = EgressPlan {
            room_name: "room",
            page_url: &page,
            layout: "grid3x3",
            size: (1081, 1920),
            output: Output::Hls,
            object_key: &key,
            storage: Some(&storage),
        };
        let r = egress_request(&plan);
        assert_eq!(r["advanced"]["width"], 1080);
        let seg = &r["segment_outputs"][0];
        assert_eq!(seg["playlist_name"], "index.m3u8");
        assert_eq!(seg["filename_prefix"], "recordings/room/rec/segment");
        assert_eq!(seg["s3"]["force_path_style"], true);
        let mp4 = egress_request(&EgressPlan {
            output: Output::Mp4,
            storage: None,
            ..plan
        });
        assert_eq!(
            mp4["file_outputs"][0]["filepath"],
            "recordings/room/rec/index.m3u8"
        );
        assert!(mp4["file_outputs"][0].get("s3").is_none());
    }

    #[test]
    fn the_public_url_prefers_the_public_base() {
        assert_eq!(
            public_url("https://cdn/", "recordings/a.mp4", Some("s3://x")).as_deref(),
            Some("https://cdn/recordings/a.mp4")
        );
        assert_eq!(public_url("", "k", Some("s3://x")), None);
        assert_eq!(
            public_url("", "k", Some("https://x/k")).as_deref(),
            Some("https://x/k")
        );
        assert_eq!(page_size(Some((390, 644)), "portrait"), (390, 644));
        assert_eq!(page_size(None, "landscape"), (1920, 1080));
    }
}
