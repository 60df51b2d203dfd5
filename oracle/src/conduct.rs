//! The checkers over how the engine's actors behave beyond what the store refuses: obligations
//! that fencing alone cannot hold, because a violation of them is contained by the store (a
//! refused write) or put right later (a repair), so the end state looks healthy.
//!
//! - `dispatch-identity` (E10): a dispatch is its running entry. At most one
//!   dispatch is open at a time in a run's generation (the one a crash or failure left
//!   dangling), so a step re-dispatched after a crash reuses its dangling entry instead of opening
//!   a new one, and each running entry is closed by at most one terminal of the same step.
//! - `silent-replay` (E12): a journal that records a terminal `run_settle` is final: a tenure
//!   that finds its run settled appends nothing; nor does a `run_settle` repeat the last one with
//!   nothing appended since, so journals never grow without work.
//! - `renew-loss` (E13, 9.2): after a failed renew of its own lease, a holder pays nothing more
//!   under that lease (a payment is the one thing the store's fence cannot refuse).
//! - `justified-repair` (E14): the operator's repair of a run's meta is justified only for a run
//!   that a crash, stall, takeover, failed segment or unreleased tenure touched in its generation;
//!   a repair of an untouched run hides an engine that left its meta wrong.

use crate::checker::Checker;
use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, RunId, RunStatus, Seq};

use super::model::{Run, entry_label, holder, settle_status};
use super::{Context, Violation};
use crate::history::{Call, CallOutcome, EffectKind, Event, Payload, SegmentError, SegmentResult, Surface};

pub(super) const DISPATCH_IDENTITY: Checker = Checker::DispatchIdentity;
pub(super) const SILENT_REPLAY: Checker = Checker::SilentReplay;
pub(super) const RENEW_LOSS: Checker = Checker::RenewLoss;
pub(super) const JUSTIFIED_REPAIR: Checker = Checker::JustifiedRepair;

/// An entry that opens a dispatch (contracts 1.2): status `running`, with a step `key`.
fn step_key(entry: &fencesim_store::JournalEntry) -> Option<&str> {
    (entry.status == "running").then(|| entry.extra.get("key").and_then(|k| k.as_str())).flatten()
}

