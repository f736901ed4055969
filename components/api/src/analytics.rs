//! Analytics reads and the roll-up job. Counting happens where things happen (viewer
//! reports, SFU webhooks, chat, reactions, follows) through `::store::analytics`;
//! these handlers only read the minute buckets and the daily rows.

use crate::ApiRoute;
use crate::access::{Viewer, check_can_watch};
use ::store::analytics::{self as store, DayRow, Report, too_many_points};
use ::store::app;
use ::store::broadcasts::{self as broadcast_store, Broadcast};
use ::store::{Db, cohosts, ingests};
use domain::analytics::{self as math, DAY, Granularity, PlaybackSummary, Point, Qoe, Totals};
use domain::broadcast::Status;
use domain::media::{Health, HealthSample};
use domain::{ApiError, ids, time};
use edge::answers::Progress;
use edge::endpoint;
use edge::spin::config;
use edge::spin::endpoint::{Json, NoBody, OneOf, Raw};
use edge::spin::http::{Actor, ActorCtx, Call, JobsCtx, ServerCtx, UserCtx};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Map, Value};
use spin_sdk::http::Response;
use std::collections::BTreeMap;

/// Broadcasts folded per roll-up call.
const ROLLUP_BATCH: i64 = 50;

/// A broadcast's analytics without the time series, as `broadcast.ended` webhook events
/// carry them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "BroadcastAnalyticsSummary")]
pub struct Summary {
    #[schemars(extend("format" = "uuid"))]
    broadcast_id: String,
    status: Status,
    #[schemars(extend("format" = "date-time"))]
    started_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    ended_at: Option<String>,
    /// From going live to the end, or to now while live; null if it never went live.
    duration_seconds: Option<i64>,
    /// The highest viewer count reported.
    peak_viewers: i64,
    /// The mean of the viewer counts reported.
    average_viewers: Option<f64>,
    viewer_reports: i64,
    #[schemars(range(min = 0))]
    chat_messages: i64,
    /// How many of each reaction it received.
    #[schemars(with = "BTreeMap<String, u64>")]
    reactions: Map<String, Value>,
    #[serde(flatten)]
    totals: Totals,
    /// The quality of experience of its HLS views.
    playback: PlaybackSummary,
}

/// A broadcast's analytics: summary, totals and its time series (JSON; CSV with
/// `Accept: text/csv`).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "BroadcastAnalytics")]
pub struct BroadcastAnalytics {
    #[serde(flatten)]
    summary: Summary,
    #[schemars(extend("enum" = BROADCAST_GRANULARITIES))]
    granularity: &'static str,
    timeseries: Vec<AnalyticsPoint>,
}

/// One interval of a broadcast's time series.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AnalyticsPoint")]
pub struct AnalyticsPoint {
    /// Where the interval starts.
    #[schemars(extend("format" = "date-time"))]
    time: String,
    /// Where the interval starts, in epoch seconds.
    time_epoch: i64,
    #[serde(flatten)]
    counts: Point,
    /// The RTMP ingest in this interval (its last health sample, with the health), or null
    /// when nothing was published then.
    ingest: Option<IntervalIngest>,
}

impl AnalyticsPoint {
    fn of(p: &Point, ingest: Option<IntervalIngest>) -> AnalyticsPoint {
        AnalyticsPoint {
            time: time::format_rfc3339(p.start),
            time_epoch: p.start,
            counts: p.clone().with_qoe(),
            ingest,
        }
    }
}

/// The RTMP ingest in an interval: its last health sample, and the health it showed.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "IntervalIngest")]
pub struct IntervalIngest {
    #[serde(flatten)]
    sample: HealthSample,
    health: Health,
}

/// The granularities of a broadcast's series.
const BROADCAST_GRANULARITIES: [&str; 3] = ["minute", "5m", "hour"];

/// JSON, or CSV with `Accept: text/csv`.
type JsonOrCsv<T> = OneOf<Json<T>, Raw>;

