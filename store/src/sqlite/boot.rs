//! Opening a SqliteStore: option validation (B1), the ownership probe, and the idempotent
//! bootstrap retried whole through the busy family under a wall-clock bound (B2).
//!
//! Nothing is written to a location until it is known to be ours or empty. A file that exists is
//! first read through a read-only connection (which never checkpoints, rolls back or recovers
//! anything); only a database whose schema is exactly fencesim's (every row of `sqlite_schema`
//! by type, name, table and definition, [`schema::judge`]), or an empty one, is then opened
//! read-write, switched to WAL and given the schema.
//!
//! A read-write open of a file that may not be ours would roll back a hot journal, recover a WAL
//! or checkpoint it on close: each writes. A relative path is anchored with `./`, so a `file:` name
//! is never read as a URI, and a file SQLite can only read is refused at open. A database that
//! already holds the whole schema of this version and nothing foreign is opened with one catalog
//! read and no write transaction; anything else takes the full bootstrap.

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::schema::{self, APPLICATION_ID, SCHEMA_VERSION, Standing};
use super::{Location, SqliteOptions, sql_error};
use crate::TIMER_MS_MAX;
use crate::defects::StoreDefect;
use crate::error::{Op, StoreError, StoreResult};
use crate::wall;

/// B1: the ttl must be an integer in 1..=2147483647 ms; checked before anything is opened.
pub fn validate_ttl(ttl_ms: i64) -> StoreResult<u32> {
    match u32::try_from(ttl_ms) {
        Ok(ttl) if (1..=TIMER_MS_MAX).contains(&ttl) => Ok(ttl),
        _ => Err(StoreError::Config(format!("lease ttl must be an integer in 1..={TIMER_MS_MAX} ms ttl_ms={ttl_ms}"))),
    }
}

/// Validate the options, then open and bootstrap, retrying the whole bootstrap while it fails
/// busy until `boot_busy_timeout_ms` of wall-clock time has passed.
pub(super) fn open(options: &SqliteOptions) -> StoreResult<(Connection, u32)> {
    let ttl_ms = validate_ttl(options.lease_ttl_ms)?;
    validate_location(&options.location)?;
    disable_memory_statistics();
    let deadline = wall::Deadline::after_ms(options.boot_busy_timeout_ms);
    let mut attempts: u64 = 0;
    loop {
        attempts += 1;
        let attempt = if options.read_only { open_read_only(&options.location) } else { boot_once(options) };
        match attempt {
            Ok(conn) => {
                // The bootstrap committed or was never begun: nothing is left open to roll back.
                assert!(conn.is_autocommit(), "a connection to {} booted inside a transaction", options.location);
                conn.busy_timeout(Duration::from_millis(u64::from(options.busy_timeout_ms)))
                    .map_err(|e| sql_error(Op::Boot, None, e))?;
                return Ok((conn, ttl_ms));
            }
            Err(Failure::Sqlite(e))
                if is_retryable_at_boot(&e) && !options.defects.has(StoreDefect::NoBootRetry) && !deadline.passed() =>
            {
                wall::sleep_ms(2 + attempts % 7);
            }
            Err(failure) => return Err(failure.into_error(&options.location, attempts)),
        }
    }
}

/// A failed single boot attempt.
enum Failure {
    Sqlite(rusqlite::Error),
    /// The location is not ours to write: a file SQLite can only read, an empty one to read.
    Refused(String),
    /// The database is not exactly fencesim's: another application's, another schema version,
    /// an object fencesim did not create, half a schema.
    Schema(schema::Mismatch),
}

impl From<schema::Mismatch> for Failure {
    fn from(m: schema::Mismatch) -> Self {
        Failure::Schema(m)
    }
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Self {
        Failure::Sqlite(e)
    }
}

