//! `fencesim diff`: the differential. Each seed's world runs against two stores, A and B
//! (`memdb`, `file` or a store adapter `cmd:COMMAND`), recording every store call's request and
//! full answer; the two are compared row by row (`fencesim_sim::diff`) and the first place they
//! part is printed with both answers. Only that first divergence is meaningful: once two stores
//! answered a call differently, the worlds go different ways.
//!
//! Exit codes keep the project's convention: 0 when no world fails its oracle, identical or not
//! (a divergence where both worlds keep every contract is a finding about the stores, not a
//! violation); 1 when a world fails its oracle, or any seed diverges under
//! `--fail-on-divergence`; 2 on bad input or a world that could not run.

use std::fmt::Write as _;

use fencesim::report;
use fencesim_sim::catalogue::{self, Defect};
use fencesim_sim::diff::{self, Comparison, Divergence, Exchange, Kind, Side};
use fencesim_sim::history::{Row, RunState};
use fencesim_sim::scenario::Scenario;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig, WorldError, WorldReport};
use serde_json::Value;

use super::out::{out, outln};
use super::par::{self, Progress};
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A built-in scenario or a path to a scenario `.toml` file.
    #[arg(long)]
    scenario: String,
    /// The seed (with --seeds, the first of them).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many seeds to compare, from --seed on.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// A store to compare, given twice: A, then B. memdb, file (fencesim's own store) or
    /// cmd:COMMAND (a store adapter, docs/protocol.md).
    #[arg(long = "store", value_name = "memdb|file|cmd:COMMAND", value_parser = parse_store)]
    stores: Vec<StoreSpec>,
    /// Plant a store or engine defect in store A's worlds only (repeatable).
    #[arg(long = "defect-a", value_name = "NAME", value_parser = Defect::parse)]
    defects_a: Vec<Defect>,
    /// Plant a store or engine defect in store B's worlds only (repeatable).
    #[arg(long = "defect-b", value_name = "NAME", value_parser = Defect::parse)]
    defects_b: Vec<Defect>,
    /// Seeds compared at once (default: the machine's cores); each runs its two worlds in turn.
    #[arg(long)]
    jobs: Option<usize>,
    /// Exit 1 when any seed diverges, even where both worlds keep every contract (for CI).
    #[arg(long)]
    fail_on_divergence: bool,
    #[command(flatten)]
    timeout: super::AdapterArgs,
}

/// `--store`: fencesim's own store on a database kind, or a store adapter.
#[derive(Clone, Debug)]
pub enum StoreSpec {
    Db(DbKind),
    Adapter(fencesim_protocol::Spec),
}

fn parse_store(text: &str) -> Result<StoreSpec, String> {
    if text.starts_with("cmd:") {
        return super::parse_adapter(text).map(StoreSpec::Adapter);
    }
    super::parse_db(text)
        .map(StoreSpec::Db)
        .map_err(|_| format!("unknown store '{text}' (valid: memdb, file, cmd:COMMAND)"))
}

/// One side of the comparison: its store and the defects planted in its worlds.
struct Store {
    letter: char,
    db: DbKind,
    adapter: super::WorldStoreArgs,
    defects: Vec<Defect>,
}

impl Store {
    fn new(letter: char, spec: &StoreSpec, timeout: super::AdapterArgs, defects: &[Defect]) -> anyhow::Result<Self> {
        let (db, adapter, timeout) = match spec {
            // `--adapter-timeout-ms` is the adapters' alone (checked against both sides by `run`).
            StoreSpec::Db(db) => (*db, None, super::AdapterArgs { adapter_timeout_ms: None }),
            StoreSpec::Adapter(spec) => (DbKind::Memdb, Some(spec.clone()), timeout),
        };
        let store = Self { letter, db, adapter: super::WorldStoreArgs { adapter, timeout }, defects: defects.to_vec() };
        let (_, store_defects) = Defect::split(&store.defects);
        store
            .adapter
            .check(store_defects)
            .map_err(|e| anyhow::anyhow!("store {letter} ({}): {e}", store.adapter.describe(db)))?;
        Ok(store)
    }

    /// `memdb`, `file` or `cmd:...`, with its defects.
    fn describe(&self) -> String {
        let mut text = self.adapter.describe(self.db);
        if !self.defects.is_empty() {
            let names: Vec<&str> = self.defects.iter().map(|d| d.name()).collect();
            let _ = write!(text, " (defects {})", names.join(","));
        }
        text
    }

