//! What pages answer, for their routes' declarations (`endpoint!`).

use edge::contract::{Operation, Schema};

/// A page: it answers the page (HTML), or a short plain-text 404.
pub fn page(op: Operation) -> Operation {
    op.answers_as(200, "The page", "text/html", Schema::text())
        .answers_as(
            404,
            "No such page or broadcast",
            "text/plain",
            Schema::text(),
        )
}

/// A page that reads parameters: a bad one is a short plain-text 400.
pub fn page_with_parameters(op: Operation) -> Operation {
    page(op).answers_as(400, "Invalid page parameters", "text/plain", Schema::text())
}

/// An embedded static file, under its content-hashed name.
pub fn asset(op: Operation) -> Operation {
    op.answers_as(
        200,
        "The content-hashed asset (immutable)",
        "*/*",
        Schema::text(),
    )
    .answers_empty(304, "Not modified (If-None-Match)")
    .answers_as(404, "No such asset", "text/plain", Schema::text())
}
