//! `fencesim boot` and bad input: an invalid ttl touches nothing, a missing folder, a folder, a
//! file that is not SQLite and someone else's SQLite database all exit 2 with one line and leave
//! every byte as it was.

use std::path::Path;
use std::process::{Command, Output};

use crate::cli;

fn boot(db: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .arg("boot")
        .arg("--db")
        .arg(db)
        .args(extra)
        .output()
        .expect("run fencesim")
}

fn assert_refused(out: &Output, mentions: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line expected: {stderr}");
    assert!(stderr.contains(mentions), "expected {mentions:?} in {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn boots_a_fresh_file_and_reopens_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for _ in 0..2 {
        let out = boot(&db, &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("tables=5"));
    }
}

#[test]
fn invalid_ttl_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for ttl in ["0", "-1", "2147483648", "9223372036854775807"] {
        assert_refused(&boot(&db, &["--ttl-ms", ttl]), "lease ttl must be an integer in 1..=2147483647");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "ttl {ttl}: a file was created");
    }
}

/// A start instant more than a minute ahead is refused at once, never slept on.
#[test]
fn a_start_instant_far_ahead_is_refused_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for at in ["99999999999999", "9223372036854775807"] {
        assert_refused(&boot(&db, &["--start-at-ms", at]), "is more than a minute ahead");
    }
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "a file was created");
}

#[test]
fn missing_folder_and_folder_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert_refused(&boot(&dir.path().join("no/such/folder/runs.db"), &[]), "database folder does not exist");
    assert_refused(&boot(dir.path(), &[]), "database path is a folder");
    assert!(!dir.path().join("no").exists());
}

#[test]
fn a_file_that_is_not_sqlite_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.txt");
    let text = "these are somebody's notes, not a database; they must survive byte for byte\n".repeat(20);
    std::fs::write(&db, &text).unwrap();
    assert_refused(&boot(&db, &[]), "not a SQLite database");
    assert_eq!(std::fs::read_to_string(&db).unwrap(), text);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no -wal or -shm files left behind");
}

#[test]
fn another_applications_database_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("other.db");
    make_foreign_db(&db);
    let before = std::fs::read(&db).unwrap();
    assert_refused(&boot(&db, &[]), "another application");
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// A SQLite database of some other program.
fn make_foreign_db(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x');").unwrap();
}

/// A database file that cannot be written (mode 0444, the command bound by file permissions: as
/// root, without the capabilities that override them) is refused, and never written.
#[test]
fn an_unwritable_database_is_refused_untouched() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    assert!(boot(&db, &[]).status.success());
    let before = std::fs::read(&db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = cli::bound_by_permissions(Path::new(env!("CARGO_BIN_EXE_fencesim")))
        .arg("boot")
        .arg("--db")
        .arg(&db)
        .output()
        .expect("run fencesim");
    assert_refused(&out, "the database file is not writable");
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn a_uri_looking_path_is_a_plain_file() {
    let dir = tempfile::tempdir().unwrap();
    let name = "file:runs.db?mode=memory";
    let out = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .current_dir(dir.path())
        .args(["boot", "--db", name])
        .output()
        .expect("run fencesim");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.path().join(name).is_file(), "the path was read as a URI, not as a file name");
}

#[test]
fn a_crashed_foreign_wal_database_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (live, crashed) = (dir.path().join("live.db"), dir.path().join("crashed.db"));
    let conn = rusqlite::Connection::open(&live).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())).unwrap();
    conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x');").unwrap();
    // Copy the files while the writer is open: a crash that left frames in the WAL.
    std::fs::copy(&live, &crashed).unwrap();
    std::fs::copy(dir.path().join("live.db-wal"), dir.path().join("crashed.db-wal")).unwrap();
    drop(conn);
    let wal = dir.path().join("crashed.db-wal");
    let before = (std::fs::read(&crashed).unwrap(), std::fs::read(&wal).unwrap());
    assert!(!before.1.is_empty(), "the copied WAL holds frames");
    assert_refused(&boot(&crashed, &[]), "another application");
    assert_eq!((std::fs::read(&crashed).unwrap(), std::fs::read(&wal).unwrap()), before, "db or WAL changed");
}

#[test]
fn an_empty_database_of_another_application_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("versioned.db");
    rusqlite::Connection::open(&db).unwrap().execute_batch("PRAGMA user_version = 7;").unwrap();
    let before = std::fs::read(&db).unwrap();
    assert_refused(&boot(&db, &[]), "user_version=7");
    assert_eq!(std::fs::read(&db).unwrap(), before);
}
