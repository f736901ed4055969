//! A live stream's HLS directory and the segments its playlists list. The stream's ffmpeg
//! ([`crate::transcode`]) writes them under the name the encoder published, the stream
//! key: `<hls>/<key>/index.m3u8` (the master playlist), `v<i>.m3u8` per rendition listing
//! `v<i>_<n>.ts` beside it, `v0` being the source; `<hls>/<stream id>` is the agent's
//! relative symlink to that directory, which viewers are served through.

use crate::logging::is_stream_id;
use domain::media::is_stream_key;
use std::io;
use std::path::{Path, PathBuf};

/// One listed segment: its sequence number and file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub number: u64,
    pub name: String,
}

/// The source rendition's media playlist: health and thumbnails read the source.
pub const SOURCE_PLAYLIST: &str = "v0.m3u8";

/// The playlist's segments, oldest first. Only plain `[v<i>_]<n>.ts` names count: a name
/// that could leave the stream's directory is never opened.
pub fn segments(playlist: &str) -> Vec<Segment> {
    playlist
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let name = line.strip_suffix(".ts")?;
            let digits = match name.strip_prefix('v').and_then(|r| r.split_once('_')) {
                Some((rendition, n))
                    if rendition.len() == 1 && rendition.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    n
                }
                _ => name,
            };
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

/// A stream's HLS directory, as viewers reach it: the link to its key's directory.
pub fn stream_dir(hls_dir: &Path, stream_id: &str) -> PathBuf {
    hls_dir.join(stream_id)
}

/// Points `<hls>/<stream id>` at `<hls>/<key>` (a relative symlink: the key's directory
/// need not exist yet). An earlier link is replaced at once, never removed first: a new
/// link is made beside it and renamed over it, so that a reconnect under another key (a
/// reset one) moves the stream's viewers to the new directory. A real directory there is
/// never replaced: that is an error.
pub fn link(hls_dir: &Path, stream_id: &str, key: &str) -> io::Result<()> {
    if !is_stream_id(stream_id) || !is_stream_key(key) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "only a stream id links to a stream key",
        ));
    }
    let link = stream_dir(hls_dir, stream_id);
    match std::fs::symlink_metadata(&link) {
        Ok(found) if found.is_dir() => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} is a directory, not a link", link.display()),
            ));
        }
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let tmp = hls_dir.join(format!("{stream_id}.{}.tmp", domain::ids::random_hex(8)));
    std::os::unix::fs::symlink(key, &tmp)?;
    // Over a directory made meanwhile, rename fails (EISDIR) and leaves it.
    std::fs::rename(&tmp, &link).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Removes the link `<hls>/<stream id>` if it still points at `key`'s directory (a later
