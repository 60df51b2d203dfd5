//! The nodes of a world and the faults they suffer. Every node opens its own recorded connection
//! with its own clock, and an engine whose fault points answer from the node's own random stream:
//! a stall past the ttl, a crash (the node is killed and restarted later), busy errors on store
//! calls, and at the store's fence-check hook a takeover attempt from another connection. The
//! supervisor's zombie probes every write surface with a superseded lease.
//!
//! The fault script at engine fault points crashes, stalls past the ttl, and records a history row
//! for every paid effect that goes ahead. The client's state machine starts runs, resubmits a
//! start that never reached the store, resolves, deletes and recreates, cancels, and reattaches
//! after a restart; the operator runs `audit --repair`. The zombie probes with dead leases, forges
//! one at the live epoch (learnt from a refused acquire), tries the run-match rule on blobs, and
//! calls and takes over at its own lease's exact expiry millisecond. The `admin` connection
//! purges a victim run unleased, which the oracle accepts from that node alone (S6).

mod branches;
mod granted;

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use fencesim_engine::audit::{Repair, audit_runs_planted, lease_and_reconcile};
use fencesim_engine::entries;
use fencesim_engine::race::LocalFuture;
use fencesim_engine::{
    CancelToken, Engine, EngineError, EngineOptions, EngineResult, Env, Fault, Ledger, Outcome, Point, Retention,
    RunOptions, Site, Worker, WorkerOptions, Workflow, Write,
};
use fencesim_store::{
    FaultAction, FaultPoint, FaultSite, JournalStore, LeasableStore, Lease, LeaseRejection, RunFilter, RunId,
    RunStatus, Store, StoreError, TranscriptStore,
};
use serde_json::json;

use super::cuts::StoreCut;
use super::{HarnessError, Shared, sleep_ms, zombie_entry, zombie_meta};
use crate::env::{SimClock, SimEnv, elapsed_ms};
use crate::history::{
    BusyInjector, Disruption, Effect, EffectKind, Event, FailInjector, History, Recorder, Request, SegmentError,
    SegmentResult, lock,
};
use crate::node::Node;
use crate::rng::Stream;
use crate::scenario::FaultKind;
use crate::scenario::pace::CLIENT_TICK_MS;
use crate::scenario::plan::{Applied, Plan, RunPlan};
use crate::site::SiteClass;

/// A node's main task: what runs after every (re)start. A killed node's never returns.
pub(super) async fn main(shared: Arc<Shared>, node: Node) {
    let name = node.to_string();
    lock(&shared.alive).insert(name.clone());
    let result = match node {
        Node::Client => client(&shared, node).await,
        Node::Operator => operator(&shared, node).await,
        Node::Worker(_) | Node::Sweeper => worker(&shared, node).await,
        Node::Zombie | Node::Usurper | Node::Admin | Node::World => Err(HarnessError::NotStarted(node)),
    };
    if let Err(error) = result {
        shared.harness_error(error);
    }
    lock(&shared.alive).remove(&name);
}

/// One incarnation of a node: its connection, clock, env and engine.
struct Ctx {
    label: String,
    env: SimEnv,
    store: Rc<dyn Store>,
    engine: Rc<Engine<SimEnv>>,
    history: History,
    /// The client's co-located worker, with `colocated` (scenario `branches`).
    colocated: std::cell::RefCell<Option<Rc<Worker<SimEnv>>>>,
}

/// The fault script holds a clone of the env it is installed in (it stalls the node through it):
/// a cycle that would keep the world's shared state, and its connections, alive after the world.
impl Drop for Ctx {
    fn drop(&mut self) {
        self.env.clear_script();
    }
}

