//! The outcome checkers (`outcomes.rs`): `repay-bound`, `liveness` (and the early stop's reading
//! of it from a store) and `honest-outcome`.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, JournalEntry, JournalStore, Lease, MemoryStore, RunId, RunMeta, RunStatus};

use super::fixtures::{
    CFG, a1, assert_rows, assert_says, b2, boot, clean, failing, lease, names, only, resolution, running, settle,
    settle_cut_then_adopted, suspension, terminal, violations_of, with_cut_settle,
};
use crate::history::{CallOutcome, EffectKind, Event, Payload, RunState, SegmentResult, Snapshot, Surface};
use crate::{OracleConfig, check, settled_or_waiting, store_settled_or_waiting};

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
    use crate::outcomes::run_liveness;
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

/// A successor that replayed a cut `run_settle` that landed adopts it (contracts 3.6) and
/// reports its status: backed by the settle the dead tenure left. Over a cut settle that did not
/// land, the same report is not.
#[test]
fn honest_outcome_takes_a_cut_settle_that_landed_as_backing() {
    let (h, _) = settle_cut_then_adopted();
    assert_eq!(check(&h.rows, &with_cut_settle(&h), &CFG), vec![], "the cut settle landed");
    let found = check(&h.rows, &h.store(), &CFG);
    assert_eq!(names(&found), BTreeSet::from(["honest-outcome", "liveness", "meta-not-ahead"]), "{found:#?}");
    let v = found.iter().find(|v| v.checker.name() == "honest-outcome").unwrap();
    assert_says(v, "w2 reported r1 ok without a run_settle, but the journal's last run_settle");
}
