//! `fencesim runs`: operator tooling over an existing SqliteStore database file. `runs audit`
//! first scans the file's integrity (`PRAGMA quick_check`, missing schema objects, seqs that
//! repeat, skip or disagree with their payload, entries without a meta row), then compares every
//! run's meta with its journal (contracts 4.2-4.5) and, with `--repair`, rewrites the lagging
//! metas under a brief lease of its own, never a run whose rows it cannot trust and never a
//! finished run reopened (a `stranded` run is reported, not rewritten); it exits 0 iff nothing
//! remains divergent, so it can gate a cron probe. `runs list` prints the catalog, or exits 1 on a
//! damaged file.
//! Without `--repair` the file is opened read-only and its bytes never change; neither command
//! ever creates a database, and a file that is not exactly a fencesim database (another
//! application's, or one whose schema rows are not exactly those fencesim creates, by type, name,
//! table and definition: a trigger, view, table or index it did not create, or one wearing one of
//! its names) exits 2 untouched. A repair commits only if every journal row is as it was.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use fencesim_engine::audit::{self, AuditVerdict, RepairError, RunAudit, RunRepair};
use fencesim_store::{Clock, JournalStore, RunFilter, RunId, RunStatus, SqliteOptions, SqliteStore, SystemClock};
use serde_json::{Value, json};

use super::out::{errln, outln};
use super::{CmdResult, Format, Verdict};

#[derive(Debug, clap::Args)]
#[command(arg_required_else_help = false)]
pub struct Args {
    #[command(subcommand)]
    command: RunsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RunsCommand {
    /// Audit every run's meta against its journal; one line per divergent run.
    ///
    /// Exit 0 when nothing remains divergent (all consistent, or all repaired with --repair),
    /// 1 otherwise, 2 on bad input.
    Audit(AuditArgs),
    /// List the runs of a database, one line each.
    ///
    /// Exit 0, 1 when the file is damaged (nothing is listed; `runs audit` names the damage), 2 on
    /// bad input.
    List(ListArgs),
}

#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// An existing SqliteStore database file.
    #[arg(long)]
    db: PathBuf,
    /// Rewrite meta-behind metas, each under a brief lease of this process (a stranded run, a
    /// finished one the journal says is not, is never reopened).
    #[arg(long)]
    repair: bool,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// An existing SqliteStore database file.
    #[arg(long)]
    db: PathBuf,
    /// Only runs with this status.
    #[arg(long, value_parser = parse_status)]
    status: Option<RunStatus>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(args: &Args) -> CmdResult {
    match &args.command {
        RunsCommand::Audit(a) => run_audit(a),
        RunsCommand::List(a) => run_list(a),
    }
}

/// `--status S`: a run status, or a one-line error listing the valid ones.
fn parse_status(name: &str) -> Result<RunStatus, String> {
    RunStatus::parse(name).ok_or_else(|| {
        let valid: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown status '{name}' (valid: {})", valid.join(", "))
    })
}

/// Open an existing database file read-only; never create one. The store refuses anything that is
/// not a fencesim database, and a read-only connection cannot change a byte of it.
fn open_existing(db: &Path) -> anyhow::Result<SqliteStore> {
    open_file(db, SqliteOptions::file(db, Arc::new(SystemClock)).read_only())
}

/// How long a repair waits for a database another process is writing before it skips the run.
const REPAIR_BUSY_TIMEOUT_MS: u32 = 5_000;

/// Open an existing database file for repair: read-write, after the same refusals, waiting up to
/// [`REPAIR_BUSY_TIMEOUT_MS`] for a lock another process holds.
fn open_for_repair(db: &Path) -> anyhow::Result<SqliteStore> {
    open_file(db, SqliteOptions::file(db, Arc::new(SystemClock)).busy_timeout_ms(REPAIR_BUSY_TIMEOUT_MS))
}

fn open_file(db: &Path, options: SqliteOptions) -> anyhow::Result<SqliteStore> {
    let exists =
        db.try_exists().with_context(|| format!("cannot inspect the database path location={}", db.display()))?;
    anyhow::ensure!(exists, "database file does not exist location={}", db.display());
    // A FIFO would hang SQLite's first read; a folder or a device is no database. Judged by the
    // opened file's own metadata, never a second look at the path.
    let file = fencesim_sim::files::open_input(db, u64::MAX)?;
    // SQLite reads an empty file as an empty database, and opening would make it one of ours.
    let len = file.metadata().with_context(|| format!("cannot inspect the database location={}", db.display()))?;
    anyhow::ensure!(len.len() > 0, "not a fencesim database: the file is empty location={}", db.display());
    // SQLite also reads the files beside it (its WAL, its index, a rollback journal): a FIFO
    // there would hang it as surely.
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut beside = db.as_os_str().to_owned();
        beside.push(suffix);
        let beside = PathBuf::from(beside);
        if std::fs::symlink_metadata(&beside).is_ok() {
            fencesim_sim::files::open_input(&beside, u64::MAX)?;
        }
    }
    SqliteStore::open(options).context("cannot open the store")
}

