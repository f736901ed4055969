//! SDK clients (tenants): registration.

use common::ApiError;
use common::ids;
use common::spin::http::{AdminCtx, json};
use common::store::tenants::{self, Registration, StoredCredentials};
use common::validate::{self, JsonBody};
use serde::Serialize;
use spin_sdk::http::Response;

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
    common::spin::auth::require_admin_token(&ctx.req)?;
    let id = ids::parse_uuid(ctx.param("id"))
        .ok_or_else(|| ApiError::bad_request("invalid_id", "the client id must be a UUID"))?;
    let db = ctx.db()?;
    if !tenants::set_suspended(&db, &id, at)? {
        return Err(ApiError::not_found("client"));
    }
    Ok(json(
        200,
        &serde_json::json!({ "clientId": id, "suspended": at.is_some() }),
    ))
}
