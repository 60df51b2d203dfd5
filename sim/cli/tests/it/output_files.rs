//! The files fencesim writes, end to end: a flag's path is a path, never a SQLite URI; an existing
//! output file is refused unless `--force`, a directory or a symbolic link always; a report folder
//! never keeps an earlier run's verdict past a harness error, nor writes through a symbolic link;
//! a printed repro command is shell-quoted, so pasted into `sh` it runs the same world.

use std::path::Path;
use std::process::{Command, Output};

use crate::cli;

use cli::{assert_exit, stderr, stdout};

fn fencesim_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).current_dir(dir).args(args).output().expect("run fencesim")
}

fn assert_refused(out: &Output, needles: &[&str]) {
    assert_exit(out, 2);
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    for needle in needles {
        assert!(err.contains(needle), "expected {needle:?} in {err}");
    }
}

const RUN: [&str; 5] = ["run", "--scenario", "swarm", "--seed", "3"];

fn run_with(dir: &Path, extra: &[&str]) -> Output {
    fencesim_in(dir, &[&RUN[..], extra].concat())
}

/// `--keep-db file:kept.db` names a file of that name: the database `kept.db` beside it is never
/// opened, let alone overwritten, and `file:x.db?mode=memory` is saved to disk, not to memory.
#[test]
fn keep_db_takes_a_path_never_a_sqlite_uri() {
    let dir = tempfile::tempdir().unwrap();
    assert_exit(&run_with(dir.path(), &["--keep-db", "kept.db"]), 0);
    let before = std::fs::read(dir.path().join("kept.db")).unwrap();
    assert_exit(
        &fencesim_in(dir.path(), &["run", "--scenario", "boot-storm", "--seed", "1", "--keep-db", "file:kept.db"]),
        0,
    );
    assert_eq!(std::fs::read(dir.path().join("kept.db")).unwrap(), before, "kept.db was written through a URI");
    let literal = std::fs::read(dir.path().join("file:kept.db")).expect("a file named file:kept.db");
    assert!(literal.starts_with(b"SQLite format 3\0"));
    assert_exit(&run_with(dir.path(), &["--keep-db", "file:x.db?mode=memory"]), 0);
    assert!(dir.path().join("file:x.db?mode=memory").is_file(), "the memory URI was not saved as a file");
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 3, "only the three databases, no temporary file: {names:?}");
}

/// An existing file is refused without `--force` (unchanged) and replaced with it; a directory
/// and a symbolic link are refused even with `--force`, and the link's target is untouched.
#[test]
fn outputs_refuse_existing_files_without_force_and_directories_and_links_always() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("target.txt"), "keep me").unwrap();
    std::os::unix::fs::symlink(p.join("target.txt"), p.join("link")).unwrap();
    std::fs::create_dir(p.join("folder")).unwrap();
    for flag in ["--keep-db", "--html"] {
        std::fs::write(p.join("old"), "old").unwrap();
        assert_refused(&run_with(p, &[flag, "old"]), &[flag, "old", "exists", "--force"]);
        assert_eq!(std::fs::read_to_string(p.join("old")).unwrap(), "old");
        assert_exit(&run_with(p, &[flag, "old", "--force"]), 0);
        assert_ne!(std::fs::read_to_string(p.join("old")).unwrap_or_default(), "old", "{flag} --force did not replace");
        assert_refused(&run_with(p, &[flag, "folder", "--force"]), &[flag, "folder", "is a directory"]);
        assert_refused(&run_with(p, &[flag, "link", "--force"]), &[flag, "link", "symbolic link"]);
        assert_eq!(std::fs::read_to_string(p.join("target.txt")).unwrap(), "keep me");
        std::fs::remove_file(p.join("old")).unwrap();
    }
    let plan = fencesim_in(p, &["plan", "--scenario", "swarm", "--seed", "3"]);
    assert_exit(&plan, 0);
    std::fs::write(p.join("plan.toml"), &plan.stdout).unwrap();
    assert_refused(
        &fencesim_in(p, &["shrink", "--plan", "plan.toml", "--out", "link", "--force"]),
        &["--out", "symbolic link"],
    );
}

