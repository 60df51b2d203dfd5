//! How a world's outcome is shown: the one-line reproduction command, the readable text (verdict,
//! fingerprint, counters, violations, and with `--trace` every row), the versioned JSON report
//! (schema in `reports/world.schema.json`) and JUnit XML for CI.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use fencesim_sim::catalogue::Defect;
use fencesim_sim::history::Row;
use fencesim_sim::world::{Counters, WorldReport};

/// The JSON report's schema identifier; bump on any incompatible change.
pub const WORLD_SCHEMA: &str = "fencesim.world/1";
pub const REPLAY_SCHEMA: &str = "fencesim.replay/2";
pub const SWEEP_SCHEMA: &str = "fencesim.sweep/2";

/// What built this binary: a SHA-256 over every source it is compiled from and how (`build.rs`).
/// Every sweep and replay report carries it as `build`, and `fencesim merge` refuses shards of
/// different builds: a report's `commit` only says which checkout the command ran in.
pub const BUILD_ID: &str = env!("FENCESIM_BUILD_ID");

/// The SHA-256 of `bytes`, in lowercase hex: a corpus's and a scenario file's content in the
/// reports (`corpus_sha256`, `scenario_sha256`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// One word for a POSIX shell: as it is when it holds only characters no shell treats specially,
/// else in single quotes (a quote inside written `'\''`).
pub fn sh_quote(word: &str) -> String {
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The command that reproduces this world byte for byte, shell-quoted (a scenario path with
/// spaces or quotes is pasted as one word).
pub fn repro(report: &WorldReport, defects: &[Defect]) -> String {
    let names: Vec<String> = defects.iter().map(ToString::to_string).collect();
    repro_of(&report.source, report.seed, report.store_name(), &names)
}

/// [`repro`] from a world's parts as reports record them: its source (a scenario's name or path,
/// or `plan:PATH`), seed, store (`memdb`, `file`, or a store adapter's `cmd:...`) and defects.
/// `merge` holds a shard report's commands to it: a command in a report is never taken on trust.
pub fn repro_of(source: &str, seed: u64, store: &str, defects: &[String]) -> String {
    let mut command = match source.strip_prefix(fencesim_sim::scenario::planfile::PLAN_SOURCE_PREFIX) {
        Some(plan) => format!("fencesim run --plan {}", sh_quote(plan)),
        None => format!("fencesim run --scenario {} --seed {seed}", sh_quote(source)),
    };
    if store.starts_with("cmd:") {
        command.push_str(&format!(" --store {}", sh_quote(store)));
    } else if store != fencesim_sim::stores::DbKind::Memdb.as_str() {
        command.push_str(&format!(" --db {store}"));
    }
    for d in defects {
        command.push_str(&format!(" --defect {d}"));
    }
    command.push_str(" --trace");
    command
}

fn row_text(rows: &[Row], index: Option<usize>) -> Option<String> {
    index.and_then(|i| rows.get(i)).map(ToString::to_string)
}

/// A report's verdict, as every report spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// The harness could not judge (a world that did not run, a malformed input).
    Error,
    /// Nothing failed, but what was asked was not shown (coverage a fleet did not reach).
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// One violation in a world report, with the text of the rows it names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViolationDoc {
    pub cause: Option<usize>,
    pub cause_text: Option<String>,
    pub checker: String,
    pub explanation: String,
    pub row: Option<usize>,
    pub row_text: Option<String>,
}

/// The versioned JSON report of one world (`fencesim.world/1`, `reports/world.schema.json`).
/// Fields are declared in alphabetical order: the JSON keeps the order reports always had.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldDoc {
    pub config: Vec<String>,
    pub counters: Counters,
    pub db: String,
    pub defects: Vec<String>,
    pub fingerprint: String,
    pub repro: Option<String>,
    pub scenario: String,
    pub schema: String,
    pub seed: u64,
    pub settled_early: bool,
    pub verdict: Verdict,
    pub violations: Vec<ViolationDoc>,
}

