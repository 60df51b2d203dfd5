//! The conformance kit's [`Target`] for an adapter: every fresh location is a new empty folder
//! under one temporary folder (removed with the target), every connection an `open` on the one
//! adapter process. The kit's clock is the fixture's [`ManualClock`], read into every request.
//! B2's boot race runs when the caller says how a process of its own opens a location through
//! the adapter ([`CmdTarget::boot_with`]: `fencesim boot --store`, which starts an adapter
//! process of its own, as a second process of an application starts its store). Checks that need
//! a SQLite file of fencesim's own (B4's prepared files, B5's read-only open) are not the
//! protocol's: the kit reports them skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use fencesim_store::conformance::{Fixture, Target, TtlIntake};
use fencesim_store::{ManualClock, Store, StoreResult};
use tempfile::TempDir;

use crate::client::{Adapter, CmdStore};

/// The fixtures' clocks start here, as the shipped targets' do.
const CLOCK_START_MS: i64 = 1_000_000;

/// How a process of the caller's opens a location through the adapter (B2).
type BootCommand = Box<dyn Fn(&Path) -> Command>;

pub struct CmdTarget {
    adapter: Adapter,
    name: String,
    folder: TempDir,
    next: AtomicU32,
    boot: Option<BootCommand>,
}

impl CmdTarget {
    /// A target over `adapter`, its locations under `folder` (which it removes when dropped).
    pub fn new(adapter: Adapter, folder: TempDir) -> Self {
        let name = format!("cmd:{}", adapter.hello().name);
        Self { adapter, name, folder, next: AtomicU32::new(0), boot: None }
    }

    /// Enable the concurrent-boot check (B2): `command(location)` builds a process that starts
    /// the adapter on its own, says `ready` once it has shaken hands, opens `location` through it
    /// at the end of its stdin, uses it once, and exits 0 on success.
    pub fn boot_with(mut self, command: impl Fn(&Path) -> Command + 'static) -> Self {
        self.boot = Some(Box::new(command));
        self
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

    fn boot_command(&self, round: u32) -> Option<Command> {
        let boot = self.boot.as_ref()?;
        // Every process of a round names the same location, created empty by the first call. A
        // folder that cannot be created fails the children's opens, which name it.
        let location = self.folder.path().join(format!("boot-round-{round}"));
        let _ = std::fs::create_dir_all(&location);
        Some(boot(&location))
    }

    /// Eight rounds: through adapter processes the racers' opens meet less often (rulvar's
    /// SQLite store without its boot retry failed two rounds in 4 of 5 kit runs, one round in
    /// about half).
    fn boot_rounds(&self) -> u32 {
        8
    }
}
