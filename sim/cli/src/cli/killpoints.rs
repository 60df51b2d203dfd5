//! `fencesim killpoints`: the kill-point suite (contracts 5.13). Prints one row per point (what
//! the crashed write was, the phase, what the child and the resume paid, re-pays, verdict) and
//! exits 1 when any point fails. `--real` runs the same points with real processes.

use fencesim_engine::Workflow;
use fencesim_real::killpoints as killpoints_real;
use fencesim_sim::catalogue::Defect;
use fencesim_sim::killpoints::{self, Config, KillPoint, PointReport};
use fencesim_sim::stores::DbKind;
use serde_json::json;

use super::out::outln;
use super::{CmdResult, Format, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which workflow's writes to enumerate: happy, limit or all. The reference table always runs.
    #[arg(long, default_value = "all", value_parser = parse_workflow)]
    workflow: WorkflowChoice,
    /// The database the points run on: memdb or file (a WAL file in a temporary folder).
    #[arg(long, default_value = "memdb", value_parser = super::parse_db)]
    db: DbKind,
    /// Plant an engine or store defect (repeatable); the suite should then fail.
    #[arg(long = "defect", value_name = "NAME", value_parser = Defect::parse)]
    defects: Vec<Defect>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Run every point with real OS processes on a WAL file: a child that SIGKILLs itself at the
    /// point, then a resume in a second process (`--db` does not apply).
    #[arg(long, conflicts_with = "db")]
    real: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WorkflowChoice {
    Happy,
    Limit,
    All,
}

fn parse_workflow(name: &str) -> Result<WorkflowChoice, String> {
    match name {
        "happy" => Ok(WorkflowChoice::Happy),
        "limit" => Ok(WorkflowChoice::Limit),
        "all" => Ok(WorkflowChoice::All),
        _ => Err(format!("unknown workflow '{name}' (valid: happy, limit, all)")),
    }
}

pub fn run(args: &Args) -> CmdResult {
    let (engine_defects, store_defects) = Defect::split(&args.defects);
    let config = Config { db: args.db, engine_defects, store_defects };
    let workflows = match args.workflow {
        WorkflowChoice::Happy => vec![Workflow::happy()],
        WorkflowChoice::Limit => vec![Workflow::limit()],
        WorkflowChoice::All => vec![Workflow::happy(), Workflow::limit()],
    };
    let mut points: Vec<KillPoint> =
        killpoints::table().into_iter().filter(|p| workflows.iter().any(|w| w.name == p.workflow.name)).collect();
    for workflow in &workflows {
        points.extend(killpoints::enumerate(workflow, &config)?);
    }
    let reports: Vec<PointReport> = if args.real {
        killpoints_real::run_points_real(&points, &config)?
    } else {
        killpoints::run_points(&points, &config)?
    };
    let failed = reports.iter().filter(|r| !r.passed()).count();
    let repro = repro_command(args);
    match args.format {
        Format::Text => print_text(args.real, &reports, failed, &repro),
        Format::Json => {
            let doc = json!({
                "points": reports, "failed": failed, "real": args.real, "repro": (failed > 0).then_some(repro)
            });
            outln!("{doc}");
        }
    }
    Ok(if failed == 0 { Verdict::Pass } else { Verdict::Fail })
}

/// The suite as a table: one row per point (`real`: run with real processes), the summary line
/// and, when a point failed, the repro command.
fn print_text(real: bool, reports: &[PointReport], failed: usize, repro: &str) {
    if real {
        outln!("real processes: each child SIGKILLed itself at its point on a WAL file, resumed in a second process");
    }
    outln!(
        "{:<30} {:>5} {:<6} {:<44} {:>7} {:>7} {:>6}  verdict",
        "point",
        "write",
        "phase",
        "what",
        "child",
        "resume",
        "repays"
    );
    for r in reports {
        let index = r.index.map_or("-".to_owned(), |i| i.to_string());
        let violations: Vec<String> = r.violations.iter().map(ToString::to_string).collect();
        let verdict = if r.passed() { "PASS".to_owned() } else { format!("FAIL: {}", violations.join("; ")) };
        outln!(
            "{:<30} {:>5} {:<6} {:<44} {:>7} {:>7} {:>6}  {verdict}",
            r.id,
            index,
            r.phase,
            r.write,
            format!("{}/{}", r.child.0, r.child.1),
            format!("{}/{}", r.resume.0, r.resume.1),
            r.repays
        );
    }
    outln!(
        "{} points, {} passed, {failed} failed (calls/tools paid by the crashed child and the resume)",
        reports.len(),
        reports.len() - failed
    );
    if failed > 0 {
        outln!("repro: {repro}");
    }
}

fn repro_command(args: &Args) -> String {
    let workflow = match args.workflow {
        WorkflowChoice::Happy => "happy",
        WorkflowChoice::Limit => "limit",
        WorkflowChoice::All => "all",
    };
    let mut command = if args.real {
        format!("fencesim killpoints --real --workflow {workflow}")
    } else {
        format!("fencesim killpoints --workflow {workflow} --db {}", args.db.as_str())
    };
    for d in &args.defects {
        command.push_str(&format!(" --defect {d}"));
    }
    command
}
