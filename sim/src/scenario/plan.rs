//! A world's plan: the point a seed picks inside its scenario's ranges. The workload (runs, their
//! workflows and what the client does to each), the applied fault configuration (swarm testing:
//! each kind on or off, with a rate), the nodes' clock skews and the supervisor's timed events.
//! Drawn before the world starts and printed at the head of its trace.

use std::collections::BTreeMap;

use fencesim_store::RunId;

use crate::node::{Node, NodeTarget};
use crate::rng::Stream;
use crate::scenario::{FaultKind, FaultSpec, Scenario, Span};

/// One fault kind as applied to this seed: on or off, and the rate drawn from its range.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub kind: FaultKind,
    pub on: bool,
    pub rate: f64,
    /// The scenario's settings for the kind (sites, nodes, stall factor, restart delay...).
    pub spec: FaultSpec,
}

impl Applied {
    /// Whether it hits `node`.
    pub fn hits(&self, node: Node) -> bool {
        self.spec.nodes.iter().any(|n| n.hits(node))
    }

    /// Keep only the nodes `keep` accepts; a fault left aiming at nobody is switched off. A draw
    /// drops the workers its world did not draw this way (so the plan of a seed names only nodes
    /// of its world, and runs again as the same world), and shrink drops a worker the same way.
    pub fn retain_nodes(&mut self, keep: impl Fn(&NodeTarget) -> bool) {
        self.spec.nodes.retain(|n| keep(n));
        if self.spec.nodes.is_empty() {
            self.on = false;
        }
    }

    fn describe(&self) -> String {
        if !self.on {
            return format!("{:<8} off", self.kind);
        }
        let spec = &self.spec;
        let extra = match self.kind {
            FaultKind::Stall if spec.expiry.0 > 0.0 => {
                format!(" factor=[{}, {}]x ttl expiry={}", spec.factor.0, spec.factor.1, spec.expiry.0)
            }
            FaultKind::Stall => format!(" factor=[{}, {}]x ttl", spec.factor.0, spec.factor.1),
            FaultKind::Takeover if spec.expiry.0 > 0.0 => format!(" expiry={}", spec.expiry.0),
            FaultKind::Crash | FaultKind::Restart => format!(" restart_ms={}", spec.restart_ms),
            FaultKind::Clock => format!(" max_ms={}", spec.max_ms),
            FaultKind::Busy => format!(" hold_ms={}", spec.hold_ms),
            FaultKind::Takeover | FaultKind::Zombie | FaultKind::Error => String::new(),
        };
        let sites = if self.kind.aims_at_sites() {
            let sites: Vec<&str> = spec.sites.iter().map(|s| s.as_str()).collect();
            format!(" sites={}", sites.join(","))
        } else {
            String::new()
        };
        let nodes = if spec.nodes.contains(&NodeTarget::Any) {
            String::new()
        } else {
            let nodes: Vec<String> = spec.nodes.iter().map(ToString::to_string).collect();
            format!(" nodes={}", nodes.join(","))
        };
        format!("{:<8} on  rate={:.4}{sites}{nodes}{extra}", self.kind, self.rate)
    }
}

/// What the client does with one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunPlan {
    pub id: RunId,
    pub workflow: String,
    /// Virtual ms after the world starts at which the client starts it.
    pub start_ms: u32,
    /// Resolve its suspension once it waits on one.
    pub resolve: bool,
    /// Once settled, delete it and start it again under the same id.
    pub recreate: bool,
    /// Cancel the client's own segment this long after starting it.
    pub cancel_ms: Option<u32>,
}

/// A supervisor event at a virtual time.
#[derive(Clone, Debug, PartialEq)]
pub enum Scheduled {
    /// A node's clock jumps by `delta_ms`.
    Jump { node: String, delta_ms: i64 },
    /// A superseded holder wakes and probes every write surface.
    Zombie,
    /// A worker is stopped gracefully, then started again.
    Restart { node: String, after_ms: u32 },
}

