//! HLS views: the rules of the view beacon (`POST /api/views`) as plain functions, and the
//! quality-of-experience arithmetic (startup-time histogram and its percentiles, rebuffer
//! percentage). No I/O.
//!
//! A view is one tab's playback of one broadcast, named by the player's random `viewId`.
//! Its figures are cumulative, so a beacon lost or refused costs nothing but its freshness;
//! and the bounds below make each view worth at most what a real viewer is worth: its
//! figures grow no faster than the wall clock since its first beacon, it beacons at most
//! once every 5 s, and one address opens few views.

use crate::validate::JsonBody;
use crate::validate::body::{Choices, FieldKind, NameList, TextRule};
use serde_json::{Value, json};
use std::borrow::Cow;

/// A view counts as a concurrent viewer until this long after its last beacon (players
/// beacon every 10 s, so two lost beacons do not drop it).
pub const LIVE_FOR_MS: i64 = 30_000;
/// At most one beacon per view in this long (an `end` excepted, once).
pub const MIN_BEACON_GAP_MS: i64 = 5_000;
/// What the figures may run ahead of the wall clock since the view's first beacon: the
/// player starts counting when it asks for the stream, a moment before its `start`
/// beacon reaches the platform.
pub const WALL_SLACK_MS: i64 = 15_000;
/// Live views one client address may hold on one broadcast. Households, offices and
/// schools share an address behind NAT, so the limit is not 1; beyond 20 tabs of one
/// broadcast from one address, it is far likelier one machine faking an audience.
pub const MAX_LIVE_PER_ADDRESS: i64 = 20;
/// New views one client address may open per minute (across broadcasts): a reload keeps
/// its view, so a real viewer needs a handful.
pub const NEW_VIEWS_PER_MINUTE: i64 = 30;
/// The longest startup time accepted (10 minutes): more is not a measurement.
pub const MAX_STARTUP_MS: i64 = 600_000;
/// The most cumulative seconds played or stalled one page load may report (two days).
pub const MAX_SECONDS: f64 = 172_800.0;
/// The most stalls one page load may report.
pub const MAX_REBUFFERS: i64 = 100_000;

/// Upper edges (ms, inclusive) of the startup-time histogram's buckets; one more bucket
/// holds everything above the last edge. Fixed, so that histograms of minutes, days and
/// tenants add up and percentiles fold.
pub const STARTUP_EDGES_MS: [i64; 12] = [
    250, 500, 750, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 12_000, 20_000,
];
/// Buckets of the startup-time histogram.
pub const STARTUP_BUCKETS: usize = STARTUP_EDGES_MS.len() + 1;

/// The fatal playback failures a view reports, by reason.
pub const FAILURE_REASONS: [&str; 5] = ["network", "media", "manifest", "not_allowed", "other"];

/// The histogram bucket of a startup time.
pub fn startup_bucket(ms: i64) -> usize {
    STARTUP_EDGES_MS
        .iter()
        .position(|edge| ms <= *edge)
        .unwrap_or(STARTUP_EDGES_MS.len())
}

/// The `p`-th percentile (0 < p ≤ 1) of a startup-time histogram, in ms, linear inside its
/// bucket (the open last bucket answers its lower edge); `None` without samples.
pub fn percentile(histogram: &[i64; STARTUP_BUCKETS], p: f64) -> Option<i64> {
    let count: i64 = histogram.iter().sum();
    if count <= 0 {
        return None;
    }
    let rank = (p * count as f64).ceil().max(1.0);
    let mut below = 0i64;
    for (i, n) in histogram.iter().enumerate() {
        if *n > 0 && (below + n) as f64 >= rank {
            let low = if i == 0 { 0 } else { STARTUP_EDGES_MS[i - 1] };
            let Some(high) = STARTUP_EDGES_MS.get(i) else {
                return Some(low);
            };
            let within = (rank - below as f64) / *n as f64;
            return Some(low + ((high - low) as f64 * within).round() as i64);
        }
        below += n;
    }
    None
}

/// Rebuffer percentage: seconds stalled over seconds played plus stalled, in percent
/// (two decimals); `None` when nothing was played or stalled.
pub fn rebuffer_percentage(played_ms: i64, rebuffer_ms: i64) -> Option<f64> {
    let total = played_ms + rebuffer_ms;
    (total > 0).then(|| (rebuffer_ms as f64 * 10_000.0 / total as f64).round() / 100.0)
}

