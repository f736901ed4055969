//! Authentication of incoming requests, as each route's [`Auth`] demands.

use super::config;
use super::db::{self, Db};
use crate::ApiError;
use crate::ids::sha256_hex;
use crate::jwt::{self, UserClaims};
use crate::routing::Auth;
use crate::signing;
use spin_sdk::http::Request;
use spin_sdk::key_value as kv;
use subtle::ConstantTimeEq;

/// The SDK client (tenant) named by the request's API key.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub client_id: String,
    pub name: String,
    pub secret_key: String,
    pub require_signature: bool,
}

/// The user a Bearer JWT names, checked against the database on every request so that a
/// deleted user's or a revoked token stops working at once.
#[derive(Debug, Clone)]
pub struct CurrentUser {
    pub id: String,
    pub username: String,
    pub email: String,
    pub token_version: i64,
}

/// Who is calling, as far as the route needed to know.
#[derive(Debug, Default)]
pub struct Caller {
    pub tenant: Option<Tenant>,
    pub user: Option<CurrentUser>,
}

/// Checks the credentials `auth` asks for.
pub fn authenticate(req: &Request, auth: Auth) -> Result<Caller, ApiError> {
    match auth {
        Auth::Public => Ok(Caller::default()),
        Auth::Admin => check_admin(req).map(|()| Caller::default()),
        Auth::ApiKey | Auth::OptionalUser | Auth::User => {
            let tenant = match header(req, "x-relay-secret") {
                Some(secret) => tenant_for_relay(req, secret)?,
                None => {
                    let tenant = tenant_from_api_key(req)?;
                    check_signature(req, &tenant)?;
                    tenant
                }
            };
            let user = match auth {
                Auth::User => Some(user_from_bearer(req, &tenant)?),
                Auth::OptionalUser if bearer_token(req).is_some() => {
                    Some(user_from_bearer(req, &tenant)?)
                }
                _ => None,
            };
            Ok(Caller {
                tenant: Some(tenant),
                user,
            })
        }
    }
}

/// The chat relay's service credential: `X-Relay-Secret` (the shared `relay_secret`) in
/// place of the API key. The tenant is the Bearer JWT's, or for anonymous reads the one
/// `X-Tenant-Id` names.
fn tenant_for_relay(req: &Request, secret: &str) -> Result<Tenant, ApiError> {
    let expected = config::required("relay_secret")?;
    if !secure_eq(secret.trim(), &expected) {
        return Err(ApiError::unauthorized(
            "invalid_relay_secret",
            "the relay secret is not valid",
        ));
    }
    let client_id = match bearer_token(req) {
        Some(token) => {
            let jwt_secret = config::required("jwt_secret")?;
            let claims: UserClaims = jwt::verify(jwt_secret.as_bytes(), token, crate::time::now())?;
            claims.tid
        }
        None => header(req, "x-tenant-id")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized(
                    "missing_tenant",
                    "relay calls name the tenant by a user token or X-Tenant-Id",
                )
            })?
            .to_string(),
    };
    let db = Db::open()?;
    db.query_one(
        "SELECT client_id, name, secret_key, require_signature FROM sdk_clients WHERE client_id = ?",
        &[db::text(&client_id)],
        tenant_from_row,
    )?
    .ok_or_else(|| ApiError::unauthorized("invalid_tenant", "no such client"))
}

fn tenant_from_row(row: &spin_sdk::sqlite::Row<'_>) -> Tenant {
    Tenant {
        client_id: db::col_text(row, "client_id"),
        name: db::col_text(row, "name"),
        secret_key: db::col_text(row, "secret_key"),
        require_signature: db::col_bool(row, "require_signature"),
    }
}

