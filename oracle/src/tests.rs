//! Proof that every checker can fail: one hand-written clean history (two runs, a crash and a
//! takeover, a suspension and its resolution, a delete and a recreate) passes every checker, and
//! for each checker a tampered copy of it (or of its snapshot, or a config planning a run it never
//! starts) makes exactly that checker fail, pointing at the right rows. Rows are built directly,
//! so a test can tamper with any field.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, JournalEntry, JournalStore, Lease, MemoryStore, RunId, RunMeta, RunStatus, Seq};
use serde_json::json;

use super::{
    CHECKERS, MAX_PER_CHECKER, OracleConfig, Scope, Script, ScriptStep, Violation, check, settled_or_waiting,
    store_settled_or_waiting,
};
use crate::history::{
    Call, CallOutcome, Disruption, Effect, EffectKind, Event, Mix, Payload, Request, Role, Row, RunState, SegmentError,
    SegmentResult, Snapshot, Surface,
};

const CFG: OracleConfig =
    OracleConfig { ttl_ms: 1_000, planned: Vec::new(), scope: Scope::Engine, scripts: Vec::new() };

fn lease(run: &str, owner: &str, epoch: i64) -> Lease {
    Lease { run: RunId::new(run), owner: owner.to_owned(), epoch: Epoch(epoch) }
}

fn running(seq: i64) -> JournalEntry {
    JournalEntry::new(seq, "agent", "running").with("key", json!("ask"))
}

fn terminal(seq: i64, running: i64) -> JournalEntry {
    let mut entry = JournalEntry::new(seq, "agent", "ok").with("key", json!("ask")).with("value", json!("answer"));
    entry.ref_seq = Some(Seq(running));
    entry
}

fn suspension(seq: i64) -> JournalEntry {
    JournalEntry::new(seq, "approval", "suspended").with("key", json!("sign-off"))
}

fn resolution(seq: i64, target: i64) -> JournalEntry {
    JournalEntry::new(seq, "resolution", "ok")
        .with("resolution", json!({ "target": target }))
        .with("value", json!(true))
}

fn settle(seq: i64, status: RunStatus, segment: u32) -> JournalEntry {
    JournalEntry::new(seq, "decision", "ok")
        .with("value", json!({ "decisionType": "run_settle", "runStatus": status.as_str(), "segment": segment }))
}

/// A hand-written history: rows with their indexes, and named rows to tamper with.
#[derive(Clone, Default)]
struct H {
    rows: Vec<Row>,
    marks: BTreeMap<&'static str, usize>,
}

