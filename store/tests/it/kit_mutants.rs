//! Kit mutants: proof that the conformance checks no planted store defect reaches can fail too.
//! `MutantStore` wraps a `SqliteStore` and misbehaves in exactly one way per [`Mutation`] (load
//! reverses order, rewrites a legacy field, truncates a payload, steals a live lease...); each
//! test runs the whole kit against one mutation and requires the check that names the broken
//! contract among the failures. The faithful wrapper must pass everything, so the failures come
//! from the mutations and not from the wrapper. A check that no mutation can make fail is not
//! yet a check.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fencesim_store::conformance::{self, CheckReport, Fixture, Outcome, Target, TtlIntake};
use fencesim_store::sqlite::validate_ttl;
use fencesim_store::{
    Clock, Epoch, FaultAction, FaultHook, FaultPoint, FaultSite, JournalEntry, JournalStore, LeasableStore, Lease,
    LeaseRejection, ManualClock, Op, RunFilter, RunId, RunMeta, SqliteOptions, SqliteStore, Store, StoreError,
    StoreResult, TranscriptStore,
};
use fencesim_store::{LEASE_TTL_MS_DEFAULT, TIMER_MS_MAX};
use rusqlite::{OptionalExtension, params};
use serde_json::{Number, Value, json};

/// One way for a store to break one contract, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    /// Delegates everything, the fault hook included.
    Faithful,
    /// Reads cut every string field longer than 4096 chars to 4096.
    TruncateBigPayloads,
    /// load returns the journal newest first.
    ReverseLoad,
    /// load leaves out the newest entry.
    LoadOmitsNewest,
    /// load stamps every entry with a `hashVersion` field.
    InjectHashVersion,
    /// Reads drop every field whose value is null, at any depth.
    StripNullFields,
    /// Reads round every float to 12 decimal places.
    RoundFloats,
    /// load loses the typed `ref` of a terminal entry.
    LoseRefField,
    /// list_runs returns every run whatever the filter.
    ListRunsIgnoresFilter,
    /// list_runs returns runs in descending id order.
    ListRunsUnsorted,
    /// get_meta drops every field the store does not index.
    GetMetaDropsExtra,
    /// put_meta keeps stored extra fields the new record does not name.
    PutMetaMergesExtra,
    /// put_meta keeps stored name, genesis, updated_at and tags where the new record leaves them
    /// unset (an upsert with COALESCE).
    PutMetaKeepsUnsetFields,
    /// acquire deletes the live lease row first.
    AcquireStealsLiveLease,
    /// acquire treats a lease one millisecond before its expiry as expired.
    AcquireOneMsEarly,
    /// acquire reads the lease row in autocommit and writes after the fault point, unguarded.
    NonAtomicAcquire,
    /// append drops an `extra` field that shadows a typed one instead of refusing the entry.
    AcceptsShadowedField,
    /// renew returns ok and changes nothing.
    RenewNoop,
    /// renew computes the new expiry from the clock after the call, not at its fence check, so
    /// a renew that stalled past its expiry still extends (resurrects) its lease.
    RenewReadsClockLate,
    /// lease_ttl_ms reports the default ttl, not the configured one.
    MisreportTtl,
    /// Declares fenced journal writes but not fenced blob writes.
    HalfDeclaredMarker,
    /// Declares fenced writes on both sides but has no lease capability.
    MarkerWithoutLeases,
    /// list_blobs returns refs in descending order.
    ListBlobsUnsorted,
    /// list_blobs matches `<run>/%` with LIKE, so `_` in a run id is a wildcard.
    ListBlobsLikePattern,
    /// list_blobs matches every ref starting with the run id: the bare ref, look-alike runs.
    ListBlobsByPrefix,
    /// get_blob reads an empty blob as missing.
    EmptyBlobIsMissing,
    /// An unleased put_blob returns ok and writes nothing.
    UnleasedPutDropped,
    /// The journal delete of a run deletes its blobs too.
    DeleteCascadesBlobs,
    /// Blobs live in the connection object, not in the store.
    PerConnectionBlobs,
    /// put_meta compares the lease's epoch with the live row's, not its owner (W7).
    ForgedMetaAccepted,
    /// delete compares the epoch, not the owner (W7).
    ForgedDeleteAccepted,
    /// put_blob compares the epoch, not the owner (W7).
    ForgedBlobPutAccepted,
    /// delete_blob compares the epoch, not the owner (W7).
    ForgedBlobDeleteAccepted,
    /// renew compares the epoch, not the owner: a forged renew extends the holder's row (W7).
    ForgedRenewAccepted,
    /// release compares the epoch, not the owner: a forged release frees the run (W7).
    ForgedReleaseAccepted,
    /// Target: opening creates the database before the ttl is validated.
    IntakeTouchesLocation,
    /// Target: an out-of-range ttl is clamped into range and the store opens.
    IntakeAcceptsInvalidTtl,
}

