//! Spare connections to one database, a memdb or a file only this process uses, for a process
//! that opens many short-lived stores over a database in turn and empties it between them (the
//! simulator opens about ten connections per world, thousands of worlds a minute). A store opened
//! with [`SqliteOptions::spares`] takes an idle connection instead of opening and booting one, and
//! gives it back when it drops, with its prepared statements: opening, schema parsing and first
//! preparation were a fifth of a simulated memdb world's time, and a tenth of a file world's.
//!
//! A connection carries nothing of a store's own: the clock, ttl, defects and fault hook live in
//! the `SqliteStore`, and a connection is only given back outside a transaction. What a file
//! connection does keep (its `synchronous` and `wal_autocheckpoint` settings) is fixed for the
//! spares when they are made, and a store that asks for other settings is refused.
//! [`Spares::clear`] empties every table and the AUTOINCREMENT counter, so what a cleared database
//! answers is what a freshly booted one would: same rows (none), same ids from 1; a file's WAL is
//! then checkpointed and truncated, so it starts empty as a fresh file's does.
//!
//! [`SqliteOptions::spares`]: super::SqliteOptions::spares

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::Connection;

use super::schema::TABLES;
use super::{Location, SqliteOptions, sql_error};
use crate::error::{Op, StoreError, StoreResult};

/// Idle connections to one database. Shared by `Arc` between the stores that give connections
/// back.
pub struct Spares {
    location: Location,
    /// What every connection of a file's spares was opened with: `(power_safe, checkpoint_frames)`
    /// of [`SqliteOptions`]. `None` for a memdb, where neither has an effect.
    settings: Option<(bool, Option<u32>)>,
    idle: Mutex<Vec<Connection>>,
    /// Connections stores hold right now (taken or opened with these spares, not yet dropped).
    lent: AtomicUsize,
}

impl fmt::Debug for Spares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spares").field("location", &self.location).field("idle", &self.idle_count()).finish()
    }
}

impl Spares {
    /// Spares of a memdb.
    pub fn memdb(name: impl Into<String>) -> Self {
        Self::new(Location::Memdb(name.into()), None)
    }

    /// Spares of the database file `options` name, for stores opened with the same `synchronous`
    /// and autocheckpoint settings as `options` (each connection keeps its own). The caller
    /// vouches that nothing outside this process touches the file, as with
    /// [`SqliteOptions::booted`]: a cleared file is taken for a fresh one.
    pub fn file(options: &SqliteOptions) -> StoreResult<Self> {
        match &options.location {
            Location::File(_) => {
                Ok(Self::new(options.location.clone(), Some((options.power_safe, options.checkpoint_frames))))
            }
            Location::Memdb(_) => Err(StoreError::Config("file spares need a database file".to_owned())),
        }
    }

