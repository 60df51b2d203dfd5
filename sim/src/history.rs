//! The history of one world: every store call any node made (virtual time, node, the calling
//! node's clock, lease and per-tenure counter, surface, target, payload and its digest, outcome),
//! plus the events the oracle needs beside them (paid effects, injected faults, segment outcomes).
//! A [`Recorder`] wraps a node's store connection and appends one row per call, in the order the
//! calls returned, which is their serialization order: every store call is synchronous, so no two
//! interleave except through a fault hook, whose nested call returns (and is recorded) first.
//!
//! The oracle reads nothing but this history and the final store snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fencesim_store::{
    Clock, Epoch, FaultHook, JournalEntry, JournalStore, LeasableStore, Lease, LeaseRejection, Op, RunFilter, RunId,
    RunMeta, Seq, Store, StoreError, StoreResult, TranscriptStore,
};

use crate::env::{elapsed_ms, virtual_ms};
use crate::rng::Stream;

/// The store surface a call went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Surface {
    Acquire,
    Renew,
    Release,
    Append,
    PutMeta,
    Delete,
    PutBlob,
    DeleteBlob,
    Load,
    GetMeta,
    ListRuns,
    GetBlob,
    ListBlobs,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Acquire => "acquire",
            Surface::Renew => "renew",
            Surface::Release => "release",
            Surface::Append => "append",
            Surface::PutMeta => "put_meta",
            Surface::Delete => "delete",
            Surface::PutBlob => "put_blob",
            Surface::DeleteBlob => "delete_blob",
            Surface::Load => "load",
            Surface::GetMeta => "get_meta",
            Surface::ListRuns => "list_runs",
            Surface::GetBlob => "get_blob",
            Surface::ListBlobs => "list_blobs",
        }
    }

    /// Journal, meta, blob and deletion writes: what the serial history replays.
    pub fn is_mutation(self) -> bool {
        matches!(self, Surface::Append | Surface::PutMeta | Surface::Delete | Surface::PutBlob | Surface::DeleteBlob)
    }

    /// The store operation an error of this surface names.
    pub fn op(self) -> Op {
        match self {
            Surface::Acquire => Op::Acquire,
            Surface::Renew => Op::Renew,
            Surface::Release => Op::Release,
            Surface::Append => Op::Append,
            Surface::PutMeta => Op::PutMeta,
            Surface::Delete => Op::Delete,
            Surface::PutBlob => Op::BlobPut,
            Surface::DeleteBlob => Op::BlobDelete,
            Surface::Load => Op::Load,
            Surface::GetMeta => Op::GetMeta,
            Surface::ListRuns => Op::ListRuns,
            Surface::GetBlob => Op::BlobGet,
            Surface::ListBlobs => Op::BlobList,
        }
    }

    /// Calls that change the lease table.
    pub fn is_lease_call(self) -> bool {
        matches!(self, Surface::Acquire | Surface::Renew | Surface::Release)
    }
}

/// How a call ended, by error class (contracts 2.7.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    Ok,
    /// Acquire found a live lease.
    HeldBy {
        owner: String,
        epoch: Epoch,
    },
    /// The caller's lease was not the live holder.
    Stale,
    /// The lease names another run.
    RunMismatch,
    JournalOrder,
    Busy,
    /// Any other error, by code.
    Error(&'static str),
    /// The caller died before it learned the outcome (Jepsen's `:info`): the call may or may not
    /// have taken effect. Only a real process killed mid-call produces it.
    Indeterminate,
}

impl CallOutcome {
    fn of<T>(result: &StoreResult<T>) -> Self {
        match result {
            Ok(_) => CallOutcome::Ok,
            Err(StoreError::LeaseHeld(held)) => match &held.rejection {
                LeaseRejection::HeldBy { owner, epoch } => CallOutcome::HeldBy { owner: owner.clone(), epoch: *epoch },
                LeaseRejection::Stale { .. } => CallOutcome::Stale,
                LeaseRejection::RunMismatch { .. } => CallOutcome::RunMismatch,
            },
            Err(StoreError::JournalOrder { .. }) => CallOutcome::JournalOrder,
            Err(StoreError::Busy { .. }) => CallOutcome::Busy,
            Err(other) => CallOutcome::Error(other.code()),
        }
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, CallOutcome::Ok)
    }
}

