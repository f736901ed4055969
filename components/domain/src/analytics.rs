//! Analytics arithmetic: minute buckets folded into coarser intervals, watch time from
//! session starts and ends, means, and UTC day and week boundaries. No I/O.
//!
//! Watch time is exact without a row per session: a bucket keeps how many sessions started
//! and ended in it and the sum of those instants, so the seconds watched inside any
//! interval `[a, b)` are `open(a) * (b - a) + Σ starts in [a,b) (b - t) - Σ ends in [a,b) (b - t)`,
//! where `open(a)` is the number of sessions open at `a` (starts minus ends before it).

use crate::views::{self as qoe_rules, FAILURE_REASONS, STARTUP_BUCKETS};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;

pub const MINUTE: i64 = 60;
pub const HOUR: i64 = 3600;
pub const DAY: i64 = 86_400;
pub const WEEK: i64 = 7 * DAY;
/// 1970-01-05, the first Monday after the epoch: weeks start on Mondays (ISO 8601).
const FIRST_MONDAY: i64 = 4 * DAY;
/// The most points one time series answers.
pub const MAX_POINTS: i64 = 5000;

/// The start of the minute `t` falls in.
pub fn minute_of(t: i64) -> i64 {
    t.div_euclid(MINUTE) * MINUTE
}

/// Midnight UTC of the day `t` falls in.
pub fn day_of(t: i64) -> i64 {
    t.div_euclid(DAY) * DAY
}

/// The width of a time series' intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Minute,
    FiveMinutes,
    Hour,
    Day,
    Week,
}

impl Granularity {
    /// Parses the `granularity` query value.
    pub fn parse(s: &str) -> Option<Granularity> {
        Some(match s {
            "minute" => Granularity::Minute,
            "5m" => Granularity::FiveMinutes,
            "hour" => Granularity::Hour,
            "day" => Granularity::Day,
            "week" => Granularity::Week,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Minute => "minute",
            Granularity::FiveMinutes => "5m",
            Granularity::Hour => "hour",
            Granularity::Day => "day",
            Granularity::Week => "week",
        }
    }

    pub fn seconds(self) -> i64 {
        match self {
            Granularity::Minute => MINUTE,
            Granularity::FiveMinutes => 5 * MINUTE,
            Granularity::Hour => HOUR,
            Granularity::Day => DAY,
            Granularity::Week => WEEK,
        }
    }

    /// The start of the interval `t` falls in (weeks start on Monday, 00:00 UTC).
    pub fn start_of(self, t: i64) -> i64 {
        match self {
            Granularity::Week => (t - FIRST_MONDAY).div_euclid(WEEK) * WEEK + FIRST_MONDAY,
            other => t.div_euclid(other.seconds()) * other.seconds(),
        }
    }
}

/// How many intervals of `granularity` cover `[from, to)`.
pub fn points_between(from: i64, to: i64, granularity: Granularity) -> i64 {
    if to <= from {
        return 0;
    }
    let first = granularity.start_of(from);
    (to - first + granularity.seconds() - 1) / granularity.seconds()
}

/// One broadcast's counts for one minute, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bucket {
    pub minute: i64,
    pub viewer_reports: i64,
    pub viewer_sum: i64,
    pub viewer_min: Option<i64>,
    pub viewer_max: i64,
    pub joins: i64,
    pub join_time_sum: i64,
    pub leaves: i64,
    pub leave_time_sum: i64,
    pub new_viewers: i64,
    pub messages: i64,
    pub new_chatters: i64,
    pub reactions: i64,
    pub gifts: i64,
    pub gift_tokens: i64,
    pub follows: i64,
    pub subscriptions: i64,
    pub qoe: Qoe,
}

/// The quality-of-experience counts of HLS views (`POST /api/views`) in a bucket, a day
/// row or any sum of them: each adds up, the startup times as a fixed histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Qoe {
    /// Views seen for the first time.
    pub views: i64,
    pub played_ms: i64,
    pub rebuffer_ms: i64,
    pub rebuffers: i64,
    /// Views whose startup time was reported, and the sum of those times.
    pub startups: i64,
    pub startup_ms_sum: i64,
    /// Startup times per bucket of [`qoe_rules::STARTUP_EDGES_MS`].
    pub startup: [i64; STARTUP_BUCKETS],
    /// Fatal failures per reason of [`FAILURE_REASONS`].
    pub failures: [i64; FAILURE_REASONS.len()],
}

