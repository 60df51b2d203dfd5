//! `cancel-asked`: a run settles `cancelled` only when something asked for it (contracts 1.2,
//! 3.2, 3.8). Three things may: the run's client cancelling it (a [`Request::Cancel`] row), the
//! loss of the settling tenure's own lease (a renew of it that failed: any renew failure is lease
//! loss, E2; or a fenced call under it refused as stale or for another run: ownership lost, E4),
//! either of which cancels the segment while its lease may still be live to the store (a clock
//! that went back makes an expired row live again to its holder), and a stop request to the
//! settling node's worker (E8: stopping cancels every run it drives). Anything else that ends a
//! run `cancelled` overturns an outcome nobody asked for: a busy or failed body write taken for
//! lease loss, a cancel token fired by the wrong segment, a settle status mapped wrong.
//!
//! Only accepted `run_settle` appends are judged, each against the rows before it. The engine
//! soak does not log its processes' stop requests, so it leaves this checker out.

use super::model::{holder, settle_status};
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{CallOutcome, Event, Payload, Request, Surface};
use fencesim_store::RunStatus;

pub(super) const CANCEL_ASKED: Checker = Checker::CancelAsked;
pub(super) const CANCEL_ASKED_CHECK: Descriptor = Descriptor {
    checker: CANCEL_ASKED,
    scope: Scope::Engine,
    invariant: "a run settles cancelled only when its client cancelled it, a renew of the settling tenure's lease failed, or the settling node's worker was asked to stop (1.2, 3.2, 3.8)",
    check: cancel_asked,
};

pub(super) fn cancel_asked(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    for (pos, row) in ctx.rows.iter().enumerate() {
        let Some(call) = row.call().filter(|c| c.surface == Surface::Append && c.outcome.is_ok()) else { continue };
        let Payload::Entry(entry) = &call.payload else { continue };
        if settle_status(entry) != Some(RunStatus::Cancelled) {
            continue;
        }
        let asked = ctx.rows[..pos].iter().any(|earlier| match &earlier.event {
            Event::Request(Request::Cancel { run }) => *run == call.run,
            Event::Request(Request::Stop) => earlier.node == row.node,
            Event::Call(earlier_call) => {
                let lost = (earlier_call.surface == Surface::Renew && !earlier_call.outcome.is_ok())
                    || matches!(earlier_call.outcome, CallOutcome::Stale | CallOutcome::RunMismatch);
                lost && earlier.node == row.node && earlier_call.lease.is_some() && earlier_call.lease == call.lease
            }
            Event::Effect(_) | Event::Fault { .. } | Event::Outcome { .. } | Event::Repair { .. } | Event::Note(_) => {
                false
            }
        });
        if !asked {
            found.push(Violation::new(
                CANCEL_ASKED,
                format!(
                    "{} settled run {} cancelled (seq {}) under {}, but no cancel of the run, no loss of that lease \
                     and no stop of the node came before it",
                    row.node,
                    call.run,
                    entry.seq,
                    holder(call)
                ),
                Some(row.index),
                None,
            ));
        }
    }
    found
}
