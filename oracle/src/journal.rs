//! The checkers over journal, meta and checkpoint writes in acceptance (row) order: seqs above
//! the tail (contracts 2.7.4, J5), one `run_settle` per tenure and nothing after it (3.6, D14),
//! terminal meta never ahead of the journal (3.6, D1), and no checkpoint regression (3.5, D2).
//! Each checks the history as it was accepted and then the final snapshot.

use crate::checker::Checker;
use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, JournalEntry, RunId, RunMeta, RunStatus, Seq};

use super::model::{
    Run, blob_digest, entry_label, from_row, holder, index_of, is_checkpoint, last_settle, settle_status,
};
use super::{Context, Descriptor, Scope, Violation};
use crate::history::{Call, CallOutcome, Payload, Row, Surface};

pub(super) const JOURNAL_SEQ_ORDER: Checker = Checker::JournalSeqOrder;
pub(super) const JOURNAL_SEQ_ORDER_CHECK: Descriptor = Descriptor {
    checker: JOURNAL_SEQ_ORDER,
    scope: Scope::Store,
    invariant: "stored seqs strictly increase and every accepted append was above the journal's tail (2.7.4)",
    check: journal_seq_order,
};
pub(super) const ONE_SETTLE_PER_SEGMENT: Checker = Checker::OneSettlePerSegment;
pub(super) const ONE_SETTLE_PER_SEGMENT_CHECK: Descriptor = Descriptor {
    checker: ONE_SETTLE_PER_SEGMENT,
    scope: Scope::Engine,
    invariant: "a tenure appends at most one run_settle and nothing after it (3.6, D14)",
    check: one_settle_per_segment,
};
pub(super) const META_NOT_AHEAD: Checker = Checker::MetaNotAhead;
pub(super) const META_NOT_AHEAD_CHECK: Descriptor = Descriptor {
    checker: META_NOT_AHEAD,
    scope: Scope::Engine,
    invariant: "a terminal meta is only ever written and kept over an empty journal or one whose last run_settle has its status (3.6, D1)",
    check: meta_not_ahead,
};
pub(super) const NO_CHECKPOINT_REGRESSION: Checker = Checker::NoCheckpointRegression;
pub(super) const NO_CHECKPOINT_REGRESSION_CHECK: Descriptor = Descriptor {
    checker: NO_CHECKPOINT_REGRESSION,
    scope: Scope::Engine,
    invariant: "a checkpoint ref is never overwritten by an older tenure, and holds its last accepted put (3.5, D2)",
    check: no_checkpoint_regression,
};

/// An accepted append, its run and entry.
fn accepted_append(row: &Row) -> Option<(&RunId, &JournalEntry)> {
    let call = row.call().filter(|c| c.surface == Surface::Append && c.outcome.is_ok())?;
    match &call.payload {
        Payload::Entry(entry) => Some((&call.run, entry)),
        _ => None,
    }
}

/// The run an accepted delete removed.
fn accepted_delete(row: &Row) -> Option<&RunId> {
    row.call().filter(|c| c.surface == Surface::Delete && c.outcome.is_ok()).map(|c| &c.run)
}

/// Stored seqs strictly increase, and every accepted append was above the tail of its run's
/// journal (the current generation's accepted appends) when it was accepted.
pub(super) fn journal_seq_order(ctx: &Context) -> Vec<Violation> {
    let (mut found, reported) = accepted_seq_order(ctx);
    found.extend(stored_seq_order(ctx, &reported));
    found
}

