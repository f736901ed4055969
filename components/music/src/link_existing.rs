//! `POST /api/users/music/link-existing`: links the caller to an account that already
//! exists on the music platform.
//!
//! The account's e-mail is always read from the platform (`GET /users/{id}`); the
//! `musicUserEmail` a client sends is only a hint. When that e-mail equals the caller's
//! (ignoring case), no password is needed. Otherwise the password is checked with
//! `POST {music_url}/gettoken/{email}/{password}/`: a token in the answer means it is
//! right, and that token becomes the link's music token. A failed check is 401 and stores
//! nothing; repeated failures are rate limited per user.

use crate::links::{self, LinkRecord};
use crate::platform::{self, MusicPlatform};
use crate::sealed;
use domain::problem::FieldError;
use domain::validate::JsonBody;
use domain::validate::body::{EmailAddress, FieldKind, OptChecked, Text};
use domain::{ApiError, request_body};
use edge::endpoint;
use edge::rate::{Counts, RateLimit};
use edge::routing::Route;
use edge::spin::endpoint::Json;
use edge::spin::http::{Handler, UserCtx};
use serde_json::{Value, json};
use store::rate_limits;

/// Failed password checks allowed per user per window; a success forgets them.
pub const PASSWORD_FAILURES: RateLimit = RateLimit {
    bucket: "music-link",
    max: 10,
    window_secs: 15 * 60,
    per: "user",
    counts: Counts::Failures,
};

const MAX_ID: usize = 200;
const MAX_EMAIL: usize = 254;
const MAX_PASSWORD: usize = 1024;

/// A password, taken as sent (not trimmed), of at most `MAX` characters; empty or left
/// out, there is none.
pub struct OptPassword<const MAX: usize>;

impl<const MAX: usize> FieldKind for OptPassword<MAX> {
    type Value = Option<String>;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<String> {
        body.opt_raw_string(name, MAX).filter(|p| !p.is_empty())
    }

    fn schema() -> Value {
        json!({ "type": ["string", "null"], "maxLength": MAX })
    }
}

request_body! {
    /// The account on the music platform to link the caller to.
    #[derive(PartialEq, Eq)]
    pub struct LinkExisting as "MusicAccountToLink" {
        "musicUserId" music_user_id: Text<MAX_ID>,
        /// The account's e-mail address as the client knows it: only a hint (the
        /// platform's own is what counts).
        "musicUserEmail" music_user_email: OptChecked<EmailAddress, MAX_EMAIL>,
        /// The account's password on the music platform: needed when its e-mail differs
        /// from the caller's.
        "password" password: OptPassword<MAX_PASSWORD>,
    }
}

/// The route that links the caller to an existing account of the music platform.
pub const ROUTES: &[Route<Handler>] = &[endpoint!(
    POST "/api/users/music/link-existing",
    User(link_existing),
    "Link existing (link existing)",
    |op| op
        .errors(401, &["music_password_invalid"])
        .errors(404, &["not_found"])
        .errors(422, &["validation_failed"])
        .rate_limited(&PASSWORD_FAILURES)
        .errors(502, platform::FAILURES)
        .errors(504, &["music_platform_timeout"])
)];

