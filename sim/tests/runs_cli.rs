//! `fencesim runs audit` and `fencesim runs list` over real database files: bad input exits 2 and
//! creates or changes nothing; the crash residues of contracts 4.2 (meta behind a settle, a
//! stranded terminal meta, a suspect one) are reported, repaired when the table allows it, and
//! the exit code says whether anything remains; a run leased by a live owner is skipped.

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

#[test]
fn a_stranded_run_is_repaired_to_running() {
    let db = Db::new();
    db.seed(
        &RunMeta::new("stranded", RunStatus::Cancelled).with_segments(1),
        &[running(Seq(1), kind::AGENT, "step one")],
    );
    let out = fencesim(&["runs", "audit", "--repair"], &db.path);
    assert_exit(&out, 0);
    assert!(stdout(&out).starts_with("stranded stranded: "), "{}", stdout(&out));
    assert!(stdout(&out).contains("(repaired to 'running')"), "{}", stdout(&out));
    assert_eq!(db.meta("stranded").status, RunStatus::Running);
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

    use fencesim::env::{SimClock, SimEnv};
    use fencesim_engine::{
        Engine, EngineError, EngineOptions, Fault, Ledger, Phase, RunOptions, Site, Workflow, Write,
    };
    use fencesim_store::{Defects, Store};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crashed.db");
    let run = RunId::new("crashed");
    let crashed = madsim::runtime::Runtime::with_seed_and_config(3, madsim::Config::default()).block_on(async {
        let clock = SimClock::new(0);
        let options = SqliteOptions::file(&path, Arc::new(clock.clone())).lease_ttl_ms(2_000).defects(Defects::NONE);
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
