//! `fencesim mutants`: the kill matrix. One row per planted defect of store and engine: caught
//! or not, tries to the first catch, where and by which checker, and the repro command; then the
//! clean baseline (the same seeds of every scenario with no defect). Exit 0 only when every
//! defect is caught and the baseline is clean.

use std::collections::BTreeMap;

use anyhow::Context;
use fencesim::mutants::{self, Catch, Detector, Hunt};
use fencesim::report;
use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::coverage::{self, Table};
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};
use fencesim_store::conformance::{self, Outcome, SqliteTarget};
use fencesim_store::{StoreDefect, StoreDefects};
use serde_json::json;

use super::out::outln;
use super::par::{self, Progress, Stopwatch};
use super::{CmdResult, Format, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seeds per scenario before a defect counts as not caught; also the baseline's seeds.
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// Worlds run at once (default: the machine's cores).
    #[arg(long)]
    jobs: Option<usize>,
    #[arg(long, default_value = "memdb", value_parser = super::parse_db)]
    db: DbKind,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Run only shard I of N (0-based): the defects and baseline worlds whose 0-based index is I
    /// modulo N. Every shard must pass for the matrix to pass.
    #[arg(long, value_name = "I/N", value_parser = fencesim::fleet::Shard::parse)]
    shard: Option<fencesim::fleet::Shard>,
    /// Also hunt every defect in the real multi-process soak (a store defect at the store level,
    /// an engine defect at the engine level, seeds 1 to 3 until one fails): the `soak` column.
    /// Real processes are not deterministic, so the column informs and does not gate.
    #[arg(long)]
    soak: bool,
}

/// Seeds the soak column tries per defect.
const SOAK_SEEDS: u64 = 3;