impl fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallOutcome::Ok => f.write_str("ok"),
            CallOutcome::HeldBy { owner, epoch } => write!(f, "held-by {owner}@e{epoch}"),
            CallOutcome::Stale => f.write_str("stale"),
            CallOutcome::RunMismatch => f.write_str("run-mismatch"),
            CallOutcome::JournalOrder => f.write_str("journal-order"),
            CallOutcome::Busy => f.write_str("busy"),
            CallOutcome::Error(code) => write!(f, "error {code}"),
            CallOutcome::Indeterminate => f.write_str("indeterminate"),
        }
    }
}

/// What a mutation carried, kept whole so the oracle can replay it into a model.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    None,
    Entry(JournalEntry),
    Meta(RunMeta),
    Blob(Vec<u8>),
}

impl Payload {
    /// A stable 64-bit digest (FNV-1a over the canonical encoding); 0 for no payload.
    pub fn digest(&self) -> u64 {
        match self {
            Payload::None => 0,
            Payload::Entry(entry) => digest_json(entry),
            Payload::Meta(meta) => digest_json(meta),
            Payload::Blob(bytes) => digest(bytes),
        }
    }
}

/// Lock a mutex of the harness's. A panic while one was held is a harness bug that already
/// reported itself; the data behind the lock is still whole, so it is used as is.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// FNV-1a, 64 bits: stable across builds and platforms, unlike the std hasher.
pub fn digest(bytes: &[u8]) -> u64 {
    let mut h = Fnv::default();
    h.eat(bytes);
    h.0
}

/// [`digest`] of a value's JSON encoding, without building the encoding.
pub fn digest_json<T: serde::Serialize>(value: &T) -> u64 {
    let mut h = Fnv::default();
    // Writing into a hasher cannot fail; a value serde cannot encode digests what was written.
    let _ = serde_json::to_writer(&mut h, value);
    h.0
}

/// An FNV-1a hasher that text and bytes can be written into.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn eat(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
    }
}

impl std::io::Write for Fnv {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.eat(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl fmt::Write for Fnv {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.eat(s.as_bytes());
        Ok(())
    }
}

/// One store call.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The calling node's clock at the call (what the store compared lease expiry against).
    pub clock_ms: i64,
    /// The lease the call carried; for a granted acquire, the granted lease.
    pub lease: Option<Lease>,
    /// For acquire: the owner that asked.
    pub owner: Option<String>,
    /// Per-tenure counter: the n-th call this node made under this lease (from 1); 0 unleased.
    pub counter: u64,
    pub surface: Surface,
    /// The run whose rows the call targets (a blob's run is its ref's leading segment).
    pub run: RunId,
    /// The blob ref, for blob calls.
    pub blob_ref: Option<String>,
    pub payload: Payload,
    pub outcome: CallOutcome,
}

impl Call {
    /// The epoch the call carried, if any.
    pub fn epoch(&self) -> Option<Epoch> {
        self.lease.as_ref().map(|l| l.epoch)
    }

    /// The seq an append carried.
    pub fn seq(&self) -> Option<Seq> {
        match &self.payload {
            Payload::Entry(entry) => Some(entry.seq),
            _ => None,
        }
    }

    /// An accepted journal, meta, blob or deletion write.
    pub fn is_accepted_mutation(&self) -> bool {
        self.surface.is_mutation() && self.outcome.is_ok()
    }
}

/// A paid side effect, counted at the engine's fault point just before it is paid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EffectKind {
    Call,
    Tool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    pub kind: EffectKind,
    pub run: RunId,
    pub epoch: Option<Epoch>,
    /// The dispatch's running entry.
    pub running: Seq,
    /// The turn (calls) or the tool's number (tools), from 1.
    pub n: u32,
}

