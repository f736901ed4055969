//! The rules of stored media, as plain functions: chunking, byte ranges, entity tags,
//! file names, content types, image magic bytes and `multipart/form-data` bodies.

use std::ops::Range;

/// Bytes per key-value chunk.
pub const CHUNK_SIZE: usize = 1024 * 1024;

/// Delays before each retry when a file's bytes are not found (then 404).
pub const RETRY_DELAYS_MS: [u64; 3] = [100, 200, 300];

/// The longest accepted file name, in characters.
pub const MAX_FILENAME: usize = 255;

/// How many chunks a file of `size` bytes has.
pub fn chunk_count(size: u64) -> u64 {
    size.div_ceil(CHUNK_SIZE as u64)
}

/// The chunk indexes holding bytes `start..=end`.
pub fn chunks_for(start: u64, end: u64) -> Range<u64> {
    let chunk = CHUNK_SIZE as u64;
    (start / chunk)..(end / chunk + 1)
}

/// Splits a stream of pieces into full chunks of [`CHUNK_SIZE`] bytes (the last one may be
/// shorter: see [`Chunker::finish`]).
#[derive(Default)]
pub struct Chunker {
    buf: Vec<u8>,
}

impl Chunker {
    /// Takes a piece and answers the chunks it completed.
    pub fn push(&mut self, mut piece: &[u8]) -> Vec<Vec<u8>> {
        let mut full = Vec::new();
        while !piece.is_empty() {
            let room = CHUNK_SIZE - self.buf.len();
            let take = room.min(piece.len());
            self.buf.extend_from_slice(&piece[..take]);
            piece = &piece[take..];
            if self.buf.len() == CHUNK_SIZE {
                full.push(std::mem::replace(
                    &mut self.buf,
                    Vec::with_capacity(CHUNK_SIZE),
                ));
            }
        }
        full
    }

    /// The last, partial chunk, if any bytes are left.
    pub fn finish(self) -> Option<Vec<u8>> {
        (!self.buf.is_empty()).then_some(self.buf)
    }
}

/// What a `Range` header asks of a file of a given size.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeAsk {
    /// No usable single range: send the whole file (RFC 9110 lets a server ignore
    /// a malformed or multi-range header).
    Whole,
    /// Bytes `start..=end`.
    Part(u64, u64),
    /// A well-formed range that lies outside the file: 416.
    Unsatisfiable,
}

/// Reads a `Range` header (`bytes=a-b`, `bytes=a-`, `bytes=-n`) against `size`.
pub fn parse_range(header: Option<&str>, size: u64) -> RangeAsk {
    let Some(spec) = header.map(str::trim).and_then(|h| {
        let (unit, spec) = h.split_once('=')?;
        unit.trim().eq_ignore_ascii_case("bytes").then_some(spec)
    }) else {
        return RangeAsk::Whole;
    };
    if spec.contains(',') {
        return RangeAsk::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeAsk::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.trim(), last.trim()) {
        ("", suffix) => match number(suffix) {
            None => RangeAsk::Whole,
            Some(0) => RangeAsk::Unsatisfiable,
            Some(_) if size == 0 => RangeAsk::Unsatisfiable,
            Some(n) => RangeAsk::Part(size.saturating_sub(n), size - 1),
        },
        (first, "") => match number(first) {
            None => RangeAsk::Whole,
            Some(start) if start >= size => RangeAsk::Unsatisfiable,
            Some(start) => RangeAsk::Part(start, size - 1),
        },
        (first, last) => match (number(first), number(last)) {
            (Some(start), Some(end)) if start <= end => {
                if start >= size {
                    RangeAsk::Unsatisfiable
                } else {
                    RangeAsk::Part(start, end.min(size - 1))
                }
            }
            _ => RangeAsk::Whole,
        },
    }
}

/// The strong entity tag of content with this SHA-256.
pub fn etag(sha256: &str) -> String {
    format!("\"{sha256}\"")
}

