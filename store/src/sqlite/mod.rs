//! `SqliteStore`: the fenced store over one SQLite database (contracts 1.7, 2.1-2.6). Every rule
//! of S1-S9 lives here: the fence check and the mutation share one `BEGIN IMMEDIATE` transaction
//! and one reading of the clock (S1, L9); run-match before the transaction (S2, W3); renew and
//! release pin owner and epoch in their WHERE clause too (S3); acquire bumps the epoch high-water
//! mark, which survives delete (S4, L4); the seq guard is one conditional insert (S5); an expired
//! row is stale for everything but acquire (9.1); a stale release is rejected (L7, strict rule).
//!
//! One `SqliteStore` is one connection. It is `Send` but not `Sync`: give every node or thread its
//! own. Runtime calls never wait for a lock unless a busy timeout is configured: a competing
//! writer surfaces as [`StoreError::Busy`] with nothing committed (B3). Opening lives in `boot`.
//!
//! Inside `fenced()` the order is fixed: run-match, then `BEGIN IMMEDIATE`, one reading of the
//! clock, the lease check, the fault point, the mutation, `COMMIT`; a call that stalls at the
//! fault point still acts as of its check. A guard (`Txn`) rolls back on any error or panic, so a
//! connection never stays inside a transaction.
//!
//! Files: `boot` the opening, `schema` the DDL, `spares` the idle connections of a memdb or a file
//! only the process uses, which a store may take instead of opening one (given back on drop, never
//! from inside a transaction; `Spares::clear` empties every table and the AUTOINCREMENT counter,
//! so the database answers as a freshly booted one would), `memo` the journal entries and metas
//! each connection decoded, by their stored text (a row read again is cloned, not parsed; one whose
//! text changed, a corrupt one included, is decoded afresh), `guard` and `integrity` the operator
//! tools' write guard and scan.
//!
//! Hot statements write a parameter the query planner could look at as `+?N`. The bundled SQLite
//! is built with STAT4, under which a statement whose plan consulted a bound value (an `ORDER BY`
//! or `MAX` over an index prefix) is re-prepared at every rebind; the unary plus keeps the value
//! out of the planner's sight without changing the plan (same index search). Measured: re-parsing
//! was 12% of a simulated world's time. `hot_statements_are_never_reprepared` guards it.

mod boot;
mod guard;
mod integrity;
mod memo;
pub(crate) mod schema;
mod spares;

/// Prepared statements kept per connection: above the store's distinct statements (about 30).
const STATEMENT_CACHE: usize = 64;

const LOAD_SQL: &str = "SELECT payload FROM entries WHERE run_id = +?1 ORDER BY id";
const TAIL_SQL: &str = "SELECT MAX(seq) FROM entries WHERE run_id = +?1";
const LIST_BLOBS_SQL: &str = "SELECT ref FROM blobs WHERE run_id = +?1 AND ref <> +?1 ORDER BY ref";
/// `list_blobs` under the planted `list-blobs-prefix`: refs matched by prefix, not by run.
const LIST_BLOBS_PREFIX_SQL: &str = "SELECT ref FROM blobs WHERE ref LIKE +?1 || '%' AND ref <> +?1 ORDER BY ref";

use std::cell::{Cell, RefCell};
use std::fmt;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use crate::clock::Clock;
use crate::defects::{StoreDefect, StoreDefects};
use crate::error::{LeaseRejection, Op, StoreError, StoreResult};
use crate::fault::{FaultAction, FaultHook, FaultPoint, FaultSite};
use crate::spi::{JournalStore, LeasableStore, Store, TranscriptStore};
use crate::types::{Epoch, JournalEntry, Lease, RunFilter, RunId, RunMeta, Seq};

pub use boot::validate_ttl;
pub use guard::JournalDigest;
pub use integrity::IntegrityFinding;
pub use schema::{APPLICATION_ID, SCHEMA_VERSION, TABLES};
pub use spares::Spares;

/// The wall-clock bound of the boot retry (B2).
pub const BOOT_BUSY_TIMEOUT_MS: u64 = 5_000;

/// Where the database lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A database file, in WAL mode. Its folder must exist. Always a path, never a URI.
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
    /// Lease expiry is computed from this clock and nothing else. There is no default: a
    /// simulated node must never fall back to real time by omission.
    pub clock: Arc<dyn Clock>,
    /// Validated at open: an integer in 1..=2147483647 (B1).
    pub lease_ttl_ms: i64,
    /// How long a runtime call waits for another connection's write lock; 0 (the default) fails
    /// fast with `Busy`, which the simulator needs. The soak sets a real bound.
    pub busy_timeout_ms: u32,
    /// The wall-clock bound of the boot retry.
    pub boot_busy_timeout_ms: u64,
    /// Open an existing fencesim database of exactly this schema through a read-only connection:
    /// nothing is created, switched, stamped or recovered, and the file's bytes never change.
    /// Every write then fails with a storage error. Files only.
    pub read_only: bool,
    /// Whether a commit waits for its WAL frames to reach the disk (`synchronous=FULL`, SQLite's
    /// default, and this option's). Off (`synchronous=OFF`) only where a crash is a process death
    /// and never a power cut, as in a simulated world: what reached the OS survives a process
    /// death either way. Locking, the WAL and checkpoints are unchanged. No effect on a memdb.
    pub power_safe: bool,
    pub defects: StoreDefects,
    /// Take an idle connection from these spares instead of opening one, and give it back when
    /// the store drops ([`Spares`]). The location must be the spares', and a file's settings the
    /// ones its spares were made with.
    pub spares: Option<Arc<Spares>>,
    /// The caller vouches that an earlier store of this process booted this database file
    /// completely, and that nothing outside it touches the file: the read-only probe that keeps
    /// a foreign or half-made file from being written is skipped (a read-only connection of its
    /// own, opened, read and closed for every store of a file world). Everything else is as
    /// always, the switch to WAL included. Off by default; no effect on a memdb or a read-only
    /// store.
    pub booted: bool,
    /// Checkpoint the WAL once it holds this many frames (`PRAGMA wal_autocheckpoint`; SQLite's
    /// default when `None` is 1000). A short-lived file does better with a small WAL rewritten
    /// in place than with one grown to megabytes and unlinked at close. Files only.
    pub checkpoint_frames: Option<u32>,
}

