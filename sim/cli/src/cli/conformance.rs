//! `fencesim conformance`: run the store conformance kit against one of the shipped stores,
//! optionally with planted defects, and print one line per check (or one JSON document). With
//! `--store sqlite-file` the kit's databases live in a temporary folder removed on every exit
//! path: a normal return, an error, and `SIGINT`/`SIGTERM`/`SIGHUP` (a watcher thread removes it
//! and exits with 128 + the signal); the boot race's children die with this process
//! (`PR_SET_PDEATHSIG`, see `fencesim boot`). With `--store cmd:COMMAND` the kit runs against a
//! store adapter process speaking the store protocol (docs/protocol.md); a broken adapter is a
//! harness error (exit 2), never a verdict.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context;
use fencesim_store::conformance::{self, CheckReport, MemoryTarget, Outcome, SqliteTarget, Target};
use fencesim_store::{StoreDefect, StoreDefects};
use serde_json::json;

use super::{CmdResult, Format, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The store under test: sqlite-memdb, sqlite-file, memory, or cmd:COMMAND (a store adapter
    /// process speaking the store protocol, COMMAND split as a shell would).
    #[arg(long, value_parser = parse_store, required_unless_present = "list_defects")]
    store: Option<StoreKind>,
    #[command(flatten)]
    adapter: super::AdapterArgs,
    /// Plant a store defect (repeatable); see --list-defects.
    #[arg(long = "defect", value_name = "NAME", value_parser = super::parse_defect)]
    defects: Vec<StoreDefect>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// List the defect names and the bug each plants back, then exit.
    #[arg(long)]
    list_defects: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    SqliteMemdb,
    SqliteFile,
    Memory,
    Cmd(fencesim_protocol::Spec),
}

const STORE_KINDS: [(&str, StoreKind); 3] =
    [("sqlite-memdb", StoreKind::SqliteMemdb), ("sqlite-file", StoreKind::SqliteFile), ("memory", StoreKind::Memory)];

fn parse_store(name: &str) -> Result<StoreKind, String> {
    if name.starts_with("cmd:") {
        return fencesim_protocol::Spec::parse(name).map(StoreKind::Cmd).map_err(|e| e.to_string());
    }
    STORE_KINDS.iter().find(|(n, _)| *n == name).map(|(_, k)| k.clone()).ok_or_else(|| {
        let valid: Vec<&str> = STORE_KINDS.iter().map(|(n, _)| *n).collect();
        format!("unknown store '{name}' (valid: {}, cmd:COMMAND)", valid.join(", "))
    })
}

fn store_name(kind: &StoreKind) -> String {
    match kind {
        StoreKind::Cmd(spec) => spec.to_string(),
        _ => STORE_KINDS.iter().find(|(_, k)| k == kind).map_or("?", |(n, _)| n).to_owned(),
    }
}

pub fn run(args: &Args) -> CmdResult {
    if args.list_defects {
        for d in StoreDefect::ALL {
            println!("{:<24} {}", d.name(), d.story());
        }
        return Ok(Verdict::Pass);
    }
    let kind = args.store.clone().context("--store is required")?;
    anyhow::ensure!(
        matches!(kind, StoreKind::SqliteMemdb | StoreKind::SqliteFile) || args.defects.is_empty(),
        "defects are planted in SqliteStore; --store {} has none (use sqlite-memdb or sqlite-file)",
        store_name(&kind)
    );
    let defects = StoreDefects::of(&args.defects);
    // Holds the file target's databases; removed when this function returns.
    let mut folder = None;
    let mut adapter = None;
    let target: Box<dyn Target> = match &kind {
        StoreKind::Memory => Box::new(MemoryTarget),
        StoreKind::SqliteMemdb => Box::new(SqliteTarget::memdb().defects(defects)),
        StoreKind::SqliteFile => {
            let dir = fencesim_real::proc::janitor::temp_dir("fencesim-conformance-", false)
                .context("cannot create a temporary folder")?;
            let exe = std::env::current_exe().context("cannot locate the fencesim binary for the boot race")?;
            let planted = args.defects.clone();
            let target = SqliteTarget::file(dir.path())
                .defects(defects)
                .boot_with(move |db, start_at| boot_command(&exe, db, start_at, &planted));
            folder = Some(dir);
            Box::new(target)
        }
        StoreKind::Cmd(spec) => {
            let spec = args.adapter.apply(spec.clone());
            let started = fencesim_protocol::Adapter::start(&spec)?;
            let dir = fencesim_real::proc::janitor::temp_dir("fencesim-conformance-", false)
                .context("cannot create a temporary folder")?;
            adapter = Some(started.clone());
            Box::new(fencesim_protocol::CmdTarget::new(started, dir))
        }
    };
    let reports = conformance::run_all(target.as_ref());
    drop(target);
    drop(folder);
    if let Some(broken) = adapter.as_ref().and_then(fencesim_protocol::Adapter::broken) {
        return Err(broken.into());
    }
    let kind = match (&kind, &adapter) {
        (StoreKind::Cmd(_), Some(adapter)) => StoreKind::Cmd(adapter.spec().clone()),
        _ => kind,
    };
    let summary = Summary::of(&kind, &args.defects, &reports);
    match args.format {
        Format::Text => print_text(&summary, &reports)?,
        Format::Json => print_json(&summary, &reports)?,
    }
    if summary.broken > 0 {
        anyhow::bail!("the harness could not run {} check(s); see the ERROR lines", summary.broken);
    }
    Ok(if summary.failed > 0 { Verdict::Fail } else { Verdict::Pass })
}

pub(super) fn boot_command(exe: &Path, db: &Path, start_at: i64, defects: &[StoreDefect]) -> Command {
    let mut cmd = Command::new(exe);
    cmd.env(super::boot::PARENT_ENV, std::process::id().to_string());
    cmd.arg("boot").arg("--db").arg(db).arg("--start-at-ms").arg(start_at.to_string());
    for d in defects {
        cmd.arg("--defect").arg(d.name());
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

struct Summary {
    store: String,
    defects: Vec<&'static str>,
    passed: usize,
    failed: usize,
    skipped: usize,
    broken: usize,
}

impl Summary {
    fn of(kind: &StoreKind, defects: &[StoreDefect], reports: &[CheckReport]) -> Self {
        let count = |f: fn(&Outcome) -> bool| reports.iter().filter(|r| f(&r.outcome)).count();
        Summary {
            store: store_name(kind),
            defects: defects.iter().map(|d| d.name()).collect(),
            passed: count(|o| matches!(o, Outcome::Pass)),
            failed: count(|o| matches!(o, Outcome::Fail(_))),
            skipped: count(|o| matches!(o, Outcome::Skip(_))),
            broken: count(|o| matches!(o, Outcome::Error(_))),
        }
    }

    fn verdict(&self) -> &'static str {
        match (self.broken, self.failed) {
            (0, 0) => "pass",
            (0, _) => "fail",
            _ => "error",
        }
    }

    /// The command that reproduces this run, when it did not pass.
    fn repro(&self) -> Option<String> {
        let flags: String = self.defects.iter().map(|d| format!(" --defect {d}")).collect();
        (self.verdict() != "pass").then(|| format!("fencesim conformance --store {}{flags}", quoted(&self.store)))
    }
}

/// A store name as a shell reads it back: `cmd:...` quoted.
fn quoted(store: &str) -> String {
    if store.starts_with("cmd:") {
        shlex::try_quote(store).map_or_else(|_| store.to_owned(), |q| q.into_owned())
    } else {
        store.to_owned()
    }
}

fn print_text(summary: &Summary, reports: &[CheckReport]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for r in reports {
        writeln!(out, "{r}")?;
    }
    let planted = if summary.defects.is_empty() { "none".to_owned() } else { summary.defects.join(",") };
    let Summary { store, passed, failed, skipped, broken, .. } = summary;
    let verdict = summary.verdict();
    let word = if verdict == "pass" { verdict.to_owned() } else { verdict.to_uppercase() };
    write!(out, "{word}: store={store} defects={planted} passed={passed} failed={failed} skipped={skipped}")?;
    if *broken > 0 {
        write!(out, " errors={broken}")?;
    }
    writeln!(out)?;
    if let Some(repro) = summary.repro() {
        writeln!(out, "repro: {repro}")?;
    }
    Ok(())
}

fn print_json(summary: &Summary, reports: &[CheckReport]) -> anyhow::Result<()> {
    let checks: Vec<_> = reports
        .iter()
        .map(|r| {
            let (outcome, reason) = match &r.outcome {
                Outcome::Pass => ("pass", None),
                Outcome::Fail(why) => ("fail", Some(why)),
                Outcome::Skip(why) => ("skip", Some(why)),
                Outcome::Error(why) => ("error", Some(why)),
            };
            json!({"id": r.id, "name": r.name, "suite": r.suite.as_str(), "outcome": outcome, "reason": reason})
        })
        .collect();
    let doc = json!({
        "store": summary.store,
        "defects": summary.defects,
        "verdict": summary.verdict(),
        "passed": summary.passed,
        "failed": summary.failed,
        "skipped": summary.skipped,
        "errors": summary.broken,
        "repro": summary.repro(),
        "checks": checks,
    });
    writeln!(std::io::stdout().lock(), "{}", serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}
