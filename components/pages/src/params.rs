//! The pages' query parameters as plain rules: parsing, defaults and allowed values.
//!
//! Every function here answers either the validated value or a short message that the
//! handler sends as a 400 plain-text answer.

use domain::validate::query_pairs;

/// The largest width or height the recording page renders at.
pub const MAX_DIMENSION: u32 = 3840;
/// The smallest width or height the recording page renders at.
pub const MIN_DIMENSION: u32 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orientation {
    Portrait,
    Landscape,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    R720p,
    R1080p,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Default,
    Grid3x3,
    Grid4x4,
    Battle,
    OneBig,
    Active,
}

/// Every layout, in the spec's order.
pub const LAYOUTS: [Layout; 6] = [
    Layout::Default,
    Layout::Grid3x3,
    Layout::Grid4x4,
    Layout::Battle,
    Layout::OneBig,
    Layout::Active,
];

impl Orientation {
    pub fn as_str(self) -> &'static str {
        match self {
            Orientation::Portrait => "portrait",
            Orientation::Landscape => "landscape",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "portrait" => Some(Orientation::Portrait),
            "landscape" => Some(Orientation::Landscape),
            _ => None,
        }
    }

    /// The default page size: 1080x1920 portrait, 1920x1080 landscape.
    pub fn default_size(self) -> (u32, u32) {
        match self {
            Orientation::Portrait => (1080, 1920),
            Orientation::Landscape => (1920, 1080),
        }
    }
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::R720p => "720p",
            Resolution::R1080p => "1080p",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "720p" => Some(Resolution::R720p),
            "1080p" => Some(Resolution::R1080p),
            _ => None,
        }
    }
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Default => "default",
            Layout::Grid3x3 => "grid3x3",
            Layout::Grid4x4 => "grid4x4",
            Layout::Battle => "battle",
            Layout::OneBig => "onebig",
            Layout::Active => "active",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        LAYOUTS.into_iter().find(|l| l.as_str() == s)
    }
}

/// The recording page's validated parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordParams {
    pub width: u32,
    pub height: u32,
    pub resolution: Resolution,
    pub orientation: Orientation,
    pub layout: Layout,
}

impl RecordParams {
    /// The canonical form: equal parameters give equal keys (used in the ETag).
    pub fn cache_key(&self) -> String {
        format!(
            "{}x{}/{}/{}/{}",
            self.width,
            self.height,
            self.resolution.as_str(),
            self.orientation.as_str(),
            self.layout.as_str()
        )
    }
}

/// The first value of `key`; an empty value counts as unset.
fn param(query: &str, key: &str) -> Option<String> {
    query_pairs(query)
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

fn dimension(query: &str, key: &str, fallback: u32) -> Result<u32, String> {
    let Some(raw) = param(query, key) else {
        return Ok(fallback);
    };
    let value = (!raw.starts_with('+'))
        .then(|| raw.parse::<u32>().ok())
        .flatten()
        .ok_or_else(|| format!("{key} must be a whole number of pixels"))?;
    if !(MIN_DIMENSION..=MAX_DIMENSION).contains(&value) {
        return Err(format!(
            "{key} must be between {MIN_DIMENSION} and {MAX_DIMENSION}"
        ));
    }
    Ok(value)
}

/// Parses the recording page's query. `system_resolution` is the `default_resolution`
/// variable; when it is unset or not an allowed value, the fallback is 1080p.
pub fn record_params(query: &str, system_resolution: Option<&str>) -> Result<RecordParams, String> {
    let orientation = match param(query, "orientation") {
        None => Orientation::Portrait,
        Some(v) => Orientation::parse(&v).ok_or("orientation must be portrait or landscape")?,
    };
    let resolution = match param(query, "resolution") {
        None => system_resolution
            .and_then(Resolution::parse)
            .unwrap_or(Resolution::R1080p),
        Some(v) => Resolution::parse(&v).ok_or("resolution must be 720p or 1080p")?,
    };
    let layout = match param(query, "layout") {
        None => Layout::Default,
        Some(v) => Layout::parse(&v)
            .ok_or("layout must be one of default, grid3x3, grid4x4, battle, onebig, active")?,
    };
    let (default_width, default_height) = orientation.default_size();
    Ok(RecordParams {
        width: dimension(query, "width", default_width)?,
        height: dimension(query, "height", default_height)?,
        resolution,
        orientation,
        layout,
    })
}

/// The embed page's options, as players take them: `autoplay`, `muted` and `controls`,
/// each `1` or `0`; `poster`, an image URL; `t`, where a replay starts; and `token`, an
/// embed token the tenant's server minted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedParams {
    /// Starts playing by itself (default no; browsers allow it muted only).
    pub autoplay: bool,
    /// Starts muted (default no).
    pub muted: bool,
    /// Shows the video's controls and the quality menu (default yes).
    pub controls: bool,
    /// An embed token (its form only checked here; the page verifies it).
    pub token: Option<String>,
    /// The poster to show before playback, and its origin (for the page's `img-src`).
    pub poster: Option<(String, String)>,
    /// Seconds into the replay or recording where playback starts (a live broadcast
    /// starts at its live edge).
    pub start: u32,
}

