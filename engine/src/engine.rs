//! The engine: options, ownership (acquire before the first write, renew every ttl/3, any renew
//! failure is lease loss), the single durable-write path with its fault points and busy retry,
//! `run` / `resume` (contracts 3.1-3.7), offline resolution (3.3) and the delete and prune
//! cascades (3.9). One segment's body and settle live in `segment.rs`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;

use fencesim_store::{
    Epoch, JournalEntry, LeasableStore, Lease, RunId, RunMeta, RunStatus, Seq, Store, StoreError, StoreResult,
};
use serde_json::Value;

use crate::defects::{EngineDefect, EngineDefects};
use crate::entries::{self, kind};
use crate::env::{Env, Fault, Phase, Point, Site, Write};
use crate::error::{EngineError, EngineResult};
use crate::ledger::Ledger;
use crate::race::with_keeper;
use crate::segment::Segment;
use crate::workflow::Workflow;

/// The reference's fallback ttl when a store does not expose one (contracts 7).
pub const DEFAULT_TTL_MS: u32 = 60_000;
/// The largest valid ttl or timer, in ms.
pub const MAX_TIMER_MS: u32 = 2_147_483_647;
/// Busy retries of one store call before the busy error is the call's answer.
pub const BUSY_RETRIES: u32 = 8;

/// The renew cadence for a ttl: `floor(ttl / 3)`, at least 1 ms (contracts 3.2).
pub fn renew_cadence(ttl_ms: u32) -> u32 {
    (ttl_ms / 3).max(1)
}

/// Check a ttl or timer option: an integer in `1..=2147483647` ms.
pub fn validate_timer(what: &str, ms: u32) -> EngineResult<()> {
    if (1..=MAX_TIMER_MS).contains(&ms) {
        Ok(())
    } else {
        Err(EngineError::Config(format!("{what} must be an integer in 1..={MAX_TIMER_MS} ms, got {ms}")))
    }
}

/// Whether a segment acquires its own lease when the caller supplies none (contracts 3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ownership {
    #[default]
    Auto,
    None,
}

#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Owner prefix; each auto-owned segment acquires as `<owner>:<n>`.
    pub owner: String,
    pub ownership: Ownership,
    /// Renew cadence under auto ownership; default `floor(ttl / 3)`. Must be below the ttl.
    pub renew_every_ms: Option<u32>,
    /// How long one paid model call takes, in the env's time.
    pub call_ms: u32,
    /// How long one tool execution takes.
    pub tool_ms: u32,
    pub defects: EngineDefects,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            owner: "engine".into(),
            ownership: Ownership::Auto,
            renew_every_ms: None,
            call_ms: 20,
            tool_ms: 5,
            defects: EngineDefects::NONE,
        }
    }
}

/// Cancels a segment from outside (a host, a worker whose renew failed). Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Rc<RefCell<Option<String>>>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// Request cancellation; the first reason wins.
    pub fn cancel(&self, reason: impl Into<String>) {
        let mut slot = self.0.borrow_mut();
        if slot.is_none() {
            *slot = Some(reason.into());
        }
    }

    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.borrow().is_some()
    }
}

/// Per-segment options.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// A caller-supplied lease: the engine never acquires, renews or releases it.
    pub lease: Option<Lease>,
    pub cancel: Option<CancelToken>,
    /// Genesis token of a fresh run; minted deterministically when absent.
    pub genesis: Option<String>,
    pub name: Option<String>,
    /// Meta and journal the caller read under the supplied `lease`, after acquiring it (a
    /// worker's candidacy check): the segment starts from them instead of reading again. Ignored
    /// without a supplied lease, where the engine must own before it reads (contracts 3.7).
    pub snapshot: Option<(Option<RunMeta>, Vec<JournalEntry>)>,
}

/// A durably settled segment.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub run: RunId,
    pub status: RunStatus,
    pub value: Value,
    /// This segment's number (segments before + 1).
    pub segment: u32,
    /// Entries this segment appended.
    pub appended: u32,
}

/// The durable-run engine over one store connection.
pub struct Engine<E: Env> {
    store: Rc<dyn Store>,
    env: E,
    ledger: Ledger,
    opts: EngineOptions,
    ttl_ms: u32,
    renew_every_ms: u32,
    active: RefCell<BTreeSet<RunId>>,
    next_owner: Cell<u64>,
    next_genesis: Cell<u64>,
}