impl Ctx {
    fn open(shared: &Arc<Shared>, node: Node) -> Result<Ctx, HarnessError> {
        let name = &node.to_string();
        let label = shared.incarnate(name);
        let clock = shared.clock(name);
        let mut recorder = shared.connect(name, &label, &clock)?;
        if let Some(busy) = shared.plan.fault(FaultKind::Busy).filter(|f| f.hits(node)) {
            let rng = shared.root.fork(&format!("busy/{label}"));
            let hold = (busy.spec.hold_ms.0, busy.spec.hold_ms.1);
            recorder = recorder.with_busy(BusyInjector::new(rng, busy.rate, hold, shared.quiet.clone()));
        }
        if let Some(error) = shared.plan.fault(FaultKind::Error).filter(|f| f.hits(node)) {
            let rng = shared.root.fork(&format!("error/{label}"));
            recorder = recorder.with_failures(FailInjector::new(rng, error.rate, shared.quiet.clone()));
        }
        let env = SimEnv::new(clock.clone());
        if let Some(cut) = shared
            .plan
            .fault(FaultKind::Crash)
            .filter(|f| f.hits(node))
            .and_then(|crash| StoreCut::aimed(shared, name, &label, crash))
        {
            recorder = recorder.with_cut(cut, env.dead_flag());
        }
        if let Some(takeover) = shared.plan.fault(FaultKind::Takeover).filter(|f| f.hits(node)) {
            install_takeover(shared, &recorder, &label, &clock, takeover);
        }
        let store: Rc<dyn Store> = Rc::new(recorder);
        env.count_probes(shared.probes.clone());
        env.set_script(Some(fault_script(shared.clone(), node, label.clone(), env.clone())));
        let (history, paid_by) = (shared.history.clone(), label.clone());
        env.set_paid_hook(Some(Box::new(move |point| {
            if let Some(effect) = effect_of(point) {
                history.push(&paid_by, Event::Effect(effect));
            }
        })));
        let world = &shared.cfg.scenario.world;
        let opts = EngineOptions {
            owner: label.clone(),
            call_ms: world.call_ms,
            tool_ms: world.tool_ms,
            defects: shared.cfg.engine_defects,
            ..EngineOptions::default()
        };
        let engine = Rc::new(
            Engine::new(store.clone(), env.clone(), Ledger::new(), opts).map_err(|error| HarnessError::Engine {
                label: label.clone(),
                part: "engine",
                error,
            })?,
        );
        shared.history.push(&label, Event::Note(format!("{label} starts (clock skew {:+}ms)", env.clock().skew_ms())));
        Ok(Ctx { label, env, store, engine, history: shared.history.clone(), colocated: Default::default() })
    }

    fn outcome(&self, run: &RunId, result: &EngineResult<Outcome>) {
        self.history.push(&self.label, Event::Outcome { run: run.clone(), result: segment_result(result) });
    }
}

/// What the oracle is told a segment returned.
fn segment_result(result: &EngineResult<Outcome>) -> SegmentResult {
    match result {
        Ok(outcome) => SegmentResult::Reported(outcome.status),
        Err(e) => SegmentResult::Failed(match e {
            EngineError::LeaseHeld(_) => SegmentError::LeaseHeld,
            EngineError::Superseded { .. } => SegmentError::Superseded,
            EngineError::Settlement { .. } => SegmentError::Settlement,
            EngineError::SegmentLive(_) => SegmentError::SegmentLive,
            EngineError::Config(_) => SegmentError::Config,
            EngineError::Binding(_) => SegmentError::Binding,
            EngineError::Store(_) => SegmentError::Store,
            EngineError::Crashed => SegmentError::Crashed,
        }),
    }
}

fn workflows() -> Vec<Workflow> {
    Workflow::BUILTIN.iter().filter_map(|name| Workflow::builtin(name)).collect()
}

/// How often a worker looks for a graceful-stop request of the supervisor's.
const STOP_CHECK_MS: u64 = 200;

/// A queue worker (or, named `sweeper`, the retention sweeper): sweep, report, sleep, until a
/// graceful stop is requested.
async fn worker(shared: &Arc<Shared>, node: Node) -> Result<(), HarnessError> {
    let ctx = Ctx::open(shared, node)?;
    let plan = &shared.plan;
    let sweeper = node == Node::Sweeper;
    let opts = WorkerOptions {
        owner: ctx.label.clone(),
        concurrency: if sweeper { 1 } else { plan.concurrency },
        ttl_ms: Some(plan.ttl_ms),
        // Retention has no hurry: the sweeper looks a third as often as a worker.
        poll_ms: if sweeper { plan.poll_ms.saturating_mul(3) } else { plan.poll_ms },
        retention: sweeper.then(|| Retention { keep_ms: i64::from(shared.cfg.scenario.world.retention_ms) }),
    };
    let worker = Rc::new(
        Worker::new(ctx.engine.clone(), &ctx.store, branches::workflows_of(shared, node), opts)
            .map_err(|error| HarnessError::Engine { label: ctx.label.clone(), part: "worker", error })?,
    );
    let watcher = {
        let (worker, shared, name) = (worker.clone(), shared.clone(), node.to_string());
        let (history, label) = (ctx.history.clone(), ctx.label.clone());
        madsim::task::spawn_local(async move {
            while !shared.stop_requested(&name) {
                sleep_ms(STOP_CHECK_MS).await;
            }
            history.push(&label, Event::Request(Request::Stop));
            worker.stop();
        })
    };
    worker
        .run_reporting(|report| {
            for (run, result) in &report.driven {
                ctx.outcome(run, result);
            }
        })
        .await;
    worker.stopped().await;
    watcher.abort();
    ctx.history.push(&ctx.label, Event::Note(format!("{} stopped", ctx.label)));
    Ok(())
}

