//! The public conformance kit: every numbered store contract (J, L, W, T, B of contracts section
//! 2) as a check any adapter can run. A check is a plain function over a [`Target`], a factory
//! of fresh store locations; cross-instance checks open two connections over one location and
//! drive lease expiry through the fixture's [`ManualClock`], never through sleeping.
//!
//! Run them all with [`run_all`]; every report names the contract it checks:
//!
//! ```
//! use fencesim_store::conformance::{MemoryTarget, Outcome, run_all};
//!
//! let reports = run_all(&MemoryTarget);
//! // MemoryStore keeps the journal and transcript contracts and has no leases to check.
//! assert!(reports.iter().all(|r| !r.failed()));
//! assert!(reports.iter().any(|r| r.id == "J5" && r.outcome == Outcome::Pass));
//! assert!(reports.iter().any(|r| r.id == "L1" && matches!(r.outcome, Outcome::Skip(_))));
//! ```
//! A check that no
//! planted defect can make fail is not yet a check: `sim/cli/tests/it/conformance_cli.rs` plants each
//! store defect and requires a named failure.

mod boot;
mod fenced_writes;
mod journal;
mod leasable;
mod targets;
mod transcripts;

use std::fmt;
use std::process::Command;

use crate::clock::ManualClock;
use crate::error::{StoreError, StoreResult};
use crate::spi::{LeasableStore, Store};

pub use targets::{MemoryTarget, SqliteTarget};

/// A store implementation under test: a factory of fresh, empty locations.
pub trait Target {
    /// A short name for reports (`sqlite-file`, `memory`, ...).
    fn name(&self) -> &str;

    /// A fresh, empty location whose stores use `lease_ttl_ms` and the fixture's manual clock.
    fn fresh(&self, lease_ttl_ms: u32) -> StoreResult<Box<dyn Fixture>>;

    /// Try to open a store with this raw ttl at a fresh location (B1). `None` when the store has
    /// no lease ttl at all.
    fn ttl_intake(&self, lease_ttl_ms: i64) -> Option<TtlIntake>;

    /// A command that constructs the store in another OS process and exits 0 on success, 1 when
    /// the store failed the boot, anything else on a harness failure (B2).
    /// Once set up (an adapter started and shaken hands with), the process writes a line
    /// `ready` on its stdout and waits for the end of its stdin before it opens: the kit ends
    /// every process's stdin at once when all are ready, so they open together (a readiness
    /// point, not an instant guessed ahead). Every call with the same `round` must name the same
    /// fresh location. `None` when the store cannot be shared across processes.
    fn boot_command(&self, round: u32) -> Option<Command>;

    /// How many rounds of the boot race (B2) to run, each on a fresh location. Two for a store in
    /// this process's language; a store behind an adapter process needs more for its racers'
    /// opens to meet (each open crosses two more processes' scheduling first).
    fn boot_rounds(&self) -> u32 {
        2
    }

    /// Open a store over an existing location first shaped by `setup` (SQL run on a fresh SQLite
    /// file) and report what opening did to it (B4). `None` when the store does not keep a SQLite
    /// file.
    fn open_prepared(&self, _setup: &str) -> Option<PreparedOpen> {
        None
    }

    /// Populate a fresh location through a read-write store, close it, then open a read-only
    /// store over it, read, and try every write (B5). `None` when the store has no read-only mode.
    fn open_read_only(&self) -> Option<ReadOnlyOpen> {
        None
    }
}

