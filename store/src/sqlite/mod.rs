//! `SqliteStore`: the fenced store over one SQLite database (contracts 1.7, 2.1-2.6). Every rule
//! of S1-S9 lives here: the fence check and the mutation share one `BEGIN IMMEDIATE` transaction
//! with owner and epoch pinned (S1, L9); run-match before the transaction (S2, W3); renew and
//! release pin owner and epoch in their WHERE clause too (S3); acquire bumps the epoch
//! high-water mark, which survives delete (S4, L4); the seq guard is one conditional insert (S5);
//! an expired row is stale (9.1); a stale release is rejected (L7, the strict rule).
//!
//! One `SqliteStore` is one connection. It is `Send` but not `Sync`: give every node or thread its
//! own. Runtime calls never wait for a lock unless a busy timeout is configured: a competing
//! writer surfaces as [`StoreError::Busy`] with nothing committed (B3).

mod schema;

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::clock::{Clock, SystemClock};
use crate::defects::{Defects, StoreDefect};
use crate::error::{LeaseRejection, Op, StoreError, StoreResult};
use crate::fault::{FaultHook, FaultPoint, FaultSite};
use crate::spi::{JournalStore, LeasableStore, Store, TranscriptStore};
use crate::types::{Epoch, JournalEntry, Lease, RunFilter, RunId, RunMeta, Seq};
use crate::wall;

pub use schema::{APPLICATION_ID, SCHEMA_VERSION, TABLES};

/// The reference's default lease ttl (contracts 7).
pub const DEFAULT_LEASE_TTL_MS: u32 = 60_000;
/// Largest valid ttl: the reference's timer range (contracts 7).
pub const MAX_LEASE_TTL_MS: i64 = 2_147_483_647;
/// The wall-clock bound of the boot retry (B2).
pub const BOOT_BUSY_TIMEOUT_MS: u64 = 5_000;

/// Where the database lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A database file, in WAL mode. Its folder must exist.
    File(PathBuf),
    /// An in-memory database (`file:/NAME?vfs=memdb`) shared by every connection of this process
    /// that names it; it lives while one connection is open.
    Memdb(String),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            Location::Memdb(name) => write!(f, "memdb:{name}"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct SqliteOptions {
    pub location: Location,
    /// Validated at open: an integer in 1..=2147483647 (B1).
    pub lease_ttl_ms: i64,
    /// How long a runtime call waits for another connection's write lock; 0 (the default) fails
    /// fast with `Busy`, which the simulator needs. The soak sets a real bound.
    pub busy_timeout_ms: u32,
    /// The wall-clock bound of the boot retry.
    pub boot_busy_timeout_ms: u64,
    pub clock: Arc<dyn Clock>,
    pub defects: Defects,
}

impl SqliteOptions {
    pub fn new(location: Location) -> Self {
        Self {
            location,
            lease_ttl_ms: i64::from(DEFAULT_LEASE_TTL_MS),
            busy_timeout_ms: 0,
            boot_busy_timeout_ms: BOOT_BUSY_TIMEOUT_MS,
            clock: Arc::new(SystemClock),
            defects: Defects::NONE,
        }
    }

    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self::new(Location::File(path.into()))
    }

    pub fn memdb(name: impl Into<String>) -> Self {
        Self::new(Location::Memdb(name.into()))
    }

    pub fn lease_ttl_ms(mut self, ttl_ms: i64) -> Self {
        self.lease_ttl_ms = ttl_ms;
        self
    }

    pub fn busy_timeout_ms(mut self, ms: u32) -> Self {
        self.busy_timeout_ms = ms;
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn defects(mut self, defects: Defects) -> Self {
        self.defects = defects;
        self
    }
}

/// B1: the ttl must be an integer in 1..=2147483647 ms; checked before anything is opened.
pub fn validate_ttl(ttl_ms: i64) -> StoreResult<u32> {
    if (1..=MAX_LEASE_TTL_MS).contains(&ttl_ms) {
        Ok(u32::try_from(ttl_ms).expect("range checked above"))
    } else {
        Err(StoreError::Config(format!("lease ttl must be an integer in 1..={MAX_LEASE_TTL_MS} ms ttl_ms={ttl_ms}")))
    }
}

pub struct SqliteStore {
    conn: Connection,
    location: Location,
    ttl_ms: u32,
    clock: Arc<dyn Clock>,
    defects: Defects,
    hook: RefCell<Option<FaultHook>>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore").field("location", &self.location).field("ttl_ms", &self.ttl_ms).finish()
    }
}