/// The stored columns of [`Qoe`], in the order of [`Qoe::values`].
pub const QOE_COLUMNS: [&str; 24] = [
    "views",
    "played_ms",
    "rebuffer_ms",
    "rebuffers",
    "startups",
    "startup_ms_sum",
    "startup_h0",
    "startup_h1",
    "startup_h2",
    "startup_h3",
    "startup_h4",
    "startup_h5",
    "startup_h6",
    "startup_h7",
    "startup_h8",
    "startup_h9",
    "startup_h10",
    "startup_h11",
    "startup_h12",
    "failures_network",
    "failures_media",
    "failures_manifest",
    "failures_not_allowed",
    "failures_other",
];

impl Qoe {
    /// Its counts in the order of [`QOE_COLUMNS`].
    pub fn values(&self) -> Vec<i64> {
        let mut v = vec![
            self.views,
            self.played_ms,
            self.rebuffer_ms,
            self.rebuffers,
            self.startups,
            self.startup_ms_sum,
        ];
        v.extend(self.startup);
        v.extend(self.failures);
        v
    }

    /// The counts read in the order of [`QOE_COLUMNS`] (missing ones are zero).
    pub fn from_values(v: &[i64]) -> Qoe {
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        let mut q = Qoe {
            views: at(0),
            played_ms: at(1),
            rebuffer_ms: at(2),
            rebuffers: at(3),
            startups: at(4),
            startup_ms_sum: at(5),
            ..Qoe::default()
        };
        for (i, n) in q.startup.iter_mut().enumerate() {
            *n = at(6 + i);
        }
        for (i, n) in q.failures.iter_mut().enumerate() {
            *n = at(6 + STARTUP_BUCKETS + i);
        }
        q
    }

    pub fn add(&mut self, o: &Qoe) {
        self.views += o.views;
        self.played_ms += o.played_ms;
        self.rebuffer_ms += o.rebuffer_ms;
        self.rebuffers += o.rebuffers;
        self.startups += o.startups;
        self.startup_ms_sum += o.startup_ms_sum;
        for (a, b) in self.startup.iter_mut().zip(o.startup) {
            *a += b;
        }
        for (a, b) in self.failures.iter_mut().zip(o.failures) {
            *a += b;
        }
    }

    pub fn playback_failures(&self) -> i64 {
        self.failures.iter().sum()
    }

    /// Its figures as the API answers them; `views_by_rendition` is the caller's (it is
    /// read from the views, not from buckets).
    pub fn summary(&self, views_by_rendition: BTreeMap<String, i64>) -> PlaybackSummary {
        PlaybackSummary {
            views: self.views,
            played_seconds: seconds(self.played_ms),
            rebuffer_seconds: seconds(self.rebuffer_ms),
            rebuffer_count: self.rebuffers,
            rebuffer_percentage: qoe_rules::rebuffer_percentage(self.played_ms, self.rebuffer_ms),
            startup_time_p50_ms: qoe_rules::percentile(&self.startup, 0.5),
            startup_time_p95_ms: qoe_rules::percentile(&self.startup, 0.95),
            startup_time_mean_ms: mean(self.startup_ms_sum, self.startups)
                .map(|m| m.round() as i64),
            playback_failures: self.playback_failures(),
            failures_by_reason: FAILURE_REASONS
                .iter()
                .zip(self.failures)
                .map(|(r, n)| (r.to_string(), n))
                .collect(),
            views_by_rendition,
        }
    }
}