/// The analytics routes: a broadcast's, the creator's channel, the tenant's, and the
/// roll-up job.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/broadcasts/{id}/analytics",
        UserOrServer(broadcast),
        "Broadcast (analytics)",
        |op| op
            .errors(403, &["forbidden"])
            .errors(422, &["invalid_granularity"]),
    ),
    endpoint!(
        POST "/api/broadcasts/{id}/analytics/share",
        User(share),
        "Share (analytics)",
        |op| op.errors(403, &["forbidden"]),
    ),
    endpoint!(
        POST "/api/jobs/rollup-analytics",
        Jobs(rollup),
        "Rollup (analytics)"
    ),
    endpoint!(
        GET "/api/users/me/analytics",
        User(mine),
        "Mine (analytics)",
        |op| op.errors(422, &["invalid_granularity", "invalid_range"]),
    ),
    endpoint!(
        GET "/api/v1/analytics",
        Server(tenant),
        "Tenant (analytics)",
        |op| op.errors(
            422,
            &["invalid_granularity", "invalid_metric", "invalid_range"],
        ),
    ),
];

/// `?granularity=minute|5m|hour`: the owner, co-hosts with canAccessAnalytics, and the
/// tenant's server. A live broadcast answers its numbers so far.
fn broadcast(ctx: &ActorCtx, _: NoBody) -> Result<JsonOrCsv<BroadcastAnalytics>, ApiError> {
    let granularity = granularity(ctx, Granularity::Minute, &BROADCAST_GRANULARITIES)?;
    let db = ctx.db()?;
    let now = ctx.now();
    let b = app::broadcasts::load(&db, &ctx.tenant.client_id, ctx.param("id"), now)?;
    if let Actor::User(user) = &ctx.actor {
        let allowed = b.is_owned_by(&user.id)
            || cohosts::of_user(&db, &b, &user.id)?
                .is_some_and(|c| c.is_active() && c.permissions.can_access_analytics);
        if !allowed {
            check_can_watch(&db, &b, Viewer::User(&user.id), now)?;
            return Err(ApiError::forbidden(
                "only the owner or a co-host with canAccessAnalytics sees analytics",
            ));
        }
    }
    let report = store::report(&db, &b, granularity, now)?;
    if wants_csv(ctx) {
        return Ok(OneOf::Second(Raw(csv_response(&report.series, &b.id))));
    }
    let ingest = ingest_health(&db, &b, &report)?;
    let analytics = BroadcastAnalytics {
        summary: summary_of(&db, &b, &report)?,
        granularity: report.granularity.as_str(),
        timeseries: report
            .series
            .iter()
            .zip(ingest)
            .map(|(p, ingest)| AnalyticsPoint::of(p, ingest))
            .collect(),
    };
    Ok(OneOf::First(Json(analytics)))
}

/// The RTMP ingest's health in each interval of the series (the last sample the media
/// server reported in it: health, bitrate, frame rate, keyframe interval, resolution), or
/// `None` when nothing was published then.
fn ingest_health(
    db: &Db,
    b: &Broadcast,
    report: &Report,
) -> Result<Vec<Option<IntervalIngest>>, ApiError> {
    let step = report.granularity.seconds();
    let (Some(first), Some(last)) = (report.series.first(), report.series.last()) else {
        return Ok(Vec::new());
    };
    let minutes = ingests::health_minutes(db, b, first.start, last.start + step - 1)?;
    Ok(report
        .series
        .iter()
        .map(|p| {
            minutes
                .iter()
                .rev()
                .find(|m| m.minute >= p.start && m.minute < p.start + step)
                .map(|m| IntervalIngest {
                    sample: m.sample.clone(),
                    health: m.health,
                })
        })
        .collect())
}

/// A broadcast's analytics without the time series, as `broadcast.ended` webhook events
/// carry them.
pub fn summary(db: &Db, b: &Broadcast, now: i64) -> Result<Summary, ApiError> {
    let report = store::report(db, b, Granularity::Minute, now)?;
    summary_of(db, b, &report)
}

/// The summary of `report`: the first summary fields, then the totals.
fn summary_of(db: &Db, b: &Broadcast, report: &Report) -> Result<Summary, ApiError> {
    let reactions = broadcast_store::reaction_counts(db, &[&b.id])?
        .remove(&b.id)
        .unwrap_or_default();
    Ok(Summary {
        broadcast_id: b.id.clone(),
        status: b.status,
        started_at: b.started_at.clone(),
        ended_at: b.ended_at.clone(),
        duration_seconds: report.started.map(|s| report.until - s),
        // The first summary fields, kept as they were.
        peak_viewers: b.peak_viewers,
        average_viewers: math::mean(b.viewer_total, b.viewer_reports),
        viewer_reports: b.viewer_reports,
        chat_messages: report.totals.messages,
        reactions,
        totals: report.totals.clone(),
        playback: report
            .totals
            .qoe
            .summary(::store::views::renditions_of(db, b)?),
    })
}

