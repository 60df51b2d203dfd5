//! `fencesim run`: one world, one seed. Prints the verdict, fingerprint and counters (with
//! `--trace`, every row first); a failure prints its violations and the repro command.

use std::path::PathBuf;

use fencesim::report;
use fencesim_sim::catalogue::Defect;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};

use super::out::{errln, out, outln};
use super::{CmdResult, Format, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A built-in scenario (see `scenarios/`) or a path to a scenario `.toml` file.
    #[arg(long)]
    scenario: Option<String>,
    #[arg(long)]
    seed: Option<u64>,
    /// Run the world of a plan file (`fencesim plan`, `fencesim shrink`) instead of a seed.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// The world's database: memdb (fast) or file (a WAL file in a temporary folder, emptied for
    /// each world).
    #[arg(long, default_value = "memdb", value_parser = super::parse_db)]
    db: DbKind,
    #[command(flatten)]
    store: super::WorldStoreArgs,
    /// Print the applied configuration and every history row, stamped with virtual time.
    #[arg(long)]
    trace: bool,
    /// Plant a store or engine defect (repeatable).
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Save the final store state as a SQLite file at PATH (a path, never a SQLite URI; an
    /// existing file is refused without --force; a directory or symbolic link always).
    #[arg(long, value_name = "PATH")]
    keep_db: Option<PathBuf>,
    /// On a failure, write a bundle `DIR/<scenario>-<seed>/` (repro.sh, trace, report, plan,
    /// store, timeline); an existing bundle is refused.
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// With --bundle: shrink the failing world too (60 s at most) and add `plan.min.toml`.
    #[arg(long, requires = "bundle")]
    shrink: bool,
    /// Write the timeline page of the world (failing or not) to FILE (an existing file is
    /// refused without --force; a directory or symbolic link always).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Let --keep-db and --html replace an existing file.
    #[arg(long)]
    force: bool,
}

pub fn run(args: &Args) -> CmdResult {
    check_paths(args)?;
    let (scenario, seed, defects) =
        super::plan::resolve(args.scenario.as_deref(), args.seed, args.plan.as_deref(), &args.defects)?;
    let (engine_defects, store_defects) = Defect::split(&defects);
    args.store.check(store_defects)?;
    args.store.handshake()?;
    anyhow::ensure!(
        args.store.adapter.is_none() || args.keep_db.is_none(),
        "--keep-db saves fencesim's own database; a store adapter's data is its own"
    );
    let keep_db = args.keep_db.clone().map(|path| fencesim_sim::files::Output { path, overwrite: args.force });
    let cfg =
        WorldConfig { scenario, seed, db: args.db, store_defects, engine_defects, keep_db, adapter: args.store.spec() };
    // Refused before the world runs, so a refusal costs nothing.
    if let Some(out) = &cfg.keep_db {
        fencesim_sim::files::check_target(&out.path, out.overwrite).map_err(|e| anyhow::anyhow!("--keep-db {e}"))?;
    }
    if let Some(html) = &args.html {
        fencesim_sim::files::check_target(html, args.force).map_err(|e| anyhow::anyhow!("--html {e}"))?;
    }
    if let Some(dir) = &args.bundle {
        fencesim::bundle::check_root(dir)?;
    }
    let cfg_ttl = cfg.scenario.world.ttl_ms;
    let outcome = world::run(&cfg)?;
    if let Some(html) = &args.html {
        fencesim_sim::files::write_atomic(html, fencesim::timeline::html(&outcome, &defects).as_bytes(), args.force)
            .map_err(|e| anyhow::anyhow!("--html {e}"))?;
    }
    if let Some(dir) = args.bundle.as_ref().filter(|_| !outcome.passed()) {
        let cfg = WorldConfig { keep_db: None, ..cfg.clone() };
        let minimal = if args.shrink { super::shrink::minimal(&cfg, &defects)? } else { None };
        let written = fencesim::bundle::write_with(dir, &cfg, &defects, outcome.fingerprint, minimal.as_ref())?;
        errln!("bundle: {}", written.display());
    }
    match args.format {
        Format::Text => {
            // With the trace, its coverage counts head it (the report stays last, as without).
            if args.trace {
                let events = fencesim_sim::coverage::count(&outcome.rows, i64::from(cfg_ttl));
                let shown: Vec<String> = events.iter().map(|(e, n)| format!("{e}={n}")).collect();
                outln!("coverage {}", if shown.is_empty() { "none".to_owned() } else { shown.join(" ") });
            }
            out!("{}", report::text(&outcome, &defects, args.trace));
        }
        Format::Json => {
            let mut doc = report::world_json(&outcome, &defects);
            if args.trace {
                doc["trace"] = outcome.rows.iter().map(ToString::to_string).collect();
            }
            outln!("{doc}");
        }
    }
    Ok(if outcome.passed() { Verdict::Pass } else { Verdict::Fail })
}

/// The outputs are distinct files, none of them the plan or the scenario file the world comes
/// from: checked before anything is read or run.
fn check_paths(args: &Args) -> anyhow::Result<()> {
    use fencesim_sim::files::Named;
    let outputs: Vec<Named> = [("--keep-db", &args.keep_db), ("--html", &args.html), ("--bundle", &args.bundle)]
        .into_iter()
        .filter_map(|(flag, path)| path.as_ref().map(|p| Named::new(flag, p)))
        .collect();
    let inputs: Vec<Named> = args
        .plan
        .iter()
        .map(|p| Named::new("the --plan file", p))
        .chain(super::scenario_file(args.scenario.as_deref()))
        .collect();
    Ok(fencesim_sim::files::check_distinct(&outputs, &inputs)?)
}