/// Milliseconds as seconds, to the millisecond.
fn seconds(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

/// Quality of experience of HLS playback, as the player's view beacons report it (see the
/// player guide, "Counting viewers").
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "PlaybackQuality")]
pub struct PlaybackSummary {
    /// Views (a tab's playback; a reload is the same view).
    #[schemars(range(min = 0))]
    pub views: i64,
    /// Seconds of video played, over every view.
    #[schemars(range(min = 0))]
    pub played_seconds: f64,
    /// Seconds stalled after the first frame, over every view.
    #[schemars(range(min = 0))]
    pub rebuffer_seconds: f64,
    /// Stalls after the first frame.
    #[schemars(range(min = 0))]
    pub rebuffer_count: i64,
    /// rebufferSeconds / (playedSeconds + rebufferSeconds), in percent; null with neither.
    pub rebuffer_percentage: Option<f64>,
    /// Time from asking for the stream to the first frame: median and 95th percentile (ms,
    /// from a fixed histogram: exact to within its bucket), and mean; null without any.
    pub startup_time_p50_ms: Option<i64>,
    pub startup_time_p95_ms: Option<i64>,
    pub startup_time_mean_ms: Option<i64>,
    /// Fatal playback failures, and per reason (every reason, zero included).
    #[schemars(range(min = 0))]
    pub playback_failures: i64,
    pub failures_by_reason: BTreeMap<String, i64>,
    /// Views per the rendition they play (last reported; `unknown` before any).
    pub views_by_rendition: BTreeMap<String, i64>,
}

/// The counts of one interval of a time series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    /// Epoch seconds where the interval starts.
    #[serde(skip)]
    pub start: i64,
    /// Concurrent viewers reported in the interval: lowest, highest, mean; none without
    /// reports.
    pub viewers_min: Option<i64>,
    pub viewers_max: Option<i64>,
    pub viewers_mean: Option<f64>,
    #[schemars(range(min = 0))]
    pub viewer_reports: i64,
    /// Seconds watched in the interval, over all viewer sessions.
    #[schemars(range(min = 0))]
    pub watch_seconds: i64,
    #[schemars(range(min = 0))]
    pub joins: i64,
    #[schemars(range(min = 0))]
    pub leaves: i64,
    /// Viewers seen for the first time in the broadcast.
    #[schemars(range(min = 0))]
    pub new_viewers: i64,
    #[schemars(range(min = 0))]
    pub messages: i64,
    /// Users who chatted for the first time in the broadcast.
    #[schemars(range(min = 0))]
    pub new_chatters: i64,
    #[schemars(range(min = 0))]
    pub reactions: i64,
    #[schemars(range(min = 0))]
    pub gifts: i64,
    #[schemars(range(min = 0))]
    pub gift_tokens: i64,
    #[schemars(range(min = 0))]
    pub follows: i64,
    #[schemars(range(min = 0))]
    pub subscriptions: i64,
    /// HLS views seen for the first time in the interval.
    #[schemars(range(min = 0))]
    pub views: i64,
    /// Seconds of HLS video played and stalled in the interval, and the stalled share in
    /// percent (null with neither).
    #[schemars(range(min = 0))]
    pub played_seconds: f64,
    #[schemars(range(min = 0))]
    pub rebuffer_seconds: f64,
    pub rebuffer_percentage: Option<f64>,
    /// Median startup time of the views that started playing in the interval (ms).
    pub startup_time_p50_ms: Option<i64>,
    /// Fatal playback failures in the interval.
    #[schemars(range(min = 0))]
    pub playback_failures: i64,
    /// The interval's quality-of-experience counts, which the figures above come from.
    #[serde(skip)]
    #[schemars(skip)]
    pub qoe: Qoe,
}

impl Point {
    fn add(&mut self, b: &Bucket) {
        if b.viewer_reports > 0 {
            self.viewers_min = Some(match (self.viewers_min, b.viewer_min) {
                (Some(a), Some(m)) => a.min(m),
                (a, m) => a.or(m).unwrap_or(0),
            });
            self.viewers_max = Some(self.viewers_max.unwrap_or(0).max(b.viewer_max));
            self.viewer_reports += b.viewer_reports;
        }
        self.joins += b.joins;
        self.leaves += b.leaves;
        self.new_viewers += b.new_viewers;
        self.messages += b.messages;
        self.new_chatters += b.new_chatters;
        self.reactions += b.reactions;
        self.gifts += b.gifts;
        self.gift_tokens += b.gift_tokens;
        self.follows += b.follows;
        self.subscriptions += b.subscriptions;
        self.qoe.add(&b.qoe);
    }

