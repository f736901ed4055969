//! Assembles the document: the tables give paths, methods and tiers; the operations
//! declared beside the handlers (`edge::contract`) give what each takes and answers.

use crate::security;
use crate::tables::TableRoute;
use edge::contract::{Operation, Schemas};
use edge::routing::ANY_METHOD;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// What is wrong with the tables and the declarations together, one line each.
#[derive(Debug)]
pub struct Problems(pub Vec<String>);

/// The methods a route with the method `*` (a proxy) is documented with.
pub const ANY_METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// The OpenAPI path of a table pattern: a rest segment `{*name}` becomes `{name}`.
pub fn openapi_path(pattern: &str) -> String {
    pattern.replace("{*", "{")
}

/// The path parameters of a pattern, in order.
pub fn path_params(pattern: &str) -> Vec<&str> {
    pattern
        .split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|s| s.trim_start_matches('*'))
        .collect()
}

/// The methods a table route is documented with.
pub fn documented_methods(method: &'static str) -> Vec<&'static str> {
    if method == ANY_METHOD {
        ANY_METHODS.to_vec()
    } else {
        vec![method]
    }
}

/// The key of a route in the declarations: `"METHOD /pattern"` as the table spells it.
pub fn route_key(route: &TableRoute) -> String {
    format!("{} {}", route.method, route.pattern)
}

/// The document of `routes`, with what the components declare of them (`operations`, each
/// with its component's name).
pub fn document(
    routes: &[TableRoute],
    operations: &[(&'static str, Operation)],
) -> Result<Value, Problems> {
    let mut problems = Vec::new();
    let mut collected = Schemas::default();
    let mut declared: BTreeMap<String, (String, Value)> = BTreeMap::new();
    for (component, op) in operations {
        let described = op.describe(&mut collected);
        if declared
            .insert(op.route.to_string(), (component.to_string(), described))
            .is_some()
        {
            problems.push(format!("{component}: \"{}\" is declared twice", op.route));
        }
    }
    let mut schemas = base_schemas();
    match collected.finish() {
        Ok(derived) => {
            for (name, mut schema) in derived {
                unwrap_descriptions(&mut schema);
                if schemas.insert(name.clone(), schema).is_some() {
                    problems.push(format!("two different schemas are named {name}"));
                }
            }
        }
        Err(names) => {
            for name in names {
                problems.push(format!("two different schemas are named {name}"));
            }
        }
    }
    let operations = declared;
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut used = BTreeSet::new();
    for route in routes {
        let key = route_key(route);
        let Some((component, op)) = operations.get(&key) else {
            problems.push(format!(
                "{} declares no operation \"{key}\" (tier {})",
                route.component,
                route.tier.name()
            ));
            continue;
        };
        if component != route.component {
            problems.push(format!(
                "\"{key}\" is declared by {component} but is in {}'s table",
                route.component
            ));
        }
        used.insert(key.clone());
        let item = paths.entry(openapi_path(route.pattern)).or_default();
        for method in documented_methods(route.method) {
            match operation(route, method, op, routes) {
                Ok(built) => {
                    item.insert(method.to_ascii_lowercase(), built);
                }
                Err(e) => problems.push(format!("\"{key}\": {e}")),
            }
        }
    }
    for (key, (component, _)) in &operations {
        if !used.contains(key) {
            problems.push(format!(
                "{component} declares \"{key}\", which no route table has"
            ));
        }
    }
    if !problems.is_empty() {
        return Err(Problems(problems));
    }
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Live streaming platform API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": include_str!("../description.md"),
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}
        },
        "servers": [{"url": "/", "description": "The origin serving this document"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": security::schemes(),
        },
    });
    doc["x-websocket"] = crate::realtime::websocket();
    Ok(doc)
}

/// The schemas every component shares: the problem document.
fn base_schemas() -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert(
        "Problem".into(),
        json!({
            "type": "object",
            "description": "An error (RFC 9457 problem details) with a stable machine `code`.",
            "required": ["code", "status", "detail"],
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer", "minimum": 400, "maximum": 599},
                "code": {"type": "string", "description": "Stable; clients branch on it."},
                "detail": {"type": "string"},
                "errors": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["field", "message"],
                        "properties": {
                            "field": {"type": "string"},
                            "message": {"type": "string"}
                        }
                    }
                },
                "requestId": {"type": "string"}
            }
        }),
    );
    schemas
}

