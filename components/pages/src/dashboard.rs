//! The analytics dashboard of one broadcast, `/analytics/broadcasts/{id}?token=...`: opened
//! from the app with a read-only link (`POST /api/broadcasts/{id}/analytics/share`, 15
//! minutes, that broadcast only). Its data is embedded in the page; the charts are drawn by
//! the vendored uPlot. A wrong, expired or other broadcast's token is 404.

use crate::web::{self, PageHeaders};
use crate::{assets, render};
use domain::analytics::{self as math, Granularity, Point, Totals};
use domain::views::{percentile, rebuffer_percentage};
use domain::{ApiError, ids, time};
use edge::spin::http::PublicCtx;
use minijinja::context;
use serde::Serialize;
use spin_sdk::http::Response;
use store::app;
use store::{analytics, broadcasts};

/// The longest token a link carries (`an_` and 40 base62 characters).
const MAX_TOKEN: usize = 64;

/// Why a broadcast ended in `error`, for its creator.
fn error_explained(reason: Option<&str>) -> Option<&'static str> {
    match reason? {
        broadcasts::ERROR_STALE => Some(
            "Ended with an error: no heartbeat for 90 seconds (the app or encoder stopped \
             reporting), so the broadcast was closed.",
        ),
        broadcasts::ERROR_REQUESTED => Some("Ended with an error, as the app reported."),
        _ => Some("Ended with an error."),
    }
}

/// `GET /analytics/broadcasts/{id}?token=...`
pub fn dashboard(ctx: &PublicCtx) -> Result<Response, ApiError> {
    let not_found = || Ok(web::text(404, "no such dashboard"));
    let token = ctx.query_value("token").unwrap_or_default();
    let Some(id) = ids::parse_uuid(ctx.param("id")) else {
        return not_found();
    };
    if token.is_empty() || token.len() > MAX_TOKEN {
        return not_found();
    }
    let now = ctx.now();
    let db = ctx.db()?;
    let Some(client_id) = analytics::shared(&db, &ids::sha256_hex(token.as_bytes()), &id, now)?
    else {
        return not_found();
    };
    let b = app::broadcasts::load(&db, &client_id, &id, now)?;
    let started = b.started_at.as_deref().and_then(time::parse_rfc3339);
    let until = b
        .ended_at
        .as_deref()
        .and_then(time::parse_rfc3339)
        .unwrap_or(now);
    let granularity = granularity_for(started.map_or(0, |s| until - s));
    let report = analytics::report(&db, &b, granularity, now)?;
    let series = series_json(&report.series).to_string();
    let tiles = tiles(&report.totals, started.map(|s| until - s));
    // Readable in UTC; the page's script shows it in the reader's own time zone.
    let (range, range_from, range_to) = match started {
        Some(s) => (
            readable_range(s, until),
            time::format_rfc3339(s),
            time::format_rfc3339(until),
        ),
        None => ("not live yet".to_string(), String::new(), String::new()),
    };
    let csp = web::csp(&[]);
    let headers = PageHeaders {
        etag: "",
        cache_control: web::CACHE_NONE,
        csp: &csp,
    };
    let html = render::render(
        "analytics.html",
        context! {
            title => b.title,
            status => b.status.as_str(),
            error_reason => error_explained(b.error_reason.as_deref()),
            range,
            range_from,
            range_to,
            granularity_label => label(granularity),
            tiles,
            series_json => series,
            asset => context! {
                css => assets::url_value("pages.css"),
                uplot_css => assets::url_value("vendor/uPlot.min.css"),
                dashboard_css => assets::url_value("analytics.css"),
                uplot => assets::url_value("vendor/uPlot.iife.min.js"),
                dashboard => assets::url_value("analytics.js"),
            },
        },
    );
    Ok(match html {
        Ok(html) => web::html_response(200, &headers, html),
        Err(e) => web::server_error(&e),
    })
}

/// A time range as a person reads it, in UTC: `27 Nov 2026, 15:00 to 16:05 UTC`, the date
/// written once when both ends fall on the same day.
pub fn readable_range(from: i64, to: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // `2026-11-27T15:00:05Z`: the date and the hour and minute, by position.
    let parts = |t: i64| {
        let text = time::format_rfc3339(t);
        let month = text[5..7]
            .parse::<usize>()
            .map_or(0, |m| m.saturating_sub(1));
        let date = format!(
            "{} {} {}",
            text[8..10].trim_start_matches('0'),
            MONTHS[month.min(11)],
            &text[0..4]
        );
        (date, text[11..16].to_string())
    };
    let ((from_date, from_time), (to_date, to_time)) = (parts(from), parts(to));
    if from_date == to_date {
        format!("{from_date}, {from_time} to {to_time} UTC")
    } else {
        format!("{from_date}, {from_time} to {to_date}, {to_time} UTC")
    }
}

/// Minutes for up to three hours, five minutes up to a day, hours beyond.
pub fn granularity_for(duration_secs: i64) -> Granularity {
    match duration_secs {
        d if d <= 3 * math::HOUR => Granularity::Minute,
        d if d <= math::DAY => Granularity::FiveMinutes,
        _ => Granularity::Hour,
    }
}

