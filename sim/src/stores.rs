//! Where a simulated world keeps its data: one SQLite database per world, either a named `memdb`
//! (fast, the default) or a WAL file in a temporary folder (what production runs). Every node
//! opens its own connection to it with its own clock. A file world's folder is removed, pass or
//! fail, when the world ends, or on a thread that holds a [`FileReuse`] guard when the next file
//! world cannot reuse it or the guard drops; unless the process was told to keep temporary folders
//! ([`keep_temp_folders`], the CLI's `FENCESIM_KEEP_TEMP=1`): then every file world has a folder
//! of its own, kept.
//!
//! A database and its connections outlive the world: when a world ends, its [`Spares`] (the
//! connections its nodes gave back, their statements still prepared) wait on the thread for the
//! next world of the same kind, which empties the database and takes them instead of opening and
//! booting ten connections of its own. Memdbs always do; file worlds under a [`FileReuse`] guard
//! (each worker thread of `sweep`, `replay` and `mutants`), their folder with them, the file's
//! WAL emptied too: a file world still has a file of its own, real locks between its
//! connections, its WAL and its checkpoints. An emptied database answers as a fresh one would:
//! the store's spares tests check the emptying, and `sim/cli/tests/it/run_cli.rs` that a world on a
//! reused database has the fingerprint of one on a fresh database, memdb and file. A database
//! still held by a store of an earlier world is never reused ([`Spares::clear`]), nor a folder
//! the process was told to keep.
//!
//! Every node's connection has busy timeout 0. Reuse pays: opening, booting and first preparing
//! ten connections was a fifth of a memdb world and a tenth of a file world. `Spares` counts the
//! connections stores hold; emptying a file also checkpoints and truncates its WAL, so it starts
//! empty; file spares serve only stores of the `synchronous` and autocheckpoint settings they were
//! made with, because a connection keeps both. A kept database (`--keep-db`, bundles) is vacuumed,
//! so it holds only its own world's rows. A file world's first store boots its file in full; later
//! ones skip the read-only probe (`SqliteOptions::booted`: the file is the world's own, in a folder
//! only its `Db` knows).
//!
//! No store of a world outlives it: the world's folder guard is held outside the runtime
//! ([`Db::detach_folder`]) and dropped when the world ends, killed nodes' tasks are drained before
//! the runtime goes, and a node's `Ctx` clears its env's fault script (which holds the env: a
//! cycle). The folder lives in the binary's process root (`janitor.rs` of `fencesim-real`), so a
//! `SIGKILL` leaves nothing either. Without a [`FileReuse`] guard (a library user's thread) no
//! folder outlives its world; under one the folder waits with its spares and the guard's drop
//! removes it. The folder guard, dropped after the runtime, pairs with the spares its `Db` gave
//! back (`Folder`, through a hand-back slot the two share); if the `Db` has not dropped yet, the
//! folder is removed at once and the spares close when it does.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

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

/// A world's store: fencesim's own SQLite database, or a store adapter's location.
pub enum Backing {
    Sqlite(Db),
    Adapter(crate::adapters::AdapterDb),
}

impl Backing {
    /// The database of `kind`, or with `adapter` a location of that adapter.
    pub fn new(kind: DbKind, adapter: Option<&fencesim_protocol::Spec>) -> Result<Self, String> {
        match adapter {
            None => Db::new(kind).map(Backing::Sqlite).map_err(|e| format!("cannot create the world's database: {e}")),
            Some(spec) => {
                let folder = temp_dir("fencesim-adapter-world-", KEEP_TEMP.load(Ordering::Relaxed));
                crate::adapters::AdapterDb::new(spec, folder).map(Backing::Adapter).map_err(|e| e.to_string())
            }
        }
    }

    /// A connection with this clock, as every node's (store defects are fencesim's store's own).
    pub fn open(&self, clock: Arc<dyn Clock>, ttl_ms: i64, defects: StoreDefects) -> StoreResult<Box<dyn Store>> {
        Ok(match self {
            Backing::Sqlite(db) => Box::new(db.open(clock, ttl_ms, defects)?),
            Backing::Adapter(adapter) => Box::new(adapter.open(clock, ttl_ms)?),
        })
    }

    /// The guard of the world's folder (see [`Db::detach_folder`]).
    pub fn detach_folder(&mut self) -> Option<FolderGuard> {
        match self {
            Backing::Sqlite(db) => db.detach_folder().map(FolderGuard::Sqlite),
            Backing::Adapter(adapter) => adapter.detach_folder().map(|dir| FolderGuard::Adapter(AdapterFolder(dir))),
        }
    }

