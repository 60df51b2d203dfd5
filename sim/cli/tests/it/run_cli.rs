//! `fencesim run` end to end: two processes print the same bytes (text, JSON, a file database);
//! madsim's own determinism check passes over a whole world, and a world on a reused memdb or
//! file matches one on a fresh one; bad input exits 2 with one line; a
//! planted defect exits 1 with a repro command that reproduces the run; `--keep-db` saves a
//! database `fencesim runs audit` can open, and never overwrites; a reader closing the pipe early
//! ends the run quietly with 141.

use std::process::Output;

use fencesim_sim::catalogue;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};

use crate::cli;

use cli::{assert_exit, fencesim, need};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit 2 with exactly one `fencesim: error:` line on stderr mentioning every `needle`.
fn assert_refused(out: &Output, needles: &[&str]) {
    assert_exit(out, 2);
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    assert!(err.starts_with("fencesim: error: "), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "expected {needle:?} in {err}");
    }
}

const SCENARIO: &str = "swarm";
const SEED: u64 = 7;

fn config() -> WorldConfig {
    WorldConfig {
        scenario: catalogue::scenario(SCENARIO).expect("a built-in scenario"),
        seed: SEED,
        db: DbKind::Memdb,
        store_defects: Default::default(),
        engine_defects: Default::default(),
        keep_db: None,
        adapter: None,
    }
}

#[test]
fn two_processes_print_byte_identical_output() {
    let seed = SEED.to_string();
    let base = ["run", "--scenario", SCENARIO, "--seed", seed.as_str(), "--trace"];
    for extra in [&[][..], &["--format", "json"], &["--db", "file"]] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let first = fencesim(&args);
        let second = fencesim(&args);
        assert_exit(&first, 0);
        assert!(first.stdout.len() > 10_000, "{args:?} printed no trace: {}", text(&first.stdout));
        assert!(first.stdout == second.stdout, "{args:?}: two processes printed different output");
    }
}

/// madsim's check: the second run draws exactly the random numbers the first drew, in the same
/// order (it panics at the first divergence). The fingerprint matches `world::run`'s too.
#[test]
fn madsim_finds_the_world_deterministic() {
    let fingerprint = madsim::runtime::Runtime::check_determinism(SEED, madsim::Config::default(), || async {
        world::run_in_runtime(config()).await.map(|r| r.fingerprint)
    })
    .expect("the world runs");
    assert_eq!(fingerprint, world::run(&config()).expect("the world runs").fingerprint);
}

/// A world takes the last world's connections on its thread (sim/src/stores.rs), with the
/// database emptied: it must answer as a fresh database would. The first run is on a new thread
/// (a fresh database), the second on this one after another world filled and left its database.
/// Its kept database holds its own rows and nothing of the earlier world's (byte for byte).
fn a_world_on_a_reused_database_matches_one_on_a_fresh_database(db: DbKind) {
    // File worlds reuse only on a thread that asks for it (memdbs always do).
    let _reuse = fencesim_sim::stores::FileReuse::on_this_thread();
    let dir = tempfile::tempdir().unwrap();
    let kept = |name: &str| WorldConfig {
        db,
        keep_db: Some(fencesim_sim::files::Output { path: dir.path().join(name), overwrite: false }),
        ..config()
    };
    let fresh = std::thread::scope(|s| s.spawn(|| world::run(&kept("fresh.db")).expect("the world runs")).join())
        .expect("the thread ends")
        .fingerprint;
    let other = WorldConfig { seed: SEED + 1, db, ..config() };
    assert!(world::run(&other).expect("the world runs").counters.rows > 100, "the other world left rows behind");
    assert_eq!(world::run(&kept("reused.db")).expect("the world runs").fingerprint, fresh);
    let bytes = |name: &str| std::fs::read(dir.path().join(name)).expect("the kept database");
    assert!(bytes("fresh.db") == bytes("reused.db"), "the kept databases differ");
    // And the database was in fact reused: no store of the worlds above still holds a connection.
    assert!(fencesim_sim::stores::Db::new(db).expect("a database").reused(), "the next world opens its own");
}

#[test]
fn a_world_on_a_reused_memdb_matches_one_on_a_fresh_memdb() {
    a_world_on_a_reused_database_matches_one_on_a_fresh_database(DbKind::Memdb);
}

#[test]
fn a_world_on_a_reused_file_matches_one_on_a_fresh_file() {
    a_world_on_a_reused_database_matches_one_on_a_fresh_database(DbKind::File);
}

/// A world the harness cannot finish is a typed harness error naming the world, not a verdict:
/// here the final database cannot be kept, its folder being gone.
#[test]
fn a_database_that_cannot_be_kept_is_a_typed_harness_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone").join("world.db");
    let cfg =
        WorldConfig { keep_db: Some(fencesim_sim::files::Output { path: path.clone(), overwrite: false }), ..config() };
    let err = world::run(&cfg).expect_err("the database cannot be kept");
    assert!(matches!(&*err.error, world::HarnessError::KeepDb { path: p, .. } if *p == path), "{err:?}");
    assert!(err.to_string().starts_with(&format!("world {SCENARIO} seed {SEED}: --keep-db ")), "{err}");
    // The message names the cause; as a `source` too, a printed chain (`{:#}`) would repeat it.
    assert!(std::error::Error::source(&err).is_none(), "{err:?}");
}

