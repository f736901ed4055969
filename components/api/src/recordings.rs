//! Recording with LiveKit Egress: starting a room-composite web egress on our record page
//! when a recorded broadcast goes live (or on request), stopping it when the broadcast
//! ends, following the egress through the SFU's webhooks, and the recordings' routes.

use crate::ApiRoute;
use crate::access::{self, Viewer};
use crate::egress::{self, Egress};
use ::store::app;
use ::store::broadcasts::{self as broadcast_store, Broadcast};
use ::store::recordings::{self as store, NewRecording, Outcome, Recording};
use ::store::{Db, cohosts, outbox};
use domain::broadcast::Status as BroadcastStatus;
use domain::recording::{
    self as rules, EgressPlan, EgressReport, LAYOUTS, Output, Settings, SettingsPatch, Status, Step,
};
use domain::validate::JsonBody;
use domain::validate::body::{FieldKind, RequestBody};
use domain::{ApiError, ids, time};
use edge::answers::Deleted;
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::endpoint::{Created, Json, NoBody};
use edge::spin::http::{ActorCtx, Caller, CallerCtx, ServerCtx, UserCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// A broadcast's recording settings, or the tenant's default for new broadcasts.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "RecordingSettings")]
pub struct SettingsView {
    /// Whether the broadcast is recorded when it goes live.
    enabled: bool,
    /// How the record page lays out the hosts.
    #[schemars(extend("enum" = LAYOUTS))]
    layout: String,
    /// One MP4 file, or an HLS playlist with its segments.
    #[schemars(extend("enum" = OUTPUTS))]
    output: &'static str,
}

/// The outputs' names (`Output::as_str`).
const OUTPUTS: [&str; 2] = ["mp4", "hls"];

impl From<&Settings> for SettingsView {
    fn from(settings: &Settings) -> Self {
        SettingsView {
            enabled: settings.enabled,
            layout: settings.layout.clone(),
            output: settings.output.as_str(),
        }
    }
}

/// A recording of a broadcast by LiveKit Egress.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Recording")]
pub struct RecordingView {
    #[schemars(extend("format" = "uuid"))]
    id: String,
    #[schemars(extend("format" = "uuid"))]
    broadcast_id: String,
    #[schemars(extend("enum" = ["starting", "active", "ending", "ready", "failed"]))]
    status: &'static str,
    layout: String,
    #[schemars(extend("enum" = OUTPUTS))]
    output: &'static str,
    /// Where the file or playlist is fetched, once it is ready.
    url: Option<String>,
    duration_seconds: Option<f64>,
    size_bytes: Option<i64>,
    /// Why it failed.
    error: Option<String>,
    /// The egress starts tried: the first and at most one retry.
    #[schemars(range(min = 0))]
    attempts: i64,
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
    #[schemars(extend("format" = "date-time"))]
    started_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    ended_at: Option<String>,
}

/// A recording as the API answers it.
pub fn view(r: &Recording) -> RecordingView {
    let at = |t: Option<i64>| t.map(time::format_rfc3339);
    RecordingView {
        id: r.id.clone(),
        broadcast_id: r.broadcast_id.clone(),
        status: r.status.as_str(),
        layout: r.layout.clone(),
        output: r.output.as_str(),
        url: r.url.clone(),
        duration_seconds: r.duration_ms.map(|ms| ms as f64 / 1000.0),
        size_bytes: r.size_bytes,
        error: r.error.clone(),
        attempts: r.attempts,
        created_at: time::format_rfc3339(r.created_at),
        started_at: at(r.started_at),
        ended_at: at(r.ended_at),
    }
}

/// A broadcast's recordings, oldest first.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "RecordingList")]
pub struct RecordingList {
    items: Vec<RecordingView>,
    #[schemars(range(min = 0))]
    total: i64,
}

/// The `recording.*` event of a recording that has just reached `r.status`, if it has one.
fn record_event(db: &Db, r: &Recording, now: i64) -> Result<(), ApiError> {
    let event_type = match r.status {
        Status::Active => "recording.started",
        Status::Ready => "recording.ready",
        Status::Failed => "recording.failed",
        Status::Starting | Status::Ending => return Ok(()),
    };
    let subject = outbox::Subject {
        object_type: "recording",
        object_id: &r.id,
    };
    outbox::record(db, &r.client_id, event_type, subject, &view(r), now).map(|_| ())
}

/// The `recording` field of a broadcast body: any of its settings, the rest from the
/// tenant's default.
pub struct RecordingField;

impl FieldKind for RecordingField {
    type Value = Option<SettingsPatch>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<SettingsPatch> {
        let value = body.opt_value(name)?;
        read_settings(body, name, &value)
    }

    fn schema() -> Value {
        json!({
            "description": "Recording settings: any of the three fields, the rest from the \
                tenant's default; null is the same as leaving it out.",
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "enabled": EnabledSetting::schema(),
                        "layout": LayoutSetting::schema(),
                        "output": OutputSetting::schema(),
                    },
                    "additionalProperties": false,
                },
            ],
        })
    }
}