/// How long a dashboard link opens its broadcast's analytics.
const SHARE_TTL_SECS: i64 = 15 * 60;

/// A read-only link to a broadcast's dashboard page.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AnalyticsShare")]
pub struct Share {
    /// The token in the link.
    #[schemars(extend("pattern" = "^an_"))]
    token: String,
    /// The dashboard page, with the token.
    url: String,
    #[schemars(extend("format" = "date-time"))]
    expires_at: String,
}

/// The owner's read-only link to the broadcast's dashboard page, for that broadcast only,
/// valid 15 minutes.
fn share(ctx: &UserCtx, _: NoBody) -> Result<Json<Share>, ApiError> {
    let db = ctx.db()?;
    let b = crate::access::load_owned(ctx, &db)?;
    let token = format!("an_{}", ids::random_base62(40));
    let expires_at = ctx.now() + SHARE_TTL_SECS;
    store::add_share(&db, &b, &ids::sha256_hex(token.as_bytes()), expires_at)?;
    let base = config::var_or("base_url", "http://127.0.0.1:3000");
    let url = format!(
        "{}/analytics/broadcasts/{}?token={token}",
        base.trim_end_matches('/'),
        b.id
    );
    Ok(Json(Share {
        token,
        url,
        expires_at: time::format_rfc3339(expires_at),
    }))
}

/// The columns of a broadcast's time series, in CSV order (JSON uses the same names).
const SERIES_COLUMNS: [&str; 23] = [
    "time",
    "viewersMin",
    "viewersMax",
    "viewersMean",
    "viewerReports",
    "watchSeconds",
    "joins",
    "leaves",
    "newViewers",
    "messages",
    "newChatters",
    "reactions",
    "gifts",
    "giftTokens",
    "follows",
    "subscriptions",
    "views",
    "playedSeconds",
    "rebufferSeconds",
    "rebufferPercentage",
    "startupTimeP50Ms",
    "playbackFailures",
    "timeEpoch",
];

/// A JSON value as a CSV field: numbers and text as they are, null as empty.
fn field(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn csv_response(points: &[Point], name: &str) -> Response {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            let point = serde_json::to_value(AnalyticsPoint::of(p, None)).unwrap_or_default();
            SERIES_COLUMNS
                .iter()
                .map(|c| field(point.get(*c)))
                .collect()
        })
        .collect();
    csv_body(&math::csv(&SERIES_COLUMNS, &rows), name)
}

fn csv_body(text: &str, name: &str) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/csv; charset=utf-8")
        .header(
            "content-disposition",
            format!("attachment; filename=\"analytics-{name}.csv\""),
        )
        .body(text.as_bytes().to_vec())
        .build()
}

fn wants_csv(call: &Call) -> bool {
    call.header("accept")
        .is_some_and(|a| a.to_ascii_lowercase().contains("text/csv"))
}

/// The `granularity` query value, one of `allowed`; `default` when absent.
fn granularity(
    call: &Call,
    default: Granularity,
    allowed: &[&str],
) -> Result<Granularity, ApiError> {
    match call.query_value("granularity") {
        None => Ok(default),
        Some(g) if allowed.contains(&g.as_str()) => {
            Granularity::parse(&g).ok_or_else(|| bad_granularity(allowed))
        }
        Some(_) => Err(bad_granularity(allowed)),
    }
}

fn bad_granularity(allowed: &[&str]) -> ApiError {
    let mut e = ApiError::new(
        422,
        "invalid_granularity",
        format!("granularity must be one of {}", allowed.join(", ")),
    );
    e.extra.insert("allowed".into(), allowed.into());
    e
}

