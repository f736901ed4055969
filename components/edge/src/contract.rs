//! What each route takes and answers, declared beside its handler: the API document's
//! operations. `openapi-doc` joins them to the route tables (paths, tiers, security, and
//! the errors every tier and body brings) and collects the schemas they name.
//!
//! A schema is named by the type that reads or writes it ([`Schema::view`] for a
//! `JsonSchema` view, [`Schema::body`] for a `request_body!`), so the document says what
//! the code does; [`Schema::written`] spells out the rare shape that no type has.

use domain::pagination;
use domain::validate::body::RequestBody;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// The document's named schemas, gathered from the operations that use them.
pub struct Schemas {
    generator: SchemaGenerator,
    /// For types that serde reads (a field it defaults may be left out).
    readers: SchemaGenerator,
    bodies: Map<String, Value>,
    /// Names given to two different schemas.
    clashes: Vec<String>,
}

impl Default for Schemas {
    fn default() -> Self {
        let settings = SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        });
        Schemas {
            generator: settings.clone().for_serialize().into_generator(),
            readers: settings.for_deserialize().into_generator(),
            bodies: Map::new(),
            clashes: Vec::new(),
        }
    }
}

impl Schemas {
    /// A reference to the view `T`'s schema (its named types collected with it).
    pub fn view<T: JsonSchema>(&mut self) -> Value {
        self.generator.subschema_for::<T>().to_value()
    }

    /// A reference to the schema of `T` as serde reads it: a body of another service's
    /// protocol, deserialized whole.
    pub fn read<T: JsonSchema>(&mut self) -> Value {
        self.readers.subschema_for::<T>().to_value()
    }

    /// A reference to the request body `T`'s schema.
    pub fn body<T: RequestBody>(&mut self) -> Value {
        let schema = T::schema();
        if let Some(earlier) = self.bodies.insert(T::NAME.to_string(), schema.clone())
            && earlier != schema
        {
            self.clashes.push(T::NAME.to_string());
        }
        reference(T::NAME)
    }

    /// Whether `reference` names a body that may be left out: one that asks for no field
    /// (an empty body reads as `{}`).
    fn is_optional_body(&self, reference: &Value) -> bool {
        let name = reference["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"));
        name.and_then(|name| self.bodies.get(name))
            .is_some_and(|body| {
                body["required"].as_array().is_none_or(Vec::is_empty)
                    && body["minProperties"].as_u64().unwrap_or(0) == 0
            })
    }

    /// A schema written out under `name`.
    pub fn named(&mut self, name: &str, schema: Value) -> Value {
        if let Some(earlier) = self.bodies.insert(name.to_string(), schema.clone())
            && earlier != schema
        {
            self.clashes.push(name.to_string());
        }
        reference(name)
    }

    /// Every schema named so far, by name; or the names given to two different schemas.
    pub fn finish(mut self) -> Result<Map<String, Value>, Vec<String>> {
        let mut all = self.generator.take_definitions(true);
        for (name, schema) in self.readers.take_definitions(true) {
            if all.get(&name).is_some_and(|written| *written != schema) {
                self.clashes.push(name.clone());
            }
            all.insert(name, schema);
        }
        for (name, schema) in self.bodies {
            if all.insert(name.clone(), schema).is_some() {
                self.clashes.push(name);
            }
        }
        if self.clashes.is_empty() {
            Ok(all)
        } else {
            Err(self.clashes)
        }
    }
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// A schema an operation takes or answers.
#[derive(Clone)]
pub enum Schema {
    /// A type's, collected into the named schemas.
    Typed(fn(&mut Schemas) -> Value),
    /// Written out.
    Written(Value),
}

impl Schema {
    /// The view `T`, as serialized.
    pub fn view<T: JsonSchema>() -> Schema {
        Schema::Typed(view_ref::<T>)
    }

    /// `T` as serde reads it (fields it defaults may be left out).
    pub fn read<T: JsonSchema>() -> Schema {
        Schema::Typed(read_ref::<T>)
    }

    /// The request body `T`, as read.
    pub fn body<T: RequestBody>() -> Schema {
        Schema::Typed(body_ref::<T>)
    }

    /// A page of `T`s (`pagination::Paged<T>`).
    pub fn page_of<T: JsonSchema>() -> Schema {
        Schema::Typed(page_ref::<T>)
    }

    /// A shape no type has, written out.
    pub fn written(schema: Value) -> Schema {
        Schema::Written(schema)
    }

