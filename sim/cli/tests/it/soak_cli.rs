//! `fencesim soak --level store` end to end, with real writer processes: an honest storm meets
//! the default quorum and passes (its kept folder re-judges clean with `soak-check`, its reports
//! follow the schema); planted store defects fail naming their checker, a non-atomic fence in
//! every storm; tampered logs (a dropped end line, a forged accept, a swapped epoch) fail
//! `soak-check`, and a folder that is not what the referee left (a log missing or added, a
//! malformed line before a log's last, an invalid record, a junk database) is refused with exit 2
//! while a torn last line is not; bad flags exit 2 with one line before anything starts; the
//! repro line carries every flag that changes a run; and a referee killed with SIGKILL leaves no
//! writer and no temporary folder behind.

use crate::cli;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cli::{assert_exit, fencesim, stderr, stdout};
use fencesim_real::soak::seal::reseal;
use fencesim_real::soak::wall::{Stopwatch, sleep_ms};
use serde_json::Value;

/// Copy a kept soak folder (flat) so one honest storm serves several tampering tests.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// The writers' logs in a folder, as (path, lines).
fn logs(dir: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut out: Vec<(PathBuf, Vec<String>)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| {
            let text = fs::read_to_string(&p).unwrap();
            (p, text.lines().map(str::to_owned).collect())
        })
        .collect();
    out.sort();
    out
}

