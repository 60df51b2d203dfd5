//! The plan as a file, end to end: for every built-in scenario the world run from the plan of a
//! seed is the same world as the seed (same fingerprint and trace); `fencesim plan` prints a plan
//! that `fencesim run --plan` runs to the same bytes; a hand-edited plan that is wrong exits 2
//! with one line naming the file and line.

use fencesim_sim::catalogue;
use fencesim_sim::scenario::planfile::PlanFile;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};

use crate::cli;

use cli::{assert_exit, fencesim, stderr, stdout};

#[test]
fn a_plan_runs_the_same_world_as_its_seed_for_every_scenario() {
    for (name, _) in catalogue::SCENARIOS {
        let scenario = catalogue::scenario(name).expect("built in");
        for seed in [1, 2] {
            let from_seed = WorldConfig {
                scenario: scenario.clone(),
                seed,
                db: DbKind::Memdb,
                store_defects: Default::default(),
                engine_defects: Default::default(),
                keep_db: None,
                adapter: None,
            };
            let file = PlanFile::draw(&scenario, seed, &[]);
            let parsed = PlanFile::parse(std::path::Path::new("p.toml"), &file.to_toml()).expect("parses");
            let from_plan = WorldConfig { scenario: parsed.scenario("p.toml"), seed: parsed.seed, ..from_seed.clone() };
            let a = world::run(&from_seed).expect("runs");
            let b = world::run(&from_plan).expect("runs");
            assert_eq!(a.fingerprint, b.fingerprint, "{name} seed {seed}");
            assert_eq!(a.config, b.config, "{name} seed {seed}");
            assert_eq!(a.rows.len(), b.rows.len(), "{name} seed {seed}");
        }
    }
}

/// A scenario may aim a fault at a worker its `workers` range allows but a seed does not draw
/// (`workers = [2, 5]`, `nodes = ["w5"]`): the plan of every seed still parses and runs the same
/// world as the seed (same fingerprint), its faults aimed at the workers the seed drew, a fault
/// aimed at none of them off (before, the plan of such a seed was refused by `run --plan`, and so
/// was its failure bundle's repro).
#[test]
fn a_plan_of_a_seed_that_drew_fewer_workers_than_its_faults_name_runs_the_same_world() {
    let text = "description = \"faults aimed at workers some seeds do not draw\"\n\
        [world]\nfault_ms = 4000\nworkers = [2, 5]\nruns = [3, 5]\n\
        [faults.busy]\non = 1.0\nrate = [0.05, 0.2]\nnodes = [\"w5\"]\n\
        [faults.crash]\non = 1.0\nrate = [0.01, 0.02]\nnodes = [\"w1\", \"w4\"]\n\
        [faults.takeover]\non = 1.0\nrate = [0.01, 0.05]\nnodes = [\"w3\", \"w5\"]\n";
    let scenario = fencesim_sim::scenario::Scenario::parse(std::path::Path::new("aimed.toml"), text).expect("valid");
    let mut fewer = 0;
    for seed in 1..=8 {
        let from_seed = WorldConfig {
            scenario: scenario.clone(),
            seed,
            db: DbKind::Memdb,
            store_defects: Default::default(),
            engine_defects: Default::default(),
            keep_db: None,
            adapter: None,
        };
        let file = PlanFile::draw(&scenario, seed, &[]);
        fewer += usize::from(file.plan.workers.len() < 5);
        let parsed = PlanFile::parse(std::path::Path::new("p.toml"), &file.to_toml())
            .unwrap_or_else(|e| panic!("seed {seed}: the plan of the seed is refused: {e}"));
        let from_plan = WorldConfig { scenario: parsed.scenario("p.toml"), seed: parsed.seed, ..from_seed.clone() };
        let a = world::run(&from_seed).expect("runs");
        let b = world::run(&from_plan).expect("runs");
        assert_eq!(a.fingerprint, b.fingerprint, "seed {seed}");
        assert_eq!(a.config, b.config, "seed {seed}");
    }
    assert!(fewer >= 2, "only {fewer} of 8 seeds drew fewer than 5 workers: the test tests nothing");
}

