//! The checkers over how the engine's actors behave beyond what the store refuses: obligations
//! that fencing alone cannot hold, because a violation of them is contained by the store (a
//! refused write) or put right later (a repair), so the end state looks healthy.
//!
//! - `dispatch-identity` (E10): a dispatch is its running entry. At most one
//!   dispatch is open at a time in a run's generation (the one a crash or failure left
//!   dangling), so a step re-dispatched after a crash reuses its dangling entry instead of opening
//!   a new one, and each running entry is closed by at most one terminal of the same step. A
//!   write cut by its process's death may have landed or not: some possible fate must pass.
//! - `silent-replay` (E12): a journal that records a terminal `run_settle` is final: a tenure
//!   that finds its run settled appends nothing; nor does a `run_settle` repeat the last one with
//!   nothing appended since, so journals never grow without work.
//! - `renew-loss` (E13, 9.2): after a failed renew of its own lease, a holder pays nothing more
//!   under that lease (a payment is the one thing the store's fence cannot refuse).
//! - `justified-repair` (E14): the operator's repair of a run's meta is justified only for a run
//!   that a crash, stall, takeover, failed segment or unreleased tenure touched in its generation;
//!   a repair of an untouched run hides an engine that left its meta wrong.

use crate::checker::Checker;
use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, JournalEntry, RunId, RunStatus, Seq};

use super::model::{Run, entry_label, holder, settle_status};
use super::serial::MAX_INDETERMINATE_PER_RUN;
use super::{Context, Descriptor, Scope, Violation};
use crate::history::{Call, CallOutcome, EffectKind, Event, Payload, Row, SegmentError, SegmentResult, Surface};

pub(super) const DISPATCH_IDENTITY: Checker = Checker::DispatchIdentity;
pub(super) const DISPATCH_IDENTITY_CHECK: Descriptor = Descriptor {
    checker: DISPATCH_IDENTITY,
    scope: Scope::Engine,
    invariant: "a dispatch is its running entry: at most one dispatch of a run is open at a time, so a re-dispatch reuses its dangling entry, and a terminal closes an open running entry of its own step (E10)",
    check: dispatch_identity,
};
pub(super) const SILENT_REPLAY: Checker = Checker::SilentReplay;
pub(super) const SILENT_REPLAY_CHECK: Descriptor = Descriptor {
    checker: SILENT_REPLAY,
    scope: Scope::Engine,
    invariant: "a journal that records a terminal run_settle is final: a tenure that finds its run settled appends nothing, and no run_settle repeats the last with nothing new (E12)",
    check: silent_replay,
};
pub(super) const RENEW_LOSS: Checker = Checker::RenewLoss;
pub(super) const RENEW_LOSS_CHECK: Descriptor = Descriptor {
    checker: RENEW_LOSS,
    scope: Scope::Engine,
    invariant: "after a failed renew of its own lease a holder pays no call turn and runs no tool under that epoch (E13, 9.2)",
    check: renew_loss,
};
pub(super) const JUSTIFIED_REPAIR: Checker = Checker::JustifiedRepair;
pub(super) const JUSTIFIED_REPAIR_CHECK: Descriptor = Descriptor {
    checker: JUSTIFIED_REPAIR,
    scope: Scope::Engine,
    invariant: "the operator repairs only runs that a crash, stall, takeover, failed segment, unreleased tenure or offline resolution touched (E14)",
    check: justified_repair,
};

/// An entry that opens a dispatch (contracts 1.2): status `running`, with a step `key`.
fn step_key(entry: &fencesim_store::JournalEntry) -> Option<&str> {
    (entry.status == "running").then(|| entry.extra.get("key").and_then(|k| k.as_str())).flatten()
}

