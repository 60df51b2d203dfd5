//! `fencesim replay` end to end: a small corpus replays twice per entry, passes, and writes a
//! `replay.json` (whose worlds are the same reports `fencesim run --format json` prints) and a
//! `junit.xml`; a failing entry exits 1 with a repro (naming a scenario file by its path) in the
//! output and both reports; an empty corpus is refused (exit 2, no report); a malformed or missing corpus
//! exits 2 with one line naming `FILE:LINE`, before any world runs or any report is written; and
//! the CI corpus `seeds/ci.txt` replays clean.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::cli;

use cli::{assert_exit, fencesim, stdout};

/// A corpus file in a temporary folder, and a report folder beside it (not created yet).
struct Corpus {
    dir: tempfile::TempDir,
    path: String,
}

impl Corpus {
    fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.txt");
        std::fs::write(&path, text).unwrap();
        Corpus { path: path.to_str().unwrap().to_owned(), dir }
    }

    fn report_dir(&self) -> PathBuf {
        self.dir.path().join("out").join("replay")
    }

    fn replay(&self, extra: &[&str]) -> Output {
        let report = self.report_dir();
        let args: Vec<&str> = ["replay", self.path.as_str(), "--report", report.to_str().unwrap()]
            .into_iter()
            .chain(extra.iter().copied())
            .collect();
        fencesim(&args)
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the report exists")).expect("valid JSON")
}

/// The replay's own fields removed: what remains is a world report.
fn world_part(world: &Value) -> Value {
    let mut world = world.clone();
    for key in ["entry", "index", "line", "deterministic", "rerun_fingerprint", "seconds", "failure"] {
        world.as_object_mut().unwrap().remove(key).unwrap_or_else(|| panic!("no {key} in {world}"));
    }
    world
}

