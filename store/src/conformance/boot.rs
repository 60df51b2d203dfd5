//! The boot suite (contracts 2.5, B1-B3): an invalid ttl is refused before the location is
//! touched, many OS processes may open one fresh location at the same instant, and the boot
//! retry stays at boot: a runtime write meeting a held write lock fails busy at once. The
//! concurrent boot starts real processes, releases them at once from a readiness barrier, and
//! bounds its waits on the wall clock (through `crate::wall`, the one module allowed real time);
//! everything else runs on the fixture's manual clock.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};

use super::{
    Check, CheckResult, FENCED_RUN, MAIN_TTL_MS, OWNER_A, Suite, Target, Verdict, ensure, entry, expect_meta,
    expect_ok, fail, hook_once, leases, markers, require_fenced,
};
use crate::error::StoreError;
use crate::fault::FaultPoint;
use crate::types::{RunId, RunMeta, RunStatus};
use crate::wall::{self, Deadline};

/// The reference's boot race: 8 processes x 2 rounds (`Target::boot_rounds`), 60 s each.
const BOOT_PROCESSES: usize = 8;
const BOOT_DEADLINE_MS: u64 = 60_000;
/// A busy answer slower than this was a wait, not a fail-fast.
const FAIL_FAST_BOUND_MS: u64 = 1_000;

pub(super) fn checks() -> Vec<Check> {
    vec![
        check("B1", "ttl-intake", ttl_intake),
        check("B2", "concurrent-boot", concurrent_boot),
        check("B3", "runtime-fail-fast", runtime_fail_fast),
        check("B4", "format-boundaries", format_boundaries),
        check("B5", "read-only-open", read_only_open),
    ]
}

fn check(id: &'static str, name: &'static str, run: fn(&dyn Target) -> CheckResult) -> Check {
    Check { id, name, suite: Suite::Boot, run }
}

fn no_ttl() -> Verdict {
    Verdict::Skip("store has no lease ttl".to_owned())
}

/// B1 and D15: ttl 0, negative or above 2^31 - 1 is a config error raised before anything exists
/// at the location; the bounds 1 and 2^31 - 1 are accepted.
fn ttl_intake(t: &dyn Target) -> CheckResult {
    for ttl_ms in [0, -1, 2_147_483_648, i64::MAX] {
        let intake = t.ttl_intake(ttl_ms).ok_or_else(no_ttl)?;
        match &intake.result {
            Err(StoreError::Config(_)) => {}
            Err(e) => fail!("invalid ttl: expected a config error, got {} ({e}) ttl_ms={ttl_ms}", e.code()),
            Ok(()) => fail!("invalid ttl: expected a config error, but the store opened ttl_ms={ttl_ms}"),
        }
        ensure!(
            !intake.location_touched,
            "invalid ttl: expected the location untouched, got something created before the config error ttl_ms={ttl_ms}"
        );
    }
    for ttl_ms in [1, 2_147_483_647] {
        let intake = t.ttl_intake(ttl_ms).ok_or_else(no_ttl)?;
        expect_ok(&format!("open with the valid ttl_ms={ttl_ms}"), intake.result)?;
    }
    Ok(())
}

