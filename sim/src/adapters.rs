//! Worlds against a store adapter (the store protocol, docs/protocol.md): each world gets a fresh
//! empty folder as the adapter's location, and every node a connection of its own, opened on one
//! adapter process per thread. The process outlives the world and serves the thread's next world
//! of the same adapter (a process start costs tens of ms, a world against it a few hundred), unless
//! it failed: then the next world starts a new one. The folder goes with the world, pass or fail,
//! unless the process keeps its temporary folders.

use std::cell::RefCell;
use std::sync::Arc;

use fencesim_protocol::{Adapter, AdapterError, CmdStore, Spec};
use fencesim_store::{Clock, StoreResult};
use tempfile::TempDir;

thread_local! {
    /// The adapter process the last world on this thread used.
    static ADAPTER: RefCell<Option<Adapter>> = const { RefCell::new(None) };
}

/// One world's adapter and location.
pub struct AdapterDb {
    adapter: Adapter,
    location: std::path::PathBuf,
    folder: Option<TempDir>,
}

/// Why a world could not get its adapter or location.
#[derive(Debug, thiserror::Error)]
pub enum AdapterDbError {
    #[error(transparent)]
    Adapter(#[from] AdapterError),
    #[error("cannot create the adapter's location: {0}")]
    Folder(std::io::Error),
}

impl AdapterDb {
    /// The thread's process for `spec` if it is sound, else a new one; its location is `folder`
    /// (new and empty).
    pub fn new(spec: &Spec, folder: std::io::Result<TempDir>) -> Result<Self, AdapterDbError> {
        let adapter = ADAPTER.with(|slot| -> Result<Adapter, AdapterError> {
            let mut slot = slot.borrow_mut();
            if let Some(adapter) = slot.as_ref().filter(|a| a.spec() == spec && a.broken().is_none()) {
                return Ok(adapter.clone());
            }
            // The old process is killed when its last world lets go of it.
            let adapter = Adapter::start(spec)?;
            *slot = Some(adapter.clone());
            Ok(adapter)
        })?;
        let folder = folder.map_err(AdapterDbError::Folder)?;
        Ok(Self { adapter, location: folder.path().to_owned(), folder: Some(folder) })
    }

    /// A connection of this world's adapter over its location, at `clock`'s time.
    pub fn open(&self, clock: Arc<dyn Clock>, ttl_ms: i64) -> StoreResult<CmdStore> {
        self.adapter.open(&self.location, ttl_ms, clock)
    }

    /// The adapter's first protocol failure: the world has no verdict then.
    pub fn broken(&self) -> Option<AdapterError> {
        self.adapter.broken()
    }

    /// The name the adapter gave in its handshake (what a world's trace names, never its command,
    /// which may differ between two runs of the same world).
    pub fn name(&self) -> &str {
        &self.adapter.hello().name
    }

    /// The location's folder guard, removed when dropped (see `Db::detach_folder`).
    pub fn detach_folder(&mut self) -> Option<TempDir> {
        self.folder.take()
    }
}