/// Per run generation, in acceptance order: a running entry is appended only while no other
/// dispatch of the run is open, and a terminal closes an open running entry of its own step.
pub(super) fn dispatch_identity(ctx: &Context) -> Vec<Violation> {
    // run -> open running entries: seq -> (step key, row).
    let mut open: BTreeMap<Run, BTreeMap<Seq, (&str, usize)>> = BTreeMap::new();
    // run -> running seq -> its key, for every running entry of the generation.
    let mut opened: BTreeMap<Run, BTreeMap<Seq, &str>> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        let Some(call) = row.call().filter(|c| c.outcome.is_ok()) else { continue };
        let Some(run) = ctx.runs.at(row.index) else { continue };
        match (call.surface, &call.payload) {
            (Surface::Delete, _) => {
                open.remove(&run);
                opened.remove(&run);
            }
            (Surface::Append, Payload::Entry(entry)) => {
                if let Some(key) = step_key(entry) {
                    let runs = open.entry(run).or_default();
                    if let Some((&seq, &(other, at))) = runs.iter().next() {
                        let same = if other == key { "the same step's" } else { "another step's" };
                        found.push(Violation::new(
                            DISPATCH_IDENTITY,
                            format!(
                                "{} opened dispatch {key} of {} at seq={} under {} while {same} dispatch {other} at seq={seq} was still open (row {at}): a re-dispatch must reuse its dangling entry",
                                row.node,
                                call.run,
                                entry.seq,
                                holder(call)
                            ),
                            Some(row.index),
                            Some(at),
                        ));
                    }
                    runs.insert(entry.seq, (key, row.index));
                    opened.entry(run).or_default().insert(entry.seq, key);
                } else if let Some(running) = entry.ref_seq {
                    let key = entry.extra.get("key").and_then(|k| k.as_str());
                    let was_open = open.get_mut(&run).and_then(|runs| runs.remove(&running));
                    let why = match (was_open, opened.get(&run).and_then(|r| r.get(&running))) {
                        (Some((step, _)), _) if key == Some(step) => None,
                        (Some((step, _)), _) => Some(format!("the running entry is step {step}")),
                        (None, Some(_)) => Some("that dispatch was already closed".to_owned()),
                        (None, None) => Some("no running entry of this generation has that seq".to_owned()),
                    };
                    if let Some(why) = why {
                        found.push(Violation::new(
                            DISPATCH_IDENTITY,
                            format!(
                                "{} appended terminal {} to {} closing running seq={running}, but {why}",
                                row.node,
                                entry_label(entry),
                                call.run
                            ),
                            Some(row.index),
                            None,
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Per run generation, in acceptance order: once an accepted `run_settle` records a terminal
/// status, no append is accepted in that generation; and a `run_settle` is never appended over
/// a journal whose last settle says the same with nothing appended since (a replay that found
/// nothing new to record, as of a suspended run swept again and again).
pub(super) fn silent_replay(ctx: &Context) -> Vec<Violation> {
    // run -> the last accepted settle (row, status) and whether anything was appended since.
    let mut last: BTreeMap<Run, (usize, RunStatus, bool)> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        let Some(call) = row.call().filter(|c| c.outcome.is_ok()) else { continue };
        let Some(run) = ctx.runs.at(row.index) else { continue };
        match (call.surface, &call.payload) {
            (Surface::Delete, _) => {
                last.remove(&run);
            }
            (Surface::Append, Payload::Entry(entry)) => {
                let settle = settle_status(entry);
                let why = match last.get(&run) {
                    Some(&(at, status, _)) if status.is_terminal() => {
                        Some((at, format!("whose journal was final: its run_settle at row {at} says {status}")))
                    }
                    Some(&(at, status, false)) if settle == Some(status) => Some((
                        at,
                        format!("with nothing appended since its last run_settle at row {at}, which says {status}"),
                    )),
                    _ => None,
                };
                if let Some((at, why)) = why {
                    found.push(Violation::new(
                        SILENT_REPLAY,
                        format!(
                            "{} appended {} seq={} to {} under {}, {why}",
                            row.node,
                            entry_label(entry),
                            entry.seq,
                            call.run,
                            holder(call)
                        ),
                        Some(row.index),
                        Some(at),
                    ));
                }
                match settle {
                    Some(status) => {
                        last.insert(run, (row.index, status, false));
                    }
                    None => {
                        if let Some((_, _, work)) = last.get_mut(&run) {
                            *work = true;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// After a failed renew of a lease the same node was granted, that node pays nothing more under
/// the lease's epoch: no call turn, no tool run. Payments are what fencing cannot contain (the
/// store refuses a lost holder's writes, not its provider calls), so the segment must look at its
/// cancellation between an effect's fault point and the payment. Writes after the loss are not
/// judged here: a write already on its way when the node paused (a stall, a busy retry) cannot be
/// told from a new one in the history, and the store's fence refuses both (no-stale-acceptance).
pub(super) fn renew_loss(ctx: &Context) -> Vec<Violation> {
    type Tenure<'a> = (&'a str, &'a RunId, Epoch);
    // Leases a node was granted by its own acquire.
    let mut granted: BTreeSet<Tenure> = BTreeSet::new();
    // The row of the first failed renew of each tenure.
    let mut lost: BTreeMap<Tenure, usize> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        let node = row.node.as_str();
        match &row.event {
            Event::Call(call) => {
                let Some(lease) = &call.lease else { continue };
                let key = (node, &call.run, lease.epoch);
                match call.surface {
                    Surface::Acquire if call.outcome.is_ok() => {
                        granted.insert(key);
                    }
                    Surface::Renew if !call.outcome.is_ok() && granted.contains(&key) => {
                        lost.entry(key).or_insert(row.index);
                    }
                    _ => {}
                }
            }
            Event::Effect(effect) => {
                let Some(epoch) = effect.epoch else { continue };
                let Some(&at) = lost.get(&(node, &effect.run, epoch)) else { continue };
                let what = match effect.kind {
                    EffectKind::Call => format!("paid call turn {}", effect.n),
                    EffectKind::Tool => format!("ran tool {}", effect.n),
                };
                found.push(Violation::new(
                    RENEW_LOSS,
                    format!(
                        "{node} {what} of {} dispatch running={} under e{epoch} after its renew of that lease failed at row {at}",
                        effect.run, effect.running
                    ),
                    Some(row.index),
                    Some(at),
                ));
            }
            _ => {}
        }
    }
    found
}

/// Every repair the operator made was of a run something touched in its generation: a crash,
/// stall or takeover aimed at it, a segment of it that failed (reported, or a write of it the
/// store failed outright), a tenure of it that never
/// released its lease (its node crashed, restarted or lost the lease on the way), or an offline
/// resolution.
pub(super) fn justified_repair(ctx: &Context) -> Vec<Violation> {
    let released: BTreeSet<(Run, Epoch)> = ctx
        .rows
        .iter()
        .filter_map(|row| row.call().zip(ctx.runs.at(row.index)))
        .filter(|(c, _)| c.surface == Surface::Release && c.outcome.is_ok())
        .filter_map(|(c, run)| c.lease.as_ref().map(|l| (run, l.epoch)))
        .collect();
    // run -> the first row that touched it in this generation.
    let mut touched: BTreeMap<Run, usize> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        let Some(run_key) = ctx.runs.at(row.index) else { continue };
        match &row.event {
            Event::Call(call) if call.surface == Surface::Delete && call.outcome.is_ok() => {
                touched.remove(&run_key);
            }
            // An offline resolution leaves meta `suspended` over a resolved journal (D11): that
            // is the residue audit repairs to `running` (R5).
            Event::Call(Call {
                surface: Surface::Append,
                outcome: CallOutcome::Ok,
                payload: Payload::Entry(entry),
                ..
            }) if entry.kind == "resolution" => {
                touched.entry(run_key).or_insert(row.index);
            }
            Event::Call(call)
                if call.surface == Surface::Acquire
                    && call.outcome.is_ok()
                    && call.lease.as_ref().is_some_and(|l| !released.contains(&(run_key, l.epoch))) =>
            {
                touched.entry(run_key).or_insert(row.index);
            }
            Event::Fault { kind, run: Some(_), .. } if kind.interrupts() => {
                touched.entry(run_key).or_insert(row.index);
            }
            // A segment that refused its run's workflow binding did so before any write (contracts
            // 3.7): it left nothing to repair.
            Event::Outcome { result: SegmentResult::Failed(error), .. } if *error != SegmentError::Binding => {
                touched.entry(run_key).or_insert(row.index);
            }
            // A write the store failed outright (an I/O error, not a refusal) failed its segment,
            // whether or not the segment lived to report it.
            Event::Call(call)
                if call.surface.is_mutation()
                    && matches!(call.outcome, CallOutcome::Error(_) | CallOutcome::Injected) =>
            {
                touched.entry(run_key).or_insert(row.index);
            }
            Event::Repair { run, status } if !touched.contains_key(&run_key) => {
                found.push(Violation::new(
                    JUSTIFIED_REPAIR,
                    format!(
                        "{} repaired {run}'s meta to {status}, but nothing interrupted {run}: every tenure released its lease, no segment failed, no crash, stall or takeover hit it; an engine left its meta wrong",
                        row.node
                    ),
                    Some(row.index),
                    None,
                ));
            }
            _ => {}
        }
    }
    found
}
