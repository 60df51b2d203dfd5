//! The soak's time to quorum (issue 9): how long a store-level storm of real processes needs to
//! meet the default quorum (3 writers) and the release quorum (5 writers), with the WAL's peak
//! size and the number of processes it took, on this machine's release build. Against a baseline
//! measured in the same run: one process doing the release quorum's 2,000 fenced appends alone on
//! a fresh WAL file (what the storm's appends would cost with no contention, no faults and no
//! stalls), so a drifting machine shows as a drifting baseline, not as a regression.
//!
//!     cargo bench -p fencesim --bench soak [-- --rounds 5 --release-rounds 1]
//!     cargo bench -p fencesim --bench soak -- --loaded [--seeds 10] [--cap-s 60]
//!
//! Goals: the default quorum within 5 s, the release quorum within 60 s, the release WAL peak
//! under 64 MB. Default rounds alternate with baseline rounds; medians reported.
//!
//! `--loaded` (issue 25): the release quorum (5 writers) on seeds 1..=N while one busy-loop
//! process pinned to each core keeps every core otherwise busy, as a shared CI runner would.
//! Per seed: the verdict, time to quorum, the floor met last and the referee's peak RSS (its
//! VmHWM after the judge); then how many met the quorum within the cap, the median and the
//! maximum. Goals: every seed within 60 s, median <= 30 s, referee RSS < 100 MB. The busy loops
//! die with the bench on every exit path (killed and reaped by a guard's drop, and each asks for
//! SIGKILL at its parent's death).

// A benchmark measures wall-clock time and starts processes.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Instant;

use fencesim_store::{JournalEntry, JournalStore, LeasableStore, RunId, SqliteOptions, SqliteStore, SystemClock};
use serde_json::Value;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// One soak through the real binary; its soak.json.
fn soak(seed: u64, args: &[&str], out: &Path) -> Value {
    let report = out.join(format!("r{seed}-{}", args.join("_").replace(['-', ' '], "")));
    let status = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["soak", "--level", "store", "--seed", &seed.to_string(), "--report"])
        .arg(&report)
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run fencesim soak");
    let json = std::fs::read(report.join("soak.json")).expect("soak.json");
    let doc: Value = serde_json::from_slice(&json).expect("soak.json parses");
    assert!(status.code().is_some(), "soak died of a signal");
    doc
}

/// 2,000 fenced appends by one process under its own lease on a fresh WAL file, in seconds.
fn baseline(dir: &Path) -> f64 {
    let path = dir.join(format!("baseline-{}.db", std::process::id()));
    let store = SqliteStore::open(SqliteOptions::file(&path, Arc::new(SystemClock))).expect("open");
    let run = RunId::new("soak-run");
    let lease = store.acquire(&run, "bench").expect("acquire");
    let start = Instant::now();
    for seq in 1..=2000 {
        store.append(&run, &JournalEntry::new(seq, "step", "ok"), Some(&lease)).expect("append");
    }
    let secs = start.elapsed().as_secs_f64();
    drop(store);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    secs
}

fn field(doc: &Value, key: &str) -> f64 {
    doc[key].as_f64().unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == BUSY_LOOP) {
        busy_loop(args.get(i + 1).and_then(|c| c.parse().ok()).unwrap_or(0));
    }
    if args.iter().any(|a| a == "--loaded") {
        loaded(arg("--seeds", 10), arg("--cap-s", 60));
        return;
    }
    let rounds = arg("--rounds", 5);
    let release_rounds = arg("--release-rounds", 1);
    let dir = tempfile::tempdir().expect("temporary folder");
    let (mut default_s, mut base_s, mut wal, mut procs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let doc = soak(round + 1, &[], dir.path());
        assert_eq!(doc["verdict"], "pass", "default soak seed {} failed: {doc}", round + 1);
        default_s.push(field(&doc, "storm_ms") / 1000.0);
        wal.push(field(&doc, "wal_peak_bytes"));
        procs.push(field(&doc, "processes"));
        base_s.push(baseline(dir.path()));
    }
    let base = median(base_s);
    println!("baseline: 2000 fenced appends by one process on a WAL file: {base:.2} s (median of {rounds})");
    let d = median(default_s);
    println!(
        "default quorum, 3 writers: {d:.2} s to quorum (median of {rounds}; goal <= 5 s), {:.1}x the baseline, WAL peak {:.0} KB, {:.0} processes",
        d / base,
        median(wal) / 1024.0,
        median(procs)
    );
    for round in 0..release_rounds {
        let doc = soak(100 + round, &["--quorum", "release", "--writers", "5", "--cap-s", "120"], dir.path());
        let secs = field(&doc, "storm_ms") / 1000.0;
        println!(
            "release quorum, 5 writers, ttl {} ms, seed {}: {} in {secs:.1} s (goal <= 60 s), {:.1}x the baseline, WAL peak {:.1} MB (goal < 64 MB), {:.0} processes",
            doc["ttl_ms"],
            100 + round,
            doc["verdict"].as_str().unwrap_or("?"),
            secs / base,
            field(&doc, "wal_peak_bytes") / 1_048_576.0,
            field(&doc, "processes")
        );
        println!("  time to floor: {}", floors_met(&doc));
    }
}

