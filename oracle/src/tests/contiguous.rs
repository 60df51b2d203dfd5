//! `seq-contiguous` (`contiguous.rs`): a journal's hole must be one a failed append explains.

use fencesim_store::RunStatus;

use super::fixtures::{CFG, a3, assert_rows, assert_says, clean, failing, settle};
use crate::check;
use crate::history::{CallOutcome, Payload};

/// A journal with a hole no failed append explains fails `seq-contiguous` at the entry after it;
/// the same hole left by a refused append of that seq passes.
#[test]
fn seq_contiguous_catches_a_gap_only_a_lost_entry_explains() {
    let mut h = clean();
    h.call_mut("settle-e3").payload = Payload::Entry(settle(7, RunStatus::Ok, 3));
    let found = failing(&h, &h.store(), &["seq-contiguous"]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_says(&found[0], "journal of r1 jumps from 5 to seq 7, and no append of seq 6..6 failed or was refused");
    assert_rows(&found[0], Some(h.at("settle-e3")), None);

    let busy = h.insert_after("resolution", |x| {
        x.append("w1", &a3(), 3015, settle(6, RunStatus::Ok, 3));
    });
    h.call_at(busy).outcome = CallOutcome::Busy;
    assert_eq!(check(&h.rows, &h.store(), &CFG), vec![]);
}
