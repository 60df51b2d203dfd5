//! The Rust client of the store protocol: an [`Adapter`] is one adapter process after its
//! handshake; [`Adapter::open`] gives a [`CmdStore`], one connection of it over a location, which
//! implements the store SPI, so everything in fencesim that takes a store takes an adapter.
//!
//! Time comes from the caller: a request whose call needs time (an acquire, a renew, a release, a
//! write under a lease) carries the connection's clock reading as `now_ms`, so an adapter never
//! reads a clock of its own and a simulated world stays deterministic. With
//! [`CmdStore::time_in_lock`] (the real-process soak, where the instant matters) it carries
//! `now_ms: null` instead, and the adapter asks for the time at the point it would read a clock,
//! inside its transaction: fencesim reads the clock then, as its own store does. A fault
//! hook is honoured through callbacks: a request sent while a hook is installed says
//! `"faults": true`, the adapter stops at each fault point with a `fault` line, and fencesim runs
//! the hook (which may call the same adapter on another connection; the adapter serves those
//! calls while it waits) before answering `resume`.
//!
//! One process serves every connection it opens, one request at a time: a simulated world or a
//! kit run is single-threaded, and each worker thread of a sweep has its own process.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use fencesim_store::{
    Clock, FaultAction, FaultHook, FaultPoint, FaultSite, JournalEntry, JournalStore, LeasableStore, Lease, Op,
    RunFilter, RunId, RunMeta, Store, StoreError, StoreResult, TranscriptStore,
};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{AdapterError, Failure};
use crate::process::Process;
use crate::request::{self, Call, CallLine, NowMs, Reply, Request, Resume, TimeGiven, WireFilter, lease_arg};
use crate::spec::Spec;
use crate::wire::{self, AdapterLine, FaultLine, FaultName, True, WireLease};

/// What an adapter said about itself in its handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub name: String,
    /// It keeps leases (`acquire`, `renew`, `release`).
    pub leases: bool,
    /// It fences journal, meta and blob writes with the caller's lease (W6, T2).
    pub fenced_writes: bool,
    /// It calls back at the fault points of `store/src/fault.rs`.
    pub fault_points: bool,
    /// It keeps every integer of a payload exactly. `false` is a declared property of the store
    /// (rulvar's stores read payloads back as JavaScript doubles and round integers beyond 2^53);
    /// the kit then reports `a4-exact-integers` as skipped for that reason. Absent means `true`.
    pub exact_integers: bool,
}

/// One adapter process after a successful handshake. Clones share it; it is killed when the last
/// clone and the last of its stores drop.
#[derive(Clone)]
pub struct Adapter(Arc<Shared>);

/// How many answered requests are remembered, to name a second answer to one of them.
const ANSWERED: usize = 16;

struct Shared {
    spec: Spec,
    hello: Hello,
    process: Mutex<Process>,
    next_id: AtomicU64,
    /// The requests answered last (id, op), newest last.
    answered: Mutex<VecDeque<(u64, String)>>,
    /// The first protocol failure: every later call fails with it, and the harness reports it.
    broken: Mutex<Option<AdapterError>>,
}

/// A call's failure: the store's typed answer, or the adapter's own failure.
enum CallError {
    Store(StoreError),
    Adapter(AdapterError),
}