/// What a read-only store did over a location a writer populated and closed (B5).
#[derive(Debug)]
pub struct ReadOnlyOpen {
    /// What opening it answered.
    pub opened: StoreResult<()>,
    /// How many journal entries of the populated run it read (the writer appended one).
    pub read: StoreResult<usize>,
    /// Each write it was asked to make, by surface, and its answer: every one must be refused.
    pub writes: Vec<(&'static str, StoreResult<()>)>,
    /// Whether the location's data files are byte for byte as before the read-only open (SQLite's
    /// coordination files, a `-shm` and an empty `-wal`, aside).
    pub unchanged: bool,
}

/// What opening a store over a prepared file did.
#[derive(Debug)]
pub struct PreparedOpen {
    pub result: StoreResult<()>,
    /// Whether the file's bytes and the files beside it are exactly as before the open.
    pub unchanged: bool,
}

/// One fresh location. Every `connect` is a new connection over the same data.
pub trait Fixture {
    fn connect(&self) -> StoreResult<Box<dyn Store>>;
    fn clock(&self) -> &ManualClock;
}

/// What opening a store with an invalid ttl did.
#[derive(Debug)]
pub struct TtlIntake {
    pub result: StoreResult<()>,
    /// Whether anything exists at the location afterwards (a file, a database).
    pub location_touched: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Suite {
    Journal,
    Leasable,
    FencedWrites,
    FencedTranscripts,
    Boot,
}

impl Suite {
    pub fn as_str(self) -> &'static str {
        match self {
            Suite::Journal => "journal",
            Suite::Leasable => "leasable",
            Suite::FencedWrites => "fenced-writes",
            Suite::FencedTranscripts => "fenced-transcripts",
            Suite::Boot => "boot",
        }
    }
}

/// Why a check did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The store broke the contract.
    Fail(String),
    /// The check does not apply to this store (it has no leases, declares no fenced writes...).
    Skip(String),
    /// The harness could not run the check (it could not start a process...): no verdict on
    /// the store either way.
    Broken(String),
}

impl From<StoreError> for Verdict {
    fn from(e: StoreError) -> Self {
        Verdict::Fail(format!("unexpected error: {e}"))
    }
}

pub type CheckResult = Result<(), Verdict>;

/// One check of the kit.
pub struct Check {
    /// The contract it checks (`L4`).
    pub id: &'static str,
    /// The reference conformance name where one exists (`fencing-epoch-tombstone`).
    pub name: &'static str,
    pub suite: Suite,
    pub run: fn(&dyn Target) -> CheckResult,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
    /// The harness could not judge; see [`Verdict::Broken`].
    Error(String),
}

#[derive(Clone, Debug)]
pub struct CheckReport {
    pub id: &'static str,
    pub name: &'static str,
    pub suite: Suite,
    pub outcome: Outcome,
}

impl CheckReport {
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Fail(_))
    }

    /// The harness could not run this check.
    pub fn broken(&self) -> bool {
        matches!(self.outcome, Outcome::Error(_))
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (word, reason) = match &self.outcome {
            Outcome::Pass => ("pass", ""),
            Outcome::Fail(r) => ("FAIL", r.as_str()),
            Outcome::Skip(r) => ("skip", r.as_str()),
            Outcome::Error(r) => ("ERROR", r.as_str()),
        };
        write!(f, "{word:<4} {:<3} {}", self.id, self.name)?;
        if !reason.is_empty() {
            write!(f, ": {reason}")?;
        }
        Ok(())
    }
}

/// Every check of the kit, in suite order.
pub fn checks() -> Vec<Check> {
    let mut all = Vec::new();
    all.extend(journal::checks());
    all.extend(leasable::checks());
    all.extend(fenced_writes::checks());
    all.extend(transcripts::checks());
    all.extend(boot::checks());
    all
}

/// Run one check, turning a panic inside the store under test into a failure of that check.
pub fn run_check(check: &Check, target: &dyn Target) -> CheckReport {
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (check.run)(target))) {
        Ok(Ok(())) => Outcome::Pass,
        Ok(Err(Verdict::Fail(r))) => Outcome::Fail(r),
        Ok(Err(Verdict::Skip(r))) => Outcome::Skip(r),
        Ok(Err(Verdict::Broken(r))) => Outcome::Error(r),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic".to_owned());
            Outcome::Fail(format!("the store panicked: {}", what.split_whitespace().collect::<Vec<_>>().join(" ")))
        }
    };
    CheckReport { id: check.id, name: check.name, suite: check.suite, outcome }
}

pub fn run_all(target: &dyn Target) -> Vec<CheckReport> {
    checks().iter().map(|c| run_check(c, target)).collect()
}

// ---- helpers shared by the suites ----------------------------------------------------------

/// Fail the check with a formatted reason unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::conformance::Verdict::Fail(format!($($fmt)+)));
        }
    };
}
pub(crate) use ensure;

/// Fail the check with a formatted reason.
macro_rules! fail {
    ($($fmt:tt)+) => {
        return Err($crate::conformance::Verdict::Fail(format!($($fmt)+)))
    };
}
pub(crate) use fail;