    /// Text: a page, a script, a plain-text refusal (the answer's media type says which).
    pub fn text() -> Schema {
        Schema::Written(json!({ "type": "string" }))
    }

    /// Bytes as stored: a file's content.
    pub fn bytes() -> Schema {
        Schema::Written(json!({ "type": "string", "contentMediaType": "application/octet-stream" }))
    }

    fn resolve(&self, schemas: &mut Schemas) -> Value {
        match self {
            Schema::Typed(reference) => reference(schemas),
            Schema::Written(schema) => schema.clone(),
        }
    }
}

fn view_ref<T: JsonSchema>(schemas: &mut Schemas) -> Value {
    schemas.view::<T>()
}

fn read_ref<T: JsonSchema>(schemas: &mut Schemas) -> Value {
    schemas.read::<T>()
}

fn body_ref<T: RequestBody>(schemas: &mut Schemas) -> Value {
    schemas.body::<T>()
}

fn page_ref<T: JsonSchema>(schemas: &mut Schemas) -> Value {
    let page = schemas.named("Page", pagination::page_schema());
    json!({
        "allOf": [
            page,
            {
                "type": "object",
                "properties": { "items": { "type": "array", "items": schemas.view::<T>() } },
            },
        ],
    })
}

/// One answer of an operation.
#[derive(Clone)]
struct Answer {
    status: u16,
    description: &'static str,
    schema: Option<Schema>,
    content_type: Option<&'static str>,
    example: Option<Value>,
    headers: Option<Value>,
    /// (the linked route, `"METHOD /pattern"`; its parameters' sources)
    links: Vec<(&'static str, Vec<(&'static str, &'static str)>)>,
}

/// Type-checks a route's refinement where the document is not built (the wasm components):
/// what it names stays in use, and none of its code is kept.
pub const fn unused_refinement<F: FnOnce(Operation) -> Operation + Copy>(_: F) {}

/// What one route takes and answers: built with its `"METHOD /pattern"` (as its table
/// spells it) and a line saying what it does.
#[derive(Clone)]
pub struct Operation {
    pub route: &'static str,
    summary: &'static str,
    description: Option<&'static str>,
    request: Option<(Schema, Option<&'static str>)>,
    request_example: Option<Value>,
    parameters: Vec<Value>,
    answers: Vec<Answer>,
    errors: Vec<(u16, &'static [&'static str])>,
    rate_limit: Option<Value>,
}

impl Operation {
    pub fn new(route: &'static str, summary: &'static str) -> Operation {
        Operation {
            route,
            summary,
            description: None,
            request: None,
            request_example: None,
            parameters: Vec::new(),
            answers: Vec::new(),
            errors: Vec::new(),
            rate_limit: None,
        }
    }

    /// The route is rate limited by `limit` (its handler applies it): a 429 `rate_limited`
    /// answer, and the limit itself as `x-rate-limit`.
    pub fn rate_limited(self, limit: &crate::rate::RateLimit) -> Self {
        let mut op = self.errors(429, &["rate_limited"]);
        op.rate_limit = Some(limit.describe());
        op
    }

    /// The line saying what the route does.
    pub fn summary(&self) -> &'static str {
        self.summary
    }

    /// The operation with what `refine` adds (errors, examples, links, parameters).
    pub fn then(self, refine: impl FnOnce(Operation) -> Operation) -> Self {
        refine(self)
    }

    /// More than the summary says.
    pub fn described(mut self, text: &'static str) -> Self {
        self.description = Some(text);
        self
    }

    /// Takes a JSON body.
    pub fn takes(mut self, schema: Schema) -> Self {
        self.request = Some((schema, None));
        self
    }

    /// Takes a body of another media type.
    pub fn takes_as(mut self, content_type: &'static str, schema: Schema) -> Self {
        self.request = Some((schema, Some(content_type)));
        self
    }

    /// An example of the body.
    pub fn request_example(mut self, example: Value) -> Self {
        self.request_example = Some(example);
        self
    }

    /// A query, header or (narrower) path parameter, as OpenAPI writes one.
    pub fn parameter(mut self, parameter: Value) -> Self {
        self.parameters.push(parameter);
        self
    }

    /// A path parameter that is a prefixed id (`ep_...`) rather than a UUID, with an example.
    pub fn path_id(self, name: &'static str, example: &'static str) -> Self {
        self.parameter(json!({
            "name": name,
            "in": "path",
            "required": true,
            "schema": { "type": "string", "minLength": 1, "examples": [example] },
        }))
    }

