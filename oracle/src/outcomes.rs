//! The checkers over what the engines did beside their store calls: the re-pay bound on paid
//! effects (contracts 3.5, 5.13), liveness (every planned run reached the store; after
//! quiescence every run is settled or waiting), and honest segment outcomes (3.6, D12b: a
//! superseded segment never reports a settled run).
//!
//! Honest-outcome pairs a segment's outcome with the last `run_settle` append, the last terminal
//! meta write and the loads of its run by the same node since that node's previous outcome for
//! the run, keyed by (node, run). A settled outcome is backed by its own accepted settle; without
//! one, by the journal it read (or the journal now) ending in a settle of that status; over an
//! empty journal it did not append to, by its own accepted meta write of that status. The
//! outcome of a segment refused before any store call (`err:segment-live`: a second live segment
//! of a run a stalled segment of the same node still holds) takes nothing. Two concurrent
//! segments of one run on one node that both reached the store would share the key; the engine
//! refuses the second.

use crate::checker::Checker;
use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, RunId, RunStatus, Seq};

use super::model::{Run, last_settle, open_suspensions, settle_status};
use super::{Context, Descriptor, Scope, Violation};
use crate::history::{
    Call, CallOutcome, Effect, EffectKind, Event, Payload, Row, RunState, SegmentError, SegmentResult, Surface,
};

pub(super) const REPAY_BOUND: Checker = Checker::RepayBound;
pub(super) const REPAY_BOUND_CHECK: Descriptor = Descriptor {
    checker: REPAY_BOUND,
    scope: Scope::Engine,
    invariant: "a dispatch's turn or tool is paid once per tenure, never after its terminal, never again once an accepted checkpoint covers it, and at most 1 + (unreleased tenures that paid into that dispatch) times (3.5, E11, 5.13)",
    check: repay_bound,
};
pub(super) const LIVENESS: Checker = Checker::Liveness;
pub(super) const LIVENESS_CHECK: Descriptor = Descriptor {
    checker: LIVENESS,
    scope: Scope::Engine,
    invariant: "every planned run reached the store, and after quiescence every run is settled (terminal meta backed by a final run_settle) or waits on an open suspension",
    check: liveness,
};
pub(super) const HONEST_OUTCOME: Checker = Checker::HonestOutcome;
pub(super) const HONEST_OUTCOME_CHECK: Descriptor = Descriptor {
    checker: HONEST_OUTCOME,
    scope: Scope::Engine,
    invariant: "a settled outcome a node reports is backed by its own accepted run_settle, by the journal it read, or over an empty journal by its own accepted meta write (3.6, D12b)",
    check: honest_outcome,
};

/// A paid effect's identity within a generation of its run: (run, generation, running seq, kind, n).
type Dispatch<'a> = (Run<'a>, u32, Seq, EffectKind, u32);

fn effect_name(kind: EffectKind, run: &RunId, running: Seq, n: u32) -> String {
    match kind {
        EffectKind::Call => format!("call turn {n} of {run} dispatch running={running}"),
        EffectKind::Tool => format!("tool {n} of {run} dispatch running={running}"),
    }
}

fn epoch_label(epoch: Option<Epoch>) -> String {
    epoch.map_or_else(|| "unleased".to_owned(), |e| format!("e{e}"))
}

/// (a) a dispatch's call turn or tool is paid at most once per tenure; (b) never by a tenure at
/// or after the one whose terminal for that dispatch was accepted in the run's generation (an
/// older tenure still finishing its turn is the at-least-once window that (c) bounds), nor by
/// one at or after the tenure of an accepted checkpoint that covers it (the newest accepted put
/// of the dispatch's checkpoint ref; an undecodable one or a delete covers nothing); (c) at
/// most 1 + k times per generation, where k counts the interrupted tenures in the dispatch's
/// window: epochs of the run that paid any effect of that dispatch (same running seq, same
/// generation) and never had an accepted release in it, or had a write the store failed outright
/// (a storage error: the tenure's progress may be lost as in a crash), or gave up: released right
/// after a write that stayed busy through its retries (its progress never landed, as in a crash).
/// A generation ends at an accepted delete
/// of the run. Unleased payments belong to no tenure and never raise the bound.
pub(super) fn repay_bound<'a>(ctx: &Context<'a>) -> Vec<Violation> {
    let mut repay = Repay::default();
    for row in ctx.rows {
        let Some(run) = ctx.runs.at(row.index) else { continue };
        match &row.event {
            Event::Call(call) => repay.call(run, call, row.index),
            Event::Effect(effect) => repay.effect(run, effect, row.index),
            _ => {}
        }
    }
    repay.bounds()
}