/// A failed single boot attempt.
enum BootFailure {
    Sqlite(rusqlite::Error),
    /// The file cannot be written, or is a SQLite database that is not ours (or of another
    /// schema version).
    Refused(String),
}

impl From<rusqlite::Error> for BootFailure {
    fn from(e: rusqlite::Error) -> Self {
        BootFailure::Sqlite(e)
    }
}

impl SqliteStore {
    /// Validate the options, open the database and bootstrap the schema. Concurrent opens of one
    /// fresh file are legal: the whole idempotent bootstrap is retried while it fails busy, until
    /// `boot_busy_timeout_ms` of wall-clock time has passed (B2).
    pub fn open(options: SqliteOptions) -> StoreResult<SqliteStore> {
        let ttl_ms = validate_ttl(options.lease_ttl_ms)?;
        validate_location(&options.location)?;
        disable_memory_statistics();
        let deadline = wall::Deadline::after_ms(options.boot_busy_timeout_ms);
        let mut attempt: u64 = 0;
        let conn = loop {
            match boot_once(&options.location) {
                Ok(conn) => break conn,
                Err(BootFailure::Sqlite(e))
                    if is_busy(&e) && !options.defects.has(StoreDefect::NoBootRetry) && !deadline.passed() =>
                {
                    wall::sleep_ms(2 + attempt % 7);
                    attempt += 1;
                }
                Err(failure) => return Err(boot_error(&options.location, failure, attempt + 1)),
            }
        };
        conn.busy_timeout(Duration::from_millis(u64::from(options.busy_timeout_ms)))
            .map_err(|e| StoreError::storage(Op::Boot, e.to_string()))?;
        Ok(SqliteStore {
            conn,
            location: options.location,
            ttl_ms,
            clock: options.clock,
            defects: options.defects,
            hook: RefCell::new(None),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The underlying connection, for tools and benchmarks. Writes through it bypass every fence.
    pub fn raw_connection(&self) -> &Connection {
        &self.conn
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    fn fire(&self, point: FaultPoint, op: Op, run: &RunId) {
        if let Some(hook) = self.hook.borrow_mut().as_mut() {
            hook(&FaultSite { point, op, run });
        }
    }

    fn exec(&self, op: Op, run: &RunId, sql: &str, args: impl rusqlite::Params) -> StoreResult<usize> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| sql_error(op, Some(run), e))?;
        stmt.execute(args).map_err(|e| sql_error(op, Some(run), e))
    }

    /// One write transaction. `BEGIN IMMEDIATE` takes the write lock before anything is read;
    /// a busy there surfaces as is, with nothing to roll back (S1).
    fn write_txn<T>(&self, op: Op, run: &RunId, body: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        self.exec(op, run, "BEGIN IMMEDIATE", [])?;
        let result = body().and_then(|v| self.exec(op, run, "COMMIT", []).map(|_| v));
        if result.is_err() && !self.conn.is_autocommit() {
            // A failed rollback leaves the connection unusable for writes; report the first error.
            let _ = self.exec(op, run, "ROLLBACK", []);
        }
        result
    }

    /// The lease row of `run`: owner, epoch, expires_at.
    fn lease_row(&self, op: Op, run: &RunId) -> StoreResult<Option<(String, i64, i64)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?1")
            .map_err(|e| sql_error(op, Some(run), e))?;
        stmt.query_row([run.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
            .map_err(|e| sql_error(op, Some(run), e))
    }

    /// Is `lease` the live holder of its run? Expired equals stale (contracts 9.1).
    fn check_lease(&self, op: Op, lease: &Lease) -> StoreResult<()> {
        let now = self.now_ms();
        let expired_counts = self.defects.has(StoreDefect::ExpiredLeaseLive);
        let live = self.lease_row(op, &lease.run)?.filter(|(_, _, expires_at)| now < *expires_at || expired_counts);
        match live {
            Some((owner, epoch, _)) if owner == lease.owner && epoch == lease.epoch.0 => Ok(()),
            other => Err(StoreError::lease_held(
                op,
                lease.clone(),
                LeaseRejection::Stale { live: other.map(|(o, e, _)| (o, Epoch(e))) },
            )),
        }
    }

    /// Run `mutate` only if `lease` is the live holder of `target`, atomically with the check
    /// (S1, S2, L9, W4).
    fn fenced<T>(
        &self,
        op: Op,
        target: &RunId,
        lease: &Lease,
        mutate: impl FnOnce() -> StoreResult<T>,
    ) -> StoreResult<T> {
        if lease.run != *target && !self.defects.has(StoreDefect::NoRunMatch) {
            return Err(StoreError::lease_held(
                op,
                lease.clone(),
                LeaseRejection::RunMismatch { target: target.clone() },
            ));
        }
        if self.defects.has(StoreDefect::NonAtomicFence) {
            // D3: the check is one autocommit read and the mutation runs after it, unguarded.
            self.check_lease(op, lease)?;
            self.fire(FaultPoint::FenceChecked, op, &lease.run);
            return mutate();
        }
        self.write_txn(op, target, || {
            self.check_lease(op, lease)?;
            self.fire(FaultPoint::FenceChecked, op, &lease.run);
            mutate()
        })
    }

    /// The lease a call is fenced by, after planted defects that ignore it.
    fn effective<'l>(&self, lease: Option<&'l Lease>, ignored_by: StoreDefect) -> Option<&'l Lease> {
        lease.filter(|_| !self.defects.has(ignored_by))
    }

    fn tail(&self, run: &RunId) -> StoreResult<Option<Seq>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT MAX(seq) FROM entries WHERE run_id = ?1")
            .map_err(|e| sql_error(Op::Append, Some(run), e))?;
        stmt.query_row([run.as_str()], |r| r.get::<_, Option<i64>>(0))
            .map(|t| t.map(Seq))
            .map_err(|e| sql_error(Op::Append, Some(run), e))
    }

