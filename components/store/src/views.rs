//! HLS views (`POST /api/views`): one row per view, its figures as last accepted, and the
//! reads that count live views (those not closed whose last beacon is less than 30 s old)
//! at read time, so a closed page leaves the count without any job. The rules of a beacon
//! are `domain::views`; what a beacon counts in analytics is `analytics::view_beacon`.

use super::broadcasts::Broadcast;
use super::{Db, Row, Value};
use domain::ApiError;
use domain::views::{Accepted, Closed, Figures, LIVE_FOR_MS, Stored};
use std::collections::{BTreeMap, HashMap};

/// A view as stored, with the broadcast it is bound to.
#[derive(Debug, Clone)]
pub struct View {
    pub broadcast_id: String,
    pub stored: Stored,
}

fn figures(row: &Row, prefix: &str) -> Figures {
    Figures {
        played_ms: row.int(&format!("{prefix}played_ms")),
        rebuffer_ms: row.int(&format!("{prefix}rebuffer_ms")),
        rebuffers: row.int(&format!("{prefix}rebuffers")),
    }
}

/// The view `view_id`, if any.
pub fn load(db: &Db, view_id: &str) -> Result<Option<View>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM hls_views WHERE view_id = ?",
            &[view_id.into()],
        )?
        .map(|row| View {
            broadcast_id: row.text("broadcast_id"),
            stored: Stored {
                first_beacon_ms: row.int("first_beacon_ms"),
                last_beacon_ms: row.int("last_beacon_ms"),
                closed: row.opt_text("closed_by").as_deref().and_then(Closed::parse),
                totals: figures(&row, ""),
                base: figures(&row, "base_"),
                startup_ms: row.opt_int("startup_ms"),
                error: row.opt_text("error"),
            },
        }))
}

/// What a beacon stores besides the accepted figures.
#[derive(Debug, Clone, Default)]
pub struct Latest<'a> {
    pub rendition: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// Who a new view is: its id, its viewer (the viewerId, else the viewId), and the client
/// address it came from.
#[derive(Debug, Clone, Copy)]
pub struct NewView<'a> {
    pub view_id: &'a str,
    pub viewer: &'a str,
    pub client_addr: &'a str,
}

/// Stores a view's first beacon, at `now_ms`; false when another request stored it first
/// (the beacon is then refused as too soon).
pub fn insert(
    db: &Db,
    b: &Broadcast,
    new: NewView<'_>,
    a: &Accepted,
    latest: &Latest<'_>,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let NewView {
        view_id,
        viewer,
        client_addr,
    } = new;
    let closed = a.closes.then_some(now_ms.div_euclid(1000));
    Ok(!db
        .query(
            "INSERT INTO hls_views (view_id, client_id, broadcast_id, viewer, client_addr, first_beacon_ms, \
               last_beacon_ms, closed_at, closed_by, played_ms, rebuffer_ms, rebuffers, base_played_ms, \
               base_rebuffer_ms, base_rebuffers, startup_ms, rendition, error) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (view_id) DO NOTHING RETURNING view_id",
            &[
                view_id.into(),
                b.client_id.clone().into(),
                b.id.clone().into(),
                viewer.into(),
                client_addr.into(),
                Value::Int(now_ms),
                Value::Int(now_ms),
                closed.into(),
                a.closes.then_some(Closed::End.as_str()).into(),
                Value::Int(a.totals.played_ms),
                Value::Int(a.totals.rebuffer_ms),
                Value::Int(a.totals.rebuffers),
                Value::Int(a.base.played_ms),
                Value::Int(a.base.rebuffer_ms),
                Value::Int(a.base.rebuffers),
                a.startup_ms.into(),
                latest.rendition.into(),
                latest.error.into(),
            ],
        )?
        .is_empty())
}

