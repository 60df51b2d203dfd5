//! The referee: owns one store-level storm. It spawns the writers at once (a real concurrent
//! boot), tails their logs every 20 ms, injects real faults from a seeded stream of draws
//! (`SIGSTOP` a lease holder until another writer takes the run over, then `SIGCONT` it: a
//! zombie whose next fenced write must be refused; `SIGKILL` a writer anywhere and start a new
//! generation in its place), keeps the WAL bounded, stops at the quorum or the cap, reaps every
//! writer within one shared exit deadline, seals the folder and hands it to the judge.
//!
//! Pacing: a fault waits on the storm's evidence, not on a timer. Each is drawn at a rate per
//! 100 ms of storm, and a gated fault that lags the other floors is injected as soon as the storm
//! allows one (a holder to stop, a writer to kill); a stop is answered within a tick of the
//! takeover, and a writer stopped while it holds SQLite's write lock (no takeover can come) is
//! resumed as soon as the other writers' busy calls show it.
//!
//! No orphans: writers ask for `SIGKILL` when the referee dies (`PR_SET_PDEATHSIG`, then check
//! their parent); on `SIGINT`/`SIGTERM`, a panic or an error the referee kills and reaps them
//! (the [`Storm`]'s `Drop`); if the referee itself is killed, alone or with its process group,
//! the janitor of the binary's process root (a child in a group of its own, reading a pipe only
//! the referee holds open; [`crate::proc::janitor`]) removes the temporary folder.
//!
//! Checkpoint policy: SQLite's automatic checkpoints run in the writers as usual (PASSIVE, at
//! commit), every writer also runs `wal_checkpoint(PASSIVE)` every few tenures, and the referee
//! runs `wal_checkpoint(PASSIVE)` on its own connection every 100 ms, TRUNCATE once the WAL is
//! over 8 MB. That connection never waits for a lock (busy timeout 0): a TRUNCATE waiting for a
//! reader holds off every writer, and with a 5 s timeout a reader stopped in its transaction held
//! the whole storm. A stopped writer that holds a read snapshot only keeps checkpoints from
//! resetting the WAL while it is stopped (bounded).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use fencesim_store::StoreDefect;
use nix::sys::signal::Signal;
use serde::Serialize;

use super::judge::{Judgement, META_SCHEMA, SoakMeta, WriterAccount, judge};
use fencesim_oracle::history::Surface;

use super::log::{End, Ev, EvKind, Line, LogFile, LogOutcome, Tail};
use super::quorum::{Activity, Quorum, progress};
use super::wall::{Stopwatch, mono_ns, sleep_ms, unix_ms};
use super::{Layout, MAX_SKEW_MS, MAX_WRITERS, RUN, SoakError, SoakResult, within};
use crate::proc::child::{self, Reaped};
use crate::proc::signals::Deferral;
use fencesim_sim::rng::Stream;

/// What a storm is asked to do.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    pub writers: usize,
    pub ttl_ms: i64,
    pub seed: u64,
    pub cap_s: u64,
    pub skew_ms: i64,
    pub quorum: Quorum,
    pub defects: Vec<StoreDefect>,
    /// Keep the database and logs here instead of a temporary folder.
    pub keep: Option<PathBuf>,
    /// One shared deadline for every writer to exit after the stop file appears.
    pub exit_deadline_ms: u64,
    /// The `fencesim` binary the writers re-execute.
    pub exe: PathBuf,
    /// Draw a progress line (only ever on a terminal).
    pub progress: bool,
    /// Storm this store adapter (`--store cmd:...`) instead of fencesim's own store: each writer
    /// drives an adapter process of its own over one shared folder, and every signal the referee
    /// sends a writer reaches its adapter too (they share a process group): that is where a real
    /// transaction dies.
    pub adapter: Option<fencesim_protocol::Spec>,
}

impl SoakOptions {
    /// Refuse options no storm should run with, before anything is created or started: every
    /// bound names its flag.
    pub fn validate(&self) -> SoakResult<()> {
        let usage = SoakError::Usage;
        within("--writers", self.writers, 1..=MAX_WRITERS).map_err(usage)?;
        within("--ttl-ms", self.ttl_ms, 1..=i64::from(fencesim_store::TIMER_MS_MAX)).map_err(usage)?;
        within("--skew-ms", self.skew_ms, 0..=MAX_SKEW_MS).map_err(usage)?;
        if self.cap_s == 0 {
            return Err(usage("--cap-s must be at least 1, got 0".into()));
        }
        if self.exit_deadline_ms == 0 {
            return Err(usage("--exit-deadline-s must be at least 1, got 0".into()));
        }
        let least = self.quorum.min_writers.max(1);
        if self.writers < least {
            return Err(usage(format!(
                "the {} quorum needs at least {least} writers, got {}",
                self.quorum.name, self.writers
            )));
        }
        Ok(())
    }
}

