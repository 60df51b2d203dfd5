//! The kill-point suite (contracts 5.13): crash a run at exactly one durable write, before it,
//! inside it (between its statements: the store's `Statement` fault point) or after it, then
//! resume it from a second engine instance over its own connection to the same
//! database, and check the documented recovery semantics: what each side paid, the recovered
//! value, contiguous seqs, exactly one `run_settle` with status ok, meta ok, a consistent audit,
//! and that the crash residue never has meta ahead of the journal.
//!
//! Two sets of points: the reference's ten-row table (matched by write kind and occurrence, with
//! its exact counts), and every durable write of the `happy` and `limit` workflows by index.
//! Each point runs in its own madsim runtime, so a point's result is deterministic.
//!
//! "Inside" is the store's first `Statement` fault point of the write: its transaction rolls
//! back. The referee resumes over its own connection, retrying while the dead child's lease
//! lingers. Beyond the checks above, a crash re-pays at most one call and re-runs at most one tool
//! (an unstamped `limit` is documented to rerun whole). The child's crash trigger ([`Trigger`]),
//! the referee ([`referee`], generic over the `Env`) and the verdict ([`judge`]) are shared with
//! the real suite (`fencesim-real`'s `killpoints`); every check reports the oracle's `Violation`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fencesim_engine::audit::{self, AuditVerdict};
use fencesim_engine::entries::{self, kind, status};
use fencesim_engine::{
    Engine, EngineDefects, EngineError, EngineOptions, Env, Fault, Ledger, Outcome, Paid, Phase, Point, RunOptions,
    Site, Workflow, Write,
};
use fencesim_oracle::{Checker, Violation};
use fencesim_store::{FaultAction, FaultPoint, JournalEntry, RunId, RunStatus, Store, StoreDefects, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::env::SimEnv;
use crate::stores::{Db, DbKind};

/// The crashing child's ttl: short, like the reference's worker ttl (contracts 5.13).
pub const CHILD_TTL_MS: u32 = 2_000;
/// The referee's ttl: the store default.
pub const REFEREE_TTL_MS: u32 = 60_000;
/// How long the referee keeps retrying a resume refused by the dead child's lease.
pub const RESUME_DEADLINE_MS: u64 = 15_000;

/// The reference's write matchers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matcher {
    /// An `agent` entry with status `running`.
    Running,
    /// An `agent` entry with a `ref` and status `ok`.
    OkTerminal,
    /// An `agent` entry with a `ref` and status `limit`.
    LimitTerminal,
    /// A `run_settle` decision.
    Settle,
    /// A `put_meta` whose status is not `running`.
    Meta,
}

impl Matcher {
    pub const ALL: [Matcher; 5] =
        [Matcher::Running, Matcher::OkTerminal, Matcher::LimitTerminal, Matcher::Settle, Matcher::Meta];

    pub fn name(self) -> &'static str {
        match self {
            Matcher::Running => "running",
            Matcher::OkTerminal => "ok-terminal",
            Matcher::LimitTerminal => "limit-terminal",
            Matcher::Settle => "settle",
            Matcher::Meta => "meta",
        }
    }

    fn matches(self, write: &Write<'_>) -> bool {
        let agent = |e: &JournalEntry, s: &str, terminal: bool| {
            e.kind == kind::AGENT && e.status == s && e.ref_seq.is_some() == terminal
        };
        match (self, write) {
            (Matcher::Running, Write::Append(e)) => agent(e, status::RUNNING, false),
            (Matcher::OkTerminal, Write::Append(e)) => agent(e, status::OK, true),
            (Matcher::LimitTerminal, Write::Append(e)) => agent(e, status::LIMIT, true),
            (Matcher::Settle, Write::Append(e)) => entries::as_settle(e).is_some(),
            (Matcher::Meta, Write::PutMeta(m)) => m.status != RunStatus::Running,
            _ => false,
        }
    }
}

/// Where around its target write a point crashes: at the engine's fault point before it, inside
/// the store call (at its first `Statement` fault point: the statement ran, the transaction is not
/// committed), or at the engine's fault point after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillPhase {
    Before,
    Inside,
    After,
}

impl KillPhase {
    pub const ALL: [KillPhase; 3] = [KillPhase::Before, KillPhase::Inside, KillPhase::After];

