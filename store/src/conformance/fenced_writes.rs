//! The fenced-writes suite, journal side (contracts 2.3, W1-W6): with the fenced-writes marker
//! declared, put_meta, append and delete carrying a lease commit only when that lease is the live
//! holder of the call's target run, atomically with the check; unleased calls stay plain
//! single-writer calls. Staleness comes from release and re-acquire, never from a clock, except
//! in the W4 shim, which borrows the leasable suite's [`fence_window`]. Every check but W6 skips
//! on a store that does not declare the marker.

use super::leasable::fence_window;
use super::{
    CKPT_REF, Check, CheckResult, FENCED_RUN, MAIN_TTL_MS, OTHER_RUN, OWNER_A, OWNER_B, OWNER_C, OWNER_STABLE, Suite,
    Target, Verdict, ensure, entry, expect_blob, expect_epoch_above, expect_held_by, expect_lease_held, expect_meta,
    expect_ok, expect_run_mismatch, fenced_meta, leases, markers, require_fenced, supersede,
};
use crate::error::StoreError;
use crate::types::Lease;
use crate::types::{RunId, RunStatus};

pub(super) fn checks() -> Vec<Check> {
    vec![
        check("W1", "fenced-meta-stale-rejected", meta_stale_rejected),
        check("W1", "fenced-delete-stale-rejected", delete_stale_rejected),
        check("W2", "fenced-tombstone-zombie-rejected", tombstone_zombie_rejected),
        check("W3", "fenced-run-match", run_match),
        check("W4", "fenced-atomic-meta", atomic_meta),
        check("W4", "fenced-atomic-delete", atomic_delete),
        check("W4", "fenced-atomic-blob-put", atomic_blob_put),
        check("W4", "fenced-atomic-blob-delete", atomic_blob_delete),
        check("W5", "fenced-unleased-passthrough", unleased_passthrough),
        check("W6", "fenced-marker-declared", marker_declared),
        check("W7", "fenced-forged-owner-rejected", forged_owner_rejected),
    ]
}

fn check(id: &'static str, name: &'static str, run: fn(&dyn Target) -> CheckResult) -> Check {
    Check { id, name, suite: Suite::FencedWrites, run }
}

/// W1, the exact RFC-F1 shape: a writes {running, 2}, is superseded, the successor writes
/// {running, 3}, and a's stale terminal {cancelled, 2} is refused and leaves {running, 3}.
fn meta_stale_rejected(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let stale = la.acquire(&run, OWNER_A)?;
    expect_ok("put_meta by the live holder", a.put_meta(&fenced_meta(RunStatus::Running, 2), Some(&stale)))?;
    let next = supersede(la, &stale, lb)?;
    let successor = fenced_meta(RunStatus::Running, 3);
    expect_ok("put_meta by the successor", b.put_meta(&successor, Some(&next)))?;
    expect_lease_held(
        "stale put_meta {cancelled, segments 2} after the takeover",
        a.put_meta(&fenced_meta(RunStatus::Cancelled, 2), Some(&stale)),
    )?;
    expect_meta(&*b, &run, Some(&successor), "after the stale put_meta")
}

/// W1 and D4: a stale delete is refused and journal, meta and the successor's lease survive;
/// the live holder's delete then removes journal and meta.
fn delete_stale_rejected(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let stale = la.acquire(&run, OWNER_A)?;
    expect_ok("append by the live holder", a.append(&run, &entry(1, "holder-a"), Some(&stale)))?;
    expect_ok("put_meta by the live holder", a.put_meta(&fenced_meta(RunStatus::Running, 1), Some(&stale)))?;
    let next = supersede(la, &stale, lb)?;
    let successor = fenced_meta(RunStatus::Running, 2);
    expect_ok("append by the successor", b.append(&run, &entry(2, "holder-b"), Some(&next)))?;
    expect_ok("put_meta by the successor", b.put_meta(&successor, Some(&next)))?;

    expect_lease_held("stale delete after the takeover", a.delete(&run, Some(&stale)))?;
    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["holder-a", "holder-b"],
        "journal after the stale delete: expected [holder-a, holder-b], got {:?} run={run}",
        markers(&seen)
    );
    expect_meta(&*b, &run, Some(&successor), "after the stale delete")?;
    expect_held_by("third acquire after the stale delete", la.acquire(&run, OWNER_C), OWNER_B, next.epoch)?;

    expect_ok("delete by the live holder", b.delete(&run, Some(&next)))?;
    let seen = a.load(&run)?;
    ensure!(seen.is_empty(), "journal after the live delete: expected [], got {:?} run={run}", markers(&seen));
    expect_meta(&*a, &run, None, "after the live delete")
}

