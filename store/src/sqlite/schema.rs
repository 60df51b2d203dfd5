//! The SQLite schema (contracts 1.7) and the idempotent bootstrap that creates it. The bootstrap
//! runs as one unit and is safe to repeat, which is what lets concurrent boots retry it whole (B2).
//!
//! Deviation from the reference: `entries.seq` is a column of its own rather than an expression
//! index over the JSON payload, because our seq is typed (an integer, never a non-finite number).
//! Its `(run_id, seq)` index serves the A5 guard and finds a run's rows for `load`, which sorts
//! them by id (append order); a second `(run_id, id)` index would spare that sort at the cost of
//! one more index write on every append, the hot path.
//! `meta.status` and `meta.name` are columns for the same reason: `list_runs` narrows on them.
//!
//! What a database must hold to be written is pinned here row by row ([`ACCEPTED`]): the type,
//! name, table and `CREATE` statement of every row of its `sqlite_schema`, for every schema
//! version fencesim accepts, and [`judge`] holds a database's catalog to them. A name alone proves
//! nothing: a trigger named like one of fencesim's indexes (the index dropped) fires on the
//! store's writes as surely as one named `wipe`.

/// `PRAGMA application_id` of a fencesim database ("fsim"). A database with tables but another
/// id is someone else's and is refused before anything is written to it.
pub const APPLICATION_ID: i64 = 0x6673_696d;

/// Bumped when the schema changes shape.
pub const SCHEMA_VERSION: i64 = 1;

pub const TABLES: [&str; 5] = ["entries", "meta", "leases", "epochs", "blobs"];

/// The name of every object `DDL` creates (what a missing-object finding names). Whether a
/// database holds them, and nothing else, is [`judge`]'s to say, by [`ACCEPTED`]'s whole rows.
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

/// One row of a database's `sqlite_schema` as SQLite keeps it, its root page aside (which says
/// where the object lives, not what it is).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SchemaRow {
    /// `table`, `index`, `view` or `trigger`.
    pub kind: String,
    pub name: String,
    /// The table the object belongs to (a table's own name for a table).
    pub table: String,
    /// The `CREATE` statement as it was written, with `IF NOT EXISTS` dropped; `None` for an
    /// index SQLite makes itself (a `PRIMARY KEY` of a rowid table).
    pub sql: Option<String>,
}

/// A row fencesim's bootstrap makes, pinned as SQLite stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pinned {
    pub kind: &'static str,
    pub name: &'static str,
    pub table: &'static str,
    pub sql: Option<&'static str>,
}

impl Pinned {
    fn is(&self, row: &SchemaRow) -> bool {
        self.kind == row.kind && self.name == row.name && self.table == row.table && self.sql == row.sql.as_deref()
    }
}

const fn pin(kind: &'static str, name: &'static str, table: &'static str, sql: &'static str) -> Pinned {
    Pinned { kind, name, table, sql: Some(sql) }
}

