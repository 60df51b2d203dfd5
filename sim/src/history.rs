//! A world's side of the history: the [`Recorder`] that wraps a node's store connection and
//! appends one row per call, in the order the calls returned, which is their serialization order
//! (every store call is synchronous, so no two interleave except through a fault hook, whose
//! nested call returns and is recorded first), the [`BusyInjector`] that fails calls busy, and
//! the [`Cut`] that kills a node inside a store write or just after one returned.
//! Rows are stamped with madsim's virtual time ([`new_history`]). The data types and the oracle
//! that judges them live in the `fencesim-oracle` crate, re-exported here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fencesim_store::{
    Clock, Epoch, FaultAction, FaultHook, FaultPoint, JournalEntry, JournalStore, LeasableStore, Lease, Op, RunFilter,
    RunId, RunMeta, Store, StoreError, StoreResult, TranscriptStore,
};

pub use fencesim_oracle::history::*;
use fencesim_protocol::request::{Call as WireCall, WireFilter, lease_arg};
use fencesim_protocol::wire::{self, ErrorObject, WireLease};
use serde::Serialize;
use serde_json::Value;

use crate::env::{elapsed_ms, virtual_ms};
use crate::rng::Stream;
use crate::site::SiteClass;

/// A world's history: rows stamped with virtual milliseconds since the world started, with room
/// for a typical swarm world's rows.
pub fn new_history() -> History {
    History::with_capacity(elapsed_ms, crate::node::role_of_label, 2048)
}

/// A node's store connection that records every call into the world's history.
pub struct Recorder {
    inner: Box<dyn Store>,
    node: String,
    clock: Arc<dyn Clock>,
    history: History,
    busy: Option<BusyInjector>,
    failures: Option<FailInjector>,
    cut: Option<Arc<dyn Cut>>,
    /// Set when a cut killed the node: its later calls never reach the store and leave no row.
    dead: Arc<AtomicBool>,
    /// Where every recorded call's request and full answer go, for the differential.
    answers: Option<Answers>,
}

/// Whether a crash kills the node at a point of the store's calls: inside a write, after one of
/// its statements ([`SiteClass::MidCall`], the store's `Statement` fault point), or just after a
/// write returned, before the caller sees the answer ([`SiteClass::AfterCall`]). One that fires
/// has recorded the crash and killed the node; the [`Recorder`] then records the cut call and
/// silences the node.
pub trait Cut: Send + Sync {
    fn fires(&self, at: SiteClass, op: Op, run: &RunId) -> bool;
}

/// Fails a share of store calls with [`StoreError::Busy`] before they run (nothing committed),
/// while faults are on. Each firing may hold the connection busy for a while (another process
/// holding the write lock): every call until then fails too.
#[derive(Clone, Debug)]
pub struct BusyInjector {
    /// The stream, and the virtual ms until which the connection stays busy.
    state: Arc<Mutex<(Stream, i64)>>,
    rate: f64,
    hold_ms: (u32, u32),
    /// Set at quiescence: no more injected faults.
    quiet: Arc<AtomicBool>,
}

impl BusyInjector {
    pub fn new(rng: Stream, rate: f64, hold_ms: (u32, u32), quiet: Arc<AtomicBool>) -> Self {
        Self { state: Arc::new(Mutex::new((rng, i64::MIN))), rate, hold_ms, quiet }
    }

    fn fires(&self) -> bool {
        if self.quiet.load(Ordering::SeqCst) {
            return false;
        }
        let mut state = lock(&self.state);
        let (rng, until) = &mut *state;
        let now = virtual_ms();
        if now < *until {
            return true;
        }
        if rng.chance(self.rate) {
            let hold = rng.range(u64::from(self.hold_ms.0), u64::from(self.hold_ms.1));
            *until = now.saturating_add(i64::try_from(hold).unwrap_or(0));
            return true;
        }
        false
    }
}

/// Fails a share of a connection's calls with a storage error before they reach the store: the
/// error no retry absorbs (a full disk, an I/O error), which every actor must survive.
pub struct FailInjector {
    rng: Mutex<Stream>,
    rate: f64,
    /// Set at quiescence: no more injected faults.
    quiet: Arc<AtomicBool>,
}