/// Stores an accepted beacon of a view last seen as `seen` at `now_ms`; false when
/// another beacon of the view was stored since (this one is then refused as too soon).
pub fn update(
    db: &Db,
    view_id: &str,
    seen: &Stored,
    a: &Accepted,
    latest: &Latest<'_>,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let closed = if a.closes {
        Some(Closed::End)
    } else if a.opens {
        None
    } else {
        seen.closed
    };
    Ok(!db
        .query(
            "UPDATE hls_views SET last_beacon_ms = ?, closed_at = ?, closed_by = ?, played_ms = ?, \
               rebuffer_ms = ?, rebuffers = ?, base_played_ms = ?, base_rebuffer_ms = ?, base_rebuffers = ?, \
               startup_ms = COALESCE(startup_ms, ?), rendition = COALESCE(?, rendition), error = COALESCE(?, error) \
             WHERE view_id = ? AND last_beacon_ms = ? RETURNING view_id",
            &[
                Value::Int(now_ms),
                closed.map(|_| now_ms.div_euclid(1000)).into(),
                closed.map(Closed::as_str).into(),
                Value::Int(a.totals.played_ms),
                Value::Int(a.totals.rebuffer_ms),
                Value::Int(a.totals.rebuffers),
                Value::Int(a.base.played_ms),
                Value::Int(a.base.rebuffer_ms),
                Value::Int(a.base.rebuffers),
                a.startup_ms.into(),
                latest.rendition.into(),
                latest.error.into(),
                view_id.into(),
                Value::Int(seen.last_beacon_ms),
            ],
        )?
        .is_empty())
}

/// The SQL condition of a live view at `?` (now in ms, minus [`LIVE_FOR_MS`]).
const LIVE: &str = "closed_at IS NULL AND last_beacon_ms > ?";

/// How many live views `client_addr` holds on broadcast `broadcast_id` at `now_ms`.
pub fn live_on_address(
    db: &Db,
    broadcast_id: &str,
    client_addr: &str,
    now_ms: i64,
) -> Result<i64, ApiError> {
    db.count(
        &format!(
            "SELECT COUNT(*) FROM hls_views WHERE broadcast_id = ? AND client_addr = ? AND {LIVE}"
        ),
        &[
            broadcast_id.into(),
            client_addr.into(),
            Value::Int(now_ms - LIVE_FOR_MS),
        ],
    )
}

/// Per broadcast of `ids`: its live HLS views at `now_ms`, and the viewers in its SFU room
/// now (sessions the SFU's webhooks opened and did not close).
pub fn live_counts(
    db: &Db,
    ids: &[&str],
    now_ms: i64,
) -> Result<HashMap<String, (i64, i64)>, ApiError> {
    let mut out: HashMap<String, (i64, i64)> = HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let marks = vec!["?"; ids.len()].join(", ");
    let mut params: Vec<Value> = ids.iter().map(|id| (*id).into()).collect();
    params.push(Value::Int(now_ms - LIVE_FOR_MS));
    for row in db.query(
        &format!(
            "SELECT broadcast_id, COUNT(*) AS n FROM hls_views WHERE broadcast_id IN ({marks}) AND {LIVE} \
             GROUP BY broadcast_id"
        ),
        &params,
    )? {
        out.entry(row.text("broadcast_id")).or_default().0 = row.int("n");
    }
    params.pop();
    for row in db.query(
        &format!(
            "SELECT broadcast_id, COUNT(*) AS n FROM analytics_viewers WHERE broadcast_id IN ({marks}) \
             AND watching = 1 GROUP BY broadcast_id"
        ),
        &params,
    )? {
        out.entry(row.text("broadcast_id")).or_default().1 = row.int("n");
    }
    Ok(out)
}

/// Closes up to `batch` views silent for 30 s at `now_ms`, each at its last beacon, in
/// analytics too (watch time ends there). Answers how many it closed, and whether more
/// wait.
pub fn close_silent(db: &Db, now_ms: i64, batch: i64) -> Result<(i64, bool), ApiError> {
    let due = db.query(
        "SELECT view_id, client_id, broadcast_id, last_beacon_ms FROM hls_views \
         WHERE closed_at IS NULL AND last_beacon_ms <= ? ORDER BY last_beacon_ms LIMIT ?",
        &[Value::Int(now_ms - LIVE_FOR_MS), Value::Int(batch + 1)],
    )?;
    let more = due.len() as i64 > batch;
    let mut closed = 0;
    for row in due.iter().take(batch as usize) {
        let at = row.int("last_beacon_ms").div_euclid(1000);
        db.transaction(|tx| {
            // Guarded: a beacon stored meanwhile keeps the view open.
            let moved = !tx
                .query(
                    "UPDATE hls_views SET closed_at = ?, closed_by = ? \
                     WHERE view_id = ? AND closed_at IS NULL AND last_beacon_ms = ? RETURNING view_id",
                    &[
                        Value::Int(at),
                        Closed::Silence.as_str().into(),
                        row.text("view_id").into(),
                        Value::Int(row.int("last_beacon_ms")),
                    ],
                )?
                .is_empty();
            if moved {
                closed += 1;
                crate::analytics::view_closed(
                    tx,
                    &row.text("client_id"),
                    &row.text("broadcast_id"),
                    at,
                )?;
            }
            Ok(())
        })?;
    }
    Ok((closed, more))
}

