//! One soak writer (a `fencesim soak-writer` process): its stamp clock, the recording store that
//! logs every call, and the writer protocol of contracts 5.3-5.5 over `soak-run`: tenures of
//! random fenced operations, stalls past the ttl, stale probe sweeps after re-reading the tail,
//! victim cycles with the epoch tombstone, and live cross-run probes.
//!
//! Ordering across processes: SQLite serializes write transactions with its write lock, and the
//! store reads its injected [`Clock`] exactly once inside each (after `BEGIN IMMEDIATE`). The
//! [`StampClock`] takes a system-wide monotonic reading at that moment, which the recorder logs:
//! two committed writes' stamps therefore order them as SQLite did.
//!
//! [`StampClock`] reads wall-clock ms plus the writer's skew, and every reading leaves a
//! `CLOCK_MONOTONIC` stamp; [`LoggedStore`] is a `Store` that logs a `begin` and an `end` line
//! around every call, one `write(2)` each (`log.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use fencesim_store::{
    Clock, FaultAction, FaultHook, FaultPoint, JournalEntry, JournalStore, LeasableStore, Lease, LeaseRejection,
    RunFilter, RunId, RunMeta, RunStatus, SqliteOptions, SqliteStore, Store, StoreDefects, StoreError, StoreResult,
    TranscriptStore,
};
use serde_json::json;

use super::log::{Begin, End, Ev, EvKind, Line, LogFile, LogOutcome, LogPayload, Probe, to_hex};
use super::wall::{mono_ns, sleep_ms, unix_ms};
use super::{OTHER_BLOB, RUN, SoakResult, owner_name};
use fencesim_oracle::history::Surface;
use fencesim_sim::rng::Stream;

/// Wall-clock ms plus the writer's skew; every reading also leaves a monotonic stamp behind.
#[derive(Debug, Default)]
pub struct StampClock {
    skew_ms: i64,
    last_mono: AtomicU64,
    last_ms: AtomicI64,
}

impl StampClock {
    pub fn new(skew_ms: i64) -> Self {
        Self { skew_ms, ..Self::default() }
    }

    /// The skewed time, leaving no stamp.
    pub fn peek_ms(&self) -> i64 {
        unix_ms().saturating_add(self.skew_ms)
    }

    fn clear(&self) {
        self.last_mono.store(0, Ordering::SeqCst);
    }

    /// The last reading since [`StampClock::clear`]: (clock ms, monotonic ns).
    fn stamp(&self) -> Option<(i64, u64)> {
        match self.last_mono.load(Ordering::SeqCst) {
            0 => None,
            mono => Some((self.last_ms.load(Ordering::SeqCst), mono)),
        }
    }
}

impl Clock for StampClock {
    fn now_ms(&self) -> i64 {
        let ms = self.peek_ms();
        self.last_ms.store(ms, Ordering::SeqCst);
        self.last_mono.store(mono_ns().max(1), Ordering::SeqCst);
        ms
    }
}

/// Log a line the judge or the quorum needs; a writer that cannot log it stops (exit 3) rather
/// than go on with its evidence incomplete.
fn put_or_die(log: &LogFile, line: &Line) {
    if let Err(e) = log.put(line) {
        eprintln!("fencesim soak-writer: {}", crate::proc::chain(&e));
        std::process::exit(3);
    }
}

fn outcome_of<T>(result: &StoreResult<T>) -> LogOutcome {
    match result {
        Ok(_) => LogOutcome::Ok,
        Err(StoreError::LeaseHeld(held)) => match &held.rejection {
            LeaseRejection::HeldBy { owner, epoch } => LogOutcome::HeldBy { owner: owner.clone(), epoch: epoch.0 },
            LeaseRejection::Stale { .. } => LogOutcome::Stale,
            LeaseRejection::RunMismatch { .. } => LogOutcome::RunMismatch,
        },
        Err(StoreError::JournalOrder { .. }) => LogOutcome::JournalOrder,
        Err(StoreError::Busy { .. }) => LogOutcome::Busy,
        Err(other) => LogOutcome::Error { code: other.code().to_owned() },
    }
}

/// The store a writer drives: fencesim's own, or a connection of a store adapter
/// (`--store cmd:...`, docs/protocol.md).
pub enum Inner {
    Sqlite(Box<SqliteStore>),
    Adapter(fencesim_protocol::CmdStore),
}

impl Inner {
    fn store(&self) -> &dyn Store {
        match self {
            Inner::Sqlite(store) => store.as_ref(),
            Inner::Adapter(store) => store,
        }
    }

    /// The lease capability (a soak's adapter must declare it: checked at open).
    fn leases(&self) -> StoreResult<&dyn LeasableStore> {
        self.store().leases().ok_or_else(|| StoreError::Config("the store has no leases".to_owned()))
    }

    /// The store adapter's failure, if it failed the protocol: then no call since is the store's
    /// answer.
    fn adapter_broken(&self) -> Option<fencesim_protocol::AdapterError> {
        match self {
            Inner::Sqlite(_) => None,
            Inner::Adapter(store) => store.adapter().broken(),
        }
    }

    /// Checkpoint fencesim's own WAL (PASSIVE); an adapter keeps its own files.
    fn checkpoint(&self) {
        if let Inner::Sqlite(store) = self {
            let _ = store.raw_connection().execute_batch("PRAGMA wal_checkpoint(PASSIVE)");
        }
    }
}

