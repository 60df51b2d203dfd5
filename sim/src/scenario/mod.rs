//! Scenarios: named world shapes read from `scenarios/*.toml`. A scenario gives ranges; a seed
//! picks a point inside them (the workload) and, per fault kind, whether it is on and how often
//! it fires (swarm testing). A malformed file is refused with its path and line.

pub mod pace;
pub mod plan;
pub mod planfile;
mod planwrite;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::Error as _;

use fencesim_store::TIMER_MS_MAX;

use crate::node::{Node, NodeTarget};
use crate::site::SiteClass;

/// A scenario as written in its file. Every field has a default, so a file states only what makes
/// it different.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The scenario's name: its file stem.
    #[serde(skip)]
    pub name: String,
    /// How `--scenario` names it: a built-in name, or the path of its file.
    #[serde(skip)]
    pub source: String,
    /// One line: what the scenario is for.
    pub description: String,
    /// The planted defects this scenario is the targeted hunt for (the kill matrix runs them here).
    #[serde(default)]
    pub targets: Vec<String>,
    /// The coverage events this scenario exists to produce (`crate::coverage::events`);
    /// `sweep --require-coverage` fails when one never happened.
    #[serde(default)]
    pub aims: Vec<String>,
    #[serde(default)]
    pub world: WorldShape,
    #[serde(default)]
    pub faults: FaultRanges,
    /// A fixed plan (a world run from a plan file, `crate::scenario::planfile`): used instead of drawing one.
    #[serde(skip)]
    pub plan: Option<std::sync::Arc<crate::scenario::plan::Plan>>,
}

/// The world and its workload.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorldShape {
    /// Queue workers (a range `[lo, hi]`).
    pub workers: Span,
    /// Runs each worker drives at once.
    pub concurrency: Span,
    pub ttl_ms: u32,
    pub poll_ms: Span,
    /// How many runs the client starts, spread over `start_ms`.
    pub runs: Span,
    pub start_ms: u32,
    /// Workflow shapes the client picks from: `happy`, `limit`, `approval`.
    pub workflows: Vec<String>,
    /// Share of suspended runs the client resolves (the rest stay waiting).
    pub resolve: Ratio,
    /// Share of settled runs the client deletes and starts again under the same id.
    pub recreate: Ratio,
    /// Share of its runs the client cancels while driving them.
    pub cancel: Ratio,
    /// A retention sweeper deleting settled runs older than this; 0 for none.
    pub retention_ms: u32,
    /// The operator runs `audit --repair` this often; 0 for never.
    pub operator_ms: u32,
    /// Nodes that boot at the same instant before the workload (the boot-storm).
    pub boot_storm: u32,
    /// Virtual milliseconds of faults; then quiescence.
    pub fault_ms: u32,
    /// After quiescence, the bound within which every run must settle or wait on a suspension.
    pub liveness_ms: u32,
    /// Simulated model call and tool durations.
    pub call_ms: u32,
    pub tool_ms: u32,
    /// Workflows the first worker, `w1`, does not know (a fleet mid-upgrade): it poisons a run
    /// bound to one of them for its genesis, and skips it from then on, while the others drive it.
    pub legacy: Vec<String>,
    /// The client also runs a queue worker over its own engine (one process that starts runs
    /// and sweeps): its sweeps meet the runs the client's own segments are driving.
    pub colocated: bool,
    /// Once per waiting run, the operator resumes it under another workflow than the one it is
    /// bound to (a mistaken `resume`): the segment must refuse the binding before any write.
    pub misbind: bool,
    /// Until quiescence, the operator overwrites the checkpoint of a dangling dispatch with bytes
    /// that do not decode (under a brief lease of the run, as a restore of a bad backup would):
    /// the next resume must start that dispatch over.
    pub corrupt: bool,
    /// The operator repairs this long after its audit (a person reading the report first), so
    /// runs move on in between; 0 repairs at once.
    pub repair_after_ms: u32,
    /// Run ids without their padding (`r1` ... `r9`, `r10`, ...), so that one run's id is a prefix
    /// of another's (`r1` of `r10` to `r19`): a store matching a run's refs by prefix lists (and a
    /// cascade deletes) another run's blobs. Off: `r01`, `r02`, ..., none a prefix of another
    /// below a hundred runs. Names only: nothing the seed draws changes.
    pub prefix_ids: bool,
    /// The zombie's scratch run also probes the seq guard over a gap (with `zombie` faults on):
    /// after seq 1 it appends seq 3 (a seq 2 it tried under a forged lease was refused, so the
    /// gap is excused, 9.8), then seq 3 again, which must be refused at the tail: a guard that
    /// compares the seq with the entry count (2) takes it.
    pub seq_gaps: bool,
}

impl Default for WorldShape {
    fn default() -> Self {
        Self {
            workers: Span(3, 5),
            concurrency: Span(1, 3),
            ttl_ms: 1_000,
            poll_ms: Span(800, 2000),
            runs: Span(15, 25),
            start_ms: 4_000,
            workflows: vec!["happy".into(), "limit".into(), "approval".into()],
            resolve: Ratio(0.8),
            recreate: Ratio(0.1),
            cancel: Ratio(0.0),
            retention_ms: 0,
            operator_ms: 8_000,
            boot_storm: 0,
            fault_ms: 10_000,
            liveness_ms: 30_000,
            call_ms: 20,
            tool_ms: 5,
            legacy: Vec::new(),
            colocated: false,
            misbind: false,
            corrupt: false,
            repair_after_ms: 0,
            prefix_ids: false,
            seq_gaps: false,
        }
    }
}

/// Per fault kind: the chance it is switched on for a seed, and the range its rate is drawn from.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FaultRanges {
    /// A node stalls (GC pause, SIGSTOP) for `factor` x ttl at an engine fault point.
    pub stall: FaultSpec,
    /// At the store's fence-check hook, another connection tries to take the lease over.
    pub takeover: FaultSpec,
    /// A node is killed at an engine fault point and restarted `restart_ms` later.
    pub crash: FaultSpec,
    /// A store call fails busy before it runs.
    pub busy: FaultSpec,
    /// Per-node clock skew up to `max_ms` either way; `rate` is clock jumps per second.
    pub clock: FaultSpec,
    /// A superseded holder wakes and probes every write surface; `rate` is probes per second.
    pub zombie: FaultSpec,
    /// A worker is stopped gracefully (its runs cancelled) and started again.
    pub restart: FaultSpec,
    /// A store call fails with a storage error before it runs (no retry absorbs it); `rate` is
    /// per call.
    pub error: FaultSpec,
}