/// `[from, to)` from the query: dates (`2026-11-23`) or RFC 3339 instants; `to` defaults
/// to now, `from` to `default_span` before `to`.
fn range(call: &Call, default_span: i64) -> Result<(i64, i64), ApiError> {
    let read = |key: &str| -> Result<Option<i64>, ApiError> {
        match call.query_value(key) {
            None => Ok(None),
            Some(v) => math::parse_instant(&v).map(Some).ok_or_else(|| {
                ApiError::new(
                    422,
                    "invalid_range",
                    format!("{key} must be a date (YYYY-MM-DD) or an RFC 3339 time"),
                )
            }),
        }
    };
    let to = read("to")?.unwrap_or_else(|| call.now());
    let from = read("from")?.unwrap_or(to - default_span);
    if from >= to {
        return Err(ApiError::new(
            422,
            "invalid_range",
            "from must be before to",
        ));
    }
    Ok((from, to))
}

/// The figures of a channel (a creator's or a tenant's) per interval.
#[derive(Debug, Clone, Default)]
struct Period {
    start: i64,
    day: DayRow,
    /// `None` where the granularity cannot say (users per hour).
    users: Option<(i64, i64)>,
}

/// Day rows folded into a dense series of `granularity` (day or week) over `[from, to)`.
fn fold_days(rows: &[DayRow], granularity: Granularity, from: i64, to: i64) -> Vec<Period> {
    let mut periods = Vec::new();
    let mut start = granularity.start_of(from);
    let mut next = rows.iter().peekable();
    while start < to {
        let end = start + granularity.seconds();
        let mut sum = DayRow {
            day: start,
            ..DayRow::default()
        };
        while let Some(d) = next.next_if(|d| d.day < end) {
            if d.day < start {
                continue;
            }
            sum.broadcasts += d.broadcasts;
            sum.live_seconds += d.live_seconds;
            sum.watch_seconds += d.watch_seconds;
            sum.peak_viewers = sum.peak_viewers.max(d.peak_viewers);
            sum.unique_viewers += d.unique_viewers;
            sum.messages += d.messages;
            sum.chatters += d.chatters;
            sum.reactions += d.reactions;
            sum.gifts += d.gifts;
            sum.gift_tokens += d.gift_tokens;
            sum.follows += d.follows;
            sum.subscriptions += d.subscriptions;
            sum.new_users += d.new_users;
            sum.active_users += d.active_users;
            sum.qoe.add(&d.qoe);
        }
        let users = Some((sum.new_users, sum.active_users));
        periods.push(Period {
            start,
            day: sum,
            users,
        });
        start = end;
    }
    periods
}

fn minutes(seconds: i64) -> f64 {
    (seconds as f64 / 60.0 * 100.0).round() / 100.0
}

/// Every metric a channel series can carry, and how to read it from a period.
const CHANNEL_METRICS: [&str; 18] = [
    "broadcasts",
    "liveMinutes",
    "watchMinutes",
    "peakConcurrentViewers",
    "uniqueViewers",
    "messages",
    "chatters",
    "reactions",
    "gifts",
    "giftTokens",
    "followsGained",
    "subscriptionsGained",
    "views",
    "startupTimeP50Ms",
    "startupTimeP95Ms",
    "rebufferPercentage",
    "playbackFailures",
    "newUsers",
];
/// Metrics that are not sums: their total is computed from the whole range's counts.
const QOE_RATIOS: [&str; 3] = ["startupTimeP50Ms", "startupTimeP95Ms", "rebufferPercentage"];
/// Only for the tenant.
const ACTIVE_USERS: &str = "activeUsers";

fn metric(p: &Period, name: &str) -> Value {
    let d = &p.day;
    match name {
        "broadcasts" => d.broadcasts.into(),
        "liveMinutes" => minutes(d.live_seconds).into(),
        "watchMinutes" => minutes(d.watch_seconds).into(),
        "peakConcurrentViewers" => d.peak_viewers.into(),
        "uniqueViewers" => d.unique_viewers.into(),
        "messages" => d.messages.into(),
        "chatters" => d.chatters.into(),
        "reactions" => d.reactions.into(),
        "gifts" => d.gifts.into(),
        "giftTokens" => d.gift_tokens.into(),
        "followsGained" => d.follows.into(),
        "subscriptionsGained" => d.subscriptions.into(),
        "views" | "playbackFailures" | "startupTimeP50Ms" | "startupTimeP95Ms"
        | "rebufferPercentage" => qoe_metric(&d.qoe, name),
        "newUsers" => p.users.map_or(Value::Null, |u| u.0.into()),
        "activeUsers" => p.users.map_or(Value::Null, |u| u.1.into()),
        _ => Value::Null,
    }
}