/// A store connection that logs a `begin` line before and an `end` line after every call.
pub struct LoggedStore {
    inner: Inner,
    clock: Arc<StampClock>,
    log: Arc<LogFile>,
    node: String,
    next_id: AtomicU64,
}

impl LoggedStore {
    pub fn new(inner: Inner, clock: Arc<StampClock>, log: Arc<LogFile>, node: String) -> Self {
        Self { inner, clock, log, node, next_id: AtomicU64::new(1) }
    }

    #[allow(clippy::too_many_arguments, reason = "one call's fields, named at every call site")]
    fn record<T>(
        &self,
        surface: Surface,
        run: &RunId,
        blob_ref: Option<&str>,
        lease: Option<&Lease>,
        owner: Option<&str>,
        payload: LogPayload,
        call: impl FnOnce() -> StoreResult<T>,
        granted: impl FnOnce(&T) -> Option<Lease>,
    ) -> StoreResult<T> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let begin_ms = self.clock.peek_ms();
        let begin_mono = mono_ns();
        let begin = Begin {
            id,
            node: self.node.clone(),
            surface,
            run: run.clone(),
            blob_ref: blob_ref.map(str::to_owned),
            lease: lease.cloned(),
            owner: owner.map(str::to_owned),
            payload,
            clock_ms: begin_ms,
            mono_ns: begin_mono,
        };
        self.log_or_die(&Line::Begin(begin));
        self.clock.clear();
        let result = call();
        if let Some(failure) = self.inner.adapter_broken() {
            // Not the store's answer: the call stays open (indeterminate), the writer stops.
            adapter_failed(&failure);
        }
        let stamp = self.clock.stamp();
        let (clock_ms, mono, stamped) = match stamp {
            Some((ms, mono)) => (ms, mono, true),
            None => (begin_ms, mono_ns(), false),
        };
        // The stamp the judge orders this call by was read after its begin line: on the
        // monotonic clock, never before the begin.
        assert!(mono >= begin_mono, "call {id} of {}: stamped before it began", self.node);
        let end = End {
            id,
            node: self.node.clone(),
            outcome: outcome_of(&result),
            granted: result.as_ref().ok().and_then(granted),
            clock_ms,
            mono_ns: mono,
            stamped,
        };
        self.log_or_die(&Line::End(end));
        result
    }

    /// A writer that cannot log cannot be judged: stop it at once (the referee sees the exit).
    fn log_or_die(&self, line: &Line) {
        put_or_die(&self.log, line);
    }

    fn plain<T>(
        &self,
        surface: Surface,
        run: &RunId,
        blob_ref: Option<&str>,
        lease: Option<&Lease>,
        payload: LogPayload,
        call: impl FnOnce() -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.record(surface, run, blob_ref, lease, None, payload, call, |_| None)
    }
}

impl JournalStore for LoggedStore {
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()> {
        self.plain(Surface::Append, run, None, lease, LogPayload::Entry(entry.clone()), || {
            self.inner.store().append(run, entry, lease)
        })
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        self.plain(Surface::Load, run, None, None, LogPayload::None, || self.inner.store().load(run))
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        self.plain(Surface::PutMeta, &meta.run_id, None, lease, LogPayload::Meta(meta.clone()), || {
            self.inner.store().put_meta(meta, lease)
        })
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        self.plain(Surface::ListRuns, &RunId::new("*"), None, None, LogPayload::None, || {
            self.inner.store().list_runs(filter)
        })
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        self.plain(Surface::GetMeta, run, None, None, LogPayload::None, || self.inner.store().get_meta(run))
    }

    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()> {
        self.plain(Surface::Delete, run, None, lease, LogPayload::None, || self.inner.store().delete(run, lease))
    }

    fn fenced_writes(&self) -> bool {
        self.inner.store().fenced_writes()
    }
}

impl LeasableStore for LoggedStore {
    fn acquire(&self, run: &RunId, owner: &str) -> StoreResult<Lease> {
        self.record(
            Surface::Acquire,
            run,
            None,
            None,
            Some(owner),
            LogPayload::None,
            || self.inner.leases()?.acquire(run, owner),
            |l| Some(l.clone()),
        )
    }

    fn renew(&self, lease: &Lease) -> StoreResult<()> {
        self.plain(Surface::Renew, &lease.run, None, Some(lease), LogPayload::None, || {
            self.inner.leases()?.renew(lease)
        })
    }

    fn release(&self, lease: &Lease) -> StoreResult<()> {
        self.plain(Surface::Release, &lease.run, None, Some(lease), LogPayload::None, || {
            self.inner.leases()?.release(lease)
        })
    }

    fn lease_ttl_ms(&self) -> u32 {
        self.inner.store().leases().map_or(0, LeasableStore::lease_ttl_ms)
    }
}

impl TranscriptStore for LoggedStore {
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> StoreResult<()> {
        let run = RunId::of_ref(blob_ref);
        self.plain(Surface::PutBlob, &run, Some(blob_ref), lease, LogPayload::Blob(to_hex(bytes)), || {
            self.inner.store().put_blob(blob_ref, bytes, lease)
        })
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        let run = RunId::of_ref(blob_ref);
        self.plain(Surface::GetBlob, &run, Some(blob_ref), None, LogPayload::None, || {
            self.inner.store().get_blob(blob_ref)
        })
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        self.plain(Surface::ListBlobs, run, None, None, LogPayload::None, || self.inner.store().list_blobs(run))
    }

    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()> {
        let run = RunId::of_ref(blob_ref);
        self.plain(Surface::DeleteBlob, &run, Some(blob_ref), lease, LogPayload::None, || {
            self.inner.store().delete_blob(blob_ref, lease)
        })
    }