/// The roles of these tests' node labels, the way a world names its nodes (`w1`, `client`,
/// `operator.1`, `admin`).
fn role_of(node: &str) -> Role {
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
    fn push(&mut self, node: &str, event: Event) -> &mut Self {
        let index = self.rows.len();
        self.rows.push(Row { index, at_ms: index as i64 * 10, node: node.to_owned(), role: role_of(node), event });
        self
    }

    /// Name the last row pushed.
    fn mark(&mut self, name: &'static str) -> &mut Self {
        self.marks.insert(name, self.rows.len() - 1);
        self
    }

    fn at(&self, name: &str) -> usize {
        self.marks[name]
    }

    #[allow(clippy::too_many_arguments, reason = "one row's fields")]
    fn call(
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

    fn acquire(&mut self, node: &str, granted: &Lease, clock: i64) -> &mut Self {
        let run = granted.run.to_string();
        self.call(node, clock, Surface::Acquire, &run, Some(granted), Payload::None, CallOutcome::Ok);
        self.call_mut_last().owner = Some(granted.owner.clone());
        self
    }

    fn acquire_held(&mut self, node: &str, owner: &str, clock: i64, holder: &Lease) -> &mut Self {
        let held = CallOutcome::HeldBy { owner: holder.owner.clone(), epoch: holder.epoch };
        let run = holder.run.to_string();
        self.call(node, clock, Surface::Acquire, &run, None, Payload::None, held);
        self.call_mut_last().owner = Some(owner.to_owned());
        self
    }

    fn append(&mut self, node: &str, l: &Lease, clock: i64, entry: JournalEntry) -> &mut Self {
        let run = l.run.to_string();
        self.call(node, clock, Surface::Append, &run, Some(l), Payload::Entry(entry), CallOutcome::Ok)
    }

    fn put_meta(&mut self, node: &str, l: &Lease, clock: i64, status: RunStatus, segments: u32) -> &mut Self {
        let meta = RunMeta::new(l.run.clone(), status).with_segments(segments);
        let run = l.run.to_string();
        self.call(node, clock, Surface::PutMeta, &run, Some(l), Payload::Meta(meta), CallOutcome::Ok)
    }

    fn put_blob(&mut self, node: &str, l: &Lease, clock: i64, blob_ref: &str, bytes: &[u8]) -> &mut Self {
        let payload = Payload::Blob(bytes.to_vec());
        self.call(node, clock, Surface::PutBlob, blob_ref, Some(l), payload, CallOutcome::Ok)
    }

    fn lease_call(&mut self, node: &str, surface: Surface, l: &Lease, clock: i64) -> &mut Self {
        let run = l.run.to_string();
        self.call(node, clock, surface, &run, Some(l), Payload::None, CallOutcome::Ok)
    }

    fn effect(&mut self, node: &str, kind: EffectKind, l: &Lease, running: i64, n: u32) -> &mut Self {
        let effect = Effect { kind, run: l.run.clone(), epoch: Some(l.epoch), running: Seq(running), n };
        self.push(node, Event::Effect(effect))
    }

    fn outcome(&mut self, node: &str, run: &str, result: &str) -> &mut Self {
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

    fn call_mut_last(&mut self) -> &mut Call {
        let last = self.rows.len() - 1;
        self.call_at(last)
    }

    fn call_at(&mut self, pos: usize) -> &mut Call {
        match &mut self.rows[pos].event {
            Event::Call(call) => call,
            other => panic!("row {pos} is not a call: {other:?}"),
        }
    }

    fn call_mut(&mut self, name: &str) -> &mut Call {
        let pos = self.at(name);
        self.call_at(pos)
    }

    /// Insert a row right after the named one (or, with a builder closure, several), shifting
    /// later rows and marks; returns the first inserted row's index.
    fn insert_after(&mut self, name: &str, build: impl FnOnce(&mut H)) -> usize {
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
    fn remove(&mut self, names: &[&str]) {
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

    fn reindex(&mut self) {
        for (i, row) in self.rows.iter_mut().enumerate() {
            row.index = i;
            row.at_ms = i as i64 * 10;
        }
    }

    /// What a correct store holds after these rows: accepted mutations applied in row order.
    fn store(&self) -> Snapshot {
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

fn a1() -> Lease {
    lease("r1", "w1.1", 1)
}
fn b2() -> Lease {
    lease("r1", "w2.1", 2)
}
fn a3() -> Lease {
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
fn clean() -> H {
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

fn names(found: &[Violation]) -> BTreeSet<&'static str> {
    found.iter().map(|v| v.checker.name()).collect()
}

/// Check `rows` against `snapshot`: exactly the `expected` checkers fail; returns the
/// violations of the first one.
fn failing(h: &H, snapshot: &Snapshot, expected: &[&str]) -> Vec<Violation> {
    let found = check(&h.rows, snapshot, &CFG);
    assert_eq!(names(&found), expected.iter().copied().collect(), "{found:#?}");
    found.into_iter().filter(|v| v.checker.name() == expected[0]).collect()
}

/// The single violation of `checker`, the only checker that fails.
fn only(h: &H, snapshot: &Snapshot, checker: &str) -> Violation {
    let mut found = failing(h, snapshot, &[checker]);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0)
}

fn assert_rows(v: &Violation, row: Option<usize>, cause: Option<usize>) {
    assert_eq!((v.row, v.cause), (row, cause), "{v:#?}");
}

fn assert_says(v: &Violation, text: &str) {
    assert!(v.explanation.contains(text), "expected {text:?} in {:?}", v.explanation);
}

#[test]
fn clean_history_passes_every_checker() {
    let h = clean();
    let snapshot = h.store();
    assert_eq!(check(&h.rows, &snapshot, &CFG), Vec::new());
    assert!(settled_or_waiting(&snapshot));
    assert_eq!(snapshot.runs[&RunId::new("r2")].blobs.len(), 1, "a deleted run's blob stays (T6)");
}

#[test]
fn checkers_are_listed_once_each_in_order() {
    let listed: Vec<&str> = CHECKERS.iter().map(|c| c.name()).collect();
    assert_eq!(
        listed,
        [
            "no-stale-acceptance",
            "epochs-increasing",
            "one-live-lease",
            "serial-history",
            "journal-seq-order",
            "one-settle-per-segment",
            "meta-not-ahead",
            "no-checkpoint-regression",
            "repay-bound",
            "liveness",
            "honest-outcome",
            "dispatch-identity",
            "silent-replay",
            "renew-loss",
            "justified-repair",
            "healthy-holder",
            "reference-model",
            "observables-monotonic",
            "cancel-asked",
            "failed-write-ends",
            "delete-finished",
            "worker-candidacy",
            "seq-contiguous",
            "typed-rejections",
            "linearizable-reads",
        ]
    );
    assert!(CHECKERS.iter().all(|c| !c.invariant().is_empty() && !c.invariant().contains('\n')));
}

#[test]
fn no_stale_acceptance_catches_a_write_after_release() {
    let mut h = clean();
    h.call_mut("stale").outcome = CallOutcome::Ok;
    // The stale holder's meta also takes the segment count back (2 to 1).
    let v = failing(&h, &h.store(), &["no-stale-acceptance", "observables-monotonic"]).remove(0);
    assert_says(&v, "put_meta on r1 accepted under w1.1@e1, but r1 had no lease row");
    assert_rows(&v, Some(h.at("stale")), None);
}

#[test]
fn no_stale_acceptance_catches_a_superseded_holder() {
    let mut h = clean();
    h.call_mut("meta-running-e3").lease = Some(b2());
    let pos = h.at("meta-running-e3");
    h.rows[pos].node = "w2".into();
    let v = only(&h, &h.store(), "no-stale-acceptance");
    assert_says(&v, "accepted under w2.1@e2, but the live holder was w1.2@e3");
    assert_rows(&v, Some(pos), Some(h.at("grant-e3")));
}

#[test]
fn no_stale_acceptance_catches_an_expired_lease() {
    let mut h = clean();
    h.call_mut("settle-e2").clock_ms = 2_600;
    let v = only(&h, &h.store(), "no-stale-acceptance");
    assert_says(&v, "after it expired (clock 2600 >= expires 2500)");
    assert_rows(&v, Some(h.at("settle-e2")), None);
}

#[test]
fn no_stale_acceptance_catches_a_lease_of_another_run_and_an_unleased_write() {
    let mut h = clean();
    h.call_mut("resolution").lease = Some(lease("r2", "w1.2", 3));
    let v = only(&h, &h.store(), "no-stale-acceptance");
    assert_says(&v, "a lease for run r2");
    assert_rows(&v, Some(h.at("resolution")), None);

    let mut h = clean();
    h.call_mut("meta-running-e3").lease = None;
    let v = only(&h, &h.store(), "no-stale-acceptance");
    assert_says(&v, "unleased put_meta of r1 accepted");
    assert_rows(&v, Some(h.at("meta-running-e3")), None);
}

/// S6: the administrator's unleased delete is the legal purge (and ends the lease row, so the
/// recreate's grant is judged against nothing live); the same unleased delete by a worker is an
/// unfenced write.
#[test]
fn an_unleased_delete_is_legal_from_the_admin_only() {
    for (node, legal) in [("admin", true), ("w2", false)] {
        let mut h = clean();
        let at = h.at("delete-r2");
        h.rows[at].node = node.to_owned();
        h.rows[at].role = role_of(node);
        h.call_mut("delete-r2").lease = None;
        if legal {
            let found = check(&h.rows, &h.store(), &CFG);
            assert!(found.is_empty(), "{found:#?}");
        } else {
            let v = only(&h, &h.store(), "no-stale-acceptance");
            assert_says(&v, "unleased delete of r2 accepted");
        }
    }
}

#[test]
fn epochs_increasing_catches_an_epoch_reset_after_delete() {
    let mut h = clean();
    let from = h.at("grant-r2-e2");
    for pos in from..h.rows.len() {
        if let Event::Call(call) = &mut h.rows[pos].event
            && let Some(l) = call.lease.as_mut().filter(|l| l.run.as_str() == "r2")
        {
            l.epoch = Epoch(1);
        }
    }
    let v = only(&h, &h.store(), "epochs-increasing");
    assert_says(&v, "acquire of r2 granted e1 to w2.3 at row");
    assert_rows(&v, Some(from), Some(h.at("grant-r2-e1")));
}

#[test]
fn epochs_increasing_catches_a_duplicate_serial_position() {
    let mut h = clean();
    let pos = h.at("terminal-1");
    h.rows[pos].node = "w3".into();
    let v = only(&h, &h.store(), "epochs-increasing");
    assert_says(&v, "duplicate serial position r1@e2");
    assert_rows(&v, Some(pos), Some(h.at("grant-e2")));
}

#[test]
fn one_live_lease_catches_a_grant_over_a_live_lease() {
    let mut h = clean();
    h.call_mut("grant-e2").clock_ms = 900;
    let v = only(&h, &h.store(), "one-live-lease");
    assert_says(&v, "granted w2.1@e2 at clock 900 while w1.1@e1 was live until 1000");
    assert_rows(&v, Some(h.at("grant-e2")), Some(h.at("grant-e1")));
}

#[test]
fn serial_history_catches_a_lost_journal_entry() {
    let h = clean();
    let mut snapshot = h.store();
    snapshot.runs.get_mut(&RunId::new("r1")).unwrap().journal.remove(4);
    // The hole it leaves is a gap no failed append explains, too.
    let mut found = failing(&h, &snapshot, &["serial-history", "seq-contiguous"]);
    assert_eq!(found.len(), 1, "{found:#?}");
    let v = found.remove(0);
    assert_says(&v, "journal of r1 diverges at position 4");
    assert_says(&v, "store holds seq=6 decision/ok");
    assert_says(&v, "the serial history has seq=5 resolution/ok");
    assert_rows(&v, Some(h.at("resolution")), Some(h.at("settle-e3")));
}

#[test]
fn serial_history_catches_a_foreign_meta_and_blob() {
    let h = clean();
    let mut snapshot = h.store();
    snapshot.runs.get_mut(&RunId::new("r1")).unwrap().meta.as_mut().unwrap().segments = 9;
    let v = only(&h, &snapshot, "serial-history");
    assert_says(&v, "meta of r1 diverges: store holds ok seg=9");
    assert_rows(&v, Some(h.at("meta-ok-e3")), None);

    let mut snapshot = h.store();
    snapshot.runs.get_mut(&RunId::new("r2")).unwrap().blobs.insert("r2/t1".into(), b"other".to_vec());
    let v = only(&h, &snapshot, "serial-history");
    assert_says(&v, "blob r2/t1 of r2 diverges: store holds 5B");
    assert_rows(&v, Some(h.at("blob-r2")), None);
}

#[test]
fn serial_history_catches_an_epoch_inversion() {
    let mut h = clean();
    let stale = h.insert_after("outcome-e3", |x| {
        x.append("w1", &a1(), 3060, running(7));
    });
    let snapshot = h.store();
    let found = super::serial::serial_history(&super::Context::new(&h.rows, &snapshot, &CFG));
    let inversion = found.iter().find(|v| v.explanation.contains("epoch inversion")).expect("an inversion");
    assert_says(inversion, "epoch inversion in journal of r1: seq=7 agent/running");
    assert_rows(inversion, Some(stale), Some(h.at("settle-e3")));
    let divergence = found.iter().find(|v| v.explanation.contains("diverges at position 1")).expect("a divergence");
    assert_says(divergence, "store holds seq=2 agent/ok");
    assert_says(divergence, "the serial history has seq=7 agent/running");
    assert_rows(divergence, Some(stale), Some(h.at("terminal-1")));
}

#[test]
fn journal_seq_order_catches_an_append_below_the_tail() {
    let mut h = clean();
    h.call_mut("settle-e3").payload = Payload::Entry(settle(5, RunStatus::Ok, 3));
    let v = only(&h, &h.store(), "journal-seq-order");
    assert_says(&v, "append of seq=5 to r1 accepted while the journal's tail was seq=5");
    assert_rows(&v, Some(h.at("settle-e3")), Some(h.at("resolution")));
}

#[test]
fn one_settle_per_segment_catches_a_second_settle() {
    let mut h = clean();
    let second = h.insert_after("settle-e3", |x| {
        x.append("w1", &a3(), 3035, settle(7, RunStatus::Ok, 3));
    });
    // A second settle after a terminal one also grows a final journal.
    let found = failing(&h, &h.store(), &["one-settle-per-segment", "silent-replay"]);
    let v = &found[0];
    assert_says(v, "a second run_settle (seq=7 decision/ok");
    assert_rows(v, Some(second), Some(h.at("settle-e3")));
}

#[test]
fn one_settle_per_segment_catches_a_straggler() {
    let mut h = clean();
    let c2 = lease("r2", "w2.3", 2);
    let straggler = h.insert_after("settle-r2", |x| {
        x.append("w2", &c2, 3245, running(4));
    });
    let found = failing(&h, &h.store(), &["one-settle-per-segment", "liveness", "silent-replay"]);
    assert_eq!(found.len(), 1, "the final-journal rule does not repeat the row: {found:#?}");
    assert_says(&found[0], "an append (seq=4 agent/running");
    assert_rows(&found[0], Some(straggler), Some(h.at("settle-r2")));
}

/// Two settles of one segment in a final journal, whoever wrote them: the second tenure's settle
/// is stamped with the first's segment.
#[test]
fn one_settle_per_segment_catches_a_repeated_segment_in_the_final_journal() {
    let mut h = clean();
    h.call_mut("settle-e3").payload = Payload::Entry(settle(6, RunStatus::Ok, 2));
    let found = failing(&h, &h.store(), &["one-settle-per-segment"]);
    assert_says(&found[0], "journal of r1 stores a run_settle of segment 2 (seq=6) after one of segment 2 (seq=4)");
    assert_rows(&found[0], Some(h.at("settle-e3")), Some(h.at("settle-e2")));
}

/// A journal with a hole no failed append explains fails `seq-contiguous` at the entry after it;
/// the same hole left by a refused append of that seq passes.
#[test]
fn seq_contiguous_catches_a_gap_only_a_lost_entry_explains() {
    let mut h = clean();
    h.call_mut("settle-e3").payload = Payload::Entry(settle(7, RunStatus::Ok, 3));
    let found = failing(&h, &h.store(), &["seq-contiguous"]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_says(&found[0], "journal of r1 jumps from 5 to seq 7, and no append of seq 6..6 failed or was refused");
    assert_rows(&found[0], Some(h.at("settle-e3")), None);

    let busy = h.insert_after("resolution", |x| {
        x.append("w1", &a3(), 3015, settle(6, RunStatus::Ok, 3));
    });
    h.call_at(busy).outcome = CallOutcome::Busy;
    assert_eq!(check(&h.rows, &h.store(), &CFG), vec![]);
}

#[test]
fn meta_not_ahead_catches_terminal_meta_before_settle() {
    let mut h = clean();
    h.remove(&["meta-ok-e3"]);
    let early = h.insert_after("meta-running-e3", |x| {
        x.put_meta("w1", &a3(), 3025, RunStatus::Ok, 3);
    });
    let v = only(&h, &h.store(), "meta-not-ahead");
    assert_says(&v, "terminal put_meta ok of r1 accepted under w1.2@e3 ahead of the journal");
    assert_says(&v, "its last run_settle (seq=4) says suspended");
    assert_rows(&v, Some(early), Some(h.at("settle-e2")));
}

#[test]
fn no_checkpoint_regression_catches_a_stale_checkpoint_put() {
    let mut h = clean();
    let stale = h.insert_after("ckpt-e2", |x| {
        x.put_blob("w1", &a1(), 1225, "r1/ckpt/1", b"turn-1-again");
    });
    let found = failing(&h, &h.store(), &["no-checkpoint-regression", "no-stale-acceptance"]);
    assert_eq!(found.len(), 1);
    assert_says(&found[0], "checkpoint r1/ckpt/1 regressed: a put under w1.1@e1 (e1) landed after a put under e2");
    assert_rows(&found[0], Some(stale), Some(h.at("ckpt-e2")));
}

#[test]
fn no_checkpoint_regression_catches_stored_bytes_of_an_older_put() {
    let h = clean();
    let mut snapshot = h.store();
    snapshot.runs.get_mut(&RunId::new("r1")).unwrap().blobs.insert("r1/ckpt/1".into(), b"turn-1".to_vec());
    let found = failing(&h, &snapshot, &["serial-history", "no-checkpoint-regression"]);
    assert_eq!(found.len(), 1);
    let v =
        check(&h.rows, &snapshot, &CFG).into_iter().find(|v| v.checker.name() == "no-checkpoint-regression").unwrap();
    assert_says(&v, "checkpoint r1/ckpt/1 holds #");
    assert_rows(&v, Some(h.at("ckpt-e2")), Some(h.at("ckpt-e1")));
}

#[test]
fn repay_bound_catches_a_turn_paid_twice_in_one_tenure() {
    let mut h = clean();
    let again = h.insert_after("pay-e2", |x| {
        x.effect("w2", EffectKind::Call, &b2(), 1, 1);
    });
    let found = failing(&h, &h.store(), &["repay-bound"]);
    assert_eq!(found.len(), 2, "twice in a tenure, and over the bound: {found:#?}");
    assert_says(&found[0], "call turn 1 of r1 dispatch running=1 paid twice under e2");
    assert_rows(&found[0], Some(again), Some(h.at("pay-e2")));
    assert_says(&found[1], "paid 3 times, bound 2 (1 + 1 interrupted tenures in its window: e1)");
    assert_rows(&found[1], Some(again), Some(h.at("pay-e1")));
}

#[test]
fn repay_bound_catches_a_payment_after_the_terminal() {
    let mut h = clean();
    let late = h.insert_after("terminal-1", |x| {
        x.effect("w2", EffectKind::Tool, &b2(), 1, 1);
    });
    let v = only(&h, &h.store(), "repay-bound");
    assert_says(&v, "tool 1 of r1 dispatch running=1 paid under e2 after its terminal was accepted under e2");
    assert_rows(&v, Some(late), Some(h.at("terminal-1")));
}

#[test]
fn repay_bound_catches_a_repay_without_an_interrupted_tenure() {
    let mut h = clean();
    h.insert_after("ckpt-e1", |x| {
        x.lease_call("w1", Surface::Release, &a1(), 40);
    });
    let v = only(&h, &h.store(), "repay-bound");
    assert_says(
        &v,
        "call turn 1 of r1 dispatch running=1 paid 2 times, bound 1 (1 + 0 interrupted tenures in its window)",
    );
    assert_rows(&v, Some(h.at("pay-e2")), Some(h.at("pay-e1")));
}

/// A tenure that paid, then met busy on its next write through every retry and released, gave
/// up on its dispatch as a crash would: the next tenure may pay again. A busy that a later write
/// of the tenure got past does not count.
#[test]
fn repay_bound_counts_a_tenure_that_gave_up_on_a_busy_write() {
    let gave_up = |then_ok: bool| {
        let mut h = clean();
        h.insert_after("ckpt-e1", |x| {
            x.append("w1", &a1(), 35, terminal(2, 1));
            x.call_mut_last().outcome = CallOutcome::Busy;
            if then_ok {
                x.put_blob("w1", &a1(), 36, "r1/ckpt/1", b"turn-1");
            }
            x.lease_call("w1", Surface::Release, &a1(), 40);
        });
        h
    };
    let h = gave_up(false);
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new(), "e1 gave up on its terminal");
    let h = gave_up(true);
    let v = only(&h, &h.store(), "repay-bound");
    assert_says(&v, "paid 2 times, bound 1 (1 + 0 interrupted tenures");
}

/// A snapshot's journals and metas written into a fresh memory store, unleased (J9).
fn stored(snapshot: &Snapshot) -> MemoryStore {
    let store = MemoryStore::new();
    for (run, state) in &snapshot.runs {
        for entry in &state.journal {
            store.append(run, entry, None).expect("append");
        }
        if let Some(meta) = &state.meta {
            store.put_meta(meta, None).expect("put_meta");
        }
    }
    store
}

/// The world's early stop reads the store for as little as it needs; it must answer as the
/// snapshot predicate does, an unlisted run with a journal (named in `extra`) included.
#[test]
fn liveness_read_from_the_store_agrees_with_the_snapshot_predicate() {
    let mut running = clean();
    running.remove(&["settle-e3", "meta-ok-e3", "release-e3", "outcome-e3"]);
    let mut orphan = clean().store();
    let journal = vec![JournalEntry::new(1, "step", "ok")];
    orphan.runs.insert(RunId::new("r-orphan"), RunState { journal, ..RunState::default() });
    for (name, snapshot, expected) in
        [("clean", clean().store(), true), ("running", running.store(), false), ("orphan", orphan, false)]
    {
        let runs: Vec<RunId> = snapshot.runs.keys().cloned().collect();
        assert_eq!(settled_or_waiting(&snapshot), expected, "{name}");
        assert_eq!(store_settled_or_waiting(&stored(&snapshot), runs).expect("reads"), expected, "{name}");
    }
}

#[test]
fn liveness_catches_a_run_still_running() {
    let mut h = clean();
    h.remove(&["settle-e3", "meta-ok-e3", "release-e3", "outcome-e3"]);
    let snapshot = h.store();
    let v = only(&h, &snapshot, "liveness");
    assert_says(&v, "r1 still running after quiescence");
    assert_rows(&v, Some(h.at("meta-running-e3")), None);
    assert!(!settled_or_waiting(&snapshot));
}

#[test]
fn liveness_judges_each_run_state() {
    use super::outcomes::run_liveness;
    let run = RunId::new("r9");
    let with = |journal: Vec<JournalEntry>, status: Option<RunStatus>| RunState {
        journal,
        meta: status.map(|s| RunMeta::new("r9", s)),
        blobs: BTreeMap::from([("r9/t1".to_owned(), b"left over".to_vec())]),
    };
    assert!(run_liveness(&run, &with(vec![], None)).is_ok(), "a deleted run with a blob left is fine");
    assert!(run_liveness(&run, &with(vec![], Some(RunStatus::Ok))).is_ok(), "an empty journal settles without one");
    let no_meta = run_liveness(&run, &with(vec![running(1)], None)).unwrap_err();
    assert!(no_meta.contains("1 journal entries but no meta"), "{no_meta}");
    let closed = vec![suspension(1), resolution(2, 1), settle(3, RunStatus::Suspended, 1)];
    let waiting = run_liveness(&run, &with(closed, Some(RunStatus::Suspended))).unwrap_err();
    assert!(waiting.contains("no open suspension"), "{waiting}");
    let open = vec![suspension(1), settle(2, RunStatus::Suspended, 1)];
    assert!(run_liveness(&run, &with(open, Some(RunStatus::Suspended))).is_ok());
    let trailing = vec![settle(1, RunStatus::Ok, 1), running(2)];
    let after = run_liveness(&run, &with(trailing, Some(RunStatus::Ok))).unwrap_err();
    assert!(after.contains("1 entries follow its last run_settle (seq=1)"), "{after}");
    let differs = run_liveness(&run, &with(vec![settle(1, RunStatus::Error, 1)], Some(RunStatus::Ok))).unwrap_err();
    assert!(differs.contains("last run_settle says error"), "{differs}");
}

#[test]
fn honest_outcome_catches_a_status_its_settle_does_not_say() {
    let mut h = clean();
    let pos = h.at("outcome-e2");
    h.rows[pos].event = Event::Outcome { run: RunId::new("r1"), result: SegmentResult::Reported(RunStatus::Ok) };
    let v = only(&h, &h.store(), "honest-outcome");
    assert_says(&v, "w2 reported r1 ok, but its accepted run_settle at row");
    assert_rows(&v, Some(pos), Some(h.at("settle-e2")));
}

#[test]
fn honest_outcome_catches_a_superseded_segment_reporting_green() {
    let mut h = clean();
    let refused = h.insert_after("release-e2", |x| {
        x.append("w2", &b2(), 1545, settle(5, RunStatus::Suspended, 2));
        x.call_mut_last().outcome = CallOutcome::Stale;
    });
    let v = only(&h, &h.store(), "honest-outcome");
    assert_says(&v, "w2 reported r1 suspended, but its run_settle append at row");
    assert_says(&v, "was rejected (stale)");
    assert_rows(&v, Some(h.at("outcome-e2")), Some(refused));
}

#[test]
fn honest_outcome_checks_a_pure_replay_against_the_journal() {
    let mut h = clean();
    h.insert_after("outcome-e3", |x| {
        x.outcome("w3", "r1", "ok");
    });
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new(), "replaying a settled run is fine");
    let wrong = h.insert_after("outcome-e3", |x| {
        x.outcome("w3", "r1", "error");
    });
    let v = only(&h, &h.store(), "honest-outcome");
    assert_says(&v, "w3 reported r1 error without a run_settle, but the journal's last run_settle");
    assert_rows(&v, Some(wrong), Some(h.at("settle-e3")));
}

#[test]
fn honest_outcome_accepts_a_pure_replay_of_the_journal_it_read() {
    let mut h = clean();
    h.insert_after("release-e2", |x| {
        x.call("w3", 1550, Surface::Load, "r1", None, Payload::None, CallOutcome::Ok);
    });
    let late = h.insert_after("outcome-e3", |x| {
        x.outcome("w3", "r1", "suspended");
    });
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new(), "it read a suspended journal, then stalled");
    h.insert_after("outcome-e3", |x| {
        x.call("w3", 3060, Surface::Load, "r1", None, Payload::None, CallOutcome::Ok);
        x.outcome("w3", "r1", "ok");
    });
    let v = only(&h, &h.store(), "honest-outcome");
    assert_says(&v, "w3 reported r1 suspended without a run_settle");
    assert_rows(&v, Some(late + 2), Some(h.at("settle-e3")));
}

#[test]
fn typed_rejections_catch_a_wrong_class_and_an_untyped_error() {
    let mut h = clean();
    h.call_mut("held").outcome = CallOutcome::Stale;
    let v = only(&h, &h.store(), "typed-rejections");
    assert_says(&v, "acquire of r1 rejected with stale, expected held-by");
    assert_rows(&v, Some(h.at("held")), None);

    let mut h = clean();
    h.call_mut("stale").outcome = CallOutcome::Error("storage");
    let v = only(&h, &h.store(), "typed-rejections");
    assert_says(&v, "unexpected error storage on put_meta of r1");
    assert_rows(&v, Some(h.at("stale")), None);
}

#[test]
fn typed_rejections_catch_the_seq_guard_before_the_fence() {
    let mut h = clean();
    let refused = h.insert_after("release-e2", |x| {
        x.append("w2", &b2(), 1545, running(4));
        x.call_mut_last().outcome = CallOutcome::JournalOrder;
    });
    let v = only(&h, &h.store(), "typed-rejections");
    assert_says(&v, "rejected journal-order, but its lease was not the live holder");
    assert_rows(&v, Some(refused), None);
}

#[test]
fn check_caps_each_checker_and_orders_by_row() {
    let mut h = clean();
    let from = h.at("grant-r2-e2") + 1;
    for pos in from..h.rows.len() {
        if let Event::Call(call) = &mut h.rows[pos].event {
            call.lease = None;
        }
    }
    let found: Vec<Violation> =
        check(&h.rows, &h.store(), &CFG).into_iter().filter(|v| v.checker.name() == "no-stale-acceptance").collect();
    assert_eq!(found.len(), MAX_PER_CHECKER);
    let rows: Vec<Option<usize>> = found.iter().map(|v| v.row).collect();
    assert_eq!(rows, [Some(from), Some(from + 1), Some(from + 3)]);
}

#[test]
fn arbitrary_input_does_not_panic() {
    let mut snapshot = Snapshot::default();
    let odd = RunState {
        journal: vec![settle(3, RunStatus::Ok, 1), settle(3, RunStatus::Ok, 1), running(1)],
        meta: Some(RunMeta::new("ghost", RunStatus::Ok)),
        blobs: BTreeMap::from([("ghost/ckpt/x".to_owned(), vec![0xff])]),
    };
    snapshot.runs.insert(RunId::new("ghost"), odd);
    let found = check(&[], &snapshot, &CFG);
    assert!(names(&found).is_superset(&BTreeSet::from(["serial-history", "journal-seq-order", "liveness"])));
    let h = clean();
    let _ = check(&h.rows, &Snapshot::default(), &CFG);
}

/// A history the harness numbered wrong is a harness bug, stopped before any checker points at
/// the wrong row; so is a history whose time goes backwards.
#[test]
#[should_panic(expected = "history row 0 is numbered 7")]
fn check_refuses_a_misnumbered_history() {
    let mut h = clean();
    h.rows[0].index = 7;
    let _ = check(&h.rows, &h.store(), &CFG);
}

#[test]
#[should_panic(expected = "history time went backwards at row 3")]
fn check_refuses_a_history_whose_time_goes_backwards() {
    let mut h = clean();
    h.rows[3].at_ms = -1;
    let _ = check(&h.rows, &h.store(), &CFG);
}

#[test]
fn repay_bound_counts_only_interrupted_tenures_in_the_dispatch_window() {
    // e1 pays turn 1 and releases cleanly, so e2's re-pay is over the bound, however many other
    // tenures of r1 were interrupted: the usurper's grant that is never released...
    let mut h = clean();
    h.insert_after("ckpt-e1", |x| {
        x.lease_call("w1", Surface::Release, &a1(), 40);
    });
    h.insert_after("release-e3", |x| {
        x.acquire("usurper", &lease("r1", "usurper", 4), 3060);
    });
    let v = only(&h, &h.store(), "repay-bound");
    assert_says(&v, "call turn 1 of r1 dispatch running=1 paid 2 times, bound 1 (1 + 0 interrupted tenures");
    assert_rows(&v, Some(h.at("pay-e2")), Some(h.at("pay-e1")));

    // ... or a crashed tenure that paid nothing of that dispatch (e3 never releases).
    let mut h = clean();
    h.insert_after("ckpt-e1", |x| {
        x.lease_call("w1", Surface::Release, &a1(), 40);
    });
    h.remove(&["release-e3"]);
    let v = only(&h, &h.store(), "repay-bound");
    assert_says(&v, "call turn 1 of r1 dispatch running=1 paid 2 times, bound 1 (1 + 0 interrupted tenures");
    assert_rows(&v, Some(h.at("pay-e2")), Some(h.at("pay-e1")));
}

#[test]
fn repay_bound_counts_an_interrupted_tenure_for_every_effect_of_its_dispatch() {
    // e1 pays turn 1 and tool 1 of dispatch running=1 and crashes; e2 re-pays both: each within
    // 1 + 1.
    let mut h = clean();
    h.insert_after("pay-e1", |x| {
        x.effect("w1", EffectKind::Tool, &a1(), 1, 1);
    });
    h.insert_after("pay-e2", |x| {
        x.effect("w2", EffectKind::Tool, &b2(), 1, 1);
    });
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new(), "e1 crashed after paying both");

    // Had e1 released cleanly, both re-payments would be over a bound of 1.
    h.insert_after("ckpt-e1", |x| {
        x.lease_call("w1", Surface::Release, &a1(), 40);
    });
    let found = failing(&h, &h.store(), &["repay-bound"]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_says(&found[0], "call turn 1 of r1 dispatch running=1 paid 2 times, bound 1");
    assert_rows(&found[0], Some(h.at("pay-e2")), Some(h.at("pay-e1")));
    assert_says(&found[1], "tool 1 of r1 dispatch running=1 paid 2 times, bound 1");
    assert_rows(&found[1], Some(h.at("pay-e2") + 1), Some(h.at("pay-e1") + 1));
}

#[test]
fn typed_rejections_judge_the_class_by_the_lease_table() {
    // A lease of the right run that is not the live holder is stale, never a run mismatch.
    let mut h = clean();
    h.call_mut("stale").outcome = CallOutcome::RunMismatch;
    let v = only(&h, &h.store(), "typed-rejections");
    assert_says(&v, "put_meta of r1 under w1.1@e1 rejected with run-mismatch, expected stale (r1 had no lease row)");
    assert_rows(&v, Some(h.at("stale")), None);

    // The live holder is never rejected for its lease.
    let mut h = clean();
    let refused = h.insert_after("meta-running-e3", |x| {
        x.put_meta("w1", &a3(), 3025, RunStatus::Running, 3);
        x.call_mut_last().outcome = CallOutcome::Stale;
    });
    let v = only(&h, &h.store(), "typed-rejections");
    assert_says(&v, "the live holder's put_meta was rejected as stale (r1 under w1.2@e3)");
    assert_rows(&v, Some(refused), None);

    // A lease of another run is a run mismatch, even when it is no holder of its own run either.
    let mut h = clean();
    let foreign = lease("r2", "w2.2", 1);
    let mismatched = h.insert_after("meta-running-e3", |x| {
        let entry = Payload::Entry(running(9));
        x.call("w1", 3025, Surface::Append, "r1", Some(&foreign), entry, CallOutcome::Stale);
    });
    let v = only(&h, &h.store(), "typed-rejections");
    assert_says(&v, "append of r1 under w2.2@e1 rejected with stale, expected run-mismatch (its lease is for run r2)");
    assert_rows(&v, Some(mismatched), None);
    h.call_at(mismatched).outcome = CallOutcome::RunMismatch;
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new(), "run-mismatch is its class");
}

#[test]
fn liveness_catches_a_planned_run_that_never_reached_the_store() {
    let h = clean();
    let planned = |runs: &[&str]| OracleConfig { planned: runs.iter().map(|r| RunId::new(*r)).collect(), ..CFG };
    let found = check(&h.rows, &h.store(), &planned(&["r1", "r2"]));
    assert_eq!(found, Vec::new(), "both planned runs reached the store");

    let found = check(&h.rows, &h.store(), &planned(&["r1", "r06", "r2"]));
    assert_eq!(names(&found), BTreeSet::from(["liveness"]), "{found:#?}");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_says(&found[0], "r06 was planned but never reached the store");
    assert_rows(&found[0], None, None);

    // A grant and a busy write are not the store holding anything of the run.
    let mut h = clean();
    let r3 = lease("r3", "w1.3", 1);
    let busy = h.insert_after("outcome-e3", |x| {
        x.acquire("w1", &r3, 3060);
        let meta = Payload::Meta(RunMeta::new("r3", RunStatus::Running));
        x.call("w1", 3070, Surface::PutMeta, "r3", Some(&r3), meta, CallOutcome::Busy);
    }) + 1;
    let found = check(&h.rows, &h.store(), &planned(&["r1", "r2", "r3"]));
    assert_eq!(names(&found), BTreeSet::from(["liveness"]), "{found:#?}");
    assert_says(&found[0], "r3 was planned but never reached the store");
    assert_rows(&found[0], Some(busy), None);
}

#[test]
fn honest_outcome_over_an_empty_journal_needs_its_own_meta_write() {
    // A fresh segment superseded before its first append: its journal is empty, so only its own
    // terminal meta write could have made a `cancelled` outcome durable.
    let mut h = clean();
    let refused = h.insert_after("outcome-e3", |x| {
        x.call("w4", 3100, Surface::Load, "r7", None, Payload::None, CallOutcome::Ok);
        x.put_meta(
            "w4",
            &Lease { run: RunId::new("r7"), owner: "w4".into(), epoch: Epoch(1) },
            3200,
            RunStatus::Cancelled,
            1,
        );
        x.call_mut_last().outcome = CallOutcome::Stale;
        x.outcome("w4", "r7", "cancelled");
    });
    let v: Vec<_> =
        check(&h.rows, &h.store(), &CFG).into_iter().filter(|v| v.checker.name() == "honest-outcome").collect();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_says(&v[0], "w4 reported r7 cancelled over an empty journal, but its meta write at row");
    assert_says(&v[0], "was stale");
    assert_eq!(v[0].cause, Some(refused + 1));
}

#[test]
fn honest_outcome_ignores_a_segment_refused_before_it_touched_the_store() {
    // While w2's segment is still unwinding, a second start of the same run on w2 is refused
    // (a second live segment): that refusal must not take the first segment's settle attempt.
    // w2 reports late, after e3 settled the run ok: only its own accepted settle backs it.
    let mut h = clean();
    h.remove(&["outcome-e2"]);
    h.insert_after("outcome-e3", |x| {
        x.outcome("w2", "r1", "err:segment-live");
        x.outcome("w2", "r1", "suspended");
    });
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new());
}

#[test]
fn honest_outcome_over_a_journal_it_appended_to_needs_a_settle() {
    // A fresh segment that appended a dispatch owed a run_settle: its meta write alone does not
    // back its outcome, even though the journal it first read was empty.
    let mut h = clean();
    let lease = Lease { run: RunId::new("r7"), owner: "w4".into(), epoch: Epoch(1) };
    h.insert_after("outcome-e3", |x| {
        x.call("w4", 3100, Surface::Load, "r7", None, Payload::None, CallOutcome::Ok);
        x.append("w4", &lease, 3150, running(1));
        x.put_meta("w4", &lease, 3200, RunStatus::Cancelled, 1);
        x.outcome("w4", "r7", "cancelled");
    });
    let v: Vec<_> =
        check(&h.rows, &h.store(), &CFG).into_iter().filter(|v| v.checker.name() == "honest-outcome").collect();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_says(&v[0], "w4 reported r7 cancelled without a run_settle");
}

/// An indeterminate call (its process died mid-call) is judged both ways: the store may hold its
/// write or not, but nothing else.
#[test]
fn serial_history_accepts_either_fate_of_an_indeterminate_write() {
    let mut h = clean();
    h.call_mut("blob-r2").outcome = CallOutcome::Indeterminate;
    let store = OracleConfig { scope: Scope::Store, ..CFG };
    let committed = h.store();
    assert_eq!(check(&h.rows, &committed, &store), vec![], "the write committed");
    let mut lost = h.store();
    lost.runs.get_mut(&RunId::new("r2")).unwrap().blobs.remove("r2/t1");
    assert_eq!(check(&h.rows, &lost, &store), vec![], "the write did not commit");

    let mut forged = h.store();
    forged.runs.get_mut(&RunId::new("r2")).unwrap().blobs.insert("r2/t1".into(), b"other".to_vec());
    let found = check(&h.rows, &forged, &store);
    assert_eq!(names(&found), BTreeSet::from(["serial-history"]), "{found:#?}");
    assert_says(&found[0], "blob r2/t1 of r2 diverges");
    assert_says(&found[0], &format!("indeterminate calls #{}", h.at("blob-r2")));
}

/// The store scope runs the store's checkers only: a history that fails an engine promise
/// (liveness of a planned run) passes it, and one that fails a store promise still fails.
#[test]
fn store_scope_judges_store_promises_only() {
    let h = clean();
    let engine = OracleConfig { planned: vec![RunId::new("r9")], ..CFG };
    assert_eq!(names(&check(&h.rows, &h.store(), &engine)), BTreeSet::from(["liveness"]));
    let store = OracleConfig { scope: Scope::Store, ..engine };
    assert_eq!(check(&h.rows, &h.store(), &store), vec![]);
    let mut snapshot = h.store();
    snapshot.runs.get_mut(&RunId::new("r1")).unwrap().journal.remove(4);
    assert_eq!(names(&check(&h.rows, &snapshot, &store)), BTreeSet::from(["serial-history", "seq-contiguous"]));
}

/// An indeterminate release may have ended its lease: a grant inside what would otherwise be the
/// released lease's ttl is not judged against it. A release known to have failed still is.
#[test]
fn lease_replay_takes_an_indeterminate_release_as_done() {
    let mut h = clean();
    h.insert_after("outcome-e3", |x| {
        x.acquire("w2", &lease("r1", "w2.9", 4), 3500);
    });
    h.call_mut("release-e3").outcome = CallOutcome::Indeterminate;
    assert_eq!(check(&h.rows, &h.store(), &CFG), vec![]);
    h.call_mut("release-e3").outcome = CallOutcome::Busy;
    assert_eq!(names(&check(&h.rows, &h.store(), &CFG)), BTreeSet::from(["one-live-lease"]));
}

/// A checkpoint put whose process died mid-call may have landed: the store may hold its bytes
/// (or the last accepted put's), but nothing else.
#[test]
fn checkpoint_regression_accepts_either_fate_of_an_indeterminate_put() {
    let mut h = clean();
    h.insert_after("ckpt-e2", |x| {
        x.put_blob("w2", &b2(), 1225, "r1/ckpt/1", b"turn-2-maybe");
    });
    let pos = h.at("ckpt-e2") + 1;
    h.call_at(pos).outcome = CallOutcome::Indeterminate;
    assert_eq!(check(&h.rows, &h.store(), &CFG), vec![], "the put did not land");
    let mut landed = h.store();
    landed.runs.get_mut(&RunId::new("r1")).unwrap().blobs.insert("r1/ckpt/1".into(), b"turn-2-maybe".to_vec());
    assert_eq!(check(&h.rows, &landed, &CFG), vec![], "the put landed");
    let mut other = h.store();
    other.runs.get_mut(&RunId::new("r1")).unwrap().blobs.insert("r1/ckpt/1".into(), b"neither".to_vec());
    let found = check(&h.rows, &other, &CFG);
    assert!(names(&found).contains("no-checkpoint-regression"), "{found:#?}");
}

fn violations_of(h: &H, checker: &str) -> Vec<Violation> {
    check(&h.rows, &h.store(), &CFG).into_iter().filter(|v| v.checker.name() == checker).collect()
}

/// A fresh tenure of run `run` on node `node`: granted `lease`, boot meta written.
fn boot(x: &mut H, node: &str, l: &Lease, clock: i64, segments: u32) {
    x.acquire(node, l, clock).put_meta(node, l, clock + 1, RunStatus::Running, segments);
}

#[test]
fn dispatch_identity_catches_a_redispatch_under_a_new_running_entry() {
    // w4 crashes mid-dispatch of `ask` under e1; w5 resumes under e2 but opens a second running
    // entry for the same step instead of reusing the dangling one.
    let mut h = clean();
    let (e1, e2) = (lease("r7", "w4", 1), lease("r7", "w5", 2));
    let at = h.insert_after("outcome-e3", |x| {
        boot(x, "w4", &e1, 4000, 1);
        x.append("w4", &e1, 4010, running(1)).outcome("w4", "r7", "err:crashed");
        boot(x, "w5", &e2, 6000, 2);
        x.append("w5", &e2, 6010, running(2))
            .append("w5", &e2, 6020, terminal(3, 2))
            .append("w5", &e2, 6030, settle(4, RunStatus::Ok, 2))
            .put_meta("w5", &e2, 6040, RunStatus::Ok, 2)
            .lease_call("w5", Surface::Release, &e2, 6050)
            .outcome("w5", "r7", "ok");
    });
    let v = violations_of(&h, "dispatch-identity");
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_says(&v[0], "while the same step's dispatch ask at seq=1 was still open");
    assert_rows(&v[0], Some(at + 6), Some(at + 2));
    assert_eq!(names(&check(&h.rows, &h.store(), &CFG)), ["dispatch-identity"].into_iter().collect());
}

#[test]
fn dispatch_identity_catches_a_terminal_of_no_open_dispatch() {
    let mut h = clean();
    h.insert_after("terminal-1", |x| {
        x.append("w2", &b2(), 1231, terminal(3, 1));
    });
    // Seqs shift: the rest of r1's journal is renumbered by nobody, so only the checkers that
    // read dispatches are asked here.
    let v = violations_of(&h, "dispatch-identity");
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_says(&v[0], "closing running seq=1, but that dispatch was already closed");
}

#[test]
fn silent_replay_catches_a_settle_appended_to_a_final_journal() {
    // r1 settled ok under e3; a later tenure (the client reattaching) that only replays it appends
    // another settle.
    let mut h = clean();
    let e4 = lease("r1", "w2.9", 4);
    let at = h.insert_after("outcome-e3", |x| {
        x.acquire("client", &e4, 5000)
            .put_meta("client", &e4, 5001, RunStatus::Running, 4)
            .append("client", &e4, 5002, settle(7, RunStatus::Ok, 4))
            .put_meta("client", &e4, 5003, RunStatus::Ok, 4)
            .lease_call("client", Surface::Release, &e4, 5004)
            .outcome("client", "r1", "ok");
    });
    let v = only(&h, &h.store(), "silent-replay");
    assert_says(&v, "whose journal was final: its run_settle at row");
    assert_rows(&v, Some(at + 2), Some(h.at("settle-e3")));
}

#[test]
fn silent_replay_catches_a_repeated_settle_with_nothing_new() {
    // A suspended run swept again: the replay finds nothing new but settles `suspended` again.
    let mut h = clean();
    let (e1, e2) = (lease("r8", "w4", 1), lease("r8", "w5", 2));
    h.insert_after("outcome-e3", |x| {
        boot(x, "w4", &e1, 4000, 1);
        x.append("w4", &e1, 4010, suspension(1))
            .append("w4", &e1, 4020, settle(2, RunStatus::Suspended, 1))
            .put_meta("w4", &e1, 4030, RunStatus::Suspended, 1)
            .lease_call("w4", Surface::Release, &e1, 4040)
            .outcome("w4", "r8", "suspended");
        boot(x, "w5", &e2, 5000, 2);
        x.append("w5", &e2, 5010, settle(3, RunStatus::Suspended, 2))
            .put_meta("w5", &e2, 5020, RunStatus::Suspended, 2)
            .lease_call("w5", Surface::Release, &e2, 5030)
            .outcome("w5", "r8", "suspended");
    });
    let v = only(&h, &h.store(), "silent-replay");
    assert_says(&v, "with nothing appended since its last run_settle");
}

#[test]
fn renew_loss_catches_a_payment_after_a_failed_renew() {
    // w2's renew under e2 fails busy (lease loss, 9.2); it pays another dispatch's turn anyway.
    let mut h = clean();
    let renew = h.insert_after("terminal-1", |x| {
        x.lease_call("w2", Surface::Renew, &b2(), 1400);
        x.call_mut_last().outcome = CallOutcome::Busy;
        x.effect("w2", EffectKind::Call, &b2(), 3, 1);
    });
    let v = only(&h, &h.store(), "renew-loss");
    assert_says(&v, "w2 paid call turn 1 of r1 dispatch running=3 under e2 after its renew of that lease failed");
    assert_rows(&v, Some(renew + 1), Some(renew));
}

#[test]
fn renew_loss_ignores_a_failed_renew_of_someone_elses_lease() {
    // A zombie renewing a lease it was never granted loses nothing of its own.
    let mut h = clean();
    h.insert_after("outcome-e3", |x| {
        x.call("zombie", 5000, Surface::Renew, "r1", Some(&b2()), Payload::None, CallOutcome::Stale);
        x.effect("zombie", EffectKind::Call, &b2(), 9, 1);
    });
    assert!(violations_of(&h, "renew-loss").is_empty());
}

#[test]
fn repay_bound_catches_a_turn_its_checkpoint_covers_paid_again() {
    // w1's checkpoint under e1 records turn 1 as done; w2 pays turn 1 again under e2.
    let mut h = clean();
    let covered = [&[0x01][..], br#"{"turns":1,"tool_calls_used":0}"#].concat();
    h.call_mut("ckpt-e1").payload = Payload::Blob(covered.clone());
    let v = only(&h, &h.store(), "repay-bound");
    assert_says(&v, "call turn 1 of r1 dispatch running=1 paid under e2 although the checkpoint accepted under e1");
    assert_rows(&v, Some(h.at("pay-e2")), Some(h.at("ckpt-e1")));
    // A checkpoint that does not decode covers nothing: the engine reruns the dispatch whole.
    h.call_mut("ckpt-e1").payload = Payload::Blob([&[0x02][..], &covered[1..]].concat());
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new());
}

#[test]
fn justified_repair_catches_a_repair_of_a_run_nothing_touched() {
    let mut h = clean();
    h.insert_after("outcome-e3", |x| {
        x.push("operator.1", Event::Repair { run: RunId::new("r1"), status: RunStatus::Ok });
    });
    // r1 was touched (w1 crashed under e1): its repair is justified.
    assert!(violations_of(&h, "justified-repair").is_empty(), "{:#?}", violations_of(&h, "justified-repair"));
    // r2's second generation ran cleanly: every tenure released, nothing failed.
    h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
    let v = only(&h, &h.store(), "justified-repair");
    assert_says(&v, "operator.1 repaired r2's meta to ok, but nothing interrupted r2");
    assert_eq!(v.row, Some(h.rows.len() - 1));
}

/// A mistaken resume (the `branches` scenario's operator) is refused before any write: its failed
/// outcome touches nothing, so it justifies no repair; any other failed segment does.
#[test]
fn a_binding_refusal_justifies_no_repair() {
    for (result, justified) in [("err:binding", false), ("err:store", true)] {
        let mut h = clean();
        h.outcome("operator.1", "r2", result);
        h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
        let v = violations_of(&h, "justified-repair");
        assert_eq!(v.is_empty(), justified, "{result}: {v:#?}");
    }
}

#[test]
fn a_write_the_store_failed_outright_justifies_a_repair_and_a_failed_read_does_not() {
    // Swarm seed 8598: a segment's terminal meta write failed with an injected storage error and
    // its node crashed (elsewhere) before the sweep reported the failed segment.
    for (surface, outcome, justified) in [
        (Surface::PutMeta, CallOutcome::Injected, true),
        (Surface::Append, CallOutcome::Error("storage"), true),
        (Surface::GetMeta, CallOutcome::Injected, false),
        (Surface::PutMeta, CallOutcome::Stale, false),
    ] {
        let mut h = clean();
        h.call("w9.1", 9000, surface, "r2", Some(&b2()), Payload::None, outcome.clone());
        h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
        let v = violations_of(&h, "justified-repair");
        assert_eq!(v.is_empty(), justified, "{surface:?} {outcome}: {v:#?}");
    }
}

/// `Disruption::ALL` lists every variant once, in declaration order: the match is exhaustive, so a
/// new variant does not compile until it has a position here (and `ALL`'s length, the number of
/// arms, is checked with it).
#[test]
fn disruption_all_lists_every_variant() {
    let position = |d: Disruption| match d {
        Disruption::Crash => 0,
        Disruption::Stall => 1,
        Disruption::Takeover => 2,
        Disruption::Zombie => 3,
        Disruption::Purge => 4,
        Disruption::ClockJump => 5,
        Disruption::Restart => 6,
    };
    assert_eq!(Disruption::ALL.len(), 7);
    assert!(Disruption::ALL.iter().enumerate().all(|(i, d)| position(*d) == i));
}

#[test]
fn a_fault_row_justifies_a_repair_only_when_it_interrupts_the_run() {
    for kind in Disruption::ALL {
        let mut h = clean();
        let fault = Event::Fault { kind, run: Some(RunId::new("r2")), epoch: None, detail: "x".into() };
        h.push("w9.1", fault);
        h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
        let v = violations_of(&h, "justified-repair");
        assert_eq!(v.is_empty(), kind.interrupts(), "{kind}: {v:#?}");
    }
    let interrupting: Vec<&str> = Disruption::ALL.iter().filter(|k| k.interrupts()).map(|k| k.as_str()).collect();
    assert_eq!(interrupting, ["crash", "stall", "takeover"]);
    let names: BTreeSet<String> = Disruption::ALL.iter().map(ToString::to_string).collect();
    assert_eq!(names.len(), Disruption::ALL.len(), "names are distinct");
    assert!(Disruption::ALL.iter().all(|k| k.to_string() == k.as_str()));
}

#[test]
fn honest_outcome_forgets_appends_of_a_deleted_generation() {
    // w4 appended to r9's first generation and deleted it; its segment of the recreated run,
    // cancelled before its first append, reports `cancelled` over an empty journal on the strength
    // of its own accepted meta write (swarm seed 8758 found the oracle reading the old append).
    let mut h = clean();
    let (e1, e2) = (lease("r9", "w4", 1), lease("r9", "w4", 2));
    h.insert_after("outcome-e3", |x| {
        x.acquire("w4", &e1, 4000).append("w4", &e1, 4010, resolution(1, 1)).lease_call(
            "w4",
            Surface::Delete,
            &e1,
            4020,
        );
        boot(x, "w4", &e2, 4100, 1);
        x.call("w4", 4101, Surface::Load, "r9", None, Payload::None, CallOutcome::Ok);
        x.put_meta("w4", &e2, 4110, RunStatus::Cancelled, 1).lease_call("w4", Surface::Release, &e2, 4120).outcome(
            "w4",
            "r9",
            "cancelled",
        );
    });
    assert_eq!(violations_of(&h, "honest-outcome"), Vec::new());
}

#[test]
fn repay_bound_counts_a_tenure_whose_write_the_store_failed_as_interrupted() {
    // w4's checkpoint save fails with a storage error (no retry absorbs it); it settles nothing
    // and releases. Its progress is lost as in a crash: w5 may pay turn 1 again. Had the save
    // succeeded, the released tenure would leave no room for a re-pay.
    let mut h = clean();
    let (e1, e2) = (lease("r7", "w4", 1), lease("r7", "w5", 2));
    h.insert_after("outcome-e3", |x| {
        boot(x, "w4", &e1, 4000, 1);
        x.append("w4", &e1, 4010, running(1)).effect("w4", EffectKind::Call, &e1, 1, 1).put_blob(
            "w4",
            &e1,
            4020,
            "r7/ckpt/1",
            b"lost",
        );
        x.call_mut_last().outcome = CallOutcome::Injected;
        x.lease_call("w4", Surface::Release, &e1, 4030);
        boot(x, "w5", &e2, 5000, 2);
        x.effect("w5", EffectKind::Call, &e2, 1, 1)
            .append("w5", &e2, 5010, terminal(2, 1))
            .append("w5", &e2, 5020, settle(3, RunStatus::Ok, 2))
            .put_meta("w5", &e2, 5030, RunStatus::Ok, 2)
            .lease_call("w5", Surface::Release, &e2, 5040)
            .outcome("w5", "r7", "ok");
    });
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new());
    let save = h.rows.iter().position(|r| r.call().is_some_and(|c| c.blob_ref.as_deref() == Some("r7/ckpt/1")));
    h.call_at(save.expect("the save")).outcome = CallOutcome::Ok;
    let v = only(&h, &h.store(), "repay-bound");
    assert_says(&v, "call turn 1 of r7 dispatch running=1 paid 2 times, bound 1");
}

/// The hasher behind a world's fingerprint tells apart what a fingerprint must: a row changed in
/// any one field (the payload included), rows in another order, the same text split otherwise.
#[test]
fn mix_tells_apart_what_a_fingerprint_must() {
    use std::hash::{Hash, Hasher};
    fn mix(value: &impl Hash) -> u64 {
        let mut h = Mix::default();
        value.hash(&mut h);
        h.finish()
    }
    let h = clean();
    let base = mix(&h.rows);
    assert_eq!(mix(&h.rows), base, "the same rows, the same digest");
    let mut reordered = h.rows.clone();
    reordered.swap(1, 2);
    assert_ne!(mix(&reordered), base);
    for i in 0..h.rows.len() {
        let mut rows = h.rows.clone();
        rows[i].at_ms += 1;
        assert_ne!(mix(&rows), base, "row {i}'s time");
        let mut rows = h.rows.clone();
        match &mut rows[i].event {
            Event::Call(call) => match &mut call.payload {
                Payload::Entry(entry) => entry.extra.insert("x".into(), json!(1)).map_or((), drop),
                Payload::Meta(meta) => meta.segments += 1,
                Payload::Blob(bytes) => bytes.push(0),
                Payload::None => call.clock_ms += 1,
            },
            _ => rows[i].node.push('x'),
        }
        assert_ne!(mix(&rows), base, "row {i}'s content");
    }
    assert_ne!(mix(&("ab", "c")), mix(&("a", "bc")));
    assert_ne!(mix(&"a run id longer than a word"), mix(&"A run id longer than a word"));
    assert_ne!(mix(&"a"), mix(&"a\0"));
}

/// The checkers compare stored entries and metas field by field where they once compared the
/// digests of their encodings: the two must agree, a signed zero and key order included.
#[test]
fn same_entry_and_same_meta_agree_with_the_digests_of_the_encodings() {
    use crate::model::{entry_digest, meta_digest, same_entry, same_meta};
    let entries = [
        running(1),
        running(2),
        terminal(2, 1),
        JournalEntry::new(1, "agent", "running").with("key", json!("ask")).with("n", json!(0.0)),
        JournalEntry::new(1, "agent", "running").with("key", json!("ask")).with("n", json!(-0.0)),
        JournalEntry::new(1, "agent", "running").with("key", json!("ask")).with("n", json!(0)),
        JournalEntry::new(1, "agent", "running").with("key", json!({ "a": [1, 2.5], "b": null })),
        JournalEntry::new(1, "agent", "running").with("key", json!({ "a": [1, 2.5] })),
        JournalEntry::new(1, "agent", "running").with("key", json!({ "a": [1, -2.5], "b": null })),
        JournalEntry::new(1, "agent", "ok").with("key", json!("ask")),
    ];
    for a in &entries {
        for b in &entries {
            assert_eq!(same_entry(a, b), entry_digest(a) == entry_digest(b), "{a:?} against {b:?}");
        }
    }
    let mut metas = vec![RunMeta::new("r1", RunStatus::Ok), RunMeta::new("r2", RunStatus::Ok)];
    metas.push(RunMeta { segments: 2, ..metas[0].clone() });
    metas.push(RunMeta { tags: vec!["t".to_owned()], ..metas[0].clone() });
    let mut zero = metas[0].clone();
    zero.extra.insert("at".to_owned(), json!(0.0));
    let mut negative_zero = metas[0].clone();
    negative_zero.extra.insert("at".to_owned(), json!(-0.0));
    metas.extend([zero, negative_zero]);
    for a in &metas {
        for b in &metas {
            assert_eq!(same_meta(a, b), meta_digest(a) == meta_digest(b), "{a:?} against {b:?}");
        }
    }
}

/// `grants` answers from a list kept as rows are pushed: granted acquires only, in grant order,
/// and nothing once the rows are taken.
#[test]
fn grants_are_the_accepted_acquires_in_order() {
    use crate::history::History;
    let history = History::new(|| 0, role_of);
    let call = |surface, lease: Option<Lease>, outcome| Call {
        clock_ms: 0,
        lease,
        owner: None,
        counter: 0,
        surface,
        run: RunId::new("r1"),
        blob_ref: None,
        payload: Payload::None,
        outcome,
        read: None,
    };
    history.push_call("w1", call(Surface::Acquire, Some(a1()), CallOutcome::Ok));
    history.push_call("w2", call(Surface::Acquire, None, CallOutcome::HeldBy { owner: "w1".into(), epoch: Epoch(1) }));
    history.push_call("w1", call(Surface::Renew, Some(a1()), CallOutcome::Ok));
    history.push_call("w2", call(Surface::Acquire, Some(b2()), CallOutcome::Ok));
    history.push_call("w3", call(Surface::Acquire, Some(a3()), CallOutcome::Indeterminate));
    assert_eq!(history.grants(), vec![a1(), b2()]);
    assert_eq!(history.take_rows().len(), 5);
    assert_eq!(history.grants(), Vec::<Lease>::new());
}

/// The checkers key runs by number; numbers follow names, whatever order rows name them in, so
/// maps keyed by number iterate (and report) in name order.
#[test]
fn runs_are_numbered_in_name_order() {
    use crate::model::Runs;
    let row = |index, event| Row { index, at_ms: 0, node: "w1".into(), role: Role::Worker, event };
    let outcome = |run: &str| Event::Outcome { run: RunId::new(run), result: SegmentResult::Reported(RunStatus::Ok) };
    let rows = vec![
        row(0, outcome("r2")),
        row(1, Event::Note("start".into())),
        row(2, outcome("r10")),
        row(3, outcome("r1")),
        row(4, outcome("r2")),
    ];
    let runs = Runs::new(&rows);
    assert!(runs.at(1).is_none(), "a note names no run");
    let names: Vec<String> = [0, 2, 3, 4].iter().map(|&pos| runs.at(pos).expect("a run").to_string()).collect();
    assert_eq!(names, ["r2", "r10", "r1", "r2"]);
    let run = |pos| runs.at(pos).expect("a run");
    let (r1, r10, r2) = (run(3), run(2), run(0));
    assert!(r1 < r10 && r10 < r2, "by name: r1 < r10 < r2");
    assert_eq!(runs.at(4), Some(r2));
    assert_eq!(runs.named(&RunId::new("r10")), Some(r10));
    assert_eq!(runs.named(&RunId::new("r3")), None);
}

/// A meta write of fewer segments than one before it: caught at the row that went back, though
/// a later write restores the count and the end state looks right.
#[test]
fn observables_monotonic_catches_segments_going_back_and_coming_back() {
    let mut h = clean();
    let back = h.insert_after("meta-running-e3", |x| {
        x.put_meta("w1", &a3(), 3025, RunStatus::Running, 2);
        x.put_meta("w1", &a3(), 3026, RunStatus::Running, 3);
    });
    let v = only(&h, &h.store(), "observables-monotonic");
    assert_says(&v, "run r1: w1.2@e3 wrote segments 2 after a meta of segments 3");
    assert_rows(&v, Some(back), Some(h.at("meta-running-e3")));
}

/// A run whose journal settled `ok` rewritten `running` with no new segment (a repair that
/// reopens a finished run), then put back: caught at the reopening write.
#[test]
fn observables_monotonic_catches_a_finished_run_reopened_without_a_new_segment() {
    let mut h = clean();
    let reopened = h.insert_after("meta-ok-e3", |x| {
        x.put_meta("w1", &a3(), 3041, RunStatus::Running, 3);
        x.put_meta("w1", &a3(), 3042, RunStatus::Ok, 3);
    });
    let v = only(&h, &h.store(), "observables-monotonic");
    assert_says(&v, "meta 'running' (segments 3) reopens a run whose journal settled 'ok'");
    assert_rows(&v, Some(reopened), Some(h.at("settle-e3")));
    // A new segment's boot over the settled journal is the one move back the contracts allow (a
    // client reattaching; a worker's sweep would not resume a settled run, `worker-candidacy`).
    let mut h = clean();
    let e4 = lease("r1", "client.1", 4);
    h.insert_after("outcome-e3", |x| {
        x.acquire("client", &e4, 3100)
            .put_meta("client", &e4, 3101, RunStatus::Running, 4)
            .put_meta("client", &e4, 3102, RunStatus::Ok, 4)
            .lease_call("client", Surface::Release, &e4, 3103);
    });
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new());
}