/// A finished broadcast's views end with it (inside its roll-up): the open ones close at
/// their last beacon, or at the broadcast's end if they beaconed after it; none reopens.
pub fn close_for_broadcast(db: &Db, b: &Broadcast, ended: i64) -> Result<(), ApiError> {
    let open = db.query(
        "SELECT view_id, last_beacon_ms FROM hls_views WHERE broadcast_id = ? AND closed_at IS NULL",
        &[b.id.clone().into()],
    )?;
    for row in open {
        let at = row.int("last_beacon_ms").div_euclid(1000).min(ended);
        db.execute(
            "UPDATE hls_views SET closed_at = ? WHERE view_id = ?",
            &[Value::Int(at), row.text("view_id").into()],
        )?;
        crate::analytics::view_closed(db, &b.client_id, &b.id, at)?;
    }
    db.execute(
        "UPDATE hls_views SET closed_by = ? WHERE broadcast_id = ?",
        &[Closed::Broadcast.as_str().into(), b.id.clone().into()],
    )
}

/// Removes up to `batch` views of rolled-up broadcasts whose last beacon was before
/// `before_ms`; answers how many.
pub fn prune(db: &Db, before_ms: i64, batch: i64) -> Result<i64, ApiError> {
    Ok(db
        .query(
            "DELETE FROM hls_views WHERE view_id IN (SELECT view_id FROM hls_views \
               WHERE closed_by = ? AND last_beacon_ms < ? LIMIT ?) RETURNING view_id",
            &[
                Closed::Broadcast.as_str().into(),
                Value::Int(before_ms),
                Value::Int(batch),
            ],
        )?
        .len() as i64)
}

/// Views per the rendition they play (last reported; `unknown` before any), of one
/// broadcast.
pub fn renditions_of(db: &Db, b: &Broadcast) -> Result<BTreeMap<String, i64>, ApiError> {
    renditions(
        db,
        "broadcast_id = ? AND client_id = ?",
        &[b.id.clone().into(), b.client_id.clone().into()],
    )
}

/// Views per rendition of the tenant's views that began in `[from, to)` (epoch seconds).
pub fn renditions_of_tenant(
    db: &Db,
    client_id: &str,
    from: i64,
    to: i64,
) -> Result<BTreeMap<String, i64>, ApiError> {
    renditions(
        db,
        "client_id = ? AND first_beacon_ms >= ? AND first_beacon_ms < ?",
        &[
            client_id.into(),
            Value::Int(from.saturating_mul(1000)),
            Value::Int(to.saturating_mul(1000)),
        ],
    )
}

