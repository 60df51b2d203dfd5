//! The simulator's side of the engine's ambient world: a store [`Clock`] and an engine [`Env`]
//! that read madsim's virtual time (plus a per-node skew), sleep in virtual time, and answer
//! fault points from a script. Only valid inside a madsim runtime.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fencesim_engine::race::LocalFuture;
use fencesim_engine::{Env, Fault, Point, Probe};
use fencesim_store::Clock;

/// Virtual time starts here (2023-11-14T22:13:20Z), so times in traces look like real ones.
pub const EPOCH_MS: i64 = 1_700_000_000_000;

/// Milliseconds of virtual time since the runtime started, on the shared timeline.
pub fn virtual_ms() -> i64 {
    let elapsed = madsim::time::TimeHandle::current().elapsed();
    EPOCH_MS + i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
}

/// Virtual milliseconds since the world started.
pub fn elapsed_ms() -> i64 {
    virtual_ms() - EPOCH_MS
}

/// A node's clock: virtual time plus a skew that can be changed (a clock jump) at any time.
/// Clones share the skew.
#[derive(Clone, Debug, Default)]
pub struct SimClock(Arc<AtomicI64>);

impl SimClock {
    pub fn new(skew_ms: i64) -> Self {
        Self(Arc::new(AtomicI64::new(skew_ms)))
    }

    pub fn skew_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }

    pub fn set_skew_ms(&self, skew_ms: i64) {
        self.0.store(skew_ms, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        virtual_ms() + self.skew_ms()
    }
}

/// Decides what happens at each fault point; may sleep or drive other work before answering.
pub type FaultScript = Box<dyn FnMut(&Point<'_>) -> LocalFuture<'static, Fault>>;

/// What a node does when its engine pays an effect.
pub type PaidHook = Box<dyn FnMut(&Point<'_>)>;

/// An engine [`Env`] on virtual time. Clones share the clock and the script.
#[derive(Clone, Default)]
pub struct SimEnv {
    clock: SimClock,
    script: Rc<RefCell<Option<FaultScript>>>,
    /// Told of every paid effect as it goes ahead (the world records it in the history).
    on_paid: Rc<RefCell<Option<PaidHook>>>,
    /// Virtual ms until which this node is stalled: nothing of it runs before then.
    paused_until: Rc<Cell<i64>>,
    /// The world's count of the engine's branches taken (`fencesim_engine::probe`), shared by
    /// its nodes; `None` counts nothing.
    probes: Rc<RefCell<Option<Probes>>>,
    /// Raised when a crash cut the node inside a store call ([`crate::history::Cut`]): the node
    /// runs on to its next await, where madsim stops it; until then it reaches no fault point,
    /// pays nothing and takes no branch worth counting.
    dead: Arc<AtomicBool>,
}

/// Hits per engine branch, shared by a world's nodes.
pub type Probes = Arc<Mutex<BTreeMap<Probe, u64>>>;

impl fmt::Debug for SimEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimEnv").field("clock", &self.clock).finish_non_exhaustive()
    }
}

impl SimEnv {
    pub fn new(clock: SimClock) -> Self {
        Self {
            clock,
            script: Rc::default(),
            on_paid: Rc::default(),
            paused_until: Rc::default(),
            probes: Rc::default(),
            dead: Arc::default(),
        }
    }

    /// The flag that says the node is dead, for its store connection to raise.
    pub fn dead_flag(&self) -> Arc<AtomicBool> {
        self.dead.clone()
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Stall the whole node (a GC pause, SIGSTOP) for `ms`: every sleep of this env, the lease
    /// renew loop's included, ends no earlier than the stall does.
    pub fn stall(&self, ms: u64) -> impl Future<Output = ()> + 'static {
        let until = virtual_ms().saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        self.paused_until.set(self.paused_until.get().max(until));
        wait_out(self.paused_until.clone(), 0)
    }

    pub fn clock(&self) -> &SimClock {
        &self.clock
    }

    /// Install (or with `None` remove) the fault script.
    pub fn set_script(&self, script: Option<FaultScript>) {
        *self.script.borrow_mut() = script;
    }

    /// Remove the fault script unless it is running (a script that holds a clone of its own env
    /// is a reference cycle: the node's owner clears it when the node goes away).
    pub fn clear_script(&self) {
        if let Ok(mut script) = self.script.try_borrow_mut() {
            *script = None;
        }
    }

    /// Install (or with `None` remove) what runs as each paid effect goes ahead.
    pub fn set_paid_hook(&self, hook: Option<PaidHook>) {
        *self.on_paid.borrow_mut() = hook;
    }

    /// Count the engine's branches into `probes` (the world's, shared by its nodes).
    pub fn count_probes(&self, probes: Probes) {
        *self.probes.borrow_mut() = Some(probes);
    }

    /// Install a synchronous script.
    pub fn on_fault(&self, mut decide: impl FnMut(&Point<'_>) -> Fault + 'static) {
        self.set_script(Some(Box::new(move |point| {
            let fault = decide(point);
            Box::pin(async move { fault })
        })));
    }
}

impl Env for SimEnv {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        wait_out(self.paused_until.clone(), ms)
    }

    fn fault(&self, point: &Point<'_>) -> impl Future<Output = Fault> {
        // The script runs synchronously here; the borrow ends before its future is awaited, so
        // that future may drive engines that hit this same env's fault points.
        let dead = self.is_dead();
        let answer = if dead { None } else { self.script.borrow_mut().as_mut().map(|script| script(point)) };
        async move {
            match answer {
                Some(answer) => answer.await,
                None if dead => std::future::pending().await,
                None => Fault::Continue,
            }
        }
    }

    fn paid(&self, point: &Point<'_>) {
        if self.is_dead() {
            return;
        }
        if let Some(hook) = self.on_paid.borrow_mut().as_mut() {
            hook(point);
        }
    }

    fn probe(&self, probe: Probe) {
        if self.is_dead() {
            return;
        }
        if let Some(probes) = self.probes.borrow().as_ref() {
            *probes.lock().unwrap_or_else(PoisonError::into_inner).entry(probe).or_default() += 1;
        }
    }
}

/// Sleep `ms`, then on past any stall of the node that is still in force.
async fn wait_out(paused_until: Rc<Cell<i64>>, ms: u64) {
    madsim::time::sleep(Duration::from_millis(ms)).await;
    loop {
        let left = paused_until.get() - virtual_ms();
        if left <= 0 {
            return;
        }
        madsim::time::sleep(Duration::from_millis(left.unsigned_abs())).await;
    }
}
