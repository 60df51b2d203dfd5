//! Simulator throughput: seeds per second of the `swarm` scenario held at 5 workers and about 20
//! runs, on one job and on two, and simulated seconds per wall second; against a baseline
//! measured in the same run: a bare madsim world of 5 nodes doing 200 fenced transactions each
//! over one memdb (the design's reference figure, 50-60 seeds/s on this kind of machine).
//! Rounds alternate between the measurements so machine noise hits all alike; medians reported.
//!
//!     cargo bench -p fencesim --bench worlds [-- --rounds 5 --seeds 60 --rss 1000,10000]
//!
//! Then peak memory (issue 11): `fencesim sweep --scenario swarm --seeds N --jobs 2` as a child
//! process for each N of `--rss` (comma-separated; `--rss 0` skips it), its peak resident set
//! (`VmHWM`) sampled from `/proc` every 20 ms until it exits. Goal: flat in N, under 200 MB.
//!
//! Goals (issue 4): at least 60 seeds/s on one core, at least 1000x simulated time.

// A benchmark measures wall-clock time and runs worlds on threads; the simulator's bans on both
// are for code inside a world.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fencesim::catalogue;
use fencesim::env::SimClock;
use fencesim::scenario::{Scenario, Span};
use fencesim::stores::{Db, DbKind};
use fencesim::world::{self, WorldConfig};
use fencesim_store::{Defects, JournalEntry, JournalStore, LeasableStore, RunId};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn swarm() -> Scenario {
    let mut s = catalogue::scenario("swarm").expect("the built-in swarm scenario");
    s.world.workers = Span(5, 5);
    s.world.runs = Span(18, 22);
    s
}

/// Seeds from a shared counter, run on `jobs` threads; returns (seeds/s, simulated s per wall s).
fn worlds(scenario: &Scenario, first: u64, seeds: u64, jobs: usize) -> (f64, f64) {
    let next = AtomicU64::new(first);
    let simulated_ms = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= first + seeds {
                        break;
                    }
                    let cfg = WorldConfig {
                        scenario: scenario.clone(),
                        seed,
                        db: DbKind::Memdb,
                        store_defects: Defects::NONE,
                        engine_defects: Default::default(),
                        keep_db: None,
                    };
                    let report = world::run(&cfg).expect("world runs");
                    assert!(report.passed(), "seed {seed} failed: {:?}", report.violations.first());
                    simulated_ms.fetch_add(u64::try_from(report.counters.virtual_ms).unwrap_or(0), Ordering::SeqCst);
                }
            });
        }
    });
    let wall = start.elapsed().as_secs_f64();
    (seeds as f64 / wall, simulated_ms.load(Ordering::SeqCst) as f64 / 1000.0 / wall)
}

/// The baseline world: 5 nodes, each with its own connection, 200 fenced appends each, a 1 ms
/// virtual pause between them.
fn bare(seed: u64) {
    let db = Db::new(DbKind::Memdb).expect("db");
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async move {
        let tasks: Vec<_> = (0..5)
            .map(|node| {
                let store = db.open(Arc::new(SimClock::new(0)), 60_000, Defects::NONE).expect("open");
                madsim::task::spawn_local(async move {
                    let run = RunId::new(format!("bare-{node}"));
                    let lease = store.acquire(&run, "bare").expect("acquire");
                    for seq in 1..=200 {
                        store.append(&run, &JournalEntry::new(seq, "step", "ok"), Some(&lease)).expect("append");
                        madsim::time::sleep(Duration::from_millis(1)).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("node");
        }
    });
}

fn bare_rate(seeds: u64) -> f64 {
    let start = Instant::now();
    for seed in 0..seeds {
        bare(seed);
    }
    seeds as f64 / start.elapsed().as_secs_f64()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Peak RSS in MB of one `fencesim sweep` child, and its wall seconds.
fn sweep_peak_rss(seeds: u64) -> (f64, f64) {
    let start = Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["sweep", "--scenario", "swarm", "--jobs", "2", "--seeds", &seeds.to_string()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start fencesim sweep");
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak_kb = peak_kb.max(hwm.unwrap_or(0));
        }
        if child.try_wait().expect("wait for fencesim").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (peak_kb as f64 / 1024.0, start.elapsed().as_secs_f64())
}

fn main() {
    let rss: Vec<u64> = std::env::args()
        .collect::<Vec<_>>()
        .windows(2)
        .find(|w| w[0] == "--rss")
        .map_or("1000,10000".to_owned(), |w| w[1].clone())
        .split(',')
        .filter_map(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .collect();
    let rounds = arg("--rounds", 5);
    let seeds = arg("--seeds", 60);
    let scenario = swarm();
    let (mut one, mut two, mut accel, mut base) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let first = 1 + round * seeds;
        let (rate, sim) = worlds(&scenario, first, seeds, 1);
        one.push(rate);
        accel.push(sim);
        two.push(worlds(&scenario, first, seeds, 2).0);
        base.push(bare_rate(seeds));
        eprintln!(
            "round {}: 1 job {rate:.1} seeds/s ({sim:.0}x), 2 jobs {:.1}, bare {:.1}",
            round + 1,
            two[two.len() - 1],
            base[base.len() - 1]
        );
    }
    let (one, two, accel, base) = (median(one), median(two), median(accel), median(base));
    println!("swarm (5 workers, 18-22 runs), {rounds} rounds of {seeds} seeds, medians:");
    println!("  1 job : {one:7.1} seeds/s ({:.2}x the bare baseline; goal >= 60 seeds/s)", one / base);
    println!("  2 jobs: {two:7.1} seeds/s ({:.2}x one job)", two / one);
    println!("  simulated time: {accel:7.0}x wall time on one job (goal >= 1000x)");
    println!("  bare baseline (5 nodes x 200 fenced appends): {base:7.1} seeds/s");
    for n in rss {
        let (mb, seconds) = sweep_peak_rss(n);
        println!("  sweep --seeds {n} --jobs 2: peak RSS {mb:.1} MB ({seconds:.0} s; goal < 200 MB, flat in seeds)");
    }
}
