//! The engine-level soak (issue 9 section 3, first half), as a library: N real queue-worker
//! processes (`fencesim_engine::worker`, hidden subcommand `soak-engine-worker`) over one WAL
//! file drive the built-in workflows, each logging its paid calls and tools to its own effects
//! log before they go ahead; a client process (`soak-engine-client`) submits the runs, driving
//! half of them itself; the referee (the caller's process) `SIGKILL`s, `SIGSTOP`s and `SIGCONT`s
//! workers at moments drawn from a seeded ChaCha stream (`rng.rs`) and restarts the killed ones
//! under new owner names. At the end it judges the file and the logs: every run settled or
//! waiting (liveness), seqs contiguous, at most one `run_settle` per segment with nothing after
//! a terminal one, meta never ahead of the journal, audit consistent after `runs audit --repair`
//! (run as a real process), and the oracle over the processes' calls with their logged payments
//! interleaved, whose `repay-bound` allows a dispatch one payment plus one per interrupted tenure
//! (a crash, a zombie, a lease lost to a failed renew), exactly as it judges a world.
//!
//! The OS scheduler is not deterministic: a seed fixes the referee's schedule and the client's
//! workload, not the interleaving. Processes and folders follow the kill-point suite's rules
//! (`killpoints_real.rs`): children die with the parent, and the soak's folder is removed on
//! every exit path unless kept.
//!
//! Each store call of a worker or the client is logged through the store level's `LoggedStore`.
//! The merged history goes to the oracle's engine scope (every checker) before the operator's
//! repair writes anything; then liveness, seqs, settles, meta, the audit after the repair, and
//! the re-pay bound from the effects logs. The children live in the binary
//! (`sim/cli/src/cli/soak_engine_children.rs`).

#![allow(clippy::disallowed_methods, reason = "the soak runs real processes in wall time")]

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use fencesim_engine::audit;
use fencesim_engine::race::join_all;
use fencesim_engine::{
    EngineDefects, EngineOptions, Env, Fault, Ledger, Phase, Point, RealEnv, RunOptions, Site, Worker, WorkerOptions,
    Workflow,
};
use std::collections::BTreeSet;
use std::sync::Arc;

use fencesim_store::{RunFilter, RunId, RunStatus, SqliteOptions, SqliteStore, Store, StoreDefects};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::Layout;
use super::judge::{merge_with_effects, read_logs};
use super::log::LogFile;
use super::seal::{self, Chain, Level, Manifest};
use super::wall::mono_ns;
use super::writer::{LoggedStore, StampClock};
use crate::killpoints::{self, LogLine, RealError};
use crate::proc::child::{Reaped, SpawnError, spawn_logged};
use crate::proc::signals::Deferral;
use fencesim_oracle::{self as oracle, Checker, OracleConfig, Scope, Violation};
use fencesim_sim::history::{EffectKind, Snapshot};
use fencesim_sim::rng::Stream;

/// How a soak runs. [`EngineSoakOptions::tiny`] is a few seconds' worth.
#[derive(Clone, Debug)]
pub struct EngineSoakOptions {
    pub workers: u32,
    pub runs: u32,
    pub seed: u64,
    /// Every process's lease ttl.
    pub ttl_ms: u32,
    /// Faults are injected during this window from the start.
    pub fault_ms: u64,
    /// Mean pause between two faults.
    pub fault_every_ms: u64,
    /// Everything must be settled or waiting by this bound, or liveness fails.
    pub cap_ms: u64,
    pub engine_defects: EngineDefects,
    pub store_defects: StoreDefects,
    /// Keep the database and the logs here instead of a removed temporary folder.
    pub keep: Option<PathBuf>,
}

impl EngineSoakOptions {
    /// Three workers, eight runs, faults for three seconds.
    pub fn tiny(seed: u64) -> Self {
        Self {
            workers: 3,
            runs: 8,
            seed,
            ttl_ms: 500,
            fault_ms: 3_000,
            fault_every_ms: 400,
            cap_ms: 30_000,
            engine_defects: EngineDefects::NONE,
            store_defects: StoreDefects::NONE,
            keep: None,
        }
    }
}