fn renditions(db: &Db, filter: &str, params: &[Value]) -> Result<BTreeMap<String, i64>, ApiError> {
    Ok(db
        .query(
            &format!(
                "SELECT COALESCE(rendition, 'unknown') AS rendition, COUNT(*) AS n FROM hls_views \
                 WHERE {filter} GROUP BY COALESCE(rendition, 'unknown')"
            ),
            params,
        )?
        .iter()
        .map(|row| (row.text("rendition"), row.int("n")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::{self, ViewCounts};
    use crate::broadcasts;
    use crate::{app, testing};
    use domain::analytics as math;
    use domain::broadcast::Status;
    use domain::views::{Event, Sent, accept};

    const T0: i64 = 1_800_000_000 - 1_800_000_000 % 86_400;

    /// One beacon as the route applies it: the rules, the row, the counts.
    fn beacon(db: &Db, b: &Broadcast, view: &str, viewer: &str, event: Event, at_ms: i64) {
        let found = load(db, view).unwrap();
        let stored = found.as_ref().map(|v| &v.stored);
        let sent = Sent {
            event: Some(event),
            ..Sent::default()
        };
        let a = accept(stored, &sent, at_ms).unwrap();
        let latest = Latest::default();
        let saved = match stored {
            None => insert(
                db,
                b,
                NewView {
                    view_id: view,
                    viewer,
                    client_addr: "10.0.0.1",
                },
                &a,
                &latest,
                at_ms,
            )
            .unwrap(),
            Some(seen) => update(db, view, seen, &a, &latest, at_ms).unwrap(),
        };
        assert!(saved);
        let now = at_ms / 1000;
        let change = ViewCounts {
            new_view: stored.is_none().then_some(viewer),
            opens: a.opens,
            closes: a.closes.then_some(now),
            ..ViewCounts::default()
        };
        analytics::view_beacon(db, b, &change, now).unwrap();
    }

    #[test]
    fn live_views_are_read_at_read_time_and_silent_ones_close_at_their_last_beacon() {
        let db = testing::db();
        let b = broadcasts::insert(&db, "c1", Some("ada"), &testing::new_broadcast(), T0).unwrap();
        assert!(broadcasts::move_status(&db, &b, Status::Active, T0).unwrap());
        let b = app::broadcasts::load(&db, "c1", &b.id, T0).unwrap();
        let ms = T0 * 1000;
        beacon(&db, &b, "view-a", "browser-1", Event::Start, ms);
        beacon(&db, &b, "view-b", "browser-1", Event::Start, ms);
        beacon(&db, &b, "view-c", "browser-2", Event::Start, ms + 1000);
        let live = |at: i64| live_counts(&db, &[&b.id], at).unwrap().get(&b.id).copied();
        assert_eq!(live(ms + 2000), Some((3, 0)));
        assert_eq!(
            live_on_address(&db, &b.id, "10.0.0.1", ms + 2000).unwrap(),
            3
        );
        beacon(&db, &b, "view-a", "browser-1", Event::End, ms + 20_000);
        beacon(
            &db,
            &b,
            "view-b",
            "browser-1",
            Event::Heartbeat,
            ms + 10_000,
        );
        assert_eq!(live(ms + 30_000), Some((2, 0)), "a ended");
        assert_eq!(live(ms + 31_000), Some((1, 0)), "c silent since +1 s");
        assert_eq!(live(ms + 40_000), None, "b silent since +10 s");
        // Nothing is silent before 30 s; then each closes at its last beacon, once.
        assert_eq!(close_silent(&db, ms + 30_000, 10).unwrap(), (0, false));
        assert_eq!(close_silent(&db, ms + 31_000, 10).unwrap(), (1, false));
        assert_eq!(close_silent(&db, ms + 60_000, 10).unwrap(), (1, false));
        assert_eq!(close_silent(&db, ms + 90_000, 10).unwrap(), (0, false));
        let t = math::totals(&analytics::buckets(&db, &b).unwrap(), T0 + 600);
        assert_eq!((t.viewer_sessions, t.unique_viewers), (3, 2));
        assert_eq!(t.total_watch_seconds, 20 + 10, "each to its last beacon");
        assert_eq!(t.qoe.views, 3);
        // The broadcast's end closes nothing twice, and no view of it reopens.
        beacon(&db, &b, "view-a", "browser-1", Event::Start, ms + 100_000);
        assert!(broadcasts::move_status(&db, &b, Status::Completed, T0 + 200).unwrap());
        let done = app::broadcasts::load(&db, "c1", &b.id, T0 + 200).unwrap();
        assert!(analytics::roll_up(&db, &done, T0 + 300).unwrap());
        let t = math::totals(&analytics::buckets(&db, &b).unwrap(), T0 + 200);
        assert_eq!(
            t.total_watch_seconds, 30,
            "the reopened view closed at its last beacon"
        );
        let v = load(&db, "view-b").unwrap().unwrap();
        assert_eq!(v.stored.closed, Some(Closed::Broadcast));
        assert_eq!(close_silent(&db, ms + 900_000, 10).unwrap(), (0, false));
        // Pruned once rolled up and old enough.
        assert_eq!(prune(&db, ms + 1_000, 10).unwrap(), 0);
        assert_eq!(prune(&db, ms + 200_000, 10).unwrap(), 3);
        assert!(load(&db, "view-b").unwrap().is_none());
    }
}