    /// What a world's trace calls its store: `memdb`, `file`, or `adapter:<name>`.
    pub fn describe(&self, kind: DbKind) -> String {
        match self {
            Backing::Sqlite(_) => kind.as_str().to_owned(),
            Backing::Adapter(adapter) => format!("adapter:{}", adapter.name()),
        }
    }

    /// A store adapter's failure: whatever the world saw proves nothing about the store then.
    pub fn broken(&self) -> Option<fencesim_protocol::AdapterError> {
        match self {
            Backing::Sqlite(_) => None,
            Backing::Adapter(adapter) => adapter.broken(),
        }
    }
}

/// A world's folder, removed when dropped (a file world's, or a store adapter's location).
#[derive(Debug)]
pub enum FolderGuard {
    Sqlite(Folder),
    Adapter(AdapterFolder),
}

/// A store adapter's location, removed when dropped (unless the process keeps its temporary
/// folders) with [`crate::removal::remove_tree`]: what the adapter wrote there is its own, read-only
/// folders included. What even that cannot remove is left to the process root's removal, which
/// names it (`fencesim_real::proc::janitor`).
#[derive(Debug)]
pub struct AdapterFolder(pub TempDir);

impl Drop for AdapterFolder {
    fn drop(&mut self) {
        if !KEEP_TEMP.load(Ordering::Relaxed) {
            let _ = crate::removal::remove_tree(self.0.path());
        }
    }
}

/// A maker of temporary folders: `(prefix, keep)` to a new folder named `<prefix>XXXXXX` that is
/// removed on drop unless kept.
pub type TempDirs = fn(prefix: &str, keep: bool) -> std::io::Result<TempDir>;

/// Where file worlds make their folders: set once by a binary that ties folders to its process
/// (the janitor of `fencesim-real`), else plain `tempfile` folders.
static TEMP_DIRS: std::sync::OnceLock<TempDirs> = std::sync::OnceLock::new();

/// Make every later file world's folder with `provider` (the first call wins).
pub fn set_temp_dirs(provider: TempDirs) {
    let _ = TEMP_DIRS.set(provider);
}

/// A new temporary folder from the installed provider, or a plain one.
pub fn temp_dir(prefix: &str, keep: bool) -> std::io::Result<TempDir> {
    match TEMP_DIRS.get() {
        Some(provider) => provider(prefix, keep),
        None => tempfile::Builder::new().prefix(prefix).disable_cleanup(keep).tempdir(),
    }
}

thread_local! {
    /// The last ended world's memdb spares on this thread, for the next world.
    static SPARES: RefCell<Option<Arc<Spares>>> = const { RefCell::new(None) };
    /// How many [`FileReuse`] guards this thread holds.
    static FILE_REUSE: Cell<u32> = const { Cell::new(0) };
    /// The last ended file world's spares on this thread, with the folder of their file, for the
    /// next file world; kept only while a [`FileReuse`] guard is held.
    static FILE_SPARES: RefCell<Option<(Arc<Spares>, TempDir)>> = const { RefCell::new(None) };
}

/// While held, the file worlds on this thread reuse the last file world's folder and connections
/// (emptied: see the module doc); when the last guard of the thread drops, the kept connections
/// close and the folder goes. Without one, every file world has a folder of its own, removed when
/// it ends, so a thread that ran file worlds leaves nothing behind whether or not it ever runs
/// its thread-local destructors. `sweep`, `replay` and `mutants` hold one on each worker thread.
#[derive(Debug)]
pub struct FileReuse {
    /// Not `Send`: the guard belongs to the thread whose slot it opened.
    _thread: std::marker::PhantomData<*const ()>,
}

impl FileReuse {
    pub fn on_this_thread() -> Self {
        let _ = FILE_REUSE.try_with(|held| held.set(held.get() + 1));
        Self { _thread: std::marker::PhantomData }
    }
}

impl Drop for FileReuse {
    fn drop(&mut self) {
        let last = FILE_REUSE.try_with(|held| {
            held.set(held.get().saturating_sub(1));
            held.get() == 0
        });
        if last == Ok(true) {
            drop(FILE_SPARES.try_with(|slot| slot.borrow_mut().take()));
        }
    }
}

fn reusing_files() -> bool {
    FILE_REUSE.try_with(|held| held.get() > 0).unwrap_or(false) && !KEEP_TEMP.load(Ordering::Relaxed)
}