/// Whether an `If-None-Match` header matches `etag` (weak comparison, as RFC 9110 asks).
pub fn none_match(header: Option<&str>, etag: &str) -> bool {
    let Some(header) = header else {
        return false;
    };
    let bare = etag.trim_start_matches("W/");
    header
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == bare)
}

/// Checks a file name: no path separators, no `.`/`..`, no control characters.
pub fn check_filename(name: &str) -> Result<String, &'static str> {
    let name = name.trim();
    if name.is_empty() {
        return Err("must not be empty");
    }
    if name.chars().count() > MAX_FILENAME {
        return Err("must be at most 255 characters");
    }
    if name == "." || name == ".." || name.contains("..") {
        return Err("must not contain `..`");
    }
    if name.contains(['/', '\\']) {
        return Err("must not contain path separators");
    }
    if name.chars().any(|c| c.is_control() || c == '"') {
        return Err("must not contain control characters or quotes");
    }
    Ok(name.to_string())
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
}

/// Checks a media type (`type/subtype`, optional parameters) and answers it normalised:
/// the type lowercase, parameters kept as sent.
pub fn check_content_type(value: &str) -> Option<String> {
    let (essence, params) = match value.split_once(';') {
        Some((e, p)) => (e.trim(), Some(p.trim())),
        None => (value.trim(), None),
    };
    let (kind, sub) = essence.split_once('/')?;
    if !is_token(kind) || !is_token(sub) || value.chars().any(char::is_control) {
        return None;
    }
    let essence = essence.to_ascii_lowercase();
    Some(match params {
        Some(p) if !p.is_empty() => format!("{essence}; {p}"),
        _ => essence,
    })
}

/// How a stored file is served: its type, when it is one a browser only displays (raster
/// images, audio, video, plain text); anything else (scripts, stylesheets, HTML, SVG, XML,
/// PDF, unknown types) as `application/octet-stream` and an attachment, so that a user's
/// upload can never run as the platform's script or style (`script-src 'self'`), nor
/// render as a page of its origin.
pub fn served_type(stored: &str) -> (&str, bool) {
    let essence = stored
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let displayed = match essence.split_once('/') {
        Some(("image", sub)) => !sub.contains("svg"),
        Some(("audio" | "video", _)) => true,
        _ => essence == "text/plain",
    };
    if displayed {
        (stored, false)
    } else {
        ("application/octet-stream", true)
    }
}

/// The image type given away by the first bytes: PNG, JPEG or WebP.
pub fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The boundary of a `multipart/form-data` content type.
pub fn multipart_boundary(content_type: &str) -> Option<String> {
    let mut parts = content_type.split(';');
    if !parts
        .next()?
        .trim()
        .eq_ignore_ascii_case("multipart/form-data")
    {
        return None;
    }
    parts.find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty() && b.len() <= 70)
    })
}

