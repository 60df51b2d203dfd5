//! `fencesim conformance` end to end: every shipped store passes the kit, every planted store
//! defect makes it fail with the check that names its contract, and bad input exits 2 with one
//! line. This is how the kit proves each of its checks can fail.

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::cli;

use cli::fencesim;

/// Run the kit with JSON output; return the exit code and the ids of the failed checks.
fn conformance(store: &str, defect: Option<&str>) -> (i32, Vec<String>, Value) {
    let mut args = vec!["conformance", "--store", store, "--format", "json"];
    if let Some(d) = defect {
        args.extend(["--defect", d]);
    }
    let out = fencesim(&args);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let failed = doc["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .filter(|c| c["outcome"] == "fail")
        .map(|c| c["id"].as_str().expect("id").to_owned())
        .collect();
    (out.status.code().expect("exit code"), failed, doc)
}

fn assert_passes(store: &str, min_passed: u64) {
    let (code, failed, doc) = conformance(store, None);
    assert_eq!(code, 0, "{store}: failed checks {failed:?}\n{doc:#}");
    assert!(doc["passed"].as_u64().unwrap() >= min_passed, "{store}: too few checks ran\n{doc:#}");
}

#[test]
fn sqlite_memdb_passes() {
    assert_passes("sqlite-memdb", 30);
}

#[test]
fn sqlite_file_passes() {
    assert_passes("sqlite-file", 30);
}

/// The kit against `memory` with extra flags: exit code and the JSON document.
fn memory_kit(extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["conformance", "--store", "memory", "--format", "json"];
    args.extend(extra);
    let out = fencesim(&args);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().expect("exit code"), doc)
}

#[test]
fn memory_passes_its_applicable_subset_when_its_missing_capabilities_are_expected() {
    let (code, doc) = memory_kit(&["--expect-capabilities", "none"]);
    assert_eq!(code, 0, "memory:\n{doc:#}");
    let outcome_of = |id: &str| -> Vec<String> {
        doc["checks"].as_array().unwrap().iter().filter(|c| c["id"] == id).map(|c| c["outcome"].to_string()).collect()
    };
    assert!(outcome_of("J5").iter().all(|o| o == "\"pass\""), "journal checks run on memory");
    assert!(outcome_of("W1").iter().all(|o| o == "\"skip\""), "fenced checks skip on memory");
    assert!(outcome_of("L1").iter().all(|o| o == "\"skip\""), "lease checks skip on memory");
}

/// A kit that skipped the fencing checks has not shown the store fences: exit 3, not a pass,
/// naming what is missing and the flag that says it is intended.
#[test]
fn a_store_without_the_fencing_capabilities_is_inconclusive_unless_expected() {
    let (code, doc) = memory_kit(&[]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["verdict"], "inconclusive", "{doc:#}");
    assert_eq!(doc["missing_capabilities"], serde_json::json!(["leases", "fenced_writes", "fault_points"]), "{doc:#}");
    let (code, doc) = memory_kit(&["--expect-capabilities", "leases"]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["missing_capabilities"], serde_json::json!(["leases"]), "{doc:#}");
    let text = fencesim(&["conformance", "--store", "memory"]);
    assert_eq!(text.status.code(), Some(3));
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("INCONCLUSIVE: store=memory"), "{out}");
    assert!(out.contains("--expect-capabilities none"), "{out}");
}

