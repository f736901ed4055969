//! Request bodies as types. A body is declared once, with [`request_body!`]: each field's
//! name and kind. The kind says both how the field is read (through [`JsonBody`], which
//! reports every bad field by name) and what the OpenAPI document says of it, so the
//! answer to a bad field and the document cannot disagree.

use super::JsonBody;
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::marker::PhantomData;

/// A kind of body field: how it is read and described.
pub trait FieldKind {
    /// What the handler gets.
    type Value;
    /// Whether the document lists the field as required (reading reports it missing).
    const REQUIRED: bool = false;
    /// Reads `name` from `body`, recording an error there when it is bad.
    fn read(body: &mut JsonBody, name: &'static str) -> Self::Value;
    /// The field's JSON schema.
    fn schema() -> Value;
}

/// A request body declared with [`request_body!`].
pub trait RequestBody: Sized {
    /// Its schema's name in the document.
    const NAME: &'static str;
    /// Reads every field (errors are recorded in `body`; `body.finish()` reports them and
    /// any field the body does not know).
    fn read(body: &mut JsonBody) -> Self;
    /// The rules over several fields, checked once every field is read (errors are recorded
    /// in `body`, as the fields' own are).
    fn check(&self, _body: &mut JsonBody) {}
    /// Adds its fields to an object schema's `properties` and `required`.
    fn describe(properties: &mut Map<String, Value>, required: &mut Vec<Value>);
    /// Its JSON schema: an object of its fields and no others.
    fn schema() -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        Self::describe(&mut properties, &mut required);
        let mut schema = json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        });
        if !required.is_empty() {
            schema["required"] = Value::Array(required);
        }
        schema
    }
}

