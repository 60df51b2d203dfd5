//! Where a simulated world keeps its data: one SQLite database per world, either a named `memdb`
//! (fast, the default) or a WAL file in a fresh temporary folder (what production runs). Every
//! node opens its own connection to it with its own clock. A file world's folder is removed when
//! the world ends, pass or fail, unless the process was told to keep temporary folders
//! ([`keep_temp_folders`], the CLI's `FENCESIM_KEEP_TEMP=1`).
//!
//! A memdb and its connections outlive the world: when a world ends, its memdb's [`Spares`] (the
//! connections its nodes gave back, their statements still prepared) wait on the thread for the
//! next world, which empties the database and takes them instead of opening and booting ten
//! connections of its own. An emptied database answers as a fresh one would: the store's spares
//! tests check the emptying, and `sim/tests/run_cli.rs` that a world on a reused memdb has the
//! fingerprint of one on a fresh memdb. A memdb still held by a store of an earlier world is
//! never reused ([`Spares::clear`]).

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fencesim_store::sqlite::Spares;
use fencesim_store::{Clock, Location, SqliteOptions, SqliteStore, Store, StoreDefects, StoreResult};

use crate::env::{SimClock, SimEnv};

/// A file world's WAL autocheckpoint, in frames: with SQLite's 1000, a world's WAL grew to
/// megabytes of fresh page cache; at 100 a file world ran about 10% faster on this project's
/// machine (alternated 60-seed file sweeps), its traces byte-identical, and it checkpoints more
/// often (more of the interleavings a file world is there to test).
pub const CHECKPOINT_FRAMES: u32 = 100;

/// Which database a world uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DbKind {
    #[default]
    Memdb,
    File,
}

impl DbKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DbKind::Memdb => "memdb",
            DbKind::File => "file",
        }
    }
}

/// Memdb names are process-wide; a counter keeps worlds apart. Names never reach a trace or a
/// report; only a harness error (a database that would not open) may show one.
static NEXT_MEMDB: AtomicU64 = AtomicU64::new(0);

/// Whether file worlds keep their temporary folders (for a post-mortem); off by default. Never
/// reaches a trace or a report.
static KEEP_TEMP: AtomicBool = AtomicBool::new(false);

/// Keep (or, the default, remove) every file world's temporary folder when the world ends.
pub fn keep_temp_folders(keep: bool) {
    KEEP_TEMP.store(keep, Ordering::Relaxed);
}

thread_local! {
    /// The last ended world's memdb spares on this thread, for the next world.
    static SPARES: RefCell<Option<Arc<Spares>>> = const { RefCell::new(None) };
}

/// One world's database. A file database lives in a temporary folder removed on drop; a memdb
/// lives while at least one connection to it is open, and its spares go back to the thread when
/// the `Db` drops.
#[derive(Debug)]
pub struct Db {
    location: Location,
    _dir: Option<tempfile::TempDir>,
    spares: Option<Arc<Spares>>,
    reused: bool,
    /// A store of this `Db` booted its file: later stores skip the read-only probe.
    booted: AtomicBool,
}

impl Db {
    pub fn new(kind: DbKind) -> std::io::Result<Self> {
        match kind {
            DbKind::Memdb => {
                let reused = reused_spares()?;
                let spares = reused.clone().unwrap_or_else(|| {
                    let n = NEXT_MEMDB.fetch_add(1, Ordering::Relaxed);
                    Arc::new(Spares::memdb(format!("fencesim-world-{n}")))
                });
                Ok(Self {
                    location: spares.location().clone(),
                    _dir: None,
                    spares: Some(spares),
                    reused: reused.is_some(),
                    booted: AtomicBool::new(false),
                })
            }
            DbKind::File => {
                let dir = crate::janitor::temp_dir("fencesim-world-", KEEP_TEMP.load(Ordering::Relaxed))?;
                let path = dir.path().join("world.db");
                let location = Location::File(path);
                Ok(Self { location, _dir: Some(dir), spares: None, reused: false, booted: AtomicBool::new(false) })
            }
        }
    }

    /// Whether this memdb is an earlier world's, emptied, with its connections.
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// Take the guard of a file world's folder: the folder is removed when the returned guard
    /// drops, whatever becomes of this `Db` (a madsim runtime may hold a killed node's
    /// connection, and with it the `Db`, past the world's end). `None` for a memdb.
    pub fn detach_folder(&mut self) -> Option<tempfile::TempDir> {
        self._dir.take()
    }

    /// The database file, for a file world.
    pub fn path(&self) -> Option<PathBuf> {
        match &self.location {
            Location::File(path) => Some(path.clone()),
            Location::Memdb(_) => None,
        }
    }

    /// A new connection with this node's clock. The runtime busy timeout is 0: busy is a typed
    /// error the engine backs off from in virtual time, never a blocked thread. Commits do not
    /// wait for an fsync: a world's crash kills a node, never the machine's power, so what a
    /// commit handed the OS survives it either way; a file world still runs SQLite's real file
    /// locks, its WAL and its checkpoints (an fsync was 25x a memdb world's cost). The WAL is
    /// checkpointed every [`CHECKPOINT_FRAMES`] frames rather than SQLite's 1000, so it is
    /// rewritten in place instead of grown to megabytes and unlinked at the world's end.
    ///
    /// The first store boots the world's file in full; the file is the world's own, in a folder
    /// only this `Db` knows, so later stores skip the read-only probe ([`SqliteOptions::booted`]).
    pub fn open(&self, clock: Arc<dyn Clock>, ttl_ms: i64, defects: StoreDefects) -> StoreResult<SqliteStore> {
        let mut options = SqliteOptions::new(self.location.clone(), clock)
            .lease_ttl_ms(ttl_ms)
            .busy_timeout_ms(0)
            .defects(defects)
            .without_fsync()
            .checkpoint_every(CHECKPOINT_FRAMES);
        if let Some(spares) = &self.spares {
            options = options.spares(spares.clone());
        }
        if self.booted.load(Ordering::Relaxed) {
            options = options.booted();
        }
        let store = SqliteStore::open(options)?;
        self.booted.store(true, Ordering::Relaxed);
        Ok(store)
    }

    /// A simulated node: its own connection, and the engine `Env` on the same fresh clock (skew
    /// 0), so the store judges the node's leases by the time its engine sees.
    pub fn node(&self, ttl_ms: u32, defects: StoreDefects) -> StoreResult<(Rc<dyn Store>, SimEnv)> {
        let clock = SimClock::new(0);
        let store = self.open(Arc::new(clock.clone()), i64::from(ttl_ms), defects)?;
        Ok((Rc::new(store), SimEnv::new(clock)))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Some(spares) = self.spares.take() {
            // A thread still holding another world's spares keeps those; these close.
            let _ = SPARES.try_with(|slot| {
                slot.borrow_mut().get_or_insert(spares);
            });
        }
    }
}

/// The thread's spares, emptied for a new world; `None` when there are none or a store still
/// holds one of their connections (then the world gets a memdb of its own). A database that
/// fails to empty is an error: it would hide a broken memdb behind a slower fresh one.
fn reused_spares() -> std::io::Result<Option<Arc<Spares>>> {
    let Some(spares) = SPARES.try_with(|slot| slot.borrow_mut().take()).ok().flatten() else { return Ok(None) };
    match spares.clear() {
        Ok(cleared) => Ok(cleared.then_some(spares)),
        Err(e) => Err(std::io::Error::other(format!("cannot empty the last world's memdb: {e}"))),
    }
}