    pub fn as_str(self) -> &'static str {
        match self {
            KillPhase::Before => "before",
            KillPhase::Inside => "inside",
            KillPhase::After => "after",
        }
    }

    pub fn parse(text: &str) -> Result<KillPhase, String> {
        KillPhase::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| format!("invalid phase '{text}' (valid: before, inside, after)"))
    }
}

/// Which write a point crashes at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The `occurrence`-th write (from 1) the matcher accepts.
    Matched { matcher: Matcher, occurrence: u32 },
    /// The segment's write number `index` (from 0).
    Index(u32),
}

/// The documented counts of a table row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Expected {
    pub child: (u32, u32),
    pub resume: (u32, u32),
    pub limit_terminals: usize,
}

#[derive(Clone, Debug)]
pub struct KillPoint {
    pub id: String,
    pub workflow: Workflow,
    pub target: Target,
    pub phase: KillPhase,
    pub expected: Option<Expected>,
}

/// The ten scenarios of contracts 5.13 with their documented counts.
pub fn table() -> Vec<KillPoint> {
    use KillPhase::*;
    use Matcher::*;
    let row = |id: &str, workflow: Workflow, matcher, occurrence, phase, child, resume, limit_terminals| KillPoint {
        id: id.to_owned(),
        workflow,
        target: Target::Matched { matcher, occurrence },
        phase,
        expected: Some(Expected { child, resume, limit_terminals }),
    };
    let (happy, limit) = (Workflow::happy(), Workflow::limit());
    let table = vec![
        row("happy-running-before", happy.clone(), Running, 2, Before, (1, 0), (1, 0), 0),
        row("happy-running-after", happy.clone(), Running, 2, After, (1, 0), (1, 0), 0),
        row("happy-ok-terminal-before", happy.clone(), OkTerminal, 2, Before, (2, 0), (1, 0), 0),
        row("happy-ok-terminal-after", happy.clone(), OkTerminal, 2, After, (2, 0), (0, 0), 0),
        row("happy-settle-before", happy.clone(), Settle, 1, Before, (2, 0), (0, 0), 0),
        row("happy-settle-after", happy.clone(), Settle, 1, After, (2, 0), (0, 0), 0),
        row("happy-meta-before", happy.clone(), Meta, 1, Before, (2, 0), (0, 0), 0),
        row("happy-meta-after", happy, Meta, 1, After, (2, 0), (0, 0), 0),
        row("limit-limit-terminal-before", limit.clone(), LimitTerminal, 1, Before, (3, 2), (1, 0), 1),
        row("limit-limit-terminal-after", limit, LimitTerminal, 1, After, (3, 2), (3, 2), 2),
    ];
    // A point is chosen and reported by its id: no two rows share one.
    let ids: std::collections::BTreeSet<&str> = table.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), table.len(), "two kill points share an id");
    table
}

/// Every durable write of a clean run of `workflow`, in order, crashed before, inside and after.
pub fn enumerate(workflow: &Workflow, config: &Config) -> Result<Vec<KillPoint>, KillPointError> {
    let writes = clean_writes(workflow, config)?;
    let points: Vec<KillPoint> = (0..writes.len())
        .flat_map(|i| {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            KillPhase::ALL.map(|phase| KillPoint {
                id: format!("{}-w{index}-{}", workflow.name, phase.as_str()),
                workflow: workflow.clone(),
                target: Target::Index(index),
                phase,
                expected: None,
            })
        })
        .collect();
    // Every durable write of the clean run, in every phase: the suite's coverage promise.
    assert_eq!(points.len(), writes.len() * KillPhase::ALL.len(), "a write or a phase without its kill point");
    Ok(points)
}

/// Why the harness could not judge a kill point: its own failure, never a violation. Each
/// message names its cause and none is a `source`, so a printed chain names each cause once.
#[derive(Debug, thiserror::Error)]
pub enum KillPointError {
    #[error("cannot create the database: {0}")]
    Database(std::io::Error),
    /// A store call of the harness's own (opening, the referee's reads) failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The clean run a point is measured against did not finish.
    #[error("clean run failed: {0}")]
    CleanRun(EngineError),
}

