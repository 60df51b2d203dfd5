//! `delete-finished` (`deletes.rs`): a run is deleted under a lease only once finished.

use fencesim_store::{Lease, RunMeta, RunStatus};

use super::fixtures::{CFG, H, assert_rows, assert_says, lease, running, settle};
use crate::history::{CallOutcome, Payload, Surface};
use crate::{Violation, check};

/// A meta of `status` for `l`'s run that binds it to a workflow: a workload run.
fn bound_meta(l: &Lease, status: RunStatus) -> Payload {
    let mut meta = RunMeta::new(l.run.clone(), status).with_segments(1);
    meta.extra.insert("workflow".into(), serde_json::json!("approval"));
    Payload::Meta(meta)
}

#[test]
fn delete_finished_catches_a_leased_delete_of_a_waiting_run() {
    let l = lease("r8", "w1.1", 1);
    let bound = |status| bound_meta(&l, status);
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

/// A terminal meta write or `run_settle` append cut by its caller's death may have landed, and a
/// retention that read it landed may delete the run under a lease of its own. A cut write that
/// was not terminal finishes nothing.
#[test]
fn delete_finished_counts_a_cut_terminal_write_that_may_have_landed() {
    let (l1, l2) = (lease("r8", "w1.1", 1), lease("r8", "w2.1", 2));
    let bound = |status| bound_meta(&l1, status);
    let cut_then_deleted = |cut: Payload| {
        let mut h = H::default();
        h.acquire("w1", &l1, 0);
        h.call("w1", 10, Surface::PutMeta, "r8", Some(&l1), bound(RunStatus::Running), CallOutcome::Ok);
        h.append("w1", &l1, 20, running(1));
        let surface = if matches!(cut, Payload::Meta(_)) { Surface::PutMeta } else { Surface::Append };
        h.call("w1", 30, surface, "r8", Some(&l1), cut, CallOutcome::Indeterminate);
        h.acquire("w2", &l2, 1100).lease_call("w2", Surface::Delete, &l2, 1110);
        let found: Vec<&'static str> = check(&h.rows, &h.store(), &CFG)
            .iter()
            .map(|v| v.checker.name())
            .filter(|n| *n == "delete-finished")
            .collect();
        found
    };
    assert_eq!(cut_then_deleted(bound(RunStatus::Ok)), Vec::<&str>::new(), "a cut terminal meta");
    assert_eq!(cut_then_deleted(Payload::Entry(settle(2, RunStatus::Ok, 1))), Vec::<&str>::new(), "a cut settle");
    assert_eq!(cut_then_deleted(bound(RunStatus::Suspended)), vec!["delete-finished"], "a cut suspended meta");
    assert_eq!(cut_then_deleted(Payload::Entry(running(2))), vec!["delete-finished"], "a cut running entry");
}
