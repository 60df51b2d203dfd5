//! Real kill points (`fencesim killpoints --real`, contracts 5.13 with real processes): for each
//! point, a fresh WAL SQLite file in its own temporary folder; a child OS process (this binary
//! re-executed, hidden subcommand `killpoint-child`) runs the workflow with the real engine
//! (system clock, tokio) and `SIGKILL`s itself at exactly the target write, before or after it;
//! then a second process (`killpoint-resume`) audits the residue and resumes the run from the
//! file, and the parent judges both with the same checks and documented counts as the simulated
//! suite (`killpoints.rs`: [`Trigger`], [`referee`], [`judge`]). Points are independent, so up to
//! [`PARALLEL_POINTS`] run at once, each on a thread of the parent that spawns, polls and reaps its
//! own two processes; the reports keep the points' order, so the output is the same bytes.
//!
//! The child writes its effects ledger to a log in the point's folder before each paid call or
//! tool goes ahead, one `write(2)` per JSON line, so what the dead child paid survives it (a
//! `SIGKILL` does not lose what the kernel already has). The dead child's lease lingers until its
//! short ttl ([`REAL_CHILD_TTL_MS`]) expires: the resume retries until then. Counts do not depend
//! on the ttl: nothing is paid while the resume waits.
//!
//! Hygiene: every child dies with its parent ([`fencesim_protocol::die_with_parent`], before its
//! `exec`); the parent kills and reaps a child it stops waiting for;
//! each point's folder is a [`tempfile::TempDir`] inside the suite's, each removed on every
//! return, error and panic; the suite's lives in the binary's process root, whose janitor
//! removes it if the parent is `SIGKILL`ed, alone or with its process group
//! ([`crate::proc::janitor`]). While
//! the suite runs, the parent blocks `SIGINT`, `SIGTERM` and `SIGHUP` and polls for them between
//! waits: on one it kills the child in flight, removes the folder, restores the mask and lets the
//! signal take its default course.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes run in wall time: the parent polls its children with a deadline"
)]

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencesim_engine::{
    EngineDefect, EngineDefects, EngineOptions, Env, Fault, Ledger, Paid, Point, RealEnv, RunOptions, Site, Workflow,
};
use fencesim_store::{
    Epoch, FaultAction, FaultPoint, RunId, Seq, SqliteOptions, SqliteStore, Store as _, StoreDefect, StoreDefects,
    StoreError, SystemClock,
};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::proc::child::{SpawnError, spawn_logged};
use crate::proc::signals::Deferral;
use fencesim_oracle::history::{Effect, EffectKind};
use fencesim_oracle::{Checker, Violation};
use fencesim_sim::killpoints::{
    self, Config, Crashed, KillPhase, KillPoint, Matcher, PointReport, RefereeReport, Target, Trigger, finding,
};

/// The real child's lease ttl: short, so the resume waits at most about this long after a kill.
pub const REAL_CHILD_TTL_MS: u32 = 500;
/// How long a child or resume process may run before the parent kills it and fails the point.
pub const PROCESS_DEADLINE_MS: u64 = 60_000;
/// How often the parent polls a running process (and its pending signals).
const POLL_MS: u64 = 5;