    /// Sets the figures read from [`Point::qoe`] (what the API answers; the pages'
    /// dashboard does not show them, so [`fold`] leaves them to the caller).
    pub fn with_qoe(mut self) -> Point {
        let q = self.qoe;
        self.views = q.views;
        self.played_seconds = seconds(q.played_ms);
        self.rebuffer_seconds = seconds(q.rebuffer_ms);
        self.rebuffer_percentage = qoe_rules::rebuffer_percentage(q.played_ms, q.rebuffer_ms);
        self.startup_time_p50_ms = qoe_rules::percentile(&q.startup, 0.5);
        self.playback_failures = q.playback_failures();
        self
    }
}

/// A mean, `None` for no samples.
pub fn mean(sum: i64, count: i64) -> Option<f64> {
    (count > 0).then(|| sum as f64 / count as f64)
}

/// Folds one broadcast's buckets (any order) into a dense series of `granularity` intervals
/// from the interval holding `from` up to `until` (exclusive: the end of the broadcast, or
/// now while it is live). Sessions still open at `until` count up to `until`. Buckets
/// before `from` only carry their open sessions in; buckets at or after `until` are ignored.
pub fn fold(buckets: &[Bucket], granularity: Granularity, from: i64, until: i64) -> Vec<Point> {
    let mut sorted: Vec<&Bucket> = buckets.iter().filter(|b| b.minute < until).collect();
    sorted.sort_by_key(|b| b.minute);
    let mut points = Vec::new();
    let mut open = 0i64;
    let mut next = sorted.iter().peekable();
    // Sessions opened before the series starts.
    let first = granularity.start_of(from);
    while let Some(b) = next.next_if(|b| b.minute < first) {
        open += b.joins - b.leaves;
    }
    let mut start = first;
    while start < until {
        let end = (start + granularity.seconds()).min(until);
        let mut point = Point {
            start,
            ..Point::default()
        };
        let (mut viewer_sum, mut starts_left, mut ends_left) = (0i64, 0i64, 0i64);
        let open_at_start = open;
        while let Some(b) = next.next_if(|b| b.minute < end) {
            point.add(b);
            viewer_sum += b.viewer_sum;
            starts_left += b.joins * end - b.join_time_sum;
            ends_left += b.leaves * end - b.leave_time_sum;
            open += b.joins - b.leaves;
        }
        point.viewers_mean = mean(viewer_sum, point.viewer_reports);
        point.watch_seconds = (open_at_start * (end - start) + starts_left - ends_left).max(0);
        points.push(point);
        start += granularity.seconds();
    }
    points
}

/// A broadcast's figures over its whole life (to `until`: its end, or now).
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    #[schemars(range(min = 0))]
    pub peak_concurrent_viewers: i64,
    pub mean_concurrent_viewers: Option<f64>,
    #[schemars(range(min = 0))]
    pub unique_viewers: i64,
    #[schemars(range(min = 0))]
    pub viewer_sessions: i64,
    #[schemars(range(min = 0))]
    pub total_watch_seconds: i64,
    /// Total watch time over unique viewers.
    pub mean_watch_seconds: Option<f64>,
    #[schemars(range(min = 0))]
    pub messages: i64,
    #[schemars(range(min = 0))]
    pub chatters: i64,
    #[schemars(range(min = 0))]
    pub reactions_total: i64,
    #[schemars(range(min = 0))]
    pub gifts: i64,
    #[schemars(range(min = 0))]
    pub gift_tokens: i64,
    #[schemars(range(min = 0))]
    pub follows_gained: i64,
    #[schemars(range(min = 0))]
    pub subscriptions_gained: i64,
    /// The quality-of-experience counts over the whole life (answered as `playback`).
    #[serde(skip)]
    #[schemars(skip)]
    pub qoe: Qoe,
}

