//! The SFU feed into the ingest: a broadcast that goes live in its SFU room, with no RTMP
//! publisher, has a LiveKit egress of its record page publish the room into the ingest
//! with the broadcast's own key, so that it reaches the same HLS; the egress stops when the
//! broadcast ends.

use crate::egress::Egress;
use ::store::Db;
use ::store::broadcasts::Broadcast;
use ::store::ingests as store;
use domain::ApiError;
use domain::broadcast::Status;
use edge::spin::config;

/// After a broadcast's status changed: one that went live in the SFU room (no RTMP
/// publisher) gets its room published into the ingest by a LiveKit egress of the record
/// page; one that ended stops that egress. Best effort, like recording.
pub fn on_status_change(db: &Db, b: &Broadcast, now: i64) {
    let result = match b.status {
        Status::Active => feed_from_sfu(db, b, now),
        Status::Completed | Status::Error => stop_sfu_feed(db, b, now),
        Status::Pending => Ok(()),
    };
    if let Err(e) = result {
        eprintln!("broadcast {}: SFU feed into the ingest: {}", b.id, e.detail);
    }
}

fn feed_from_sfu(db: &Db, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    let ingest = store::of_broadcast(db, &b.id)?;
    if ingest
        .as_ref()
        .is_some_and(|i| i.is_live(now) || i.sfu_egress_id.is_some())
    {
        return Ok(());
    }
    // Without a configured SFU there is no room to publish from.
    let Ok(egress) = Egress::load() else {
        return Ok(());
    };
    let links = crate::links::Links::load();
    let rtmp_url = domain::broadcast::rtmp_url(
        &domain::broadcast::StreamBases {
            base_url: "",
            rtmp_ingest_base: &config::var_or("rtmp_ingest_base", "rtmp://127.0.0.1:1935/live"),
            playback_hls_base: "",
        },
        &b.identity.stream_key,
    );
    let size = domain::recording::page_size(b.recording, &b.orientation);
    let page = domain::recording::record_page_url(
        links.base_url(),
        &b.identity.stream_id,
        size,
        &b.orientation,
        "default",
    );
    let request =
        domain::recording::stream_egress_request(&b.identity.stream_id, &page, size, &rtmp_url);
    let report = egress
        .start(&request, now)
        .map_err(|why| ApiError::new(502, "egress_failed", why))?;
    store::set_sfu_egress(db, b, Some(&report.egress_id), now)
}

fn stop_sfu_feed(db: &Db, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    let Some(egress_id) = store::of_broadcast(db, &b.id)?.and_then(|i| i.sfu_egress_id) else {
        return Ok(());
    };
    store::set_sfu_egress(db, b, None, now)?;
    let egress = Egress::load().map_err(|why| ApiError::unavailable("sfu_not_configured", why))?;
    egress
        .stop(&egress_id, now)
        .map(|_| ())
        .map_err(|why| ApiError::new(502, "egress_failed", why))
}
