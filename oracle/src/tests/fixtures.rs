//! The oracle tests' shared fixtures: the hand-written clean history (`clean`), the row builder
//! that tampers with it (`H`), journal entries and leases by name, and the assertions every
//! checker's tests make (`failing`, `only`, `assert_rows`, `assert_says`).

use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, JournalEntry, Lease, RunId, RunMeta, RunStatus, Seq};
use serde_json::json;

use crate::history::{
    Call, CallOutcome, Effect, EffectKind, Event, Payload, Role, Row, RunState, SegmentError, SegmentResult, Snapshot,
    Surface,
};
use crate::{OracleConfig, Scope, Violation, check};

pub(super) const CFG: OracleConfig =
    OracleConfig { ttl_ms: 1_000, planned: Vec::new(), scope: Scope::Engine, scripts: Vec::new() };

pub(super) fn lease(run: &str, owner: &str, epoch: i64) -> Lease {
    Lease { run: RunId::new(run), owner: owner.to_owned(), epoch: Epoch(epoch) }
}

pub(super) fn running(seq: i64) -> JournalEntry {
    JournalEntry::new(seq, "agent", "running").with("key", json!("ask"))
}

pub(super) fn terminal(seq: i64, running: i64) -> JournalEntry {
    let mut entry = JournalEntry::new(seq, "agent", "ok").with("key", json!("ask")).with("value", json!("answer"));
    entry.ref_seq = Some(Seq(running));
    entry
}

pub(super) fn suspension(seq: i64) -> JournalEntry {
    JournalEntry::new(seq, "approval", "suspended").with("key", json!("sign-off"))
}

pub(super) fn resolution(seq: i64, target: i64) -> JournalEntry {
    JournalEntry::new(seq, "resolution", "ok")
        .with("resolution", json!({ "target": target }))
        .with("value", json!(true))
}

pub(super) fn settle(seq: i64, status: RunStatus, segment: u32) -> JournalEntry {
    JournalEntry::new(seq, "decision", "ok")
        .with("value", json!({ "decisionType": "run_settle", "runStatus": status.as_str(), "segment": segment }))
}

/// A hand-written history: rows with their indexes, and named rows to tamper with.
#[derive(Clone, Default)]
pub(super) struct H {
    pub(super) rows: Vec<Row>,
    pub(super) marks: BTreeMap<&'static str, usize>,
}

/// The roles of these tests' node labels, the way a world names its nodes (`w1`, `client`,
/// `operator.1`, `admin`).
pub(super) fn role_of(node: &str) -> Role {
    match node.split('.').next().unwrap_or_default() {
        "admin" => Role::Admin,
        "client" => Role::Client,
        "operator" => Role::Operator,
        "sweeper" => Role::Sweeper,
        "world" => Role::Harness,
        name if name.starts_with('w') => Role::Worker,
        _ => Role::Harness,
    }
}

impl H {
    pub(super) fn push(&mut self, node: &str, event: Event) -> &mut Self {
        let index = self.rows.len();
        self.rows.push(Row { index, at_ms: index as i64 * 10, node: node.to_owned(), role: role_of(node), event });
        self
    }

    /// Name the last row pushed.
    pub(super) fn mark(&mut self, name: &'static str) -> &mut Self {
        self.marks.insert(name, self.rows.len() - 1);
        self
    }

    pub(super) fn at(&self, name: &str) -> usize {
        self.marks[name]
    }

    #[allow(clippy::too_many_arguments, reason = "one row's fields")]
    pub(super) fn call(
        &mut self,
        node: &str,
        clock_ms: i64,
        surface: Surface,
        target: &str,
        lease: Option<&Lease>,
        payload: Payload,
        outcome: CallOutcome,
    ) -> &mut Self {
        let blob = matches!(surface, Surface::PutBlob | Surface::DeleteBlob);
        let call = Call {
            clock_ms,
            lease: lease.cloned(),
            owner: None,
            counter: 0,
            surface,
            run: RunId::of_ref(target),
            blob_ref: blob.then(|| target.to_owned()),
            payload,
            outcome,
            read: None,
        };
        self.push(node, Event::Call(call))
    }

    pub(super) fn acquire(&mut self, node: &str, granted: &Lease, clock: i64) -> &mut Self {
        let run = granted.run.to_string();
        self.call(node, clock, Surface::Acquire, &run, Some(granted), Payload::None, CallOutcome::Ok);
        self.call_mut_last().owner = Some(granted.owner.clone());
        self
    }

