//! `linearizable-reads` (`reads.rs`): every read sees the writes recorded before it.

use fencesim_store::RunStatus;

use super::fixtures::{CFG, H, assert_rows, assert_says, clean, only, violations_of};
use crate::check;
use crate::history::{CallOutcome, Payload, Surface};

/// A load and a meta read after `name`, seeing `journal` entries and `meta`.
fn reads_after(h: &mut H, name: &str, run: &str, journal: usize, meta: Option<RunStatus>) -> usize {
    use crate::history::Read;
    h.insert_after(name, |x| {
        x.call("w4", 3600, Surface::Load, run, None, Payload::None, CallOutcome::Ok);
        x.call_mut_last().read = Some(Read::Journal(journal));
        x.call("w4", 3600, Surface::GetMeta, run, None, Payload::None, CallOutcome::Ok);
        x.call_mut_last().read = Some(Read::Meta(meta));
    })
}

/// Every read sees the writes recorded before it: r2's second generation has three entries and a
/// running meta after its settle; a load that saw one entry fewer is a write seen half done.
#[test]
fn linearizable_reads_hold_each_read_to_the_writes_before_it() {
    let mut h = clean();
    reads_after(&mut h, "settle-r2", "r2", 3, Some(RunStatus::Running));
    assert_eq!(check(&h.rows, &h.store(), &CFG), vec![]);
    let mut h = clean();
    let at = reads_after(&mut h, "settle-r2", "r2", 2, Some(RunStatus::Running));
    let v = only(&h, &h.store(), "linearizable-reads");
    assert_rows(&v, Some(at), None);
    assert_says(&v, "r2: load by w4 saw a journal of 2 entries, but the writes before it leave 3");
    let mut h = clean();
    reads_after(&mut h, "settle-r2", "r2", 3, Some(RunStatus::Ok));
    assert_says(
        &only(&h, &h.store(), "linearizable-reads"),
        "saw a ok meta, but the writes before it leave a running meta",
    );
}

/// A delete whose caller died inside it happened whole or not at all: reads after it may see the
/// run whole or gone, never its journal gone under its meta (the planted `delete-in-pieces`).
#[test]
fn linearizable_reads_take_a_cut_delete_whole_or_not_at_all() {
    let cut = |journal, meta| {
        let mut h = clean();
        h.call_mut("delete-r2").outcome = CallOutcome::Indeterminate;
        reads_after(&mut h, "delete-r2", "r2", journal, meta);
        violations_of(&h, "linearizable-reads")
    };
    assert_eq!(cut(1, Some(RunStatus::Running)), vec![], "not done");
    assert_eq!(cut(0, None), vec![], "done whole");
    let half = cut(0, Some(RunStatus::Running));
    assert_eq!(half.len(), 1, "{half:#?}");
    assert_says(&half[0], "(whichever of the cut calls #");
    assert_eq!(half[0].cause, Some(clean().at("delete-r2")));
}
