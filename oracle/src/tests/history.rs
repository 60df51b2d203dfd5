//! The history's own answers (`history.rs`): every disruption listed, the fingerprint's hasher,
//! and the grant and extension indexes kept as rows are pushed.

use fencesim_store::{Epoch, Lease, RunId};
use serde_json::json;

use super::fixtures::{a1, a3, b2, clean, lease, role_of};
use crate::history::{Call, CallOutcome, Disruption, Event, Mix, Payload, Surface};

/// `Disruption::ALL` lists every variant once, in declaration order: the match is exhaustive, so a
/// new variant does not compile until it has a position here (and `ALL`'s length, the number of
/// arms, is checked with it).
#[test]
fn disruption_all_lists_every_variant() {
    let position = |d: Disruption| match d {
        Disruption::Crash => 0,
        Disruption::Stall => 1,
        Disruption::Takeover => 2,
        Disruption::Zombie => 3,
        Disruption::Purge => 4,
        Disruption::ClockJump => 5,
        Disruption::Restart => 6,
    };
    assert_eq!(Disruption::ALL.len(), 7);
    assert!(Disruption::ALL.iter().enumerate().all(|(i, d)| position(*d) == i));
}

/// The hasher behind a world's fingerprint tells apart what a fingerprint must: a row changed in
/// any one field (the payload included), rows in another order, the same text split otherwise.
#[test]
fn mix_tells_apart_what_a_fingerprint_must() {
    use std::hash::{Hash, Hasher};
    fn mix(value: &impl Hash) -> u64 {
        let mut h = Mix::default();
        value.hash(&mut h);
        h.finish()
    }
    let h = clean();
    let base = mix(&h.rows);
    assert_eq!(mix(&h.rows), base, "the same rows, the same digest");
    let mut reordered = h.rows.clone();
    reordered.swap(1, 2);
    assert_ne!(mix(&reordered), base);
    for i in 0..h.rows.len() {
        let mut rows = h.rows.clone();
        rows[i].at_ms += 1;
        assert_ne!(mix(&rows), base, "row {i}'s time");
        let mut rows = h.rows.clone();
        match &mut rows[i].event {
            Event::Call(call) => match &mut call.payload {
                Payload::Entry(entry) => entry.extra.insert("x".into(), json!(1)).map_or((), drop),
                Payload::Meta(meta) => meta.segments += 1,
                Payload::Blob(bytes) => bytes.push(0),
                Payload::None => call.clock_ms += 1,
            },
            _ => rows[i].node.push('x'),
        }
        assert_ne!(mix(&rows), base, "row {i}'s content");
    }
    assert_ne!(mix(&("ab", "c")), mix(&("a", "bc")));
    assert_ne!(mix(&"a run id longer than a word"), mix(&"A run id longer than a word"));
    assert_ne!(mix(&"a"), mix(&"a\0"));
}

/// `grants` answers from a list kept as rows are pushed: granted acquires only, in grant order,
/// and nothing once the rows are taken.
#[test]
fn grants_are_the_accepted_acquires_in_order() {
    use crate::history::History;
    let history = History::new(|| 0, role_of);
    let call = |surface, lease: Option<Lease>, outcome| Call {
        clock_ms: 0,
        lease,
        owner: None,
        counter: 0,
        surface,
        run: RunId::new("r1"),
        blob_ref: None,
        payload: Payload::None,
        outcome,
        read: None,
    };
    history.push_call("w1", call(Surface::Acquire, Some(a1()), CallOutcome::Ok));
    history.push_call("w2", call(Surface::Acquire, None, CallOutcome::HeldBy { owner: "w1".into(), epoch: Epoch(1) }));
    history.push_call("w1", call(Surface::Renew, Some(a1()), CallOutcome::Ok));
    history.push_call("w2", call(Surface::Acquire, Some(b2()), CallOutcome::Ok));
    history.push_call("w3", call(Surface::Acquire, Some(a3()), CallOutcome::Indeterminate));
    assert_eq!(history.grants(), vec![a1(), b2()]);
    assert_eq!(history.take_rows().len(), 5);
    assert_eq!(history.grants(), Vec::<Lease>::new());
}

/// `last_extension` and `latest_grant`, kept as rows are pushed, answer what a scan of the rows
/// answered: the caller's clock at a lease's last accepted acquire or renew, a (run, owner)'s
/// latest grant; a silenced node's rows count for nothing, and nothing once the rows are taken.
#[test]
fn last_extension_and_latest_grant_answer_what_a_scan_of_the_rows_does() {
    use crate::history::History;
    let history = History::new(|| 0, role_of);
    let call = |clock_ms, surface, lease: Lease, outcome| Call {
        clock_ms,
        lease: Some(lease.clone()),
        owner: None,
        counter: 0,
        surface,
        run: lease.run,
        blob_ref: None,
        payload: Payload::None,
        outcome,
        read: None,
    };
    let other = lease("r2", "w1.1", 1);
    history.push_call("w1", call(10, Surface::Acquire, a1(), CallOutcome::Ok));
    history.push_call("w1", call(20, Surface::Acquire, other.clone(), CallOutcome::Ok));
    history.push_call("w1", call(30, Surface::Renew, a1(), CallOutcome::Ok));
    history.push_call("w1", call(40, Surface::Renew, a1(), CallOutcome::Stale));
    history.push_call("w1", call(45, Surface::Append, a1(), CallOutcome::Ok));
    history.push_call("w2", call(50, Surface::Acquire, b2(), CallOutcome::Ok));
    history.push_call("w2", call(55, Surface::Renew, b2(), CallOutcome::Indeterminate));
    history.silence("w9");
    history.push_call("w9", call(60, Surface::Renew, b2(), CallOutcome::Ok));
    history.push_call("w1", call(70, Surface::Acquire, a3(), CallOutcome::Ok));
    history.push_call("w1", call(80, Surface::Acquire, lease("r1", "w1.1", 4), CallOutcome::Ok));
    assert_eq!(history.last_extension(&a1()), Some(30));
    assert_eq!(history.last_extension(&other), Some(20));
    assert_eq!(history.last_extension(&b2()), Some(50));
    assert_eq!(history.last_extension(&a3()), Some(70));
    assert_eq!(history.last_extension(&lease("r1", "w1.1", 9)), None);
    assert_eq!(history.latest_grant(&RunId::new("r1"), "w1.1"), Some(lease("r1", "w1.1", 4)));
    assert_eq!(history.latest_grant(&RunId::new("r1"), "w2.1"), Some(b2()));
    assert_eq!(history.latest_grant(&RunId::new("r2"), "w2.1"), None);
    assert_eq!(history.grants_since(3), vec![a3(), lease("r1", "w1.1", 4)]);
    assert_eq!(history.grants_since(9), Vec::<Lease>::new());
    history.take_rows();
    assert_eq!(history.last_extension(&a1()), None);
    assert_eq!(history.latest_grant(&RunId::new("r1"), "w1.1"), None);
}
