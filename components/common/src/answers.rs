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

/// What an action with nothing else to show answers: a sentence saying it is done.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Done")]
pub struct Done {
    #[schemars(extend("const" = true))]
    success: bool,
    message: &'static str,
}

impl Done {
    pub fn saying(message: &'static str) -> Done {
        Done {
            success: true,
            message,
        }
    }
}
