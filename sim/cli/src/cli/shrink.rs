//! `fencesim shrink`: from a failing world (a seed, or a plan file) to a minimal plan that still
//! fails the same checker (see `fencesim::shrink`). Prints the before and after sizes and the
//! minimal plan's repro command, writes the plan with `--out` (atomically; an existing file only
//! with `--force`), and stops at `--budget-s` (a hard stop, even inside a world), saying so. `--kill-matrix` measures it: every
//! planted defect's first catching world is shrunk and the minimal plan replayed in a fresh
//! process, which must fail the same checker.

#![allow(clippy::disallowed_methods, reason = "the CLI edge keeps the wall-clock budget and runs child processes")]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::Context;
use fencesim::mutants::{self, Detector};
use fencesim::shrink::{self, ShrinkError, Shrunk, Size};
use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::files::{Named, write_atomic};
use fencesim_sim::scenario::planfile::PlanFile;
use fencesim_sim::stores::DbKind;

use super::out::{errln, outln};
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A built-in scenario or a scenario `.toml` file (with --seed).
    #[arg(long)]
    scenario: Option<String>,
    #[arg(long)]
    seed: Option<u64>,
    /// Shrink a plan file instead of a seed.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// Plant a store or engine defect (repeatable).
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
    #[arg(long, default_value = "memdb", value_parser = super::parse_db)]
    db: DbKind,
    /// Write the minimal plan here (atomically; refuses an existing file without --force).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[arg(long)]
    force: bool,
    /// Wall-clock seconds to spend (per world shrunk, with --kill-matrix), at most a day: a hard
    /// stop, which cuts short the world running when it comes (the original world too: then there
    /// is nothing to shrink yet, exit 2).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    budget_s: u64,
    /// Measure: shrink every planted defect's first catching world (seeds 1..=--seeds) and
    /// replay each minimal plan in a fresh process; print the table and the medians.
    #[arg(long, conflicts_with_all = ["scenario", "seed", "plan", "defects", "out"])]
    kill_matrix: bool,
    /// With --kill-matrix: seeds per scenario to hunt each defect in.
    #[arg(long, default_value_t = 10)]
    seeds: u64,
}

/// A wall-clock budget: a timer thread raises its flag when the time is up, and the shrinker and
/// every world it runs stop at it. Dropping the budget ends the timer.
struct Budget {
    seconds: u64,
    flag: Arc<AtomicBool>,
    _cancel: mpsc::Sender<()>,
}

impl Budget {
    fn start(seconds: u64) -> Self {
        let flag = Arc::new(AtomicBool::new(false));
        let (cancel, cancelled) = mpsc::channel::<()>();
        let raise = Arc::clone(&flag);
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(Duration::from_secs(seconds)) {
                raise.store(true, Ordering::Relaxed);
            }
        });
        Self { seconds, flag, _cancel: cancel }
    }

    /// Shrink `file` within the budget.
    fn shrink(&self, file: &PlanFile, db: DbKind) -> anyhow::Result<Shrunk> {
        match shrink::shrink(file, db, &self.flag) {
            Err(ShrinkError::OutOfTime) => anyhow::bail!(
                "the {} s budget ran out before the original world finished: nothing is known to shrink yet (raise --budget-s)",
                self.seconds
            ),
            other => Ok(other?),
        }
    }
}

fn sizes(s: &Size) -> String {
    format!(
        "{} fault events, {} plan events, {} runs, {} workers, fault window {} ms, {} rows",
        s.events, s.plan_events, s.runs, s.workers, s.fault_ms, s.rows
    )
}

pub fn run(args: &Args) -> CmdResult {
    if args.kill_matrix {
        return kill_matrix(args);
    }
    let outputs: Vec<Named> = args.out.iter().map(|p| Named::new("--out", p)).collect();
    let inputs: Vec<Named> = args
        .plan
        .iter()
        .map(|p| Named::new("the --plan file", p))
        .chain(super::scenario_file(args.scenario.as_deref()))
        .collect();
    fencesim_sim::files::check_distinct(&outputs, &inputs)?;
    let file = match (&args.plan, &args.scenario, args.seed) {
        (Some(path), None, None) => {
            let mut file = PlanFile::load(path)?;
            let extra: Vec<Defect> = args.defects.iter().filter(|d| !file.defects.contains(d)).copied().collect();
            file.defects.extend(extra);
            file
        }
        (None, Some(name), Some(seed)) => PlanFile::draw(&catalogue::scenario(name)?, seed, &args.defects),
        _ => anyhow::bail!("name a world: --scenario NAME --seed S, or --plan FILE"),
    };
    if let Some(out) = &args.out {
        fencesim_sim::files::check_target(out, args.force).map_err(|e| anyhow::anyhow!("--out {e}"))?;
    }
    let shrunk = Budget::start(args.budget_s).shrink(&file, args.db)?;
    outln!("shrink {} seed {}: keeps failing {}", file.scenario, file.seed, shrunk.checker);
    outln!("  before: {}", sizes(&shrunk.before));
    outln!("  after:  {}", sizes(&shrunk.after));
    outln!(
        "  {} worlds run; {}",
        shrunk.worlds,
        if shrunk.stopped_early && shrunk.after == shrunk.before {
            format!("stopped early: the {} s budget ran out before anything was removed", args.budget_s)
        } else if shrunk.stopped_early {
            format!("stopped early: the {} s budget ran out (the plan is smaller, maybe not minimal)", args.budget_s)
        } else {
            "every pass finished".to_owned()
        }
    );
    match &args.out {
        Some(out) => {
            write_atomic(out, shrunk.minimal.to_toml().as_bytes(), args.force)?;
            outln!("  repro: {}", repro(out, args.db));
        }
        None => outln!("  (no --out: the minimal plan was not written)"),
    }
    Ok(Verdict::Pass)
}

