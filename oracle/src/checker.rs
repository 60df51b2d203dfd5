//! The name of every invariant any judge of fencesim reports: the oracle's checkers over a
//! history, and the store soak's own checks over its processes and file. A finding carries one;
//! reports, plans (`expect`), the kill matrix and shrinking name it by [`Checker::name`], and a
//! name read back from a file parses into it or is refused.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
    /// `writers-accounted` (the soaks' judges)
    WritersAccounted,
    /// `audit-consistent` (the engine soak's and the kill points' judges)
    AuditConsistent,
    /// `documented-counts` (the kill points' judge)
    DocumentedCounts,
    /// `kill-point-reached` (the kill points' judge)
    KillPointReached,
}

impl Checker {
    /// The oracle's checkers, in the order [`crate::check`] runs and reports them (derived from
    /// [`crate::DESCRIPTORS`]).
    pub const ORACLE: [Checker; crate::DESCRIPTORS.len()] = crate::CHECKERS;

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

    /// The invariant it asserts, in one line: an oracle checker's from its descriptor
    /// ([`crate::DESCRIPTORS`]), a judge's from the table below.
    pub fn invariant(self) -> &'static str {
        if let Some(d) = crate::DESCRIPTORS.iter().find(|d| d.checker == self) {
            return d.invariant;
        }
        match self {
            Checker::CleanBoot => "every writer opens the store at the concurrent boot of all writers (4.5, B2)",
            Checker::TypedRefusals => {
                "a soak writer meets only the refusals the writer protocol expects, and no writer dies of an error (5.3-5.5)"
            }
            Checker::LogComplete => {
                "a logged call lacks its outcome only where the referee killed its writer, and no outcome is logged without its call (5.6)"
            }
            Checker::Integrity => "SQLite's integrity_check passes on the stormed file (4.5)",
            Checker::WritersAccounted => {
                "every writer process ended as the referee expects: killed by it, or cleanly at the stop file (5.6), and the engine soak's client cleanly once it drove its runs"
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
            oracle => unreachable!("{} is an oracle checker without a descriptor", oracle.name()),
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

/// A checker read back by its name (the real kill points' resume reports its findings so); an
/// unknown name is refused.
impl<'de> Deserialize<'de> for Checker {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Checker::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown checker '{name}'")))
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

    #[test]
    fn a_checker_reads_back_from_its_name_and_refuses_another() {
        for checker in Checker::all() {
            let text = serde_json::to_string(&checker).expect("a name");
            assert_eq!(serde_json::from_str::<Checker>(&text).expect("parses back"), checker);
        }
        let refused = serde_json::from_str::<Checker>("\"no-stale-accept\"").expect_err("a misspelt name");
        assert!(refused.to_string().contains("unknown checker 'no-stale-accept'"), "{refused}");
    }
}