/// Declares a request body: a struct whose fields are read by their kinds, and its schema.
/// A `..field: Other` line takes in every field of another body.
///
/// ```ignore
/// request_body! {
///     /// What creates a thing.
///     pub struct NewThing as "NewThing" {
///         "title" title: Text<200>,
///         "size" size: OptInt<1, 10>,
///     }
/// }
/// ```
#[macro_export]
macro_rules! request_body {
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $schema_name:literal $(checked by $check:path)? {
            $( .. $inner:ident : $inner_ty:ty, )*
            $( $(#[doc = $doc:literal])* $json:literal $field:ident : $kind:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name {
            $( pub $inner: $inner_ty, )*
            $( $(#[doc = $doc])* pub $field: <$kind as $crate::validate::body::FieldKind>::Value, )*
        }

        impl $crate::validate::body::RequestBody for $name {
            const NAME: &'static str = $schema_name;

            fn read(body: &mut $crate::validate::JsonBody) -> Self {
                Self {
                    $( $inner: <$inner_ty as $crate::validate::body::RequestBody>::read(body), )*
                    $( $field: <$kind as $crate::validate::body::FieldKind>::read(body, $json), )*
                }
            }

            $(
                fn check(&self, body: &mut $crate::validate::JsonBody) {
                    $check(self, body)
                }
            )?

            fn describe(
                properties: &mut ::serde_json::Map<String, ::serde_json::Value>,
                required: &mut Vec<::serde_json::Value>,
            ) {
                $( <$inner_ty as $crate::validate::body::RequestBody>::describe(properties, required); )*
                $(
                    properties.insert(
                        $json.to_string(),
                        $crate::validate::body::described(
                            <$kind as $crate::validate::body::FieldKind>::schema(),
                            &[$($doc),*],
                        ),
                    );
                    if <$kind as $crate::validate::body::FieldKind>::REQUIRED {
                        required.push($json.into());
                    }
                )*
            }
        }
    };
}

/// A field's schema with its doc comment (`doc`: its lines) as the description, unless
/// it has none.
pub fn described(mut schema: Value, doc: &[&str]) -> Value {
    let text = doc
        .iter()
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ");
    if let (false, Some(fields)) = (text.is_empty(), schema.as_object_mut()) {
        fields.insert("description".into(), text.into());
    }
    schema
}

/// A required string, trimmed, not empty, at most `MAX` characters.
pub struct Text<const MAX: usize>;

impl<const MAX: usize> FieldKind for Text<MAX> {
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        body.string(name, MAX)
    }

    fn schema() -> Value {
        json!({ "type": "string", "minLength": 1, "maxLength": MAX, "pattern": "\\S" })
    }
}

/// An optional string, trimmed (empty counts as absent), at most `MAX` characters.
pub struct OptText<const MAX: usize>;

impl<const MAX: usize> FieldKind for OptText<MAX> {
    type Value = Option<String>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<String> {
        body.opt_string(name, MAX)
    }

    fn schema() -> Value {
        json!({ "type": ["string", "null"], "maxLength": MAX })
    }
}

/// An optional integer from `MIN` to `MAX`.
pub struct OptInt<const MIN: i64, const MAX: i64>;

impl<const MIN: i64, const MAX: i64> FieldKind for OptInt<MIN, MAX> {
    type Value = Option<i64>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<i64> {
        body.opt_int(name, MIN..=MAX)
    }

    fn schema() -> Value {
        json!({ "type": ["integer", "null"], "minimum": MIN, "maximum": MAX })
    }
}

/// A required integer from `MIN` to `MAX`.
pub struct Int<const MIN: i64, const MAX: i64>;

impl<const MIN: i64, const MAX: i64> FieldKind for Int<MIN, MAX> {
    /// Zero when missing or bad (the body then has an error).
    type Value = i64;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> i64 {
        let n = body.opt_int(name, MIN..=MAX);
        if n.is_none() && !body.has_errors_for(&[name]) {
            body.error(name, "is required");
        }
        n.unwrap_or_default()
    }

    fn schema() -> Value {
        json!({ "type": "integer", "minimum": MIN, "maximum": MAX })
    }
}

/// A string that may be left out (or null) but, when sent, is a text of at most `MAX`
/// characters that is not empty: a name that may be changed but not cleared.
pub struct OptNonEmptyText<const MAX: usize>;

impl<const MAX: usize> FieldKind for OptNonEmptyText<MAX> {
    type Value = Option<String>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<String> {
        let sent = body.has(name);
        let text = body.opt_string(name, MAX);
        if sent && text.is_none() && !body.has_errors_for(&[name]) {
            body.error(name, "must not be empty");
        }
        text
    }

    fn schema() -> Value {
        json!({ "type": ["string", "null"], "minLength": 1, "maxLength": MAX, "pattern": "\\S" })
    }
}

/// A text that may be changed or cleared: left out (or null), it stays as it is
/// (`None`); an empty string clears it (`Some(None)`); at most `MAX` characters.
pub struct ClearableText<const MAX: usize>;

impl<const MAX: usize> FieldKind for ClearableText<MAX> {
    type Value = Option<Option<String>>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Option<String>> {
        let sent = body.has(name);
        let text = body.opt_string(name, MAX);
        sent.then_some(text)
    }

    fn schema() -> Value {
        json!({
            "type": ["string", "null"],
            "maxLength": MAX,
            "description": "An empty string clears it; null or left out, it stays as it is.",
        })
    }
}

/// An optional list of at most `MAX_ITEMS` strings of at most `MAX_LEN` characters each,
/// kept as sent.
pub struct OptTextList<const MAX_ITEMS: usize, const MAX_LEN: usize>;

impl<const MAX_ITEMS: usize, const MAX_LEN: usize> FieldKind for OptTextList<MAX_ITEMS, MAX_LEN> {
    type Value = Option<Vec<String>>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Vec<String>> {
        let value = body.opt_value(name)?;
        match serde_json::from_value::<Vec<String>>(value) {
            Ok(items)
                if items.len() <= MAX_ITEMS
                    && items.iter().all(|item| item.chars().count() <= MAX_LEN) =>
            {
                Some(items)
            }
            _ => {
                body.error(
                    name,
                    format!("must be at most {MAX_ITEMS} strings of at most {MAX_LEN} characters"),
                );
                None
            }
        }
    }

    fn schema() -> Value {
        json!({
            "type": ["array", "null"],
            "maxItems": MAX_ITEMS,
            "items": { "type": "string", "maxLength": MAX_LEN },
        })
    }
}

/// A rule a text keeps beyond its length: an e-mail address, a URL, a username.
pub trait TextRule {
    /// What the document says of such a text.
    const DESCRIPTION: &'static str;
    /// What is wrong with `text` (trimmed, not empty), if anything: the field's error.
    fn problem(text: &str) -> Option<Cow<'static, str>>;
}

/// A required text, trimmed, of at most `MAX` characters, that keeps the rule `R`.
pub struct Checked<R, const MAX: usize>(PhantomData<R>);

impl<R: TextRule, const MAX: usize> FieldKind for Checked<R, MAX> {
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        let text = body.string(name, MAX);
        if !body.has_errors_for(&[name])
            && let Some(problem) = R::problem(&text)
        {
            body.error(name, problem);
        }
        text
    }

    fn schema() -> Value {
        let mut schema = Text::<MAX>::schema();
        schema["description"] = R::DESCRIPTION.into();
        schema
    }
}

/// An optional text (empty counts as absent), trimmed, of at most `MAX` characters, that
/// keeps the rule `R` when sent.
pub struct OptChecked<R, const MAX: usize>(PhantomData<R>);

impl<R: TextRule, const MAX: usize> FieldKind for OptChecked<R, MAX> {
    type Value = Option<String>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<String> {
        let text = body.opt_string(name, MAX)?;
        if let Some(problem) = R::problem(&text) {
            body.error(name, problem);
        }
        Some(text)
    }

    fn schema() -> Value {
        let mut schema = OptText::<MAX>::schema();
        schema["description"] = R::DESCRIPTION.into();
        schema
    }
}

/// An e-mail address.
pub struct EmailAddress;

impl TextRule for EmailAddress {
    const DESCRIPTION: &'static str = "An e-mail address.";

    fn problem(text: &str) -> Option<Cow<'static, str>> {
        (!super::is_email(text)).then_some("must be an e-mail address".into())
    }
}

