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
}

impl EngineDefect {
    pub const ALL: [EngineDefect; 16] = [
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
