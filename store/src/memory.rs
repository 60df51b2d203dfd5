//! `MemoryStore`: the single-writer reference. It keeps the journal, meta and blob contracts
//! (J1-J7 without leases, T1, T5, T6) and nothing else: it declares no fenced writes, has no
//! leases, and ignores every lease it is handed (J9: unleased means single writer). The property
//! test holds SqliteStore to the same observable state for any single-writer sequence.
//!
//! Clones share one state, so a clone is "another connection" for the conformance kit.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{StoreError, StoreResult};
use crate::fault::FaultHook;
use crate::spi::{JournalStore, LeasableStore, Store, TranscriptStore};
use crate::types::{JournalEntry, Lease, RunFilter, RunId, RunMeta};

#[derive(Debug, Default)]
struct State {
    journals: BTreeMap<RunId, Vec<JournalEntry>>,
    metas: BTreeMap<RunId, RunMeta>,
    blobs: BTreeMap<String, Vec<u8>>,
}

#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain maps behind, still consistent per call.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl JournalStore for MemoryStore {
    fn append(&self, run: &RunId, entry: &JournalEntry, _lease: Option<&Lease>) -> StoreResult<()> {
        entry.check_fields(run)?;
        let mut state = self.state();
        let journal = state.journals.entry(run.clone()).or_default();
        // J5 against the last stored entry: seqs only ever increase along the journal.
        let tail = journal.last().map(|e| e.seq);
        if tail.is_some_and(|t| entry.seq <= t) {
            return Err(StoreError::JournalOrder { run: run.clone(), seq: entry.seq, tail });
        }
        journal.push(entry.clone());
        // J5 as stored: the journal's last two entries are in strictly increasing seq order.
        assert!(
            journal.len() < 2 || journal[journal.len() - 2].seq < entry.seq,
            "run {run}: seq {} stored after a seq not below it",
            entry.seq
        );
        Ok(())
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        Ok(self.state().journals.get(run).cloned().unwrap_or_default())
    }

    fn put_meta(&self, meta: &RunMeta, _lease: Option<&Lease>) -> StoreResult<()> {
        meta.check_fields()?;
        self.state().metas.insert(meta.run_id.clone(), meta.clone());
        Ok(())
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        Ok(self.state().metas.values().filter(|m| filter.matches(m)).cloned().collect())
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        Ok(self.state().metas.get(run).cloned())
    }

    fn delete(&self, run: &RunId, _lease: Option<&Lease>) -> StoreResult<()> {
        let mut state = self.state();
        state.journals.remove(run);
        state.metas.remove(run);
        Ok(())
    }

    fn fenced_writes(&self) -> bool {
        false
    }
}

impl TranscriptStore for MemoryStore {
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], _lease: Option<&Lease>) -> StoreResult<()> {
        self.state().blobs.insert(blob_ref.to_owned(), bytes.to_vec());
        Ok(())
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.state().blobs.get(blob_ref).cloned())
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        let prefix = format!("{run}/");
        Ok(self.state().blobs.keys().filter(|r| r.starts_with(&prefix)).cloned().collect())
    }

    fn delete_blob(&self, blob_ref: &str, _lease: Option<&Lease>) -> StoreResult<()> {
        self.state().blobs.remove(blob_ref);
        Ok(())
    }

    fn fenced_blob_writes(&self) -> bool {
        false
    }
}

impl Store for MemoryStore {
    fn leases(&self) -> Option<&dyn LeasableStore> {
        None
    }

    fn set_fault_hook(&self, _hook: Option<FaultHook>) -> bool {
        false
    }
}