use Mutation::*;

/// One connection of a store that misbehaves as its mutation says and delegates everything else.
struct MutantStore {
    inner: SqliteStore,
    mutation: Mutation,
    clock: ManualClock,
    /// The wrapper's own fault hook, for a mutation with a fault point of its own.
    hook: Arc<Mutex<Option<FaultHook>>>,
    /// The blobs of [`PerConnectionBlobs`].
    blobs: RefCell<BTreeMap<String, Vec<u8>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A failed statement under the SPI, typed as SqliteStore types it: busy is busy.
fn sql_error(op: Op) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy) => StoreError::Busy { op, run: None },
        _ => StoreError::storage(op, e.to_string()),
    }
}

impl MutantStore {
    /// Under `mutation`, a lease at the live epoch of its run stands for the live holder whatever
    /// owner it names: the lease the call goes on with (the holder's), else the lease as given.
    fn owner_blind(&self, mutation: Mutation, lease: Option<&Lease>) -> StoreResult<Option<Lease>> {
        let Some(lease) = lease.filter(|_| self.is(mutation)) else { return Ok(lease.cloned()) };
        let holder: Option<String> = self
            .inner
            .raw_connection()
            .query_row(
                "SELECT owner FROM leases WHERE run_id = ?1 AND epoch = ?2",
                params![lease.run.as_str(), lease.epoch.0],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql_error(Op::Renew))?;
        Ok(Some(Lease { owner: holder.unwrap_or_else(|| lease.owner.clone()), ..lease.clone() }))
    }

    fn is(&self, mutation: Mutation) -> bool {
        self.mutation == mutation
    }

    /// A statement under the SPI, straight on the inner connection.
    fn raw(&self, op: Op, sql: &str, args: impl rusqlite::Params) -> StoreResult<usize> {
        self.inner.raw_connection().execute(sql, args).map_err(sql_error(op))
    }

    fn fire(&self, point: FaultPoint, op: Op, run: &RunId) {
        if let Some(hook) = lock(&self.hook).as_mut() {
            // The kit's hooks take a connection over; none cuts a call.
            let _ = hook(&FaultSite { point, op, run });
        }
    }

    /// The payload rewrites of the J1 and J4 mutations, applied to every field a read hands back.
    fn rewrite(&self, fields: &mut BTreeMap<String, Value>) {
        if self.is(StripNullFields) {
            fields.retain(|_, v| !v.is_null());
        }
        fields.values_mut().for_each(|v| self.rewrite_value(v));
    }

    fn rewrite_value(&self, value: &mut Value) {
        match value {
            Value::String(s) if self.is(TruncateBigPayloads) && s.chars().count() > 4096 => {
                *s = s.chars().take(4096).collect();
            }
            Value::Number(n) if self.is(RoundFloats) && n.is_f64() => {
                let rounded = (n.as_f64().expect("a float") * 1e12).round() / 1e12;
                *n = Number::from_f64(rounded).expect("a finite float");
            }
            Value::Object(fields) => {
                if self.is(StripNullFields) {
                    fields.retain(|_, v| !v.is_null());
                }
                fields.values_mut().for_each(|v| self.rewrite_value(v));
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.rewrite_value(v)),
            _ => {}
        }
    }