/// What a soak did and found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EngineSoakReport {
    pub seed: u64,
    /// Runs terminal at the end; `waiting` are suspended on a resolution.
    pub runs_settled: u32,
    pub waiting: u32,
    /// Segments, summed over every run's meta.
    pub segments: u32,
    /// Workers SIGKILLed (and restarted).
    pub crashes: u32,
    /// Workers SIGSTOPped past the ttl and resumed.
    pub zombies: u32,
    pub paid_calls: u32,
    pub paid_tools: u32,
    /// Store calls in the merged history the oracle judged, and how many of them are
    /// indeterminate (their process was SIGKILLed before it learned the outcome).
    pub calls: u64,
    pub indeterminate: u32,
    pub wall_ms: u64,
    /// Reported as their printed lines (`<checker>: <why>`).
    #[serde(serialize_with = "fencesim_oracle::serialize_lines")]
    pub violations: Vec<Violation>,
}

impl EngineSoakReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The file in a soak's folder that records what the judge needs to judge it again offline
/// (`fencesim soak-check DIR` of a folder kept with `--keep DIR`).
pub const RECORD_FILE: &str = "soak-engine-meta.json";

/// What a finished storm was: the plan's seed and size, the ttl, the shared monotonic start, the
/// faults the referee injected and every process's effects log (file names in the folder).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineRecord {
    pub seed: u64,
    pub workers: u32,
    pub runs: u32,
    pub ttl_ms: u32,
    pub start_mono_ns: u64,
    pub crashes: u32,
    pub zombies: u32,
    pub effects: Vec<String>,
}

