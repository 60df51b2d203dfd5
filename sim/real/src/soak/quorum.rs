//! Activity counters of a soak and the quorum that gates it (contracts 5.7, plus the real faults
//! the reference never had): a store-level storm stops once every floor is met, and a soak of
//! either level that ends below one fails, naming the counters that fell short.
//!
//! Every quorum waits for one landed mid-call stall, the only window in which a non-atomic fence
//! shows, and replacement writers owe one until it lands (`--owe-mid-call`). The engine soak's
//! report implements the same [`Counters`], so its quorum gates it the same way.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use fencesim_oracle::history::Surface;

use super::log::{Ev, EvKind};
use super::{RUN, SoakError, SoakResult};

/// The counter names, in report order. `busy_retries` is reported, never gated.
pub const COUNTERS: [&str; 12] = [
    "epochs",
    "stale_rejects",
    "appends",
    "meta_writes",
    "blob_puts",
    "blob_deletes",
    "victim_cycles",
    "live_cross_rejects",
    "sigkills_recovered",
    "sigstop_zombies",
    "mid_call_stalls",
    "busy_retries",
];

/// What the storm did so far.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Activity {
    #[serde(skip)]
    epochs_seen: BTreeSet<i64>,
    pub epochs: u64,
    pub stale_rejects: u64,
    pub appends: u64,
    pub meta_writes: u64,
    pub blob_puts: u64,
    pub blob_deletes: u64,
    pub victim_cycles: u64,
    pub live_cross_rejects: u64,
    pub sigkills_recovered: u64,
    pub sigstop_zombies: u64,
    /// Fenced calls that stalled past the ttl between their lease check and their mutation and
    /// then returned (not busy): the only window in which a non-atomic fence (D3) shows.
    pub mid_call_stalls: u64,
    pub busy_retries: u64,
}

/// Counters a quorum can gate, by name.
pub trait Counters {
    fn get(&self, name: &str) -> u64;
}

/// The engine-level soak's counters, in report order.
pub const ENGINE_COUNTERS: [&str; 5] = ["runs_settled", "segments", "crashes", "zombies", "paid_calls"];

impl Counters for super::engine::EngineSoakReport {
    fn get(&self, name: &str) -> u64 {
        u64::from(match name {
            "runs_settled" => self.runs_settled,
            "segments" => self.segments,
            "crashes" => self.crashes,
            "zombies" => self.zombies,
            "paid_calls" => self.paid_calls,
            // Names come from ENGINE_COUNTERS (a quorum's are checked against it as they parse):
            // any other is a programmer's slip, which must not read as a counter of 0.
            other => panic!("no engine soak counter is named {other:?}"),
        })
    }
}

impl Counters for Activity {
    fn get(&self, name: &str) -> u64 {
        Activity::get(self, name)
    }
}

impl Activity {
    /// Count one protocol event.
    pub fn observe(&mut self, ev: &Ev) {
        match ev.kind {
            EvKind::Grant if ev.target.as_deref() == Some(RUN) => {
                if let Some(epoch) = ev.epoch {
                    self.epochs_seen.insert(epoch);
                    self.epochs = self.epochs_seen.len() as u64;
                }
            }
            EvKind::StaleReject => self.stale_rejects += 1,
            EvKind::Accept => match ev.surface {
                Some(Surface::Append) => self.appends += 1,
                Some(Surface::PutMeta) => self.meta_writes += 1,
                Some(Surface::PutBlob) => self.blob_puts += 1,
                Some(Surface::DeleteBlob) => self.blob_deletes += 1,
                // The storm accepts no other write under a live lease by name: victim cycles
                // count whole, renews are not activity.
                Some(
                    Surface::Acquire
                    | Surface::Renew
                    | Surface::Release
                    | Surface::Delete
                    | Surface::Load
                    | Surface::GetMeta
                    | Surface::ListRuns
                    | Surface::GetBlob
                    | Surface::ListBlobs,
                )
                | None => {}
            },
            EvKind::Victim => self.victim_cycles += 1,
            EvKind::LiveCrossReject => self.live_cross_rejects += 1,
            EvKind::MidCallLanded => self.mid_call_stalls += 1,
            EvKind::Busy => self.busy_retries += 1,
            EvKind::Grant
            | EvKind::Start
            | EvKind::Booted
            | EvKind::Fatal
            | EvKind::Done
            | EvKind::MidCallStall
            | EvKind::Error
            | EvKind::FenceKick
            | EvKind::Renewed
            | EvKind::OrderReject
            | EvKind::SeqProbeAccepted
            | EvKind::StaleAccept
            | EvKind::Stall
            | EvKind::Released
            | EvKind::VictimAbandoned
            | EvKind::Tombstone => {}
        }
    }