impl Adapter {
    /// Start the adapter and shake hands: the protocol version must be this build's.
    pub fn start(spec: &Spec) -> Result<Adapter, AdapterError> {
        let mut process = Process::spawn(spec)?;
        process.send("hello", &request::line(&Request::hello()))?;
        let text = process.recv("hello")?;
        let garbage =
            |process: &mut Process, why: String| process.fail("hello", Failure::Garbage { line: text.clone(), why });
        let ok = match AdapterLine::parse(&text) {
            Ok(AdapterLine::Ok(line)) if line.id == 0 => line.ok,
            Ok(line) if line.id() != 0 => return Err(process.fail("hello", Failure::Unasked { line: text })),
            Ok(_) => return Err(garbage(&mut process, "the handshake's answer is not `ok`".to_owned())),
            Err(why) => return Err(garbage(&mut process, why)),
        };
        // The version first, whatever the rest of another version's handshake looks like.
        let version = wire::HelloVersion::deserialize(&ok).map_or(Value::Null, |v| v.protocol);
        if version.as_u64() != Some(u64::from(wire::PROTOCOL_VERSION)) {
            return Err(process.fail("hello", Failure::Version { theirs: version.to_string() }));
        }
        let hello = match wire::HelloOk::deserialize(&ok) {
            Ok(hello) if !hello.name.is_empty() => hello,
            Ok(_) => return Err(garbage(&mut process, "the handshake names no adapter".to_owned())),
            Err(e) => return Err(garbage(&mut process, format!("not the handshake's answer: {e}"))),
        };
        let caps = hello.capabilities;
        let hello = Hello {
            name: hello.name,
            leases: caps.leases,
            fenced_writes: caps.fenced_writes,
            fault_points: caps.fault_points,
            exact_integers: caps.exact_integers,
        };
        Ok(Adapter(Arc::new(Shared {
            spec: spec.clone(),
            hello,
            process: Mutex::new(process),
            next_id: AtomicU64::new(1),
            answered: Mutex::new(VecDeque::with_capacity(ANSWERED)),
            broken: Mutex::new(None),
        })))
    }

    pub fn spec(&self) -> &Spec {
        &self.0.spec
    }

    pub fn hello(&self) -> &Hello {
        &self.0.hello
    }

    /// The adapter process's pid (the leader of its process group, unless it runs in the
    /// caller's).
    pub fn pid(&self) -> u32 {
        lock(&self.0.process).pid()
    }

    /// The adapter's first protocol failure, if it had one: whatever ran on it is not a verdict.
    pub fn broken(&self) -> Option<AdapterError> {
        lock(&self.0.broken).clone()
    }

    /// Refuse an adapter whose handshake lacks leases or fenced writes, which `needed_by` (a
    /// command storming lease-fenced writes) cannot do without: a harness error, not a verdict.
    pub fn require_fenced_leases(&self, needed_by: &'static str) -> Result<(), AdapterError> {
        let hello = self.hello();
        let missing: Vec<&str> = [("leases", hello.leases), ("fenced writes", hello.fenced_writes)]
            .into_iter()
            .filter_map(|(what, has)| (!has).then_some(what))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let failure = Failure::Lacks { what: missing.join(" and "), needed_by };
        Err(self.0.spec.error("hello", failure, String::new()))
    }

    /// Open a connection over `location` (a folder the harness made for the adapter's files) with
    /// this raw lease ttl, which the adapter validates (contracts B1). Its calls read `clock`.
    pub fn open(&self, location: &Path, ttl_ms: i64, clock: Arc<dyn Clock>) -> StoreResult<CmdStore> {
        let request = Request::Open { id: 0, location: location.to_string_lossy().into_owned(), ttl_ms };
        let ok = self.call(request, None, None).map_err(|e| self.store_error(Op::Boot, e))?;
        let opened: wire::Opened = self.decode(Op::Boot, "open", &ok)?;
        let ttl_ms = u32::try_from(opened.ttl_ms).unwrap_or(u32::MAX);
        Ok(CmdStore {
            adapter: self.clone(),
            conn: opened.conn,
            ttl_ms,
            clock,
            hook: RefCell::new(None),
            time_in_lock: false,
        })
    }

