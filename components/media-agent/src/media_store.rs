//! Where the media that outlives a live stream is kept: a replay's segments, its VOD
//! playlists and thumbnail. Everything goes through [`MediaStore`], objects named by
//! slash-separated paths (`replays/<stream id>/v0_1795791905.ts`). Two stores: the
//! default [`LocalStore`], a directory beside nginx's `hls/` that nginx serves (read-only)
//! from, and [`s3::S3Store`], an S3-compatible bucket written through a local spool, which
//! nginx reaches through the agent's loopback reader (`hooks.rs`).

pub mod bucket;
pub mod s3;
pub mod sigv4;

use crate::thumbnails::at;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The stored media of one stream's replay live under `replays/<stream id>/`.
pub fn replay_prefix(stream_id: &str) -> String {
    format!("replays/{stream_id}")
}

pub trait MediaStore: Send + Sync + std::fmt::Debug {
    /// Keeps the regular file `name` of the directory `dir` (neither followed if a link)
    /// as `object`; answers its size in bytes. An object that exists is replaced.
    fn keep_file(&self, dir: &Path, name: &str, object: &str) -> io::Result<u64>;
    /// Writes `bytes` as `object`; a reader sees the old object or the new one, never half.
    fn put(&self, object: &str, bytes: &[u8]) -> io::Result<()>;
    fn get(&self, object: &str) -> io::Result<Vec<u8>>;
    fn exists(&self, object: &str) -> bool;
    /// Deletes every object under `prefix` (nothing there is not an error).
    fn delete_prefix(&self, prefix: &str) -> io::Result<()>;
    /// Whether everything written under `prefix` (and its deletions) is in the store
    /// itself, not only in a local spool: a store that writes in place always is.
    fn flushed(&self, _prefix: &str) -> bool {
        true
    }
    /// Objects (and deletions) written locally and not yet in the store.
    fn pending(&self) -> usize {
        0
    }
}

/// The store the settings choose: the bucket of `s3` (spooling in `<state_dir>/spool`),
/// or the local directory `media_dir`.
pub fn open(
    s3: Option<s3::S3Settings>,
    media_dir: &Path,
    state_dir: &Path,
) -> io::Result<std::sync::Arc<dyn MediaStore>> {
    Ok(match s3 {
        Some(settings) => {
            let spool = state_dir.join("spool");
            let store = s3::S3Store::new(settings, &spool)?;
            if store.pending() > 0 {
                eprintln!(
                    "media-agent: {} objects left in the spool ({}) go to the media store",
                    store.pending(),
                    spool.display()
                );
            }
            std::sync::Arc::new(store)
        }
        None => std::sync::Arc::new(LocalStore::new(media_dir.to_path_buf())),
    })
}

/// Whether `object` is a path the store takes: components of `[A-Za-z0-9._-]`, none
/// empty or starting with a dot (no `..`, nothing hidden, nothing absolute).
pub fn is_object_name(object: &str) -> bool {
    !object.is_empty()
        && object.len() <= 512
        && object.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
}

fn checked(object: &str) -> io::Result<&str> {
    if is_object_name(object) {
        Ok(object)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a media object's name",
        ))
    }
}

/// The store in a local directory (the media server's working directory, `media/`):
/// objects are files, made readable by nginx's workers (0644 in 0755 directories). A kept
/// segment is a hard link to the file ffmpeg wrote (a copy across file systems): the live
/// window deleting its own name leaves the replay's.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// The store in `root` (made with the first object).
    pub fn new(root: PathBuf) -> LocalStore {
        LocalStore { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The object's file, its directories made.
    fn place(&self, object: &str) -> io::Result<PathBuf> {
        let path = self.root.join(checked(object)?);
        make_dir(&self.root)?;
        if let Some(parent) = path.parent() {
            let mut dir = self.root.clone();
            for part in parent
                .strip_prefix(&self.root)
                .map_err(io::Error::other)?
                .components()
            {
                dir.push(part);
                make_dir(&dir)?;
            }
        }
        Ok(path)
    }
}

/// A directory nginx's workers can read, made if missing; a link in its place is refused.
fn make_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::symlink_metadata(dir) {
        Ok(found) if found.is_dir() => {}
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir_all(dir)?,
        Err(e) => return Err(e),
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
}

fn c(path: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::ErrorKind::InvalidInput.into())
}

