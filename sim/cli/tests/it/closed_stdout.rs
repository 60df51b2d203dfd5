//! A reader that went away before the first line (`fencesim sweep --report R | true`) loses no
//! file: every command that writes files and prints writes them all, then ends quietly with 141
//! (a shell's status for SIGPIPE). Each command below runs with its standard output a pipe whose
//! read end is closed before it starts, so its first line already meets a closed pipe.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::cli;

use cli::stderr;

/// Run `args` in `dir` with stdout a pipe nobody reads.
fn without_reader(dir: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run fencesim")
}

/// Ended quietly with SIGPIPE's status: no error, no panic on stderr (`run --bundle` says where
/// its bundle went there).
fn assert_closed_quietly(out: &Output, args: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
    assert!(!err.contains("error") && !err.contains("panic"), "{args:?}: {err}");
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn folders(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| entries.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir())).count())
}

const FAILING: [&str; 4] = ["--scenario", "mid-call-takeover", "--defect", "non-atomic-fence"];

/// `sweep --report R --bundle B | true` with failing seeds: the FAIL lines meet the closed pipe,
/// yet the report, its JUnit and one bundle per failing seed are written; and `merge` of that
/// report writes its own too.
#[test]
fn sweep_and_merge_write_their_reports_and_bundles_with_no_reader() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = [&["sweep"][..], &FAILING, &["--seeds", "3", "--jobs", "2", "--report", "r", "--bundle", "b"]].concat();
    let out = without_reader(dir.path(), &sweep);
    assert_closed_quietly(&out, &sweep);
    let doc = json(&dir.path().join("r/sweep.json"));
    assert_eq!(doc["summary"]["verdict"], "fail", "{doc}");
    let failed = doc["summary"]["failed"].as_u64().unwrap();
    assert!(failed > 0 && dir.path().join("r/junit.xml").is_file(), "{doc}");
    assert_eq!(folders(&dir.path().join("b")) as u64, failed, "one bundle per failing seed");

    let merge = ["merge", "r", "--out", "m"];
    let out = without_reader(dir.path(), &merge);
    assert_closed_quietly(&out, &merge);
    assert_eq!(json(&dir.path().join("m/sweep.json"))["summary"]["failed"].as_u64(), Some(failed));
    assert!(dir.path().join("m/junit.xml").is_file());
}

/// `run` with every output it can write: the page, the kept database and the bundle.
#[test]
fn run_writes_its_page_database_and_bundle_with_no_reader() {
    let dir = tempfile::tempdir().unwrap();
    let run =
        [&["run", "--seed", "1"][..], &FAILING, &["--html", "t.html", "--keep-db", "k.db", "--bundle", "b"]].concat();
    let out = without_reader(dir.path(), &run);
    assert_closed_quietly(&out, &run);
    assert!(std::fs::read_to_string(dir.path().join("t.html")).unwrap().contains("</html>"));
    assert!(std::fs::read(dir.path().join("k.db")).unwrap().starts_with(b"SQLite format 3\0"));
    assert_eq!(folders(&dir.path().join("b")), 1, "the bundle");
}

/// `plan`, `shrink --out` and `promote`: the plan files are written whatever became of stdout.
#[test]
fn shrink_and_promote_write_their_plans_with_no_reader() {
    let dir = tempfile::tempdir().unwrap();
    let plan = [&["plan", "--seed", "1"][..], &FAILING].concat();
    let drawn = Command::new(env!("CARGO_BIN_EXE_fencesim")).args(&plan).output().expect("run fencesim");
    assert!(drawn.status.success(), "{}", stderr(&drawn));
    std::fs::write(dir.path().join("p.toml"), &drawn.stdout).unwrap();
    let shrink = ["shrink", "--plan", "p.toml", "--out", "min.toml"];
    let out = without_reader(dir.path(), &shrink);
    assert_closed_quietly(&out, &shrink);
    assert!(std::fs::read_to_string(dir.path().join("min.toml")).unwrap().contains("fencesim.plan/1"));
    let promote = ["promote", "--plan", "min.toml", "--story", "a closed pipe", "--dir", "kept"];
    let out = without_reader(dir.path(), &promote);
    assert_closed_quietly(&out, &promote);
    assert_eq!(std::fs::read_dir(dir.path().join("kept")).unwrap().count(), 1, "the promoted plan");
}

/// A store-level soak prints its verdict before its report is written: both reports are there.
#[test]
fn soak_writes_its_reports_with_no_reader() {
    let dir = tempfile::tempdir().unwrap();
    let soak = ["soak", "--level", "store", "--seed", "1", "--defect", "non-atomic-fence", "--report", "s"];
    let out = without_reader(dir.path(), &soak);
    assert_closed_quietly(&out, &soak);
    assert_eq!(json(&dir.path().join("s/soak.json"))["verdict"], "fail");
    assert!(dir.path().join("s/junit.xml").is_file());
}

/// `conformance --junit`: the JUnit file is written and the closed pipe answered after it.
#[test]
fn conformance_writes_its_junit_with_no_reader() {
    let dir = tempfile::tempdir().unwrap();
    let conformance = ["conformance", "--store", "sqlite-memdb", "--junit", "j.xml"];
    let out = without_reader(dir.path(), &conformance);
    assert_closed_quietly(&out, &conformance);
    assert!(std::fs::read_to_string(dir.path().join("j.xml")).unwrap().contains("<testsuite"));
}
