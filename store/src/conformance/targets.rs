//! The targets this crate ships: SqliteStore over memdb or over WAL files in a folder, and
//! MemoryStore. An adapter author writes the same few lines for their own store.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{Fixture, PreparedOpen, ReadOnlyOpen, Target, TtlIntake};
use crate::clock::ManualClock;
use crate::defects::StoreDefects;
use crate::error::{StoreError, StoreResult};
use crate::memory::MemoryStore;
use crate::spi::{JournalStore, LeasableStore, Store, TranscriptStore};
use crate::sqlite::{Location, SqliteOptions, SqliteStore};
use crate::types::{JournalEntry, RunId, RunMeta, RunStatus};

/// The fixtures' clocks start here, so that "expired" never means "before the epoch".
const CLOCK_START_MS: i64 = 1_000_000;

type BootCommand = Box<dyn Fn(&Path) -> Command>;

/// Numbers fresh locations across every target of this process, so that two targets (say, in
/// parallel tests) never share a memdb name or a file.
static NEXT_LOCATION: AtomicU32 = AtomicU32::new(0);

/// SqliteStore under test, on memdb or on files in a folder that must be fresh and empty.
pub struct SqliteTarget {
    name: String,
    folder: Option<PathBuf>,
    defects: StoreDefects,
    boot: Option<BootCommand>,
}

impl SqliteTarget {
    pub fn memdb() -> Self {
        Self { name: "sqlite-memdb".to_owned(), folder: None, defects: StoreDefects::NONE, boot: None }
    }

    pub fn file(folder: impl Into<PathBuf>) -> Self {
        Self { name: "sqlite-file".to_owned(), folder: Some(folder.into()), ..Self::memdb() }
    }

    pub fn defects(mut self, defects: StoreDefects) -> Self {
        self.defects = defects;
        self
    }

    /// Enable the concurrent-boot check (file targets only): `command(path)` builds a process
    /// that says `ready`, opens a SqliteStore over `path` at the end of its stdin, and exits 0.
    pub fn boot_with(mut self, command: impl Fn(&Path) -> Command + 'static) -> Self {
        self.boot = Some(Box::new(command));
        self
    }

    fn fresh_location(&self, what: &str) -> Location {
        let n = NEXT_LOCATION.fetch_add(1, Ordering::Relaxed);
        match &self.folder {
            Some(folder) => Location::File(folder.join(format!("{what}-{n}.db"))),
            None => Location::Memdb(format!("conformance-{}-{what}-{n}", std::process::id())),
        }
    }

    fn options(&self, location: Location, lease_ttl_ms: i64, clock: &ManualClock) -> SqliteOptions {
        SqliteOptions::new(location, Arc::new(clock.clone())).lease_ttl_ms(lease_ttl_ms).defects(self.defects)
    }
}

struct SqliteFixture {
    options: SqliteOptions,
    clock: ManualClock,
    /// Keeps a memdb alive between connections.
    _keeper: SqliteStore,
}