    /// [`NonAtomicAcquire`]: the liveness check is one autocommit read, the fault point fires
    /// through the wrapper's hook, and the epoch bump and row write follow unguarded.
    fn acquire_unguarded(&self, run: &RunId, owner: &str) -> StoreResult<Lease> {
        let conn = self.inner.raw_connection();
        let now = self.clock.now_ms();
        let live: Option<(String, i64)> = conn
            .query_row(
                "SELECT owner, epoch FROM leases WHERE run_id = ?1 AND expires_at > ?2",
                params![run.as_str(), now],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sql_error(Op::Acquire))?;
        let lease = |epoch| Lease { run: run.clone(), owner: owner.to_owned(), epoch: Epoch(epoch) };
        if let Some((holder, epoch)) = live {
            let rejection = LeaseRejection::HeldBy { owner: holder, epoch: Epoch(epoch) };
            return Err(StoreError::lease_held(Op::Acquire, lease(0), rejection));
        }
        self.fire(FaultPoint::AcquireChecked, Op::Acquire, run);
        let next_epoch = "SELECT COALESCE(MAX(epoch), 0) + 1 FROM epochs WHERE run_id = ?1";
        let epoch: i64 = conn.query_row(next_epoch, [run.as_str()], |r| r.get(0)).map_err(sql_error(Op::Acquire))?;
        self.raw(
            Op::Acquire,
            "INSERT INTO epochs (run_id, epoch) VALUES (?1, ?2)
             ON CONFLICT (run_id) DO UPDATE SET epoch = excluded.epoch",
            params![run.as_str(), epoch],
        )?;
        self.raw(
            Op::Acquire,
            "INSERT INTO leases (run_id, owner, epoch, expires_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (run_id) DO UPDATE
             SET owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at",
            params![run.as_str(), owner, epoch, now + i64::from(self.inner.lease_ttl_ms())],
        )?;
        Ok(lease(epoch))
    }

    /// The refs of the LIKE-based list_blobs mutations.
    fn list_like(&self, pattern: &str) -> StoreResult<Vec<String>> {
        let conn = self.inner.raw_connection();
        let sql = "SELECT ref FROM blobs WHERE ref LIKE ?1 ORDER BY ref";
        let mut stmt = conn.prepare(sql).map_err(sql_error(Op::ListBlobs))?;
        let refs = stmt.query_map([pattern], |r| r.get(0)).map_err(sql_error(Op::ListBlobs))?;
        refs.collect::<Result<_, _>>().map_err(sql_error(Op::ListBlobs))
    }
}

impl JournalStore for MutantStore {
    fn append(&self, run: &RunId, entry: &JournalEntry, lease: Option<&Lease>) -> StoreResult<()> {
        if self.is(AcceptsShadowedField) {
            let mut cleaned = entry.clone();
            cleaned.extra.retain(|k, _| !JournalEntry::TYPED_FIELDS.contains(&k.as_str()));
            return self.inner.append(run, &cleaned, lease);
        }
        self.inner.append(run, entry, lease)
    }

    fn load(&self, run: &RunId) -> StoreResult<Vec<JournalEntry>> {
        let mut entries = self.inner.load(run)?;
        match self.mutation {
            ReverseLoad => entries.reverse(),
            LoadOmitsNewest => drop(entries.pop()),
            _ => {}
        }
        for e in &mut entries {
            if self.is(InjectHashVersion) {
                e.extra.insert("hashVersion".to_owned(), json!(1));
            }
            if self.is(LoseRefField) {
                e.ref_seq = None;
            }
            self.rewrite(&mut e.extra);
        }
        Ok(entries)
    }

    fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> StoreResult<()> {
        let stored = match self.mutation {
            PutMetaMergesExtra | PutMetaKeepsUnsetFields => self.inner.get_meta(&meta.run_id)?,
            _ => None,
        };
        let Some(old) = stored else {
            let lease = self.owner_blind(ForgedMetaAccepted, lease)?;
            return self.inner.put_meta(meta, lease.as_ref());
        };
        let mut merged = meta.clone();
        if self.is(PutMetaMergesExtra) {
            for (key, value) in old.extra {
                merged.extra.entry(key).or_insert(value);
            }
        } else {
            merged.name = merged.name.or(old.name);
            merged.genesis = merged.genesis.or(old.genesis);
            merged.updated_at_ms = merged.updated_at_ms.or(old.updated_at_ms);
            if merged.tags.is_empty() {
                merged.tags = old.tags;
            }
        }
        self.inner.put_meta(&merged, lease)
    }

    fn list_runs(&self, filter: &RunFilter) -> StoreResult<Vec<RunMeta>> {
        let all = RunFilter::all();
        let mut metas = self.inner.list_runs(if self.is(ListRunsIgnoresFilter) { &all } else { filter })?;
        if self.is(ListRunsUnsorted) {
            metas.reverse();
        }
        metas.iter_mut().for_each(|m| self.rewrite(&mut m.extra));
        Ok(metas)
    }

    fn get_meta(&self, run: &RunId) -> StoreResult<Option<RunMeta>> {
        let mut meta = self.inner.get_meta(run)?;
        if let Some(m) = &mut meta {
            if self.is(GetMetaDropsExtra) {
                m.extra.clear();
            }
            self.rewrite(&mut m.extra);
        }
        Ok(meta)
    }

    fn delete(&self, run: &RunId, lease: Option<&Lease>) -> StoreResult<()> {
        let lease = self.owner_blind(ForgedDeleteAccepted, lease)?;
        self.inner.delete(run, lease.as_ref())?;
        if self.is(DeleteCascadesBlobs) {
            self.raw(Op::Delete, "DELETE FROM blobs WHERE run_id = ?1", [run.as_str()])?;
        }
        Ok(())
    }

    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

impl LeasableStore for MutantStore {
    fn acquire(&self, run: &RunId, owner: &str) -> StoreResult<Lease> {
        let steal_expiring_by = match self.mutation {
            NonAtomicAcquire => return self.acquire_unguarded(run, owner),
            AcquireStealsLiveLease => i64::MAX,
            AcquireOneMsEarly => self.clock.now_ms() + 1,
            _ => return self.inner.acquire(run, owner),
        };
        self.raw(
            Op::Acquire,
            "DELETE FROM leases WHERE run_id = ?1 AND expires_at <= ?2",
            params![run.as_str(), steal_expiring_by],
        )?;
        self.inner.acquire(run, owner)
    }

    fn renew(&self, lease: &Lease) -> StoreResult<()> {
        match self.mutation {
            RenewNoop => Ok(()),
            ForgedRenewAccepted => {
                self.inner.renew(&self.owner_blind(ForgedRenewAccepted, Some(lease))?.expect("a lease"))
            }
            RenewReadsClockLate => {
                self.inner.renew(lease)?;
                let expires_at = self.clock.now_ms() + i64::from(self.inner.lease_ttl_ms());
                self.inner
                    .raw_connection()
                    .execute(
                        "UPDATE leases SET expires_at = ?4 WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3",
                        params![lease.run.as_str(), lease.owner, lease.epoch.0, expires_at],
                    )
                    .map(drop)
                    .map_err(|e| StoreError::storage(Op::Renew, e.to_string()))
            }
            _ => self.inner.renew(lease),
        }
    }