#[test]
fn a_malformed_scenario_file_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "description = \"inverted range\"\n[world]\nworkers = [5, 2]\n").unwrap();
    let path = path.to_str().unwrap();
    let out = fencesim(&["run", "--scenario", path, "--seed", "1"]);
    assert_refused(&out, &[&format!("{path}:3"), "empty"]);
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let cases: [(&[&str], &str); 5] = [
        (&["run", "--scenario", "nope", "--seed", "1"], "unknown scenario"),
        (&["run", "--scenario", "swarm", "--seed", "notanumber"], "notanumber"),
        (&["run", "--scenario", "swarm", "--seed", "1", "--defect", "nope"], "unknown defect 'nope'"),
        (&["run", "--scenario", "swarm", "--seed", "1", "--db", "nope"], "unknown db 'nope'"),
        (&["run", "--scenario", "swarm"], "--seed"),
    ];
    for (args, needle) in cases {
        let out = fencesim(args);
        assert_refused(&out, &[needle]);
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
    }
}

/// The repro line of a failing world, without its leading `fencesim`.
fn repro_args(stdout: &str) -> Vec<String> {
    let line = stdout.lines().find_map(|l| l.trim().strip_prefix("repro: ")).expect("a repro line");
    let mut words = line.split(' ').map(str::to_owned);
    assert_eq!(words.next().as_deref(), Some("fencesim"), "{line}");
    words.collect()
}

#[test]
fn a_planted_defect_fails_with_a_repro_that_reproduces_it() {
    let base = ["run", "--scenario", "mid-call-takeover", "--defect", "non-atomic-fence", "--seed"];
    // The first of a few seeds the defect fails (every one does at the time of writing).
    let (seed, failed) = (1..=10)
        .map(|seed: u64| (seed, fencesim(&[&base[..], &[seed.to_string().as_str()]].concat())))
        .find(|(_, out)| out.status.code() != Some(0))
        .expect("non-atomic-fence fails one of 10 mid-call-takeover seeds");
    assert_exit(&failed, 1);
    let out = text(&failed.stdout);
    assert!(out.contains("VIOLATION "), "{out}");
    let repro = repro_args(&out);
    let expected = format!("run --scenario mid-call-takeover --seed {seed} --defect non-atomic-fence --trace");
    assert_eq!(repro.join(" "), expected);

    let again = fencesim(&repro);
    assert_exit(&again, 1);
    let traced = text(&again.stdout);
    // `--trace` prints the configuration and every row, then exactly the original report.
    assert!(traced.ends_with(&out), "the repro's report differs from the original:\n{traced}");
    assert!(traced.lines().count() > out.lines().count() + 100, "no trace: {traced}");
    assert!(fencesim(&repro).stdout == again.stdout, "the repro is not byte-identical run to run");
}

/// `--keep-db` saves the world's final state; `fencesim runs audit` opens it (exit 0 or 1, never
/// 2), and a second run refuses (exit 2) to overwrite it.
fn keep_db_round_trip(db: &str) {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("world.db");
    let kept_arg = kept.to_str().unwrap();
    let run = ["run", "--scenario", "swarm", "--seed", "3", "--db", db, "--keep-db", kept_arg];
    let out = fencesim(&run);
    assert_exit(&out, 0);
    let header = std::fs::read(&kept).expect("the database was saved");
    assert!(header.starts_with(b"SQLite format 3\0"), "not a SQLite file");

    let audit = fencesim(&["runs", "audit", "--db", kept_arg]);
    assert!(matches!(audit.status.code(), Some(0 | 1)), "audit: {}", text(&audit.stderr));
    let list = fencesim(&["runs", "list", "--db", kept_arg]);
    assert_exit(&list, 0);
    assert!(!list.stdout.is_empty(), "the saved database has no runs");

    let before = std::fs::read(&kept).unwrap();
    assert_refused(&fencesim(&run), &["--keep-db", "exists"]);
    assert_eq!(std::fs::read(&kept).unwrap(), before, "the existing file was changed");
}

#[test]
fn keep_db_saves_a_file_world_and_never_overwrites() {
    keep_db_round_trip("file");
}

/// A memdb world is saved to disk like a file world: `world::keep` copies it with SQLite's online
/// backup (a `VACUUM INTO` would have written through the memdb VFS, saving nothing while the run
/// exited 0), so the kept file must start with SQLite's header and hold the world's runs.
#[test]
fn keep_db_saves_a_memdb_world_and_never_overwrites() {
    keep_db_round_trip("memdb");
}

#[test]
fn a_reader_closing_the_pipe_early_ends_the_run_quietly_with_141() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["run", "--scenario", "boot-storm", "--seed", "1", "--trace"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fencesim");
    let mut first = [0u8; 16];
    child.stdout.take().expect("stdout").read_exact(&mut first).expect("some output");
    // The pipe's read end is dropped here; the trace (about 500 KB) is far longer than a pipe
    // buffer (64 KiB), so the writer is still writing when it goes.
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(141), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "nothing on stderr");
}

/// A closed pipe ends any command quietly with 141, also one whose writes fail as an error value
/// rather than a print (`conformance`).
#[test]
fn conformance_ends_quietly_with_141_on_a_closed_pipe() {
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["conformance", "--store", "sqlite-memdb"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fencesim");
    // The read end closes before the first check finishes.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(141), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "nothing on stderr");
}

/// Output that cannot be written (a full disk) is a harness error: exit 2, one line, no panic.
#[test]
fn a_full_disk_on_stdout_exits_2_with_one_line() {
    // Every Linux has /dev/full: without it this test fails, it never passes unrun.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").ok();
    let full = need(full, "/dev/full (a device every Linux has)");
    for args in [&["run", "--scenario", "swarm", "--seed", "1"][..], &["conformance", "--store", "sqlite-memdb"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
            .args(args)
            .stdout(full.try_clone().unwrap())
            .output()
            .expect("run fencesim");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line expected: {err}");
        assert!(err.contains("No space left on device") && !err.contains("panic"), "{args:?}: {err}");
    }
}
