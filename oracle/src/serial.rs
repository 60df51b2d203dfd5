//! The serial-history checker (contracts 2.7.5-6, 5.9): replay every accepted mutation of a run
//! in (epoch, row) order into a model of journal, meta and blobs, and diff it against the
//! snapshot; then walk the stored journal and require the epochs of the appends that wrote it
//! never to decrease. A stale write that landed after its successor's shows up as a foreign
//! payload, a length mismatch or an epoch inversion.
//!
//! A run with indeterminate mutations (their process died mid-call) passes if some choice of
//! committed / not committed for them makes it equal; otherwise its violations name them. The
//! fates the store already decides are settled first ([`settle_fates`]): a cut append whose entry
//! the stored journal lacks did not land, one whose entry only it could have written did, and a
//! cut write a later accepted one overwrites cannot matter. The rest are searched, up to 12 per
//! run (`MAX_INDETERMINATE_PER_RUN`); a violation of a run with more says how many went unsearched.

use crate::checker::Checker;
use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, JournalEntry, RunId, RunMeta};

use super::model::{
    Writers, blob_digest, blob_label, entry_label, from_row, holder, index_of, meta_label, same_entry, same_meta,
};
use super::{Context, Descriptor, Scope, Violation};
use crate::history::{CallOutcome, Payload, Row, RunState, Surface};

pub(super) const SERIAL_HISTORY: Checker = Checker::SerialHistory;
pub(super) const SERIAL_HISTORY_CHECK: Descriptor = Descriptor {
    checker: SERIAL_HISTORY,
    scope: Scope::Store,
    invariant: "journal, meta and blobs equal the accepted mutations replayed in (epoch, row) order; epochs never decrease along the journal (2.7.5-6, 5.9)",
    check: serial_history,
};

/// A run's state as the serial history has it; every item keeps the position of its row.
#[derive(Default)]
struct Model<'a> {
    journal: Vec<(usize, &'a JournalEntry)>,
    meta: Option<(usize, &'a RunMeta)>,
    blobs: BTreeMap<&'a str, (usize, &'a [u8])>,
}

/// Indeterminate mutations of one run beyond this many (after [`settle_fates`]) are not searched
/// over: the checker then takes each as not committed, and says so in the run's violations (a soak
/// has one per killed process, spread over its runs).
pub const MAX_INDETERMINATE_PER_RUN: usize = 12;

/// Journal, meta and blobs of every run equal the serial replay of the accepted mutations, and
/// the epochs of the appends that wrote the stored journal never decrease along it. A run with
/// indeterminate mutations (their process died mid-call) passes if some choice of committed / not
/// committed for them makes it equal; otherwise its violations name them.
pub(super) fn serial_history(ctx: &Context) -> Vec<Violation> {
    let (rows, snapshot) = (ctx.rows, ctx.snapshot);
    let mut accepted: BTreeMap<&RunId, Vec<(Epoch, usize)>> = BTreeMap::new();
    let mut maybe: BTreeMap<&RunId, Vec<(Epoch, usize)>> = BTreeMap::new();
    for (pos, row) in rows.iter().enumerate() {
        let Some(call) = row.call().filter(|c| c.surface.is_mutation()) else { continue };
        let key = (ctx.epochs.get(pos).copied().unwrap_or(Epoch(0)), pos);
        if call.outcome.is_ok() {
            accepted.entry(&call.run).or_default().push(key);
        } else if call.outcome == CallOutcome::Indeterminate {
            maybe.entry(&call.run).or_default().push(key);
        }
    }
    let runs: BTreeSet<&RunId> = accepted.keys().chain(maybe.keys()).copied().chain(snapshot.runs.keys()).collect();
    let mut found = Vec::new();
    for run in runs {
        let mut definite = accepted.remove(run).unwrap_or_default();
        let mut maybe = maybe.remove(run).unwrap_or_default();
        settle_fates(ctx, run, &mut definite, &mut maybe);
        let unsearched = maybe.len().saturating_sub(MAX_INDETERMINATE_PER_RUN);
        maybe.truncate(MAX_INDETERMINATE_PER_RUN);
        // The search below walks 2^n choices by the bits of a u32: n stays at the bound.
        assert!(
            maybe.len() <= MAX_INDETERMINATE_PER_RUN && MAX_INDETERMINATE_PER_RUN < 32,
            "{run}: an unbounded search"
        );
        let Some(mut violations) = unmatched(ctx, run, &definite, &maybe) else { continue };
        name_the_cut_calls(rows, &maybe, unsearched, &mut violations);
        found.extend(violations);
    }
    found
}