/// Which part of a fleet a report covers: shard `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardDoc {
    pub index: u64,
    pub count: u64,
}

/// One coverage event: how many worlds reached it, how many times in all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageDoc {
    pub event: String,
    pub worlds: u64,
    pub total: u64,
}

/// A replay report (`fencesim.replay/2`, `reports/replay.schema.json`), as read back.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayDoc {
    pub schema: String,
    pub corpus: String,
    /// The corpus's content: the SHA-256 of its bytes (of a plan folder's files, by name).
    pub corpus_sha256: String,
    pub build: String,
    pub commit: Option<String>,
    #[serde(default)]
    pub entries: Option<u64>,
    #[serde(default)]
    pub shard: Option<ShardDoc>,
    pub summary: ReplaySummary,
    pub worlds: Vec<ReplayWorld>,
    #[serde(default)]
    pub coverage: Vec<CoverageDoc>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySummary {
    pub verdict: Verdict,
    pub worlds: u64,
    pub passed: u64,
    pub failed: u64,
    pub nondeterministic: u64,
    pub db: String,
    pub jobs: u64,
    pub seconds: f64,
}

/// One corpus entry of a replay: its world's report and the replay's own fields.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ReplayWorld {
    #[serde(flatten)]
    pub world: WorldDoc,
    pub entry: String,
    pub index: u64,
    pub line: u64,
    pub deterministic: bool,
    pub rerun_fingerprint: String,
    pub seconds: f64,
    pub failure: Option<String>,
}

/// A sweep report or a merge of them (`fencesim.sweep/2`, `reports/sweep.schema.json`), as read
/// back.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepDoc {
    pub schema: String,
    pub build: String,
    pub commit: Option<String>,
    pub scenario: String,
    /// The scenario's content: the SHA-256 of its file (a built-in's compiled-in text).
    pub scenario_sha256: String,
    pub aims: Vec<String>,
    pub source: String,
    pub db: String,
    pub defects: Vec<String>,
    pub start: u64,
    pub seeds: u64,
    pub shard: ShardDoc,
    pub summary: SweepSummary,
    pub failures: Vec<SweepFailure>,
    pub coverage: Vec<CoverageDoc>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSummary {
    pub verdict: Verdict,
    pub worlds: u64,
    #[serde(default)]
    pub missing_coverage: Vec<String>,
    pub passed: u64,
    pub failed: u64,
    pub errors: u64,
    pub virtual_ms: u64,
    pub jobs: u64,
    pub seconds: f64,
}

/// A failing or erring seed of a sweep.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFailure {
    pub seed: u64,
    pub violations: u64,
    pub first: String,
    pub repro: Option<String>,
}

/// One world's typed report.
pub fn world_doc(report: &WorldReport, defects: &[Defect]) -> WorldDoc {
    let violations = report
        .violations
        .iter()
        .map(|v| ViolationDoc {
            cause: v.cause,
            cause_text: row_text(&report.rows, v.cause),
            checker: v.checker.name().to_owned(),
            explanation: v.explanation.clone(),
            row: v.row,
            row_text: row_text(&report.rows, v.row),
        })
        .collect();
    WorldDoc {
        config: report.config.clone(),
        counters: report.counters.clone(),
        db: report.store_name().to_owned(),
        defects: defects.iter().map(|d| d.name().to_owned()).collect(),
        fingerprint: format!("{:016x}", report.fingerprint),
        repro: (!report.passed()).then(|| repro(report, defects)),
        scenario: report.scenario.clone(),
        schema: WORLD_SCHEMA.to_owned(),
        seed: report.seed,
        settled_early: report.settled_early,
        verdict: if report.passed() { Verdict::Pass } else { Verdict::Fail },
        violations,
    }
}