    pub fn get(&self, name: &str) -> u64 {
        match name {
            "epochs" => self.epochs,
            "stale_rejects" => self.stale_rejects,
            "appends" => self.appends,
            "meta_writes" => self.meta_writes,
            "blob_puts" => self.blob_puts,
            "blob_deletes" => self.blob_deletes,
            "victim_cycles" => self.victim_cycles,
            "live_cross_rejects" => self.live_cross_rejects,
            "sigkills_recovered" => self.sigkills_recovered,
            "sigstop_zombies" => self.sigstop_zombies,
            "mid_call_stalls" => self.mid_call_stalls,
            "busy_retries" => self.busy_retries,
            // Names come from COUNTERS (a quorum's are checked against it as they parse): any
            // other is a programmer's slip, which must not read as a counter of 0.
            other => panic!("no soak counter is named {other:?}"),
        }
    }
}

/// Floors per counter (a counter absent from the map is not gated).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Quorum {
    pub name: String,
    pub floors: Vec<(String, u64)>,
    /// The least number of writers this quorum may run with.
    pub min_writers: usize,
}

/// The reference's floors (5.7) plus one recovered SIGKILL, one refused SIGSTOP zombie and one
/// landed mid-call stall.
const DEFAULT_FLOORS: [(&str, u64); 11] = [
    ("epochs", 4),
    ("stale_rejects", 16),
    ("appends", 8),
    ("meta_writes", 5),
    ("blob_puts", 5),
    ("blob_deletes", 1),
    ("victim_cycles", 1),
    ("live_cross_rejects", 1),
    ("sigkills_recovered", 1),
    ("sigstop_zombies", 1),
    ("mid_call_stalls", 1),
];

impl Quorum {
    pub fn default_floors() -> Self {
        Self {
            name: "default".into(),
            floors: DEFAULT_FLOORS.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            min_writers: 1,
        }
    }

    /// What a release is gated on: 5 writers and the release floors, the default for the rest.
    pub fn release() -> Self {
        let mut q = Self::default_floors();
        q.name = "release".into();
        q.min_writers = 5;
        for (k, v) in [
            ("epochs", 500),
            ("stale_rejects", 5000),
            ("appends", 2000),
            ("victim_cycles", 200),
            ("sigkills_recovered", 100),
            ("sigstop_zombies", 100),
        ] {
            q.set(k, v);
        }
        q
    }