/// One world's database. A file database lives in a temporary folder; a memdb lives while at
/// least one connection to it is open. A memdb's spares go back to the thread when the `Db`
/// drops; a file's, with its folder, only while the thread holds a [`FileReuse`] guard (and never
/// when the process keeps its temporary folders: then each file world has a folder of its own,
/// kept).
#[derive(Debug)]
pub struct Db {
    location: Location,
    dir: Option<TempDir>,
    /// A memdb's from the start; a reusable file's made by its first store, with that store's
    /// connection settings.
    spares: Mutex<Option<Arc<Spares>>>,
    /// Whether a file's stores give their connections to spares (a [`FileReuse`] guard was held).
    reusable: bool,
    /// Where a file world's spares wait for its detached folder ([`Db::detach_folder`]).
    handback: Arc<Mutex<Handback>>,
    reused: bool,
    /// A store of this `Db` booted its file: later stores skip the read-only probe.
    booted: AtomicBool,
}

impl Db {
    pub fn new(kind: DbKind) -> std::io::Result<Self> {
        let db = |location, dir, spares: Option<Arc<Spares>>, reusable, reused: bool| Self {
            location,
            dir,
            spares: Mutex::new(spares),
            reusable,
            handback: Arc::default(),
            reused,
            // A reused database was booted in full by an earlier world's first store.
            booted: reused.into(),
        };
        match kind {
            DbKind::Memdb => Ok(match reused(&SPARES, |spares| spares)? {
                Some(spares) => db(spares.location().clone(), None, Some(spares), true, true),
                None => {
                    let n = NEXT_MEMDB.fetch_add(1, Ordering::Relaxed);
                    let spares = Arc::new(Spares::memdb(format!("fencesim-world-{n}")));
                    db(spares.location().clone(), None, Some(spares), true, false)
                }
            }),
            DbKind::File => {
                let reusable = reusing_files();
                if reusable && let Some((spares, dir)) = reused(&FILE_SPARES, |(spares, _)| spares)? {
                    return Ok(db(spares.location().clone(), Some(dir), Some(spares), true, true));
                }
                let dir = temp_dir("fencesim-world-", KEEP_TEMP.load(Ordering::Relaxed))?;
                Ok(db(world_file(&dir), Some(dir), None, reusable, false))
            }
        }
    }

    /// Whether this database is an earlier world's, emptied, with its connections.
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// Take the guard of a file world's folder. Whatever becomes of this `Db` (a madsim runtime
    /// may hold a killed node's connection, and with it the `Db`, past the world's end), the
    /// folder is removed when the guard drops, unless the `Db` dropped first, reusable, and its
    /// spares can wait on the thread with the folder for the next file world. `None` for a memdb.
    pub fn detach_folder(&mut self) -> Option<Folder> {
        self.dir.take().map(|dir| Folder { dir: Some(dir), handback: self.handback.clone() })
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
        if let Some(spares) = self.spares_for(&options)? {
            options = options.spares(spares);
        }
        if self.booted.load(Ordering::Relaxed) {
            options = options.booted();
        }
        let store = SqliteStore::open(options)?;
        self.booted.store(true, Ordering::Relaxed);
        Ok(store)
    }

    /// The spares a store of `options` takes and gives back to: a memdb's; a reusable file's,
    /// made for the first store's connection settings (every store of a world asks for the same).
    fn spares_for(&self, options: &SqliteOptions) -> StoreResult<Option<Arc<Spares>>> {
        let mut spares = self.spares.lock().unwrap_or_else(PoisonError::into_inner);
        if spares.is_none() && self.reusable {
            *spares = Some(Arc::new(Spares::file(options)?));
        }
        Ok(spares.clone())
    }

    /// A simulated node: its own connection, and the engine `Env` on the same fresh clock (skew
    /// 0), so the store judges the node's leases by the time its engine sees.
    pub fn node(&self, ttl_ms: u32, defects: StoreDefects) -> StoreResult<(Rc<dyn Store>, SimEnv)> {
        let clock = SimClock::new(0);
        let store = self.open(Arc::new(clock.clone()), i64::from(ttl_ms), defects)?;
        Ok((Rc::new(store), SimEnv::new(clock)))
    }
}

/// The world's database file in its folder.
fn world_file(dir: &TempDir) -> Location {
    Location::File(dir.path().join("world.db"))
}

