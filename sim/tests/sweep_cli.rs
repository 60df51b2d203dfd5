//! `fencesim sweep` end to end: a clean sweep exits 0 with its summary line, a planted defect
//! exits 1 with one repro command per failing seed, and a sweep of no seeds is refused.

mod cli;

use cli::{assert_exit, fencesim, stdout};

const SWEEP: [&str; 7] = ["sweep", "--scenario", "mid-call-takeover", "--seeds", "4", "--jobs", "2"];

#[test]
fn a_clean_sweep_passes_with_a_summary() {
    let out = fencesim(&SWEEP);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("mid-call-takeover: 4 seeds (1..=4) on memdb with 2 job(s): 4 passed, 0 failed in "),
        "{text}"
    );
}

#[test]
fn a_planted_defect_fails_with_a_repro_per_failing_seed() {
    let out = fencesim(&[&SWEEP[..], &["--defect", "non-atomic-fence"]].concat());
    assert_exit(&out, 1);
    let text = stdout(&out);
    let failing: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL seed ")).collect();
    let repros: Vec<&str> = text.lines().filter_map(|l| l.trim().strip_prefix("repro: ")).collect();
    assert!(!failing.is_empty(), "{text}");
    assert_eq!(failing.len(), repros.len(), "{text}");
    for (fail, repro) in failing.iter().zip(&repros) {
        let seed = fail["FAIL seed ".len()..].split(':').next().unwrap();
        assert_eq!(
            *repro,
            format!("fencesim run --scenario mid-call-takeover --seed {seed} --defect non-atomic-fence --trace")
        );
    }
    let summary = text.lines().last().unwrap_or_default();
    assert!(summary.contains(&format!("{} passed, {} failed", 4 - failing.len(), failing.len())), "{summary}");
}

#[test]
fn no_seeds_is_refused() {
    let out = fencesim(&["sweep", "--scenario", "swarm", "--seeds", "0"]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--seeds must be at least 1"), "{err}");
    assert!(out.stdout.is_empty());
}
