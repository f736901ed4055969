//! Recording with LiveKit Egress: starting a room-composite web egress on our record page
//! when a recorded broadcast goes live (or on request), stopping it when the broadcast
//! ends, following the egress through the SFU's webhooks, and the recordings' routes.

use crate::access::{self, Viewer};
use crate::egress::{self, Egress};
use common::app;
use common::domain::broadcast::Status as BroadcastStatus;
use common::domain::recording::{
    self as rules, EgressPlan, EgressReport, LAYOUTS, Output, Settings, SettingsPatch, Status, Step,
};
use common::spin::http::{ActorCtx, Caller, CallerCtx, ServerCtx, UserCtx, json};
use common::store::broadcasts::{self as broadcast_store, Broadcast};
use common::store::recordings::{self as store, NewRecording, Outcome, Recording};
use common::store::{Db, cohosts, outbox};
use common::validate::JsonBody;
use common::validate::body::FieldKind;
use common::{ApiError, ids, time};
use serde_json::{Value, json};
use spin_sdk::http::Response;

/// A recording as the API answers it.
pub fn view(r: &Recording) -> Value {
    let at = |t: Option<i64>| t.map(time::format_rfc3339);
    json!({
        "id": r.id,
        "broadcastId": r.broadcast_id,
        "status": r.status.as_str(),
        "layout": r.layout,
        "output": r.output.as_str(),
        "url": r.url,
        "durationSeconds": r.duration_ms.map(|ms| ms as f64 / 1000.0),
        "sizeBytes": r.size_bytes,
        "error": r.error,
        "attempts": r.attempts,
        "createdAt": time::format_rfc3339(r.created_at),
        "startedAt": at(r.started_at),
        "endedAt": at(r.ended_at),
    })
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
        settings_field(body, name)
    }

    fn schema() -> Value {
        let nullable = |names: Vec<&str>| {
            let mut names: Vec<Value> = names.into_iter().map(Value::from).collect();
            names.push(Value::Null);
            json!({ "enum": names })
        };
        json!({
            "description": "Recording settings: any of the three fields, the rest from the tenant's default; null is the same as leaving it out.",
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "enabled": {"type": ["boolean", "null"]},
                        "layout": nullable(LAYOUTS.to_vec()),
                        "output": nullable(Output::ALL.iter().map(|o| o.as_str()).collect()),
                    },
                    "additionalProperties": false,
                },
            ],
        })
    }
}

