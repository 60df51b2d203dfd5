//! The engine's fencing promises under the interleavings that broke the reference (contracts 3,
//! section 6), each as a scenario that returns its violations: empty for the correct engine on
//! memdb and on a WAL file, non-empty with the planted defect it targets. The catalogue test at
//! the end binds every engine defect to a detector in a table and runs it, clean and planted: a
//! scenario here, the kill points' residue check, a probe, or a shipped regression plan.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::common::{Delay, Node, TTL, delay_once, node, sim, sleep_ms, world};
use fencesim_engine::audit::{self, AuditVerdict};
use fencesim_engine::checkpoint::Checkpoint;
use fencesim_engine::entries::{self, status};
use fencesim_engine::{
    CancelToken, EngineDefect, EngineDefects, EngineError, Fault, Phase, Point, RunOptions, SettleStage, Site,
    Workflow, Write,
};
use fencesim_sim::env::SimEnv;
use fencesim_sim::stores::DbKind;
use fencesim_store::{Op, RunId, RunStatus, Seq, Store, StoreError};

type Violations = Vec<String>;

/// Stall the node (renew loop included) for 3 ttl the first time `when` holds.
fn stall_once(env: &SimEnv, when: impl Fn(&Point<'_>) -> bool + 'static) {
    delay_once(env, Delay::Node(u64::from(3 * TTL)), when);
}

fn write_before(point: &Point<'_>, pick: impl Fn(&Write<'_>) -> bool) -> bool {
    matches!(point.site, Site::Write { phase: Phase::Before, write, .. } if pick(&write))
}

fn is_settle(write: &Write<'_>) -> bool {
    matches!(write, Write::Append(e) if entries::as_settle(e).is_some())
}

fn settles(store: &dyn Store, run: &RunId) -> usize {
    store.load(run).expect("load").iter().filter_map(entries::as_settle).count()
}

fn check_consistent(store: &dyn Store, run: &RunId, v: &mut Violations) {
    let audit = audit::audit_run(store, run).expect("audit");
    if audit.verdict != AuditVerdict::Consistent {
        v.push(format!("audit: {audit}"));
    }
}

/// Starts `run` on node `a` in the background; the handle yields its result.
fn spawn_run(
    a: &Node,
    run: &RunId,
    workflow: Workflow,
    opts: RunOptions,
) -> madsim::task::JoinHandle<Result<fencesim_engine::Outcome, EngineError>> {
    let (engine, run) = (a.engine.clone(), run.clone());
    madsim::task::spawn_local(async move { engine.run(&run, &workflow, opts).await })
}

/// Two nodes over one world: `a` runs the workflow and stalls (3 ttl) the first time `when` holds;
/// past the ttl, `b` takes the run over and resumes it; then `a` wakes and finishes.
struct Takeover {
    a: Node,
    b: Node,
    run: RunId,
    stale: Result<fencesim_engine::Outcome, EngineError>,
    successor: Result<fencesim_engine::Outcome, EngineError>,
}