/// W2 and D7: after a delete and a recreate by the same stable owner, the old incarnation's lease
/// (the zombie) can neither put_meta nor delete; the recreated run keeps its meta and its one entry.
fn tombstone_zombie_rejected(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let (la, lb) = (leases(&*a)?, leases(&*b)?);
    let run = RunId::from(FENCED_RUN);
    let zombie = la.acquire(&run, OWNER_STABLE)?;
    expect_ok("append by the first incarnation", a.append(&run, &entry(1, "incarnation-1"), Some(&zombie)))?;
    expect_ok("put_meta by the first incarnation", a.put_meta(&fenced_meta(RunStatus::Running, 1), Some(&zombie)))?;
    la.release(&zombie)?;
    b.delete(&run, None)?;

    let reborn = lb.acquire(&run, OWNER_STABLE)?;
    let mut recreated = fenced_meta(RunStatus::Running, 1);
    recreated.genesis = Some("incarnation-2".to_owned());
    expect_ok("append by the new incarnation", b.append(&run, &entry(1, "incarnation-2"), Some(&reborn)))?;
    expect_ok("put_meta by the new incarnation", b.put_meta(&recreated, Some(&reborn)))?;

    expect_lease_held(
        "zombie put_meta after delete and recreate",
        a.put_meta(&fenced_meta(RunStatus::Cancelled, 1), Some(&zombie)),
    )?;
    expect_lease_held("zombie delete after delete and recreate", a.delete(&run, Some(&zombie)))?;
    expect_meta(&*b, &run, Some(&recreated), "of the recreated run after the zombie writes")?;
    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["incarnation-2"],
        "journal of the recreated run after the zombie writes: expected [incarnation-2], got {:?} run={run}",
        markers(&seen)
    );
    expect_epoch_above("re-acquire after delete by the same owner", &reborn, &zombie)?;
    Ok(())
}

/// W3 and D8: a live lease on fenced-other-run guards nothing of fenced-run. put_meta, append and
/// delete all fail with a run mismatch and nothing changes; the lease still guards its own run.
fn run_match(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let la = leases(&*a)?;
    let (run, other) = (RunId::from(FENCED_RUN), RunId::from(OTHER_RUN));
    let foreign = la.acquire(&other, OWNER_A)?;
    let owned = fenced_meta(RunStatus::Running, 1);
    b.append(&run, &entry(1, "owner"), None)?;
    b.put_meta(&owned, None)?;

    let what = |op: &str| format!("{op} of {run} with a live lease on {other}");
    let cancelled = fenced_meta(RunStatus::Cancelled, 9);
    expect_run_mismatch(&what("put_meta"), a.put_meta(&cancelled, Some(&foreign)), &run)?;
    expect_run_mismatch(&what("append"), a.append(&run, &entry(2, "cross-run"), Some(&foreign)), &run)?;
    expect_run_mismatch(&what("delete"), a.delete(&run, Some(&foreign)), &run)?;
    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["owner"],
        "journal after cross-run writes: expected [owner], got {:?} run={run}",
        markers(&seen)
    );
    expect_meta(&*b, &run, Some(&owned), "after cross-run writes")?;
    expect_ok("append to the lease's own run", a.append(&other, &entry(1, "own-run"), Some(&foreign)))?;
    Ok(())
}

/// W4, put_meta: the meta written inside the window commits before the takeover, and the
/// superseded lease writes no more.
fn atomic_meta(t: &dyn Target) -> CheckResult {
    let in_window = fenced_meta(RunStatus::Running, 1);
    fence_window(
        t,
        "put_meta",
        |_, _| Ok(()),
        |a, lease| a.put_meta(&in_window, Some(lease)),
        |w| {
            expect_meta(w.c, &w.run, Some(&in_window), "committed inside the window")?;
            let successor = fenced_meta(RunStatus::Running, 2);
            expect_ok("put_meta by the successor", w.c.put_meta(&successor, Some(&w.next)))?;
            let stale = fenced_meta(RunStatus::Cancelled, 1);
            expect_lease_held("put_meta with the superseded lease", w.a.put_meta(&stale, Some(&w.stale)))?;
            expect_meta(w.c, &w.run, Some(&successor), "after the stale put_meta")
        },
    )
}