    fn fenced_blob_writes(&self) -> bool {
        self.inner.store().fenced_blob_writes()
    }
}

impl Store for LoggedStore {
    fn leases(&self) -> Option<&dyn LeasableStore> {
        Some(self)
    }

    fn set_fault_hook(&self, hook: Option<FaultHook>) -> bool {
        self.inner.store().set_fault_hook(hook)
    }
}

/// What one writer process is told.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    pub db: PathBuf,
    pub log: PathBuf,
    pub stop: PathBuf,
    pub index: usize,
    pub generation: u32,
    pub seed: u64,
    pub ttl_ms: i64,
    pub skew_ms: i64,
    pub defects: StoreDefects,
    /// Open the store at this Unix ms, so that every first-generation writer boots at once.
    pub start_at_ms: Option<i64>,
    /// No mid-call stall has landed in the storm yet: stall early tenures as a first generation
    /// does (the referee says so while its `mid_call_stalls` counter is 0).
    pub owe_mid_call: bool,
    /// Checkpoint the WAL (PASSIVE) every this many tenures; 0 never.
    pub checkpoint_every: u32,
    /// Drive this store adapter's location (`db` is then its folder) instead of fencesim's store.
    pub adapter: Option<fencesim_protocol::Spec>,
}

/// How a writer whose store adapter failed the protocol exits: a harness failure the referee
/// accounts for as such (the storm proves nothing about the store from then on), never a finding
/// about the store. Its stderr's first line is the adapter's error.
pub const ADAPTER_FAILED_EXIT: i32 = 4;

/// The store adapter failed (it died, hung, answered garbage, or lacks what a soak needs): say
/// so on stderr and exit with [`ADAPTER_FAILED_EXIT`]; the adapter dies with this process.
fn adapter_failed(failure: &fencesim_protocol::AdapterError) -> ! {
    eprintln!("{failure}");
    std::process::exit(ADAPTER_FAILED_EXIT)
}

/// The writer's store: fencesim's own over the soak's file, or the adapter's connection over its
/// folder (which must keep leases and fence its writes: the storm is about nothing else). An
/// adapter's own failure here ends the writer ([`adapter_failed`]); the store's refusal to open
/// is the store's.
fn open_inner(cfg: &WriterConfig, clock: &Arc<StampClock>) -> SoakResult<Inner> {
    let clock: Arc<dyn fencesim_store::Clock> = clock.clone();
    match &cfg.adapter {
        None => {
            let options =
                SqliteOptions::file(&cfg.db, clock).lease_ttl_ms(cfg.ttl_ms).defects(cfg.defects).without_fsync();
            Ok(Inner::Sqlite(Box::new(SqliteStore::open(options)?)))
        }
        Some(spec) => {
            // In the writer's process group, which the referee stops, continues and kills whole.
            let spec = spec.clone().group(fencesim_protocol::ProcessGroup::Caller);
            let adapter = fencesim_protocol::Adapter::start(&spec).unwrap_or_else(|e| adapter_failed(&e));
            if let Err(e) = adapter.require_fenced_leases("a soak") {
                adapter_failed(&e);
            }
            // Started and shaken hands with, it opens at the storm's instant with the others: a
            // program's start takes hundreds of ms and varies by as much, and would spread the
            // first generation's opens out of each other's way (the boot race, B2, is the point).
            wait_until(cfg.start_at_ms);
            // The time of a timed call is read in-lock, so the judge orders the calls by the
            // instants the store decided them (as fencesim's own store reads its clock).
            let opened = adapter.open(&cfg.db, cfg.ttl_ms, clock);
            if let Some(e) = adapter.broken() {
                adapter_failed(&e);
            }
            Ok(Inner::Adapter(opened?.time_in_lock()))
        }
    }
}

/// Sleep until the Unix ms `at` (at most 10 s): the first generation's writers open the store at
/// one instant.
fn wait_until(at: Option<i64>) {
    if let Some(at) = at {
        let wait = at.saturating_sub(unix_ms());
        if wait > 0 {
            sleep_ms(wait.unsigned_abs().min(10_000));
        }
    }
}

/// Busy retries per call before the writer gives up on it (1-3 ms each: several seconds, longer
/// than the referee ever keeps a writer stopped inside a transaction).
const BUSY_ROUNDS: u32 = 3_000;

/// How one attempted call ended, for the protocol.
#[derive(Debug, PartialEq, Eq)]
enum Out {
    Ok,
    /// Refused for its lease (held-by, stale or run-mismatch).
    Lease,
    Order,
    /// Any other error, or busy retries exhausted.
    Other(String),
}

struct Writer {
    cfg: WriterConfig,
    store: LoggedStore,
    log: Arc<LogFile>,
    rng: Stream,
    owner: String,
    run: RunId,
    /// Ops under the current tenure, for nonces.
    n: u64,
    /// Tenures granted so far.
    granted: u32,
    /// Set: the next fenced call stalls past the ttl between its lease check and its mutation
    /// (inside the write transaction, over a correct store).
    mid_call: Arc<AtomicBool>,
    /// Set by the fault hook when a stall happened, cleared once the stalled call returned.
    stalled: Arc<AtomicBool>,
}

