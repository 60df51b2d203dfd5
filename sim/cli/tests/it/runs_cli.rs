//! `fencesim runs audit` and `fencesim runs list` over real database files: bad input exits 2 and
//! creates or changes nothing; the crash residues of contracts 4.2 (meta behind a settle, a
//! stranded terminal meta, a suspect one) are reported, repaired when the table allows it (a
//! finished run is never reopened), and the exit code says whether anything remains; a run leased
//! by a live owner is skipped; damage is reported and never repaired from; a file whose schema
//! is not exactly fencesim's (a trigger wearing an index's name, a tampered definition) is
//! refused by every command before a byte is written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use fencesim_engine::entries::{kind, run_settle, running, status, suspension, terminal};
use fencesim_store::{
    JournalEntry, JournalStore, LeasableStore, RunId, RunMeta, RunStatus, Seq, SqliteOptions, SqliteStore, SystemClock,
};
use serde_json::{Value, json};

fn fencesim(args: &[&str], db: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).arg("--db").arg(db).output().expect("run fencesim")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_exit(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "stdout: {}\nstderr: {}", stdout(out), stderr(out));
    assert!(!stderr(out).contains("panic"), "{}", stderr(out));
}

fn assert_refused(out: &Output, mentions: &str) {
    assert_exit(out, 2);
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    assert!(err.contains(mentions), "expected {mentions:?} in {err}");
}

/// A database file in a temporary folder, seeded through the store itself.
struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Db {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.db");
        Db { _dir: dir, path }
    }

    fn store(&self) -> SqliteStore {
        SqliteStore::open(SqliteOptions::file(&self.path, Arc::new(SystemClock))).unwrap()
    }

    /// A run as a crash left it: its journal, then its meta, written unleased.
    fn seed(&self, meta: &RunMeta, entries: &[JournalEntry]) {
        let store = self.store();
        for e in entries {
            store.append(&meta.run_id, e, None).unwrap();
        }
        store.put_meta(meta, None).unwrap();
    }

    fn meta(&self, run: &str) -> RunMeta {
        self.store().get_meta(&RunId::new(run)).unwrap().unwrap()
    }
}

/// One finished agent dispatch: running at 1, terminal ok at 2.
fn dispatched() -> Vec<JournalEntry> {
    vec![
        running(Seq(1), kind::AGENT, "step one"),
        terminal(Seq(2), Seq(1), kind::AGENT, status::OK, "step one", json!("done")),
    ]
}

/// The crash between the settle append and the meta write: the journal settled `ok`, the meta
/// still says `running`.
fn seed_meta_behind(db: &Db, run: &str) -> RunMeta {
    let mut entries = dispatched();
    entries.push(run_settle(Seq(3), RunStatus::Ok, 1));
    let mut meta = RunMeta::new(run, RunStatus::Running).with_segments(1);
    meta.name = Some("nightly".to_owned());
    meta.extra.insert("operator_note".to_owned(), json!({"keep": ["me", 1]}));
    db.seed(&meta, &entries);
    meta
}

#[test]
fn a_missing_file_is_refused_and_not_created() {
    let db = Db::new();
    for cmd in [&["runs", "audit"][..], &["runs", "audit", "--repair"], &["runs", "list"]] {
        assert_refused(&fencesim(cmd, &db.path), "database file does not exist");
        assert!(!db.path.exists(), "{cmd:?} created the file");
    }
}

#[test]
fn a_file_that_is_not_sqlite_is_left_alone() {
    let db = Db::new();
    let text = "not a database, somebody's notes\n".repeat(50);
    std::fs::write(&db.path, &text).unwrap();
    for cmd in [&["runs", "audit", "--repair"][..], &["runs", "list"]] {
        assert_refused(&fencesim(cmd, &db.path), "not a SQLite database");
    }
    assert_eq!(std::fs::read_to_string(&db.path).unwrap(), text);
    assert_eq!(std::fs::read_dir(db.path.parent().unwrap()).unwrap().count(), 1, "no -wal or -shm left behind");
}