/// The file part and the text fields of a `multipart/form-data` body.
#[derive(Debug, PartialEq, Eq)]
pub struct Form {
    pub file: FilePart,
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct FilePart {
    pub filename: Option<String>,
    pub content_type: Option<String>,
    /// Where the part's bytes lie in the body.
    pub data: Range<usize>,
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// A parameter of a `Content-Disposition` header value (`name="x"`).
fn disposition_param(value: &str, key: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Parses a `multipart/form-data` body with exactly one file part (the part with a
/// `filename`); other parts are small text fields.
pub fn parse_form(body: &[u8], boundary: &str) -> Result<Form, &'static str> {
    let delimiter = format!("--{boundary}");
    let next_delimiter = format!("\r\n--{boundary}");
    let mut pos =
        find(body, delimiter.as_bytes(), 0).ok_or("no multipart boundary found")? + delimiter.len();
    let mut file = None;
    let mut fields = Vec::new();
    loop {
        if body.get(pos..pos + 2) == Some(b"--") {
            break;
        }
        if body.get(pos..pos + 2) != Some(b"\r\n") {
            return Err("malformed multipart body");
        }
        let head_start = pos + 2;
        let head_end = find(body, b"\r\n\r\n", head_start).ok_or("malformed part headers")?;
        let head = std::str::from_utf8(&body[head_start..head_end])
            .map_err(|_| "part headers are not UTF-8")?;
        let data_start = head_end + 4;
        let data_end = find(body, next_delimiter.as_bytes(), data_start)
            .ok_or("the multipart body is not terminated")?;
        let mut name = None;
        let mut filename = None;
        let mut content_type = None;
        for line in head.split("\r\n") {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            if key.trim().eq_ignore_ascii_case("content-disposition") {
                name = disposition_param(value, "name");
                filename = disposition_param(value, "filename");
            } else if key.trim().eq_ignore_ascii_case("content-type") {
                content_type = Some(value.trim().to_string());
            }
        }
        if filename.is_some() {
            if file.is_some() {
                return Err("only one file part is accepted");
            }
            file = Some(FilePart {
                filename,
                content_type,
                data: data_start..data_end,
            });
        } else {
            let value = std::str::from_utf8(&body[data_start..data_end])
                .map_err(|_| "a text field is not UTF-8")?;
            if value.len() > 1000 {
                return Err("a text field is too long");
            }
            fields.push((name.unwrap_or_default(), value.to_string()));
        }
        pos = data_end + next_delimiter.len();
    }
    let file = file.ok_or("no file part (a part with a filename) was sent")?;
    Ok(Form { file, fields })
}

/// Reads a `true`/`false` flag (also `1`/`0`).
pub fn parse_flag(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_displayed_types_are_served_as_themselves() {
        for shown in [
            "image/png",
            "image/jpeg",
            "audio/mpeg",
            "video/mp4",
            "text/plain; charset=utf-8",
        ] {
            assert_eq!(served_type(shown), (shown, false), "{shown}");
        }
        for active in [
            "text/javascript",
            "application/javascript",
            "text/ecmascript",
            "application/x-javascript",
            "text/css",
            "text/html",
            "application/xhtml+xml",
            "image/svg+xml",
            "text/xml",
            "application/pdf",
            "application/wasm",
            "TEXT/JAVASCRIPT; charset=utf-8",
        ] {
            assert_eq!(
                served_type(active),
                ("application/octet-stream", true),
                "{active}"
            );
        }
    }

    #[test]
    fn chunk_math() {
        assert_eq!(chunk_count(0), 0);
        assert_eq!(chunk_count(1), 1);
        assert_eq!(chunk_count(CHUNK_SIZE as u64), 1);
        assert_eq!(chunk_count(CHUNK_SIZE as u64 + 1), 2);
        assert_eq!(chunks_for(0, 0), 0..1);
        let c = CHUNK_SIZE as u64;
        assert_eq!(chunks_for(c - 1, c), 0..2);
        assert_eq!(chunks_for(2 * c + 5, 2 * c + 9), 2..3);
    }

    #[test]
    fn chunker_splits_at_chunk_boundaries() {
        let mut chunker = Chunker::default();
        let mut chunks = chunker.push(&vec![1u8; CHUNK_SIZE - 10]);
        assert!(chunks.is_empty());
        chunks.extend(chunker.push(&vec![2u8; CHUNK_SIZE + 20]));
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| c.len() == CHUNK_SIZE));
        assert_eq!(chunks[0][CHUNK_SIZE - 10], 2);
        assert_eq!(chunker.finish().map(|c| c.len()), Some(10));
        assert_eq!(Chunker::default().finish(), None);
    }

    #[test]
    fn ranges() {
        use RangeAsk::*;
        let r = |h: &str| parse_range(Some(h), 1000);
        assert_eq!(parse_range(None, 1000), Whole);
        assert_eq!(r("bytes=0-99"), Part(0, 99));
        assert_eq!(r("bytes=500-"), Part(500, 999));
        assert_eq!(r("bytes=-100"), Part(900, 999));
        assert_eq!(r("bytes=-5000"), Part(0, 999));
        assert_eq!(r("bytes=990-5000"), Part(990, 999));
        assert_eq!(r("bytes=1000-"), Unsatisfiable);
        assert_eq!(r("bytes=1000-2000"), Unsatisfiable);
        assert_eq!(r("bytes=-0"), Unsatisfiable);
        assert_eq!(r("bytes=5-1"), Whole);
        assert_eq!(r("bytes=0-1,5-6"), Whole);
        assert_eq!(r("items=0-1"), Whole);
        assert_eq!(r("bytes=a-b"), Whole);
        assert_eq!(r("bytes=+1-2"), Whole);
        assert_eq!(parse_range(Some("bytes=0-"), 0), Unsatisfiable);
    }

    #[test]
    fn entity_tags() {
        let tag = etag("abc");
        assert_eq!(tag, "\"abc\"");
        assert!(none_match(Some("\"abc\""), &tag));
        assert!(none_match(Some("W/\"abc\", \"x\""), &tag));
        assert!(none_match(Some("*"), &tag));
        assert!(!none_match(Some("\"abd\""), &tag));
        assert!(!none_match(None, &tag));
    }

    #[test]
    fn file_names() {
        assert_eq!(check_filename(" song.mp3 ").unwrap(), "song.mp3");
        for bad in [
            "",
            "..",
            "../etc/passwd",
            "a/b",
            "a\\b",
            "x\u{0}y",
            "a..b",
            "q\"uote",
        ] {
            assert!(check_filename(bad).is_err(), "{bad:?}");
        }
        assert!(check_filename(&"a".repeat(256)).is_err());
    }

    #[test]
    fn content_types() {
        assert_eq!(check_content_type("Audio/MPEG").unwrap(), "audio/mpeg");
        assert_eq!(
            check_content_type("text/plain;charset=utf-8").unwrap(),
            "text/plain; charset=utf-8"
        );
        for bad in ["", "audio", "/x", "a b/c", "audio/mp3\r\nx: y"] {
            assert!(check_content_type(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn image_magic_bytes() {
        assert_eq!(sniff_image(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(sniff_image(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff_image(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff_image(b"GIF89a"), None);
        assert_eq!(sniff_image(b"RIFF\x10\0\0\0WAVE"), None);
        assert_eq!(sniff_image(b""), None);
    }

    #[test]
    fn multipart_forms() {
        assert_eq!(
            multipart_boundary("multipart/form-data; boundary=\"xyz\"").as_deref(),
            Some("xyz")
        );
        assert_eq!(multipart_boundary("multipart/mixed; boundary=x"), None);
        assert_eq!(multipart_boundary("multipart/form-data"), None);
        let body = b"--xyz\r\nContent-Disposition: form-data; name=\"public\"\r\n\r\ntrue\r\n\
--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n\
Content-Type: application/octet-stream\r\n\r\n\x00\x01\r\n\x02\r\n--xyz--\r\n";
        let form = parse_form(body, "xyz").unwrap();
        assert_eq!(form.fields, vec![("public".into(), "true".into())]);
        assert_eq!(form.file.filename.as_deref(), Some("a.bin"));
        assert_eq!(
            form.file.content_type.as_deref(),
            Some("application/octet-stream")
        );
        assert_eq!(&body[form.file.data.clone()], b"\x00\x01\r\n\x02");
        assert!(
            parse_form(
                b"--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--xyz--",
                "xyz"
            )
            .is_err()
        );
        assert!(parse_form(b"garbage", "xyz").is_err());
        assert!(parse_form(b"--xyz\r\n\r\nunterminated", "xyz").is_err());
    }
}
