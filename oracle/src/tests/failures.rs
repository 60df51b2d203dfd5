//! `failed-write-ends` (`failures.rs`): a tenure that met a storage error on a write pays
//! and settles nothing more under its lease.

use fencesim_store::RunStatus;

use super::fixtures::{CFG, H, assert_rows, assert_says, lease, running, settle};
use crate::history::{CallOutcome, EffectKind};
use crate::{Violation, check};

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
