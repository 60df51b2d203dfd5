//! Coverage: the interesting events the harness exists to produce, counted per world from its
//! history (FoundationDB's code probes, Antithesis's "sometimes" assertions). A fault that is on
//! but never lands proves nothing; a scenario declares the events it aims at (`aims`), and
//! `sweep --require-coverage` fails when one never happened. Counting reads the rows only, after
//! the world, so it changes neither a trace nor a fingerprint; counts are a `BTreeMap`.
//!
//! Two events are inferred from rows rather than marked at their source: a stalled node "wakes
//! writing" when it makes a fenced call after its stall ended, and a crash "resumes" when its run
//! is granted again later. Crashes are counted per fault-point class (`site_class`); a row does
//! not say whether the crash fell before or after the write, so both phases count together.

use std::collections::BTreeMap;

use crate::history::{Call, CallOutcome, Disruption, Event, Row, Surface};
use crate::node::Node;
use crate::site::SiteClass;
use fencesim_store::RunId;

/// The fenced calls a takeover can land in the middle of (the store's fault-site op names).
const TAKEOVER_OPS: [&str; 7] = ["append", "put_meta", "put_blob", "delete_blob", "delete", "renew", "release"];
/// Write surfaces a zombie probes with its dead lease.
const ZOMBIE_SURFACES: [&str; 7] = ["renew", "append", "put_meta", "put_blob", "delete_blob", "delete", "release"];
/// The actors an injected storage error can hit (node labels start with these).
const ROLES: [&str; 4] = ["worker", "client", "sweeper", "operator"];

/// The role of a node, one of [`ROLES`]: `w2` is a worker, `client` the client, ...
fn role(node: Node) -> Option<&'static str> {
    match node {
        Node::Worker(_) => Some("worker"),
        Node::Client => Some("client"),
        Node::Sweeper => Some("sweeper"),
        Node::Operator => Some("operator"),
        Node::Zombie | Node::Usurper | Node::Admin | Node::World => None,
    }
}

/// Fault-point classes a crash can hit.
const CRASH_SITES: [SiteClass; 12] = SiteClass::ALL;

/// Every event name, in a fixed order.
pub fn events() -> Vec<String> {
    let mut all = Vec::new();
    all.extend(TAKEOVER_OPS.iter().map(|op| format!("takeover-mid-{op}")));
    all.push("stall-woke-writing".to_owned());
    all.extend(CRASH_SITES.iter().map(|s| format!("crash-at-{s}")));
    all.extend(ZOMBIE_SURFACES.iter().map(|s| format!("zombie-refused-{s}")));
    all.push("skew-beyond-ttl".to_owned());
    all.push("busy-during-settle".to_owned());
    all.push("retention-raced-live".to_owned());
    all.extend(CRASH_SITES.iter().map(|s| format!("resume-after-crash-at-{s}")));
    all.push("recreate-tombstone-held".to_owned());
    all.extend(ZOMBIE_SURFACES.iter().map(|s| format!("forged-refused-{s}")));
    all.push("cross-run-blob-delete-refused".to_owned());
    all.push("admin-purge-tombstone-held".to_owned());
    all.push("expiry-instant-refused".to_owned());
    all.push("takeover-at-expiry-instant".to_owned());
    all.push("stall-woke-at-expiry-instant".to_owned());
    all.push("takeover-aimed-at-expiry-instant".to_owned());
    all.extend(ROLES.iter().map(|r| format!("store-error-{r}")));
    all.push("look-alike-run-listed".to_owned());
    all.push("seq-refused-above-count".to_owned());
    all.extend(fencesim_engine::probe::ALL.iter().map(|p| probe_event(*p)));
    all
}

/// The coverage event of an engine branch (`fencesim_engine::probe`): `probe-<name>`.
pub fn probe_event(probe: fencesim_engine::Probe) -> String {
    format!("probe-{probe}")
}

/// The events of one world: its history's ([`count`]) and the engine branches its nodes took.
pub fn of_world(rows: &[Row], probes: &BTreeMap<fencesim_engine::Probe, u64>, ttl_ms: i64) -> BTreeMap<String, u64> {
    let mut found = count(rows, ttl_ms);
    // The history's events and the engine's probes count apart: neither overwrites the other.
    assert!(!found.keys().any(|k| k.starts_with("probe-")), "a history event named like a probe");
    found.extend(probes.iter().map(|(probe, n)| (probe_event(*probe), *n)));
    found
}

