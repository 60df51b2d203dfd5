//! The queue worker (contracts 3.8, E8) on madsim virtual time over one SQLite world: a sweep
//! adopts a crashed run and finishes it; it never adopts a live fresh run (D9), never deletes a
//! run that came back to life under its stalled retention lease (D4), and tells a recreated run
//! from the deleted one (D18); poison is keyed by genesis; `stop` racing a sweep leases nothing
//! more (D16); a failed renew cancels the drive and frees the slot; options are validated. Each
//! planted defect runs the same scenario as its correct twin and must be caught.

use std::rc::{Rc, Weak};

use fencesim_engine::audit::{AuditVerdict, audit_run};
use fencesim_engine::entries;
use fencesim_engine::worker::skip;
use fencesim_engine::{
    Engine, EngineDefect, EngineDefects, EngineError, EngineOptions, Fault, Ledger, Outcome, Phase, Point, Retention,
    RunOptions, Site, SweepReport, Worker, WorkerOptions, Workflow, Write,
};
use fencesim_sim::env::SimEnv;
use fencesim_sim::probes::wait_workflow as wait;
use fencesim_sim::stores::{Db, DbKind};
use fencesim_store::{Epoch, MemoryStore, RunId, RunStatus, Seq, Store};
use serde_json::json;

use crate::common::{Delay, Node, delay_once, node_in, sim_seeded as sim, sleep_ms};

/// The lease ttl of every world here; renew cadence is a third of it.
const TTL: u32 = 3_000;

/// One process with its own connection and clock; the ledger is the world's.
fn node(db: &Db, ledger: &Ledger, owner: &str, call_ms: u32, defects: &[EngineDefect]) -> Node {
    let opts =
        EngineOptions { owner: owner.into(), call_ms, defects: EngineDefects::of(defects), ..EngineOptions::default() };
    node_in(db, TTL, ledger.clone(), opts)
}

fn first_blob_delete(p: &Point<'_>) -> bool {
    matches!(p.site, Site::Write { phase: Phase::Before, write: Write::DeleteBlob(_), .. })
}

fn world() -> Db {
    crate::common::world(DbKind::Memdb)
}

fn worker(node: &Node, workflows: Vec<Workflow>, opts: WorkerOptions) -> Rc<Worker<SimEnv>> {
    Rc::new(Worker::new(node.engine.clone(), &node.store, workflows, opts).expect("valid worker options"))
}

fn genesis(g: &str) -> RunOptions {
    RunOptions { genesis: Some(g.into()), ..RunOptions::default() }
}

/// Crash the node at the first paid call of any run: the run keeps a dangling running entry
/// and a lease nobody renews.
fn crash_at_first_call(env: &SimEnv) {
    env.on_fault(|p| match p.site {
        Site::Call { turn: 1, .. } => Fault::Crash,
        _ => Fault::Continue,
    });
}

/// A host that crashed each run at its first paid call, after the crashed leases lapsed: every
/// run has a dangling dispatch and no live lease.
async fn crashed_runs(db: &Db, ledger: &Ledger, runs: &[&RunId]) -> Node {
    let host = node(db, ledger, "host", 20, &[]);
    crash_at_first_call(&host.env);
    for run in runs {
        let crashed = host.engine.run(run, &Workflow::happy(), RunOptions::default()).await;
        assert_eq!(crashed, Err(EngineError::Crashed));
    }
    sleep_ms(u64::from(TTL) + 1).await;
    host
}

/// One sweep in the background.
fn spawn_sweep(worker: &Rc<Worker<SimEnv>>) -> madsim::task::JoinHandle<Result<SweepReport, EngineError>> {
    let worker = worker.clone();
    madsim::task::spawn_local(async move { worker.sweep().await })
}

/// Acquire and release as a bystander: the epoch granted (so the caller can see whether anyone
/// else acquired in between) and proof that no live lease is left.
fn probe(store: &Rc<dyn Store>, run: &RunId) -> Epoch {
    let leases = store.leases().expect("a leasable store");
    let lease = leases.acquire(run, "probe").expect("no live lease is left on the run");
    leases.release(&lease).expect("the probe releases");
    lease.epoch
}

fn status_of(result: &Result<Outcome, EngineError>) -> Option<RunStatus> {
    result.as_ref().ok().map(|o| o.status)
}

// 1. A crashed run is adopted and finished.

