//! The oracle: decides, from a history and its final store snapshot alone, whether the
//! store and the engines kept the fencing contracts (contracts 2.7, 3.4-3.6, 4.1, 5.9). Each
//! checker is named after the invariant it asserts ([`CHECKERS`]); none of them asks the engine
//! what is right: the lease rule, the journal vocabulary and the settle protocol are restated here
//! from the contracts, so an engine bug cannot hide behind its own reading of the journal.
//!
//! Files: `model` (the replayed lease table, the journal vocabulary, labels), `leases` (lease and
//! rejection checkers), `serial` (the serial history against the snapshot), `journal` (seq order,
//! settles, meta, checkpoints), `outcomes` (re-pay bound, liveness, honest outcomes), `conduct`
//! (what the engine's actors must never do although the store contains it: dispatch identity,
//! silent replay, renew loss, justified repairs). The views
//! several checkers share (the lease replay, effective epochs, the writers index) are computed once
//! per [`check`], in a `Context`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use fencesim_store::{Epoch, RunFilter, RunId, RunMeta, RunStatus, Store, StoreResult};

use crate::history::{Row, RunState, Snapshot};
use model::{LeaseReplay, Runs, Writers, effective_epochs};

mod conduct;
mod duties;
pub mod history;
mod journal;
mod leases;
mod model;
mod monotonic;
mod outcomes;
mod script;
mod serial;
#[cfg(test)]
mod tests;

pub use leases::ADMIN_NODE;
pub use script::{Script, ScriptStep};

/// What the oracle needs to know about the world beyond its history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OracleConfig {
    /// The store's lease ttl: an acquire or renew at clock `c` makes the lease live until `c + ttl`.
    pub ttl_ms: i64,
    /// The runs the world's client planned to start (may be empty): liveness requires each to
    /// have reached the store (an accepted mutation of it somewhere in the history).
    pub planned: Vec<RunId>,
    /// Which promises the history is judged against.
    pub scope: Scope,
    /// The workflows runs may be bound to, for `reference-model` (a run bound to none is not
    /// judged by it).
    pub scripts: Vec<Script>,
}

/// Which checkers apply to a history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every checker: a history of engines driving runs (a simulated world, an engine soak).
    Engine,
    /// The store's fencing promises only ([`STORE_CHECKERS`]): a history of raw store calls (the
    /// store-level soak), whose runs follow no journal vocabulary and never settle.
    Store,
}

/// The checkers of [`Scope::Store`]: leases, rejections, the serial history and seq order.
pub const STORE_CHECKERS: &[&str] = &[
    leases::NO_STALE_ACCEPTANCE,
    leases::EPOCHS_INCREASING,
    leases::ONE_LIVE_LEASE,
    serial::SERIAL_HISTORY,
    journal::JOURNAL_SEQ_ORDER,
    leases::TYPED_REJECTIONS,
];

/// What every checker reads: the world's history, its final snapshot and config, and the views of
/// the history several checkers share, each computed once.
struct Context<'a> {
    /// The history, in serialization order.
    rows: &'a [Row],
    snapshot: &'a Snapshot,
    cfg: &'a OracleConfig,
    /// Accepted mutations by what they wrote.
    writers: Writers<'a>,
    /// The epoch each row's call is ordered under, by position in `rows`.
    epochs: Vec<Epoch>,
    /// The lease table replayed along `rows` with the config's ttl.
    leases: LeaseReplay<'a>,
    /// The runs the rows name, numbered, and each row's run.
    runs: Runs<'a>,
}

impl<'a> Context<'a> {
    fn new(rows: &'a [Row], snapshot: &'a Snapshot, cfg: &'a OracleConfig) -> Self {
        let runs = Runs::new(rows);
        Self {
            rows,
            snapshot,
            cfg,
            writers: Writers::new(rows),
            epochs: effective_epochs(rows, &runs),
            leases: LeaseReplay::new(rows, &runs, cfg.ttl_ms),
            runs,
        }
    }
}

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The invariant's name, one of [`CHECKERS`].
    pub checker: &'static str,
    /// One line: what went wrong, naming run, epochs, seqs, digests.
    pub explanation: String,
    /// The first divergent row of the history (`Row::index`).
    pub row: Option<usize>,
    /// The row of the mutation that caused it, when known.
    pub cause: Option<usize>,
}

