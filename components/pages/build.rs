//! Embeds the files of the workspace's `static/` folder into the component.
//!
//! Each file is stored gzip-compressed and gets a content-hashed public name
//! (`layout.js` → `layout.<hash>.js`), so it can be cached forever: a changed file gets a
//! new name. The generated `assets.rs` (in `OUT_DIR`) holds the table the component serves
//! from, and `BUILD_ID`, a hash over every asset, template and source file, which goes
//! into the pages' ETags so that a new build never answers 304 for an old page.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let static_dir = manifest.join("../../static");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed={}", static_dir.display());
    println!("cargo:rerun-if-changed=templates");
    println!("cargo:rerun-if-changed=src");

    let mut files = Vec::new();
    walk(&static_dir, &mut files);
    files.sort();

    let mut build = Sha256::new();
    let mut table = String::from("pub static ASSETS: &[Asset] = &[\n");
    for (index, file) in files.iter().enumerate() {
        let logical = file
            .strip_prefix(&static_dir)
            .expect("walked below static/")
            .to_string_lossy()
            .replace('\\', "/");
        let bytes = std::fs::read(file).expect("static file is readable");
        let digest = hex(&Sha256::digest(&bytes));
        build.update(logical.as_bytes());
        build.update(digest.as_bytes());
        let gz_name = format!("asset{index}.gz");
        std::fs::write(out.join(&gz_name), gzip(&bytes)).expect("OUT_DIR is writable");
        writeln!(
            table,
            "    Asset {{ path: {logical:?}, hashed: {hashed:?}, content_type: {ct:?}, \
             etag: {etag:?}, gzip: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{gz_name}\")) }},",
            hashed = hashed_name(&logical, &digest[..10]),
            ct = content_type(&logical),
            etag = format!("\"{}\"", &digest[..20]),
        )
        .expect("writing to a String");
    }
    table.push_str("];\n");

    for dir in ["templates", "src"] {
        let mut sources = Vec::new();
        walk(&manifest.join(dir), &mut sources);
        sources.sort();
        for source in sources {
            build.update(std::fs::read(&source).expect("source is readable"));
        }
    }
    let build_id = hex(&build.finalize());
    writeln!(table, "pub const BUILD_ID: &str = {:?};", &build_id[..16]).expect("String");
    std::fs::write(out.join("assets.rs"), table).expect("OUT_DIR is writable");
}

fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(&path, into);
        } else {
            into.push(path);
        }
    }
}

/// `vendor/hls.light.min.js` → `vendor/hls.light.min.<hash>.js`.
fn hashed_name(logical: &str, hash: &str) -> String {
    let (dir, file) = logical.rsplit_once('/').unwrap_or(("", logical));
    let named = match file.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash}.{ext}"),
        None => format!("{file}.{hash}"),
    };
    if dir.is_empty() {
        named
    } else {
        format!("{dir}/{named}")
    }
}

fn content_type(logical: &str) -> &'static str {
    match logical.rsplit_once('.').map(|(_, ext)| ext) {
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("html") => "text/html; charset=utf-8",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// A gzip member (RFC 1952) around a raw DEFLATE stream, compressed with zopfli: slow to
/// make, smaller than zlib's best, inflated by any gzip reader.
fn gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff];
    zopfli::compress(
        zopfli::Options::default(),
        zopfli::Format::Deflate,
        data,
        &mut out,
    )
    .expect("compress into memory");
    out.extend(crc32fast::hash(data).to_le_bytes());
    out.extend((data.len() as u32).to_le_bytes());
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