/// One fault kind's settings in a scenario (`[faults.KIND]`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FaultSpec {
    /// Chance the kind is on for a given seed.
    pub on: Ratio,
    /// The rate's range: a probability per fault point, or events per second (clock, zombie,
    /// restart).
    pub rate: Range,
    /// Fault points it may fire at: `any`, `acquire` (about to take the lease), `owned` (lease
    /// just taken), `call`, `tool`, `running`, `terminal`, `settle`, `meta`, `checkpoint`,
    /// `delete` (writes fire before and after the store call).
    pub sites: Vec<SiteTarget>,
    /// Stall length in ttls.
    pub factor: Range,
    /// Stall: the share of stalls aimed at the stalled lease's exact expiry millisecond (the node
    /// wakes with its clock reading `expires_at`, contracts 9.1) instead of `factor` ttls.
    /// Takeover: the share of attempts made with the usurper's clock at exactly the holder's
    /// expiry instead of a millisecond past a ttl.
    pub expiry: Ratio,
    /// Restart delay after a crash or stop.
    pub restart_ms: Span,
    /// Clock skew bound and jump size.
    pub max_ms: u32,
    /// Busy: how long the connection stays busy once it fires (every call fails meanwhile).
    pub hold_ms: Span,
    /// Nodes it hits: `any`, `worker` (every queue worker), or a node name (`w1`, `client`,
    /// `sweeper`, `operator`).
    pub nodes: Vec<NodeTarget>,
}

impl Default for FaultSpec {
    fn default() -> Self {
        Self {
            on: Ratio(0.0),
            rate: Range(0.0, 0.0),
            sites: vec![SiteTarget::Any],
            factor: Range(1.1, 3.0),
            expiry: Ratio(0.0),
            restart_ms: Span(200, 3_000),
            max_ms: 0,
            hold_ms: Span(0, 0),
            nodes: vec![NodeTarget::Any],
        }
    }
}

/// The upper bounds of a scenario's numbers (README "Scenarios"): one world runs in seconds of
/// wall time and its memory is bounded by them.
pub struct Limits {
    /// A lease's time to live.
    pub ttl_ms: u32,
    /// Any window or interval of the world: start_ms, fault_ms, liveness_ms, retention_ms,
    /// operator_ms.
    pub window_ms: u32,
    /// One step's duration: call_ms, tool_ms, and a fault's restart_ms, hold_ms, max_ms.
    pub step_ms: u32,
    /// Nodes that boot at once.
    pub boot_storm: u32,
    /// Stall length in ttls.
    pub stall_factor: f64,
    /// Clock jumps, zombie probes and restarts scheduled over the fault window, all kinds together.
    pub timed_events: u32,
    /// Worker polls over the whole world (workers x (fault_ms + liveness window) / poll_ms).
    pub polls: u64,
    /// Store calls of a world's own pace, each source: its runs' lease renews, the operator's
    /// audits (`crate::scenario::pace::Pace::check`).
    pub calls: u64,
    /// Runs in one world.
    pub runs: u32,
}

impl Limits {
    /// The latest a run may start (a scenario's `start_ms`, a plan run's `start_ms`): a run started
    /// later has too little of the liveness bound left to settle, and would be reported as never
    /// reaching the store.
    pub fn latest_start_ms(fault_ms: u32, liveness_ms: u32) -> u32 {
        liveness_ms / 2 + fault_ms
    }

    /// How often `workers` workers polling every `poll_ms` poll over fault_ms and the liveness
    /// window after it (`crate::scenario::pace::Pace::window_ms`).
    pub fn polls(workers: u32, fault_ms: u32, window_ms: u64, poll_ms: u32) -> u64 {
        u64::from(workers) * (u64::from(fault_ms) + window_ms) / u64::from(poll_ms.max(1))
    }

    /// The polls bound, as one message naming what exceeds it.
    pub fn check_polls(&self, workers: u32, fault_ms: u32, window_ms: u64, poll_ms: u32) -> Result<(), String> {
        let polls = Self::polls(workers, fault_ms, window_ms, poll_ms);
        if polls > self.polls {
            return Err(format!(
                "{workers} workers polling every {poll_ms} ms over fault_ms and a liveness window of {window_ms} ms \
                 would poll {polls} times, more than the limit of {}",
                self.polls
            ));
        }
        Ok(())
    }
}

/// The first name `items` lists a second time, if any.
fn first_repeat<T: fmt::Display>(items: &[T]) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    items.iter().map(ToString::to_string).find(|name| !seen.insert(name.clone()))
}

impl FaultSpec {
    /// The settings of one fault kind held to [`LIMITS`], in a scenario and in a plan alike
    /// (`on`: whether the kind can be on): the key at fault and why.
    pub fn check_settings(&self, kind: FaultKind, on: bool) -> Result<(), (&'static str, String)> {
        for (key, span) in [("restart_ms", self.restart_ms), ("hold_ms", self.hold_ms)] {
            if span.1 > LIMITS.step_ms {
                return Err((key, format!("at most {}, got {span}", LIMITS.step_ms)));
            }
        }
        if self.max_ms > LIMITS.step_ms {
            return Err(("max_ms", format!("at most {}, got {}", LIMITS.step_ms, self.max_ms)));
        }
        if self.factor.1 > LIMITS.stall_factor {
            return Err(("factor", format!("at most {} ttls, got {}", LIMITS.stall_factor, self.factor.1)));
        }
        // Every fault point a kind reaches scans its lists: a name listed again and again (a 64 MiB
        // file holds millions) made each point cost the list's length. Each at most once.
        for (key, repeated) in [("sites", first_repeat(&self.sites)), ("nodes", first_repeat(&self.nodes))] {
            if let Some(name) = repeated {
                return Err((key, format!("'{name}' is listed twice: list each at most once")));
            }
        }
        if let Some(store) = self.sites.iter().find(|s| matches!(s, SiteTarget::Class(c) if c.in_store()))
            && kind != FaultKind::Crash
        {
            return Err(("sites", format!("'{store}' is inside the store's calls, where only a crash lands")));
        }
        if on && kind == FaultKind::Stall && self.factor.0 <= 0.0 {
            return Err(("factor", format!("must be above 0 (a stall of 0 ttls never stalls), got {}", self.factor.0)));
        }
        Ok(())
    }

