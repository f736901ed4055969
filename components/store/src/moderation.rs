//! Chat moderation: restrictions (timeouts and bans, per stream or channel-wide), each
//! stream's modes and pinned message, blocked-word lists, reports (and held messages) and
//! the moderation log. The rules that read them are in `domain::moderation`.

use super::{Db, Row, Value};
use domain::ApiError;
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

/// The creator's list and the tenant's default list, in one read: `(creator, tenant)`.
/// Only the compiled form is read; a list saved before lists were compiled (or by another
/// version) has its words read and compiled here.
pub fn word_lists_for(
    db: &Db,
    client_id: &str,
    owner_id: Option<&str>,
) -> Result<(Option<ScreeningList>, Option<ScreeningList>), ApiError> {
    let rows = db.query(
        "SELECT owner_id, compiled, action FROM chat_word_lists WHERE client_id = ? AND owner_id IN (?, ?)",
        &[
            client_id.into(),
            TENANT_LIST.into(),
            owner_id.unwrap_or(TENANT_LIST).into(),
        ],
    )?;
    let mut creator = None;
    let mut tenant = None;
    for row in &rows {
        let owner = row.text("owner_id");
        let compiled = match row.opt_text("compiled") {
            Some(compiled) if word_filter::is_current(&compiled) => compiled,
            _ => {
                let words = word_list(db, client_id, &owner)?.map(|l| l.words);
                word_filter::compile(&words.unwrap_or_default())
            }
        };
        let list = ScreeningList {
            action: BlockedAction::parse(&row.text("action")).unwrap_or_default(),
            compiled,
        };
        if owner == TENANT_LIST {
            tenant = Some(list);
        } else {
            creator = Some(list);
        }
    }
    Ok((creator, tenant))
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

// ---- Who the poster is to the creator ----

/// Since when (epoch ms) `follower` follows `creator`, if they do.
pub fn following_since_ms(
    db: &Db,
    client_id: &str,
    follower: &str,
    creator: &str,
) -> Result<Option<i64>, ApiError> {
    Ok(db
        .query_one(
            "SELECT created_at FROM follows WHERE client_id = ? AND follower_id = ? AND followee_id = ?",
            &[client_id.into(), follower.into(), creator.into()],
        )?
        .and_then(|row| time::parse_rfc3339(&row.text("created_at")))
        .map(|secs| secs * 1000))
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
        assert_eq!(
            word_lists_for(&db, "c1", Some("owner")).unwrap(),
            (Some(screening(&creator)), None)
        );
        let tenant = WordList {
            words: vec!["heck".into()],
            action: BlockedAction::Reject,
        };
        save_word_list(&db, "c1", TENANT_LIST, &tenant, 1).unwrap();
        assert_eq!(
            word_lists_for(&db, "c1", Some("owner")).unwrap(),
            (Some(screening(&creator)), Some(screening(&tenant)))
        );
        assert_eq!(
            word_lists_for(&db, "c1", None).unwrap(),
            (None, Some(screening(&tenant)))
        );
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
        assert_eq!(
            word_lists_for(&db, "c1", Some("owner")).unwrap().0,
            Some(screening(&creator))
        );
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
    fn following_is_read_in_milliseconds() {
        let db = testing::db();
        assert_eq!(following_since_ms(&db, "c1", "ada", "owner").unwrap(), None);
        crate::users::follow(&db, "c1", "ada", "owner", 1_000).unwrap();
        assert_eq!(
            following_since_ms(&db, "c1", "ada", "owner").unwrap(),
            Some(1_000_000)
        );
    }
}
