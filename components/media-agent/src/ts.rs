//! Just enough MPEG-TS to find keyframes: PAT → PMT → the H.264 stream's PID; a keyframe
//! is a PES that starts in a packet whose adaptation field sets `random_access_indicator`
//! (nginx-rtmp and ffmpeg both set it on every keyframe), and its time is the PES's PTS.
//! Reading the segments nginx already wrote costs no decoding and no extra process.

use std::collections::VecDeque;

/// The size of a transport stream packet.
pub const PACKET: usize = 188;
/// PTS ticks per second.
pub const PTS_HZ: u64 = 90_000;
/// PTS values wrap at 2^33.
const PTS_WRAP: u64 = 1 << 33;
/// `stream_type` of H.264 video in a PMT.
const STREAM_TYPE_H264: u8 = 0x1B;

/// The PTS of every keyframe of the first H.264 stream in `data` (a whole segment), in
/// stream order. Damaged or foreign packets are skipped, never a panic.
pub fn keyframe_pts(data: &[u8]) -> Vec<u64> {
    let Some(start) = sync_offset(data) else {
        return Vec::new();
    };
    let mut pmt_pids: Vec<u16> = Vec::new();
    let mut video_pid: Option<u16> = None;
    let mut keyframes = Vec::new();
    for packet in data[start..].chunks_exact(PACKET) {
        let Some(p) = Packet::parse(packet) else {
            continue;
        };
        if !p.unit_start {
            continue;
        }
        if p.pid == 0 {
            for pid in pat_programs(p.payload) {
                if !pmt_pids.contains(&pid) {
                    pmt_pids.push(pid);
                }
            }
        } else if pmt_pids.contains(&p.pid) {
            if video_pid.is_none() {
                video_pid = pmt_h264_pid(p.payload);
            }
        } else if Some(p.pid) == video_pid
            && p.random_access
            && let Some(pts) = pes_pts(p.payload)
        {
            keyframes.push(pts);
        }
    }
    keyframes
}

/// The first offset (below one packet) where packets line up on sync bytes.
fn sync_offset(data: &[u8]) -> Option<usize> {
    (0..PACKET.min(data.len()))
        .find(|&i| data[i] == 0x47 && data.get(i + PACKET).is_none_or(|b| *b == 0x47))
}

struct Packet<'a> {
    pid: u16,
    unit_start: bool,
    random_access: bool,
    payload: &'a [u8],
}

