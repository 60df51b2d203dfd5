//! The public conformance kit: every numbered store contract (J, L, W, T, B of contracts section
//! 2) as a check any adapter can run. A check is a plain function over a [`Target`], a factory
//! of fresh store locations; cross-instance checks open two connections over one location and
//! drive lease expiry through the fixture's [`ManualClock`], never through sleeping.
//!
//! Run them all with [`run_all`]; every report names the contract it checks. A check that no
//! planted defect can make fail is not yet a check: `sim/tests/conformance_cli.rs` plants each
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

    /// A command that constructs the store over `location` in another OS process, waiting until
    /// the wall clock reaches `start_at_unix_ms` first, and exits 0 on success (B2). `None` when
    /// the store cannot be shared across processes.
    fn boot_command(&self, round: u32, start_at_unix_ms: i64) -> Option<Command>;
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
    Fail(String),
    /// The check does not apply to this store (it has no leases, declares no fenced writes...).
    Skip(String),
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
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (word, reason) = match &self.outcome {
            Outcome::Pass => ("pass", ""),
            Outcome::Fail(r) => ("FAIL", r.as_str()),
            Outcome::Skip(r) => ("skip", r.as_str()),
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

/// Run one check, turning a panic inside the store under test into a failure.
pub fn run_check(check: &Check, target: &dyn Target) -> CheckReport {
    let outcome = match (check.run)(target) {
        Ok(()) => Outcome::Pass,
        Err(Verdict::Fail(r)) => Outcome::Fail(r),
        Err(Verdict::Skip(r)) => Outcome::Skip(r),
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
    if store.fenced_writes() && store.fenced_blob_writes() && store.leases().is_some() {
        Ok(())
    } else {
        Err(Verdict::Skip("store declares no fenced writes".to_owned()))
    }
}

/// Expect a typed lease rejection; anything else fails the check with `what` as context.
pub(crate) fn expect_lease_held<T: fmt::Debug>(what: &str, result: StoreResult<T>) -> CheckResult {
    match result {
        Err(StoreError::LeaseHeld(_)) => Ok(()),
        Err(e) => fail!("{what}: expected lease_held, got {} ({e})", e.code()),
        Ok(v) => fail!("{what}: expected lease_held, but it was accepted ({v:?})"),
    }
}

/// Default ttl for checks that must not expire by accident (D17: a long main ttl, expiry driven
/// by the manual clock only).
pub const MAIN_TTL_MS: u32 = 600_000;