/// The latest start time an embed may ask for: a day into a replay.
pub const MAX_EMBED_START_SECS: u32 = 86_400;

impl EmbedParams {
    /// What the page depends on, for its ETag (a page opened by a token is never cached).
    pub fn cache_key(&self) -> String {
        let poster = self.poster.as_ref().map_or("", |(url, _)| url.as_str());
        format!(
            "a{}m{}c{}t{}p{poster}",
            u8::from(self.autoplay),
            u8::from(self.muted),
            u8::from(self.controls),
            self.start
        )
    }
}

/// Parses the embed page's query; any other parameter, or another value, is refused.
pub fn embed_params(query: &str) -> Result<EmbedParams, String> {
    let mut p = EmbedParams {
        autoplay: false,
        muted: false,
        controls: true,
        token: None,
        poster: None,
        start: 0,
    };
    for (key, value) in query_pairs(query) {
        let slot = match key.as_str() {
            "autoplay" => &mut p.autoplay,
            "muted" => &mut p.muted,
            "controls" => &mut p.controls,
            "token" => {
                p.token = Some(embed_token(&value)?);
                continue;
            }
            "poster" => {
                let origin =
                    http_origin(&value).ok_or("poster must be an absolute http or https URL")?;
                p.poster = Some((value, origin));
                continue;
            }
            "t" => {
                p.start = value
                    .parse()
                    .ok()
                    .filter(|t| *t <= MAX_EMBED_START_SECS)
                    .ok_or("t must be whole seconds from 0 to 86400")?;
                continue;
            }
            _ => {
                return Err(
                    "the embed page takes only autoplay, muted, controls, poster, t and token"
                        .into(),
                );
            }
        };
        *slot = match value.as_str() {
            "1" => true,
            "0" => false,
            _ => return Err(format!("{key} must be 1 or 0")),
        };
    }
    Ok(p)
}

/// A token as the embed page reads it: a JWT's characters, bounded.
fn embed_token(value: &str) -> Result<String, String> {
    let well_formed = !value.is_empty()
        && value.len() <= domain::player::MAX_EMBED_TOKEN_LENGTH
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if well_formed {
        Ok(value.to_string())
    } else {
        Err("token must be an embed token".into())
    }
}

/// Whether an egress-player file is played as audio or video.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    Audio,
    Video,
}

impl MediaType {
    pub fn as_str(self) -> &'static str {
        match self {
            MediaType::Audio => "audio",
            MediaType::Video => "video",
        }
    }
}

/// The egress player's validated parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressParams {
    /// The file's absolute http(s) URL, as given.
    pub file: String,
    /// `scheme://host[:port]` of the file, for the Content-Security-Policy.
    pub origin: String,
    pub media: MediaType,
}

/// The longest `file` URL accepted.
pub const MAX_FILE_URL: usize = 2048;

