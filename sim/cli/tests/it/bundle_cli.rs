//! Failure bundles end to end: `run --bundle` writes every file for a failing world (and nothing
//! for a passing one), `repro.sh` runs the world again and exits with its status, an existing
//! bundle is refused, no temporary folder is left behind, and `sweep --bundle` writes one per
//! failing seed.

use std::path::Path;

use crate::cli;

use cli::{assert_exit, fencesim, stderr, stdout};

const FILES: [&str; 6] = ["repro.sh", "trace.txt", "report.json", "plan.toml", "store.db", "timeline.html"];

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn run_bundle_writes_everything_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bundles");
    let root_s = root.to_str().unwrap();
    let world = ["run", "--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"];
    let out = fencesim(&[&world[..], &["--bundle", root_s]].concat());
    assert_exit(&out, 1);
    assert_eq!(entries(&root), ["mid-call-takeover-1"], "one bundle, no temporary folder");
    let bundle = root.join("mid-call-takeover-1");
    let mut files = entries(&bundle);
    files.sort();
    let mut want: Vec<String> = FILES.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(files, want);
    let trace = std::fs::read_to_string(bundle.join("trace.txt")).unwrap();
    assert!(trace.contains("VIOLATION no-stale-acceptance"), "{trace}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["verdict"], "fail");
    assert!(std::fs::read_to_string(bundle.join("plan.toml")).unwrap().contains("expect = \"no-stale-acceptance\""));
    assert!(std::fs::read(bundle.join("store.db")).unwrap().starts_with(b"SQLite format 3\0"));
    assert!(std::fs::read_to_string(bundle.join("timeline.html")).unwrap().contains("no-stale-acceptance"));

    // repro.sh runs the world again from the bundle and exits with its status.
    let repro = std::process::Command::new("sh")
        .arg(bundle.join("repro.sh"))
        .env("FENCESIM", env!("CARGO_BIN_EXE_fencesim"))
        .output()
        .unwrap();
    assert_eq!(repro.status.code(), Some(1), "{}", String::from_utf8_lossy(&repro.stderr));
    assert_eq!(
        String::from_utf8_lossy(&repro.stdout).lines().filter(|l| l.contains("fingerprint")).collect::<Vec<_>>(),
        trace.lines().filter(|l| l.contains("fingerprint")).collect::<Vec<_>>()
    );

    let again = fencesim(&[&world[..], &["--bundle", root_s]].concat());
    assert_exit(&again, 2);
    assert!(stderr(&again).contains("refusing to overwrite"), "{}", stderr(&again));
    assert_eq!(entries(&root), ["mid-call-takeover-1"]);

    let clean = fencesim(&["run", "--scenario", "mid-call-takeover", "--seed", "1", "--bundle", root_s]);
    assert_exit(&clean, 0);
    assert_eq!(entries(&root), ["mid-call-takeover-1"], "a passing world writes no bundle");
}

#[test]
fn sweep_bundle_writes_one_per_failing_seed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("b");
    let out = fencesim(&[
        "sweep",
        "--scenario",
        "mid-call-takeover",
        "--seeds",
        "2",
        "--defect",
        "non-atomic-fence",
        "--bundle",
        root.to_str().unwrap(),
    ]);
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("bundle: "), "{}", stdout(&out));
    assert_eq!(entries(&root), ["mid-call-takeover-1", "mid-call-takeover-2"]);
}

/// A file world runs the same twice in one process (its temporary folder is made outside the
/// runtime, so naming it draws nothing from madsim's generator), so its bundle can be written.
#[test]
fn a_file_world_repeats_in_one_process_and_bundles() {
    use fencesim_sim::world::{self, WorldConfig};
    let cfg = WorldConfig {
        scenario: fencesim_sim::catalogue::scenario("mid-call-takeover").unwrap(),
        seed: 1,
        db: fencesim_sim::stores::DbKind::File,
        store_defects: Default::default(),
        engine_defects: Default::default(),
        keep_db: None,
        adapter: None,
    };
    let a = world::run(&cfg).unwrap();
    let b = world::run(&cfg).unwrap();
    assert_eq!(a.fingerprint, b.fingerprint);

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("b");
    let out = fencesim(&[
        "run",
        "--scenario",
        "mid-call-takeover",
        "--seed",
        "1",
        "--defect",
        "non-atomic-fence",
        "--db",
        "file",
        "--bundle",
        root.to_str().unwrap(),
    ]);
    assert_exit(&out, 1);
    assert_eq!(entries(&root.join("mid-call-takeover-1")).len(), FILES.len());
}

/// `run --bundle DIR --shrink` adds the shrunk plan, which fails the same checker again.
#[test]
fn a_shrunk_bundle_carries_plan_min() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("b");
    let world = ["run", "--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"];
    assert_exit(&fencesim(&[&world[..], &["--bundle", root.to_str().unwrap(), "--shrink"]].concat()), 1);
    let min = root.join("mid-call-takeover-1").join("plan.min.toml");
    let out = fencesim(&["run", "--plan", min.to_str().unwrap()]);
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("VIOLATION no-stale-acceptance"), "{}", stdout(&out));
}
