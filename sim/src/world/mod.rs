//! One seed, one world: a madsim runtime with queue workers, a retention sweeper, a client and an
//! operator, each a madsim node with its own store connection and clock, over one database. The
//! supervisor (the runtime's main task) injects the plan's faults until quiescence, restarts what
//! crashed, waits until every run settles or waits on a suspension (or the liveness bound passes),
//! then hands the history and the store's final state to the oracle.
//!
//! Everything the world does is a function of the scenario, the seed, the database kind and the
//! planted defects: the same inputs give the same rows, the same trace and the same fingerprint.
//!
//! A crash is `Handle::kill` from inside the node's own fault point; a restart re-runs the node's
//! init with a new incarnation, a new owner name and a new connection. Quiescence, at `fault_ms`,
//! is no more faults and every crashed node back. The database is made before the runtime: a file
//! world's temporary folder takes a random name from the thread's generator, whose first use
//! inside a runtime would draw from madsim's and shift the first file world of each thread; the
//! folder is removed after the run.

mod cuts;
mod nodes;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencesim_engine::{EngineDefects, EngineError};
use fencesim_store::{JournalEntry, RunId, RunMeta, RunStatus, Store, StoreDefects, StoreError};
use madsim::runtime::{Handle, Runtime};
use madsim::task::NodeId;

use crate::env::{SimClock, elapsed_ms};
use crate::history::{Disruption, Event, History, Mix, Recorder, Row, Snapshot, lock};
use crate::node::Node;
use crate::rng::Stream;
use crate::scenario::plan::{Plan, Scheduled};
use crate::scenario::{FaultKind, Scenario};
use crate::stores::{Backing, DbKind};
use fencesim_oracle::{self as oracle, OracleConfig, Scope, Violation};

/// What to run.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    pub scenario: Scenario,
    pub seed: u64,
    pub db: DbKind,
    pub store_defects: StoreDefects,
    pub engine_defects: EngineDefects,
    /// Save the final database here (a SQLite file; `overwrite` replaces an existing file).
    pub keep_db: Option<crate::files::Output>,
    /// Run the world against this store adapter (the store protocol) instead of fencesim's own
    /// store; `db` then names no database and store defects cannot be planted.
    pub adapter: Option<fencesim_protocol::Spec>,
}

impl WorldConfig {
    /// Seed `seed` of `scenario` on a memdb, no defect planted, nothing kept, fencesim's own store.
    pub fn new(scenario: Scenario, seed: u64) -> Self {
        Self {
            scenario,
            seed,
            db: DbKind::Memdb,
            store_defects: StoreDefects::NONE,
            engine_defects: EngineDefects::NONE,
            keep_db: None,
            adapter: None,
        }
    }
}

/// Counts that say what a world did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    pub virtual_ms: i64,
    pub rows: usize,
    pub store_calls: usize,
    pub accepted_mutations: usize,
    pub lease_rejections: usize,
    pub busy: usize,
    pub grants: usize,
    pub paid_calls: usize,
    pub paid_tools: usize,
    /// Injected faults by kind.
    pub faults: BTreeMap<String, usize>,
    pub runs_settled: usize,
    pub runs_waiting: usize,
    pub runs_absent: usize,
}

/// The outcome of one world.
#[derive(Clone, Debug)]
pub struct WorldReport {
    pub scenario: String,
    /// How `--scenario` names it again (a built-in name or a file path): for repro commands.
    pub source: String,
    pub seed: u64,
    pub db: DbKind,
    /// The store adapter the world ran against (`cmd:...`), if not fencesim's own store.
    pub adapter: Option<String>,
    /// The applied configuration, one line each.
    pub config: Vec<String>,
    pub rows: Vec<Row>,
    pub violations: Vec<Violation>,
    /// Digest of the trace and the final store state.
    pub fingerprint: u64,
    pub counters: Counters,
    /// Whether the world stopped because everything settled (else the liveness bound passed).
    pub settled_early: bool,
    /// Hits per engine branch its nodes took (`fencesim_engine::probe`); a branch no node took
    /// is absent. Not part of the trace or the fingerprint: probes only count.
    pub probes: BTreeMap<fencesim_engine::Probe, u64>,
}

