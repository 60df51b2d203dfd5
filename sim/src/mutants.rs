//! The kill matrix: proof, every run, that the harness catches each planted defect. A defect is
//! hunted in the scenarios that target it, then in the swarm, seed after seed, until a world's
//! oracle reports a violation or the seed budget is spent. Two engine defects no fenced world can
//! reach are hunted by their probes (see [`crate::probes`]); the boot race needs real OS
//! processes and is run by the CLI. The same seeds with no defect must stay clean.

use fencesim_engine::EngineDefect;
use fencesim_store::StoreDefect;
use serde::Serialize;

use crate::catalogue::{self, Defect};
use crate::probes;
use crate::report;
use crate::stores::DbKind;
use crate::world::{self, WorldConfig, WorldError};

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
}

pub fn detector(defect: Defect) -> Detector {
    match defect {
        Defect::Store(StoreDefect::NoBootRetry) => Detector::BootRace,
        Defect::Engine(EngineDefect::SecondLiveSegment) => Detector::Probe("second-segment"),
        Defect::Engine(EngineDefect::SkipCacheByLength) => Detector::Probe("recreated-generation"),
        _ => Detector::Worlds,
    }
}

/// Run a probe with the defect planted; the broken promises it saw.
pub fn probe(name: &str, defect: Defect) -> Vec<String> {
    let (engine, _) = Defect::split(&[defect]);
    match name {
        "second-segment" => probes::second_segment(engine),
        "recreated-generation" => probes::recreated_generation(engine),
        _ => vec![format!("no probe named {name}")],
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
        let scenario = catalogue::scenario(name).map_err(|e| harness(e.to_string()))?;
        if scenario.targets.iter().any(|t| t == defect.name()) {
            grounds.push(name.to_owned());
        }
    }
    grounds.push("swarm".to_owned());
    grounds.dedup();
    Ok(grounds)
}

fn harness(message: String) -> WorldError {
    WorldError { scenario: "-".into(), seed: 0, message }
}

/// Hunt a world-detected defect over seeds `1..=seeds` of its grounds, in seed-major order.
pub fn hunt(defect: Defect, seeds: u64, db: DbKind) -> Result<Hunt, WorldError> {
    let grounds = hunting_grounds(defect)?;
    let (engine_defects, store_defects) = Defect::split(&[defect]);
    let mut tries = 0;
    for seed in 1..=seeds {
        for name in &grounds {
            let scenario = catalogue::scenario(name).map_err(|e| harness(e.to_string()))?;
            tries += 1;
            let cfg = WorldConfig { scenario, seed, db, store_defects, engine_defects, keep_db: None };
            let outcome = world::run(&cfg)?;
            if let Some(first) = outcome.violations.first() {
                let catch = Catch {
                    scenario: name.clone(),
                    seed: Some(seed),
                    checker: first.checker.to_owned(),
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
