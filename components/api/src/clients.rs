//! SDK clients (tenants): registration.

use crate::ApiRoute;
use domain::ApiError;
use domain::ids;
use domain::request_body;
use domain::validate;
use domain::validate::body::{
    Accepted, Checked, EmailAddress, HttpUrl, OptBool, OptChecked, OptText, PhoneNumber, Text,
};
use edge::endpoint;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::AdminCtx;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
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

/// The registration the (checked) fields make.
fn registration(fields: RegistrationBody) -> Registration {
    Registration {
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
    }
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

/// The operator's routes: registering a client, suspending and reinstating it.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        POST "/api/admin/sdk-clients",
        Admin(register),
        "Register (clients)",
        |op| op.request_example(json!({
            "name": "Acme Live",
            "contactEmail": "dev@acme.example",
            "agreeTerms": true,
            "agreeDataProcessing": true,
        })),
    ),
    endpoint!(
        POST "/api/admin/sdk-clients/{id}/suspend",
        Admin(suspend),
        "Suspend (clients)",
        |op| op
            .described(
                "The client's credentials stop working on every route (403 client_suspended) \
                 and its streams may not publish. Needs the admin token even while \
                 registration is open.",
            )
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
    endpoint!(
        POST "/api/admin/sdk-clients/{id}/reinstate",
        Admin(reinstate),
        "Reinstate (clients)",
        |op| op
            .errors(400, &["invalid_id"])
            .errors(404, &["not_found"]),
    ),
];

/// A new client and its credentials, shown this once.
fn register(ctx: &AdminCtx, fields: RegistrationBody) -> Result<Json<Registered>, ApiError> {
    let reg = registration(fields);
    let api_key = format!("pk_{}", ids::random_base62(32));
    let secret_key = format!("sk_{}", ids::random_base62(48));
    let credentials = StoredCredentials {
        api_key_hash: ids::sha256_hex(api_key.as_bytes()),
        api_key_prefix: api_key[..7].to_string(),
        secret_key: secret_key.clone(),
    };
    let db = ctx.db()?;
    let client_id = tenants::insert(&db, &reg, &credentials, ctx.now())?;
    Ok(Json(Registered {
        success: true,
        api_key,
        secret_key,
        client_id,
        message: "SDK client registered. Keep the secret key safe: it is shown only once.".into(),
    }))
}

/// The client's credentials stop working on every route, and its streams may not publish
/// (a live one is dropped at the media server's next update). The admin token is needed
/// even while registration is open.
fn suspend(ctx: &AdminCtx, _: NoBody) -> Result<Json<Suspension>, ApiError> {
    set_suspended(ctx, Some(ctx.now()))
}

/// Undoes a suspension.
fn reinstate(ctx: &AdminCtx, _: NoBody) -> Result<Json<Suspension>, ApiError> {
    set_suspended(ctx, None)
}

fn set_suspended(ctx: &AdminCtx, at: Option<i64>) -> Result<Json<Suspension>, ApiError> {
    edge::spin::auth::require_admin_token(&ctx.req)?;
    let id = ids::parse_uuid(ctx.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the client id must be a UUID"))?;
    let db = ctx.db()?;
    if !tenants::set_suspended(&db, &id, at)? {
        return Err(ApiError::not_found("client"));
    }
    Ok(Json(Suspension {
        client_id: id,
        suspended: at.is_some(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::validate::JsonBody;
    use domain::validate::body::RequestBody;

    /// The registration as the dispatcher reads it: every field, then `finish`.
    fn parse(body: &str) -> Result<Registration, ApiError> {
        let mut body = JsonBody::parse(body.as_bytes())?;
        let fields = RegistrationBody::read(&mut body);
        body.finish().map(|()| registration(fields))
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