/// Name in each violation of a run the cut calls searched (`maybe`), and how many were not.
fn name_the_cut_calls(rows: &[Row], maybe: &[(Epoch, usize)], unsearched: usize, violations: &mut [Violation]) {
    if maybe.is_empty() {
        return;
    }
    let named: Vec<String> = maybe.iter().map(|(_, pos)| format!("#{}", rows[*pos].index)).collect();
    let rest = match unsearched {
        0 => String::new(),
        n => format!("; {n} more were not searched and taken as not committed, so this may be a false alarm"),
    };
    for v in violations {
        v.explanation.push_str(&format!(
            " (no choice of committed or not for the indeterminate calls {} matches{rest})",
            named.join(", ")
        ));
    }
}

/// Settle the fates of `run`'s cut mutations (`maybe`, (epoch, position) in serial order) that the
/// store decides; each step keeps some choice that matches the store if one did:
/// - a cut append whose entry the stored journal does not hold did not land in any choice that
///   matches (the replayed journal must equal the stored one entry for entry): dropped;
/// - a cut append whose entry the stored journal holds, when no other mutation of the run wrote
///   such an entry, landed in every choice that matches: it joins `definite`;
/// - a cut meta, blob put or blob delete that a later accepted write of the same thing (the
///   meta, or a delete of the run; the same blob ref) overwrites in serial order cannot change
///   the replay: dropped.
fn settle_fates(ctx: &Context, run: &RunId, definite: &mut Vec<(Epoch, usize)>, maybe: &mut Vec<(Epoch, usize)>) {
    let rows = ctx.rows;
    let stored = ctx.snapshot.run(run).map(|s| s.journal.as_slice()).unwrap_or_default();
    let entry_of = |pos: usize| match rows.get(pos).and_then(Row::call).map(|c| (c.surface, &c.payload)) {
        Some((Surface::Append, Payload::Entry(entry))) => Some(entry),
        _ => None,
    };
    let writers_of = |entry: &JournalEntry| {
        definite.iter().chain(maybe.iter()).filter(|(_, p)| entry_of(*p).is_some_and(|e| same_entry(e, entry))).count()
    };
    let overwritten = |key: (Epoch, usize)| {
        let Some(call) = rows.get(key.1).and_then(Row::call) else { return false };
        definite.iter().filter(|later| **later > key).filter_map(|(_, p)| rows.get(*p).and_then(Row::call)).any(|c| {
            match call.surface {
                Surface::PutMeta => matches!(c.surface, Surface::PutMeta | Surface::Delete),
                Surface::PutBlob | Surface::DeleteBlob => {
                    matches!(c.surface, Surface::PutBlob | Surface::DeleteBlob) && c.blob_ref == call.blob_ref
                }
                _ => false,
            }
        })
    };
    let mut landed = Vec::new();
    let mut open = Vec::new();
    for &key in maybe.iter() {
        match entry_of(key.1) {
            Some(entry) if !stored.iter().any(|s| same_entry(s, entry)) => {}
            Some(entry) if writers_of(entry) == 1 => landed.push(key),
            Some(_) => open.push(key),
            None if overwritten(key) => {}
            None => open.push(key),
        }
    }
    definite.extend(landed);
    *maybe = open;
}