impl FailInjector {
    pub fn new(rng: Stream, rate: f64, quiet: Arc<AtomicBool>) -> Self {
        Self { rng: Mutex::new(rng), rate, quiet }
    }

    fn fires(&self) -> bool {
        !self.quiet.load(Ordering::SeqCst) && lock(&self.rng).chance(self.rate)
    }
}

impl Recorder {
    /// `clock` must be the clock `inner` reads, so the row shows what the store compared.
    pub fn new(inner: Box<dyn Store>, node: impl Into<String>, clock: Arc<dyn Clock>, history: History) -> Self {
        Self {
            inner,
            node: node.into(),
            clock,
            history,
            busy: None,
            failures: None,
            cut: None,
            dead: Arc::default(),
            answers: None,
        }
    }

    /// Keep each recorded call's request and full answer in `answers` (the differential).
    pub fn with_answers(mut self, answers: Option<Answers>) -> Self {
        self.answers = answers;
        self
    }

    /// Let `cut` kill the node inside and after its store writes; `dead` is raised when it does.
    pub fn with_cut(mut self, cut: Arc<dyn Cut>, dead: Arc<AtomicBool>) -> Self {
        self.cut = Some(cut);
        self.dead = dead;
        self.set_fault_hook(None);
        self
    }

    /// Fail a share of this connection's calls with a storage error.
    pub fn with_failures(mut self, failures: FailInjector) -> Self {
        self.failures = Some(failures);
        self
    }

    /// Inject busy errors into this connection's calls.
    pub fn with_busy(mut self, busy: BusyInjector) -> Self {
        self.busy = Some(busy);
        self
    }

    /// Run one store call and record it. `lease` is what the call carried; an acquire records
    /// the lease it was granted instead (`granted`), and who asked (`owner`); a read what it
    /// returned (`seen`). `filter` is a `list_runs` call's, for the differential's request.
    #[allow(clippy::too_many_arguments, reason = "one row's fields, named at every call site")]
    fn record<T: Answer>(
        &self,
        surface: Surface,
        run: &RunId,
        blob_ref: Option<&str>,
        lease: Option<&Lease>,
        payload: Payload,
        call: impl FnOnce() -> StoreResult<T>,
        granted: impl FnOnce(&T) -> Option<Lease>,
        seen: impl FnOnce(&T) -> Option<Read>,
        filter: Option<&RunFilter>,
    ) -> StoreResult<T> {
        let op = surface.op();
        if self.dead.load(Ordering::SeqCst) {
            return Err(StoreError::storage(op, "the caller is dead"));
        }
        let clock_ms = self.clock.now_ms();
        let busy = self.busy.as_ref().is_some_and(BusyInjector::fires);
        let injected = !busy && self.failures.as_ref().is_some_and(FailInjector::fires);
        let result = if busy {
            Err(StoreError::Busy { op, run: Some(run.clone()) })
        } else if injected {
            Err(StoreError::storage(op, "injected: the disk refused the write"))
        } else {
            call()
        };
        // Cut inside the call: the caller died there and never learned what it did.
        let cut_inside = self.dead.load(Ordering::SeqCst);
        // Only the store's own fault points cut a call: one an injector refused never ran.
        assert!(!(cut_inside && (busy || injected)), "{}: a call cut inside that never reached the store", self.node);
        let (lease, owner) = match surface {
            Surface::Acquire => (result.as_ref().ok().and_then(granted), lease.map(|l| l.owner.clone())),
            _ => (lease.cloned(), None),
        };
        // An acquire's row names who asked: the differential rebuilds its request from it.
        assert!(surface != Surface::Acquire || owner.is_some(), "{}: an acquire row without its owner", self.node);
        let row = Call {
            clock_ms,
            lease,
            owner,
            counter: 0,
            surface,
            run: run.clone(),
            blob_ref: blob_ref.map(str::to_owned),
            payload,
            read: result.as_ref().ok().filter(|_| !cut_inside).and_then(seen),
            outcome: match () {
                () if injected => CallOutcome::Injected,
                () if cut_inside => CallOutcome::Indeterminate,
                () => CallOutcome::of(&result),
            },
        };
        let exchange = self.answers.as_ref().map(|_| (request(&row, filter), answer(&result)));
        let index = self.history.push_call(&self.node, row);
        if let (Some(answers), Some(row), Some((request, answer))) = (&self.answers, index, exchange) {
            answers.push(Exchange { row, node: self.node.clone(), request, answer });
        }
        // After any accepted write: a mutation, or a lease call (a step of a repair, a retention
        // pass, a segment's start or end); a refused one changed nothing to be cut after.
        let writes = surface.is_mutation() || matches!(surface, Surface::Acquire | Surface::Renew | Surface::Release);
        let cut_after = !cut_inside
            && writes
            && result.is_ok()
            && self.cut.as_ref().is_some_and(|cut| cut.fires(SiteClass::AfterCall, op, run));
        if cut_inside || cut_after {
            self.dead.store(true, Ordering::SeqCst);
            self.history.silence(&self.node);
            return Err(StoreError::storage(op, "cut: the caller died"));
        }
        result
    }

