//! Every printed repro command is run (issue 38, item 21): a repro is a promise, and one that was
//! only compared with a string dropped `--store` from the soak's line unnoticed (it stormed
//! fencesim's own store instead of the adapter). Each command below fails (or passes), its
//! `repro:` line is split as a shell would and run, and the rerun must end with the same verdict
//! (the same exit code, and for the deterministic simulator the same verdict line): `run` against
//! a store adapter, `sweep`, `shrink`, `conformance`, `killpoints`, and `soak` at both levels, an
//! adapter's storm included. (`run`'s own repro is run by `run_cli.rs`, `replay`'s by
//! `replay_cli.rs`, a bundle's `repro.sh` by `bundle_cli.rs`, the store soak's by `soak_cli.rs`.)

use crate::cli;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cli::{assert_exit, stderr, stdout};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fencesim` with `args` (the leading `fencesim` of a repro dropped), TMPDIR a fresh folder and
/// `env` set (a store adapter's own configuration, which no repro can carry).
fn fencesim_with(args: &[String], env: &[(&str, &str)]) -> Output {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut command = Command::new(env!("CARGO_BIN_EXE_fencesim"));
    command.args(args).env("TMPDIR", tmp.path()).env_remove("FENCESIM_ADAPTER_DEFECT");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run fencesim")
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// The words of every `repro:` line in `out`, split as a shell would split them (a soak's closing
/// remark in parentheses dropped), each starting with `fencesim`.
fn repros(out: &Output) -> Vec<Vec<String>> {
    let text = stdout(out);
    let lines: Vec<Vec<String>> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("repro: "))
        .map(|l| l.split(" (the OS scheduler").next().unwrap_or(l))
        .map(|l| shlex::split(l).unwrap_or_else(|| panic!("not shell words: {l}")))
        .collect();
    assert!(!lines.is_empty(), "no repro line in: {text}");
    for line in &lines {
        assert_eq!(line[0], "fencesim", "{line:?}");
    }
    lines
}

/// The first line that says how a world, a kit or a suite ended.
fn verdict_line(out: &Output, marker: &str) -> String {
    let text = stdout(out);
    text.lines().find(|l| l.contains(marker)).unwrap_or_else(|| panic!("no `{marker}` in: {text}")).to_owned()
}

/// Run `args`, expecting `code`; run each repro it printed, expecting the same code; return both
/// outputs (the first repro's rerun).
fn reproduces(args: &[String], env: &[(&str, &str)], code: i32) -> (Output, Output) {
    let out = fencesim_with(args, env);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}\n{}", stdout(&out), stderr(&out));
    let mut again = None;
    for repro in repros(&out) {
        let rerun = fencesim_with(&repro[1..], env);
        assert_eq!(rerun.status.code(), Some(code), "{repro:?}: {}\n{}", stdout(&rerun), stderr(&rerun));
        again.get_or_insert(rerun);
    }
    (out, again.expect("a rerun"))
}

#[test]
fn the_kit_and_the_kill_points_repros_fail_the_same_way() {
    let kit = words(&["conformance", "--store", "sqlite-memdb", "--defect", "no-seq-guard"]);
    let (out, again) = reproduces(&kit, &[], 1);
    assert_eq!(verdict_line(&out, "FAIL: store="), verdict_line(&again, "FAIL: store="));
    let suite = words(&["killpoints", "--workflow", "happy", "--db", "memdb", "--defect", "meta-before-settle"]);
    let (out, again) = reproduces(&suite, &[], 1);
    assert_eq!(stdout(&out), stdout(&again), "the kill points are deterministic");
}

#[test]
fn a_sweeps_and_a_shrinks_repros_fail_the_same_way() {
    let sweep = words(&["sweep", "--scenario", "mid-call-takeover", "--seeds", "4", "--defect", "non-atomic-fence"]);
    let out = fencesim_with(&sweep, &[]);
    assert_exit(&out, 1);
    for repro in repros(&out) {
        let again = fencesim_with(&repro[1..], &[]);
        assert_exit(&again, 1);
        let seed = &repro[repro.iter().position(|w| w == "--seed").expect("a seed") + 1];
        let fail = stdout(&out).lines().find(|l| l.starts_with(&format!("FAIL seed {seed}:"))).unwrap().to_owned();
        // `FAIL seed S: N violation(s), first CHECKER: ...`
        let checker = fail.split(", first ").nth(1).and_then(|t| t.split(':').next()).expect("the first checker");
        assert!(stdout(&again).contains(&format!("VIOLATION {checker}")), "{fail}\n{}", stdout(&again));
    }

    let dir = tempfile::tempdir().expect("a folder for the plan");
    let plan = dir.path().join("min.toml");
    let plan = plan.to_str().expect("utf-8");
    let world = ["--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence", "--out", plan];
    let out = fencesim_with(&words(&[&["shrink"][..], &world].concat()), &[]);
    assert_exit(&out, 0);
    let repro = repros(&out).remove(0);
    let again = fencesim_with(&repro[1..], &[]);
    assert_exit(&again, 1);
    assert!(stdout(&again).contains("VIOLATION no-stale-acceptance"), "{}", stdout(&again));
}

/// A store adapter's world and storm: each repro names the adapter (`--store`), and rerun with
/// the adapter's own configuration (its planted defect, an environment variable no repro can
/// carry) ends the same way. The soak's line dropped `--store`: its rerun stormed fencesim's own
/// store.
#[test]
fn an_adapters_world_and_storm_repros_name_the_adapter_and_end_the_same_way() {
    let adapter = repo().join("adapters/python-sqlite/adapter.py");
    let store = format!("cmd:{} {}", crate::cli::python(), adapter.display());
    let env = [("FENCESIM_ADAPTER_DEFECT", "unfenced-meta")];
    let world = words(&["run", "--scenario", "zombie-probes", "--seed", "1", "--store", &store]);
    let (out, again) = reproduces(&world, &env, 1);
    assert!(repros(&out)[0].windows(2).any(|w| w[0] == "--store" && w[1] == store), "{:?}", repros(&out));
    assert_eq!(verdict_line(&out, ": FAIL (fingerprint"), verdict_line(&again, ": FAIL (fingerprint"));

    let storm = words(&["soak", "--level", "store", "--seed", "2", "--store", &store, "--adapter-timeout-ms", "20000"]);
    let (out, again) = reproduces(&storm, &[], 0);
    let repro = repros(&out).remove(0);
    assert!(repro.windows(2).any(|w| w[0] == "--store" && w[1] == store), "{repro:?}");
    assert!(repro.windows(2).any(|w| w[0] == "--adapter-timeout-ms" && w[1] == "20000"), "{repro:?}");
    assert_eq!(repros(&again)[0], repro, "the repro's own repro differs");
}

/// The engine level's repro (the store level's is run by `soak_cli.rs`).
#[test]
fn the_engine_soaks_repro_passes_the_same_way() {
    let storm = words(&["soak", "--level", "engine", "--seed", "1", "--runs", "4", "--quorum", "runs_settled=1"]);
    let (out, again) = reproduces(&storm, &[], 0);
    assert_eq!(repros(&again), repros(&out), "the repro's own repro differs");
}