#[test]
fn an_empty_file_is_refused_and_stays_empty() {
    let db = Db::new();
    std::fs::write(&db.path, b"").unwrap();
    for cmd in [&["runs", "audit", "--repair"][..], &["runs", "list"]] {
        assert_refused(&fencesim(cmd, &db.path), "the file is empty");
    }
    assert_eq!(std::fs::metadata(&db.path).unwrap().len(), 0);
}

#[test]
fn an_unknown_status_names_the_valid_ones() {
    let db = Db::new();
    db.seed(&RunMeta::new("a", RunStatus::Ok), &[]);
    let out = fencesim(&["runs", "list", "--status", "done"], &db.path);
    assert_refused(&out, "unknown status 'done'");
    assert!(stderr(&out).contains("running, suspended, ok, error, cancelled, exhausted"), "{}", stderr(&out));
}

#[test]
fn meta_behind_is_reported_then_repaired_keeping_every_other_field() {
    let db = Db::new();
    let before = seed_meta_behind(&db, "behind");

    let out = fencesim(&["runs", "audit"], &db.path);
    assert_exit(&out, 1);
    assert!(stdout(&out).starts_with("behind meta-behind: "), "{}", stdout(&out));
    assert_eq!(stdout(&out).lines().count(), 1);
    assert_eq!(db.meta("behind"), before, "an audit without --repair writes nothing");

    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("behind meta-behind: "), "{}", stdout(&out));
    assert!(stdout(&out).trim_end().ends_with("(repaired to 'ok')"), "{}", stdout(&out));

    let out = fencesim(&["runs", "audit"], &db.path);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out).trim(), "every run is consistent");

    let after = db.meta("behind");
    assert_eq!(after.status, RunStatus::Ok);
    assert!(after.updated_at_ms.is_some());
    assert_eq!(RunMeta { status: RunStatus::Running, updated_at_ms: None, ..after }, before);
}

/// A stranded run (a terminal meta over a journal with work to do) is reported and never
/// reopened: its journal may have lost its settle to damage no scan sees, and a reopened run
/// would be resumed and pay its calls again. It is not even leased (no epoch bump).
#[test]
fn a_stranded_run_is_reported_and_never_reopened() {
    let db = Db::new();
    let meta = RunMeta::new("stranded", RunStatus::Cancelled).with_segments(1);
    db.seed(&meta, &[running(Seq(1), kind::AGENT, "step one")]);
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_exit(&out, 1);
    assert!(stdout(&out).starts_with("stranded stranded: "), "{}", stdout(&out));
    assert!(stdout(&out).contains("(terminal: a repair never reopens a finished run)"), "{}", stdout(&out));
    assert_eq!(db.meta("stranded"), meta);
    assert_eq!(epoch_of(&db, "stranded"), None, "the run was leased");
    let out = fencesim(&["runs", "audit", "--repair", "--format", "json"], &db.path);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((&doc["runs"][0]["repair"], &doc["remaining"]), (&json!("not-reopened"), &json!(1)));
}