/// Why a soak could not be judged (a harness error, never a pass).
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error(transparent)]
    Real(#[from] RealError),
    #[error(transparent)]
    Store(#[from] fencesim_store::StoreError),
    #[error("invalid soak options: {0}")]
    Options(String),
    #[error(transparent)]
    KillPoint(#[from] fencesim_sim::killpoints::KillPointError),
    #[error(transparent)]
    Log(#[from] super::SoakError),
}

impl From<SpawnError> for SoakError {
    fn from(e: SpawnError) -> Self {
        SoakError::Real(e.into())
    }
}

/// A process's store: SqliteStore over the soak's file, every call logged (begin and end, one
/// `write(2)` each) to `writer-<node>.jsonl` beside `effects`, stamped by the in-lock clock
/// reading, so the judge can merge every process's calls into one history for the oracle.
fn open_logged(
    db: &Path,
    effects: &Path,
    node: &str,
    ttl_ms: u32,
    defects: StoreDefects,
) -> Result<Rc<dyn Store>, SoakError> {
    let clock = Arc::new(StampClock::new(0));
    let options = SqliteOptions::file(db, clock.clone()).lease_ttl_ms(i64::from(ttl_ms)).defects(defects);
    let inner = SqliteStore::open(options)?;
    let folder = effects.parent().unwrap_or(Path::new("."));
    let log = Arc::new(LogFile::open(&folder.join(format!("writer-{node}.jsonl")))?);
    Ok(Rc::new(LoggedStore::new(super::writer::Inner::Sqlite(Box::new(inner)), clock, log, node.to_owned())))
}

/// The run ids and workflows of a soak: deterministic from the seed.
pub fn plan(opts: &EngineSoakOptions) -> Vec<(RunId, Workflow)> {
    let mut rng = Stream::new(opts.seed).fork("soak-engine/workload");
    (0..opts.runs)
        .map(|i| {
            let name = rng.pick(&Workflow::BUILTIN).copied().unwrap_or("happy");
            (RunId::new(format!("s{i:03}")), Workflow::builtin(name).unwrap_or_else(Workflow::happy))
        })
        .collect()
}

/// The `Env` of soak processes: real time, and each paid effect logged before it goes ahead.
/// A client's submit-only segments stop right after their first write (the running meta).
struct SoakLog {
    log: std::fs::File,
    /// The effects log's hash chain ([`super::seal`]).
    chain: RefCell<Chain>,
    /// Runs the client only submits: the segment ends after its first durable write.
    submit_only: Vec<RunId>,
    log_error: RefCell<Option<std::io::Error>>,
}

/// Clones share one log.
#[derive(Clone)]
struct SoakEnv(Rc<SoakLog>);

impl SoakLog {
    fn decide(&self, point: &Point<'_>) -> Fault {
        let line = match (LogLine::of_effect(point), point.site) {
            (Some(line), _) => line,
            (None, Site::Write { phase: Phase::After, .. }) if self.submit_only.contains(point.run) => {
                return Fault::Crash;
            }
            (None, _) => return Fault::Continue,
        };
        let text = serde_json::to_vec(&line).map_err(std::io::Error::other);
        let text = match text.and_then(|body| self.chain.borrow_mut().seal(body)) {
            Ok(text) => text,
            Err(e) => {
                self.log_error.replace(Some(e));
                return Fault::Crash;
            }
        };
        match (&self.log).write(&text) {
            Ok(n) if n == text.len() => Fault::Continue,
            Ok(_) => {
                self.log_error.replace(Some(std::io::Error::other("short write to the effects log")));
                Fault::Crash
            }
            Err(e) => {
                self.log_error.replace(Some(e));
                Fault::Crash
            }
        }
    }
}

impl Env for SoakEnv {
    fn now_ms(&self) -> i64 {
        RealEnv.now_ms()
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        RealEnv.sleep(ms)
    }

    fn fault(&self, point: &Point<'_>) -> impl Future<Output = Fault> {
        std::future::ready(self.0.decide(point))
    }
}

fn soak_env(effects: &Path, submit_only: Vec<RunId>) -> Result<SoakEnv, RealError> {
    let log =
        OpenOptions::new().create(true).append(true).open(effects).map_err(killpoints::io("open the effects log"))?;
    let name = effects.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let chain = RefCell::new(Chain::new(&name));
    Ok(SoakEnv(Rc::new(SoakLog { log, chain, submit_only, log_error: RefCell::default() })))
}

/// The `soak-engine-worker` process: a queue worker sweeping every `poll_ms` until killed.
pub fn run_worker(
    db: &Path,
    effects: &Path,
    owner: &str,
    ttl_ms: u32,
    engine_defects: EngineDefects,
    store_defects: StoreDefects,
) -> Result<(), SoakError> {
    let store = open_logged(db, effects, owner, ttl_ms, store_defects)?;
    let env = soak_env(effects, Vec::new())?;
    let engine_opts = EngineOptions { owner: owner.into(), defects: engine_defects, ..EngineOptions::default() };
    let engine = Rc::new(
        fencesim_engine::Engine::new(store.clone(), env.clone(), Ledger::new(), engine_opts)
            .map_err(|e| SoakError::Options(e.to_string()))?,
    );
    let workflows = Workflow::BUILTIN.iter().filter_map(|n| Workflow::builtin(n)).collect();
    let opts =
        WorkerOptions { owner: owner.into(), concurrency: 2, ttl_ms: Some(ttl_ms), poll_ms: 50, retention: None };
    let worker = Worker::new(engine, &store, workflows, opts).map_err(|e| SoakError::Options(e.to_string()))?;
    killpoints::tokio_runtime()?.block_on(worker.run_until_stopped());
    match env.0.log_error.take() {
        Some(error) => Err(RealError::Io { what: "write the effects log".into(), error }.into()),
        None => Ok(()),
    }
}

/// How often the client submits a run whose start never reached the store.
const CLIENT_SUBMIT_ATTEMPTS: u32 = 40;

/// The `soak-engine-client` process: submit the plan's runs at once; drive the even ones to
/// their end, and only boot the odd ones (their running meta) for the workers to take over.
pub fn run_client(db: &Path, effects: &Path, opts: &EngineSoakOptions) -> Result<(), SoakError> {
    let plan = plan(opts);
    let store = open_logged(db, effects, "client", opts.ttl_ms, opts.store_defects)?;
    let submit_only = plan.iter().skip(1).step_by(2).map(|(run, _)| run.clone()).collect();
    let env = soak_env(effects, submit_only)?;
    let engine_opts =
        EngineOptions { owner: "client".into(), defects: opts.engine_defects, ..EngineOptions::default() };
    let engine = fencesim_engine::Engine::new(store.clone(), env.clone(), Ledger::new(), engine_opts)
        .map_err(|e| SoakError::Options(e.to_string()))?;
    let drives = plan
        .iter()
        .map(|(run, workflow)| {
            let (engine, store) = (&engine, &store);
            Box::pin(async move {
                // A start that never reached the store (busy past the engine's retries, a lost
                // race at boot) is submitted again, as a real client would; one that did is the
                // workers' to finish.
                for _ in 0..CLIENT_SUBMIT_ATTEMPTS {
                    let result = engine.run(run, workflow, RunOptions::default()).await;
                    if result.is_ok() || !matches!(store.get_meta(run), Ok(None)) {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                }
            }) as fencesim_engine::race::LocalFuture<'_, ()>
        })
        .collect();
    killpoints::tokio_runtime()?.block_on(join_all(drives));
    match env.0.log_error.take() {
        Some(error) => Err(RealError::Io { what: "write the effects log".into(), error }.into()),
        None => Ok(()),
    }
}

/// The hidden subcommands' command lines.
fn defects_argv(opts: &EngineSoakOptions) -> Vec<OsString> {
    killpoints::defect_args(opts.engine_defects, opts.store_defects)
}

fn worker_argv(db: &Path, effects: &Path, owner: &str, opts: &EngineSoakOptions) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        "soak-engine-worker".into(),
        "--db".into(),
        db.into(),
        "--effects".into(),
        effects.into(),
        "--owner".into(),
        owner.into(),
        "--ttl-ms".into(),
        opts.ttl_ms.to_string().into(),
    ];
    argv.extend(defects_argv(opts));
    argv
}

fn client_argv(db: &Path, effects: &Path, opts: &EngineSoakOptions) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        "soak-engine-client".into(),
        "--db".into(),
        db.into(),
        "--effects".into(),
        effects.into(),
        "--runs".into(),
        opts.runs.to_string().into(),
        "--seed".into(),
        opts.seed.to_string().into(),
        "--ttl-ms".into(),
        opts.ttl_ms.to_string().into(),
    ];
    argv.extend(defects_argv(opts));
    argv
}

