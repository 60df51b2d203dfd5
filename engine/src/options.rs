//! The engine's options and the values its callers hold: the ttl and timer bounds, ownership,
//! per-segment options, the cancel token shared with a host or worker, and a settled outcome.

use std::cell::RefCell;
use std::rc::Rc;

use fencesim_store::{JournalEntry, Lease, RunId, RunMeta, RunStatus};
use serde_json::Value;

use fencesim_store::TIMER_MS_MAX;

use crate::defects::EngineDefects;
use crate::error::{EngineError, EngineResult};

/// Busy retries of one store call before the busy error is the call's answer.
pub const BUSY_RETRIES: u32 = 8;

/// The renew cadence for a ttl: `floor(ttl / 3)`, at least 1 ms (contracts 3.2).
pub fn renew_cadence(ttl_ms: u32) -> u32 {
    (ttl_ms / 3).max(1)
}

/// Check a ttl or timer option: an integer in `1..=2147483647` ms.
pub fn validate_timer(what: &str, ms: u32) -> EngineResult<()> {
    if (1..=TIMER_MS_MAX).contains(&ms) {
        Ok(())
    } else {
        Err(EngineError::Config(format!("{what} must be an integer in 1..={TIMER_MS_MAX} ms, got {ms}")))
    }
}

/// Whether a segment acquires its own lease when the caller supplies none (contracts 3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ownership {
    #[default]
    Auto,
    None,
}

#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Owner prefix; each auto-owned segment acquires as `<owner>:<n>`.
    pub owner: String,
    pub ownership: Ownership,
    /// Renew cadence under auto ownership; default `floor(ttl / 3)`. Must be below the ttl.
    pub renew_every_ms: Option<u32>,
    /// How long one paid model call takes, in the env's time.
    pub call_ms: u32,
    /// How long one tool execution takes.
    pub tool_ms: u32,
    pub defects: EngineDefects,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            owner: "engine".into(),
            ownership: Ownership::Auto,
            renew_every_ms: None,
            call_ms: 20,
            tool_ms: 5,
            defects: EngineDefects::NONE,
        }
    }
}

/// Cancels a segment from outside (a host, a worker whose renew failed). Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Rc<RefCell<Option<String>>>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// Request cancellation; the first reason wins.
    pub fn cancel(&self, reason: impl Into<String>) {
        let mut slot = self.0.borrow_mut();
        if slot.is_none() {
            *slot = Some(reason.into());
        }
    }

    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.borrow().is_some()
    }
}

/// Per-segment options.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// A caller-supplied lease: the engine never acquires, renews or releases it.
    pub lease: Option<Lease>,
    pub cancel: Option<CancelToken>,
    /// Genesis token of a fresh run; minted deterministically when absent.
    pub genesis: Option<String>,
    pub name: Option<String>,
    /// Meta and journal the caller read under the supplied `lease`, after acquiring it (a
    /// worker's candidacy check): the segment starts from them instead of reading again. Ignored
    /// without a supplied lease, where the engine must own before it reads (contracts 3.7).
    pub snapshot: Option<(Option<RunMeta>, Vec<JournalEntry>)>,
}

/// A durably settled segment.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub run: RunId,
    pub status: RunStatus,
    pub value: Value,
    /// This segment's number (segments before + 1).
    pub segment: u32,
    /// Entries this segment appended.
    pub appended: u32,
}