/// The epoch high-water of a run (its `epochs` row), if any.
fn epoch_of(db: &Db, run: &str) -> Option<i64> {
    let conn = rusqlite::Connection::open_with_flags(&db.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    conn.query_row("SELECT epoch FROM epochs WHERE run_id = ?1", [run], |r| r.get(0)).ok()
}

#[test]
fn a_suspect_run_stays_and_fails_even_with_repair() {
    let db = Db::new();
    let mut entries = dispatched();
    entries.push(suspension(Seq(3), kind::EXTERNAL, "webhook"));
    let meta = RunMeta::new("suspect", RunStatus::Ok).with_segments(1);
    db.seed(&meta, &entries);
    for args in [&["runs", "audit"][..], &["runs", "audit", "--repair"]] {
        let out = fencesim(args, &db.path);
        assert_exit(&out, 1);
        assert!(stdout(&out).starts_with("suspect suspect: "), "{}", stdout(&out));
    }
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert!(stdout(&out).trim_end().ends_with("(not repaired)"), "{}", stdout(&out));
    assert_eq!(db.meta("suspect"), meta);
}

#[test]
fn a_run_leased_by_a_live_owner_is_skipped() {
    let db = Db::new();
    let before = seed_meta_behind(&db, "held");
    let lease = db.store().acquire(&RunId::new("held"), "worker-1").unwrap();
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_exit(&out, 1);
    assert!(stdout(&out).starts_with("held meta-behind: "), "{}", stdout(&out));
    assert!(stdout(&out).trim_end().ends_with("(leased by a live owner, skipped)"), "{}", stdout(&out));
    assert_eq!(db.meta("held"), before);
    // The live owner's lease is untouched.
    db.store().renew(&lease).unwrap();
}

/// A database another process keeps locked for writing is waited for, then the run is skipped
/// as busy (exit 1, the run still divergent), not the audit stopped with a harness error.
#[test]
fn a_run_whose_database_stays_busy_is_skipped() {
    let db = Db::new();
    let before = seed_meta_behind(&db, "busy");
    let writer = rusqlite::Connection::open(&db.path).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    writer.execute_batch("ROLLBACK").unwrap();
    assert_exit(&out, 1);
    assert!(stdout(&out).starts_with("busy meta-behind: "), "{}", stdout(&out));
    assert!(stdout(&out).trim_end().ends_with("(database busy, skipped)"), "{}", stdout(&out));
    assert_eq!(db.meta("busy"), before);
}

#[test]
fn list_prints_every_run_and_filters_by_status() {
    let db = Db::new();
    seed_meta_behind(&db, "a-behind");
    db.seed(&RunMeta::new("b-done", RunStatus::Ok).with_segments(2), &[]);

    let out = fencesim(&["runs", "list"], &db.path);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "a-behind running segments=1 name=nightly\nb-done ok segments=2\n");

    let out = fencesim(&["runs", "list", "--status", "ok"], &db.path);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "b-done ok segments=2\n");

    let out = fencesim(&["runs", "list", "--format", "json"], &db.path);
    assert_exit(&out, 0);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["runs"][1], json!({"run": "b-done", "status": "ok", "segments": 2, "name": null}));
}

#[test]
fn audit_json_is_one_document_with_remaining() {
    let db = Db::new();
    seed_meta_behind(&db, "behind");

    let out = fencesim(&["runs", "audit", "--format", "json"], &db.path);
    assert_exit(&out, 1);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["remaining"], 1);
    let row = &doc["runs"][0];
    assert_eq!((&row["run"], &row["verdict"], &row["rule"]), (&json!("behind"), &json!("meta-behind"), &json!("R5")));
    assert_eq!((&row["repair"], &row["repaired_to"]), (&Value::Null, &Value::Null));

    let out = fencesim(&["runs", "audit", "--repair", "--format", "json"], &db.path);
    assert_exit(&out, 0);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["remaining"], 0);
    assert_eq!((&doc["runs"][0]["repair"], &doc["runs"][0]["repaired_to"]), (&json!("repaired"), &json!("ok")));

    let out = fencesim(&["runs", "audit", "--format", "json"], &db.path);
    assert_exit(&out, 0);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc, json!({"runs": [], "remaining": 0}));
}