#[test]
fn a_sweep_drives_a_crashed_run_to_ok_paying_the_dangling_dispatch_once_more() {
    sim(1, || async {
        let db = world();
        let ledger = Ledger::new();
        let host = node(&db, &ledger, "host", 20, &[]);
        let run = RunId::new("r-crashed");
        // Die just before the first dispatch's terminal: its call is paid, its running dangles.
        host.env.on_fault(|p| match p.site {
            Site::Write { phase: Phase::Before, write: Write::Append(e), .. } if e.ref_seq.is_some() => Fault::Crash,
            _ => Fault::Continue,
        });
        let crashed = host.engine.run(&run, &Workflow::happy(), RunOptions::default()).await;
        assert_eq!(crashed, Err(EngineError::Crashed));
        assert_eq!(entries::dangling(&host.store.load(&run).unwrap()), vec![Seq(1)]);
        assert_eq!(ledger.paid(&run, Seq(1)).calls, 1);

        // Within the ttl the dead host's lease still fences the run.
        let w = node(&db, &ledger, "w", 20, &[]);
        let worker = worker(&w, vec![Workflow::happy()], WorkerOptions::default());
        let early = worker.sweep().await.unwrap();
        assert_eq!(early.skipped, vec![(run.clone(), skip::LEASE_HELD)]);
        assert!(early.driven.is_empty());

        sleep_ms(u64::from(TTL) + 1).await;
        let report = worker.sweep().await.unwrap();
        assert_eq!(report.driven.len(), 1, "{report:?}");
        let (driven, result) = &report.driven[0];
        assert_eq!(driven, &run);
        let outcome = result.as_ref().expect("the drive settles");
        assert_eq!(outcome.status, RunStatus::Ok);
        assert_eq!(outcome.value, json!({"one": "alpha", "two": "beta"}));

        // The dangling dispatch was paid at most once more; everything else exactly once.
        assert_eq!(ledger.paid(&run, Seq(1)).calls, 2);
        for ((r, seq), paid) in ledger.entries() {
            if seq != Seq(1) {
                assert_eq!(paid.calls, 1, "dispatch {r}/{seq} paid {paid:?}");
            }
        }
        let audit = audit_run(&*w.store, &run).unwrap();
        assert_eq!(audit.verdict, AuditVerdict::Consistent, "{audit}");
        assert_eq!(w.store.get_meta(&run).unwrap().unwrap().status, RunStatus::Ok);
        assert!(worker.active_runs().is_empty());
        probe(&w.store, &run);

        // A settled run is no candidate any more.
        let after = worker.sweep().await.unwrap();
        assert_eq!(after, SweepReport::default());
    });
}

// 2. D9: a sweep never adopts a live fresh run.

struct FreshRunFacts {
    report: SweepReport,
    host: Result<Outcome, EngineError>,
    /// The most any one dispatch was paid.
    max_calls_per_dispatch: u32,
}

async fn fresh_run_scenario(defects: &[EngineDefect]) -> FreshRunFacts {
    let db = world();
    let ledger = Ledger::new();
    let host = node(&db, &ledger, "host", 5_000, defects);
    let w = node(&db, &ledger, "w", 5_000, defects);
    let worker = worker(&w, vec![Workflow::happy()], WorkerOptions::default());
    let run = RunId::new("r-fresh");
    let driving = {
        let (engine, run) = (host.engine.clone(), run.clone());
        madsim::task::spawn_local(async move { engine.run(&run, &Workflow::happy(), RunOptions::default()).await })
    };
    // The host is inside the first paid call (0..5000 ms) when the worker sweeps.
    sleep_ms(1_000).await;
    assert_eq!(w.store.get_meta(&run).unwrap().map(|m| m.status), Some(RunStatus::Running));
    let report = worker.sweep().await.unwrap();
    let host = driving.await.expect("the host task finishes");
    let max_calls_per_dispatch = ledger.entries().iter().map(|(_, paid)| paid.calls).max().unwrap_or(0);
    FreshRunFacts { report, host, max_calls_per_dispatch }
}

#[test]
fn d9_a_sweep_skips_a_live_fresh_run() {
    sim(2, || async {
        let facts = fresh_run_scenario(&[]).await;
        assert_eq!(facts.report.skipped, vec![(RunId::new("r-fresh"), skip::LEASE_HELD)]);
        assert!(facts.report.driven.is_empty());
        assert_eq!(status_of(&facts.host), Some(RunStatus::Ok));
        assert_eq!(facts.max_calls_per_dispatch, 1, "every dispatch is paid exactly once");
    });
}