/// Judge `run` under every choice of committed or not for its indeterminate mutations `maybe`
/// (with its accepted ones, `definite`), "none committed" first: `None` when some choice matches
/// the store, else the first choice's violations.
fn unmatched(
    ctx: &Context,
    run: &RunId,
    definite: &[(Epoch, usize)],
    maybe: &[(Epoch, usize)],
) -> Option<Vec<Violation>> {
    let mut first = None;
    for choice in 0..1u32 << maybe.len() {
        let mut order = definite.to_vec();
        order.extend(maybe.iter().enumerate().filter(|(i, _)| choice & (1 << i) != 0).map(|(_, k)| *k));
        order.sort();
        let violations = judge_run(ctx, run, &order);
        if violations.is_empty() {
            return None;
        }
        first.get_or_insert(violations);
    }
    first
}

/// Diff one run's stored state against the replay of `order` ((epoch, position) of the mutations
/// taken as committed, sorted).
fn judge_run(ctx: &Context, run: &RunId, order: &[(Epoch, usize)]) -> Vec<Violation> {
    let (rows, writers, epochs) = (ctx.rows, &ctx.writers, &ctx.epochs);
    let mut model = Model::default();
    // Replayed in (epoch, row) order, each row once.
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{run}: the serial order is not sorted");
    for &(_, pos) in order {
        let Some(call) = rows.get(pos).and_then(Row::call) else { continue };
        assert!(call.run == *run && call.surface.is_mutation(), "{run}: row {pos} replayed into another run's model");
        match (call.surface, &call.payload, &call.blob_ref) {
            (Surface::Append, Payload::Entry(entry), _) => model.journal.push((pos, entry)),
            (Surface::PutMeta, Payload::Meta(meta), _) => model.meta = Some((pos, meta)),
            (Surface::Delete, _, _) => {
                model.journal.clear();
                model.meta = None;
            }
            // A slash-less ref is never listed under a run (contracts 1.4): not in a snapshot.
            (Surface::PutBlob, Payload::Blob(bytes), Some(r)) if r.contains('/') => {
                model.blobs.insert(r, (pos, bytes));
            }
            (Surface::DeleteBlob, _, Some(r)) => {
                model.blobs.remove(r.as_str());
            }
            _ => {}
        }
    }
    let empty = RunState::default();
    let state = ctx.snapshot.run(run).unwrap_or(&empty);
    let mut found = Vec::new();
    found.extend(diff_journal(rows, writers, run, &state.journal, &model.journal));
    found.extend(epoch_inversion(rows, writers, epochs, run, &state.journal));
    found.extend(diff_meta(rows, writers, run, state.meta.as_ref(), model.meta));
    found.extend(diff_blobs(rows, writers, run, &state.blobs, &model.blobs));
    found
}

fn diff_journal(
    rows: &[Row],
    writers: &Writers,
    run: &RunId,
    stored: &[JournalEntry],
    expected: &[(usize, &JournalEntry)],
) -> Option<Violation> {
    let at = (0..stored.len().max(expected.len())).find(|&i| match (stored.get(i), expected.get(i)) {
        (Some(s), Some((_, e))) => !same_entry(s, e),
        _ => true,
    })?;
    let actual = stored.get(at);
    let cause = actual.and_then(|s| writers.entry(run, s));
    let holds = match actual {
        Some(s) => {
            let source = cause.map_or_else(|| " written by no accepted append".to_owned(), |p| from_row(rows, p));
            format!("{}{source}", entry_label(s))
        }
        None => "nothing".to_owned(),
    };
    let has = match expected.get(at) {
        Some((pos, e)) => format!("{}{}", entry_label(e), from_row(rows, *pos)),
        None => "nothing".to_owned(),
    };
    let row = expected.get(at).map(|(pos, _)| *pos).or(cause);
    Some(Violation::new(
        SERIAL_HISTORY,
        format!(
            "journal of {run} diverges at position {at} ({} stored, {} in the serial history): store holds {holds} but the serial history has {has}",
            stored.len(),
            expected.len()
        ),
        index_of(rows, row),
        index_of(rows, cause),
    ))
}