/// B2 and D6: per round, 8 processes open one fresh location at once, and all of them exit 0
/// within 60 s. "At once" is a readiness barrier: each process says `ready` on its stdout when it
/// is set up (a store adapter started and shaken hands with: hundreds of ms, more on a loaded
/// machine, and unevenly), then waits for the end of its stdin; when all eight are ready the kit
/// closes every stdin together. An instant guessed ahead let a slow start spread the opens out of
/// each other's way, so the race a store must survive did not happen.
fn concurrent_boot(t: &dyn Target) -> CheckResult {
    for round in 0..t.boot_rounds() {
        let mut children = Vec::with_capacity(BOOT_PROCESSES);
        for _ in 0..BOOT_PROCESSES {
            let Some(mut command) = t.boot_command(round) else {
                stop_all(children);
                return Err(Verdict::Skip("store cannot be opened from another process".to_owned()));
            };
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
            match command.spawn() {
                Ok(child) => children.push(child),
                Err(e) => {
                    stop_all(children);
                    return Err(Verdict::Broken(format!("cannot start a boot process: {e} round={round}")));
                }
            }
        }
        // The barrier: every child ready (or gone: its exit is judged below), then every stdin
        // closed at once. A child's own deadlines (its adapter's timeout) bound each read. The
        // stdouts stay open until the children are done (a child may print after its open).
        let mut stdouts = Vec::with_capacity(BOOT_PROCESSES);
        let mut unready = None;
        for (i, child) in children.iter_mut().enumerate() {
            let mut line = String::new();
            if let Some(stdout) = child.stdout.take() {
                let mut reader = BufReader::new(stdout);
                let _ = reader.read_line(&mut line);
                stdouts.push(reader);
            }
            if line.trim_end() != "ready" && unready.is_none() {
                unready = Some(i);
            }
        }
        if let Some(i) = unready {
            // It ended (or said something else) before the race: nothing of the store was tried.
            let mut child = children.swap_remove(i);
            let _ = child.kill();
            let status = child.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
            let said = first_stderr_line(&mut child);
            stop_all(children);
            return Err(Verdict::Broken(format!(
                "boot process {i} was not ready for the race ({status}: {said}): a harness or adapter failure, not the store's round={round}"
            )));
        }
        for child in &mut children {
            drop(child.stdin.take());
        }
        let (failures, harness) = wait_all(children, &Deadline::after_ms(BOOT_DEADLINE_MS));
        drop(stdouts);
        if let Some(first) = harness.first() {
            return Err(Verdict::Broken(format!(
                "a boot process failed, not by the store's answer (exit 1 is the store's): {first} round={round}"
            )));
        }
        if let Some(first) = failures.first() {
            fail!(
                "concurrent boot: expected all {BOOT_PROCESSES} processes to exit 0, got {} failed round={round} first={first}",
                failures.len()
            );
        }
    }
    Ok(())
}

/// Wait for every child until `deadline`, killing the stragglers. One line per failed child, in
/// the order the failures were seen (its exit status and the first line of its stderr): the
/// store's failures (exit 1, or still booting at the deadline), then the harness's (any other
/// status: an adapter that died, a crash of the boot process).
fn wait_all(mut running: Vec<Child>, deadline: &Deadline) -> (Vec<String>, Vec<String>) {
    let (mut failures, mut harness) = (Vec::new(), Vec::new());
    while !running.is_empty() {
        let mut still = Vec::with_capacity(running.len());
        for mut child in running {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => {}
                Ok(Some(status)) if status.code() == Some(1) => {
                    failures.push(format!("{status}: {}", first_stderr_line(&mut child)));
                }
                Ok(Some(status)) => harness.push(format!("{status}: {}", first_stderr_line(&mut child))),
                Ok(None) => still.push(child),
                Err(e) => {
                    harness.push(format!("cannot wait for the process: {e}"));
                    stop_all(vec![child]);
                }
            }
        }
        running = still;
        if !running.is_empty() && deadline.passed() {
            failures.extend(running.iter().map(|_| format!("still running after {BOOT_DEADLINE_MS}ms, killed")));
            stop_all(running);
            break;
        }
        wall::sleep_ms(5);
    }
    (failures, harness)
}

fn stop_all(children: Vec<Child>) {
    for mut child in children {
        // A child that already exited cannot be killed; either way it is reaped below.
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn first_stderr_line(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut text);
    }
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("no stderr").to_owned()
}

/// B4: every file that is not exactly a fencesim database of this schema version is refused (a
/// config or storage error) and left byte for byte as it was: fencesim's application id with a newer, an
/// older, a negative or the largest schema version (over a half-created and over a complete schema), a half-created schema (stamped, some objects missing: a bootstrap is one
/// transaction, so no crash of ours leaves one), another application's database, and one of ours
/// with an object fencesim did not create.
fn format_boundaries(t: &dyn Target) -> CheckResult {
    use crate::sqlite::schema::{APPLICATION_ID, DDL, SCHEMA_VERSION};
    let stamp = |version: i64| format!("PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {version};");
    let table = "CREATE TABLE entries (id INTEGER PRIMARY KEY, run_id TEXT, seq INTEGER, payload TEXT);";
    let cases = [
        ("a newer schema version", format!("{}{table}", stamp(SCHEMA_VERSION + 1))),
        ("an older schema version", format!("{}{table}", stamp(SCHEMA_VERSION - 1))),
        ("schema version 0 under fencesim's id", format!("{}{table}", stamp(0))),
        // Every version other than ours, over a schema complete in every other way: a store that
        // refuses another version only because its objects are missing would take these.
        ("an older schema version, complete", format!("{}{DDL}", stamp(SCHEMA_VERSION - 1))),
        ("a newer schema version, complete", format!("{}{DDL}", stamp(SCHEMA_VERSION + 1))),
        ("a negative schema version, complete", format!("{}{DDL}", stamp(-1))),
        ("the largest schema version, complete", format!("{}{DDL}", stamp(i64::from(i32::MAX)))),
        ("a half-created schema", format!("{}{table}", stamp(SCHEMA_VERSION))),
        ("another application's database", format!("PRAGMA application_id = 1234; {table}")),
        ("an unstamped database with tables", table.to_owned()),
        ("a foreign object in a fencesim database", format!("{}{DDL}CREATE TABLE extra (x);", stamp(SCHEMA_VERSION))),
    ];
    for (what, setup) in cases {
        let Some(open) = t.open_prepared(&setup) else {
            return Err(Verdict::Skip("store keeps no SQLite file".to_owned()));
        };
        match &open.result {
            Err(StoreError::Config(_) | StoreError::Storage { .. }) => {}
            Err(e) => fail!("{what}: expected a refusal (config or storage), got {} ({e})", e.code()),
            Ok(()) => fail!("{what}: expected a refusal, but the store opened it"),
        }
        ensure!(open.unchanged, "{what}: expected the file left as it was, but opening it changed it");
    }
    Ok(())
}