#[test]
fn d9_fresh_run_unleased_is_caught_as_a_double_payment() {
    sim(2, || async {
        let facts = fresh_run_scenario(&[EngineDefect::FreshRunUnleased]).await;
        assert_eq!(facts.report.driven.len(), 1, "the worker adopted the live run: {:?}", facts.report);
        assert!(facts.max_calls_per_dispatch >= 2, "the in-flight dispatch was paid twice");
    });
}

// 3. D4: retention's cascade is fenced by its brief lease.

struct RetentionFacts {
    report: SweepReport,
    /// The recreated run's journal length when the worker's sweep returned.
    journal_len: usize,
    meta_present: bool,
    recreated: Result<Outcome, EngineError>,
}

async fn retention_scenario(defects: &[EngineDefect]) -> RetentionFacts {
    let db = world();
    let ledger = Ledger::new();
    let host = node(&db, &ledger, "host", 2_000, &[]);
    let w = node(&db, &ledger, "w", 20, defects);
    let run = RunId::new("r-retained");
    let first = host.engine.run(&run, &Workflow::happy(), genesis("g1")).await;
    assert_eq!(status_of(&first), Some(RunStatus::Ok));
    assert_eq!(w.store.list_blobs(&run).unwrap(), vec!["r-retained/ckpt/1", "r-retained/ckpt/3"]);

    let opts = WorkerOptions { retention: Some(Retention { keep_ms: 0 }), ..WorkerOptions::default() };
    let worker = worker(&w, vec![Workflow::happy()], opts);
    // The worker stalls at its first blob delete, twice the ttl: its brief lease lapses.
    delay_once(&w.env, Delay::Call(2 * u64::from(TTL)), first_blob_delete);
    let sweeping = spawn_sweep(&worker);
    sleep_ms(u64::from(TTL) + 500).await;
    // Meanwhile an operator deletes the run under a lease of its own and recreates it.
    let admin = host.engine.acquire(&run, "admin").await.expect("the worker's brief lease has lapsed");
    host.engine.delete_run(&run, Some(&admin)).await.unwrap();
    let recreating = {
        let (engine, run) = (host.engine.clone(), run.clone());
        madsim::task::spawn_local(async move { engine.run(&run, &Workflow::happy(), genesis("g2")).await })
    };
    let report = sweeping.await.unwrap().unwrap();
    let journal_len = w.store.load(&run).unwrap().len();
    let meta_present = w.store.get_meta(&run).unwrap().is_some();
    let recreated = recreating.await.unwrap();
    RetentionFacts { report, journal_len, meta_present, recreated }
}

#[test]
fn d4_retention_cascade_is_refused_once_its_lease_lapsed() {
    sim(3, || async {
        let facts = retention_scenario(&[]).await;
        assert!(facts.report.retained.is_empty(), "{:?}", facts.report);
        assert_eq!(facts.report.retention_failed.len(), 1, "{:?}", facts.report);
        assert!(facts.report.retention_failed[0].1.is_lease_held());
        assert_eq!(facts.journal_len, 3, "the live run's journal survives (running, terminal, running)");
        assert!(facts.meta_present);
        assert_eq!(status_of(&facts.recreated), Some(RunStatus::Ok), "{:?}", facts.recreated);
    });
}

#[test]
fn d4_retention_without_lease_is_caught_deleting_a_live_run() {
    sim(3, || async {
        let facts = retention_scenario(&[EngineDefect::RetentionWithoutLease]).await;
        assert_eq!(facts.report.retained, vec![RunId::new("r-retained")]);
        assert_eq!(facts.journal_len, 0, "the live run's journal vanished");
        assert!(!facts.meta_present);
        assert_ne!(status_of(&facts.recreated), Some(RunStatus::Ok), "{:?}", facts.recreated);
    });
}

// 4. D18: the suspended-skip cache is keyed by (length, genesis). The set-up is the kill
// matrix's probe (`fencesim_sim::probes::generations`).

#[test]
fn d18_a_recreated_run_of_the_same_length_is_resumed() {
    sim(4, || async {
        let facts = fencesim_sim::probes::generations(EngineDefects::NONE).await.expect("set-up");
        assert_eq!(facts.first.driven.len(), 1);
        assert_eq!(status_of(&facts.first.driven[0].1), Some(RunStatus::Suspended));
        assert_eq!(facts.second.driven.len(), 1, "{:?}", facts.second);
        let outcome = facts.second.driven[0].1.as_ref().expect("the recreated run settles");
        assert_eq!(outcome.status, RunStatus::Ok);
        assert_eq!(outcome.value, json!({"approval": "approved", "act": "done"}));
        assert_eq!(facts.final_status, Some(RunStatus::Ok));
        assert_eq!(facts.third, SweepReport::default());
    });
}

