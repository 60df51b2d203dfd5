//! The history of one world or soak: every store call any node made (time on the recorder's
//! timeline, node, the calling node's clock, lease and per-tenure counter, surface, target,
//! payload and its digest, outcome), plus the events the oracle needs beside them (paid effects,
//! injected faults, segment outcomes). Rows are in serialization order: a simulated world records
//! each call as it returns (store calls are synchronous there); a soak merges its processes' logs
//! by the instant each call read the store's clock inside its write transaction. A call whose
//! process died before it learned the result is [`CallOutcome::Indeterminate`].
//!
//! The oracle reads nothing but this history and the final store snapshot.
//!
//! A [`Row`] is its index, its time on the recorder's timeline, its node, the node's [`Role`] (the
//! recorder's owner says what each node is; the oracle never reads a node's name) and its
//! [`Event`]: a store [`Call`], a paid [`Effect`], an injected fault named by its [`Disruption`]
//! (whose `interrupts()` says whether it cuts a tenure short), a segment's [`SegmentResult`], the
//! operator's repair, an external [`Request`] (a client's cancel, a worker's stop), or a note. A
//! call keeps its whole payload with its FNV-1a digest. [`History`] is the shared append-only log:
//! its time source is the recorder's (virtual ms in a world, wall-clock ms in a soak) and it
//! asserts that time never goes backwards. [`CallOutcome::Indeterminate`] is Jepsen's `:info`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use fencesim_store::{
    Epoch, JournalEntry, Lease, LeaseRejection, Op, RunFilter, RunId, RunMeta, RunStatus, Seq, Store, StoreError,
    StoreResult,
};

/// The store surface a call went through, named as the SPI method is (the soak's logs carry it
/// by this name too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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

    /// Whether the call takes SQLite's write lock: an acquire or a fenced surface.
    pub fn is_write(self) -> bool {
        self == Surface::Acquire || self.is_fenced()
    }

    /// The surfaces that carry a lease the store checks: every mutation, renew and release.
    pub fn is_fenced(self) -> bool {
        self.is_mutation() || matches!(self, Surface::Renew | Surface::Release)
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
            Surface::PutBlob => Op::PutBlob,
            Surface::DeleteBlob => Op::DeleteBlob,
            Surface::Load => Op::Load,
            Surface::GetMeta => Op::GetMeta,
            Surface::ListRuns => Op::ListRuns,
            Surface::GetBlob => Op::GetBlob,
            Surface::ListBlobs => Op::ListBlobs,
        }
    }
}

/// How a call ended, by error class (contracts 2.7.7).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// The harness failed the call with a storage error before it reached the store (a fault no
    /// retry absorbs): nothing was committed, and the caller saw an untyped error.
    Injected,
}

impl CallOutcome {
    /// The outcome class of a store call's result.
    pub fn of<T>(result: &StoreResult<T>) -> Self {
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
            CallOutcome::Injected => f.write_str("injected-error"),
        }
    }
}

/// What a mutation carried, kept whole so the oracle can replay it into a model.
#[derive(Clone, Debug, PartialEq, Hash)]
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

/// An FNV-1a hasher that bytes can be written into (`digest_json` writes a JSON encoding).
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

/// The word-at-a-time hasher of world fingerprints; it lives in the store, whose decode memo
/// hashes with it too.
pub use fencesim_store::Mix;

/// One store call.
#[derive(Clone, Debug, PartialEq, Hash)]
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
    /// What a read returned, where the recorder kept it (a world's: its calls are serialized, so
    /// a read sees exactly the writes recorded before it).
    pub read: Option<Read>,
}

/// What a read returned, as `linearizable-reads` compares it with the writes before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Read {
    /// `load`: how many entries the journal had.
    Journal(usize),
    /// `get_meta`: the meta's status, or none.
    Meta(Option<RunStatus>),
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EffectKind {
    Call,
    Tool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Effect {
    pub kind: EffectKind,
    pub run: RunId,
    pub epoch: Option<Epoch>,
    /// The dispatch's running entry.
    pub running: Seq,
    /// The turn (calls) or the tool's number (tools), from 1.
    pub n: u32,
}

/// The kind of fault a world injected, as its history row names it (`FAULT crash ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Disruption {
    /// A node killed at an engine fault point (restarted later).
    Crash,
    /// A node stalled at an engine fault point.
    Stall,
    /// Another connection tried to take a run's lease over mid-call.
    Takeover,
    /// A superseded holder probed a write surface with its dead lease (or a forged one).
    Zombie,
    /// An administrator purged a run with an unleased delete while its holder held it.
    Purge,
    /// A node's clock jumped.
    ClockJump,
    /// A node was stopped gracefully and started again.
    Restart,
}

