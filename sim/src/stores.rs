//! Where a simulated world keeps its data: one SQLite database per world, either a named `memdb`
//! (fast, the default) or a WAL file in a fresh temporary folder (what production runs). Every
//! node opens its own connection to it with its own clock.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fencesim_store::{Clock, Defects, Location, SqliteOptions, SqliteStore, StoreResult};

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

/// One world's database. A file database lives in a temporary folder removed on drop; a memdb
/// lives while at least one connection to it is open.
#[derive(Debug)]
pub struct Db {
    location: Location,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    pub fn new(kind: DbKind) -> std::io::Result<Self> {
        match kind {
            DbKind::Memdb => {
                let n = NEXT_MEMDB.fetch_add(1, Ordering::Relaxed);
                Ok(Self { location: Location::Memdb(format!("fencesim-world-{n}")), _dir: None })
            }
            DbKind::File => {
                let dir = tempfile::Builder::new().prefix("fencesim-world-").tempdir()?;
                let path = dir.path().join("world.db");
                Ok(Self { location: Location::File(path), _dir: Some(dir) })
            }
        }
    }

    /// The database file, for a file world.
    pub fn path(&self) -> Option<PathBuf> {
        match &self.location {
            Location::File(path) => Some(path.clone()),
            Location::Memdb(_) => None,
        }
    }

    /// A new connection with this node's clock. The runtime busy timeout is 0: busy is a typed
    /// error the engine backs off from in virtual time, never a blocked thread.
    pub fn open(&self, clock: Arc<dyn Clock>, ttl_ms: i64, defects: Defects) -> StoreResult<SqliteStore> {
        SqliteStore::open(
            SqliteOptions::new(self.location.clone(), clock).lease_ttl_ms(ttl_ms).busy_timeout_ms(0).defects(defects),
        )
    }
}