#[test]
fn d18_skip_cache_by_length_is_caught_skipping_the_new_generation_forever() {
    sim(4, || async {
        let facts = fencesim_sim::probes::generations(EngineDefects::of(&[EngineDefect::SkipCacheByLength]))
            .await
            .expect("set-up");
        assert_eq!(status_of(&facts.first.driven[0].1), Some(RunStatus::Suspended));
        let skipped = vec![(RunId::new("r-gen"), skip::SUSPENDED_UNCHANGED)];
        assert_eq!(facts.second.skipped, skipped);
        assert_eq!(facts.third.skipped, skipped);
        assert!(facts.second.driven.is_empty() && facts.third.driven.is_empty());
        assert_eq!(facts.final_status, Some(RunStatus::Suspended));
    });
}

/// Remove the journal length a parked run's meta recorded (as a meta written before E8's record,
/// or rewritten by a repair, has none), under a lease of its own.
fn forget_suspended_at(store: &Rc<dyn Store>, run: &RunId) {
    let leases = store.leases().expect("a leasable store");
    let lease = leases.acquire(run, "editor").expect("no live lease is left on the run");
    let mut meta = store.get_meta(run).expect("reads").expect("a meta");
    assert!(meta.extra.remove(entries::SUSPENDED_AT).is_some(), "the parked meta recorded its length");
    store.put_meta(&meta, Some(&lease)).expect("the editor writes");
    leases.release(&lease).expect("the editor releases");
}

/// An approval run the host parked, and a worker `w` beside the host.
struct Parked {
    _db: Db,
    host: Node,
    w: Node,
    worker: Rc<Worker<SimEnv>>,
    run: RunId,
}

async fn parked() -> Parked {
    let db = world();
    let ledger = Ledger::new();
    let host = node(&db, &ledger, "host", 20, &[]);
    let w = node(&db, &ledger, "w", 20, &[]);
    let worker = worker(&w, vec![Workflow::approval()], WorkerOptions::default());
    let run = RunId::new("r-parked");
    host.engine.run(&run, &Workflow::approval(), RunOptions::default()).await.unwrap();
    Parked { _db: db, host, w, worker, run }
}

#[test]
fn a_parked_run_that_has_not_moved_is_left_alone_unleased_and_a_resolved_one_driven() {
    sim(4, || async {
        let Parked { host, w, worker, run, .. } = &parked().await;
        // The host parked it: the meta records how long the journal was (E8).
        let meta = w.store.get_meta(run).unwrap().unwrap();
        assert_eq!(entries::suspended_at(&meta), Some(w.store.load(run).unwrap().len()));
        let before = probe(&w.store, run);
        let first = worker.sweep().await.unwrap();
        assert_eq!(first.skipped, vec![(run.clone(), skip::SUSPENDED_UNCHANGED)]);
        assert!(first.driven.is_empty());
        // Decided on an unleased read of the journal: only the probe's own acquire moved the epoch.
        assert_eq!(probe(&w.store, run), Epoch(before.0 + 1));
        host.engine.resolve(run, Seq(1), json!("yes"), "resolver").await.unwrap();
        let second = worker.sweep().await.unwrap();
        assert_eq!(status_of(&second.driven[0].1), Some(RunStatus::Ok));
    });
}

#[test]
fn a_run_this_worker_parked_is_left_alone_even_when_its_meta_records_no_length() {
    sim(4, || async {
        let Parked { host, w, worker, run, .. } = &parked().await;
        forget_suspended_at(&w.store, run);
        // Nothing says the run has not moved: the worker leases it, and parks it again.
        let first = worker.sweep().await.unwrap();
        assert_eq!(status_of(&first.driven[0].1), Some(RunStatus::Suspended));
        // Its own memory of that settle is enough to leave it alone after that.
        forget_suspended_at(&w.store, run);
        let before = probe(&w.store, run);
        let second = worker.sweep().await.unwrap();
        assert_eq!(second.skipped, vec![(run.clone(), skip::SUSPENDED_UNCHANGED)]);
        assert_eq!(probe(&w.store, run), Epoch(before.0 + 1));
        // A length that does not match is no reason to skip: a resolved run is driven.
        host.engine.resolve(run, Seq(1), json!("yes"), "resolver").await.unwrap();
        let third = worker.sweep().await.unwrap();
        assert_eq!(status_of(&third.driven[0].1), Some(RunStatus::Ok));
    });
}

