//! The lease checkers: no acceptance under a stale lease (contracts 2.7.1), grants unique and
//! increasing per run with one node per serial position (2.7.2, 5.9.2-4), at most one live lease
//! (2.7.3), and rejections typed by class with the fence checked before the seq guard (2.7.7).
//! All but `epochs_increasing` judge each call by the lease table replayed once per check
//! ([`LeaseReplay`](super::model::LeaseReplay)).

use crate::checker::Checker;
use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, Lease, RunId};

use super::model::{Fence, Run, holder, target};
use super::{Context, Descriptor, Scope, Violation};
use crate::history::{Call, CallOutcome, Role, Row, Surface};

pub(super) const NO_STALE_ACCEPTANCE: Checker = Checker::NoStaleAcceptance;
pub(super) const NO_STALE_ACCEPTANCE_CHECK: Descriptor = Descriptor {
    checker: NO_STALE_ACCEPTANCE,
    scope: Scope::Store,
    invariant: "every accepted mutation, renew and release carried the live holder's lease of its target run (2.7.1)",
    check: no_stale_acceptance,
};
pub(super) const EPOCHS_INCREASING: Checker = Checker::EpochsIncreasing;
pub(super) const EPOCHS_INCREASING_CHECK: Descriptor = Descriptor {
    checker: EPOCHS_INCREASING,
    scope: Scope::Store,
    invariant: "per run, granted epochs are unique and strictly increasing across delete/recreate, one node per (run, epoch) (2.7.2)",
    check: epochs_increasing,
};
pub(super) const ONE_LIVE_LEASE: Checker = Checker::OneLiveLease;
pub(super) const ONE_LIVE_LEASE_CHECK: Descriptor = Descriptor {
    checker: ONE_LIVE_LEASE,
    scope: Scope::Store,
    invariant: "no acquire is granted while another lease row of the run is live (2.7.3)",
    check: one_live_lease,
};
pub(super) const TYPED_REJECTIONS: Checker = Checker::TypedRejections;
pub(super) const TYPED_REJECTIONS_CHECK: Descriptor = Descriptor {
    checker: TYPED_REJECTIONS,
    scope: Scope::Store,
    invariant: "a rejected acquire is held-by; a fenced call is never rejected for the live holder's lease, and otherwise run-mismatch for another run's lease, else stale; the fence is checked before the seq guard (2.7.7)",
    check: typed_rejections,
};

/// An administrator's unleased deletes (of a run, of a blob) are the administrative purge the
/// SPI allows (contracts S6), not an unfenced write.
fn is_admin_purge(role: Role, call: &Call) -> bool {
    role == Role::Admin && matches!(call.surface, Surface::Delete | Surface::DeleteBlob)
}

/// Every accepted mutation, renew and release carried the live holder's lease of its target run.
pub(super) fn no_stale_acceptance(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        let Some(call) = row.call().filter(|c| c.outcome.is_ok()) else { continue };
        let Some(fence) = ctx.leases.fence(pos) else { continue };
        // Nearly every call met its live holder: the labels below are formatted for a violation only.
        if matches!(fence, Fence::Holder | Fence::HolderInDoubt)
            || (matches!(fence, Fence::Unleased) && is_admin_purge(row.role, call))
        {
            continue;
        }
        if let Some((why, cause)) = stale_acceptance(fence, row.role, call) {
            found.push(Violation::new(NO_STALE_ACCEPTANCE, why, Some(row.index), cause));
        }
    }
    found
}

/// Why a call accepted under `fence` was not the live holder's, and the row that granted the
/// lease it should have carried; `None` when the fence is the holder's (or an administrator's
/// unleased purge, contracts S6).
fn stale_acceptance(fence: &Fence, role: Role, call: &Call) -> Option<(String, Option<usize>)> {
    let (op, on, under) = (call.surface.as_str(), target(call), holder(call));
    let (why, cause) = match fence {
        Fence::Holder | Fence::HolderInDoubt => (None, None),
        // S6: the administrator's unleased purge is legal; anyone else's unleased write is not.
        Fence::Unleased if is_admin_purge(role, call) => (None, None),
        Fence::Unleased => (Some(format!("unleased {op} of {on} accepted")), None),
        Fence::OtherRun(other) => (Some(format!("{op} on {on} accepted under {under}, a lease for run {other}")), None),
        Fence::Expired { clock, expires_at } => (
            Some(format!(
                "{op} on {on} accepted under {under} after it expired (clock {clock} >= expires {expires_at})"
            )),
            None,
        ),
        Fence::Superseded(live) => (
            Some(format!("{op} on {on} accepted under {under}, but the live holder was {}", live.label())),
            Some(live.granted),
        ),
        Fence::NoLiveLease(None) => {
            (Some(format!("{op} on {on} accepted under {under}, but {} had no lease row", call.run)), None)
        }
        Fence::NoLiveLease(Some(row)) => (
            Some(format!(
                "{op} on {on} accepted under {under}, but {} had no live lease ({} expired at {})",
                call.run,
                row.label(),
                row.expires_at
            )),
            Some(row.granted),
        ),
    };
    why.map(|why| (why, cause))
}

