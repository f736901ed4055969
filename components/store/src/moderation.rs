//! Chat moderation: restrictions (timeouts and bans, per stream or channel-wide), each
//! stream's modes and pinned message, blocked-word lists, reports (and held messages) and
//! the moderation log. The rules that read them are in `domain::moderation`.

use super::{Db, Row, Value};
use domain::ApiError;
use domain::cohost::Permissions;
use domain::moderation::{BlockedAction, MAX_SLOW_MODE_SECS, Modes, Restriction, Scope};
use domain::pagination::Page;
use domain::word_filter;
use domain::{ids, time};

/// The tenant-wide default word list is stored under this owner.
pub const TENANT_LIST: &str = "";
/// Stands for the creator of a stream without one (a server-made session): no channel
/// restriction is ever stored under it.
const NO_OWNER: &str = "";

// ---- Restrictions ----

/// The restrictions of `user_id` in force at `now_ms` on `stream_id`: its own and, when
/// the stream has a creator, the creator's channel-wide ones.
pub fn restrictions_of(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    owner_id: Option<&str>,
    user_id: &str,
    now_ms: i64,
) -> Result<Vec<Restriction>, ApiError> {
    let rows = db.query(
        "SELECT scope, until_ms FROM chat_restrictions WHERE client_id = ? AND user_id = ? \
         AND ((scope = 'stream' AND scope_id = ?) OR (scope = 'channel' AND scope_id = ?)) \
         AND (until_ms IS NULL OR until_ms > ?)",
        &[
            client_id.into(),
            user_id.into(),
            stream_id.into(),
            owner_id.unwrap_or(NO_OWNER).into(),
            Value::Int(now_ms),
        ],
    )?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            Some(Restriction {
                scope: Scope::parse(&row.text("scope"))?,
                until_ms: row.opt_int("until_ms"),
            })
        })
        .collect())
}

/// A new timeout (`until_ms`) or ban (None) of a user.
pub struct NewRestriction<'a> {
    pub client_id: &'a str,
    pub scope: Scope,
    /// The streamId, or the creator's user id for a channel-wide one.
    pub scope_id: &'a str,
    pub user_id: &'a str,
    pub until_ms: Option<i64>,
    pub reason: &'a str,
    pub by: &'a str,
}

/// Restricts a user; a timeout never shortens a ban already in place. Answers the
/// restriction now stored.
pub fn restrict(db: &Db, new: &NewRestriction<'_>, now_ms: i64) -> Result<Restriction, ApiError> {
    let kind = if new.until_ms.is_some() {
        "timeout"
    } else {
        "ban"
    };
    let rows = db.query(
        "INSERT INTO chat_restrictions (client_id, scope, scope_id, user_id, kind, until_ms, reason, created_by, created_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (client_id, scope, scope_id, user_id) DO UPDATE SET \
           until_ms = CASE WHEN chat_restrictions.kind = 'ban' THEN NULL ELSE excluded.until_ms END, \
           kind = CASE WHEN chat_restrictions.kind = 'ban' THEN 'ban' ELSE excluded.kind END, \
           reason = excluded.reason, created_by = excluded.created_by, created_ms = excluded.created_ms \
         RETURNING scope, until_ms",
        &[
            new.client_id.into(),
            new.scope.as_str().into(),
            new.scope_id.into(),
            new.user_id.into(),
            kind.into(),
            new.until_ms.into(),
            new.reason.into(),
            new.by.into(),
            Value::Int(now_ms),
        ],
    )?;
    rows.first()
        .map(|row| Restriction {
            scope: new.scope,
            until_ms: row.opt_int("until_ms"),
        })
        .ok_or_else(|| ApiError::internal("the restriction was not stored"))
}

/// Lifts a user's ban (and any timeout) in a scope; `false` when there was none.
pub fn lift(
    db: &Db,
    client_id: &str,
    scope: Scope,
    scope_id: &str,
    user_id: &str,
) -> Result<bool, ApiError> {
    let gone = db.query(
        "DELETE FROM chat_restrictions WHERE client_id = ? AND scope = ? AND scope_id = ? AND user_id = ? \
         RETURNING user_id",
        &[
            client_id.into(),
            scope.as_str().into(),
            scope_id.into(),
            user_id.into(),
        ],
    )?;
    Ok(!gone.is_empty())
}

// ---- Modes, pin ----

/// A stream's chat settings as stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub modes: Modes,
    pub pinned_message_id: Option<String>,
}