impl SqliteOptions {
    pub fn new(location: Location, clock: Arc<dyn Clock>) -> Self {
        Self {
            location,
            clock,
            lease_ttl_ms: i64::from(crate::LEASE_TTL_MS_DEFAULT),
            busy_timeout_ms: 0,
            boot_busy_timeout_ms: BOOT_BUSY_TIMEOUT_MS,
            read_only: false,
            power_safe: true,
            defects: StoreDefects::NONE,
            spares: None,
            booted: false,
            checkpoint_frames: None,
        }
    }

    pub fn file(path: impl Into<PathBuf>, clock: Arc<dyn Clock>) -> Self {
        Self::new(Location::File(path.into()), clock)
    }

    pub fn memdb(name: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self::new(Location::Memdb(name.into()), clock)
    }

    pub fn lease_ttl_ms(mut self, ttl_ms: i64) -> Self {
        self.lease_ttl_ms = ttl_ms;
        self
    }

    pub fn busy_timeout_ms(mut self, ms: u32) -> Self {
        self.busy_timeout_ms = ms;
        self
    }

    /// See [`SqliteOptions::read_only`].
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    pub fn defects(mut self, defects: StoreDefects) -> Self {
        self.defects = defects;
        self
    }

    /// See [`SqliteOptions::power_safe`]: commits no longer wait for an fsync.
    pub fn without_fsync(mut self) -> Self {
        self.power_safe = false;
        self
    }

    /// See [`SqliteOptions::checkpoint_frames`].
    pub fn checkpoint_every(mut self, frames: u32) -> Self {
        self.checkpoint_frames = Some(frames);
        self
    }

    /// See [`SqliteOptions::booted`].
    pub fn booted(mut self) -> Self {
        self.booted = true;
        self
    }

    /// See [`SqliteOptions::spares`].
    pub fn spares(mut self, spares: Arc<Spares>) -> Self {
        self.spares = Some(spares);
        self
    }
}

/// A store's connection: given back to its spares, if it came with some, when the store drops.
struct Conn {
    conn: Option<Connection>,
    spares: Option<Arc<Spares>>,
}

impl Deref for Conn {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        // Only `drop` takes it out.
        self.conn.as_ref().expect("a store's connection lives as long as the store")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let (Some(conn), Some(spares)) = (self.conn.take(), &self.spares) {
            spares.returned(conn);
        }
    }
}

pub struct SqliteStore {
    conn: Conn,
    location: Location,
    ttl_ms: u32,
    clock: Arc<dyn Clock>,
    defects: StoreDefects,
    hook: RefCell<Option<FaultHook>>,
    /// Clock reads so far; `fenced()` asserts that a fenced call reads it once.
    clock_reads: Cell<u64>,
    /// Journal entries and metas decoded so far, by their stored text (`memo.rs`).
    entries: memo::Memo<JournalEntry>,
    metas: memo::Memo<RunMeta>,
    /// Inside [`SqliteStore::write_transaction`]: each call's transaction is a savepoint in it.
    outer: Cell<bool>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore").field("location", &self.location).field("ttl_ms", &self.ttl_ms).finish()
    }
}

/// Rolls back the transaction it guards unless it was committed, also when a fault hook panics,
/// so a connection is never left inside a transaction. A call nested in a
/// [`SqliteStore::write_transaction`] is a savepoint, rolled back to (and released) unless it
/// was released.
struct Txn<'a> {
    conn: &'a Connection,
    /// `Some(released)` for a savepoint.
    savepoint: Option<bool>,
}

impl<'a> Txn<'a> {
    fn top(conn: &'a Connection) -> Self {
        Txn { conn, savepoint: None }
    }
}

/// The savepoint of a store call nested in a write transaction.
const SAVEPOINT: &str = "SAVEPOINT fencesim_call";
const RELEASE: &str = "RELEASE fencesim_call";
const ROLLBACK_TO: &str = "ROLLBACK TO fencesim_call";

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        // Nothing better to do with a failed rollback than report the first error, which the
        // caller already has. Cached like every statement: a refused acquire rolls back.
        let run = |sql| {
            let _ = self.conn.prepare_cached(sql).and_then(|mut statement| statement.execute([]));
        };
        match self.savepoint {
            None if !self.conn.is_autocommit() => run("ROLLBACK"),
            Some(false) => {
                run(ROLLBACK_TO);
                run(RELEASE);
            }
            _ => {}
        }
    }
}