fn write_lines(path: &Path, lines: &[String]) {
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The owners that exited cleanly (not killed), from the referee's record.
fn clean_owners(dir: &Path) -> Vec<String> {
    let meta: Value = serde_json::from_str(&fs::read_to_string(dir.join("soak-meta.json")).unwrap()).unwrap();
    meta["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["exit_code"] == 0)
        .map(|a| format!("soak-w{}-g{}", a["index"], a["generation"]))
        .collect()
}

fn check_fails(dir: &Path, checker: &str) {
    let out = fencesim(&["soak-check".as_ref(), dir.as_os_str()]);
    assert_exit(&out, 1);
    assert!(stdout(&out).contains(checker), "expected {checker}: {}", stdout(&out));
}

#[test]
#[allow(clippy::too_many_lines, reason = "one storm is costly: the rejudge and each tampering reuse its kept folder")]
fn an_honest_soak_passes_and_its_kept_folder_rejudges_and_tampering_fails() {
    let root = tempfile::tempdir().unwrap();
    let (keep, report) = (root.path().join("keep"), root.path().join("report"));
    let out = fencesim(&[
        "soak".as_ref(),
        "--level".as_ref(),
        "store".as_ref(),
        "--seed".as_ref(),
        "7".as_ref(),
        "--skew-ms".as_ref(),
        "20".as_ref(),
        "--keep".as_ref(),
        keep.as_os_str(),
        "--report".as_ref(),
        report.as_os_str(),
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.contains(": PASS") && text.contains("quorum default"), "{text}");

    // The report follows its schema (validated by the jsonschema library).
    let doc: Value = serde_json::from_str(&fs::read_to_string(report.join("soak.json")).unwrap()).unwrap();
    let schema: Value = serde_json::from_str(
        &fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports/soak.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "soak.json breaks its schema: {errors:?}");
    assert_eq!(doc["schema"], "fencesim.soak/1");
    assert_eq!(doc["verdict"], "pass");
    assert_eq!(doc["seed"], 7);
    assert!(doc["counters"]["sigkills_recovered"].as_u64().unwrap() >= 1);
    assert!(doc["counters"]["sigstop_zombies"].as_u64().unwrap() >= 1);
    assert!(doc["counters"]["mid_call_stalls"].as_u64().unwrap() >= 1);
    assert!(fs::read_to_string(report.join("junit.xml")).unwrap().contains("<testsuite"));

    // Offline, the kept folder judges the same.
    assert_exit(&fencesim(&["soak-check".as_ref(), keep.as_os_str()]), 0);
    let clean = clean_owners(&keep);
    assert!(!clean.is_empty(), "some writer exited cleanly");

    // A dropped end line of a writer that was never killed.
    let dropped = root.path().join("dropped");
    copy_dir(&keep, &dropped);
    let (path, mut lines) = logs(&dropped)
        .into_iter()
        .find(|(_, lines)| clean.iter().any(|o| lines.iter().any(|l| l.contains(&format!("\"node\":\"{o}\"")))))
        .unwrap();
    let end = lines.iter().position(|l| l.contains("\"t\":\"end\"")).unwrap();
    lines.remove(end);
    write_lines(&path, &lines);
    // Refused where the chain breaks; sealed again by a forger, the judge still catches it.
    check_refused(&dropped, &[&format!("{}:{}: breaks", path.display(), end + 1)]);
    reseal(&dropped).unwrap();
    check_fails(&dropped, "log-complete");

    // A forged accept: a refused stale probe turned into an accepted one.
    let forged = root.path().join("forged");
    copy_dir(&keep, &forged);
    let mut done = false;
    for (path, mut lines) in logs(&forged) {
        let begins: Vec<(u64, String)> = lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["t"] == "begin" && v["surface"] == "put_meta")
            .map(|v| (v["id"].as_u64().unwrap(), v["node"].as_str().unwrap().to_owned()))
            .collect();
        if let Some(i) = lines.iter().position(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or(Value::Null);
            v["t"] == "end"
                && v["outcome"]["k"] == "stale"
                && begins.iter().any(|(id, node)| v["id"] == *id && v["node"] == node.as_str())
        }) {
            lines[i] = lines[i].replace("{\"k\":\"stale\"}", "{\"k\":\"ok\"}");
            write_lines(&path, &lines);
            check_refused(&forged, &[&format!("{}:{}: breaks", path.display(), i + 1)]);
            done = true;
            break;
        }
    }
    assert!(done, "the storm refused some stale put_meta");
    reseal(&forged).unwrap();
    check_fails(&forged, "no-stale-acceptance");

    // A swapped epoch: one grant re-labelled with another writer's epoch.
    let swapped = root.path().join("swapped");
    copy_dir(&keep, &swapped);
    let all = logs(&swapped);
    let grant_epoch = |lines: &[String]| {
        lines.iter().find_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            (v["t"] == "end" && v["granted"]["run"] == "soak-run").then(|| v["granted"]["epoch"].as_i64().unwrap())
        })
    };
    // Two writers' logs that each hold a grant (a writer SIGKILLed before its first has none).
    let mut granted = all.iter().filter_map(|(path, lines)| Some((path, lines, grant_epoch(lines)?)));
    let (path, first, ea) = granted.next().expect("a writer's grant");
    let (_, _, eb) = granted.next().expect("a second writer's grant");
    assert_ne!(ea, eb);
    let mut lines = first.clone();
    let i = lines.iter().position(|l| l.contains("\"granted\"") && l.contains("\"soak-run\"")).unwrap();
    lines[i] = lines[i].replace(&format!("\"epoch\":{ea}"), &format!("\"epoch\":{eb}"));
    write_lines(path, &lines);
    check_refused(&swapped, &[&format!("{}:{}: breaks", path.display(), i + 1)]);
    reseal(&swapped).unwrap();
    let out = fencesim(&["soak-check".as_ref(), swapped.as_os_str()]);
    assert_exit(&out, 1);
    assert!(
        stdout(&out).contains("epochs-increasing") || stdout(&out).contains("no-stale-acceptance"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn planted_store_defects_fail_the_soak_naming_their_checker() {
    for (defect, checker) in [
        ("unfenced-meta", "no-stale-acceptance"),
        ("epoch-reset-on-delete", "epochs-increasing"),
        ("unfenced-delete", "no-stale-acceptance"),
        // `no-boot-retry` is left to its aimed detector, the kit's concurrent boot (B2): since the
        // storm stopped syncing every commit, its writers' boots rarely meet a busy write lock, so
        // the soak's clean-boot check catches it only some storms (seed 1 passed once under load).
    ] {
        let out = fencesim(&["soak", "--level", "store", "--defect", defect, "--cap-s", "30"]);
        assert_exit(&out, 1);
        assert!(stdout(&out).contains(&format!("VIOLATION {checker}")), "{defect}: {}", stdout(&out));
    }
}

/// D3 shows only in a fenced call that stalls between its check and its mutation and returns: the
/// quorum waits for one, so every storm catches it (before the `mid_call_stalls` floor, a storm
/// whose stalled writers were all SIGKILLed mid-stall passed about one run in four). The stale
/// mutation is either accepted (no-stale-acceptance) or refused for the successor's seq instead of
/// the fence (typed-rejections), as the race falls.
#[test]
fn a_non_atomic_fence_fails_every_storm() {
    for run in 0..4 {
        let out = fencesim(&["soak", "--level", "store", "--seed", "1", "--defect", "non-atomic-fence"]);
        assert_exit(&out, 1);
        let text = stdout(&out);
        let landed = text.split("mid_call_stalls=").nth(1).and_then(|t| t.split(' ').next()?.parse::<u64>().ok());
        assert!(landed >= Some(1), "run {run}: {text}");
        assert!(
            text.contains("VIOLATION no-stale-acceptance") || text.contains("VIOLATION typed-rejections"),
            "run {run}: {text}"
        );
    }
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let kept = tempfile::tempdir().unwrap();
    fs::write(kept.path().join("x"), "occupied").unwrap();
    let occupied = kept.path().to_str().unwrap().to_owned();
    for (args, mentions) in [
        (vec!["soak", "--ttl-ms", "0"], "ttl"),
        (vec!["soak", "--quorum", "epochs=3,bogus=1"], "bogus"),
        (vec!["soak", "--quorum", "epochs=many"], "epochs"),
        (vec!["soak", "--quorum", "release", "--writers", "3"], "5 writers"),
        (vec!["soak", "--keep", occupied.as_str()], "not empty"),
        (vec!["soak", "--level", "store", "--defect", "meta-before-settle"], "engine defect"),
        (vec!["soak", "--level", "engine", "--ttl-ms", "0"], "ttl"),
        (vec!["soak", "--level", "engine", "--runs", "0"], "runs"),
        (vec!["soak", "--level", "engine", "--quorum", "epochs=3"], "epochs"),
        // Quorums no storm of the shape can honestly pass.
        (vec!["soak", "--quorum", "epochs=0"], "every floor is 0"),
        (vec!["soak", "--writers", "1"], "at least 2 writers"),
        (vec!["soak", "--level", "engine", "--runs", "1"], "runs_settled=3 can never be met by --runs 1"),
        // A flag of the other level would be accepted and change nothing.
        (vec!["soak", "--runs", "5"], "--runs applies only at --level engine"),
        (vec!["soak", "--level", "engine", "--skew-ms", "10"], "--skew-ms applies only at --level store"),
        (
            vec!["soak", "--level", "engine", "--exit-deadline-s", "5"],
            "--exit-deadline-s applies only at --level store",
        ),
    ] {
        let out = fencesim(&args);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(mentions), "{args:?}: expected {mentions:?} in {err}");
    }
}

/// Flags out of their bounds are refused with exit 2 and one line naming the bound, before
/// anything is created or started: no `--keep` folder, no temporary folder, no writer. Without
/// the bounds these storms ran (65 writers; a skew past the clock's range; a cap or an exit
/// deadline of 0 failed the soak with exit 1; the engine level's cap of 0 panicked).
#[test]
fn out_of_bound_flags_are_refused_before_anything_starts() {
    // A cap of 1 s keeps a storm short should a bound ever be missing.
    for (args, message) in [
        (&["--writers", "65", "--cap-s", "1"][..], "--writers must be in 1..=64, got 65"),
        (
            &["--skew-ms", "9223372036854775807", "--cap-s", "1"],
            "--skew-ms must be in 0..=3600000, got 9223372036854775807",
        ),
        (&["--skew-ms", "3600001", "--cap-s", "1"], "--skew-ms must be in 0..=3600000, got 3600001"),
        (&["--skew-ms", "-5", "--cap-s", "1"], "--skew-ms must be in 0..=3600000, got -5"),
        (&["--cap-s", "0"], "--cap-s must be at least 1, got 0"),
        (&["--exit-deadline-s", "0", "--cap-s", "1"], "--exit-deadline-s must be at least 1, got 0"),
        (&["--level", "engine", "--cap-s", "0"], "--cap-s must be at least 1, got 0"),
        (&["--level", "engine", "--writers", "65", "--cap-s", "1"], "--writers must be in 1..=64, got 65"),
    ] {
        let root = tempfile::tempdir().unwrap();
        let (keep, tmp) = (root.path().join("keep"), root.path().join("tmp"));
        fs::create_dir(&tmp).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .arg("soak")
            .args(args)
            .arg("--keep")
            .arg(&keep)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: expected {message:?} in {err}");
        assert!(!keep.exists(), "{args:?}: the keep folder was created");
        assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0, "{args:?}: a temporary folder was created");
    }
}

