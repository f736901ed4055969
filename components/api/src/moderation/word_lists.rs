//! Blocked words: the creator's list for their chats and the tenant's for every chat.

use ::store::moderation::{self as store, NewLogEntry, WordList};
use domain::ApiError;
use domain::moderation::{BlockedAction, Scope};
use domain::request_body;
use domain::validate::JsonBody;
use domain::validate::body::{Choices, FieldKind, OptChoice, RequestBody};
use domain::word_filter::{self};
use edge::spin::http::{ServerCtx, UserCtx, json};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use spin_sdk::http::Response;

/// A blocked-word list and what is done with a message that matches it.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "BlockedWords")]
pub struct BlockedWordsView {
    words: Vec<String>,
    #[schemars(extend("enum" = ["reject", "hold"]))]
    action: &'static str,
}

impl BlockedWordsView {
    /// The list, or the empty one that rejects when none was saved.
    fn of(list: Option<WordList>) -> Self {
        let list = list.unwrap_or_default();
        BlockedWordsView {
            words: list.words,
            action: list.action.as_str(),
        }
    }
}

/// Blocked words or patterns as a list is saved with: an array of strings, required. The
/// handler cleans them ([`word_filter::clean_patterns`]) once every field is read.
pub struct Patterns;

impl FieldKind for Patterns {
    /// None when missing or bad (the body then has an error).
    type Value = Option<Vec<String>>;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> Option<Vec<String>> {
        let strings = match body.opt_value(name) {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(_) => None,
            None => {
                body.error(name, "is required");
                return None;
            }
        };
        if strings.is_none() {
            body.error(name, "must be an array of strings");
        }
        strings
    }

    fn schema() -> Value {
        json!({
            "type": "array",
            "maxItems": word_filter::MAX_PATTERNS,
            "items": { "type": "string", "maxLength": word_filter::MAX_PATTERN_CHARS },
            "description": "At most 500 words or patterns of at most 64 characters (trimmed, \
                duplicates dropped); each must hold a letter or digit (look-alike symbols such \
                as @ or $ count); a leading or trailing * matches any prefix or suffix",
        })
    }
}

/// The actions on a blocked word, by name.
pub struct Actions;

impl Choices for Actions {
    type Value = BlockedAction;
    const MAX_LEN: usize = 16;

    fn names() -> Vec<&'static str> {
        vec!["reject", "hold"]
    }

    fn choose(name: &str) -> Option<BlockedAction> {
        BlockedAction::parse(name)
    }
}

/// What to do with a message that matches: `reject` (when left out or blank) or `hold`.
pub struct OptAction;

impl FieldKind for OptAction {
    type Value = BlockedAction;

    fn read(body: &mut JsonBody, name: &'static str) -> BlockedAction {
        OptChoice::<Actions>::read(body, name).unwrap_or_default()
    }

    fn schema() -> Value {
        json!({
            "type": ["string", "null"],
            "pattern": "^\\s*(reject|hold)?\\s*$",
            "description": "reject (the default) or hold for review",
        })
    }
}

request_body! {
    /// A blocked-word list, as a whole.
    pub struct WordListBody as "BlockedWordsChange" {
        "words" words: Patterns,
        "action" action: OptAction,
    }
}

/// The list a body sends, its words cleaned.
fn read_word_list(mut body: JsonBody) -> Result<WordList, ApiError> {
    let WordListBody { words, action } = WordListBody::read(&mut body);
    let words = match words.map(|w| word_filter::clean_patterns(&w)) {
        Some(Ok(w)) => w,
        Some(Err(why)) => {
            body.error("words", why);
            Vec::new()
        }
        None => Vec::new(),
    };
    body.finish()?;
    Ok(WordList { words, action })
}

/// `GET /api/users/me/chat/blocked-words`
pub fn get_blocked_words(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = store::word_list(&db, &ctx.tenant.client_id, &ctx.user.id)?;
    Ok(json(200, &BlockedWordsView::of(list)))
}