/// B5: a read-only store over a populated location reads what is there, refuses every write
/// (a storage or config error, never a success) and changes no byte of the location's data files
/// (no WAL recovery, no checkpoint on close).
fn read_only_open(t: &dyn Target) -> CheckResult {
    let Some(open) = t.open_read_only() else {
        return Err(Verdict::Skip("store has no read-only mode".to_owned()));
    };
    if let Err(e) = &open.opened {
        fail!("the read-only open of a populated location failed: {} ({e})", e.code());
    }
    match &open.read {
        Ok(1) => {}
        Ok(n) => fail!("the read-only store read {n} journal entries of the populated run, expected 1"),
        Err(e) => fail!("the read-only store could not read: {} ({e})", e.code()),
    }
    for (surface, result) in &open.writes {
        match result {
            Err(StoreError::Config(_) | StoreError::Storage { .. }) => {}
            Err(e) => fail!("a read-only {surface}: expected a refusal (config or storage), got {} ({e})", e.code()),
            Ok(()) => fail!("a read-only {surface} was accepted"),
        }
    }
    ensure!(open.unchanged, "the read-only store changed the location's files");
    Ok(())
}

/// B3: while a fenced append holds the write lock (stopped at its fence check), another
/// connection's unleased put_meta of another run fails busy at once and commits nothing; the
/// append itself commits.
fn runtime_fail_fast(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let a = fx.connect()?;
    require_fenced(&*a)?;
    let run = RunId::from(FENCED_RUN);
    let lease = leases(&*a)?.acquire(&run, OWNER_A)?;
    let bystander = RunId::from("fail-fast-run");
    let probe = RunMeta::new(bystander.clone(), RunStatus::Running);
    let b = fx.connect()?;
    let slot = hook_once(&*a, FaultPoint::FenceChecked, move || {
        let deadline = Deadline::after_ms(FAIL_FAST_BOUND_MS);
        let result = b.put_meta(&probe, None);
        (result, deadline.passed())
    })?;
    let appended = a.append(&run, &entry(1, "holder"), Some(&lease));
    let Some((result, slow)) = slot.finish(&*a) else {
        fail!("fault point never fired: expected fence_checked during the fenced append run={run}");
    };
    match result {
        Err(StoreError::Busy { .. }) => {}
        Err(e) => fail!(
            "put_meta while another connection holds the write lock: expected busy, got {} ({e}) run={bystander}",
            e.code()
        ),
        Ok(()) => fail!(
            "put_meta while another connection holds the write lock: expected busy, but it was accepted run={bystander}"
        ),
    }
    ensure!(
        !slow,
        "busy put_meta: expected an immediate answer, got one after more than {FAIL_FAST_BOUND_MS}ms run={bystander}"
    );
    expect_ok("fenced append that held the write lock", appended)?;
    let c = fx.connect()?;
    expect_meta(&*c, &bystander, None, "after the busy put_meta")?;
    let seen = c.load(&run)?;
    ensure!(
        markers(&seen) == ["holder"],
        "journal after the fenced append: expected [holder], got {:?} run={run}",
        markers(&seen)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::targets::SqliteTarget;
    use crate::conformance::{Fixture, PreparedOpen, ReadOnlyOpen, TtlIntake};
    use crate::error::StoreResult;

    /// A store whose boot racers run `script` in `sh` (the kit's barrier protocol by hand).
    struct Racers {
        script: &'static str,
    }

    impl Target for Racers {
        fn name(&self) -> &str {
            "racers"
        }

        fn fresh(&self, _: u32) -> StoreResult<Box<dyn Fixture>> {
            unreachable!("B2 needs no fixture")
        }

        fn ttl_intake(&self, _: i64) -> Option<TtlIntake> {
            None
        }

        fn boot_command(&self, _: u32) -> Option<std::process::Command> {
            let mut command = std::process::Command::new("sh");
            command.args(["-c", self.script]);
            Some(command)
        }
    }

    /// B2's verdicts follow who failed: a racer that ends before it is ready, or fails after with
    /// another status than 1, is the harness's (Broken), never the store's; exit 1 after the
    /// barrier is the store's (Fail); all exiting 0 after the barrier passes.
    #[test]
    fn the_boot_race_tells_the_stores_failure_from_the_harness() {
        let race = |script| concurrent_boot(&Racers { script });
        assert!(race("echo ready; cat >/dev/null").is_ok());
        let verdict = race("echo ready; cat >/dev/null; echo 'busy at boot' >&2; exit 1");
        assert!(matches!(&verdict, Err(Verdict::Fail(m)) if m.contains("busy at boot")), "{verdict:?}");
        let verdict = race("echo 'the adapter did not start' >&2; exit 2");
        assert!(
            matches!(&verdict, Err(Verdict::Broken(m)) if m.contains("not ready") && m.contains("did not start")),
            "{verdict:?}"
        );
        let verdict = race("echo ready; cat >/dev/null; echo 'the adapter died' >&2; exit 2");
        assert!(matches!(&verdict, Err(Verdict::Broken(m)) if m.contains("the adapter died")), "{verdict:?}");
        // A racer that opens without waiting for the barrier is not ready either: no race happened.
        let verdict = race("echo opened");
        assert!(matches!(&verdict, Err(Verdict::Broken(m)) if m.contains("not ready")), "{verdict:?}");
    }

    /// A store that opens whatever it is given, or rewrites what it refuses.
    struct Lax {
        opens: bool,
    }

    impl Target for Lax {
        fn name(&self) -> &str {
            "lax"
        }

        fn fresh(&self, _: u32) -> StoreResult<Box<dyn Fixture>> {
            unreachable!("B4 needs no fixture")
        }

        fn ttl_intake(&self, _: i64) -> Option<TtlIntake> {
            None
        }

        fn boot_command(&self, _: u32) -> Option<std::process::Command> {
            None
        }

        fn open_prepared(&self, _: &str) -> Option<PreparedOpen> {
            let result = if self.opens { Ok(()) } else { Err(StoreError::Config("no".into())) };
            Some(PreparedOpen { result, unchanged: false })
        }

        /// `opens`: a read-only store that takes writes; otherwise one that refuses them but
        /// rewrites the file (a checkpoint on close).
        fn open_read_only(&self) -> Option<ReadOnlyOpen> {
            let write = if self.opens { Ok(()) } else { Err(StoreError::Config("read-only".into())) };
            Some(ReadOnlyOpen { opened: Ok(()), read: Ok(1), writes: vec![("put_meta", write)], unchanged: false })
        }
    }

    #[test]
    fn read_only_open_passes_the_sqlite_store_and_fails_a_lax_one() {
        let folder = tempfile::tempdir().unwrap();
        assert_eq!(read_only_open(&SqliteTarget::file(folder.path())), Ok(()));
        let writable = read_only_open(&Lax { opens: true }).unwrap_err();
        assert!(format!("{writable:?}").contains("a read-only put_meta was accepted"), "{writable:?}");
        let rewritten = read_only_open(&Lax { opens: false }).unwrap_err();
        assert!(format!("{rewritten:?}").contains("changed the location's files"), "{rewritten:?}");
    }

    #[test]
    fn format_boundaries_passes_the_sqlite_store_and_fails_a_lax_one() {
        let folder = tempfile::tempdir().unwrap();
        assert_eq!(format_boundaries(&SqliteTarget::file(folder.path())), Ok(()));
        let opened = format_boundaries(&Lax { opens: true }).unwrap_err();
        assert!(format!("{opened:?}").contains("a newer schema version: expected a refusal"), "{opened:?}");
        let rewritten = format_boundaries(&Lax { opens: false }).unwrap_err();
        assert!(format!("{rewritten:?}").contains("opening it changed it"), "{rewritten:?}");
    }
}
