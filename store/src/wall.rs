//! The one module of the store allowed to read the wall clock and sleep for real. Two callers
//! need it: the boot retry, whose bound is wall-clock time by contract (B2), and [`SystemClock`]
//! for real processes. Everything else takes time from an injected [`Clock`].
//!
//! [`SystemClock`]: crate::SystemClock
//! [`Clock`]: crate::Clock

#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// A wall-clock deadline.
pub struct Deadline(Instant);

impl Deadline {
    pub fn after_ms(ms: u64) -> Self {
        Self(Instant::now() + Duration::from_millis(ms))
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.0
    }
}