/// A worker slot: the process of its current incarnation, and until when it is stopped.
struct Slot {
    process: Reaped,
    incarnation: u32,
    stopped_until: Option<Instant>,
}

/// Run one engine-level soak with `exe` (the `fencesim` binary) as every process.
pub fn run_engine_soak_with(exe: &Path, opts: &EngineSoakOptions) -> Result<EngineSoakReport, SoakError> {
    if opts.workers == 0 || opts.runs == 0 || opts.ttl_ms < 30 {
        return Err(SoakError::Options("workers and runs must be positive and the ttl at least 30 ms".into()));
    }
    let signals = Deferral::start();
    let (temp, dir) = soak_dir(opts)?;
    let db = dir.join("soak.db");
    let started = Instant::now();
    let start_mono_ns = mono_ns();
    // Boot the file once here, so the processes race only for runs.
    drop(killpoints::open_store(&db, opts.ttl_ms, opts.store_defects)?);

    let mut report = EngineSoakReport { seed: opts.seed, ..EngineSoakReport::default() };
    let mut client = Some(spawn_logged(exe, &client_argv(&db, &dir.join("client.effects"), opts), &dir, "client")?);
    let mut fleet =
        Fleet { exe, dir: &dir, db: &db, opts, slots: Vec::new(), effects: vec![dir.join("client.effects")] };
    for w in 0..opts.workers {
        let slot = fleet.spawn(w, 0)?;
        fleet.slots.push(slot);
    }
    let store = killpoints::open_store(&db, opts.ttl_ms, StoreDefects::NONE)?;
    let plan = plan(opts);
    let client_failed = fleet.until_settled(&mut client, store.as_ref(), &plan, &signals, started, &mut report)?;
    // Let a drive in flight finish, then stop every process (idle workers: not crashes).
    std::thread::sleep(Duration::from_millis(u64::from(opts.ttl_ms)));
    fleet.kill_all();
    let effects = std::mem::take(&mut fleet.effects);
    drop(client);
    report.violations.extend(client_failed);

    drop(store);
    let record = write_record(&dir, opts, start_mono_ns, &report, &effects)?;
    // Every process is gone: the folder is sealed as it stands, and judged once it verifies.
    seal::seal(&dir, Level::Engine).map_err(super::SoakError::from)?;
    let sealed = seal::verify(&dir).map_err(super::SoakError::from)?;
    judge(exe, &dir, &sealed, &record, &mut report)?;
    report.wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if opts.keep.is_none() {
        temp.close().map_err(killpoints::io("remove the soak's temporary folder"))?;
    }
    Ok(report)
}