/// The operator: every `operator_ms`, `runs audit --repair`, each repair under a brief lease.
async fn operator(shared: &Arc<Shared>, node: Node) -> Result<(), HarnessError> {
    let ctx = Ctx::open(shared, node)?;
    let mut chores = branches::Chores::default();
    loop {
        ctx.env.sleep(u64::from(shared.cfg.scenario.world.operator_ms)).await;
        chores.run(shared, &ctx).await;
        // The operator's tool is code under test: it carries the world's planted engine defects
        // (its engine's, which the repair below reads too).
        let Ok(audits) = audit_runs_planted(ctx.store.as_ref(), false, shared.cfg.engine_defects) else { continue };
        branches::think(shared, &ctx).await;
        for audit in audits.into_iter().filter(|a| a.repair_to.is_some()) {
            let Repair::Leased { lease, result: repaired } =
                lease_and_reconcile(&ctx.engine, &audit.run, &ctx.label, true).await
            else {
                continue;
            };
            let event = match *repaired {
                Ok(r) => match r.repaired {
                    Some(status) => Event::Repair { run: audit.run.clone(), status },
                    None => Event::Note(format!("audit {audit} -> nothing to repair")),
                },
                Err(e) => Event::Note(format!("audit {audit} -> repair failed: {}", e.code())),
            };
            ctx.history.push(&ctx.label, event);
            ctx.engine.release_quietly(&lease);
        }
    }
}

/// The client's progress through its plan; lives outside the node so a restarted client goes on
/// where the crashed one stopped.
#[derive(Debug)]
pub(crate) struct ClientState {
    runs: Vec<ClientRun>,
}

#[derive(Clone, Copy, Debug, Default)]
struct ClientRun {
    started: bool,
    /// The client saw this generation's meta: its start reached the store.
    seen: bool,
    /// A start of this run is being driven by the current client incarnation.
    driving: bool,
    /// Resolved, or nothing (more) to resolve.
    resolved: bool,
    /// Recreated, or not to be.
    recreated: bool,
    /// The planned cancel was sent to the run while it waited on a suspension.
    cancelled_waiting: bool,
}

/// Whether the client must resolve a generation of this run: an approval run it means to resolve.
fn awaits_resolution(run: &RunPlan) -> bool {
    run.resolve && run.workflow == "approval"
}

impl ClientState {
    pub(crate) fn new(plan: &Plan) -> Self {
        let runs = plan
            .runs
            .iter()
            .map(|r| ClientRun { resolved: !awaits_resolution(r), recreated: !r.recreate, ..ClientRun::default() })
            .collect();
        Self { runs }
    }

    /// Every run started and seen in the store (or seen, then deleted by retention), none still
    /// being driven by the client, every resolve and recreate done or moot.
    pub(crate) fn done(&self) -> bool {
        self.runs.iter().all(|r| r.started && r.seen && !r.driving && r.resolved && r.recreated)
    }
}

/// The client: starts each run at its time (driving its first segment itself), submits again a
/// start that never reached the store, resolves suspensions, deletes and recreates settled runs,
/// cancels as planned, and after a restart reattaches to the runs it was driving. A tick whose
/// listing fails (busy) does nothing: absence is only believed from a listing that succeeded.
async fn client(shared: &Arc<Shared>, node: Node) -> Result<(), HarnessError> {
    let ctx = Rc::new(Ctx::open(shared, node)?);
    *ctx.colocated.borrow_mut() = branches::colocate(shared, &ctx)?;
    // Starts the crashed incarnation was driving died with it.
    for run in &mut lock(&shared.client).runs {
        run.driving = false;
    }
    let mut reattached = false;
    // `tend` finds a planned run's state by its position in the plan.
    assert_eq!(lock(&shared.client).runs.len(), shared.plan.runs.len(), "a client state per planned run");
    loop {
        branches::between_sweeps(&ctx).await;
        let Ok(metas) = ctx.store.list_runs(&RunFilter::all()) else {
            ctx.env.sleep(CLIENT_TICK_MS).await;
            continue;
        };
        if !reattached {
            // A restarted client reattaches to the runs it started that are still running,
            // racing the workers for them (on the first start nothing is started yet).
            reattached = true;
            for (i, run) in shared.plan.runs.iter().enumerate() {
                let running = metas.iter().any(|m| m.run_id == run.id && m.status == RunStatus::Running);
                if running && lock(&shared.client).runs[i].started {
                    reattach(&ctx, run);
                }
            }
        }
        let now = elapsed_ms();
        for (i, run) in shared.plan.runs.iter().enumerate() {
            let status = metas.iter().find(|m| m.run_id == run.id).map(|m| m.status);
            tend(shared, &ctx, i, run, status, now).await;
        }
        ctx.env.sleep(CLIENT_TICK_MS).await;
    }
}