/// The versioned JSON report of one world, as a JSON value (the replay report extends it).
pub fn world_json(report: &WorldReport, defects: &[Defect]) -> Value {
    serde_json::to_value(world_doc(report, defects)).expect("a world report is plain data")
}

/// The readable summary; with `trace`, the applied configuration and every row first.
pub fn text(report: &WorldReport, defects: &[Defect], trace: bool) -> String {
    let mut out = String::new();
    if trace {
        for line in &report.config {
            let _ = writeln!(out, "config  {line}");
        }
        for row in &report.rows {
            let _ = writeln!(out, "{row}");
        }
    }
    let c = &report.counters;
    let faults: Vec<String> = c.faults.iter().map(|(k, n)| format!("{k}={n}")).collect();
    let _ = writeln!(
        out,
        "{} seed {} db {}{}: {} (fingerprint {:016x})",
        report.scenario,
        report.seed,
        report.store_name(),
        if defects.is_empty() {
            String::new()
        } else {
            format!(" defects {}", defects.iter().map(|d| d.name()).collect::<Vec<_>>().join(","))
        },
        if report.passed() { "PASS" } else { "FAIL" },
        report.fingerprint
    );
    let _ = writeln!(
        out,
        "  {} virtual ms, {} rows, {} store calls, {} accepted mutations, {} lease rejections, {} busy, {} grants, paid {} calls {} tools",
        c.virtual_ms,
        c.rows,
        c.store_calls,
        c.accepted_mutations,
        c.lease_rejections,
        c.busy,
        c.grants,
        c.paid_calls,
        c.paid_tools
    );
    let _ = writeln!(
        out,
        "  runs: {} settled, {} waiting, {} absent; faults: {}; {}",
        c.runs_settled,
        c.runs_waiting,
        c.runs_absent,
        if faults.is_empty() { "none".to_owned() } else { faults.join(" ") },
        if report.settled_early { "stopped when everything settled" } else { "ran to the liveness bound" }
    );
    for v in &report.violations {
        let _ = writeln!(out, "  VIOLATION {}: {}", v.checker, v.explanation);
        if let Some(row) = row_text(&report.rows, v.row) {
            let _ = writeln!(out, "    first divergent row: {row}");
        }
        if let Some(cause) = row_text(&report.rows, v.cause) {
            let _ = writeln!(out, "    caused by:           {cause}");
        }
    }
    if !report.passed() {
        let _ = writeln!(out, "  repro: {}", repro(report, defects));
    }
    out
}

/// Write a report to `path` atomically ([`fencesim_sim::files::write_atomic`]): a reader (or a crash)
/// sees the old file or the whole new one, never a part. A report replaces the file of the same
/// name (a report folder is rewritten run after run), but never a directory or a symbolic link.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<(), fencesim_sim::files::WriteError> {
    fencesim_sim::files::write_atomic(path, bytes, true)
}

/// One JUnit test case: its name and, when it failed, the failure message; when it was neither
/// passed nor failed (an inconclusive verdict), why, written as `<skipped>`.
pub struct Case {
    pub name: String,
    pub seconds: f64,
    pub failure: Option<String>,
    pub skipped: Option<String>,
}

/// JUnit XML for a suite of cases.
pub fn junit(suite: &str, cases: &[Case]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let skipped = cases.iter().filter(|c| c.failure.is_none() && c.skipped.is_some()).count();
    // A case fails, is skipped or passes: CI reads the passes as tests - failures - skipped.
    assert!(failures + skipped <= cases.len(), "JUnit cases counted twice");
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">",
        xml(suite),
        cases.len()
    );
    for case in cases {
        let _ = write!(
            out,
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml(suite),
            xml(&case.name),
            case.seconds
        );
        match (&case.failure, &case.skipped) {
            (None, None) => out.push_str("/>\n"),
            (None, Some(why)) => {
                let _ = writeln!(out, ">\n    <skipped message=\"{}\"/>\n  </testcase>", xml(why));
            }
            (Some(message), _) => {
                let first = message.lines().next().unwrap_or_default();
                let _ = writeln!(
                    out,
                    ">\n    <failure message=\"{}\">{}</failure>\n  </testcase>",
                    xml(first),
                    xml(message)
                );
            }
        }
    }
    out.push_str("</testsuite>\n");
    out
}

