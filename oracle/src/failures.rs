//! `failed-write-ends`: a storage error no retry absorbs ends what it hits (contracts E15). Once a
//! durable write of a tenure (an append, a meta, a blob, a delete) came back with a storage error,
//! that tenure goes no further: its node pays no more model calls or tools under the lease, and
//! attempts no `ok` settle under it (the run settles `error`, or the settle itself fails); an
//! attempt counts whether or not the store took it. A write
//! failure taken for "only an optimisation" and swallowed, a segment that goes on paying after its
//! checkpoint could not be saved, a settle of `ok` over a failed body write: each shows here.
//!
//! Busy answers are not judged (the engine retries them; only an exhausted retry is a failure, and
//! the history cannot tell the last busy of a retry loop from the first). An error injected by the
//! engine's env before the call never reaches the store, so it makes no row and is not judged.

use std::collections::BTreeMap;

use super::model::{holder, settle_status};
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{CallOutcome, Event, Payload, Surface};
use fencesim_store::{Epoch, RunId, RunStatus};

pub(super) const FAILED_WRITE_ENDS: Checker = Checker::FailedWriteEnds;
pub(super) const FAILED_WRITE_ENDS_CHECK: Descriptor = Descriptor {
    checker: FAILED_WRITE_ENDS,
    scope: Scope::Engine,
    invariant: "once a durable write of a tenure fails with a storage error, its node pays no more calls or tools under that lease and appends no ok settle under it (E15)",
    check: failed_write_ends,
};

pub(super) fn failed_write_ends(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    // (node, run, epoch) of a tenure whose write failed -> the failing row's position.
    let mut failed: BTreeMap<(&str, &RunId, Epoch), usize> = BTreeMap::new();
    let mut judged = std::collections::BTreeSet::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        match &row.event {
            Event::Call(call) => {
                let Some(lease) = &call.lease else { continue };
                let key = (row.node.as_str(), &lease.run, lease.epoch);
                if call.surface.is_mutation() && matches!(call.outcome, CallOutcome::Error(_) | CallOutcome::Injected) {
                    failed.entry(key).or_insert(pos);
                    continue;
                }
                let Some(&at) = failed.get(&key) else { continue };
                // Judged whether or not the store took it: the attempt is the engine's conduct.
                let settles_ok = call.surface == Surface::Append
                    && matches!(&call.payload, Payload::Entry(e) if settle_status(e) == Some(RunStatus::Ok));
                if settles_ok && judged.insert(key) {
                    found.push(Violation::new(
                        FAILED_WRITE_ENDS,
                        format!(
                            "{} settled run {} ok under {} after its {} failed with a storage error (the store answered {:?})",
                            row.node,
                            call.run,
                            holder(call),
                            ctx.rows[at].call().map_or("write", |c| c.surface.as_str()),
                            call.outcome
                        ),
                        Some(row.index),
                        Some(ctx.rows[at].index),
                    ));
                }
            }
            Event::Effect(effect) => {
                let Some(epoch) = effect.epoch else { continue };
                let key = (row.node.as_str(), &effect.run, epoch);
                let Some(&at) = failed.get(&key) else { continue };
                if judged.insert(key) {
                    found.push(Violation::new(
                        FAILED_WRITE_ENDS,
                        format!(
                            "{} paid {:?} {} of run {} (running seq {}) at epoch {epoch} after its {} under that lease \
                             failed with a storage error",
                            row.node,
                            effect.kind,
                            effect.n,
                            effect.run,
                            effect.running,
                            ctx.rows[at].call().map_or("write", |c| c.surface.as_str())
                        ),
                        Some(row.index),
                        Some(ctx.rows[at].index),
                    ));
                }
            }
            Event::Fault { .. } | Event::Outcome { .. } | Event::Repair { .. } | Event::Request(_) | Event::Note(_) => {
            }
        }
    }
    found
}
