//! The conformance kit's [`Target`] for an adapter: every fresh location is a new empty folder
//! under one temporary folder (removed with the target), every connection an `open` on the one
//! adapter process. The kit's clock is the fixture's [`ManualClock`], read into every request.
//! Checks that need a SQLite file of fencesim's own (B2's boot race of OS processes, B4's
//! prepared files, B5's read-only open) are not the protocol's: the kit reports them skipped.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use fencesim_store::conformance::{Fixture, Target, TtlIntake};
use fencesim_store::{ManualClock, Store, StoreResult};
use tempfile::TempDir;

use crate::client::{Adapter, CmdStore};

/// The fixtures' clocks start here, as the shipped targets' do.
const CLOCK_START_MS: i64 = 1_000_000;

pub struct CmdTarget {
    adapter: Adapter,
    name: String,
    folder: TempDir,
    next: AtomicU32,
}

impl CmdTarget {
    /// A target over `adapter`, its locations under `folder` (which it removes when dropped).
    pub fn new(adapter: Adapter, folder: TempDir) -> Self {
        let name = format!("cmd:{}", adapter.hello().name);
        Self { adapter, name, folder, next: AtomicU32::new(0) }
    }

    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// A new folder for one location, created empty.
    fn fresh_folder(&self, what: &str) -> StoreResult<PathBuf> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.folder.path().join(format!("{what}-{n}"));
        std::fs::create_dir(&path)
            .map_err(|e| fencesim_store::StoreError::Config(format!("cannot create {}: {e}", path.display())))?;
        Ok(path)
    }
}

struct CmdFixture {
    adapter: Adapter,
    location: PathBuf,
    ttl_ms: u32,
    clock: ManualClock,
    /// One connection open for the fixture's life, as the shipped targets keep one.
    _keeper: CmdStore,
}

impl Fixture for CmdFixture {
    fn connect(&self) -> StoreResult<Box<dyn Store>> {
        Ok(Box::new(self.adapter.open(&self.location, i64::from(self.ttl_ms), Arc::new(self.clock.clone()))?))
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl Target for CmdTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn fresh(&self, lease_ttl_ms: u32) -> StoreResult<Box<dyn Fixture>> {
        let location = self.fresh_folder("fixture")?;
        let clock = ManualClock::new(CLOCK_START_MS);
        let keeper = self.adapter.open(&location, i64::from(lease_ttl_ms), Arc::new(clock.clone()))?;
        Ok(Box::new(CmdFixture {
            adapter: self.adapter.clone(),
            location,
            ttl_ms: lease_ttl_ms,
            clock,
            _keeper: keeper,
        }))
    }

    fn ttl_intake(&self, lease_ttl_ms: i64) -> Option<TtlIntake> {
        let location = match self.fresh_folder("intake") {
            Ok(location) => location,
            Err(e) => return Some(TtlIntake { result: Err(e), location_touched: true }),
        };
        let result = self.adapter.open(&location, lease_ttl_ms, Arc::new(ManualClock::new(CLOCK_START_MS))).map(drop);
        let location_touched = std::fs::read_dir(&location).map_or(true, |mut entries| entries.next().is_some());
        Some(TtlIntake { result, location_touched })
    }

    fn boot_command(&self, _round: u32, _start_at_unix_ms: i64) -> Option<Command> {
        None
    }
}
