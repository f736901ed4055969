//! The text of a replay's playlists: the live playlists the HLS writer writes, read with
//! their program date-times, and the playlists written over the kept segments (the
//! finished replay's VOD, the EVENT playlist of everything kept so far, the DVR's sliding
//! window), each with a discontinuity where a new run of the HLS writer starts or a
//! segment is missing.

use super::Kept;
use crate::ladder::Listed;

/// The value of attribute `name` in a playlist tag's attribute list (quotes removed).
pub(super) fn attribute(list: &str, name: &str) -> Option<String> {
    let mut rest = list;
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let (value, next) = quoted.split_once('"')?;
            (value, next.strip_prefix(',').unwrap_or(next))
        } else {
            after.split_once(',').unwrap_or((after, ""))
        };
        if key.trim() == name {
            return Some(value.to_string());
        }
        rest = next;
    }
    None
}

/// A segment a live playlist lists, with its program date-time.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSegment {
    pub listed: Listed,
    pub at: Option<String>,
}

/// The segments of a live media playlist, each with the `#EXT-X-PROGRAM-DATE-TIME` that
/// precedes it.
pub fn live_segments(playlist: &str) -> Vec<LiveSegment> {
    let mut out = Vec::new();
    let mut at = None;
    let mut seconds = None;
    for line in playlist.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#EXT-X-PROGRAM-DATE-TIME:") {
            at = Some(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("#EXTINF:") {
            seconds = rest.split(',').next().and_then(|d| d.trim().parse().ok());
        } else if !line.is_empty()
            && !line.starts_with('#')
            && let Some(seconds) = seconds.take()
        {
            out.push(LiveSegment {
                listed: Listed {
                    name: line.to_string(),
                    seconds,
                },
                at: at.take(),
            });
        }
    }
    out
}

