//! `fencesim merge REPORT_DIR... --out DIR`: merge the shard reports of one sharded `sweep` or
//! `replay` (each folder holds a `sweep.json` or a `replay.json`) into one report and its
//! `junit.xml`, equal to an unsharded run of the same seeds apart from wall-clock fields. Refuses
//! (exit 2) reports of different runs, overlapping shards and missing shards, naming them; exits 1
//! when any shard had a failure; with `--require-coverage`, when no shard failed but an event the
//! sweep's scenario aims at happened in no shard (a shard alone may miss an event the fleet as a
//! whole produced), the merged verdict is `inconclusive` (exit 3).

use std::path::PathBuf;

use anyhow::Context;
use fencesim::fleet::{self, ShardReport};
use fencesim::report;
use fencesim_sim::files::Named;

use super::out::outln;
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shard report folders (each with a `sweep.json` or a `replay.json`).
    #[arg(required = true, value_name = "REPORT_DIR")]
    dirs: Vec<PathBuf>,
    /// Where the merged report and `junit.xml` are written (created if needed).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Exit 3 (inconclusive) naming every coverage event the sweep's scenario aims at that no
    /// shard produced, when no shard failed (sweep reports only).
    #[arg(long)]
    require_coverage: bool,
}

pub fn run(args: &Args) -> CmdResult {
    let paths = shard_reports(args)?;
    let inputs: Vec<Named> = paths.iter().map(|p| Named::new("the shard report", p)).collect();
    let outputs = super::folder_outputs("--out", &args.out, &["sweep.json", "replay.json", "junit.xml"]);
    fencesim_sim::files::check_distinct(&outputs, &inputs)?;
    // Writable (or makeable) now; made only once the merge is accepted, so a refusal leaves none.
    fencesim_sim::files::check_future_folder(&args.out).map_err(|e| anyhow::anyhow!("--out {e}"))?;
    let mut reports = Vec::with_capacity(paths.len());
    for path in paths {
        let text = fencesim_sim::files::read_input(&path, fencesim_sim::files::MAX_TEXT_BYTES)?;
        let doc = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        reports.push(ShardReport { from: path.display().to_string(), doc });
    }
    // An earlier merge's reports go now: a refused merge must not leave them looking current.
    let stale = ["sweep.json", "replay.json", "junit.xml"].map(|name| args.out.join(name));
    fencesim_sim::files::remove_stale(&stale.iter().map(PathBuf::as_path).collect::<Vec<_>>())?;
    let mut merged = fleet::merge(&reports)?;
    let missing = required_coverage(args, &mut merged)?;
    let fleet::Merged { doc, junit, verdict, sweep } = merged;
    let name = if sweep { "sweep.json" } else { "replay.json" };
    fencesim_sim::files::prepare_folder(&args.out).map_err(|e| anyhow::anyhow!("--out {e}"))?;
    super::replay::write_reports(&args.out, name, &doc, &junit)?;
    let s = &doc["summary"];
    outln!(
        "merged {} shard(s) into {}: {} worlds, {} passed, verdict {}",
        reports.len(),
        args.out.join(name).display(),
        s["worlds"],
        s["passed"],
        verdict.as_str()
    );
    if !missing.is_empty() {
        outln!("COVERAGE: {} aimed-at event(s) never happened in any shard: {}", missing.len(), missing.join(", "));
    }
    match verdict {
        report::Verdict::Pass => Ok(Verdict::Pass),
        report::Verdict::Inconclusive => Ok(Verdict::Inconclusive),
        report::Verdict::Fail => Ok(Verdict::Fail),
        // A shard's world could not run: the fleet's verdict is a harness error, not a failure.
        report::Verdict::Error => anyhow::bail!("a shard reports a harness error; the merged report says so"),
    }
}

/// Each shard folder's one report file, `sweep.json` or `replay.json`. The merged report replaces
/// whatever report --out holds, so --out may not be a shard's folder.
fn shard_reports(args: &Args) -> anyhow::Result<Vec<PathBuf>> {
    let out = std::fs::canonicalize(&args.out).ok();
    let mut paths = Vec::with_capacity(args.dirs.len());
    for dir in &args.dirs {
        if out.is_some() && std::fs::canonicalize(dir).ok() == out {
            anyhow::bail!("--out {}: is one of the shard folders; merge into another folder", args.out.display());
        }
        let found: Vec<PathBuf> =
            ["sweep.json", "replay.json"].iter().map(|n| dir.join(n)).filter(|p| p.exists()).collect();
        paths.push(match found.as_slice() {
            [one] => one.clone(),
            [] => anyhow::bail!("{}: no sweep.json or replay.json", dir.display()),
            _ => anyhow::bail!("{}: holds both sweep.json and replay.json; merge one kind at a time", dir.display()),
        });
    }
    Ok(paths)
}

/// With --require-coverage, the aimed-at events no shard of a sweep produced; when there are any
/// and no shard failed, the merged report is inconclusive: not a pass, not a violation.
fn required_coverage(args: &Args, merged: &mut fleet::Merged) -> anyhow::Result<Vec<String>> {
    let missing = match (args.require_coverage, merged.sweep) {
        (false, _) => Vec::new(),
        (true, true) => fleet::missing_coverage(&merged.doc),
        (true, false) => anyhow::bail!("--require-coverage: replay reports aim at nothing; merge sweep reports"),
    };
    if !missing.is_empty() && merged.verdict == report::Verdict::Pass {
        merged.doc["summary"]["verdict"] = report::Verdict::Inconclusive.as_str().into();
        merged.doc["summary"]["missing_coverage"] = missing.clone().into();
        merged.junit = fleet::junit_of(&merged.doc);
        merged.verdict = report::Verdict::Inconclusive;
    }
    Ok(missing)
}
