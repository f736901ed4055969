//! The guests' wall clock: the system clock moved forward by an offset that only the Rust
//! API ([`crate::Server::advance_clock`]) changes, so end-to-end tests can let hours pass
//! (token expiry, retry schedules, daily roll-ups) without waiting. Nothing a request can
//! reach moves it; the monotonic clock and the host's own timers are not affected.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wasmtime_wasi::HostWallClock;

/// Shared by every instance of an application; clones see the same offset.
#[derive(Clone, Default)]
pub struct GuestClock {
    offset_nanos: Arc<AtomicU64>,
}

impl GuestClock {
    /// Moves the guests' clock forward by `by`, for every later read.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.fetch_add(by, Ordering::SeqCst);
    }

    /// How far ahead of the system clock the guests' clock is.
    pub fn offset(&self) -> Duration {
        Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst))
    }
}

impl HostWallClock for GuestClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    /// Since the Unix epoch, as `wasi:clocks/wall-clock` reports it.
    fn now(&self) -> Duration {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        system + self.offset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_every_clone_forward() {
        let clock = GuestClock::default();
        let copy = clock.clone();
        let before = copy.now();
        clock.advance(Duration::from_secs(3600));
        clock.advance(Duration::from_secs(60));
        assert_eq!(copy.offset(), Duration::from_secs(3660));
        let after = copy.now();
        assert!(after >= before + Duration::from_secs(3660));
        assert!(after < before + Duration::from_secs(3670));
    }
}
