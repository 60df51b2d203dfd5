//! `seq-contiguous`: every stored journal numbers its entries 1, 2, ..., n, except where an
//! append the store did not accept left a hole (contracts 9.8: the store requires seqs to
//! strictly increase, not to be contiguous, J5; a writer that appends at its tail + 1 leaves a
//! gap only after an append of its that failed). So a journal that starts above 1, or jumps over
//! a seq no refused, failed or indeterminate append of that run ever asked for, lost an accepted
//! entry or placed one wrong. It judges worlds, the engine soak and the store soak alike (their
//! writers all append at the tail + 1).

use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{JournalEntry, RunId};

use super::model::index_of;
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{Payload, Surface};

pub(super) const SEQ_CONTIGUOUS: Checker = Checker::SeqContiguous;
pub(super) const SEQ_CONTIGUOUS_CHECK: Descriptor = Descriptor {
    checker: SEQ_CONTIGUOUS,
    scope: Scope::Store,
    invariant: "every stored journal numbers its entries 1..n, a gap only where an append of that seq failed or was refused (2.7.4, J5, 9.8)",
    check: seq_contiguous,
};

pub(super) fn seq_contiguous(ctx: &Context) -> Vec<Violation> {
    // Per run, the seqs of its appends the store did not accept: holes they may have left.
    let mut holes: BTreeMap<&RunId, BTreeSet<i64>> = BTreeMap::new();
    for row in ctx.rows {
        let Some(call) = row.call() else { continue };
        if call.surface == Surface::Append
            && !call.outcome.is_ok()
            && let Payload::Entry(entry) = &call.payload
        {
            holes.entry(&call.run).or_default().insert(entry.seq.0);
        }
    }
    let mut found = Vec::new();
    for (run, state) in &ctx.snapshot.runs {
        let excused = |seq: i64| holes.get(run).is_some_and(|h| h.contains(&seq));
        let Some((expected, at)) = first_gap(&state.journal, excused) else { continue };
        let entry = &state.journal[at];
        let what = if expected == 1 { "starts at".to_owned() } else { format!("jumps from {} to", expected - 1) };
        found.push(Violation::new(
            SEQ_CONTIGUOUS,
            format!(
                "journal of {run} {what} seq {}, and no append of seq {expected}..{} failed or was refused",
                entry.seq,
                entry.seq.0 - 1
            ),
            index_of(ctx.rows, ctx.writers.entry(run, entry)),
            None,
        ));
    }
    found
}

/// The first hole of a journal: the seq expected next and the position of the entry that skips
/// it, unless `excused` holds for every seq skipped (an append of it failed). A journal with no
/// hole, or only excused ones, has none.
pub fn first_gap(journal: &[JournalEntry], excused: impl Fn(i64) -> bool) -> Option<(i64, usize)> {
    let mut expected = 1;
    for (at, entry) in journal.iter().enumerate() {
        let seq = entry.seq.0;
        if seq > expected && !(expected..seq).all(&excused) {
            return Some((expected, at));
        }
        expected = seq.saturating_add(1);
    }
    None
}