    /// [`Recorder::record`] for every call but acquire.
    fn plain<T: Answer>(
        &self,
        surface: Surface,
        run: &RunId,
        blob_ref: Option<&str>,
        lease: Option<&Lease>,
        payload: Payload,
        call: impl FnOnce() -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.record(surface, run, blob_ref, lease, payload, call, |_| None, |_| None, None)
    }

    fn leasable(&self) -> StoreResult<&dyn LeasableStore> {
        self.inner.leases().ok_or_else(|| StoreError::Config("store has no leases".into()))
    }
}

impl JournalStore for Recorder {
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()> {
        self.plain(Surface::Append, run, None, lease, Payload::Entry(entry.clone()), || {
            self.inner.append(run, entry, lease)
        })
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        let load = || self.inner.load(run);
        let seen = |j: &Vec<JournalEntry>| Some(Read::Journal(j.len()));
        self.record(Surface::Load, run, None, None, Payload::None, load, |_| None, seen, None)
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        self.plain(Surface::PutMeta, &meta.run_id, None, lease, Payload::Meta(meta.clone()), || {
            self.inner.put_meta(meta, lease)
        })
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        let list = || self.inner.list_runs(filter);
        self.record(
            Surface::ListRuns,
            &RunId::new("*"),
            None,
            None,
            Payload::None,
            list,
            |_| None,
            |_| None,
            Some(filter),
        )
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        let get = || self.inner.get_meta(run);
        let seen = |meta: &Option<RunMeta>| Some(Read::Meta(meta.as_ref().map(|m| m.status)));
        self.record(Surface::GetMeta, run, None, None, Payload::None, get, |_| None, seen, None)
    }

    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()> {
        self.plain(Surface::Delete, run, None, lease, Payload::None, || self.inner.delete(run, lease))
    }

    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

impl LeasableStore for Recorder {
    fn acquire(&self, run: &RunId, owner: &str) -> StoreResult<Lease> {
        let leases = self.leasable()?;
        // The row names the asking owner through a placeholder lease (epoch 0).
        let asking = Lease { run: run.clone(), owner: owner.to_owned(), epoch: Epoch(0) };
        self.record(
            Surface::Acquire,
            run,
            None,
            Some(&asking),
            Payload::None,
            || leases.acquire(run, owner),
            |granted| Some(granted.clone()),
            |_| None,
            None,
        )
    }

    fn renew(&self, lease: &Lease) -> StoreResult<()> {
        let leases = self.leasable()?;
        self.plain(Surface::Renew, &lease.run, None, Some(lease), Payload::None, || leases.renew(lease))
    }

    fn release(&self, lease: &Lease) -> StoreResult<()> {
        let leases = self.leasable()?;
        self.plain(Surface::Release, &lease.run, None, Some(lease), Payload::None, || leases.release(lease))
    }