/// The lease capability, or skip the check: it needs leases.
pub(crate) fn leases(store: &dyn Store) -> Result<&dyn LeasableStore, Verdict> {
    store.leases().ok_or_else(|| Verdict::Skip("store has no leases".to_owned()))
}

/// Skip unless the store declares fenced writes on both sides (W6: the marker is a promise,
/// and the fenced suites refuse to run against a store that does not make it).
pub(crate) fn require_fenced(store: &dyn Store) -> CheckResult {
    store.assert_fenced_writes().map_err(|_| Verdict::Skip("store declares no fenced writes".to_owned()))
}

/// Expect a typed lease rejection; anything else fails the check with `what` as context.
pub(crate) fn expect_lease_held<T>(what: &str, result: StoreResult<T>) -> CheckResult {
    match result {
        Err(StoreError::LeaseHeld(_)) => Ok(()),
        Err(e) => fail!("{what}: expected lease_held, got {} ({e})", e.code()),
        Ok(_) => fail!("{what}: expected lease_held, but it was accepted"),
    }
}

/// Default ttl for checks that must not expire by accident (D17: a long main ttl, expiry driven
/// by the manual clock only).
pub const MAIN_TTL_MS: u32 = 600_000;

// ---- fixtures shared by the check files ----------------------------------------------------

use std::sync::{Arc, Mutex, PoisonError};

use crate::error::LeaseRejection;
use crate::fault::{FaultAction, FaultPoint, FaultSite};
use crate::types::{Epoch, JournalEntry, Lease, RunId, RunMeta, RunStatus};

/// The run the fenced suites write (the reference kit's name).
pub(crate) const FENCED_RUN: &str = "fenced-run";
/// A second run whose live lease must guard nothing of [`FENCED_RUN`] (W3, T4).
pub(crate) const OTHER_RUN: &str = "fenced-other-run";
pub(crate) const OWNER_A: &str = "owner-a";
pub(crate) const OWNER_B: &str = "owner-b";
pub(crate) const OWNER_C: &str = "owner-c";
/// A stable owner identity, the same across a delete and recreate (D7).
pub(crate) const OWNER_STABLE: &str = "owner-stable";
/// The checkpoint ref of the reference's RFC-F2 tests.
pub(crate) const CKPT_REF: &str = "fenced-run/ckpt/7";
/// Ttl of the short expiry fixture (D17: expiry checks get their own fixture).
pub(crate) const EXPIRY_TTL_MS: u32 = 600;

/// A small entry that says who wrote it, so a stale write is recognisable in a load.
pub(crate) fn entry(seq: i64, marker: &str) -> JournalEntry {
    JournalEntry::new(seq, "step", "ok").with("marker", serde_json::json!(marker))
}

/// The seqs of a loaded journal, for comparisons and messages.
pub(crate) fn seqs(entries: &[JournalEntry]) -> Vec<i64> {
    entries.iter().map(|e| e.seq.0).collect()
}

/// The markers of a loaded journal (see [`entry`]), for comparisons and messages.
pub(crate) fn markers(entries: &[JournalEntry]) -> Vec<String> {
    entries.iter().map(|e| e.extra.get("marker").and_then(|m| m.as_str()).unwrap_or("?").to_owned()).collect()
}

/// The meta record the fenced suites write for [`FENCED_RUN`].
pub(crate) fn fenced_meta(status: RunStatus, segments: u32) -> RunMeta {
    RunMeta::new(FENCED_RUN, status).with_segments(segments)
}

/// Expect `result` accepted; a refusal fails the check with `what` as context.
pub(crate) fn expect_ok<T>(what: &str, result: StoreResult<T>) -> Result<T, Verdict> {
    result.map_err(|e| Verdict::Fail(format!("{what}: expected it accepted, got {} ({e})", e.code())))
}

/// Expect the stored meta of `run` to equal `want` (`None`: no meta).
pub(crate) fn expect_meta(store: &dyn Store, run: &RunId, want: Option<&RunMeta>, when: &str) -> CheckResult {
    let got = store.get_meta(run)?;
    let show = |m: Option<&RunMeta>| match m {
        None => "none".to_owned(),
        Some(m) => {
            let genesis = m.genesis.as_ref().map(|g| format!(" genesis={g}")).unwrap_or_default();
            format!("{} segments={}{genesis}", m.status, m.segments)
        }
    };
    ensure!(got.as_ref() == want, "meta {when}: expected {}, got {} run={run}", show(want), show(got.as_ref()));
    Ok(())
}

