//! Clips (docs/replays.md#clips): a range of a broadcast's kept media, in media time (the
//! sum of the kept segments' durations of the source rendition, as the replay's seek bar
//! counts), 5 to 120 seconds long. The rules here are plain: which range a request names,
//! whether it lies within what was kept, and which kept segments cover it.

/// The shortest clip, in seconds.
pub const MIN_SECONDS: i64 = 5;
/// The longest clip, in seconds.
pub const MAX_SECONDS: i64 = 120;
/// The largest `startOffset` taken, in seconds (31 days: no show is longer).
pub const MAX_START_OFFSET: i64 = 31 * 86_400;
/// The longest title, in characters.
pub const MAX_TITLE: usize = 200;
/// Rounding allowed at the end of the kept media (the replay's duration is in
/// milliseconds, the segments' in microseconds).
pub const END_SLACK: f64 = 0.05;

/// What a request to clip names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `{startOffset, duration}`.
    Range { start: i64, duration: i64 },
    /// `{lastSeconds}`: the last seconds kept when the media server makes it.
    Last { seconds: i64 },
}

impl Asked {
    /// The clip's length in seconds.
    pub fn duration(self) -> i64 {
        match self {
            Asked::Range { duration, .. } => duration,
            Asked::Last { seconds } => seconds,
        }
    }

    /// The range in the kept media, once `kept` seconds are known: `None` when it is not
    /// all within them.
    pub fn place(self, kept: f64) -> Option<(f64, f64)> {
        let (start, duration) = match self {
            Asked::Range { start, duration } => (start as f64, duration as f64),
            Asked::Last { seconds } => (kept - seconds as f64, seconds as f64),
        };
        (start >= 0.0 && start + duration <= kept + END_SLACK).then_some((start, duration))
    }
}

/// Whether a clip's HLS plays: its playlists were written, the clip did not fail, and the
/// replay whose segments they name is still there (`replay_state` of the broadcast's
/// replay; none while the broadcast is live, before it has one). Once the replay is
/// deleted, only the clip's MP4 plays.
pub fn hls_plays(hls_written: bool, failed: bool, replay_state: Option<&str>) -> bool {
    hls_written && !failed && replay_state.is_none_or(|s| matches!(s, "processing" | "ready"))
}

/// Which form a request used: exactly one of `{startOffset, duration}` and
/// `{lastSeconds}`. `Err` says what is wrong, by field.
pub fn asked(
    start: Option<i64>,
    duration: Option<i64>,
    last: Option<i64>,
) -> Result<Asked, (&'static str, &'static str)> {
    match (start, duration, last) {
        (Some(start), Some(duration), None) => Ok(Asked::Range { start, duration }),
        (None, None, Some(seconds)) => Ok(Asked::Last { seconds }),
        (_, _, Some(_)) => Err((
            "lastSeconds",
            "either lastSeconds or startOffset and duration, not both",
        )),
        (None, _, None) => Err((
            "startOffset",
            "startOffset and duration (or lastSeconds) are required",
        )),
        (Some(_), None, None) => Err(("duration", "is required with startOffset")),
    }
}

/// The segments (by index in `seconds`, their durations in order) that the clip's HLS
/// playlist lists for `[start, start + duration)`: those whose middle lies in the range,
/// so that the playlist is within one segment of the range; at least the segment under
/// `start`. `None` when nothing is kept there.
pub fn listed(seconds: &[f64], start: f64, duration: f64) -> Option<std::ops::Range<usize>> {
    let end = start + duration;
    let mut at = 0.0;
    let mut first = None;
    let mut last = None;
    let mut under_start = None;
    for (i, s) in seconds.iter().enumerate() {
        let middle = at + s / 2.0;
        if middle >= start && middle < end {
            first.get_or_insert(i);
            last = Some(i);
        }
        if under_start.is_none() && at + s > start {
            under_start = Some(i);
        }
        at += s;
    }
    match (first, last) {
        (Some(first), Some(last)) => Some(first..last + 1),
        _ => under_start.map(|i| i..i + 1),
    }
}

/// The segments that hold `[start, start + duration)` whole (for cutting the MP4), and
/// where the range starts in the first of them, in seconds.
pub fn covering(
    seconds: &[f64],
    start: f64,
    duration: f64,
) -> Option<(std::ops::Range<usize>, f64)> {
    let end = start + duration;
    let mut at = 0.0;
    let mut first: Option<(usize, f64)> = None;
    let mut last = None;
    for (i, s) in seconds.iter().enumerate() {
        if at + s > start && at < end {
            first.get_or_insert((i, start - at));
            last = Some(i);
        }
        at += s;
    }
    let ((first, offset), last) = (first?, last?);
    Some((first..last + 1, offset.max(0.0)))
}

/// How a clip's MP4 is cut from the source rendition's segments (each starts with a
/// keyframe).
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    /// The segments to read, in order.
    pub segments: std::ops::Range<usize>,
    /// Seconds into the first of them where the MP4 starts (0 for a copy).
    pub offset: f64,
    /// The MP4's length, seconds.
    pub length: f64,
    /// Re-encode (frame-accurate) rather than copy the streams.
    pub encode: bool,
}

