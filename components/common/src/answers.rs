//! Answers several resources share.

use schemars::JsonSchema;
use serde::Serialize;

/// What a deletion answers: the deleted object's id.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Deleted")]
pub struct Deleted {
    #[schemars(extend("const" = true))]
    success: bool,
    #[schemars(extend("format" = "uuid"))]
    id: String,
}

impl Deleted {
    pub fn of(id: impl Into<String>) -> Deleted {
        Deleted {
            success: true,
            id: id.into(),
        }
    }
}
