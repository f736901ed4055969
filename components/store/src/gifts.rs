//! Gifts: the tenant's catalog, and every gift sent (combos, leaderboards, supporters).

use super::{Db, Row, Value};
use domain::ApiError;

/// A catalog entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gift {
    pub id: String,
    pub name: String,
    pub price_tokens: i64,
    pub image_file_id: Option<String>,
    /// `small`, `large` or `fullscreen`.
    pub animation: String,
    pub active: bool,
    pub sort_order: i64,
}

fn gift_of(row: &Row) -> Gift {
    Gift {
        id: row.text("id"),
        name: row.text("name"),
        price_tokens: row.int("price_tokens"),
        image_file_id: row.opt_text("image_file_id"),
        animation: row.text("animation"),
        active: row.bool("active"),
        sort_order: row.int("sort_order"),
    }
}

/// Creates or replaces a catalog entry.
pub fn put(db: &Db, client_id: &str, gift: &Gift, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO gift_catalog (client_id, id, name, price_tokens, image_file_id, animation, active, sort_order, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (client_id, id) DO UPDATE SET \
         name = ?3, price_tokens = ?4, image_file_id = ?5, animation = ?6, active = ?7, sort_order = ?8, updated_at = ?9",
        &[
            client_id.into(),
            (&gift.id).into(),
            (&gift.name).into(),
            Value::Int(gift.price_tokens),
            gift.image_file_id.clone().into(),
            (&gift.animation).into(),
            gift.active.into(),
            Value::Int(gift.sort_order),
            Value::Int(now),
        ],
    )
}

/// Removes a catalog entry; answers whether it existed. Gifts already sent keep their
/// name and price.
pub fn delete(db: &Db, client_id: &str, id: &str) -> Result<bool, ApiError> {
    Ok(!db
        .query(
            "DELETE FROM gift_catalog WHERE client_id = ? AND id = ? RETURNING id",
            &[client_id.into(), id.into()],
        )?
        .is_empty())
}

pub fn get(db: &Db, client_id: &str, id: &str) -> Result<Option<Gift>, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM gift_catalog WHERE client_id = ? AND id = ?",
            &[client_id.into(), id.into()],
        )?
        .as_ref()
        .map(gift_of))
}

/// The catalog in display order (only the active entries, or all).
pub fn list(db: &Db, client_id: &str, active_only: bool) -> Result<Vec<Gift>, ApiError> {
    let sql = if active_only {
        "SELECT * FROM gift_catalog WHERE client_id = ? AND active = 1 ORDER BY sort_order, name, id"
    } else {
        "SELECT * FROM gift_catalog WHERE client_id = ? ORDER BY sort_order, name, id"
    };
    let rows = db.query(sql, &[client_id.into()])?;
    Ok(rows.iter().map(gift_of).collect())
}

/// A gift sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub id: String,
    pub broadcast_id: String,
    pub sender_id: String,
    pub recipient_id: String,
    pub gift_id: String,
    pub gift_name: String,
    pub animation: String,
    pub quantity: i64,
    pub tokens: i64,
    pub diamonds: i64,
    pub anonymous: bool,
    /// 1, or one more than the same sender's same gift to the same recipient on the same
    /// broadcast within the combo window.
    pub combo: i64,
    pub operation_id: String,
    pub created_at_ms: i64,
}

/// How long after a gift the same gift again continues its combo.
pub const COMBO_WINDOW_MS: i64 = 10_000;

/// The combo count a gift sent at `now_ms` gets (call inside the gift's transaction, after
/// the sender's balance was debited: that row lock orders one sender's gifts).
pub fn next_combo(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    sender_id: &str,
    recipient_id: &str,
    gift_id: &str,
    now_ms: i64,
) -> Result<i64, ApiError> {
    let last = db.query_one(
        "SELECT combo FROM gifts_sent WHERE client_id = ? AND broadcast_id = ? AND sender_id = ? \
           AND recipient_id = ? AND gift_id = ? AND created_at_ms >= ? \
         ORDER BY created_at_ms DESC, combo DESC LIMIT 1",
        &[
            client_id.into(),
            broadcast_id.into(),
            sender_id.into(),
            recipient_id.into(),
            gift_id.into(),
            Value::Int(now_ms - COMBO_WINDOW_MS),
        ],
    )?;
    Ok(last.map_or(1, |row| row.int("combo") + 1))
}

pub fn record(db: &Db, client_id: &str, sent: &Sent) -> Result<(), ApiError> {
    db.insert_soon(
        "INSERT INTO gifts_sent (id, client_id, broadcast_id, sender_id, recipient_id, gift_id, gift_name, animation, \
           quantity, tokens, diamonds, anonymous, combo, operation_id, created_at_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            (&sent.id).into(),
            client_id.into(),
            (&sent.broadcast_id).into(),
            (&sent.sender_id).into(),
            (&sent.recipient_id).into(),
            (&sent.gift_id).into(),
            (&sent.gift_name).into(),
            (&sent.animation).into(),
            Value::Int(sent.quantity),
            Value::Int(sent.tokens),
            Value::Int(sent.diamonds),
            sent.anonymous.into(),
            Value::Int(sent.combo),
            (&sent.operation_id).into(),
            Value::Int(sent.created_at_ms),
        ],
    )
}

