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
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use fencesim_store::{
    Clock, FaultAction, FaultHook, FaultPoint, FaultSite, JournalEntry, JournalStore, LeasableStore, Lease, Op,
    RunFilter, RunId, RunMeta, Store, StoreError, StoreResult, TranscriptStore,
};
use serde_json::{Value, json};

use crate::error::{AdapterError, Failure};
use crate::process::Process;
use crate::spec::Spec;
use crate::wire;

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
}

/// One adapter process after a successful handshake. Clones share it; it is killed when the last
/// clone and the last of its stores drop.
#[derive(Clone)]
pub struct Adapter(Arc<Shared>);

struct Shared {
    spec: Spec,
    hello: Hello,
    process: Mutex<Process>,
    next_id: AtomicU64,
    /// The first protocol failure: every later call fails with it, and the harness reports it.
    broken: Mutex<Option<AdapterError>>,
}

/// One line an adapter sent while a call was in flight, by what it is.
enum Answer<'a> {
    /// The call's result.
    Ok(&'a Value),
    /// The call's typed error (`None`: not an error object of the protocol).
    Error(Option<StoreError>),
    /// It asks for the time, in-lock.
    Time,
    /// It stopped at a fault point and waits for `resume`.
    Fault(FaultPoint, RunId),
    Unknown,
}