async fn takeover(
    db: &fencesim_sim::stores::Db,
    defects: EngineDefects,
    workflow: Workflow,
    when: impl Fn(&Point<'_>) -> bool + 'static,
) -> Takeover {
    let (a, b) = (node(db, "a", defects), node(db, "b", defects));
    let run = RunId::new("r");
    stall_once(&a.env, when);
    let stale = spawn_run(&a, &run, workflow.clone(), RunOptions::default());
    sleep_ms(u64::from(TTL) + 100).await;
    let successor = b.engine.resume(&run, &workflow, RunOptions::default()).await;
    let stale = stale.await.expect("task");
    Takeover { a, b, run, stale, successor }
}

/// D1: a holder stalled at its boot meta write past the ttl wakes after a successor settled the
/// run. Its stale meta write must be refused, leaving the successor's `{ok, segments 2}`.
fn stale_boot_meta(defects: EngineDefects, db: DbKind) -> Violations {
    let db = world(db);
    sim(|| async move {
        let mut v = Violations::new();
        let Takeover { a, b, run, stale, successor } =
            takeover(&db, defects, Workflow::happy(), |p| write_before(p, |w| matches!(w, Write::PutMeta(_)))).await;
        if !matches!(successor, Ok(ref o) if o.status == RunStatus::Ok) {
            v.push(format!("the successor did not settle ok: {successor:?}"));
        }
        if !matches!(stale, Err(EngineError::LeaseHeld(_))) {
            v.push(format!("the stale segment was not refused at its first write: {stale:?}"));
        }
        let meta = b.store.get_meta(&run).expect("meta");
        if meta.as_ref().map(|m| (m.status, m.segments)) != Some((RunStatus::Ok, 2)) {
            v.push(format!("meta regressed by the stale holder: {meta:?}"));
        }
        if a.ledger.run_total(&run).calls != 0 {
            v.push("the stale segment paid a call".into());
        }
        check_consistent(b.store.as_ref(), &run, &mut v);
        v
    })
}

/// D2: a holder stalled before its first checkpoint save wakes after a successor redispatched the
/// same running seq and saved later turns to the same ref. The blob must stay the successor's.
fn stale_checkpoint(defects: EngineDefects, db: DbKind) -> Violations {
    let db = world(db);
    sim(|| async move {
        let mut v = Violations::new();
        let Takeover { b, run, successor, .. } =
            takeover(&db, defects, Workflow::limit(), |p| write_before(p, |w| matches!(w, Write::PutBlob { .. })))
                .await;
        if !matches!(successor, Ok(ref o) if o.status == RunStatus::Ok) {
            v.push(format!("the successor did not settle ok: {successor:?}"));
        }
        let blob = b.store.get_blob(&entries::checkpoint_ref(&run, Seq(1))).expect("blob");
        let last = Checkpoint { turns: 3, tool_calls_used: 2 }.encode();
        if blob.as_deref() != Some(last.as_slice()) {
            v.push(format!(
                "checkpoint regressed: {:?} instead of the successor's last save",
                blob.as_deref().map(String::from_utf8_lossy)
            ));
        }
        v
    })
}

/// D12b: a holder stalled at its settle append wakes after a successor settled the run. It must
/// fail superseded, and the journal must hold the successor's settle only.
fn superseded_settle(defects: EngineDefects, db: DbKind) -> Violations {
    let db = world(db);
    sim(|| async move {
        let mut v = Violations::new();
        let Takeover { b, run, stale, successor, .. } =
            takeover(&db, defects, Workflow::happy(), |p| write_before(p, is_settle)).await;
        if !matches!(successor, Ok(ref o) if o.status == RunStatus::Ok && o.appended == 1) {
            v.push(format!("the successor did not settle ok with one append: {successor:?}"));
        }
        if !matches!(stale, Err(EngineError::Superseded { .. })) {
            v.push(format!("the superseded segment resolved as {stale:?}"));
        }
        if settles(b.store.as_ref(), &run) != 1 {
            v.push(format!("{} run_settle entries", settles(b.store.as_ref(), &run)));
        }
        if b.ledger.run_total(&run).calls != 0 {
            v.push("the successor paid a second call".into());
        }
        v
    })
}

/// D12a: an I/O failure of the settle append must fail the settlement and skip the meta write,
/// so meta never runs ahead of the journal; a resume then settles with zero calls.
fn failed_settle_append(defects: EngineDefects, db: DbKind) -> Violations {
    let db = world(db);
    sim(|| async move {
        let mut v = Violations::new();
        let (a, b) = (node(&db, "a", defects), node(&db, "b", defects));
        let run = RunId::new("r");
        a.env.on_fault(|p| {
            if write_before(p, is_settle) {
                Fault::Fail(StoreError::storage(Op::Append, "injected I/O error"))
            } else {
                Fault::Continue
            }
        });
        let first = a.engine.run(&run, &Workflow::happy(), RunOptions::default()).await;
        if !matches!(first, Err(EngineError::Settlement { stage: SettleStage::RunSettle, .. })) {
            v.push(format!("a failed settle append resolved as {first:?}"));
        }
        v.extend(audit::audit_run(a.store.as_ref(), &run).expect("audit").meta_ahead());
        let healed = b.engine.resume(&run, &Workflow::happy(), RunOptions::default()).await;
        if !matches!(healed, Ok(ref o) if o.status == RunStatus::Ok) || b.ledger.run_total(&run).calls != 0 {
            v.push(format!("resume did not re-settle for free: {healed:?}"));
        }
        v
    })
}

/// D14: a run cancelled while a call is in flight drains that dispatch's terminal before its
/// settle; nothing follows the settle.
fn cancel_mid_call(defects: EngineDefects, db: DbKind) -> Violations {
    let db = world(db);
    sim(|| async move {
        let mut v = Violations::new();
        let a = node(&db, "a", defects);
        let run = RunId::new("r");
        let cancel = CancelToken::new();
        let token = cancel.clone();
        a.env.on_fault(move |p| {
            if matches!(p.site, Site::Call { running: Seq(3), turn: 1 }) {
                token.cancel("host cancelled");
            }
            Fault::Continue
        });
        let opts = RunOptions { cancel: Some(cancel), ..RunOptions::default() };
        let outcome = a.engine.run(&run, &Workflow::happy(), opts).await;
        if !matches!(outcome, Ok(ref o) if o.status == RunStatus::Cancelled) {
            v.push(format!("the cancelled run settled as {outcome:?}"));
        }
        let journal = a.store.load(&run).expect("load");
        match entries::last_run_settle(&journal) {
            None => v.push("no run_settle".into()),
            Some(settle) => {
                if let Some(late) = journal.iter().find(|e| e.seq > settle.seq) {
                    v.push(format!(
                        "{}/{} at seq {} after the run_settle at seq {}",
                        late.kind, late.status, late.seq, settle.seq
                    ));
                }
            }
        }
        if !journal.iter().any(|e| e.ref_seq == Some(Seq(3)) && e.status == status::CANCELLED) {
            v.push("the in-flight dispatch has no cancelled terminal".into());
        }
        v
    })
}

/// D10: over a store without leases, a second segment of a live run in the same engine is
/// refused; otherwise it redispatches the in-flight call and pays it twice. The probe is the kill
/// matrix's detector too (a fenced world cannot reach this defect).
fn second_segment(defects: EngineDefects, _db: DbKind) -> Violations {
    fencesim_sim::probes::second_segment(defects).expect("the probe's set-up")
}

/// Contracts 3.7: a resume whose window between reading and acquiring sees another owner finish
/// the run must not act on its stale snapshot: own first, then read.
fn resume_window(defects: EngineDefects, db: DbKind) -> Violations {
    let db = world(db);
    sim(|| async move {
        let mut v = Violations::new();
        let (child, a, b) = (node(&db, "child", defects), node(&db, "a", defects), node(&db, "b", defects));
        let run = RunId::new("r");
        // A crash after step one's terminal, then the dead child's lease lapses.
        child.env.on_fault(|p| match p.site {
            Site::Write { phase: Phase::After, write: Write::Append(e), .. } if e.status == status::OK => Fault::Crash,
            _ => Fault::Continue,
        });
        let crashed = child.engine.run(&run, &Workflow::happy(), RunOptions::default()).await;
        assert!(matches!(crashed, Err(EngineError::Crashed)), "{crashed:?}");
        sleep_ms(u64::from(TTL) + 100).await;
        // While A is about to acquire, B resumes and settles the run.
        let interloper = Rc::new(RefCell::new(None));
        let (slot, engine, r) = (interloper.clone(), b.engine.clone(), run.clone());
        let fired = Cell::new(false);
        a.env.set_script(Some(Box::new(move |p| {
            if fired.get() || !matches!(p.site, Site::Acquiring) {
                return Box::pin(async { Fault::Continue });
            }
            fired.set(true);
            let (slot, engine, r) = (slot.clone(), engine.clone(), r.clone());
            Box::pin(async move {
                *slot.borrow_mut() = Some(engine.resume(&r, &Workflow::happy(), RunOptions::default()).await);
                Fault::Continue
            })
        })));
        let late = a.engine.resume(&run, &Workflow::happy(), RunOptions::default()).await;
        if !matches!(interloper.borrow().as_ref(), Some(Ok(o)) if o.status == RunStatus::Ok) {
            v.push(format!("the interloper did not settle ok: {:?}", interloper.borrow()));
        }
        if !matches!(late, Ok(ref o) if o.status == RunStatus::Ok && o.appended == 0) {
            v.push(format!("the late resume acted on a stale snapshot: {late:?}"));
        }
        let meta = a.store.get_meta(&run).expect("meta");
        if meta.as_ref().map(|m| (m.status, m.segments)) != Some((RunStatus::Ok, 3)) {
            v.push(format!("meta after three segments: {meta:?}"));
        }
        if settles(a.store.as_ref(), &run) != 1 {
            v.push(format!("{} run_settle entries", settles(a.store.as_ref(), &run)));
        }
        check_consistent(a.store.as_ref(), &run, &mut v);
        v
    })
}

type Scenario = fn(EngineDefects, DbKind) -> Violations;

/// Meta-before-settle (contracts 4.2): every kill point of the table, the crash between the two
/// settle writes among them; the residue check reports a terminal meta over a journal without a
/// settle. Only the violations of the residue check count.
fn kill_points(defects: EngineDefects, db: DbKind) -> Violations {
    let config = fencesim_sim::killpoints::Config { db, engine_defects: defects, ..Default::default() };
    let reports =
        fencesim_sim::killpoints::run_points(&fencesim_sim::killpoints::table(), &config).expect("the kill points run");
    let residue = reports.into_iter().flat_map(|r| r.violations);
    residue.filter(|v| v.explanation.contains("meta ahead of the journal")).map(|v| v.to_string()).collect()
}

/// D18: the kill matrix's probe (a recreated generation at the cached length, resolved).
fn recreated_generation(defects: EngineDefects, _db: DbKind) -> Violations {
    fencesim_sim::probes::recreated_generation(defects).expect("the probe's set-up")
}

/// A defect the worlds catch: its shipped regression plan (`seeds/regressions/`, the minimal
/// world shrunk from the kill matrix) run with `defects` planted instead of its own; the
/// violations of the checker the plan expects.
fn regression_plan(file: &str, defects: EngineDefects, db: DbKind) -> Violations {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../seeds/regressions").join(file);
    let plan = fencesim_sim::scenario::planfile::PlanFile::load(&path).expect("a shipped regression plan");
    let expect = plan.expect.clone().expect("a regression plan names its checker");
    let cfg = fencesim_sim::world::WorldConfig {
        scenario: plan.scenario(&path.display().to_string()),
        seed: plan.seed,
        db,
        store_defects: Default::default(),
        engine_defects: defects,
        keep_db: None,
        adapter: None,
    };
    let report = fencesim_sim::world::run(&cfg).expect("the plan's world runs");
    report.violations.into_iter().filter(|v| v.checker.name() == expect).map(|v| v.explanation).collect()
}

fn retention_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("retention-without-lease-swarm-seed1.toml", defects, db)
}

