//! Ingests: one row per broadcast for its RTMP publisher (the media server's connection,
//! the key it published with, when it last reported, its health), claimed by a guarded
//! upsert so two publishers racing for one key cannot both win; and the health samples
//! kept per broadcast and minute for the analytics time series; the last publish attempts
//! refused on each broadcast, and the media server's last report of itself.

use super::broadcasts::Broadcast;
use super::{Db, Row, Value};
use domain::ApiError;
use domain::media::{Health, HealthSample, INGEST_SILENT_AFTER_SECS};
use std::collections::HashMap;

/// A broadcast's ingest.
#[derive(Debug, Clone, PartialEq)]
pub struct Ingest {
    pub broadcast_id: String,
    pub client_id: String,
    /// The live publisher's connection; `None` when nobody publishes.
    pub connection: Option<String>,
    /// The key the current (or last) publisher used.
    pub publish_key: Option<String>,
    pub started_at: Option<i64>,
    pub last_update: Option<i64>,
    pub ended_at: Option<i64>,
    /// How many times a publisher connected (reconnects included).
    pub publishes: i64,
    pub health: Option<Health>,
    pub health_sample: Option<HealthSample>,
    pub health_changed_at: Option<i64>,
    /// The SFU egress that publishes the room into the ingest, if one runs.
    pub sfu_egress_id: Option<String>,
    /// Milliseconds of the stream viewers can rewind, as the media server last said
    /// (none: it keeps no replay of it).
    pub dvr_ms: Option<i64>,
}

impl Ingest {
    /// Whether a publisher is connected and has reported recently (a media server that
    /// died without saying so stops counting after [`INGEST_SILENT_AFTER_SECS`]).
    pub fn is_live(&self, now: i64) -> bool {
        self.connection.is_some()
            && self
                .last_update
                .is_some_and(|at| now - at <= INGEST_SILENT_AFTER_SECS)
    }
}

fn from_row(row: &Row) -> Ingest {
    Ingest {
        broadcast_id: row.text("broadcast_id"),
        client_id: row.text("client_id"),
        connection: row.opt_text("connection"),
        publish_key: row.opt_text("publish_key"),
        started_at: row.opt_int("started_at"),
        last_update: row.opt_int("last_update"),
        ended_at: row.opt_int("ended_at"),
        publishes: row.int("publishes"),
        health: row.opt_text("health").and_then(|h| Health::parse(&h)),
        health_sample: row
            .opt_text("health_sample")
            .and_then(|s| serde_json::from_str(&s).ok()),
        health_changed_at: row.opt_int("health_changed_at"),
        sfu_egress_id: row.opt_text("sfu_egress_id"),
        dvr_ms: row.opt_int("dvr_ms"),
    }
}

/// The ingest of broadcast `broadcast_id`, if it ever had one.
pub fn of_broadcast(db: &Db, broadcast_id: &str) -> Result<Option<Ingest>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM media_ingests WHERE broadcast_id = ?",
            &[broadcast_id.into()],
        )?
        .map(|row| from_row(&row)))
}

/// The ingests of many broadcasts, in one query.
pub fn of_many(db: &Db, broadcast_ids: &[&str]) -> Result<HashMap<String, Ingest>, ApiError> {
    Ok(
        crate::rows_of_broadcasts(db, "media_ingests", broadcast_ids)?
            .iter()
            .map(|row| {
                let ingest = from_row(row);
                (ingest.broadcast_id.clone(), ingest)
            })
            .collect(),
    )
}

/// The ingest whose live publisher is `connection`.
pub fn by_connection(db: &Db, connection: &str) -> Result<Option<Ingest>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM media_ingests WHERE connection = ?",
            &[connection.into()],
        )?
        .map(|row| from_row(&row)))
}

