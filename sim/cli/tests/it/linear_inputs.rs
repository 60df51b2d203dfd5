//! Accepted inputs cost time linear in their size (issue 38 item 16): a world's fault schedule
//! (zombie probes; takeovers and stalls aimed at a lease's expiry instant, through the history's
//! questions) and the journal length `runs audit` reads. Each is measured at size N and 8N in CPU
//! time (the command's, as its shell's `times` reports it; the lookups' thread's), never wall
//! time: a wall clock counts every other process of a loaded machine, and a long run is
//! preempted more than a short one (a wall-clock ratio of 10.2 failed a linear check in a flake
//! hunt). The median of three each, and the ratio bounded at 24: a linear cost is about 8 times, a
//! quadratic one 64 (each was measured at 13 to 75 times for 4N before its fix). What can be
//! counted is counted where it lives (the repair's transactions in `cli::runs`; the zombie's picks
//! in `world::nodes::granted` are the old scans').

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fencesim_engine::entries::running;
use fencesim_oracle::history::{Call, CallOutcome, History, Payload, Role, Surface};
use fencesim_real::proc::thread_cpu;
use fencesim_store::{
    Epoch, JournalStore, Lease, RunId, RunMeta, RunStatus, Seq, SqliteOptions, SqliteStore, SystemClock,
};
use std::sync::Arc;

/// The most a cost may grow from N to 8N: between linear's 8 and quadratic's 64.
const MOST: f64 = 24.0;

/// The CPU time (user and system) of `args` run by fencesim, which must exit `code`: the median
/// of three runs. A shell runs it and prints its children's times (`times`, POSIX), so nothing
/// but that one process is counted.
fn median_time(args: &[&str], code: i32) -> Duration {
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let out = Command::new("sh")
                .args(["-c", "\"$@\" >/dev/null; code=$?; times; exit $code", "sh", env!("CARGO_BIN_EXE_fencesim")])
                .args(args)
                .output()
                .expect("run fencesim under sh");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
            children_cpu(&String::from_utf8_lossy(&out.stdout))
        })
        .collect();
    times.sort();
    times[1]
}

/// The second line of `times`' output (the children's `user system`, each like `0m1.230000s`),
/// summed.
fn children_cpu(times: &str) -> Duration {
    let line = times.lines().nth(1).unwrap_or_else(|| panic!("no children's line in `times`: {times:?}"));
    line.split_whitespace()
        .map(|field| {
            let (minutes, seconds) =
                field.trim_end_matches('s').split_once('m').unwrap_or_else(|| panic!("not a `times` field: {field:?}"));
            let minutes: f64 = minutes.parse().expect("minutes");
            let seconds: f64 = seconds.parse().expect("seconds");
            Duration::from_secs_f64(minutes * 60.0 + seconds)
        })
        .sum()
}

#[test]
fn children_cpu_reads_the_shells_times() {
    assert_eq!(children_cpu("0m0.010000s 0m0.000000s\n1m2.500000s 0m0.250000s\n"), Duration::from_millis(62_750));
    assert_eq!(children_cpu("0m0.00s 0m0.00s\n0m1.23s 0m0.05s\n"), Duration::from_millis(1_280));
}

fn assert_linear(what: &str, small: Duration, large: Duration) {
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-3);
    assert!(ratio < MOST, "{what}: {small:?} at N, {large:?} at 8N: {ratio:.1} times, more than {MOST}");
}

fn write_scenario(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the scenario");
    path.display().to_string()
}

/// Zombie probes at 50 a second over a fault window of N and 8N: each probe used to copy and sort
/// every lease granted so far (2,500 probes 1.8 s, 10,000 probes 28.9 s, release build).
#[test]
fn a_zombie_schedule_costs_time_linear_in_its_length() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let scenario = |fault_ms: u32| {
        format!(
            "description = \"zombies over {fault_ms} ms\"\n[world]\nworkers = 2\nruns = 2\nstart_ms = 1000\nfault_ms = \
             {fault_ms}\n[faults.zombie]\non = 1.0\nrate = [50, 50]\n"
        )
    };
    let small = write_scenario(dir.path(), "small.toml", &scenario(6_000));
    let large = write_scenario(dir.path(), "large.toml", &scenario(48_000));
    let time = |path: &str| median_time(&["run", "--scenario", path, "--seed", "1"], 0);
    assert_linear("zombie probes", time(&small), time(&large));
}