/// When each gated counter first met its floor (ms of the storm), in the quorum's order; `None`
/// for a counter that never did.
type FloorTimes = Vec<(String, Option<u64>)>;

/// What a storm measured and concluded.
#[derive(Clone, Debug, Serialize)]
pub struct SoakOutcome {
    pub activity: Activity,
    pub met: bool,
    pub short: Vec<(String, u64, u64)>,
    pub storm_ms: u64,
    /// When each gated counter first met its floor (ms of the storm), in the quorum's order;
    /// `None` for a counter that never did.
    pub floor_ms: Vec<(String, Option<u64>)>,
    pub capped: bool,
    pub wal_peak_bytes: u64,
    pub referee_rss_kib: u64,
    pub processes: usize,
    pub meta: SoakMeta,
    pub judgement: Judgement,
    pub kept: Option<PathBuf>,
}

impl SoakOutcome {
    pub fn passed(&self) -> bool {
        self.met && self.judgement.findings.is_empty()
    }
}

/// Peak resident set (VmHWM, KiB) of a live process; 0 when gone.
pub fn vm_hwm_kib(pid: u32) -> u64 {
    let path = if pid == 0 { "/proc/self/status".to_owned() } else { format!("/proc/{pid}/status") };
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// One writer process and what the referee knows of it.
struct Proc {
    index: usize,
    generation: u32,
    /// The writer; with a store adapter it leads a process group with it, and signals go to both.
    child: Reaped,
    tail: Tail,
    /// The soak-run epoch it holds (granted, not yet released, stalled or kicked).
    holding: Option<i64>,
    /// SIGSTOPped: since when (ms of the storm) and under which epoch.
    stopped: Option<(u64, i64)>,
    /// Since its SIGSTOP (by the calls begun after it): the other writers' write calls that
    /// ended busy, and whether one ended otherwise (the write lock was free).
    stop_mono: u64,
    busy_since_stop: u32,
    wrote_since_stop: bool,
    /// SIGCONTed after a takeover: the epoch whose next fenced call must be refused, and when.
    zombie: Option<(i64, u64)>,
    /// Calls begun and not yet ended: id -> (fenced epoch, begin stamp).
    open: BTreeMap<u64, (Option<i64>, u64, Surface)>,
    /// Started in place of a killed writer; counts as recovered at its first grant.
    replacement: bool,
    booted: bool,
    signals: Vec<String>,
    rss_kib: u64,
}

impl Proc {
    /// A writer's event: its boot, and the soak run's lease granted (a replacement's first grant
    /// recovers a SIGKILL; `max_grant` the highest epoch seen) or given up.
    fn event(&mut self, ev: &Ev, activity: &mut Activity, max_grant: &mut i64) {
        match ev.kind {
            EvKind::Booted => self.booted = true,
            EvKind::Grant if ev.target.as_deref() == Some(RUN) => {
                self.holding = ev.epoch;
                *max_grant = (*max_grant).max(ev.epoch.unwrap_or(0));
                if self.replacement {
                    self.replacement = false;
                    activity.sigkills_recovered += 1;
                }
            }
            // A stalling holder still holds (an expiring lease): stopping it
            // makes a zombie too.
            EvKind::Released | EvKind::FenceKick | EvKind::StaleReject => self.holding = None,
            EvKind::Grant
            | EvKind::Start
            | EvKind::Fatal
            | EvKind::Done
            | EvKind::Busy
            | EvKind::MidCallLanded
            | EvKind::MidCallStall
            | EvKind::Error
            | EvKind::Accept
            | EvKind::Renewed
            | EvKind::OrderReject
            | EvKind::SeqProbeAccepted
            | EvKind::LiveCrossReject
            | EvKind::StaleAccept
            | EvKind::Stall
            | EvKind::VictimAbandoned
            | EvKind::Victim
            | EvKind::Tombstone => {}
        }
    }

    /// A writer's call ended: a zombie's first fenced call after its takeover, refused, counts a
    /// SIGSTOP zombie; a write call is returned as (begun at, ended busy) for the stopped writers.
    fn ended(&mut self, e: &End, activity: &mut Activity) -> Option<(u64, bool)> {
        let (epoch, begun, surface) = self.open.remove(&e.id)?;
        if let (Some((zombie_epoch, since)), Some(epoch)) = (self.zombie, epoch)
            && epoch == zombie_epoch
            && begun > since
            && surface.is_fenced()
            && e.outcome != LogOutcome::Busy
        {
            self.zombie = None;
            if e.outcome == LogOutcome::Stale {
                activity.sigstop_zombies += 1;
            }
        }
        surface.is_write().then_some((begun, e.outcome == LogOutcome::Busy))
    }
}

/// The storm: children and their bookkeeping. Dropping it kills and reaps every writer left.
struct Storm {
    layout: Layout,
    opts: SoakOptions,
    procs: Vec<Proc>,
    accounts: Vec<WriterAccount>,
    activity: Activity,
    rng: Stream,
    max_grant: i64,
    spawned: usize,
    clock: Stopwatch,
    checkpointer: Option<rusqlite::Connection>,
    wal_peak: u64,
    /// When the fault schedule last drew (ms of the storm).
    last_faults_ms: u64,
    /// When the referee last checkpointed (ms of the storm).
    last_checkpoint_ms: Option<u64>,
}

impl Drop for Storm {
    fn drop(&mut self) {
        // Each writer (its group, adapter included) is killed and reaped as it is dropped.
        self.procs.clear();
    }
}

/// The referee's tick: tail the logs, resume taken-over zombies, draw faults. Short, so that a
/// takeover is answered (SIGCONT) and the next holder found within a few ms of a writer's line:
/// the faults wait on the storm's evidence, not on the referee's clock.
const TICK_MS: u64 = 20;
/// How often the referee checkpoints the WAL from its own connection.
const CHECKPOINT_MS: u64 = 100;
/// A WAL this large is truncated (when no lock is in the way) rather than only checkpointed.
const WAL_TRUNCATE_BYTES: u64 = 8 << 20;
/// The chance of a SIGSTOP of a holder per 100 ms of storm (whatever the tick's real length).
const STOP_PER_100MS: f64 = 0.6;
/// How long the first generation's writers of a store adapter's storm are given to start their
/// adapter processes and shake hands before the instant they all open the location (a Node or
/// Python program takes a few hundred ms to start, more on a loaded machine).
const ADAPTER_START_MS: i64 = 2_000;

/// The chance of a SIGKILL of a booted writer per 100 ms of storm, whatever the tick's real length (a
/// loaded machine stretches ticks: drawn at 0.2 per tick, the release storm's SIGKILLs reached
/// their floor of 100 only after 96-146 s).
const KILL_PER_100MS: f64 = 0.35;
/// Killed writers whose replacement has not yet recovered (booted and been granted the run) at
/// once: the storm never runs out of writers that are not booting.
const MAX_PENDING_RECOVERY: usize = 3;
/// A gated fault (recovered SIGKILLs, refused SIGSTOP zombies) is behind when its share of its
/// floor is below the share of the storm's other floors plus this lead; a fault behind is
/// injected as soon as the storm allows one (a holder to stop, a writer to kill), on top of its
/// seeded draws, so a fault floor is met with the rest rather than last.
const FAULT_LEAD: f64 = 0.1;
/// Busy write calls of other writers, and none that was not, after which a writer stopped
/// inside a write call is taken to hold SQLite's write lock.
const STUCK_BUSY: u32 = 3;
/// A gated fault whose floor is met is drawn at this share of its rate: the storm has the
/// evidence its quorum asks for, and every further SIGSTOP of a holder (and SIGKILL of one)
/// holds the run for a ttl (a release storm spent a sixth of its time on faults past their floors).
const AFTER_FLOOR: f64 = 0.25;

/// The chance over `dt_ms` of an event of chance `per_100ms` per 100 ms.
fn chance_over(per_100ms: f64, dt_ms: u64) -> f64 {
    1.0 - (1.0 - per_100ms).powf(dt_ms as f64 / 100.0)
}

impl Storm {
    fn spawn(&mut self, index: usize, generation: u32, start_at_ms: Option<i64>, replacement: bool) -> SoakResult<()> {
        let mut skew_rng = Stream::new(self.opts.seed).fork(&format!("skew/{index}/{generation}"));
        let max = self.opts.skew_ms.unsigned_abs();
        let skew = i64::try_from(skew_rng.range(0, 2 * max)).unwrap_or(0) - i64::try_from(max).unwrap_or(0);
        let stderr = File::create(self.layout.stderr(index, generation))
            .map_err(SoakError::io("cannot create a writer's stderr file"))?;
        // Its log exists before it starts, so every writer accounted for has one, whenever it
        // ended: the judge refuses a folder that lacks one.
        LogFile::open(&self.layout.log(index, generation))?;
        let mut cmd = child::command(&self.opts.exe);
        let location = if self.opts.adapter.is_some() { self.layout.adapter_dir() } else { self.layout.db() };
        cmd.arg("soak-writer")
            .arg("--db")
            .arg(location)
            .arg("--log")
            .arg(self.layout.log(index, generation))
            .arg("--stop")
            .arg(self.layout.stop())
            .args(["--index", &index.to_string(), "--generation", &generation.to_string()])
            .args(["--seed", &self.opts.seed.to_string(), "--ttl-ms", &self.opts.ttl_ms.to_string()])
            .arg(format!("--skew-ms={skew}"));
        if let Some(at) = start_at_ms {
            cmd.args(["--start-at-ms", &at.to_string()]);
        }
        if self.activity.mid_call_stalls == 0 {
            cmd.arg("--owe-mid-call");
        }
        for d in &self.opts.defects {
            cmd.args(["--defect", d.name()]);
        }
        if let Some(spec) = &self.opts.adapter {
            cmd.arg(format!("--store={spec}")).arg(format!("--adapter-timeout-ms={}", spec.timeout_ms));
            // The writer leads a process group of its own, which its adapter joins.
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::from(stderr));
        let child = Reaped::spawn(&mut cmd, self.opts.adapter.is_some(), "start a writer")
            .map_err(|e| SoakError::io("cannot start a writer")(e.error))?;
        self.spawned += 1;
        self.procs.push(Proc {
            index,
            generation,
            child,
            tail: Tail::new(self.layout.log(index, generation)),
            holding: None,
            stopped: None,
            zombie: None,
            open: BTreeMap::new(),
            replacement,
            booted: false,
            signals: Vec::new(),
            rss_kib: 0,
            stop_mono: 0,
            busy_since_stop: 0,
            wrote_since_stop: false,
        });
        Ok(())
    }

    fn signal(p: &mut Proc, sig: Signal) {
        // A writer with an adapter leads its own process group: the signal reaches both.
        if p.child.signal(sig) {
            p.signals.push(sig.as_str().to_owned());
        }
    }

    /// Read every writer's new lines: counters, holders, zombies, recoveries.
    fn observe(&mut self) -> SoakResult<()> {
        // Write calls that ended: (whose, begun at, busy).
        let mut writes: Vec<(usize, u64, bool)> = Vec::new();
        for (i, p) in self.procs.iter_mut().enumerate() {
            for line in p.tail.read_new()? {
                match line {
                    Line::Ev(ev) => {
                        self.activity.observe(&ev);
                        p.event(&ev, &mut self.activity, &mut self.max_grant);
                    }
                    Line::Begin(b) => {
                        let epoch = b.lease.as_ref().filter(|l| l.run.as_str() == RUN).map(|l| l.epoch.0);
                        p.open.insert(b.id, (epoch, b.mono_ns, b.surface));
                    }
                    Line::End(e) => {
                        if let Some((begun, busy)) = p.ended(&e, &mut self.activity) {
                            writes.push((i, begun, busy));
                        }
                    }
                }
            }
        }
        for (i, begun, busy) in writes {
            for (j, p) in self.procs.iter_mut().enumerate() {
                if j != i && p.stopped.is_some() && begun > p.stop_mono {
                    p.busy_since_stop += u32::from(busy);
                    p.wrote_since_stop |= !busy;
                }
            }
        }
        Ok(())
    }

    fn account(
        p: &mut Proc,
        status: std::process::ExitStatus,
        killed_on_purpose: bool,
        hung: bool,
        layout: &Layout,
    ) -> WriterAccount {
        let signal = status.signal().map(|s| Signal::try_from(s).map_or(s.to_string(), |s| s.as_str().to_owned()));
        let stderr = std::fs::read_to_string(layout.stderr(p.index, p.generation))
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        WriterAccount {
            index: p.index,
            generation: p.generation,
            pid: p.child.id(),
            status: if hung {
                "hung".to_owned()
            } else {
                signal
                    .as_ref()
                    .map_or_else(|| format!("exit {}", status.code().unwrap_or(-1)), |s| format!("signal {s}"))
            },
            exit_code: status.code(),
            signal,
            killed_on_purpose,
            hung,
            signals: p.signals.clone(),
            rss_peak_kib: p.rss_kib,
            stderr,
        }
    }

    /// Reap writers that ended on their own; sample the live ones' RSS.
    fn reap(&mut self) -> SoakResult<()> {
        let mut i = 0;
        while i < self.procs.len() {
            let p = &mut self.procs[i];
            p.rss_kib = p.rss_kib.max(vm_hwm_kib(p.child.id()));
            match p.child.try_wait().map_err(SoakError::io("cannot wait for a writer"))? {
                Some(status) => {
                    let mut p = self.procs.remove(i);
                    let account = Self::account(&mut p, status, false, false, &self.layout);
                    self.accounts.push(account);
                }
                None => i += 1,
            }
        }
        Ok(())
    }

    /// SIGKILL writer `i`, reap it, start its next generation.
    fn kill_and_replace(&mut self, i: usize) -> SoakResult<()> {
        let mut p = self.procs.remove(i);
        p.rss_kib = p.rss_kib.max(vm_hwm_kib(p.child.id()));
        Self::signal(&mut p, Signal::SIGKILL);
        let status = p.child.wait().map_err(SoakError::io("cannot reap a killed writer"))?;
        // Its last lines still count.
        let mut rest = vec![p];
        std::mem::swap(&mut self.procs, &mut rest);
        self.observe()?;
        std::mem::swap(&mut self.procs, &mut rest);
        let mut p = rest.remove(0);
        let account = Self::account(&mut p, status, true, false, &self.layout);
        self.accounts.push(account);
        self.spawn(p.index, p.generation + 1, None, true)
    }

    /// The seeded fault schedule, drawn every tick (the same three draws whatever the storm
    /// does): resume stopped writers, then maybe SIGSTOP a holder and SIGKILL a booted writer, at
    /// their rates per 100 ms of storm or at once while their floor is behind the storm's.
    fn faults(&mut self) -> SoakResult<()> {
        let now = self.clock.elapsed_ms();
        self.resume(now);
        let stop_draw = self.rng.unit_range(0.0, 1.0);
        let kill_draw = self.rng.unit_range(0.0, 1.0);
        let pick = self.rng.next_u64();
        if self.procs.len() < 2 || !self.procs.iter().any(|p| p.booted) {
            return Ok(());
        }
        let dt = now.saturating_sub(self.last_faults_ms).clamp(1, 1_000);
        self.last_faults_ms = now;
        let others = self.opts.quorum.progress_except(&self.activity, &["sigkills_recovered", "sigstop_zombies"]);
        let stopping = self.procs.iter().filter(|p| p.stopped.is_some() || p.zombie.is_some()).count();
        let stop_rate = self.rate("sigstop_zombies", STOP_PER_100MS);
        if stop_draw < chance_over(stop_rate, dt) || self.behind("sigstop_zombies", stopping, others) {
            self.stop_holder(now, pick);
        }
        let pending = self.procs.iter().filter(|p| p.replacement).count();
        let kill_rate = self.rate("sigkills_recovered", KILL_PER_100MS);
        if kill_draw < chance_over(kill_rate, dt) || self.behind("sigkills_recovered", pending, others) {
            self.kill_one(pick >> 32)?;
        }
        Ok(())
    }

    /// The chance per 100 ms of the fault `counter`: `base`, or [`AFTER_FLOOR`] of it once the
    /// quorum gates the counter and its floor is met.
    fn rate(&self, counter: &str, base: f64) -> f64 {
        if self.opts.quorum.floor_met(&self.activity, counter) { base * AFTER_FLOOR } else { base }
    }

    /// Whether the gated fault `counter`, with `in_flight` more on their way, lags the other
    /// floors (their least share `others`) by more than [`FAULT_LEAD`].
    fn behind(&self, counter: &str, in_flight: usize, others: f64) -> bool {
        let in_flight = u64::try_from(in_flight).unwrap_or(u64::MAX);
        self.opts.quorum.lags(&self.activity, counter, in_flight, others, FAULT_LEAD)
    }

    /// SIGCONT stopped writers: a zombie once another writer took the run over; without one when
    /// the stop outlasted its bound, or when it holds SQLite's write lock (so no takeover can
    /// come): stopped inside a write call while every other writer's write call since ended busy
    /// ([`STUCK_BUSY`] of them, or none ended for twice the ttl). Before, such a stop held every
    /// writer for its whole bound of 1.5 s.
    fn resume(&mut self, now: u64) {
        let ttl = u64::try_from(self.opts.ttl_ms).unwrap_or(u64::MAX);
        let stop_bound = ttl.saturating_mul(6).max(1_500);
        let stuck_ms = ttl.saturating_mul(2).clamp(100, 1_500);
        let max_grant = self.max_grant;
        for p in &mut self.procs {
            let Some((since, epoch)) = p.stopped else { continue };
            let taken_over = max_grant > epoch;
            let in_write = p.open.values().any(|(_, _, surface)| surface.is_write());
            let stuck = in_write
                && !p.wrote_since_stop
                && (p.busy_since_stop >= STUCK_BUSY || now.saturating_sub(since) > stuck_ms);
            if taken_over || stuck || now.saturating_sub(since) > stop_bound {
                Self::signal(p, Signal::SIGCONT);
                p.stopped = None;
                p.holding = None;
                if taken_over {
                    p.zombie = Some((epoch, mono_ns()));
                }
            }
        }
    }

    /// SIGSTOP a holder of the run (never one already stopped or a zombie not yet refused), while
    /// fewer than two writers (one below four writers) are stopped.
    fn stop_holder(&mut self, now: u64, pick: u64) {
        let max_stopped = if self.procs.len() >= 4 { 2 } else { 1 };
        if self.procs.iter().filter(|p| p.stopped.is_some()).count() >= max_stopped {
            return;
        }
        // Never a writer already stopped: stopping it again restarted its stop clock, and one
        // stopped inside a write transaction (a takeover then impossible) stayed stopped for as
        // long as the draws kept coming, starving the whole storm.
        let holders: Vec<usize> = (0..self.procs.len())
            .filter(|i| {
                let p = &self.procs[*i];
                p.holding.is_some() && p.zombie.is_none() && p.stopped.is_none()
            })
            .collect();
        if let Some(&i) = holders.get((pick % holders.len().max(1) as u64) as usize) {
            let p = &mut self.procs[i];
            let epoch = p.holding.unwrap_or(0);
            Self::signal(p, Signal::SIGSTOP);
            p.stopped = Some((now, epoch));
            (p.stop_mono, p.busy_since_stop, p.wrote_since_stop) = (mono_ns(), 0, false);
        }
    }

    /// SIGKILL a booted writer that is neither stopped nor a replacement still to recover, and
    /// start its next generation, while fewer than [`MAX_PENDING_RECOVERY`] replacements are yet
    /// to recover. Faults go on while replacements boot (waiting for every boot held the release
    /// storm to about one SIGKILL a second).
    fn kill_one(&mut self, pick: u64) -> SoakResult<()> {
        if self.procs.iter().filter(|p| p.replacement).count() >= MAX_PENDING_RECOVERY {
            return Ok(());
        }
        let candidates: Vec<usize> = (0..self.procs.len())
            .filter(|i| {
                let p = &self.procs[*i];
                p.stopped.is_none() && p.booted && !p.replacement
            })
            .collect();
        match candidates.get((pick % candidates.len().max(1) as u64) as usize) {
            Some(&i) => self.kill_and_replace(i),
            None => Ok(()),
        }
    }

    /// Measure the WAL and, every [`CHECKPOINT_MS`], checkpoint it from the referee's own
    /// connection: PASSIVE, or TRUNCATE once it is over [`WAL_TRUNCATE_BYTES`]. The connection
    /// never waits for a lock (busy timeout 0): a TRUNCATE waiting on a reader holds off every
    /// writer, and with rusqlite's default 5 s timeout a reader stopped inside its transaction
    /// held the whole storm, the referee's ticks included, for up to 5 s.
    fn wal(&mut self) {
        if self.opts.adapter.is_some() {
            return;
        }
        let size = std::fs::metadata(self.layout.wal()).map_or(0, |m| m.len());
        self.wal_peak = self.wal_peak.max(size);
        let now = self.clock.elapsed_ms();
        if self.last_checkpoint_ms.is_some_and(|at| now.saturating_sub(at) < CHECKPOINT_MS) {
            return;
        }
        if self.checkpointer.is_none() && self.procs.iter().any(|p| p.booted) {
            self.checkpointer = rusqlite::Connection::open_with_flags(
                self.layout.db(),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .ok()
            .filter(|conn| conn.busy_timeout(std::time::Duration::ZERO).is_ok());
        }
        if let Some(conn) = &self.checkpointer {
            self.last_checkpoint_ms = Some(now);
            let mode = if size > WAL_TRUNCATE_BYTES { "TRUNCATE" } else { "PASSIVE" };
            // Busy (a writer or reader in the way) is fine: the next checkpoint tries again.
            let _ = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()));
        }
    }

    /// Stop the storm: resume stopped writers, raise the stop file, wait for every exit.
    fn stop(&mut self) -> SoakResult<()> {
        for p in &mut self.procs {
            if p.stopped.take().is_some() {
                Self::signal(p, Signal::SIGCONT);
            }
        }
        File::create(self.layout.stop()).map_err(SoakError::io("cannot create the stop file"))?;
        let deadline = Stopwatch::start();
        while !self.procs.is_empty() && deadline.elapsed_ms() < self.opts.exit_deadline_ms {
            self.observe()?;
            self.reap()?;
            self.wal();
            sleep_ms(20);
        }
        self.observe()?;
        for mut p in std::mem::take(&mut self.procs) {
            p.rss_kib = p.rss_kib.max(vm_hwm_kib(p.child.id()));
            Self::signal(&mut p, Signal::SIGKILL);
            let status = p.child.wait().map_err(SoakError::io("cannot reap a hung writer"))?;
            let account = Self::account(&mut p, status, false, true, &self.layout);
            self.accounts.push(account);
        }
        self.wal();
        Ok(())
    }
}