    fn lease_ttl_ms(&self) -> u32 {
        self.inner.leases().map_or(0, |l| l.lease_ttl_ms())
    }
}

impl TranscriptStore for Recorder {
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> StoreResult<()> {
        let run = RunId::of_ref(blob_ref);
        self.plain(Surface::PutBlob, &run, Some(blob_ref), lease, Payload::Blob(bytes.to_vec()), || {
            self.inner.put_blob(blob_ref, bytes, lease)
        })
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        let run = RunId::of_ref(blob_ref);
        self.plain(Surface::GetBlob, &run, Some(blob_ref), None, Payload::None, || self.inner.get_blob(blob_ref))
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        self.plain(Surface::ListBlobs, run, None, None, Payload::None, || self.inner.list_blobs(run))
    }

    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()> {
        let run = RunId::of_ref(blob_ref);
        self.plain(Surface::DeleteBlob, &run, Some(blob_ref), lease, Payload::None, || {
            self.inner.delete_blob(blob_ref, lease)
        })
    }

    fn fenced_blob_writes(&self) -> bool {
        self.inner.fenced_blob_writes()
    }
}

impl Store for Recorder {
    fn leases(&self) -> Option<&dyn LeasableStore> {
        self.inner.leases().map(|_| self as &dyn LeasableStore)
    }

    /// With a [`Cut`], `hook` (if any) runs first at each of the store's fault points, and then
    /// the cut may kill the node there (mid-call).
    fn set_fault_hook(&self, hook: Option<FaultHook>) -> bool {
        let Some(cut) = self.cut.clone() else { return self.inner.set_fault_hook(hook) };
        let (dead, mut hook) = (self.dead.clone(), hook);
        self.inner.set_fault_hook(Some(Box::new(move |site| {
            let action = hook.as_mut().map_or(FaultAction::Resume, |hook| hook(site));
            let between = site.point == FaultPoint::Statement;
            if action == FaultAction::Crash || (between && cut.fires(SiteClass::MidCall, site.op, site.run)) {
                dead.store(true, Ordering::SeqCst);
                return FaultAction::Crash;
            }
            FaultAction::Resume
        })))
    }
}

// The differential's recording (`crate::diff`): every store call as the store protocol carries
// it and the store's full answer, kept by the recorder beside the history.

/// One store call as the store protocol carries it (docs/protocol.md), and the store's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    /// The call's row in the world's history (`#row` in its trace).
    pub row: usize,
    /// The node that made the call (its label, `w1.2`).
    pub node: String,
    /// `op` and its arguments as the protocol's typed call (`fencesim_protocol::request::Call`,
    /// `now_ms` on the calls that carry the time) prints them; no `id` or `conn`.
    pub request: Value,
    /// `{"ok": value}`, the value as the protocol encodes it, or `{"error": {...}}`, the protocol's
    /// error object of the store's `StoreError` (messages included). For a call a cut killed
    /// mid-call (its row `indeterminate`) it is what the store returned, which the caller never saw.
    pub answer: Value,
}

/// What a recording world keeps for the differential: its exchanges in row order, and the store's
/// final state as the oracle read it.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    pub exchanges: Vec<Exchange>,
    pub snapshot: Snapshot,
}

/// Where a world's recorders put their exchanges (clones share it).
#[derive(Clone, Debug, Default)]
pub struct Answers(Arc<Mutex<Recording>>);

impl Answers {
    pub fn push(&self, exchange: Exchange) {
        let mut recording = lock(&self.0);
        // In row order: the differential finds a row's exchange by binary search.
        assert!(
            recording.exchanges.last().is_none_or(|last| last.row < exchange.row),
            "exchange of row {} recorded out of row order",
            exchange.row
        );
        recording.exchanges.push(exchange);
    }

    pub fn set_snapshot(&self, snapshot: &Snapshot) {
        lock(&self.0).snapshot = snapshot.clone();
    }

    /// Everything recorded, leaving the sink empty.
    pub fn take(&self) -> Recording {
        std::mem::take(&mut *lock(&self.0))
    }
}

