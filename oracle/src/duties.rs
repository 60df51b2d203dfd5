//! `healthy-holder`: a holder nothing disturbs keeps its lease (contracts 3.2 E2, 3.8 E8). A
//! segment renews every `floor(ttl/3)` ms, so a lease only lapses under its live holder when
//! something stopped that holder: a stall, a crash, a clock jump, a restart, a busy or failing
//! store, a takeover or purge aimed at its run. A fenced call refused because its own lease row
//! had expired (no one else took the run over) is a healthy holder that let its lease lapse: a
//! renew cadence that is wrong, a renew loop that stopped, a drive that never renews.
//!
//! The tenure's span runs from its grant to the lapsed call; any fault row of the holder's node (its
//! own, or the harness's naming it, as a clock jump is recorded)
//! (from up to 100 ttls before the grant: a node stall may have begun earlier) or aimed at the
//! run, and any call of that node that met a busy, failing or injected store (or never learned
//! its outcome), in that span excuses it. A lapse after another node took the run
//! over is not judged here (clock skews between nodes decide those).

use super::model::Fence;
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{CallOutcome, Event, Role, Row, Surface};
use fencesim_store::{Lease, RunId};

pub(super) const HEALTHY_HOLDER: Checker = Checker::HealthyHolder;
pub(super) const HEALTHY_HOLDER_CHECK: Descriptor = Descriptor {
    checker: HEALTHY_HOLDER,
    scope: Scope::Engine,
    invariant: "a holder nothing disturbed (no fault on its node or run, no busy or failing store call of its own) never lets its lease lapse: a fenced call of its tenure is never refused for its own expired row (E2, E8)",
    check: healthy_holder,
};

/// How far before a tenure's grant a fault of its node still excuses it, in ttls: a stall pauses
/// the whole node and may have begun before the grant (the history records its start only), and
/// no world stalls a node longer than 100 ttls (the scenarios' bound on a stall's factor).
const LOOKBACK_TTLS: i64 = 100;

/// Whether a fault the harness recorded on another node's behalf (a clock jump of `w2` is the
/// world's row, its detail naming `w2` first) was aimed at `node` (a label such as `w2.1`, its
/// incarnation after the dot).
fn aimed_at(role: Role, detail: &str, node: &str) -> bool {
    let base = node.split('.').next().unwrap_or(node);
    role == Role::Harness && detail.split_whitespace().next() == Some(base)
}

/// The position in `rows` of `node`'s last accepted acquire that granted `lease`.
fn grant_of(rows: &[Row], node: &str, lease: &Lease) -> Option<usize> {
    rows.iter().rposition(|r| {
        r.call().is_some_and(|c| {
            c.surface == Surface::Acquire && c.outcome.is_ok() && c.lease.as_ref() == Some(lease) && r.node == node
        })
    })
}

/// Whether row `r` excuses `node` letting its lease of `run` lapse: a fault on the node, on the
/// run or aimed at the node, or a call of the node that the store did not answer cleanly.
fn excuses(r: &Row, node: &str, run: &RunId) -> bool {
    match &r.event {
        Event::Fault { run: target, detail, .. } => {
            r.node == node || target.as_ref() == Some(run) || aimed_at(r.role, detail, node)
        }
        Event::Call(c) if r.node == node => matches!(
            c.outcome,
            CallOutcome::Busy | CallOutcome::Error(_) | CallOutcome::Injected | CallOutcome::Indeterminate
        ),
        _ => false,
    }
}

pub(super) fn healthy_holder(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut judged = std::collections::BTreeSet::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        let Some(call) = row.call() else { continue };
        let (Some(Fence::Expired { clock, expires_at }), Some(lease)) = (ctx.leases.fence(pos), &call.lease) else {
            continue;
        };
        if call.outcome.is_ok() || !judged.insert((&row.node, &lease.run, lease.epoch)) {
            continue;
        }
        let Some(granted) = grant_of(&ctx.rows[..pos], &row.node, lease) else { continue };
        let since = ctx.rows[granted].at_ms.saturating_sub(ctx.cfg.ttl_ms.saturating_mul(LOOKBACK_TTLS));
        let first = ctx.rows[..granted].partition_point(|r| r.at_ms < since);
        if ctx.rows[first..=pos].iter().any(|r| excuses(r, &row.node, &lease.run)) {
            continue;
        }
        let renewed = ctx.rows[granted..pos]
            .iter()
            .rev()
            .find(|r| r.node == row.node && r.call().is_some_and(|c| c.surface == Surface::Renew && c.outcome.is_ok()))
            .map_or(granted, |r| r.index);
        // The grant and its last renew came before the call that met the lease expired.
        assert!(first <= granted && renewed < row.index, "row {}: a lease extended at row {renewed}", row.index);
        found.push(Violation::new(
            HEALTHY_HOLDER,
            format!(
                "{} let its lease {}@e{} on {} lapse with no fault: its {} at clock {clock} met the row expired at {expires_at} (last grant or renew at row {renewed}, ttl {} ms)",
                row.node,
                lease.owner,
                lease.epoch,
                lease.run,
                call.surface.as_str(),
                ctx.cfg.ttl_ms
            ),
            Some(row.index),
            Some(renewed),
        ));
    }
    found
}