#[test]
fn plan_then_run_plan_prints_the_same_world() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    let seed_args = ["--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"];
    let plan = fencesim(&[&["plan"][..], &seed_args].concat());
    assert_exit(&plan, 0);
    std::fs::write(&path, &plan.stdout).unwrap();
    let by_seed = fencesim(&[&["run"][..], &seed_args, &["--trace"]].concat());
    let by_plan = fencesim(&["run", "--plan", path.to_str().unwrap(), "--trace"]);
    assert_exit(&by_seed, 1);
    assert_exit(&by_plan, 1);
    let body = |s: String| s.lines().filter(|l| !l.contains("repro:")).collect::<Vec<_>>().join("\n");
    assert_eq!(body(stdout(&by_seed)), body(stdout(&by_plan)));
    assert!(
        stdout(&by_plan).contains(&format!("repro: fencesim run --plan {}", path.display())),
        "{}",
        stdout(&by_plan)
    );

    let text = String::from_utf8(plan.stdout).unwrap();
    let line = text.lines().position(|l| l.starts_with("workers = ")).unwrap() + 1;
    std::fs::write(&path, text.replace("workers = [\"w1\"", "workers = [\"x1\"")).unwrap();
    let bad = fencesim(&["run", "--plan", path.to_str().unwrap()]);
    assert_exit(&bad, 2);
    let err = stderr(&bad);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("p.toml:{line}: world.workers: 'x1'")), "{err}");
    let both = fencesim(&["run", "--plan", path.to_str().unwrap(), "--seed", "3"]);
    assert_exit(&both, 2);
}

/// shrink -> promote -> replay: the minimal plan fails the same checker in a fresh process, is
/// kept with its story, and a replay of the folder passes because it still fails; the same plan
/// without its defect makes the replay fail (an expected failure can be missed).
#[test]
fn shrink_promote_replay() {
    let dir = tempfile::tempdir().unwrap();
    let min = dir.path().join("min.toml");
    let min_s = min.to_str().unwrap();
    let world = ["--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"];
    let out = fencesim(&[&["shrink"][..], &world, &["--out", min_s]].concat());
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("keeps failing no-stale-acceptance"), "{text}");
    assert!(text.contains(&format!("repro: fencesim run --plan {min_s} --trace")), "{text}");
    // A 0 s budget stops the original world itself: nothing is known to shrink.
    let hurried = fencesim(&[&["shrink"][..], &world, &["--budget-s", "0"]].concat());
    assert_exit(&hurried, 2);
    assert!(
        stderr(&hurried).contains("the 0 s budget ran out before the original world finished"),
        "{}",
        stderr(&hurried)
    );
    let unbounded = fencesim(&[&["shrink"][..], &world, &["--budget-s", "18446744073709551615"]].concat());
    assert_exit(&unbounded, 2);
    assert!(
        stderr(&unbounded).contains("--budget-s") && !stderr(&unbounded).contains("panic"),
        "{}",
        stderr(&unbounded)
    );
    let again = fencesim(&[&["shrink"][..], &world, &["--out", min_s]].concat());
    assert_exit(&again, 2);
    assert!(stderr(&again).contains("refusing to overwrite"), "{}", stderr(&again));

    let run = fencesim(&["run", "--plan", min_s, "--format", "json"]);
    assert_exit(&run, 1);
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(doc["violations"][0]["checker"], "no-stale-acceptance");

    let kept = dir.path().join("regressions");
    let kept_s = kept.to_str().unwrap();
    let promote = fencesim(&["promote", "--plan", min_s, "--story", "D3 planted", "--dir", kept_s]);
    assert_exit(&promote, 0);
    let report = dir.path().join("report");
    let replay = fencesim(&["replay", kept_s, "--report", report.to_str().unwrap()]);
    assert_exit(&replay, 0);
    assert!(stdout(&replay).contains("1 passed"), "{}", stdout(&replay));

    let plan = std::fs::read_dir(&kept).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains("story = \"D3 planted\""), "{text}");
    std::fs::write(&plan, text.replace("defects = [\"non-atomic-fence\"]", "defects = []")).unwrap();
    let missed = fencesim(&["replay", kept_s, "--report", report.to_str().unwrap()]);
    assert_exit(&missed, 1);
    assert!(stdout(&missed).contains("expected no-stale-acceptance to fail, got a pass"), "{}", stdout(&missed));

    // The same plan, which now passes, is not promoted: it would fail the replay that keeps it.
    let passing = dir.path().join("passing.toml");
    std::fs::copy(&plan, &passing).unwrap();
    let refused =
        fencesim(&["promote", "--plan", passing.to_str().unwrap(), "--story", "x", "--dir", kept_s, "--force"]);
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("does not fail no-stale-acceptance, its `expect` (it passes)"),
        "{}",
        stderr(&refused)
    );
    // A scenario name is a name, never a path: the kept file stays in --dir.
    let text = std::fs::read_to_string(&min).unwrap();
    let scenario = text.lines().find(|l| l.starts_with("scenario = ")).unwrap();
    let escaping = dir.path().join("escaping.toml");
    std::fs::write(&escaping, text.replace(scenario, "scenario = \"../../escaped\"")).unwrap();
    let out = fencesim(&["promote", "--plan", escaping.to_str().unwrap(), "--story", "x", "--dir", kept_s]);
    assert_exit(&out, 0);
    assert!(kept.join("non-atomic-fence-______escaped-seed1.toml").is_file(), "{}", stdout(&out));
}