impl<'a> Answer<'a> {
    fn of(line: &'a Value) -> Self {
        if let Some(ok) = line.get("ok") {
            return Answer::Ok(ok);
        }
        if let Some(error) = line.get("error") {
            return Answer::Error(wire::parse_error(error));
        }
        let run = || RunId::new(line.get("run").and_then(Value::as_str).unwrap_or_default());
        match (line.get("fault").and_then(Value::as_str), line.get("time")) {
            (Some("fence_checked"), _) => Answer::Fault(FaultPoint::FenceChecked, run()),
            (Some("acquire_checked"), _) => Answer::Fault(FaultPoint::AcquireChecked, run()),
            (None, Some(Value::Bool(true))) => Answer::Time,
            _ => Answer::Unknown,
        }
    }
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
        let hello = json!({ "id": 0, "op": "hello", "protocol": wire::PROTOCOL_VERSION });
        process.send("hello", &hello.to_string())?;
        let line = process.recv("hello")?;
        let answer = parse_line(&line).ok_or_else(|| garbage(&mut process, "hello", &line, "not a JSON object"))?;
        if answer.get("id") != Some(&json!(0)) {
            return Err(process.fail("hello", Failure::Unasked { line }));
        }
        let Some(ok) = answer.get("ok") else {
            return Err(garbage(&mut process, "hello", &line, "no `ok` in the handshake"));
        };
        let version = ok.get("protocol").cloned().unwrap_or(Value::Null);
        if version != json!(wire::PROTOCOL_VERSION) {
            return Err(process.fail("hello", Failure::Version { theirs: version.to_string() }));
        }
        let flag = |name: &str| ok.get("capabilities").and_then(|c| c.get(name)).and_then(Value::as_bool);
        let (Some(name), Some(leases), Some(fenced_writes), Some(fault_points)) =
            (ok.get("name").and_then(Value::as_str), flag("leases"), flag("fenced_writes"), flag("fault_points"))
        else {
            return Err(garbage(&mut process, "hello", &line, "the handshake lacks name or capabilities"));
        };
        let hello = Hello { name: name.to_owned(), leases, fenced_writes, fault_points };
        Ok(Adapter(Arc::new(Shared {
            spec: spec.clone(),
            hello,
            process: Mutex::new(process),
            next_id: AtomicU64::new(1),
            broken: Mutex::new(None),
        })))
    }

    pub fn spec(&self) -> &Spec {
        &self.0.spec
    }

    pub fn hello(&self) -> &Hello {
        &self.0.hello
    }

    /// The adapter's first protocol failure, if it had one: whatever ran on it is not a verdict.
    pub fn broken(&self) -> Option<AdapterError> {
        lock(&self.0.broken).clone()
    }

    /// Open a connection over `location` (a folder the harness made for the adapter's files) with
    /// this raw lease ttl, which the adapter validates (contracts B1). Its calls read `clock`.
    pub fn open(&self, location: &Path, ttl_ms: i64, clock: Arc<dyn Clock>) -> StoreResult<CmdStore> {
        let request = json!({ "op": "open", "location": location.to_string_lossy(), "ttl_ms": ttl_ms });
        let ok = self.call(Op::Boot, request, None, None).map_err(|e| self.store_error(Op::Boot, e))?;
        let (Some(conn), Some(ttl)) =
            (ok.get("conn").and_then(Value::as_u64), ok.get("ttl_ms").and_then(Value::as_u64))
        else {
            let line = ok.to_string();
            return Err(
                self.break_with(Op::Boot, Failure::Garbage { line, why: "`open` answered no conn or ttl_ms".into() })
            );
        };
        let ttl_ms = u32::try_from(ttl).unwrap_or(u32::MAX);
        Ok(CmdStore { adapter: self.clone(), conn, ttl_ms, clock, hook: RefCell::new(None), time_in_lock: false })
    }

    /// One request and its answer: the `ok` value, or the typed error. Fault callbacks and asks
    /// for the time (read from `clock`) are answered on the way; the process lock is not held
    /// while a hook runs.
    fn call(
        &self,
        op: Op,
        mut request: Value,
        hook: Option<&RefCell<Option<FaultHook>>>,
        clock: Option<&dyn Clock>,
    ) -> Result<Value, CallError> {
        let name = op_name(op, &request);
        if let Some(broken) = self.broken() {
            return Err(CallError::Adapter(self.0.spec.error(
                &name,
                Failure::Broken(broken.to_string()),
                String::new(),
            )));
        }
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        request["id"] = id.into();
        if hook.is_some_and(|h| h.borrow().is_some()) {
            request["faults"] = true.into();
        }
        self.with_process(|p| p.send(&name, &request.to_string()))?;
        let given_time = request.get("now_ms") != Some(&Value::Null);
        // Where a hook cut the call (the caller died there), if one did: the adapter, another
        // process, finishes the call all the same, and its answer is discarded.
        let mut cut: Option<FaultPoint> = None;
        loop {
            let line = self.with_process(|p| p.recv(&name))?;
            let garbage = |why: &str| Failure::Garbage { line: line.clone(), why: why.to_owned() };
            let Some(answer) = parse_line(&line) else {
                return Err(self.adapter_failure(&name, garbage("not a JSON object")));
            };
            if answer.get("id") != Some(&json!(id)) {
                return Err(self.adapter_failure(&name, Failure::Unasked { line }));
            }
            let reply = match Answer::of(&answer) {
                Answer::Ok(_) | Answer::Error(Some(_)) if let Some(point) = cut => {
                    return Err(CallError::Store(StoreError::storage(
                        op,
                        format!("cut at {}: the caller died", point.as_str()),
                    )));
                }
                Answer::Ok(ok) => return Ok(ok.clone()),
                Answer::Error(Some(error)) => return Err(CallError::Store(error)),
                Answer::Error(None) => return Err(self.adapter_failure(&name, garbage("an unknown error object"))),
                Answer::Unknown => {
                    return Err(self.adapter_failure(&name, garbage("neither ok, error, fault nor time")));
                }
                Answer::Time => match clock.filter(|_| !given_time) {
                    Some(clock) => json!({ "id": id, "now_ms": clock.now_ms() }),
                    None => return Err(self.adapter_failure(&name, garbage("asked for a time it was given"))),
                },
                Answer::Fault(point, run) => {
                    if fire(hook, &FaultSite { point, op, run: &run }) == FaultAction::Crash {
                        cut.get_or_insert(point);
                    }
                    json!({ "id": id, "resume": true })
                }
            };
            self.with_process(|p| p.send(&name, &reply.to_string()))?;
        }
    }

    fn with_process<T>(&self, f: impl FnOnce(&mut Process) -> Result<T, AdapterError>) -> Result<T, CallError> {
        let result = f(&mut lock(&self.0.process));
        result.map_err(|e| self.record(e))
    }

    fn adapter_failure(&self, request: &str, failure: Failure) -> CallError {
        let error = lock(&self.0.process).fail(request, failure);
        lock(&self.0.process).kill();
        self.record(error)
    }

    fn record(&self, error: AdapterError) -> CallError {
        lock(&self.0.broken).get_or_insert_with(|| error.clone());
        CallError::Adapter(error)
    }

    fn break_with(&self, op: Op, failure: Failure) -> StoreError {
        let error = self.adapter_failure(op.as_str(), failure);
        self.store_error(op, error)
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

fn op_name(op: Op, request: &Value) -> String {
    request.get("op").and_then(Value::as_str).map_or_else(|| op.as_str().to_owned(), str::to_owned)
}

fn parse_line(line: &str) -> Option<Value> {
    serde_json::from_str::<Value>(line).ok().filter(Value::is_object)
}

fn garbage(process: &mut Process, request: &str, line: &str, why: &str) -> AdapterError {
    process.fail(request, Failure::Garbage { line: line.to_owned(), why: why.to_owned() })
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

    /// One SPI call on this connection; `timed` calls carry the time (or ask for it in-lock).
    fn call(&self, op: Op, timed: bool, args: Value) -> StoreResult<Value> {
        let mut request = json!({ "op": op.as_str(), "conn": self.conn });
        if timed {
            request["now_ms"] = if self.time_in_lock { Value::Null } else { self.clock.now_ms().into() };
        }
        if let (Value::Object(request), Value::Object(args)) = (&mut request, args) {
            request.extend(args);
        }
        let clock: &dyn Clock = self.clock.as_ref();
        self.adapter.call(op, request, Some(&self.hook), Some(clock)).map_err(|e| self.adapter.store_error(op, e))
    }

    /// An answer of the wrong shape breaks the adapter.
    fn decode<T>(&self, op: Op, value: Value, parse: impl FnOnce(&Value) -> Option<T>) -> StoreResult<T> {
        match parse(&value) {
            Some(parsed) => Ok(parsed),
            None => Err(self
                .adapter
                .break_with(op, Failure::Garbage { line: value.to_string(), why: format!("not what {op} answers") })),
        }
    }

    /// A write answered `null`; timed when it is fenced (or a lease call).
    fn unit(&self, op: Op, timed: bool, args: Value) -> StoreResult<()> {
        let value = self.call(op, timed, args)?;
        self.decode(op, value, |v| v.is_null().then_some(()))
    }
}

impl Drop for CmdStore {
    fn drop(&mut self) {
        let request = json!({ "op": "close", "conn": self.conn });
        let _ = self.adapter.call(Op::Boot, request, None, None);
    }
}

impl JournalStore for CmdStore {
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()> {
        entry.check_fields(run)?;
        self.unit(
            Op::Append,
            lease.is_some(),
            json!({ "run": run.as_str(), "entry": entry, "lease": wire::lease_or_null(lease) }),
        )
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        let value = self.call(Op::Load, false, json!({ "run": run.as_str() }))?;
        self.decode(Op::Load, value, |v| serde_json::from_value(v.clone()).ok())
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        meta.check_fields()?;
        self.unit(Op::PutMeta, lease.is_some(), json!({ "meta": meta, "lease": wire::lease_or_null(lease) }))
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        let value = self.call(Op::ListRuns, false, json!({ "filter": wire::filter(filter) }))?;
        self.decode(Op::ListRuns, value, |v| serde_json::from_value(v.clone()).ok())
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        let value = self.call(Op::GetMeta, false, json!({ "run": run.as_str() }))?;
        self.decode(Op::GetMeta, value, |v| serde_json::from_value(v.clone()).ok())
    }

    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()> {
        self.unit(Op::Delete, lease.is_some(), json!({ "run": run.as_str(), "lease": wire::lease_or_null(lease) }))
    }

    fn fenced_writes(&self) -> bool {
        self.adapter.hello().fenced_writes
    }
}

impl LeasableStore for CmdStore {
    fn acquire(&self, run: &RunId, owner: &str) -> StoreResult<Lease> {
        let value = self.call(Op::Acquire, true, json!({ "run": run.as_str(), "owner": owner }))?;
        self.decode(Op::Acquire, value, wire::parse_lease)
    }

    fn renew(&self, lease: &Lease) -> StoreResult<()> {
        self.unit(Op::Renew, true, json!({ "lease": wire::lease(lease) }))
    }

    fn release(&self, lease: &Lease) -> StoreResult<()> {
        self.unit(Op::Release, true, json!({ "lease": wire::lease(lease) }))
    }

    fn lease_ttl_ms(&self) -> u32 {
        self.ttl_ms
    }
}

impl TranscriptStore for CmdStore {
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> StoreResult<()> {
        let args = json!({ "ref": blob_ref, "hex": wire::hex(bytes), "lease": wire::lease_or_null(lease) });
        self.unit(Op::PutBlob, lease.is_some(), args)
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        let value = self.call(Op::GetBlob, false, json!({ "ref": blob_ref }))?;
        self.decode(Op::GetBlob, value, |v| match v {
            Value::Null => Some(None),
            Value::String(text) => wire::unhex(text).map(Some),
            _ => None,
        })
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        let value = self.call(Op::ListBlobs, false, json!({ "run": run.as_str() }))?;
        self.decode(Op::ListBlobs, value, |v| serde_json::from_value(v.clone()).ok())
    }

    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()> {
        self.unit(Op::DeleteBlob, lease.is_some(), json!({ "ref": blob_ref, "lease": wire::lease_or_null(lease) }))
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