/// One tick of the client for one run, given its listed status.
async fn tend(shared: &Arc<Shared>, ctx: &Rc<Ctx>, i: usize, run: &RunPlan, status: Option<RunStatus>, now: i64) {
    let state = lock(&shared.client).runs[i];
    if !state.started {
        if now >= i64::from(run.start_ms) {
            lock(&shared.client).runs[i].started = true;
            drive(shared, ctx, i);
        }
        return;
    }
    match status {
        // The start never reached the store (refused, superseded, or its driver crashed):
        // submit it again.
        None if !state.seen && !state.driving => return drive(shared, ctx, i),
        None if state.seen => {
            // Retention deleted it: nothing left to resolve or recreate.
            let mut client = lock(&shared.client);
            client.runs[i].resolved = true;
            client.runs[i].recreated = true;
            return;
        }
        None => return,
        Some(_) => lock(&shared.client).runs[i].seen = true,
    }
    // A cancel that comes due while a run the client will not approve waits on its approval
    // cancels the waiting run: a segment resumed with the cancel already requested settles it
    // `cancelled`, its suspension left open (what the audit's R-table and offline resolution must
    // then respect).
    if let Some(cancel_ms) = run.cancel_ms
        && !awaits_resolution(run)
        && !state.cancelled_waiting
        && !state.driving
        && status == Some(RunStatus::Suspended)
        && now >= i64::from(run.start_ms) + i64::from(cancel_ms)
    {
        lock(&shared.client).runs[i].cancelled_waiting = true;
        cancel_waiting(shared, ctx, i);
        return;
    }
    if !state.resolved {
        resolve(shared, ctx, i, run, status).await;
    }
    if !state.recreated && !state.driving {
        recreate(shared, ctx, i, run, status).await;
    }
}

/// The client's resolution of one run: its open suspension approved, or a settled run marked
/// resolved.
async fn resolve(shared: &Arc<Shared>, ctx: &Rc<Ctx>, i: usize, run: &RunPlan, status: Option<RunStatus>) {
    match status {
        Some(RunStatus::Suspended) => {
            if let Ok(journal) = ctx.store.load(&run.id)
                && let Some(target) = entries::open_suspensions(&journal).first()
            {
                let resolved = ctx.engine.resolve(&run.id, *target, json!("approved"), &ctx.label).await;
                lock(&shared.client).runs[i].resolved = resolved.is_ok();
            }
        }
        Some(s) if s.is_terminal() => lock(&shared.client).runs[i].resolved = true,
        _ => {}
    }
}

/// The client's recreation of one settled run: deleted under a lease, then driven again (a
/// suspended run the client will not resolve is never recreated).
async fn recreate(shared: &Arc<Shared>, ctx: &Rc<Ctx>, i: usize, run: &RunPlan, status: Option<RunStatus>) {
    match status {
        Some(s) if s.is_terminal() => {
            let Ok(lease) = ctx.engine.acquire(&run.id, &ctx.label).await else { return };
            if ctx.engine.delete_run(&run.id, Some(&lease)).await.is_err() {
                ctx.engine.release_quietly(&lease);
                return;
            }
            ctx.history.push(&ctx.label, Event::Note(format!("client recreates {}", run.id)));
            {
                let mut client = lock(&shared.client);
                let entry = &mut client.runs[i];
                entry.recreated = true;
                entry.seen = false;
                entry.resolved = !awaits_resolution(run);
            }
            drive(shared, ctx, i);
        }
        Some(RunStatus::Suspended) if !run.resolve => lock(&shared.client).runs[i].recreated = true,
        _ => {}
    }
}

/// Start the plan's run `i` fresh on the client's engine, as its own task.
fn drive(shared: &Arc<Shared>, ctx: &Rc<Ctx>, i: usize) {
    let run = &shared.plan.runs[i];
    let Some(workflow) = Workflow::builtin(&run.workflow) else { return };
    {
        let mut client = lock(&shared.client);
        // One start of a run at a time: `driving` is what resubmits wait for.
        assert!(!client.runs[i].driving, "run {} started while the client still drives it", run.id);
        client.runs[i].driving = true;
    }
    let cancel = run.cancel_ms.map(|ms| {
        let token = CancelToken::new();
        let (t, env, history, label, id) =
            (token.clone(), ctx.env.clone(), ctx.history.clone(), ctx.label.clone(), run.id.clone());
        madsim::task::spawn_local(async move {
            env.sleep(u64::from(ms)).await;
            history.push(&label, Event::Request(Request::Cancel { run: id }));
            t.cancel("the client cancels");
        });
        token
    });
    let (shared, ctx, id) = (shared.clone(), ctx.clone(), run.id.clone());
    madsim::task::spawn_local(async move {
        branches::between_sweeps(&ctx).await;
        let opts = RunOptions { cancel, ..RunOptions::default() };
        // Boxed: the engine's future is kilobytes, and a spawned task is copied whole.
        let result = Box::pin(ctx.engine.run(&id, &workflow, opts)).await;
        ctx.outcome(&id, &result);
        let mut client = lock(&shared.client);
        client.runs[i].driving = false;
        // It reached the store: a later absence is a deletion, not a lost start.
        if matches!(result, Ok(_) | Err(EngineError::Superseded { .. } | EngineError::Settlement { .. })) {
            client.runs[i].seen = true;
        }
    });
}

