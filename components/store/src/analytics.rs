//! Analytics: per-broadcast minute buckets filled as things happen (one insert of pending
//! counts per event, folded into the minute's row now and then, plus an insert into a
//! uniqueness set where a count must be distinct), the daily rows per creator and per
//! tenant that `rollup-analytics` folds finished broadcasts into, and the reads, which
//! touch only these tables.

use super::broadcasts::Broadcast;
use super::{Db, Dialect, Row, Value};
use domain::ApiError;
use domain::analytics::{self as math, Bucket, Granularity, QOE_COLUMNS, Qoe};

/// A counter column of `analytics_minutes` that events add to.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Joins,
    JoinTimeSum,
    Leaves,
    LeaveTimeSum,
    NewViewers,
    Messages,
    NewChatters,
    Reactions,
    Gifts,
    GiftTokens,
    Follows,
    Subscriptions,
}

impl Counter {
    /// Its column: [`COUNTERS`] lists them in the order of the variants.
    fn column(self) -> &'static str {
        COUNTERS[self as usize]
    }
}

/// Every column events add to: the counters, then the quality-of-experience counts.
fn all_counters() -> Vec<&'static str> {
    COUNTERS.iter().chain(QOE_COLUMNS.iter()).copied().collect()
}

/// Every counter column, in the order of [`Counter`]'s variants.
const COUNTERS: [&str; 12] = [
    "joins",
    "join_time_sum",
    "leaves",
    "leave_time_sum",
    "new_viewers",
    "messages",
    "new_chatters",
    "reactions",
    "gifts",
    "gift_tokens",
    "follows",
    "subscriptions",
];

/// One call of [`add`] in [`FOLD_ONE_IN`] also folds the broadcast's pending counts into
/// its minute rows.
const FOLD_ONE_IN: u8 = 32;

/// Adds `amounts` to the broadcast's bucket of the minute `now` falls in, as a pending
/// count: an insert, which no other event of the broadcast waits for (an upsert of the
/// minute's row would hold that row locked on PostgreSQL until the transaction commits, so
/// a popular broadcast's gifts, reactions and messages would take turns). Reads add the
/// pending counts to the minute rows; one call in [`FOLD_ONE_IN`] folds them in.
fn add(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    now: i64,
    amounts: &[(Counter, i64)],
) -> Result<(), ApiError> {
    let named: Vec<(&str, i64)> = amounts.iter().map(|(c, n)| (c.column(), *n)).collect();
    add_named(db, client_id, broadcast_id, now, &named)
}

/// [`add`] by column names: those of [`COUNTERS`] and [`QOE_COLUMNS`].
fn add_named(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    now: i64,
    amounts: &[(&str, i64)],
) -> Result<(), ApiError> {
    let amounts: Vec<(&str, i64)> = amounts.iter().copied().filter(|(_, n)| *n != 0).collect();
    if amounts.is_empty() {
        return Ok(());
    }
    let columns: Vec<&str> = amounts.iter().map(|(c, _)| *c).collect();
    let sql = format!(
        "INSERT INTO analytics_pending (broadcast_id, minute, client_id, {}) VALUES (?, ?, ?{})",
        columns.join(", "),
        ", ?".repeat(columns.len()),
    );
    let mut params: Vec<Value> = vec![
        broadcast_id.into(),
        Value::Int(math::minute_of(now)),
        client_id.into(),
    ];
    params.extend(amounts.iter().map(|(_, n)| Value::Int(*n)));
    db.insert_soon(&sql, &params)?;
    if domain::ids::random_bytes(1)[0].is_multiple_of(FOLD_ONE_IN) {
        fold(db, broadcast_id, Folding::Skip)?;
    }
    Ok(())
}

/// Whether a fold waits for another transaction folding the same broadcast, or leaves
/// the counts to a later fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Folding {
    Wait,
    Skip,
}

/// Moves `broadcast_id`'s pending counts into its minute rows, in a transaction of its own
/// (a savepoint inside the caller's). Each pending row is deleted, and added, by exactly
/// one transaction. On PostgreSQL a broadcast is folded by one transaction at a time (an
/// advisory lock on it, held to the end of the transaction): with [`Folding::Skip`] a
/// fold that finds it taken leaves the counts pending rather than wait for that
/// transaction's minute rows.
fn fold(db: &Db, broadcast_id: &str, folding: Folding) -> Result<(), ApiError> {
    db.transaction(|tx| fold_in(tx, broadcast_id, folding))
}