impl Disruption {
    pub const ALL: [Disruption; 7] = [
        Disruption::Crash,
        Disruption::Stall,
        Disruption::Takeover,
        Disruption::Zombie,
        Disruption::Purge,
        Disruption::ClockJump,
        Disruption::Restart,
    ];

    /// Its name in a history row.
    pub fn as_str(self) -> &'static str {
        match self {
            Disruption::Crash => "crash",
            Disruption::Stall => "stall",
            Disruption::Takeover => "takeover",
            Disruption::Zombie => "zombie",
            Disruption::Purge => "purge",
            Disruption::ClockJump => "clock-jump",
            Disruption::Restart => "restart",
        }
    }

    /// Whether it interrupts a tenure of the run it names (a zombie's probe interrupts nothing).
    pub fn interrupts(self) -> bool {
        match self {
            Disruption::Crash | Disruption::Stall | Disruption::Takeover => true,
            Disruption::Zombie | Disruption::Purge | Disruption::ClockJump | Disruption::Restart => false,
        }
    }
}

impl fmt::Display for Disruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A row of the history.
#[derive(Clone, Debug, PartialEq, Hash)]
#[allow(clippy::large_enum_variant, reason = "nearly every row is a call; boxing it would cost more")]
pub enum Event {
    Call(Call),
    Effect(Effect),
    /// A fault the world injected (its kind and where), for the trace and the re-pay bound.
    Fault {
        kind: Disruption,
        run: Option<RunId>,
        epoch: Option<Epoch>,
        detail: String,
    },
    /// A segment returned to its node: the outcome the engine reported for the run.
    Outcome {
        run: RunId,
        result: SegmentResult,
    },
    /// The operator's audit rewrote a run's meta (R1-R9): judged by `justified-repair`, since a
    /// repair can put right what a worker got wrong.
    Repair {
        run: RunId,
        status: RunStatus,
    },
    /// Something outside the engine asked for an outcome (contracts 1.2): what `cancel-asked`
    /// holds a run's `cancelled` settle to.
    Request(Request),
    /// A note of the world's own (node start, crash, restart, quiescence).
    Note(String),
}

/// An external request a node made.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// The run's client cancels it.
    Cancel { run: RunId },
    /// The row's node (a worker) is asked to stop: every run it drives is cancelled.
    Stop,
}

/// What a segment returned to its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentResult {
    /// The run's status as the engine reported it (settled, or suspended).
    Reported(RunStatus),
    /// The segment failed with an engine error of this class.
    Failed(SegmentError),
}

/// The class of an engine error a segment returned (the engine's `EngineError` variants, restated
/// here because the oracle does not know the engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentError {
    LeaseHeld,
    Superseded,
    Settlement,
    /// A second live segment of the run in one engine, refused before any store call (E1).
    SegmentLive,
    Config,
    Binding,
    Store,
    Crashed,
}

impl SegmentError {
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentError::LeaseHeld => "lease-held",
            SegmentError::Superseded => "superseded",
            SegmentError::Settlement => "settlement",
            SegmentError::SegmentLive => "segment-live",
            SegmentError::Config => "config",
            SegmentError::Binding => "binding",
            SegmentError::Store => "store",
            SegmentError::Crashed => "crashed",
        }
    }
}

/// `ok`, `suspended`, ... for a reported status; `err:<class>` for a failure.
impl fmt::Display for SegmentResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SegmentResult::Reported(status) => f.write_str(status.as_str()),
            SegmentResult::Failed(error) => write!(f, "err:{}", error.as_str()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Hash)]
pub struct Row {
    /// Position in the history (from 0).
    pub index: usize,
    /// Virtual milliseconds since the world started (the shared timeline).
    pub at_ms: i64,
    pub node: String,
    /// What the node is: the rights and duties the oracle holds its rows to.
    pub role: Role,
    pub event: Event,
}

/// What a node is, for the rights and duties the oracle holds it to. The recorder's owner says
/// (a world knows its nodes, a soak its processes); the oracle never reads a node's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A queue worker: it resumes the runs its sweeps find, under E8's candidacy rule.
    Worker,
    /// The retention sweeper.
    Sweeper,
    /// The runs' client: starts, resolves, cancels, deletes and recreates its runs.
    Client,
    /// The operator: `runs audit --repair`.
    Operator,
    /// The administrator: its unleased deletes are the purge the SPI allows (S6).
    Admin,
    /// A raw store writer of the store-level soak.
    Writer,
    /// The harness's own: a zombie, a usurper, the supervisor.
    Harness,
}

