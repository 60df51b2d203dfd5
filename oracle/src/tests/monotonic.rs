//! `observables-monotonic` (`monotonic.rs`): segments, identity and a final settle never go back
//! within a generation.

use fencesim_store::{RunId, RunMeta, RunStatus};
use serde_json::json;

use super::fixtures::{CFG, a3, assert_rows, assert_says, clean, failing, lease, only};
use crate::check;
use crate::history::{CallOutcome, Payload, Surface};

/// A meta write of fewer segments than one before it: caught at the row that went back, though
/// a later write restores the count and the end state looks right.
#[test]
fn observables_monotonic_catches_segments_going_back_and_coming_back() {
    let mut h = clean();
    let back = h.insert_after("meta-running-e3", |x| {
        x.put_meta("w1", &a3(), 3025, RunStatus::Running, 2);
        x.put_meta("w1", &a3(), 3026, RunStatus::Running, 3);
    });
    let v = only(&h, &h.store(), "observables-monotonic");
    assert_says(&v, "run r1: w1.2@e3 wrote segments 2 after a meta of segments 3");
    assert_rows(&v, Some(back), Some(h.at("meta-running-e3")));
}

/// A run whose journal settled `ok` rewritten `running` with no new segment (a repair that
/// reopens a finished run), then put back: caught at the reopening write.
#[test]
fn observables_monotonic_catches_a_finished_run_reopened_without_a_new_segment() {
    let mut h = clean();
    let reopened = h.insert_after("meta-ok-e3", |x| {
        x.put_meta("w1", &a3(), 3041, RunStatus::Running, 3);
        x.put_meta("w1", &a3(), 3042, RunStatus::Ok, 3);
    });
    let v = only(&h, &h.store(), "observables-monotonic");
    assert_says(&v, "meta 'running' (segments 3) reopens a run whose journal settled 'ok'");
    assert_rows(&v, Some(reopened), Some(h.at("settle-e3")));
    // A new segment's boot over the settled journal is the one move back the contracts allow (a
    // client reattaching; a worker's sweep would not resume a settled run, `worker-candidacy`).
    let mut h = clean();
    let e4 = lease("r1", "client.1", 4);
    h.insert_after("outcome-e3", |x| {
        x.acquire("client", &e4, 3100)
            .put_meta("client", &e4, 3101, RunStatus::Running, 4)
            .put_meta("client", &e4, 3102, RunStatus::Ok, 4)
            .lease_call("client", Surface::Release, &e4, 3103);
    });
    assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new());
}

/// A terminal meta of another status than the journal's final settle, written and put back.
#[test]
fn observables_monotonic_catches_a_settled_outcome_overturned() {
    let mut h = clean();
    let overturned = h.insert_after("meta-ok-e3", |x| {
        x.put_meta("w1", &a3(), 3041, RunStatus::Cancelled, 3);
        x.put_meta("w1", &a3(), 3042, RunStatus::Ok, 3);
    });
    let found = failing(&h, &h.store(), &["meta-not-ahead", "observables-monotonic"]);
    assert!(found.iter().any(|v| v.row == Some(overturned)), "{found:#?}");
    let v = check(&h.rows, &h.store(), &CFG).into_iter().find(|v| v.checker.name() == "observables-monotonic").unwrap();
    assert_says(&v, "meta 'cancelled' overturns the journal's final run_settle 'ok'");
}

/// A run's genesis or workflow binding changing within a generation (no delete between).
#[test]
fn observables_monotonic_catches_a_generation_that_changes_identity() {
    for (field, value) in [("genesis", "g-2"), ("workflow", "limit")] {
        let mut h = clean();
        let meta = |genesis: &str, workflow: &str| {
            let mut m = RunMeta::new(RunId::new("r1"), RunStatus::Running).with_segments(3);
            m.genesis = Some(genesis.into());
            m.extra.insert("workflow".into(), json!(workflow));
            Payload::Meta(m)
        };
        let changed = if field == "genesis" { meta(value, "happy") } else { meta("g-1", value) };
        let first = h.insert_after("meta-running-e3", |x| {
            x.call("w1", 3021, Surface::PutMeta, "r1", Some(&a3()), meta("g-1", "happy"), CallOutcome::Ok);
        });
        let second = h.insert_after("meta-running-e3", |x| {
            x.call("w1", 3022, Surface::PutMeta, "r1", Some(&a3()), changed, CallOutcome::Ok);
        });
        // `second` went in before `first`: the changed write comes first, the original after it.
        let v = only(&h, &h.store(), "observables-monotonic");
        assert!(v.explanation.contains(field), "{field}: {v:?}");
        assert_rows(&v, Some(first + 1), Some(second));
    }
}