fn fresh_run_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("fresh-run-unleased-boot-storm-seed1.toml", defects, db)
}

fn redispatch_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("redispatch-new-entry-swarm-seed4.toml", defects, db)
}

fn checkpoint_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("checkpoint-ignored-swarm-seed4.toml", defects, db)
}

fn resettle_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("resettle-on-replay-unrepaired-seed4.toml", defects, db)
}

fn renew_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("renew-failure-ignored-swarm-seed4.toml", defects, db)
}

fn repair_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("terminal-meta-skipped-swarm-seed8.toml", defects, db)
}

/// The blind set of 2026-12-04 (`blind/`): the engine defects the worlds catch, each by its plan.
fn prior_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("prior-finds-first-dispatch-swarm-seed4.toml", defects, db)
}

fn skipped_settle_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("settle-skipped-on-replay-swarm-seed4.toml", defects, db)
}

fn paid_after_loss_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("call-paid-after-lost-lease-swarm-seed4.toml", defects, db)
}

fn suspended_at_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("suspended-at-counts-settle-unrepaired-seed4.toml", defects, db)
}

fn parked_retention_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("retention-deletes-parked-swarm-seed4.toml", defects, db)
}

fn candidacy_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("candidacy-by-listed-status-swarm-seed3.toml", defects, db)
}