fn fold_in(db: &Db, broadcast_id: &str, folding: Folding) -> Result<(), ApiError> {
    if db.dialect() == Dialect::Postgres {
        let key = format!("analytics fold {broadcast_id}");
        // The transaction takes an id with its lock, so that a request trapped while
        // holding it leaves a transaction the next user of the pooled connection sees
        // (see `Leftover` in the edge crate's Spin store).
        let locked = match folding {
            Folding::Skip => db.count(
                "SELECT CAST(pg_try_advisory_xact_lock(hashtext(?)) AS INT) AS locked, \
                 pg_current_xact_id()::text AS xid",
                &[key.into()],
            )?,
            Folding::Wait => db.count(
                "SELECT 1 AS locked, pg_current_xact_id()::text AS xid \
                 FROM (SELECT pg_advisory_xact_lock(hashtext(?))) l",
                &[key.into()],
            )?,
        };
        if locked != 1 {
            return Ok(());
        }
    }
    let all = all_counters();
    let counters = all.join(", ");
    let taken = db.query(
        &format!(
            "DELETE FROM analytics_pending WHERE broadcast_id = ? RETURNING minute, client_id, {counters}"
        ),
        &[broadcast_id.into()],
    )?;
    let mut minutes: std::collections::BTreeMap<(i64, String), Vec<i64>> = Default::default();
    for row in &taken {
        let sums = minutes
            .entry((row.int("minute"), row.text("client_id")))
            .or_insert_with(|| vec![0; all.len()]);
        for (sum, column) in sums.iter_mut().zip(&all) {
            *sum += row.int(column);
        }
    }
    let updates = all
        .iter()
        .map(|c| format!("{c} = analytics_minutes.{c} + excluded.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    for ((minute, client_id), sums) in minutes {
        let mut params: Vec<Value> =
            vec![broadcast_id.into(), Value::Int(minute), client_id.into()];
        params.extend(sums.iter().map(|n| Value::Int(*n)));
        db.execute(
            &format!(
                "INSERT INTO analytics_minutes (broadcast_id, minute, client_id, {counters}) VALUES (?, ?, ?{}) \
                 ON CONFLICT (broadcast_id, minute) DO UPDATE SET {updates}",
                ", ?".repeat(all.len()),
            ),
            &params,
        )?;
    }
    Ok(())
}

/// The minute rows matching `filter` together with the pending counts matching it, as one
/// relation of [`BUCKET_COLUMNS`] (and `client_id`) to sum per minute.
fn minutes_with_pending(filter: &str) -> String {
    let counters = all_counters().join(", ");
    let qoe = QOE_COLUMNS.join(", ");
    format!(
        "(SELECT client_id, {BUCKET_COLUMNS}, {qoe} FROM analytics_minutes WHERE {filter} \
          UNION ALL SELECT client_id, minute, 0 AS viewer_reports, 0 AS viewer_sum, NULL AS viewer_min, \
            0 AS viewer_max, {counters} FROM analytics_pending WHERE {filter})"
    )
}

/// The per-minute sums of [`minutes_with_pending`]'s relation, as [`BUCKET_COLUMNS`].
fn summed_columns() -> String {
    let sums = ["viewer_reports", "viewer_sum"]
        .into_iter()
        .chain(all_counters())
        .map(|c| format!("CAST(SUM({c}) AS BIGINT) AS {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("minute, {sums}, MIN(viewer_min) AS viewer_min, MAX(viewer_max) AS viewer_max")
}

/// A concurrent-viewer report (`viewer-count`): the minute's lowest, highest, sum and count.
pub fn record_viewers(db: &Db, b: &Broadcast, count: i64, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO analytics_minutes (broadcast_id, minute, client_id, viewer_reports, viewer_sum, viewer_min, viewer_max) \
         VALUES (?1, ?2, ?3, 1, ?4, ?4, ?4) \
         ON CONFLICT (broadcast_id, minute) DO UPDATE SET viewer_reports = analytics_minutes.viewer_reports + 1, \
           viewer_sum = analytics_minutes.viewer_sum + ?4, \
           viewer_min = CASE WHEN analytics_minutes.viewer_min IS NOT NULL AND analytics_minutes.viewer_min < ?4 \
             THEN analytics_minutes.viewer_min ELSE ?4 END, \
           viewer_max = CASE WHEN analytics_minutes.viewer_max > ?4 THEN analytics_minutes.viewer_max ELSE ?4 END",
        &[
            b.id.clone().into(),
            Value::Int(math::minute_of(now)),
            b.client_id.clone().into(),
            Value::Int(count),
        ],
    )
}

/// Whether an SFU participant is a viewer: not the owner, not a publishing co-host.
pub fn is_viewer(b: &Broadcast, identity: &str, is_cohost: bool) -> bool {
    !is_cohost && !b.is_owned_by(identity)
}

/// A viewer joined the broadcast's room (an SFU `participant_joined`): a new session, and
/// a new unique viewer the first time the identity is seen. A join for a session already
/// open is ignored. Answers whether a session opened. Called inside the webhook's
/// transaction by every handler of SFU participant webhooks.
pub fn viewer_joined(db: &Db, b: &Broadcast, identity: &str, now: i64) -> Result<bool, ApiError> {
    let first = db.query(
        "INSERT INTO analytics_viewers (broadcast_id, identity, watching) VALUES (?, ?, 1) \
         ON CONFLICT (broadcast_id, identity) DO NOTHING RETURNING identity",
        &[b.id.clone().into(), identity.into()],
    )?;
    let session = if first.is_empty() {
        !db.query(
            "UPDATE analytics_viewers SET watching = 1 WHERE broadcast_id = ? AND identity = ? AND watching = 0 \
             RETURNING identity",
            &[b.id.clone().into(), identity.into()],
        )?
        .is_empty()
    } else {
        true
    };
    if session {
        add(
            db,
            &b.client_id,
            &b.id,
            now,
            &[
                (Counter::Joins, 1),
                (Counter::JoinTimeSum, now),
                (Counter::NewViewers, i64::from(!first.is_empty())),
            ],
        )?;
    }
    Ok(session)
}

/// A viewer left the room (an SFU `participant_left`): its open session ends now. A leave
/// without an open session is ignored. Answers whether a session closed.
pub fn viewer_left(db: &Db, b: &Broadcast, identity: &str, now: i64) -> Result<bool, ApiError> {
    let closed = !db
        .query(
            "UPDATE analytics_viewers SET watching = 0 WHERE broadcast_id = ? AND identity = ? AND watching = 1 \
             RETURNING identity",
            &[b.id.clone().into(), identity.into()],
        )?
        .is_empty();
    if closed {
        add(
            db,
            &b.client_id,
            &b.id,
            now,
            &[(Counter::Leaves, 1), (Counter::LeaveTimeSum, now)],
        )?;
    }
    Ok(closed)
}

/// What one accepted view beacon (`POST /api/views`) counts in the broadcast's buckets.
#[derive(Debug, Clone, Default)]
pub struct ViewCounts<'a> {
    /// The view's first beacon: a view, and a unique viewer the first time `viewer` (the
    /// player's viewerId, else the viewId) is seen in the broadcast.
    pub new_view: Option<&'a str>,
    /// A session (a concurrent viewer) opens now.
    pub opens: bool,
    /// The view's session closed at this instant (epoch seconds).
    pub closes: Option<i64>,
    pub delta: domain::views::Figures,
    pub startup_ms: Option<i64>,
    pub failure: Option<&'a str>,
}

/// Counts an HLS view's beacon at `now`: its session's start and end (watch time and
/// sessions, beside the SFU's), a unique viewer, and its quality of experience. Called in
/// the transaction that stores the view.
pub fn view_beacon(db: &Db, b: &Broadcast, c: &ViewCounts<'_>, now: i64) -> Result<(), ApiError> {
    let mut counts: Vec<(&str, i64)> = Vec::new();
    if let Some(viewer) = c.new_view {
        let first = db.query(
            "INSERT INTO analytics_viewers (broadcast_id, identity, watching) VALUES (?, ?, 0) \
             ON CONFLICT (broadcast_id, identity) DO NOTHING RETURNING identity",
            &[b.id.clone().into(), format!("view:{viewer}").into()],
        )?;
        counts.push(("views", 1));
        counts.push((Counter::NewViewers.column(), i64::from(!first.is_empty())));
    }
    if c.opens {
        counts.push((Counter::Joins.column(), 1));
        counts.push((Counter::JoinTimeSum.column(), now));
    }
    counts.push(("played_ms", c.delta.played_ms));
    counts.push(("rebuffer_ms", c.delta.rebuffer_ms));
    counts.push(("rebuffers", c.delta.rebuffers));
    let bucket;
    if let Some(ms) = c.startup_ms {
        bucket = format!("startup_h{}", domain::views::startup_bucket(ms));
        counts.push(("startups", 1));
        counts.push(("startup_ms_sum", ms));
        counts.push((bucket.as_str(), 1));
    }
    let failure;
    if let Some(reason) = c.failure {
        failure = format!("failures_{reason}");
        if QOE_COLUMNS.contains(&failure.as_str()) {
            counts.push((failure.as_str(), 1));
        }
    }
    add_named(db, &b.client_id, &b.id, now, &counts)?;
    if let Some(at) = c.closes {
        view_closed(db, &b.client_id, &b.id, at)?;
    }
    Ok(())
}

/// An HLS view's session closed at `at` (its `end`, its last beacon when it went silent,
/// or its broadcast's end).
pub fn view_closed(db: &Db, client_id: &str, broadcast_id: &str, at: i64) -> Result<(), ApiError> {
    add(
        db,
        client_id,
        broadcast_id,
        at,
        &[(Counter::Leaves, 1), (Counter::LeaveTimeSum, at)],
    )
}

/// A chat message in the broadcast, by `sender_id`: counted, and the sender counted once
/// as a chatter.
pub fn chat_message(db: &Db, b: &Broadcast, sender_id: &str, now: i64) -> Result<(), ApiError> {
    let first = db.query(
        "INSERT INTO analytics_chatters (broadcast_id, user_id) VALUES (?, ?) \
         ON CONFLICT (broadcast_id, user_id) DO NOTHING RETURNING user_id",
        &[b.id.clone().into(), sender_id.into()],
    )?;
    add(
        db,
        &b.client_id,
        &b.id,
        now,
        &[
            (Counter::Messages, 1),
            (Counter::NewChatters, i64::from(!first.is_empty())),
        ],
    )
}

/// A chat message of the broadcast, posted at `posted` (epoch seconds), was deleted: it
/// no longer counts in its minute (its sender still counts as a chatter).
pub fn chat_message_deleted(db: &Db, b: &Broadcast, posted: i64) -> Result<(), ApiError> {
    add(db, &b.client_id, &b.id, posted, &[(Counter::Messages, -1)])
}

/// A reaction in the broadcast (its kind is counted by `broadcasts::add_reaction`).
pub fn reaction(db: &Db, b: &Broadcast, now: i64) -> Result<(), ApiError> {
    add(db, &b.client_id, &b.id, now, &[(Counter::Reactions, 1)])
}

/// A gift of `tokens` sent in the broadcast: for the money component, inside the
/// transaction that moves the tokens.
pub fn gift(db: &Db, b: &Broadcast, tokens: i64, now: i64) -> Result<(), ApiError> {
    add(
        db,
        &b.client_id,
        &b.id,
        now,
        &[(Counter::Gifts, 1), (Counter::GiftTokens, tokens)],
    )
}

/// What a creator gains that analytics credits to their live broadcasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gained {
    Follower,
    Subscriber,
}

