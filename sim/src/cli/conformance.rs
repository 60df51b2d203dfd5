//! `fencesim conformance`: run the store conformance kit against one of the shipped stores,
//! optionally with planted defects, and print one line per check (or one JSON document).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context;
use fencesim_store::conformance::{self, CheckReport, MemoryTarget, Outcome, SqliteTarget, Target};
use fencesim_store::{Defects, StoreDefect};
use serde_json::json;

use super::{CmdResult, Format, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The store under test: sqlite-memdb, sqlite-file or memory.
    #[arg(long, value_parser = parse_store, required_unless_present = "list_defects")]
    store: Option<StoreKind>,
    /// Plant a store defect (repeatable); see --list-defects.
    #[arg(long = "defect", value_name = "NAME", value_parser = super::parse_defect)]
    defects: Vec<StoreDefect>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// List the defect names and the bug each plants back, then exit.
    #[arg(long)]
    list_defects: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    SqliteMemdb,
    SqliteFile,
    Memory,
}

const STORE_KINDS: [(&str, StoreKind); 3] =
    [("sqlite-memdb", StoreKind::SqliteMemdb), ("sqlite-file", StoreKind::SqliteFile), ("memory", StoreKind::Memory)];

fn parse_store(name: &str) -> Result<StoreKind, String> {
    STORE_KINDS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k).ok_or_else(|| {
        let valid: Vec<&str> = STORE_KINDS.iter().map(|(n, _)| *n).collect();
        format!("unknown store '{name}' (valid: {})", valid.join(", "))
    })
}

fn store_name(kind: StoreKind) -> &'static str {
    STORE_KINDS.iter().find(|(_, k)| *k == kind).map_or("?", |(n, _)| n)
}

pub fn run(args: &Args) -> CmdResult {
    if args.list_defects {
        for d in StoreDefect::ALL {
            println!("{:<24} {}", d.name(), d.story());
        }
        return Ok(Verdict::Pass);
    }
    let kind = args.store.context("--store is required")?;
    anyhow::ensure!(
        kind != StoreKind::Memory || args.defects.is_empty(),
        "defects are planted in SqliteStore; --store memory has none (use sqlite-memdb or sqlite-file)"
    );
    let defects = Defects::of(&args.defects);
    let folder = tempfile::Builder::new()
        .prefix("fencesim-conformance-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let target: Box<dyn Target> = match kind {
        StoreKind::Memory => Box::new(MemoryTarget),
        StoreKind::SqliteMemdb => Box::new(SqliteTarget::memdb().defects(defects)),
        StoreKind::SqliteFile => {
            let exe = std::env::current_exe().context("cannot locate the fencesim binary for the boot race")?;
            let planted = args.defects.clone();
            Box::new(
                SqliteTarget::file(folder.path())
                    .defects(defects)
                    .boot_with(move |db, start_at| boot_command(&exe, db, start_at, &planted)),
            )
        }
    };
    let reports = conformance::run_all(target.as_ref());
    print_reports(kind, &args.defects, args.format, &reports)?;
    Ok(if reports.iter().any(CheckReport::failed) { Verdict::Fail } else { Verdict::Pass })
}

fn boot_command(exe: &Path, db: &Path, start_at: i64, defects: &[StoreDefect]) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("boot").arg("--db").arg(db).arg("--start-at-ms").arg(start_at.to_string());
    for d in defects {
        cmd.arg("--defect").arg(d.name());
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

fn print_reports(
    kind: StoreKind,
    defects: &[StoreDefect],
    format: Format,
    reports: &[CheckReport],
) -> anyhow::Result<()> {
    let count = |f: fn(&Outcome) -> bool| reports.iter().filter(|r| f(&r.outcome)).count();
    let passed = count(|o| matches!(o, Outcome::Pass));
    let failed = count(|o| matches!(o, Outcome::Fail(_)));
    let skipped = count(|o| matches!(o, Outcome::Skip(_)));
    let defect_names: Vec<&str> = defects.iter().map(|d| d.name()).collect();
    let mut out = std::io::stdout().lock();
    match format {
        Format::Text => {
            for r in reports {
                writeln!(out, "{r}")?;
            }
            let planted = if defect_names.is_empty() { "none".to_owned() } else { defect_names.join(",") };
            let verdict = if failed == 0 { "pass" } else { "FAIL" };
            writeln!(
                out,
                "{verdict}: store={} defects={planted} passed={passed} failed={failed} skipped={skipped}",
                store_name(kind)
            )?;
            if failed > 0 {
                let flags: String = defect_names.iter().map(|d| format!(" --defect {d}")).collect();
                writeln!(out, "repro: fencesim conformance --store {}{flags}", store_name(kind))?;
            }
        }
        Format::Json => {
            let checks: Vec<_> = reports
                .iter()
                .map(|r| {
                    let (outcome, reason) = match &r.outcome {
                        Outcome::Pass => ("pass", None),
                        Outcome::Fail(why) => ("fail", Some(why)),
                        Outcome::Skip(why) => ("skip", Some(why)),
                    };
                    json!({"id": r.id, "name": r.name, "suite": r.suite.as_str(), "outcome": outcome, "reason": reason})
                })
                .collect();
            let doc = json!({
                "store": store_name(kind),
                "defects": defect_names,
                "verdict": if failed == 0 { "pass" } else { "fail" },
                "passed": passed,
                "failed": failed,
                "skipped": skipped,
                "checks": checks,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        }
    }
    Ok(())
}