    /// A kind that is on can fire in world `w`: it has sites, nodes that exist there, and a rate
    /// above zero. The key at fault and why.
    fn check_can_fire(&self, w: &WorldShape) -> Result<(), (&'static str, String)> {
        if self.on.0 <= 0.0 {
            return Ok(());
        }
        if self.sites.is_empty() {
            return Err(("sites", "is empty: the fault could never fire".into()));
        }
        if self.nodes.is_empty() {
            return Err(("nodes", "is empty: the fault could never fire".into()));
        }
        if self.rate.1 <= 0.0 {
            return Err(("rate", "is zero: the fault could never fire".into()));
        }
        let exists = |n: &NodeTarget| match n {
            NodeTarget::Node(Node::Worker(i)) => *i <= w.workers.1,
            NodeTarget::Node(Node::Sweeper) => w.retention_ms > 0,
            NodeTarget::Node(Node::Operator) => w.operator_ms > 0,
            NodeTarget::Any | NodeTarget::Workers | NodeTarget::Node(_) => true,
        };
        if let Some(bad) = self.nodes.iter().find(|n| !exists(n)) {
            return Err((
                "nodes",
                format!(
                    "'{bad}' does not exist in this world (workers {}, retention_ms {}, operator_ms {})",
                    w.workers, w.retention_ms, w.operator_ms
                ),
            ));
        }
        Ok(())
    }

    /// The rate within its unit's bound (a probability per point, or events per second), and a
    /// timed kind that is on adding its events over `fault_ms` to `timed_events`, within the limit.
    fn check_rate(&self, kind: FaultKind, fault_ms: u32, timed_events: &mut f64) -> Result<(), (&'static str, String)> {
        let per_point = kind.is_per_point();
        if per_point && self.rate.1 > 1.0 {
            return Err(("rate", format!("is a probability per call or fault point, at most 1, got {}", self.rate.1)));
        }
        if !per_point && self.rate.1 > 50.0 {
            return Err(("rate", format!("is events per second, at most 50, got {}", self.rate.1)));
        }
        if kind.is_timed() && self.on.0 > 0.0 {
            *timed_events += self.rate.1 * f64::from(fault_ms) / 1000.0;
            if *timed_events > LIMITS.timed_events as f64 {
                return Err((
                    "rate",
                    format!(
                        "{} per second over fault_ms {fault_ms} (with the other timed kinds) schedules up to \
                         {timed_events:.0} events, more than the limit of {}",
                        self.rate.1, LIMITS.timed_events
                    ),
                ));
            }
        }
        Ok(())
    }

    /// No setting `kind` does not read: sites where it fires at no fault point, nodes where its
    /// events choose their own, an expiry where it has no lease expiry to aim at.
    fn check_read_by(&self, kind: FaultKind) -> Result<(), (&'static str, String)> {
        if !kind.aims_at_sites() && !self.sites.iter().all(|s| *s == SiteTarget::Any) {
            return Err(("sites", format!("{kind} faults do not fire at engine fault points; remove it")));
        }
        if kind.is_timed() && !self.nodes.iter().all(|n| *n == NodeTarget::Any) {
            return Err(("nodes", format!("{kind} events choose their own nodes; remove it")));
        }
        if !kind.aims_at_expiry() && self.expiry.0 > 0.0 {
            return Err(("expiry", format!("{kind} faults have no lease expiry to aim at; remove it")));
        }
        Ok(())
    }

    /// A kind named that could never fire: off with a rate (`on` left out is 0), or a clock that
    /// may neither skew nor jump.
    fn check_not_inert(&self, kind: FaultKind) -> Result<(), (&'static str, String)> {
        if self.on.0 <= 0.0 && self.rate.1 > 0.0 {
            return Err((
                "rate",
                format!(
                    "[{}, {}] is set, but {kind} is off (on = 0, the default): it could never fire; switch it on \
                     (on = 1.0 for every seed) or remove the rate",
                    self.rate.0, self.rate.1
                ),
            ));
        }
        if kind == FaultKind::Clock && self.on.0 > 0.0 && self.max_ms == 0 {
            return Err((
                "on",
                "clock is on, but max_ms is 0: it could never fire (no skew to draw, no jump to make); set max_ms \
                 above 0"
                    .into(),
            ));
        }
        Ok(())
    }
}

pub const LIMITS: Limits = Limits {
    ttl_ms: 60_000,
    window_ms: 600_000,
    step_ms: 60_000,
    boot_storm: 256,
    stall_factor: 100.0,
    timed_events: 10_000,
    polls: 1_000_000,
    calls: 1_000_000,
    runs: 10_000,
};

/// The fault kinds a scenario can switch on (the `[faults.KIND]` tables), in the order a plan
/// applies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    Stall,
    Takeover,
    Crash,
    Busy,
    Clock,
    Zombie,
    Restart,
    Error,
}

