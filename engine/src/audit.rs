//! Audit and reconcile (contracts 4.2-4.4): compare a run's meta record with what its journal
//! says, name the divergence with one row of the R1-R9 decision table, and repair the meta (only
//! `meta-behind` and `stranded` ever write) under the caller's lease. The table lives in the pure
//! [`audit_entries`]; everything else reads the store and hands it the records.

use std::fmt;

use fencesim_store::sqlite::JournalDigest;
use fencesim_store::{
    JournalEntry, JournalStore, LeasableStore as _, Lease, Op, RunFilter, RunId, RunMeta, RunStatus, Seq, SqliteStore,
    StoreError,
};

use crate::defects::{EngineDefect, EngineDefects};
use crate::engine::Engine;
use crate::entries::{self, Settle};
use crate::env::Env;
use crate::error::EngineError;
use crate::probe::{self as probes, Probe};

/// What the auditor concluded about one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AuditVerdict {
    /// Meta and journal agree (or the run is resumable and a sweep reaches it).
    Consistent,
    /// Something is off that the auditor must not repair by itself.
    Suspect,
    /// The meta lags the journal: the crash fell between the settle append and the meta write.
    MetaBehind,
    /// A terminal meta over a journal with work still to do: no sweep would ever resume it.
    Stranded,
}

impl AuditVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditVerdict::Consistent => "consistent",
            AuditVerdict::Suspect => "suspect",
            AuditVerdict::MetaBehind => "meta-behind",
            AuditVerdict::Stranded => "stranded",
        }
    }
}

impl fmt::Display for AuditVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run's audit: the verdict, the table row that gave it, and the evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct RunAudit {
    pub run: RunId,
    pub verdict: AuditVerdict,
    /// The decision-table row, "R1" to "R9".
    pub rule: &'static str,
    pub meta: Option<RunMeta>,
    /// Journal length.
    pub entries: usize,
    /// The last settle decision of the journal.
    pub settle: Option<Settle>,
    /// Entries above the settle's seq (the whole journal when there is no settle).
    pub entries_after_settle: usize,
    /// Running entries no entry references, over the whole journal.
    pub dangling: Vec<Seq>,
    /// Suspensions no resolution closes, over the whole journal.
    pub open_suspensions: Vec<Seq>,
    /// The status a reconcile writes; only `meta-behind` and `stranded` carry one.
    pub repair_to: Option<RunStatus>,
    /// One line, for operators.
    pub reason: String,
}

impl RunAudit {
    /// The residue the auditor's table cannot see (contracts 4.2, R8 blind spot): a terminal meta
    /// the journal's last settle does not back. Settle-before-meta (E6) makes it impossible; the
    /// kill points and the oracle check it directly. `None` when meta is not ahead. A terminal
    /// meta over an empty journal is not ahead: a segment that appended nothing to an empty
    /// journal (cancelled, or failed, before its first entry) settles without a `run_settle`,
    /// since an empty journal stays empty (contracts 3.6.4), as the oracle's `meta-not-ahead`
    /// has it.
    pub fn meta_ahead(&self) -> Option<String> {
        let meta = self.meta.as_ref()?;
        let backed = self.settle.is_some_and(|s| s.run_status == meta.status);
        (meta.status.is_terminal() && !backed && self.entries > 0).then(|| {
            format!(
                "meta ahead of the journal: run={} meta says {} but the journal's last run_settle is {} ({} entries)",
                self.run,
                meta.status,
                self.settle.map_or("absent".to_owned(), |s| s.run_status.to_string()),
                self.entries
            )
        })
    }
}

impl RunAudit {
    /// Whether the repair this audit names rewrites a terminal meta to a status that is not
    /// terminal: it reopens a finished run (`stranded`, R4 and R6).
    pub fn reopens(&self) -> bool {
        let terminal = self.meta.as_ref().is_some_and(|m| m.status.is_terminal());
        terminal && self.repair_to.is_some_and(|to| !to.is_terminal())
    }
}

impl fmt::Display for RunAudit {
    /// `<run> <verdict>: <reason>`, the line `runs audit` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.run, self.verdict, self.reason)
    }
}

/// The decision table of contracts 4.2, evaluated top-down over one run's meta and journal.
pub fn audit_entries(run: &RunId, meta: Option<&RunMeta>, entries: &[JournalEntry]) -> RunAudit {
    audit_entries_planted(run, meta, entries, EngineDefects::NONE)
}