    fn new(location: Location, settings: Option<(bool, Option<u32>)>) -> Self {
        Self { location, settings, idle: Mutex::new(Vec::new()), lent: AtomicUsize::new(0) }
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Connections waiting to be taken.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Empty every table and the AUTOINCREMENT counter through an idle connection, in one
    /// transaction; then, for a file, checkpoint the WAL into the database and truncate it.
    /// `Ok(false)`, with nothing done, while a store still holds a connection (it could write
    /// into what comes next) or when no connection is idle (a memdb no connection holds is gone),
    /// and `Ok(false)`, the tables emptied but the WAL not, when the checkpoint could not finish:
    /// the caller then starts over with a database of its own.
    pub fn clear(&self) -> StoreResult<bool> {
        if self.lent.load(Ordering::SeqCst) > 0 {
            return Ok(false);
        }
        let Some(conn) = self.take() else { return Ok(false) };
        let mut sql = String::from("BEGIN IMMEDIATE;");
        for table in TABLES {
            sql.push_str(&format!("DELETE FROM {table};"));
        }
        sql.push_str("DELETE FROM sqlite_sequence; COMMIT;");
        let result = conn.execute_batch(&sql).and_then(|()| match self.location {
            // (busy, frames in the WAL, frames checkpointed): busy 0 is a WAL now empty.
            Location::File(_) => conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0)),
            Location::Memdb(_) => Ok(0),
        });
        // What is handed on is empty: a row left over would leak into the next world. One cached
        // query over every table (a sweep clears once per world, thousands of times); a read
        // that fails says nothing either way.
        assert!(
            result.is_err() || !leftover_rows(&conn).is_ok_and(|any| any),
            "a cleared spare database of {} still holds rows",
            self.location
        );
        // A failed batch may leave its transaction open; `give_back` closes such a connection.
        self.give_back(conn);
        result.map(|busy| busy == 0).map_err(|e| StoreError::storage(Op::Clear, e.to_string()))
    }

    /// A store took or opened a connection of these spares.
    pub(super) fn lend(&self) {
        self.lent.fetch_add(1, Ordering::SeqCst);
    }

    /// An idle connection, set to wait `busy_timeout_ms` for a lock like a fresh one.
    pub(super) fn take_for(&self, busy_timeout_ms: u32) -> StoreResult<Option<Connection>> {
        let Some(conn) = self.take() else { return Ok(None) };
        // `give_back` keeps only connections outside a transaction: a store starts in none.
        assert!(conn.is_autocommit(), "an idle spare connection of {} is inside a transaction", self.location);
        conn.busy_timeout(Duration::from_millis(u64::from(busy_timeout_ms)))
            .map_err(|e| sql_error(Op::Boot, None, e))?;
        Ok(Some(conn))
    }

    fn take(&self) -> Option<Connection> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    /// A store dropped its connection: keep it for the next store; one left inside a
    /// transaction is closed instead.
    pub(super) fn returned(&self, conn: Connection) {
        let lent = self.lent.fetch_sub(1, Ordering::SeqCst);
        // `clear` trusts the count: one too few would empty a database a store still writes.
        assert!(lent > 0, "a spare connection of {} came back that was never lent", self.location);
        self.give_back(conn);
    }

    fn give_back(&self, conn: Connection) {
        if conn.is_autocommit() {
            self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
        }
    }

    /// Refuse spares of another database than the store's, to a read-only store (a spare
    /// connection writes), and file spares to a store that asks for other connection settings.
    pub(super) fn check(&self, options: &SqliteOptions) -> StoreResult<()> {
        if self.location != options.location {
            return Err(StoreError::Config(format!(
                "spare connections of {} cannot serve a store of {}",
                self.location, options.location
            )));
        }
        if options.read_only {
            return Err(StoreError::Config("a read-only store never takes a spare connection".to_owned()));
        }
        if let Some((power_safe, frames)) = self.settings
            && (power_safe, frames) != (options.power_safe, options.checkpoint_frames)
        {
            return Err(StoreError::Config(format!(
                "spare connections of {} were opened with power_safe={power_safe} checkpoint_frames={frames:?}, \
                 not power_safe={} checkpoint_frames={:?}",
                self.location, options.power_safe, options.checkpoint_frames
            )));
        }
        Ok(())
    }
}