/// The residue of a real crash, not a hand-built one: the engine runs `happy` over a WAL file
/// and dies between the `run_settle` append and the terminal meta write. The file audits
/// meta-behind, `--repair` fixes it, and it then audits clean.
#[test]
fn a_crash_between_the_settle_and_the_meta_write_is_repaired_by_the_audit() {
    use std::rc::Rc;

    use fencesim_engine::{
        Engine, EngineError, EngineOptions, Fault, Ledger, Phase, RunOptions, Site, Workflow, Write,
    };
    use fencesim_sim::env::{SimClock, SimEnv};
    use fencesim_store::{Store, StoreDefects};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crashed.db");
    let run = RunId::new("crashed");
    let crashed = madsim::runtime::Runtime::with_seed_and_config(3, madsim::Config::default()).block_on(async {
        let clock = SimClock::new(0);
        let options =
            SqliteOptions::file(&path, Arc::new(clock.clone())).lease_ttl_ms(2_000).defects(StoreDefects::NONE);
        let store: Rc<dyn Store> = Rc::new(SqliteStore::open(options).expect("open"));
        let env = SimEnv::new(clock);
        env.on_fault(|p| match p.site {
            Site::Write { phase: Phase::Before, write: Write::PutMeta(m), .. } if m.status.is_terminal() => {
                Fault::Crash
            }
            _ => Fault::Continue,
        });
        let engine = Engine::new(store, env, Ledger::new(), EngineOptions::default()).expect("engine");
        engine.run(&run, &Workflow::happy(), RunOptions::default()).await
    });
    assert!(matches!(crashed, Err(EngineError::Crashed)), "{crashed:?}");

    let audit = fencesim(&["runs", "audit"], &path);
    assert_exit(&audit, 1);
    assert!(stdout(&audit).contains("crashed meta-behind"), "{}", stdout(&audit));
    let repair = fencesim(&["runs", "audit", "--repair"], &path);
    assert_exit(&repair, 0);
    assert!(stdout(&repair).contains("(repaired to 'ok')"), "{}", stdout(&repair));
    let again = fencesim(&["runs", "audit"], &path);
    assert_exit(&again, 0);
    assert!(stderr(&again).contains("every run is consistent"), "{}", stderr(&again));
}

/// Every file in the database's folder, with its bytes: what "nothing changed" compares. SQLite
/// gives any reader of a WAL database (read-only ones too) its shared-memory index `-shm` and an
/// empty `-wal`; those are SQLite's coordination files, not data, and are left out, but a `-wal`
/// holding a byte is not.
fn folder_bytes(db: &Db) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(db.path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .filter(|(name, bytes)| !(name.ends_with("-shm") || (name.ends_with("-wal") && bytes.is_empty())))
        .collect();
    files.sort();
    files
}

/// Run raw SQL on the database, bypassing every fence: how a fixture is damaged.
fn raw(db: &Db, sql: &str) {
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    conn.execute_batch(sql).unwrap();
}

