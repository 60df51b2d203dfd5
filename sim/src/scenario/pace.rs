//! A world's liveness window: how long after quiescence the supervisor waits for every run to
//! settle or wait before the liveness checker judges it. It follows from the world's settings:
//! the time a correct engine needs once the faults stop (runs that start late, leases of dead or
//! stalled holders to expire, polls and client ticks to pick work up, the runs' own model calls
//! and tools queued on the fewest worker slots, a node still stalled, clocks that disagree),
//! never less than the stated `liveness_ms`. Computed here only: from a scenario's ranges at
//! their worst ([`Pace::of_scenario`], what the parser holds to the limits) and from a drawn or
//! written plan ([`Pace::of_plan`], what a world waits and what a plan file is held to). A world
//! whose window would exceed [`LIMITS`]' `window_ms` cannot be judged in sane virtual time and
//! is refused, naming the setting of its largest term; so is one whose runs' lease renews or
//! operator audits over that window would exceed its `calls` (minutes of wall time).

use std::fmt::Write as _;

use fencesim_engine::renew_cadence;
use fencesim_engine::worker::pause_ms;

use crate::scenario::plan::{Plan, Scheduled};
use crate::scenario::{FaultKind, LIMITS, Scenario, WorldShape};

/// How often the client looks at its runs (to start, resolve or recreate them).
pub(crate) const CLIENT_TICK_MS: u64 = 1000;

/// The world settings a running world reads from its scenario (the rest only shape the draw).
/// Serialized in a plan's `[world]` table, in this order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Settings {
    pub fault_ms: u32,
    pub liveness_ms: u32,
    pub retention_ms: u32,
    pub operator_ms: u32,
    pub boot_storm: u32,
    pub call_ms: u32,
    pub tool_ms: u32,
    /// `crate::scenario::WorldShape`'s opt-in branches, written only when set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub legacy: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub colocated: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub misbind: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub corrupt: bool,
    #[serde(skip_serializing_if = "is_zero")]
    pub repair_after_ms: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub seq_gaps: bool,
}

fn is_zero(ms: &u32) -> bool {
    *ms == 0
}

impl Settings {
    pub fn of(w: &WorldShape) -> Self {
        Self {
            fault_ms: w.fault_ms,
            liveness_ms: w.liveness_ms,
            retention_ms: w.retention_ms,
            operator_ms: w.operator_ms,
            boot_storm: w.boot_storm,
            call_ms: w.call_ms,
            tool_ms: w.tool_ms,
            legacy: w.legacy.clone(),
            colocated: w.colocated,
            misbind: w.misbind,
            corrupt: w.corrupt,
            repair_after_ms: w.repair_after_ms,
            seq_gaps: w.seq_gaps,
        }
    }
}

/// Model calls and tools one generation of a run may make: two agents of at most 4 turns and 2
/// tool calls each (`fencesim_engine::Workflow::BUILTIN`).
const CALLS_PER_RUN: u64 = 8;
const TOOLS_PER_RUN: u64 = 4;

/// The settings a world's liveness window follows from, each at its slowest.
#[derive(Clone, Debug, PartialEq)]
pub struct Pace {
    /// The stated bound: the window is never shorter.
    pub liveness_ms: u32,
    pub fault_ms: u32,
    /// The latest a run starts.
    pub start_ms: u32,
    pub ttl_ms: u32,
    /// The slowest worker poll.
    pub poll_ms: u32,
    pub call_ms: u32,
    pub tool_ms: u32,
    /// The most runs, on the fewest workers of the least concurrency.
    pub runs: u32,
    pub workers: u32,
    pub concurrency: u32,
    /// Some run is deleted and started again: it lives twice.
    pub recreate: bool,
    /// The longest stall, in ttls (0 without stalls).
    pub stall_factor: f64,
    /// The widest difference between two nodes' clocks a lease may meet.
    pub skew_ms: u64,
    /// The operator audits every run this often; 0 for never.
    pub operator_ms: u32,
}

