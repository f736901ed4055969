//! The credentials of each tier: the API key (and HMAC signature), user JWTs, the relay's
//! service credential, the admin and jobs tokens, and the SFU's webhook signature.

use super::config;
use domain::ApiError;
use domain::ids::sha256_hex;
use domain::jwt;
use domain::signing;
use spin_sdk::http::Request;
use store::tenants;
use subtle::ConstantTimeEq;

/// The SDK client (tenant) named by the request's API key.
pub use store::tenants::Tenant;

/// The user a Bearer JWT names, checked against the database on every request so that a
/// deleted user's or a revoked token stops working at once.
#[derive(Debug, Clone)]
pub struct CurrentUser {
    pub id: String,
    pub username: String,
    pub email: String,
    pub token_version: i64,
}

/// The tenant named by `X-API-Key`, and whether the request is signed with its secret key
/// (a signature that is sent must verify; a client registered with `requireSignature`
/// refuses unsigned calls on every route).
pub fn tenant(req: &Request) -> Result<(Tenant, bool), ApiError> {
    let tenant = active(tenant_from_api_key(req)?)?;
    let signed = check_signature(req, &tenant)?;
    Ok((tenant, signed))
}

/// A suspended client's credentials prove nothing: 403 on every route.
fn active(tenant: Tenant) -> Result<Tenant, ApiError> {
    if tenant.suspended {
        return Err(ApiError::new(
            403,
            "client_suspended",
            "this SDK client is suspended; contact the platform's operator",
        ));
    }
    Ok(tenant)
}

/// What the chat relay proved: the tenant, and the user whose JWT it forwards (none for
/// anonymous reads).
pub struct RelayCall {
    pub tenant: Tenant,
    pub user: Option<CurrentUser>,
}

/// The chat relay's service credential, on the routes whose tier accepts it:
/// `X-Relay-Secret` (the shared `relay_secret`) in place of the API key. The tenant is the
/// forwarded Bearer JWT's, or for anonymous reads the one `X-Tenant-Id` names. `None` when
/// the request does not claim to come from the relay.
pub fn relay_call(req: &Request) -> Result<Option<RelayCall>, ApiError> {
    let Some(secret) = header(req, "x-relay-secret") else {
        return Ok(None);
    };
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
            let claims = jwt::verify_user(jwt_secret.as_bytes(), token, domain::time::now())?;
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
    let db = super::store::open()?;
    let tenant = tenants::by_id(&db, &client_id)?
        .ok_or_else(|| ApiError::unauthorized("invalid_tenant", "no such client"))?;
    let tenant = active(tenant)?;
    let user = match bearer_token(req) {
        Some(_) => Some(user_from_bearer(req, &tenant)?),
        None => None,
    };
    if tenant.require_signature {
        check_socket_ticket(req, &tenant, user.as_ref())?;
    }
    Ok(Some(RelayCall { tenant, user }))
}

/// A client that requires signed calls gets none unsigned through the relay either: the
/// socket must have been opened with a ticket minted by a (signed) API call, for this
/// tenant, this stream and this user (or read-only, for reads). The relay checked its
/// expiry when the socket opened and forwards it as `X-Relay-Ticket`.
fn check_socket_ticket(
    req: &Request,
    tenant: &Tenant,
    user: Option<&CurrentUser>,
) -> Result<(), ApiError> {
    let refused = |why: &str| {
        ApiError::unauthorized(
            "signature_required",
            format!(
                "this client requires signed requests: open the chat socket with a ticket \
                 from POST /api/streams/{{id}}/chat/ticket ({why})"
            ),
        )
    };
    let ticket = header(req, "x-relay-ticket").ok_or_else(|| refused("no ticket"))?;
    let secret = config::required("jwt_secret")?;
    let claims = jwt::verify_socket_ticket(secret.as_bytes(), ticket.trim(), None)
        .map_err(|_| refused("the ticket is not valid"))?;
    let stream = req
        .path()
        .strip_prefix("/api/streams/")
        .and_then(|rest| rest.split('/').next())
        .and_then(domain::ids::parse_uuid);
    if !secure_eq(&claims.tid, &tenant.client_id) || stream.as_deref() != Some(&claims.stream) {
        return Err(refused("the ticket is for another stream"));
    }
    match (user, claims.sub.as_deref()) {
        (None, _) => Ok(()),
        (Some(user), Some(sub)) if sub == user.id => Ok(()),
        (Some(_), _) => Err(refused("the ticket is for another user")),
    }
}

