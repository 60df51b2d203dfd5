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

use std::collections::{BTreeMap, BTreeSet};

use super::model::{holder, settle_status};
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{Call, CallOutcome, Effect, Event, Payload, Row, Surface};
use fencesim_store::{Epoch, RunId, RunStatus};

pub(super) const FAILED_WRITE_ENDS: Checker = Checker::FailedWriteEnds;
pub(super) const FAILED_WRITE_ENDS_CHECK: Descriptor = Descriptor {
    checker: FAILED_WRITE_ENDS,
    scope: Scope::Engine,
    invariant: "once a durable write of a tenure fails with a storage error, its node pays no more calls or tools under that lease and appends no ok settle under it (E15)",
    check: failed_write_ends,
};

pub(super) fn failed_write_ends(ctx: &Context) -> Vec<Violation> {
    let mut tenures = FailedTenures::default();
    let mut found = Vec::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        let violation = match &row.event {
            Event::Call(call) => tenures.call(ctx, pos, row, call),
            Event::Effect(effect) => tenures.effect(ctx, row, effect),
            Event::Fault { .. } | Event::Outcome { .. } | Event::Repair { .. } | Event::Request(_) | Event::Note(_) => {
                None
            }
        };
        found.extend(violation);
    }
    found
}

/// The tenures whose durable write failed, walked in row order.
#[derive(Default)]
struct FailedTenures<'a> {
    /// (node, run, epoch) of a tenure whose write failed -> the failing row's position.
    failed: BTreeMap<(&'a str, &'a RunId, Epoch), usize>,
    /// The tenures already reported: one violation each.
    judged: BTreeSet<(&'a str, &'a RunId, Epoch)>,
}

impl<'a> FailedTenures<'a> {
    /// A fenced call at `pos`: a failed mutation fails its tenure; an ok `run_settle` appended
    /// under a failed tenure is a violation.
    fn call(&mut self, ctx: &Context, pos: usize, row: &'a Row, call: &'a Call) -> Option<Violation> {
        let lease = call.lease.as_ref()?;
        let key = (row.node.as_str(), &lease.run, lease.epoch);
        if call.surface.is_mutation() && matches!(call.outcome, CallOutcome::Error(_) | CallOutcome::Injected) {
            self.failed.entry(key).or_insert(pos);
            return None;
        }
        let &at = self.failed.get(&key)?;
        // Judged whether or not the store took it: the attempt is the engine's conduct.
        let settles_ok = call.surface == Surface::Append
            && matches!(&call.payload, Payload::Entry(e) if settle_status(e) == Some(RunStatus::Ok));
        (settles_ok && self.judged.insert(key)).then(|| {
            Violation::new(
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
            )
        })
    }

    /// A paid effect under a failed tenure is a violation.
    fn effect(&mut self, ctx: &Context, row: &'a Row, effect: &'a Effect) -> Option<Violation> {
        let epoch = effect.epoch?;
        let key = (row.node.as_str(), &effect.run, epoch);
        let &at = self.failed.get(&key)?;
        self.judged.insert(key).then(|| {
            Violation::new(
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
            )
        })
    }
}