/// Along row order, each accepted append against the tail of its run's journal when it was
/// accepted: the violations, and the rows they name (the final check does not report them twice).
fn accepted_seq_order(ctx: &Context) -> (Vec<Violation>, BTreeSet<usize>) {
    let mut tails: BTreeMap<Run, (Seq, usize)> = BTreeMap::new();
    let mut found = Vec::new();
    let mut reported = BTreeSet::new();
    for row in ctx.rows {
        let Some(key) = ctx.runs.at(row.index) else { continue };
        if accepted_delete(row).is_some() {
            tails.remove(&key);
        }
        let Some((run, entry)) = accepted_append(row) else { continue };
        assert!(*key == *run, "row {}: an append keyed by another run", row.index);
        match tails.get(&key) {
            Some(&(tail, at)) if entry.seq <= tail => {
                assert!(at < row.index, "row {}: a tail recorded at row {at}", row.index);
                found.push(Violation::new(
                    JOURNAL_SEQ_ORDER,
                    format!(
                        "append of seq={} to {run} accepted while the journal's tail was seq={tail} (row {at})",
                        entry.seq
                    ),
                    Some(row.index),
                    Some(at),
                ));
                reported.insert(row.index);
            }
            _ => {
                tails.insert(key, (entry.seq, row.index));
            }
        }
    }
    (found, reported)
}

/// In each final journal the stored seqs strictly increase: the first pair out of order, unless
/// the history check already reported the append that stored it.
fn stored_seq_order(ctx: &Context, reported: &BTreeSet<usize>) -> Vec<Violation> {
    let (rows, writers) = (ctx.rows, &ctx.writers);
    let mut found = Vec::new();
    for (run, state) in &ctx.snapshot.runs {
        let Some(i) = (1..state.journal.len()).find(|&i| state.journal[i].seq <= state.journal[i - 1].seq) else {
            continue;
        };
        let (before, after) = (&state.journal[i - 1], &state.journal[i]);
        let row = index_of(rows, writers.entry(run, after));
        if row.is_some_and(|r| reported.contains(&r)) {
            continue;
        }
        let what = if after.seq == before.seq { "a duplicate" } else { "a lower" };
        found.push(Violation::new(
            JOURNAL_SEQ_ORDER,
            format!("journal of {run} stores {what} seq at position {i}: seq={} after seq={}", after.seq, before.seq),
            row,
            index_of(rows, writers.entry(run, before)),
        ));
    }
    found
}

/// Per (run, epoch) at most one accepted `run_settle`, and no accepted append after it; in the
/// final journal nothing follows the last `run_settle` that its own tenure wrote.
pub(super) fn one_settle_per_segment(ctx: &Context) -> Vec<Violation> {
    let (mut found, reported) = accepted_settles(ctx);
    found.extend(settle_segments(ctx, &reported));
    found.extend(stored_stragglers(ctx, &reported));
    found
}

/// Along row order, each accepted append after its tenure's accepted `run_settle`: the
/// violations, and the rows they name (the final checks do not report them twice).
fn accepted_settles(ctx: &Context) -> (Vec<Violation>, BTreeSet<usize>) {
    let mut settles: BTreeMap<(&RunId, Epoch), usize> = BTreeMap::new();
    let mut found = Vec::new();
    let mut reported = BTreeSet::new();
    for row in ctx.rows {
        let Some((run, entry)) = accepted_append(row) else { continue };
        let Some(call) = row.call() else { continue };
        let Some(epoch) = call.epoch() else { continue };
        let settle = settle_status(entry);
        match settles.get(&(run, epoch)) {
            Some(&first) => {
                assert!(first < row.index, "row {}: a tenure's settle recorded at row {first}", row.index);
                let what = if settle.is_some() { "a second run_settle" } else { "an append" };
                found.push(Violation::new(
                    ONE_SETTLE_PER_SEGMENT,
                    format!(
                        "{what} ({}) to {run} was accepted under {} after that tenure's run_settle at row {first}",
                        entry_label(entry),
                        holder(call)
                    ),
                    Some(row.index),
                    Some(first),
                ));
                reported.insert(row.index);
            }
            None if settle.is_some() => {
                settles.insert((run, epoch), row.index);
            }
            None => {}
        }
    }
    (found, reported)
}