// 5. Poison is keyed by genesis.

#[test]
fn an_unknown_workflow_poisons_the_run_for_its_genesis_only() {
    sim(5, || async {
        let db = world();
        let ledger = Ledger::new();
        let host = node(&db, &ledger, "host", 20, &[]);
        let w = node(&db, &ledger, "w", 20, &[]);
        let worker = worker(&w, vec![Workflow::happy()], WorkerOptions::default());
        let run = RunId::new("r-mystery");
        let mystery = Workflow { name: "mystery".into(), ..wait() };
        host.engine.run(&run, &mystery, genesis("g1")).await.unwrap();
        // Resolved, so the run has moved since it parked and the worker must lease it.
        host.engine.resolve(&run, Seq(1), json!("yes"), "resolver").await.unwrap();

        let e0 = probe(&w.store, &run);
        let first = worker.sweep().await.unwrap();
        assert_eq!(first.poisoned, vec![run.clone()]);
        assert!(first.driven.is_empty());
        assert!(worker.is_poisoned(&run, Some("g1")));
        let e1 = probe(&w.store, &run);
        assert_eq!(e1, Epoch(e0.0 + 2), "the worker acquired once, then released");

        let second = worker.sweep().await.unwrap();
        assert_eq!(second.skipped, vec![(run.clone(), skip::POISONED)]);
        assert!(second.poisoned.is_empty());
        assert_eq!(probe(&w.store, &run), Epoch(e1.0 + 1), "a poisoned run is skipped without acquiring");

        // A new generation of the same id is tried again.
        host.engine.delete_run(&run, None).await.unwrap();
        host.engine.run(&run, &mystery, genesis("g2")).await.unwrap();
        host.engine.resolve(&run, Seq(1), json!("yes"), "resolver").await.unwrap();
        let e3 = probe(&w.store, &run);
        let third = worker.sweep().await.unwrap();
        assert_eq!(third.poisoned, vec![run.clone()]);
        assert_eq!(probe(&w.store, &run), Epoch(e3.0 + 2), "the new generation was acquired");
        assert!(worker.is_poisoned(&run, Some("g2")));
        assert_eq!(w.store.get_meta(&run).unwrap().unwrap().status, RunStatus::Suspended, "untouched");
    });
}

// 6. D16: stop() racing a sweep.

#[test]
fn stop_during_a_sweep_leases_nothing_more_and_leaves_no_lease_held() {
    sim(6, || async {
        let db = world();
        let ledger = Ledger::new();
        let (a, b) = (RunId::new("a-run"), RunId::new("b-run"));
        let _host = crashed_runs(&db, &ledger, &[&a, &b]).await;

        let w = node(&db, &ledger, "w", 20, &[]);
        let worker = worker(&w, vec![Workflow::happy()], WorkerOptions::default());
        // stop() arrives while the sweep holds its first run, before the second is considered.
        let handle: Weak<Worker<SimEnv>> = Rc::downgrade(&worker);
        w.env.on_fault(move |p| {
            if let Site::Owned = p.site
                && let Some(worker) = handle.upgrade()
            {
                worker.stop();
            }
            Fault::Continue
        });
        let sweeping = spawn_sweep(&worker);
        while !worker.is_stopping() {
            sleep_ms(1).await;
        }
        worker.stopped().await;
        assert!(!worker.is_sweeping() && worker.active_runs().is_empty());
        assert!(sweeping.is_finished(), "stopped() waits for the sweep");
        let report = sweeping.await.unwrap().unwrap();

        assert_eq!(report.driven.len(), 1, "{report:?}");
        assert_eq!(report.driven[0].0, a);
        assert_eq!(status_of(&report.driven[0].1), Some(RunStatus::Cancelled), "stop cancels the active run");
        assert_eq!(report.skipped, vec![(b.clone(), skip::STOPPING)]);
        // Nothing is held by the worker; b was never leased after stop (the host's epoch 1 only).
        probe(&w.store, &a);
        assert_eq!(probe(&w.store, &b), Epoch(2));
        assert_eq!(worker.sweep().await.unwrap(), SweepReport::default(), "a stopped worker sweeps nothing");
    });
}

