//! Seeds at fleet scale: shards and merged reports. A shard `I/N` (0-based, `0 <= I < N`) owns the
//! seeds (or corpus entries, or kill-matrix items) whose number is `I` modulo `N`, so an item's
//! shard depends on the item and `N` alone, never on the other shards or the machine. Shard
//! reports (`sweep.json` or `replay.json`, each with its `shard`) merge into one report equal to
//! an unsharded run of the same items, apart from wall-clock fields (`seconds`, `jobs`); the JUnit
//! file is written again from the merged JSON. Overlapping or missing shards are refused by name,
//! and each shard is held to the items it owns (recomputed from the run and its `I/N`, never
//! taken from the shard's own counts).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::report::{self, Case, Verdict};

/// A `--shard I/N` slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

/// The most shards one fleet may split into.
pub const MAX_SHARDS: u64 = 1_000_000;

impl Shard {
    /// The whole: one shard of one.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Parse `I/N`.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("invalid shard '{text}' (expected I/N with 0 <= I < N <= {MAX_SHARDS}, e.g. 0/32)");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (i.trim().parse::<u64>().map_err(|_| bad())?, n.trim().parse::<u64>().map_err(|_| bad())?);
        if count == 0 || index >= count || count > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// Whether this shard owns item `n`.
    pub fn owns(self, n: u64) -> bool {
        // Every shard is made valid (`parse`, a report's checked `I/N`): it owns some residue.
        assert!(self.index < self.count, "shard {}/{} owns nothing", self.index, self.count);
        n % self.count == self.index
    }

    /// The seeds of `start..=end` this shard owns: the first, and how many (stride `count`).
    pub fn seeds(self, start: u64, end: u64) -> (u64, u64) {
        let offset = (self.index + self.count - start % self.count) % self.count;
        let seeds = match start.checked_add(offset) {
            Some(first) if first <= end => (first, (end - first) / self.count + 1),
            _ => (start, 0),
        };
        // The stride starts on a seed the shard owns: shards run disjoint seeds that cover the range.
        assert!(seeds.1 == 0 || self.owns(seeds.0), "shard {self} starts its seeds on {}", seeds.0);
        seeds
    }

    pub fn json(self) -> Value {
        json!({"index": self.index, "count": self.count})
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Why shard reports cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("no reports to merge")]
    Empty,
    #[error("{0}: not a fencesim sweep or replay report ({1})")]
    Malformed(String, String),
    #[error("{0} and {1} are reports of different runs ({2} differs)")]
    Mismatch(String, String, String),
    #[error("overlapping shards: {0}")]
    Overlap(String),
    #[error("missing shards: {0} (of {1})")]
    Missing(String, u64),
}

/// One shard report and where it came from (for messages).
pub struct ShardReport {
    pub from: String,
    pub doc: Value,
}

