//! `worker-candidacy`: a queue worker drives only a run that still wants driving (contracts E8).
//! It lists candidates without a lease, acquires, and re-checks under the lease; a run whose meta
//! is terminal by then is released untouched. So a worker's (or the retention sweeper's) segment
//! boot, an accepted `running` meta one segment on, never follows a terminal meta of the same generation of its
//! run: that is a settled run resumed, its status sent back to `running` and its segment count
//! bumped, or a run cancelled before its first entry driven to completion. A client may resume a
//! run it drove (a reattach after its restart); only the workers' sweeps are held to this.

use std::collections::BTreeMap;

use super::model::holder;
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{Event, Payload, Role, Surface};
use fencesim_store::{RunId, RunStatus};

pub(super) const WORKER_CANDIDACY: Checker = Checker::WorkerCandidacy;
pub(super) const WORKER_CANDIDACY_CHECK: Descriptor = Descriptor {
    checker: WORKER_CANDIDACY,
    scope: Scope::Engine,
    invariant: "a worker's or the sweeper's segment boot (an accepted running meta) never follows a terminal meta of the same generation: a sweep re-checks candidacy under its lease (E8)",
    check: worker_candidacy,
};

pub(super) fn worker_candidacy(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    // Each run's latest accepted meta (status, segments) in its current generation, and its row.
    let mut metas: BTreeMap<&RunId, (RunStatus, u32, usize)> = BTreeMap::new();
    for row in ctx.rows {
        let Event::Call(call) = &row.event else { continue };
        if !call.outcome.is_ok() {
            continue;
        }
        match (call.surface, &call.payload) {
            (Surface::Delete, _) => {
                metas.remove(&call.run);
            }
            (Surface::PutMeta, Payload::Meta(meta)) => {
                // A boot: `running`, one segment more than the meta before it.
                if let Some(&(before, segments, at)) = metas.get(&call.run)
                    && before.is_terminal()
                    && meta.status == RunStatus::Running
                    && meta.segments > segments
                    && matches!(row.role, Role::Worker | Role::Sweeper)
                {
                    // The settled meta it booted over is an earlier row of the walk.
                    assert!(at < row.index, "row {}: a settled meta recorded at row {at}", row.index);
                    found.push(Violation::new(
                        WORKER_CANDIDACY,
                        format!(
                            "worker {} booted a segment of run {} under {} although its meta was already {before}: \
                             a settled run resumed by a sweep",
                            row.node,
                            call.run,
                            holder(call)
                        ),
                        Some(row.index),
                        Some(at),
                    ));
                }
                metas.insert(&call.run, (meta.status, meta.segments, row.index));
            }
            _ => {}
        }
    }
    found
}
