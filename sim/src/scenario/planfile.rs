//! The plan as a file: everything a seed draws inside its scenario (the workload, every fault kind
//! on or off with its rate and settings, clock skews, timed events) plus the world settings the
//! running world reads, as a versioned TOML artifact (`fencesim.plan/1`). `fencesim plan` prints
//! one, `fencesim run --plan FILE` runs a world from it alone, `fencesim shrink` edits it. A world
//! run from the plan of seed S is the same world as seed S: the seed still drives what happens
//! inside the world (madsim's scheduler, the per-node fault streams), the plan fixes the rest.
//!
//! The text is written by hand (not by a serializer) so its layout is stable and readable, and is
//! read back through serde with spans, so a hand-edited plan that is wrong is refused naming the
//! file and the line, like a scenario.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use fencesim_store::{RunId, TIMER_MS_MAX};
use serde::Deserialize;
use toml::Spanned;

use crate::defect::Defect;
use crate::node::{Node, NodeTarget};
use crate::scenario::pace::Settings;
use crate::scenario::plan::{Applied, Plan, RunPlan, Scheduled, nodes_with_clocks};
use crate::scenario::{
    FaultKind, FaultRanges, FaultSpec, LIMITS, Range, Ratio, Scenario, ScenarioError, SiteTarget, Span, WorldShape,
};

/// The format identifier written at the top of every plan; bump on an incompatible change.
pub const PLAN_FORMAT: &str = "fencesim.plan/1";

/// How a world run from a plan names its source in reports: `plan:PATH` (the repro command then
/// says `--plan PATH`).
pub const PLAN_SOURCE_PREFIX: &str = "plan:";

const WORKFLOWS: [&str; 3] = ["happy", "limit", "approval"];

/// A plan with everything needed to run its world again.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanFile {
    /// The scenario it was drawn from (its name; informative, and the world's name).
    pub scenario: String,
    /// The seed of everything the world draws while it runs.
    pub seed: u64,
    /// Planted defects the world runs with.
    pub defects: Vec<Defect>,
    /// For a regression plan: the checker it must keep failing (a planted defect's minimal world).
    pub expect: Option<String>,
    /// For a regression plan: why it is kept.
    pub story: Option<String>,
    pub settings: Settings,
    pub plan: Plan,
}

impl PlanFile {
    /// What seed `seed` of `scenario` draws.
    pub fn draw(scenario: &Scenario, seed: u64, defects: &[Defect]) -> Self {
        let mut plan = scenario.plan.as_deref().cloned().unwrap_or_else(|| Plan::draw(scenario, seed));
        // The ranges the draw read are spent; a plan keeps only what the world reads.
        let spent = FaultSpec::default();
        for f in &mut plan.faults {
            (f.spec.on, f.spec.rate) = (spent.on, spent.rate);
        }
        Self {
            scenario: scenario.name.clone(),
            seed,
            defects: defects.to_vec(),
            expect: None,
            story: None,
            settings: Settings::of(&scenario.world),
            plan,
        }
    }

    /// The scenario a world runs this plan under; `source` is how reports name it again (the
    /// plan file's path).
    pub fn scenario(&self, source: &str) -> Scenario {
        let s = &self.settings;
        Scenario {
            name: self.scenario.clone(),
            source: format!("{PLAN_SOURCE_PREFIX}{source}"),
            description: format!("plan of {} seed {}", self.scenario, self.seed),
            targets: Vec::new(),
            // A plan is run, not swept: it aims at nothing a sweep could require.
            aims: Vec::new(),
            world: WorldShape {
                ttl_ms: self.plan.ttl_ms,
                fault_ms: s.fault_ms,
                liveness_ms: s.liveness_ms,
                retention_ms: s.retention_ms,
                operator_ms: s.operator_ms,
                boot_storm: s.boot_storm,
                call_ms: s.call_ms,
                tool_ms: s.tool_ms,
                legacy: s.legacy.clone(),
                colocated: s.colocated,
                misbind: s.misbind,
                corrupt: s.corrupt,
                repair_after_ms: s.repair_after_ms,
                seq_gaps: s.seq_gaps,
                ..WorldShape::default()
            },
            faults: FaultRanges::default(),
            plan: Some(Arc::new(self.plan.clone())),
        }
    }

    /// Timed events plus fault kinds switched on: what `shrink` reports as the plan's size.
    pub fn events(&self) -> usize {
        self.plan.events.len() + self.plan.faults.iter().filter(|f| f.on).count()
    }