fn dropped_extra_plan(defects: EngineDefects, db: DbKind) -> Violations {
    regression_plan("reconcile-drops-extra-swarm-seed2.toml", defects, db)
}

/// The operator's audit of a run settled over an old dangling dispatch: the kill matrix's probe.
fn settled_dangling(defects: EngineDefects, _db: DbKind) -> Violations {
    fencesim_sim::probes::settled_dangling(defects).expect("the probe's set-up")
}

/// Where each engine defect is caught: a detector this test runs, with and without the defect.
fn detector(defect: EngineDefect) -> Scenario {
    match defect {
        EngineDefect::UnthreadedMetaLease => stale_boot_meta,
        EngineDefect::UnthreadedCheckpointLease => stale_checkpoint,
        EngineDefect::SupersededGreen => superseded_settle,
        EngineDefect::SettleMetaOnFailedAppend => failed_settle_append,
        EngineDefect::StragglersAfterSettle => cancel_mid_call,
        EngineDefect::SecondLiveSegment => second_segment,
        EngineDefect::ReadBeforeOwn => resume_window,
        EngineDefect::MetaBeforeSettle => kill_points,
        EngineDefect::RetentionWithoutLease => retention_plan,
        EngineDefect::FreshRunUnleased => fresh_run_plan,
        EngineDefect::SkipCacheByLength => recreated_generation,
        EngineDefect::RedispatchNewEntry => redispatch_plan,
        EngineDefect::CheckpointIgnored => checkpoint_plan,
        EngineDefect::ResettleOnReplay => resettle_plan,
        EngineDefect::RenewFailureIgnored => renew_plan,
        EngineDefect::TerminalMetaSkipped => repair_plan,
        EngineDefect::PriorFindsFirstDispatch => prior_plan,
        EngineDefect::SettleSkippedOnReplay => skipped_settle_plan,
        EngineDefect::CallPaidAfterLostLease => paid_after_loss_plan,
        EngineDefect::SuspendedAtCountsSettle => suspended_at_plan,
        EngineDefect::RetentionDeletesParked => parked_retention_plan,
        EngineDefect::CandidacyByListedStatus => candidacy_plan,
        EngineDefect::AuditSettledDangling => settled_dangling,
        EngineDefect::ReconcileDropsExtra => dropped_extra_plan,
    }
}

