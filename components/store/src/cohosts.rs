//! Co-hosting of a broadcast: co-host rows (requested, active, declined, removed), invites,
//! the grid layout, and SFU presence with its metrics.

use super::broadcasts::Broadcast;
use super::{Db, Row, Value};
use domain::ApiError;
use domain::cohost::{Layout, Permissions};
use domain::time;

/// The status of a co-host row that is on air.
pub const ACTIVE: &str = "active";

/// A co-host row of a broadcast.
#[derive(Debug, Clone)]
pub struct CoHost {
    pub id: String,
    pub user_id: String,
    pub user_name: String,
    pub permissions: Permissions,
    /// `requested`, `active`, `declined` or `removed`.
    pub status: String,
    pub joined_at: String,
    pub removed_at: Option<String>,
}

impl CoHost {
    pub fn is_active(&self) -> bool {
        self.status == ACTIVE
    }
}

fn from_row(row: &Row) -> CoHost {
    CoHost {
        id: row.text("id"),
        user_id: row.text("user_id"),
        user_name: row.text("user_name"),
        permissions: row.json("permissions"),
        status: row.text("status"),
        joined_at: row.text("joined_at"),
        removed_at: row.opt_text("removed_at"),
    }
}

fn scope(b: &Broadcast) -> [Value; 2] {
    [b.client_id.clone().into(), b.id.clone().into()]
}

/// Every co-host row of `b`, in joining order.
pub fn list(db: &Db, b: &Broadcast) -> Result<Vec<CoHost>, ApiError> {
    Ok(db
        .query(
            "SELECT * FROM cohosts WHERE client_id = ? AND broadcast_id = ? ORDER BY joined_at, id",
            &scope(b),
        )?
        .iter()
        .map(from_row)
        .collect())
}

/// How many co-hosts are on stage (active) now.
pub fn count_active(db: &Db, b: &Broadcast) -> Result<i64, ApiError> {
    db.count(
        "SELECT COUNT(*) FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND status = 'active'",
        &scope(b),
    )
}

