//! Shared set-up for the simulator's integration tests: a madsim runtime per test, and "nodes"
//! (a store connection with its own clock, an engine, a ledger) over one world's database.

#![allow(dead_code, reason = "each test binary uses its own subset")]

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use fencesim::env::{SimClock, SimEnv};
use fencesim::stores::{Db, DbKind};
use fencesim_engine::{Engine, EngineDefects, EngineOptions, Ledger};
use fencesim_store::{Defects, Store};

/// The lease ttl of test worlds.
pub const TTL: u32 = 1_000;

/// Run `body` in a fresh madsim runtime with a fixed seed.
pub fn sim<F: Future>(body: impl FnOnce() -> F) -> F::Output {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(body())
}

/// One participant: its own connection, clock, env, engine and ledger.
pub struct Node {
    pub store: Rc<dyn Store>,
    pub env: SimEnv,
    pub engine: Rc<Engine<SimEnv>>,
    pub ledger: Ledger,
}

pub fn node(db: &Db, owner: &str, defects: EngineDefects) -> Node {
    node_with(db, EngineOptions { owner: owner.into(), defects, ..EngineOptions::default() })
}

pub fn node_with(db: &Db, opts: EngineOptions) -> Node {
    let clock = SimClock::new(0);
    let store: Rc<dyn Store> =
        Rc::new(db.open(Arc::new(clock.clone()), i64::from(TTL), Defects::NONE).expect("the world's store opens"));
    over(store, SimEnv::new(clock), opts)
}

/// A node over a given store (a MemoryStore, say).
pub fn over(store: Rc<dyn Store>, env: SimEnv, opts: EngineOptions) -> Node {
    let ledger = Ledger::new();
    let engine = Rc::new(Engine::new(store.clone(), env.clone(), ledger.clone(), opts).expect("valid options"));
    Node { store, env, engine, ledger }
}

pub fn world(kind: DbKind) -> Db {
    Db::new(kind).expect("a world database")
}

/// Sleep in virtual time.
pub async fn sleep_ms(ms: u64) {
    madsim::time::sleep(std::time::Duration::from_millis(ms)).await;
}
