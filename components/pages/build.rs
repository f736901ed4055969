//! Embeds the files of the workspace's `static/` folder that the pages use: all but the API
//! reference's viewer (RapiDoc), which the api-docs component serves (`page_kit::build`).

fn main() {
    page_kit::build::Embed {
        static_dir: "../../static",
        prefix: "/static/",
        select: &|path| !path.starts_with("vendor/rapidoc"),
        sources: &["templates", "src"],
    }
    .run();
}