impl Scheduled {
    /// The fault kind it is an event of, which must be on for it to fire.
    pub fn kind(&self) -> FaultKind {
        match self {
            Scheduled::Jump { .. } => FaultKind::Clock,
            Scheduled::Zombie => FaultKind::Zombie,
            Scheduled::Restart { .. } => FaultKind::Restart,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub workers: Vec<String>,
    pub concurrency: u32,
    pub poll_ms: u32,
    pub ttl_ms: u32,
    pub runs: Vec<RunPlan>,
    pub faults: Vec<Applied>,
    /// Initial clock skew per node.
    pub skews: BTreeMap<String, i64>,
    /// Supervisor events by virtual ms.
    pub events: Vec<(u32, Scheduled)>,
}

/// Every node that has a clock of its own.
pub fn nodes_with_clocks(workers: &[String]) -> Vec<String> {
    let mut nodes = workers.to_vec();
    nodes.extend([Node::Sweeper, Node::Client, Node::Operator, Node::Zombie].map(|n| n.to_string()));
    nodes
}

impl Plan {
    pub fn draw(scenario: &Scenario, seed: u64) -> Plan {
        let root = Stream::new(seed);
        let w = &scenario.world;
        let mut shape = root.fork("shape");
        let workers: Vec<String> = (1..=span(&mut shape, w.workers)).map(|i| format!("w{i}")).collect();
        let concurrency = span(&mut shape, w.concurrency);
        let poll_ms = span(&mut shape, w.poll_ms);

        let mut load = root.fork("workload");
        let count = span(&mut load, w.runs);
        let runs = (1..=count)
            .map(|i| {
                let workflow = load.pick(&w.workflows).cloned().unwrap_or_else(|| "happy".into());
                let start_ms = u32::try_from(load.below(u64::from(w.start_ms) + 1)).unwrap_or(0);
                let resolve = load.chance(w.resolve.0);
                let recreate = load.chance(w.recreate.0);
                let cancel_ms = load.chance(w.cancel.0).then(|| u32::try_from(load.range(1, 200)).unwrap_or(1));
                let id = if w.prefix_ids { format!("r{i}") } else { format!("r{i:02}") };
                RunPlan { id: RunId::new(id), workflow, start_ms, resolve, recreate, cancel_ms }
            })
            .collect();

        let mut swarm = root.fork("swarm");
        let mut faults: Vec<Applied> =
            scenario.faults.kinds().into_iter().map(|(kind, ranges)| applied(&mut swarm, kind, ranges)).collect();
        // A scenario may aim a fault at a worker its ranges allow but this seed did not draw: it
        // never fires at it, so the world of this seed aims at the workers it has (and a fault
        // aimed at none of them is off). Faults that name no absent worker are left untouched.
        let drawn = |n: &NodeTarget| match n {
            NodeTarget::Node(node @ Node::Worker(_)) => workers.contains(&node.to_string()),
            _ => true,
        };
        for fault in &mut faults {
            if !fault.spec.nodes.iter().all(drawn) {
                fault.retain_nodes(drawn);
            }
        }
        let fault = |kind: FaultKind| faults.iter().find(|f| f.kind == kind).cloned();

        let mut clocks = root.fork("clocks");
        let clock = fault(FaultKind::Clock);
        let skew_bound = clock.as_ref().filter(|c| c.on).map_or(0, |c| i64::from(c.spec.max_ms));
        let skews: BTreeMap<String, i64> = nodes_with_clocks(&workers)
            .into_iter()
            .map(|node| {
                let skew = if skew_bound == 0 {
                    0
                } else {
                    i64::try_from(clocks.below(u64::try_from(2 * skew_bound + 1).unwrap_or(1))).unwrap_or(0)
                        - skew_bound
                };
                (node, skew)
            })
            .collect();

        // Clock skews lie within the clock fault's bound, which the liveness window allows for.
        assert!(skews.values().all(|s| s.abs() <= skew_bound), "a skew past the bound of {skew_bound} ms");
        let events = draw_events(root.fork("events"), w.fault_ms, &workers, &faults);
        Plan { workers, concurrency, poll_ms, ttl_ms: w.ttl_ms, runs, faults, skews, events }
    }

    pub fn fault(&self, kind: FaultKind) -> Option<&Applied> {
        self.faults.iter().find(|f| f.kind == kind && f.on)
    }

    /// The applied configuration, one line each, for the head of the trace.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "nodes    workers={} concurrency={} poll_ms={} ttl_ms={}",
            self.workers.len(),
            self.concurrency,
            self.poll_ms,
            self.ttl_ms
        )];
        let flags = |r: &RunPlan| {
            let mut f = Vec::new();
            if r.resolve {
                f.push("resolve".to_owned());
            }
            if r.recreate {
                f.push("recreate".to_owned());
            }
            if let Some(ms) = r.cancel_ms {
                f.push(format!("cancel@{ms}ms"));
            }
            f.join(",")
        };
        let runs: Vec<String> = self
            .runs
            .iter()
            .map(|r| {
                format!(
                    "{}:{}@{}ms{}",
                    r.id,
                    r.workflow,
                    r.start_ms,
                    if flags(r).is_empty() { String::new() } else { format!("[{}]", flags(r)) }
                )
            })
            .collect();
        lines.push(format!("runs     {}", runs.join(" ")));
        lines.extend(self.faults.iter().map(|f| format!("fault    {}", f.describe())));
        let skews: Vec<String> =
            self.skews.iter().filter(|(_, s)| **s != 0).map(|(n, s)| format!("{n}={s:+}ms")).collect();
        if !skews.is_empty() {
            lines.push(format!("skew     {}", skews.join(" ")));
        }
        for (at, event) in &self.events {
            let what = match event {
                Scheduled::Jump { node, delta_ms } => format!("clock jump {node} {delta_ms:+}ms"),
                Scheduled::Zombie => "zombie probe".to_owned(),
                Scheduled::Restart { node, after_ms } => format!("graceful restart {node} (back after {after_ms}ms)"),
            };
            lines.push(format!("event    {at}ms {what}"));
        }
        lines
    }
}

