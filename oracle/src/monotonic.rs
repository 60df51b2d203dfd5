//! `observables-monotonic`: what any actor can observe of a run only moves forward within its
//! generation (a generation ends at an accepted delete of the run), judged at every accepted write
//! along the history rather than in the end state, so a value that goes back for a while and
//! comes back is still caught at the row where it went back (contracts 1.2, 3.1, 3.6, 4.3):
//!
//! - `segments` never decreases across accepted meta writes (E1: a segment's boot writes the
//!   prior count + 1 and every later write of the segment carries it);
//! - a run's `genesis` and workflow binding, once an accepted meta carries them, never change
//!   (a new generation starts only after a delete);
//! - a journal that records a terminal `run_settle` as its last word is final: every later
//!   `run_settle` has the same status, every later terminal meta has it too, and a non-terminal
//!   meta over it is only a new segment's boot (more segments than any meta so far), never a
//!   rewrite that reopens the finished run (a repair included: 4.3 repairs from the journal,
//!   which says the run is finished).
//!
//! What may legitimately move back is exactly that boot: a segment that resumes a settled run
//! writes `running` with a higher `segments` before it projects the same terminal status again.

use crate::checker::Checker;
use std::collections::BTreeMap;

use fencesim_store::{JournalEntry, RunMeta, RunStatus};
use serde_json::Value;

use super::model::{Run, settle_status};
use super::{Context, Descriptor, Scope, Violation};
use crate::history::{Call, Event, Payload, Surface};

pub(super) const OBSERVABLES_MONOTONIC: Checker = Checker::ObservablesMonotonic;
pub(super) const OBSERVABLES_MONOTONIC_CHECK: Descriptor = Descriptor {
    checker: OBSERVABLES_MONOTONIC,
    scope: Scope::Engine,
    invariant: "within a generation, segments never decrease, genesis and workflow binding never change, and a journal's final run_settle is never overturned: no other settle status, no other terminal meta, no non-terminal meta but a new segment's boot (1.2, 3.1, 3.6, 4.3)",
    check: observables_monotonic,
};

/// What a generation of a run has shown so far.
#[derive(Default)]
struct Seen<'a> {
    /// The highest `segments` an accepted meta carried, and its row.
    segments: Option<(u32, usize)>,
    genesis: Option<(&'a str, usize)>,
    workflow: Option<(&'a Value, usize)>,
    /// The terminal status of the journal's last `run_settle`, while nothing follows it.
    settled: Option<(RunStatus, usize)>,
}

pub(super) fn observables_monotonic(ctx: &Context) -> Vec<Violation> {
    let mut seen: BTreeMap<Run, Seen> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        let Event::Call(call) = &row.event else { continue };
        if !call.is_accepted_mutation() {
            continue;
        }
        let Some(run) = ctx.runs.at(row.index) else { continue };
        match (call.surface, &call.payload) {
            (Surface::Delete, _) => {
                seen.remove(&run);
            }
            (Surface::Append, Payload::Entry(entry)) => {
                let state = seen.entry(run).or_default();
                found.extend(append(state, run, entry, row.index));
            }
            (Surface::PutMeta, Payload::Meta(meta)) => {
                let state = seen.entry(run).or_default();
                found.extend(meta_write(state, run, call, meta, row.index));
            }
            _ => {}
        }
    }
    found
}

fn violation(run: Run, what: String, row: usize, cause: usize) -> Violation {
    // What a generation showed was shown by an earlier accepted write, in row order.
    assert!(cause < row, "run {run}: row {row} judged against row {cause}, not before it");
    Violation::new(OBSERVABLES_MONOTONIC, format!("run {run}: {what}"), Some(row), Some(cause))
}

/// An accepted append: a terminal `run_settle` makes the run finished until anything follows it;
/// a later settle of another status overturns a finished outcome.
fn append(state: &mut Seen, run: Run, entry: &JournalEntry, row: usize) -> Option<Violation> {
    let status = settle_status(entry);
    let overturned = match (state.settled, status) {
        (Some((done, at)), Some(now)) if now != done => Some(violation(
            run,
            format!("run_settle seq {} says '{now}' after the journal settled '{done}'", entry.seq),
            row,
            at,
        )),
        _ => None,
    };
    state.settled = match status {
        Some(now) if now.is_terminal() => Some((now, row)),
        // A non-terminal settle or any other entry: the journal no longer ends in a final word.
        _ => None,
    };
    overturned
}

/// An accepted meta write, against everything the generation's metas and journal showed so far.
fn meta_write<'a>(state: &mut Seen<'a>, run: Run, call: &Call, meta: &'a RunMeta, row: usize) -> Vec<Violation> {
    let mut found = Vec::new();
    let boot = state.segments.is_none_or(|(most, _)| meta.segments > most);
    if let Some((most, at)) = state.segments
        && meta.segments < most
    {
        found.push(violation(
            run,
            format!("{} wrote segments {} after a meta of segments {most}", call_node(call), meta.segments),
            row,
            at,
        ));
    }
    if let Some((done, at)) = state.settled {
        if meta.status.is_terminal() && meta.status != done {
            found.push(violation(
                run,
                format!("meta '{}' overturns the journal's final run_settle '{done}'", meta.status),
                row,
                at,
            ));
        } else if !meta.status.is_terminal() && !boot {
            found.push(violation(
                run,
                format!(
                    "meta '{}' (segments {}) reopens a run whose journal settled '{done}', outside a new segment's boot",
                    meta.status, meta.segments
                ),
                row,
                at,
            ));
        }
    }
    if let (Some((was, at)), Some(now)) = (state.genesis, meta.genesis.as_deref())
        && was != now
    {
        found.push(violation(run, format!("genesis changed from {was} to {now} within a generation"), row, at));
    }
    if let (Some((was, at)), Some(now)) = (state.workflow, meta.extra.get("workflow"))
        && was != now
    {
        found.push(violation(run, format!("workflow binding changed from {was} to {now}"), row, at));
    }
    if boot {
        state.segments = Some((meta.segments, row));
    }
    if state.genesis.is_none() {
        state.genesis = meta.genesis.as_deref().map(|g| (g, row));
    }
    if state.workflow.is_none() {
        state.workflow = meta.extra.get("workflow").map(|w| (w, row));
    }
    found
}

fn call_node(call: &Call) -> String {
    call.lease.as_ref().map_or_else(|| "an unleased write".to_owned(), |l| format!("{}@e{}", l.owner, l.epoch))
}
