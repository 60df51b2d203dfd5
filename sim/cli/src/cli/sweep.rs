//! `fencesim sweep`: many seeds of one scenario in parallel. Prints, for each failing seed in
//! seed order, its violations' first line and its repro command, then a summary; exit 1 if any
//! seed failed. Each world is reduced to its summary as soon as it ends, so memory does not grow
//! with the number of seeds.

use std::path::PathBuf;

use fencesim::fleet::{self, Shard};
use fencesim::report;
use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::coverage;
use fencesim_sim::scenario::Scenario;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig, WorldError};
use serde_json::json;

use super::out::{out, outln};
use super::par::{self, Progress, Stopwatch};
use super::{CmdResult, Verdict};

/// The most seeds one sweep may ask for (about a year of one core); more is a typo.
pub const MAX_SEEDS: u64 = 1_000_000_000;

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
    #[command(flatten)]
    store: super::WorldStoreArgs,
    /// Plant a store or engine defect (repeatable).
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
    /// Run only shard I of N (0-based): the seeds equal to I modulo N.
    #[arg(long, value_name = "I/N", value_parser = Shard::parse)]
    shard: Option<Shard>,
    /// Exit 3 (inconclusive) naming every coverage event the scenario aims at (`aims`) that no
    /// world produced, when no world failed.
    #[arg(long)]
    require_coverage: bool,
    /// Write `sweep.json` and `junit.xml` into this folder (created if needed).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Write a failure bundle per failing seed under DIR (see `fencesim run --bundle`).
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
}

/// What is kept of one world once it ended: a few numbers, and its first violation and repro
/// when it failed.
struct Summary {
    seed: u64,
    coverage: std::collections::BTreeMap<String, u64>,
    virtual_ms: i64,
    fingerprint: u64,
    failure: Option<(usize, String, String)>,
}

/// What a sweep keeps of its worlds as they end, in seed order.
#[derive(Default)]
struct Tally {
    /// One line per failed (or unrunnable) seed, for the report.
    failures: Vec<serde_json::Value>,
    table: coverage::Table,
    failed: u64,
    errors: u64,
    first_error: Option<WorldError>,
    virtual_ms: i64,
    /// Bundles that could not be written: a harness error, though their worlds ran and failed.
    unbundled: Vec<String>,
}

impl Tally {
    /// No world failed or erred, but the coverage required is `missing`.
    fn inconclusive(&self, missing: &[&str]) -> bool {
        !missing.is_empty() && self.failed == 0 && self.errors == 0 && self.unbundled.is_empty()
    }