/// One gifter's standing: the tokens they gave, and how many gifts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    pub user_id: String,
    pub username: String,
    pub tokens: i64,
    pub gifts: i64,
}

fn standing_of(row: &Row) -> Standing {
    Standing {
        user_id: row.text("sender_id"),
        username: row.text("username"),
        tokens: row.int("tokens"),
        gifts: row.int("gifts"),
    }
}

/// The top gifters of a broadcast (anonymous gifts are left out).
pub fn leaderboard(
    db: &Db,
    client_id: &str,
    broadcast_id: &str,
    limit: i64,
) -> Result<Vec<Standing>, ApiError> {
    let rows = db.query(
        "SELECT g.sender_id, COALESCE(u.username, '') AS username, g.tokens, g.gifts FROM (\
           SELECT sender_id, CAST(SUM(tokens) AS BIGINT) AS tokens, CAST(SUM(quantity) AS BIGINT) AS gifts \
           FROM gifts_sent WHERE client_id = ? AND broadcast_id = ? AND anonymous = 0 GROUP BY sender_id) g \
         LEFT JOIN users u ON u.id = g.sender_id \
         ORDER BY g.tokens DESC, g.sender_id LIMIT ?",
        &[client_id.into(), broadcast_id.into(), Value::Int(limit)],
    )?;
    Ok(rows.iter().map(standing_of).collect())
}

/// The top gifters of a creator since `since_ms` (anonymous gifts are left out).
pub fn supporters(
    db: &Db,
    client_id: &str,
    recipient_id: &str,
    since_ms: i64,
    limit: i64,
) -> Result<Vec<Standing>, ApiError> {
    let rows = db.query(
        "SELECT g.sender_id, COALESCE(u.username, '') AS username, g.tokens, g.gifts FROM (\
           SELECT sender_id, CAST(SUM(tokens) AS BIGINT) AS tokens, CAST(SUM(quantity) AS BIGINT) AS gifts \
           FROM gifts_sent WHERE client_id = ? AND recipient_id = ? AND anonymous = 0 AND created_at_ms >= ? \
           GROUP BY sender_id) g \
         LEFT JOIN users u ON u.id = g.sender_id \
         ORDER BY g.tokens DESC, g.sender_id LIMIT ?",
        &[
            client_id.into(),
            recipient_id.into(),
            Value::Int(since_ms),
            Value::Int(limit),
        ],
    )?;
    Ok(rows.iter().map(standing_of).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn rose(price: i64, order: i64, active: bool) -> Gift {
        Gift {
            id: format!("rose{price}"),
            name: "Rose".into(),
            price_tokens: price,
            image_file_id: None,
            animation: "small".into(),
            active,
            sort_order: order,
        }
    }

    fn sent(sender: &str, tokens: i64, anonymous: bool, combo: i64, at: i64) -> Sent {
        Sent {
            id: domain::ids::uuid(),
            broadcast_id: "b1".into(),
            sender_id: sender.into(),
            recipient_id: "host".into(),
            gift_id: "rose".into(),
            gift_name: "Rose".into(),
            animation: "small".into(),
            quantity: 1,
            tokens,
            diamonds: tokens / 2,
            anonymous,
            combo,
            operation_id: "op".into(),
            created_at_ms: at,
        }
    }

    #[test]
    fn the_catalog_is_per_tenant_ordered_and_filtered() {
        let db = testing::db();
        put(&db, "c1", &rose(10, 2, true), 1).unwrap();
        put(&db, "c1", &rose(5, 1, true), 1).unwrap();
        put(&db, "c1", &rose(99, 0, false), 1).unwrap();
        let active: Vec<i64> = list(&db, "c1", true)
            .unwrap()
            .iter()
            .map(|g| g.price_tokens)
            .collect();
        assert_eq!(active, [5, 10]);
        assert_eq!(list(&db, "c1", false).unwrap().len(), 3);
        assert!(list(&db, "c2", false).unwrap().is_empty());
        assert!(get(&db, "c2", "rose5").unwrap().is_none());
        assert!(delete(&db, "c1", "rose5").unwrap());
        assert!(!delete(&db, "c1", "rose5").unwrap());
    }

    #[test]
    fn combos_continue_within_ten_seconds_and_boards_hide_anonymous_gifts() {
        let db = testing::db();
        let combo = |at| next_combo(&db, "c1", "b1", "ada", "host", "rose", at).unwrap();
        assert_eq!(combo(1_000), 1);
        record(&db, "c1", &sent("ada", 10, false, 1, 1_000)).unwrap();
        assert_eq!(combo(5_000), 2);
        record(&db, "c1", &sent("ada", 10, false, 2, 5_000)).unwrap();
        assert_eq!(combo(15_001), 1);
        record(&db, "c1", &sent("bob", 50, true, 1, 6_000)).unwrap();
        record(&db, "c1", &sent("cyd", 15, false, 1, 7_000)).unwrap();
        let board: Vec<(String, i64)> = leaderboard(&db, "c1", "b1", 10)
            .unwrap()
            .into_iter()
            .map(|s| (s.user_id, s.tokens))
            .collect();
        assert_eq!(board, [("ada".into(), 20), ("cyd".into(), 15)]);
        let recent = supporters(&db, "c1", "host", 6_500, 10).unwrap();
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].user_id, "cyd");
    }
}