    fn insert_entry(&self, run: &RunId, entry: &JournalEntry, payload: &str) -> StoreResult<()> {
        let inserted = if self.defects.has(StoreDefect::NoSeqGuard) {
            self.exec(
                Op::Append,
                run,
                "INSERT INTO entries (run_id, seq, payload) VALUES (?1, ?2, ?3)",
                params![run.as_str(), entry.seq.0, payload],
            )?
        } else {
            // S5: the guard and the insert are one statement.
            self.exec(
                Op::Append,
                run,
                "INSERT INTO entries (run_id, seq, payload) SELECT ?1, ?2, ?3
                 WHERE NOT EXISTS (SELECT 1 FROM entries WHERE run_id = ?1 AND seq >= ?2)",
                params![run.as_str(), entry.seq.0, payload],
            )?
        };
        if inserted == 1 {
            Ok(())
        } else {
            Err(StoreError::JournalOrder { run: run.clone(), seq: entry.seq, tail: self.tail(run)? })
        }
    }

    fn upsert_meta(&self, meta: &RunMeta, payload: &str) -> StoreResult<()> {
        self.exec(
            Op::PutMeta,
            &meta.run_id,
            "INSERT INTO meta (run_id, status, name, payload) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, name = excluded.name, payload = excluded.payload",
            params![meta.run_id.as_str(), meta.status.as_str(), meta.name, payload],
        )
        .map(drop)
    }

    fn delete_rows(&self, run: &RunId) -> StoreResult<()> {
        for sql in [
            "DELETE FROM entries WHERE run_id = ?1",
            "DELETE FROM meta WHERE run_id = ?1",
            "DELETE FROM leases WHERE run_id = ?1",
        ] {
            self.exec(Op::Delete, run, sql, [run.as_str()])?;
        }
        if self.defects.has(StoreDefect::EpochResetOnDelete) {
            self.exec(Op::Delete, run, "DELETE FROM epochs WHERE run_id = ?1", [run.as_str()])?;
        }
        Ok(())
    }

    fn query_payloads(
        &self,
        op: Op,
        run: Option<&RunId>,
        sql: &str,
        args: impl rusqlite::Params,
    ) -> StoreResult<Vec<String>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| sql_error(op, run, e))?;
        let rows = stmt.query_map(args, |r| r.get::<_, String>(0)).map_err(|e| sql_error(op, run, e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| sql_error(op, run, e))
    }
}

fn to_json<T: serde::Serialize>(op: Op, value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::storage(op, format!("cannot encode payload: {e}")))
}

fn from_json<T: serde::de::DeserializeOwned>(op: Op, run: Option<&RunId>, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| {
        let run = run.map_or(String::new(), |r| format!(" run={r}"));
        StoreError::storage(op, format!("corrupt payload: {e}{run}"))
    })
}