/// Per run generation, in acceptance order: a running entry is appended only while no other
/// dispatch of the run is open, and a terminal closes an open running entry of its own step.
///
/// An append or delete cut by its process's death (indeterminate: a soak process `SIGKILL`ed
/// between its call's begin and end lines) may have landed or not, and either changes what is
/// open. A run passes if some fate of its cut writes that a store could have produced makes its
/// dispatches consistent (as `serial-history` searches them; the first
/// [`MAX_INDETERMINATE_PER_RUN`], later ones taken as not landed); otherwise the violations of
/// "none landed" are reported, naming the cut calls. Taking every cut append as not landed
/// called an honest engine soak a violation: a worker killed just after its `limit` terminal
/// committed left, to the checker, its dispatch open, and the next holder's fresh re-dispatch of
/// the step (an unstamped limit is rerun live, contracts 5.13) looked like a second open one.
pub(super) fn dispatch_identity(ctx: &Context) -> Vec<Violation> {
    writes_per_run(ctx)
        .into_values()
        .flat_map(|writes| under_some_fate(ctx, &writes, |landed| dispatches(ctx, &writes, landed)))
        .collect()
}

/// Each run's appends and deletes that were accepted or cut (indeterminate), by position.
fn writes_per_run<'a>(ctx: &Context<'a>) -> BTreeMap<Run<'a>, Vec<usize>> {
    let mut runs: BTreeMap<Run, Vec<usize>> = BTreeMap::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        let Some(call) = row.call() else { continue };
        let may_have_landed = call.outcome.is_ok() || call.outcome == CallOutcome::Indeterminate;
        if !may_have_landed || !matches!(call.surface, Surface::Append | Surface::Delete) {
            continue;
        }
        if let Some(run) = ctx.runs.at(row.index) {
            runs.entry(run).or_default().push(pos);
        }
    }
    runs
}

/// What `judge` finds under the fates of the cut calls among `writes` (one run's): nothing if
/// some possible fate satisfies it, else its violations with every cut call taken as not landed.
fn under_some_fate(
    ctx: &Context,
    writes: &[usize],
    judge: impl Fn(&dyn Fn(usize) -> bool) -> Vec<Violation>,
) -> Vec<Violation> {
    let rows = ctx.rows;
    let cut = |pos: usize| rows[pos].call().is_some_and(|c| c.outcome == CallOutcome::Indeterminate);
    let mut maybe: Vec<usize> = writes.iter().copied().filter(|&pos| cut(pos)).collect();
    maybe.truncate(MAX_INDETERMINATE_PER_RUN);
    // Every fate, "none landed" first (always possible): the first that passes wins.
    let mut first: Option<Vec<Violation>> = None;
    for choice in 0..1u32 << maybe.len() {
        let landed = |pos: usize| match maybe.iter().position(|&m| m == pos) {
            Some(i) => choice & (1 << i) != 0,
            None => !cut(pos),
        };
        if !possible(rows, writes, &landed) {
            continue;
        }
        let found = judge(&landed);
        if found.is_empty() {
            return Vec::new();
        }
        first.get_or_insert(found);
    }
    let mut found = first.unwrap_or_default();
    if !maybe.is_empty() {
        let named: Vec<String> = maybe.iter().map(|pos| format!("#{}", rows[*pos].index)).collect();
        for v in &mut found {
            v.explanation.push_str(&format!(
                " (no choice of committed or not for the indeterminate calls {} matches)",
                named.join(", ")
            ));
        }
    }
    found
}

