//! The platform's OpenAPI 3.1 document, built from every component's routes.
//!
//! Each route is declared once beside its handler (`endpoint!` and its kin in `edge`):
//! method, path and tier, and the operation (what it takes and answers), whose schemas are
//! derived from the handler's body and answer types. Building fails when a route has no
//! operation, so the document cannot drift from the code. `cargo run -p openapi-doc` writes
//! `docs/openapi.json`, which the api component serves at `GET /api/openapi.json`.

pub mod build;
pub mod readme;
pub mod realtime;
pub mod security;
pub mod tables;

/// Where the generated document is committed, relative to the repository root.
pub const DOCUMENT_PATH: &str = "docs/openapi.json";

/// The committed document, as the api component embeds it.
pub const COMMITTED: &str = include_str!("../../docs/openapi.json");

/// The document, built from the route tables and the components' declarations.
pub fn document() -> Result<serde_json::Value, build::Problems> {
    build::document(&tables::all(), &tables::operations())
}

/// The document as committed: pretty JSON with a final newline.
pub fn render(doc: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_default();
    text.push('\n');
    text
}