/// The repro line, words after `repro: ` up to its closing remark.
fn repro_words(out: &std::process::Output) -> Vec<String> {
    let text = stdout(out);
    let line = text.lines().find_map(|l| l.trim().strip_prefix("repro: ")).unwrap_or_else(|| panic!("{text}"));
    let command = line.split(" (").next().unwrap();
    command.split_whitespace().map(str::to_owned).collect()
}

/// The repro line carries every flag that changes a run, at either level (it dropped
/// `--skew-ms`, the quorum, the cap and the exit deadline), and running it prints the same line.
#[test]
fn the_repro_line_carries_every_flag_that_changes_the_run() {
    let store = [
        "--seed",
        "3",
        "--writers",
        "2",
        "--ttl-ms",
        "300",
        "--skew-ms",
        "20",
        "--exit-deadline-s",
        "9",
        "--cap-s",
        "30",
        "--quorum",
        "epochs=2",
    ];
    let engine = ["--seed", "2", "--writers", "3", "--ttl-ms", "300", "--runs", "10", "--cap-s", "40"];
    for (level, flags) in [("store", &store[..]), ("engine", &engine[..])] {
        let out = fencesim(&[&["soak", "--level", level][..], flags].concat());
        assert!(matches!(out.status.code(), Some(0 | 1)), "{level}: {}", stderr(&out));
        let words = repro_words(&out);
        assert_eq!(words[..4], ["fencesim", "soak", "--level", level]);
        let repro = words.join(" ");
        for pair in flags.chunks(2) {
            assert!(repro.contains(&pair.join(" ")), "{level}: the repro lacks {pair:?}: {repro}");
        }
        if level == "store" {
            let again = fencesim(&words[1..]);
            assert_exit(&again, 0);
            assert_eq!(repro_words(&again), words, "the repro's own repro differs");
        }
    }
}

