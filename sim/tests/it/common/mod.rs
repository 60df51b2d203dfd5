//! Shared set-up for the simulator's integration tests: a madsim runtime per test, and "nodes"
//! (a store connection with its own clock, an engine, a ledger) over one world's database.

#![allow(dead_code, reason = "not every helper is used by every test")]

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;

use fencesim_engine::{Engine, EngineDefects, EngineOptions, Fault, Ledger, Point};
use fencesim_sim::env::{SimClock, SimEnv};
use fencesim_sim::stores::{Db, DbKind};
use fencesim_store::{Store, StoreDefects};

/// The lease ttl of test worlds.
pub const TTL: u32 = 1_000;

/// Run `body` in a fresh madsim runtime with a fixed seed.
pub fn sim<F: Future>(body: impl FnOnce() -> F) -> F::Output {
    sim_seeded(1, body)
}

/// Run `body` in a fresh madsim runtime with `seed`.
pub fn sim_seeded<F: Future>(seed: u64, body: impl FnOnce() -> F) -> F::Output {
    madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default()).block_on(body())
}

/// One participant: its own connection, clock, env, engine and ledger.
pub struct Node {
    pub clock: SimClock,
    pub store: Rc<dyn Store>,
    pub env: SimEnv,
    pub engine: Rc<Engine<SimEnv>>,
    pub ledger: Ledger,
}

pub fn node(db: &Db, owner: &str, defects: EngineDefects) -> Node {
    node_with(db, EngineOptions { owner: owner.into(), defects, ..EngineOptions::default() })
}

pub fn node_with(db: &Db, opts: EngineOptions) -> Node {
    node_in(db, TTL, Ledger::new(), opts)
}

/// A node with its own connection at `ttl_ms`, recording into `ledger` (which may be shared).
pub fn node_in(db: &Db, ttl_ms: u32, ledger: Ledger, opts: EngineOptions) -> Node {
    let (store, env) = db.node(ttl_ms, StoreDefects::NONE).expect("the world's store opens");
    over_with(store, env, ledger, opts)
}

/// A node over a given store (a MemoryStore, say).
pub fn over(store: Rc<dyn Store>, env: SimEnv, opts: EngineOptions) -> Node {
    over_with(store, env, Ledger::new(), opts)
}

fn over_with(store: Rc<dyn Store>, env: SimEnv, ledger: Ledger, opts: EngineOptions) -> Node {
    let engine = Rc::new(Engine::new(store.clone(), env.clone(), ledger.clone(), opts).expect("valid options"));
    Node { clock: env.clock().clone(), store, env, engine, ledger }
}

pub fn world(kind: DbKind) -> Db {
    Db::new(kind).expect("a world database")
}

/// Sleep in virtual time.
pub async fn sleep_ms(ms: u64) {
    madsim::time::sleep(std::time::Duration::from_millis(ms)).await;
}

/// How long a delayed fault point holds, and what it holds.
#[derive(Clone, Copy, Debug)]
pub enum Delay {
    /// Only the call at the point waits; the node's other tasks (its renew loop) run on.
    Call(u64),
    /// The whole node stalls (a GC pause, SIGSTOP): every sleep of it, renewals included.
    Node(u64),
}

/// Delay the first fault point of `env` where `when` holds; every other point continues.
pub fn delay_once(env: &SimEnv, delay: Delay, when: impl Fn(&Point<'_>) -> bool + 'static) {
    let node = env.clone();
    let fired = Cell::new(false);
    env.set_script(Some(Box::new(move |point| {
        if fired.get() || !when(point) {
            return Box::pin(async { Fault::Continue });
        }
        fired.set(true);
        match delay {
            Delay::Call(ms) => Box::pin(async move {
                sleep_ms(ms).await;
                Fault::Continue
            }),
            Delay::Node(ms) => {
                let stall = node.stall(ms);
                Box::pin(async move {
                    stall.await;
                    Fault::Continue
                })
            }
        }
    })));
}