impl WorldReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// What reports call the world's store: `memdb`, `file`, or the adapter's `cmd:...`.
    pub fn store_name(&self) -> &str {
        self.adapter.as_deref().unwrap_or(self.db.as_str())
    }
}

/// The world could not be run at all (no database, say): a harness error, not a verdict.
#[derive(Debug, thiserror::Error)]
#[error("world {scenario} seed {seed}: {error}")]
pub struct WorldError {
    pub scenario: String,
    pub seed: u64,
    pub error: Box<HarnessError>,
}

/// Why the harness could not take a world to its verdict: its own failure, never a finding about
/// the store or the engines (those are the oracle's violations). Each message names its cause,
/// and no variant also returns that cause as its `source`, so a printed chain (`{:#}`) names
/// each cause once.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The world's database or store adapter could not be made or started.
    #[error("{0}")]
    CreateDatabase(String),
    /// The store adapter failed the protocol (it died, answered garbage or too late): the world
    /// has no verdict.
    #[error(transparent)]
    Adapter(#[from] fencesim_protocol::AdapterError),
    #[error("cannot open the world's database: {0}")]
    OpenDatabase(StoreError),
    #[error("boot-storm connection {index} failed to boot: {error}")]
    BootStorm { index: u32, error: StoreError },
    /// A node's (or an adversary's) connection would not open.
    #[error("{node}: cannot open its connection: {error}")]
    Connect { node: String, error: StoreError },
    /// A node's engine or worker refused the options the world built for it.
    #[error("{label}: {part}: {error}")]
    Engine { label: String, part: &'static str, error: EngineError },
    #[error("{0} is not a node a world starts")]
    NotStarted(Node),
    #[error("the plan's worker '{0}' is not a worker's name")]
    NotAWorker(String),
    /// The supervisor's read of the store (the settled check, the final snapshot) failed.
    #[error("cannot read the store: {0}")]
    ReadStore(StoreError),
    /// `--keep-db` could not save the final database.
    #[error("--keep-db {}: {reason}", path.display())]
    KeepDb { path: std::path::PathBuf, reason: String },
    /// A scenario the harness itself names would not load.
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    /// A bug in the harness: the panic's message.
    #[error("the world panicked: {0}")]
    Panicked(String),
    /// The caller's stop flag was raised before the world reached its verdict ([`run_stoppable`]).
    #[error("stopped before its verdict: the caller's time ran out")]
    Stopped,
}

thread_local! {
    /// Whether this thread is inside [`run`], which reports a panic itself.
    static IN_WORLD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is running a world: a process-wide panic hook should stay quiet
/// then, because [`run`] turns the panic into the world's error.
pub fn inside_world() -> bool {
    IN_WORLD.with(std::cell::Cell::get)
}

/// Run one world to its verdict. A panic inside the world (a harness bug) comes back as a
/// [`WorldError`] naming the seed, so a sweep can report it and go on.
pub fn run(cfg: &WorldConfig) -> Result<WorldReport, WorldError> {
    run_stoppable(cfg, None)
}

/// [`run`], stopped early when `stop` is raised (by another thread: a wall-clock budget): the
/// supervisor looks at it between its steps (every 250 virtual ms, and before judging) and ends
/// the world with [`HarnessError::Stopped`]. Reading the flag changes nothing else: a world it
/// does not stop is the world [`run`] runs, byte for byte.
pub fn run_stoppable(cfg: &WorldConfig, stop: Option<&AtomicBool>) -> Result<WorldReport, WorldError> {
    run_with(cfg, stop, None)
}

/// [`run`], keeping every store call's request and full answer and the store's final state for
/// the differential (`crate::diff`): the world is [`run`]'s, row for row.
pub fn run_recording(cfg: &WorldConfig) -> Result<(WorldReport, crate::history::Recording), WorldError> {
    let answers = crate::history::Answers::default();
    let report = run_with(cfg, None, Some(answers.clone()))?;
    Ok((report, answers.take()))
}

fn run_with(
    cfg: &WorldConfig,
    stop: Option<&AtomicBool>,
    answers: Option<crate::history::Answers>,
) -> Result<WorldReport, WorldError> {
    let fail =
        |error: HarnessError| WorldError { scenario: cfg.scenario.name.clone(), seed: cfg.seed, error: error.into() };
    IN_WORLD.with(|w| w.set(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // The database (a file world's temporary folder) is made before the runtime exists: its
        // random name comes from the thread's generator, which seeds itself on first use; inside
        // the runtime that seeding would draw from madsim's generator and shift the scheduling of
        // the first file world on each thread only (the same seed would then differ in-process).
        let mut db = Backing::new(cfg.db, cfg.adapter.as_ref()).map_err(HarnessError::CreateDatabase)?;
        // Killed nodes can keep the world's shared state (and with it the `Db`) alive past the
        // runtime, so a file world's folder guard is held here and dropped after the runtime:
        // the folder goes, pass or fail, unless the CLI was told to keep temporary folders.
        let folder = db.detach_folder();
        let runtime = Runtime::with_seed_and_config(cfg.seed, madsim::Config::default());
        let outcome = runtime.block_on(supervise(cfg.clone(), db, stop, answers));
        drop(runtime);
        drop(folder);
        outcome
    }));
    IN_WORLD.with(|w| w.set(false));
    match outcome {
        Ok(result) => result.map_err(fail),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(fail(HarnessError::Panicked(what)))
        }
    }
}

