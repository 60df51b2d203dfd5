//! `fencesim replay CORPUS`: the CI gate over a seed corpus (`seeds/ci.txt`,
//! `seeds/regressions.txt`). A corpus is one `scenario seed` per line, `#` comments; it is parsed
//! whole before anything runs, and a malformed line exits 2 naming `FILE:LINE`. Every entry runs
//! twice, in parallel, and must give the same fingerprint and verdict both times. Prints one line
//! per failing or nondeterministic entry (with its repro command) and a summary; writes
//! `replay.json` (schema `reports/replay.schema.json`) and `junit.xml` into the report folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use fencesim::fleet::{self, Shard};
use fencesim::report;
use fencesim_sim::catalogue;
use fencesim_sim::files::Named;
use fencesim_sim::scenario::Scenario;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig, WorldReport};
use serde_json::{Value, json};

use super::out::{out, outln};
use super::par::{self, Progress, Stopwatch};
use super::{CmdResult, Verdict};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The corpus: one `scenario seed` per line (a built-in scenario or a path to a `.toml`
    /// file, relative to the current folder; a u64 seed) or `plan PATH` (a plan file); `#` starts
    /// a comment. A folder replays every plan file in it (`seeds/regressions/`).
    corpus: PathBuf,
    /// The folder `replay.json` and `junit.xml` are written to (created if needed).
    #[arg(long, value_name = "DIR", default_value = "reports")]
    report: PathBuf,
    /// Worlds run at once (default: the machine's cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Every world's database: memdb (fast) or file (a WAL file in a temporary folder, emptied
    /// for each world).
    #[arg(long, default_value = "memdb", value_parser = super::parse_db)]
    db: DbKind,
    #[command(flatten)]
    store: super::WorldStoreArgs,
    /// Write a failure bundle per failing entry under DIR (see `fencesim run --bundle`).
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// Replay only shard I of N (0-based): the entries whose 0-based index is I modulo N.
    #[arg(long, value_name = "I/N", value_parser = Shard::parse)]
    shard: Option<Shard>,
}

/// One line of a corpus.
#[derive(Clone, Debug)]
pub struct Entry {
    /// 1-based line number in the corpus file.
    pub line: usize,
    /// The scenario as written: a built-in name or a `.toml` path.
    pub name: String,
    pub scenario: Scenario,
    pub seed: u64,
    /// A plan entry's planted defects, and the checker it must keep failing.
    pub defects: Vec<fencesim_sim::catalogue::Defect>,
    pub expect: Option<String>,
}

/// A corpus that cannot be replayed: the first malformed line, and how many more there are.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {message}{}", if *more == 0 { String::new() } else { format!(" (and {more} more malformed line(s))") })]
pub struct CorpusError {
    pub file: String,
    pub line: usize,
    pub message: String,
    pub more: usize,
}

/// Parse a corpus's text; `file` names it in errors. Every scenario named is loaded (once), so an
/// unknown scenario or a malformed scenario file is refused here, before anything runs.
pub fn parse_corpus(file: &str, text: &str) -> Result<Vec<Entry>, CorpusError> {
    let mut scenarios: BTreeMap<String, Scenario> = BTreeMap::new();
    let mut plans: BTreeMap<String, Result<Entry, String>> = BTreeMap::new();
    let mut entries = Vec::new();
    let mut errors: Vec<(usize, String)> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or_default();
        let fields: Vec<&str> = content.split_whitespace().collect();
        let (name, seed) = match fields.as_slice() {
            [] => continue,
            ["plan", path] => {
                // A plan named again is read once: each line read its file (up to 64 MiB) again
                // and held a copy of its own, a corpus of short lines costing lines times plans.
                let loaded = plans
                    .entry((*path).to_owned())
                    .or_insert_with(|| entry(line, path).map_err(|e| format!("bad plan: {e}")));
                match loaded {
                    Ok(first) => entries.push(Entry { line, ..first.clone() }),
                    Err(message) => errors.push((line, message.clone())),
                }
                continue;
            }
            [name, seed] => (*name, *seed),
            [name] => {
                errors.push((line, format!("'{name}' has no seed (expected `scenario seed`)")));
                continue;
            }
            [_, _, extra @ ..] => {
                errors.push((
                    line,
                    format!("{} fields, expected 2 (`scenario seed`); extra: '{}'", fields.len(), extra.join(" ")),
                ));
                continue;
            }
        };
        let Ok(seed) = seed.parse::<u64>() else {
            errors.push((line, format!("seed '{seed}' is not a number from 0 to {}", u64::MAX)));
            continue;
        };
        let scenario = match scenarios.get(name) {
            Some(s) => s.clone(),
            None => match catalogue::scenario(name) {
                Ok(s) => {
                    scenarios.insert(name.to_owned(), s.clone());
                    s
                }
                Err(e) => {
                    errors.push((line, format!("bad scenario: {e}")));
                    continue;
                }
            },
        };
        entries.push(Entry { line, name: name.to_owned(), scenario, seed, defects: Vec::new(), expect: None });
    }
    match errors.first() {
        None => Ok(entries),
        Some((line, message)) => {
            Err(CorpusError { file: file.to_owned(), line: *line, message: message.clone(), more: errors.len() - 1 })
        }
    }
}

