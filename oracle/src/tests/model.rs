//! The views the checkers share (`model.rs`): the lease replay through indeterminate and cut
//! calls, stored entries and metas compared field by field, runs numbered in name order.

use std::collections::BTreeSet;

use fencesim_store::{JournalEntry, RunId, RunMeta, RunStatus};
use serde_json::json;

use super::fixtures::{CFG, a1, assert_rows, assert_says, clean, lease, names, running, terminal};
use crate::history::{CallOutcome, Event, Payload, Role, Row, SegmentResult, Surface};
use crate::{OracleConfig, Scope, check};

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

/// A delete cut by its caller's death (a SIGKILLed soak writer's stale probe) under a lease that
/// was not the live holder's must have been refused by a correct store: it leaves the live
/// holder's row alone. Taking it as committed judged the holder's next writes unleased (the
/// release soak's false `put_meta on soak-run accepted under soak-w4-g6@e91, but soak-run had no
/// lease row`, issue 38), and let a grant inside the holder's ttl pass unjudged.
#[test]
fn lease_replay_keeps_the_live_holder_through_a_cut_stale_delete() {
    for (probe, stale) in [("dead", a1()), ("forged", lease("r1", "forger-w9", 3))] {
        for grant in [false, true] {
            let mut h = clean();
            let cut = h.insert_after("grant-e2", |x| {
                x.lease_call("w9", Surface::Delete, &stale, 1205);
                x.call_mut_last().outcome = CallOutcome::Indeterminate;
                if grant {
                    x.acquire("w8", &lease("r1", "w8.1", 9), 1207);
                }
            });
            let found = check(&h.rows, &h.store(), &CFG);
            if !grant {
                assert_eq!(found, vec![], "{probe}: the holder's writes after the cut delete are its own");
                continue;
            }
            let v = found.iter().find(|v| v.checker.name() == "one-live-lease").expect("a grant inside the ttl");
            assert_rows(v, Some(cut + 1), Some(h.at("grant-e2")));
        }
    }
}

/// A release or delete cut under the live holder's lease, or an unleased delete cut (an
/// administrator's purge), may or may not have removed the row: a fenced call under the row's
/// lease after it may be accepted or refused as stale, but not refused otherwise.
#[test]
fn lease_replay_holds_a_row_a_cut_delete_may_have_removed_in_doubt() {
    let store = OracleConfig { scope: Scope::Store, ..CFG };
    for outcome in [CallOutcome::Ok, CallOutcome::Stale] {
        let mut h = clean();
        let cut = h.insert_after("grant-e2", |x| {
            x.call("admin", 1205, Surface::Delete, "r1", None, Payload::None, CallOutcome::Indeterminate);
        });
        let put_meta = cut + 1;
        h.call_at(put_meta).outcome = outcome.clone();
        assert_eq!(check(&h.rows, &h.store(), &store), vec![], "the holder's put_meta {outcome}");
        h.call_at(put_meta).outcome = CallOutcome::RunMismatch;
        let found = check(&h.rows, &h.store(), &store);
        assert_eq!(names(&found), BTreeSet::from(["typed-rejections"]), "{found:#?}");
        assert_says(&found[0], "unless an indeterminate acquire, release or delete took it");
    }
}

/// An acquire cut by its caller's death may have been granted: a soak writer whose clock runs
/// ahead (`--skew-ms`) is granted by the store inside the holder's ttl by the holder's clock, and
/// is SIGKILLed before it logs the grant. The holder's next fenced call may then be refused as
/// stale, and only as stale; without the cut acquire the same refusal is a live holder's.
#[test]
fn lease_replay_holds_the_row_a_cut_acquire_may_have_replaced_in_doubt() {
    let store = OracleConfig { scope: Scope::Store, ..CFG };
    for outcome in [CallOutcome::Ok, CallOutcome::Stale, CallOutcome::RunMismatch] {
        let mut h = clean();
        let cut = h.insert_after("grant-e2", |x| {
            x.call("w9", 1205, Surface::Acquire, "r1", None, Payload::None, CallOutcome::Indeterminate);
            x.call_mut_last().owner = Some("w9.1".into());
        });
        let put_meta = cut + 1;
        h.call_at(put_meta).outcome = outcome.clone();
        let found = check(&h.rows, &h.store(), &store);
        if outcome == CallOutcome::RunMismatch {
            assert_eq!(names(&found), BTreeSet::from(["typed-rejections"]), "{found:#?}");
            assert_says(&found[0], "expected stale (its lease was the live holder, unless an indeterminate acquire");
            continue;
        }
        assert_eq!(found, vec![], "the holder's put_meta {outcome} after a cut acquire");
        h.call_at(cut).outcome = CallOutcome::HeldBy { owner: "w2.1".into(), epoch: fencesim_store::Epoch(2) };
        let found = check(&h.rows, &h.store(), &store);
        if outcome == CallOutcome::Stale {
            assert_eq!(names(&found), BTreeSet::from(["typed-rejections"]), "{found:#?}");
            assert_says(&found[0], "the live holder's put_meta was rejected as stale");
        } else {
            assert_eq!(found, vec![], "an accepted put_meta after a refused acquire");
        }
    }
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
