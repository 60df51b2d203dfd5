//! `healthy-holder` (`duties.rs`): a holder nothing disturbed never lets its lease lapse.

use super::fixtures::{CFG, H, assert_rows, assert_says, lease, only, running};
use crate::check;
use crate::history::{CallOutcome, Disruption, Event, Payload, Surface};

/// A holder nothing disturbed lets its lease lapse (no renew within the ttl, no other holder):
/// its refused write is a healthy-holder violation; a stall of its node, even one that began
/// before the grant, excuses it.
#[test]
fn healthy_holder_catches_a_lease_let_lapse_with_no_fault() {
    let l = lease("r7", "w1.1", 1);
    let lapsed = |before: &dyn Fn(&mut H)| {
        let mut h = H::default();
        before(&mut h);
        h.acquire("w1", &l, 0).mark("grant");
        h.call("w1", 1_500, Surface::Append, "r7", Some(&l), Payload::Entry(running(1)), CallOutcome::Stale);
        h.mark("refused");
        h
    };
    let h = lapsed(&|_| {});
    let v = only(&h, &h.store(), "healthy-holder");
    assert_says(&v, "w1 let its lease w1.1@e1 on r7 lapse with no fault: its append at clock 1500");
    assert_rows(&v, Some(h.at("refused")), Some(h.at("grant")));
    let stalled = lapsed(&|h| {
        h.push("w1", Event::Fault { kind: Disruption::Stall, run: None, epoch: None, detail: "w1 stalls".into() });
    });
    assert_eq!(check(&stalled.rows, &stalled.store(), &CFG), Vec::new());
    // A clock jump the world records on the holder's behalf (its detail names the node first)
    // excuses it too; one aimed at another node does not.
    let jumped = |node: &str| {
        let detail = format!("{node} +600ms at 1400ms");
        lapsed(&|h| {
            h.push(
                "world",
                Event::Fault { kind: Disruption::ClockJump, run: None, epoch: None, detail: detail.clone() },
            );
        })
    };
    assert_eq!(check(&jumped("w1").rows, &jumped("w1").store(), &CFG), Vec::new());
    let elsewhere = jumped("w2");
    only(&elsewhere, &elsewhere.store(), "healthy-holder");
}
