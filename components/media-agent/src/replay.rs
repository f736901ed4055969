//! A broadcast's replay: every segment of every rendition its publishes wrote, kept in the
//! [`MediaStore`] under `replays/<stream id>/` as the live playlists list them (the live
//! window deletes its own names, never the kept ones), and, once the broadcast has ended,
//! VOD playlists over all of them and a thumbnail. One replay spans every publish of the
//! broadcast (an encoder that dropped and came back within the reconnect window, an
//! ffmpeg the agent restarted): each new run of the HLS writer starts with a
//! discontinuity. Kept segments keep the names the live playlists gave them (numbered from
//! the clock), so that a clip can later name a range of them.

use crate::ladder::{self, Listed, Variant};
use crate::media_store::{MediaStore, replay_prefix};
use std::path::Path;

/// One kept segment.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// Its object name under the replay's prefix (`v<i>_<n>.ts`).
    pub name: String,
    /// Its number in the replay: the live one (from the clock), unless an earlier run
    /// used it (then the next after every kept one). Kept segments sort by it.
    pub number: u64,
    /// The number the live playlist gave it.
    pub live: u64,
    pub seconds: f64,
    pub bytes: u64,
    /// The run of the HLS writer that wrote it: a new run is a discontinuity.
    pub run: u64,
    /// `#EXT-X-PROGRAM-DATE-TIME` of the segment, as the live playlist had it.
    pub at: Option<String>,
    /// A segment before it could not be kept (a discontinuity, not a failed replay).
    pub gap_before: bool,
}

/// One rendition of the replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendition {
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub frame_rate: f64,
    /// `CODECS`, from its first kept segment.
    pub codecs: Vec<String>,
    pub kept: Vec<Kept>,
    /// The (run, live number) of every segment seen, kept or not.
    seen: std::collections::HashSet<(u64, u64)>,
    /// A segment was missed since the last one kept.
    gap: bool,
}

/// What is kept of one stream so far.
#[derive(Debug, Default)]
pub struct Archive {
    pub stream_id: String,
    /// The renditions of the first publish that wrote any; a later publish adds its
    /// segments to the renditions of the same name at the same place.
    pub renditions: Vec<Rendition>,
    runs: u64,
}

/// A rendition of the run that is writing: its place in the ladder, name and size.
#[derive(Debug, Clone)]
pub struct RunRendition {
    pub name: String,
    pub width: u32,
    pub height: u32,
}

impl Archive {
    pub fn new(stream_id: &str) -> Archive {
        Archive {
            stream_id: stream_id.to_string(),
            ..Archive::default()
        }
    }

    /// A new run of the HLS writer starts: answers its number.
    pub fn next_run(&mut self) -> u64 {
        self.runs += 1;
        self.runs
    }

    /// Keeps every segment that the live playlists in `dir` list and that is not kept yet.
    pub fn harvest(
        &mut self,
        store: &dyn MediaStore,
        dir: &Path,
        run: u64,
        renditions: &[RunRendition],
        frame_rate: f64,
        audio: Option<&str>,
    ) {
        // The replay's renditions are those of the first run that wrote any: one it did
        // not start with would have a hole.
        if self.renditions.iter().all(|k| k.kept.is_empty()) {
            self.renditions.clear();
            for r in renditions {
                self.renditions.push(Rendition {
                    name: r.name.clone(),
                    width: r.width,
                    height: r.height,
                    frame_rate,
                    codecs: Vec::new(),
                    kept: Vec::new(),
                    seen: Default::default(),
                    gap: false,
                });
            }
        }
        for (index, r) in renditions.iter().enumerate() {
            if self.renditions.get(index).is_none_or(|k| k.name != r.name) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(dir.join(ladder::media_playlist(index))) else {
                continue;
            };
            for segment in live_segments(&text) {
                let Some(live) = segment_number(&segment.listed.name, index) else {
                    continue;
                };
                let rendition = &mut self.renditions[index];
                if !rendition.seen.insert((run, live)) {
                    continue;
                }
                // Numbers come from the clock: an earlier run's are smaller, unless the
                // clock moved back; a number taken is never overwritten.
                let newest = rendition.kept.iter().map(|k| k.number).max();
                let number = match newest {
                    Some(newest) if newest >= live => newest + 1,
                    _ => live,
                };
                let name = format!("v{index}_{number}.ts");
                let object = format!("{}/{name}", replay_prefix(&self.stream_id));
                match store.keep_file(dir, &segment.listed.name, &object) {
                    Ok(bytes) => {
                        if rendition.codecs.is_empty()
                            && let Ok(data) = store.get(&object)
                            && let Some(video) = ladder::avc1_codec(&data)
                        {
                            rendition.codecs.push(video);
                            rendition.codecs.extend(audio.map(str::to_string));
                        }
                        let gap_before = std::mem::take(&mut rendition.gap);
                        rendition.kept.push(Kept {
                            name,
                            number,
                            live,
                            seconds: segment.listed.seconds,
                            bytes,
                            run,
                            at: segment.at.clone(),
                            gap_before,
                        });
                    }
                    // Deleted by the live window before it was seen, or the store refused
                    // it: the replay goes on after a discontinuity.
                    Err(e) => {
                        eprintln!(
                            "media-agent: a segment of stream {} could not be kept ({e}); \
                             the replay has a gap",
                            self.stream_id
                        );
                        rendition.gap = true;
                    }
                }
            }
        }
    }