/// The co-host row of `user_id` in `b`, whatever its status.
pub fn of_user(db: &Db, b: &Broadcast, user_id: &str) -> Result<Option<CoHost>, ApiError> {
    let [client, broadcast] = scope(b);
    Ok(db
        .query_one(
            "SELECT * FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND user_id = ?",
            &[client, broadcast, user_id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// The co-host row `id` of `b`.
pub fn by_id(db: &Db, b: &Broadcast, id: &str) -> Result<Option<CoHost>, ApiError> {
    let [client, broadcast] = scope(b);
    Ok(db
        .query_one(
            "SELECT * FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND id = ?",
            &[client, broadcast, id.into()],
        )?
        .as_ref()
        .map(from_row))
}

/// The status of `user_id`'s co-host row in the tenant's broadcast `broadcast_id`, if any.
pub fn status_of(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    user_id: &str,
) -> Result<Option<String>, ApiError> {
    Ok(db
        .query_one(
            "SELECT status FROM cohosts WHERE client_id = ? AND broadcast_id = ? AND user_id = ?",
            &[client_id.into(), broadcast_id.into(), user_id.into()],
        )?
        .map(|row| row.text("status")))
}

/// Whether `user_id` is a co-host of the broadcast (active, or asking to join) or holds an
/// unexpired, unused invite to it: who may watch a private broadcast besides its owner.
pub fn is_invited_or_host(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    user_id: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let count = db.count(
        "SELECT (SELECT COUNT(*) FROM cohosts WHERE client_id = ?1 AND broadcast_id = ?2 AND user_id = ?3 \
                  AND status IN ('active', 'requested')) \
              + (SELECT COUNT(*) FROM cohost_invites WHERE client_id = ?1 AND broadcast_id = ?2 AND user_id = ?3 \
                  AND used_at IS NULL AND expires_at > ?4)",
        &[
            client_id.into(),
            broadcast_id.into(),
            user_id.into(),
            Value::Int(now),
        ],
    )?;
    Ok(count > 0)
}

/// A co-host row to store.
pub struct Joining<'a> {
    /// The row's id: the user's earlier row's, or a new one.
    pub id: &'a str,
    pub user_id: &'a str,
    pub user_name: &'a str,
    pub permissions: Permissions,
    /// `requested` or `active`.
    pub status: &'a str,
}

/// Stores a co-host row (one row per user and broadcast: an earlier one is reused), joined
/// at `now_ms` (milliseconds, so co-hosts list in the order they joined).
pub fn upsert(
    db: &Db,
    b: &Broadcast,
    joining: &Joining<'_>,
    now_ms: i64,
) -> Result<CoHost, ApiError> {
    db.execute(
        "INSERT INTO cohosts (id, client_id, broadcast_id, user_id, user_name, permissions, status, joined_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (broadcast_id, user_id) DO UPDATE SET user_name = excluded.user_name, \
           permissions = excluded.permissions, status = excluded.status, joined_at = excluded.joined_at, \
           removed_at = NULL, removed_by = NULL",
        &[
            joining.id.into(),
            b.client_id.clone().into(),
            b.id.clone().into(),
            joining.user_id.into(),
            joining.user_name.into(),
            permissions_text(joining.permissions).into(),
            joining.status.into(),
            time::format_rfc3339_millis(now_ms).into(),
        ],
    )?;
    of_user(db, b, joining.user_id)?.ok_or_else(|| ApiError::internal("the co-host was not stored"))
}

fn permissions_text(p: Permissions) -> String {
    serde_json::to_string(&p).unwrap_or_default()
}

/// Moves a request to `active` with `permissions`, joined at `now_ms`; `false` when it was
/// not (or no longer) a request.
pub fn approve(
    db: &Db,
    b: &Broadcast,
    id: &str,
    permissions: Permissions,
    now_ms: i64,
) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE cohosts SET status = 'active', permissions = ?, joined_at = ? \
         WHERE client_id = ? AND id = ? AND status = 'requested' RETURNING id",
        &[
            permissions_text(permissions).into(),
            time::format_rfc3339_millis(now_ms).into(),
            b.client_id.clone().into(),
            id.into(),
        ],
    )?;
    Ok(!moved.is_empty())
}

/// Moves a request to `declined`; `false` when it was not (or no longer) a request.
pub fn decline(db: &Db, b: &Broadcast, id: &str, by: &str, now: i64) -> Result<bool, ApiError> {
    let moved = db.query(
        "UPDATE cohosts SET status = 'declined', removed_at = ?, removed_by = ? \
         WHERE client_id = ? AND id = ? AND status = 'requested' RETURNING id",
        &[
            time::format_rfc3339(now).into(),
            by.into(),
            b.client_id.clone().into(),
            id.into(),
        ],
    )?;
    Ok(!moved.is_empty())
}

/// Gives a co-host new permissions.
pub fn set_permissions(
    db: &Db,
    b: &Broadcast,
    id: &str,
    permissions: Permissions,
) -> Result<(), ApiError> {
    db.execute(
        "UPDATE cohosts SET permissions = ? WHERE client_id = ? AND id = ?",
        &[
            permissions_text(permissions).into(),
            b.client_id.clone().into(),
            id.into(),
        ],
    )
}

/// Removes a co-host (the row stays, `removed`).
pub fn remove(db: &Db, b: &Broadcast, id: &str, by: &str, now: i64) -> Result<(), ApiError> {
    db.execute(
        "UPDATE cohosts SET status = 'removed', removed_at = ?, removed_by = ? WHERE client_id = ? AND id = ?",
        &[
            time::format_rfc3339(now).into(),
            by.into(),
            b.client_id.clone().into(),
            id.into(),
        ],
    )
}

/// The session's layout (the default grid until one is saved).
pub fn layout(db: &Db, b: &Broadcast) -> Result<Layout, ApiError> {
    Ok(db
        .query_one(
            "SELECT layout FROM session_layouts WHERE client_id = ? AND broadcast_id = ?",
            &scope(b),
        )?
        .and_then(|row| serde_json::from_str(&row.text("layout")).ok())
        .unwrap_or_default())
}

pub fn save_layout(db: &Db, b: &Broadcast, layout: &Layout, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO session_layouts (broadcast_id, client_id, layout, updated_at) VALUES (?, ?, ?, ?) \
         ON CONFLICT (broadcast_id) DO UPDATE SET layout = excluded.layout, updated_at = excluded.updated_at",
        &[
            b.id.clone().into(),
            b.client_id.clone().into(),
            serde_json::to_string(layout).unwrap_or_default().into(),
            time::format_rfc3339(now).into(),
        ],
    )
}