/// One operation: its declaration, completed from the table.
fn operation(
    route: &TableRoute,
    method: &str,
    op: &Value,
    routes: &[TableRoute],
) -> Result<Value, String> {
    let summary = op["summary"]
        .as_str()
        .ok_or("no summary (a line saying what it does)")?;
    let given = op["responses"]
        .as_object()
        .filter(|r| !r.is_empty())
        .ok_or("no responses (at least its success answer)")?;
    let has_body = op.get("request").is_some();
    let mut out = Map::new();
    out.insert(
        "operationId".into(),
        json!(operation_id(route, method, routes)),
    );
    out.insert("summary".into(), json!(summary));
    if let Some(d) = op.get("description") {
        out.insert("description".into(), d.clone());
    }
    out.insert("tags".into(), json!([tag(route)]));
    out.insert("x-tier".into(), json!(route.tier.name()));
    out.insert("x-component".into(), json!(route.component));
    if route.method == ANY_METHOD {
        out.insert("x-any-method".into(), json!(true));
    }
    if let Some(limit) = op.get("rateLimit") {
        out.insert("x-rate-limit".into(), limit.clone());
    }
    let security = security::requirements(route.tier);
    out.insert("security".into(), security);
    let params = parameters(route, op)?;
    out.insert("parameters".into(), params.clone());
    if let Some(request) = op.get("request") {
        let content_type = op["requestType"].as_str().unwrap_or("application/json");
        let mut media = json!({"schema": request});
        if let Some(example) = op.get("requestExample") {
            media["example"] = example.clone();
        }
        out.insert(
            "requestBody".into(),
            json!({
                "required": op["requestOptional"].as_bool() != Some(true),
                "content": {content_type: media}
            }),
        );
    }
    let mut responses = Map::new();
    for (status, r) in given {
        responses.insert(status.clone(), success(r, routes)?);
    }
    for (status, codes) in error_codes(route, has_body, &params, op)? {
        if responses.contains_key(&status.to_string()) {
            // The declaration says how this status answers (a page's text 404).
            continue;
        }
        let description = match status {
            400 => "The request is malformed",
            401 => "The credentials are missing or invalid",
            403 => "The caller may not do this",
            404 => "Not found (or not visible to this caller)",
            409 => "Conflicts with the current state",
            413 => "The body is too large",
            415 => "The body is not JSON",
            422 => "A field is invalid",
            429 => "Too many requests; see Retry-After",
            503 => "A dependency is not available",
            _ => "An error",
        };
        responses.insert(
            status.to_string(),
            json!({
                "description": description,
                "content": {"application/problem+json": {"schema": {
                    "allOf": [{"$ref": "#/components/schemas/Problem"}],
                    "properties": {"code": {"enum": codes}, "status": {"const": status}}
                }}}
            }),
        );
    }
    out.insert("responses".into(), Value::Object(responses));
    Ok(Value::Object(out))
}

/// A route's operation id: its method and path words, without `api` (a page whose path is
/// an API route's without `/api`, as `/clips/{id}` is `/api/clips/{id}`'s, ends `-page`).
fn operation_id(route: &TableRoute, method: &str, routes: &[TableRoute]) -> String {
    let id = path_id(route, method);
    let api_twin = format!("/api{}", route.pattern);
    if !route.pattern.starts_with("/api/")
        && routes
            .iter()
            .any(|r| r.pattern == api_twin && path_id(r, method) == id)
    {
        return format!("{id}-page");
    }
    id
}

fn path_id(route: &TableRoute, method: &str) -> String {
    let mut id = method.to_ascii_lowercase();
    for segment in route.pattern.split('/').filter(|s| !s.is_empty()) {
        let word = segment
            .trim_start_matches('{')
            .trim_start_matches('*')
            .trim_end_matches('}');
        let by = segment.starts_with('{');
        id.push(if by { '_' } else { '-' });
        if by {
            id.push_str("by-");
        }
        id.push_str(word);
    }
    id.replace("-api-", "-").replacen("-api", "", 1)
}

/// The tag of a route: its first path segment after `/api` (and `/v1`).
fn tag(route: &TableRoute) -> String {
    let segments: Vec<&str> = route
        .pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != "api" && *s != "v1")
        .collect();
    match (route.pattern.starts_with("/api/"), segments.first()) {
        (false, _) => "pages".to_string(),
        (true, Some(first)) => (*first).to_string(),
        (true, None) => "api".to_string(),
    }
}

