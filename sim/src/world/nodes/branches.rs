//! The world inputs that reach the engine's rarer branches, each opt-in (`WorldShape`'s `legacy`,
//! `colocated`, `misbind`, `corrupt`, `repair_after_ms`; the `branches` scenario turns them on), so a scenario that
//! leaves them off draws and runs exactly as before:
//!
//! - a legacy worker: `w1` does not know the `legacy` workflows, so it poisons a run bound to one
//!   of them for its genesis and skips it from then on, while the other workers drive it;
//! - a co-located worker: the client's process also sweeps, over the client's own engine, and
//!   meets the runs the client's segments are driving;
//! - a mistaken resume: the operator resumes each waiting run once under another workflow, which
//!   the segment must refuse before any write;
//! - a corrupt checkpoint: until quiescence, the operator overwrites the checkpoint of a dangling
//!   dispatch whose holder is gone with bytes that do not decode, under a brief lease of the run,
//!   so the next resume starts that dispatch over;
//! - a slow operator: it repairs `repair_after_ms` after its audit, so a run it found divergent
//!   may have moved on (or gone) by the time it holds the lease.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fencesim_engine::{Env, RunOptions, Worker, WorkerOptions, Workflow, entries};
use fencesim_store::{RunFilter, RunId, RunStatus, Seq};
use serde_json::Value;

use super::{Ctx, HarnessError, Shared, workflows};
use crate::env::SimEnv;
use crate::history::Event;
use crate::node::Node;

/// What the operator writes over a dangling dispatch's checkpoint: the format byte, then JSON cut
/// short, as a torn copy would be.
pub(super) const CORRUPT_CHECKPOINT: &[u8] = b"\x01{\"turns\":";

/// The workflows `node` knows: every built-in one, but a legacy `w1` lacks the scenario's `legacy`.
pub(super) fn workflows_of(shared: &Shared, node: Node) -> Vec<Workflow> {
    let legacy = &shared.cfg.scenario.world.legacy;
    let mut known = workflows();
    if node == Node::Worker(1) {
        known.retain(|w| !legacy.contains(&w.name));
    }
    known
}

/// With `colocated`, a queue worker over the client's own engine, as a task of the client's node
/// (it dies with it): sweep, report each driven run's outcome, sleep, forever. Its rows and
/// outcomes carry the client's label, so the client acts only between its sweeps
/// ([`while_sweeping`]): a sweep reports what it drove when it ends, and an outcome of the client's
/// in between would take the calls of the sweep's segment as its own.
pub(super) fn colocate(shared: &Arc<Shared>, ctx: &Rc<Ctx>) -> Result<Option<Rc<Worker<SimEnv>>>, HarnessError> {
    if !shared.cfg.scenario.world.colocated {
        return Ok(None);
    }
    let plan = &shared.plan;
    let opts = WorkerOptions {
        owner: ctx.label.clone(),
        concurrency: plan.concurrency,
        ttl_ms: Some(plan.ttl_ms),
        poll_ms: plan.poll_ms,
        retention: None,
    };
    let worker = Worker::new(ctx.engine.clone(), &ctx.store, workflows(), opts)
        .map_err(|error| HarnessError::Engine { label: ctx.label.clone(), part: "co-located worker", error })?;
    let (worker, ctx) = (Rc::new(worker), ctx.clone());
    let running = worker.clone();
    madsim::task::spawn_local(async move {
        running
            .run_reporting(|report| {
                for (run, result) in &report.driven {
                    ctx.outcome(run, result);
                }
            })
            .await;
    });
    Ok(Some(worker))
}

/// How often the client looks again whether its co-located worker's sweep ended.
const SWEEP_CHECK_MS: u64 = 50;

/// Wait until the client's co-located worker (if any) is between sweeps; without one, return at
/// once (no await: a world without it schedules as before). Every segment the client starts waits
/// here first, right before its acquire: a sweep reports the runs it drove only when it ends, and
/// a client segment of such a run begun in between would take the sweep's calls as its own (or
/// its outcome the sweep's), both being under the client's label.
pub(super) async fn between_sweeps(ctx: &Ctx) {
    let worker = ctx.colocated.borrow().clone();
    while worker.as_deref().is_some_and(Worker::is_sweeping) {
        ctx.env.sleep(SWEEP_CHECK_MS).await;
    }
}