/// Every output a command names is checked before the world runs, so a refusal leaves nothing
/// behind: not the kept database of a run whose page has no folder to go to, nor of a run whose
/// bundle folder is a file, nor a page and a database written over each other; a sweep whose
/// bundle folder is a file is refused before its first seed.
#[test]
fn every_output_is_checked_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("afile"), "keep").unwrap();
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--keep-db", "new.db", "--html", "nodir/x.html"], &["--html", "its folder does not exist"]),
        (&["--keep-db", "new.db", "--html", "new.db"], &["--keep-db and --html name the same path"]),
        (&["--keep-db", "new.db", "--bundle", "afile"], &["afile", "is not a folder"]),
        (&["--keep-db", "new.db", "--shrink", "--bundle", "afile"], &["afile", "is not a folder"]),
    ];
    for (extra, needles) in cases {
        assert_refused(&run_with(p, extra), needles);
        assert!(!p.join("new.db").exists(), "{extra:?} wrote the kept database");
    }
    let sweep = ["sweep", "--scenario", "mid-call-takeover", "--seeds", "3", "--defect", "non-atomic-fence"];
    let out = fencesim_in(p, &[&sweep[..], &["--bundle", "afile", "--report", "r"]].concat());
    assert_refused(&out, &["afile", "is not a folder"]);
    assert_eq!(stdout(&out), "", "no seed ran");
    assert_eq!(std::fs::read_to_string(p.join("afile")).unwrap(), "keep");
}

/// A bundle that cannot be written (here: a bundle of the same world is already there) is a
/// harness error (exit 2, verdict `error`) that leaves the counts whole: the failing worlds still
/// count as failed, and passed never wraps below zero.
#[test]
fn a_bundle_that_cannot_be_written_is_a_harness_error_with_whole_counts() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let sweep = ["sweep", "--scenario", "mid-call-takeover", "--seeds", "3", "--defect", "non-atomic-fence"];
    let out = fencesim_in(p, &[&sweep[..], &["--bundle", "bundles"]].concat());
    assert_exit(&out, 1);
    let out = fencesim_in(p, &[&sweep[..], &["--bundle", "bundles", "--report", "r"]].concat());
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("bundle(s) could not be written; the first, seed "), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("r/sweep.json")).unwrap()).unwrap();
    let s = &doc["summary"];
    assert_eq!((&s["verdict"], &s["worlds"], &s["errors"]), (&"error".into(), &3.into(), &0.into()), "{doc}");
    let failed = s["failed"].as_u64().unwrap();
    assert!(failed > 0 && s["passed"].as_u64().unwrap() + failed == 3, "{doc}");
}

