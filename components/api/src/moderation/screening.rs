//! The checks every chat post passes, in one place: the poster's restriction, the chat's
//! modes and blocked words, and slow mode; and what moderation does to a stored message
//! (held for review, deleted by a moderator).

use super::log_action;
use crate::chat_target::{self, ChatTarget};
use crate::realtime;
use ::store::Db;
use ::store::chat::{self as chat_store, Message};
use ::store::moderation::{self as store, NewReport};
use domain::moderation::{self as rules, BlockedAction, Modes, Poster, Refusal};
use domain::word_filter::{self, Blocklist};
use domain::{ApiError, time};
use edge::realtime::{Event, ModerationAction};
use edge::spin::http::Call;
use serde_json::json;

/// What the checks decided about a message that may be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screened {
    Show,
    /// A blocked word matched and the creator holds such messages for review.
    Hold,
}

/// The checks' decision, and the slow mode the post must still claim a slot in (inside
/// its transaction, [`claim_slow_mode_slot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screening {
    pub screened: Screened,
    pub slow_mode_seconds: Option<i64>,
    /// Whether the poster holds an active subscription to the chat's creator (read with
    /// the checks; a broadcast's chat shows it as the message's badge).
    pub subscribes: bool,
}

/// The checks of one chat post, in order: the poster's restriction (ban, timeout), then,
/// for everyone but moderators, the modes and blocked words; slow mode is claimed when the
/// post is stored. What they read is read in one statement
/// ([`store::post_screening`]). Answers the refusal as the API sends it.
pub fn screen(
    db: &Db,
    target: &ChatTarget,
    user_id: &str,
    message: &str,
    now_ms: i64,
) -> Result<Screening, ApiError> {
    let owner = target.owner_id.as_deref();
    let stored = store::post_screening(
        db,
        &target.client_id,
        &target.stream_id,
        target.broadcast.as_ref().map(|b| b.id.as_str()),
        owner,
        user_id,
        now_ms,
    )?;
    let restriction = rules::binding(&stored.restrictions, now_ms);
    let is_moderator = restriction.is_none()
        && chat_target::moderates(
            target,
            user_id,
            stored.cohost.as_ref().map(|(s, p)| (s.as_str(), p)),
        );
    // A moderator is held to no mode.
    let modes = if is_moderator {
        Modes::default()
    } else {
        stored.modes
    };
    let poster = Poster {
        is_moderator,
        following_since_ms: match (owner, modes.followers_only_minutes, is_moderator) {
            (Some(_), Some(_), false) => stored.following_since_ms,
            _ => None,
        },
        is_subscriber: match (owner, modes.subscribers_only, is_moderator) {
            (Some(_), true, false) => stored.subscribes,
            _ => false,
        },
    };
    let subscribes = owner.is_some() && stored.subscribes;
    rules::check_post(restriction, &modes, &poster, message, now_ms)
        .map_err(|why| refusal(why, now_ms))?;
    if is_moderator {
        return Ok(Screening {
            screened: Screened::Show,
            slow_mode_seconds: None,
            subscribes,
        });
    }
    let mut screened = Screened::Show;
    let (creator_list, tenant_list) = stored.word_lists;
    let action = creator_list
        .as_ref()
        .or(tenant_list.as_ref())
        .map(|l| l.action)
        .unwrap_or_default();
    let blocklists = creator_list
        .iter()
        .chain(tenant_list.iter())
        .map(|l| Blocklist::parse(&l.compiled))
        .collect::<Option<Vec<_>>>()
        // Only `word_filter::compile` writes the stored form: failing closed beats
        // letting every word through.
        .ok_or_else(|| ApiError::internal("a stored blocked-word list is unreadable"))?;
    if word_filter::is_blocked(message, &blocklists) {
        match action {
            BlockedAction::Reject => {
                return Err(ApiError::new(
                    422,
                    "blocked_word",
                    "the message contains a word this chat does not allow",
                ));
            }
            BlockedAction::Hold => screened = Screened::Hold,
        }
    }
    Ok(Screening {
        screened,
        slow_mode_seconds: rules::slow_mode_for(&modes, &poster),
        subscribes,
    })
}