/// One term of the window: the setting it follows from (its table, `world` or a fault kind's,
/// and key, for the line) and how many ms it adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub section: &'static str,
    pub key: &'static str,
    pub ms: u64,
}

impl Term {
    /// Its dotted name, as errors print it: `world.call_ms`, `faults.stall.factor`.
    pub fn name(&self) -> String {
        match self.section {
            "world" => format!("world.{}", self.key),
            kind => format!("faults.{kind}.{}", self.key),
        }
    }
}

impl Pace {
    /// A scenario at its worst: the slowest of everything its ranges allow any seed to draw.
    pub fn of_scenario(s: &Scenario) -> Pace {
        let w = &s.world;
        let on = |kind: FaultKind| Some(s.faults.get(kind)).filter(|f| f.on.0 > 0.0);
        let clock = on(FaultKind::Clock).map_or(0, |c| {
            let jumps = (c.rate.1 * f64::from(w.fault_ms) / 1000.0).ceil() as u64;
            (2 + jumps) * u64::from(c.max_ms)
        });
        Pace {
            liveness_ms: w.liveness_ms,
            fault_ms: w.fault_ms,
            start_ms: w.start_ms,
            ttl_ms: w.ttl_ms,
            poll_ms: w.poll_ms.1,
            call_ms: w.call_ms,
            tool_ms: w.tool_ms,
            runs: w.runs.1,
            workers: w.workers.0,
            concurrency: w.concurrency.0,
            recreate: w.recreate.0 > 0.0,
            stall_factor: on(FaultKind::Stall).map_or(0.0, |f| f.factor.1),
            skew_ms: clock,
            operator_ms: w.operator_ms,
        }
    }

    /// The world of one plan (drawn from a seed, or read from a plan file) with its settings.
    pub fn of_plan(plan: &Plan, settings: &Settings) -> Pace {
        Pace {
            liveness_ms: settings.liveness_ms,
            fault_ms: settings.fault_ms,
            start_ms: plan.runs.iter().map(|r| r.start_ms).max().unwrap_or(0),
            ttl_ms: plan.ttl_ms,
            poll_ms: plan.poll_ms,
            call_ms: settings.call_ms,
            tool_ms: settings.tool_ms,
            runs: u32::try_from(plan.runs.len()).unwrap_or(u32::MAX),
            workers: u32::try_from(plan.workers.len()).unwrap_or(u32::MAX),
            concurrency: plan.concurrency,
            recreate: plan.runs.iter().any(|r| r.recreate),
            stall_factor: plan.fault(FaultKind::Stall).map_or(0.0, |f| f.spec.factor.1),
            skew_ms: skew_spread(plan),
            operator_ms: settings.operator_ms,
        }
    }

    /// A recreated run lives twice: each generation is picked up, resolved and worked again.
    fn lives(&self) -> u64 {
        if self.recreate { 2 } else { 1 }
    }

    /// One generation's own work: its model calls and tools.
    fn work_ms(&self) -> u64 {
        CALLS_PER_RUN * u64::from(self.call_ms) + TOOLS_PER_RUN * u64::from(self.tool_ms)
    }

    /// Lease renews the runs' own work makes (one every ttl/3 while a run works).
    pub fn heartbeats(&self) -> u64 {
        self.lives() * u64::from(self.runs) * self.work_ms() / u64::from(renew_cadence(self.ttl_ms))
    }

    /// Store calls of the operator's audits (a listing, then a meta and a journal read per run)
    /// over fault_ms and the liveness window.
    pub fn audit_calls(&self) -> u64 {
        if self.operator_ms == 0 {
            return 0;
        }
        let audits = (u64::from(self.fault_ms) + self.window_ms()) / u64::from(self.operator_ms);
        audits * (1 + 2 * u64::from(self.runs))
    }

