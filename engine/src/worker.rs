//! The queue worker (contracts 3.8, E8): a sweep lists the runs that still have work (running or
//! suspended), leases each before reading it, checks it can drive it (a known workflow, not
//! poisoned for its genesis, not a suspended run unchanged since this worker last settled it) and
//! resumes it under that lease while a renew loop keeps the lease alive; any renew failure is
//! lease loss and cancels the drive. (Only a suspended run this worker settled is first looked at
//! through an unleased read of its journal, which can decide to leave it alone, never to drive
//! it.) Idle sweeps stretch the pause before the next, up to a cap. Up to `concurrency` runs are driven at once, as slots joined
//! on the caller's task (nothing spawns). Opt-in retention deletes terminal runs under a brief
//! lease, beside the slots rather than in one. `stop` marks the worker stopping (no acquire after
//! it) and cancels what is active; `stopped` waits for the sweep and the runs to finish.
//!
//! A crash at an engine fault point ([`EngineError::Crashed`]) is the worker's process dying:
//! nothing more is written or released, the sweep's other slots are dropped where they stand, and
//! the worker stays stopped.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

use fencesim_store::{Lease, RunFilter, RunId, RunMeta, RunStatus, Store};
use serde_json::Value;

use crate::defects::{EngineDefect, EngineDefects};
use crate::engine::Engine;
use crate::entries;
use crate::env::Env;
use crate::error::{EngineError, EngineResult};
use crate::options::{CancelToken, Outcome, RunOptions, renew_cadence, validate_timer};
use crate::probe::{self, Probe};
use crate::race::{LocalFuture, join_all, with_keeper};
use crate::workflow::Workflow;

/// Why a sweep left a run alone (the second field of [`SweepReport::skipped`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The worker is stopping: nothing is acquired after `stop`.
    Stopping,
    /// Another owner holds a live lease.
    LeaseHeld,
    /// The store stayed busy through the acquire's retries.
    Busy,
    /// The acquire failed otherwise.
    AcquireFailed,
    /// Reading meta or journal under the lease failed.
    ReadFailed,
    /// This worker is already driving the run, or the engine has a live segment of it.
    Active,
    /// Poisoned for this genesis by an earlier sweep.
    Poisoned,
    /// The run is terminal (settled since it was listed, or not a candidate at all).
    Settled,
    /// The run was deleted since it was listed.
    Gone,
    /// Suspended with the journal length and genesis of this worker's last suspended settle.
    SuspendedUnchanged,
    /// Retention: the run no longer matches the policy once leased.
    Kept,
}

impl Skip {
    /// The reason as reports print it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Skip::Stopping => "stopping",
            Skip::LeaseHeld => "lease-held",
            Skip::Busy => "busy",
            Skip::AcquireFailed => "acquire-failed",
            Skip::ReadFailed => "read-failed",
            Skip::Active => "active",
            Skip::Poisoned => "poisoned",
            Skip::Settled => "settled",
            Skip::Gone => "gone",
            Skip::SuspendedUnchanged => "suspended-unchanged",
            Skip::Kept => "kept",
        }
    }

    /// The probe of the branch that skips for this reason.
    const fn probe(self) -> Probe {
        match self {
            Skip::Stopping => probe::SKIP_STOPPING,
            Skip::LeaseHeld => probe::SKIP_LEASE_HELD,
            Skip::Busy => probe::SKIP_BUSY,
            Skip::AcquireFailed => probe::SKIP_ACQUIRE_FAILED,
            Skip::ReadFailed => probe::SKIP_READ_FAILED,
            Skip::Active => probe::SKIP_ACTIVE,
            Skip::Poisoned => probe::SKIP_POISONED,
            Skip::Settled => probe::SKIP_SETTLED,
            Skip::Gone => probe::SKIP_GONE,
            Skip::SuspendedUnchanged => probe::SKIP_SUSPENDED_UNCHANGED,
            Skip::Kept => probe::SKIP_KEPT,
        }
    }
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The reasons by the short names call sites and tests write (`skip::LEASE_HELD`).
pub mod skip {
    use super::Skip;