/// The soak's folder: `--keep`'s, or a temporary one in the binary's process root (removed by its
/// janitor if this process is killed), which is made either way.
fn soak_dir(opts: &EngineSoakOptions) -> Result<(tempfile::TempDir, PathBuf), SoakError> {
    let temp = crate::proc::janitor::temp_dir("fencesim-soak-engine-", false)
        .map_err(killpoints::io("create a temporary folder"))?;
    let dir = match &opts.keep {
        Some(keep) => {
            std::fs::create_dir_all(keep).map_err(killpoints::io("create the keep folder"))?;
            keep.clone()
        }
        None => temp.path().to_path_buf(),
    };
    Ok((temp, dir))
}

/// The soak's record (what a later `--rejudge` needs besides the files), written atomically.
fn write_record(
    dir: &Path,
    opts: &EngineSoakOptions,
    start_mono_ns: u64,
    report: &EngineSoakReport,
    effects: &[PathBuf],
) -> Result<EngineRecord, SoakError> {
    let record = EngineRecord {
        seed: opts.seed,
        workers: opts.workers,
        runs: opts.runs,
        ttl_ms: opts.ttl_ms,
        start_mono_ns,
        crashes: report.crashes,
        zombies: report.zombies,
        effects: effects.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect(),
    };
    let text = serde_json::to_vec_pretty(&record).map_err(super::SoakError::json("the soak's record"))?;
    fencesim_sim::files::write_atomic(&dir.join(RECORD_FILE), &text, false)
        .map_err(|e| RealError::Harness(e.to_string()))?;
    Ok(record)
}

/// The engine soak's worker processes and every effects log they were given.
struct Fleet<'a> {
    exe: &'a Path,
    dir: &'a Path,
    db: &'a Path,
    opts: &'a EngineSoakOptions,
    slots: Vec<Slot>,
    effects: Vec<PathBuf>,
}

