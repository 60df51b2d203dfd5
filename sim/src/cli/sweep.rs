//! `fencesim sweep`: many seeds of one scenario in parallel. Prints a summary and, for each
//! failing seed, its violations' first line and its repro command; exit 1 if any seed failed.

use fencesim::catalogue::{self, Defect};
use fencesim::report;
use fencesim::stores::DbKind;
use fencesim::world::{self, WorldConfig};

use super::par::{self, Progress, Stopwatch};
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A built-in scenario or a path to a scenario `.toml` file.
    #[arg(long, default_value = "swarm")]
    scenario: String,
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    start: u64,
    /// Worlds run at once (default: the machine's cores).
    #[arg(long)]
    jobs: Option<usize>,
    #[arg(long, default_value = "memdb", value_parser = super::parse_db)]
    db: DbKind,
    /// Plant a store or engine defect (repeatable).
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
    /// Write a failure bundle per failing seed under DIR (see `fencesim run --bundle`).
    #[arg(long, value_name = "DIR")]
    bundle: Option<std::path::PathBuf>,
}

pub fn run(args: &Args) -> CmdResult {
    anyhow::ensure!(args.seeds > 0, "--seeds must be at least 1");
    anyhow::ensure!(args.jobs != Some(0), "--jobs must be at least 1");
    let end = args.start.checked_add(args.seeds - 1).ok_or_else(|| anyhow::anyhow!("--start + --seeds overflows"))?;
    let scenario = catalogue::scenario(&args.scenario)?;
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    let seeds: Vec<u64> = (args.start..=end).collect();
    let clock = Stopwatch::start();
    let progress = Progress::new(format!("sweep {}", scenario.name), seeds.len());
    let jobs = args.jobs.unwrap_or_else(par::default_jobs);
    let outcomes = par::map(&seeds, jobs, &progress, |&seed| {
        let cfg =
            WorldConfig { scenario: scenario.clone(), seed, db: args.db, store_defects, engine_defects, keep_db: None };
        world::run(&cfg)
    });
    let seconds = clock.seconds();
    let (mut failed, mut errors, mut virtual_ms) = (0, Vec::new(), 0);
    for outcome in outcomes {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                println!("ERROR seed {}: {}", e.seed, e.message);
                errors.push(e);
                continue;
            }
        };
        virtual_ms += outcome.counters.virtual_ms;
        if let Some(first) = outcome.violations.first() {
            failed += 1;
            let n = outcome.violations.len();
            println!("FAIL seed {}: {n} violation(s), first {}: {}", outcome.seed, first.checker, first.explanation);
            println!("  repro: {}", report::repro(&outcome, &args.defects));
            if let Some(dir) = &args.bundle {
                let cfg = WorldConfig {
                    scenario: scenario.clone(),
                    seed: outcome.seed,
                    db: args.db,
                    store_defects,
                    engine_defects,
                    keep_db: None,
                };
                match fencesim::bundle::write(dir, &cfg, &args.defects, outcome.fingerprint) {
                    Ok(path) => println!("  bundle: {}", path.display()),
                    Err(e) => errors.push(fencesim::world::WorldError {
                        scenario: scenario.name.clone(),
                        seed: outcome.seed,
                        message: e.to_string(),
                    }),
                }
            }
        }
    }
    let n = seeds.len();
    println!(
        "{}: {n} seeds ({}..={end}) on {} with {jobs} job(s): {} passed, {failed} failed in {seconds:.2} s ({:.1} seeds/s, {:.0}x simulated time)",
        scenario.name,
        args.start,
        args.db.as_str(),
        n - failed - errors.len(),
        n as f64 / seconds.max(1e-9),
        virtual_ms as f64 / 1000.0 / seconds.max(1e-9)
    );
    if let Some(first) = errors.first() {
        anyhow::bail!("{} world(s) could not run; the first: {first}", errors.len());
    }
    Ok(if failed == 0 { Verdict::Pass } else { Verdict::Fail })
}
