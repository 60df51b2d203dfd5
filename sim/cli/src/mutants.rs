//! The kill matrix: proof, every run, that the harness catches each planted defect. A defect is
//! hunted in the scenarios that target it, then in the swarm, seed after seed, until a world's
//! oracle reports a violation or the seed budget is spent. Three engine defects the worlds cannot
//! reach (or, for the operator's audit, reach too rarely) are hunted by their probes (see
//! [`fencesim_sim::probes`]); the boot race needs real OS processes and is run by the CLI, as is
//! the kit check that hunts a store defect no world's run ids can reach. The same seeds with no
//! defect must stay clean.

use fencesim_engine::EngineDefect;
use fencesim_store::StoreDefect;
use serde::Serialize;

use crate::report;
use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::probes;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, HarnessError, WorldConfig, WorldError};

/// How a defect is hunted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detector {
    /// Simulated worlds judged by the oracle.
    Worlds,
    /// A targeted probe of the engine (a fenced world cannot reach the defect).
    Probe(&'static str),
    /// Real OS processes booting one fresh file (conformance B2): the simulator's worlds run on
    /// one thread and cannot race SQLite's bootstrap.
    BootRace,
    /// One check of the conformance kit, by id, on a fresh SQLite store with the defect planted:
    /// the defect needs a store state no world makes (see [`detector`]).
    Kit(&'static str),
}

/// `list-blobs-prefix` needs one run id to be a prefix of another's, which no world's run ids
/// (`r01`, `r02`, ...) ever are, so only the kit's look-alike runs (T1) reach it.
pub fn detector(defect: Defect) -> Detector {
    match defect {
        Defect::Store(StoreDefect::NoBootRetry) => Detector::BootRace,
        Defect::Store(StoreDefect::ListBlobsPrefix) => Detector::Kit("T1"),
        Defect::Engine(EngineDefect::SecondLiveSegment) => Detector::Probe("second-segment"),
        Defect::Engine(EngineDefect::SkipCacheByLength) => Detector::Probe("recreated-generation"),
        Defect::Engine(EngineDefect::AuditSettledDangling) => Detector::Probe("settled-dangling"),
        _ => Detector::Worlds,
    }
}

/// The checker each defect is aimed at: the one its targeted hunt exists to fail (for a world
/// defect, the checker its shipped regression plan under `seeds/regressions/` expects). A catch
/// by another checker is shown as such, so a weakened checker cannot hide behind another.
pub fn aimed_at(defect: Defect) -> &'static str {
    use EngineDefect as E;
    use StoreDefect as S;
    match defect {
        Defect::Store(S::NoBootRetry) => "conformance B2",
        Defect::Store(S::ListBlobsPrefix) => "conformance T1",
        Defect::Engine(E::SecondLiveSegment | E::SkipCacheByLength | E::AuditSettledDangling) => "probe",
        Defect::Store(S::EpochResetOnDelete | S::AdminDeleteDropsTombstone) => "epochs-increasing",
        Defect::Store(S::NoSeqGuard) => "journal-seq-order",
        Defect::Engine(E::MetaBeforeSettle | E::SettleMetaOnFailedAppend) => "meta-not-ahead",
        Defect::Engine(E::ReadBeforeOwn) => "observables-monotonic",
        Defect::Engine(E::CheckpointIgnored) => "repay-bound",
        Defect::Engine(E::RedispatchNewEntry) => "dispatch-identity",
        Defect::Engine(E::ResettleOnReplay) => "silent-replay",
        Defect::Engine(E::RenewFailureIgnored) => "renew-loss",
        Defect::Engine(E::TerminalMetaSkipped) => "justified-repair",
        Defect::Engine(E::StragglersAfterSettle) => "one-settle-per-segment",
        Defect::Engine(E::SupersededGreen) => "honest-outcome",
        Defect::Store(S::DeleteInPieces) => "linearizable-reads",
        Defect::Store(S::AcquireReclaimsOwnEpoch) => "epochs-increasing",
        Defect::Store(S::RenewExtendsOldExpiry | S::PurgeKeepsLeaseRow) => "no-stale-acceptance",
        Defect::Engine(E::PriorFindsFirstDispatch) => "dispatch-identity",
        Defect::Engine(E::SettleSkippedOnReplay) => "meta-not-ahead",
        Defect::Engine(E::CallPaidAfterLostLease) => "renew-loss",
        Defect::Engine(E::SuspendedAtCountsSettle | E::ReconcileDropsExtra) => "liveness",
        Defect::Engine(E::RetentionDeletesParked) => "delete-finished",
        Defect::Engine(E::CandidacyByListedStatus) => "worker-candidacy",
        Defect::Store(
            S::NonAtomicFence
            | S::NoRunMatch
            | S::UnfencedMeta
            | S::UnfencedBlobs
            | S::UnfencedDelete
            | S::StaleReleaseAccepted
            | S::ExpiredLeaseLive
            | S::EpochOnlyFence
            | S::BlobDeleteNoRunMatch
            | S::ExpiryInstantLive,
        )
        | Defect::Engine(
            E::UnthreadedMetaLease | E::UnthreadedCheckpointLease | E::RetentionWithoutLease | E::FreshRunUnleased,
        ) => "no-stale-acceptance",
    }
}

impl Catch {
    /// The checker column: the checker, or "caught by X, aimed at Y" when it is not the one the
    /// defect is aimed at.
    pub fn shown(&self) -> String {
        if self.checker == self.aimed_at {
            self.checker.clone()
        } else {
            format!("caught by {}, aimed at {}", self.checker, self.aimed_at)
        }
    }
}