impl JournalStore for SqliteStore {
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()> {
        let payload = to_json(Op::Append, entry)?;
        match lease {
            // S7: unleased, one autocommit statement.
            None => self.insert_entry(run, entry, &payload),
            Some(lease) => self.fenced(Op::Append, run, lease, || self.insert_entry(run, entry, &payload)),
        }
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        self.query_payloads(
            Op::Load,
            Some(run),
            "SELECT payload FROM entries WHERE run_id = ?1 ORDER BY id",
            [run.as_str()],
        )?
        .iter()
        .map(|p| from_json(Op::Load, Some(run), p))
        .collect()
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        let payload = to_json(Op::PutMeta, meta)?;
        match self.effective(lease, StoreDefect::UnfencedMeta) {
            None => self.upsert_meta(meta, &payload),
            Some(lease) => self.fenced(Op::PutMeta, &meta.run_id, lease, || self.upsert_meta(meta, &payload)),
        }
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        let payloads = match filter.status_set() {
            None => self.query_payloads(Op::ListRuns, None, "SELECT payload FROM meta ORDER BY run_id", [])?,
            Some(set) if set.is_empty() => Vec::new(),
            Some(set) => {
                let marks = vec!["?"; set.len()].join(", ");
                let sql = format!("SELECT payload FROM meta WHERE status IN ({marks}) ORDER BY run_id");
                let names: Vec<&str> = set.iter().map(|s| s.as_str()).collect();
                self.query_payloads(Op::ListRuns, None, &sql, rusqlite::params_from_iter(names))?
            }
        };
        let mut metas = Vec::with_capacity(payloads.len());
        for p in &payloads {
            let meta: RunMeta = from_json(Op::ListRuns, None, p)?;
            if filter.matches(&meta) {
                metas.push(meta);
            }
        }
        Ok(metas)
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        let found =
            self.query_payloads(Op::GetMeta, Some(run), "SELECT payload FROM meta WHERE run_id = ?1", [run.as_str()])?;
        found.first().map(|p| from_json(Op::GetMeta, Some(run), p)).transpose()
    }

    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()> {
        match self.effective(lease, StoreDefect::UnfencedDelete) {
            // S6: unleased delete is still one transaction.
            None => self.write_txn(Op::Delete, run, || self.delete_rows(run)),
            Some(lease) => self.fenced(Op::Delete, run, lease, || self.delete_rows(run)),
        }
    }

    fn fenced_writes(&self) -> bool {
        true
    }
}

impl LeasableStore for SqliteStore {
    fn acquire(&self, run: &RunId, owner: &str) -> StoreResult<Lease> {
        self.write_txn(Op::Acquire, run, || {
            let now = self.now_ms();
            if let Some((holder, epoch, expires_at)) = self.lease_row(Op::Acquire, run)?
                && now < expires_at
            {
                let requested = Lease { run: run.clone(), owner: owner.to_owned(), epoch: Epoch(0) };
                return Err(StoreError::lease_held(
                    Op::Acquire,
                    requested,
                    LeaseRejection::HeldBy { owner: holder, epoch: Epoch(epoch) },
                ));
            }
            self.fire(FaultPoint::AcquireChecked, Op::Acquire, run);
            let mut stmt = self
                .conn
                .prepare_cached("SELECT epoch FROM epochs WHERE run_id = ?1")
                .map_err(|e| sql_error(Op::Acquire, Some(run), e))?;
            let high: Option<i64> =
                stmt.query_row([run.as_str()], |r| r.get(0)).optional().map_err(|e| sql_error(Op::Acquire, Some(run), e))?;
            let epoch = high.unwrap_or(0) + 1;
            self.exec(
                Op::Acquire,
                run,
                "INSERT INTO epochs (run_id, epoch) VALUES (?1, ?2) ON CONFLICT (run_id) DO UPDATE SET epoch = excluded.epoch",
                params![run.as_str(), epoch],
            )?;
            self.exec(
                Op::Acquire,
                run,
                "INSERT INTO leases (run_id, owner, epoch, expires_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at",
                params![run.as_str(), owner, epoch, now + i64::from(self.ttl_ms)],
            )?;
            Ok(Lease { run: run.clone(), owner: owner.to_owned(), epoch: Epoch(epoch) })
        })
    }