/// `creator_id` gained a follower or a subscriber: counted in each of their broadcasts that
/// is live now (none: nothing to count).
pub fn creator_gained(
    db: &Db,
    client_id: &str,
    creator_id: &str,
    what: Gained,
    now: i64,
) -> Result<(), ApiError> {
    let live = db.query(
        "SELECT id FROM broadcasts WHERE client_id = ? AND owner_id = ? AND status = 'active'",
        &[client_id.into(), creator_id.into()],
    )?;
    let counter = match what {
        Gained::Follower => Counter::Follows,
        Gained::Subscriber => Counter::Subscriptions,
    };
    for row in live {
        add(db, client_id, &row.text("id"), now, &[(counter, 1)])?;
    }
    Ok(())
}

const BUCKET_COLUMNS: &str = "minute, viewer_reports, viewer_sum, viewer_min, viewer_max, joins, join_time_sum, \
    leaves, leave_time_sum, new_viewers, messages, new_chatters, reactions, gifts, gift_tokens, follows, subscriptions";

fn bucket_of(row: &Row) -> Bucket {
    Bucket {
        minute: row.int("minute"),
        viewer_reports: row.int("viewer_reports"),
        viewer_sum: row.int("viewer_sum"),
        viewer_min: row.opt_int("viewer_min"),
        viewer_max: row.int("viewer_max"),
        joins: row.int("joins"),
        join_time_sum: row.int("join_time_sum"),
        leaves: row.int("leaves"),
        leave_time_sum: row.int("leave_time_sum"),
        new_viewers: row.int("new_viewers"),
        messages: row.int("messages"),
        new_chatters: row.int("new_chatters"),
        reactions: row.int("reactions"),
        gifts: row.int("gifts"),
        gift_tokens: row.int("gift_tokens"),
        follows: row.int("follows"),
        subscriptions: row.int("subscriptions"),
        qoe: qoe_of(row),
    }
}

