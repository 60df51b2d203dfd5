//! `fencesim sweep` end to end: a clean sweep exits 0 with its summary line, a planted defect
//! exits 1 with one repro command per failing seed, a sweep of no seeds is refused, and a file
//! sweep leaves nothing in the temp folder, whether it ends or is SIGKILLed.

use crate::cli;

use cli::{assert_exit, fencesim, stderr, stdout};

const SWEEP: [&str; 7] = ["sweep", "--scenario", "mid-call-takeover", "--seeds", "4", "--jobs", "2"];

#[test]
fn a_clean_sweep_passes_with_a_summary() {
    let out = fencesim(&SWEEP);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let summary = text.lines().last().unwrap_or_default();
    assert!(text.starts_with("coverage event"), "{text}");
    assert!(
        summary.starts_with("mid-call-takeover: 4 seeds (1..=4) on memdb with 2 job(s): 4 passed, 0 failed in "),
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

/// A SIGKILL gives a file sweep no chance to remove its worlds' folders: they live under one
/// root its janitor (a child in a process group of its own) removes, whether the sweep alone was
/// killed or its whole process group (a CI runner's timeout). Without the root, the folders of
/// the worlds in flight stay.
#[test]
#[allow(clippy::disallowed_methods, reason = "the test watches a real process in wall time")]
fn a_sigkilled_file_sweep_leaves_nothing_in_the_temp_folder() {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    for group in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let mut sweep = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"));
        sweep
            .args(["sweep", "--scenario", "swarm", "--seeds", "100000", "--db", "file", "--jobs", "2"])
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if group {
            sweep.process_group(0);
        }
        let mut sweep = sweep.spawn().expect("run fencesim");
        let count = || std::fs::read_dir(tmp.path()).unwrap().count();
        let worlds = |root: &std::path::Path| std::fs::read_dir(root).map(|d| d.count()).unwrap_or(0);
        let started = Instant::now();
        // Wait until the root holds a world's folder.
        while !std::fs::read_dir(tmp.path()).unwrap().flatten().any(|e| worlds(&e.path()) > 0) {
            assert!(started.elapsed() < Duration::from_secs(60), "no world started");
            std::thread::sleep(Duration::from_millis(5));
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(sweep.id()).unwrap());
        if group {
            nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        } else {
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        }
        sweep.wait().unwrap();
        // The janitor (a process of its own) removes the root once it sees the sweep gone: a
        // deadline for that, generous for a loaded machine, not a speed target.
        let deadline = Instant::now() + Duration::from_secs(60);
        while count() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "group {group}: left behind {left:?}");
    }
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

fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A report without its wall-clock fields (time, jobs), which no two runs share.
fn timeless(mut doc: serde_json::Value) -> serde_json::Value {
    let summary = doc["summary"].as_object_mut().expect("a summary");
    summary.remove("seconds");
    summary.remove("jobs");
    doc
}

fn junit_cases(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| l.contains("<testcase") || l.contains("<failure"))
        .map(|l| {
            // Drop the time attribute.
            l.split(" time=").next().unwrap().to_owned()
        })
        .collect()
}

