//! Build time (feature `build`): embeds the chosen files of the workspace's `static/` folder
//! into a component, from its build script.
//!
//! Each file is stored gzip-compressed and gets a content-hashed public name
//! (`layout.js` → `layout.<hash>.js`), so it can be cached forever: a changed file gets a
//! new name. The generated `assets.rs` (in `OUT_DIR`, read by [`crate::include_assets!`])
//! holds the table the component serves from, with its `build_id`, a hash over every
//! embedded file and the component's own templates and sources, which goes into the pages'
//! ETags so that a new build never answers 304 for an old page.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a component embeds.
pub struct Embed<'a> {
    /// The folder the files come from, relative to the component's manifest directory.
    pub static_dir: &'a str,
    /// The URL prefix the component serves them under, e.g. `/static/`.
    pub prefix: &'a str,
    /// Which files (by their path below `static_dir`, e.g. `vendor/hls.light.min.js`).
    pub select: &'a dyn Fn(&str) -> bool,
    /// The component's folders whose files change its pages (templates, sources): they go
    /// into the build id.
    pub sources: &'a [&'a str],
}

impl Embed<'_> {
    /// Writes `assets.rs` and the compressed files into `OUT_DIR`. Panics (fails the build)
    /// on an unreadable file.
    pub fn run(&self) {
        let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
        let static_dir = manifest.join(self.static_dir);
        println!("cargo:rerun-if-changed={}", static_dir.display());
        for dir in self.sources {
            println!("cargo:rerun-if-changed={dir}");
        }

        let mut files = Vec::new();
        walk(&static_dir, &mut files);
        files.sort();

        let mut build = Sha256::new();
        let mut table = String::from(
            "pub static ASSETS: ::page_kit::assets::Assets = ::page_kit::assets::Assets {\n    \
             files: &[\n",
        );
        let mut index = 0;
        for file in &files {
            let logical = file
                .strip_prefix(&static_dir)
                .expect("walked below the static folder")
                .to_string_lossy()
                .replace('\\', "/");
            if !(self.select)(&logical) {
                continue;
            }
            let bytes = std::fs::read(file).expect("static file is readable");
            let digest = hex(&Sha256::digest(&bytes));
            build.update(logical.as_bytes());
            build.update(digest.as_bytes());
            let gz_name = format!("asset{index}.gz");
            index += 1;
            std::fs::write(out.join(&gz_name), gzip(&bytes)).expect("OUT_DIR is writable");
            writeln!(
                table,
                "        ::page_kit::assets::Asset {{ path: {logical:?}, hashed: {hashed:?}, \
                 content_type: {ct:?}, etag: {etag:?}, \
                 gzip: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{gz_name}\")) }},",
                hashed = hashed_name(&logical, &digest[..10]),
                ct = content_type(&logical),
                etag = format!("\"{}\"", &digest[..20]),
            )
            .expect("writing to a String");
        }

        for dir in self.sources {
            let mut sources = Vec::new();
            walk(&manifest.join(dir), &mut sources);
            sources.sort();
            for source in sources {
                build.update(std::fs::read(&source).expect("source is readable"));
            }
        }
        let build_id = hex(&build.finalize());
        writeln!(
            table,
            "    ],\n    build_id: {:?},\n    prefix: {:?},\n}};",
            &build_id[..16],
            self.prefix
        )
        .expect("writing to a String");
        std::fs::write(out.join("assets.rs"), table).expect("OUT_DIR is writable");
    }
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
pub fn hashed_name(logical: &str, hash: &str) -> String {
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
pub fn gzip(data: &[u8]) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_keep_folder_and_extension() {
        assert_eq!(
            hashed_name("layout.js", "0123456789"),
            "layout.0123456789.js"
        );
        assert_eq!(
            hashed_name("vendor/hls.light.min.js", "abc"),
            "vendor/hls.light.min.abc.js"
        );
        assert_eq!(hashed_name("vendor/LICENSE", "abc"), "vendor/LICENSE.abc");
    }

    #[cfg(feature = "serve")]
    #[test]
    fn a_member_inflates_to_its_content() {
        let data = b"const a = 1; const a = 1; const a = 1;\n".repeat(50);
        let member = gzip(&data);
        assert!(member.starts_with(&[0x1f, 0x8b]) && member.len() < data.len());
        assert_eq!(crate::assets::gunzip(&member).unwrap(), data);
    }
}
