//! The `branches` scenario: its worlds reach the probes no other scenario takes (a foreign
//! workflow binding, a poisoned run, a corrupt checkpoint, a sweep over the client's own live
//! segment, the operator's repair decisions), and they stay clean.

use std::collections::BTreeSet;

use fencesim_sim::catalogue;
use fencesim_sim::world::{self, WorldConfig};

#[test]
fn a_few_branches_worlds_are_clean_and_reach_the_probes_no_other_scenario_reaches() {
    let scenario = catalogue::scenario("branches").expect("built in");
    let mut reached = BTreeSet::new();
    for seed in 1..=8 {
        let report = world::run(&WorldConfig::new(scenario.clone(), seed)).expect("runs");
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

/// The CI fleet requires every probe: each is in the `aims` of a built-in scenario (so `sweep` and
/// `merge --require-coverage` are inconclusive when a change stops it being reached), and the
/// README's table names it.
#[test]
fn every_probe_is_required_by_a_scenario_and_listed_in_the_readme() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README.md");
    let aimed: BTreeSet<String> =
        catalogue::SCENARIOS.iter().flat_map(|(name, _)| catalogue::scenario(name).expect("built in").aims).collect();
    for probe in fencesim_engine::probe::ALL {
        let name = probe.name();
        assert!(aimed.contains(&format!("probe-{name}")), "no scenario aims at probe-{name}");
        let short = name.split_once('-').map_or(name, |(_, rest)| rest);
        assert!(readme.contains(&format!("`{short}`")), "README.md's probe table lacks {name}");
    }
}