    /// Seconds kept of the source rendition.
    pub fn duration(&self) -> f64 {
        self.renditions
            .first()
            .map_or(0.0, |r| r.kept.iter().map(|k| k.seconds).sum())
    }

    /// Writes the VOD playlists (`v<i>.m3u8`, the master `index.m3u8`) of every rendition
    /// that has segments. Answers the replay's duration and rendition count.
    pub fn write_vod(&mut self, store: &dyn MediaStore) -> Result<(f64, u32), String> {
        let prefix = replay_prefix(&self.stream_id);
        let mut variants = Vec::new();
        for (index, r) in self.renditions.iter_mut().enumerate() {
            if r.kept.is_empty() {
                continue;
            }
            r.kept.sort_by_key(|k| k.number);
            let uri = ladder::media_playlist(index);
            store
                .put(&format!("{prefix}/{uri}"), vod_playlist(&r.kept).as_bytes())
                .map_err(|e| format!("cannot write a VOD playlist: {e}"))?;
            let sized: Vec<(f64, u64)> = r.kept.iter().map(|k| (k.seconds, k.bytes)).collect();
            let (average, peak) = ladder::bandwidth(&sized).unwrap_or((0, 0));
            variants.push(Variant {
                uri,
                width: r.width,
                height: r.height,
                frame_rate: r.frame_rate,
                average,
                peak,
                codecs: r.codecs.clone(),
            });
        }
        if variants.is_empty() {
            return Err("nothing was kept of the stream".into());
        }
        let mut master = ladder::master(&variants);
        if variants.iter().any(|v| v.width == 0) {
            master = master.replace(",RESOLUTION=0x0", "");
        }
        store
            .put(&format!("{prefix}/{}", ladder::MASTER), master.as_bytes())
            .map_err(|e| format!("cannot write the master playlist: {e}"))?;
        Ok((self.duration(), variants.len() as u32))
    }

