//! The files of `static/`, embedded gzip-compressed by `build.rs` and served under
//! content-hashed names with an immutable cache lifetime.

use crate::web;
use spin_sdk::http::Response;

/// One embedded file.
pub struct Asset {
    /// Its path below `static/`, e.g. `vendor/hls.light.min.js`.
    pub path: &'static str,
    /// Its public name below `/static/`, e.g. `vendor/hls.light.min.0a1b2c3d4e.js`.
    pub hashed: &'static str,
    pub content_type: &'static str,
    /// A strong ETag of the uncompressed content.
    pub etag: &'static str,
    /// The content as one gzip member.
    pub gzip: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The asset whose public name is `hashed`.
pub fn by_hashed_name(hashed: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.hashed == hashed)
}

/// The public URL of the file at `path` below `static/`. A missing file is a build
/// mistake; it yields a URL that answers 404 rather than a panic.
pub fn url(path: &str) -> String {
    match ASSETS.iter().find(|a| a.path == path) {
        Some(asset) => format!("/static/{}", asset.hashed),
        None => format!("/static/missing/{path}"),
    }
}

/// [`url`] as a template value that is not escaped again (the names are generated at
/// build time from file names below `static/`).
pub fn url_value(path: &str) -> minijinja::Value {
    minijinja::Value::from_safe_string(url(path))
}

/// The content of a gzip member written by `build.rs` (10-byte header, raw DEFLATE,
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

/// Serves `hashed`: gzip-encoded to clients that accept it, decompressed to the others.
pub fn serve(hashed: &str, accept_encoding: Option<&str>, if_none_match: Option<&str>) -> Response {
    let Some(asset) = by_hashed_name(hashed) else {
        return web::text(404, "no such file");
    };
    let Some(answer) = self::answer(asset, accept_encoding, if_none_match) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_hashed_and_decompresses() {
        assert!(!ASSETS.is_empty());
        for asset in ASSETS {
            assert_ne!(asset.path, asset.hashed);
            assert!(asset.gzip.starts_with(&[0x1f, 0x8b]));
            let content = gunzip(asset.gzip).expect("valid gzip");
            let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../static")
                .join(asset.path);
            assert!(
                content == std::fs::read(&file).unwrap(),
                "{} inflates to its file",
                asset.path
            );
            assert_eq!(by_hashed_name(asset.hashed).unwrap().path, asset.path);
        }
    }

    #[test]
    fn urls_point_at_hashed_names() {
        let layout = url("layout.js");
        assert!(layout.starts_with("/static/layout.") && layout.ends_with(".js"));
        assert_ne!(layout, "/static/layout.js");
        assert!(url("vendor/livekit-client.umd.js").starts_with("/static/vendor/"));
        assert_eq!(url("nope.js"), "/static/missing/nope.js");
    }
}
