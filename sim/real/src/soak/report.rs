//! The soak's reports: `soak.json` (schema `fencesim.soak/1`, `reports/soak.schema.json`) and
//! `junit.xml`, each written atomically (a temporary file in the same folder, fsync, rename), so
//! a reader never sees half a report.

use serde::Serialize;

use fencesim_oracle::{Checker, Violation};

use super::judge::WriterAccount;
use super::quorum::{Activity, COUNTERS, Quorum};
use super::referee::SoakOutcome;
use super::{SoakError, SoakResult, SoakVerdict};

pub const SCHEMA: &str = "fencesim.soak/1";

#[derive(Serialize)]
struct Floor {
    counter: String,
    floor: u64,
    observed: u64,
    /// Ms of the storm at which the counter first met its floor; absent if it never did.
    #[serde(skip_serializing_if = "Option::is_none")]
    met_at_ms: Option<u64>,
    /// How far below its floor the counter ended (0 when met).
    short_by: u64,
}

#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    level: &'static str,
    seed: u64,
    writers: usize,
    ttl_ms: i64,
    skew_ms: i64,
    defects: &'a [String],
    quorum: &'a str,
    floors: Vec<Floor>,
    counters: &'a Activity,
    met: bool,
    capped: bool,
    storm_ms: u64,
    rows: usize,
    indeterminate: usize,
    journal_entries: usize,
    integrity: &'a str,
    violations: Vec<ViolationDoc<'a>>,
    writers_accounted: &'a [WriterAccount],
    processes: usize,
    wal_peak_bytes: u64,
    rss_peak_kib: RssPeaks,
    verdict: SoakVerdict,
}

/// A violation as `soak.json` carries it: its checker, explanation and row (the report names no
/// cause).
#[derive(Serialize)]
struct ViolationDoc<'a> {
    checker: Checker,
    explanation: &'a str,
    row: Option<usize>,
}

impl<'a> From<&'a Violation> for ViolationDoc<'a> {
    fn from(v: &'a Violation) -> Self {
        Self { checker: v.checker, explanation: &v.explanation, row: v.row }
    }
}

#[derive(Serialize)]
struct RssPeaks {
    referee: u64,
    writer_max: u64,
}

/// Pass only with the quorum met and no violation; a violation fails whatever the quorum did.
pub fn verdict(outcome: &SoakOutcome) -> SoakVerdict {
    let short = if outcome.met { &[][..] } else { &outcome.short[..] };
    // A storm that missed its quorum always names what it missed.
    assert!(outcome.met || !outcome.short.is_empty(), "an unmet quorum with no short floor");
    SoakVerdict::of(outcome.judgement.findings.len(), short)
}

/// `soak.json`.
pub fn json(outcome: &SoakOutcome, quorum: &Quorum, skew_ms: i64) -> SoakResult<Vec<u8>> {
    let floors = quorum
        .floors
        .iter()
        .map(|(k, v)| Floor {
            counter: k.clone(),
            floor: *v,
            observed: outcome.activity.get(k),
            met_at_ms: outcome.floor_ms.iter().find(|(name, _)| name == k).and_then(|(_, at)| *at),
            short_by: v.saturating_sub(outcome.activity.get(k)),
        })
        .collect();
    let report = Report {
        schema: SCHEMA,
        level: "store",
        seed: outcome.meta.seed,
        writers: outcome.meta.writers,
        ttl_ms: outcome.meta.ttl_ms,
        skew_ms,
        defects: &outcome.meta.defects,
        quorum: &quorum.name,
        floors,
        counters: &outcome.activity,
        met: outcome.met,
        capped: outcome.capped,
        storm_ms: outcome.storm_ms,
        rows: outcome.judgement.rows,
        indeterminate: outcome.judgement.indeterminate,
        journal_entries: outcome.judgement.journal_entries,
        integrity: &outcome.judgement.integrity,
        violations: outcome.judgement.findings.iter().map(ViolationDoc::from).collect(),
        writers_accounted: &outcome.meta.accounts,
        processes: outcome.processes,
        wal_peak_bytes: outcome.wal_peak_bytes,
        rss_peak_kib: RssPeaks {
            referee: outcome.referee_rss_kib,
            writer_max: outcome.meta.accounts.iter().map(|a| a.rss_peak_kib).max().unwrap_or(0),
        },
        verdict: verdict(outcome),
    };
    let mut bytes = serde_json::to_vec_pretty(&report).map_err(SoakError::json("soak report"))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// `epochs 12.3s stale_rejects 40.1s ... (last: stale_rejects)`: when each gated counter met its
/// floor, and the one that set the pace (or those that never met theirs).
pub fn floors_met(outcome: &SoakOutcome) -> String {
    let mut parts: Vec<String> = outcome
        .floor_ms
        .iter()
        .map(|(k, at)| match at {
            Some(ms) => format!("{k} {:.1}s", *ms as f64 / 1000.0),
            None => format!("{k} never"),
        })
        .collect();
    let never: Vec<&str> = outcome.floor_ms.iter().filter(|(_, at)| at.is_none()).map(|(k, _)| k.as_str()).collect();
    if never.is_empty() {
        if let Some((last, _)) = outcome.floor_ms.iter().max_by_key(|(_, at)| *at) {
            parts.push(format!("(last: {last})"));
        }
    } else {
        parts.push(format!("(never met: {})", never.join(", ")));
    }
    parts.join(" ")
}

/// The text summary the CLI prints.
pub fn text(outcome: &SoakOutcome, quorum: &Quorum) -> String {
    let a = &outcome.activity;
    let mut out = format!(
        "soak store seed {} writers {} ttl {}ms defects {}: {}\n",
        outcome.meta.seed,
        outcome.meta.writers,
        outcome.meta.ttl_ms,
        if outcome.meta.defects.is_empty() { "none".to_owned() } else { outcome.meta.defects.join(",") },
        verdict(outcome).name().to_uppercase()
    );
    let counters: Vec<String> = COUNTERS.iter().map(|k| format!("{k}={}", a.get(k))).collect();
    out += &format!("  activity: {}\n", counters.join(" "));
    out += &format!(
        "  quorum {}: {}; storm {} ms{}\n",
        quorum,
        if outcome.met { "met".to_owned() } else { "MISSED".to_owned() },
        outcome.storm_ms,
        if outcome.capped { " (capped)" } else { "" }
    );
    out += &format!("  time to floor: {}\n", floors_met(outcome));
    if !outcome.met {
        out += &format!("  QUORUM MISSED: {}\n", super::shortfall(&outcome.short));
    }
    let j = &outcome.judgement;
    out += &format!(
        "  history: {} rows, {} indeterminate, journal {} entries, integrity {}\n",
        j.rows, j.indeterminate, j.journal_entries, j.integrity
    );
    let writer_max = outcome.meta.accounts.iter().map(|a| a.rss_peak_kib).max().unwrap_or(0);
    out += &format!(
        "  processes {} (writers {}), WAL peak {} bytes, RSS peak referee {} KiB writer {} KiB\n",
        outcome.processes,
        outcome.meta.accounts.len(),
        outcome.wal_peak_bytes,
        outcome.referee_rss_kib,
        writer_max
    );
    for f in &j.findings {
        let row = f.row.map_or(String::new(), |r| format!(" (row {r})"));
        out += &format!("  VIOLATION {}: {}{row}\n", f.checker, f.explanation);
    }
    if let Some(dir) = &outcome.kept {
        out += &format!("  kept: {} (re-judge with fencesim soak-check {})\n", dir.display(), dir.display());
    }
    out
}
