//! The store SPI (contracts 1.6): a journal store, a leasable store and a transcript (blob) store.
//! Calls are synchronous: SQLite is, and a caller in the simulator backs off in virtual time on a
//! typed [`StoreError::Busy`] instead of blocking a thread.
//!
//! A `lease: Some(..)` argument makes a call fenced: it commits only if that lease is the live
//! holder of the call's target run, checked atomically with the mutation. `None` is the
//! single-writer escape hatch (W5, T5, J9): the caller asserts nobody else writes the run.

use crate::error::{StoreError, StoreResult};
use crate::fault::FaultHook;
use crate::types::{JournalEntry, Lease, RunFilter, RunId, RunMeta};

pub trait JournalStore {
    /// Append one entry. Its seq must be strictly above the run's stored tail (J5).
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()>;
    /// Every entry of the run in append order; an unknown run has an empty journal.
    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>>;
    /// Upsert the run's meta record whole.
    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()>;
    /// Metas matching the filter, ordered by run id. May over-return by status, never drops.
    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>>;
    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>>;
    /// Remove journal, meta and lease row. Never the epoch high-water mark (L4), never blobs (T6).
    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()>;
    /// The fenced-writes marker: a promise, never inferred (W6).
    fn fenced_writes(&self) -> bool;
    /// Whether every integer of a payload comes back exactly (J4). A store that reads payloads
    /// as doubles declares `false`; the kit then skips `a4-exact-integers` saying why.
    fn exact_integers(&self) -> bool {
        true
    }
}

pub trait LeasableStore {
    /// Take the run's lease if no live lease exists; the epoch is the run's high-water mark + 1.
    fn acquire(&self, run: &RunId, owner: &str) -> StoreResult<Lease>;
    /// Extend the lease to now + ttl; only the live holder may (L6).
    fn renew(&self, lease: &Lease) -> StoreResult<()>;
    /// Drop the lease; a stale release is rejected and never touches the successor (L7).
    fn release(&self, lease: &Lease) -> StoreResult<()>;
    /// The configured lease ttl in milliseconds.
    fn lease_ttl_ms(&self) -> u32;
}

/// Blobs addressed by ref (`<run>/<name...>`); the run is the ref's leading segment.
pub trait TranscriptStore {
    /// Write or overwrite in place.
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> StoreResult<()>;
    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>>;
    /// Refs under `<run>/`, sorted.
    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>>;
    /// Deleting a missing ref is a no-op, also under a live lease (T1).
    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()>;
    /// The transcript side's fenced-writes marker (T2: leases and blobs in one domain).
    fn fenced_blob_writes(&self) -> bool;
}

/// A whole store: journal and transcripts over one domain, leases when it has them.
pub trait Store: JournalStore + TranscriptStore + Send {
    /// The lease capability, if this store has one.
    fn leases(&self) -> Option<&dyn LeasableStore>;

    /// Install (or with `None` remove) the synchronous fault hook. Returns false when this store
    /// has no fault points.
    fn set_fault_hook(&self, hook: Option<FaultHook>) -> bool;

    /// The strict check of the reference's `assertFencedWrites`: both markers declared and a
    /// lease capability present; otherwise one config error naming everything missing.
    fn assert_fenced_writes(&self) -> StoreResult<()> {
        let mut missing = Vec::new();
        if !self.fenced_writes() {
            missing.push("journal");
        }
        if !self.fenced_blob_writes() {
            missing.push("transcripts");
        }
        if self.leases().is_none() {
            missing.push("leases");
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Config(format!("store does not declare fenced writes: {}", missing.join(", "))))
        }
    }
}
