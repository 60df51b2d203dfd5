//! Planted engine defects: the engine-side bugs of the reference history (contracts section 6),
//! switchable at run time so the harness can prove it catches each. They only take effect when
//! the crate is built with the `defects` feature; otherwise [`EngineDefects::has`] is `false`.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EngineDefect {
    /// D1: meta writes do not carry the segment lease.
    UnthreadedMetaLease,
    /// D2: checkpoint saves do not carry the segment lease.
    UnthreadedCheckpointLease,
    /// D4: the worker's retention deletes without passing its brief lease.
    RetentionWithoutLease,
    /// D9: a fresh run under auto ownership acquires no lease.
    FreshRunUnleased,
    /// D10: the engine does not refuse a second live segment of one run.
    SecondLiveSegment,
    /// Settle order reversed: the terminal meta is written before the `run_settle` append.
    MetaBeforeSettle,
    /// D12a: a non-fencing failure of the settle append is swallowed and meta written anyway.
    SettleMetaOnFailedAppend,
    /// D12b: a superseded settle append is swallowed and the segment resolves green.
    SupersededGreen,
    /// D14: in-flight dispatches are not drained before the settle, and the journal is not sealed.
    StragglersAfterSettle,
    /// D18: the worker's suspended-skip cache is keyed by journal length alone.
    SkipCacheByLength,
    /// Contracts 3.7: resume reads journal and meta before acquiring the lease.
    ReadBeforeOwn,
    /// Dispatch identity (3.5): a resume redispatches a dangling call under a new running entry.
    RedispatchNewEntry,
    /// Checkpoints (3.5): a resume redispatches a dangling call from turn one, ignoring its checkpoint.
    CheckpointIgnored,
    /// Silent replay (3.6): every segment appends a `run_settle`, a replay of a settled run too.
    ResettleOnReplay,
    /// E2: a failed renew is logged and ignored; the segment keeps working.
    RenewFailureIgnored,
    /// Settle (3.6): a segment that settles cleanly leaves its meta `running`.
    TerminalMetaSkipped,
    /// E10 and E11 broken (blind set 2026-12-04, `05-prior-finds-first-dispatch.patch`): a
    /// step's prior dispatch is looked up as its *first* running entry, not its latest, so a
    /// step dispatched more than once is resumed or replayed from its old dispatch.
    PriorFindsFirstDispatch,
    /// E6 and 3.6.4 broken (blind set 2026-12-04, `06-settle-skipped-on-unsettled-replay.patch`):
    /// a segment that appended nothing appends no `run_settle` over a non-empty journal that has
    /// none, so its terminal meta lands with no settle behind it.
    SettleSkippedOnReplay,
    /// E13 broken (blind set 2026-12-04, `07-call-paid-after-stall-without-cancel-check.patch`):
    /// a call turn does not look at its cancellation between its fault point and the payment,
    /// so a stall there that outlives the lease still pays the call.
    CallPaidAfterLostLease,
    /// E8 broken (blind set 2026-12-04, `08-suspended-at-counts-unwritten-settle.patch`): a
    /// `suspended` projection's `suspended_at` is the journal's length plus one, counted before
    /// the settle whether or not a `run_settle` is then appended, so the worker's skip cache
    /// misjudges a parked run.
    SuspendedAtCountsSettle,
    /// E20 and 3.8 broken (blind set 2026-12-04, `09-retention-deletes-parked-runs.patch`):
    /// retention selects every run that is not `running`, so a `suspended` run waiting for its
    /// approval is deleted under a lease.
    RetentionDeletesParked,
    /// L10 and E8 broken (blind set 2026-12-04, `10-candidacy-checks-listed-status.patch`): the
    /// worker's candidacy re-check under the lease looks at the listed row's status, not at the
    /// meta it just read, so a run settled between the listing and the acquire is booted again.
    CandidacyByListedStatus,
    /// R3 and R4 broken (blind set 2026-12-04, `11-audit-counts-settled-dangling.patch`): the
    /// operator's audit of a settled run counts the dangling dispatches before the settle too,
    /// so a finished run with an old dangling dispatch is called stranded and reopened. Only
    /// the operator of a world carries it (`audit::audit_runs_planted`).
    AuditSettledDangling,
    /// E16 broken (blind set 2026-12-04, `12-reconcile-drops-extra-fields.patch`): the operator's
    /// repair rebuilds the meta from its name, tags, genesis and segments and drops the rest of
    /// it (`extra`, the workflow binding among them), so no worker can drive the repaired run.
    ReconcileDropsExtra,
}

