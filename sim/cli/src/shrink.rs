//! Shrinking a failing world: from its plan, find a smaller plan whose world still fails the same
//! checker. Delta debugging (ddmin, Zeller and Hildebrandt) over the timed events and the fault
//! kinds switched on, then over the runs; then greedy passes: fewer workers, a shorter fault
//! window, fault kinds aimed at one site or one node, lower rates, shorter workflows and fewer
//! client actions. Every candidate is a whole world run from its plan, judged by the oracle; a
//! candidate is kept only when a violation of the target checker is among its violations.
//!
//! The shrinker is deterministic for a given plan and build: the same candidates in the same
//! order. Only where it stops depends on the caller's budget: a flag another thread raises when
//! time is up, which it checks between worlds and every world checks between its steps, so a
//! long world is cut short (the candidate counts as not run) and the best plan so far returned.

use fencesim_oracle::Checker;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use fencesim_sim::catalogue::Defect;
use fencesim_sim::node::{Node, NodeTarget};
use fencesim_sim::scenario::SiteTarget;
use fencesim_sim::scenario::plan::Scheduled;
use fencesim_sim::scenario::planfile::PlanFile;
use fencesim_sim::site::SiteClass;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig, WorldReport};

/// How big a plan's world is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Size {
    /// Injected fault rows in the world's trace (stalls, takeovers, crashes, busy, jumps,
    /// restarts...): the fault schedule as it happened.
    pub events: usize,
    /// Timed events plus fault kinds on: the plan's own schedule.
    pub plan_events: usize,
    pub runs: usize,
    pub workers: usize,
    pub fault_ms: u32,
    pub rows: usize,
}

impl Size {
    fn of(file: &PlanFile, report: &WorldReport) -> Self {
        Size {
            events: report.counters.faults.values().sum(),
            plan_events: file.events(),
            runs: file.plan.runs.len(),
            workers: file.plan.workers.len(),
            fault_ms: file.settings.fault_ms,
            rows: report.rows.len(),
        }
    }
}

/// What shrinking found.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The checker the original world failed first, which every kept candidate fails too.
    pub checker: Checker,
    pub before: Size,
    pub after: Size,
    /// The smallest plan found (its `expect` names the checker).
    pub minimal: PlanFile,
    /// Worlds run, the original's included.
    pub worlds: usize,
    /// The budget ran out before the passes finished.
    pub stopped_early: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    #[error("the world passes: nothing to shrink (a plan shrinks only while it fails)")]
    Passes,
    #[error("the world fails, but not the checker '{0}' it is asked to keep failing")]
    OtherChecker(String),
    /// Not a `source`: the message names it, and a printed chain names each cause once.
    #[error("the world could not run: {0}")]
    World(world::WorldError),
    /// The budget ran out before the original world reached its verdict.
    #[error("the time ran out before the original world finished: nothing is known to shrink yet")]
    OutOfTime,
}

impl From<world::WorldError> for ShrinkError {
    fn from(e: world::WorldError) -> Self {
        ShrinkError::World(e)
    }
}

struct Shrinker<'a> {
    db: DbKind,
    checker: Checker,
    worlds: usize,
    stop: &'a AtomicBool,
    stopped: bool,
    best: PlanFile,
    best_report: WorldReport,
}

fn run_plan(file: &PlanFile, db: DbKind, stop: Option<&AtomicBool>) -> Result<WorldReport, world::WorldError> {
    let (engine_defects, store_defects) = Defect::split(&file.defects);
    let cfg = WorldConfig {
        scenario: file.scenario("-"),
        seed: file.seed,
        db,
        store_defects,
        engine_defects,
        keep_db: None,
        adapter: None,
    };
    world::run_stoppable(&cfg, stop)
}

/// Whether a world ended because the stop flag was raised.
fn was_stopped(e: &world::WorldError) -> bool {
    matches!(*e.error, world::HarnessError::Stopped)
}