/// Refuse a `--keep` folder that exists and is not empty; create it otherwise.
pub fn prepare_keep(dir: &Path) -> SoakResult<()> {
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(SoakError::io(format!("cannot read {}", dir.display())))?;
        if entries.next().is_some() {
            return Err(SoakError::Usage(format!("--keep folder {} exists and is not empty", dir.display())));
        }
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(SoakError::io(format!("cannot create {}", dir.display())))
}

/// The storm's folder: `--keep`'s (prepared), or a temporary one in the binary's process root;
/// with a store adapter, its location inside.
fn storm_dir(opts: &SoakOptions) -> SoakResult<(Option<tempfile::TempDir>, PathBuf)> {
    let (temp, dir) = match &opts.keep {
        Some(dir) => {
            prepare_keep(dir)?;
            (None, dir.clone())
        }
        None => {
            let temp = crate::proc::janitor::temp_dir("fencesim-soak-", false)
                .map_err(SoakError::io("cannot create a temporary folder"))?;
            let dir = temp.path().to_owned();
            (Some(temp), dir)
        }
    };
    adapter_location(&Layout::new(&dir), opts)?;
    Ok((temp, dir))
}

impl SoakMeta {
    /// The meta of a storm run with `opts`, whose writers ended as `accounts` say.
    fn of_storm(opts: &SoakOptions, start_mono_ns: u64, accounts: Vec<WriterAccount>) -> Self {
        SoakMeta {
            schema: META_SCHEMA.to_owned(),
            seed: opts.seed,
            ttl_ms: opts.ttl_ms,
            writers: opts.writers,
            defects: opts.defects.iter().map(|d| d.name().to_owned()).collect(),
            adapter: opts.adapter.as_ref().map(ToString::to_string),
            start_mono_ns,
            accounts,
        }
    }
}

