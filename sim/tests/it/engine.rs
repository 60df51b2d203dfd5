//! The engine's semantics (contracts 3) over MemoryStore and over SqliteStore on memdb and on a
//! WAL file: workflows end to end, suspensions and offline resolution, pure replay, ownership
//! refusals with zero writes and zero calls, option validation, busy retry, lease loss by a
//! clock jump, undecodable checkpoints, delete and prune cascades, and the real-time `Env`.

use std::rc::Rc;
use std::sync::Arc;

use crate::common::{Node, TTL, node, node_with, over, sim, sleep_ms, world};
use fencesim_engine::entries::{self, status};
use fencesim_engine::{
    Engine, EngineDefects, EngineError, EngineOptions, Fault, Ledger, Ownership, Phase, RealEnv, RunOptions, Site,
    Workflow, Write,
};
use fencesim_sim::env::SimEnv;
use fencesim_sim::stores::DbKind;
use fencesim_store::{MemoryStore, Op, RunId, RunStatus, Seq, SqliteOptions, SqliteStore, Store, StoreError};
use serde_json::json;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Memory,
    Sqlite(DbKind),
}

const BACKENDS: [Backend; 3] = [Backend::Memory, Backend::Sqlite(DbKind::Memdb), Backend::Sqlite(DbKind::File)];

/// Run `body` with a fresh node on each backend. Memory nodes share one MemoryStore per world.
fn each_backend<F: std::future::Future<Output = ()>>(body: impl Fn(Backend, Vec<Node>) -> F) {
    for backend in BACKENDS {
        let db = world(match backend {
            Backend::Sqlite(kind) => kind,
            Backend::Memory => DbKind::Memdb,
        });
        sim(|| async {
            let nodes = match backend {
                Backend::Memory => {
                    let store = MemoryStore::new();
                    ["a", "b"]
                        .map(|owner| {
                            let opts = EngineOptions { owner: owner.into(), ..EngineOptions::default() };
                            over(Rc::new(store.clone()), SimEnv::default(), opts)
                        })
                        .into()
                }
                Backend::Sqlite(_) => vec![node(&db, "a", EngineDefects::NONE), node(&db, "b", EngineDefects::NONE)],
            };
            body(backend, nodes).await;
        });
    }
}

#[test]
fn the_kill_point_workflows_settle_ok_and_pay_once() {
    each_backend(|backend, nodes| async move {
        let a = &nodes[0];
        for (run, wf, value, paid) in [
            ("h", Workflow::happy(), json!({"one": "alpha", "two": "beta"}), (2, 0)),
            ("l", Workflow::limit(), json!({"agentStatus": "limit"}), (3, 2)),
        ] {
            let run = RunId::new(run);
            let outcome = a.engine.run(&run, &wf, RunOptions::default()).await.expect("settles");
            assert_eq!((outcome.status, outcome.value, outcome.segment), (RunStatus::Ok, value, 1), "{backend:?}");
            let total = a.ledger.run_total(&run);
            assert_eq!((total.calls, total.tools), paid, "{backend:?}");
            let meta = a.store.get_meta(&run).unwrap().expect("meta");
            assert_eq!((meta.status, meta.segments), (RunStatus::Ok, 1));
            assert_eq!(meta.extra.get("workflow"), Some(&json!(wf.name)));
            let journal = a.store.load(&run).unwrap();
            assert_eq!(entries::last_run_settle(&journal).map(|s| s.run_status), Some(RunStatus::Ok));
        }
    });
}

#[test]
fn a_settled_run_replays_without_appending_or_paying() {
    each_backend(|backend, nodes| async move {
        let (a, b) = (&nodes[0], &nodes[1]);
        let run = RunId::new("r");
        a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await.expect("settles");
        let before = a.store.load(&run).unwrap();
        let replay = b.engine.resume(&run, &Workflow::happy(), RunOptions::default()).await.expect("replays");
        assert_eq!((replay.status, replay.appended, replay.segment), (RunStatus::Ok, 0, 2), "{backend:?}");
        assert_eq!(a.store.load(&run).unwrap(), before, "journal byte-stable on pure replay");
        assert_eq!(b.ledger.run_total(&run).calls, 0);
        assert_eq!(a.store.get_meta(&run).unwrap().map(|m| m.segments), Some(2));
    });
}

