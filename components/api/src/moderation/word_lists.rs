//! Blocked words: the creator's list for their chats and the tenant's for every chat.

use common::ApiError;
use common::domain::moderation::{BlockedAction, Scope};
use common::domain::word_filter::{self};
use common::spin::http::{Call, ServerCtx, UserCtx, json};
use common::store::moderation::{self as store, NewLogEntry, WordList};
use serde_json::{Value, json};
use spin_sdk::http::Response;

fn word_list_view(list: Option<WordList>) -> Value {
    let list = list.unwrap_or_default();
    json!({"words": list.words, "action": list.action.as_str()})
}

fn read_word_list(call: &Call) -> Result<WordList, ApiError> {
    let mut body = call.json()?;
    let words: Option<Vec<String>> = match body.opt_value("words") {
        Some(Value::Array(items)) => {
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect();
            if strings.is_none() {
                body.error("words", "must be an array of strings");
            }
            strings
        }
        Some(_) => {
            body.error("words", "must be an array of strings");
            None
        }
        None => {
            body.error("words", "is required");
            None
        }
    };
    let action = match body.opt_string("action", 16) {
        None => BlockedAction::Reject,
        Some(a) => BlockedAction::parse(&a).unwrap_or_else(|| {
            body.error("action", "must be reject or hold");
            BlockedAction::Reject
        }),
    };
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
    Ok(json(200, &word_list_view(list)))
}

/// `PUT /api/users/me/chat/blocked-words` `{words, action}`
pub fn put_blocked_words(ctx: &UserCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = read_word_list(ctx)?;
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
    Ok(json(200, &word_list_view(Some(list))))
}

/// `GET /api/v1/chat/blocked-words`: the tenant's default list (every creator's chat).
pub fn get_tenant_blocked_words(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = store::word_list(&db, &ctx.tenant.client_id, store::TENANT_LIST)?;
    Ok(json(200, &word_list_view(list)))
}

/// `PUT /api/v1/chat/blocked-words` `{words, action}`
pub fn put_tenant_blocked_words(ctx: &ServerCtx) -> Result<Response, ApiError> {
    let db = ctx.db()?;
    let list = read_word_list(ctx)?;
    store::save_word_list(
        &db,
        &ctx.tenant.client_id,
        store::TENANT_LIST,
        &list,
        ctx.now_millis(),
    )?;
    Ok(json(200, &word_list_view(Some(list))))
}

/// What these routes take and answer, for the API document.
pub(crate) fn operations() -> Vec<common::contract::Operation> {
    use common::contract::{Operation, Schema};
    use serde_json::json;
    vec![
        Operation::new("GET /api/users/me/chat/blocked-words", "Get blocked words (moderation)")
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/BlockedWords",
            }))),
        Operation::new("PUT /api/users/me/chat/blocked-words", "Put blocked words (moderation)")
            .takes(Schema::written(json!({
                "type": "object",
                "properties": {
                    "words": {
                        "type": "array",
                        "maxItems": 500,
                        "items": { "type": "string", "maxLength": 64 },
                        "description": "At most 500 words or patterns of at most 64 characters (trimmed, duplicates dropped); each must hold a letter or digit (look-alike symbols such as @ or $ count); a leading or trailing * matches any prefix or suffix",
                    },
                    "action": {
                        "type": ["string", "null"],
                        "pattern": "^\\s*(reject|hold)?\\s*$",
                        "description": "reject (the default) or hold for review",
                    },
                },
                "required": ["words"],
                "additionalProperties": false,
            })))
            .request_example(json!({
                "words": ["spoiler", "sp*m"],
                "action": "hold",
            }))
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/BlockedWords",
            }))),
        Operation::new("GET /api/v1/chat/blocked-words", "Get tenant blocked words (moderation)")
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/BlockedWords",
            }))),
        Operation::new("PUT /api/v1/chat/blocked-words", "Put tenant blocked words (moderation)")
            .takes(Schema::written(json!({
                "type": "object",
                "properties": {
                    "words": {
                        "type": "array",
                        "maxItems": 500,
                        "items": { "type": "string", "maxLength": 64 },
                        "description": "At most 500 words or patterns of at most 64 characters (trimmed, duplicates dropped); each must hold a letter or digit (look-alike symbols such as @ or $ count); a leading or trailing * matches any prefix or suffix",
                    },
                    "action": {
                        "type": ["string", "null"],
                        "pattern": "^\\s*(reject|hold)?\\s*$",
                        "description": "reject (the default) or hold for review",
                    },
                },
                "required": ["words"],
                "additionalProperties": false,
            })))
            .request_example(json!({ "words": ["spoiler"], "action": "reject" }))
            .answers(200, "OK", Schema::written(json!({
                "$ref": "#/components/schemas/BlockedWords",
            }))),
    ]
}
