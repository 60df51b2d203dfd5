//! The differential's recording (`world::run_recording`): the world it runs is `world::run`'s row
//! for row (the same fingerprint), and it keeps one exchange per recorded store call, naming that
//! call's row and node, with the protocol's request and a full answer.

use fencesim_sim::catalogue;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig};

#[test]
fn a_recording_world_is_the_plain_world_with_one_exchange_per_store_call() {
    for (scenario, seed, db) in [("mid-call-takeover", 3, DbKind::Memdb), ("swarm", 2, DbKind::File)] {
        let cfg = WorldConfig { db, ..WorldConfig::new(catalogue::scenario(scenario).expect("built in"), seed) };
        let plain = world::run(&cfg).expect("the world runs");
        let (recorded, recording) = world::run_recording(&cfg).expect("the world runs");
        assert_eq!(plain.fingerprint, recorded.fingerprint, "{scenario} seed {seed}: recording changed the world");
        let calls: Vec<_> = recorded.rows.iter().filter(|r| r.call().is_some()).collect();
        assert_eq!(calls.len(), recording.exchanges.len(), "{scenario} seed {seed}");
        for (row, exchange) in calls.iter().zip(&recording.exchanges) {
            let call = row.call().expect("a call row");
            assert_eq!((exchange.row, &exchange.node), (row.index, &row.node));
            assert_eq!(exchange.request["op"], call.surface.as_str(), "row {row}");
            let answered = exchange.answer.get("ok").is_some() || exchange.answer["error"]["code"].is_string();
            assert!(answered, "row {row}: {}", exchange.answer);
        }
        assert!(!recording.snapshot.runs.is_empty(), "the final state was kept");
    }
}