/// [`audit_entries`] with the engine's planted defects (the operator's audit in a world):
/// `audit-settled-dangling` counts the dangling dispatches before the settle too.
pub fn audit_entries_planted(
    run: &RunId,
    meta: Option<&RunMeta>,
    entries: &[JournalEntry],
    defects: EngineDefects,
) -> RunAudit {
    let settle = entries::last_run_settle(entries);
    let dangling = entries::dangling(entries);
    let open = entries::open_suspensions(entries);
    let after = |seq: Seq| settle.is_none_or(|s| seq > s.seq);
    let entries_after_settle = entries.iter().filter(|e| after(e.seq)).count();

    let (verdict, rule, repair_to, reason) = match (meta, settle) {
        (None, _) if entries.is_empty() => {
            (AuditVerdict::Consistent, "R1", None, "no meta row and an empty journal".to_owned())
        }
        (None, _) => (
            AuditVerdict::Suspect,
            "R2",
            None,
            format!(
                "journal has {} entries but no meta row (crash before the first meta write?); a row is never fabricated",
                entries.len()
            ),
        ),
        (Some(meta), Some(settle)) if defects.has(EngineDefect::AuditSettledDangling) => {
            settled(meta.status, settle, &dangling, entries_after_settle, &open)
        }
        (Some(meta), Some(settle)) => {
            let tail_dangling: Vec<Seq> = dangling.iter().copied().filter(|s| after(*s)).collect();
            settled(meta.status, settle, &tail_dangling, entries_after_settle, &open)
        }
        (Some(meta), None) => unsettled(meta.status, &dangling, &open),
    };
    assert_eq!(
        repair_to.is_some(),
        matches!(verdict, AuditVerdict::MetaBehind | AuditVerdict::Stranded),
        "only meta-behind and stranded repair: run={run} rule={rule}"
    );
    // A repair moves the meta to another status (a repair to the same one would be made again
    // at every audit), and only a stranded run's repair reopens a terminal meta.
    let status = meta.map(|m| m.status);
    assert!(repair_to.is_none_or(|to| Some(to) != status), "run={run} rule={rule}: a repair to the status it has");
    assert_eq!(
        verdict == AuditVerdict::Stranded,
        status.is_some_and(RunStatus::is_terminal) && repair_to.is_some_and(|to| !to.is_terminal()),
        "run={run} rule={rule}: stranded is exactly a repair that reopens a terminal meta"
    );
    RunAudit {
        run: run.clone(),
        verdict,
        rule,
        meta: meta.cloned(),
        entries: entries.len(),
        settle,
        entries_after_settle,
        dangling,
        open_suspensions: open,
        repair_to,
        reason,
    }
}

/// A table row's outcome: verdict, rule, the status a repair writes, and the operator's line.
type Decision = (AuditVerdict, &'static str, Option<RunStatus>, String);

/// Rules R3-R5: a meta row over a journal with a `run_settle`; the journal's tail after that
/// settle (dangling dispatches, entries, open suspensions) derives the status meta should hold.
fn settled(
    status: RunStatus,
    settle: entries::Settle,
    tail_dangling: &[Seq],
    entries_after_settle: usize,
    open: &[Seq],
) -> Decision {
    let (derived, why) = if !tail_dangling.is_empty() {
        (RunStatus::Running, format!("dangling dispatch after the settle at seq {}", list(tail_dangling)))
    } else if entries_after_settle > 0 && !open.is_empty() {
        (
            RunStatus::Suspended,
            format!("{entries_after_settle} entries after the settle and open suspension at seq {}", list(open)),
        )
    } else if entries_after_settle > 0 {
        (RunStatus::Running, format!("{entries_after_settle} entries after the settle"))
    } else {
        (settle.run_status, format!("last settle '{}' at seq {}", settle.run_status, settle.seq))
    };
    if status == derived {
        (AuditVerdict::Consistent, "R3", None, format!("meta '{status}' matches the journal ({why})"))
    } else if status.is_terminal() && !derived.is_terminal() {
        (
            AuditVerdict::Stranded,
            "R4",
            Some(derived),
            format!("meta '{status}' is terminal but the journal says '{derived}' ({why})"),
        )
    } else {
        (
            AuditVerdict::MetaBehind,
            "R5",
            Some(derived),
            format!("meta '{status}' but the journal says '{derived}' ({why})"),
        )
    }
}

/// Rules R6-R9: a meta row over a journal without a `run_settle`.
fn unsettled(status: RunStatus, dangling: &[Seq], open: &[Seq]) -> Decision {
    if !status.is_terminal() {
        (AuditVerdict::Consistent, "R9", None, format!("meta '{status}' without a settle: resumable; sweeps reach it"))
    } else if !dangling.is_empty() {
        (
            AuditVerdict::Stranded,
            "R6",
            Some(RunStatus::Running),
            format!(
                "meta '{status}' is terminal but the journal has no settle and a dangling dispatch at seq {}",
                list(dangling)
            ),
        )
    } else if !open.is_empty() && matches!(status, RunStatus::Ok | RunStatus::Exhausted) {
        (
            AuditVerdict::Suspect,
            "R7",
            None,
            format!("meta '{status}' but the journal has no settle and an open suspension at seq {}", list(open)),
        )
    } else {
        (
            AuditVerdict::Consistent,
            "R8",
            None,
            format!("meta '{status}' is terminal; no settle and no dangling dispatch"),
        )
    }
}

/// Seqs as `1, 4, 9`.
fn list(seqs: &[Seq]) -> String {
    seqs.iter().map(Seq::to_string).collect::<Vec<_>>().join(", ")
}

/// Audit one run: read its meta and journal, then apply the table.
pub fn audit_run(store: &dyn JournalStore, run: &RunId) -> Result<RunAudit, StoreError> {
    audit_run_planted(store, run, EngineDefects::NONE)
}

fn audit_run_planted(store: &dyn JournalStore, run: &RunId, defects: EngineDefects) -> Result<RunAudit, StoreError> {
    let meta = store.get_meta(run)?;
    let entries = store.load(run)?;
    Ok(audit_entries_planted(run, meta.as_ref(), &entries, defects))
}

/// The outcome of [`reconcile_run_meta`]: the fresh audit, and the status written if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Reconciled {
    pub audit: RunAudit,
    pub repaired: Option<RunStatus>,
}