impl SqliteStore {
    /// Validate the options, open the database and bootstrap the schema. Concurrent opens of one
    /// fresh file are legal: the whole idempotent bootstrap is retried while it fails busy, until
    /// `boot_busy_timeout_ms` of wall-clock time has passed (B2). A location that exists but is
    /// not a fencesim database is refused before anything is written to it.
    /// With spares, an idle one is taken (still validating the ttl); only when none is idle is a
    /// connection opened and booted, to be given back in turn.
    pub fn open(options: SqliteOptions) -> StoreResult<SqliteStore> {
        let spare = match &options.spares {
            Some(spares) => {
                spares.check(&options)?;
                let ttl_ms = boot::validate_ttl(options.lease_ttl_ms)?;
                spares.take_for(options.busy_timeout_ms)?.map(|conn| (conn, ttl_ms))
            }
            None => None,
        };
        let (conn, ttl_ms) = match spare {
            Some(taken) => taken,
            None => boot::open(&options)?,
        };
        // Expiry is `now + ttl` (`expiry_after`): a ttl of 0 would hand out leases already expired.
        assert!(
            (1..=crate::TIMER_MS_MAX).contains(&ttl_ms),
            "a store opened with an unvalidated lease ttl of {ttl_ms} ms (B1)"
        );
        // A booted connection committed its bootstrap, and a spare is kept only outside a
        // transaction: `write_txn`'s `BEGIN IMMEDIATE` must not meet one already open.
        assert!(conn.is_autocommit(), "a store of {} opened inside a transaction", options.location);
        // Every statement of the store stays prepared: rusqlite's default cache holds 16, fewer
        // than the store uses, and an evicted statement is parsed again at its next use.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        if let Some(spares) = &options.spares {
            spares.lend();
        }
        Ok(SqliteStore {
            conn: Conn { conn: Some(conn), spares: options.spares.clone() },
            location: options.location,
            ttl_ms,
            clock: options.clock,
            defects: options.defects,
            hook: RefCell::new(None),
            clock_reads: Cell::new(0),
            entries: memo::Memo::default(),
            metas: memo::Memo::default(),
            outer: Cell::new(false),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// `PRAGMA quick_check` and the row-level checks SQLite cannot make (seqs that repeat, skip or
    /// disagree with their payload, entries without a meta row, undecodable payloads, epochs that
    /// are not positive). Reads only. Empty when every row can be trusted.
    pub fn scan_integrity(&self) -> StoreResult<Vec<IntegrityFinding>> {
        integrity::scan(&self.conn)
    }

    /// The underlying connection, for tools and benchmarks. Writes through it bypass every fence.
    pub fn raw_connection(&self) -> &Connection {
        &self.conn
    }

    fn expiry_after(&self, now: i64) -> i64 {
        now.saturating_add(i64::from(self.ttl_ms))
    }

    /// Call the fault hook, if any. It is taken out while it runs, so a hook that (against the
    /// rules) calls back into this store finds none instead of a borrowed cell. A hook that
    /// answers [`FaultAction::Crash`] cuts the call here: the error returns through every `?`,
    /// and the open transaction, if any, rolls back as the caller's death would leave it.
    fn fire(&self, point: FaultPoint, op: Op, run: &RunId) -> StoreResult<()> {
        let taken = self.hook.borrow_mut().take();
        let Some(mut hook) = taken else { return Ok(()) };
        let action = hook(&FaultSite { point, op, run });
        let mut slot = self.hook.borrow_mut();
        if slot.is_none() {
            *slot = Some(hook);
        }
        match action {
            FaultAction::Resume => Ok(()),
            FaultAction::Crash => Err(StoreError::storage(op, format!("cut at {}: the caller died", point.as_str()))),
        }
    }

    /// One write statement of a call, then the [`FaultPoint::Statement`] after it.
    fn write(&self, op: Op, run: &RunId, sql: &str, args: impl rusqlite::Params) -> StoreResult<usize> {
        let changed = self.exec(op, run, sql, args)?;
        self.fire(FaultPoint::Statement, op, run)?;
        Ok(changed)
    }

    fn exec(&self, op: Op, run: &RunId, sql: &str, args: impl rusqlite::Params) -> StoreResult<usize> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| sql_error(op, Some(run), e))?;
        stmt.execute(args).map_err(|e| sql_error(op, Some(run), e))
    }