/// How points run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Config {
    pub db: DbKind,
    pub engine_defects: EngineDefects,
    pub store_defects: StoreDefects,
}

/// One point's result.
#[derive(Clone, Debug, Serialize)]
pub struct PointReport {
    pub id: String,
    pub workflow: String,
    /// The crashed write's index in the child's segment.
    pub index: Option<u32>,
    /// What the crashed write was.
    pub write: String,
    pub phase: &'static str,
    pub child: (u32, u32),
    pub resume: (u32, u32),
    /// Paid calls beyond a clean run's.
    pub repays: u32,
    pub limit_terminals: usize,
    /// Reported as their printed lines (`<checker>: <why>`).
    #[serde(serialize_with = "fencesim_oracle::serialize_lines")]
    pub violations: Vec<Violation>,
}

impl PointReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The value a clean run of each kill-point workflow recovers.
fn clean_value(workflow: &Workflow) -> Value {
    match workflow.name.as_str() {
        "limit" => serde_json::json!({ "agentStatus": "limit" }),
        _ => serde_json::json!({ "one": "alpha", "two": "beta" }),
    }
}

fn runtime() -> madsim::runtime::Runtime {
    madsim::runtime::Runtime::with_seed_and_config(0, madsim::Config::default())
}

fn open(db: &Db, ttl_ms: u32, config: &Config) -> Result<(Rc<dyn Store>, SimEnv), KillPointError> {
    Ok(db.node(ttl_ms, config.store_defects)?)
}

fn engine<E: Env>(store: Rc<dyn Store>, env: E, ledger: Ledger, owner: &str, config: &Config) -> Engine<E> {
    let opts = EngineOptions { owner: owner.into(), defects: config.engine_defects, ..EngineOptions::default() };
    // The options are the defaults with a valid owner; construction cannot fail on them.
    Engine::new(store, env, ledger, opts).unwrap_or_else(|e| panic!("kill-point engine options are valid: {e}"))
}

/// The writes of a clean run, described, and what it paid.
fn clean_writes(workflow: &Workflow, config: &Config) -> Result<Vec<String>, KillPointError> {
    clean_run(workflow, config).map(|(writes, _)| writes)
}

pub(crate) fn clean_run(workflow: &Workflow, config: &Config) -> Result<(Vec<String>, Paid), KillPointError> {
    let db = Db::new(config.db).map_err(KillPointError::Database)?;
    runtime().block_on(async {
        let (store, env) = open(&db, CHILD_TTL_MS, config)?;
        let writes = Rc::new(RefCell::new(Vec::new()));
        let seen = writes.clone();
        env.on_fault(move |point| {
            if let Site::Write { phase: Phase::Before, write, .. } = point.site {
                seen.borrow_mut().push(write.to_string());
            }
            Fault::Continue
        });
        let ledger = Ledger::new();
        let run = RunId::new("kp-clean");
        let engine = engine(store, env, ledger.clone(), "kp-child", config);
        engine.run(&run, workflow, RunOptions::default()).await.map_err(KillPointError::CleanRun)?;
        let paid = ledger.run_total(&run);
        Ok((writes.take(), paid))
    })
}

/// What a clean run of each workflow paid, measured once per workflow (by a simulated run: the
/// engine's writes and payments do not depend on its `Env`).
#[derive(Debug, Default)]
pub struct CleanBills(Vec<(String, Paid)>);

impl CleanBills {
    pub fn of(&mut self, workflow: &Workflow, config: &Config) -> Result<Paid, KillPointError> {
        if let Some((_, paid)) = self.0.iter().find(|(name, _)| *name == workflow.name) {
            return Ok(*paid);
        }
        let (_, paid) = clean_run(workflow, config)?;
        self.0.push((workflow.name.clone(), paid));
        Ok(paid)
    }
}

/// Run kill points in order; each workflow's clean run is measured once.
pub fn run_points(points: &[KillPoint], config: &Config) -> Result<Vec<PointReport>, KillPointError> {
    let mut clean = CleanBills::default();
    points.iter().map(|point| run_point(point, config, clean.of(&point.workflow, config)?)).collect()
}

