//! Typed store errors (contracts 1.5), grouped by what the caller does next: a lease rejection
//! means "you are not (or no longer) the owner", an order violation means "your tail is stale",
//! busy means "nothing happened, back off and retry", config and storage are not retryable.

use std::fmt;

use crate::types::{Epoch, Lease, RunId, Seq};

/// The store call an error belongs to, named as the SPI method is (`put_blob`, not `blob_put`):
/// one name per operation across store, oracle, soak, coverage events and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Boot,
    /// Emptying a memdb for its next user ([`crate::sqlite::Spares::clear`]).
    Clear,
    Acquire,
    Renew,
    Release,
    Append,
    Load,
    PutMeta,
    GetMeta,
    ListRuns,
    Delete,
    PutBlob,
    GetBlob,
    ListBlobs,
    DeleteBlob,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Boot => "boot",
            Op::Clear => "clear",
            Op::Acquire => "acquire",
            Op::Renew => "renew",
            Op::Release => "release",
            Op::Append => "append",
            Op::Load => "load",
            Op::PutMeta => "put_meta",
            Op::GetMeta => "get_meta",
            Op::ListRuns => "list_runs",
            Op::Delete => "delete",
            Op::PutBlob => "put_blob",
            Op::GetBlob => "get_blob",
            Op::ListBlobs => "list_blobs",
            Op::DeleteBlob => "delete_blob",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a lease did not guard a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseRejection {
    /// `acquire` found a live lease: the current holder is named.
    HeldBy { owner: String, epoch: Epoch },
    /// The caller's lease is not the live holder: superseded, expired, released, or the run was
    /// deleted. `live` names the current live holder, if any.
    Stale { live: Option<(String, Epoch)> },
    /// The lease names another run than the call's target (W3, T4).
    RunMismatch { target: RunId },
}

/// A lease did not guard a call (`lease_held` in the reference). Nothing became visible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseHeld {
    pub op: Op,
    /// The caller's lease, or for `acquire` the requested run and owner with epoch 0.
    pub lease: Lease,
    pub rejection: LeaseRejection,
}

impl fmt::Display for LeaseHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Lease { run, owner, epoch } = &self.lease;
        match &self.rejection {
            LeaseRejection::HeldBy { owner: holder, epoch: held } => write!(
                f,
                "lease held: acquire rejected, a live lease exists run={run} owner={holder} epoch={held} requested_by={owner}"
            ),
            LeaseRejection::Stale { live } => {
                write!(
                    f,
                    "lease held: {} rejected, the lease is not the live holder and nothing became visible run={run} owner={owner} epoch={epoch}",
                    self.op
                )?;
                match live {
                    Some((o, e)) => write!(f, " live_owner={o} live_epoch={e}"),
                    None => write!(f, " live_owner=none"),
                }
            }
            LeaseRejection::RunMismatch { target } => write!(
                f,
                "lease held: {} rejected, the lease guards another run and nothing became visible run={target} lease_run={run} owner={owner} epoch={epoch}",
                self.op
            ),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// Expected in a fenced world: the caller is not (or no longer) the owner. Retryable only by
    /// acquiring again.
    #[error("{0}")]
    LeaseHeld(Box<LeaseHeld>),
    /// A5: the appended seq is not strictly above the run's stored tail. Nothing became visible.
    #[error("journal order violation: seq {seq} is not above the stored tail run={run} seq={seq} tail={}", tail.map_or("none".to_owned(), |t| t.to_string()))]
    JournalOrder { run: RunId, seq: Seq, tail: Option<Seq> },
    /// The caller handed the store a payload it cannot store faithfully (a field of `extra` that
    /// shadows a typed field). Nothing was written; not retryable.
    #[error("invalid payload: {op} rejected, {reason} run={run}")]
    InvalidPayload { op: Op, run: RunId, reason: String },
    /// SQLite's busy family: another connection holds a lock this call needed (at `BEGIN
    /// IMMEDIATE`, at `COMMIT`, or a read during recovery). Nothing was committed; back off and
    /// retry.
    #[error("store busy: {op} committed nothing, retry later{}", run.as_ref().map_or(String::new(), |r| format!(" run={r}")))]
    Busy { op: Op, run: Option<RunId> },
    /// Invalid options or paths, detected before anything was opened or touched; also a store
    /// that does not declare what `assert_fenced_writes` requires.
    #[error("config: {0}")]
    Config(String),
    /// The database could not be opened, read or written (not retryable as such).
    #[error("storage: {op}: {message}")]
    Storage { op: Op, message: String },
    /// A counter the fencing rests on (an epoch, a seq, a segment count) is at its limit or
    /// negative: incrementing it would wrap around and break fencing. Nothing was written.
    #[error("overflow: {op} refused, {what} cannot be incremented run={run}")]
    Overflow { op: Op, run: RunId, what: String },
}

impl StoreError {
    pub fn lease_held(op: Op, lease: Lease, rejection: LeaseRejection) -> Self {
        StoreError::LeaseHeld(Box::new(LeaseHeld { op, lease, rejection }))
    }

    pub fn storage(op: Op, message: impl Into<String>) -> Self {
        StoreError::Storage { op, message: message.into() }
    }

    pub fn is_lease_held(&self) -> bool {
        matches!(self, StoreError::LeaseHeld(_))
    }

    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Busy { .. })
    }

    pub fn is_journal_order(&self) -> bool {
        matches!(self, StoreError::JournalOrder { .. })
    }

    /// Every [`code`](Self::code), for readers that get a code back as text (the soak's logs).
    pub const CODES: &'static [&'static str] =
        &["lease_held", "journal_order_violation", "invalid_payload", "busy", "config", "storage", "overflow"];

    /// The reference's error code for this class; one of [`CODES`](Self::CODES).
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::LeaseHeld(_) => "lease_held",
            StoreError::JournalOrder { .. } => "journal_order_violation",
            StoreError::InvalidPayload { .. } => "invalid_payload",
            StoreError::Busy { .. } => "busy",
            StoreError::Config(_) => "config",
            StoreError::Storage { .. } => "storage",
            StoreError::Overflow { .. } => "overflow",
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// `CODES` lists every variant's code once (a new variant adds its code there: this test
    /// builds one of each, and the `code` match makes a missing arm a compile error).
    #[test]
    fn codes_lists_every_variants_code_once() {
        let run = RunId::new("r");
        let every = [
            StoreError::lease_held(
                Op::Append,
                Lease { run: run.clone(), owner: "o".into(), epoch: Epoch(1) },
                LeaseRejection::Stale { live: None },
            ),
            StoreError::JournalOrder { run: run.clone(), seq: Seq(1), tail: None },
            StoreError::InvalidPayload { op: Op::PutMeta, run: run.clone(), reason: "x".into() },
            StoreError::Busy { op: Op::Append, run: None },
            StoreError::Config("x".into()),
            StoreError::storage(Op::Load, "x"),
            StoreError::Overflow { op: Op::Acquire, run, what: "epoch".into() },
        ];
        let codes: Vec<&str> = every.iter().map(StoreError::code).collect();
        assert_eq!(codes, StoreError::CODES);
    }
}
