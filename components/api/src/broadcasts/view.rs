//! A broadcast as the API answers it.

use crate::access::Audience;
use crate::links::Links;
use common::ApiError;
use common::domain::broadcast::Status;
use common::domain::media::Health;
use common::store::Db;
use common::store::broadcasts::{self as store, Broadcast};
use common::store::ingests::Ingest;
use common::store::{ingests, recordings};
use common::time;
use serde_json::{Value, json};

/// The broadcast as `audience` sees it at `now`, with its reaction counts: the owner also
/// gets the ingest credentials (from `links`), metadata and device details.
pub fn of(b: &Broadcast, links: &Links, reactions: Value, audience: Audience, now: i64) -> Value {
    let mut view = json!({
        "id": b.id,
        "title": b.title,
        "status": b.status.as_str(),
        "visibility": b.visibility,
        "tags": b.tags,
        "ownerId": b.owner_id,
        "viewerCount": b.viewer_count,
        "maxParticipants": b.max_participants,
        "orientation": b.orientation,
        "recordingWidth": b.recording.map(|r| r.0),
        "recordingHeight": b.recording.map(|r| r.1),
        "createdAt": b.created_at,
        "startedAt": b.started_at,
        "endedAt": b.ended_at,
        "errorReason": b.error_reason,
        "reactions": reactions,
        "cohostPolicy": b.cohost_policy,
    });
    let owner = audience == Audience::Owner;
    links.add_stream_addresses(&mut view, &b.identity, b.visibility, owner, now);
    if owner {
        view["metadata"] = b.metadata.clone();
        view["deviceWidth"] = b.device_width.into();
        view["deviceHeight"] = b.device_height.into();
        view["deviceType"] = b.device_type.clone().into();
        view["operatingSystem"] = b.operating_system.clone().into();
        view["updatedAt"] = b.updated_at.clone().into();
    }
    view
}

/// The views of `items` (each as `audience_for` decides) at `now`, with their reaction
/// counts; the owner also sees each one's recording settings and ingest.
pub fn many(
    db: &Db,
    items: &[Broadcast],
    audience_for: impl Fn(&Broadcast) -> Audience,
    now: i64,
) -> Result<Vec<Value>, ApiError> {
    let links = Links::load();
    let ids: Vec<&str> = items.iter().map(|b| b.id.as_str()).collect();
    let mut counts = store::reaction_counts(db, &ids)?;
    let mut recording = match items.first() {
        Some(first) => recordings::settings_of_many(db, &first.client_id, &ids)?,
        None => Default::default(),
    };
    let mut ingests = ingests::of_many(db, &ids)?;
    Ok(items
        .iter()
        .map(|b| {
            let reactions = counts.remove(&b.id).map_or(Value::Null, Value::Object);
            let audience = audience_for(b);
            let mut view = of(b, &links, reactions, audience, now);
            // The recording settings and the ingest are the owner's business.
            if audience == Audience::Owner {
                if let Some(settings) = recording.remove(&b.id) {
                    view["recording"] = settings.view();
                }
                view["ingest"] = ingest_view(ingests.remove(&b.id).as_ref(), b, now);
            }
            view
        })
        .collect())
}

/// One broadcast's view at `now`, with its reaction counts.
pub fn one(db: &Db, b: &Broadcast, audience: Audience, now: i64) -> Result<Value, ApiError> {
    let mut views = many(db, std::slice::from_ref(b), |_| audience, now)?;
    Ok(views.pop().unwrap_or(Value::Null))
}

/// The ingest as the broadcast's owner sees it: whether an encoder publishes (`live`), has
/// dropped and may still come back (`reconnecting`) or not (`idle`), and the stream's
/// health with its last sample.
pub fn ingest_view(ingest: Option<&Ingest>, b: &Broadcast, now: i64) -> Value {
    let live = ingest.is_some_and(|i| i.is_live(now));
    let state = if live {
        "live"
    } else if b.status == Status::Active && b.ingest_deadline.is_some_and(|d| d >= now) {
        "reconnecting"
    } else {
        "idle"
    };
    let at = |t: Option<i64>| t.map(time::format_rfc3339);
    json!({
        "state": state,
        "connectedAt": at(ingest.and_then(|i| i.started_at).filter(|_| live)),
        "lastSeenAt": at(ingest.and_then(|i| i.last_update)),
        "reconnectDeadline": at(b.ingest_deadline.filter(|_| state == "reconnecting")),
        "publishes": ingest.map_or(0, |i| i.publishes),
        "health": ingest.and_then(|i| i.health).filter(|_| live).map(Health::as_str),
        "healthChangedAt": at(ingest.and_then(|i| i.health_changed_at).filter(|_| live)),
        "stats": ingest.and_then(|i| i.health_sample.as_ref()).filter(|_| live),
    })
}