/// A terminal meta of another status than the journal's final settle, written and put back.
#[test]
fn observables_monotonic_catches_a_settled_outcome_overturned() {
    let mut h = clean();
    let overturned = h.insert_after("meta-ok-e3", |x| {
        x.put_meta("w1", &a3(), 3041, RunStatus::Cancelled, 3);
        x.put_meta("w1", &a3(), 3042, RunStatus::Ok, 3);
    });
    let found = failing(&h, &h.store(), &["meta-not-ahead", "observables-monotonic"]);
    assert!(found.iter().any(|v| v.row == Some(overturned)), "{found:#?}");
    let v = check(&h.rows, &h.store(), &CFG).into_iter().find(|v| v.checker.name() == "observables-monotonic").unwrap();
    assert_says(&v, "meta 'cancelled' overturns the journal's final run_settle 'ok'");
}

/// A run's genesis or workflow binding changing within a generation (no delete between).
#[test]
fn observables_monotonic_catches_a_generation_that_changes_identity() {
    for (field, value) in [("genesis", "g-2"), ("workflow", "limit")] {
        let mut h = clean();
        let meta = |genesis: &str, workflow: &str| {
            let mut m = RunMeta::new(RunId::new("r1"), RunStatus::Running).with_segments(3);
            m.genesis = Some(genesis.into());
            m.extra.insert("workflow".into(), json!(workflow));
            Payload::Meta(m)
        };
        let changed = if field == "genesis" { meta(value, "happy") } else { meta("g-1", value) };
        let first = h.insert_after("meta-running-e3", |x| {
            x.call("w1", 3021, Surface::PutMeta, "r1", Some(&a3()), meta("g-1", "happy"), CallOutcome::Ok);
        });
        let second = h.insert_after("meta-running-e3", |x| {
            x.call("w1", 3022, Surface::PutMeta, "r1", Some(&a3()), changed, CallOutcome::Ok);
        });
        // `second` went in before `first`: the changed write comes first, the original after it.
        let v = only(&h, &h.store(), "observables-monotonic");
        assert!(v.explanation.contains(field), "{field}: {v:?}");
        assert_rows(&v, Some(first + 1), Some(second));
    }
}