    fn renew(&self, lease: &Lease) -> StoreResult<()> {
        self.fenced(Op::Renew, &lease.run, lease, || {
            let (run, expires_at) = (lease.run.as_str(), self.now_ms() + i64::from(self.ttl_ms));
            let changed = if self.defects.has(StoreDefect::NonAtomicFence) {
                self.exec(
                    Op::Renew,
                    &lease.run,
                    "UPDATE leases SET expires_at = ?2 WHERE run_id = ?1",
                    params![run, expires_at],
                )?
            } else {
                // S3: owner and epoch pinned, so even a drifted check only touches our own row.
                self.exec(
                    Op::Renew,
                    &lease.run,
                    "UPDATE leases SET expires_at = ?4 WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3",
                    params![run, lease.owner, lease.epoch.0, expires_at],
                )?
            };
            pinned_row_changed(Op::Renew, lease, changed)
        })
    }

    fn release(&self, lease: &Lease) -> StoreResult<()> {
        let released = self.fenced(Op::Release, &lease.run, lease, || {
            let run = lease.run.as_str();
            let changed = if self.defects.has(StoreDefect::NonAtomicFence) {
                self.exec(Op::Release, &lease.run, "DELETE FROM leases WHERE run_id = ?1", [run])?
            } else {
                self.exec(
                    Op::Release,
                    &lease.run,
                    "DELETE FROM leases WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3",
                    params![run, lease.owner, lease.epoch.0],
                )?
            };
            pinned_row_changed(Op::Release, lease, changed)
        });
        match released {
            Err(StoreError::LeaseHeld(_)) if self.defects.has(StoreDefect::StaleReleaseAccepted) => Ok(()),
            other => other,
        }
    }

    fn lease_ttl_ms(&self) -> u32 {
        self.ttl_ms
    }
}

/// After a passed fence check the pinned row exists: anything else means the check and the
/// mutation disagree, which a correct store never allows.
fn pinned_row_changed(op: Op, lease: &Lease, changed: usize) -> StoreResult<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::storage(op, format!("fence check passed but {changed} lease rows matched {lease}")))
    }
}

impl TranscriptStore for SqliteStore {
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> StoreResult<()> {
        let run = RunId::of_ref(blob_ref);
        let put = || {
            self.exec(
                Op::BlobPut,
                &run,
                "INSERT INTO blobs (ref, run_id, data) VALUES (?1, ?2, ?3)
                 ON CONFLICT (ref) DO UPDATE SET data = excluded.data",
                params![blob_ref, run.as_str(), bytes],
            )
            .map(drop)
        };
        match self.effective(lease, StoreDefect::UnfencedBlobs) {
            None => put(),
            Some(lease) => self.fenced(Op::BlobPut, &run, lease, put),
        }
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        let run = RunId::of_ref(blob_ref);
        let mut stmt = self
            .conn
            .prepare_cached("SELECT data FROM blobs WHERE ref = ?1")
            .map_err(|e| sql_error(Op::BlobGet, Some(&run), e))?;
        stmt.query_row([blob_ref], |r| r.get(0)).optional().map_err(|e| sql_error(Op::BlobGet, Some(&run), e))
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        self.query_payloads(
            Op::BlobList,
            Some(run),
            "SELECT ref FROM blobs WHERE run_id = ?1 AND ref <> ?1 ORDER BY ref",
            [run.as_str()],
        )
    }

    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()> {
        let run = RunId::of_ref(blob_ref);
        let delete = || self.exec(Op::BlobDelete, &run, "DELETE FROM blobs WHERE ref = ?1", [blob_ref]).map(drop);
        match self.effective(lease, StoreDefect::UnfencedBlobs) {
            None => delete(),
            Some(lease) => self.fenced(Op::BlobDelete, &run, lease, delete),
        }
    }

    fn fenced_blob_writes(&self) -> bool {
        true
    }
}

impl Store for SqliteStore {
    fn leases(&self) -> Option<&dyn LeasableStore> {
        Some(self)
    }

    fn set_fault_hook(&self, hook: Option<FaultHook>) -> bool {
        *self.hook.borrow_mut() = hook;
        true
    }
}

// ---- boot --------------------------------------------------------------------------------------

fn validate_location(location: &Location) -> StoreResult<()> {
    match location {
        Location::File(path) => {
            if path.is_dir() {
                return Err(StoreError::Config(format!("database path is a folder path={}", path.display())));
            }
            let folder = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if !folder.is_dir() {
                return Err(StoreError::Config(format!("database folder does not exist path={}", path.display())));
            }
            Ok(())
        }
        Location::Memdb(name) => {
            let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if ok {
                Ok(())
            } else {
                Err(StoreError::Config(format!("memdb name must be non-empty [A-Za-z0-9._-] name={name}")))
            }
        }
    }
}