/// What the merge reads of a shard report, taken from its typed struct ([`report::SweepDoc`] or
/// [`report::ReplayDoc`]): a report that does not deserialize into its struct is malformed.
struct Facts {
    kind: Kind,
    shard: Shard,
    verdict: Verdict,
    /// worlds, passed, failed, nondeterministic, errors, virtual_ms.
    counts: [u64; 6],
    seconds: f64,
    jobs: u64,
    /// The run's items: a sweep's seeds from `start`, a replay's entries from 0.
    first_item: u64,
    items: u64,
    /// The item each line names, in the report's order: a sweep's failing seeds, a replay's
    /// world indices.
    lines: Vec<u64>,
    /// The lines that carry a failure.
    failing_lines: u64,
    coverage: Vec<report::CoverageDoc>,
    /// The run's description, field by field, which every shard of one run shares: what ran and
    /// what ran it (`build`), never where (`commit` is the checkout a shard ran in, null outside
    /// one; shards of one build may differ in it).
    run: Vec<(&'static str, String)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sweep,
    Replay,
}

const WORLDS: usize = 0;
const PASSED: usize = 1;
const FAILED: usize = 2;
const NONDETERMINISTIC: usize = 3;
const ERRORS: usize = 4;
/// The summary's count fields, by their index in [`Facts::counts`].
const COUNT_KEYS: [&str; 6] = ["worlds", "passed", "failed", "nondeterministic", "errors", "virtual_ms"];

/// Why a report whose `schema` this merge does not read is refused: another version's lacks what
/// identifies its run (`build`, the content hashes), so it says to run the shard again.
fn unread_schema(schema: Option<&str>) -> String {
    match schema {
        Some(old) if old.starts_with("fencesim.sweep/") || old.starts_with("fencesim.replay/") => format!(
            "schema '{old}', not {} or {}: written by another fencesim; run the shard again",
            report::SWEEP_SCHEMA,
            report::REPLAY_SCHEMA
        ),
        other => format!("schema {}", other.map_or("missing".to_owned(), |o| format!("'{o}'"))),
    }
}

impl Facts {
    fn read(r: &ShardReport) -> Result<Facts, MergeError> {
        let malformed = |why: String| MergeError::Malformed(r.from.clone(), why);
        let shard_of = |doc: Option<report::ShardDoc>| match doc {
            Some(d) if d.index < d.count && d.count <= MAX_SHARDS => Ok(Shard { index: d.index, count: d.count }),
            _ => Err(malformed("no valid shard".into())),
        };
        match r.doc.get("schema").and_then(Value::as_str) {
            Some(report::SWEEP_SCHEMA) => {
                let d: report::SweepDoc =
                    serde_json::from_value(r.doc.clone()).map_err(|e| malformed(e.to_string()))?;
                check_repros(&d).map_err(malformed)?;
                let s = &d.summary;
                Ok(Facts {
                    kind: Kind::Sweep,
                    shard: shard_of(Some(d.shard))?,
                    verdict: s.verdict,
                    counts: [s.worlds, s.passed, s.failed, 0, s.errors, s.virtual_ms],
                    seconds: s.seconds,
                    jobs: s.jobs,
                    first_item: d.start,
                    items: d.seeds,
                    failing_lines: d.failures.len() as u64,
                    lines: d.failures.iter().map(|f| f.seed).collect(),
                    coverage: d.coverage.clone(),
                    run: vec![
                        ("scenario", d.scenario.clone()),
                        ("source", d.source.clone()),
                        ("scenario_sha256", d.scenario_sha256.clone()),
                        ("db", d.db.clone()),
                        ("defects", d.defects.join(",")),
                        ("start", d.start.to_string()),
                        ("seeds", d.seeds.to_string()),
                        ("aims", d.aims.join(",")),
                        ("build", d.build.clone()),
                    ],
                })
            }
            Some(report::REPLAY_SCHEMA) => {
                let d: report::ReplayDoc =
                    serde_json::from_value(r.doc.clone()).map_err(|e| malformed(e.to_string()))?;
                let s = &d.summary;
                let entries = d.entries.ok_or_else(|| malformed("entries is not a count of at least 1".into()))?;
                Ok(Facts {
                    kind: Kind::Replay,
                    shard: shard_of(d.shard)?,
                    verdict: s.verdict,
                    counts: [s.worlds, s.passed, s.failed, s.nondeterministic, 0, 0],
                    seconds: s.seconds,
                    jobs: s.jobs,
                    first_item: 0,
                    items: entries,
                    lines: d.worlds.iter().map(|w| w.index).collect(),
                    failing_lines: d.worlds.iter().filter(|w| w.failure.is_some()).count() as u64,
                    coverage: d.coverage.clone(),
                    run: vec![
                        ("corpus", d.corpus.clone()),
                        ("corpus_sha256", d.corpus_sha256.clone()),
                        ("entries", entries.to_string()),
                        ("db", d.summary.db.clone()),
                        ("build", d.build.clone()),
                    ],
                })
            }
            other => Err(malformed(unread_schema(other))),
        }
    }

    /// A summary as a real sweep or replay writes it: the counts adding up to its worlds, one
    /// line per failing or erring world (a replay: one per world), and a verdict its counts allow.
    /// A report edited by hand (or written by something else) is refused, not summed.
    fn check_summary(&self) -> Result<(), String> {
        let c = &self.counts;
        let bad = c[FAILED].checked_add(c[NONDETERMINISTIC]);
        let judged = c[PASSED]
            .checked_add(c[FAILED])
            .and_then(|n| n.checked_add(c[NONDETERMINISTIC]))
            .and_then(|n| n.checked_add(c[ERRORS]));
        if judged != Some(c[WORLDS]) {
            return Err(format!("its summary's counts do not add up to its {} worlds", c[WORLDS]));
        }
        let (array, lines) = match self.kind {
            Kind::Sweep => ("failures", c[FAILED] + c[ERRORS]),
            Kind::Replay => ("worlds", c[WORLDS]),
        };
        if self.lines.len() as u64 != lines {
            return Err(format!("{array} does not hold the {lines} line(s) its summary counts"));
        }
        let allowed = match self.verdict {
            // A shard's own coverage verdict: the fleet's coverage is judged again at the merge.
            Verdict::Pass | Verdict::Inconclusive => c[ERRORS] == 0 && bad == Some(0),
            Verdict::Fail => c[ERRORS] == 0 && bad != Some(0),
            Verdict::Error => true,
        };
        if !allowed {
            return Err(format!("its verdict {} does not match its counts", self.verdict.as_str()));
        }
        Ok(())
    }