/// A row of the history.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "nearly every row is a call; boxing it would cost more")]
pub enum Event {
    Call(Call),
    Effect(Effect),
    /// A fault the world injected (its kind and where), for the trace and the re-pay bound.
    Fault {
        kind: String,
        run: Option<RunId>,
        epoch: Option<Epoch>,
        detail: String,
    },
    /// A segment returned to its node: the outcome the engine reported for the run.
    Outcome {
        run: RunId,
        result: String,
    },
    /// A note of the world's own (node start, crash, restart, quiescence).
    Note(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Position in the history (from 0).
    pub index: usize,
    /// Virtual milliseconds since the world started (the shared timeline).
    pub at_ms: i64,
    pub node: String,
    pub event: Event,
}

impl Row {
    pub fn call(&self) -> Option<&Call> {
        match &self.event {
            Event::Call(call) => Some(call),
            _ => None,
        }
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{:<5} {:>6}.{:03}s {:<9} ", self.index, self.at_ms / 1000, self.at_ms % 1000, self.node)?;
        match &self.event {
            Event::Call(call) => {
                let target = call.blob_ref.clone().unwrap_or_else(|| call.run.to_string());
                let seq = call.seq().map_or(String::new(), |s| format!(" seq={s}"));
                let lease = match (&call.lease, call.surface) {
                    (Some(l), Surface::Acquire) => format!(" granted {}@e{}", l.owner, l.epoch),
                    (Some(l), _) => format!(" under {}@e{}.{}", l.owner, l.epoch, call.counter),
                    (None, Surface::Acquire) => format!(" by {}", call.owner.as_deref().unwrap_or("?")),
                    (None, _) if call.surface.is_mutation() => " unleased".to_owned(),
                    (None, _) => String::new(),
                };
                let payload = match &call.payload {
                    Payload::None => String::new(),
                    Payload::Entry(e) => format!(" {}/{} #{:016x}", e.kind, e.status, call.payload.digest()),
                    Payload::Meta(m) => format!(" {} seg={} #{:016x}", m.status, m.segments, call.payload.digest()),
                    Payload::Blob(b) => format!(" {}B #{:016x}", b.len(), call.payload.digest()),
                };
                write!(f, "{:<11} {target}{seq}{lease}{payload} -> {}", call.surface.as_str(), call.outcome)
            }
            Event::Effect(e) => {
                let kind = match e.kind {
                    EffectKind::Call => "pay-call",
                    EffectKind::Tool => "pay-tool",
                };
                let epoch = e.epoch.map_or("unleased".to_owned(), |ep| format!("e{ep}"));
                write!(f, "{kind:<11} {} running={} n={} {epoch}", e.run, e.running, e.n)
            }
            Event::Fault { kind, run, epoch, detail } => {
                let run = run.as_ref().map_or(String::new(), |r| format!(" {r}"));
                let epoch = epoch.map_or(String::new(), |e| format!(" e{e}"));
                write!(f, "FAULT {kind}{run}{epoch} {detail}")
            }
            Event::Outcome { run, result } => write!(f, "outcome     {run} {result}"),
            Event::Note(note) => write!(f, "-- {note}"),
        }
    }
}

#[derive(Default)]
struct Inner {
    rows: Vec<Row>,
    /// (node, run, epoch) -> calls made so far under that lease.
    counters: BTreeMap<(String, RunId, Epoch), u64>,
}

/// The shared, append-only history of one world. Clones share it.
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Inner>>);

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "History({} rows)", self.lock().rows.len())
    }
}

impl History {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.0)
    }

    /// Append an event stamped with the current virtual time.
    pub fn push(&self, node: &str, event: Event) {
        let at_ms = elapsed_ms();
        let mut inner = self.lock();
        let index = inner.rows.len();
        inner.rows.push(Row { index, at_ms, node: node.to_owned(), event });
    }

    fn push_call(&self, node: &str, mut call: Call) {
        if let Some(lease) = &call.lease
            && call.surface != Surface::Acquire
        {
            let mut inner = self.lock();
            let counter = inner.counters.entry((node.to_owned(), lease.run.clone(), lease.epoch)).or_default();
            *counter += 1;
            call.counter = *counter;
        }
        self.push(node, Event::Call(call));
    }

    /// Every row, leaving the history empty: the world's end, without copying it.
    pub fn take_rows(&self) -> Vec<Row> {
        std::mem::take(&mut self.lock().rows)
    }

    /// Leases granted so far, in grant order.
    pub fn grants(&self) -> Vec<Lease> {
        self.lock()
            .rows
            .iter()
            .filter_map(Row::call)
            .filter(|c| c.surface == Surface::Acquire && c.outcome.is_ok())
            .filter_map(|c| c.lease.clone())
            .collect()
    }
}

