//! Crashes inside and between a node's store calls: the [`Cut`] a world gives the connection of
//! each node a crash aims at with `sites = ["mid-call"]` or `["after-call"]`. Mid-call, the
//! node dies between two statements of a write (its open transaction rolls back; what an earlier
//! statement committed stays); after-call, it dies as a write returns, before it sees the answer,
//! which lands between any two steps of a cascade (delete, prune, retention, repair). Each draws
//! from the node's own `cuts/<label>` stream, made only when a crash aims at the store, so no
//! other scenario's draws move.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use fencesim_store::{Op, RunId};

use super::Shared;
use crate::history::{Cut, Disruption, Event, lock};
use crate::rng::Stream;
use crate::scenario::Span;
use crate::scenario::plan::Applied;
use crate::site::SiteClass;

/// One node incarnation's cut points, drawn at the crash's rate.
pub(super) struct StoreCut {
    shared: Arc<Shared>,
    name: String,
    label: String,
    crash: Applied,
    rng: Mutex<Stream>,
}

impl StoreCut {
    /// The cut for node `name`'s incarnation `label`, when `crash` aims inside the store.
    pub(super) fn aimed(shared: &Arc<Shared>, name: &str, label: &str, crash: &Applied) -> Option<Arc<dyn Cut>> {
        crash.spec.sites.iter().any(|s| SiteClass::ALL.iter().any(|c| c.in_store() && s.covers(*c))).then(|| {
            Arc::new(StoreCut {
                shared: shared.clone(),
                name: name.to_owned(),
                label: label.to_owned(),
                crash: crash.clone(),
                rng: Mutex::new(shared.root.fork(&format!("cuts/{label}"))),
            }) as Arc<dyn Cut>
        })
    }
}

impl Cut for StoreCut {
    fn fires(&self, at: SiteClass, op: Op, run: &RunId) -> bool {
        if self.shared.quiet.load(Ordering::SeqCst) || !self.crash.spec.sites.iter().any(|s| s.covers(at)) {
            return false;
        }
        let after = {
            let mut rng = lock(&self.rng);
            if !rng.chance(self.crash.rate) {
                return false;
            }
            let Span(low, high) = self.crash.spec.restart_ms;
            u32::try_from(rng.range(u64::from(low), u64::from(high))).unwrap_or(0)
        };
        let label = &self.label;
        let detail = match at {
            SiteClass::MidCall => format!("{label} killed inside {}, restarts in {after}ms at {at}", op.as_str()),
            _ => format!("{label} killed as {} returned, restarts in {after}ms at {at}", op.as_str()),
        };
        let event = Event::Fault { kind: Disruption::Crash, run: Some(run.clone()), epoch: None, detail };
        self.shared.history.push(label, event);
        self.shared.crash(&self.name, after);
        true
    }
}