/// Three shards merge into a report equal to the unsharded sweep of the same seeds (JSON and
/// JUnit, apart from wall-clock fields); a failing shard makes the merge exit 1; overlapping and
/// missing shards are refused with exit 2 naming them.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one set of shard reports is checked merged, failing, overlapping and missing"
)]
fn shards_merge_into_the_unsharded_report() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let sweep = |extra: &[&str], report: &str| {
        let report = path(report);
        let args = [
            &[
                "sweep",
                "--scenario",
                "mid-call-takeover",
                "--seeds",
                "7",
                "--start",
                "3",
                "--defect",
                "non-atomic-fence",
            ][..],
            extra,
            &["--report", report.to_str().unwrap()],
        ]
        .concat();
        fencesim(&args)
    };
    assert_exit(&sweep(&[], "whole"), 1);
    let mut outputs = Vec::new();
    for i in 0..3 {
        let out = sweep(&["--shard", &format!("{i}/3")], &format!("s{i}"));
        assert_exit(&out, 1);
        outputs.push(stdout(&out));
    }
    // Each seed ran in exactly one shard, chosen by the seed alone.
    let shard0 = read_json(&path("s0/sweep.json"));
    assert!(shard0["failures"].as_array().unwrap().iter().all(|f| f["seed"].as_u64().unwrap() % 3 == 0), "{shard0}");
    assert_eq!(shard0["summary"]["worlds"], 3); // seeds 3, 6 and 9 of 3..=9
    let dirs = |names: &[&str]| names.iter().map(|n| path(n).to_str().unwrap().to_owned()).collect::<Vec<_>>();
    let merge = |names: &[&str], out: &str| {
        let out = path(out);
        fencesim(
            &[
                &["merge"][..],
                &dirs(names).iter().map(String::as_str).collect::<Vec<_>>(),
                &["--out", out.to_str().unwrap()],
            ]
            .concat(),
        )
    };
    let out = merge(&["s2", "s0", "s1"], "merged");
    assert_exit(&out, 1);
    assert!(stdout(&out).starts_with("merged 3 shard(s) into "), "{}", stdout(&out));
    assert_eq!(timeless(read_json(&path("merged/sweep.json"))), timeless(read_json(&path("whole/sweep.json"))));
    assert_eq!(junit_cases(&path("merged/junit.xml")), junit_cases(&path("whole/junit.xml")));

    let out = merge(&["s0", "s1"], "partial");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("missing shards: 2/3 (of 3)"), "{}", stderr(&out));
    assert!(!path("partial").exists());
    let out = merge(&["s0", "s1", "s2", "s1"], "twice");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("overlapping shards: 1/3 in "), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1);

    // Clean shards merge with exit 0.
    for i in 0..2 {
        let report = path(&format!("c{i}"));
        let out = fencesim(&[
            "sweep",
            "--scenario",
            "swarm",
            "--seeds",
            "4",
            "--shard",
            &format!("{i}/2"),
            "--report",
            report.to_str().unwrap(),
        ]);
        assert_exit(&out, 0);
    }
    assert_exit(&merge(&["c0", "c1"], "clean"), 0);
    // A shard that claims fewer worlds than the seeds it owns is refused, naming its file and
    // what is wrong, instead of merging into a pass over fewer seeds than the run had.
    let mut forged = read_json(&path("c1/sweep.json"));
    forged["summary"]["worlds"] = serde_json::json!(0);
    forged["summary"]["passed"] = serde_json::json!(0);
    std::fs::write(path("c1/sweep.json"), forged.to_string()).unwrap();
    let out = merge(&["c0", "c1"], "forged");
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("c1/sweep.json") && err.contains("shard 1/2 owns 2 world(s), its summary counts 0"), "{err}");
    // Reports of different runs do not merge.
    let out = merge(&["c0", "s1"], "mixed");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("are reports of different runs"), "{}", stderr(&out));
}

fn scenario_text(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(format!("{name}.toml")),
    )
    .unwrap()
}

/// `--require-coverage` passes when the scenario's faults fire; when the same scenario has its
/// faults switched off and no world failed, the sweep is inconclusive (exit 3, verdict
/// `inconclusive` with the missing events in sweep.json, a skipped case in junit.xml), naming the
/// events; the coverage table is printed and reported.
#[test]
fn a_scenario_with_its_faults_off_fails_its_coverage_requirement() {
    let dir = tempfile::tempdir().unwrap();
    let on = scenario_text("mid-call-takeover");
    // Switched off: the table goes (a kind off with a rate names a fault that could never fire).
    let off = on.split("[faults.takeover]").next().unwrap_or_default().to_owned();
    assert_ne!(on, off, "the scenario file changed shape; update this test");
    for (text, code) in [(&on, 0), (&off, 3)] {
        let path = dir.path().join("mid-call-takeover.toml");
        std::fs::write(&path, text).unwrap();
        let report = dir.path().join(format!("r{code}"));
        let out = fencesim(&[
            "sweep",
            "--scenario",
            path.to_str().unwrap(),
            "--seeds",
            "6",
            "--require-coverage",
            "--report",
            report.to_str().unwrap(),
        ]);
        assert_exit(&out, code);
        let text = stdout(&out);
        assert!(text.starts_with("coverage event"), "{text}");
        let doc = read_json(&report.join("sweep.json"));
        let takeovers = doc["coverage"].as_array().unwrap().iter().any(|c| c["event"] == "takeover-mid-append");
        assert_eq!(takeovers, code == 0, "{doc}");
        let verdict = doc["summary"]["verdict"].as_str();
        assert_eq!(verdict, Some(if code == 0 { "pass" } else { "inconclusive" }), "{doc}");
        let junit = std::fs::read_to_string(report.join("junit.xml")).unwrap();
        assert_eq!(junit.contains("<skipped message=\"inconclusive: "), code == 3, "{junit}");
        assert!(junit.contains("failures=\"0\""), "{junit}");
        if code == 3 {
            let line = text.lines().find(|l| l.starts_with("COVERAGE: ")).unwrap_or_else(|| panic!("{text}"));
            assert!(line.contains("takeover-mid-append") && line.contains("takeover-mid-put_meta"), "{line}");
            let missing = doc["summary"]["missing_coverage"].as_array().unwrap();
            assert!(missing.iter().any(|e| e == "takeover-mid-append"), "{doc}");
        }
    }
}