/// What two runs of one entry concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    Passed,
    /// Deterministic, with violations.
    Failed,
    /// The two runs disagree on the fingerprint or the verdict (whatever either verdict was).
    Nondeterministic,
}

pub fn judge(first: &WorldReport, second: &WorldReport) -> Judgement {
    if first.fingerprint != second.fingerprint || first.passed() != second.passed() {
        Judgement::Nondeterministic
    } else if first.passed() {
        Judgement::Passed
    } else {
        Judgement::Failed
    }
}

/// Why an entry failed, in one line (empty for a pass).
pub fn failure_line(first: &WorldReport, second: &WorldReport) -> Option<String> {
    let verdict = |r: &WorldReport| if r.passed() { "pass" } else { "fail" };
    match judge(first, second) {
        Judgement::Passed => None,
        Judgement::Nondeterministic => Some(format!(
            "nondeterministic: fingerprints {:016x} vs {:016x}, verdicts {} vs {}",
            first.fingerprint,
            second.fingerprint,
            verdict(first),
            verdict(second)
        )),
        Judgement::Failed => {
            let v = &first.violations[0];
            Some(format!("{} violation(s), first {}: {}", first.violations.len(), v.checker, v.explanation))
        }
    }
}

/// One run of an entry, reduced as soon as its world ended: the report without its rows (enough
/// to judge it), and the JSON and text that needed the rows.
struct Reduced {
    report: WorldReport,
    coverage: BTreeMap<String, u64>,
    doc: Value,
    text: String,
    seconds: f64,
}

fn reduce(mut report: WorldReport, seconds: f64, ttl_ms: u32) -> Reduced {
    let coverage = fencesim_sim::coverage::of_world(&report.rows, &report.probes, i64::from(ttl_ms));
    let doc = report::world_json(&report, &[]);
    let text = report::text(&report, &[], false);
    report.rows = Vec::new();
    Reduced { report, coverage, doc, text, seconds }
}

/// The corpus read and the outputs checked against every file it names, stale reports removed,
/// the bundle and report folders made ready: this shard's entries (each with its 0-based index in
/// the corpus: its shard, and its place in a merge), the corpus's size and content hash, the jobs
/// and the shard.
#[allow(clippy::type_complexity, reason = "the replay's set-up, destructured at once by its one caller")]
fn prepare(args: &Args, file: &str) -> anyhow::Result<(Vec<(usize, Entry)>, (usize, String), usize, Shard)> {
    // Read (never written) before the outputs are checked against every file it names.
    let parsed = load_corpus(&args.corpus);
    let mut inputs = vec![Named::new("the corpus", &args.corpus)];
    if let Ok((entries, _)) = &parsed {
        // A scenario or plan file an entry names (a built-in scenario's name is no file).
        let files = entries.iter().filter(|e| Path::new(&e.name).exists());
        inputs.extend(files.map(|e| Named::new("a file the corpus names:", &e.name)));
    }
    let mut outputs = super::folder_outputs("--report", &args.report, &["replay.json", "junit.xml"]);
    outputs.extend(args.bundle.iter().map(|d| Named::new("--bundle", d)));
    fencesim_sim::files::check_distinct(&outputs, &inputs)?;
    // An earlier run's reports go first: no refusal or harness error below may leave its verdict.
    fencesim_sim::files::remove_stale(&[&args.report.join("replay.json"), &args.report.join("junit.xml")])?;
    let jobs = par::jobs(args.jobs)?;
    let (entries, corpus_sha256) = parsed?;
    anyhow::ensure!(!entries.is_empty(), "{file}: the corpus has no entries");
    let shard = args.shard.unwrap_or(Shard::ALL);
    let total = entries.len();
    // Each entry with its 0-based index in the corpus: its shard, and its place in a merge.
    let entries: Vec<(usize, Entry)> = entries.into_iter().enumerate().filter(|(i, _)| shard.owns(*i as u64)).collect();
    for (_, entry) in &entries {
        let (_, store_defects) = fencesim_sim::catalogue::Defect::split(&entry.defects);
        args.store.check(store_defects).with_context(|| format!("{file}:{}", entry.line))?;
    }
    args.store.handshake()?;
    if let Some(dir) = &args.bundle {
        fencesim::bundle::check_root(dir)?;
    }
    // Refuse an unwritable report folder before the worlds run, not after.
    fencesim_sim::files::prepare_folder(&args.report).map_err(|e| anyhow::anyhow!("--report {e}"))?;

    Ok((entries, (total, corpus_sha256), jobs, shard))
}