/// Plans the MP4 of `[start, start + duration)`: a stream copy from the segment start
/// nearest `start` when that is at most `tolerance` seconds away (the clip then starts
/// that much early or late and ends where asked), else a re-encode of exactly the range.
/// A copy cannot start between keyframes: started there, its video would begin only at
/// the next keyframe.
pub fn cut(seconds: &[f64], start: f64, duration: f64, tolerance: f64) -> Option<Cut> {
    let (range, offset) = covering(seconds, start, duration)?;
    let end = start + duration;
    let segment_start = start - offset;
    // The segment start before the range's start, and the one after it.
    let mut best = (range.start, segment_start);
    let next = segment_start + seconds[range.start];
    if range.len() > 1 && (next - start).abs() < (start - segment_start).abs() && next < end {
        best = (range.start + 1, next);
    }
    let (first, at) = best;
    if (at - start).abs() <= tolerance {
        return Some(Cut {
            segments: first..range.end,
            offset: 0.0,
            length: end - at,
            encode: false,
        });
    }
    Some(Cut {
        segments: range,
        offset,
        length: duration,
        encode: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clips_hls_plays_while_its_replays_segments_are_there() {
        assert!(hls_plays(true, false, None), "live: no replay yet");
        assert!(hls_plays(true, false, Some("processing")));
        assert!(hls_plays(true, false, Some("ready")));
        for gone in ["deleting", "deleted", "failed"] {
            assert!(!hls_plays(true, false, Some(gone)), "{gone}");
        }
        assert!(!hls_plays(false, false, Some("ready")), "not written yet");
        assert!(!hls_plays(true, true, Some("ready")), "a failed clip");
    }

    #[test]
    fn exactly_one_form_is_taken() {
        assert_eq!(
            asked(Some(0), Some(10), None),
            Ok(Asked::Range {
                start: 0,
                duration: 10
            })
        );
        assert_eq!(asked(None, None, Some(30)), Ok(Asked::Last { seconds: 30 }));
        assert_eq!(
            asked(Some(0), Some(10), Some(30)).unwrap_err().0,
            "lastSeconds"
        );
        assert_eq!(
            asked(None, Some(10), Some(30)).unwrap_err().0,
            "lastSeconds"
        );
        assert_eq!(asked(None, None, None).unwrap_err().0, "startOffset");
        assert_eq!(asked(None, Some(10), None).unwrap_err().0, "startOffset");
        assert_eq!(asked(Some(3), None, None).unwrap_err().0, "duration");
    }

    #[test]
    fn a_range_is_placed_within_what_was_kept_or_not_at_all() {
        let r = Asked::Range {
            start: 10,
            duration: 20,
        };
        assert_eq!(r.place(30.0), Some((10.0, 20.0)));
        assert_eq!(r.place(30.04), Some((10.0, 20.0)));
        assert_eq!(r.place(29.0), None);
        let last = Asked::Last { seconds: 10 };
        assert_eq!(last.place(62.5), Some((52.5, 10.0)));
        assert_eq!(last.place(9.0), None);
        assert_eq!(last.duration(), 10);
    }

    #[test]
    fn an_mp4_is_copied_from_a_segment_start_near_the_range_else_encoded() {
        let two = [2.0; 10];
        // On a segment start: a copy of exactly the range.
        let c = cut(&two, 4.0, 6.0, 1.0).unwrap();
        assert_eq!((c.segments, c.offset, c.encode), (2..5, 0.0, false));
        assert!((c.length - 6.0).abs() < 1e-9);
        // 0.6 s in: copied from the segment's start, 0.6 s longer.
        let c = cut(&two, 4.6, 6.0, 1.0).unwrap();
        assert_eq!((c.segments.start, c.encode), (2, false));
        assert!((c.length - 6.6).abs() < 1e-9);
        // 1.6 s in: copied from the next segment's start, 0.4 s shorter.
        let c = cut(&two, 5.6, 6.0, 1.0).unwrap();
        assert_eq!((c.segments, c.encode), (3..6, false));
        assert!((c.length - 5.6).abs() < 1e-9);
        // Keyframes 4 s apart, 1.5 s from either: re-encoded, exactly.
        let four = [4.0; 5];
        let c = cut(&four, 5.5, 6.0, 1.0).unwrap();
        assert_eq!(
            (c.segments, c.offset, c.length, c.encode),
            (1..3, 1.5, 6.0, true)
        );
        assert_eq!(cut(&four, 30.0, 6.0, 1.0), None);
    }

    #[test]
    fn the_listed_segments_are_within_one_segment_of_the_range() {
        let two = [2.0; 30];
        for (start, duration) in [
            (0.0, 5.0),
            (3.0, 10.0),
            (7.2, 5.0),
            (13.9, 30.0),
            (0.0, 60.0),
        ] {
            let r = listed(&two, start, duration).unwrap();
            let total: f64 = two[r.clone()].iter().sum();
            assert!((total - duration).abs() <= 2.0, "{start} {duration}: {r:?}");
            let (cover, offset) = covering(&two, start, duration).unwrap();
            let covered: f64 = two[cover.clone()].iter().sum();
            assert!(covered - offset >= duration - 1e-9, "{start} {duration}");
            assert!((0.0..2.0).contains(&offset));
            assert!(cover.start <= r.start && cover.end >= r.end);
        }
        // Uneven segments (a reconnect's short one).
        let uneven = [2.0, 2.0, 0.6, 2.0, 2.0, 2.0];
        let r = listed(&uneven, 3.0, 5.0).unwrap();
        assert_eq!(r, 1..5);
        assert_eq!(covering(&uneven, 3.0, 5.0), Some((1..5, 1.0)));
        assert_eq!(listed(&uneven, 100.0, 5.0), None);
        assert_eq!(covering(&uneven, 100.0, 5.0), None);
    }
}