impl Storm {
    /// One line of progress on a terminal, over the last.
    fn show_progress(&self) {
        eprint!(
            "\r\x1b[2K{:>5.1}s {}",
            self.clock.elapsed_ms() as f64 / 1000.0,
            progress(&self.opts.quorum, &self.activity)
        );
        let _ = std::io::stderr().flush();
    }

    /// A storm over `layout` with no writer spawned yet.
    fn new(layout: Layout, opts: &SoakOptions) -> Self {
        Storm {
            layout,
            rng: Stream::new(opts.seed).fork("referee/faults"),
            opts: opts.clone(),
            procs: Vec::new(),
            accounts: Vec::new(),
            activity: Activity::default(),
            max_grant: 0,
            spawned: 0,
            clock: Stopwatch::start(),
            checkpointer: None,
            wal_peak: 0,
            last_faults_ms: 0,
            last_checkpoint_ms: None,
        }
    }

    /// Storm tick by tick until the quorum is met, the cap is reached or a writer died on its own
    /// (a termination signal ends it as an error): whether it was capped, and when (ms of the
    /// storm) each of the quorum's floors was reached.
    fn until_done(&mut self, opts: &SoakOptions, signals: &Deferral) -> SoakResult<(bool, FloorTimes)> {
        let terminal = opts.progress && std::io::stderr().is_terminal();
        let cap_ms = opts.cap_s.saturating_mul(1000);
        let mut capped = false;
        let mut floor_ms: FloorTimes = opts.quorum.floors.iter().map(|(k, _)| (k.clone(), None)).collect();
        loop {
            if let Some(signal) = signals.pending() {
                return Err(SoakError::Interrupted(signal.as_str().to_owned()));
            }
            self.observe()?;
            self.reap()?;
            self.wal();
            let now = self.clock.elapsed_ms();
            for ((name, floor), (_, at)) in opts.quorum.floors.iter().zip(floor_ms.iter_mut()) {
                if at.is_none() && self.activity.get(name) >= *floor {
                    *at = Some(now);
                }
            }
            if opts.quorum.met(&self.activity) {
                break;
            }
            if self.clock.elapsed_ms() >= cap_ms {
                capped = true;
                break;
            }
            // A writer that died on its own fails the soak; stop early instead of storming on.
            if self.accounts.iter().any(|a| !a.accounted()) {
                break;
            }
            self.faults()?;
            if terminal {
                self.show_progress();
            }
            sleep_ms(TICK_MS);
        }
        if terminal {
            eprintln!();
        }
        Ok((capped, floor_ms))
    }
}