    /// The source segment a thumbnail is taken from: the one a third of the way in.
    pub fn thumbnail_segment(&self) -> Option<&Kept> {
        let kept = &self.renditions.first()?.kept;
        kept.get(kept.len() / 3)
    }
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

/// A rendition's VOD playlist over `kept` (sorted): every segment, a discontinuity where
/// a new run of the HLS writer starts or a segment is missing, and the end.
pub fn vod_playlist(kept: &[Kept]) -> String {
    let target = kept
        .iter()
        .map(|k| k.seconds)
        .fold(1.0_f64, f64::max)
        .ceil() as u64;
    let mut out = format!(
        "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-TARGETDURATION:{target}\n\
         #EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-INDEPENDENT-SEGMENTS\n"
    );
    let mut run = kept.first().map(|k| k.run);
    for (i, k) in kept.iter().enumerate() {
        if Some(k.run) != run || (i > 0 && k.gap_before) {
            out.push_str("#EXT-X-DISCONTINUITY\n");
            run = Some(k.run);
        }
        if let Some(at) = &k.at {
            out.push_str(&format!("#EXT-X-PROGRAM-DATE-TIME:{at}\n"));
        }
        out.push_str(&format!("#EXTINF:{:.6},\n{}\n", k.seconds, k.name));
    }
    out.push_str("#EXT-X-ENDLIST\n");
    out
}

/// Writes the replay's `thumbnail.jpg` from its kept segment `segment` (`ffmpeg` reads it
/// from its stdin and writes the picture to its stdout).
pub async fn write_thumbnail(
    ffmpeg: &Path,
    store: &dyn MediaStore,
    stream_id: &str,
    segment: &str,
) -> Result<(), String> {
    let prefix = replay_prefix(stream_id);
    let data = store
        .get(&format!("{prefix}/{segment}"))
        .map_err(|e| format!("cannot read the segment: {e}"))?;
    let jpeg = crate::thumbnails::picture(ffmpeg, data).await?;
    store
        .put(&format!("{prefix}/thumbnail.jpg"), &jpeg)
        .map_err(|e| format!("cannot write the thumbnail: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media_store::LocalStore;

    fn kept(number: u64, seconds: f64, run: u64) -> Kept {
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
    fn an_archive_keeps_every_segment_across_runs_and_writes_the_vod() {
        let root =
            std::env::temp_dir().join(format!("media-replay-{}", domain::ids::random_hex(8)));
        let live = root.join("live");
        std::fs::create_dir_all(&live).unwrap();
        let store = LocalStore::new(root.join("media"));
        let ladder = [
            RunRendition {
                name: "source".into(),
                width: 1280,
                height: 720,
            },
            RunRendition {
                name: "360p".into(),
                width: 640,
                height: 360,
            },
        ];
        let write = |numbers: &[u64]| {
            for i in 0..2 {
                let mut text = String::from("#EXTM3U\n");
                for n in numbers {
                    std::fs::write(live.join(format!("v{i}_{n}.ts")), vec![0u8; 1000]).unwrap();
                    text.push_str(&format!("#EXTINF:2.000000,\nv{i}_{n}.ts\n"));
                }
                std::fs::write(live.join(format!("v{i}.m3u8")), text).unwrap();
            }
        };
        let mut archive = Archive::new("s1");
        let first = archive.next_run();
        write(&[10, 11, 12]);
        archive.harvest(&store, &live, first, &ladder, 30.0, Some("mp4a.40.2"));
        // The live window moves on and deletes the oldest; the replay keeps it.
        std::fs::remove_file(live.join("v0_10.ts")).unwrap();
        write(&[11, 12, 13]);
        archive.harvest(&store, &live, first, &ladder, 30.0, Some("mp4a.40.2"));
        let second = archive.next_run();
        write(&[40, 41]);
        archive.harvest(&store, &live, second, &ladder, 30.0, Some("mp4a.40.2"));
        let (duration, renditions) = archive.write_vod(&store).unwrap();
        assert_eq!((duration, renditions), (12.0, 2));
        for i in 0..2 {
            let text =
                String::from_utf8(store.get(&format!("replays/s1/v{i}.m3u8")).unwrap()).unwrap();
            let names: Vec<String> = ladder::listed(&text).into_iter().map(|l| l.name).collect();
            assert_eq!(
                names,
                [10, 11, 12, 13, 40, 41].map(|n| format!("v{i}_{n}.ts")),
                "{text}"
            );
            assert_eq!(text.matches("#EXT-X-DISCONTINUITY").count(), 1);
            for name in names {
                assert!(store.exists(&format!("replays/s1/{name}")), "{name}");
            }
        }
        let master = String::from_utf8(store.get("replays/s1/index.m3u8").unwrap()).unwrap();
        assert!(master.contains("RESOLUTION=1280x720"), "{master}");
        assert!(master.contains("v0.m3u8\n") && master.contains("v1.m3u8\n"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_missed_segment_is_a_gap_and_a_reused_number_is_never_overwritten() {
        let root =
            std::env::temp_dir().join(format!("media-replay-{}", domain::ids::random_hex(8)));
        let live = root.join("live");
        std::fs::create_dir_all(&live).unwrap();
        let store = LocalStore::new(root.join("media"));
        let source = [RunRendition {
            name: "source".into(),
            width: 0,
            height: 0,
        }];
        let mut archive = Archive::new("s2");
        // Nothing kept of a stream whose only segment was gone: no replay.
        let run = archive.next_run();
        std::fs::write(live.join("v0.m3u8"), "#EXTINF:2.0,\nv0_5.ts\n").unwrap();
        archive.harvest(&store, &live, run, &source, 30.0, None);
        assert!(archive.write_vod(&store).is_err(), "nothing kept");
        // v0_6 is gone before it is seen: the replay goes on after a discontinuity.
        std::fs::write(live.join("v0_7.ts"), b"seven").unwrap();
        std::fs::write(live.join("v0_8.ts"), b"eight").unwrap();
        std::fs::write(
            live.join("v0.m3u8"),
            "#EXTINF:2.0,\nv0_6.ts\n#EXTINF:2.0,\nv0_7.ts\n#EXTINF:2.0,\nv0_8.ts\n",
        )
        .unwrap();
        archive.harvest(&store, &live, run, &source, 30.0, None);
        // A later run whose clock-numbered names an earlier one used (the clock moved back).
        let again = archive.next_run();
        // ffmpeg writes each segment new (a temporary file renamed over the name).
        std::fs::remove_file(live.join("v0_8.ts")).unwrap();
        std::fs::write(live.join("v0_8.ts"), b"eight again").unwrap();
        std::fs::write(live.join("v0_9.ts"), b"nine").unwrap();
        std::fs::write(
            live.join("v0.m3u8"),
            "#EXTINF:2.0,\nv0_8.ts\n#EXTINF:2.0,\nv0_9.ts\n",
        )
        .unwrap();
        archive.harvest(&store, &live, again, &source, 30.0, None);
        assert_eq!(archive.write_vod(&store).unwrap(), (8.0, 1));
        let text = String::from_utf8(store.get("replays/s2/v0.m3u8").unwrap()).unwrap();
        let names: Vec<String> = ladder::listed(&text).into_iter().map(|l| l.name).collect();
        assert_eq!(
            names,
            ["v0_7.ts", "v0_8.ts", "v0_9.ts", "v0_10.ts"],
            "{text}"
        );
        assert_eq!(store.get("replays/s2/v0_8.ts").unwrap(), b"eight");
        assert_eq!(store.get("replays/s2/v0_9.ts").unwrap(), b"eight again");
        assert_eq!(store.get("replays/s2/v0_10.ts").unwrap(), b"nine");
        // The second run starts after a discontinuity; the gap before v0_7 is at the start.
        assert_eq!(text.matches("#EXT-X-DISCONTINUITY").count(), 1, "{text}");
        assert!(text.contains("v0_8.ts\n#EXT-X-DISCONTINUITY\n"), "{text}");
        std::fs::remove_dir_all(&root).unwrap();
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
