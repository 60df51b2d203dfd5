//! The effects ledger: every paid model call and every tool execution, recorded outside the store
//! and keyed by run and running seq, so a test can count how often each dispatch was paid. It is
//! the "provider bill" the engine's at-least-once promises are about.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use fencesim_store::{RunId, Seq};

/// Calls and tools paid for one dispatch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Paid {
    pub calls: u32,
    pub tools: u32,
}

/// A shared ledger; clones record into the same book.
#[derive(Clone, Debug, Default)]
pub struct Ledger(Rc<RefCell<BTreeMap<(RunId, Seq), Paid>>>);

impl Ledger {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn pay_call(&self, run: &RunId, running: Seq) {
        self.0.borrow_mut().entry((run.clone(), running)).or_default().calls += 1;
    }

    pub fn pay_tool(&self, run: &RunId, running: Seq) {
        self.0.borrow_mut().entry((run.clone(), running)).or_default().tools += 1;
    }

    /// What one dispatch was paid.
    pub fn paid(&self, run: &RunId, running: Seq) -> Paid {
        self.0.borrow().get(&(run.clone(), running)).copied().unwrap_or_default()
    }

    /// Everything paid for a run.
    pub fn run_total(&self, run: &RunId) -> Paid {
        self.0
            .borrow()
            .iter()
            .filter(|((r, _), _)| r == run)
            .fold(Paid::default(), |acc, (_, p)| Paid { calls: acc.calls + p.calls, tools: acc.tools + p.tools })
    }

    /// Every dispatch with what it was paid, ordered by run and running seq.
    pub fn entries(&self) -> Vec<((RunId, Seq), Paid)> {
        self.0.borrow().iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}