impl EngineDefect {
    pub const ALL: [EngineDefect; 24] = [
        EngineDefect::UnthreadedMetaLease,
        EngineDefect::UnthreadedCheckpointLease,
        EngineDefect::RetentionWithoutLease,
        EngineDefect::FreshRunUnleased,
        EngineDefect::SecondLiveSegment,
        EngineDefect::MetaBeforeSettle,
        EngineDefect::SettleMetaOnFailedAppend,
        EngineDefect::SupersededGreen,
        EngineDefect::StragglersAfterSettle,
        EngineDefect::SkipCacheByLength,
        EngineDefect::ReadBeforeOwn,
        EngineDefect::RedispatchNewEntry,
        EngineDefect::CheckpointIgnored,
        EngineDefect::ResettleOnReplay,
        EngineDefect::RenewFailureIgnored,
        EngineDefect::TerminalMetaSkipped,
        EngineDefect::PriorFindsFirstDispatch,
        EngineDefect::SettleSkippedOnReplay,
        EngineDefect::CallPaidAfterLostLease,
        EngineDefect::SuspendedAtCountsSettle,
        EngineDefect::RetentionDeletesParked,
        EngineDefect::CandidacyByListedStatus,
        EngineDefect::AuditSettledDangling,
        EngineDefect::ReconcileDropsExtra,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineDefect::UnthreadedMetaLease => "unthreaded-meta-lease",
            EngineDefect::UnthreadedCheckpointLease => "unthreaded-checkpoint-lease",
            EngineDefect::RetentionWithoutLease => "retention-without-lease",
            EngineDefect::FreshRunUnleased => "fresh-run-unleased",
            EngineDefect::SecondLiveSegment => "second-live-segment",
            EngineDefect::MetaBeforeSettle => "meta-before-settle",
            EngineDefect::SettleMetaOnFailedAppend => "settle-meta-on-failed-append",
            EngineDefect::SupersededGreen => "superseded-green",
            EngineDefect::StragglersAfterSettle => "stragglers-after-settle",
            EngineDefect::SkipCacheByLength => "skip-cache-by-length",
            EngineDefect::ReadBeforeOwn => "read-before-own",
            EngineDefect::RedispatchNewEntry => "redispatch-new-entry",
            EngineDefect::CheckpointIgnored => "checkpoint-ignored",
            EngineDefect::ResettleOnReplay => "resettle-on-replay",
            EngineDefect::RenewFailureIgnored => "renew-failure-ignored",
            EngineDefect::TerminalMetaSkipped => "terminal-meta-skipped",
            EngineDefect::PriorFindsFirstDispatch => "prior-finds-first-dispatch",
            EngineDefect::SettleSkippedOnReplay => "settle-skipped-on-replay",
            EngineDefect::CallPaidAfterLostLease => "call-paid-after-lost-lease",
            EngineDefect::SuspendedAtCountsSettle => "suspended-at-counts-settle",
            EngineDefect::RetentionDeletesParked => "retention-deletes-parked",
            EngineDefect::CandidacyByListedStatus => "candidacy-by-listed-status",
            EngineDefect::AuditSettledDangling => "audit-settled-dangling",
            EngineDefect::ReconcileDropsExtra => "reconcile-drops-extra",
        }
    }

    /// The bug in the reference history this defect plants back.
    pub fn story(self) -> &'static str {
        match self {
            EngineDefect::UnthreadedMetaLease => "D1: stale terminal put_meta strands the run",
            EngineDefect::UnthreadedCheckpointLease => "D2: stale checkpoint save regresses a later boot",
            EngineDefect::RetentionWithoutLease => "D4: retention deletes a live run",
            EngineDefect::FreshRunUnleased => "D9: fresh runs held no lease",
            EngineDefect::SecondLiveSegment => "D10: two segments of one run in one process",
            EngineDefect::MetaBeforeSettle => "E6: meta projection written before the journal settle",
            EngineDefect::SettleMetaOnFailedAppend => "D12a: settlement not acknowledged",
            EngineDefect::SupersededGreen => "D12b: superseded segment resolves green",
            EngineDefect::StragglersAfterSettle => "D14: post-settle straggler appends",
            EngineDefect::SkipCacheByLength => "D18: generation confusion after delete/recreate",
            EngineDefect::ReadBeforeOwn => "3.7: resume reads before it owns",
            EngineDefect::RedispatchNewEntry => "3.5: a dangling dispatch reopened under a new running entry",
            EngineDefect::CheckpointIgnored => "3.5: a redispatch repays turns its checkpoint covers",
            EngineDefect::ResettleOnReplay => "3.6: a replay of a settled run appends another run_settle",
            EngineDefect::RenewFailureIgnored => "E2: a failed renew does not stop the segment",
            EngineDefect::TerminalMetaSkipped => {
                "3.6: a clean settle leaves meta running (the operator's repair hides it)"
            }
            EngineDefect::PriorFindsFirstDispatch => {
                "E10 (blind 05): a step's prior dispatch is its first running entry"
            }
            EngineDefect::SettleSkippedOnReplay => {
                "3.6.4 (blind 06): a replay of an unsettled journal appends no run_settle"
            }
            EngineDefect::CallPaidAfterLostLease => "E13 (blind 07): a call stalled past its lease is still paid",
            EngineDefect::SuspendedAtCountsSettle => "E8 (blind 08): suspended_at counts a settle not yet written",
            EngineDefect::RetentionDeletesParked => "E20 (blind 09): retention deletes suspended runs",
            EngineDefect::CandidacyByListedStatus => "L10 (blind 10): candidacy re-checked on the stale listed row",
            EngineDefect::AuditSettledDangling => {
                "R3 (blind 11): the audit counts dangling dispatches before the settle"
            }
            EngineDefect::ReconcileDropsExtra => "E16 (blind 12): a repair drops the meta's extra fields",
        }
    }

    pub fn parse(name: &str) -> Option<EngineDefect> {
        EngineDefect::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for EngineDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fencesim_store::Defect for EngineDefect {
    const COMPILED_IN: bool = cfg!(feature = "defects");

    fn bit(self) -> u32 {
        self as u32
    }
}

/// The engine's planted defects; empty by default.
pub type EngineDefects = fencesim_store::DefectSet<EngineDefect>;