impl Fleet<'_> {
    /// Storm until every run has settled or waits, or the cap is reached (a liveness violation):
    /// a fault on a drawn worker now and then in the fault window, stopped workers resumed when
    /// due, the client watched until it ends; a termination signal ends it as an error. The
    /// client's failure, if it failed.
    fn until_settled(
        &mut self,
        client: &mut Option<Reaped>,
        store: &dyn Store,
        plan: &[(RunId, Workflow)],
        signals: &Deferral,
        started: Instant,
        report: &mut EngineSoakReport,
    ) -> Result<Option<Violation>, SoakError> {
        let opts = self.opts;
        let mut rng = Stream::new(opts.seed).fork("soak-engine/referee");
        let mut next_fault = Duration::from_millis(rng.range(opts.fault_every_ms / 2, opts.fault_every_ms * 3 / 2 + 1));
        let mut client_failed = None;
        loop {
            if let Some(signal) = signals.pending() {
                return Err(RealError::Interrupted(signal).into());
            }
            let now = started.elapsed();
            // The client ends on its own.
            if let Some(c) = client.as_mut()
                && let Some(status) = c.try_wait().map_err(killpoints::io("wait for the client"))?
            {
                if !status.success() {
                    client_failed =
                        Some(Violation::of(Checker::WritersAccounted, format!("the client failed ({status})")));
                }
                *client = None;
            }
            self.resume_due();
            if now < Duration::from_millis(opts.fault_ms) && now >= next_fault {
                next_fault =
                    now + Duration::from_millis(rng.range(opts.fault_every_ms / 2, opts.fault_every_ms * 3 / 2 + 1));
                let w = u32::try_from(rng.below(u64::from(opts.workers))).unwrap_or(0);
                self.disrupt(w, &mut rng, report)?;
            }
            let quiet =
                now >= Duration::from_millis(opts.fault_ms) && self.slots.iter().all(|s| s.stopped_until.is_none());
            if quiet && client.is_none() && settled_or_waiting(store, plan)? {
                break;
            }
            if now >= Duration::from_millis(opts.cap_ms) {
                let why = format!("not every run settled or waiting within {} ms", opts.cap_ms);
                report.violations.push(Violation::of(Checker::Liveness, why));
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(client_failed)
    }

    /// Worker `w`'s process of `incarnation`, under the owner name `w<w>.<incarnation>`.
    fn spawn(&mut self, w: u32, incarnation: u32) -> Result<Slot, SoakError> {
        let owner = format!("w{w}.{incarnation}");
        let log = self.dir.join(format!("{owner}.effects"));
        let process = spawn_logged(self.exe, &worker_argv(self.db, &log, &owner, self.opts), self.dir, &owner)?;
        self.effects.push(log);
        Ok(Slot { process, incarnation, stopped_until: None })
    }

    /// SIGCONT every stopped worker whose hold is over.
    fn resume_due(&mut self) {
        for slot in &mut self.slots {
            if slot.stopped_until.is_some_and(|until| Instant::now() >= until) {
                slot.process.signal(Signal::SIGCONT);
                slot.stopped_until = None;
            }
        }
    }

    /// Disrupt worker `w` unless it is stopped already: a crash or a zombie, as `rng` draws.
    fn disrupt(&mut self, w: u32, rng: &mut Stream, report: &mut EngineSoakReport) -> Result<(), SoakError> {
        let i = w as usize;
        if self.slots[i].stopped_until.is_some() {
            return Ok(());
        }
        if rng.chance(0.5) {
            // A crash: SIGKILL, reap, and a new incarnation under a new owner name.
            let slot = &mut self.slots[i];
            let _ = slot.process.kill();
            let incarnation = slot.incarnation + 1;
            let next = self.spawn(w, incarnation)?;
            self.slots[i] = next;
            report.crashes += 1;
        } else {
            // A zombie: stopped past its ttl, then resumed into a world that moved on.
            let hold = rng.range(u64::from(self.opts.ttl_ms) * 3 / 2, u64::from(self.opts.ttl_ms) * 3);
            let slot = &mut self.slots[i];
            slot.process.signal(Signal::SIGSTOP);
            slot.stopped_until = Some(Instant::now() + Duration::from_millis(hold));
            report.zombies += 1;
        }
        Ok(())
    }

    /// SIGKILL and reap every worker.
    fn kill_all(&mut self) {
        for slot in &mut self.slots {
            let _ = slot.process.kill();
        }
    }
}

/// Run one engine-level soak with the running `fencesim` binary as every process.
pub fn run_engine_soak(opts: &EngineSoakOptions) -> Result<EngineSoakReport, SoakError> {
    let exe = std::env::current_exe().map_err(killpoints::io("locate the fencesim binary"))?;
    run_engine_soak_with(&exe, opts)
}

/// Whether every planned run is settled or waiting on a suspension. Asked every 20 ms once the
/// storm is quiet: the runs that are, gathered once, then each planned run looked up (comparing
/// every planned run with every listed one cost `--runs` squared: 10,000 runs, 10^8 comparisons
/// a tick).
fn settled_or_waiting(store: &dyn Store, plan: &[(RunId, Workflow)]) -> Result<bool, SoakError> {
    let metas = store.list_runs(&RunFilter::all())?;
    let done: BTreeSet<&RunId> = metas
        .iter()
        .filter(|m| m.status.is_terminal() || m.status == RunStatus::Suspended)
        .map(|m| &m.run_id)
        .collect();
    Ok(plan.iter().all(|(run, _)| done.contains(run)))
}

/// Judge a kept engine soak again, offline: the same oracle and checks as at the end of its
/// storm, over the same files (the operator's repair runs on a copy, so the folder is unchanged).
pub fn rejudge(exe: &Path, dir: &Path) -> Result<EngineSoakReport, SoakError> {
    let sealed = seal::verify(dir).map_err(super::SoakError::from)?;
    rejudge_sealed(exe, dir, &sealed)
}

/// [`rejudge`] of a folder that verified as `sealed`.
pub fn rejudge_sealed(exe: &Path, dir: &Path, sealed: &Manifest) -> Result<EngineSoakReport, SoakError> {
    if sealed.level() != Level::Engine {
        return Err(super::SoakError::Record(format!("{} is a kept store-level soak", dir.display())).into());
    }
    let path = dir.join(RECORD_FILE);
    let text = fencesim_sim::files::read_input(&path, fencesim_sim::files::MAX_TEXT_BYTES)
        .map_err(|e| RealError::Harness(format!("cannot read the soak's record {e}")))?;
    let record: EngineRecord = serde_json::from_str(&text)
        .map_err(|e| RealError::Harness(format!("{} is not a soak record: {e}", path.display())))?;
    let mut report = EngineSoakReport {
        seed: record.seed,
        crashes: record.crashes,
        zombies: record.zombies,
        ..EngineSoakReport::default()
    };
    judge(exe, dir, sealed, &record, &mut report)?;
    Ok(report)
}

/// The end-of-soak checks over the file and the effects logs, which they never change.
fn judge(
    exe: &Path,
    dir: &Path,
    sealed: &Manifest,
    record: &EngineRecord,
    report: &mut EngineSoakReport,
) -> Result<(), SoakError> {
    let opts = EngineSoakOptions { seed: record.seed, runs: record.runs, ..EngineSoakOptions::tiny(record.seed) };
    let plan = plan(&opts);
    let layout = Layout::new(dir);
    let (copy, db) = super::judge::private_copy(&layout, sealed)?;
    let read_only = super::judge::open_read_only(&db, &layout.db())?;
    let store: &dyn Store = &read_only;
    let effects = effects_logs(dir, record)?;
    let (start_mono_ns, plan) = (record.start_mono_ns, &plan[..]);
    let violations = &mut report.violations;
    // The oracle over every process's logged calls and payments, before the operator's repair
    // writes anything: its `repay-bound` holds each dispatch to one payment plus one per
    // interrupted tenure (a crash, a zombie, a lease lost to a failed renew), as in a world.
    let mut payments = Vec::new();
    for log in &effects {
        // A process killed before it opened its effects log paid nothing (the seal holds the
        // folder to the logs that existed when the storm ended).
        let name = log.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        if sealed.file(&name).is_none() {
            continue;
        }
        let node = log.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        for (stamp, effect) in read_effect_stamps(log)? {
            match effect.kind {
                EffectKind::Call => report.paid_calls += 1,
                EffectKind::Tool => report.paid_tools += 1,
            }
            payments.push((node.clone(), stamp, effect));
        }
    }
    let merged = merge_with_effects(&read_logs(&layout, sealed)?, &payments, start_mono_ns);
    let mut named: BTreeSet<RunId> = merged.rows.iter().filter_map(|r| r.call()).map(|c| c.run.clone()).collect();
    named.remove(&RunId::new("*"));
    named.extend(plan.iter().map(|(run, _)| run.clone()));
    let snapshot = Snapshot::read(store, named)?;
    let cfg = OracleConfig {
        ttl_ms: i64::from(record.ttl_ms),
        planned: plan.iter().map(|(run, _)| run.clone()).collect(),
        scope: Scope::Engine,
        scripts: fencesim_sim::scripts::builtin(),
    };
    report.calls = merged.rows.iter().filter(|r| r.call().is_some()).count() as u64;
    report.indeterminate = merged.open_calls.len() as u32;
    // Every checker but `healthy-holder` (the OS may pause a real process at any instant and the
    // referee's SIGSTOPs are not history rows, so no tenure of a soak is provably undisturbed) and
    // `cancel-asked` (the soak logs no stop request of its workers).
    let findings = oracle::check(&merged.rows, &snapshot, &cfg);
    violations
        .extend(findings.into_iter().filter(|v| !matches!(v.checker, Checker::HealthyHolder | Checker::CancelAsked)));
    for (run, _) in plan {
        tally_run(store, run, report)?;
    }
    drop(read_only);
    repair_copy(exe, copy.path(), &db, record.ttl_ms, &mut report.violations)
}

/// Every payment a sealed effects log records, with its monotonic stamp, for the oracle's
/// history (each line's chain hash taken out before it is read).
fn read_effect_stamps(path: &Path) -> Result<Vec<(u64, fencesim_sim::history::Effect)>, SoakError> {
    let (file, _) = seal::open_regular(path, fencesim_sim::files::MAX_LOG_BYTES).map_err(super::SoakError::from)?;
    let malformed = |line: usize, why: String| {
        RealError::Harness(format!("{}:{line}: not an effects log line ({why})", path.display()))
    };
    let mut stamps = Vec::new();
    for (n, raw) in std::io::BufRead::split(std::io::BufReader::new(file), b'\n').enumerate() {
        let raw = raw.map_err(killpoints::io("read an effects log"))?;
        let body = seal::unsealed(&raw).ok_or_else(|| malformed(n + 1, "no chain hash".into()))?;
        let line: LogLine = serde_json::from_slice(&body).map_err(|e| malformed(n + 1, e.to_string()))?;
        stamps.extend(line.effect());
    }
    Ok(stamps)
}

/// The effects logs a record names, each a plain file name of the folder: a record is data, and a
/// name that leads elsewhere (`../x`, `/dev/zero`) is refused rather than read.
fn effects_logs(dir: &Path, record: &EngineRecord) -> Result<Vec<PathBuf>, SoakError> {
    record
        .effects
        .iter()
        .map(|name| {
            let plain = name.ends_with(".effects")
                && !name.starts_with('.')
                && Path::new(name).file_name().is_some_and(|n| n == name.as_str());
            if plain {
                Ok(dir.join(name))
            } else {
                Err(super::SoakError::Record(format!(
                    "{RECORD_FILE}: effects log '{}' is not the name of an effects log in the folder",
                    fencesim_sim::files::printable(name)
                ))
                .into())
            }
        })
        .collect()
}

/// One run's end-of-soak tallies: settled or waiting, and its segments. The oracle judged the
/// run itself (liveness, seqs, settles, meta never ahead) from the processes' logs and the file.
fn tally_run(store: &dyn Store, run: &RunId, report: &mut EngineSoakReport) -> Result<(), SoakError> {
    let meta = store.get_meta(run)?;
    match meta.as_ref().map(|m| m.status) {
        Some(s) if s.is_terminal() => report.runs_settled += 1,
        Some(RunStatus::Suspended) => report.waiting += 1,
        _ => {}
    }
    report.segments += meta.as_ref().map_or(0, |m| m.segments);
    Ok(())
}

/// The operator's repair, as a real process on the judge's private copy of the file (in `copy`,
/// never the kept folder), then the audit of the copy must be consistent.
fn repair_copy(
    exe: &Path,
    copy: &Path,
    db: &Path,
    ttl_ms: u32,
    violations: &mut Vec<Violation>,
) -> Result<(), SoakError> {
    let argv: Vec<OsString> = vec!["runs".into(), "audit".into(), "--db".into(), db.into(), "--repair".into()];
    let mut repair = spawn_logged(exe, &argv, copy, "audit")?;
    let _ = repair.wait().map_err(killpoints::io("wait for runs audit"))?;
    let after = killpoints::open_store(db, ttl_ms, StoreDefects::NONE)?;
    for audit in audit::audit_runs(after.as_ref(), false)? {
        violations.extend(fencesim_sim::killpoints::audit_consistent(&audit, "after repair"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use fencesim_store::{JournalStore as _, MemoryStore, RunMeta};

    use super::*;
    use crate::proc::thread_cpu;

    /// A store of `n` settled runs and the plan of them all.
    fn settled(n: usize) -> (MemoryStore, Vec<(RunId, Workflow)>) {
        let store = MemoryStore::new();
        let workflow = Workflow::builtin("happy").expect("built in");
        let plan: Vec<(RunId, Workflow)> =
            (0..n).map(|i| (RunId::new(format!("run-{i:05}")), workflow.clone())).collect();
        for (run, _) in &plan {
            store.put_meta(&RunMeta::new(run.clone(), RunStatus::Ok), None).expect("a meta");
        }
        (store, plan)
    }

    /// The storm's quiet check costs time linear in `--runs` (issue 38 item 16): asked 8 times of
    /// N runs and once of 8N, in this thread's CPU time, the median of three, the 8N check at most
    /// 4 times as long (a quadratic check is 8 times or more: 17 times before, debug build, 1.9
    /// after).
    #[test]
    fn the_quiet_check_costs_time_linear_in_the_runs() {
        let time = |n: usize, times: usize| {
            let (store, plan) = settled(n);
            let mut took: Vec<Duration> = (0..3)
                .map(|_| {
                    let start = thread_cpu();
                    for _ in 0..times {
                        assert!(settled_or_waiting(&store, &plan).expect("reads"));
                    }
                    thread_cpu() - start
                })
                .collect();
            took.sort();
            took[1]
        };
        let (small, large) = (time(3_000, 8), time(24_000, 1));
        let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-4);
        // 17 times before the fix, 1.9 after.
        assert!(ratio < 4.0, "8 checks of 3,000 runs {small:?}, one of 24,000 {large:?}: {ratio:.1} times");
        let (store, mut plan) = settled(3);
        plan.push((RunId::new("never-started"), plan[0].1.clone()));
        assert!(!settled_or_waiting(&store, &plan).expect("reads"));
    }
}
