//! The name of every invariant any judge of fencesim reports: the oracle's checkers over a
//! history, and the store soak's own checks over its processes and file. A finding carries one;
//! reports, plans (`expect`), the kill matrix and shrinking name it by [`Checker::name`], and a
//! name read back from a file parses into it or is refused.

use std::fmt;

use serde::{Serialize, Serializer};

/// An invariant, by the name reports print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Checker {
    /// `no-stale-acceptance`
    NoStaleAcceptance,
    /// `epochs-increasing`
    EpochsIncreasing,
    /// `one-live-lease`
    OneLiveLease,
    /// `serial-history`
    SerialHistory,
    /// `journal-seq-order`
    JournalSeqOrder,
    /// `one-settle-per-segment`
    OneSettlePerSegment,
    /// `meta-not-ahead`
    MetaNotAhead,
    /// `no-checkpoint-regression`
    NoCheckpointRegression,
    /// `repay-bound`
    RepayBound,
    /// `liveness`
    Liveness,
    /// `honest-outcome`
    HonestOutcome,
    /// `dispatch-identity`
    DispatchIdentity,
    /// `silent-replay`
    SilentReplay,
    /// `renew-loss`
    RenewLoss,
    /// `justified-repair`
    JustifiedRepair,
    /// `healthy-holder`
    HealthyHolder,
    /// `reference-model`
    ReferenceModel,
    /// `observables-monotonic`
    ObservablesMonotonic,
    /// `cancel-asked`
    CancelAsked,
    /// `failed-write-ends`
    FailedWriteEnds,
    /// `delete-finished`
    DeleteFinished,
    /// `worker-candidacy`
    WorkerCandidacy,
    /// `seq-contiguous`
    SeqContiguous,
    /// `typed-rejections`
    TypedRejections,
    /// `linearizable-reads`
    LinearizableReads,
    /// `clean-boot` (the store soak's judge)
    CleanBoot,
    /// `typed-refusals` (the store soak's judge)
    TypedRefusals,
    /// `log-complete` (the store soak's judge)
    LogComplete,
    /// `integrity` (the store soak's judge)
    Integrity,
    /// `writers-accounted` (the store soak's judge)
    WritersAccounted,
    /// `audit-consistent` (the engine soak's and the kill points' judges)
    AuditConsistent,
    /// `documented-counts` (the kill points' judge)
    DocumentedCounts,
    /// `kill-point-reached` (the kill points' judge)
    KillPointReached,
}

impl Checker {
    /// The oracle's checkers, in the order [`crate::check`] runs and reports them.
    pub const ORACLE: [Checker; 25] = [
        Checker::NoStaleAcceptance,
        Checker::EpochsIncreasing,
        Checker::OneLiveLease,
        Checker::SerialHistory,
        Checker::JournalSeqOrder,
        Checker::OneSettlePerSegment,
        Checker::MetaNotAhead,
        Checker::NoCheckpointRegression,
        Checker::RepayBound,
        Checker::Liveness,
        Checker::HonestOutcome,
        Checker::DispatchIdentity,
        Checker::SilentReplay,
        Checker::RenewLoss,
        Checker::JustifiedRepair,
        Checker::HealthyHolder,
        Checker::ReferenceModel,
        Checker::ObservablesMonotonic,
        Checker::CancelAsked,
        Checker::FailedWriteEnds,
        Checker::DeleteFinished,
        Checker::WorkerCandidacy,
        Checker::SeqContiguous,
        Checker::TypedRejections,
        Checker::LinearizableReads,
    ];

    /// The real-process judges' own checks over their processes and files, beside the oracle's:
    /// the store soak's, the engine soak's audit of its repaired copy, and the kill points'.
    pub const JUDGES: [Checker; 8] = [
        Checker::CleanBoot,
        Checker::TypedRefusals,
        Checker::LogComplete,
        Checker::Integrity,
        Checker::WritersAccounted,
        Checker::AuditConsistent,
        Checker::DocumentedCounts,
        Checker::KillPointReached,
    ];