/// An error quoting a file's contents stays one line of plain text: a run id holding an escape
/// sequence and a line break is shown escaped, never sent to the terminal.
#[test]
fn an_error_quoting_control_characters_shows_them_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let plan = fencesim(&["plan", "--scenario", "swarm", "--seed", "3"]);
    assert_exit(&plan, 0);
    let text = stdout(&plan).replacen("id = \"r01\"", "id = \"r\\u001b[31m 01\\n\"", 1);
    let path = dir.path().join("evil.toml");
    std::fs::write(&path, text).unwrap();
    let out = fencesim(&["run", "--plan", path.to_str().unwrap()]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(!err.trim_end().chars().any(char::is_control), "a raw control character: {err:?}");
    assert!(err.contains("r\\u{1b}[31m 01"), "{err:?}");
}

/// A scenario file whose name holds control characters (an escape sequence) never reaches the
/// terminal raw: `sweep` and `run` print its name escaped.
#[test]
fn a_scenario_file_name_with_control_characters_is_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evil\u{1b}[31mred\u{7}.toml");
    std::fs::write(&path, "description = \"x\"\n[world]\nworkers = 2\nruns = 2\n").unwrap();
    for args in [&["sweep", "--seeds", "1", "--scenario"][..], &["run", "--seed", "1", "--scenario"][..]] {
        let out = fencesim(&[args, &[path.to_str().unwrap()]].concat());
        assert_exit(&out, 0);
        let text = stdout(&out);
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "a raw control character: {text:?}");
        assert!(text.contains("evil\\u{1b}[31mred\\u{7}"), "{text:?}");
    }
}

/// Every shipped regression plan parses and names the checker it must keep failing.
#[test]
fn the_shipped_regression_plans_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../seeds/regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = PlanFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(file.expect.is_some() && file.story.is_some(), "{} lacks expect or story", path.display());
        n += 1;
    }
    assert!(n >= 1, "no regression plan in {}", dir.display());
}