/// Path parameters from the pattern, then the declaration's own (query parameters, or a
/// path parameter's narrower schema).
fn parameters(route: &TableRoute, op: &Value) -> Result<Value, String> {
    let given: Vec<Value> = op["parameters"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for name in path_params(route.pattern) {
        let narrower = given
            .iter()
            .find(|p| p["in"] == "path" && p["name"] == name);
        out.push(narrower.cloned().unwrap_or_else(|| {
            json!({"name": name, "in": "path", "required": true, "schema": path_param_schema(name)})
        }));
    }
    for p in &given {
        match p["in"].as_str() {
            Some("path")
                if !path_params(route.pattern).contains(&p["name"].as_str().unwrap_or("")) =>
            {
                return Err(format!(
                    "path parameter {} is not in the pattern",
                    p["name"]
                ));
            }
            Some("path") => {}
            Some(_) => out.push(p.clone()),
            None => return Err(format!("parameter {} has no `in`", p["name"])),
        }
    }
    if route.idempotent {
        out.push(json!({
            "name": "Idempotency-Key",
            "in": "header",
            "required": true,
            "description": "Repeating a request with the same key answers the first answer again",
            "schema": {"type": "string", "pattern": "^[!-~]{1,255}$"},
        }));
    }
    Ok(Value::Array(out))
}

/// A path parameter's schema when the declaration gives none: the platform's ids are UUIDs
/// (a malformed one answers 400 `invalid_id`); other names are free text.
pub fn path_param_schema(name: &str) -> Value {
    if name == "id" || name.ends_with("Id") {
        json!({"type": "string", "format": "uuid"})
    } else {
        json!({"type": "string", "minLength": 1})
    }
}

fn success(r: &Value, routes: &[TableRoute]) -> Result<Value, String> {
    let description = r["description"]
        .as_str()
        .ok_or("a response without description")?;
    let mut out = json!({"description": description});
    if let Some(schema) = r.get("schema") {
        let content_type = r["contentType"].as_str().unwrap_or("application/json");
        let mut media = json!({"schema": schema});
        if let Some(example) = r.get("example") {
            media["example"] = example.clone();
        }
        out["content"] = json!({content_type: media});
    }
    if let Some(v) = r.get("headers") {
        out["headers"] = v.clone();
    }
    match r.get("links") {
        Some(Value::Array(declared)) => out["links"] = links(declared, routes)?,
        Some(written) => out["links"] = written.clone(),
        None => {}
    }
    Ok(out)
}

/// Declared links (`{route, parameters}`) as OpenAPI writes them: each named after the
/// operation it leads to, which must be a route of the tables.
fn links(declared: &[Value], routes: &[TableRoute]) -> Result<Value, String> {
    let mut out = Map::new();
    for link in declared {
        let key = link["route"].as_str().unwrap_or_default();
        let target = routes
            .iter()
            .find(|r| route_key(r) == key)
            .ok_or_else(|| format!("a link leads to \"{key}\", which no route table has"))?;
        let id = operation_id(target, target.method, routes);
        out.insert(
            link_name(&id),
            json!({ "operationId": id, "parameters": link["parameters"] }),
        );
    }
    Ok(Value::Object(out))
}

/// A link's name: its operation id in words run together (`get-streams_by-id` is
/// `GetStreamsById`).
fn link_name(operation_id: &str) -> String {
    operation_id
        .split(['-', '_'])
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// The error answers of an operation, by status: the tier's credential checks, the body's
/// parsing, the idempotency key's, and the handler's own (the declaration's `errors`).
fn error_codes(
    route: &TableRoute,
    has_body: bool,
    params: &Value,
    op: &Value,
) -> Result<BTreeMap<u16, Vec<String>>, String> {
    let mut errors: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    let mut add = |status: u16, code: &str| {
        let codes = errors.entry(status).or_default();
        if !codes.iter().any(|c| c == code) {
            codes.push(code.to_string());
        }
    };
    for code in &security::unauthorized_codes(route.tier) {
        add(401, code);
    }
    // A suspended tenant's credentials are refused wherever the API key counts.
    if route.tier.needs_api_key() {
        add(403, "client_suspended");
    }
    if has_body {
        add(400, "malformed_json");
        add(413, "payload_too_large");
        add(415, "unsupported_media_type");
        // Bodies are checked field by field, unknown fields included.
        add(422, "validation_failed");
    }
    if route.idempotent {
        // The key is checked first; a retry answers the first answer, unless it was sent
        // with another body or the first is still running.
        add(400, "idempotency_key_required");
        add(400, "invalid_idempotency_key");
        add(409, "request_in_progress");
        add(422, "idempotency_key_reused");
    }
    for param in params.as_array().into_iter().flatten() {
        if param["in"] == "path" {
            add(404, "not_found");
            if param["schema"]["format"] == "uuid" {
                add(400, "invalid_id");
            }
        }
    }
    for (status, codes) in op["errors"].as_object().into_iter().flatten() {
        let status: u16 = status
            .parse()
            .map_err(|_| format!("error status {status} is not a number"))?;
        for code in codes.as_array().into_iter().flatten() {
            add(
                status,
                code.as_str().ok_or("an error code is not a string")?,
            );
        }
    }
    Ok(errors)
}

/// A description comes from a doc comment wrapped at the code's width: its lines are
/// joined back into one (a blank line still starts a paragraph).
fn unwrap_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => {
                        *text = text
                            .split("\n\n")
                            .map(|paragraph| paragraph.replace('\n', " "))
                            .collect::<Vec<_>>()
                            .join("\n\n");
                    }
                    _ => unwrap_descriptions(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}
