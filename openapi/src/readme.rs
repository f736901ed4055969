//! The README's table of every route (component, method, path, tier, what it does), written
//! from the route tables and their operations like the document: `cargo run -p openapi-doc`
//! rewrites it, and a test fails while the committed README differs.

use crate::tables::TableRoute;
use edge::contract::Operation;
use edge::routing::documented_method;

/// Where the README is, relative to the repository root.
pub const README_PATH: &str = "README.md";

/// The committed README.
pub const COMMITTED_README: &str = include_str!("../../README.md");

/// The table's header row; the rows follow it, up to the first line that is not a row.
const HEADER: &str = "| component | method | path | tier | what it does |";

/// The order rows are listed in, per path.
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "*"];

/// The table: a row per route with its operation's summary; by component (in manifest
/// order), then by path, then by method.
pub fn route_table(routes: &[TableRoute], operations: &[(&'static str, Operation)]) -> String {
    let mut components: Vec<&str> = Vec::new();
    for route in routes {
        if !components.contains(&route.component) {
            components.push(route.component);
        }
    }
    let mut sorted: Vec<&TableRoute> = routes.iter().collect();
    sorted.sort_by_key(|r| {
        (
            components.iter().position(|c| *c == r.component),
            r.pattern,
            METHODS.iter().position(|m| *m == r.method),
        )
    });
    let mut table = format!("{HEADER}\n|---|---|---|---|---|\n");
    for route in sorted {
        let key = format!("{} {}", route.method, route.pattern);
        let summary = operations
            .iter()
            .find(|(component, op)| *component == route.component && op.route == key)
            .map_or("", |(_, op)| op.summary());
        table.push_str(&format!(
            "| {} | {} | `{}` | {} | {} |\n",
            route.component,
            documented_method(route.method),
            route.pattern,
            route.tier.name(),
            summary.replace('|', "\\|"),
        ));
    }
    table
}

/// `readme` with its route table replaced by `table`, or `None` when it has no table.
pub fn with_route_table(readme: &str, table: &str) -> Option<String> {
    let start = readme.find(HEADER)?;
    let rest = &readme[start..];
    let mut end = start;
    for line in rest.split_inclusive('\n') {
        if !line.starts_with('|') {
            break;
        }
        end += line.len();
    }
    Some(format!("{}{}{}", &readme[..start], table, &readme[end..]))
}

/// The README as the route tables and operations write it.
pub fn generated(readme: &str) -> Option<String> {
    with_route_table(
        readme,
        &route_table(&crate::tables::all(), &crate::tables::operations()),
    )
}