impl FaultKind {
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Stall,
        FaultKind::Takeover,
        FaultKind::Crash,
        FaultKind::Busy,
        FaultKind::Clock,
        FaultKind::Zombie,
        FaultKind::Restart,
        FaultKind::Error,
    ];

    /// Its name: the scenario's and the plan's table key, and what traces print.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Stall => "stall",
            FaultKind::Takeover => "takeover",
            FaultKind::Crash => "crash",
            FaultKind::Busy => "busy",
            FaultKind::Clock => "clock",
            FaultKind::Zombie => "zombie",
            FaultKind::Restart => "restart",
            FaultKind::Error => "error",
        }
    }

    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The supervisor schedules it over the fault window (clock jumps, zombie probes, graceful
    /// restarts): its rate is events per second and it chooses its own nodes.
    pub fn is_timed(self) -> bool {
        match self {
            FaultKind::Clock | FaultKind::Zombie | FaultKind::Restart => true,
            FaultKind::Stall | FaultKind::Takeover | FaultKind::Crash | FaultKind::Busy | FaultKind::Error => false,
        }
    }

    /// It fires at a node's engine fault points or store calls: its rate is a probability per
    /// point or call, and `nodes` chooses whom it hits.
    pub fn is_per_point(self) -> bool {
        !self.is_timed()
    }

    /// It fires at engine fault points, so `sites` can aim it at a class of them.
    pub fn aims_at_sites(self) -> bool {
        match self {
            FaultKind::Stall | FaultKind::Crash => true,
            FaultKind::Takeover
            | FaultKind::Busy
            | FaultKind::Clock
            | FaultKind::Zombie
            | FaultKind::Restart
            | FaultKind::Error => false,
        }
    }

    /// It has a lease expiry to aim at (`expiry`): a stall's wake, a takeover's clock.
    pub fn aims_at_expiry(self) -> bool {
        match self {
            FaultKind::Stall | FaultKind::Takeover => true,
            FaultKind::Crash
            | FaultKind::Busy
            | FaultKind::Clock
            | FaultKind::Zombie
            | FaultKind::Restart
            | FaultKind::Error => false,
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One entry of a fault kind's `sites`: every fault point (`any`) or one class of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SiteTarget {
    Any,
    Class(SiteClass),
}

impl SiteTarget {
    /// Every name `sites` accepts, `any` first.
    pub fn names() -> Vec<&'static str> {
        std::iter::once("any").chain(SiteClass::ALL.map(SiteClass::as_str)).collect()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SiteTarget::Any => "any",
            SiteTarget::Class(class) => class.as_str(),
        }
    }

    /// The entry `name` names; an unknown one is refused with the list of known ones.
    pub fn parse(name: &str) -> Result<SiteTarget, String> {
        if name == "any" {
            return Ok(SiteTarget::Any);
        }
        SiteClass::ALL
            .into_iter()
            .find(|c| c.as_str() == name)
            .map(SiteTarget::Class)
            .ok_or_else(|| format!("unknown site '{name}' (known: {})", SiteTarget::names().join(", ")))
    }

    /// Whether it aims at a fault point of class `class`. `any` is every engine fault point;
    /// the store's (`mid-call`, `after-call`) are aimed at by name.
    pub fn covers(self, class: SiteClass) -> bool {
        match self {
            SiteTarget::Any => !class.in_store(),
            SiteTarget::Class(c) => c == class,
        }
    }
}

impl fmt::Display for SiteTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SiteTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        SiteTarget::parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// An inclusive integer range, written `[lo, hi]` or as one number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(pub u32, pub u32);

/// A real range `[lo, hi]`, or one number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range(pub f64, pub f64);

/// A share in `[0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio(pub f64);

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(u32),
            Two([u32; 2]),
        }
        let (lo, hi) = match Raw::deserialize(d).map_err(|_| D::Error::custom("expected a count or [lo, hi]"))? {
            Raw::One(n) => (n, n),
            Raw::Two([lo, hi]) => (lo, hi),
        };
        if lo > hi {
            return Err(D::Error::custom(format!("range [{lo}, {hi}] is empty")));
        }
        Ok(Span(lo, hi))
    }
}

impl<'de> Deserialize<'de> for Range {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(f64),
            Two([f64; 2]),
        }
        let (lo, hi) = match Raw::deserialize(d).map_err(|_| D::Error::custom("expected a number or [lo, hi]"))? {
            Raw::One(x) => (x, x),
            Raw::Two([lo, hi]) => (lo, hi),
        };
        if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo <= hi) {
            return Err(D::Error::custom(format!("range [{lo}, {hi}] must be finite, non-negative and ordered")));
        }
        Ok(Range(lo, hi))
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let x = f64::deserialize(d)?;
        if !(0.0..=1.0).contains(&x) {
            return Err(D::Error::custom(format!("{x} is not a share between 0 and 1")));
        }
        Ok(Ratio(x))
    }
}

/// Why a scenario could not be loaded: one line naming the file (and line, when known).
#[derive(Debug, thiserror::Error)]
#[error("{path}{}: {message}", line.map_or(String::new(), |l| format!(":{l}")))]
pub struct ScenarioError {
    pub path: String,
    pub line: Option<usize>,
    pub message: String,
}

/// What [`Scenario::validate`] refuses: the section and key at fault (so the caller can point at
/// its line), and the message naming them.
type Refusal = (&'static str, &'static str, String);

/// A refusal of `key` in the `[world]` section.
fn world_err(key: &'static str, message: String) -> Result<(), Refusal> {
    Err(("world", key, format!("world.{key}: {message}")))
}