/// The soak column of one defect: the first seed whose soak failed (exit 1), if any.
fn soak_hunt(defect: Defect) -> anyhow::Result<Option<u64>> {
    let exe = std::env::current_exe().context("cannot locate the fencesim binary for the soak")?;
    let level = match defect {
        Defect::Store(_) => "store",
        Defect::Engine(_) => "engine",
    };
    for seed in 1..=SOAK_SEEDS {
        let status = super::child_fencesim(&exe)
            .args(["soak", "--level", level, "--seed", &seed.to_string(), "--defect", defect.name()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .with_context(|| format!("cannot run the soak for {defect}"))?;
        match status.code() {
            Some(0) => {}
            Some(1) => return Ok(Some(seed)),
            other => anyhow::bail!("the soak for {defect} seed {seed} ended with {other:?}, not a verdict"),
        }
    }
    Ok(None)
}

/// A clean-baseline world that found a violation.
struct Dirty {
    scenario: String,
    seed: u64,
    first: String,
    repro: String,
}

/// The baseline: every scenario's seeds 1..=seeds without a defect, scenario-major, each world
/// reduced to its first violation (if any) as soon as it ends. The worlds that failed.
fn baseline(args: &Args, shard: fencesim::fleet::Shard, jobs: usize) -> anyhow::Result<(Vec<Dirty>, Table)> {
    let names: Vec<&str> = catalogue::SCENARIOS.iter().map(|(name, _)| *name).collect();
    // This shard's baseline worlds: the indexes k*N + I of the whole baseline.
    let (first, count) = shard.seeds(0, names.len() as u64 * args.seeds - 1);
    let progress = Progress::new("baseline", usize::try_from(count).unwrap_or(usize::MAX));
    let mut dirty: Vec<Dirty> = Vec::new();
    let mut branches = Table::default();
    let mut error: Option<anyhow::Error> = None;
    par::stream(
        count,
        jobs,
        &progress,
        |i| -> anyhow::Result<(Option<Dirty>, BTreeMap<String, u64>)> {
            let i = first + i * shard.count;
            let name = names[(i / args.seeds) as usize];
            let seed = i % args.seeds + 1;
            let scenario = catalogue::scenario(name)?;
            let cfg = WorldConfig {
                scenario,
                seed,
                db: args.db,
                store_defects: StoreDefects::NONE,
                engine_defects: Default::default(),
                keep_db: None,
                adapter: None,
            };
            let outcome = world::run(&cfg)?;
            let probes = outcome.probes.iter().map(|(p, n)| (coverage::probe_event(*p), *n)).collect();
            let dirty = outcome.violations.first().map(|v| Dirty {
                scenario: name.to_owned(),
                seed,
                first: format!("{}: {}", v.checker, v.explanation),
                repro: report::repro(&outcome, &[]),
            });
            Ok((dirty, probes))
        },
        |_, outcome| match outcome {
            Ok((d, probes)) => {
                dirty.extend(d);
                branches.add(&probes);
                true
            }
            Err(e) => {
                error = Some(e);
                false
            }
        },
    );
    match error {
        Some(e) => Err(e),
        None => Ok((dirty, branches)),
    }
}

pub fn run(args: &Args) -> CmdResult {
    super::sweep::check_seeds(args.seeds)?;
    let jobs = par::jobs(args.jobs)?;
    let clock = Stopwatch::start();
    let shard = args.shard.unwrap_or(fencesim::fleet::Shard::ALL);
    let defects: Vec<Defect> =
        Defect::all().into_iter().enumerate().filter(|(i, _)| shard.owns(*i as u64)).map(|(_, d)| d).collect();
    let progress = Progress::new("mutants", defects.len());
    let hunts = par::map(&defects, jobs, &progress, |&d| hunt(d, args));
    let hunts: Vec<Hunt> = hunts.into_iter().collect::<anyhow::Result<_>>()?;

    let (dirty, branches) = baseline(args, shard, jobs)?;
    // This shard's count of baseline worlds.
    let (_, count) = shard.seeds(0, catalogue::SCENARIOS.len() as u64 * args.seeds - 1);
    let soaks = soak_column(args, &defects)?;
    let matrix = Matrix { hunts, soaks, dirty, branches, worlds: count, seconds: clock.seconds() };
    match args.format {
        Format::Text => matrix.print_text(args),
        Format::Json => matrix.print_json(args),
    }
    Ok(if matrix.missed() == 0 && matrix.dirty.is_empty() { Verdict::Pass } else { Verdict::Fail })
}

/// The kill matrix of one shard: each defect's hunt and soak cell, and the clean baseline.
struct Matrix {
    hunts: Vec<Hunt>,
    /// With `--soak`, each defect's soak: the seed that caught it, if one did.
    soaks: Vec<Option<u64>>,
    dirty: Vec<Dirty>,
    /// The engine branches the baseline's worlds reached.
    branches: Table,
    /// This shard's count of baseline worlds.
    worlds: u64,
    seconds: f64,
}

impl Matrix {
    /// How many defects no world caught.
    fn missed(&self) -> usize {
        self.hunts.iter().filter(|h| h.catch.is_none()).count()
    }

    /// The matrix as a table: one row per defect, the baseline's failures and missed branches, and
    /// the summary line.
    fn print_text(&self, args: &Args) {
        let soak_cell = |i: usize| match self.soaks.get(i) {
            Some(Some(seed)) => format!("caught, seed {seed}"),
            _ => "NO".to_owned(),
        };
        let soak_head = if args.soak { "  soak" } else { "" };
        outln!("{:<28} {:<6} {:>5}  {:<40} {:<22} repro{soak_head}", "defect", "caught", "tries", "where", "checker");
        for (i, h) in self.hunts.iter().enumerate() {
            let (caught, place, checker, repro) = match &h.catch {
                Some(c) => {
                    let place = c.seed.map_or(c.scenario.clone(), |seed| format!("{} seed {seed}", c.scenario));
                    ("yes", place, c.shown(), c.repro.as_str())
                }
                None => ("NO", h.hunted_in.join(","), "-".to_owned(), "-"),
            };
            let soak = if args.soak { format!("  soak: {}", soak_cell(i)) } else { String::new() };
            outln!("{:<28} {caught:<6} {:>5}  {place:<40} {checker:<22} {repro}{soak}", h.defect, h.tries);
        }
        for d in &self.dirty {
            outln!("BASELINE FAIL {} seed {}: {}\n  repro: {}", d.scenario, d.seed, d.first, d.repro);
        }
        // The clean baseline over every scenario: which engine branches no world reached.
        outln!("baseline {}", super::sweep::probes_line(&self.branches));
        outln!(
            "{} of {} defects caught; clean baseline: {} worlds, {} with violations; {:.1} s",
            self.hunts.len() - self.missed(),
            self.hunts.len(),
            self.worlds,
            self.dirty.len(),
            self.seconds
        );
    }

    /// The matrix as one JSON document.
    fn print_json(&self, args: &Args) {
        let missed = self.missed();
        let doc = json!({
            "seeds": args.seeds,
            "db": args.db.as_str(),
            "defects": self.hunts,
            "soak": args.soak.then(|| self.hunts.iter().zip(&self.soaks).map(|(h, s)| json!({"defect": h.defect, "caught_at_seed": s})).collect::<Vec<_>>()),
            "caught": self.hunts.len() - missed,
            "missed": missed,
            "baseline": {
                "worlds": self.worlds,
                "probes_missed": coverage::probes_missed(&self.branches),
                "dirty": self.dirty.iter().map(|d| json!({"scenario": d.scenario, "seed": d.seed, "first": d.first, "repro": d.repro})).collect::<Vec<_>>(),
            },
        });
        outln!("{doc}");
    }
}

/// With `--soak`, each defect's store soak: the seed that caught it, if one did.
fn soak_column(args: &Args, defects: &[Defect]) -> anyhow::Result<Vec<Option<u64>>> {
    Ok(if args.soak {
        let progress = Progress::new("soak column", defects.len());
        // One soak at a time: each storms the machine's cores with real processes.
        par::map(defects, 1, &progress, |&d| soak_hunt(d)).into_iter().collect::<anyhow::Result<_>>()?
    } else {
        Vec::new()
    })
}

fn hunt(defect: Defect, args: &Args) -> anyhow::Result<Hunt> {
    let caught = |detector: &str, checker: &str, broken: Vec<String>, repro: String| Hunt {
        defect: defect.name(),
        story: defect.story(),
        hunted_in: vec![detector.to_owned()],
        tries: 1,
        catch: broken.first().map(|first| Catch {
            scenario: detector.to_owned(),
            seed: None,
            checker: checker.to_owned(),
            aimed_at: mutants::aimed_at(defect).to_owned(),
            explanation: first.clone(),
            repro,
        }),
    };
    Ok(match mutants::detector(defect) {
        Detector::Worlds => mutants::hunt(defect, args.seeds, args.db)?,
        Detector::Probe(name) => caught(
            &format!("probe {name}"),
            "probe",
            mutants::probe(name, defect).map_err(|e| anyhow::anyhow!("{defect}: {e}"))?,
            format!("cargo test -p fencesim-sim --lib probes::tests::{}", name.replace('-', "_")),
        ),
        Detector::BootRace => {
            let Defect::Store(store_defect) = defect else { anyhow::bail!("{defect} is not a store defect") };
            let repro = format!("fencesim conformance --store sqlite-file --defect {defect}");
            caught("boot race, 8 OS processes", "conformance B2", boot_race(store_defect)?, repro)
        }
        Detector::Kit(id) => {
            let Defect::Store(store_defect) = defect else { anyhow::bail!("{defect} is not a store defect") };
            let repro = format!("fencesim conformance --store sqlite-memdb --defect {defect}");
            let checker = format!("conformance {id}");
            caught(&format!("kit {id}, sqlite-memdb"), &checker, kit_check(id, store_defect)?, repro)
        }
    })
}

/// The kit's checks of one id on a fresh in-memory SQLite store with the defect planted: why
/// each failed.
fn kit_check(id: &str, defect: StoreDefect) -> anyhow::Result<Vec<String>> {
    let checks: Vec<_> = conformance::checks().into_iter().filter(|c| c.id == id).collect();
    anyhow::ensure!(!checks.is_empty(), "the conformance kit has no {id} check");
    let target = SqliteTarget::memdb().defects(StoreDefects::of(&[defect]));
    let mut broken = Vec::new();
    for check in &checks {
        match conformance::run_check(check, &target).outcome {
            Outcome::Fail(why) => broken.push(why),
            Outcome::Error(why) => anyhow::bail!("kit check {id} could not run: {why}"),
            Outcome::Pass | Outcome::Skip(_) => {}
        }
    }
    Ok(broken)
}

/// Conformance B2 with the defect planted: OS processes boot one fresh file at the same instant.
fn boot_race(defect: StoreDefect) -> anyhow::Result<Vec<String>> {
    let dir = fencesim_real::proc::janitor::temp_dir("fencesim-mutants-", false)
        .context("cannot create a temporary folder")?;
    let exe = std::env::current_exe().context("cannot locate the fencesim binary for the boot race")?;
    let target = SqliteTarget::file(dir.path())
        .defects(StoreDefects::of(&[defect]))
        .boot_with(move |db| super::conformance::boot_command(&exe, db, &[defect]));
    let check = conformance::checks().into_iter().find(|c| c.id == "B2").context("conformance kit has no B2 check")?;
    Ok(match conformance::run_check(&check, &target).outcome {
        Outcome::Fail(why) => vec![why],
        Outcome::Error(why) => anyhow::bail!("the boot race could not run: {why}"),
        Outcome::Pass | Outcome::Skip(_) => Vec::new(),
    })
}
