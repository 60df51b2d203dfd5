//! The oracle: decides, from a history and its final store snapshot alone, whether the
//! store and the engines kept the fencing contracts (contracts 2.7, 3.4-3.6, 4.1, 5.9). Each
//! checker is named after the invariant it asserts ([`CHECKERS`]); none of them asks the engine
//! what is right: the lease rule, the journal vocabulary and the settle protocol are restated here
//! from the contracts, so an engine bug cannot hide behind its own reading of the journal.
//!
//! One list, [`DESCRIPTORS`]: each checker's file exports its [`Descriptor`] (its `Checker`, its
//! `Scope`, its invariant's one line, its function), and every other list is derived from it
//! ([`CHECKERS`], `Checker::ORACLE`, [`store_checkers`], the scope filter of [`check`],
//! `Checker::invariant`) or held to it by a test (the report schema's enum in
//! `sim/cli/tests/it/report_schema.rs`, ARCHITECTURE.md's obligations table in
//! `sim/tests/it/doc_counts.rs`, and docs/scenarios.md's checker table, which pins the order,
//! in the same file). Adding a checker is its function and descriptor, its line in
//! `DESCRIPTORS`, its name's line in `checkers!` (`checker.rs`), its test and its prose.
//! Checkers read rows and snapshot only; at most [`MAX_PER_CHECKER`] violations each are
//! reported, each with its first divergent row and causing mutation.
//!
//! Files: `model` (the replayed lease table, the journal vocabulary, labels), `leases` (no stale
//! acceptance, epochs, one live lease, typed rejections), `serial` (the serial history against the
//! snapshot), `journal` (seq order, one settle per tenure, meta not ahead, checkpoints),
//! `outcomes` (re-pay bound with checkpoint coverage, liveness, honest outcomes), `conduct` (what
//! the engine's actors must never do although the store contains it: dispatch identity, silent
//! replay, renew loss, justified repairs; ARCHITECTURE.md's "Obligations"), `script`
//! (`reference-model`: each run's journal and payments against its workflow's [`Script`], which
//! the simulator passes as data from the engine's workflows, `sim/src/scripts.rs`, so the oracle
//! runs no engine code), `duties` (`healthy-holder`: an undisturbed holder never lets its lease
//! lapse), `monotonic` (`observables-monotonic`: segments, identity and a settled outcome never go
//! back within a generation, judged at every accepted write), `requests` (`cancel-asked`: a run
//! settles cancelled only when its client, a failed renew or a worker's stop asked for it),
//! `failures` (`failed-write-ends`: a storage error ends the tenure it hits), `deletes`
//! (`delete-finished`: only a finished workload run is deleted under a lease), `candidacy`
//! (`worker-candidacy`: a sweep never resumes a settled run), `contiguous` (`seq-contiguous`: a
//! stored journal has no hole but one a failed append explains; the kill points reuse its
//! `first_gap`), `reads` (`linearizable-reads`: every load and meta read a world recorded saw the
//! writes before it whole, a call cut by a crash taken as done or not). `tests/` fails each
//! checker, a file per checker file (`tests/leases.rs` fails the checkers of `leases`).
//!
//! The views several checkers share (the lease replay, effective epochs, the writers index) are
//! computed once per [`check`], in a `Context`. Among them are the runs the rows name, numbered in
//! name order (`model::Runs`): the checkers that walk every row key their maps by that number, a
//! word compare where a name was a string compare, and iterate (and report) in the order names
//! would give. Stored entries and metas are matched to their writers field by field (`same_entry`,
//! `same_meta`, which agree with the encodings' digests, a signed zero included), not by encoding
//! both.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use fencesim_store::{Epoch, RunFilter, RunId, RunMeta, RunStatus, Store, StoreResult};

use crate::history::{Row, RunState, Snapshot};
use model::{LeaseReplay, Runs, Writers, cut_appends_maybe_landed, effective_epochs};

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
    /// The store's fencing promises only ([`store_checkers`]): a history of raw store calls (the
    /// store-level soak), whose runs follow no journal vocabulary and never settle.
    Store,
}

/// One checker of the oracle: its name, which histories it judges, the invariant it asserts and
/// the function that asserts it. Each checker's file exports one; [`DESCRIPTORS`] lists them, and
/// every other list of checkers ([`CHECKERS`], [`store_checkers`], the report schema's enum, the
/// docs' tables) is derived from it or held to it by a test.
pub struct Descriptor {
    pub checker: Checker,
    /// [`Scope::Store`]: a promise of the store alone, judged on every history (a store soak's
    /// too); [`Scope::Engine`]: judged only on histories of engines driving runs.
    pub scope: Scope,
    /// What it asserts, in one line, citing the contracts.
    pub invariant: &'static str,
    check: fn(&Context) -> Vec<Violation>,
}