/// Chance per tenure that its next fenced call stalls mid-call (between check and mutation):
/// high in the first tenures of the first writers, and of later ones while no stall has landed
/// (every storm's quorum asks for one: D3 shows only in a stalled call that returns), low after:
/// over a correct store each one holds SQLite's write lock for the stall and starves every other
/// writer (in a release storm with a quarter of every restarted generation's first tenures
/// stalling, the lock was held for half the storm).
const MID_CALL_STALL_EARLY: f64 = 0.5;
const MID_CALL_STALL_LATE: f64 = 0.005;
const EARLY_TENURES: u32 = 4;

/// Run one writer to its end: until the stop file appears (exit 0), or a fatal error.
pub fn run(cfg: WriterConfig) -> SoakResult<()> {
    let log = Arc::new(LogFile::open(&cfg.log)?);
    let owner = owner_name(cfg.index, cfg.generation);
    let ev = |kind: EvKind| Ev {
        node: owner.clone(),
        w: cfg.index,
        g: cfg.generation,
        kind,
        mono_ns: mono_ns(),
        ..Ev::default()
    };
    log.put(&Line::Ev(Ev { detail: Some(format!("pid {}", std::process::id())), ..ev(EvKind::Start) }))?;
    // A store adapter's writer waits inside `open_inner`, between starting its adapter and opening.
    if cfg.adapter.is_none() {
        wait_until(cfg.start_at_ms);
    }
    let clock = Arc::new(StampClock::new(cfg.skew_ms));
    // No commit waits for the disk (`synchronous=OFF`): the soak's crashes are process deaths
    // (SIGKILL), which a committed write survives in the OS's cache, never a power loss; with a
    // sync per commit (5 ms on the development machine, under the write lock) the release storm's
    // few thousand commits were paced by the disk.
    let inner = match open_inner(&cfg, &clock) {
        Ok(store) => store,
        Err(e) => {
            let fatal = Ev { probe: Some(Probe::Boot), detail: Some(e.to_string()), ..ev(EvKind::Fatal) };
            log.put(&Line::Ev(fatal))?;
            return Err(e);
        }
    };
    log.put(&Line::Ev(ev(EvKind::Booted)))?;
    let (mid_call, stalled) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (armed, fired) = (mid_call.clone(), stalled.clone());
    let stall_ms = stall_ms(cfg.ttl_ms);
    inner.store().set_fault_hook(Some(Box::new(move |site| {
        if site.point == FaultPoint::FenceChecked && armed.swap(false, Ordering::SeqCst) {
            sleep_ms(stall_ms);
            fired.store(true, Ordering::SeqCst);
        }
        FaultAction::Resume
    })));
    let rng = Stream::new(cfg.seed).fork(&format!("writer/{}/{}", cfg.index, cfg.generation));
    let store = LoggedStore::new(inner, clock, log.clone(), owner.clone());
    let mut writer = Writer { cfg, store, log, rng, owner, run: RunId::new(RUN), n: 0, granted: 0, mid_call, stalled };
    let mut tenures = 0u32;
    while !writer.stopping() {
        writer.tenure()?;
        tenures += 1;
        if writer.cfg.checkpoint_every > 0 && tenures.is_multiple_of(writer.cfg.checkpoint_every) {
            // Best effort: a busy or failed passive checkpoint is retried at a later tenure.
            writer.store.inner.checkpoint();
        }
    }
    writer.event(EvKind::Done, |e| e)?;
    Ok(())
}

/// Chance that a tenure ends in a stall past the ttl (then a sweep) rather than a release.
const STALL_AT_TENURE_END: f64 = 0.1;

/// A stall past the ttl: ceil(ttl * 1.4) ms.
fn stall_ms(ttl_ms: i64) -> u64 {
    (u64::try_from(ttl_ms).unwrap_or(0) * 14).div_ceil(10)
}

impl Writer {
    fn stopping(&self) -> bool {
        self.cfg.stop.exists()
    }

    fn event(&self, kind: EvKind, fill: impl FnOnce(Ev) -> Ev) -> SoakResult<()> {
        self.log.put(&self.ev(kind, fill))
    }

    fn ev(&self, kind: EvKind, fill: impl FnOnce(Ev) -> Ev) -> Line {
        let ev = Ev {
            node: self.owner.clone(),
            w: self.cfg.index,
            g: self.cfg.generation,
            kind,
            mono_ns: mono_ns(),
            ..Ev::default()
        };
        Line::Ev(fill(ev))
    }

    /// An event of a call on `surface` under `epoch`, made while exercising `probe` (if any).
    fn ev_at(&self, kind: EvKind, surface: Surface, probe: Option<Probe>, epoch: i64) -> SoakResult<()> {
        self.event(kind, |e| Ev { surface: Some(surface), probe, epoch: Some(epoch), ..e })
    }

    /// An event of a probe that is not one store call (a stall, an armed mid-call stall).
    fn ev_probe(&self, kind: EvKind, probe: Probe, epoch: i64) -> SoakResult<()> {
        self.event(kind, |e| Ev { probe: Some(probe), epoch: Some(epoch), ..e })
    }

    /// Busy is retried (1-3 ms apart, logged); everything else classified.
    fn attempt<T>(
        &mut self,
        surface: Surface,
        mut call: impl FnMut(&LoggedStore) -> StoreResult<T>,
    ) -> (Out, Option<T>) {
        for _ in 0..BUSY_ROUNDS {
            let result = call(&self.store);
            if self.stalled.swap(false, Ordering::SeqCst) {
                self.stall_landed(surface, &result);
            }
            match result {
                Ok(v) => return (Out::Ok, Some(v)),
                Err(StoreError::Busy { .. }) => {
                    put_or_die(&self.log, &self.ev(EvKind::Busy, |e| Ev { surface: Some(surface), ..e }));
                    sleep_ms(self.rng.range(1, 3));
                }
                Err(StoreError::LeaseHeld(_)) => return (Out::Lease, None),
                Err(StoreError::JournalOrder { .. }) => return (Out::Order, None),
                Err(other) => return (Out::Other(other.to_string()), None),
            }
        }
        (Out::Other("transient retries exhausted".into()), None)
    }

