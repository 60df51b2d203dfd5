//! Stores in other languages, end to end (docs/protocol.md): the reference adapter
//! (`adapters/python-sqlite/adapter.py`) passes the kit and runs worlds byte for byte like
//! fencesim's own store; each of its planted defects fails the kit with the check of its contract;
//! a nondeterministic adapter is named as such by `replay`; and every way an adapter can break the
//! protocol (it does not start, dies mid-call, answers garbage, answers another request, speaks
//! another version, hangs) exits 2 with one line naming the adapter, the request and what went
//! wrong, leaving no process and no folder behind, a SIGKILL of fencesim included. The soak storms
//! it from real processes: clean, it passes; with a planted defect, it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli;

use cli::{assert_exit, fencesim, python, stderr, stdout};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `--store` for the reference adapter.
fn reference() -> String {
    format!("cmd:{} {}", python(), repo().join("adapters/python-sqlite/adapter.py").display())
}

/// `--store` for a test adapter of `sim/cli/tests/adapters/`.
fn fixture(script: &str, args: &str) -> String {
    format!(
        "cmd:{} {} {args}",
        python(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adapters").join(script).display()
    )
}

/// `fencesim` with `args` and these environment variables, TMPDIR a fresh folder.
fn fencesim_in(tmp: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fencesim"));
    command.args(args).env("TMPDIR", tmp).env_remove("FENCESIM_ADAPTER_DEFECT");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run fencesim")
}

fn kit(store: &str, env: &[(&str, &str)]) -> (i32, Value) {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = fencesim_in(tmp.path(), &["conformance", "--store", store, "--format", "json"], env);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(&out)));
    assert_empty(tmp.path());
    (out.status.code().expect("an exit code"), doc)
}

fn outcomes(doc: &Value, outcome: &str) -> Vec<String> {
    let checks = doc["checks"].as_array().expect("checks");
    checks.iter().filter(|c| c["outcome"] == outcome).map(|c| c["id"].as_str().expect("id").to_owned()).collect()
}

fn assert_empty(folder: &Path) {
    let left: Vec<_> = std::fs::read_dir(folder).expect("tmp").map(|e| e.expect("entry").path()).collect();
    assert!(left.is_empty(), "left behind {left:?}");
}

#[test]
fn the_reference_adapter_passes_every_check_its_capabilities_allow() {
    let (code, doc) = kit(&reference(), &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(doc["passed"].as_u64().expect("passed") >= 40, "{doc:#}");
    // Only the checks of a SQLite file of fencesim's own are not the protocol's, and the delete
    // cut between its statements (protocol 1 has no statement fault point). B2 runs: eight
    // processes, each starting the adapter, open one fresh location at once.
    assert_eq!(outcomes(&doc, "skip"), ["J7", "B4", "B5"], "{doc:#}");
}

/// Each planted defect of the reference adapter, and a check of the contract it breaks.
const CAUGHT_BY: [(&str, &str); 7] = [
    ("unfenced-meta", "W1"),
    ("check-outside-txn", "L9"),
    ("epoch-reset-on-delete", "L4"),
    ("expiry-inclusive", "L6"),
    ("seq-guard-by-count", "J5"),
    ("stale-release-clears", "L7"),
    ("doubles-integers", "J4"),
];

/// The whole kit once per planted defect of the reference adapter (seven runs, a minute or two on
/// two cores), so it runs where `CI` or `FENCESIM_SLOW_TESTS` is set (as `.ci/run` sets them).
#[test]
#[cfg_attr(
    not(fencesim_slow),
    ignore = "slow (the kit seven times: each planted defect of adapters/python-sqlite); runs under CI or FENCESIM_SLOW_TESTS=1, or with --ignored"
)]
fn each_planted_adapter_defect_fails_the_kit_with_its_contract() {
    let script = std::fs::read_to_string(repo().join("adapters/python-sqlite/adapter.py")).expect("adapter");
    for (defect, check) in CAUGHT_BY {
        assert!(script.contains(&format!("\"{defect}\"")), "{defect} is not a defect of the adapter");
        let (code, doc) = kit(&reference(), &[("FENCESIM_ADAPTER_DEFECT", defect)]);
        assert_eq!(code, 1, "{defect}: {doc:#}");
        assert!(outcomes(&doc, "fail").iter().any(|id| id == check), "{defect}: {check} did not fail\n{doc:#}");
    }
}

