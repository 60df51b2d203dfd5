//! `serial-history` (`serial.rs`): the snapshot is what the accepted mutations, replayed
//! serially, leave.

use std::collections::BTreeSet;

use fencesim_store::{RunId, RunMeta, RunStatus};

use super::fixtures::{CFG, H, a1, assert_rows, assert_says, clean, failing, lease, names, only, running};
use crate::history::CallOutcome;
use crate::{OracleConfig, Scope, check};

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
    let found = crate::serial::serial_history(&crate::Context::new(&h.rows, &snapshot, &CFG));
    let inversion = found.iter().find(|v| v.explanation.contains("epoch inversion")).expect("an inversion");
    assert_says(inversion, "epoch inversion in journal of r1: seq=7 agent/running");
    assert_rows(inversion, Some(stale), Some(h.at("settle-e3")));
    let divergence = found.iter().find(|v| v.explanation.contains("diverges at position 1")).expect("a divergence");
    assert_says(divergence, "store holds seq=2 agent/ok");
    assert_says(divergence, "the serial history has seq=7 agent/running");
    assert_rows(divergence, Some(stale), Some(h.at("terminal-1")));
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

/// A store soak funnels every writer's cut calls into one run: more than the search covers. The
/// fates the store decides are settled before the search, so cut appends that landed past the
/// first 12 are not taken as lost (a false `serial-history` before they were settled).
#[test]
fn serial_history_settles_the_fates_the_store_decides_before_its_search() {
    let store = OracleConfig { scope: Scope::Store, ..CFG };
    let l = lease("r9", "w1.1", 1);
    let mut h = H::default();
    h.acquire("w1", &l, 0);
    for seq in 1..=14 {
        h.append("w1", &l, seq * 10, running(seq)).call_mut_last().outcome = CallOutcome::Indeterminate;
    }
    let mut snapshot = h.store();
    let journal = &mut snapshot.runs.get_mut(&RunId::new("r9")).unwrap().journal;
    journal.extend((1..=14).map(running));
    assert_eq!(check(&h.rows, &snapshot, &store), vec![], "all 14 cut appends landed");
    // The first 10 landed, the rest did not: settled too.
    snapshot.runs.get_mut(&RunId::new("r9")).unwrap().journal.truncate(10);
    assert_eq!(check(&h.rows, &snapshot, &store), vec![], "10 of 14 landed");
    // A journal no fate explains is still a violation: the entry at seq 10 stored twice.
    snapshot.runs.get_mut(&RunId::new("r9")).unwrap().journal.push(running(10));
    let found = check(&h.rows, &snapshot, &store);
    assert!(names(&found).contains("serial-history"), "{found:#?}");
}

/// Cut calls the store cannot decide (metas no accepted write follows) beyond the search's bound
/// are taken as not committed, and the violation says so: it may be a false alarm.
#[test]
fn serial_history_says_when_it_did_not_search_every_cut_call() {
    let store = OracleConfig { scope: Scope::Store, ..CFG };
    let l = lease("r9", "w1.1", 1);
    // `count` cut metas, segments up to 14: the store holds the last one's.
    let cut_metas = |count: u32| {
        let mut h = H::default();
        h.acquire("w1", &l, 0);
        for n in 15 - count..=14 {
            h.put_meta("w1", &l, i64::from(n) * 10, RunStatus::Running, n).call_mut_last().outcome =
                CallOutcome::Indeterminate;
        }
        h
    };
    let mut snapshot = cut_metas(14).store();
    let run = snapshot.runs.entry(RunId::new("r9")).or_default();
    run.meta = Some(RunMeta::new(RunId::new("r9"), RunStatus::Running).with_segments(14));
    let h = cut_metas(14);
    let found = check(&h.rows, &snapshot, &store);
    assert_eq!(names(&found), BTreeSet::from(["serial-history"]), "{found:#?}");
    assert_says(&found[0], "2 more were not searched and taken as not committed, so this may be a false alarm");
    // Within the bound the same store passes: the last meta is among those searched.
    let h = cut_metas(12);
    assert_eq!(check(&h.rows, &snapshot, &store), vec![], "12 cut metas, the last one landed");
}