/// Replay shards merge like sweep shards, in corpus order, also for a folder of plans (whose
/// entries have no line to order by): the merged report equals the unsharded replay apart from
/// wall-clock fields. A refused merge removes the reports an earlier merge left in `--out`, and
/// `--out` may not be one of the shard folders (merging would replace a shard's report).
#[test]
fn replay_shards_of_a_plan_folder_merge_into_the_unsharded_report() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let plans = path("plans");
    std::fs::create_dir(&plans).unwrap();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../seeds/regressions");
    let mut names: Vec<_> = std::fs::read_dir(&source).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    for name in names.iter().take(4) {
        std::fs::copy(source.join(name), plans.join(name)).unwrap();
    }
    let replay = |extra: &[&str], report: &str| {
        let report = path(report);
        fencesim(&[&["replay", plans.to_str().unwrap(), "--report", report.to_str().unwrap()][..], extra].concat())
    };
    let merge = |names: &[&str], out: &str| {
        let dirs: Vec<String> = names.iter().map(|n| path(n).to_str().unwrap().to_owned()).collect();
        let out = path(out);
        fencesim(
            &[&["merge"][..], &dirs.iter().map(String::as_str).collect::<Vec<_>>(), &["--out", out.to_str().unwrap()]]
                .concat(),
        )
    };
    // Without wall-clock fields, also each world's.
    let timeless_replay = |report: &str| {
        let mut doc = timeless(read_json(&path(report).join("replay.json")));
        doc["worlds"].as_array_mut().unwrap().iter_mut().for_each(|w| w["seconds"] = serde_json::Value::Null);
        doc
    };
    assert_exit(&replay(&[], "whole"), 0);
    for i in 0..2 {
        assert_exit(&replay(&["--shard", &format!("{i}/2")], &format!("s{i}")), 0);
    }
    assert_exit(&merge(&["s1", "s0"], "merged"), 0);
    let whole = timeless_replay("whole");
    assert_eq!(whole["worlds"].as_array().unwrap().len(), 4);
    assert_eq!(timeless_replay("merged"), whole);
    assert_eq!(junit_cases(&path("merged/junit.xml")), junit_cases(&path("whole/junit.xml")));

    let out = merge(&["s0"], "merged");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("missing shards: 1/2 (of 2)"), "{}", stderr(&out));
    assert!(!path("merged/replay.json").exists() && !path("merged/junit.xml").exists(), "stale reports left");
    let out = merge(&["s0", "s1"], "s0");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("is one of the shard folders"), "{}", stderr(&out));
    assert!(path("s0/replay.json").is_file(), "the shard's report was lost");
}