    /// What the shard owns, recomputed from the run's own description (a sweep's `start` and
    /// `seeds`, a replay's `entries`) and its `I/N`, and the shard held to it: exactly as many
    /// worlds as it owns, one line per owned item at most (a failure line for another shard's
    /// seed, or a seed named twice, is refused), and for a replay as many failing lines as its
    /// summary counts. A shard that ran fewer worlds than it owns cannot speak for the rest.
    fn check_owned(&self) -> Result<(), String> {
        let shard = self.shard;
        let Some(last) = self.items.checked_sub(1).and_then(|n| self.first_item.checked_add(n)) else {
            return Err(format!("its run of {} item(s) from {} names no item", self.items, self.first_item));
        };
        let owned = shard.seeds(self.first_item, last).1;
        let worlds = self.counts[WORLDS];
        if worlds != owned {
            return Err(format!("shard {shard} owns {owned} world(s), its summary counts {worlds}"));
        }
        let (array, key) = match self.kind {
            Kind::Sweep => ("failures", "seed"),
            Kind::Replay => ("worlds", "index"),
        };
        let mut named = std::collections::BTreeSet::new();
        for &n in &self.lines {
            if !(shard.owns(n) && (self.first_item..=last).contains(&n)) {
                return Err(format!("{array} names {key} {n}, which shard {shard} does not own"));
            }
            if !named.insert(n) {
                return Err(format!("{array} names {key} {n} twice"));
            }
        }
        let bad = self.counts[FAILED].saturating_add(self.counts[NONDETERMINISTIC]);
        if self.kind == Kind::Replay && self.failing_lines != bad {
            return Err(format!("{} of its worlds have a failure, its summary counts {bad}", self.failing_lines));
        }
        self.check_coverage()
    }

    /// Coverage rows a shard of its worlds could have written: known events only, each named
    /// once, seen in at least one and at most all of its worlds, at least once per world it names.
    fn check_coverage(&self) -> Result<(), String> {
        let known = fencesim_sim::coverage::events();
        let worlds = self.counts[WORLDS];
        let mut events = std::collections::BTreeSet::new();
        for row in &self.coverage {
            let event = row.event.as_str();
            if !known.iter().any(|e| e == event) {
                return Err(format!("coverage names an unknown event \"{event}\""));
            }
            if !events.insert(event) {
                return Err(format!("coverage names {event} twice"));
            }
            if !(row.worlds >= 1 && row.worlds <= worlds && row.total >= row.worlds) {
                return Err(format!(
                    "coverage row {event} ({} worlds, {} total) is not one its {worlds} world(s) could write",
                    row.worlds, row.total
                ));
            }
        }
        Ok(())
    }
}

/// A command the merged report would print is fencesim's own, never the shard's: each failure's
/// repro must be exactly the one its run's description gives.
fn check_repros(d: &report::SweepDoc) -> Result<(), String> {
    for f in &d.failures {
        if f.repro.as_ref().is_some_and(|repro| *repro != report::repro_of(&d.source, f.seed, &d.db, &d.defects)) {
            return Err(format!(
                "failures names seed {} with a repro that is not the command fencesim prints for it",
                f.seed
            ));
        }
    }
    Ok(())
}

/// Every shard of one run: same kind, run description and shard count as the first, each holding
/// to what it owns, and together each shard of `I/N` exactly once.
fn check_shards(reports: &[ShardReport], facts: &[Facts]) -> Result<(), MergeError> {
    let (Some(first), Some(head)) = (reports.first(), facts.first()) else { return Err(MergeError::Empty) };
    let count = head.shard.count;
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    let mut overlaps = Vec::new();
    for (r, f) in reports.iter().zip(facts) {
        let mismatch = |what: &str| MergeError::Mismatch(first.from.clone(), r.from.clone(), what.into());
        if f.kind != head.kind {
            return Err(mismatch("schema"));
        }
        if let Some((key, _)) = f.run.iter().zip(&head.run).map(|(a, b)| (a.0, a.1 == b.1)).find(|(_, same)| !same) {
            return Err(mismatch(key));
        }
        let malformed = |why: String| MergeError::Malformed(r.from.clone(), why);
        f.check_summary().map_err(malformed)?;
        f.check_owned().map_err(malformed)?;
        if f.shard.count != count {
            return Err(mismatch("shard count"));
        }
        if let Some(other) = seen.insert(f.shard.index, &r.from) {
            overlaps.push(format!("{} in {other} and {}", f.shard, r.from));
        }
    }
    if !overlaps.is_empty() {
        return Err(MergeError::Overlap(overlaps.join(", ")));
    }
    let missing: Vec<String> = (0..count).filter(|i| !seen.contains_key(i)).map(|i| format!("{i}/{count}")).collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing(missing.join(", "), count));
    }
    Ok(())
}