/// Cancel the plan's run `i` while it waits: resume it with the cancel already requested, as its
/// own task.
fn cancel_waiting(shared: &Arc<Shared>, ctx: &Rc<Ctx>, i: usize) {
    let run = &shared.plan.runs[i];
    let Some(workflow) = Workflow::builtin(&run.workflow) else { return };
    ctx.history.push(&ctx.label, Event::Request(Request::Cancel { run: run.id.clone() }));
    let token = CancelToken::new();
    token.cancel("the client cancels the waiting run");
    {
        let mut client = lock(&shared.client);
        assert!(!client.runs[i].driving, "run {} cancelled while the client still drives it", run.id);
        client.runs[i].driving = true;
    }
    let (shared, ctx, id) = (shared.clone(), ctx.clone(), run.id.clone());
    madsim::task::spawn_local(async move {
        branches::between_sweeps(&ctx).await;
        let opts = RunOptions { cancel: Some(token), ..RunOptions::default() };
        let result = Box::pin(ctx.engine.resume(&id, &workflow, opts)).await;
        ctx.outcome(&id, &result);
        lock(&shared.client).runs[i].driving = false;
    });
}

/// Resume a run the client started, as its own task.
fn reattach(ctx: &Rc<Ctx>, run: &RunPlan) {
    let Some(workflow) = Workflow::builtin(&run.workflow) else { return };
    let (ctx, id) = (ctx.clone(), run.id.clone());
    madsim::task::spawn_local(async move {
        branches::between_sweeps(&ctx).await;
        let result = Box::pin(ctx.engine.resume(&id, &workflow, RunOptions::default())).await;
        ctx.outcome(&id, &result);
    });
}

/// The fault-point classes a point belongs to, for a fault kind's `sites`.
fn site_class(point: &Point<'_>) -> SiteClass {
    match point.site {
        Site::Acquiring => SiteClass::Acquire,
        Site::Owned => SiteClass::Owned,
        Site::Call { .. } => SiteClass::Call,
        Site::Tool { .. } => SiteClass::Tool,
        Site::Write { write: Write::Append(e), .. } if entries::as_settle(e).is_some() => SiteClass::Settle,
        Site::Write { write: Write::Append(e), .. } if e.ref_seq.is_some() => SiteClass::Terminal,
        Site::Write { write: Write::Append(_), .. } => SiteClass::Running,
        Site::Write { write: Write::PutMeta(_), .. } => SiteClass::Meta,
        Site::Write { write: Write::PutBlob { .. }, .. } => SiteClass::Checkpoint,
        Site::Write { write: Write::DeleteBlob(_) | Write::DeleteRun, .. } => SiteClass::Delete,
    }
}

fn aims_at(fault: &Applied, point: &Point<'_>) -> bool {
    fault.spec.sites.iter().any(|s| s.covers(site_class(point)))
}

/// The paid effect a point announces, if it is one.
fn effect_of(point: &Point<'_>) -> Option<Effect> {
    let (kind, running, n) = match point.site {
        Site::Call { running, turn } => (EffectKind::Call, running, turn),
        Site::Tool { running, n } => (EffectKind::Tool, running, n),
        _ => return None,
    };
    Some(Effect { kind, run: point.run.clone(), epoch: point.epoch, running, n })
}

/// The node's answer at each engine fault point: crash or stall (while faults are on), and a
/// history row for every paid effect that goes ahead.
fn fault_script(shared: Arc<Shared>, node: Node, label: String, env: SimEnv) -> crate::env::FaultScript {
    let name = node.to_string();
    let mut rng = shared.root.fork(&format!("faults/{label}"));
    let crash = shared.plan.fault(FaultKind::Crash).filter(|f| f.hits(node)).cloned();
    let stall = shared.plan.fault(FaultKind::Stall).filter(|f| f.hits(node)).cloned();
    let ttl = f64::from(shared.plan.ttl_ms);
    Box::new(move |point: &Point<'_>| -> LocalFuture<'static, Fault> {
        let history = shared.history.clone();
        if shared.quiet.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Fault::Continue));
        }
        let fault = |kind: Disruption, detail: String| Event::Fault {
            kind,
            run: Some(point.run.clone()),
            epoch: point.epoch,
            detail: format!("{detail} at {}", site_class(point)),
        };
        if let Some(crash) = crash.as_ref().filter(|c| aims_at(c, point))
            && rng.chance(crash.rate)
        {
            let after =
                u32::try_from(rng.range(u64::from(crash.spec.restart_ms.0), u64::from(crash.spec.restart_ms.1)))
                    .unwrap_or(0);
            history.push(&label, fault(Disruption::Crash, format!("{label} killed, restarts in {after}ms")));
            shared.crash(&name, after);
            return Box::pin(std::future::pending());
        }
        if let Some(stall) = stall.as_ref().filter(|s| aims_at(s, point))
            && rng.chance(stall.rate)
        {
            // Aimed at the instant: wake with the node's clock reading exactly the lease's expiry.
            let aimed = (stall.spec.expiry.0 > 0.0 && rng.chance(stall.spec.expiry.0))
                .then(|| until_expiry(&shared, &label, point, env.clock()))
                .flatten();
            let ms = aimed.unwrap_or_else(|| (ttl * rng.unit_range(stall.spec.factor.0, stall.spec.factor.1)) as u64);
            let detail = match aimed {
                Some(_) => format!("{label} stalls {ms}ms to its lease's expiry instant"),
                None => format!("{label} stalls {ms}ms"),
            };
            history.push(&label, fault(Disruption::Stall, detail));
            shared.stalls_until(elapsed_ms().saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)));
            let wait = env.stall(ms);
            return Box::pin(async move {
                wait.await;
                Fault::Continue
            });
        }
        Box::pin(std::future::ready(Fault::Continue))
    })
}

