//! SDK clients (tenants): registration.

use common::ApiError;
use common::ids;
use common::spin::db::{self, Db};
use common::spin::http::{AdminCtx, json};
use common::validate::{self, JsonBody};
use serde::Serialize;
use spin_sdk::http::Response;

/// A validated registration request.
#[derive(Debug, Default, PartialEq)]
pub struct Registration {
    pub name: String,
    pub website: Option<String>,
    pub description: Option<String>,
    pub contact_name: Option<String>,
    pub contact_title: Option<String>,
    pub contact_email: String,
    pub contact_phone: Option<String>,
    pub expected_apps: Option<String>,
    pub use_case: Option<String>,
    pub expected_users: Option<String>,
    pub agree_terms: bool,
    pub agree_marketing: bool,
    pub agree_data_processing: bool,
    pub require_signature: bool,
}

/// Reads and checks the registration fields. `name`, `contactEmail`, `agreeTerms` and
/// `agreeDataProcessing` (both true) are required; every string is capped.
pub fn parse_registration(mut body: JsonBody) -> Result<Registration, ApiError> {
    let reg = Registration {
        name: body.string("name", 100),
        website: body.opt_string("website", 2048),
        description: body.opt_string("description", 2000),
        contact_name: body.opt_string("contactName", validate::MAX_NAME),
        contact_title: body.opt_string("contactTitle", validate::MAX_NAME),
        contact_email: body.string("contactEmail", 254),
        contact_phone: body.opt_string("contactPhone", 40),
        expected_apps: body.opt_string("expectedApps", 50),
        use_case: body.opt_string("useCase", 2000),
        expected_users: body.opt_string("expectedUsers", 50),
        agree_terms: body.opt_bool("agreeTerms").unwrap_or(false),
        agree_marketing: body.opt_bool("agreeMarketing").unwrap_or(false),
        agree_data_processing: body.opt_bool("agreeDataProcessing").unwrap_or(false),
        require_signature: body.opt_bool("requireSignature").unwrap_or(false),
    };
    if !reg.contact_email.is_empty() && !validate::is_email(&reg.contact_email) {
        body.error("contactEmail", "must be an e-mail address");
    }
    if reg
        .website
        .as_deref()
        .is_some_and(|w| !validate::is_http_url(w))
    {
        body.error("website", "must be an http or https URL");
    }
    if reg
        .contact_phone
        .as_deref()
        .is_some_and(|p| !validate::is_phone(p))
    {
        body.error(
            "contactPhone",
            "may contain only digits, spaces and + - ( ) .",
        );
    }
    if !reg.agree_terms {
        body.error("agreeTerms", "the terms must be accepted");
    }
    if !reg.agree_data_processing {
        body.error("agreeDataProcessing", "data processing must be agreed to");
    }
    body.finish()?;
    Ok(reg)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Registered {
    success: bool,
    api_key: String,
    secret_key: String,
    client_id: String,
    message: String,
}

/// `POST /api/admin/sdk-clients`
pub fn register(ctx: &AdminCtx) -> Result<Response, ApiError> {
    let reg = parse_registration(ctx.json()?)?;
    let client_id = ids::uuid();
    let api_key = format!("pk_{}", ids::random_base62(32));
    let secret_key = format!("sk_{}", ids::random_base62(48));
    let db = Db::open()?;
    db.execute(
        "INSERT INTO sdk_clients (client_id, name, website, description, contact_name, \
         contact_title, contact_email, contact_phone, expected_apps, use_case, expected_users, \
         agree_terms, agree_marketing, agree_data_processing, require_signature, api_key_hash, \
         api_key_prefix, secret_key, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            db::text(&client_id),
            db::text(&reg.name),
            db::opt_text(reg.website.as_deref()),
            db::opt_text(reg.description.as_deref()),
            db::opt_text(reg.contact_name.as_deref()),
            db::opt_text(reg.contact_title.as_deref()),
            db::text(&reg.contact_email),
            db::opt_text(reg.contact_phone.as_deref()),
            db::opt_text(reg.expected_apps.as_deref()),
            db::opt_text(reg.use_case.as_deref()),
            db::opt_text(reg.expected_users.as_deref()),
            db::boolean(reg.agree_terms),
            db::boolean(reg.agree_marketing),
            db::boolean(reg.agree_data_processing),
            db::boolean(reg.require_signature),
            db::text(ids::sha256_hex(api_key.as_bytes())),
            db::text(&api_key[..7]),
            db::text(&secret_key),
            db::text(common::time::now_rfc3339()),
        ],
    )?;
    Ok(json(
        200,
        &Registered {
            success: true,
            api_key,
            secret_key,
            client_id,
            message: "SDK client registered. Keep the secret key safe: it is shown only once."
                .into(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<Registration, ApiError> {
        parse_registration(JsonBody::parse(body.as_bytes())?)
    }

    #[test]
    fn minimal_registration_is_accepted() {
        let reg = parse(
            r#"{"name":"Acme Live","contactEmail":"dev@acme.io","agreeTerms":true,"agreeDataProcessing":true}"#,
        )
        .unwrap();
        assert_eq!(reg.name, "Acme Live");
        assert!(!reg.require_signature);
    }

    #[test]
    fn every_bad_field_is_named() {
        let err = parse(
            r#"{"contactEmail":"nope","website":"javascript:alert(1)","contactPhone":"call me","agreeTerms":false,"colour":"red"}"#,
        )
        .unwrap_err();
        assert_eq!(err.status, 422);
        let fields: Vec<_> = err.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "name",
                "contactEmail",
                "website",
                "contactPhone",
                "agreeTerms",
                "agreeDataProcessing",
                "colour"
            ]
        );
    }
}
