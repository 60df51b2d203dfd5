//! What can go wrong with an adapter itself, as opposed to what its store answers: it would not
//! start, it died, it answered something that is not the protocol, or it did not answer (or read,
//! or exit) in time. Each is a harness error (exit 2): a broken adapter proves nothing about the
//! store it wraps. Every message is one line naming the adapter, the request and what happened,
//! with how the process ended where that is what happened, and the last lines of its stderr, read
//! after it ended.

use std::fmt;

use crate::child::Ended;

/// How an adapter that stopped serving ended, as fencesim saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It ended on its own (`waitpid`'s status).
    Ended(Ended),
    /// It was still running this many ms later: fencesim killed it (its process group).
    Killed { after_ms: u32 },
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Ended(ended) => write!(f, "it {ended}"),
            Ending::Killed { after_ms } => write!(f, "it had not exited {after_ms} ms later and was killed"),
        }
    }
}

/// What fencesim was waiting for when an adapter took too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// One whole answer line.
    Answer,
    /// It to read the request (its stdin pipe stayed full).
    Read,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The process could not be started.
    Start(String),
    /// It stopped serving before answering: it closed its stdout (`what`), or its stdin.
    Exited { what: String, ending: Ending },
    /// A line that is not one of the protocol's shapes (or not what the request answers).
    Garbage { line: String, why: String },
    /// An answer line longer than the protocol's maximum answer size.
    TooLong { max: usize },
    /// An answer to a request it was not asked (another id).
    Unasked { line: String },
    /// A second answer to a request it had answered (the one in the error's `request`).
    AnsweredTwice { id: u64, line: String },
    /// The handshake named a protocol version this build does not speak.
    Version { theirs: String },
    /// The handshake lacks a capability the command needs.
    Lacks { what: String, needed_by: &'static str },
    /// It did not answer, or read its request, within this many ms: its process group was killed.
    Timeout { ms: u32, waiting: Waiting },
    /// An earlier failure left the adapter unusable.
    Broken(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Start(why) => write!(f, "did not start: {why}"),
            Failure::Exited { what, ending } => write!(f, "exited mid-call: {what}; {ending}"),
            Failure::Garbage { line, why } => write!(f, "answered garbage ({why}): {}", shorten(line)),
            Failure::TooLong { max } => {
                write!(f, "answered a line over {max} bytes, the protocol's maximum answer size (killed)")
            }
            Failure::Unasked { line } => write!(f, "answered a request it was not asked: {}", shorten(line)),
            Failure::AnsweredTwice { id, line } => {
                write!(f, "answered request {id} a second time: {}", shorten(line))
            }
            Failure::Version { theirs } => {
                write!(f, "speaks protocol version {theirs}, this fencesim speaks {}", crate::wire::PROTOCOL_VERSION)
            }
            Failure::Lacks { what, needed_by } => write!(f, "declares no {what}, which {needed_by} needs"),
            Failure::Timeout { ms, waiting: Waiting::Answer } => {
                write!(f, "did not answer within {ms} ms (killed; raise --adapter-timeout-ms)")
            }
            Failure::Timeout { ms, waiting: Waiting::Read } => {
                write!(f, "did not read its request within {ms} ms (killed; raise --adapter-timeout-ms)")
            }
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
