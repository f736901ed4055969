//! Blocked words: the creator's list for their chats and the tenant's for every chat.

use crate::ApiRoute;
use ::store::moderation::{self as store, NewLogEntry, WordList};
use domain::ApiError;
use domain::moderation::{BlockedAction, Scope};
use domain::request_body;
use domain::validate::JsonBody;
use domain::validate::body::{Choices, FieldKind, OptChoice};
use domain::word_filter::{self};
use edge::endpoint;
use edge::spin::endpoint::{Json, NoBody};
use edge::spin::http::{ServerCtx, UserCtx};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

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
            "description": "At most 500 words or patterns of at most 64 characters as sent \
                (then trimmed, duplicates dropped); each must hold a letter or digit \
                (look-alike symbols such as @ or $ count); a leading or trailing * matches \
                any prefix or suffix",
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
    pub struct WordListBody as "BlockedWordsChange" checked by WordListBody::check {
        "words" words: Patterns,
        "action" action: OptAction,
    }
}

impl WordListBody {
    /// The words must clean ([`word_filter::clean_patterns`]) once every field is read.
    fn check(&self, body: &mut JsonBody) {
        if let Some(Err(why)) = self.words.as_deref().map(word_filter::clean_patterns) {
            body.error("words", why);
        }
    }

    /// The list the body sends, its words cleaned (they were checked).
    fn into_list(self) -> WordList {
        let words = self
            .words
            .and_then(|w| word_filter::clean_patterns(&w).ok())
            .unwrap_or_default();
        WordList {
            words,
            action: self.action,
        }
    }
}

/// The blocked-word routes: the creator's list and the tenant's.
pub const ROUTES: &[ApiRoute] = &[
    endpoint!(
        GET "/api/users/me/chat/blocked-words",
        User(get_blocked_words),
        "Get blocked words (moderation)",
    ),
    endpoint!(
        PUT "/api/users/me/chat/blocked-words",
        User(put_blocked_words),
        "Put blocked words (moderation)",
        |op| op.request_example(json!({ "words": ["spoiler", "sp*m"], "action": "hold" })),
    ),
    endpoint!(
        GET "/api/v1/chat/blocked-words",
        Server(get_tenant_blocked_words),
        "Get tenant blocked words (moderation)",
    ),
    endpoint!(
        PUT "/api/v1/chat/blocked-words",
        Server(put_tenant_blocked_words),
        "Put tenant blocked words (moderation)",
        |op| op.request_example(json!({ "words": ["spoiler"], "action": "reject" })),
    ),
];

/// The creator's list for their chats.
fn get_blocked_words(ctx: &UserCtx, _: NoBody) -> Result<Json<BlockedWordsView>, ApiError> {
    let db = ctx.db()?;
    let list = store::word_list(&db, &ctx.tenant.client_id, &ctx.user.id)?;
    Ok(Json(BlockedWordsView::of(list)))
}

/// `{words, action}`: the creator's list, as a whole.
fn put_blocked_words(
    ctx: &UserCtx,
    sent: WordListBody,
) -> Result<Json<BlockedWordsView>, ApiError> {
    let db = ctx.db()?;
    let list = sent.into_list();
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
    Ok(Json(BlockedWordsView::of(Some(list))))
}

/// The tenant's default list (every creator's chat).
fn get_tenant_blocked_words(
    ctx: &ServerCtx,
    _: NoBody,
) -> Result<Json<BlockedWordsView>, ApiError> {
    let db = ctx.db()?;
    let list = store::word_list(&db, &ctx.tenant.client_id, store::TENANT_LIST)?;
    Ok(Json(BlockedWordsView::of(list)))
}

/// `{words, action}`: the tenant's list, as a whole.
fn put_tenant_blocked_words(
    ctx: &ServerCtx,
    sent: WordListBody,
) -> Result<Json<BlockedWordsView>, ApiError> {
    let db = ctx.db()?;
    let list = sent.into_list();
    store::save_word_list(
        &db,
        &ctx.tenant.client_id,
        store::TENANT_LIST,
        &list,
        ctx.now_millis(),
    )?;
    Ok(Json(BlockedWordsView::of(Some(list))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::validate::body::RequestBody;

    /// The list as the dispatcher reads it: the fields, the check, then `finish`.
    fn read(json: &str) -> Result<WordList, Vec<(String, String)>> {
        let mut body = JsonBody::parse(json.as_bytes()).unwrap();
        let sent = WordListBody::read(&mut body);
        sent.check(&mut body);
        body.finish()
            .map(|()| sent.into_list())
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
