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

/// How much a job call did, and how much is left: the scheduler calls again while
/// `remaining` is above zero.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Progress {
    #[schemars(range(min = 0))]
    pub done: i64,
    #[schemars(range(min = 0))]
    pub remaining: i64,
}
