//! A broadcast's replay: every segment of every rendition its publishes wrote, kept in the
//! [`MediaStore`] under `replays/<stream id>/` as the live playlists list them (the live
//! window deletes its own names, never the kept ones), and, once the broadcast has ended,
//! VOD playlists over all of them and a thumbnail. One replay spans every publish of the
//! broadcast (an encoder that dropped and came back within the reconnect window, an
//! ffmpeg the agent restarted): each new run of the HLS writer starts with a
//! discontinuity. Kept segments keep the names the live playlists gave them (numbered from
//! the clock), so that a clip can later name a range of them.
//!
//! While the stream is live, every harvest that kept something writes the replay's
//! playlists so far to the store (each rendition's `v<i>.m3u8`, an `EVENT` playlist of
//! everything kept, and the master `index.m3u8`): what is kept can always be read back
//! from the store, and an agent restarted mid-show continues the replay from there
//! ([`Archive::restore`]). Beside them, the DVR master `dvr.m3u8` is what a viewer
//! rewinding the live broadcast plays: the EVENT playlists themselves while the show fits
//! the [`Archive::dvr_window`], then the DVR playlists `d<i>.m3u8`, the last window of it
//! sliding over the same segments.

mod playlists;

pub use playlists::{
    LiveSegment, dvr_playlist, dvr_start, event_playlist, live_segments, segment_number,
    vod_playlist,
};

use crate::ladder::{self, Variant};
use crate::media_store::{MediaStore, replay_prefix};
use playlists::attribute;
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
    /// Seconds the DVR playlists reach back (the tenant's window, as the platform said).
    pub dvr_window: f64,
    /// A digest of each playlist as last written: one that did not change is not
    /// written again.
    written: std::collections::HashMap<String, u64>,
    /// The last write of the live playlists failed (said once, not at every harvest).
    live_write_failed: bool,
    /// What the live playlists were last written from (each rendition's count of kept
    /// segments, the window): a harvest that kept nothing new writes nothing, and does
    /// not even make their text.
    live_written: Option<(Vec<usize>, u64)>,
}

/// The DVR master playlist, beside the replay's own.
pub const DVR_MASTER: &str = "dvr.m3u8";