/// How long until the node's clock reads the expiry of the lease it holds at `point` (from its
/// grant or last accepted renew in the history); `None` without a lease or past its expiry.
fn until_expiry(shared: &Shared, label: &str, point: &Point<'_>, clock: &SimClock) -> Option<u64> {
    use fencesim_store::Clock as _;
    let lease = Lease { run: point.run.clone(), owner: label.to_owned(), epoch: point.epoch? };
    let expires_at = shared.history.last_extension(&lease)?.saturating_add(i64::from(shared.plan.ttl_ms));
    u64::try_from(expires_at - clock.now_ms()).ok().filter(|ms| *ms > 0)
}

/// When the lease `label` holds on `run` (its latest grant there) expires, in its own clock.
fn holder_expiry(shared: &Shared, label: &str, run: &RunId) -> Option<i64> {
    let lease = shared.history.latest_grant(run, label)?;
    Some(shared.history.last_extension(&lease)?.saturating_add(i64::from(shared.plan.ttl_ms)))
}

/// At the store's fence-check hook of this connection, while faults are on, the world's usurper
/// (another connection, whose clock reads past the holder's lease: the holder paused mid-call)
/// tries to take the run over. Over a correct store it fails busy; over a non-atomic fence it
/// lands between the check and the mutation.
/// With `faults.takeover.expiry`, a share of the attempts is aimed at the holder's lease's exact
/// expiry millisecond: the usurper's clock reads `expires_at` (contracts 9.1: already expired).
fn install_takeover(shared: &Arc<Shared>, recorder: &Recorder, label: &str, clock: &SimClock, takeover: &Applied) {
    let mut rng = shared.root.fork(&format!("takeover/{label}"));
    let (shared, rate, holder, label) = (shared.clone(), takeover.rate, clock.clone(), label.to_owned());
    let aim = takeover.spec.expiry.0;
    let ttl = i64::from(shared.plan.ttl_ms);
    let hook = Box::new(move |site: &FaultSite<'_>| {
        if site.point != FaultPoint::FenceChecked || shared.quiet.load(Ordering::SeqCst) || !rng.chance(rate) {
            return FaultAction::Resume;
        }
        let aimed = (aim > 0.0 && rng.chance(aim)).then(|| holder_expiry(&shared, &label, site.run)).flatten();
        let usurper = lock(&shared.usurper);
        let Some((store, clock)) = usurper.as_ref() else { return FaultAction::Resume };
        let detail = match aimed {
            Some(expires_at) => {
                clock.set_skew_ms(expires_at - crate::env::virtual_ms());
                // The usurper's acquire below reads exactly the holder's expiry (9.1).
                assert_eq!(fencesim_store::Clock::now_ms(clock), expires_at, "the usurper's clock missed the expiry");
                format!("mid-{} of {label} at its lease's expiry instant", site.op.as_str())
            }
            None => {
                clock.set_skew_ms(holder.skew_ms() + ttl + 1);
                format!("mid-{} of {label}", site.op.as_str())
            }
        };
        let event = Event::Fault { kind: Disruption::Takeover, run: Some(site.run.clone()), epoch: None, detail };
        let usurper = Node::Usurper.to_string();
        shared.history.push(&usurper, event);
        let _ = store.acquire(site.run, &usurper);
        FaultAction::Resume
    });
    recorder.set_fault_hook(Some(hook));
}

/// A superseded holder that wakes and probes every write surface with its dead lease; then, with
/// a live lease of its own scratch run, the run-match rule (appends and blob writes into other
/// runs) and the seq guard. Then the branches no worker takes: a forger presents the live epoch
/// of a run someone holds under another owner's name on every surface (W7); the scratch lease is
/// probed at exactly its expiry millisecond and taken over there (9.1); and an administrator
/// purges a victim run with an unleased delete while its holder still holds it, the holder is
/// fenced out, and the victim's stable owner recreates it above every epoch granted before (S6,
/// L4).
pub(super) struct Zombie {
    /// Its node name: the label of its rows and the owner of its leases.
    name: String,
    store: Recorder,
    /// The administrator's connection: its unleased deletes are the purge S6 allows.
    admin: Recorder,
    clock: SimClock,
    ttl_ms: i64,
    rng: Stream,
    probes: u32,
    /// The grants read so far, indexed: a probe reads only the grants made since the last one.
    granted: granted::Granted,
}