/// Run one world inside the current madsim runtime (which the caller seeded with `cfg.seed`):
/// what [`run`] does inside the runtime it makes, exposed so that a test can wrap it in
/// `Runtime::check_determinism`. Unlike [`run`], it makes the database inside the runtime, which
/// shifts a file world's scheduling (see [`run`]): its traces equal [`run`]'s on memdb only.
pub async fn run_in_runtime(cfg: WorldConfig) -> Result<WorldReport, HarnessError> {
    let mut db = Backing::new(cfg.db, cfg.adapter.as_ref()).map_err(HarnessError::CreateDatabase)?;
    let folder = db.detach_folder();
    let result = supervise(cfg, db, None, None).await;
    // The nodes were killed at the end of `supervise`; madsim drops a killed node's tasks only
    // when its executor next runs them. Yield once so it does: otherwise their futures (each
    // holding the world's connections) stay queued in a runtime they keep alive, and every world
    // would leak its memory and file handles.
    yield_once().await;
    drop(folder);
    result
}

/// Pending once (after waking itself), so the executor runs every other ready task first.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

/// State every node of a world shares (nodes' init closures must be `Send + Sync`).
pub(crate) struct Shared {
    pub cfg: WorldConfig,
    pub plan: Plan,
    pub db: Backing,
    pub history: History,
    pub root: Stream,
    /// Set at quiescence: no more injected faults.
    pub quiet: Arc<AtomicBool>,
    pub clocks: BTreeMap<String, SimClock>,
    incarnations: Mutex<BTreeMap<String, u32>>,
    node_ids: Mutex<BTreeMap<String, NodeId>>,
    /// Nodes to start again: when, and whether it waits for a graceful stop to finish.
    restarts: Mutex<BTreeMap<String, Restart>>,
    /// Nodes whose main task is running (a killed node's never returns, so a crash removes it).
    alive: Mutex<BTreeSet<String>>,
    /// Virtual ms (since the start) until which some node is stalled: no early stop until a ttl
    /// after it, so the woken node's late writes (what a stall exists to provoke) are recorded.
    stalled_until: Mutex<i64>,
    /// Workers asked to stop gracefully.
    stop_requests: Mutex<BTreeSet<String>>,
    pub client: Mutex<nodes::ClientState>,
    /// The connection that attempts mid-call takeovers, with its clock (when takeovers are on).
    pub usurper: Mutex<Option<(Recorder, SimClock)>>,
    /// Harness errors nodes ran into (a connection that would not open).
    errors: Mutex<Vec<HarnessError>>,
    /// The engine branches the world's nodes took (`fencesim_engine::probe`).
    pub probes: crate::env::Probes,
    /// Where every connection keeps its calls' requests and answers, for the differential.
    answers: Option<crate::history::Answers>,
}