/// The DVR playlist of rendition `index`.
pub fn dvr_playlist_name(index: usize) -> String {
    format!("d{index}.m3u8")
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
            dvr_window: domain::media::DEFAULT_DVR_WINDOW_SECS as f64,
            ..Archive::default()
        }
    }

    /// The archive of a stream whose replay was being kept when this agent's last run
    /// stopped (a restart mid-show), read back from the playlists written at every
    /// harvest; none when there are none, or the replay was written (its playlists end).
    /// Each discontinuity starts a new run; a segment's size is its rendition's average
    /// (the master's `AVERAGE-BANDWIDTH`), which is all the VOD master needs of it.
    pub fn restore(store: &dyn MediaStore, stream_id: &str) -> Option<Archive> {
        let prefix = replay_prefix(stream_id);
        let read = |file: &str| {
            store
                .get(&format!("{prefix}/{file}"))
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
        };
        let master = read(ladder::MASTER)?;
        let mut archive = Archive::new(stream_id);
        let mut attributes = None;
        for line in master.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("#EXT-X-STREAM-INF:") {
                attributes = Some(rest.to_string());
                continue;
            }
            let Some(attrs) = attributes.take() else {
                continue;
            };
            // The renditions are listed in the ladder's order, as v0.m3u8, v1.m3u8...
            let index = archive.renditions.len();
            if line != ladder::media_playlist(index) {
                return None;
            }
            let text = read(line)?;
            if !text.contains("#EXT-X-PLAYLIST-TYPE:EVENT") || text.contains("#EXT-X-ENDLIST") {
                return None;
            }
            let attr = |name: &str| attribute(&attrs, name);
            let (width, height) = attr("RESOLUTION")
                .and_then(|r| r.split_once('x').map(|(w, h)| (w.parse(), h.parse())))
                .and_then(|(w, h)| Some((w.ok()?, h.ok()?)))
                .unwrap_or((0, 0));
            let average: f64 = attr("AVERAGE-BANDWIDTH")
                .and_then(|b| b.parse().ok())
                .unwrap_or(0.0);
            let mut rendition = Rendition {
                name: if index == 0 {
                    "source".into()
                } else {
                    format!("{height}p")
                },
                width,
                height,
                frame_rate: attr("FRAME-RATE")
                    .and_then(|f| f.parse().ok())
                    .unwrap_or(30.0),
                codecs: attr("CODECS")
                    .map(|c| c.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
                kept: Vec::new(),
                seen: Default::default(),
                gap: false,
            };
            let mut run = 1;
            let (mut at, mut seconds) = (None, None);
            for line in text.lines().map(str::trim) {
                if line == "#EXT-X-DISCONTINUITY" {
                    run += 1;
                } else if let Some(rest) = line.strip_prefix("#EXT-X-PROGRAM-DATE-TIME:") {
                    at = Some(rest.to_string());
                } else if let Some(rest) = line.strip_prefix("#EXTINF:") {
                    seconds = rest.split(',').next().and_then(|d| d.trim().parse().ok());
                } else if !line.is_empty() && !line.starts_with('#') {
                    let number = segment_number(line, index)?;
                    let seconds: f64 = seconds.take()?;
                    rendition.kept.push(Kept {
                        name: line.to_string(),
                        number,
                        live: number,
                        seconds,
                        bytes: (average * seconds / 8.0) as u64,
                        run,
                        at: at.take(),
                        gap_before: false,
                    });
                }
            }
            archive.runs = archive.runs.max(run);
            archive.renditions.push(rendition);
        }
        archive
            .renditions
            .iter()
            .any(|r| !r.kept.is_empty())
            .then_some(archive)
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

    /// The master playlist over the renditions that have segments, each listed as
    /// `uri(index)`; none before the first segment.
    fn master(&self, uri: impl Fn(usize) -> String) -> Option<String> {
        let mut variants = Vec::new();
        for (index, r) in self.renditions.iter().enumerate() {
            if r.kept.is_empty() {
                continue;
            }
            let sized: Vec<(f64, u64)> = r.kept.iter().map(|k| (k.seconds, k.bytes)).collect();
            let (average, peak) = ladder::bandwidth(&sized).unwrap_or((0, 0));
            variants.push(Variant {
                uri: uri(index),
                width: r.width,
                height: r.height,
                frame_rate: r.frame_rate,
                average,
                peak,
                codecs: r.codecs.clone(),
            });
        }
        if variants.is_empty() {
            return None;
        }
        let master = ladder::master(&variants);
        Some(if variants.iter().any(|v| v.width == 0) {
            master.replace(",RESOLUTION=0x0", "")
        } else {
            master
        })
    }

    /// Writes `text` as the replay's `file` unless that is what was last written there.
    fn put_changed(
        &mut self,
        store: &dyn MediaStore,
        file: &str,
        text: &str,
    ) -> Result<(), String> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        let digest = hasher.finish();
        if self.written.get(file) == Some(&digest) {
            return Ok(());
        }
        let object = format!("{}/{file}", replay_prefix(&self.stream_id));
        store
            .put(&object, text.as_bytes())
            .map_err(|e| format!("cannot write {file}: {e}"))?;
        self.written.insert(file.to_string(), digest);
        Ok(())
    }

    /// Writes the playlists of what is kept so far, those that changed since the last
    /// call: each rendition's `EVENT` playlist (`v<i>.m3u8`) and, once the show is longer
    /// than the window, its DVR playlist (`d<i>.m3u8`); then the masters (`index.m3u8`,
    /// `dvr.m3u8`), so that a master never names a playlist not written yet.
    pub fn write_live(&mut self, store: &dyn MediaStore) -> Result<(), String> {
        let state = (
            self.renditions.iter().map(|r| r.kept.len()).collect(),
            self.dvr_window.to_bits(),
        );
        if self.live_written.as_ref() == Some(&state) {
            return Ok(());
        }
        self.write_playlists(store, false)?;
        self.live_written = Some(state);
        Ok(())
    }

    /// [`Archive::write_live`] once something is kept, a failure said once until a write
    /// succeeds again (the next harvest tries again).
    pub fn publish_live(&mut self, store: &dyn MediaStore) {
        if self.renditions.iter().all(|r| r.kept.is_empty()) {
            return;
        }
        match self.write_live(store) {
            Ok(()) => self.live_write_failed = false,
            Err(e) => {
                if !std::mem::replace(&mut self.live_write_failed, true) {
                    eprintln!(
                        "media-agent: the live playlists of stream {}'s replay: {e}",
                        self.stream_id
                    );
                }
            }
        }
    }

    /// Writes every playlist: the live ones, or (`ended`) the VOD ones and DVR ones that
    /// end.
    fn write_playlists(&mut self, store: &dyn MediaStore, ended: bool) -> Result<(), String> {
        // While the show fits the window, the DVR master names the EVENT playlists
        // themselves (nothing more to write); once longer, its own sliding playlists.
        let sliding = self.slides();
        let mut texts = Vec::new();
        for (index, r) in self.renditions.iter().enumerate() {
            if r.kept.is_empty() {
                continue;
            }
            let own = if ended {
                vod_playlist(&r.kept)
            } else {
                event_playlist(&r.kept)
            };
            texts.push((ladder::media_playlist(index), own));
            if sliding {
                texts.push((
                    dvr_playlist_name(index),
                    dvr_playlist(&r.kept, self.dvr_window, ended),
                ));
            }
        }
        if texts.is_empty() {
            return Err("nothing was kept of the stream".into());
        }
        let dvr_master = if sliding {
            self.master(dvr_playlist_name)
        } else {
            self.master(ladder::media_playlist)
        };
        let masters = [
            (
                ladder::MASTER.to_string(),
                self.master(ladder::media_playlist),
            ),
            (DVR_MASTER.to_string(), dvr_master),
        ];
        texts.extend(masters.into_iter().filter_map(|(f, t)| Some((f, t?))));
        for (file, text) in texts {
            self.put_changed(store, &file, &text)?;
        }
        Ok(())
    }

    /// Whether the show is longer than the DVR window: its DVR playlists slide.
    pub fn slides(&self) -> bool {
        self.renditions
            .iter()
            .any(|r| dvr_start(&r.kept, self.dvr_window) > 0)
    }

    /// Seconds of the source rendition the DVR playlist lists now.
    pub fn dvr_seconds(&self) -> f64 {
        self.renditions.first().map_or(0.0, |r| {
            let start = dvr_start(&r.kept, self.dvr_window);
            r.kept[start..].iter().map(|k| k.seconds).sum()
        })
    }

    /// Writes the VOD playlists (`v<i>.m3u8`, the master `index.m3u8`) of every rendition
    /// that has segments, and ends the DVR playlists. Answers the replay's duration and
    /// rendition count.
    pub fn write_vod(&mut self, store: &dyn MediaStore) -> Result<(f64, u32), String> {
        for r in &mut self.renditions {
            r.kept.sort_by_key(|k| k.number);
        }
        self.write_playlists(store, true)?;
        let renditions = self
            .renditions
            .iter()
            .filter(|r| !r.kept.is_empty())
            .count();
        Ok((self.duration(), renditions as u32))
    }

    /// The source segment a thumbnail is taken from: the one a third of the way in.
    pub fn thumbnail_segment(&self) -> Option<&Kept> {
        let kept = &self.renditions.first()?.kept;
        kept.get(kept.len() / 3)
    }
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
    use playlists::tests::kept;

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

    /// A store that counts the writes of each object.
    #[derive(Debug)]
    struct Counting {
        inner: LocalStore,
        puts: std::sync::Mutex<std::collections::HashMap<String, u32>>,
    }

    impl MediaStore for Counting {
        fn keep_file(&self, dir: &Path, name: &str, object: &str) -> std::io::Result<u64> {
            self.inner.keep_file(dir, name, object)
        }
        fn put(&self, object: &str, bytes: &[u8]) -> std::io::Result<()> {
            *self.puts.lock().unwrap().entry(object.into()).or_default() += 1;
            self.inner.put(object, bytes)
        }
        fn get(&self, object: &str) -> std::io::Result<Vec<u8>> {
            self.inner.get(object)
        }
        fn exists(&self, object: &str) -> bool {
            self.inner.exists(object)
        }
        fn delete_prefix(&self, prefix: &str) -> std::io::Result<()> {
            self.inner.delete_prefix(prefix)
        }
    }

    fn text(store: &dyn MediaStore, object: &str) -> String {
        String::from_utf8(store.get(object).unwrap()).unwrap()
    }

    #[test]
    fn every_harvest_writes_the_event_playlists_so_far_and_only_what_changed() {
        let root =
            std::env::temp_dir().join(format!("media-replay-{}", domain::ids::random_hex(8)));
        let live = root.join("live");
        std::fs::create_dir_all(&live).unwrap();
        let store = Counting {
            inner: LocalStore::new(root.join("media")),
            puts: Default::default(),
        };
        let source = [RunRendition {
            name: "source".into(),
            width: 1280,
            height: 720,
        }];
        let write = |numbers: &[u64]| {
            let mut text = String::from("#EXTM3U\n");
            for n in numbers {
                std::fs::write(live.join(format!("v0_{n}.ts")), vec![0u8; 500]).unwrap();
                text.push_str(&format!("#EXTINF:2.000000,\nv0_{n}.ts\n"));
            }
            std::fs::write(live.join("v0.m3u8"), text).unwrap();
        };
        let mut archive = Archive::new("s3");
        let run = archive.next_run();
        let harvest = |archive: &mut Archive| {
            archive.harvest(&store, &live, run, &source, 30.0, None);
            archive.publish_live(&store);
        };
        // Nothing kept yet: nothing written.
        harvest(&mut archive);
        assert!(!store.exists("replays/s3/v0.m3u8"));
        write(&[1, 2]);
        harvest(&mut archive);
        let event = text(&store, "replays/s3/v0.m3u8");
        assert!(event.contains("#EXT-X-PLAYLIST-TYPE:EVENT\n"), "{event}");
        assert!(!event.contains("ENDLIST"), "{event}");
        let names =
            |t: &str| -> Vec<String> { ladder::listed(t).into_iter().map(|l| l.name).collect() };
        assert_eq!(names(&event), ["v0_1.ts", "v0_2.ts"]);
        let master = text(&store, "replays/s3/index.m3u8");
        assert!(
            master.contains("RESOLUTION=1280x720") && master.ends_with("v0.m3u8\n"),
            "{master}"
        );
        // The show fits the window: the DVR plays the EVENT playlists themselves.
        assert_eq!(text(&store, "replays/s3/dvr.m3u8"), master);
        assert!(!store.exists("replays/s3/d0.m3u8"));
        // Nothing new: nothing written again.
        harvest(&mut archive);
        harvest(&mut archive);
        assert_eq!(store.puts.lock().unwrap()["replays/s3/v0.m3u8"], 1);
        assert_eq!(store.puts.lock().unwrap()["replays/s3/index.m3u8"], 1);
        // The live window moves on; the EVENT playlist keeps everything, in order.
        std::fs::remove_file(live.join("v0_1.ts")).unwrap();
        write(&[2, 3, 4]);
        harvest(&mut archive);
        let event = text(&store, "replays/s3/v0.m3u8");
        assert_eq!(names(&event), ["v0_1.ts", "v0_2.ts", "v0_3.ts", "v0_4.ts"]);
        assert_eq!(store.puts.lock().unwrap()["replays/s3/v0.m3u8"], 2);
        assert!(!store.exists("replays/s3/d0.m3u8"));
        // A window shorter than the show (5 s of 8): the DVR master names the sliding
        // playlist of its last segments.
        archive.dvr_window = 5.0;
        archive.publish_live(&store);
        let dvr = text(&store, "replays/s3/dvr.m3u8");
        assert!(dvr.ends_with("d0.m3u8\n"), "{dvr}");
        let d0 = text(&store, "replays/s3/d0.m3u8");
        assert_eq!(names(&d0), ["v0_3.ts", "v0_4.ts"], "{d0}");
        assert!(d0.contains("#EXT-X-MEDIA-SEQUENCE:2\n"), "{d0}");
        assert_eq!(
            store.puts.lock().unwrap()["replays/s3/v0.m3u8"],
            2,
            "unchanged"
        );
        // The end: the VOD playlist replaces it, and the DVR playlist ends.
        archive.write_vod(&store).unwrap();
        let vod = text(&store, "replays/s3/v0.m3u8");
        assert!(vod.contains("#EXT-X-PLAYLIST-TYPE:VOD\n") && vod.ends_with("#EXT-X-ENDLIST\n"));
        assert_eq!(names(&vod), names(&event));
        assert!(text(&store, "replays/s3/d0.m3u8").ends_with("#EXT-X-ENDLIST\n"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_dvr_playlist_slides_over_the_last_window() {
        let mut all: Vec<Kept> = (0..10).map(|n| kept(100 + n, 2.0, 1)).collect();
        // Everything fits a long window: all of it, from the first.
        let whole = dvr_playlist(&all, 3600.0, false);
        assert!(
            whole.contains("#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-DISCONTINUITY-SEQUENCE:0\n"),
            "{whole}"
        );
        assert!(
            !whole.contains("PLAYLIST-TYPE") && !whole.contains("ENDLIST"),
            "{whole}"
        );
        assert_eq!(ladder::listed(&whole).len(), 10);
        // A 7 s window lists the last three 2 s segments (6 s); the sequence says where.
        let window = dvr_playlist(&all, 7.0, false);
        let names: Vec<String> = ladder::listed(&window)
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(names, ["v0_107.ts", "v0_108.ts", "v0_109.ts"], "{window}");
        assert!(window.contains("#EXT-X-MEDIA-SEQUENCE:7\n"), "{window}");
        // As the show goes on, the window slides: the sequence follows the first listed.
        all.push(kept(110, 2.0, 2));
        all.push(kept(111, 2.0, 2));
        let later = dvr_playlist(&all, 7.0, false);
        let names: Vec<String> = ladder::listed(&later).into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["v0_109.ts", "v0_110.ts", "v0_111.ts"], "{later}");
        assert!(
            later.contains("#EXT-X-MEDIA-SEQUENCE:9\n#EXT-X-DISCONTINUITY-SEQUENCE:0\n"),
            "{later}"
        );
        assert!(
            later.contains("v0_109.ts\n#EXT-X-DISCONTINUITY\n"),
            "{later}"
        );
        // Once the reconnect's discontinuity has left the window, it is counted.
        all.extend([kept(112, 2.0, 2), kept(113, 2.0, 2)]);
        let after = dvr_playlist(&all, 7.0, false);
        assert!(
            after.contains("#EXT-X-MEDIA-SEQUENCE:11\n#EXT-X-DISCONTINUITY-SEQUENCE:1\n"),
            "{after}"
        );
        assert!(!after.contains("#EXT-X-DISCONTINUITY\n"), "{after}");
        // A segment longer than the window still lists the newest.
        assert_eq!(ladder::listed(&dvr_playlist(&all, 1.0, true)).len(), 1);
        assert!(dvr_playlist(&all, 1.0, true).ends_with("#EXT-X-ENDLIST\n"));
        let mut archive = Archive::new("s4");
        archive.renditions.push(Rendition {
            name: "source".into(),
            width: 0,
            height: 0,
            frame_rate: 30.0,
            codecs: Vec::new(),
            kept: all,
            seen: Default::default(),
            gap: false,
        });
        archive.dvr_window = 7.0;
        assert_eq!(archive.dvr_seconds(), 6.0);
        archive.dvr_window = 4.0 * 3600.0;
        assert_eq!(archive.dvr_seconds(), 28.0);
    }

    #[test]
    fn an_archive_is_restored_from_its_stored_playlists_and_goes_on() {
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
                    text.push_str(&format!(
                        "#EXT-X-PROGRAM-DATE-TIME:2026-11-27T21:00:{n:02}.000+0000\n#EXTINF:2.000000,\nv{i}_{n}.ts\n"
                    ));
                }
                std::fs::write(live.join(format!("v{i}.m3u8")), text).unwrap();
            }
        };
        assert!(Archive::restore(&store, "s5").is_none(), "nothing stored");
        let mut first = Archive::new("s5");
        let run = first.next_run();
        write(&[10, 11]);
        first.harvest(&store, &live, run, &ladder, 30.0, Some("mp4a.40.2"));
        first.publish_live(&store);
        let run = first.next_run();
        write(&[20]);
        first.harvest(&store, &live, run, &ladder, 30.0, Some("mp4a.40.2"));
        first.publish_live(&store);
        let before = text(&store, "replays/s5/v1.m3u8");
        // The agent stops; the next one reads the archive back and the show goes on.
        drop(first);
        let mut again = Archive::restore(&store, "s5").expect("restored");
        assert_eq!(again.renditions.len(), 2);
        assert_eq!(again.renditions[1].name, "360p");
        assert_eq!(
            (again.renditions[1].width, again.renditions[1].height),
            (640, 360)
        );
        assert_eq!(again.duration(), 6.0);
        again.publish_live(&store);
        assert_eq!(
            text(&store, "replays/s5/v1.m3u8"),
            before,
            "read back as written"
        );
        let run = again.next_run();
        write(&[30, 31]);
        again.harvest(&store, &live, run, &ladder, 30.0, Some("mp4a.40.2"));
        let (duration, renditions) = again.write_vod(&store).unwrap();
        assert_eq!((duration, renditions), (10.0, 2));
        let vod = text(&store, "replays/s5/v0.m3u8");
        let names: Vec<String> = ladder::listed(&vod).into_iter().map(|l| l.name).collect();
        assert_eq!(names, [10, 11, 20, 30, 31].map(|n| format!("v0_{n}.ts")));
        assert_eq!(vod.matches("#EXT-X-DISCONTINUITY").count(), 2, "{vod}");
        let master = text(&store, "replays/s5/index.m3u8");
        assert!(master.contains("AVERAGE-BANDWIDTH=4000,"), "{master}");
        // A written replay is not taken up again.
        assert!(Archive::restore(&store, "s5").is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