/// Found by the engine-level soak: a segment settled `error` with its dispatch still dangling
/// (its checkpoint write failed busy), the terminal meta write was lost, and the next worker
/// redispatched the dangling call and appended after the terminal settle. A journal with a
/// terminal settle is final: the resume pays nothing, appends nothing, and only projects the meta.
#[test]
fn a_run_settled_with_a_dangling_dispatch_is_never_dispatched_again() {
    each_backend(|backend, nodes| async move {
        let (a, b) = (&nodes[0], &nodes[1]);
        let run = RunId::new("r");
        let meta = fencesim_store::RunMeta::new(run.clone(), RunStatus::Running).with_segments(2);
        let mut meta = meta;
        meta.extra.insert("workflow".into(), json!("limit"));
        a.store.put_meta(&meta, None).unwrap();
        a.store.append(&run, &entries::running(Seq(1), entries::kind::AGENT, "probe"), None).unwrap();
        a.store.append(&run, &entries::run_settle(Seq(2), RunStatus::Error, 2), None).unwrap();
        let before = a.store.load(&run).unwrap();
        let outcome = b.engine.resume(&run, &Workflow::limit(), RunOptions::default()).await.expect("replays");
        assert_eq!((outcome.status, outcome.appended), (RunStatus::Error, 0), "{backend:?}");
        assert_eq!(a.store.load(&run).unwrap(), before, "{backend:?}: nothing appended after the terminal settle");
        assert_eq!(b.ledger.run_total(&run).calls, 0, "{backend:?}: the dangling call was paid again");
        assert_eq!(a.store.get_meta(&run).unwrap().map(|m| m.status), Some(RunStatus::Error));
    });
}

#[test]
fn a_run_settled_cancelled_is_never_dispatched_again_nor_resolved() {
    // A crash fell between the `cancelled` settle and its meta write: the meta still says
    // running, so a worker resumes the run. The cancelled dispatch must not be paid again, the
    // final journal must not grow, and an offline resolution is refused.
    each_backend(|backend, nodes| async move {
        let (a, b) = (&nodes[0], &nodes[1]);
        let run = RunId::new("r");
        let mut meta = fencesim_store::RunMeta::new(run.clone(), RunStatus::Running).with_segments(1);
        meta.extra.insert("workflow".into(), json!("happy"));
        a.store.put_meta(&meta, None).unwrap();
        let key = match &Workflow::happy().steps[0] {
            fencesim_engine::Step::Agent(agent) => agent.key.clone(),
            other => panic!("the happy workflow opens with an agent step: {other:?}"),
        };
        a.store.append(&run, &entries::running(Seq(1), entries::kind::AGENT, &key), None).unwrap();
        let cancelled = entries::terminal(Seq(2), Seq(1), entries::kind::AGENT, status::CANCELLED, &key, json!({}));
        a.store.append(&run, &cancelled, None).unwrap();
        a.store.append(&run, &entries::suspension(Seq(3), entries::kind::APPROVAL, "gate"), None).unwrap();
        a.store.append(&run, &entries::run_settle(Seq(4), RunStatus::Cancelled, 1), None).unwrap();
        let before = a.store.load(&run).unwrap();
        let outcome = b.engine.resume(&run, &Workflow::happy(), RunOptions::default()).await.expect("replays");
        assert_eq!((outcome.status, outcome.appended), (RunStatus::Cancelled, 0), "{backend:?}");
        assert_eq!(b.ledger.run_total(&run).calls, 0, "{backend:?}: the cancelled dispatch was paid again");
        let refused = a.engine.resolve(&run, Seq(3), json!("late"), "client").await;
        assert!(matches!(refused, Err(EngineError::Config(_))), "{backend:?}: {refused:?}");
        assert_eq!(a.store.load(&run).unwrap(), before, "{backend:?}: the final journal grew");
        assert_eq!(a.store.get_meta(&run).unwrap().map(|m| m.status), Some(RunStatus::Cancelled));
    });
}

