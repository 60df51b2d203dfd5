//! The hidden subcommands `killpoint-child` and `killpoint-resume`, the two processes of a real
//! kill point (`fencesim killpoints --real` starts them; see `killpoints_real.rs` in the
//! library). Not for people: their flags are the library's `ChildSpec::argv` and
//! `ResumeSpec::argv`.

use std::path::PathBuf;

use fencesim_engine::Workflow;
use fencesim_real::killpoints::{self as killpoints_real, ChildEnd, ChildSpec, ResumeSpec};
use fencesim_sim::catalogue::Defect;
use fencesim_sim::killpoints::{KillPhase, Target};
use fencesim_store::RunId;

use super::out::{errln, outln};
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct ChildArgs {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    effects: PathBuf,
    #[arg(long)]
    run: String,
    #[arg(long, value_parser = killpoints_real::parse_workflow)]
    workflow: Workflow,
    #[arg(long, value_parser = killpoints_real::parse_target)]
    target: Target,
    #[arg(long, value_parser = killpoints_real::parse_phase)]
    phase: KillPhase,
    #[arg(long)]
    ttl_ms: u32,
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
}

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    run: String,
    #[arg(long, value_parser = killpoints_real::parse_workflow)]
    workflow: Workflow,
    #[arg(long)]
    child_ttl_ms: u32,
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
}

/// Exit 0 when the run completed (the point was never reached), 1 when the engine failed before
/// it (one line on stderr), 2 on a harness error. Reaching the point ends the process by SIGKILL.
pub fn child(args: &ChildArgs) -> CmdResult {
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    let spec = ChildSpec {
        db: args.db.clone(),
        effects: args.effects.clone(),
        run: RunId::new(args.run.clone()),
        workflow: args.workflow.clone(),
        target: args.target,
        phase: args.phase,
        ttl_ms: args.ttl_ms,
        engine_defects,
        store_defects,
    };
    match killpoints_real::run_child(&spec)? {
        ChildEnd::Completed => Ok(Verdict::Pass),
        ChildEnd::Failed(e) => {
            errln!("fencesim: the child failed: {e}");
            Ok(Verdict::Fail)
        }
    }
}

/// Prints the referee's report as one JSON document; exit 2 on a harness error.
pub fn resume(args: &ResumeArgs) -> CmdResult {
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    let spec = ResumeSpec {
        db: args.db.clone(),
        run: RunId::new(args.run.clone()),
        workflow: args.workflow.clone(),
        child_ttl_ms: args.child_ttl_ms,
        engine_defects,
        store_defects,
    };
    let report = killpoints_real::run_resume(&spec)?;
    outln!("{}", serde_json::to_string(&report)?);
    Ok(Verdict::Pass)
}