fn label(g: Granularity) -> &'static str {
    match g {
        Granularity::Minute => "minute",
        Granularity::FiveMinutes => "5 minutes",
        _ => "hour",
    }
}

/// The series as the page's script reads it: one array per measure, aligned on `time`
/// (epoch seconds); `null` where a measure has no value.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Series {
    time: Vec<i64>,
    /// Rounded to hundredths.
    viewers_mean: Vec<Option<f64>>,
    viewers_max: Vec<Option<i64>>,
    messages: Vec<i64>,
    reactions: Vec<i64>,
    gift_tokens: Vec<i64>,
    /// Rounded to tenths.
    watch_minutes: Vec<f64>,
}

impl Series {
    fn of(points: &[Point]) -> Series {
        Series {
            time: points.iter().map(|p| p.start).collect(),
            viewers_mean: points
                .iter()
                .map(|p| p.viewers_mean.map(|m| (m * 100.0).round() / 100.0))
                .collect(),
            viewers_max: points.iter().map(|p| p.viewers_max).collect(),
            messages: points.iter().map(|p| p.messages).collect(),
            reactions: points.iter().map(|p| p.reactions).collect(),
            gift_tokens: points.iter().map(|p| p.gift_tokens).collect(),
            watch_minutes: points
                .iter()
                .map(|p| (p.watch_seconds as f64 / 60.0 * 10.0).round() / 10.0)
                .collect(),
        }
    }
}

/// [`Series`] of `points`, as JSON.
pub fn series_json(points: &[Point]) -> serde_json::Value {
    serde_json::to_value(Series::of(points)).unwrap_or_default()
}

/// The summary tiles: `(key, label, value)` as the template shows them.
fn tiles(t: &Totals, duration: Option<i64>) -> Vec<minijinja::Value> {
    let minutes = |s: i64| format!("{:.1} min", s as f64 / 60.0);
    let rows = [
        ("duration", "Duration", duration.map_or("-".into(), minutes)),
        (
            "peak",
            "Peak viewers",
            t.peak_concurrent_viewers.to_string(),
        ),
        (
            "mean",
            "Mean viewers",
            t.mean_concurrent_viewers
                .map_or("-".into(), |m| format!("{m:.1}")),
        ),
        ("unique", "Unique viewers", t.unique_viewers.to_string()),
        ("watch", "Total watch time", minutes(t.total_watch_seconds)),
        (
            "meanWatch",
            "Watch time per viewer",
            t.mean_watch_seconds
                .map_or("-".into(), |m| minutes(m.round() as i64)),
        ),
        ("messages", "Chat messages", t.messages.to_string()),
        ("chatters", "Chatters", t.chatters.to_string()),
        ("reactions", "Reactions", t.reactions_total.to_string()),
        (
            "gifts",
            "Gifts",
            format!("{} ({} tokens)", t.gifts, t.gift_tokens),
        ),
        ("follows", "Follows gained", t.follows_gained.to_string()),
        // The HLS quality of experience the players report.
        ("views", "Views", t.qoe.views.to_string()),
        (
            "startup",
            "Startup time (median)",
            percentile(&t.qoe.startup, 0.5).map_or("-".into(), |ms| format!("{ms} ms")),
        ),
        (
            "rebuffering",
            "Rebuffering",
            rebuffer_percentage(t.qoe.played_ms, t.qoe.rebuffer_ms)
                .map_or("-".into(), |p| format!("{p:.2} %")),
        ),
        (
            "failures",
            "Playback failures",
            t.qoe.playback_failures().to_string(),
        ),
    ];
    rows.into_iter()
        .map(|(key, label, value)| context! { key, label, value })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn longer_broadcasts_get_coarser_charts() {
        assert_eq!(granularity_for(3600), Granularity::Minute);
        assert_eq!(granularity_for(4 * 3600), Granularity::FiveMinutes);
        assert_eq!(granularity_for(2 * 86_400), Granularity::Hour);
    }

    #[test]
    fn the_time_range_reads_as_dates_and_times() {
        // 2026-11-27T15:00:05Z and an hour and five minutes later.
        let start = 1_795_791_605;
        assert_eq!(
            readable_range(start, start + 3900),
            "27 Nov 2026, 15:00 to 16:05 UTC"
        );
        assert_eq!(
            readable_range(start, start + 10 * 3600),
            "27 Nov 2026, 15:00 to 28 Nov 2026, 01:00 UTC"
        );
        assert_eq!(readable_range(0, 59), "1 Jan 1970, 00:00 to 00:00 UTC");
    }

    #[test]
    fn the_series_is_one_array_per_measure() {
        let points = [
            Point {
                start: 60,
                viewers_mean: Some(6.0 / 3.0),
                viewers_max: Some(3),
                messages: 2,
                ..Point::default()
            },
            Point {
                start: 120,
                watch_seconds: 90,
                ..Point::default()
            },
        ];
        let s = series_json(&points);
        assert_eq!(s["time"], json!([60, 120]));
        assert_eq!(s["viewersMean"], json!([2.0, null]));
        assert_eq!(s["viewersMax"], json!([3, null]));
        assert_eq!(s["messages"], json!([2, 0]));
        assert_eq!(s["watchMinutes"], json!([0.0, 1.5]));
    }
}
