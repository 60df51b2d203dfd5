//! The lease checkers: no acceptance under a stale lease (contracts 2.7.1), grants unique and
//! increasing per run with one node per serial position (2.7.2, 5.9.2-4), at most one live lease
//! (2.7.3), and rejections typed by class with the fence checked before the seq guard (2.7.7).
//! All of them replay the lease table of [`Leases`] along the rows.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_store::{Epoch, RunId};

use super::model::{Fence, Leases, holder, target};
use super::{OracleConfig, Violation};
use crate::history::{CallOutcome, Row, Surface};

pub(super) const NO_STALE_ACCEPTANCE: &str = "no-stale-acceptance";
pub(super) const EPOCHS_INCREASING: &str = "epochs-increasing";
pub(super) const ONE_LIVE_LEASE: &str = "one-live-lease";
pub(super) const TYPED_REJECTIONS: &str = "typed-rejections";

/// Every accepted mutation, renew and release carried the live holder's lease of its target run.
pub(super) fn no_stale_acceptance(rows: &[Row], cfg: &OracleConfig) -> Vec<Violation> {
    let mut leases = Leases::new(cfg.ttl_ms);
    let mut found = Vec::new();
    for row in rows {
        let Some(call) = row.call() else { continue };
        let fenced = call.surface.is_mutation() || matches!(call.surface, Surface::Renew | Surface::Release);
        if fenced && call.outcome.is_ok() {
            let (op, on, under) = (call.surface.as_str(), target(call), holder(call));
            let (why, cause) = match leases.fence(call) {
                Fence::Holder => (None, None),
                Fence::Unleased => (Some(format!("unleased {op} of {on} accepted")), None),
                Fence::OtherRun(other) => {
                    (Some(format!("{op} on {on} accepted under {under}, a lease for run {other}")), None)
                }
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
            if let Some(why) = why {
                found.push(Violation::new(NO_STALE_ACCEPTANCE, why, Some(row.index), cause));
            }
        }
        leases.apply(row.index, call);
    }
    found
}

/// Granted epochs strictly increase per run (across delete/recreate), and no two nodes are
/// accepted under the same (run, epoch): a duplicate serial position.
pub(super) fn epochs_increasing(rows: &[Row]) -> Vec<Violation> {
    let mut granted: BTreeMap<RunId, (Epoch, usize)> = BTreeMap::new();
    let mut positions: BTreeMap<(RunId, Epoch), (&str, usize)> = BTreeMap::new();
    let mut reported: BTreeSet<(RunId, Epoch)> = BTreeSet::new();
    let mut found = Vec::new();
    for row in rows {
        let Some(call) = row.call().filter(|c| c.outcome.is_ok()) else { continue };
        let Some(lease) = &call.lease else { continue };
        if call.surface == Surface::Acquire {
            match granted.get(&call.run) {
                Some(&(top, at)) if lease.epoch <= top => {
                    let what = if lease.epoch == top { "the same epoch" } else { "a higher epoch" };
                    found.push(Violation::new(
                        EPOCHS_INCREASING,
                        format!(
                            "acquire of {} granted e{} to {} at row {}, but {what} e{top} was granted at row {at}",
                            call.run, lease.epoch, lease.owner, row.index
                        ),
                        Some(row.index),
                        Some(at),
                    ));
                }
                _ => {
                    granted.insert(call.run.clone(), (lease.epoch, row.index));
                }
            }
        }
        let key = (lease.run.clone(), lease.epoch);
        match positions.get(&key) {
            Some(&(node, at)) if node != row.node && !reported.contains(&key) => {
                found.push(Violation::new(
                    EPOCHS_INCREASING,
                    format!(
                        "duplicate serial position {}@e{}: {} at row {at} and {} at row {} were both accepted under it",
                        lease.run, lease.epoch, node, row.node, row.index
                    ),
                    Some(row.index),
                    Some(at),
                ));
                reported.insert(key);
            }
            Some(_) => {}
            None => {
                positions.insert(key, (&row.node, row.index));
            }
        }
    }
    found
}

/// No acquire is granted while another lease row of the run is live at the acquirer's clock.
pub(super) fn one_live_lease(rows: &[Row], cfg: &OracleConfig) -> Vec<Violation> {
    let mut leases = Leases::new(cfg.ttl_ms);
    let mut found = Vec::new();
    for row in rows {
        let Some(call) = row.call() else { continue };
        if let (Surface::Acquire, CallOutcome::Ok, Some(lease)) = (call.surface, &call.outcome, &call.lease)
            && let Some(live) = leases.live(&call.run, call.clock_ms)
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
        leases.apply(row.index, call);
    }
    found
}

/// Rejections carry their class: acquire -> held-by (or busy); a fenced mutation, renew or
/// release -> stale or run-mismatch (or busy; an append may also meet the seq guard, but only
/// once its fence passed); never an untyped error.
pub(super) fn typed_rejections(rows: &[Row], cfg: &OracleConfig) -> Vec<Violation> {
    let mut leases = Leases::new(cfg.ttl_ms);
    let mut found = Vec::new();
    for row in rows {
        let Some(call) = row.call() else { continue };
        let (op, on) = (call.surface.as_str(), target(call));
        let fenced = call.surface.is_mutation() || matches!(call.surface, Surface::Renew | Surface::Release);
        let why = match (&call.outcome, call.surface) {
            (CallOutcome::Ok | CallOutcome::Busy, _) => None,
            (_, surface) if !fenced && surface != Surface::Acquire => None,
            (CallOutcome::Error(code), _) => Some(format!("unexpected error {code} on {op} of {on}")),
            (CallOutcome::HeldBy { .. }, Surface::Acquire) => None,
            (other, Surface::Acquire) => Some(format!("acquire of {on} rejected with {other}, expected held-by")),
            (CallOutcome::Stale | CallOutcome::RunMismatch, _) => None,
            (CallOutcome::JournalOrder, Surface::Append) => match leases.fence(call) {
                Fence::Holder | Fence::Unleased => None,
                _ => Some(format!(
                    "append to {on} under {} rejected journal-order, but its lease was not the live holder: the fence must be checked first",
                    holder(call)
                )),
            },
            (other, _) => Some(format!("{op} of {on} rejected with {other}, expected stale or run-mismatch")),
        };
        if let Some(why) = why {
            found.push(Violation::new(TYPED_REJECTIONS, why, Some(row.index), None));
        }
        leases.apply(row.index, call);
    }
    found
}
