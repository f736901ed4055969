//! The committed document is what the tables and the declared operations build, and it names exactly the
//! routes of the tables, each with its tier.

use edge::contract::{Operation, Schema, Schemas};
use edge::routing::{ANY_METHOD, Tier};
use openapi_doc::build::{documented_methods, openapi_path};
use openapi_doc::tables;
use serde_json::Value;
use serde_json::json;
use std::collections::BTreeSet;

fn committed() -> Value {
    serde_json::from_str(openapi_doc::COMMITTED).expect("docs/openapi.json is JSON")
}

#[test]
fn the_committed_document_is_the_generated_one() {
    let built = openapi_doc::document().unwrap_or_else(|p| panic!("{:#?}", p.0));
    assert!(
        openapi_doc::render(&built) == openapi_doc::COMMITTED,
        "docs/openapi.json is stale: run `cargo run -p openapi-doc` and commit it"
    );
}

/// Read back from the committed file alone: every table route is there with its tier, and
/// every operation there is a table route.
#[test]
fn the_document_names_exactly_the_routes_of_the_tables() {
    let doc = committed();
    let mut expected = BTreeSet::new();
    for route in tables::all() {
        for method in documented_methods(route.method) {
            expected.insert((
                openapi_path(route.pattern),
                method.to_ascii_lowercase(),
                route.tier.name().to_string(),
            ));
        }
    }
    let mut found = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let tier = op["x-tier"].as_str().unwrap_or("(no x-tier)");
            found.insert((path.clone(), method.clone(), tier.to_string()));
        }
    }
    let missing: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    assert!(
        missing.is_empty(),
        "routes missing from the document: {missing:#?}"
    );
    assert!(extra.is_empty(), "operations no table has: {extra:#?}");
}

#[test]
fn every_operation_demands_the_credentials_of_its_tier() {
    let doc = committed();
    for route in tables::all() {
        let path = openapi_path(route.pattern);
        for method in documented_methods(route.method) {
            let op = &doc["paths"][&path][method.to_ascii_lowercase()];
            assert_eq!(
                op["security"],
                openapi_doc::security::requirements(route.tier),
                "{method} {path}"
            );
            let unauthorized = &op["responses"]["401"];
            assert_eq!(
                unauthorized.is_null(),
                route.tier == Tier::Public,
                "{method} {path}"
            );
            if route.method == ANY_METHOD {
                assert_eq!(op["x-any-method"], true);
            }
        }
    }
}

/// Errors the service interface gives their own body (`{success: false, message, code}`),
/// and the SFU health's 503, which answers the health report itself.
const NOT_PROBLEMS: [(&str, &str, &str); 3] = [
    ("post", "/api/streaming/sessions/{id}/join-cohost", "403"),
    ("post", "/api/streaming/sessions/{id}/join-cohost", "409"),
    ("get", "/api/sfu/health", "503"),
];

#[test]
fn every_operation_answers_json_or_says_what_it_answers() {
    let doc = committed();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let responses = op["responses"].as_object().expect("responses");
            assert!(
                responses
                    .keys()
                    .any(|s| s.starts_with('2') || s.starts_with('3')),
                "{method} {path} documents no success"
            );
            for (status, response) in responses {
                // The API answers problem+json; the pages answer browsers in text.
                let spec_body =
                    NOT_PROBLEMS.contains(&(method.as_str(), path.as_str(), status.as_str()));
                if path.starts_with("/api/")
                    && !spec_body
                    && (status.starts_with('4') || status.starts_with('5'))
                {
                    let schema = &response["content"]["application/problem+json"]["schema"];
                    assert!(
                        schema.is_object(),
                        "{method} {path} {status} is not a problem"
                    );
                    assert!(
                        schema["properties"]["code"]["enum"]
                            .as_array()
                            .is_some_and(|c| !c.is_empty()),
                        "{method} {path} {status} lists no code"
                    );
                }
            }
        }
    }
}