/// The engine branches (`fencesim_engine::probe`) no world of `table` reached, by event name.
pub fn probes_missed(table: &Table) -> Vec<String> {
    fencesim_engine::probe::ALL.iter().map(|p| probe_event(*p)).filter(|e| !table.0.contains_key(e)).collect()
}

/// The owner name the world's forger presents at a live epoch (W7).
const FORGER: &str = "forger";

fn is_fenced_write(surface: Surface) -> bool {
    matches!(
        surface,
        Surface::Renew
            | Surface::Release
            | Surface::Append
            | Surface::PutMeta
            | Surface::Delete
            | Surface::PutBlob
            | Surface::DeleteBlob
    )
}

fn is_refusal(outcome: &CallOutcome) -> bool {
    matches!(
        outcome,
        CallOutcome::Stale | CallOutcome::RunMismatch | CallOutcome::HeldBy { .. } | CallOutcome::JournalOrder
    )
}

/// The events of one world's history; `ttl_ms` is its lease ttl.
pub fn count(rows: &[Row], ttl_ms: i64) -> BTreeMap<String, u64> {
    let mut count = Count { ttl_ms, ..Count::default() };
    for row in rows {
        match &row.event {
            Event::Fault { kind, run, detail, .. } => count.fault(row, *kind, run.as_ref(), detail),
            Event::Call(call) => {
                let node = Node::of_label(&row.node);
                count.refusals(row, node, call);
                count.expiries(call);
                count.grants(row, node, call);
                count.look_alikes(call);
            }
            _ => {}
        }
    }
    count.found
}

/// What [`count`] keeps along one history.
#[derive(Default)]
struct Count<'a> {
    ttl_ms: i64,
    found: BTreeMap<String, u64>,
    /// Node label -> virtual ms its stall ends.
    stalled: BTreeMap<&'a str, i64>,
    /// Run -> crash sites awaiting a resume.
    crashed: BTreeMap<&'a str, Vec<&'a str>>,
    /// Run -> (granted node's skew, ms) of the latest grant.
    holder_skew: BTreeMap<&'a str, (&'a str, i64)>,
    /// Run -> the epoch a delete removed (the tombstone must hold above it).
    deleted: BTreeMap<&'a str, i64>,
    /// Run -> the highest epoch granted so far; and the same, as of an unleased (admin) delete.
    top_grant: BTreeMap<&'a str, i64>,
    purged: BTreeMap<&'a str, i64>,
    /// Lease -> the caller's clock its expiry falls on; run -> the expiry of its current row.
    expiry: BTreeMap<(&'a str, &'a str, i64), i64>,
    row_expiry: BTreeMap<&'a str, i64>,
    /// Nodes whose stall was aimed at their lease's expiry instant.
    aimed: BTreeMap<&'a str, ()>,
    /// Runs a blob was put into (accepted).
    blob_runs: BTreeMap<&'a str, ()>,
    /// Run -> (accepted appends since its last delete, the last accepted seq).
    journals: BTreeMap<&'a str, (i64, i64)>,
}

impl<'a> Count<'a> {
    fn hit(&mut self, name: String) {
        *self.found.entry(name).or_default() += 1;
    }

    /// A disruption: takeovers mid-call, stalls (and when they end), crashes by site.
    fn fault(&mut self, row: &'a Row, kind: Disruption, run: Option<&'a RunId>, detail: &'a str) {
        match kind {
            Disruption::Takeover => {
                if let Some(op) = detail.strip_prefix("mid-").and_then(|d| d.split(' ').next()) {
                    self.hit(format!("takeover-mid-{op}"));
                }
                if detail.contains("expiry instant") {
                    self.hit("takeover-aimed-at-expiry-instant".to_owned());
                }
            }
            Disruption::Stall => {
                let ms = detail
                    .split(" stalls ")
                    .nth(1)
                    .and_then(|d| d.split("ms").next())
                    .and_then(|n| n.parse::<i64>().ok());
                if let Some(ms) = ms {
                    self.stalled.insert(row.node.as_str(), row.at_ms.saturating_add(ms));
                }
                if detail.contains("expiry instant") {
                    self.aimed.insert(row.node.as_str(), ());
                }
            }
            Disruption::Crash => {
                if let Some(site) = detail.rsplit(" at ").next() {
                    self.hit(format!("crash-at-{site}"));
                    if let Some(run) = run {
                        self.crashed.entry(run.as_str()).or_default().push(site);
                    }
                }
            }
            Disruption::Zombie | Disruption::Purge | Disruption::ClockJump | Disruption::Restart => {}
        }
    }