/// A history of `grants` tenures, each granted and renewed, as a world records them.
fn history_of(grants: i64) -> History {
    let history = History::new(|| 0, |_| Role::Worker);
    for i in 0..grants {
        let lease = Lease { run: RunId::new(format!("r{}", i % 97)), owner: format!("w{}", i % 5), epoch: Epoch(i) };
        for (clock_ms, surface) in [(i, Surface::Acquire), (i + 1, Surface::Renew)] {
            history.push_call(
                &lease.owner.clone(),
                Call {
                    clock_ms,
                    lease: Some(lease.clone()),
                    owner: None,
                    counter: 0,
                    surface,
                    run: lease.run.clone(),
                    blob_ref: None,
                    payload: Payload::None,
                    outcome: CallOutcome::Ok,
                    read: None,
                },
            );
        }
    }
    history
}

/// A world's takeover aimed at the holder's expiry instant (and a stall aimed at it, and every
/// zombie probe) asks the history for a lease's latest grant and its last extension: each used to
/// copy every grant and scan the rows back to the lease's (takeovers at every fence check: 800
/// runs 0.39 s, 3,200 runs 5.2 s, release build). The same questions, about the first leases
/// granted, of a history N and 8N tenures long: the median of three, at most 3 times as long
/// (a scan is 8 times).
#[test]
fn a_lease_s_expiry_costs_the_same_whatever_the_history_s_length() {
    let time = |history: &History| {
        let mut times: Vec<Duration> = (0..3)
            .map(|_| {
                let start = thread_cpu();
                for i in 0..20_000i64 {
                    let (run, owner) = (RunId::new(format!("r{}", i % 97)), format!("w{}", i % 5));
                    let lease = Lease { run: run.clone(), owner: owner.clone(), epoch: Epoch(i % 500) };
                    std::hint::black_box((history.last_extension(&lease), history.latest_grant(&run, &owner)));
                }
                thread_cpu() - start
            })
            .collect();
        times.sort();
        times[1]
    };
    let (small, large) = (time(&history_of(2_000)), time(&history_of(16_000)));
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-3);
    // Linear lookups measured 8.2 times; these about 1 (in this thread's CPU time, whatever else
    // the machine runs).
    assert!(ratio < 5.0, "{small:?} over 2,000 tenures, {large:?} over 16,000: {ratio:.1} times");
}

/// A database holding one run whose journal is `entries` dispatches that never finished.
fn dangling_journal(path: &Path, entries: i64) {
    let store = SqliteStore::open(SqliteOptions::file(path, Arc::new(SystemClock)).without_fsync()).expect("a store");
    let run = RunId::new("long");
    store.put_meta(&RunMeta::new(run.clone(), RunStatus::Running), None).expect("a meta");
    let conn = store.raw_connection();
    conn.execute_batch("BEGIN").expect("begin");
    for seq in 1..=entries {
        let payload = serde_json::to_string(&running(Seq(seq), "agent", &format!("k{seq}"))).expect("encode");
        conn.execute("INSERT INTO entries (run_id, seq, payload) VALUES (?1, ?2, ?3)", (run.as_str(), seq, payload))
            .expect("an entry");
    }
    conn.execute_batch("COMMIT").expect("commit");
}

/// `runs audit` over a journal of N and 8N dangling dispatches: finding them compared every
/// entry with every other (20,000 entries 0.29 s, 80,000 entries 21.9 s, release build).
#[test]
fn runs_audit_costs_time_linear_in_a_journals_length() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (small, large) = (dir.path().join("small.db"), dir.path().join("large.db"));
    dangling_journal(&small, 4_000);
    dangling_journal(&large, 32_000);
    let time = |db: &Path| median_time(&["runs", "audit", "--db", &db.display().to_string()], 0);
    assert_linear("runs audit", time(&small), time(&large));
}