#[test]
fn a_suspension_parks_the_run_until_an_offline_resolution() {
    each_backend(|backend, nodes| async move {
        let (a, b) = (&nodes[0], &nodes[1]);
        let run = RunId::new("r");
        let parked = a.engine.run(&run, &Workflow::approval(), RunOptions::default()).await.expect("settles");
        assert_eq!(parked.status, RunStatus::Suspended, "{backend:?}");
        // Resuming while still parked appends nothing.
        let still = b.engine.resume(&run, &Workflow::approval(), RunOptions::default()).await.expect("settles");
        assert_eq!((still.status, still.appended), (RunStatus::Suspended, 0));
        let target =
            a.store.load(&run).unwrap().iter().find(|e| e.status == status::SUSPENDED).expect("suspension").seq;
        assert!(matches!(a.engine.resolve(&run, Seq(99), json!("x"), "client").await, Err(EngineError::Config(_))));
        a.engine.resolve(&run, target, json!("approved"), "client").await.expect("resolves");
        let done = b.engine.resume(&run, &Workflow::approval(), RunOptions::default()).await.expect("settles");
        assert_eq!(done.status, RunStatus::Ok);
        assert_eq!(done.value, json!({"approval": "approved", "act": "done"}));
        assert_eq!(b.ledger.run_total(&run).tools, 1);
    });
}

#[test]
fn a_held_lease_refuses_a_segment_with_zero_writes_and_zero_calls() {
    let db = world(DbKind::Memdb);
    sim(|| async {
        let (a, b) = (node(&db, "a", EngineDefects::NONE), node(&db, "b", EngineDefects::NONE));
        let run = RunId::new("r");
        a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await.expect("settles");
        let holder = a.store.leases().unwrap().acquire(&run, "holder").expect("acquire");
        let before = (a.store.load(&run).unwrap(), a.store.get_meta(&run).unwrap());
        let refused = b.engine.resume(&run, &Workflow::happy(), RunOptions::default()).await;
        assert!(matches!(refused, Err(EngineError::LeaseHeld(_))), "{refused:?}");
        assert_eq!((a.store.load(&run).unwrap(), a.store.get_meta(&run).unwrap()), before);
        assert_eq!(b.ledger.run_total(&run).calls, 0);
        // A fresh run over an existing id is refused too.
        a.store.leases().unwrap().release(&holder).unwrap();
        let again = b.engine.run(&run, &Workflow::happy(), RunOptions::default()).await;
        assert!(matches!(again, Err(EngineError::Config(_))), "{again:?}");
    });
}

#[test]
fn a_supplied_lease_is_the_callers_and_must_name_the_run() {
    let db = world(DbKind::Memdb);
    sim(|| async {
        let a = node(&db, "a", EngineDefects::NONE);
        let leases = a.store.leases().unwrap();
        let (run, other) = (RunId::new("r"), RunId::new("other"));
        let wrong = leases.acquire(&other, "host").unwrap();
        let refused =
            a.engine.run(&run, &Workflow::happy(), RunOptions { lease: Some(wrong), ..Default::default() }).await;
        assert!(matches!(refused, Err(EngineError::Config(_))), "{refused:?}");
        assert_eq!(a.store.get_meta(&run).unwrap(), None);
        let lease = leases.acquire(&run, "host").unwrap();
        let opts = RunOptions { lease: Some(lease.clone()), ..Default::default() };
        a.engine.run(&run, &Workflow::happy(), opts).await.expect("settles");
        // The engine did not release it: the caller still holds it.
        leases.renew(&lease).expect("still the caller's lease");
    });
}

#[test]
fn invalid_engine_options_are_config_errors_at_construction() {
    let store: Rc<dyn Store> = Rc::new(MemoryStore::new());
    for opts in [
        EngineOptions { renew_every_ms: Some(0), ..EngineOptions::default() },
        EngineOptions { renew_every_ms: Some(60_000), ..EngineOptions::default() },
        EngineOptions { owner: String::new(), ..EngineOptions::default() },
    ] {
        let made = Engine::new(store.clone(), SimEnv::default(), Ledger::new(), opts.clone());
        assert!(matches!(made, Err(EngineError::Config(_))), "{opts:?}");
    }
    assert!(
        Workflow::new("dup", [Workflow::happy().steps[0].clone(), Workflow::happy().steps[0].clone()].into()).is_err()
    );
}

