//! A plan written out as TOML through serde and the `toml` crate: the shapes below are the plan
//! file's tables in the order a reader meets them (top-level keys, `[world]`, `[skews]`, one
//! `[faults.KIND]` per kind, `[[runs]]`, `[[events]]`); `PlanFile::parse` reads the text back to
//! an equal plan.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::scenario::pace::Settings;
use crate::scenario::plan::{Applied, Scheduled};
use crate::scenario::planfile::{PLAN_FORMAT, PlanFile};

/// The comment every written plan opens with.
const HEAD: &str = "# A fencesim world plan: what a seed draws, as a file. Run it with\n\
                    # `fencesim run --plan FILE`; edit it by hand (it is validated) or shrink it.\n";

#[derive(Serialize)]
struct Out<'a> {
    format: &'a str,
    scenario: &'a str,
    seed: Seed,
    defects: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expect: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    story: Option<&'a str>,
    world: World<'a>,
    skews: &'a BTreeMap<String, i64>,
    faults: Faults<'a>,
    // An empty array of tables has no `[[...]]` form; the reader takes a missing one as empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    runs: Vec<Run<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    events: Vec<Event<'a>>,
}

/// A TOML integer, or a string above `i64::MAX` (TOML's integers are signed 64-bit).
#[derive(Serialize)]
#[serde(untagged)]
enum Seed {
    Integer(i64),
    Text(String),
}

#[derive(Serialize)]
struct World<'a> {
    workers: &'a [String],
    concurrency: u32,
    poll_ms: u32,
    ttl_ms: u32,
    #[serde(flatten)]
    settings: &'a Settings,
}

/// Every fault kind's table, in the plan's (the catalogue's) order rather than by name.
struct Faults<'a>(&'a [Applied]);

impl Serialize for Faults<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for f in self.0 {
            map.serialize_entry(f.kind.as_str(), &Fault::of(f))?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Fault {
    on: bool,
    rate: f64,
    sites: Vec<&'static str>,
    nodes: Vec<String>,
    factor: [f64; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    expiry: Option<f64>,
    restart_ms: [u32; 2],
    max_ms: u32,
    hold_ms: [u32; 2],
}

impl Fault {
    fn of(f: &Applied) -> Self {
        let k = &f.spec;
        Fault {
            on: f.on,
            rate: f.rate,
            sites: k.sites.iter().map(|s| s.as_str()).collect(),
            nodes: k.nodes.iter().map(ToString::to_string).collect(),
            factor: [k.factor.0, k.factor.1],
            expiry: (k.expiry.0 > 0.0).then_some(k.expiry.0),
            restart_ms: [k.restart_ms.0, k.restart_ms.1],
            max_ms: k.max_ms,
            hold_ms: [k.hold_ms.0, k.hold_ms.1],
        }
    }
}

#[derive(Serialize)]
struct Run<'a> {
    id: &'a str,
    workflow: &'a str,
    start_ms: u32,
    resolve: bool,
    recreate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancel_ms: Option<u32>,
}

#[derive(Serialize)]
struct Event<'a> {
    at_ms: u32,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_ms: Option<u32>,
}

impl<'a> Event<'a> {
    fn of(at_ms: u32, event: &'a Scheduled) -> Self {
        let (kind, node, delta_ms, after_ms) = match event {
            Scheduled::Jump { node, delta_ms } => ("jump", Some(node.as_str()), Some(*delta_ms), None),
            Scheduled::Zombie => ("zombie", None, None, None),
            Scheduled::Restart { node, after_ms } => ("restart", Some(node.as_str()), None, Some(*after_ms)),
        };
        Event { at_ms, kind, node, delta_ms, after_ms }
    }
}

impl PlanFile {
    /// The plan as TOML text, its comment first; [`PlanFile::parse`] reads it back to an equal
    /// plan.
    pub fn to_toml(&self) -> String {
        to_toml(self)
    }
}

fn to_toml(file: &PlanFile) -> String {
    let p = &file.plan;
    let out = Out {
        format: PLAN_FORMAT,
        scenario: &file.scenario,
        seed: i64::try_from(file.seed).map_or_else(|_| Seed::Text(file.seed.to_string()), Seed::Integer),
        defects: file.defects.iter().map(|d| d.name()).collect(),
        expect: file.expect.as_deref(),
        story: file.story.as_deref(),
        world: World {
            workers: &p.workers,
            concurrency: p.concurrency,
            poll_ms: p.poll_ms,
            ttl_ms: p.ttl_ms,
            settings: &file.settings,
        },
        skews: &p.skews,
        faults: Faults(&p.faults),
        runs: p
            .runs
            .iter()
            .map(|r| Run {
                id: r.id.as_str(),
                workflow: &r.workflow,
                start_ms: r.start_ms,
                resolve: r.resolve,
                recreate: r.recreate,
                cancel_ms: r.cancel_ms,
            })
            .collect(),
        events: p.events.iter().map(|(at, e)| Event::of(*at, e)).collect(),
    };
    // Every field is a plain value of a type TOML has: serializing cannot fail.
    let body = toml::to_string(&out).expect("a plan serializes as TOML");
    format!("{HEAD}{body}")
}