/// Whether `s` is a `viewId` or `viewerId`: 16 to 64 of `[A-Za-z0-9_-]`.
pub fn is_view_id(s: &str) -> bool {
    (16..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A `viewId` or `viewerId`.
pub struct ViewId;

impl TextRule for ViewId {
    const DESCRIPTION: &'static str =
        "16 to 64 of A-Z, a-z, 0-9, _ and -: random, made by the player.";

    fn problem(text: &str) -> Option<Cow<'static, str>> {
        (!is_view_id(text)).then_some("must be 16 to 64 of A-Z, a-z, 0-9, _ and -".into())
    }
}

/// What a beacon says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The page began loading the stream (also: a reload, which counts from zero again).
    Start,
    /// The page is still open (every 10 s).
    Heartbeat,
    /// The page is going away.
    End,
}

impl Choices for Event {
    type Value = Event;

    fn names() -> Vec<&'static str> {
        vec!["start", "heartbeat", "end"]
    }

    fn choose(name: &str) -> Option<Event> {
        Some(match name {
            "start" => Event::Start,
            "heartbeat" => Event::Heartbeat,
            "end" => Event::End,
            _ => return None,
        })
    }
}

/// A failure reason (see [`FAILURE_REASONS`]).
pub struct FailureReason;

impl NameList for FailureReason {
    const NAMES: &'static [&'static str] = &FAILURE_REASONS;
}

/// A cumulative number of seconds (≥ 0, finite, at most [`MAX_SECONDS`]), read as whole
/// milliseconds; optional (absent: no new figure).
pub struct OptSeconds;

impl FieldKind for OptSeconds {
    type Value = Option<i64>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<i64> {
        let value = body.opt_value(name)?;
        match value.as_f64() {
            Some(s) if (0.0..=MAX_SECONDS).contains(&s) => Some((s * 1000.0).round() as i64),
            _ => {
                body.error(
                    name,
                    format!("must be a number of seconds from 0 to {MAX_SECONDS}"),
                );
                None
            }
        }
    }

    fn schema() -> Value {
        json!({ "type": ["number", "null"], "minimum": 0, "maximum": MAX_SECONDS })
    }
}

/// The `exp` of a signed playback address: its digits as sent in the query (a string),
/// or the number.
pub struct OptExpiry;

impl FieldKind for OptExpiry {
    type Value = Option<i64>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<i64> {
        let value = body.opt_value(name)?;
        let parsed = match &value {
            Value::String(s) if !s.is_empty() && s.len() <= 12 => s.parse().ok(),
            Value::Number(n) => n.as_i64(),
            _ => None,
        };
        if parsed.is_none_or(|n: i64| n < 0) {
            body.error(name, "must be the exp of the signed hlsUrl (epoch seconds)");
            return None;
        }
        parsed
    }

    fn schema() -> Value {
        json!({ "type": ["string", "integer", "null"], "pattern": "^[0-9]{1,12}$", "minimum": 0 })
    }
}

/// A view's cumulative figures, in milliseconds and stalls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub played_ms: i64,
    pub rebuffer_ms: i64,
    pub rebuffers: i64,
}

impl Figures {
    fn plus(self, o: Figures) -> Figures {
        Figures {
            played_ms: self.played_ms + o.played_ms,
            rebuffer_ms: self.rebuffer_ms + o.rebuffer_ms,
            rebuffers: self.rebuffers + o.rebuffers,
        }
    }

    fn minus(self, o: Figures) -> Figures {
        Figures {
            played_ms: self.played_ms - o.played_ms,
            rebuffer_ms: self.rebuffer_ms - o.rebuffer_ms,
            rebuffers: self.rebuffers - o.rebuffers,
        }
    }
}

/// How a view's session was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// By its `end` beacon: only a `start` (a reload) opens it again.
    End,
    /// By silence (no beacon for 30 s, closed at its last one by the analytics job): a
    /// beacon of the same page load opens it again.
    Silence,
    /// With its broadcast's roll-up: for good.
    Broadcast,
}

impl Closed {
    pub fn as_str(self) -> &'static str {
        match self {
            Closed::End => "end",
            Closed::Silence => "silence",
            Closed::Broadcast => "broadcast",
        }
    }

    pub fn parse(s: &str) -> Option<Closed> {
        Some(match s {
            "end" => Closed::End,
            "silence" => Closed::Silence,
            "broadcast" => Closed::Broadcast,
            _ => return None,
        })
    }
}

/// A view as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    pub first_beacon_ms: i64,
    pub last_beacon_ms: i64,
    pub closed: Option<Closed>,
    /// Over every page load of the view.
    pub totals: Figures,
    /// The totals when the current page load began: what it sends counts from here.
    pub base: Figures,
    pub startup_ms: Option<i64>,
    pub error: Option<String>,
}

