//! The oracle as a whole: the clean history passes every checker, the descriptors are the one
//! list, `check` caps and orders what it reports, judges a scope, refuses a history the harness
//! built wrong and never panics on arbitrary input.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{RunId, RunMeta, RunStatus};

use super::fixtures::{CFG, clean, names, running, settle};
use crate::history::{Event, RunState, Snapshot};
use crate::{
    CHECKERS, Checker, DESCRIPTORS, MAX_PER_CHECKER, OracleConfig, Scope, Violation, check, settled_or_waiting,
    store_checkers,
};

#[test]
fn clean_history_passes_every_checker() {
    let h = clean();
    let snapshot = h.store();
    assert_eq!(check(&h.rows, &snapshot, &CFG), Vec::new());
    assert!(settled_or_waiting(&snapshot));
    assert_eq!(snapshot.runs[&RunId::new("r2")].blobs.len(), 1, "a deleted run's blob stays (T6)");
}

/// Every checker's invariant is one line, as reports print it. (That each is listed once is
/// `the_descriptors_are_the_one_list_of_checkers`; their order is pinned by docs/scenarios.md's
/// checker table, `sim/tests/it/doc_counts.rs`.)
#[test]
fn every_invariant_is_one_line() {
    assert!(CHECKERS.iter().all(|c| !c.invariant().is_empty() && !c.invariant().contains('\n')));
}

/// The descriptors are the one list: each checker once, `Checker::ORACLE` and `CHECKERS` are
/// theirs, and the store scope holds exactly the store's fencing promises, in order.
#[test]
fn the_descriptors_are_the_one_list_of_checkers() {
    let unique: std::collections::BTreeSet<Checker> = DESCRIPTORS.iter().map(|d| d.checker).collect();
    assert_eq!(unique.len(), DESCRIPTORS.len(), "a checker is described twice");
    assert_eq!(Checker::ORACLE, CHECKERS);
    for d in DESCRIPTORS {
        assert_eq!(d.checker.invariant(), d.invariant, "{}", d.checker);
    }
    let store: Vec<&str> = store_checkers().map(Checker::name).collect();
    assert_eq!(
        store,
        [
            "no-stale-acceptance",
            "epochs-increasing",
            "one-live-lease",
            "serial-history",
            "journal-seq-order",
            "seq-contiguous",
            "typed-rejections",
            "linearizable-reads",
        ]
    );
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