/// Run one kill point against what a clean run of its workflow paid.
pub fn run_point(point: &KillPoint, config: &Config, clean: Paid) -> Result<PointReport, KillPointError> {
    let db = Db::new(config.db).map_err(KillPointError::Database)?;
    let run = RunId::new(format!("kp-{}", point.id));
    runtime().block_on(async {
        let mut violations = Vec::new();
        // The child: crash at the target write.
        let (child_store, child_env) = open(&db, CHILD_TTL_MS, config)?;
        let trigger = Rc::new(RefCell::new(Trigger::new(point.target, point.phase)));
        {
            let trigger = trigger.clone();
            child_env.on_fault(move |p| trigger.borrow_mut().decide(p));
        }
        let cut = Arc::new(AtomicBool::new(false));
        if point.phase == KillPhase::Inside {
            install_cut(&*child_store, trigger.borrow().armed.clone(), cut.clone());
        }
        let child_ledger = Ledger::new();
        // The referee's connection opens first, so a memdb outlives the child's.
        let (referee_store, referee_env) = open(&db, REFEREE_TTL_MS, config)?;
        let child = engine(child_store, child_env, child_ledger.clone(), "kp-child", config);
        match child.run(&run, &point.workflow, RunOptions::default()).await {
            Err(EngineError::Crashed) => {}
            // Cut inside its target write, the child saw the call fail and stopped before it
            // reached another fault point: it died there all the same.
            Err(_) if cut.load(Ordering::SeqCst) => {}
            Ok(_) => violations.push(finding(
                Checker::KillPointReached,
                "the child ran to completion: the kill point was never reached",
            )),
            Err(e) => violations
                .push(finding(Checker::KillPointReached, format!("the child failed before its kill point: {e}"))),
        }
        drop(child);
        let (index, write) = trigger.borrow_mut().killed.take().unzip();
        let retry_ms = u64::from(CHILD_TTL_MS.div_ceil(3).max(50));
        let referee = referee(referee_store, referee_env, &run, &point.workflow, config, retry_ms).await?;
        let child_paid = child_ledger.run_total(&run);
        Ok(judge(point, clean, Crashed { index, write, paid: child_paid, violations }, referee))
    })
}

/// The simulated child's store hook for an `Inside` point: the first `Statement` fault point after
/// the trigger armed it cuts the call (its transaction rolls back, as the process's death would
/// leave it), and every fault point after that cuts too: a dead child writes nothing more.
fn install_cut(store: &dyn Store, armed: Arc<AtomicBool>, cut: Arc<AtomicBool>) {
    store.set_fault_hook(Some(Box::new(move |site| {
        if cut.load(Ordering::SeqCst) || (site.point == FaultPoint::Statement && armed.swap(false, Ordering::SeqCst)) {
            cut.store(true, Ordering::SeqCst);
            FaultAction::Crash
        } else {
            FaultAction::Resume
        }
    })));
}

/// Decides, write by write, whether the child dies here: at the `Before` point of the target
/// write, inside it (arming the store's hook), or at the `After` point that follows it. Shared by
/// the simulated and the real child.
#[derive(Clone, Debug)]
pub struct Trigger {
    target: Target,
    phase: KillPhase,
    matched: u32,
    /// The target write, once reached: its index and what it was.
    pub killed: Option<(u32, String)>,
    /// For [`KillPhase::Inside`], raised once the target write is reached: the child dies at the
    /// store's next `Statement` fault point (the child's store hook reads it).
    pub armed: Arc<AtomicBool>,
}

impl Trigger {
    pub fn new(target: Target, phase: KillPhase) -> Self {
        Self { target, phase, matched: 0, killed: None, armed: Arc::default() }
    }

    /// `Crash` where the child must die; records the target write when it is reached.
    pub fn decide(&mut self, point: &Point<'_>) -> Fault {
        let Site::Write { index, phase, write } = point.site else { return Fault::Continue };
        if self.killed.is_some() {
            return match self.phase {
                KillPhase::After if phase == Phase::After => Fault::Crash,
                // Cut inside the target write, the child is dead: nothing after it goes ahead.
                KillPhase::Inside => Fault::Crash,
                KillPhase::Before | KillPhase::After => Fault::Continue,
            };
        }
        let hit = phase == Phase::Before
            && match self.target {
                Target::Index(i) => i == index,
                Target::Matched { matcher, occurrence } => {
                    matcher.matches(&write) && {
                        self.matched += 1;
                        self.matched == occurrence
                    }
                }
            };
        if !hit {
            return Fault::Continue;
        }
        self.killed = Some((index, write.to_string()));
        self.armed.store(self.phase == KillPhase::Inside, Ordering::SeqCst);
        if self.phase == KillPhase::Before { Fault::Crash } else { Fault::Continue }
    }
}