fn qoe_of(row: &Row) -> Qoe {
    let values: Vec<i64> = QOE_COLUMNS.iter().map(|c| row.int(c)).collect();
    Qoe::from_values(&values)
}

/// Every minute bucket of a broadcast, in time order.
pub fn buckets(db: &Db, b: &Broadcast) -> Result<Vec<Bucket>, ApiError> {
    Ok(db
        .query(
            &format!(
                "SELECT {} FROM {} m GROUP BY minute ORDER BY minute",
                summed_columns(),
                minutes_with_pending("broadcast_id = ?1 AND client_id = ?2")
            ),
            &[b.id.clone().into(), b.client_id.clone().into()],
        )?
        .iter()
        .map(bucket_of)
        .collect())
}

/// A broadcast's analytics: totals and a time series, from its minute buckets.
#[derive(Debug, Clone)]
pub struct Report {
    /// When it went live (epoch seconds), if it did.
    pub started: Option<i64>,
    /// Where the figures end: the broadcast's end, or now while it has not ended.
    pub until: i64,
    pub granularity: Granularity,
    pub totals: math::Totals,
    /// From the interval of the start to `until`; empty if it never went live.
    pub series: Vec<math::Point>,
}

/// Reads `b`'s buckets into its report; a live broadcast's figures run to `now`. More
/// points than [`math::MAX_POINTS`] is 422 `range_too_large`.
pub fn report(
    db: &Db,
    b: &Broadcast,
    granularity: Granularity,
    now: i64,
) -> Result<Report, ApiError> {
    let started = b
        .started_at
        .as_deref()
        .and_then(domain::time::parse_rfc3339);
    let ended = b.ended_at.as_deref().and_then(domain::time::parse_rfc3339);
    // Chat may come before the broadcast goes live: the totals count it.
    let until = ended.unwrap_or(now);
    let buckets = buckets(db, b)?;
    let series = match started {
        Some(started) => {
            if math::points_between(started, until, granularity) > math::MAX_POINTS {
                return Err(too_many_points());
            }
            math::fold(&buckets, granularity, started, until)
        }
        None => Vec::new(),
    };
    Ok(Report {
        started,
        until,
        granularity,
        totals: math::totals(&buckets, until),
        series,
    })
}

/// 422 for a series longer than [`math::MAX_POINTS`].
pub fn too_many_points() -> ApiError {
    ApiError::new(
        422,
        "range_too_large",
        format!(
            "the series would have more than {} points; choose a coarser granularity or a shorter range",
            math::MAX_POINTS
        ),
    )
}

/// Stores a read-only dashboard link for `b`: the token's hash, valid until `expires_at`.
pub fn add_share(
    db: &Db,
    b: &Broadcast,
    token_hash: &str,
    expires_at: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO analytics_shares (token_hash, client_id, broadcast_id, expires_at) VALUES (?, ?, ?, ?)",
        &[
            token_hash.into(),
            b.client_id.clone().into(),
            b.id.clone().into(),
            Value::Int(expires_at),
        ],
    )
}

/// The tenant of broadcast `broadcast_id` when `token_hash` is a link to it that has not
/// expired at `now`.
pub fn shared(
    db: &Db,
    token_hash: &str,
    broadcast_id: &str,
    now: i64,
) -> Result<Option<String>, ApiError> {
    Ok(db
        .query_one(
            "SELECT client_id FROM analytics_shares WHERE token_hash = ? AND broadcast_id = ? AND expires_at > ?",
            &[token_hash.into(), broadcast_id.into(), Value::Int(now)],
        )?
        .map(|row| row.text("client_id")))
}

/// Removes up to `batch` links that expired before `before`; answers how many.
pub fn prune_shares(db: &Db, before: i64, batch: i64) -> Result<i64, ApiError> {
    Ok(db
        .query(
            "DELETE FROM analytics_shares WHERE token_hash IN \
               (SELECT token_hash FROM analytics_shares WHERE expires_at <= ? LIMIT ?) RETURNING token_hash",
            &[Value::Int(before), Value::Int(batch)],
        )?
        .len() as i64)
}

/// A day's figures for a creator or a tenant, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DayRow {
    pub day: i64,
    pub broadcasts: i64,
    pub live_seconds: i64,
    pub watch_seconds: i64,
    pub peak_viewers: i64,
    pub unique_viewers: i64,
    pub messages: i64,
    pub chatters: i64,
    pub reactions: i64,
    pub gifts: i64,
    pub gift_tokens: i64,
    pub follows: i64,
    pub subscriptions: i64,
    /// Tenant rows only.
    pub new_users: i64,
    pub active_users: i64,
    pub qoe: Qoe,
}