/// Re-audit the run and, when the audit names a repair and a meta row exists, write that meta
/// back with only `status` and `updated_at_ms` changed (contracts 4.3). The lease fences the write:
/// over a fenced store a stale lease is refused with [`StoreError::LeaseHeld`] and nothing is
/// written. `suspect` and `consistent` never write.
pub fn reconcile_run_meta(
    store: &dyn JournalStore,
    run: &RunId,
    lease: Option<&Lease>,
    now_ms: i64,
) -> Result<Reconciled, StoreError> {
    reconcile(store, run, lease, now_ms, true, EngineDefects::NONE, &|_| {})
}

/// [`reconcile_run_meta`] with the engine's planted defects (the operator of a world): the
/// audit's, and `reconcile-drops-extra`, which rebuilds the repaired meta without its `extra`.
pub fn reconcile_run_meta_planted(
    store: &dyn JournalStore,
    run: &RunId,
    lease: Option<&Lease>,
    now_ms: i64,
    defects: EngineDefects,
) -> Result<Reconciled, StoreError> {
    reconcile(store, run, lease, now_ms, true, defects, &|_| {})
}

/// [`reconcile_run_meta`] for an operator's tool on a file it did not watch being written: a
/// terminal meta is never rewritten to a status that is not terminal (a `stranded` run stays as
/// it is, [`RunAudit::reopens`]). A finished run reopened from a journal that lost its settle
/// (damage no scan can see) would be resumed and pay its calls again.
pub fn reconcile_run_meta_never_reopening(
    store: &dyn JournalStore,
    run: &RunId,
    lease: Option<&Lease>,
    now_ms: i64,
) -> Result<Reconciled, StoreError> {
    reconcile(store, run, lease, now_ms, false, EngineDefects::NONE, &|_| {})
}

/// Why [`repair_runs_lossless`] changed nothing: everything it did was rolled back.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RepairError {
    /// A store call failed: the write transaction's start (busy: [`StoreError::is_busy`]), a
    /// schema that is not exactly fencesim's, an epoch at its limit, a storage error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The repair would have changed the journal, which a repair never writes (every journal
    /// row, of every run, counted and hashed before and after in its transaction).
    #[error(
        "repair rolled back: the journal would have changed, and a repair never writes it journal_before=({before}) journal_after=({after})"
    )]
    JournalChanged { before: JournalDigest, after: JournalDigest },
}

/// What [`repair_runs_lossless`] did with one run.
#[derive(Clone, Debug, PartialEq)]
pub enum RunRepair {
    /// Leased, re-audited and reconciled (written or not), the lease released.
    Reconciled(Box<Reconciled>),
    /// The acquire was refused: a live holder (the refusal). Nothing was written for the run.
    LiveHolder(StoreError),
}

/// The command line's repair of runs of a user's SQLite file (`runs audit --repair`, contracts
/// 4.3-4.5), lossless by proof. One write transaction ([`SqliteStore::write_transaction`], which
/// first holds the schema to exactly fencesim's under the write lock) repairs every run of
/// `runs`, in order: a brief lease as `owner` (an epoch bump, like any takeover; a live holder
/// skips the run), a re-audit and reconcile under it that never reopens a finished run
/// ([`reconcile_run_meta_never_reopening`]), the release. It commits only if every journal row,
/// of every run, is as it was ([`SqliteStore::journal_digest`] before and after, inside the
/// transaction). Any other error, or a journal that changed ([`RepairError::JournalChanged`]),
/// rolls everything back, the epoch bumps included. The caller bounds `runs` (the write lock is
/// held for all of them; the two digests read the whole journal once each).
pub fn repair_runs_lossless(
    store: &SqliteStore,
    runs: &[RunId],
    owner: &str,
    now_ms: i64,
) -> Result<Vec<RunRepair>, RepairError> {
    repair_guarded(store, runs, owner, now_ms, &|| Ok(()))
}