/// The clean history's r1 as a workflow: one agent step `ask` answering "answer" (no tools), then
/// an approval `sign-off`; `more` appends further steps.
fn r1_script(more: Vec<ScriptStep>) -> OracleConfig {
    let ask = ScriptStep::Agent {
        key: "ask".into(),
        tool_turns: 0,
        answer: json!("answer"),
        max_turns: 4,
        max_tool_calls: 2,
    };
    let sign_off = ScriptStep::Suspend { key: "sign-off".into(), kind: "approval".into() };
    let steps = [vec![ask, sign_off], more].concat();
    OracleConfig { scripts: vec![Script { name: "r1-flow".into(), steps }], ..CFG }
}

/// Every meta write of r1 binds it to `r1-flow`, as the engine's boot meta does.
fn bound(mut h: H) -> H {
    for row in &mut h.rows {
        if let Event::Call(Call { run, payload: Payload::Meta(meta), .. }) = &mut row.event
            && run.as_str() == "r1"
        {
            meta.extra.insert("workflow".into(), json!("r1-flow"));
        }
    }
    h
}

fn model_findings(h: &H, cfg: &OracleConfig) -> Vec<Violation> {
    check(&h.rows, &h.store(), cfg).into_iter().filter(|v| v.checker.name() == "reference-model").collect()
}