    /// Read a plan file; errors name the file and, when known, the line.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = crate::files::read_input(path, crate::files::MAX_TEXT_BYTES).map_err(|e| ScenarioError {
            path: path.display().to_string(),
            line: None,
            message: format!("cannot read plan: {}", e.message),
        })?;
        Self::parse(path, &text)
    }

    /// Parse a plan's text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ScenarioError> {
        let shown = path.display().to_string();
        let line_at = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let fail = |offset: Option<usize>, message: String| ScenarioError {
            path: shown.clone(),
            line: offset.map(line_at),
            message,
        };
        let doc: Doc =
            toml::from_str(text).map_err(|e| fail(e.span().map(|s| s.start), e.message().trim().replace('\n', " ")))?;
        doc.into_plan().map_err(|(offset, message)| fail(Some(offset), message))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    format: Spanned<String>,
    scenario: String,
    /// A whole number from 0 to u64::MAX: a TOML integer, or (above i64::MAX) a string.
    seed: Spanned<toml::Value>,
    #[serde(default)]
    defects: Vec<Spanned<String>>,
    #[serde(default)]
    expect: Option<Spanned<String>>,
    #[serde(default)]
    story: Option<String>,
    world: DocWorld,
    #[serde(default)]
    skews: BTreeMap<String, Spanned<i64>>,
    #[serde(default)]
    faults: BTreeMap<String, Spanned<DocFault>>,
    #[serde(default)]
    runs: Vec<Spanned<DocRun>>,
    #[serde(default)]
    events: Vec<Spanned<DocEvent>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocWorld {
    workers: Spanned<Vec<String>>,
    concurrency: Spanned<u32>,
    poll_ms: Spanned<u32>,
    ttl_ms: Spanned<u32>,
    fault_ms: Spanned<u32>,
    liveness_ms: Spanned<u32>,
    retention_ms: Option<Spanned<u32>>,
    operator_ms: Option<Spanned<u32>>,
    boot_storm: Option<Spanned<u32>>,
    call_ms: Option<Spanned<u32>>,
    tool_ms: Option<Spanned<u32>>,
    #[serde(default)]
    legacy: Vec<Spanned<String>>,
    #[serde(default)]
    colocated: bool,
    #[serde(default)]
    misbind: bool,
    #[serde(default)]
    corrupt: bool,
    repair_after_ms: Option<Spanned<u32>>,
    #[serde(default)]
    seq_gaps: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocFault {
    on: bool,
    #[serde(default)]
    rate: f64,
    sites: Option<Vec<String>>,
    nodes: Option<Vec<String>>,
    factor: Option<Range>,
    expiry: Option<Ratio>,
    restart_ms: Option<Span>,
    max_ms: Option<u32>,
    hold_ms: Option<Span>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocRun {
    id: String,
    workflow: String,
    #[serde(default)]
    start_ms: u32,
    #[serde(default)]
    resolve: bool,
    #[serde(default)]
    recreate: bool,
    cancel_ms: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocEvent {
    at_ms: u32,
    kind: String,
    node: Option<String>,
    delta_ms: Option<i64>,
    after_ms: Option<u32>,
}

type Bad = (usize, String);

fn at<T>(s: &Spanned<T>) -> usize {
    s.span().start
}

impl Doc {
    /// As a scenario's: the plan's world judgeable in sane virtual time (`crate::pace`), the
    /// error at the line of its largest term, and as many polls as a scenario may make over
    /// fault_ms and that liveness window.
    fn check_pace(&self, plan: &Plan, settings: &Settings) -> Result<(), Bad> {
        let w = &self.world;
        let pace = crate::scenario::pace::Pace::of_plan(plan, settings);
        if let Err((term, message)) = pace.check() {
            let line = match (term.section, term.key) {
                ("world", "call_ms") => w.call_ms.as_ref().map(at),
                ("world", "tool_ms") => w.tool_ms.as_ref().map(at),
                ("world", "ttl_ms") => Some(at(&w.ttl_ms)),
                ("world", "poll_ms") => Some(at(&w.poll_ms)),
                ("world", "operator_ms") => w.operator_ms.as_ref().map(at),
                ("world", "start_ms") => self.runs.iter().max_by_key(|r| r.get_ref().start_ms).map(at),
                (kind, _) => self.faults.get(kind).map(at),
            };
            return Err((line.unwrap_or_else(|| at(&w.liveness_ms)), format!("{}: {message}", term.name())));
        }
        let workers = u32::try_from(plan.workers.len()).unwrap_or(u32::MAX);
        crate::scenario::LIMITS
            .check_polls(workers, settings.fault_ms, pace.window_ms(), plan.poll_ms)
            .map_err(|message| (at(&w.poll_ms), format!("world.poll_ms: {message}")))
    }

    fn into_plan(self) -> Result<PlanFile, Bad> {
        if self.format.get_ref() != PLAN_FORMAT {
            return Err((at(&self.format), format!("format '{}' is not {PLAN_FORMAT}", self.format.get_ref())));
        }
        let seed = self.seed()?;
        let (defects, expect) = self.targets()?;
        let w = &self.world;
        let workers = self.workers()?;
        let ttl_ms = *w.ttl_ms.get_ref();
        if !(3..=TIMER_MS_MAX).contains(&ttl_ms) {
            return Err((at(&w.ttl_ms), format!("world.ttl_ms: must be 3..={TIMER_MS_MAX}, got {ttl_ms}")));
        }
        let liveness_ms = *w.liveness_ms.get_ref();
        if liveness_ms == 0 {
            return Err((at(&w.liveness_ms), "world.liveness_ms: must be positive, got 0".into()));
        }
        let poll_ms = *w.poll_ms.get_ref();
        if poll_ms == 0 || poll_ms > TIMER_MS_MAX / 3 || poll_ms >= liveness_ms {
            return Err((at(&w.poll_ms), format!("world.poll_ms: 1 to below liveness_ms, got {poll_ms}")));
        }
        let concurrency = *w.concurrency.get_ref();
        if concurrency == 0 || concurrency > 64 {
            return Err((at(&w.concurrency), format!("world.concurrency: 1 to 64, got {concurrency}")));
        }
        let settings = self.settings(liveness_ms)?;
        let skews = self.skews(&workers)?;
        let faults = self.faults(&workers, &settings)?;
        let runs = self.runs(&settings)?;
        let events = self.events(&workers, &settings, &faults)?;
        let plan = Plan { workers, concurrency, poll_ms, ttl_ms, runs, faults, skews, events };
        self.check_pace(&plan, &settings)?;
        Ok(PlanFile { scenario: self.scenario, seed, defects, expect, story: self.story, settings, plan })
    }

    /// The world's workers: 1 to 64, each a new worker name the world accepts.
    fn workers(&self) -> Result<Vec<String>, Bad> {
        let w = &self.world;
        let workers = w.workers.get_ref().clone();
        let mut seen = BTreeSet::new();
        if workers.is_empty() || workers.len() > 64 {
            return Err((at(&w.workers), format!("world.workers: 1 to 64 workers, got {}", workers.len())));
        }
        for name in &workers {
            // Exactly the names the world accepts (`w1`, `w2`, ...; not `w01` or `w+1`).
            let ok = matches!(Node::parse(name), Some(Node::Worker(_)));
            if !ok || !seen.insert(name.clone()) {
                return Err((at(&w.workers), format!("world.workers: '{name}' is not a new worker name w1, w2, ...")));
            }
        }
        Ok(workers)
    }

    /// The world's settings, each held to the scenario's upper bounds (`crate::scenario::LIMITS`
    /// hold for a plan too), an unset one at its default.
    fn settings(&self, liveness_ms: u32) -> Result<Settings, Bad> {
        let w = &self.world;
        let limits = &crate::scenario::LIMITS;
        let shape = WorldShape::default();
        let bounded = |key: &str, value: Option<&Spanned<u32>>, default: u32, max: u32| -> Result<u32, Bad> {
            match value {
                Some(v) if *v.get_ref() > max => {
                    Err((at(v), format!("world.{key}: at most {max}, got {}", v.get_ref())))
                }
                Some(v) => Ok(*v.get_ref()),
                None => Ok(default),
            }
        };
        bounded("ttl_ms", Some(&w.ttl_ms), 0, limits.ttl_ms)?;
        bounded("liveness_ms", Some(&w.liveness_ms), 0, limits.window_ms)?;
        Ok(Settings {
            fault_ms: bounded("fault_ms", Some(&w.fault_ms), 0, limits.window_ms)?,
            liveness_ms,
            retention_ms: bounded("retention_ms", w.retention_ms.as_ref(), 0, limits.window_ms)?,
            operator_ms: bounded("operator_ms", w.operator_ms.as_ref(), 0, limits.window_ms)?,
            boot_storm: bounded("boot_storm", w.boot_storm.as_ref(), 0, limits.boot_storm)?,
            call_ms: bounded("call_ms", w.call_ms.as_ref(), shape.call_ms, limits.step_ms)?,
            tool_ms: bounded("tool_ms", w.tool_ms.as_ref(), shape.tool_ms, limits.step_ms)?,
            legacy: self.legacy()?,
            colocated: w.colocated,
            misbind: w.misbind,
            corrupt: w.corrupt,
            repair_after_ms: bounded("repair_after_ms", w.repair_after_ms.as_ref(), 0, limits.step_ms)?,
            seq_gaps: w.seq_gaps,
        })
    }

    /// The workflows `w1` does not know (`world.legacy`), each a built-in workflow.
    fn legacy(&self) -> Result<Vec<String>, Bad> {
        let mut names = Vec::new();
        for name in &self.world.legacy {
            if !WORKFLOWS.contains(&name.get_ref().as_str()) {
                return Err((at(name), format!("world.legacy: unknown workflow '{}'", name.get_ref())));
            }
            names.push(name.get_ref().clone());
        }
        Ok(names)
    }

    /// The planted defects the plan runs with, and the checker it expects to fail, if any.
    fn targets(&self) -> Result<(Vec<Defect>, Option<String>), Bad> {
        let mut defects = Vec::new();
        for d in &self.defects {
            defects.push(Defect::parse(d.get_ref()).map_err(|e| (at(d), e))?);
        }
        let expect = match &self.expect {
            Some(e) if !fencesim_oracle::CHECKERS.iter().any(|c| c.name() == e.get_ref()) => {
                return Err((at(e), format!("expect: unknown checker '{}'", e.get_ref())));
            }
            e => e.as_ref().map(|e| e.get_ref().clone()),
        };
        Ok((defects, expect))
    }

    /// The seed: a whole number, written in quotes above `i64::MAX`.
    fn seed(&self) -> Result<u64, Bad> {
        let bad_seed = |shown: String| {
            (
                at(&self.seed),
                format!(
                    "seed: must be a whole number from 0 to {} (written in quotes above {}), got {shown}",
                    u64::MAX,
                    i64::MAX
                ),
            )
        };
        match self.seed.get_ref() {
            toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| bad_seed(n.to_string())),
            toml::Value::String(t) => t.parse().map_err(|_| bad_seed(format!("'{t}'"))),
            other => Err(bad_seed(other.to_string())),
        }
    }

    /// Each clocked node's skew, 0 where the plan names none.
    fn skews(&self, workers: &[String]) -> Result<BTreeMap<String, i64>, Bad> {
        let limits = &crate::scenario::LIMITS;
        let clocked = nodes_with_clocks(workers);
        let mut skews = BTreeMap::new();
        for node in &clocked {
            skews.insert(node.clone(), 0);
        }
        for (node, skew) in &self.skews {
            if !clocked.contains(node) {
                return Err((at(skew), format!("skews: unknown node '{node}' (known: {})", clocked.join(", "))));
            }
            if skew.get_ref().unsigned_abs() > u64::from(limits.step_ms) {
                let most = limits.step_ms;
                return Err((at(skew), format!("skews.{node}: at most {most} ms either way, got {}", skew.get_ref())));
            }
            skews.insert(node.clone(), *skew.get_ref());
        }

        Ok(skews)
    }

    /// Every fault kind's settings, off where the plan names none, each held to a scenario's
    /// bounds and, when on, able to fire in this world.
    fn faults(&self, workers: &[String], settings: &Settings) -> Result<Vec<Applied>, Bad> {
        if let Some((kind, f)) = self.faults.iter().find(|(k, _)| FaultKind::parse(k).is_none()) {
            let known: Vec<&str> = FaultKind::ALL.map(FaultKind::as_str).to_vec();
            return Err((at(f), format!("faults: unknown kind '{kind}' (known: {})", known.join(", "))));
        }
        let mut faults = Vec::new();
        for kind in FaultKind::ALL {
            let Some(doc) = self.faults.get(kind.as_str()) else {
                faults.push(Applied { kind, on: false, rate: 0.0, spec: FaultSpec::default() });
                continue;
            };
            faults.push(applied(kind, doc, workers, settings)?);
        }

        Ok(faults)
    }

    /// The runs, each starting inside this world's window under a known workflow.
    fn runs(&self, settings: &Settings) -> Result<Vec<RunPlan>, Bad> {
        let limits = &crate::scenario::LIMITS;
        let mut runs = Vec::new();
        let mut ids = BTreeSet::new();
        let latest = crate::scenario::Limits::latest_start_ms(settings.fault_ms, settings.liveness_ms);
        if let Some(r) = self.runs.get(limits.runs as usize) {
            return Err((at(r), format!("runs: at most {} runs, got {}", limits.runs, self.runs.len())));
        }
        for r in &self.runs {
            runs.push(run_plan(r, &mut ids, latest)?);
        }

        Ok(runs)
    }

    /// The timed events, inside the fault window, each of a kind that is on, and no denser than a
    /// scenario may draw them, in time order.
    fn events(
        &self,
        workers: &[String],
        settings: &Settings,
        faults: &[Applied],
    ) -> Result<Vec<(u32, Scheduled)>, Bad> {
        let limits = &crate::scenario::LIMITS;
        let mut events = Vec::new();
        if let Some(e) = self.events.get(limits.timed_events as usize) {
            return Err((at(e), format!("events: at most {} events, got {}", limits.timed_events, self.events.len())));
        }
        for e in &self.events {
            events.push(timed_event(e, workers, settings, faults)?);
        }
        self.check_density(settings)?;
        events.sort_by_key(|(at, _)| *at);

        Ok(events)
    }

    /// The timed events no denser than a scenario may draw them: a timed kind at most 50 events
    /// per second of the fault window (the fractional event by chance makes one more).
    fn check_density(&self, settings: &Settings) -> Result<(), Bad> {
        let most = u64::from(settings.fault_ms) * 50 / 1000 + 1;
        for (kind, name) in [("jump", "clock"), ("zombie", "zombie"), ("restart", "restart")] {
            let n = self.events.iter().filter(|e| e.get_ref().kind == kind).count() as u64;
            if n > most {
                let e = self.events.iter().rev().find(|e| e.get_ref().kind == kind).map_or(0, at);
                return Err((
                    e,
                    format!(
                        "events: {n} {kind} events in a fault window of {} ms, more than {name}'s 50 per second allow ({most})",
                        settings.fault_ms
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// One fault kind's table of a plan as applied: its rate within its unit's bound, its settings
/// held to a scenario's bounds and, when on, able to fire in this world.
fn applied(kind: FaultKind, doc: &Spanned<DocFault>, workers: &[String], settings: &Settings) -> Result<Applied, Bad> {
    let f = doc.get_ref();
    let bad = |message: String| (at(doc), format!("faults.{kind}: {message}"));
    let bound = if kind.is_per_point() { 1.0 } else { 50.0 };
    if !(f.rate.is_finite() && (0.0..=bound).contains(&f.rate)) {
        return Err(bad(format!("rate must be 0..={bound}, got {}", f.rate)));
    }
    let spec = spec_of(f).map_err(bad)?;
    // The bounds a scenario's settings are held to (stall factor, restart_ms, hold_ms, max_ms).
    spec.check_settings(kind, f.on).map_err(|(key, message)| bad(format!("{key}: {message}")))?;
    // As in a scenario: a kind that is on fires at some rate.
    if f.on && f.rate <= 0.0 {
        return Err(bad("on at rate 0: it could never fire; give it a rate above 0, or switch it off".into()));
    }
    // As in a scenario: a fault that is on must be able to fire in this world.
    if f.on {
        if spec.sites.is_empty() || spec.nodes.is_empty() {
            return Err(bad("sites and nodes may not be empty: the fault could never fire".into()));
        }
        let exists = |n: &NodeTarget| match n {
            NodeTarget::Node(node @ Node::Worker(_)) => workers.contains(&node.to_string()),
            NodeTarget::Node(Node::Sweeper) => settings.retention_ms > 0,
            NodeTarget::Node(Node::Operator) => settings.operator_ms > 0,
            NodeTarget::Any | NodeTarget::Workers | NodeTarget::Node(_) => true,
        };
        // A drawn plan may list workers its world drew too few of; it fires at the rest.
        if !spec.nodes.iter().any(exists) {
            let listed: Vec<String> = spec.nodes.iter().map(ToString::to_string).collect();
            return Err(bad(format!("none of its nodes ({}) exists in this world", listed.join(", "))));
        }
    }
    Ok(Applied { kind, on: f.on, rate: f.rate, spec })
}

/// The spec a plan's fault table names: its sites and nodes parsed, the settings it leaves out at
/// their defaults (why not, when a name is unknown).
fn spec_of(f: &DocFault) -> Result<FaultSpec, String> {
    let d = FaultSpec::default();
    let sites = match &f.sites {
        Some(names) => names.iter().map(|s| SiteTarget::parse(s)).collect::<Result<_, _>>()?,
        None => d.sites.clone(),
    };
    let nodes = match &f.nodes {
        Some(names) => names
            .iter()
            .map(|n| NodeTarget::parse(n).map_err(|_| format!("unknown node '{n}'")))
            .collect::<Result<_, _>>()?,
        None => d.nodes.clone(),
    };
    Ok(FaultSpec {
        sites,
        nodes,
        factor: f.factor.unwrap_or(d.factor),
        expiry: f.expiry.unwrap_or(d.expiry),
        restart_ms: f.restart_ms.unwrap_or(d.restart_ms),
        max_ms: f.max_ms.unwrap_or(d.max_ms),
        hold_ms: f.hold_ms.unwrap_or(d.hold_ms),
        ..d
    })
}

/// One timed event of a plan, checked: inside the fault window, a known kind with the settings
/// it needs, at a worker of this world, of a fault kind that is on.
fn timed_event(
    e: &Spanned<DocEvent>,
    workers: &[String],
    settings: &Settings,
    faults: &[Applied],
) -> Result<(u32, Scheduled), Bad> {
    let ev = e.get_ref();
    let bad = |message: String| (at(e), format!("events: {message}"));
    // Timed events happen in the fault window, as a scenario draws them: one after
    // quiescence would disturb the world the liveness bound is judging.
    if ev.at_ms >= settings.fault_ms {
        return Err(bad(format!(
            "at_ms {} is not inside the fault window (below fault_ms {})",
            ev.at_ms, settings.fault_ms
        )));
    }
    let worker = || match &ev.node {
        Some(node) if workers.contains(node) => Ok(node.clone()),
        Some(node) => Err(bad(format!("node '{node}' is not a worker ({})", workers.join(", ")))),
        None => Err(bad(format!("a {} event needs a node", ev.kind))),
    };
    let scheduled = match ev.kind.as_str() {
        "jump" => {
            let delta_ms = ev.delta_ms.ok_or_else(|| bad("a jump needs delta_ms".into()))?;
            if delta_ms.unsigned_abs() > u64::from(LIMITS.step_ms) {
                return Err(bad(format!("delta_ms at most {} either way, got {delta_ms}", LIMITS.step_ms)));
            }
            Scheduled::Jump { node: worker()?, delta_ms }
        }
        "zombie" => Scheduled::Zombie,
        "restart" => {
            let after_ms = ev.after_ms.ok_or_else(|| bad("a restart needs after_ms".into()))?;
            if after_ms > LIMITS.step_ms {
                return Err(bad(format!("after_ms at most {}, got {after_ms}", LIMITS.step_ms)));
            }
            Scheduled::Restart { node: worker()?, after_ms }
        }
        other => return Err(bad(format!("unknown kind '{other}' (known: jump, zombie, restart)"))),
    };
    // An event of a kind that is off never fires (a zombie probe needs the zombie): refused,
    // not run as if it were there.
    let kind = scheduled.kind();
    if !faults.iter().any(|f| f.kind == kind && f.on) {
        return Err(bad(format!(
            "a {} event at {} ms, but faults.{kind} is off: it could never fire; switch the kind on, or remove \
             the event",
            ev.kind, ev.at_ms
        )));
    }
    Ok((ev.at_ms, scheduled))
}

/// One run of a plan file, checked: a unique id without spaces (`ids` holds those seen so far),
/// a start no later than `latest`, a cancel inside the window, a known workflow.
fn run_plan(r: &Spanned<DocRun>, ids: &mut BTreeSet<String>, latest: u32) -> Result<RunPlan, Bad> {
    let run = r.get_ref();
    let limits = &crate::scenario::LIMITS;
    if run.id.is_empty() || run.id.contains(char::is_whitespace) || !ids.insert(run.id.clone()) {
        return Err((at(r), format!("runs: id '{}' is empty, has spaces or repeats", run.id)));
    }
    // This world's window, as for a scenario's start_ms: a run started later has too little
    // of the liveness bound left to settle and would be reported as never reaching the store.
    if run.start_ms > latest {
        return Err((
            at(r),
            format!(
                "runs: '{}' starts at {} ms, later than fault_ms + liveness_ms / 2 = {latest} ms of this world",
                run.id, run.start_ms
            ),
        ));
    }
    let window = limits.window_ms;
    if run.cancel_ms.is_some_and(|ms| ms > window) {
        return Err((at(r), format!("runs: '{}' is cancelled later than {window} ms", run.id)));
    }
    if !WORKFLOWS.contains(&run.workflow.as_str()) {
        return Err((at(r), format!("runs: unknown workflow '{}' (known: {})", run.workflow, WORKFLOWS.join(", "))));
    }
    Ok(RunPlan {
        id: RunId::new(run.id.clone()),
        workflow: run.workflow.clone(),
        start_ms: run.start_ms,
        resolve: run.resolve,
        recreate: run.recreate,
        cancel_ms: run.cancel_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    #[test]
    fn every_built_in_plan_round_trips() {
        for (name, _) in catalogue::SCENARIOS {
            let scenario = catalogue::scenario(name).expect("built in");
            for seed in [1, 7, u64::MAX] {
                let file = PlanFile::draw(&scenario, seed, &[]);
                let text = file.to_toml();
                let back = PlanFile::parse(Path::new("p.toml"), &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
                assert_eq!(back, file, "{name} seed {seed}");
                assert_eq!(back.to_toml(), text);
            }
        }
    }

    #[test]
    fn bad_plans_name_the_file_and_line() {
        let scenario = catalogue::scenario("swarm").expect("built in");
        let text = PlanFile::draw(&scenario, 3, &[]).to_toml();
        let line_of = |needle: &str| text.lines().position(|l| l.starts_with(needle)).expect("present") + 1;
        let cases = [
            ("ttl_ms = 1000", "ttl_ms = 0", "world.ttl_ms"),
            ("format = ", "format = \"fencesim.plan/9\"", "format"),
            ("concurrency = ", "concurrency = \"x\"", "invalid type"),
            ("fault_ms = ", "fault_ms = 4000000000", "world.fault_ms: at most 600000"),
            ("ttl_ms = 1000", "ttl_ms = 2000000000", "world.ttl_ms: at most 60000"),
            ("call_ms = ", "call_ms = 4000000000", "world.call_ms: at most 60000"),
            ("boot_storm = ", "boot_storm = 100000", "world.boot_storm: at most 256"),
        ];
        for (from, to, says) in cases {
            let line = line_of(from);
            let edited: String =
                text.lines().map(|l| if l.starts_with(from) { to } else { l }).collect::<Vec<_>>().join("\n");
            let e = PlanFile::parse(Path::new("p.toml"), &edited).expect_err(to);
            assert_eq!((e.path.as_str(), e.line), ("p.toml", Some(line)), "{e}");
            assert!(e.to_string().contains(says), "{e}");
        }
        let e = PlanFile::parse(
            Path::new("p.toml"),
            &format!("{text}\n[[events]]\nat_ms = 5\nkind = \"jump\"\nnode = \"w99\"\ndelta_ms = 3\n"),
        )
        .expect_err("unknown node");
        assert!(e.to_string().contains("node 'w99' is not a worker"), "{e}");
        assert_eq!(e.line, Some(text.lines().count() + 2), "{e}");
    }

    /// As in a scenario, a fault that is on must be able to fire (a node of its world, a site),
    /// and a run must start within the world's window; a world of no runs stays legal (a shrunk
    /// plan of a store defect may need none).
    #[test]
    fn a_plan_whose_fault_can_never_fire_or_whose_run_never_starts_is_refused() {
        let scenario = catalogue::scenario("mid-call-takeover").expect("built in");
        let text = PlanFile::draw(&scenario, 1, &[]).to_toml();
        let (head, takeover) = text.split_once("[faults.takeover]").expect("a takeover section");
        let takeover_with = |line: &str, to: &str| format!("{head}[faults.takeover]{}", takeover.replacen(line, to, 1));
        let cases = [
            (takeover_with("nodes = [\"any\"]", "nodes = [\"w9\"]"), "none of its nodes (w9) exists"),
            (takeover_with("nodes = [\"any\"]", "nodes = [\"sweeper\"]"), "none of its nodes (sweeper) exists"),
            (takeover_with("nodes = [\"any\"]", "nodes = []"), "the fault could never fire"),
            (takeover_with("sites = [\"any\"]", "sites = []"), "the fault could never fire"),
            (text.replacen("\nstart_ms = ", "\nstart_ms = 99999999 #", 1), "later than fault_ms + liveness_ms / 2"),
        ];
        for (edited, says) in cases {
            let e = PlanFile::parse(Path::new("p.toml"), &edited).expect_err(says);
            assert!(e.to_string().contains(says), "{e}");
        }
        let fired_elsewhere = takeover_with("nodes = [\"any\"]", "nodes = [\"w1\", \"w9\"]");
        PlanFile::parse(Path::new("p.toml"), &fired_elsewhere).expect("w1 exists");
        let no_runs: String = text.split("\n[[runs]]").next().unwrap_or_default().to_owned();
        let empty = PlanFile::parse(Path::new("p.toml"), &no_runs).expect("no runs is a legal plan");
        assert!(empty.plan.runs.is_empty());
    }

    /// A plan naming a fault that could never fire is refused with its line, not run silently: an
    /// event of a kind that is off (a zombie probe with no zombie, a clock jump with the clock
    /// off, a restart with restarts off), and a kind on at rate 0.
    #[test]
    fn a_plan_naming_a_fault_that_cannot_fire_is_refused_with_its_line() {
        let scenario = catalogue::scenario("mid-call-takeover").expect("built in");
        let text = PlanFile::draw(&scenario, 1, &[]).to_toml();
        let lines = text.lines().count();
        let off = |kind: &str| format!("[faults.{kind}]\non = false\nrate = 0.0\n");
        for kind in ["zombie", "clock", "restart"] {
            assert!(text.contains(&off(kind)), "{kind} is not off at rate 0 in this plan:\n{text}");
        }
        let events = [
            ("zombie", "[[events]]\nat_ms = 5\nkind = \"zombie\"\n"),
            ("clock", "[[events]]\nat_ms = 5\nkind = \"jump\"\nnode = \"w1\"\ndelta_ms = 300\n"),
            ("restart", "[[events]]\nat_ms = 5\nkind = \"restart\"\nnode = \"w1\"\nafter_ms = 300\n"),
        ];
        for (kind, event) in events {
            let e = PlanFile::parse(Path::new("p.toml"), &format!("{text}\n{event}")).expect_err(kind);
            assert_eq!(e.line, Some(lines + 2), "{e}");
            assert!(e.to_string().contains(&format!("but faults.{kind} is off: it could never fire")), "{e}");
            // Switched on, the same event is a plan.
            let on = text.replacen(&off(kind), &format!("[faults.{kind}]\non = true\nrate = 1.0\n"), 1);
            PlanFile::parse(Path::new("p.toml"), &format!("{on}\n{event}")).unwrap_or_else(|e| panic!("{kind}: {e}"));
        }
        let (head, takeover) = text.split_once("[faults.takeover]").expect("a takeover section");
        let rate = takeover.lines().find(|l| l.starts_with("rate = ")).expect("a rate");
        let zero = format!("{head}[faults.takeover]{}", takeover.replacen(rate, "rate = 0.0", 1));
        let e = PlanFile::parse(Path::new("p.toml"), &zero).expect_err("rate 0");
        assert!(e.to_string().contains("faults.takeover: on at rate 0: it could never fire"), "{e}");
        let header = text.lines().position(|l| l == "[faults.takeover]").expect("a header") + 1;
        assert!(e.line.is_some_and(|l| (header..header + 3).contains(&l)), "{e}");
    }

    /// A plan is held to the bounds of a scenario, counts included, with one check shared by
    /// both: a run that starts after this world's window (not the 600,000 ms limit), fault
    /// settings out of bounds (stall factor, restart_ms, hold_ms, max_ms), restarts, jumps and
    /// skews longer than a step, too many runs or events, events denser than a scenario draws,
    /// events after quiescence, and more worker polls than a scenario may make. Each is refused
    /// naming its line.
    #[test]
    fn a_plan_is_held_to_the_bounds_of_a_scenario() {
        let scenario = catalogue::scenario("swarm").expect("built in");
        let file = PlanFile::draw(&scenario, 3, &[]);
        let text = file.to_toml();
        let (fault_ms, liveness_ms) = (file.settings.fault_ms, file.settings.liveness_ms);
        let latest = fault_ms + liveness_ms / 2;
        let set = |text: &str, section: &str, key: &str, value: &str| -> String {
            let start = text.find(section).unwrap_or_else(|| panic!("{section}"));
            let at = start + text[start..].find(&format!("\n{key} = ")).unwrap_or_else(|| panic!("{key}")) + 1;
            let end = at + text[at..].find('\n').unwrap_or(text.len() - at);
            format!("{}{key} = {value}{}", &text[..at], &text[end..])
        };
        let stall_on = set(&text, "[faults.stall]", "on", "true");
        let mut runs = String::new();
        for i in 0..=LIMITS_RUNS {
            runs.push_str(&format!("\n[[runs]]\nid = \"x{i}\"\nworkflow = \"happy\"\n"));
        }
        let zombies = |n: u32| -> String {
            (0..n).map(|i| format!("\n[[events]]\nat_ms = {}\nkind = \"zombie\"\n", i % fault_ms)).collect()
        };
        let cases: Vec<(String, String)> = vec![
            (set(&text, "[[runs]]", "start_ms", "500000"), "later than fault_ms + liveness_ms / 2".into()),
            (set(&text, "[[runs]]", "start_ms", &(latest + 1).to_string()), format!("= {latest} ms of this world")),
            (set(&stall_on, "[faults.stall]", "factor", "[1e30, 1e30]"), "factor: at most 100 ttls".into()),
            (set(&stall_on, "[faults.stall]", "factor", "[0.0, 0.0]"), "factor: must be above 0".into()),
            (set(&text, "[faults.crash]", "restart_ms", "[1, 4294967295]"), "restart_ms: at most 60000".into()),
            (set(&text, "[faults.busy]", "hold_ms", "[4294967295, 4294967295]"), "hold_ms: at most 60000".into()),
            (set(&text, "[faults.clock]", "max_ms", "86400000"), "max_ms: at most 60000".into()),
            (set(&text, "[skews]", "w1", "86400000"), "skews.w1: at most 60000 ms".into()),
            (
                format!("{text}\n[[events]]\nat_ms = 1\nkind = \"restart\"\nnode = \"w1\"\nafter_ms = 4294967295\n"),
                "after_ms at most 60000".into(),
            ),
            (
                format!("{text}\n[[events]]\nat_ms = 1\nkind = \"jump\"\nnode = \"w1\"\ndelta_ms = 86400000\n"),
                "delta_ms at most 60000".into(),
            ),
            (
                format!("{text}\n[[events]]\nat_ms = {fault_ms}\nkind = \"zombie\"\n"),
                "is not inside the fault window".into(),
            ),
            (format!("{text}{runs}"), format!("runs: at most {LIMITS_RUNS} runs")),
            (
                format!("{}{}", set(&text, "[faults.zombie]", "on", "true"), zombies(fault_ms * 50 / 1000 + 2)),
                "more than zombie's 50 per second allow".into(),
            ),
            (format!("{text}{}", zombies(10_001)), "events: at most 10000 events".into()),
            (
                set(
                    &set(
                        &text,
                        "[world]",
                        "workers",
                        &format!("[{}]", (1..=64).map(|i| format!("\"w{i}\"")).collect::<Vec<_>>().join(", ")),
                    ),
                    "[world]",
                    "poll_ms",
                    "1",
                ),
                "would poll".into(),
            ),
        ];
        for (edited, says) in cases {
            let e = PlanFile::parse(Path::new("p.toml"), &edited).expect_err(&says);
            assert!(e.to_string().contains(&says) && e.line.is_some(), "{says}: {e}");
        }
        // At the bounds themselves, a plan is legal.
        PlanFile::parse(Path::new("p.toml"), &set(&text, "[[runs]]", "start_ms", &latest.to_string()))
            .expect("latest start");
        PlanFile::parse(Path::new("p.toml"), &set(&stall_on, "[faults.stall]", "factor", "[100.0, 100.0]"))
            .expect("factor 100");
    }

    const LIMITS_RUNS: u32 = crate::scenario::LIMITS.runs;

    /// As in a scenario, a site or node listed twice is refused naming the fault's line: every
    /// fault point scans the lists, so a repeated name cost each point the list's length.
    #[test]
    fn a_plan_listing_a_site_or_node_twice_is_refused() {
        let scenario = catalogue::scenario("mid-call-takeover").expect("built in");
        let text = PlanFile::draw(&scenario, 1, &[]).to_toml();
        let (head, takeover) = text.split_once("[faults.takeover]").expect("a takeover section");
        let header = text.lines().position(|l| l == "[faults.takeover]").expect("a header") + 1;
        for (from, to, says) in [
            ("sites = [\"any\"]", "sites = [\"any\", \"any\"]", "faults.takeover: sites: 'any' is listed twice"),
            ("nodes = [\"any\"]", "nodes = [\"w1\", \"any\", \"w1\"]", "faults.takeover: nodes: 'w1' is listed twice"),
        ] {
            let edited = format!("{head}[faults.takeover]{}", takeover.replacen(from, to, 1));
            let e = PlanFile::parse(Path::new("p.toml"), &edited).expect_err(to);
            assert!(e.to_string().contains(says), "{e}");
            assert!(e.line.is_some_and(|l| (header..header + 12).contains(&l)), "{e}");
        }
    }

    /// A seed that is not a whole number from 0 to u64::MAX is refused saying what a seed must be,
    /// with its line (not serde's "did not match any variant"); a worker name the world would
    /// refuse (`w01`, `w+1`, `w0`) is refused here, with the file and line.
    #[test]
    fn a_bad_seed_or_worker_name_is_refused_with_what_it_must_be() {
        let scenario = catalogue::scenario("swarm").expect("built in");
        let text = PlanFile::draw(&scenario, 3, &[]).to_toml();
        let line_of = |needle: &str| text.lines().position(|l| l.starts_with(needle)).expect("present") + 1;
        for seed in ["-1", "1.5", "\"abc\"", "true", "\"18446744073709551616\""] {
            let edited = text.replacen("seed = 3\n", &format!("seed = {seed}\n"), 1);
            let e = PlanFile::parse(Path::new("p.toml"), &edited).expect_err(seed);
            assert_eq!(e.line, Some(line_of("seed = ")), "{e}");
            assert!(e.to_string().contains("seed: must be a whole number from 0 to 18446744073709551615"), "{e}");
            assert!(!e.to_string().contains("variant"), "{e}");
        }
        let big = text.replacen("seed = 3\n", "seed = \"18446744073709551615\"\n", 1);
        assert_eq!(PlanFile::parse(Path::new("p.toml"), &big).expect("u64::MAX").seed, u64::MAX);
        for name in ["w01", "w+1", "w0", "w4294967296", "W1"] {
            let edited = text.replacen("workers = [\"w1\"", &format!("workers = [\"{name}\""), 1);
            let e = PlanFile::parse(Path::new("p.toml"), &edited).expect_err(name);
            assert_eq!(e.line, Some(line_of("workers = ")), "{e}");
            assert!(e.to_string().contains(&format!("'{name}' is not a new worker name")), "{e}");
        }
    }
}