/// In each final journal, an entry after the last `run_settle` written under that settle's own
/// epoch, unless the history check already reported it.
fn stored_stragglers(ctx: &Context, reported: &BTreeSet<usize>) -> Vec<Violation> {
    let (rows, writers) = (ctx.rows, &ctx.writers);
    let mut found = Vec::new();
    let epoch_of = |pos: usize| rows.get(pos).and_then(Row::call).and_then(|c| c.epoch());
    for (run, state) in &ctx.snapshot.runs {
        let Some((at, _)) = last_settle(&state.journal) else { continue };
        let Some(settle_pos) = writers.entry(run, &state.journal[at]) else { continue };
        let Some(epoch) = epoch_of(settle_pos) else { continue };
        let straggler = state.journal[at + 1..].iter().find_map(|e| {
            let pos = writers.entry(run, e)?;
            (epoch_of(pos) == Some(epoch)).then_some((pos, e))
        });
        let Some((pos, entry)) = straggler else { continue };
        let row = index_of(rows, Some(pos));
        if row.is_some_and(|r| reported.contains(&r)) {
            continue;
        }
        found.push(Violation::new(
            ONE_SETTLE_PER_SEGMENT,
            format!(
                "journal of {run} stores {} after the last run_settle (seq={}), both written under e{epoch}",
                entry_label(entry),
                state.journal[at].seq
            ),
            row,
            index_of(rows, Some(settle_pos)),
        ));
    }
    found
}

/// The segment a `run_settle` names (`value.segment`), when it names one.
fn settle_segment(entry: &JournalEntry) -> Option<u64> {
    settle_status(entry)?;
    entry.extra.get("value")?.get("segment")?.as_u64()
}

/// In each final journal the `run_settle` entries name strictly increasing segments: two settles
/// of one segment are two settles of one tenure however far apart they landed.
fn settle_segments(ctx: &Context, reported: &BTreeSet<usize>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (run, state) in &ctx.snapshot.runs {
        let mut last: Option<(u64, &JournalEntry)> = None;
        for entry in &state.journal {
            let Some(segment) = settle_segment(entry) else { continue };
            if let Some((before, first)) = last
                && segment <= before
            {
                let row = index_of(ctx.rows, ctx.writers.entry(run, entry));
                if !row.is_some_and(|r| reported.contains(&r)) {
                    found.push(Violation::new(
                        ONE_SETTLE_PER_SEGMENT,
                        format!(
                            "journal of {run} stores a run_settle of segment {segment} (seq={}) after one of segment {before} (seq={})",
                            entry.seq, first.seq
                        ),
                        row,
                        index_of(ctx.rows, ctx.writers.entry(run, first)),
                    ));
                }
                break;
            }
            last = Some((segment, entry));
        }
    }
    found
}

/// A terminal put_meta is accepted only over a journal whose last `run_settle` has its status,
/// and the final terminal meta is backed the same way. An empty journal needs no settle
/// (contracts 3.6.4: a run that journaled nothing settles without one).
pub(super) fn meta_not_ahead(ctx: &Context) -> Vec<Violation> {
    let mut found = accepted_meta_ahead(ctx);
    found.extend(stored_meta_ahead(ctx));
    found
}

/// An append in a run's journal as a later put_meta saw it: its row, its entry, and whether it
/// surely landed (accepted) or only may have (indeterminate: its process died mid-call).
struct Appended<'a> {
    row: usize,
    entry: &'a JournalEntry,
    sure: bool,
}

/// Whether some fate of the journal's indeterminate appends backs a terminal meta of `status`: no
/// sure append at all (the journal may be empty), or a `run_settle` of that status, sure or
/// possible, at or after the last sure one (the possible settles after it may not have landed).
fn some_fate_backs(journal: &[Appended], status: RunStatus) -> bool {
    let settles = || journal.iter().enumerate().filter_map(|(i, a)| settle_status(a.entry).map(|s| (i, s, a.sure)));
    let last_sure = settles().filter(|&(_, _, sure)| sure).map(|(i, _, _)| i).next_back();
    !journal.iter().any(|a| a.sure) || settles().any(|(i, s, _)| s == status && last_sure.is_none_or(|l| i >= l))
}