/// What the crashed child left behind: the write it died at, what it paid, and anything wrong
/// with how it died (it finished, or failed before its point).
#[derive(Clone, Debug, Default)]
pub struct Crashed {
    pub index: Option<u32>,
    pub write: Option<String>,
    pub paid: Paid,
    pub violations: Vec<Violation>,
}

/// What the referee saw: the crash residue, its resume and the store after it. Shared by the
/// simulated suite and the real one (`killpoints_real.rs`), which runs it in a second process and
/// ships it back as JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefereeReport {
    /// Calls and tools the resume paid.
    pub resume: (u32, u32),
    /// The residue had an unstamped `limit` terminal (documented to rerun whole).
    pub unstamped_limit: bool,
    /// `limit` terminals in the journal after the resume.
    pub limit_terminals: usize,
    pub violations: Vec<Violation>,
}

/// Resume `run` with `referee`, retrying every `retry_ms` of `env` time while the dead child's
/// lease lingers, up to [`RESUME_DEADLINE_MS`]; the last attempt's outcome.
async fn resume_patiently<E: Env + Clone>(
    referee: &Engine<E>,
    env: &E,
    run: &RunId,
    workflow: &Workflow,
    retry_ms: u64,
) -> Result<Outcome, EngineError> {
    let mut waited = 0;
    loop {
        match referee.resume(run, workflow, RunOptions::default()).await {
            Err(e) if e.is_lease_held() && waited < RESUME_DEADLINE_MS => {
                env.sleep(retry_ms).await;
                waited += retry_ms;
            }
            other => return other,
        }
    }
}

/// The referee: check the crash residue (meta never ahead of the journal), resume the run over
/// `store` (retrying every `retry_ms` while the dead child's lease lingers, up to
/// [`RESUME_DEADLINE_MS`] of `env` time), then check the outcome, the journal, the meta and the
/// audit. Works on any `Env`: madsim's virtual time or the real clock.
pub async fn referee<E: Env + Clone>(
    store: Rc<dyn Store>,
    env: E,
    run: &RunId,
    workflow: &Workflow,
    config: &Config,
    retry_ms: u64,
) -> Result<RefereeReport, KillPointError> {
    let mut violations = Vec::new();
    // The residue: meta is never ahead of the journal (contracts 3.6 ordering invariant).
    let residue = audit::audit_run(store.as_ref(), run)?;
    if let Some(ahead) = residue.meta_ahead() {
        violations.push(finding(Checker::MetaNotAhead, format!("after the crash: {ahead}")));
    }
    let before = store.load(run)?;
    let unstamped_limit = before.iter().any(|e| e.kind == kind::AGENT && entries::is_unstamped(&before, e));

    let ledger = Ledger::new();
    let referee = engine(store.clone(), env.clone(), ledger.clone(), "kp-referee", config);
    let outcome = resume_patiently(&referee, &env, run, workflow, retry_ms).await;
    match &outcome {
        Ok(o) if o.status != RunStatus::Ok => {
            violations.push(finding(Checker::ReferenceModel, format!("resume settled {}, not ok", o.status)));
        }
        Ok(o) if o.value != clean_value(workflow) => {
            let why = format!("resume recovered {} instead of {}", o.value, clean_value(workflow));
            violations.push(finding(Checker::ReferenceModel, why));
        }
        Ok(_) => {}
        Err(e) => violations.push(finding(Checker::Liveness, format!("resume failed: {e}"))),
    }

    let journal = store.load(run)?;
    check_journal(&journal, &mut violations);
    let meta = store.get_meta(run)?;
    if meta.as_ref().map(|m| m.status) != Some(RunStatus::Ok) {
        let status = meta.map_or("missing".into(), |m| m.status.to_string());
        violations.push(finding(Checker::Liveness, format!("meta status is {status}, not ok")));
    }
    violations.extend(audit_consistent(&audit::audit_run(store.as_ref(), run)?, "after resume"));
    let limit_terminals =
        journal.iter().filter(|e| e.kind == kind::AGENT && e.status == status::LIMIT && e.ref_seq.is_some()).count();
    let paid = ledger.run_total(run);
    Ok(RefereeReport { resume: (paid.calls, paid.tools), unstamped_limit, limit_terminals, violations })
}