pub fn settings(db: &Db, client_id: &str, stream_id: &str) -> Result<Settings, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM chat_settings WHERE client_id = ? AND stream_id = ?",
            &[client_id.into(), stream_id.into()],
        )?
        .map(|row| Settings {
            modes: Modes {
                slow_mode_seconds: row.int("slow_mode_seconds"),
                followers_only_minutes: row.opt_int("followers_only_minutes"),
                subscribers_only: row.bool("subscribers_only"),
                reactions_only: row.bool("reactions_only"),
            },
            pinned_message_id: row.opt_text("pinned_message_id"),
        })
        .unwrap_or_default())
}

pub fn save_modes(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    modes: &Modes,
    now_ms: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO chat_settings (client_id, stream_id, slow_mode_seconds, followers_only_minutes, subscribers_only, reactions_only, updated_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client_id, stream_id) DO UPDATE SET \
           slow_mode_seconds = excluded.slow_mode_seconds, followers_only_minutes = excluded.followers_only_minutes, \
           subscribers_only = excluded.subscribers_only, reactions_only = excluded.reactions_only, updated_ms = excluded.updated_ms",
        &[
            client_id.into(),
            stream_id.into(),
            Value::Int(modes.slow_mode_seconds),
            modes.followers_only_minutes.into(),
            modes.subscribers_only.into(),
            modes.reactions_only.into(),
            Value::Int(now_ms),
        ],
    )
}

/// Pins a message (or unpins with None).
pub fn set_pin(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    message_id: Option<&str>,
    now_ms: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO chat_settings (client_id, stream_id, pinned_message_id, updated_ms) VALUES (?, ?, ?, ?) \
         ON CONFLICT (client_id, stream_id) DO UPDATE SET pinned_message_id = excluded.pinned_message_id, \
           updated_ms = excluded.updated_ms",
        &[
            client_id.into(),
            stream_id.into(),
            message_id.into(),
            Value::Int(now_ms),
        ],
    )
}

// ---- Blocked words ----

/// A word list and what to do with a message that matches it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WordList {
    pub words: Vec<String>,
    pub action: BlockedAction,
}

/// The list of `owner_id` (a creator, or [`TENANT_LIST`]), if one was saved.
pub fn word_list(db: &Db, client_id: &str, owner_id: &str) -> Result<Option<WordList>, ApiError> {
    Ok(db
        .query_one(
            "SELECT words, action FROM chat_word_lists WHERE client_id = ? AND owner_id = ?",
            &[client_id.into(), owner_id.into()],
        )?
        .map(|row| WordList {
            words: row.json("words"),
            action: BlockedAction::parse(&row.text("action")).unwrap_or_default(),
        }))
}

/// A saved list as a chat post screens with it: its patterns compiled
/// ([`word_filter::compile`]) when it was saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreeningList {
    pub action: BlockedAction,
    pub compiled: String,
}

/// Saves a list with its patterns compiled for screening.
pub fn save_word_list(
    db: &Db,
    client_id: &str,
    owner_id: &str,
    list: &WordList,
    now_ms: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO chat_word_lists (client_id, owner_id, words, compiled, action, updated_ms) VALUES (?, ?, ?, ?, ?, ?) \
         ON CONFLICT (client_id, owner_id) DO UPDATE SET words = excluded.words, compiled = excluded.compiled, \
           action = excluded.action, updated_ms = excluded.updated_ms",
        &[
            client_id.into(),
            owner_id.into(),
            serde_json::to_string(&list.words)
                .unwrap_or_else(|_| "[]".into())
                .into(),
            word_filter::compile(&list.words).into(),
            list.action.as_str().into(),
            Value::Int(now_ms),
        ],
    )
}

// ---- Slow mode ----

/// Claims `user_id`'s next message slot in a slow-mode chat: at most one message per
/// `seconds`. Answers `None` when claimed, or the milliseconds left until the next slot.
/// One guarded upsert: of concurrent claims exactly one wins (the row's lock orders them on
/// PostgreSQL). Inside the post's transaction, a post that fails later releases its claim.
pub fn claim_slow_mode_slot(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    user_id: &str,
    seconds: i64,
    now_ms: i64,
) -> Result<Option<i64>, ApiError> {
    let interval_ms = seconds * 1000;
    let claimed = db.query_one(
        "INSERT INTO chat_slow_mode (client_id, stream_id, user_id, last_ms) VALUES (?, ?, ?, ?) \
         ON CONFLICT (client_id, stream_id, user_id) DO UPDATE SET last_ms = excluded.last_ms \
           WHERE chat_slow_mode.last_ms <= ? RETURNING last_ms",
        &[
            client_id.into(),
            stream_id.into(),
            user_id.into(),
            Value::Int(now_ms),
            Value::Int(now_ms - interval_ms),
        ],
    )?;
    if claimed.is_some() {
        return Ok(None);
    }
    let last_ms = db.count(
        "SELECT last_ms FROM chat_slow_mode WHERE client_id = ? AND stream_id = ? AND user_id = ?",
        &[client_id.into(), stream_id.into(), user_id.into()],
    )?;
    Ok(Some((last_ms + interval_ms - now_ms).max(1)))
}

