//! `linearizable-reads`: every read a history records saw the store as the writes recorded before
//! it left it, each write whole (contracts 2.1, S6: a store call is atomic). A world's calls are
//! serialized, so the state a read must see is the replay, in row order, of the accepted appends,
//! meta writes and deletes of its run before it. A write whose caller died inside it
//! (indeterminate) either happened whole or not at all: the run passes if one choice for all of
//! them explains every read. A call cut half-way that left half its rows (a journal gone under a
//! meta that stayed) is seen by the next reader as a state no choice explains.
//!
//! Only rows that kept what the read returned are judged (the simulator's; a soak's logs keep
//! none).

use std::collections::BTreeMap;

use fencesim_store::{RunId, RunStatus};

use super::serial::MAX_INDETERMINATE_PER_RUN;
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{CallOutcome, Payload, Read, Row, Surface};

pub(super) const LINEARIZABLE_READS: Checker = Checker::LinearizableReads;
pub(super) const LINEARIZABLE_READS_CHECK: Descriptor = Descriptor {
    checker: LINEARIZABLE_READS,
    scope: Scope::Store,
    invariant: "every journal load and meta read saw the writes recorded before it, each whole: some choice of taking each cut call as done or not explains every read (2.1, S6)",
    check: linearizable_reads,
};

/// A run as the writes before a row left it.
#[derive(Clone, Copy, Default)]
struct State {
    journal: usize,
    meta: Option<RunStatus>,
}

/// The first read a replay could not explain: its position and what the replay had.
struct Miss {
    pos: usize,
    expected: State,
}

/// Per run, the positions of its writes that may have landed (accepted or indeterminate) and of
/// its accepted reads, in row order, and whether it has any read.
fn reads_and_writes(rows: &[Row]) -> BTreeMap<&RunId, (Vec<usize>, bool)> {
    let mut per_run: BTreeMap<&RunId, (Vec<usize>, bool)> = BTreeMap::new();
    for (pos, row) in rows.iter().enumerate() {
        let Some(call) = row.call() else { continue };
        let write = matches!(call.surface, Surface::Append | Surface::PutMeta | Surface::Delete)
            && (call.outcome.is_ok() || call.outcome == CallOutcome::Indeterminate);
        let read = call.read.is_some() && call.outcome.is_ok();
        if write || read {
            let (positions, reads) = per_run.entry(&call.run).or_default();
            positions.push(pos);
            *reads |= read;
        }
    }
    per_run
}

pub(super) fn linearizable_reads(ctx: &Context) -> Vec<Violation> {
    let rows = ctx.rows;
    let mut found = Vec::new();
    for (run, (positions, reads)) in reads_and_writes(rows) {
        if !reads {
            continue;
        }
        let mut maybe: Vec<usize> = positions
            .iter()
            .copied()
            .filter(|p| rows[*p].call().is_some_and(|c| c.outcome == CallOutcome::Indeterminate))
            .collect();
        maybe.truncate(MAX_INDETERMINATE_PER_RUN);
        // The choices are the bits of a u32: the search stays at its bound.
        assert!(maybe.len() <= MAX_INDETERMINATE_PER_RUN, "{run}: an unbounded search");
        // Every choice, "none committed" first; the miss that comes latest is the one reported.
        let mut latest: Option<Miss> = None;
        for choice in 0..1u32 << maybe.len() {
            let committed = |pos: usize| maybe.iter().position(|m| *m == pos).is_none_or(|i| choice & (1 << i) != 0);
            match replay(ctx, &positions, committed) {
                None => {
                    latest = None;
                    break;
                }
                Some(miss) if latest.as_ref().is_none_or(|l| miss.pos > l.pos) => latest = Some(miss),
                Some(_) => {}
            }
        }
        if let Some(miss) = latest {
            found.push(violation(ctx, run, &maybe, &miss));
        }
    }
    found
}

/// Replay a run's rows in order, taking an indeterminate write as `committed` says; the first read
/// that saw something else.
fn replay(ctx: &Context, positions: &[usize], committed: impl Fn(usize) -> bool) -> Option<Miss> {
    // A read sees exactly the writes recorded before it: the run's rows in history order.
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "a run's rows replayed out of order");
    let mut state = State::default();
    for &pos in positions {
        let Some(call) = ctx.rows[pos].call() else { continue };
        if let Some(read) = call.read.filter(|_| call.outcome.is_ok()) {
            let saw = match read {
                Read::Journal(len) => len == state.journal,
                Read::Meta(status) => status == state.meta,
            };
            if !saw {
                return Some(Miss { pos, expected: state });
            }
            continue;
        }
        if call.outcome == CallOutcome::Indeterminate && !committed(pos) {
            continue;
        }
        match (call.surface, &call.payload) {
            (Surface::Append, _) => state.journal += 1,
            (Surface::PutMeta, Payload::Meta(meta)) => state.meta = Some(meta.status),
            (Surface::Delete, _) => state = State::default(),
            _ => {}
        }
    }
    None
}

fn violation(ctx: &Context, run: &RunId, maybe: &[usize], miss: &Miss) -> Violation {
    let row = &ctx.rows[miss.pos];
    let (saw, had) = match row.call().and_then(|c| c.read) {
        Some(Read::Journal(len)) => (format!("a journal of {len} entries"), format!("{}", miss.expected.journal)),
        Some(Read::Meta(status)) => (status_label(status), status_label(miss.expected.meta)),
        None => (String::new(), String::new()),
    };
    let cut = if maybe.is_empty() {
        String::new()
    } else {
        let named: Vec<String> = maybe.iter().map(|p| format!("#{}", ctx.rows[*p].index)).collect();
        format!(" (whichever of the cut calls {} took effect whole)", named.join(", "))
    };
    Violation::new(
        LINEARIZABLE_READS,
        format!(
            "{run}: {} by {} saw {saw}, but the writes before it leave {had}{cut}: a write was seen half done",
            row.call().map_or("read", |c| c.surface.as_str()),
            row.node
        ),
        Some(row.index),
        maybe.first().map(|p| ctx.rows[*p].index),
    )
}

fn status_label(status: Option<RunStatus>) -> String {
    status.map_or_else(|| "no meta".to_owned(), |s| format!("a {} meta", s.as_str()))
}
