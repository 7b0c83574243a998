//! The clock idle tracking reads: zram's per-slot `ac_time` (CONFIG_ZRAM_TRACK_ENTRY_ACTIME,
//! `ktime_get_boottime()` in `zram_accessed`) at a resolution of seconds, which is all
//! `idle SECONDS` needs. Injected so that tests move time without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Seconds since some fixed start; never goes backwards.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Seconds now.
    fn now(&self) -> u64;
}

/// The monotonic clock, counted from when it was made.
#[derive(Debug)]
pub struct MonotonicClock(Instant);

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock(Instant::now())
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_secs()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// Move the clock forward by `secs`.
    pub fn advance(&self, secs: u64) {
        self.0.fetch_add(secs, Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}