/// A quality-of-experience metric of `q`.
fn qoe_metric(q: &Qoe, name: &str) -> Value {
    let s = q.summary(BTreeMap::new());
    match name {
        "views" => s.views.into(),
        "playbackFailures" => s.playback_failures.into(),
        "startupTimeP50Ms" => s.startup_time_p50_ms.into(),
        "startupTimeP95Ms" => s.startup_time_p95_ms.into(),
        "rebufferPercentage" => s.rebuffer_percentage.into(),
        _ => Value::Null,
    }
}

/// A channel's metrics per period, with their totals.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "ChannelAnalytics")]
pub struct ChannelAnalytics {
    #[schemars(extend("format" = "date-time"))]
    from: String,
    #[schemars(extend("format" = "date-time"))]
    to: String,
    #[schemars(extend("enum" = ["hour", "day", "week"]))]
    granularity: &'static str,
    /// The metrics each period carries, in order.
    #[schemars(schema_with = "metric_names_schema")]
    metrics: Vec<&'static str>,
    /// Each metric over the whole range: the highest for peakConcurrentViewers, the
    /// percentiles and the rebuffer percentage of the whole range, else the sum; null where
    /// the granularity cannot say (users per hour).
    #[schemars(with = "BTreeMap<String, Option<f64>>")]
    totals: Map<String, Value>,
    timeseries: Vec<ChannelPoint>,
    /// The tenant's HLS quality of experience over the whole range, with failures by
    /// reason and views by rendition (the tenant's route only).
    #[serde(skip_serializing_if = "Option::is_none")]
    playback: Option<PlaybackSummary>,
}

/// One period of a channel's series: where it starts, and each metric asked for (null
/// where the granularity cannot say).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "ChannelAnalyticsPoint")]
pub struct ChannelPoint {
    #[schemars(extend("format" = "date-time"))]
    time: String,
    #[serde(flatten)]
    #[schemars(with = "BTreeMap<String, Option<f64>>")]
    metrics: Map<String, Value>,
}

fn metric_names_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = CHANNEL_METRICS
        .iter()
        .copied()
        .chain([ACTIVE_USERS])
        .collect();
    json_schema!({ "type": "array", "items": { "enum": names } })
}

/// Answers a channel series as JSON ([`ChannelAnalytics`]) or CSV.
/// `renditions`: the views per rendition of the range, when the answer carries its
/// `playback` summary.
fn channel_answer(
    call: &Call,
    periods: &[Period],
    metrics: Vec<&'static str>,
    granularity: Granularity,
    (from, to): (i64, i64),
    name: &str,
    renditions: Option<BTreeMap<String, i64>>,
) -> Result<JsonOrCsv<ChannelAnalytics>, ApiError> {
    if wants_csv(call) {
        let mut header = vec!["time"];
        header.extend(&metrics);
        let rows: Vec<Vec<String>> = periods
            .iter()
            .map(|p| {
                let mut row = vec![time::format_rfc3339(p.start)];
                row.extend(metrics.iter().map(|m| field(Some(&metric(p, m)))));
                row
            })
            .collect();
        return Ok(OneOf::Second(Raw(csv_body(
            &math::csv(&header, &rows),
            name,
        ))));
    }
    let timeseries = periods
        .iter()
        .map(|p| ChannelPoint {
            time: time::format_rfc3339(p.start),
            metrics: metrics
                .iter()
                .map(|m| (m.to_string(), metric(p, m)))
                .collect(),
        })
        .collect();
    let mut totals = Map::new();
    let mut all = Qoe::default();
    for p in periods {
        all.add(&p.day.qoe);
    }
    for m in &metrics {
        let values = periods.iter().map(|p| metric(p, m));
        let total = if QOE_RATIOS.contains(m) {
            qoe_metric(&all, m)
        } else if *m == "peakConcurrentViewers" {
            values.filter_map(|v| v.as_i64()).max().unwrap_or(0).into()
        } else if m.ends_with("Minutes") {
            let sum: f64 = values.filter_map(|v| v.as_f64()).sum();
            ((sum * 100.0).round() / 100.0).into()
        } else if periods.iter().any(|p| p.users.is_none()) && m.ends_with("Users") {
            Value::Null
        } else {
            values.filter_map(|v| v.as_i64()).sum::<i64>().into()
        };
        totals.insert((*m).into(), total);
    }
    Ok(OneOf::First(Json(ChannelAnalytics {
        from: time::format_rfc3339(from),
        to: time::format_rfc3339(to),
        granularity: granularity.as_str(),
        metrics,
        totals,
        timeseries,
        playback: renditions.map(|r| all.summary(r)),
    })))
}