/// Schema version 1: the rows [`DDL`] makes, including SQLite's own (`sqlite_sequence` for the
/// `AUTOINCREMENT`, the automatic index of `blobs`' primary key). Never edited once released: a
/// file made by any build of version 1 holds exactly these, and a changed [`DDL`] is a new
/// version (`the_ddl_makes_exactly_the_pinned_rows_of_this_version` fails until it is one).
pub const V1: [Pinned; 11] = [
    pin(
        "table",
        "blobs",
        "blobs",
        "CREATE TABLE blobs (\n    ref    TEXT PRIMARY KEY,\n    run_id TEXT NOT NULL,\n    data   BLOB NOT NULL\n)",
    ),
    pin("index", "blobs_run_id", "blobs", "CREATE INDEX blobs_run_id ON blobs (run_id, ref)"),
    pin(
        "table",
        "entries",
        "entries",
        "CREATE TABLE entries (\n    id      INTEGER PRIMARY KEY AUTOINCREMENT,\n    run_id  TEXT    NOT NULL,\n    seq     INTEGER NOT NULL,\n    payload TEXT    NOT NULL\n)",
    ),
    pin("index", "entries_run_seq", "entries", "CREATE INDEX entries_run_seq ON entries (run_id, seq)"),
    pin(
        "table",
        "epochs",
        "epochs",
        "CREATE TABLE epochs (\n    run_id TEXT PRIMARY KEY,\n    epoch  INTEGER NOT NULL\n) WITHOUT ROWID",
    ),
    pin(
        "table",
        "leases",
        "leases",
        "CREATE TABLE leases (\n    run_id     TEXT PRIMARY KEY,\n    owner      TEXT    NOT NULL,\n    epoch      INTEGER NOT NULL,\n    expires_at INTEGER NOT NULL\n) WITHOUT ROWID",
    ),
    pin(
        "table",
        "meta",
        "meta",
        "CREATE TABLE meta (\n    run_id  TEXT PRIMARY KEY,\n    status  TEXT NOT NULL,\n    name    TEXT,\n    payload TEXT NOT NULL\n) WITHOUT ROWID",
    ),
    pin("index", "meta_name", "meta", "CREATE INDEX meta_name ON meta (name)"),
    pin("index", "meta_status", "meta", "CREATE INDEX meta_status ON meta (status)"),
    Pinned { kind: "index", name: "sqlite_autoindex_blobs_1", table: "blobs", sql: None },
    pin("table", "sqlite_sequence", "sqlite_sequence", "CREATE TABLE sqlite_sequence(name,seq)"),
];

/// Every schema version fencesim accepts, with the rows each must hold: the one it creates.
pub const ACCEPTED: [(i64, &[Pinned]); 1] = [(1, &V1)];

/// The statistics tables SQLite's `ANALYZE` (and `PRAGMA optimize`) adds to any database: accepted
/// beside the pinned rows, in exactly this form. They hold planner statistics, never rows of
/// fencesim's, and SQLite refuses a trigger on them (`cannot create trigger on system table`).
pub const STATISTICS: [Pinned; 2] = [
    pin("table", "sqlite_stat1", "sqlite_stat1", "CREATE TABLE sqlite_stat1(tbl,idx,stat)"),
    pin("table", "sqlite_stat4", "sqlite_stat4", "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)"),
];

/// The pinned rows of schema `version`, if fencesim accepts it.
pub fn accepted(version: i64) -> Option<&'static [Pinned]> {
    ACCEPTED.iter().find(|(v, _)| *v == version).map(|(_, rows)| *rows)
}

/// What a database's header stamp and schema rows say it is, when it may be fencesim's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// No stamp and no object: a new database, fencesim's to bootstrap.
    Blank,
    /// Stamped with an accepted version, holding exactly that version's rows.
    Whole,
    /// Stamped with an accepted version, holding nothing but that version's rows, some missing:
    /// damage a read-only scan may report, never a file to write.
    Partial { present: usize, total: usize },
}

/// Why a database is not fencesim's: nothing is written to it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error(
        "refusing to use a SQLite database of another application (application_id={app_id} user_version={version})"
    )]
    OtherApplication { app_id: i64, version: i64 },
    #[error("refusing to use a fencesim database of schema version {version}, this build reads {SCHEMA_VERSION}")]
    OtherVersion { version: i64 },
    /// An object fencesim never creates, under a name of its own.
    #[error("refusing a database whose schema is not fencesim's: it has a {kind} '{name}' fencesim did not create")]
    Foreign { kind: String, name: String },
    /// An object under one of fencesim's names that is not the object fencesim creates there.
    #[error("refusing a database whose schema is not fencesim's: {what}")]
    Altered { name: String, what: String },
    #[error(
        "refusing a half-created fencesim schema: {present} of its {total} objects exist, and fencesim creates them all at once"
    )]
    Half { present: usize, total: usize },
}

