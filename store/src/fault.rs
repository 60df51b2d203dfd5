//! Fault points: named places inside a store call where the reference project's bugs lived, and
//! the places between the statements of every write. A synchronous hook installed on a store is
//! called at each, inside the call's transaction when it has one. The conformance kit and the
//! simulator use it to attempt a takeover from another connection between the fence check and the
//! mutation (the "shim" of the reference RFC); the simulator also answers [`FaultAction::Crash`]
//! there, cutting the call as a process death would: the store returns at once, rolling back
//! what its open transaction wrote (what an earlier statement committed stays). With no hook
//! installed a fault point costs one borrow and a branch.
//!
//! A hook must not call back into the store it is installed on.

use crate::error::Op;
use crate::types::RunId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultPoint {
    /// A fenced call passed its lease check and has not yet mutated.
    FenceChecked,
    /// `acquire` found no live lease and has not yet written the new one.
    AcquireChecked,
    /// A write statement of the call has run and the call has not returned: its transaction,
    /// when it has one, is not committed yet; a statement outside one has committed.
    Statement,
}

impl FaultPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultPoint::FenceChecked => "fence-checked",
            FaultPoint::AcquireChecked => "acquire-checked",
            FaultPoint::Statement => "statement",
        }
    }
}

/// What a hook tells the store to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Go on with the call.
    Resume,
    /// The calling process died here: return at once, committing nothing more (a storage error
    /// nobody reads: the caller is dead, and the simulator silences it). A store that cannot stop
    /// mid-call (an adapter in another process) goes on and its answer is discarded, which is
    /// what a remote store does when its client dies.
    Crash,
}

/// Where a fault point fired.
#[derive(Clone, Copy, Debug)]
pub struct FaultSite<'a> {
    pub point: FaultPoint,
    pub op: Op,
    /// The run whose lease row the call reads.
    pub run: &'a RunId,
}

pub type FaultHook = Box<dyn FnMut(&FaultSite<'_>) -> FaultAction + Send>;
