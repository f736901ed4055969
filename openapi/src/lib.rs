//! The platform's OpenAPI 3.1 document, built from every component's route table.
//!
//! Paths, methods and tiers come from the tables themselves (`pub const ROUTES` in each
//! component); what each route takes and answers from the operations its module declares
//! beside the handler (`edge::contract`, gathered by each component's
//! `contract::operations()`), whose schemas are derived from the views' and bodies' types.
//! Building fails when a route has no operation or an operation names no route, so the
//! document cannot drift from the code. `cargo run -p openapi-doc` writes
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