/// One attempt at the whole bootstrap: open, WAL, then the schema in one write transaction.
/// Idempotent, so a busy attempt can be retried whole.
fn boot_once(location: &Location) -> Result<Connection, BootFailure> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = match location {
        Location::File(path) => Connection::open_with_flags(path, flags)?,
        Location::Memdb(name) => Connection::open_with_flags(format!("file:/{name}?vfs=memdb"), flags)?,
    };
    conn.busy_timeout(Duration::ZERO)?;
    // SQLite quietly falls back to read-only when it cannot open the file for writing; a store
    // that cannot write must say so now, not at its first fenced call.
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        return Err(BootFailure::Refused("the database file is not writable".to_owned()));
    }
    // Refuse someone else's database before the WAL switch, which would rewrite its header.
    check_ownership(&conn)?;
    if matches!(location, Location::File(_)) {
        // Not inside the transaction: journal_mode cannot change there. It also ignores the busy
        // handler on some lock transitions, which is why the retry is ours (B2).
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = bootstrap_schema(&conn);
    match result {
        Ok(()) => conn.execute_batch("COMMIT")?,
        Err(_) => {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
    result.map(|()| conn)
}

/// Whether this database is ours (or empty), judged from its header and catalog in one read,
/// so a sibling's bootstrap cannot commit between the reads. Returns whether it still needs the
/// identity stamp.
fn check_ownership(conn: &Connection) -> Result<bool, BootFailure> {
    let (app_id, version, objects): (i64, i64, i64) = conn.query_row(
        "SELECT (SELECT application_id FROM pragma_application_id()),
                (SELECT user_version FROM pragma_user_version()),
                (SELECT count(*) FROM sqlite_master)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    if app_id == 0 && objects == 0 {
        Ok(true)
    } else if app_id != APPLICATION_ID {
        Err(BootFailure::Refused(format!(
            "refusing to use a SQLite database of another application (application_id={app_id})"
        )))
    } else if version != SCHEMA_VERSION {
        Err(BootFailure::Refused(format!(
            "refusing to use a fencesim database of schema version {version}, this build reads {SCHEMA_VERSION}"
        )))
    } else {
        Ok(false)
    }
}

/// Inside the boot transaction: judge ownership again (a sibling may have stamped the file
/// since), stamp a fresh database, create whatever is missing.
fn bootstrap_schema(conn: &Connection) -> Result<(), BootFailure> {
    if check_ownership(conn)? {
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
        ))?;
    }
    conn.execute_batch(schema::DDL)?;
    Ok(())
}

fn boot_error(location: &Location, failure: BootFailure, attempts: u64) -> StoreError {
    let reason = match failure {
        BootFailure::Refused(why) => why,
        BootFailure::Sqlite(e) => match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => "not a SQLite database".to_owned(),
            Some(rusqlite::ErrorCode::CannotOpen) => "cannot open the database file".to_owned(),
            Some(rusqlite::ErrorCode::ReadOnly) => "the database is read-only".to_owned(),
            _ if is_busy(&e) => format!("busy after {attempts} boot attempts: {e}"),
            _ => e.to_string(),
        },
    };
    StoreError::storage(Op::Boot, format!("{reason} location={location}"))
}

/// The SQLITE_BUSY family: primary result code 5, which includes SQLITE_BUSY_RECOVERY (261).
fn is_busy(e: &rusqlite::Error) -> bool {
    e.sqlite_error().is_some_and(|err| err.extended_code & 0xff == 5)
}

fn sql_error(op: Op, run: Option<&RunId>, e: rusqlite::Error) -> StoreError {
    if is_busy(&e) {
        StoreError::Busy { op, run: run.cloned() }
    } else {
        let run = run.map_or(String::new(), |r| format!(" run={r}"));
        StoreError::storage(op, format!("{e}{run}"))
    }
}

/// Several threads running seeds contend on SQLite's global memory-statistics mutex; turn the
/// statistics off before the first connection (design.md). Too late after SQLite initialised,
/// which is harmless: the call then fails and changes nothing.
#[allow(unsafe_code)]
fn disable_memory_statistics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: sqlite3_config with SQLITE_CONFIG_MEMSTATUS takes one int; it is called once,
        // before this process opens its first connection through this crate.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int);
        }
    });
}
