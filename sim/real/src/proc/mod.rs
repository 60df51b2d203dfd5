//! The process toolkit of every real-process command: the children it starts, each dying with it
//! and killed and reaped when let go ([`child`]), temporary folders that outlive no process
//! ([`janitor`]) and termination signals turned into a clean exit ([`signals`]).

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