/// Reads settings from `value` by the settings' own rules; their errors are recorded
/// under `name` (`name.field` for a field's).
fn read_settings(body: &mut JsonBody, name: &'static str, value: &Value) -> Option<SettingsPatch> {
    match SettingsPatch::from_json(value) {
        Ok(patch) => Some(patch),
        Err(errors) => {
            for (field, message) in errors {
                let path = if field.is_empty() {
                    name.to_string()
                } else {
                    format!("{name}.{field}")
                };
                body.error(&path, message);
            }
            None
        }
    }
}

/// One setting sent on its own, read by the settings' rules (its errors under `name`).
fn read_setting(body: &mut JsonBody, name: &'static str) -> Option<SettingsPatch> {
    let value = body.opt_value(name)?;
    let alone = Value::Object(Map::from_iter([(name.to_string(), value)]));
    match SettingsPatch::from_json(&alone) {
        Ok(patch) => Some(patch),
        Err(errors) => {
            for (_, message) in errors {
                body.error(name, message);
            }
            None
        }
    }
}

/// `enabled`: whether broadcasts are recorded when they go live.
pub struct EnabledSetting;

impl FieldKind for EnabledSetting {
    type Value = Option<bool>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<bool> {
        read_setting(body, name)?.enabled
    }

    fn schema() -> Value {
        json!({ "type": ["boolean", "null"] })
    }
}

/// `layout`: one of the record page's layouts.
pub struct LayoutSetting;

impl FieldKind for LayoutSetting {
    type Value = Option<String>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<String> {
        read_setting(body, name)?.layout
    }

    fn schema() -> Value {
        let mut names: Vec<Value> = LAYOUTS.iter().map(|l| Value::from(*l)).collect();
        names.push(Value::Null);
        json!({ "enum": names })
    }
}

/// `output`: mp4 or hls.
pub struct OutputSetting;

impl FieldKind for OutputSetting {
    type Value = Option<Output>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Output> {
        read_setting(body, name)?.output
    }

    fn schema() -> Value {
        let mut names: Vec<Value> = OUTPUTS.iter().map(|o| Value::from(*o)).collect();
        names.push(Value::Null);
        json!({ "enum": names })
    }
}

/// Changes to the tenant's default recording settings: any of the three, at least one.
#[derive(Debug, Clone)]
pub struct DefaultsChangesBody {
    pub changes: SettingsPatch,
}

/// The settings a change names, in the order they are read.
const SETTINGS: [&str; 3] = ["enabled", "layout", "output"];

impl RequestBody for DefaultsChangesBody {
    const NAME: &'static str = "RecordingDefaultsChanges";

