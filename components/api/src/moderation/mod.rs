//! Chat moderation: the checks every chat post passes (`screen`), and the moderators'
//! routes: timeouts, bans, modes, clearing, pins, reports, the log, blocked words.
//!
//! Moderators of a stream's chat are its creator, co-hosts with canModerateChat, and the
//! tenant's server; channel-wide forms (`/api/users/me/chat/...`) are the creator's own.
//! Every action is logged and pushed live as a `moderation` event after it commits.
//!
//! | module | what |
//! |---|---|
//! | `screening` | the checks of every chat post, and what moderation does to a stored message |
//! | `restrictions` | timeouts and bans, on a stream's chat and channel-wide |
//! | `modes` | the chat's modes, clearing it, the pinned message |
//! | `reports` | viewers' reports, their resolution, the moderation log |
//! | `word_lists` | the creator's and the tenant's blocked words |

mod modes;
mod reports;
mod restrictions;
mod screening;
mod word_lists;

pub use screening::{
    Screened, check_not_banned, claim_slow_mode_slot, delete_as_moderator, document_post_refusals,
    hold, screen,
};

use crate::ApiRoute;
use crate::access::Viewer;
use crate::chat_target::{self, ChatTarget};
use crate::realtime;
use ::store::moderation::{self as store, NewLogEntry};
use ::store::{Db, broadcasts as broadcast_store};
use domain::moderation::Scope;
use domain::validate::JsonBody;
use domain::validate::body::FieldKind;
use domain::{ApiError, ids};
use edge::realtime::Event;
use edge::spin::http::ActorCtx;
use serde_json::{Value, json};
use std::sync::LazyLock;

/// The moderation routes, each declared beside its handler in its module.
pub static ROUTES: LazyLock<Vec<ApiRoute>> = LazyLock::new(|| {
    [
        restrictions::ROUTES,
        modes::ROUTES,
        reports::ROUTES,
        word_lists::ROUTES,
    ]
    .concat()
});

/// How many open streams of a creator a channel-wide action is pushed to.
const CHANNEL_PUSH_LIMIT: i64 = 20;

// ---- Who acts ----

/// The moderator acting: a user id, or `server`.
struct Moderator {
    actor: String,
    /// The creator or the server (channel-wide actions are theirs alone).
    is_creator: bool,
}

/// The chat of the path's stream, if the caller moderates it (403 otherwise; 404 when the
/// caller may not even see it).
fn moderated(ctx: &ActorCtx, db: &Db) -> Result<(ChatTarget, Moderator), ApiError> {
    let target = chat_target::stream_target(ctx, &ctx.tenant, Viewer::of_actor(&ctx.actor), db)?;
    let moderator = match ctx.user() {
        None => Moderator {
            actor: "server".into(),
            is_creator: true,
        },
        Some(user) if chat_target::is_moderator(db, &target, &user.id)? => Moderator {
            actor: user.id.clone(),
            is_creator: target.owner_id.as_deref() == Some(user.id.as_str()),
        },
        Some(_) => {
            return Err(ApiError::new(
                403,
                "not_a_moderator",
                "only the creator, a co-host with canModerateChat or the tenant's server moderates this chat",
            ));
        }
    };
    Ok((target, moderator))
}

#[allow(clippy::too_many_arguments)]
fn log_action(
    db: &Db,
    target: &ChatTarget,
    actor: &str,
    action: &str,
    target_user: Option<&str>,
    message_id: Option<&str>,
    reason: &str,
    detail: Value,
    now_ms: i64,
) -> Result<(), ApiError> {
    store::log(
        db,
        &NewLogEntry {
            client_id: &target.client_id,
            scope: Scope::Stream,
            scope_id: &target.stream_id,
            actor,
            action,
            target_user_id: target_user,
            message_id,
            reason,
            detail,
        },
        now_ms,
    )
}

/// The user a moderator acts on: a user id (a UUID).
pub struct UserId;

impl FieldKind for UserId {
    /// Empty when missing or bad (the body then has an error).
    type Value = String;
    const REQUIRED: bool = true;

    fn read(body: &mut JsonBody, name: &'static str) -> String {
        let raw = body.string(name, 64);
        match ids::parse_uuid(&raw) {
            Some(id) => id,
            None => {
                if !raw.is_empty() {
                    body.error(name, "must be a user id (a UUID)");
                }
                String::new()
            }
        }
    }

    fn schema() -> Value {
        json!({
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "pattern": "\\S",
            "description": "A user's id (a UUID).",
        })
    }
}

/// Where a restriction holds: `stream` (when left out or blank) or `channel`.
pub struct OptScope;

impl FieldKind for OptScope {
    type Value = Scope;

    fn read(body: &mut JsonBody, name: &'static str) -> Scope {
        match body.opt_string(name, 16) {
            None => Scope::Stream,
            Some(s) => Scope::parse(&s).unwrap_or_else(|| {
                body.error(name, "must be `stream` or `channel`");
                Scope::Stream
            }),
        }
    }

    fn schema() -> Value {
        json!({
            "type": ["string", "null"],
            "pattern": "^\\s*(stream|channel)?\\s*$",
            "description": "stream (the default) or channel: every stream of the creator",
        })
    }
}

/// Pushes a channel-wide event to every open stream of the creator.
fn publish_channel(db: &Db, client_id: &str, owner: &str, event: Event) -> Result<(), ApiError> {
    for stream in
        broadcast_store::open_stream_ids_of_owner(db, client_id, owner, CHANNEL_PUSH_LIMIT)?
    {
        realtime::publish(&stream, event.clone());
    }
    Ok(())
}