/// Who a history's node labels are: given by the recorder's owner when the history is made.
pub type RoleOf = fn(&str) -> Role;

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
            // Written piece by piece, no intermediate strings: a trace prints every row.
            Event::Call(call) => {
                write!(f, "{:<11} ", call.surface.as_str())?;
                match &call.blob_ref {
                    Some(blob_ref) => f.write_str(blob_ref)?,
                    None => f.write_str(call.run.as_str())?,
                }
                if let Some(seq) = call.seq() {
                    write!(f, " seq={seq}")?;
                }
                match (&call.lease, call.surface) {
                    (Some(l), Surface::Acquire) => write!(f, " granted {}@e{}", l.owner, l.epoch)?,
                    (Some(l), _) => write!(f, " under {}@e{}.{}", l.owner, l.epoch, call.counter)?,
                    (None, Surface::Acquire) => write!(f, " by {}", call.owner.as_deref().unwrap_or("?"))?,
                    (None, _) if call.surface.is_mutation() => f.write_str(" unleased")?,
                    (None, _) => {}
                }
                match &call.payload {
                    Payload::None => {}
                    Payload::Entry(e) => write!(f, " {}/{} #{:016x}", e.kind, e.status, call.payload.digest())?,
                    Payload::Meta(m) => write!(f, " {} seg={} #{:016x}", m.status, m.segments, call.payload.digest())?,
                    Payload::Blob(b) => write!(f, " {}B #{:016x}", b.len(), call.payload.digest())?,
                }
                write!(f, " -> {}", call.outcome)
            }
            Event::Effect(e) => {
                let kind = match e.kind {
                    EffectKind::Call => "pay-call",
                    EffectKind::Tool => "pay-tool",
                };
                write!(f, "{kind:<11} {} running={} n={} ", e.run, e.running, e.n)?;
                match e.epoch {
                    Some(epoch) => write!(f, "e{epoch}"),
                    None => f.write_str("unleased"),
                }
            }
            Event::Fault { kind, run, epoch, detail } => {
                write!(f, "FAULT {kind}")?;
                if let Some(run) = run {
                    write!(f, " {run}")?;
                }
                if let Some(epoch) = epoch {
                    write!(f, " e{epoch}")?;
                }
                write!(f, " {detail}")
            }
            Event::Outcome { run, result } => write!(f, "outcome     {run} {result}"),
            Event::Repair { run, status } => write!(f, "repair      {run} meta -> {status}"),
            Event::Request(Request::Cancel { run }) => write!(f, "request     {run} cancel"),
            Event::Request(Request::Stop) => write!(f, "request     stop"),
            Event::Note(note) => write!(f, "-- {note}"),
        }
    }
}

#[derive(Default)]
struct Inner {
    rows: Vec<Row>,
    /// node -> (run, epoch) -> calls made so far under that lease.
    counters: BTreeMap<String, BTreeMap<(RunId, Epoch), u64>>,
    /// Leases granted so far, in grant order: what [`History::grants`] answers without a scan.
    grants: Vec<Lease>,
    /// Each lease's last extension (the caller's clock at its grant or last accepted renew), by
    /// (run, owner, epoch): what [`History::last_extension`] answers without a scan of the rows.
    extensions: BTreeMap<(RunId, String, Epoch), i64>,
    /// Each (run, owner)'s latest grant: what [`History::latest_grant`] answers without a scan.
    latest: BTreeMap<(RunId, String), Lease>,
    /// Nodes killed inside synchronous code (a store call the simulator cut): what they would
    /// push before their task stops at its next await is dropped, as a dead process does nothing.
    silenced: BTreeSet<String>,
}

/// Where a history's time comes from: milliseconds on the recorder's timeline (virtual time since
/// a world started, or wall-clock time since a soak started). It must never go backwards.
pub type TimeSource = fn() -> i64;

/// The shared, append-only history of one world or soak. Clones share it.
#[derive(Clone)]
pub struct History {
    inner: Arc<Mutex<Inner>>,
    now_ms: TimeSource,
    role_of: RoleOf,
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "History({} rows)", self.lock().rows.len())
    }
}

impl History {
    /// An empty history whose rows are stamped by `now_ms` and whose nodes are what `role_of`
    /// says.
    pub fn new(now_ms: TimeSource, role_of: RoleOf) -> Self {
        Self { inner: Arc::default(), now_ms, role_of }
    }

