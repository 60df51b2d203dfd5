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

/// Every `--db file` world removes its temporary folder when it ends, pass or fail: a sweep with
/// TMPDIR pointed at a fresh folder leaves it empty. Debug worlds on a file run at a few per
/// second, so the test runs 200 seeds (a release build was checked at 1,000; README "Fleets").
#[test]
fn a_file_sweep_leaves_nothing_in_the_temp_folder() {
    let tmp = tempfile::tempdir().unwrap();
    for (seeds, defect) in [("200", None), ("6", Some("non-atomic-fence"))] {
        let mut args =
            vec!["sweep", "--scenario", "mid-call-takeover", "--seeds", seeds, "--db", "file", "--jobs", "2"];
        args.extend(defect.iter().flat_map(|d| ["--defect", d]));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(&args)
            .env("TMPDIR", tmp.path())
            .output()
            .expect("run fencesim");
        assert_exit(&out, if defect.is_some() { 1 } else { 0 });
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "{seeds} seeds left {} entries behind: {left:?}", left.len());
    }
    // Told to keep them, it does.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["sweep", "--scenario", "mid-call-takeover", "--seeds", "2", "--db", "file"])
        .env("TMPDIR", tmp.path())
        .env("FENCESIM_KEEP_TEMP", "1")
        .output()
        .expect("run fencesim");
    assert_exit(&out, 0);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
}

#[test]
fn flags_asking_for_too_much_are_refused_with_one_line() {
    let cases: [(&[&str], &str); 5] = [
        (&["--seeds", "1000000001"], "--seeds 1000000001 is more than the limit"),
        (&["--start", "18446744073709551615", "--seeds", "2"], "overflows the largest seed"),
        (&["--jobs", "0"], "--jobs must be at least 1"),
        (&["--jobs", "100000"], "--jobs 100000 is more than the limit of 256"),
        (&["--seeds", "-1"], "unexpected argument '-1'"),
    ];
    for (flags, message) in cases {
        let out = fencesim(&[&["sweep", "--scenario", "swarm"][..], flags].concat());
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(message), "{flags:?}: {err}");
        assert!(out.stdout.is_empty(), "{flags:?}");
    }
}