    /// What the window adds up from, each term with the setting it follows from.
    pub fn terms(&self) -> [Term; 7] {
        let term = |section, key, ms| Term { section, key, ms };
        let lives = self.lives();
        // Runs queue on the fewest worker slots (should every client segment fail).
        let slots = u64::from(self.workers.max(1)) * u64::from(self.concurrency.max(1));
        let waves = lives * u64::from(self.runs).div_ceil(slots);
        // A worker picks work up within its longest pause; the client looks once a tick.
        let pickup = pause_ms(self.poll_ms, u32::MAX) + CLIENT_TICK_MS;
        [
            // A run the client starts after quiescence, within a tick of its time.
            term("world", "start_ms", u64::from(self.start_ms.saturating_sub(self.fault_ms)) + CLIENT_TICK_MS),
            // A dead holder's lease, or a usurper's a ttl later still, expires before a take-over.
            term("world", "ttl_ms", lives * 2 * u64::from(self.ttl_ms)),
            // Per generation: an orphaned run picked up; a resolution made and picked up.
            term("world", "poll_ms", lives * 2 * pickup),
            term("world", "call_ms", waves * CALLS_PER_RUN * u64::from(self.call_ms)),
            term("world", "tool_ms", waves * TOOLS_PER_RUN * u64::from(self.tool_ms)),
            // A node stalled just before quiescence wakes this much later.
            term("stall", "factor", (self.stall_factor * f64::from(self.ttl_ms)).ceil() as u64),
            // A lease stamped by a clock ahead lives this much longer in a clock behind.
            term("clock", "max_ms", self.skew_ms),
        ]
    }

    /// The time a correct engine needs after quiescence to settle or park every run.
    pub fn need_ms(&self) -> u64 {
        self.terms().iter().map(|t| t.ms).sum()
    }

    /// How long after quiescence the world waits: what it needs, never less than liveness_ms.
    pub fn window_ms(&self) -> u64 {
        self.need_ms().max(u64::from(self.liveness_ms))
    }

    /// A world liveness can judge in sane virtual time, and in seconds of wall time: its window
    /// within the limit of any window (refused naming its largest term, the setting to change,
    /// and every term), the renews of its runs' work and the operator's audits over it each
    /// within the limit of store calls.
    pub fn check(&self) -> Result<(), (Term, String)> {
        let need = self.need_ms();
        if need > u64::from(LIMITS.window_ms) {
            let terms = self.terms();
            let largest = terms.iter().copied().max_by_key(|t| t.ms).unwrap_or(terms[0]);
            let mut parts = String::new();
            for t in terms.iter().filter(|t| t.ms > 0) {
                let _ = write!(parts, "{}{} {}", if parts.is_empty() { "" } else { " + " }, t.key, t.ms);
            }
            let message = format!(
                "after quiescence a correct engine may need {need} ms to settle every run of this world ({parts}; \
                 {} runs on {} workers of concurrency {}), more than the longest liveness window of {} ms: \
                 liveness could not judge it fairly; shorten {}",
                self.runs,
                self.workers,
                self.concurrency,
                LIMITS.window_ms,
                largest.name()
            );
            return Err((largest, message));
        }
        let heartbeats = self.heartbeats();
        if heartbeats > LIMITS.calls {
            let message = format!(
                "{} runs of {} ms of calls and tools each (twice if recreated) renew their leases every ttl_ms / 3 = \
                 {} ms: {heartbeats} renews, more than the limit of {} store calls; raise ttl_ms or shorten call_ms \
                 and tool_ms",
                self.runs,
                self.work_ms(),
                renew_cadence(self.ttl_ms),
                LIMITS.calls
            );
            return Err((Term { section: "world", key: "ttl_ms", ms: 0 }, message));
        }
        let audits = self.audit_calls();
        if audits > LIMITS.calls {
            let message = format!(
                "an audit of {} runs every {} ms over fault_ms and a liveness window of {} ms makes {audits} store \
                 calls, more than the limit of {}",
                self.runs,
                self.operator_ms,
                self.window_ms(),
                LIMITS.calls
            );
            return Err((Term { section: "world", key: "operator_ms", ms: 0 }, message));
        }
        Ok(())
    }
}