impl Fixture for SqliteFixture {
    fn connect(&self) -> StoreResult<Box<dyn Store>> {
        Ok(Box::new(SqliteStore::open(self.options.clone())?))
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl Target for SqliteTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn fresh(&self, lease_ttl_ms: u32) -> StoreResult<Box<dyn Fixture>> {
        let clock = ManualClock::new(CLOCK_START_MS);
        let options = self.options(self.fresh_location("fixture"), i64::from(lease_ttl_ms), &clock);
        let keeper = SqliteStore::open(options.clone())?;
        Ok(Box::new(SqliteFixture { options, clock, _keeper: keeper }))
    }

    fn ttl_intake(&self, lease_ttl_ms: i64) -> Option<TtlIntake> {
        let location = self.fresh_location("intake");
        let clock = ManualClock::new(CLOCK_START_MS);
        let result = SqliteStore::open(self.options(location.clone(), lease_ttl_ms, &clock)).map(drop);
        Some(TtlIntake { result, location_touched: location_exists(&location) })
    }

    fn boot_command(&self, round: u32) -> Option<Command> {
        let (folder, boot) = (self.folder.as_ref()?, self.boot.as_ref()?);
        Some(boot(&folder.join(format!("boot-round-{round}.db"))))
    }

    fn open_prepared(&self, setup: &str) -> Option<PreparedOpen> {
        let folder = self.folder.as_ref()?;
        let n = NEXT_LOCATION.fetch_add(1, Ordering::Relaxed);
        let path = folder.join(format!("prepared-{n}.db"));
        let made = rusqlite::Connection::open(&path).and_then(|c| c.execute_batch(setup));
        if let Err(e) = made {
            let result = Err(StoreError::Config(format!("the kit could not prepare {}: {e}", path.display())));
            return Some(PreparedOpen { result, unchanged: false });
        }
        let before = (std::fs::read(&path).ok(), files_beside(&path));
        let clock = ManualClock::new(CLOCK_START_MS);
        let result = SqliteStore::open(self.options(Location::File(path.clone()), 1_000, &clock)).map(drop);
        let unchanged = before == (std::fs::read(&path).ok(), files_beside(&path));
        Some(PreparedOpen { result, unchanged })
    }

    fn open_read_only(&self) -> Option<ReadOnlyOpen> {
        let folder = self.folder.as_ref()?;
        let n = NEXT_LOCATION.fetch_add(1, Ordering::Relaxed);
        let path = folder.join(format!("read-only-{n}.db"));
        let clock = ManualClock::new(CLOCK_START_MS);
        let options = self.options(Location::File(path.clone()), 60_000, &clock);
        let run = RunId::from("read-only-run");
        let populated = (|| {
            let writer = SqliteStore::open(options.clone())?;
            let lease = writer.acquire(&run, "writer")?;
            writer.append(&run, &JournalEntry::new(1, "step", "ok"), Some(&lease))?;
            writer.put_meta(&RunMeta::new(run.clone(), RunStatus::Running), Some(&lease))?;
            writer.put_blob(&format!("{run}/ckpt/1"), b"checkpoint", Some(&lease))?;
            writer.release(&lease)
        })();
        if let Err(e) = populated {
            let opened = Err(StoreError::Config(format!("the kit could not populate {}: {e}", path.display())));
            return Some(ReadOnlyOpen { opened, read: Ok(0), writes: Vec::new(), unchanged: true });
        }
        let before = data_files(&path);
        let reader = match SqliteStore::open(options.read_only()) {
            Ok(reader) => reader,
            Err(e) => return Some(ReadOnlyOpen { opened: Err(e), read: Ok(0), writes: Vec::new(), unchanged: true }),
        };
        let read = reader.load(&run).map(|entries| entries.len());
        let blob = format!("{run}/ckpt/1");
        let writes = vec![
            ("append", reader.append(&run, &JournalEntry::new(2, "step", "ok"), None)),
            ("put_meta", reader.put_meta(&RunMeta::new(run.clone(), RunStatus::Ok), None)),
            ("put_blob", reader.put_blob(&blob, b"overwritten", None)),
            ("delete_blob", reader.delete_blob(&blob, None)),
            ("delete", reader.delete(&run, None)),
            ("acquire", reader.acquire(&run, "reader").map(drop)),
        ];
        drop(reader);
        let unchanged = before == data_files(&path);
        Some(ReadOnlyOpen { opened: Ok(()), read, writes, unchanged })
    }
}

/// The bytes of a database file and of every file beside it, SQLite's coordination files aside
/// (any reader of a WAL database may be given a `-shm` index and an empty `-wal`).
fn data_files(path: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let folder = path.parent().unwrap_or(Path::new("."));
    files_beside(path)
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(folder.join(&name)).unwrap_or_default();
            (name, bytes)
        })
        .filter(|(name, bytes)| {
            let name = name.to_string_lossy();
            !(name.ends_with("-shm") || (name.ends_with("-wal") && bytes.is_empty()))
        })
        .collect()
}

/// The names of the files in `path`'s folder that start with its name (its WAL, shm, journal).
fn files_beside(path: &Path) -> Vec<std::ffi::OsString> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut files: Vec<_> = path
        .parent()
        .and_then(|p| std::fs::read_dir(p).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|f| f.to_string_lossy().starts_with(&name))
        .collect();
    files.sort();
    files
}

/// Whether anything exists at a location: a file (or its WAL), or a memdb with any schema.
fn location_exists(location: &Location) -> bool {
    match location {
        Location::File(path) => {
            let mut wal = path.clone().into_os_string();
            wal.push("-wal");
            path.exists() || Path::new(&wal).exists()
        }
        Location::Memdb(name) => {
            let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
            rusqlite::Connection::open_with_flags(format!("file:/{name}?vfs=memdb"), flags)
                .and_then(|c| c.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)))
                .is_ok_and(|objects| objects > 0)
        }
    }
}

/// MemoryStore under test: journal and transcript contracts only.
#[derive(Default)]
pub struct MemoryTarget;

struct MemoryFixture {
    store: MemoryStore,
    clock: ManualClock,
}

impl Fixture for MemoryFixture {
    fn connect(&self) -> StoreResult<Box<dyn Store>> {
        Ok(Box::new(self.store.clone()))
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl Target for MemoryTarget {
    fn name(&self) -> &str {
        "memory"
    }

    fn fresh(&self, _lease_ttl_ms: u32) -> StoreResult<Box<dyn Fixture>> {
        Ok(Box::new(MemoryFixture { store: MemoryStore::new(), clock: ManualClock::new(CLOCK_START_MS) }))
    }

    fn ttl_intake(&self, _lease_ttl_ms: i64) -> Option<TtlIntake> {
        None
    }

    fn boot_command(&self, _round: u32) -> Option<Command> {
        None
    }
}
