//! The SQLite schema (contracts 1.7) and the idempotent bootstrap that creates it. The bootstrap
//! runs as one unit and is safe to repeat, which is what lets concurrent boots retry it whole (B2).
//!
//! Deviation from the reference: `entries.seq` is a column of its own rather than an expression
//! index over the JSON payload, because our seq is typed (an integer, never a non-finite number).
//! Its `(run_id, seq)` index serves the A5 guard and finds a run's rows for `load`, which sorts
//! them by id (append order); a second `(run_id, id)` index would spare that sort at the cost of
//! one more index write on every append, the hot path.
//! `meta.status` and `meta.name` are columns for the same reason: `list_runs` narrows on them.

/// `PRAGMA application_id` of a fencesim database ("fsim"). A database with tables but another
/// id is someone else's and is refused before anything is written to it.
pub const APPLICATION_ID: i64 = 0x6673_696d;

/// Bumped when the schema changes shape.
pub const SCHEMA_VERSION: i64 = 1;

pub const TABLES: [&str; 5] = ["entries", "meta", "leases", "epochs", "blobs"];

/// Every object `DDL` creates: when all exist, the bootstrap has nothing to create and skips
/// parsing `DDL` (opening a connection to a booted database is then one catalog read).
pub const OBJECTS: [&str; 9] =
    ["entries", "entries_run_seq", "meta", "meta_status", "meta_name", "leases", "epochs", "blobs", "blobs_run_id"];

pub const DDL: &str = "
CREATE TABLE IF NOT EXISTS entries (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    payload TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_run_seq ON entries (run_id, seq);
CREATE TABLE IF NOT EXISTS meta (
    run_id  TEXT PRIMARY KEY,
    status  TEXT NOT NULL,
    name    TEXT,
    payload TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS meta_status ON meta (status);
CREATE INDEX IF NOT EXISTS meta_name ON meta (name);
CREATE TABLE IF NOT EXISTS leases (
    run_id     TEXT PRIMARY KEY,
    owner      TEXT    NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epochs (
    run_id TEXT PRIMARY KEY,
    epoch  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs (
    ref    TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    data   BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS blobs_run_id ON blobs (run_id, ref);
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_names_everything_the_ddl_creates() {
        let mut created: Vec<&str> =
            DDL.split("IF NOT EXISTS").skip(1).filter_map(|rest| rest.split_whitespace().next()).collect();
        let mut listed = OBJECTS.to_vec();
        created.sort_unstable();
        listed.sort_unstable();
        assert_eq!(created, listed);
    }
}