/// What `--repair` did with one divergent run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repair {
    Repaired(RunStatus),
    NotRepaired,
    /// A terminal meta the journal says is not finished (`stranded`): a repair never reopens a
    /// finished run, whose journal may have lost its settle to damage no scan sees.
    NotReopened,
    SkippedLiveOwner,
    /// The database stayed locked by another process for the whole busy timeout.
    SkippedBusy,
}

impl Repair {
    fn suffix(self) -> String {
        match self {
            Repair::Repaired(to) => format!(" (repaired to '{to}')"),
            Repair::NotRepaired => " (not repaired)".to_owned(),
            Repair::NotReopened => " (terminal: a repair never reopens a finished run)".to_owned(),
            Repair::SkippedLiveOwner => " (leased by a live owner, skipped)".to_owned(),
            Repair::SkippedBusy => " (database busy, skipped)".to_owned(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Repair::Repaired(_) => "repaired",
            Repair::NotRepaired => "not-repaired",
            Repair::NotReopened => "not-reopened",
            Repair::SkippedLiveOwner => "skipped-live-owner",
            Repair::SkippedBusy => "skipped-busy",
        }
    }
}

fn run_audit(args: &AuditArgs) -> CmdResult {
    let reader = open_existing(&args.db)?;
    let corrupt = reader.scan_integrity().context("cannot scan the database")?;
    let damaged = corrupt.iter().any(|f| f.run.is_none());
    let untrusted: BTreeSet<&RunId> = corrupt.iter().filter_map(|f| f.run.as_ref()).collect();
    // A damaged file proves nothing about its runs; otherwise every run whose rows can be trusted.
    let audits: Vec<RunAudit> = if damaged {
        Vec::new()
    } else {
        let mut audits = Vec::new();
        for run in run_ids(&reader)?.iter().filter(|r| !untrusted.contains(r)) {
            let a = audit::audit_run(&reader, run).with_context(|| format!("cannot audit the run run={run}"))?;
            if a.verdict != AuditVerdict::Consistent {
                audits.push(a);
            }
        }
        audits
    };
    drop(reader);
    let repairing = args.repair && !damaged && !audits.is_empty();
    let writer = if repairing { Some(open_for_repair(&args.db)?) } else { None };
    let owner = format!("runs-audit-{}", std::process::id());
    let mut rows = Vec::new();
    let mut remaining = corrupt.len();
    for finding in &corrupt {
        let suffix = if args.repair { " (rows not trusted, not repaired)" } else { "" };
        match args.format {
            Format::Text => outln!("{}", shown(&format!("{finding}{suffix}"))),
            Format::Json => rows.push(json!({
                "run": finding.run.as_ref().map(RunId::as_str),
                "verdict": "corrupt",
                "rule": Value::Null,
                "reason": finding.reason,
                "repair": args.repair.then_some("not-repaired"),
                "repaired_to": Value::Null,
            })),
        }
    }
    let mut batches =
        Batches { store: writer.as_ref(), audits: &audits, owner: &owner, made: VecDeque::new(), next: 0 };
    for a in &audits {
        let repair = batches.next()?;
        if !matches!(repair, Some(Repair::Repaired(_))) {
            remaining += 1;
        }
        match args.format {
            Format::Text => {
                outln!("{}", shown(&format!("{a}{}", repair.map_or(String::new(), Repair::suffix))));
            }
            Format::Json => rows.push(json_row(a, repair)),
        }
    }
    match args.format {
        Format::Text if audits.is_empty() && corrupt.is_empty() => errln!("every run is consistent"),
        Format::Text => {}
        Format::Json => {
            outln!("{}", json!({ "runs": rows, "remaining": remaining }));
        }
    }
    Ok(if remaining == 0 { Verdict::Pass } else { Verdict::Fail })
}

/// Every run with a meta row, by id, read without decoding a payload (an undecodable one is the
/// integrity scan's finding, not a reason to stop auditing the others).
fn run_ids(store: &SqliteStore) -> anyhow::Result<Vec<RunId>> {
    let conn = store.raw_connection();
    let mut statement = conn.prepare("SELECT run_id FROM meta ORDER BY run_id").context("cannot list the runs")?;
    let ids = statement.query_map([], |r| r.get::<_, String>(0)).context("cannot list the runs")?;
    ids.map(|id| id.map(RunId::new).context("cannot list the runs")).collect()
}

/// How many runs one repair transaction repairs at least: the write lock is held for all of them,
/// and the transaction reads the whole journal twice (its digests) whatever their number, which
/// is most of its time on a large file (measured, debug build: about 1.1 s a read of 240,000
/// entries, against a few milliseconds a run for the repairs themselves).
const REPAIR_BATCH: usize = 256;

/// How many repair transactions one `--repair` makes at most: past [`REPAIR_BATCH`] times this
/// many divergent runs, batches grow instead. Each batch reads the whole journal twice, so a fixed
/// batch size made a repair's time grow with the square of the file (measured, debug build: 1,024
/// meta-behind runs of 20 entries 0.83 s, 4,096 of them 8.8 s); a bounded count keeps it linear.
const MAX_REPAIR_BATCHES: usize = 16;

/// The runs each repair transaction takes when `divergent` runs are to be repaired.
fn batch_size(divergent: usize) -> usize {
    REPAIR_BATCH.max(divergent.div_ceil(MAX_REPAIR_BATCHES))
}

/// Where the batch that starts at audit `next` of `divergent` ends.
fn batch_end(next: usize, divergent: usize) -> usize {
    divergent.min(next + batch_size(divergent))
}

/// The repairs of `--repair`, made a batch of [`batch_size`] runs at a time as the report
/// reaches them (what a batch committed is reported even if a later one fails); without a store,
/// none.
struct Batches<'a> {
    store: Option<&'a SqliteStore>,
    audits: &'a [RunAudit],
    owner: &'a str,
    made: VecDeque<Repair>,
    /// The first audit no batch has taken.
    next: usize,
}