    /// Refused fenced writes (by zombies, forgers, stalled nodes waking) and writes at the
    /// expiry instant.
    fn refusals(&mut self, row: &'a Row, node: Option<Node>, call: &'a Call) {
        let run = call.run.as_str();
        if let Some(until) = self.stalled.get(row.node.as_str()).copied()
            && row.at_ms >= until
            && is_fenced_write(call.surface)
        {
            self.stalled.remove(row.node.as_str());
            self.hit("stall-woke-writing".to_owned());
        }
        if node == Some(Node::Zombie) && is_refusal(&call.outcome) && is_fenced_write(call.surface) {
            self.hit(format!("zombie-refused-{}", call.surface.as_str()));
        }
        if let Some(lease) = &call.lease
            && lease.owner == FORGER
            && node == Some(Node::Zombie)
            && is_refusal(&call.outcome)
            && is_fenced_write(call.surface)
        {
            self.hit(format!("forged-refused-{}", call.surface.as_str()));
        }
        if let Some(lease) = &call.lease
            && self.aimed.contains_key(row.node.as_str())
            && self.expiry.get(&(run, lease.owner.as_str(), lease.epoch.0)) == Some(&call.clock_ms)
        {
            self.aimed.remove(row.node.as_str());
            self.hit("stall-woke-at-expiry-instant".to_owned());
        }
        if call.surface == Surface::DeleteBlob && call.outcome == CallOutcome::RunMismatch {
            self.hit("cross-run-blob-delete-refused".to_owned());
        }
        if let Some(lease) = &call.lease
            && call.surface != Surface::Acquire
            && call.outcome == CallOutcome::Stale
            && self.expiry.get(&(run, lease.owner.as_str(), lease.epoch.0)) == Some(&call.clock_ms)
        {
            self.hit("expiry-instant-refused".to_owned());
        }
    }

    /// Lease expiries as accepted grants, renews, releases and deletes move them.
    fn expiries(&mut self, call: &'a Call) {
        let run = call.run.as_str();
        if call.outcome.is_ok()
            && let Some(lease) = &call.lease
        {
            match call.surface {
                Surface::Acquire | Surface::Renew => {
                    let at = call.clock_ms.saturating_add(self.ttl_ms);
                    self.expiry.insert((run, lease.owner.as_str(), lease.epoch.0), at);
                    if call.surface == Surface::Acquire && self.row_expiry.get(run) == Some(&call.clock_ms) {
                        self.hit("takeover-at-expiry-instant".to_owned());
                    }
                    self.row_expiry.insert(run, at);
                }
                Surface::Release | Surface::Delete => {
                    self.row_expiry.remove(run);
                }
                _ => {}
            }
        }
        if call.surface == Surface::Delete && call.outcome.is_ok() && call.lease.is_none() {
            self.row_expiry.remove(run);
            self.purged.insert(run, self.top_grant.get(run).copied().unwrap_or(0));
        }
        if call.surface == Surface::Acquire
            && call.outcome.is_ok()
            && let Some(epoch) = call.epoch()
        {
            if let Some(before) = self.purged.remove(run)
                && epoch.0 > before
            {
                self.hit("admin-purge-tombstone-held".to_owned());
            }
            let top = self.top_grant.entry(run).or_default();
            *top = (*top).max(epoch.0);
        }
    }

    /// Injected errors, busy settles, retention's races, and what each accepted grant resumes
    /// or shows (skew, tombstones).
    fn grants(&mut self, row: &'a Row, node: Option<Node>, call: &'a Call) {
        let run = call.run.as_str();
        if call.outcome == CallOutcome::Injected
            && let Some(role) = node.and_then(role)
        {
            self.hit(format!("store-error-{role}"));
        }
        if call.outcome == CallOutcome::Busy
            && call.surface == Surface::Append
            && matches!(&call.payload, crate::history::Payload::Entry(e) if e.kind == "decision" && e.extra.get("value").and_then(|v| v.get("decisionType")).and_then(|v| v.as_str()) == Some("run_settle"))
        {
            self.hit("busy-during-settle".to_owned());
        }
        if node == Some(Node::Sweeper)
            && call.surface == Surface::Acquire
            && matches!(call.outcome, CallOutcome::HeldBy { .. })
        {
            self.hit("retention-raced-live".to_owned());
        }
        if call.surface == Surface::Delete
            && call.outcome.is_ok()
            && let Some(epoch) = call.epoch()
        {
            self.deleted.insert(run, epoch.0);
        }
        if call.surface == Surface::Acquire && call.outcome.is_ok() {
            self.granted(row, call);
        }
    }