/// `merge --require-coverage` judges the fleet, not a shard: the merged coverage table must hold
/// every event the scenario aims at. The same scenario with its faults switched off is
/// inconclusive (exit 3, verdict `inconclusive`), naming the events no shard produced; the aims
/// travel in the reports.
#[test]
fn merged_shards_are_held_to_the_scenarios_coverage() {
    let dir = tempfile::tempdir().unwrap();
    let on = scenario_text("mid-call-takeover");
    // Switched off: the table goes (a kind off with a rate names a fault that could never fire).
    let off = on.split("[faults.takeover]").next().unwrap_or_default().to_owned();
    for (name, text, code) in [("on", &on, 0), ("off", &off, 3)] {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let mut shards = Vec::new();
        for shard in ["0/2", "1/2"] {
            let report = dir.path().join(format!("{name}-{}", &shard[..1]));
            let args = ["sweep", "--scenario", path.to_str().unwrap(), "--seeds", "6", "--shard", shard];
            let out = fencesim(&[&args[..], &["--report", report.to_str().unwrap()]].concat());
            assert_exit(&out, 0);
            assert!(read_json(&report.join("sweep.json"))["aims"].as_array().is_some_and(|a| !a.is_empty()));
            shards.push(report.to_str().unwrap().to_owned());
        }
        let merged = dir.path().join(format!("{name}-merged"));
        let shards: Vec<&str> = shards.iter().map(String::as_str).collect();
        let out =
            fencesim(&[&["merge"], &shards[..], &["--out", merged.to_str().unwrap(), "--require-coverage"]].concat());
        assert_exit(&out, code);
        let text = stdout(&out);
        let line = text.lines().find(|l| l.starts_with("COVERAGE: "));
        assert_eq!(line.is_some(), code == 3, "{text}");
        let doc = read_json(&merged.join("sweep.json"));
        assert_eq!(doc["summary"]["verdict"], if code == 0 { "pass" } else { "inconclusive" }, "{doc}");
        if let Some(line) = line {
            assert!(line.contains("takeover-mid-append") && line.contains("never happened in any shard"), "{line}");
        }
    }
}

/// A scenario whose faults can never fire, or with nothing to do, is refused with its line;
/// the same scenario without the flaw runs.
#[test]
fn a_scenario_whose_faults_cannot_fire_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |aims: &str, runs: &str, stall: &str| {
        format!(
            "description = \"x\"\naims = [{aims}]\n[world]\nworkers = 2\nruns = {runs}\n[faults.stall]\non = 1.0\nrate = [0.1, 0.2]\n{stall}\n"
        )
    };
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, scenario("\"stall-woke-writing\"", "[2, 3]", "")).unwrap();
    assert_exit(&fencesim(&["sweep", "--scenario", path.to_str().unwrap(), "--seeds", "1"]), 0);
    let cases = [
        (scenario("", "[2, 3]", "sites = []"), "bad.toml:9: faults.stall.sites: is empty"),
        (scenario("", "[2, 3]", "nodes = [\"w3\"]"), "bad.toml:9: faults.stall.nodes: 'w3' does not exist"),
        (scenario("", "[2, 3]", "nodes = [\"sweeper\"]"), "'sweeper' does not exist"),
        (scenario("", "[2, 3]", "factor = [0.0, 2.0]"), "faults.stall.factor: must be above 0"),
        (scenario("", "0", ""), "bad.toml:5: world.runs: must be at least 1"),
        (scenario("\"no-such-event\"", "[2, 3]", ""), "bad.toml:2: aims: unknown coverage event 'no-such-event'"),
    ];
    for (text, message) in cases {
        std::fs::write(&path, &text).unwrap();
        let out = fencesim(&["sweep", "--scenario", path.to_str().unwrap(), "--seeds", "1"]);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(message), "{message}: {err}");
    }
}

/// The janitor makes the process root itself and says where (its path, then a NUL), so the root
/// never exists without the process that removes it: made by the parent first, a `SIGKILL` between
/// the folder and the janitor's start left it behind. Its parent gone (the pipe at EOF), it
/// removes the root, also when the parent died before reading where it was.
#[test]
fn the_janitor_makes_the_root_says_where_and_removes_it_when_its_parent_is_gone() {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::ffi::OsStringExt;
    for read_first in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let mut janitor = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .arg("janitor")
            .arg(tmp.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the janitor");
        let mut said = Vec::new();
        let mut stdout = BufReader::new(janitor.stdout.take().unwrap());
        if read_first {
            stdout.read_until(0, &mut said).unwrap();
            assert_eq!(said.pop(), Some(0), "the path ends in a NUL");
            let root = std::path::PathBuf::from(std::ffi::OsString::from_vec(said));
            assert!(root.is_dir() && root.starts_with(tmp.path()), "{}", root.display());
            std::fs::write(root.join("a file"), "x").unwrap();
        }
        drop(janitor.stdin.take());
        let status = janitor.wait().unwrap();
        assert!(status.success(), "{status}");
        let mut rest = Vec::new();
        stdout.read_to_end(&mut rest).unwrap();
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "read the path first: {read_first}; left behind {left:?}");
    }
}