/// Forgets slow-mode slots older than any slow mode (the prune job's share).
pub fn prune_slow_mode(db: &Db, now_ms: i64, batch: i64) -> Result<i64, ApiError> {
    let removed = db.query(
        "DELETE FROM chat_slow_mode WHERE (client_id, stream_id, user_id) IN \
           (SELECT client_id, stream_id, user_id FROM chat_slow_mode WHERE last_ms <= ? LIMIT ?) \
         RETURNING user_id",
        &[
            Value::Int(now_ms - MAX_SLOW_MODE_SECS * 1000),
            Value::Int(batch),
        ],
    )?;
    Ok(removed.len() as i64)
}

// ---- What a chat post is screened against ----

/// Everything the checks of one chat post read, as stored ([`post_screening`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PostScreening {
    /// The poster's restrictions in force ([`restrictions_of`]).
    pub restrictions: Vec<Restriction>,
    /// The poster's co-host row in the broadcast, if any: its status and permissions.
    pub cohost: Option<(String, Permissions)>,
    /// The stream's modes ([`settings`]; the pinned message is not read).
    pub modes: Modes,
    /// Since when (epoch ms) the poster follows the creator, if they do.
    pub following_since_ms: Option<i64>,
    /// Whether the poster holds an active, paid-up subscription to the creator.
    pub subscribes: bool,
    /// The creator's list and the tenant's default list: `(creator, tenant)`. A list saved
    /// before lists were compiled (or by another version) is compiled from its words here.
    pub word_lists: (Option<ScreeningList>, Option<ScreeningList>),
}

/// What the checks of `user_id`'s post to `stream_id` (of broadcast `broadcast_id`, by
/// creator `owner_id`) read, in one statement instead of one per table: a post is the
/// chat's most frequent request. Each joined row is found by its key, so the statement
/// answers exactly one row.
pub fn post_screening(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    broadcast_id: Option<&str>,
    owner_id: Option<&str>,
    user_id: &str,
    now_ms: i64,
) -> Result<PostScreening, ApiError> {
    // A missing broadcast or creator is NULL: no row matches it.
    let broadcast: Value = broadcast_id.map_or(Value::Null, Into::into);
    let owner: Value = owner_id.map_or(Value::Null, Into::into);
    let row = db.query_one(
        "SELECT rs.user_id AS stream_restricted, rs.until_ms AS stream_until_ms, \
           rc.user_id AS channel_restricted, rc.until_ms AS channel_until_ms, \
           c.status AS cohost_status, c.permissions AS cohost_permissions, \
           s.slow_mode_seconds, s.followers_only_minutes, s.subscribers_only, s.reactions_only, \
           f.created_at AS following_since, \
           (SELECT CAST(COUNT(*) AS BIGINT) FROM subscriptions WHERE client_id = ? AND creator_id = ? \
              AND subscriber_id = ? AND status = 'active' AND period_end > ?) AS subscriptions, \
           wc.words AS creator_words, wc.compiled AS creator_compiled, wc.action AS creator_action, \
           wt.words AS tenant_words, wt.compiled AS tenant_compiled, wt.action AS tenant_action \
         FROM (SELECT 1 AS one) AS post \
         LEFT JOIN chat_restrictions rs ON rs.client_id = ? AND rs.scope = 'stream' \
           AND rs.scope_id = ? AND rs.user_id = ? AND (rs.until_ms IS NULL OR rs.until_ms > ?) \
         LEFT JOIN chat_restrictions rc ON rc.client_id = ? AND rc.scope = 'channel' \
           AND rc.scope_id = ? AND rc.user_id = ? AND (rc.until_ms IS NULL OR rc.until_ms > ?) \
         LEFT JOIN cohosts c ON c.client_id = ? AND c.broadcast_id = ? AND c.user_id = ? \
         LEFT JOIN chat_settings s ON s.client_id = ? AND s.stream_id = ? \
         LEFT JOIN follows f ON f.client_id = ? AND f.follower_id = ? AND f.followee_id = ? \
         LEFT JOIN chat_word_lists wc ON wc.client_id = ? AND wc.owner_id = ? AND wc.owner_id <> ? \
         LEFT JOIN chat_word_lists wt ON wt.client_id = ? AND wt.owner_id = ?",
        &[
            // subscriptions
            client_id.into(),
            owner.clone(),
            user_id.into(),
            Value::Int(now_ms.div_euclid(1000)),
            // rs
            client_id.into(),
            stream_id.into(),
            user_id.into(),
            Value::Int(now_ms),
            // rc: a stream without a creator has no channel restriction.
            client_id.into(),
            owner_id.unwrap_or(NO_OWNER).into(),
            user_id.into(),
            Value::Int(now_ms),
            // c
            client_id.into(),
            broadcast,
            user_id.into(),
            // s
            client_id.into(),
            stream_id.into(),
            // f
            client_id.into(),
            user_id.into(),
            owner.clone(),
            // wc: the creator's own list, never the tenant's under the creator's name.
            client_id.into(),
            owner,
            TENANT_LIST.into(),
            // wt
            client_id.into(),
            TENANT_LIST.into(),
        ],
    )?;
    let Some(row) = row else {
        return Err(ApiError::internal("the chat post's screening read no row"));
    };
    let restriction = |restricted: &str, until: &str, scope| {
        row.opt_text(restricted).map(|_| Restriction {
            scope,
            until_ms: row.opt_int(until),
        })
    };
    let restrictions = [
        restriction("stream_restricted", "stream_until_ms", Scope::Stream),
        restriction("channel_restricted", "channel_until_ms", Scope::Channel),
    ]
    .into_iter()
    .flatten()
    .collect();
    let list = |prefix: &str| -> Option<ScreeningList> {
        let action = row.opt_text(&format!("{prefix}_action"))?;
        let compiled = match row.opt_text(&format!("{prefix}_compiled")) {
            Some(compiled) if word_filter::is_current(&compiled) => compiled,
            // Saved before lists were compiled (or by another version): compiled here.
            _ => word_filter::compile(&row.json::<Vec<String>>(&format!("{prefix}_words"))),
        };
        Some(ScreeningList {
            action: BlockedAction::parse(&action).unwrap_or_default(),
            compiled,
        })
    };
    Ok(PostScreening {
        restrictions,
        cohost: row
            .opt_text("cohost_status")
            .map(|status| (status, row.json("cohost_permissions"))),
        modes: Modes {
            slow_mode_seconds: row.int("slow_mode_seconds"),
            followers_only_minutes: row.opt_int("followers_only_minutes"),
            subscribers_only: row.bool("subscribers_only"),
            reactions_only: row.bool("reactions_only"),
        },
        following_since_ms: row
            .opt_text("following_since")
            .and_then(|at| time::parse_rfc3339(&at))
            .map(|secs| secs * 1000),
        subscribes: row.int("subscriptions") > 0,
        word_lists: (list("creator"), list("tenant")),
    })
}