/// Along row order, each accepted terminal put_meta against its run's journal of accepted
/// appends (since the run's last accepted delete) when it was accepted. An indeterminate append
/// that may have landed counts either way: a successor that replayed its landed `run_settle`
/// adopts it and writes the meta without a settle of its own (contracts 3.6), and judging that
/// meta by the accepted appends alone was a false alarm of the engine soak (docs/soak.md).
fn accepted_meta_ahead(ctx: &Context) -> Vec<Violation> {
    let mut journals: BTreeMap<&RunId, Vec<Appended>> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        if let Some(run) = accepted_delete(row) {
            journals.remove(run);
        }
        if let Some((run, entry)) = accepted_append(row) {
            journals.entry(run).or_default().push(Appended { row: row.index, entry, sure: true });
        }
        if ctx.maybe_landed.contains(&row.index)
            && let Some(call) = row.call()
            && let Payload::Entry(entry) = &call.payload
        {
            journals.entry(&call.run).or_default().push(Appended { row: row.index, entry, sure: false });
        }
        let Some(call) = row.call().filter(|c| c.surface == Surface::PutMeta && c.outcome.is_ok()) else { continue };
        let Payload::Meta(meta) = &call.payload else { continue };
        let journal = journals.get(&call.run).map(Vec::as_slice).unwrap_or_default();
        if !meta.status.is_terminal() || some_fate_backs(journal, meta.status) {
            continue;
        }
        found.push(meta_ahead(row, call, meta, journal));
    }
    found
}

/// The violation of a terminal meta accepted at `row` ahead of `journal`, which it names by its
/// sure appends.
fn meta_ahead(row: &Row, call: &Call, meta: &RunMeta, journal: &[Appended]) -> Violation {
    let sure: Vec<&Appended> = journal.iter().filter(|a| a.sure).collect();
    let (behind, cause) = match last_settle(sure.iter().map(|a| a.entry)) {
        Some((i, status)) => {
            (format!("its last run_settle (seq={}) says {status}", sure[i].entry.seq), Some(sure[i].row))
        }
        None => (format!("it holds {} entries and no run_settle", sure.len()), None),
    };
    Violation::new(
        META_NOT_AHEAD,
        format!(
            "terminal put_meta {} of {} accepted under {} ahead of the journal: {behind}",
            meta.status,
            call.run,
            holder(call)
        ),
        Some(row.index),
        cause,
    )
}

/// Each final terminal meta against its run's final journal: backed by a last `run_settle` of
/// its status, or by an empty journal.
fn stored_meta_ahead(ctx: &Context) -> Vec<Violation> {
    let (rows, writers) = (ctx.rows, &ctx.writers);
    let mut found = Vec::new();
    for (run, state) in &ctx.snapshot.runs {
        let Some(meta) = state.meta.as_ref().filter(|m| m.status.is_terminal()) else { continue };
        if state.journal.is_empty() {
            continue;
        }
        let (behind, cause) = match last_settle(&state.journal) {
            Some((_, status)) if status == meta.status => continue,
            Some((i, status)) => (
                format!("the journal's last run_settle (seq={}) says {status}", state.journal[i].seq),
                writers.entry(run, &state.journal[i]),
            ),
            None => (format!("the journal holds {} entries and no run_settle", state.journal.len()), None),
        };
        found.push(Violation::new(
            META_NOT_AHEAD,
            format!("final meta of {run} is {} but {behind}", meta.status),
            index_of(rows, writers.meta(run, meta)),
            index_of(rows, cause),
        ));
    }
    found
}

/// What a checkpoint ref has seen.
struct Checkpoint {
    /// The (epoch, position) of its newest accepted put, seeded by its first accepted write: a
    /// put under an older epoch than this is a regression.
    newest: (Epoch, usize),
    /// The last accepted put's (position, digest); `None` after an accepted delete.
    last: Option<(usize, u64)>,
}