#[test]
fn a_small_corpus_replays_deterministically_and_writes_both_reports() {
    let corpus = Corpus::new("# two entries\n\nswarm 1\nmid-call-takeover 2   # trailing comment\n");
    let out = corpus.replay(&["--jobs", "2"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    // The coverage table, then the summary line.
    assert!(text.starts_with("coverage event"), "{text}");
    let last = text.lines().last().unwrap_or_default();
    let summary = format!("replayed 2 worlds from {}: 2 passed, 0 failed, 0 nondeterministic in ", corpus.path);
    assert!(last.starts_with(&summary) && last.ends_with(" s"), "{text}");
    let doc = read_json(&corpus.report_dir().join("replay.json"));
    assert!(doc["coverage"].as_array().is_some_and(|c| !c.is_empty()), "{doc}");

    let doc = read_json(&corpus.report_dir().join("replay.json"));
    assert_eq!(doc["schema"], fencesim::report::REPLAY_SCHEMA);
    assert_eq!(doc["corpus"], corpus.path.as_str());
    assert!(doc["commit"].is_null() || doc["commit"].as_str().is_some_and(|c| c.len() == 40), "{}", doc["commit"]);
    let s = &doc["summary"];
    assert_eq!(
        (&s["worlds"], &s["passed"], &s["failed"], &s["nondeterministic"]),
        (&2.into(), &2.into(), &0.into(), &0.into())
    );
    assert_eq!((&s["verdict"], &s["db"], &s["jobs"]), (&"pass".into(), &"memdb".into(), &2.into()));
    let worlds = doc["worlds"].as_array().expect("worlds");
    assert_eq!(worlds.len(), 2);
    for (index, (world, (entry, line))) in worlds.iter().zip([("swarm 1", 3), ("mid-call-takeover 2", 4)]).enumerate() {
        assert_eq!(world["deterministic"], true, "{world}");
        assert_eq!(world["fingerprint"], world["rerun_fingerprint"]);
        assert_eq!((&world["entry"], &world["index"], &world["line"]), (&entry.into(), &index.into(), &line.into()));
        assert_eq!((&world["schema"], &world["verdict"]), (&"fencesim.world/1".into(), &"pass".into()));
        // The same report a separate `fencesim run` process prints.
        let (scenario, seed) = entry.split_once(' ').unwrap();
        let run = fencesim(&["run", "--scenario", scenario, "--seed", seed, "--format", "json"]);
        assert_exit(&run, 0);
        let alone: Value = serde_json::from_slice(&run.stdout).expect("one JSON document");
        assert_eq!(world_part(world), alone, "{entry}");
    }

    let junit = std::fs::read_to_string(corpus.report_dir().join("junit.xml")).expect("junit.xml");
    assert!(junit.contains("tests=\"2\" failures=\"0\""), "{junit}");
    assert!(junit.contains(" name=\"swarm 1\" ") && junit.contains(" name=\"mid-call-takeover 2\" "), "{junit}");
    assert_eq!(junit.matches("<testcase ").count(), 2, "{junit}");
}

/// The plan of a seed that fails with a planted defect, written into `dir` (a plan carries its
/// defects, so a corpus line `plan PATH` fails without one on the command line).
fn failing_plan(dir: &Path) -> PathBuf {
    let plan = fencesim(&["plan", "--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"]);
    assert_exit(&plan, 0);
    let path = dir.join("plan.toml");
    std::fs::write(&path, &plan.stdout).unwrap();
    path
}

#[test]
fn a_failing_entry_exits_1_with_its_repro_in_every_report() {
    let corpus = Corpus::new("");
    let plan = failing_plan(corpus.dir.path());
    // A corpus line is split at spaces: name the plan by a path without one.
    let plain = corpus.dir.path().join("failing.toml");
    std::fs::rename(&plan, &plain).unwrap();
    std::fs::write(&corpus.path, format!("swarm 1\nplan {}\n", plain.display())).unwrap();
    check_failing(&corpus, plain.to_str().unwrap(), &corpus.replay(&[]));
}

fn check_failing(corpus: &Corpus, plan: &str, out: &Output) {
    assert_exit(out, 1);
    let text = stdout(out);
    // The failing entry's line and the summary (the coverage table stands between them).
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL ") || l.starts_with("replayed ")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(text.lines().last(), Some(lines[1]), "{text}");
    let repro = format!("fencesim run --plan {} --defect non-atomic-fence --trace", fencesim::report::sh_quote(plan));
    assert!(lines[0].starts_with("FAIL ") && lines[0].contains(&format!(" ({}:2): ", corpus.path)), "{text}");
    assert!(lines[0].contains(" violation(s), first "), "{text}");
    assert!(lines[0].ends_with(&format!("; repro: {repro}")), "{text}");
    assert!(lines[1].contains(": 1 passed, 1 failed, 0 nondeterministic in "), "{text}");

    let doc = read_json(&corpus.report_dir().join("replay.json"));
    assert_eq!((&doc["summary"]["verdict"], &doc["summary"]["failed"]), (&"fail".into(), &1.into()));
    let world = &doc["worlds"][1];
    assert_eq!((&world["verdict"], &world["deterministic"]), (&"fail".into(), &true.into()));
    // The plan carries its defect: its world's own repro names the plan alone.
    assert!(world["repro"].as_str().unwrap().starts_with(&format!("fencesim run --plan {plan}")), "{world}");
    let checker = world["violations"][0]["checker"].as_str().unwrap().to_owned();
    let junit = std::fs::read_to_string(corpus.report_dir().join("junit.xml")).expect("junit.xml");
    assert!(junit.contains("tests=\"2\" failures=\"1\""), "{junit}");
    assert!(
        junit.contains("<failure message=\"") && junit.contains(&format!("repro: fencesim run --plan {plan}")),
        "{junit}"
    );

    // The printed repro reproduces the failure.
    let again = fencesim(&["run", "--plan", plan, "--defect", "non-atomic-fence", "--trace"]);
    assert_exit(&again, 1);
    assert!(stdout(&again).contains(&format!("VIOLATION {checker}: ")), "{}", stdout(&again));
}

#[test]
fn a_file_database_replays_deterministically_too() {
    let corpus = Corpus::new("swarm 2\n");
    let out = corpus.replay(&["--db", "file", "--jobs", "2"]);
    assert_exit(&out, 0);
    let doc = read_json(&corpus.report_dir().join("replay.json"));
    assert_eq!((&doc["summary"]["db"], &doc["worlds"][0]["db"]), (&"file".into(), &"file".into()));
    assert_eq!(doc["worlds"][0]["deterministic"], true);
}

#[test]
fn the_regressions_corpus_replays_clean_and_an_empty_corpus_is_refused() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../seeds/regressions.txt");
    let dir = tempfile::tempdir().unwrap();
    let out = fencesim(&[Path::new("replay"), &path, Path::new("--report"), dir.path()]);
    assert_exit(&out, 0);
    let worlds = read_json(&dir.path().join("replay.json"))["worlds"].as_array().expect("worlds").len();
    let last = stdout(&out).lines().last().unwrap_or_default().to_owned();
    assert!(last.starts_with(&format!("replayed {worlds} worlds from ")), "{}", stdout(&out));
    assert!(dir.path().join("junit.xml").exists());

    let empty = Corpus::new("# nothing yet\n\n");
    let out = empty.replay(&[]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("the corpus has no entries"), "{err}");
    assert!(!empty.report_dir().join("replay.json").exists());
}

#[test]
fn a_malformed_corpus_is_refused_naming_file_and_line() {
    let cases = [
        ("swarm 1\nswarm\n", 2, "has no seed"),
        ("# c\n\nswarm one\n", 3, "seed 'one' is not a number"),
        ("swarm -3\n", 1, "seed '-3' is not a number"),
        ("swarm 1 2\n", 1, "3 fields, expected 2"),
        ("swarm 1\nswam 2 # typo\n", 2, "unknown scenario"),
        ("missing/scenario.toml 1\n", 1, "cannot read scenario"),
    ];
    for (text, line, why) in cases {
        let corpus = Corpus::new(text);
        let out = corpus.replay(&[]);
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("fencesim: error: {}:{line}: ", corpus.path)), "{text:?}: {err}");
        assert!(err.contains(why), "{text:?}: expected {why:?} in {err}");
        assert!(out.stdout.is_empty(), "{}", stdout(&out));
        assert!(!corpus.report_dir().exists(), "a report was written for a corpus that was refused");
    }

    let missing = Corpus::new("");
    let path = missing.dir.path().join("nope.txt");
    let out = fencesim(&[Path::new("replay"), &path]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot read corpus") && err.contains("nope.txt"), "{err}");
}

