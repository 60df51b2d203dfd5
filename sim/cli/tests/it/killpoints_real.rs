//! `fencesim killpoints --real`: the kill-point suite with real OS processes (a child that
//! SIGKILLs itself at its point, a resume in a second process) on WAL files. The ten rows of
//! contracts 5.13 and the full enumeration pass with their documented counts; a planted engine
//! defect fails the suite; and no temporary file or child process outlives the suite, whether
//! it ends normally, by SIGINT, or (for the processes) by SIGKILL.

#![allow(clippy::disallowed_methods, reason = "these tests watch real processes in wall time")]

use crate::cli;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cli::{assert_exit, fencesim, stdout};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TEN_ROWS: [&str; 10] = [
    "happy-running-before",
    "happy-running-after",
    "happy-ok-terminal-before",
    "happy-ok-terminal-after",
    "happy-settle-before",
    "happy-settle-after",
    "happy-meta-before",
    "happy-meta-after",
    "limit-limit-terminal-before",
    "limit-limit-terminal-after",
];

/// `fencesim killpoints --real ...` with TMPDIR set to `tmp`.
fn real(tmp: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["killpoints", "--real"])
        .args(extra)
        .env("TMPDIR", tmp)
        .output()
        .expect("run fencesim")
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read the temp folder")
        .map(|e| e.unwrap().file_name().to_string_lossy().into())
        .collect()
}

#[test]
fn every_point_passes_for_real_with_the_documented_counts_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let out = real(tmp.path(), &["--workflow", "all", "--format", "json"]);
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["real"], true);
    assert_eq!(doc["failed"], 0, "{doc}");
    let points = doc["points"].as_array().expect("points");
    for row in TEN_ROWS {
        let point = points.iter().find(|p| p["id"] == row).unwrap_or_else(|| panic!("row {row} missing"));
        assert_eq!(point["violations"], serde_json::json!([]), "{row}");
    }
    // The ten rows plus every write of both workflows, before and after.
    assert!(points.len() >= 10 + 2 * 12, "only {} points", points.len());
    // Every child died at its point: none reports an unreached write.
    assert!(points.iter().all(|p| p["write"] != "(not reached)"), "{doc}");
    assert_eq!(entries(tmp.path()), Vec::<String>::new());
}

#[test]
fn a_planted_engine_defect_fails_the_real_suite() {
    let tmp = tempfile::tempdir().unwrap();
    let out = real(tmp.path(), &["--workflow", "happy", "--defect", "meta-before-settle"]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(text.lines().next().is_some_and(|l| l.starts_with("real processes")), "{text}");
    assert!(text.contains("FAIL: meta-not-ahead: after the crash: meta ahead of the journal"), "{text}");
    assert!(text.contains("repro: fencesim killpoints --real --workflow happy --defect meta-before-settle"), "{text}");
    assert_eq!(entries(tmp.path()), Vec::<String>::new());
}

#[test]
fn real_refuses_a_db_choice_with_one_line() {
    let out = fencesim(&["killpoints", "--real", "--db", "memdb"]);
    assert_exit(&out, 2);
    assert_eq!(cli::stderr(&out).lines().count(), 1);
}

/// Live kill-point children and janitors whose command line mentions `needle` (the point folders
/// live under it).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && (cmdline.contains("killpoint-") || cmdline.contains(" janitor ")) {
            found.push(format!("{}: {cmdline}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// Start the real suite (in a process group of its own if `group`) and wait until a point's
/// folder exists (a child is running).
fn start_suite(tmp: &Path, group: bool) -> Child {
    use std::os::unix::process::CommandExt;
    let mut suite = Command::new(env!("CARGO_BIN_EXE_fencesim"));
    suite
        .args(["killpoints", "--real", "--workflow", "all"])
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if group {
        suite.process_group(0);
    }
    let child = suite.spawn().expect("start fencesim");
    let start = Instant::now();
    while entries(tmp).is_empty() || processes_mentioning(&tmp.to_string_lossy()).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(60), "no kill point started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Up to 30 s (a loaded machine) for the kernel and the parent-death signal to finish the job.
fn wait_for_no_processes(tmp: &Path) -> Vec<String> {
    let start = Instant::now();
    loop {
        let left = processes_mentioning(&tmp.to_string_lossy());
        if left.is_empty() || start.elapsed() > Duration::from_secs(30) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigint_mid_suite_kills_the_children_and_removes_every_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let mut suite = start_suite(tmp.path(), false);
    assert!(cli::signal_while_running(&mut suite, Signal::SIGINT), "the suite ended before the signal");
    let status = suite.wait().unwrap();
    // The suite stops its point's processes, removes its folders, then exits 128 + SIGINT.
    assert_eq!(status.code(), Some(130), "{status}");
    assert_eq!(wait_for_no_processes(tmp.path()), Vec::<String>::new());
    assert_eq!(entries(tmp.path()), Vec::<String>::new());
}

/// A SIGKILL gives the suite no chance to clean up: its child dies by its parent-death signal
/// (`fencesim_protocol::die_with_parent`, whose own test in `protocol/tests/adapter_process.rs`
/// holds a child that would otherwise live ten minutes) and the janitor (in a process group of its own) removes the folder, whether the suite alone
/// was killed or its whole process group (a CI runner's timeout).
#[test]
fn a_sigkilled_suite_leaves_no_process_and_no_folder() {
    for group in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let mut suite = start_suite(tmp.path(), group);
        let pid = Pid::from_raw(i32::try_from(suite.id()).unwrap());
        if group {
            nix::sys::signal::killpg(pid, Signal::SIGKILL).unwrap();
        } else {
            kill(pid, Signal::SIGKILL).unwrap();
        }
        suite.wait().unwrap();
        assert_eq!(wait_for_no_processes(tmp.path()), Vec::<String>::new(), "group {group}");
        assert_eq!(entries(tmp.path()), Vec::<String>::new(), "group {group}");
    }
}