/// Whether any table of the store still holds a row: one statement, prepared once per connection.
fn leftover_rows(conn: &Connection) -> rusqlite::Result<bool> {
    let any: Vec<String> = TABLES.iter().map(|t| format!("EXISTS (SELECT 1 FROM {t})")).collect();
    let sql = format!("SELECT {}", any.join(" OR "));
    conn.prepare_cached(&sql)?.query_row([], |r| r.get(0))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::spi::{JournalStore, LeasableStore};
    use crate::sqlite::{SqliteOptions, SqliteStore};
    use crate::types::{JournalEntry, RunId, Seq};

    fn open(spares: &Arc<Spares>) -> SqliteStore {
        let Location::Memdb(name) = spares.location() else { unreachable!("memdb spares") };
        SqliteStore::open(SqliteOptions::memdb(name.clone(), Arc::new(ManualClock::new(0))).spares(spares.clone()))
            .expect("open")
    }

    #[test]
    fn a_dropped_store_gives_its_connection_back_and_the_next_store_takes_it() {
        let spares = Arc::new(Spares::memdb("spares-give-back"));
        let (a, b) = (open(&spares), open(&spares));
        assert_eq!(spares.idle_count(), 0);
        drop(a);
        assert_eq!(spares.idle_count(), 1);
        let c = open(&spares);
        assert_eq!(spares.idle_count(), 0, "the idle connection was taken, not a new one opened");
        drop((b, c));
        assert_eq!(spares.idle_count(), 2);
    }

    /// A run's first acquire and append: the epoch granted and the entry's row id, which a
    /// cleared database must give again.
    fn first_write(store: &SqliteStore, run: &RunId) -> (crate::types::Epoch, i64) {
        let lease = store.acquire(run, "n").expect("acquire");
        store.append(run, &JournalEntry::new(1, "step", "ok"), Some(&lease)).expect("append");
        let id: i64 = store.raw_connection().query_row("SELECT id FROM entries", [], |r| r.get(0)).expect("id");
        (lease.epoch, id)
    }

    #[test]
    fn clear_answers_like_a_fresh_database_ids_and_epochs_from_the_start() {
        let spares = Arc::new(Spares::memdb("spares-clear"));
        let run = RunId::new("r");
        let first = |store: &SqliteStore| first_write(store, &run);
        let store = open(&spares);
        let fresh = first(&store);
        store.append(&run, &JournalEntry::new(2, "step", "ok"), None).ok();
        drop(store);
        assert!(spares.clear().expect("clear"), "an idle connection cleared it");
        let store = open(&spares);
        assert_eq!(store.load(&run).expect("load").len(), 0);
        assert_eq!(first(&store), fresh, "the epoch tombstone and the AUTOINCREMENT counter start over");
        assert_eq!(store.load(&run).expect("load")[0].seq, Seq(1));
    }

    #[test]
    fn clear_does_nothing_while_a_store_still_holds_a_connection() {
        let spares = Arc::new(Spares::memdb("spares-held"));
        let (held, idle) = (open(&spares), open(&spares));
        let run = RunId::new("r");
        held.append(&run, &JournalEntry::new(1, "step", "ok"), None).expect("append");
        drop(idle);
        assert!(!spares.clear().expect("not cleared"), "a held connection could write into the next world");
        assert_eq!(held.load(&run).expect("load").len(), 1, "nothing was deleted");
        drop(held);
        assert!(spares.clear().expect("cleared"));
    }

    #[test]
    fn clear_without_an_idle_connection_promises_nothing() {
        let spares = Arc::new(Spares::memdb("spares-none-idle"));
        assert!(!spares.clear().expect("nothing to clear with"));
    }

    #[test]
    fn a_read_only_store_never_takes_a_spare() {
        let spares = Arc::new(Spares::memdb("spares-read-only"));
        drop(open(&spares));
        let options = SqliteOptions::memdb("spares-read-only", Arc::new(ManualClock::new(0))).spares(spares.clone());
        let err = SqliteStore::open(options.read_only()).expect_err("refused");
        assert!(matches!(err, StoreError::Config(_)), "{err}");
        assert_eq!(spares.idle_count(), 1);
    }

    #[test]
    fn a_connection_inside_a_transaction_is_closed_not_kept() {
        let spares = Arc::new(Spares::memdb("spares-in-txn"));
        let store = open(&spares);
        store.raw_connection().execute_batch("BEGIN").expect("begin");
        drop(store);
        assert_eq!(spares.idle_count(), 0);
    }

    /// A file world's options: no fsync, a checkpoint every 100 frames.
    fn file_options(path: &std::path::Path) -> SqliteOptions {
        SqliteOptions::file(path, Arc::new(ManualClock::new(0))).without_fsync().checkpoint_every(100)
    }

    #[test]
    fn a_cleared_file_answers_like_a_fresh_one_with_an_empty_wal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("world.db");
        let spares = Arc::new(Spares::file(&file_options(&path)).expect("file spares"));
        let open = || SqliteStore::open(file_options(&path).spares(spares.clone())).expect("open");
        let run = RunId::new("r");
        let first = |store: &SqliteStore| first_write(store, &run);
        let (store, other) = (open(), open());
        let fresh = first(&store);
        other.append(&run, &JournalEntry::new(2, "step", "ok"), None).ok();
        drop((store, other));
        let wal = dir.path().join("world.db-wal");
        assert!(std::fs::metadata(&wal).expect("the WAL").len() > 0, "the writes above are in the WAL");
        assert!(spares.clear().expect("clear"), "an idle connection cleared it");
        assert_eq!(std::fs::metadata(&wal).expect("the WAL").len(), 0, "the WAL starts empty, as a fresh file's");
        let store = open();
        assert_eq!(spares.idle_count(), 1, "a spare was taken");
        assert_eq!(store.load(&run).expect("load").len(), 0);
        assert_eq!(first(&store), fresh, "the epoch tombstone and the AUTOINCREMENT counter start over");
    }

    #[test]
    fn file_spares_serve_only_stores_of_their_connection_settings() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("world.db");
        let spares = Arc::new(Spares::file(&file_options(&path)).expect("file spares"));
        drop(SqliteStore::open(file_options(&path).spares(spares.clone())).expect("open"));
        let power_safe = SqliteOptions::file(&path, Arc::new(ManualClock::new(0))).checkpoint_every(100);
        let err = SqliteStore::open(power_safe.spares(spares.clone())).expect_err("refused");
        assert!(matches!(&err, StoreError::Config(m) if m.contains("power_safe=false")), "{err}");
        let other_frames = file_options(&path).checkpoint_every(1000);
        assert!(matches!(SqliteStore::open(other_frames.spares(spares.clone())), Err(StoreError::Config(_))));
        assert_eq!(spares.idle_count(), 1, "the spare stays for a store that matches");
        let memdb = SqliteOptions::memdb("spares-not-a-file", Arc::new(ManualClock::new(0)));
        assert!(matches!(Spares::file(&memdb), Err(StoreError::Config(_))));
    }

    #[test]
    fn spares_of_another_database_are_refused() {
        let spares = Arc::new(Spares::memdb("spares-mine"));
        let options = SqliteOptions::memdb("spares-other", Arc::new(ManualClock::new(0))).spares(spares);
        let err = SqliteStore::open(options).expect_err("refused");
        assert!(matches!(err, StoreError::Config(_)), "{err}");
    }
}
