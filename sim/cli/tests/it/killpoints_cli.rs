//! The kill-point suite from the command line: a clean pass, a planted defect caught with its repro, bad input refused, and byte-identical reports from two processes.

use crate::cli;

use cli::fencesim;

#[test]
fn the_cli_passes_clean_fails_on_a_defect_with_a_repro_and_refuses_bad_input() {
    let clean = fencesim(&["killpoints", "--workflow", "happy"]);
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stdout));
    let text = String::from_utf8_lossy(&clean.stdout);
    assert!(text.lines().last().is_some_and(|l| l.contains("0 failed")), "{text}");

    let caught = fencesim(&["killpoints", "--workflow", "happy", "--defect", "meta-before-settle", "--format", "json"]);
    assert_eq!(caught.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&caught.stdout).expect("one JSON document");
    assert!(doc["failed"].as_u64().is_some_and(|n| n > 0), "{doc}");
    assert_eq!(doc["repro"], "fencesim killpoints --workflow happy --db memdb --defect meta-before-settle");

    for bad in
        [&["killpoints", "--workflow", "nope"][..], &["killpoints", "--defect", "nope"], &["killpoints", "--db", "x"]]
    {
        let out = fencesim(bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("valid"), "{err}");
    }
}

/// Each point runs in its own seeded madsim runtime: two processes print the same bytes.
#[test]
fn two_processes_print_byte_identical_reports() {
    let first = fencesim(&["killpoints", "--format", "json"]);
    let second = fencesim(&["killpoints", "--format", "json"]);
    assert_eq!(first.status.code(), Some(0));
    assert!(first.stdout == second.stdout, "kill-point reports differ between two processes");
}