    /// One row of a cached query, or none.
    fn query_opt<T>(
        &self,
        op: Op,
        run: &RunId,
        sql: &str,
        args: impl rusqlite::Params,
        row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> StoreResult<Option<T>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| sql_error(op, Some(run), e))?;
        stmt.query_row(args, row).optional().map_err(|e| sql_error(op, Some(run), e))
    }

    /// Every row of a cached query, mapped by `row`.
    fn query_rows<T>(
        &self,
        op: Op,
        run: Option<&RunId>,
        sql: &str,
        args: impl rusqlite::Params,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> StoreResult<Vec<T>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| sql_error(op, run, e))?;
        let rows = stmt.query_map(args, row).map_err(|e| sql_error(op, run, e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| sql_error(op, run, e))
    }

    /// One write transaction. `BEGIN IMMEDIATE` takes the write lock before anything is read;
    /// a busy there surfaces as is, with nothing to roll back (S1). Any error or panic in `body`
    /// rolls back.
    /// Inside a [`SqliteStore::write_transaction`] it is a savepoint of it instead (the write lock
    /// is held already), released on success and rolled back to on any error.
    fn write_txn<T>(&self, op: Op, run: &RunId, body: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        if self.outer.get() {
            self.exec(op, run, SAVEPOINT, [])?;
            let mut txn = Txn { conn: &self.conn, savepoint: Some(false) };
            let value = body()?;
            self.exec(op, run, RELEASE, [])?;
            txn.savepoint = Some(true);
            return Ok(value);
        }
        self.exec(op, run, "BEGIN IMMEDIATE", [])?;
        // The guard below rolls back only what this call began: the write lock is ours now.
        assert!(!self.conn.is_autocommit(), "{op:?} of {run}: BEGIN IMMEDIATE left the connection in autocommit");
        let _txn = Txn::top(&self.conn);
        let value = body()?;
        self.exec(op, run, "COMMIT", [])?;
        // No connection stays inside a transaction (a spare is given back only outside one).
        assert!(self.conn.is_autocommit(), "{op:?} of {run}: a transaction is still open after its COMMIT");
        Ok(value)
    }

    /// Is `lease` the live holder of its run at `now`? Expired equals stale (contracts 9.1).
    fn check_lease(&self, op: Op, lease: &Lease, now: i64) -> StoreResult<()> {
        let row = self.query_opt(
            op,
            &lease.run,
            "SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?1",
            [lease.run.as_str()],
            // The holder's name is copied only when it is not the caller's (for the rejection).
            |r| Ok((Some(text(r, 0)?).filter(|o| *o != lease.owner).map(str::to_owned), r.get(1)?, r.get(2)?)),
        )?;
        let expired_counts = self.defects.has(StoreDefect::ExpiredLeaseLive);
        let instant_counts = self.defects.has(StoreDefect::ExpiryInstantLive);
        let live = row
            .filter(|(_, _, expires_at)| now < *expires_at || expired_counts || (instant_counts && now == *expires_at));
        // The planted W7 defect: the W and T surfaces compare the epoch alone.
        let epoch_only = self.defects.has(StoreDefect::EpochOnlyFence)
            && matches!(op, Op::PutMeta | Op::Delete | Op::PutBlob | Op::DeleteBlob);
        match live {
            Some((other_owner, epoch, _)) if (epoch_only || other_owner.is_none()) && epoch == lease.epoch.0 => Ok(()),
            other => Err(StoreError::lease_held(
                op,
                lease.clone(),
                LeaseRejection::Stale {
                    live: other.map(|(o, e, _)| (o.unwrap_or_else(|| lease.owner.clone()), Epoch(e))),
                },
            )),
        }
    }

    /// Run `mutate(now)` only if `lease` is the live holder of `target` at `now`, atomically with
    /// the check (S1, S2, L9, W4). The clock is read once: a call that stalls between its check
    /// and its mutation still acts as of the check.
    fn fenced<T>(
        &self,
        op: Op,
        target: &RunId,
        lease: &Lease,
        mutate: impl FnOnce(i64) -> StoreResult<T>,
    ) -> StoreResult<T> {
        if lease.run != *target && !self.skips_run_match(op) {
            return Err(StoreError::lease_held(
                op,
                lease.clone(),
                LeaseRejection::RunMismatch { target: target.clone() },
            ));
        }
        if self.defects.has(StoreDefect::NonAtomicFence) {
            // D3: the check is one autocommit read and the mutation runs after it, unguarded.
            self.check_lease(op, lease, self.now_ms())?;
            self.fire(FaultPoint::FenceChecked, op, &lease.run)?;
            return mutate(self.now_ms());
        }
        let reads_before = self.clock_reads.get();
        let value = self.write_txn(op, target, || {
            // What the fence relies on: the check and the mutation are one write transaction,
            // under one clock reading, for the run the lease names.
            assert!(!self.conn.is_autocommit(), "fenced {op:?}: the lease check runs outside a transaction");
            assert!(
                lease.run == *target || self.skips_run_match(op),
                "fenced {op:?}: a lease of {} fences a write to {target}",
                lease.run
            );
            let now = self.now_ms();
            self.check_lease(op, lease, now)?;
            self.fire(FaultPoint::FenceChecked, op, &lease.run)?;
            let value = mutate(now);
            assert!(!self.conn.is_autocommit(), "fenced {op:?}: the mutation left the transaction");
            value
        });
        // Once when the body ran (none when BEGIN itself failed), never twice.
        let reads = self.clock_reads.get() - reads_before;
        assert!(
            reads <= 1 && (value.is_err() || reads == 1),
            "fenced {op:?}: the clock was read {reads} times between the check and the mutation"
        );
        value
    }

    /// Whether a planted defect drops the run-match rule (S2) for `op`.
    fn skips_run_match(&self, op: Op) -> bool {
        self.defects.has(StoreDefect::NoRunMatch)
            || (op == Op::DeleteBlob && self.defects.has(StoreDefect::BlobDeleteNoRunMatch))
    }

    /// The store's clock, counted: a fenced call reads it exactly once (asserted in `fenced`).
    fn now_ms(&self) -> i64 {
        self.clock_reads.set(self.clock_reads.get() + 1);
        self.clock.now_ms()
    }

    /// The lease a call is fenced by, after planted defects that ignore it.
    fn effective<'l>(&self, lease: Option<&'l Lease>, ignored_by: StoreDefect) -> Option<&'l Lease> {
        lease.filter(|_| !self.defects.has(ignored_by))
    }

    fn insert_entry(&self, run: &RunId, entry: &JournalEntry, payload: &str) -> StoreResult<()> {
        let sql = if self.defects.has(StoreDefect::NoSeqGuard) {
            "INSERT INTO entries (run_id, seq, payload) VALUES (?1, ?2, ?3)"
        } else {
            // S5: the guard and the insert are one statement.
            "INSERT INTO entries (run_id, seq, payload) SELECT ?1, ?2, ?3
             WHERE NOT EXISTS (SELECT 1 FROM entries WHERE run_id = ?1 AND seq >= ?2)"
        };
        let inserted = self.write(Op::Append, run, sql, params![run.as_str(), entry.seq.0, payload])?;
        // One row or none: the guard (S5) and the insert are one statement of one VALUES row.
        assert!(inserted <= 1, "append of {run} seq {} inserted {inserted} rows", entry.seq);
        if inserted == 1 {
            return Ok(());
        }
        // The tail is for the message only: a failed read must not change the error's class.
        let tail = self
            .query_opt(Op::Append, run, TAIL_SQL, [run.as_str()], |r| r.get::<_, Option<i64>>(0))
            .ok()
            .flatten()
            .flatten()
            .map(Seq);
        Err(StoreError::JournalOrder { run: run.clone(), seq: entry.seq, tail })
    }

    fn upsert_meta(&self, meta: &RunMeta, payload: &str) -> StoreResult<()> {
        let changed = self.write(
            Op::PutMeta,
            &meta.run_id,
            "INSERT INTO meta (run_id, status, name, payload) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, name = excluded.name, payload = excluded.payload",
            params![meta.run_id.as_str(), meta.status.as_str(), meta.name, payload],
        )?;
        // An upsert of one VALUES row inserts it or updates the one row of its key: a meta write
        // that reports success wrote exactly the run's meta row.
        assert_eq!(changed, 1, "put_meta of {}: the upsert changed {changed} rows", meta.run_id);
        Ok(())
    }

    fn delete_rows(&self, run: &RunId, leased: bool) -> StoreResult<()> {
        let keeps_lease = !leased && self.defects.has(StoreDefect::PurgeKeepsLeaseRow);
        let statements = [
            "DELETE FROM entries WHERE run_id = ?1",
            "DELETE FROM meta WHERE run_id = ?1",
            "DELETE FROM leases WHERE run_id = ?1",
        ];
        for (i, sql) in statements.into_iter().enumerate() {
            if keeps_lease && sql.contains("leases") {
                continue;
            }
            if i > 0 && self.defects.has(StoreDefect::DeleteInPieces) {
                // The planted defect: what the statements before deleted is committed now.
                self.exec(Op::Delete, run, "COMMIT", [])?;
                self.exec(Op::Delete, run, "BEGIN IMMEDIATE", [])?;
            }
            self.write(Op::Delete, run, sql, [run.as_str()])?;
        }
        if self.defects.has(StoreDefect::EpochResetOnDelete)
            || (!leased && self.defects.has(StoreDefect::AdminDeleteDropsTombstone))
        {
            self.write(Op::Delete, run, "DELETE FROM epochs WHERE run_id = ?1", [run.as_str()])?;
        }
        Ok(())
    }
}