/// `PUT /api/users/me/chat/blocked-words` `{words, action}`
pub fn put_blocked_words(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = read_word_list(ctx.json()?)?;
    let me = &ctx.user.id;
    db.transaction(|tx| {
        store::save_word_list(tx, &ctx.tenant.client_id, me, &list, ctx.now_millis())?;
        store::log(
            tx,
            &NewLogEntry {
                client_id: &ctx.tenant.client_id,
                scope: Scope::Channel,
                scope_id: me,
                actor: me,
                action: "blocked_words_changed",
                target_user_id: None,
                message_id: None,
                reason: "",
                detail: json!({"count": list.words.len(), "action": list.action.as_str()}),
            },
            ctx.now_millis(),
        )
    })?;
    Ok(json(200, &BlockedWordsView::of(Some(list))))
}

/// `GET /api/v1/chat/blocked-words`: the tenant's default list (every creator's chat).
pub fn get_tenant_blocked_words(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = store::word_list(&db, &ctx.tenant.client_id, store::TENANT_LIST)?;
    Ok(json(200, &BlockedWordsView::of(list)))
}

/// `PUT /api/v1/chat/blocked-words` `{words, action}`
pub fn put_tenant_blocked_words(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = read_word_list(ctx.json()?)?;
    store::save_word_list(
        &db,
        &ctx.tenant.client_id,
        store::TENANT_LIST,
        &list,
        ctx.now_millis(),
    )?;
    Ok(json(200, &BlockedWordsView::of(Some(list))))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<edge::contract::Operation> {
    use edge::contract::{Operation, Schema};
    vec![
        Operation::new(
            "GET /api/users/me/chat/blocked-words",
            "Get blocked words (moderation)",
        )
        .answers(200, "OK", Schema::view::<BlockedWordsView>()),
        Operation::new(
            "PUT /api/users/me/chat/blocked-words",
            "Put blocked words (moderation)",
        )
        .takes(Schema::body::<WordListBody>())
        .request_example(json!({ "words": ["spoiler", "sp*m"], "action": "hold" }))
        .answers(200, "OK", Schema::view::<BlockedWordsView>()),
        Operation::new(
            "GET /api/v1/chat/blocked-words",
            "Get tenant blocked words (moderation)",
        )
        .answers(200, "OK", Schema::view::<BlockedWordsView>()),
        Operation::new(
            "PUT /api/v1/chat/blocked-words",
            "Put tenant blocked words (moderation)",
        )
        .takes(Schema::body::<WordListBody>())
        .request_example(json!({ "words": ["spoiler"], "action": "reject" }))
        .answers(200, "OK", Schema::view::<BlockedWordsView>()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<WordList, Vec<(String, String)>> {
        let body = JsonBody::parse(json.as_bytes()).unwrap();
        read_word_list(body)
            .map_err(|e| e.fields.into_iter().map(|f| (f.field, f.message)).collect())
    }

    #[test]
    fn a_list_is_cleaned_after_every_field_is_read() {
        let list = read(r#"{"words": [" Spoiler ", "spoiler"], "action": " hold "}"#).unwrap();
        assert_eq!(list.action, BlockedAction::Hold);
        assert_eq!(
            read(r#"{"words": []}"#).unwrap().action,
            BlockedAction::Reject
        );
        let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(f, m)| (f.to_string(), m.to_string()))
                .collect()
        };
        assert_eq!(
            read(r#"{"words": "spoiler", "action": "mute"}"#).unwrap_err(),
            owned(&[
                ("words", "must be an array of strings"),
                ("action", "must be reject or hold"),
            ])
        );
        let too_many = serde_json::to_string(&vec!["w"; word_filter::MAX_PATTERNS + 1]).unwrap();
        assert_eq!(
            read(&format!(r#"{{"words": {too_many}, "action": "mute"}}"#)).unwrap_err(),
            owned(&[
                ("action", "must be reject or hold"),
                ("words", "at most 500 words"),
            ])
        );
        assert_eq!(read("{}").unwrap_err(), owned(&[("words", "is required")]));
    }
}