#[test]
fn injected_busy_is_retried_and_an_injected_io_error_fails_the_run() {
    let db = world(DbKind::Memdb);
    sim(|| async {
        let a = node(&db, "a", EngineDefects::NONE);
        a.env.on_fault(|p| match p.site {
            Site::Write { phase: Phase::Before, .. } => Fault::Fail(StoreError::Busy { op: Op::Append, run: None }),
            _ => Fault::Continue,
        });
        let run = RunId::new("busy");
        let outcome = a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await.expect("busy is retried");
        assert_eq!(outcome.status, RunStatus::Ok);
        a.env.on_fault(|p| match p.site {
            Site::Write { phase: Phase::Before, write: Write::Append(e), .. } if e.status == status::RUNNING => {
                Fault::Fail(StoreError::storage(Op::Append, "disk full"))
            }
            _ => Fault::Continue,
        });
        let failed = a.engine.run(&RunId::new("io"), &Workflow::happy(), RunOptions::default()).await.expect("settles");
        assert_eq!(failed.status, RunStatus::Error);
    });
}

#[test]
fn a_clock_jump_past_the_ttl_is_lease_loss_and_the_segment_is_superseded() {
    let db = world(DbKind::Memdb);
    sim(|| async {
        let opts = EngineOptions { owner: "a".into(), call_ms: 200, ..EngineOptions::default() };
        let a = node_with(&db, opts);
        let clock = a.env.clock().clone();
        a.env.on_fault(move |p| {
            if matches!(p.site, Site::Call { running: Seq(1), turn: 1 }) {
                clock.set_skew_ms(i64::from(10 * TTL));
            }
            Fault::Continue
        });
        let run = RunId::new("r");
        let result = a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await;
        assert!(matches!(result, Err(EngineError::Superseded { status: RunStatus::Cancelled, .. })), "{result:?}");
        assert_eq!(a.ledger.run_total(&run).calls, 1, "the cancel stops the run before the next dispatch");
    });
}

#[test]
fn a_lease_lost_while_an_effect_waits_at_its_fault_point_pays_nothing() {
    // At the first tool's fault point the node's clock jumps past the ttl and the call waits
    // there while the renew loop runs on: the next renew is refused, which is lease loss (E2).
    // The tool must not run when the call goes on (renew-loss; swarm seed 8916 found it run).
    let db = world(DbKind::Memdb);
    sim(|| async {
        let a = node(&db, "a", EngineDefects::NONE);
        let clock = a.env.clock().clone();
        let fired = std::cell::Cell::new(false);
        a.env.set_script(Some(Box::new(move |p| {
            if fired.get() || !matches!(p.site, Site::Tool { n: 1, .. }) {
                return Box::pin(async { Fault::Continue });
            }
            fired.set(true);
            clock.set_skew_ms(i64::from(10 * TTL));
            Box::pin(async {
                sleep_ms(u64::from(TTL)).await;
                Fault::Continue
            })
        })));
        let run = RunId::new("r");
        let result = a.engine.run(&run, &Workflow::limit(), RunOptions::default()).await;
        assert!(matches!(result, Err(EngineError::Superseded { status: RunStatus::Cancelled, .. })), "{result:?}");
        let paid = a.ledger.run_total(&run);
        assert_eq!((paid.calls, paid.tools), (1, 0), "the tool waited out the lease loss and ran anyway");
    });
}

#[test]
fn an_undecodable_checkpoint_is_refused_whole_and_the_dispatch_reruns_from_the_top() {
    let db = world(DbKind::Memdb);
    sim(|| async {
        let (a, b) = (node(&db, "a", EngineDefects::NONE), node(&db, "b", EngineDefects::NONE));
        let run = RunId::new("r");
        // Crash right after the second tool turn's checkpoint landed.
        let saves = std::cell::Cell::new(0);
        a.env.on_fault(move |p| match p.site {
            Site::Write { phase: Phase::After, write: Write::PutBlob { .. }, .. } => {
                saves.set(saves.get() + 1);
                if saves.get() == 2 { Fault::Crash } else { Fault::Continue }
            }
            _ => Fault::Continue,
        });
        assert!(matches!(
            a.engine.run(&run, &Workflow::limit(), RunOptions::default()).await,
            Err(EngineError::Crashed)
        ));
        sleep_ms(u64::from(TTL) + 10).await;
        a.store.put_blob(&entries::checkpoint_ref(&run, Seq(1)), b"\x01{garbage", None).unwrap();
        let outcome = b.engine.resume(&run, &Workflow::limit(), RunOptions::default()).await.expect("settles");
        assert_eq!(outcome.status, RunStatus::Ok);
        let paid = b.ledger.paid(&run, Seq(1));
        assert_eq!((paid.calls, paid.tools), (3, 2), "rerun from the top of the same dispatch");
    });
}