/// Judge one point from what the child and the referee saw: the re-pay bound against a clean
/// run's bill, and a table row's documented counts.
pub fn judge(point: &KillPoint, clean: Paid, child: Crashed, referee: RefereeReport) -> PointReport {
    let mut violations = child.violations;
    violations.extend(referee.violations);
    let resume_paid = Paid { calls: referee.resume.0, tools: referee.resume.1 };
    let total = Paid { calls: child.paid.calls + resume_paid.calls, tools: child.paid.tools + resume_paid.tools };
    let repays = total.calls.saturating_sub(clean.calls);
    violations.extend(repay_violations(total, clean, referee.unstamped_limit));
    if let Some(expected) = point.expected {
        let observed = Expected {
            child: (child.paid.calls, child.paid.tools),
            resume: referee.resume,
            limit_terminals: referee.limit_terminals,
        };
        if observed != expected {
            let why = format!("counts {observed:?} differ from the documented {expected:?}");
            violations.push(finding(Checker::DocumentedCounts, why));
        }
    }
    PointReport {
        id: point.id.clone(),
        workflow: point.workflow.name.clone(),
        index: child.index,
        write: child.write.unwrap_or_else(|| "(not reached)".into()),
        phase: point.phase.as_str(),
        child: (child.paid.calls, child.paid.tools),
        resume: referee.resume,
        repays,
        limit_terminals: referee.limit_terminals,
        violations,
    }
}

/// The re-pay bound: one crash re-pays at most the call and the tool in flight at it (a tool's
/// at-least-once window runs to the next checkpoint save). An unstamped limit terminal in a
/// never-settled run is documented to rerun whole (contracts 5.13).
fn repay_violations(total: Paid, clean: Paid, unstamped_limit: bool) -> Vec<Violation> {
    let allowed = if unstamped_limit { clean } else { Paid { calls: 1, tools: 1 } };
    let extra = Paid { calls: total.calls.saturating_sub(clean.calls), tools: total.tools.saturating_sub(clean.tools) };
    let mut violations = Vec::new();
    if extra.calls > allowed.calls {
        let why = format!("{} paid calls beyond a clean run's (at most {} for this crash)", extra.calls, allowed.calls);
        violations.push(finding(Checker::RepayBound, why));
    }
    if extra.tools > allowed.tools {
        let why = format!("{} tool runs beyond a clean run's (at most {} for this crash)", extra.tools, allowed.tools);
        violations.push(finding(Checker::RepayBound, why));
    }
    violations
}

/// Contiguous seqs from the first (a kill point's world fails no append, so no hole is excused),
/// and exactly one `run_settle`, with status ok and nothing after it.
fn check_journal(journal: &[JournalEntry], violations: &mut Vec<Violation>) {
    if let Some((expected, at)) = fencesim_oracle::contiguous::first_gap(journal, |_| false) {
        let why = format!("journal seqs not contiguous: seq {} where seq {expected} belongs", journal[at].seq);
        violations.push(finding(Checker::SeqContiguous, why));
    }
    let settles: Vec<_> = journal.iter().filter_map(entries::as_settle).collect();
    match settles.as_slice() {
        [one] if one.run_status == RunStatus::Ok => {
            if let Some(late) = journal.iter().find(|e| e.seq > one.seq) {
                let why = format!("entry seq {} follows the run_settle at seq {}", late.seq, one.seq);
                violations.push(finding(Checker::SilentReplay, why));
            }
        }
        [one] => {
            violations.push(finding(Checker::ReferenceModel, format!("the run_settle says {}, not ok", one.run_status)))
        }
        many => {
            let why = format!("{} run_settle entries, not exactly one", many.len());
            violations.push(finding(Checker::OneSettlePerSegment, why));
        }
    }
}