    /// A mid-call stall's call returned. One that ended busy never reached its mutation, so the
    /// stall is owed again (the next fenced call under a live lease takes it); any other outcome
    /// landed, and is logged as `mid-call-landed` with it.
    fn stall_landed<T>(&self, surface: Surface, result: &StoreResult<T>) {
        if matches!(result, Err(StoreError::Busy { .. })) {
            self.mid_call.store(true, Ordering::SeqCst);
            return;
        }
        let outcome = match result {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.to_string(),
        };
        put_or_die(
            &self.log,
            &self.ev(EvKind::MidCallLanded, |e| Ev { surface: Some(surface), detail: Some(outcome), ..e }),
        );
    }

    fn error(&self, surface: Surface, probe: Option<Probe>, message: &str) -> SoakResult<()> {
        self.event(EvKind::Error, |e| Ev { surface: Some(surface), probe, detail: Some(message.to_owned()), ..e })
    }

    fn tail_seq(&mut self) -> Option<i64> {
        let run = self.run.clone();
        match self.attempt(Surface::Load, |s| s.load(&run)) {
            (Out::Ok, Some(entries)) => Some(entries.iter().map(|e| e.seq.0).max().unwrap_or(0)),
            _ => None,
        }
    }

    fn nonce(&mut self, lease: &Lease) -> String {
        self.n += 1;
        format!("w{}g{}-e{}-c{}", self.cfg.index, self.cfg.generation, lease.epoch, self.n)
    }

    /// An entry whose fields are flat strings: every JSON object is a map of its own in each
    /// process that parses the call's log line (the judge held three a logged append, a third
    /// of a release storm's history).
    fn entry(seq: i64, nonce: &str) -> JournalEntry {
        JournalEntry::new(seq, "step", "ok").with("key", json!(format!("soak-{nonce}"))).with("value", json!(nonce))
    }

    /// The soak run's meta as its holder puts it, stamped with `nonce`.
    fn meta(nonce: &str) -> RunMeta {
        let mut meta = RunMeta::new(RUN, RunStatus::Running);
        meta.extra.insert("updatedAt".into(), json!(format!("soak-{nonce}")));
        meta.extra.insert("soak".into(), json!(nonce));
        meta
    }

    fn blob(nonce: &str) -> Vec<u8> {
        json!({ "soak": { "nonce": nonce } }).to_string().into_bytes()
    }

    /// One op of a tenure's mix: half the ops are appends (the release floors ask four appends
    /// an epoch), a tenth victim cycles (two fifths of an epoch), the rest spread over the other
    /// surfaces, whose floors are small. Whether the lease is still alive after it.
    fn op(&mut self, lease: &Lease, tail: &mut i64, renewed_ms: &mut i64) -> SoakResult<bool> {
        let epoch = lease.epoch.0;
        if !self.renew_if_due(lease, renewed_ms)? {
            return Ok(false);
        }
        let dice = self.rng.unit_range(0.0, 1.0);
        let nonce = self.nonce(lease);
        let (surface, out) = if dice < 0.03 && *tail >= 1 {
            return self.seq_guard_probe(lease, *tail, &nonce);
        } else if dice < 0.53 {
            (Surface::Append, self.append_at_tail(lease, tail, &nonce))
        } else if dice < 0.62 {
            let meta = Self::meta(&nonce);
            (Surface::PutMeta, self.attempt(Surface::PutMeta, |s| s.put_meta(&meta, Some(lease))).0)
        } else if dice < 0.68 {
            let blob_ref = format!("{RUN}/blob-{}", self.rng.below(4));
            let bytes = Self::blob(&nonce);
            (Surface::PutBlob, self.attempt(Surface::PutBlob, |s| s.put_blob(&blob_ref, &bytes, Some(lease))).0)
        } else if dice < 0.74 {
            let blob_ref = format!("{RUN}/blob-{}", self.rng.below(4));
            (Surface::DeleteBlob, self.attempt(Surface::DeleteBlob, |s| s.delete_blob(&blob_ref, Some(lease))).0)
        } else if dice < 0.84 {
            self.victim(lease)?;
            return Ok(true);
        } else if dice < 0.92 {
            let before_ms = self.store.clock.peek_ms();
            let out = self.attempt(Surface::Renew, |s| s.renew(lease)).0;
            if out == Out::Ok {
                *renewed_ms = before_ms;
                self.ev_at(EvKind::Renewed, Surface::Renew, None, epoch)?;
                return Ok(true);
            }
            (Surface::Renew, out)
        } else {
            self.cross_run_probe(lease, &nonce)?;
            return Ok(true);
        };
        self.outcome(surface, out, epoch, *tail, nonce)
    }

    /// An append at the journal's `tail`, which moves on when the append is accepted.
    fn append_at_tail(&mut self, lease: &Lease, tail: &mut i64, nonce: &str) -> Out {
        let run = self.run.clone();
        let entry = Self::entry(*tail + 1, nonce);
        let out = self.attempt(Surface::Append, |s| s.append(&run, &entry, Some(lease))).0;
        if out == Out::Ok {
            *tail += 1;
        }
        out
    }