impl Scenario {
    /// Parse a scenario's text; `path` names it in errors and its stem names the scenario.
    pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
        let shown = path.display().to_string();
        let fail = |line: Option<usize>, message: String| ScenarioError { path: shown.clone(), line, message };
        let mut scenario: Scenario = toml::from_str(text).map_err(|e| {
            let start = e.span().map(|span| span.start.min(text.len()));
            let line = start.map(|start| text[..start].matches('\n').count() + 1);
            let mut message = e.message().trim().replace('\n', " ");
            // A name refused by its type (a site, a node) is named by its key, like `validate`'s.
            if (message.starts_with("unknown site ") || message.starts_with("unknown node "))
                && let Some(key) = start.and_then(|start| key_at(text, start))
            {
                message = format!("{key}: {message}");
            }
            fail(line, message)
        })?;
        // The name is shown on terminals and in reports: a control character in a file's name is
        // written out as an escape (the source keeps the path as it is, to load it again).
        scenario.name = path.file_stem().map(|s| crate::files::printable(&s.to_string_lossy())).unwrap_or_default();
        scenario.source = shown.clone();
        scenario.validate().map_err(|(section, key, message)| fail(line_of(text, section, key), message))?;
        Ok(scenario)
    }

    /// Load `NAME` from `dir/NAME.toml`, or a path to a `.toml` file.
    pub fn load(dir: &Path, name_or_path: &str) -> Result<Scenario, ScenarioError> {
        let path = if name_or_path.ends_with(".toml") {
            PathBuf::from(name_or_path)
        } else {
            dir.join(format!("{name_or_path}.toml"))
        };
        let text = crate::files::read_input(&path, crate::files::MAX_TEXT_BYTES).map_err(|e| ScenarioError {
            path: path.display().to_string(),
            line: None,
            message: format!("cannot read scenario: {}", e.message),
        })?;
        Scenario::parse(&path, &text)
    }

    /// Every scenario in `dir`, sorted by name.
    pub fn load_all(dir: &Path) -> Result<Vec<Scenario>, ScenarioError> {
        let unreadable = |e: std::io::Error| ScenarioError {
            path: dir.display().to_string(),
            line: None,
            message: format!("cannot list scenarios: {e}"),
        };
        let paths = crate::files::toml_files(dir).map_err(unreadable)?;
        paths.iter().map(|p| Scenario::load(dir, &p.to_string_lossy())).collect()
    }

    /// Check what serde cannot: a failure names the offending key as (section, key) so the
    /// caller can point at its line.
    fn validate(&self) -> Result<(), Refusal> {
        self.check_world()?;
        self.check_branches()?;
        self.check_names()?;
        self.check_faults()?;
        self.check_pace()
    }

    /// The `[world]` section's bounds, each naming its key.
    fn check_world(&self) -> Result<(), Refusal> {
        self.check_timers()?;
        self.check_sizes()?;
        self.check_upper_bounds()
    }

    /// The world's timers: leases renewable (ttl_ms), a positive liveness bound, and polls below it.
    fn check_timers(&self) -> Result<(), Refusal> {
        let w = &self.world;
        if w.ttl_ms < 3 || w.ttl_ms > TIMER_MS_MAX {
            return world_err(
                "ttl_ms",
                format!("must be 3..={TIMER_MS_MAX} (leases renew every ttl/3 ms), got {}", w.ttl_ms),
            );
        }
        // Before poll_ms, which must stay below it: a zero here is liveness_ms's fault.
        if w.liveness_ms == 0 {
            return world_err("liveness_ms", "must be positive, got 0".into());
        }
        if w.poll_ms.1 > TIMER_MS_MAX / 3 || w.poll_ms.1 >= w.liveness_ms {
            let bound = (TIMER_MS_MAX / 3).min(w.liveness_ms.saturating_sub(1));
            return world_err(
                "poll_ms",
                format!("at most {bound} (below liveness_ms, and the sweeper polls 3x slower), got {}", w.poll_ms),
            );
        }
        Ok(())
    }

    /// The world's sizes: workers, concurrency and runs within their bounds and at least 1, and
    /// at least one workflow, each a known one.
    fn check_sizes(&self) -> Result<(), Refusal> {
        let w = &self.world;
        for (key, span, max) in
            [("workers", w.workers, 64), ("concurrency", w.concurrency, 64), ("runs", w.runs, LIMITS.runs)]
        {
            if span.1 > max {
                return world_err(key, format!("at most {max}, got {span}"));
            }
        }
        for (key, span) in [("workers", w.workers), ("concurrency", w.concurrency), ("poll_ms", w.poll_ms)] {
            if span.0 == 0 {
                return world_err(key, format!("must be at least 1, got {span}"));
            }
        }
        if w.workflows.is_empty() {
            return world_err("workflows", "must name at least one workflow".into());
        }
        if let Some(bad) = w.workflows.iter().find(|name| !["happy", "limit", "approval"].contains(&name.as_str())) {
            return world_err("workflows", format!("unknown workflow '{bad}' (known: happy, limit, approval)"));
        }
        if w.runs.1 == 0 {
            return world_err(
                "runs",
                format!("must be at least 1 (a world with no runs does nothing), got {}", w.runs),
            );
        }
        Ok(())
    }

    /// The upper bounds: a world stays small enough to run in seconds and to hold in memory, and
    /// its runs start early enough to settle within the liveness bound.
    fn check_upper_bounds(&self) -> Result<(), Refusal> {
        let w = &self.world;
        for (key, value, max) in [
            ("ttl_ms", w.ttl_ms, LIMITS.ttl_ms),
            ("start_ms", w.start_ms, LIMITS.window_ms),
            ("retention_ms", w.retention_ms, LIMITS.window_ms),
            ("operator_ms", w.operator_ms, LIMITS.window_ms),
            ("repair_after_ms", w.repair_after_ms, LIMITS.step_ms),
            ("boot_storm", w.boot_storm, LIMITS.boot_storm),
            ("fault_ms", w.fault_ms, LIMITS.window_ms),
            ("liveness_ms", w.liveness_ms, LIMITS.window_ms),
            ("call_ms", w.call_ms, LIMITS.step_ms),
            ("tool_ms", w.tool_ms, LIMITS.step_ms),
        ] {
            if value > max {
                return world_err(key, format!("at most {max}, got {value}"));
            }
        }
        if w.start_ms > Limits::latest_start_ms(w.fault_ms, w.liveness_ms) {
            return world_err(
                "start_ms",
                format!(
                    "at most fault_ms + liveness_ms / 2 = {} (a run started later has too little of the liveness \
                     bound left to settle and would be reported as never reaching the store), got {}",
                    Limits::latest_start_ms(w.fault_ms, w.liveness_ms),
                    w.start_ms
                ),
            );
        }
        Ok(())
    }

    /// The opt-in branch inputs (`legacy`, `misbind`, `corrupt`) name real workflows and have the
    /// nodes they need.
    fn check_branches(&self) -> Result<(), Refusal> {
        let w = &self.world;
        if let Some(bad) = w.legacy.iter().find(|name| !["happy", "limit", "approval"].contains(&name.as_str())) {
            return world_err("legacy", format!("unknown workflow '{bad}' (known: happy, limit, approval)"));
        }
        if !w.legacy.is_empty() && w.workers.0 < 2 {
            return world_err(
                "legacy",
                format!("needs at least 2 workers (w1 lacks them, another must drive its runs), got {}", w.workers),
            );
        }
        if w.misbind && w.operator_ms == 0 {
            return world_err("misbind", "needs an operator (operator_ms above 0)".into());
        }
        if w.corrupt && w.operator_ms == 0 {
            return world_err("corrupt", "needs an operator (operator_ms above 0)".into());
        }
        Ok(())
    }

    /// `aims` name coverage events and `targets` name planted defects.
    fn check_names(&self) -> Result<(), Refusal> {
        let events = crate::coverage::events();
        if let Some(bad) = self.aims.iter().find(|e| !events.contains(e)) {
            return Err(("", "aims", format!("aims: unknown coverage event '{bad}' (known: {})", events.join(", "))));
        }
        if let Some(bad) = self.targets.iter().find(|t| crate::defect::Defect::parse(t).is_err()) {
            let message = crate::defect::Defect::parse(bad).err().unwrap_or_default();
            return Err(("", "targets", format!("targets: {message}")));
        }
        Ok(())
    }

    /// Each fault kind's settings: one that is on can fire, rates within their unit's bound, the
    /// timed kinds' events within the limit, and no setting a kind does not read.
    fn check_faults(&self) -> Result<(), Refusal> {
        let w = &self.world;
        let mut timed_events = 0.0;
        for (kind, f) in self.faults.kinds() {
            let checked = f
                .check_settings(kind, f.on.0 > 0.0)
                .and_then(|()| f.check_can_fire(w))
                .and_then(|()| f.check_rate(kind, w.fault_ms, &mut timed_events))
                .and_then(|()| f.check_read_by(kind))
                .and_then(|()| f.check_not_inert(kind));
            if let Err((key, message)) = checked {
                return Err((kind.as_str(), key, format!("faults.{kind}.{key}: {message}")));
            }
        }
        Ok(())
    }

    /// The world at its worst must be judgeable in sane virtual time (`crate::pace`), and its
    /// workers' polls over fault_ms and that liveness window stay within the limit.
    fn check_pace(&self) -> Result<(), Refusal> {
        let w = &self.world;
        let pace = crate::scenario::pace::Pace::of_scenario(self);
        if let Err((term, message)) = pace.check() {
            return Err((term.section, term.key, format!("{}: {message}", term.name())));
        }
        if let Err(message) = LIMITS.check_polls(w.workers.1, w.fault_ms, pace.window_ms(), w.poll_ms.0) {
            return Err(("world", "poll_ms", format!("world.poll_ms: {message}")));
        }
        Ok(())
    }
}