const DAY_SUMS: [&str; 11] = [
    "broadcasts",
    "live_seconds",
    "watch_seconds",
    "unique_viewers",
    "messages",
    "chatters",
    "reactions",
    "gifts",
    "gift_tokens",
    "follows",
    "subscriptions",
];

fn day_of_row(row: &Row) -> DayRow {
    DayRow {
        day: row.int("day"),
        broadcasts: row.int("broadcasts"),
        live_seconds: row.int("live_seconds"),
        watch_seconds: row.int("watch_seconds"),
        peak_viewers: row.int("peak_viewers"),
        unique_viewers: row.int("unique_viewers"),
        messages: row.int("messages"),
        chatters: row.int("chatters"),
        reactions: row.int("reactions"),
        gifts: row.int("gifts"),
        gift_tokens: row.int("gift_tokens"),
        follows: row.int("follows"),
        subscriptions: row.int("subscriptions"),
        new_users: row.int("new_users"),
        active_users: row.int("active_users"),
        qoe: qoe_of(row),
    }
}

fn day_values(d: &DayRow) -> [i64; 11] {
    [
        d.broadcasts,
        d.live_seconds,
        d.watch_seconds,
        d.unique_viewers,
        d.messages,
        d.chatters,
        d.reactions,
        d.gifts,
        d.gift_tokens,
        d.follows,
        d.subscriptions,
    ]
}

/// Adds `d` to the day row of `table` keyed by `key` (columns and values): sums add up,
/// the peak keeps the larger.
fn add_day(db: &Db, table: &str, key: &[(&str, Value)], d: &DayRow) -> Result<(), ApiError> {
    let key_columns: Vec<&str> = key.iter().map(|(c, _)| *c).collect();
    let mut columns = key_columns.clone();
    columns.push("day");
    columns.push("peak_viewers");
    columns.extend(DAY_SUMS);
    columns.extend(QOE_COLUMNS);
    let mut updates: Vec<String> = DAY_SUMS
        .iter()
        .chain(QOE_COLUMNS.iter())
        .map(|c| format!("{c} = {table}.{c} + excluded.{c}"))
        .collect();
    updates.push(format!(
        "peak_viewers = CASE WHEN {table}.peak_viewers > excluded.peak_viewers THEN {table}.peak_viewers ELSE excluded.peak_viewers END"
    ));
    let sql = format!(
        "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({}, day) DO UPDATE SET {}",
        columns.join(", "),
        vec!["?"; columns.len()].join(", "),
        key_columns.join(", "),
        updates.join(", ")
    );
    let mut params: Vec<Value> = key.iter().map(|(_, v)| v.clone()).collect();
    params.push(Value::Int(d.day));
    params.push(Value::Int(d.peak_viewers));
    params.extend(day_values(d).into_iter().map(Value::Int));
    params.extend(d.qoe.values().into_iter().map(Value::Int));
    db.execute(&sql, &params)
}

/// How many finished broadcasts are still to be folded into the daily rows.
pub fn rollups_remaining(db: &Db) -> Result<i64, ApiError> {
    db.count(
        "SELECT COUNT(*) FROM broadcasts b WHERE b.status IN ('completed', 'error') AND b.ended_at IS NOT NULL \
         AND NOT EXISTS (SELECT 1 FROM analytics_rolled_up r WHERE r.broadcast_id = b.id)",
        &[],
    )
}

/// Up to `batch` finished broadcasts not folded yet (tenant id, broadcast id), oldest end
/// first.
pub fn rollups_due(db: &Db, batch: i64) -> Result<Vec<(String, String)>, ApiError> {
    Ok(db
        .query(
            "SELECT b.client_id, b.id FROM broadcasts b WHERE b.status IN ('completed', 'error') AND b.ended_at IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM analytics_rolled_up r WHERE r.broadcast_id = b.id) \
             ORDER BY b.ended_at, b.id LIMIT ?",
            &[Value::Int(batch)],
        )?
        .iter()
        .map(|row| (row.text("client_id"), row.text("id")))
        .collect())
}

/// Folds one finished broadcast into its creator's and its tenant's day rows, once: a
/// second call (or a racing runner) finds it marked and adds nothing. Viewer sessions still
/// open end with the broadcast. Answers whether it was folded now.
pub fn roll_up(db: &Db, b: &Broadcast, now: i64) -> Result<bool, ApiError> {
    db.transaction(|tx| {
        if !mark_rolled_up(tx, b, now)? {
            return Ok(false);
        }
        let (Some(started), Some(ended)) = (
            b.started_at
                .as_deref()
                .and_then(domain::time::parse_rfc3339),
            b.ended_at.as_deref().and_then(domain::time::parse_rfc3339),
        ) else {
            // Never live (pending, then completed): nothing to fold.
            return Ok(true);
        };
        close_open_sessions(tx, b, ended)?;
        crate::views::close_for_broadcast(tx, b, ended)?;
        // A finished broadcast gets no more counts: none stays pending.
        fold(tx, &b.id, Folding::Wait)?;
        let days = days_of_broadcast(&buckets(tx, b)?, started, ended);
        let owner = b.owner_id.clone().unwrap_or_default();
        for d in &days {
            add_day(
                tx,
                "analytics_creator_days",
                &[
                    ("client_id", b.client_id.clone().into()),
                    ("owner_id", owner.clone().into()),
                ],
                d,
            )?;
            add_day(
                tx,
                "analytics_tenant_days",
                &[("client_id", b.client_id.clone().into())],
                d,
            )?;
        }
        Ok(true)
    })
}