/// Whether a store could have landed the writes `landed` picks among `writes` (one run's): never
/// a cut append at a seq another landed append of the generation holds, which the seq guard
/// (S5) refuses. Two accepted ones at one seq are `seq-contiguous`'s and `serial-history`'s.
fn possible(rows: &[Row], writes: &[usize], landed: &dyn Fn(usize) -> bool) -> bool {
    // seq -> whether a cut append landed it, in the current generation.
    let mut seqs: BTreeMap<Seq, bool> = BTreeMap::new();
    for &pos in writes.iter().filter(|&&pos| landed(pos)) {
        let Some(call) = rows[pos].call() else { continue };
        let cut = call.outcome == CallOutcome::Indeterminate;
        match (call.surface, &call.payload) {
            (Surface::Delete, _) => seqs.clear(),
            (Surface::Append, Payload::Entry(entry)) => {
                let before = seqs.insert(entry.seq, cut);
                if before.is_some_and(|other| other || cut) {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// One run's dispatches along the writes `landed` picks among `writes`.
fn dispatches(ctx: &Context, writes: &[usize], landed: &dyn Fn(usize) -> bool) -> Vec<Violation> {
    let mut state = Dispatches::default();
    let mut found = Vec::new();
    for &pos in writes.iter().filter(|&&pos| landed(pos)) {
        let row = &ctx.rows[pos];
        let Some(call) = row.call() else { continue };
        match (call.surface, &call.payload) {
            (Surface::Delete, _) => state = Dispatches::default(),
            (Surface::Append, Payload::Entry(entry)) => {
                if let Some(key) = step_key(entry) {
                    found.extend(state.open(key, row, call, entry));
                } else if let Some(running) = entry.ref_seq {
                    found.extend(state.close(running, row, call, entry));
                }
            }
            _ => {}
        }
    }
    found
}

/// The dispatches of one run generation, walked in acceptance order.
#[derive(Default)]
struct Dispatches<'a> {
    /// The open running entries: seq -> (step key, row).
    open: BTreeMap<Seq, (&'a str, usize)>,
    /// Every running entry of the generation: seq -> step key.
    opened: BTreeMap<Seq, &'a str>,
}

impl<'a> Dispatches<'a> {
    /// A running entry of step `key` opens a dispatch: a violation when another was still open.
    fn open(&mut self, key: &'a str, row: &Row, call: &Call, entry: &JournalEntry) -> Option<Violation> {
        let found = self.open.iter().next().map(|(&seq, &(other, at))| {
            let same = if other == key { "the same step's" } else { "another step's" };
            Violation::new(
                DISPATCH_IDENTITY,
                format!(
                    "{} opened dispatch {key} of {} at seq={} under {} while {same} dispatch {other} at seq={seq} was still open (row {at}): a re-dispatch must reuse its dangling entry",
                    row.node,
                    call.run,
                    entry.seq,
                    holder(call)
                ),
                Some(row.index),
                Some(at),
            )
        });
        self.open.insert(entry.seq, (key, row.index));
        self.opened.insert(entry.seq, key);
        found
    }

    /// A terminal closes the running entry at seq `running`: a violation unless that entry is
    /// open and of the terminal's own step.
    fn close(&mut self, running: Seq, row: &Row, call: &Call, entry: &JournalEntry) -> Option<Violation> {
        let key = entry.extra.get("key").and_then(|k| k.as_str());
        let why = match (self.open.remove(&running), self.opened.get(&running)) {
            (Some((step, _)), _) if key == Some(step) => None,
            (Some((step, _)), _) => Some(format!("the running entry is step {step}")),
            (None, Some(_)) => Some("that dispatch was already closed".to_owned()),
            (None, None) => Some("no running entry of this generation has that seq".to_owned()),
        }?;
        Some(Violation::new(
            DISPATCH_IDENTITY,
            format!(
                "{} appended terminal {} to {} closing running seq={running}, but {why}",
                row.node,
                entry_label(entry),
                call.run
            ),
            Some(row.index),
            None,
        ))
    }
}

/// Per run generation, in acceptance order: once an accepted `run_settle` records a terminal
/// status, no append is accepted in that generation; and a `run_settle` is never appended over
/// a journal whose last settle says the same with nothing appended since (a replay that found
/// nothing new to record, as of a suspended run swept again and again).
pub(super) fn silent_replay(ctx: &Context) -> Vec<Violation> {
    // run -> the last accepted settle (row, status) and whether anything was appended since.
    let mut last: BTreeMap<Run, (usize, RunStatus, bool)> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        let Some(call) = row.call().filter(|c| c.outcome.is_ok()) else { continue };
        let Some(run) = ctx.runs.at(row.index) else { continue };
        match (call.surface, &call.payload) {
            (Surface::Delete, _) => {
                last.remove(&run);
            }
            (Surface::Append, Payload::Entry(entry)) => {
                let settle = settle_status(entry);
                let why = match last.get(&run) {
                    Some(&(at, status, _)) if status.is_terminal() => {
                        Some((at, format!("whose journal was final: its run_settle at row {at} says {status}")))
                    }
                    Some(&(at, status, false)) if settle == Some(status) => Some((
                        at,
                        format!("with nothing appended since its last run_settle at row {at}, which says {status}"),
                    )),
                    _ => None,
                };
                if let Some((at, why)) = why {
                    assert!(at < row.index, "row {}: a last settle recorded at row {at}", row.index);
                    found.push(Violation::new(
                        SILENT_REPLAY,
                        format!(
                            "{} appended {} seq={} to {} under {}, {why}",
                            row.node,
                            entry_label(entry),
                            entry.seq,
                            call.run,
                            holder(call)
                        ),
                        Some(row.index),
                        Some(at),
                    ));
                }
                match settle {
                    Some(status) => {
                        last.insert(run, (row.index, status, false));
                    }
                    None => {
                        if let Some((_, _, work)) = last.get_mut(&run) {
                            *work = true;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// After a failed renew of a lease the same node was granted, that node pays nothing more under
/// the lease's epoch: no call turn, no tool run. Payments are what fencing cannot contain (the
/// store refuses a lost holder's writes, not its provider calls), so the segment must look at its
/// cancellation between an effect's fault point and the payment. Writes after the loss are not
/// judged here: a write already on its way when the node paused (a stall, a busy retry) cannot be
/// told from a new one in the history, and the store's fence refuses both (no-stale-acceptance).
pub(super) fn renew_loss(ctx: &Context) -> Vec<Violation> {
    let mut tenures = RenewLosses::default();
    let mut found = Vec::new();
    for row in ctx.rows {
        let node = row.node.as_str();
        match &row.event {
            Event::Call(call) => tenures.call(node, row.index, call),
            Event::Effect(effect) => {
                let Some(epoch) = effect.epoch else { continue };
                let Some(&at) = tenures.lost.get(&(node, &effect.run, epoch)) else { continue };
                // The failed renew is an earlier row of the same walk.
                assert!(at < row.index, "row {}: a renew loss recorded at row {at}", row.index);
                let what = match effect.kind {
                    EffectKind::Call => format!("paid call turn {}", effect.n),
                    EffectKind::Tool => format!("ran tool {}", effect.n),
                };
                found.push(Violation::new(
                    RENEW_LOSS,
                    format!(
                        "{node} {what} of {} dispatch running={} under e{epoch} after its renew of that lease failed at row {at}",
                        effect.run, effect.running
                    ),
                    Some(row.index),
                    Some(at),
                ));
            }
            _ => {}
        }
    }
    found
}

/// A tenure: (node, run, epoch).
type Tenure<'a> = (&'a str, &'a RunId, Epoch);

/// The tenures a node was granted and the renews of them that failed, walked in row order.
#[derive(Default)]
struct RenewLosses<'a> {
    /// Leases a node was granted by its own acquire.
    granted: BTreeSet<Tenure<'a>>,
    /// The row of the first failed renew of each tenure.
    lost: BTreeMap<Tenure<'a>, usize>,
}

impl<'a> RenewLosses<'a> {
    /// Record `node`'s call at row `index`: an accepted acquire grants a tenure, a failed renew
    /// of a granted one loses it.
    fn call(&mut self, node: &'a str, index: usize, call: &'a Call) {
        let Some(lease) = &call.lease else { return };
        let key = (node, &call.run, lease.epoch);
        match call.surface {
            Surface::Acquire if call.outcome.is_ok() => {
                self.granted.insert(key);
            }
            Surface::Renew if !call.outcome.is_ok() && self.granted.contains(&key) => {
                self.lost.entry(key).or_insert(index);
            }
            _ => {}
        }
    }
}

/// Every repair the operator made was of a run something touched in its generation: a crash,
/// stall or takeover aimed at it, a segment of it that failed (reported, or a write of it the
/// store failed outright), a tenure of it that never
/// released its lease (its node crashed, restarted or lost the lease on the way), or an offline
/// resolution.
pub(super) fn justified_repair(ctx: &Context) -> Vec<Violation> {
    let released: BTreeSet<(Run, Epoch)> = ctx
        .rows
        .iter()
        .filter_map(|row| row.call().zip(ctx.runs.at(row.index)))
        .filter(|(c, _)| c.surface == Surface::Release && c.outcome.is_ok())
        .filter_map(|(c, run)| c.lease.as_ref().map(|l| (run, l.epoch)))
        .collect();
    // run -> the first row that touched it in this generation.
    let mut touched: BTreeMap<Run, usize> = BTreeMap::new();
    let mut found = Vec::new();
    for row in ctx.rows {
        let Some(run_key) = ctx.runs.at(row.index) else { continue };
        match &row.event {
            Event::Call(call) if call.surface == Surface::Delete && call.outcome.is_ok() => {
                touched.remove(&run_key);
            }
            event if touches(event, run_key, &released) => {
                touched.entry(run_key).or_insert(row.index);
            }
            Event::Repair { run, status } if !touched.contains_key(&run_key) => {
                found.push(Violation::new(
                    JUSTIFIED_REPAIR,
                    format!(
                        "{} repaired {run}'s meta to {status}, but nothing interrupted {run}: every tenure released its lease, no segment failed, no crash, stall or takeover hit it; an engine left its meta wrong",
                        row.node
                    ),
                    Some(row.index),
                    None,
                ));
            }
            _ => {}
        }
    }
    found
}

/// Whether `event` touches its run (`run`) so that a later repair of it is justified: an
/// offline resolution, a tenure that never released its lease (`released` holds those that did),
/// a crash, stall or takeover aimed at it, a failed segment, or a write the store failed outright.
fn touches(event: &Event, run: Run, released: &BTreeSet<(Run, Epoch)>) -> bool {
    match event {
        // An offline resolution leaves meta `suspended` over a resolved journal (D11): that
        // is the residue audit repairs to `running` (R5).
        Event::Call(Call {
            surface: Surface::Append,
            outcome: CallOutcome::Ok,
            payload: Payload::Entry(entry),
            ..
        }) if entry.kind == "resolution" => true,
        Event::Call(call)
            if call.surface == Surface::Acquire
                && call.outcome.is_ok()
                && call.lease.as_ref().is_some_and(|l| !released.contains(&(run, l.epoch))) =>
        {
            true
        }
        Event::Fault { kind, run: Some(_), .. } if kind.interrupts() => true,
        // A segment that refused its run's workflow binding did so before any write (contracts
        // 3.7): it left nothing to repair.
        Event::Outcome { result: SegmentResult::Failed(error), .. } if *error != SegmentError::Binding => true,
        // A write the store failed outright (an I/O error, not a refusal) failed its segment,
        // whether or not the segment lived to report it.
        Event::Call(call)
            if call.surface.is_mutation() && matches!(call.outcome, CallOutcome::Error(_) | CallOutcome::Injected) =>
        {
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use fencesim_store::{JournalEntry, Lease, RunId, Seq};
    use serde_json::json;

    use super::super::{OracleConfig, Scope, check};
    use crate::history::{Call, CallOutcome, Event, Payload, Role, Row, Snapshot, Surface};

    fn running(seq: i64) -> JournalEntry {
        JournalEntry::new(seq, "agent", "running").with("key", json!("probe"))
    }

    fn limit(seq: i64, running: i64) -> JournalEntry {
        let mut entry = JournalEntry::new(seq, "agent", "limit").with("key", json!("probe"));
        entry.ref_seq = Some(Seq(running));
        entry
    }

    /// One append per `(node, epoch, entry, outcome)`, in that order, to run `s034`.
    fn appends(calls: &[(&str, i64, JournalEntry, CallOutcome)]) -> Vec<Row> {
        calls
            .iter()
            .enumerate()
            .map(|(index, (node, epoch, entry, outcome))| {
                let lease =
                    Lease { run: RunId::new("s034"), owner: (*node).to_owned(), epoch: fencesim_store::Epoch(*epoch) };
                let call = Call {
                    clock_ms: index as i64 * 10,
                    lease: Some(lease),
                    owner: None,
                    counter: 0,
                    surface: Surface::Append,
                    run: RunId::new("s034"),
                    blob_ref: None,
                    payload: Payload::Entry(entry.clone()),
                    outcome: outcome.clone(),
                    read: None,
                };
                Row {
                    index,
                    at_ms: index as i64 * 10,
                    node: (*node).to_owned(),
                    role: Role::Worker,
                    event: Event::Call(call),
                }
            })
            .collect()
    }

    fn dispatch_identity(rows: &[Row]) -> Vec<String> {
        let cfg = OracleConfig { ttl_ms: 250, planned: Vec::new(), scope: Scope::Engine, scripts: Vec::new() };
        check(rows, &Snapshot::default(), &cfg)
            .into_iter()
            .filter(|v| v.checker == super::DISPATCH_IDENTITY)
            .map(|v| v.to_string())
            .collect()
    }

    /// A kept engine soak (seed 1, 40 runs): w0.0 was SIGKILLed after its `limit` terminal of
    /// s034 committed and before it logged the call's end; w2.3 took over, found the limit
    /// unstamped (no settle after it) and re-dispatched the step fresh, as contracts 5.13 say.
    /// The terminal landed (the store holds it; w2.3 appended at seq 3), so dispatch 1 was
    /// closed: the checker once took the cut terminal as not landed and called the re-dispatch a
    /// second open dispatch of the step.
    #[test]
    fn a_cut_terminal_that_landed_closed_its_dispatch() {
        use CallOutcome::{Indeterminate, Ok};
        let rows = appends(&[
            ("client", 2, running(1), Ok),
            ("w0.0", 3, limit(2, 1), Indeterminate),
            ("w2.3", 4, running(3), Ok),
            ("w2.3", 4, limit(4, 3), Ok),
        ]);
        assert_eq!(dispatch_identity(&rows), Vec::<String>::new());
        // A cut running entry that landed is the dispatch a later terminal closes.
        let rows = appends(&[("w0.0", 3, running(1), Indeterminate), ("w2.3", 4, limit(2, 1), Ok)]);
        assert_eq!(dispatch_identity(&rows), Vec::<String>::new());
    }

    /// A cut terminal whose seq an accepted append took cannot have landed (the seq guard): a
    /// fresh dispatch over its dispatch is still a re-dispatch over an open one, and so is any
    /// fresh dispatch while a cut terminal of another dispatch is all that could have closed it.
    #[test]
    fn a_cut_terminal_that_cannot_have_landed_leaves_its_dispatch_open() {
        use CallOutcome::{Indeterminate, Ok};
        let rows = appends(&[
            ("client", 2, running(1), Ok),
            ("w0.0", 3, limit(2, 1), Indeterminate),
            ("w2.3", 4, running(2), Ok),
        ]);
        let found = dispatch_identity(&rows);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("while the same step's dispatch probe at seq=1 was still open")
                && found[0].contains("(no choice of committed or not for the indeterminate calls #1 matches)"),
            "{found:?}"
        );
        // A terminal of no dispatch stays a violation whatever a cut call did.
        let rows = appends(&[("w0.0", 3, running(1), Indeterminate), ("w2.3", 4, limit(2, 7), Ok)]);
        let found = dispatch_identity(&rows);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("no running entry of this generation has that seq"), "{found:?}");
    }
}
