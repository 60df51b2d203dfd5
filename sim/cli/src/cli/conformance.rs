//! `fencesim conformance`: run the store conformance kit against one of the shipped stores,
//! optionally with planted defects, and print one line per check (or one JSON document). With
//! `--store sqlite-file` the kit's databases live in a temporary folder removed on every exit
//! path: a normal return, an error, and `SIGINT`/`SIGTERM`/`SIGHUP` (a watcher thread removes it
//! and exits with 128 + the signal); the boot race's children die with this process
//! (`PR_SET_PDEATHSIG`, see `fencesim boot`). With `--store cmd:COMMAND` the kit runs against a
//! store adapter process speaking the store protocol (docs/protocol.md); a broken adapter is a
//! harness error (exit 2), never a verdict.
//!
//! The verdict: 1 when a check failed that is not a known finding (`--known-findings`), or a known
//! finding stopped failing; 3 (inconclusive) when the store lacks a capability the user did not
//! say it lacks (`--expect-capabilities`), because the kit then skipped the checks that need it
//! and has not shown the store fences; 0 otherwise.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;
use fencesim_store::conformance::{self, CheckReport, MemoryTarget, Outcome, SqliteTarget, Target};
use fencesim_store::{StoreDefect, StoreDefects};
use serde_json::json;

use super::known::{self, Known};
use super::out::{out, outln};
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
    /// Checks the store is known to fail, one `CHECK-NAME  reason` per line (`#` comments):
    /// reported KNOWN, not failed; a listed check that no longer fails fails the run.
    #[arg(long, value_name = "FILE")]
    known_findings: Option<PathBuf>,
    /// The capabilities the store is expected to have: a comma list of leases, fenced_writes,
    /// fault_points, or `none`. A store lacking an expected one makes the run inconclusive
    /// (exit 3): the kit skipped the checks that need it.
    #[arg(long, value_name = "LIST", default_value = "leases,fenced_writes,fault_points")]
    expect_capabilities: String,
    /// Write a JUnit report of the checks (skips and known findings as skipped cases).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Replace an existing --junit file.
    #[arg(long)]
    force: bool,
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
            outln!("{:<24} {}", d.name(), d.story());
        }
        return Ok(Verdict::Pass);
    }
    let kind = args.store.clone().context("--store is required")?;
    args.adapter.check(matches!(kind, StoreKind::Cmd(_)))?;
    anyhow::ensure!(
        matches!(kind, StoreKind::SqliteMemdb | StoreKind::SqliteFile) || args.defects.is_empty(),
        "defects are planted in SqliteStore; --store {} has none (use sqlite-memdb or sqlite-file)",
        store_name(&kind)
    );
    let expected = known::parse_capabilities(&args.expect_capabilities)?;
    let known = args.known_findings.as_deref().map(Known::read).transpose()?.unwrap_or_default();
    if let Some(junit) = &args.junit {
        fencesim_sim::files::check_target(junit, args.force)?;
    }
    let UnderTest { target, folder, adapter } = under_test(args, &kind)?;
    let have = capabilities(target.as_ref());
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
    let have = have?;
    let missing: Vec<&'static str> = expected.iter().copied().filter(|c| !have.contains(c)).collect();
    let mut summary = Summary::of(&kind, &args.defects, &reports, &known, missing);
    summary.flags = repro_flags(args);
    report(args, &summary, &reports, &known)
}

/// The store under test as the kit's target, with what it holds.
struct UnderTest {
    target: Box<dyn Target>,
    /// A file target's databases' folder, removed when dropped.
    folder: Option<tempfile::TempDir>,
    /// A store adapter's process.
    adapter: Option<fencesim_protocol::Adapter>,
}

/// Start the store `kind` names for the kit: its target (with `--defect`'s planted defects), and
/// the folder and adapter process it holds.
fn under_test(args: &Args, kind: &StoreKind) -> anyhow::Result<UnderTest> {
    let defects = StoreDefects::of(&args.defects);
    let mut folder = None;
    let mut adapter = None;
    let target: Box<dyn Target> = match kind {
        StoreKind::Memory => Box::new(MemoryTarget),
        StoreKind::SqliteMemdb => Box::new(SqliteTarget::memdb().defects(defects)),
        StoreKind::SqliteFile => {
            let dir = fencesim_real::proc::janitor::temp_dir("fencesim-conformance-", false)
                .context("cannot create a temporary folder")?;
            let exe = std::env::current_exe().context("cannot locate the fencesim binary for the boot race")?;
            let planted = args.defects.clone();
            let target =
                SqliteTarget::file(dir.path()).defects(defects).boot_with(move |db| boot_command(&exe, db, &planted));
            folder = Some(dir);
            Box::new(target)
        }
        StoreKind::Cmd(spec) => {
            let spec = args.adapter.apply(spec.clone());
            let started = fencesim_protocol::Adapter::start(&spec)?;
            let dir = fencesim_real::proc::janitor::temp_dir("fencesim-conformance-", false)
                .context("cannot create a temporary folder")?;
            adapter = Some(started.clone());
            // B2: processes of their own, each starting the adapter, open one fresh location.
            let exe = std::env::current_exe().context("cannot locate the fencesim binary for the boot race")?;
            let target = fencesim_protocol::CmdTarget::new(started, dir)
                .boot_with(move |location| adapter_boot_command(&exe, &spec, location));
            Box::new(target)
        }
    };
    Ok(UnderTest { target, folder, adapter })
}