    /// What an accepted grant of `call.run` shows or resumes: a clock skew beyond the ttl against
    /// the run's previous holder, a resume after a crash, a recreate that held its tombstone.
    fn granted(&mut self, row: &'a Row, call: &'a Call) {
        let run = call.run.as_str();
        let skew = call.clock_ms - row.at_ms;
        if let Some((holder, other)) = self.holder_skew.get(run)
            && *holder != row.node
            && (skew - other).abs() > self.ttl_ms
        {
            self.hit("skew-beyond-ttl".to_owned());
        }
        self.holder_skew.insert(run, (row.node.as_str(), skew));
        for site in self.crashed.remove(run).unwrap_or_default() {
            self.hit(format!("resume-after-crash-at-{site}"));
        }
        if let (Some(before), Some(epoch)) = (self.deleted.remove(run), call.epoch())
            && epoch.0 > before
        {
            self.hit("recreate-tombstone-held".to_owned());
        }
    }
}

impl<'a> Count<'a> {
    /// What a store matching by prefix or counting entries would confuse: a blob listing of a run
    /// whose id begins another run's that holds blobs (`r1` and `r10`), and an append refused at
    /// the tail although its seq is above the journal's entry count (a journal with a gap).
    fn look_alikes(&mut self, call: &'a Call) {
        let run = call.run.as_str();
        match call.surface {
            Surface::PutBlob if call.outcome.is_ok() => {
                self.blob_runs.insert(run, ());
            }
            Surface::ListBlobs
                if call.outcome.is_ok()
                    && self.blob_runs.keys().any(|other| *other != run && other.starts_with(run)) =>
            {
                self.hit("look-alike-run-listed".to_owned());
            }
            Surface::Append => {
                let crate::history::Payload::Entry(entry) = &call.payload else { return };
                if call.outcome.is_ok() {
                    let journal = self.journals.entry(run).or_default();
                    *journal = (journal.0 + 1, entry.seq.0);
                } else if call.outcome == CallOutcome::JournalOrder
                    && let Some((count, tail)) = self.journals.get(run)
                    && entry.seq.0 > *count
                    && entry.seq.0 <= *tail
                {
                    self.hit("seq-refused-above-count".to_owned());
                }
            }
            Surface::Delete if call.outcome.is_ok() => {
                self.journals.remove(run);
            }
            _ => {}
        }
    }
}

/// Coverage over many worlds: per event, the worlds it happened in and its total count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table(pub BTreeMap<String, (u64, u64)>);

impl Table {
    pub fn add(&mut self, world: &BTreeMap<String, u64>) {
        for (event, n) in world {
            // A world lists only what happened in it: `worlds` never exceeds `total`.
            assert!(*n > 0, "a world lists {event} with no hit");
            let entry = self.0.entry(event.clone()).or_default();
            entry.0 += 1;
            entry.1 += n;
        }
    }

    /// The declared events that never happened.
    pub fn missing<'a>(&self, aims: &'a [String]) -> Vec<&'a str> {
        aims.iter().filter(|e| !self.0.contains_key(e.as_str())).map(String::as_str).collect()
    }

    /// The table as text: one line per event that happened, then the aimed ones that did not.
    pub fn text(&self, aims: &[String]) -> String {
        use std::fmt::Write as _;
        let mut out = format!("{:<34} {:>8} {:>10}\n", "coverage event", "worlds", "total");
        for (event, (worlds, total)) in &self.0 {
            let _ = writeln!(out, "{event:<34} {worlds:>8} {total:>10}");
        }
        for event in self.missing(aims) {
            let _ = writeln!(out, "{event:<34} {:>8} {:>10}  (aimed at, never happened)", 0, 0);
        }
        out
    }

    pub fn json(&self) -> serde_json::Value {
        self.0
            .iter()
            .map(|(event, (worlds, total))| serde_json::json!({"event": event, "worlds": worlds, "total": total}))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_are_unique() {
        let all = events();
        let set: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(set.len(), all.len());
    }

    #[test]
    fn a_table_counts_worlds_and_totals_and_names_what_is_missing() {
        let mut t = Table::default();
        t.add(&BTreeMap::from([("crash-at-meta".to_owned(), 3)]));
        t.add(&BTreeMap::from([("crash-at-meta".to_owned(), 1)]));
        assert_eq!(t.0["crash-at-meta"], (2, 4));
        let aims = vec!["crash-at-meta".to_owned(), "stall-woke-writing".to_owned()];
        assert_eq!(t.missing(&aims), ["stall-woke-writing"]);
    }
}