/// Claims `b`'s ingest for the publisher `connection` (with `key`), unless another
/// publisher is live on it: the upsert's guard decides, so of two racing publishers one
/// wins. Answers whether this one did (the same connection claiming again wins).
pub fn claim(
    db: &Db,
    b: &Broadcast,
    connection: &str,
    key: &str,
    now: i64,
) -> Result<bool, ApiError> {
    // A connection name is unique while its media server runs; one left on another row by
    // a media server that restarted is stale.
    db.execute(
        "UPDATE media_ingests SET connection = NULL WHERE connection = ? AND broadcast_id <> ?",
        &[connection.into(), b.id.clone().into()],
    )?;
    let claimed = db.query(
        "INSERT INTO media_ingests (broadcast_id, client_id, connection, publish_key, started_at, last_update, publishes, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, 1, ?5) \
         ON CONFLICT (broadcast_id) DO UPDATE SET connection = excluded.connection, \
           publish_key = excluded.publish_key, started_at = excluded.started_at, \
           last_update = excluded.last_update, ended_at = NULL, \
           publishes = media_ingests.publishes + 1, updated_at = excluded.updated_at \
         WHERE media_ingests.connection IS NULL OR media_ingests.connection = excluded.connection \
           OR media_ingests.last_update < ?6 \
         RETURNING broadcast_id",
        &[
            b.id.clone().into(),
            b.client_id.clone().into(),
            connection.into(),
            key.into(),
            Value::Int(now),
            Value::Int(now - INGEST_SILENT_AFTER_SECS),
        ],
    )?;
    Ok(!claimed.is_empty())
}

/// Records that the publisher reported at `now`.
pub fn touch(db: &Db, ingest: &Ingest, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE media_ingests SET last_update = ?, updated_at = ? WHERE broadcast_id = ?",
        &[
            Value::Int(now),
            Value::Int(now),
            ingest.broadcast_id.clone().into(),
        ],
    )
}

/// Records how many milliseconds of the stream viewers can rewind now (the media
/// server's report).
pub fn record_dvr(db: &Db, ingest: &Ingest, dvr_ms: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE media_ingests SET dvr_ms = ? WHERE broadcast_id = ?",
        &[Value::Int(dvr_ms), ingest.broadcast_id.clone().into()],
    )
}

/// Records a health sample: on the ingest (with when its state last changed), and as the
/// sample of its minute.
pub fn record_health(
    db: &Db,
    ingest: &Ingest,
    health: Health,
    sample: &HealthSample,
    now: i64,
) -> Result<(), ApiError> {
    let text = serde_json::to_string(sample)
        .map_err(|e| ApiError::internal(format!("health sample: {e}")))?;
    let changed_at = if ingest.health == Some(health) {
        ingest.health_changed_at.unwrap_or(now)
    } else {
        now
    };
    db.execute(
        "UPDATE media_ingests SET health = ?, health_sample = ?, health_changed_at = ? WHERE broadcast_id = ?",
        &[
            health.as_str().into(),
            text.clone().into(),
            Value::Int(changed_at),
            ingest.broadcast_id.clone().into(),
        ],
    )?;
    db.execute(
        "INSERT INTO ingest_health_minutes (broadcast_id, minute, client_id, health, sample) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (broadcast_id, minute) DO UPDATE SET health = excluded.health, sample = excluded.sample",
        &[
            ingest.broadcast_id.clone().into(),
            Value::Int(now.div_euclid(60) * 60),
            ingest.client_id.clone().into(),
            health.as_str().into(),
            text.into(),
        ],
    )
}

/// Ends the publish of `connection` on `ingest`: answers whether it was still the live
/// one (a second end of the same publish changes nothing).
pub fn end(db: &Db, ingest: &Ingest, connection: &str, now: i64) -> Result<bool, ApiError> {
    let ended = db.query(
        "UPDATE media_ingests SET connection = NULL, ended_at = ?1, updated_at = ?1 \
         WHERE broadcast_id = ?2 AND connection = ?3 RETURNING broadcast_id",
        &[
            Value::Int(now),
            ingest.broadcast_id.clone().into(),
            connection.into(),
        ],
    )?;
    Ok(!ended.is_empty())
}