/// Column `i` as text borrowed from the row (no copy: a memo hit then allocates nothing); a value
/// that is not UTF-8 text fails as `get::<String>` would.
fn text<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> rusqlite::Result<&'r str> {
    if let Ok(rusqlite::types::ValueRef::Text(bytes)) = r.get_ref(i)
        && let Ok(text) = std::str::from_utf8(bytes)
    {
        return Ok(text);
    }
    match r.get::<_, String>(i) {
        Err(e) => Err(e),
        Ok(_) => Err(rusqlite::Error::InvalidColumnType(i, String::new(), rusqlite::types::Type::Text)),
    }
}

fn to_json<T: serde::Serialize>(op: Op, run: &RunId, value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidPayload {
        op,
        run: run.clone(),
        reason: format!("cannot encode: {e}"),
    })
}

fn from_json<T: serde::de::DeserializeOwned>(op: Op, run: &RunId, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::storage(op, format!("corrupt payload: {e} run={run}")))
}

impl JournalStore for SqliteStore {
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()> {
        entry.check_fields(run)?;
        let payload = to_json(Op::Append, run, entry)?;
        match lease {
            // S7: unleased, one autocommit statement.
            None => self.insert_entry(run, entry, &payload),
            Some(lease) => self.fenced(Op::Append, run, lease, |_| self.insert_entry(run, entry, &payload)),
        }
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        let sql = LOAD_SQL;
        let rows = self.query_rows(Op::Load, Some(run), sql, [run.as_str()], |r| {
            Ok(self.entries.decode(text(r, 0)?, |payload| from_json(Op::Load, run, payload)))
        })?;
        rows.into_iter().collect()
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        meta.check_fields()?;
        let payload = to_json(Op::PutMeta, &meta.run_id, meta)?;
        match self.effective(lease, StoreDefect::UnfencedMeta) {
            None => self.upsert_meta(meta, &payload),
            Some(lease) => self.fenced(Op::PutMeta, &meta.run_id, lease, |_| self.upsert_meta(meta, &payload)),
        }
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        // S8: narrow by status and name in SQL, then apply the whole filter to what comes back.
        let statuses = filter.status_set();
        if statuses.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let mut sql = "SELECT run_id, payload FROM meta WHERE 1".to_owned();
        let mut args: Vec<&str> = Vec::new();
        if let Some(set) = &statuses {
            // An empty status set returned above: the IN list always has a member.
            assert!(!set.is_empty(), "list_runs built an empty IN list");
            // `+status`: a run table is small, and scanning it in run id order beats the status
            // index, whose IN lookup builds a temporary table and whose rows need a sort.
            sql += &format!(" AND +status IN ({})", vec!["+?"; set.len()].join(", "));
            args.extend(set.iter().map(|s| s.as_str()));
        }
        if let Some(name) = &filter.name {
            sql += " AND name = +?";
            args.push(name);
        }
        sql += " ORDER BY run_id";
        // One bound argument per placeholder: the filter is bound, never spliced into the SQL.
        assert_eq!(sql.matches('?').count(), args.len(), "list_runs binds {} arguments", args.len());
        // Each payload decoded as its row is read; a corrupt one names its run.
        let rows = self.query_rows(Op::ListRuns, None, &sql, rusqlite::params_from_iter(args), |r| {
            Ok(self.metas.decode(text(r, 1)?, |payload| match text(r, 0) {
                Ok(run) => from_json(Op::ListRuns, &RunId::new(run), payload),
                Err(e) => Err(sql_error(Op::ListRuns, None, e)),
            }))
        })?;
        rows.into_iter().filter(|meta| meta.as_ref().map_or(true, |meta| filter.matches(meta))).collect()
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        let meta =
            self.query_opt(Op::GetMeta, run, "SELECT payload FROM meta WHERE run_id = ?1", [run.as_str()], |r| {
                Ok(self.metas.decode(text(r, 0)?, |payload| from_json(Op::GetMeta, run, payload)))
            })?;
        meta.transpose()
    }

    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()> {
        match self.effective(lease, StoreDefect::UnfencedDelete) {
            // S6: unleased delete is still one transaction.
            None => self.write_txn(Op::Delete, run, || self.delete_rows(run, false)),
            Some(lease) => self.fenced(Op::Delete, run, lease, |_| self.delete_rows(run, true)),
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
            let row = self.query_opt(
                Op::Acquire,
                run,
                "SELECT owner, epoch FROM leases WHERE run_id = ?1 AND expires_at > ?2",
                params![run.as_str(), now],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
            )?;
            if let Some((holder, epoch)) = row {
                let requested = Lease { run: run.clone(), owner: owner.to_owned(), epoch: Epoch(0) };
                return Err(StoreError::lease_held(
                    Op::Acquire,
                    requested,
                    LeaseRejection::HeldBy { owner: holder, epoch: Epoch(epoch) },
                ));
            }
            self.fire(FaultPoint::AcquireChecked, Op::Acquire, run)?;
            let high = self.query_opt(
                Op::Acquire,
                run,
                "SELECT epoch FROM epochs WHERE run_id = ?1",
                [run.as_str()],
                |r| r.get::<_, i64>(0),
            )?;
            let reclaimed = if self.defects.has(StoreDefect::AcquireReclaimsOwnEpoch) {
                let sql = "SELECT epoch FROM leases WHERE run_id = ?1 AND owner = ?2";
                self.query_opt(Op::Acquire, run, sql, params![run.as_str(), owner], |r| r.get::<_, i64>(0))?
            } else {
                None
            };
            let next = || high.unwrap_or(0).checked_add(1).filter(|e| *e > 0);
            let epoch = reclaimed.or_else(next).ok_or_else(|| StoreError::Overflow {
                op: Op::Acquire,
                run: run.clone(),
                what: format!("epoch {}", high.unwrap_or(0)),
            })?;
            // L3, L4: a grant's epoch is above every epoch the run ever had (the planted
            // `acquire-reclaims-own-epoch` hands back an old one on purpose).
            assert!(
                reclaimed.is_some() || (high.is_none_or(|high| epoch > high) && epoch > 0),
                "acquire of {run}: epoch {epoch} is not above the high-water mark {high:?}"
            );
            let marked = self.write(
                Op::Acquire,
                run,
                "INSERT INTO epochs (run_id, epoch) VALUES (?1, ?2) ON CONFLICT (run_id) DO UPDATE SET epoch = excluded.epoch",
                params![run.as_str(), epoch],
            )?;
            // L4: the high-water mark is one row per run, written (not skipped) at every grant.
            assert_eq!(marked, 1, "acquire of {run}: the epoch mark upsert changed {marked} rows");
            let leased = self.write(
                Op::Acquire,
                run,
                "INSERT INTO leases (run_id, owner, epoch, expires_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at",
                params![run.as_str(), owner, epoch, self.expiry_after(now)],
            )?;
            // The lease handed back is the run's one lease row: renew and release pin it (S3).
            assert_eq!(leased, 1, "acquire of {run}: the lease row upsert changed {leased} rows");
            Ok(Lease { run: run.clone(), owner: owner.to_owned(), epoch: Epoch(epoch) })
        })
    }

    fn renew(&self, lease: &Lease) -> StoreResult<()> {
        self.fenced(Op::Renew, &lease.run, lease, |now| {
            let (run, expires_at) = (lease.run.as_str(), self.expiry_after(now));
            let changed = if self.defects.has(StoreDefect::NonAtomicFence) {
                let sql = "UPDATE leases SET expires_at = ?2 WHERE run_id = ?1";
                self.write(Op::Renew, &lease.run, sql, params![run, expires_at])?
            } else if self.defects.has(StoreDefect::RenewExtendsOldExpiry) {
                let sql =
                    "UPDATE leases SET expires_at = expires_at + ?4 WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3";
                self.write(
                    Op::Renew,
                    &lease.run,
                    sql,
                    params![run, lease.owner, lease.epoch.0, i64::from(self.ttl_ms)],
                )?
            } else {
                // S3: owner and epoch pinned, so even a drifted check only touches our own row.
                let sql = "UPDATE leases SET expires_at = ?4 WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3";
                self.write(Op::Renew, &lease.run, sql, params![run, lease.owner, lease.epoch.0, expires_at])?
            };
            pinned_row_changed(Op::Renew, lease, changed)
        })
    }

    fn release(&self, lease: &Lease) -> StoreResult<()> {
        let released = self.fenced(Op::Release, &lease.run, lease, |_| {
            let run = lease.run.as_str();
            let changed = if self.defects.has(StoreDefect::NonAtomicFence) {
                self.write(Op::Release, &lease.run, "DELETE FROM leases WHERE run_id = ?1", [run])?
            } else {
                let sql = "DELETE FROM leases WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3";
                self.write(Op::Release, &lease.run, sql, params![run, lease.owner, lease.epoch.0])?
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
        let put = |_| {
            let sql = "INSERT INTO blobs (ref, run_id, data) VALUES (?1, ?2, ?3)
                       ON CONFLICT (ref) DO UPDATE SET data = excluded.data";
            let changed = self.write(Op::PutBlob, &run, sql, params![blob_ref, run.as_str(), bytes])?;
            // One VALUES row: the blob of that ref is inserted or replaced, nothing else.
            assert_eq!(changed, 1, "put_blob of {blob_ref}: the upsert changed {changed} rows");
            Ok(())
        };
        match self.effective(lease, StoreDefect::UnfencedBlobs) {
            None => put(0),
            Some(lease) => self.fenced(Op::PutBlob, &run, lease, put),
        }
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        let run = RunId::of_ref(blob_ref);
        self.query_opt(Op::GetBlob, &run, "SELECT data FROM blobs WHERE ref = ?1", [blob_ref], |r| r.get(0))
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        let sql = if self.defects.has(StoreDefect::ListBlobsPrefix) { LIST_BLOBS_PREFIX_SQL } else { LIST_BLOBS_SQL };
        self.query_rows(Op::ListBlobs, Some(run), sql, [run.as_str()], |r| r.get(0))
    }

    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()> {
        let run = RunId::of_ref(blob_ref);
        let delete = |_| self.write(Op::DeleteBlob, &run, "DELETE FROM blobs WHERE ref = ?1", [blob_ref]).map(drop);
        match self.effective(lease, StoreDefect::UnfencedBlobs) {
            None => delete(0),
            Some(lease) => self.fenced(Op::DeleteBlob, &run, lease, delete),
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

/// A runtime SQLite error: the busy family is the typed, retryable `Busy`; anything else is a
/// storage error naming the run.
fn sql_error(op: Op, run: Option<&RunId>, e: rusqlite::Error) -> StoreError {
    if boot::is_busy(&e) {
        StoreError::Busy { op, run: run.cloned() }
    } else {
        let run = run.map_or(String::new(), |r| format!(" run={r}"));
        StoreError::storage(op, format!("{e}{run}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::types::{JournalEntry, RunFilter, RunId};

    /// A store whose fault hook crashes a call at its `n`-th statement point (from 1), and a
    /// leased run of three entries and a meta to cut a delete of.
    fn cut_at_statement(name: &str, n: u32, defects: &[StoreDefect]) -> (SqliteStore, Lease) {
        use crate::{JournalStore as _, LeasableStore as _, RunMeta, RunStatus};
        let clock = Arc::new(ManualClock::new(1_000));
        let mut options = SqliteOptions::memdb(name, clock);
        options.defects = StoreDefects::of(defects);
        let store = SqliteStore::open(options).expect("opens");
        let run = RunId::new("r");
        let lease = store.acquire(&run, "w1").expect("acquire");
        for seq in 1..=3 {
            store.append(&run, &JournalEntry::new(seq, "step", "ok"), Some(&lease)).expect("append");
        }
        store.put_meta(&RunMeta::new("r", RunStatus::Ok), Some(&lease)).expect("meta");
        let mut seen = 0;
        store.set_fault_hook(Some(Box::new(move |site| {
            seen += u32::from(site.point == FaultPoint::Statement);
            if site.point == FaultPoint::Statement && seen == n { FaultAction::Crash } else { FaultAction::Resume }
        })));
        (store, lease)
    }

    /// What of the run is left: entries, whether a meta, whether a lease row.
    fn left(store: &SqliteStore) -> (usize, bool, bool) {
        use crate::JournalStore as _;
        let run = RunId::new("r");
        let leases: i64 =
            store.raw_connection().query_row("SELECT count(*) FROM leases", [], |r| r.get(0)).expect("leases");
        (store.load(&run).expect("load").len(), store.get_meta(&run).expect("meta").is_some(), leases == 1)
    }

    /// A crash at any statement of a delete leaves the run whole (S6: one transaction), and the
    /// delete's own statement points are the three of its tables.
    #[test]
    fn a_delete_cut_at_any_statement_leaves_the_run_whole() {
        use crate::JournalStore as _;
        for n in 1..=3 {
            let (store, lease) = cut_at_statement(&format!("cut-{n}"), n, &[]);
            let cut = store.delete(&lease.run, Some(&lease)).expect_err("cut");
            assert!(cut.to_string().contains("cut at statement"), "{cut}");
            assert_eq!(left(&store), (3, true, true), "cut at statement {n}");
        }
        let (store, lease) = cut_at_statement("cut-none", 4, &[]);
        store.delete(&lease.run, Some(&lease)).expect("a delete has three statement points");
        assert_eq!(left(&store), (0, false, false));
    }

    /// The planted `delete-in-pieces` commits table by table: cut after its second statement, the
    /// journal is gone and the meta stays (what `linearizable-reads` sees in a world).
    #[cfg(feature = "defects")]
    #[test]
    fn delete_in_pieces_cut_half_way_leaves_half_a_run() {
        use crate::JournalStore as _;
        let (store, lease) = cut_at_statement("pieces", 2, &[StoreDefect::DeleteInPieces]);
        store.delete(&lease.run, Some(&lease)).expect_err("cut");
        assert_eq!(left(&store), (0, true, true));
    }

    #[test]
    fn borrowed_text_reads_as_an_owned_string_would() {
        let conn = Connection::open_in_memory().expect("db");
        let sql = "SELECT 'ok', X'FF', 7, NULL, CAST(X'C3A9' AS TEXT), CAST(X'FF' AS TEXT)";
        conn.query_row(sql, [], |r| {
            for i in 0..6 {
                let (borrowed, owned) = (text(r, i), r.get::<_, String>(i));
                match (&borrowed, &owned) {
                    (Ok(b), Ok(o)) => assert_eq!(b, o, "column {i}"),
                    (Err(b), Err(o)) => assert_eq!(b.to_string(), o.to_string(), "column {i}"),
                    _ => panic!("column {i}: {borrowed:?} against {owned:?}"),
                }
            }
            assert_eq!(text(r, 4).expect("utf-8"), "é");
            Ok(())
        })
        .expect("row");
    }

    #[test]
    fn a_missing_schema_object_is_refused_not_created_again() {
        let clock = Arc::new(ManualClock::new(1_000));
        let first = SqliteStore::open(SqliteOptions::memdb("boot-half", clock.clone())).expect("opens");
        first.raw_connection().execute_batch("DROP INDEX meta_name").expect("drop");
        // A bootstrap stamps and creates in one transaction: a stamped database with an object
        // missing was made or damaged by something else, and is refused as it is (kit B4).
        let refused = SqliteStore::open(SqliteOptions::memdb("boot-half", clock)).expect_err("half-created");
        assert!(refused.to_string().contains("half-created fencesim schema: 8 of its 9 objects"), "{refused}");
        let count: i64 = first
            .raw_connection()
            .query_row("SELECT count(*) FROM sqlite_master WHERE name = 'meta_name'", [], |r| r.get(0))
            .expect("catalog");
        assert_eq!(count, 0, "the refused open created the missing index");
    }

    /// Opening a database that already holds the whole schema is one catalog read, and that read
    /// lets nothing else through: a foreign object or another schema version is still refused
    /// (each a complete schema plus one difference the quick read must see).
    #[test]
    fn the_quick_open_of_a_complete_database_still_refuses_what_is_not_ours() {
        let clock = Arc::new(ManualClock::new(1_000));
        let open = |name: &str| SqliteStore::open(SqliteOptions::memdb(name, clock.clone()));
        let first = open("quick-foreign").expect("opens");
        open("quick-foreign").expect("a complete database opens again");
        first.raw_connection().execute_batch("CREATE TABLE intruder (x)").expect("foreign table");
        let refused = open("quick-foreign").expect_err("a foreign object");
        assert!(refused.to_string().contains("'intruder' fencesim did not create"), "{refused}");

        let first = open("quick-version").expect("opens");
        first.raw_connection().execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1)).expect("bump");
        let refused = open("quick-version").expect_err("another schema version");
        assert!(refused.to_string().contains("schema version"), "{refused}");
    }

    /// `without_fsync` turns commit syncs off (`synchronous=OFF`) and nothing else: the file stays
    /// in WAL mode; by default commits sync (`FULL`).
    #[test]
    fn without_fsync_changes_only_the_commit_sync() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("sync.db");
        let clock = Arc::new(ManualClock::new(1_000));
        let pragmas = |store: &SqliteStore| -> (i64, String) {
            let conn = store.raw_connection();
            let sync = conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).expect("synchronous");
            let mode = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).expect("journal_mode");
            (sync, mode)
        };
        let safe = SqliteStore::open(SqliteOptions::file(&path, clock.clone())).expect("opens");
        assert_eq!(pragmas(&safe), (2, "wal".to_owned()));
        let fast = SqliteStore::open(SqliteOptions::file(&path, clock).without_fsync()).expect("opens");
        assert_eq!(pragmas(&fast), (0, "wal".to_owned()));
    }

    /// `checkpoint_every` sets the connection's WAL autocheckpoint, and only when asked.
    #[test]
    fn checkpoint_every_sets_the_wal_autocheckpoint() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("checkpoint.db");
        let clock = Arc::new(ManualClock::new(1_000));
        let frames = |store: &SqliteStore| -> u32 {
            store.raw_connection().query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).expect("frames")
        };
        let default = SqliteStore::open(SqliteOptions::file(&path, clock.clone())).expect("opens");
        assert_eq!(frames(&default), 1000);
        let small = SqliteStore::open(SqliteOptions::file(&path, clock).booted().checkpoint_every(100)).expect("opens");
        assert_eq!(frames(&small), 100);
    }

    /// `booted` skips the probe and nothing else: a second store on a file the first booted reads
    /// what the first wrote; on a fresh path nothing is created (the probe and the bootstrap it
    /// decides were really skipped), and the first call fails typed instead.
    #[test]
    fn a_booted_open_skips_the_probe_and_nothing_else() {
        use crate::{JournalEntry, JournalStore as _};
        let dir = tempfile::tempdir().expect("dir");
        let clock = Arc::new(ManualClock::new(1_000));
        let path = dir.path().join("booted.db");
        let first = SqliteStore::open(SqliteOptions::file(&path, clock.clone())).expect("boots");
        let run = RunId::new("r");
        first.append(&run, &JournalEntry::new(1, "step", "ok"), None).expect("append");
        let second = SqliteStore::open(SqliteOptions::file(&path, clock.clone()).booted()).expect("opens");
        assert_eq!(second.load(&run).expect("load").len(), 1);
        let mode: String = second.raw_connection().query_row("PRAGMA journal_mode", [], |r| r.get(0)).expect("mode");
        assert_eq!(mode, "wal");
        let fresh = SqliteStore::open(SqliteOptions::file(dir.path().join("fresh.db"), clock).booted()).expect("opens");
        assert!(matches!(fresh.load(&run), Err(StoreError::Storage { .. })), "no schema was created");
    }

    /// A memdb is made with small pages (cheaper copies into the journal and back); a file keeps
    /// SQLite's default page size, and a memdb's pages hold what a file's do.
    #[test]
    fn a_memdb_has_small_pages_and_a_file_sqlites_default() {
        use crate::{JournalEntry, JournalStore as _};
        let dir = tempfile::tempdir().expect("dir");
        let clock = Arc::new(ManualClock::new(1_000));
        let page_size = |store: &SqliteStore| -> u32 {
            store.raw_connection().query_row("PRAGMA page_size", [], |r| r.get(0)).expect("page_size")
        };
        let memdb = SqliteStore::open(SqliteOptions::memdb("small-pages", clock.clone())).expect("opens");
        let file = SqliteStore::open(SqliteOptions::file(dir.path().join("pages.db"), clock)).expect("opens");
        assert_eq!(page_size(&memdb), super::boot::MEMDB_PAGE_SIZE);
        assert_eq!(page_size(&file), 4096);
        let run = RunId::new("r");
        let big = "x".repeat(3 * 4096);
        for store in [&memdb, &file] {
            store
                .append(&run, &JournalEntry::new(1, "step", "ok").with("out", big.clone().into()), None)
                .expect("append");
        }
        assert_eq!(memdb.load(&run).expect("load"), file.load(&run).expect("load"));
    }

    /// The assertions inside `fenced()` can fail: a mutation that reads the clock again
    /// panics; an honest one passes.
    #[test]
    fn fenced_asserts_what_it_relies_on() {
        use crate::LeasableStore as _;
        let clock = Arc::new(ManualClock::new(1_000));
        let store = SqliteStore::open(SqliteOptions::memdb("fenced-asserts", clock)).expect("opens");
        let run = RunId::new("r");
        let lease = store.acquire(&run, "me").expect("acquire");
        assert_eq!(store.fenced(Op::PutMeta, &run, &lease, |_| Ok(7)).expect("honest"), 7);
        let twice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.fenced(Op::PutMeta, &run, &lease, |_| Ok(store.now_ms()))
        }));
        let message = twice.expect_err("a second clock read").downcast::<String>().expect("a message");
        assert!(message.contains("the clock was read 2 times"), "{message}");
        // The transaction was rolled back and the store still fences honestly.
        assert_eq!(store.fenced(Op::PutMeta, &run, &lease, |_| Ok(8)).expect("honest again"), 8);
    }

    /// What `list_runs` with no filter prepares.
    const LIST_ALL_RUNS_SQL: &str = "SELECT run_id, payload FROM meta WHERE 1 ORDER BY run_id";

    #[test]
    fn hot_statements_are_never_reprepared() {
        let clock = Arc::new(ManualClock::new(1_000));
        let store = SqliteStore::open(SqliteOptions::memdb("hot-statements", clock)).expect("opens");
        let run = RunId::new("r");
        let control = "SELECT payload FROM entries WHERE run_id = ?1 ORDER BY id";
        for seq in 1..=3 {
            store.append(&run, &JournalEntry::new(seq, "k", "s"), None).expect("append");
            let refused = store.append(&run, &JournalEntry::new(seq, "k", "s"), None);
            assert!(refused.is_err_and(|e| e.is_journal_order()), "the tail query runs on a refusal");
            store.load(&run).expect("load");
            let mut stmt = store.raw_connection().prepare_cached(control).expect("control");
            stmt.query_map([run.as_str()], |_| Ok(())).expect("control runs").for_each(drop);
            store.list_blobs(&run).expect("list blobs");
            store.list_runs(&RunFilter::all()).expect("list runs");
        }
        // The measurement can fail: the same query with a bare parameter is re-prepared.
        let stmt = store.raw_connection().prepare_cached(control).expect("cached");
        assert!(stmt.get_status(rusqlite::StatementStatus::RePrepare) > 0, "the control re-prepares");
        drop(stmt);
        for sql in [LOAD_SQL, TAIL_SQL, LIST_BLOBS_SQL, LIST_ALL_RUNS_SQL] {
            let stmt = store.raw_connection().prepare_cached(sql).expect("cached");
            assert_eq!(stmt.get_status(rusqlite::StatementStatus::RePrepare), 0, "{sql}");
        }
    }
}