    /// Take one world's summary (or its harness error): print its line, write its bundle.
    fn add(
        &mut self,
        summary: Result<Summary, WorldError>,
        args: &Args,
        scenario: &Scenario,
        store_defects: fencesim_store::StoreDefects,
        engine_defects: fencesim_engine::EngineDefects,
    ) {
        match summary {
            Err(e) => {
                outln!("ERROR seed {}: {}", e.seed, e.error);
                self.failures.push(json!({"seed": e.seed, "violations": 0, "first": format!("harness error: {}", e.error), "repro": null}));
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
            Ok(s) => {
                self.virtual_ms += s.virtual_ms;
                self.table.add(&s.coverage);
                if let Some((n, first, repro)) = s.failure {
                    self.failed += 1;
                    outln!("FAIL seed {}: {n} violation(s), first {first}", s.seed);
                    outln!("  repro: {repro}");
                    self.failures.push(json!({"seed": s.seed, "violations": n, "first": first, "repro": repro}));
                    if let Some(dir) = &args.bundle {
                        let cfg = WorldConfig {
                            scenario: scenario.clone(),
                            seed: s.seed,
                            db: args.db,
                            store_defects,
                            engine_defects,
                            keep_db: None,
                            adapter: args.store.spec(),
                        };
                        match fencesim::bundle::write(dir, &cfg, &args.defects, s.fingerprint) {
                            Ok(path) => outln!("  bundle: {}", path.display()),
                            Err(e) => {
                                outln!("ERROR seed {}: bundle not written: {e}", s.seed);
                                self.unbundled.push(format!("seed {}: {e}", s.seed));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Which of the engine's branches (`fencesim_engine::probe`) the worlds reached: `probes: K of
/// N engine branches reached; never: ...`.
pub(super) fn probes_line(table: &coverage::Table) -> String {
    let missed = coverage::probes_missed(table);
    let all = fencesim_engine::probe::ALL.len();
    let never = if missed.is_empty() { String::new() } else { format!("; never: {}", missed.join(", ")) };
    format!("probes: {} of {all} engine branches reached{never}", all - missed.len())
}

/// `--seeds` is a count from 1 to the limit.
pub(super) fn check_seeds(seeds: u64) -> anyhow::Result<()> {
    anyhow::ensure!(seeds > 0, "--seeds must be at least 1");
    anyhow::ensure!(seeds <= MAX_SEEDS, "--seeds {seeds} is more than the limit of {MAX_SEEDS}");
    Ok(())
}

/// The flags' checks and the stale reports' removal, before any world runs: the worker count and
/// the last seed.
fn prepare(args: &Args) -> anyhow::Result<(usize, u64)> {
    let mut outputs = args.bundle.iter().map(|d| fencesim_sim::files::Named::new("--bundle", d)).collect::<Vec<_>>();
    if let Some(dir) = &args.report {
        outputs.extend(super::folder_outputs("--report", dir, &["sweep.json", "junit.xml"]));
    }
    let inputs: Vec<_> = super::scenario_file(Some(&args.scenario)).into_iter().collect();
    // Before the stale reports go: one of them may be the scenario file itself.
    fencesim_sim::files::check_distinct(&outputs, &inputs)?;
    if let Some(dir) = &args.report {
        // An earlier run's reports go first: no refusal or harness error below may leave its verdict.
        fencesim_sim::files::remove_stale(&[&dir.join("sweep.json"), &dir.join("junit.xml")])?;
    }
    check_seeds(args.seeds)?;
    let jobs = par::jobs(args.jobs)?;
    let end = args.start.checked_add(args.seeds - 1).ok_or_else(|| {
        anyhow::anyhow!("--start {} + --seeds {} overflows the largest seed {}", args.start, args.seeds, u64::MAX)
    })?;
    Ok((jobs, end))
}

/// The bundle and report folders, made ready to write into.
fn prepare_outputs(args: &Args) -> anyhow::Result<()> {
    if let Some(dir) = &args.bundle {
        fencesim::bundle::check_root(dir)?;
    }
    if let Some(dir) = &args.report {
        fencesim_sim::files::prepare_folder(dir).map_err(|e| anyhow::anyhow!("--report {e}"))?;
    }
    Ok(())
}

/// The scenario's content for the report (`scenario_sha256`): the SHA-256 of its file, or of a
/// built-in's compiled-in text. Two shards of one scenario file name but different contents are
/// not one run (`fencesim merge` refuses them).
fn scenario_sha256(name: &str) -> anyhow::Result<String> {
    let built_in = catalogue::SCENARIOS.iter().find(|(n, _)| *n == name && !name.ends_with(".toml"));
    let text = match built_in {
        Some((_, text)) => (*text).to_owned(),
        None => fencesim_sim::files::read_input(std::path::Path::new(name), fencesim_sim::files::MAX_TEXT_BYTES)?,
    };
    Ok(report::sha256_hex(text.as_bytes()))
}

/// The sweep's JSON report (`fencesim.sweep/2`) of `n` worlds.
fn sweep_doc(
    args: &Args,
    (scenario, scenario_sha256): (&Scenario, &str),
    shard: Shard,
    tally: &Tally,
    (n, jobs, seconds): (u64, usize, f64),
    missing: &[&str],
) -> serde_json::Value {
    let Tally { failures, table, failed, errors, virtual_ms, unbundled, .. } = tally;
    // No violation, but not the evidence asked for: neither a pass nor a failure.
    let inconclusive = tally.inconclusive(missing);
    let mut doc = json!({
        "schema": report::SWEEP_SCHEMA,
        "build": report::BUILD_ID,
        "commit": super::replay::git_commit(),
        "scenario": scenario.name,
        "scenario_sha256": scenario_sha256,
        "source": scenario.source,
        "db": args.store.describe(args.db),
        "defects": args.defects.iter().map(|d| d.name()).collect::<Vec<_>>(),
        "start": args.start,
        "seeds": args.seeds,
        "shard": shard.json(),
        "summary": {
            // A world that could not run is a harness error, never mistaken for a verdict.
            "verdict": if *errors > 0 || !unbundled.is_empty() {
                "error"
            } else if *failed > 0 {
                "fail"
            } else if inconclusive {
                "inconclusive"
            } else {
                "pass"
            },
            "worlds": n,
            "passed": n - failed - errors,
            "failed": failed,
            "errors": errors,
            "virtual_ms": virtual_ms,
            "jobs": jobs,
            "seconds": seconds,
        },
        "failures": failures,
        "coverage": table.json(),
        "aims": scenario.aims,
    });
    if inconclusive {
        doc["summary"]["missing_coverage"] = json!(missing);
    }
    doc
}

/// Run the world of `seed` and reduce it to its summary here, on the worker thread: its rows go
/// now.
fn summarize(
    args: &Args,
    scenario: &Scenario,
    seed: u64,
    (store_defects, engine_defects): (fencesim_store::StoreDefects, fencesim_engine::EngineDefects),
) -> Result<Summary, WorldError> {
    let cfg = WorldConfig {
        scenario: scenario.clone(),
        seed,
        db: args.db,
        store_defects,
        engine_defects,
        keep_db: None,
        adapter: args.store.spec(),
    };
    world::run(&cfg).map(|outcome| Summary {
        seed,
        coverage: coverage::of_world(&outcome.rows, &outcome.probes, i64::from(scenario.world.ttl_ms)),
        virtual_ms: outcome.counters.virtual_ms,
        fingerprint: outcome.fingerprint,
        failure: outcome.violations.first().map(|first| {
            (
                outcome.violations.len(),
                format!("{}: {}", first.checker, first.explanation),
                report::repro(&outcome, &args.defects),
            )
        }),
    })
}

pub fn run(args: &Args) -> CmdResult {
    let (jobs, end) = prepare(args)?;
    let scenario = catalogue::scenario(&args.scenario)?;
    let scenario_sha256 = scenario_sha256(&args.scenario)?;
    let shard = args.shard.unwrap_or(Shard::ALL);
    let (first_seed, count) = shard.seeds(args.start, end);
    prepare_outputs(args)?;
    let mut tally = Tally::default();
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    args.store.check(store_defects)?;
    args.store.handshake()?;
    let clock = Stopwatch::start();
    let progress = Progress::new(format!("sweep {}", scenario.name), usize::try_from(count).unwrap_or(usize::MAX));
    par::stream(
        count,
        jobs,
        &progress,
        |i| summarize(args, &scenario, first_seed + i * shard.count, (store_defects, engine_defects)),
        |_, summary| {
            tally.add(summary, args, &scenario, store_defects, engine_defects);
            true
        },
    );
    let seconds = clock.seconds();
    out!("{}", tally.table.text(&scenario.aims));
    outln!("{}", probes_line(&tally.table));
    let missing: Vec<&str> = if args.require_coverage { tally.table.missing(&scenario.aims) } else { Vec::new() };
    let inconclusive = tally.inconclusive(&missing);
    let (n, failed, errors) = (count, tally.failed, tally.errors);
    let which = if shard == Shard::ALL { String::new() } else { format!(", shard {shard}") };
    outln!(
        "{}: {n} seeds ({}..={end}{which}) on {} with {jobs} job(s): {} passed, {failed} failed in {seconds:.2} s ({:.1} seeds/s, {:.0}x simulated time)",
        scenario.name,
        args.start,
        args.store.describe(args.db),
        n - failed - errors,
        n as f64 / seconds.max(1e-9),
        tally.virtual_ms as f64 / 1000.0 / seconds.max(1e-9)
    );
    if let Some(dir) = &args.report {
        let doc = sweep_doc(args, (&scenario, &scenario_sha256), shard, &tally, (n, jobs, seconds), &missing);
        super::replay::write_reports(dir, "sweep.json", &doc, &fleet::junit_of(&doc))?;
    }
    let Tally { first_error, unbundled, .. } = tally;
    if let Some(first) = first_error {
        anyhow::bail!("{errors} world(s) could not run; the first: {first}");
    }
    if let Some(first) = unbundled.first() {
        anyhow::bail!("{} bundle(s) could not be written; the first, {first}", unbundled.len());
    }
    if !missing.is_empty() {
        outln!("COVERAGE: {} aimed-at event(s) never happened: {}", missing.len(), missing.join(", "));
    }
    Ok(if failed > 0 {
        Verdict::Fail
    } else if inconclusive {
        outln!("INCONCLUSIVE: no world failed, but the coverage required was not reached");
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    })
}
