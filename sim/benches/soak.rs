//! The soak's time to quorum (issue 9): how long a store-level storm of real processes needs to
//! meet the default quorum (3 writers) and the release quorum (5 writers), with the WAL's peak
//! size and the number of processes it took, on this machine's release build. Against a baseline
//! measured in the same run: one process doing the release quorum's 2,000 fenced appends alone on
//! a fresh WAL file (what the storm's appends would cost with no contention, no faults and no
//! stalls), so a drifting machine shows as a drifting baseline, not as a regression.
//!
//!     cargo bench -p fencesim --bench soak [-- --rounds 5 --release-rounds 1]
//!
//! Goals: the default quorum within 5 s, the release quorum within 60 s, the release WAL peak
//! under 64 MB. Default rounds alternate with baseline rounds; medians reported.

// A benchmark measures wall-clock time and starts processes.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
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