    fn read(body: &mut JsonBody) -> Self {
        let changes = SettingsPatch {
            enabled: EnabledSetting::read(body, "enabled"),
            layout: LayoutSetting::read(body, "layout"),
            output: OutputSetting::read(body, "output"),
        };
        if changes == SettingsPatch::default() && !body.has_errors_for(&SETTINGS) {
            body.error("enabled", "send at least one of enabled, layout, output");
        }
        DefaultsChangesBody { changes }
    }

    fn describe(properties: &mut Map<String, Value>, _required: &mut Vec<Value>) {
        properties.insert("enabled".into(), EnabledSetting::schema());
        properties.insert("layout".into(), LayoutSetting::schema());
        properties.insert("output".into(), OutputSetting::schema());
    }

    /// An object of the three settings and no others, with at least one of them.
    fn schema() -> Value {
        let mut properties = Map::new();
        Self::describe(&mut properties, &mut Vec::new());
        json!({
            "type": "object",
            "description": "Any of the three fields; at least one.",
            "properties": properties,
            "additionalProperties": false,
            "minProperties": 1,
        })
    }
}

/// A new broadcast's settings: the tenant's default with the request's changes.
pub fn initial_settings(
    db: &Db,
    client_id: &str,
    patch: Option<&SettingsPatch>,
) -> Result<Settings, ApiError> {
    let base = store::tenant_default(db, client_id)?;
    Ok(patch.map_or(base.clone(), |p| p.applied_to(&base)))
}

/// Changes a broadcast's settings; only before it goes live.
pub fn update_settings(
    db: &Db,
    b: &Broadcast,
    patch: &SettingsPatch,
    now: i64,
) -> Result<(), ApiError> {
    if b.status != BroadcastStatus::Pending {
        return Err(ApiError::conflict(
            "already_live",
            "recording settings change only before the broadcast goes live",
        ));
    }
    let current = store::settings(db, b)?;
    store::save_settings(db, b, &patch.applied_to(&current), now)
}

/// Runs the egress for a `starting` recording: a failed start is tried once more, then the
/// recording fails with the reason. Answers the recording as it stands.
fn launch(db: &Db, b: &Broadcast, mut r: Recording, now: i64) -> Result<Recording, ApiError> {
    loop {
        let outcome = Egress::load().and_then(|egress| {
            let size = rules::page_size(b.recording, &b.orientation);
            let page = rules::record_page_url(
                crate::links::Links::load().base_url(),
                &b.identity.stream_id,
                size,
                &b.orientation,
                &r.layout,
            );
            let storage = egress::storage();
            let request = rules::egress_request(&EgressPlan {
                room_name: &b.identity.stream_id,
                page_url: &page,
                layout: &r.layout,
                size,
                output: r.output,
                object_key: &r.object_key,
                storage: storage.as_ref(),
            });
            egress.start(&request, now)
        });
        match outcome {
            Ok(report) => {
                store::set_egress(db, &r, &report.egress_id, now)?;
                return Ok(store::by_id(db, b, &r.id)?.unwrap_or(r));
            }
            Err(why) if r.attempts < rules::MAX_ATTEMPTS => {
                eprintln!("recording {}: egress start failed ({why}); retrying", r.id);
                match store::begin_retry(db, &r, now)? {
                    Some(next) => r = next,
                    None => return Ok(r),
                }
            }
            Err(why) => {
                let failed = Outcome {
                    error: Some(why),
                    ..Outcome::default()
                };
                return db.transaction(|tx| {
                    let moved = store::advance(tx, &r, Status::Failed, &failed, now)?;
                    if let Some(moved) = &moved {
                        record_event(tx, moved, now)?;
                    }
                    Ok(moved.unwrap_or(r.clone()))
                });
            }
        }
    }
}

