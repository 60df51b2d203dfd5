//! The hidden subcommands `soak-engine-worker` and `soak-engine-client`, the processes of the
//! engine-level soak (`fencesim_real::soak::engine` starts them). Not for people: their flags are the
//! library's command lines.

use std::path::PathBuf;

use fencesim_real::soak::engine::{self as soak_engine, EngineSoakOptions};
use fencesim_sim::catalogue::Defect;

use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    effects: PathBuf,
    #[arg(long)]
    owner: String,
    #[arg(long)]
    ttl_ms: u32,
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
}

#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    effects: PathBuf,
    #[arg(long)]
    runs: u32,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    ttl_ms: u32,
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
}

/// Sweeps until killed; exit 2 on a harness error.
pub fn worker(args: &WorkerArgs) -> CmdResult {
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    soak_engine::run_worker(&args.db, &args.effects, &args.owner, args.ttl_ms, engine_defects, store_defects)?;
    Ok(Verdict::Pass)
}

/// Submits the plan's runs; exit 0 when every drive returned, 2 on a harness error.
pub fn client(args: &ClientArgs) -> CmdResult {
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    let opts = EngineSoakOptions {
        runs: args.runs,
        seed: args.seed,
        ttl_ms: args.ttl_ms,
        engine_defects,
        store_defects,
        ..EngineSoakOptions::tiny(args.seed)
    };
    soak_engine::run_client(&args.db, &args.effects, &opts)?;
    Ok(Verdict::Pass)
}
