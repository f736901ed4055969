//! The API's OpenAPI document, generated from every component's route table by
//! `cargo run -p openapi-doc` and committed; a test there keeps it current.

use crate::ApiRoute;
use edge::contract::Schema;
use edge::endpoint;
use edge::spin::endpoint::{NoBody, Raw};
use edge::spin::http::PublicCtx;
use serde_json::json;
use spin_sdk::http::Response;

const DOCUMENT: &str = include_str!("../../../docs/openapi.json");

/// The API document's route; the document is answered as committed.
pub const ROUTES: &[ApiRoute] = &[endpoint!(
    GET "/api/openapi.json",
    Public(openapi),
    "Openapi (reference)",
    |op| op.answers(
        200,
        "OK",
        Schema::written(json!({
            "type": "object",
            "required": ["openapi", "info", "paths"],
            "properties": {
                "openapi": { "type": "string", "pattern": "^3\\.1\\." },
                "info": { "type": "object", "required": ["title", "version"] },
                "paths": { "type": "object" },
            },
        })),
    ),
)];

/// The document with its cache and CORS headers.
fn openapi(_ctx: &PublicCtx, _: NoBody) -> Result<Raw, domain::ApiError> {
    Ok(Raw(Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "public, max-age=300")
        .header("access-control-allow-origin", "*")
        .body(DOCUMENT)
        .build()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_embedded_document_is_an_openapi_3_1_document() {
        let doc: serde_json::Value = serde_json::from_str(super::DOCUMENT).expect("JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"]["/api/openapi.json"]["get"].is_object());
    }
}