const SCENARIOS: [(&str, Scenario); 7] = [
    ("stale_boot_meta", stale_boot_meta),
    ("stale_checkpoint", stale_checkpoint),
    ("superseded_settle", superseded_settle),
    ("failed_settle_append", failed_settle_append),
    ("cancel_mid_call", cancel_mid_call),
    ("second_segment", second_segment),
    ("resume_window", resume_window),
];

#[test]
fn the_correct_engine_keeps_every_promise_on_memdb_and_on_a_file() {
    for db in [DbKind::Memdb, DbKind::File] {
        for (name, scenario) in SCENARIOS {
            assert_eq!(scenario(EngineDefects::NONE, db), Violations::new(), "{name} on {db:?}");
        }
    }
}

/// Every engine defect is bound to a detector that is run here: it reports nothing for the
/// correct engine and something with the defect planted.
#[test]
fn each_engine_defect_is_caught_by_its_detector() {
    for defect in EngineDefect::ALL {
        let detect = detector(defect);
        assert_eq!(detect(EngineDefects::NONE, DbKind::Memdb), Violations::new(), "{defect}: the detector fails clean");
        let violations = detect(EngineDefects::of(&[defect]), DbKind::Memdb);
        assert!(!violations.is_empty(), "{defect} was not caught");
        eprintln!("{defect}: caught: {}", violations.join("; "));
    }
}