/// What a beacon sends (figures `None`: not sent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    pub event: Option<Event>,
    pub played_ms: Option<i64>,
    pub rebuffer_ms: Option<i64>,
    pub rebuffers: Option<i64>,
    pub startup_ms: Option<i64>,
    pub error: Option<String>,
}

/// Why a beacon changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Less than [`MIN_BEACON_GAP_MS`] after the view's last beacon: 429.
    TooSoon { retry_after_ms: i64 },
    /// The view's session was closed by its `end` (or its broadcast's roll-up), and this
    /// is not a `start`: 409.
    Ended,
    /// A cumulative figure went down within one page load: 422 naming it.
    NotMonotone(&'static str),
}

/// What an accepted beacon changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// The view's new totals and page-load baseline (to store).
    pub totals: Figures,
    pub base: Figures,
    /// What the totals grew by (to add to the minute's counts).
    pub delta: Figures,
    /// The view's startup time when this beacon set it (counted once per view).
    pub startup_ms: Option<i64>,
    /// The failure reason to count, when the beacon reports a new one.
    pub failure: Option<String>,
    /// A session (a concurrent viewer) opens now / closes now.
    pub opens: bool,
    pub closes: bool,
}

/// The upper bound of a view's played plus stalled time at `now_ms`: the wall clock since
/// its first beacon, plus [`WALL_SLACK_MS`].
pub fn wall_bound_ms(first_beacon_ms: i64, now_ms: i64) -> i64 {
    (now_ms - first_beacon_ms).max(0) + WALL_SLACK_MS
}

/// Applies one beacon to a view (`None`: its first beacon) at `now_ms`. The figures are
/// checked (a decrease within a page load is refused) and then **clamped** to the wall
/// clock: played plus stalled time never exceeds [`wall_bound_ms`], stalls never exceed
/// one per second of it, the startup time never exceeds it. Stalled time is credited
/// before played time, so inflated figures never buy watch time.
pub fn accept(stored: Option<&Stored>, sent: &Sent, now_ms: i64) -> Result<Accepted, Refused> {
    let event = sent.event.unwrap_or(Event::Heartbeat);
    let fresh = Stored {
        first_beacon_ms: now_ms,
        last_beacon_ms: now_ms,
        ..Stored::default()
    };
    let (view, is_new) = match stored {
        Some(view) => (view, false),
        None => (&fresh, true),
    };
    let mut opens = is_new;
    if !is_new {
        let since = now_ms - view.last_beacon_ms;
        let final_end = event == Event::End && view.closed.is_none();
        if since < MIN_BEACON_GAP_MS && !final_end {
            return Err(Refused::TooSoon {
                retry_after_ms: MIN_BEACON_GAP_MS - since.max(0),
            });
        }
        match (view.closed, event) {
            (None, _) => {}
            (Some(Closed::Broadcast), _) => return Err(Refused::Ended),
            (Some(_), Event::Start) => opens = true,
            (Some(Closed::Silence), Event::Heartbeat) => opens = true,
            (Some(_), _) => return Err(Refused::Ended),
        }
    }
    // A start (a page load, or a reload keeping the viewId) counts from zero again.
    let base = if event == Event::Start {
        view.totals
    } else {
        view.base
    };
    let page = view.totals.minus(base);
    let sent_page = Figures {
        played_ms: sent.played_ms.unwrap_or(page.played_ms),
        rebuffer_ms: sent.rebuffer_ms.unwrap_or(page.rebuffer_ms),
        rebuffers: sent.rebuffers.unwrap_or(page.rebuffers),
    };
    for (name, was, now) in [
        ("playedSeconds", page.played_ms, sent_page.played_ms),
        ("rebufferSeconds", page.rebuffer_ms, sent_page.rebuffer_ms),
        ("rebufferCount", page.rebuffers, sent_page.rebuffers),
    ] {
        if now < was {
            return Err(Refused::NotMonotone(name));
        }
    }
    let wanted = base.plus(sent_page).minus(view.totals);
    let bound = wall_bound_ms(view.first_beacon_ms, now_ms);
    let allowance = (bound - view.totals.played_ms - view.totals.rebuffer_ms).max(0);
    let rebuffer_ms = wanted.rebuffer_ms.min(allowance);
    let delta = Figures {
        rebuffer_ms,
        played_ms: wanted.played_ms.min(allowance - rebuffer_ms),
        rebuffers: wanted
            .rebuffers
            .min((bound / 1000 - view.totals.rebuffers).max(0)),
    };
    let startup_ms = match (view.startup_ms, sent.startup_ms) {
        (None, Some(ms)) => Some(ms.min(bound)),
        _ => None,
    };
    let failure = sent
        .error
        .clone()
        .filter(|reason| view.error.as_ref() != Some(reason));
    Ok(Accepted {
        totals: view.totals.plus(delta),
        base,
        delta,
        startup_ms,
        failure,
        opens,
        closes: event == Event::End,
    })
}

