//! The journal vocabulary: the entries the engine writes (two-phase dispatches, suspensions,
//! resolutions, the `run_settle` decision), the checkpoint ref of a dispatch, the next seq, and
//! the folds the engine and its auditor read a journal back with (`last_run_settle`, `dangling`,
//! `open_suspensions`, `is_unstamped`; contracts 1.3, 1.4, 4.1). One module, so the engine's
//! writers and readers cannot drift apart. The oracle does not use it: its crate does not depend
//! on the engine, and it restates the vocabulary it needs from the contracts
//! (`docs/contracts.md`), so a bug here cannot hide itself from the checkers.

use std::collections::BTreeSet;

use fencesim_store::{JournalEntry, Op, RunId, RunMeta, RunStatus, Seq, StoreError};
use serde_json::{Value, json};

/// Entry kinds the engine writes.
pub mod kind {
    pub const AGENT: &str = "agent";
    pub const EXTERNAL: &str = "external";
    pub const APPROVAL: &str = "approval";
    pub const RESOLUTION: &str = "resolution";
    pub const DECISION: &str = "decision";
}

/// Entry statuses the engine writes.
pub mod status {
    pub const RUNNING: &str = "running";
    pub const OK: &str = "ok";
    pub const ERROR: &str = "error";
    pub const LIMIT: &str = "limit";
    pub const SUSPENDED: &str = "suspended";
    pub const CANCELLED: &str = "cancelled";
}

/// `value.decisionType` of the settle decision.
pub const RUN_SETTLE: &str = "run_settle";

/// The meta field in which a segment that settles a run `suspended` records the journal's length
/// at that moment (only a `suspended` meta carries it). A journal only grows until its run is
/// deleted, and a recreated run starts a meta of its own: while the length is unchanged, the run
/// would only park again, so any worker may leave it alone after an unleased read (E8).
pub const SUSPENDED_AT: &str = "suspended_at";

/// The journal length a `suspended` meta recorded ([`SUSPENDED_AT`]), if any.
pub fn suspended_at(meta: &RunMeta) -> Option<usize> {
    if meta.status != RunStatus::Suspended {
        return None;
    }
    meta.extra.get(SUSPENDED_AT).and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok())
}

/// The checkpoint ref of the dispatch whose running entry is `running` (contracts 1.4).
pub fn checkpoint_ref(run: &RunId, running: Seq) -> String {
    format!("{run}/ckpt/{running}")
}

/// The running entry of a two-phase dispatch, appended before the paid call.
pub fn running(seq: Seq, kind: &str, key: &str) -> JournalEntry {
    JournalEntry::new(seq.0, kind, status::RUNNING).with("key", json!(key))
}

/// The terminal entry of a dispatch: its `ref` is the running entry's seq.
pub fn terminal(seq: Seq, running: Seq, kind: &str, status: &str, key: &str, value: Value) -> JournalEntry {
    let mut entry = JournalEntry::new(seq.0, kind, status).with("key", json!(key)).with("value", value);
    entry.ref_seq = Some(running);
    entry
}

/// A suspension (`external` or `approval`), closed later by a resolution entry.
pub fn suspension(seq: Seq, kind: &str, key: &str) -> JournalEntry {
    JournalEntry::new(seq.0, kind, status::SUSPENDED).with("key", json!(key))
}

/// A resolution closing the suspension at `target`; the first one in journal order wins.
pub fn resolution(seq: Seq, target: Seq, value: Value) -> JournalEntry {
    JournalEntry::new(seq.0, kind::RESOLUTION, status::OK)
        .with("resolution", json!({ "target": target.0 }))
        .with("value", value)
}

/// The settle decision of a segment (contracts 1.3): `segment` is segments-before + 1.
pub fn run_settle(seq: Seq, run_status: RunStatus, segment: u32) -> JournalEntry {
    JournalEntry::new(seq.0, kind::DECISION, status::OK)
        .with("value", json!({ "decisionType": RUN_SETTLE, "runStatus": run_status.as_str(), "segment": segment }))
}

/// The `key` of an entry, if it has one.
pub fn key_of(entry: &JournalEntry) -> Option<&str> {
    entry.extra.get("key").and_then(Value::as_str)
}

/// The `value` of an entry, or null.
pub fn value_of(entry: &JournalEntry) -> Value {
    entry.extra.get("value").cloned().unwrap_or(Value::Null)
}

/// The suspension a resolution entry targets.
pub fn resolution_target(entry: &JournalEntry) -> Option<Seq> {
    if entry.kind != kind::RESOLUTION {
        return None;
    }
    entry.extra.get("resolution")?.get("target")?.as_i64().map(Seq)
}

/// A parsed `run_settle` decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settle {
    pub run_status: RunStatus,
    pub seq: Seq,
    /// The settling segment, when the entry records a well-formed one.
    pub segment: Option<u32>,
}

/// The entry as a settle decision, read defensively: anything malformed is not a settle.
pub fn as_settle(entry: &JournalEntry) -> Option<Settle> {
    if entry.kind != kind::DECISION {
        return None;
    }
    let value = entry.extra.get("value")?;
    if value.get("decisionType")?.as_str()? != RUN_SETTLE {
        return None;
    }
    let run_status = RunStatus::parse(value.get("runStatus")?.as_str()?)?;
    let segment = value.get("segment").and_then(Value::as_u64).and_then(|s| u32::try_from(s).ok());
    Some(Settle { run_status, seq: entry.seq, segment })
}

/// The last settle decision of the journal (contracts 4.1).
pub fn last_run_settle(entries: &[JournalEntry]) -> Option<Settle> {
    entries.iter().rev().find_map(as_settle)
}

/// Running entries no entry refers to through `ref`: dispatches whose terminal never landed.
/// One pass to gather every `ref`, one to filter: linear in the journal's length (an operator's
/// audit reads journals of any length).
pub fn dangling(entries: &[JournalEntry]) -> Vec<Seq> {
    let referred: BTreeSet<Seq> = entries.iter().filter_map(|t| t.ref_seq).collect();
    entries.iter().filter(|e| e.status == status::RUNNING && !referred.contains(&e.seq)).map(|e| e.seq).collect()
}

/// Suspensions no resolution closes, over the whole journal; linear, as [`dangling`].
pub fn open_suspensions(entries: &[JournalEntry]) -> Vec<Seq> {
    let resolved: BTreeSet<Seq> = entries.iter().filter_map(resolution_target).collect();
    entries.iter().filter(|e| e.status == status::SUSPENDED && !resolved.contains(&e.seq)).map(|e| e.seq).collect()
}

/// The seq the next append takes: one past the journal's tail (1 for an empty journal). A tail
/// at the integer limit (or below 0) has no next seq: wrapping around would break the seq guard.
pub fn next_seq(run: &RunId, entries: &[JournalEntry]) -> Result<Seq, StoreError> {
    let tail = entries.last().map_or(0, |e| e.seq.0);
    tail.checked_add(1).filter(|_| tail >= 0).map(Seq).ok_or_else(|| StoreError::Overflow {
        op: Op::Append,
        run: run.clone(),
        what: format!("seq {tail}"),
    })
}

/// A `limit` terminal no settle follows: the run never settled that outcome, so a resume reruns
/// the dispatch live (contracts 5.13, "unstamped limit in a never-settled run").
pub fn is_unstamped(entries: &[JournalEntry], terminal: &JournalEntry) -> bool {
    terminal.status == status::LIMIT && !entries.iter().any(|s| s.seq > terminal.seq && as_settle(s).is_some())
}