    /// The seq guard: a live holder appending at the stored `tail` must be refused. Whether the
    /// lease is still alive after it.
    fn seq_guard_probe(&mut self, lease: &Lease, tail: i64, nonce: &str) -> SoakResult<bool> {
        let (run, epoch) = (self.run.clone(), lease.epoch.0);
        let entry = Self::entry(tail, nonce);
        match self.attempt(Surface::Append, |s| s.append(&run, &entry, Some(lease))).0 {
            Out::Order => self.ev_at(EvKind::OrderReject, Surface::Append, Some(Probe::SeqGuard), epoch)?,
            Out::Ok => self.ev_at(EvKind::SeqProbeAccepted, Surface::Append, Some(Probe::SeqGuard), epoch)?,
            Out::Lease => {
                self.ev_at(EvKind::FenceKick, Surface::Append, Some(Probe::SeqGuard), epoch)?;
                return Ok(false);
            }
            Out::Other(m) => self.error(Surface::Append, Some(Probe::SeqGuard), &m)?,
        }
        Ok(true)
    }

    /// The live holder's blob put into the side run, which its lease does not guard: it must be
    /// refused.
    fn cross_run_probe(&mut self, lease: &Lease, nonce: &str) -> SoakResult<()> {
        let epoch = lease.epoch.0;
        let bytes = Self::blob(nonce);
        match self.attempt(Surface::PutBlob, |s| s.put_blob(OTHER_BLOB, &bytes, Some(lease))).0 {
            Out::Lease => self.ev_at(EvKind::LiveCrossReject, Surface::PutBlob, Some(Probe::CrossRunLive), epoch),
            Out::Ok => self.ev_at(EvKind::StaleAccept, Surface::PutBlob, Some(Probe::CrossRunLive), epoch),
            Out::Order => self.error(Surface::PutBlob, Some(Probe::CrossRunLive), "order violation on a blob"),
            Out::Other(m) => self.error(Surface::PutBlob, Some(Probe::CrossRunLive), &m),
        }
    }