/// One entry's line of the report: the first run's world document, with the entry, its place in
/// the corpus, whether the rerun matched, and the failure if any.
fn pair_doc(
    mut doc: serde_json::Value,
    second: &WorldReport,
    (name, index, line): (&str, usize, usize),
    (deterministic, seconds): (bool, f64),
    failure: Option<String>,
) -> serde_json::Value {
    doc["entry"] = json!(name);
    doc["index"] = json!(index);
    doc["line"] = json!(line);
    doc["deterministic"] = json!(deterministic);
    doc["rerun_fingerprint"] = json!(format!("{:016x}", second.fingerprint));
    doc["seconds"] = json!(seconds);
    doc["failure"] = json!(failure);
    doc
}

/// One run of an entry's world, reduced on its thread as soon as it ends.
fn run_one(args: &Args, entry: &Entry) -> Result<Reduced, world::WorldError> {
    let (engine_defects, store_defects) = fencesim_sim::catalogue::Defect::split(&entry.defects);
    let cfg = WorldConfig {
        scenario: entry.scenario.clone(),
        seed: entry.seed,
        db: args.db,
        store_defects,
        engine_defects,
        keep_db: None,
        adapter: args.store.spec(),
    };
    let watch = Stopwatch::start();
    world::run(&cfg).map(|report| reduce(report, watch.seconds(), entry.scenario.world.ttl_ms))
}

/// The replay's JSON report (`fencesim.replay/2`).
fn replay_doc(
    args: &Args,
    (file, corpus_sha256): (&str, &str),
    (total, shard, jobs, seconds): (usize, Shard, usize, f64),
    [passed, failed, nondeterministic]: [u64; 3],
    worlds: Vec<serde_json::Value>,
    table: &fencesim_sim::coverage::Table,
) -> serde_json::Value {
    json!({
        "schema": report::REPLAY_SCHEMA,
        "corpus": file,
        "corpus_sha256": corpus_sha256,
        "build": report::BUILD_ID,
        "commit": git_commit(),
        "entries": total,
        "shard": shard.json(),
        "summary": {
            "verdict": if failed + nondeterministic == 0 { "pass" } else { "fail" },
            "worlds": worlds.len(),
            "passed": passed,
            "failed": failed,
            "nondeterministic": nondeterministic,
            "db": args.store.describe(args.db),
            "jobs": jobs,
            "seconds": seconds,
        },
        "worlds": worlds,
        "coverage": table.json(),
    })
}

/// Print an entry's failure (and write its bundle if asked); the report's failure text.
fn report_failure(args: &Args, (entry, name, file): (&Entry, &str, &str), first: &Reduced, why: &str) -> String {
    let repro = report::repro(&first.report, &entry.defects);
    outln!("FAIL {name} ({file}:{}): {why}; repro: {repro}", entry.line);
    if let Some(dir) = args.bundle.as_ref().filter(|_| !first.report.passed()) {
        match bundle(dir, entry, (args.db, args.store.spec()), first.report.fingerprint) {
            Ok(path) => outln!("  bundle: {}", path.display()),
            Err(e) => outln!("  bundle not written: {e}"),
        }
    }
    format!("{why}\n{}", first.text)
}

