//! A route's rate limit, declared with the route: its refinement names it
//! (`.rate_limited(&LIMIT)`, which documents the 429 and the limit as `x-rate-limit`), and
//! the handler applies the same value where its rule counts (after the checks that decide
//! whether a request counts at all: a refused report or a held message is not counted).

use domain::ApiError;
use store::Db;
use store::rate_limits;

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    /// Every request that gets this far.
    Requests,
    /// Failed attempts (a wrong password); a success forgets them.
    Failures,
}

/// At most `max` counted requests per `window_secs` in one bucket, a bucket being `per`.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    /// The buckets' prefix in the store.
    pub bucket: &'static str,
    pub max: i64,
    pub window_secs: i64,
    /// What one bucket is, as the document says it ("client address", "user", ...).
    pub per: &'static str,
    pub counts: Counts,
}

impl RateLimit {
    /// The bucket of `key` (a user's id, an address, ...).
    pub fn bucket_of(&self, key: &str) -> String {
        format!("{}:{key}", self.bucket)
    }

    /// Counts one request of `key`'s bucket: 429 (with `Retry-After`) once more than `max`
    /// were counted in the window; a refused request is not counted.
    pub fn hit(&self, db: &Db, key: &str, now: i64) -> Result<(), ApiError> {
        rate_limits::hit(db, &self.bucket_of(key), self.max, self.window_secs, now)
    }

    /// The limit as the document states it (`x-rate-limit`).
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "limit": self.max,
            "windowSeconds": self.window_secs,
            "per": self.per,
            "counts": match self.counts {
                Counts::Requests => "requests",
                Counts::Failures => "failures",
            },
        })
    }
}