/// `fencesim run --trace` of one world, as text.
fn trace(store: &[&str], seed: &str) -> String {
    let mut args = vec!["run", "--scenario", "swarm", "--seed", seed, "--trace"];
    args.extend(store);
    let out = fencesim(&args);
    assert_exit(&out, 0);
    stdout(&out)
}

#[test]
fn a_seed_against_the_adapter_replays_byte_for_byte_and_as_fencesims_own_store_runs_it() {
    let store = reference();
    for seed in ["3", "11"] {
        let first = trace(&["--store", &store], seed);
        assert_eq!(first, trace(&["--store", &store], seed), "seed {seed}: two processes differ");
        // Differential: a correct adapter answers every call as fencesim's store does, so only
        // the line naming the store differs.
        let native = trace(&["--db", "file"], seed);
        let differ: Vec<(&str, &str)> = first.lines().zip(native.lines()).filter(|(a, b)| a != b).collect();
        assert_eq!(first.lines().count(), native.lines().count(), "seed {seed}");
        assert!(
            differ.len() <= 2 && differ.iter().all(|(a, _)| a.contains("adapter:python-sqlite") || a.contains("cmd:")),
            "seed {seed}: {differ:#?}"
        );
    }
}

#[test]
fn an_adapter_that_draws_its_own_randomness_is_named_nondeterministic_not_a_violation() {
    let tmp = tempfile::tempdir().expect("tmp");
    let corpus = tmp.path().join("corpus.txt");
    std::fs::write(&corpus, "swarm 3\nswarm 5\n").expect("corpus");
    let reports = tmp.path().join("reports");
    let store = fixture("random_busy.py", "");
    let out = fencesim(&[
        "replay",
        corpus.to_str().expect("utf-8"),
        "--store",
        &store,
        "--report",
        reports.to_str().expect("utf-8"),
    ]);
    let text = stdout(&out);
    assert!(text.contains("0 failed") && !text.contains(" 0 nondeterministic"), "{text}\n{}", stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// A broken adapter: exit 2, one line naming the adapter, the request and the failure, its stderr
/// quoted; no process of it and no folder left.
fn assert_harness_error(args: &[&str], mode: &str, says: &[&str]) {
    let tmp = tempfile::tempdir().expect("tmp");
    let pidfile = tempfile::tempdir().expect("pid folder");
    let pid_path = pidfile.path().join("pid");
    let store = fixture("bad.py", &format!("{mode} {}", pid_path.display()));
    let mut all = args.to_vec();
    all.extend(["--store", &store, "--adapter-timeout-ms", "500"]);
    let out = fencesim_in(tmp.path(), &all, &[]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{mode}: not one line: {err}");
    for word in says.iter().chain(&["bad.py"]) {
        assert!(lines[0].contains(word), "{mode}: `{word}` missing from: {}", lines[0]);
    }
    if let Ok(pid) = std::fs::read_to_string(&pid_path) {
        assert!(!running(pid.trim().parse().expect("a pid")), "{mode}: the adapter outlived fencesim");
    }
    assert_empty(tmp.path());
}

fn running(pid: u32) -> bool {
    !matches!(cli::proc_state(pid), None | Some('Z' | 'X'))
}

#[test]
fn every_broken_adapter_is_a_harness_error_of_one_line() {
    let conformance = ["conformance"];
    assert_harness_error(&conformance, "exit", &["request: open", "exited mid-call", "giving up mid-call"]);
    assert_harness_error(&conformance, "garbage", &["request: open", "answered garbage", "this is not json"]);
    assert_harness_error(&conformance, "unasked", &["request: open", "a request it was not asked"]);
    assert_harness_error(&conformance, "version", &["request: hello", "protocol version 99"]);
    assert_harness_error(&conformance, "hang", &["request: open", "within 500 ms", "hanging"]);
    // The worlds' path: a sweep and a run stop at the adapter's failure, not at a verdict.
    let sweep = ["sweep", "--scenario", "swarm", "--seeds", "3"];
    assert_harness_error(&sweep, "exit", &["request: open", "exited mid-call"]);
    assert_harness_error(&["run", "--scenario", "swarm", "--seed", "1"], "hang", &["request: open", "within 500 ms"]);
}

#[test]
fn an_adapter_that_does_not_start_is_a_harness_error_of_one_line() {
    let tmp = tempfile::tempdir().expect("tmp");
    for args in [&["conformance"][..], &["sweep", "--seeds", "2"][..]] {
        let mut all = args.to_vec();
        all.extend(["--store", "cmd:/no/such/adapter --flag"]);
        let out = fencesim_in(tmp.path(), &all, &[]);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("/no/such/adapter") && err.contains("did not start"), "{err}");
    }
    for bad in ["cmd:", "cmd:python3 'unclosed", "python3 adapter.py"] {
        let out = fencesim_in(tmp.path(), &["conformance", "--store", bad], &[]);
        assert_exit(&out, 2);
    }
    assert_empty(tmp.path());
}

/// SIGKILL of fencesim while its adapter hangs: the adapter dies with it (`PR_SET_PDEATHSIG`) and
/// the janitor removes the temporary folder.
#[test]
#[allow(clippy::disallowed_methods, reason = "the test watches real processes in wall time")]
fn an_adapter_dies_with_a_sigkilled_fencesim_and_leaves_no_folder() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pids = tempfile::tempdir().expect("pid folder");
    let pid_path = pids.path().join("pid");
    let store = fixture("bad.py", &format!("hang {}", pid_path.display()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["conformance", "--store", &store, "--adapter-timeout-ms", "600000"])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Readiness: the adapter wrote its pid (it is past its start, and fencesim waits on it).
    let deadline = Instant::now() + Duration::from_secs(120);
    let pid = loop {
        if let Ok(pid) = std::fs::read_to_string(&pid_path) {
            break pid.trim().parse::<u32>().expect("a pid");
        }
        assert!(Instant::now() < deadline, "the adapter never started");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(cli::signal_while_running(&mut child, nix::sys::signal::Signal::SIGKILL), "fencesim ended first");
    child.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(30);
    while (running(pid) || std::fs::read_dir(tmp.path()).expect("tmp").next().is_some()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!running(pid), "the adapter outlived a SIGKILLed fencesim");
    assert_empty(tmp.path());
}

/// Every line of a real exchange, both ways (the kit and a swarm world against the reference
/// adapter, copied by `tests/adapters/tee.py`), is what `reports/protocol.schema.json` says a line
/// is; the exchange used every request, a fault point and its resume, and the schema can fail.
/// (The protocol schema leaves entries and metas open: their other fields are kept verbatim.)
#[test]
fn the_exchange_with_the_reference_adapter_is_what_the_protocol_schema_describes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("exchange.log");
    let reference = repo().join("adapters/python-sqlite/adapter.py");
    let store = fixture("tee.py", &format!("{} {} {}", log.display(), python(), reference.display()));
    assert_exit(&fencesim(&["conformance", "--store", &store]), 0);
    assert_exit(&fencesim(&["run", "--scenario", "mid-call-takeover", "--seed", "2", "--store", &store]), 0);
    // The soak's writers ask for the time in-lock (`now_ms: null`, `time`).
    assert_exit(&fencesim(&["soak", "--level", "store", "--seed", "1", "--store", &store]), 0);
    let text = std::fs::read_to_string(&log).expect("the exchange");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("reports/protocol.schema.json")).expect("schema"))
            .expect("JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let mut seen = std::collections::BTreeSet::new();
    for line in text.lines() {
        let (way, message) = line.split_at(2);
        let value: Value = serde_json::from_str(message).unwrap_or_else(|e| panic!("{e}: {line}"));
        let errors: Vec<String> =
            validator.iter_errors(&value).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{line}\n{errors:#?}");
        let kind = ["fault", "op", "resume", "time", "now_ms", "error", "ok"]
            .into_iter()
            .find(|k| value.get(k).is_some())
            .expect("a kind");
        let detail = match kind {
            "op" => value["op"].as_str().expect("op").to_owned(),
            "error" => value["error"]["code"].as_str().expect("code").to_owned(),
            "fault" => value["fault"].as_str().expect("fault").to_owned(),
            _ => String::new(),
        };
        seen.insert(format!("{way}{kind} {detail}").trim().to_owned());
    }
    for op in fencesim_protocol::wire::OPS {
        assert!(seen.contains(&format!("> op {op}")), "no {op} request in the exchange: {seen:?}");
    }
    for expected in [
        "> op hello",
        "> op open",
        "> op close",
        "< fault fence_checked",
        "< fault acquire_checked",
        "> resume",
        "< time",
        "> now_ms",
        "< ok",
    ] {
        assert!(seen.contains(expected), "no `{expected}` in the exchange: {seen:?}");
    }
    for code in ["lease_held", "journal_order_violation", "busy", "config"] {
        assert!(seen.contains(&format!("< error {code}")), "no {code} error in the exchange: {seen:?}");
    }
    // And the schema can fail: an unknown op, an answer with a made-up error code.
    for bad in [
        serde_json::json!({"id": 1, "op": "vacuum", "conn": 1, "now_ms": 0}),
        serde_json::json!({"id": 1, "error": {"code": "oops"}}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }
}

/// The store-level soak against the reference adapter: each writer drives an adapter process of
/// its own over one folder, and the referee's SIGKILL and SIGSTOP reach it. Clean, the default
/// quorum passes; with a planted defect the same storm fails; either way no adapter is left. The
/// kept folder is judged again the same way with no adapter to be found (an empty PATH): the
/// referee recorded the final state, and `soak-check` starts nothing.
#[test]
fn the_soak_storms_the_adapter_and_catches_its_planted_defect() {
    // `python3` looked up on the PATH, so that the empty PATH below would leave it unfound.
    let on_path = format!("cmd:python3 {}", repo().join("adapters/python-sqlite/adapter.py").display());
    for (defect, code) in [("", 0), ("unfenced-meta", 1)] {
        let tmp = tempfile::tempdir().expect("tmp");
        let kept = tempfile::tempdir().expect("kept");
        let keep = kept.path().join("keep");
        let keep = keep.to_str().expect("utf-8");
        let out = fencesim_in(
            tmp.path(),
            &["soak", "--level", "store", "--seed", "2", "--store", &on_path, "--keep", keep],
            &[("FENCESIM_ADAPTER_DEFECT", defect)],
        );
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(code), "{defect}: {text}\n{}", stderr(&out));
        assert!(text.contains("quorum default") && text.contains(": met"), "{defect}: {text}");
        if code == 1 {
            assert!(text.contains("VIOLATION"), "{text}");
        }
        assert_empty(tmp.path());
        let nothing = tempfile::tempdir().expect("an empty PATH");
        let path = nothing.path().to_str().expect("utf-8");
        let again = fencesim_in(tmp.path(), &["soak-check", keep], &[("PATH", path)]);
        assert_eq!(again.status.code(), Some(code), "{defect}: {}\n{}", stdout(&again), stderr(&again));
        assert_empty(tmp.path());
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let out = fencesim_in(tmp.path(), &["soak", "--level", "engine", "--store", &reference()], &[]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--store applies only at --level store"), "{}", stderr(&out));
}

/// An adapter without fault points: the kit skips the checks that need them, saying so, and a
/// sweep names what its worlds cannot exercise. The kit is inconclusive (exit 3: it has not shown
/// the store fences mid-call) unless the user says fault points are expected to be absent.
#[test]
fn an_adapter_without_fault_points_is_told_what_was_not_exercised() {
    let store = fixture("no_faults.py", "");
    let (code, doc) = kit(&store, &[]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["missing_capabilities"], serde_json::json!(["fault_points"]), "{doc:#}");
    let tmp = tempfile::tempdir().expect("tmp");
    let args = ["conformance", "--store", &store, "--format", "json", "--expect-capabilities", "leases,fenced_writes"];
    let out = fencesim_in(tmp.path(), &args, &[]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(&out)));
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    let skipped = outcomes(&doc, "skip");
    for id in ["L9", "W4"] {
        assert!(skipped.iter().any(|s| s == id), "{id} not skipped: {skipped:?}");
    }
    let reasons: Vec<&str> =
        doc["checks"].as_array().expect("checks").iter().filter_map(|c| c["reason"].as_str()).collect();
    assert!(reasons.iter().any(|r| r.contains("no fault points")), "{reasons:?}");
    let out = fencesim(&["sweep", "--scenario", "mid-call-takeover", "--seeds", "2", "--store", &store]);
    assert_exit(&out, 0);
    assert!(stderr(&out).contains("declares no fault points"), "{}", stderr(&out));
}

/// Issue 38, item 4: an adapter that exits, hangs past `--adapter-timeout-ms`, or (a writer
/// restarted after a SIGKILL) declares no capabilities in the middle of a soak was reported as a
/// store VIOLATION (exit 1). Its writer stops as a harness failure: only what the store answered
/// is judged, and, clean, the soak exits 2 with one line naming the writer and the adapter.
#[test]
fn an_adapter_failing_mid_soak_is_a_harness_error_not_a_violation() {
    for (mode, timeout, says) in [
        ("exit", "10000", "exited mid-call: it closed its stdout; it exited with status 3"),
        ("hang", "1000", "did not answer within 1000 ms"),
        ("nocaps", "10000", "declares no leases and fenced writes, which a soak needs"),
    ] {
        let tmp = tempfile::tempdir().expect("tmp");
        let starts = tempfile::tempdir().expect("a folder for the starts");
        let store = fixture("breaks_later.py", &format!("{mode} {}", starts.path().display()));
        let args = ["soak", "--level", "store", "--seed", "2", "--store", &store, "--adapter-timeout-ms", timeout];
        let out = fencesim_in(tmp.path(), &args, &[]);
        let (text, err) = (stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(2), "{mode}: {text}\n{err}");
        assert!(!text.contains("VIOLATION"), "{mode}: {text}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{mode}: not one line: {err}");
        for word in ["store adapter failed", "writer w", "breaks_later.py", says] {
            assert!(lines[0].contains(word), "{mode}: `{word}` missing from: {}", lines[0]);
        }
        assert_empty(tmp.path());
    }
}

/// Issue 38, item 5: an error answer that also carries `"ok": null` was read as ok, so the
/// store's correct refusals became stale acceptances (the kit failed the store, exit 1). It is
/// none of the protocol's shapes: a harness error naming the line.
#[test]
fn an_error_answer_that_also_carries_ok_is_a_harness_error_naming_the_line() {
    let (code, err) = {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = fixture("misanswers.py", "error-and-ok");
        let out = fencesim_in(tmp.path(), &["conformance", "--store", &store], &[]);
        assert_empty(tmp.path());
        (out.status.code(), stderr(&out))
    };
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for word in ["misanswers.py", "not exactly one of the protocol's answers", r#""ok":null"#, "lease_held"] {
        assert!(err.contains(word), "`{word}` missing from: {err}");
    }
}

/// Issue 38, item 24: a second answer to `close` was never read as one: the next call took it for
/// its own answer (in a sweep, the next world on that process failed "a request it was not asked"
/// at its `open`). It is named: a second answer to `close`.
#[test]
fn a_second_answer_to_close_is_a_harness_error_naming_close() {
    let store = fixture("misanswers.py", "close-twice");
    for args in [&["conformance"][..], &["sweep", "--scenario", "swarm", "--seeds", "3"][..]] {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut all = args.to_vec();
        all.extend(["--store", &store]);
        let out = fencesim_in(tmp.path(), &all, &[]);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        for word in ["misanswers.py", "a second time", "(request: close)"] {
            assert!(err.contains(word), "{args:?}: `{word}` missing from: {err}");
        }
        assert_empty(tmp.path());
    }
}

/// Issue 38, item 24: `--adapter-timeout-ms` without a store adapter was accepted and ignored.
#[test]
fn an_adapter_timeout_without_an_adapter_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let corpus = tmp.path().join("corpus.txt");
    std::fs::write(&corpus, "swarm 1\n").expect("corpus");
    let corpus = corpus.to_str().expect("utf-8");
    for args in [
        &["run", "--scenario", "swarm", "--seed", "1"][..],
        &["sweep", "--scenario", "swarm", "--seeds", "1"][..],
        &["replay", corpus][..],
        &["conformance", "--store", "memory"][..],
        &["soak", "--level", "store", "--cap-s", "1"][..],
    ] {
        let mut all = args.to_vec();
        all.extend(["--adapter-timeout-ms", "500"]);
        let out = fencesim(&all);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains("--adapter-timeout-ms applies only to a store adapter (--store cmd:COMMAND)"),
            "{args:?}: {err}"
        );
    }
}