#[test]
fn reference_model_passes_the_clean_history_walked_by_its_script() {
    let h = bound(clean());
    assert_eq!(check(&h.rows, &h.store(), &r1_script(vec![])), Vec::new());
}

/// A step dispatched before the approval before it was given; an answer the script never gives;
/// a turn the step cannot reach; an `ok` settle of an unfinished script: each is named at its row.
#[test]
fn reference_model_catches_runs_a_correct_engine_could_not_reach() {
    let act =
        ScriptStep::Agent { key: "act".into(), tool_turns: 0, answer: json!("done"), max_turns: 4, max_tool_calls: 2 };
    // `act` opens while `sign-off` waits for its approval.
    let mut h = bound(clean());
    let early = h.insert_after("settle-e2", |x| {
        x.append("w2", &b2(), 1525, JournalEntry::new(5, "agent", "running").with("key", json!("act")));
    });
    // Renumber the later r1 entries past the inserted seq 5.
    for name in ["resolution", "settle-e3"] {
        if let Payload::Entry(e) = &mut h.call_mut(name).payload {
            e.seq = Seq(e.seq.0 + 1);
        }
    }
    if let Payload::Entry(e) = &mut h.call_mut("resolution").payload {
        e.extra.insert("resolution".into(), json!({ "target": 3 }));
    }
    let found = model_findings(&h, &r1_script(vec![act.clone()]));
    assert!(found[0].explanation.contains("seq 5 opens step 'act' before step 'sign-off' finished"), "{found:#?}");
    assert_eq!(found[0].row, Some(early));

    // The terminal carries another answer than the script's.
    let mut h = bound(clean());
    if let Payload::Entry(e) = &mut h.call_mut("terminal-1").payload {
        e.extra.insert("value".into(), json!("a different answer"));
    }
    let found = model_findings(&h, &r1_script(vec![]));
    assert!(
        found[0]
            .explanation
            .contains("ends step 'ask' ok with \"a different answer\", where the script answers \"answer\""),
        "{found:#?}"
    );
    assert_eq!(found[0].row, Some(h.at("terminal-1")));

    // A second call turn of a step that answers on its first.
    let mut h = bound(clean());
    let past = h.insert_after("pay-e2", |x| {
        x.effect("w2", EffectKind::Call, &b2(), 1, 2);
    });
    let found = model_findings(&h, &r1_script(vec![]));
    assert!(
        found[0]
            .explanation
            .contains("paid call turn 2 of step 'ask' (dispatch running=1), where its script reaches at most 1"),
        "{found:#?}"
    );
    assert_eq!(found[0].row, Some(past));

    // The run settles ok although the script's last step never ran.
    let h = bound(clean());
    let found = model_findings(&h, &r1_script(vec![act]));
    assert!(
        found[0].explanation.contains("seq 6 settles the run ok while step 'act' of workflow 'r1-flow' never finished"),
        "{found:#?}"
    );
    assert_eq!(found[0].row, Some(h.at("settle-e3")));
}