    pub(super) fn acquire_held(&mut self, node: &str, owner: &str, clock: i64, holder: &Lease) -> &mut Self {
        let held = CallOutcome::HeldBy { owner: holder.owner.clone(), epoch: holder.epoch };
        let run = holder.run.to_string();
        self.call(node, clock, Surface::Acquire, &run, None, Payload::None, held);
        self.call_mut_last().owner = Some(owner.to_owned());
        self
    }

    pub(super) fn append(&mut self, node: &str, l: &Lease, clock: i64, entry: JournalEntry) -> &mut Self {
        let run = l.run.to_string();
        self.call(node, clock, Surface::Append, &run, Some(l), Payload::Entry(entry), CallOutcome::Ok)
    }

    pub(super) fn put_meta(
        &mut self,
        node: &str,
        l: &Lease,
        clock: i64,
        status: RunStatus,
        segments: u32,
    ) -> &mut Self {
        let meta = RunMeta::new(l.run.clone(), status).with_segments(segments);
        let run = l.run.to_string();
        self.call(node, clock, Surface::PutMeta, &run, Some(l), Payload::Meta(meta), CallOutcome::Ok)
    }

    pub(super) fn put_blob(&mut self, node: &str, l: &Lease, clock: i64, blob_ref: &str, bytes: &[u8]) -> &mut Self {
        let payload = Payload::Blob(bytes.to_vec());
        self.call(node, clock, Surface::PutBlob, blob_ref, Some(l), payload, CallOutcome::Ok)
    }

    pub(super) fn lease_call(&mut self, node: &str, surface: Surface, l: &Lease, clock: i64) -> &mut Self {
        let run = l.run.to_string();
        self.call(node, clock, surface, &run, Some(l), Payload::None, CallOutcome::Ok)
    }

    pub(super) fn effect(&mut self, node: &str, kind: EffectKind, l: &Lease, running: i64, n: u32) -> &mut Self {
        let effect = Effect { kind, run: l.run.clone(), epoch: Some(l.epoch), running: Seq(running), n };
        self.push(node, Event::Effect(effect))
    }

    pub(super) fn outcome(&mut self, node: &str, run: &str, result: &str) -> &mut Self {
        let result = match result.strip_prefix("err:") {
            Some("crashed") => SegmentResult::Failed(SegmentError::Crashed),
            Some("segment-live") => SegmentResult::Failed(SegmentError::SegmentLive),
            Some("binding") => SegmentResult::Failed(SegmentError::Binding),
            Some("store") => SegmentResult::Failed(SegmentError::Store),
            Some(other) => panic!("no test outcome err:{other}"),
            None => SegmentResult::Reported(RunStatus::parse(result).expect("a run status")),
        };
        self.push(node, Event::Outcome { run: RunId::new(run), result })
    }

    pub(super) fn call_mut_last(&mut self) -> &mut Call {
        let last = self.rows.len() - 1;
        self.call_at(last)
    }

    pub(super) fn call_at(&mut self, pos: usize) -> &mut Call {
        match &mut self.rows[pos].event {
            Event::Call(call) => call,
            other => panic!("row {pos} is not a call: {other:?}"),
        }
    }

    pub(super) fn call_mut(&mut self, name: &str) -> &mut Call {
        let pos = self.at(name);
        self.call_at(pos)
    }

    /// Insert a row right after the named one (or, with a builder closure, several), shifting
    /// later rows and marks; returns the first inserted row's index.
    pub(super) fn insert_after(&mut self, name: &str, build: impl FnOnce(&mut H)) -> usize {
        let at = self.at(name) + 1;
        let mut extra = H::default();
        build(&mut extra);
        let n = extra.rows.len();
        let tail = self.rows.split_off(at);
        self.rows.extend(extra.rows);
        self.rows.extend(tail);
        for pos in self.marks.values_mut() {
            if *pos >= at {
                *pos += n;
            }
        }
        self.reindex();
        at
    }

    /// Remove the named rows, shifting later rows and marks.
    pub(super) fn remove(&mut self, names: &[&str]) {
        let mut gone: Vec<usize> = names.iter().map(|n| self.at(n)).collect();
        gone.sort_unstable();
        for pos in gone.iter().rev() {
            self.rows.remove(*pos);
        }
        self.marks.retain(|name, _| !names.contains(name));
        for pos in self.marks.values_mut() {
            *pos -= gone.iter().filter(|g| **g < *pos).count();
        }
        self.reindex();
    }