/// A store call's `ok` value as the protocol encodes it.
pub trait Answer {
    fn wire(&self) -> Value;
}

impl Answer for () {
    fn wire(&self) -> Value {
        Value::Null
    }
}

impl Answer for Lease {
    fn wire(&self) -> Value {
        serde_json::to_value(WireLease::from(self)).unwrap_or(Value::Null)
    }
}

impl Answer for Vec<JournalEntry> {
    fn wire(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Answer for Option<RunMeta> {
    fn wire(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Answer for Vec<RunMeta> {
    fn wire(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Answer for Option<Vec<u8>> {
    fn wire(&self) -> Value {
        self.as_deref().map_or(Value::Null, |bytes| wire::hex(bytes).into())
    }
}

impl Answer for Vec<String> {
    fn wire(&self) -> Value {
        self.iter().map(|s| Value::from(s.as_str())).collect()
    }
}

/// A call's answer as the differential keeps it: `{"ok": ...}` or `{"error": {...}}`.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Answered {
    Ok(Value),
    Error(ErrorObject),
}

/// A call's answer: `{"ok": ...}` or `{"error": {...}}`.
pub fn answer<T: Answer>(result: &StoreResult<T>) -> Value {
    let answered = match result {
        Ok(value) => Answered::Ok(value.wire()),
        Err(error) => Answered::Error(ErrorObject::from(error)),
    };
    serde_json::to_value(answered).unwrap_or(Value::Null)
}

/// A recorded call as the protocol's request ([`WireCall`]): `op` and its arguments (an
/// acquire's row holds the granted lease, so its request is rebuilt from the run and the asking
/// owner). `filter` is a `list_runs` call's, which its row does not keep (none: the empty filter).
pub fn request(call: &Call, filter: Option<&RunFilter>) -> Value {
    wire_call(call, filter).to_value()
}

fn wire_call(call: &Call, filter: Option<&RunFilter>) -> WireCall {
    let run = call.run.as_str().to_owned();
    let lease = lease_arg(call.lease.as_ref());
    let blob_ref = call.blob_ref.clone().unwrap_or_default();
    // The calls that carry the time (docs/protocol.md): lease calls and leased writes.
    let now = call.clock_ms;
    let now_ms = call.lease.as_ref().map(|_| Some(now));
    let wire_lease = || WireLease::from(call.lease.as_ref().expect("a renew or release row carries its lease"));
    match (call.surface, &call.payload) {
        (Surface::Acquire, _) => {
            WireCall::Acquire { run, owner: call.owner.clone().unwrap_or_default(), now_ms: Some(now) }
        }
        (Surface::Renew, _) => WireCall::Renew { lease: wire_lease(), now_ms: Some(now) },
        (Surface::Release, _) => WireCall::Release { lease: wire_lease(), now_ms: Some(now) },
        (Surface::Append, Payload::Entry(entry)) => WireCall::Append { run, entry: entry.clone(), lease, now_ms },
        (Surface::PutMeta, Payload::Meta(meta)) => WireCall::PutMeta { meta: meta.clone(), lease, now_ms },
        (Surface::Delete, _) => WireCall::Delete { run, lease, now_ms },
        (Surface::PutBlob, Payload::Blob(bytes)) => {
            WireCall::PutBlob { blob_ref, hex: wire::hex(bytes), lease, now_ms }
        }
        (Surface::DeleteBlob, _) => WireCall::DeleteBlob { blob_ref, lease, now_ms },
        (Surface::GetBlob, _) => WireCall::GetBlob { blob_ref },
        (Surface::Load, _) => WireCall::Load { run },
        (Surface::GetMeta, _) => WireCall::GetMeta { run },
        (Surface::ListBlobs, _) => WireCall::ListBlobs { run },
        (Surface::ListRuns, _) => {
            WireCall::ListRuns { filter: WireFilter::from(filter.unwrap_or(&RunFilter::default())) }
        }
        (surface @ (Surface::Append | Surface::PutMeta | Surface::PutBlob), payload) => {
            panic!("a {} row carries its payload, not {payload:?}", surface.as_str())
        }
    }
}