    pub const STOPPING: Skip = Skip::Stopping;
    pub const LEASE_HELD: Skip = Skip::LeaseHeld;
    pub const BUSY: Skip = Skip::Busy;
    pub const ACQUIRE_FAILED: Skip = Skip::AcquireFailed;
    pub const READ_FAILED: Skip = Skip::ReadFailed;
    pub const ACTIVE: Skip = Skip::Active;
    pub const POISONED: Skip = Skip::Poisoned;
    pub const SETTLED: Skip = Skip::Settled;
    pub const GONE: Skip = Skip::Gone;
    pub const SUSPENDED_UNCHANGED: Skip = Skip::SuspendedUnchanged;
    pub const KEPT: Skip = Skip::Kept;
}

/// Which terminal runs retention deletes: those whose meta was last written at least `keep_ms`
/// before now. A meta without `updated_at_ms` is kept (its age is unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub keep_ms: i64,
}

impl Retention {
    /// Whether retention deletes the run of `meta` at `now_ms`.
    pub fn selects(&self, meta: &RunMeta, now_ms: i64) -> bool {
        self.selects_planted(meta, now_ms, EngineDefects::NONE)
    }

    /// [`Retention::selects`] with the engine's planted defects: `retention-deletes-parked`
    /// selects every run that is not `running`, a `suspended` one too.
    fn selects_planted(&self, meta: &RunMeta, now_ms: i64, defects: EngineDefects) -> bool {
        let finished = if defects.has(EngineDefect::RetentionDeletesParked) {
            meta.status != RunStatus::Running
        } else {
            meta.status.is_terminal()
        };
        finished && meta.updated_at_ms.is_some_and(|at| now_ms.saturating_sub(at) >= self.keep_ms)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerOptions {
    /// The owner the worker acquires leases as.
    pub owner: String,
    /// Runs driven at once; at least 1.
    pub concurrency: u32,
    /// When given, must equal the store's lease ttl.
    pub ttl_ms: Option<u32>,
    /// Pause between sweeps of [`Worker::run_until_stopped`], `1..=2147483647` ms.
    pub poll_ms: u32,
    pub retention: Option<Retention>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self { owner: "worker".into(), concurrency: 1, ttl_ms: None, poll_ms: 1000, retention: None }
    }
}

/// The longest pause an idle worker backs off to, unless its own poll interval is longer.
pub const IDLE_PAUSE_CAP_MS: u64 = 1_000;

/// See [`Worker::pause_ms`].
pub fn pause_ms(poll_ms: u32, idle_sweeps: u32) -> u64 {
    let poll = u64::from(poll_ms);
    (poll << idle_sweeps.min(3)).min(IDLE_PAUSE_CAP_MS).max(poll)
}

/// What one sweep did, per run, in the order it happened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepReport {
    /// Runs resumed, with what the segment returned.
    pub driven: Vec<(RunId, EngineResult<Outcome>)>,
    /// Runs left alone, with a reason from [`skip`].
    pub skipped: Vec<(RunId, Skip)>,
    /// Runs released and poisoned for their genesis (unknown workflow, or a binding error on drive).
    pub poisoned: Vec<RunId>,
    /// Runs whose drive was cancelled because a renew failed.
    pub lease_lost: Vec<RunId>,
    /// Runs retention deleted.
    pub retained: Vec<RunId>,
    /// Runs whose retention cascade failed part-way (a refused fenced delete, say).
    pub retention_failed: Vec<(RunId, EngineError)>,
    /// A sweep was already in flight: this one did nothing.
    pub overlapped: bool,
}

impl SweepReport {
    /// Nothing for this worker to do until another actor writes: nothing was driven, retained,
    /// poisoned or lost, and every listed run was left alone as a suspended run unchanged since
    /// this worker settled it or as poisoned for its genesis. (A run skipped because its lease is
    /// held, the store was busy or a read failed is work deferred, not idleness.)
    pub fn idle(&self) -> bool {
        self.driven.is_empty()
            && self.poisoned.is_empty()
            && self.lease_lost.is_empty()
            && self.retained.is_empty()
            && self.retention_failed.is_empty()
            && !self.overlapped
            && self.skipped.iter().all(|(_, why)| [skip::SUSPENDED_UNCHANGED, skip::POISONED].contains(why))
    }
}