/// The line of `key` in `[section]` (or `[faults.section]`) of a scenario's text, if written.
fn line_of(text: &str, section: &str, key: &str) -> Option<usize> {
    let headers = [format!("[{section}]"), format!("[faults.{section}]")];
    let mut inside = section.is_empty();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = headers.iter().any(|h| line == h);
        } else if inside && line.split('=').next().is_some_and(|k| k.trim() == key) {
            return Some(i + 1);
        }
    }
    None
}

/// The dotted key (`faults.crash.sites`) whose value holds byte `offset` of a scenario's text.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let before = &text[..offset];
    let mut lines = before.lines().rev();
    let key = lines.find_map(|line| {
        let line = line.trim();
        if line.starts_with('[') {
            return Some(None);
        }
        line.split_once('=').map(|(k, _)| Some(k.trim().to_owned()))
    })??;
    let section = lines.find_map(|line| {
        let line = line.trim();
        line.starts_with('[').then(|| line.trim_matches(|c| c == '[' || c == ']').trim().to_owned())
    });
    Some(section.map_or(key.clone(), |s| format!("{s}.{key}")))
}

impl FaultRanges {
    /// Every fault kind with its settings, in [`FaultKind::ALL`]'s order.
    pub fn kinds(&self) -> [(FaultKind, &FaultSpec); 8] {
        FaultKind::ALL.map(|kind| (kind, self.get(kind)))
    }

    /// The settings of `kind`.
    pub fn get(&self, kind: FaultKind) -> &FaultSpec {
        match kind {
            FaultKind::Stall => &self.stall,
            FaultKind::Takeover => &self.takeover,
            FaultKind::Crash => &self.crash,
            FaultKind::Busy => &self.busy,
            FaultKind::Clock => &self.clock,
            FaultKind::Zombie => &self.zombie,
            FaultKind::Restart => &self.restart,
            FaultKind::Error => &self.error,
        }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.0, self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A world's liveness window follows from its settings: `call_ms = 10000` (before, refused
    /// with the default liveness_ms, and before that a false liveness failure) is accepted and
    /// waits what its runs need; a world whose runs need more than any window may last (four
    /// runs of eight minute-long calls on one worker) is refused at call_ms's line, in a scenario
    /// and in a plan alike.
    #[test]
    fn a_world_too_slow_for_any_liveness_window_is_refused_with_its_line() {
        let path = Path::new("slow.toml");
        let text = "description = \"x\"\n[world]\nworkers = 1\nruns = 4\nrecreate = 0.0\ncall_ms = 10000\n";
        let slow = Scenario::parse(path, text).expect("judgeable");
        let pace = crate::scenario::pace::Pace::of_scenario(&slow);
        // Four runs on one slot, eight calls of 10 s each, beside ttls, polls and ticks.
        assert_eq!(pace.window_ms(), 4 * 8 * 10_000 + 4 * 4 * 5 + 2 * 1_000 + 2 * (2_000 + 1_000) + 1_000);
        let too_slow = text.replace("call_ms = 10000", "call_ms = 60000");
        let e = Scenario::parse(path, &too_slow).expect_err("too slow");
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.to_string().contains("world.call_ms: after quiescence a correct engine may need 1929080 ms"), "{e}");
        assert!(e.to_string().contains("liveness could not judge it fairly; shorten world.call_ms"), "{e}");
        let plan = crate::scenario::planfile::PlanFile::draw(&slow, 1, &[]).to_toml();
        let too_slow = plan.replacen("call_ms = 10000", "call_ms = 60000", 1);
        let e = crate::scenario::planfile::PlanFile::parse(Path::new("p.toml"), &too_slow).expect_err("too slow");
        let line = too_slow.lines().position(|l| l.starts_with("call_ms = ")).map(|i| i + 1);
        assert_eq!(e.line, line, "{e}");
        assert!(e.to_string().contains("liveness could not judge it fairly"), "{e}");
    }