/// Records (or with `None` forgets) the SFU egress that feeds `b`'s ingest.
pub fn set_sfu_egress(
    db: &Db,
    b: &Broadcast,
    egress_id: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO media_ingests (broadcast_id, client_id, sfu_egress_id, updated_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (broadcast_id) DO UPDATE SET sfu_egress_id = excluded.sfu_egress_id, updated_at = excluded.updated_at",
        &[
            b.id.clone().into(),
            b.client_id.clone().into(),
            egress_id.into(),
            Value::Int(now),
        ],
    )
}

/// The ingest whose last publisher used `key`, if any: a publish naming a key that is no
/// broadcast's current one may name one that was reset.
pub fn by_publish_key(db: &Db, key: &str) -> Result<Option<Ingest>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM media_ingests WHERE publish_key = ? LIMIT 1",
            &[key.into()],
        )?
        .map(|row| from_row(&row)))
}

/// How many refusals a broadcast keeps: its newest.
pub const REFUSALS_KEPT: i64 = 10;

/// A publish attempt the platform refused (or a publisher it dropped) on a broadcast.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub at_ms: i64,
    /// The refusal's code (`already_publishing`, `broadcast_ended`, ...).
    pub reason: String,
    pub detail: String,
    /// The encoder's address, as the media server saw it.
    pub client_addr: Option<String>,
}

/// Records a refusal on `b`, keeping its newest [`REFUSALS_KEPT`].
pub fn record_refusal(db: &Db, b: &Broadcast, refusal: &Refusal) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO ingest_refusals (id, broadcast_id, client_id, at_ms, reason, detail, client_addr) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
        &[
            domain::ids::ordered_uuid().into(),
            b.id.clone().into(),
            b.client_id.clone().into(),
            Value::Int(refusal.at_ms),
            refusal.reason.clone().into(),
            refusal.detail.clone().into(),
            refusal.client_addr.clone().into(),
        ],
    )?;
    db.execute(
        "DELETE FROM ingest_refusals WHERE broadcast_id = ?1 AND id NOT IN \
           (SELECT id FROM ingest_refusals WHERE broadcast_id = ?1 ORDER BY at_ms DESC, id DESC LIMIT ?2)",
        &[b.id.clone().into(), Value::Int(REFUSALS_KEPT)],
    )
}

/// The refusals of many broadcasts, newest first, in one query.
pub fn refusals_of_many(
    db: &Db,
    broadcast_ids: &[&str],
) -> Result<HashMap<String, Vec<Refusal>>, ApiError> {
    let mut out: HashMap<String, Vec<Refusal>> = HashMap::new();
    if broadcast_ids.is_empty() {
        return Ok(out);
    }
    let placeholders = vec!["?"; broadcast_ids.len()].join(", ");
    let params: Vec<Value> = broadcast_ids.iter().map(|id| (*id).into()).collect();
    for row in db.query(
        &format!(
            "SELECT * FROM ingest_refusals WHERE broadcast_id IN ({placeholders}) \
             ORDER BY at_ms DESC, id DESC"
        ),
        &params,
    )? {
        out.entry(row.text("broadcast_id"))
            .or_default()
            .push(Refusal {
                at_ms: row.int("at_ms"),
                reason: row.text("reason"),
                detail: row.text("detail"),
                client_addr: row.opt_text("client_addr"),
            });
    }
    Ok(out)
}

/// The media server's last report of itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    /// `up` or `down`.
    pub state: String,
    /// Why it is down.
    pub reason: Option<String>,
    pub reported_at: i64,
}

/// The one media server's row.
const SERVER_ROW: &str = "media";

