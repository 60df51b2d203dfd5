//! What can go wrong with an adapter itself, as opposed to what its store answers: it would not
//! start, it died, it answered something that is not the protocol, or it did not answer in time.
//! Each is a harness error (exit 2): a broken adapter proves nothing about the store it wraps.
//! Every message is one line naming the adapter, the request and what happened, with the last
//! lines of the adapter's stderr.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The process could not be started.
    Start(String),
    /// The process ended, or closed its end of a pipe, before answering.
    Exited(String),
    /// A line that is not a JSON object of the protocol.
    Garbage { line: String, why: String },
    /// An answer to a request it was not asked (another id).
    Unasked { line: String },
    /// The handshake named a protocol version this build does not speak.
    Version { theirs: String },
    /// No answer within this many ms: the process was killed.
    Timeout(u32),
    /// An earlier failure left the adapter unusable.
    Broken(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Start(why) => write!(f, "did not start: {why}"),
            Failure::Exited(why) => write!(f, "exited mid-call: {why}"),
            Failure::Garbage { line, why } => write!(f, "answered garbage ({why}): {}", shorten(line)),
            Failure::Unasked { line } => write!(f, "answered a request it was not asked: {}", shorten(line)),
            Failure::Version { theirs } => {
                write!(f, "speaks protocol version {theirs}, this fencesim speaks {}", crate::wire::PROTOCOL_VERSION)
            }
            Failure::Timeout(ms) => write!(f, "did not answer within {ms} ms (killed; raise --adapter-timeout-ms)"),
            Failure::Broken(why) => write!(f, "is unusable after an earlier failure: {why}"),
        }
    }
}

/// An adapter failed the protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct AdapterError {
    /// The adapter's command, as given.
    pub adapter: String,
    /// The request it was answering (`hello`, `append`, ...).
    pub request: String,
    pub failure: Failure,
    /// The last lines of its stderr, joined with ` | ` (empty when it wrote none).
    pub stderr: String,
}

impl fmt::Display for AdapterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "adapter `{}` {} (request: {})", self.adapter, self.failure, self.request)?;
        if !self.stderr.is_empty() {
            write!(f, "; its stderr ends: {}", shorten(&self.stderr))?;
        }
        Ok(())
    }
}

/// A line quoted in an error, cut to a readable length, on one line.
fn shorten(text: &str) -> String {
    const MAX: usize = 200;
    let flat: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match flat.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &flat[..cut]),
        None => flat,
    }
}