/// Granted epochs strictly increase per run (across delete/recreate), and no two nodes are
/// accepted under the same (run, epoch): a duplicate serial position.
pub(super) fn epochs_increasing<'a>(ctx: &Context<'a>) -> Vec<Violation> {
    let mut seen = Grants::default();
    let mut found = Vec::new();
    for row in ctx.rows {
        let Some(call) = row.call().filter(|c| c.outcome.is_ok()) else { continue };
        let Some(lease) = &call.lease else { continue };
        if call.surface == Surface::Acquire
            && let Some(run) = ctx.runs.at(row.index)
        {
            found.extend(seen.grant(run, row, call, lease));
        }
        found.extend(seen.position(row, lease));
    }
    found
}

/// The grants and serial positions seen so far, walked in row order.
#[derive(Default)]
struct Grants<'a> {
    /// Per run generation, its highest granted epoch and the row that granted it.
    granted: BTreeMap<Run<'a>, (Epoch, usize)>,
    /// Per serial position (run, epoch), the first node accepted under it and its row.
    positions: BTreeMap<(&'a RunId, Epoch), (&'a str, usize)>,
    /// The serial positions already reported as duplicates: one violation each.
    reported: BTreeSet<(&'a RunId, Epoch)>,
}

impl<'a> Grants<'a> {
    /// An accepted acquire of `run` at `row`: a violation unless its epoch is above every epoch
    /// granted before it.
    fn grant(&mut self, run: Run<'a>, row: &Row, call: &Call, lease: &Lease) -> Option<Violation> {
        match self.granted.get(&run) {
            Some(&(top, at)) if lease.epoch <= top => {
                // The rows are walked in order: the grant it is judged against came first.
                assert!(at < row.index, "row {}: an earlier grant recorded at row {at}", row.index);
                let what = if lease.epoch == top { "the same epoch" } else { "a higher epoch" };
                Some(Violation::new(
                    EPOCHS_INCREASING,
                    format!(
                        "acquire of {} granted e{} to {} at row {}, but {what} e{top} was granted at row {at}",
                        call.run, lease.epoch, lease.owner, row.index
                    ),
                    Some(row.index),
                    Some(at),
                ))
            }
            _ => {
                self.granted.insert(run, (lease.epoch, row.index));
                None
            }
        }
    }

    /// An accepted call at `row` under `lease`: a violation when another node was accepted under
    /// the same serial position before (reported once per position).
    fn position(&mut self, row: &'a Row, lease: &'a Lease) -> Option<Violation> {
        let key = (&lease.run, lease.epoch);
        match self.positions.get(&key) {
            Some(&(node, at)) if node != row.node && !self.reported.contains(&key) => {
                assert!(at < row.index, "row {}: an earlier serial position recorded at row {at}", row.index);
                self.reported.insert(key);
                Some(Violation::new(
                    EPOCHS_INCREASING,
                    format!(
                        "duplicate serial position {}@e{}: {} at row {at} and {} at row {} were both accepted under it",
                        lease.run, lease.epoch, node, row.node, row.index
                    ),
                    Some(row.index),
                    Some(at),
                ))
            }
            Some(_) => None,
            None => {
                self.positions.insert(key, (&row.node, row.index));
                None
            }
        }
    }
}

/// No acquire is granted while another lease row of the run is live at the acquirer's clock.
pub(super) fn one_live_lease(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        let Some(call) = row.call() else { continue };
        if let (Surface::Acquire, CallOutcome::Ok, Some(lease)) = (call.surface, &call.outcome, &call.lease)
            && let Some(live) = ctx.leases.live_at_acquire(pos)
        {
            found.push(Violation::new(
                ONE_LIVE_LEASE,
                format!(
                    "acquire of {} granted {}@e{} at clock {} while {} was live until {}",
                    call.run,
                    lease.owner,
                    lease.epoch,
                    call.clock_ms,
                    live.label(),
                    live.expires_at
                ),
                Some(row.index),
                Some(live.granted),
            ));
        }
    }
    found
}