/// Text for an XML 1.0 attribute or element: the five markup characters as entities, tab, line
/// feed and carriage return as character references (an attribute keeps them), and every other
/// character XML 1.0 cannot carry (C0 controls, U+FFFE, U+FFFF) written out as `\u{XX}`.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => {
                let _ = write!(out, "&#{};", u32::from(c));
            }
            c if u32::from(c) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A soak's `junit.xml` (either level): a `quorum` case, skipped when the storm fell short (an
/// inconclusive soak is neither a pass nor a failure), and a `violations` case that fails with
/// every finding.
pub fn soak_junit(suite: &str, seconds: f64, short: &[(String, u64, u64)], findings: &[String]) -> Vec<u8> {
    let quorum = Case {
        name: "quorum".into(),
        seconds,
        failure: None,
        skipped: (!short.is_empty()).then(|| format!("quorum not met: {}", fencesim_real::soak::shortfall(short))),
    };
    let violations = Case {
        name: "violations".into(),
        seconds: 0.0,
        failure: (!findings.is_empty()).then(|| findings.join("\n")),
        skipped: None,
    };
    junit(suite, &[quorum, violations]).into_bytes()
}

/// A store-level soak's `junit.xml`: the quorum's case (skipped when it was not met) and the violations' case.
pub fn store_soak_junit(outcome: &fencesim_real::soak::referee::SoakOutcome) -> Vec<u8> {
    let findings: Vec<String> =
        outcome.judgement.findings.iter().map(|f| format!("{}: {}", f.checker, f.explanation)).collect();
    let short = if outcome.met { &[][..] } else { &outcome.short[..] };
    let suite = format!("fencesim soak store seed {}", outcome.meta.seed);
    soak_junit(&suite, outcome.storm_ms as f64 / 1000.0, short, &findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_and_counts_failures() {
        let cases = [
            Case { name: "swarm 1".into(), seconds: 0.1, failure: None, skipped: None },
            Case { name: "swarm 2".into(), seconds: 0.2, failure: Some("a < b & \"c\"\nrepro".into()), skipped: None },
            Case { name: "swarm 3".into(), seconds: 0.0, failure: None, skipped: Some("coverage <x>".into()) },
        ];
        let xml = junit("ci", &cases);
        assert!(xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""), "{xml}");
        assert!(xml.contains("<skipped message=\"coverage &lt;x&gt;\"/>"), "{xml}");
        assert!(xml.contains("message=\"a &lt; b &amp; &quot;c&quot;\""), "{xml}");
        assert!(xml.contains("<testcase classname=\"ci\" name=\"swarm 1\" time=\"0.100\"/>"), "{xml}");
    }

    #[test]
    fn junit_escapes_control_characters() {
        let cases = [Case {
            name: "a\u{1}b\u{1b}[31m'".into(),
            seconds: 0.0,
            failure: Some("x\u{0}y\tz".into()),
            skipped: None,
        }];
        let xml = junit("s\u{7}", &cases);
        assert!(!xml.chars().any(|c| u32::from(c) < 0x20 && c != '\n'), "a raw control character: {xml:?}");
        assert!(xml.contains("name=\"a\\u{1}b\\u{1b}[31m&apos;\""), "{xml}");
        assert!(xml.contains("x\\u{0}y&#9;z"), "{xml}");
    }

    #[test]
    fn sh_quote_makes_one_word() {
        assert_eq!(sh_quote("swarm"), "swarm");
        assert_eq!(sh_quote("my dir/it's.toml"), "'my dir/it'\\''s.toml'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("$(rm -rf x)"), "'$(rm -rf x)'");
    }
}