/// Every checker of the oracle, in the order [`check`] runs and reports them: the one list.
pub const DESCRIPTORS: &[Descriptor] = &[
    leases::NO_STALE_ACCEPTANCE_CHECK,
    leases::EPOCHS_INCREASING_CHECK,
    leases::ONE_LIVE_LEASE_CHECK,
    serial::SERIAL_HISTORY_CHECK,
    journal::JOURNAL_SEQ_ORDER_CHECK,
    journal::ONE_SETTLE_PER_SEGMENT_CHECK,
    journal::META_NOT_AHEAD_CHECK,
    journal::NO_CHECKPOINT_REGRESSION_CHECK,
    outcomes::REPAY_BOUND_CHECK,
    outcomes::LIVENESS_CHECK,
    outcomes::HONEST_OUTCOME_CHECK,
    conduct::DISPATCH_IDENTITY_CHECK,
    conduct::SILENT_REPLAY_CHECK,
    conduct::RENEW_LOSS_CHECK,
    conduct::JUSTIFIED_REPAIR_CHECK,
    duties::HEALTHY_HOLDER_CHECK,
    script::REFERENCE_MODEL_CHECK,
    monotonic::OBSERVABLES_MONOTONIC_CHECK,
    requests::CANCEL_ASKED_CHECK,
    failures::FAILED_WRITE_ENDS_CHECK,
    deletes::DELETE_FINISHED_CHECK,
    candidacy::WORKER_CANDIDACY_CHECK,
    contiguous::SEQ_CONTIGUOUS_CHECK,
    leases::TYPED_REJECTIONS_CHECK,
    reads::LINEARIZABLE_READS_CHECK,
];

/// The checkers of [`Scope::Store`]: the store's fencing promises (leases, rejections, the serial
/// history, seq order and contiguity, linearizable reads), in [`CHECKERS`] order.
pub fn store_checkers() -> impl Iterator<Item = Checker> {
    DESCRIPTORS.iter().filter(|d| d.scope == Scope::Store).map(|d| d.checker)
}

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
    /// The cut appends that may have landed, by row index (`cut_appends_maybe_landed`).
    maybe_landed: BTreeSet<usize>,
}

impl<'a> Context<'a> {
    fn new(rows: &'a [Row], snapshot: &'a Snapshot, cfg: &'a OracleConfig) -> Self {
        let runs = Runs::new(rows);
        let epochs = effective_epochs(rows, &runs);
        // The checkers index the per-row views by a row's position.
        assert_eq!(epochs.len(), rows.len(), "the effective epochs have a slot per row");
        Self {
            rows,
            snapshot,
            cfg,
            writers: Writers::new(rows),
            epochs,
            leases: LeaseReplay::new(rows, &runs, cfg.ttl_ms),
            runs,
            maybe_landed: cut_appends_maybe_landed(rows, snapshot),
        }
    }
}

/// One broken invariant: what the oracle's checkers find in a history, and what every other judge
/// reports (the kill points, the soaks' own checks), so one type flows to every report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    pub fn new(checker: Checker, explanation: String, row: Option<usize>, cause: Option<usize>) -> Self {
        Self { checker, explanation, row, cause }
    }

    /// A judge's finding that names no history row (a kill point's, a soak's check over its
    /// processes and files): `<checker>: <why>` when printed.
    pub fn of(checker: Checker, why: impl fmt::Display) -> Self {
        Self::new(checker, why.to_string(), None, None)
    }
}

/// Violations as their printed lines (`#[serde(serialize_with = ...)]`): the kill points' and the
/// engine soak's reports carry them so.
///
/// # Errors
///
/// The serializer's.
pub fn serialize_lines<S: Serializer>(violations: &[Violation], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(violations.iter().map(ToString::to_string))
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

/// Every checker of the oracle, in the order [`check`] runs them: [`DESCRIPTORS`]' checkers.
pub const CHECKERS: [Checker; DESCRIPTORS.len()] = {
    let mut out = [Checker::NoStaleAcceptance; DESCRIPTORS.len()];
    let mut i = 0;
    while i < DESCRIPTORS.len() {
        out[i] = DESCRIPTORS[i].checker;
        i += 1;
    }
    out
};

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
    DESCRIPTORS
        .iter()
        .filter(|d| cfg.scope == Scope::Engine || d.scope == Scope::Store)
        .flat_map(|d| {
            let mut found = (d.check)(&ctx);
            assert!(found.iter().all(|v| v.checker == d.checker), "{} reported another checker", d.checker);
            // Reports, traces and timelines look a violation's rows up by index in this history.
            assert!(
                found.iter().all(|v| v.row.is_none_or(|r| r < rows.len())),
                "{} named a row past the history's {} rows",
                d.checker,
                rows.len()
            );
            assert!(
                found.iter().all(|v| v.cause.is_none_or(|c| c < rows.len())),
                "{} named a cause past the history's {} rows",
                d.checker,
                rows.len()
            );
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
