//! The engine: ownership (acquire before the first write, renew every ttl/3, any renew failure is
//! lease loss), `run` / `resume` (contracts 3.1-3.7), offline resolution (3.3) and the delete and
//! prune cascades (3.9). The durable-write path lives in `core.rs`, one segment's body and settle in
//! `segment.rs`, the options in `options.rs`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::ops::Deref;
use std::rc::Rc;

use fencesim_store::{JournalEntry, Lease, RunId, RunMeta, Seq, Store};
use serde_json::Value;

use crate::core::Core;
use crate::defects::EngineDefect;
use crate::entries::{self, kind};
use crate::env::{Env, Fault, Point, Site, Write};
use crate::error::{EngineError, EngineResult, lease_or_store};
use crate::ledger::Ledger;
use crate::options::{CancelToken, EngineOptions, Outcome, Ownership, RunOptions};
use crate::race::with_keeper;
use crate::segment::Segment;
use crate::workflow::Workflow;

/// The durable-run engine over one store connection. Its [`Core`] (store, env, ledger, options and
/// the durable-write path) is shared with every segment it drives.
pub struct Engine<E: Env> {
    core: Core<E>,
    active: RefCell<BTreeSet<RunId>>,
    next_owner: Cell<u64>,
}

/// A segment's ownership of its run: the lease it holds, if any, and whether the engine acquired
/// it itself (then it keeps the lease alive and releases it).
struct Owned {
    lease: Option<Lease>,
    auto: bool,
}

impl<E: Env> Deref for Engine<E> {
    type Target = Core<E>;

    fn deref(&self) -> &Core<E> {
        &self.core
    }
}

impl<E: Env> Engine<E> {
    /// An engine over `store`; invalid ttl or renew cadence is a config error here.
    pub fn new(store: Rc<dyn Store>, env: E, ledger: Ledger, opts: EngineOptions) -> EngineResult<Self> {
        Ok(Self {
            core: Core::new(store, env, ledger, opts)?,
            active: RefCell::new(BTreeSet::new()),
            next_owner: Cell::new(0),
        })
    }

    /// Whether a segment of `run` is live in this engine right now (contracts 3.1).
    pub fn is_live(&self, run: &RunId) -> bool {
        self.active.borrow().contains(run)
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
        let active = if self.has(EngineDefect::SecondLiveSegment) {
            None
        } else {
            if !self.active.borrow_mut().insert(run.clone()) {
                return Err(EngineError::SegmentLive(run.clone()));
            }
            Some(ActiveGuard { set: &self.active, run })
        };

        // E7: own first, then read. The defect reads first (contracts 3.7).
        let early = if !fresh && self.has(EngineDefect::ReadBeforeOwn) { Some(self.read(run).await?) } else { None };
        let owned = self.own(run, &opts, fresh).await?;
        let supplied = opts.snapshot.take().filter(|_| opts.lease.is_some());
        let snapshot = match early.or(supplied) {
            Some(snapshot) => Ok(snapshot),
            None => self.read(run).await,
        };
        let result = match snapshot {
            Ok((meta, journal)) if fresh && (meta.is_some() || !journal.is_empty()) => {
                Err(EngineError::Config(format!("run {run} already exists; resume it instead")))
            }
            Ok(snapshot) => self.drive(run, workflow, snapshot, &opts, fresh, &owned).await,
            Err(e) => Err(e),
        };
        // A settled outcome is this run's, of a counted segment (E1).
        assert!(
            result.as_ref().is_ok_and(|o| o.run == *run && o.segment > 0) || result.is_err(),
            "run {run}: a segment reported another run's outcome"
        );
        // E1: the run stayed in the live set for the whole segment (only its guard removes it).
        assert!(active.is_none() || self.is_live(run), "run {run} left the live set while its segment ran");
        // Release strictly after the last durable write; a dead process releases nothing.
        if owned.auto
            && !matches!(result, Err(EngineError::Crashed))
            && let Some(lease) = &owned.lease
        {
            self.release_quietly(lease);
        }
        result
    }

    /// A segment's ownership (E7: own first, then read): the crash points before and after it,
    /// and the lease it holds: the one supplied, or one the engine acquires itself (`auto`) when
    /// it owns runs and the store has leases.
    async fn own(&self, run: &RunId, opts: &RunOptions, fresh: bool) -> EngineResult<Owned> {
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
        Ok(Owned { lease, auto })
    }

    /// Drive `workflow` over the snapshot read under the segment's lease, under the engine's
    /// renew loop when it took the lease itself (`auto`).
    async fn drive(
        &self,
        run: &RunId,
        workflow: &Workflow,
        (meta, journal): (Option<RunMeta>, Vec<JournalEntry>),
        opts: &RunOptions,
        fresh: bool,
        owned: &Owned,
    ) -> EngineResult<Outcome> {
        let cancel = opts.cancel.clone().unwrap_or_default();
        let segment = Segment::new(&self.core, run, owned.lease.clone(), cancel.clone(), journal);
        let body = segment.drive(workflow, meta, opts, fresh);
        match (&owned.lease, owned.auto) {
            (Some(lease), true) => {
                with_keeper(body, self.keep(lease, &cancel, self.renew_every_ms, "ownership lost")).await
            }
            _ => body.await,
        }
    }

    /// A renew loop: renew every `every_ms`; any failure is lease loss (contracts 3.2, 3.8), which
    /// cancels the segment and ends the loop. It returns only then.
    pub(crate) async fn keep(&self, lease: &Lease, cancel: &CancelToken, every_ms: u32, loss: &str) {
        let Some(leases) = self.store.leases() else { return };
        // Validated cadences are at least 1 ms: a loop that never sleeps would starve the body.
        assert!(every_ms > 0, "run {}: a renew loop with no pause", lease.run);
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
        // The writer and every reader's fold agree: this entry closes the suspension at `target`.
        assert_eq!(entries::resolution_target(&entry), Some(target), "run {run}: a resolution that closes nothing");
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

/// Removes a run from the engine's live set when its segment ends, however it ends.
struct ActiveGuard<'a> {
    set: &'a RefCell<BTreeSet<RunId>>,
    run: &'a RunId,
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        let removed = self.set.borrow_mut().remove(self.run);
        // E1: the guard is made only once its run entered the live set, and only it removes it.
        assert!(removed || std::thread::panicking(), "run {} left the live set before its segment ended", self.run);
    }
}