/// A pending restart of a node.
#[derive(Clone, Copy, Debug)]
struct Restart {
    at: i64,
    /// A graceful stop: restart only once the node's main task has returned.
    graceful: bool,
}

async fn sleep_ms(ms: u64) {
    madsim::time::sleep(Duration::from_millis(ms)).await;
}

impl Shared {
    /// The next incarnation of a node, from 1, and its label (`w1.2`).
    fn incarnate(&self, name: &str) -> String {
        let mut incarnations = lock(&self.incarnations);
        let n = incarnations.entry(name.to_owned()).or_default();
        *n += 1;
        format!("{name}.{n}")
    }

    fn clock(&self, name: &str) -> SimClock {
        self.clocks.get(name).cloned().unwrap_or_default()
    }

    /// Open a recorded connection for a node.
    fn connect(&self, name: &str, label: &str, clock: &SimClock) -> Result<Recorder, HarnessError> {
        let clock: Arc<dyn fencesim_store::Clock> = Arc::new(clock.clone());
        let store = self
            .db
            .open(clock.clone(), i64::from(self.plan.ttl_ms), self.cfg.store_defects)
            .map_err(|error| HarnessError::Connect { node: name.to_owned(), error })?;
        Ok(Recorder::new(store, label, clock, self.history.clone()).with_answers(self.answers.clone()))
    }

    fn harness_error(&self, error: HarnessError) {
        lock(&self.errors).push(error);
    }

    /// Kill the calling node now (a crash) and start it again `after_ms` later (or sooner, if a
    /// restart was already due).
    fn crash(&self, name: &str, after_ms: u32) {
        let id = lock(&self.node_ids).get(name).copied();
        if let Some(id) = id {
            let at = elapsed_ms() + i64::from(after_ms);
            lock(&self.alive).remove(name);
            {
                let mut restarts = lock(&self.restarts);
                let restart = restarts.entry(name.to_owned()).or_insert(Restart { at, graceful: false });
                *restart = Restart { at: restart.at.min(at), graceful: false };
            }
            Handle::current().kill(id);
        }
    }

    /// Ask a worker to stop gracefully and start it again `after_ms` later, once it stopped.
    fn stop_gracefully(&self, name: &str, after_ms: u32) {
        lock(&self.stop_requests).insert(name.to_owned());
        let at = elapsed_ms() + i64::from(after_ms);
        lock(&self.restarts).entry(name.to_owned()).or_insert(Restart { at, graceful: true });
    }

    /// Note that a node stalls until `until_ms` (virtual ms since the start).
    fn stalls_until(&self, until_ms: i64) {
        let mut stalled = lock(&self.stalled_until);
        *stalled = (*stalled).max(until_ms);
    }

    /// Restart every node whose restart is due (a graceful one once the node has stopped).
    fn restart_due(&self, handle: &Handle, now: i64) {
        let due: Vec<String> = {
            let alive = lock(&self.alive);
            let mut restarts = lock(&self.restarts);
            let due: Vec<String> = restarts
                .iter()
                .filter(|(name, r)| r.at <= now && !(r.graceful && alive.contains(*name)))
                .map(|(name, _)| name.clone())
                .collect();
            for name in &due {
                restarts.remove(name);
            }
            due
        };
        for name in due {
            lock(&self.stop_requests).remove(&name);
            if let Some(id) = lock(&self.node_ids).get(&name).copied() {
                handle.restart(id);
            }
        }
    }

    fn stop_requested(&self, name: &str) -> bool {
        lock(&self.stop_requests).contains(name)
    }
}

async fn supervise(
    cfg: WorldConfig,
    db: Backing,
    stop: Option<&AtomicBool>,
    answers: Option<crate::history::Answers>,
) -> Result<WorldReport, HarnessError> {
    let shared = share(cfg, db, answers);
    shared.history.push(
        &Node::World.to_string(),
        Event::Note(format!(
            "scenario {} seed {} db {}",
            world_name(&shared),
            shared.cfg.seed,
            shared.db.describe(shared.cfg.db)
        )),
    );
    let (observer, zombie) = boot(&shared)?;
    let handle = Handle::current();
    start_nodes(&shared, &handle);
    let stopped = || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    let settled_early = match drive(&shared, &handle, observer.as_ref(), zombie, &stopped).await {
        Ok(settled_early) => settled_early,
        Err(e) => {
            kill_nodes(&shared, &handle);
            return Err(e);
        }
    };
    shared.history.push(
        &Node::World.to_string(),
        Event::Note(if settled_early {
            "every run settled or waits: stop".into()
        } else {
            "liveness bound reached: stop".into()
        }),
    );
    kill_nodes(&shared, &handle);
    if let Some(error) = lock(&shared.errors).drain(..).next() {
        return Err(error);
    }
    if stopped() {
        return Err(HarnessError::Stopped);
    }
    judge(&shared, observer.as_ref(), settled_early)
}