    /// One request and its answer: the `ok` value, or the typed error. Fault callbacks and asks
    /// for the time (read from `clock`) are answered on the way; the process lock is not held
    /// while a hook runs.
    fn call(
        &self,
        mut request: Request,
        hook: Option<&RefCell<Option<FaultHook>>>,
        clock: Option<&dyn Clock>,
    ) -> Result<Value, CallError> {
        let (op, name) = (request.op(), request.name());
        let id = self.send(&mut request, hook)?;
        let clock = clock.filter(|_| !request.gives_time());
        // Where a hook cut the call (the caller died there), if one did: the adapter, another
        // process, finishes the call all the same, and its answer is discarded.
        let mut cut: Option<FaultPoint> = None;
        loop {
            let (line, text) = self.next_line(name, id)?;
            let garbage = |why: String| Failure::Garbage { line: text.clone(), why };
            let reply = match line {
                AdapterLine::Ok(_) | AdapterLine::Error(_) if let Some(point) = cut => {
                    self.answered(id, name);
                    let why = format!("cut at {}: the caller died", point.as_str());
                    return Err(CallError::Store(StoreError::storage(op, why)));
                }
                AdapterLine::Ok(answer) => {
                    self.answered(id, name);
                    return Ok(answer.ok);
                }
                AdapterLine::Error(answer) => return Err(self.error_answer(id, name, &answer.error, &text)),
                AdapterLine::Time(_) => match clock {
                    Some(clock) => Reply::Time(TimeGiven { id, now_ms: clock.now_ms() }),
                    None => {
                        return Err(self.adapter_failure(name, garbage("asked for a time it was given".to_owned())));
                    }
                },
                AdapterLine::Fault(fault) => {
                    if let Some(point) = stopped(hook, op, fault) {
                        cut.get_or_insert(point);
                    }
                    Reply::Resume(Resume { id, resume: True })
                }
            };
            self.with_process(|p| p.send(name, &request::line(&reply)))?;
        }
    }

    /// Number `request` and send it, telling the adapter whether a fault hook is set: its id. A
    /// broken adapter, or one that wrote a line nobody asked for, is refused first.
    fn send(&self, request: &mut Request, hook: Option<&RefCell<Option<FaultHook>>>) -> Result<u64, CallError> {
        let name = request.name();
        if let Some(broken) = self.broken() {
            return Err(CallError::Adapter(self.0.spec.error(
                name,
                Failure::Broken(broken.to_string()),
                String::new(),
            )));
        }
        self.nothing_unasked()?;
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        // Id 0 is the handshake's: an answer to any request names an id of its own.
        assert!(id > 0, "a request numbered as the handshake");
        request.set_id(id);
        if let Request::Call(line) = request {
            line.faults = hook.is_some_and(|h| h.borrow().is_some());
        }
        self.with_process(|p| p.send(name, &request::line(request)))?;
        Ok(id)
    }

    /// The adapter's next line, parsed, with its text; it must answer request `id` (`name`).
    fn next_line(&self, name: &str, id: u64) -> Result<(AdapterLine, String), CallError> {
        let text = self.with_process(|p| p.recv(name))?;
        let line = match AdapterLine::parse(&text) {
            Ok(line) => line,
            Err(why) => return Err(self.adapter_failure(name, Failure::Garbage { line: text, why })),
        };
        if line.id() != id {
            return Err(self.misdirected(name, line.id(), text));
        }
        Ok((line, text))
    }

    /// An error answer to request `id` (`name`, its line `text`): the store's typed error, or a
    /// broken adapter when the error object is not one the protocol knows.
    fn error_answer(&self, id: u64, name: &str, object: &Value, text: &str) -> CallError {
        match wire::parse_error(object) {
            Ok(error) => {
                self.answered(id, name);
                CallError::Store(error)
            }
            Err(why) => {
                let why = format!("an unknown error object: {why}");
                self.adapter_failure(name, Failure::Garbage { line: text.to_owned(), why })
            }
        }
    }

    /// Between requests the adapter owes nothing: a line already written now (a second answer to
    /// the last request, typically) breaks it, named by the request it follows.
    fn nothing_unasked(&self) -> Result<(), CallError> {
        let last = lock(&self.0.answered).back().map_or_else(|| "hello".to_owned(), |(_, op)| op.clone());
        let Some(text) = self.with_process(|p| p.stray(&last))? else { return Ok(()) };
        match AdapterLine::parse(&text) {
            Ok(line) => Err(self.misdirected(&last, line.id(), text)),
            Err(why) => Err(self.adapter_failure(&last, Failure::Garbage { line: text, why })),
        }
    }

    /// A line for another request than `request`'s: a second answer to one answered before, or
    /// one to a request never made.
    fn misdirected(&self, request: &str, id: u64, line: String) -> CallError {
        let earlier = lock(&self.0.answered).iter().find(|(answered, _)| *answered == id).map(|(_, op)| op.clone());
        match earlier {
            Some(op) => self.adapter_failure(&op, Failure::AnsweredTwice { id, line }),
            None => self.adapter_failure(request, Failure::Unasked { line }),
        }
    }

