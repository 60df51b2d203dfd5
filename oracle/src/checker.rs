//! The name of every invariant any judge of fencesim reports: the oracle's checkers over a
//! history, and the store soak's own checks over its processes and file. A finding carries one;
//! reports, plans (`expect`), the kill matrix and shrinking name it by [`Checker::name`], and a
//! name read back from a file parses into it or is refused.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The one list of checker names: the oracle's checkers (each also has a descriptor in
/// [`crate::DESCRIPTORS`], which orders them and states their invariant), then the real-process
/// judges' checks with whose they are and their invariants. It makes the [`Checker`] enum (in this
/// order, which is also its `Ord`), [`Checker::name`], [`Checker::JUDGES`] and the judges'
/// invariants.
macro_rules! checkers {
    (
        oracle { $($oracle:ident = $oracle_name:literal,)* }
        judges { $($judge:ident = $judge_name:literal ($owner:literal): $judge_invariant:literal,)* }
    ) => {
        /// An invariant, by the name reports print.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Checker {
            $(#[doc = concat!("`", $oracle_name, "`")] $oracle,)*
            $(#[doc = concat!("`", $judge_name, "` (", $owner, ")")] $judge,)*
        }

        impl Checker {
            /// The oracle's checkers in the order `checkers!` names them, which is also their
            /// `Ord`: held equal to [`Checker::ORACLE`] when this crate compiles (below), so a name
            /// with no descriptor, or out of the descriptors' order, does not build.
            const NAMED_ORACLE: [Checker; [$($oracle_name),*].len()] = [$(Checker::$oracle),*];

            /// The real-process judges' own checks over their processes and files, beside the
            /// oracle's: the store soak's, the engine soak's audit of its repaired copy, and the
            /// kill points'.
            pub const JUDGES: [Checker; [$($judge_name),*].len()] = [$(Checker::$judge),*];

            /// Its name in reports, plans and on the command line.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Checker::$oracle => $oracle_name,)*
                    $(Checker::$judge => $judge_name,)*
                }
            }

            /// A judge's invariant; `None` for an oracle checker (its descriptor has it).
            const fn judge_invariant(self) -> Option<&'static str> {
                match self {
                    $(Checker::$judge => Some($judge_invariant),)*
                    _ => None,
                }
            }
        }
    };
}

checkers! {
    oracle {
        NoStaleAcceptance = "no-stale-acceptance",
        EpochsIncreasing = "epochs-increasing",
        OneLiveLease = "one-live-lease",
        SerialHistory = "serial-history",
        JournalSeqOrder = "journal-seq-order",
        OneSettlePerSegment = "one-settle-per-segment",
        MetaNotAhead = "meta-not-ahead",
        NoCheckpointRegression = "no-checkpoint-regression",
        RepayBound = "repay-bound",
        Liveness = "liveness",
        HonestOutcome = "honest-outcome",
        DispatchIdentity = "dispatch-identity",
        SilentReplay = "silent-replay",
        RenewLoss = "renew-loss",
        JustifiedRepair = "justified-repair",
        HealthyHolder = "healthy-holder",
        ReferenceModel = "reference-model",
        ObservablesMonotonic = "observables-monotonic",
        CancelAsked = "cancel-asked",
        FailedWriteEnds = "failed-write-ends",
        DeleteFinished = "delete-finished",
        WorkerCandidacy = "worker-candidacy",
        SeqContiguous = "seq-contiguous",
        TypedRejections = "typed-rejections",
        LinearizableReads = "linearizable-reads",
    }
    judges {
        CleanBoot = "clean-boot" ("the store soak's judge"):
            "every writer opens the store at the concurrent boot of all writers (4.5, B2)",
        TypedRefusals = "typed-refusals" ("the store soak's judge"):
            "a soak writer meets only the refusals the writer protocol expects, and no writer dies of an error (5.3-5.5)",
        LogComplete = "log-complete" ("the store soak's judge"):
            "a logged call lacks its outcome only where the referee killed its writer, and no outcome is logged without its call (5.6)",
        Integrity = "integrity" ("the store soak's judge"):
            "SQLite's integrity_check passes on the stormed file (4.5)",
        WritersAccounted = "writers-accounted" ("the soaks' judges"):
            "every writer process ended as the referee expects: killed by it, or cleanly at the stop file (5.6), and the engine soak's client cleanly once it drove its runs",
        AuditConsistent = "audit-consistent" ("the engine soak's and the kill points' judges"):
            "the audit's table finds every run consistent after the operator's repair (the engine soak's file, on a copy) and after a kill point's resume (4.2, 4.3)",
        DocumentedCounts = "documented-counts" ("the kill points' judge"):
            "a kill point's calls and tools paid by the crashed child and by the resume, and its limit terminals, are the counts its table documents (5.13)",
        KillPointReached = "kill-point-reached" ("the kill points' judge"):
            "every kill point's child reaches its point and dies there: a point never reached tests nothing",
    }
}

// `checkers!` names exactly the oracle's checkers, in the descriptors' order (see `NAMED_ORACLE`):
// a name left behind by a removed checker, or one with no descriptor, fails the build.
const _: () = assert!(
    same_checkers(&Checker::NAMED_ORACLE, &crate::CHECKERS),
    "checkers! and DESCRIPTORS name the oracle's checkers apart (one more, one fewer, or another order)"
);

/// Whether `a` and `b` hold the same checkers in the same order (a `const fn`: the build uses it).
const fn same_checkers(a: &[Checker], b: &[Checker]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] as u8 != b[i] as u8 {
            return false;
        }
        i += 1;
    }
    true
}

impl Checker {
    /// The oracle's checkers, in the order [`crate::check`] runs and reports them (derived from
    /// [`crate::DESCRIPTORS`]).
    pub const ORACLE: [Checker; crate::DESCRIPTORS.len()] = crate::CHECKERS;

    /// The invariant it asserts, in one line: an oracle checker's from its descriptor
    /// ([`crate::DESCRIPTORS`]), a judge's from the list above.
    pub fn invariant(self) -> &'static str {
        if let Some(d) = crate::DESCRIPTORS.iter().find(|d| d.checker == self) {
            return d.invariant;
        }
        self.judge_invariant()
            .unwrap_or_else(|| unreachable!("{} is an oracle checker without a descriptor", self.name()))
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

    /// The build's check of `checkers!` against `DESCRIPTORS` can fail: a name left over, one
    /// missing, two swapped.
    #[test]
    fn the_names_are_held_to_the_descriptors() {
        let (named, described) = (Checker::NAMED_ORACLE, crate::CHECKERS);
        assert!(same_checkers(&named, &described));
        let mut leftover = named.to_vec();
        leftover.push(Checker::CleanBoot);
        assert!(!same_checkers(&leftover, &described));
        assert!(!same_checkers(&named[1..], &described));
        let mut swapped = named;
        swapped.swap(0, 1);
        assert!(!same_checkers(&swapped, &described));
    }

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