    fn config(&self, scenario: &Scenario, seed: u64) -> WorldConfig {
        let (engine_defects, store_defects) = Defect::split(&self.defects);
        WorldConfig {
            scenario: scenario.clone(),
            seed,
            db: self.db,
            store_defects,
            engine_defects,
            keep_db: None,
            adapter: self.adapter.spec(),
        }
    }

    /// The `--store` and `--defect-a|b` flags that name this side again.
    fn flags(&self) -> String {
        let mut flags = format!("--store {}", report::sh_quote(&self.adapter.describe(self.db)));
        for d in &self.defects {
            let _ = write!(flags, " --defect-{} {d}", self.letter.to_ascii_lowercase());
        }
        flags
    }
}

/// What is kept of one seed once its two worlds ran and were compared.
struct SeedResult {
    /// Its lines, printed in seed order.
    text: String,
    diverged: Option<Kind>,
    failed: bool,
    calls_alike: usize,
}

/// A world's oracle verdict, when it failed: a line and its repro.
fn failure(letter: char, report: &WorldReport, defects: &[Defect]) -> Option<String> {
    let first = report.violations.first()?;
    Some(format!(
        "  {letter} FAIL: {} violation(s), first {}: {}\n    repro: {}\n",
        report.violations.len(),
        first.checker,
        first.explanation,
        report::repro(report, defects)
    ))
}

/// Run one seed's two worlds and compare them.
fn compare_seed(scenario: &Scenario, (a, b): (&Store, &Store), seed: u64) -> Result<SeedResult, WorldError> {
    let (report_a, recording_a) = world::run_recording(&a.config(scenario, seed))?;
    let (report_b, recording_b) = world::run_recording(&b.config(scenario, seed))?;
    let side_a = Side { rows: &report_a.rows, recording: &recording_a };
    let side_b = Side { rows: &report_b.rows, recording: &recording_b };
    let comparison = diff::compare(side_a, side_b);
    let mut text = String::new();
    let (diverged, calls_alike) = match &comparison {
        Comparison::Identical { calls, .. } => {
            let _ = writeln!(text, "seed {seed}: identical ({calls} store calls compared)");
            (None, *calls)
        }
        Comparison::Diverged(d) => {
            divergence_text(&mut text, seed, (a, b), (side_a, side_b), d);
            (Some(d.kind), d.calls_alike)
        }
    };
    let failures: Vec<String> =
        [failure('A', &report_a, &a.defects), failure('B', &report_b, &b.defects)].into_iter().flatten().collect();
    for line in &failures {
        text.push_str(line);
    }
    if diverged.is_some() {
        if failures.is_empty() {
            text.push_str("  both worlds pass the oracle: a difference between the stores, not a violation\n");
        }
        let _ = writeln!(
            text,
            "  repro: fencesim diff --scenario {} --seed {seed} {} {}",
            report::sh_quote(&report_a.source),
            a.flags(),
            b.flags()
        );
    }
    Ok(SeedResult { text, diverged, failed: !failures.is_empty(), calls_alike })
}

/// The divergence of one seed: its headline, then the call and both answers (or both rows).
fn divergence_text(out: &mut String, seed: u64, (a, b): (&Store, &Store), sides: (Side<'_>, Side<'_>), d: &Divergence) {
    let heads = Heads::of(a, b);
    match d.kind {
        Kind::Answers => answers_text(out, seed, &heads, d),
        Kind::Calls | Kind::Rows => rows_text(out, seed, &heads, d),
        Kind::Ended => ended_text(out, seed, &heads, (sides.0.calls(), sides.1.calls()), d),
        Kind::FinalState => final_state_text(out, seed, &heads, sides, d),
    }
}

/// The two stores' names as their lines start (`A memdb`, `B file`), and the width that aligns them.
struct Heads {
    a: String,
    b: String,
    width: usize,
}

impl Heads {
    /// The heads of stores `a` and `b`.
    fn of(a: &Store, b: &Store) -> Heads {
        let name = |s: &Store| format!("{} {}", s.letter, s.describe());
        let (a, b) = (name(a), name(b));
        let width = a.len().max(b.len());
        Heads { a, b, width }
    }
}