/// Sums one broadcast's buckets into its totals, sessions still open counted to `until`.
/// The minute that holds `until` counts, even when `until` is its first second: what was
/// recorded in the second being read is in the totals.
pub fn totals(buckets: &[Bucket], until: i64) -> Totals {
    let mut t = Totals::default();
    let (mut reports, mut viewer_sum, mut open) = (0i64, 0i64, 0i64);
    let mut watch = 0i64;
    for b in buckets.iter().filter(|b| b.minute <= until) {
        t.peak_concurrent_viewers = t.peak_concurrent_viewers.max(b.viewer_max);
        reports += b.viewer_reports;
        viewer_sum += b.viewer_sum;
        t.unique_viewers += b.new_viewers;
        t.viewer_sessions += b.joins;
        watch += b.leave_time_sum - b.join_time_sum;
        open += b.joins - b.leaves;
        t.messages += b.messages;
        t.chatters += b.new_chatters;
        t.reactions_total += b.reactions;
        t.gifts += b.gifts;
        t.gift_tokens += b.gift_tokens;
        t.follows_gained += b.follows;
        t.subscriptions_gained += b.subscriptions;
        t.qoe.add(&b.qoe);
    }
    t.mean_concurrent_viewers = mean(viewer_sum, reports);
    t.total_watch_seconds = (watch + open * until).max(0);
    t.mean_watch_seconds = mean(t.total_watch_seconds, t.unique_viewers);
    t
}

/// Seconds of `[start, end)` that fall inside `[from, to)`.
pub fn overlap(start: i64, end: i64, from: i64, to: i64) -> i64 {
    (end.min(to) - start.max(from)).max(0)
}

/// A `from`/`to` query value: a UTC date (`2026-11-23`, its midnight) or an RFC 3339 instant.
pub fn parse_instant(s: &str) -> Option<i64> {
    if s.len() == 10 {
        return crate::time::parse_rfc3339(&format!("{s}T00:00:00Z"));
    }
    crate::time::parse_rfc3339(s)
}