/// Verifies `X-Signature`/`X-Timestamp` when sent (or required by the client), and refuses
/// a signature already seen within the timestamp window.
fn check_signature(req: &Request, tenant: &Tenant) -> Result<(), ApiError> {
    let signature = header(req, "x-signature");
    let timestamp = header(req, "x-timestamp");
    let (signature, timestamp) = match (signature, timestamp) {
        (Some(s), Some(t)) => (s.trim(), t.trim()),
        (None, None) if !tenant.require_signature => return Ok(()),
        (None, None) => {
            return Err(ApiError::unauthorized(
                "signature_required",
                "this client requires signed requests (X-Signature and X-Timestamp)",
            ));
        }
        _ => {
            return Err(ApiError::unauthorized(
                "incomplete_signature",
                "X-Signature and X-Timestamp must be sent together",
            ));
        }
    };
    let target = req.path_and_query().unwrap_or_else(|| req.path());
    let now = crate::time::now();
    signing::verify(
        &tenant.secret_key,
        &req.method().to_string(),
        target,
        req.body(),
        timestamp,
        signature,
        now,
    )
    .map_err(|e| ApiError::unauthorized(e.code(), e.message()))?;
    remember_signature(&tenant.client_id, signature, now)
}

/// Records a verified signature; a second use within the window is a replay.
fn remember_signature(client_id: &str, signature: &str, now: i64) -> Result<(), ApiError> {
    let store = kv::Store::open_default()
        .map_err(|e| ApiError::internal(format!("key-value store unavailable: {e}")))?;
    let key = format!("sig:{client_id}:{signature}");
    let kv_error = |e: kv::Error| ApiError::internal(format!("key-value store error: {e}"));
    if let Some(value) = store.get(&key).map_err(kv_error)? {
        let expires: i64 = std::str::from_utf8(&value)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if expires > now {
            return Err(ApiError::unauthorized(
                "signature_replayed",
                "this signature has already been used",
            ));
        }
    }
    // Seen signatures are kept for twice the skew window: a timestamp can be up to
    // MAX_SKEW_SECS in the future and then stays valid for as long again.
    let expires = now + 2 * signing::MAX_SKEW_SECS;
    store
        .set(&key, expires.to_string().as_bytes())
        .map_err(kv_error)
}

/// Verifies the Bearer JWT and loads its user from the API key's tenant.
fn user_from_bearer(req: &Request, tenant: &Tenant) -> Result<CurrentUser, ApiError> {
    let token = bearer_token(req).ok_or_else(|| {
        ApiError::unauthorized("missing_token", "Authorization: Bearer <token> is required")
    })?;
    let secret = config::required("jwt_secret")?;
    let claims: UserClaims = jwt::verify(secret.as_bytes(), token, crate::time::now())?;
    if !secure_eq(&claims.tid, &tenant.client_id) {
        return Err(ApiError::unauthorized(
            "tenant_mismatch",
            "the token belongs to another client",
        ));
    }
    let db = Db::open()?;
    let user = db
        .query_one(
            "SELECT id, username, email, token_version FROM users WHERE client_id = ? AND id = ?",
            &[db::text(&tenant.client_id), db::text(&claims.sub)],
            |row| CurrentUser {
                id: db::col_text(row, "id"),
                username: db::col_text(row, "username"),
                email: db::col_text(row, "email"),
                token_version: db::col_int(row, "token_version"),
            },
        )?
        .ok_or_else(|| {
            ApiError::unauthorized("invalid_token", "the token's user no longer exists")
        })?;
    if user.token_version != claims.tv {
        return Err(ApiError::unauthorized(
            "token_revoked",
            "the token has been revoked",
        ));
    }
    Ok(user)
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
        ApiError::unavailable(
            "not_configured",
            "registration is closed: admin_token is not set",
        )
    })?;
    match bearer_token(req) {
        Some(token) if secure_eq(token, &expected) => Ok(()),
        Some(_) => Err(ApiError::unauthorized(
            "invalid_admin_token",
            "the admin token is not valid",
        )),
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
        return Err(ApiError::unauthorized(
            "invalid_api_key",
            "the API key is not valid",
        ));
    }
    let db = Db::open()?;
    db.query_one(
        "SELECT client_id, name, secret_key, require_signature FROM sdk_clients WHERE api_key_hash = ?",
        &[db::text(sha256_hex(key.as_bytes()))],
        tenant_from_row,
    )?
    .ok_or_else(|| ApiError::unauthorized("invalid_api_key", "the API key is not valid"))
}