fn settings_field(body: &mut JsonBody, name: &'static str) -> Option<SettingsPatch> {
    let value = body.opt_value(name)?;
    match SettingsPatch::from_json(&value) {
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

/// An egress event from the SFU's webhook: moves the recording its egress runs for.
pub fn on_egress_event(db: &Db, info: &Value, now: i64) -> Result<Response, ApiError> {
    let report = EgressReport::read(info).ok_or_else(|| {
        ApiError::new(
            422,
            "invalid_webhook",
            "an egress event needs egressInfo with an egress id and a status",
        )
    })?;
    let ignored = |why: &str| Ok(json(200, &json!({ "handled": false, "reason": why })));
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
            Ok(json(
                200,
                &json!({ "handled": true, "recording": view(&r) }),
            ))
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
                Some(m) => Ok(json(
                    200,
                    &json!({ "handled": true, "recording": view(&m) }),
                )),
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

/// `POST /api/broadcasts/{id}/recordings/start`: records the live broadcast now, with its
/// layout and output settings.
pub fn start(ctx: &UserCtx) -> Result<Response, ApiError> {
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
    Ok(json(201, &view(&r)))
}

/// `POST /api/broadcasts/{id}/recordings/stop`: stops the recording in progress.
pub fn stop(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let b = controlled(ctx, &db)?;
    match stop_recording(&db, &b, ctx.now())? {
        Some(r) => Ok(json(200, &view(&r))),
        None => Err(ApiError::conflict(
            "not_recording",
            "the broadcast is not being recorded",
        )),
    }
}

/// `GET /api/broadcasts/{id}/recordings`: every recording for the owner, co-hosts and the
/// tenant's server; the ready ones for others who may watch the broadcast.
pub fn list(ctx: &CallerCtx) -> Result<Response, ApiError> {
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
    let items: Vec<Value> = store::list(&db, &b, !everything)?
        .iter()
        .map(view)
        .collect();
    Ok(json(200, &json!({ "items": items, "total": items.len() })))
}

/// `DELETE /api/broadcasts/{id}/recordings/{recordingId}`: the owner or the tenant's
/// server removes a finished recording's record (the files stay in the bucket).
pub fn delete(ctx: &ActorCtx) -> Result<Response, ApiError> {
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
    Ok(json(200, &json!({ "success": true, "id": r.id })))
}

/// `GET /api/v1/recording-defaults`: the tenant's default for new broadcasts.
pub fn get_defaults(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    Ok(json(
        200,
        &store::tenant_default(&db, &ctx.tenant.client_id)?.view(),
    ))
}

/// `PUT /api/v1/recording-defaults`: any of `enabled`, `layout`, `output`.
pub fn put_defaults(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let mut body = ctx.json()?;
    let mut fields = serde_json::Map::new();
    for field in ["enabled", "layout", "output"] {
        if let Some(value) = body.opt_value(field) {
            fields.insert(field.into(), value);
        }
    }
    if fields.is_empty() && !body.has_errors_for(&["enabled", "layout", "output"]) {
        body.error("enabled", "send at least one of enabled, layout, output");
    }
    let patch = match SettingsPatch::from_json(&Value::Object(fields)) {
        Ok(patch) => patch,
        Err(errors) => {
            for (field, message) in errors {
                body.error(field, message);
            }
            SettingsPatch::default()
        }
    };
    body.finish()?;
    let db = ctx.db()?;
    let client_id = &ctx.tenant.client_id;
    let settings = patch.applied_to(&store::tenant_default(&db, client_id)?);
    store::save_tenant_default(&db, client_id, &settings, ctx.now())?;
    Ok(json(200, &settings.view()))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<common::contract::Operation> {
    use common::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("GET /api/broadcasts/{id}/recordings", "List (recordings)")
            .answers(200, "Every recording for the owner, co-hosts and the tenant's server; the ready ones for other viewers", Schema::written(json!({
                "type": "object",
                "required": ["items", "total"],
                "properties": {
                    "items": {
                        "type": "array",
                        "items": { "$ref": "#/components/schemas/Recording" },
                    },
                    "total": { "type": "integer" },
                },
            })))
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"]),
        Operation::new("POST /api/broadcasts/{id}/recordings/start", "Start (recordings)")
            .answers(201, "Created", Schema::written(json!({ "$ref": "#/components/schemas/Recording" })))
            .link("DELETE /api/broadcasts/{id}/recordings/{recordingId}", &[("id", "$request.path.id"), ("recordingId", "$response.body#/id")])
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["not_live", "recording_in_progress"])
            .errors(502, &["egress_failed"])
            .errors(503, &["sfu_not_configured"]),
        Operation::new("POST /api/broadcasts/{id}/recordings/stop", "Stop (recordings)")
            .answers(200, "OK", Schema::written(json!({ "$ref": "#/components/schemas/Recording" })))
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["not_recording"]),
        Operation::new("DELETE /api/broadcasts/{id}/recordings/{recordingId}", "Delete (recordings)")
            .answers(200, "OK", Schema::written(json!({
                "type": "object",
                "required": ["success", "id"],
                "properties": {
                    "success": { "const": true },
                    "id": { "type": "string", "format": "uuid" },
                },
            })))
            .errors(400, &["invalid_id"])
            .errors(403, &["forbidden"])
            .errors(404, &["not_found"])
            .errors(409, &["recording_in_progress"]),
        Operation::new("GET /api/v1/recording-defaults", "Get defaults (recordings)")
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/RecordingSettings",
            }))),
        Operation::new("PUT /api/v1/recording-defaults", "Put defaults (recordings)")
            .takes(Schema::written(json!({
                "type": "object",
                "description": "Any of the three fields; at least one.",
                "properties": {
                    "enabled": { "type": ["boolean", "null"] },
                    "layout": {
                        "enum": [
                            "default",
                            "grid3x3",
                            "grid4x4",
                            "battle",
                            "onebig",
                            "active",
                            null,
                        ],
                    },
                    "output": { "enum": ["mp4", "hls", null] },
                },
                "additionalProperties": false,
                "minProperties": 1,
            })))
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/RecordingSettings",
            }))),
    ]
}