/// A dangling dispatch whose checkpoint holds its final state (saved after a terminal the resuming
/// tenure never saw, as a stalled tenure meets it) ends as it did and pays nothing: no turn past
/// the script's last. Before, `happy` paid a second turn and `limit` a fourth (the oracle's
/// `reference-model` found it in clean worlds).
#[test]
fn a_final_checkpoint_ends_its_dispatch_without_paying_a_turn_past_the_script() {
    use fencesim_engine::checkpoint::Checkpoint;
    for (workflow, last, status) in [
        (Workflow::happy(), Checkpoint { turns: 1, tool_calls_used: 0 }, "ok"),
        (Workflow::limit(), Checkpoint { turns: 3, tool_calls_used: 2 }, "limit"),
    ] {
        let db = world(DbKind::Memdb);
        let name = workflow.name.clone();
        sim(move || async move {
            let (a, b) = (node(&db, "a", EngineDefects::NONE), node(&db, "b", EngineDefects::NONE));
            let run = RunId::new("r");
            // Crash at the first paid call: the dispatch at seq 1 dangles.
            a.env.on_fault(|p| if matches!(p.site, Site::Call { .. }) { Fault::Crash } else { Fault::Continue });
            assert!(matches!(a.engine.run(&run, &workflow, RunOptions::default()).await, Err(EngineError::Crashed)));
            sleep_ms(u64::from(TTL) + 10).await;
            a.store.put_blob(&entries::checkpoint_ref(&run, Seq(1)), &last.encode(), None).unwrap();
            b.engine.resume(&run, &workflow, RunOptions::default()).await.expect("settles");
            let paid = b.ledger.paid(&run, Seq(1));
            assert_eq!((paid.calls, paid.tools), (0, 0), "{name}: a finished dispatch paid again");
            let journal = b.store.load(&run).unwrap();
            let terminal = journal.iter().find(|e| e.ref_seq == Some(Seq(1))).expect("a terminal");
            assert_eq!(terminal.status, status, "{name}");
        });
    }
}

#[test]
fn delete_and_prune_cascades_carry_the_lease() {
    each_backend(|backend, nodes| async move {
        let a = &nodes[0];
        let run = RunId::new("r");
        a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await.expect("settles");
        assert_eq!(a.store.list_blobs(&run).unwrap().len(), 2, "{backend:?}");
        let lease = a.store.leases().map(|l| l.acquire(&run, "retention").unwrap());
        assert_eq!(a.engine.prune_run(&run, lease.as_ref()).await.expect("prunes"), 2);
        assert_eq!(a.store.list_blobs(&run).unwrap(), Vec::<String>::new());
        assert_eq!(a.engine.prune_run(&run, lease.as_ref()).await.expect("prunes"), 0);
        a.engine.run(&RunId::new("kept"), &Workflow::happy(), RunOptions::default()).await.unwrap();
        a.engine.delete_run(&RunId::new("kept"), None).await.expect("unleased delete");
        assert_eq!(a.store.get_meta(&RunId::new("kept")).unwrap(), None);
        if let Some(lease) = lease {
            // A stale lease is refused at the first cascade write.
            let leases = a.store.leases().unwrap();
            leases.release(&lease).unwrap();
            let live = leases.acquire(&run, "live").unwrap();
            let refused = a.engine.delete_run(&run, Some(&lease)).await;
            assert!(matches!(refused, Err(EngineError::LeaseHeld(_))), "{refused:?}");
            assert!(!a.store.load(&run).unwrap().is_empty());
            a.engine.delete_run(&run, Some(&live)).await.expect("the live holder deletes");
            assert!(a.store.load(&run).unwrap().is_empty());
        }
    });
}