/// Two answers to the same store call differ: the headline, the call, and each store's answer.
fn answers_text(out: &mut String, seed: u64, heads: &Heads, d: &Divergence) {
    let (at, width) = (d.calls_alike + 1, heads.width);
    let (Some((row, Some(ea))), Some((_, Some(eb)))) = (&d.a, &d.b) else { return };
    let (op, args) = split_op(&ea.request);
    let target = row.call().map_or("?", |c| c.blob_ref.as_deref().unwrap_or(c.run.as_str()));
    let _ = writeln!(
        out,
        "seed {seed}: DIVERGED at store call {at} (row #{}, {}.{:03}s): answers differ: {} {op} {target}: A {}, B {}",
        d.row,
        row.at_ms / 1000,
        row.at_ms % 1000,
        ea.node,
        diff::answer_class(&ea.answer),
        diff::answer_class(&eb.answer)
    );
    let _ = writeln!(out, "  {:<width$}  {} {op} {args}", "call", ea.node);
    let _ = writeln!(out, "  {:<width$}  {}", heads.a, ea.answer);
    let _ = writeln!(out, "  {:<width$}  {}", heads.b, eb.answer);
}

/// The worlds' calls or rows parted before any answer did: the headline and both rows.
fn rows_text(out: &mut String, seed: u64, heads: &Heads, d: &Divergence) {
    let _ = writeln!(
        out,
        "seed {seed}: DIVERGED at row #{} (after {} store calls alike): {} before any answer did (not a store's answer: the worlds' faults met the stores differently)",
        d.row,
        d.calls_alike,
        d.kind.as_str()
    );
    for (name, side) in [(&heads.a, &d.a), (&heads.b, &d.b)] {
        row_lines(out, name, heads.width, side.as_ref());
    }
}

/// One world ended before the other (`(ca, cb)`: the store calls A and B made): the headline and
/// the other's next row.
fn ended_text(out: &mut String, seed: u64, heads: &Heads, (ca, cb): (usize, usize), d: &Divergence) {
    let (ended, other, more) = if d.a.is_none() { ('A', 'B', &d.b) } else { ('B', 'A', &d.a) };
    let _ = writeln!(
        out,
        "seed {seed}: DIVERGED at row #{}: {} ({ended} made {} store calls, {other} {})",
        d.row,
        d.kind.as_str(),
        if ended == 'A' { ca } else { cb },
        if ended == 'A' { cb } else { ca }
    );
    let name = if other == 'A' { &heads.a } else { &heads.b };
    row_lines(out, name, heads.width, more.as_ref());
}

/// Every row and answer alike, but a run's final state differs: the headline, both states, and
/// the first journal entry they hold differently.
fn final_state_text(out: &mut String, seed: u64, heads: &Heads, sides: (Side<'_>, Side<'_>), d: &Divergence) {
    let width = heads.width;
    let run = d.run.as_ref().map_or("?", |r| r.as_str());
    let _ = writeln!(
        out,
        "seed {seed}: DIVERGED after the last row: {}: every row and answer alike ({} store calls), run {run} differs",
        d.kind.as_str(),
        d.calls_alike
    );
    let (sa, sb) = d
        .run
        .as_ref()
        .map_or((None, None), |r| (sides.0.recording.snapshot.runs.get(r), sides.1.recording.snapshot.runs.get(r)));
    let _ = writeln!(out, "  {:<width$}  {}", heads.a, state_text(sa));
    let _ = writeln!(out, "  {:<width$}  {}", heads.b, state_text(sb));
    if let Some((i, ea, eb)) = first_entry_apart(sa, sb) {
        let _ = writeln!(out, "  journal entry {i}: A {ea}, B {eb}");
    }
}

/// A request's `op`, and its arguments without it.
fn split_op(request: &Value) -> (String, Value) {
    let mut args = request.clone();
    let op = args.as_object_mut().and_then(|o| o.remove("op"));
    (op.as_ref().and_then(Value::as_str).unwrap_or("?").to_owned(), args)
}

/// A world's row at the divergence, and its request and answer when it is a store call.
fn row_lines(out: &mut String, name: &str, width: usize, side: Option<&(Row, Option<Exchange>)>) {
    match side {
        None => {
            let _ = writeln!(out, "  {name:<width$}  (no row: this world had ended)");
        }
        Some((row, exchange)) => {
            let _ = writeln!(out, "  {name:<width$}  {row}");
            if let Some(e) = exchange {
                let (op, args) = split_op(&e.request);
                let _ = writeln!(out, "  {:<width$}    call {op} {args}", "");
                let _ = writeln!(out, "  {:<width$}    answer {}", "", e.answer);
            }
        }
    }
}

/// A run's final state in one line: its meta, its journal's length and its blobs' sizes.
fn state_text(state: Option<&RunState>) -> String {
    let Some(state) = state else { return "absent".to_owned() };
    let meta = state.meta.as_ref().map_or(Value::Null, |m| serde_json::to_value(m).unwrap_or(Value::Null));
    let blobs: Vec<String> = state.blobs.iter().map(|(r, bytes)| format!("{r} {}B", bytes.len())).collect();
    format!("meta {meta}, journal {} entries, blobs [{}]", state.journal.len(), blobs.join(", "))
}