fn entry_count(db: &Db) -> i64 {
    let conn = rusqlite::Connection::open_with_flags(&db.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    conn.query_row("SELECT count(*) FROM entries", [], |r| r.get(0)).unwrap()
}

/// The fixtures an operator might point the tools at: healthy, divergent, foreign and damaged.
#[allow(
    clippy::too_many_lines,
    reason = "every fixture an operator might meet, built in one place so the tests share them"
)]
fn fixtures() -> Vec<(&'static str, Db)> {
    let healthy = Db::new();
    healthy.seed(&RunMeta::new("a", RunStatus::Running).with_segments(1), &dispatched());
    let behind = Db::new();
    seed_meta_behind(&behind, "behind");
    let foreign = Db::new();
    raw(&foreign, "PRAGMA application_id = 42; CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');");
    let blank = Db::new();
    raw(&blank, "PRAGMA user_version = 0;");
    let trigger = Db::new();
    seed_meta_behind(&trigger, "t");
    raw(&trigger, "CREATE TRIGGER wipe AFTER UPDATE ON meta BEGIN DELETE FROM entries; END;");
    let view = Db::new();
    seed_meta_behind(&view, "v");
    raw(&view, "CREATE VIEW everything AS SELECT * FROM entries;");
    // Issue 38: a trigger wearing the name of one of fencesim's indexes (the index dropped) is
    // no foreign name, and a repair's meta write ran it: every journal entry deleted, exit 0.
    let disguised = Db::new();
    seed_meta_behind(&disguised, "dt");
    raw(&disguised, DISGUISED_TRIGGER);
    // A trigger under a new name on the table a repair's acquire writes first.
    let on_leases = Db::new();
    seed_meta_behind(&on_leases, "tl");
    raw(&on_leases, "CREATE TRIGGER tidy AFTER INSERT ON leases BEGIN DELETE FROM entries; END;");
    // fencesim's names, another definition.
    let tampered = Db::new();
    seed_meta_behind(&tampered, "ti");
    raw(&tampered, "DROP INDEX meta_name; CREATE INDEX meta_name ON meta (name, status);");
    let duplicate = Db::new();
    seed_meta_behind(&duplicate, "d");
    raw(
        &duplicate,
        "INSERT INTO entries (run_id, seq, payload) SELECT run_id, seq, payload FROM entries WHERE seq = 2;",
    );
    let gap = Db::new();
    seed_meta_behind(&gap, "g");
    raw(&gap, "DELETE FROM entries WHERE seq = 2;");
    let mismatch = Db::new();
    seed_meta_behind(&mismatch, "m");
    raw(&mismatch, "UPDATE entries SET seq = 7 WHERE seq = 3;");
    let orphan = Db::new();
    seed_meta_behind(&orphan, "o");
    raw(&orphan, "DELETE FROM meta;");
    let dropped = Db::new();
    seed_meta_behind(&dropped, "x");
    raw(&dropped, "DROP TABLE blobs;");
    let text_seq = Db::new();
    seed_meta_behind(&text_seq, "ts");
    raw(&text_seq, "UPDATE entries SET seq = 'two' WHERE seq = 2;");
    let blob_payload = Db::new();
    seed_meta_behind(&blob_payload, "bp");
    raw(&blob_payload, "UPDATE meta SET payload = CAST(payload AS BLOB);");
    // A number would be stored as text (the column's affinity); a blob stays a blob.
    let blob_id = Db::new();
    seed_meta_behind(&blob_id, "n");
    raw(&blob_id, "UPDATE meta SET run_id = CAST(run_id AS BLOB);");
    // Rows moved between runs: an entry to a run id of no meta row (a number, stored as text),
    // a meta row to another run's key.
    let moved_entry = Db::new();
    seed_meta_behind(&moved_entry, "me");
    raw(&moved_entry, "UPDATE entries SET run_id = 6 WHERE id = (SELECT max(id) FROM entries);");
    let moved_meta = Db::new();
    seed_meta_behind(&moved_meta, "mm");
    seed_meta_behind(&moved_meta, "other");
    raw(&moved_meta, "UPDATE meta SET run_id = 6 WHERE run_id = 'mm';");
    // Epochs the file records above the run's high-water: a lease row's, a genesis's.
    let ghost = Db::new();
    seed_meta_behind(&ghost, "gl");
    raw(&ghost, "INSERT INTO epochs VALUES ('gl', 3); INSERT INTO leases VALUES ('gl', 'ghost', 1000, 0);");
    let genesis = Db::new();
    let mut meta = seed_meta_behind(&genesis, "ge");
    meta.genesis = Some("ge@1700000000000#e2".to_owned());
    genesis.store().put_meta(&meta, None).unwrap();
    raw(&genesis, "INSERT INTO epochs VALUES ('ge', 1);");
    vec![
        ("moved-entry", moved_entry),
        ("moved-meta", moved_meta),
        ("ghost-lease", ghost),
        ("genesis-above-epochs", genesis),
        ("healthy", healthy),
        ("meta-behind", behind),
        ("foreign", foreign),
        ("blank", blank),
        ("trigger", trigger),
        ("view", view),
        ("disguised-trigger", disguised),
        ("trigger-on-leases", on_leases),
        ("tampered-index", tampered),
        ("duplicate-seq", duplicate),
        ("seq-gap", gap),
        ("payload-seq-mismatch", mismatch),
        ("entries-without-meta", orphan),
        ("dropped-table", dropped),
        ("text-seq", text_seq),
        ("blob-payload", blob_payload),
        ("blob-run-id", blob_id),
    ]
}