/// W4, delete: the delete inside the window commits before the takeover (so the successor
/// starts an empty run), and the superseded lease deletes nothing of the successor's.
fn atomic_delete(t: &dyn Target) -> CheckResult {
    fence_window(
        t,
        "delete",
        |a, lease| {
            expect_ok("append by the live holder", a.append(&lease.run, &entry(1, "doomed"), Some(lease)))?;
            expect_ok("put_meta by the live holder", a.put_meta(&fenced_meta(RunStatus::Running, 1), Some(lease)))?;
            Ok(())
        },
        |a, lease| a.delete(&lease.run, Some(lease)),
        |w| {
            let seen = w.c.load(&w.run)?;
            ensure!(
                seen.is_empty(),
                "journal after the delete inside the window: expected [], got {:?} run={}",
                markers(&seen),
                w.run
            );
            expect_meta(w.c, &w.run, None, "after the delete inside the window")?;
            let successor = fenced_meta(RunStatus::Running, 2);
            expect_ok("append by the successor", w.c.append(&w.run, &entry(1, "successor"), Some(&w.next)))?;
            expect_ok("put_meta by the successor", w.c.put_meta(&successor, Some(&w.next)))?;
            expect_lease_held("delete with the superseded lease", w.a.delete(&w.run, Some(&w.stale)))?;
            let seen = w.c.load(&w.run)?;
            ensure!(
                markers(&seen) == ["successor"],
                "journal after the stale delete: expected [successor], got {:?} run={}",
                markers(&seen),
                w.run
            );
            expect_meta(w.c, &w.run, Some(&successor), "after the stale delete")
        },
    )
}

/// W4 and RFC-F2, blob put: the checkpoint saved inside the window commits before the takeover,
/// and the superseded lease cannot overwrite the successor's checkpoint.
fn atomic_blob_put(t: &dyn Target) -> CheckResult {
    fence_window(
        t,
        "blob put",
        |_, _| Ok(()),
        |a, lease| a.put_blob(CKPT_REF, &[1, 1, 42], Some(lease)),
        |w| {
            expect_blob(w.c, CKPT_REF, Some(&[1, 1, 42]), "saved inside the window")?;
            expect_ok("blob put by the successor", w.c.put_blob(CKPT_REF, &[1, 3, 42], Some(&w.next)))?;
            expect_lease_held(
                "blob put with the superseded lease",
                w.a.put_blob(CKPT_REF, &[1, 2, 42], Some(&w.stale)),
            )?;
            expect_blob(w.c, CKPT_REF, Some(&[1, 3, 42]), "after the stale put")
        },
    )
}

/// W4, blob delete: the delete inside the window commits before the takeover, and the
/// superseded lease cannot delete the successor's checkpoint.
fn atomic_blob_delete(t: &dyn Target) -> CheckResult {
    fence_window(
        t,
        "blob delete",
        |a, lease| expect_ok("blob put by the live holder", a.put_blob(CKPT_REF, &[1, 1, 42], Some(lease))),
        |a, lease| a.delete_blob(CKPT_REF, Some(lease)),
        |w| {
            expect_blob(w.c, CKPT_REF, None, "deleted inside the window")?;
            expect_ok("blob put by the successor", w.c.put_blob(CKPT_REF, &[1, 3, 42], Some(&w.next)))?;
            expect_lease_held("blob delete with the superseded lease", w.a.delete_blob(CKPT_REF, Some(&w.stale)))?;
            expect_blob(w.c, CKPT_REF, Some(&[1, 3, 42]), "after the stale delete")
        },
    )
}

/// W5: while some lease is live on the run, unleased append, put_meta and delete behave as on a
/// plain journal store; the unleased delete removes the lease row too.
fn unleased_passthrough(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let lb = leases(&*b)?;
    let run = RunId::from(FENCED_RUN);
    let held = lb.acquire(&run, OWNER_B)?;

    for seq in 1..=2 {
        expect_ok("unleased append while a lease is live", a.append(&run, &entry(seq, "unleased"), None))?;
    }
    expect_ok("unleased put_meta while a lease is live", a.put_meta(&fenced_meta(RunStatus::Running, 1), None))?;
    let replaced = fenced_meta(RunStatus::Suspended, 2);
    expect_ok("unleased put_meta replacing the record", a.put_meta(&replaced, None))?;
    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["unleased", "unleased"],
        "journal after unleased appends: expected 2 entries, got {:?} run={run}",
        markers(&seen)
    );
    expect_meta(&*b, &run, Some(&replaced), "after unleased put_meta")?;

    expect_ok("unleased delete while a lease is live", a.delete(&run, None))?;
    let seen = b.load(&run)?;
    ensure!(seen.is_empty(), "journal after the unleased delete: expected [], got {:?} run={run}", markers(&seen));
    expect_meta(&*b, &run, None, "after the unleased delete")?;
    let next = expect_ok("acquire right after the unleased delete", lb.acquire(&run, OWNER_C))?;
    expect_epoch_above("acquire after the unleased delete", &next, &held)?;
    Ok(())
}