/// Why the real suite could not run (exit 2), as opposed to a point failing. Each message names
/// its cause and none is a `source`, so a printed chain (`{:#}`) names each cause once.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    #[error("cannot {what}: {error}")]
    Io { what: String, error: std::io::Error },
    #[error("store: {0}")]
    Store(StoreError),
    #[error("{what}: {error}")]
    Signal { what: &'static str, error: nix::Error },
    #[error("interrupted by {0}")]
    Interrupted(Signal),
    #[error("{0}")]
    Harness(String),
    #[error(transparent)]
    KillPoint(#[from] fencesim_sim::killpoints::KillPointError),
}

impl From<StoreError> for RealError {
    fn from(e: StoreError) -> Self {
        RealError::Store(e)
    }
}

impl From<SpawnError> for RealError {
    fn from(e: SpawnError) -> Self {
        RealError::Io { what: e.what, error: e.error }
    }
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealError {
    let what = what.into();
    move |error| RealError::Io { what, error }
}

/// One line of a child's effects log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLine {
    /// A paid model call is about to go ahead: the dispatch's running entry, its turn (from 1),
    /// the lease epoch it is paid under and the system-wide monotonic stamp of the payment.
    /// Logs written before these were recorded read them as 0 / none.
    Call {
        run: RunId,
        running: Seq,
        #[serde(default)]
        turn: u32,
        #[serde(default)]
        epoch: Option<Epoch>,
        #[serde(default)]
        mono_ns: u64,
    },
    /// A tool run is about to go ahead (`n` counts the dispatch's tools from 1).
    Tool {
        run: RunId,
        running: Seq,
        #[serde(default)]
        n: u32,
        #[serde(default)]
        epoch: Option<Epoch>,
        #[serde(default)]
        mono_ns: u64,
    },
    /// The target write was reached (the child dies at it, or at its after point).
    Kill { index: u32, write: String },
}

impl LogLine {
    /// The line a paid effect's fault point logs before it goes ahead, stamped now; none for a
    /// point that pays nothing.
    pub fn of_effect(point: &Point<'_>) -> Option<Self> {
        let (run, epoch, mono_ns) = (point.run.clone(), point.epoch, crate::soak::wall::mono_ns());
        match point.site {
            Site::Call { running, turn } => Some(Self::Call { run, running, turn, epoch, mono_ns }),
            Site::Tool { running, n } => Some(Self::Tool { run, running, n, epoch, mono_ns }),
            _ => None,
        }
    }

    /// The payment this line records, for the oracle, with its monotonic stamp.
    pub fn effect(&self) -> Option<(u64, Effect)> {
        let (kind, run, running, n, epoch, mono_ns) = match self {
            Self::Call { run, running, turn, epoch, mono_ns } => (EffectKind::Call, run, running, turn, epoch, mono_ns),
            Self::Tool { run, running, n, epoch, mono_ns } => (EffectKind::Tool, run, running, n, epoch, mono_ns),
            Self::Kill { .. } => return None,
        };
        Some((*mono_ns, Effect { kind, run: run.clone(), epoch: *epoch, running: *running, n: *n }))
    }
}

/// What a child process runs: one workflow over `db`, dying at `target`/`phase`.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    pub db: PathBuf,
    pub effects: PathBuf,
    pub run: RunId,
    pub workflow: Workflow,
    pub target: Target,
    pub phase: KillPhase,
    pub ttl_ms: u32,
    pub engine_defects: EngineDefects,
    pub store_defects: StoreDefects,
}

/// What a resume process runs: the referee over `db`.
#[derive(Clone, Debug)]
pub struct ResumeSpec {
    pub db: PathBuf,
    pub run: RunId,
    pub workflow: Workflow,
    /// The dead child's ttl, which sets the retry cadence.
    pub child_ttl_ms: u32,
    pub engine_defects: EngineDefects,
    pub store_defects: StoreDefects,
}

/// How a child ended when it did not die at its point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildEnd {
    /// The run finished: the kill point was never reached.
    Completed,
    /// The engine failed before the point.
    Failed(String),
}

/// `--target` text: `w<index>` or `<matcher>:<occurrence>`.
pub fn target_arg(target: Target) -> String {
    let arg = match target {
        Target::Index(i) => format!("w{i}"),
        Target::Matched { matcher, occurrence } => format!("{}:{occurrence}", matcher.name()),
    };
    // The child parses its target back from this argument: it must find the same write.
    assert!(parse_target(&arg).is_ok_and(|parsed| parsed == target), "target argument '{arg}' reads back otherwise");
    arg
}

pub fn parse_target(text: &str) -> Result<Target, String> {
    let bad = || format!("invalid target '{text}' (valid: w<index>, <matcher>:<occurrence>)");
    if let Some(index) = text.strip_prefix('w') {
        return index.parse().map(Target::Index).map_err(|_| bad());
    }
    let (name, occurrence) = text.split_once(':').ok_or_else(bad)?;
    let matcher = Matcher::ALL.into_iter().find(|m| m.name() == name).ok_or_else(bad)?;
    let occurrence = occurrence.parse().map_err(|_| bad())?;
    Ok(Target::Matched { matcher, occurrence })
}