/// Expect the stored bytes of `blob_ref` to equal `want` (`None`: no blob).
pub(crate) fn expect_blob(store: &dyn Store, blob_ref: &str, want: Option<&[u8]>, when: &str) -> CheckResult {
    let got = store.get_blob(blob_ref)?;
    ensure!(got.as_deref() == want, "blob {when}: expected {want:?}, got {:?} ref={blob_ref}", got.as_deref());
    Ok(())
}

/// Supersede `stale` without a clock: its holder releases it through `la`, then `lb` acquires
/// the run as owner-b. Returns the successor's lease, checked to carry a higher epoch.
pub(crate) fn supersede(la: &dyn LeasableStore, stale: &Lease, lb: &dyn LeasableStore) -> Result<Lease, Verdict> {
    la.release(stale)?;
    let next = lb.acquire(&stale.run, OWNER_B)?;
    expect_epoch_above("takeover after release", &next, stale)?;
    Ok(next)
}

/// L3: a later grant carries a strictly higher epoch than an earlier one of the same run.
pub(crate) fn expect_epoch_above(what: &str, later: &Lease, earlier: &Lease) -> CheckResult {
    ensure!(
        later.epoch > earlier.epoch,
        "{what}: expected an epoch above {}, got {} run={} owner={}",
        earlier.epoch,
        later.epoch,
        later.run,
        later.owner
    );
    Ok(())
}

/// Expect an acquire rejected because `owner` holds the run at `epoch` (L1).
pub(crate) fn expect_held_by(what: &str, result: StoreResult<Lease>, owner: &str, epoch: Epoch) -> CheckResult {
    match &result {
        Err(StoreError::LeaseHeld(held)) => match &held.rejection {
            LeaseRejection::HeldBy { owner: o, epoch: e } if o == owner && *e == epoch => Ok(()),
            other => fail!("{what}: expected a rejection naming owner={owner} epoch={epoch}, got {other:?}"),
        },
        _ => expect_lease_held(what, result),
    }
}

/// Expect a lease rejection because the lease names another run than `target` (W3, T4).
pub(crate) fn expect_run_mismatch<T: fmt::Debug>(what: &str, result: StoreResult<T>, target: &RunId) -> CheckResult {
    match &result {
        Err(StoreError::LeaseHeld(held)) => match &held.rejection {
            LeaseRejection::RunMismatch { target: t } if t == target => Ok(()),
            other => fail!("{what}: expected a run mismatch naming run={target}, got {other:?}"),
        },
        _ => expect_lease_held(what, result),
    }
}

/// What a [`hook_once`] hook recorded.
pub(crate) struct HookSlot<R>(Arc<Mutex<Option<R>>>);

impl<R> HookSlot<R> {
    /// Remove the hook from `store` and take what it recorded: `None` when the point never fired.
    pub(crate) fn finish(self, store: &dyn Store) -> Option<R> {
        store.set_fault_hook(None);
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// Install on `store` a hook that acts once: the first time `point` fires it runs `attempt` and
/// keeps the result. `attempt` owns what it uses (typically a second connection) and must not
/// call into `store`. Skips the check when the store has no fault points.
pub(crate) fn hook_once<R: Send + 'static>(
    store: &dyn Store,
    point: FaultPoint,
    attempt: impl FnOnce() -> R + Send + 'static,
) -> Result<HookSlot<R>, Verdict> {
    let slot = Arc::new(Mutex::new(None));
    let record = Arc::clone(&slot);
    let mut attempt = Some(attempt);
    let hook = move |site: &FaultSite<'_>| {
        if site.point == point
            && let Some(attempt) = attempt.take()
        {
            *record.lock().unwrap_or_else(PoisonError::into_inner) = Some(attempt());
        }
        FaultAction::Resume
    };
    if store.set_fault_hook(Some(Box::new(hook))) {
        Ok(HookSlot(slot))
    } else {
        Err(Verdict::Skip("store has no fault points".to_owned()))
    }
}
