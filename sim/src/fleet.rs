//! Seeds at fleet scale: shards and merged reports. A shard `I/N` (0-based, `0 <= I < N`) owns the
//! seeds (or corpus entries, or kill-matrix items) whose number is `I` modulo `N`, so an item's
//! shard depends on the item and `N` alone, never on the other shards or the machine. Shard
//! reports (`sweep.json` or `replay.json`, each with its `shard`) merge into one report equal to
//! an unsharded run of the same items, apart from wall-clock fields (`seconds`, `jobs`); the JUnit
//! file is written again from the merged JSON. Overlapping or missing shards are refused by name.

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
        Some("pass") => errors == 0 && bad == Some(0),
        Some("fail") => errors == 0 && bad != Some(0),
        Some("error") => true,
        _ => false,
    };
    if !allowed {
        return malformed(format!("its verdict {} does not match its counts", s["verdict"]));
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
        check_summary(r, &schema)?;
        let shard = shard_of(r)?;
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
    let mut doc = first.doc.clone();
    doc["shard"] = Shard::ALL.json();
    let sum = |path: &str| -> u64 {
        reports.iter().filter_map(|r| r.doc["summary"][path].as_u64()).fold(0, u64::saturating_add)
    };
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
    // Coverage rows (event, worlds, total), summed per event in event order.
    if !doc["coverage"].is_null() {
        let mut coverage: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for r in reports {
            for row in r.doc["coverage"].as_array().into_iter().flatten() {
                let entry = coverage.entry(row["event"].as_str().unwrap_or_default().to_owned()).or_default();
                entry.0 += row["worlds"].as_u64().unwrap_or(0);
                entry.1 += row["total"].as_u64().unwrap_or(0);
            }
        }
        doc["coverage"] = crate::coverage::Table(coverage).json();
    }
    let junit = junit_of(&doc);
    Ok((doc, junit))
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
            })
            .collect();
        let s = &doc["summary"];
        cases.push(Case {
            name: format!("{scenario}: {} passed of {} seeds", s["passed"], s["worlds"]),
            seconds: seconds(s),
            failure: None,
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
                "shard": {"index": 0, "count": count},
                "summary": {"verdict": "pass", "worlds": 0, "passed": 0, "failed": 0, "errors": 0},
                "failures": [],
            }),
        };
        assert!(matches!(merge(&[report(2)]), Err(MergeError::Missing(..))));
        for count in [MAX_SHARDS + 1, u64::MAX] {
            assert!(matches!(merge(&[report(count)]), Err(MergeError::Malformed(..))), "{count}");
        }
    }
}
