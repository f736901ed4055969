//! The money rules as plain functions: what a gift costs and earns, the spending caps,
//! the reporting windows, and the shape of an idempotency key.

use domain::ApiError;
use store::monetization::Settings;

/// The most tokens one request may move (keeps every sum far from overflow).
pub const MAX_AMOUNT: i64 = 1_000_000_000;
/// The most gifts of one kind in one request.
pub const MAX_QUANTITY: i64 = 9_999;

/// The tokens `quantity` gifts at `price` cost; None if the total is out of bounds.
pub fn gift_cost(price: i64, quantity: i64) -> Option<i64> {
    price
        .checked_mul(quantity)
        .filter(|total| (1..=MAX_AMOUNT).contains(total))
}

/// The diamonds a creator earns for `tokens` of gifts at the tenant's rate, rounded down.
pub fn diamonds_for(tokens: i64, diamonds_per_100_tokens: i64) -> i64 {
    // i128: tokens and the rate are each bounded, but their product need not fit in i64.
    let product = i128::from(tokens) * i128::from(diamonds_per_100_tokens);
    i64::try_from(product / 100).unwrap_or(i64::MAX)
}

/// The spending windows: (name, length in seconds, cap) for each cap that is set.
pub fn cap_windows(s: &Settings) -> Vec<(&'static str, i64, i64)> {
    [
        ("hour", 3_600, s.cap_hour),
        ("day", 86_400, s.cap_day),
        ("week", 7 * 86_400, s.cap_week),
    ]
    .into_iter()
    .filter_map(|(name, secs, cap)| cap.map(|c| (name, secs, c)))
    .collect()
}

/// The refusal when spending `spent` (including this request) in the `window` exceeds `cap`.
pub fn check_cap(window: &str, cap: i64, spent: i64) -> Result<(), ApiError> {
    if spent > cap {
        Err(ApiError::new(
            429,
            "spending_cap_reached",
            format!("this would spend {spent} tokens this {window}; the cap is {cap}"),
        )
        .with_extra("window", window)
        .with_extra("cap", cap))
    } else {
        Ok(())
    }
}

/// The start (epoch ms) of a supporters period ending at `now_ms`.
pub fn period_start_ms(period: &str, now_ms: i64) -> Option<i64> {
    match period {
        "week" => Some(now_ms - 7 * 86_400_000),
        "month" => Some(now_ms - 30 * 86_400_000),
        "all" => Some(0),
        _ => None,
    }
}

/// A body's required amount field: 1 to [`MAX_AMOUNT`].
pub type Amount = domain::validate::body::Int<1, MAX_AMOUNT>;

/// A tenant-chosen id from the path, or a 400 naming `what`.
pub fn require_slug(id: &str, what: &str) -> Result<(), ApiError> {
    if valid_slug(id) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "invalid_id",
            format!("a {what} id is 1 to 64 letters, digits, '_', '-' or '.'"),
        ))
    }
}

/// A tenant-chosen id (gift ids, plan ids): 1 to 64 of `A-Z a-z 0-9 _ - .`.
pub fn valid_slug(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gifts_cost_exactly_and_earn_rounded_down() {
        assert_eq!(gift_cost(10, 3), Some(30));
        assert_eq!(gift_cost(0, 3), None);
        assert_eq!(gift_cost(i64::MAX, 2), None);
        assert_eq!(gift_cost(MAX_AMOUNT, 2), None);
        assert_eq!(diamonds_for(30, 50), 15);
        assert_eq!(diamonds_for(33, 50), 16);
        assert_eq!(diamonds_for(1, 99), 0);
        assert_eq!(diamonds_for(MAX_AMOUNT, 100), MAX_AMOUNT);
        assert_eq!(diamonds_for(7, 0), 0);
    }

    #[test]
    fn caps_apply_only_when_set_and_refuse_beyond_them() {
        let s = Settings {
            cap_hour: Some(100),
            cap_week: Some(1000),
            ..Settings::default()
        };
        let windows: Vec<&str> = cap_windows(&s).iter().map(|w| w.0).collect();
        assert_eq!(windows, ["hour", "week"]);
        assert!(cap_windows(&Settings::default()).is_empty());
        assert!(check_cap("hour", 100, 100).is_ok());
        let err = check_cap("hour", 100, 101).unwrap_err();
        assert_eq!((err.status, err.code), (429, "spending_cap_reached"));
    }

    #[test]
    fn periods_keys_and_ids() {
        assert_eq!(period_start_ms("week", 8 * 86_400_000), Some(86_400_000));
        assert_eq!(period_start_ms("all", 5), Some(0));
        assert_eq!(period_start_ms("year", 5), None);
        assert!(valid_slug("rose_1.big-x"));
        assert!(!valid_slug("a/b"));
        assert!(!valid_slug(""));
    }
}