impl Failure {
    fn into_error(self, location: &Location, attempts: u64) -> StoreError {
        let reason = match self {
            Failure::Refused(why) => why,
            Failure::Schema(mismatch) => mismatch.to_string(),
            Failure::Sqlite(e) => match (e.sqlite_error_code(), e.sqlite_error().map(|x| x.extended_code)) {
                (Some(rusqlite::ErrorCode::NotADatabase), _) => "not a SQLite database".to_owned(),
                (_, Some(rusqlite::ffi::SQLITE_READONLY_ROLLBACK)) => {
                    "the database has a hot journal left by a crash; recover it with the program that wrote it"
                        .to_owned()
                }
                (_, Some(rusqlite::ffi::SQLITE_READONLY_RECOVERY)) => {
                    "the database needs WAL recovery that only a writer may run; refusing to recover a database not known to be ours".to_owned()
                }
                (Some(rusqlite::ErrorCode::CannotOpen), _) => "cannot open the database file".to_owned(),
                (Some(rusqlite::ErrorCode::ReadOnly), _) => "the database is read-only".to_owned(),
                _ if is_busy(&e) => format!("busy after {attempts} boot attempts: {e}"),
                _ => e.to_string(),
            },
        };
        StoreError::storage(Op::Boot, format!("{reason} location={location}"))
    }
}

