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

mod candidacy;
pub mod checker;
mod conduct;
pub mod contiguous;
mod deletes;
mod duties;
mod failures;
pub mod history;
mod journal;
mod leases;
mod model;
mod monotonic;
mod outcomes;
mod reads;
mod requests;
mod script;
mod serial;
#[cfg(test)]
mod tests;

pub use checker::Checker;
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

/// The checkers of [`Scope::Store`]: leases, rejections, the serial history, seq order and
/// contiguity.
pub const STORE_CHECKERS: &[Checker] = &[
    leases::NO_STALE_ACCEPTANCE,
    leases::EPOCHS_INCREASING,
    leases::ONE_LIVE_LEASE,
    serial::SERIAL_HISTORY,
    journal::JOURNAL_SEQ_ORDER,
    contiguous::SEQ_CONTIGUOUS,
    leases::TYPED_REJECTIONS,
    reads::LINEARIZABLE_READS,
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
    pub checker: Checker,
    /// One line: what went wrong, naming run, epochs, seqs, digests.
    pub explanation: String,
    /// The first divergent row of the history (`Row::index`).
    pub row: Option<usize>,
    /// The row of the mutation that caused it, when known.
    pub cause: Option<usize>,
}

impl Violation {
    fn new(checker: Checker, explanation: String, row: Option<usize>, cause: Option<usize>) -> Self {
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

/// Every checker of the oracle, in the order [`check`] runs them.
pub const CHECKERS: [Checker; Checker::ORACLE.len()] = Checker::ORACLE;

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
        requests::cancel_asked,
        failures::failed_write_ends,
        deletes::delete_finished,
        candidacy::worker_candidacy,
        contiguous::seq_contiguous,
        leases::typed_rejections,
        reads::linearizable_reads,
    ];
    checkers
        .into_iter()
        .zip(CHECKERS)
        .filter(|(_, checker)| cfg.scope == Scope::Engine || STORE_CHECKERS.contains(checker))
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