pub fn parse_phase(text: &str) -> Result<KillPhase, String> {
    KillPhase::parse(text)
}

/// A kill-point workflow by name.
pub fn parse_workflow(name: &str) -> Result<Workflow, String> {
    match name {
        "happy" => Ok(Workflow::happy()),
        "limit" => Ok(Workflow::limit()),
        _ => Err(format!("unknown workflow '{name}' (valid: happy, limit)")),
    }
}

pub(crate) fn defect_args(engine: EngineDefects, store: StoreDefects) -> Vec<OsString> {
    let names = EngineDefect::ALL
        .into_iter()
        .filter(|d| engine.has(*d))
        .map(EngineDefect::name)
        .chain(StoreDefect::ALL.into_iter().filter(|d| store.has(*d)).map(StoreDefect::name));
    names.flat_map(|n| ["--defect".into(), n.into()]).collect()
}

impl ChildSpec {
    /// The hidden subcommand's command line (after the binary).
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![
            "killpoint-child".into(),
            "--db".into(),
            self.db.clone().into(),
            "--effects".into(),
            self.effects.clone().into(),
            "--run".into(),
            self.run.as_str().into(),
            "--workflow".into(),
            self.workflow.name.clone().into(),
            "--target".into(),
            target_arg(self.target).into(),
            "--phase".into(),
            self.phase.as_str().into(),
            "--ttl-ms".into(),
            self.ttl_ms.to_string().into(),
        ];
        argv.extend(defect_args(self.engine_defects, self.store_defects));
        argv
    }
}

impl ResumeSpec {
    /// The hidden subcommand's command line (after the binary).
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![
            "killpoint-resume".into(),
            "--db".into(),
            self.db.clone().into(),
            "--run".into(),
            self.run.as_str().into(),
            "--workflow".into(),
            self.workflow.name.clone().into(),
            "--child-ttl-ms".into(),
            self.child_ttl_ms.to_string().into(),
        ];
        argv.extend(defect_args(self.engine_defects, self.store_defects));
        argv
    }
}

pub(crate) fn tokio_runtime() -> Result<tokio::runtime::Runtime, RealError> {
    tokio::runtime::Builder::new_current_thread().enable_time().build().map_err(io("start a tokio runtime"))
}

pub(crate) fn open_store(db: &Path, ttl_ms: u32, defects: StoreDefects) -> Result<Rc<SqliteStore>, RealError> {
    let opts = SqliteOptions::file(db, Arc::new(SystemClock)).lease_ttl_ms(i64::from(ttl_ms)).defects(defects);
    Ok(Rc::new(SqliteStore::open(opts)?))
}

/// The child's `Env`: real time, an effects log written before each paid effect goes ahead, and
/// a real `SIGKILL` of this very process at the target write.
struct KillEnv {
    log: File,
    trigger: RefCell<Trigger>,
    /// The first failure to write the log; the child stops at it rather than pay unrecorded.
    log_error: RefCell<Option<std::io::Error>>,
}

impl KillEnv {
    /// One `write(2)` per line, straight to the file: nothing buffered in the process to lose.
    fn record(&self, line: &LogLine) -> bool {
        let mut text = serde_json::to_string(line).unwrap_or_default();
        text.push('\n');
        match (&self.log).write(text.as_bytes()) {
            Ok(n) if n == text.len() => true,
            Ok(n) => {
                self.log_error
                    .replace(Some(std::io::Error::other(format!("short write: {n} of {} bytes", text.len()))));
                false
            }
            Err(e) => {
                self.log_error.replace(Some(e));
                false
            }
        }
    }

    fn decide(&self, point: &Point<'_>) -> Fault {
        let recorded = LogLine::of_effect(point).is_none_or(|line| self.record(&line));
        if !recorded {
            return Fault::Crash;
        }
        let mut trigger = self.trigger.borrow_mut();
        let reached = trigger.killed.is_some();
        let fault = trigger.decide(point);
        if let (false, Some((index, write))) = (reached, &trigger.killed)
            && !self.record(&LogLine::Kill { index: *index, write: write.clone() })
        {
            return Fault::Crash;
        }
        if fault == Fault::Crash {
            // A real death, not an unwinding: no settle, no release, no destructor runs.
            let _ = nix::sys::signal::kill(nix::unistd::getpid(), Signal::SIGKILL);
        }
        fault
    }
}