/// Shrink `file` (whose world must fail; `expect`, when set, names the checker to keep failing,
/// else its first violation's checker) until `stop` is raised: the original world too stops at
/// it ([`ShrinkError::OutOfTime`]), a candidate's world counts as not run.
pub fn shrink(file: &PlanFile, db: DbKind, stop: &AtomicBool) -> Result<Shrunk, ShrinkError> {
    let report = match run_plan(file, db, Some(stop)) {
        Err(e) if was_stopped(&e) => return Err(ShrinkError::OutOfTime),
        other => other?,
    };
    let Some(first) = report.violations.first() else {
        return Err(ShrinkError::Passes);
    };
    let checker = match &file.expect {
        Some(name) => report
            .violations
            .iter()
            .find(|v| v.checker.name() == name)
            .map(|v| v.checker)
            .ok_or_else(|| ShrinkError::OtherChecker(name.clone()))?,
        None => first.checker,
    };
    let before = Size::of(file, &report);
    let mut s = Shrinker { db, checker, worlds: 1, stop, stopped: false, best: file.clone(), best_report: report };
    s.best.expect = Some(checker.name().to_owned());
    for _round in 0..2 {
        let start = s.best.clone();
        s.schedule();
        s.runs();
        s.workers();
        s.window();
        s.aim();
        s.rates();
        s.workflows();
        if s.stopped || s.best == start {
            break;
        }
    }
    // A candidate is kept only if it fails the original's checker: so does what shrink returns.
    assert!(s.best_report.violations.iter().any(|v| v.checker == checker), "the shrunk plan no longer fails {checker}");
    let after = Size::of(&s.best, &s.best_report);
    Ok(Shrunk { checker, before, after, minimal: s.best, worlds: s.worlds, stopped_early: s.stopped })
}

/// Remove the `keep`-complement of items: ddmin over `n` items, `test(subset)` true when the
/// subset still fails. Returns a 1-minimal subset (or the best found when time ran out).
fn ddmin(n: usize, test: &mut dyn FnMut(&[usize]) -> Option<bool>) -> Vec<usize> {
    let mut current: Vec<usize> = (0..n).collect();
    if current.is_empty() {
        return current;
    }
    // The empty set first: often nothing at all is needed.
    match test(&[]) {
        Some(true) => return Vec::new(),
        None => return current,
        Some(false) => {}
    }
    let mut granularity = 2usize;
    while current.len() >= 2 {
        let chunk = current.len().div_ceil(granularity);
        let chunks: Vec<Vec<usize>> = current.chunks(chunk).map(<[usize]>::to_vec).collect();
        let mut reduced = false;
        // Try each chunk alone, then each complement.
        for c in &chunks {
            match test(c) {
                Some(true) => {
                    current = c.clone();
                    granularity = 2;
                    reduced = true;
                    break;
                }
                None => return current,
                Some(false) => {}
            }
        }
        if !reduced && chunks.len() > 2 {
            for (i, _) in chunks.iter().enumerate() {
                let complement: Vec<usize> =
                    chunks.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, c)| c.clone()).collect();
                match test(&complement) {
                    Some(true) => {
                        current = complement;
                        granularity = (granularity - 1).max(2);
                        reduced = true;
                        break;
                    }
                    None => return current,
                    Some(false) => {}
                }
            }
        }
        if !reduced {
            if granularity >= current.len() {
                break;
            }
            granularity = (granularity * 2).min(current.len());
        }
    }
    if current.len() == 1 && test(&[]) == Some(true) {
        return Vec::new();
    }
    // Chunks and complements keep order: a subset of the items, each once, ascending.
    assert!(current.windows(2).all(|w| w[0] < w[1]) && current.iter().all(|&i| i < n), "ddmin's subset of {n}");
    current
}

