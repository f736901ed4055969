//! The files of `static/` the pages use, embedded gzip-compressed by `build.rs` and served
//! under content-hashed names with an immutable cache lifetime (`page_kit::assets`).

page_kit::include_assets!();

/// A hash over the embedded files, templates and sources, for the pages' ETags.
pub const BUILD_ID: &str = ASSETS.build_id;

/// The public URL of the file at `path` below `static/`. A missing file is a build
/// mistake; it yields a URL that answers 404 rather than a panic.
pub fn url(path: &str) -> String {
    ASSETS.url(path)
}

/// [`url`] as a template value that is not escaped again (the names are generated at
/// build time from file names below `static/`).
pub fn url_value(path: &str) -> minijinja::Value {
    minijinja::Value::from_safe_string(url(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_hashed_and_decompresses() {
        let static_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../static");
        page_kit::assets::check_table(&ASSETS, &static_dir);
    }

    #[test]
    fn urls_point_at_hashed_names() {
        let layout = url("layout.js");
        assert!(layout.starts_with("/static/layout.") && layout.ends_with(".js"));
        assert_ne!(layout, "/static/layout.js");
        assert!(url("vendor/livekit-client.umd.js").starts_with("/static/vendor/"));
        assert_eq!(url("nope.js"), "/static/missing/nope.js");
    }

    #[test]
    fn the_api_reference_viewer_is_not_embedded() {
        // RapiDoc is the api-docs component's: the viewers' pages do not carry it.
        assert!(ASSETS.files.iter().all(|a| !a.path.contains("rapidoc")));
        assert_eq!(
            url("vendor/rapidoc-min.js"),
            "/static/missing/vendor/rapidoc-min.js"
        );
        assert!(ASSETS.by_hashed_name("vendor/hls.light.min.js").is_none());
        assert!(
            ASSETS
                .files
                .iter()
                .any(|a| a.path == "vendor/hls.light.min.js")
        );
    }
}
