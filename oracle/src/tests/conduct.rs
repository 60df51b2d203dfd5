//! The engine's conduct (`conduct.rs`): `dispatch-identity`, `silent-replay`, `renew-loss` and
//! `justified-repair`.

use std::collections::BTreeSet;

use fencesim_store::{RunId, RunStatus};

use super::fixtures::{
    CFG, assert_rows, assert_says, b2, boot, clean, lease, names, only, running, settle, suspension, terminal,
    violations_of,
};
use crate::check;
use crate::history::{CallOutcome, Disruption, EffectKind, Event, Payload, Surface};

#[test]
fn dispatch_identity_catches_a_redispatch_under_a_new_running_entry() {
    // w4 crashes mid-dispatch of `ask` under e1; w5 resumes under e2 but opens a second running
    // entry for the same step instead of reusing the dangling one.
    let mut h = clean();
    let (e1, e2) = (lease("r7", "w4", 1), lease("r7", "w5", 2));
    let at = h.insert_after("outcome-e3", |x| {
        boot(x, "w4", &e1, 4000, 1);
        x.append("w4", &e1, 4010, running(1)).outcome("w4", "r7", "err:crashed");
        boot(x, "w5", &e2, 6000, 2);
        x.append("w5", &e2, 6010, running(2))
            .append("w5", &e2, 6020, terminal(3, 2))
            .append("w5", &e2, 6030, settle(4, RunStatus::Ok, 2))
            .put_meta("w5", &e2, 6040, RunStatus::Ok, 2)
            .lease_call("w5", Surface::Release, &e2, 6050)
            .outcome("w5", "r7", "ok");
    });
    let v = violations_of(&h, "dispatch-identity");
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_says(&v[0], "while the same step's dispatch ask at seq=1 was still open");
    assert_rows(&v[0], Some(at + 6), Some(at + 2));
    assert_eq!(names(&check(&h.rows, &h.store(), &CFG)), ["dispatch-identity"].into_iter().collect());
}

#[test]
fn dispatch_identity_catches_a_terminal_of_no_open_dispatch() {
    let mut h = clean();
    h.insert_after("terminal-1", |x| {
        x.append("w2", &b2(), 1231, terminal(3, 1));
    });
    // Seqs shift: the rest of r1's journal is renumbered by nobody, so only the checkers that
    // read dispatches are asked here.
    let v = violations_of(&h, "dispatch-identity");
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_says(&v[0], "closing running seq=1, but that dispatch was already closed");
}

#[test]
fn silent_replay_catches_a_settle_appended_to_a_final_journal() {
    // r1 settled ok under e3; a later tenure (the client reattaching) that only replays it appends
    // another settle.
    let mut h = clean();
    let e4 = lease("r1", "w2.9", 4);
    let at = h.insert_after("outcome-e3", |x| {
        x.acquire("client", &e4, 5000)
            .put_meta("client", &e4, 5001, RunStatus::Running, 4)
            .append("client", &e4, 5002, settle(7, RunStatus::Ok, 4))
            .put_meta("client", &e4, 5003, RunStatus::Ok, 4)
            .lease_call("client", Surface::Release, &e4, 5004)
            .outcome("client", "r1", "ok");
    });
    let v = only(&h, &h.store(), "silent-replay");
    assert_says(&v, "whose journal was final: its run_settle at row");
    assert_rows(&v, Some(at + 2), Some(h.at("settle-e3")));
}

#[test]
fn silent_replay_catches_a_repeated_settle_with_nothing_new() {
    // A suspended run swept again: the replay finds nothing new but settles `suspended` again.
    let mut h = clean();
    let (e1, e2) = (lease("r8", "w4", 1), lease("r8", "w5", 2));
    h.insert_after("outcome-e3", |x| {
        boot(x, "w4", &e1, 4000, 1);
        x.append("w4", &e1, 4010, suspension(1))
            .append("w4", &e1, 4020, settle(2, RunStatus::Suspended, 1))
            .put_meta("w4", &e1, 4030, RunStatus::Suspended, 1)
            .lease_call("w4", Surface::Release, &e1, 4040)
            .outcome("w4", "r8", "suspended");
        boot(x, "w5", &e2, 5000, 2);
        x.append("w5", &e2, 5010, settle(3, RunStatus::Suspended, 2))
            .put_meta("w5", &e2, 5020, RunStatus::Suspended, 2)
            .lease_call("w5", Surface::Release, &e2, 5030)
            .outcome("w5", "r8", "suspended");
    });
    let v = only(&h, &h.store(), "silent-replay");
    assert_says(&v, "with nothing appended since its last run_settle");
}