#[test]
fn reading_never_changes_a_byte_of_any_database() {
    for (name, db) in fixtures() {
        let before = folder_bytes(&db);
        for cmd in [&["runs", "audit"][..], &["runs", "audit", "--format", "json"], &["runs", "list"]] {
            let out = fencesim(cmd, &db.path);
            assert!(!stderr(&out).contains("panic"), "{name} {cmd:?}: {}", stderr(&out));
            assert!(folder_bytes(&db) == before, "{name}: {cmd:?} changed the database folder");
        }
    }
}

/// Every fixture with a journal keeps every entry through a repair (the others have no
/// `entries` table to count: they are refused before anything is read).
#[test]
fn repair_never_loses_a_journal_entry() {
    let mut counted = Vec::new();
    for (name, db) in fixtures() {
        let conn = rusqlite::Connection::open(&db.path).unwrap();
        let before: Option<i64> = conn.query_row("SELECT count(*) FROM entries", [], |r| r.get(0)).ok();
        drop(conn);
        let out = fencesim(&["runs", "audit", "--repair"], &db.path);
        assert!(!stderr(&out).contains("panic"), "{name}: {}", stderr(&out));
        if let Some(before) = before {
            counted.push(name);
            assert_eq!(
                entry_count(&db),
                before,
                "{name}: repair changed the journal\n{}{}",
                stdout(&out),
                stderr(&out)
            );
        }
    }
    let journal_less = ["foreign", "blank"];
    let expected: Vec<&str> = fixtures().into_iter().map(|(n, _)| n).filter(|n| !journal_less.contains(n)).collect();
    assert_eq!(counted, expected, "every fixture with a journal was compared");
}

/// The trigger of issue 38: it wears the name of fencesim's index `meta_status` and deletes the
/// whole journal on a meta write.
const DISGUISED_TRIGGER: &str =
    "DROP INDEX meta_status; CREATE TRIGGER meta_status AFTER UPDATE ON meta BEGIN DELETE FROM entries; END;";

/// A file whose schema is not exactly fencesim's (by type, name, table and definition, not by
/// name alone) is refused by every command that opens a user's file, the ones that write
/// (`runs audit --repair`, `boot`) included: exit 2, one line naming the object, not a byte of
/// the folder changed.
#[test]
fn a_schema_object_fencesim_did_not_create_is_refused_by_name() {
    let cases = [
        ("trigger", "trigger 'wipe' fencesim did not create"),
        ("view", "view 'everything' fencesim did not create"),
        ("foreign", "another application"),
        ("disguised-trigger", "it has a trigger 'meta_status' where fencesim creates the index of that name"),
        ("trigger-on-leases", "trigger 'tidy' fencesim did not create"),
        ("tampered-index", "the definition of its index 'meta_name' is not the one fencesim creates"),
    ];
    for (name, mentions) in cases {
        let db = fixtures().into_iter().find(|(n, _)| *n == name).unwrap().1;
        let before = folder_bytes(&db);
        for cmd in [&["runs", "audit"][..], &["runs", "audit", "--repair"], &["runs", "list"], &["boot"]] {
            assert_refused(&fencesim(cmd, &db.path), mentions);
            assert!(folder_bytes(&db) == before, "{name}: {cmd:?} changed the database folder");
        }
    }
}