/// W6: the marker is a promise, declared and never inferred. A store declaring it declares it on
/// both sides, has leases and passes assert_fenced_writes; a store without it fails that assert
/// with a config error, and the fenced suites do not apply to it.
fn marker_declared(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b) = (fx.connect()?, fx.connect()?);
    let (journal, transcripts) = (a.fenced_writes(), a.fenced_blob_writes());
    if !journal && !transcripts {
        let refusal = a.assert_fenced_writes();
        ensure!(
            matches!(refusal, Err(StoreError::Config(_))),
            "assert_fenced_writes on a store without the marker: expected a config error, got {refusal:?}"
        );
        return Err(Verdict::Skip("store declares no fenced writes; the fenced suites do not apply".to_owned()));
    }
    ensure!(
        journal && transcripts,
        "fenced-writes marker half declared: expected journal and transcripts, got journal={journal} transcripts={transcripts}"
    );
    ensure!(a.leases().is_some(), "store declares fenced writes: expected a lease capability, got none");
    if let Err(e) = a.assert_fenced_writes() {
        return Err(Verdict::Fail(format!(
            "assert_fenced_writes on a store declaring the marker: expected ok, got {} ({e})",
            e.code()
        )));
    }
    ensure!(
        b.fenced_writes() && b.fenced_blob_writes(),
        "fenced-writes marker differs between connections: expected both sides on every connection, got journal={} transcripts={}",
        b.fenced_writes(),
        b.fenced_blob_writes()
    );
    Ok(())
}

/// W7: a lease naming the live epoch under another owner's name (a forgery, or a stale holder
/// whose epoch was reissued) is refused with `LeaseHeld` on every fenced surface: put_meta,
/// delete, put_blob, delete_blob, renew, release and append. Nothing changes: the journal, the
/// meta and the blob keep their contents, and the holder's row keeps its expiry (not extended by
/// the forged renew, not removed by the forged release or delete).
fn forged_owner_rejected(t: &dyn Target) -> CheckResult {
    let fx = t.fresh(MAIN_TTL_MS)?;
    let (a, b, c) = (fx.connect()?, fx.connect()?, fx.connect()?);
    require_fenced(&*a)?;
    let (la, lb, lc) = (leases(&*a)?, leases(&*b)?, leases(&*c)?);
    let run = RunId::from(FENCED_RUN);
    let live = lb.acquire(&run, OWNER_B)?;
    let meta = fenced_meta(RunStatus::Running, 1);
    expect_ok("put_meta by the live holder", b.put_meta(&meta, Some(&live)))?;
    expect_ok("append by the live holder", b.append(&run, &entry(1, "holder"), Some(&live)))?;
    expect_ok("checkpoint save by the live holder", b.put_blob(CKPT_REF, b"holder", Some(&live)))?;

    let forged = Lease { owner: OWNER_C.to_owned(), ..live.clone() };
    expect_lease_held(
        "put_meta by a forged owner at the live epoch",
        a.put_meta(&fenced_meta(RunStatus::Cancelled, 1), Some(&forged)),
    )?;
    expect_lease_held(
        "checkpoint save by a forged owner at the live epoch",
        a.put_blob(CKPT_REF, b"forged", Some(&forged)),
    )?;
    expect_lease_held("checkpoint delete by a forged owner at the live epoch", a.delete_blob(CKPT_REF, Some(&forged)))?;
    expect_lease_held(
        "append by a forged owner at the live epoch",
        a.append(&run, &entry(2, "forged"), Some(&forged)),
    )?;
    expect_lease_held("delete by a forged owner at the live epoch", a.delete(&run, Some(&forged)))?;
    fx.clock().advance(1_000);
    expect_lease_held("renew by a forged owner at the live epoch", la.renew(&forged))?;
    expect_lease_held("release by a forged owner at the live epoch", la.release(&forged))?;

    expect_meta(&*b, &run, Some(&meta), "after the forged writes")?;
    expect_blob(&*b, CKPT_REF, Some(b"holder"), "after the forged writes")?;
    let seen = b.load(&run)?;
    ensure!(
        markers(&seen) == ["holder"],
        "journal after the forged writes: expected [holder], got {:?} run={run}",
        markers(&seen)
    );
    // The holder's row is intact and not extended: held a millisecond before its own expiry,
    // free at it.
    fx.clock().advance(i64::from(MAIN_TTL_MS) - 1_000 - 1);
    expect_held_by("acquire before the holder's expiry", lc.acquire(&run, OWNER_A), OWNER_B, live.epoch)?;
    fx.clock().advance(1);
    let next = expect_ok(
        "acquire at the holder's own expiry (the forged renew did not extend it)",
        lc.acquire(&run, OWNER_A),
    )?;
    expect_epoch_above("acquire after the forged calls", &next, &live)?;
    Ok(())
}