impl<E: Env> Engine<E> {
    /// An engine over `store`; invalid ttl or renew cadence is a config error here.
    pub fn new(store: Rc<dyn Store>, env: E, ledger: Ledger, opts: EngineOptions) -> EngineResult<Self> {
        let ttl_ms = store.leases().map_or(DEFAULT_TTL_MS, LeasableStore::lease_ttl_ms);
        validate_timer("lease ttl", ttl_ms)?;
        let renew_every_ms = opts.renew_every_ms.unwrap_or_else(|| renew_cadence(ttl_ms));
        validate_timer("renew cadence", renew_every_ms)?;
        if renew_every_ms >= ttl_ms {
            return Err(EngineError::Config(format!(
                "renew cadence {renew_every_ms} ms must be below the lease ttl {ttl_ms} ms"
            )));
        }
        if opts.owner.is_empty() {
            return Err(EngineError::Config("engine owner must not be empty".into()));
        }
        Ok(Self {
            store,
            env,
            ledger,
            opts,
            ttl_ms,
            renew_every_ms,
            active: RefCell::new(BTreeSet::new()),
            next_owner: Cell::new(0),
            next_genesis: Cell::new(0),
        })
    }

    pub fn store(&self) -> &Rc<dyn Store> {
        &self.store
    }

