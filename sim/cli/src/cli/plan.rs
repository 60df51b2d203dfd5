//! `fencesim plan`: print what a seed draws inside a scenario as a plan file (TOML,
//! `fencesim.plan/1`), which `fencesim run --plan FILE` runs again as the same world.

use std::io::Write as _;

use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::planfile::PlanFile;

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
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
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

/// A corpus entry for a plan file (`plan PATH` in a corpus, or a file of a plan folder).
pub fn entry(line: usize, path: &str) -> Result<super::replay::Entry, fencesim_sim::scenario::ScenarioError> {
    let file = PlanFile::load(std::path::Path::new(path))?;
    Ok(super::replay::Entry {
        line,
        name: path.to_owned(),
        scenario: file.scenario(path),
        seed: file.seed,
        defects: file.defects,
        expect: file.expect,
    })
}

/// Every plan file (`*.toml`) of a folder, sorted by name, as corpus entries (line 0).
pub fn corpus_dir(dir: &std::path::Path) -> anyhow::Result<Vec<super::replay::Entry>> {
    let paths = fencesim_sim::files::toml_files(dir)
        .map_err(|e| anyhow::anyhow!("cannot list plan folder {}: {e}", dir.display()))?;
    paths.iter().map(|p| Ok(entry(0, &p.display().to_string())?)).collect()
}

/// For an entry that must keep failing `checker`: its judgement and, unless it passed, why.
/// `None` for an ordinary entry (which must pass).
pub fn expected(
    checker: Option<&str>,
    first: &fencesim_sim::world::WorldReport,
    second: &fencesim_sim::world::WorldReport,
) -> Option<(super::replay::Judgement, Option<String>)> {
    use super::replay::{Judgement, judge};
    let checker = checker?;
    Some(match judge(first, second) {
        Judgement::Nondeterministic => (Judgement::Nondeterministic, super::replay::failure_line(first, second)),
        _ if first.violations.iter().any(|v| v.checker == checker) => (Judgement::Passed, None),
        _ => (
            Judgement::Failed,
            Some(format!(
                "expected {checker} to fail, got {}",
                first.violations.first().map_or("a pass".to_owned(), |v| format!("{}: {}", v.checker, v.explanation))
            )),
        ),
    })
}

/// The failure bundle of a replayed corpus entry.
pub fn bundle(
    dir: &std::path::Path,
    entry: &super::replay::Entry,
    db: fencesim_sim::stores::DbKind,
    seen: u64,
) -> Result<std::path::PathBuf, fencesim::bundle::BundleError> {
    let (engine_defects, store_defects) = Defect::split(&entry.defects);
    let cfg = fencesim_sim::world::WorldConfig {
        scenario: entry.scenario.clone(),
        seed: entry.seed,
        db,
        store_defects,
        engine_defects,
        keep_db: None,
    };
    fencesim::bundle::write(dir, &cfg, &entry.defects, seen)
}