/// CSV text (RFC 4180): a header line, then one line per row; fields holding a comma, a
/// quote or a line break are quoted.
pub fn csv(header: &[&str], rows: &[Vec<String>]) -> String {
    fn field(f: &str) -> String {
        if f.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", f.replace('"', "\"\""))
        } else {
            f.to_string()
        }
    }
    let mut out = header.join(",");
    out.push_str("\r\n");
    for row in rows {
        let fields: Vec<String> = row.iter().map(|f| field(f)).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000 - 1_800_000_000 % DAY; // a midnight UTC

    fn bucket(minute: i64) -> Bucket {
        Bucket {
            minute,
            ..Bucket::default()
        }
    }

    #[test]
    fn days_weeks_and_minutes_start_where_the_calendar_says() {
        assert_eq!(minute_of(T0 + 59), T0);
        assert_eq!(minute_of(T0 + 60), T0 + 60);
        assert_eq!(day_of(T0 + DAY - 1), T0);
        assert_eq!(day_of(T0 - 1), T0 - DAY);
        // 2026-11-23 is a Monday; the Sunday after still belongs to its week.
        let monday = crate::time::parse_rfc3339("2026-11-23T00:00:00Z").unwrap();
        let sunday_night = crate::time::parse_rfc3339("2026-11-29T23:59:59Z").unwrap();
        assert_eq!(Granularity::Week.start_of(sunday_night), monday);
        assert_eq!(Granularity::Week.start_of(monday), monday);
        assert_eq!(Granularity::Week.start_of(monday - 1), monday - WEEK);
        assert_eq!(Granularity::parse("5m"), Some(Granularity::FiveMinutes));
        assert_eq!(Granularity::parse("year"), None);
        assert_eq!(points_between(T0, T0 + HOUR, Granularity::Minute), 60);
        assert_eq!(points_between(T0 + 30, T0 + 61, Granularity::Minute), 2);
        assert_eq!(points_between(T0, T0, Granularity::Day), 0);
    }

    #[test]
    fn a_session_that_spans_minutes_is_split_exactly() {
        // One viewer from 00:00:30 to 00:02:15, another from 00:01:00 to 00:01:10.
        let mut m0 = bucket(T0);
        m0.joins = 1;
        m0.join_time_sum = T0 + 30;
        let mut m1 = bucket(T0 + 60);
        m1.joins = 1;
        m1.join_time_sum = T0 + 60;
        m1.leaves = 1;
        m1.leave_time_sum = T0 + 70;
        let mut m2 = bucket(T0 + 120);
        m2.leaves = 1;
        m2.leave_time_sum = T0 + 135;
        let points = fold(
            &[m2.clone(), m0.clone(), m1.clone()],
            Granularity::Minute,
            T0,
            T0 + 240,
        );
        let watch: Vec<i64> = points.iter().map(|p| p.watch_seconds).collect();
        assert_eq!(watch, vec![30, 60 + 10, 15, 0]);
        let t = totals(&[m0.clone(), m1.clone(), m2.clone()], T0 + 240);
        assert_eq!(t.total_watch_seconds, 105 + 10);
        assert_eq!(t.viewer_sessions, 2);
        // Folded coarser the total is the same, and a series starting late carries the
        // open session in.
        let hour = fold(
            &[m0.clone(), m1.clone(), m2.clone()],
            Granularity::Hour,
            T0,
            T0 + 240,
        );
        assert_eq!(hour.len(), 1);
        assert_eq!(hour[0].watch_seconds, 115);
        let late = fold(&[m0, m1, m2], Granularity::Minute, T0 + 120, T0 + 180);
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].watch_seconds, 15);
    }

    #[test]
    fn totals_count_what_was_recorded_in_the_second_being_read() {
        // A message posted at a minute's first second, read in that same second.
        let mut m1 = bucket(T0 + 60);
        m1.messages = 1;
        m1.new_chatters = 1;
        let t = totals(&[m1.clone()], T0 + 60);
        assert_eq!((t.messages, t.chatters), (1, 1));
        assert_eq!(
            totals(&[m1], T0 + 59).messages,
            0,
            "a later minute is not counted"
        );
    }

    #[test]
    fn open_sessions_count_up_to_the_end() {
        let mut m0 = bucket(T0);
        m0.joins = 2;
        m0.join_time_sum = 2 * T0 + 10 + 20;
        let t = totals(&[m0.clone()], T0 + 100);
        assert_eq!(t.total_watch_seconds, 90 + 80);
        let points = fold(&[m0], Granularity::Minute, T0, T0 + 100);
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].watch_seconds, 50 + 40);
        assert_eq!(points[1].watch_seconds, 2 * 40);
    }

    #[test]
    fn viewer_reports_fold_into_min_max_and_mean() {
        let mut m0 = bucket(T0);
        (
            m0.viewer_reports,
            m0.viewer_sum,
            m0.viewer_min,
            m0.viewer_max,
        ) = (3, 30, Some(5), 15);
        let mut m1 = bucket(T0 + 60);
        (
            m1.viewer_reports,
            m1.viewer_sum,
            m1.viewer_min,
            m1.viewer_max,
        ) = (2, 6, Some(2), 4);
        let five = fold(
            &[m0.clone(), m1.clone()],
            Granularity::FiveMinutes,
            T0,
            T0 + 300,
        );
        assert_eq!(five.len(), 1);
        assert_eq!(five[0].viewers_min, Some(2));
        assert_eq!(five[0].viewers_max, Some(15));
        assert_eq!(five[0].viewers_mean, Some(36.0 / 5.0));
        let minutes = fold(&[m0.clone(), m1.clone()], Granularity::Minute, T0, T0 + 180);
        assert_eq!(minutes[2].viewers_mean, None);
        assert_eq!(minutes[2].viewers_max, None);
        let t = totals(&[m0, m1], T0 + 180);
        assert_eq!(t.peak_concurrent_viewers, 15);
        assert_eq!(t.mean_concurrent_viewers, Some(36.0 / 5.0));
    }

    #[test]
    fn a_broadcast_across_midnight_splits_into_two_days() {
        // Live 23:50 to 00:20; one viewer 23:55 to 00:05.
        let start = T0 + DAY - 600;
        let mut before = bucket(minute_of(T0 + DAY - 300));
        before.joins = 1;
        before.join_time_sum = T0 + DAY - 300;
        before.messages = 4;
        let mut after = bucket(T0 + DAY + 300);
        after.leaves = 1;
        after.leave_time_sum = T0 + DAY + 300;
        after.messages = 1;
        let days = fold(&[before, after], Granularity::Day, start, start + 1800);
        assert_eq!(days.len(), 2);
        assert_eq!((days[0].start, days[1].start), (T0, T0 + DAY));
        assert_eq!(days[0].watch_seconds, 300);
        assert_eq!(days[1].watch_seconds, 300);
        assert_eq!((days[0].messages, days[1].messages), (4, 1));
        assert_eq!(overlap(start, start + 1800, T0, T0 + DAY), 600);
        assert_eq!(overlap(start, start + 1800, T0 + DAY, T0 + 2 * DAY), 1200);
        assert_eq!(overlap(start, start + 1800, T0 + 2 * DAY, T0 + 3 * DAY), 0);
    }

    #[test]
    fn mean_watch_time_is_per_unique_viewer() {
        let mut m0 = bucket(T0);
        m0.joins = 2; // one viewer, twice
        m0.join_time_sum = T0 + T0 + 40;
        m0.leaves = 2;
        m0.leave_time_sum = T0 + 20 + T0 + 50;
        m0.new_viewers = 1;
        let t = totals(&[m0], T0 + 60);
        assert_eq!(t.total_watch_seconds, 30);
        assert_eq!(t.unique_viewers, 1);
        assert_eq!(t.mean_watch_seconds, Some(30.0));
        assert_eq!(mean(0, 0), None);
    }

    #[test]
    fn quality_counts_fold_and_their_percentiles_come_from_the_summed_histogram() {
        // Minute 0: two views starting in 400 and 900 ms; minute 1: one in 5000 ms, with
        // 30 s played and 10 s stalled, and a network failure.
        let mut m0 = bucket(T0);
        m0.qoe.views = 2;
        m0.qoe.startups = 2;
        m0.qoe.startup_ms_sum = 1300;
        m0.qoe.startup[qoe_rules::startup_bucket(400)] += 1;
        m0.qoe.startup[qoe_rules::startup_bucket(900)] += 1;
        let mut m1 = bucket(T0 + 60);
        m1.qoe.views = 1;
        m1.qoe.startups = 1;
        m1.qoe.startup_ms_sum = 5000;
        m1.qoe.startup[qoe_rules::startup_bucket(5000)] += 1;
        m1.qoe.played_ms = 30_000;
        m1.qoe.rebuffer_ms = 10_000;
        m1.qoe.failures[0] = 1;
        let five = fold(
            &[m0.clone(), m1.clone()],
            Granularity::FiveMinutes,
            T0,
            T0 + 300,
        );
        let p = five[0].clone().with_qoe();
        assert_eq!((p.views, p.playback_failures), (3, 1));
        assert_eq!(p.rebuffer_percentage, Some(25.0));
        assert_eq!(
            p.startup_time_p50_ms,
            Some(1000),
            "the 2nd of 3 is in (750, 1000]"
        );
        let minutes: Vec<Point> =
            fold(&[m0.clone(), m1.clone()], Granularity::Minute, T0, T0 + 120)
                .into_iter()
                .map(Point::with_qoe)
                .collect();
        assert_eq!(minutes[0].rebuffer_percentage, None);
        assert_eq!(minutes[1].startup_time_p50_ms, Some(6000));
        let s = totals(&[m0, m1], T0 + 120).qoe.summary(BTreeMap::new());
        assert_eq!(
            (s.startup_time_mean_ms, s.startup_time_p95_ms),
            (Some(2100), Some(6000))
        );
        assert_eq!(s.failures_by_reason["network"], 1);
        assert_eq!(s.failures_by_reason.len(), FAILURE_REASONS.len());
        // The stored columns round-trip, each to its own field.
        let values: Vec<i64> = (1..=QOE_COLUMNS.len() as i64).collect();
        assert_eq!(Qoe::from_values(&values).values(), values);
    }

    #[test]
    fn query_instants_and_csv() {
        assert_eq!(
            parse_instant("2027-01-15"),
            Some(1_800_000_000 - 1_800_000_000 % DAY)
        );
        assert_eq!(
            parse_instant("2027-01-15T08:00:00Z"),
            Some(1_800_000_000 - 1_800_000_000 % DAY + 8 * HOUR)
        );
        assert_eq!(parse_instant("yesterday"), None);
        assert_eq!(
            csv(
                &["time", "note"],
                &[
                    vec!["t1".into(), "a,\"b\"".into()],
                    vec!["t2".into(), String::new()]
                ]
            ),
            "time,note\r\nt1,\"a,\"\"b\"\"\"\r\nt2,\r\n"
        );
    }
}