/// The world's shared state, from its config and database: the plan (drawn from the seed unless
/// the config carries one), each node's clock at its planned skew, an empty history.
fn share(cfg: WorldConfig, db: Backing, answers: Option<crate::history::Answers>) -> Arc<Shared> {
    let plan = cfg.scenario.plan.as_deref().cloned().unwrap_or_else(|| Plan::draw(&cfg.scenario, cfg.seed));
    let client = nodes::ClientState::new(&plan);
    let clocks = plan.skews.iter().map(|(node, skew)| (node.clone(), SimClock::new(*skew))).collect();
    Arc::new(Shared {
        root: Stream::new(cfg.seed),
        plan,
        db,
        history: crate::history::new_history(),
        quiet: Arc::new(AtomicBool::new(false)),
        clocks,
        incarnations: Mutex::default(),
        node_ids: Mutex::default(),
        restarts: Mutex::default(),
        alive: Mutex::default(),
        stalled_until: Mutex::default(),
        stop_requests: Mutex::default(),
        client: Mutex::new(client),
        usurper: Mutex::default(),
        errors: Mutex::default(),
        probes: crate::env::Probes::default(),
        answers,
        cfg,
    })
}

/// Before any node runs: the boot storm (many connections open the fresh database at the same
/// virtual instant, one after another on this thread; the first bootstraps it, and the real race
/// of OS processes is conformance check B2's), the supervisor's own view of the store (outside the
/// history), and the adversaries' connections (the zombie, the usurper).
fn boot(shared: &Arc<Shared>) -> Result<(Box<dyn Store>, Option<nodes::Zombie>), HarnessError> {
    for index in 0..shared.cfg.scenario.world.boot_storm {
        let clock = shared.clock(&Node::Client.to_string());
        if let Err(error) = shared.db.open(Arc::new(clock), i64::from(shared.plan.ttl_ms), shared.cfg.store_defects) {
            return Err(HarnessError::BootStorm { index, error });
        }
    }
    let observer = shared
        .db
        .open(Arc::new(SimClock::new(0)), i64::from(shared.plan.ttl_ms), StoreDefects::NONE)
        .map_err(HarnessError::OpenDatabase)?;
    let zombie = match shared.plan.fault(FaultKind::Zombie) {
        Some(_) => Some(nodes::Zombie::new(shared)?),
        None => None,
    };
    if shared.plan.fault(FaultKind::Takeover).is_some() {
        let clock = SimClock::new(0);
        let name = Node::Usurper.to_string();
        *lock(&shared.usurper) = Some((shared.connect(&name, &name, &clock)?, clock));
    }
    Ok((observer, zombie))
}

/// One madsim node per actor: the workers, the retention sweeper (if retention is on), the
/// client, the operator (if it runs).
fn start_nodes(shared: &Arc<Shared>, handle: &Handle) {
    let world = &shared.cfg.scenario.world;
    let mut names: Vec<Node> = Vec::new();
    for worker in &shared.plan.workers {
        match Node::parse(worker) {
            Some(node @ Node::Worker(_)) => names.push(node),
            _ => shared.harness_error(HarnessError::NotAWorker(worker.clone())),
        }
    }
    if world.retention_ms > 0 {
        names.push(Node::Sweeper);
    }
    names.push(Node::Client);
    if world.operator_ms > 0 {
        names.push(Node::Operator);
    }
    for node in names {
        let (s, name) = (shared.clone(), node.to_string());
        let id = handle.create_node().name(name.as_str()).init(move || nodes::main(s.clone(), node)).build().id();
        lock(&shared.node_ids).insert(name, id);
    }
}

