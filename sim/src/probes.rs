//! Targeted probes for the engine defects the kill matrix's worlds cannot reach (or reach too
//! rarely), used by the kill matrix beside the simulator (and by the engine's own tests):
//!
//! - `second-live-segment` (D10): in a fenced world the lease itself refuses a second segment
//!   of a live run, so no history can show the defect; over a store without leases it pays a
//!   dispatch twice.
//! - `skip-cache-by-length` (D18): it needs a deleted run's recreated generation to reach the
//!   exact journal length a worker cached for the old one, with a resolution in it, which the
//!   built-in workflows never produce on their own; the probe builds that state directly.
//! - `audit-settled-dangling` (blind set 2026-12-04, patch 11): it needs a run that settled
//!   `error` over a dispatch left dangling before the settle, for the operator to audit; about
//!   one world in thirty has one (swarm seed 33, crash-between-journal-and-meta seed 29), none
//!   of the kill matrix's seeds 1 to 10. The probe writes that run and lets the operator's
//!   reconcile judge it.
//!
//! Each returns the promises it saw broken (empty when the engine kept them), or a
//! [`ProbeError`] when its set-up failed: a harness error, never a catch.

use std::rc::Rc;
use std::time::Duration;

use fencesim_engine::{Engine, audit};
use fencesim_engine::{
    EngineDefects, EngineError, EngineOptions, EngineResult, Ledger, Outcome, RunOptions, Step, SuspendKind,
    SweepReport, Worker, WorkerOptions, Workflow, entries,
};
use fencesim_store::{JournalStore, MemoryStore, RunId, RunMeta, RunStatus, Seq, Store, StoreDefects};
use serde_json::json;

use crate::env::SimEnv;
use crate::stores::{Db, DbKind};

/// A probe that could not build the state it probes: a harness error (exit 2), never a catch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("probe set-up failed: {0}")]
pub struct ProbeError(pub String);

fn runtime<F: std::future::Future>(body: F) -> F::Output {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(body)
}

/// D10: over a store without leases, a second segment of a live run in the same engine must be
/// refused; otherwise it redispatches the in-flight call and pays it twice.
pub fn second_segment(defects: EngineDefects) -> Result<Vec<String>, ProbeError> {
    runtime(async move {
        let mut broken = Vec::new();
        let store: Rc<dyn Store> = Rc::new(MemoryStore::new());
        let ledger = Ledger::new();
        let opts = EngineOptions { owner: "host".into(), call_ms: 100, defects, ..EngineOptions::default() };
        let engine = Engine::new(store, SimEnv::default(), ledger.clone(), opts)
            .map_err(|e| ProbeError(format!("the probe's engine options were refused: {e}")))?;
        let engine = Rc::new(engine);
        let run = RunId::new("r");
        let first = {
            let (engine, run) = (engine.clone(), run.clone());
            madsim::task::spawn_local(async move { engine.run(&run, &Workflow::happy(), RunOptions::default()).await })
        };
        madsim::time::sleep(Duration::from_millis(50)).await;
        let second = engine.resume(&run, &Workflow::happy(), RunOptions::default()).await;
        let _ = first.await;
        if !matches!(second, Err(EngineError::SegmentLive(_))) {
            broken.push(format!("a second live segment of {run} was admitted: {second:?}"));
        }
        for ((_, seq), paid) in ledger.entries() {
            if paid.calls > 1 {
                broken.push(format!("the dispatch at seq {seq} was paid {} times", paid.calls));
            }
        }
        Ok(broken)
    })
}

/// A workflow that parks on one external suspension.
pub fn wait_workflow() -> Workflow {
    let gate = Step::Suspend { key: "gate".into(), kind: SuspendKind::External, output: Some("gate".into()) };
    Workflow { name: "wait".into(), steps: vec![gate] }
}

/// What the D18 probe saw: the worker's three sweeps and the recreated run's final status.
#[derive(Debug)]
pub struct Generations {
    /// Generation 1, parked with a late no-op resolution (length 3), replayed by the worker.
    pub first: SweepReport,
    /// After generation 2 (same id, same length, resolved) was created.
    pub second: SweepReport,
    pub third: SweepReport,
    pub final_status: Option<RunStatus>,
}

/// D18's set-up, inside a madsim runtime: a worker caches (length, genesis) of a run it settled
/// suspended; the run is deleted and recreated; the new generation parks, is resolved, and has
/// the old length. A correct worker drives it to `ok` at its next sweep.
pub async fn generations(defects: EngineDefects) -> Result<Generations, ProbeError> {
    generations_inner(defects).await.map_err(|e| ProbeError(e.trim_start_matches("probe set-up failed: ").to_owned()))
}

