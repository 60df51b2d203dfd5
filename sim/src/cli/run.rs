//! `fencesim run`: one world, one seed. Prints the verdict, fingerprint and counters (with
//! `--trace`, every row first); a failure prints its violations and the repro command.

use std::path::PathBuf;

use fencesim::catalogue::{self, Defect};
use fencesim::report;
use fencesim::stores::DbKind;
use fencesim::world::{self, WorldConfig};

use super::{CmdResult, Format, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A built-in scenario (see `scenarios/`) or a path to a scenario `.toml` file.
    #[arg(long)]
    scenario: String,
    #[arg(long)]
    seed: u64,
    /// The world's database: memdb (fast) or file (a WAL file in a fresh temporary folder).
    #[arg(long, default_value = "memdb", value_parser = super::parse_db)]
    db: DbKind,
    /// Print the applied configuration and every history row, stamped with virtual time.
    #[arg(long)]
    trace: bool,
    /// Plant a store or engine defect (repeatable).
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Save the final store state as a SQLite file (refuses to overwrite).
    #[arg(long, value_name = "PATH")]
    keep_db: Option<PathBuf>,
}

pub fn run(args: &Args) -> CmdResult {
    let scenario = catalogue::scenario(&args.scenario)?;
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    let cfg = WorldConfig {
        scenario,
        seed: args.seed,
        db: args.db,
        store_defects,
        engine_defects,
        keep_db: args.keep_db.clone(),
    };
    let cfg_ttl = cfg.scenario.world.ttl_ms;
    let outcome = world::run(&cfg)?;
    match args.format {
        Format::Text => {
            // With the trace, its coverage counts head it (the report stays last, as without).
            if args.trace {
                let events = fencesim::coverage::count(&outcome.rows, i64::from(cfg_ttl));
                let shown: Vec<String> = events.iter().map(|(e, n)| format!("{e}={n}")).collect();
                println!("coverage {}", if shown.is_empty() { "none".to_owned() } else { shown.join(" ") });
            }
            print!("{}", report::text(&outcome, &args.defects, args.trace));
        }
        Format::Json => {
            let mut doc = report::world_json(&outcome, &args.defects);
            if args.trace {
                doc["trace"] = outcome.rows.iter().map(ToString::to_string).collect();
            }
            println!("{doc}");
        }
    }
    Ok(if outcome.passed() { Verdict::Pass } else { Verdict::Fail })
}