// ---- Reports and held messages ----

/// A report of a message (kind `report`) or a message held by a blocked word (`held`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ChatReport")]
pub struct Report {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    pub stream_id: String,
    #[schemars(extend("format" = "uuid"))]
    pub message_id: String,
    #[schemars(extend("enum" = ["report", "held"]))]
    pub kind: String,
    /// None for held messages.
    pub reporter_id: Option<String>,
    pub reason: String,
    #[schemars(extend("enum" = ["open", "resolved"]))]
    pub status: String,
    #[schemars(extend("enum" = ["deleted", "approved", "dismissed", null]))]
    pub resolution: Option<String>,
    /// The moderator who resolved it: a user id, or `server`.
    pub resolved_by: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub resolved_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

fn report_of(row: &Row) -> Report {
    let reporter = row.text("reporter_id");
    Report {
        id: row.text("id"),
        stream_id: row.text("stream_id"),
        message_id: row.text("message_id"),
        kind: row.text("kind"),
        reporter_id: (!reporter.is_empty()).then_some(reporter),
        reason: row.text("reason"),
        status: row.text("status"),
        resolution: row.opt_text("resolution"),
        resolved_by: row.opt_text("resolved_by"),
        resolved_at: row.opt_int("resolved_ms").map(time::format_rfc3339_millis),
        created_at: time::format_rfc3339_millis(row.int("created_ms")),
    }
}

pub struct NewReport<'a> {
    pub client_id: &'a str,
    pub stream_id: &'a str,
    pub message_id: &'a str,
    /// None: a held message.
    pub reporter_id: Option<&'a str>,
    pub reason: &'a str,
}

/// Files a report; None when this reporter already reported this message.
pub fn add_report(db: &Db, new: &NewReport<'_>, now_ms: i64) -> Result<Option<Report>, ApiError> {
    let kind = if new.reporter_id.is_some() {
        "report"
    } else {
        "held"
    };
    let rows = db.query(
        "INSERT INTO chat_reports (id, client_id, stream_id, message_id, kind, reporter_id, reason, created_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client_id, message_id, reporter_id) DO NOTHING RETURNING *",
        &[
            ids::uuid().into(),
            new.client_id.into(),
            new.stream_id.into(),
            new.message_id.into(),
            kind.into(),
            new.reporter_id.unwrap_or("").into(),
            new.reason.into(),
            Value::Int(now_ms),
        ],
    )?;
    Ok(rows.first().map(report_of))
}