    fn set(&mut self, key: &str, value: u64) {
        match self.floors.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.floors.push((key.to_owned(), value)),
        }
    }

    /// The engine-level soak's floors: `default` (a few seconds of workers, one crash and one
    /// zombie at least) or `release`.
    pub fn engine(name: &str) -> Option<Self> {
        let floors: &[(&str, u64)] = match name {
            "default" => &[("runs_settled", 3), ("segments", 8), ("crashes", 1), ("zombies", 1), ("paid_calls", 4)],
            "release" => {
                &[("runs_settled", 150), ("segments", 300), ("crashes", 20), ("zombies", 20), ("paid_calls", 300)]
            }
            _ => return None,
        };
        let floors = floors.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
        Some(Self { name: name.to_owned(), floors, min_writers: if name == "release" { 5 } else { 1 } })
    }

    /// [`Quorum::parse`] for the engine-level soak's counters.
    pub fn parse_engine(text: &str) -> SoakResult<Self> {
        match Self::engine(text) {
            Some(q) => Ok(q),
            None => Self::parse_terms(text, &ENGINE_COUNTERS),
        }
    }

    /// `default`, `release`, or `k=v,...` (floors over nothing: only the named counters gate).
    pub fn parse(text: &str) -> SoakResult<Self> {
        match text {
            "default" => Ok(Self::default_floors()),
            "release" => Ok(Self::release()),
            _ => Self::parse_terms(text, &COUNTERS[..COUNTERS.len() - 1]),
        }
    }

    /// `k=v,...` over the counters `valid`.
    fn parse_terms(text: &str, valid: &[&str]) -> SoakResult<Self> {
        let mut q = Self { name: text.to_owned(), floors: Vec::new(), min_writers: 1 };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| SoakError::Usage(format!("quorum term '{part}' is not key=value")))?;
            let key = key.trim();
            if !valid.contains(&key) {
                return Err(SoakError::Usage(format!("unknown quorum counter '{key}' (valid: {})", valid.join(", "))));
            }
            let value: u64 = value
                .trim()
                .parse()
                .map_err(|_| SoakError::Usage(format!("quorum {key}: '{value}' is not a count")))?;
            q.set(key, value);
        }
        if q.floors.is_empty() {
            return Err(SoakError::Usage(format!("empty quorum '{text}' (use default, release or k=v,...)")));
        }
        Ok(q)
    }

    /// Refuse a quorum no storm of this shape can honestly pass: one that gates nothing (every
    /// floor 0: a storm of no history would pass it), one gating refused SIGSTOP zombies with a
    /// single writer (a zombie is refused only after another writer took its run over), or, at
    /// the engine level, more settled runs than the client submits.
    pub fn check_reachable(&self, writers: usize, runs: Option<u32>) -> SoakResult<()> {
        let usage = |why: String| Err(SoakError::Usage(format!("quorum {}: {why}", self.name)));
        if self.floors.iter().all(|(_, floor)| *floor == 0) {
            return usage("every floor is 0, so a storm that did nothing would pass it".into());
        }
        let least = self.min_writers.max(if self.floor("sigstop_zombies") > 0 { 2 } else { 1 });
        if writers < least {
            return usage(format!(
                "needs at least {least} writers (a SIGSTOP zombie is refused only after another writer takes its \
                 run over), got {writers}"
            ));
        }
        if let Some(runs) = runs
            && self.floor("runs_settled") > u64::from(runs)
        {
            return usage(format!("runs_settled={} can never be met by --runs {runs}", self.floor("runs_settled")));
        }
        Ok(())
    }

    fn floor(&self, counter: &str) -> u64 {
        self.floors.iter().find(|(k, _)| k == counter).map_or(0, |(_, v)| *v)
    }

    /// The least share of its floor met (at most 1) over the gated counters not in `except`; 1
    /// when there are none. The referee paces its gated faults by it.
    pub fn progress_except(&self, activity: &impl Counters, except: &[&str]) -> f64 {
        let progress = self
            .floors
            .iter()
            .filter(|(k, v)| *v > 0 && !except.contains(&k.as_str()))
            .map(|(k, v)| (activity.get(k) as f64 / *v as f64).min(1.0))
            .fold(1.0, f64::min);
        // A share: the referee's pacing compares it with shares of floors.
        assert!((0.0..=1.0).contains(&progress), "a quorum progress of {progress}");
        progress
    }

    /// Whether the gated `counter`, counting `in_flight` more on their way, is short of its floor
    /// and of the share `others + lead` of it (the others' progress, a little ahead).
    pub fn lags(&self, activity: &impl Counters, counter: &str, in_flight: u64, others: f64, lead: f64) -> bool {
        let floor = self.floor(counter);
        let have = activity.get(counter).saturating_add(in_flight);
        floor > 0 && have < floor && (have as f64) < floor as f64 * (others + lead).min(1.0)
    }

    /// Whether the quorum gates `counter` and its floor is met.
    pub fn floor_met(&self, activity: &impl Counters, counter: &str) -> bool {
        let floor = self.floor(counter);
        floor > 0 && activity.get(counter) >= floor
    }

    pub fn met(&self, activity: &impl Counters) -> bool {
        self.short(activity).is_empty()
    }

    /// The counters below their floor: (name, have, need).
    pub fn short(&self, activity: &impl Counters) -> Vec<(String, u64, u64)> {
        self.floors
            .iter()
            .filter(|(k, v)| activity.get(k) < *v)
            .map(|(k, v)| (k.clone(), activity.get(k), *v))
            .collect()
    }
}

impl fmt::Display for Quorum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let floors: Vec<String> = self.floors.iter().map(|(k, v)| format!("{k}={v}")).collect();
        write!(f, "{} ({})", self.name, floors.join(","))
    }
}

