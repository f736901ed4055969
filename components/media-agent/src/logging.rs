//! What the agent may write to its log: never a whole stream key (it is the publisher's
//! password), at most its last four characters.

/// `…abcd`: enough of a key to tell two apart in a log.
pub fn key_hint(key: &str) -> String {
    let tail: String = key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    format!("…{tail}")
}

/// `line` with every run of 32 or more hex digits (a key, as nginx may log it) cut to its
/// hint. UUIDs (stream ids) have shorter runs and stay.
pub fn redact_keys(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() >= 32 {
            out.push_str(&key_hint(run));
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in line.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Whether `id` is a stream id as the HLS location matches it: a lowercase, hyphenated
/// UUID. The platform's answer is checked before it names a stream or a directory.
pub fn is_stream_id(id: &str) -> bool {
    id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => matches!(b, b'0'..=b'9' | b'a'..=b'f'),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_reach_the_log_whole() {
        let key = "0123456789abcdef0123456789abcdef";
        assert_eq!(key_hint(key), "…cdef");
        assert_eq!(key_hint("ab"), "…ab");
        let line =
            format!("relay: push '{key}' failed; stream 11111111-2222-4333-8444-555555555555");
        let redacted = redact_keys(&line);
        assert!(!redacted.contains(key), "{redacted}");
        assert!(redacted.contains("'…cdef'"), "{redacted}");
        assert!(redacted.contains("11111111-2222-4333-8444-555555555555"));
        assert_eq!(redact_keys("pid 1234, 0xdeadbeef"), "pid 1234, 0xdeadbeef");
        // nginx-rtmp's HLS names a stream's directory after its key.
        let hls = format!("hls: mkdir() failed on '/srv/media/hls/{key}' (13: Permission denied)");
        assert_eq!(
            redact_keys(&hls),
            "hls: mkdir() failed on '/srv/media/hls/…cdef' (13: Permission denied)"
        );
    }

    #[test]
    fn stream_ids() {
        assert!(is_stream_id("11111111-2222-4333-8444-555555555555"));
        assert!(!is_stream_id("11111111-2222-4333-8444-55555555555A"));
        assert!(!is_stream_id("11111111222243338444555555555555"));
        assert!(!is_stream_id("../../etc/passwd-aaaaaaaaaaaaaaaaaaaaa"));
        assert!(!is_stream_id(""));
    }
}