impl Shrinker<'_> {
    /// Run a candidate; `Some(true)` when it fails the target checker (and becomes the best),
    /// `None` when time ran out.
    fn try_plan(&mut self, candidate: PlanFile) -> Option<bool> {
        if self.stopped || self.stop.load(Ordering::Relaxed) {
            self.stopped = true;
            return None;
        }
        if candidate == self.best {
            return Some(true);
        }
        self.worlds += 1;
        match run_plan(&candidate, self.db, Some(self.stop)) {
            Ok(report) if report.violations.iter().any(|v| v.checker == self.checker) => {
                self.best = candidate;
                self.best_report = report;
                Some(true)
            }
            Err(e) if was_stopped(&e) => {
                self.stopped = true;
                None
            }
            _ => Some(false),
        }
    }

    /// ddmin over the timed events and the fault kinds switched on, together.
    fn schedule(&mut self) {
        let base = self.best.clone();
        let kinds: Vec<usize> = (0..base.plan.faults.len()).filter(|&i| base.plan.faults[i].on).collect();
        let n_events = base.plan.events.len();
        let build = |keep: &[usize]| {
            let keep: BTreeSet<usize> = keep.iter().copied().collect();
            let mut c = base.clone();
            c.plan.events =
                base.plan.events.iter().enumerate().filter(|(i, _)| keep.contains(i)).map(|(_, e)| e.clone()).collect();
            for (k, &fi) in kinds.iter().enumerate() {
                c.plan.faults[fi].on = keep.contains(&(n_events + k));
            }
            // A kind switched off takes its events along: a plan never keeps an event that
            // cannot fire (`PlanFile::parse` refuses one).
            let on: Vec<_> = c.plan.faults.iter().filter(|f| f.on).map(|f| f.kind).collect();
            c.plan.events.retain(|(_, e)| on.contains(&e.kind()));
            c
        };
        let mut test = |keep: &[usize]| self.try_plan(build(keep));
        ddmin(n_events + kinds.len(), &mut test);
    }

    /// ddmin over the client's runs.
    fn runs(&mut self) {
        let base = self.best.clone();
        let mut test = |keep: &[usize]| {
            if keep.is_empty() {
                return Some(false);
            }
            let mut c = base.clone();
            c.plan.runs = keep.iter().map(|&i| base.plan.runs[i].clone()).collect();
            self.try_plan(c)
        };
        ddmin(base.plan.runs.len(), &mut test);
    }

    /// Fewer workers: drop one at a time (the last first), with its events, its skew and its
    /// place in the faults' node lists (a fault left aiming at nobody is switched off).
    fn workers(&mut self) {
        let mut i = self.best.plan.workers.len();
        while i > 0 && self.best.plan.workers.len() > 1 && !self.stopped {
            i -= 1;
            let Some(name) = self.best.plan.workers.get(i).cloned() else { continue };
            let mut c = self.best.clone();
            c.plan.workers.retain(|w| *w != name);
            c.plan.skews.remove(&name);
            c.plan.events.retain(|(_, e)| match e {
                Scheduled::Jump { node, .. } | Scheduled::Restart { node, .. } => *node != name,
                Scheduled::Zombie => true,
            });
            for fault in &mut c.plan.faults {
                fault.retain_nodes(|n| !matches!(n, NodeTarget::Node(node) if node.to_string() == name));
            }
            self.try_plan(c);
        }
    }

    /// A shorter fault window: halve it while the world still fails, then a quarter back.
    fn window(&mut self) {
        let mut step = self.best.settings.fault_ms / 2;
        while step >= 50 && !self.stopped {
            let mut c = self.best.clone();
            let fault_ms = c.settings.fault_ms.saturating_sub(step).max(1);
            c.settings.fault_ms = fault_ms;
            c.plan.events.retain(|(at, _)| *at < fault_ms);
            if self.try_plan(c) != Some(true) {
                step /= 2;
            }
        }
    }

    /// Aim each fault kind at one site, then at one node, when that still fails.
    fn aim(&mut self) {
        for fi in 0..self.best.plan.faults.len() {
            let f = &self.best.plan.faults[fi];
            if !f.on {
                continue;
            }
            if f.kind.aims_at_sites() && f.spec.sites.contains(&SiteTarget::Any) {
                for class in SiteClass::ALL {
                    let mut c = self.best.clone();
                    c.plan.faults[fi].spec.sites = vec![SiteTarget::Class(class)];
                    if self.try_plan(c) != Some(false) {
                        break;
                    }
                }
            }
            if self.best.plan.faults[fi].kind.is_per_point()
                && self.best.plan.faults[fi]
                    .spec
                    .nodes
                    .iter()
                    .any(|n| matches!(n, NodeTarget::Any | NodeTarget::Workers))
            {
                let workers = self.best.plan.workers.iter().filter_map(|w| Node::parse(w));
                let nodes: Vec<NodeTarget> = workers.chain([Node::Client]).map(NodeTarget::Node).collect();
                for node in nodes {
                    let mut c = self.best.clone();
                    c.plan.faults[fi].spec.nodes = vec![node];
                    if self.try_plan(c) != Some(false) {
                        break;
                    }
                }
            }
        }
    }

    /// Lower rates: halve each kind's rate while the world still fails.
    fn rates(&mut self) {
        for fi in 0..self.best.plan.faults.len() {
            for _ in 0..8 {
                if !self.best.plan.faults[fi].on || self.stopped {
                    break;
                }
                let mut c = self.best.clone();
                c.plan.faults[fi].rate /= 2.0;
                if self.try_plan(c) != Some(true) {
                    break;
                }
            }
        }
    }

    /// Shorter workflows and fewer client actions: `happy` instead of a longer one, no resolve,
    /// recreate or cancel.
    fn workflows(&mut self) {
        for ri in 0..self.best.plan.runs.len() {
            let edits: [fn(&mut fencesim_sim::scenario::plan::RunPlan) -> bool; 4] = [
                |r| std::mem::replace(&mut r.workflow, "happy".into()) != "happy",
                |r| std::mem::take(&mut r.recreate),
                |r| r.cancel_ms.take().is_some(),
                |r| std::mem::take(&mut r.resolve),
            ];
            for edit in edits {
                let mut c = self.best.clone();
                if edit(&mut c.plan.runs[ri]) {
                    self.try_plan(c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The world's error is named in the message only: as a `source` too, the CLI's chain
    /// (`{:#}`) would print it twice.
    #[test]
    fn a_world_error_is_named_once() {
        use std::error::Error as _;
        let world = world::WorldError {
            scenario: "swarm".into(),
            seed: 1,
            error: Box::new(world::HarnessError::Panicked("boom".into())),
        };
        let e = ShrinkError::from(world);
        assert_eq!(e.to_string(), "the world could not run: world swarm seed 1: the world panicked: boom");
        assert!(e.source().is_none());
    }

    #[test]
    fn ddmin_finds_the_two_items_that_matter() {
        let mut calls = 0;
        let mut test = |keep: &[usize]| {
            calls += 1;
            Some(keep.contains(&3) && keep.contains(&11))
        };
        assert_eq!(ddmin(16, &mut test), vec![3, 11]);
        assert!(calls < 60, "{calls} tests");
        let mut none_needed = |_: &[usize]| Some(true);
        assert_eq!(ddmin(5, &mut none_needed), Vec::<usize>::new());
        let mut out_of_time = |_: &[usize]| None;
        assert_eq!(ddmin(3, &mut out_of_time), vec![0, 1, 2]);
    }

    #[test]
    fn shrinking_keeps_the_checker_and_reduces_the_world() {
        let scenario = fencesim_sim::catalogue::scenario("mid-call-takeover").expect("built in");
        let defect = Defect::parse("non-atomic-fence").expect("defect");
        let file = PlanFile::draw(&scenario, 1, &[defect]);
        let shrunk = shrink(&file, DbKind::Memdb, &AtomicBool::new(false)).expect("shrinks");
        assert_eq!(shrunk.checker, Checker::NoStaleAcceptance);
        assert!(shrunk.after.runs <= shrunk.before.runs && shrunk.after.runs <= 3, "{shrunk:?}");
        assert!(shrunk.after.events < shrunk.before.events, "{shrunk:?}");
        let again = run_plan(&shrunk.minimal, DbKind::Memdb, None).expect("runs");
        assert!(again.violations.iter().any(|v| v.checker == shrunk.checker));
        // Without the defect the same minimal plan passes: the checker sees the bug, not the plan.
        let mut clean = shrunk.minimal.clone();
        clean.defects.clear();
        assert!(run_plan(&clean, DbKind::Memdb, None).expect("runs").passed());
        let passing = PlanFile::draw(&scenario, 1, &[]);
        assert!(matches!(shrink(&passing, DbKind::Memdb, &AtomicBool::new(false)), Err(ShrinkError::Passes)));
    }

    /// A raised flag stops a world between its steps (the original one: out of time), and a
    /// flag never raised changes nothing: the same fingerprint as an unstoppable run.
    #[test]
    fn a_raised_flag_stops_the_world_and_an_unraised_one_changes_nothing() {
        let scenario = fencesim_sim::catalogue::scenario("mid-call-takeover").expect("built in");
        let file = PlanFile::draw(&scenario, 1, &[Defect::parse("non-atomic-fence").expect("defect")]);
        let stopped = run_plan(&file, DbKind::Memdb, Some(&AtomicBool::new(true))).expect_err("stopped");
        assert!(was_stopped(&stopped), "{stopped}");
        assert!(matches!(shrink(&file, DbKind::Memdb, &AtomicBool::new(true)), Err(ShrinkError::OutOfTime)));
        let free = run_plan(&file, DbKind::Memdb, Some(&AtomicBool::new(false))).expect("runs");
        let plain = run_plan(&file, DbKind::Memdb, None).expect("runs");
        assert_eq!((free.fingerprint, free.rows.len()), (plain.fingerprint, plain.rows.len()));
    }
}