impl Env for KillEnv {
    fn now_ms(&self) -> i64 {
        RealEnv.now_ms()
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        RealEnv.sleep(ms)
    }

    fn fault(&self, point: &Point<'_>) -> impl Future<Output = Fault> {
        std::future::ready(self.decide(point))
    }
}

/// The `killpoint-child` process: run the workflow until the target write kills this process.
/// Returns only when the point was not reached.
pub fn run_child(spec: &ChildSpec) -> Result<ChildEnd, RealError> {
    let log = OpenOptions::new().create(true).append(true).open(&spec.effects).map_err(io("open the effects log"))?;
    let store = open_store(&spec.db, spec.ttl_ms, spec.store_defects)?;
    let trigger = Trigger::new(spec.target, spec.phase);
    if spec.phase == KillPhase::Inside {
        // Armed at the target write: a real `SIGKILL` between its statements, its transaction
        // open (SQLite rolls it back when the next connection opens the file).
        let armed = trigger.armed.clone();
        store.set_fault_hook(Some(Box::new(move |site| {
            if site.point == FaultPoint::Statement && armed.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = nix::sys::signal::kill(nix::unistd::getpid(), Signal::SIGKILL);
            }
            FaultAction::Resume
        })));
    }
    let env = KillEnv { log, trigger: RefCell::new(trigger), log_error: RefCell::default() };
    let opts = EngineOptions { owner: "kp-child".into(), defects: spec.engine_defects, ..EngineOptions::default() };
    let ledger = Ledger::new();
    let engine = fencesim_engine::Engine::new(store, env, ledger, opts)
        .map_err(|e| RealError::Harness(format!("kill-point engine options: {e}")))?;
    let result = tokio_runtime()?.block_on(engine.run(&spec.run, &spec.workflow, RunOptions::default()));
    if let Some(e) = engine.env().log_error.take() {
        return Err(RealError::Io { what: "write the effects log".into(), error: e });
    }
    Ok(match result {
        Ok(_) => ChildEnd::Completed,
        Err(e) => ChildEnd::Failed(e.to_string()),
    })
}

/// The `killpoint-resume` process: the referee over the file, in real time.
pub fn run_resume(spec: &ResumeSpec) -> Result<RefereeReport, RealError> {
    let store = open_store(&spec.db, killpoints::REFEREE_TTL_MS, spec.store_defects)?;
    let config = Config { engine_defects: spec.engine_defects, store_defects: spec.store_defects, ..Config::default() };
    let retry_ms = u64::from(spec.child_ttl_ms.div_ceil(3).max(50));
    tokio_runtime()?
        .block_on(killpoints::referee(store, RealEnv, &spec.run, &spec.workflow, &config, retry_ms))
        .map_err(RealError::from)
}

/// The lines of an effects log, in order; an absent log (a process that died before opening
/// it paid nothing) has none.
fn read_log_lines(path: &Path) -> Result<Vec<LogLine>, RealError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        _ => {}
    }
    // A kept soak's folder may hold anything under a log's name (`soak-check`): never a FIFO's
    // endless wait.
    let file = fencesim_sim::files::open_input(path, fencesim_sim::files::MAX_LOG_BYTES)
        .map_err(|e| RealError::Harness(format!("cannot read the effects log {e}")))?;
    BufReader::new(file)
        .lines()
        .map(|line| {
            let line = line.map_err(io("read the effects log"))?;
            serde_json::from_str(&line)
                .map_err(|e| RealError::Harness(format!("malformed effects log line '{line}': {e}")))
        })
        .collect()
}

/// What a dead child's effects log says: its bill, and the write it died at.
pub fn read_effects(path: &Path) -> Result<(Ledger, Option<(u32, String)>), RealError> {
    let ledger = Ledger::new();
    let mut killed = None;
    for line in read_log_lines(path)? {
        match line {
            LogLine::Call { run, running, .. } => ledger.pay_call(&run, running),
            LogLine::Tool { run, running, .. } => ledger.pay_tool(&run, running),
            LogLine::Kill { index, write } => killed = Some((index, write)),
        }
    }
    Ok((ledger, killed))
}

