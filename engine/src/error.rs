//! Typed engine errors (contracts 1.5). Outcomes of a fenced world are variants a caller must
//! match: a lease held elsewhere, a superseded segment, a settlement that did not become durable.

use fencesim_store::{RunId, RunStatus, StoreError};

/// Which settle write failed (contracts 3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettleStage {
    RunSettle,
    Meta,
}

impl SettleStage {
    pub fn as_str(self) -> &'static str {
        match self {
            SettleStage::RunSettle => "run-settle",
            SettleStage::Meta => "meta",
        }
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The run's lease is held by another owner (at acquire), or the segment's lease was refused
    /// by its first durable write: nothing was written, nothing was paid.
    #[error("{0}")]
    LeaseHeld(StoreError),
    /// The segment's `run_settle` append bounced on its lease: a successor owns settlement. No
    /// meta was written; the outcome is not durable.
    #[error("superseded: run={run} status={status} was not settled, a successor owns the run ({cause})")]
    Superseded { run: RunId, status: RunStatus, cause: StoreError },
    /// A non-fencing failure of a settle write (contracts 3.6 step 5-6). Resume re-settles.
    #[error("settlement failed at {}: run={run} status={status}: {cause}", stage.as_str())]
    Settlement { run: RunId, status: RunStatus, stage: SettleStage, cause: StoreError },
    /// A second live segment of a run in one engine (E1, D10): refused before any store call.
    #[error("run {0} already has a live segment in this engine")]
    SegmentLive(RunId),
    /// Invalid options, a lease for another run, an unknown workflow, a fresh run over an
    /// existing one, or a store without what the engine needs.
    #[error("config: {0}")]
    Config(String),
    /// The run is bound to another workflow than the one given to resume it (contracts 3.7's
    /// binding refusal). Nothing was written; a worker poisons the run for this genesis.
    #[error("binding: {0}")]
    Binding(String),
    /// A store call failed outside the cases above.
    #[error("{0}")]
    Store(StoreError),
    /// A fault point crashed the process here. Nothing after it was written.
    #[error("crashed at a fault point")]
    Crashed,
}

impl EngineError {
    pub fn is_lease_held(&self) -> bool {
        matches!(self, EngineError::LeaseHeld(_))
    }
}

pub type EngineResult<T> = Result<T, EngineError>;

/// A lease rejection is [`EngineError::LeaseHeld`]; anything else is a store failure.
pub(crate) fn lease_or_store(e: StoreError) -> EngineError {
    if e.is_lease_held() { EngineError::LeaseHeld(e) } else { EngineError::Store(e) }
}