impl MediaStore for LocalStore {
    fn keep_file(&self, dir: &Path, name: &str, object: &str) -> io::Result<u64> {
        if name.contains('/') || name.starts_with('.') {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let dest = self.place(object)?;
        // Opened without following links, and only a regular file: ffmpeg's directory
        // is never a way to link something else into the store.
        let dir_fd = at::open_dir(dir)?;
        let source = at::open_file(&dir_fd, name)?;
        let size = source.metadata()?.len();
        let tmp = dest.with_extension(format!("{}.tmp", domain::ids::random_hex(6)));
        let (name_c, tmp_c) = (c(Path::new(name))?, c(&tmp)?);
        // SAFETY: valid descriptors and C strings; the result is checked. Flags 0: a link
        // named `name` would be linked itself, never followed (and open_file refused it).
        let linked = unsafe {
            libc::linkat(
                dir_fd.as_raw_fd(),
                name_c.as_ptr(),
                libc::AT_FDCWD,
                tmp_c.as_ptr(),
                0,
            )
        };
        if linked != 0 {
            // Another file system, or hard links refused: a copy.
            let mut source = source;
            let mut out = std::fs::File::create(&tmp)?;
            io::copy(&mut source, &mut out)?;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))
            .and_then(|()| std::fs::rename(&tmp, &dest))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })?;
        Ok(size)
    }

    fn put(&self, object: &str, bytes: &[u8]) -> io::Result<()> {
        let dest = self.place(object)?;
        let parent = dest.parent().ok_or(io::ErrorKind::InvalidInput)?;
        let name = dest
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or(io::ErrorKind::InvalidInput)?;
        at::replace(&at::open_dir(parent)?, name, bytes, 0o644)
    }

    fn get(&self, object: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.root.join(checked(object)?))
    }

    fn exists(&self, object: &str) -> bool {
        is_object_name(object) && self.root.join(object).is_file()
    }

    fn delete_prefix(&self, prefix: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(self.root.join(checked(prefix)?)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("media-store-{}", domain::ids::random_hex(8)));
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    #[test]
    fn kept_segments_survive_the_live_window() {
        let root = dir();
        let live = root.join("live");
        std::fs::create_dir(&live).unwrap();
        std::fs::write(live.join("v0_1.ts"), b"segment").unwrap();
        let store = LocalStore::new(root.join("media"));
        let size = store
            .keep_file(&live, "v0_1.ts", "replays/s/v0_1.ts")
            .unwrap();
        assert_eq!(size, 7);
        // The live window deletes its name: the store's stays.
        std::fs::remove_file(live.join("v0_1.ts")).unwrap();
        assert_eq!(store.get("replays/s/v0_1.ts").unwrap(), b"segment");
        store.put("replays/s/index.m3u8", b"#EXTM3U\n").unwrap();
        assert!(store.exists("replays/s/index.m3u8"));
        store.delete_prefix("replays/s").unwrap();
        assert!(!store.exists("replays/s/v0_1.ts"));
        store.delete_prefix("replays/s").unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn names_that_leave_the_store_and_linked_sources_are_refused() {
        let root = dir();
        let store = LocalStore::new(root.join("media"));
        for bad in ["", "../x", "a/../b", "/etc/x", "a//b", ".hidden", "a/b c"] {
            assert!(!is_object_name(bad), "{bad}");
            assert!(store.put(bad, b"x").is_err(), "{bad}");
        }
        std::fs::write(root.join("secret"), b"not media").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), root.join("v0_2.ts")).unwrap();
        assert!(
            store
                .keep_file(&root, "v0_2.ts", "replays/s/v0_2.ts")
                .is_err()
        );
        assert!(
            store
                .keep_file(&root, "../secret", "replays/s/x.ts")
                .is_err()
        );
        assert!(!store.exists("replays/s/v0_2.ts"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