#[test]
fn renew_loss_catches_a_payment_after_a_failed_renew() {
    // w2's renew under e2 fails busy (lease loss, 9.2); it pays another dispatch's turn anyway.
    let mut h = clean();
    let renew = h.insert_after("terminal-1", |x| {
        x.lease_call("w2", Surface::Renew, &b2(), 1400);
        x.call_mut_last().outcome = CallOutcome::Busy;
        x.effect("w2", EffectKind::Call, &b2(), 3, 1);
    });
    let v = only(&h, &h.store(), "renew-loss");
    assert_says(&v, "w2 paid call turn 1 of r1 dispatch running=3 under e2 after its renew of that lease failed");
    assert_rows(&v, Some(renew + 1), Some(renew));
}

#[test]
fn renew_loss_ignores_a_failed_renew_of_someone_elses_lease() {
    // A zombie renewing a lease it was never granted loses nothing of its own.
    let mut h = clean();
    h.insert_after("outcome-e3", |x| {
        x.call("zombie", 5000, Surface::Renew, "r1", Some(&b2()), Payload::None, CallOutcome::Stale);
        x.effect("zombie", EffectKind::Call, &b2(), 9, 1);
    });
    assert!(violations_of(&h, "renew-loss").is_empty());
}

#[test]
fn justified_repair_catches_a_repair_of_a_run_nothing_touched() {
    let mut h = clean();
    h.insert_after("outcome-e3", |x| {
        x.push("operator.1", Event::Repair { run: RunId::new("r1"), status: RunStatus::Ok });
    });
    // r1 was touched (w1 crashed under e1): its repair is justified.
    assert!(violations_of(&h, "justified-repair").is_empty(), "{:#?}", violations_of(&h, "justified-repair"));
    // r2's second generation ran cleanly: every tenure released, nothing failed.
    h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
    let v = only(&h, &h.store(), "justified-repair");
    assert_says(&v, "operator.1 repaired r2's meta to ok, but nothing interrupted r2");
    assert_eq!(v.row, Some(h.rows.len() - 1));
}

/// A mistaken resume (the `branches` scenario's operator) is refused before any write: its failed
/// outcome touches nothing, so it justifies no repair; any other failed segment does.
#[test]
fn a_binding_refusal_justifies_no_repair() {
    for (result, justified) in [("err:binding", false), ("err:store", true)] {
        let mut h = clean();
        h.outcome("operator.1", "r2", result);
        h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
        let v = violations_of(&h, "justified-repair");
        assert_eq!(v.is_empty(), justified, "{result}: {v:#?}");
    }
}

#[test]
fn a_write_the_store_failed_outright_justifies_a_repair_and_a_failed_read_does_not() {
    // Swarm seed 8598: a segment's terminal meta write failed with an injected storage error and
    // its node crashed (elsewhere) before the sweep reported the failed segment.
    for (surface, outcome, justified) in [
        (Surface::PutMeta, CallOutcome::Injected, true),
        (Surface::Append, CallOutcome::Error("storage"), true),
        (Surface::GetMeta, CallOutcome::Injected, false),
        (Surface::PutMeta, CallOutcome::Stale, false),
    ] {
        let mut h = clean();
        h.call("w9.1", 9000, surface, "r2", Some(&b2()), Payload::None, outcome.clone());
        h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
        let v = violations_of(&h, "justified-repair");
        assert_eq!(v.is_empty(), justified, "{surface:?} {outcome}: {v:#?}");
    }
}

#[test]
fn a_fault_row_justifies_a_repair_only_when_it_interrupts_the_run() {
    for kind in Disruption::ALL {
        let mut h = clean();
        let fault = Event::Fault { kind, run: Some(RunId::new("r2")), epoch: None, detail: "x".into() };
        h.push("w9.1", fault);
        h.push("operator.1", Event::Repair { run: RunId::new("r2"), status: RunStatus::Ok });
        let v = violations_of(&h, "justified-repair");
        assert_eq!(v.is_empty(), kind.interrupts(), "{kind}: {v:#?}");
    }
    let interrupting: Vec<&str> = Disruption::ALL.iter().filter(|k| k.interrupts()).map(|k| k.as_str()).collect();
    assert_eq!(interrupting, ["crash", "stall", "takeover"]);
    let names: BTreeSet<String> = Disruption::ALL.iter().map(ToString::to_string).collect();
    assert_eq!(names.len(), Disruption::ALL.len(), "names are distinct");
    assert!(Disruption::ALL.iter().all(|k| k.to_string() == k.as_str()));
}
