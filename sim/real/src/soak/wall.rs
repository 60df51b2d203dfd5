//! Real time for what runs outside any simulated world (the soak, the CLI's sweeps), in one
//! place: the wall clock and real sleeps (the store's [`real_time`](fencesim_store::real_time)),
//! the system-wide monotonic clock (comparable across processes, which orders the soak writers'
//! calls) and a stopwatch. The one module of the real-process crate that reads clocks.

use std::time::Instant;

pub use fencesim_store::real_time::{sleep_ms, unix_ms};
use nix::time::{ClockId, clock_gettime};

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

/// Wall time elapsed since it was started.
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    #[allow(clippy::disallowed_methods, reason = "it runs in real time")]
    pub fn start() -> Self {
        Self(Instant::now())
    }

    pub fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn seconds(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}