/// Epochs of the appends that wrote the stored journal never decrease along it.
fn epoch_inversion(
    rows: &[Row],
    writers: &Writers,
    epochs: &[Epoch],
    run: &RunId,
    stored: &[JournalEntry],
) -> Option<Violation> {
    let mut newest: Option<(Epoch, usize)> = None;
    for entry in stored {
        let Some(pos) = writers.entry(run, entry) else { continue };
        let epoch = epochs.get(pos).copied().unwrap_or(Epoch(0));
        match newest {
            Some((top, at)) if epoch < top => {
                let under = rows.get(pos).and_then(Row::call).map(holder).unwrap_or_default();
                return Some(Violation::new(
                    SERIAL_HISTORY,
                    format!(
                        "epoch inversion in journal of {run}: {} under {under} (e{epoch}) is stored after an entry of e{top}{}",
                        entry_label(entry),
                        from_row(rows, at)
                    ),
                    index_of(rows, Some(pos)),
                    index_of(rows, Some(at)),
                ));
            }
            _ => newest = Some((epoch, pos)),
        }
    }
    None
}

fn diff_meta(
    rows: &[Row],
    writers: &Writers,
    run: &RunId,
    stored: Option<&RunMeta>,
    expected: Option<(usize, &RunMeta)>,
) -> Option<Violation> {
    let same = match (stored, expected) {
        (Some(s), Some((_, m))) => same_meta(s, m),
        (s, m) => s.is_none() && m.is_none(),
    };
    if same {
        return None;
    }
    let cause = stored.and_then(|m| writers.meta(run, m));
    let holds = stored.map_or_else(
        || "none".to_owned(),
        |m| {
            format!(
                "{}{}",
                meta_label(m),
                cause.map_or_else(|| " written by no accepted put_meta".to_owned(), |p| from_row(rows, p))
            )
        },
    );
    let has =
        expected.map_or_else(|| "none".to_owned(), |(pos, m)| format!("{}{}", meta_label(m), from_row(rows, pos)));
    let row = expected.map(|(pos, _)| pos).or(cause);
    Some(Violation::new(
        SERIAL_HISTORY,
        format!("meta of {run} diverges: store holds {holds} but the serial history has {has}"),
        index_of(rows, row),
        index_of(rows, cause),
    ))
}

fn diff_blobs(
    rows: &[Row],
    writers: &Writers,
    run: &RunId,
    stored: &BTreeMap<String, Vec<u8>>,
    expected: &BTreeMap<&str, (usize, &[u8])>,
) -> Option<Violation> {
    let refs: BTreeSet<&str> = stored.keys().map(String::as_str).chain(expected.keys().copied()).collect();
    refs.into_iter().find_map(|blob_ref| {
        let actual = stored.get(blob_ref);
        let wanted = expected.get(blob_ref);
        if actual.map(|b| blob_digest(b)) == wanted.map(|(_, b)| blob_digest(b)) {
            return None;
        }
        let cause = actual.and_then(|b| writers.blob(blob_ref, b));
        let holds = actual.map_or_else(
            || "nothing".to_owned(),
            |b| {
                let source = cause.map_or_else(|| " written by no accepted put_blob".to_owned(), |p| from_row(rows, p));
                format!("{}{source}", blob_label(b))
            },
        );
        let has = wanted
            .map_or_else(|| "nothing".to_owned(), |(pos, b)| format!("{}{}", blob_label(b), from_row(rows, *pos)));
        let row = wanted.map(|(pos, _)| *pos).or(cause);
        Some(Violation::new(
            SERIAL_HISTORY,
            format!("blob {blob_ref} of {run} diverges: store holds {holds} but the serial history has {has}"),
            index_of(rows, row),
            index_of(rows, cause),
        ))
    })
}
