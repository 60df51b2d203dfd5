//! How a world's outcome is shown: the one-line reproduction command, the readable text (verdict,
//! fingerprint, counters, violations, and with `--trace` every row), the versioned JSON report
//! (schema in `reports/world.schema.json`) and JUnit XML for CI.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::catalogue::Defect;
use crate::history::Row;
use crate::world::WorldReport;

/// The JSON report's schema identifier; bump on any incompatible change.
pub const WORLD_SCHEMA: &str = "fencesim.world/1";
pub const REPLAY_SCHEMA: &str = "fencesim.replay/1";
pub const SWEEP_SCHEMA: &str = "fencesim.sweep/1";

/// The command that reproduces this world byte for byte.
pub fn repro(report: &WorldReport, defects: &[Defect]) -> String {
    let mut command = match report.source.strip_prefix(crate::planfile::PLAN_SOURCE_PREFIX) {
        Some(plan) => format!("fencesim run --plan {plan}"),
        None => format!("fencesim run --scenario {} --seed {}", report.source, report.seed),
    };
    if report.db != crate::stores::DbKind::Memdb {
        command.push_str(&format!(" --db {}", report.db.as_str()));
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

/// The versioned JSON report of one world.
pub fn world_json(report: &WorldReport, defects: &[Defect]) -> Value {
    let violations: Vec<Value> = report
        .violations
        .iter()
        .map(|v| {
            json!({
                "checker": v.checker,
                "explanation": v.explanation,
                "row": v.row,
                "row_text": row_text(&report.rows, v.row),
                "cause": v.cause,
                "cause_text": row_text(&report.rows, v.cause),
            })
        })
        .collect();
    json!({
        "schema": WORLD_SCHEMA,
        "scenario": report.scenario,
        "seed": report.seed,
        "db": report.db.as_str(),
        "defects": defects.iter().map(|d| d.name()).collect::<Vec<_>>(),
        "config": report.config,
        "verdict": if report.passed() { "pass" } else { "fail" },
        "fingerprint": format!("{:016x}", report.fingerprint),
        "settled_early": report.settled_early,
        "counters": report.counters,
        "violations": violations,
        "repro": (!report.passed()).then(|| repro(report, defects)),
    })
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
        report.db.as_str(),
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

/// Write `bytes` to `path` atomically: into a temporary file in the same folder, flushed to disk,
/// then renamed over `path`. A reader (or a crash) sees the old file or the whole new one, never
/// a part.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("report");
    let mut file = tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// One JUnit test case: its name and, when it failed, the failure message.
pub struct Case {
    pub name: String,
    pub seconds: f64,
    pub failure: Option<String>,
}

/// JUnit XML for a suite of cases.
pub fn junit(suite: &str, cases: &[Case]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">", xml(suite), cases.len());
    for case in cases {
        let _ = write!(
            out,
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml(suite),
            xml(&case.name),
            case.seconds
        );
        match &case.failure {
            None => out.push_str("/>\n"),
            Some(message) => {
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

fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_and_counts_failures() {
        let cases = [
            Case { name: "swarm 1".into(), seconds: 0.1, failure: None },
            Case { name: "swarm 2".into(), seconds: 0.2, failure: Some("a < b & \"c\"\nrepro".into()) },
        ];
        let xml = junit("ci", &cases);
        assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
        assert!(xml.contains("message=\"a &lt; b &amp; &quot;c&quot;\""), "{xml}");
        assert!(xml.contains("<testcase classname=\"ci\" name=\"swarm 1\" time=\"0.100\"/>"), "{xml}");
    }
}
