//! `GET /api/users/music/search?q=`: accounts on the music platform whose e-mail or
//! nickname matches `q`.

use crate::links;
use crate::platform::{self, MusicAccount, MusicPlatform};
use domain::ApiError;
use domain::problem::FieldError;
use edge::endpoint;
use edge::routing::Route;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{Handler, UserCtx};

/// The search route.
pub const ROUTES: &[Route<Handler>] = &[endpoint!(
    GET "/api/users/music/search",
    User(search),
    "Search (search)",
    |op| op
        .errors(400, &["invalid_query"])
        .errors(422, &["validation_failed"])
        .errors(502, platform::FAILURES)
        .errors(504, &["music_platform_timeout"])
)];

pub const MIN_QUERY_CHARS: usize = 2;
pub const MAX_QUERY_CHARS: usize = 100;

/// The search text: required, trimmed, 2 to 100 characters; otherwise a 400 naming `q`.
pub fn search_text(q: Option<&str>) -> Result<String, ApiError> {
    let q = q.map(str::trim).unwrap_or_default();
    let chars = q.chars().count();
    let problem = if chars == 0 {
        "is required"
    } else if !(MIN_QUERY_CHARS..=MAX_QUERY_CHARS).contains(&chars) {
        "must be 2 to 100 characters"
    } else if q.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(q.to_string());
    };
    Err(ApiError {
        fields: vec![FieldError {
            field: "q".into(),
            message: problem.into(),
        }],
        ..ApiError::bad_request("invalid_query", format!("q {problem}"))
    })
}

/// `?q=`: 200 with an array of search results.
fn search(ctx: &UserCtx, _: NoBody) -> Result<Json<Vec<MusicAccount>>, ApiError> {
    let q = search_text(ctx.query_value("q").as_deref())?;
    let music = MusicPlatform::from_config()?;
    let bearer = links::credential(ctx)?;
    let answer = music.call("GET", &platform::search_path(&q), Some(&bearer), None)?;
    if !platform::is_success(answer.status) {
        return Err(platform::unexpected(answer.status, "search"));
    }
    let results =
        platform::parse_search(&answer.body).ok_or_else(|| platform::unreadable("search"))?;
    Ok(Json(results))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_is_required_and_two_to_a_hundred_characters() {
        for bad in [None, Some(""), Some("   "), Some("a"), Some(" é ")] {
            let err = search_text(bad).unwrap_err();
            assert_eq!(err.status, 400, "{bad:?}");
            assert_eq!(err.fields[0].field, "q");
        }
        assert_eq!(search_text(Some(" ab ")).unwrap(), "ab");
        assert_eq!(search_text(Some("éé")).unwrap(), "éé");
        let hundred = "x".repeat(100);
        assert_eq!(search_text(Some(&hundred)).unwrap(), hundred);
        assert!(search_text(Some(&"x".repeat(101))).is_err());
        assert!(search_text(Some("a\u{0}b")).is_err());
    }
}