    pub(super) fn reindex(&mut self) {
        for (i, row) in self.rows.iter_mut().enumerate() {
            row.index = i;
            row.at_ms = i as i64 * 10;
        }
    }

    /// What a correct store holds after these rows: accepted mutations applied in row order.
    pub(super) fn store(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for call in self.rows.iter().filter_map(Row::call) {
            let state = snapshot.runs.entry(call.run.clone()).or_default();
            if !call.outcome.is_ok() {
                continue;
            }
            match (&call.payload, &call.blob_ref, call.surface) {
                (Payload::Entry(entry), _, Surface::Append) => {
                    state.journal.push(entry.clone());
                    state.journal.sort_by_key(|e| e.seq);
                }
                (Payload::Meta(meta), _, Surface::PutMeta) => state.meta = Some(meta.clone()),
                (_, _, Surface::Delete) => {
                    *state = RunState { blobs: std::mem::take(&mut state.blobs), ..RunState::default() }
                }
                (Payload::Blob(bytes), Some(r), Surface::PutBlob) => {
                    state.blobs.insert(r.clone(), bytes.clone());
                }
                (_, Some(r), Surface::DeleteBlob) => {
                    state.blobs.remove(r);
                }
                _ => {}
            }
        }
        snapshot
    }
}

pub(super) fn a1() -> Lease {
    lease("r1", "w1.1", 1)
}

pub(super) fn b2() -> Lease {
    lease("r1", "w2.1", 2)
}

pub(super) fn a3() -> Lease {
    lease("r1", "w1.2", 3)
}

/// r1: w1 starts it under e1 and crashes mid-dispatch; w2 takes over under e2 (after the ttl),
/// re-pays the turn, finishes the dispatch and settles suspended; a stale meta write of w1 is
/// refused; w1 resolves and settles ok under e3. r2: created, deleted under its lease (its
/// transcript blob stays), recreated under e2 and settled ok. ttl 1000.
#[allow(
    clippy::too_many_lines,
    reason = "one world's history as a script, row by row; split, it no longer reads as one story"
)]
pub(super) fn clean() -> H {
    use RunStatus::{Ok, Running, Suspended};
    let (a1, b2, a3) = (a1(), b2(), a3());
    let (c1, c2) = (lease("r2", "w2.2", 1), lease("r2", "w2.3", 2));
    let mut h = H::default();
    h.acquire("w1", &a1, 0)
        .mark("grant-e1")
        .put_meta("w1", &a1, 10, Running, 1)
        .append("w1", &a1, 20, running(1))
        .effect("w1", EffectKind::Call, &a1, 1, 1)
        .mark("pay-e1")
        .put_blob("w1", &a1, 30, "r1/ckpt/1", b"turn-1")
        .mark("ckpt-e1")
        .push("w1", Event::Note("crash".into()))
        .outcome("w1", "r1", "err:crashed")
        .acquire_held("w2", "w2.1", 500, &a1)
        .mark("held")
        .acquire("w2", &b2, 1200)
        .mark("grant-e2")
        .put_meta("w2", &b2, 1210, Running, 2)
        .effect("w2", EffectKind::Call, &b2, 1, 1)
        .mark("pay-e2")
        .put_blob("w2", &b2, 1220, "r1/ckpt/1", b"turn-1-again")
        .mark("ckpt-e2")
        .append("w2", &b2, 1230, terminal(2, 1))
        .mark("terminal-1")
        .lease_call("w2", Surface::Renew, &b2, 1500)
        .append("w2", &b2, 1510, suspension(3))
        .append("w2", &b2, 1520, settle(4, Suspended, 2))
        .mark("settle-e2")
        .put_meta("w2", &b2, 1530, Suspended, 2)
        .lease_call("w2", Surface::Release, &b2, 1540)
        .mark("release-e2")
        .outcome("w2", "r1", "suspended")
        .mark("outcome-e2")
        .put_meta("w1", &a1, 1600, Running, 1)
        .mark("stale")
        .acquire("w1", &a3, 3000)
        .mark("grant-e3")
        .append("w1", &a3, 3010, resolution(5, 3))
        .mark("resolution")
        .put_meta("w1", &a3, 3020, Running, 3)
        .mark("meta-running-e3")
        .append("w1", &a3, 3030, settle(6, Ok, 3))
        .mark("settle-e3")
        .put_meta("w1", &a3, 3040, Ok, 3)
        .mark("meta-ok-e3")
        .lease_call("w1", Surface::Release, &a3, 3050)
        .mark("release-e3")
        .outcome("w1", "r1", "ok")
        .mark("outcome-e3")
        .acquire("w2", &c1, 3100)
        .mark("grant-r2-e1")
        .put_meta("w2", &c1, 3110, Running, 1)
        .append("w2", &c1, 3120, running(1))
        .effect("w2", EffectKind::Call, &c1, 1, 1)
        .put_blob("w2", &c1, 3130, "r2/t1", b"transcript")
        .mark("blob-r2")
        .lease_call("w2", Surface::Delete, &c1, 3140)
        .mark("delete-r2")
        .acquire("w2", &c2, 3200)
        .mark("grant-r2-e2")
        .put_meta("w2", &c2, 3210, Running, 1)
        .append("w2", &c2, 3220, running(1))
        .effect("w2", EffectKind::Call, &c2, 1, 1)
        .append("w2", &c2, 3230, terminal(2, 1))
        .append("w2", &c2, 3240, settle(3, Ok, 1))
        .mark("settle-r2")
        .put_meta("w2", &c2, 3250, Ok, 1)
        .lease_call("w2", Surface::Release, &c2, 3260)
        .outcome("w2", "r2", "ok");
    h.call_mut("stale").outcome = CallOutcome::Stale;
    h
}