/// A holder nothing disturbed lets its lease lapse (no renew within the ttl, no other holder):
/// its refused write is a healthy-holder violation; a stall of its node, even one that began
/// before the grant, excuses it.
#[test]
fn healthy_holder_catches_a_lease_let_lapse_with_no_fault() {
    let l = lease("r7", "w1.1", 1);
    let lapsed = |before: &dyn Fn(&mut H)| {
        let mut h = H::default();
        before(&mut h);
        h.acquire("w1", &l, 0).mark("grant");
        h.call("w1", 1_500, Surface::Append, "r7", Some(&l), Payload::Entry(running(1)), CallOutcome::Stale);
        h.mark("refused");
        h
    };
    let h = lapsed(&|_| {});
    let v = only(&h, &h.store(), "healthy-holder");
    assert_says(&v, "w1 let its lease w1.1@e1 on r7 lapse with no fault: its append at clock 1500");
    assert_rows(&v, Some(h.at("refused")), Some(h.at("grant")));
    let stalled = lapsed(&|h| {
        h.push("w1", Event::Fault { kind: Disruption::Stall, run: None, epoch: None, detail: "w1 stalls".into() });
    });
    assert_eq!(check(&stalled.rows, &stalled.store(), &CFG), Vec::new());
    // A clock jump the world records on the holder's behalf (its detail names the node first)
    // excuses it too; one aimed at another node does not.
    let jumped = |node: &str| {
        let detail = format!("{node} +600ms at 1400ms");
        lapsed(&|h| {
            h.push(
                "world",
                Event::Fault { kind: Disruption::ClockJump, run: None, epoch: None, detail: detail.clone() },
            );
        })
    };
    assert_eq!(check(&jumped("w1").rows, &jumped("w1").store(), &CFG), Vec::new());
    let elsewhere = jumped("w2");
    only(&elsewhere, &elsewhere.store(), "healthy-holder");
}