impl Batches<'_> {
    fn next(&mut self) -> anyhow::Result<Option<Repair>> {
        let Some(store) = self.store else { return Ok(None) };
        if self.made.is_empty() {
            let end = batch_end(self.next, self.audits.len());
            let batch = &self.audits[self.next..end];
            self.next = end;
            self.made.extend(repair_batch(store, batch, self.owner)?);
        }
        Ok(self.made.pop_front())
    }
}

/// Repair a batch of runs losslessly ([`audit::repair_runs_lossless`]): in one write transaction,
/// the schema held to exactly fencesim's, for each run a brief lease (contracts 4.5: an epoch bump
/// like any takeover), the reconcile under it and the release, and every journal row counted and
/// hashed before and after; anything short of that rolls back whole. A stranded run is not even
/// leased (the lease alone would bump the epoch of a run left as it is), a live owner's run is
/// skipped, and a database that stays busy past the timeout skips the batch (nothing was
/// written); any other error (a schema that is not fencesim's, an epoch at its limit, a journal
/// that would have changed) propagates: exit 2.
fn repair_batch(store: &SqliteStore, batch: &[RunAudit], owner: &str) -> anyhow::Result<Vec<Repair>> {
    let runs: Vec<RunId> = batch.iter().filter(|a| !a.reopens()).map(|a| a.run.clone()).collect();
    let made: Vec<Repair> = match audit::repair_runs_lossless(store, &runs, owner, SystemClock.now_ms()) {
        Ok(made) => made
            .into_iter()
            .map(|r| match r {
                RunRepair::Reconciled(r) if r.repaired.is_none() && r.audit.reopens() => Repair::NotReopened,
                RunRepair::Reconciled(r) => r.repaired.map_or(Repair::NotRepaired, Repair::Repaired),
                RunRepair::LiveHolder(_) => Repair::SkippedLiveOwner,
            })
            .collect(),
        Err(RepairError::Store(e)) if e.is_busy() => vec![Repair::SkippedBusy; runs.len()],
        Err(e) => {
            let names: Vec<&str> = runs.iter().map(RunId::as_str).collect();
            return Err(e).with_context(|| format!("cannot repair the runs runs={}", shown(&names.join(","))));
        }
    };
    let mut made = made.into_iter();
    Ok(batch
        .iter()
        .map(|a| if a.reopens() { Repair::NotReopened } else { made.next().unwrap_or(Repair::NotRepaired) })
        .collect())
}