/// Run `soak-check` on `dir`: exit 2 with one line that names each of `mentions`.
fn check_refused(dir: &Path, mentions: &[&str]) -> String {
    let out = fencesim(&["soak-check".as_ref(), dir.as_os_str()]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    for m in mentions {
        assert!(err.contains(m), "expected {m:?} in {err}");
    }
    err
}

/// `soak-check DIR`, killed (and the test failed) if it has not ended within 60 s: a check that
/// blocks on a FIFO must not hang the test. Waits on the process's end, never on a timer.
#[allow(clippy::disallowed_methods, reason = "the test bounds a real process from a thread of its own")]
fn soak_check_bounded(dir: &Path) -> std::process::Output {
    let child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .arg("soak-check")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("soak-check {} still running after 60 s (blocked on a FIFO?)", dir.display());
        }
    }
}

/// Every file of a kept folder is refused unless it is a regular file, checked on the opened file
/// (one open that neither blocks nor follows a link, then its metadata) before a byte is read: a
/// FIFO in place of the last writer log (not only the first file read) and a symbolic link to a
/// FIFO in place of the database are refused promptly with one line naming them. Before, the FIFO
/// hung `soak-check` (every log was read whole to count its calls before any was checked).
#[test]
fn soak_check_refuses_a_fifo_anywhere_in_a_kept_folder_without_blocking() {
    let root = tempfile::tempdir().unwrap();
    let keep = root.path().join("keep");
    let out = fencesim(&[
        "soak".as_ref(),
        "--seed".as_ref(),
        "8".as_ref(),
        "--quorum".as_ref(),
        "epochs=2,appends=4".as_ref(),
        "--keep".as_ref(),
        keep.as_os_str(),
    ]);
    assert_exit(&out, 0);
    let mkfifo = |path: &Path| assert!(Command::new("mkfifo").arg(path).status().unwrap().success());

    let fifo_log = root.path().join("fifo-log");
    copy_dir(&keep, &fifo_log);
    let (last, _) = logs(&fifo_log).pop().unwrap();
    fs::remove_file(&last).unwrap();
    mkfifo(&last);
    let out = soak_check_bounded(&fifo_log);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("{}: is not a regular file", last.display())), "{err}");

    let linked = root.path().join("linked-db");
    copy_dir(&keep, &linked);
    let fifo = root.path().join("a-fifo");
    mkfifo(&fifo);
    fs::remove_file(linked.join("soak.db")).unwrap();
    std::os::unix::fs::symlink(&fifo, linked.join("soak.db")).unwrap();
    let out = soak_check_bounded(&linked);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("{}: is a symbolic link", linked.join("soak.db").display())), "{err}");
}

/// Rewrite one field of a kept folder's `soak-meta.json`.
fn set_meta(dir: &Path, key: &str, value: Value) {
    let path = dir.join("soak-meta.json");
    let mut meta: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    meta[key] = value;
    fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
}

