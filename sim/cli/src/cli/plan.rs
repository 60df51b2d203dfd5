//! `fencesim plan`: print what a seed draws inside a scenario as a plan file (TOML,
//! `fencesim.plan/1`), which `fencesim run --plan FILE` runs again as the same world.

use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::scenario::planfile::PlanFile;

use super::out::out;
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A built-in scenario or a path to a scenario `.toml` file.
    #[arg(long)]
    scenario: String,
    #[arg(long)]
    seed: u64,
    /// Record a planted defect in the plan (repeatable): the world runs with it.
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
}

pub fn run(args: &Args) -> CmdResult {
    let scenario = catalogue::scenario(&args.scenario)?;
    let text = PlanFile::draw(&scenario, args.seed, &args.defects).to_toml();
    out!("{text}");
    Ok(Verdict::Pass)
}

/// The world a command names: `--plan FILE` (its seed and defects, plus any `--defect`), or
/// `--scenario` and `--seed`.
pub fn resolve(
    scenario: Option<&str>,
    seed: Option<u64>,
    plan: Option<&std::path::Path>,
    defects: &[Defect],
) -> anyhow::Result<(fencesim_sim::scenario::Scenario, u64, Vec<Defect>)> {
    match (plan, scenario, seed) {
        (Some(path), None, None) => {
            let file = PlanFile::load(path)?;
            let mut all = file.defects.clone();
            all.extend(defects.iter().filter(|d| !file.defects.contains(d)));
            Ok((file.scenario(&path.display().to_string()), file.seed, all))
        }
        (Some(_), _, _) => anyhow::bail!("--plan carries its scenario and seed; drop --scenario and --seed"),
        (None, Some(name), Some(seed)) => Ok((catalogue::scenario(name)?, seed, defects.to_vec())),
        (None, _, _) => anyhow::bail!("name a world: --scenario NAME --seed S, or --plan FILE"),
    }
}