#[test]
fn run_until_stopped_polls_and_ends_promptly_on_stop() {
    sim(6, || async {
        let db = world();
        let ledger = Ledger::new();
        let host = node(&db, &ledger, "host", 20, &[]);
        let w = node(&db, &ledger, "w", 20, &[]);
        let opts = WorkerOptions { poll_ms: 1_000, ..WorkerOptions::default() };
        let worker = worker(&w, vec![Workflow::happy()], opts);
        let looping = {
            let worker = worker.clone();
            madsim::task::spawn_local(async move { worker.run_until_stopped().await })
        };
        // A run crashes while the worker idles; a later poll, after the ttl, finishes it.
        sleep_ms(500).await;
        crash_at_first_call(&host.env);
        let run = RunId::new("r-polled");
        let crashed = host.engine.run(&run, &Workflow::happy(), RunOptions::default()).await;
        assert_eq!(crashed, Err(EngineError::Crashed));
        sleep_ms(u64::from(TTL) + 2_000).await;
        assert_eq!(w.store.get_meta(&run).unwrap().unwrap().status, RunStatus::Ok);

        worker.stop();
        sleep_ms(1).await;
        assert!(looping.is_finished(), "stop wakes the poll sleep");
        worker.stopped().await;
    });
}

// 7. Lease loss cancels the drive.

#[test]
fn a_failed_renew_cancels_the_drive_and_frees_the_slot() {
    sim(7, || async {
        let db = world();
        let ledger = Ledger::new();
        let run = RunId::new("r-lost");
        let host = crashed_runs(&db, &ledger, &[&run]).await;

        let w = node(&db, &ledger, "w", 10_000, &[]);
        let worker = worker(&w, vec![Workflow::happy()], WorkerOptions::default());
        let sweeping = spawn_sweep(&worker);
        sleep_ms(1_500).await;
        assert_eq!(worker.active_runs(), vec![run.clone()], "mid-call, one renew done");
        let overlapped = worker.sweep().await.unwrap();
        assert!(overlapped.overlapped && overlapped.driven.is_empty() && overlapped.skipped.is_empty());
        // The worker's clock jumps past the ttl: its next renew fails.
        w.clock.set_skew_ms(i64::from(10 * TTL));
        let report = sweeping.await.unwrap().unwrap();

        assert_eq!(report.lease_lost, vec![run.clone()]);
        assert_eq!(report.driven.len(), 1);
        match &report.driven[0].1 {
            Err(EngineError::Superseded { status, .. }) => assert_eq!(*status, RunStatus::Cancelled),
            Ok(outcome) => assert_eq!(outcome.status, RunStatus::Cancelled),
            other => panic!("expected a cancelled or superseded drive, got {other:?}"),
        }
        assert!(worker.active_runs().is_empty(), "the slot is free");
        assert!(!worker.is_sweeping());
        // The run is not settled; anyone may take it over.
        assert_eq!(host.store.get_meta(&run).unwrap().unwrap().status, RunStatus::Running);
        probe(&host.store, &run);
    });
}

#[test]
fn a_busy_renew_is_lease_loss_and_the_cancel_ends_a_healthy_drive() {
    sim(7, || async {
        // A file world, so a second raw connection can hold the write lock across a renew.
        let db = Db::new(DbKind::File).expect("a file world");
        let ledger = Ledger::new();
        let run = RunId::new("r-busy");
        let host = crashed_runs(&db, &ledger, &[&run]).await;

        let w = node(&db, &ledger, "w", 2_500, &[]);
        let worker = worker(&w, vec![Workflow::happy()], WorkerOptions::default());
        let sweeping = spawn_sweep(&worker);
        // Renews land at +1000 (fine) and +2000 (busy); the redispatched call ends at +2500,
        // while the lease renewed at +1000 is still valid, so only the cancel can stop the run.
        sleep_ms(1_500).await;
        let locker = rusqlite::Connection::open(db.path().unwrap()).unwrap();
        locker.execute_batch("BEGIN IMMEDIATE").unwrap();
        sleep_ms(1_000).await;
        locker.execute_batch("COMMIT").unwrap();
        let report = sweeping.await.unwrap().unwrap();

        assert_eq!(report.lease_lost, vec![run.clone()]);
        assert_eq!(status_of(&report.driven[0].1), Some(RunStatus::Cancelled), "{:?}", report.driven);
        assert_eq!(ledger.run_total(&run).calls, 1, "the second step was never paid");
        assert_eq!(host.store.get_meta(&run).unwrap().unwrap().status, RunStatus::Cancelled);
        probe(&host.store, &run);
    });
}