/// `soak-check` judges only a folder the referee could have left: a writer log missing or added,
/// a malformed line before a log's last, an invalid record or an unreadable database is exit 2
/// with one line naming it (each once). A torn last line, all a SIGKILL can leave, still passes.
#[test]
fn soak_check_refuses_a_folder_the_referee_did_not_leave() {
    let root = tempfile::tempdir().unwrap();
    let keep = root.path().join("keep");
    let out = fencesim(&[
        "soak".as_ref(),
        "--seed".as_ref(),
        "5".as_ref(),
        "--quorum".as_ref(),
        "epochs=2,appends=4".as_ref(),
        "--keep".as_ref(),
        keep.as_os_str(),
    ]);
    assert_exit(&out, 0);
    let copy = |name: &str| {
        let dir = root.path().join(name);
        copy_dir(&keep, &dir);
        dir
    };

    let missing = copy("missing");
    fs::remove_file(missing.join("writer-w1-g0.jsonl")).unwrap();
    check_refused(&missing, &["writer-w1-g0.jsonl", "missing"]);

    let extra = copy("extra");
    fs::copy(extra.join("writer-w0-g0.jsonl"), extra.join("writer-w9-g0.jsonl")).unwrap();
    check_refused(&extra, &["writer-w9-g0.jsonl"]);

    // An end line before the last turned to garbage: a kill cannot do that.
    let garbage = copy("garbage");
    // The first log with an end line before its last (a writer SIGKILLed at once may log only one).
    let (path, mut lines, i) = logs(&garbage)
        .into_iter()
        .find_map(|(path, lines)| {
            let i = lines.iter().position(|l| l.contains("\"t\":\"end\""))?;
            (i + 1 < lines.len()).then_some((path, lines, i))
        })
        .expect("a log with an end line before its last");
    lines[i] = "GARBAGE{{".to_owned();
    write_lines(&path, &lines);
    check_refused(&garbage, &[&format!("{}:{}", path.display(), i + 1)]);

    // A torn last line (a writer SIGKILLed mid-write) is forgiven: added after the seal it is
    // refused (the log's size), sealed with the folder it is judged.
    let torn = copy("torn");
    let (path, _) = logs(&torn).into_iter().next().unwrap();
    let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, b"{\"t\":\"end\",\"id\":").unwrap();
    check_refused(&torn, &[&path.display().to_string(), "bytes"]);
    reseal(&torn).unwrap();
    assert_exit(&fencesim(&["soak-check".as_ref(), torn.as_os_str()]), 0);

    // A record the referee could not have written, sealed again, is still refused.
    for (key, value, mention) in
        [("defects", serde_json::json!(["nope"]), "'nope'"), ("ttl_ms", serde_json::json!(0), "ttl_ms")]
    {
        let bad = copy(&format!("meta-{key}"));
        set_meta(&bad, key, value);
        check_refused(&bad, &["soak-meta.json", "soak-manifest.json"]);
        reseal(&bad).unwrap();
        check_refused(&bad, &["invalid soak record", "soak-meta.json", mention]);
    }

    // The database's message once, not once more as its own cause.
    let junk = copy("junk-db");
    for name in ["soak.db", "soak.db-wal", "soak.db-shm"] {
        let _ = fs::remove_file(junk.join(name));
    }
    let err = check_refused(&junk, &["soak.db"]);
    assert_eq!(err.matches("soak.db").count(), 1, "{err}");
    fs::write(junk.join("soak.db"), "junk").unwrap();
    reseal(&junk).unwrap();
    let err = check_refused(&junk, &["not a SQLite database", &junk.join("soak.db").display().to_string()]);
    assert_eq!(err.matches("soak.db").count(), 1, "{err}");
}