    /// `ALL` lists every variant once, in declaration order. The matches below are exhaustive: a
    /// new variant does not compile until it has a position here, and then fails until `ALL`
    /// holds it there.
    #[test]
    fn every_all_lists_every_variant() {
        let kind = |k: FaultKind| match k {
            FaultKind::Stall => 0,
            FaultKind::Takeover => 1,
            FaultKind::Crash => 2,
            FaultKind::Busy => 3,
            FaultKind::Clock => 4,
            FaultKind::Zombie => 5,
            FaultKind::Restart => 6,
            FaultKind::Error => 7,
        };
        let site = |s: SiteClass| match s {
            SiteClass::Acquire => 0,
            SiteClass::Owned => 1,
            SiteClass::Call => 2,
            SiteClass::Tool => 3,
            SiteClass::Running => 4,
            SiteClass::Terminal => 5,
            SiteClass::Settle => 6,
            SiteClass::Meta => 7,
            SiteClass::Checkpoint => 8,
            SiteClass::Delete => 9,
            SiteClass::MidCall => 10,
            SiteClass::AfterCall => 11,
        };
        // The lengths are the number of arms above.
        assert_eq!(FaultKind::ALL.len(), 8);
        assert_eq!(SiteClass::ALL.len(), 12);
        assert!(FaultKind::ALL.iter().enumerate().all(|(i, k)| kind(*k) == i));
        assert!(SiteClass::ALL.iter().enumerate().all(|(i, s)| site(*s) == i));
    }

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("scenarios/x.toml"), text)
    }

    #[test]
    fn a_minimal_file_takes_the_defaults() {
        let s = parse("description = \"x\"\n").expect("parses");
        assert_eq!(s.name, "x");
        assert_eq!(s.world, WorldShape::default());
    }

    #[test]
    fn ranges_and_single_numbers_both_parse() {
        let s = parse(
            "description = \"x\"\n[world]\nworkers = 2\nruns = [3, 4]\n[faults.stall]\non = 1.0\nrate = [0.1, 0.2]\n",
        )
        .expect("parses");
        assert_eq!((s.world.workers, s.world.runs), (Span(2, 2), Span(3, 4)));
        assert_eq!(s.faults.stall.rate, Range(0.1, 0.2));
    }

    #[test]
    fn errors_name_the_file_and_the_line() {
        let e = parse("description = \"x\"\n[world]\nworkers = [5, 2]\n").expect_err("empty range");
        assert_eq!((e.path.as_str(), e.line), ("scenarios/x.toml", Some(3)), "{e}");
        let e = parse("description = \"x\"\n\n[faults.stall]\nonn = 1.0\n").expect_err("unknown field");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.to_string().starts_with("scenarios/x.toml:4: "), "{e}");
        let e = parse("description = \"x\"\n[world]\nttl_ms = 0\n").expect_err("ttl 0");
        assert!(e.to_string().starts_with("scenarios/x.toml:3: world.ttl_ms: must be 3..="), "{e}");
        let e = parse("description = \"x\"\n[world]\npoll_ms = 1000000000\n").expect_err("poll");
        assert!(e.to_string().starts_with("scenarios/x.toml:3: world.poll_ms: at most"), "{e}");
        let e = parse("description = \"x\"\n[faults.zombie]\non = 1.0\nrate = 1e9\n").expect_err("rate");
        assert!(e.to_string().starts_with("scenarios/x.toml:4: faults.zombie.rate: is events per second"), "{e}");
        // A kind named that could never fire: on at rate 0, off with a rate, a clock with no max_ms.
        let e = parse("description = \"x\"\n[faults.zombie]\non = 1.0\nrate = 0\n").expect_err("rate 0");
        assert!(
            e.to_string().starts_with("scenarios/x.toml:4: faults.zombie.rate: is zero: the fault could never fire")
        );
        let e = parse("description = \"x\"\n[faults.zombie]\nrate = [0.5, 1.0]\n").expect_err("off");
        assert!(
            e.to_string().starts_with("scenarios/x.toml:3: faults.zombie.rate: [0.5, 1] is set, but zombie is off")
        );
        let e = parse("description = \"x\"\n[faults.stall]\non = 0.0\nrate = 0.1\n").expect_err("off");
        assert!(e.to_string().contains("scenarios/x.toml:4: faults.stall.rate: [0.1, 0.1] is set, but stall is off"));
        let e = parse("description = \"x\"\n[faults.clock]\non = 1.0\nrate = 1.0\n").expect_err("max_ms");
        assert!(e.to_string().starts_with("scenarios/x.toml:3: faults.clock.on: clock is on, but max_ms is 0"), "{e}");
        let e = parse("description = \"x\"\n[faults.crash]\nexpiry = 0.5\n").expect_err("expiry");
        assert!(e.to_string().contains("faults.crash.expiry: crash faults have no lease expiry"), "{e}");
        let e = parse("description = \"x\"\n[faults.busy]\nsites = [\"meta\"]\n").expect_err("sites");
        assert!(e.to_string().contains("busy faults do not fire at engine fault points"), "{e}");
        let e = parse("description = \n").expect_err("syntax");
        assert_eq!(e.line, Some(1), "{e}");
        let e = parse("description = \"x\"\n[faults.crash]\nsites = [\"nowhere\"]\n").expect_err("site");
        assert!(e.to_string().contains("unknown site 'nowhere'"), "{e}");
    }

    /// A site or node listed twice is refused with its line: each fault point scans the lists,
    /// so a list repeating one name a million times made every point cost a million steps.
    #[test]
    fn a_site_or_node_listed_twice_is_refused_with_its_line() {
        let e = parse(
            "description = \"x\"\n[faults.crash]\non = 1.0\nrate = 0.1\nsites = [\"meta\", \"delete\", \"meta\"]\n",
        )
        .expect_err("sites");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.to_string().contains("faults.crash.sites: 'meta' is listed twice: list each at most once"), "{e}");
        let e = parse("description = \"x\"\n[faults.busy]\non = 1.0\nrate = 0.1\nnodes = [\"client\", \"client\"]\n")
            .expect_err("nodes");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.to_string().contains("faults.busy.nodes: 'client' is listed twice: list each at most once"), "{e}");
        parse("description = \"x\"\n[faults.crash]\non = 1.0\nrate = 0.1\nsites = [\"meta\", \"delete\"]\n")
            .expect("each once");
    }

    #[test]
    fn every_fault_kind_and_site_round_trips_through_its_name() {
        for kind in FaultKind::ALL {
            assert_eq!(FaultKind::parse(kind.as_str()), Some(kind));
            assert_eq!(format!("{kind:<8}|"), format!("{:<8}|", kind.as_str()), "Display pads like a str");
            // Every kind's table is a field of `[faults]`.
            let skew = if kind == FaultKind::Clock { "max_ms = 100\n" } else { "" };
            let text = format!("description = \"x\"\n[faults.{kind}]\non = 0.5\nrate = 0.01\n{skew}");
            assert_eq!(parse(&text).unwrap_or_else(|e| panic!("{kind}: {e}")).faults.get(kind).on, Ratio(0.5));
        }
        assert_eq!(FaultKind::parse("stal"), None);
        for name in SiteTarget::names() {
            assert_eq!(SiteTarget::parse(name).map(SiteTarget::as_str), Ok(name));
        }
        assert_eq!(SiteTarget::names().len(), 1 + SiteClass::ALL.len());
        let e = SiteTarget::parse("Settle").expect_err("names are exact");
        assert_eq!(e, format!("unknown site 'Settle' (known: {})", SiteTarget::names().join(", ")));
    }

    /// `mid-call` and `after-call` are the store's points: a crash may name them, nothing else
    /// may, and `any` (the engine's points) does not cover them, so no existing draw moves.
    #[test]
    fn only_a_crash_lands_inside_the_stores_calls() {
        let e = parse("description = \"x\"\n[faults.stall]\non = 1.0\nrate = 0.1\nsites = [\"mid-call\"]\n")
            .expect_err("a stall inside a call");
        assert!(e.to_string().contains("faults.stall.sites: 'mid-call' is inside the store's calls"), "{e}");
        parse("description = \"x\"\n[faults.crash]\non = 1.0\nrate = 0.1\nsites = [\"mid-call\", \"after-call\"]\n")
            .expect("a crash may land there");
        assert!(SiteClass::ALL.iter().filter(|c| c.in_store()).all(|c| !SiteTarget::Any.covers(*c)));
        assert!(SiteClass::ALL.iter().filter(|c| !c.in_store()).all(|c| SiteTarget::Any.covers(*c)));
    }

    #[test]
    fn an_unknown_site_or_node_names_its_key_and_line() {
        let e = parse("description = \"x\"\n[faults.crash]\non = 1.0\nrate = 0.1\nsites = [\"meta\", \"nowhere\"]\n")
            .expect_err("site");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(
            e.to_string().starts_with("scenarios/x.toml:5: faults.crash.sites: unknown site 'nowhere' (known: any, "),
            "{e}"
        );
        let e = parse("description = \"x\"\n[faults.stall]\nsites = [\n  \"call\",\n  \"nowhere\",\n]\n")
            .expect_err("site");
        assert!(e.to_string().contains(": faults.stall.sites: unknown site 'nowhere'"), "{e}");
        let e = parse("description = \"x\"\n[faults.busy]\nnodes = [\"client\", \"zombie\"]\n").expect_err("node");
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.to_string().starts_with(
                "scenarios/x.toml:3: faults.busy.nodes: unknown node 'zombie' (known: any, worker, w1, w2, ..., client, \
                 sweeper, operator)"
            ),
            "{e}"
        );
    }

    #[test]
    fn numbers_have_upper_bounds_and_nonsense_combinations_are_refused() {
        for (text, line, needle) in [
            ("[world]\nboot_storm = 4000000000\n", 3, "world.boot_storm: at most 256"),
            ("[world]\nfault_ms = 4000000000\n", 3, "world.fault_ms: at most 600000"),
            ("[world]\nliveness_ms = 4000000\n", 3, "world.liveness_ms: at most 600000"),
            ("[world]\nliveness_ms = 0\n", 3, "world.liveness_ms: must be positive, got 0"),
            ("[world]\ncall_ms = 4000000000\n", 3, "world.call_ms: at most 60000"),
            ("[world]\nttl_ms = 2000000000\n", 3, "world.ttl_ms: at most 60000"),
            ("[world]\nstart_ms = 500000\n", 3, "world.start_ms: at most fault_ms + liveness_ms / 2"),
            ("[world]\nworkers = 64\npoll_ms = 1\nfault_ms = 600000\n", 4, "would poll"),
            ("[world]\nfault_ms = 600000\n[faults.zombie]\non = 1.0\nrate = 50\n", 6, "more than the limit of 10000"),
            ("[faults.crash]\nrestart_ms = [0, 4000000000]\n", 3, "faults.crash.restart_ms: at most 60000"),
            ("[faults.busy]\nhold_ms = 4000000000\n", 3, "faults.busy.hold_ms: at most"),
            ("[faults.clock]\nmax_ms = 4000000000\n", 3, "faults.clock.max_ms: at most"),
            ("[faults.stall]\nfactor = 1e300\n", 3, "faults.stall.factor: at most 100"),
        ] {
            let e = parse(&format!("description = \"x\"\n{text}")).expect_err(text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn targets_are_checked_like_defect_flags() {
        let e =
            parse("description = \"x\"\n\ntargets = [\"unfenced-meta\", \"no-such-defect\"]\n").expect_err("target");
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.to_string().starts_with("scenarios/x.toml:3: targets: unknown defect 'no-such-defect' (valid: "),
            "{e}"
        );
        parse("description = \"x\"\ntargets = [\"unfenced-meta\"]\n").expect("a known target");
    }

    #[test]
    fn every_shipped_scenario_is_within_the_bounds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        assert!(Scenario::load_all(&dir).expect("the shipped scenarios load").len() >= 10);
    }
}