/// Whether a view whose last beacon was at `last_beacon_ms` and is not closed counts as a
/// concurrent viewer at `now_ms`.
pub fn is_live(last_beacon_ms: i64, closed: bool, now_ms: i64) -> bool {
    !closed && now_ms - last_beacon_ms < LIVE_FOR_MS
}

/// The broadcast's concurrent viewers: the app's latest report, or the HLS views and the
/// SFU room's viewers counted now, whichever is more (the app may count viewers the
/// platform cannot see; the platform sees viewers the app did not report).
pub fn viewer_count(reported: i64, live_views: i64, room_viewers: i64) -> i64 {
    reported.max(live_views + room_viewers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_800_000_000_000;

    fn sent(event: Event, played: f64) -> Sent {
        Sent {
            event: Some(event),
            played_ms: Some((played * 1000.0) as i64),
            ..Sent::default()
        }
    }

    fn stored_after(a: &Accepted, first: i64, last: i64) -> Stored {
        Stored {
            first_beacon_ms: first,
            last_beacon_ms: last,
            closed: a.closes.then_some(Closed::End),
            totals: a.totals,
            base: a.base,
            startup_ms: a.startup_ms,
            error: a.failure.clone(),
        }
    }

    #[test]
    fn view_ids_are_random_tokens() {
        assert!(is_view_id("abcdefghijklmnop"));
        assert!(is_view_id(&"A-_9".repeat(16)));
        assert!(!is_view_id("short"));
        assert!(!is_view_id(&"a".repeat(65)));
        assert!(!is_view_id("abcdefghijklmno/"));
        assert!(!is_view_id("abcdefghijklmnoé"));
    }

    #[test]
    fn figures_grow_no_faster_than_the_wall_clock() {
        let first = accept(None, &sent(Event::Start, 0.0), T).unwrap();
        assert!(first.opens && !first.closes);
        let view = stored_after(&first, T, T);
        // 10 s later the player claims an hour: clamped to 10 s plus the slack.
        let a = accept(Some(&view), &sent(Event::Heartbeat, 3600.0), T + 10_000).unwrap();
        assert_eq!(a.delta.played_ms, 10_000 + WALL_SLACK_MS);
        // An honest figure within the bound is taken as it is.
        let a = accept(Some(&view), &sent(Event::Heartbeat, 9.5), T + 10_000).unwrap();
        assert_eq!(a.delta.played_ms, 9_500);
        // Stalled time is credited first; played time gets what is left.
        let both = Sent {
            rebuffer_ms: Some(20_000),
            ..sent(Event::Heartbeat, 20.0)
        };
        let a = accept(Some(&view), &both, T + 10_000).unwrap();
        assert_eq!(
            (a.delta.rebuffer_ms, a.delta.played_ms),
            (20_000, 5_000),
            "{a:?}"
        );
        // A startup time longer than the view has existed is clamped too.
        let slow = Sent {
            startup_ms: Some(500_000),
            ..sent(Event::Heartbeat, 1.0)
        };
        let a = accept(Some(&view), &slow, T + 10_000).unwrap();
        assert_eq!(a.startup_ms, Some(10_000 + WALL_SLACK_MS));
    }

    #[test]
    fn a_decrease_within_a_page_load_is_refused_and_a_reload_counts_from_zero() {
        let first = accept(None, &sent(Event::Start, 0.0), T).unwrap();
        let view = stored_after(&first, T, T);
        let a = accept(Some(&view), &sent(Event::Heartbeat, 8.0), T + 10_000).unwrap();
        let view = stored_after(&a, T, T + 10_000);
        assert_eq!(
            accept(Some(&view), &sent(Event::Heartbeat, 7.0), T + 20_000),
            Err(Refused::NotMonotone("playedSeconds"))
        );
        // The reload starts at zero again: its figures add to the view's.
        let reload = accept(Some(&view), &sent(Event::Start, 0.0), T + 20_000).unwrap();
        assert_eq!(reload.totals.played_ms, 8_000);
        assert!(!reload.opens, "the view never closed");
        let view = stored_after(&reload, T, T + 20_000);
        let a = accept(Some(&view), &sent(Event::Heartbeat, 5.0), T + 30_000).unwrap();
        assert_eq!((a.delta.played_ms, a.totals.played_ms), (5_000, 13_000));
        // Leaving a figure out keeps it.
        let none = Sent {
            event: Some(Event::Heartbeat),
            ..Sent::default()
        };
        let a = accept(Some(&view), &none, T + 30_000).unwrap();
        assert_eq!(a.delta, Figures::default());
    }

    #[test]
    fn one_beacon_per_five_seconds_and_an_end_once() {
        let first = accept(None, &sent(Event::Start, 0.0), T).unwrap();
        let view = stored_after(&first, T, T);
        assert_eq!(
            accept(Some(&view), &sent(Event::Heartbeat, 1.0), T + 4_000),
            Err(Refused::TooSoon {
                retry_after_ms: 1_000
            })
        );
        let end = accept(Some(&view), &sent(Event::End, 1.0), T + 1_000).unwrap();
        assert!(end.closes);
        let view = stored_after(&end, T, T + 1_000);
        assert_eq!(
            accept(Some(&view), &sent(Event::End, 1.0), T + 2_000),
            Err(Refused::TooSoon {
                retry_after_ms: 4_000
            })
        );
        assert_eq!(
            accept(Some(&view), &sent(Event::Heartbeat, 2.0), T + 10_000),
            Err(Refused::Ended)
        );
        let again = accept(Some(&view), &sent(Event::Start, 0.0), T + 10_000).unwrap();
        assert!(again.opens);
        // Closed by silence, the same page load's next beacon reopens it.
        let silent = Stored {
            closed: Some(Closed::Silence),
            ..view.clone()
        };
        assert!(
            accept(Some(&silent), &sent(Event::Heartbeat, 2.0), T + 60_000)
                .unwrap()
                .opens
        );
        let rolled = Stored {
            closed: Some(Closed::Broadcast),
            ..view
        };
        assert_eq!(
            accept(Some(&rolled), &sent(Event::Start, 0.0), T + 60_000),
            Err(Refused::Ended)
        );
    }

    #[test]
    fn startup_and_failures_count_once() {
        let s = Sent {
            startup_ms: Some(900),
            error: Some("network".into()),
            ..sent(Event::Start, 0.0)
        };
        let first = accept(None, &s, T).unwrap();
        assert_eq!(first.startup_ms, Some(900));
        assert_eq!(first.failure.as_deref(), Some("network"));
        let view = stored_after(&first, T, T);
        let again = accept(Some(&view), &s, T + 10_000).unwrap();
        assert_eq!((again.startup_ms, again.failure), (None, None));
        let other = Sent {
            error: Some("media".into()),
            ..s
        };
        assert_eq!(
            accept(Some(&view), &other, T + 10_000)
                .unwrap()
                .failure
                .as_deref(),
            Some("media")
        );
    }

    #[test]
    fn startup_percentiles_from_the_histogram() {
        let mut h = [0i64; STARTUP_BUCKETS];
        assert_eq!(percentile(&h, 0.5), None);
        for ms in [100, 300, 600, 900, 1200, 1800, 2500, 3500, 5000, 25_000] {
            h[startup_bucket(ms)] += 1;
        }
        assert_eq!(startup_bucket(250), 0);
        assert_eq!(startup_bucket(251), 1);
        assert_eq!(startup_bucket(20_001), STARTUP_EDGES_MS.len());
        // The 5th of 10 samples is 1200 ms, in (1000, 1500]: the bucket's one sample at
        // its top.
        assert_eq!(percentile(&h, 0.5), Some(1500));
        assert_eq!(percentile(&h, 0.1), Some(250));
        assert_eq!(percentile(&h, 0.95), Some(20_000), "the open bucket");
        let mut one = [0i64; STARTUP_BUCKETS];
        one[startup_bucket(700)] = 4;
        assert_eq!(percentile(&one, 0.5), Some(625));
    }

    #[test]
    fn rebuffer_percentage_and_the_viewer_count() {
        assert_eq!(rebuffer_percentage(0, 0), None);
        assert_eq!(rebuffer_percentage(90_000, 10_000), Some(10.0));
        assert_eq!(rebuffer_percentage(2_000, 1_000), Some(33.33));
        assert_eq!(viewer_count(5, 2, 1), 5);
        assert_eq!(viewer_count(0, 2, 1), 3);
        assert!(is_live(T, false, T + 29_999));
        assert!(!is_live(T, false, T + 30_000));
        assert!(!is_live(T, true, T));
    }
}