/// A kept soak is tamper-evident (issue 38, item 26): each writer's lines are a hash chain and
/// the referee's manifest records every file's size and SHA-256 and each log's chain head, so two
/// lines of one call reordered, a value edited in a line that stays well-formed, a log cut short
/// and a file added after the storm are each refused with exit 2 and one line naming the file
/// (and the line). Before, each of these passed `soak-check`.
#[test]
fn a_tampered_kept_soak_is_refused_naming_the_file_and_line() {
    let root = tempfile::tempdir().unwrap();
    let keep = root.path().join("keep");
    let out = fencesim(&[
        "soak".as_ref(),
        "--seed".as_ref(),
        "6".as_ref(),
        "--quorum".as_ref(),
        "epochs=2,appends=4".as_ref(),
        "--keep".as_ref(),
        keep.as_os_str(),
    ]);
    assert_exit(&out, 0);
    assert_exit(&fencesim(&["soak-check".as_ref(), keep.as_os_str()]), 0);
    let copy = |name: &str| {
        let dir = root.path().join(name);
        copy_dir(&keep, &dir);
        dir
    };
    // The longest log, and a call whose begin and end are adjacent lines of it.
    let longest = |dir: &Path| logs(dir).into_iter().max_by_key(|(_, lines)| lines.len()).unwrap();
    let (_, lines) = longest(&keep);
    let call = lines
        .windows(2)
        .position(|w| w[0].contains("\"t\":\"begin\"") && w[1].contains("\"t\":\"end\""))
        .expect("a call logged on two adjacent lines");

    let reordered = copy("reordered");
    let (path, mut lines) = longest(&reordered);
    lines.swap(call, call + 1);
    write_lines(&path, &lines);
    check_refused(&reordered, &[&format!("{}:{}: breaks", path.display(), call + 1)]);

    // The end's clock one ms later: the line stays valid JSON of a valid call.
    let edited = copy("edited");
    let (path, mut lines) = longest(&edited);
    let mut end: Value = serde_json::from_str(&lines[call + 1]).unwrap();
    let clock = end["clock_ms"].as_i64().unwrap();
    lines[call + 1] = lines[call + 1].replace(&format!("\"clock_ms\":{clock}"), &format!("\"clock_ms\":{}", clock + 1));
    end["clock_ms"] = Value::from(clock + 1);
    assert_eq!(serde_json::from_str::<Value>(&lines[call + 1]).unwrap(), end, "still a well-formed line");
    write_lines(&path, &lines);
    check_refused(&edited, &[&format!("{}:{}: breaks", path.display(), call + 2)]);

    let truncated = copy("truncated");
    let (path, mut lines) = longest(&truncated);
    let kept = lines.len() - 1;
    lines.truncate(kept);
    write_lines(&path, &lines);
    check_refused(&truncated, &[&format!("{}:{}: missing", path.display(), kept + 1)]);

    let added = copy("added");
    fs::write(added.join("notes.txt"), "hello").unwrap();
    check_refused(&added, &[&added.join("notes.txt").display().to_string(), "does not list"]);

    // Every copy that was not touched still verifies and judges the same.
    assert_exit(&fencesim(&["soak-check".as_ref(), copy("untouched").as_os_str()]), 0);
}

