//! `fencesim promote --plan FILE --story "..."`: keep a minimal plan as a regression under
//! `seeds/regressions/` (named after its scenario, checker and seed), with its story and the
//! checker it must keep failing; `fencesim replay seeds/regressions/` replays every plan there.
//! The plan's world is run first: a plan that does not fail its checker is refused (exit 2), as
//! it would fail the replay that keeps it.

use std::path::PathBuf;

use fencesim::bundle::file_name_part;
use fencesim_sim::catalogue::Defect;
use fencesim_sim::files::write_atomic;
use fencesim_sim::scenario::planfile::PlanFile;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};

use super::out::outln;
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan to keep (usually `fencesim shrink --out`'s).
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// One line: what failed, and why the plan is kept.
    #[arg(long)]
    story: String,
    /// The folder regressions live in.
    #[arg(long, value_name = "DIR", default_value = "seeds/regressions")]
    dir: PathBuf,
    /// Replace a regression of the same name.
    #[arg(long)]
    force: bool,
}

pub fn run(args: &Args) -> CmdResult {
    anyhow::ensure!(!args.story.trim().is_empty(), "--story must say why the plan is kept");
    let mut file = PlanFile::load(&args.plan)?;
    let Some(checker) = file.expect.clone() else {
        anyhow::bail!(
            "{}: the plan names no `expect` checker (plans written by `fencesim shrink` do)",
            args.plan.display()
        );
    };
    file.story = Some(args.story.split_whitespace().collect::<Vec<_>>().join(" "));
    let defects = file.defects.iter().map(|d| d.name()).collect::<Vec<_>>().join("+");
    let scenario = file_name_part(&file.scenario);
    let stem = if defects.is_empty() { format!("{scenario}-{}", file_name_part(&checker)) } else { defects };
    let path = args.dir.join(format!("{stem}-{scenario}-seed{}.toml", file.seed));
    fencesim_sim::files::check_distinct(
        &[fencesim_sim::files::Named::new("the regression", &path)],
        &[fencesim_sim::files::Named::new("the --plan file", &args.plan)],
    )?;
    if args.dir.is_dir() {
        fencesim_sim::files::check_target(&path, args.force)?;
    }
    let (engine_defects, store_defects) = Defect::split(&file.defects);
    let world = world::run(&WorldConfig {
        scenario: file.scenario(&args.plan.display().to_string()),
        seed: file.seed,
        db: DbKind::Memdb,
        store_defects,
        engine_defects,
        keep_db: None,
        adapter: None,
    })?;
    if !world.violations.iter().any(|v| v.checker.name() == checker) {
        let got =
            world.violations.first().map_or("it passes".to_owned(), |v| format!("it fails {} instead", v.checker));
        anyhow::bail!(
            "{}: the plan does not fail {checker}, its `expect` ({got}); only a failing plan is kept",
            args.plan.display()
        );
    }
    std::fs::create_dir_all(&args.dir).map_err(|e| anyhow::anyhow!("{}: {e}", args.dir.display()))?;
    write_atomic(&path, file.to_toml().as_bytes(), args.force)?;
    outln!("kept {} (fails {checker}); replayed by `fencesim replay {}`", path.display(), args.dir.display());
    Ok(Verdict::Pass)
}