#[test]
fn a_route_without_a_declared_operation_fails_the_build() {
    let mut routes = tables::all();
    routes.push(tables::TableRoute {
        component: "api",
        method: "GET",
        pattern: "/api/undocumented",
        tier: Tier::User,
        idempotent: false,
    });
    let problems = openapi_doc::build::document(&routes, &tables::operations())
        .expect_err("an undocumented route is refused")
        .0;
    assert!(
        problems.iter().any(|p| p.contains("GET /api/undocumented")),
        "{problems:#?}"
    );
}

#[test]
fn an_operation_without_a_route_fails_the_build() {
    let routes: Vec<_> = tables::all()
        .into_iter()
        .filter(|r| r.pattern != "/api/gifts")
        .collect();
    let problems = openapi_doc::build::document(&routes, &tables::operations())
        .expect_err("a documented route the tables lack is refused")
        .0;
    assert!(
        problems
            .iter()
            .any(|p| p.contains("GET /api/gifts") && p.contains("no route table")),
        "{problems:#?}"
    );
}

#[test]
fn a_route_declared_twice_or_a_link_to_no_route_fails_the_build() {
    let mut operations = tables::operations();
    let gifts = Operation::new("GET /api/gifts", "Catalog again")
        .answers(200, "OK", Schema::written(json!({"type": "object"})))
        .link("GET /api/nowhere/{id}", &[("id", "$response.body#/id")]);
    operations.push(("money", gifts.clone()));
    let problems = openapi_doc::build::document(&tables::all(), &operations)
        .expect_err("a second declaration is refused")
        .0;
    assert!(
        problems
            .iter()
            .any(|p| p.contains("\"GET /api/gifts\" is declared twice")),
        "{problems:#?}"
    );
    operations.retain(|(_, op)| op.route != "GET /api/gifts");
    operations.push(("money", gifts));
    let problems = openapi_doc::build::document(&tables::all(), &operations)
        .expect_err("a link to no route is refused")
        .0;
    assert!(
        problems
            .iter()
            .any(|p| p.contains("a link leads to \"GET /api/nowhere/{id}\"")),
        "{problems:#?}"
    );
}

/// A schema written out under the name of a derived one.
fn another_broadcast(schemas: &mut Schemas) -> serde_json::Value {
    schemas.named("Broadcast", json!({"type": "object"}))
}

#[test]
fn two_schemas_of_one_name_fail_the_build() {
    let mut operations = tables::operations();
    let gifts = operations
        .iter_mut()
        .find(|(_, op)| op.route == "GET /api/gifts")
        .expect("the catalog is declared");
    gifts.1 = Operation::new("GET /api/gifts", "Catalog").answers(
        200,
        "OK",
        Schema::Typed(another_broadcast),
    );
    let problems = openapi_doc::build::document(&tables::all(), &operations)
        .expect_err("a second schema named Broadcast is refused")
        .0;
    assert!(
        problems
            .iter()
            .any(|p| p.contains("two different schemas are named Broadcast")),
        "{problems:#?}"
    );
}

#[test]
fn every_link_names_an_operation_of_the_document() {
    let doc = committed();
    let mut ids = BTreeSet::new();
    for item in doc["paths"].as_object().expect("paths").values() {
        for op in item.as_object().expect("a path item").values() {
            assert!(
                ids.insert(op["operationId"].as_str().expect("operationId").to_string()),
                "operationIds are unique"
            );
        }
    }
    for item in doc["paths"].as_object().expect("paths").values() {
        for op in item.as_object().expect("a path item").values() {
            for response in op["responses"].as_object().expect("responses").values() {
                for link in response["links"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(_, l)| l)
                {
                    let target = link["operationId"].as_str().unwrap_or_default();
                    assert!(ids.contains(target), "a link names {target}, no operation");
                }
            }
        }
    }
}

#[test]
fn a_proxy_route_is_documented_with_the_methods_the_proxy_forwards() {
    assert_eq!(
        openapi_doc::build::ANY_METHODS,
        music::proxy::FORWARDED_METHODS
    );
}

#[test]
fn the_readme_route_table_is_the_generated_one() {
    let generated = openapi_doc::readme::generated(openapi_doc::readme::COMMITTED_README)
        .expect("the README has a route table");
    assert!(
        generated == openapi_doc::readme::COMMITTED_README,
        "README.md's route table is stale: run `cargo run -p openapi-doc` and commit it"
    );
}
