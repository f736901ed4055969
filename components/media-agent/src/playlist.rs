//! The segments a live HLS playlist lists, as nginx-rtmp writes them (`hls_nested on`:
//! `<hls>/<stream id>/index.m3u8` listing `<n>.ts` beside it).

use std::path::{Path, PathBuf};

/// One listed segment: its sequence number and file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub number: u64,
    pub name: String,
}

/// The playlist's segments, oldest first. Only plain `<n>.ts` names count: a name that
/// could leave the stream's directory is never opened.
pub fn segments(playlist: &str) -> Vec<Segment> {
    playlist
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let digits = line.strip_suffix(".ts")?;
            if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            Some(Segment {
                number: digits.parse().ok()?,
                name: line.to_string(),
            })
        })
        .collect()
}

/// A stream's HLS directory.
pub fn stream_dir(hls_dir: &Path, stream_id: &str) -> PathBuf {
    hls_dir.join(stream_id)
}

/// The segments of `stream_id`'s playlist, or none when it has no playlist (yet).
pub async fn read(hls_dir: &Path, stream_id: &str) -> Vec<Segment> {
    match tokio::fs::read_to_string(stream_dir(hls_dir, stream_id).join("index.m3u8")).await {
        Ok(text) => segments(&text),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_nginx_rtmp_segments() {
        let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-MEDIA-SEQUENCE:0\n\
#EXT-X-TARGETDURATION:3\n#EXT-X-DISCONTINUITY\n#EXTINF:2.954,\n0.ts\n#EXTINF:2.000,\n1.ts\n\
#EXTINF:2.000,\n12.ts\n";
        let s = segments(playlist);
        assert_eq!(
            s.iter().map(|s| s.number).collect::<Vec<_>>(),
            vec![0, 1, 12]
        );
        assert_eq!(s[2].name, "12.ts");
        assert!(segments("../x.ts\n/etc/1.ts\n1.ts?x\n.ts\n-1.ts\n").is_empty());
    }
}