pub fn run(args: &Args) -> CmdResult {
    let file = args.corpus.display().to_string();
    let (entries, (total, corpus_sha256), jobs, shard) = prepare(args, &file)?;
    let clock = Stopwatch::start();
    // Both runs of an entry are separate items (2i and 2i + 1), so with two jobs or more they run
    // at the same time on different threads. Each is reduced on its thread as soon as it ends.
    let progress = Progress::new(format!("replay {file}"), entries.len() * 2);
    let (mut passed, mut failed, mut nondeterministic) = (0, 0, 0);
    let mut worlds = Vec::with_capacity(entries.len());
    let mut first_run: Option<Reduced> = None;
    let mut table = fencesim_sim::coverage::Table::default();
    let mut error: Option<anyhow::Error> = None;
    par::stream(
        entries.len() as u64 * 2,
        jobs,
        &progress,
        |i| run_one(args, &entries[(i / 2) as usize].1),
        |i, outcome| {
            let (index, entry) = &entries[(i / 2) as usize];
            let run = match outcome {
                Ok(run) => run,
                Err(e) => {
                    error = Some(anyhow::Error::new(e).context(format!("{file}:{}", entry.line)));
                    return false;
                }
            };
            let Some(first) = first_run.take() else {
                first_run = Some(run);
                return true;
            };
            let second = run;
            table.add(&first.coverage);
            // A promoted plan must keep failing its checker; any other entry must pass.
            let expected = expected(entry.expect.as_deref(), &first.report, &second.report);
            match expected.as_ref().map_or_else(|| judge(&first.report, &second.report), |e| e.0.clone()) {
                Judgement::Passed => passed += 1,
                Judgement::Failed => failed += 1,
                Judgement::Nondeterministic => nondeterministic += 1,
            }
            let name = format!("{} {}", entry.name, entry.seed);
            let seconds = first.seconds + second.seconds;
            let failure = expected
                .map_or_else(|| failure_line(&first.report, &second.report), |e| e.1)
                .map(|why| report_failure(args, (entry, &name, &file), &first, &why));
            let deterministic = judge(&first.report, &second.report) != Judgement::Nondeterministic;
            worlds.push(pair_doc(
                first.doc,
                &second.report,
                (&name, *index, entry.line),
                (deterministic, seconds),
                failure,
            ));
            true
        },
    );
    if let Some(e) = error {
        return Err(e);
    }
    let seconds = clock.seconds();

    let verdict = if failed + nondeterministic == 0 { Verdict::Pass } else { Verdict::Fail };
    let worlds_len = worlds.len();
    let counts = [passed, failed, nondeterministic];
    let doc = replay_doc(args, (&file, &corpus_sha256), (total, shard, jobs, seconds), counts, worlds, &table);
    write_reports(&args.report, "replay.json", &doc, &fleet::junit_of(&doc))?;
    out!("{}", table.text(&[]));
    outln!(
        "replayed {} worlds from {file}: {passed} passed, {failed} failed, {nondeterministic} nondeterministic in {seconds:.2} s",
        worlds_len
    );
    Ok(verdict)
}

/// A corpus's entries (every plan of a folder, or the lines of a corpus file) and its content's
/// SHA-256 (`corpus_sha256`): of a file's bytes; of a folder's plan files, each by its name, its
/// length and its bytes, in name order. Shards of one corpus name with other contents are other
/// runs (`fencesim merge` refuses them).
fn load_corpus(corpus: &Path) -> anyhow::Result<(Vec<Entry>, String)> {
    let file = corpus.display().to_string();
    if corpus.is_dir() {
        let paths = fencesim_sim::files::toml_files(corpus)
            .map_err(|e| anyhow::anyhow!("cannot list plan folder {}: {e}", corpus.display()))?;
        let mut content = Vec::new();
        for path in &paths {
            let text = fencesim_sim::files::read_input(path, fencesim_sim::files::MAX_TEXT_BYTES)?;
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            content.extend_from_slice(format!("{name}\0{}\0", text.len()).as_bytes());
            content.extend_from_slice(text.as_bytes());
        }
        return Ok((corpus_dir(corpus)?, report::sha256_hex(&content)));
    }
    let text = fencesim_sim::files::read_input(corpus, fencesim_sim::files::MAX_TEXT_BYTES)
        .map_err(|e| anyhow::anyhow!("cannot read corpus {e}"))?;
    Ok((parse_corpus(&file, &text)?, report::sha256_hex(text.as_bytes())))
}