/// Kill every node of the world, in the order of their names.
fn kill_nodes(shared: &Shared, handle: &Handle) {
    for id in lock(&shared.node_ids).values() {
        handle.kill(*id);
    }
}

/// The liveness bound, in ms of the world's time: the end of the fault window plus the liveness
/// window that follows from the world's settings (`crate::pace`), never below liveness_ms.
fn deadline_ms(shared: &Shared) -> i64 {
    let world = &shared.cfg.scenario.world;
    let settings = crate::scenario::pace::Settings::of(world);
    let window = crate::scenario::pace::Pace::of_plan(&shared.plan, &settings).window_ms();
    i64::from(world.fault_ms).saturating_add(i64::try_from(window).unwrap_or(i64::MAX))
}

/// Tick the world: fire the plan's timed events, switch faults off at the end of the fault
/// window, restart crashed nodes when due, and stop at the liveness bound or as soon as nothing
/// can still happen. Whether it stopped early, every run settled or waiting.
async fn drive(
    shared: &Arc<Shared>,
    handle: &Handle,
    observer: &dyn Store,
    mut zombie: Option<nodes::Zombie>,
    stopped: &dyn Fn() -> bool,
) -> Result<bool, HarnessError> {
    let mut events = shared.plan.events.clone().into_iter().peekable();
    let fault_ms = i64::from(shared.cfg.scenario.world.fault_ms);
    let deadline = deadline_ms(shared);
    let tick = 250;
    loop {
        sleep_ms(tick).await;
        if stopped() {
            return Err(HarnessError::Stopped);
        }
        let now = elapsed_ms();
        while let Some((at, event)) = events.next_if(|(at, _)| i64::from(*at) <= now) {
            fire(shared, at, event, zombie.as_mut());
        }
        if now >= fault_ms && !shared.quiet.swap(true, Ordering::SeqCst) {
            shared
                .history
                .push(&Node::World.to_string(), Event::Note("quiescence: faults stop, crashed nodes restart".into()));
            for restart in lock(&shared.restarts).values_mut() {
                restart.at = restart.at.min(now);
            }
        }
        shared.restart_due(handle, now);
        // Stop early once nothing can still happen: faults are over, no node is stalled or
        // waiting to restart, the client is done, and every run settled or waits.
        if now >= fault_ms
            && now % 500 < tick as i64
            && now >= lock(&shared.stalled_until).saturating_add(i64::from(shared.plan.ttl_ms))
            && lock(&shared.restarts).is_empty()
            && lock(&shared.client).done()
        {
            let planned: Vec<RunId> = shared.plan.runs.iter().map(|r| r.id.clone()).collect();
            if patiently(|| oracle::store_settled_or_waiting(observer, planned.clone()))
                .map_err(HarnessError::ReadStore)?
            {
                return Ok(true);
            }
        }
        if now >= deadline {
            return Ok(false);
        }
    }
}

/// How many times in a row the supervisor's read may be answered busy before it gives up.
const PATIENCE: u32 = 1_000;

/// A read of the supervisor's (outside the history), retried while the store answers busy: busy
/// is a legal answer to any call (nothing happened), and a store adapter may give it where
/// fencesim's own store would not. Nothing else is waiting: between two calls of a world no
/// connection holds a transaction, so a store that stays busy [`PATIENCE`] times is broken.
fn patiently<T>(mut read: impl FnMut() -> fencesim_store::StoreResult<T>) -> fencesim_store::StoreResult<T> {
    let mut tries = 0;
    loop {
        match read() {
            Err(e) if e.is_busy() && tries < PATIENCE => tries += 1,
            other => return other,
        }
    }
}