/// What [`repay_bound`] keeps along the rows.
#[derive(Default)]
struct Repay<'a> {
    generation: BTreeMap<Run<'a>, u32>,
    terminals: BTreeMap<(Run<'a>, u32, Seq), (usize, Option<Epoch>)>,
    per_tenure: BTreeMap<(Dispatch<'a>, Option<Epoch>), usize>,
    payments: BTreeMap<Dispatch<'a>, Vec<usize>>,
    /// (run, generation, running seq) -> the epochs that paid into that dispatch.
    windows: BTreeMap<(Run<'a>, u32, Seq), BTreeSet<Epoch>>,
    released: BTreeSet<(Run<'a>, u32, Epoch)>,
    failed: BTreeSet<(Run<'a>, u32, Epoch)>,
    /// Tenures whose latest write was answered busy: one that releases now gave up on it.
    busy_last: BTreeSet<(Run<'a>, u32, Epoch)>,
    /// (run, generation, running seq) -> what the newest accepted checkpoint covers.
    covered: BTreeMap<(Run<'a>, u32, Seq), Coverage>,
    found: Vec<Violation>,
}

impl<'a> Repay<'a> {
    /// A store call: a failed write interrupts its tenure; accepted releases, deletes,
    /// checkpoints and terminals are noted.
    fn call(&mut self, run: Run<'a>, call: &Call, index: usize) {
        let gen_ = self.generation.get(&run).copied().unwrap_or_default();
        if matches!(call.outcome, CallOutcome::Error(_) | CallOutcome::Injected) {
            // A write the store failed outright (an I/O error, not a refusal) may have lost the
            // tenure's progress, as a crash would: that tenure is interrupted even if it released.
            if let Some(lease) = call.lease.as_ref().filter(|_| call.surface.is_mutation()) {
                self.failed.insert((run, gen_, lease.epoch));
            }
            return;
        }
        if let Some(lease) = call.lease.as_ref().filter(|_| call.surface.is_mutation()) {
            let tenure = (run, gen_, lease.epoch);
            match call.outcome {
                CallOutcome::Busy => self.busy_last.insert(tenure),
                _ => self.busy_last.remove(&tenure),
            };
        }
        if !call.outcome.is_ok() {
            return;
        }
        match (call.surface, &call.lease, &call.payload) {
            (Surface::Release, Some(lease), _) => {
                let tenure = (run, gen_, lease.epoch);
                if self.busy_last.remove(&tenure) {
                    self.failed.insert(tenure);
                }
                self.released.insert(tenure);
            }
            (Surface::Delete, _, _) => *self.generation.entry(run).or_default() += 1,
            (Surface::PutBlob | Surface::DeleteBlob, _, _) => {
                note_checkpoint(&mut self.covered, run, call, gen_, index);
            }
            (Surface::Append, _, Payload::Entry(entry)) => {
                if let Some(running) = entry.ref_seq {
                    self.terminals.entry((run, gen_, running)).or_insert((index, call.epoch()));
                }
            }
            _ => {}
        }
    }

    /// A paid effect, judged by (a) and (b) at once and kept for (c).
    fn effect(&mut self, run: Run<'a>, effect: &'a Effect, index: usize) {
        let gen_ = self.generation.get(&run).copied().unwrap_or_default();
        let dispatch: Dispatch = (run, gen_, effect.running, effect.kind, effect.n);
        // Labels are formatted only for a violation: nearly every effect has none.
        let name = || effect_name(effect.kind, &effect.run, effect.running, effect.n);
        let paid = || epoch_label(effect.epoch);
        if let Some(&first) = self.per_tenure.get(&(dispatch, effect.epoch)) {
            // Effects are taken in row order: the first payment of this tenure came before.
            assert!(first < index, "row {index}: a first payment recorded at row {first}");
            self.found.push(Violation::new(
                REPAY_BOUND,
                format!("{} paid twice under {} (rows {first} and {})", name(), paid(), index),
                Some(index),
                Some(first),
            ));
        } else {
            self.per_tenure.insert((dispatch, effect.epoch), index);
        }
        if let Some(&(at, finished)) = self.terminals.get(&(run, gen_, effect.running)) {
            assert!(at < index, "row {index}: a terminal recorded at row {at}");
            let stale = matches!((effect.epoch, finished), (Some(paid), Some(done)) if paid < done);
            if !stale {
                self.found.push(Violation::new(
                    REPAY_BOUND,
                    format!(
                        "{} paid under {} after its terminal was accepted under {} at row {at}",
                        name(),
                        paid(),
                        epoch_label(finished)
                    ),
                    Some(index),
                    Some(at),
                ));
            }
        }
        if let Some(c) = self.covered.get(&(run, gen_, effect.running))
            && c.covers(effect.kind, effect.n)
            && effect.epoch.is_none_or(|paid| paid >= c.epoch)
        {
            self.found.push(Violation::new(
                REPAY_BOUND,
                format!(
                    "{} paid under {} although the checkpoint accepted under e{} at row {} covers it ({} turns, {} tools)",
                    name(),
                    paid(),
                    c.epoch, c.row, c.turns, c.tools
                ),
                Some(index),
                Some(c.row),
            ));
        }
        if let Some(epoch) = effect.epoch {
            self.windows.entry((run, gen_, effect.running)).or_default().insert(epoch);
        }
        self.payments.entry(dispatch).or_default().push(index);
    }

    /// (c): each dispatch's payments per generation against 1 + its interrupted tenures.
    fn bounds(mut self) -> Vec<Violation> {
        for ((run, gen_, running, kind, n), paid) in self.payments {
            let window = self.windows.get(&(run, gen_, running));
            let interrupted: Vec<String> = window
                .into_iter()
                .flatten()
                .filter(|e| !self.released.contains(&(run, gen_, **e)) || self.failed.contains(&(run, gen_, **e)))
                .map(|e| format!("e{e}"))
                .collect();
            let bound = 1 + interrupted.len();
            if paid.len() > bound {
                let which =
                    if interrupted.is_empty() { String::new() } else { format!(": {}", interrupted.join(", ")) };
                self.found.push(Violation::new(
                    REPAY_BOUND,
                    format!(
                        "{} paid {} times, bound {bound} (1 + {} interrupted tenures in its window{which})",
                        effect_name(kind, &run, running, n),
                        paid.len(),
                        interrupted.len()
                    ),
                    paid.get(bound).copied(),
                    paid.first().copied(),
                ));
            }
        }
        self.found
    }
}

/// Keep `covered` current for an accepted put or delete of a checkpoint ref: a put that decodes
/// covers what it records; an undecodable one (refused whole: the dispatch reruns) or a delete
/// covers nothing.
fn note_checkpoint<'a>(
    covered: &mut BTreeMap<(Run<'a>, u32, Seq), Coverage>,
    run: Run<'a>,
    call: &Call,
    gen_: u32,
    row: usize,
) {
    let Some(running) = call.blob_ref.as_deref().and_then(checkpoint_running) else { return };
    let key = (run, gen_, running);
    let coverage = match (&call.payload, call.epoch()) {
        (Payload::Blob(bytes), Some(epoch)) if call.surface == Surface::PutBlob => {
            decode_checkpoint(bytes).map(|(turns, tools)| Coverage { row, epoch, turns, tools })
        }
        _ => None,
    };
    match coverage {
        Some(c) => {
            covered.insert(key, c);
        }
        None => {
            covered.remove(&key);
        }
    }
}

/// What an accepted checkpoint of a dispatch says is done: turns taken and tools run.
struct Coverage {
    row: usize,
    epoch: Epoch,
    turns: u64,
    tools: u64,
}

impl Coverage {
    fn covers(&self, kind: EffectKind, n: u32) -> bool {
        let done = match kind {
            EffectKind::Call => self.turns,
            EffectKind::Tool => self.tools,
        };
        u64::from(n) <= done
    }
}

/// The running seq of a checkpoint ref, `<run>/ckpt/<running seq>` (contracts 1.4).
fn checkpoint_running(blob_ref: &str) -> Option<Seq> {
    let mut parts = blob_ref.rsplitn(3, '/');
    let seq = parts.next()?.parse().ok()?;
    (parts.next()? == "ckpt").then_some(Seq(seq))
}

/// A checkpoint blob's counters (contracts 3.5): the format byte `0x01`, then a JSON object with
/// `turns` and `tool_calls_used` (other keys are skipped unread; a counter twice is undecodable).
/// Anything else is undecodable, which the engine refuses whole.
fn decode_checkpoint(bytes: &[u8]) -> Option<(u64, u64)> {
    #[derive(serde::Deserialize)]
    struct Counters {
        turns: u64,
        tool_calls_used: u64,
    }
    let (&format, json) = bytes.split_first()?;
    if format != 0x01 {
        return None;
    }
    let counters: Counters = serde_json::from_slice(json).ok()?;
    Some((counters.turns, counters.tool_calls_used))
}

/// Whether the run is settled or waits: nothing stored, or meta present and either terminal and
/// backed by a final `run_settle` of its status (an empty journal needs none, contracts 3.6.4),
/// or suspended over an open suspension. The error says why not.
pub(super) fn run_liveness(run: &RunId, state: &RunState) -> Result<(), String> {
    let journal = &state.journal;
    let Some(meta) = &state.meta else {
        return match journal.len() {
            0 => Ok(()),
            n => Err(format!("{run} has {n} journal entries but no meta")),
        };
    };
    match meta.status {
        RunStatus::Running => Err(format!("{run} still running after quiescence")),
        RunStatus::Suspended if open_suspensions(journal).is_empty() => {
            Err(format!("{run} is suspended but its journal has no open suspension"))
        }
        RunStatus::Suspended => Ok(()),
        _ if journal.is_empty() => Ok(()),
        status => match last_settle(journal) {
            None => Err(format!("{run} is {status} but its journal of {} entries has no run_settle", journal.len())),
            Some((_, settled)) if settled != status => {
                Err(format!("{run} is {status} but its journal's last run_settle says {settled}"))
            }
            Some((at, _)) if at + 1 < journal.len() => Err(format!(
                "{run} is {status} but {} entries follow its last run_settle (seq={})",
                journal.len() - at - 1,
                journal[at].seq
            )),
            Some(_) => Ok(()),
        },
    }
}

/// Every planned run had an accepted mutation somewhere in the history (else the violation
/// points at the last call that targeted it, if any), and every run with a journal or meta is
/// settled or waiting in the final snapshot (pointing at its last accepted mutation).
pub(super) fn liveness(ctx: &Context) -> Vec<Violation> {
    let mut last_write: BTreeMap<Run, usize> = BTreeMap::new();
    let mut last_call: BTreeMap<Run, usize> = BTreeMap::new();
    for row in ctx.rows {
        let (Some(call), Some(run)) = (row.call(), ctx.runs.at(row.index)) else { continue };
        last_call.insert(run, row.index);
        if call.is_accepted_mutation() {
            last_write.insert(run, row.index);
        }
    }
    let last = |map: &BTreeMap<Run, usize>, run: &RunId| ctx.runs.named(run).and_then(|r| map.get(&r)).copied();
    let unstarted = ctx.cfg.planned.iter().filter(|run| last(&last_write, run).is_none()).map(|run| {
        let why = format!("{run} was planned but never reached the store");
        Violation::new(LIVENESS, why, last(&last_call, run), None)
    });
    let unsettled = ctx.snapshot.runs.iter().filter_map(|(run, state)| {
        let why = run_liveness(run, state).err()?;
        Some(Violation::new(LIVENESS, why, last(&last_write, run), None))
    });
    unstarted.chain(unsettled).collect()
}

/// A view of a run's journal (this generation's accepted appends): how many entries, the last
/// `run_settle` (row, status), and the statuses of the cut `run_settle` appends after it that may
/// have landed (a bit per [`RunStatus::ALL`] index).
#[derive(Clone, Copy, Default)]
struct Journal {
    entries: usize,
    last_settle: Option<(usize, RunStatus)>,
    maybe_settles: u8,
}

/// `status`'s bit in [`Journal::maybe_settles`].
fn status_bit(status: RunStatus) -> u8 {
    let index = RunStatus::ALL.iter().position(|s| *s == status);
    // Every status has its place in ALL, and ALL fits the bits of a u8.
    assert!(index.is_some_and(|i| i < 8), "{status} has no bit");
    1 << index.unwrap_or_default()
}

impl Journal {
    /// Whether this journal records `status` as its last settle, under some fate of its cut
    /// settles: what backs the outcome of a segment that read it and appended nothing (over an
    /// empty journal, its meta write must). A successor that replayed a cut settle that landed
    /// adopts it (contracts 3.6) and reports its status.
    fn backs(&self, status: RunStatus) -> bool {
        self.last_settle.is_some_and(|(_, s)| s == status) || self.maybe_settles & status_bit(status) != 0
    }
}

/// A node's last `run_settle` append (or terminal meta write) for a run since its previous
/// outcome for it.
struct Attempt {
    row: usize,
    outcome: CallOutcome,
    status: RunStatus,
}

/// What honest-outcome remembers of one node's calls on one run since the node's previous
/// outcome for the run.
#[derive(Default)]
struct Since {
    /// The last `run_settle` append.
    settle: Option<Attempt>,
    /// The last non-running meta write: what backs an outcome over an empty journal.
    meta: Option<Attempt>,
    /// An accepted append of this generation.
    wrote: bool,
    /// The journal as of each load.
    seen: Vec<Journal>,
}

/// A settled outcome node N reports for run R is backed by N's last `run_settle` append for R
/// since its previous outcome for R: accepted, with that status. With no such attempt (a pure
/// replay), the journal N read must already have said so: at one of N's loads of R since its
/// previous outcome, or now, its last `run_settle` had that status; or, when N appended nothing
/// to a journal it found empty, N's own terminal meta write of that status was accepted.
/// Attempts and loads are keyed by (node, run): see the module doc.
pub(super) fn honest_outcome(ctx: &Context) -> Vec<Violation> {
    let mut seen = Backing { journals: BTreeMap::new(), since: BTreeMap::new(), maybe_landed: &ctx.maybe_landed };
    let mut found = Vec::new();
    for row in ctx.rows {
        let Some(run_key) = ctx.runs.at(row.index) else { continue };
        match &row.event {
            Event::Call(call) => seen.call(run_key, row, call),
            // A segment refused before it touched the store (a second live segment of the run,
            // a run that already exists, a binding refusal) made no calls: its outcome must not
            // take the attempts of the segment that did.
            Event::Outcome { result: SegmentResult::Failed(SegmentError::SegmentLive), .. } => {}
            Event::Outcome { run, result } => {
                let mine = seen.since.remove(&(run_key, row.node.as_str())).unwrap_or_default();
                let SegmentResult::Reported(reported) = *result else { continue };
                if reported == RunStatus::Running {
                    continue;
                }
                let now = seen.journals.get(&run_key).copied().unwrap_or_default();
                if let Some((why, cause)) = unbacked(&row.node, run, reported, mine, now) {
                    found.push(Violation::new(HONEST_OUTCOME, why, Some(row.index), cause));
                }
            }
            _ => {}
        }
    }
    found
}

/// What can back an outcome, walked in row order: each run's journal, and what each node did to
/// each run since its previous outcome for it.
struct Backing<'a> {
    /// Each run's journal as accepted so far in its generation.
    journals: BTreeMap<Run<'a>, Journal>,
    /// Per (run, node), what the node did since its previous outcome for the run. Keyed by run
    /// first: a run's number tells most keys apart without comparing node names.
    since: BTreeMap<(Run<'a>, &'a str), Since>,
    /// The cut appends that may have landed, by row index.
    maybe_landed: &'a BTreeSet<usize>,
}

impl<'a> Backing<'a> {
    /// Record one call of `row`'s node on `run_key`: a delete, a terminal meta write, a load or
    /// an append.
    fn call(&mut self, run_key: Run<'a>, row: &'a Row, call: &Call) {
        let key = (run_key, row.node.as_str());
        match (call.surface, &call.payload) {
            (Surface::Delete, _) if call.outcome.is_ok() => {
                // A new generation: what any node appended to the old one is gone with it.
                self.journals.remove(&run_key);
                self.since.iter_mut().filter(|((run, _), _)| *run == run_key).for_each(|(_, s)| s.wrote = false);
            }
            (Surface::PutMeta, Payload::Meta(meta)) if meta.status != RunStatus::Running => {
                let attempt = Attempt { row: row.index, outcome: call.outcome.clone(), status: meta.status };
                self.since.entry(key).or_default().meta = Some(attempt);
            }
            (Surface::Load, _) if call.outcome.is_ok() => {
                let view = self.journals.get(&run_key).copied().unwrap_or_default();
                self.since.entry(key).or_default().seen.push(view);
            }
            (Surface::Append, Payload::Entry(entry)) => {
                let status = settle_status(entry);
                let mine = self.since.entry(key).or_default();
                if let Some(status) = status {
                    mine.settle = Some(Attempt { row: row.index, outcome: call.outcome.clone(), status });
                }
                if call.outcome.is_ok() {
                    mine.wrote = true;
                    let journal = self.journals.entry(run_key).or_default();
                    journal.entries += 1;
                    if let Some(status) = status {
                        journal.last_settle = Some((row.index, status));
                        journal.maybe_settles = 0;
                    }
                } else if let Some(status) = status.filter(|_| self.maybe_landed.contains(&row.index)) {
                    self.journals.entry(run_key).or_default().maybe_settles |= status_bit(status);
                }
            }
            _ => {}
        }
    }
}

/// Why `node`'s report of `run` as `reported` is not backed (and the row that shows it), given
/// what it did since its previous outcome for the run and the journal `now`; `None` if backed.
fn unbacked(
    node: &str,
    run: &RunId,
    reported: RunStatus,
    mine: Since,
    now: Journal,
) -> Option<(String, Option<usize>)> {
    match mine.settle {
        Some(a) if !a.outcome.is_ok() => {
            return Some((
                format!(
                    "{node} reported {run} {reported}, but its run_settle append at row {} was rejected ({})",
                    a.row, a.outcome
                ),
                Some(a.row),
            ));
        }
        Some(a) if a.status != reported => {
            return Some((
                format!(
                    "{node} reported {run} {reported}, but its accepted run_settle at row {} says {}",
                    a.row, a.status
                ),
                Some(a.row),
            ));
        }
        Some(_) => return None,
        None => {}
    }
    if now.backs(reported) || mine.seen.iter().any(|view| view.backs(reported)) {
        return None;
    }
    let empty = !mine.wrote && (now.entries == 0 || mine.seen.iter().any(|view| view.entries == 0));
    if empty {
        // Over an empty journal no settle is due (contracts 3.6.4): only the segment's own
        // terminal meta write can make the outcome durable.
        return match mine.meta {
            Some(m) if m.outcome.is_ok() && m.status == reported => None,
            Some(m) => Some((
                format!(
                    "{node} reported {run} {reported} over an empty journal, but its meta write at row {} ({}) was {}",
                    m.row, m.status, m.outcome
                ),
                Some(m.row),
            )),
            None => Some((format!("{node} reported {run} {reported} over an empty journal and wrote no meta"), None)),
        };
    }
    // The journal the node read last (or, if it read none, the current one).
    let read = mine.seen.last().copied().unwrap_or(now);
    Some(match read.last_settle {
        None => (
            format!(
                "{node} reported {run} {reported} without a run_settle, over a journal of {} entries with none",
                read.entries
            ),
            None,
        ),
        Some((at, status)) => (
            format!(
                "{node} reported {run} {reported} without a run_settle, but the journal's last run_settle (row {at}) says {status}"
            ),
            Some(at),
        ),
    })
}