/// A probe that could not run: an unknown name or a failed set-up. A harness error, never a catch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeFailure {
    #[error("no probe named '{0}'")]
    Unknown(String),
    #[error(transparent)]
    SetUp(#[from] probes::ProbeError),
}

/// Run a probe with the defect planted; the broken promises it saw.
pub fn probe(name: &str, defect: Defect) -> Result<Vec<String>, ProbeFailure> {
    let (engine, _) = Defect::split(&[defect]);
    match name {
        "second-segment" => Ok(probes::second_segment(engine)?),
        "recreated-generation" => Ok(probes::recreated_generation(engine)?),
        "settled-dangling" => Ok(probes::settled_dangling(engine)?),
        _ => Err(ProbeFailure::Unknown(name.to_owned())),
    }
}

/// The first world that caught a defect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Catch {
    /// The scenario (or, for a defect worlds cannot reach, the detector) that caught it.
    pub scenario: String,
    /// The seed of the catching world; none for a probe or the boot race.
    pub seed: Option<u64>,
    pub checker: String,
    /// The checker the defect is aimed at ([`aimed_at`]); differs from `checker` when another
    /// checker caught it first.
    pub aimed_at: String,
    pub explanation: String,
    pub repro: String,
}

/// One row of the matrix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hunt {
    pub defect: &'static str,
    pub story: &'static str,
    /// Where it was hunted: scenario names, or the probe.
    pub hunted_in: Vec<String>,
    /// Worlds (or probe runs) until the first catch, or all that were spent.
    pub tries: u64,
    pub catch: Option<Catch>,
}

/// The scenarios a defect is hunted in: those that target it, then the swarm.
pub fn hunting_grounds(defect: Defect) -> Result<Vec<String>, WorldError> {
    let mut grounds: Vec<String> = Vec::new();
    for (name, _) in catalogue::SCENARIOS {
        let scenario = catalogue::scenario(name).map_err(|e| harness(e.into()))?;
        if scenario.targets.iter().any(|t| t == defect.name()) {
            grounds.push(name.to_owned());
        }
    }
    if !grounds.iter().any(|g| g == "swarm") {
        grounds.push("swarm".to_owned());
    }
    Ok(grounds)
}

fn harness(error: HarnessError) -> WorldError {
    WorldError { scenario: "-".into(), seed: 0, error: error.into() }
}

/// Hunt a world-detected defect over seeds `1..=seeds` of its grounds, in seed-major order.
pub fn hunt(defect: Defect, seeds: u64, db: DbKind) -> Result<Hunt, WorldError> {
    let grounds = hunting_grounds(defect)?;
    let (engine_defects, store_defects) = Defect::split(&[defect]);
    let mut tries = 0;
    for seed in 1..=seeds {
        for name in &grounds {
            let scenario = catalogue::scenario(name).map_err(|e| harness(e.into()))?;
            tries += 1;
            let cfg = WorldConfig { scenario, seed, db, store_defects, engine_defects, keep_db: None, adapter: None };
            let outcome = world::run(&cfg)?;
            if let Some(first) = outcome.violations.first() {
                let catch = Catch {
                    scenario: name.clone(),
                    seed: Some(seed),
                    checker: first.checker.name().to_owned(),
                    aimed_at: aimed_at(defect).to_owned(),
                    explanation: first.explanation.clone(),
                    repro: report::repro(&outcome, &[defect]),
                };
                return Ok(Hunt {
                    defect: defect.name(),
                    story: defect.story(),
                    hunted_in: grounds,
                    tries,
                    catch: Some(catch),
                });
            }
        }
    }
    Ok(Hunt { defect: defect.name(), story: defect.story(), hunted_in: grounds, tries, catch: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_defect_is_aimed_at_a_checker_and_a_different_catch_says_so() {
        let checkers = fencesim_oracle::CHECKERS;
        for defect in Defect::all() {
            let aimed = aimed_at(defect);
            let known = checkers.iter().any(|c| c.name() == aimed)
                || aimed == "probe"
                || aimed
                    .strip_prefix("conformance ")
                    .is_some_and(|id| fencesim_store::conformance::checks().iter().any(|c| c.id == id));
            assert!(known, "{defect} is aimed at an unknown checker {aimed}");
        }
        let catch = |checker: &str| Catch {
            scenario: "zombie-probes".into(),
            seed: Some(1),
            checker: checker.into(),
            aimed_at: aimed_at(Defect::Store(StoreDefect::NoSeqGuard)).into(),
            explanation: String::new(),
            repro: String::new(),
        };
        assert_eq!(catch("journal-seq-order").shown(), "journal-seq-order");
        assert_eq!(catch("no-stale-acceptance").shown(), "caught by no-stale-acceptance, aimed at journal-seq-order");
    }

    #[test]
    fn an_unknown_probe_is_a_harness_error_not_a_catch() {
        let defect = Defect::Engine(EngineDefect::SecondLiveSegment);
        assert_eq!(probe("no-such-probe", defect), Err(ProbeFailure::Unknown("no-such-probe".into())));
    }

    /// The shipped regression plans agree with the table.
    #[test]
    fn regression_plans_expect_the_checker_their_defect_is_aimed_at() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../seeds/regressions");
        for entry in std::fs::read_dir(dir).expect("seeds/regressions") {
            let plan = fencesim_sim::scenario::planfile::PlanFile::load(&entry.expect("entry").path()).expect("a plan");
            let (Some(expect), [defect]) = (plan.expect.as_deref(), plan.defects.as_slice()) else { continue };
            assert_eq!(aimed_at(*defect), expect, "{defect}");
        }
    }
}