/// A sweep that ends in a harness error (its file worlds cannot make a temporary folder) leaves
/// no earlier `sweep.json` saying "pass"; a report file that is a symbolic link is replaced by a
/// file, never written through.
#[test]
fn a_report_folder_never_keeps_a_stale_verdict_or_writes_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let reports_arg = reports.to_str().unwrap();
    let sweep = ["sweep", "--scenario", "boot-storm", "--seeds", "2", "--jobs", "1", "--report", reports_arg];
    let outside = dir.path().join("outside.xml");
    std::fs::write(&outside, "not yours").unwrap();
    std::fs::create_dir(&reports).unwrap();
    std::os::unix::fs::symlink(&outside, reports.join("junit.xml")).unwrap();
    assert_exit(&fencesim_in(dir.path(), &sweep), 0);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not yours", "written through the link");
    assert!(!std::fs::symlink_metadata(reports.join("junit.xml")).unwrap().file_type().is_symlink());
    assert!(reports.join("sweep.json").is_file());

    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(dir.path())
        .env("TMPDIR", dir.path().join("no-such-folder"))
        .args([&sweep[..], &["--db", "file"]].concat())
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(doc["summary"]["verdict"], "error", "{doc}");
    assert_eq!(doc["summary"]["errors"], 2, "{doc}");

    // A harness error before any report is written (the scenario refused after the folder was
    // cleared is the same path) leaves no earlier verdict: replay clears its folder first.
    std::fs::write(reports.join("replay.json"), "{\"summary\":{\"verdict\":\"pass\"}}").unwrap();
    std::fs::write(dir.path().join("corpus.txt"), "boot-storm 1\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(dir.path())
        .env("TMPDIR", dir.path().join("no-such-folder"))
        .args(["replay", "corpus.txt", "--db", "file", "--report", reports_arg])
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(!reports.join("replay.json").exists(), "an earlier replay's pass is left looking current");

    // Refused input goes the same way: an unknown scenario, a malformed corpus.
    assert_exit(&fencesim_in(dir.path(), &sweep), 0);
    let out = fencesim_in(dir.path(), &["sweep", "--scenario", "no-such", "--report", reports_arg]);
    assert_exit(&out, 2);
    assert!(!reports.join("sweep.json").exists(), "an earlier sweep's pass is left looking current");
    std::fs::write(reports.join("replay.json"), "{\"summary\":{\"verdict\":\"pass\"}}").unwrap();
    std::fs::write(dir.path().join("bad.txt"), "boot-storm one\n").unwrap();
    assert_exit(&fencesim_in(dir.path(), &["replay", "bad.txt", "--report", reports_arg]), 2);
    assert!(!reports.join("replay.json").exists(), "an earlier replay's pass is left looking current");
}

/// A failing world read from a scenario file whose path has a space and a quote prints a repro
/// that `sh` runs as the same world (exit 1, the same fingerprint).
#[test]
fn a_printed_repro_is_shell_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("my scenarios");
    std::fs::create_dir(&folder).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/mid-call-takeover.toml");
    let scenario = folder.join("it's here.toml");
    std::fs::copy(source, &scenario).unwrap();
    let scenario_arg = scenario.to_str().unwrap();
    let (out, repro) = (1..=8)
        .find_map(|seed| {
            let seed = seed.to_string();
            let out = fencesim_in(
                dir.path(),
                &["run", "--scenario", scenario_arg, "--seed", &seed, "--defect", "non-atomic-fence"],
            );
            let text = stdout(&out);
            let repro = text.lines().find_map(|l| l.trim().strip_prefix("repro: ").map(str::to_owned))?;
            Some((out, repro))
        })
        .expect("a failing seed in 1..=8");
    assert_exit(&out, 1);
    assert!(repro.contains("/it'\\''s here.toml' --seed"), "{repro}");
    let rerun = Command::new("sh")
        .current_dir(dir.path())
        .env("FENCESIM", env!("CARGO_BIN_EXE_fencesim"))
        .arg("-c")
        .arg(format!("fencesim() {{ \"$FENCESIM\" \"$@\"; }}; {repro}"))
        .output()
        .unwrap();
    assert_exit(&rerun, 1);
    let fingerprint = |text: &str| text.split("(fingerprint ").nth(1).map(|s| s[..16].to_owned());
    assert_eq!(fingerprint(&stdout(&rerun)), fingerprint(&stdout(&out)), "{}", stdout(&rerun));
}