impl<'a> Packet<'a> {
    fn parse(p: &'a [u8]) -> Option<Packet<'a>> {
        if p.len() != PACKET || p[0] != 0x47 || p[1] & 0x80 != 0 {
            return None;
        }
        let unit_start = p[1] & 0x40 != 0;
        let pid = u16::from(p[1] & 0x1f) << 8 | u16::from(p[2]);
        let control = (p[3] >> 4) & 0x3;
        let mut payload_at = 4;
        let mut random_access = false;
        if control & 0x2 != 0 {
            let length = usize::from(p[4]);
            if length > 0 {
                random_access = p[5] & 0x40 != 0;
            }
            payload_at = 5 + length;
        }
        if control & 0x1 == 0 || payload_at > PACKET {
            return None;
        }
        Some(Packet {
            pid,
            unit_start,
            random_access,
            payload: &p[payload_at..],
        })
    }
}

/// The section a PSI payload starts (after its pointer field), cut to `section_length`
/// without the CRC; `None` unless its table id is `table_id`.
fn section(payload: &[u8], table_id: u8) -> Option<&[u8]> {
    let pointer = usize::from(*payload.first()?);
    let s = payload.get(1 + pointer..)?;
    if *s.first()? != table_id {
        return None;
    }
    let length = usize::from(*s.get(1)? & 0x0f) << 8 | usize::from(*s.get(2)?);
    // The section proper: after the 3-byte header, without the 4-byte CRC.
    s.get(3..(3 + length).checked_sub(4)?)
}

/// The PMT PIDs a PAT lists.
fn pat_programs(payload: &[u8]) -> Vec<u16> {
    let Some(s) = section(payload, 0x00) else {
        return Vec::new();
    };
    // transport_stream_id(2) version(1) section_number(1) last_section_number(1).
    s.get(5..)
        .unwrap_or_default()
        .chunks_exact(4)
        .filter(|e| u16::from(e[0]) << 8 | u16::from(e[1]) != 0)
        .map(|e| u16::from(e[2] & 0x1f) << 8 | u16::from(e[3]))
        .collect()
}

/// The PID of the first H.264 stream a PMT lists.
fn pmt_h264_pid(payload: &[u8]) -> Option<u16> {
    let s = section(payload, 0x02)?;
    // program_number(2) version(1) section_number(1) last(1) PCR_PID(2) info_length(2).
    let info_length = usize::from(*s.get(7)? & 0x0f) << 8 | usize::from(*s.get(8)?);
    let mut i = 9 + info_length;
    while let Some(entry) = s.get(i..i + 5) {
        let pid = u16::from(entry[1] & 0x1f) << 8 | u16::from(entry[2]);
        if entry[0] == STREAM_TYPE_H264 {
            return Some(pid);
        }
        i += 5 + (usize::from(entry[3] & 0x0f) << 8 | usize::from(entry[4]));
    }
    None
}

/// The PTS of the PES packet that starts `payload`.
fn pes_pts(payload: &[u8]) -> Option<u64> {
    if payload.get(..3)? != [0, 0, 1] || *payload.get(7)? & 0x80 == 0 {
        return None;
    }
    let b = payload.get(9..14)?;
    Some(
        (u64::from(b[0] >> 1) & 0x07) << 30
            | u64::from(b[1]) << 22
            | u64::from(b[2] >> 1) << 15
            | u64::from(b[3]) << 7
            | u64::from(b[4] >> 1),
    )
}

/// Seconds from PTS `a` to PTS `b`, across a wrap.
pub fn pts_seconds(a: u64, b: u64) -> f64 {
    (b.wrapping_sub(a) % PTS_WRAP) as f64 / PTS_HZ as f64
}

/// The keyframe interval of one stream over its latest segments: the last keyframe of a
/// segment pairs with the first of the next, when that next one is the very next segment.
#[derive(Debug, Default)]
pub struct KeyframeTracker {
    last_segment: Option<u64>,
    last_pts: Option<u64>,
    intervals: VecDeque<f64>,
}

/// Intervals the median is taken over.
const KEEP_INTERVALS: usize = 30;
/// Longer gaps are not a keyframe interval but a jump in the stream.
const MAX_INTERVAL_SECS: f64 = 60.0;

impl KeyframeTracker {
    /// The segment last fed, if any.
    pub fn last_segment(&self) -> Option<u64> {
        self.last_segment
    }

    /// Adds segment number `segment`'s keyframes.
    pub fn feed(&mut self, segment: u64, keyframes: &[u64]) {
        if self.last_segment.and_then(|s| s.checked_add(1)) != Some(segment) {
            self.last_pts = None;
        }
        for &pts in keyframes {
            if let Some(last) = self.last_pts {
                let seconds = pts_seconds(last, pts);
                if seconds > 0.0 && seconds <= MAX_INTERVAL_SECS {
                    if self.intervals.len() == KEEP_INTERVALS {
                        self.intervals.pop_front();
                    }
                    self.intervals.push_back(seconds);
                }
            }
            self.last_pts = Some(pts);
        }
        self.last_segment = Some(segment);
    }

    /// The median interval, in seconds (rounded to milliseconds).
    pub fn median(&self) -> Option<f64> {
        median(self.intervals.iter().copied()).map(|m| (m * 1000.0).round() / 1000.0)
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One packet: header, optional adaptation field (with or without RAI), payload
    /// padded with 0xff.
    fn packet(pid: u16, unit_start: bool, rai: Option<bool>, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x47,
            (if unit_start { 0x40 } else { 0 }) | (pid >> 8) as u8,
            pid as u8,
            if rai.is_some() { 0x30 } else { 0x10 },
        ];
        if let Some(rai) = rai {
            p.extend([1, if rai { 0x40 } else { 0 }]);
        }
        p.extend_from_slice(payload);
        p.resize(PACKET, 0xff);
        p
    }

    fn pat(pmt: u16) -> Vec<u8> {
        // pointer, table 0, length 13, tsid, version, sec, last, program 1 → pmt, crc.
        let mut s = vec![0, 0x00, 0xb0, 13, 0, 1, 0xc1, 0, 0, 0, 1];
        s.extend([0xe0 | (pmt >> 8) as u8, pmt as u8, 0, 0, 0, 0]);
        s
    }

    fn pmt(streams: &[(u8, u16)]) -> Vec<u8> {
        let length = 9 + streams.len() * 5 + 4;
        let mut s = vec![
            0,
            0x02,
            0xb0,
            length as u8,
            0,
            1,
            0xc1,
            0,
            0,
            0xe1,
            0x00,
            0xf0,
            0,
        ];
        for (kind, pid) in streams {
            s.extend([*kind, 0xe0 | (*pid >> 8) as u8, *pid as u8, 0xf0, 0]);
        }
        s.extend([0, 0, 0, 0]);
        s
    }