/// How far apart two nodes' clocks may read while a lease is live: the highest reading any node's
/// clock has (its initial skew, then after each planned jump) minus the lowest.
fn skew_spread(plan: &Plan) -> u64 {
    let mut now = plan.skews.clone();
    let (mut hi, mut lo) = (0i64, 0i64);
    for skew in now.values() {
        (hi, lo) = (hi.max(*skew), lo.min(*skew));
    }
    for (_, event) in &plan.events {
        if let Scheduled::Jump { node, delta_ms } = event {
            let skew = now.entry(node.clone()).or_default();
            *skew = skew.saturating_add(*delta_ms);
            (hi, lo) = (hi.max(*skew), lo.min(*skew));
        }
    }
    hi.abs_diff(lo)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::catalogue;

    /// The parser holds a scenario at its worst, so every plan it draws is held too: no term of a
    /// drawn plan's window is longer than the scenario's.
    #[test]
    fn no_drawn_plan_needs_longer_than_its_scenario_at_its_worst() {
        for (name, _) in catalogue::SCENARIOS {
            let scenario = catalogue::scenario(name).expect("built in");
            let worst = Pace::of_scenario(&scenario);
            for seed in 1..=40 {
                let plan = Plan::draw(&scenario, seed);
                let pace = Pace::of_plan(&plan, &Settings::of(&scenario.world));
                for (drawn, bound) in pace.terms().iter().zip(worst.terms()) {
                    assert!(drawn.ms <= bound.ms, "{name} seed {seed}: {drawn:?} > {bound:?}");
                }
                assert!(pace.heartbeats() <= worst.heartbeats() && pace.audit_calls() <= worst.audit_calls());
            }
        }
    }

    /// Clocks disagree by the spread of every node's skew over the world: w1 starts 300 ahead and
    /// jumps to -200, w2 stays at -100: readings from 300 down to -200 are 500 apart.
    #[test]
    fn the_skew_term_spans_every_clock_reading_of_the_plan() {
        let scenario = catalogue::scenario("skewed-clocks").expect("built in");
        let mut plan = Plan::draw(&scenario, 1);
        plan.skews = [("w1".to_owned(), 300), ("w2".to_owned(), -100)].into_iter().collect();
        plan.events = vec![(10, Scheduled::Jump { node: "w1".into(), delta_ms: -500 })];
        assert_eq!(skew_spread(&plan), 500);
        plan.events.clear();
        assert_eq!(skew_spread(&plan), 400);
    }

    /// A world whose store calls over its window would take minutes is refused at the setting to
    /// change: renews every millisecond through 40 runs of eight 5 s calls (ttl_ms), an audit of
    /// 40 runs every millisecond (operator_ms).
    #[test]
    fn worlds_of_too_many_renews_or_audits_are_refused_at_their_line() {
        let parse = |text: &str| Scenario::parse(Path::new("x.toml"), text);
        let base = "description = \"x\"\n[world]\nworkers = 8\nconcurrency = 8\nruns = 40\nrecreate = 0.0\n";
        parse(&format!("{base}ttl_ms = 3\ncall_ms = 500\n")).expect("160,000 renews");
        let e = parse(&format!("{base}ttl_ms = 3\ncall_ms = 5000\n")).expect_err("renews");
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.to_string().contains("world.ttl_ms: 40 runs of 40020 ms of calls and tools"), "{e}");
        assert!(e.to_string().contains("1600800 renews, more than the limit of 1000000"), "{e}");
        parse(&format!("{base}operator_ms = 100\n")).expect("a tenth of a second");
        let e = parse(&format!("{base}operator_ms = 1\n")).expect_err("audits");
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.to_string().contains("world.operator_ms: an audit of 40 runs every 1 ms"), "{e}");
    }
}
