//! Crashes inside and between store calls (scenario `crash-inside-calls`): a node cut inside a
//! write leaves its call `indeterminate` and nothing after it, in the store or in the history,
//! until it restarts under a new incarnation; and the worlds stay clean.

use fencesim_sim::catalogue;
use fencesim_sim::history::{CallOutcome, Disruption, Event};
use fencesim_sim::world::{self, WorldConfig};

#[test]
fn a_node_cut_inside_a_write_does_nothing_after_it() {
    let scenario = catalogue::scenario("crash-inside-calls").expect("built in");
    let (mut inside, mut after) = (0, 0);
    for seed in 1..=6 {
        let report = world::run(&WorldConfig::new(scenario.clone(), seed)).expect("runs");
        assert!(report.passed(), "seed {seed}: {:?}", report.violations);
        let rows = &report.rows;
        for (i, row) in rows.iter().enumerate() {
            let Event::Fault { kind: Disruption::Crash, detail, .. } = &row.event else { continue };
            let later = rows[i + 1..].iter().filter(|r| r.node == row.node);
            if detail.ends_with("at mid-call") {
                inside += 1;
                // The cut call is the dead incarnation's last row, recorded indeterminate.
                let rest: Vec<_> = later.collect();
                assert_eq!(rest.len(), 1, "seed {seed}: {} rows of {} after its cut", rest.len(), row.node);
                let Event::Call(call) = &rest[0].event else { panic!("seed {seed}: not the cut call") };
                assert_eq!(call.outcome, CallOutcome::Indeterminate, "seed {seed}");
            } else if detail.ends_with("at after-call") {
                after += 1;
                assert_eq!(later.count(), 0, "seed {seed}: {} wrote on after its cut", row.node);
            }
        }
    }
    assert!(inside > 0 && after > 0, "cuts inside {inside}, after {after}: both must be reached");
}