#[test]
fn cancel_asked_catches_a_cancel_nobody_asked_for() {
    let l = lease("r8", "w1.1", 1);
    let cancelled = |before: &dyn Fn(&mut H)| {
        let mut h = H::default();
        h.acquire("w1", &l, 0).mark("grant").put_meta("w1", &l, 10, RunStatus::Running, 1);
        before(&mut h);
        h.append("w1", &l, 20, settle(1, RunStatus::Cancelled, 1)).mark("settle");
        h.put_meta("w1", &l, 30, RunStatus::Cancelled, 1).lease_call("w1", Surface::Release, &l, 40);
        h
    };
    let h = cancelled(&|_| {});
    let v = only(&h, &h.store(), "cancel-asked");
    assert_says(&v, "w1 settled run r8 cancelled (seq 1) under w1.1@e1");
    assert_rows(&v, Some(h.at("settle")), None);
    // Each thing that may ask excuses it: the client's cancel, a stop of the settling node, a
    // failed renew of the settling lease.
    let client = cancelled(&|h| {
        h.push("client", Event::Request(Request::Cancel { run: RunId::new("r8") }));
    });
    let stopped = cancelled(&|h| {
        h.push("w1", Event::Request(Request::Stop));
    });
    let renew_failed = cancelled(&|h| {
        h.lease_call("w1", Surface::Renew, &l, 15).call_mut_last().outcome = CallOutcome::Busy;
    });
    // A fenced write of the settling lease refused stale (its holder's clock had passed the
    // expiry, then jumped back, so the settle still landed): ownership lost, which cancels.
    let refused = cancelled(&|h| {
        h.push(
            "world",
            Event::Fault { kind: Disruption::ClockJump, run: None, epoch: None, detail: "w1 -1490ms".into() },
        );
        h.call("w1", 1_500, Surface::Append, "r8", Some(&l), Payload::Entry(running(2)), CallOutcome::Stale);
    });
    for h in [client, stopped, renew_failed, refused] {
        assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new());
    }
    // A busy body write is not lease loss: a cancel on it is nobody's.
    let busy = cancelled(&|h| {
        h.call("w1", 15, Surface::Append, "r8", Some(&l), Payload::Entry(running(2)), CallOutcome::Busy);
    });
    only(&busy, &busy.store(), "cancel-asked");
    // Another run's cancel, another node's stop, a renew that went through excuse nothing.
    let elsewhere = cancelled(&|h| {
        h.push("client", Event::Request(Request::Cancel { run: RunId::new("r9") }));
        h.push("w2", Event::Request(Request::Stop));
        h.lease_call("w1", Surface::Renew, &l, 15);
    });
    only(&elsewhere, &elsewhere.store(), "cancel-asked");
}