/// Whether two e-mail addresses are the same, ignoring case and surrounding spaces.
pub fn emails_match(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// Whether the request can be refused before asking the platform: the client's own hint
/// says the e-mails differ and it sent no password.
pub fn hint_requires_password(req: &LinkExisting, user_email: &str) -> bool {
    req.password.is_none()
        && req
            .music_user_email
            .as_deref()
            .is_some_and(|hint| !emails_match(hint, user_email))
}

fn password_required() -> ApiError {
    ApiError::invalid_fields(vec![FieldError {
        field: "password".into(),
        message: "is required when the music account's e-mail differs from yours".into(),
    }])
}

fn password_rejected() -> ApiError {
    ApiError::unauthorized(
        "music_password_invalid",
        "the music platform did not accept the password for this account",
    )
}

/// 200 with the link record.
fn link_existing(ctx: &UserCtx, req: LinkExisting) -> Result<Json<LinkRecord>, ApiError> {
    let (tenant, user) = (&ctx.tenant, &ctx.user);
    if hint_requires_password(&req, &user.email) {
        return Err(password_required());
    }
    let limits = ctx.db()?;
    let bucket = PASSWORD_FAILURES.bucket_of(&format!("{}:{}", tenant.client_id, user.id));
    let now = ctx.now();
    rate_limits::check(
        &limits,
        &bucket,
        PASSWORD_FAILURES.max,
        PASSWORD_FAILURES.window_secs,
        now,
    )?;

    let music = MusicPlatform::from_config()?;
    let bearer = links::credential(ctx)?;
    let answer = music.call(
        "GET",
        &platform::user_path(&req.music_user_id),
        Some(&bearer),
        None,
    )?;
    if answer.status == 404 {
        return Err(ApiError::not_found("music user"));
    }
    if !platform::is_success(answer.status) {
        return Err(platform::unexpected(answer.status, "the account look-up"));
    }
    let account = serde_json::from_slice(&answer.body)
        .ok()
        .and_then(|v| platform::parse_account(&v))
        .filter(|a| a.id == req.music_user_id)
        .ok_or_else(|| platform::unreadable("the account look-up"))?;

    if emails_match(&account.email, &user.email) {
        let link = links::attach(&ctx.db()?, ctx, &account.id, None)?;
        return Ok(Json(LinkRecord::new(link, user)));
    }
    let password = req.password.as_deref().ok_or_else(password_required)?;
    // Every password tried counts before it is checked, so concurrent guesses cannot all
    // slip under the limit; a success forgets them.
    rate_limits::attempt(
        &limits,
        &bucket,
        PASSWORD_FAILURES.max,
        PASSWORD_FAILURES.window_secs,
        now,
    )?;
    let key = links::token_key()?;
    let answer = music.send(
        "POST",
        &platform::gettoken_path(&account.email, password),
        Vec::new(),
        &[],
    )?;
    if answer.status >= 500 {
        return Err(platform::unexpected(answer.status, "the password check"));
    }
    let token = Some(answer.status)
        .filter(|s| platform::is_success(*s))
        .and_then(|_| platform::parse_token(&answer.body));
    let Some(token) = token else {
        return Err(password_rejected());
    };
    rate_limits::clear(&limits, &bucket)?;
    let sealed = key.seal(&token, &sealed::row_context(&tenant.client_id, &user.id))?;
    let link = links::attach(&ctx.db()?, ctx, &account.id, Some(&sealed))?;
    Ok(Json(LinkRecord::new(link, user)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::validate::body::RequestBody;

    /// Reads and validates a request body as the route does (422 naming every bad field).
    fn parse(body: &str) -> Result<LinkExisting, ApiError> {
        let mut body = JsonBody::parse(body.as_bytes()).unwrap();
        let req = LinkExisting::read(&mut body);
        body.finish()?;
        Ok(req)
    }

    #[test]
    fn body_rules() {
        assert_eq!(
            parse(r#"{"musicUserId": " m1 ", "password": "p w"}"#).unwrap(),
            LinkExisting {
                music_user_id: "m1".into(),
                music_user_email: None,
                password: Some("p w".into()),
            }
        );
        assert_eq!(
            parse(r#"{"musicUserId": "m1", "password": ""}"#)
                .unwrap()
                .password,
            None
        );
        let err = parse(r#"{"musicUserEmail": "nope", "extra": 1}"#).unwrap_err();
        assert_eq!(err.status, 422);
        let fields: Vec<_> = err.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["musicUserId", "musicUserEmail", "extra"]);
    }

    #[test]
    fn emails_compare_ignoring_case() {
        assert!(emails_match("Ada@Example.COM", "ada@example.com"));
        assert!(emails_match(" ada@example.com", "ada@example.com "));
        assert!(emails_match("ÉLISE@example.com", "élise@example.com"));
        assert!(!emails_match("ada@example.com", "ada@example.org"));
    }

    #[test]
    fn a_differing_hint_without_password_is_refused_early() {
        let req = |email: Option<&str>, password: Option<&str>| LinkExisting {
            music_user_id: "m1".into(),
            music_user_email: email.map(Into::into),
            password: password.map(Into::into),
        };
        assert!(hint_requires_password(
            &req(Some("zoe@x.io"), None),
            "ada@x.io"
        ));
        assert!(!hint_requires_password(
            &req(Some("ADA@x.io"), None),
            "ada@x.io"
        ));
        assert!(!hint_requires_password(
            &req(Some("zoe@x.io"), Some("pw")),
            "ada@x.io"
        ));
        assert!(!hint_requires_password(&req(None, None), "ada@x.io"));
    }
}
