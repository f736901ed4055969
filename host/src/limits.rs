//! What one component instance may spend: linear memory (all its memories together), wall
//! time (a deadline enforced with epoch interruption), and a slot among the instances that
//! may run at once. Plus the parsers for the sizes and durations the CLI and config accept.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use wasmtime::{ResourceLimiter, Store, UpdateDeadline};

/// Default memory limit per instance (what Fermyon Wasm Functions grants).
pub const DEFAULT_INSTANCE_MEMORY: usize = 128 << 20;
/// Default deadline per request (Fermyon Wasm Functions: 30 s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of instances that may run at once. It stays below the pooling
/// allocator's capacity (`cache::MAX_INSTANCES`), leaving room for requests a component
/// makes to its own application and for a second server in the same process.
pub const DEFAULT_MAX_CONCURRENT_INSTANCES: usize = 256;
/// Elements one table may grow to (a component's function tables are a few thousand).
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The limits every instance of one server runs under.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Bytes of linear memory per instance, all its memories together.
    pub memory: usize,
    /// Wall time from instantiation until the handler has finished (its response body
    /// included).
    pub timeout: Duration,
}

/// Per-instance resource limiter: the sum of all linear memories stays within `limit`.
/// Memory created at instantiation counts too (wasmtime reports it as growth from 0).
#[derive(Debug, Clone)]
pub struct InstanceLimiter {
    limit: usize,
    used: usize,
}

impl InstanceLimiter {
    pub fn new(limit: usize) -> InstanceLimiter {
        InstanceLimiter { limit, used: 0 }
    }

    /// Bytes of linear memory the instance holds now.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.used
    }
}

impl Default for InstanceLimiter {
    fn default() -> Self {
        InstanceLimiter::new(DEFAULT_INSTANCE_MEMORY)
    }
}

impl ResourceLimiter for InstanceLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        match self.used.checked_add(growth) {
            Some(total) if total <= self.limit => {
                self.used = total;
                Ok(true)
            }
            // `memory.grow` answers -1 to the guest; a Rust guest then aborts (a trap).
            _ => Ok(false),
        }
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Arms the store's deadline: at every epoch tick (`cache::EPOCH_TICK`) the guest yields
/// to the async runtime, and once `deadline` has passed the next tick traps it with
/// `Trap::Interrupt`. Epoch checks are a load and a compare in compiled code, so a
/// deadline costs next to nothing (fuel metering would instrument every block).
pub fn arm_deadline<T: 'static>(store: &mut Store<T>, deadline: Instant) {
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store.set_epoch_deadline(1);
}

/// Whether a guest failure is the deadline's interrupt.
pub fn is_deadline_trap(e: &wasmtime::Error) -> bool {
    e.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt)
}

/// Whether an instantiation failed because the pooling allocator had no free slot.
pub fn is_pool_exhausted(e: &wasmtime::Error) -> bool {
    e.chain()
        .any(|c| c.is::<wasmtime::PoolConcurrencyLimitError>())
}

/// A duration as Spin's `--request-timeout` spells it, plus minutes and hours: a number
/// with an optional unit `ns`, `us` (or `μs`), `ms`, `s`, `m`, `h`; no unit means seconds.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .with_context(|| format!("invalid duration {text:?}: expected e.g. 30s, 500ms, 5m"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "μs" => value / 1e6,
        "ns" => value / 1e9,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => bail!("invalid duration {text:?}: unknown unit {other:?}"),
    };
    Duration::try_from_secs_f64(seconds).with_context(|| format!("invalid duration {text:?}"))
}

/// A byte size: an integer of bytes (as Spin's `--max-instance-memory` takes it), or with
/// a binary unit `KiB`, `MiB`, `GiB` (also `K`, `M`, `G`, `KB`, `MB`, `GB`, all powers of 1024).
pub fn parse_bytes(text: &str) -> Result<usize> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: usize = number
        .parse()
        .with_context(|| format!("invalid size {text:?}: expected e.g. 134217728 or 128MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => bail!("invalid size {text:?}: unknown unit {other:?}"),
    };
    value
        .checked_mul(1 << shift)
        .with_context(|| format!("size {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_counted_across_memories_and_growth() {
        let mut l = InstanceLimiter::new(10 << 20);
        assert!(l.memory_growing(0, 4 << 20, None).unwrap());
        assert!(l.memory_growing(0, 4 << 20, None).unwrap());
        assert_eq!(l.used(), 8 << 20);
        // A third memory or growing one past the total is refused, and nothing is counted.
        assert!(!l.memory_growing(0, 4 << 20, None).unwrap());
        assert!(!l.memory_growing(4 << 20, 7 << 20, None).unwrap());
        assert_eq!(l.used(), 8 << 20);
        assert!(l.memory_growing(4 << 20, 6 << 20, None).unwrap());
        assert_eq!(l.used(), 10 << 20);
        assert!(!l.memory_growing(usize::MAX - 1, usize::MAX, None).unwrap());
    }

    #[test]
    fn durations_follow_spin_and_add_minutes() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("10us").unwrap(), Duration::from_micros(10));
        for bad in ["", "s", "5 parsecs", "-1s", "1e9999"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_take_bytes_or_binary_units() {
        assert_eq!(parse_bytes("134217728").unwrap(), 128 << 20);
        assert_eq!(parse_bytes("128MiB").unwrap(), 128 << 20);
        assert_eq!(parse_bytes("64M").unwrap(), 64 << 20);
        assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("512 KiB").unwrap(), 512 << 10);
        for bad in ["", "MiB", "12 apples", "-5"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }
}