/// An absolute http or https URL.
pub struct HttpUrl;

impl TextRule for HttpUrl {
    const DESCRIPTION: &'static str = "An http or https URL.";

    fn problem(text: &str) -> Option<Cow<'static, str>> {
        (!super::is_http_url(text)).then_some("must be an http or https URL".into())
    }
}

/// A phone number as people write it.
pub struct PhoneNumber;

impl TextRule for PhoneNumber {
    const DESCRIPTION: &'static str = "Digits, spaces and `+ - ( ) .` only.";

    fn problem(text: &str) -> Option<Cow<'static, str>> {
        (!super::is_phone(text)).then_some("may contain only digits, spaces and + - ( ) .".into())
    }
}

/// A required string taken as sent (not trimmed), such as a password, at most `MAX`
/// characters.
pub struct Secret<const MAX: usize>;

impl<const MAX: usize> FieldKind for Secret<MAX> {
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        let secret = body.opt_raw_string(name, MAX);
        if secret.is_none() && !body.has_errors_for(&[name]) {
            body.error(name, "is required");
        }
        secret.unwrap_or_default()
    }

    fn schema() -> Value {
        json!({ "type": "string", "maxLength": MAX })
    }
}

/// A required RFC 3339 timestamp, read as seconds since the epoch.
pub struct Timestamp;

impl FieldKind for Timestamp {
    /// None when missing or bad (the body then has an error).
    type Value = Option<i64>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<i64> {
        let text = body.string(name, MAX_TIMESTAMP);
        if body.has_errors_for(&[name]) {
            return None;
        }
        parse_timestamp(body, name, &text)
    }

    fn schema() -> Value {
        json!({ "type": "string", "format": "date-time", "maxLength": MAX_TIMESTAMP })
    }
}

/// An optional RFC 3339 timestamp (blank counts as absent), as seconds since the epoch.
pub struct OptTimestamp;

impl FieldKind for OptTimestamp {
    type Value = Option<i64>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<i64> {
        let text = body.opt_string(name, MAX_TIMESTAMP)?;
        parse_timestamp(body, name, &text)
    }

    fn schema() -> Value {
        json!({
            "type": ["string", "null"],
            "anyOf": [
                { "format": "date-time", "maxLength": MAX_TIMESTAMP },
                { "pattern": "^\\s*$" },
            ],
        })
    }
}

/// The longest timestamp text read.
const MAX_TIMESTAMP: usize = 64;

fn parse_timestamp(body: &mut JsonBody, name: &'static str, text: &str) -> Option<i64> {
    let parsed = crate::time::parse_rfc3339(text);
    if parsed.is_none() {
        body.error(name, "must be an RFC 3339 timestamp");
    }
    parsed
}

/// A consent that must be given: `true`, or the field is refused.
pub struct Accepted;

impl FieldKind for Accepted {
    type Value = bool;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> bool {
        let given = body.opt_bool(name);
        if given != Some(true) && !body.has_errors_for(&[name]) {
            body.error(name, "must be accepted");
        }
        given == Some(true)
    }

    fn schema() -> Value {
        json!({ "const": true })
    }
}

/// An optional boolean.
pub struct OptBool;

impl FieldKind for OptBool {
    type Value = Option<bool>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<bool> {
        body.opt_bool(name)
    }