/// Judge a catalog: the header's `application_id` and `user_version`, and every row of
/// `sqlite_schema`. Each row must be one the accepted version pins (each once) or one of SQLite's
/// [`STATISTICS`] tables, by type, name, table and definition; a name alone proves nothing.
pub fn judge(app_id: i64, version: i64, rows: &[SchemaRow]) -> Result<Standing, Mismatch> {
    if app_id == 0 && version == 0 && rows.is_empty() {
        return Ok(Standing::Blank);
    }
    if app_id != APPLICATION_ID {
        return Err(Mismatch::OtherApplication { app_id, version });
    }
    let pinned = accepted(version).ok_or(Mismatch::OtherVersion { version })?;
    let mut sorted: Vec<&SchemaRow> = rows.iter().collect();
    sorted.sort();
    let mut matched = vec![false; pinned.len()];
    for row in sorted {
        if let Some(i) = (0..pinned.len()).find(|&i| !matched[i] && pinned[i].is(row)) {
            matched[i] = true;
            continue;
        }
        if STATISTICS.iter().any(|p| p.is(row)) {
            continue;
        }
        let namesake = pinned.iter().chain(&STATISTICS).find(|p| p.name.eq_ignore_ascii_case(&row.name));
        return Err(match namesake {
            None => Mismatch::Foreign { kind: shown(&row.kind), name: shown(&row.name) },
            Some(ours) => Mismatch::Altered { name: shown(&row.name), what: altered(ours, row) },
        });
    }
    let named = |i: &usize| !pinned[*i].name.starts_with("sqlite_");
    let total = (0..pinned.len()).filter(named).count();
    let present = (0..pinned.len()).filter(|i| matched[*i] && named(i)).count();
    if matched.iter().all(|m| *m) { Ok(Standing::Whole) } else { Ok(Standing::Partial { present, total }) }
}

/// A database's catalog in one read (one statement, so one snapshot: a sibling's bootstrap cannot
/// commit between its parts): the header's `application_id` and `user_version`, and every row of
/// `sqlite_schema`, SQLite's own included.
pub(crate) fn catalog(conn: &rusqlite::Connection) -> rusqlite::Result<(i64, i64, Vec<SchemaRow>)> {
    let mut statement = conn.prepare(
        "SELECT a.application_id, v.user_version, s.type, s.name, s.tbl_name, s.sql
         FROM pragma_application_id() AS a, pragma_user_version() AS v LEFT JOIN sqlite_schema AS s ON 1",
    )?;
    let mut rows = statement.query([])?;
    let (mut app_id, mut version, mut schema) = (0, 0, Vec::new());
    while let Some(row) = rows.next()? {
        app_id = row.get(0)?;
        version = row.get(1)?;
        // The outer join's one row of an empty catalog has no object.
        if let Some(kind) = row.get::<_, Option<String>>(2)? {
            schema.push(SchemaRow { kind, name: row.get(3)?, table: row.get(4)?, sql: row.get(5)? });
        }
    }
    Ok((app_id, version, schema))
}

/// How `row` differs from `ours`, the object fencesim creates under its name, in one line.
fn altered(ours: &Pinned, row: &SchemaRow) -> String {
    let (kind, name) = (shown(&row.kind), shown(&row.name));
    if row.kind != ours.kind {
        format!("it has a {kind} '{name}' where fencesim creates the {} of that name", ours.kind)
    } else if row.name != ours.name {
        format!("its {kind} '{name}' is not spelled as fencesim's '{}'", ours.name)
    } else if row.table != ours.table {
        format!("its {kind} '{name}' belongs to table '{}', fencesim's to '{}'", shown(&row.table), ours.table)
    } else {
        format!("the definition of its {kind} '{name}' is not the one fencesim creates")
    }
}

