//! SDK clients (tenants): registration.

use domain::ApiError;
use domain::ids;
use domain::request_body;
use domain::validate::body::{
    Accepted, Checked, EmailAddress, HttpUrl, OptBool, OptChecked, OptText, PhoneNumber,
    RequestBody, Text,
};
use domain::validate::{self, JsonBody};
use edge::spin::http::{AdminCtx, json};
use schemars::JsonSchema;
use serde::Serialize;
use spin_sdk::http::Response;
use store::tenants::{self, Registration, StoredCredentials};

request_body! {
    /// A new SDK client (tenant): who it is, whom to contact, what it agrees to.
    pub struct RegistrationBody as "ClientRegistration" {
        /// The app's or company's name.
        "name" name: Text<100>,
        "contactEmail" contact_email: Checked<EmailAddress, 254>,
        "website" website: OptChecked<HttpUrl, 2048>,
        "description" description: OptText<2000>,
        "contactName" contact_name: OptText<{ validate::MAX_NAME }>,
        "contactTitle" contact_title: OptText<{ validate::MAX_NAME }>,
        "contactPhone" contact_phone: OptChecked<PhoneNumber, 40>,
        "expectedApps" expected_apps: OptText<50>,
        "useCase" use_case: OptText<2000>,
        "expectedUsers" expected_users: OptText<50>,
        /// The terms of service are accepted.
        "agreeTerms" agree_terms: Accepted,
        "agreeMarketing" agree_marketing: OptBool,
        /// The processing of the contact's data is agreed to.
        "agreeDataProcessing" agree_data_processing: Accepted,
        /// The client then refuses every unsigned call (the trust model's signed server calls).
        "requireSignature" require_signature: OptBool,
    }
}

/// Reads and checks the registration fields, reporting every bad one.
pub fn parse_registration(mut body: JsonBody) -> Result<Registration, ApiError> {
    let fields = RegistrationBody::read(&mut body);
    body.finish()?;
    Ok(Registration {
        name: fields.name,
        website: fields.website,
        description: fields.description,
        contact_name: fields.contact_name,
        contact_title: fields.contact_title,
        contact_email: fields.contact_email,
        contact_phone: fields.contact_phone,
        expected_apps: fields.expected_apps,
        use_case: fields.use_case,
        expected_users: fields.expected_users,
        agree_terms: fields.agree_terms,
        agree_marketing: fields.agree_marketing.unwrap_or(false),
        agree_data_processing: fields.agree_data_processing,
        require_signature: fields.require_signature.unwrap_or(false),
    })
}

/// A registered client's credentials, shown this once.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "RegisteredClient")]
pub struct Registered {
    #[schemars(extend("const" = true))]
    success: bool,
    /// The public API key (`pk_...`), sent by apps as `X-API-Key`.
    api_key: String,
    /// The secret key (`sk_...`) for server calls and webhook signatures.
    secret_key: String,
    #[schemars(extend("format" = "uuid"))]
    client_id: String,
    message: String,
}

/// Whether a client is suspended, after a suspension or a reinstatement.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ClientSuspension")]
pub struct Suspension {
    #[schemars(extend("format" = "uuid"))]
    client_id: String,
    suspended: bool,
}

/// `POST /api/admin/sdk-clients`
pub fn register(ctx: &AdminCtx) -> Result<Response, ApiError> {
    let reg = parse_registration(ctx.json()?)?;
    let api_key = format!("pk_{}", ids::random_base62(32));
    let secret_key = format!("sk_{}", ids::random_base62(48));
    let credentials = StoredCredentials {
        api_key_hash: ids::sha256_hex(api_key.as_bytes()),
        api_key_prefix: api_key[..7].to_string(),
        secret_key: secret_key.clone(),
    };
    let db = ctx.db()?;
    let client_id = tenants::insert(&db, &reg, &credentials, ctx.now())?;
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

/// `POST /api/admin/sdk-clients/{id}/suspend`: the client's credentials stop working on
/// every route, and its streams may not publish (a live one is dropped at the media
/// server's next update). The admin token is needed even while registration is open.
pub fn suspend(ctx: &AdminCtx) -> Result<Response, ApiError> {
    set_suspended(ctx, Some(ctx.now()))
}

/// `POST /api/admin/sdk-clients/{id}/reinstate`: undoes a suspension.
pub fn reinstate(ctx: &AdminCtx) -> Result<Response, ApiError> {
    set_suspended(ctx, None)
}

fn set_suspended(ctx: &AdminCtx, at: Option<i64>) -> Result<Response, ApiError> {
    edge::spin::auth::require_admin_token(&ctx.req)?;
    let id = ids::parse_uuid(ctx.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the client id must be a UUID"))?;
    let db = ctx.db()?;
    if !tenants::set_suspended(&db, &id, at)? {
        return Err(ApiError::not_found("client"));
    }
    Ok(json(
        200,
        &Suspension {
            client_id: id,
            suspended: at.is_some(),
        },
    ))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("POST /api/admin/sdk-clients", "Register (clients)")
            .takes(Schema::body::<RegistrationBody>())
            .request_example(json!({
                "name": "Acme Live",
                "contactEmail": "dev@acme.example",
                "agreeTerms": true,
                "agreeDataProcessing": true,
            }))
            .answers(200, "OK", Schema::view::<Registered>()),
        Operation::new(
            "POST /api/admin/sdk-clients/{id}/suspend",
            "Suspend (clients)",
        )
        .described(
            "The client's credentials stop working on every route (403 client_suspended) \
                 and its streams may not publish. Needs the admin token even while \
                 registration is open.",
        )
        .answers(200, "OK", Schema::view::<Suspension>())
        .errors(400, &["invalid_id"])
        .errors(404, &["not_found"]),
        Operation::new(
            "POST /api/admin/sdk-clients/{id}/reinstate",
            "Reinstate (clients)",
        )
        .answers(200, "OK", Schema::view::<Suspension>())
        .errors(400, &["invalid_id"])
        .errors(404, &["not_found"]),
    ]
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
