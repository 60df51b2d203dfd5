//! The `branches` scenario: its worlds reach the probes no other scenario takes (a foreign
//! workflow binding, a poisoned run, a corrupt checkpoint, a sweep over the client's own live
//! segment, the operator's repair decisions), and they stay clean.

use std::collections::BTreeSet;

use fencesim_sim::catalogue;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};

#[test]
fn a_few_branches_worlds_are_clean_and_reach_the_probes_no_other_scenario_reaches() {
    let scenario = catalogue::scenario("branches").expect("built in");
    let mut reached = BTreeSet::new();
    for seed in 1..=8 {
        let cfg = WorldConfig {
            scenario: scenario.clone(),
            seed,
            db: DbKind::Memdb,
            store_defects: Default::default(),
            engine_defects: Default::default(),
            keep_db: None,
            adapter: None,
        };
        let report = world::run(&cfg).expect("runs");
        assert!(report.passed(), "seed {seed}: {:?}", report.violations);
        reached.extend(report.probes.keys().map(|p| p.name()));
    }
    for probe in [
        "segment-binding-refused",
        "segment-checkpoint-undecodable",
        "worker-skip-active",
        "worker-skip-poisoned",
        "worker-poisoned",
        "repair-live-holder",
        "repair-made",
        "repair-nothing-to-do",
    ] {
        assert!(reached.contains(probe), "{probe} not reached on seeds 1..=8: {reached:?}");
    }
}