impl Drop for Db {
    fn drop(&mut self) {
        let Some(spares) = self.spares.get_mut().unwrap_or_else(PoisonError::into_inner).take() else { return };
        match (&self.location, self.dir.take()) {
            (Location::Memdb(_), _) => park(&SPARES, spares),
            (Location::File(_), Some(dir)) => park_file(spares, dir),
            (Location::File(_), None) => {
                let mut handback = self.handback.lock().unwrap_or_else(PoisonError::into_inner);
                // Its folder's guard pairs them again, unless it removed the folder already.
                if !matches!(*handback, Handback::FolderGone) {
                    *handback = Handback::Spares(spares);
                }
            }
        }
    }
}

/// What a file world's `Db` left for its detached [`Folder`].
#[derive(Debug, Default)]
enum Handback {
    /// The `Db` has not dropped yet.
    #[default]
    Waiting,
    /// The `Db` dropped and gave these back.
    Spares(Arc<Spares>),
    /// The folder was removed before the `Db` dropped: its spares close when it does.
    FolderGone,
}

/// A file world's folder, detached from its [`Db`] ([`Db::detach_folder`]).
#[derive(Debug)]
pub struct Folder {
    dir: Option<TempDir>,
    handback: Arc<Mutex<Handback>>,
}

impl Drop for Folder {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        let mut handback = self.handback.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *handback, Handback::FolderGone) {
            Handback::Spares(spares) => park_file(spares, dir),
            Handback::Waiting | Handback::FolderGone => drop(dir),
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

/// Leave a file world's spares and folder for the next file world while the thread reuses file
/// worlds; else (or when the slot is taken) the connections close, then the folder goes.
fn park_file(spares: Arc<Spares>, dir: TempDir) {
    if reusing_files() {
        park(&FILE_SPARES, (spares, dir));
    } else {
        drop(spares);
        drop(dir);
    }
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
        // Cleared through an idle connection, given back: the next world's first store takes it.
        Ok(cleared) => {
            assert!(!cleared || spares(&held).idle_count() > 0, "a cleared database kept no idle connection");
            Ok(cleared.then_some(held))
        }
        Err(e) => Err(std::io::Error::other(format!("cannot empty the last world's database: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use fencesim_store::{JournalEntry, JournalStore, ManualClock, RunId};

    use super::*;

    /// Open a store of `db`, write a row and drop the store: its connection goes back to the
    /// spares. The world's folder.
    fn use_once(db: &Db) -> PathBuf {
        let store = db.open(Arc::new(ManualClock::new(0)), 1_000, StoreDefects::NONE).expect("open");
        store.append(&RunId::new("r"), &JournalEntry::new(1, "step", "ok"), None).expect("append");
        db.path().expect("a file").parent().expect("its folder").to_owned()
    }

    fn exists(folder: &Path) -> bool {
        folder.try_exists().expect("a readable temp folder")
    }

    #[test]
    fn without_a_guard_every_file_world_has_a_folder_of_its_own_removed_when_it_ends() {
        let db = Db::new(DbKind::File).expect("db");
        let folder = use_once(&db);
        drop(db);
        assert!(!exists(&folder), "the folder went with the world");
        assert!(!Db::new(DbKind::File).expect("db").reused());
    }

    #[test]
    fn under_a_guard_the_next_file_world_reuses_the_folder_and_the_guard_removes_it() {
        let guard = FileReuse::on_this_thread();
        let db = Db::new(DbKind::File).expect("db");
        let folder = use_once(&db);
        drop(db);
        assert!(exists(&folder), "kept for the next file world");
        let next = Db::new(DbKind::File).expect("db");
        assert!(next.reused(), "the next file world took it");
        assert_eq!(use_once(&next), folder);
        drop(next);
        drop(guard);
        assert!(!exists(&folder), "the last guard of the thread removed it");
    }

    #[test]
    fn a_detached_folder_pairs_with_its_spares_only_when_the_db_dropped_first() {
        let _guard = FileReuse::on_this_thread();
        // The Db drops first, as when the runtime drops before the folder: kept and reused.
        let mut db = Db::new(DbKind::File).expect("db");
        let guard = db.detach_folder().expect("a file world's folder");
        let folder = use_once(&db);
        drop(db);
        drop(guard);
        assert!(exists(&folder));
        let mut db = Db::new(DbKind::File).expect("db");
        assert!(db.reused());
        // The folder's guard drops first, as when a runtime keeps the Db past the world: the
        // folder goes at once, and the spares close when the Db drops.
        let guard = db.detach_folder().expect("a file world's folder");
        drop(guard);
        assert!(!exists(&folder), "removed although its Db lives on");
        drop(db);
        assert!(!Db::new(DbKind::File).expect("db").reused(), "nothing was left to reuse");
    }
}
