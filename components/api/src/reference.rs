//! The API's OpenAPI document, generated from every component's route table by
//! `cargo run -p openapi-doc` and committed; a test there keeps it current.

use edge::spin::http::{PublicCtx, Reply};
use spin_sdk::http::Response;

const DOCUMENT: &str = include_str!("../../../docs/openapi.json");

/// `GET /api/openapi.json`
pub fn openapi(_ctx: &PublicCtx) -> Reply {
    Ok(Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "public, max-age=300")
        .header("access-control-allow-origin", "*")
        .body(DOCUMENT)
        .build())
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("GET /api/openapi.json", "Openapi (reference)").answers(
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
    ]
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