/// publish under another key keeps its own). Answers whether it removed it.
pub fn unlink(hls_dir: &Path, stream_id: &str, key: &str) -> io::Result<bool> {
    let link = stream_dir(hls_dir, stream_id);
    match std::fs::read_link(&link) {
        Ok(target) if target == Path::new(key) => std::fs::remove_file(&link).map(|()| true),
        Ok(_) => Ok(false),
        // Nothing there, or no link (read_link answers EINVAL).
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The directory `<hls>/<stream id>` links to now: `<hls>/<key>`, or none when there is
/// no link or it names anything but a key beside it.
pub fn resolve(hls_dir: &Path, stream_id: &str) -> Option<PathBuf> {
    let target = std::fs::read_link(stream_dir(hls_dir, stream_id)).ok()?;
    let key = target.to_str().filter(|t| is_stream_key(t))?;
    Some(hls_dir.join(key))
}

/// The segments of `stream_id`'s source playlist, or none when it has none (yet).
pub async fn read(hls_dir: &Path, stream_id: &str) -> Vec<Segment> {
    read_in(&stream_dir(hls_dir, stream_id)).await
}

/// The segments of the source playlist in `dir`, or none when it has none (yet).
pub async fn read_in(dir: &Path) -> Vec<Segment> {
    match tokio::fs::read_to_string(dir.join(SOURCE_PLAYLIST)).await {
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
        // ffmpeg's, per rendition, numbered from the clock.
        let s = segments("#EXTINF:1.0,\nv0_1795791905.ts\n#EXTINF:1.0,\nv2_1795791906.ts\n");
        assert_eq!(
            s.iter().map(|s| s.number).collect::<Vec<_>>(),
            vec![1_795_791_905, 1_795_791_906]
        );
        assert!(segments("v_1.ts\nv12_1.ts\nv0_.ts\nv0_../1.ts\nva_1.ts\n").is_empty());
    }

    const SID: &str = "11111111-2222-4333-8444-555555555555";
    const KEY: &str = "0123456789abcdef0123456789abcdef";
    const NEW_KEY: &str = "fedcba9876543210fedcba9876543210";

    /// An empty directory of its own, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new() -> Dir {
            let dir = std::env::temp_dir().join(format!(
                "media-agent-playlist-{}-{}",
                std::process::id(),
                domain::ids::random_hex(4)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_stream_id_links_to_the_key_directory() {
        let hls = Dir::new();
        let hls = &hls.0;
        // Before nginx made the key's directory: a dangling link is fine.
        link(hls, SID, KEY).unwrap();
        assert_eq!(std::fs::read_link(hls.join(SID)).unwrap(), Path::new(KEY));
        assert_eq!(resolve(hls, SID), Some(hls.join(KEY)));
        std::fs::create_dir(hls.join(KEY)).unwrap();
        std::fs::write(
            hls.join(KEY).join("index.m3u8"),
            "#EXTM3U\n#EXTINF:1.0,\n0.ts\n",
        )
        .unwrap();
        assert_eq!(
            segments(&std::fs::read_to_string(stream_dir(hls, SID).join("index.m3u8")).unwrap())
                .len(),
            1
        );

        // A reconnect under a reset key moves the link; nothing is left beside it.
        link(hls, SID, NEW_KEY).unwrap();
        assert_eq!(
            std::fs::read_link(hls.join(SID)).unwrap(),
            Path::new(NEW_KEY)
        );
        assert_eq!(entries(hls), vec![KEY.to_string(), SID.to_string()]);

        // The old key's end leaves the new key's link; the new key's end removes it.
        assert!(!unlink(hls, SID, KEY).unwrap());
        assert_eq!(resolve(hls, SID), Some(hls.join(NEW_KEY)));
        assert!(unlink(hls, SID, NEW_KEY).unwrap());
        assert!(!unlink(hls, SID, NEW_KEY).unwrap());
        assert_eq!(resolve(hls, SID), None);
        assert_eq!(entries(hls), vec![KEY.to_string()]);
    }

    #[test]
    fn a_real_directory_is_never_replaced() {
        let hls = Dir::new();
        let hls = &hls.0;
        std::fs::create_dir(hls.join(SID)).unwrap();
        std::fs::write(hls.join(SID).join("index.m3u8"), "x").unwrap();
        let err = link(hls, SID, KEY).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        assert!(!err.to_string().contains(KEY), "{err}");
        assert!(!unlink(hls, SID, KEY).unwrap());
        assert_eq!(resolve(hls, SID), None);
        assert!(hls.join(SID).join("index.m3u8").is_file());
        assert_eq!(entries(hls), vec![SID.to_string()]);
    }

    #[test]
    fn only_ids_link_and_only_keys_resolve() {
        let hls = Dir::new();
        let hls = &hls.0;
        assert!(link(hls, "../x", KEY).is_err());
        assert!(link(hls, SID, "../../etc").is_err());
        assert!(link(hls, SID, SID).is_err());
        assert!(entries(hls).is_empty());
        std::os::unix::fs::symlink("/etc", hls.join(SID)).unwrap();
        assert_eq!(resolve(hls, SID), None);
    }
}