/// Every payment an effects log records, with its monotonic stamp, for the oracle's history.
pub fn read_effect_stamps(path: &Path) -> Result<Vec<(u64, Effect)>, RealError> {
    Ok(read_log_lines(path)?.iter().filter_map(LogLine::effect).collect())
}

/// Start `argv` as this binary in `dir` (stdout and stderr to files there) and wait for it, up
/// to [`PROCESS_DEADLINE_MS`]. `None` when it hung and was killed.
fn run_process(
    signals: &Deferral,
    exe: &Path,
    argv: &[OsString],
    dir: &Path,
    name: &str,
) -> Result<Option<ExitStatus>, RealError> {
    let mut child = spawn_logged(exe, argv, dir, name)?;
    let start = Instant::now();
    loop {
        if let Some(signal) = signals.pending() {
            return Err(RealError::Interrupted(signal));
        }
        if let Some(status) = child.try_wait().map_err(io(format!("wait for the {name} process")))? {
            return Ok(Some(status));
        }
        if start.elapsed() > Duration::from_millis(PROCESS_DEADLINE_MS) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(POLL_MS));
    }
}

fn first_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim().to_owned()
}

/// How many kill points run at once. A point mostly waits: its resume waits out the dead
/// child's lease ([`REAL_CHILD_TTL_MS`]) while both processes use a few tens of milliseconds of
/// CPU, so four at a time take a quarter of the time on two cores.
pub const PARALLEL_POINTS: usize = 4;

/// Run kill points with real processes, up to [`PARALLEL_POINTS`] at once, each in its own
/// folder with its own file and run; the reports come back in the points' order. Each
/// workflow's clean bill (and the enumeration's writes) come from a simulated clean run: the
/// engine's writes and payments do not depend on its `Env`.
pub fn run_points_real(points: &[KillPoint], config: &Config) -> Result<Vec<PointReport>, RealError> {
    let exe = std::env::current_exe().map_err(io("locate the fencesim binary"))?;
    let signals = Deferral::start();
    let suite =
        crate::proc::janitor::temp_dir("fencesim-killpoints-", false).map_err(io("create a temporary folder"))?;
    let mut clean = killpoints::CleanBills::default();
    let bills = points.iter().map(|point| clean.of(&point.workflow, config)).collect::<Result<Vec<_>, _>>()?;
    // Each job spawns and reaps its own processes before its thread ends, so a child's
    // parent-death signal (tied to the thread that spawned it) never fires early.
    let jobs: Vec<(&KillPoint, Paid)> = points.iter().zip(bills).collect();
    let reports = crate::par::try_map(&jobs, PARALLEL_POINTS, |&(point, paid)| {
        run_point_real(&signals, &exe, suite.path(), point, config, paid)
    })?;
    suite.close().map_err(io("remove the suite's temporary folder"))?;
    Ok(reports)
}

/// `kill-point-reached`: the child died of its own `SIGKILL` at the point; the finding otherwise (it
/// ran to completion, failed first, naming the first line of `err`, or hung and was killed).
fn reached(status: Option<ExitStatus>, err: &Path) -> Option<Violation> {
    let why = match status {
        Some(status) if status.signal() == Some(Signal::SIGKILL as i32) => return None,
        Some(status) if status.success() => "the child ran to completion: the kill point was never reached".to_owned(),
        Some(status) => format!("the child failed before its kill point ({status}): {}", first_line(err)),
        None => format!("the child hung past {PROCESS_DEADLINE_MS} ms and was killed"),
    };
    Some(finding(Checker::KillPointReached, why))
}