/// Ends, at `ended`, the viewer sessions the SFU never reported closed.
fn close_open_sessions(db: &Db, b: &Broadcast, ended: i64) -> Result<(), ApiError> {
    let closed = db
        .query(
            "UPDATE analytics_viewers SET watching = 0 WHERE broadcast_id = ? AND watching = 1 RETURNING identity",
            &[b.id.clone().into()],
        )?
        .len() as i64;
    if closed > 0 {
        add(
            db,
            &b.client_id,
            &b.id,
            ended,
            &[
                (Counter::Leaves, closed),
                (Counter::LeaveTimeSum, closed * ended),
            ],
        )?;
    }
    Ok(())
}

fn mark_rolled_up(db: &Db, b: &Broadcast, now: i64) -> Result<bool, ApiError> {
    Ok(!db
        .query(
            "INSERT INTO analytics_rolled_up (broadcast_id, client_id, rolled_at) VALUES (?, ?, ?) \
             ON CONFLICT (broadcast_id) DO NOTHING RETURNING broadcast_id",
            &[
                b.id.clone().into(),
                b.client_id.clone().into(),
                Value::Int(now),
            ],
        )?
        .is_empty())
}

/// A broadcast live from `started` to `ended`, as one row per UTC day it touched: live
/// and watch time split at midnight, counts on the day they happened, the broadcast itself
/// counted on the day it started.
pub fn days_of_broadcast(buckets: &[Bucket], started: i64, ended: i64) -> Vec<DayRow> {
    math::fold(buckets, Granularity::Day, started, ended.max(started + 1))
        .into_iter()
        .map(|p| DayRow {
            broadcasts: i64::from(p.start == math::day_of(started)),
            live_seconds: math::overlap(started, ended, p.start, p.start + math::DAY),
            ..counts_of(&p)
        })
        .collect()
}

/// A folded interval's counts as a channel row (broadcasts, live time and users are the
/// caller's to set).
pub fn counts_of(p: &math::Point) -> DayRow {
    DayRow {
        day: p.start,
        broadcasts: 0,
        live_seconds: 0,
        watch_seconds: p.watch_seconds,
        peak_viewers: p.viewers_max.unwrap_or(0),
        unique_viewers: p.new_viewers,
        messages: p.messages,
        chatters: p.new_chatters,
        reactions: p.reactions,
        gifts: p.gifts,
        gift_tokens: p.gift_tokens,
        follows: p.follows,
        subscriptions: p.subscriptions,
        new_users: 0,
        active_users: 0,
        qoe: p.qoe,
    }
}

/// A creator's day rows from `from_day` to `to_day` (inclusive), in day order.
pub fn creator_days(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    from_day: i64,
    to_day: i64,
) -> Result<Vec<DayRow>, ApiError> {
    Ok(db
        .query(
            "SELECT * FROM analytics_creator_days WHERE client_id = ? AND owner_id = ? AND day >= ? AND day <= ? ORDER BY day",
            &[
                client_id.into(),
                owner_id.into(),
                Value::Int(from_day),
                Value::Int(to_day),
            ],
        )?
        .iter()
        .map(day_of_row)
        .collect())
}

/// A tenant's day rows from `from_day` to `to_day` (inclusive), in day order.
pub fn tenant_days(
    db: &Db,
    client_id: &str,
    from_day: i64,
    to_day: i64,
) -> Result<Vec<DayRow>, ApiError> {
    Ok(db
        .query(
            "SELECT * FROM analytics_tenant_days WHERE client_id = ? AND day >= ? AND day <= ? ORDER BY day",
            &[client_id.into(), Value::Int(from_day), Value::Int(to_day)],
        )?
        .iter()
        .map(day_of_row)
        .collect())
}

/// A tenant's minute buckets from `from` to `to` (exclusive), summed over its broadcasts
/// per minute (the peak is the highest of any one broadcast).
pub fn tenant_minutes(
    db: &Db,
    client_id: &str,
    from: i64,
    to: i64,
) -> Result<Vec<Bucket>, ApiError> {
    Ok(db
        .query(
            &format!(
                "SELECT {} FROM {} m GROUP BY minute ORDER BY minute",
                summed_columns(),
                minutes_with_pending("client_id = ?1 AND minute >= ?2 AND minute < ?3")
            ),
            &[client_id.into(), Value::Int(from), Value::Int(to)],
        )?
        .iter()
        .map(bucket_of)
        .collect())
}

/// The live spans (started, ended or still live) of the tenant's broadcasts that were
/// live at some point of `[from, to)`.
pub fn live_spans(
    db: &Db,
    client_id: &str,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, Option<i64>)>, ApiError> {
    let rows = db.query(
        "SELECT started_at, ended_at FROM broadcasts WHERE client_id = ? AND started_at IS NOT NULL \
         AND started_at < ? AND (ended_at IS NULL OR ended_at >= ?)",
        &[
            client_id.into(),
            domain::time::format_rfc3339(to).into(),
            domain::time::format_rfc3339(from).into(),
        ],
    )?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            let started = domain::time::parse_rfc3339(&row.text("started_at"))?;
            let ended = row
                .opt_text("ended_at")
                .and_then(|e| domain::time::parse_rfc3339(&e));
            Some((started, ended))
        })
        .collect())
}

/// How many of the tenant's viewer sessions were open at `at` (started before, not ended).
pub fn tenant_sessions_open_at(db: &Db, client_id: &str, at: i64) -> Result<i64, ApiError> {
    db.count(
        &format!(
            "SELECT CAST(SUM(joins - leaves) AS BIGINT) FROM {} m",
            minutes_with_pending("client_id = ?1 AND minute < ?2")
        ),
        &[client_id.into(), Value::Int(math::minute_of(at))],
    )
}

/// A user of the tenant signed up (its session makes it an active one too).
pub fn user_signed_up(db: &Db, client_id: &str, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO analytics_tenant_days (client_id, day, new_users) VALUES (?, ?, 1) \
         ON CONFLICT (client_id, day) DO UPDATE SET new_users = analytics_tenant_days.new_users + 1",
        &[client_id.into(), Value::Int(math::day_of(now))],
    )
}