/// Run one storm and judge it.
/// A store adapter's location, the folder its writers share (none for fencesim's own store).
fn adapter_location(layout: &Layout, opts: &SoakOptions) -> SoakResult<()> {
    if opts.adapter.is_none() {
        return Ok(());
    }
    let location = layout.adapter_dir();
    std::fs::create_dir(&location).map_err(SoakError::io(format!("cannot create {}", location.display())))
}

/// The end of a storm whose every process is gone: record the final state of a store adapter
/// (read through the adapter `--store` named) and the referee's record, seal the folder as it
/// stands, and judge it (as `soak-check` judges it later) once it verifies.
fn record_seal_and_judge(
    layout: &Layout,
    opts: &SoakOptions,
    start_mono_ns: u64,
    accounts: Vec<WriterAccount>,
) -> SoakResult<(SoakMeta, Judgement)> {
    if let Some(spec) = &opts.adapter {
        super::judge::record_final_state(layout, spec, opts.ttl_ms)?;
    }
    let meta = SoakMeta::of_storm(opts, start_mono_ns, accounts);
    super::write_atomic(&layout.meta(), &serde_json::to_vec_pretty(&meta).map_err(SoakError::json("soak meta"))?)?;
    super::seal::seal(&layout.dir, super::seal::Level::Store)?;
    let (judgement, _rows) = judge(layout, &meta)?;
    Ok((meta, judgement))
}