async fn generations_inner(defects: EngineDefects) -> Result<Generations, String> {
    let db = Db::new(DbKind::Memdb).map_err(|e| format!("the probe's database: {e}"))?;
    type Node = (Rc<dyn Store>, Rc<Engine<SimEnv>>);
    let node = |owner: &str, defects| -> Result<Node, String> {
        let (store, env) = db.node(1_000, StoreDefects::NONE).map_err(|e| e.to_string())?;
        let opts = EngineOptions { owner: owner.into(), defects, ..EngineOptions::default() };
        let engine = Engine::new(store.clone(), env, Ledger::new(), opts).map_err(|e| e.to_string())?;
        Ok((store, Rc::new(engine)))
    };
    let (host_store, host) = node("host", EngineDefects::NONE)?;
    let (w_store, w) = node("w", defects)?;
    let worker = Worker::new(w, &w_store, vec![wait_workflow(), Workflow::approval()], WorkerOptions::default())
        .map_err(|e| e.to_string())?;
    let run = RunId::new("r-gen");
    let genesis = |g: &str| RunOptions { genesis: Some(g.into()), ..RunOptions::default() };
    let parked = |r: &EngineResult<Outcome>| matches!(r, Ok(o) if o.status == RunStatus::Suspended);
    let setup = |what: &str, ok: bool| if ok { Ok(()) } else { Err(format!("probe set-up failed: {what}")) };

    // Generation 1 parks; a late no-op resolution (a bogus target) lands; the worker replays it.
    setup("generation 1 parks", parked(&host.run(&run, &wait_workflow(), genesis("g1")).await))?;
    let journal = host_store.load(&run).map_err(|e| e.to_string())?;
    let late =
        entries::resolution(entries::next_seq(&run, &journal).map_err(|e| e.to_string())?, Seq(999), json!(null));
    setup("a late resolution lands", host_store.append(&run, &late, None).is_ok())?;
    let first = worker.sweep().await.map_err(|e| e.to_string())?;
    // Generation 2 of the same id parks, is resolved, and has the same length.
    setup("generation 1 is deleted", host.delete_run(&run, None).await.is_ok())?;
    setup("generation 2 parks", parked(&host.run(&run, &Workflow::approval(), genesis("g2")).await))?;
    setup("generation 2 is resolved", host.resolve(&run, Seq(1), json!("approved"), "resolver").await.is_ok())?;
    let same_length = host_store.load(&run).map_err(|e| e.to_string())?.len() == journal.len() + 1;
    setup("generation 2 has generation 1's length", same_length)?;
    let second = worker.sweep().await.map_err(|e| e.to_string())?;
    let third = worker.sweep().await.map_err(|e| e.to_string())?;
    let final_status = host_store.get_meta(&run).map_err(|e| e.to_string())?.map(|m| m.status);
    Ok(Generations { first, second, third, final_status })
}

/// D18 as a verdict: the promises [`generations`] saw broken.
pub fn recreated_generation(defects: EngineDefects) -> Result<Vec<String>, ProbeError> {
    let g = runtime(generations(defects))?;
    Ok(if g.final_status == Some(RunStatus::Ok) {
        Vec::new()
    } else {
        vec![format!("the resolved generation 2 of r-gen was never driven: meta {:?} after two sweeps", g.final_status)]
    })
}

/// R3 and E16: the operator's reconcile of a run that settled `error` over a dispatch left
/// dangling before the settle must leave it alone (the settle is final, the tail is empty); a
/// repair that reopens it breaks the promise.
pub fn settled_dangling(defects: EngineDefects) -> Result<Vec<String>, ProbeError> {
    let fail = |what: &str, e: fencesim_store::StoreError| ProbeError(format!("{what}: {e}"));
    let store = MemoryStore::new();
    let run = RunId::new("r-settled");
    let journal =
        [entries::running(Seq(1), entries::kind::AGENT, "draft"), entries::run_settle(Seq(2), RunStatus::Error, 1)];
    for entry in &journal {
        store.append(&run, entry, None).map_err(|e| fail("the journal is written", e))?;
    }
    let mut meta = RunMeta::new(run.clone(), RunStatus::Error).with_segments(1);
    meta.updated_at_ms = Some(0);
    store.put_meta(&meta, None).map_err(|e| fail("the meta is written", e))?;
    let reconciled =
        audit::reconcile_run_meta_planted(&store, &run, None, 1, defects).map_err(|e| fail("the reconcile", e))?;
    let after = store.get_meta(&run).map_err(|e| fail("the meta is read back", e))?.map(|m| m.status);
    Ok(match reconciled.repaired {
        None if after == Some(RunStatus::Error) => Vec::new(),
        repaired => vec![format!(
            "the operator's repair reopened {run}, settled 'error' with a dangling dispatch before its settle \
             ({}, repaired to {repaired:?}, meta now {after:?})",
            reconciled.audit
        )],
    })
}

#[cfg(test)]
mod tests {
    use fencesim_engine::{EngineDefect, EngineDefects};

    #[test]
    fn second_segment() {
        assert_eq!(super::second_segment(EngineDefects::NONE), Ok(Vec::<String>::new()));
        let broken = super::second_segment(EngineDefects::of(&[EngineDefect::SecondLiveSegment])).expect("set-up");
        assert!(broken.iter().any(|b| b.contains("second live segment")), "{broken:?}");
    }

    #[test]
    fn recreated_generation() {
        assert_eq!(super::recreated_generation(EngineDefects::NONE), Ok(Vec::<String>::new()));
        let broken =
            super::recreated_generation(EngineDefects::of(&[EngineDefect::SkipCacheByLength])).expect("set-up");
        assert!(broken.iter().any(|b| b.contains("never driven")), "{broken:?}");
    }

    #[test]
    fn settled_dangling() {
        assert_eq!(super::settled_dangling(EngineDefects::NONE), Ok(Vec::<String>::new()));
        let broken = super::settled_dangling(EngineDefects::of(&[EngineDefect::AuditSettledDangling])).expect("set-up");
        assert!(broken.iter().any(|b| b.contains("reopened")), "{broken:?}");
    }
}