/// A user of the tenant was active (signed in or refreshed a session): counted once a day.
pub fn user_active(db: &Db, client_id: &str, user_id: &str, now: i64) -> Result<(), ApiError> {
    let day = math::day_of(now);
    let first = db.query(
        "INSERT INTO analytics_active_users (client_id, day, user_id) VALUES (?, ?, ?) \
         ON CONFLICT (client_id, day, user_id) DO NOTHING RETURNING user_id",
        &[client_id.into(), Value::Int(day), user_id.into()],
    )?;
    if first.is_empty() {
        return Ok(());
    }
    db.execute(
        "INSERT INTO analytics_tenant_days (client_id, day, active_users) VALUES (?, ?, 1) \
         ON CONFLICT (client_id, day) DO UPDATE SET active_users = analytics_tenant_days.active_users + 1",
        &[client_id.into(), Value::Int(day)],
    )
}

/// Removes up to `batch` active-user marks of days before `before_day`; answers how many.
pub fn prune_active_users(db: &Db, before_day: i64, batch: i64) -> Result<i64, ApiError> {
    Ok(db
        .query(
            "DELETE FROM analytics_active_users WHERE (client_id, day, user_id) IN \
               (SELECT client_id, day, user_id FROM analytics_active_users WHERE day < ? LIMIT ?) RETURNING day",
            &[Value::Int(before_day), Value::Int(batch)],
        )?
        .len() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app;
    use crate::broadcasts;
    use crate::testing;
    use domain::broadcast::Status;

    const T0: i64 = 1_800_000_000 - 1_800_000_000 % 86_400;

    fn live(db: &Db, owner: &str, at: i64) -> Broadcast {
        let new = testing::new_broadcast();
        let b = broadcasts::insert(db, "c1", Some(owner), &new, at).unwrap();
        assert!(broadcasts::move_status(db, &b, Status::Active, at).unwrap());
        app::broadcasts::load(db, "c1", &b.id, at).unwrap()
    }

    #[test]
    fn viewer_reports_keep_the_minutes_extremes() {
        let db = testing::db();
        let b = live(&db, "ada", T0);
        for (at, count) in [(T0 + 5, 10), (T0 + 10, 4), (T0 + 15, 7), (T0 + 65, 3)] {
            record_viewers(&db, &b, count, at).unwrap();
        }
        let got = buckets(&db, &b).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (
                got[0].viewer_reports,
                got[0].viewer_sum,
                got[0].viewer_min,
                got[0].viewer_max
            ),
            (3, 21, Some(4), 10)
        );
        assert_eq!((got[1].viewer_min, got[1].viewer_max), (Some(3), 3));
    }

    #[test]
    fn sessions_unique_viewers_and_duplicate_webhooks() {
        let db = testing::db();
        let b = live(&db, "ada", T0);
        assert!(viewer_joined(&db, &b, "bob", T0 + 10).unwrap());
        assert!(
            !viewer_joined(&db, &b, "bob", T0 + 11).unwrap(),
            "already watching"
        );
        assert!(viewer_left(&db, &b, "bob", T0 + 70).unwrap());
        assert!(
            !viewer_left(&db, &b, "bob", T0 + 71).unwrap(),
            "not watching"
        );
        assert!(viewer_joined(&db, &b, "bob", T0 + 100).unwrap());
        assert!(viewer_joined(&db, &b, "cat", T0 + 100).unwrap());
        assert!(
            !viewer_left(&db, &b, "dan", T0 + 110).unwrap(),
            "never seen"
        );
        let t = math::totals(&buckets(&db, &b).unwrap(), T0 + 160);
        assert_eq!(t.unique_viewers, 2);
        assert_eq!(t.viewer_sessions, 3);
        assert_eq!(t.total_watch_seconds, 60 + 60 + 60);
        assert!(is_viewer(&b, "bob", false));
        assert!(!is_viewer(&b, "ada", false));
        assert!(!is_viewer(&b, "bob", true));
    }

    #[test]
    fn chatters_reactions_gifts_and_follows() {
        let db = testing::db();
        let b = live(&db, "ada", T0);
        chat_message(&db, &b, "bob", T0).unwrap();
        chat_message(&db, &b, "bob", T0 + 1).unwrap();
        chat_message(&db, &b, "cat", T0 + 61).unwrap();
        reaction(&db, &b, T0 + 2).unwrap();
        gift(&db, &b, 50, T0 + 3).unwrap();
        creator_gained(&db, "c1", "ada", Gained::Follower, T0 + 4).unwrap();
        creator_gained(&db, "c1", "ada", Gained::Subscriber, T0 + 4).unwrap();
        creator_gained(&db, "c1", "zed", Gained::Follower, T0 + 4).unwrap();
        creator_gained(&db, "c2", "ada", Gained::Follower, T0 + 4).unwrap();
        let got = buckets(&db, &b).unwrap();
        assert_eq!((got[0].messages, got[0].new_chatters), (2, 1));
        assert_eq!((got[1].messages, got[1].new_chatters), (1, 1));
        assert_eq!(
            (got[0].reactions, got[0].gifts, got[0].gift_tokens),
            (1, 1, 50)
        );
        assert_eq!((got[0].follows, got[0].subscriptions), (1, 1));
    }

    #[test]
    fn pending_counts_read_the_same_before_and_after_they_are_folded() {
        let db = testing::db();
        let b = live(&db, "ada", T0);
        record_viewers(&db, &b, 7, T0).unwrap();
        for n in 0..100 {
            gift(&db, &b, 10, T0 + n).unwrap();
            reaction(&db, &b, T0 + n).unwrap();
        }
        let totals = |got: &[Bucket]| -> (i64, i64, i64, i64) {
            got.iter().fold((0, 0, 0, 0), |t, m| {
                (
                    t.0 + m.gifts,
                    t.1 + m.gift_tokens,
                    t.2 + m.reactions,
                    t.3.max(m.viewer_max),
                )
            })
        };
        let before = buckets(&db, &b).unwrap();
        assert_eq!(before.len(), 2, "the counts fall in two minutes");
        assert_eq!(totals(&before), (100, 1000, 100, 7));
        assert_eq!(
            totals(&tenant_minutes(&db, "c1", T0 - 60, T0 + 200).unwrap()),
            (100, 1000, 100, 7)
        );
        fold(&db, &b.id, Folding::Wait).unwrap();
        let pending = db
            .count("SELECT COUNT(*) FROM analytics_pending", &[])
            .unwrap();
        assert_eq!(pending, 0);
        let after = buckets(&db, &b).unwrap();
        assert_eq!(totals(&after), (100, 1000, 100, 7));
        assert_eq!((after[0].viewer_min, after[0].viewer_reports), (Some(7), 1));
    }
    #[test]
    fn a_finished_broadcast_rolls_up_once_split_at_midnight() {
        let db = testing::db();
        let start = T0 + 86_400 - 600;
        let b = live(&db, "ada", start);
        record_viewers(&db, &b, 9, start + 10).unwrap();
        viewer_joined(&db, &b, "bob", start + 300).unwrap();
        chat_message(&db, &b, "bob", start + 900).unwrap();
        viewer_left(&db, &b, "bob", start + 900).unwrap();
        assert!(broadcasts::move_status(&db, &b, Status::Completed, start + 1800).unwrap());
        assert_eq!(rollups_remaining(&db).unwrap(), 1);
        let due = rollups_due(&db, 10).unwrap();
        assert_eq!(due, vec![("c1".to_string(), b.id.clone())]);
        let b = app::broadcasts::load(&db, "c1", &b.id, start + 1800).unwrap();
        assert!(roll_up(&db, &b, start + 2000).unwrap());
        assert!(!roll_up(&db, &b, start + 2001).unwrap(), "once");
        assert_eq!(rollups_remaining(&db).unwrap(), 0);
        let days = creator_days(&db, "c1", "ada", T0, T0 + 2 * 86_400).unwrap();
        assert_eq!(days.len(), 2);
        assert_eq!(
            (
                days[0].broadcasts,
                days[0].live_seconds,
                days[0].watch_seconds,
                days[0].peak_viewers
            ),
            (1, 600, 300, 9)
        );
        assert_eq!(
            (
                days[1].broadcasts,
                days[1].live_seconds,
                days[1].watch_seconds,
                days[1].messages
            ),
            (0, 1200, 300, 1)
        );
        let tenant = tenant_days(&db, "c1", T0, T0 + 2 * 86_400).unwrap();
        assert_eq!(tenant.len(), 2);
        assert_eq!(tenant[1].live_seconds, 1200);
        assert!(
            tenant_days(&db, "c2", T0, T0 + 2 * 86_400)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn share_links_open_one_broadcast_until_they_expire() {
        let db = testing::db();
        let b = live(&db, "ada", T0);
        let other = live(&db, "ada", T0);
        add_share(&db, &b, "h1", T0 + 900).unwrap();
        assert_eq!(
            shared(&db, "h1", &b.id, T0 + 899).unwrap().as_deref(),
            Some("c1")
        );
        assert_eq!(shared(&db, "h1", &other.id, T0).unwrap(), None);
        assert_eq!(shared(&db, "h2", &b.id, T0).unwrap(), None);
        assert_eq!(shared(&db, "h1", &b.id, T0 + 900).unwrap(), None);
        assert_eq!(prune_shares(&db, T0 + 900, 10).unwrap(), 1);
        let r = report(&db, &b, Granularity::Minute, T0 + 90).unwrap();
        assert_eq!((r.started, r.until, r.series.len()), (Some(T0), T0 + 90, 2));
    }

    #[test]
    fn new_and_active_users_count_once_a_day() {
        let db = testing::db();
        user_signed_up(&db, "c1", T0 + 5).unwrap();
        user_active(&db, "c1", "u1", T0 + 5).unwrap();
        user_active(&db, "c1", "u1", T0 + 50).unwrap();
        user_active(&db, "c1", "u2", T0 + 60).unwrap();
        user_active(&db, "c1", "u1", T0 + 86_400).unwrap();
        let days = tenant_days(&db, "c1", T0, T0 + 86_400).unwrap();
        assert_eq!((days[0].new_users, days[0].active_users), (1, 2));
        assert_eq!((days[1].new_users, days[1].active_users), (0, 1));
        assert_eq!(prune_active_users(&db, T0 + 86_400, 100).unwrap(), 2);
    }

    #[test]
    fn tenant_minutes_sum_over_broadcasts() {
        let db = testing::db();
        let one = live(&db, "ada", T0);
        let two = live(&db, "bea", T0);
        chat_message(&db, &one, "x", T0 + 1).unwrap();
        chat_message(&db, &two, "y", T0 + 2).unwrap();
        record_viewers(&db, &one, 5, T0 + 3).unwrap();
        record_viewers(&db, &two, 8, T0 + 3).unwrap();
        let minutes = tenant_minutes(&db, "c1", T0, T0 + 60).unwrap();
        assert_eq!(minutes.len(), 1);
        assert_eq!((minutes[0].messages, minutes[0].viewer_max), (2, 8));
        assert!(tenant_minutes(&db, "c2", T0, T0 + 60).unwrap().is_empty());
    }
}
