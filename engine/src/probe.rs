//! Sometimes-probes: the engine's, the worker's and the operator's repair branches, each named, so a harness can count
//! which of them its worlds reached (FoundationDB's code probes, Antithesis's "sometimes"
//! assertions). A checker judges only what runs: a branch no world reaches is one nothing judges.
//! The engine reports each through [`crate::Env::probe`]; a real process ignores them, the
//! simulator counts them per world and `fencesim sweep` and `fencesim mutants` list the ones
//! never reached.

use std::fmt;

/// One branch of the engine, the worker or the operator's repair, by the name reports print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Probe(&'static str);

impl Probe {
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A segment refuses a run bound to another workflow (contracts 3.7).
pub const BINDING_REFUSED: Probe = Probe("segment-binding-refused");
/// A journal with a terminal settle stops at a step it left unfinished (3.6).
pub const SETTLED_JOURNAL_FINAL: Probe = Probe("segment-settled-journal-final");
/// A finished dispatch replays from the journal, paying nothing.
pub const STEP_REPLAYED: Probe = Probe("segment-step-replayed");
/// A dangling dispatch is redispatched against its running seq.
pub const DISPATCH_RESUMED: Probe = Probe("segment-dispatch-resumed");
/// A dangling dispatch resumes from a checkpoint that decoded.
pub const CHECKPOINT_RESUMED: Probe = Probe("segment-checkpoint-resumed");
/// A dangling dispatch's checkpoint blob did not decode: it starts over.
pub const CHECKPOINT_UNDECODABLE: Probe = Probe("segment-checkpoint-undecodable");
/// Reading a dangling dispatch's checkpoint failed.
pub const CHECKPOINT_READ_FAILED: Probe = Probe("segment-checkpoint-read-failed");
/// A step that was never dispatched (or whose terminal was not final) is dispatched fresh.
pub const DISPATCH_FRESH: Probe = Probe("segment-dispatch-fresh");
/// A dispatch ends `ok` with its scripted answer.
pub const DISPATCH_OK: Probe = Probe("segment-dispatch-ok");
/// A dispatch ends `limit` (its turns or tools ran out).
pub const DISPATCH_LIMIT: Probe = Probe("segment-dispatch-limit");
/// A dispatch is abandoned on a cancel.
pub const DISPATCH_CANCELLED: Probe = Probe("segment-dispatch-cancelled");
/// A suspension step parks the run.
pub const STEP_PARKED: Probe = Probe("segment-step-parked");
/// A body write was refused for the lease: ownership lost, the segment cancels.
pub const BODY_LEASE_LOST: Probe = Probe("segment-body-lease-lost");
/// A body write failed in the store: the run fails.
pub const BODY_STORE_FAILED: Probe = Probe("segment-body-store-failed");
/// A worker skips a listed run: stopping.
pub const SKIP_STOPPING: Probe = Probe("worker-skip-stopping");
/// A worker skips a listed run: another owner's live lease.
pub const SKIP_LEASE_HELD: Probe = Probe("worker-skip-lease-held");
/// A worker skips a listed run: the store stayed busy through the acquire's retries.
pub const SKIP_BUSY: Probe = Probe("worker-skip-busy");
/// A worker skips a listed run: the acquire failed otherwise.
pub const SKIP_ACQUIRE_FAILED: Probe = Probe("worker-skip-acquire-failed");
/// A worker skips a listed run: its read under the lease failed.
pub const SKIP_READ_FAILED: Probe = Probe("worker-skip-read-failed");
/// A worker skips a listed run: it or the engine drives it already.
pub const SKIP_ACTIVE: Probe = Probe("worker-skip-active");
/// A worker skips a listed run: poisoned for its genesis.
pub const SKIP_POISONED: Probe = Probe("worker-skip-poisoned");
/// A worker skips a listed run: terminal once read (settled since it was listed).
pub const SKIP_SETTLED: Probe = Probe("worker-skip-settled");
/// A worker skips a listed run: deleted since it was listed.
pub const SKIP_GONE: Probe = Probe("worker-skip-gone");
/// A worker skips a listed run: suspended and unchanged since it parked.
pub const SKIP_SUSPENDED_UNCHANGED: Probe = Probe("worker-skip-suspended-unchanged");
/// Retention leaves a run the policy no longer selects once leased.
pub const SKIP_KEPT: Probe = Probe("worker-skip-kept");
/// A worker poisons a run bound to a workflow it does not know.
pub const POISONED: Probe = Probe("worker-poisoned");
/// A worker's renew loop lost a driven run's lease.
pub const LEASE_LOST: Probe = Probe("worker-lease-lost");
/// A driven segment left its run suspended.
pub const DRIVEN_SUSPENDED: Probe = Probe("worker-driven-suspended");
/// Retention deleted a run.
pub const RETENTION_DELETED: Probe = Probe("worker-retention-deleted");
/// A retention cascade failed part-way.
pub const RETENTION_FAILED: Probe = Probe("worker-retention-failed");

/// The operator's repair ([`crate::audit::lease_and_reconcile`]) met a live holder: skipped.
pub const REPAIR_LIVE_HOLDER: Probe = Probe("repair-live-holder");
/// The repair's acquire failed otherwise (busy through its retries, a storage error): skipped.
pub const REPAIR_ACQUIRE_FAILED: Probe = Probe("repair-acquire-failed");
/// The re-audit under the repair's lease could not read the run's meta or journal.
pub const REPAIR_READ_FAILED: Probe = Probe("repair-read-failed");
/// The re-audit under the lease names no repair any more (the run moved on since its audit, or
/// lost its meta row, which is never fabricated): nothing written.
pub const REPAIR_NOTHING_TO_DO: Probe = Probe("repair-nothing-to-do");
/// The repair's meta write failed (refused for the lease, or a storage error).
pub const REPAIR_WRITE_FAILED: Probe = Probe("repair-write-failed");
/// The repair wrote the meta the journal derives (meta-behind or stranded).
pub const REPAIR_MADE: Probe = Probe("repair-made");

/// Every probe, in the order reports list them.
pub const ALL: [Probe; 36] = [
    BINDING_REFUSED,
    SETTLED_JOURNAL_FINAL,
    STEP_REPLAYED,
    DISPATCH_RESUMED,
    CHECKPOINT_RESUMED,
    CHECKPOINT_UNDECODABLE,
    CHECKPOINT_READ_FAILED,
    DISPATCH_FRESH,
    DISPATCH_OK,
    DISPATCH_LIMIT,
    DISPATCH_CANCELLED,
    STEP_PARKED,
    BODY_LEASE_LOST,
    BODY_STORE_FAILED,
    SKIP_STOPPING,
    SKIP_LEASE_HELD,
    SKIP_BUSY,
    SKIP_ACQUIRE_FAILED,
    SKIP_READ_FAILED,
    SKIP_ACTIVE,
    SKIP_POISONED,
    SKIP_SETTLED,
    SKIP_GONE,
    SKIP_SUSPENDED_UNCHANGED,
    SKIP_KEPT,
    POISONED,
    LEASE_LOST,
    DRIVEN_SUSPENDED,
    RETENTION_DELETED,
    RETENTION_FAILED,
    REPAIR_LIVE_HOLDER,
    REPAIR_ACQUIRE_FAILED,
    REPAIR_READ_FAILED,
    REPAIR_NOTHING_TO_DO,
    REPAIR_WRITE_FAILED,
    REPAIR_MADE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_is_listed_once() {
        let names: std::collections::BTreeSet<&str> = ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), ALL.len());
    }
}