/// Records the media server's report of itself.
pub fn report_server(db: &Db, report: &ServerReport) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO media_server_reports (id, state, reason, reported_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (id) DO UPDATE SET state = excluded.state, reason = excluded.reason, \
           reported_at = excluded.reported_at",
        &[
            SERVER_ROW.into(),
            report.state.clone().into(),
            report.reason.clone().into(),
            Value::Int(report.reported_at),
        ],
    )
}

/// The media server's last report, if it ever made one.
pub fn server_report(db: &Db) -> Result<Option<ServerReport>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM media_server_reports WHERE id = ?",
            &[SERVER_ROW.into()],
        )?
        .map(|row| ServerReport {
            state: row.text("state"),
            reason: row.opt_text("reason"),
            reported_at: row.int("reported_at"),
        }))
}

/// One minute's health sample.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthMinute {
    pub minute: i64,
    pub health: Health,
    pub sample: HealthSample,
}

/// `b`'s health samples of the minutes from `from` to `to` (epoch seconds, inclusive),
/// oldest first.
pub fn health_minutes(
    db: &Db,
    b: &Broadcast,
    from: i64,
    to: i64,
) -> Result<Vec<HealthMinute>, ApiError> {
    Ok(db
        .query(
            "SELECT minute, health, sample FROM ingest_health_minutes \
             WHERE broadcast_id = ? AND minute >= ? AND minute <= ? ORDER BY minute",
            &[b.id.clone().into(), Value::Int(from), Value::Int(to)],
        )?
        .iter()
        .filter_map(|row| {
            Some(HealthMinute {
                minute: row.int("minute"),
                health: Health::parse(&row.text("health"))?,
                sample: serde_json::from_str(&row.text("sample")).ok()?,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{broadcasts, testing};

    #[test]
    fn one_publisher_at_a_time_and_a_silent_one_is_replaced() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 100).unwrap();
        let key = b.identity.stream_key.as_str();
        assert!(claim(&db, &b, "boot-1", key, 100).unwrap());
        // The same connection again is the same publisher; another is refused while the
        // first reports.
        assert!(claim(&db, &b, "boot-1", key, 101).unwrap());
        assert!(!claim(&db, &b, "boot-2", key, 105).unwrap());
        let ingest = by_connection(&db, "boot-1").unwrap().unwrap();
        assert!(ingest.is_live(110));
        touch(&db, &ingest, 120).unwrap();
        assert!(!claim(&db, &b, "boot-2", key, 120 + INGEST_SILENT_AFTER_SECS).unwrap());
        // Silent for longer than that: its media server is gone.
        assert!(claim(&db, &b, "boot-2", key, 121 + INGEST_SILENT_AFTER_SECS).unwrap());
        assert!(by_connection(&db, "boot-1").unwrap().is_none());
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        assert_eq!(ingest.connection.as_deref(), Some("boot-2"));
        assert_eq!(ingest.publishes, 3);
    }

    #[test]
    fn how_far_back_a_stream_rewinds_is_kept_across_publishes() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 100).unwrap();
        assert!(claim(&db, &b, "boot-1", "k", 100).unwrap());
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        assert_eq!(ingest.dvr_ms, None, "nothing reported yet");
        record_dvr(&db, &ingest, 12_500).unwrap();
        assert_eq!(
            of_broadcast(&db, &b.id).unwrap().unwrap().dvr_ms,
            Some(12_500)
        );
        // A reconnect continues the same replay: what was said stays until the next report.
        assert!(end(&db, &ingest, "boot-1", 110).unwrap());
        assert!(claim(&db, &b, "boot-2", "k", 112).unwrap());
        let ingests = of_many(&db, &[b.id.as_str()]).unwrap();
        assert_eq!(ingests[&b.id].dvr_ms, Some(12_500));
    }

    #[test]
    fn an_end_is_counted_once_and_frees_the_key() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 100).unwrap();
        let key = b.identity.stream_key.as_str();
        assert!(claim(&db, &b, "boot-1", key, 100).unwrap());
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        assert!(end(&db, &ingest, "boot-1", 110).unwrap());
        assert!(!end(&db, &ingest, "boot-1", 111).unwrap());
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        assert!(!ingest.is_live(111));
        assert_eq!(ingest.ended_at, Some(110));
        assert!(claim(&db, &b, "boot-2", key, 112).unwrap());
        assert_eq!(of_broadcast(&db, &b.id).unwrap().unwrap().ended_at, None);
    }

    #[test]
    fn health_is_kept_per_minute_with_when_it_changed() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 100).unwrap();
        assert!(claim(&db, &b, "boot-1", "k", 100).unwrap());
        let sample = HealthSample {
            width: Some(1280),
            bitrate: Some(2_000_000),
            ..Default::default()
        };
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        record_health(&db, &ingest, Health::Healthy, &sample, 130).unwrap();
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        record_health(&db, &ingest, Health::Healthy, &sample, 170).unwrap();
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        assert_eq!(ingest.health_changed_at, Some(130));
        record_health(&db, &ingest, Health::Starving, &sample, 200).unwrap();
        let ingest = of_broadcast(&db, &b.id).unwrap().unwrap();
        assert_eq!(
            (ingest.health, ingest.health_changed_at),
            (Some(Health::Starving), Some(200))
        );
        let minutes = health_minutes(&db, &b, 0, 1000).unwrap();
        let at: Vec<(i64, Health)> = minutes.iter().map(|m| (m.minute, m.health)).collect();
        assert_eq!(at, [(120, Health::Healthy), (180, Health::Starving)]);
        assert_eq!(minutes[0].sample.width, Some(1280));
    }

    #[test]
    fn a_broadcast_keeps_its_newest_refusals() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 100).unwrap();
        let other = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 100).unwrap();
        for i in 0..REFUSALS_KEPT + 3 {
            let refusal = Refusal {
                at_ms: 1_000 + i,
                reason: format!("r{i}"),
                detail: "d".into(),
                client_addr: (i % 2 == 0).then(|| "127.0.0.1".to_string()),
            };
            record_refusal(&db, &b, &refusal).unwrap();
        }
        record_refusal(
            &db,
            &other,
            &Refusal {
                at_ms: 5,
                reason: "already_publishing".into(),
                detail: "d".into(),
                client_addr: None,
            },
        )
        .unwrap();
        let mut all = refusals_of_many(&db, &[&b.id, &other.id]).unwrap();
        let kept = all.remove(&b.id).unwrap();
        assert_eq!(kept.len() as i64, REFUSALS_KEPT);
        assert_eq!(kept[0].reason, format!("r{}", REFUSALS_KEPT + 2));
        assert_eq!(kept.last().unwrap().reason, "r3");
        assert_eq!(all.remove(&other.id).unwrap().len(), 1);
    }

    #[test]
    fn a_reset_key_leads_back_to_its_broadcast_and_the_server_report_is_replaced() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", None, &testing::new_broadcast(), 100).unwrap();
        assert!(claim(&db, &b, "boot-1", "oldkey", 100).unwrap());
        let found = by_publish_key(&db, "oldkey").unwrap().unwrap();
        assert_eq!(found.broadcast_id, b.id);
        assert!(by_publish_key(&db, "other").unwrap().is_none());
        assert_eq!(server_report(&db).unwrap(), None);
        let down = ServerReport {
            state: "down".into(),
            reason: Some("nginx is not installed".into()),
            reported_at: 10,
        };
        report_server(&db, &down).unwrap();
        assert_eq!(server_report(&db).unwrap().as_ref(), Some(&down));
        let up = ServerReport {
            state: "up".into(),
            reason: None,
            reported_at: 20,
        };
        report_server(&db, &up).unwrap();
        assert_eq!(server_report(&db).unwrap(), Some(up));
    }
}