/// Write a report (`name`) and `junit.xml` into `dir`, each atomically.
pub fn write_reports(dir: &Path, name: &str, doc: &Value, junit: &str) -> anyhow::Result<()> {
    let json_path = dir.join(name);
    let text = serde_json::to_string_pretty(doc).with_context(|| format!("cannot encode {name}"))? + "\n";
    report::write_atomic(&json_path, text.as_bytes())
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let xml_path = dir.join("junit.xml");
    report::write_atomic(&xml_path, junit.as_bytes())
        .with_context(|| format!("cannot write {}", xml_path.display()))?;
    Ok(())
}

/// The commit of the repository in the current folder, if git is there to say.
pub fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit())).then_some(commit)
}

/// A corpus entry for a plan file (`plan PATH` in a corpus, or a file of a plan folder).
pub fn entry(line: usize, path: &str) -> Result<Entry, fencesim_sim::scenario::ScenarioError> {
    let file = fencesim_sim::scenario::planfile::PlanFile::load(std::path::Path::new(path))?;
    Ok(Entry {
        line,
        name: path.to_owned(),
        scenario: file.scenario(path),
        seed: file.seed,
        defects: file.defects,
        expect: file.expect,
    })
}

/// Every plan file (`*.toml`) of a folder, sorted by name, as corpus entries (line 0).
pub fn corpus_dir(dir: &std::path::Path) -> anyhow::Result<Vec<Entry>> {
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
) -> Option<(Judgement, Option<String>)> {
    let checker = checker?;
    Some(match judge(first, second) {
        Judgement::Nondeterministic => (Judgement::Nondeterministic, failure_line(first, second)),
        _ if first.violations.iter().any(|v| v.checker.name() == checker) => (Judgement::Passed, None),
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
    entry: &Entry,
    (db, adapter): (fencesim_sim::stores::DbKind, Option<fencesim_protocol::Spec>),
    seen: u64,
) -> Result<std::path::PathBuf, fencesim::bundle::BundleError> {
    let (engine_defects, store_defects) = fencesim_sim::catalogue::Defect::split(&entry.defects);
    let cfg = fencesim_sim::world::WorldConfig {
        scenario: entry.scenario.clone(),
        seed: entry.seed,
        db,
        store_defects,
        engine_defects,
        keep_db: None,
        adapter,
    };
    fencesim::bundle::write(dir, &cfg, &entry.defects, seen)
}

#[cfg(test)]
mod tests {
    use fencesim_oracle::Violation;

    use super::*;

    fn parse(text: &str) -> Result<Vec<Entry>, CorpusError> {
        parse_corpus("c.txt", text)
    }

    fn error(text: &str) -> String {
        parse(text).map(|e| format!("parsed {} entries", e.len())).unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn comments_blank_lines_and_crlf_are_skipped() {
        let entries =
            parse("# header\n\nswarm 1\r\n  boot-storm   18446744073709551615  # trailing\n#x 2\n").expect("parses");
        let got: Vec<(usize, &str, u64)> = entries.iter().map(|e| (e.line, e.name.as_str(), e.seed)).collect();
        assert_eq!(got, [(3, "swarm", 1), (4, "boot-storm", u64::MAX)]);
        assert_eq!(entries[1].scenario.name, "boot-storm");
        assert!(parse("# nothing yet\n\n").expect("parses").is_empty());
        assert!(parse("").expect("parses").is_empty());
    }

    /// A plan a corpus names on many lines is read and held once (issue 38 item 16): every line
    /// read its file again and kept a copy of its own (measured, debug build, a 291 KB plan of
    /// 3,200 runs: 25 lines 57 MB, 200 lines 113 MB before a world ran). Counted: one plan.
    #[test]
    fn a_plan_named_on_many_lines_is_read_once() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("p.toml");
        let scenario = fencesim_sim::catalogue::scenario("swarm").expect("built in");
        let text = fencesim_sim::scenario::planfile::PlanFile::draw(&scenario, 3, &[]).to_toml();
        std::fs::write(&path, text).expect("write the plan");
        let line = format!("plan {}\n", path.display());
        let entries = parse(&format!("{line}swarm 1\n{line}{line}")).expect("parses");
        let lines: Vec<usize> = entries.iter().map(|e| e.line).collect();
        assert_eq!(lines, [1, 2, 3, 4]);
        let plans = [0, 2, 3].map(|i| entries[i].scenario.plan.clone().expect("a plan"));
        assert!(plans.iter().all(|p| std::sync::Arc::ptr_eq(p, &plans[0])), "each line parsed the plan again");
        assert!(entries[1].scenario.plan.is_none());
        let bad = format!("plan {}\n", dir.path().join("none.toml").display());
        let e = error(&format!("{bad}swarm 1\n{bad}"));
        assert!(e.starts_with("c.txt:1: bad plan: ") && e.ends_with("(and 1 more malformed line(s))"), "{e}");
    }

    #[test]
    fn a_malformed_line_is_named_by_file_and_line() {
        assert!(error("swarm 1\nswarm\n").starts_with("c.txt:2: 'swarm' has no seed"), "{}", error("swarm\n"));
        assert!(error("swarm x1\n").starts_with("c.txt:1: seed 'x1' is not a number"));
        assert!(error("swarm -1\n").starts_with("c.txt:1: seed '-1' is not a number"));
        assert!(error("swarm 18446744073709551616\n").starts_with("c.txt:1: seed '18446744073709551616'"));
        assert!(error("\nswarm 1 2 3\n").starts_with("c.txt:2: 4 fields, expected 2"), "{}", error("swarm 1 2 3"));
        let unknown = error("# c\nswam 1\n");
        assert!(unknown.starts_with("c.txt:2: bad scenario: swam: unknown scenario"), "{unknown}");
        let missing = error("nowhere/x.toml 1\n");
        assert!(missing.starts_with("c.txt:1: bad scenario: nowhere/x.toml: cannot read scenario"), "{missing}");
        assert_eq!(error("swam 1\nswarm\nswarm 1\n"), format!("{} (and 1 more malformed line(s))", error("swam 1")));
    }

    /// The CI corpus covers every built-in scenario with seeds 1 to 5 at least, and the
    /// regressions corpus parses (it may be empty).
    #[test]
    fn the_shipped_corpora_parse() {
        let ci =
            parse_corpus("seeds/ci.txt", include_str!("../../../../seeds/ci.txt")).unwrap_or_else(|e| panic!("{e}"));
        for (name, _) in catalogue::SCENARIOS {
            for seed in 1..=5 {
                assert!(ci.iter().any(|e| e.name == name && e.seed == seed), "seeds/ci.txt lacks {name} {seed}");
            }
        }
        parse_corpus("seeds/regressions.txt", include_str!("../../../../seeds/regressions.txt"))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    fn world(fingerprint: u64, violations: usize) -> WorldReport {
        WorldReport {
            scenario: "swarm".into(),
            source: "swarm".into(),
            seed: 3,
            db: DbKind::Memdb,
            adapter: None,
            config: Vec::new(),
            rows: Vec::new(),
            violations: (0..violations)
                .map(|i| Violation {
                    checker: fencesim_oracle::Checker::Liveness,
                    explanation: format!("run r{i} never settled"),
                    row: None,
                    cause: None,
                })
                .collect(),
            fingerprint,
            counters: Default::default(),
            settled_early: true,
            probes: Default::default(),
        }
    }

    #[test]
    fn two_runs_must_agree_on_fingerprint_and_verdict() {
        assert_eq!(judge(&world(7, 0), &world(7, 0)), Judgement::Passed);
        assert_eq!(failure_line(&world(7, 0), &world(7, 0)), None);
        assert_eq!(judge(&world(7, 2), &world(7, 2)), Judgement::Failed);
        assert_eq!(
            failure_line(&world(7, 2), &world(7, 2)).as_deref(),
            Some("2 violation(s), first liveness: run r0 never settled")
        );
        assert_eq!(judge(&world(7, 0), &world(8, 0)), Judgement::Nondeterministic);
        assert_eq!(judge(&world(7, 1), &world(8, 1)), Judgement::Nondeterministic);
        assert_eq!(judge(&world(7, 0), &world(7, 1)), Judgement::Nondeterministic);
        assert_eq!(
            failure_line(&world(7, 0), &world(8, 1)).as_deref(),
            Some("nondeterministic: fingerprints 0000000000000007 vs 0000000000000008, verdicts pass vs fail")
        );
    }
}