/// Rejections carry their class (busy is always fine): an acquire is refused held-by. A fenced
/// call refused for its lease (stale or run-mismatch) must not have been the live holder of its
/// target run in the replayed table, and is run-mismatch if its lease names another run, else
/// stale (an unleased call included). An append may also meet the seq guard (journal-order), but
/// only if its lease was the live holder or it carried none: the fence comes first. Any other
/// class, an untyped error above all, is a violation (an error the harness injected before the
/// store saw the call is not the store's). Reads are not judged.
pub(super) fn typed_rejections(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        let Some(call) = row.call() else { continue };
        let why = match (&call.outcome, call.surface) {
            (CallOutcome::Ok | CallOutcome::Busy | CallOutcome::Indeterminate | CallOutcome::Injected, _) => None,
            (CallOutcome::HeldBy { .. }, Surface::Acquire) => None,
            (CallOutcome::Error(code), Surface::Acquire) => {
                Some(format!("unexpected error {code} on {} of {}", call.surface.as_str(), target(call)))
            }
            (other, Surface::Acquire) => {
                Some(format!("acquire of {} rejected with {other}, expected held-by", target(call)))
            }
            (rejection, _) => match ctx.leases.fence(pos) {
                Some(fence) => fenced_rejection(call, fence, rejection),
                None => None,
            },
        };
        if let Some(why) = why {
            found.push(Violation::new(TYPED_REJECTIONS, why, Some(row.index), None));
        }
    }
    found
}

/// What is wrong with a fenced call's `rejection` (anything but ok or busy), given how its lease
/// stood.
fn fenced_rejection(call: &Call, fence: &Fence, rejection: &CallOutcome) -> Option<String> {
    let (op, on, under) = (call.surface.as_str(), target(call), holder(call));
    let expected = |class: &str| {
        Some(format!(
            "{op} of {on} under {under} rejected with {rejection}, expected {class} ({})",
            standing(call, fence)
        ))
    };
    match (rejection, fence) {
        (CallOutcome::Error(code), _) => Some(format!("unexpected error {code} on {op} of {on}")),
        (CallOutcome::JournalOrder, Fence::Holder | Fence::HolderInDoubt | Fence::Unleased)
            if call.surface == Surface::Append =>
        {
            None
        }
        (CallOutcome::JournalOrder, _) if call.surface == Surface::Append => Some(format!(
            "append to {on} under {under} rejected journal-order, but its lease was not the live holder: the fence must be checked first"
        )),
        (CallOutcome::Stale | CallOutcome::RunMismatch, Fence::Holder) => {
            Some(format!("the live holder's {op} was rejected as {rejection} ({on} under {under})"))
        }
        (_, Fence::Holder) => {
            Some(format!("the live holder's {op} of {on} under {under} was rejected with {rejection}"))
        }
        // The row may have been taken by an indeterminate acquire, release or delete: refused as stale.
        (CallOutcome::Stale, Fence::HolderInDoubt) => None,
        (_, Fence::HolderInDoubt) => expected("stale"),
        (CallOutcome::RunMismatch, Fence::OtherRun(_)) => None,
        (_, Fence::OtherRun(_)) => expected("run-mismatch"),
        (CallOutcome::Stale, _) => None,
        _ => expected("stale"),
    }
}

/// How a call's lease stood against the replayed table, as [`typed_rejections`] quotes it.
fn standing(call: &Call, fence: &Fence) -> String {
    match fence {
        Fence::Holder => "its lease was the live holder".to_owned(),
        Fence::HolderInDoubt => {
            "its lease was the live holder, unless an indeterminate acquire, release or delete took it".to_owned()
        }
        Fence::Unleased => "it carried no lease".to_owned(),
        Fence::OtherRun(other) => format!("its lease is for run {other}"),
        Fence::Expired { clock, expires_at } => format!("its lease expired at {expires_at}, clock {clock}"),
        Fence::Superseded(live) => format!("the live holder was {}", live.label()),
        Fence::NoLiveLease(None) => format!("{} had no lease row", call.run),
        Fence::NoLiveLease(Some(row)) => {
            format!("{} had no live lease ({} expired at {})", call.run, row.label(), row.expires_at)
        }
    }
}
