//! Authentication of incoming requests, as each route's [`Auth`] demands.

use super::config;
use super::db::{self, Db};
use crate::ApiError;
use crate::ids::sha256_hex;
use crate::routing::Auth;
use spin_sdk::http::Request;
use subtle::ConstantTimeEq;

/// The SDK client (tenant) named by the request's API key.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub client_id: String,
    pub name: String,
    pub secret_key: String,
    pub require_signature: bool,
}

/// Checks the credentials `auth` asks for; answers the tenant when an API key is needed.
pub fn authenticate(req: &Request, auth: Auth) -> Result<Option<Tenant>, ApiError> {
    match auth {
        Auth::Public => Ok(None),
        Auth::Admin => check_admin(req).map(|()| None),
        Auth::ApiKey | Auth::User => tenant_from_api_key(req).map(Some),
    }
}

fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.header(name).and_then(|v| v.as_str())
}

/// Byte-for-byte equality in constant time.
pub fn secure_eq(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer_token(req: &Request) -> Option<&str> {
    let value = header(req, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Registration is open locally (`registration_mode = "open"`); otherwise it needs the
/// admin token.
fn check_admin(req: &Request) -> Result<(), ApiError> {
    if config::var_or("registration_mode", "admin") == "open" {
        return Ok(());
    }
    let expected = config::var("admin_token").ok_or_else(|| {
        ApiError::unavailable("not_configured", "registration is closed: admin_token is not set")
    })?;
    match bearer_token(req) {
        Some(token) if secure_eq(token, &expected) => Ok(()),
        Some(_) => Err(ApiError::unauthorized("invalid_admin_token", "the admin token is not valid")),
        None => Err(ApiError::unauthorized(
            "missing_admin_token",
            "Authorization: Bearer <admin token> is required",
        )),
    }
}

/// Looks the tenant up by the SHA-256 of its API key (the key itself is never stored).
fn tenant_from_api_key(req: &Request) -> Result<Tenant, ApiError> {
    let key = header(req, "x-api-key")
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::unauthorized("missing_api_key", "X-API-Key is required"))?;
    if key.len() > 200 {
        return Err(ApiError::unauthorized("invalid_api_key", "the API key is not valid"));
    }
    let db = Db::open()?;
    db.query_one(
        "SELECT client_id, name, secret_key, require_signature FROM sdk_clients WHERE api_key_hash = ?",
        &[db::text(sha256_hex(key.as_bytes()))],
        |row| Tenant {
            client_id: db::col_text(row, "client_id"),
            name: db::col_text(row, "name"),
            secret_key: db::col_text(row, "secret_key"),
            require_signature: db::col_bool(row, "require_signature"),
        },
    )?
    .ok_or_else(|| ApiError::unauthorized("invalid_api_key", "the API key is not valid"))
}