/// Creates a recording of `b` with `settings` and starts its egress; 409 when one is in
/// progress already.
fn start_recording(
    db: &Db,
    b: &Broadcast,
    settings: &Settings,
    now_ms: i64,
) -> Result<Recording, ApiError> {
    let now = now_ms.div_euclid(1000);
    let id = ids::uuid();
    let key = rules::object_key(&b.identity.stream_id, &id, settings.output);
    let new = NewRecording {
        id: &id,
        layout: &settings.layout,
        output: settings.output,
        object_key: &key,
        created_ms: now_ms,
    };
    let created = db.transaction(|tx| {
        broadcast_store::lock(tx, b)?;
        store::create(tx, b, &new, now)
    })?;
    let r = created.ok_or_else(|| {
        ApiError::conflict(
            "recording_in_progress",
            "the broadcast is being recorded already",
        )
    })?;
    launch(db, b, r, now)
}

/// Asks the egress of the broadcast's recording in progress to stop; the recording is
/// `ending` until the SFU reports the files. `None` when nothing is being recorded.
fn stop_recording(db: &Db, b: &Broadcast, now: i64) -> Result<Option<Recording>, ApiError> {
    let Some(r) = store::in_progress(db, b)? else {
        return Ok(None);
    };
    let Some(egress_id) = r.egress_id.clone() else {
        return Ok(Some(r));
    };
    if r.status == Status::Ending {
        return Ok(Some(r));
    }
    let egress = Egress::load().map_err(|why| ApiError::unavailable("sfu_not_configured", why))?;
    egress
        .stop(&egress_id, now)
        .map_err(|why| ApiError::new(502, "egress_failed", why))?;
    let moved = store::advance(db, &r, Status::Ending, &Outcome::default(), now)?;
    Ok(Some(match moved {
        Some(m) => m,
        None => store::by_id(db, b, &r.id)?.unwrap_or(r),
    }))
}

/// After a broadcast's status changed: a recorded broadcast that went live starts its
/// recording; one that ended stops it. Best effort: the status change stands either way.
pub fn on_status_change(db: &Db, b: &Broadcast, now_ms: i64) {
    let now = now_ms.div_euclid(1000);
    let result = match b.status {
        BroadcastStatus::Active => store::settings(db, b).and_then(|s| {
            if s.enabled {
                start_recording(db, b, &s, now_ms).map(|_| ())
            } else {
                Ok(())
            }
        }),
        BroadcastStatus::Completed | BroadcastStatus::Error => {
            stop_recording(db, b, now).map(|_| ())
        }
        BroadcastStatus::Pending => Ok(()),
    };
    if let Err(e) = result {
        eprintln!("broadcast {}: recording: {}", b.id, e.detail);
    }
}

