//! The process toolkit of every real-process command: the children it starts, each dying with it
//! and killed and reaped when let go ([`child`]), temporary folders that outlive no process
//! ([`janitor`]) and termination signals turned into a clean exit ([`signals`]), and the calling
//! thread's CPU clock ([`thread_cpu`]) for the tests that bound a cost.

pub mod child;
pub mod janitor;
pub mod signals;

/// An error and every cause under it on one line, `outer: inner: innermost` (what `anyhow`'s
/// `{:#}` prints at the binary edge, for a child process that reports its own death).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        line.push_str(": ");
        line.push_str(&next.to_string());
        cause = next.source();
    }
    line
}

/// The CPU time the calling thread has used: what a test that bounds a cost measures, because a
/// loaded machine preempts a long run more than a short one and so skews wall-clock ratios.
///
/// # Panics
///
/// If the kernel has no per-thread CPU clock (Linux always has one).
pub fn thread_cpu() -> std::time::Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).expect("the thread's CPU clock");
    std::time::Duration::new(
        u64::try_from(t.tv_sec()).expect("non-negative seconds"),
        u32::try_from(t.tv_nsec()).expect("nanoseconds below a second"),
    )
}