/// Along row order the epochs of a checkpoint ref's accepted puts never decrease, and the stored
/// bytes are the last accepted put's (none after an accepted delete_blob).
pub(super) fn no_checkpoint_regression(ctx: &Context) -> Vec<Violation> {
    let (rows, epochs) = (ctx.rows, &ctx.epochs);
    let mut refs: BTreeMap<&str, Checkpoint> = BTreeMap::new();
    let mut found = Vec::new();
    // Per ref, what an indeterminate call after the last accepted one may have left instead
    // (its process died mid-call): bytes, or `None` for a delete.
    let mut maybe: BTreeMap<&str, Vec<Option<u64>>> = BTreeMap::new();
    for (pos, row) in rows.iter().enumerate() {
        let Some(call) = row.call() else { continue };
        let Some(blob_ref) = call.blob_ref.as_deref().filter(|r| is_checkpoint(r)) else { continue };
        if call.outcome == CallOutcome::Indeterminate {
            match (call.surface, &call.payload) {
                (Surface::PutBlob, Payload::Blob(bytes)) => {
                    maybe.entry(blob_ref).or_default().push(Some(blob_digest(bytes)))
                }
                (Surface::DeleteBlob, _) => maybe.entry(blob_ref).or_default().push(None),
                _ => {}
            }
            continue;
        }
        if !call.is_accepted_mutation() {
            continue;
        }
        maybe.remove(blob_ref);
        let epoch = epochs.get(pos).copied().unwrap_or(Epoch(0));
        let state = refs.entry(blob_ref).or_insert(Checkpoint { newest: (epoch, pos), last: None });
        match (call.surface, &call.payload) {
            (Surface::PutBlob, Payload::Blob(bytes)) => {
                let (top, at) = state.newest;
                if epoch < top {
                    found.push(Violation::new(
                        NO_CHECKPOINT_REGRESSION,
                        format!(
                            "checkpoint {blob_ref} regressed: a put under {} (e{epoch}) landed after a put under e{top}{}",
                            holder(call),
                            from_row(rows, at)
                        ),
                        Some(row.index),
                        index_of(rows, Some(at)),
                    ));
                } else {
                    state.newest = (epoch, pos);
                }
                state.last = Some((pos, blob_digest(bytes)));
            }
            (Surface::DeleteBlob, _) => state.last = None,
            _ => {}
        }
    }
    found.extend(final_bytes(ctx, &refs, &maybe));
    found
}

/// The stored bytes of each checkpoint ref against the last accepted put's (none after an
/// accepted delete), or what an indeterminate call after it may have left.
fn final_bytes(
    ctx: &Context,
    refs: &BTreeMap<&str, Checkpoint>,
    maybe: &BTreeMap<&str, Vec<Option<u64>>>,
) -> Vec<Violation> {
    let (rows, snapshot, writers) = (ctx.rows, ctx.snapshot, &ctx.writers);
    let mut found = Vec::new();
    for (&blob_ref, state) in refs {
        let run = RunId::of_ref(blob_ref);
        let stored = snapshot.run(&run).and_then(|s| s.blobs.get(blob_ref));
        if maybe.get(blob_ref).is_some_and(|m| m.contains(&stored.map(|b| blob_digest(b)))) {
            continue;
        }
        let why = match (state.last, stored) {
            (Some((_, digest)), Some(bytes)) if blob_digest(bytes) == digest => continue,
            (None, None) => continue,
            (Some((pos, digest)), Some(bytes)) => (
                format!(
                    "checkpoint {blob_ref} holds #{:016x}, not the last accepted put's #{digest:016x}{}",
                    blob_digest(bytes),
                    from_row(rows, pos)
                ),
                Some(pos),
                writers.blob(blob_ref, bytes),
            ),
            (Some((pos, digest)), None) => (
                format!(
                    "checkpoint {blob_ref} is missing; the last accepted put was #{digest:016x}{}",
                    from_row(rows, pos)
                ),
                Some(pos),
                None,
            ),
            (None, Some(bytes)) => (
                format!("checkpoint {blob_ref} was deleted but the store holds #{:016x}", blob_digest(bytes)),
                None,
                writers.blob(blob_ref, bytes),
            ),
        };
        let (explanation, row, cause) = why;
        found.push(Violation::new(
            NO_CHECKPOINT_REGRESSION,
            explanation,
            index_of(rows, row.or(cause)),
            index_of(rows, cause),
        ));
    }
    found
}
