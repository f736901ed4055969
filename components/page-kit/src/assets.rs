//! Run time: the files a component embeds (see [`crate::build`]), served under
//! content-hashed names with an immutable cache lifetime, gzip-encoded to clients that
//! accept it.

use crate::web;
use spin_sdk::http::{IncomingRequest, Response, ResponseOutparam};

/// One embedded file.
pub struct Asset {
    /// Its path below `static/`, e.g. `vendor/hls.light.min.js`.
    pub path: &'static str,
    /// Its public name below the component's prefix, e.g. `vendor/hls.light.min.0a1b2c3d4e.js`.
    pub hashed: &'static str,
    pub content_type: &'static str,
    /// A strong ETag of the uncompressed content.
    pub etag: &'static str,
    /// The content as one gzip member.
    pub gzip: &'static [u8],
}

/// A component's embedded files, as its build script generated them.
pub struct Assets {
    pub files: &'static [Asset],
    /// A hash over the files and the component's templates and sources: it goes into the
    /// pages' ETags, so that a new build never answers 304 for an old page.
    pub build_id: &'static str,
    /// The URL prefix the files are served under, e.g. `/static/`.
    pub prefix: &'static str,
}

impl Assets {
    /// The asset whose public name (below the prefix) is `hashed`.
    pub fn by_hashed_name(&self, hashed: &str) -> Option<&'static Asset> {
        self.files.iter().find(|a| a.hashed == hashed)
    }

    /// The public URL of the file at `path` below `static/`. A missing file is a build
    /// mistake; it yields a URL that answers 404 rather than a panic.
    pub fn url(&self, path: &str) -> String {
        match self.files.iter().find(|a| a.path == path) {
            Some(asset) => format!("{}{}", self.prefix, asset.hashed),
            None => format!("{}missing/{path}", self.prefix),
        }
    }

    /// Serves `hashed`: gzip-encoded to clients that accept it, decompressed to the others.
    pub fn serve(
        &self,
        hashed: &str,
        accept_encoding: Option<&str>,
        if_none_match: Option<&str>,
    ) -> Response {
        let Some(asset) = self.by_hashed_name(hashed) else {
            return web::text(404, "no such file");
        };
        let Some(answer) = answer(asset, accept_encoding, if_none_match) else {
            return web::server_error(&format!("embedded asset {} is corrupt", asset.path));
        };
        let mut builder = Response::builder();
        builder.status(answer.status);
        for (name, value) in &answer.headers {
            builder.header(*name, *value);
        }
        let body = match answer.body {
            Body::Embedded(bytes) => bytes.to_vec(),
            Body::Inflated(bytes) => bytes,
        };
        builder.body(body).build()
    }

    /// The embedded asset a `GET <prefix>...` request names, if it names one. Such a
    /// request is answered straight from the embedded bytes ([`send`]): what the
    /// component's route table would do ([`Assets::serve`]), without buffering the request
    /// or copying the asset first. Anything else, a miss included, is the route table's.
    pub fn requested(&self, req: &IncomingRequest) -> Option<&'static Asset> {
        if !matches!(req.method(), spin_sdk::http::Method::Get) {
            return None;
        }
        let target = req.path_with_query()?;
        let path = target.split('?').next().unwrap_or_default();
        let hashed = path.strip_prefix(self.prefix)?;
        self.by_hashed_name(hashed.trim_end_matches('/'))
    }
}

/// The content of a gzip member written by the build (10-byte header, raw DEFLATE,
/// CRC-32 and size trailer), inflated straight into a buffer of the size the trailer
/// records: one allocation, no regrowth and no copy of the content. zlib-rs inflates the
/// largest asset (hls.js, 389 KB) in about half the time miniz_oxide took
/// (BENCHMARKS.md, "A faster inflater").
pub fn gunzip(member: &[u8]) -> Option<Vec<u8>> {
    use zlib_rs::{InflateConfig, ReturnCode, decompress_slice};
    let trailer = member.len().checked_sub(8)?;
    let deflate = member.get(10..trailer)?;
    let size = u32::from_le_bytes(member.get(trailer + 4..)?.try_into().ok()?);
    let mut out = vec![0; usize::try_from(size).ok()?];
    let raw = InflateConfig { window_bits: -15 };
    let (written, status) = decompress_slice(&mut out, deflate, raw);
    let written = written.len();
    (status == ReturnCode::Ok && written == out.len()).then_some(out)
}

/// What a request for an asset is answered.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: Body,
}

/// An answer's body: the embedded bytes themselves, or the decompressed content.
pub enum Body {
    Embedded(&'static [u8]),
    Inflated(Vec<u8>),
}

impl Body {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Body::Embedded(bytes) => bytes,
            Body::Inflated(bytes) => bytes,
        }
    }
}

/// The answer for `asset`: gzip-encoded to clients that accept it, decompressed to the
/// others, 304 when the client holds it already. `None` if the embedded member is corrupt.
pub fn answer(
    asset: &'static Asset,
    accept_encoding: Option<&str>,
    if_none_match: Option<&str>,
) -> Option<Answer> {
    let mut headers = vec![
        ("content-type", asset.content_type),
        ("cache-control", web::CACHE_IMMUTABLE),
        ("etag", asset.etag),
        ("vary", "accept-encoding"),
        ("x-content-type-options", "nosniff"),
        ("access-control-allow-origin", "*"),
    ];
    if if_none_match.is_some_and(|h| web::none_match(h, asset.etag)) {
        return Some(Answer {
            status: 304,
            headers,
            body: Body::Embedded(&[]),
        });
    }
    let body = if accept_encoding.is_some_and(web::accepts_gzip) {
        headers.push(("content-encoding", "gzip"));
        Body::Embedded(asset.gzip)
    } else {
        Body::Inflated(gunzip(asset.gzip)?)
    };
    Some(Answer {
        status: 200,
        headers,
        body,
    })
}