/// Parses the egress player's query: `file` must be an absolute http or https URL.
pub fn egress_params(query: &str) -> Result<EgressParams, String> {
    let file = param(query, "file").ok_or("file is required")?;
    let origin = http_origin(&file).ok_or("file must be an absolute http or https URL")?;
    let media = match param(query, "type").as_deref() {
        Some("audio") => MediaType::Audio,
        Some("video") => MediaType::Video,
        None => return Err("type is required (audio or video)".into()),
        Some(_) => return Err("type must be audio or video".into()),
    };
    Ok(EgressParams {
        file,
        origin,
        media,
    })
}

/// The origin of an absolute http(s) URL, or `None` when `url` is anything else: another
/// scheme, a relative reference, no valid host or port, credentials, or a character that a
/// URL may not contain unencoded (space, control, non-ASCII, `"<>\^`{|}`).
pub fn http_origin(url: &str) -> Option<String> {
    let url_char = |b: u8| b.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(&b);
    if url.len() > MAX_FILE_URL || !url.bytes().all(url_char) {
        return None;
    }
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains('@') {
        return None;
    }
    let (host, port) = split_port(authority)?;
    if !valid_host(host) {
        return None;
    }
    let host = host.to_ascii_lowercase();
    Some(match port {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

/// `host[:port]` or `[v6][:port]`; the port must be a number up to 65535.
fn split_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']')?;
        let after = &authority[close + 1..];
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (&authority[..=close], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

fn valid_host(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !v6.is_empty()
            && v6
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A stream id in a path: an SFU room name (a UUID) or a short id. Letters, digits, `-`
/// and `_`, at most 64 characters.
pub fn valid_stream_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embed_options() {
        let p = embed_params("").unwrap();
        assert_eq!((p.autoplay, p.muted, p.controls), (false, false, true));
        let p = embed_params("autoplay=1&muted=1&controls=0").unwrap();
        assert_eq!((p.autoplay, p.muted, p.controls), (true, true, false));
        assert!(embed_params("autoplay=yes").is_err());
        assert!(embed_params("controls=").is_err());
        let p = embed_params("poster=https%3A%2F%2FCdn.Shop.Example%2Fp.jpg&t=90").unwrap();
        assert_eq!(
            p.poster,
            Some((
                "https://Cdn.Shop.Example/p.jpg".to_string(),
                "https://cdn.shop.example".to_string()
            ))
        );
        assert_eq!(p.start, 90);
        for bad in [
            "poster=javascript%3Aalert(1)",
            "poster=%2Fp.jpg",
            "poster=data%3Aimage%2Fpng%3Bbase64%2CAA",
            "poster=https%3A%2F%2Fa.example%2F%22%3E",
            "t=-1",
            "t=1.5",
            "t=86401",
            "t=",
            "x=1",
        ] {
            assert!(embed_params(bad).is_err(), "{bad}");
        }
        assert_eq!(
            embed_params("token=a.b-c_d").unwrap().token.as_deref(),
            Some("a.b-c_d")
        );
        assert!(embed_params("token=").is_err());
        assert!(embed_params("token=a%20b").is_err());
        assert!(embed_params(&format!("token={}", "a".repeat(1025))).is_err());
    }

    fn record(q: &str) -> Result<RecordParams, String> {
        record_params(q, None)
    }

    #[test]
    fn record_defaults() {
        let p = record("").unwrap();
        assert_eq!((p.width, p.height), (1080, 1920));
        assert_eq!(p.orientation, Orientation::Portrait);
        assert_eq!(p.resolution, Resolution::R1080p);
        assert_eq!(p.layout, Layout::Default);
        let p = record("orientation=landscape").unwrap();
        assert_eq!((p.width, p.height), (1920, 1080));
        // One dimension given: the other keeps the orientation's default.
        let p = record("orientation=landscape&width=1280").unwrap();
        assert_eq!((p.width, p.height), (1280, 1080));
        // Empty values are unset; other parameters (url, token) are ignored.
        let p = record("width=&layout=&url=wss%3A%2F%2Fsfu&token=abc").unwrap();
        assert_eq!((p.width, p.layout), (1080, Layout::Default));
    }

    #[test]
    fn resolution_takes_the_system_setting_then_1080p() {
        assert_eq!(
            record_params("", Some("720p")).unwrap().resolution,
            Resolution::R720p
        );
        assert_eq!(
            record_params("", Some("4k")).unwrap().resolution,
            Resolution::R1080p
        );
        assert_eq!(
            record_params("resolution=1080p", Some("720p"))
                .unwrap()
                .resolution,
            Resolution::R1080p
        );
    }

    #[test]
    fn every_layout_parses() {
        for layout in LAYOUTS {
            let p = record(&format!("layout={}", layout.as_str())).unwrap();
            assert_eq!(p.layout, layout);
        }
    }

    #[test]
    fn bad_record_values() {
        for q in [
            "width=0",
            "width=63",
            "width=3841",
            "height=99999999999",
            "width=-5",
            "width=+5",
            "width=12px",
            "width=1e3",
            "width=1080.5",
            "resolution=4k",
            "resolution=1080P",
            "orientation=square",
            "layout=grid5x5",
            "layout=%3Cscript%3E",
        ] {
            let err = record(q).unwrap_err();
            assert!(!err.is_empty() && err.len() < 100, "{q}: {err}");
        }
        assert_eq!(record("width=3840&height=64").unwrap().width, 3840);
        assert_eq!(
            record("width=abc").unwrap_err(),
            "width must be a whole number of pixels"
        );
    }

    #[test]
    fn cache_key_is_canonical() {
        let a = record("layout=battle&width=1080").unwrap();
        let b = record("width=1080&layout=battle&token=x").unwrap();
        assert_eq!(a.cache_key(), b.cache_key());
        assert_eq!(a.cache_key(), "1080x1920/1080p/portrait/battle");
    }

    #[test]
    fn egress_accepts_http_urls() {
        let p =
            egress_params("file=https%3A%2F%2Fcdn.example%2Fa%2Fb.mp4%3Fx%3D1&type=video").unwrap();
        assert_eq!(p.file, "https://cdn.example/a/b.mp4?x=1");
        assert_eq!(p.origin, "https://cdn.example");
        assert_eq!(p.media, MediaType::Video);
        let p = egress_params("type=audio&file=http://127.0.0.1:8080/x.wav").unwrap();
        assert_eq!(p.origin, "http://127.0.0.1:8080");
        assert_eq!(
            http_origin("HTTPS://CDN.Example:443/x").as_deref(),
            Some("https://cdn.example:443")
        );
        assert_eq!(
            http_origin("http://[::1]:9000/a").as_deref(),
            Some("http://[::1]:9000")
        );
    }

    #[test]
    fn egress_refuses_everything_else() {
        for file in [
            "javascript:alert(1)",
            "JavaScript://%0aalert(1)",
            "data:audio/wav;base64,AAAA",
            "ftp://example.com/a.mp3",
            "//cdn.example/a.mp3",
            "/api/files/1/public",
            "https://",
            "https:///path",
            "https://user:pw@cdn.example/a.mp3",
            "https://cdn.example:99999/a.mp3",
            "https://cdn.example:/a.mp3",
            "https://cdn example/a.mp3",
            "https://cdn.example/a b.mp3",
            "https://cdn.example/\"><script>",
            "https://a..b/x",
            "https://a\"b/x",
        ] {
            assert_eq!(http_origin(file), None, "{file}");
        }
        assert_eq!(egress_params("type=audio").unwrap_err(), "file is required");
        assert_eq!(
            egress_params("file=javascript%3Aalert(1)&type=audio").unwrap_err(),
            "file must be an absolute http or https URL"
        );
        assert!(egress_params("file=https://a.example/x").is_err());
        assert!(egress_params("file=https://a.example/x&type=image").is_err());
        let long = format!("file=https://a.example/{}&type=audio", "x".repeat(3000));
        assert!(egress_params(&long).is_err());
    }

    #[test]
    fn stream_ids() {
        assert!(valid_stream_id("0f8fad5b-d9cb-469f-a165-70867728950e"));
        assert!(valid_stream_id("Ab3dEf9h"));
        assert!(!valid_stream_id(""));
        assert!(!valid_stream_id("a/b"));
        assert!(!valid_stream_id("<x>"));
        assert!(!valid_stream_id(&"a".repeat(65)));
    }
}