    fn release(&self, lease: &Lease) -> StoreResult<()> {
        let lease = self.owner_blind(ForgedReleaseAccepted, Some(lease))?.expect("a lease");
        self.inner.release(&lease)
    }

    fn lease_ttl_ms(&self) -> u32 {
        if self.is(MisreportTtl) { LEASE_TTL_MS_DEFAULT } else { self.inner.lease_ttl_ms() }
    }
}

impl TranscriptStore for MutantStore {
    fn put_blob(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> StoreResult<()> {
        match self.mutation {
            UnleasedPutDropped if lease.is_none() => Ok(()),
            PerConnectionBlobs => {
                self.blobs.borrow_mut().insert(blob_ref.to_owned(), bytes.to_vec());
                Ok(())
            }
            _ => self.inner.put_blob(blob_ref, bytes, self.owner_blind(ForgedBlobPutAccepted, lease)?.as_ref()),
        }
    }

    fn get_blob(&self, blob_ref: &str) -> StoreResult<Option<Vec<u8>>> {
        match self.mutation {
            PerConnectionBlobs => Ok(self.blobs.borrow().get(blob_ref).cloned()),
            EmptyBlobIsMissing => Ok(self.inner.get_blob(blob_ref)?.filter(|b| !b.is_empty())),
            _ => self.inner.get_blob(blob_ref),
        }
    }

    fn list_blobs(&self, run: &RunId) -> StoreResult<Vec<String>> {
        match self.mutation {
            PerConnectionBlobs => {
                let prefix = format!("{run}/");
                Ok(self.blobs.borrow().keys().filter(|r| r.starts_with(&prefix)).cloned().collect())
            }
            ListBlobsUnsorted => self.inner.list_blobs(run).map(|refs| refs.into_iter().rev().collect()),
            ListBlobsLikePattern => self.list_like(&format!("{run}/%")),
            ListBlobsByPrefix => self.list_like(&format!("{run}%")),
            _ => self.inner.list_blobs(run),
        }
    }

    fn delete_blob(&self, blob_ref: &str, lease: Option<&Lease>) -> StoreResult<()> {
        if self.is(PerConnectionBlobs) {
            self.blobs.borrow_mut().remove(blob_ref);
            return Ok(());
        }
        self.inner.delete_blob(blob_ref, self.owner_blind(ForgedBlobDeleteAccepted, lease)?.as_ref())
    }

    fn fenced_blob_writes(&self) -> bool {
        !self.is(HalfDeclaredMarker) && self.inner.fenced_blob_writes()
    }
}

impl Store for MutantStore {
    fn leases(&self) -> Option<&dyn LeasableStore> {
        (!self.is(MarkerWithoutLeases)).then_some(self as &dyn LeasableStore)
    }

    /// Delegated, except for a mutation with a fault point of its own: the hook then lives in
    /// the wrapper, and the inner store forwards its own fault points to it.
    fn set_fault_hook(&self, hook: Option<FaultHook>) -> bool {
        if !self.is(NonAtomicAcquire) {
            return self.inner.set_fault_hook(hook);
        }
        let forward = hook.is_some().then(|| {
            let slot = Arc::clone(&self.hook);
            Box::new(move |site: &FaultSite<'_>| match lock(&slot).as_mut() {
                Some(hook) => hook(site),
                None => FaultAction::Resume,
            }) as FaultHook
        });
        *lock(&self.hook) = hook;
        self.inner.set_fault_hook(forward)
    }
}

/// The fixtures' clocks start here, as the shipped targets' do.
const CLOCK_START_MS: i64 = 1_000_000;

/// Memdb names unique across every test of this process.
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// SqliteStore on memdb, every connection wrapped in a [`MutantStore`] with `mutation`.
struct MutantTarget {
    mutation: Mutation,
}

struct MutantFixture {
    mutation: Mutation,
    options: SqliteOptions,
    clock: ManualClock,
    /// Keeps the memdb alive between connections.
    _keeper: SqliteStore,
}

impl Fixture for MutantFixture {
    fn connect(&self) -> StoreResult<Box<dyn Store>> {
        Ok(Box::new(MutantStore {
            inner: SqliteStore::open(self.options.clone())?,
            mutation: self.mutation,
            clock: self.clock.clone(),
            hook: Arc::default(),
            blobs: RefCell::default(),
        }))
    }

    fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl Target for MutantTarget {
    fn name(&self) -> &str {
        "sqlite-memdb-mutant"
    }

    fn fresh(&self, lease_ttl_ms: u32) -> StoreResult<Box<dyn Fixture>> {
        let clock = ManualClock::new(CLOCK_START_MS);
        let name = format!("kit-mutants-{}-{}", std::process::id(), NEXT_DB.fetch_add(1, Ordering::Relaxed));
        let options = SqliteOptions::memdb(name, Arc::new(clock.clone())).lease_ttl_ms(i64::from(lease_ttl_ms));
        let keeper = SqliteStore::open(options.clone())?;
        Ok(Box::new(MutantFixture { mutation: self.mutation, options, clock, _keeper: keeper }))
    }

    /// On a file in a fresh temporary folder, so that "touched" is a file left behind.
    fn ttl_intake(&self, lease_ttl_ms: i64) -> Option<TtlIntake> {
        let folder = tempfile::tempdir().expect("a temporary folder");
        let path = folder.path().join("intake.db");
        let open = |ttl_ms| {
            SqliteStore::open(
                SqliteOptions::file(&path, Arc::new(ManualClock::new(CLOCK_START_MS))).lease_ttl_ms(ttl_ms),
            )
            .map(drop)
        };
        let result = match self.mutation {
            IntakeTouchesLocation => {
                open(i64::from(LEASE_TTL_MS_DEFAULT)).and_then(|()| validate_ttl(lease_ttl_ms).map(drop))
            }
            IntakeAcceptsInvalidTtl => open(lease_ttl_ms.clamp(1, i64::from(TIMER_MS_MAX))),
            _ => open(lease_ttl_ms),
        };
        Some(TtlIntake { result, location_touched: path.exists() })
    }

    /// A memdb cannot be opened from another process: the concurrent boot check skips.
    fn boot_command(&self, _round: u32) -> Option<Command> {
        None
    }
}

fn run_kit(mutation: Mutation) -> Vec<CheckReport> {
    conformance::run_all(&MutantTarget { mutation })
}

fn show(reports: &[&CheckReport]) -> String {
    if reports.is_empty() {
        return "  none".to_owned();
    }
    reports.iter().map(|r| format!("  {r}")).collect::<Vec<_>>().join("\n")
}

/// Run the kit against `mutation` and require `expected` (a check id, or a check name where
/// several checks share the id) among the failures.
fn check(mutation: Mutation, expected: &str) {
    let reports = run_kit(mutation);
    let failed: Vec<&CheckReport> = reports.iter().filter(|r| r.failed()).collect();
    assert!(
        failed.iter().any(|r| r.id == expected || r.name == expected),
        "{mutation:?}: expected {expected} to fail, failed:\n{}",
        show(&failed)
    );
}

#[test]
fn faithful_wrapper_passes_everything() {
    let reports = run_kit(Faithful);
    let failed: Vec<&CheckReport> = reports.iter().filter(|r| r.failed()).collect();
    assert!(failed.is_empty(), "the faithful wrapper failed:\n{}", show(&failed));
    let skipped: Vec<&str> = reports.iter().filter(|r| matches!(r.outcome, Outcome::Skip(_))).map(|r| r.id).collect();
    assert_eq!(
        skipped,
        ["B2", "B4", "B5"],
        "only the cross-process boot, the file formats and the read-only open may skip on memdb"
    );
}

macro_rules! mutants {
    ($($test:ident: $mutation:ident => $expected:literal,)*) => {
        $(#[test] fn $test() { check($mutation, $expected); })*
    };
}

mutants! {
    load_truncates_big_payloads_fails_append_atomicity: TruncateBigPayloads => "J1",
    load_in_reverse_order_fails_total_order: ReverseLoad => "J2",
    load_omitting_the_newest_entry_fails_read_your_writes: LoadOmitsNewest => "J3",
    load_injecting_hash_version_fails_opaque_payload: InjectHashVersion => "J4",
    reads_stripping_null_fields_fail_opaque_payload: StripNullFields => "J4",
    reads_rounding_floats_fail_opaque_payload: RoundFloats => "J4",
    load_losing_the_ref_field_fails_opaque_payload: LoseRefField => "J4",
    list_runs_ignoring_the_filter_fails_meta_separation: ListRunsIgnoresFilter => "J6",
    list_runs_out_of_order_fails_meta_separation: ListRunsUnsorted => "J6",
    get_meta_dropping_extra_fields_fails_meta_separation: GetMetaDropsExtra => "J6",
    put_meta_merging_extra_fields_fails_meta_separation: PutMetaMergesExtra => "J6",
    put_meta_keeping_unset_fields_fails_meta_separation: PutMetaKeepsUnsetFields => "J6",
    acquire_stealing_a_live_lease_fails_exclusive_acquire: AcquireStealsLiveLease => "L1",
    acquire_one_ms_early_fails_exclusive_acquire: AcquireOneMsEarly => "L1",
    non_atomic_acquire_fails_atomic_acquire: NonAtomicAcquire => "L2",
    shadowing_field_accepted_fails_shadowed_field_refused: AcceptsShadowedField => "shadowed-field-refused",
    renew_as_a_no_op_fails_lease_renew: RenewNoop => "lease-renew",
    renew_as_a_no_op_fails_renew_cadence: RenewNoop => "L8",
    renew_reading_the_clock_after_a_stall_fails_renew_atomicity: RenewReadsClockLate => "fencing-atomicity-renew",
    misreported_ttl_fails_renew_cadence: MisreportTtl => "L8",
    half_declared_marker_fails_marker_declared: HalfDeclaredMarker => "W6",
    marker_without_leases_fails_marker_declared: MarkerWithoutLeases => "W6",
    list_blobs_unsorted_fails_transcripts_basics: ListBlobsUnsorted => "T1",
    list_blobs_by_like_pattern_fails_transcripts_basics: ListBlobsLikePattern => "T1",
    list_blobs_by_prefix_fails_transcripts_basics: ListBlobsByPrefix => "T1",
    empty_blob_read_as_missing_fails_transcripts_basics: EmptyBlobIsMissing => "T1",
    unleased_put_dropped_fails_unleased_passthrough: UnleasedPutDropped => "T5",
    journal_delete_cascading_to_blobs_fails_delete_keeps_blobs: DeleteCascadesBlobs => "T6",
    blobs_per_connection_fail_one_twin_per_store: PerConnectionBlobs => "T7",
    forged_owner_put_meta_fails_forged_owner_rejected: ForgedMetaAccepted => "W7",
    forged_owner_delete_fails_forged_owner_rejected: ForgedDeleteAccepted => "W7",
    forged_owner_blob_put_fails_forged_owner_rejected: ForgedBlobPutAccepted => "W7",
    forged_owner_blob_delete_fails_forged_owner_rejected: ForgedBlobDeleteAccepted => "W7",
    forged_owner_renew_fails_forged_owner_rejected: ForgedRenewAccepted => "W7",
    forged_owner_release_fails_forged_owner_rejected: ForgedReleaseAccepted => "W7",
    ttl_intake_touching_the_location_fails_ttl_intake: IntakeTouchesLocation => "B1",
    ttl_intake_accepting_an_invalid_ttl_fails_ttl_intake: IntakeAcceptsInvalidTtl => "B1",
}
