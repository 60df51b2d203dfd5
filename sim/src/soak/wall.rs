//! The soak's real time, in one place: the soak runs outside any simulated world, so it reads the
//! wall clock, the system-wide monotonic clock (comparable across processes, which orders the
//! writers' calls) and sleeps for real. Each function is a marked exception to `sim/clippy.toml`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::time::{ClockId, clock_gettime};

/// Milliseconds since the Unix epoch.
#[allow(clippy::disallowed_methods, reason = "the soak runs in real time")]
pub fn unix_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// CLOCK_MONOTONIC in nanoseconds: one system-wide timeline every process of the soak shares.
pub fn mono_ns() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(t) => {
            let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
            let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
            secs.saturating_mul(1_000_000_000).saturating_add(nanos)
        }
        Err(_) => 0,
    }
}

#[allow(clippy::disallowed_methods, reason = "the soak runs in real time")]
pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Wall time elapsed since it was started.
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    #[allow(clippy::disallowed_methods, reason = "the soak runs in real time")]
    pub fn start() -> Self {
        Self(Instant::now())
    }

    pub fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