impl Violation {
    fn new(checker: &'static str, explanation: String, row: Option<usize>, cause: Option<usize>) -> Self {
        Self { checker, explanation, row, cause }
    }
}

/// `serial-history: <explanation> (row 12, cause 7)`.
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.checker, self.explanation)?;
        match (self.row, self.cause) {
            (Some(row), Some(cause)) => write!(f, " (row {row}, cause {cause})"),
            (Some(row), None) => write!(f, " (row {row})"),
            (None, Some(cause)) => write!(f, " (cause {cause})"),
            (None, None) => Ok(()),
        }
    }
}

/// Every checker, in the order [`check`] runs them: (name, the invariant in one line).
pub const CHECKERS: &[(&str, &str)] = &[
    (
        leases::NO_STALE_ACCEPTANCE,
        "every accepted mutation, renew and release carried the live holder's lease of its target run (2.7.1)",
    ),
    (
        leases::EPOCHS_INCREASING,
        "per run, granted epochs are unique and strictly increasing across delete/recreate, one node per (run, epoch) (2.7.2)",
    ),
    (leases::ONE_LIVE_LEASE, "no acquire is granted while another lease row of the run is live (2.7.3)"),
    (
        serial::SERIAL_HISTORY,
        "journal, meta and blobs equal the accepted mutations replayed in (epoch, row) order; epochs never decrease along the journal (2.7.5-6, 5.9)",
    ),
    (
        journal::JOURNAL_SEQ_ORDER,
        "stored seqs strictly increase and every accepted append was above the journal's tail (2.7.4)",
    ),
    (journal::ONE_SETTLE_PER_SEGMENT, "a tenure appends at most one run_settle and nothing after it (3.6, D14)"),
    (
        journal::META_NOT_AHEAD,
        "a terminal meta is only ever written and kept over an empty journal or one whose last run_settle has its status (3.6, D1)",
    ),
    (
        journal::NO_CHECKPOINT_REGRESSION,
        "a checkpoint ref is never overwritten by an older tenure, and holds its last accepted put (3.5, D2)",
    ),
    (
        outcomes::REPAY_BOUND,
        "a dispatch's turn or tool is paid once per tenure, never after its terminal, never again once an accepted checkpoint covers it, and at most 1 + (unreleased tenures that paid into that dispatch) times (3.5, E11, 5.13)",
    ),
    (
        outcomes::LIVENESS,
        "every planned run reached the store, and after quiescence every run is settled (terminal meta backed by a final run_settle) or waits on an open suspension",
    ),
    (
        outcomes::HONEST_OUTCOME,
        "a settled outcome a node reports is backed by its own accepted run_settle, by the journal it read, or over an empty journal by its own accepted meta write (3.6, D12b)",
    ),
    (
        conduct::DISPATCH_IDENTITY,
        "a dispatch is its running entry: at most one dispatch of a run is open at a time, so a re-dispatch reuses its dangling entry, and a terminal closes an open running entry of its own step (E10)",
    ),
    (
        conduct::SILENT_REPLAY,
        "a journal that records a terminal run_settle is final: a tenure that finds its run settled appends nothing, and no run_settle repeats the last with nothing new (E12)",
    ),
    (
        conduct::RENEW_LOSS,
        "after a failed renew of its own lease a holder pays no call turn and runs no tool under that epoch (E13, 9.2)",
    ),
    (
        conduct::JUSTIFIED_REPAIR,
        "the operator repairs only runs that a crash, stall, takeover, failed segment, unreleased tenure or offline resolution touched (E14)",
    ),
    (
        duties::HEALTHY_HOLDER,
        "a holder nothing disturbed (no fault on its node or run, no busy or failing store call of its own) never lets its lease lapse: a fenced call of its tenure is never refused for its own expired row (E2, E8)",
    ),
    (
        script::REFERENCE_MODEL,
        "each run's journal walks its workflow's script in order (a step opens only after the steps before it finished, ok terminals carry the scripted answer, ok settles only a finished script) and no dispatch pays past what its step can reach (1.3, 3.4-3.6)",
    ),
    (
        monotonic::OBSERVABLES_MONOTONIC,
        "within a generation, segments never decrease, genesis and workflow binding never change, and a journal's final run_settle is never overturned: no other settle status, no other terminal meta, no non-terminal meta but a new segment's boot (1.2, 3.1, 3.6, 4.3)",
    ),
    (
        leases::TYPED_REJECTIONS,
        "a rejected acquire is held-by; a fenced call is never rejected for the live holder's lease, and otherwise run-mismatch for another run's lease, else stale; the fence is checked before the seq guard (2.7.7)",
    ),
];