fn applied(swarm: &mut Stream, kind: FaultKind, ranges: &FaultSpec) -> Applied {
    let on = swarm.chance(ranges.on.0);
    let rate = swarm.unit_range(ranges.rate.0, ranges.rate.1.max(ranges.rate.0));
    Applied { kind, on, rate, spec: ranges.clone() }
}

/// `expected` events (the fractional part by chance) at uniform times in `[0, window_ms)`.
fn times(s: &mut Stream, expected: f64, window_ms: u32) -> Vec<u32> {
    let whole = expected.floor();
    let n = whole as u64 + u64::from(s.chance(expected - whole));
    (0..n).map(|_| u32::try_from(s.below(u64::from(window_ms))).unwrap_or(0)).collect()
}

/// A value drawn uniformly from an inclusive span.
fn span(s: &mut Stream, span: Span) -> u32 {
    u32::try_from(s.range(u64::from(span.0), u64::from(span.1))).unwrap_or(span.1)
}

/// The timed events of a world (clock jumps, zombies, restarts) in its fault window, drawn from
/// the `events` stream in time order.
fn draw_events(mut timeline: Stream, fault_ms: u32, workers: &[String], faults: &[Applied]) -> Vec<(u32, Scheduled)> {
    let fault = |kind: FaultKind| faults.iter().find(|f| f.kind == kind).cloned();
    let clock = fault(FaultKind::Clock);
    let mut events = Vec::new();
    let window = f64::from(fault_ms) / 1000.0;
    if let Some(clock) = clock.filter(|c| c.on && c.spec.max_ms > 0) {
        let max = i64::from(clock.spec.max_ms);
        for at in times(&mut timeline, clock.rate * window, fault_ms) {
            let node = timeline.pick(workers).cloned().unwrap_or_default();
            let delta_ms = i64::try_from(timeline.below(u64::try_from(2 * max + 1).unwrap_or(1))).unwrap_or(0) - max;
            events.push((at, Scheduled::Jump { node, delta_ms }));
        }
    }
    if let Some(zombie) = fault(FaultKind::Zombie).filter(|z| z.on) {
        for at in times(&mut timeline, zombie.rate * window, fault_ms) {
            events.push((at, Scheduled::Zombie));
        }
    }
    if let Some(restart) = fault(FaultKind::Restart).filter(|r| r.on) {
        for at in times(&mut timeline, restart.rate * window, fault_ms) {
            let node = timeline.pick(workers).cloned().unwrap_or_default();
            let after_ms = span(&mut timeline, restart.spec.restart_ms);
            events.push((at, Scheduled::Restart { node, after_ms }));
        }
    }
    events.sort_by_key(|(at, _)| *at);
    // Timed events fall in the fault window, as a plan file's must.
    assert!(events.iter().all(|(at, _)| *at < fault_ms), "a timed event past the fault window of {fault_ms} ms");
    events
}