/// A kept soak is data someone sent: `soak-check` starts nothing it names. A record naming a
/// store adapter whose command would create a marker file is judged from what the referee
/// recorded (here: nothing, so it is refused), and the marker never appears; an engine record
/// naming an effects log outside the folder (`../outside.effects`) is refused, never read.
#[test]
fn soak_check_never_runs_or_reads_what_a_kept_folder_names() {
    let root = tempfile::tempdir().unwrap();
    let keep = root.path().join("keep");
    let out = fencesim(&[
        "soak".as_ref(),
        "--seed".as_ref(),
        "4".as_ref(),
        "--quorum".as_ref(),
        "epochs=2,appends=4".as_ref(),
        "--keep".as_ref(),
        keep.as_os_str(),
    ]);
    assert_exit(&out, 0);
    let marker = root.path().join("MARKER");
    let command = format!("cmd:sh -c 'touch {}'", marker.display());
    set_meta(&keep, "adapter", Value::String(command));
    // Sealed again, as anyone can: the seal is no defence here, the judge is.
    reseal(&keep).unwrap();
    let out = fencesim(&["soak-check".as_ref(), keep.as_os_str()]);
    assert_exit(&out, 2);
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(!marker.exists(), "soak-check ran the command a kept folder named");

    let engine = root.path().join("engine");
    let out = fencesim(&[
        "soak".as_ref(),
        "--level".as_ref(),
        "engine".as_ref(),
        "--seed".as_ref(),
        "1".as_ref(),
        "--runs".as_ref(),
        "4".as_ref(),
        "--quorum".as_ref(),
        "runs_settled=1".as_ref(),
        "--keep".as_ref(),
        engine.as_os_str(),
    ]);
    assert_exit(&out, 0);
    // An effects log of the storm, copied outside the folder and named there by its path.
    let path = engine.join("soak-engine-meta.json");
    let mut record: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let first = record["effects"][0].as_str().unwrap().to_owned();
    fs::copy(engine.join(&first), root.path().join("outside.effects")).unwrap();
    record["effects"][0] = Value::String("../outside.effects".into());
    fs::write(&path, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
    reseal(&engine).unwrap();
    let out = fencesim(&["soak-check".as_ref(), engine.as_os_str()]);
    assert_exit(&out, 2);
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

/// The command lines of live processes running one of `kinds` whose arguments name `needle`.
fn children_naming(needle: &str, kinds: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if kinds.iter().any(|k| cmdline.contains(k)) && cmdline.contains(needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

/// Wait (up to 60 s, polling) until no process names `needle` among `kinds` and `tmp` is empty:
/// the parent-death signals and the janitor's grace take their time on a loaded machine.
fn wait_until_nothing_left(needle: &str, kinds: &[&str], tmp: &Path) -> (Vec<String>, Vec<PathBuf>) {
    let started = Stopwatch::start();
    loop {
        let procs = children_naming(needle, kinds);
        let left: Vec<_> = fs::read_dir(tmp).unwrap().flatten().map(|e| e.path()).collect();
        if (procs.is_empty() && left.is_empty()) || started.elapsed_ms() > 60_000 {
            return (procs, left);
        }
        sleep_ms(20);
    }
}

/// How a test ends a storm.
#[derive(Clone, Copy, Debug)]
enum End {
    /// SIGKILL of the referee alone.
    Kill,
    /// SIGKILL of its whole process group.
    KillGroup,
    /// A termination signal, which the referee handles.
    Signal(nix::sys::signal::Signal),
}

/// Start a soak at `level` that never meets its quorum, end it mid-storm once its children run
/// (`end`), then check that no child is left and its temporary folder is gone.
fn end_mid_storm_leaves_nothing(level: &str, end: End) {
    use std::os::unix::process::CommandExt;
    const CHILDREN: [&str; 4] = ["soak-writer", "soak-engine-worker", "soak-engine-client", "janitor"];
    let tmp = tempfile::tempdir().unwrap();
    let quorum = if level == "store" { "epochs=100000" } else { "crashes=100000" };
    let mut soak = Command::new(env!("CARGO_BIN_EXE_fencesim"));
    soak.args(["soak", "--level", level, "--quorum", quorum, "--cap-s", "60"])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if matches!(end, End::KillGroup) {
        soak.process_group(0);
    }
    let mut soak = soak.spawn().unwrap();
    let needle = tmp.path().to_str().unwrap().to_owned();
    let started = Stopwatch::start();
    while children_naming(&needle, &CHILDREN[..3]).len() < 3 {
        assert!(started.elapsed_ms() < 20_000, "{level}: the children never started");
        sleep_ms(50);
    }
    match end {
        End::KillGroup => {
            let group = nix::unistd::Pid::from_raw(soak.id() as i32);
            nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).unwrap();
        }
        End::Kill => soak.kill().unwrap(),
        End::Signal(signal) => {
            assert!(cli::signal_while_running(&mut soak, signal), "{level}: the storm ended before the signal");
        }
    }
    let status = soak.wait().unwrap();
    if let End::Signal(signal) = end {
        assert_eq!(status.code(), Some(128 + signal as i32), "{level} {end:?}: {status}");
    }
    let (procs, left) = wait_until_nothing_left(&needle, &CHILDREN, tmp.path());
    assert_eq!(procs, Vec::<String>::new(), "{level} {end:?}");
    assert!(left.is_empty(), "{level} {end:?}: left behind: {left:?}");
}

#[test]
fn a_referee_killed_mid_storm_leaves_no_writer_and_no_temporary_folder() {
    end_mid_storm_leaves_nothing("store", End::Kill);
}

/// SIGINT or SIGTERM mid-storm, at both levels: the referee stops its processes, removes its
/// folder and exits 128 + the signal, like every other command.
#[test]
fn a_signal_mid_storm_stops_it_cleanly_with_128_plus_the_signal() {
    use nix::sys::signal::Signal;
    for (level, signal) in [("store", Signal::SIGINT), ("engine", Signal::SIGTERM), ("store", Signal::SIGTERM)] {
        end_mid_storm_leaves_nothing(level, End::Signal(signal));
    }
}

/// A SIGKILL of the soak's whole process group (a CI runner's timeout does this) takes the
/// referee and its children at once; the janitor, in a group of its own, still removes the
/// temporary folder. Both levels.
#[test]
fn a_soak_whose_process_group_is_killed_leaves_nothing_behind() {
    for level in ["store", "engine"] {
        end_mid_storm_leaves_nothing(level, End::KillGroup);
    }
}

/// The engine level from the command line: an honest soak passes and writes its report; a
/// planted engine defect that a real process reaches fails it, named by the oracle's checker.
#[test]
fn the_engine_level_passes_honest_and_fails_a_planted_defect() {
    let report = tempfile::tempdir().unwrap();
    let dir = report.path().to_str().unwrap();
    let kept = report.path().join("keep");
    let keep = kept.to_str().unwrap();
    let out = fencesim(&["soak", "--level", "engine", "--seed", "2", "--report", dir, "--keep", keep]);
    assert_exit(&out, 0);
    // The kept folder is judged again offline, the same way, and left as it was.
    let before = folder_digest(&kept);
    let again = fencesim(&["soak-check", keep]);
    assert_exit(&again, 0);
    assert!(
        stdout(&again).contains("(engine level, seed 2)") && stdout(&again).contains(": PASS"),
        "{}",
        stdout(&again)
    );
    assert_eq!(folder_digest(&kept), before, "soak-check changed the kept folder");
    // A payment the logs never made, forged into a worker's effects log, fails the re-judge.
    let effects = fs::read_dir(&kept)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "effects") && fs::read_to_string(p).unwrap().contains("\"call\""))
        .expect("an effects log with a paid call");
    let text = fs::read_to_string(&effects).unwrap();
    let first = text.lines().find(|l| l.contains("\"call\"")).unwrap().to_owned();
    fs::write(&effects, format!("{text}{first}\n")).unwrap();
    // Refused at the line added after the seal; sealed again, the judge still catches it.
    let refused = fencesim(&["soak-check", keep]);
    assert_exit(&refused, 2);
    let line = format!("{}:{}: ", effects.display(), text.lines().count() + 1);
    assert!(stderr(&refused).starts_with(&format!("fencesim: error: {line}")), "{}", stderr(&refused));
    reseal(&kept).unwrap();
    let forged = fencesim(&["soak-check", keep]);
    assert_exit(&forged, 1);
    assert!(stdout(&forged).contains("repay-bound"), "{}", stdout(&forged));
    assert!(stdout(&out).contains("judged by the oracle"), "{}", stdout(&out));
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(report.path().join("soak-engine.json")).unwrap()).unwrap();
    assert_eq!(doc["verdict"], "pass");
    // Real processes are not deterministic: the defect must be caught within three seeds.
    let caught = (1..=3).any(|seed| {
        let out =
            fencesim(&["soak", "--level", "engine", "--seed", &seed.to_string(), "--defect", "fresh-run-unleased"]);
        out.status.code() == Some(1) && stdout(&out).contains("no-stale-acceptance")
    });
    assert!(caught, "fresh-run-unleased was not caught in three seeds");
}

