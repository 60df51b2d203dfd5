//! `delete-finished` (`deletes.rs`): a run is deleted under a lease only once finished.

use fencesim_store::{RunMeta, RunStatus};

use super::fixtures::{CFG, H, assert_rows, assert_says, lease};
use crate::history::{CallOutcome, Payload, Surface};
use crate::{Violation, check};

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