/// Write the JUnit report, print the checks and the summary, and give the verdict.
fn report(args: &Args, summary: &Summary, reports: &[CheckReport], known: &Known) -> CmdResult {
    if let Some(junit) = &args.junit {
        fencesim_sim::files::write_atomic(junit, junit_report(summary, reports, known).as_bytes(), args.force)?;
    }
    match args.format {
        Format::Text => print_text(summary, reports, known)?,
        Format::Json => print_json(summary, reports, known)?,
    }
    if summary.broken > 0 {
        anyhow::bail!("the harness could not run {} check(s); see the ERROR lines", summary.broken);
    }
    Ok(match summary.verdict() {
        "fail" => Verdict::Fail,
        "inconclusive" => Verdict::Inconclusive,
        _ => Verdict::Pass,
    })
}

/// The capabilities the target's stores have, asked of one connection of a fresh fixture.
fn capabilities(target: &dyn Target) -> anyhow::Result<Vec<&'static str>> {
    let fixture =
        target.fresh(1_000).map_err(|e| anyhow::anyhow!("cannot open the store to ask its capabilities: {e}"))?;
    let store = fixture.connect().map_err(|e| anyhow::anyhow!("cannot open the store to ask its capabilities: {e}"))?;
    let mut have = Vec::with_capacity(known::CAPABILITIES.len());
    if store.leases().is_some() {
        have.push("leases");
    }
    if store.fenced_writes() && store.fenced_blob_writes() {
        have.push("fenced_writes");
    }
    if store.set_fault_hook(None) {
        have.push("fault_points");
    }
    Ok(have)
}

/// The JUnit report: a failure per failed check, a skipped case per skip (with its reason) and
/// per known finding (with the finding and what the check said).
fn junit_report(summary: &Summary, reports: &[CheckReport], known: &Known) -> String {
    let cases: Vec<fencesim::report::Case> = reports
        .iter()
        .map(|r| {
            let (failure, skipped) = match &r.outcome {
                Outcome::Pass => (None, None),
                Outcome::Fail(why) => match known.reason(r.name) {
                    Some(reason) => (None, Some(format!("known finding: {reason}; the check says: {why}"))),
                    None => (Some(why.clone()), None),
                },
                Outcome::Skip(why) => (None, Some(why.clone())),
                Outcome::Error(why) => (Some(format!("harness error: {why}")), None),
            };
            fencesim::report::Case { name: format!("{} {}", r.id, r.name), seconds: 0.0, failure, skipped }
        })
        .collect();
    let mut cases = cases;
    for gone in known.gone(reports) {
        cases.push(fencesim::report::Case {
            name: format!("known finding {gone}"),
            seconds: 0.0,
            failure: Some(format!("the known finding '{gone}' no longer fails: remove it from the list")),
            skipped: None,
        });
    }
    if !summary.missing.is_empty() {
        cases.push(fencesim::report::Case {
            name: "capabilities".to_owned(),
            seconds: 0.0,
            failure: None,
            skipped: Some(summary.inconclusive_why()),
        });
    }
    fencesim::report::junit(&format!("conformance {}", summary.store), &cases)
}