pub fn run(opts: SoakOptions) -> SoakResult<SoakOutcome> {
    opts.validate()?;
    // A termination signal is an event of the storm's loop instead of the end of the referee
    // mid-storm: the loop stops, the writers and the folder go with their drops, and the
    // deferral's drop ends the process with 128 + the signal.
    let signals = Deferral::start();

    let (temp, dir) = storm_dir(&opts)?;
    let layout = Layout::new(&dir);
    let start_mono_ns = mono_ns();
    let mut storm = Storm::new(layout.clone(), &opts);
    // Every first-generation writer opens the fresh file at the same instant; a store adapter's
    // writers start their adapter processes first, and are given the time for it.
    let adapter_start = if opts.adapter.is_some() { ADAPTER_START_MS } else { 0 };
    let start_at = unix_ms() + 150 + 20 * i64::try_from(opts.writers).unwrap_or(0) + adapter_start;
    for index in 0..opts.writers {
        storm.spawn(index, 0, Some(start_at), false)?;
    }
    let (capped, floor_ms) = storm.until_done(&opts, &signals)?;
    let storm_ms = storm.clock.elapsed_ms();
    storm.stop()?;
    storm.checkpointer = None;
    let (meta, judgement) = record_seal_and_judge(&layout, &opts, start_mono_ns, storm.accounts.clone())?;
    let met = opts.quorum.met(&storm.activity);
    let outcome = SoakOutcome {
        short: opts.quorum.short(&storm.activity),
        activity: storm.activity.clone(),
        met,
        storm_ms,
        floor_ms,
        capped,
        wal_peak_bytes: storm.wal_peak,
        referee_rss_kib: vm_hwm_kib(0),
        processes: storm.spawned + 1 + usize::from(crate::proc::janitor::watched(&dir)),
        meta,
        judgement,
        kept: opts.keep.clone(),
    };
    drop(storm);
    drop(temp);
    Ok(outcome)
}