/// The first journal entry two final states of a run hold differently, if any.
fn first_entry_apart(a: Option<&RunState>, b: Option<&RunState>) -> Option<(usize, Value, Value)> {
    let (ja, jb) = (a.map_or(&[][..], |s| &s.journal[..]), b.map_or(&[][..], |s| &s.journal[..]));
    let entry = |j: &[fencesim_store::JournalEntry], i: usize| {
        j.get(i).map_or(Value::Null, |e| serde_json::to_value(e).unwrap_or(Value::Null))
    };
    (0..ja.len().max(jb.len())).find(|i| ja.get(*i) != jb.get(*i)).map(|i| (i, entry(ja, i), entry(jb, i)))
}

#[derive(Default)]
struct Tally {
    identical: u64,
    diverged: std::collections::BTreeMap<&'static str, u64>,
    failed: u64,
    errors: u64,
    first_error: Option<WorldError>,
    calls_alike: usize,
}

pub fn run(args: &Args) -> CmdResult {
    let inputs: Vec<_> = super::scenario_file(Some(&args.scenario)).into_iter().collect();
    fencesim_sim::files::check_distinct(&[], &inputs)?;
    anyhow::ensure!(
        args.stores.len() == 2,
        "diff compares two stores: give --store twice, A then B (got {})",
        args.stores.len()
    );
    super::sweep::check_seeds(args.seeds)?;
    let end = args.seed.checked_add(args.seeds - 1).ok_or_else(|| {
        anyhow::anyhow!("--seed {} + --seeds {} overflows the largest seed {}", args.seed, args.seeds, u64::MAX)
    })?;
    let jobs = par::jobs(args.jobs)?;
    let scenario = catalogue::scenario(&args.scenario)?;
    let adapters = args.stores.iter().any(|s| matches!(s, StoreSpec::Adapter(_)));
    args.timeout.check(adapters)?;
    let a = Store::new('A', &args.stores[0], args.timeout, &args.defects_a)?;
    let b = Store::new('B', &args.stores[1], args.timeout, &args.defects_b)?;
    a.adapter.handshake()?;
    b.adapter.handshake()?;
    let seeds = if args.seeds == 1 { format!("seed {}", args.seed) } else { format!("seeds {}..={end}", args.seed) };
    outln!("diff {} {seeds}: A {}, B {}", scenario.name, a.describe(), b.describe());
    let mut tally = Tally::default();
    let progress = Progress::new(format!("diff {}", scenario.name), usize::try_from(args.seeds).unwrap_or(usize::MAX));
    par::stream(
        args.seeds,
        jobs,
        &progress,
        |i| compare_seed(&scenario, (&a, &b), args.seed + i),
        |_, result| {
            tally.add(result);
            true
        },
    );
    let diverged = tally.print_summary(&scenario.name, args, end);
    if let Some(first) = tally.first_error {
        anyhow::bail!("{} world(s) could not run; the first: {first}", tally.errors);
    }
    Ok(if tally.failed > 0 || (args.fail_on_divergence && diverged > 0) { Verdict::Fail } else { Verdict::Pass })
}

impl Tally {
    /// Print one seed's result (its text, or its error) and count it.
    fn add(&mut self, result: Result<SeedResult, WorldError>) {
        match result {
            Err(e) => {
                outln!("ERROR seed {}: {}", e.seed, e.error);
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
            Ok(r) => {
                out!("{}", r.text);
                self.calls_alike += r.calls_alike;
                self.failed += u64::from(r.failed);
                match r.diverged {
                    Some(kind) => *self.diverged.entry(kind.as_str()).or_default() += 1,
                    None => self.identical += 1,
                }
            }
        }
    }

    /// Print the summary of the seeds from `args.seed` to `end` of scenario `name`, and return
    /// how many diverged.
    fn print_summary(&self, name: &str, args: &Args, end: u64) -> u64 {
        let diverged: u64 = self.diverged.values().sum();
        let kinds: Vec<String> = self.diverged.iter().map(|(k, n)| format!("{n} {k}")).collect();
        if diverged > 0 {
            outln!(
                "only each seed's first divergence is compared: once the stores answer differently the worlds go different ways"
            );
        }
        outln!(
            "{}: {} seed(s) ({}..={end}): {} identical, {diverged} diverged{}, {} with a violation; {} store calls compared alike",
            name,
            args.seeds,
            args.seed,
            self.identical,
            if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) },
            self.failed,
            self.calls_alike
        );
        diverged
    }
}