/// What an egress event did.
pub enum EgressOutcome {
    /// It moved the recording its egress runs for.
    Moved(Box<RecordingView>),
    /// It changed nothing, and why.
    Unrelated(&'static str),
}

/// An egress event from the SFU's webhook: moves the recording its egress runs for.
pub fn on_egress_event(db: &Db, info: &Value, now: i64) -> Result<EgressOutcome, ApiError> {
    let report = EgressReport::read(info).ok_or_else(|| {
        ApiError::new(
            422,
            "invalid_webhook",
            "an egress event needs egressInfo with an egress id and a status",
        )
    })?;
    let ignored = |why: &'static str| Ok(EgressOutcome::Unrelated(why));
    let Some(r) = store::by_egress(db, &report.egress_id)? else {
        return ignored("unknown egress");
    };
    let b = app::broadcasts::load(db, &r.client_id, &r.broadcast_id, now)?;
    if !report.room_name.is_empty() && report.room_name != b.identity.stream_id {
        return ignored("the egress is for another room");
    }
    match rules::step(r.status, r.attempts, report.status) {
        Step::Ignore => ignored("no change"),
        Step::Retry => {
            eprintln!(
                "recording {}: egress {} failed to start ({}); retrying",
                r.id, report.egress_id, report.error
            );
            let Some(next) = store::begin_retry(db, &r, now)? else {
                return ignored("moved meanwhile");
            };
            let r = launch(db, &b, next, now)?;
            Ok(EgressOutcome::Moved(Box::new(view(&r))))
        }
        Step::Move(to) => {
            let outcome = Outcome {
                url: (to == Status::Ready)
                    .then(|| {
                        rules::public_url(
                            &egress::public_base(),
                            &r.object_key,
                            report.location.as_deref(),
                        )
                    })
                    .flatten(),
                duration_ms: report.duration_ms.filter(|_| to == Status::Ready),
                size_bytes: report.size_bytes.filter(|_| to == Status::Ready),
                error: (to == Status::Failed).then(|| {
                    if report.error.is_empty() {
                        "the egress failed".to_string()
                    } else {
                        report.error.clone()
                    }
                }),
            };
            let moved = db.transaction(|tx| {
                let moved = store::advance(tx, &r, to, &outcome, now)?;
                if let Some(m) = &moved {
                    record_event(tx, m, now)?;
                }
                Ok(moved)
            })?;
            match moved {
                Some(m) => Ok(EgressOutcome::Moved(Box::new(view(&m)))),
                None => ignored("moved meanwhile"),
            }
        }
    }
}

/// Whether a user may start and stop recordings: the owner, or an active co-host with
/// `canControlLayout` (production control).
fn may_control(db: &Db, b: &Broadcast, user_id: &str) -> Result<bool, ApiError> {
    if b.is_owned_by(user_id) {
        return Ok(true);
    }
    Ok(cohosts::of_user(db, b, user_id)?
        .is_some_and(|c| c.is_active() && c.permissions.can_control_layout))
}

/// Whether a user sees every recording (not only the ready ones): owner and co-hosts.
fn is_host(db: &Db, b: &Broadcast, user_id: &str) -> Result<bool, ApiError> {
    if b.is_owned_by(user_id) {
        return Ok(true);
    }
    Ok(cohosts::of_user(db, b, user_id)?.is_some_and(|c| c.is_active()))
}

/// The broadcast a controller names, checked: 404 to whoever may not watch it, 403 to
/// watchers without control.
fn controlled(ctx: &UserCtx, db: &Db) -> Result<Broadcast, ApiError> {
    let b = app::broadcasts::load(db, &ctx.tenant.client_id, ctx.param("id"), ctx.now())?;
    if !may_control(db, &b, &ctx.user.id)? {
        access::check_can_watch(db, &b, Viewer::User(&ctx.user.id), ctx.now())?;
        return Err(ApiError::forbidden(
            "only the owner or a co-host with canControlLayout records the broadcast",
        ));
    }
    Ok(b)
}

/// The recordings' routes: controllers start and stop them, watchers list the ready ones,
/// the tenant's server sets the default for new broadcasts.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/broadcasts/{id}/recordings",
        Caller(list),
        "List (recordings)",
        |op| op
            .answers(
                200,
                "Every recording for the owner, co-hosts and the tenant's server; the ready ones \
                 for other viewers",
                Schema::view::<RecordingList>(),
            )
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/recordings/start",
        User(start),
        "Start (recordings)",
        |op| op
            .link(
                "DELETE /api/broadcasts/{id}/recordings/{recordingId}",
                &[
                    ("id", "$request.path.id"),
                    ("recordingId", "$response.body#/id"),
                ],
            )
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["not_live", "recording_in_progress"])
            .errors(502, &["egress_failed"])
            .errors(503, &["sfu_not_configured"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/recordings/stop",
        User(stop),
        "Stop (recordings)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["not_recording"]),
    ),
    endpoint!(
        DELETE "/api/broadcasts/{id}/recordings/{recordingId}",
        UserOrServer(delete),
        "Delete (recordings)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["recording_in_progress"]),
    ),
    endpoint!(
        GET "/api/v1/recording-defaults",
        Server(get_defaults),
        "Get defaults (recordings)",
    ),
    endpoint!(
        PUT "/api/v1/recording-defaults",
        Server(put_defaults),
        "Put defaults (recordings)",
    ),
];