    fn schema() -> Value {
        json!({ "type": ["boolean", "null"] })
    }
}

/// A closed set of names, such as a visibility.
pub trait Choices {
    /// What a name stands for.
    type Value;
    /// The longest text read as a choice: a longer one is refused for its length first.
    const MAX_LEN: usize = 20;
    /// Every name, in the order an error lists them.
    fn names() -> Vec<&'static str>;
    /// The value `name` stands for, if it is one of the names.
    fn choose(name: &str) -> Option<Self::Value>;
}

/// Choices that are their own names.
pub trait NameList {
    const NAMES: &'static [&'static str];
    /// See [`Choices::MAX_LEN`].
    const MAX_LEN: usize = 20;
}

impl<N: NameList> Choices for N {
    type Value = String;
    const MAX_LEN: usize = N::MAX_LEN;

    fn names() -> Vec<&'static str> {
        N::NAMES.to_vec()
    }

    fn choose(name: &str) -> Option<String> {
        N::NAMES.contains(&name).then(|| name.to_string())
    }
}

/// One of `C`'s names, optional.
pub struct OptChoice<C>(PhantomData<C>);

impl<C: Choices> FieldKind for OptChoice<C> {
    type Value = Option<C::Value>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<C::Value> {
        // Left out or null is no choice; a blank string is a choice of none of the names.
        let sent = body.has(name);
        let given = body.opt_string(name, C::MAX_LEN);
        if body.has_errors_for(&[name]) {
            return None;
        }
        let chosen = given.as_deref().and_then(C::choose);
        if chosen.is_none() && sent {
            body.error(name, must_be_one_of(&C::names()));
        }
        chosen
    }

    fn schema() -> Value {
        let mut names: Vec<Value> = C::names().into_iter().map(Value::from).collect();
        names.push(Value::Null);
        json!({ "enum": names })
    }
}

/// One of `C`'s names, required.
pub struct Choice<C>(PhantomData<C>);

impl<C: Choices> FieldKind for Choice<C> {
    /// None when missing or bad (the body then has an error).
    type Value = Option<C::Value>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<C::Value> {
        let given = body.string(name, C::MAX_LEN);
        if body.has_errors_for(&[name]) {
            return None;
        }
        let chosen = C::choose(&given);
        if chosen.is_none() {
            body.error(name, must_be_one_of(&C::names()));
        }
        chosen
    }

    fn schema() -> Value {
        json!({ "enum": C::names() })
    }
}

