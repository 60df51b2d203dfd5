//! `delete-finished`: only a finished run is deleted (contracts E20). Retention deletes runs whose
//! meta is terminal and older than its keep (3.8), the client deletes a run it saw settled before
//! it recreates it, and an administrator's unleased purge is its own right (S6). So a leased delete
//! of a workload run (one whose accepted meta bound it to a workflow) is accepted only while the
//! run's latest accepted meta is terminal or its journal's last settle is: a run waiting for an
//! approval, or one still being driven, is never deleted under a lease. A retention that selects
//! by "not running" instead of "terminal", or a delete cascade aimed at the wrong run, shows here.
//!
//! State is kept per run since its last accepted delete (a recreated run starts over); the
//! zombies' own victim runs carry no workflow binding and are not judged. A terminal meta write or
//! `run_settle` append cut by its caller's death may have landed (a delete after it is exactly
//! what keeps the final store from telling): it finishes the run for a later delete until an
//! accepted write of its kind says otherwise, since a retention that read it landed may delete
//! the run.

use std::collections::BTreeMap;

use super::model::{holder, settle_status};
use super::{Context, Descriptor, Scope, Violation};
use crate::checker::Checker;
use crate::history::{Call, CallOutcome, Event, Payload, Row, Surface};
use fencesim_store::{RunId, RunStatus};

pub(super) const DELETE_FINISHED: Checker = Checker::DeleteFinished;
pub(super) const DELETE_FINISHED_CHECK: Descriptor = Descriptor {
    checker: DELETE_FINISHED,
    scope: Scope::Engine,
    invariant: "a workload run is deleted under a lease only while its latest meta or its journal's last settle is terminal (3.8, E20)",
    check: delete_finished,
};

/// What the accepted writes of one generation of a run say so far.
#[derive(Default)]
struct Generation {
    bound: bool,
    meta: Option<RunStatus>,
    settle: Option<RunStatus>,
    /// A cut terminal meta write since the last accepted one: it may have landed.
    maybe_meta: bool,
    /// A cut terminal `run_settle` that may have landed since the last accepted one.
    maybe_settle: bool,
}

impl Generation {
    /// An accepted call of this generation: a delete is judged, then starts the next generation.
    fn accepted(&mut self, row: &Row, call: &Call) -> Option<Violation> {
        match (call.surface, &call.payload) {
            (Surface::PutMeta, Payload::Meta(meta)) => {
                self.bound |= meta.extra.contains_key("workflow");
                self.meta = Some(meta.status);
                self.maybe_meta = false;
            }
            (Surface::Append, Payload::Entry(entry)) => {
                if let Some(status) = settle_status(entry) {
                    self.settle = Some(status);
                    self.maybe_settle = false;
                }
            }
            (Surface::Delete, _) => {
                let found = self.deleted(row, call);
                *self = Generation::default();
                return found;
            }
            _ => {}
        }
        None
    }

    /// A cut call of this generation.
    fn cut(&mut self, call: &Call) {
        match (call.surface, &call.payload) {
            (Surface::PutMeta, Payload::Meta(meta)) => self.maybe_meta |= meta.status.is_terminal(),
            (Surface::Append, Payload::Entry(entry)) => {
                self.maybe_settle |= settle_status(entry).is_some_and(RunStatus::is_terminal);
            }
            _ => {}
        }
    }

    /// An accepted delete of this generation: a violation when a leased delete removes a bound
    /// run that neither its meta nor its last settle had finished.
    fn deleted(&self, row: &Row, call: &Call) -> Option<Violation> {
        let finished = self.meta.is_some_and(RunStatus::is_terminal)
            || self.settle.is_some_and(RunStatus::is_terminal)
            || self.maybe_meta
            || self.maybe_settle;
        if call.lease.is_none() || !self.bound || finished {
            return None;
        }
        let shown = |s: Option<RunStatus>| s.map_or("none".to_owned(), |s| s.to_string());
        Some(Violation::new(
            DELETE_FINISHED,
            format!(
                "{} deleted run {} under {} while it was not finished (meta {}, last settle {})",
                row.node,
                call.run,
                holder(call),
                shown(self.meta),
                shown(self.settle)
            ),
            Some(row.index),
            None,
        ))
    }
}

pub(super) fn delete_finished(ctx: &Context) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut runs: BTreeMap<&RunId, Generation> = BTreeMap::new();
    for row in ctx.rows {
        let Event::Call(call) = &row.event else { continue };
        let run = runs.entry(&call.run).or_default();
        match &call.outcome {
            CallOutcome::Indeterminate => run.cut(call),
            outcome if outcome.is_ok() => found.extend(run.accepted(row, call)),
            _ => {}
        }
    }
    found
}