/// Issue 38 end to end: the disguised trigger's file is refused by `--repair` before anything is
/// written, the journal whole; the same file with the trigger gone (the index made again) is
/// repaired, every entry kept.
#[test]
fn a_trigger_named_like_a_fencesim_index_never_runs_under_a_repair() {
    let db = Db::new();
    seed_meta_behind(&db, "behind");
    let entries = entry_count(&db);
    raw(&db, DISGUISED_TRIGGER);
    let before = folder_bytes(&db);
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_refused(&out, "trigger 'meta_status'");
    assert!(stdout(&out).is_empty(), "nothing reported as repaired: {}", stdout(&out));
    assert!(folder_bytes(&db) == before, "the refused repair wrote");
    assert_eq!(entry_count(&db), entries);
    raw(&db, "DROP TRIGGER meta_status; CREATE INDEX meta_status ON meta (status);");
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("(repaired to 'ok')"), "{}", stdout(&out));
    assert_eq!(entry_count(&db), entries);
}

/// SQLite's own statistics tables (`ANALYZE`) do not make a file foreign: it is audited and
/// repaired as before, every entry kept.
#[test]
fn a_file_analyze_ran_on_is_still_repaired() {
    let db = Db::new();
    seed_meta_behind(&db, "behind");
    let entries = entry_count(&db);
    raw(&db, "ANALYZE;");
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("(repaired to 'ok')"), "{}", stdout(&out));
    assert_eq!(entry_count(&db), entries);
}

#[test]
fn corruption_is_reported_with_the_run_and_never_repaired() {
    let expected = [
        ("duplicate-seq", "d corrupt: seq 2 after seq 3: a repeat or a step back"),
        ("seq-gap", "g corrupt: seq 3 after seq 1: a gap"),
        ("payload-seq-mismatch", "m corrupt: entry row 3 is stored at seq 7 but its payload says seq 3"),
        ("entries-without-meta", "o corrupt: journal entries without a meta row"),
        ("dropped-table", "database corrupt: schema objects missing (dropped?): blobs"),
        ("text-seq", "ts corrupt: entries.seq holds a text value, not integer"),
        ("blob-payload", "bp corrupt: meta.payload holds a blob value, not text"),
        ("blob-run-id", "database corrupt: meta.run_id holds a blob value, not text"),
        ("moved-entry", "database corrupt: entries of run '6', which has no meta row, start at seq 3"),
        ("moved-meta", "database corrupt: the meta row of run '6' holds the meta of run 'mm'"),
        (
            "ghost-lease",
            "gl corrupt: its lease row records epoch 1000, above the run's epoch high-water (the epochs row's 3)",
        ),
        ("genesis-above-epochs", "ge corrupt: its meta's genesis records epoch 2, above the run's epoch high-water"),
    ];
    for (name, says) in expected {
        let db = fixtures().into_iter().find(|(n, _)| *n == name).unwrap().1;
        let out = fencesim(&["runs", "audit"], &db.path);
        assert_exit(&out, 1);
        assert!(stdout(&out).contains(says), "{name}: expected {says:?} in {}", stdout(&out));
        let metas = folder_bytes(&db);
        let out = fencesim(&["runs", "audit", "--repair"], &db.path);
        assert_exit(&out, 1);
        assert!(stdout(&out).contains("(rows not trusted, not repaired)"), "{name}: {}", stdout(&out));
        // A damaged file is not repaired at all: no other run either.
        if says.starts_with("database corrupt") {
            assert!(!stdout(&out).contains("repaired to"), "{name}: {}", stdout(&out));
            assert!(folder_bytes(&db) == metas, "{name}: a repair wrote to a damaged file");
            let list = fencesim(&["runs", "list"], &db.path);
            assert_exit(&list, 1);
            assert!(stderr(&list).starts_with("database corrupt: "), "{name}: {}", stderr(&list));
            assert_eq!(stdout(&list), "", "{name}: listed from a damaged file");
        }
    }
}