    /// An empty history with room for `rows` rows before it grows: a row is large, and a
    /// history that doubles its way to a world's two thousand rows copies every row again.
    pub fn with_capacity(now_ms: TimeSource, role_of: RoleOf, rows: usize) -> Self {
        let inner = Inner { rows: Vec::with_capacity(rows), ..Inner::default() };
        Self { inner: Arc::new(Mutex::new(inner)), now_ms, role_of }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Drop every row `node` pushes from now on: it is dead (see `Inner::silenced`).
    pub fn silence(&self, node: &str) {
        self.lock().silenced.insert(node.to_owned());
    }

    /// Append an event stamped with the recorder's current time.
    pub fn push(&self, node: &str, event: Event) {
        self.push_row(node, event);
    }

    /// [`History::push`], saying where the row went: its index, or `None` when the node is
    /// silenced and the row was dropped.
    fn push_row(&self, node: &str, event: Event) -> Option<usize> {
        let at_ms = (self.now_ms)();
        let mut inner = self.lock();
        if !inner.silenced.is_empty() && inner.silenced.contains(node) {
            return None;
        }
        let index = inner.rows.len();
        // A history is a timeline: a row's time never precedes the row before it.
        assert!(
            inner.rows.last().is_none_or(|last| last.at_ms <= at_ms),
            "history time went backwards at row {index}: {at_ms} ms"
        );
        if let Event::Call(Call { surface: Surface::Acquire, outcome: CallOutcome::Ok, lease: Some(lease), .. }) =
            &event
        {
            inner.grants.push(lease.clone());
            inner.latest.insert((lease.run.clone(), lease.owner.clone()), lease.clone());
        }
        if let Event::Call(c @ Call { surface: Surface::Acquire | Surface::Renew, lease: Some(lease), .. }) = &event
            && c.outcome.is_ok()
        {
            inner.extensions.insert((lease.run.clone(), lease.owner.clone(), lease.epoch), c.clock_ms);
        }
        inner.rows.push(Row { index, at_ms, node: node.to_owned(), role: (self.role_of)(node), event });
        Some(index)
    }

    /// Append a call, numbering it within its node's tenure (`Call::counter`). Its row's index,
    /// or `None` when the node is silenced (the row was dropped).
    pub fn push_call(&self, node: &str, mut call: Call) -> Option<usize> {
        if let Some(lease) = &call.lease
            && call.surface != Surface::Acquire
        {
            let mut inner = self.lock();
            if inner.silenced.contains(node) {
                return None;
            }
            // Keyed by node first, so that a call finds its node's counters without a new key.
            if !inner.counters.contains_key(node) {
                inner.counters.insert(node.to_owned(), BTreeMap::new());
            }
            let tenures = inner.counters.get_mut(node).expect("inserted above");
            let counter = tenures.entry((lease.run.clone(), lease.epoch)).or_default();
            *counter += 1;
            call.counter = *counter;
            // Per tenure, calls count from 1 (0 means unleased in a row).
            assert!(call.counter >= 1, "{node}: a leased call numbered 0");
        }
        self.push_row(node, Event::Call(call))
    }

    /// Every row, leaving the history empty: the world's end, without copying it.
    pub fn take_rows(&self) -> Vec<Row> {
        let mut inner = self.lock();
        inner.grants.clear();
        inner.extensions.clear();
        inner.latest.clear();
        std::mem::take(&mut inner.rows)
    }

    /// Leases granted so far, in grant order. A copy of them all: a caller that asks again and
    /// again as the history grows asks [`History::grants_since`] for the new ones instead.
    pub fn grants(&self) -> Vec<Lease> {
        self.lock().grants.clone()
    }

    /// The leases granted after the first `known`, in grant order: a caller that keeps what it
    /// read reads each grant once, however often it asks.
    pub fn grants_since(&self, known: usize) -> Vec<Lease> {
        self.lock().grants.get(known..).map_or_else(Vec::new, <[Lease]>::to_vec)
    }

    /// The latest lease granted to `owner` on `run`, if any.
    pub fn latest_grant(&self, run: &RunId, owner: &str) -> Option<Lease> {
        self.lock().latest.get(&(run.clone(), owner.to_owned())).cloned()
    }

    /// The caller's clock at the last call that set `lease`'s expiry (its grant or a renew that
    /// was accepted): the lease expires `ttl` after it. `None` if it was never granted. Kept as
    /// the rows are pushed, so asking costs no scan of the history.
    pub fn last_extension(&self, lease: &Lease) -> Option<i64> {
        self.lock().extensions.get(&(lease.run.clone(), lease.owner.clone(), lease.epoch)).copied()
    }
}

/// The store's final state, read after the world stopped: what the oracle diffs the serial
/// history against.
#[derive(Clone, Debug, Default, PartialEq, Hash)]
pub struct Snapshot {
    pub runs: BTreeMap<RunId, RunState>,
}

#[derive(Clone, Debug, Default, PartialEq, Hash)]
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
        let count = runs.len();
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
        // Every run listed or named has its state, an empty one included: the checkers diff each.
        assert_eq!(snapshot.runs.len(), count, "a snapshot skipped a run it was asked for");
        Ok(snapshot)
    }

    pub fn run(&self, run: &RunId) -> Option<&RunState> {
        self.runs.get(run)
    }
}