/// `epochs 5/4 stale_rejects 20/16 ...` for the progress line and reports.
pub fn progress(quorum: &Quorum, activity: &Activity) -> String {
    let mut parts: Vec<String> = quorum.floors.iter().map(|(k, v)| format!("{k} {}/{v}", activity.get(k))).collect();
    parts.push(format!("busy {}", activity.busy_retries));
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_counter_is_read_and_a_misspelt_one_stops_at_once() {
        let activity = Activity { blob_puts: 7, ..Activity::default() };
        for name in COUNTERS {
            let _ = activity.get(name);
        }
        assert_eq!(activity.get("blob_puts"), 7);
        let slip = std::panic::catch_unwind(|| Activity::default().get("blob_put"));
        assert!(slip.is_err(), "a misspelt counter must not read as 0");
    }

    #[test]
    fn accepted_writes_count_by_the_oracle_surface() {
        let mut activity = Activity::default();
        for surface in [Surface::Append, Surface::PutMeta, Surface::PutBlob, Surface::DeleteBlob, Surface::Renew] {
            activity.observe(&Ev { kind: EvKind::Accept, surface: Some(surface), ..Ev::default() });
        }
        assert_eq!(
            (activity.appends, activity.meta_writes, activity.blob_puts, activity.blob_deletes),
            (1, 1, 1, 1),
            "one per write surface, none for a renew"
        );
    }

    #[test]
    fn quorums_parse_and_refuse() {
        assert_eq!(Quorum::parse("default").unwrap().floors.len(), 11);
        let release = Quorum::parse("release").unwrap();
        assert_eq!(release.min_writers, 5);
        assert!(release.floors.contains(&("sigstop_zombies".into(), 100)));
        assert!(release.floors.contains(&("meta_writes".into(), 5)));
        let custom = Quorum::parse("epochs=2,appends=3").unwrap();
        assert_eq!(custom.floors, vec![("epochs".into(), 2), ("appends".into(), 3)]);
        assert!(Quorum::parse("bogus=1").unwrap_err().to_string().contains("bogus"));
        assert!(Quorum::parse("epochs=x").unwrap_err().to_string().contains("epochs"));
        let mut a = Activity::default();
        assert_eq!(custom.short(&a).len(), 2);
        a.epochs = 2;
        a.appends = 3;
        assert!(custom.met(&a));
    }

    /// The referee's pacing of gated faults: behind while short of the others' share (plus the
    /// lead) counting those in flight, never once met or when not gated.
    #[test]
    fn a_gated_fault_lags_the_other_floors_until_it_keeps_pace() {
        let release = Quorum::release();
        let faults = ["sigkills_recovered", "sigstop_zombies"];
        let mut a = Activity::default();
        assert_eq!(release.progress_except(&a, &faults), 0.0);
        assert!(release.lags(&a, "sigkills_recovered", 0, 0.0, 0.1), "0 of 100 is behind 10%");
        assert!(!release.lags(&a, "sigkills_recovered", 10, 0.0, 0.1), "10 in flight keep pace");
        (a.epochs, a.stale_rejects, a.appends, a.victim_cycles) = (250, 2500, 1000, 100);
        (a.meta_writes, a.blob_puts, a.blob_deletes, a.live_cross_rejects, a.mid_call_stalls) = (5, 5, 1, 1, 1);
        assert_eq!(release.progress_except(&a, &faults), 0.5);
        a.sigkills_recovered = 59;
        assert!(release.lags(&a, "sigkills_recovered", 0, 0.5, 0.1));
        assert!(!release.lags(&a, "sigkills_recovered", 1, 0.5, 0.1));
        a.sigkills_recovered = 100;
        assert!(!release.lags(&a, "sigkills_recovered", 0, 1.0, 0.1), "met");
        assert!(release.floor_met(&a, "sigkills_recovered") && !release.floor_met(&a, "sigstop_zombies"));
        let custom = Quorum::parse("epochs=3").unwrap();
        assert!(!custom.lags(&Activity::default(), "sigkills_recovered", 0, 0.0, 0.1), "not gated");
        assert!(!custom.floor_met(&a, "sigkills_recovered"));
    }

    /// Quorums no storm of the shape can pass are refused before anything starts.
    #[test]
    fn quorums_that_test_nothing_or_cannot_be_met_are_refused() {
        let refused = |q: &Quorum, writers, runs| q.check_reachable(writers, runs).unwrap_err().to_string();
        assert!(refused(&Quorum::parse("epochs=0").unwrap(), 3, None).contains("every floor is 0"));
        assert!(refused(&Quorum::parse("epochs=0,appends=0").unwrap(), 3, None).contains("every floor is 0"));
        assert!(refused(&Quorum::default_floors(), 1, None).contains("at least 2 writers"));
        assert!(Quorum::default_floors().check_reachable(2, None).is_ok());
        assert!(Quorum::parse("epochs=3").unwrap().check_reachable(1, None).is_ok());
        assert!(refused(&Quorum::release(), 4, None).contains("at least 5 writers"));
        let engine = Quorum::engine("default").unwrap();
        assert!(refused(&engine, 3, Some(1)).contains("runs_settled=3 can never be met by --runs 1"));
        assert!(engine.check_reachable(3, Some(3)).is_ok());
    }
}