    /// A live holder renews once a third of its ttl has passed (the engine's rule); whether the
    /// lease is still alive.
    fn renew_if_due(&mut self, lease: &Lease, renewed_ms: &mut i64) -> SoakResult<bool> {
        let epoch = lease.epoch.0;
        // A live holder renews once a third of its ttl has passed (the engine's rule), so a
        // tenure slowed by the write lock is not cut by its own expiry: expiries stay the
        // stalls' and the referee's doing.
        let now_ms = self.store.clock.peek_ms();
        if now_ms.saturating_sub(*renewed_ms) * 3 >= self.cfg.ttl_ms {
            match self.attempt(Surface::Renew, |s| s.renew(lease)).0 {
                Out::Ok => {
                    *renewed_ms = now_ms;
                    self.ev_at(EvKind::Renewed, Surface::Renew, None, epoch)?;
                }
                Out::Lease => {
                    self.ev_at(EvKind::FenceKick, Surface::Renew, None, epoch)?;
                    return Ok(false);
                }
                Out::Order => {
                    self.error(Surface::Renew, None, "order violation on a renew")?;
                    return Ok(false);
                }
                Out::Other(m) => {
                    self.error(Surface::Renew, None, &m)?;
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Log an op's outcome; whether the lease is still alive after it.
    fn outcome(&mut self, surface: Surface, out: Out, epoch: i64, tail: i64, nonce: String) -> SoakResult<bool> {
        match out {
            Out::Ok => {
                self.event(EvKind::Accept, |e| Ev {
                    surface: Some(surface),
                    epoch: Some(epoch),
                    seq: (surface == Surface::Append).then_some(tail),
                    detail: Some(nonce),
                    ..e
                })?;
                return Ok(true);
            }
            Out::Lease => self.ev_at(EvKind::FenceKick, surface, None, epoch)?,
            Out::Order => self.error(surface, None, "order violation under a live lease")?,
            Out::Other(m) => self.error(surface, None, &m)?,
        }
        Ok(false)
    }

    /// Arm a stall inside the tenure's next store call, more often in a writer's first tenures
    /// (and those of a writer that owes one).
    fn arm_mid_call_stall(&mut self, epoch: i64) -> SoakResult<()> {
        let early = (self.cfg.generation == 0 || self.cfg.owe_mid_call) && self.granted <= EARLY_TENURES;
        let chance = if early { MID_CALL_STALL_EARLY } else { MID_CALL_STALL_LATE };
        if self.rng.chance(chance) {
            self.mid_call.store(true, Ordering::SeqCst);
            self.ev_probe(EvKind::MidCallStall, Probe::MidCall, epoch)?;
        }
        Ok(())
    }

    /// One tenure (5.3). Returns Err only on a fatal harness error.
    fn tenure(&mut self) -> SoakResult<()> {
        self.n = 0;
        let Some(lease) = self.acquire_run()? else { return Ok(()) };
        let epoch = lease.epoch.0;
        let mut renewed_ms = self.store.clock.peek_ms();
        self.event(EvKind::Grant, |e| Ev { epoch: Some(epoch), target: Some(RUN.into()), ..e })?;
        self.granted += 1;
        self.arm_mid_call_stall(epoch)?;
        let Some(mut tail) = self.tail_seq() else {
            self.sweep(&lease)?;
            return Ok(());
        };
        // The marker: the first act as owner.
        let run = self.run.clone();
        let nonce = self.nonce(&lease);
        let entry = Self::entry(tail + 1, &nonce);
        match self.attempt(Surface::Append, |s| s.append(&run, &entry, Some(&lease))).0 {
            Out::Ok => {
                tail += 1;
                self.event(EvKind::Accept, |e| Ev {
                    surface: Some(Surface::Append),
                    probe: Some(Probe::Marker),
                    epoch: Some(epoch),
                    seq: Some(tail),
                    ..e
                })?;
            }
            Out::Lease => {
                self.ev_at(EvKind::FenceKick, Surface::Append, Some(Probe::Marker), epoch)?;
                return self.sweep(&lease);
            }
            Out::Order => {
                return self.error(Surface::Append, Some(Probe::Marker), "order violation under a live lease");
            }
            Out::Other(m) => return self.error(Surface::Append, Some(Probe::Marker), &m),
        }
        if !self.op_mix(&lease, &mut tail, &mut renewed_ms)? {
            return self.sweep(&lease);
        }
        self.end_tenure(&lease)
    }

    /// Acquire the soak run: the lease, or none when refused or failed (after a back-off of a
    /// few ms) or on a journal order error (logged).
    fn acquire_run(&mut self) -> SoakResult<Option<Lease>> {
        let (run, owner) = (self.run.clone(), self.owner.clone());
        match self.attempt(Surface::Acquire, |s| s.acquire(&run, &owner)) {
            (Out::Ok, Some(lease)) => Ok(Some(lease)),
            (Out::Lease | Out::Ok, _) | (Out::Other(_), _) => {
                sleep_ms(self.rng.range(3, 14));
                Ok(None)
            }
            (Out::Order, _) => self.error(Surface::Acquire, None, "journal order on acquire").map(|()| None),
        }
    }

    /// The op mix (see `op`): 4 to 9 ops while the lease lives and the writer is not stopping;
    /// whether the lease is still alive.
    fn op_mix(&mut self, lease: &Lease, tail: &mut i64, renewed_ms: &mut i64) -> SoakResult<bool> {
        let ops = self.rng.range(4, 10);
        let mut alive = true;
        for _ in 0..ops {
            if !alive || self.stopping() {
                break;
            }
            alive = self.op(lease, tail, renewed_ms)?;
        }
        Ok(alive)
    }

    /// A tenure's end with its lease alive: a stall past its expiry now and then, else a release;
    /// the dead lease is swept either way.
    fn end_tenure(&mut self, lease: &Lease) -> SoakResult<()> {
        let epoch = lease.epoch.0;
        // A stalled holder keeps the run locked until its lease expires, so the stall share
        // bounds the storm's tenure rate (the reference's 0.5 held the release storm to about
        // six epochs a second; at 0.3, with commits no longer waiting for the disk, stalls took
        // 16 of a loaded release storm's 37 s, and 10 of 30 s at 0.2). A tenth still gives every
        // storm real expiries of a live holder that knows it stalled, besides those of the
        // referee's SIGSTOPs (one at least per refused zombie: a holder that does not know).
        if self.rng.chance(STALL_AT_TENURE_END) {
            self.ev_probe(EvKind::Stall, Probe::TenureStall, epoch)?;
            sleep_ms(stall_ms(self.cfg.ttl_ms));
            return self.sweep(lease);
        }
        match self.attempt(Surface::Release, |s| s.release(lease)).0 {
            // A released lease is as dead as an expired one: sweep it too (beyond the
            // reference, which sweeps only after a stall or a fence kick).
            Out::Ok => {
                self.ev_at(EvKind::Released, Surface::Release, None, epoch)?;
                self.sweep(lease)
            }
            _ => {
                self.ev_at(EvKind::FenceKick, Surface::Release, None, epoch)?;
                self.sweep(lease)
            }
        }
    }

    /// The stale probe sweep (5.4): every write surface with a dead lease, each must be refused;
    /// then the same surfaces with a forged lease at the next epoch, the one a successor most
    /// likely holds now (W7: a foreign owner at the live epoch is refused on every surface).
    fn sweep(&mut self, dead: &Lease) -> SoakResult<()> {
        self.probe_surfaces(dead, Probe::DeadLease)?;
        let forged = Lease {
            run: dead.run.clone(),
            owner: format!("forger-w{}g{}", self.cfg.index, self.cfg.generation),
            epoch: fencesim_store::Epoch(dead.epoch.0.saturating_add(1)),
        };
        self.probe_surfaces(&forged, Probe::ForgedLease)
    }

    /// One probe of every write surface under `lease`, which must not be the live holder's; the
    /// refusals count as stale rejects (probe names carry `prefix`).
    /// Every write surface under `lease` (dead or forged, as `probe` says), then a blob put into
    /// the side run; each must be refused.
    fn probe_surfaces(&mut self, lease: &Lease, probe: Probe) -> SoakResult<()> {
        let epoch = lease.epoch.0;
        let stale_nonce = format!("stale-w{}g{}-e{epoch}", self.cfg.index, self.cfg.generation);
        const STEPS: [(Surface, bool); 8] = [
            (Surface::Append, false),
            (Surface::PutMeta, false),
            (Surface::PutBlob, false),
            (Surface::DeleteBlob, false),
            (Surface::Delete, false),
            (Surface::Renew, false),
            (Surface::PutBlob, true),
            (Surface::Release, false),
        ];
        for (surface, cross_run) in STEPS {
            let Some(out) = self.stale_call(surface, cross_run, lease, &stale_nonce) else { continue };
            let target = cross_run.then(|| OTHER_BLOB.to_owned());
            let kind = match out {
                Out::Ok => EvKind::StaleAccept,
                Out::Lease => EvKind::StaleReject,
                Out::Order => EvKind::Error,
                Out::Other(_) => EvKind::Error,
            };
            let detail = match out {
                Out::Order => Some("order violation where the fence should reject first".to_owned()),
                Out::Other(m) => Some(m),
                Out::Ok | Out::Lease => None,
            };
            self.event(kind, |e| Ev {
                surface: Some(surface),
                probe: Some(probe),
                epoch: Some(epoch),
                target,
                detail,
                ..e
            })?;
        }
        Ok(())
    }

    /// One write surface's call under `lease` (a stale one), the blob put into the side run when
    /// `cross_run`: its outcome, or none for an append when the journal cannot be read.
    fn stale_call(&mut self, surface: Surface, cross_run: bool, lease: &Lease, stale_nonce: &str) -> Option<Out> {
        let run = self.run.clone();
        let blob_ref = format!("{RUN}/blob-0");
        Some(match surface {
            Surface::Append => {
                let tail = self.tail_seq()?;
                let entry = Self::entry(tail + 1, stale_nonce);
                self.attempt(surface, |s| s.append(&run, &entry, Some(lease))).0
            }
            Surface::PutMeta => {
                let mut meta = RunMeta::new(RUN, RunStatus::Cancelled);
                meta.extra.insert("updatedAt".into(), json!(format!("stale-w{}", self.cfg.index)));
                self.attempt(surface, |s| s.put_meta(&meta, Some(lease))).0
            }
            Surface::PutBlob => {
                let bytes = Self::blob(stale_nonce);
                let target = if cross_run { OTHER_BLOB } else { blob_ref.as_str() };
                self.attempt(surface, |s| s.put_blob(target, &bytes, Some(lease))).0
            }
            Surface::DeleteBlob => self.attempt(surface, |s| s.delete_blob(&blob_ref, Some(lease))).0,
            Surface::Delete => self.attempt(surface, |s| s.delete(&run, Some(lease))).0,
            Surface::Renew => self.attempt(surface, |s| s.renew(lease)).0,
            Surface::Release => self.attempt(surface, |s| s.release(lease)).0,
            Surface::Acquire
            | Surface::Load
            | Surface::GetMeta
            | Surface::ListRuns
            | Surface::GetBlob
            | Surface::ListBlobs => unreachable!("the sweep probes write surfaces only"),
        })
    }

    /// The victim cycle (5.5) plus the tombstone: a fenced delete and recreate of a side run,
    /// then one more acquire of the same id, whose epoch must exceed the deleted one's.
    fn victim(&mut self, soak_lease: &Lease) -> SoakResult<()> {
        let vid = RunId::new(format!("victim-w{}-e{}-{}", self.cfg.index, soak_lease.epoch, self.n));
        let owner = self.owner.clone();
        let abandoned = |w: &Self, surface: Surface, why: &str| {
            w.event(EvKind::VictimAbandoned, |e| Ev {
                target: Some(vid.to_string()),
                surface: Some(surface),
                probe: Some(Probe::Victim),
                detail: Some(why.to_owned()),
                ..e
            })
        };
        let lease = match self.attempt(Surface::Acquire, |s| s.acquire(&vid, &owner)) {
            (Out::Ok, Some(lease)) => lease,
            (out, _) => return abandoned(self, Surface::Acquire, &format!("{out:?}")),
        };
        let blob_ref = format!("{vid}/blob");
        let entry = Self::entry(1, &format!("victim-{vid}"));
        let meta = RunMeta::new(vid.clone(), RunStatus::Running);
        let bytes = Self::blob(&format!("victim-{vid}"));
        for step in 0..5 {
            let (surface, out) = match step {
                0 => (Surface::Append, self.attempt(Surface::Append, |s| s.append(&vid, &entry, Some(&lease))).0),
                1 => (Surface::PutMeta, self.attempt(Surface::PutMeta, |s| s.put_meta(&meta, Some(&lease))).0),
                2 => (
                    Surface::PutBlob,
                    self.attempt(Surface::PutBlob, |s| s.put_blob(&blob_ref, &bytes, Some(&lease))).0,
                ),
                3 => (
                    Surface::DeleteBlob,
                    self.attempt(Surface::DeleteBlob, |s| s.delete_blob(&blob_ref, Some(&lease))).0,
                ),
                _ => (Surface::Delete, self.attempt(Surface::Delete, |s| s.delete(&vid, Some(&lease))).0),
            };
            if out != Out::Ok {
                return abandoned(self, surface, &format!("{out:?}"));
            }
        }
        self.event(EvKind::Victim, |e| Ev { epoch: Some(lease.epoch.0), target: Some(vid.to_string()), ..e })?;
        let again = match self.attempt(Surface::Acquire, |s| s.acquire(&vid, &owner)) {
            (Out::Ok, Some(again)) => again,
            (out, _) => return abandoned(self, Surface::Acquire, &format!("tombstone: {out:?}")),
        };
        self.event(EvKind::Tombstone, |e| Ev {
            epoch: Some(lease.epoch.0),
            other_epoch: Some(again.epoch.0),
            target: Some(vid.to_string()),
            ..e
        })?;
        if self.attempt(Surface::Release, |s| s.release(&again)).0 != Out::Ok {
            return abandoned(self, Surface::Release, "tombstone: refused");
        }
        Ok(())
    }
}