/// A merged report: its JSON, its JUnit text, its verdict, and whether it is a sweep's.
#[derive(Debug)]
pub struct Merged {
    pub doc: Value,
    pub junit: String,
    pub verdict: Verdict,
    pub sweep: bool,
}

/// Merge shard reports (all sweeps or all replays of the same run) into one report and its
/// JUnit text. Each shard is read into its typed report first; the merged report is the first
/// shard's with the run's totals, lines and coverage in place of its own.
pub fn merge(reports: &[ShardReport]) -> Result<Merged, MergeError> {
    let first = reports.first().ok_or(MergeError::Empty)?;
    let facts = reports.iter().map(Facts::read).collect::<Result<Vec<_>, _>>()?;
    check_shards(reports, &facts)?;
    let mut doc = first.doc.clone();
    doc["shard"] = Shard::ALL.json();
    // Each shard's counts are bounded by what it owns, but a total it claims (virtual time, a
    // coverage total) is not: a sum that overflows is a forged report, never a saturated count.
    let mut sums = [0u64; 6];
    for (r, f) in reports.iter().zip(&facts) {
        for (i, key) in COUNT_KEYS.iter().enumerate() {
            sums[i] = sums[i]
                .checked_add(f.counts[i])
                .ok_or_else(|| MergeError::Malformed(r.from.clone(), format!("summary.{key} overflows when summed")))?;
        }
    }
    let summary = &mut doc["summary"];
    summary["seconds"] = json!(facts.iter().map(|f| f.seconds).sum::<f64>());
    summary["jobs"] = json!(facts.iter().map(|f| f.jobs).max().unwrap_or(1));
    for (key, sum) in COUNT_KEYS.iter().zip(sums) {
        if !summary[key].is_null() {
            summary[key] = json!(sum);
        }
    }
    // A shard's coverage verdict is its own: the fleet's is judged again (`missing_coverage`).
    if let Some(summary) = summary.as_object_mut() {
        summary.remove("missing_coverage");
    }
    // A shard's harness error (a world that could not run, a bundle that could not be written)
    // makes the whole run's verdict an error.
    let verdict = if facts.iter().any(|f| f.verdict == Verdict::Error) {
        Verdict::Error
    } else if sums[FAILED] + sums[NONDETERMINISTIC] == 0 {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    summary["verdict"] = json!(verdict.as_str());
    // The per-item lines, concatenated and put back in the unsharded order.
    let array = if facts[0].kind == Kind::Sweep { "failures" } else { "worlds" };
    let mut items: Vec<(u64, Value)> = reports
        .iter()
        .zip(&facts)
        .flat_map(|(r, f)| f.lines.iter().copied().zip(r.doc[array].as_array().cloned().unwrap_or_default()))
        .collect();
    items.sort_by_key(|(n, _)| *n);
    doc[array] = Value::Array(items.into_iter().map(|(_, v)| v).collect());
    if !doc["coverage"].is_null() {
        doc["coverage"] = summed_coverage(reports, &facts)?;
    }
    let junit = junit_of(&doc);
    Ok(Merged { doc, junit, verdict, sweep: facts[0].kind == Kind::Sweep })
}

/// Coverage rows (event, worlds, total), summed per event in event order.
fn summed_coverage(reports: &[ShardReport], facts: &[Facts]) -> Result<Value, MergeError> {
    let mut coverage: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (r, f) in reports.iter().zip(facts) {
        for row in &f.coverage {
            let entry = coverage.entry(row.event.clone()).or_default();
            entry.0 += row.worlds;
            entry.1 = entry.1.checked_add(row.total).ok_or_else(|| {
                MergeError::Malformed(r.from.clone(), format!("coverage total of {} overflows when summed", row.event))
            })?;
        }
    }
    Ok(fencesim_sim::coverage::Table(coverage).json())
}

/// The events a (merged) sweep report's scenario aims at that its coverage table never saw. A
/// report written before sweeps recorded their aims aims at nothing.
pub fn missing_coverage(doc: &Value) -> Vec<String> {
    let seen: Vec<&str> =
        doc["coverage"].as_array().into_iter().flatten().filter_map(|r| r["event"].as_str()).collect();
    doc["aims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|e| !seen.contains(e))
        .map(str::to_owned)
        .collect()
}

/// The JUnit text of a sweep or replay report.
pub fn junit_of(doc: &Value) -> String {
    let seconds = |v: &Value| v["seconds"].as_f64().unwrap_or(0.0);
    if doc["schema"] == report::SWEEP_SCHEMA {
        let scenario = doc["scenario"].as_str().unwrap_or_default();
        let mut cases: Vec<Case> = doc["failures"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| Case {
                name: format!("{scenario} {}", f["seed"]),
                seconds: 0.0,
                failure: Some(format!(
                    "{}\nrepro: {}",
                    f["first"].as_str().unwrap_or_default(),
                    f["repro"].as_str().unwrap_or_default()
                )),
                skipped: None,
            })
            .collect();
        let s = &doc["summary"];
        // An inconclusive sweep is neither passed nor failed: its summary case is skipped, naming
        // the evidence it lacks.
        let lacking: Vec<&str> =
            s["missing_coverage"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        cases.push(Case {
            name: format!("{scenario}: {} passed of {} seeds", s["passed"], s["worlds"]),
            seconds: seconds(s),
            failure: None,
            skipped: (s["verdict"] == "inconclusive")
                .then(|| format!("inconclusive: aimed-at event(s) never happened: {}", lacking.join(", "))),
        });
        report::junit(&format!("fencesim sweep {scenario}"), &cases)
    } else {
        let cases: Vec<Case> = doc["worlds"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| Case {
                name: w["entry"].as_str().unwrap_or_default().to_owned(),
                seconds: seconds(w),
                failure: w["failure"].as_str().map(str::to_owned),
                skipped: None,
            })
            .collect();
        report::junit(&format!("fencesim replay {}", doc["corpus"].as_str().unwrap_or_default()), &cases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `doc` with every field its typed report requires that it leaves out filled in as a real
    /// sweep or replay would write it: the tests below state only what they are about.
    fn full(mut doc: Value) -> Value {
        let fill = |v: &mut Value, key: &str, default: Value| {
            if v.get(key).is_none() {
                v[key] = default;
            }
        };
        if doc["schema"] == report::SWEEP_SCHEMA {
            for (key, default) in [
                ("build", json!("b")),
                ("commit", json!(null)),
                ("scenario", json!("swarm")),
                ("scenario_sha256", json!("s")),
                ("source", json!("swarm")),
                ("db", json!("memdb")),
                ("defects", json!([])),
                ("aims", json!([])),
                ("coverage", json!([])),
            ] {
                fill(&mut doc, key, default);
            }
            for (key, default) in
                [("errors", json!(0)), ("virtual_ms", json!(0)), ("jobs", json!(1)), ("seconds", json!(0.0))]
            {
                fill(&mut doc["summary"], key, default);
            }
            for line in doc["failures"].as_array_mut().into_iter().flatten() {
                fill(line, "violations", json!(1));
                fill(line, "first", json!("a violation"));
            }
        } else {
            for (key, default) in [("build", json!("b")), ("commit", json!(null)), ("corpus_sha256", json!("c"))] {
                fill(&mut doc, key, default);
            }
            for (key, default) in [("db", json!("memdb")), ("jobs", json!(1)), ("seconds", json!(0.0))] {
                fill(&mut doc["summary"], key, default);
            }
            for line in doc["worlds"].as_array_mut().into_iter().flatten() {
                let world = report::WorldDoc {
                    config: vec![],
                    counters: Default::default(),
                    db: "memdb".into(),
                    defects: vec![],
                    fingerprint: "0000000000000000".into(),
                    repro: None,
                    scenario: "tiny".into(),
                    schema: report::WORLD_SCHEMA.into(),
                    seed: 1,
                    settled_early: false,
                    verdict: Verdict::Pass,
                    violations: vec![],
                };
                let Value::Object(fields) = serde_json::to_value(world).unwrap() else { unreachable!() };
                for (key, default) in fields.into_iter().chain([
                    ("entry".to_owned(), json!("tiny 1")),
                    ("line".to_owned(), json!(1)),
                    ("deterministic".to_owned(), json!(true)),
                    ("rerun_fingerprint".to_owned(), json!("0000000000000000")),
                    ("seconds".to_owned(), json!(0.0)),
                ]) {
                    fill(line, &key, default);
                }
            }
        }
        doc
    }

    #[test]
    fn shards_partition_seeds_by_the_seed_alone() {
        assert_eq!(Shard::parse("0/1"), Ok(Shard::ALL));
        for bad in ["1/1", "x/2", "2", "0/0", "3/2", "-1/4", "0/1000001"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        for (start, end, n) in [(1u64, 100u64, 7u64), (5, 5, 3), (0, 31, 32), (u64::MAX - 10, u64::MAX, 4)] {
            let mut all = Vec::new();
            for index in 0..n {
                let shard = Shard { index, count: n };
                let (first, k) = shard.seeds(start, end);
                for j in 0..k {
                    let seed = first + j * n;
                    assert!(shard.owns(seed) && (start..=end).contains(&seed));
                    all.push(seed);
                }
            }
            all.sort_unstable();
            assert_eq!(all, (start..=end).collect::<Vec<_>>(), "{start}..={end} over {n}");
        }
    }

    /// A shard whose summary was edited (a count that is not a whole number, counts that do not
    /// add up, a failure line missing, a verdict its counts forbid) is refused, not summed.
    #[test]
    fn a_tampered_summary_is_malformed() {
        let good = json!({
            "schema": report::SWEEP_SCHEMA,
            "start": 5,
            "seeds": 3,
            "shard": {"index": 0, "count": 1},
            "summary": {"verdict": "fail", "worlds": 3, "passed": 2, "failed": 1, "errors": 0},
            "failures": [{"seed": 7}],
        });
        let merged = |doc: &Value| merge(&[ShardReport { from: "r".into(), doc: full(doc.clone()) }]);
        assert!(merged(&good).is_ok());
        let edits: [(&str, Value); 7] = [
            ("/summary/passed", json!(-1)),
            ("/summary/passed", json!(1.5)),
            ("/summary/passed", json!(u64::MAX)),
            ("/summary/worlds", json!(4)),
            ("/summary/verdict", json!("pass")),
            ("/summary/verdict", json!("maybe")),
            ("/failures", json!([])),
        ];
        for (pointer, value) in edits {
            let mut doc = good.clone();
            *doc.pointer_mut(pointer).unwrap() = value.clone();
            assert!(matches!(merged(&doc), Err(MergeError::Malformed(..))), "{pointer} = {value}");
        }
    }

    /// A report's shard is held to the bounds of `--shard`: a forged count is refused at once,
    /// not answered with a list of every shard that is missing.
    #[test]
    fn a_report_claiming_more_shards_than_allowed_is_malformed() {
        let report = |count: u64| ShardReport {
            from: "r".into(),
            doc: full(json!({
                "schema": report::SWEEP_SCHEMA,
                "start": 0,
                "seeds": 1,
                "shard": {"index": 0, "count": count},
                "summary": {"verdict": "pass", "worlds": 1, "passed": 1, "failed": 0, "errors": 0},
                "failures": [],
            })),
        };
        assert!(matches!(merge(&[report(2)]), Err(MergeError::Missing(..))));
        for count in [MAX_SHARDS + 1, u64::MAX] {
            assert!(matches!(merge(&[report(count)]), Err(MergeError::Malformed(..))), "{count}");
        }
    }

    /// A failure's repro is recomputed from the run's description, never copied on trust: the
    /// command fencesim prints for it merges, anything else (a command with more after it, another
    /// seed's, one writing files) is refused naming the shard.
    #[test]
    fn a_shards_repro_must_be_the_command_fencesim_prints() {
        let with = |repro: &str| {
            let mut reports = shards_of_thirty();
            reports[1].doc["failures"][0]["repro"] = json!(repro);
            merge(&reports)
        };
        let merged = with("fencesim run --scenario swarm --seed 4 --trace").unwrap();
        assert_eq!(merged.doc["failures"][0]["repro"], "fencesim run --scenario swarm --seed 4 --trace");
        for forged in [
            "fencesim run --scenario swarm --seed 4 --trace; rm -rf ~",
            "fencesim run --scenario swarm --seed 5 --trace",
            "fencesim run --scenario swarm --seed 4 --trace --keep-db ~/.bashrc --force",
        ] {
            match with(forged) {
                Err(MergeError::Malformed(from, why)) => {
                    assert!(from == "s1/sweep.json" && why.contains("repro"), "{why}")
                }
                other => panic!("{forged}: merged: {other:?}"),
            }
        }
    }

    /// Three shards of seeds 1..=30 as a real sweep writes them: shard I owns the ten seeds equal
    /// to I modulo 3, shard 1's seed 4 failed, and each saw `crash-at-meta`.
    fn shards_of_thirty() -> Vec<ShardReport> {
        (0..3u64)
            .map(|index| {
                let failures = if index == 1 { json!([{"seed": 4, "violations": 1}]) } else { json!([]) };
                let failed = u64::from(index == 1);
                ShardReport {
                    from: format!("s{index}/sweep.json"),
                    doc: full(json!({
                        "schema": report::SWEEP_SCHEMA,
                        "start": 1,
                        "seeds": 30,
                        "shard": {"index": index, "count": 3},
                        "summary": {"verdict": if failed == 1 { "fail" } else { "pass" }, "worlds": 10,
                            "passed": 10 - failed, "failed": failed, "errors": 0, "virtual_ms": 1000},
                        "failures": failures,
                        "coverage": [{"event": "crash-at-meta", "worlds": 2, "total": 5}],
                    })),
                }
            })
            .collect()
    }

    /// What a shard owns is recomputed from `start`, `seeds` and `I/N`, and every shard is held
    /// to it: fewer (or more) worlds than it owns, a failure line for another shard's seed or for
    /// a seed outside the run, a seed named twice, saturated totals and coverage rows its worlds
    /// could not have written are each refused, naming the shard's file.
    #[test]
    fn a_shard_is_held_to_the_seeds_it_owns() {
        let doc = merge(&shards_of_thirty()).unwrap().doc;
        assert_eq!((doc["summary"]["worlds"].as_u64(), doc["summary"]["verdict"].as_str()), (Some(30), Some("fail")));
        assert_eq!(doc["coverage"], json!([{"event": "crash-at-meta", "worlds": 6, "total": 15}]));
        let forgeries: [(usize, &str, Value); 13] = [
            // The issue's forgery: one shard's worlds and passes set to 0.
            (0, "/summary", json!({"verdict": "pass", "worlds": 0, "passed": 0, "failed": 0, "errors": 0})),
            (0, "/summary", json!({"verdict": "pass", "worlds": 11, "passed": 11, "failed": 0, "errors": 0})),
            // Seed 5 is shard 2's; seed 31 and seed 0 are outside 1..=30.
            (1, "/failures/0/seed", json!(5)),
            (1, "/failures/0/seed", json!(31)),
            (0, "/failures", json!([{"seed": 3}])),
            (1, "/failures", json!([{"seed": 4}, {"seed": 4}])),
            (1, "/failures/0/seed", json!("4")),
            (0, "/summary/virtual_ms", json!(u64::MAX)),
            (0, "/coverage/0/total", json!(u64::MAX)),
            (0, "/coverage/0/worlds", json!(11)),
            (0, "/coverage/0/worlds", json!(0)),
            (0, "/coverage/0/event", json!("made-up-event")),
            (0, "/coverage", json!([{"event": "crash-at-meta", "worlds": 3, "total": 2}])),
        ];
        for (shard, pointer, value) in forgeries {
            let mut reports = shards_of_thirty();
            *reports[shard].doc.pointer_mut(pointer).unwrap() = value.clone();
            match merge(&reports) {
                Err(MergeError::Malformed(from, why)) => assert!(from.starts_with('s'), "{pointer} = {value}: {why}"),
                other => panic!("{pointer} = {value}: merged: {other:?}"),
            }
        }
        // A coverage total of u64::MAX in two shards overflows the sum: refused, not saturated.
        let mut reports = shards_of_thirty();
        for r in &mut reports[..2] {
            r.doc["coverage"][0]["total"] = json!(u64::MAX - 1);
        }
        assert!(matches!(merge(&reports), Err(MergeError::Malformed(from, _)) if from == "s1/sweep.json"));
        // Sweeps of different seeds are not one run.
        let mut reports = shards_of_thirty();
        reports[2].doc["seeds"] = json!(31);
        assert!(matches!(merge(&reports), Err(MergeError::Mismatch(..))));
    }

    /// Shards are one run only if they ran the same thing with the same build: another scenario
    /// file's content, another store, another corpus's content under one name or another build
    /// is refused naming the field that differs. `commit` (the folder a shard ran in, null
    /// outside a checkout) is not what ran: shards of one build may differ in it.
    #[test]
    fn shards_must_share_what_ran_and_the_build() {
        for (pointer, value) in [("/scenario_sha256", "other"), ("/db", "file"), ("/build", "other")] {
            let mut reports = shards_of_thirty();
            *reports[2].doc.pointer_mut(pointer).unwrap() = json!(value);
            match merge(&reports) {
                Err(MergeError::Mismatch(_, from, what)) => {
                    assert_eq!((from.as_str(), what.as_str()), ("s2/sweep.json", &pointer[1..]))
                }
                other => panic!("{pointer}: {other:?}"),
            }
        }
        let mut reports = shards_of_thirty();
        reports[0].doc["commit"] = json!("0".repeat(40));
        assert!(merge(&reports).is_ok(), "a commit is not a build");
        let replay = |index: u64| ShardReport {
            from: format!("r{index}/replay.json"),
            doc: full(json!({
                "schema": report::REPLAY_SCHEMA,
                "corpus": "c.txt",
                "entries": 2,
                "shard": {"index": index, "count": 2},
                "summary": {"verdict": "pass", "worlds": 1, "passed": 1, "failed": 0, "nondeterministic": 0},
                "worlds": [{"index": index}],
            })),
        };
        assert!(merge(&[replay(0), replay(1)]).is_ok());
        for (pointer, value, what) in
            [("/corpus_sha256", "other", "corpus_sha256"), ("/summary/db", "file", "db"), ("/build", "other", "build")]
        {
            let mut second = replay(1);
            *second.doc.pointer_mut(pointer).unwrap() = json!(value);
            match merge(&[replay(0), second]) {
                Err(MergeError::Mismatch(_, _, differs)) => assert_eq!(differs, what, "{pointer}"),
                other => panic!("{pointer}: {other:?}"),
            }
        }
        let mut old = replay(1);
        old.doc["schema"] = json!("fencesim.replay/1");
        let e = merge(&[replay(0), old]).expect_err("another version");
        assert!(
            e.to_string().contains("schema 'fencesim.replay/1'") && e.to_string().contains("run the shard again"),
            "{e}"
        );
    }

    /// A replay shard owns the corpus entries whose index is I modulo N: it must hold exactly
    /// those worlds, each once, and as many failure lines as its summary counts.
    #[test]
    fn a_replay_shard_is_held_to_the_entries_it_owns() {
        let shard = |index: u64, worlds: Value, passed: u64, failed: u64| ShardReport {
            from: format!("r{index}/replay.json"),
            doc: full(json!({
                "schema": report::REPLAY_SCHEMA,
                "corpus": "c.txt",
                "entries": 5,
                "shard": {"index": index, "count": 2},
                "summary": {"verdict": if failed > 0 { "fail" } else { "pass" }, "worlds": passed + failed,
                    "passed": passed, "failed": failed, "nondeterministic": 0},
                "worlds": worlds,
            })),
        };
        let w = |index: u64, failure: Option<&str>| json!({"index": index, "failure": failure});
        let even = || shard(0, json!([w(0, None), w(2, None), w(4, None)]), 3, 0);
        let odd = |worlds: Value, passed, failed| shard(1, worlds, passed, failed);
        assert!(merge(&[even(), odd(json!([w(1, None), w(3, Some("x"))]), 1, 1)]).is_ok());
        for (worlds, passed, failed) in [
            (json!([w(1, None)]), 1, 0),
            (json!([w(1, None), w(2, None)]), 2, 0),
            (json!([w(1, None), w(1, None)]), 2, 0),
            (json!([w(1, None), w(5, None)]), 2, 0),
            (json!([w(1, None), w(3, None)]), 1, 1),
            (json!([w(1, Some("x")), w(3, Some("y"))]), 1, 1),
        ] {
            let report = odd(worlds.clone(), passed, failed);
            assert!(matches!(merge(&[even(), report]), Err(MergeError::Malformed(..))), "{worlds}");
        }
    }
}
