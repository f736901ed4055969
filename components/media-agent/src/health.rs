//! Each live stream's health, sampled every [`INTERVAL`] from nginx's `/stat` (metadata,
//! bytes and media time received) and its HLS segments (keyframe interval). The latest
//! sample goes to the platform with the next update. The same poll notices a publisher
//! that left without nginx telling the agent, so that its end still reaches the platform.

use crate::agent::Agent;
use crate::playlist;
use crate::stat::{self, Stream};
use crate::ts::{self, KeyframeTracker};
use domain::media::HealthSample;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often `/stat` is read.
pub const INTERVAL: Duration = Duration::from_secs(2);
/// A publisher absent from `/stat` for this many polls in a row (once past its start) is
/// gone.
const MISSING_POLLS: u32 = 3;
/// How long after its acceptance a publisher may still be missing from `/stat`.
const START_GRACE: Duration = Duration::from_secs(10);
/// At most this many new segments are read per stream and poll.
const SEGMENTS_PER_POLL: usize = 3;

/// A stream's counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counters {
    /// Wall-clock time of the reading (any fixed origin).
    pub at: Duration,
    pub bytes_in: u64,
    /// The publisher's media timestamp (milliseconds).
    pub media_ms: Option<u64>,
}

/// Bits per second received between two readings; none over too short an interval or
/// across a counter reset.
pub fn bitrate(before: &Counters, after: &Counters) -> Option<i64> {
    let seconds = interval(before, after)?;
    let bytes = after.bytes_in.checked_sub(before.bytes_in)?;
    i64::try_from((bytes as f64 * 8.0 / seconds).round() as u64).ok()
}

/// Media seconds received per wall-clock second between two readings (1.0: real time).
pub fn media_rate(before: &Counters, after: &Counters) -> Option<f64> {
    let seconds = interval(before, after)?;
    let media = after.media_ms?.checked_sub(before.media_ms?)?;
    Some((media as f64 / 1000.0 / seconds * 1000.0).round() / 1000.0)
}

fn interval(before: &Counters, after: &Counters) -> Option<f64> {
    let seconds = after.at.checked_sub(before.at)?.as_secs_f64();
    (seconds >= 0.2).then_some(seconds)
}

/// The sample of `stream` now, given its previous reading.
pub fn sample(stream: &Stream, before: Option<&Counters>, now: &Counters) -> HealthSample {
    let video = stream.video.clone().unwrap_or_default();
    let audio = stream.audio.clone().unwrap_or_default();
    HealthSample {
        video_codec: video.codec,
        video_profile: video.profile,
        width: video.width,
        height: video.height,
        frame_rate: video.frame_rate,
        audio_codec: audio.codec,
        audio_channels: audio.channels,
        audio_sample_rate: audio.sample_rate,
        bitrate: before.and_then(|b| bitrate(b, now)),
        media_rate: before.and_then(|b| media_rate(b, now)),
        keyframe_interval: None,
        ladder: None,
    }
}

/// What the sampler keeps per publisher.
#[derive(Default)]
struct Tracked {
    counters: Option<Counters>,
    keyframes: KeyframeTracker,
    missing: u32,
}

/// Samples every live stream until the task is dropped.
pub async fn run(agent: Arc<Agent>) {
    let client = match reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("media-agent: no health sampling: {e}");
            return;
        }
    };
    let url = agent.stat_url.clone();
    let origin = Instant::now();
    let mut tracked: HashMap<String, Tracked> = HashMap::new();
    let mut ticks = tokio::time::interval(INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // No answer (nginx restarting) tells nothing about who is live.
        let streams = match client.get(&url).send().await {
            Ok(r) if r.status().is_success() => match r.text().await {
                Ok(text) => stat::parse(&text).ok(),
                Err(_) => None,
            },
            _ => None,
        };
        let at = origin.elapsed();
        let live = agent.live();
        tracked.retain(|connection, _| live.iter().any(|l| &l.connection == connection));
        for publisher in live {
            let entry = tracked.entry(publisher.connection.clone()).or_default();
            // nginx names the stream as the encoder published it: by its key.
            let stream = streams.as_ref().and_then(|all| {
                all.iter().find(|s| {
                    s.app == agent.config.rtmp_app
                        && s.name == publisher.key
                        && s.clients
                            .iter()
                            .any(|c| c.id == publisher.client_id && c.publishing)
                })
            });
            if streams.is_some() {
                if stream.is_some() {
                    entry.missing = 0;
                } else if publisher.accepted_at.elapsed() > START_GRACE {
                    entry.missing += 1;
                    if entry.missing >= MISSING_POLLS {
                        agent.finish(&publisher.connection, "it left the media server");
                        continue;
                    }
                }
            }
            let Some(stream) = stream else {
                continue;
            };
            let now = Counters {
                at,
                bytes_in: stream.bytes_in,
                media_ms: stream.publisher().and_then(|c| c.timestamp),
            };
            let mut health = sample(stream, entry.counters.as_ref(), &now);
            entry.counters = Some(now);
            scan_segments(&agent, &publisher.stream_id, &mut entry.keyframes).await;
            health.keyframe_interval = entry.keyframes.median();
            health.ladder = agent.ladder(&publisher.connection);
            agent.set_health(&publisher.connection, health);
        }
    }
}