fn repro(plan: &Path, db: DbKind) -> String {
    let db = if db == DbKind::Memdb { String::new() } else { format!(" --db {}", db.as_str()) };
    format!("fencesim run --plan {}{db} --trace", fencesim::report::sh_quote(&plan.display().to_string()))
}

/// One row of the measurement.
struct Row {
    defect: &'static str,
    place: String,
    shrunk: Shrunk,
    replayed: bool,
}

fn kill_matrix(args: &Args) -> CmdResult {
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    // Inside the process root: its janitor, or the signal handler, removes it however this ends.
    let dir = fencesim_real::proc::janitor::temp_dir("fencesim-shrink-", false)
        .context("a temporary folder for the minimal plans")?;
    let exe = std::env::current_exe().context("this program's path")?;
    let mut rows = Vec::new();
    for defect in Defect::all() {
        if mutants::detector(defect) != Detector::Worlds {
            continue;
        }
        let hunt = mutants::hunt(defect, args.seeds, args.db)?;
        let Some(catch) = hunt.catch else {
            outln!("{:<28} not caught in {} worlds", defect.name(), hunt.tries);
            continue;
        };
        let seed = catch.seed.unwrap_or_default();
        let scenario = catalogue::scenario(&catch.scenario)?;
        let file = PlanFile::draw(&scenario, seed, &[defect]);
        let shrunk = Budget::start(args.budget_s)
            .shrink(&file, args.db)
            .with_context(|| format!("shrinking {}'s world", defect.name()))?;
        let path = dir.path().join(format!("{}.toml", defect.name()));
        write_atomic(&path, shrunk.minimal.to_toml().as_bytes(), false)?;
        // A fresh process: the minimal plan must fail the same checker there too.
        let out = super::child_fencesim(&exe)
            .args(["run", "--plan"])
            .arg(&path)
            .args(["--db", args.db.as_str(), "--format", "json"])
            .output()
            .context("replaying a minimal plan")?;
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let replayed = out.status.code() == Some(1)
            && report["violations"]
                .as_array()
                .is_some_and(|vs| vs.iter().any(|v| v["checker"] == shrunk.checker.name()));
        let row = Row { defect: defect.name(), place: format!("{} seed {seed}", catch.scenario), shrunk, replayed };
        print_row(&row);
        rows.push(row);
    }
    let median = |mut xs: Vec<f64>| -> f64 {
        xs.sort_by(f64::total_cmp);
        match xs.len() {
            0 => 0.0,
            n if n % 2 == 1 => xs[n / 2],
            n => f64::midpoint(xs[n / 2 - 1], xs[n / 2]),
        }
    };
    let reduction = |b: usize, a: usize| if b == 0 { 0.0 } else { 100.0 * (1.0 - a as f64 / b as f64) };
    let events = median(rows.iter().map(|r| reduction(r.shrunk.before.events, r.shrunk.after.events)).collect());
    let rows_cut = median(rows.iter().map(|r| reduction(r.shrunk.before.rows, r.shrunk.after.rows)).collect());
    let max_runs = rows.iter().map(|r| r.shrunk.after.runs).max().unwrap_or(0);
    let replayed = rows.iter().filter(|r| r.replayed).count();
    outln!(
        "{} worlds shrunk: median {events:.0}% fewer fault events, {rows_cut:.0}% fewer rows; at most {max_runs} runs; {replayed} of {} fail the same checker in a fresh process",
        rows.len(),
        rows.len()
    );
    Ok(if replayed == rows.len() && max_runs <= 3 && events >= 80.0 { Verdict::Pass } else { Verdict::Fail })
}

fn print_row(r: &Row) {
    let (b, a) = (&r.shrunk.before, &r.shrunk.after);
    outln!(
        "| {:<28} | {:<36} | {:<22} | {:>4} -> {:<3} | {:>2} -> {:<2} | {:>2} -> {:<2} | {:>4} -> {:<4} | {:>4} | {} |",
        r.defect,
        r.place,
        r.shrunk.checker,
        b.events,
        a.events,
        b.runs,
        a.runs,
        b.workers,
        a.workers,
        b.rows,
        a.rows,
        r.shrunk.worlds,
        if r.replayed { "yes" } else { "NO" }
    );
}

/// The shrunk plan of a failing world (`run --bundle DIR --shrink`), within 60 s; none (said on
/// stderr) when the world takes longer than that to fail again.
pub fn minimal(cfg: &fencesim_sim::world::WorldConfig, defects: &[Defect]) -> anyhow::Result<Option<PlanFile>> {
    let file = PlanFile::draw(&cfg.scenario, cfg.seed, defects);
    match shrink::shrink(&file, cfg.db, &Budget::start(60).flag) {
        Err(ShrinkError::OutOfTime) => {
            errln!("bundle: the 60 s shrink budget ran out before the world failed again: no plan.min.toml");
            Ok(None)
        }
        other => Ok(Some(other?.minimal)),
    }
}