/// One timed event of the plan: a clock jump, a zombie's probe, a graceful restart.
fn fire(shared: &Arc<Shared>, at: u32, event: Scheduled, zombie: Option<&mut nodes::Zombie>) {
    match event {
        Scheduled::Jump { node, delta_ms } => {
            let clock = shared.clock(&node);
            clock.set_skew_ms(clock.skew_ms() + delta_ms);
            shared.history.push(
                &Node::World.to_string(),
                Event::Fault {
                    kind: Disruption::ClockJump,
                    run: None,
                    epoch: None,
                    detail: format!("{node} {delta_ms:+}ms at {at}ms"),
                },
            );
        }
        Scheduled::Zombie => {
            if let Some(zombie) = zombie {
                zombie.probe(shared);
            }
        }
        Scheduled::Restart { node, after_ms } => {
            shared.history.push(
                &Node::World.to_string(),
                Event::Fault {
                    kind: Disruption::Restart,
                    run: None,
                    epoch: None,
                    detail: format!("{node} stops gracefully, back in {after_ms}ms"),
                },
            );
            shared.stop_gracefully(&node, after_ms);
        }
    }
}

/// The world's end: its history, the final snapshot read through the observer, the oracle's
/// verdict, the fingerprint and the counters (and the database kept, if asked).
fn judge(shared: &Arc<Shared>, observer: &dyn Store, settled_early: bool) -> Result<WorldReport, HarnessError> {
    if let Some(broken) = shared.db.broken() {
        return Err(broken.into());
    }
    let rows = shared.history.take_rows();
    // The world's note heads every history: the differential skips it when it compares stores.
    assert!(
        rows.first().is_some_and(|r| r.node == Node::World.to_string() && matches!(r.event, Event::Note(_))),
        "a world's history does not start with its note"
    );
    let run_ids = rows.iter().filter_map(Row::call).map(|c| c.run.clone()).filter(|r| r.as_str() != "*");
    let run_ids: Vec<RunId> = run_ids.collect();
    let snapshot = patiently(|| Snapshot::read(observer, run_ids.iter().cloned())).map_err(HarnessError::ReadStore)?;
    // The oracle diffs every run a call names against its final state, an absent one included.
    assert!(run_ids.iter().all(|r| snapshot.runs.contains_key(r)), "the snapshot left out a run a call names");
    if let Some(answers) = &shared.answers {
        answers.set_snapshot(&snapshot);
    }
    let planned = shared.plan.runs.iter().map(|r| r.id.clone()).collect();
    let violations = oracle::check(
        &rows,
        &snapshot,
        &OracleConfig {
            ttl_ms: i64::from(shared.plan.ttl_ms),
            planned,
            scope: Scope::Engine,
            scripts: crate::scripts::builtin(),
        },
    );
    if let Some(out) = &shared.cfg.keep_db {
        keep(shared, out)?;
    }
    let config = shared.plan.describe();
    let fingerprint = fingerprint(&config, &rows, &snapshot);
    let counters = count(&rows, &snapshot);
    Ok(WorldReport {
        scenario: world_name(shared),
        source: shared.cfg.scenario.source.clone(),
        seed: shared.cfg.seed,
        db: shared.cfg.db,
        adapter: shared.cfg.adapter.as_ref().map(ToString::to_string),
        config,
        rows,
        violations,
        fingerprint,
        counters,
        settled_early,
        probes: shared.probes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
    })
}

fn world_name(shared: &Shared) -> String {
    shared.cfg.scenario.name.clone()
}