/// `epochs 20.1s stale_rejects 41.0s ...`: when each gated counter met its floor.
fn floors_met(doc: &Value) -> String {
    let floors = doc["floors"].as_array().cloned().unwrap_or_default();
    floors
        .iter()
        .map(|f| {
            let at = f["met_at_ms"].as_f64().map_or("never".to_owned(), |ms| format!("{:.1}s", ms / 1000.0));
            format!("{} {at}", f["counter"].as_str().unwrap_or("?"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The hidden argument that makes this bench binary a busy loop pinned to one CPU.
const BUSY_LOOP: &str = "--busy-loop";

/// Spin forever on CPU `cpu` (started dying with the bench: `fencesim_protocol::die_with_parent`).
fn busy_loop(cpu: usize) -> ! {
    use nix::sched::{CpuSet, sched_setaffinity};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    set.set(cpu).expect("cpu in range");
    sched_setaffinity(Pid::from_raw(0), &set).expect("pin the busy loop");
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// Busy loops, one pinned to each core; dropping it kills and reaps them.
struct Loaders(Vec<Child>);

impl Loaders {
    fn start() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let exe = std::env::current_exe().expect("the bench binary");
        let children = (0..cores)
            .map(|cpu| {
                let mut command = Command::new(&exe);
                fencesim_protocol::die_with_parent(&mut command);
                command
                    .args([BUSY_LOOP, &cpu.to_string()])
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .expect("start a busy loop")
            })
            .collect();
        Self(children)
    }
}

impl Drop for Loaders {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The release quorum under load on seeds 1..=`seeds`: each seed's time to quorum, then the
/// count within the cap, the median and the maximum, and the referee's peak RSS.
fn loaded(seeds: u64, cap_s: u64) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let loaders = Loaders::start();
    println!(
        "release quorum under load: 5 writers, {} busy loops (one pinned to each core), cap {cap_s} s",
        loaders.0.len()
    );
    let (mut times, mut rss, mut within) = (Vec::new(), Vec::new(), 0);
    let cap = cap_s.to_string();
    for seed in 1..=seeds {
        let doc = soak(seed, &["--quorum", "release", "--writers", "5", "--cap-s", &cap], dir.path());
        let secs = field(&doc, "storm_ms") / 1000.0;
        let verdict = doc["verdict"].as_str().unwrap_or("?").to_owned();
        let referee_mb = doc["rss_peak_kib"]["referee"].as_f64().unwrap_or(f64::NAN) / 1024.0;
        let met = !doc["capped"].as_bool().unwrap_or(true);
        if met && verdict == "pass" {
            within += 1;
        }
        times.push(if met { secs } else { f64::INFINITY });
        rss.push(referee_mb);
        println!(
            "  seed {seed}: {verdict} in {secs:.1} s{}, last floor {}, referee peak RSS {referee_mb:.0} MB",
            if met { "" } else { " (capped)" },
            last_floor(&doc)
        );
    }
    drop(loaders);
    let max = times.iter().copied().fold(0.0, f64::max);
    let max_rss = rss.iter().copied().fold(0.0, f64::max);
    println!(
        "loaded release quorum: {within}/{seeds} passed within {cap_s} s (goal {seeds}/{seeds}), median {:.1} s (goal <= 30 s), max {}, referee peak RSS max {max_rss:.0} MB (goal < 100 MB)",
        median(times),
        if max.is_finite() { format!("{max:.1} s") } else { "capped".to_owned() }
    );
}

/// The gated counter that met its floor last, and when (`never` if one never did).
fn last_floor(doc: &Value) -> String {
    let floors = doc["floors"].as_array().cloned().unwrap_or_default();
    let at = |f: &Value| f["met_at_ms"].as_f64().unwrap_or(f64::INFINITY);
    floors.iter().max_by(|a, b| at(a).total_cmp(&at(b))).map_or("none".to_owned(), |f| {
        let when = if at(f).is_finite() { format!("{:.1} s", at(f) / 1000.0) } else { "never".to_owned() };
        format!("{} at {when}", f["counter"].as_str().unwrap_or("?"))
    })
}