/// The queue worker over one engine and its store.
pub struct Worker<E: Env> {
    engine: Rc<Engine<E>>,
    workflows: BTreeMap<String, Workflow>,
    opts: WorkerOptions,
    ttl_ms: u32,
    renew_every_ms: u32,
    stopping: Cell<bool>,
    crashed: Cell<bool>,
    sweeping: Cell<bool>,
    /// Runs being driven, with the token that cancels each.
    active: RefCell<BTreeMap<RunId, CancelToken>>,
    /// `(run, genesis)` pairs this worker will not touch again.
    poisoned: RefCell<BTreeSet<(RunId, Option<String>)>>,
    /// Per run: journal length and genesis at this worker's last suspended settle of it.
    settled_suspended: RefCell<BTreeMap<RunId, (usize, Option<String>)>>,
    /// Tasks sleeping between sweeps, woken by `stop`.
    stop_wakers: RefCell<Vec<Waker>>,
}

impl<E: Env> Worker<E> {
    /// A worker driving `workflows` over `engine`; `store` must be the engine's own store object
    /// and leasable. Every invalid option is [`EngineError::Config`].
    pub fn new(
        engine: Rc<Engine<E>>,
        store: &Rc<dyn Store>,
        workflows: Vec<Workflow>,
        opts: WorkerOptions,
    ) -> EngineResult<Self> {
        let config = |msg: String| Err(EngineError::Config(msg));
        let Some(leases) = store.leases() else {
            return config("the worker's store has no leases".into());
        };
        if Rc::as_ptr(store).cast::<()>() != Rc::as_ptr(engine.store()).cast::<()>() {
            return config("the worker's store must be the same object as its engine's store".into());
        }
        if opts.owner.is_empty() {
            return config("worker owner must not be empty".into());
        }
        if opts.concurrency == 0 {
            return config("worker concurrency must be a positive integer, got 0".into());
        }
        let ttl_ms = leases.lease_ttl_ms();
        validate_timer("lease ttl", ttl_ms)?;
        if let Some(given) = opts.ttl_ms
            && given != ttl_ms
        {
            return config(format!("worker ttl {given} ms must equal the store's lease ttl {ttl_ms} ms"));
        }
        validate_timer("worker poll interval", opts.poll_ms)?;
        if let Some(retention) = opts.retention
            && retention.keep_ms < 0
        {
            return config(format!("retention keep_ms must not be negative, got {}", retention.keep_ms));
        }
        let mut by_name = BTreeMap::new();
        for workflow in workflows {
            let name = workflow.name.clone();
            if by_name.insert(name.clone(), workflow).is_some() {
                return config(format!("workflow '{name}' is given twice"));
            }
        }
        Ok(Self {
            engine,
            workflows: by_name,
            opts,
            ttl_ms,
            renew_every_ms: renew_cadence(ttl_ms),
            stopping: Cell::new(false),
            crashed: Cell::new(false),
            sweeping: Cell::new(false),
            active: RefCell::new(BTreeMap::new()),
            poisoned: RefCell::new(BTreeSet::new()),
            settled_suspended: RefCell::new(BTreeMap::new()),
            stop_wakers: RefCell::new(Vec::new()),
        })
    }

    pub fn engine(&self) -> &Rc<Engine<E>> {
        &self.engine
    }

    pub fn options(&self) -> &WorkerOptions {
        &self.opts
    }

    pub fn ttl_ms(&self) -> u32 {
        self.ttl_ms
    }

    pub fn renew_every_ms(&self) -> u32 {
        self.renew_every_ms
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.get()
    }

    /// Whether a fault point crashed this worker's process.
    pub fn crashed(&self) -> bool {
        self.crashed.get()
    }

    pub fn is_sweeping(&self) -> bool {
        self.sweeping.get()
    }

    /// The runs being driven right now.
    pub fn active_runs(&self) -> Vec<RunId> {
        self.active.borrow().keys().cloned().collect()
    }

    /// Whether the run is poisoned for that genesis.
    pub fn is_poisoned(&self, run: &RunId, genesis: Option<&str>) -> bool {
        self.poisoned.borrow().contains(&(run.clone(), genesis.map(str::to_owned)))
    }

    /// Sweep forever until [`Worker::stop`], pausing [`Worker::pause_ms`] between sweeps. A
    /// failed sweep (the listing failed) is retried at the next poll.
    pub async fn run_until_stopped(&self) {
        self.run_reporting(|_| {}).await;
    }