/// A stored invite (by the hash of its token).
#[derive(Debug, Clone)]
pub struct Invite {
    pub user_id: String,
    pub permissions: Permissions,
    pub expires_at: i64,
    pub used: bool,
}

/// Stores an invite for `user_id` to `b`, found later by `token_hash`.
pub fn add_invite(
    db: &Db,
    b: &Broadcast,
    token_hash: &str,
    user_id: &str,
    permissions: Permissions,
    invited_by: &str,
    expires_at: i64,
) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO cohost_invites (token_hash, client_id, broadcast_id, user_id, permissions, invited_by, expires_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
        &[
            token_hash.into(),
            b.client_id.clone().into(),
            b.id.clone().into(),
            user_id.into(),
            permissions_text(permissions).into(),
            invited_by.into(),
            Value::Int(expires_at),
        ],
    )
}

pub fn invite(db: &Db, b: &Broadcast, token_hash: &str) -> Result<Option<Invite>, ApiError> {
    let [client, broadcast] = scope(b);
    Ok(db
        .query_one(
            "SELECT user_id, permissions, expires_at, used_at FROM cohost_invites \
             WHERE token_hash = ? AND client_id = ? AND broadcast_id = ?",
            &[token_hash.into(), client, broadcast],
        )?
        .map(|row| Invite {
            user_id: row.text("user_id"),
            permissions: row.json("permissions"),
            expires_at: row.int("expires_at"),
            used: row.opt_int("used_at").is_some(),
        }))
}

/// Marks an invite used; `false` when a concurrent use took it first.
pub fn take_invite(db: &Db, token_hash: &str, now: i64) -> Result<bool, ApiError> {
    let taken = db.query(
        "UPDATE cohost_invites SET used_at = ? WHERE token_hash = ? AND used_at IS NULL RETURNING token_hash",
        &[Value::Int(now), token_hash.into()],
    )?;
    Ok(!taken.is_empty())
}

/// Removes up to `batch` invites that expired before `before`; answers how many.
pub fn prune_invites(db: &Db, before: i64, batch: i64) -> Result<i64, ApiError> {
    let removed = db.query(
        "DELETE FROM cohost_invites WHERE token_hash IN \
           (SELECT token_hash FROM cohost_invites WHERE expires_at <= ? LIMIT ?) RETURNING token_hash",
        &[Value::Int(before), Value::Int(batch)],
    )?;
    Ok(removed.len() as i64)
}

/// The identities in the SFU room now.
pub fn connected(db: &Db, b: &Broadcast) -> Result<Vec<String>, ApiError> {
    Ok(db
        .query(
            "SELECT identity FROM sfu_participants WHERE client_id = ? AND broadcast_id = ?",
            &scope(b),
        )?
        .iter()
        .map(|row| row.text("identity"))
        .collect())
}

/// A participant in the SFU room: whether it is a co-host, and since when (epoch seconds).
pub struct Presence {
    pub is_cohost: bool,
    pub since: i64,
}