#[test]
fn a_worker_crash_writes_and_releases_nothing_more() {
    sim(7, || async {
        let db = world();
        let ledger = Ledger::new();
        let host = node(&db, &ledger, "host", 20, &[]);
        crash_at_first_call(&host.env);
        let (a, b) = (RunId::new("a-run"), RunId::new("b-run"));
        for run in [&a, &b] {
            host.engine.run(run, &Workflow::happy(), RunOptions::default()).await.unwrap_err();
        }
        sleep_ms(u64::from(TTL) + 1).await;

        // The worker dies just before its settle append of the first run.
        let w = node(&db, &ledger, "w", 20, &[]);
        w.env.on_fault(|p| match p.site {
            Site::Write { phase: Phase::Before, write: Write::Append(e), .. } if entries::as_settle(e).is_some() => {
                Fault::Crash
            }
            _ => Fault::Continue,
        });
        let worker = worker(&w, vec![Workflow::happy()], WorkerOptions::default());
        let report = worker.sweep().await.unwrap();
        assert_eq!(report.driven, vec![(a.clone(), Err(EngineError::Crashed))]);
        assert!(report.skipped.is_empty(), "the process died before considering b: {report:?}");
        assert!(worker.crashed() && worker.is_stopping());
        assert!(worker.active_runs().is_empty());
        // The dead worker's lease on a was not released; b was never touched.
        let leases = host.store.leases().unwrap();
        assert!(leases.acquire(&a, "probe").unwrap_err().is_lease_held());
        assert_eq!(probe(&host.store, &b), Epoch(2));

        // After the ttl a fresh worker finishes both.
        sleep_ms(u64::from(TTL) + 1).await;
        let v = node(&db, &ledger, "v", 20, &[]);
        let successor = Worker::new(v.engine.clone(), &v.store, vec![Workflow::happy()], WorkerOptions::default());
        let report = successor.unwrap().sweep().await.unwrap();
        assert!(report.driven.iter().all(|(_, r)| status_of(r) == Some(RunStatus::Ok)), "{report:?}");
        assert_eq!(report.driven.len(), 2);
    });
}

// Slots and retention.

#[test]
fn slots_drive_runs_at_once_and_retention_is_not_slot_bound() {
    sim(8, || async {
        let db = world();
        let ledger = Ledger::new();
        let host = node(&db, &ledger, "host", 20, &[]);
        let done = RunId::new("a-done");
        host.engine.run(&done, &Workflow::happy(), RunOptions::default()).await.unwrap();
        crash_at_first_call(&host.env);
        let (b, c) = (RunId::new("b-run"), RunId::new("c-run"));
        for run in [&b, &c] {
            host.engine.run(run, &Workflow::happy(), RunOptions::default()).await.unwrap_err();
        }
        sleep_ms(u64::from(TTL) + 1).await;

        let w = node(&db, &ledger, "w", 1_000, &[]);
        let opts =
            WorkerOptions { concurrency: 2, retention: Some(Retention { keep_ms: 0 }), ..WorkerOptions::default() };
        let worker = worker(&w, vec![Workflow::happy()], opts);
        let start = fencesim_sim::env::virtual_ms();
        let sweeping = spawn_sweep(&worker);
        sleep_ms(500).await;
        // Both slots are busy, and retention already deleted the terminal run.
        assert_eq!(worker.active_runs(), vec![b.clone(), c.clone()]);
        assert!(w.store.get_meta(&done).unwrap().is_none());
        let report = sweeping.await.unwrap().unwrap();
        let elapsed = fencesim_sim::env::virtual_ms() - start;
        assert_eq!(report.retained, vec![done.clone()]);
        assert_eq!(report.driven.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(), vec![b.clone(), c.clone()]);
        assert!(report.driven.iter().all(|(_, r)| status_of(r) == Some(RunStatus::Ok)));
        // Two calls per run, one second each: about two seconds together, four one after another.
        assert!(elapsed < 3_000, "took {elapsed} ms");
        assert!(w.store.load(&done).unwrap().is_empty() && w.store.list_blobs(&done).unwrap().is_empty());
    });
}

