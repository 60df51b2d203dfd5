//! What the harness ships with: the built-in scenarios (the files of `scenarios/`, compiled in so
//! the binary works from any folder) and the planted defects of both crates under one name space.

use std::path::Path;

pub use crate::defect::{Defect, defect_names};
use crate::scenario::{Scenario, ScenarioError};

/// `(name, file text)` of every built-in scenario, sorted by name.
pub const SCENARIOS: [(&str, &str); 15] = [
    ("boot-storm", include_str!("../../scenarios/boot-storm.toml")),
    ("branches", include_str!("../../scenarios/branches.toml")),
    ("client-reattach", include_str!("../../scenarios/client-reattach.toml")),
    ("crash-between-journal-and-meta", include_str!("../../scenarios/crash-between-journal-and-meta.toml")),
    ("crash-inside-calls", include_str!("../../scenarios/crash-inside-calls.toml")),
    ("long-turns", include_str!("../../scenarios/long-turns.toml")),
    ("look-alikes", include_str!("../../scenarios/look-alikes.toml")),
    ("mid-call-takeover", include_str!("../../scenarios/mid-call-takeover.toml")),
    ("skewed-clocks", include_str!("../../scenarios/skewed-clocks.toml")),
    ("stale-checkpoint", include_str!("../../scenarios/stale-checkpoint.toml")),
    ("stale-retention", include_str!("../../scenarios/stale-retention.toml")),
    ("stale-settle", include_str!("../../scenarios/stale-settle.toml")),
    ("swarm", include_str!("../../scenarios/swarm.toml")),
    ("unrepaired", include_str!("../../scenarios/unrepaired.toml")),
    ("zombie-probes", include_str!("../../scenarios/zombie-probes.toml")),
];

/// A built-in scenario by name, or a scenario file by path (anything ending in `.toml`).
pub fn scenario(name_or_path: &str) -> Result<Scenario, ScenarioError> {
    if name_or_path.ends_with(".toml") {
        return Scenario::load(Path::new("."), name_or_path);
    }
    match SCENARIOS.iter().find(|(name, _)| *name == name_or_path) {
        Some((name, text)) => {
            let mut scenario = Scenario::parse(Path::new(&format!("scenarios/{name}.toml")), text)?;
            scenario.source = (*name).to_owned();
            Ok(scenario)
        }
        None => Err(ScenarioError {
            path: name_or_path.to_owned(),
            line: None,
            message: format!("unknown scenario (built-in: {}; or a path to a .toml file)", scenario_names()),
        }),
    }
}

pub fn scenario_names() -> String {
    SCENARIOS.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_scenario_parses_and_names_only_real_defects() {
        for (name, _) in SCENARIOS {
            let s = scenario(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.name, name);
            for target in &s.targets {
                assert!(Defect::parse(target).is_ok(), "{name} targets unknown defect {target}");
            }
        }
    }

    #[test]
    fn the_catalogue_lists_every_file_in_the_scenarios_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let on_disk = Scenario::load_all(&dir).expect("scenario files parse");
        let names: Vec<&str> = on_disk.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, SCENARIOS.map(|(n, _)| n).to_vec());
    }
}