/// Verifies `X-Signature`/`X-Timestamp` when sent (or required by the client), and refuses
/// a signature already seen within the timestamp window. Answers whether it is signed.
fn check_signature(req: &Request, tenant: &Tenant) -> Result<bool, ApiError> {
    let signature = header(req, "x-signature");
    let timestamp = header(req, "x-timestamp");
    let (signature, timestamp) = match (signature, timestamp) {
        (Some(s), Some(t)) => (s.trim(), t.trim()),
        (None, None) if !tenant.require_signature => return Ok(false),
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
    let now = domain::time::now();
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
    remember_signature(&tenant.client_id, signature, now)?;
    Ok(true)
}

/// Records a verified signature; a second use within the window is a replay.
fn remember_signature(client_id: &str, signature: &str, now: i64) -> Result<(), ApiError> {
    // Seen signatures are kept for twice the skew window: a timestamp can be up to
    // MAX_SKEW_SECS in the future and then stays valid for as long again.
    let expires = now + 2 * signing::MAX_SKEW_SECS;
    let db = super::store::open()?;
    if !store::replay::first_use(&db, client_id, signature, expires, now)? {
        return Err(ApiError::unauthorized(
            "signature_replayed",
            "this signature has already been used",
        ));
    }
    RECORDED.with(|r| *r.borrow_mut() = Some((client_id.to_string(), signature.to_string())));
    Ok(())
}

thread_local! {
    /// The signature this request's authentication recorded as used (client, signature).
    /// A component instance serves one request, so this is the request's own.
    static RECORDED: std::cell::RefCell<Option<(String, String)>> =
        const { std::cell::RefCell::new(None) };
}

/// Forgets what an earlier authentication recorded (before this request's runs).
pub fn clear_recorded_signature() {
    RECORDED.with(|r| r.borrow_mut().take());
}

/// Gives back the signature this request's authentication recorded, when the request was
/// then refused before it did anything (its shape): the same signed call may be sent
/// again, completed. Only a signature this request verified and recorded is given back.
pub fn release_signature() -> Result<(), ApiError> {
    let Some((client_id, signature)) = RECORDED.with(|r| r.borrow_mut().take()) else {
        return Ok(());
    };
    let db = super::store::open()?;
    store::replay::forget(&db, &client_id, &signature)
}

/// Verifies the Bearer JWT and loads its user from the API key's tenant.
pub fn user_from_bearer(req: &Request, tenant: &Tenant) -> Result<CurrentUser, ApiError> {
    let claims = verified_claims(req)?;
    check_token_tenant(&claims, tenant)?;
    let db = super::store::open()?;
    let user =
        store::users::in_session(&db, &tenant.client_id, &claims.sub, claims.sid.as_deref())?;
    session_user(&claims, user)
}

/// The tenant of the API key, whether the request is signed, and the user of the Bearer
/// JWT: [`tenant`] then [`user_from_bearer`], with the same checks answered in the same
/// order, but with the client and the user read in one statement once the JWT verifies (a
/// round trip fewer on every user's request).
pub fn tenant_and_user(req: &Request) -> Result<(Tenant, bool, CurrentUser), ApiError> {
    let key_hash = api_key_hash(req)?;
    let Ok(claims) = verified_claims(req) else {
        // The tenant's own checks come first, then the token's error.
        let (tenant, signed) = tenant(req)?;
        let user = user_from_bearer(req, &tenant)?;
        return Ok((tenant, signed, user));
    };
    let db = super::store::open()?;
    let (tenant, user) = store::users::tenant_and_user_in_session(
        &db,
        &key_hash,
        &claims.sub,
        claims.sid.as_deref(),
    )?
    .ok_or_else(invalid_api_key)?;
    let tenant = active(tenant)?;
    let signed = check_signature(req, &tenant)?;
    check_token_tenant(&claims, &tenant)?;
    Ok((tenant, signed, session_user(&claims, user)?))
}

/// The Bearer JWT's claims, once its signature and expiry verify.
fn verified_claims(req: &Request) -> Result<jwt::UserClaims, ApiError> {
    let token = bearer_token(req).ok_or_else(|| {
        ApiError::unauthorized("missing_token", "Authorization: Bearer <token> is required")
    })?;
    let secret = config::required("jwt_secret")?;
    jwt::verify_user(secret.as_bytes(), token, domain::time::now())
}

fn check_token_tenant(claims: &jwt::UserClaims, tenant: &Tenant) -> Result<(), ApiError> {
    if !secure_eq(&claims.tid, &tenant.client_id) {
        return Err(ApiError::unauthorized(
            "tenant_mismatch",
            "the token belongs to another client",
        ));
    }
    Ok(())
}

/// The token's user as stored (with whether its session was revoked), unless it is gone
/// or the token was revoked.
fn session_user(
    claims: &jwt::UserClaims,
    stored: Option<store::users::InSession>,
) -> Result<CurrentUser, ApiError> {
    let (user, session_revoked) = stored.ok_or_else(|| {
        ApiError::unauthorized("invalid_token", "the token's user no longer exists")
    })?;
    if user.token_version != claims.tv || session_revoked {
        return Err(ApiError::unauthorized(
            "token_revoked",
            "the token has been revoked",
        ));
    }
    Ok(CurrentUser {
        id: user.id,
        username: user.username,
        email: user.email,
        token_version: user.token_version,
    })
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
pub fn check_admin(req: &Request) -> Result<(), ApiError> {
    if config::var_or("registration_mode", "admin") == "open" {
        return Ok(());
    }
    require_admin_token(req)
}

/// The operator's admin token, whatever the registration mode: for what open
/// registration does not open (suspending a client).
pub fn require_admin_token(req: &Request) -> Result<(), ApiError> {
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
    let key_hash = api_key_hash(req)?;
    let db = super::store::open()?;
    tenants::by_api_key_hash(&db, &key_hash)?.ok_or_else(invalid_api_key)
}

/// The SHA-256 of the request's `X-API-Key`, which must be sent.
fn api_key_hash(req: &Request) -> Result<String, ApiError> {
    let key = header(req, "x-api-key")
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::unauthorized("missing_api_key", "X-API-Key is required"))?;
    if key.len() > 200 {
        return Err(invalid_api_key());
    }
    Ok(sha256_hex(key.as_bytes()))
}

fn invalid_api_key() -> ApiError {
    ApiError::unauthorized("invalid_api_key", "the API key is not valid")
}

/// The scheduler's credential: `Authorization: Bearer <jobs_token>`, or `?token=` for
/// schedulers that cannot set headers.
pub fn check_jobs_token(req: &Request) -> Result<(), ApiError> {
    let expected = config::var("jobs_token").ok_or_else(|| {
        ApiError::unavailable("not_configured", "jobs are off: jobs_token is not set")
    })?;
    let query_token = domain::validate::query_value(req.query(), "token");
    let sent = bearer_token(req).map(str::to_string).or(query_token);
    match sent {
        Some(token) if secure_eq(&token, &expected) => Ok(()),
        Some(_) => Err(ApiError::unauthorized(
            "invalid_jobs_token",
            "the jobs token is not valid",
        )),
        None => Err(ApiError::unauthorized(
            "missing_jobs_token",
            "Authorization: Bearer <jobs token> is required",
        )),
    }
}

/// The media server's credential: `X-Media-Secret` equal to `media_secret` (compared in
/// constant time). Without a configured secret the media routes are off (503).
pub fn check_media_secret(req: &Request) -> Result<(), ApiError> {
    let expected = config::var("media_secret").ok_or_else(|| {
        ApiError::unavailable(
            "not_configured",
            "the media routes are off: media_secret is not set",
        )
    })?;
    match header(req, domain::media::protocol::SECRET_HEADER) {
        Some(sent) if secure_eq(sent.trim(), &expected) => Ok(()),
        Some(_) => Err(ApiError::unauthorized(
            "invalid_media_secret",
            "the media secret is not valid",
        )),
        None => Err(ApiError::unauthorized(
            "missing_media_secret",
            "X-Media-Secret is required",
        )),
    }
}

/// Largest SFU webhook body accepted.
const MAX_SFU_WEBHOOK_BODY: usize = 64 * 1024;

#[derive(Debug, Clone, serde::Deserialize)]
struct SfuWebhookClaims {
    iss: String,
    sha256: String,
}

/// The SFU's (LiveKit's) webhook: the `Authorization` header is a JWT signed with the SFU
/// API secret, issued by the SFU API key, whose `sha256` claim is the base64 SHA-256 of the
/// exact body. Answers the verified body.
pub fn verified_sfu_webhook(req: &Request) -> Result<serde_json::Value, ApiError> {
    use base64::Engine;
    use sha2::Digest;
    let unauthorized = |why: &str| {
        ApiError::unauthorized(
            "invalid_webhook",
            format!("the webhook is not authentic: {why}"),
        )
    };
    let body = req.body();
    if body.len() > MAX_SFU_WEBHOOK_BODY {
        return Err(ApiError::payload_too_large(MAX_SFU_WEBHOOK_BODY));
    }
    let sfu = super::sfu::SfuConfig::load().credentials()?;
    let header =
        header(req, "authorization").ok_or_else(|| unauthorized("no Authorization header"))?;
    let token = header.strip_prefix("Bearer ").unwrap_or(header).trim();
    let claims: SfuWebhookClaims =
        jwt::verify(sfu.api_secret.as_bytes(), token, domain::time::now())
            .map_err(|_| unauthorized("bad signature or expired"))?;
    if !secure_eq(&claims.iss, &sfu.api_key) {
        return Err(unauthorized("issued by another API key"));
    }
    let digest = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body));
    if !secure_eq(&claims.sha256, &digest) {
        return Err(unauthorized("the body does not match its digest"));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request("malformed_json", format!("the webhook is not JSON: {e}"))
    })
}
