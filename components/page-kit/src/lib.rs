//! What the page components (pages, api-docs) share: the HTTP rules of pages ([`web`]),
//! what their routes answer ([`contract`]), their embedded static files served under
//! content-hashed names ([`assets`]), and, in their build scripts (feature `build`, without
//! the Spin SDK), the embedding of those files ([`build`]).
//!
//! A component's build script embeds only the files its pages use:
//!
//! ```ignore
//! page_kit::build::Embed { static_dir: "../../static", prefix: "/static/",
//!     select: &|path| path != "vendor/rapidoc-min.js", sources: &["templates", "src"] }.run();
//! ```
//!
//! and the component reads the generated table with [`include_assets!`].

#[cfg(feature = "serve")]
pub mod assets;
#[cfg(feature = "build")]
pub mod build;
#[cfg(feature = "serve")]
pub mod contract;
#[cfg(feature = "serve")]
pub mod web;

/// Defines `pub static ASSETS: page_kit::assets::Assets`, the table the calling
/// component's build script generated with [`build::Embed`].
#[macro_export]
macro_rules! include_assets {
    () => {
        include!(concat!(env!("OUT_DIR"), "/assets.rs"));
    };
}