pub(super) fn boot_command(exe: &Path, db: &Path, defects: &[StoreDefect]) -> Command {
    let mut cmd = fencesim_real::proc::child::command(exe);
    cmd.arg("boot").arg("--db").arg(db).arg("--start-on-ready");
    for d in defects {
        cmd.arg("--defect").arg(d.name());
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// B2's child against a store adapter: `fencesim boot --store` over one location.
fn adapter_boot_command(exe: &Path, spec: &fencesim_protocol::Spec, location: &Path) -> Command {
    let mut cmd = fencesim_real::proc::child::command(exe);
    cmd.arg("boot").arg("--store").arg(spec.to_string()).arg("--location").arg(location);
    cmd.arg("--adapter-timeout-ms").arg(spec.timeout_ms.to_string());
    cmd.arg("--start-on-ready");
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

struct Summary {
    store: String,
    defects: Vec<&'static str>,
    passed: usize,
    /// Failed checks that are not known findings.
    failed: usize,
    /// Failed checks that are known findings.
    known: usize,
    /// Known findings whose check did not fail.
    gone: Vec<String>,
    skipped: usize,
    broken: usize,
    /// Expected capabilities the store lacks.
    missing: Vec<&'static str>,
    /// The repro's flags beyond the store and defects (known findings, expected capabilities).
    flags: Vec<String>,
}

impl Summary {
    fn of(
        kind: &StoreKind,
        defects: &[StoreDefect],
        reports: &[CheckReport],
        known: &Known,
        missing: Vec<&'static str>,
    ) -> Self {
        let count = |f: &dyn Fn(&CheckReport) -> bool| reports.iter().filter(|r| f(r)).count();
        Summary {
            store: store_name(kind),
            defects: defects.iter().map(|d| d.name()).collect(),
            passed: count(&|r| matches!(r.outcome, Outcome::Pass)),
            failed: count(&|r| r.failed() && known.reason(r.name).is_none()),
            known: count(&|r| r.failed() && known.reason(r.name).is_some()),
            gone: known.gone(reports).into_iter().map(str::to_owned).collect(),
            skipped: count(&|r| matches!(r.outcome, Outcome::Skip(_))),
            broken: count(&|r| r.broken()),
            missing,
            flags: Vec::new(),
        }
    }

    fn verdict(&self) -> &'static str {
        if self.broken > 0 {
            "error"
        } else if self.failed > 0 || !self.gone.is_empty() {
            "fail"
        } else if !self.missing.is_empty() {
            "inconclusive"
        } else {
            "pass"
        }
    }

    /// Why the run is inconclusive: the capabilities missing and what to say if that is intended.
    fn inconclusive_why(&self) -> String {
        let expected: Vec<&str> = known::CAPABILITIES.iter().copied().filter(|c| !self.missing.contains(c)).collect();
        let flag = if expected.is_empty() { "none".to_owned() } else { expected.join(",") };
        format!(
            "the store lacks {}: the checks that need it were skipped, so the kit has not shown that it fences (say --expect-capabilities {flag} if that is intended)",
            self.missing.join(", ")
        )
    }

    /// The command that reproduces this run, when it did not pass.
    fn repro(&self) -> Option<String> {
        let flags: String =
            self.defects.iter().map(|d| format!(" --defect {d}")).chain(self.flags.iter().cloned()).collect();
        (self.verdict() != "pass").then(|| format!("fencesim conformance --store {}{flags}", quoted(&self.store)))
    }
}

/// The flags of this run a repro needs besides the store and the defects.
fn repro_flags(args: &Args) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(path) = &args.known_findings {
        let path = path.display().to_string();
        flags.push(format!(" --known-findings {}", shlex::try_quote(&path).map_or(path.clone(), |q| q.into_owned())));
    }
    if args.expect_capabilities != "leases,fenced_writes,fault_points" {
        flags.push(format!(" --expect-capabilities {}", args.expect_capabilities));
    }
    flags
}

/// A store name as a shell reads it back: `cmd:...` quoted.
fn quoted(store: &str) -> String {
    if store.starts_with("cmd:") {
        shlex::try_quote(store).map_or_else(|_| store.to_owned(), |q| q.into_owned())
    } else {
        store.to_owned()
    }
}

fn print_text(summary: &Summary, reports: &[CheckReport], known: &Known) -> anyhow::Result<()> {
    let mut out = String::new();
    for r in reports {
        match (&r.outcome, known.reason(r.name)) {
            (Outcome::Fail(why), Some(reason)) => {
                writeln!(out, "KNOWN {:<3} {}: {why} (known finding: {reason})", r.id, r.name)?;
            }
            _ => writeln!(out, "{r}")?,
        }
    }
    for gone in &summary.gone {
        writeln!(out, "FAIL known finding {gone}: the check no longer fails; remove it from the list")?;
    }
    if !summary.missing.is_empty() {
        writeln!(out, "inconclusive: {}", summary.inconclusive_why())?;
    }
    let planted = if summary.defects.is_empty() { "none".to_owned() } else { summary.defects.join(",") };
    let Summary { store, passed, failed, skipped, broken, .. } = summary;
    let verdict = summary.verdict();
    let word = if verdict == "pass" { verdict.to_owned() } else { verdict.to_uppercase() };
    write!(out, "{word}: store={store} defects={planted} passed={passed} failed={failed} skipped={skipped}")?;
    if summary.known > 0 {
        write!(out, " known={}", summary.known)?;
    }
    if *broken > 0 {
        write!(out, " errors={broken}")?;
    }
    writeln!(out)?;
    if let Some(repro) = summary.repro() {
        writeln!(out, "repro: {repro}")?;
    }
    out!("{out}");
    Ok(())
}

fn print_json(summary: &Summary, reports: &[CheckReport], known: &Known) -> anyhow::Result<()> {
    let checks: Vec<_> = reports
        .iter()
        .map(|r| {
            let (outcome, reason) = match &r.outcome {
                Outcome::Pass => ("pass", None),
                Outcome::Fail(why) if known.reason(r.name).is_some() => ("known", Some(why)),
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
        "known": summary.known,
        "known_gone": summary.gone,
        "missing_capabilities": summary.missing,
        "errors": summary.broken,
        "repro": summary.repro(),
        "checks": checks,
    });
    outln!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}
