//! Targeted probes for the two engine defects a fenced world cannot reach, used by the kill
//! matrix beside the simulator (and by the engine's own tests):
//!
//! - `second-live-segment` (D10): in a fenced world the lease itself refuses a second segment
//!   of a live run, so no history can show the defect; over a store without leases it pays a
//!   dispatch twice.
//! - `skip-cache-by-length` (D18): it needs a deleted run's recreated generation to reach the
//!   exact journal length a worker cached for the old one, with a resolution in it, which the
//!   built-in workflows never produce on their own; the probe builds that state directly.
//!
//! Each returns the promises it saw broken (empty when the engine kept them).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use fencesim_engine::Engine;
use fencesim_engine::{
    EngineDefects, EngineError, EngineOptions, Ledger, RunOptions, Step, SuspendKind, Worker, WorkerOptions, Workflow,
    entries,
};
use fencesim_store::{Defects, MemoryStore, RunId, RunStatus, Seq, Store};
use serde_json::json;

use crate::env::{SimClock, SimEnv};
use crate::stores::{Db, DbKind};

fn runtime<F: std::future::Future>(body: F) -> F::Output {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(body)
}

/// D10: over a store without leases, a second segment of a live run in the same engine must be
/// refused; otherwise it redispatches the in-flight call and pays it twice.
pub fn second_segment(defects: EngineDefects) -> Vec<String> {
    runtime(async move {
        let mut broken = Vec::new();
        let store: Rc<dyn Store> = Rc::new(MemoryStore::new());
        let ledger = Ledger::new();
        let opts = EngineOptions { owner: "host".into(), call_ms: 100, defects, ..EngineOptions::default() };
        let Ok(engine) = Engine::new(store, SimEnv::default(), ledger.clone(), opts) else {
            return vec!["the probe's engine options were refused".into()];
        };
        let engine = Rc::new(engine);
        let run = RunId::new("r");
        let first = {
            let (engine, run) = (engine.clone(), run.clone());
            madsim::task::spawn_local(async move { engine.run(&run, &Workflow::happy(), RunOptions::default()).await })
        };
        madsim::time::sleep(Duration::from_millis(50)).await;
        let second = engine.resume(&run, &Workflow::happy(), RunOptions::default()).await;
        let _ = first.await;
        if !matches!(second, Err(EngineError::Config(_))) {
            broken.push(format!("a second live segment of {run} was admitted: {second:?}"));
        }
        for ((_, seq), paid) in ledger.entries() {
            if paid.calls > 1 {
                broken.push(format!("the dispatch at seq {seq} was paid {} times", paid.calls));
            }
        }
        broken
    })
}

/// A workflow that parks on one external suspension.
pub fn wait_workflow() -> Workflow {
    let gate = Step::Suspend { key: "gate".into(), kind: SuspendKind::External, output: Some("gate".into()) };
    Workflow { name: "wait".into(), steps: vec![gate] }
}

/// D18: a worker caches (length, genesis) of a run it settled suspended. The run is deleted and
/// recreated; the new generation parks, is resolved, and has the old length. The worker must
/// drive it to `ok`, not skip it as unchanged.
pub fn recreated_generation(defects: EngineDefects) -> Vec<String> {
    let Ok(db) = Db::new(DbKind::Memdb) else { return vec!["the probe's database could not be created".into()] };
    runtime(async move {
        let node = |owner: &str, defects| {
            let clock = SimClock::new(0);
            let store: Rc<dyn Store> = Rc::new(db.open(Arc::new(clock.clone()), 1_000, Defects::NONE).ok()?);
            let opts = EngineOptions { owner: owner.into(), defects, ..EngineOptions::default() };
            let engine = Engine::new(store.clone(), SimEnv::new(clock), Ledger::new(), opts).ok()?;
            Some((store, Rc::new(engine)))
        };
        let (Some((host_store, host)), Some((w_store, w))) = (node("host", EngineDefects::NONE), node("w", defects))
        else {
            return vec!["the probe's nodes could not be opened".into()];
        };
        let Ok(worker) =
            Worker::new(w, &w_store, vec![wait_workflow(), Workflow::approval()], WorkerOptions::default())
        else {
            return vec!["the probe's worker options were refused".into()];
        };
        let run = RunId::new("r-gen");
        let genesis = |g: &str| RunOptions { genesis: Some(g.into()), ..RunOptions::default() };
        let step = |what: &str, ok: bool| if ok { None } else { Some(format!("probe set-up failed: {what}")) };

        // Generation 1 parks; a late no-op resolution lands; the worker replays it (length 3).
        let parked = host.run(&run, &wait_workflow(), genesis("g1")).await;
        let journal = host_store.load(&run).unwrap_or_default();
        let late = entries::resolution(entries::next_seq(&journal), Seq(999), json!(null));
        let mut setup = vec![
            step("generation 1 parks", matches!(parked, Ok(ref o) if o.status == RunStatus::Suspended)),
            step("a late resolution lands", host_store.append(&run, &late, None).is_ok()),
        ];
        let _ = worker.sweep().await;
        // Generation 2 of the same id parks, is resolved, and has the same length.
        setup.push(step("generation 1 is deleted", host.delete_run(&run, None).await.is_ok()));
        let parked = host.run(&run, &Workflow::approval(), genesis("g2")).await;
        setup.push(step("generation 2 parks", matches!(parked, Ok(ref o) if o.status == RunStatus::Suspended)));
        setup.push(step(
            "generation 2 is resolved",
            host.resolve(&run, Seq(1), json!("approved"), "resolver").await.is_ok(),
        ));
        let setup: Vec<String> = setup.into_iter().flatten().collect();
        if !setup.is_empty() {
            return setup;
        }
        let _ = worker.sweep().await;
        let _ = worker.sweep().await;
        match host_store.get_meta(&run) {
            Ok(Some(meta)) if meta.status == RunStatus::Ok => Vec::new(),
            other => vec![format!(
                "the resolved generation 2 of {run} was never driven: meta {:?} after two sweeps",
                other.ok().flatten().map(|m| m.status)
            )],
        }
    })
}