    fn answered(&self, id: u64, op: &str) {
        let mut answered = lock(&self.0.answered);
        if answered.len() == ANSWERED {
            answered.pop_front();
        }
        answered.push_back((id, op.to_owned()));
        assert!(answered.len() <= ANSWERED, "{} answered requests remembered, past {ANSWERED}", answered.len());
    }

    fn with_process<T>(&self, f: impl FnOnce(&mut Process) -> Result<T, AdapterError>) -> Result<T, CallError> {
        let result = f(&mut lock(&self.0.process));
        result.map_err(|e| self.record(e))
    }

    /// The adapter broke the protocol: its group is killed and the failure recorded.
    fn adapter_failure(&self, request: &str, failure: Failure) -> CallError {
        let error = lock(&self.0.process).fail(request, failure);
        self.record(error)
    }

    fn record(&self, error: AdapterError) -> CallError {
        lock(&self.0.broken).get_or_insert_with(|| error.clone());
        CallError::Adapter(error)
    }

    /// An `ok` answer as what `request` answers; one of another shape breaks the adapter.
    fn decode<'a, T: Deserialize<'a>>(&self, op: Op, request: &str, value: &'a Value) -> StoreResult<T> {
        T::deserialize(value).map_err(|e| {
            let why = format!("not what {request} answers: {e}");
            self.store_error(op, self.adapter_failure(request, Failure::Garbage { line: value.to_string(), why }))
        })
    }

    /// A call's failure as the SPI answers it: an adapter failure is a storage error (and stays
    /// recorded in [`Adapter::broken`], which the harness checks before any verdict).
    fn store_error(&self, op: Op, error: CallError) -> StoreError {
        match error {
            CallError::Store(error) => error,
            CallError::Adapter(error) => StoreError::storage(op, error.to_string()),
        }
    }
}

/// A call stopped at a fault point: run the hook there; where it cuts the call (the caller died
/// there), that point.
fn stopped(hook: Option<&RefCell<Option<FaultHook>>>, op: Op, fault: FaultLine) -> Option<FaultPoint> {
    let point = match fault.fault {
        FaultName::FenceChecked => FaultPoint::FenceChecked,
        FaultName::AcquireChecked => FaultPoint::AcquireChecked,
    };
    let run = RunId::new(fault.run);
    (fire(hook, &FaultSite { point, op, run: &run }) == FaultAction::Crash).then_some(point)
}