/// Which reports a page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFilter {
    Open,
    Resolved,
    All,
}

/// The stream's reports, oldest open first (the queue order).
pub fn reports(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    filter: ReportFilter,
    page: Page,
) -> Result<(Vec<Report>, i64), ApiError> {
    let status = match filter {
        ReportFilter::Open => "status = 'open'",
        ReportFilter::Resolved => "status = 'resolved'",
        ReportFilter::All => "1 = 1",
    };
    let (rows, total) = db.page(
        "chat_reports",
        &format!("client_id = ? AND stream_id = ? AND {status}"),
        &[client_id.into(), stream_id.into()],
        "created_ms, id",
        page,
    )?;
    Ok((rows.iter().map(report_of).collect(), total))
}

pub fn report(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    id: &str,
) -> Result<Option<Report>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM chat_reports WHERE client_id = ? AND stream_id = ? AND id = ?",
            &[client_id.into(), stream_id.into(), id.into()],
        )?
        .as_ref()
        .map(report_of))
}

/// Resolves an open report; None when it was resolved already.
pub fn resolve(
    db: &Db,
    client_id: &str,
    id: &str,
    resolution: &str,
    by: &str,
    now_ms: i64,
) -> Result<Option<Report>, ApiError> {
    let rows = db.query(
        "UPDATE chat_reports SET status = 'resolved', resolution = ?, resolved_by = ?, resolved_ms = ? \
         WHERE client_id = ? AND id = ? AND status = 'open' RETURNING *",
        &[
            resolution.into(),
            by.into(),
            Value::Int(now_ms),
            client_id.into(),
            id.into(),
        ],
    )?;
    Ok(rows.first().map(report_of))
}

/// Resolves every other open report of the same message the same way (one decision
/// settles a message).
pub fn resolve_all_of_message(
    db: &Db,
    client_id: &str,
    message_id: &str,
    resolution: &str,
    by: &str,
    now_ms: i64,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE chat_reports SET status = 'resolved', resolution = ?, resolved_by = ?, resolved_ms = ? \
         WHERE client_id = ? AND message_id = ? AND status = 'open'",
        &[
            resolution.into(),
            by.into(),
            Value::Int(now_ms),
            client_id.into(),
            message_id.into(),
        ],
    )
}

// ---- The log ----

/// A moderation log entry.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ModerationLogEntry")]
pub struct LogEntry {
    #[schemars(extend("format" = "uuid"))]
    pub id: String,
    #[schemars(extend("enum" = ["stream", "channel"]))]
    pub scope: String,
    /// A user id, or `server` for the tenant's backend.
    pub actor: String,
    pub action: String,
    pub target_user_id: Option<String>,
    pub message_id: Option<String>,
    pub reason: String,
    /// What the action did, by action (the modes set, how many messages were deleted, ...).
    #[schemars(extend("type" = "object"))]
    pub detail: serde_json::Value,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

pub struct NewLogEntry<'a> {
    pub client_id: &'a str,
    pub scope: Scope,
    pub scope_id: &'a str,
    pub actor: &'a str,
    pub action: &'a str,
    pub target_user_id: Option<&'a str>,
    pub message_id: Option<&'a str>,
    pub reason: &'a str,
    pub detail: serde_json::Value,
}

pub fn log(db: &Db, entry: &NewLogEntry<'_>, now_ms: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO chat_moderation_log (id, client_id, scope, scope_id, actor, action, target_user_id, message_id, reason, detail, created_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            ids::uuid().into(),
            entry.client_id.into(),
            entry.scope.as_str().into(),
            entry.scope_id.into(),
            entry.actor.into(),
            entry.action.into(),
            entry.target_user_id.into(),
            entry.message_id.into(),
            entry.reason.into(),
            entry.detail.to_string().into(),
            Value::Int(now_ms),
        ],
    )
}