/// The owner a forged lease names: nobody ever acquires under it.
const FORGER: &str = "forger";
/// The stable owner of the admin purge's victim runs, the same across purge and recreate (D7).
const VICTIM: &str = "victim";

impl Zombie {
    pub(super) fn new(shared: &Shared) -> Result<Zombie, HarnessError> {
        let (name, admin) = (Node::Zombie.to_string(), Node::Admin.to_string());
        let clock = shared.clock(&name);
        Ok(Zombie {
            store: shared.connect(&name, &name, &clock)?,
            admin: shared.connect(&admin, &admin, &shared.clock(&admin))?,
            name,
            clock,
            ttl_ms: i64::from(shared.plan.ttl_ms),
            rng: shared.root.fork("zombie"),
            probes: 0,
            granted: granted::Granted::new(granted::Exclusions {
                scratch: is_scratch,
                owner: |owner| Node::of_label(owner) == Some(Node::Usurper),
            }),
        })
    }

    /// Read the grants made since the last read.
    fn read_grants(&mut self, shared: &Shared) {
        self.granted.extend(shared.history.grants_since(self.granted.known()));
    }

    pub(super) fn probe(&mut self, shared: &Shared) {
        self.probes += 1;
        self.dead_lease(shared);
        self.forge(shared);
        let victim = self.purge_and_recreate(shared);
        self.own_run(shared, victim.as_ref());
    }

    /// The dead-lease probes: a superseded lease on every write surface.
    fn dead_lease(&mut self, shared: &Shared) {
        // A grant is superseded when its run was granted a higher epoch since.
        self.read_grants(shared);
        let store = &self.store;
        let Some(dead) = self.granted.pick_superseded(&mut self.rng).cloned() else {
            shared.history.push(&self.name, Event::Note("zombie wakes: no superseded lease to probe with".into()));
            return;
        };
        let run = dead.run.clone();
        shared.history.push(
            &self.name,
            Event::Fault {
                kind: Disruption::Zombie,
                run: Some(run.clone()),
                epoch: Some(dead.epoch),
                detail: format!("probes with {}", dead.owner),
            },
        );
        let tail = store.load(&run).ok().and_then(|j| j.last().map(|e| e.seq.0)).unwrap_or(0);
        let lease = Some(&dead);
        let _ = store.renew(&dead);
        let _ = store.append(&run, &zombie_entry(tail + 1), lease);
        let _ = store.put_meta(&zombie_meta(&run), lease);
        let _ = store.put_blob(&format!("{run}/ckpt/{}", tail.max(1)), b"zombie", lease);
        if let Some(blob) = store.list_blobs(&run).ok().and_then(|refs| refs.into_iter().next()) {
            let _ = store.delete_blob(&blob, lease);
        }
        let _ = store.delete(&run, lease);
        let _ = store.release(&dead);
    }

    /// W7: learn the live holder of a workload run from a refused acquire, then present its epoch
    /// under the forger's name on every fenced surface; every call must be refused. A run found
    /// free is released again at once (nobody else runs in between).
    fn forge(&mut self, shared: &Shared) {
        self.read_grants(shared);
        let runs = self.granted.distinct_runs();
        let store = &self.store;
        for _ in 0..3 {
            let Some(run) = self.rng.pick(runs).cloned() else { return };
            let held = match store.acquire(&run, &self.name) {
                Ok(mine) => {
                    let _ = store.release(&mine);
                    continue;
                }
                Err(StoreError::LeaseHeld(held)) => match &held.rejection {
                    LeaseRejection::HeldBy { owner, epoch } => (owner.clone(), *epoch),
                    _ => continue,
                },
                Err(_) => continue,
            };
            let (owner, epoch) = held;
            let forged = Lease { run: run.clone(), owner: FORGER.to_owned(), epoch };
            shared.history.push(
                &self.name,
                Event::Fault {
                    kind: Disruption::Zombie,
                    run: Some(run.clone()),
                    epoch: Some(epoch),
                    detail: format!("forges the live lease of {owner}"),
                },
            );
            let tail = store.load(&run).ok().and_then(|j| j.last().map(|e| e.seq.0)).unwrap_or(0);
            let lease = Some(&forged);
            let _ = store.renew(&forged);
            let _ = store.append(&run, &zombie_entry(tail + 1), lease);
            let _ = store.put_meta(&zombie_meta(&run), lease);
            let _ = store.put_blob(&format!("{run}/ckpt/{}", tail.max(1)), b"forged", lease);
            let blob = store.list_blobs(&run).ok().and_then(|refs| refs.into_iter().next());
            let _ = store.delete_blob(&blob.unwrap_or_else(|| format!("{run}/ckpt/1")), lease);
            let _ = store.delete(&run, lease);
            let _ = store.release(&forged);
            return;
        }
    }