fn json_row(a: &RunAudit, repair: Option<Repair>) -> Value {
    let repaired_to = match repair {
        Some(Repair::Repaired(to)) => Value::from(to.as_str()),
        _ => Value::Null,
    };
    json!({
        "run": a.run.as_str(),
        "verdict": a.verdict.as_str(),
        "rule": a.rule,
        "reason": a.reason,
        "repair": repair.map(Repair::name),
        "repaired_to": repaired_to,
    })
}

/// A stored string for a terminal: control characters (an escape sequence, a line break that
/// would forge a row) written out as Rust escapes, a backslash doubled; anything else as it is.
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() || c == '\\' { c.escape_default().to_string() } else { c.to_string() })
        .collect()
}

fn run_list(args: &ListArgs) -> CmdResult {
    let store = open_existing(&args.db)?;
    // A damaged file's rows prove nothing: no catalog from it (exit 1, as `runs audit` exits).
    let corrupt = store.scan_integrity().context("cannot scan the database")?;
    let damage: Vec<String> = corrupt.iter().filter(|f| f.run.is_none()).map(|f| f.reason.clone()).collect();
    if !damage.is_empty() {
        errln!(
            "database corrupt: {} (no run is listed from a damaged file; `fencesim runs audit` names every problem)",
            shown(&damage.join("; "))
        );
        return Ok(Verdict::Fail);
    }
    let filter = RunFilter { status: args.status, ..RunFilter::all() };
    // list_runs may over-return by status; the filter is re-applied here.
    let metas: Vec<_> =
        store.list_runs(&filter).context("cannot list the runs")?.into_iter().filter(|m| filter.matches(m)).collect();
    match args.format {
        Format::Text => {
            for m in &metas {
                let name = m.name.as_ref().map_or(String::new(), |n| format!(" name={}", shown(n)));
                outln!("{} {} segments={}{name}", shown(m.run_id.as_str()), m.status, m.segments);
            }
            if metas.is_empty() {
                errln!("no runs");
            }
        }
        Format::Json => {
            let runs: Vec<Value> = metas
                .iter()
                .map(|m| json!({ "run": m.run_id.as_str(), "status": m.status.as_str(), "segments": m.segments, "name": m.name }))
                .collect();
            outln!("{}", json!({ "runs": runs }));
        }
    }
    Ok(Verdict::Pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each repair transaction reads the whole journal twice: the number of transactions must not
    /// grow with the file, or a repair's time grows with its square (4,096 meta-behind runs took
    /// 10.6 times as long as 1,024). Counted: the transactions a repair of `n` runs makes.
    #[test]
    fn a_repair_makes_a_bounded_number_of_transactions_whatever_the_runs() {
        let transactions = |n: usize| {
            let (mut next, mut count) = (0, 0);
            while next < n {
                next = batch_end(next, n);
                count += 1;
            }
            count
        };
        assert_eq!(transactions(0), 0);
        assert_eq!(transactions(1), 1);
        assert_eq!(transactions(REPAIR_BATCH), 1);
        assert_eq!(transactions(REPAIR_BATCH + 1), 2);
        for n in [4_096, 4_097, 100_000, 1_000_000] {
            assert!(transactions(n) <= MAX_REPAIR_BATCHES, "{n} runs: {} transactions", transactions(n));
        }
    }
}