/// Save the final state as a SQLite file (SQLite's online backup, so a memdb world is written to
/// disk like a file world): readable by `fencesim runs audit` and any SQLite tool. The path is a
/// path, never a SQLite URI (`file:x.db?mode=memory` names a file of that name); the copy is made
/// in a temporary file beside it and renamed into place, so an existing file is never written
/// into (replaced only with `overwrite`), and a directory or a symbolic link is refused.
fn keep(shared: &Shared, out: &crate::files::Output) -> Result<(), HarnessError> {
    use rusqlite::OpenFlags;
    let fail = |reason: String| HarnessError::KeepDb { path: out.path.clone(), reason };
    let Backing::Sqlite(db) = &shared.db else {
        return Err(fail("a store adapter's data is the adapter's own; fencesim keeps only its own database".into()));
    };
    let observer = db
        .open(Arc::new(SimClock::new(0)), i64::from(shared.plan.ttl_ms), StoreDefects::NONE)
        .map_err(|e| fail(e.to_string()))?;
    crate::files::check_target(&out.path, out.overwrite).map_err(|e| fail(e.message))?;
    // With a plain write's mode (`0666 & !umask`), which SQLite keeps for the file it fills.
    // Registered: a signal that ends the process while the copy is made removes it.
    let tmp = crate::files::Temporary::create(|| crate::files::temporary_beside(&out.path, ".fencesim-keep-"))
        .map_err(|e| fail(format!("cannot create a temporary file beside it: {e}")))?;
    {
        // No SQLITE_OPEN_URI: the temporary name is opened as the file it is.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut dst = rusqlite::Connection::open_with_flags(tmp.path(), flags).map_err(|e| fail(e.to_string()))?;
        let backup =
            rusqlite::backup::Backup::new(observer.raw_connection(), &mut dst).map_err(|e| fail(e.to_string()))?;
        backup.run_to_completion(4096, std::time::Duration::ZERO, None).map_err(|e| fail(e.to_string()))?;
        drop(backup);
        // A reused database keeps earlier worlds' rows in its free pages, and a backup copies
        // pages: rewritten whole, the copy holds this world's rows and nothing else.
        dst.execute_batch("VACUUM").map_err(|e| fail(e.to_string()))?;
    }
    tmp.as_file().sync_all().map_err(|e| fail(format!("cannot write: {e}")))?;
    crate::files::hold_for_a_test(tmp.path());
    tmp.persist(&out.path, out.overwrite).map_err(|e| fail(format!("cannot rename into place: {e}")))?;
    Ok(())
}

/// A digest of the applied configuration, every history row (whole, payloads included) and the
/// final store state: the same scenario, seed, db and build give the same value.
fn fingerprint(config: &[String], rows: &[Row], snapshot: &Snapshot) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = Mix::default();
    (config, rows, snapshot).hash(&mut h);
    h.finish()
}

fn count(rows: &[Row], snapshot: &Snapshot) -> Counters {
    use crate::history::{CallOutcome, EffectKind, Surface};
    let mut c = Counters { rows: rows.len(), virtual_ms: rows.last().map_or(0, |r| r.at_ms), ..Counters::default() };
    for row in rows {
        match &row.event {
            Event::Call(call) => {
                c.store_calls += 1;
                c.accepted_mutations += usize::from(call.is_accepted_mutation());
                c.grants += usize::from(call.surface == Surface::Acquire && call.outcome.is_ok());
                c.busy += usize::from(call.outcome == CallOutcome::Busy);
                c.lease_rejections += usize::from(matches!(
                    call.outcome,
                    CallOutcome::Stale | CallOutcome::RunMismatch | CallOutcome::HeldBy { .. }
                ));
            }
            Event::Effect(e) => match e.kind {
                EffectKind::Call => c.paid_calls += 1,
                EffectKind::Tool => c.paid_tools += 1,
            },
            Event::Fault { kind, .. } => *c.faults.entry(kind.as_str().to_owned()).or_default() += 1,
            Event::Outcome { .. } | Event::Repair { .. } | Event::Request(_) | Event::Note(_) => {}
        }
    }
    for state in snapshot.runs.values() {
        match state.meta.as_ref().map(|m| m.status) {
            None => c.runs_absent += 1,
            Some(RunStatus::Suspended) => c.runs_waiting += 1,
            Some(s) if s.is_terminal() => c.runs_settled += 1,
            Some(_) => {}
        }
    }
    // Each count is a class of the calls (of the runs) it sums: the classes never overlap.
    assert!(
        c.accepted_mutations + c.lease_rejections + c.busy <= c.store_calls && c.store_calls <= c.rows,
        "the counters of {} rows overlap",
        c.rows
    );
    assert!(c.runs_settled + c.runs_waiting + c.runs_absent <= snapshot.runs.len(), "the run counters overlap");
    c
}

/// An entry and a meta a zombie writes with its dead lease: foreign to every workflow.
pub(crate) fn zombie_entry(seq: i64) -> JournalEntry {
    JournalEntry::new(seq, "zombie", "ok")
}

pub(crate) fn zombie_meta(run: &RunId) -> RunMeta {
    RunMeta::new(run.clone(), RunStatus::Running).with_segments(99)
}