/// Outputs are compared as files, never by spelling: two flags naming one file (`same.db` and
/// `./same.db`), an output over the plan or scenario the command reads, a report folder over
/// the corpus being replayed, a regression over the plan it is promoted from, and a soak's kept
/// folder that is its report folder are refused (exit 2) before anything runs, every input
/// untouched.
#[test]
fn an_output_is_never_another_output_nor_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let out = run_with(p, &["--keep-db", "same.db", "--html", "./same.db", "--force"]);
    assert_refused(&out, &["--keep-db and --html name the same path"]);
    assert!(!p.join("same.db").exists(), "something was written");

    let plan =
        fencesim_in(p, &["plan", "--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"]);
    assert_exit(&plan, 0);
    std::fs::write(p.join("victim.toml"), &plan.stdout).unwrap();
    std::fs::hard_link(p.join("victim.toml"), p.join("alias.toml")).unwrap();
    let cases: [&[&str]; 4] = [
        &["run", "--plan", "victim.toml", "--keep-db", "victim.toml", "--force"],
        &["run", "--plan", "victim.toml", "--html", "alias.toml", "--force"],
        &["shrink", "--plan", "victim.toml", "--out", "./victim.toml", "--force"],
        &["run", "--scenario", "victim.toml", "--seed", "1", "--keep-db", "alias.toml", "--force"],
    ];
    for args in cases {
        let out = fencesim_in(p, args);
        assert_refused(&out, &["would write over the", "victim.toml"]);
        assert_eq!(std::fs::read(p.join("victim.toml")).unwrap(), plan.stdout, "{args:?} changed the plan");
    }

    // A regression promoted over the very plan it is read from.
    std::fs::create_dir(p.join("regs")).unwrap();
    let kept = p.join("regs/non-atomic-fence-mid-call-takeover-seed1.toml");
    let text =
        String::from_utf8_lossy(&plan.stdout).replacen("seed = 1\n", "seed = 1\nexpect = \"no-stale-acceptance\"\n", 1);
    std::fs::write(&kept, &text).unwrap();
    let kept_arg = kept.to_str().unwrap();
    let out = fencesim_in(p, &["promote", "--plan", kept_arg, "--dir", "regs", "--story", "x", "--force"]);
    assert_refused(&out, &["would write over the --plan file"]);
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), text);

    // A corpus that is one of the report files replay would clear first.
    std::fs::create_dir(p.join("r")).unwrap();
    std::fs::write(p.join("r/junit.xml"), "boot-storm 1\n").unwrap();
    let out = fencesim_in(p, &["replay", "r/junit.xml", "--report", "r"]);
    assert_refused(&out, &["--report r/junit.xml would write over the corpus"]);
    assert_eq!(std::fs::read_to_string(p.join("r/junit.xml")).unwrap(), "boot-storm 1\n");

    let out =
        fencesim_in(p, &["sweep", "--scenario", "boot-storm", "--seeds", "1", "--report", "x", "--bundle", "./x"]);
    assert_refused(&out, &["--bundle and --report name the same path"]);
    let out = fencesim_in(p, &["soak", "--cap-s", "1", "--report", "k", "--keep", "k/"]);
    assert_refused(&out, &["--keep and --report name the same path"]);
    assert!(!p.join("x").exists() && !p.join("k").exists(), "a folder was made");
}

