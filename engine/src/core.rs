//! What every durable step of the engine shares: the store connection, the env, the ledger, the
//! options with the ttl and renew cadence they resolved to, and the one path of every store call
//! (busy retried in the env's time) and every durable write (fault points around it). The engine
//! (`engine.rs`) and a segment's body (`segment.rs`) both stand on it; neither knows the other's
//! insides.

use std::cell::Cell;
use std::rc::Rc;

use fencesim_store::{
    Epoch, JournalEntry, LEASE_TTL_MS_DEFAULT, LeasableStore, Lease, RunId, RunMeta, Store, StoreResult,
};

use crate::defects::EngineDefect;
use crate::env::{Env, Fault, Phase, Point, Site, Write};
use crate::error::{EngineError, EngineResult};
use crate::ledger::Ledger;
use crate::options::{BUSY_RETRIES, EngineOptions, renew_cadence, validate_timer};

pub struct Core<E: Env> {
    pub(crate) store: Rc<dyn Store>,
    pub(crate) env: E,
    ledger: Ledger,
    pub(crate) opts: EngineOptions,
    ttl_ms: u32,
    pub(crate) renew_every_ms: u32,
    next_genesis: Cell<u64>,
}

impl<E: Env> Core<E> {
    /// The shared core over `store`; invalid ttl, renew cadence or owner is a config error here.
    pub(crate) fn new(store: Rc<dyn Store>, env: E, ledger: Ledger, opts: EngineOptions) -> EngineResult<Self> {
        let ttl_ms = store.leases().map_or(LEASE_TTL_MS_DEFAULT, LeasableStore::lease_ttl_ms);
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
        Ok(Self { store, env, ledger, opts, ttl_ms, renew_every_ms, next_genesis: Cell::new(0) })
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

    pub(crate) fn has(&self, defect: EngineDefect) -> bool {
        self.opts.defects.has(defect)
    }

    pub(crate) fn next_genesis(&self) -> u64 {
        let n = self.next_genesis.get() + 1;
        self.next_genesis.set(n);
        n
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
        // A write's fault point names the epoch of the lease the write carries.
        assert!(
            lease.is_none_or(|l| epoch == Some(l.epoch)),
            "run {run}: a write under {lease:?} reported at epoch {epoch:?}"
        );
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
}