/// At most this many violations per checker are reported, so a report stays readable.
pub const MAX_PER_CHECKER: usize = 3;

/// Run every checker over a world's history (`rows`, in serialization order) and its final
/// store snapshot. Violations come in [`CHECKERS`] order, then row order (violations without a
/// row last), at most [`MAX_PER_CHECKER`] per checker.
///
/// # Panics
///
/// On a history the harness built wrong (never on anything a store or an engine did): a row
/// whose index is not its position, or whose time precedes the row before it. Every checker
/// reports rows by index and reads order from position; a mismatch would point at the wrong row.
pub fn check(rows: &[Row], snapshot: &Snapshot, cfg: &OracleConfig) -> Vec<Violation> {
    for (pos, row) in rows.iter().enumerate() {
        assert_eq!(row.index, pos, "history row {pos} is numbered {}", row.index);
        assert!(pos == 0 || rows[pos - 1].at_ms <= row.at_ms, "history time went backwards at row {pos}");
    }
    let ctx = Context::new(rows, snapshot, cfg);
    let checkers: [fn(&Context) -> Vec<Violation>; CHECKERS.len()] = [
        leases::no_stale_acceptance,
        leases::epochs_increasing,
        leases::one_live_lease,
        serial::serial_history,
        journal::journal_seq_order,
        journal::one_settle_per_segment,
        journal::meta_not_ahead,
        journal::no_checkpoint_regression,
        outcomes::repay_bound,
        outcomes::liveness,
        outcomes::honest_outcome,
        conduct::dispatch_identity,
        conduct::silent_replay,
        conduct::renew_loss,
        conduct::justified_repair,
        duties::healthy_holder,
        script::reference_model,
        monotonic::observables_monotonic,
        leases::typed_rejections,
    ];
    checkers
        .into_iter()
        .zip(CHECKERS)
        .filter(|(_, (name, _))| cfg.scope == Scope::Engine || STORE_CHECKERS.contains(name))
        .flat_map(|(checker, _)| {
            let mut found = checker(&ctx);
            found.sort_by_key(|v| v.row.unwrap_or(usize::MAX));
            found.truncate(MAX_PER_CHECKER);
            found
        })
        .collect()
}

/// Whether every run in the snapshot is settled or waits on a suspension: the liveness checker's
/// predicate over the snapshot, which lets a world stop early once it holds. It cannot see a
/// planned run that never reached the store (that takes the history: [`check`] flags it).
pub fn settled_or_waiting(snapshot: &Snapshot) -> bool {
    snapshot.runs.iter().all(|(run, state)| outcomes::run_liveness(run, state).is_ok())
}

/// [`settled_or_waiting`] over the snapshot [`Snapshot::read`] would take of `store` and `extra`,
/// reading no more of it than the answer takes: the listed metas first (a `running` one decides
/// it), then one journal at a time, never a blob (liveness does not look at blobs). A world asks
/// it every half virtual second once its faults are over, so it must cost less than a snapshot.
pub fn store_settled_or_waiting(store: &dyn Store, extra: impl IntoIterator<Item = RunId>) -> StoreResult<bool> {
    let listed = store.list_runs(&RunFilter::all())?;
    if listed.iter().any(|meta| meta.status == RunStatus::Running) {
        return Ok(false);
    }
    let mut runs: BTreeMap<RunId, Option<RunMeta>> =
        listed.into_iter().map(|meta| (meta.run_id.clone(), Some(meta))).collect();
    for run in extra {
        // A run the store does not list has no meta.
        runs.entry(run).or_insert(None);
    }
    for (run, meta) in runs {
        let state = RunState { journal: store.load(&run)?, meta, blobs: BTreeMap::new() };
        if outcomes::run_liveness(&run, &state).is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}