    /// S6 and L4: a victim run is written under its stable owner's lease, purged by an unleased
    /// (administrative) delete while that lease is live, its holder's next append is refused (the
    /// row is gone), and the same owner recreates it: the new epoch is above every epoch granted
    /// before the purge, so the old lease stays stale. Returns the victim, which keeps a blob.
    fn purge_and_recreate(&mut self, shared: &Shared) -> Option<RunId> {
        let store = &self.store;
        let victim = RunId::new(format!("zz-victim-{}", self.probes));
        let first = store.acquire(&victim, VICTIM).ok()?;
        let blob = format!("{victim}/ckpt/1");
        let _ = store.append(&victim, &zombie_entry(1), Some(&first));
        let _ = store.put_meta(&zombie_meta(&victim), Some(&first));
        let _ = store.put_blob(&blob, b"victim", Some(&first));
        shared.history.push(
            &self.name,
            Event::Fault {
                kind: Disruption::Purge,
                run: Some(victim.clone()),
                epoch: Some(first.epoch),
                detail: format!("an administrator purges {victim} under {VICTIM}'s live lease"),
            },
        );
        let _ = self.admin.delete(&victim, None);
        let _ = store.append(&victim, &zombie_entry(2), Some(&first));
        let again = store.acquire(&victim, VICTIM).ok()?;
        let _ = store.append(&victim, &zombie_entry(1), Some(&again));
        let _ = store.put_meta(&zombie_meta(&victim), Some(&first));
        let _ = store.put_blob(&blob, b"victim", Some(&again));
        let _ = store.delete(&victim, Some(&again));
        Some(victim)
    }

    /// The zombie's own scratch run, under a live lease of its own: the seq guard, the run-match
    /// rule (an append into a workload run, a blob delete and put into the victim's), then the
    /// expiry instant: at exactly `now == expires_at` its renew and write are refused and another
    /// owner's acquire succeeds (9.1).
    fn own_run(&mut self, shared: &Shared, victim: Option<&RunId>) {
        let store = &self.store;
        let own = RunId::new(format!("zz-zombie-{}", self.probes));
        let Ok(mine) = store.acquire(&own, &self.name) else { return };
        let _ = store.append(&own, &zombie_entry(1), Some(&mine));
        let _ = store.append(&own, &zombie_entry(1), Some(&mine));
        if shared.cfg.scenario.world.seq_gaps {
            // A gap the store allows (9.8), excused by a refused append of its seq (a forger's),
            // then the tail again: refused at the tail (3), not at the entry count (2).
            let forged = Lease { owner: FORGER.to_owned(), ..mine.clone() };
            let _ = store.append(&own, &zombie_entry(2), Some(&forged));
            let _ = store.append(&own, &zombie_entry(3), Some(&mine));
            let _ = store.append(&own, &zombie_entry(3), Some(&mine));
        }
        self.granted.extend(shared.history.grants_since(self.granted.known()));
        if let Some(run) = self.granted.pick_workload_grant(&mut self.rng).cloned() {
            let tail = store.load(&run).ok().and_then(|j| j.last().map(|e| e.seq.0)).unwrap_or(0);
            let _ = store.append(&run, &zombie_entry(tail + 1), Some(&mine));
            if let Some(blob) = store.list_blobs(&run).ok().and_then(|refs| refs.into_iter().next()) {
                let _ = store.delete_blob(&blob, Some(&mine));
            }
        }
        if let Some(victim) = victim {
            let blob = format!("{victim}/ckpt/1");
            let _ = store.delete_blob(&blob, Some(&mine));
            let _ = store.put_blob(&blob, b"cross-run", Some(&mine));
            // The victim's blob is the engine's to cascade (T6); here the admin removes it.
            let _ = self.admin.delete_blob(&blob, None);
        }
        let Some(granted) = shared.history.last_extension(&mine) else { return };
        let skew = self.clock.skew_ms();
        let instant = granted + self.ttl_ms;
        // Jump the zombie's clock to exactly its lease's expiry millisecond.
        self.clock.set_skew_ms(skew + instant - store_now(&self.clock));
        // Virtual time stands still in synchronous code: the calls below are at the instant (9.1).
        assert_eq!(store_now(&self.clock), instant, "the zombie's clock missed its lease's expiry instant");
        shared.history.push(
            &self.name,
            Event::Fault {
                kind: Disruption::Zombie,
                run: Some(own.clone()),
                epoch: Some(mine.epoch),
                detail: format!("wakes at the expiry instant {instant}"),
            },
        );
        let _ = store.renew(&mine);
        let _ = store.append(&own, &zombie_entry(2), Some(&mine));
        let _ = store.put_blob(&format!("{own}/ckpt/1"), b"expired", Some(&mine));
        let next = store.acquire(&own, &self.name);
        let _ = store.delete(&own, Some(next.as_ref().unwrap_or(&mine)));
        self.clock.set_skew_ms(skew);
    }
}

/// The zombie's own runs (scratch and victims), apart from the workload's.
fn is_scratch(run: &RunId) -> bool {
    run.as_str().starts_with("zz-")
}

fn store_now(clock: &SimClock) -> i64 {
    use fencesim_store::Clock as _;
    clock.now_ms()
}