    /// [`Worker::run_until_stopped`], handing each sweep's report to `each`.
    pub async fn run_reporting(&self, mut each: impl FnMut(&SweepReport)) {
        let mut idle_sweeps = 0;
        while !self.stopping.get() {
            let idle = match self.sweep().await {
                Ok(report) => {
                    each(&report);
                    report.idle()
                }
                Err(_) => false,
            };
            idle_sweeps = if idle { idle_sweeps + 1 } else { 0 };
            self.sleep_unless_stopped(self.pause_ms(idle_sweeps)).await;
        }
    }

    /// The pause after a sweep that ended `idle_sweeps` idle sweeps in a row
    /// ([`SweepReport::idle`]): `poll_ms`, doubled for each, up to 8 x `poll_ms` and no more
    /// than [`IDLE_PAUSE_CAP_MS`] (a poll interval longer than that is never stretched). A
    /// fleet of fast pollers then stops hammering the store over runs that wait on someone
    /// else, and any sweep with work resets it: a resolution is picked up within the cap.
    pub fn pause_ms(&self, idle_sweeps: u32) -> u64 {
        pause_ms(self.opts.poll_ms, idle_sweeps)
    }

    /// Stop: from now on nothing is acquired, and every active run is cancelled. Await
    /// [`Worker::stopped`] for the sweep and the runs to finish.
    pub fn stop(&self) {
        self.stopping.set(true);
        for token in self.active.borrow().values() {
            token.cancel("worker stopping");
        }
        for waker in self.stop_wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    /// Wait until no sweep is in flight and no run is active.
    pub async fn stopped(&self) {
        while self.sweeping.get() || !self.active.borrow().is_empty() {
            self.engine.env().sleep(1).await;
        }
    }

    /// One sweep (contracts 3.8). Never overlaps another: a sweep while one is in flight returns
    /// an empty report marked `overlapped`. A stopping worker returns an empty report at once.
    /// The only error is a failed listing.
    pub async fn sweep(&self) -> EngineResult<SweepReport> {
        if self.stopping.get() {
            return Ok(SweepReport::default());
        }
        if self.sweeping.replace(true) {
            return Ok(SweepReport { overlapped: true, ..SweepReport::default() });
        }
        let _sweeping = Flag(&self.sweeping);
        let filter = match self.opts.retention {
            Some(_) => RunFilter::all(),
            None => RunFilter::statuses(&[RunStatus::Running, RunStatus::Suspended]),
        };
        let store = self.engine.store();
        let rows = self.engine.retry_busy(|| store.list_runs(&filter)).await.map_err(EngineError::Store)?;
        let now = self.engine.env().now_ms();
        let mut candidates = VecDeque::new();
        let mut doomed = Vec::new();
        for row in rows {
            match self.opts.retention {
                Some(policy) if policy.selects_planted(&row, now, self.engine.options().defects) => doomed.push(row),
                // The listing may over-return by status: candidacy is checked per row.
                _ if !row.status.is_terminal() => candidates.push_back(row),
                _ => {}
            }
        }

        let report = RefCell::new(SweepReport::default());
        {
            let queue = RefCell::new(candidates);
            let slots = (self.opts.concurrency as usize).min(queue.borrow().len());
            let mut lanes: Vec<LocalFuture<'_, ()>> =
                (0..slots).map(|_| Box::pin(self.slot(&queue, &report)) as LocalFuture<'_, ()>).collect();
            if !doomed.is_empty() {
                lanes.push(Box::pin(self.retain_all(doomed, &report)));
            }
            let mut lanes = pin!(join_all(lanes));
            // A crash in one lane kills the process: the other lanes are dropped where they stand.
            poll_fn(|cx| match lanes.as_mut().poll(cx) {
                Poll::Ready(_) => Poll::Ready(()),
                Poll::Pending if self.crashed.get() => Poll::Ready(()),
                Poll::Pending => Poll::Pending,
            })
            .await;
            // Every listed candidate was considered, unless the process died mid-sweep.
            assert!(
                self.crashed.get() || queue.borrow().is_empty(),
                "a sweep ended with {} candidates never considered",
                queue.borrow().len()
            );
        }
        Ok(report.into_inner())
    }

    /// One slot: take candidates off the queue until it is empty (or the process died).
    async fn slot(&self, queue: &RefCell<VecDeque<RunMeta>>, report: &RefCell<SweepReport>) {
        while !self.crashed.get() {
            let Some(row) = queue.borrow_mut().pop_front() else { return };
            self.consider(row, report).await;
        }
    }

    /// One listed row: re-check candidacy (a suspended run that has not moved since it parked,
    /// on an unleased read of its journal), lease, read, check, drive, release.
    async fn consider(&self, row: RunMeta, report: &RefCell<SweepReport>) {
        let run = row.run_id.clone();
        let skip = |reason: Skip| self.skipped(report, &run, reason);
        if let Some(reason) = self.unleased_skip(&row).await {
            return skip(reason);
        }
        let lease = match self.engine.acquire(&run, &self.opts.owner).await {
            Ok(lease) => lease,
            Err(e) => return skip(acquire_skip(&e)),
        };
        let token = CancelToken::new();
        let _active = Active::enter(&self.active, &run, token.clone());
        let release = |reason: Skip| {
            self.engine.release_quietly(&lease);
            skip(reason);
        };
        if self.stopping.get() {
            return release(skip::STOPPING);
        }
        // Leased first, then read (contracts 3.7): the snapshot cannot go stale under the lease.
        let (meta, journal) = match self.engine.read(&run).await {
            Ok(read) => read,
            Err(_) => return release(skip::READ_FAILED),
        };
        let Some(meta) = meta else { return release(skip::GONE) };
        let checked = if self.engine.has(EngineDefect::CandidacyByListedStatus) { &row } else { &meta };
        if checked.status.is_terminal() {
            return release(skip::SETTLED);
        }
        let genesis = meta.genesis.clone();
        if self.is_poisoned(&run, genesis.as_deref()) {
            return release(skip::POISONED);
        }
        let workflow = meta.extra.get("workflow").and_then(Value::as_str).and_then(|name| self.workflows.get(name));
        let Some(workflow) = workflow else {
            self.engine.release_quietly(&lease);
            self.poison(&run, genesis, report);
            return;
        };
        if meta.status == RunStatus::Suspended && self.unchanged_since_settle(&meta, journal.len()) {
            return release(skip::SUSPENDED_UNCHANGED);
        }
        if self.stopping.get() {
            return release(skip::STOPPING);
        }

        // The candidacy read happened under this lease: the segment starts from it.
        let length = journal.len();
        let opts = RunOptions {
            lease: Some(lease.clone()),
            cancel: Some(token.clone()),
            snapshot: Some((Some(meta), journal)),
            ..RunOptions::default()
        };
        let body = self.engine.resume(&run, workflow, opts);
        let result = with_keeper(body, self.keep(&lease, &token, report)).await;
        if self.driven(&run, genesis, length, &result, report) {
            self.engine.release_quietly(&lease);
        }
        report.borrow_mut().driven.push((run, result));
    }

    /// Why a listed row is skipped before any lease is taken, if it is.
    async fn unleased_skip(&self, row: &RunMeta) -> Option<Skip> {
        let run = &row.run_id;
        // D16: nothing is leased once stop() was called, even mid-sweep.
        if self.stopping.get() {
            Some(skip::STOPPING)
        } else if row.status.is_terminal() {
            Some(skip::SETTLED)
        } else if self.active.borrow().contains_key(run) || self.engine.is_live(run) {
            Some(skip::ACTIVE)
        } else if self.is_poisoned(run, row.genesis.as_deref()) {
            Some(skip::POISONED)
        } else if row.status == RunStatus::Suspended && self.unchanged_unleased(row).await {
            Some(skip::SUSPENDED_UNCHANGED)
        } else {
            None
        }
    }

    /// Take note of a driven segment's result (a run left suspended at `length` entries plus what
    /// it appended, a binding to poison, a crash); whether the lease is still this process's to
    /// release (a dead process releases nothing).
    fn driven(
        &self,
        run: &RunId,
        genesis: Option<String>,
        length: usize,
        result: &EngineResult<Outcome>,
        report: &RefCell<SweepReport>,
    ) -> bool {
        match result {
            Err(EngineError::Crashed) => {
                self.crash();
                return false;
            }
            Ok(outcome) if outcome.status == RunStatus::Suspended => {
                // The cache below is keyed by the run the segment drove.
                assert_eq!(outcome.run, *run, "a driven segment reported another run");
                self.engine.env().probe(probe::DRIVEN_SUSPENDED);
                // Still under the lease: the journal is what was read plus what the segment added.
                let length = length + outcome.appended as usize;
                self.settled_suspended.borrow_mut().insert(run.clone(), (length, genesis));
            }
            Ok(_) => {
                self.settled_suspended.borrow_mut().remove(run);
            }
            Err(EngineError::Binding(_)) => self.poison(run, genesis, report),
            Err(_) => {}
        }
        true
    }

    /// The renew loop of a driven run: the engine's, reporting a loss (contracts 3.8).
    async fn keep(&self, lease: &Lease, token: &CancelToken, report: &RefCell<SweepReport>) {
        if self.engine.store().leases().is_some() {
            self.engine.keep(lease, token, self.renew_every_ms, "lease lost").await;
            self.engine.env().probe(probe::LEASE_LOST);
            report.borrow_mut().lease_lost.push(lease.run.clone());
        }
    }

    /// Whether a suspended run has not moved since it last parked: its journal is as long as
    /// when this worker settled it, with the same genesis (the `skip-cache-by-length` defect,
    /// D18, compares the length alone), or as long as its meta says it was when whoever settled
    /// it last did ([`entries::SUSPENDED_AT`]).
    fn unchanged_since_settle(&self, meta: &RunMeta, length: usize) -> bool {
        let by_length_only = self.engine.has(EngineDefect::SkipCacheByLength);
        let mine = self
            .settled_suspended
            .borrow()
            .get(&meta.run_id)
            .is_some_and(|(len, gen_then)| *len == length && (by_length_only || *gen_then == meta.genesis));
        mine || entries::suspended_at(meta) == Some(length)
    }

    /// Whether a listed suspended run still looks unchanged through an unleased read of its
    /// journal. Such a read only ever decides *not* to lease the run now; every decision to
    /// drive it is made again under the lease (contracts 3.7). Without it, every worker leased,
    /// read and released every waiting run at every poll: a fleet of pollers churned a waiting
    /// run's epoch thousands of times a minute. A failed read decides nothing.
    async fn unchanged_unleased(&self, row: &RunMeta) -> bool {
        if entries::suspended_at(row).is_none() && !self.settled_suspended.borrow().contains_key(&row.run_id) {
            return false;
        }
        let store = self.engine.store();
        match self.engine.retry_busy(|| store.load(&row.run_id)).await {
            Ok(journal) => self.unchanged_since_settle(row, journal.len()),
            Err(_) => false,
        }
    }

    fn poison(&self, run: &RunId, genesis: Option<String>, report: &RefCell<SweepReport>) {
        self.engine.env().probe(probe::POISONED);
        self.poisoned.borrow_mut().insert((run.clone(), genesis));
        report.borrow_mut().poisoned.push(run.clone());
    }

    /// Retention over the selected terminal rows, one at a time, beside the slots.
    async fn retain_all(&self, rows: Vec<RunMeta>, report: &RefCell<SweepReport>) {
        for row in rows {
            if self.crashed.get() {
                return;
            }
            self.retain(row.run_id, report).await;
        }
    }

    /// Delete one terminal run under a brief lease (contracts 3.8, D4): acquire, re-check the
    /// policy on the leased meta, run the cascade with the lease, release quietly (the store's
    /// delete normally removed the row already).
    async fn retain(&self, run: RunId, report: &RefCell<SweepReport>) {
        let skip = |reason: Skip| self.skipped(report, &run, reason);
        if self.stopping.get() {
            return skip(skip::STOPPING);
        }
        if self.active.borrow().contains_key(&run) || self.engine.is_live(&run) {
            return skip(skip::ACTIVE);
        }
        let lease = match self.engine.acquire(&run, &self.opts.owner).await {
            Ok(lease) => lease,
            Err(e) => return skip(acquire_skip(&e)),
        };
        let release = |reason: Skip| {
            self.engine.release_quietly(&lease);
            skip(reason);
        };
        if self.stopping.get() {
            return release(skip::STOPPING);
        }
        let store = self.engine.store();
        let meta = match self.engine.retry_busy(|| store.get_meta(&run)).await {
            Ok(Some(meta)) => meta,
            Ok(None) => return release(skip::GONE),
            Err(_) => return release(skip::READ_FAILED),
        };
        let defects = self.engine.options().defects;
        let selected = self
            .opts
            .retention
            .is_some_and(|policy| policy.selects_planted(&meta, self.engine.env().now_ms(), defects));
        if !selected {
            return release(skip::KEPT);
        }
        let fence = if self.engine.has(EngineDefect::RetentionWithoutLease) { None } else { Some(&lease) };
        match self.engine.delete_run(&run, fence).await {
            Ok(()) => {
                self.engine.env().probe(probe::RETENTION_DELETED);
                report.borrow_mut().retained.push(run.clone());
            }
            Err(EngineError::Crashed) => return self.crash(),
            Err(e) => {
                self.engine.env().probe(probe::RETENTION_FAILED);
                report.borrow_mut().retention_failed.push((run.clone(), e));
            }
        }
        self.engine.release_quietly(&lease);
    }

    /// A listed run left alone, and why.
    fn skipped(&self, report: &RefCell<SweepReport>, run: &RunId, reason: Skip) {
        self.engine.env().probe(reason.probe());
        report.borrow_mut().skipped.push((run.clone(), reason));
    }

    /// The process died at a fault point: stop for good, write and release nothing more.
    fn crash(&self) {
        self.crashed.set(true);
        self.stopping.set(true);
        for waker in self.stop_wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    /// Sleep `ms`, or less if the worker stops meanwhile.
    pub async fn sleep_unless_stopped(&self, ms: u64) {
        let mut sleep = pin!(self.engine.env().sleep(ms));
        poll_fn(|cx| {
            if self.stopping.get() || sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut wakers = self.stop_wakers.borrow_mut();
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
    }
}

/// Why a refused acquire leaves the run alone.
fn acquire_skip(e: &EngineError) -> Skip {
    match e {
        EngineError::LeaseHeld(_) => skip::LEASE_HELD,
        EngineError::Store(e) if e.is_busy() => skip::BUSY,
        _ => skip::ACQUIRE_FAILED,
    }
}

/// Clears a flag when dropped: a sweep ends however it ends.
struct Flag<'a>(&'a Cell<bool>);

impl Drop for Flag<'_> {
    fn drop(&mut self) {
        // One sweep at a time: the flag is raised by the sweep it guards and lowered only here.
        let was = self.0.replace(false);
        assert!(was || std::thread::panicking(), "a sweep ended that was never marked as running");
    }
}

/// A run in the worker's active set for as long as this guard lives.
struct Active<'a> {
    set: &'a RefCell<BTreeMap<RunId, CancelToken>>,
    run: RunId,
}

impl<'a> Active<'a> {
    fn enter(set: &'a RefCell<BTreeMap<RunId, CancelToken>>, run: &RunId, token: CancelToken) -> Self {
        set.borrow_mut().insert(run.clone(), token);
        Self { set, run: run.clone() }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.set.borrow_mut().remove(&self.run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_sweeps_double_the_pause_up_to_eight_polls_or_the_cap() {
        let pauses: Vec<u64> = (0..6).map(|n| pause_ms(50, n)).collect();
        assert_eq!(pauses, [50, 100, 200, 400, 400, 400]);
        assert_eq!(pause_ms(200, 5), 1_000, "capped");
        assert_eq!(pause_ms(1_500, 5), 1_500, "a slow poll is never stretched");
        assert_eq!(pause_ms(u32::MAX, 40), u64::from(u32::MAX));
    }

    #[test]
    fn only_a_sweep_with_nothing_to_do_is_idle() {
        let run = RunId::new("r");
        let skipped = |why| SweepReport { skipped: vec![(run.clone(), why)], ..SweepReport::default() };
        assert!(SweepReport::default().idle());
        assert!(skipped(skip::SUSPENDED_UNCHANGED).idle());
        assert!(skipped(skip::POISONED).idle());
        for deferred in [skip::LEASE_HELD, skip::STOPPING, skip::READ_FAILED, skip::ACTIVE] {
            assert!(!skipped(deferred).idle(), "{deferred}");
        }
        assert!(!SweepReport { poisoned: vec![run.clone()], ..SweepReport::default() }.idle());
        assert!(!SweepReport { retained: vec![run.clone()], ..SweepReport::default() }.idle());
        assert!(!SweepReport { lease_lost: vec![run], ..SweepReport::default() }.idle());
        assert!(!SweepReport { overlapped: true, ..SweepReport::default() }.idle());
    }
}