    /// Its name in reports, plans and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Checker::NoStaleAcceptance => "no-stale-acceptance",
            Checker::EpochsIncreasing => "epochs-increasing",
            Checker::OneLiveLease => "one-live-lease",
            Checker::SerialHistory => "serial-history",
            Checker::JournalSeqOrder => "journal-seq-order",
            Checker::OneSettlePerSegment => "one-settle-per-segment",
            Checker::MetaNotAhead => "meta-not-ahead",
            Checker::NoCheckpointRegression => "no-checkpoint-regression",
            Checker::RepayBound => "repay-bound",
            Checker::Liveness => "liveness",
            Checker::HonestOutcome => "honest-outcome",
            Checker::DispatchIdentity => "dispatch-identity",
            Checker::SilentReplay => "silent-replay",
            Checker::RenewLoss => "renew-loss",
            Checker::JustifiedRepair => "justified-repair",
            Checker::HealthyHolder => "healthy-holder",
            Checker::ReferenceModel => "reference-model",
            Checker::ObservablesMonotonic => "observables-monotonic",
            Checker::CancelAsked => "cancel-asked",
            Checker::FailedWriteEnds => "failed-write-ends",
            Checker::DeleteFinished => "delete-finished",
            Checker::WorkerCandidacy => "worker-candidacy",
            Checker::TypedRejections => "typed-rejections",
            Checker::LinearizableReads => "linearizable-reads",
            Checker::CleanBoot => "clean-boot",
            Checker::TypedRefusals => "typed-refusals",
            Checker::LogComplete => "log-complete",
            Checker::Integrity => "integrity",
            Checker::SeqContiguous => "seq-contiguous",
            Checker::WritersAccounted => "writers-accounted",
            Checker::AuditConsistent => "audit-consistent",
            Checker::DocumentedCounts => "documented-counts",
            Checker::KillPointReached => "kill-point-reached",
        }
    }

    /// The invariant it asserts, in one line.
    #[allow(clippy::too_many_lines, reason = "one arm per checker: the table reads best whole")]
    pub const fn invariant(self) -> &'static str {
        match self {
            Checker::NoStaleAcceptance => {
                "every accepted mutation, renew and release carried the live holder's lease of its target run (2.7.1)"
            }
            Checker::EpochsIncreasing => {
                "per run, granted epochs are unique and strictly increasing across delete/recreate, one node per (run, epoch) (2.7.2)"
            }
            Checker::OneLiveLease => "no acquire is granted while another lease row of the run is live (2.7.3)",
            Checker::SerialHistory => {
                "journal, meta and blobs equal the accepted mutations replayed in (epoch, row) order; epochs never decrease along the journal (2.7.5-6, 5.9)"
            }
            Checker::JournalSeqOrder => {
                "stored seqs strictly increase and every accepted append was above the journal's tail (2.7.4)"
            }
            Checker::OneSettlePerSegment => "a tenure appends at most one run_settle and nothing after it (3.6, D14)",
            Checker::MetaNotAhead => {
                "a terminal meta is only ever written and kept over an empty journal or one whose last run_settle has its status (3.6, D1)"
            }
            Checker::NoCheckpointRegression => {
                "a checkpoint ref is never overwritten by an older tenure, and holds its last accepted put (3.5, D2)"
            }
            Checker::RepayBound => {
                "a dispatch's turn or tool is paid once per tenure, never after its terminal, never again once an accepted checkpoint covers it, and at most 1 + (unreleased tenures that paid into that dispatch) times (3.5, E11, 5.13)"
            }
            Checker::Liveness => {
                "every planned run reached the store, and after quiescence every run is settled (terminal meta backed by a final run_settle) or waits on an open suspension"
            }
            Checker::HonestOutcome => {
                "a settled outcome a node reports is backed by its own accepted run_settle, by the journal it read, or over an empty journal by its own accepted meta write (3.6, D12b)"
            }
            Checker::DispatchIdentity => {
                "a dispatch is its running entry: at most one dispatch of a run is open at a time, so a re-dispatch reuses its dangling entry, and a terminal closes an open running entry of its own step (E10)"
            }
            Checker::SilentReplay => {
                "a journal that records a terminal run_settle is final: a tenure that finds its run settled appends nothing, and no run_settle repeats the last with nothing new (E12)"
            }
            Checker::RenewLoss => {
                "after a failed renew of its own lease a holder pays no call turn and runs no tool under that epoch (E13, 9.2)"
            }
            Checker::JustifiedRepair => {
                "the operator repairs only runs that a crash, stall, takeover, failed segment, unreleased tenure or offline resolution touched (E14)"
            }
            Checker::HealthyHolder => {
                "a holder nothing disturbed (no fault on its node or run, no busy or failing store call of its own) never lets its lease lapse: a fenced call of its tenure is never refused for its own expired row (E2, E8)"
            }
            Checker::ReferenceModel => {
                "each run's journal walks its workflow's script in order (a step opens only after the steps before it finished, ok terminals carry the scripted answer, ok settles only a finished script) and no dispatch pays past what its step can reach (1.3, 3.4-3.6)"
            }
            Checker::ObservablesMonotonic => {
                "within a generation, segments never decrease, genesis and workflow binding never change, and a journal's final run_settle is never overturned: no other settle status, no other terminal meta, no non-terminal meta but a new segment's boot (1.2, 3.1, 3.6, 4.3)"
            }
            Checker::CancelAsked => {
                "a run settles cancelled only when its client cancelled it, a renew of the settling tenure's lease failed, or the settling node's worker was asked to stop (1.2, 3.2, 3.8)"
            }
            Checker::FailedWriteEnds => {
                "once a durable write of a tenure fails with a storage error, its node pays no more calls or tools under that lease and appends no ok settle under it (E15)"
            }
            Checker::DeleteFinished => {
                "a workload run is deleted under a lease only while its latest meta or its journal's last settle is terminal (3.8, E20)"
            }
            Checker::WorkerCandidacy => {
                "a worker's or the sweeper's segment boot (an accepted running meta) never follows a terminal meta of the same generation: a sweep re-checks candidacy under its lease (E8)"
            }
            Checker::TypedRejections => {
                "a rejected acquire is held-by; a fenced call is never rejected for the live holder's lease, and otherwise run-mismatch for another run's lease, else stale; the fence is checked before the seq guard (2.7.7)"
            }
            Checker::LinearizableReads => {
                "every journal load and meta read saw the writes recorded before it, each whole: some choice of taking each cut call as done or not explains every read (2.1, S6)"
            }
            Checker::CleanBoot => "every writer opens the store at the concurrent boot of all writers (4.5, B2)",
            Checker::TypedRefusals => {
                "a soak writer meets only the refusals the writer protocol expects, and no writer dies of an error (5.3-5.5)"
            }
            Checker::LogComplete => {
                "a logged call lacks its outcome only where the referee killed its writer, and no outcome is logged without its call (5.6)"
            }
            Checker::Integrity => "SQLite's integrity_check passes on the stormed file (4.5)",
            Checker::SeqContiguous => {
                "every stored journal numbers its entries 1..n, a gap only where an append of that seq failed or was refused (2.7.4, J5, 9.8)"
            }
            Checker::WritersAccounted => {
                "every writer process ended as the referee expects: killed by it, or cleanly at the stop file (5.6)"
            }
            Checker::AuditConsistent => {
                "the audit's table finds every run consistent after the operator's repair (the engine soak's file, on a copy) and after a kill point's resume (4.2, 4.3)"
            }
            Checker::DocumentedCounts => {
                "a kill point's calls and tools paid by the crashed child and by the resume, and its limit terminals, are the counts its table documents (5.13)"
            }
            Checker::KillPointReached => {
                "every kill point's child reaches its point and dies there: a point never reached tests nothing"
            }
        }
    }

    /// Every checker: the oracle's, then the soak's.
    pub fn all() -> impl Iterator<Item = Checker> {
        Self::ORACLE.into_iter().chain(Self::JUDGES)
    }

    /// The checker of a name, as [`Checker::name`] spells it.
    pub fn parse(name: &str) -> Option<Checker> {
        Self::all().find(|c| c.name() == name)
    }
}

impl fmt::Display for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// Reports carry a checker by its name.
impl Serialize for Checker {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_checker_has_one_name_that_parses_back() {
        let names: std::collections::BTreeSet<&str> = Checker::all().map(Checker::name).collect();
        assert_eq!(names.len(), Checker::ORACLE.len() + Checker::JUDGES.len(), "names are unique");
        for checker in Checker::all() {
            assert_eq!(Checker::parse(checker.name()), Some(checker));
            assert!(!checker.invariant().is_empty());
        }
        assert_eq!(Checker::parse("no-stale-accept"), None, "a misspelt name is refused");
    }
}