/// A storm that ends below its quorum with no violation is inconclusive at both levels: exit 3,
/// verdict `inconclusive` in the JSON and a skipped (neither passed nor failed) quorum case in the
/// JUnit, naming the floor that fell short and by how much.
#[test]
fn a_soak_short_of_its_quorum_is_inconclusive_at_both_levels() {
    let store = ["--level", "store", "--seed", "3", "--quorum", "epochs=1000000,appends=1", "--cap-s", "2"];
    let engine = ["--level", "engine", "--seed", "3", "--runs", "4", "--quorum", "segments=1,crashes=1000000"];
    for (flags, json, floor) in [(&store[..], "soak.json", "epochs"), (&engine[..], "soak-engine.json", "crashes")] {
        let report = tempfile::tempdir().unwrap();
        let mut args = vec!["soak", "--report", report.path().to_str().unwrap()];
        args.extend_from_slice(flags);
        let out = fencesim(&args);
        assert_exit(&out, 3);
        let text = stdout(&out);
        assert!(text.contains(": INCONCLUSIVE") && text.contains(&format!("QUORUM MISSED: {floor} ")), "{text}");
        let doc: Value = serde_json::from_slice(&fs::read(report.path().join(json)).unwrap()).unwrap();
        assert_eq!(doc["verdict"], "inconclusive", "{doc}");
        let junit = fs::read_to_string(report.path().join("junit.xml")).unwrap();
        assert!(junit.contains("failures=\"0\" skipped=\"1\""), "{junit}");
        assert!(junit.contains(&format!("<skipped message=\"quorum not met: {floor} ")), "{junit}");
        assert!(junit.contains(" short)"), "{junit}");
    }
    let report = tempfile::tempdir().unwrap();
    let dir = report.path().to_str().unwrap();
    fencesim(&["soak", "--seed", "3", "--quorum", "epochs=1000000", "--cap-s", "1", "--report", dir]);
    let doc: Value = serde_json::from_slice(&fs::read(report.path().join("soak.json")).unwrap()).unwrap();
    let floor = &doc["floors"][0];
    assert_eq!(floor["short_by"].as_u64(), Some(1_000_000 - floor["observed"].as_u64().unwrap()), "{doc}");
}

/// Every file of a folder with its bytes, to prove a command left it as it was.
fn folder_digest(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}
