//! `worker-candidacy` (`candidacy.rs`): no segment boots over a terminal meta of its generation.

use fencesim_store::{Lease, RunStatus};

use super::fixtures::{CFG, H, assert_rows, assert_says, lease};
use crate::history::Surface;
use crate::{Violation, check};

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
