//! Where a simulated world keeps its data: one SQLite database per world, either a named `memdb`
//! (fast, the default) or a WAL file in a temporary folder (what production runs). Every
//! node opens its own connection to it with its own clock. A file world's folder is removed, pass
//! or fail, when the next world on its thread cannot reuse it or the thread ends, unless the
//! process was told to keep temporary folders ([`keep_temp_folders`], the CLI's
//! `FENCESIM_KEEP_TEMP=1`): then every file world has a folder of its own, kept.
//!
//! A database and its connections outlive the world: when a world ends, its [`Spares`] (the
//! connections its nodes gave back, their statements still prepared) wait on the thread for the
//! next world of the same kind, which empties the database and takes them instead of opening and
//! booting ten connections of its own. A file world's folder waits with them, and the file's WAL
//! is emptied too: a file world still has a file of its own, real locks between its connections,
//! its WAL and its checkpoints. An emptied database answers as a fresh one would: the store's
//! spares tests check the emptying, and `sim/tests/run_cli.rs` that a world on a reused database
//! has the fingerprint of one on a fresh database, memdb and file. A database still held by a
//! store of an earlier world is never reused ([`Spares::clear`]), nor a folder the process was
//! told to keep.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fencesim_store::sqlite::Spares;
use fencesim_store::{Clock, Location, SqliteOptions, SqliteStore, Store, StoreDefects, StoreResult};

use tempfile::TempDir;

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
    /// The last ended file world's spares on this thread, with the folder of their file, for the
    /// next file world. Dropped at the thread's end: the connections close, then the folder goes.
    static FILE_SPARES: RefCell<Option<(Arc<Spares>, TempDir)>> = const { RefCell::new(None) };
    /// A file world's spares given back by its `Db` while its [`Folder`] was detached: the
    /// folder's drop pairs them again.
    static RETURNED: RefCell<Option<Arc<Spares>>> = const { RefCell::new(None) };
}

/// One world's database. A file database lives in a temporary folder; a memdb lives while at
/// least one connection to it is open. The spares go back to the thread when the `Db` drops (a
/// file's with its folder), unless the process keeps its temporary folders: then each file world
/// has a folder of its own, kept, and no spares.
#[derive(Debug)]
pub struct Db {
    location: Location,
    dir: Option<TempDir>,
    spares: Option<Arc<Spares>>,
    reused: bool,
    /// A store of this `Db` booted its file: later stores skip the read-only probe.
    booted: AtomicBool,
}

impl Db {
    pub fn new(kind: DbKind) -> std::io::Result<Self> {
        let (location, dir, spares, reused) = match kind {
            DbKind::Memdb => match reused(&SPARES, |spares| spares)? {
                Some(spares) => (spares.location().clone(), None, spares, true),
                None => {
                    let n = NEXT_MEMDB.fetch_add(1, Ordering::Relaxed);
                    let spares = Arc::new(Spares::memdb(format!("fencesim-world-{n}")));
                    (spares.location().clone(), None, spares, false)
                }
            },
            DbKind::File if KEEP_TEMP.load(Ordering::Relaxed) => {
                let dir = crate::janitor::temp_dir("fencesim-world-", true)?;
                let location = Location::File(dir.path().join("world.db"));
                return Ok(Self { location, dir: Some(dir), spares: None, reused: false, booted: false.into() });
            }
            DbKind::File => match reused(&FILE_SPARES, |(spares, _)| spares)? {
                Some((spares, dir)) => (spares.location().clone(), Some(dir), spares, true),
                None => {
                    let dir = crate::janitor::temp_dir("fencesim-world-", false)?;
                    let location = Location::File(dir.path().join("world.db"));
                    let spares = Spares::file(&options(location.clone(), Arc::new(SimClock::new(0))))
                        .map_err(std::io::Error::other)?;
                    (location, Some(dir), Arc::new(spares), false)
                }
            },
        };
        // A reused database was booted in full by an earlier world's first store.
        Ok(Self { location, dir, spares: Some(spares), reused, booted: reused.into() })
    }

    /// Whether this database is an earlier world's, emptied, with its connections.
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// Take the guard of a file world's folder. Whatever becomes of this `Db` (a madsim runtime
    /// may hold a killed node's connection, and with it the `Db`, past the world's end), the
    /// folder is removed when the guard drops, unless the `Db` dropped first and gave its spares
    /// back: then the folder waits on the thread with them. `None` for a memdb.
    pub fn detach_folder(&mut self) -> Option<Folder> {
        self.dir.take().map(|dir| Folder(Some(dir)))
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
        let mut options = options(self.location.clone(), clock).lease_ttl_ms(ttl_ms).defects(defects);
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

/// What every connection of a world is opened with (see [`Db::open`]).
fn options(location: Location, clock: Arc<dyn Clock>) -> SqliteOptions {
    SqliteOptions::new(location, clock).busy_timeout_ms(0).without_fsync().checkpoint_every(CHECKPOINT_FRAMES)
}

impl Drop for Db {
    fn drop(&mut self) {
        let Some(spares) = self.spares.take() else { return };
        // A thread still holding another world's spares keeps those; these close (and a file's
        // folder goes with its guard).
        match (&self.location, self.dir.take()) {
            (Location::Memdb(_), _) => park(&SPARES, spares),
            (Location::File(_), Some(dir)) => park(&FILE_SPARES, (spares, dir)),
            // Its folder's guard, dropped next, pairs them again (an older world's left here
            // lost its folder already).
            (Location::File(_), None) => drop(RETURNED.try_with(|slot| slot.borrow_mut().replace(spares))),
        }
    }
}

/// A file world's folder, detached from its [`Db`] ([`Db::detach_folder`]).
#[derive(Debug)]
pub struct Folder(Option<TempDir>);

impl Drop for Folder {
    fn drop(&mut self) {
        let Some(dir) = self.0.take() else { return };
        let mine = Location::File(dir.path().join("world.db"));
        if let Ok(Some(spares)) = RETURNED.try_with(|slot| slot.borrow_mut().take_if(|s| *s.location() == mine)) {
            park(&FILE_SPARES, (spares, dir));
        }
    }
}

/// Leave `held` in the thread's `slot` for the next world, unless the slot is taken (or the
/// thread is ending): then it drops.
fn park<T>(slot: &'static std::thread::LocalKey<RefCell<Option<T>>>, held: T) {
    let _ = slot.try_with(|slot| {
        slot.borrow_mut().get_or_insert(held);
    });
}

/// The thread's spares in `slot`, emptied for a new world; `None` when there are none or a store
/// still holds one of their connections (then the world gets a database of its own). A database
/// that fails to empty is an error: it would hide a broken database behind a slower fresh one.
fn reused<T>(
    slot: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    spares: impl Fn(&T) -> &Arc<Spares>,
) -> std::io::Result<Option<T>> {
    let Some(held) = slot.try_with(|slot| slot.borrow_mut().take()).ok().flatten() else { return Ok(None) };
    match spares(&held).clear() {
        Ok(cleared) => Ok(cleared.then_some(held)),
        Err(e) => Err(std::io::Error::other(format!("cannot empty the last world's database: {e}"))),
    }
}
