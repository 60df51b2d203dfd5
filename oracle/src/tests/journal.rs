//! The journal checkers (`journal.rs`): `journal-seq-order`, `one-settle-per-segment`,
//! `meta-not-ahead` and `no-checkpoint-regression`.

use fencesim_store::{RunId, RunStatus};

use super::fixtures::{
    CFG, a1, a3, assert_rows, assert_says, b2, clean, failing, lease, names, only, running, settle,
    settle_cut_then_adopted, with_cut_settle,
};
use crate::check;
use crate::history::{CallOutcome, Payload, Surface};

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

#[test]
fn meta_not_ahead_accepts_a_meta_over_a_cut_settle_that_landed() {
    let (h, _) = settle_cut_then_adopted();
    assert_eq!(check(&h.rows, &with_cut_settle(&h), &CFG), vec![], "the successor adopted the landed settle");
}

/// The same meta over a cut settle that did not land (the final journal lacks it) is ahead.
#[test]
fn meta_not_ahead_catches_a_meta_over_a_cut_settle_that_did_not_land() {
    let (h, meta) = settle_cut_then_adopted();
    let found = check(&h.rows, &h.store(), &CFG);
    let ahead: Vec<_> = found.iter().filter(|v| v.checker.name() == "meta-not-ahead").collect();
    assert_eq!(ahead.len(), 2, "{found:#?}");
    assert_says(ahead[0], "terminal put_meta ok of r1 accepted under w2.2@e4 ahead of the journal");
    assert_says(ahead[0], "its last run_settle (seq=4) says suspended");
    assert_rows(ahead[0], Some(meta), Some(h.at("settle-e2")));
    assert_says(ahead[1], "final meta of r1 is ok but the journal's last run_settle (seq=4) says suspended");
}

/// A cut delete may land after calls recorded after its row (a soak records a cut call at its
/// begin): an administrator's purge that began before the cut settle and landed at the end left
/// no journal to tell whether the settle landed, so the successor's adopting meta is not judged
/// ahead of it.
#[test]
fn meta_not_ahead_takes_a_cut_settle_as_possibly_landed_under_any_cut_delete() {
    let (mut h, _) = settle_cut_then_adopted();
    h.insert_after("meta-running-e3", |x| {
        x.call("admin", 3025, Surface::Delete, "r1", None, Payload::None, CallOutcome::Indeterminate);
    });
    let mut purged = h.store();
    purged.runs.remove(&RunId::new("r1"));
    let found = check(&h.rows, &purged, &CFG);
    assert!(found.iter().all(|v| v.checker.name() != "meta-not-ahead"), "{found:#?}");
}
