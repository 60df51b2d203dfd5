//! `fencesim promote --plan FILE --story "..."`: keep a minimal plan as a regression under
//! `seeds/regressions/` (named after its scenario, checker and seed), with its story and the
//! checker it must keep failing; `fencesim replay seeds/regressions/` replays every plan there.

use std::path::PathBuf;

use fencesim::files::write_atomic;
use fencesim::planfile::PlanFile;

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
    let stem = if defects.is_empty() { format!("{}-{checker}", file.scenario) } else { defects };
    std::fs::create_dir_all(&args.dir).map_err(|e| anyhow::anyhow!("{}: {e}", args.dir.display()))?;
    let path = args.dir.join(format!("{stem}-{}-seed{}.toml", file.scenario, file.seed));
    write_atomic(&path, file.to_toml().as_bytes(), args.force)?;
    println!("kept {} (fails {checker}); replayed by `fencesim replay {}`", path.display(), args.dir.display());
    Ok(Verdict::Pass)
}