/// `?from&to&granularity=day|week`: the signed-in creator's channel from the daily rows
/// (broadcasts count once the roll-up job has folded them).
fn mine(ctx: &UserCtx, _: NoBody) -> Result<JsonOrCsv<ChannelAnalytics>, ApiError> {
    let granularity = granularity(ctx, Granularity::Day, &["day", "week"])?;
    let (from, to) = range(ctx, 30 * DAY)?;
    if math::points_between(from, to, granularity) > math::MAX_POINTS {
        return Err(too_many_points());
    }
    let db = ctx.db()?;
    let first = granularity.start_of(from);
    let rows = store::creator_days(&db, &ctx.tenant.client_id, &ctx.user.id, first, to)?;
    let periods = fold_days(&rows, granularity, from, to);
    let metrics: Vec<&'static str> = CHANNEL_METRICS
        .iter()
        .copied()
        .filter(|m| *m != "newUsers")
        .collect();
    channel_answer(
        ctx,
        &periods,
        metrics,
        granularity,
        (from, to),
        "channel",
        None,
    )
}

/// `?from&to&granularity=hour|day&metrics=a,b`: the tenant over time. Days come from the
/// daily rows (finished broadcasts, once rolled up, and the users); hours from the minute
/// buckets of every broadcast (live ones included), where new and active users are not
/// known (null).
fn tenant(ctx: &ServerCtx, _: NoBody) -> Result<JsonOrCsv<ChannelAnalytics>, ApiError> {
    let granularity = granularity(ctx, Granularity::Day, &["hour", "day"])?;
    let default_span = match granularity {
        Granularity::Hour => DAY,
        _ => 30 * DAY,
    };
    let (from, to) = range(ctx, default_span)?;
    if math::points_between(from, to, granularity) > math::MAX_POINTS {
        return Err(too_many_points());
    }
    let metrics = requested_metrics(ctx)?;
    let db = ctx.db()?;
    let client = &ctx.tenant.client_id;
    let first = granularity.start_of(from);
    let periods = match granularity {
        Granularity::Hour => hourly(&db, client, first, to.min(ctx.now()).max(first), to)?,
        _ => fold_days(
            &store::tenant_days(&db, client, first, to)?,
            granularity,
            from,
            to,
        ),
    };
    let renditions = ::store::views::renditions_of_tenant(&db, client, from, to)?;
    channel_answer(
        ctx,
        &periods,
        metrics,
        granularity,
        (from, to),
        "tenant",
        Some(renditions),
    )
}

/// The `metrics` query value: a comma-separated subset of the tenant metrics (all when
/// absent).
fn requested_metrics(call: &Call) -> Result<Vec<&'static str>, ApiError> {
    let all: Vec<&'static str> = CHANNEL_METRICS
        .iter()
        .copied()
        .chain([ACTIVE_USERS])
        .collect();
    let Some(raw) = call.query_value("metrics") else {
        return Ok(all);
    };
    let mut chosen = Vec::new();
    for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let known = all.iter().find(|m| **m == name).ok_or_else(|| {
            let mut e = ApiError::new(422, "invalid_metric", format!("unknown metric {name:?}"));
            e.extra.insert("allowed".into(), all.clone().into());
            e
        })?;
        if !chosen.contains(known) {
            chosen.push(*known);
        }
    }
    if chosen.is_empty() {
        return Ok(all);
    }
    Ok(chosen)
}