/// `audit-consistent`: the audit's table finds the run consistent `when` (after a kill point's
/// resume, after the engine soak's repair); the finding otherwise.
pub fn audit_consistent(audit: &audit::RunAudit, when: &str) -> Option<Violation> {
    (audit.verdict != AuditVerdict::Consistent)
        .then(|| finding(Checker::AuditConsistent, format!("audit {when}: {audit}")))
}

/// A kill point's finding: a violation of `checker` that names no history row, printed
/// `<checker>: <why>` as every judge prints one.
pub fn finding(checker: Checker, why: impl std::fmt::Display) -> Violation {
    Violation::of(checker, why)
}

#[cfg(test)]
mod tests {
    use fencesim_store::Seq;

    use super::*;

    fn journal(seqs_and_settles: &[(i64, Option<RunStatus>)]) -> Vec<JournalEntry> {
        seqs_and_settles
            .iter()
            .map(|&(seq, settle)| match settle {
                Some(status) => entries::run_settle(Seq(seq), status, 1),
                None => entries::running(Seq(seq), kind::AGENT, "k"),
            })
            .collect()
    }

    fn violations(j: &[(i64, Option<RunStatus>)]) -> Vec<String> {
        let mut v = Vec::new();
        check_journal(&journal(j), &mut v);
        v.iter().map(ToString::to_string).collect()
    }

    /// `audit-consistent` fails on a run the audit's table does not find consistent: a meta left
    /// `running` over a journal whose last settle is `ok` (meta behind, R5).
    #[test]
    fn audit_consistent_fails_on_a_meta_behind_its_journal() {
        let run = RunId::new("kp");
        let settled = journal(&[(1, None), (2, Some(RunStatus::Ok))]);
        let meta = fencesim_store::RunMeta::new(run.clone(), RunStatus::Running);
        let behind = audit::audit_entries(&run, Some(&meta), &settled);
        let found = audit_consistent(&behind, "after resume").expect("meta behind is not consistent");
        assert_eq!((found.checker, found.row, found.cause), (Checker::AuditConsistent, None, None));
        assert!(found.to_string().starts_with("audit-consistent: audit after resume: kp meta-behind"), "{found}");
        let done = fencesim_store::RunMeta::new(run.clone(), RunStatus::Ok);
        assert_eq!(audit_consistent(&audit::audit_entries(&run, Some(&done), &settled), "after resume"), None);
    }

    #[test]
    fn the_journal_checks_fail_on_tampered_journals() {
        let ok = Some(RunStatus::Ok);
        assert_eq!(violations(&[(1, None), (2, ok)]), Vec::<String>::new());
        assert!(violations(&[(1, None), (3, ok)])[0].contains("not contiguous"));
        assert!(violations(&[(1, ok), (2, ok)])[0].contains("2 run_settle"));
        assert!(violations(&[(1, None)])[0].contains("0 run_settle"));
        assert!(violations(&[(1, ok), (2, None)])[0].contains("follows the run_settle"));
        assert!(violations(&[(1, Some(RunStatus::Cancelled))])[0].contains("not ok"));
    }

    #[test]
    fn the_repay_bound_fails_past_one_call_or_one_tool() {
        let clean = Paid { calls: 3, tools: 2 };
        assert!(repay_violations(Paid { calls: 4, tools: 3 }, clean, false).is_empty());
        assert_eq!(repay_violations(Paid { calls: 5, tools: 2 }, clean, false).len(), 1);
        assert_eq!(repay_violations(Paid { calls: 3, tools: 4 }, clean, false).len(), 1);
        assert!(repay_violations(Paid { calls: 6, tools: 4 }, clean, true).is_empty());
        assert_eq!(repay_violations(Paid { calls: 7, tools: 4 }, clean, true).len(), 1);
    }

    /// Each message names its cause once: a cause that were also a `source` would be printed
    /// twice by the CLI's chain (`{:#}`).
    #[test]
    fn an_error_names_its_cause_once() {
        use std::error::Error as _;
        let database = KillPointError::Database(std::io::Error::other("no space"));
        assert_eq!(database.to_string(), "cannot create the database: no space");
        let clean = KillPointError::CleanRun(EngineError::Config("bad".into()));
        let store = KillPointError::from(StoreError::Config("no".into()));
        for e in [database, clean, store] {
            assert!(e.source().is_none(), "{e:?}");
        }
    }
}
