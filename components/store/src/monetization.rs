//! A tenant's monetization settings: the creators' share of a gift, the smallest payout,
//! and the per-user spending caps.

use super::{Db, Row, Value};
use domain::ApiError;

/// The settings; a tenant that never set them has [`Settings::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Diamonds a creator gets per 100 tokens of gifts (rounded down).
    pub diamonds_per_100_tokens: i64,
    pub min_payout_diamonds: i64,
    /// Most tokens a user may spend per hour, day and week (none: no cap).
    pub cap_hour: Option<i64>,
    pub cap_day: Option<i64>,
    pub cap_week: Option<i64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            diamonds_per_100_tokens: 50,
            min_payout_diamonds: 100,
            cap_hour: None,
            cap_day: None,
            cap_week: None,
        }
    }
}

fn settings_of(row: &Row) -> Settings {
    Settings {
        diamonds_per_100_tokens: row.int("diamonds_per_100_tokens"),
        min_payout_diamonds: row.int("min_payout_diamonds"),
        cap_hour: row.opt_int("cap_hour"),
        cap_day: row.opt_int("cap_day"),
        cap_week: row.opt_int("cap_week"),
    }
}

pub fn get(db: &Db, client_id: &str) -> Result<Settings, ApiError> {
    Ok(db
        .query_one(
            "SELECT * FROM monetization_settings WHERE client_id = ?",
            &[client_id.into()],
        )?
        .as_ref()
        .map(settings_of)
        .unwrap_or_default())
}

pub fn put(db: &Db, client_id: &str, s: &Settings, now: i64) -> Result<(), ApiError> {
    db.execute(
        "INSERT INTO monetization_settings (client_id, diamonds_per_100_tokens, min_payout_diamonds, cap_hour, cap_day, cap_week, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (client_id) DO UPDATE SET \
         diamonds_per_100_tokens = ?2, min_payout_diamonds = ?3, cap_hour = ?4, cap_day = ?5, cap_week = ?6, updated_at = ?7",
        &[
            client_id.into(),
            Value::Int(s.diamonds_per_100_tokens),
            Value::Int(s.min_payout_diamonds),
            s.cap_hour.into(),
            s.cap_day.into(),
            s.cap_week.into(),
            Value::Int(now),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn settings_default_until_set_per_tenant() {
        let db = testing::db();
        assert_eq!(get(&db, "c1").unwrap(), Settings::default());
        let mine = Settings {
            diamonds_per_100_tokens: 70,
            min_payout_diamonds: 10,
            cap_hour: Some(500),
            cap_day: None,
            cap_week: Some(5000),
        };
        put(&db, "c1", &mine, 1).unwrap();
        put(&db, "c1", &mine, 2).unwrap();
        assert_eq!(get(&db, "c1").unwrap(), mine);
        assert_eq!(get(&db, "c2").unwrap(), Settings::default());
    }
}
