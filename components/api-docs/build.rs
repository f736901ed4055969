//! Embeds what the API reference page uses of the workspace's `static/` folder: RapiDoc
//! (with its licence) and the pages' stylesheet (`page_kit::build`).

fn main() {
    page_kit::build::Embed {
        static_dir: "../../static",
        prefix: "/docs/static/",
        select: &|path| path == "pages.css" || path.starts_with("vendor/rapidoc"),
        sources: &["templates", "src"],
    }
    .run();
}