/// "must be a, b or c".
pub fn must_be_one_of(names: &[&str]) -> String {
    match names {
        [] => "must be absent".to_string(),
        [one] => format!("must be {one}"),
        [rest @ .., last] => format!("must be {} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    pub enum Size {
        Small,
        Large,
    }

    impl Choices for Size {
        type Value = Size;

        fn names() -> Vec<&'static str> {
            vec!["small", "large"]
        }

        fn choose(name: &str) -> Option<Size> {
            match name {
                "small" => Some(Size::Small),
                "large" => Some(Size::Large),
                _ => None,
            }
        }
    }

    crate::request_body! {
        /// A test body.
        pub struct Inner as "Inner" {
            "name" name: Text<5>,
        }
    }

    crate::request_body! {
        /// A test body of required kinds.
        pub struct Required as "Required" {
            "size" size: Choice<Size>,
            "count" count: Int<0, 9>,
        }
    }

    #[test]
    fn required_kinds_say_what_is_missing_or_bad() {
        let read = |json: &str| {
            let mut body = JsonBody::parse(json.as_bytes()).unwrap();
            let fields = Required::read(&mut body);
            (fields, body)
        };
        let (fields, _) = read(r#"{"size": "large", "count": 7}"#);
        assert_eq!((fields.size, fields.count), (Some(Size::Large), 7));
        let messages = |json: &str| -> Vec<(String, String)> {
            let (_, body) = read(json);
            match body.finish() {
                Ok(()) => Vec::new(),
                Err(e) => e.fields.into_iter().map(|f| (f.field, f.message)).collect(),
            }
        };
        assert_eq!(messages(r#"{"size": "small", "count": 0}"#), []);
        assert_eq!(
            messages("{}"),
            [
                ("size".to_string(), "is required".to_string()),
                ("count".into(), "is required".into()),
            ]
        );
        assert_eq!(
            messages(r#"{"size": "huge", "count": 10}"#),
            [
                ("size".to_string(), "must be small or large".to_string()),
                ("count".into(), "must be an integer from 0 to 9".into()),
            ]
        );
        assert_eq!(
            Required::schema()["properties"],
            json!({
                "size": {"enum": ["small", "large"]},
                "count": {"type": "integer", "minimum": 0, "maximum": 9},
            })
        );
    }

    crate::request_body! {
        /// A test body of changes.
        pub struct Changes as "Changes" {
            /// Its name,
            /// never empty.
            "name" name: OptNonEmptyText<5>,
            "note" note: ClearableText<5>,
        }
    }

    #[test]
    fn changes_keep_clear_or_refuse_what_is_sent() {
        let read = |json: &str| {
            let mut body = JsonBody::parse(json.as_bytes()).unwrap();
            let changes = Changes::read(&mut body);
            let errors: Vec<String> = match body.finish() {
                Ok(()) => Vec::new(),
                Err(e) => e.fields.into_iter().map(|f| f.message).collect(),
            };
            (changes.name, changes.note, errors)
        };
        // Left out or null: both stay as they are.
        assert_eq!(read("{}"), (None, None, vec![]));
        assert_eq!(
            read(r#"{"name": null, "note": null}"#),
            (None, None, vec![])
        );
        // Sent: a name is set; a note is set, or cleared by an empty string.
        assert_eq!(
            read(r#"{"name": " ada ", "note": "hi"}"#),
            (Some("ada".into()), Some(Some("hi".into())), vec![])
        );
        assert_eq!(read(r#"{"note": " "}"#), (None, Some(None), vec![]));
        // A name cannot be cleared, and both have their length.
        let (_, _, errors) = read(r#"{"name": "  ", "note": "too long"}"#);
        assert_eq!(
            errors,
            ["must not be empty", "must be at most 5 characters"]
        );
        // A field's doc comment is its description in the document.
        let schema = Changes::schema();
        assert_eq!(
            schema["properties"]["name"]["description"],
            "Its name, never empty."
        );
        assert_eq!(
            schema["properties"]["note"]["description"],
            ClearableText::<5>::schema()["description"]
        );
    }

    #[test]
    fn a_text_list_is_bounded_in_items_and_length() {
        let read = |json: &str| {
            let mut body = JsonBody::parse(json.as_bytes()).unwrap();
            let list = OptTextList::<2, 3>::read(&mut body, "perks");
            (list, body.finish().map_err(|e| e.fields[0].message.clone()))
        };
        assert_eq!(read("{}"), (None, Ok(())));
        assert_eq!(
            read(r#"{"perks": ["a", "bcd"]}"#),
            (Some(vec!["a".into(), "bcd".into()]), Ok(()))
        );
        let refused = Err("must be at most 2 strings of at most 3 characters".to_string());
        assert_eq!(
            read(r#"{"perks": ["a", "b", "c"]}"#),
            (None, refused.clone())
        );
        assert_eq!(read(r#"{"perks": ["abcd"]}"#), (None, refused.clone()));
        assert_eq!(read(r#"{"perks": [1]}"#), (None, refused));
    }

    crate::request_body! {
        /// A test body of checked texts.
        pub struct Signup as "Signup" {
            "email" email: Checked<EmailAddress, 20>,
            "site" site: OptChecked<HttpUrl, 30>,
            "password" password: Secret<8>,
            "terms" terms: Accepted,
        }
    }

    #[test]
    fn checked_texts_secrets_and_consents_name_what_is_wrong() {
        let read = |json: &str| {
            let mut body = JsonBody::parse(json.as_bytes()).unwrap();
            let signup = Signup::read(&mut body);
            let errors: Vec<(String, String)> = match body.finish() {
                Ok(()) => Vec::new(),
                Err(e) => e.fields.into_iter().map(|f| (f.field, f.message)).collect(),
            };
            (signup, errors)
        };
        let (ok, errors) =
            read(r#"{"email": " a@b.io ", "password": " pw ", "terms": true, "site": ""}"#);
        assert_eq!(errors, []);
        // Texts are trimmed, secrets kept as sent; an empty optional text is absent.
        assert_eq!(
            (ok.email.as_str(), ok.password.as_str()),
            ("a@b.io", " pw ")
        );
        assert_eq!((ok.site, ok.terms), (None, true));

        let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(f, m)| (f.to_string(), m.to_string()))
                .collect()
        };
        // Missing: each says so once, the consent as refused.
        assert_eq!(
            read("{}").1,
            owned(&[
                ("email", "is required"),
                ("password", "is required"),
                ("terms", "must be accepted"),
            ])
        );
        // Sent but wrong: the rule's own message, after the length.
        assert_eq!(
            read(
                r#"{"email": "nope", "site": "ftp://x", "password": "123456789", "terms": false}"#
            )
            .1,
            owned(&[
                ("email", "must be an e-mail address"),
                ("site", "must be an http or https URL"),
                ("password", "must be at most 8 characters"),
                ("terms", "must be accepted"),
            ])
        );
        assert_eq!(
            read(
                r#"{"email": "a-very-long-address@example.com", "password": "x", "terms": "yes"}"#
            )
            .1,
            owned(&[
                ("email", "must be at most 20 characters"),
                ("terms", "must be a boolean"),
            ])
        );
        let schema = Signup::schema();
        assert_eq!(
            schema["properties"]["email"]["description"],
            "An e-mail address."
        );
        assert_eq!(
            schema["properties"]["site"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(schema["properties"]["terms"], json!({"const": true}));
        assert_eq!(schema["required"], json!(["email", "password", "terms"]));
    }

    #[test]
    fn timestamps_are_rfc_3339_and_blank_is_absent() {
        let read = |json: &str| {
            let mut body = JsonBody::parse(json.as_bytes()).unwrap();
            let since = Timestamp::read(&mut body, "since");
            let until = OptTimestamp::read(&mut body, "until");
            let errors: Vec<String> = match body.finish() {
                Ok(()) => Vec::new(),
                Err(e) => e
                    .fields
                    .into_iter()
                    .map(|f| format!("{}: {}", f.field, f.message))
                    .collect(),
            };
            (since, until, errors)
        };
        assert_eq!(
            read(r#"{"since": "1970-01-01T00:01:00Z", "until": " "}"#),
            (Some(60), None, vec![])
        );
        assert_eq!(
            read(r#"{"since": "1970-01-01T00:01:00Z", "until": "1970-01-01T01:00:00+01:00"}"#),
            (Some(60), Some(0), vec![])
        );
        assert_eq!(
            read(r#"{"until": "tomorrow"}"#),
            (
                None,
                None,
                vec![
                    "since: is required".to_string(),
                    "until: must be an RFC 3339 timestamp".to_string(),
                ]
            )
        );
    }

    crate::request_body! {
        /// A test body with another inside.
        pub struct Outer as "Outer" {
            ..inner: Inner,
            "size" size: OptChoice<Size>,
            "count" count: OptInt<1, 3>,
        }
    }

    fn read(json: &str) -> (Outer, Result<(), crate::ApiError>) {
        let mut body = JsonBody::parse(json.as_bytes()).unwrap();
        let outer = Outer::read(&mut body);
        (outer, body.finish())
    }

    #[test]
    fn a_body_reads_its_fields_and_reports_each_bad_one() {
        let (ok, result) = read(r#"{"name": " ada ", "size": "large"}"#);
        assert!(result.is_ok());
        assert_eq!(ok.inner.name, "ada");
        assert_eq!(ok.size, Some(Size::Large));
        assert_eq!(ok.count, None);

        // Null is no choice; a blank string is not one of the names.
        let (ok, result) = read(r#"{"name": "ada", "size": null}"#);
        assert!(result.is_ok());
        assert_eq!(ok.size, None);
        let (_, result) = read(r#"{"name": "ada", "size": " "}"#);
        assert_eq!(
            result.unwrap_err().fields[0].message,
            "must be small or large"
        );

        let (_, result) = read(r#"{"size": "huge", "count": 9, "extra": 1}"#);
        let errors: Vec<(String, String)> = result
            .unwrap_err()
            .fields
            .into_iter()
            .map(|e| (e.field, e.message))
            .collect();
        assert_eq!(
            errors,
            [
                ("name".to_string(), "is required".to_string()),
                ("size".into(), "must be small or large".into()),
                ("count".into(), "must be an integer from 1 to 3".into()),
                ("extra".into(), "is not a known field".into()),
            ]
        );
    }

    #[test]
    fn a_body_schema_lists_its_fields_and_refuses_others() {
        assert_eq!(
            Outer::schema(),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "\\S"},
                    "size": {"enum": ["small", "large", null]},
                    "count": {"type": ["integer", "null"], "minimum": 1, "maximum": 3},
                },
                "required": ["name"],
                "additionalProperties": false,
            })
        );
    }
}