/// Known findings: a listed failing check is KNOWN (exit 0), an unlisted one fails, a listed
/// check that passes fails the run, and a bad list is an input error; the JUnit report shows
/// skips and known findings as skipped cases.
#[test]
fn known_findings_are_reported_and_kept_true() {
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("known");
    std::fs::write(&list, "# planted\na5-monotonic-seq  the planted no-seq-guard defect\n").unwrap();
    let junit = dir.path().join("kit.xml");
    let list_arg = list.to_str().unwrap();
    let out = fencesim(&[
        "conformance",
        "--store",
        "sqlite-memdb",
        "--defect",
        "no-seq-guard",
        "--known-findings",
        list_arg,
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let failing: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL ")).collect();
    // The defect may fail other checks than the listed one; those still fail the run.
    assert_eq!(out.status.code(), Some(if failing.is_empty() { 0 } else { 1 }), "{text}");
    assert!(text.contains("KNOWN J5  a5-monotonic-seq"), "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("known finding: the planted no-seq-guard defect"), "{xml}");
    assert!(xml.contains("<skipped message=\"store keeps no SQLite file\"/>") || xml.contains("skipped=\""), "{xml}");

    // Without the defect the finding is gone: the run fails and says to remove it.
    let out = fencesim(&["conformance", "--store", "sqlite-memdb", "--known-findings", list_arg]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL known finding a5-monotonic-seq: the check no longer fails"), "{text}");

    std::fs::write(&list, "no-such-check  why\n").unwrap();
    let out = fencesim(&["conformance", "--store", "sqlite-memdb", "--known-findings", list_arg]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(":1: 'no-such-check' is no check of the kit"));
}

/// Each planted defect, and the contract whose check must catch it.
const CAUGHT_BY: [(&str, &str); 19] = [
    ("non-atomic-fence", "L9"),
    ("epoch-reset-on-delete", "L4"),
    ("no-run-match", "W3"),
    ("unfenced-meta", "W1"),
    ("unfenced-blobs", "T3"),
    ("unfenced-delete", "W1"),
    ("stale-release-accepted", "L7"),
    ("expired-lease-live", "L6"),
    ("no-seq-guard", "J5"),
    ("no-boot-retry", "B2"),
    ("epoch-only-fence", "W7"),
    ("blob-delete-no-run-match", "T4"),
    ("expiry-instant-live", "L6"),
    ("admin-delete-drops-tombstone", "L4"),
    ("renew-extends-old-expiry", "L8"),
    ("acquire-reclaims-own-epoch", "L6"),
    ("purge-keeps-lease-row", "J7"),
    ("list-blobs-prefix", "T1"),
    ("delete-in-pieces", "J7"),
];

fn assert_caught(defect: &str) {
    let expected = CAUGHT_BY.iter().find(|(d, _)| *d == defect).map(|(_, id)| *id).unwrap();
    let (code, failed, doc) = conformance("sqlite-file", Some(defect));
    assert_eq!(code, 1, "defect {defect} was not caught\n{doc:#}");
    assert!(failed.iter().any(|id| id == expected), "defect {defect}: expected {expected} to fail, failed {failed:?}");
    let repro = doc["repro"].as_str().unwrap_or_default();
    assert_eq!(repro, format!("fencesim conformance --store sqlite-file --defect {defect}"));
}

macro_rules! defect_tests {
    ($($test:ident => $defect:literal),* $(,)?) => {
        $(#[test] fn $test() { assert_caught($defect); })*
    };
}

defect_tests! {
    catches_non_atomic_fence => "non-atomic-fence",
    catches_epoch_reset_on_delete => "epoch-reset-on-delete",
    catches_no_run_match => "no-run-match",
    catches_unfenced_meta => "unfenced-meta",
    catches_unfenced_blobs => "unfenced-blobs",
    catches_unfenced_delete => "unfenced-delete",
    catches_stale_release_accepted => "stale-release-accepted",
    catches_expired_lease_live => "expired-lease-live",
    catches_no_seq_guard => "no-seq-guard",
    catches_no_boot_retry => "no-boot-retry",
    catches_epoch_only_fence => "epoch-only-fence",
    catches_blob_delete_no_run_match => "blob-delete-no-run-match",
    catches_expiry_instant_live => "expiry-instant-live",
    catches_admin_delete_drops_tombstone => "admin-delete-drops-tombstone",
    catches_delete_in_pieces => "delete-in-pieces",
    catches_renew_extends_old_expiry => "renew-extends-old-expiry",
    catches_acquire_reclaims_own_epoch => "acquire-reclaims-own-epoch",
    catches_purge_keeps_lease_row => "purge-keeps-lease-row",
    catches_list_blobs_prefix => "list-blobs-prefix",
}

#[test]
fn every_listed_defect_has_a_test() {
    let out = fencesim(&["conformance", "--list-defects"]);
    assert!(out.status.success());
    let listed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    let tested: Vec<&str> = CAUGHT_BY.iter().map(|(d, _)| *d).collect();
    assert_eq!(listed, tested);
}

fn assert_usage_error(args: &[&str], mentions: &str) {
    let out = fencesim(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one line expected, got {stderr}");
    assert!(stderr.contains(mentions), "{args:?}: expected {mentions:?} in {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
}

#[test]
fn unknown_store_lists_the_valid_ones() {
    assert_usage_error(&["conformance", "--store", "postgres"], "valid: sqlite-memdb, sqlite-file, memory");
}

#[test]
fn unknown_defect_lists_the_valid_ones() {
    assert_usage_error(&["conformance", "--store", "sqlite-file", "--defect", "typo"], "valid: non-atomic-fence");
}

#[test]
fn defects_need_a_sqlite_store() {
    assert_usage_error(&["conformance", "--store", "memory", "--defect", "no-seq-guard"], "--store memory has none");
}

#[test]
fn missing_store_and_unknown_flags_are_usage_errors() {
    assert_usage_error(&["conformance"], "--store");
    assert_usage_error(&["conformance", "--store", "memory", "--frobnicate"], "--frobnicate");
    assert_usage_error(&["conformance", "--store", "memory", "--format", "xml"], "xml");
}

#[test]
fn text_output_ends_with_a_summary_and_a_repro_line() {
    let out = fencesim(&["conformance", "--store", "sqlite-memdb", "--defect", "no-seq-guard"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.iter().any(|l| l.starts_with("FAIL J5")), "{text}");
    assert!(lines[lines.len() - 2].starts_with("FAIL: store=sqlite-memdb defects=no-seq-guard"), "{text}");
    assert_eq!(lines[lines.len() - 1], "repro: fencesim conformance --store sqlite-memdb --defect no-seq-guard");
}

/// The pids of the processes whose parent is `parent`, read from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...: comm may hold spaces, so split after its closing ')'.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent)
        })
        .collect()
}

/// A boot child of the concurrent-boot race.
fn is_boot(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    cmdline.split(|&b| b == 0).any(|arg| arg == b"boot")
}

/// Alive and not a zombie.
fn running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next().map(str::to_owned));
    matches!(state.as_deref(), Some(s) if s != "Z" && s != "X")
}

/// SIGTERM or SIGINT during the boot race: the process exits 128 + the signal, its boot children
/// die with it, and its temporary folder is gone.
#[test]
#[allow(clippy::disallowed_methods, reason = "the test watches real processes in wall time")]
fn a_signal_during_the_boot_race_kills_the_children_and_removes_the_folder() {
    use std::time::{Duration, Instant};
    for (signal, name) in [(15, "TERM"), (2, "INT")] {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(["conformance", "--store", "sqlite-file"])
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Readiness: a boot child of the race exists (not merely the janitor).
        let started = Instant::now();
        let boots = loop {
            let boots = children_of(child.id());
            if boots.iter().any(|&b| is_boot(b)) || started.elapsed() > Duration::from_secs(120) {
                break boots;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(boots.iter().any(|&b| is_boot(b)), "no boot child appeared");
        assert!(std::fs::read_dir(tmp.path()).unwrap().count() > 0, "no temporary folder to remove");
        let sig = if signal == 15 { Signal::SIGTERM } else { Signal::SIGINT };
        assert!(cli::signal_while_running(&mut child, sig), "SIG{name}: the run ended before the signal");
        let exit = child.wait().unwrap();
        assert_eq!(exit.code(), Some(128 + signal), "SIG{name}: {exit:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while boots.iter().any(|&b| running(b)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!boots.iter().any(|&b| running(b)), "SIG{name}: a boot child outlived its parent");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "SIG{name}: left behind {left:?}");
    }
}