/// Feeds the stream's segments not read yet (the newest few) to its keyframe tracker,
/// read through the stream's link (`hls/<stream id>`).
async fn scan_segments(agent: &Agent, stream_id: &str, tracker: &mut KeyframeTracker) {
    let segments = playlist::read(&agent.paths.hls, stream_id).await;
    let fresh: Vec<_> = segments
        .into_iter()
        .filter(|s| tracker.last_segment().is_none_or(|last| s.number > last))
        .collect();
    let skip = fresh.len().saturating_sub(SEGMENTS_PER_POLL);
    let dir = playlist::stream_dir(&agent.paths.hls, stream_id);
    for segment in &fresh[skip..] {
        if let Ok(data) = tokio::fs::read(dir.join(&segment.name)).await {
            tracker.feed(segment.number, &ts::keyframe_pts(&data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: f64, bytes_in: u64, media_ms: Option<u64>) -> Counters {
        Counters {
            at: Duration::from_secs_f64(secs),
            bytes_in,
            media_ms,
        }
    }

    #[test]
    fn bitrate_is_bits_over_wall_time() {
        assert_eq!(
            bitrate(&at(10.0, 1_000_000, None), &at(12.0, 1_500_000, None)),
            Some(2_000_000)
        );
        // A counter that went backwards (a new stream) or too short an interval.
        assert_eq!(bitrate(&at(10.0, 5, None), &at(12.0, 4, None)), None);
        assert_eq!(bitrate(&at(10.0, 0, None), &at(10.1, 9, None)), None);
        assert_eq!(bitrate(&at(12.0, 0, None), &at(10.0, 9, None)), None);
        assert_eq!(bitrate(&at(0.0, 7, None), &at(2.0, 7, None)), Some(0));
    }

    #[test]
    fn media_rate_is_media_time_over_wall_time() {
        assert_eq!(
            media_rate(&at(0.0, 0, Some(1_000)), &at(2.0, 0, Some(3_000))),
            Some(1.0)
        );
        assert_eq!(
            media_rate(&at(0.0, 0, Some(1_000)), &at(2.0, 0, Some(2_000))),
            Some(0.5)
        );
        assert_eq!(
            media_rate(&at(0.0, 0, Some(0)), &at(3.0, 0, Some(2_000))),
            Some(0.667)
        );
        assert_eq!(
            media_rate(&at(0.0, 0, None), &at(2.0, 0, Some(2_000))),
            None
        );
        assert_eq!(
            media_rate(&at(0.0, 0, Some(5_000)), &at(2.0, 0, Some(1))),
            None
        );
    }

    #[test]
    fn a_sample_carries_the_metadata_and_rates() {
        let streams = stat::parse(include_str!("../fixtures/stat.xml")).unwrap();
        let before = at(0.0, 100_000, Some(2_223));
        let now = at(2.0, streams[0].bytes_in, Some(4_223));
        let s = sample(&streams[0], Some(&before), &now);
        assert_eq!(s.width, Some(320));
        assert_eq!(s.height, Some(240));
        assert_eq!(s.frame_rate, Some(25.0));
        assert_eq!(s.video_codec.as_deref(), Some("H264"));
        assert_eq!(s.video_profile.as_deref(), Some("Baseline"));
        assert_eq!(s.audio_codec.as_deref(), Some("AAC"));
        assert_eq!(s.audio_channels, Some(1));
        assert_eq!(s.audio_sample_rate, Some(44_100));
        assert_eq!(s.bitrate, Some(106_012));
        assert_eq!(s.media_rate, Some(1.0));
        let first = sample(&streams[0], None, &now);
        assert_eq!(first.bitrate, None);
        assert_eq!(first.width, Some(320));
    }
}