    /// A query parameter.
    pub fn query(self, name: &'static str, schema: Value) -> Self {
        self.parameter(json!({ "name": name, "in": "query", "schema": schema }))
    }

    /// The page's query parameters (`limit`, `offset`).
    pub fn paged(self) -> Self {
        let (limit, offset) = pagination::query_schemas();
        self.query("limit", limit).query("offset", offset)
    }

    /// Answers `status` with a JSON body.
    pub fn answers(self, status: u16, description: &'static str, schema: Schema) -> Self {
        self.answer(status, description, Some(schema), None)
    }

    /// Answers `status` with a body of another media type.
    pub fn answers_as(
        self,
        status: u16,
        description: &'static str,
        content_type: &'static str,
        schema: Schema,
    ) -> Self {
        self.answer(status, description, Some(schema), Some(content_type))
    }

    /// Answers `status` without a body.
    pub fn answers_empty(self, status: u16, description: &'static str) -> Self {
        self.answer(status, description, None, None)
    }

    fn answer(
        mut self,
        status: u16,
        description: &'static str,
        schema: Option<Schema>,
        content_type: Option<&'static str>,
    ) -> Self {
        self.answers.push(Answer {
            status,
            description,
            schema,
            content_type,
            example: None,
            headers: None,
            links: Vec::new(),
        });
        self
    }

    fn last_answer(&mut self) -> &mut Answer {
        self.answers
            .last_mut()
            .expect("an answer's detail follows the answer")
    }

    /// An example of the last answer.
    pub fn example(mut self, example: Value) -> Self {
        self.last_answer().example = Some(example);
        self
    }

    /// The last answer's headers, as OpenAPI writes them.
    pub fn headers(mut self, headers: Value) -> Self {
        self.last_answer().headers = Some(headers);
        self
    }

    /// The last answer leads to `route` (`"METHOD /pattern"`), its parameters taken from
    /// the request or the answer (`$response.body#/id`).
    pub fn link(
        mut self,
        route: &'static str,
        parameters: &[(&'static str, &'static str)],
    ) -> Self {
        self.last_answer().links.push((route, parameters.to_vec()));
        self
    }