/// A node's store connection that records every call into the world's history.
pub struct Recorder {
    inner: Box<dyn Store>,
    node: String,
    clock: Arc<dyn Clock>,
    history: History,
    busy: Option<BusyInjector>,
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

impl Recorder {
    /// `clock` must be the clock `inner` reads, so the row shows what the store compared.
    pub fn new(inner: Box<dyn Store>, node: impl Into<String>, clock: Arc<dyn Clock>, history: History) -> Self {
        Self { inner, node: node.into(), clock, history, busy: None }
    }

    /// Inject busy errors into this connection's calls.
    pub fn with_busy(mut self, busy: BusyInjector) -> Self {
        self.busy = Some(busy);
        self
    }

    /// Run one store call and record it. `lease` is what the call carried; an acquire records
    /// the lease it was granted instead (`granted`), and who asked (`owner`).
    #[allow(clippy::too_many_arguments, reason = "one row's fields, named at every call site")]
    fn record<T>(
        &self,
        surface: Surface,
        run: &RunId,
        blob_ref: Option<&str>,
        lease: Option<&Lease>,
        payload: Payload,
        call: impl FnOnce() -> StoreResult<T>,
        granted: impl FnOnce(&T) -> Option<Lease>,
    ) -> StoreResult<T> {
        let clock_ms = self.clock.now_ms();
        let result = if self.busy.as_ref().is_some_and(BusyInjector::fires) {
            Err(StoreError::Busy { op: surface.op(), run: Some(run.clone()) })
        } else {
            call()
        };
        let (lease, owner) = match surface {
            Surface::Acquire => (result.as_ref().ok().and_then(granted), lease.map(|l| l.owner.clone())),
            _ => (lease.cloned(), None),
        };
        let row = Call {
            clock_ms,
            lease,
            owner,
            counter: 0,
            surface,
            run: run.clone(),
            blob_ref: blob_ref.map(str::to_owned),
            payload,
            outcome: CallOutcome::of(&result),
        };
        self.history.push_call(&self.node, row);
        result
    }

    /// [`Recorder::record`] for every call but acquire.
    fn plain<T>(
        &self,
        surface: Surface,
        run: &RunId,
        blob_ref: Option<&str>,
        lease: Option<&Lease>,
        payload: Payload,
        call: impl FnOnce() -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.record(surface, run, blob_ref, lease, payload, call, |_| None)
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
        self.plain(Surface::Load, run, None, None, Payload::None, || self.inner.load(run))
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        self.plain(Surface::PutMeta, &meta.run_id, None, lease, Payload::Meta(meta.clone()), || {
            self.inner.put_meta(meta, lease)
        })
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        self.plain(Surface::ListRuns, &RunId::new("*"), None, None, Payload::None, || self.inner.list_runs(filter))
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        self.plain(Surface::GetMeta, run, None, None, Payload::None, || self.inner.get_meta(run))
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

    fn set_fault_hook(&self, hook: Option<FaultHook>) -> bool {
        self.inner.set_fault_hook(hook)
    }
}

/// The store's final state, read after the world stopped: what the oracle diffs the serial
/// history against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub runs: BTreeMap<RunId, RunState>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunState {
    pub journal: Vec<JournalEntry>,
    pub meta: Option<RunMeta>,
    /// Blob refs under `<run>/` with their bytes, sorted by ref.
    pub blobs: BTreeMap<String, Vec<u8>>,
}

impl Snapshot {
    /// Read every run the store lists, plus `extra` (runs a history names: a run with a journal
    /// and no meta is not listable). Reads bypass any recorder.
    pub fn read(store: &dyn Store, extra: impl IntoIterator<Item = RunId>) -> StoreResult<Self> {
        let mut runs: BTreeSet<RunId> = store.list_runs(&RunFilter::all())?.into_iter().map(|m| m.run_id).collect();
        runs.extend(extra);
        let mut snapshot = Snapshot::default();
        for run in runs {
            let mut blobs = BTreeMap::new();
            for blob_ref in store.list_blobs(&run)? {
                if let Some(bytes) = store.get_blob(&blob_ref)? {
                    blobs.insert(blob_ref, bytes);
                }
            }
            let state = RunState { journal: store.load(&run)?, meta: store.get_meta(&run)?, blobs };
            snapshot.runs.insert(run, state);
        }
        Ok(snapshot)
    }

    pub fn run(&self, run: &RunId) -> Option<&RunState> {
        self.runs.get(run)
    }
}