/// The number of rendition `index`'s segment `v<index>_<n>.ts`; none for any other name.
pub fn segment_number(name: &str, index: usize) -> Option<u64> {
    let digits = name
        .strip_prefix(&format!("v{index}_"))?
        .strip_suffix(".ts")?;
    (!digits.is_empty() && digits.len() <= 12 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Whether a discontinuity comes before `kept[i]`: a new run of the HLS writer, or a
/// segment missing before it.
fn discontinuity_at(kept: &[Kept], i: usize) -> bool {
    i > 0 && (kept[i].run != kept[i - 1].run || kept[i].gap_before)
}

/// The segments of `kept` from `first` on, with their discontinuities (none before the
/// first listed), times and durations.
fn segment_lines(out: &mut String, kept: &[Kept], first: usize) {
    for (i, k) in kept.iter().enumerate().skip(first) {
        if i > first && discontinuity_at(kept, i) {
            out.push_str("#EXT-X-DISCONTINUITY\n");
        }
        if let Some(at) = &k.at {
            out.push_str(&format!("#EXT-X-PROGRAM-DATE-TIME:{at}\n"));
        }
        out.push_str(&format!("#EXTINF:{:.6},\n{}\n", k.seconds, k.name));
    }
}

fn target_duration(kept: &[Kept]) -> u64 {
    kept.iter()
        .map(|k| k.seconds)
        .fold(1.0_f64, f64::max)
        .ceil() as u64
}

/// A rendition's playlist of every kept segment: `VOD` with its end, or `EVENT` (the
/// stream goes on) without.
fn whole_playlist(kept: &[Kept], kind: &str, end: bool) -> String {
    let target = target_duration(kept);
    let mut out = format!(
        "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-PLAYLIST-TYPE:{kind}\n#EXT-X-TARGETDURATION:{target}\n\
         #EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-INDEPENDENT-SEGMENTS\n"
    );
    segment_lines(&mut out, kept, 0);
    if end {
        out.push_str("#EXT-X-ENDLIST\n");
    }
    out
}

/// A rendition's VOD playlist over `kept` (sorted): every segment, a discontinuity where
/// a new run of the HLS writer starts or a segment is missing, and the end.
pub fn vod_playlist(kept: &[Kept]) -> String {
    whole_playlist(kept, "VOD", true)
}

/// A rendition's playlist while the stream goes on: every segment kept so far, as the VOD
/// one will list them, as an `EVENT` playlist (segments are only ever added).
pub fn event_playlist(kept: &[Kept]) -> String {
    whole_playlist(kept, "EVENT", false)
}

/// The first of `kept` a window of `window` seconds reaching back from the newest lists:
/// every segment that ends within it (at least the newest).
pub fn dvr_start(kept: &[Kept], window: f64) -> usize {
    let mut seconds = 0.0;
    let mut start = kept.len();
    while start > 0 {
        seconds += kept[start - 1].seconds;
        if seconds > window + 1e-6 && start < kept.len() {
            break;
        }
        start -= 1;
    }
    start
}

/// A rendition's DVR playlist: the kept segments of the last `window` seconds, as a live
/// playlist (no playlist type: its oldest segments leave it as the stream goes on), its
/// media and discontinuity sequences counted from the first kept segment so that a player
/// follows it across reloads; with its end once the stream has ended.
pub fn dvr_playlist(kept: &[Kept], window: f64, end: bool) -> String {
    let start = dvr_start(kept, window);
    let discontinuities = (1..=start.min(kept.len().saturating_sub(1)))
        .filter(|&i| discontinuity_at(kept, i))
        .count();
    let target = target_duration(kept);
    let mut out = format!(
        "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:{target}\n\
         #EXT-X-MEDIA-SEQUENCE:{start}\n#EXT-X-DISCONTINUITY-SEQUENCE:{discontinuities}\n\
         #EXT-X-INDEPENDENT-SEGMENTS\n"
    );
    segment_lines(&mut out, kept, start);
    if end {
        out.push_str("#EXT-X-ENDLIST\n");
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ladder;

    pub(in crate::replay) fn kept(number: u64, seconds: f64, run: u64) -> Kept {
        Kept {
            name: format!("v0_{number}.ts"),
            number,
            live: number,
            gap_before: false,
            seconds,
            bytes: 250_000,
            run,
            at: Some(format!("2026-11-27T21:00:{:02}.000+0000", number % 60)),
        }
    }
    #[test]
    fn a_vod_playlist_lists_everything_ends_and_marks_each_reconnect() {
        let text = vod_playlist(&[
            kept(100, 2.0, 1),
            kept(101, 2.0, 1),
            kept(130, 1.5, 2),
            kept(131, 2.4, 2),
            kept(160, 2.0, 3),
        ]);
        assert!(text.starts_with("#EXTM3U\n"));
        assert!(text.contains("#EXT-X-PLAYLIST-TYPE:VOD\n"));
        assert!(text.ends_with("#EXT-X-ENDLIST\n"));
        assert!(text.contains("#EXT-X-TARGETDURATION:3\n"), "{text}");
        assert_eq!(text.matches("#EXT-X-DISCONTINUITY").count(), 2, "{text}");
        // The discontinuity comes before the first segment of the new run, with its time.
        assert!(text.contains(
            "v0_101.ts\n#EXT-X-DISCONTINUITY\n#EXT-X-PROGRAM-DATE-TIME:2026-11-27T21:00:10.000+0000\n#EXTINF:1.500000,\nv0_130.ts\n"
        ), "{text}");
        let listed = ladder::listed(&text);
        assert_eq!(listed.len(), 5);
        let total: f64 = listed.iter().map(|l| l.seconds).sum();
        assert!((total - 9.9).abs() < 1e-6);
        // One run: no discontinuity at all.
        assert!(!vod_playlist(&[kept(1, 2.0, 4), kept(2, 2.0, 4)]).contains("DISCONTINUITY"));
    }

    #[test]
    fn live_playlists_are_read_with_their_times_and_only_their_own_names_count() {
        let live = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n\
#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-PROGRAM-DATE-TIME:2026-11-27T21:00:00.000+0000\n#EXTINF:2.000000,\nv1_7.ts\n\
#EXTINF:2.000000,\nv1_8.ts\n";
        let s = live_segments(live);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].at.as_deref(), Some("2026-11-27T21:00:00.000+0000"));
        assert_eq!(s[1].at, None);
        assert_eq!(segment_number("v1_8.ts", 1), Some(8));
        assert_eq!(segment_number("v1_8.ts", 0), None);
        for bad in [
            "v1_.ts",
            "v1_../x.ts",
            "v1_8.ts.tmp",
            "../v1_8.ts",
            "v1_1234567890123.ts",
        ] {
            assert_eq!(segment_number(bad, 1), None, "{bad}");
        }
    }

    #[test]
    fn a_gap_inside_a_run_is_a_discontinuity() {
        let mut with_gap = vec![kept(1, 2.0, 1), kept(2, 2.0, 1), kept(4, 2.0, 1)];
        with_gap[2].gap_before = true;
        let text = vod_playlist(&with_gap);
        assert!(text.contains("v0_2.ts\n#EXT-X-DISCONTINUITY\n"), "{text}");
        assert_eq!(text.matches("#EXT-X-DISCONTINUITY").count(), 1);
    }
}