#[test]
fn failed_write_ends_catches_a_tenure_that_goes_on_after_a_storage_error() {
    let l = lease("r8", "w1.1", 1);
    let failed = |after: &dyn Fn(&mut H)| {
        let mut h = H::default();
        h.acquire("w1", &l, 0).put_meta("w1", &l, 10, RunStatus::Running, 1).append("w1", &l, 20, running(1));
        h.effect("w1", EffectKind::Call, &l, 1, 1);
        h.put_blob("w1", &l, 30, "r8/ckpt/1", b"turn-1").mark("failed");
        h.call_mut_last().outcome = CallOutcome::Error("storage");
        after(&mut h);
        h
    };
    // It pays the next turn as if the checkpoint were only an optimisation.
    let paid = failed(&|h| {
        h.effect("w1", EffectKind::Call, &l, 1, 2).mark("paid");
    });
    let found: Vec<Violation> = check(&paid.rows, &paid.store(), &CFG)
        .into_iter()
        .filter(|v| v.checker.name() == "failed-write-ends")
        .collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_says(&found[0], "w1 paid Call 2 of run r8 (running seq 1) at epoch 1 after its put_blob");
    assert_rows(&found[0], Some(paid.at("paid")), Some(paid.at("failed")));
    // It settles ok over the failed write.
    let settled = failed(&|h| {
        h.append("w1", &l, 40, settle(2, RunStatus::Ok, 1)).mark("settle");
    });
    let found: Vec<Violation> = check(&settled.rows, &settled.store(), &CFG)
        .into_iter()
        .filter(|v| v.checker.name() == "failed-write-ends")
        .collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_says(&found[0], "w1 settled run r8 ok under w1.1@e1 after its put_blob failed");
    // What the contracts ask: the run settles error, and nothing more is paid.
    let ended = failed(&|h| {
        h.append("w1", &l, 40, settle(2, RunStatus::Error, 1));
    });
    assert!(check(&ended.rows, &ended.store(), &CFG).iter().all(|v| v.checker.name() != "failed-write-ends"));
    // Another tenure of the run is not held to it.
    let other = lease("r8", "w2.1", 2);
    let next = failed(&|h| {
        h.acquire("w2", &other, 5_000).effect("w2", EffectKind::Call, &other, 1, 2);
    });
    assert!(check(&next.rows, &next.store(), &CFG).iter().all(|v| v.checker.name() != "failed-write-ends"));
}

#[test]
fn delete_finished_catches_a_leased_delete_of_a_waiting_run() {
    let l = lease("r8", "w1.1", 1);
    let bound = |status: RunStatus| {
        let mut meta = RunMeta::new(l.run.clone(), status).with_segments(1);
        meta.extra.insert("workflow".into(), serde_json::json!("approval"));
        Payload::Meta(meta)
    };
    let deleted = |status: RunStatus| {
        let mut h = H::default();
        h.acquire("w1", &l, 0);
        h.call("w1", 10, Surface::PutMeta, "r8", Some(&l), bound(status), CallOutcome::Ok);
        h.lease_call("w1", Surface::Delete, &l, 20).mark("delete");
        h
    };
    let waiting = deleted(RunStatus::Suspended);
    let found: Vec<Violation> = check(&waiting.rows, &waiting.store(), &CFG)
        .into_iter()
        .filter(|v| v.checker.name() == "delete-finished")
        .collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_says(
        &found[0],
        "w1 deleted run r8 under w1.1@e1 while it was not finished (meta suspended, last settle none)",
    );
    assert_rows(&found[0], Some(waiting.at("delete")), None);
    // A finished run may go; so may a run no meta bound to a workflow (a zombie's victim).
    let finished = deleted(RunStatus::Ok);
    assert!(check(&finished.rows, &finished.store(), &CFG).iter().all(|v| v.checker.name() != "delete-finished"));
    let mut unbound = H::default();
    unbound.acquire("w1", &l, 0).put_meta("w1", &l, 10, RunStatus::Running, 1).lease_call(
        "w1",
        Surface::Delete,
        &l,
        20,
    );
    assert!(check(&unbound.rows, &unbound.store(), &CFG).iter().all(|v| v.checker.name() != "delete-finished"));
}

#[test]
fn worker_candidacy_catches_a_sweep_that_resumes_a_settled_run() {
    let (done, resumed) = (lease("r8", "w1.1", 1), lease("r8", "w2.1", 2));
    let settled_then = |node: &str, l: &Lease| {
        let mut h = H::default();
        h.acquire("w1", &done, 0).put_meta("w1", &done, 10, RunStatus::Running, 1);
        h.put_meta("w1", &done, 20, RunStatus::Ok, 1).mark("settled").lease_call("w1", Surface::Release, &done, 30);
        h.acquire(node, l, 40).put_meta(node, l, 50, RunStatus::Running, 2).mark("boot");
        h
    };
    let swept = settled_then("w2", &resumed);
    let found: Vec<Violation> = check(&swept.rows, &swept.store(), &CFG)
        .into_iter()
        .filter(|v| v.checker.name() == "worker-candidacy")
        .collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_says(&found[0], "worker w2 booted a segment of run r8 under w2.1@e2 although its meta was already ok");
    assert_rows(&found[0], Some(swept.at("boot")), Some(swept.at("settled")));
    // The client resuming a run it drove is not a sweep.
    let client = lease("r8", "client.1", 2);
    let reattached = settled_then("client", &client);
    assert!(check(&reattached.rows, &reattached.store(), &CFG).iter().all(|v| v.checker.name() != "worker-candidacy"));
}

/// A load and a meta read after `name`, seeing `journal` entries and `meta`.
fn reads_after(h: &mut H, name: &str, run: &str, journal: usize, meta: Option<RunStatus>) -> usize {
    use crate::history::Read;
    h.insert_after(name, |x| {
        x.call("w4", 3600, Surface::Load, run, None, Payload::None, CallOutcome::Ok);
        x.call_mut_last().read = Some(Read::Journal(journal));
        x.call("w4", 3600, Surface::GetMeta, run, None, Payload::None, CallOutcome::Ok);
        x.call_mut_last().read = Some(Read::Meta(meta));
    })
}

/// Every read sees the writes recorded before it: r2's second generation has three entries and a
/// running meta after its settle; a load that saw one entry fewer is a write seen half done.
#[test]
fn linearizable_reads_hold_each_read_to_the_writes_before_it() {
    let mut h = clean();
    reads_after(&mut h, "settle-r2", "r2", 3, Some(RunStatus::Running));
    assert_eq!(check(&h.rows, &h.store(), &CFG), vec![]);
    let mut h = clean();
    let at = reads_after(&mut h, "settle-r2", "r2", 2, Some(RunStatus::Running));
    let v = only(&h, &h.store(), "linearizable-reads");
    assert_rows(&v, Some(at), None);
    assert_says(&v, "r2: load by w4 saw a journal of 2 entries, but the writes before it leave 3");
    let mut h = clean();
    reads_after(&mut h, "settle-r2", "r2", 3, Some(RunStatus::Ok));
    assert_says(
        &only(&h, &h.store(), "linearizable-reads"),
        "saw a ok meta, but the writes before it leave a running meta",
    );
}

/// A delete whose caller died inside it happened whole or not at all: reads after it may see the
/// run whole or gone, never its journal gone under its meta (the planted `delete-in-pieces`).
#[test]
fn linearizable_reads_take_a_cut_delete_whole_or_not_at_all() {
    let cut = |journal, meta| {
        let mut h = clean();
        h.call_mut("delete-r2").outcome = CallOutcome::Indeterminate;
        reads_after(&mut h, "delete-r2", "r2", journal, meta);
        violations_of(&h, "linearizable-reads")
    };
    assert_eq!(cut(1, Some(RunStatus::Running)), vec![], "not done");
    assert_eq!(cut(0, None), vec![], "done whole");
    let half = cut(0, Some(RunStatus::Running));
    assert_eq!(half.len(), 1, "{half:#?}");
    assert_says(&half[0], "(whichever of the cut calls #");
    assert_eq!(half[0].cause, Some(clean().at("delete-r2")));
}