/// The log of a stream and of its creator's channel-wide actions, newest first.
pub fn log_page(
    db: &Db,
    client_id: &str,
    stream_id: &str,
    owner_id: Option<&str>,
    page: Page,
) -> Result<(Vec<LogEntry>, i64), ApiError> {
    let (rows, total) = db.page(
        "chat_moderation_log",
        "client_id = ? AND ((scope = 'stream' AND scope_id = ?) OR (scope = 'channel' AND scope_id = ?))",
        &[
            client_id.into(),
            stream_id.into(),
            owner_id.unwrap_or(NO_OWNER).into(),
        ],
        "created_ms DESC, id DESC",
        page,
    )?;
    let items = rows
        .iter()
        .map(|row| LogEntry {
            id: row.text("id"),
            scope: row.text("scope"),
            actor: row.text("actor"),
            action: row.text("action"),
            target_user_id: row.opt_text("target_user_id"),
            message_id: row.opt_text("message_id"),
            reason: row.text("reason"),
            detail: row.json("detail"),
            created_at: time::format_rfc3339_millis(row.int("created_ms")),
        })
        .collect();
    Ok((items, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use serde_json::json;

    fn restriction<'a>(
        scope: Scope,
        scope_id: &'a str,
        until_ms: Option<i64>,
    ) -> NewRestriction<'a> {
        NewRestriction {
            client_id: "c1",
            scope,
            scope_id,
            user_id: "troll",
            until_ms,
            reason: "spam",
            by: "owner",
        }
    }

    #[test]
    fn a_slow_mode_slot_is_claimed_once_per_interval_and_a_rolled_back_claim_is_released() {
        let db = testing::db();
        let claim = |user, now_ms| claim_slow_mode_slot(&db, "c1", "s1", user, 30, now_ms);
        assert_eq!(claim("u1", 100_000).unwrap(), None);
        assert_eq!(claim("u1", 100_500).unwrap(), Some(29_500));
        assert_eq!(claim("u2", 100_500).unwrap(), None, "per user");
        assert_eq!(
            claim_slow_mode_slot(&db, "c1", "s2", "u1", 30, 100_500).unwrap(),
            None,
            "per stream"
        );
        assert_eq!(claim("u1", 129_999).unwrap(), Some(1));
        assert_eq!(claim("u1", 130_000).unwrap(), None);
        // A post that fails after claiming (its transaction rolls back) keeps no slot.
        let failed: Result<(), ApiError> = db.transaction(|tx| {
            assert_eq!(
                claim_slow_mode_slot(tx, "c1", "s1", "u2", 30, 200_000).unwrap(),
                None
            );
            Err(ApiError::internal("the insert failed"))
        });
        assert!(failed.is_err());
        assert_eq!(claim("u2", 200_001).unwrap(), None);
        // Slots older than the longest slow mode are pruned.
        let later = 200_001 + MAX_SLOW_MODE_SECS * 1000;
        assert_eq!(prune_slow_mode(&db, later, 100).unwrap(), 3);
        assert_eq!(prune_slow_mode(&db, later, 100).unwrap(), 0);
        assert_eq!(claim("u2", later).unwrap(), None);
        assert_eq!(claim("u2", later + 1).unwrap(), Some(29_999));
    }

    #[test]
    fn restrictions_hold_per_stream_and_channel_and_a_timeout_never_lifts_a_ban() {
        let db = testing::db();
        let of = |now| restrictions_of(&db, "c1", "s1", Some("owner"), "troll", now).unwrap();
        assert!(of(0).is_empty());
        restrict(&db, &restriction(Scope::Stream, "s1", Some(5_000)), 0).unwrap();
        assert_eq!(of(4_999).len(), 1);
        assert!(of(5_000).is_empty(), "the timeout ended");
        // Another stream's restriction does not count; the creator's channel ban does.
        restrict(&db, &restriction(Scope::Stream, "s2", None), 0).unwrap();
        assert!(of(6_000).is_empty());
        restrict(&db, &restriction(Scope::Channel, "owner", None), 0).unwrap();
        assert_eq!(
            of(6_000),
            vec![Restriction {
                scope: Scope::Channel,
                until_ms: None
            }]
        );
        let stays = restrict(&db, &restriction(Scope::Channel, "owner", Some(9_000)), 1).unwrap();
        assert!(stays.is_ban(), "a timeout does not shorten a ban");
        // Another tenant's user of the same id is not restricted.
        assert!(
            restrictions_of(&db, "c2", "s1", Some("owner"), "troll", 6_000)
                .unwrap()
                .is_empty()
        );
        assert!(lift(&db, "c1", Scope::Channel, "owner", "troll").unwrap());
        assert!(!lift(&db, "c1", Scope::Channel, "owner", "troll").unwrap());
        assert!(of(6_000).is_empty());
    }

    #[test]
    fn settings_pins_and_word_lists_round_trip() {
        let db = testing::db();
        assert_eq!(settings(&db, "c1", "s1").unwrap(), Settings::default());
        set_pin(&db, "c1", "s1", Some("m1"), 1).unwrap();
        let modes = Modes {
            slow_mode_seconds: 30,
            followers_only_minutes: Some(10),
            subscribers_only: false,
            reactions_only: true,
        };
        save_modes(&db, "c1", "s1", &modes, 2).unwrap();
        let saved = settings(&db, "c1", "s1").unwrap();
        assert_eq!(saved.modes, modes);
        assert_eq!(saved.pinned_message_id.as_deref(), Some("m1"));
        set_pin(&db, "c1", "s1", None, 3).unwrap();
        assert_eq!(settings(&db, "c1", "s1").unwrap().pinned_message_id, None);
        assert_eq!(settings(&db, "c2", "s1").unwrap(), Settings::default());

        let creator = WordList {
            words: vec!["darn".into()],
            action: BlockedAction::Hold,
        };
        let screening = |list: &WordList| ScreeningList {
            action: list.action,
            compiled: word_filter::compile(&list.words),
        };
        save_word_list(&db, "c1", "owner", &creator, 1).unwrap();
        let lists = |owner| {
            post_screening(&db, "c1", "s1", None, owner, "ada", 0)
                .unwrap()
                .word_lists
        };
        assert_eq!(lists(Some("owner")), (Some(screening(&creator)), None));
        let tenant = WordList {
            words: vec!["heck".into()],
            action: BlockedAction::Reject,
        };
        save_word_list(&db, "c1", TENANT_LIST, &tenant, 1).unwrap();
        assert_eq!(
            lists(Some("owner")),
            (Some(screening(&creator)), Some(screening(&tenant)))
        );
        assert_eq!(lists(None), (None, Some(screening(&tenant))));
        assert_eq!(
            word_list(&db, "c1", "owner").unwrap(),
            Some(creator.clone())
        );
        // A list stored before lists were compiled is compiled when read.
        db.execute(
            "UPDATE chat_word_lists SET compiled = NULL WHERE owner_id = ?",
            &["owner".into()],
        )
        .unwrap();
        assert_eq!(lists(Some("owner")).0, Some(screening(&creator)));
    }

    #[test]
    fn reports_queue_resolve_once_and_the_log_reads_newest_first() {
        let db = testing::db();
        let new = |reporter| NewReport {
            client_id: "c1",
            stream_id: "s1",
            message_id: "m1",
            reporter_id: reporter,
            reason: "rude",
        };
        let first = add_report(&db, &new(Some("ada")), 1).unwrap().unwrap();
        assert!(
            add_report(&db, &new(Some("ada")), 2).unwrap().is_none(),
            "once per reporter"
        );
        add_report(&db, &new(Some("bob")), 3).unwrap().unwrap();
        let held = add_report(&db, &new(None), 4).unwrap().unwrap();
        assert_eq!((held.kind.as_str(), held.reporter_id), ("held", None));
        let (open, total) = reports(&db, "c1", "s1", ReportFilter::Open, Page::default()).unwrap();
        assert_eq!((open[0].id.as_str(), total), (first.id.as_str(), 3));
        let done = resolve(&db, "c1", &first.id, "dismissed", "owner", 5)
            .unwrap()
            .unwrap();
        assert_eq!(done.status, "resolved");
        assert!(
            resolve(&db, "c1", &first.id, "deleted", "owner", 6)
                .unwrap()
                .is_none()
        );
        resolve_all_of_message(&db, "c1", "m1", "deleted", "owner", 7).unwrap();
        assert_eq!(
            reports(&db, "c1", "s1", ReportFilter::Open, Page::default())
                .unwrap()
                .1,
            0
        );
        assert_eq!(
            reports(&db, "c1", "s1", ReportFilter::All, Page::default())
                .unwrap()
                .1,
            3
        );
        assert!(report(&db, "c2", "s1", &first.id).unwrap().is_none());

        for (i, (scope, scope_id, action)) in [
            (Scope::Stream, "s1", "timeout"),
            (Scope::Channel, "owner", "ban"),
            (Scope::Stream, "s2", "clear"),
        ]
        .into_iter()
        .enumerate()
        {
            let entry = NewLogEntry {
                client_id: "c1",
                scope,
                scope_id,
                actor: "owner",
                action,
                target_user_id: Some("troll"),
                message_id: None,
                reason: "",
                detail: json!({"n": i}),
            };
            log(&db, &entry, i as i64).unwrap();
        }
        let (entries, total) = log_page(&db, "c1", "s1", Some("owner"), Page::default()).unwrap();
        let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
        assert_eq!((actions, total), (vec!["ban", "timeout"], 2));
        assert_eq!(entries[0].detail, json!({"n": 1}));
    }

    #[test]
    fn a_post_screening_reads_the_posters_standing_in_one_statement() {
        let db = testing::db();
        let read = |client, broadcast, owner, user, now_ms| {
            post_screening(&db, client, "s1", broadcast, owner, user, now_ms).unwrap()
        };
        let nothing = read("c1", Some("b1"), Some("owner"), "ada", 10_000);
        assert_eq!(nothing, PostScreening::default());
        // Restrictions: the stream's and the creator's channel-wide ones in force.
        restrict(&db, &restriction(Scope::Stream, "s1", Some(20_000)), 0).unwrap();
        restrict(&db, &restriction(Scope::Channel, "owner", None), 0).unwrap();
        restrict(&db, &restriction(Scope::Stream, "s2", None), 0).unwrap();
        let troll = |now_ms| read("c1", Some("b1"), Some("owner"), "troll", now_ms);
        assert_eq!(
            troll(19_999).restrictions,
            vec![
                Restriction {
                    scope: Scope::Stream,
                    until_ms: Some(20_000)
                },
                Restriction {
                    scope: Scope::Channel,
                    until_ms: None
                },
            ]
        );
        assert_eq!(troll(20_000).restrictions.len(), 1, "the timeout ended");
        assert!(
            read("c1", Some("b1"), None, "troll", 20_000)
                .restrictions
                .is_empty(),
            "a stream without a creator has no channel restriction"
        );
        assert!(
            read("c2", Some("b1"), Some("owner"), "troll", 0)
                .restrictions
                .is_empty()
        );
        // The co-host row of the broadcast, whatever its status.
        for (user, status, moderates) in [("mod", "active", true), ("gone", "removed", false)] {
            db.execute(
                "INSERT INTO cohosts (id, client_id, broadcast_id, user_id, user_name, permissions, status, joined_at) \
                 VALUES (?, 'c1', 'b1', ?, ?, ?, ?, '2024-01-01T00:00:00Z')",
                &[
                    format!("ch-{user}").into(),
                    user.into(),
                    user.into(),
                    json!({"canModerateChat": moderates}).to_string().into(),
                    status.into(),
                ],
            )
            .unwrap();
        }
        let cohost = |broadcast, user| read("c1", broadcast, Some("owner"), user, 0).cohost;
        let (status, permissions) = cohost(Some("b1"), "mod").unwrap();
        assert_eq!(status, "active");
        assert!(permissions.can_moderate_chat);
        let (status, permissions) = cohost(Some("b1"), "gone").unwrap();
        assert_eq!(status, "removed");
        assert!(!permissions.can_moderate_chat);
        assert_eq!(cohost(Some("b2"), "mod"), None);
        assert_eq!(cohost(None, "mod"), None, "a stream without a broadcast");
        // The stream's modes.
        let modes = Modes {
            slow_mode_seconds: 30,
            followers_only_minutes: Some(10),
            subscribers_only: true,
            reactions_only: true,
        };
        save_modes(&db, "c1", "s1", &modes, 2).unwrap();
        assert_eq!(read("c1", None, Some("owner"), "ada", 0).modes, modes);
        assert_eq!(
            read("c2", None, Some("owner"), "ada", 0).modes,
            Modes::default()
        );
        // Following the creator, in milliseconds.
        crate::users::follow(&db, "c1", "ada", "owner", 1_000).unwrap();
        let following = |owner, user| read("c1", None, owner, user, 0).following_since_ms;
        assert_eq!(following(Some("owner"), "ada"), Some(1_000_000));
        assert_eq!(following(Some("owner"), "bob"), None);
        assert_eq!(following(Some("other"), "ada"), None);
        assert_eq!(following(None, "ada"), None);
        // An active subscription to the creator, until its period ends (epoch seconds).
        db.execute(
            "INSERT INTO subscriptions (id, client_id, creator_id, subscriber_id, plan_id, price_tokens, status, \
               cancel_at_period_end, period_start, period_end, created_at, updated_at) \
             VALUES ('sub1', 'c1', 'owner', 'ada', 'gold', 30, 'active', 0, 0, 100, 0, 0)",
            &[],
        )
        .unwrap();
        let subscribes = |owner, user, now_ms| read("c1", None, owner, user, now_ms).subscribes;
        assert!(subscribes(Some("owner"), "ada", 99_999));
        assert!(
            !subscribes(Some("owner"), "ada", 100_000),
            "the period ended"
        );
        assert!(!subscribes(Some("owner"), "bob", 0));
        assert!(!subscribes(None, "ada", 0));
        // Each joined table answers at most one row: still one screening.
        let all = read("c1", Some("b1"), Some("owner"), "mod", 0);
        assert_eq!((all.modes, all.cohost.is_some()), (modes, true));
    }
}
