//! Child processes that must not outlive the agent, even when it is killed outright.

use std::path::{Path, PathBuf};
use tokio::process::Command;

/// A command whose process receives `signal` when the agent dies (`PR_SET_PDEATHSIG`).
/// Linux delivers it when the thread that spawned the child exits: children are spawned
/// from the runtime's worker threads, which live as long as the runtime.
pub fn command(program: &Path, signal: libc::c_int) -> Command {
    let mut command = Command::new(program);
    let parent = std::process::id();
    // SAFETY: between fork and exec only async-signal-safe calls (prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The agent died before the signal was armed.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the agent exited"));
            }
            Ok(())
        });
    }
    command.stdin(std::process::Stdio::null());
    command
}

/// `name` as a runnable file: itself when it holds a `/`, else the first match on `PATH`
/// or in `extra_dirs` (`/usr/sbin` is not on every user's `PATH`).
pub fn find_binary(name: &Path, extra_dirs: &[&str]) -> Option<PathBuf> {
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.as_os_str().is_empty() {
        return None;
    }
    if name.components().count() > 1 || name.is_absolute() {
        return runnable(name).then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra_dirs.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| runnable(candidate))
}

/// Sends `signal` to process `pid` (`group`: to its whole process group).
pub fn signal(pid: u32, signal: libc::c_int, group: bool) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 1 {
        return;
    }
    // SAFETY: plain system calls on a pid this process spawned.
    unsafe {
        if group {
            libc::killpg(pid, signal);
        } else {
            libc::kill(pid, signal);
        }
    }
}

/// Reads `child`'s standard error to its end in a task of its own, keeping the last `keep`
/// lines (each through `clean`, e.g. to redact keys): what ffmpeg said before it exited.
pub fn stderr_tail(
    child: &mut tokio::process::Child,
    keep: usize,
    clean: fn(&str) -> String,
) -> tokio::task::JoinHandle<Vec<String>> {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let stderr = child.stderr.take();
    tokio::spawn(async move {
        let mut tail = std::collections::VecDeque::new();
        if let Some(stderr) = stderr {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tail.len() == keep {
                    tail.pop_front();
                }
                tail.push_back(clean(&line));
            }
        }
        Vec::from(tail)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_binaries() {
        assert!(find_binary(Path::new("sh"), &[]).is_some());
        assert_eq!(
            find_binary(Path::new("/bin/sh"), &[]),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            find_binary(Path::new("no-such-binary-here"), &["/usr/sbin"]),
            None
        );
        assert_eq!(find_binary(Path::new("/nonexistent/nginx"), &[]), None);
        assert_eq!(find_binary(Path::new(""), &[]), None);
    }
}