    pub fn env(&self) -> &E {
        &self.env
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    pub fn ttl_ms(&self) -> u32 {
        self.ttl_ms
    }

    pub fn renew_every_ms(&self) -> u32 {
        self.renew_every_ms
    }

    /// Whether a segment of `run` is live in this engine right now (contracts 3.1).
    pub fn is_live(&self, run: &RunId) -> bool {
        self.active.borrow().contains(run)
    }

    pub(crate) fn has(&self, defect: EngineDefect) -> bool {
        self.opts.defects.has(defect)
    }

    /// Start a fresh run: segment 1 of a run that must not exist yet.
    pub async fn run(&self, run: &RunId, workflow: &Workflow, opts: RunOptions) -> EngineResult<Outcome> {
        self.segment(run, workflow, opts, true).await
    }

    /// Resume a run: a new segment that replays the journal and redispatches dangling entries.
    pub async fn resume(&self, run: &RunId, workflow: &Workflow, opts: RunOptions) -> EngineResult<Outcome> {
        self.segment(run, workflow, opts, false).await
    }

    async fn segment(
        &self,
        run: &RunId,
        workflow: &Workflow,
        mut opts: RunOptions,
        fresh: bool,
    ) -> EngineResult<Outcome> {
        if let Some(lease) = &opts.lease
            && &lease.run != run
        {
            return Err(EngineError::Config(format!("the supplied lease guards run {}, not run {run}", lease.run)));
        }
        // E1 / D10: one live segment per run in this engine.
        let _active = if self.has(EngineDefect::SecondLiveSegment) {
            None
        } else {
            if !self.active.borrow_mut().insert(run.clone()) {
                return Err(EngineError::SegmentLive(run.clone()));
            }
            Some(ActiveGuard { set: &self.active, run })
        };

        // E7: own first, then read. The defect reads first (contracts 3.7).
        let early = if !fresh && self.has(EngineDefect::ReadBeforeOwn) { Some(self.read(run).await?) } else { None };
        if self.env.fault(&Point { run, epoch: None, site: Site::Acquiring }).await == Fault::Crash {
            return Err(EngineError::Crashed);
        }
        let skip_acquire = fresh && self.has(EngineDefect::FreshRunUnleased);
        let (lease, auto) = match &opts.lease {
            Some(lease) => (Some(lease.clone()), false),
            None if self.opts.ownership == Ownership::Auto && !skip_acquire && self.store.leases().is_some() => {
                (Some(self.acquire(run, &self.next_owner_name()).await?), true)
            }
            None => (None, false),
        };
        let epoch = lease.as_ref().map(|l| l.epoch);
        if self.env.fault(&Point { run, epoch, site: Site::Owned }).await == Fault::Crash {
            return Err(EngineError::Crashed);
        }
        let supplied = opts.snapshot.take().filter(|_| opts.lease.is_some());
        let snapshot = match early.or(supplied) {
            Some(snapshot) => Ok(snapshot),
            None => self.read(run).await,
        };
        let result = match snapshot {
            Ok((meta, journal)) if fresh && (meta.is_some() || !journal.is_empty()) => {
                Err(EngineError::Config(format!("run {run} already exists; resume it instead")))
            }
            Ok((meta, journal)) => {
                let cancel = opts.cancel.clone().unwrap_or_default();
                let segment = Segment::new(self, run, lease.clone(), cancel.clone(), journal);
                let body = segment.drive(workflow, meta, &opts, fresh);
                match (&lease, auto) {
                    (Some(lease), true) => {
                        with_keeper(body, self.keep(lease, &cancel, self.renew_every_ms, "ownership lost")).await
                    }
                    _ => body.await,
                }
            }
            Err(e) => Err(e),
        };
        // Release strictly after the last durable write; a dead process releases nothing.
        if auto
            && !matches!(result, Err(EngineError::Crashed))
            && let Some(lease) = &lease
        {
            self.release_quietly(lease);
        }
        result
    }

    /// A renew loop: renew every `every_ms`; any failure is lease loss (contracts 3.2, 3.8), which
    /// cancels the segment and ends the loop. It returns only then.
    pub(crate) async fn keep(&self, lease: &Lease, cancel: &CancelToken, every_ms: u32, loss: &str) {
        let Some(leases) = self.store.leases() else { return };
        loop {
            self.env.sleep(u64::from(every_ms)).await;
            if let Err(e) = leases.renew(lease) {
                if self.has(EngineDefect::RenewFailureIgnored) {
                    continue;
                }
                cancel.cancel(format!("{loss}: renew failed at epoch {}: {e}", lease.epoch));
                return;
            }
        }
    }

    pub(crate) fn next_genesis(&self) -> u64 {
        let n = self.next_genesis.get() + 1;
        self.next_genesis.set(n);
        n
    }

    fn next_owner_name(&self) -> String {
        let n = self.next_owner.get() + 1;
        self.next_owner.set(n);
        format!("{}:{n}", self.opts.owner)
    }

    /// Acquire the run's lease; a live holder is [`EngineError::LeaseHeld`].
    pub async fn acquire(&self, run: &RunId, owner: &str) -> EngineResult<Lease> {
        let leases = self.store.leases().ok_or_else(|| EngineError::Config("the store has no leases".into()))?;
        self.retry_busy(|| leases.acquire(run, owner)).await.map_err(lease_or_store)
    }

    /// Release, ignoring every error (the store's delete may already have removed the row).
    pub fn release_quietly(&self, lease: &Lease) {
        if let Some(leases) = self.store.leases() {
            let _ = leases.release(lease);
        }
    }

    pub(crate) async fn read(&self, run: &RunId) -> EngineResult<(Option<RunMeta>, Vec<JournalEntry>)> {
        let meta = self.retry_busy(|| self.store.get_meta(run)).await.map_err(EngineError::Store)?;
        let journal = self.retry_busy(|| self.store.load(run)).await.map_err(EngineError::Store)?;
        Ok((meta, journal))
    }

    /// Retry a store call on busy with a fixed backoff schedule in the env's time.
    pub(crate) async fn retry_busy<T>(&self, mut call: impl FnMut() -> StoreResult<T>) -> StoreResult<T> {
        let mut attempt = 0;
        loop {
            match call() {
                Err(e) if e.is_busy() && attempt < BUSY_RETRIES => {
                    self.env.sleep(1 << attempt.min(4)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The one path of every durable write: fault point before, the store call (busy retried),
    /// fault point after. The outer error is only [`EngineError::Crashed`]; the inner result is
    /// the store's answer for the caller to match.
    pub(crate) async fn write(
        &self,
        run: &RunId,
        epoch: Option<Epoch>,
        counter: &Cell<u32>,
        write: Write<'_>,
        lease: Option<&Lease>,
    ) -> EngineResult<StoreResult<()>> {
        let index = counter.get();
        counter.set(index + 1);
        let point = |phase| Point { run, epoch, site: Site::Write { index, phase, write } };
        let mut result = match self.env.fault(&point(Phase::Before)).await {
            Fault::Crash => return Err(EngineError::Crashed),
            Fault::Fail(e) if e.is_busy() => self.retry_busy(|| self.store_call(run, write, lease)).await,
            Fault::Fail(e) => Err(e),
            Fault::Continue => self.retry_busy(|| self.store_call(run, write, lease)).await,
        };
        match self.env.fault(&point(Phase::After)).await {
            Fault::Crash => return Err(EngineError::Crashed),
            Fault::Fail(e) if result.is_ok() => result = Err(e),
            _ => {}
        }
        Ok(result)
    }

    fn store_call(&self, run: &RunId, write: Write<'_>, lease: Option<&Lease>) -> StoreResult<()> {
        match write {
            Write::Append(entry) => self.store.append(run, entry, lease),
            Write::PutMeta(meta) => self.store.put_meta(meta, lease),
            Write::PutBlob { blob_ref, bytes } => self.store.put_blob(blob_ref, bytes, lease),
            Write::DeleteBlob(blob_ref) => self.store.delete_blob(blob_ref, lease),
            Write::DeleteRun => self.store.delete(run, lease),
        }
    }

    /// Offline resolution (contracts 3.3, D11): under a brief lease when the store has leases,
    /// append a resolution closing the suspension at `target`, then release. Returns its seq.
    pub async fn resolve(&self, run: &RunId, target: Seq, value: Value, owner: &str) -> EngineResult<Seq> {
        let lease = match self.store.leases() {
            Some(_) => Some(self.acquire(run, owner).await?),
            None => None,
        };
        let result = self.resolve_under(run, target, value, lease.as_ref()).await;
        if let Some(lease) = &lease
            && !matches!(result, Err(EngineError::Crashed))
        {
            self.release_quietly(lease);
        }
        result
    }

    async fn resolve_under(&self, run: &RunId, target: Seq, value: Value, lease: Option<&Lease>) -> EngineResult<Seq> {
        let (_, journal) = self.read(run).await?;
        // A journal that records a terminal settle is final (contracts 3.6): a run cancelled
        // while it waited takes no resolution.
        if let Some(settle) = entries::last_run_settle(&journal).filter(|s| s.run_status.is_terminal()) {
            return Err(EngineError::Config(format!(
                "run {run} is settled {}; it takes no resolution",
                settle.run_status
            )));
        }
        let suspended = journal.iter().any(|e| e.seq == target && e.status == entries::status::SUSPENDED);
        if !suspended {
            return Err(EngineError::Config(format!("run {run} has no suspension at seq {target}")));
        }
        let entry = entries::resolution(entries::next_seq(run, &journal).map_err(EngineError::Store)?, target, value);
        let counter = Cell::new(0);
        self.write(run, lease.map(|l| l.epoch), &counter, Write::Append(&entry), lease)
            .await?
            .map_err(lease_or_store)?;
        Ok(entry.seq)
    }

    /// Delete a run (contracts 3.9): every blob, then journal, meta and lease row, each call
    /// carrying `lease`, so a holder that lost the lease mid-cascade is refused from then on.
    pub async fn delete_run(&self, run: &RunId, lease: Option<&Lease>) -> EngineResult<()> {
        let refs = self.retry_busy(|| self.store.list_blobs(run)).await.map_err(EngineError::Store)?;
        let counter = Cell::new(0);
        let epoch = lease.map(|l| l.epoch);
        for blob_ref in &refs {
            self.write(run, epoch, &counter, Write::DeleteBlob(blob_ref), lease).await?.map_err(lease_or_store)?;
        }
        self.write(run, epoch, &counter, Write::DeleteRun, lease).await?.map_err(lease_or_store)
    }

    /// Prune a run's finished checkpoints (contracts 3.9): the checkpoint of an `ok` agent
    /// terminal whose blob exists, unless its exact ref appears in any other entry. Returns how
    /// many were deleted.
    pub async fn prune_run(&self, run: &RunId, lease: Option<&Lease>) -> EngineResult<usize> {
        let (_, journal) = self.read(run).await?;
        let values: Vec<Value> = journal.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect();
        let counter = Cell::new(0);
        let mut pruned = 0;
        for (i, entry) in journal.iter().enumerate() {
            let owned = entry.kind == kind::AGENT && entry.status == entries::status::OK && entry.ref_seq.is_some();
            let Some(blob_ref) = owned.then(|| entry.extra.get("checkpointRef").and_then(Value::as_str)).flatten()
            else {
                continue;
            };
            let referenced_elsewhere = values.iter().enumerate().any(|(j, value)| j != i && mentions(value, blob_ref));
            let exists = self.retry_busy(|| self.store.get_blob(blob_ref)).await.map_err(EngineError::Store)?.is_some();
            if referenced_elsewhere || !exists {
                continue;
            }
            let write = Write::DeleteBlob(blob_ref);
            self.write(run, lease.map(|l| l.epoch), &counter, write, lease).await?.map_err(lease_or_store)?;
            pruned += 1;
        }
        Ok(pruned)
    }
}

/// Whether `needle` is, exactly, a string value or an object key anywhere in `value`.
fn mentions(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(s) => s == needle,
        Value::Array(items) => items.iter().any(|v| mentions(v, needle)),
        Value::Object(fields) => fields.iter().any(|(k, v)| k == needle || mentions(v, needle)),
        _ => false,
    }
}

/// A lease rejection is [`EngineError::LeaseHeld`]; anything else is a store failure.
pub(crate) fn lease_or_store(e: StoreError) -> EngineError {
    if e.is_lease_held() { EngineError::LeaseHeld(e) } else { EngineError::Store(e) }
}

/// Removes a run from the engine's live set when its segment ends, however it ends.
struct ActiveGuard<'a> {
    set: &'a RefCell<BTreeSet<RunId>>,
    run: &'a RunId,
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.set.borrow_mut().remove(self.run);
    }
}