/// Records the live broadcast now, with its layout and output settings.
fn start(ctx: &UserCtx, _: NoBody) -> Result<Created<RecordingView>, ApiError> {
    let db = ctx.db()?;
    let b = controlled(ctx, &db)?;
    if b.status != BroadcastStatus::Active {
        return Err(ApiError::conflict(
            "not_live",
            format!("the broadcast is {}", b.status.as_str()),
        ));
    }
    Egress::load().map_err(|why| ApiError::unavailable("sfu_not_configured", why))?;
    let settings = store::settings(&db, &b)?;
    let r = start_recording(&db, &b, &settings, ctx.now_millis())?;
    if r.status == Status::Failed {
        return Err(ApiError::new(
            502,
            "egress_failed",
            r.error.unwrap_or_else(|| "the egress did not start".into()),
        ));
    }
    Ok(Created(view(&r)))
}

/// Stops the recording in progress.
fn stop(ctx: &UserCtx, _: NoBody) -> Result<Json<RecordingView>, ApiError> {
    let db = ctx.db()?;
    let b = controlled(ctx, &db)?;
    match stop_recording(&db, &b, ctx.now())? {
        Some(r) => Ok(Json(view(&r))),
        None => Err(ApiError::conflict(
            "not_recording",
            "the broadcast is not being recorded",
        )),
    }
}

/// Every recording for the owner, co-hosts and the tenant's server; the ready ones for
/// others who may watch the broadcast.
fn list(ctx: &CallerCtx, _: NoBody) -> Result<Json<RecordingList>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    let everything = match &ctx.caller {
        Caller::Server => true,
        Caller::User(user) => is_host(&db, &b, &user.id)?,
        Caller::Guest => false,
    };
    if !everything {
        access::check_can_watch(&db, &b, Viewer::of(&ctx.caller), now)?;
    }
    let items: Vec<RecordingView> = store::list(&db, &b, !everything)?
        .iter()
        .map(view)
        .collect();
    let total = items.len() as i64;
    Ok(Json(RecordingList { items, total }))
}

/// The owner or the tenant's server removes a finished recording's record (the files stay
/// in the bucket).
fn delete(ctx: &ActorCtx, _: NoBody) -> Result<Json<Deleted>, ApiError> {
    let db = ctx.db()?;
    let b = access::load_for_owner_or_server(ctx, &db, "deletes its recordings")?;
    let id = ids::parse_uuid(ctx.param("recordingId"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the recording id must be a UUID"))?;
    let r = store::by_id(&db, &b, &id)?.ok_or_else(|| ApiError::not_found("recording"))?;
    if !store::delete(&db, &b, &r.id)? {
        return Err(ApiError::conflict(
            "recording_in_progress",
            "stop the recording before deleting it",
        ));
    }
    Ok(Json(Deleted::of(r.id)))
}

/// The tenant's default for new broadcasts.
fn get_defaults(ctx: &ServerCtx, _: NoBody) -> Result<Json<SettingsView>, ApiError> {
    let db = ctx.db()?;
    let settings = store::tenant_default(&db, &ctx.tenant.client_id)?;
    Ok(Json(SettingsView::from(&settings)))
}

/// Any of `enabled`, `layout`, `output`.
fn put_defaults(
    ctx: &ServerCtx,
    sent: DefaultsChangesBody,
) -> Result<Json<SettingsView>, ApiError> {
    let patch = sent.changes;
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let settings = patch.applied_to(&store::tenant_default(&db, client_id)?);
    store::save_tenant_default(&db, client_id, &settings, ctx.now())?;
    Ok(Json(SettingsView::from(&settings)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outputs_schema_names_every_output() {
        let names: Vec<&str> = Output::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(names, OUTPUTS);
    }
}