/// Run the hook, taken out of its slot while it runs (as `SqliteStore` does).
fn fire(hook: Option<&RefCell<Option<FaultHook>>>, site: &FaultSite<'_>) -> FaultAction {
    let Some(slot) = hook else { return FaultAction::Resume };
    let Some(mut run) = slot.borrow_mut().take() else { return FaultAction::Resume };
    let action = run(site);
    let mut slot = slot.borrow_mut();
    if slot.is_none() {
        *slot = Some(run);
    }
    action
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One connection of an adapter over one location: a fencesim store. `Send`, not `Sync`, like
/// `SqliteStore`.
pub struct CmdStore {
    adapter: Adapter,
    conn: u64,
    ttl_ms: u32,
    clock: Arc<dyn Clock>,
    hook: RefCell<Option<FaultHook>>,
    time_in_lock: bool,
}

impl CmdStore {
    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// Have the adapter ask for the time inside its transaction instead of sending it with the
    /// request (`now_ms: null`): the clock is read at the instant the store decides, as fencesim's
    /// own store reads it, which is what a judge of real processes orders calls by. One more
    /// round trip per timed call; in a simulated world, where no time passes during a call, the
    /// two are the same.
    pub fn time_in_lock(mut self) -> Self {
        self.time_in_lock = true;
        self
    }

    /// The time a timed call carries: the clock read now, or `None`: the adapter asks in-lock.
    fn now(&self) -> NowMs {
        (!self.time_in_lock).then(|| self.clock.now_ms())
    }

    /// A write's time: a fenced write is timed, an unfenced one carries none.
    fn now_if(&self, lease: Option<&Lease>) -> Option<NowMs> {
        lease.map(|_| self.now())
    }

    /// One SPI call on this connection.
    fn call(&self, call: Call) -> StoreResult<Value> {
        let op = call.op();
        let request = Request::Call(CallLine { id: 0, conn: self.conn, faults: false, call });
        let clock: &dyn Clock = self.clock.as_ref();
        self.adapter.call(request, Some(&self.hook), Some(clock)).map_err(|e| self.adapter.store_error(op, e))
    }

    /// A call whose `ok` is a `T`: an answer of another shape breaks the adapter.
    fn typed<T: serde::de::DeserializeOwned>(&self, call: Call) -> StoreResult<T> {
        let op = call.op();
        let value = self.call(call)?;
        self.adapter.decode(op, op.as_str(), &value)
    }

    /// A write answered `null`.
    fn unit(&self, call: Call) -> StoreResult<()> {
        self.typed(call)
    }
}

impl Drop for CmdStore {
    fn drop(&mut self) {
        let _ = self.adapter.call(Request::Close { id: 0, conn: self.conn }, None, None);
    }
}

impl JournalStore for CmdStore {
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()> {
        entry.check_fields(run)?;
        let (run, entry) = (run.as_str().to_owned(), entry.clone());
        self.unit(Call::Append { run, entry, lease: lease_arg(lease), now_ms: self.now_if(lease) })
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        self.typed(Call::Load { run: run.as_str().to_owned() })
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        meta.check_fields()?;
        self.unit(Call::PutMeta { meta: meta.clone(), lease: lease_arg(lease), now_ms: self.now_if(lease) })
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        self.typed(Call::ListRuns { filter: WireFilter::from(filter) })
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        self.typed(Call::GetMeta { run: run.as_str().to_owned() })
    }

    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()> {
        let run = run.as_str().to_owned();
        self.unit(Call::Delete { run, lease: lease_arg(lease), now_ms: self.now_if(lease) })
    }

    fn fenced_writes(&self) -> bool {
        self.adapter.hello().fenced_writes
    }

    fn exact_integers(&self) -> bool {
        self.adapter.hello().exact_integers
    }
}

impl LeasableStore for CmdStore {
    fn acquire(&self, run: &RunId, owner: &str) -> StoreResult<Lease> {
        let call = Call::Acquire { run: run.as_str().to_owned(), owner: owner.to_owned(), now_ms: self.now() };
        let lease: WireLease = self.typed(call)?;
        Ok(lease.into())
    }

    fn renew(&self, lease: &Lease) -> StoreResult<()> {
        self.unit(Call::Renew { lease: lease.into(), now_ms: self.now() })
    }

    fn release(&self, lease: &Lease) -> StoreResult<()> {
        self.unit(Call::Release { lease: lease.into(), now_ms: self.now() })
    }

    fn lease_ttl_ms(&self) -> u32 {
        self.ttl_ms
    }
}

impl TranscriptStore for CmdStore {
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> StoreResult<()> {
        let (blob_ref, hex) = (blob_ref.to_owned(), wire::hex(bytes));
        self.unit(Call::PutBlob { blob_ref, hex, lease: lease_arg(lease), now_ms: self.now_if(lease) })
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        let Some(text) = self.typed::<Option<String>>(Call::GetBlob { blob_ref: blob_ref.to_owned() })? else {
            return Ok(None);
        };
        match wire::unhex(&text) {
            Some(bytes) => Ok(Some(bytes)),
            None => {
                let failure = Failure::Garbage { line: text, why: "not what get_blob answers: not hex".into() };
                Err(self.adapter.store_error(Op::GetBlob, self.adapter.adapter_failure("get_blob", failure)))
            }
        }
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        self.typed(Call::ListBlobs { run: run.as_str().to_owned() })
    }

    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()> {
        let blob_ref = blob_ref.to_owned();
        self.unit(Call::DeleteBlob { blob_ref, lease: lease_arg(lease), now_ms: self.now_if(lease) })
    }

    fn fenced_blob_writes(&self) -> bool {
        self.adapter.hello().fenced_writes
    }
}

impl Store for CmdStore {
    fn leases(&self) -> Option<&dyn LeasableStore> {
        self.adapter.hello().leases.then_some(self as &dyn LeasableStore)
    }

    fn set_fault_hook(&self, hook: Option<FaultHook>) -> bool {
        if !self.adapter.hello().fault_points {
            return false;
        }
        *self.hook.borrow_mut() = hook;
        true
    }
}
