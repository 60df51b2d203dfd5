//! Spare connections to one memdb, for a process that opens many short-lived stores over a
//! database in turn and empties it between them (the simulator opens about ten connections per
//! world, thousands of worlds a minute). A store opened with [`SqliteOptions::spares`] takes an
//! idle connection instead of opening and booting one, and gives it back when it drops, with its
//! prepared statements: opening, schema parsing and first preparation were a fifth of a simulated
//! world's time.
//!
//! A connection carries nothing of a store's own: the clock, ttl, defects and fault hook live in
//! the `SqliteStore`, and a connection is only given back outside a transaction. [`Spares::clear`]
//! empties every table and the AUTOINCREMENT counter, so what a cleared database answers is what
//! a freshly booted one would: same rows (none), same ids from 1.
//!
//! [`SqliteOptions::spares`]: super::SqliteOptions::spares

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::Connection;

use super::schema::TABLES;
use super::{Location, sql_error};
use crate::error::{Op, StoreError, StoreResult};

/// Idle connections to one memdb. Shared by `Arc` between the stores that give connections back.
pub struct Spares {
    location: Location,
    idle: Mutex<Vec<Connection>>,
}

impl fmt::Debug for Spares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spares").field("location", &self.location).field("idle", &self.idle_count()).finish()
    }
}

impl Spares {
    /// Spares of a memdb. A file keeps its own page cache and locks per connection, and the
    /// simulator gives each file world a folder of its own: only memdbs are pooled.
    pub fn memdb(name: impl Into<String>) -> Self {
        Self { location: Location::Memdb(name.into()), idle: Mutex::new(Vec::new()) }
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Connections waiting to be taken.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Empty every table and the AUTOINCREMENT counter through an idle connection, in one
    /// transaction. `Ok(false)` when no connection is idle: then nothing may be assumed of the
    /// database (a memdb no connection holds is gone; one a stray connection still holds keeps
    /// its rows), and the caller starts over with a new one.
    pub fn clear(&self) -> StoreResult<bool> {
        let Some(conn) = self.take() else { return Ok(false) };
        let mut sql = String::from("BEGIN IMMEDIATE;");
        for table in TABLES {
            sql.push_str(&format!("DELETE FROM {table};"));
        }
        sql.push_str("DELETE FROM sqlite_sequence; COMMIT;");
        let result = conn.execute_batch(&sql).map_err(|e| sql_error(Op::Boot, None, e));
        if result.is_err() && !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        self.give_back(conn);
        result.map(|()| true)
    }

    /// An idle connection, set to wait `busy_timeout_ms` for a lock like a fresh one.
    pub(super) fn take_for(&self, busy_timeout_ms: u32) -> StoreResult<Option<Connection>> {
        let Some(conn) = self.take() else { return Ok(None) };
        conn.busy_timeout(Duration::from_millis(u64::from(busy_timeout_ms)))
            .map_err(|e| sql_error(Op::Boot, None, e))?;
        Ok(Some(conn))
    }

    fn take(&self) -> Option<Connection> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    /// Keep a connection for the next store; one left inside a transaction is closed instead.
    pub(super) fn give_back(&self, conn: Connection) {
        if conn.is_autocommit() {
            self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
        }
    }

    /// Refuse spares of another database than the store's.
    pub(super) fn check(&self, location: &Location) -> StoreResult<()> {
        if &self.location == location {
            Ok(())
        } else {
            Err(StoreError::Config(format!(
                "spare connections of {} cannot serve a store of {location}",
                self.location
            )))
        }
    }
}