/// The tenant per hour over `[first, to)` from the minute buckets of all its broadcasts,
/// live ones up to `now_cap` (sessions open before `first` carried in).
fn hourly(
    db: &Db,
    client: &str,
    first: i64,
    now_cap: i64,
    to: i64,
) -> Result<Vec<Period>, ApiError> {
    let mut buckets = store::tenant_minutes(db, client, first, to)?;
    let open = store::tenant_sessions_open_at(db, client, first)?;
    if open != 0 {
        buckets.push(math::Bucket {
            minute: first - math::MINUTE,
            joins: open,
            ..math::Bucket::default()
        });
    }
    let points = math::fold(&buckets, Granularity::Hour, first, to);
    let capped = math::fold(&buckets, Granularity::Hour, first, now_cap.max(first + 1));
    let lives = store::live_spans(db, client, first, to)?;
    Ok(points
        .iter()
        .map(|p| {
            let end = p.start + Granularity::Hour.seconds();
            let watch = capped
                .iter()
                .find(|c| c.start == p.start)
                .map_or(0, |c| c.watch_seconds);
            let live_seconds = lives
                .iter()
                .map(|(s, e)| math::overlap(*s, e.unwrap_or(now_cap), p.start, end))
                .sum();
            let broadcasts = lives
                .iter()
                .filter(|(s, _)| *s >= p.start && *s < end)
                .count() as i64;
            Period {
                start: p.start,
                day: DayRow {
                    broadcasts,
                    live_seconds,
                    watch_seconds: watch,
                    ..store::counts_of(p)
                },
                users: None,
            }
        })
        .collect())
}

/// What a roll-up call did.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "RollupJobReport")]
pub struct RollupReport {
    #[schemars(extend("const" = "rollup-analytics"))]
    job: &'static str,
    #[serde(flatten)]
    progress: Progress,
    /// HLS views silent for 30 s that this call closed (at their last beacon).
    #[serde(rename = "silentViewsClosed")]
    silent_views_closed: i64,
}

/// HLS views closed per roll-up call (more wait for the next call).
const SILENT_VIEWS_BATCH: i64 = 500;

/// Folds a batch of finished broadcasts into the daily rows per creator and per tenant.
/// Idempotent: a broadcast is folded once.
fn rollup(ctx: &JobsCtx, _: NoBody) -> Result<Json<RollupReport>, ApiError> {
    let db = ctx.db()?;
    let now = ctx.now();
    // Views that stopped beaconing end at their last beacon, before their broadcast is
    // folded.
    let (silent_views_closed, more_views) =
        ::store::views::close_silent(&db, ctx.now_millis(), SILENT_VIEWS_BATCH)?;
    let mut done = 0;
    for (client, id) in store::rollups_due(&db, ROLLUP_BATCH)? {
        let b = app::broadcasts::load(&db, &client, &id, now)?;
        if store::roll_up(&db, &b, now)? {
            done += 1;
        }
    }
    let progress = Progress {
        done,
        remaining: store::rollups_remaining(&db)? + i64::from(more_views),
    };
    Ok(Json(RollupReport {
        job: "rollup-analytics",
        progress,
        silent_views_closed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_fold_into_monday_weeks() {
        let monday = time::parse_rfc3339("2026-11-23T00:00:00Z").unwrap();
        let row = |day: i64, live: i64, peak: i64| DayRow {
            day,
            live_seconds: live,
            peak_viewers: peak,
            broadcasts: 1,
            ..DayRow::default()
        };
        let rows = [
            row(monday - DAY, 60, 3),
            row(monday, 120, 5),
            row(monday + 6 * DAY, 180, 2),
            row(monday + 7 * DAY, 240, 9),
        ];
        let weeks = fold_days(&rows, Granularity::Week, monday - DAY, monday + 8 * DAY);
        assert_eq!(weeks.len(), 3);
        assert_eq!(weeks[0].start, monday - 7 * DAY);
        assert_eq!(
            (weeks[1].day.broadcasts, weeks[1].day.live_seconds),
            (2, 300)
        );
        assert_eq!(weeks[1].day.peak_viewers, 5);
        assert_eq!(weeks[2].day.peak_viewers, 9);
        let days = fold_days(&rows, Granularity::Day, monday, monday + 2 * DAY);
        assert_eq!(days.len(), 2);
        assert_eq!(days[0].day.live_seconds, 120);
        assert_eq!(days[1].day.live_seconds, 0);
        assert_eq!(minutes(90), 1.5);
    }
}