pub fn present(db: &Db, b: &Broadcast) -> Result<Vec<Presence>, ApiError> {
    Ok(db
        .query(
            "SELECT is_cohost, joined_at FROM sfu_participants WHERE client_id = ? AND broadcast_id = ?",
            &scope(b),
        )?
        .iter()
        .map(|row| Presence {
            is_cohost: row.bool("is_cohost"),
            since: row.int("joined_at"),
        })
        .collect())
}

/// Co-host counters of a session.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub peak_cohosts: i64,
    pub joins: i64,
    pub leaves: i64,
    pub cohost_seconds: i64,
}

pub fn counters(db: &Db, b: &Broadcast) -> Result<Counters, ApiError> {
    Ok(db
        .query_one(
            "SELECT peak_cohosts, joins, leaves, cohost_seconds FROM session_metrics WHERE client_id = ? AND broadcast_id = ?",
            &scope(b),
        )?
        .map(|row| Counters {
            peak_cohosts: row.int("peak_cohosts"),
            joins: row.int("joins"),
            leaves: row.int("leaves"),
            cohost_seconds: row.int("cohost_seconds"),
        })
        .unwrap_or_default())
}

/// Records an SFU webhook's id; `false` when it was seen before (a retried delivery).
pub fn first_delivery(db: &Db, event_id: &str, now: i64) -> Result<bool, ApiError> {
    let fresh = db.query(
        "INSERT INTO sfu_webhook_events (id, received_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
        &[event_id.into(), Value::Int(now)],
    )?;
    Ok(!fresh.is_empty())
}

/// Removes up to `batch` SFU webhook ids received before `before`; answers how many.
pub fn prune_deliveries(db: &Db, before: i64, batch: i64) -> Result<i64, ApiError> {
    let removed = db.query(
        "DELETE FROM sfu_webhook_events WHERE id IN \
           (SELECT id FROM sfu_webhook_events WHERE received_at <= ? LIMIT ?) RETURNING id",
        &[Value::Int(before), Value::Int(batch)],
    )?;
    Ok(removed.len() as i64)
}

/// A participant joined the room: presence, and the co-host counters when it is one.
pub fn participant_joined(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    identity: &str,
    is_cohost: bool,
    now: i64,
) -> Result<(), ApiError> {
    ensure_counters(db, client_id, broadcast_id)?;
    let joined = db.query(
        "INSERT INTO sfu_participants (broadcast_id, identity, client_id, is_cohost, joined_at) VALUES (?, ?, ?, ?, ?) \
         ON CONFLICT (broadcast_id, identity) DO NOTHING RETURNING identity",
        &[
            broadcast_id.into(),
            identity.into(),
            client_id.into(),
            is_cohost.into(),
            Value::Int(now),
        ],
    )?;
    if is_cohost && !joined.is_empty() {
        db.execute(
            "UPDATE session_metrics SET joins = joins + 1, peak_cohosts = CASE \
               WHEN peak_cohosts > (SELECT COUNT(*) FROM sfu_participants WHERE broadcast_id = ?1 AND is_cohost = 1) \
               THEN peak_cohosts \
               ELSE (SELECT COUNT(*) FROM sfu_participants WHERE broadcast_id = ?1 AND is_cohost = 1) END \
             WHERE broadcast_id = ?1",
            &[broadcast_id.into()],
        )?;
    }
    Ok(())
}

/// A participant left the room: presence, and a co-host's time on stage.
pub fn participant_left(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    identity: &str,
    now: i64,
) -> Result<(), ApiError> {
    ensure_counters(db, client_id, broadcast_id)?;
    let left = db.query(
        "DELETE FROM sfu_participants WHERE broadcast_id = ? AND identity = ? RETURNING is_cohost, joined_at",
        &[broadcast_id.into(), identity.into()],
    )?;
    if let Some(row) = left.first().filter(|row| row.bool("is_cohost")) {
        db.execute(
            "UPDATE session_metrics SET leaves = leaves + 1, cohost_seconds = cohost_seconds + ? WHERE broadcast_id = ?",
            &[
                Value::Int((now - row.int("joined_at")).max(0)),
                broadcast_id.into(),
            ],
        )?;
    }
    Ok(())
}