/// The damage of issue 25 on a real world's file: a finished run whose last entry (its settle) is
/// moved to another run id is never reopened; a run whose lease row or genesis records an epoch
/// above its high-water is reported and never leased (an acquire would grant a used epoch); a
/// moved meta row damages the whole file, so another run's lagging meta is left too.
#[test]
fn a_real_files_damage_is_never_repaired_from() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.db");
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["run", "--scenario", "swarm", "--seed", "3", "--keep-db"])
        .arg(&base)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let copy = |sql: &str| {
        let db = Db::new();
        std::fs::copy(&base, &db.path).unwrap();
        raw(&db, sql);
        db
    };
    let conn = rusqlite::Connection::open(&base).unwrap();
    let finished: Vec<String> = conn
        .prepare("SELECT run_id FROM meta WHERE status = 'ok' ORDER BY run_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(finished.len() >= 2, "two finished runs: {finished:?}");
    let (run, other) = (&finished[0], &finished[1]);
    let behind = format!(
        "UPDATE meta SET payload = json_set(payload, '$.status', 'running'), status = 'running' WHERE run_id = '{run}';"
    );
    let cases = [
        format!("UPDATE entries SET run_id = 6 WHERE id = (SELECT max(id) FROM entries WHERE run_id = '{run}');"),
        format!("INSERT INTO leases VALUES ('{run}', 'ghost', 1000, 0); {behind}"),
        format!("DELETE FROM epochs WHERE run_id = '{run}'; {behind}"),
        format!("UPDATE meta SET run_id = 6 WHERE run_id = '{other}'; {behind}"),
    ];
    for sql in &cases {
        let db = copy(sql);
        let before = folder_bytes(&db);
        let audit = fencesim(&["runs", "audit"], &db.path);
        assert_exit(&audit, 1);
        assert!(stdout(&audit).contains("corrupt: "), "{sql}: {}", stdout(&audit));
        assert!(folder_bytes(&db) == before, "{sql}: the audit wrote");
        let repair = fencesim(&["runs", "audit", "--repair"], &db.path);
        assert_exit(&repair, 1);
        assert!(folder_bytes(&db) == before, "{sql}: the repair wrote\n{}", stdout(&repair));
    }
}

#[test]
fn an_epoch_at_the_integer_limit_is_refused_not_wrapped() {
    let db = Db::new();
    seed_meta_behind(&db, "limit");
    raw(&db, &format!("INSERT INTO epochs (run_id, epoch) VALUES ('limit', {})", i64::MAX));
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_refused(&out, "overflow");
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let epoch: i64 = conn.query_row("SELECT epoch FROM epochs WHERE run_id = 'limit'", [], |r| r.get(0)).unwrap();
    assert_eq!(epoch, i64::MAX, "the epoch wrapped");
}

#[test]
fn list_escapes_control_characters_in_run_ids_and_names() {
    let db = Db::new();
    let mut meta = RunMeta::new("evil\n\u{1b}[2Jforged ok segments=9", RunStatus::Running).with_segments(1);
    meta.name = Some("bell\u{7}".to_owned());
    db.seed(&meta, &dispatched());
    let out = fencesim(&["runs", "list"], &db.path);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "one row, none forged: {text:?}");
    assert!(!text.trim_end().chars().any(char::is_control), "a raw control character: {text:?}");
    assert!(text.contains("evil\\n\\u{1b}[2Jforged") && text.contains("name=bell\\u{7}"), "{text:?}");
    // The audit names the same run on one line too (a meta behind its settle, to be reported).
    let mut entries = dispatched();
    entries.push(run_settle(Seq(3), RunStatus::Ok, 1));
    let behind = RunMeta::new("bad\nid", RunStatus::Running).with_segments(1);
    db.seed(&behind, &entries);
    // A run id holding a backslash and an `n` must not read as the one holding a line break.
    let lookalike = RunMeta::new("bad\\nid", RunStatus::Running).with_segments(1);
    db.seed(&lookalike, &entries);
    let audit = fencesim(&["runs", "audit"], &db.path);
    let text = stdout(&audit);
    assert!(text.contains("bad\\nid meta-behind") && text.contains("bad\\\\nid meta-behind"), "{text:?}");
    assert!(!text.lines().any(|l| l.starts_with("id")), "a forged line: {text:?}");
}