/// Claims the poster's slot in a slow-mode chat, inside the post's transaction, or answers
/// 429 `slow_mode` with `Retry-After`.
pub fn claim_slow_mode_slot(
    db: &Db,
    target: &ChatTarget,
    user_id: &str,
    screening: Screening,
    now_ms: i64,
) -> Result<(), ApiError> {
    let Some(seconds) = screening.slow_mode_seconds else {
        return Ok(());
    };
    let wait_ms = store::claim_slow_mode_slot(
        db,
        &target.client_id,
        &target.stream_id,
        user_id,
        seconds,
        now_ms,
    )?;
    match wait_ms {
        None => Ok(()),
        Some(wait_ms) => Err(ApiError::new(
            429,
            "slow_mode",
            format!("slow mode: one message per {seconds} seconds"),
        )
        .with_extra("slowModeSeconds", seconds)
        .with_header("retry-after", (wait_ms + 999).div_euclid(1000).to_string())),
    }
}

/// Every refusal the checks of a post can answer, by status, as the API documents them
/// (see [`refusal`], [`screen`] and [`claim_slow_mode_slot`]).
const POST_REFUSALS: [(u16, &[&str]); 3] = [
    (
        403,
        &[
            "banned",
            "timed_out",
            "followers_only",
            "subscribers_only",
            "reactions_only",
        ],
    ),
    (422, &["blocked_word"]),
    (429, &["slow_mode"]),
];

/// Declares [`POST_REFUSALS`] on a posting operation.
pub fn document_post_refusals(op: edge::contract::Operation) -> edge::contract::Operation {
    POST_REFUSALS
        .iter()
        .fold(op, |op, &(status, codes)| op.errors(status, codes))
}

/// The API's answer to a refused post at `now_ms`.
fn refusal(why: Refusal, now_ms: i64) -> ApiError {
    match why {
        Refusal::Banned(scope) => ApiError::new(403, "banned", "you are banned from this chat")
            .with_extra("scope", scope.as_str()),
        Refusal::TimedOut { until_ms } => {
            let wait_secs = (until_ms - now_ms + 999).div_euclid(1000).max(1);
            ApiError::new(403, "timed_out", "you are timed out in this chat")
                .with_extra("until", time::format_rfc3339_millis(until_ms))
                .with_header("retry-after", wait_secs.to_string())
        }
        Refusal::FollowersOnly { minutes } => ApiError::new(
            403,
            "followers_only",
            format!("this chat is for followers (of at least {minutes} minutes)"),
        )
        .with_extra("followersOnlyMinutes", minutes),
        Refusal::SubscribersOnly => {
            ApiError::new(403, "subscribers_only", "this chat is for subscribers")
        }
        Refusal::ReactionsOnly => ApiError::new(
            403,
            "reactions_only",
            "this chat takes only emoji and :reaction: codes now",
        ),
    }
}

/// A banned user reads no more of the chat (a timed-out one still does).
pub fn check_not_banned(
    db: &Db,
    target: &ChatTarget,
    user_id: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    let restrictions = store::restrictions_of(
        db,
        &target.client_id,
        &target.stream_id,
        target.owner_id.as_deref(),
        user_id,
        now_ms,
    )?;
    match rules::binding(&restrictions, now_ms) {
        Some(r) if r.is_ban() => Err(refusal(Refusal::Banned(r.scope), now_ms)),
        _ => Ok(()),
    }
}

/// Files a held message in the review queue (inside the post's transaction).
pub fn hold(db: &Db, target: &ChatTarget, message: &Message, now_ms: i64) -> Result<(), ApiError> {
    store::add_report(
        db,
        &NewReport {
            client_id: &target.client_id,
            stream_id: &target.stream_id,
            message_id: &message.id,
            reporter_id: None,
            reason: "blocked_word",
        },
        now_ms,
    )?;
    Ok(())
}

/// A moderator deletes another user's message: deleted and logged together.
pub fn delete_as_moderator(
    call: &Call,
    db: &Db,
    target: &ChatTarget,
    message_id: &str,
    sender: &str,
    actor: &str,
    deleted_event: &dyn Fn(&Db) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    db.transaction(|tx| {
        let posted_ms = chat_store::delete(tx, &target.client_id, message_id, actor, call.now())?;
        if let (Some(b), Some(ms)) = (&target.broadcast, posted_ms) {
            ::store::analytics::chat_message_deleted(tx, b, ms.div_euclid(1000))?;
        }
        deleted_event(tx)?;
        log_action(
            tx,
            target,
            actor,
            ModerationAction::MessageDeleted.as_str(),
            Some(sender),
            Some(message_id),
            "",
            json!({}),
            call.now_millis(),
        )
    })?;
    let mut event = Event::moderation(ModerationAction::MessageDeleted);
    if let Event::Moderation {
        user_id,
        message_id: id,
        ..
    } = &mut event
    {
        *user_id = Some(sender.to_string());
        *id = Some(message_id.to_string());
    }
    realtime::publish(&target.stream_id, event);
    Ok(())
}