/// Answers `asset` as [`Assets::serve`] does, writing its bytes to the response body in as
/// few writes as the host accepts, with their `Content-Length`.
pub fn send(asset: &'static Asset, req: &IncomingRequest, out: ResponseOutparam) {
    // The last value of a repeated header, as the route tables' requests keep it.
    let fields = req.headers();
    let header = |name: &str| {
        fields
            .get(name)
            .pop()
            .and_then(|v| String::from_utf8(v).ok())
    };
    let (accept_encoding, if_none_match) = (header("accept-encoding"), header("if-none-match"));
    let Some(answer) = answer(asset, accept_encoding.as_deref(), if_none_match.as_deref()) else {
        // `web::server_error`'s answer, written here as the asset would have been: going
        // through the route table's sender instead costs each component about 4 KB.
        eprintln!("error: embedded asset {} is corrupt", asset.path);
        let list = [
            ("content-type", "text/plain; charset=utf-8"),
            ("cache-control", web::CACHE_NONE),
            ("x-content-type-options", "nosniff"),
        ]
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()));
        let _ = write(out, 500, &list, web::SERVER_ERROR_TEXT.as_bytes());
        return;
    };
    let mut list: Vec<(String, Vec<u8>)> = answer
        .headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
        .collect();
    let body = answer.body.bytes();
    if answer.status == 200 {
        list.push(("content-length".into(), body.len().to_string().into_bytes()));
    }
    if write(out, answer.status, &list, body).is_none() {
        eprintln!("error: could not send {}", asset.path);
    }
}

/// Sets `out` to a response of `status` and `headers`, and writes `body` to it.
fn write(
    out: ResponseOutparam,
    status: u16,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
) -> Option<()> {
    let headers = spin_sdk::http::Fields::from_list(headers).ok()?;
    let response = spin_sdk::http::OutgoingResponse::new(headers);
    response.set_status_code(status).ok()?;
    let outgoing = response.body().ok()?;
    out.set(response);
    let stream = outgoing.write().ok()?;
    let mut rest = body;
    while !rest.is_empty() {
        let room = stream.check_write().ok()?;
        if room == 0 {
            stream.subscribe().block();
            continue;
        }
        let n = rest.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        stream.write(&rest[..n]).ok()?;
        rest = &rest[n..];
    }
    stream.blocking_flush().ok()?;
    drop(stream);
    spin_sdk::http::OutgoingBody::finish(outgoing, None).ok()
}

/// Every asset of `assets` inflates to its file below `static_dir`, answers under its
/// hashed name and is found by it: the check each component's tests run on its table.
pub fn check_table(assets: &Assets, static_dir: &std::path::Path) {
    assert!(!assets.files.is_empty());
    for asset in assets.files {
        assert_ne!(asset.path, asset.hashed);
        assert!(asset.gzip.starts_with(&[0x1f, 0x8b]));
        let content = gunzip(asset.gzip).expect("valid gzip");
        assert!(
            content == std::fs::read(static_dir.join(asset.path)).unwrap(),
            "{} inflates to its file",
            asset.path
        );
        assert_eq!(
            assets.by_hashed_name(asset.hashed).unwrap().path,
            asset.path
        );
        let url = assets.url(asset.path);
        assert_eq!(url, format!("{}{}", assets.prefix, asset.hashed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static FILES: &[Asset] = &[Asset {
        path: "vendor/x.js",
        hashed: "vendor/x.0123456789.js",
        content_type: "text/javascript; charset=utf-8",
        etag: "\"abc\"",
        // gzip of "hi\n" (stored block).
        gzip: &[
            0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff, 1, 3, 0, 0xfc, 0xff, b'h', b'i', b'\n', 0x7a,
            0x7a, 0x6f, 0xed, 3, 0, 0, 0,
        ],
    }];
    static ASSETS: Assets = Assets {
        files: FILES,
        build_id: "b",
        prefix: "/docs/static/",
    };

    #[test]
    fn urls_carry_the_prefix_and_the_hashed_name() {
        assert_eq!(
            ASSETS.url("vendor/x.js"),
            "/docs/static/vendor/x.0123456789.js"
        );
        assert_eq!(ASSETS.url("y.js"), "/docs/static/missing/y.js");
        assert!(ASSETS.by_hashed_name("vendor/x.js").is_none());
    }

    #[test]
    fn answers_negotiate_gzip_and_validate() {
        let asset = &FILES[0];
        let plain = answer(asset, None, None).unwrap();
        assert_eq!(plain.status, 200);
        assert_eq!(plain.body.bytes(), b"hi\n");
        assert!(
            plain
                .headers
                .contains(&("cache-control", web::CACHE_IMMUTABLE))
        );
        let gz = answer(asset, Some("gzip"), None).unwrap();
        assert_eq!(gz.body.bytes(), asset.gzip);
        assert!(gz.headers.contains(&("content-encoding", "gzip")));
        let cached = answer(asset, Some("gzip"), Some("W/\"abc\"")).unwrap();
        assert_eq!(cached.status, 304);
        assert!(cached.body.bytes().is_empty());
    }
}