/// The CI corpus itself (every built-in scenario, seeds 1 to 5): about 10 s in a debug build,
/// most of it the boot-storm worlds, whose bootstrap retries wait in wall-clock time.
#[test]
fn the_ci_corpus_replays_clean() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../seeds/ci.txt");
    let dir = tempfile::tempdir().unwrap();
    let out = fencesim(&[Path::new("replay"), &path, Path::new("--report"), dir.path()]);
    assert_exit(&out, 0);
    let doc = read_json(&dir.path().join("replay.json"));
    let n = fencesim_sim::catalogue::SCENARIOS.len() as u64 * 5;
    assert!(doc["summary"]["worlds"].as_u64().is_some_and(|w| w >= n), "{}", doc["summary"]);
    assert_eq!((&doc["summary"]["failed"], &doc["summary"]["nondeterministic"]), (&0.into(), &0.into()));
}

/// `replay ... | true` on a failing corpus: the reader is gone before the first FAIL line, yet
/// both reports are written (the broken pipe is answered after them, with 141).
#[test]
fn a_closed_pipe_does_not_stop_the_reports() {
    let corpus = Corpus::new("");
    let folder = corpus.dir.path().join("plans");
    std::fs::create_dir(&folder).unwrap();
    let plan = fencesim(&["plan", "--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"]);
    assert_exit(&plan, 0);
    std::fs::write(folder.join("p.toml"), &plan.stdout).unwrap();
    let report = corpus.report_dir();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["replay", folder.to_str().unwrap(), "--report", report.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away at once, as `| true` does.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty() || !String::from_utf8_lossy(&out.stderr).contains("panic"));
    let doc = read_json(&report.join("replay.json"));
    assert_eq!(doc["summary"]["verdict"], "fail", "{doc}");
    assert!(report.join("junit.xml").is_file());
}