fn ensure_counters(db: &Db, client_id: &str, broadcast_id: &str) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO session_metrics (broadcast_id, client_id) VALUES (?, ?) ON CONFLICT (broadcast_id) DO NOTHING",
        &[broadcast_id.into(), client_id.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broadcasts::{self, NewBroadcast};
    use crate::testing;

    fn broadcast(db: &Db) -> Broadcast {
        let new = NewBroadcast {
            title: "Panel".into(),
            visibility: domain::broadcast::Visibility::Private,
            orientation: "portrait".into(),
            max_participants: 10,
            cohost_policy: "approval".into(),
            ..Default::default()
        };
        broadcasts::insert(db, "c1", Some("ada"), &new, 100).unwrap()
    }

    #[test]
    fn requests_are_decided_once() {
        let db = testing::db();
        let b = broadcast(&db);
        let joining = Joining {
            id: "h1",
            user_id: "bob",
            user_name: "Bob",
            permissions: Permissions::DEFAULT,
            status: "requested",
        };
        let asked = upsert(&db, &b, &joining, 100_000).unwrap();
        assert_eq!(count_active(&db, &b).unwrap(), 0);
        assert!(is_invited_or_host(&db, "c1", &b.id, "bob", 100).unwrap());
        assert!(approve(&db, &b, &asked.id, Permissions::MODERATOR, 101_000).unwrap());
        assert!(!approve(&db, &b, &asked.id, Permissions::MODERATOR, 102_000).unwrap());
        assert!(!decline(&db, &b, &asked.id, "ada", 102).unwrap());
        let bob = of_user(&db, &b, "bob").unwrap().unwrap();
        assert_eq!(
            (bob.status.as_str(), bob.permissions),
            ("active", Permissions::MODERATOR)
        );
        assert_eq!(count_active(&db, &b).unwrap(), 1);
        // Another tenant's broadcast id names nothing here.
        assert!(!is_invited_or_host(&db, "c2", &b.id, "bob", 100).unwrap());
    }

    #[test]
    fn invites_are_single_use_and_expire() {
        let db = testing::db();
        let b = broadcast(&db);
        add_invite(&db, &b, "hash", "carol", Permissions::DEFAULT, "ada", 700).unwrap();
        assert!(is_invited_or_host(&db, "c1", &b.id, "carol", 699).unwrap());
        assert!(!is_invited_or_host(&db, "c1", &b.id, "carol", 700).unwrap());
        assert!(take_invite(&db, "hash", 650).unwrap());
        assert!(!take_invite(&db, "hash", 651).unwrap());
        assert!(invite(&db, &b, "hash").unwrap().unwrap().used);
        assert_eq!(prune_invites(&db, 699, 10).unwrap(), 0);
        assert_eq!(prune_invites(&db, 700, 10).unwrap(), 1);
    }

    #[test]
    fn presence_counts_cohosts_and_their_time() {
        let db = testing::db();
        let b = broadcast(&db);
        participant_joined(&db, "c1", &b.id, "bob", true, 1000).unwrap();
        participant_joined(&db, "c1", &b.id, "bob", true, 1001).unwrap();
        participant_joined(&db, "c1", &b.id, "dave", true, 1002).unwrap();
        participant_joined(&db, "c1", &b.id, "viewer", false, 1003).unwrap();
        participant_left(&db, "c1", &b.id, "dave", 1062).unwrap();
        let c = counters(&db, &b).unwrap();
        assert_eq!(
            c,
            Counters {
                peak_cohosts: 2,
                joins: 2,
                leaves: 1,
                cohost_seconds: 60
            }
        );
        assert_eq!(connected(&db, &b).unwrap().len(), 2);
        assert!(first_delivery(&db, "EV_1", 1).unwrap());
        assert!(!first_delivery(&db, "EV_1", 2).unwrap());
    }
}