#[test]
fn ownership_none_writes_unleased() {
    let db = world(DbKind::Memdb);
    sim(|| async {
        let a = node_with(&db, EngineOptions { ownership: Ownership::None, ..EngineOptions::default() });
        let run = RunId::new("r");
        a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await.expect("settles");
        // Nobody held a lease: a first acquire gets epoch 1.
        assert_eq!(a.store.leases().unwrap().acquire(&run, "x").unwrap().epoch.0, 1);
    });
}

/// The real `Env`: the system clock and tokio's timer, over a real WAL file.
#[test]
fn the_real_env_runs_a_workflow_on_tokio_over_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(fencesim_store::SystemClock);
    let store: Rc<dyn Store> =
        Rc::new(SqliteStore::open(SqliteOptions::file(dir.path().join("real.db"), clock)).unwrap());
    let opts = EngineOptions { call_ms: 1, tool_ms: 1, ..EngineOptions::default() };
    let engine = Engine::new(store, RealEnv, Ledger::new(), opts).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let outcome = runtime.block_on(engine.run(&RunId::new("real"), &Workflow::limit(), RunOptions::default())).unwrap();
    assert_eq!(outcome.status, RunStatus::Ok);
}

#[test]
fn prune_keeps_a_checkpoint_named_exactly_elsewhere_and_only_then() {
    let store: Rc<dyn Store> = Rc::new(MemoryStore::new());
    let a = over(store.clone(), SimEnv::default(), EngineOptions::default());
    sim(|| async {
        let run = RunId::new("r");
        // Eleven single-turn dispatches: refs r/ckpt/1 ... r/ckpt/21; r/ckpt/1 is a prefix of others.
        let steps = (0..11).map(|i| Workflow::happy().steps[i % 2].clone()).enumerate().map(|(i, mut step)| {
            if let fencesim_engine::Step::Agent(agent) = &mut step {
                agent.key = format!("k{i}");
                agent.output = Some(format!("o{i}"));
            }
            step
        });
        let wf = Workflow::new("many", steps.collect()).unwrap();
        a.engine.run(&run, &wf, RunOptions::default()).await.expect("settles");
        // One later entry names r/ckpt/3 exactly (a donor ref), another only a longer ref's prefix.
        let tail = entries::next_seq(&run, &store.load(&run).unwrap()).unwrap();
        store
            .append(&run, &entries::resolution(tail, Seq(0), json!({"donor": "r/ckpt/3", "note": "r/ckpt/5x"})), None)
            .unwrap();
        assert_eq!(a.engine.prune_run(&run, None).await.expect("prunes"), 10);
        assert_eq!(store.list_blobs(&run).unwrap(), vec!["r/ckpt/3".to_owned()]);
    });
}

#[test]
fn resume_refuses_another_workflow_than_the_runs_binding() {
    each_backend(|backend, nodes| async move {
        let a = &nodes[0];
        let run = RunId::new("r");
        a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await.expect("settles");
        let before = (a.store.load(&run).unwrap(), a.store.get_meta(&run).unwrap());
        let refused = a.engine.resume(&run, &Workflow::limit(), RunOptions::default()).await;
        assert!(matches!(refused, Err(EngineError::Binding(_))), "{backend:?}: {refused:?}");
        assert_eq!((a.store.load(&run).unwrap(), a.store.get_meta(&run).unwrap()), before);
        assert_eq!(a.ledger.run_total(&run).calls, 2);
    });
}

#[test]
fn a_recreated_run_gets_a_new_genesis_even_in_the_same_millisecond() {
    each_backend(|backend, nodes| async move {
        let a = &nodes[0];
        let run = RunId::new("r");
        let wf = Workflow::new("wait", vec![Workflow::approval().steps[0].clone()]).unwrap();
        a.engine.run(&run, &wf, RunOptions::default()).await.expect("settles");
        let first = a.store.get_meta(&run).unwrap().unwrap().genesis;
        a.engine.delete_run(&run, None).await.expect("deletes");
        a.engine.run(&run, &wf, RunOptions::default()).await.expect("settles");
        let second = a.store.get_meta(&run).unwrap().unwrap().genesis;
        assert!(first.is_some() && first != second, "{backend:?}: {first:?} then {second:?}");
    });
}