/// `shrink --budget-s` is a hard stop, inside a world too: a 1 s budget on a world of 5,000 runs
/// (about a minute in a debug build) ends within seconds, saying the original world did not
/// finish, instead of running it (and then its candidates) to the end.
#[test]
#[allow(clippy::disallowed_methods, reason = "the test measures a real process in wall time")]
fn a_shrink_budget_stops_a_long_world() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("big.toml");
    std::fs::write(
        &scenario,
        "description = \"big\"\n[world]\nworkers = [4, 4]\nruns = [5000, 5000]\n\
         [faults.takeover]\non = 1.0\nrate = [0.1, 0.1]\n",
    )
    .unwrap();
    let start = std::time::Instant::now();
    let out = fencesim(&[
        "shrink",
        "--scenario",
        scenario.to_str().unwrap(),
        "--seed",
        "1",
        "--defect",
        "non-atomic-fence",
        "--budget-s",
        "1",
    ]);
    let seconds = start.elapsed().as_secs_f64();
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("the 1 s budget ran out before the original world finished"), "{}", stderr(&out));
    assert!(seconds < 30.0, "a 1 s budget took {seconds:.1} s");
}

/// `shrink --kill-matrix` keeps its minimal plans in a temporary folder inside the process root,
/// so nothing is left behind however it ends: a `SIGINT` (the handler removes the root, exit 130)
/// or a `SIGKILL` (the root's janitor removes it).
#[test]
#[allow(clippy::disallowed_methods, reason = "the test watches a real process in wall time")]
fn the_kill_matrix_leaves_no_folder_behind_when_killed() {
    use std::time::{Duration, Instant};
    for signal in [nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGKILL] {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(["shrink", "--kill-matrix", "--seeds", "1", "--budget-s", "5"])
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Readiness: the plans' folder exists (in the root, or, before the fix, beside it).
        let entries = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
            std::fs::read_dir(dir).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default()
        };
        let name = |p: &std::path::Path| p.file_name().unwrap().to_string_lossy().into_owned();
        let ready = || {
            entries(tmp.path()).iter().any(|p| {
                name(p).starts_with(".tmp") || entries(p).iter().any(|q| name(q).starts_with("fencesim-shrink-"))
            })
        };
        let start = Instant::now();
        while !ready() {
            assert!(start.elapsed() < Duration::from_secs(60), "{signal}: no plans folder appeared");
            std::thread::sleep(Duration::from_millis(5));
        }
        if signal == nix::sys::signal::Signal::SIGKILL {
            child.kill().unwrap();
        } else {
            assert!(cli::signal_while_running(&mut child, signal), "{signal}: it ended before the signal");
        }
        let status = child.wait().unwrap();
        assert!(signal == nix::sys::signal::Signal::SIGKILL || status.code() == Some(130), "{signal}: {status:?}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !entries(tmp.path()).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(entries(tmp.path()), Vec::<std::path::PathBuf>::new(), "{signal}: left behind");
    }
}

/// A plan or a scenario naming a fault that could never fire runs nothing: exit 2, one line with
/// the file and the line (before, a zombie probe with no zombie and a kind on at rate 0 ran
/// silently, as if they were not there).
#[test]
fn a_fault_that_could_never_fire_is_refused_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = catalogue::scenario("mid-call-takeover").expect("built in");
    let text = PlanFile::draw(&scenario, 1, &[]).to_toml();
    let lines = text.lines().count();
    let plan = dir.path().join("p.toml");
    std::fs::write(&plan, format!("{text}\n[[events]]\nat_ms = 5\nkind = \"zombie\"\n")).unwrap();
    let out = fencesim(&["run", "--plan", plan.to_str().unwrap()]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("p.toml:{}: events: a zombie event at 5 ms, but faults.zombie is off", lines + 2)),
        "{err}"
    );
    assert_eq!((err.lines().count(), stdout(&out)), (1, String::new()), "{err}");

    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, "description = \"x\"\n[faults.zombie]\nrate = [1.0, 2.0]\n").unwrap();
    let out = fencesim(&["run", "--scenario", scenario.to_str().unwrap(), "--seed", "1"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("s.toml:3: faults.zombie.rate: [1, 2] is set, but zombie is off"),
        "{}",
        stderr(&out)
    );
}
