//! The lease checkers (`leases.rs`): `no-stale-acceptance`, `epochs-increasing`, `one-live-lease`
//! and `typed-rejections`.

use fencesim_store::{Epoch, RunStatus};

use super::fixtures::{CFG, a3, assert_rows, assert_says, b2, clean, failing, lease, only, role_of, running};
use crate::check;
use crate::history::{CallOutcome, Event, Payload, Surface};

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