    fn pes(pts: u64) -> Vec<u8> {
        vec![
            0,
            0,
            1,
            0xe0,
            0,
            0,
            0x80,
            0x80,
            5,
            0x21 | ((pts >> 29) & 0x0e) as u8,
            (pts >> 22) as u8,
            0x01 | ((pts >> 14) & 0xfe) as u8,
            (pts >> 7) as u8,
            0x01 | ((pts << 1) & 0xfe) as u8,
        ]
    }

    #[test]
    fn finds_keyframes_in_crafted_packets() {
        let mut data = Vec::new();
        data.extend(packet(0, true, None, &pat(0x1000)));
        // An audio stream first, then the H.264 one.
        data.extend(packet(
            0x1000,
            true,
            None,
            &pmt(&[(0x0f, 0x101), (0x1b, 0x100)]),
        ));
        data.extend(packet(0x100, true, Some(true), &pes(900_000)));
        data.extend(packet(0x100, false, None, &[1, 2, 3]));
        // Not a keyframe: no random access indicator.
        data.extend(packet(0x100, true, Some(false), &pes(903_000)));
        data.extend(packet(0x100, true, None, &pes(906_000)));
        // Audio with the indicator set is not video.
        data.extend(packet(0x101, true, Some(true), &pes(907_000)));
        // A damaged packet (transport error) and a wrapped-around PTS.
        let mut damaged = packet(0x100, true, Some(true), &pes(1));
        damaged[1] |= 0x80;
        data.extend(damaged);
        data.extend(packet(0x100, true, Some(true), &pes(PTS_WRAP - 45_000)));
        assert_eq!(keyframe_pts(&data), vec![900_000, PTS_WRAP - 45_000]);
        // Leading garbage is skipped to the first sync.
        let mut shifted = vec![0x00, 0x47, 0x12];
        shifted.extend(&data);
        assert_eq!(keyframe_pts(&shifted).len(), 2);
    }

    #[test]
    fn tolerates_garbage() {
        assert!(keyframe_pts(&[]).is_empty());
        assert!(keyframe_pts(&[0x47; 1000]).is_empty());
        let mut truncated = packet(0, true, None, &pat(0x1000));
        truncated[4] = 0xff; // pointer field past the packet
        assert!(keyframe_pts(&truncated).is_empty());
        let mut af = packet(0x100, true, Some(true), &pes(1));
        af[4] = 200; // adaptation field longer than the packet
        assert!(keyframe_pts(&af).is_empty());
        for len in 0..PACKET * 3 {
            let data: Vec<u8> = (0..len).map(|i| (i * 7919 % 251) as u8).collect();
            let _ = keyframe_pts(&data);
        }
    }

    #[test]
    fn finds_keyframes_in_a_real_segment() {
        // ffmpeg -f lavfi -i testsrc=size=64x48:rate=10 -f lavfi -i sine -t 2
        //   -c:v libx264 -preset ultrafast -g 5 -sc_threshold 0 -c:a aac -f mpegts
        // (ffprobe: keyframes at PTS 137520, 182520, 227520, 272520).
        let data = include_bytes!("../fixtures/keyframes.ts");
        assert_eq!(keyframe_pts(data), vec![137_520, 182_520, 227_520, 272_520]);
        let mut tracker = KeyframeTracker::default();
        tracker.feed(7, &keyframe_pts(data));
        assert_eq!(tracker.median(), Some(0.5));
        assert_eq!(tracker.last_segment(), Some(7));
    }

    #[test]
    fn carries_the_last_keyframe_to_the_next_segment_only() {
        let mut tracker = KeyframeTracker::default();
        tracker.feed(1, &[0, 180_000]);
        tracker.feed(2, &[360_000]); // 2 s after the previous segment's last keyframe
        assert_eq!(tracker.median(), Some(2.0));
        // Segment 3 was skipped: no interval spans the gap.
        tracker.feed(4, &[9_000_000, 9_090_000]);
        assert_eq!(
            tracker.intervals.iter().copied().collect::<Vec<_>>(),
            vec![2.0, 2.0, 1.0]
        );
        assert_eq!(tracker.median(), Some(2.0));
        // Across the 33-bit wrap.
        assert!((pts_seconds(PTS_WRAP - 90_000, 90_000) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), Some(2.0));
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), Some(2.5));
        assert_eq!(median(std::iter::empty()), None);
    }
}