#[test]
fn candidacy_is_rechecked_under_the_lease() {
    sim(8, || async {
        let db = world();
        let ledger = Ledger::new();
        let host = node(&db, &ledger, "host", 20, &[]);
        let (c, d) = (RunId::new("c-done"), RunId::new("d-done"));
        for run in [&c, &d] {
            host.engine.run(run, &Workflow::happy(), RunOptions::default()).await.unwrap();
        }
        crash_at_first_call(&host.env);
        let (a, b) = (RunId::new("a-run"), RunId::new("b-run"));
        for run in [&a, &b] {
            host.engine.run(run, &Workflow::happy(), RunOptions::default()).await.unwrap_err();
        }
        host.env.set_script(None);
        sleep_ms(u64::from(TTL) + 1).await;

        let w = node(&db, &ledger, "w", 2_000, &[]);
        // Retention pauses (well within the ttl) at its first blob delete, of c-done.
        delay_once(&w.env, Delay::Call(1_000), first_blob_delete);
        let opts = WorkerOptions { retention: Some(Retention { keep_ms: 0 }), ..WorkerOptions::default() };
        let worker = worker(&w, vec![Workflow::happy(), wait()], opts);
        let sweeping = spawn_sweep(&worker);
        // While the one slot drives a-run: b-run is finished by the host, and d-done is deleted
        // and recreated as a parked run. Both rows the sweep listed are stale now.
        sleep_ms(500).await;
        assert_eq!(worker.active_runs(), vec![a.clone()]);
        let resumed = host.engine.resume(&b, &Workflow::happy(), RunOptions::default()).await;
        assert_eq!(status_of(&resumed), Some(RunStatus::Ok));
        let segments = host.store.get_meta(&b).unwrap().unwrap().segments;
        let admin = host.engine.acquire(&d, "admin").await.unwrap();
        host.engine.delete_run(&d, Some(&admin)).await.unwrap();
        let parked = host.engine.run(&d, &wait(), RunOptions::default()).await;
        assert_eq!(status_of(&parked), Some(RunStatus::Suspended));

        let report = sweeping.await.unwrap().unwrap();
        assert_eq!(report.retained, vec![c.clone()]);
        assert_eq!(report.driven.len(), 1, "{report:?}");
        assert_eq!(report.driven[0].0, a);
        assert_eq!(report.skipped, vec![(d.clone(), skip::KEPT), (b.clone(), skip::SETTLED)]);
        assert_eq!(host.store.get_meta(&d).unwrap().unwrap().status, RunStatus::Suspended);
        assert_eq!(host.store.get_meta(&b).unwrap().unwrap().segments, segments, "no segment of b was started");
    });
}

// 8. Options.

#[test]
fn invalid_options_are_config_errors() {
    sim(9, || async {
        let db = world();
        let ledger = Ledger::new();
        let w = node(&db, &ledger, "w", 20, &[]);
        let build = |opts: WorkerOptions| Worker::new(w.engine.clone(), &w.store, vec![Workflow::happy()], opts);
        let is_config = |r: Result<Worker<SimEnv>, EngineError>| matches!(r, Err(EngineError::Config(_)));

        assert!(is_config(build(WorkerOptions { concurrency: 0, ..WorkerOptions::default() })));
        assert!(is_config(build(WorkerOptions { ttl_ms: Some(TTL + 1), ..WorkerOptions::default() })));
        assert!(is_config(build(WorkerOptions { poll_ms: 0, ..WorkerOptions::default() })));
        assert!(is_config(build(WorkerOptions { poll_ms: u32::MAX, ..WorkerOptions::default() })));
        assert!(is_config(build(WorkerOptions { owner: String::new(), ..WorkerOptions::default() })));
        let negative = WorkerOptions { retention: Some(Retention { keep_ms: -1 }), ..WorkerOptions::default() };
        assert!(is_config(build(negative)));
        let twice = Worker::new(
            w.engine.clone(),
            &w.store,
            vec![Workflow::happy(), Workflow::happy()],
            WorkerOptions::default(),
        );
        assert!(is_config(twice));

        // The store must have leases...
        let memory: Rc<dyn Store> = Rc::new(MemoryStore::new());
        let opts = EngineOptions::default();
        let engine = Rc::new(Engine::new(memory.clone(), w.env.clone(), ledger.clone(), opts).unwrap());
        assert!(is_config(Worker::new(engine, &memory, vec![], WorkerOptions::default())));
        // ...and be the engine's own store object, not another connection to the same world.
        let other = node(&db, &ledger, "other", 20, &[]);
        assert!(is_config(Worker::new(w.engine.clone(), &other.store, vec![], WorkerOptions::default())));

        let ok = build(WorkerOptions { ttl_ms: Some(TTL), concurrency: 3, ..WorkerOptions::default() }).unwrap();
        assert_eq!(ok.ttl_ms(), TTL);
        assert_eq!(ok.renew_every_ms(), TTL / 3);
    });
}
