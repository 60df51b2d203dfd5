//! `cancel-asked` (`requests.rs`): a run settles cancelled only when someone asked.

use fencesim_store::{RunId, RunStatus};

use super::fixtures::{CFG, H, assert_rows, assert_says, lease, only, running, settle};
use crate::check;
use crate::history::{CallOutcome, Disruption, Event, Payload, Request, Surface};

#[test]
fn cancel_asked_catches_a_cancel_nobody_asked_for() {
    let l = lease("r8", "w1.1", 1);
    let cancelled = |before: &dyn Fn(&mut H)| {
        let mut h = H::default();
        h.acquire("w1", &l, 0).mark("grant").put_meta("w1", &l, 10, RunStatus::Running, 1);
        before(&mut h);
        h.append("w1", &l, 20, settle(1, RunStatus::Cancelled, 1)).mark("settle");
        h.put_meta("w1", &l, 30, RunStatus::Cancelled, 1).lease_call("w1", Surface::Release, &l, 40);
        h
    };
    let h = cancelled(&|_| {});
    let v = only(&h, &h.store(), "cancel-asked");
    assert_says(&v, "w1 settled run r8 cancelled (seq 1) under w1.1@e1");
    assert_rows(&v, Some(h.at("settle")), None);
    // Each thing that may ask excuses it: the client's cancel, a stop of the settling node, a
    // failed renew of the settling lease.
    let client = cancelled(&|h| {
        h.push("client", Event::Request(Request::Cancel { run: RunId::new("r8") }));
    });
    let stopped = cancelled(&|h| {
        h.push("w1", Event::Request(Request::Stop));
    });
    let renew_failed = cancelled(&|h| {
        h.lease_call("w1", Surface::Renew, &l, 15).call_mut_last().outcome = CallOutcome::Busy;
    });
    // A fenced write of the settling lease refused stale (its holder's clock had passed the
    // expiry, then jumped back, so the settle still landed): ownership lost, which cancels.
    let refused = cancelled(&|h| {
        h.push(
            "world",
            Event::Fault { kind: Disruption::ClockJump, run: None, epoch: None, detail: "w1 -1490ms".into() },
        );
        h.call("w1", 1_500, Surface::Append, "r8", Some(&l), Payload::Entry(running(2)), CallOutcome::Stale);
    });
    for h in [client, stopped, renew_failed, refused] {
        assert_eq!(check(&h.rows, &h.store(), &CFG), Vec::new());
    }
    // A busy body write is not lease loss: a cancel on it is nobody's.
    let busy = cancelled(&|h| {
        h.call("w1", 15, Surface::Append, "r8", Some(&l), Payload::Entry(running(2)), CallOutcome::Busy);
    });
    only(&busy, &busy.store(), "cancel-asked");
    // Another run's cancel, another node's stop, a renew that went through excuse nothing.
    let elsewhere = cancelled(&|h| {
        h.push("client", Event::Request(Request::Cancel { run: RunId::new("r9") }));
        h.push("w2", Event::Request(Request::Stop));
        h.lease_call("w1", Surface::Renew, &l, 15);
    });
    only(&elsewhere, &elsewhere.store(), "cancel-asked");
}