/// One real kill point: child, residue and resume in a fresh folder inside `suite`, removed on
/// every return.
fn run_point_real(
    signals: &Deferral,
    exe: &Path,
    suite: &Path,
    point: &KillPoint,
    config: &Config,
    clean: Paid,
) -> Result<PointReport, RealError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}-", point.id))
        .tempdir_in(suite)
        .map_err(io("create a kill point's temporary folder"))?;
    let run = RunId::new(format!("kp-{}", point.id));
    let child = ChildSpec {
        db: dir.path().join("kp.db"),
        effects: dir.path().join("child.effects"),
        run: run.clone(),
        workflow: point.workflow.clone(),
        target: point.target,
        phase: point.phase,
        ttl_ms: REAL_CHILD_TTL_MS,
        engine_defects: config.engine_defects,
        store_defects: config.store_defects,
    };
    let status = run_process(signals, exe, &child.argv(), dir.path(), "child")?;
    let violations = reached(status, &dir.path().join("child.err")).into_iter().collect();
    let (ledger, killed) = read_effects(&child.effects)?;
    let (index, write) = killed.unzip();
    let crashed = Crashed { index, write, paid: ledger.run_total(&run), violations };

    let resume = ResumeSpec {
        db: child.db.clone(),
        run,
        workflow: point.workflow.clone(),
        child_ttl_ms: REAL_CHILD_TTL_MS,
        engine_defects: config.engine_defects,
        store_defects: config.store_defects,
    };
    let referee = match run_process(signals, exe, &resume.argv(), dir.path(), "resume")? {
        Some(status) if status.success() => {
            let out = std::fs::read_to_string(dir.path().join("resume.out")).map_err(io("read the resume report"))?;
            serde_json::from_str::<RefereeReport>(&out)
                .map_err(|e| RealError::Harness(format!("malformed resume report: {e}")))?
        }
        Some(status) => {
            return Err(RealError::Harness(format!(
                "the resume process of {} failed ({status}): {}",
                point.id,
                first_line(&dir.path().join("resume.err"))
            )));
        }
        None => {
            let violations = vec![finding(
                Checker::Liveness,
                format!("the resume hung past {PROCESS_DEADLINE_MS} ms and was killed"),
            )];
            RefereeReport { violations, ..RefereeReport::default() }
        }
    };
    let report = killpoints::judge(point, clean, crashed, referee);
    dir.close().map_err(io("remove a kill point's temporary folder"))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_through_their_argument() {
        let points = killpoints::table();
        for target in points.iter().map(|p| p.target).chain([Target::Index(0), Target::Index(17)]) {
            assert_eq!(parse_target(&target_arg(target)), Ok(target));
        }
        for bad in ["", "w", "wx", "settle", "nope:1", "meta:x", "w-1"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_effects_log_is_read_back_into_a_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("effects");
        let run = RunId::new("r");
        let lines = [
            LogLine::Call { run: run.clone(), running: Seq(1), turn: 1, epoch: Some(Epoch(2)), mono_ns: 10 },
            LogLine::Tool { run: run.clone(), running: Seq(1), n: 1, epoch: Some(Epoch(2)), mono_ns: 11 },
            LogLine::Call { run: run.clone(), running: Seq(3), turn: 1, epoch: None, mono_ns: 12 },
            LogLine::Kill { index: 4, write: "append seq=4".into() },
        ];
        let text: String = lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        let (ledger, killed) = read_effects(&path).unwrap();
        assert_eq!(ledger.run_total(&run), Paid { calls: 2, tools: 1 });
        assert_eq!(killed, Some((4, "append seq=4".into())));
        std::fs::write(&path, "{\"call\":\n").unwrap();
        assert!(matches!(read_effects(&path), Err(RealError::Harness(_))));
        assert_eq!(read_effects(&dir.path().join("absent")).unwrap().0.run_total(&run), Paid::default());
    }

    /// Each message names its cause once: a cause that were also a `source` would be printed
    /// twice by the CLI's chain (`{:#}`), as it once was.
    #[test]
    fn an_error_names_its_cause_once() {
        use std::error::Error as _;
        let io = RealError::Io { what: "write the effects log".into(), error: std::io::Error::other("disk full") };
        let signal = RealError::Signal { what: "cannot block signals", error: nix::Error::EINVAL };
        let store = RealError::from(StoreError::Config("no".into()));
        for e in [io, signal, store] {
            assert!(e.source().is_none(), "{e:?}");
        }
        let io = RealError::Io { what: "write the effects log".into(), error: std::io::Error::other("disk full") };
        assert_eq!(io.to_string(), "cannot write the effects log: disk full");
    }
}