fn validate_location(location: &Location) -> StoreResult<()> {
    match location {
        Location::File(path) => {
            if path.is_dir() {
                return Err(StoreError::Config(format!("database path is a folder path={}", path.display())));
            }
            if path.exists() && !path.is_file() {
                return Err(StoreError::Config(format!("database path is not a regular file path={}", path.display())));
            }
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
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

/// A memdb's page size. A write transaction copies each page it changes into the rollback
/// journal and back into the memdb at commit: with SQLite's default of 4096 bytes those copies
/// were a tenth of a simulated world's instructions, and 1024 costs 8% fewer instructions per
/// swarm world (512 and 2048 cost more). A file keeps SQLite's default, which is what users have;
/// locking, transactions and their outcomes do not depend on the page size.
pub(super) const MEMDB_PAGE_SIZE: u32 = 1024;

/// One attempt at the whole bootstrap: probe, open read-write, WAL, then the schema in one write
/// transaction. Idempotent, so a busy attempt can be retried whole. A file the caller vouches
/// was `booted` already is not probed (see [`super::SqliteOptions::booted`]).
fn boot_once(options: &SqliteOptions) -> Result<Connection, Failure> {
    let (location, booted) = (&options.location, options.booted);
    let rw = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // Whether the database was already a complete fencesim database when probed.
    let complete;
    let conn = match location {
        Location::File(path) => {
            let path = literal(path);
            complete = booted || probe(&path)?;
            Connection::open_with_flags(&path, rw)?
        }
        Location::Memdb(name) => {
            let conn = Connection::open_with_flags(format!("file:/{name}?vfs=memdb"), rw | OpenFlags::SQLITE_OPEN_URI)?;
            // A memdb has no journal to roll back or WAL to recover: reading it through the
            // read-write connection writes nothing.
            complete = standing(&conn)? == Ok(Standing::Whole);
            conn
        }
    };
    conn.busy_timeout(Duration::ZERO)?;
    // SQLite quietly falls back to read-only when it cannot open the file for writing; a store
    // that cannot write must say so now, not at its first fenced call.
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        return Err(Failure::Refused("the database file is not writable".to_owned()));
    }
    if !options.power_safe {
        // Before the switch to WAL and the schema's transaction, which would otherwise each wait
        // for an fsync of a database that asked for none.
        conn.execute_batch("PRAGMA synchronous = OFF")?;
    }
    if matches!(location, Location::File(_)) {
        // Outside the transaction: journal_mode cannot change inside one. It also ignores the
        // busy handler on some lock transitions, which is why the retry is ours (B2).
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Failure::Refused(format!("cannot switch the database to WAL journal_mode={mode}")));
        }
        if let Some(frames) = options.checkpoint_frames {
            conn.execute_batch(&format!("PRAGMA wal_autocheckpoint = {frames}"))?;
        }
    }
    // A database that already holds exactly fencesim's schema needs no write transaction: a new
    // connection under a storm of writers would otherwise queue for the write lock just to
    // create nothing (a restarted soak writer starved past the boot bound that way). Objects are
    // only ever created whole in one transaction, so "all present" cannot be half a bootstrap.
    if complete {
        return Ok(conn);
    }
    if matches!(location, Location::Memdb(_)) {
        // Only an empty database takes a page size; a memdb keeps it for its life.
        conn.execute_batch(&format!("PRAGMA page_size = {MEMDB_PAGE_SIZE}"))?;
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = bootstrap_schema(&conn).and_then(|()| conn.execute_batch("COMMIT").map_err(Failure::from));
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result.map(|()| conn)
}

/// Open an existing fencesim database without writing anything: a read-only connection, no WAL
/// switch, no bootstrap. Only a stamped database whose every schema row is one fencesim creates
/// (type, name, table and definition) is accepted; an empty file, a blank database, a foreign
/// object and an altered one are refused. A missing object is damage for the integrity scan to
/// report.
fn open_read_only(location: &Location) -> Result<Connection, Failure> {
    let Location::File(path) = location else {
        return Err(Failure::Refused("a read-only store needs a database file".to_owned()));
    };
    let path = literal(path);
    if std::fs::metadata(&path).map_or(true, |m| m.len() == 0) {
        return Err(Failure::Refused("not a fencesim database: the file is empty or missing".to_owned()));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&path, flags)?;
    conn.busy_timeout(Duration::ZERO)?;
    match standing(&conn)?? {
        Standing::Blank => Err(Failure::Refused("not a fencesim database: it has no fencesim schema".to_owned())),
        Standing::Whole | Standing::Partial { .. } => Ok(conn),
    }
}

/// The database's catalog judged against fencesim's schema ([`schema::judge`]), in one read.
fn standing(conn: &Connection) -> rusqlite::Result<Result<Standing, schema::Mismatch>> {
    let (app_id, version, rows) = schema::catalog(conn)?;
    Ok(schema::judge(app_id, version, &rows))
}

/// A database to write must be blank (for the bootstrap to make) or exactly fencesim's: a
/// trigger, view, table or index fencesim did not create, or one of its names carrying another
/// object or another definition, could fire on (or shadow) the store's writes, and half a schema
/// was made or damaged by something else. Says whether the bootstrap has the schema to create.
fn writable(conn: &Connection) -> Result<bool, Failure> {
    match standing(conn)?? {
        Standing::Blank => Ok(true),
        Standing::Whole => Ok(false),
        Standing::Partial { present, total } => Err(schema::Mismatch::Half { present, total }.into()),
    }
}

/// A path SQLite cannot mistake for a URI: the bundled SQLite reads any name starting with
/// `file:` as one (`file:x.db?mode=memory` would silently be an in-memory database), so a relative
/// path is anchored with `./`.
fn literal(path: &Path) -> PathBuf {
    if path.is_absolute() { path.to_path_buf() } else { Path::new(".").join(path) }
}

/// Judge an existing, non-empty file through a read-only connection before anything opens it for
/// writing, and say whether it is already a complete fencesim database: a read-write open would
/// roll back a hot journal, recover a WAL or checkpoint it on close, each of which writes to a
/// file that may not be ours. Only a blank database or exactly fencesim's schema passes.
fn probe(path: &Path) -> Result<bool, Failure> {
    let empty = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    if empty {
        return Ok(false);
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(Duration::ZERO)?;
    Ok(!writable(&conn)?)
}

/// Inside the boot transaction: judge the catalog again (a sibling may have stamped the file
/// since), stamp a blank database and create the schema; a complete one is left as it is.
fn bootstrap_schema(conn: &Connection) -> Result<(), Failure> {
    if writable(conn)? {
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
        ))?;
        conn.execute_batch(schema::DDL)?;
    }
    Ok(())
}

/// The SQLITE_BUSY family: primary result code 5, which includes SQLITE_BUSY_RECOVERY (261).
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    e.sqlite_error().is_some_and(|err| err.extended_code & 0xff == rusqlite::ffi::SQLITE_BUSY)
}

/// At boot the busy family, and the read-only probe meeting a WAL a sibling is still recovering.
fn is_retryable_at_boot(e: &rusqlite::Error) -> bool {
    is_busy(e) || e.sqlite_error().is_some_and(|err| err.extended_code == rusqlite::ffi::SQLITE_READONLY_RECOVERY)
}

/// Several threads running seeds contend on SQLite's global memory-statistics mutex; turn the
/// statistics off before the first connection (design.md). Called after SQLite has initialised
/// (another crate opened a connection first), the call fails and changes nothing: harmless.
#[allow(unsafe_code)]
fn disable_memory_statistics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: SQLITE_CONFIG_MEMSTATUS takes one int argument, which is what is passed.
        // sqlite3_config is documented as not threadsafe against concurrent SQLite use; if SQLite
        // is already initialised it returns SQLITE_MISUSE without effect, and before that no
        // other thread of this crate can be using SQLite, since every path here goes through
        // this Once first.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int);
        }
    });
}