/// With `repair_after_ms`, the operator's pause between its audit and its repairs.
pub(super) async fn think(shared: &Shared, ctx: &Ctx) {
    let ms = shared.cfg.scenario.world.repair_after_ms;
    if ms > 0 {
        ctx.env.sleep(u64::from(ms)).await;
    }
}

/// The operator's chores beside its audit, each on when its setting is.
#[derive(Default)]
pub(super) struct Chores {
    /// Runs resumed under the wrong workflow (and refused), by genesis: each once.
    misbound: BTreeSet<(RunId, Option<String>)>,
    /// Dangling dispatches whose checkpoint was overwritten: each once.
    corrupted: BTreeSet<(RunId, Seq)>,
}

impl Chores {
    pub(super) async fn run(&mut self, shared: &Shared, ctx: &Ctx) {
        let world = &shared.cfg.scenario.world;
        if !world.misbind && !world.corrupt {
            return;
        }
        let Ok(metas) = ctx.store.list_runs(&RunFilter::all()) else { return };
        for meta in metas {
            if world.misbind && meta.status == RunStatus::Suspended {
                self.misbind(ctx, &meta.run_id, meta.genesis.clone(), meta.extra.get("workflow")).await;
            }
            if world.corrupt && meta.status == RunStatus::Running && !shared.quiet.load(Ordering::SeqCst) {
                self.corrupt(ctx, &meta.run_id).await;
            }
        }
    }

    /// Resume a waiting run under a workflow it is not bound to; the outcome is recorded. Done
    /// once the segment refused the binding (a live holder means: try again at the next audit).
    async fn misbind(&mut self, ctx: &Ctx, run: &RunId, genesis: Option<String>, bound: Option<&Value>) {
        let Some(bound) = bound.and_then(Value::as_str) else { return };
        let key = (run.clone(), genesis);
        if self.misbound.contains(&key) {
            return;
        }
        let Some(other) = Workflow::BUILTIN.iter().find(|name| **name != bound).and_then(|n| Workflow::builtin(n))
        else {
            return;
        };
        ctx.history
            .push(&ctx.label, Event::Note(format!("operator resumes {run} as '{}' (bound to '{bound}')", other.name)));
        let result = Box::pin(ctx.engine.resume(run, &other, RunOptions::default())).await;
        ctx.outcome(run, &result);
        if matches!(result, Err(fencesim_engine::EngineError::Binding(_))) {
            self.misbound.insert(key);
        }
    }

    /// Overwrite the checkpoint of the run's last dangling dispatch with undecodable bytes, under
    /// a brief lease (a live holder keeps its run), checked dangling again under the lease.
    async fn corrupt(&mut self, ctx: &Ctx, run: &RunId) {
        let Ok(journal) = ctx.store.load(run) else { return };
        let Some(&seq) = entries::dangling(&journal).last() else { return };
        if self.corrupted.contains(&(run.clone(), seq)) {
            return;
        }
        let Ok(lease) = ctx.engine.acquire(run, &ctx.label).await else { return };
        let still = ctx.store.load(run).is_ok_and(|journal| entries::dangling(&journal).contains(&seq));
        if still {
            let blob_ref = entries::checkpoint_ref(run, seq);
            ctx.history.push(&ctx.label, Event::Note(format!("operator overwrites {blob_ref} with undecodable bytes")));
            if ctx.store.put_blob(&blob_ref, CORRUPT_CHECKPOINT, Some(&lease)).is_ok() {
                self.corrupted.insert((run.clone(), seq));
            }
        }
        ctx.engine.release_quietly(&lease);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corrupt_checkpoint_does_not_decode() {
        assert_eq!(fencesim_engine::checkpoint::Checkpoint::decode(CORRUPT_CHECKPOINT, 4, 2), None);
    }
}