    /// The handler's own refusals with `status`, by code (the tier's, the body's and a
    /// path id's are added from the table).
    pub fn errors(mut self, status: u16, codes: &'static [&'static str]) -> Self {
        self.errors.push((status, codes));
        self
    }

    /// The operation as the document's builder reads it, its schemas named in `schemas`.
    pub fn describe(&self, schemas: &mut Schemas) -> Value {
        let mut op = Map::new();
        op.insert("summary".into(), self.summary.into());
        if let Some(text) = self.description {
            op.insert("description".into(), text.into());
        }
        let mut optional = false;
        if let Some((schema, content_type)) = &self.request {
            let resolved = schema.resolve(schemas);
            optional = content_type.is_none() && schemas.is_optional_body(&resolved);
            op.insert("request".into(), resolved);
            if let Some(content_type) = content_type {
                op.insert("requestType".into(), (*content_type).into());
            }
        }
        if optional {
            op.insert("requestOptional".into(), true.into());
        }
        if let Some(example) = &self.request_example {
            op.insert("requestExample".into(), example.clone());
        }
        if !self.parameters.is_empty() {
            op.insert("parameters".into(), self.parameters.clone().into());
        }
        let mut responses = Map::new();
        for answer in &self.answers {
            let mut out = Map::new();
            out.insert("description".into(), answer.description.into());
            if let Some(schema) = &answer.schema {
                out.insert("schema".into(), schema.resolve(schemas));
            }
            if let Some(content_type) = answer.content_type {
                out.insert("contentType".into(), content_type.into());
            }
            if let Some(example) = &answer.example {
                out.insert("example".into(), example.clone());
            }
            if let Some(headers) = &answer.headers {
                out.insert("headers".into(), headers.clone());
            }
            if !answer.links.is_empty() {
                let links: Vec<Value> = answer
                    .links
                    .iter()
                    .map(|(route, parameters)| {
                        let parameters: Map<String, Value> = parameters
                            .iter()
                            .map(|(name, source)| (name.to_string(), (*source).into()))
                            .collect();
                        json!({ "route": route, "parameters": parameters })
                    })
                    .collect();
                out.insert("links".into(), links.into());
            }
            responses.insert(answer.status.to_string(), Value::Object(out));
        }
        op.insert("responses".into(), Value::Object(responses));
        if !self.errors.is_empty() {
            let mut errors = Map::new();
            for (status, codes) in &self.errors {
                let listed = errors
                    .entry(status.to_string())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Some(listed) = listed.as_array_mut() {
                    listed.extend(codes.iter().map(|c| Value::from(*c)));
                }
            }
            op.insert("errors".into(), Value::Object(errors));
        }
        if let Some(limit) = &self.rate_limit {
            op.insert("rateLimit".into(), limit.clone());
        }
        Value::Object(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    domain::request_body! {
        /// A test body.
        #[allow(dead_code)]
        pub struct Note as "Note" {
            "text" text: domain::validate::body::Text<10>,
        }
    }

    domain::request_body! {
        /// A test body of optional fields.
        #[allow(dead_code)]
        pub struct Changes as "Changes" {
            "text" text: domain::validate::body::OptText<10>,
        }
    }

    #[test]
    fn a_body_that_asks_for_no_field_may_be_left_out() {
        let mut schemas = Schemas::default();
        let changes = Operation::new("PATCH /api/notes/{id}", "Change (notes)")
            .takes(Schema::body::<Changes>())
            .answers_empty(204, "Changed");
        let note = Operation::new("POST /api/notes", "Create (notes)")
            .takes(Schema::body::<Note>())
            .answers_empty(204, "Created");
        assert_eq!(changes.describe(&mut schemas)["requestOptional"], true);
        assert!(note.describe(&mut schemas).get("requestOptional").is_none());
        // A written body is as its declaration says.
        let written = Operation::new("PUT /api/notes/{id}", "Replace (notes)")
            .takes(Schema::written(
                json!({"type": "object", "minProperties": 1}),
            ))
            .answers_empty(204, "Replaced");
        assert!(
            written
                .describe(&mut schemas)
                .get("requestOptional")
                .is_none()
        );
    }

    /// A message of another service's protocol, which serde reads with a default.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Report {
        id: String,
        #[serde(default)]
        error: Option<String>,
    }

    #[test]
    fn a_type_serde_reads_may_leave_out_what_it_defaults() {
        let mut schemas = Schemas::default();
        schemas.read::<Report>();
        let read = schemas.finish().unwrap();
        assert_eq!(read["Report"]["required"], json!(["id"]));
        let mut schemas = Schemas::default();
        schemas.view::<Report>();
        let written = schemas.finish().unwrap();
        assert_eq!(written["Report"]["required"], json!(["id", "error"]));
        // A type both written and read, with two schemas, is a clash.
        let mut schemas = Schemas::default();
        schemas.view::<Report>();
        schemas.read::<Report>();
        assert_eq!(schemas.finish().unwrap_err(), ["Report"]);
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        id: String,
    }

    #[test]
    fn an_operation_names_its_types_and_collects_their_schemas() {
        let op = Operation::new("POST /api/notes", "Create (notes)")
            .takes(Schema::body::<Note>())
            .answers(201, "Created", Schema::view::<Item>())
            .link("GET /api/notes/{id}", &[("id", "$response.body#/id")])
            .answers(200, "A page", Schema::page_of::<Item>())
            .errors(409, &["taken"])
            .errors(409, &["closed"]);
        let mut schemas = Schemas::default();
        let described = op.describe(&mut schemas);
        assert_eq!(
            described["request"],
            json!({"$ref": "#/components/schemas/Note"})
        );
        assert_eq!(
            described["responses"]["201"]["schema"],
            json!({"$ref": "#/components/schemas/Item"})
        );
        assert_eq!(
            described["responses"]["201"]["links"],
            json!([{"route": "GET /api/notes/{id}", "parameters": {"id": "$response.body#/id"}}])
        );
        assert_eq!(
            described["responses"]["200"]["schema"]["allOf"][1]["properties"]["items"]["items"],
            json!({"$ref": "#/components/schemas/Item"})
        );
        assert_eq!(described["errors"], json!({"409": ["taken", "closed"]}));
        let definitions = schemas.finish().unwrap();
        let names: Vec<&str> = definitions.keys().map(String::as_str).collect();
        assert_eq!(names, ["Item", "Note", "Page"]);
    }

    #[test]
    fn two_schemas_of_one_name_are_a_clash() {
        let mut schemas = Schemas::default();
        schemas.named("Item", json!({"type": "string"}));
        schemas.view::<Item>();
        schemas.named("Note", json!({"type": "string"}));
        schemas.body::<Note>();
        schemas.body::<Note>();
        assert_eq!(schemas.finish().unwrap_err(), ["Note", "Item"]);
    }
}
