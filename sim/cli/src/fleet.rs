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

use crate::report::{self, Case};

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
        n % self.count == self.index
    }

    /// The seeds of `start..=end` this shard owns: the first, and how many (stride `count`).
    pub fn seeds(self, start: u64, end: u64) -> (u64, u64) {
        let offset = (self.index + self.count - start % self.count) % self.count;
        match start.checked_add(offset) {
            Some(first) if first <= end => (first, (end - first) / self.count + 1),
            _ => (start, 0),
        }
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

fn shard_of(r: &ShardReport) -> Result<Shard, MergeError> {
    let s = &r.doc["shard"];
    match (s["index"].as_u64(), s["count"].as_u64()) {
        (Some(index), Some(count)) if index < count && count <= MAX_SHARDS => Ok(Shard { index, count }),
        _ => Err(MergeError::Malformed(r.from.clone(), "no valid shard".into())),
    }
}

/// A shard's summary, held to what a real sweep or replay writes: every count a whole number,
/// the counts adding up to its worlds, one line per failing or erring world, and a verdict its
/// counts allow. A report edited by hand (or written by something else) is refused, not summed.
fn check_summary(r: &ShardReport, schema: &str) -> Result<(), MergeError> {
    let malformed = |why: String| Err(MergeError::Malformed(r.from.clone(), why));
    let s = &r.doc["summary"];
    let mut counts = [0u64; 5];
    for (n, key) in counts.iter_mut().zip(["worlds", "passed", "failed", "nondeterministic", "errors"]) {
        *n = match &s[key] {
            Value::Null if key != "worlds" => 0,
            v => match v.as_u64() {
                Some(n) => n,
                None => return malformed(format!("summary.{key} is not a count")),
            },
        };
    }
    let [worlds, passed, failed, nondeterministic, errors] = counts;
    let bad = failed.checked_add(nondeterministic);
    let judged =
        passed.checked_add(failed).and_then(|n| n.checked_add(nondeterministic)).and_then(|n| n.checked_add(errors));
    if judged != Some(worlds) {
        return malformed(format!("its summary's counts do not add up to its {worlds} worlds"));
    }
    let (array, lines) =
        if schema == report::SWEEP_SCHEMA { ("failures", failed + errors) } else { ("worlds", worlds) };
    if r.doc[array].as_array().map(Vec::len) != usize::try_from(lines).ok() {
        return malformed(format!("{array} does not hold the {lines} line(s) its summary counts"));
    }
    let allowed = match s["verdict"].as_str() {
        // A shard's own coverage verdict: the fleet's coverage is judged again at the merge.
        Some("pass" | "inconclusive") => errors == 0 && bad == Some(0),
        Some("fail") => errors == 0 && bad != Some(0),
        Some("error") => true,
        _ => false,
    };
    if !allowed {
        return malformed(format!("its verdict {} does not match its counts", s["verdict"]));
    }
    Ok(())
}

/// What a shard owns, recomputed from the run's own description (a sweep's `start` and `seeds`, a
/// replay's `entries`) and the shard's `I/N`, and the shard held to it: exactly as many worlds as
/// it owns, one line per owned item at most (a failure line for another shard's seed, or a seed
/// named twice, is refused), and coverage rows a shard of that many worlds could have written
/// (known events only, each seen in at least one and at most all of its worlds, at least once per
/// world it names). A shard that ran fewer worlds than it owns cannot speak for the rest.
fn check_owned(r: &ShardReport, schema: &str, shard: Shard) -> Result<(), MergeError> {
    let malformed = |why: String| Err(MergeError::Malformed(r.from.clone(), why));
    let (owned, array, key) = if schema == report::SWEEP_SCHEMA {
        let (Some(start), Some(seeds)) = (r.doc["start"].as_u64(), r.doc["seeds"].as_u64()) else {
            return malformed("start or seeds is not a count".into());
        };
        let Some(end) = seeds.checked_sub(1).and_then(|n| start.checked_add(n)) else {
            return malformed(format!("start {start} and seeds {seeds} name no seeds"));
        };
        (shard.seeds(start, end).1, "failures", "seed")
    } else {
        let Some(entries) = r.doc["entries"].as_u64().filter(|n| *n > 0) else {
            return malformed("entries is not a count of at least 1".into());
        };
        (shard.seeds(0, entries - 1).1, "worlds", "index")
    };
    let owns = |n: u64| -> bool {
        if schema == report::SWEEP_SCHEMA {
            let (start, seeds) = (r.doc["start"].as_u64().unwrap_or(0), r.doc["seeds"].as_u64().unwrap_or(0));
            shard.owns(n) && n >= start && n - start < seeds
        } else {
            shard.owns(n) && n < r.doc["entries"].as_u64().unwrap_or(0)
        }
    };
    let worlds = r.doc["summary"]["worlds"].as_u64().unwrap_or(0);
    if worlds != owned {
        return malformed(format!("shard {shard} owns {owned} world(s), its summary counts {worlds}"));
    }
    let mut named = std::collections::BTreeSet::new();
    for line in r.doc[array].as_array().into_iter().flatten() {
        let Some(n) = line[key].as_u64() else {
            return malformed(format!("a line of {array} has no {key}"));
        };
        if !owns(n) {
            return malformed(format!("{array} names {key} {n}, which shard {shard} does not own"));
        }
        if !named.insert(n) {
            return malformed(format!("{array} names {key} {n} twice"));
        }
    }
    if schema == report::REPLAY_SCHEMA {
        let s = &r.doc["summary"];
        let bad = s["failed"].as_u64().unwrap_or(0).saturating_add(s["nondeterministic"].as_u64().unwrap_or(0));
        let lines = r.doc["worlds"].as_array().into_iter().flatten().filter(|w| !w["failure"].is_null()).count();
        if u64::try_from(lines).ok() != Some(bad) {
            return malformed(format!("{lines} of its worlds have a failure, its summary counts {bad}"));
        }
    }
    check_coverage(r, worlds)
}

/// Coverage rows a shard of `worlds` worlds could have written: known events only, each named
/// once, seen in at least one and at most all of its worlds, at least once per world it names.
fn check_coverage(r: &ShardReport, worlds: u64) -> Result<(), MergeError> {
    let malformed = |why: String| Err(MergeError::Malformed(r.from.clone(), why));
    let known = fencesim_sim::coverage::events();
    let mut events = std::collections::BTreeSet::new();
    for row in r.doc["coverage"].as_array().into_iter().flatten() {
        let event = row["event"].as_str().unwrap_or_default();
        if !known.iter().any(|e| e == event) {
            return malformed(format!("coverage names an unknown event {}", row["event"]));
        }
        if !events.insert(event) {
            return malformed(format!("coverage names {event} twice"));
        }
        match (row["worlds"].as_u64(), row["total"].as_u64()) {
            (Some(seen), Some(total)) if seen >= 1 && seen <= worlds && total >= seen => {}
            _ => {
                return malformed(format!(
                    "coverage row {event} ({} worlds, {} total) is not one its {worlds} world(s) could write",
                    row["worlds"], row["total"]
                ));
            }
        }
    }
    if !r.doc["coverage"].is_null() && !r.doc["coverage"].is_array() {
        return malformed("coverage is not a table".into());
    }
    Ok(())
}

/// Every shard of one run: same schema, run description and commit as the first, each holding
/// to what it owns, and together each shard of `I/N` exactly once.
fn check_shards(reports: &[ShardReport], schema: &str, keys: &[&str]) -> Result<(), MergeError> {
    let first = reports.first().ok_or(MergeError::Empty)?;
    let count = shard_of(first)?.count;
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    let mut overlaps = Vec::new();
    for r in reports {
        if r.doc["schema"] != first.doc["schema"] {
            return Err(MergeError::Mismatch(first.from.clone(), r.from.clone(), "schema".into()));
        }
        for key in keys.iter().copied().chain(["commit"]) {
            if r.doc[key] != first.doc[key] {
                return Err(MergeError::Mismatch(first.from.clone(), r.from.clone(), key.into()));
            }
        }
        check_summary(r, schema)?;
        let shard = shard_of(r)?;
        check_owned(r, schema, shard)?;
        if shard.count != count {
            return Err(MergeError::Mismatch(first.from.clone(), r.from.clone(), "shard count".into()));
        }
        if let Some(other) = seen.insert(shard.index, &r.from) {
            overlaps.push(format!("{shard} in {other} and {}", r.from));
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

/// Merge shard reports (all sweeps or all replays of the same run) into one report and its
/// JUnit text.
pub fn merge(reports: &[ShardReport]) -> Result<(Value, String), MergeError> {
    let first = reports.first().ok_or(MergeError::Empty)?;
    let schema = first.doc["schema"].as_str().unwrap_or_default().to_owned();
    let keys: &[&str] = match schema.as_str() {
        report::SWEEP_SCHEMA => &["scenario", "source", "db", "defects", "start", "seeds", "aims"],
        report::REPLAY_SCHEMA => &["corpus", "entries"],
        other => return Err(MergeError::Malformed(first.from.clone(), format!("schema '{other}'"))),
    };
    check_shards(reports, &schema, keys)?;
    let mut doc = first.doc.clone();
    doc["shard"] = Shard::ALL.json();
    // Each shard's counts are bounded by what it owns, but a total it claims (virtual time, a
    // coverage total) is not: a sum that overflows is a forged report, never a saturated count.
    let mut sums = BTreeMap::new();
    for key in ["worlds", "passed", "failed", "nondeterministic", "errors", "virtual_ms"] {
        let mut total = 0u64;
        for r in reports {
            let n = r.doc["summary"][key].as_u64().unwrap_or(0);
            total = total
                .checked_add(n)
                .ok_or_else(|| MergeError::Malformed(r.from.clone(), format!("summary.{key} overflows when summed")))?;
        }
        sums.insert(key, total);
    }
    let sum = |key: &str| sums[key];
    let seconds: f64 = reports.iter().filter_map(|r| r.doc["summary"]["seconds"].as_f64()).sum();
    let jobs = reports.iter().filter_map(|r| r.doc["summary"]["jobs"].as_u64()).max().unwrap_or(1);
    let summary = &mut doc["summary"];
    summary["seconds"] = json!(seconds);
    summary["jobs"] = json!(jobs);
    for key in ["worlds", "passed", "failed", "nondeterministic", "errors", "virtual_ms"] {
        if !summary[key].is_null() {
            summary[key] = json!(sum(key));
        }
    }
    let bad = sum("failed") + sum("nondeterministic");
    // A shard's harness error (a world that could not run, a bundle that could not be written)
    // makes the whole run's verdict an error.
    let erred = reports.iter().any(|r| r.doc["summary"]["verdict"] == "error");
    // A shard's coverage verdict is its own: the fleet's is judged again (`missing_coverage`).
    if let Some(summary) = summary.as_object_mut() {
        summary.remove("missing_coverage");
    }
    summary["verdict"] = json!(if erred {
        "error"
    } else if bad == 0 {
        "pass"
    } else {
        "fail"
    });
    // The per-item arrays, concatenated and put back in the unsharded order.
    let (array, order) = if schema == report::SWEEP_SCHEMA { ("failures", "seed") } else { ("worlds", "index") };
    let mut items: Vec<Value> =
        reports.iter().flat_map(|r| r.doc[array].as_array().cloned().unwrap_or_default()).collect();
    items.sort_by_key(|v| v[order].as_u64().unwrap_or(u64::MAX));
    doc[array] = Value::Array(items);
    if !doc["coverage"].is_null() {
        doc["coverage"] = summed_coverage(reports)?;
    }
    let junit = junit_of(&doc);
    Ok((doc, junit))
}

/// Coverage rows (event, worlds, total), summed per event in event order.
fn summed_coverage(reports: &[ShardReport]) -> Result<Value, MergeError> {
    let mut coverage: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in reports {
        for row in r.doc["coverage"].as_array().into_iter().flatten() {
            let event = row["event"].as_str().unwrap_or_default();
            let entry = coverage.entry(event.to_owned()).or_default();
            entry.0 += row["worlds"].as_u64().unwrap_or(0);
            entry.1 = entry.1.checked_add(row["total"].as_u64().unwrap_or(0)).ok_or_else(|| {
                MergeError::Malformed(r.from.clone(), format!("coverage total of {event} overflows when summed"))
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
        let merged = |doc: &Value| merge(&[ShardReport { from: "r".into(), doc: doc.clone() }]);
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
            doc: json!({
                "schema": report::SWEEP_SCHEMA,
                "start": 0,
                "seeds": 1,
                "shard": {"index": 0, "count": count},
                "summary": {"verdict": "pass", "worlds": 1, "passed": 1, "failed": 0, "errors": 0},
                "failures": [],
            }),
        };
        assert!(matches!(merge(&[report(2)]), Err(MergeError::Missing(..))));
        for count in [MAX_SHARDS + 1, u64::MAX] {
            assert!(matches!(merge(&[report(count)]), Err(MergeError::Malformed(..))), "{count}");
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
                    doc: json!({
                        "schema": report::SWEEP_SCHEMA,
                        "start": 1,
                        "seeds": 30,
                        "shard": {"index": index, "count": 3},
                        "summary": {"verdict": if failed == 1 { "fail" } else { "pass" }, "worlds": 10,
                            "passed": 10 - failed, "failed": failed, "errors": 0, "virtual_ms": 1000},
                        "failures": failures,
                        "coverage": [{"event": "crash-at-meta", "worlds": 2, "total": 5}],
                    }),
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
        let (doc, _) = merge(&shards_of_thirty()).unwrap();
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

    /// A replay shard owns the corpus entries whose index is I modulo N: it must hold exactly
    /// those worlds, each once, and as many failure lines as its summary counts.
    #[test]
    fn a_replay_shard_is_held_to_the_entries_it_owns() {
        let shard = |index: u64, worlds: Value, passed: u64, failed: u64| ShardReport {
            from: format!("r{index}/replay.json"),
            doc: json!({
                "schema": report::REPLAY_SCHEMA,
                "corpus": "c.txt",
                "entries": 5,
                "shard": {"index": index, "count": 2},
                "summary": {"verdict": if failed > 0 { "fail" } else { "pass" }, "worlds": passed + failed,
                    "passed": passed, "failed": failed, "nondeterministic": 0},
                "worlds": worlds,
            }),
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