/// r1's e3 tenure dies mid-append of its `run_settle`, so its settle is indeterminate; a
/// successor under e4 replays the journal, adopts the settle it finds (contracts 3.6) and writes
/// the terminal meta without one of its own, and reports the run ok. Found by an honest engine
/// soak (docs/soak.md). Returns the history and the position of the successor's terminal meta.
pub(super) fn settle_cut_then_adopted() -> (H, usize) {
    let mut h = clean();
    h.remove(&["meta-ok-e3", "release-e3", "outcome-e3"]);
    let pos = h.at("settle-e3");
    h.call_at(pos).outcome = CallOutcome::Indeterminate;
    let a4 = lease("r1", "w2.2", 4);
    let crash = h.insert_after("settle-e3", |x| {
        x.push("w1", Event::Note("crash".into())).outcome("w1", "r1", "err:crashed");
        x.acquire("w2", &a4, 4100).put_meta("w2", &a4, 4110, RunStatus::Running, 4);
        x.put_meta("w2", &a4, 4120, RunStatus::Ok, 4);
        x.lease_call("w2", Surface::Release, &a4, 4130).outcome("w2", "r1", "ok");
    });
    (h, crash + 4)
}

/// The snapshot of [`settle_cut_then_adopted`] when the cut settle landed.
pub(super) fn with_cut_settle(h: &H) -> Snapshot {
    let mut landed = h.store();
    landed.runs.get_mut(&RunId::new("r1")).unwrap().journal.push(settle(6, RunStatus::Ok, 3));
    landed
}

pub(super) fn names(found: &[Violation]) -> BTreeSet<&'static str> {
    found.iter().map(|v| v.checker.name()).collect()
}

/// Check `rows` against `snapshot`: exactly the `expected` checkers fail; returns the
/// violations of the first one.
pub(super) fn failing(h: &H, snapshot: &Snapshot, expected: &[&str]) -> Vec<Violation> {
    let found = check(&h.rows, snapshot, &CFG);
    assert_eq!(names(&found), expected.iter().copied().collect(), "{found:#?}");
    found.into_iter().filter(|v| v.checker.name() == expected[0]).collect()
}

/// The single violation of `checker`, the only checker that fails.
pub(super) fn only(h: &H, snapshot: &Snapshot, checker: &str) -> Violation {
    let mut found = failing(h, snapshot, &[checker]);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0)
}

pub(super) fn assert_rows(v: &Violation, row: Option<usize>, cause: Option<usize>) {
    assert_eq!((v.row, v.cause), (row, cause), "{v:#?}");
}

pub(super) fn assert_says(v: &Violation, text: &str) {
    assert!(v.explanation.contains(text), "expected {text:?} in {:?}", v.explanation);
}

pub(super) fn violations_of(h: &H, checker: &str) -> Vec<Violation> {
    check(&h.rows, &h.store(), &CFG).into_iter().filter(|v| v.checker.name() == checker).collect()
}

/// A fresh tenure of run `run` on node `node`: granted `lease`, boot meta written.
pub(super) fn boot(x: &mut H, node: &str, l: &Lease, clock: i64, segments: u32) {
    x.acquire(node, l, clock).put_meta(node, l, clock + 1, RunStatus::Running, segments);
}