/// A name from a file, for a one-line message: control characters written as Rust escapes.
fn shown(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

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

    fn fresh() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().expect("db");
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
        ))
        .expect("stamp");
        conn.execute_batch(DDL).expect("ddl");
        conn
    }

    fn judged(conn: &rusqlite::Connection) -> Result<Standing, Mismatch> {
        let (app_id, version, rows) = catalog(conn).expect("catalog");
        judge(app_id, version, &rows)
    }

    /// The pins are what the DDL makes, row for row: editing the DDL without a new schema version
    /// (whose files would then be refused as tampered) fails here.
    #[test]
    fn the_ddl_makes_exactly_the_pinned_rows_of_this_version() {
        let conn = fresh();
        let (_, _, mut rows) = catalog(&conn).expect("catalog");
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        let pinned = accepted(SCHEMA_VERSION).expect("this build accepts the version it creates");
        assert_eq!(rows.len(), pinned.len());
        for (row, pin) in rows.iter().zip(pinned) {
            assert!(pin.is(row), "pinned {pin:?}, made {row:?}");
        }
        assert_eq!(judged(&conn), Ok(Standing::Whole));
        // Running the DDL again creates nothing: still exactly the pinned rows.
        conn.execute_batch(DDL).expect("again");
        assert_eq!(judged(&conn), Ok(Standing::Whole));
        assert_eq!(judge(0, 0, &[]), Ok(Standing::Blank));
    }

    /// `ANALYZE` adds SQLite's statistics tables in exactly the pinned form; they are accepted.
    #[test]
    fn sqlites_statistics_tables_are_accepted_as_analyze_makes_them() {
        let conn = fresh();
        conn.execute_batch("INSERT INTO meta VALUES ('r', 'ok', NULL, '{}'); ANALYZE;").expect("analyze");
        let (_, _, rows) = catalog(&conn).expect("catalog");
        let stats: Vec<&SchemaRow> = rows.iter().filter(|r| r.name.starts_with("sqlite_stat")).collect();
        assert_eq!(stats.len(), STATISTICS.len(), "{rows:?}");
        assert!(stats.iter().all(|row| STATISTICS.iter().any(|p| p.is(row))), "{stats:?}");
        assert_eq!(judged(&conn), Ok(Standing::Whole));
    }

    /// Each way a catalog can differ from fencesim's by more than a missing object is refused,
    /// named: a trigger wearing an index's name, a new trigger or view, a tampered definition, an
    /// object moved to another table, a name spelled in another case.
    #[test]
    fn a_catalog_that_is_not_exactly_fencesims_is_refused_naming_the_difference() {
        let cases = [
            (
                "DROP INDEX meta_status; CREATE TRIGGER meta_status AFTER UPDATE ON meta BEGIN DELETE FROM entries; END;",
                "it has a trigger 'meta_status' where fencesim creates the index of that name",
            ),
            (
                "CREATE TRIGGER keep_tidy AFTER INSERT ON leases BEGIN DELETE FROM entries; END;",
                "it has a trigger 'keep_tidy' fencesim did not create",
            ),
            ("CREATE VIEW recent AS SELECT * FROM entries;", "it has a view 'recent' fencesim did not create"),
            (
                "DROP INDEX meta_name; CREATE INDEX meta_name ON meta (name, status);",
                "the definition of its index 'meta_name' is not the one fencesim creates",
            ),
            (
                "DROP INDEX meta_name; CREATE INDEX meta_name ON leases (owner);",
                "its index 'meta_name' belongs to table 'leases', fencesim's to 'meta'",
            ),
            (
                "DROP INDEX meta_name; CREATE INDEX META_NAME ON meta (name);",
                "its index 'META_NAME' is not spelled as fencesim's 'meta_name'",
            ),
            (
                "DROP TABLE epochs; CREATE TABLE epochs (run_id TEXT PRIMARY KEY, epoch INTEGER) WITHOUT ROWID;",
                "the definition of its table 'epochs' is not the one fencesim creates",
            ),
        ];
        for (sql, says) in cases {
            let conn = fresh();
            conn.execute_batch(sql).expect(sql);
            let refused = judged(&conn).expect_err(sql);
            assert_eq!(refused.to_string(), format!("refusing a database whose schema is not fencesim's: {says}"));
        }
    }

    /// Missing objects are a partial schema (read-only damage to report), counted by name.
    #[test]
    fn a_missing_object_is_a_partial_schema() {
        let conn = fresh();
        conn.execute_batch("DROP TABLE blobs;").expect("drop");
        assert_eq!(judged(&conn), Ok(Standing::Partial { present: 7, total: 9 }));
        assert_eq!(judge(APPLICATION_ID, SCHEMA_VERSION, &[]), Ok(Standing::Partial { present: 0, total: 9 }));
        assert!(matches!(judge(APPLICATION_ID, SCHEMA_VERSION + 1, &[]), Err(Mismatch::OtherVersion { .. })));
        assert!(matches!(judge(7, 0, &[]), Err(Mismatch::OtherApplication { .. })));
    }
}