/// [`repair_runs_lossless`], with `inside` run in the transaction after the last reconcile: the
/// tests' way to change what a repair writes (nothing else passes anything but a no-op).
fn repair_guarded(
    store: &SqliteStore,
    runs: &[RunId],
    owner: &str,
    now_ms: i64,
    inside: &dyn Fn() -> Result<(), StoreError>,
) -> Result<Vec<RunRepair>, RepairError> {
    let Some(first) = runs.first() else { return Ok(Vec::new()) };
    store.write_transaction(Op::PutMeta, first, || {
        let before = store.journal_digest()?;
        let mut repairs = Vec::with_capacity(runs.len());
        for run in runs {
            let lease = match store.acquire(run, owner) {
                Ok(lease) => lease,
                Err(e) if e.is_lease_held() => {
                    repairs.push(RunRepair::LiveHolder(e));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let reconciled = reconcile(store, run, Some(&lease), now_ms, false, EngineDefects::NONE, &|_| {})?;
            store.release(&lease)?;
            repairs.push(RunRepair::Reconciled(Box::new(reconciled)));
        }
        // A lossless repair answers each run asked, in order, and never reopens a finished run.
        assert_eq!(repairs.len(), runs.len(), "a repair answers every run it was asked");
        assert!(
            repairs.iter().all(|r| !matches!(r, RunRepair::Reconciled(r) if r.repaired.is_some() && r.audit.reopens())),
            "a lossless repair reopened a finished run"
        );
        inside()?;
        let after = store.journal_digest()?;
        if after != before {
            return Err(RepairError::JournalChanged { before, after });
        }
        Ok(repairs)
    })
}

/// Re-audit and repair (the three `reconcile_run_meta*` and [`lease_and_reconcile`]), reporting
/// the branch it took to `probe` (`crate::probe`'s `repair-*`; the command line's callers ignore it).
fn reconcile(
    store: &dyn JournalStore,
    run: &RunId,
    lease: Option<&Lease>,
    now_ms: i64,
    reopen: bool,
    defects: EngineDefects,
    probe: &dyn Fn(Probe),
) -> Result<Reconciled, StoreError> {
    let audit = audit_run_planted(store, run, defects).inspect_err(|_| probe(probes::REPAIR_READ_FAILED))?;
    let (Some(repair_to), Some(meta)) = (audit.repair_to, audit.meta.as_ref()) else {
        probe(probes::REPAIR_NOTHING_TO_DO);
        return Ok(Reconciled { audit, repaired: None });
    };
    // The never-reopening repair is the command line's; no world runs it, so it is not probed.
    if !reopen && audit.reopens() {
        return Ok(Reconciled { audit, repaired: None });
    }
    let repaired_meta = if defects.has(EngineDefect::ReconcileDropsExtra) {
        let mut rebuilt = RunMeta::new(run.clone(), repair_to).with_segments(meta.segments);
        rebuilt.name = meta.name.clone();
        rebuilt.tags = meta.tags.clone();
        rebuilt.genesis = meta.genesis.clone();
        rebuilt.updated_at_ms = Some(now_ms);
        rebuilt
    } else {
        RunMeta { status: repair_to, updated_at_ms: Some(now_ms), ..meta.clone() }
    };
    store.put_meta(&repaired_meta, lease).inspect_err(|_| probe(probes::REPAIR_WRITE_FAILED))?;
    probe(probes::REPAIR_MADE);
    Ok(Reconciled { audit, repaired: Some(repair_to) })
}

/// What [`lease_and_reconcile`] came to.
#[derive(Debug)]
pub enum Repair {
    /// The acquire was refused ([`EngineError::LeaseHeld`]: a live holder) or failed otherwise
    /// (busy through its retries, a storage error): the run is left for a later audit.
    Skipped(EngineError),
    /// Leased: the reconcile's outcome under `lease`, which the caller releases (after noting
    /// the outcome) when it is done with the run.
    Leased { lease: Lease, result: Box<Result<Reconciled, StoreError>> },
}

/// The operator's repair of one audited run (`runs audit --repair`, contracts 4.3-4.5): take a
/// brief lease through `engine` (its busy retries), then re-audit and reconcile under it, each
/// decision reported as a probe through the engine's env. With `reopen` false a stranded terminal
/// meta is never rewritten ([`reconcile_run_meta_never_reopening`]). The store calls are those of
/// [`crate::Engine::acquire`] then [`reconcile_run_meta`] (or its never-reopening twin); the
/// lease is the caller's to release.
pub async fn lease_and_reconcile<E: Env>(engine: &Engine<E>, run: &RunId, owner: &str, reopen: bool) -> Repair {
    let probe = |p: Probe| engine.env().probe(p);
    let lease = match engine.acquire(run, owner).await {
        Ok(lease) => lease,
        Err(e) => {
            probe(if matches!(e, EngineError::LeaseHeld(_)) {
                probes::REPAIR_LIVE_HOLDER
            } else {
                probes::REPAIR_ACQUIRE_FAILED
            });
            return Repair::Skipped(e);
        }
    };
    let now_ms = engine.env().now_ms();
    let result =
        reconcile(engine.store().as_ref(), run, Some(&lease), now_ms, reopen, engine.options().defects, &probe);
    Repair::Leased { lease, result: Box::new(result) }
}

/// Audit every run that has a meta row, in run-id order; only the divergent ones unless
/// `include_consistent`. A run without a meta row (R2) is not listable and so not seen here.
pub fn audit_runs(store: &dyn JournalStore, include_consistent: bool) -> Result<Vec<RunAudit>, StoreError> {
    audit_runs_planted(store, include_consistent, EngineDefects::NONE)
}

/// [`audit_runs`] with the engine's planted defects (the operator of a world).
pub fn audit_runs_planted(
    store: &dyn JournalStore,
    include_consistent: bool,
    defects: EngineDefects,
) -> Result<Vec<RunAudit>, StoreError> {
    let mut audits = Vec::new();
    for meta in store.list_runs(&RunFilter::all())? {
        let audit = audit_run_planted(store, &meta.run_id, defects)?;
        if include_consistent || audit.verdict != AuditVerdict::Consistent {
            audits.push(audit);
        }
    }
    Ok(audits)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fencesim_store::{Clock, LeasableStore, ManualClock, MemoryStore, SqliteOptions, SqliteStore};
    use serde_json::json;

    use super::*;
    use crate::entries::{kind, run_settle, running, status, suspension, terminal};

    fn run() -> RunId {
        RunId::new("r1")
    }

    fn meta(s: RunStatus) -> RunMeta {
        RunMeta::new(run(), s).with_segments(1)
    }

    /// Audit `entries` under a meta of status `meta_status` (or none) and check the row.
    fn check(
        meta_status: Option<RunStatus>,
        entries: &[JournalEntry],
        verdict: AuditVerdict,
        rule: &str,
        repair_to: Option<RunStatus>,
    ) -> RunAudit {
        let m = meta_status.map(meta);
        let audit = audit_entries(&run(), m.as_ref(), entries);
        assert_eq!(audit.verdict, verdict, "{audit:?}");
        assert_eq!(audit.rule, rule, "{audit:?}");
        assert_eq!(audit.repair_to, repair_to, "{audit:?}");
        assert_eq!(audit.entries, entries.len());
        assert!(!audit.reason.contains('\n'), "one-line reason: {}", audit.reason);
        audit
    }

    /// One finished dispatch: running at 1, terminal ok at 2.
    fn dispatched() -> Vec<JournalEntry> {
        vec![
            running(Seq(1), kind::AGENT, "step one"),
            terminal(Seq(2), Seq(1), kind::AGENT, status::OK, "step one", json!("done")),
        ]
    }

    fn settled(s: RunStatus) -> Vec<JournalEntry> {
        let mut e = dispatched();
        e.push(run_settle(Seq(3), s, 1));
        e
    }

    #[test]
    fn meta_ahead_is_a_terminal_meta_no_settle_backs_over_a_journal_with_entries() {
        let ahead = |meta, entries: &[JournalEntry]| audit_entries(&RunId::new("r"), Some(&meta), entries).meta_ahead();
        // A cancel or failure before the first entry: the empty journal stays empty.
        assert_eq!(ahead(RunMeta::new("r", RunStatus::Cancelled), &[]), None);
        assert_eq!(ahead(RunMeta::new("r", RunStatus::Error), &[]), None);
        assert_eq!(ahead(RunMeta::new("r", RunStatus::Ok), &settled(RunStatus::Ok)), None);
        assert_eq!(ahead(RunMeta::new("r", RunStatus::Running), &dispatched()), None);
        let unbacked = ahead(RunMeta::new("r", RunStatus::Error), &dispatched()).expect("ahead");
        assert!(unbacked.contains("run_settle is absent"), "{unbacked}");
        let contradicted = ahead(RunMeta::new("r", RunStatus::Cancelled), &settled(RunStatus::Ok)).expect("ahead");
        assert!(contradicted.contains("run_settle is ok"), "{contradicted}");
    }

    #[test]
    fn r1_no_meta_empty_journal_is_consistent() {
        check(None, &[], AuditVerdict::Consistent, "R1", None);
    }

    #[test]
    fn r2_no_meta_with_a_journal_is_suspect_and_never_fabricated() {
        check(None, &dispatched(), AuditVerdict::Suspect, "R2", None);
        // Also with a settle: the row is never fabricated.
        check(None, &settled(RunStatus::Ok), AuditVerdict::Suspect, "R2", None);
    }

    #[test]
    fn r3_meta_matching_the_derived_status_is_consistent() {
        let a = check(Some(RunStatus::Ok), &settled(RunStatus::Ok), AuditVerdict::Consistent, "R3", None);
        assert_eq!(a.settle.map(|s| s.seq), Some(Seq(3)));
        assert_eq!(a.entries_after_settle, 0);
        // Work after a settle with an open suspension derives suspended.
        let mut e = settled(RunStatus::Suspended);
        e.push(suspension(Seq(4), kind::APPROVAL, "gate"));
        let a = check(Some(RunStatus::Suspended), &e, AuditVerdict::Consistent, "R3", None);
        assert_eq!(a.entries_after_settle, 1);
        assert_eq!(a.open_suspensions, vec![Seq(4)]);
    }

    #[test]
    fn r4_terminal_meta_over_work_after_the_settle_is_stranded() {
        let mut e = settled(RunStatus::Suspended);
        e.push(running(Seq(4), kind::AGENT, "step two"));
        let a = check(Some(RunStatus::Cancelled), &e, AuditVerdict::Stranded, "R4", Some(RunStatus::Running));
        assert_eq!(a.dangling, vec![Seq(4)]);
        assert_eq!(a.entries_after_settle, 1);
    }

    #[test]
    fn r5_meta_lagging_the_settle_is_meta_behind() {
        // The crash between the settle append and the meta write.
        check(Some(RunStatus::Running), &settled(RunStatus::Ok), AuditVerdict::MetaBehind, "R5", Some(RunStatus::Ok));
        check(Some(RunStatus::Cancelled), &settled(RunStatus::Ok), AuditVerdict::MetaBehind, "R5", Some(RunStatus::Ok));
        // Entries after the settle without an open suspension derive running.
        let mut e = settled(RunStatus::Suspended);
        e.push(running(Seq(4), kind::AGENT, "step two"));
        e.push(terminal(Seq(5), Seq(4), kind::AGENT, status::OK, "step two", json!(2)));
        check(Some(RunStatus::Suspended), &e, AuditVerdict::MetaBehind, "R5", Some(RunStatus::Running));
    }

    #[test]
    fn r6_terminal_meta_with_a_dangling_dispatch_and_no_settle_is_stranded() {
        let e = vec![running(Seq(1), kind::AGENT, "step one")];
        let a = check(Some(RunStatus::Cancelled), &e, AuditVerdict::Stranded, "R6", Some(RunStatus::Running));
        assert_eq!(a.dangling, vec![Seq(1)]);
        assert!(a.settle.is_none());
        assert_eq!(a.entries_after_settle, 1);
    }

    #[test]
    fn r7_ok_meta_with_an_open_suspension_and_no_settle_is_suspect() {
        let mut e = dispatched();
        e.push(suspension(Seq(3), kind::EXTERNAL, "webhook"));
        let a = check(Some(RunStatus::Ok), &e, AuditVerdict::Suspect, "R7", None);
        assert_eq!(a.open_suspensions, vec![Seq(3)]);
        check(Some(RunStatus::Exhausted), &e, AuditVerdict::Suspect, "R7", None);
    }

    #[test]
    fn r8_other_terminal_metas_without_a_settle_are_consistent() {
        check(Some(RunStatus::Ok), &dispatched(), AuditVerdict::Consistent, "R8", None);
        // An open suspension under a cancelled or error meta is not R7.
        let mut e = dispatched();
        e.push(suspension(Seq(3), kind::EXTERNAL, "webhook"));
        check(Some(RunStatus::Cancelled), &e, AuditVerdict::Consistent, "R8", None);
        check(Some(RunStatus::Error), &e, AuditVerdict::Consistent, "R8", None);
    }

    #[test]
    fn r9_non_terminal_meta_without_a_settle_is_resumable() {
        let e = vec![running(Seq(1), kind::AGENT, "step one")];
        check(Some(RunStatus::Running), &e, AuditVerdict::Consistent, "R9", None);
        check(Some(RunStatus::Suspended), &[], AuditVerdict::Consistent, "R9", None);
    }

    #[test]
    fn verdict_names() {
        let names: Vec<String> =
            [AuditVerdict::Consistent, AuditVerdict::Suspect, AuditVerdict::MetaBehind, AuditVerdict::Stranded]
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(names, ["consistent", "suspect", "meta-behind", "stranded"]);
    }

    fn seed(store: &dyn JournalStore, run: &RunId, m: &RunMeta, entries: &[JournalEntry]) {
        for e in entries {
            store.append(run, e, None).unwrap();
        }
        store.put_meta(m, None).unwrap();
    }

    fn bytes(store: &dyn JournalStore, run: &RunId) -> Vec<u8> {
        serde_json::to_vec(&store.get_meta(run).unwrap().unwrap()).unwrap()
    }

    #[test]
    fn reconcile_rewrites_only_status_and_updated_at_and_only_when_divergent() {
        let store = MemoryStore::new();
        let behind = RunId::new("behind");
        let mut m = RunMeta::new(behind.clone(), RunStatus::Running).with_segments(1);
        m.name = Some("nightly".to_owned());
        m.genesis = Some("g-1".to_owned());
        m.tags = vec!["t".to_owned()];
        m.updated_at_ms = Some(5);
        m.extra.insert("owner_note".to_owned(), json!({"keep": [1, "two"]}));
        seed(&store, &behind, &m, &settled(RunStatus::Ok));

        let got = reconcile_run_meta(&store, &behind, None, 1_234).unwrap();
        assert_eq!(got.audit.verdict, AuditVerdict::MetaBehind);
        assert_eq!(got.repaired, Some(RunStatus::Ok));
        let after = store.get_meta(&behind).unwrap().unwrap();
        assert_eq!(after, RunMeta { status: RunStatus::Ok, updated_at_ms: Some(1_234), ..m });
        assert_eq!(audit_run(&store, &behind).unwrap().verdict, AuditVerdict::Consistent);

        // Suspect (R7) and consistent (R3) write nothing, byte for byte.
        let suspect = RunId::new("suspect");
        let mut e = dispatched();
        e.push(suspension(Seq(3), kind::EXTERNAL, "webhook"));
        seed(&store, &suspect, &RunMeta::new(suspect.clone(), RunStatus::Ok).with_segments(1), &e);
        for run in [&suspect, &behind] {
            let before = bytes(&store, run);
            let got = reconcile_run_meta(&store, run, None, 9_999).unwrap();
            assert_eq!(got.repaired, None, "{run}");
            assert_eq!(bytes(&store, run), before, "{run}");
        }
        // A run without a meta row is never given one.
        let ghost = RunId::new("ghost");
        store.append(&ghost, &running(Seq(1), kind::AGENT, "x"), None).unwrap();
        assert_eq!(reconcile_run_meta(&store, &ghost, None, 1).unwrap().audit.rule, "R2");
        assert_eq!(store.get_meta(&ghost).unwrap(), None);

        let divergent = audit_runs(&store, false).unwrap();
        assert_eq!(divergent.iter().map(|a| a.run.as_str()).collect::<Vec<_>>(), ["suspect"]);
        assert_eq!(audit_runs(&store, true).unwrap().len(), 2);
    }

    /// The operator's reconcile never reopens a finished run: a stranded terminal meta (R6) stays,
    /// byte for byte, while a meta-behind one is still repaired; the world's reconcile reopens it.
    #[test]
    fn the_operators_reconcile_never_reopens_a_terminal_meta() {
        let store = MemoryStore::new();
        let stranded = RunId::new("stranded");
        let meta = RunMeta::new(stranded.clone(), RunStatus::Ok).with_segments(1);
        seed(&store, &stranded, &meta, &[running(Seq(1), kind::AGENT, "x")]);
        let before = bytes(&store, &stranded);
        let got = reconcile_run_meta_never_reopening(&store, &stranded, None, 7).unwrap();
        assert!(got.audit.reopens() && got.audit.verdict == AuditVerdict::Stranded, "{got:?}");
        assert_eq!(got.repaired, None);
        assert_eq!(bytes(&store, &stranded), before);
        let behind = RunId::new("behind");
        let running_meta = RunMeta::new(behind.clone(), RunStatus::Running).with_segments(1);
        seed(&store, &behind, &running_meta, &settled(RunStatus::Ok));
        let got = reconcile_run_meta_never_reopening(&store, &behind, None, 7).unwrap();
        assert!(!got.audit.reopens());
        assert_eq!(got.repaired, Some(RunStatus::Ok));
        let got = reconcile_run_meta(&store, &stranded, None, 7).unwrap();
        assert_eq!(got.repaired, Some(RunStatus::Running));
    }

    /// The probed repair takes each branch of the operator's decision and reports it.
    #[test]
    fn the_operators_repair_reports_each_decision_as_a_probe() {
        use std::cell::RefCell;
        use std::rc::Rc;

        use crate::probe;
        use crate::{Engine, EngineOptions, Fault, Ledger, Point};

        #[derive(Clone, Default)]
        struct Probed(Rc<RefCell<Vec<Probe>>>);
        impl Env for Probed {
            fn now_ms(&self) -> i64 {
                1_000
            }
            fn sleep(&self, _ms: u64) -> impl std::future::Future<Output = ()> {
                std::future::ready(())
            }
            fn fault(&self, _point: &Point<'_>) -> impl std::future::Future<Output = Fault> {
                std::future::ready(Fault::Continue)
            }
            fn probe(&self, p: Probe) {
                self.0.borrow_mut().push(p);
            }
        }
        let clock = ManualClock::new(1_000_000);
        let options = SqliteOptions::memdb("engine-audit-probed-repair", Arc::new(clock.clone()));
        let store: Rc<dyn fencesim_store::Store> = Rc::new(SqliteStore::open(options).unwrap());
        let env = Probed::default();
        let engine = Engine::new(store.clone(), env.clone(), Ledger::new(), EngineOptions::default()).unwrap();
        let r = run();
        seed(store.as_ref(), &r, &meta(RunStatus::Running), &settled(RunStatus::Ok));
        let last = || *env.0.borrow().last().unwrap();
        let block_on = |f| futures_lite_block_on(f);

        let held = store.leases().unwrap().acquire(&r, "holder").unwrap();
        assert!(matches!(block_on(lease_and_reconcile(&engine, &r, "op", true)), Repair::Skipped(_)));
        assert_eq!(last(), probe::REPAIR_LIVE_HOLDER);
        store.leases().unwrap().release(&held).unwrap();

        let Repair::Leased { lease, result } = block_on(lease_and_reconcile(&engine, &r, "op", true)) else {
            panic!("not leased")
        };
        assert_eq!((*result).unwrap().repaired, Some(RunStatus::Ok));
        assert_eq!(last(), probe::REPAIR_MADE);
        engine.release_quietly(&lease);

        let Repair::Leased { lease, result } = block_on(lease_and_reconcile(&engine, &r, "op", true)) else {
            panic!("not leased")
        };
        assert_eq!((*result).unwrap().repaired, None);
        assert_eq!(last(), probe::REPAIR_NOTHING_TO_DO);
        engine.release_quietly(&lease);
    }

    /// Polls a future that never waits on anything (the test env's sleep and faults are ready).
    fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    #[test]
    fn reconcile_with_a_stale_lease_is_refused_and_writes_nothing() {
        let clock = ManualClock::new(1_000_000);
        let options = SqliteOptions::memdb("engine-audit-stale-reconcile", Arc::new(clock.clone()));
        let store = SqliteStore::open(options).unwrap();
        let r = run();
        let stale = store.acquire(&r, "old-owner").unwrap();
        seed(&store, &r, &meta(RunStatus::Running), &settled(RunStatus::Ok));
        clock.advance(i64::from(store.lease_ttl_ms()) + 1);
        let live = store.acquire(&r, "new-owner").unwrap();
        assert!(live.epoch > stale.epoch);

        let before = bytes(&store, &r);
        let err = reconcile_run_meta(&store, &r, Some(&stale), clock.now_ms()).unwrap_err();
        assert!(matches!(err, StoreError::LeaseHeld(_)), "{err}");
        assert_eq!(bytes(&store, &r), before);

        let got = reconcile_run_meta(&store, &r, Some(&live), clock.now_ms()).unwrap();
        assert_eq!(got.repaired, Some(RunStatus::Ok));
        assert_eq!(store.get_meta(&r).unwrap().unwrap().status, RunStatus::Ok);
    }

    /// A meta-behind run in a SQLite file of a temporary folder; the folder, the store, the run.
    fn behind_on_file(name: &str) -> (std::path::PathBuf, SqliteStore) {
        let dir = std::env::temp_dir().join(format!("fencesim-audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let clock = ManualClock::new(1_000_000);
        let store = SqliteStore::open(SqliteOptions::file(dir.join("runs.db"), Arc::new(clock))).unwrap();
        seed(&store, &run(), &meta(RunStatus::Running), &settled(RunStatus::Ok));
        let other = RunId::new("other");
        seed(&store, &other, &RunMeta::new(other.clone(), RunStatus::Running), &dispatched());
        (dir, store)
    }

    /// Every row of every table, as text, sorted.
    fn rows(store: &SqliteStore) -> Vec<String> {
        let mut all = Vec::new();
        for table in fencesim_store::sqlite::TABLES {
            let mut statement = store.raw_connection().prepare(&format!("SELECT * FROM {table}")).unwrap();
            let columns = statement.column_count();
            let mut found = statement.query([]).unwrap();
            while let Some(row) = found.next().unwrap() {
                let values: Vec<String> = (0..columns).map(|i| format!("{:?}", row.get_ref(i).unwrap())).collect();
                all.push(format!("{table} {}", values.join(" ")));
            }
        }
        all.sort();
        all
    }

    /// The lossless repair repairs meta-behind runs and leaves the journal as it was, its leases
    /// released; a repair whose transaction would change the journal (any run's: a row deleted,
    /// one rewritten in place) is rolled back whole, typed, and leaves every row of every table
    /// as it was, the leases' epoch bumps included. A live holder's run is skipped, the others
    /// repaired.
    #[test]
    fn the_lossless_repair_rolls_back_whenever_the_journal_would_change() {
        let (dir, store) = behind_on_file("lossless");
        let (r, other) = (run(), RunId::new("other"));
        let runs = [r.clone(), other.clone()];
        let journal = store.journal_digest().unwrap();
        let tampers = [
            "DELETE FROM entries WHERE id = (SELECT max(id) FROM entries)",
            "DELETE FROM entries WHERE run_id = 'other'",
            "UPDATE entries SET payload = replace(payload, 'done', 'DONE')",
        ];
        for sql in tampers {
            let before = rows(&store);
            let tamper =
                || store.raw_connection().execute_batch(sql).map_err(|e| StoreError::storage(Op::Load, e.to_string()));
            let err = repair_guarded(&store, &runs, "op", 7, &tamper).unwrap_err();
            let RepairError::JournalChanged { before: was, after } = &err else { panic!("{sql}: {err}") };
            assert_eq!(*was, journal, "{sql}");
            assert_ne!(*after, journal, "{sql}");
            assert!(err.to_string().starts_with("repair rolled back: the journal would have changed"), "{err}");
            assert_eq!(rows(&store), before, "{sql}: the rolled-back repair left a trace");
            assert_eq!(audit_run(&store, &r).unwrap().verdict, AuditVerdict::MetaBehind);
        }
        let held = store.acquire(&other, "holder").unwrap();
        let got = repair_runs_lossless(&store, &runs, "op", 7).unwrap();
        let [RunRepair::Reconciled(repaired), RunRepair::LiveHolder(e)] = &got[..] else { panic!("{got:?}") };
        assert_eq!(repaired.repaired, Some(RunStatus::Ok));
        assert!(e.is_lease_held(), "{e}");
        assert_eq!(store.journal_digest().unwrap(), journal);
        assert_eq!(audit_run(&store, &r).unwrap().verdict, AuditVerdict::Consistent);
        let leases: Vec<String> = store
            .raw_connection()
            .prepare("SELECT owner FROM leases")
            .unwrap()
            .query_map([], |x| x.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(leases, ["holder"], "the repair's lease is released, the holder's kept");
        store.release(&held).unwrap();
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