/// Every output folder is checked writable before anything runs (`/proc` takes no new file, even
/// for root): a kept database, a page, a shrunk plan, a bundle folder, a report folder; a bundle
/// folder that is a dangling symbolic link is named as one, not as `File exists`.
#[test]
fn an_output_folder_that_cannot_be_written_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let out = run_with(p, &["--keep-db", "new.db", "--html", "/proc/fencesim-page.html"]);
    assert_refused(&out, &["--html /proc/fencesim-page.html", "not writable"]);
    assert!(!p.join("new.db").exists(), "the world ran and kept its database");
    assert_refused(&run_with(p, &["--keep-db", "/proc/fencesim.db"]), &["--keep-db", "not writable"]);
    let out = fencesim_in(p, &["shrink", "--scenario", "swarm", "--seed", "3", "--out", "/proc/min.toml"]);
    assert_refused(&out, &["--out /proc/min.toml", "not writable"]);

    let sweep = ["sweep", "--scenario", "mid-call-takeover", "--seeds", "3", "--defect", "non-atomic-fence"];
    let out = fencesim_in(p, &[&sweep[..], &["--bundle", "/proc/fencesim-bundles/b"]].concat());
    assert_refused(&out, &["/proc is not writable"]);
    assert_eq!(stdout(&out), "", "a seed ran");
    std::os::unix::fs::symlink(p.join("gone"), p.join("dangling")).unwrap();
    let out = fencesim_in(p, &[&sweep[..], &["--bundle", "dangling"]].concat());
    assert_refused(&out, &["dangling is a symbolic link to nothing"]);
    assert_eq!(stdout(&out), "", "a seed ran");

    let soak = ["soak", "--level", "engine", "--cap-s", "2", "--report", "/proc/fencesim-report"];
    let out = fencesim_in(p, &soak);
    assert_refused(&out, &["--report /proc/fencesim-report"]);
    assert_eq!(stdout(&out), "", "the soak ran");
}

/// Run `fencesim` in `dir`, killing it (and failing) if it has not ended within 60 s: a command
/// that blocks on a FIFO must not hang the test.
#[allow(clippy::disallowed_methods, reason = "the test bounds a real process in wall time")]
fn fencesim_bounded(dir: &Path, args: &[&str]) -> Output {
    use std::time::{Duration, Instant};
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{args:?} still running after 60 s (blocked on a FIFO?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Every file fencesim reads may be hostile: a FIFO (whose read would block forever), a folder, or
/// an enormous file. Each is refused (exit 2, one line) promptly: a scenario, a plan, a corpus, a
/// shard report, a kept soak's manifest (soak_cli.rs holds a sealed folder to every file inside)
/// and a database, and the files SQLite opens beside a database (a FIFO as its `-wal` reached
/// SQLite, which only happened not to read it; it is now refused, named, before SQLite opens a
/// thing).
#[test]
fn a_fifo_a_folder_or_an_enormous_file_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mkfifo = |path: &Path| assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
    mkfifo(&p.join("fifo.toml"));
    std::fs::create_dir(p.join("folder.toml")).unwrap();
    let huge = std::fs::File::create(p.join("huge.toml")).unwrap();
    huge.set_len(64 * 1024 * 1024 + 1).unwrap(); // files::MAX_TEXT_BYTES + 1
    std::fs::create_dir_all(p.join("shard/sweep.json")).unwrap();
    std::fs::create_dir(p.join("kept")).unwrap();
    mkfifo(&p.join("kept/soak-manifest.json"));
    // A WAL database, closed (its WAL checkpointed away), then a FIFO where its WAL goes.
    let conn = rusqlite::Connection::open(p.join("wal.db")).unwrap();
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(())).unwrap();
    conn.execute("CREATE TABLE t (x)", []).unwrap();
    drop(conn);
    mkfifo(&p.join("wal.db-wal"));
    let cases: [(&[&str], &str); 10] = [
        (&["run", "--scenario", "fifo.toml", "--seed", "1"], "not a regular file"),
        (&["sweep", "--scenario", "fifo.toml", "--seeds", "1"], "not a regular file"),
        (&["run", "--plan", "folder.toml"], "is a folder"),
        (&["run", "--plan", "fifo.toml"], "not a regular file"),
        (&["shrink", "--plan", "huge.toml"], "more than the 67108864"),
        (&["replay", "fifo.toml", "--report", "r"], "not a regular file"),
        (&["merge", "shard", "--out", "m"], "is a folder"),
        (&["soak-check", "kept"], "not a regular file"),
        (&["runs", "list", "--db", "wal.db"], "wal.db-wal: is not a regular file"),
        (&["runs", "list", "--db", "fifo.toml"], "not a regular file"),
    ];
    for (args, says) in cases {
        assert_refused(&fencesim_bounded(p, args), &[says]);
    }
}
